/* precond.h — preconditioners: z = M^-1 r next to the matrix.
 *
 * One object per preconditioner, built once for a matrix on the host or on
 * one GPU (the device of the solve that uses it) and applied once per
 * iteration by the Krylov solvers (engine/krylov.c, through
 * spmv_solve_options.precond). The types:
 *
 *   jacobi        z = D^-1 r
 *   block_jacobi  z = blockdiag(A)^-1 r, blocks of block_size rows
 *   chebyshev     z = p(D^-1 A) D^-1 r, the Chebyshev polynomial of the
 *                 given degree on [rho/30, 1.1 rho], rho estimated
 *   amg           one V-cycle of smoothed aggregation AMG (engine/amg.h)
 *   ic0, ilu0     z = (L L^T)^-1 r or (L U)^-1 r, the incomplete
 *                 factorisations with no fill (cuSPARSE's on a GPU)
 *
 * Every type has a host implementation: the reference a GPU's is tested
 * against, and what a CPU-only host runs. The setup always reads the
 * matrix's host CSR; a GPU preconditioner then copies what it needs to its
 * device. Symmetric types (all but ilu0) keep CG valid on an SPD matrix.
 */
#ifndef SPMV_PRECOND_H
#define SPMV_PRECOND_H

#include <stdbool.h>
#include <stdint.h>

#include "amg.h"
#include "spmv.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum spmv_precond_type {
    SPMV_PRECOND_NONE = 0,
    SPMV_PRECOND_JACOBI,
    SPMV_PRECOND_BLOCK_JACOBI,
    SPMV_PRECOND_CHEBYSHEV,
    SPMV_PRECOND_AMG,
    SPMV_PRECOND_IC0,
    SPMV_PRECOND_ILU0,
    SPMV_PRECOND_COUNT
} spmv_precond_type;

const char *spmv_precond_type_name(spmv_precond_type t);  /* "jacobi", ... */
int spmv_precond_type_parse(const char *name, spmv_precond_type *out);

typedef struct spmv_precond_options {
    spmv_precond_type type;
    int32_t block_size;          /* block_jacobi, amg: rows per node (1) */
    int32_t degree;              /* chebyshev: polynomial degree (3) */
    spmv_amg_options amg;        /* amg (spmv_amg_defaults) */
    bool float32;                /* "precision": "float32": amg's hierarchy or ic0/ilu0's factors held
                                  * in float32 on a GPU (the host's stay float64) */
} spmv_precond_options;

/* Defaults for type t. */
void spmv_precond_defaults(spmv_precond_options *o, spmv_precond_type t);

typedef struct spmv_precond spmv_precond;

/* What the API reports of a preconditioner. */
typedef struct spmv_precond_info {
    spmv_precond_type type;
    spmv_device_kind device;
    double setup_ms;             /* host setup plus the copy to the device */
    size_t host_bytes, device_bytes;
    bool symmetric;
    bool float32;                /* held in float32: "precision": "float32" on a GPU (amg, ic0, ilu0) */
    int32_t levels;              /* amg */
    double operator_complexity;  /* amg */
    int32_t coarse_rows;         /* amg */
    bool built_on_device;        /* amg: the hierarchy made on the GPU itself */
    spmv_amg_aggregation aggregation; /* amg: standard or mis2 */
    double rho;                  /* chebyshev: the estimate of rho(D^-1 A) its interval is built on */
} spmv_precond_info;

/* Builds a preconditioner of square matrix a (the host CSR of either
 * dtype) for solves on ctx's GPU (ctx NULL: on the host). *out is freshly
 * allocated; spmv_precond_free frees it (on ctx's thread for a GPU one). */
int spmv_precond_setup(spmv_gpu_ctx *ctx, const spmv_csr *a, const spmv_precond_options *o, spmv_precond **out,
                       spmv_error *err);
void spmv_precond_free(spmv_gpu_ctx *ctx, spmv_precond *p);
/* z = M^-1 r; r and z distinct vectors of the preconditioner's device and
 * rows, one column, of one dtype. */
int spmv_precond_apply(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_vec *r, spmv_vec *z, spmv_error *err);
/* z = M^-1 r on k columns at once (the lockstep's blocks: r and z n x k,
 * column-major, distinct, of the preconditioner's device and one dtype):
 * column j of z is spmv_precond_apply of column j of r, for the columns
 * whose active[j] is true (active NULL: all); the others' z are left as
 * they are. amg and chebyshev run their cycle on the active columns at
 * once (every product one SpMM, every vector step one pass: on the host
 * the same bits as column by column, on a GPU the same to rounding);
 * jacobi and block_jacobi are one launch on a GPU (the same bits); ic0 and
 * ilu0 apply column by column. */
int spmv_precond_apply_k(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_vec *r, spmv_vec *z, const bool *active,
                         spmv_error *err);
/* Whether p's type has a one-pass k-column apply (else
 * spmv_precond_apply_k goes column by column). */
bool spmv_precond_has_apply_k(const spmv_precond *p);
/* spmv_precond_apply, but an amg or chebyshev object on a GPU multiplies
 * its level 0 by `fine` (NULL, a product by a matrix of another dtype or
 * shape than the hierarchy's, or r and z of another dtype: its own copy
 * of A, as spmv_precond_apply):
 * the matrix the object was built from, as the solve multiplies it
 * (spmv_gpu_amg_vcycle_with). The caller vouches that fine's values are
 * those the object was built from. */
int spmv_precond_apply_with(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_gpu_product *fine, const spmv_vec *r,
                            spmv_vec *z, spmv_error *err);
void spmv_precond_info_of(const spmv_precond *p, spmv_precond_info *out);

/* The same shape as spmv_solve_options.precond: ctx is a
 * spmv_precond_binding (the object and the context of its device). */
typedef struct spmv_precond_binding {
    spmv_gpu_ctx *gpu;
    spmv_precond *p;
    /* The solve's own product (m NULL: none), lent to amg and chebyshev
     * for their level 0 (spmv_precond_apply_with). */
    spmv_gpu_product fine;
} spmv_precond_binding;
int spmv_precond_apply_cb(void *binding, const spmv_vec *r, spmv_vec *z, spmv_error *err);
/* spmv_solve_options.precond_k's shape: spmv_precond_apply_k. */
int spmv_precond_apply_k_cb(void *binding, const spmv_vec *r, spmv_vec *z, const bool *active, spmv_error *err);

#ifdef __cplusplus
}
#endif
#endif /* SPMV_PRECOND_H */
