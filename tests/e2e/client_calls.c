/* client_calls.c — every libspmvclient call against a live daemon, as TAP.
 *
 *   client_calls URL DEAD_URL SILENT_URL TMPDIR
 *
 * Run by tests/e2e/clients.sh, which starts the daemon (URL), finds a port
 * where nothing listens (DEAD_URL) and one where a socket accepts and never
 * answers (SILENT_URL). Each call is checked for its status and, on the
 * error paths, for the detail the handle keeps (HTTP status, the server's
 * error code and message). The matrices are random, drawn afresh each run
 * from a printed seed (SPMV_SEED repeats one); y is computed here in plain
 * C as the reference and the output vector is poisoned with NaN before
 * every multiply. Prints "ok N - ..." lines and last "# tests N".
 */
#include "spmvclient.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int tests, failures;

__attribute__((format(printf, 2, 3)))
static bool check(bool cond, const char *fmt, ...)
{
    va_list ap;
    printf("%s %d - ", cond ? "ok" : "not ok", ++tests);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    if (!cond) failures++;
    return cond;
}

/* Prints the handle's error detail as TAP diagnostics. */
static void diag(spmv_client *h, spmv_client_status st)
{
    printf("#   status %d (%s), http %ld, code '%s', message '%s'\n", st, spmv_client_strerror(st),
           spmv_client_http_status(h), spmv_client_errcode(h), spmv_client_errmsg(h));
}

#define EXPECT(h, call, want, ...)                                                                   \
    do {                                                                                             \
        spmv_client_status st_ = (call);                                                             \
        if (!check(st_ == (want), __VA_ARGS__)) diag((h), st_);                                      \
    } while (0)

/* ---------------------------------------------------------- random matrix */

typedef struct coo {
    int64_t rows, cols, nnz;
    int64_t *r, *c;
    double *v;
} coo;

static uint64_t rng_state;
static uint64_t rng(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static double uniform(void) { return (double)(rng() >> 11) / 9007199254740992.0 * 2 - 1; }

/* A random general matrix with a few entries per row, no duplicates needed
 * (the reader sums them, and so does reference_y). */
static bool random_coo(coo *m, int64_t rows, int64_t cols, int per_row)
{
    m->rows = rows, m->cols = cols, m->nnz = rows * per_row;
    m->r = malloc((size_t)m->nnz * sizeof *m->r);
    m->c = malloc((size_t)m->nnz * sizeof *m->c);
    m->v = malloc((size_t)m->nnz * sizeof *m->v);
    if (!m->r || !m->c || !m->v) return false;
    for (int64_t k = 0; k < m->nnz; k++) {
        m->r[k] = k / per_row;
        m->c[k] = (int64_t)(rng() % (uint64_t)cols);
        m->v[k] = uniform();
    }
    return true;
}

static void coo_free(coo *m)
{
    free(m->r), free(m->c), free(m->v);
}

static char *matrix_market(const coo *m, size_t *len)
{
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    if (!f) return NULL;
    fprintf(f, "%%%%MatrixMarket matrix coordinate real general\n%% client_calls\n");
    fprintf(f, "%" PRId64 " %" PRId64 " %" PRId64 "\n", m->rows, m->cols, m->nnz);
    for (int64_t k = 0; k < m->nnz; k++)
        fprintf(f, "%" PRId64 " %" PRId64 " %.17g\n", m->r[k] + 1, m->c[k] + 1, m->v[k]);
    fclose(f);
    return text;
}

static void reference_y(const coo *m, const double *x, double *y)
{
    for (int64_t i = 0; i < m->rows; i++) y[i] = 0;
    for (int64_t k = 0; k < m->nnz; k++) y[m->r[k]] += m->v[k] * x[m->c[k]];
}

static double rel_err(const double *a, const double *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i])) return INFINITY;
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void poison(double *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = NAN;
}

/* ------------------------------------------------------------ callbacks */

typedef struct progress_log {
    int calls;
    uint64_t last_done, last_total;
    int stop;
} progress_log;

static int on_progress(void *user, uint64_t done, uint64_t total)
{
    progress_log *p = user;
    p->calls++;
    p->last_done = done, p->last_total = total;
    return p->stop;
}

/* ------------------------------------------------------------------ tests */

static void test_handles(const char *url)
{
    spmv_client_status why = SPMV_CLIENT_OK;
    check(!spmv_client_new("ftp://x", NULL, &why) && why == SPMV_CLIENT_ERR_INVALID, "new: non-http URL is INVALID");
    spmv_client_options bad = {.timeout_ms = -1};
    check(!spmv_client_new(url, &bad, &why) && why == SPMV_CLIENT_ERR_INVALID, "new: negative timeout is INVALID");
    spmv_client_options nl = {.token = "a\r\nX-Evil: 1"};
    check(!spmv_client_new(url, &nl, &why) && why == SPMV_CLIENT_ERR_INVALID, "new: token with CR/LF is INVALID");
    bool distinct = true;
    for (int s = SPMV_CLIENT_OK; s >= SPMV_CLIENT_ERR_JOB_FAILED; s--)
        for (int t = s - 1; t >= SPMV_CLIENT_ERR_JOB_FAILED; t--)
            distinct = distinct && strcmp(spmv_client_strerror(s), spmv_client_strerror(t)) != 0;
    check(distinct && strcmp(spmv_client_strerror(12345), "unknown status") == 0,
          "strerror names every status distinctly");
}

static void test_server(spmv_client *h)
{
    char *json = NULL;
    EXPECT(h, spmv_client_health(h, &json), SPMV_CLIENT_OK, "health");
    check(json && strstr(json, "\"ok\""), "health: JSON text carries status ok");
    spmv_client_string_free(json);
    EXPECT(h, spmv_client_ready(h), SPMV_CLIENT_OK, "ready");
    json = NULL;
    EXPECT(h, spmv_client_info(h, &json), SPMV_CLIENT_OK, "info");
    check(json && strstr(json, "version"), "info: JSON names the version");
    spmv_client_string_free(json);

    spmv_client_kernel_list *kl = NULL;
    EXPECT(h, spmv_client_kernels(h, &kl), SPMV_CLIENT_OK, "kernels");
    bool serial = false;
    for (size_t i = 0; kl && i < kl->count; i++)
        serial = serial || (strcmp(kl->items[i].name, "cpu.csr.serial") == 0 && kl->items[i].available);
    check(kl && kl->count >= 5 && serial, "kernels: %zu listed, cpu.csr.serial available", kl ? kl->count : 0);
    spmv_client_kernel_list_free(kl);
}

/* Multiplies with the given options and compares with the reference. */
static void test_multiply_once(spmv_client *h, const char *id, const coo *m, const char *kernel)
{
    size_t nx = (size_t)m->cols, ny = (size_t)m->rows;
    double *x = malloc(nx * sizeof *x), *y = malloc(ny * sizeof *y), *ref = malloc(ny * sizeof *ref);
    for (size_t j = 0; j < nx; j++) x[j] = uniform();
    reference_y(m, x, ref);
    poison(y, ny);
    spmv_client_spmv_options o = {.kernel = kernel, .runs = 3, .warmup = 1, .verify = 1};
    spmv_client_spmv_result r;
    EXPECT(h, spmv_client_multiply(h, id, SPMV_CLIENT_FLOAT64, x, nx, y, ny, &o, &r), SPMV_CLIENT_OK,
           "multiply %s", kernel);
    double e = rel_err(y, ref, ny);
    check(e < 1e-12, "multiply %s: y matches the reference (rel err %.3g)", kernel, e);
    check(strcmp(r.kernel, kernel) == 0, "multiply %s: result names the kernel ('%s')", kernel, r.kernel);
    check(r.stats.runs == 3 && r.stats.warmup == 1, "multiply %s: stats report runs 3 warmup 1 (%d, %d)", kernel,
          r.stats.runs, r.stats.warmup);
    check(r.stats.min_ms >= 0 && r.stats.min_ms <= r.stats.median_ms && r.stats.median_ms <= r.stats.max_ms &&
              isfinite(r.stats.mean_ms) && isfinite(r.stats.gflops),
          "multiply %s: stats min <= median <= max, all finite", kernel);
    check(isfinite(r.queue_ms) && r.queue_ms >= 0 && r.request_ms > 0, "multiply %s: queue_ms %.3f, request_ms %.3f",
          kernel, r.queue_ms, r.request_ms);
    free(x), free(y), free(ref);
}

static void test_multiply_errors(spmv_client *h, const char *id, const coo *m)
{
    size_t nx = (size_t)m->cols, ny = (size_t)m->rows;
    double *x = calloc(nx + 1, sizeof *x), *y = calloc(ny + 1, sizeof *y);
    spmv_client_spmv_options o = {.kernel = "cpu.csr.serial"};

    EXPECT(h, spmv_client_multiply(h, id, SPMV_CLIENT_FLOAT64, x, nx + 1, y, ny, &o, NULL),
           SPMV_CLIENT_ERR_BAD_REQUEST, "multiply: x one value too long is BAD_REQUEST");
    check(spmv_client_http_status(h) == 400 && *spmv_client_errmsg(h) && *spmv_client_errcode(h),
          "multiply: wrong length carries HTTP 400, a code and a message ('%s')", spmv_client_errmsg(h));
    EXPECT(h, spmv_client_multiply(h, id, SPMV_CLIENT_FLOAT64, x, nx, y, ny - 1, &o, NULL),
           SPMV_CLIENT_ERR_PROTOCOL, "multiply: y longer than the room given is PROTOCOL");
    EXPECT(h, spmv_client_multiply(h, id, SPMV_CLIENT_FLOAT64, x, nx, y, ny + 1, &o, NULL),
           SPMV_CLIENT_ERR_PROTOCOL, "multiply: y shorter than asked is PROTOCOL");
    spmv_client_spmv_options bad_kernel = {.kernel = "cpu.nonexistent.kernel"};
    spmv_client_status st = spmv_client_multiply(h, id, SPMV_CLIENT_FLOAT64, x, nx, y, ny, &bad_kernel, NULL);
    if (!check(spmv_client_status_is_client_error(st) && strstr(spmv_client_errmsg(h), "cpu.nonexistent.kernel"),
               "multiply: unknown kernel refused (4xx) with a message naming it"))
        diag(h, st);
    const char *params[] = {"chunk=0", NULL};
    spmv_client_spmv_options bad_param = {.kernel = "cpu.csr.chunked", .params = params};
    st = spmv_client_multiply(h, id, SPMV_CLIENT_FLOAT64, x, nx, y, ny, &bad_param, NULL);
    if (!check(st == SPMV_CLIENT_ERR_BAD_REQUEST && strstr(spmv_client_errmsg(h), "chunk"),
               "multiply: chunk=0 out of range is BAD_REQUEST naming chunk"))
        diag(h, st);
    const char *malformed[] = {"no-equals-sign", NULL};
    spmv_client_spmv_options bad_form = {.params = malformed};
    EXPECT(h, spmv_client_multiply(h, id, SPMV_CLIENT_FLOAT64, x, nx, y, ny, &bad_form, NULL),
           SPMV_CLIENT_ERR_INVALID, "multiply: a parameter without '=' is INVALID before sending");
    EXPECT(h, spmv_client_multiply(h, "", SPMV_CLIENT_FLOAT64, x, nx, y, ny, NULL, NULL), SPMV_CLIENT_ERR_INVALID,
           "multiply: empty id is INVALID");
    EXPECT(h, spmv_client_multiply(h, "00000000-0000-0000-0000-000000000000", SPMV_CLIENT_FLOAT64, x, nx, y, ny,
                                   NULL, NULL),
           SPMV_CLIENT_ERR_NOT_FOUND, "multiply: unknown id is NOT_FOUND");
    free(x), free(y);
}

static void test_float32(spmv_client *h, const coo *m, const char *text, size_t len)
{
    spmv_client_upload_options o = {.name = "calls-f32", .dtype = "float32", .formats = "csr,hll", .hack_size = 16,
                                    .device = "cpu"};
    spmv_client_matrix *d = NULL;
    EXPECT(h, spmv_client_upload_memory(h, text, len, &o, &d), SPMV_CLIENT_OK, "upload float32 from memory");
    if (!d) return;
    check(d->dtype == SPMV_CLIENT_FLOAT32 && strcmp(d->name, "calls-f32") == 0,
          "float32: descriptor says float32 and the name given");
    bool hll = false;
    for (size_t i = 0; i < d->nformats; i++) hll = hll || strcmp(d->formats[i].name, "hll") == 0;
    check(hll && strstr(d->json, "\"hack_size\":16") && strcmp(d->device, "cpu") == 0,
          "upload options: formats csr,hll, hack_size 16, device cpu honoured");
    size_t nx = (size_t)m->cols, ny = (size_t)m->rows;
    float *x = malloc(nx * sizeof *x), *y = malloc(ny * sizeof *y);
    double *xd = malloc(nx * sizeof *xd), *yd = malloc(ny * sizeof *yd), *ref = malloc(ny * sizeof *ref);
    for (size_t j = 0; j < nx; j++) xd[j] = x[j] = (float)uniform();
    reference_y(m, xd, ref);
    for (size_t i = 0; i < ny; i++) y[i] = NAN;
    spmv_client_spmv_options so = {.kernel = "cpu.csr.serial"};
    EXPECT(h, spmv_client_multiply(h, d->id, SPMV_CLIENT_FLOAT32, x, nx, y, ny, &so, NULL), SPMV_CLIENT_OK,
           "multiply float32");
    for (size_t i = 0; i < ny; i++) yd[i] = y[i];
    double e = rel_err(yd, ref, ny);
    check(e < 1e-5, "float32: y matches the float64 reference to 1e-5 (%.3g)", e);
    EXPECT(h, spmv_client_delete(h, d->id), SPMV_CLIENT_OK, "delete float32 matrix");
    spmv_client_matrix_free(d);
    free(x), free(y), free(xd), free(yd), free(ref);
}

static void test_bench(spmv_client *h, const char *id)
{
    const char *kernels[] = {"cpu.csr.serial", "cpu.csr.omp", NULL};
    spmv_client_bench_options o = {.kernels = kernels, .runs = 2, .warmup = 1};
    char job[64];
    EXPECT(h, spmv_client_bench_start(h, id, &o, job), SPMV_CLIENT_OK, "bench_start");
    check(spmv_client_http_status(h) == 202 && *job, "bench_start: 202 and a job id ('%s')", job);
    progress_log p = {0};
    spmv_client_job *j = NULL;
    EXPECT(h, spmv_client_job_wait(h, job, 50, on_progress, &p, &j), SPMV_CLIENT_OK, "job_wait");
    check(j && strcmp(j->state, "done") == 0 && j->progress == 1.0, "job_wait: state done, progress 1 ('%s')",
          j ? j->state : "");
    check(j && j->result && strstr(j->result, "cpu.csr.serial") && strstr(j->result, "cpu.csr.omp"),
          "job_wait: result names both kernels");
    check(p.calls >= 1 && p.last_done == 1000 && p.last_total == 1000, "job_wait: progress callback saw 1000/1000");
    spmv_client_job_free(j);
    j = NULL;
    EXPECT(h, spmv_client_job_get(h, job, &j), SPMV_CLIENT_OK, "job_get of a finished job");
    spmv_client_job_free(j);
    EXPECT(h, spmv_client_job_get(h, "00000000-0000-0000-0000-000000000000", &j), SPMV_CLIENT_ERR_NOT_FOUND,
           "job_get: unknown job is NOT_FOUND");
    check(j == NULL, "job_get: out pointer NULL on failure");
    EXPECT(h, spmv_client_bench_start(h, "00000000-0000-0000-0000-000000000000", &o, job),
           SPMV_CLIENT_ERR_NOT_FOUND, "bench_start: unknown matrix is NOT_FOUND");
}

static void test_bad_uploads(spmv_client *h, const char *tmpdir)
{
    static const char bad[] = "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1.0\n3 1 2.0\n";
    spmv_client_matrix *d = (spmv_client_matrix *)1;
    EXPECT(h, spmv_client_upload_memory(h, bad, sizeof bad - 1, NULL, &d), SPMV_CLIENT_ERR_BAD_MATRIX,
           "upload: index out of range is BAD_MATRIX");
    check(d == NULL, "upload: out pointer NULL on failure");
    check(spmv_client_http_status(h) == 422 && strstr(spmv_client_errmsg(h), "line 4") && *spmv_client_errcode(h),
          "upload: HTTP 422, code '%s', message names line 4 ('%s')", spmv_client_errcode(h), spmv_client_errmsg(h));
    static const char cplx[] = "%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1.0 2.0\n";
    EXPECT(h, spmv_client_upload_memory(h, cplx, sizeof cplx - 1, NULL, &d), SPMV_CLIENT_ERR_BAD_MATRIX,
           "upload: complex is BAD_MATRIX");
    check(strstr(spmv_client_errmsg(h), "complex") != NULL, "upload: message says complex ('%s')",
          spmv_client_errmsg(h));
    char path[4096];
    snprintf(path, sizeof path, "%s/does-not-exist.mtx", tmpdir);
    EXPECT(h, spmv_client_upload_file(h, path, NULL, &d), SPMV_CLIENT_ERR_IO, "upload_file: missing file is IO");
    check(strstr(spmv_client_errmsg(h), "does-not-exist.mtx") != NULL, "upload_file: message names the path");
    progress_log stop = {.stop = 1};
    spmv_client_upload_options o = {.progress = on_progress, .progress_user = &stop};
    EXPECT(h, spmv_client_upload_memory(h, bad, sizeof bad - 1, &o, &d), SPMV_CLIENT_ERR_ABORTED,
           "upload: a progress callback returning nonzero aborts it");
}

/* Upload from a file and from memory, describe, list, multiply, bench,
 * delete: the happy path of a matrix's life, with its error neighbours. */
static void test_matrices(spmv_client *h, const char *tmpdir)
{
    coo m = {0};
    int64_t rows = 200 + (int64_t)(rng() % 300), cols = 150 + (int64_t)(rng() % 300);
    if (!random_coo(&m, rows, cols, 1 + (int)(rng() % 9))) {
        check(false, "memory for the random matrix");
        return;
    }
    size_t len = 0;
    char *text = matrix_market(&m, &len), path[4096];
    snprintf(path, sizeof path, "%s/calls.mtx", tmpdir);
    FILE *f = fopen(path, "w");
    if (f) fwrite(text, 1, len, f), fclose(f);

    progress_log p = {0};
    spmv_client_upload_options o = {.name = "calls-file", .progress = on_progress, .progress_user = &p};
    spmv_client_matrix *d = NULL, *d2 = NULL;
    EXPECT(h, spmv_client_upload_file(h, path, &o, &d), SPMV_CLIENT_OK, "upload_file %" PRId64 " x %" PRId64, rows,
           cols);
    check(spmv_client_http_status(h) == 201, "upload_file: HTTP 201");
    check(d && d->rows == rows && d->cols == cols && d->nnz <= m.nnz && d->nnz > 0 && strlen(d->id) > 0,
          "upload_file: descriptor has the id and the shape");
    check(d && strcmp(d->name, "calls-file") == 0 && d->dtype == SPMV_CLIENT_FLOAT64,
          "upload_file: name and default dtype float64 ('%s')", d ? d->name : "");
    check(p.calls > 0 && p.last_total == p.last_done && p.last_total > len,
          "upload_file: progress reached the total (%" PRIu64 " of %" PRIu64 ")", p.last_done, p.last_total);
    if (!d) goto done;

    EXPECT(h, spmv_client_describe(h, d->id, &d2), SPMV_CLIENT_OK, "describe");
    check(d2 && strcmp(d2->id, d->id) == 0 && d2->nnz == d->nnz && d2->nformats > 0 && d2->json,
          "describe: same id and nnz, %zu formats", d2 ? d2->nformats : 0);
    spmv_client_matrix_free(d2);

    spmv_client_matrix_list *l = NULL;
    EXPECT(h, spmv_client_list(h, &l), SPMV_CLIENT_OK, "list");
    bool found = false;
    for (size_t i = 0; l && i < l->count; i++) found = found || strcmp(l->items[i].id, d->id) == 0;
    check(found, "list: holds the uploaded matrix");
    spmv_client_matrix_list_free(l);

    test_multiply_once(h, d->id, &m, "cpu.csr.serial");
    test_multiply_once(h, d->id, &m, "cpu.csr.omp");
    test_multiply_errors(h, d->id, &m);
    test_bench(h, d->id);
    test_float32(h, &m, text, len);

    EXPECT(h, spmv_client_delete(h, d->id), SPMV_CLIENT_OK, "delete");
    check(spmv_client_http_status(h) == 204, "delete: HTTP 204");
    d2 = (spmv_client_matrix *)1;
    EXPECT(h, spmv_client_describe(h, d->id, &d2), SPMV_CLIENT_ERR_NOT_FOUND, "describe after delete: NOT_FOUND");
    check(d2 == NULL && spmv_client_http_status(h) == 404 && *spmv_client_errmsg(h) && *spmv_client_errcode(h),
          "describe after delete: 404 with code '%s' and message '%s'", spmv_client_errcode(h),
          spmv_client_errmsg(h));
    EXPECT(h, spmv_client_delete(h, d->id), SPMV_CLIENT_ERR_NOT_FOUND, "delete twice: NOT_FOUND");
done:
    spmv_client_matrix_free(d);
    free(text);
    coo_free(&m);
}

static void test_unreachable(const char *dead_url, const char *silent_url)
{
    spmv_client *h = spmv_client_new(dead_url, NULL, NULL);
    EXPECT(h, spmv_client_health(h, NULL), SPMV_CLIENT_ERR_UNREACHABLE, "health on a closed port: UNREACHABLE");
    check(spmv_client_http_status(h) == 0 && *spmv_client_errmsg(h), "unreachable: no HTTP status, a message ('%s')",
          spmv_client_errmsg(h));
    spmv_client_matrix_list *l = (spmv_client_matrix_list *)1;
    EXPECT(h, spmv_client_list(h, &l), SPMV_CLIENT_ERR_UNREACHABLE, "list on a closed port: UNREACHABLE");
    check(l == NULL, "unreachable: out pointer NULL");
    spmv_client_free(h);

    spmv_client_options o = {.timeout_ms = 300};
    h = spmv_client_new(silent_url, &o, NULL);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    EXPECT(h, spmv_client_health(h, NULL), SPMV_CLIENT_ERR_TIMEOUT, "health on a silent socket, 300 ms: TIMEOUT");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    check(s < 10, "timeout: returned instead of hanging (%.2f s)", s);
    spmv_client_free(h);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: client_calls URL DEAD_URL SILENT_URL TMPDIR\n");
        return 2;
    }
    const char *seed_env = getenv("SPMV_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10) : (uint64_t)time(NULL) ^ (uint64_t)getpid();
    rng_state = seed;
    printf("# client_calls seed %" PRIu64 " (set SPMV_SEED to repeat)\n", seed);

    test_handles(argv[1]);
    spmv_client *h = spmv_client_new(argv[1], NULL, NULL);
    if (!check(h != NULL, "new: handle for %s", argv[1])) return 1;
    test_server(h);
    test_matrices(h, argv[4]);
    test_bad_uploads(h, argv[4]);
    spmv_client_free(h);
    test_unreachable(argv[2], argv[3]);
    printf("# tests %d\n", tests);
    return failures ? 1 : 0;
}
