/* spmvctl.c — the spmvd command-line client, a thin shell over libspmvclient.
 *
 * One subcommand per library call: upload, ls, info, rm, spmv, spmspm, bench, job,
 * kernels, health. Output is a human table by default and the server's JSON
 * with --json (so `spmvctl --json upload m.mtx | jq -r .id` works in
 * scripts). Exit codes are part of the interface and listed in usage():
 * scripts tell "the server said no" from "the server is not there".
 * Progress bars (uploads, benchmark jobs) go to stderr and only to a
 * terminal.
 */
#include "spmvclient.h"

#include <jansson.h>

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
    const char *params[32];
    int nparams;
    spmv_client *h;
} ctl;

/* ------------------------------------------------------------------ usage */

static const char usage_text[] =
    "usage: spmvctl [global options] COMMAND [options] [ARGS]\n"
    "\n"
    "Commands:\n"
    "  upload FILE            upload a Matrix Market file (.mtx or .mtx.gz)\n"
    "  ls                     list stored matrices\n"
    "  info [ID]              describe matrix ID, or the server without ID\n"
    "  rm ID...               delete matrices\n"
    "  spmv ID --x FILE       y = A*x with one kernel\n"
    "  spmspm A B             C = A*B of two stored matrices (B thin)\n"
    "  bench ID               benchmark kernels on matrix ID (a job)\n"
    "  job JOB_ID             show a job\n"
    "  kernels                list the kernel catalogue\n"
    "  health                 check that the daemon answers\n"
    "\n"
    "Global options (anywhere on the line):\n"
    "  --url URL              daemon address (default $SPMV_URL, else http://127.0.0.1:8080)\n"
    "  --token-file FILE      bearer token read from FILE (default $SPMV_TOKEN)\n"
    "  --ca-file FILE         CA bundle for https; --insecure skips verification\n"
    "  --timeout SECONDS      limit for each request (default none)\n"
    "  --json                 print the server's JSON instead of tables\n"
    "  -h, --help             this text; COMMAND --help for a command's options\n"
    "\n"
    "Exit status: 0 success, 1 usage error, 2 the server refused the request\n"
    "(4xx: unknown id, bad matrix, bad kernel), 3 the server could not be reached\n"
    "or timed out, 4 server error (5xx, busy, job failed), 5 malformed answer,\n"
    "6 local error (file unreadable or unwritable).\n";

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
    if (c->json) print_json_text(m->json);
    else print_matrix(m);
    spmv_client_matrix_free(m);
    return EXIT_OK;
}

static int cmd_rm(ctl *c, int argc, char **argv)
{
    int rc = EXIT_OK;
    if (argc == 0) return usage_error("rm needs a matrix id%s", "");
    for (int i = 0; i < argc; i++) {
        spmv_client_status st = spmv_client_delete(c->h, argv[i]);
        if (st != SPMV_CLIENT_OK)
            rc = report(c, argv[i], st);
        else if (!c->json)
            printf("deleted %s\n", argv[i]);
    }
    return rc;
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
    if (c->json) print_json_text(m->json);
    else print_matrix(m);
    spmv_client_matrix_free(m);
    return EXIT_OK;
}

/* ---------------------------------------------------------------- vectors */

/* Reads whitespace-separated numbers ("-": stdin); exactly n of them. */
static int read_vector(const char *path, double *x, size_t n)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    size_t i = 0;
    char tok[128];
    int rc = EXIT_LOCAL;

    if (!f) {
        fprintf(stderr, "spmvctl: %s: %s\n", path, strerror(errno));
        return EXIT_LOCAL;
    }
    while (fscanf(f, "%127s", tok) == 1) {
        char *end;
        errno = 0;
        double v = strtod(tok, &end);
        if (*end || end == tok) {
            fprintf(stderr, "spmvctl: %s: value %zu is not a number: %s\n", path, i + 1, tok);
            goto done;
        }
        if (i == n) {
            fprintf(stderr, "spmvctl: %s: more than the %zu values the matrix has columns\n", path, n);
            goto done;
        }
        x[i++] = v;
    }
    if (i != n) {
        fprintf(stderr, "spmvctl: %s: %zu values, the matrix has %zu columns\n", path, i, n);
        goto done;
    }
    rc = EXIT_OK;
done:
    if (f != stdin) fclose(f);
    return rc;
}

static int write_vector(const char *path, const double *y, size_t n)
{
    FILE *f = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
    if (!f) {
        fprintf(stderr, "spmvctl: %s: %s\n", path, strerror(errno));
        return EXIT_LOCAL;
    }
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%.17g\n", y[i]);
    bool ok = !ferror(f);
    if (f != stdout) ok = fclose(f) == 0 && ok;
    if (!ok) {
        fprintf(stderr, "spmvctl: writing %s failed\n", path);
        return EXIT_LOCAL;
    }
    return EXIT_OK;
}

/* JSON has no NaN: a number that is not finite is written as null. */
static json_t *json_finite(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
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
        json_object_set_new(o, "kernel", json_string(r->kernel));
        json_object_set_new(o, "stats", st);
        json_object_set_new(o, "queue_ms", json_finite(r->queue_ms));
        json_object_set_new(o, "request_ms", json_finite(r->request_ms));
        json_object_set_new(o, "max_rel_err", json_finite(r->max_rel_err));
        json_object_set_new(o, "rows", json_integer((json_int_t)n));
        json_object_set_new(o, "y_norm2", json_finite(norm));
        char *text = json_dumps(o, JSON_INDENT(2));
        puts(text ? text : "{}");
        free(text);
        json_decref(o);
        return;
    }
    printf("kernel       %s\n", r->kernel);
    printf("runs         %d (+%d warm-up)\n", s->runs, s->warmup);
    printf("time         mean %.4f ms, stddev %.4f, min %.4f, median %.4f, max %.4f\n", s->mean_ms, s->stddev_ms,
           s->min_ms, s->median_ms, s->max_ms);
    printf("throughput   %.3f GFLOP/s, %.3f GB/s\n", s->gflops, s->gbps);
    printf("queue        %.3f ms\nrequest      %.3f ms (client side, whole exchange)\n", r->queue_ms, r->request_ms);
    if (!isnan(r->max_rel_err)) printf("verify       max relative error %.3g\n", r->max_rel_err);
    printf("y            %zu values, 2-norm %.17g\n", n, norm);
}

/* spmv works in float64 on the command line; a float32 matrix gets its x
 * rounded and its y widened here. */
static int run_spmv(ctl *c, const spmv_client_matrix *m, const double *x, double *y, spmv_client_spmv_result *res)
{
    spmv_client_spmv_options o = {.kernel = c->kernel, .runs = c->runs, .warmup = c->warmup,
                                  .verify = c->verify, .params = c->params};
    size_t nx = (size_t)m->cols, ny = (size_t)m->rows;
    spmv_client_status st;
    if (m->dtype == SPMV_CLIENT_FLOAT64) {
        st = spmv_client_multiply(c->h, m->id, SPMV_CLIENT_FLOAT64, x, nx, y, ny, &o, res);
    } else {
        float *xf = malloc((nx ? nx : 1) * sizeof *xf), *yf = malloc((ny ? ny : 1) * sizeof *yf);
        if (!xf || !yf) {
            free(xf), free(yf);
            fprintf(stderr, "spmvctl: out of memory\n");
            return EXIT_LOCAL;
        }
        for (size_t i = 0; i < nx; i++) xf[i] = (float)x[i];
        st = spmv_client_multiply(c->h, m->id, SPMV_CLIENT_FLOAT32, xf, nx, yf, ny, &o, res);
        for (size_t i = 0; st == SPMV_CLIENT_OK && i < ny; i++) y[i] = yf[i];
        free(xf), free(yf);
    }
    return st == SPMV_CLIENT_OK ? EXIT_OK : report(c, "spmv", st);
}

static int cmd_spmv(ctl *c, int argc, char **argv)
{
    spmv_client_matrix *m = NULL;
    double *x = NULL, *y = NULL;
    spmv_client_spmv_result res;
    int rc;

    if (argc != 1) return usage_error("spmv needs exactly one matrix id%s", "");
    if (!c->x_file) return usage_error("spmv needs --x FILE%s", "");
    spmv_client_status st = spmv_client_describe(c->h, argv[0], &m);
    if (st != SPMV_CLIENT_OK) return report(c, argv[0], st);
    /* The descriptor's sizes decide two allocations: bound them first. */
    if ((uint64_t)m->rows > SIZE_MAX / 8 || (uint64_t)m->cols > SIZE_MAX / 8) {
        fprintf(stderr, "spmvctl: %s: %" PRId64 " x %" PRId64 " is too large for this host\n", m->id, m->rows,
                m->cols);
        rc = EXIT_LOCAL;
        goto done;
    }
    x = malloc((size_t)(m->cols ? m->cols : 1) * sizeof *x);
    y = malloc((size_t)(m->rows ? m->rows : 1) * sizeof *y);
    rc = EXIT_LOCAL;
    if (!x || !y) {
        fprintf(stderr, "spmvctl: out of memory for %" PRId64 " x %" PRId64 "\n", m->rows, m->cols);
        goto done;
    }
    if ((rc = read_vector(c->x_file, x, (size_t)m->cols)) != EXIT_OK) goto done;
    if ((rc = run_spmv(c, m, x, y, &res)) != EXIT_OK) goto done;
    double norm = 0;
    for (int64_t i = 0; i < m->rows; i++) norm += y[i] * y[i];
    if (c->y_out && (rc = write_vector(c->y_out, y, (size_t)m->rows)) != EXIT_OK) goto done;
    if (!c->y_out || strcmp(c->y_out, "-") != 0)
        print_spmv_result(c, &res, (size_t)m->rows, sqrt(norm));
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
        char *text = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
        puts(text ? text : "{}");
        free(text);
        json_decref(o);
        return;
    }
    printf("kernel       %s\n", r->kernel);
    printf("runs         %d (+%d warm-up)\n", s->runs, s->warmup);
    printf("time         mean %.4f ms, stddev %.4f, min %.4f, median %.4f, max %.4f\n", s->mean_ms, s->stddev_ms,
           s->min_ms, s->median_ms, s->max_ms);
    printf("throughput   %.3f GFLOP/s (%" PRId64 " multiply-adds), %.3f GB/s\n", s->gflops, r->madds, s->gbps);
    printf("queue        %.3f ms\nrequest      %.3f ms (client side, whole exchange)\n", r->queue_ms, r->request_ms);
    if (!isnan(r->max_rel_err)) printf("verify       max relative error %.3g\n", r->max_rel_err);
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

static void print_bench_table(const char *result_text)
{
    json_t *result = json_loads(result_text ? result_text : "null", JSON_DECODE_ANY, NULL);
    const json_t *rows = bench_rows(result);
    if (!rows) {
        print_json_text(result_text);
        json_decref(result);
        return;
    }
    printf("%-24s %-26s %10s %10s %9s %9s %9s %10s\n", "KERNEL", "PARAMS", "MEAN_MS", "MEDIAN_MS", "GFLOPS", "GB/S",
           "SPEEDUP", "MAX_ERR");
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
        printf("%-24s %-26s %10.4f %10.4f %9.3f %9.3f %9.2f %10.2g%s%s\n", k ? k : "?", ptext,
               row_num(row, "mean_ms"), row_num(row, "median_ms"), row_num(row, "gflops"), row_num(row, "gbps"),
               row_num(row, "speedup"), err, error ? "  " : "", error ? error : "");
    }
    const json_t *skipped = json_object_get(result, "skipped");
    json_array_foreach(skipped, i, row) {
        const char *k = json_string_value(json_object_get(row, "kernel"));
        const char *why = json_string_value(json_object_get(row, "reason"));
        printf("skipped %s: %s\n", k ? k : "?", why ? why : "");
    }
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
    spmv_client_status st = spmv_client_bench_start(c->h, argv[0], &o, job_id);
    free(list);
    if (st != SPMV_CLIENT_OK) return report(c, argv[0], st);
    if (c->no_wait) {
        printf(c->json ? "{\"job\": \"%s\"}\n" : "%s\n", job_id);
        return EXIT_OK;
    }
    bar b = {.label = "bench"};
    st = spmv_client_job_wait(c->h, job_id, 200, isatty(STDERR_FILENO) ? progress_bar : NULL, &b, &j);
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
    spmv_client_status st = spmv_client_job_get(c->h, argv[0], &j);
    if (st != SPMV_CLIENT_OK) return report(c, argv[0], st);
    int rc = show_job(c, j);
    if (strcmp(j->state, "failed") == 0)
        rc = report(c, argv[0], SPMV_CLIENT_ERR_JOB_FAILED);
    spmv_client_job_free(j);
    return rc;
}

static const command commands[] = {
    {"upload", cmd_upload,
     "usage: spmvctl upload FILE [--name NAME] [--dtype float64|float32] [--formats csr,hll,...]\n"
     "                           [--device cpu|gpuN] [--hack-size N]\n"
     "Uploads a Matrix Market file (.mtx or .mtx.gz) and prints its descriptor;\n"
     "with --json the descriptor JSON, whose \"id\" names the matrix from then on.\n"},
    {"ls", cmd_ls, "usage: spmvctl ls\nLists the stored matrices, one per line.\n"},
    {"info", cmd_info, "usage: spmvctl info [ID]\nDescribes matrix ID; without ID, the server (version, build, devices, limits).\n"},
    {"rm", cmd_rm, "usage: spmvctl rm ID...\nDeletes matrices (host, device and stored copies).\n"},
    {"spmv", cmd_spmv,
     "usage: spmvctl spmv ID --x FILE [--kernel K] [--y-out FILE] [--runs N] [--warmup N]\n"
     "                       [--verify] [--param KEY=VALUE]...\n"
     "Computes y = A*x on the daemon. FILE holds x as numbers separated by white space\n"
     "(\"-\" reads stdin), as many as the matrix has columns. --y-out writes y one value\n"
     "per line with 17 significant digits (\"-\" for stdout). Prints the kernel's timing.\n"},
    {"bench", cmd_bench,
     "usage: spmvctl bench ID [--kernels a,b,...] [--runs N] [--warmup N] [--no-wait]\n"
     "Benchmarks the listed kernels (default: all available) as a job, waits for it\n"
     "(a progress bar on a terminal) and prints the table. --no-wait prints the job id.\n"},
    {"spmspm", cmd_spmspm,
     "usage: spmvctl spmspm A B [--kernel K] [--store] [--c-out FILE] [--runs N] [--warmup N]\n"
     "                         [--verify] [--param KEY=VALUE]...\n"
     "Computes C = A*B on the daemon (A's columns must equal B's rows) and prints the\n"
     "kernel's timing and C's shape. --c-out writes C as a Matrix Market file (\"-\" for\n"
     "stdout); --store keeps C on the daemon as a new matrix and prints its descriptor.\n"},
    {"job", cmd_job, "usage: spmvctl job JOB_ID\nShows a job's state, progress and result.\n"},
    {"kernels", cmd_kernels, "usage: spmvctl kernels\nLists the kernel catalogue with availability.\n"},
    {"health", cmd_health, "usage: spmvctl health\nChecks that the daemon answers; exit status 0 when it does.\n"},
};

/* ---------------------------------------------------------------- options */

enum {
    OPT_URL = 256, OPT_TOKEN_FILE, OPT_CA_FILE, OPT_INSECURE, OPT_TIMEOUT, OPT_JSON, OPT_NAME, OPT_DTYPE,
    OPT_FORMATS, OPT_DEVICE, OPT_HACK, OPT_KERNEL, OPT_X, OPT_Y_OUT, OPT_RUNS, OPT_WARMUP, OPT_VERIFY,
    OPT_PARAM, OPT_KERNELS, OPT_NO_WAIT, OPT_STORE, OPT_C_OUT,
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

/* One option into c; EXIT_OK or EXIT_USAGE. */
static int take_option(ctl *c, int opt, const char *arg, bool *help)
{
    long v;
    double secs;
    char *end;
    switch (opt) {
    case OPT_URL: c->url = arg; break;
    case OPT_TOKEN_FILE: c->token_file = arg; break;
    case OPT_CA_FILE: c->ca_file = arg; break;
    case OPT_INSECURE: c->insecure = true; break;
    case OPT_JSON: c->json = true; break;
    case OPT_TIMEOUT:
        secs = strtod(arg, &end);
        if (*end || end == arg || !(secs > 0 && secs < 1e6)) return usage_error("--timeout wants seconds > 0, not %s", arg);
        c->timeout_ms = (long)ceil(secs * 1000);
        break;
    case OPT_NAME: c->name = arg; break;
    case OPT_DTYPE: c->dtype = arg; break;
    case OPT_FORMATS: c->formats = arg; break;
    case OPT_DEVICE: c->device = arg; break;
    case OPT_HACK:
        if (!parse_int(arg, 1, 1 << 20, &v)) return usage_error("--hack-size wants a positive integer, not %s", arg);
        c->hack_size = (int)v;
        break;
    case OPT_KERNEL: c->kernel = arg; break;
    case OPT_X: c->x_file = arg; break;
    case OPT_Y_OUT: c->y_out = arg; break;
    case OPT_RUNS:
        if (!parse_int(arg, 1, INT_MAX, &v)) return usage_error("--runs wants a positive integer, not %s", arg);
        c->runs = (int)v;
        break;
    case OPT_WARMUP:
        if (!parse_int(arg, 0, INT_MAX, &v)) return usage_error("--warmup wants an integer >= 0, not %s", arg);
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
    case 'h': *help = true; break;
    default: return usage_error("unknown option%s", "");
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
    if (!c->url) c->url = getenv("SPMV_URL");
    if (!c->url || !*c->url) c->url = "http://127.0.0.1:8080";
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
    return EXIT_OK;
}

int main(int argc, char **argv)
{
    ctl c = {0};
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
    if ((rc = connect_client(&c)) != EXIT_OK) return rc;
    rc = cmd->run(&c, argc - optind - 1, argv + optind + 1);
    spmv_client_free(c.h);
    return rc;
}
