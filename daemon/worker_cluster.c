/* worker_cluster.c — rank 0's cluster worker: the one thread that talks MPI.
 *
 * Under mpirun, rank 0 runs the daemon as usual plus this worker. Every
 * collective step (shard a matrix, multiply it, free it) is a task on its
 * queue, exactly as a GPU's work is a task on that GPU's worker, so MPI is
 * called from this thread alone (MPI_THREAD_SERIALIZED) and the other
 * ranks see the commands in the order the tasks run. Between tasks the
 * loop sends the heartbeat (cluster/liveness.c) at every tick, four times
 * a second: a rank that does not answer within cluster_heartbeat_ms (1 s)
 * marks the cluster failed (cluster_failed), so a rank killed, stopped or
 * cut off between requests is seen in about a second rather than
 * cluster_timeout_ms (a rank on this host that exits, sooner: liveness.c;
 * a rank busy in a task is watched by its pulse, cluster/pulse.c, which
 * the task's own waits on this thread look at); /v1/ready then answers 503 and sharded requests fail at once, while the
 * daemon's other matrices, on the CPU and GPU workers, keep being served.
 * The product path pays next to nothing for it: a task that comes while a
 * heartbeat is in flight waits for the answer (idle ranks give it in well
 * under a millisecond), and tasks that follow one another leave no idle
 * tick for one. Stopping the worker (SIGTERM) sends `shutdown` to every
 * rank from this thread before it exits.
 */
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon.h"
#include "daemon/log.h"
#include "daemon/worker.h"

/* Below the worker loop's idle tick (250 ms), so that a heartbeat goes at
 * every tick whatever the tick's jitter. */
#define PING_EVERY_MS 200.0

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
    if (cluster_heartbeat(C(w), &err) != SPMV_OK && !s->reported) {
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

/* Freeing a sharded matrix's shards or a distributed vector's slices on
 * every rank, queued on this worker's thread when the last reference
 * goes (forced past the queue bound). */
typedef struct release_task {
    task base;
    void *shards;                /* a cluster_matrix, or */
    cluster_vec *vec;            /* a distributed vector */
} release_task;

static void release_run(task *t, worker *w)
{
    release_task *r = (release_task *)t;
    if (r->vec)
        cluster_vec_free(C(w), r->vec);
    else
        cluster_unload(C(w), r->shards);
}

/* The worker stopped first: the ranks free theirs as they exit; rank 0's
 * handle of a vector goes now (a matrix's shards go with the shutdown). */
static void release_dropped(release_task *r)
{
    if (r->vec)
        cluster_vec_forget(r->vec);
    else
        log_debug("cluster: shards left to the shutdown (worker stopping)");
}

static void release_finish(task *t, int status)
{
    if (status != SPMV_OK)
        release_dropped((release_task *)t);
    free(t);
}

static void release_queue(worker *w, void *shards, cluster_vec *vec)
{
    release_task *r = calloc(1, sizeof *r);
    if (!r) {
        log_error("cluster: out of memory queueing a free; it stays on the ranks until shutdown");
        return;
    }
    r->base.run = release_run;
    r->base.finish = release_finish;
    r->shards = shards;
    r->vec = vec;
    if (queue_push(&w->queue, &r->base, true) != SPMV_OK) {
        release_dropped(r);
        free(r);
    }
}

static void cluster_matrix_release(worker *w, void *shards) { release_queue(w, shards, NULL); }
static void cluster_dist_release(worker *w, cluster_vec *v) { release_queue(w, NULL, v); }

static const worker_ops cluster_ops;

cluster *worker_cluster_of(worker *w) { return C(w); }
bool worker_is_cluster(const worker *w) { return w && w->ops == &cluster_ops; }

/* The sharded product: every rank's shard with the halo exchange. */
static int cluster_run(worker *w, const worker_run_args *a)
{
    if (!a->io || !a->cst || !a->m->shards)
        return spmv_error_set(a->err, SPMV_ERR_UNAVAILABLE, 0, "the cluster worker runs sharded products only");
    return cluster_spmv(C(w), a->m->shards, a->k, a->p, a->io, a->warmup, a->runs, a->cst, a->err);
}

static const worker_ops cluster_ops = {
    .kind = "cluster",
    WORKER_GENERIC_OPS,
    .matrix_release = cluster_matrix_release,
    .dist_release = cluster_dist_release,
    .run = cluster_run,
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


