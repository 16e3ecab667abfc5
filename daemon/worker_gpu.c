/* worker_gpu.c — a GPU worker: the one thread that owns one device.
 *
 * The thread creates the device context (stream, cuSPARSE handle) itself
 * and is the only one to call into it, so the engine's GPU side needs no
 * locking and jobs on one GPU run one at a time, with honest timings. A
 * device copy is freed on this thread too: the last matrix_unref, on any
 * thread, queues a release task (forced past the queue bound, since
 * refusing it would leak device memory). The memory snapshot /v1/info and
 * /metrics show is refreshed by this thread after each task and when idle.
 */
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon.h"
#include "daemon/log.h"
#include "daemon/worker.h"

static void refresh_info(worker *w)
{
    spmv_gpu_info info;
    if (!w->ctx || spmv_gpu_ctx_info(w->ctx, &info) != SPMV_OK)
        return;
    pthread_mutex_lock(&w->lock);
    w->gpu_info = info;
    w->have_gpu_info = true;
    pthread_mutex_unlock(&w->lock);
}

static int gpu_thread_init(worker *w, spmv_error *err)
{
    spmv_gpu_ctx *ctx = NULL;
    int rc = spmv_gpu_ctx_new(w->gpu, w->reserve_bytes, &ctx, err);
    if (rc != SPMV_OK)
        return rc;
    w->ctx = ctx;
    refresh_info(w);
    pthread_mutex_lock(&w->lock);
    bool have = w->have_gpu_info;
    pthread_mutex_unlock(&w->lock);
    if (have)
        log_info("%s: %s, %zu MiB total, %zu MiB free", w->name, w->gpu_info.name,
                 w->gpu_info.mem_total >> 20, w->gpu_info.mem_free >> 20);
    return SPMV_OK;
}

/* Frees the device copies still held (shutdown), then the context. */
static void gpu_thread_fini(worker *w)
{
    matrix **list;
    size_t n;
    if (w->d && w->d->store && store_list(w->d->store, &list, &n) == SPMV_OK) {
        for (size_t i = 0; i < n; i++) {
            matrix *m = list[i];
            if (m->dev_worker == w && m->dev) {
                spmv_gpu_matrix_free(w->ctx, m->dev);
                m->dev = NULL;
            }
        }
        store_list_free(list, n);
    }
    spmv_gpu_ctx_free(w->ctx);
    w->ctx = NULL;
}

static void gpu_idle(worker *w) { refresh_info(w); }


/* The host CSR as it is (no COO, no sort on the device). */
static int gpu_matrix_load(worker *w, matrix *m, spmv_error *err)
{
    spmv_gpu_matrix *gm = NULL;
    spmv_gpu_upload_stats st;
    memset(&st, 0, sizeof st);
    int rc = spmv_gpu_matrix_upload_csr(w->ctx, &m->host.csr, m->host.dtype, m->meta.formats | SPMV_FMT_CSR,
                                        m->meta.hack_size, &gm, &st, err);
    refresh_info(w);
    if (rc != SPMV_OK)
        return rc;
    m->dev = gm;
    m->dev_worker = w;
    m->meta.transfer_ms = st.transfer_ms;
    m->meta.convert_ms += st.convert_ms;
    m->meta.device = w->gpu;
    return SPMV_OK;
}

static int gpu_set_values(worker *w, matrix *m, const void *val, spmv_error *err)
{
    int rc = worker_host_set_values(m, val, err);
    if (rc == SPMV_OK && m->dev)
        rc = spmv_gpu_matrix_set_values(w->ctx, m->dev, val, err);
    refresh_info(w);
    return rc;
}

typedef struct release_task {
    task base;
    void *dev;
} release_task;

static void release_run(task *t, worker *w)
{
    release_task *r = (release_task *)t;
    spmv_gpu_matrix_free(w->ctx, r->dev);
    refresh_info(w);
}

static void release_finish(task *t, int status)
{
    if (status != SPMV_OK)
        log_debug("device copy left to the context teardown (worker stopping)");
    free(t);
}

static void gpu_matrix_release(worker *w, void *dev)
{
    release_task *r = calloc(1, sizeof *r);
    if (!r) {
        log_error("%s: out of memory queueing a device free; %p leaks until shutdown", w->name, dev);
        return;
    }
    r->base.run = release_run;
    r->base.finish = release_finish;
    r->dev = dev;
    if (queue_push(&w->queue, &r->base, true) != SPMV_OK)
        free(r); /* stopping: thread_fini or the context teardown frees it */
}

typedef struct vec_release_task {
    task base;
    spmv_vec v;
} vec_release_task;

static void vec_release_run(task *t, worker *w)
{
    vec_release_task *r = (vec_release_task *)t;
    spmv_vec_free(w->ctx, &r->v);
    refresh_info(w);
}

/* Device memory of a vector is freed on the worker's thread, like a
 * matrix's device copy (forced past the queue bound: refusing would leak). */
static void gpu_vec_release(worker *w, const spmv_vec *v)
{
    vec_release_task *r = calloc(1, sizeof *r);
    if (!r) {
        log_error("%s: out of memory queueing a vector free; %p leaks until shutdown", w->name, v->data);
        return;
    }
    r->base.run = vec_release_run;
    r->base.finish = release_finish;
    r->v = *v;
    if (queue_push(&w->queue, &r->base, true) != SPMV_OK)
        free(r); /* stopping: the context teardown frees the memory */
}

/* A GPU kernel on m's copy on this device (Aᵀ built there on first use
 * and kept); a CPU kernel on the host copy. */
static int gpu_run(worker *w, const worker_run_args *a)
{
    if (a->k->device == SPMV_DEVICE_CPU)
        return worker_host_run(w, a);
    matrix *m = a->m;
    if (m->dev_worker != w || !m->dev)
        return spmv_error_set(a->err, SPMV_ERR_UNAVAILABLE, 0, "matrix %s is not resident on %s", m->meta.id,
                              w->name);
    spmv_gpu_matrix *g = m->dev;
    int rc = a->trans ? spmv_gpu_matrix_transpose(w->ctx, m->dev, &g, a->err) : SPMV_OK;
    if (rc != SPMV_OK)
        return rc;
    if (a->xs)
        return spmv_gpu_run_batch(w->ctx, a->k, g, a->p, a->ncols, a->xs, a->ys, a->st, a->bt, a->err);
    if (a->apply)
        return spmv_gpu_apply(w->ctx, a->k, g, a->p, a->apply, a->xv, a->yv, a->st, a->axpby_ms, a->err);
    if (a->ncols == 1 && !a->trans)
        return spmv_gpu_run(w->ctx, a->k, g, a->p, a->x, a->y, a->warmup, a->runs, a->st, a->err);
    return spmv_gpu_run_k(w->ctx, a->k, g, a->p, a->ncols, a->x, a->y, a->warmup, a->runs, a->st, a->err);
}

static const worker_ops gpu_ops = {
    .kind = "gpu",
    WORKER_GENERIC_OPS,
    .matrix_load = gpu_matrix_load,
    .matrix_release = gpu_matrix_release,
    .matrix_set_values = gpu_set_values,
    .vec_release = gpu_vec_release,
    .run = gpu_run,
    .thread_init = gpu_thread_init,
    .thread_fini = gpu_thread_fini,
    .idle = gpu_idle,
};

worker *worker_gpu_new(struct spmvd *d, int device, size_t reserve_bytes, size_t queue_depth)
{
    char name[16];
    snprintf(name, sizeof name, "gpu%d", device);
    worker *w = worker_alloc(d, &gpu_ops, name, device, queue_depth);
    if (w)
        w->reserve_bytes = reserve_bytes;
    return w;
}
