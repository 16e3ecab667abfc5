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
 * many columns the SpMM had). On a GPU kernel nothing is packed on the
 * host: each x goes from its request body straight to its place in the
 * device's X and each column of Y straight into its answer's y
 * (worker_run_batch, engine/gpu/batch.cu); a CPU kernel gets X packed on
 * the host, as its SpMM reads it. The lead's worker loop finishes the lead;
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

/* A y of its own for each product, from the pool: the batch writes the
 * answers there directly. */
static int answer_buffers(product **all, int32_t n, spmv_error *err)
{
    size_t col = (size_t)all[0]->ylen * spmv_dtype_size(all[0]->m->host.dtype);
    for (int32_t j = 0; j < n; j++) {
        product *t = all[j];
        if (!(t->y_buf = bufpool_get(t->d->iobufs, col ? col : 1)))
            return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for y");
        t->y = t->y_buf->ptr;
    }
    return SPMV_OK;
}

/* A CPU kernel reads one block: the x packed into X (column-major, the
 * CPU SpMM reads it in tiles of 4 columns), one SpMM, Y unpacked into the
 * answers. All of it is host work (bt->host_ms, set by the caller). */
static int run_packed(product **all, int32_t n, worker *w, spmv_stats *st, spmv_error *err)
{
    product *lead = all[0];
    spmv_dtype dt = lead->m->host.dtype;
    size_t vs = spmv_dtype_size(dt), xcol = (size_t)lead->xlen * vs, ycol = (size_t)lead->ylen * vs;
    bufpool_buf *X = bufpool_get(lead->d->iobufs, n * xcol + 1), *Y = bufpool_get(lead->d->iobufs, n * ycol + 1);
    int rc = SPMV_OK;
    if (!X || !Y)
        rc = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for a batch of %d products", (int)n);
    if (rc == SPMV_OK) {
        for (int32_t j = 0; j < n; j++)
            memcpy((char *)X->ptr + (size_t)j * xcol, all[j]->x, xcol);
        spmv_host_poison(dt, Y->ptr, (int64_t)n * lead->ylen);
        rc = worker_run_kernel_k(w, lead->m, lead->k, &lead->p, false, n, X->ptr, Y->ptr, 0, 1, st, err);
    }
    for (int32_t j = 0; j < n && rc == SPMV_OK; j++)
        memcpy(all[j]->y, (char *)Y->ptr + (size_t)j * ycol, ycol);
    bufpool_put(X);
    bufpool_put(Y);
    return rc;
}

/* A GPU kernel takes the products' own x and y (worker_run_batch): each
 * x copied to the device into its column of X, each column of Y straight
 * into its answer. */
static int run_device(product **all, int32_t n, worker *w, spmv_stats *st, spmv_batch_times *bt, spmv_error *err)
{
    const void *xs[SPMV_MAX_K];
    void *ys[SPMV_MAX_K];
    for (int32_t j = 0; j < n; j++)
        xs[j] = all[j]->x, ys[j] = all[j]->y;
    product *lead = all[0];
    return worker_run_batch(w, lead->m, lead->k, &lead->p, n, xs, ys, st, bt, err);
}

/* The timings and the outcome into each product; a failed batch fails each. */
static void finish_all(product **all, int32_t n, int rc, const spmv_stats *st, const spmv_error *err, worker *w,
                       double start_ms)
{
    for (int32_t j = 0; j < n; j++) {
        product *t = all[j];
        if (j > 0)
            run_report_start(&t->report, &t->base, w);
        t->report.queue_ms = start_ms - t->base.enqueued_ms; /* the window counts as waiting */
        t->batched = n;
        t->report.st = *st;
        t->rc = rc;
        if (rc != SPMV_OK)
            t->err = *err;
    }
}

/* One SpMM for the products, each answer in its own y; the parts of the
 * batch's time into the log and /metrics (h2d, layout, spmm, d2h on a GPU;
 * host: the rest of the batch's wall time on the worker, the packing
 * included on the CPU). */
static void run_batch(product **all, int32_t n, worker *w)
{
    product *lead = all[0];
    spmv_stats st = {0};
    spmv_batch_times bt = {0};
    spmv_error err = {0};
    double start_ms = spmv_now_ms();
    int rc = lead->is_auto ? resolve_auto(all, n, w, &err) : SPMV_OK;
    if (rc == SPMV_OK)
        rc = answer_buffers(all, n, &err);
    if (rc == SPMV_OK && lead->k->device == SPMV_DEVICE_GPU)
        rc = run_device(all, n, w, &st, &bt, &err);
    else if (rc == SPMV_OK)
        rc = run_packed(all, n, w, &st, &err), bt.spmm_ms = st.median_ms;
    bt.total_ms = spmv_now_ms() - start_ms;
    double dev = bt.h2d_ms + bt.layout_ms + bt.spmm_ms + bt.d2h_ms;
    bt.host_ms = bt.total_ms > dev ? bt.total_ms - dev : 0;
    finish_all(all, n, rc, &st, &err, w, start_ms);
    if (rc == SPMV_OK)
        metrics_batch(lead->d->metrics, (int)n, &bt);
    log_info("spmv: batch of %d on %s by %s (%s): %.4f ms (h2d %.4f, layout %.4f, spmm %.4f, d2h %.4f, host %.4f), "
             "the lead queued %.3f ms%s",
             (int)n, lead->m->meta.id, w->name, lead->k->name, bt.total_ms, bt.h2d_ms, bt.layout_ms, bt.spmm_ms,
             bt.d2h_ms, bt.host_ms, lead->report.queue_ms, rc ? " FAILED" : "");
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
