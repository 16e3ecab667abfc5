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

typedef struct precond_ops {
    int (*setup)(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_csr *a, spmv_error *err);
    int (*apply)(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_vec *r, spmv_vec *z, spmv_error *err);
    void (*free)(spmv_gpu_ctx *ctx, spmv_precond *p);
    bool symmetric;
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
    void *impl;
};

/* The ops of type t, or NULL when this build has none. */
const precond_ops *precond_ops_of(spmv_precond_type t);

#endif
