/* spmvctl.c — the spmvd command-line client, a thin shell over libspmvclient.
 *
 * One subcommand per library call: upload, ls, info, rm, spmv, spmspm, bench, job,
 * kernels, health; vec (create, get, put, rm, ls) for resident vectors, ops
 * for a JSON list of batched steps, solve for the daemon's Krylov solvers,
 * shm (register, list, rm) for shared-memory regions, study for a
 * collection study of a folder of matrices (spmvctl_study.c). Output is a human table by default and the server's JSON
 * with --json (so `spmvctl --json upload m.mtx | jq -r .id` works in
 * scripts). Exit codes are part of the interface and listed in usage():
 * scripts tell "the server said no" from "the server is not there".
 * Progress bars (uploads, benchmark jobs) go to stderr and only to a
 * terminal. The daemon's address: --url, else the library's default
 * ($SPMVD_URL, else $SPMV_URL, else http://127.0.0.1:8080).
 */
#include "spmvclient.h"
#include "spmvctl_study.h"

#include <jansson.h>

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum exit_code {
    EXIT_OK = 0,
    EXIT_USAGE = 1,       /* bad command line */
    EXIT_REFUSED = 2,     /* the server answered 4xx (unknown id, bad matrix, ...) */
    EXIT_UNREACHABLE = 3, /* no answer: connection refused, timeout, TLS */
    EXIT_SERVER = 4,      /* the server answered 5xx, or a job failed */
    EXIT_PROTOCOL = 5,    /* the answer made no sense */
    EXIT_LOCAL = 6,       /* a local file could not be read or written, memory */
    EXIT_SOLVE = 7,       /* solve: the answer came, but it did not converge */
};

typedef struct ctl {
    const char *url;
    const char *token_file;
    const char *ca_file;
    bool insecure, json;
    long timeout_ms;
    /* subcommand options */
    const char *name, *dtype, *formats, *device, *kernel, *x_file, *y_out, *kernels;
    int hack_size, runs, warmup;
    bool verify, no_wait, store;
    const char *c_out;
    const char *stat;           /* --stat: the statistic of spmv's and bench's rates (NULL: the daemon's median) */
    /* vec, ops, solve */
    const char *like, *side, *values_file, *out_file, *method, *precond;
    const char *b_file, *b_vector, *x0_file, *x0_vector, *x_out, *x_vector;
    long k, n, maxit, restart;
    long per_row, dense_len;    /* generate: set (>= 0) or the daemon's default (0 after ctl c = {0}: see has_*) */
    bool has_per_row, has_dense_len;
    double fill, tol;
    uint64_t seed;
    bool has_fill, random, async, history, cancel, json_request;
    /* shm: a region's window, and spmv operands in regions */
    uint64_t shm_offset, shm_size;
    bool has_shm_size;
    const char *x_shm, *y_shm, *b_shm; /* b_shm: a solve's b in a region (x_shm: its x then) */
    const char *params[32];
    int nparams;
    /* study */
    const char *dtypes, *from, *spmspm, *threads;
    long long max_nnz;
    bool plot;
    unsigned char seen[128];    /* the long options given (index: OPT_* - 256), for commands that check */
    int argc;
    char **argv;                /* the whole command line, for study's report */
    spmv_client *h;
} ctl;

/* ------------------------------------------------------------------ usage */

static const char usage_text[] =
    "usage: spmvctl [global options] COMMAND [options] [ARGS]\n"
    "\n"
    "Commands:\n"
    "  upload FILE            upload a Matrix Market file (.mtx or .mtx.gz)\n"
    "  generate KIND --n N    have the daemon build a matrix by formula (band, poisson2d, ...)\n"
    "  ls                     list stored matrices\n"
    "  info [ID]              describe matrix ID, or the server without ID\n"
    "  rm ID...               delete matrices\n"
    "  spmv ID --x FILE       y = A*x with one kernel\n"
    "  spmspm A B             C = A*B of two stored matrices (B thin)\n"
    "  bench ID               benchmark kernels on matrix ID (a job)\n"
    "  job JOB_ID             show a job\n"
    "  kernels                list the kernel catalogue\n"
    "  vec create|get|put|rm|ls  resident vectors\n"
    "  ops FILE|-             run a JSON list of steps on resident vectors\n"
    "  solve ID               solve A x = b on the daemon (cg, bicgstab, gmres)\n"
    "  shm register|list|rm   shared-memory regions (x and y without the HTTP body)\n"
    "  study DIR              a collection study: every matrix of DIR, every kernel, a report\n"
    "  health                 check that the daemon answers\n"
    "\n"
    "Global options (anywhere on the line):\n"
    "  --url URL              daemon address (default $SPMVD_URL, else $SPMV_URL, else\n"
    "                         http://127.0.0.1:8080)\n"
    "  --token-file FILE      bearer token read from FILE (default $SPMV_TOKEN)\n"
    "  --ca-file FILE         CA bundle for https; --insecure skips verification\n"
    "  --timeout SECONDS      limit for each request (default none)\n"
    "  --json                 print the server's JSON instead of tables\n"
    "  -h, --help             this text; COMMAND --help for a command's options\n"
    "\n"
    "Exit status: 0 success, 1 usage error, 2 the server refused the request\n"
    "(4xx: unknown id, bad matrix, bad kernel), 3 the server could not be reached\n"
    "or timed out, 4 server error (5xx, busy, job failed), 5 malformed answer,\n"
    "6 local error (file unreadable or unwritable, wrong vector length), 7 a solve\n"
    "that did not converge (maxit, breakdown, cancelled; the answer is printed).\n";

typedef struct command {
    const char *name;
    int (*run)(ctl *c, int argc, char **argv);
    const char *help;
} command;

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "spmvctl: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'spmvctl --help'.\n");
    return EXIT_USAGE;
}

/* --------------------------------------------------------------- statuses */

static int exit_for(spmv_client_status st)
{
    if (st == SPMV_CLIENT_OK) return EXIT_OK;
    if (spmv_client_status_is_client_error(st)) return EXIT_REFUSED;
    if (spmv_client_status_is_server_error(st) || st == SPMV_CLIENT_ERR_JOB_FAILED) return EXIT_SERVER;
    switch (st) {
    case SPMV_CLIENT_ERR_UNREACHABLE:
    case SPMV_CLIENT_ERR_TIMEOUT:
    case SPMV_CLIENT_ERR_TRANSPORT: return EXIT_UNREACHABLE;
    case SPMV_CLIENT_ERR_PROTOCOL: return EXIT_PROTOCOL;
    case SPMV_CLIENT_ERR_INVALID: return EXIT_USAGE;
    default: return EXIT_LOCAL;
    }
}

int spmvctl_exit_for(spmv_client_status st) { return exit_for(st); }

/* Prints "spmvctl: what: <strerror>: <server message> [code]" and maps the
 * status to the exit code. */
static int report(const ctl *c, const char *what, spmv_client_status st)
{
    const char *msg = spmv_client_errmsg(c->h), *code = spmv_client_errcode(c->h);
    fprintf(stderr, "spmvctl: %s: %s", what, spmv_client_strerror(st));
    if (msg && *msg) fprintf(stderr, ": %s", msg);
    if (code && *code) fprintf(stderr, " [%s]", code);
    if (spmv_client_retry_after(c->h) > 0) fprintf(stderr, " (retry after %ld s)", spmv_client_retry_after(c->h));
    fputc('\n', stderr);
    return exit_for(st);
}

/* --------------------------------------------------------------- progress */

/* A bar on stderr; `drawn` tells progress_end whether a line needs ending. */
typedef struct bar {
    const char *label;
    bool drawn;
    int last_pct;
} bar;

static int progress_bar(void *user, uint64_t done, uint64_t total)
{
    bar *b = user;
    if (total == 0)
        return 0;
    int pct = (int)(done * 100 / total), width = 40, fill = pct * width / 100;
    if (b->drawn && pct == b->last_pct)
        return 0;
    b->last_pct = pct;
    fprintf(stderr, "\r%-8s [%.*s%*s] %3d%%", b->label, fill, "########################################",
            width - fill, "", pct);
    fflush(stderr);
    b->drawn = true;
    return 0;
}

static void progress_end(const bar *b)
{
    if (b->drawn)
        fputc('\n', stderr);
}

/* --------------------------------------------------------------- printing */

static void print_json_text(const char *text)
{
    json_t *v = json_loads(text ? text : "null", JSON_DECODE_ANY, NULL);
    char *pretty = v ? json_dumps(v, JSON_INDENT(2) | JSON_ENCODE_ANY) : NULL;
    puts(pretty ? pretty : text ? text : "null");
    free(pretty);
    json_decref(v);
}

/* An answer this client built, indented, then released ("{}" when it
 * could not be built). */
static void print_json_object(json_t *o)
{
    char *text = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
    puts(text ? text : "{}");
    free(text);
    json_decref(o);
}

/* JSON has no NaN: a number that is not finite is written as null. */
static json_t *json_finite(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static const char *dtype_name(spmv_client_dtype d)
{
    return d == SPMV_CLIENT_FLOAT32 ? "float32" : "float64";
}

static void format_list(const spmv_client_matrix *m, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < m->nformats && len < cap; i++) {
        bool seen = false; /* a format held on host and device is listed once */
        for (size_t j = 0; j < i && !seen; j++)
            seen = strcmp(m->formats[j].name, m->formats[i].name) == 0;
        if (!seen)
            len += (size_t)snprintf(buf + len, cap - len, "%s%s", len ? "," : "", m->formats[i].name);
    }
}

static void print_matrix_row_header(void)
{
    printf("%-36s  %-20s %9s %9s %11s  %-7s  %-6s  %s\n", "ID", "NAME", "ROWS", "COLS", "NNZ", "DTYPE", "DEVICE",
           "FORMATS");
}

static void print_matrix_row(const spmv_client_matrix *m)
{
    char fmts[128];
    format_list(m, fmts, sizeof fmts);
    printf("%-36s  %-20.20s %9" PRId64 " %9" PRId64 " %11" PRId64 "  %-7s  %-6s  %s\n", m->id, m->name, m->rows,
           m->cols, m->nnz, dtype_name(m->dtype), m->device, fmts);
}

static void print_ms(const char *label, double v)
{
    if (!isnan(v))
        printf("%-12s %.3f ms\n", label, v);
}

static void print_matrix(const spmv_client_matrix *m)
{
    printf("%-12s %s\n%-12s %s\n", "id", m->id, "name", m->name);
    printf("%-12s %" PRId64 " x %" PRId64 ", %" PRId64 " non-zeros\n", "shape", m->rows, m->cols, m->nnz);
    printf("%-12s %s\n", "dtype", dtype_name(m->dtype));
    if (*m->symmetry) printf("%-12s %s\n", "symmetry", m->symmetry);
    if (*m->device) printf("%-12s %s\n", "device", m->device);
    print_ms("parse", m->parse_ms);
    print_ms("transfer", m->transfer_ms);
    print_ms("convert", m->convert_ms);
    if (m->nformats) {
        printf("\n%-8s %-8s %14s %9s\n", "FORMAT", "WHERE", "BYTES", "PADDING");
        for (size_t i = 0; i < m->nformats; i++)
            printf("%-8s %-8s %14" PRIu64 " %9.3f\n", m->formats[i].name, m->formats[i].device, m->formats[i].bytes,
                   m->formats[i].padding);
    }
}

/* A matrix's descriptor: the server's JSON, or a table; then released. */
static int show_matrix(const ctl *c, spmv_client_matrix *m)
{
    if (c->json) print_json_text(m->json);
    else print_matrix(m);
    spmv_client_matrix_free(m);
    return EXIT_OK;
}

/* ------------------------------------------------------------ subcommands */

static int cmd_health(ctl *c, int argc, char **argv)
{
    (void)argv;
    if (argc > 0) return usage_error("health takes no arguments%s", "");
    char *json = NULL;
    spmv_client_status st = spmv_client_health(c->h, &json);
    if (st != SPMV_CLIENT_OK) return report(c, "health", st);
    if (c->json) print_json_text(json);
    else printf("ok\n");
    spmv_client_string_free(json);
    return EXIT_OK;
}

static int cmd_kernels(ctl *c, int argc, char **argv)
{
    (void)argv;
    if (argc > 0) return usage_error("kernels takes no arguments%s", "");
    spmv_client_kernel_list *l;
    spmv_client_status st = spmv_client_kernels(c->h, &l);
    if (st != SPMV_CLIENT_OK) return report(c, "kernels", st);
    if (c->json) {
        print_json_text(l->json);
    } else {
        printf("%-24s %-9s %s\n", "KERNEL", "AVAILABLE", "REASON");
        for (size_t i = 0; i < l->count; i++)
            printf("%-24s %-9s %s\n", l->items[i].name, l->items[i].available ? "yes" : "no",
                   l->items[i].reason ? l->items[i].reason : "");
    }
    spmv_client_kernel_list_free(l);
    return EXIT_OK;
}

static int cmd_ls(ctl *c, int argc, char **argv)
{
    (void)argv;
    if (argc > 0) return usage_error("ls takes no arguments%s", "");
    spmv_client_matrix_list *l;
    spmv_client_status st = spmv_client_list(c->h, &l);
    if (st != SPMV_CLIENT_OK) return report(c, "ls", st);
    if (c->json) {
        print_json_text(l->json);
    } else {
        print_matrix_row_header();
        for (size_t i = 0; i < l->count; i++)
            print_matrix_row(&l->items[i]);
    }
    spmv_client_matrix_list_free(l);
    return EXIT_OK;
}

static int cmd_info(ctl *c, int argc, char **argv)
{
    spmv_client_status st;
    if (argc > 1) return usage_error("info takes at most one matrix id%s", "");
    if (argc == 0) {
        char *json = NULL;
        if ((st = spmv_client_info(c->h, &json)) != SPMV_CLIENT_OK) return report(c, "info", st);
        print_json_text(json); /* the server's info is nested: JSON is its best table */
        spmv_client_string_free(json);
        return EXIT_OK;
    }
    spmv_client_matrix *m;
    if ((st = spmv_client_describe(c->h, argv[0], &m)) != SPMV_CLIENT_OK) return report(c, argv[0], st);
    return show_matrix(c, m);
}

/* rm, vec rm and shm rm: `drop` each name, saying `done` of each; the exit
 * code of the last refusal. */
static int drop_each(ctl *c, int argc, char **argv, spmv_client_status (*drop)(spmv_client *, const char *),
                     const char *done)
{
    int rc = EXIT_OK;
    for (int i = 0; i < argc; i++) {
        spmv_client_status st = drop(c->h, argv[i]);
        if (st != SPMV_CLIENT_OK)
            rc = report(c, argv[i], st);
        else if (!c->json)
            printf("%s %s\n", done, argv[i]);
    }
    return rc;
}

static int cmd_rm(ctl *c, int argc, char **argv)
{
    if (argc == 0) return usage_error("rm needs a matrix id%s", "");
    return drop_each(c, argc, argv, spmv_client_delete, "deleted");
}

static int cmd_upload(ctl *c, int argc, char **argv)
{
    if (argc != 1) return usage_error("upload needs exactly one file%s", "");
    bar b = {.label = "upload"};
    spmv_client_upload_options o = {.name = c->name, .dtype = c->dtype, .formats = c->formats,
                                    .device = c->device, .hack_size = c->hack_size,
                                    .progress = isatty(STDERR_FILENO) ? progress_bar : NULL, .progress_user = &b};
    spmv_client_matrix *m;
    spmv_client_status st = spmv_client_upload_file(c->h, argv[0], &o, &m);
    progress_end(&b);
    if (st != SPMV_CLIENT_OK) return report(c, argv[0], st);
    return show_matrix(c, m);
}

static int cmd_generate(ctl *c, int argc, char **argv)
{
    if (argc != 1) return usage_error("generate needs exactly one generator name%s", "");
    if (!c->n) return usage_error("generate needs --n (grid side or rows)%s", "");
    spmv_client_upload_options o = {.name = c->name, .dtype = c->dtype, .formats = c->formats,
                                    .device = c->device, .hack_size = c->hack_size};
    spmv_client_matrix *m;
    spmv_client_status st = spmv_client_generate(c->h, argv[0], c->n, c->has_per_row ? c->per_row : -1,
                                                 c->has_dense_len ? c->dense_len : -1, c->seed, &o, &m);
    if (st != SPMV_CLIENT_OK) return report(c, argv[0], st);
    return show_matrix(c, m);
}

/* ---------------------------------------------------------------- vectors */

/* Vectors on the command line are files of numbers separated by white
 * space ("-": stdin or stdout), in float64: x and y of spmv, b, x0 and x
 * of solve, the values of a resident vector (column after column when it
 * holds k > 1). */

#define ANY_COUNT SIZE_MAX /* read_values: as many values as the file holds, at least one */

/* Reads the numbers of `path` into a fresh array of *count values. `want`
 * is how many there must be (`what` names whose size that is: "columns"
 * of the matrix), or ANY_COUNT. */
static int read_values(const char *path, size_t want, const char *what, double **out, size_t *count)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    size_t n = 0, cap = 0;
    double *v = NULL;
    char tok[128];
    int rc = EXIT_LOCAL;

    *out = NULL;
    *count = 0;
    if (!f) {
        fprintf(stderr, "spmvctl: %s: %s\n", path, strerror(errno));
        return EXIT_LOCAL;
    }
    while (fscanf(f, "%127s", tok) == 1) {
        char *end;
        double d = strtod(tok, &end);
        if (*end || end == tok) {
            fprintf(stderr, "spmvctl: %s: value %zu is not a number: %s\n", path, n + 1, tok);
            goto done;
        }
        if (n == want) {
            fprintf(stderr, "spmvctl: %s: more than the %zu values the matrix has %s\n", path, want, what);
            goto done;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 1024;
            double *p = cap < SIZE_MAX / sizeof *v ? realloc(v, cap * sizeof *v) : NULL;
            if (!p) {
                fprintf(stderr, "spmvctl: %s: out of memory after %zu values\n", path, n);
                goto done;
            }
            v = p;
        }
        v[n++] = d;
    }
    if (want == ANY_COUNT && n == 0) {
        fprintf(stderr, "spmvctl: %s: no values\n", path);
        goto done;
    }
    if (want != ANY_COUNT && n != want) {
        fprintf(stderr, "spmvctl: %s: %zu values, the matrix has %zu %s\n", path, n, want, what);
        goto done;
    }
    *out = v ? v : malloc(sizeof *v); /* none wanted and none given: still an array to free */
    *count = n;
    v = NULL;
    rc = *out ? EXIT_OK : EXIT_LOCAL;
done:
    free(v);
    if (f != stdin) fclose(f);
    return rc;
}

/* Writes n rows of k values (v holds them column after column), one row a
 * line, 17 significant digits. */
static int write_values(const char *path, const double *v, size_t n, size_t k)
{
    FILE *f = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
    if (!f) {
        fprintf(stderr, "spmvctl: %s: %s\n", path, strerror(errno));
        return EXIT_LOCAL;
    }
    for (size_t i = 0; i < n; i++)
        for (size_t col = 0; col < k; col++) fprintf(f, "%.17g%c", v[col * n + i], col + 1 < k ? ' ' : '\n');
    bool ok = !ferror(f);
    if (f != stdout) ok = fclose(f) == 0 && ok;
    if (!ok) {
        fprintf(stderr, "spmvctl: writing %s failed\n", path);
        return EXIT_LOCAL;
    }
    return EXIT_OK;
}

/* `count` doubles as the vector's dtype: float32 rounds into a copy. */
static const void *as_dtype(spmv_client_dtype d, const double *v, size_t count, float **tmp)
{
    *tmp = NULL;
    if (d == SPMV_CLIENT_FLOAT64)
        return v;
    if (!(*tmp = malloc((count ? count : 1) * sizeof **tmp)))
        return NULL;
    for (size_t i = 0; i < count; i++) (*tmp)[i] = (float)v[i];
    return *tmp;
}

static spmv_client_dtype dtype_of(const char *name)
{
    return name && strcmp(name, "float32") == 0 ? SPMV_CLIENT_FLOAT32 : SPMV_CLIENT_FLOAT64;
}

static void print_vector_header(void)
{
    printf("%-36s %10s %4s  %-7s  %-6s %12s %8s %8s  %s\n", "ID", "N", "K", "DTYPE", "DEVICE", "BYTES", "IDLE_S",
           "TTL_S", "LIKE");
}

static void print_vector_row(const spmv_client_vector *v)
{
    printf("%-36s %10" PRId64 " %4" PRId64 "  %-7s  %-6s %12" PRIu64 " %8.0f %8.0f  %s\n", v->id, v->n, v->k,
           dtype_name(v->dtype), v->device, v->bytes, v->idle_s, v->expires_in_s, v->like);
}

/* The descriptor of vector `id`, from the listing (there is no GET of a
 * descriptor alone: GET /v1/vectors/{id} carries the values). */
static spmv_client_status find_vector(ctl *c, const char *id, spmv_client_vector *out)
{
    spmv_client_vector_list *l;
    spmv_client_status st = spmv_client_vectors(c->h, &l);
    if (st != SPMV_CLIENT_OK)
        return st;
    st = SPMV_CLIENT_ERR_NOT_FOUND;
    for (size_t i = 0; i < l->count; i++) {
        if (strcmp(l->items[i].id, id) == 0) {
            *out = l->items[i];
            out->json = NULL; /* owned by the list */
            st = SPMV_CLIENT_OK;
        }
    }
    spmv_client_vector_list_free(l);
    return st;
}

/* find_vector for the action `what` (vec get, vec put): EXIT_OK, or the
 * exit code once said why not. */
static int find_vector_or_say(ctl *c, const char *id, const char *what, spmv_client_vector *out)
{
    spmv_client_status st = find_vector(c, id, out);
    if (st == SPMV_CLIENT_ERR_NOT_FOUND) {
        fprintf(stderr, "spmvctl: vector %s not found\n", id);
        return EXIT_REFUSED;
    }
    return st == SPMV_CLIENT_OK ? EXIT_OK : report(c, what, st);
}

/* A vector's descriptor: the server's JSON, or a table of one row; then
 * released. */
static int show_vector(const ctl *c, spmv_client_vector *v)
{
    if (c->json) {
        print_json_text(v->json);
    } else {
        print_vector_header();
        print_vector_row(v);
    }
    spmv_client_vector_free(v);
    return EXIT_OK;
}

static int vec_create(ctl *c, int argc, char **argv)
{
    (void)argv;
    spmv_client_vector_options o = {.like = c->like, .side = c->side, .device = c->device, .dtype = c->dtype,
                                    .k = c->k};
    spmv_client_vector *v = NULL;
    spmv_client_status st;
    int sources = (c->values_file != NULL) + c->has_fill + c->random;

    if (argc != 0) return usage_error("vec create takes no arguments, only options%s", "");
    if (sources != 1) return usage_error("vec create needs exactly one of --values FILE, --fill V, --random%s", "");
    if (c->values_file) {
        double *vals;
        size_t count;
        float *tmp;
        int rc = read_values(c->values_file, ANY_COUNT, NULL, &vals, &count);
        if (rc != EXIT_OK) return rc;
        spmv_client_dtype d = dtype_of(c->dtype);
        const void *buf = as_dtype(d, vals, count, &tmp);
        st = buf ? spmv_client_vector_create(c->h, d, buf, count, &o, &v) : SPMV_CLIENT_ERR_NOMEM;
        free(tmp);
        free(vals);
    } else if (c->has_fill) {
        st = spmv_client_vector_fill(c->h, c->n, c->fill, &o, &v);
    } else {
        st = spmv_client_vector_random(c->h, c->n, c->seed, &o, &v);
    }
    if (st != SPMV_CLIENT_OK) return report(c, "vec create", st);
    return show_vector(c, v);
}

static int vec_get(ctl *c, int argc, char **argv)
{
    spmv_client_vector d;
    spmv_client_vector *desc = NULL;
    double *vals = NULL;
    float *vf = NULL;
    int rc;

    if (argc != 1) return usage_error("vec get needs exactly one vector id%s", "");
    if ((rc = find_vector_or_say(c, argv[0], "vec get", &d)) != EXIT_OK) return rc;
    rc = EXIT_LOCAL;
    size_t n = (size_t)d.n, k = (size_t)d.k, count = n * k; /* bounded by the library's parse */
    if (!(vals = malloc((count ? count : 1) * sizeof *vals)) ||
        (d.dtype == SPMV_CLIENT_FLOAT32 && !(vf = malloc((count ? count : 1) * sizeof *vf)))) {
        fprintf(stderr, "spmvctl: out of memory for %zu values\n", count);
        goto done;
    }
    spmv_client_status st =
        spmv_client_vector_read(c->h, argv[0], d.dtype, vf ? (void *)vf : (void *)vals, count, &desc);
    if (st != SPMV_CLIENT_OK) {
        rc = report(c, argv[0], st);
        goto done;
    }
    for (size_t i = 0; vf && i < count; i++) vals[i] = vf[i];
    if (c->json) {
        json_t *o = json_loads(desc->json, 0, NULL), *a = json_array();
        for (size_t col = 0; a && col < k; col++) {
            json_t *cv = k > 1 ? json_array() : a;
            for (size_t i = 0; cv && i < n; i++) json_array_append_new(cv, json_finite(vals[col * n + i]));
            if (k > 1) json_array_append_new(a, cv);
        }
        json_object_set_new(o, "values", a);
        print_json_object(o);
        rc = EXIT_OK;
        goto done;
    }
    rc = write_values(c->out_file ? c->out_file : "-", vals, n, k);
done:
    free(vals);
    free(vf);
    spmv_client_vector_free(desc);
    return rc;
}

static int vec_put(ctl *c, int argc, char **argv)
{
    spmv_client_vector d, *desc = NULL;
    double *vals = NULL;
    size_t count;
    float *tmp = NULL;
    int rc;

    if (argc != 1) return usage_error("vec put needs exactly one vector id%s", "");
    if (!c->values_file) return usage_error("vec put needs --values FILE%s", "");
    if ((rc = find_vector_or_say(c, argv[0], "vec put", &d)) != EXIT_OK) return rc;
    if ((rc = read_values(c->values_file, ANY_COUNT, NULL, &vals, &count)) != EXIT_OK) return rc;
    if ((uint64_t)count != (uint64_t)d.n * (uint64_t)d.k) {
        fprintf(stderr, "spmvctl: %s: %zu values, vector %s holds %" PRId64 " x %" PRId64 "\n", c->values_file, count,
                argv[0], d.n, d.k);
        free(vals);
        return EXIT_LOCAL;
    }
    const void *buf = as_dtype(d.dtype, vals, count, &tmp);
    spmv_client_status st =
        buf ? spmv_client_vector_write(c->h, argv[0], d.dtype, buf, count, &desc) : SPMV_CLIENT_ERR_NOMEM;
    free(tmp);
    free(vals);
    if (st != SPMV_CLIENT_OK) return report(c, argv[0], st);
    return show_vector(c, desc);
}

static int vec_rm(ctl *c, int argc, char **argv)
{
    if (argc == 0) return usage_error("vec rm needs a vector id%s", "");
    return drop_each(c, argc, argv, spmv_client_vector_delete, "deleted");
}

static int vec_ls(ctl *c, int argc, char **argv)
{
    (void)argv;
    if (argc > 0) return usage_error("vec ls takes no arguments%s", "");
    spmv_client_vector_list *l;
    spmv_client_status st = spmv_client_vectors(c->h, &l);
    if (st != SPMV_CLIENT_OK) return report(c, "vec ls", st);
    if (c->json) {
        print_json_text(l->json);
    } else {
        print_vector_header();
        for (size_t i = 0; i < l->count; i++) print_vector_row(&l->items[i]);
    }
    spmv_client_vector_list_free(l);
    return EXIT_OK;
}

static int cmd_vec(ctl *c, int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(ctl *, int, char **);
    } acts[] = {{"create", vec_create}, {"get", vec_get}, {"put", vec_put}, {"rm", vec_rm}, {"ls", vec_ls}};
    if (argc == 0) return usage_error("vec needs an action: create, get, put, rm or ls%s", "");
    for (size_t i = 0; i < sizeof acts / sizeof *acts; i++)
        if (strcmp(argv[0], acts[i].name) == 0) return acts[i].run(c, argc - 1, argv + 1);
    return usage_error("unknown vec action '%s' (create, get, put, rm, ls)", argv[0]);
}

/* ------------------------------------------------------------------- spmv */

/* The lines the reports of spmv and spmspm share: the kernel, its timing
 * (with the multiply-adds when madds >= 0), queue and request, verify. */
static void print_run_text(const char *kernel, const spmv_client_stats *s, const char *stat, int64_t madds,
                           double queue_ms, double request_ms, double max_rel_err)
{
    printf("kernel       %s\n", kernel);
    printf("runs         %d (+%d warm-up)\n", s->runs, s->warmup);
    printf("time         mean %.4f ms, stddev %.4f, min %.4f, median %.4f, max %.4f\n", s->mean_ms, s->stddev_ms,
           s->min_ms, s->median_ms, s->max_ms);
    if (madds >= 0)
        printf("throughput   %.3f GFLOP/s (%" PRId64 " multiply-adds), %.3f GB/s, at the %s time\n", s->gflops, madds,
               s->gbps, stat);
    else
        printf("throughput   %.3f GFLOP/s, %.3f GB/s, at the %s time\n", s->gflops, s->gbps, stat);
    printf("queue        %.3f ms\nrequest      %.3f ms (client side, whole exchange)\n", queue_ms, request_ms);
    if (!isnan(max_rel_err)) printf("verify       max relative error %.3g\n", max_rel_err);
}

static void print_spmv_result(const ctl *c, const spmv_client_spmv_result *r, size_t n, double norm)
{
    const spmv_client_stats *s = &r->stats;
    if (c->json) {
        json_t *st = json_object(), *o = json_object();
        json_object_set_new(st, "runs", json_integer(s->runs));
        json_object_set_new(st, "warmup", json_integer(s->warmup));
        json_object_set_new(st, "mean_ms", json_finite(s->mean_ms));
        json_object_set_new(st, "stddev_ms", json_finite(s->stddev_ms));
        json_object_set_new(st, "min_ms", json_finite(s->min_ms));
        json_object_set_new(st, "median_ms", json_finite(s->median_ms));
        json_object_set_new(st, "max_ms", json_finite(s->max_ms));
        json_object_set_new(st, "gflops", json_finite(s->gflops));
        json_object_set_new(st, "gbps", json_finite(s->gbps));
        json_object_set_new(st, "stat", json_string(c->stat ? c->stat : "median"));
        json_object_set_new(o, "kernel", json_string(r->kernel));
        json_object_set_new(o, "stats", st);
        json_object_set_new(o, "queue_ms", json_finite(r->queue_ms));
        json_object_set_new(o, "request_ms", json_finite(r->request_ms));
        json_object_set_new(o, "max_rel_err", json_finite(r->max_rel_err));
        json_object_set_new(o, "rows", json_integer((json_int_t)n));
        json_object_set_new(o, "y_norm2", json_finite(norm));
        print_json_object(o);
        return;
    }
    print_run_text(r->kernel, s, c->stat ? c->stat : "median", -1, r->queue_ms, r->request_ms, r->max_rel_err);
    if (!isnan(norm)) printf("y            %zu values, 2-norm %.17g\n", n, norm);
}

/* y of a product in the matrix's dtype (ybuf) widened into y; its 2-norm. */
static double widen_y(spmv_client_dtype d, const void *ybuf, double *y, size_t ny)
{
    double norm = 0;
    for (size_t i = 0; i < ny; i++) {
        y[i] = d == SPMV_CLIENT_FLOAT32 ? (double)((const float *)ybuf)[i] : ((const double *)ybuf)[i];
        norm += y[i] * y[i];
    }
    return sqrt(norm);
}

/* spmv works in float64 on the command line; a float32 matrix gets its x
 * rounded and its y widened here. *norm is y's 2-norm. */
static int run_spmv(ctl *c, const spmv_client_matrix *m, const double *x, double *y, spmv_client_spmv_result *res,
                    double *norm)
{
    spmv_client_spmv_options o = {.kernel = c->kernel, .runs = c->runs, .warmup = c->warmup,
                                  .verify = c->verify, .params = c->params};
    size_t nx = (size_t)m->cols, ny = (size_t)m->rows;
    float *xf, *yf = NULL;
    const void *xbuf = as_dtype(m->dtype, x, nx, &xf);
    void *ybuf = m->dtype == SPMV_CLIENT_FLOAT64 ? (void *)y : (void *)(yf = malloc((ny ? ny : 1) * sizeof *yf));
    if (!xbuf || !ybuf) {
        free(xf), free(yf);
        fprintf(stderr, "spmvctl: out of memory\n");
        return EXIT_LOCAL;
    }
    spmv_client_status st = spmv_client_multiply(c->h, m->id, m->dtype, xbuf, nx, ybuf, ny, &o, res);
    if (st == SPMV_CLIENT_OK)
        *norm = widen_y(m->dtype, ybuf, y, ny);
    free(xf), free(yf);
    return st == SPMV_CLIENT_OK ? EXIT_OK : report(c, "spmv", st);
}

/* "NAME" or "NAME:OFFSET" (a region name holds no ':'). */
static bool parse_shm_ref(const char *arg, char *name, size_t cap, uint64_t *offset)
{
    const char *colon = strrchr(arg, ':');
    size_t len = colon ? (size_t)(colon - arg) : strlen(arg);
    *offset = 0;
    if (len == 0 || len >= cap)
        return false;
    memcpy(name, arg, len);
    name[len] = '\0';
    if (colon) {
        char *end;
        errno = 0;
        if (!colon[1] || colon[1] == '-') return false;
        *offset = strtoull(colon + 1, &end, 10);
        if (errno || *end) return false;
    }
    return true;
}

static void print_shm_operand(const char *what, const spmv_client_shm_ref *r)
{
    if (r) printf("%-12s in region %s at byte %" PRIu64 "\n", what, r->name, r->offset);
}

/* spmv with x and/or y in shared-memory regions: x from a region or --x
 * FILE, y into a region or back here (--y-out, the norm). */
static int spmv_shm(ctl *c, const spmv_client_matrix *m)
{
    char xname[256], yname[256];
    spmv_client_shm_ref xr = {0}, yr = {0};
    spmv_client_operands a = {.dtype = m->dtype};
    spmv_client_spmv_options o = {.kernel = c->kernel, .runs = c->runs, .warmup = c->warmup,
                                  .verify = c->verify, .params = c->params};
    spmv_client_product_result res;
    size_t nx = (size_t)m->cols, ny = (size_t)m->rows, esize = m->dtype == SPMV_CLIENT_FLOAT32 ? 4 : 8;
    double *x = NULL, *y = NULL;
    float *xf = NULL;
    void *ybuf = NULL;
    int rc = EXIT_LOCAL;

    if (c->x_shm && !parse_shm_ref(c->x_shm, xname, sizeof xname, &xr.offset))
        return usage_error("--x-shm wants NAME or NAME:OFFSET (bytes), not %s", c->x_shm);
    if (c->y_shm && !parse_shm_ref(c->y_shm, yname, sizeof yname, &yr.offset))
        return usage_error("--y-shm wants NAME or NAME:OFFSET (bytes), not %s", c->y_shm);
    if (c->x_shm && c->x_file) return usage_error("--x and --x-shm exclude each other%s", "");
    if (!c->x_shm && !c->x_file) return usage_error("spmv needs --x FILE or --x-shm NAME[:OFFSET]%s", "");
    if (c->y_shm && c->y_out) return usage_error("--y-out and --y-shm exclude each other (y stays in the region)%s", "");
    xr.name = xname;
    yr.name = yname;
    if (!c->x_shm) {
        if ((rc = read_values(c->x_file, nx, "columns", &x, &a.nx)) != EXIT_OK) goto done;
        rc = EXIT_LOCAL;
        if (!(a.x = as_dtype(m->dtype, x, nx, &xf))) {
            fprintf(stderr, "spmvctl: out of memory for %zu values\n", nx);
            goto done;
        }
    }
    if (!c->y_shm) {
        if (!(y = malloc((ny ? ny : 1) * sizeof *y)) || !(ybuf = malloc((ny ? ny : 1) * esize))) {
            fprintf(stderr, "spmvctl: out of memory for %zu values\n", ny);
            goto done;
        }
        a.y = ybuf, a.ny = ny;
    }
    spmv_client_status st = spmv_client_spmv_shm(c->h, m->id, &a, c->x_shm ? &xr : NULL, c->y_shm ? &yr : NULL,
                                                 &o, &res);
    if (st != SPMV_CLIENT_OK) {
        rc = report(c, "spmv", st);
        goto done;
    }
    double norm = NAN;
    if (y) {
        norm = widen_y(m->dtype, ybuf, y, ny);
        if (c->y_out && (rc = write_values(c->y_out, y, ny, 1)) != EXIT_OK) goto done;
    }
    if (!c->y_out || strcmp(c->y_out, "-") != 0) {
        print_spmv_result(c, &res.spmv, y ? ny : 0, norm);
        if (!c->json) {
            print_shm_operand("x", c->x_shm ? &xr : NULL);
            print_shm_operand("y", c->y_shm ? &yr : NULL);
        }
    }
    rc = EXIT_OK;
done:
    free(x), free(y), free(xf), free(ybuf);
    return rc;
}

static int cmd_spmv(ctl *c, int argc, char **argv)
{
    spmv_client_matrix *m = NULL;
    double *x = NULL, *y = NULL;
    spmv_client_spmv_result res;
    int rc;

    if (argc != 1) return usage_error("spmv needs exactly one matrix id%s", "");
    if (!c->x_file && !c->x_shm) return usage_error("spmv needs --x FILE (or --x-shm NAME[:OFFSET])%s", "");
    spmv_client_status st = spmv_client_describe(c->h, argv[0], &m);
    if (st != SPMV_CLIENT_OK) return report(c, argv[0], st);
    /* The descriptor's sizes decide two allocations: bound them first. */
    if ((uint64_t)m->rows > SIZE_MAX / 8 || (uint64_t)m->cols > SIZE_MAX / 8) {
        fprintf(stderr, "spmvctl: %s: %" PRId64 " x %" PRId64 " is too large for this host\n", m->id, m->rows,
                m->cols);
        rc = EXIT_LOCAL;
        goto done;
    }
    if (c->x_shm || c->y_shm) {
        rc = spmv_shm(c, m);
        goto done;
    }
    size_t nx;
    double norm = NAN;
    if ((rc = read_values(c->x_file, (size_t)m->cols, "columns", &x, &nx)) != EXIT_OK) goto done;
    rc = EXIT_LOCAL;
    if (!(y = malloc((size_t)(m->rows ? m->rows : 1) * sizeof *y))) {
        fprintf(stderr, "spmvctl: out of memory for %" PRId64 " x %" PRId64 "\n", m->rows, m->cols);
        goto done;
    }
    if ((rc = run_spmv(c, m, x, y, &res, &norm)) != EXIT_OK) goto done;
    if (c->y_out && (rc = write_values(c->y_out, y, (size_t)m->rows, 1)) != EXIT_OK) goto done;
    if (!c->y_out || strcmp(c->y_out, "-") != 0)
        print_spmv_result(c, &res, (size_t)m->rows, norm);
done:
    free(x);
    free(y);
    spmv_client_matrix_free(m);
    return rc;
}

/* ----------------------------------------------------------------- spmspm */

/* C as a Matrix Market coordinate file ("-": stdout). */
static int write_coo(const char *path, const spmv_client_coo *m)
{
    FILE *f = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
    if (!f) {
        fprintf(stderr, "spmvctl: %s: %s\n", path, strerror(errno));
        return EXIT_LOCAL;
    }
    fprintf(f, "%%%%MatrixMarket matrix coordinate real general\n%d %d %" PRId64 "\n", m->rows, m->cols, m->nnz);
    for (int64_t i = 0; i < m->nnz; i++)
        fprintf(f, "%d %d %.17g\n", m->row[i] + 1, m->col[i] + 1, m->val[i]);
    int bad = ferror(f);
    if (f != stdout) bad |= fclose(f);
    if (bad) {
        fprintf(stderr, "spmvctl: %s: write failed\n", path);
        return EXIT_LOCAL;
    }
    return EXIT_OK;
}

static void print_spmspm_result(const ctl *c, const spmv_client_spmspm_result *r, const spmv_client_coo *m,
                                const spmv_client_matrix *stored)
{
    const spmv_client_stats *s = &r->stats;
    if (c->json) {
        json_t *o = json_pack("{s:s, s:{s:i, s:i, s:o, s:o, s:o, s:o}, s:I, s:o, s:o, s:o}", "kernel", r->kernel,
                              "stats", "runs", s->runs, "warmup", s->warmup, "median_ms", json_finite(s->median_ms),
                              "mean_ms", json_finite(s->mean_ms), "gflops", json_finite(s->gflops), "gbps",
                              json_finite(s->gbps), "madds", (json_int_t)r->madds, "queue_ms",
                              json_finite(r->queue_ms), "request_ms", json_finite(r->request_ms), "max_rel_err",
                              json_finite(r->max_rel_err));
        if (o && m)
            json_object_set_new(o, "c", json_pack("{s:i, s:i, s:I}", "rows", m->rows, "cols", m->cols, "nnz",
                                                  (json_int_t)m->nnz));
        if (o && stored)
            json_object_set_new(o, "stored", json_string(stored->id));
        print_json_object(o);
        return;
    }
    print_run_text(r->kernel, s, "median", r->madds, r->queue_ms, r->request_ms, r->max_rel_err);
    if (m) printf("C            %d x %d, %" PRId64 " non-zeros\n", m->rows, m->cols, m->nnz);
    if (stored) {
        printf("stored as    %s\n", stored->id);
        print_matrix(stored);
    }
}

static int cmd_spmspm(ctl *c, int argc, char **argv)
{
    spmv_client_spmspm_options o = {.kernel = c->kernel, .runs = c->runs, .warmup = c->warmup > 0 ? c->warmup : 0,
                                    .verify = c->verify, .store = c->store, .params = c->params};
    spmv_client_spmspm_result res;
    spmv_client_coo *m = NULL;
    spmv_client_matrix *stored = NULL;
    int rc = EXIT_OK;
    if (argc != 2) return usage_error("spmspm needs two matrix ids, A and B%s", "");
    if (c->store && c->c_out) return usage_error("--c-out and --store exclude each other%s", "");
    spmv_client_status st = spmv_client_spmspm(c->h, argv[0], argv[1], &o, &m, &stored, &res);
    if (st != SPMV_CLIENT_OK) return report(c, "spmspm", st);
    if (c->c_out && (rc = write_coo(c->c_out, m)) != EXIT_OK) goto done;
    if (!c->c_out || strcmp(c->c_out, "-") != 0)
        print_spmspm_result(c, &res, m, stored);
done:
    spmv_client_coo_free(m);
    spmv_client_matrix_free(stored);
    return rc;
}

/* ------------------------------------------------------------------ bench */

/* Splits "a,b,c" in place into c->... list; at most cap-1 names. */
static int split_list(char *s, const char **out, int cap)
{
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == cap - 1) return -1;
        out[n++] = tok;
    }
    out[n] = NULL;
    return n;
}

/* A benchmark table, for whatever shape of rows the server used: an array
 * of objects under "rows", "results" or "kernels", or the result itself. */
static const json_t *bench_rows(const json_t *result)
{
    static const char *const keys[] = {"rows", "results", "table", "kernels", NULL};
    if (json_is_array(result)) return result;
    for (int i = 0; keys[i]; i++)
        if (json_is_array(json_object_get(result, keys[i]))) return json_object_get(result, keys[i]);
    return NULL;
}

static double row_num(const json_t *row, const char *key)
{
    const json_t *v = json_object_get(row, key);
    if (!v) v = json_object_get(json_object_get(row, "stats"), key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* {"chunk":8,"threads":0} as "chunk=8,threads=0". */
static void params_text(const json_t *p, char *buf, size_t cap)
{
    const char *key;
    const json_t *v;
    size_t len = 0;
    buf[0] = '\0';
    json_object_foreach((json_t *)p, key, v) {
        if (len >= cap) break;
        if (json_is_integer(v))
            len += (size_t)snprintf(buf + len, cap - len, "%s%s=%" JSON_INTEGER_FORMAT, len ? "," : "", key,
                                    json_integer_value(v));
        else if (json_is_string(v))
            len += (size_t)snprintf(buf + len, cap - len, "%s%s=%s", len ? "," : "", key, json_string_value(v));
    }
}

/* The kernels a bench skipped, one line per reason (a CPU host skips
 * every GPU kernel for the same one): "skipped 20 kernels (gpu.csr.scalar,
 * gpu.csr.vector, ... and 17 more): no GPU on this host". */
static void print_skipped(const json_t *skipped)
{
    size_t n = json_array_size(skipped);
    bool *done = calloc(n ? n : 1, sizeof *done);
    for (size_t i = 0; done && i < n; i++) {
        if (done[i])
            continue;
        const char *why = json_string_value(json_object_get(json_array_get(skipped, i), "reason"));
        char names[160] = "";
        size_t count = 0;
        for (size_t j = i; j < n; j++) {
            const json_t *row = json_array_get(skipped, j);
            const char *w = json_string_value(json_object_get(row, "reason"));
            if (done[j] || strcmp(w ? w : "", why ? why : "") != 0)
                continue;
            done[j] = true;
            const char *k = json_string_value(json_object_get(row, "kernel"));
            if (count++ < 3)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", count > 1 ? ", " : "", k ? k : "?");
        }
        if (count > 3)
            snprintf(names + strlen(names), sizeof names - strlen(names), " and %zu more", count - 3);
        printf("skipped %zu kernel%s (%s): %s\n", count, count == 1 ? "" : "s", names, why ? why : "");
    }
    free(done);
}

static void print_bench_table(const char *result_text)
{
    json_t *result = json_loads(result_text ? result_text : "null", JSON_DECODE_ANY, NULL);
    const json_t *rows = bench_rows(result);
    if (!rows) {
        print_json_text(result_text);
        json_decref(result);
        return;
    }
    const char *stat = json_string_value(json_object_get(result, "stat"));
    const char *base = json_string_value(json_object_get(result, "baseline"));
    if (stat)
        printf("rates, speedup and efficiency at the %s time; baseline %s\n", stat, base ? base : "?");
    printf("%-24s %-26s %10s %10s %9s %9s %9s %7s %10s\n", "KERNEL", "PARAMS", "MEAN_MS", "MEDIAN_MS", "GFLOPS", "GB/S",
           "SPEEDUP", "EFFIC", "MAX_ERR");
    size_t i;
    const json_t *row;
    json_array_foreach(rows, i, row) {
        const char *k = json_string_value(json_object_get(row, "kernel"));
        const json_t *p = json_object_get(row, "params");
        if (!p) p = json_object_get(row, "parameters");
        char ptext[128];
        params_text(p, ptext, sizeof ptext);
        const json_t *ver = json_object_get(row, "verify");
        double err = json_is_object(ver) ? row_num(ver, "max_rel_err") : row_num(row, "max_rel_err");
        const json_t *ev = json_object_get(row, "error");
        const char *error = json_is_string(ev) ? json_string_value(ev) : json_string_value(json_object_get(ev, "message"));
        printf("%-24s %-26s %10.4f %10.4f %9.3f %9.3f %9.2f %7.2f %10.2g%s%s\n", k ? k : "?", ptext,
               row_num(row, "mean_ms"), row_num(row, "median_ms"), row_num(row, "gflops"), row_num(row, "gbps"),
               row_num(row, "speedup"), row_num(row, "efficiency"), err, error ? "  " : "", error ? error : "");
    }
    print_skipped(json_object_get(result, "skipped"));
    const char *best = json_string_value(json_object_get(json_object_get(result, "best"), "kernel"));
    if (best)
        printf("best: %s\n", best);
    json_decref(result);
}

static int show_job(const ctl *c, const spmv_client_job *j)
{
    if (c->json) {
        print_json_text(j->json);
    } else if (j->result) {
        print_bench_table(j->result);
    } else {
        printf("job %s: %s, %.0f%%\n", j->id, j->state, j->progress * 100);
    }
    return EXIT_OK;
}

/* {"kernels":[...],"runs":N,"warmup":N,"threads":[1,2,4]} for bench --threads
 * (checked by take_option to be digits and commas), or NULL. */
static char *bench_sweep_body(const ctl *c, const char *const *kernels)
{
    json_t *o = json_object(), *ts = json_array();
    char *copy = strdup(c->threads), *save = NULL;
    for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save))
        json_array_append_new(ts, json_integer(atoll(t)));
    free(copy);
    if (kernels) {
        json_t *ks = json_array();
        for (size_t i = 0; kernels[i]; i++) json_array_append_new(ks, json_string(kernels[i]));
        json_object_set_new(o, "kernels", ks);
    }
    if (c->runs) json_object_set_new(o, "runs", json_integer(c->runs));
    if (c->warmup) json_object_set_new(o, "warmup", json_integer(c->warmup));
    json_object_set_new(o, "threads", ts);
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return text;
}

static int cmd_bench(ctl *c, int argc, char **argv)
{
    const char *names[64];
    char *list = NULL;
    char job_id[64];
    spmv_client_job *j = NULL;
    int rc;

    if (argc != 1) return usage_error("bench needs exactly one matrix id%s", "");
    spmv_client_bench_options o = {.runs = c->runs, .warmup = c->warmup};
    if (c->kernels) {
        if (!(list = strdup(c->kernels))) return EXIT_LOCAL;
        if (split_list(list, names, 64) <= 0) {
            free(list);
            return usage_error("--kernels needs 1 to 63 comma-separated names: %s", c->kernels);
        }
        o.kernels = names;
    }
    spmv_client_status st;
    if (c->threads) { /* a thread sweep: the route's body as JSON (since client 0.6) */
        char *body = bench_sweep_body(c, o.kernels);
        st = body ? spmv_client_bench_start_json(c->h, argv[0], body, job_id) : SPMV_CLIENT_ERR_INVALID;
        free(body);
    } else {
        st = spmv_client_bench_start(c->h, argv[0], &o, job_id);
    }
    free(list);
    if (st != SPMV_CLIENT_OK) return report(c, argv[0], st);
    if (c->no_wait) {
        printf(c->json ? "{\"job\": \"%s\"}\n" : "%s\n", job_id);
        return EXIT_OK;
    }
    bar b = {.label = "bench"};
    st = spmv_client_job_wait(c->h, job_id, 1000, isatty(STDERR_FILENO) ? progress_bar : NULL, &b, &j);
    progress_end(&b);
    if (st != SPMV_CLIENT_OK) {
        rc = report(c, job_id, st);
        if (j && c->json) print_json_text(j->json);
    } else {
        rc = show_job(c, j);
    }
    spmv_client_job_free(j);
    return rc;
}

static int cmd_job(ctl *c, int argc, char **argv)
{
    spmv_client_job *j;
    if (argc != 1) return usage_error("job needs exactly one job id%s", "");
    if (c->cancel) {
        spmv_client_status st = spmv_client_job_cancel(c->h, argv[0], &j);
        if (st != SPMV_CLIENT_OK) return report(c, argv[0], st);
        if (c->json && j) print_json_text(j->json);
        else if (!c->json) printf(j ? "cancelling %s (%s)\n" : "dropped %s (it had finished)\n", argv[0], j ? j->state : "");
        spmv_client_job_free(j);
        return EXIT_OK;
    }
    spmv_client_status st = spmv_client_job_get(c->h, argv[0], &j);
    if (st != SPMV_CLIENT_OK) return report(c, argv[0], st);
    int rc = show_job(c, j);
    if (strcmp(j->state, "failed") == 0)
        rc = report(c, argv[0], SPMV_CLIENT_ERR_JOB_FAILED);
    spmv_client_job_free(j);
    return rc;
}

/* -------------------------------------------------------------------- ops */

static int cmd_ops(ctl *c, int argc, char **argv)
{
    FILE *f;
    char *text = NULL;
    size_t len = 0;
    spmv_client_ops_result *r = NULL;

    if (argc != 1) return usage_error("ops needs exactly one file of JSON steps (\"-\": stdin)%s", "");
    if (!(f = strcmp(argv[0], "-") == 0 ? stdin : fopen(argv[0], "r"))) {
        fprintf(stderr, "spmvctl: %s: %s\n", argv[0], strerror(errno));
        return EXIT_LOCAL;
    }
    FILE *mem = open_memstream(&text, &len);
    char chunk[65536];
    size_t got;
    while (mem && (got = fread(chunk, 1, sizeof chunk, f)) > 0) fwrite(chunk, 1, got, mem);
    bool bad = ferror(f) || !mem;
    if (mem) bad = fclose(mem) != 0 || bad;
    if (f != stdin) fclose(f);
    if (bad) {
        fprintf(stderr, "spmvctl: %s: read failed\n", argv[0]);
        free(text);
        return EXIT_LOCAL;
    }
    spmv_client_status st = spmv_client_ops_post(c->h, text, &r);
    free(text);
    if (st != SPMV_CLIENT_OK) return report(c, "ops", st);
    if (c->json) {
        print_json_text(r->json);
    } else {
        printf("%-24s %s\n", "RESULT", "VALUE");
        for (size_t i = 0; i < r->nresults; i++) {
            printf("%-24s", r->results[i].name);
            for (size_t j = 0; j < r->results[i].k; j++) printf(" %.17g", r->results[i].values[j]);
            putchar('\n');
        }
        printf("\n%4s  %-8s %10s\n", "STEP", "OP", "MS");
        for (size_t i = 0; i < r->nsteps; i++) printf("%4zu  %-8s %10.4f\n", i + 1, r->steps[i].op, r->steps[i].ms);
        printf("\ntotal %.4f ms on %s, queued %.4f ms, request %.3f ms\n", r->total_ms, r->device, r->queue_ms,
               r->request_ms);
    }
    spmv_client_ops_result_free(r);
    return EXIT_OK;
}

/* ------------------------------------------------------------------ solve */

static void print_solve(const ctl *c, const spmv_client_solve_result *r)
{
    if (c->json) {
        print_json_text(r->json);
        return;
    }
    printf("method       %s\n", r->method);
    if (*r->stop_reason) /* k columns have no one stop: each column's is in --json's "columns" */
        printf("converged    %s (%s%s%s)\n", r->converged ? "yes" : "no", r->stop_reason, *r->stop_detail ? ": " : "",
               r->stop_detail);
    else
        printf("converged    %s (every column: see --json's columns)\n", r->converged ? "yes" : "no");
    printf("iterations   %" PRId64 " (%" PRId64 " spmv calls)\n", r->iterations, r->spmv_calls);
    printf("relres       %.6e\n", r->relres);
    printf("kernel       %s on %s\n", r->kernel, r->device);
    printf("time         total %.3f ms: spmv %.3f, vectors %.3f, setup %.3f, queue %.3f\n", r->total_ms, r->spmv_ms,
           r->vector_ms, r->setup_ms, r->queue_ms);
    if (!isnan(r->request_ms)) printf("request      %.3f ms (client side, whole exchange)\n", r->request_ms);
    if (c->history)
        for (size_t i = 0; i < r->nhistory; i++) printf("iter %5zu  residual %.6e\n", i, r->history[i]);
}

/* The order of the matrix of a solve: square, and of a size this host can
 * hold. */
static int solve_order(const spmv_client_matrix *m, size_t *n)
{
    if ((uint64_t)m->rows > SIZE_MAX / 8 || m->rows != m->cols) {
        fprintf(stderr, "spmvctl: %s: a solve needs a square matrix of a size this host can hold (%" PRId64
                        " x %" PRId64 ")\n", m->id, m->rows, m->cols);
        return m->rows != m->cols ? EXIT_USAGE : EXIT_LOCAL;
    }
    *n = (size_t)m->rows;
    return EXIT_OK;
}

/* b and x0 of a solve, n values each, from their files; b is all ones
 * unless a file or a vector gives it. */
static int solve_inputs(const ctl *c, size_t n, double **b, size_t *nb, double **x0, size_t *nx0)
{
    int rc;
    if (c->b_file && (rc = read_values(c->b_file, n, "rows", b, nb)) != EXIT_OK)
        return rc;
    if (!c->b_file && !c->b_vector) {
        if (!(*b = malloc((n ? n : 1) * sizeof **b)))
            return EXIT_LOCAL;
        for (size_t i = 0; i < n; i++) (*b)[i] = 1;
        *nb = n;
    }
    if (c->x0_file && (rc = read_values(c->x0_file, n, "columns", x0, nx0)) != EXIT_OK)
        return rc;
    return EXIT_OK;
}

/* Waits for an async solve's job and reads its result into *r (which held
 * the job's answer) and x. */
static int solve_wait(ctl *c, spmv_client_solve_result **r, double *x, size_t n)
{
    spmv_client_job *j = NULL;
    bar bb = {.label = "solve"};
    spmv_client_status st =
        spmv_client_job_wait(c->h, (*r)->job_id, 1000, isatty(STDERR_FILENO) ? progress_bar : NULL, &bb, &j);
    progress_end(&bb);
    if (st != SPMV_CLIENT_OK) {
        int rc = report(c, (*r)->job_id, st);
        spmv_client_job_free(j);
        return rc;
    }
    spmv_client_solve_result_free(*r);
    *r = NULL;
    st = spmv_client_solve_parse(c->h, j->result, x, n, r);
    spmv_client_job_free(j);
    return st == SPMV_CLIENT_OK ? EXIT_OK : report(c, "solve job result", st);
}

/* x to --x-out and the report; EXIT_SOLVE when it did not converge. */
static int solve_output(const ctl *c, const spmv_client_solve_result *r, const double *x, size_t n)
{
    int rc;
    if (c->x_out && !r->has_x) {
        fprintf(stderr, "spmvctl: the answer carries no x\n");
        return EXIT_PROTOCOL;
    }
    if (c->x_out && (rc = write_values(c->x_out, x, n, 1)) != EXIT_OK)
        return rc;
    if (!c->x_out || strcmp(c->x_out, "-") != 0)
        print_solve(c, r);
    return r->converged ? EXIT_OK : EXIT_SOLVE;
}

/* What a solve call answered: its error reported, the job's id printed
 * (--no-wait), or the result (the job's, waited for, when async: x of nx
 * values) written and printed. */
static int solve_answered(ctl *c, spmv_client_status st, spmv_client_solve_result **r, bool async, double *x,
                          size_t nx, size_t n)
{
    int rc;
    if (st != SPMV_CLIENT_OK)
        return report(c, "solve", st);
    if (c->no_wait) {
        printf(c->json ? "{\"job\": \"%s\"}\n" : "%s\n", (*r)->job_id);
        return EXIT_OK;
    }
    if (async && (rc = solve_wait(c, r, x, nx)) != EXIT_OK)
        return rc;
    return solve_output(c, *r, x, n);
}

/* solve with --b-shm and/or --x-shm (spmv_client_solve_shm): b's --k
 * columns from a region (else from --b, or all ones), x into a region
 * (else back, to --x-out when given). */
static int solve_shm(ctl *c, const char *id)
{
    spmv_client_matrix *m = NULL;
    spmv_client_solve_result *r = NULL;
    double *b = NULL, *x0 = NULL, *x = NULL;
    size_t nb = 0, nx0 = 0, n = 0;
    char bname[256], xname[256];
    spmv_client_shm_ref br = {.name = bname}, xr = {.name = xname};
    int rc, k = c->k ? (int)c->k : 1;

    if (c->b_shm && (c->b_file || c->b_vector))
        return usage_error("--b-shm excludes --b and --b-vector%s", "");
    if (c->x_shm && (c->x_out || c->x_vector))
        return usage_error("--x-shm excludes --x-out and --x-vector (x stays in the region)%s", "");
    if (c->k && !c->b_shm) return usage_error("--k is b's columns in a region: it goes with --b-shm%s", "");
    if (k > 64) return usage_error("--k wants 1 to 64 columns (b's in its region)%s", "");
    if (c->x_out && k > 1) return usage_error("--x-out writes one column; with --k, x stays in --x-shm%s", "");
    if (c->b_shm && !c->x_shm && k > 1) return usage_error("with --k, x goes into a region: give --x-shm%s", "");
    if (c->b_vector || c->x0_vector || c->json_request)
        return usage_error("with a region, b and x0 travel in binary: no --b-vector, --x0-vector or --json-request%s",
                           "");
    if (c->b_shm && !parse_shm_ref(c->b_shm, bname, sizeof bname, &br.offset))
        return usage_error("--b-shm wants NAME or NAME:OFFSET (bytes), not %s", c->b_shm);
    if (c->x_shm && !parse_shm_ref(c->x_shm, xname, sizeof xname, &xr.offset))
        return usage_error("--x-shm wants NAME or NAME:OFFSET (bytes), not %s", c->x_shm);
    spmv_client_status st = spmv_client_describe(c->h, id, &m);
    if (st != SPMV_CLIENT_OK) return report(c, id, st);
    if ((rc = solve_order(m, &n)) != EXIT_OK)
        goto done;
    if (!c->b_shm && (rc = solve_inputs(c, n, &b, &nb, &x0, &nx0)) != EXIT_OK)
        goto done;
    if (c->b_shm && c->x0_file && (rc = read_values(c->x0_file, n * (size_t)k, "columns", &x0, &nx0)) != EXIT_OK)
        goto done;
    rc = EXIT_LOCAL;
    if (!c->x_shm && (n > SIZE_MAX / 8 / (size_t)k || !(x = malloc((n ? n : 1) * (size_t)k * sizeof *x))))
        goto done;
    spmv_client_solve_options o = {.method = c->method, .tol = c->tol, .maxit = c->maxit, .restart = (int)c->restart,
                                   .preconditioner = c->precond, .kernel = c->kernel, .b = b, .nb = nb, .x0 = x0,
                                   .nx0 = nx0, .async = c->async || c->no_wait};
    st = spmv_client_solve_shm(c->h, m->id, &o, c->b_shm ? &br : NULL, k, c->x_shm ? &xr : NULL, x,
                               x ? n * (size_t)k : 0, &r);
    rc = solve_answered(c, st, &r, o.async, x, x ? n * (size_t)k : 0, n);
done:
    spmv_client_solve_result_free(r);
    spmv_client_matrix_free(m);
    free(b), free(x0), free(x);
    return rc;
}

static int cmd_solve(ctl *c, int argc, char **argv)
{
    spmv_client_matrix *m = NULL;
    spmv_client_solve_result *r = NULL;
    double *b = NULL, *x0 = NULL, *x = NULL;
    size_t nb = 0, nx0 = 0, n = 0;
    int rc;

    if (argc != 1) return usage_error("solve needs exactly one matrix id%s", "");
    if (c->b_file && c->b_vector) return usage_error("--b and --b-vector exclude each other%s", "");
    if (c->x0_file && c->x0_vector) return usage_error("--x0 and --x0-vector exclude each other%s", "");
    if (c->x_out && c->x_vector) return usage_error("--x-out and --x-vector exclude each other%s", "");
    if (c->b_shm || c->x_shm)
        return solve_shm(c, argv[0]);
    if (c->k) return usage_error("--k is b's columns in a region: it goes with --b-shm%s", "");
    spmv_client_status st = spmv_client_describe(c->h, argv[0], &m);
    if (st != SPMV_CLIENT_OK) return report(c, argv[0], st);
    if ((rc = solve_order(m, &n)) != EXIT_OK || (rc = solve_inputs(c, n, &b, &nb, &x0, &nx0)) != EXIT_OK)
        goto done;
    rc = EXIT_LOCAL;
    if (c->x_out && !(x = malloc((n ? n : 1) * sizeof *x))) goto done;
    spmv_client_solve_options o = {.method = c->method, .tol = c->tol, .maxit = c->maxit, .restart = (int)c->restart,
                                   .preconditioner = c->precond, .kernel = c->kernel, .b_vector = c->b_vector,
                                   .b = b, .nb = nb, .x0_vector = c->x0_vector, .x0 = x0, .nx0 = nx0,
                                   .x_out_vector = c->x_vector, .async = c->async || c->no_wait};
    st = (c->json_request ? spmv_client_solve_json : spmv_client_solve)(c->h, m->id, &o, x, n, &r);
    rc = solve_answered(c, st, &r, o.async, x, n, n);
done:
    spmv_client_solve_result_free(r);
    spmv_client_matrix_free(m);
    free(b), free(x0), free(x);
    return rc;
}

/* -------------------------------------------------------------------- shm */

static void print_shm_header(void)
{
    printf("%-32s %14s %14s %14s  %-6s  %-8s %8s  %s\n", "NAME", "OFFSET", "SIZE", "OBJECT_BYTES", "PINNED", "STATE",
           "USES", "CREATED");
}

static void print_shm_row(const spmv_client_shm *r)
{
    printf("%-32s %14" PRIu64 " %14" PRIu64 " %14" PRIu64 "  %-6s  %-8s %8" PRId64 "  %s\n", r->name, r->offset,
           r->size, r->object_bytes, r->pinned > 0 ? "yes" : r->pinned == 0 ? "no" : "?", r->state, r->uses,
           r->created);
}

static int shm_register(ctl *c, int argc, char **argv)
{
    spmv_client_shm *r = NULL;
    if (argc != 1) return usage_error("shm register needs exactly one object name%s", "");
    if (!c->has_shm_size) return usage_error("shm register needs --size BYTES%s", "");
    spmv_client_status st = spmv_client_shm_register(c->h, argv[0], c->shm_offset, c->shm_size, &r);
    if (st != SPMV_CLIENT_OK) return report(c, argv[0], st);
    if (c->json) {
        print_json_text(r->json);
    } else {
        print_shm_header();
        print_shm_row(r);
    }
    spmv_client_shm_free(r);
    return EXIT_OK;
}

static int shm_list(ctl *c, int argc, char **argv)
{
    (void)argv;
    spmv_client_shm_list *l;
    if (argc > 0) return usage_error("shm list takes no arguments%s", "");
    spmv_client_status st = spmv_client_shm_regions(c->h, &l);
    if (st != SPMV_CLIENT_OK) return report(c, "shm list", st);
    if (c->json) {
        print_json_text(l->json);
    } else {
        print_shm_header();
        for (size_t i = 0; i < l->count; i++) print_shm_row(&l->items[i]);
    }
    spmv_client_shm_list_free(l);
    return EXIT_OK;
}

static int shm_rm(ctl *c, int argc, char **argv)
{
    if (argc == 0) return usage_error("shm rm needs a region name%s", "");
    return drop_each(c, argc, argv, spmv_client_shm_unregister, "unregistered");
}

static int cmd_shm(ctl *c, int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(ctl *, int, char **);
    } acts[] = {{"register", shm_register}, {"list", shm_list}, {"ls", shm_list}, {"rm", shm_rm}};
    if (argc == 0) return usage_error("shm needs an action: register, list or rm%s", "");
    for (size_t i = 0; i < sizeof acts / sizeof *acts; i++)
        if (strcmp(argv[0], acts[i].name) == 0) return acts[i].run(c, argc - 1, argv + 1);
    return usage_error("unknown shm action '%s' (register, list, rm)", argv[0]);
}

/* ------------------------------------------------------------------ study */

static int study_check_options(const ctl *c);

static int cmd_study(ctl *c, int argc, char **argv)
{
    char line[4096] = "spmvctl";
    size_t len = strlen(line);
    int rc = study_check_options(c);
    if (rc != EXIT_OK) return rc;
    if (c->from ? argc != 0 : argc != 1)
        return usage_error(c->from ? "study --from FILE takes no folder%s" : "study needs exactly one folder of matrices%s", "");
    for (int i = 1; i < c->argc && len < sizeof line; i++)
        len += (size_t)snprintf(line + len, sizeof line - len, " %s", c->argv[i]);
    study_options o = {.dir = argc ? argv[0] : NULL, .out = c->out_file ? c->out_file : "study", .from = c->from,
                       .kernels = c->kernels, .spmspm = c->spmspm, .dtypes = c->dtypes, .threads = c->threads,
                       .device = c->device, .url = c->url, .command = line, .runs = c->runs ? c->runs : 10,
                       .warmup = c->warmup ? c->warmup : 3, .max_nnz = c->max_nnz, .plot = c->plot};
    return spmvctl_study(c->h, &o);
}

static const command commands[] = {
    {"upload", cmd_upload,
     "usage: spmvctl upload FILE [--name NAME] [--dtype float64|float32|mixed] [--formats csr,hll,...]\n"
     "                           [--device cpu|gpuN] [--hack-size N]\n"
     "Uploads a Matrix Market file (.mtx or .mtx.gz) and prints its descriptor;\n"
     "with --json the descriptor JSON, whose \"id\" names the matrix from then on.\n"},
    {"generate", cmd_generate,
     "usage: spmvctl generate KIND --n N [--per-row P] [--dense-len L] [--seed S] [--name NAME]\n"
     "                             [--dtype float64|float32|mixed] [--device cpu|gpuN]\n"
     "Asks the daemon to build a matrix by formula (nothing is uploaded; it stores the recipe):\n"
     "KIND poisson2d, poisson3d, stencil27, uniform, powerlaw, graph_uniform, graph_powerlaw,\n"
     "banded_dense_row, lp or band (entry (i,j) = 1 + ((i+3j) mod 7)/8, |i-j| <= P/2), as spmv-gen\n"
     "takes them. Prints the descriptor (--json: its JSON).\n"},
    {"ls", cmd_ls, "usage: spmvctl ls\nLists the stored matrices, one per line.\n"},
    {"info", cmd_info, "usage: spmvctl info [ID]\nDescribes matrix ID; without ID, the server (version, build, devices, limits).\n"},
    {"rm", cmd_rm, "usage: spmvctl rm ID...\nDeletes matrices (host, device and stored copies).\n"},
    {"spmv", cmd_spmv,
     "usage: spmvctl spmv ID (--x FILE | --x-shm NAME[:OFFSET]) [--y-out FILE | --y-shm NAME[:OFFSET]]\n"
     "                       [--kernel K] [--runs N] [--warmup N] [--stat mean|median] [--verify]\n"
     "                       [--param KEY=VALUE]...\n"
     "Computes y = A*x on the daemon. FILE holds x as numbers separated by white space\n"
     "(\"-\" reads stdin), as many as the matrix has columns. --y-out writes y one value\n"
     "per line with 17 significant digits (\"-\" for stdout). Prints the kernel's timing.\n"
     "--x-shm reads x from a registered shared-memory region at byte OFFSET (default 0),\n"
     "--y-shm writes y into one (see spmvctl shm); values of the matrix's dtype.\n"
     "--stat mean puts GFLOP/s and GB/s at the mean time of the runs (default: the median).\n"},
    {"bench", cmd_bench,
     "usage: spmvctl bench ID [--kernels a,b,...] [--runs N] [--warmup N] [--stat mean|median] [--threads 1,2,4]\n"
     "                        [--no-wait]\n"
     "Benchmarks the listed kernels (default: all available) as a job, waits for it\n"
     "(a progress bar on a terminal) and prints the table. --no-wait prints the job id.\n"
     "--threads sweeps the CPU kernels that take threads over those counts (a row each).\n"
     "--stat mean puts the rates, speedup and efficiency (speedup over cpu.csr.serial\n"
     "per thread) at the mean time of the runs (default: the median).\n"},
    {"spmspm", cmd_spmspm,
     "usage: spmvctl spmspm A B [--kernel K] [--store] [--c-out FILE] [--runs N] [--warmup N]\n"
     "                         [--verify] [--param KEY=VALUE]...\n"
     "Computes C = A*B on the daemon (A's columns must equal B's rows) and prints the\n"
     "kernel's timing and C's shape. --c-out writes C as a Matrix Market file (\"-\" for\n"
     "stdout); --store keeps C on the daemon as a new matrix and prints its descriptor.\n"},
    {"job", cmd_job,
     "usage: spmvctl job JOB_ID [--cancel]\nShows a job's state, progress and result; --cancel cancels it (a queued\n"
     "job never runs, a running solve stops at its next iteration).\n"},
    {"vec", cmd_vec,
     "usage: spmvctl vec create (--values FILE | --fill V | --random [--seed S]) [--n N] [--k K]\n"
     "                          [--like MATRIX [--side cols|rows]] [--device D] [--dtype float64|float32]\n"
     "       spmvctl vec get ID [--out FILE]\n"
     "       spmvctl vec put ID --values FILE\n"
     "       spmvctl vec rm ID...\n"
     "       spmvctl vec ls\n"
     "Resident vectors, kept by the daemon between requests (not persisted; they expire\n"
     "when idle). FILE holds numbers separated by white space (\"-\": stdin), column after\n"
     "column when k > 1 (n = count / k). --like takes n (its cols, or rows with --side rows),\n"
     "the device and the dtype from a matrix. get prints one row per line, k values on it,\n"
     "17 significant digits (--out FILE writes them there and nothing else; --json prints\n"
     "the descriptor with the values).\n"},
    {"ops", cmd_ops,
     "usage: spmvctl ops FILE|-\n"
     "Posts the JSON steps in FILE ({\"steps\":[{\"op\":\"dot\",\"x\":ID,\"y\":ID,\"as\":NAME},...]})\n"
     "to /v1/ops and prints the named results and each step's time.\n"},
    {"solve", cmd_solve,
     "usage: spmvctl solve ID [--method cg|bicgstab|gmres] [--tol T] [--maxit N] [--restart N]\n"
     "                       [--precond none|jacobi] [--kernel K] [--b FILE | --b-vector VID]\n"
     "                       [--x0 FILE | --x0-vector VID] [--x-out FILE | --x-vector VID]\n"
     "                       [--b-shm NAME[:OFFSET] [--k K]] [--x-shm NAME[:OFFSET]]\n"
     "                       [--async] [--no-wait] [--history] [--json-request]\n"
     "Solves A x = b on the daemon (b defaults to all ones) and prints the method, whether\n"
     "it converged and why it stopped, iterations, relative residual and the time split.\n"
     "--x-out writes x one value per line (\"-\": stdout); --x-vector leaves it in a vector.\n"
     "b and x0 from files go in binary in the matrix's dtype (--json-request: as JSON\n"
     "numbers instead). --async runs it as a job and waits for it with long polls (a\n"
     "progress bar on a terminal); --no-wait prints the job id. Exit status 7 when it did\n"
     "not converge. Shared memory (a region registered with spmvctl shm register): --b-shm\n"
     "reads b (K columns, --k, default 1) from the region at OFFSET bytes, --x-shm has the\n"
     "daemon write x there; the values never cross the socket.\n"},
    {"shm", cmd_shm,
     "usage: spmvctl shm register NAME [--offset BYTES] --size BYTES\n"
     "       spmvctl shm list\n"
     "       spmvctl shm rm NAME...\n"
     "Shared-memory regions (the daemon needs allow_shm = true). NAME is a POSIX shared-\n"
     "memory object (/dev/shm/NAME, shm_open's name without its slash) that you created;\n"
     "register makes SIZE bytes of it from OFFSET a region named NAME, for spmv's --x-shm\n"
     "and --y-shm. rm unregisters it (the object stays: remove it yourself).\n"},
    {"study", cmd_study,
     "usage: spmvctl study DIR [--kernels a,b] [--spmspm a,b|none] [--dtypes float32,float64] [--runs N]\n"
     "                         [--warmup N] [--threads 1,2,4] [--max-nnz N] [--device cpu|gpu] [--out DIR]\n"
     "                         [--plot]\n"
     "       spmvctl study --from RESULTS.json [--out DIR] [--plot]\n"
     "A collection study: uploads every .mtx, .mtx.gz and .npz file of DIR once per dtype,\n"
     "benches the kernels at the mean (default: every available SpMV kernel of the daemon's\n"
     "device, cpu.csr.serial first) with the bench's thread sweep of the CPU kernels taking\n"
     "threads (--threads, default 1, 2, 4 ... cores), runs the SpMSpM kernels against a thin\n"
     "B (cols x 8), deletes what it uploaded, and writes report.md (speedups over\n"
     "cpu.csr.serial for nnz >= 10k and 100k, wins, GB/s, GFLOP/s, threads with the\n"
     "efficiency against cpu.csr.serial, SpMSpM, what was refused and why), results.csv\n"
     "and results.json into --out (default ./study). Times are means over --runs (default\n"
     "10) after --warmup (default 3, at least 1). --max-nnz lists larger matrices as\n"
     "skipped. --from renders the report of an\n"
     "existing results.json (the same tables python3 -m spmvd.study writes). --plot draws\n"
     "the PNGs with python3 -m spmvd.study plot ($SPMVD_PYTHON; the package spmvd importable).\n"},
    {"kernels", cmd_kernels, "usage: spmvctl kernels\nLists the kernel catalogue with availability.\n"},
    {"health", cmd_health, "usage: spmvctl health\nChecks that the daemon answers; exit status 0 when it does.\n"},
};

/* ---------------------------------------------------------------- options */

enum {
    OPT_URL = 256, OPT_TOKEN_FILE, OPT_CA_FILE, OPT_INSECURE, OPT_TIMEOUT, OPT_JSON, OPT_NAME, OPT_DTYPE,
    OPT_FORMATS, OPT_DEVICE, OPT_HACK, OPT_KERNEL, OPT_X, OPT_Y_OUT, OPT_RUNS, OPT_WARMUP, OPT_VERIFY,
    OPT_PARAM, OPT_KERNELS, OPT_NO_WAIT, OPT_STORE, OPT_C_OUT,
    OPT_PER_ROW, OPT_DENSE_LEN,
    OPT_LIKE, OPT_SIDE, OPT_K, OPT_N, OPT_VALUES, OPT_FILL, OPT_RANDOM, OPT_SEED, OPT_OUT, OPT_METHOD, OPT_TOL,
    OPT_MAXIT, OPT_RESTART, OPT_PRECOND, OPT_B, OPT_B_VECTOR, OPT_B_SHM, OPT_X0, OPT_X0_VECTOR, OPT_X_OUT, OPT_X_VECTOR,
    OPT_ASYNC, OPT_HISTORY, OPT_JSON_REQUEST, OPT_CANCEL, OPT_OFFSET, OPT_SIZE, OPT_X_SHM, OPT_Y_SHM, OPT_STAT,
    OPT_DTYPES, OPT_FROM, OPT_SPMSPM, OPT_THREADS, OPT_MAX_NNZ, OPT_PLOT, OPT_LAST
};

static const struct option long_opts[] = {
    {"url", required_argument, NULL, OPT_URL},
    {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
    {"ca-file", required_argument, NULL, OPT_CA_FILE},
    {"insecure", no_argument, NULL, OPT_INSECURE},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"json", no_argument, NULL, OPT_JSON},
    {"name", required_argument, NULL, OPT_NAME},
    {"dtype", required_argument, NULL, OPT_DTYPE},
    {"formats", required_argument, NULL, OPT_FORMATS},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"hack-size", required_argument, NULL, OPT_HACK},
    {"kernel", required_argument, NULL, OPT_KERNEL},
    {"x", required_argument, NULL, OPT_X},
    {"y-out", required_argument, NULL, OPT_Y_OUT},
    {"runs", required_argument, NULL, OPT_RUNS},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"verify", no_argument, NULL, OPT_VERIFY},
    {"param", required_argument, NULL, OPT_PARAM},
    {"kernels", required_argument, NULL, OPT_KERNELS},
    {"no-wait", no_argument, NULL, OPT_NO_WAIT},
    {"store", no_argument, NULL, OPT_STORE},
    {"c-out", required_argument, NULL, OPT_C_OUT},
    {"like", required_argument, NULL, OPT_LIKE},
    {"side", required_argument, NULL, OPT_SIDE},
    {"k", required_argument, NULL, OPT_K},
    {"n", required_argument, NULL, OPT_N},
    {"per-row", required_argument, NULL, OPT_PER_ROW},
    {"dense-len", required_argument, NULL, OPT_DENSE_LEN},
    {"values", required_argument, NULL, OPT_VALUES},
    {"fill", required_argument, NULL, OPT_FILL},
    {"random", no_argument, NULL, OPT_RANDOM},
    {"seed", required_argument, NULL, OPT_SEED},
    {"out", required_argument, NULL, OPT_OUT},
    {"method", required_argument, NULL, OPT_METHOD},
    {"tol", required_argument, NULL, OPT_TOL},
    {"maxit", required_argument, NULL, OPT_MAXIT},
    {"restart", required_argument, NULL, OPT_RESTART},
    {"precond", required_argument, NULL, OPT_PRECOND},
    {"b", required_argument, NULL, OPT_B},
    {"b-vector", required_argument, NULL, OPT_B_VECTOR},
    {"b-shm", required_argument, NULL, OPT_B_SHM},
    {"x0", required_argument, NULL, OPT_X0},
    {"x0-vector", required_argument, NULL, OPT_X0_VECTOR},
    {"x-out", required_argument, NULL, OPT_X_OUT},
    {"x-vector", required_argument, NULL, OPT_X_VECTOR},
    {"async", no_argument, NULL, OPT_ASYNC},
    {"history", no_argument, NULL, OPT_HISTORY},
    {"json-request", no_argument, NULL, OPT_JSON_REQUEST},
    {"cancel", no_argument, NULL, OPT_CANCEL},
    {"offset", required_argument, NULL, OPT_OFFSET},
    {"size", required_argument, NULL, OPT_SIZE},
    {"x-shm", required_argument, NULL, OPT_X_SHM},
    {"y-shm", required_argument, NULL, OPT_Y_SHM},
    {"dtypes", required_argument, NULL, OPT_DTYPES},
    {"from", required_argument, NULL, OPT_FROM},
    {"spmspm", required_argument, NULL, OPT_SPMSPM},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"max-nnz", required_argument, NULL, OPT_MAX_NNZ},
    {"plot", no_argument, NULL, OPT_PLOT},
    {"stat", required_argument, NULL, OPT_STAT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static bool parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

/* An integer option in [lo, hi] into *out; else EXIT_USAGE with `usage`
 * ("--runs wants a positive integer, not %s"). */
static int int_option(const char *arg, long lo, long hi, const char *usage, long *out)
{
    *out = 0;
    return parse_int(arg, lo, hi, out) ? EXIT_OK : usage_error(usage, arg);
}

/* A number option (strtod) into *out that `ok` accepts; else EXIT_USAGE. */
static int num_option(const char *arg, bool (*ok)(double), const char *usage, double *out)
{
    char *end;
    *out = strtod(arg, &end);
    return *end || end == arg || !ok(*out) ? usage_error(usage, arg) : EXIT_OK;
}

/* An unsigned 64-bit option (bytes, a seed) into *out; else EXIT_USAGE. */
static int u64_option(const char *arg, const char *usage, uint64_t *out)
{
    char *end;
    errno = 0;
    *out = strtoull(arg, &end, 10);
    return errno || *end || end == arg || *arg == '-' ? usage_error(usage, arg) : EXIT_OK;
}

static bool is_finite(double v) { return isfinite(v); }
static bool is_positive(double v) { return v > 0 && isfinite(v); }
static bool is_timeout(double v) { return v > 0 && v < 1e6; }

/* What take_option's helpers say of an option that is not theirs. */
#define NOT_MINE (-1)

/* The global options: where the daemon is and how to talk to it. */
static int take_global_option(ctl *c, int opt, const char *arg)
{
    double secs;
    int rc = EXIT_OK;
    switch (opt) {
    case OPT_URL: c->url = arg; break;
    case OPT_TOKEN_FILE: c->token_file = arg; break;
    case OPT_CA_FILE: c->ca_file = arg; break;
    case OPT_INSECURE: c->insecure = true; break;
    case OPT_JSON: c->json = true; break;
    case OPT_TIMEOUT:
        if ((rc = num_option(arg, is_timeout, "--timeout wants seconds > 0, not %s", &secs)) == EXIT_OK)
            c->timeout_ms = (long)ceil(secs * 1000);
        break;
    default: return NOT_MINE;
    }
    return rc;
}

/* The options of upload, generate, spmv, spmspm and bench. */
static int take_matrix_option(ctl *c, int opt, const char *arg)
{
    long v = 0;
    int rc = EXIT_OK;
    switch (opt) {
    case OPT_NAME: c->name = arg; break;
    case OPT_DTYPE: c->dtype = arg; break;
    case OPT_FORMATS: c->formats = arg; break;
    case OPT_DEVICE: c->device = arg; break;
    case OPT_HACK:
        rc = int_option(arg, 1, 1 << 20, "--hack-size wants a positive integer, not %s", &v);
        c->hack_size = (int)v;
        break;
    case OPT_KERNEL: c->kernel = arg; break;
    case OPT_X: c->x_file = arg; break;
    case OPT_Y_OUT: c->y_out = arg; break;
    case OPT_RUNS:
        rc = int_option(arg, 1, INT_MAX, "--runs wants a positive integer, not %s", &v);
        c->runs = (int)v;
        break;
    case OPT_WARMUP:
        rc = int_option(arg, 0, INT_MAX, "--warmup wants an integer >= 0, not %s", &v);
        c->warmup = v ? (int)v : -1; /* -1: send warmup=0 explicitly */
        break;
    case OPT_VERIFY: c->verify = true; break;
    case OPT_PARAM:
        if (!strchr(arg, '=') || c->nparams == (int)(sizeof c->params / sizeof *c->params) - 1)
            return usage_error("--param wants KEY=VALUE (at most 31 of them): %s", arg);
        c->params[c->nparams++] = arg;
        break;
    case OPT_KERNELS: c->kernels = arg; break;
    case OPT_NO_WAIT: c->no_wait = true; break;
    case OPT_STORE: c->store = true; break;
    case OPT_C_OUT: c->c_out = arg; break;
    case OPT_STAT:
        if (strcmp(arg, "mean") != 0 && strcmp(arg, "median") != 0)
            return usage_error("--stat wants mean or median, not %s", arg);
        c->stat = arg;
        break;
    case OPT_PER_ROW:
        rc = int_option(arg, 0, INT_MAX, "--per-row wants an integer >= 0, not %s", &c->per_row);
        c->has_per_row = true;
        break;
    case OPT_DENSE_LEN:
        rc = int_option(arg, 0, INT_MAX, "--dense-len wants an integer >= 0, not %s", &c->dense_len);
        c->has_dense_len = true;
        break;
    default: return NOT_MINE;
    }
    return rc;
}

/* The options of vec. */
static int take_vector_option(ctl *c, int opt, const char *arg)
{
    int rc = EXIT_OK;
    switch (opt) {
    case OPT_LIKE: c->like = arg; break;
    case OPT_SIDE:
        if (strcmp(arg, "rows") != 0 && strcmp(arg, "cols") != 0)
            return usage_error("--side wants rows or cols, not %s", arg);
        c->side = arg;
        break;
    case OPT_K: rc = int_option(arg, 1, INT_MAX, "--k wants a positive integer, not %s", &c->k); break;
    case OPT_N: rc = int_option(arg, 1, LONG_MAX, "--n wants a positive integer, not %s", &c->n); break;
    case OPT_VALUES: c->values_file = arg; break;
    case OPT_FILL:
        rc = num_option(arg, is_finite, "--fill wants a finite number, not %s", &c->fill);
        c->has_fill = true;
        break;
    case OPT_RANDOM: c->random = true; break;
    case OPT_SEED: rc = u64_option(arg, "--seed wants an integer >= 0, not %s", &c->seed); break;
    case OPT_OUT: c->out_file = arg; break;
    default: return NOT_MINE;
    }
    return rc;
}

/* The options of solve and job. */
static int take_solve_option(ctl *c, int opt, const char *arg)
{
    int rc = EXIT_OK;
    switch (opt) {
    case OPT_METHOD: c->method = arg; break;
    case OPT_TOL: rc = num_option(arg, is_positive, "--tol wants a number > 0, not %s", &c->tol); break;
    case OPT_MAXIT: rc = int_option(arg, 1, LONG_MAX, "--maxit wants a positive integer, not %s", &c->maxit); break;
    case OPT_RESTART:
        rc = int_option(arg, 1, INT_MAX, "--restart wants a positive integer, not %s", &c->restart);
        break;
    case OPT_PRECOND: c->precond = arg; break;
    case OPT_B: c->b_file = arg; break;
    case OPT_B_VECTOR: c->b_vector = arg; break;
    case OPT_B_SHM: c->b_shm = arg; break;
    case OPT_X0: c->x0_file = arg; break;
    case OPT_X0_VECTOR: c->x0_vector = arg; break;
    case OPT_X_OUT: c->x_out = arg; break;
    case OPT_X_VECTOR: c->x_vector = arg; break;
    case OPT_ASYNC: c->async = true; break;
    case OPT_HISTORY: c->history = true; break;
    case OPT_JSON_REQUEST: c->json_request = true; break;
    case OPT_CANCEL: c->cancel = true; break;
    default: return NOT_MINE;
    }
    return rc;
}

/* The options of shm, and spmv's operands in regions. */
static int take_shm_option(ctl *c, int opt, const char *arg)
{
    switch (opt) {
    case OPT_OFFSET: return u64_option(arg, "--offset wants bytes >= 0, not %s", &c->shm_offset);
    case OPT_SIZE:
        c->has_shm_size = true;
        if (u64_option(arg, "--size wants bytes > 0, not %s", &c->shm_size) != EXIT_OK)
            return EXIT_USAGE;
        return c->shm_size ? EXIT_OK : usage_error("--size wants bytes > 0, not %s", arg);
    case OPT_X_SHM: c->x_shm = arg; return EXIT_OK;
    case OPT_Y_SHM: c->y_shm = arg; return EXIT_OK;
    default: return NOT_MINE;
    }
}

/* The options of study. */
static int take_study_option(ctl *c, int opt, const char *arg)
{
    long v = 0;
    int rc = EXIT_OK;
    switch (opt) {
    case OPT_DTYPES: c->dtypes = arg; break;
    case OPT_FROM: c->from = arg; break;
    case OPT_SPMSPM: c->spmspm = arg; break;
    case OPT_THREADS:
        if (!arg[0] || strspn(arg, "0123456789,") != strlen(arg) || strstr(arg, ",,") || arg[0] == ',')
            return usage_error("--threads takes thread counts, comma-separated (1,2,4), not %s", arg);
        c->threads = arg;
        break;
    case OPT_PLOT: c->plot = true; break;
    case OPT_MAX_NNZ:
        rc = int_option(arg, 1, LONG_MAX, "--max-nnz wants a positive integer, not %s", &v);
        c->max_nnz = v;
        break;
    default: return NOT_MINE;
    }
    return rc;
}

static const char *option_name(int opt)
{
    for (size_t i = 0; long_opts[i].name; i++)
        if (long_opts[i].val == opt) return long_opts[i].name;
    return "?";
}

/* One option into c; EXIT_OK or EXIT_USAGE. */
static int take_option(ctl *c, int opt, const char *arg, bool *help)
{
    static int (*const groups[])(ctl *, int, const char *) = {take_global_option, take_matrix_option,
                                                              take_vector_option, take_solve_option, take_shm_option,
                                                              take_study_option};
    if (opt == 'h') {
        *help = true;
        return EXIT_OK;
    }
    if (opt >= 256 && opt - 256 < (int)sizeof c->seen) c->seen[opt - 256] = 1;
    for (size_t i = 0; i < sizeof groups / sizeof *groups; i++) {
        int rc = groups[i](c, opt, arg);
        if (rc != NOT_MINE)
            return rc;
    }
    return usage_error("unknown option%s", "");
}

/* The options study takes besides the global ones; any other given is refused. */
static const int study_takes[] = {OPT_KERNELS, OPT_SPMSPM, OPT_DTYPES, OPT_RUNS, OPT_WARMUP, OPT_OUT, OPT_PLOT,
                                  OPT_FROM, OPT_MAX_NNZ, OPT_THREADS, OPT_DEVICE};

static int study_check_options(const ctl *c)
{
    for (int opt = OPT_NAME; opt < OPT_LAST; opt++) {
        bool ok = false;
        for (size_t i = 0; i < sizeof study_takes / sizeof *study_takes; i++) ok |= study_takes[i] == opt;
        if (c->seen[opt - 256] && !ok) return usage_error("study does not take --%s (spmvctl study --help)", option_name(opt));
    }
    if (c->json) return usage_error("study writes its report into --out; it does not take --json%s", "");
    if (c->warmup < 0) return usage_error("study's --warmup must be at least 1 (the bench route reads 0 as its default)%s", "");
    if (c->dtypes) {
        char *copy = strdup(c->dtypes), *save = NULL;
        int n = 0, bad = !copy;
        for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save), n++)
            bad |= strcmp(t, "float32") != 0 && strcmp(t, "float64") != 0;
        bad |= n == 0 || n > 2 || strcmp(c->dtypes, "float32,float32") == 0 || strcmp(c->dtypes, "float64,float64") == 0;
        free(copy);
        if (bad) return usage_error("--dtypes takes float32 and/or float64, comma-separated, not %s", c->dtypes);
    }
    return EXIT_OK;
}

/* Reads the token file (first line, trailing white space dropped). */
static char *read_token(const char *path)
{
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    if (!f) {
        fprintf(stderr, "spmvctl: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    ssize_t n = getline(&line, &cap, f);
    fclose(f);
    if (n <= 0) {
        free(line);
        fprintf(stderr, "spmvctl: %s: empty token file\n", path);
        return NULL;
    }
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' ')) line[--n] = '\0';
    return line;
}

static int connect_client(ctl *c)
{
    char *token = NULL;
    const char *env_token = getenv("SPMV_TOKEN");
    if (!c->url) c->url = spmv_client_default_url(); /* $SPMVD_URL, else $SPMV_URL */
    if (c->token_file && !(token = read_token(c->token_file))) return EXIT_LOCAL;
    spmv_client_options o = {.token = token ? token : env_token, .ca_file = c->ca_file,
                             .insecure = c->insecure, .timeout_ms = c->timeout_ms};
    spmv_client_status why;
    c->h = spmv_client_new(c->url, &o, &why);
    free(token);
    if (!c->h) {
        fprintf(stderr, "spmvctl: %s: %s\n", c->url, spmv_client_strerror(why));
        return why == SPMV_CLIENT_ERR_INVALID ? EXIT_USAGE : EXIT_LOCAL;
    }
    if (c->stat && spmv_client_set_stat(c->h, c->stat) != SPMV_CLIENT_OK) /* checked by take_matrix_option */
        return report(c, "--stat", SPMV_CLIENT_ERR_INVALID);
    return EXIT_OK;
}

/* Every command option given is one the command's usage names: an option
 * another command takes is refused, never ignored (the global ones, --url
 * to --json, go with every command). */
static int command_takes_options(const ctl *c, const command *cmd)
{
    for (int opt = OPT_NAME; opt < OPT_LAST; opt++) {
        if (opt - 256 >= (int)sizeof c->seen || !c->seen[opt - 256]) continue;
        const char *name = option_name(opt), *p = cmd->help;
        size_t n = strlen(name);
        bool named = false;
        while (!named && (p = strstr(p, "--"))) {
            p += 2;
            named = strncmp(p, name, n) == 0 && !(isalnum((unsigned char)p[n]) || p[n] == '-');
        }
        if (!named) {
            fprintf(stderr, "spmvctl: %s does not take --%s (spmvctl %s --help lists its options)\n", cmd->name, name,
                    cmd->name);
            return EXIT_USAGE;
        }
    }
    return EXIT_OK;
}

int main(int argc, char **argv)
{
    ctl c = {.argc = argc, .argv = argv};
    bool help = false;
    int opt, rc;
    const command *cmd = NULL;

    /* Options may come before or after the command: getopt_long permutes
     * argv so that the command and its arguments end up at the back. */
    while ((opt = getopt_long(argc, argv, "h", long_opts, NULL)) != -1)
        if ((rc = take_option(&c, opt, optarg, &help)) != EXIT_OK) return rc;
    if (optind == argc) {
        fputs(usage_text, help ? stdout : stderr);
        return help ? EXIT_OK : EXIT_USAGE;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(argv[optind], commands[i].name) == 0) cmd = &commands[i];
    if (!cmd) return usage_error("unknown command '%s'", argv[optind]);
    if (help) {
        fputs(cmd->help, stdout);
        return EXIT_OK;
    }
    if ((rc = command_takes_options(&c, cmd)) != EXIT_OK) return rc;
    if ((rc = connect_client(&c)) != EXIT_OK) return rc;
    rc = cmd->run(&c, argc - optind - 1, argv + optind + 1);
    spmv_client_free(c.h);
    return rc;
}
