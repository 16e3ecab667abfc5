/* solve.c — the task body of a solve (daemon/solve.h).
 *
 * On the worker of the kernel's device: `auto` resolves to the matrix's
 * tuned kernel, b and x are the resident vectors named or fresh ones of
 * this device (x from x0 or zeros), the Jacobi diagonal is inverted on the
 * host and written there, and engine/krylov.c iterates with each product
 * through worker_run_apply, the job told of every iteration (a DELETE of
 * the job stops the solve at the next one). Every iteration is a slice
 * (worker_slice): the products queued meanwhile run between two, the
 * watchdog sees a long solve busy, not stuck, and a SIGTERM stops it (503).
 * x is read back unless it went into x_out.
 */
#include <stdio.h>
#include <stdlib.h>

#include "daemon/autotune.h"
#include "daemon/daemon.h"
#include "daemon/log.h"
#include "daemon/solve.h"

typedef struct op_ctx {
    solve_task *t;
    worker *w;
    bool draining;             /* worker_slice saw SIGTERM: the solve stops, answered 503 */
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

/* Between two iterations: a slice boundary (the products queued meanwhile
 * run), the job told, a cancel or a SIGTERM stops the solve. */
static int progress(void *c, int32_t it, double relres)
{
    op_ctx *o = c;
    if (worker_slice(o->w))
        o->draining = true;
    if (o->t->job) {
        job_set_iteration(o->t->job, it, relres);
        job_set_progress(o->t->job, (double)it / (double)o->t->o.maxit);
    }
    return o->draining || job_cancelled(o->t->job);
}

void solve_run(task *base, worker *w)
{
    solve_task *t = (solve_task *)base;
    spmv_gpu_ctx *ctx = worker_gpu_ctx(w);
    spmv_device_kind dev = ctx ? SPMV_DEVICE_GPU : SPMV_DEVICE_CPU;
    spmv_dtype dt = t->m->host.dtype;
    int32_t n = t->m->host.rows;
    spmv_vec b = {0}, x = {0}, dinv = {0};
    t->queue_ms = base->queue_ms;
    if (t->job)
        job_set_running(t->job);
    if (job_cancelled(t->job)) {
        t->rc = spmv_error_set(&t->err, SPMV_ERR_UNAVAILABLE, 0, "cancelled (DELETE /v1/jobs/%s) before it ran",
                               job_id(t->job));
        return;
    }
    if (t->is_auto) {
        matrix_tuning tuned;
        if ((t->rc = autotune_get(t->d, w, t->m, false, &tuned, &t->err)) ||
            (t->rc = spmv_params_resolve(tuned.kernel, &tuned.params, &t->p, &t->err)))
            return;
        t->k = tuned.kernel;
    }
    spmv_error *e = &t->err;
    int rc = SPMV_OK;
    /* b, x (x_out or scratch, starting from x0 or zeros), 1/diag */
    if (t->bv)
        b = t->bv->v;
    else if ((rc = spmv_vec_alloc(ctx, dev, dt, n, 1, &b, e)) || (rc = spmv_vec_write(ctx, &b, t->b_vals, e)))
        goto out;
    if (t->xout)
        x = t->xout->v;
    else if ((rc = spmv_vec_alloc(ctx, dev, dt, n, 1, &x, e)))
        goto out;
    if (t->x0v && (!t->xout || t->x0v != t->xout))
        rc = spmv_vec_copy(ctx, &t->x0v->v, &x, e);
    else if (t->x0_vals)
        rc = spmv_vec_write(ctx, &x, t->x0_vals, e);
    else if (!t->x0v)
        rc = spmv_vec_fill(ctx, &x, 0.0, e);
    if (rc)
        goto out;
    if (t->jacobi) {
        void *h = malloc((size_t)(n ? n : 1) * spmv_dtype_size(dt));
        if (!h)
            rc = spmv_error_set(e, SPMV_ERR_NOMEM, 0, "out of memory for the Jacobi diagonal");
        else if (!(rc = spmv_csr_inv_diag(&t->m->host.csr, h, e)) && !(rc = spmv_vec_alloc(ctx, dev, dt, n, 1, &dinv, e)))
            rc = spmv_vec_write(ctx, &dinv, h, e);
        free(h);
        if (rc)
            goto out;
        t->o.inv_diag = &dinv;
    }
    op_ctx oc = {t, w, false};
    spmv_linop a = {n, n, &oc, apply};
    t->o.progress = progress;
    t->o.progress_ctx = &oc;
    if ((rc = spmv_solve(ctx, &a, &b, &x, &t->o, &t->res, e)))
        goto out;
    if (oc.draining) {
        rc = spmv_error_set(e, SPMV_ERR_UNAVAILABLE, 0, "the daemon is shutting down: the solve stopped after %d "
                            "iterations", t->res.iterations);
        goto out;
    }
    if (!t->xout) {
        if (!(t->x = malloc((size_t)(n ? n : 1) * spmv_dtype_size(dt))))
            rc = spmv_error_set(e, SPMV_ERR_NOMEM, 0, "out of memory for x");
        else
            rc = spmv_vec_read(ctx, &x, t->x, e);
    }
    log_info("solve: %s on %s by %s with %s: %s after %d iterations, relres %.3g, %.1f ms",
             spmv_solve_method_name(t->o.method), t->m->meta.id, w->name, t->k->name,
             spmv_solve_stop_name(t->res.stop), t->res.iterations, t->res.relres, t->res.total_ms);
out:
    if (!t->bv)
        spmv_vec_free(ctx, &b);
    if (!t->xout)
        spmv_vec_free(ctx, &x);
    spmv_vec_free(ctx, &dinv);
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
    free(t->b_vals);
    free(t->x0_vals);
    free(t->x);
    spmv_solve_result_free(&t->res);
    t->x = t->b_vals = t->x0_vals = NULL;
}

