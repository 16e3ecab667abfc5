/* precond_impl.h — what a preconditioner type implements (internal to the
 * engine: engine/precond.c and engine/precond_*.c).
 *
 * A type's setup reads the host CSR and fills p->impl (and, for a GPU
 * preconditioner, copies what the apply needs to ctx's device); apply
 * computes z = M^-1 r on the preconditioner's device (ctx NULL: the host);
 * free releases p->impl on that device. setup may leave p->impl partly
 * filled on failure: free must cope.
 */
#ifndef SPMV_PRECOND_IMPL_H
#define SPMV_PRECOND_IMPL_H

#include "precond.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct precond_ops {
    int (*setup)(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_csr *a, spmv_error *err);
    int (*apply)(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_vec *r, spmv_vec *z, spmv_error *err);
    void (*free)(spmv_gpu_ctx *ctx, spmv_precond *p);
    bool symmetric;
    /* z = M^-1 r on k columns in one pass (spmv_precond_apply_k, which
     * checks the vectors first): active (NULL: all) the columns to apply,
     * the others' z left alone. NULL: the type has none, and
     * spmv_precond_apply_k applies column by column. */
    int (*apply_k)(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_vec *r, spmv_vec *z, const bool *active,
                   spmv_error *err);
    /* apply with level 0's products by fine (spmv_precond_apply_with);
     * NULL: the type has none, and apply serves. */
    int (*apply_with)(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_gpu_product *fine, const spmv_vec *r,
                      spmv_vec *z, spmv_error *err);
} precond_ops;

struct spmv_precond {
    spmv_precond_options o;
    const precond_ops *ops;
    spmv_device_kind device;
    int32_t rows;
    double setup_ms;
    size_t host_bytes, device_bytes;
    int32_t levels, coarse_rows;  /* amg */
    double operator_complexity;   /* amg */
    bool built_on_device;         /* amg: the hierarchy made on the GPU (spmv_gpu_amg_build) */
    spmv_amg_aggregation aggregation; /* amg: the one it was built with */
    double rho;                   /* chebyshev */
    void *impl;
};

/* The ops of type t, or NULL when this build has none. */
const precond_ops *precond_ops_of(spmv_precond_type t);
/* A setup's first step: p->impl, `size` zeroed bytes; NULL with
 * SPMV_ERR_NOMEM in err ("<what>: out of memory"). */
void *precond_impl_alloc(spmv_precond *p, size_t size, const char *what, spmv_error *err);

/* The types with files of their own. */
extern const precond_ops precond_block_jacobi_ops; /* precond_block.c */
extern const precond_ops precond_chebyshev_ops;    /* precond_cheb.c */
extern const precond_ops precond_ic0_ops;          /* precond_ilu.c */
extern const precond_ops precond_ilu0_ops;         /* precond_ilu.c */

/* Blocks of b rows (precond_block.c; jacobi's b is 1): *inv (a float64
 * host vector, rows x b coefficients, row i's at i*b) stays on the host
 * (ctx NULL) or moves to ctx's device, its bytes counted in p; then z_i =
 * sum_c inv[i*b + c] r[i - i%b + c] in float64, r and z of either dtype. */
int precond_rows_place(spmv_gpu_ctx *ctx, spmv_precond *p, spmv_vec *inv, spmv_error *err);
int precond_rows_apply(spmv_gpu_ctx *ctx, const spmv_vec *inv, int32_t b, const spmv_vec *r, spmv_vec *z,
                       spmv_error *err);
/* The same on n x k blocks, the columns of active (NULL: all); the
 * others' z left alone (one launch on a GPU, the host's loop a column). */
int precond_rows_apply_k(spmv_gpu_ctx *ctx, const spmv_vec *inv, int32_t b, const spmv_vec *r, spmv_vec *z,
                         const bool *active, spmv_error *err);

/* A host preconditioner's float64 staging for float32 vectors: r in, z
 * out, made on first use. */
typedef struct precond_staging {
    double *in, *out;
} precond_staging;

/* A float64 host apply f(arg, r, z) on host vectors r and z of either
 * dtype: float32 ones go through s. */
int precond_host_f64(const spmv_vec *r, spmv_vec *z, precond_staging *s,
                     void (*f)(void *arg, const double *r, double *z), void *arg, spmv_error *err);
void precond_staging_free(precond_staging *s);

/* A float64 host apply on k columns, f(arg, m, r, z) on n x m blocks, for
 * host blocks r and z of either dtype and k columns: the active ones
 * (active NULL: all) go through s's in and out, gathered m of them and
 * scattered back (the others' z left alone), except float64 blocks whose
 * every column is active, which f reads and writes in place. s grows to
 * the largest block asked for. */
typedef struct precond_staging_k {
    double *in, *out;
    size_t cap; /* doubles each */
} precond_staging_k;
int precond_host_f64_k(const spmv_vec *r, spmv_vec *z, const bool *active, precond_staging_k *s,
                       int (*f)(void *arg, int32_t m, const double *r, double *z, spmv_error *err), void *arg,
                       spmv_error *err);
void precond_staging_k_free(precond_staging_k *s);

/* ----------------------------------------------------- their GPU halves
 * (engine/gpu/precond.cu; without CUDA engine/gpu/absent.c answers
 * SPMV_ERR_UNAVAILABLE). On ctx's thread, on its stream. */

/* block_jacobi: z = blockdiag(A)^-1 r, inv (float64, rows x b values on
 * ctx's device) holding row i's b coefficients at i*b; r and z either
 * dtype. */
int spmv_gpu_block_jacobi_apply(spmv_gpu_ctx *ctx, const spmv_vec *inv, int32_t b, const spmv_vec *r, spmv_vec *z,
                                spmv_error *err);
/* The same on n x k blocks r and z, the columns of active (NULL: all) in
 * one launch per 64 columns, the others' z left alone. */
int spmv_gpu_block_jacobi_apply_k(spmv_gpu_ctx *ctx, const spmv_vec *inv, int32_t b, const spmv_vec *r, spmv_vec *z,
                                  const bool *active, spmv_error *err);

/* ic0 and ilu0 on a GPU: f (float64 host CSR, sorted columns, every
 * diagonal present) is A's lower triangle (lower: the ic0 of it, L L^T) or
 * A (ilu0: L U, L unit lower), factored by cuSPARSE in dtype; an apply is
 * two cusparseSpSV triangular solves. A zero or (ic0) non-positive pivot
 * is SPMV_ERR_INVALID naming its row. */
typedef struct spmv_gpu_ilu spmv_gpu_ilu;
int spmv_gpu_ilu_setup(spmv_gpu_ctx *ctx, const spmv_csr *f, bool lower, spmv_dtype dtype, spmv_gpu_ilu **out,
                       spmv_error *err);
int spmv_gpu_ilu_apply(spmv_gpu_ctx *ctx, spmv_gpu_ilu *g, const spmv_vec *r, spmv_vec *z, spmv_error *err);
void spmv_gpu_ilu_free(spmv_gpu_ctx *ctx, spmv_gpu_ilu *g);
size_t spmv_gpu_ilu_bytes(const spmv_gpu_ilu *g);

#ifdef __cplusplus
}
#endif

#endif
