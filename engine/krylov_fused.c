/* krylov_fused.c — the fused path (being written). */
#include "krylov_impl.h"

bool krylov_fused_eligible(const solve_state *s, const spmv_vec *b)
{
    (void)s;
    (void)b;
    return false;
}

int krylov_fused(solve_state *s, const spmv_vec *b, spmv_vec *x)
{
    (void)b;
    (void)x;
    return spmv_error_set(s->err, SPMV_ERR_UNAVAILABLE, 0, "fused path not built");
}

int spmv_gpu_op_apply(void *op, const spmv_vec *x, spmv_vec *y, double *ms, spmv_error *err)
{
    spmv_gpu_op *g = op;
    spmv_apply_args a = {1.0, 0.0, 0, 1};
    spmv_stats st;
    int rc = spmv_gpu_apply(g->ctx, g->kernel, g->m, g->params, &a, x, y, &st, NULL, err);
    *ms = rc == SPMV_OK ? st.median_ms : 0;
    return rc;
}

int spmv_gpu_op_device_apply(void *op, const spmv_vec *x, spmv_vec *y, spmv_error *err)
{
    spmv_gpu_op *g = op;
    return spmv_gpu_launch(g->ctx, g->kernel, g->m, g->params, x, y, err);
}
