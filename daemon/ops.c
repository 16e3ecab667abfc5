/* ops.c — the task body of a batch of vector steps (daemon/ops.h).
 *
 * On the operands' worker: each step runs, then (on a GPU) the stream is
 * synchronised, so a step's `ms` on the wall clock is its own and not the
 * queue of kernels before it. `auto` products resolve to the tuned kernel
 * here, on the worker, as a product's do. A distributed step is one
 * cluster call: a product with the sharded matrix exchanges only the
 * halo, a dot or nrm2 sums the ranks' partial sums.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "daemon/autotune.h"
#include "daemon/daemon.h"
#include "daemon/ops.h"

const char *const ops_names[OPS_COUNT] = {"spmv", "dot", "nrm2", "axpy", "axpby", "scal", "copy", "fill"};

/* A step on vectors distributed across the MPI ranks. */
static int run_cluster_step(ops_batch *b, worker *w, ops_step *s)
{
    cluster *c = worker_cluster_of(w);
    spmv_error *e = &b->err;
    cluster_vec *x = s->x->dist, *y = s->y ? s->y->dist : NULL;
    switch (s->op) {
    case OPS_SPMV: {
        cluster_operands io = {.xv = x, .yv = y, .alpha = s->alpha, .beta = s->beta};
        cluster_spmv_stats st;
        int rc = worker_cluster_spmv(w, s->m, s->k, &s->p, &io, 0, 1, &st, e);
        const spmv_kernel *ran = rc == SPMV_OK ? spmv_kernel_find(st.kernel) : NULL;
        if (ran)
            s->k = ran; /* auto: rank 0's choice */
        return rc;
    }
    case OPS_DOT: return cluster_vec_op(c, CLUSTER_VOP_DOT, 0, x, 0, y, s->res, e);
    case OPS_NRM2: return cluster_vec_op(c, CLUSTER_VOP_NRM2, 0, x, 0, NULL, s->res, e);
    case OPS_AXPY: return cluster_vec_op(c, CLUSTER_VOP_AXPY, s->alpha, x, 0, y, NULL, e);
    case OPS_AXPBY: return cluster_vec_op(c, CLUSTER_VOP_AXPBY, s->alpha, x, s->beta, y, NULL, e);
    case OPS_SCAL: return cluster_vec_op(c, CLUSTER_VOP_SCAL, s->alpha, x, 0, NULL, NULL, e);
    case OPS_COPY: return cluster_vec_op(c, CLUSTER_VOP_COPY, 0, x, 0, y, NULL, e);
    case OPS_FILL: return cluster_vec_op(c, CLUSTER_VOP_FILL, s->value, x, 0, NULL, NULL, e);
    case OPS_COUNT: break;
    }
    return spmv_error_set(e, SPMV_ERR_INVALID, 0, "unknown step");
}

static int run_step(ops_batch *b, worker *w, ops_step *s)
{
    if (worker_is_cluster(w))
        return run_cluster_step(b, w, s);
    spmv_gpu_ctx *ctx = worker_gpu_ctx(w);
    spmv_error *e = &b->err;
    switch (s->op) {
    case OPS_SPMV: {
        if (s->is_auto) {
            matrix_tuning tuned;
            int rc = autotune_get_k(b->d, w, s->m, s->x->v.k, &tuned, e);
            if (rc != SPMV_OK)
                return rc;
            s->k = tuned.kernel;
            if ((rc = spmv_params_resolve(s->k, &tuned.params, &s->p, e)) != SPMV_OK)
                return rc;
        }
        spmv_apply_args a = {s->alpha, s->beta, 0, 1};
        spmv_stats st;
        double axms;
        return worker_run_apply(w, s->m, s->k, &s->p, s->trans, &a, &s->x->v, &s->y->v, &st, &axms, e);
    }
    case OPS_DOT: return spmv_vec_dot(ctx, &s->x->v, &s->y->v, s->res, e);
    case OPS_NRM2: return spmv_vec_nrm2(ctx, &s->x->v, s->res, e);
    case OPS_AXPY: return spmv_vec_axpy(ctx, s->alpha, &s->x->v, &s->y->v, e);
    case OPS_AXPBY: return spmv_vec_axpby(ctx, s->alpha, &s->x->v, s->beta, &s->y->v, e);
    case OPS_SCAL: return spmv_vec_scal(ctx, s->alpha, &s->x->v, e);
    case OPS_COPY: return spmv_vec_copy(ctx, &s->x->v, &s->y->v, e);
    case OPS_FILL: return spmv_vec_fill(ctx, &s->x->v, s->value, e);
    case OPS_COUNT: break;
    }
    return spmv_error_set(e, SPMV_ERR_INVALID, 0, "unknown step");
}

void ops_run(task *base, worker *w)
{
    ops_batch *b = (ops_batch *)base;
    spmv_gpu_ctx *ctx = worker_gpu_ctx(w);
    double t0 = spmv_now_ms();
    b->queue_ms = base->queue_ms;
    for (size_t i = 0; i < b->nsteps; i++) {
        ops_step *s = &b->steps[i];
        if (i > 0 && worker_slice(w)) { /* SIGTERM: the steps before took effect, the rest never run */
            b->rc = spmv_error_set(&b->err, SPMV_ERR_UNAVAILABLE, 0, "the daemon is shutting down");
            b->failed_at = i;
            break;
        }
        double s0 = spmv_now_ms();
        if ((b->rc = run_step(b, w, s)) == SPMV_OK)
            b->rc = spmv_vec_sync(ctx, &b->err); /* the step's ms ends when its device work does */
        s->ms = spmv_now_ms() - s0;
        if (b->rc != SPMV_OK) {
            b->failed_at = i;
            break;
        }
        atomic_store(&s->x->last_used_ms, (long long)spmv_now_ms());
    }
    b->total_ms = spmv_now_ms() - t0;
}

void ops_release(ops_batch *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < b->nsteps; i++) {
        rvec_unref(b->steps[i].x);
        rvec_unref(b->steps[i].y);
        matrix_unref(b->steps[i].m);
    }
    free(b->steps);
    b->steps = NULL;
    b->nsteps = 0;
}
