/* decode.h — request bodies and query strings to plain structs.
 *
 * The checking half of the spmv and bench routes, with no HTTP and no
 * daemon in sight: text in, a struct or an api_fail (status, code,
 * message) out. The route handlers call these and then do what needs the
 * daemon (which kernel is available, which queue); the fuzz targets call
 * them directly with arbitrary bytes. Every number is range-checked here:
 * runs and warmup against max_runs, kernel parameters against the
 * registry's ranges, x's length against the matrix's columns.
 */
#ifndef SPMVD_DECODE_H
#define SPMVD_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "daemon/shm.h"
#include "spmv.h"

typedef struct api_fail {
    int status;            /* HTTP status */
    const char *code;      /* error code of the body */
    char message[512];
} api_fail;

/* A query-string lookup: the value of `key`, or NULL. */
typedef const char *(*api_lookup_fn)(void *ctx, const char *key);

typedef struct spmv_req {
    char kernel[128];      /* "" when not given */
    spmv_params params;    /* as given: 0 where not given, else within range */
    int32_t runs, warmup;
    spmv_stat stat;        /* the statistic the rates come from ("stat"; median unless given) */
    bool verify, async;
    void *x;               /* JSON only: k*cols values of the dtype (malloc), NULL with x_vector */
    char x_vector[40], y_vector[40];  /* resident operands ("" when not given; ids unchecked here) */
    double alpha, beta;    /* y = alpha*op(A)*x + beta*y; 1 and 0 unless given */
    bool trans;            /* "op": "t" */
    int32_t k;             /* columns of x (1..SPMV_MAX_K) */
    /* operands in shared-memory regions ("" when not given; names checked,
     * regions not looked up here) and their byte offsets */
    char x_shm[SHM_NAME_MAX + 1], y_shm[SHM_NAME_MAX + 1];
    int64_t x_shm_offset, y_shm_offset;
} spmv_req;

/* Values of a vector or a block from JSON: an array of numbers (k = 1) or
 * an array of k arrays of equal length. n < 0 takes any length; otherwise
 * each column must have n values. `what` names the field in messages. On
 * success *out owns n*k values of dtype (column-major). */
int api_values_from_json(const json_t *v, int64_t n, spmv_dtype dt, const char *what, void **out, int64_t *n_out,
                         int32_t *k_out, api_fail *f);
/* An operand {"vector": "<id>"}: 1 and the id copied, 0 when v is not of
 * that shape, -1 (f set) when it is malformed. */
int api_vector_ref(const json_t *v, const char *what, char id[40], api_fail *f);

/* An operand {"shm": "<region>", "offset": bytes}: 1 with the name and
 * offset copied, 0 when v is not of that shape, -1 (f set) when it is
 * malformed. */
int api_shm_ref(const json_t *v, const char *what, char name[SHM_NAME_MAX + 1], int64_t *offset, api_fail *f);
/* ?WHAT_shm=NAME&WHAT_offset=BYTES (WHAT "x", "y", "b"): the region's
 * name checked into `name` ("" when not given), the offset a byte count
 * (0 by default); an offset without a name is refused. 0, or -1 with f. */
int api_query_shm(api_lookup_fn get, void *ctx, const char *what, char name[SHM_NAME_MAX + 1], int64_t *offset,
                  api_fail *f);

/* {"kernel","x","runs","warmup","stat","verify","async", params...}: unknown
 * fields, wrong types, values out of range and x of the wrong length are
 * refused. On success out->x owns cols values of dtype. */
int api_decode_spmv_json(const char *body, size_t len, int32_t rows, int32_t cols, spmv_dtype dtype,
                         int64_t max_runs, spmv_req *out, api_fail *f);
/* The same options from a query string (binary requests); x stays NULL. */
int api_decode_spmv_query(api_lookup_fn get, void *ctx, int64_t max_runs, spmv_req *out, api_fail *f);
/* A binary x: exactly k*cols little-endian values of dtype. */
int api_check_x_binary(size_t len, int32_t cols, int32_t k, spmv_dtype dtype, api_fail *f);
void api_spmv_req_free(spmv_req *r);

#define API_BENCH_MAX_SWEEP 16
#define API_BENCH_MAX_THREADS 64
#define API_BENCH_MAX_KERNELS 64

typedef struct bench_req {
    const spmv_kernel *kernels[API_BENCH_MAX_KERNELS];
    size_t nkernels;       /* 0: every kernel */
    int32_t block_sizes[API_BENCH_MAX_SWEEP], hack_sizes[API_BENCH_MAX_SWEEP];
    size_t nblock_sizes, nhack_sizes;
    /* "threads": the CPU kernels' thread counts to sweep (nthreads 0: not
     * swept, each runs at its default); "sweep" sets threads_sweep, which
     * the route turns into 1..the host's OpenMP threads */
    int32_t threads[API_BENCH_MAX_THREADS];
    size_t nthreads;
    bool threads_sweep;
    int32_t runs, warmup;
    spmv_stat stat;        /* what speedup, efficiency, best and the rates use */
    bool verify;
    uint64_t seed;         /* 0: draw one */
    bool async;            /* default true: a job; false: the request waits for the table */
} bench_req;

/* The cumulative limit of a request: `execs` kernel executions (timed and
 * warm-up, over every kernel and parameter combination it runs) of a
 * matrix with nnz entries (rows when larger: an empty row still costs a
 * store) must stay within max_work multiply-adds (max_request_work). The
 * product is never formed, so it cannot overflow. */
int api_check_work(int64_t nnz, int32_t rows, int64_t execs, int64_t max_work, api_fail *f);
/* The same with `per` units of work a run (spmv_kernel_work: cpu.csr.chunked
 * adds the rows once per pass over them). */
int api_check_work_per(int64_t per, int64_t nnz, int64_t execs, int64_t max_work, api_fail *f);

/* An optional JSON body (len 0: every default). */
int api_decode_bench_json(const char *body, size_t len, int64_t max_runs, bench_req *out, api_fail *f);

#endif
