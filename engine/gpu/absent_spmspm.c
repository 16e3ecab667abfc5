/* absent_spmspm.c — the SpMSpM GPU entry point of a build without CUDA.
 *
 * engine/gpu/spmspm.cu implements spmv_gpu_spmspm when nvcc is found; a
 * CPU-only build (CUDA=0, or no nvcc) links this instead, next to
 * absent.c, so the daemon and tests link the same way in both builds. It
 * answers SPMV_ERR_UNAVAILABLE with the reason, as every absent GPU entry
 * point does.
 */
#include "spmv.h"

int spmv_gpu_spmspm(spmv_gpu_ctx *ctx, const spmv_kernel *k, spmv_gpu_matrix *a, spmv_gpu_matrix *b,
                    const spmv_params *p, int32_t warmup, int32_t runs, spmv_csr *c, spmv_stats *stats,
                    spmv_error *err)
{
    (void)ctx; (void)a; (void)b; (void)p; (void)warmup; (void)runs; (void)stats;
    if (c) {
        c->row_ptr = NULL;
        c->col = NULL;
        c->val = NULL;
    }
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0,
                          "kernel %s: this build of spmvd has no CUDA support (built without nvcc or with CUDA=0)",
                          k ? k->name : "?");
}
