/* worker_cluster.c — rank 0's cluster worker: the one thread that talks MPI.
 *
 * Under mpirun, rank 0 runs the daemon as usual plus this worker. Every
 * collective step (shard a matrix, multiply it, free it) is a task on its
 * queue, exactly as a GPU's work is a task on that GPU's worker, so MPI is
 * called from this thread alone (MPI_THREAD_SERIALIZED) and the other
 * ranks see the commands in the order the tasks run. Between tasks the
 * loop pings every rank once a second; a rank that does not answer within
 * cluster_timeout_ms marks the cluster failed (cluster_failed): /v1/ready
 * then answers 503 and sharded requests fail at once, while the daemon's
 * other matrices, on the CPU and GPU workers, keep being served. Stopping
 * the worker (SIGTERM) sends `shutdown` to every rank from this thread
 * before it exits.
 */
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon.h"
#include "daemon/log.h"
#include "daemon/worker.h"

#define PING_EVERY_MS 1000.0

typedef struct cluster_state {
    double last_ping;
    bool reported;               /* the failure has been logged */
} cluster_state;

static cluster *C(worker *w) { return w->d->cluster; }

static void cluster_idle(worker *w)
{
    cluster_state *s = w->ctx;
    const char *why = cluster_failed(C(w));
    if (why) {
        if (!s->reported)
            log_error("cluster: %s; sharded matrices answer 503 until the job is restarted", why);
        s->reported = true;
        return;
    }
    double now = spmv_now_ms();
    if (now - s->last_ping < PING_EVERY_MS)
        return;
    s->last_ping = now;
    spmv_error err = {0};
    if (cluster_ping(C(w), &err) != SPMV_OK && !s->reported) {
        log_error("cluster: %s", err.message);
        s->reported = true;
    }
}

static int cluster_thread_init(worker *w, spmv_error *err)
{
    cluster_state *s = calloc(1, sizeof *s);
    if (!s)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory");
    s->last_ping = spmv_now_ms();
    w->ctx = s;
    return SPMV_OK;
}

/* The last thing the thread does: the other ranks leave their loops. */
static void cluster_thread_fini(worker *w)
{
    matrix **list;
    size_t n;
    if (w->d->store && store_list(w->d->store, &list, &n) == SPMV_OK) { /* rank 0's own shards */
        for (size_t i = 0; i < n; i++)
            if (list[i]->shards && list[i]->shard_worker == w) {
                cluster_unload(C(w), list[i]->shards);
                list[i]->shards = NULL;
            }
        store_list_free(list, n);
    }
    cluster_shutdown(C(w));
    free(w->ctx);
    w->ctx = NULL;
}

typedef struct unload_task {
    task base;
    void *shards;
} unload_task;

static void unload_run(task *t, worker *w) { cluster_unload(C(w), ((unload_task *)t)->shards); }

static void unload_finish(task *t, int status)
{
    if (status != SPMV_OK)
        log_debug("cluster: shards left to the shutdown (worker stopping)");
    free(t);
}

/* The last reference to a sharded matrix went: free its shards on every
 * rank, from this worker's thread (forced past the queue bound). */
static void cluster_matrix_release(worker *w, void *shards)
{
    unload_task *u = calloc(1, sizeof *u);
    if (!u) {
        log_error("cluster: out of memory queueing a free; the shards stay until shutdown");
        return;
    }
    u->base.run = unload_run;
    u->base.finish = unload_finish;
    u->shards = shards;
    if (queue_push(&w->queue, &u->base, true) != SPMV_OK)
        free(u);
}

static const worker_ops cluster_ops;

typedef struct vfree_task {
    task base;
    cluster_vec *v;
} vfree_task;

static void vfree_run(task *t, worker *w) { cluster_vec_free(C(w), ((vfree_task *)t)->v); }

static void vfree_finish(task *t, int status)
{
    if (status != SPMV_OK) /* the worker stopped: the ranks free their slices as they exit */
        cluster_vec_forget(((vfree_task *)t)->v);
    free(t);
}

/* A distributed vector's last reference went: free its slices on every
 * rank, from this worker's thread (forced past the queue bound). */
static void cluster_dist_release(worker *w, cluster_vec *v)
{
    vfree_task *u = calloc(1, sizeof *u);
    if (!u) {
        log_error("cluster: out of memory queueing a vector's free; its slices stay until shutdown");
        return;
    }
    u->base.run = vfree_run;
    u->base.finish = vfree_finish;
    u->v = v;
    if (queue_push(&w->queue, &u->base, true) != SPMV_OK) {
        cluster_vec_forget(v);
        free(u);
    }
}

cluster *worker_cluster_of(worker *w) { return C(w); }
bool worker_is_cluster(const worker *w) { return w && w->ops == &cluster_ops; }

static void cluster_worker_info(worker *w, worker_info *out) { worker_generic_info(w, out); }

static const worker_ops cluster_ops = {
    .kind = "cluster",
    .start = worker_generic_start,
    .submit = worker_generic_submit,
    .stop = worker_generic_stop,
    .info = cluster_worker_info,
    .matrix_release = cluster_matrix_release,
    .dist_release = cluster_dist_release,
    .thread_init = cluster_thread_init,
    .thread_fini = cluster_thread_fini,
    .idle = cluster_idle,
};

worker *worker_cluster_new(struct spmvd *d, size_t queue_depth)
{
    return worker_alloc(d, &cluster_ops, "cluster", -1, queue_depth);
}

int worker_cluster_load(worker *w, matrix *m, bool gpu, bool reload, spmv_error *err)
{
    cluster_matrix *cm = NULL;
    worker_heartbeat(w);
    int rc = reload ? cluster_reload(C(w), m->meta.id, &m->host.csr, gpu, &cm, err)
                    : cluster_load(C(w), m->meta.id, &m->host.csr, gpu, &cm, err);
    worker_heartbeat(w);
    if (rc != SPMV_OK)
        return rc;
    m->shards = cm;
    m->shard_worker = w;
    return SPMV_OK;
}

int worker_cluster_spmv(worker *w, matrix *m, const spmv_kernel *k, const spmv_params *p, const cluster_operands *io,
                        int32_t warmup, int32_t runs, cluster_spmv_stats *st, spmv_error *err)
{
    worker_heartbeat(w);
    int rc = cluster_spmv(C(w), m->shards, k, p, io, warmup, runs, st, err);
    worker_heartbeat(w);
    if (rc == SPMV_OK && w->d->metrics)
        metrics_kernel(w->d->metrics, st->kernel, st->st.mean_ms, st->st.runs);
    return rc;
}
