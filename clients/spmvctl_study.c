/* spmvctl_study.c — `spmvctl study DIR`: a collection study through libspmvclient.
 *
 * Two halves, joined by results.json (format "spmvd-study/2", the same as
 * the Python package's spmvd.study writes):
 *
 * - collecting: every .mtx, .mtx.gz and .npz file of DIR is uploaded once
 *   per dtype, benched (POST .../bench with "stat": "mean", and "threads":
 *   0 (each kernel's default team: the "spmv" records) then 1, 2, 4 ...
 *   cores, the bench's thread sweep of the CPU kernels taking `threads`:
 *   the "threads" records, with the bench's efficiency against
 *   cpu.csr.serial), the SpMSpM kernels multiply it by a thin B (cols x 8,
 *   row i one entry in column i mod 8), and what was uploaded is deleted. Each measurement becomes one flat record; an upload or a
 *   kernel the daemon refused becomes a record with its error, a file
 *   that is no matrix an entry "ignored": nothing is dropped silently.
 * - rendering: report.md and results.csv from results.json. The tables,
 *   their order and every number format follow clients/python/spmvd/study.py
 *   line by line, so the two tools print the same bytes for the same JSON
 *   (tests/e2e/study.sh compares them). `--from FILE` renders only.
 *
 * Times are means; GFLOP/s and GB/s are the bench's, at the mean (SpMSpM's
 * route takes no `stat`: spmspm_at_mean() scales its median rates). The host's
 * load average at the start goes into results.json. --plot hands results.json to
 * `python3 -m spmvd.study plot` ($SPMVD_PYTHON, else python3) for the PNGs.
 */
#include "spmvctl_study.h"

#include <jansson.h>

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FORMAT "spmvd-study/2"
#define BASELINE "cpu.csr.serial"
/* SpMSpM's kernel 0, the first of these the catalogue has: report 003's
 * sequential baseline where the daemon has it, else the reference. */
static const char *const spmspm_bases[] = {"cpu.spmspm.hash", "cpu.spmspm.serial"};
#define SPMSPM_COLS 8

enum { S_OK = 0, S_USAGE = 1, S_LOCAL = 6 };

static const long long nnz_limits[] = {0, 10000, 100000};

/* ------------------------------------------------------------ small helpers */

static json_t *str_or_null(const char *s) { return s ? json_string(s) : json_null(); }

static json_t *num_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static const char *sget(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

static long long iget(const json_t *o, const char *key) { return json_integer_value(json_object_get(o, key)); }

/* A number member, or NAN for null / absent / "NaN". */
static double nget(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* "a,b,c" into a JSON array of strings ("none" and "" give an empty one). */
static json_t *split_names(const char *list)
{
    json_t *a = json_array();
    char *copy = strdup(list), *save = NULL;
    if (!copy) return a;
    if (strcmp(copy, "none") != 0)
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) json_array_append_new(a, json_string(t));
    free(copy);
    return a;
}

static bool array_has(const json_t *a, const char *s)
{
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v) if (strcmp(json_string_value(v), s) == 0) return true;
    return false;
}

/* The daemon's error as "message (code, HTTP status)", or the library's. */
static void error_text(spmv_client *h, spmv_client_status st, char *buf, size_t cap)
{
    const char *msg = spmv_client_errmsg(h), *code = spmv_client_errcode(h);
    if (code && *code)
        snprintf(buf, cap, "%s (%s, HTTP %ld)", msg ? msg : "", code, spmv_client_http_status(h));
    else
        snprintf(buf, cap, "%s%s%s", spmv_client_strerror(st), msg && *msg ? ": " : "", msg ? msg : "");
}

/* ------------------------------------------------------------- the options */

static void cpu_model(char *buf, size_t cap)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    snprintf(buf, cap, "unknown");
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon) continue;
        colon++;
        while (*colon == ' ' || *colon == '\t') colon++;
        colon[strcspn(colon, "\n")] = '\0';
        snprintf(buf, cap, "%s", colon);
        break;
    }
    if (f) fclose(f);
}

/* "server": version, cuda, cores, gpus ["gpu0: model"], gpu_unavailable_reason. */
static json_t *server_of(const json_t *info)
{
    json_t *gpus = json_array();
    long long cores = 1;
    size_t i;
    const json_t *d;
    json_array_foreach(json_object_get(info, "devices"), i, d) {
        if (strcmp(sget(d, "kind"), "cpu") == 0) {
            cores = iget(d, "cores") > 0 ? iget(d, "cores") : 1;
            continue;
        }
        char g[256];
        snprintf(g, sizeof g, "%s: %s", sget(d, "name"), json_object_get(d, "model") ? sget(d, "model") : "?");
        json_array_append_new(gpus, json_string(g));
    }
    return json_pack("{s:s, s:b, s:I, s:o, s:s}", "version", sget(info, "version"), "cuda",
                     json_is_true(json_object_get(json_object_get(info, "build"), "cuda")), "cores", (json_int_t)cores,
                     "gpus", gpus, "gpu_unavailable_reason", sget(info, "gpu_unavailable_reason"));
}

/* Every available kernel of `op` on `device` but auto, `base` first. */
static json_t *default_kernels(const json_t *cat, const char *device, const char *op, const char *base)
{
    json_t *a = json_pack("[s]", base);
    size_t i;
    const json_t *k;
    json_array_foreach(cat, i, k) {
        const char *kop = json_object_get(k, "op") ? sget(k, "op") : "spmv";
        if (json_is_true(json_object_get(k, "available")) && strcmp(kop, op) == 0 &&
            strcmp(sget(k, "device"), device) == 0 && strcmp(sget(k, "name"), "auto") != 0 &&
            strcmp(sget(k, "name"), base) != 0)
            json_array_append_new(a, json_string(sget(k, "name")));
    }
    return a;
}

/* The CPU kernels of `ks` that take `threads`. */
static json_t *thread_kernels(const json_t *cat, const json_t *ks)
{
    json_t *out = json_array();
    size_t i, j, p;
    const json_t *k, *c, *par;
    json_array_foreach(ks, i, k) json_array_foreach(cat, j, c) {
        if (strcmp(sget(c, "name"), json_string_value(k)) != 0 || strcmp(sget(c, "device"), "cpu") != 0) continue;
        json_array_foreach(json_object_get(c, "params"), p, par)
            if (strcmp(sget(par, "name"), "threads") == 0) json_array_append(out, (json_t *)k);
    }
    return out;
}

static json_t *thread_counts(const char *list, long long cores)
{
    json_t *a = json_array();
    if (list) {
        char *copy = strdup(list), *save = NULL;
        for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save))
            json_array_append_new(a, json_integer(atoll(t)));
        free(copy);
        return a;
    }
    long long t = 1;
    for (; t <= cores; t *= 2) json_array_append_new(a, json_integer(t));
    if (t / 2 != cores) json_array_append_new(a, json_integer(cores));
    return a;
}

/* The first name of `names` that no kernel of `op` in the catalogue has, or NULL. */
static const char *unknown_kernel(const json_t *cat, const json_t *names, const char *op)
{
    size_t i, j;
    const json_t *n, *k;
    json_array_foreach(names, i, n) {
        bool found = false;
        json_array_foreach(cat, j, k) found |= !strcmp(sget(k, "name"), json_string_value(n)) &&
                                               !strcmp(json_object_get(k, "op") ? sget(k, "op") : "spmv", op);
        if (!found) return json_string_value(n);
    }
    return NULL;
}

/* "options" of results.json; NULL (and a message) when the daemon is not there
 * or a kernel named is none of its catalogue's. */
static json_t *options_of(spmv_client *h, const study_options *o, json_t **server, int *rc)
{
    char *info_text = NULL;
    spmv_client_kernel_list *kl = NULL;
    spmv_client_status st = spmv_client_info(h, &info_text);
    if (st == SPMV_CLIENT_OK) st = spmv_client_kernels(h, &kl);
    if (st != SPMV_CLIENT_OK) {
        char why[1200];
        error_text(h, st, why, sizeof why);
        fprintf(stderr, "spmvctl: study: %s\n", why);
        spmv_client_string_free(info_text);
        *rc = spmvctl_exit_for(st);
        return NULL;
    }
    json_t *info = json_loads(info_text, 0, NULL), *katalog = json_loads(kl->json, 0, NULL);
    json_t *cat = json_object_get(katalog, "kernels");
    *server = server_of(info);
    const char *dev = json_array_size(json_object_get(*server, "gpus")) && !(o->device && !strcmp(o->device, "cpu"))
                      ? "gpu" : "cpu";
    json_t *ks = o->kernels ? split_names(o->kernels) : default_kernels(cat, dev, "spmv", BASELINE);
    if (!array_has(ks, BASELINE)) json_array_insert_new(ks, 0, json_string(BASELINE));
    const char *sbase = spmspm_bases[1];
    size_t i;
    const json_t *k;
    for (int b = 1; b >= 0; b--)
        json_array_foreach(cat, i, k) if (!strcmp(sget(k, "name"), spmspm_bases[b]) &&
                                          json_is_true(json_object_get(k, "available"))) sbase = spmspm_bases[b];
    json_t *sk = o->spmspm ? split_names(o->spmspm) : default_kernels(cat, dev, "spmspm", sbase);
    const char *bad = unknown_kernel(cat, ks, "spmv"), *bad2 = unknown_kernel(cat, sk, "spmspm");
    if (bad || bad2) {
        fprintf(stderr, "spmvctl: study: %s names %s, which is no %s kernel of the daemon's catalogue (spmvctl "
                        "kernels lists them)\n", bad ? "--kernels" : "--spmspm", bad ? bad : bad2, bad ? "SpMV" : "SpMSpM");
        *rc = 1;
    }
    char dir[PATH_MAX];
    if (!realpath(o->dir, dir)) snprintf(dir, sizeof dir, "%s", o->dir);
    json_t *opts = json_pack("{s:s, s:O, s:o, s:o, s:o, s:o, s:I, s:I, s:I, s:s}", "dir", dir, "kernels", ks,
                             "spmspm_kernels", sk, "thread_kernels", thread_kernels(cat, ks),
                             "threads", thread_counts(o->threads, iget(*server, "cores")),
                             "dtypes", split_names(o->dtypes ? o->dtypes : "float32,float64"),
                             "runs", (json_int_t)o->runs, "warmup", (json_int_t)o->warmup,
                             "max_nnz", (json_int_t)o->max_nnz, "stat", "mean");
    json_object_set_new(opts, "device", str_or_null(o->device));
    json_decref(ks);
    json_decref(info);
    json_decref(katalog);
    spmv_client_string_free(info_text);
    spmv_client_kernel_list_free(kl);
    if (bad || bad2) {
        json_decref(opts);
        json_decref(*server);
        return NULL;
    }
    return opts;
}

/* ----------------------------------------------------------------- records */

/* One flat record from `stats` (may be NULL), whose rates are at the mean. */
static json_t *record(const char *file, const char *dtype, const char *kind, const char *kernel, json_t *params,
                      const spmv_client_stats *s, const char *error)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:n, s:n, s:n, s:n, s:o}",
                     "file", file, "dtype", dtype, "kind", kind, "kernel", kernel,
                     "params", params ? params : json_object(), "mean_ms", num_or_null(s ? s->mean_ms : NAN),
                     "median_ms", num_or_null(s ? s->median_ms : NAN), "min_ms", num_or_null(s ? s->min_ms : NAN),
                     "max_ms", num_or_null(s ? s->max_ms : NAN), "stddev_ms", num_or_null(s ? s->stddev_ms : NAN),
                     "gflops", num_or_null(s ? s->gflops : NAN), "gbps", num_or_null(s ? s->gbps : NAN),
                     "verified", "max_rel_err", "threads_used", "efficiency", "error", str_or_null(error));
}

/* SpMSpM's rates at the mean: its route takes no `stat` and answers at the median. */
static void spmspm_at_mean(spmv_client_stats *s)
{
    bool ok = isfinite(s->mean_ms) && isfinite(s->median_ms) && s->mean_ms != 0 && s->median_ms != 0;
    s->gflops = ok ? s->gflops * s->median_ms / s->mean_ms : NAN;
    s->gbps = ok ? s->gbps * s->median_ms / s->mean_ms : NAN;
}

/* A bench row's stats object as the library's struct. */
static spmv_client_stats stats_of(const json_t *st)
{
    spmv_client_stats s = {.mean_ms = nget(st, "mean_ms"), .median_ms = nget(st, "median_ms"),
                           .min_ms = nget(st, "min_ms"), .max_ms = nget(st, "max_ms"),
                           .stddev_ms = nget(st, "stddev_ms"), .gflops = nget(st, "gflops"), .gbps = nget(st, "gbps")};
    return s;
}

/* The bench's rows: "threads" records where the sweep set a count, "spmv" ones at the default team (0). */
static void bench_records(json_t *recs, const char *file, const char *dtype, const json_t *table)
{
    size_t i;
    const json_t *row;
    json_array_foreach(json_object_get(table, "results"), i, row) {
        const json_t *ev = json_object_get(row, "error"), *st = json_object_get(row, "stats");
        const char *err = json_is_string(ev) ? json_string_value(ev) : json_string_value(json_object_get(ev, "message"));
        const json_t *params = json_object_get(row, "params"), *ver = json_object_get(row, "verified");
        const char *kind = json_integer_value(json_object_get(params, "threads")) > 0 ? "threads" : "spmv";
        spmv_client_stats s = stats_of(st);
        json_t *r = record(file, dtype, kind, sget(row, "kernel"), json_deep_copy(params), st ? &s : NULL, err);
        if (json_is_boolean(ver)) json_object_set(r, "verified", (json_t *)ver);
        json_object_set_new(r, "max_rel_err", num_or_null(nget(row, "max_rel_err")));
        if (json_is_integer(json_object_get(row, "threads_used")))
            json_object_set(r, "threads_used", json_object_get(row, "threads_used"));
        json_object_set_new(r, "efficiency", num_or_null(nget(row, "efficiency")));
        json_array_append_new(recs, r);
    }
    json_array_foreach(json_object_get(table, "skipped"), i, row) {
        const char *why = json_string_value(json_object_get(row, "reason"));
        json_array_append_new(recs, record(file, dtype, "spmv", sget(row, "kernel"), NULL, NULL, why ? why : "skipped"));
    }
}

/* The bench's body: the kernels, runs, warm-ups, "stat": "mean" and, when a kernel takes threads, the
 * thread counts after 0 (each kernel's default team, what the tables compare). */
static char *bench_body(const json_t *opts)
{
    json_t *ts = json_pack("[i]", 0);
    size_t i;
    const json_t *t;
    json_array_foreach(json_object_get(opts, "threads"), i, t)
        if (json_integer_value(t) != 0) json_array_append(ts, (json_t *)t);
    json_t *b = json_pack("{s:O, s:I, s:I, s:s}", "kernels", json_object_get(opts, "kernels"), "runs",
                          (json_int_t)iget(opts, "runs"), "warmup", (json_int_t)iget(opts, "warmup"), "stat", "mean");
    if (json_array_size(json_object_get(opts, "thread_kernels"))) json_object_set(b, "threads", ts);
    char *text = json_dumps(b, JSON_COMPACT);
    json_decref(ts);
    json_decref(b);
    return text;
}

static void bench_one(spmv_client *h, json_t *recs, const char *id, const char *file, const char *dtype,
                      const json_t *opts)
{
    char job[64], why[1200], *body = bench_body(opts);
    spmv_client_job *j = NULL;
    spmv_client_status st = body ? spmv_client_bench_start_json(h, id, body, job) : SPMV_CLIENT_ERR_NOMEM;
    if (st == SPMV_CLIENT_OK) st = spmv_client_job_wait(h, job, 1000, NULL, NULL, &j);
    json_t *table = st == SPMV_CLIENT_OK && j->result ? json_loads(j->result, 0, NULL) : NULL;
    if (table) {
        bench_records(recs, file, dtype, table);
    } else {
        error_text(h, st, why, sizeof why);
        json_array_append_new(recs, record(file, dtype, "spmv", "bench", NULL, NULL, why));
    }
    json_decref(table);
    spmv_client_job_free(j);
    free(body);
}

/* B = cols x 8, row i: (i, i mod 8) = 1 + (i mod 7)/8, as Matrix Market text. */
static char *thin_b(int64_t cols, size_t *len)
{
    size_t cap = 128 + (size_t)cols * 48, n;
    char *t = malloc(cap);
    if (!t) return NULL;
    n = (size_t)snprintf(t, cap, "%%%%MatrixMarket matrix coordinate real general\n%lld %d %lld\n", (long long)cols,
                         SPMSPM_COLS, (long long)cols);
    for (int64_t i = 0; i < cols; i++)
        n += (size_t)snprintf(t + n, cap - n, "%lld %d %.17g\n", (long long)i + 1, (int)(i % SPMSPM_COLS) + 1,
                              1.0 + (double)(i % 7) / 8.0);
    *len = n;
    return t;
}

static void spmspm_records(spmv_client *h, json_t *recs, const spmv_client_matrix *a, const char *file,
                           const char *dtype, const json_t *opts)
{
    const json_t *ks = json_object_get(opts, "spmspm_kernels");
    char name[512], why[1200];
    size_t len = 0, i;
    const json_t *k;
    spmv_client_matrix *b = NULL;
    if (!json_array_size(ks)) return;
    char *text = thin_b(a->cols, &len);
    snprintf(name, sizeof name, "%s-thin-b", file);
    spmv_client_upload_options uo = {.name = name, .dtype = dtype, .device = a->device};
    spmv_client_status st = text ? spmv_client_upload_memory(h, text, len, &uo, &b) : SPMV_CLIENT_ERR_NOMEM;
    free(text);
    if (st != SPMV_CLIENT_OK) {
        char e[1100];
        error_text(h, st, e, sizeof e);
        snprintf(why, sizeof why, "B not uploaded: %s", e);
    }
    json_array_foreach(ks, i, k) {
        spmv_client_spmspm_result res;
        spmv_client_coo *c = NULL;
        spmv_client_spmspm_options so = {.kernel = json_string_value(k), .runs = (int)iget(opts, "runs"),
                                         .warmup = (int)iget(opts, "warmup")};
        spmv_client_status s2 = b ? spmv_client_spmspm(h, a->id, b->id, &so, &c, NULL, &res) : st;
        if (b && s2 != SPMV_CLIENT_OK) error_text(h, s2, why, sizeof why);
        if (s2 == SPMV_CLIENT_OK) spmspm_at_mean(&res.stats);
        json_array_append_new(recs, record(file, dtype, "spmspm", json_string_value(k), NULL,
                                           s2 == SPMV_CLIENT_OK ? &res.stats : NULL, s2 == SPMV_CLIENT_OK ? NULL : why));
        spmv_client_coo_free(c);
    }
    if (b) spmv_client_delete(h, b->id);
    spmv_client_matrix_free(b);
}

/* One dtype of one file; false when its upload failed (recorded in recs). */
static bool one_dtype(spmv_client *h, const char *path, const char *file, const char *dtype, const json_t *opts,
                      json_t *entry, json_t *recs)
{
    spmv_client_matrix *m = NULL;
    char why[1200];
    spmv_client_upload_options uo = {.name = file, .dtype = dtype, .device = json_string_value(json_object_get(opts, "device"))};
    spmv_client_status st = spmv_client_upload_file(h, path, &uo, &m);
    if (st != SPMV_CLIENT_OK) {
        error_text(h, st, why, sizeof why);
        json_array_append_new(recs, record(file, dtype, "upload", "-", NULL, NULL, why));
        return false;
    }
    json_object_set_new(entry, "rows", json_integer(m->rows));
    json_object_set_new(entry, "cols", json_integer(m->cols));
    json_object_set_new(entry, "nnz", json_integer(m->nnz));
    long long max = iget(opts, "max_nnz");
    if (max && m->nnz > max) {
        snprintf(why, sizeof why, "nnz %lld is over --max-nnz %lld", (long long)m->nnz, max);
        json_object_set_new(entry, "status", json_string("skipped"));
        json_object_set_new(entry, "reason", json_string(why));
    } else {
        json_object_set_new(entry, "status", json_string("ok"));
        bench_one(h, recs, m->id, file, dtype, opts);
        spmspm_records(h, recs, m, file, dtype, opts);
    }
    spmv_client_delete(h, m->id);
    spmv_client_matrix_free(m);
    return true;
}

/* Every dtype of one file into entry and all_recs. */
static void one_matrix(spmv_client *h, const char *dir, const char *file, const json_t *opts, json_t *entry,
                       json_t *all_recs)
{
    char path[PATH_MAX];
    json_t *recs = json_array();
    size_t i;
    const json_t *d;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    json_array_foreach(json_object_get(opts, "dtypes"), i, d) {
        one_dtype(h, path, file, json_string_value(d), opts, entry, recs);
        if (strcmp(sget(entry, "status"), "skipped") == 0) {
            json_array_clear(recs);
            break;
        }
    }
    if (strcmp(sget(entry, "status"), "pending") == 0) {
        char reason[4096] = "";
        size_t n = 0;
        const json_t *r;
        json_array_foreach(recs, i, r) {
            if (n >= sizeof reason) break;
            n += (size_t)snprintf(reason + n, sizeof reason - n, "%s%s: %s", i ? "; " : "", sget(r, "dtype"),
                                  sget(r, "error"));
        }
        json_object_set_new(entry, "status", json_string("error"));
        json_object_set_new(entry, "reason", json_string(reason));
        json_array_clear(recs);
    }
    json_array_extend(all_recs, recs);
    json_decref(recs);
}

static bool is_matrix_file(const char *name)
{
    static const char *const sfx[] = {".mtx", ".mtx.gz", ".npz"};
    size_t n = strlen(name);
    for (size_t i = 0; i < 3; i++)
        if (n >= strlen(sfx[i]) && strcmp(name + n - strlen(sfx[i]), sfx[i]) == 0) return true;
    return false;
}

/* "matrices" (every entry of dir: matrix files in name order, then the others as ignored) and "records". */
static int collect_dir(spmv_client *h, const char *dir, const json_t *opts, json_t *matrices, json_t *recs)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    if (n < 0) {
        fprintf(stderr, "spmvctl: study: %s: %s\n", dir, strerror(errno));
        return S_LOCAL;
    }
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++) {
            const char *f = names[i]->d_name;
            char path[PATH_MAX];
            struct stat sb;
            snprintf(path, sizeof path, "%s/%s", dir, f);
            if (!strcmp(f, ".") || !strcmp(f, "..")) continue;
            bool mat = is_matrix_file(f) && !(stat(path, &sb) == 0 && S_ISDIR(sb.st_mode));
            if (mat != (pass == 0)) continue;
            json_t *e = json_pack("{s:s, s:i, s:i, s:i, s:s, s:s}", "file", f, "rows", 0, "cols", 0, "nnz", 0,
                                  "status", mat ? "pending" : "ignored",
                                  "reason", mat ? "" : "not a matrix file (.mtx, .mtx.gz, .npz)");
            json_array_append_new(matrices, e);
            if (mat) one_matrix(h, dir, f, opts, e, recs);
        }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    return S_OK;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The whole results.json, or NULL with *rc set. */
static json_t *collect(spmv_client *h, const study_options *o, int *rc)
{
    double t0 = now_s();
    char started[32], model[256], host[256] = "", tool[64];
    time_t now = time(NULL);
    double la[3] = {NAN, NAN, NAN};
    strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    json_t *server = NULL, *opts = options_of(h, o, &server, rc), *load = json_array();
    if (!opts) return json_decref(load), NULL;
    getloadavg(la, 3); /* the load when the study starts: the host is shared, the report says how busy it was */
    for (int i = 0; i < 3; i++) json_array_append_new(load, num_or_null(round(la[i] * 100) / 100));
    json_t *matrices = json_array(), *recs = json_array();
    if ((*rc = collect_dir(h, o->dir, opts, matrices, recs)) != S_OK) {
        json_decref(load);
        json_decref(opts);
        json_decref(server);
        json_decref(matrices);
        json_decref(recs);
        return NULL;
    }
    cpu_model(model, sizeof model);
    gethostname(host, sizeof host - 1);
    snprintf(tool, sizeof tool, "spmvctl %s", SPMV_CLIENT_VERSION);
    return json_pack("{s:s, s:s, s:s, s:s, s:f, s:s, s:{s:s, s:s, s:o}, s:o, s:o, s:o, s:o}", "format", FORMAT, "tool",
                     tool, "command", o->command, "started", started, "elapsed_s", round((now_s() - t0) * 1000) / 1000,
                     "url", o->url ? o->url : "", "host", "cpu_model", model, "hostname", host, "loadavg", load,
                     "server", server, "options", opts, "matrices", matrices, "records", recs);
}

/* ------------------------------------------------------------------ tables */

/* The best spmv record per (file, dtype, kernel): lowest mean, verified, no error. */
typedef struct best_set {
    size_t n;
    const json_t **rec;
} best_set;

static const json_t *best_get(const best_set *b, const char *file, const char *dtype, const char *kernel)
{
    for (size_t i = 0; i < b->n; i++)
        if (!strcmp(sget(b->rec[i], "file"), file) && !strcmp(sget(b->rec[i], "dtype"), dtype) &&
            !strcmp(sget(b->rec[i], "kernel"), kernel))
            return b->rec[i];
    return NULL;
}

static best_set best_of(const json_t *res)
{
    const json_t *recs = json_object_get(res, "records"), *r;
    best_set b = {0, calloc(json_array_size(recs) + 1, sizeof(json_t *))};
    size_t i;
    json_array_foreach(recs, i, r) {
        if (!b.rec || strcmp(sget(r, "kind"), "spmv") != 0 || json_is_string(json_object_get(r, "error")) ||
            json_is_false(json_object_get(r, "verified")) || !isfinite(nget(r, "mean_ms")))
            continue;
        size_t j = 0;
        while (j < b.n && (strcmp(sget(b.rec[j], "file"), sget(r, "file")) || strcmp(sget(b.rec[j], "dtype"), sget(r, "dtype")) ||
                           strcmp(sget(b.rec[j], "kernel"), sget(r, "kernel"))))
            j++;
        if (j == b.n) b.rec[b.n++] = r;
        else if (nget(r, "mean_ms") < nget(b.rec[j], "mean_ms")) b.rec[j] = r;
    }
    return b;
}

/* "-" for NAN, else the number in fmt. */
static const char *fnum(char *buf, size_t cap, const char *fmt, double v)
{
    if (!isfinite(v)) snprintf(buf, cap, "-");
    else snprintf(buf, cap, fmt, v);
    return buf;
}

static bool matrix_ok(const json_t *m) { return strcmp(sget(m, "status"), "ok") == 0; }

/* The options' SpMV kernels, then any other kernel the spmv records name. */
static json_t *spmv_kernels(const json_t *res)
{
    json_t *ks = json_deep_copy(json_object_get(json_object_get(res, "options"), "kernels"));
    size_t i;
    const json_t *r;
    json_array_foreach(json_object_get(res, "records"), i, r)
        if (!strcmp(sget(r, "kind"), "spmv") && !array_has(ks, sget(r, "kernel")))
            json_array_append_new(ks, json_string(sget(r, "kernel")));
    return ks;
}

static void header(FILE *f, const json_t *res)
{
    const json_t *o = json_object_get(res, "options"), *s = json_object_get(res, "server"), *m;
    const json_t *ms = json_object_get(res, "matrices"), *gpus = json_object_get(s, "gpus"), *v;
    char dir[PATH_MAX];
    size_t i, ok = 0;
    snprintf(dir, sizeof dir, "%s", sget(o, "dir"));
    for (size_t n = strlen(dir); n > 0 && dir[n - 1] == '/'; n--) dir[n - 1] = '\0';
    fprintf(f, "# Collection study of %s\n\n", strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir);
    fprintf(f, "- command: `%s` (%s), started %s, %.1f s\n", sget(res, "command"), sget(res, "tool"),
            sget(res, "started"), nget(res, "elapsed_s"));
    fprintf(f, "- spmvd %s (CUDA build: %s) at %s\n", sget(s, "version"),
            json_is_true(json_object_get(s, "cuda")) ? "yes" : "no", sget(res, "url"));
    const json_t *la = json_object_get(json_object_get(res, "host"), "loadavg");
    char load[3][32];
    for (i = 0; i < 3; i++)
        fnum(load[i], sizeof load[i], "%.2f", json_is_number(json_array_get(la, i)) ? json_number_value(json_array_get(la, i)) : NAN);
    fprintf(f, "- host: %s, %lld cores for the daemon, load average %s %s %s (1, 5, 15 min) at the start; GPU: ",
            sget(json_object_get(res, "host"), "cpu_model"), iget(s, "cores"), load[0], load[1], load[2]);
    json_array_foreach(gpus, i, v) fprintf(f, "%s%s", i ? ", " : "", json_string_value(v));
    if (!json_array_size(gpus)) fprintf(f, "none (%s)", sget(s, "gpu_unavailable_reason"));
    fprintf(f, "\n- measure: the mean over %lld timed runs after %lld warm-ups (bench route, `stat` mean, one "
               "random x); a kernel's figure for a matrix is its best parameter combination among the verified "
               "ones; GFLOP/s (2 nnz) and GB/s at the mean, as the bench gives them\n", iget(o, "runs"),
            iget(o, "warmup"));
    static const char *const lists[] = {"kernels", "spmspm_kernels", "thread_kernels", "threads"};
    static const char *const labels[] = {"- dtypes: ", "; SpMV kernels: ", "; SpMSpM kernels: ",
                                         "; thread sweep (the bench's `threads`): ", " at "};
    fputs(labels[0], f);
    json_array_foreach(json_object_get(o, "dtypes"), i, v) fprintf(f, "%s%s", i ? ", " : "", json_string_value(v));
    for (size_t l = 0; l < 4; l++) {
        const json_t *a = json_object_get(o, lists[l]);
        fputs(labels[l + 1], f);
        json_array_foreach(a, i, v) json_is_string(v) ? fprintf(f, "%s%s", i ? ", " : "", json_string_value(v))
                                                      : fprintf(f, "%s%lld", i ? ", " : "", (long long)json_integer_value(v));
        if (!json_array_size(a) && l < 3) fputs("none", f);
    }
    fputs(" threads\n", f);
    json_array_foreach(ms, i, m) ok += matrix_ok(m);
    fprintf(f, "- matrices: %zu studied of %zu entries in %s", ok, json_array_size(ms), sget(o, "dir"));
    if (iget(o, "max_nnz")) fprintf(f, " (--max-nnz %lld)", iget(o, "max_nnz"));
    fputs("\n\n## Collection\n\n| matrix | rows | cols | nnz | status |\n|---|---|---|---|---|\n", f);
    json_array_foreach(ms, i, m) {
        fprintf(f, "| %s | %lld | %lld | %lld | %s", sget(m, "file"), iget(m, "rows"), iget(m, "cols"), iget(m, "nnz"),
                sget(m, "status"));
        if (!matrix_ok(m)) {
            fputs(": ", f);
            for (const char *c = sget(m, "reason"); *c; c++) fputc(*c == '|' ? '/' : *c, f);
        }
        fputs(" |\n", f);
    }
    fputs("\n", f);
}

static void speedup_cells(FILE *f, const json_t *res, const best_set *b, const char *k, const char *d, long long lim)
{
    const json_t *m;
    size_t i, n = 0;
    double sum = 0, max = -INFINITY;
    char b1[32], b2[32];
    json_array_foreach(json_object_get(res, "matrices"), i, m) {
        if (!matrix_ok(m) || iget(m, "nnz") < lim) continue;
        const json_t *base = best_get(b, sget(m, "file"), d, BASELINE), *r = best_get(b, sget(m, "file"), d, k);
        if (!base || !r || !(nget(r, "mean_ms") > 0)) continue;
        double s = nget(base, "mean_ms") / nget(r, "mean_ms");
        sum += s;
        max = s > max ? s : max;
        n++;
    }
    fprintf(f, " %s | %s | %zu |", fnum(b1, sizeof b1, "%.2f", n ? sum / (double)n : NAN),
            fnum(b2, sizeof b2, "%.2f", n ? max : NAN), n);
}

static void table_speedup(FILE *f, const json_t *res, const best_set *b)
{
    const json_t *dts = json_object_get(json_object_get(res, "options"), "dtypes"), *d, *k;
    json_t *ks = spmv_kernels(res);
    size_t i, j;
    fputs("## Speedup over cpu.csr.serial\n\n"
          "Mean time of cpu.csr.serial over the kernel's best mean, averaged (avg) and the largest (max)\n"
          "over the matrices with at least that many non-zeros; n: how many matrices.\n\n| kernel | nnz >= |", f);
    json_array_foreach(dts, i, d) fprintf(f, " %s avg | %s max | %s n |", json_string_value(d), json_string_value(d),
                                          json_string_value(d));
    fputs("\n|---|---|", f);
    for (i = 0; i < json_array_size(dts); i++) fputs("---|---|---|", f);
    fputs("\n", f);
    json_array_foreach(ks, j, k) for (size_t l = 0; l < 3; l++) {
        fprintf(f, "| %s | %lld |", json_string_value(k), nnz_limits[l]);
        json_array_foreach(dts, i, d) speedup_cells(f, res, b, json_string_value(k), json_string_value(d), nnz_limits[l]);
        fputs("\n", f);
    }
    fputs("\n", f);
    json_decref(ks);
}

static void table_head(FILE *f, const char *dtype, const char *first, const json_t *ks)
{
    size_t i;
    const json_t *k;
    fprintf(f, "### %s\n\n| %s |", dtype, first);
    json_array_foreach(ks, i, k) fprintf(f, " %s |", json_string_value(k));
    fputs(strcmp(first, "kernel") ? "\n|---|---|" : "\n|---|", f);
    for (i = 0; i < json_array_size(ks); i++) fputs("---|", f);
    fputs("\n", f);
}

static void win_row(FILE *f, const json_t *res, const best_set *b, const char *d, const char *a, const json_t *ks)
{
    size_t j, i;
    const json_t *k, *m;
    fprintf(f, "| %s |", a);
    json_array_foreach(ks, j, k) {
        const char *c = json_string_value(k);
        int wins = 0, both = 0;
        if (!strcmp(a, c)) {
            fputs(" - |", f);
            continue;
        }
        json_array_foreach(json_object_get(res, "matrices"), i, m) {
            const json_t *x = matrix_ok(m) ? best_get(b, sget(m, "file"), d, a) : NULL;
            const json_t *y = x ? best_get(b, sget(m, "file"), d, c) : NULL;
            if (!y) continue;
            both++;
            wins += nget(x, "mean_ms") < nget(y, "mean_ms");
        }
        fprintf(f, " %d/%d |", wins, both);
    }
    fputs("\n", f);
}

static void table_wins(FILE *f, const json_t *res, const best_set *b)
{
    json_t *ks = spmv_kernels(res);
    size_t i, j;
    const json_t *d, *k;
    fputs("## Wins\n\nCell: on how many matrices the row's kernel has a lower mean than the column's,\n"
          "out of the matrices both ran on.\n\n", f);
    json_array_foreach(json_object_get(json_object_get(res, "options"), "dtypes"), i, d) {
        table_head(f, json_string_value(d), "kernel", ks);
        json_array_foreach(ks, j, k) win_row(f, res, b, json_string_value(d), json_string_value(k), ks);
        fputs("\n", f);
    }
    json_decref(ks);
}

static void table_per_matrix(FILE *f, const json_t *res, const best_set *b, const char *key, const char *title)
{
    json_t *ks = spmv_kernels(res);
    size_t i, j, l;
    const json_t *d, *m, *k;
    char buf[32];
    fprintf(f, "## %s\n\n", title);
    json_array_foreach(json_object_get(json_object_get(res, "options"), "dtypes"), i, d) {
        table_head(f, json_string_value(d), "matrix | nnz", ks);
        json_array_foreach(json_object_get(res, "matrices"), j, m) {
            if (!matrix_ok(m)) continue;
            fprintf(f, "| %s | %lld |", sget(m, "file"), iget(m, "nnz"));
            json_array_foreach(ks, l, k) {
                const json_t *r = best_get(b, sget(m, "file"), json_string_value(d), json_string_value(k));
                fprintf(f, " %s |", fnum(buf, sizeof buf, "%.3g", r ? nget(r, key) : NAN));
            }
            fputs("\n", f);
        }
        fputs("\n", f);
    }
    json_decref(ks);
}

/* The "threads" record of lowest mean (verified, no error) of (file, dtype, kernel) at t threads. */
static const json_t *thread_best(const json_t *res, const char *file, const char *dtype, const char *kernel,
                                 long long t)
{
    const json_t *r, *best = NULL;
    size_t i;
    json_array_foreach(json_object_get(res, "records"), i, r) {
        if (strcmp(sget(r, "kind"), "threads") || strcmp(sget(r, "file"), file) || strcmp(sget(r, "dtype"), dtype) ||
            strcmp(sget(r, "kernel"), kernel) || iget(json_object_get(r, "params"), "threads") != t ||
            json_is_string(json_object_get(r, "error")) || json_is_false(json_object_get(r, "verified")) ||
            !isfinite(nget(r, "mean_ms")))
            continue;
        if (!best || nget(r, "mean_ms") < nget(best, "mean_ms")) best = r;
    }
    return best;
}

static void thread_cells(FILE *f, const json_t *res, const best_set *b, const char *k, long long t, const char *d,
                         long long lim)
{
    const json_t *m;
    size_t i, n = 0;
    double sp = 0, eff = 0, emax = -INFINITY;
    char b1[32], b2[32], b3[32];
    json_array_foreach(json_object_get(res, "matrices"), i, m) {
        if (!matrix_ok(m) || iget(m, "nnz") < lim) continue;
        const json_t *base = best_get(b, sget(m, "file"), d, BASELINE), *r = thread_best(res, sget(m, "file"), d, k, t);
        if (!base || !r || !(nget(r, "mean_ms") > 0) || !isfinite(nget(r, "efficiency"))) continue;
        sp += nget(base, "mean_ms") / nget(r, "mean_ms");
        eff += nget(r, "efficiency");
        emax = nget(r, "efficiency") > emax ? nget(r, "efficiency") : emax;
        n++;
    }
    fprintf(f, " %s | %s | %s | %zu |", fnum(b1, sizeof b1, "%.2f", n ? sp / (double)n : NAN),
            fnum(b2, sizeof b2, "%.2f", n ? eff / (double)n : NAN), fnum(b3, sizeof b3, "%.2f", n ? emax : NAN), n);
}

static void table_threads(FILE *f, const json_t *res, const best_set *b)
{
    const json_t *o = json_object_get(res, "options"), *dts = json_object_get(o, "dtypes"), *d, *k, *t;
    size_t i, j, l;
    if (!json_array_size(json_object_get(o, "thread_kernels"))) return;
    fputs("## Threads\n\n"
          "The bench's thread sweep: each kernel at each count, its best mean over its other parameters;\n"
          "speedup: cpu.csr.serial's mean over it; efficiency: the bench's, that speedup over the threads\n"
          "(against the serial CSR kernel, not the same kernel at one thread); averaged (avg) and the largest\n"
          "(max) over the matrices with at least that many non-zeros; n: how many matrices.\n\n"
          "| kernel | threads | nnz >= |", f);
    json_array_foreach(dts, i, d) {
        const char *n = json_string_value(d);
        fprintf(f, " %s speedup avg | %s efficiency avg | %s efficiency max | %s n |", n, n, n, n);
    }
    fputs("\n|---|---|---|", f);
    for (i = 0; i < json_array_size(dts); i++) fputs("---|---|---|---|", f);
    fputs("\n", f);
    json_array_foreach(json_object_get(o, "thread_kernels"), j, k) json_array_foreach(json_object_get(o, "threads"), l, t) {
        for (size_t q = 0; q < 3 && json_integer_value(t) > 0; q++) {
            fprintf(f, "| %s | %lld | %lld |", json_string_value(k), (long long)json_integer_value(t), nnz_limits[q]);
            json_array_foreach(dts, i, d) thread_cells(f, res, b, json_string_value(k), json_integer_value(t),
                                                       json_string_value(d), nnz_limits[q]);
            fputs("\n", f);
        }
    }
    fputs("\n", f);
}

/* The last spmspm record of (file, dtype, kernel), as spmvd.study's dict keeps it. */
static double spmspm_mean(const json_t *res, const char *file, const char *dtype, const char *kernel)
{
    const json_t *r, *found = NULL;
    size_t i;
    json_array_foreach(json_object_get(res, "records"), i, r)
        if (!strcmp(sget(r, "kind"), "spmspm") && !strcmp(sget(r, "file"), file) && !strcmp(sget(r, "dtype"), dtype) &&
            !strcmp(sget(r, "kernel"), kernel))
            found = r;
    return found ? nget(found, "mean_ms") : NAN;
}

static void table_spmspm(FILE *f, const json_t *res)
{
    const json_t *ks = json_object_get(json_object_get(res, "options"), "spmspm_kernels"), *d, *m, *k;
    size_t i, j, l;
    char b1[32], b2[32];
    if (!json_array_size(ks)) return;
    const char *k0 = json_string_value(json_array_get(ks, 0));
    fprintf(f, "## SpMSpM\n\nC = A*B with B of cols x %d (row i: one entry in column i mod %d); mean ms, and in "
               "brackets the speedup over %s.\n\n", SPMSPM_COLS, SPMSPM_COLS, k0);
    json_array_foreach(json_object_get(json_object_get(res, "options"), "dtypes"), i, d) {
        table_head(f, json_string_value(d), "matrix | nnz", ks);
        json_array_foreach(json_object_get(res, "matrices"), j, m) {
            if (!matrix_ok(m)) continue;
            double base = spmspm_mean(res, sget(m, "file"), json_string_value(d), k0);
            fprintf(f, "| %s | %lld |", sget(m, "file"), iget(m, "nnz"));
            json_array_foreach(ks, l, k) {
                double v = spmspm_mean(res, sget(m, "file"), json_string_value(d), json_string_value(k));
                double sp = isfinite(v) && v != 0 && isfinite(base) && base != 0 ? base / v : NAN;
                fprintf(f, " %s (%sx) |", fnum(b1, sizeof b1, "%.4g", v), fnum(b2, sizeof b2, "%.2f", sp));
            }
            fputs("\n", f);
        }
        fputs("\n", f);
    }
}

static int strcmp_ptr(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* {"hack_size":16,"threads":0} as "hack_size=16;threads=0" (keys sorted), "-" when empty. */
static void params_text(const json_t *p, char *buf, size_t cap)
{
    const char *keys[64], *key;
    const json_t *v;
    size_t n = 0, len = 0;
    json_object_foreach((json_t *)p, key, v) if (n < 64) keys[n++] = key;
    qsort(keys, n, sizeof *keys, strcmp_ptr);
    buf[0] = '\0';
    for (size_t i = 0; i < n && len < cap; i++) {
        v = json_object_get(p, keys[i]);
        if (json_is_integer(v))
            len += (size_t)snprintf(buf + len, cap - len, "%s%s=%lld", i ? ";" : "", keys[i], (long long)json_integer_value(v));
        else
            len += (size_t)snprintf(buf + len, cap - len, "%s%s=%s", i ? ";" : "", keys[i], json_string_value(v));
    }
    if (!n) snprintf(buf, cap, "-");
}

/* A table cell: '|' as '/', a line end as a space. */
static void cell(FILE *f, const char *s)
{
    fputs(" ", f);
    for (; *s; s++) fputc(*s == '|' ? '/' : *s == '\n' ? ' ' : *s, f);
    fputs(" |", f);
}

static void problem_row(FILE *f, const char *file, const char *dtype, const char *kernel, const char *params,
                        const char *why)
{
    fputs("|", f);
    cell(f, file);
    cell(f, dtype);
    cell(f, kernel);
    cell(f, params);
    cell(f, why);
    fputs("\n", f);
}

/* The problems: matrices not studied, records with an error or not verified. */
static void table_problems(FILE *f, const json_t *res)
{
    const json_t *m, *r;
    size_t i;
    bool any = false;
    char why[2048], params[512], kernel[256];
    fputs("## Refused, failed and skipped\n\n", f);
    for (int pass = 0; pass < 2; pass++) {
        json_array_foreach(json_object_get(res, "matrices"), i, m) {
            if (matrix_ok(m)) continue;
            any = true;
            if (!pass) continue;
            snprintf(why, sizeof why, "%s: %s", sget(m, "status"), sget(m, "reason"));
            problem_row(f, sget(m, "file"), "-", "-", "-", why);
        }
        json_array_foreach(json_object_get(res, "records"), i, r) {
            const char *err = json_string_value(json_object_get(r, "error"));
            char b[32];
            if (!err && !json_is_false(json_object_get(r, "verified"))) continue;
            any = true;
            if (!pass) continue;
            if (!err) snprintf(why, sizeof why, "not verified: max_rel_err %s", fnum(b, sizeof b, "%.3g", nget(r, "max_rel_err")));
            snprintf(kernel, sizeof kernel, "%s %s", sget(r, "kind"), sget(r, "kernel"));
            params_text(json_object_get(r, "params"), params, sizeof params);
            problem_row(f, sget(r, "file"), sget(r, "dtype"), kernel, params, err ? err : why);
        }
        if (!pass && !any) {
            fputs("None: every matrix uploaded and every kernel ran and verified.\n\n", f);
            return;
        }
        if (!pass) fputs("| matrix | dtype | kernel | params | reason |\n|---|---|---|---|---|\n", f);
    }
    fputs("\n", f);
}

/* A CSV field as Python's csv module writes it (quoted when it holds , " or a line end). */
static void csv_field(FILE *f, const char *s, bool last)
{
    if (strpbrk(s, ",\"\r\n")) {
        fputc('"', f);
        for (; *s; s++) fputs(*s == '"' ? "\"\"" : (char[]){*s, 0}, f);
        fputc('"', f);
    } else {
        fputs(s, f);
    }
    fputc(last ? '\n' : ',', f);
}

static void csv_num(FILE *f, double v)
{
    if (isfinite(v)) fprintf(f, "%.17g,", v);
    else fputc(',', f);
}

static void write_csv(FILE *f, const json_t *res, const best_set *b)
{
    const json_t *r, *m;
    size_t i, j;
    char params[512];
    fputs("file,dtype,kind,kernel,params,nnz,mean_ms,median_ms,min_ms,max_ms,stddev_ms,gflops,gbps,speedup,efficiency,"
          "verified,max_rel_err,error\n", f);
    json_array_foreach(json_object_get(res, "records"), i, r) {
        long long nnz = 0;
        json_array_foreach(json_object_get(res, "matrices"), j, m) if (!strcmp(sget(m, "file"), sget(r, "file"))) nnz = iget(m, "nnz");
        const char *kind = sget(r, "kind");
        const json_t *base = !strcmp(kind, "spmv") || !strcmp(kind, "threads")
                             ? best_get(b, sget(r, "file"), sget(r, "dtype"), BASELINE) : NULL;
        double mean = nget(r, "mean_ms"), bm = base ? nget(base, "mean_ms") : NAN;
        const json_t *ver = json_object_get(r, "verified");
        csv_field(f, sget(r, "file"), false);
        csv_field(f, sget(r, "dtype"), false);
        csv_field(f, sget(r, "kind"), false);
        csv_field(f, sget(r, "kernel"), false);
        params_text(json_object_get(r, "params"), params, sizeof params);
        csv_field(f, params, false);
        fprintf(f, "%lld,", nnz);
        csv_num(f, mean);
        csv_num(f, nget(r, "median_ms"));
        csv_num(f, nget(r, "min_ms"));
        csv_num(f, nget(r, "max_ms"));
        csv_num(f, nget(r, "stddev_ms"));
        csv_num(f, nget(r, "gflops"));
        csv_num(f, nget(r, "gbps"));
        csv_num(f, bm != 0 && isfinite(bm) && mean != 0 && isfinite(mean) ? bm / mean : NAN);
        csv_num(f, nget(r, "efficiency"));
        fputs(json_is_boolean(ver) ? (json_is_true(ver) ? "true," : "false,") : ",", f);
        csv_num(f, nget(r, "max_rel_err"));
        csv_field(f, sget(r, "error"), true);
    }
}

static FILE *open_out(const char *out, const char *name, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", out, name);
    FILE *f = fopen(path, "w");
    if (!f) fprintf(stderr, "spmvctl: study: %s: %s\n", path, strerror(errno));
    return f;
}

/* report.md, results.csv and results.json of `res` into out/. */
static int render(const json_t *res, const char *out)
{
    char path[PATH_MAX];
    FILE *f;
    if (strcmp(sget(res, "format"), FORMAT) != 0) {
        fprintf(stderr, "spmvctl: study: not a study's results (%s): format '%s'\n", FORMAT, sget(res, "format"));
        return S_USAGE;
    }
    if (mkdir(out, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "spmvctl: study: %s: %s\n", out, strerror(errno));
        return S_LOCAL;
    }
    best_set b = best_of(res);
    if (!(f = open_out(out, "report.md", path, sizeof path))) goto err;
    header(f, res);
    table_speedup(f, res, &b);
    table_wins(f, res, &b);
    table_per_matrix(f, res, &b, "gbps", "Bandwidth (GB/s at the mean, best combination)");
    table_per_matrix(f, res, &b, "gflops", "GFLOP/s (at the mean, best combination)");
    table_threads(f, res, &b);
    table_spmspm(f, res);
    table_problems(f, res);
    if (fclose(f) != 0 || !(f = open_out(out, "results.csv", path, sizeof path))) goto err;
    write_csv(f, res, &b);
    if (fclose(f) != 0) goto err;
    snprintf(path, sizeof path, "%s/results.json", out);
    if (json_dump_file(res, path, JSON_INDENT(1)) != 0) goto err;
    free(b.rec);
    return S_OK;
err:
    fprintf(stderr, "spmvctl: study: could not write %s\n", path);
    free(b.rec);
    return S_LOCAL;
}

/* `python3 -m spmvd.study plot out/results.json --out out`: the PNGs. */
static int plot(const char *out)
{
    const char *py = getenv("SPMVD_PYTHON") ? getenv("SPMVD_PYTHON") : "python3";
    char results[PATH_MAX];
    snprintf(results, sizeof results, "%s/results.json", out);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        execlp(py, py, "-m", "spmvd.study", "plot", results, "--out", out, (char *)NULL);
        fprintf(stderr, "spmvctl: study --plot: %s: %s\n", py, strerror(errno));
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "spmvctl: study --plot: `%s -m spmvd.study plot` failed (exit status %d); the tables are "
                        "written. It needs the Python package spmvd with matplotlib (pip install ./clients/python, or "
                        "PYTHONPATH=clients/python; SPMVD_PYTHON names the interpreter)\n",
                py, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return S_LOCAL;
    }
    return S_OK;
}

int spmvctl_study(spmv_client *h, const study_options *o)
{
    int rc = S_OK;
    json_t *res;
    if (o->from) {
        json_error_t e;
        if (!(res = json_load_file(o->from, 0, &e))) {
            fprintf(stderr, "spmvctl: study: %s: line %d: %s\n", o->from, e.line, e.text);
            return S_LOCAL;
        }
    } else if (!(res = collect(h, o, &rc))) {
        return rc;
    }
    rc = render(res, o->out);
    if (rc == S_OK && !o->from) {
        const json_t *ms = json_object_get(res, "matrices"), *m;
        size_t i, ok = 0;
        json_array_foreach(ms, i, m) ok += matrix_ok(m);
        printf("%s/report.md: %zu matrices, %zu records, %.1f s\n", o->out, ok,
               json_array_size(json_object_get(res, "records")), nget(res, "elapsed_s"));
    }
    if (rc == S_OK && o->plot) rc = plot(o->out);
    json_decref(res);
    return rc;
}
