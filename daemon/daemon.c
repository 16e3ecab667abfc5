/* daemon.c — decisions that need the whole daemon: which device a matrix
 * or a kernel goes to, whether a kernel can run here, and running a
 * function on a worker's thread synchronously (start-up reload).
 */
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon.h"
#include "daemon/memory.h"

void spmvd_limits_from_config(spmvd_limits *l, const spmvd_config *c)
{
    atomic_store(&l->max_upload_bytes, c->max_upload_bytes);
    atomic_store(&l->max_body_bytes, c->max_body_bytes);
    atomic_store(&l->max_runs, c->max_runs);
    atomic_store(&l->max_request_work, c->max_request_work);
    atomic_store(&l->job_retention, c->job_retention);
    atomic_store(&l->max_rows, c->max_rows);
    atomic_store(&l->max_nnz, c->max_nnz);
    /* 0: sized to the host: a matrix may take a quarter of its memory (reading one takes about twice its size) */
    int64_t total = memory_total(), most = c->max_matrix_bytes ? c->max_matrix_bytes : total > 0 ? total / 4 : INT64_MAX;
    atomic_store(&l->max_matrix_bytes, most);
    atomic_store(&l->max_spmspm_nnz, c->max_spmspm_nnz ? c->max_spmspm_nnz : most / 16 < INT32_MAX ? most / 16 : INT32_MAX);
    atomic_store(&l->max_job_result_bytes, c->max_job_result_bytes);
    atomic_store(&l->max_ops_steps, c->max_ops_steps);
    atomic_store(&l->max_solve_iterations, c->max_solve_iterations);
    atomic_store(&l->max_padding, c->max_padding);
    atomic_store(&l->max_format_bytes, c->max_format_bytes);
    atomic_store(&l->host_format_bytes, c->host_format_bytes);
    atomic_store(&l->serial_below, c->serial_below);
    atomic_store(&l->allow_shm, c->allow_shm);
    atomic_store(&l->max_shm_regions, c->max_shm_regions);
    atomic_store(&l->io_buffer_bytes, c->io_buffer_bytes);
    atomic_store(&l->batch_window_us, c->batch_window_us);
}

spmv_format_limits spmvd_format_limits(spmvd *d)
{
    spmv_format_limits l = {(double)atomic_load(&d->limits.max_padding), atomic_load(&d->limits.max_format_bytes)};
    return l;
}

void spmvd_vlimits_from_config(vstore_limits *l, const spmvd_config *c)
{
    atomic_store(&l->ttl_s, c->vector_ttl_s);
    atomic_store(&l->max_bytes, c->max_vector_bytes);
    atomic_store(&l->max_count, c->max_vectors);
}

worker *spmvd_worker_named(spmvd *d, const char *name, const char **why)
{
    *why = NULL;
    if (!name || strcmp(name, "cpu") == 0)
        return d->cpu;
    if (strcmp(name, "gpu") == 0 || strcmp(name, "auto") == 0) {
        worker *w = spmvd_pick_gpu(d, -1);
        if (!w && strcmp(name, "auto") == 0)
            return d->cpu;
        if (!w)
            *why = d->ngpus ? "no GPU is usable" : d->gpu_reason;
        return w;
    }
    const char *digits = strncmp(name, "gpu", 3) == 0 ? name + 3 : name;
    char *end = NULL;
    long idx = *digits ? strtol(digits, &end, 10) : -1;
    if (!end || *end || idx < 0 || idx > 1000) {
        *why = "a device is cpu, gpu, gpuN or N";
        return NULL;
    }
    for (int i = 0; i < d->ngpus; i++)
        if (d->gpus[i]->gpu == idx)
            return d->gpus[i];
    *why = d->ngpus ? "that GPU is not one this daemon uses" : d->gpu_reason;
    return NULL;
}

worker *spmvd_upload_worker(spmvd *d)
{
    worker *best = d->loaders[0];
    for (int i = 1; i < d->nloaders; i++)
        if (queue_depth(&d->loaders[i]->queue) + (atomic_load(&d->loaders[i]->task_started_ms) > 0) <
            queue_depth(&best->queue) + (atomic_load(&best->task_started_ms) > 0))
            best = d->loaders[i];
    return best;
}

worker *spmvd_pick_gpu(spmvd *d, int want)
{
    worker *best = NULL;
    size_t best_free = 0;
    for (int i = 0; i < d->ngpus; i++) {
        worker *w = d->gpus[i];
        if (want >= 0) {
            if (w->gpu == want)
                return w;
            continue;
        }
        worker_info info;
        w->ops->info(w, &info);
        size_t free_bytes = info.have_gpu_info ? info.gpu_info.mem_free : 0;
        if (!best || free_bytes > best_free) {
            best = w;
            best_free = free_bytes;
        }
    }
    return best;
}

int spmvd_remove_matrix(spmvd *d, const char *id, spmv_error *err)
{
    matrix *m = store_get(d->store, id);
    if (m && m->shards) /* the ranks' shard files go with it */
        cluster_matrix_forget(m->shards);
    matrix_unref(m);
    return store_remove(d->store, id, err);
}

void spmvd_remove_run(task *t, worker *w)
{
    (void)w;
    remove_task *q = (remove_task *)t;
    q->rc = spmvd_remove_matrix(q->d, q->id, &q->err);
}

worker *spmvd_worker_for(spmvd *d, matrix *m, const spmv_kernel *k)
{
    if (k->device == SPMV_DEVICE_CPU)
        return d->cpu;
    return m->dev ? m->dev_worker : NULL;
}

bool spmvd_kernel_available(spmvd *d, const spmv_kernel *k, const char **reason)
{
    const char *why = NULL;
    bool ok = spmv_kernel_available(k, &why);
    /* auto is filed under the GPU but tunes for the matrix's own device:
     * it serves host matrices on a CPU-only host too */
    if (ok && k->device == SPMV_DEVICE_GPU && d->ngpus == 0 && !spmv_kernel_is_auto(k)) {
        ok = false;
        why = d->gpu_reason;
    }
    if (reason)
        *reason = ok ? NULL : (why ? why : "not available");
    return ok;
}

typedef struct call_task {
    task base;
    int (*fn)(worker *w, void *arg);
    void *arg;
    int rc;
    bool done;
    pthread_mutex_t lock;
    pthread_cond_t cond;
} call_task;

static void call_run(task *t, worker *w)
{
    call_task *c = (call_task *)t;
    c->rc = c->fn(w, c->arg);
}

static void call_finish(task *t, int status)
{
    call_task *c = (call_task *)t;
    pthread_mutex_lock(&c->lock);
    if (status != SPMV_OK)
        c->rc = status;
    c->done = true;
    pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

int spmvd_call_on_worker(worker *w, int (*fn)(worker *w, void *arg), void *arg)
{
    call_task c;
    memset(&c, 0, sizeof c);
    c.base.run = call_run;
    c.base.finish = call_finish;
    c.fn = fn;
    c.arg = arg;
    pthread_mutex_init(&c.lock, NULL);
    pthread_cond_init(&c.cond, NULL);
    int rc = w->ops->submit(w, &c.base, true);
    if (rc == SPMV_OK) {
        pthread_mutex_lock(&c.lock);
        while (!c.done)
            pthread_cond_wait(&c.cond, &c.lock);
        pthread_mutex_unlock(&c.lock);
        rc = c.rc;
    }
    pthread_cond_destroy(&c.cond);
    pthread_mutex_destroy(&c.lock);
    return rc;
}
