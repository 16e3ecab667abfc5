/* spmvclient.h — libspmvclient, the C client of the spmvd SpMV service.
 *
 * This header is the library's documentation: every function, what it
 * allocates and who frees it, and which statuses it returns. docs/client.md
 * walks through it with examples that the tests compile and run.
 *
 * The model is hiredis and libuv: one opaque handle (spmv_client *) holding
 * one libcurl easy handle and the last error; every call returns an
 * spmv_client_status (0 = SPMV_CLIENT_OK, negative = failure), and
 * spmv_client_strerror() names a status. After a failure the handle keeps
 * the detail: spmv_client_errmsg() is the server's error message verbatim
 * when the server sent one ({"error":{"code","message"}}), or libcurl's or
 * the library's explanation otherwise; spmv_client_errcode() is the server's
 * error code ("not_found", "bad_matrix", ...) or "" when there was none;
 * spmv_client_http_status() is the HTTP status of the last answer (0 when no
 * answer arrived).
 *
 * THREAD SAFETY: one handle per thread. A handle must never be used by two
 * threads at once; different handles are independent and may be used
 * concurrently. spmv_client_new() calls curl_global_init(), which libcurl
 * >= 7.84 makes thread-safe; with an older libcurl create the first handle
 * before starting threads.
 *
 * OWNERSHIP: strings and buffers passed in are only read during the call
 * (the handle copies what it keeps). Objects returned through an out
 * pointer (spmv_client_matrix, spmv_client_matrix_list, spmv_client_job,
 * spmv_client_kernel_list, spmv_client_vector, spmv_client_vector_list,
 * spmv_client_ops_result, spmv_client_solve_result, spmv_client_shm,
 * spmv_client_shm_list, char * JSON texts)
 * belong to the caller and are
 * released with the matching *_free() function; on failure the out pointer
 * is set to NULL. Every *_free() accepts NULL.
 *
 * Sizes that come from the server (counts, rows, vector lengths, byte
 * counts) are range-checked before use; an answer that does not fit what
 * was asked for fails with SPMV_CLIENT_ERR_PROTOCOL instead of being
 * trusted.
 *
 * VERSIONS: 0.1 had the calls up to the jobs section; 0.2 (the same
 * soname, libspmvclient.so.0) adds resident vectors, products with
 * resident operands, batched steps (/v1/ops), solvers and job
 * cancellation. SPMV_CLIENT_VERSION_MINOR >= 2 tells a program it has them.
 * 0.3 adds shared-memory regions (spmv_client_shm_*, spmv_client_spmv_shm)
 * as new calls and new structures only: no 0.2 structure changed size,
 * so programs built against 0.2 run unchanged. 0.4 adds
 * spmv_client_solve_json() and spmv_client_default_url(), and changes no
 * signature or structure: spmv_client_job_wait() waits with long polls,
 * spmv_client_solve() sends inline b and x0 in binary, and
 * spmv_client_new(NULL, ...) takes the URL from the environment. 0.5
 * adds spmv_client_set_stat() (rates at the mean or the median), a new
 * call only. 0.6 adds spmv_client_bench_start_json() (a bench with any of
 * the route's fields: thread sweeps, hack sizes, seed), a new call only.
 * 0.7 adds spmv_client_solve_shm() (b and x of a solve in shared-memory
 * regions), a new call only.
 *
 * Link with pkg-config: cc prog.c $(pkg-config --cflags --libs spmvclient)
 */
#ifndef SPMVCLIENT_H
#define SPMVCLIENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SPMV_CLIENT_VERSION "0.7.0"
#define SPMV_CLIENT_VERSION_MAJOR 0
#define SPMV_CLIENT_VERSION_MINOR 7
#define SPMV_CLIENT_VERSION_PATCH 0

/* The library is built with -fvisibility=hidden; only what carries this
 * mark is exported. */
#if defined(__GNUC__) || defined(__clang__)
#define SPMV_CLIENT_API __attribute__((visibility("default")))
#else
#define SPMV_CLIENT_API
#endif

/* ---------------------------------------------------------------- status */

typedef enum spmv_client_status {
    SPMV_CLIENT_OK = 0,
    /* The call was refused before anything was sent. */
    SPMV_CLIENT_ERR_INVALID = -1,      /* bad argument (NULL, empty id, bad URL, ...) */
    SPMV_CLIENT_ERR_NOMEM = -2,        /* allocation failed */
    SPMV_CLIENT_ERR_IO = -3,           /* a local file could not be read */
    /* The transfer failed: no usable answer from the server. */
    SPMV_CLIENT_ERR_UNREACHABLE = -4,  /* name not resolved, connection refused */
    SPMV_CLIENT_ERR_TIMEOUT = -5,      /* connect or total timeout expired */
    SPMV_CLIENT_ERR_TRANSPORT = -6,    /* any other transfer error (TLS, reset, ...) */
    SPMV_CLIENT_ERR_PROTOCOL = -7,     /* the answer is malformed or out of range */
    SPMV_CLIENT_ERR_ABORTED = -8,      /* a progress callback asked to stop */
    /* The server answered with an error (errmsg/errcode carry its words). */
    SPMV_CLIENT_ERR_BAD_REQUEST = -9,  /* 400, 405, 415: the request was wrong */
    SPMV_CLIENT_ERR_UNAUTHORIZED = -10, /* 401: token missing or wrong; 403: refused by a setting (shm_disabled) */
    SPMV_CLIENT_ERR_NOT_FOUND = -11,   /* 404: no such matrix, job or route */
    SPMV_CLIENT_ERR_CONFLICT = -12,    /* 409 */
    SPMV_CLIENT_ERR_TOO_LARGE = -13,   /* 413: body beyond the server's limit */
    SPMV_CLIENT_ERR_BAD_MATRIX = -14,  /* 422: the Matrix Market input was refused */
    SPMV_CLIENT_ERR_HTTP = -15,        /* any other 4xx */
    SPMV_CLIENT_ERR_BUSY = -16,        /* 503: queue full or not ready; see retry_after */
    SPMV_CLIENT_ERR_DEVICE_MEMORY = -17, /* 507: device memory full */
    SPMV_CLIENT_ERR_SERVER = -18,      /* any other 5xx */
    SPMV_CLIENT_ERR_JOB_FAILED = -19,  /* a job ended in state "failed" */
} spmv_client_status;

/* A static English phrase for a status ("matrix or job not found"); never NULL. */
SPMV_CLIENT_API const char *spmv_client_strerror(int status);

/* True for the statuses that mean the server answered 4xx / 5xx. */
SPMV_CLIENT_API int spmv_client_status_is_client_error(int status);
SPMV_CLIENT_API int spmv_client_status_is_server_error(int status);

/* --------------------------------------------------------------- handles */

typedef struct spmv_client spmv_client;

/* Options for spmv_client_new(). Zero-initialise, then set what you need:
 *     spmv_client_options o = {0}; o.token = "s3cret";
 * Strings are copied. */
typedef struct spmv_client_options {
    const char *token;        /* sent as "Authorization: Bearer <token>"; NULL: none */
    const char *ca_file;      /* PEM bundle to verify the server's TLS certificate */
    int insecure;             /* nonzero: skip TLS peer and host name verification */
    long connect_timeout_ms;  /* 0: 10000 ms; negative is INVALID */
    long timeout_ms;          /* whole request, 0: no limit; negative is INVALID */
} spmv_client_options;

/* Creates a handle for the daemon at `url` ("http://127.0.0.1:8080", with
 * or without a trailing slash; http or https only; NULL:
 * spmv_client_default_url()). `opts` may be NULL for the defaults.
 * Nothing is sent until the first call. Returns NULL when `url` is not an
 * http(s) URL, an option is out of range, or memory or libcurl
 * initialisation fails; `why` (if not NULL) then receives the status.
 * Free with spmv_client_free(). */
SPMV_CLIENT_API spmv_client *spmv_client_new(const char *url, const spmv_client_options *opts,
                                             spmv_client_status *why);

/* The daemon's URL when none is given (0.4): $SPMVD_URL, else $SPMV_URL
 * (the older name, kept as an alias), else "http://127.0.0.1:8080" (the
 * Python client's spmvd.default_url()). The string is the environment's
 * or a static one: do not free it. */
SPMV_CLIENT_API const char *spmv_client_default_url(void);
SPMV_CLIENT_API void spmv_client_free(spmv_client *h);

/* The last call's error detail, valid until the next call on the handle.
 * errmsg: "" after a success. errcode: the server's "code" or "".
 * http_status: the HTTP status of the last answer, 0 when none came.
 * retry_after: seconds from a Retry-After header, or 0. */
SPMV_CLIENT_API const char *spmv_client_errmsg(const spmv_client *h);
SPMV_CLIENT_API const char *spmv_client_errcode(const spmv_client *h);
SPMV_CLIENT_API long spmv_client_http_status(const spmv_client *h);
SPMV_CLIENT_API long spmv_client_retry_after(const spmv_client *h);

/* Frees a char * returned by the library (JSON texts). */
SPMV_CLIENT_API void spmv_client_string_free(char *s);

/* ---------------------------------------------------------------- server */

/* GET /v1/health. OK when the daemon answers {"status":"ok"}. `json` (may
 * be NULL) receives the answer text; free with spmv_client_string_free(). */
SPMV_CLIENT_API spmv_client_status spmv_client_health(spmv_client *h, char **json);

/* GET /v1/ready. OK once the daemon is ready, SPMV_CLIENT_ERR_BUSY before. */
SPMV_CLIENT_API spmv_client_status spmv_client_ready(spmv_client *h);

/* GET /v1/info: version, build, devices, limits, as the JSON text. */
SPMV_CLIENT_API spmv_client_status spmv_client_info(spmv_client *h, char **json);

/* GET /v1/kernels, parsed. `parameters` is each kernel's parameter
 * description as JSON text (or NULL); `reason` is NULL when available. */
typedef struct spmv_client_kernel {
    char *name;               /* "cpu.csr.serial" */
    int available;
    char *reason;             /* why not available, or NULL */
    char *parameters;         /* JSON text of the kernel's parameters, or NULL */
} spmv_client_kernel;

typedef struct spmv_client_kernel_list {
    size_t count;
    spmv_client_kernel *items;
    char *json;               /* the answer as the server sent it */
} spmv_client_kernel_list;

SPMV_CLIENT_API spmv_client_status spmv_client_kernels(spmv_client *h, spmv_client_kernel_list **out);
SPMV_CLIENT_API void spmv_client_kernel_list_free(spmv_client_kernel_list *l);

/* -------------------------------------------------------------- matrices */

typedef enum spmv_client_dtype {
    SPMV_CLIENT_FLOAT64 = 0,
    SPMV_CLIENT_FLOAT32 = 1,
} spmv_client_dtype;

/* One storage format a matrix is held in. */
typedef struct spmv_client_format {
    char name[16];            /* "csr", "ell", "hll", "hyb", "coo", "pcsr", "psell", "spsell", "pbsr" */
    char device[16];          /* where this copy lives: "host", "gpu0", ... */
    uint64_t bytes;
    double padding;           /* padding ratio as the server reports it, 0 if none */
} spmv_client_format;

/* A matrix descriptor (GET /v1/matrices/{id}). Fields the server left out
 * are zero / "" / NAN (timings). */
typedef struct spmv_client_matrix {
    char id[64];
    char *name;               /* never NULL ("" when unnamed) */
    int64_t rows, cols, nnz;
    spmv_client_dtype dtype;
    char symmetry[32];        /* as read: "general", "symmetric", ... */
    char device[32];          /* "cpu", "gpu0", ... */
    size_t nformats;
    spmv_client_format *formats;
    double parse_ms, transfer_ms, convert_ms;
    char *json;               /* the descriptor as the server sent it */
    int mixed;                /* 1 for dtype "mixed": float32 values, float64 x and y (dtype says FLOAT64) */
} spmv_client_matrix;

SPMV_CLIENT_API void spmv_client_matrix_free(spmv_client_matrix *m);

typedef struct spmv_client_matrix_list {
    size_t count;
    spmv_client_matrix *items; /* items[i] owned by the list: do not free them */
    char *json;
} spmv_client_matrix_list;

SPMV_CLIENT_API void spmv_client_matrix_list_free(spmv_client_matrix_list *l);

/* Upload progress: called with bytes sent so far and the total; return
 * nonzero to abort the upload (the call then fails with ABORTED). */
typedef int (*spmv_client_progress_fn)(void *user, uint64_t done, uint64_t total);

/* Options for an upload; zero-initialise. NULL fields use server defaults. */
typedef struct spmv_client_upload_options {
    const char *name;         /* defaults to the file's base name (path uploads) */
    const char *dtype;        /* "float64", "float32" or "mixed" */
    const char *formats;      /* comma list, "csr,hll" */
    const char *device;       /* "cpu", "gpu0", ... */
    int hack_size;            /* HLL slice height, 0: server default */
    spmv_client_progress_fn progress;
    void *progress_user;
} spmv_client_upload_options;

/* POST /v1/matrices with the Matrix Market file at `path` (.mtx or .mtx.gz)
 * sent as the multipart field "file", streamed from disk. `opts` may be
 * NULL. On success *out is the new matrix's descriptor.
 * Errors: IO (file unreadable), BAD_MATRIX (errmsg: the server's message,
 * naming the line), TOO_LARGE, BAD_REQUEST, and the transfer statuses. */
SPMV_CLIENT_API spmv_client_status spmv_client_upload_file(spmv_client *h, const char *path,
                                                           const spmv_client_upload_options *opts,
                                                           spmv_client_matrix **out);

/* The same from `len` bytes of Matrix Market text (or gzip) at `data`;
 * the buffer is only read during the call. */
SPMV_CLIENT_API spmv_client_status spmv_client_upload_memory(spmv_client *h, const void *data, size_t len,
                                                             const spmv_client_upload_options *opts,
                                                             spmv_client_matrix **out);

/* A matrix the daemon builds by formula (POST /v1/matrices with
 * generate=<kind>, nothing uploaded): `kind` one of its generators
 * ("poisson2d", "band", ... docs/api.md "Generated matrices"), `n` its
 * grid side or rows; per_row, dense_len < 0 and seed 0: the daemon's
 * defaults. `opts` as for an upload (name, dtype, device; progress unused).
 * Errors: BAD_REQUEST (an unknown kind, a number out of range), TOO_LARGE
 * (past max_rows / max_nnz), and the transfer statuses. */
SPMV_CLIENT_API spmv_client_status spmv_client_generate(spmv_client *h, const char *kind, int64_t n, int64_t per_row,
                                                        int64_t dense_len, uint64_t seed,
                                                        const spmv_client_upload_options *opts,
                                                        spmv_client_matrix **out);

/* GET /v1/matrices. */
SPMV_CLIENT_API spmv_client_status spmv_client_list(spmv_client *h, spmv_client_matrix_list **out);

/* GET /v1/matrices/{id}. NOT_FOUND for an unknown id. */
SPMV_CLIENT_API spmv_client_status spmv_client_describe(spmv_client *h, const char *id,
                                                        spmv_client_matrix **out);

/* DELETE /v1/matrices/{id}. NOT_FOUND for an unknown id. */
SPMV_CLIENT_API spmv_client_status spmv_client_delete(spmv_client *h, const char *id);

/* ------------------------------------------------------------------ spmv */

/* Timing statistics of a kernel run, as the server measured them. */
typedef struct spmv_client_stats {
    int runs, warmup;
    double mean_ms, stddev_ms, min_ms, median_ms, max_ms;
    double gflops, gbps;
} spmv_client_stats;

/* Options for spmv_client_multiply(); zero-initialise. */
typedef struct spmv_client_spmv_options {
    const char *kernel;       /* NULL: the server's default ("auto") */
    int runs;                 /* 0: server default */
    int warmup;               /* 0: server default; negative: send warmup=0 */
    int verify;               /* nonzero: ask the server to check against cpu.csr.serial */
    /* Kernel parameters as "key=value" strings, NULL-terminated, e.g.
     * {"block_size=256", NULL}; the library escapes them for the URL. */
    const char *const *params;
} spmv_client_spmv_options;

typedef struct spmv_client_spmv_result {
    char kernel[64];          /* the kernel that ran (what "auto" chose) */
    spmv_client_stats stats;
    double queue_ms;          /* time the request waited in the device queue */
    double max_rel_err;       /* from verify, NAN when not verified */
    double request_ms;        /* wall time of the whole HTTP exchange, client side */
} spmv_client_spmv_result;

/* The statistic of the timed runs that the rates (gflops, gbps) of this
 * handle's later products (spmv_client_multiply, _spmv, _spmv_shm) and
 * benchmarks (speedup, efficiency, best too) come from: "median", the
 * daemon's default, or "mean"; NULL or "" sends nothing (the default).
 * Anything else is INVALID, the setting unchanged. Since 0.5. */
SPMV_CLIENT_API spmv_client_status spmv_client_set_stat(spmv_client *h, const char *stat);

/* POST /v1/matrices/{id}/spmv with a binary body: y = A·x.
 * `x` holds nx values and `y` room for ny values, both of `dtype`, which
 * must be the matrix's dtype (nx = cols, ny = rows). The answer's length
 * must be exactly ny values, else PROTOCOL. `res` may be NULL. The answer
 * is received straight into y: after a failure y's contents are
 * unspecified. Errors: NOT_FOUND, BAD_REQUEST (unknown kernel,
 * wrong length, parameter out of range: errmsg says which), BUSY, and
 * the transfer statuses. */
SPMV_CLIENT_API spmv_client_status spmv_client_multiply(spmv_client *h, const char *id, spmv_client_dtype dtype,
                                                        const void *x, size_t nx, void *y, size_t ny,
                                                        const spmv_client_spmv_options *opts,
                                                        spmv_client_spmv_result *res);

/* ---------------------------------------------------------------- spmspm */

/* Options for spmv_client_spmspm(); zero-initialise. */
typedef struct spmv_client_spmspm_options {
    const char *kernel;       /* NULL: the server's default (cpu.spmspm.omp, or gpu.spmspm.block_row for a GPU A) */
    int runs;                 /* 0: server default (1) */
    int warmup;               /* 0: server default (0) */
    int verify;               /* nonzero: the server checks C against cpu.spmspm.serial */
    int store;                /* nonzero: C becomes a new matrix on the server */
    /* Kernel parameters as "key=integer" strings, NULL-terminated, e.g.
     * {"block_size=128", NULL}. */
    const char *const *params;
} spmv_client_spmspm_options;

/* C = A*B as COO: 0-based, sorted by row then column, no duplicates;
 * values as double whatever the matrices' dtype. */
typedef struct spmv_client_coo {
    int32_t rows, cols;
    int64_t nnz;
    int32_t *row, *col;
    double *val;
} spmv_client_coo;

typedef struct spmv_client_spmspm_result {
    char kernel[64];          /* the kernel that ran */
    spmv_client_stats stats;  /* GFLOPS count 2 flops per multiply-add done */
    int64_t madds;            /* multiply-adds of the product */
    double queue_ms;
    double max_rel_err;       /* from verify (-1: structure differs), NAN when not verified */
    double request_ms;
} spmv_client_spmspm_result;

/* POST /v1/matrices/{a}/spmspm {"b": b, ...}: C = A*B with two stored
 * matrices (A's columns must equal B's rows). Without opts->store, *c
 * receives C (free with spmv_client_coo_free); with it, the server keeps C
 * as a new matrix and *stored receives its descriptor. Either out pointer
 * may be NULL; the one not filled is set to NULL. `res` may be NULL.
 * Errors: NOT_FOUND (A or B), BAD_MATRIX (422: shapes or dtypes do not
 * match, errmsg gives both shapes), BAD_REQUEST (unknown or non-SpMSpM
 * kernel, bad parameter), CONFLICT (GPU kernel for a host A), BUSY,
 * PROTOCOL (an index or count out of range in the answer), and the
 * transfer statuses. */
SPMV_CLIENT_API spmv_client_status spmv_client_spmspm(spmv_client *h, const char *a, const char *b,
                                                      const spmv_client_spmspm_options *opts, spmv_client_coo **c,
                                                      spmv_client_matrix **stored, spmv_client_spmspm_result *res);
SPMV_CLIENT_API void spmv_client_coo_free(spmv_client_coo *c);

/* ----------------------------------------------------------- bench, jobs */

/* Options for a benchmark; zero-initialise. */
typedef struct spmv_client_bench_options {
    const char *const *kernels; /* NULL-terminated names; NULL: all available */
    int runs;                   /* 0: server default */
    int warmup;                 /* 0: server default */
} spmv_client_bench_options;

typedef struct spmv_client_job {
    char id[64];
    char state[16];           /* "queued", "running", "done", "failed", ... */
    double progress;          /* 0..1 */
    char *result;             /* JSON text of the result when done, else NULL */
    char *json;               /* the job as the server sent it */
} spmv_client_job;

SPMV_CLIENT_API void spmv_client_job_free(spmv_client_job *j);

/* POST /v1/matrices/{id}/bench with {"kernels","runs","warmup"}. The
 * server always runs a benchmark as a job (202): on success `job_id` (room
 * for 64 bytes) holds its id; poll it with spmv_client_job_wait(). The
 * finished job's result is the table: {"results":[{"kernel","params",
 * "stats","speedup","max_rel_err",...}], "skipped", "best", ...}.
 * Errors: NOT_FOUND (matrix), BAD_REQUEST (unknown kernel, bad runs). */
SPMV_CLIENT_API spmv_client_status spmv_client_bench_start(spmv_client *h, const char *id,
                                                           const spmv_client_bench_options *opts,
                                                           char job_id[64]);

/* spmv_client_bench_start() with the body as JSON text, sent as it is
 * (one object: "kernels", "runs", "warmup", "block_sizes", "hack_sizes",
 * "threads", "stat", "verify", "seed" as docs/api.md gives them), so a
 * bench can sweep thread counts without the options structure growing.
 * The handle's statistic (spmv_client_set_stat) is added as "stat" when
 * the body names none. Errors: INVALID (no object, unparsable text),
 * NOT_FOUND, BAD_REQUEST (the server names the field), and the transfer
 * statuses. Since 0.6. */
SPMV_CLIENT_API spmv_client_status spmv_client_bench_start_json(spmv_client *h, const char *id, const char *json,
                                                                char job_id[64]);

/* GET /v1/jobs/{id}: the job's state now. NOT_FOUND for an unknown id
 * (finished jobs are swept after the daemon's job_retention). A job in
 * state "failed" is still returned with OK; its error is then in errmsg
 * and errcode. */
SPMV_CLIENT_API spmv_client_status spmv_client_job_get(spmv_client *h, const char *job_id,
                                                       spmv_client_job **out);

/* Waits until a job is done or failed with long polls, GET
 * /v1/jobs/{id}?wait=S: the daemon answers the moment the job ends, and
 * the library never sleeps between polls. With `progress` (may be NULL)
 * each poll waits at most `interval_ms` (0: 1000 ms; at most 60 s) and
 * `progress` is called after it with progress*1000 out of 1000; a nonzero
 * return stops waiting (ABORTED). Without it each poll waits up to 60 s.
 * The handle's timeout_ms bounds each poll beyond its wait. A job that
 * ends "failed" returns JOB_FAILED with the job's error in errmsg; *out
 * is then still set to the job. (A daemon that predates long polls
 * answers at once; the polls are then paced, at most 4 a second.) */
SPMV_CLIENT_API spmv_client_status spmv_client_job_wait(spmv_client *h, const char *job_id, long interval_ms,
                                                        spmv_client_progress_fn progress, void *user,
                                                        spmv_client_job **out);

/* Cancels a job: DELETE /v1/jobs/{id}. A queued job never runs; a running
 * solve stops at its next iteration (its result then has stop reason
 * "cancelled"). The server answers 202 with the job, which *out receives
 * (out may be NULL); a job that had already finished is dropped (204) and
 * *out is set to NULL. Errors: NOT_FOUND (unknown or swept job). */
SPMV_CLIENT_API spmv_client_status spmv_client_job_cancel(spmv_client *h, const char *job_id,
                                                          spmv_client_job **out);

/* ------------------------------------------------------ resident vectors */

/* Vectors that live in the daemon, next to the matrices, so that a solver
 * can keep its operands there between requests. They are not persisted and
 * expire after the daemon's vector_ttl_s of idleness. Values travel as
 * binary little-endian arrays of the vector's dtype, n·k of them, column
 * after column (column-major) when k > 1. */

/* A vector descriptor. Fields the server left out are zero / "" / NAN. */
typedef struct spmv_client_vector {
    char id[64];
    int64_t n, k;             /* length and columns: the vector holds n·k values */
    spmv_client_dtype dtype;
    char device[32];          /* "cpu", "gpu0", ... */
    uint64_t bytes;
    char created[40];         /* RFC 3339 */
    double idle_s, expires_in_s;
    char like[64];            /* the matrix it was made like, or "" */
    char *json;               /* the descriptor as the server sent it */
} spmv_client_vector;

SPMV_CLIENT_API void spmv_client_vector_free(spmv_client_vector *v);

typedef struct spmv_client_vector_list {
    size_t count;
    spmv_client_vector *items; /* owned by the list: do not free them one by one */
    char *json;                /* {"vectors":[...]} as the server sent it */
} spmv_client_vector_list;

SPMV_CLIENT_API void spmv_client_vector_list_free(spmv_client_vector_list *l);

/* Where a new vector goes and what shape it has; zero-initialise. NULL and
 * 0 fields leave the choice to the server. */
typedef struct spmv_client_vector_options {
    const char *like;         /* a matrix id: its device, its dtype, n = its cols (or rows) */
    const char *side;         /* with like: "cols" (default) or "rows" */
    const char *device;       /* "cpu", "gpu" (most free memory), "gpuN"; must agree with like */
    const char *dtype;        /* "float64" or "float32" (fill and random only; see _create) */
    int64_t k;                /* columns, 0: 1 */
} spmv_client_vector_options;

/* POST /v1/vectors with `count` values of `dtype` at `values` (binary):
 * n = count / k. opts->dtype is ignored: `dtype` says what the buffer
 * holds. *out (required) receives the descriptor. Errors: INVALID (count
 * not a multiple of k, count 0, NULL values), NOT_FOUND (like names no
 * matrix), BAD_REQUEST (n differs from like's, device and like disagree),
 * DEVICE_MEMORY (507: the device's vector limit), and the transfer statuses. */
SPMV_CLIENT_API spmv_client_status spmv_client_vector_create(spmv_client *h, spmv_client_dtype dtype,
                                                             const void *values, size_t count,
                                                             const spmv_client_vector_options *opts,
                                                             spmv_client_vector **out);

/* POST /v1/vectors {"n", "k", "fill": value, ...}: n values all `value`.
 * n = 0 takes n from opts->like (INVALID without it). */
SPMV_CLIENT_API spmv_client_status spmv_client_vector_fill(spmv_client *h, int64_t n, double value,
                                                           const spmv_client_vector_options *opts,
                                                           spmv_client_vector **out);

/* The same with {"fill": "random", "seed": seed}: the server's seeded
 * random values (the same seed gives the same vector). */
SPMV_CLIENT_API spmv_client_status spmv_client_vector_random(spmv_client *h, int64_t n, uint64_t seed,
                                                             const spmv_client_vector_options *opts,
                                                             spmv_client_vector **out);

/* GET /v1/vectors/{id} with Accept: application/octet-stream: the values,
 * binary, straight into `values` (room for `count` values of `dtype`).
 * The vector must hold exactly `count` values of `dtype`: a different
 * dtype is INVALID (errmsg names both), a different length PROTOCOL. `desc`
 * (may be NULL) receives the descriptor from the X-SpMV-Vector header. */
SPMV_CLIENT_API spmv_client_status spmv_client_vector_read(spmv_client *h, const char *id, spmv_client_dtype dtype,
                                                           void *values, size_t count, spmv_client_vector **desc);

/* PUT /v1/vectors/{id}: overwrites the vector in place with `count`
 * binary values; n, k and dtype must match (BAD_REQUEST naming both).
 * `desc` (may be NULL) receives the descriptor. */
SPMV_CLIENT_API spmv_client_status spmv_client_vector_write(spmv_client *h, const char *id,
                                                            spmv_client_dtype dtype, const void *values,
                                                            size_t count, spmv_client_vector **desc);

/* DELETE /v1/vectors/{id}. NOT_FOUND for an unknown, deleted or expired id. */
SPMV_CLIENT_API spmv_client_status spmv_client_vector_delete(spmv_client *h, const char *id);

/* GET /v1/vectors, parsed; l->json is the answer text. */
SPMV_CLIENT_API spmv_client_status spmv_client_vectors(spmv_client *h, spmv_client_vector_list **out);

/* --------------------------------------- spmv with resident operands */

/* The operands of spmv_client_spmv(); zero-initialise. x comes from a
 * resident vector (x_vector) or inline (x, nx values of dtype); y goes
 * into a resident vector (y_vector) or inline into y (room for ny
 * values). With op 't', x has k·rows values and y k·cols. */
typedef struct spmv_client_operands {
    spmv_client_dtype dtype;  /* of the inline x and y: the matrix's dtype */
    int64_t k;                /* columns of x and y, 0: 1 */
    char op;                  /* 'n' (0 too): y = A·x; 't': y = Aᵀ·x */
    int scale;                /* nonzero: y = alpha·op(A)·x + beta·y; zero: y = op(A)·x */
    double alpha, beta;       /* beta != 0 needs y_vector */
    const char *x_vector;
    const void *x;
    size_t nx;
    const char *y_vector;
    void *y;
    size_t ny;
} spmv_client_operands;

typedef struct spmv_client_product_result {
    spmv_client_spmv_result spmv; /* kernel, stats, queue_ms, max_rel_err, request_ms */
    double axpby_ms;          /* the alpha/beta update, NAN when none was needed */
} spmv_client_product_result;

/* POST /v1/matrices/{id}/spmv, binary: the body is the inline x (k·cols
 * values) or empty with ?x=ID; ?y=ID, ?alpha=, ?beta=, ?op=, ?k= and the
 * options of spmv_client_multiply(). An inline y comes back straight into
 * a->y and must be exactly ny values (else PROTOCOL); with y_vector the
 * answer has no body. `res` may be NULL. Refused before sending (INVALID):
 * neither or both of x_vector and x, neither or both of y_vector and y,
 * beta != 0 without y_vector, op other than 'n'/'t', nx or ny not a
 * multiple of k. Server errors: NOT_FOUND (matrix or vector), BAD_REQUEST
 * (shape_mismatch, dtype_mismatch, a kernel that takes fewer than k
 * columns: errmsg names those that do), CONFLICT (wrong_device: a vector
 * on another device than the kernel). */
SPMV_CLIENT_API spmv_client_status spmv_client_spmv(spmv_client *h, const char *id, const spmv_client_operands *a,
                                                    const spmv_client_spmv_options *opts,
                                                    spmv_client_product_result *res);

/* ---------------------------------------------------- shared memory (0.3) */

/* A client on the daemon's host can hand x to a product and take y back
 * through a POSIX shared-memory object (shm_open) instead of the HTTP
 * body. The client creates the object (mode 0600 is enough when the daemon
 * runs as the same user; 0660 and a shared group otherwise), registers a
 * window of it as a region under the object's name, then names the region
 * and a byte offset wherever x or y goes. The daemon maps the region once,
 * at registration, and never unlinks the object. Every route answers 403
 * (UNAUTHORIZED, errcode "shm_disabled") unless the daemon runs with
 * allow_shm = true. Regions are not persisted. Values in a region are
 * native little-endian values of the matrix's dtype, column after column
 * for k > 1. */

/* A region descriptor (GET /v1/shm/{name}). Fields the server left out are
 * zero / "" / -1 (pinned). */
typedef struct spmv_client_shm {
    char name[208];           /* the object's name without its slash, and the region's handle */
    uint64_t offset, size;    /* the window of the object, in bytes */
    uint64_t object_bytes;    /* the object's size when the daemon looked (0: it could not tell) */
    int pinned;               /* 1: the pages are registered with CUDA; 0: not (a CPU host) */
    char state[16];           /* "ok", "shrunk" (object now smaller than offset + size), "unlinked" */
    int64_t uses;             /* operands that named the region (x and y in it: 2 for one product) */
    char created[40];         /* RFC 3339 */
    char *json;               /* the descriptor as the server sent it */
    char kind[16];            /* "posix" (a shm_open object), "cuda" (device memory), "" when not said */
    char device[16];          /* a "cuda" region's GPU ("gpu0"), else "" */
} spmv_client_shm;

SPMV_CLIENT_API void spmv_client_shm_free(spmv_client_shm *r);

typedef struct spmv_client_shm_list {
    size_t count;
    spmv_client_shm *items;   /* owned by the list: do not free them one by one */
    char *json;               /* the answer as the server sent it */
} spmv_client_shm_list;

SPMV_CLIENT_API void spmv_client_shm_list_free(spmv_client_shm_list *l);

/* POST /v1/shm {"name","offset","size"}: registers `size` bytes of the
 * object /dev/shm/NAME from byte `offset` as the region NAME. `name` is
 * what shm_open was given, without its leading slash: 1 to 200 characters
 * of A-Z a-z 0-9 _ . -, not starting with a dot (anything else is INVALID
 * before sending). `out` (may be NULL) receives the descriptor. Errors:
 * INVALID (bad name, size 0, offset + size overflowing), NOT_FOUND
 * (shm_not_found: no such object), BAD_REQUEST (out_of_range: offset +
 * size past the object's end), CONFLICT (shm_exists: NAME is registered
 * already), UNAUTHORIZED (403: shm_disabled, or shm_forbidden when the
 * object's mode does not grant the daemon read and write), DEVICE_MEMORY
 * (507 shm_limit: max_shm_regions are registered), and the transfer
 * statuses. */
SPMV_CLIENT_API spmv_client_status spmv_client_shm_register(spmv_client *h, const char *name, uint64_t offset,
                                                            uint64_t size, spmv_client_shm **out);

/* The size of a cudaIpcMemHandle_t. */
#define SPMV_CLIENT_CUDA_IPC_HANDLE_BYTES 64

/* POST /v1/shm {"name","cuda_ipc","device","offset","size"}: registers
 * `size` bytes from byte `offset` of a GPU allocation of this process (its
 * own cudaMalloc), named by the handle cudaIpcGetMemHandle wrote
 * (`handle`, SPMV_CLIENT_CUDA_IPC_HANDLE_BYTES bytes, sent as hex), on the
 * daemon's GPU `device` ("gpu0"; the same card). `name` (the rule above)
 * is only the region's handle. A product whose matrix is on that GPU reads
 * x and writes y there in place; any other product naming the region is
 * CONFLICT (wrong_device), and vectors do not take CUDA regions. Unregister
 * before freeing the memory. Errors: INVALID (bad name, NULL handle or
 * device, size 0), BAD_REQUEST (a handle the driver refuses, out_of_range:
 * the window past the allocation), CONFLICT (a daemon without that GPU,
 * shm_exists), UNAUTHORIZED (shm_disabled), DEVICE_MEMORY (shm_limit). */
SPMV_CLIENT_API spmv_client_status spmv_client_shm_register_cuda(spmv_client *h, const char *name, const void *handle,
                                                                 const char *device, uint64_t offset, uint64_t size,
                                                                 spmv_client_shm **out);

/* GET /v1/shm/{name}: one region, its state checked live. NOT_FOUND when
 * it was never registered or has been unregistered. */
SPMV_CLIENT_API spmv_client_status spmv_client_shm_get(spmv_client *h, const char *name, spmv_client_shm **out);

/* GET /v1/shm: every region, oldest first; l->json is the answer text. */
SPMV_CLIENT_API spmv_client_status spmv_client_shm_regions(spmv_client *h, spmv_client_shm_list **out);

/* DELETE /v1/shm/{name}: the region leaves the listing at once (a product
 * using it finishes first). The object itself stays: shm_unlink it
 * yourself. NOT_FOUND for an unknown region. */
SPMV_CLIENT_API spmv_client_status spmv_client_shm_unregister(spmv_client *h, const char *name);

/* An operand in a region: `offset` bytes into region `name` (a multiple
 * of the value size; the daemon answers BAD_REQUEST otherwise). */
typedef struct spmv_client_shm_ref {
    const char *name;
    uint64_t offset;
} spmv_client_shm_ref;

/* spmv_client_spmv() with x and/or y in a region: a non-NULL `x` reads x
 * (k·cols values, k·rows for op 't') from its region, and then a->x and
 * a->x_vector must both be NULL; a non-NULL `y` writes y into its region,
 * and then a->y and a->y_vector must both be NULL. A NULL `x` or `y` takes
 * that operand from `a` as spmv_client_spmv() does, so an x in a region
 * may go with an inline y or a resident one, and the other way round.
 * Sent as ?x_shm=&x_offset= and/or ?y_shm=&y_offset= (an empty body when x
 * is in a region, x's values when it is inline). With y in
 * a region nothing comes back but the statistics (the daemon has written
 * y before it answers). `verify` needs x and y inline (BAD_REQUEST).
 * Errors, besides spmv_client_spmv()'s: INVALID (both or neither ways for
 * an operand, a bad region name), UNAUTHORIZED (shm_disabled), NOT_FOUND
 * (shm_not_found), BAD_REQUEST (out_of_range: errmsg names the operand,
 * its offset and bytes and the region's size; invalid_request: an offset
 * not aligned), ERR_HTTP (410 shm_gone: the object was shrunk or unlinked
 * since registration). */
SPMV_CLIENT_API spmv_client_status spmv_client_spmv_shm(spmv_client *h, const char *id, const spmv_client_operands *a,
                                                        const spmv_client_shm_ref *x, const spmv_client_shm_ref *y,
                                                        const spmv_client_spmv_options *opts,
                                                        spmv_client_product_result *res);

/* Resident vectors from and into regions (the values never cross the
 * socket). _create_shm: POST /v1/vectors {"values": {"shm", "offset"},
 * "n", ...} with n = count of values per column (0: from opts->like),
 * k, dtype (opts->dtype, else like's, else float64), like, side and device
 * as in spmv_client_vector_fill(); the region must hold n·k values of that
 * dtype from the offset. _write_shm: PUT /v1/vectors/{id} with the values
 * from a region (same n, k, dtype). _read_shm: GET /v1/vectors/{id}
 * ?shm=&offset=: the daemon writes the vector's n·k values into the region
 * and answers the descriptor. `out` / `desc` (desc may be NULL) receive
 * the descriptor. Errors: those of the region operands of
 * spmv_client_spmv_shm() (403, 404 shm_not_found, 400 out_of_range, 410),
 * and those of the matching binary calls. */
SPMV_CLIENT_API spmv_client_status spmv_client_vector_create_shm(spmv_client *h, const spmv_client_shm_ref *values,
                                                                 int64_t n, const spmv_client_vector_options *opts,
                                                                 spmv_client_vector **out);
SPMV_CLIENT_API spmv_client_status spmv_client_vector_write_shm(spmv_client *h, const char *id,
                                                                const spmv_client_shm_ref *values,
                                                                spmv_client_vector **desc);
SPMV_CLIENT_API spmv_client_status spmv_client_vector_read_shm(spmv_client *h, const char *id,
                                                               const spmv_client_shm_ref *into,
                                                               spmv_client_vector **desc);

/* --------------------------------------------------------- batched steps */

/* POST /v1/ops runs a list of steps in order on one device's queue, in one
 * request: products and BLAS-1 operations on resident vectors, with
 * scalars as literal numbers. The steps are JSON text
 * ({"steps":[{"op":"dot","x":"v1","y":"v2","as":"d"}, ...]}), written by
 * hand and sent with spmv_client_ops_post(), or built with the small
 * builder below and sent with spmv_client_ops_run().
 *
 * The builder collects steps; each append returns OK, INVALID (a NULL or
 * empty id or name, an unknown trans) or NOMEM, and the first failure also
 * sticks to the builder: spmv_client_ops_run() then refuses to send it
 * (INVALID, errmsg naming the step), so a caller may append a whole
 * request and check once. spmv_client_ops_clear() empties it for reuse. A
 * builder belongs to one thread at a time, like a handle. */
typedef struct spmv_client_ops spmv_client_ops;

SPMV_CLIENT_API spmv_client_ops *spmv_client_ops_new(void);
SPMV_CLIENT_API void spmv_client_ops_free(spmv_client_ops *o);
SPMV_CLIENT_API void spmv_client_ops_clear(spmv_client_ops *o);
/* y = alpha·op(A)·x + beta·y; trans 'n' or 't'; kernel NULL: "auto". */
SPMV_CLIENT_API spmv_client_status spmv_client_ops_spmv(spmv_client_ops *o, const char *matrix, const char *x,
                                                        const char *y, double alpha, double beta, char trans,
                                                        const char *kernel);
/* results[as] = x·y, per column when k > 1. */
SPMV_CLIENT_API spmv_client_status spmv_client_ops_dot(spmv_client_ops *o, const char *x, const char *y,
                                                       const char *as);
/* results[as] = ||x||₂. */
SPMV_CLIENT_API spmv_client_status spmv_client_ops_nrm2(spmv_client_ops *o, const char *x, const char *as);
/* y += alpha·x */
SPMV_CLIENT_API spmv_client_status spmv_client_ops_axpy(spmv_client_ops *o, double alpha, const char *x,
                                                        const char *y);
/* y = alpha·x + beta·y */
SPMV_CLIENT_API spmv_client_status spmv_client_ops_axpby(spmv_client_ops *o, double alpha, const char *x,
                                                         double beta, const char *y);
/* x = alpha·x */
SPMV_CLIENT_API spmv_client_status spmv_client_ops_scal(spmv_client_ops *o, double alpha, const char *x);
/* y = x */
SPMV_CLIENT_API spmv_client_status spmv_client_ops_copy(spmv_client_ops *o, const char *x, const char *y);
/* x = value everywhere */
SPMV_CLIENT_API spmv_client_status spmv_client_ops_fill(spmv_client_ops *o, const char *x, double value);
/* The number of steps so far, and the request as JSON text (free with
 * spmv_client_string_free; NULL when out of memory). */
SPMV_CLIENT_API size_t spmv_client_ops_count(const spmv_client_ops *o);
SPMV_CLIENT_API char *spmv_client_ops_json(const spmv_client_ops *o);

/* One named result: `k` values (1 for a single column). */
typedef struct spmv_client_ops_value {
    char *name;
    size_t k;
    double *values;
} spmv_client_ops_value;

/* One step's time as the server measured it. */
typedef struct spmv_client_ops_step {
    char op[16];
    double ms;
} spmv_client_ops_step;

typedef struct spmv_client_ops_result {
    size_t nresults;
    spmv_client_ops_value *results;
    size_t nsteps;
    spmv_client_ops_step *steps;
    double total_ms, queue_ms; /* the server's, NAN when absent */
    double request_ms;         /* client-side wall time of the exchange */
    char device[32];
    char *json;                /* the answer as the server sent it */
} spmv_client_ops_result;

SPMV_CLIENT_API void spmv_client_ops_result_free(spmv_client_ops_result *r);

/* results[name][index], or NAN when the name or the index is absent. */
SPMV_CLIENT_API double spmv_client_ops_result_get(const spmv_client_ops_result *r, const char *name,
                                                  size_t index);

/* POST /v1/ops with the builder's steps / with the JSON text `json`
 * (sent as it is). *out (may be NULL) receives the results and per-step
 * times. The server checks everything before the first step runs: a bad
 * request changes nothing. Errors: INVALID (empty builder, a failed
 * append), NOT_FOUND (a vector or matrix), BAD_REQUEST (shapes, dtypes,
 * duplicate "as" names, too many steps), CONFLICT (operands on two
 * devices), and the transfer statuses. */
SPMV_CLIENT_API spmv_client_status spmv_client_ops_run(spmv_client *h, const spmv_client_ops *ops,
                                                       spmv_client_ops_result **out);
SPMV_CLIENT_API spmv_client_status spmv_client_ops_post(spmv_client *h, const char *json,
                                                        spmv_client_ops_result **out);

/* --------------------------------------------------------------- solvers */

/* Options for spmv_client_solve(); zero-initialise. 0 / NULL: the
 * server's default. b and x0 are resident vectors (ids) or inline float64
 * values, sent as JSON numbers with 17 significant digits. */
typedef struct spmv_client_solve_options {
    const char *method;          /* "cg" (NULL), "bicgstab", "gmres" */
    double tol;                  /* relative residual to reach, 0: 1e-8 */
    long maxit;                  /* 0: 1000 */
    int restart;                 /* gmres restart length, 0: 30 */
    const char *preconditioner;  /* NULL or "none", "jacobi" */
    const char *kernel;          /* NULL: "auto" */
    const char *b_vector;        /* b as a resident vector ... */
    const double *b;             /* ... or nb values inline */
    size_t nb;
    const char *x0_vector;       /* x0 as a resident vector, or nx0 values */
    const double *x0;            /* inline; both NULL: zeros */
    size_t nx0;
    const char *x_out_vector;    /* x goes into this vector instead of the answer */
    int async;                   /* nonzero: run as a job (result->job_id) */
} spmv_client_solve_options;

typedef struct spmv_client_solve_result {
    char job_id[64];             /* async: the job to wait for; then nothing else is set */
    char method[16];
    int converged;
    char stop_reason[16];        /* "converged", "maxit", "breakdown", "cancelled" */
    char *stop_detail;           /* never NULL ("" when none) */
    double stop_value;           /* NAN when absent */
    int64_t iterations;
    double relres;
    size_t nhistory;
    double *history;             /* relative residual per iteration */
    double total_ms, spmv_ms, vector_ms, setup_ms, queue_ms; /* the server's split, NAN when absent */
    int64_t spmv_calls;
    char kernel[64];
    char device[32];
    int has_x;                   /* nonzero when x was written into the caller's buffer */
    double request_ms;           /* client-side wall time of the exchange */
    char *json;                  /* the answer (without x) as JSON text */
} spmv_client_solve_result;

SPMV_CLIENT_API void spmv_client_solve_result_free(spmv_client_solve_result *r);

/* POST /v1/matrices/{id}/solve. With b inline the request is binary: b
 * (then x0, when inline) as raw values of the matrix's dtype (float64 for
 * a mixed matrix; float32 values are rounded, and must be finite as
 * float32), the options in the query string. The library learns the
 * dtype from GET /v1/matrices/{id} (it remembers the last four matrices
 * described, uploaded or generated, by id, so a loop of solves asks
 * once). With b a
 * resident vector the request is JSON. When x (room for nx float64
 * values) is given and x_out_vector is not, x comes back binary straight
 * into the buffer in the matrix's dtype (learnt the same way for a JSON
 * request), widened from float32 there for a float32 matrix, and must
 * be exactly nx values (else PROTOCOL); the report comes in the
 * X-SpMV-Solve header and, for a binary request, the residual history
 * after x (?history=true). A JSON answer is taken too. *out (required)
 * receives the rest; with opts->async it only carries job_id: wait for
 * the job with spmv_client_job_wait() and read its result with
 * spmv_client_solve_parse(). Non-convergence is not an error: the call is
 * OK and result->converged says. Errors: INVALID (no b, b or x0 given
 * both ways, negative tol or maxit, inline x0 not b's length, a value
 * not finite), BAD_REQUEST (tol, maxit, shape, a zero diagonal for
 * Jacobi: errmsg names the row), NOT_FOUND, CONFLICT. */
SPMV_CLIENT_API spmv_client_status spmv_client_solve(spmv_client *h, const char *id,
                                                     const spmv_client_solve_options *opts, double *x, size_t nx,
                                                     spmv_client_solve_result **out);

/* spmv_client_solve() with a JSON request whatever b is (0.4): b and x0
 * inline as JSON numbers, as before 0.4; x still comes back binary into
 * x when given. For a daemon older than binary solves, or to see the
 * request as curl would send it. */
SPMV_CLIENT_API spmv_client_status spmv_client_solve_json(spmv_client *h, const char *id,
                                                          const spmv_client_solve_options *opts, double *x,
                                                          size_t nx, spmv_client_solve_result **out);

/* spmv_client_solve() with b and/or x in shared-memory regions
 * (spmv_client_shm_register; docs/api.md, "b and x in shared memory"): a
 * non-NULL `b` reads b's k columns (k 0 or 1: one; up to 64) from its
 * region, and then opts->b and opts->b_vector must both be NULL (x0, when
 * inline, is the body); a non-NULL `x_region` has the daemon write x (k
 * columns) there before it answers, and then x, nx and
 * opts->x_out_vector must be NULL / 0 (the report comes as JSON, the
 * residual history in it). With b in a region and x not, x comes back
 * into x (room for exactly nx = rows * k values, required). The result's
 * fields are the whole solve's (k columns: all converged, iterations
 * summed, the largest relres; the columns' own in result->json). Sent
 * binary: ?b_shm=&b_offset=&k= and ?x_shm=&x_offset=. Errors, besides
 * spmv_client_solve()'s: INVALID (neither in a region, b given two ways,
 * a bad region name, k out of range or without b in a region, x both in
 * a region and a buffer or vector), UNAUTHORIZED (shm_disabled),
 * NOT_FOUND (shm_not_found), BAD_REQUEST (out_of_range, an unaligned
 * offset, a CUDA region), TOO_LARGE (413: b over max_body_bytes),
 * ERR_HTTP (410 shm_gone). */
SPMV_CLIENT_API spmv_client_status spmv_client_solve_shm(spmv_client *h, const char *id,
                                                         const spmv_client_solve_options *opts,
                                                         const spmv_client_shm_ref *b, int k,
                                                         const spmv_client_shm_ref *x_region, double *x, size_t nx,
                                                         spmv_client_solve_result **out);

/* Parses a solve answer given as JSON text (a finished solve job's
 * result): *out receives it, and x (may be NULL) the answer's "x", which
 * must then be exactly nx values (else PROTOCOL). */
SPMV_CLIENT_API spmv_client_status spmv_client_solve_parse(spmv_client *h, const char *json, double *x, size_t nx,
                                                           spmv_client_solve_result **out);

#ifdef __cplusplus
}
#endif
#endif /* SPMVCLIENT_H */
