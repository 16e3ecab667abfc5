/* solve.c — the task body of a solve (daemon/solve.h).
 *
 * On the worker of the kernel's device: `auto` resolves to the matrix's
 * tuned kernel, b and x are the resident vectors named or fresh ones of
 * this device (x from x0 or zeros), the Jacobi diagonal is inverted on the
 * host and written there, and engine/krylov.c iterates with each product
 * through worker_run_apply, the job told of every iteration (a DELETE of
 * the job stops the solve at the next one). With a GPU kernel the
 * iterations run fused (engine/krylov_fused.c): after the first product
 * through the worker, each is queued on the worker's stream
 * (spmv_gpu_launch) with its scalars on the GPU, and the host sees them
 * in bursts, a check every few iterations; a task run in a slice meanwhile
 * waits for what is queued, and makes the solve capture its graph anew
 * (device_epoch: the task may have moved a format). Every iteration is a slice
 * (worker_slice): the products queued meanwhile run between two, the
 * watchdog sees a long solve busy, not stuck, and a SIGTERM stops it (503).
 * A preconditioner object named or given inline is bound before the
 * first column: a named one must live on this worker's device; an
 * inline one is the matrix's cache, or built now (its setup counted in
 * the first column's setup time).
 * x is read back unless it went into x_out. k columns under CG, with a
 * kernel that takes them at once, run in lockstep (spmv_solve_block: one
 * product of the k directions an iteration; `auto` picks its kernel for
 * k columns), fused too when that kernel is gpu.csr.spmm on this worker's
 * GPU (every column's scalars on the device, its SpMM queued by
 * device_apply: krylov_fused_block); other methods solve them in turn, sharing the device
 * vectors and the Jacobi diagonal (the job's progress runs over all k).
 * A sharded matrix solves on the cluster worker with cluster_solve: b and
 * x0 inline, one column, every rank iterating on its rows; nothing else
 * runs on that worker between two iterations (its other tasks are
 * commands to the ranks, which are inside the solve), and its
 * preconditioner (jacobi, block_jacobi, chebyshev) is set up by each rank
 * on its diagonal block.
 */
#include <stdio.h>
#include <stdlib.h>

#include "daemon/autotune.h"
#include "daemon/daemon.h"
#include "daemon/log.h"
#include "daemon/payback.h"
#include "daemon/solve.h"

typedef struct op_ctx {
    solve_task *t;
    worker *w;
    bool draining;             /* worker_slice saw SIGTERM: the solve stops, answered 503 */
    bool fused;                /* device_apply offered: iterations queued, the stream may be busy */
    int32_t queued;            /* products queued by device_apply (not through the worker) */
} op_ctx;

static int apply(void *c, const spmv_vec *x, spmv_vec *y, double *ms, spmv_error *err)
{
    op_ctx *o = c;
    spmv_apply_args a = {1.0, 0.0, 0, 1};
    spmv_stats st;
    int rc = worker_run_apply(o->w, o->t->m, o->t->k, &o->t->p, false, &a, x, y, &st, NULL, err);
    *ms = rc == SPMV_OK ? st.median_ms : 0;
    return rc;
}

/* The fused path's product (engine/krylov.h device_apply): the kernel
 * queued on the worker's stream and not waited for. */
static int device_apply(void *c, const spmv_vec *x, spmv_vec *y, spmv_error *err)
{
    op_ctx *o = c;
    o->queued++;
    return spmv_gpu_launch(worker_gpu_ctx(o->w), o->t->k, o->t->m->dev, &o->t->p, x, y, err);
}

/* What may have moved what a captured iteration reads: any task the
 * worker ran in the solve's slices (a product that evicted a format or
 * made a texture over another x, new values). */
static uint64_t device_epoch(void *c)
{
    op_ctx *o = c;
    return atomic_load(&o->w->tasks_run);
}

/* The products queued by device_apply, which the worker did not run,
 * counted as its own are (payback, the kernel's metrics), at ms each. */
static void note_queued(const solve_task *t, int32_t queued, double ms)
{
    if (queued <= 0)
        return;
    payback_note_run(t->m, t->k, (uint64_t)queued, false, 0);
    if (t->d->metrics)
        metrics_kernel(t->d->metrics, t->k->name, ms, queued);
}

/* Whether the iterations may run fused (engine/krylov_fused.c): a GPU
 * kernel's SpMV on this worker's copy of the matrix. */
static bool fused_fits(const solve_task *t, worker *w)
{
    return worker_gpu_ctx(w) && t->k->device == SPMV_DEVICE_GPU && t->k->op == SPMV_OP_SPMV && t->m->dev_worker == w &&
           t->m->dev;
}

/* Between two iterations: a slice boundary (the products queued meanwhile
 * run), the job told, a cancel or a SIGTERM stops the solve. On the fused
 * path, iterations are still queued on the stream: the slice's tasks wait
 * for them first (a product's preparation may free what they read). */
static int progress(void *c, int32_t it, double relres)
{
    op_ctx *o = c;
    solve_task *t = o->t;
    if (o->fused && queue_depth(&o->w->queue) > 0)
        spmv_vec_sync(worker_gpu_ctx(o->w), NULL);
    if (worker_slice(o->w))
        o->draining = true;
    if (t->job) {
        job_set_iteration(t->job, it, relres);
        job_set_progress(t->job, t->lockstep ? (double)it / t->o.maxit
                                              : ((double)t->col * t->o.maxit + it) / ((double)t->ncols * t->o.maxit));
    }
    return o->draining || job_cancelled(t->job);
}

/* The vectors of the device every column shares: b (the resident one, or
 * scratch), x (x_out, or scratch), 1/diag under Jacobi. */
typedef struct solve_vecs {
    spmv_vec b, x, dinv;
} solve_vecs;

/* Under Jacobi, 1/diag on the device, bound into the options. */
static int dinv_alloc(solve_task *t, spmv_gpu_ctx *ctx, spmv_device_kind dev, spmv_vec *dinv, spmv_error *e)
{
    spmv_dtype dt = t->m->host.dtype;
    int32_t n = t->m->host.rows;
    int rc;
    if (!t->jacobi)
        return SPMV_OK;
    bool checked = t->dinv_host && atomic_load(&t->m->values_gen) == t->dinv_gen; /* the API's, of these values */
    void *h = checked ? t->dinv_host : malloc((size_t)(n ? n : 1) * spmv_dtype_size(dt));
    if (!h)
        rc = spmv_error_set(e, SPMV_ERR_NOMEM, 0, "out of memory for the Jacobi diagonal");
    else if ((checked || !(rc = spmv_csr_inv_diag(&t->m->host.csr, h, e))) &&
             !(rc = spmv_vec_alloc(ctx, dev, dt, n, 1, dinv, e)))
        rc = spmv_vec_write(ctx, dinv, h, e);
    if (!checked)
        free(h);
    t->o.inv_diag = dinv;
    return rc;
}

static int vecs_alloc(solve_task *t, spmv_gpu_ctx *ctx, spmv_device_kind dev, solve_vecs *v, spmv_error *e)
{
    spmv_dtype dt = t->m->host.dtype;
    int32_t n = t->m->host.rows;
    int rc = SPMV_OK;
    if (t->bv)
        v->b = t->bv->v;
    else if ((rc = spmv_vec_alloc(ctx, dev, dt, n, 1, &v->b, e)))
        return rc;
    if (t->xout)
        v->x = t->xout->v;
    else if ((rc = spmv_vec_alloc(ctx, dev, dt, n, 1, &v->x, e)))
        return rc;
    return dinv_alloc(t, ctx, dev, &v->dinv, e);
}

static void vecs_free(solve_task *t, spmv_gpu_ctx *ctx, solve_vecs *v)
{
    if (!t->bv)
        spmv_vec_free(ctx, &v->b);
    if (!t->xout)
        spmv_vec_free(ctx, &v->x);
    spmv_vec_free(ctx, &v->dinv);
}

/* Column c: b and x0 (from x0, or zeros) written, solved, x read back. */
static int solve_column(solve_task *t, worker *w, spmv_gpu_ctx *ctx, solve_vecs *v, int32_t c, spmv_error *e)
{
    size_t col_bytes = (size_t)t->m->host.rows * spmv_dtype_size(t->m->host.dtype);
    int rc = SPMV_OK;
    t->col = c;
    if (!t->bv && (rc = spmv_vec_write(ctx, &v->b, (const char *)t->b_vals + (size_t)c * col_bytes, e)))
        return rc;
    if (t->x0v && (!t->xout || t->x0v != t->xout))
        rc = spmv_vec_copy(ctx, &t->x0v->v, &v->x, e);
    else if (t->x0_vals)
        rc = spmv_vec_write(ctx, &v->x, (const char *)t->x0_vals + (size_t)c * col_bytes, e);
    else if (!t->x0v)
        rc = spmv_vec_fill(ctx, &v->x, 0.0, e);
    if (rc)
        return rc;
    op_ctx oc = {t, w, false, fused_fits(t, w), 0};
    spmv_linop a = {t->m->host.rows, t->m->host.rows, &oc, apply};
    t->o.progress = progress;
    t->o.progress_ctx = &oc;
    t->o.device_apply = oc.fused ? device_apply : NULL;
    t->o.device_epoch = oc.fused ? device_epoch : NULL;
    spmv_solve_result *res = &t->res[c];
    rc = spmv_solve(ctx, &a, &v->b, &v->x, &t->o, res, e);
    note_queued(t, oc.queued, res->spmv_calls ? res->spmv_ms / res->spmv_calls : 0);
    if (rc)
        return rc;
    if (oc.draining)
        return spmv_error_set(e, SPMV_ERR_UNAVAILABLE, 0, "the daemon is shutting down: the solve stopped after %d "
                              "iterations", res->iterations);
    if (!t->xout && (rc = spmv_vec_read(ctx, &v->x, (char *)t->x + (size_t)c * col_bytes, e)))
        return rc;
    char how[48] = "";
    if (res->fused)
        snprintf(how, sizeof how, ", fused (%d graphs captured)", res->captures);
    log_info("solve: %s on %s by %s with %s%s: %s after %d iterations, relres %.3g, %.1f ms%s",
             spmv_solve_method_name(t->o.method), t->m->meta.id, w->name, t->k->name, t->ncols > 1 ? " (a column)" : "",
             spmv_solve_stop_name(res->stop), res->iterations, res->relres, res->total_ms, how);
    return SPMV_OK;
}

/* The k columns in lockstep (engine/krylov_block.c): b and x as n x k
 * blocks of the device, one product of the k directions an iteration. */
static int solve_lockstep(solve_task *t, worker *w, spmv_gpu_ctx *ctx, spmv_device_kind dev, spmv_error *e)
{
    spmv_dtype dt = t->m->host.dtype;
    int32_t n = t->m->host.rows, k = t->ncols;
    spmv_vec b = {0}, x = {0}, dinv = {0};
    op_ctx oc = {.t = t, .w = w, .fused = fused_fits(t, w) && t->k->impl == SPMV_IMPL_GPU_CSR_SPMM};
    spmv_linop a = {n, n, &oc, apply};
    int rc = spmv_vec_alloc(ctx, dev, dt, n, k, &b, e);
    if (!rc && !(rc = spmv_vec_alloc(ctx, dev, dt, n, k, &x, e)) && !(rc = spmv_vec_write(ctx, &b, t->b_vals, e)))
        rc = t->x0_vals ? spmv_vec_write(ctx, &x, t->x0_vals, e) : spmv_vec_fill(ctx, &x, 0.0, e);
    if (!rc)
        rc = dinv_alloc(t, ctx, dev, &dinv, e);
    t->o.progress = progress;
    t->o.progress_ctx = &oc;
    t->o.device_apply = oc.fused ? device_apply : NULL; /* every column's scalars on the device: krylov_fused_block */
    t->o.device_epoch = oc.fused ? device_epoch : NULL;
    if (!rc)
        rc = spmv_solve_block(ctx, &a, &b, &x, &t->o, t->res, e);
    double ms = 0; /* each column holds its share of every product: their sum is the products' time */
    for (int32_t c = 0; c < k; c++)
        ms += t->res[c].spmv_ms;
    note_queued(t, oc.queued, ms / (oc.queued + 1)); /* + 1: the start's product, timed through the worker */
    if (!rc && oc.draining) {
        for (int32_t c = 0; c < k; c++)
            spmv_solve_result_free(&t->res[c]);
        rc = spmv_error_set(e, SPMV_ERR_UNAVAILABLE, 0, "the daemon is shutting down: the solve stopped");
    }
    if (!rc)
        rc = spmv_vec_read(ctx, &x, t->x, e);
    if (!rc)
        log_info("solve: %s of %d columns in lockstep on %s by %s with %s: %.1f ms", spmv_solve_method_name(t->o.method),
                 k, t->m->meta.id, w->name, t->k->name, t->res[0].total_ms);
    spmv_vec_free(ctx, &b);
    spmv_vec_free(ctx, &x);
    spmv_vec_free(ctx, &dinv);
    return rc;
}

/* Whether the k columns go in lockstep: CG, a kernel that takes them at
 * once, no resident x_out (which is one column). */
static bool lockstep_fits(const solve_task *t)
{
    return t->ncols > 1 && t->o.method == SPMV_SOLVE_CG && !t->xout && spmv_kernel_max_k(t->k) >= t->ncols;
}

/* The preconditioner object of the solve, bound into t->o. */
static int precond_bind(solve_task *t, worker *w, spmv_error *e)
{
    if (t->pc_inline) {
        int rc = precond_obtain(w, t->m, &t->pc_opts, &t->pc_src, true, &t->pc, &t->pc_built, e);
        if (rc != SPMV_OK)
            return rc;
    }
    if (!t->pc)
        return SPMV_OK;
    if (t->pc->w != w)
        return spmv_error_set(e, SPMV_ERR_INVALID, 0, "preconditioner %s lives on %s; this solve runs on %s (kernel "
                              "%s): build one there, or pick a kernel of %s", t->pc->id, t->pc->w->name, w->name,
                              t->k->name, t->pc->w->name);
    t->pc_bind = (spmv_precond_binding){worker_gpu_ctx(w), t->pc->p, {0}};
    /* amg and chebyshev multiply their level 0 by the solve's own kernel on the resident matrix when they were
     * built from its present values (docs/kernels.md, "The AMG V-cycle") */
    if (fused_fits(t, w) && t->pc->values_version == atomic_load(&t->m->values_gen))
        t->pc_bind.fine = (spmv_gpu_product){t->m->dev, t->k, &t->p};
    t->o.precond = spmv_precond_apply_cb;
    t->o.precond_k = spmv_precond_apply_k_cb;
    t->o.precond_ctx = &t->pc_bind;
    return SPMV_OK;
}

/* A sharded matrix: the solve on every rank (cluster_solve), rank 0's
 * report, x gathered. Iterations are no slices here: the worker's queue
 * holds commands for the ranks, which are inside this solve, so between
 * two only progress is marked (in_slice: worker_slice runs nothing) and
 * the job told; a SIGTERM or a cancel stops every rank at once. */
static int solve_sharded(solve_task *t, worker *w, spmv_error *e)
{
    size_t bytes = (size_t)t->m->host.rows * spmv_dtype_size(t->m->host.dtype);
    if (!(t->res = calloc(1, sizeof *t->res)) || !(t->x = malloc(bytes ? bytes : 1)))
        return spmv_error_set(e, SPMV_ERR_NOMEM, 0, "out of memory for x");
    op_ctx oc = {.t = t, .w = w};
    cluster_solve_args a = {.k = t->k, .p = &t->p, .o = t->o, .pc = t->pc_opts, .b = t->b_vals, .x0 = t->x0_vals,
                            .x = t->x, .progress = progress, .progress_ctx = &oc};
    if (!t->pc_inline)
        spmv_precond_defaults(&a.pc, t->jacobi ? SPMV_PRECOND_JACOBI : SPMV_PRECOND_NONE);
    bool was = w->in_slice;
    w->in_slice = true;
    int rc = cluster_solve(worker_cluster_of(w), t->m->shards, &a, t->res, &t->cst, e);
    w->in_slice = was;
    if (rc == SPMV_OK && oc.draining) {
        spmv_solve_result_free(t->res);
        return spmv_error_set(e, SPMV_ERR_UNAVAILABLE, 0, "the daemon is shutting down: the solve stopped after %d "
                              "iterations", t->res->iterations);
    }
    if (rc == SPMV_OK)
        log_info("solve: %s on sharded %s over %d ranks with %s: %s after %d iterations, relres %.3g, %.1f ms",
                 spmv_solve_method_name(t->o.method), t->m->meta.id, t->cst.nranks, t->cst.kernel,
                 spmv_solve_stop_name(t->res->stop), t->res->iterations, t->res->relres, t->res->total_ms);
    return rc;
}

void solve_run(task *base, worker *w)
{
    solve_task *t = (solve_task *)base;
    spmv_gpu_ctx *ctx = worker_gpu_ctx(w);
    spmv_device_kind dev = ctx ? SPMV_DEVICE_GPU : SPMV_DEVICE_CPU;
    size_t n = (size_t)t->m->host.rows, k = (size_t)(t->ncols > 0 ? t->ncols : 1);
    solve_vecs v = {0};
    spmv_error *e = &t->err;
    t->ncols = (int32_t)k;
    t->queue_ms = base->queue_ms;
    if (t->job)
        job_set_running(t->job);
    if (job_cancelled(t->job)) {
        t->rc = spmv_error_set(e, SPMV_ERR_UNAVAILABLE, 0, "cancelled (DELETE /v1/jobs/%s) before it ran",
                               job_id(t->job));
        return;
    }
    if (t->m->shards) {
        t->ncols = 1;
        t->rc = solve_sharded(t, w, e);
        return;
    }
    if (t->is_auto) { /* k columns: `auto`'s choice for k at once, when CG can use it */
        matrix_tuning tuned;
        bool block = t->ncols > 1 && t->o.method == SPMV_SOLVE_CG;
        if ((t->rc = block ? autotune_get_k(t->d, w, t->m, t->ncols, &tuned, e)
                           : autotune_get(t->d, w, t->m, false, &tuned, e)) ||
            (t->rc = spmv_params_resolve(tuned.kernel, &tuned.params, &t->p, e)))
            return;
        t->k = tuned.kernel;
    }
    int rc = SPMV_OK;
    if (!(t->res = calloc(k, sizeof *t->res)) ||
        (!t->xout && !(t->x = malloc((n ? n : 1) * k * spmv_dtype_size(t->m->host.dtype)))))
        rc = spmv_error_set(e, SPMV_ERR_NOMEM, 0, "out of memory for x");
    else if (!(rc = precond_bind(t, w, e)) && (t->lockstep = lockstep_fits(t)))
        rc = solve_lockstep(t, w, ctx, dev, e);
    else if (!rc)
        rc = vecs_alloc(t, ctx, dev, &v, e);
    for (int32_t c = 0; rc == SPMV_OK && !t->lockstep && c < t->ncols; c++)
        rc = solve_column(t, w, ctx, &v, c, e);
    vecs_free(t, ctx, &v);
    t->rc = rc;
}

void solve_release(solve_task *t)
{
    if (!t)
        return;
    matrix_unref(t->m);
    job_unref(t->job);
    rvec_unref(t->bv);
    rvec_unref(t->x0v);
    rvec_unref(t->xout);
    rprecond_unref(t->pc);
    t->pc = NULL;
    precond_source_release(&t->pc_src);
    if (!t->vals_borrowed) {
        free(t->b_vals);
        free(t->x0_vals);
    }
    free(t->x);
    free(t->dinv_host);
    t->dinv_host = NULL;
    for (int32_t c = 0; t->res && c < t->ncols; c++)
        spmv_solve_result_free(&t->res[c]);
    free(t->res);
    t->res = NULL;
    t->x = t->b_vals = t->x0_vals = NULL;
}

