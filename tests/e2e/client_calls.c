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
 * every multiply. The 0.2 calls (resident vectors, spmv with resident
 * operands, ops, solve, job cancel) are checked the same way: values read
 * back and compared with C references (y = A·x, Aᵀ·x, BLAS-1 done here, a
 * random SPD system whose solution is all ones); they are skipped as a
 * group when the daemon has no /v1/vectors. The 0.4 ones: solves of
 * float32, mixed and float64 matrices with b in binary against the JSON
 * request (the same x), spmv_client_new(NULL) with $SPMVD_URL and
 * $SPMV_URL, and job_wait's long polls timed against the daemon's clock
 * on jobs a second handle cancels from a thread. Prints "ok N - ..."
 * lines and last "# tests N".
 */
#include "spmvclient.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client_tap.h"

static void reference_y(const coo *m, const double *x, double *y)
{
    for (int64_t i = 0; i < m->rows; i++) y[i] = 0;
    for (int64_t k = 0; k < m->nnz; k++) y[m->r[k]] += m->v[k] * x[m->c[k]];
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

/* spmv_client_new(NULL): $SPMVD_URL, else $SPMV_URL (the alias). */
static void test_default_url(const char *url, const char *dead_url)
{
    setenv("SPMVD_URL", url, 1);
    setenv("SPMV_URL", dead_url, 1);
    spmv_client *h = spmv_client_new(NULL, NULL, NULL);
    EXPECT(h, spmv_client_health(h, NULL), SPMV_CLIENT_OK, "new(NULL): health at $SPMVD_URL (over $SPMV_URL)");
    spmv_client_free(h);
    unsetenv("SPMVD_URL");
    setenv("SPMV_URL", url, 1);
    h = spmv_client_new(NULL, NULL, NULL);
    EXPECT(h, spmv_client_health(h, NULL), SPMV_CLIENT_OK, "new(NULL): health at $SPMV_URL, the alias");
    spmv_client_free(h);
    setenv("SPMVD_URL", dead_url, 1);
    h = spmv_client_new(NULL, NULL, NULL);
    EXPECT(h, spmv_client_health(h, NULL), SPMV_CLIENT_ERR_UNREACHABLE, "new(NULL): $SPMVD_URL comes first");
    spmv_client_free(h);
    unsetenv("SPMVD_URL");
    unsetenv("SPMV_URL");
    check(strcmp(spmv_client_default_url(), "http://127.0.0.1:8080") == 0, "default_url without the variables");
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

/* dtype "mixed": the descriptor says so (mixed), its vectors are float64. */
static void test_mixed(spmv_client *h, const coo *m, const char *text, size_t len)
{
    spmv_client_upload_options o = {.name = "calls-mixed", .dtype = "mixed", .device = "cpu"};
    spmv_client_matrix *d = NULL;
    EXPECT(h, spmv_client_upload_memory(h, text, len, &o, &d), SPMV_CLIENT_OK, "upload mixed from memory");
    if (!d) return;
    check(d->mixed && d->dtype == SPMV_CLIENT_FLOAT64 && strstr(d->json, "\"dtype\":\"mixed\""),
          "mixed: the descriptor says mixed, its vectors float64");
    size_t nx = (size_t)m->cols, ny = (size_t)m->rows;
    double *x = malloc(nx * sizeof *x), *y = malloc(ny * sizeof *y), *ref = malloc(ny * sizeof *ref);
    for (size_t j = 0; j < nx; j++) x[j] = uniform();
    reference_y(m, x, ref);
    for (size_t i = 0; i < ny; i++) y[i] = NAN;
    spmv_client_spmv_options so = {.kernel = "cpu.csr.serial"};
    EXPECT(h, spmv_client_multiply(h, d->id, SPMV_CLIENT_FLOAT64, x, nx, y, ny, &so, NULL), SPMV_CLIENT_OK,
           "multiply mixed with float64 vectors");
    double e = rel_err(y, ref, ny);
    check(e < 1e-6, "mixed: y within float32's rounding of the values of the float64 reference (%.3g)", e);
    EXPECT(h, spmv_client_delete(h, d->id), SPMV_CLIENT_OK, "delete mixed matrix");
    spmv_client_matrix_free(d);
    free(x), free(y), free(ref);
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

/* The handle's statistic (0.5): refused locally unless mean or median;
 * with "mean" a product's GFLOP/s is 2*nnz over the mean time and a
 * bench's table says stat mean; NULL goes back to the median. */
static void stat_multiply(spmv_client *h, const char *id, const coo *m, int64_t nnz, const char *which)
{
    size_t nx = (size_t)m->cols, ny = (size_t)m->rows;
    double *x = malloc(nx * sizeof *x), *y = malloc(ny * sizeof *y);
    for (size_t j = 0; j < nx; j++) x[j] = uniform();
    spmv_client_spmv_options o = {.kernel = "cpu.csr.omp", .runs = 7, .warmup = 2};
    spmv_client_spmv_result r;
    EXPECT(h, spmv_client_multiply(h, id, SPMV_CLIENT_FLOAT64, x, nx, y, ny, &o, &r), SPMV_CLIENT_OK,
           "multiply at the %s", which);
    double ms = strcmp(which, "mean") == 0 ? r.stats.mean_ms : r.stats.median_ms;
    double want = 2.0 * (double)nnz / (ms * 1e6); /* times and rates carry 6 digits */
    check(fabs(r.stats.gflops - want) <= 3e-5 * want, "multiply at the %s: gflops %.6g = 2*nnz / %s_ms (%.6g)", which,
          r.stats.gflops, which, want);
    free(x), free(y);
}

static void test_stat(spmv_client *h, const char *id, const coo *m, int64_t nnz)
{
    EXPECT(h, spmv_client_set_stat(h, "p99"), SPMV_CLIENT_ERR_INVALID, "set_stat p99: INVALID");
    check(strstr(spmv_client_errmsg(h), "mean") && strstr(spmv_client_errmsg(h), "p99"),
          "set_stat p99: the message names the value and the statistics ('%s')", spmv_client_errmsg(h));
    EXPECT(h, spmv_client_set_stat(h, "mean"), SPMV_CLIENT_OK, "set_stat mean");
    stat_multiply(h, id, m, nnz, "mean");
    const char *kernels[] = {"cpu.csr.serial", "cpu.csr.omp", NULL};
    spmv_client_bench_options o = {.kernels = kernels, .runs = 3, .warmup = 1};
    char job[64];
    spmv_client_job *j = NULL;
    EXPECT(h, spmv_client_bench_start(h, id, &o, job), SPMV_CLIENT_OK, "bench_start at the mean");
    EXPECT(h, spmv_client_job_wait(h, job, 0, NULL, NULL, &j), SPMV_CLIENT_OK, "job_wait of the bench at the mean");
    check(j && j->result && strstr(j->result, "\"stat\":\"mean\"") && strstr(j->result, "\"efficiency\""),
          "bench at the mean: the table says stat mean and carries efficiency");
    spmv_client_job_free(j);
    j = NULL;
    EXPECT(h, spmv_client_bench_start_json(h, id, "{\"kernels\":[\"cpu.csr.omp\"],\"runs\":2,\"warmup\":1,"
                                                  "\"threads\":[1,2]}", job),
           SPMV_CLIENT_OK, "bench_start_json with a thread sweep");
    EXPECT(h, spmv_client_job_wait(h, job, 0, NULL, NULL, &j), SPMV_CLIENT_OK, "job_wait of the JSON bench");
    check(j && j->result && strstr(j->result, "\"threads\":[1,2]") && strstr(j->result, "\"stat\":\"mean\"") &&
              strstr(j->result, "\"threads_used\":2"),
          "bench_start_json: the table sweeps threads 1 and 2, at the handle's statistic (mean)");
    spmv_client_job_free(j);
    EXPECT(h, spmv_client_bench_start_json(h, id, "[1]", job), SPMV_CLIENT_ERR_INVALID, "bench_start_json [1]: INVALID");
    EXPECT(h, spmv_client_bench_start_json(h, id, "{\"threads\":\"many\"}", job), SPMV_CLIENT_ERR_BAD_REQUEST,
           "bench_start_json with threads \"many\": BAD_REQUEST from the daemon");
    EXPECT(h, spmv_client_set_stat(h, NULL), SPMV_CLIENT_OK, "set_stat NULL: back to the default");
    stat_multiply(h, id, m, nnz, "median");
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
    char *text = matrix_market(&m, &len, "client_calls"), path[4096];
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
    test_stat(h, d->id, &m, d->nnz);
    test_float32(h, &m, text, len);
    test_mixed(h, &m, text, len);

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

/* ------------------------------------- vectors, resident spmv, ops, solve */

static void skip(const char *why)
{
    printf("ok %d # SKIP %s\n", ++tests, why);
}

static double max_abs_diff(const double *a, const double *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i])) return INFINITY;
        m = fmax(m, fabs(a[i] - b[i]));
    }
    return m;
}

/* y = Aᵀ·x, the reference for op 't'. */
static void reference_yt(const coo *m, const double *x, double *y)
{
    for (int64_t j = 0; j < m->cols; j++) y[j] = 0;
    for (int64_t k = 0; k < m->nnz; k++) y[m->c[k]] += m->v[k] * x[m->r[k]];
}

/* Uploads m from memory; NULL (reported) on failure. */
static spmv_client_matrix *upload_coo(spmv_client *h, const coo *m, const char *name)
{
    size_t len = 0;
    char *text = matrix_market(m, &len, "client_calls");
    spmv_client_upload_options o = {.name = name, .device = "cpu"};
    spmv_client_matrix *d = NULL;
    EXPECT(h, text ? spmv_client_upload_memory(h, text, len, &o, &d) : SPMV_CLIENT_ERR_NOMEM, SPMV_CLIENT_OK,
           "upload %s", name);
    free(text);
    return d;
}

/* Reads vector id (count float64 values) into a fresh array, or NULL. */
static double *read_back(spmv_client *h, const char *id, size_t count)
{
    double *v = malloc(count * sizeof *v);
    if (!v) return NULL;
    poison(v, count);
    spmv_client_status st = spmv_client_vector_read(h, id, SPMV_CLIENT_FLOAT64, v, count, NULL);
    if (st != SPMV_CLIENT_OK) {
        diag(h, st);
        free(v);
        return NULL;
    }
    return v;
}

static void test_vectors(spmv_client *h, const spmv_client_matrix *a, const coo *m)
{
    size_t nc = (size_t)m->cols, nr = (size_t)m->rows;
    double *x = malloc(2 * nc * sizeof *x), *back = NULL;
    for (size_t j = 0; j < 2 * nc; j++) x[j] = uniform();
    spmv_client_vector_options like = {.like = a->id};
    spmv_client_vector *v = NULL, *f = NULL, *r1 = NULL, *r2 = NULL, *r3 = NULL, *blk = NULL;

    EXPECT(h, spmv_client_vector_create(h, SPMV_CLIENT_FLOAT64, x, nc, &like, &v), SPMV_CLIENT_OK,
           "vector_create from values like the matrix");
    check(v && v->n == (int64_t)nc && v->k == 1 && v->dtype == SPMV_CLIENT_FLOAT64 && strcmp(v->device, "cpu") == 0 &&
              spmv_client_http_status(h) == 201,
          "vector_create: 201, n = cols (%zu), k 1, float64, on cpu", nc);
    if (!v) goto done;
    back = read_back(h, v->id, nc);
    check(back && memcmp(back, x, nc * sizeof *x) == 0, "vector_read: the values come back bit for bit");
    free(back);
    back = NULL;

    spmv_client_vector_options rows = {.like = a->id, .side = "rows"};
    EXPECT(h, spmv_client_vector_fill(h, 0, 2.5, &rows, &f), SPMV_CLIENT_OK, "vector_fill 2.5, side rows");
    check(f && f->n == (int64_t)nr, "vector_fill: n = rows (%zu)", nr);
    if (f && (back = read_back(h, f->id, nr))) {
        bool all = true;
        for (size_t i = 0; i < nr; i++) all = all && back[i] == 2.5;
        check(all, "vector_fill: every value is 2.5");
        free(back);
        back = NULL;
    }
    spmv_client_vector_options plain = {.device = "cpu"};
    EXPECT(h, spmv_client_vector_random(h, 50, 7, &plain, &r1), SPMV_CLIENT_OK, "vector_random seed 7");
    EXPECT(h, spmv_client_vector_random(h, 50, 7, &plain, &r2), SPMV_CLIENT_OK, "vector_random seed 7 again");
    EXPECT(h, spmv_client_vector_random(h, 50, 8, &plain, &r3), SPMV_CLIENT_OK, "vector_random seed 8");
    if (r1 && r2 && r3) {
        double *a1 = read_back(h, r1->id, 50), *a2 = read_back(h, r2->id, 50), *a3 = read_back(h, r3->id, 50);
        bool finite = a1 != NULL;
        for (size_t i = 0; a1 && i < 50; i++) finite = finite && isfinite(a1[i]);
        check(a1 && a2 && a3 && finite && memcmp(a1, a2, 400) == 0 && memcmp(a1, a3, 400) != 0,
              "vector_random: finite, the same seed gives the same values, another seed others");
        free(a1), free(a2), free(a3);
    }
    /* a block of k = 2 columns, column-major */
    spmv_client_vector_options k2 = {.like = a->id, .k = 2};
    EXPECT(h, spmv_client_vector_create(h, SPMV_CLIENT_FLOAT64, x, 2 * nc, &k2, &blk), SPMV_CLIENT_OK,
           "vector_create k = 2");
    check(blk && blk->n == (int64_t)nc && blk->k == 2, "vector_create k = 2: n = cols, k = 2");
    if (blk && (back = read_back(h, blk->id, 2 * nc))) {
        check(memcmp(back, x, 2 * nc * sizeof *x) == 0, "vector_read k = 2: both columns back");
        free(back);
        back = NULL;
    }
    /* overwrite */
    for (size_t j = 0; j < nc; j++) x[j] = -x[j];
    spmv_client_vector *d = NULL;
    EXPECT(h, spmv_client_vector_write(h, v->id, SPMV_CLIENT_FLOAT64, x, nc, &d), SPMV_CLIENT_OK, "vector_write");
    check(d && strcmp(d->id, v->id) == 0, "vector_write: the answer is the descriptor");
    spmv_client_vector_free(d);
    if ((back = read_back(h, v->id, nc))) {
        check(memcmp(back, x, nc * sizeof *x) == 0, "vector_write: the new values read back");
        free(back);
        back = NULL;
    }
    EXPECT(h, spmv_client_vector_write(h, v->id, SPMV_CLIENT_FLOAT64, x, nc - 1, NULL), SPMV_CLIENT_ERR_BAD_REQUEST,
           "vector_write one value short is BAD_REQUEST");
    check(*spmv_client_errcode(h) != '\0', "vector_write short: code '%s', message '%s'", spmv_client_errcode(h),
          spmv_client_errmsg(h));
    float xf[4] = {1, 2, 3, 4};
    EXPECT(h, spmv_client_vector_write(h, v->id, SPMV_CLIENT_FLOAT32, xf, 4, NULL), SPMV_CLIENT_ERR_BAD_REQUEST,
           "vector_write float32 values into a float64 vector is BAD_REQUEST");
    EXPECT(h, spmv_client_vector_read(h, v->id, SPMV_CLIENT_FLOAT32, xf, 4, NULL), SPMV_CLIENT_ERR_INVALID,
           "vector_read into a float32 buffer of a float64 vector is INVALID");
    spmv_client_vector_options bad_like = {.like = "00000000-0000-0000-0000-000000000000"};
    spmv_client_vector *nv = NULL;
    EXPECT(h, spmv_client_vector_fill(h, 0, 1, &bad_like, &nv), SPMV_CLIENT_ERR_NOT_FOUND,
           "vector_fill like an unknown matrix is NOT_FOUND");
    spmv_client_vector_options bad_n = {.like = a->id};
    EXPECT(h, spmv_client_vector_create(h, SPMV_CLIENT_FLOAT64, x, nc - 1, &bad_n, &nv), SPMV_CLIENT_ERR_BAD_REQUEST,
           "vector_create like the matrix with a wrong length is BAD_REQUEST");

    spmv_client_vector_list *l = NULL;
    EXPECT(h, spmv_client_vectors(h, &l), SPMV_CLIENT_OK, "vectors (list)");
    int seen = 0;
    for (size_t i = 0; l && i < l->count; i++)
        seen += strcmp(l->items[i].id, v->id) == 0 || strcmp(l->items[i].id, blk ? blk->id : "") == 0;
    check(seen == 2, "vectors: lists the vector and the block");
    spmv_client_vector_list_free(l);

    EXPECT(h, spmv_client_vector_delete(h, r1 ? r1->id : "x"), SPMV_CLIENT_OK, "vector_delete");
    check(spmv_client_http_status(h) == 204, "vector_delete: 204");
    double one;
    EXPECT(h, spmv_client_vector_read(h, r1 ? r1->id : "x", SPMV_CLIENT_FLOAT64, &one, 1, NULL),
           SPMV_CLIENT_ERR_NOT_FOUND, "vector_read after delete is NOT_FOUND");
    check(strcmp(spmv_client_errcode(h), "vector_not_found") == 0, "... with code vector_not_found ('%s')",
          spmv_client_errcode(h));
    EXPECT(h, spmv_client_vector_delete(h, r1 ? r1->id : "x"), SPMV_CLIENT_ERR_NOT_FOUND, "vector_delete twice");
done:
    spmv_client_vector *all[] = {v, f, r2, r3, blk};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        if (all[i]) spmv_client_vector_delete(h, all[i]->id);
        spmv_client_vector_free(all[i]);
    }
    spmv_client_vector_free(r1);
    free(x);
}

static void test_resident_spmv(spmv_client *h, const spmv_client_matrix *a, const coo *m)
{
    size_t nc = (size_t)m->cols, nr = (size_t)m->rows;
    double *x = malloc(2 * nc * sizeof *x), *y0 = malloc(nr * sizeof *y0), *ref = malloc(2 * nr * sizeof *ref);
    double *y = malloc(2 * nr * sizeof *y), *xt = malloc(nr * sizeof *xt), *reft = malloc(nc * sizeof *reft);
    for (size_t j = 0; j < 2 * nc; j++) x[j] = uniform();
    for (size_t i = 0; i < nr; i++) y0[i] = uniform(), xt[i] = uniform();
    spmv_client_vector_options cols = {.like = a->id}, rows = {.like = a->id, .side = "rows"};
    spmv_client_vector *vx = NULL, *vy = NULL, *vxt = NULL, *vyt = NULL;
    double *back;

    if (spmv_client_vector_create(h, SPMV_CLIENT_FLOAT64, x, nc, &cols, &vx) != SPMV_CLIENT_OK ||
        spmv_client_vector_create(h, SPMV_CLIENT_FLOAT64, y0, nr, &rows, &vy) != SPMV_CLIENT_OK ||
        spmv_client_vector_create(h, SPMV_CLIENT_FLOAT64, xt, nr, &rows, &vxt) != SPMV_CLIENT_OK ||
        spmv_client_vector_fill(h, 0, 0, &cols, &vyt) != SPMV_CLIENT_OK) {
        check(false, "resident spmv: its vectors were made");
        goto done;
    }
    /* y = 2·A·x - 0.5·y0, both resident */
    spmv_client_operands ab = {.x_vector = vx->id, .y_vector = vy->id, .scale = 1, .alpha = 2, .beta = -0.5};
    spmv_client_spmv_options so = {.kernel = "cpu.csr.serial"};
    spmv_client_product_result pr;
    EXPECT(h, spmv_client_spmv(h, a->id, &ab, &so, &pr), SPMV_CLIENT_OK, "spmv: x and y resident, alpha 2, beta -0.5");
    reference_y(m, x, ref);
    for (size_t i = 0; i < nr; i++) ref[i] = 2 * ref[i] - 0.5 * y0[i];
    if ((back = read_back(h, vy->id, nr))) {
        double e = rel_err(back, ref, nr);
        check(e < 1e-12, "spmv alpha/beta: y = 2Ax - 0.5y0 (rel err %.3g)", e);
        free(back);
    }
    check(strcmp(pr.spmv.kernel, "cpu.csr.serial") == 0 && pr.spmv.request_ms > 0, "spmv resident: kernel named, timed");
    /* x resident, y inline */
    poison(y, nr);
    spmv_client_operands xi = {.x_vector = vx->id, .y = y, .ny = nr};
    EXPECT(h, spmv_client_spmv(h, a->id, &xi, NULL, NULL), SPMV_CLIENT_OK, "spmv: x resident, y inline");
    reference_y(m, x, ref);
    double e = rel_err(y, ref, nr);
    check(e < 1e-12, "spmv x resident: y matches (rel err %.3g)", e);
    /* x inline, y resident */
    spmv_client_operands yi = {.x = x, .nx = nc, .y_vector = vy->id};
    EXPECT(h, spmv_client_spmv(h, a->id, &yi, NULL, NULL), SPMV_CLIENT_OK, "spmv: x inline, y resident");
    if ((back = read_back(h, vy->id, nr))) {
        e = rel_err(back, ref, nr);
        check(e < 1e-12, "spmv y resident: y matches (rel err %.3g)", e);
        free(back);
    }
    /* transpose: x has rows values, y cols */
    spmv_client_operands t = {.x_vector = vxt->id, .y_vector = vyt->id, .op = 't'};
    EXPECT(h, spmv_client_spmv(h, a->id, &t, &so, NULL), SPMV_CLIENT_OK, "spmv op t, resident");
    reference_yt(m, xt, reft);
    if ((back = read_back(h, vyt->id, nc))) {
        e = rel_err(back, reft, nc);
        check(e < 1e-12, "spmv op t: y = Aᵀx (rel err %.3g)", e);
        free(back);
    }
    /* k = 2 columns inline, on a kernel that takes blocks */
    poison(y, 2 * nr);
    spmv_client_operands k2 = {.x = x, .nx = 2 * nc, .y = y, .ny = 2 * nr, .k = 2};
    spmv_client_spmv_options omp = {.kernel = "cpu.csr.omp"};
    EXPECT(h, spmv_client_spmv(h, a->id, &k2, &omp, NULL), SPMV_CLIENT_OK, "spmv k = 2 inline (cpu.csr.omp)");
    reference_y(m, x, ref);
    reference_y(m, x + nc, ref + nr);
    e = rel_err(y, ref, 2 * nr);
    check(e < 1e-12, "spmv k = 2: both columns match (rel err %.3g)", e);
    /* errors */
    spmv_client_operands wrong = {.x_vector = vxt->id, .y_vector = vy->id}; /* rows values where cols are due */
    if (nr != nc)
        EXPECT(h, spmv_client_spmv(h, a->id, &wrong, NULL, NULL), SPMV_CLIENT_ERR_BAD_REQUEST,
               "spmv: x of the wrong length is BAD_REQUEST (%s)", spmv_client_errcode(h));
    spmv_client_operands gone = {.x_vector = "00000000-0000-0000-0000-000000000000", .y_vector = vy->id};
    EXPECT(h, spmv_client_spmv(h, a->id, &gone, NULL, NULL), SPMV_CLIENT_ERR_NOT_FOUND, "spmv: unknown x vector is NOT_FOUND");
done:
    spmv_client_vector *all[] = {vx, vy, vxt, vyt};
    for (int i = 0; i < 4; i++) {
        if (all[i]) spmv_client_vector_delete(h, all[i]->id);
        spmv_client_vector_free(all[i]);
    }
    free(x), free(y0), free(ref), free(y), free(xt), free(reft);
}

static void test_ops(spmv_client *h, const spmv_client_matrix *a, const coo *m)
{
    size_t nc = (size_t)m->cols, nr = (size_t)m->rows;
    double *x = malloc(nc * sizeof *x), *w = malloc(nc * sizeof *w), *ref = malloc(nr * sizeof *ref);
    for (size_t j = 0; j < nc; j++) x[j] = uniform(), w[j] = uniform();
    spmv_client_vector_options cols = {.like = a->id}, rows = {.like = a->id, .side = "rows"};
    spmv_client_vector *va = NULL, *vb = NULL, *vc = NULL, *vy = NULL;
    spmv_client_ops *o = spmv_client_ops_new();
    spmv_client_ops_result *r = NULL;
    double *back;

    if (!o || spmv_client_vector_create(h, SPMV_CLIENT_FLOAT64, x, nc, &cols, &va) != SPMV_CLIENT_OK ||
        spmv_client_vector_create(h, SPMV_CLIENT_FLOAT64, w, nc, &cols, &vb) != SPMV_CLIENT_OK ||
        spmv_client_vector_fill(h, 0, 0, &cols, &vc) != SPMV_CLIENT_OK ||
        spmv_client_vector_fill(h, 0, 0, &rows, &vy) != SPMV_CLIENT_OK) {
        check(false, "ops: its vectors were made");
        goto done;
    }
    /* c = a; c *= 3; c += 0.5·b; b = 2·a - b; dot(a, b) , nrm2(c); y = A·c; dot(y, y) */
    spmv_client_ops_copy(o, va->id, vc->id);
    spmv_client_ops_scal(o, 3, vc->id);
    spmv_client_ops_axpy(o, 0.5, vb->id, vc->id);
    spmv_client_ops_axpby(o, 2, va->id, -1, vb->id);
    spmv_client_ops_dot(o, va->id, vb->id, "ab");
    spmv_client_ops_nrm2(o, vc->id, "cn");
    spmv_client_ops_spmv(o, a->id, vc->id, vy->id, 1, 0, 'n', "cpu.csr.serial");
    spmv_client_ops_dot(o, vy->id, vy->id, "yy");
    EXPECT(h, spmv_client_ops_run(h, o, &r), SPMV_CLIENT_OK, "ops_run: 8 steps");
    double *c = malloc(nc * sizeof *c), *b = malloc(nc * sizeof *b), ab = 0, cn = 0, yy = 0;
    for (size_t j = 0; j < nc; j++) {
        c[j] = 3 * x[j] + 0.5 * w[j];
        b[j] = 2 * x[j] - w[j];
        ab += x[j] * b[j];
        cn += c[j] * c[j];
    }
    cn = sqrt(cn);
    reference_y(m, c, ref);
    for (size_t i = 0; i < nr; i++) yy += ref[i] * ref[i];
    if (r) {
        double gab = spmv_client_ops_result_get(r, "ab", 0), gcn = spmv_client_ops_result_get(r, "cn", 0),
               gyy = spmv_client_ops_result_get(r, "yy", 0);
        check(fabs(gab - ab) <= 1e-12 * (fabs(ab) + cn * cn) && fabs(gcn - cn) <= 1e-12 * cn && fabs(gyy - yy) <= 1e-11 * yy,
              "ops: dot %.17g (want %.17g), nrm2 %.17g (%.17g), y.y %.17g (%.17g)", gab, ab, gcn, cn, gyy, yy);
        check(r->nsteps == 8 && strcmp(r->steps[6].op, "spmv") == 0 && r->steps[6].ms >= 0 && r->total_ms >= 0,
              "ops: 8 step times, step 7 is the spmv");
        check(strcmp(r->device, "cpu") == 0, "ops: ran on cpu ('%s')", r->device);
    }
    spmv_client_ops_result_free(r);
    r = NULL;
    if ((back = read_back(h, vc->id, nc))) {
        check(max_abs_diff(back, c, nc) < 1e-13 * (1 + cn), "ops: c = 3a + 0.5b in the daemon");
        free(back);
    }
    if ((back = read_back(h, vy->id, nr))) {
        check(rel_err(back, ref, nr) < 1e-12, "ops: y = A·c in the daemon");
        free(back);
    }
    free(c), free(b);
    /* fill, then a hand-written request */
    spmv_client_ops_clear(o);
    spmv_client_ops_fill(o, vc->id, 1.5);
    spmv_client_ops_dot(o, vc->id, vc->id, "cc");
    EXPECT(h, spmv_client_ops_run(h, o, &r), SPMV_CLIENT_OK, "ops_run: fill, dot");
    check(r && spmv_client_ops_result_get(r, "cc", 0) == 2.25 * (double)nc, "ops: fill 1.5 then c.c = 2.25 n");
    spmv_client_ops_result_free(r);
    r = NULL;
    /* a bad request changes nothing: a valid scal, then an unknown vector */
    char *json = NULL;
    if (asprintf(&json, "{\"steps\":[{\"op\":\"scal\",\"alpha\":0,\"x\":\"%s\"},{\"op\":\"dot\",\"x\":\"%s\","
                        "\"y\":\"00000000-0000-0000-0000-000000000000\",\"as\":\"d\"}]}", vc->id, vc->id) < 0)
        json = NULL;
    EXPECT(h, json ? spmv_client_ops_post(h, json, &r) : SPMV_CLIENT_ERR_NOMEM, SPMV_CLIENT_ERR_NOT_FOUND,
           "ops_post: an unknown vector in step 2 is NOT_FOUND");
    free(json);
    if ((back = read_back(h, vc->id, nc))) {
        bool same = true;
        for (size_t j = 0; j < nc; j++) same = same && back[j] == 1.5;
        check(same, "ops: the refused request changed nothing (step 1's scal did not run)");
        free(back);
    }
    spmv_client_ops_clear(o);
    spmv_client_ops_dot(o, va->id, vc->id, "d");
    spmv_client_ops_dot(o, va->id, vc->id, "d");
    EXPECT(h, spmv_client_ops_run(h, o, &r), SPMV_CLIENT_ERR_BAD_REQUEST, "ops: a duplicate 'as' name is BAD_REQUEST");
    if (nr != nc) {
        spmv_client_ops_clear(o);
        spmv_client_ops_dot(o, va->id, vy->id, "d");
        EXPECT(h, spmv_client_ops_run(h, o, &r), SPMV_CLIENT_ERR_BAD_REQUEST,
               "ops: dot of vectors of different lengths is BAD_REQUEST (%s)", spmv_client_errcode(h));
    }
done:
    spmv_client_vector *all[] = {va, vb, vc, vy};
    for (int i = 0; i < 4; i++) {
        if (all[i]) spmv_client_vector_delete(h, all[i]->id);
        spmv_client_vector_free(all[i]);
    }
    spmv_client_ops_free(o);
    free(x), free(w), free(ref);
}

/* A random SPD matrix: a 1-D Laplacian (2, -1) plus a random positive
 * diagonal shift, symmetric entries written both ways. */
static bool spd_coo(coo *m, int64_t n)
{
    m->rows = m->cols = n;
    m->nnz = 3 * n - 2;
    m->r = malloc((size_t)m->nnz * sizeof *m->r);
    m->c = malloc((size_t)m->nnz * sizeof *m->c);
    m->v = malloc((size_t)m->nnz * sizeof *m->v);
    if (!m->r || !m->c || !m->v) return false;
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        m->r[k] = i, m->c[k] = i, m->v[k++] = 3.5 + uniform(); /* in [2.5, 4.5): strictly dominant, so SPD */
        if (i > 0) m->r[k] = i, m->c[k] = i - 1, m->v[k++] = -1;
        if (i + 1 < n) m->r[k] = i, m->c[k] = i + 1, m->v[k++] = -1;
    }
    return true;
}

/* ------------------------------------------------ long polls of job_wait */

typedef struct polls {
    int calls;
    uint64_t last;
    double give_up_at;        /* the callback stops the wait past this (s): no hang */
} polls;

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int count_poll(void *user, uint64_t done, uint64_t total)
{
    polls *p = user;
    (void)total;
    p->calls++;
    p->last = done;
    return seconds_now() > p->give_up_at;
}

/* Cancels a job from a handle of its own after delay_ms (a thread): the
 * job ends when the test says, not when the solver does. */
typedef struct cancel_later {
    const char *url, *job_id;
    long delay_ms;
    spmv_client_status st;
} cancel_later;

static void *cancel_after(void *arg)
{
    cancel_later *c = arg;
    struct timespec ts = {c->delay_ms / 1000, (c->delay_ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {}
    spmv_client *h2 = spmv_client_new(c->url, NULL, NULL);
    c->st = h2 ? spmv_client_job_cancel(h2, c->job_id, NULL) : SPMV_CLIENT_ERR_NOMEM;
    spmv_client_free(h2);
    return NULL;
}

/* How long after the job ended the daemon answered, by its own clock:
 * age_s (at the answer) less queue_ms and run_ms (at the end); NaN when
 * the job does not say. */
static double job_lateness_ms(const spmv_client_job *j, double *run_ms)
{
    json_t *root = j ? json_loads(j->json, 0, NULL) : NULL;
    double age = json_number_value(json_object_get(root, "age_s")) * 1000;
    double queue = json_number_value(json_object_get(root, "queue_ms"));
    *run_ms = json_number_value(json_object_get(root, "run_ms"));
    bool known = json_is_number(json_object_get(root, "age_s")) && json_is_number(json_object_get(root, "run_ms"));
    json_decref(root);
    return known ? age - queue - *run_ms : NAN;
}

/* An async GMRES solve that would run for minutes (tol 3e-15, just above float64's 10 eps), cancelled
 * from a second handle after cancel_ms, waited for in slices of slice_ms:
 * the wait must end as soon as the job does (within 150 ms by the
 * daemon's clock), each poll held by the daemon (at most wall/slice + 2
 * polls: one for a 60 s slice; a client sleeping between quick polls
 * makes many more, and answers up to its interval late). */
static void long_poll_case(spmv_client *h, const char *url, const char *id, const double *b, size_t n,
                           long slice_ms, long cancel_ms)
{
    spmv_client_solve_options as = {.method = "gmres", .tol = 3e-15, .maxit = 1000000, .b = b, .nb = n,
                                    .kernel = "cpu.csr.serial", .async = 1};
    spmv_client_solve_result *r = NULL;
    spmv_client_job *j = NULL;
    EXPECT(h, spmv_client_solve(h, id, &as, NULL, 0, &r), SPMV_CLIENT_OK, "long poll: async gmres started");
    if (!r) return;
    cancel_later c = {.url = url, .job_id = r->job_id, .delay_ms = cancel_ms, .st = SPMV_CLIENT_ERR_INVALID};
    pthread_t t;
    bool started = pthread_create(&t, NULL, cancel_after, &c) == 0;
    double t0 = seconds_now();
    polls p = {.give_up_at = t0 + 60};
    spmv_client_status st = started ? spmv_client_job_wait(h, r->job_id, slice_ms, count_poll, &p, &j) : SPMV_CLIENT_ERR_NOMEM;
    double wall_ms = (seconds_now() - t0) * 1000, run_ms = NAN;
    if (started) pthread_join(t, NULL);
    double late = job_lateness_ms(j, &run_ms);
    if (!check(st == SPMV_CLIENT_OK && c.st == SPMV_CLIENT_OK && j && strcmp(j->state, "done") == 0,
               "long poll, %ld ms slices: cancelled after %ld ms, job_wait OK, state done", slice_ms, cancel_ms))
        diag(h, st);
    check(run_ms >= 0.8 * (double)cancel_ms && late < 150 && wall_ms < run_ms + 300,
          "long poll, %ld ms slices: answered %.1f ms after the job ended (ran %.0f ms, waited %.0f ms)", slice_ms,
          late, run_ms, wall_ms);
    check(p.calls >= 1 && p.calls <= (int)(wall_ms / (double)slice_ms) + 2 && (slice_ms < cancel_ms || p.calls == 1) &&
              p.last == 1000,
          "long poll, %ld ms slices: %d polls in %.0f ms, the last at %llu/1000", slice_ms, p.calls, wall_ms,
          (unsigned long long)p.last);
    spmv_client_job_free(j);
    spmv_client_solve_result_free(r);
}

/* job_wait's long polls on a generated 2-D Poisson matrix (10^4 rows). */
static void test_job_long_poll(spmv_client *h, const char *url)
{
    spmv_client_upload_options uo = {.device = "cpu", .name = "calls-poisson"};
    spmv_client_matrix *a = NULL;
    EXPECT(h, spmv_client_generate(h, "poisson2d", 100, -1, -1, 0, &uo, &a), SPMV_CLIENT_OK, "generate poisson2d 100");
    size_t n = a ? (size_t)a->rows : 0;
    double *b = n ? malloc(n * sizeof *b) : NULL;
    for (size_t i = 0; b && i < n; i++) b[i] = uniform();
    if (b) {
        long cancel_ms = 300 + (long)(rng() % 300);
        long_poll_case(h, url, a->id, b, n, 60000, cancel_ms);
        long_poll_case(h, url, a->id, b, n, 100, cancel_ms);
    }
    if (a) spmv_client_delete(h, a->id);
    spmv_client_matrix_free(a);
    free(b);
}

/* --------------------------------------------- binary and JSON solves */

/* One solve of a dtypes case: binary request (or JSON), x into x; the
 * iterations taken, -1 on failure. */
static int64_t solve_once(spmv_client *h, const char *dtype, const char *id, const spmv_client_solve_options *o,
                          double *x, size_t n, bool json, const double *want, double err)
{
    spmv_client_solve_result *r = NULL;
    poison(x, n);
    EXPECT(h, (json ? spmv_client_solve_json : spmv_client_solve)(h, id, o, x, n, &r), SPMV_CLIENT_OK,
           "solve %s (%s request%s)", dtype, json ? "JSON" : "binary", o->x0 ? ", x0 inline" : "");
    double e = max_abs_diff(x, want, n);
    check(r && r->converged && r->has_x && r->nhistory == (size_t)r->iterations + 1 && e < err,
          "solve %s (%s%s): converged, a residual per iteration and x0's, x = x_true within %g (%.3g)", dtype,
          json ? "JSON" : "binary", o->x0 ? ", x0 inline" : "", err, e);
    int64_t its = r && r->converged ? r->iterations : -1;
    spmv_client_solve_result_free(r);
    return its;
}

/* Inline b in binary on float32, mixed and float64 matrices against the
 * JSON request: b = A·x_true for a random x_true; both come back in the
 * matrix's dtype, widened by the library, and must agree (the same b
 * after rounding, the serial kernel: the same iterations); x0 inline
 * goes after b in the body. */
static void test_solve_dtypes(spmv_client *h, const coo *m)
{
    static const char *const dtypes[] = {"float32", "mixed", "float64"};
    size_t n = (size_t)m->rows, len = 0;
    char *text = matrix_market(m, &len, "solve dtypes");
    double *xt = malloc(n * sizeof *xt), *b = malloc(n * sizeof *b), *x = malloc(n * sizeof *x),
           *xj = malloc(n * sizeof *xj);
    for (size_t i = 0; xt && b && i < n; i++) xt[i] = uniform();
    if (xt && b) reference_y(m, xt, b);
    for (int i = 0; text && xt && b && x && xj && i < 3; i++) {
        spmv_client_upload_options uo = {.dtype = dtypes[i], .device = "cpu"};
        spmv_client_matrix *a = NULL;
        EXPECT(h, spmv_client_upload_memory(h, text, len, &uo, &a), SPMV_CLIENT_OK, "upload the SPD matrix %s", dtypes[i]);
        if (!a) continue;
        double tol = i == 0 ? 1e-5 : 1e-10, err = i == 0 ? 1e-3 : i == 1 ? 1e-5 : 1e-7;
        double same = i == 0 ? 1e-6 : 1e-12; /* binary against JSON */
        spmv_client_solve_options o = {.b = b, .nb = n, .tol = tol, .maxit = 1000, .kernel = "cpu.csr.serial"};
        int64_t its = solve_once(h, dtypes[i], a->id, &o, x, n, false, xt, err);
        int64_t its_json = solve_once(h, dtypes[i], a->id, &o, xj, n, true, xt, err);
        double d = max_abs_diff(x, xj, n);
        check(d <= same && its == its_json && its > 0,
              "solve %s: binary and JSON requests give the same x (max diff %.3g <= %g) in %lld and %lld iterations",
              dtypes[i], d, same, (long long)its, (long long)its_json);
        o.x0 = xt, o.nx0 = n; /* from (nearly) the answer: fewer iterations than from 0 */
        int64_t its0 = solve_once(h, dtypes[i], a->id, &o, x, n, false, xt, err);
        check(its0 >= 0 && its0 < its, "solve %s from x0 = x_true: %lld iterations, %lld from 0", dtypes[i],
              (long long)its0, (long long)its);
        spmv_client_delete(h, a->id);
        spmv_client_matrix_free(a);
    }
    free(text);
    free(xt), free(b), free(x), free(xj);
}

static void test_solve(spmv_client *h)
{
    coo m = {0};
    int64_t n = 60 + (int64_t)(rng() % 100);
    if (!spd_coo(&m, n)) {
        check(false, "memory for the SPD matrix");
        return;
    }
    spmv_client_matrix *a = upload_coo(h, &m, "calls-spd");
    double *ones = malloc((size_t)n * sizeof *ones), *b = malloc((size_t)n * sizeof *b), *x = malloc((size_t)n * sizeof *x);
    spmv_client_solve_result *r = NULL;
    spmv_client_vector *vb = NULL, *vx = NULL;
    if (!a) goto done;
    for (int64_t i = 0; i < n; i++) ones[i] = 1;
    reference_y(&m, ones, b); /* b = A·1: x = 1 solves it */

    static const char *const methods[] = {"cg", "bicgstab", "gmres"};
    for (int i = 0; i < 3; i++) {
        poison(x, (size_t)n);
        spmv_client_solve_options o = {.method = methods[i], .tol = 1e-10, .maxit = 500, .b = b, .nb = (size_t)n,
                                       .kernel = "cpu.csr.serial", .preconditioner = i == 0 ? "jacobi" : NULL};
        EXPECT(h, spmv_client_solve(h, a->id, &o, x, (size_t)n, &r), SPMV_CLIENT_OK, "solve %s", methods[i]);
        if (!r) continue;
        double e = max_abs_diff(x, ones, (size_t)n);
        check(r->converged && strcmp(r->stop_reason, "converged") == 0 && r->relres < 1e-10 && r->has_x,
              "solve %s: converged (%s), relres %.3g, %lld iterations", methods[i], r->stop_reason, r->relres,
              (long long)r->iterations);
        check(e < 1e-7, "solve %s: x = 1 within 1e-7 (max diff %.3g)", methods[i], e);
        check(r->nhistory >= 1 && r->iterations > 0 && r->spmv_calls > 0 && r->total_ms >= 0 &&
                  strcmp(r->method, methods[i]) == 0,
              "solve %s: history (%zu), spmv calls (%lld), times, method named", methods[i], r->nhistory,
              (long long)r->spmv_calls);
        spmv_client_solve_result_free(r);
        r = NULL;
    }
    /* maxit reached is an answer, not an error */
    spmv_client_solve_options few = {.tol = 1e-14, .maxit = 2, .b = b, .nb = (size_t)n};
    EXPECT(h, spmv_client_solve(h, a->id, &few, x, (size_t)n, &r), SPMV_CLIENT_OK, "solve with maxit 2");
    check(r && !r->converged && strcmp(r->stop_reason, "maxit") == 0 && r->iterations == 2,
          "solve maxit 2: not converged, reason maxit, 2 iterations");
    spmv_client_solve_result_free(r);
    r = NULL;
    /* b and x in resident vectors */
    spmv_client_vector_options like = {.like = a->id};
    if (spmv_client_vector_create(h, SPMV_CLIENT_FLOAT64, b, (size_t)n, &like, &vb) == SPMV_CLIENT_OK &&
        spmv_client_vector_fill(h, 0, 0, &like, &vx) == SPMV_CLIENT_OK) {
        spmv_client_solve_options rv = {.b_vector = vb->id, .x_out_vector = vx->id, .tol = 1e-10};
        EXPECT(h, spmv_client_solve(h, a->id, &rv, NULL, 0, &r), SPMV_CLIENT_OK, "solve: b and x as vectors");
        double *back = read_back(h, vx->id, (size_t)n);
        check(r && r->converged && back && max_abs_diff(back, ones, (size_t)n) < 1e-7,
              "solve into a vector: x = 1 read back from it");
        free(back);
        spmv_client_solve_result_free(r);
        r = NULL;
    } else {
        check(false, "solve: vectors for b and x were made");
    }
    /* async: a job, waited for, its result parsed */
    spmv_client_solve_options as = {.b = b, .nb = (size_t)n, .tol = 1e-10, .async = 1};
    EXPECT(h, spmv_client_solve(h, a->id, &as, x, (size_t)n, &r), SPMV_CLIENT_OK, "solve async");
    check(r && *r->job_id && spmv_client_http_status(h) == 202, "solve async: 202 and a job id");
    if (r && *r->job_id) {
        spmv_client_job *j = NULL;
        EXPECT(h, spmv_client_job_wait(h, r->job_id, 20, NULL, NULL, &j), SPMV_CLIENT_OK, "solve async: job_wait");
        spmv_client_solve_result *jr = NULL;
        poison(x, (size_t)n);
        EXPECT(h, spmv_client_solve_parse(h, j ? j->result : NULL, x, (size_t)n, &jr), SPMV_CLIENT_OK,
               "solve_parse of the job's result");
        check(jr && jr->converged && max_abs_diff(x, ones, (size_t)n) < 1e-7, "solve async: x = 1");
        spmv_client_solve_result_free(jr);
        spmv_client_job_free(j);
        j = NULL;
        EXPECT(h, spmv_client_job_cancel(h, r->job_id, &j), SPMV_CLIENT_OK, "job_cancel of a finished job drops it");
        check(j == NULL && spmv_client_http_status(h) == 204, "job_cancel finished: 204, no job");
        EXPECT(h, spmv_client_job_get(h, r->job_id, &j), SPMV_CLIENT_ERR_NOT_FOUND, "the dropped job is gone");
    }
    spmv_client_solve_result_free(r);
    r = NULL;
    EXPECT(h, spmv_client_job_cancel(h, "00000000-0000-0000-0000-000000000000", NULL), SPMV_CLIENT_ERR_NOT_FOUND,
           "job_cancel of an unknown job is NOT_FOUND");
    /* errors */
    EXPECT(h, spmv_client_solve(h, a->id, &(spmv_client_solve_options){.b = b, .nb = (size_t)n - 1}, x, (size_t)n, &r),
           SPMV_CLIENT_ERR_BAD_REQUEST, "solve: b one value short is BAD_REQUEST");
    EXPECT(h, spmv_client_solve(h, a->id, &(spmv_client_solve_options){.b = b, .nb = (size_t)n, .method = "lu"}, x,
                                (size_t)n, &r),
           SPMV_CLIENT_ERR_BAD_REQUEST, "solve: an unknown method is BAD_REQUEST");
    test_solve_dtypes(h, &m);
done:
    if (vb) spmv_client_vector_delete(h, vb->id);
    if (vx) spmv_client_vector_delete(h, vx->id);
    spmv_client_vector_free(vb);
    spmv_client_vector_free(vx);
    if (a) spmv_client_delete(h, a->id);
    spmv_client_matrix_free(a);
    free(ones), free(b), free(x);
    coo_free(&m);
}

/* The 0.2 calls; skipped as a group when the daemon has no /v1/vectors. */
static void test_resident(spmv_client *h)
{
    spmv_client_vector_list *l = NULL;
    spmv_client_status st = spmv_client_vectors(h, &l);
    spmv_client_vector_list_free(l);
    if (st == SPMV_CLIENT_ERR_NOT_FOUND) {
        skip("the daemon has no /v1/vectors (vectors, resident spmv, ops, solve not tested)");
        return;
    }
    coo m = {0};
    int64_t rows = 100 + (int64_t)(rng() % 200), cols = 80 + (int64_t)(rng() % 200);
    if (!random_coo(&m, rows, cols, 1 + (int)(rng() % 6))) {
        check(false, "memory for the random matrix");
        return;
    }
    spmv_client_matrix *a = upload_coo(h, &m, "calls-resident");
    if (a) {
        test_vectors(h, a, &m);
        test_resident_spmv(h, a, &m);
        test_ops(h, a, &m);
        spmv_client_delete(h, a->id);
    }
    spmv_client_matrix_free(a);
    coo_free(&m);
    test_solve(h);
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
    test_default_url(argv[1], argv[2]);
    spmv_client *h = spmv_client_new(argv[1], NULL, NULL);
    if (!check(h != NULL, "new: handle for %s", argv[1])) return 1;
    test_server(h);
    test_matrices(h, argv[4]);
    test_bad_uploads(h, argv[4]);
    test_resident(h);
    test_job_long_poll(h, argv[1]);
    spmv_client_free(h);
    test_unreachable(argv[2], argv[3]);
    printf("# tests %d\n", tests);
    return failures ? 1 : 0;
}
