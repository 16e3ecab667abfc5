/* batch.c — dynamic batching: products that arrive together run as one SpMM.
 *
 * With `batch_window_us` set (docs/operations.md), a product the API marked
 * batchable (api/spmv.c: one column of x inline or in the binary body, y
 * in the answer, op n, alpha 1, beta 0, one run without warm-up or verify,
 * synchronous, not sharded, a kernel that takes several columns or auto)
 * waits on its worker until the window since its arrival has passed, and
 * takes out of the queue every product that may join it: the same matrix,
 * kernel and parameters (worker_join). The x of all of them become the
 * columns of one block X, the kernel runs once as Y = A*X, and each
 * product gets its column of Y, the SpMM's timings and `batched` (how
 * many columns the SpMM had). The lead's worker loop finishes the lead;
 * the joined ones are finished here, after the SpMM. Like Triton's
 * dynamic batcher, the window trades a bounded wait for fewer, wider
 * kernel launches: on a gather-bound matrix the SpMM reads A once for all
 * columns (docs/benchmarks/api.md).
 */
#include <string.h>

#include "daemon/batch.h"
#include "daemon/daemon.h"
#include "daemon/log.h"
#include "daemon/metrics.h"

/* May product `o` (any queued task) run in the lead's SpMM? */
static bool joins(const task *lead, const task *o)
{
    if (o->run != product_run)
        return false;
    const product *l = (const product *)lead, *t = (const product *)o;
    return t->batchable && t->m == l->m && t->k == l->k && t->is_auto == l->is_auto &&
           memcmp(&t->p, &l->p, sizeof t->p) == 0;
}

/* auto: the kernel tuned for the batch's width rounded up to a power of two
 * (at most log2(SPMV_MAX_K) tunings a matrix), set in every product. */
static int resolve_auto(product **all, int32_t n, worker *w, spmv_error *err)
{
    product *lead = all[0];
    int32_t cols = 1;
    while (cols < n)
        cols *= 2;
    int rc = autotune_get_k(lead->d, w, lead->m, cols, &lead->tuned, err);
    if (rc == SPMV_OK)
        rc = spmv_params_resolve(lead->tuned.kernel, &lead->tuned.params, &lead->p, err);
    for (int32_t j = 1; j < n && rc == SPMV_OK; j++)
        all[j]->tuned = lead->tuned, all[j]->p = lead->p;
    for (int32_t j = 0; j < n && rc == SPMV_OK; j++)
        all[j]->k = lead->tuned.kernel;
    return rc;
}

/* Each product's column of Y into a y of its own, the timings and the
 * outcome into each. */
static void scatter(product **all, int32_t n, const char *Y, int rc, const spmv_stats *st, const spmv_error *err,
                    worker *w, double start_ms)
{
    size_t col = (size_t)all[0]->ylen * spmv_dtype_size(all[0]->m->host.dtype);
    for (int32_t j = 0; j < n; j++) {
        product *t = all[j];
        if (j > 0)
            run_report_start(&t->report, &t->base, w);
        t->report.queue_ms = start_ms - t->base.enqueued_ms; /* the window counts as waiting */
        t->batched = n;
        t->report.st = *st;
        t->rc = rc;
        if (rc != SPMV_OK) {
            t->err = *err;
            continue;
        }
        if (!(t->y_buf = bufpool_get(t->d->iobufs, col ? col : 1))) {
            t->rc = spmv_error_set(&t->err, SPMV_ERR_NOMEM, 0, "out of memory for y");
            continue;
        }
        t->y = t->y_buf->ptr;
        memcpy(t->y, Y + (size_t)j * col, col);
    }
}

/* X from the products' x, one SpMM, Y scattered back. */
static void run_batch(product **all, int32_t n, worker *w)
{
    product *lead = all[0];
    spmv_dtype dt = lead->m->host.dtype;
    size_t vs = spmv_dtype_size(dt), xcol = (size_t)lead->xlen * vs, ycol = (size_t)lead->ylen * vs;
    spmv_stats st = {0};
    spmv_error err = {0};
    int rc = SPMV_OK;
    double start_ms = spmv_now_ms();
    bufpool_buf *X = bufpool_get(lead->d->iobufs, n * xcol + 1), *Y = bufpool_get(lead->d->iobufs, n * ycol + 1);
    if (!X || !Y)
        rc = spmv_error_set(&err, SPMV_ERR_NOMEM, 0, "out of memory for a batch of %d products", (int)n);
    if (rc == SPMV_OK && lead->is_auto)
        rc = resolve_auto(all, n, w, &err);
    if (rc == SPMV_OK) {
        for (int32_t j = 0; j < n; j++)
            memcpy((char *)X->ptr + (size_t)j * xcol, all[j]->x, xcol);
        if (!worker_gpu_ctx(w)) /* a GPU poisons its device y */
            spmv_host_poison(dt, Y->ptr, (int64_t)n * lead->ylen);
        rc = worker_run_kernel_k(w, lead->m, lead->k, &lead->p, false, n, X->ptr, Y->ptr, 0, 1, &st, &err);
    }
    scatter(all, n, Y ? Y->ptr : NULL, rc, &st, &err, w, start_ms);
    if (rc == SPMV_OK)
        metrics_batch(lead->d->metrics, (int)n);
    bufpool_put(X);
    bufpool_put(Y);
    log_info("spmv: batch of %d on %s by %s (%s): %.4f ms, the lead queued %.3f ms%s", (int)n, lead->m->meta.id,
             w->name, lead->k->name, st.median_ms, lead->report.queue_ms, rc ? " FAILED" : "");
}

bool product_batch(product *t, worker *w)
{
    int64_t window_us = atomic_load(&t->d->limits.batch_window_us);
    int32_t most = t->is_auto ? SPMV_MAX_K : t->k->max_k;
    if (!t->batchable || window_us <= 0 || most < 2)
        return false;
    task *joined[SPMV_MAX_K];
    size_t n = worker_join(w, &t->base, joins, joined, (size_t)most - 1, t->base.enqueued_ms + (double)window_us / 1000.0);
    t->batched = (int32_t)n + 1;
    if (n == 0) { /* alone: the plain path runs it, and the answer says batched 1 */
        t->report.queue_ms = spmv_now_ms() - t->base.enqueued_ms; /* the window counts as waiting */
        return false;
    }
    product *all[SPMV_MAX_K];
    all[0] = t;
    for (size_t j = 0; j < n; j++)
        all[j + 1] = (product *)joined[j];
    run_batch(all, (int32_t)n + 1, w);
    for (size_t j = 0; j < n; j++)
        worker_finish_joined(w, joined[j]);
    return true;
}
