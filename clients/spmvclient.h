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
 * spmv_client_kernel_list, char * JSON texts) belong to the caller and are
 * released with the matching *_free() function; on failure the out pointer
 * is set to NULL. Every *_free() accepts NULL.
 *
 * Sizes that come from the server (counts, rows, vector lengths, byte
 * counts) are range-checked before use; an answer that does not fit what
 * was asked for fails with SPMV_CLIENT_ERR_PROTOCOL instead of being
 * trusted.
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

#define SPMV_CLIENT_VERSION "0.1.0"
#define SPMV_CLIENT_VERSION_MAJOR 0
#define SPMV_CLIENT_VERSION_MINOR 1
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
    SPMV_CLIENT_ERR_UNAUTHORIZED = -10, /* 401, 403: token missing or wrong */
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
 * or without a trailing slash; http or https only). `opts` may be NULL for
 * the defaults. Nothing is sent until the first call. Returns NULL when
 * `url` is not an http(s) URL, an option is out of range, or memory or
 * libcurl initialisation fails; `why` (if not NULL) then receives the
 * status. Free with spmv_client_free(). */
SPMV_CLIENT_API spmv_client *spmv_client_new(const char *url, const spmv_client_options *opts,
                                             spmv_client_status *why);
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
    char name[16];            /* "csr", "ell", "hll", "hyb", "coo" */
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
    const char *dtype;        /* "float64" or "float32" */
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

/* GET /v1/jobs/{id}: the job's state now. NOT_FOUND for an unknown id
 * (finished jobs are swept after the daemon's job_retention). A job in
 * state "failed" is still returned with OK; its error is then in errmsg
 * and errcode. */
SPMV_CLIENT_API spmv_client_status spmv_client_job_get(spmv_client *h, const char *job_id,
                                                       spmv_client_job **out);

/* Polls a job every `interval_ms` (0: 200 ms) until it is done or failed,
 * calling `progress` (may be NULL) with progress*1000 out of 1000 after
 * each poll; a nonzero return stops waiting (ABORTED). A job that ends
 * "failed" returns JOB_FAILED with the job's error in errmsg; *out is then
 * still set to the job. */
SPMV_CLIENT_API spmv_client_status spmv_client_job_wait(spmv_client *h, const char *job_id, long interval_ms,
                                                        spmv_client_progress_fn progress, void *user,
                                                        spmv_client_job **out);

#ifdef __cplusplus
}
#endif
#endif /* SPMVCLIENT_H */
