/* products.c — the task body of a product (daemon/products.h).
 *
 * On the worker's thread: operands in regions are staged (the pinned pages
 * for DMA on a GPU, else a pooled buffer read with pread: daemon/shm.h's
 * shm_operand_stage_pooled), y gets a pooled buffer (poisoned on the host:
 * a kernel that leaves a row unwritten shows NaN), `auto` resolves to the
 * tuned kernel, and the kernel runs through the worker: plain y = A*x with
 * host arrays (worker_run_kernel_k), or y = alpha*op(A)*x + beta*y on
 * vectors of the worker's device (worker_run_apply) when any operand is
 * resident or alpha is not 1. A sharded product goes to the cluster
 * worker's worker_cluster_spmv. `verify` recomputes y with cpu.csr.serial
 * and keeps the worst column's relative error.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/batch.h"
#include "daemon/daemon.h"
#include "daemon/log.h"
#include "daemon/products.h"

worker *product_worker(spmvd *d, const product *t)
{
    if (t->sharded)
        return d->cluster_worker;
    return t->is_auto ? autotune_worker(d, t->m) : spmvd_worker_for(d, t->m, t->k);
}

/* y = alpha*op(A)*x + beta*y with at least one resident operand: an
 * inline x is staged into a vector of the worker's device, a y that goes
 * back in the answer is read from one. */
static int run_resident(product *t, worker *w)
{
    spmv_gpu_ctx *ctx = worker_gpu_ctx(w);
    spmv_device_kind dev = ctx ? SPMV_DEVICE_GPU : SPMV_DEVICE_CPU;
    spmv_dtype dt = t->m->host.dtype;
    spmv_vec xs = {0}, ys = {0};
    const spmv_vec *x = t->xv ? &t->xv->v : t->xcuda ? &t->xdv : &xs;
    spmv_vec *y = t->yv ? &t->yv->v : t->ycuda ? &t->ydv : &ys;
    spmv_apply_args a = {t->alpha, t->beta, t->warmup, t->runs};
    int rc = SPMV_OK;
    if (!t->xv && !t->xcuda &&
        ((rc = spmv_vec_alloc(ctx, dev, dt, t->xlen, t->ncols, &xs, &t->err)) ||
         (rc = spmv_vec_write(ctx, &xs, t->x, &t->err))))
        goto out;
    if (!t->yv && !t->ycuda && (rc = spmv_vec_alloc(ctx, dev, dt, t->ylen, t->ncols, &ys, &t->err)))
        goto out;
    if ((rc = worker_run_apply(w, t->m, t->k, &t->p, t->trans, &a, x, y, &t->report.st, &t->axpby_ms, &t->err)))
        goto out;
    if (!t->yv && !t->ycuda)
        rc = spmv_vec_read(ctx, &ys, t->y, &t->err);
    else if (t->ycuda && ctx) /* the answer says y is there */
        rc = spmv_vec_sync(ctx, &t->err);
out:
    spmv_vec_free(ctx, &xs);
    spmv_vec_free(ctx, &ys);
    return rc;
}

/* Operands in regions onto the worker (shm_operand_stage_pooled): x from
 * the pinned pages or read into a pooled buffer, y to be written to the
 * pinned pages or staged in a pooled buffer. SPMV_OK, or
 * SPMV_ERR_INVALID with t->shm_rc and the message set. */
static int shm_stage(product *t, worker *w)
{
    bool gpu = worker_gpu_ctx(w) != NULL;
    int st = SHM_OK;
    if (t->xs.reg && !t->xcuda) {
        st = shm_operand_stage_pooled(&t->xs, gpu, true, t->d->iobufs, &t->x_buf, &t->x, t->err.message,
                                      sizeof t->err.message);
        t->x_borrowed = !t->x_buf; /* the pinned pages */
    }
    if (!st && t->ys.reg && !t->ycuda) {
        st = shm_operand_stage_pooled(&t->ys, gpu, false, t->d->iobufs, &t->y_buf, &t->y, t->err.message,
                                      sizeof t->err.message);
        t->y_borrowed = !t->y_buf;
    }
    if (st)
        t->shm_rc = st, t->rc = SPMV_ERR_INVALID;
    return t->rc;
}

/* y into its region and both regions checked again (shm_operand_unstage). */
static void shm_unstage(product *t)
{
    int st = SHM_OK;
    if (t->ys.reg && !t->ycuda)
        st = shm_operand_unstage(&t->ys, t->y, true, t->err.message, sizeof t->err.message);
    if (!st && t->xs.reg && !t->xcuda)
        st = shm_operand_unstage(&t->xs, t->x, false, t->err.message, sizeof t->err.message);
    if (st)
        t->shm_rc = st, t->rc = SPMV_ERR_INVALID;
}

void product_run(task *base, worker *w)
{
    product *t = (product *)base;
    int32_t rows = t->m->host.rows;
    spmv_dtype dt = t->m->host.dtype;
    int64_t ny = (int64_t)t->ylen * t->ncols;
    size_t bytes = (size_t)(ny ? ny : 1) * spmv_dtype_size(dt);
    run_report_start(&t->report, base, w);
    if (t->job)
        job_set_running(t->job);
    if (job_cancelled(t->job)) {
        t->rc = spmv_error_set(&t->err, SPMV_ERR_UNAVAILABLE, 0, "cancelled (DELETE /v1/jobs/%s) before it ran",
                               job_id(t->job));
        return;
    }
    if (product_batch(t, w))
        return;
    if (((t->xs.reg && !t->xcuda) || (t->ys.reg && !t->ycuda)) && shm_stage(t, w) != SPMV_OK)
        return;
    if (!t->yv && !t->ycuda && !t->y) { /* y goes back in the answer */
        if (!(t->y_buf = bufpool_get(t->d->iobufs, bytes))) {
            t->rc = spmv_error_set(&t->err, SPMV_ERR_NOMEM, 0, "out of memory for y");
            return;
        }
        t->y = t->y_buf->ptr;
    }
    /* a GPU product poisons its device y and copies all of it back */
    if (t->y_buf && !worker_gpu_ctx(w))
        spmv_host_poison(dt, t->y, ny);
    if (t->sharded) {
        cluster_operands io = {.x = t->xv ? NULL : t->x, .xv = t->xv ? t->xv->dist : NULL,
                               .y = t->yv ? NULL : t->y, .yv = t->yv ? t->yv->dist : NULL,
                               .alpha = t->alpha, .beta = t->beta};
        t->rc = worker_cluster_spmv(w, t->m, t->k, &t->p, &io, t->warmup, t->runs, &t->cst, &t->err);
        t->report.st = t->cst.st;
    } else if (t->is_auto) {
        if ((t->rc = autotune_get_k(t->d, w, t->m, t->ncols, &t->tuned, &t->err)) != SPMV_OK)
            return;
        t->k = t->tuned.kernel;
        if ((t->rc = spmv_params_resolve(t->k, &t->tuned.params, &t->p, &t->err)) != SPMV_OK)
            return;
    }
    if (t->sharded)
        ; /* done above */
    else if (t->xv || t->yv || t->xcuda || t->ycuda || t->alpha != 1.0)
        t->rc = run_resident(t, w);
    else
        t->rc = worker_run_kernel_k(w, t->m, t->k, &t->p, t->trans, t->ncols, t->x, t->y, t->warmup, t->runs,
                                    &t->report.st, &t->err);
    if (t->rc == SPMV_OK && (t->xs.reg || t->ys.reg))
        shm_unstage(t);
    if (t->rc == SPMV_OK && t->verify) {
        void *ref = malloc(bytes);
        if (!ref) {
            t->rc = spmv_error_set(&t->err, SPMV_ERR_NOMEM, 0, "out of memory for the reference");
            return;
        }
        size_t vs = spmv_dtype_size(dt);
        t->report.max_rel_err = 0;
        for (int32_t j = 0; j < t->ncols; j++) { /* the worst column */
            spmv_reference(&t->m->host.csr, (char *)t->x + (size_t)j * t->xlen * vs, (char *)ref + (size_t)j * rows * vs);
            double e = spmv_max_rel_err(dt, (char *)t->y + (size_t)j * rows * vs, (char *)ref + (size_t)j * rows * vs, rows);
            if (!(e <= t->report.max_rel_err))
                t->report.max_rel_err = e;
        }
        free(ref);
    }
    log_info("spmv: %s on %s (%dx%d nnz %lld) by %s: %d runs, median %.4f ms, queued %.3f ms%s",
             t->k->name, t->m->meta.id, t->m->host.rows, t->m->host.cols, (long long)t->m->host.nnz, w->name,
             t->runs, t->report.st.median_ms, t->report.queue_ms, t->rc ? " FAILED" : "");
}


void product_release(product *t)
{
    if (!t)
        return;
    matrix_unref(t->m);
    rvec_unref(t->xv);
    rvec_unref(t->yv);
    if (t->x_borrowed || t->x_buf)
        t->x = NULL;
    if (t->y_borrowed || t->y_buf)
        t->y = NULL;
    bufpool_put(t->x_buf);
    bufpool_put(t->y_buf);
    shm_operand_close(&t->xs);
    shm_operand_close(&t->ys);
    job_unref(t->job);
    free(t->x);
    free(t->y);
    t->x = t->y = NULL;
}

