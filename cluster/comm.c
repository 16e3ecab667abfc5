/* comm.c — the MPI job and its deadline-bounded transport.
 *
 * Start and end of the job (MPI_Init_thread, MPI_Finalize), and the one
 * way this room waits for MPI: operations are posted non-blocking into a
 * request list and reqs_wait polls MPI_Testall until all are done or
 * cluster_timeout_ms has passed (rank 0's heartbeat waits less), or, on
 * rank 0, a rank on its host has exited or a rank's pulse has fallen
 * silent (liveness.c, pulse.c: MPI itself never says). A blocking MPI call, or a collective,
 * would wait for a dead rank forever; a poll can give up. Giving up
 * cancels the receives still open (so no late message lands in memory the
 * caller frees) and marks the cluster failed: after a lost message no
 * rank's view of the protocol can be trusted, so nothing more is sent but
 * `shutdown`. The communicator returns errors instead of aborting the job
 * (MPI_ERRORS_RETURN): a dead peer must not take rank 0, and with it the
 * daemon's other matrices, down.
 *
 * Polling sleeps between tests, 20 µs growing to 1 ms, so idle ranks on an
 * oversubscribed host leave the cores to the ones computing.
 */
#ifdef SPMV_HAVE_MPI

#include <limits.h>
#include <stdarg.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster/internal.h"

#define PIECE_BYTES ((size_t)1 << 30)

int cluster_fail(cluster *c, spmv_error *err, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!atomic_load(&c->failed)) {
        snprintf(c->failed_msg, sizeof c->failed_msg, "%s", msg);
        atomic_store(&c->failed, true);
    }
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", msg);
}

const char *cluster_failed(cluster *c) { return c && atomic_load(&c->failed) ? c->failed_msg : NULL; }

int cluster_init(int *argc, char ***argv, const cluster_options *o, cluster **out, spmv_error *err)
{
    *out = NULL;
    int provided = 0;
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS)
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "MPI_Init_thread failed (error %d)", rc);
    if (provided < MPI_THREAD_SERIALIZED) {
        MPI_Finalize();
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0,
                              "this MPI library gives thread level %d; spmvd needs MPI_THREAD_SERIALIZED (%d): rank "
                              "0 calls MPI from its cluster worker thread", provided, MPI_THREAD_SERIALIZED);
    }
    cluster *c = calloc(1, sizeof *c);
    if (!c) {
        MPI_Finalize();
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory");
    }
    c->o = *o;
    if (c->o.timeout_ms <= 0)
        c->o.timeout_ms = 30000;
    if (c->o.heartbeat_ms <= 0)
        c->o.heartbeat_ms = 1000;
    MPI_Comm_dup(MPI_COMM_WORLD, &c->comm);
    MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->comm, &c->rank);
    MPI_Comm_size(c->comm, &c->size);
    int len = 0;
    char name[MPI_MAX_PROCESSOR_NAME];
    if (MPI_Get_processor_name(name, &len) == MPI_SUCCESS)
        snprintf(c->host, sizeof c->host, "%.*s", len, name);
    c->gpu_index = -1;
    if ((rc = cluster_liveness_init(c, err)) != SPMV_OK) {
        cluster_liveness_free(c);
        free(c);
        MPI_Finalize();
        return rc;
    }
    *out = c;
    return SPMV_OK;
}

int cluster_rank(const cluster *c) { return c ? c->rank : 0; }
int cluster_size(const cluster *c) { return c ? c->size : 1; }
const char *cluster_host(const cluster *c) { return c ? c->host : ""; }

void cluster_finish(cluster *c)
{
    if (!c)
        return;
    bool healthy = !atomic_load(&c->failed);
    cluster_vec_table_free(c);
    for (local_entry *e = c->table, *next; e; e = next) {
        next = e->next;
        cluster_local_free(c, e->l);
        free(e);
    }
    spmv_gpu_allsum_free(c->nccl, c->allsum);
    spmv_gpu_comm_free(c->nccl, !healthy);
    spmv_gpu_ctx_free(c->gpu);
    cluster_liveness_free(c);
    if (healthy) {
        MPI_Comm_free(&c->comm);
        MPI_Finalize();
    }
    /* failed: MPI_Finalize would wait for the dead rank; the process
     * exits without it and mpirun reports that */
    free(c);
}

/* ------------------------------------------------------------ requests */

void reqs_init(req_list *r) { memset(r, 0, sizeof *r); }

void reqs_free(req_list *r)
{
    free(r->req);
    free(r->peer);
    memset(r, 0, sizeof *r);
}

static int reqs_grow(req_list *r, spmv_error *err)
{
    if (r->n < r->cap)
        return SPMV_OK;
    int cap = r->cap ? 2 * r->cap : 16;
    MPI_Request *req = realloc(r->req, (size_t)cap * sizeof *req);
    if (req)
        r->req = req;
    int *peer = req ? realloc(r->peer, (size_t)cap * sizeof *peer) : NULL;
    if (peer)
        r->peer = peer;
    if (!req || !peer)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for MPI requests");
    r->cap = cap;
    return SPMV_OK;
}

static int reqs_post(cluster *c, req_list *r, bool send, void *buf, size_t len, int peer, int tag, spmv_error *err)
{
    size_t at = 0;
    do { /* an empty message too: the receiver counts on one */
        size_t n = len - at < PIECE_BYTES ? len - at : PIECE_BYTES;
        int rc = reqs_grow(r, err);
        if (rc != SPMV_OK)
            return rc;
        int mrc = send ? MPI_Isend((char *)buf + at, (int)n, MPI_BYTE, peer, tag, c->comm, &r->req[r->n])
                       : MPI_Irecv((char *)buf + at, (int)n, MPI_BYTE, peer, tag, c->comm, &r->req[r->n]);
        if (mrc != MPI_SUCCESS)
            return cluster_fail(c, err, "MPI_%s of %zu bytes %s rank %d failed (error %d)", send ? "Isend" : "Irecv",
                                n, send ? "to" : "from", peer, mrc);
        r->peer[r->n++] = peer;
        at += n;
    } while (at < len);
    return SPMV_OK;
}

int reqs_send(cluster *c, req_list *r, const void *buf, size_t len, int peer, int tag, spmv_error *err)
{
    return reqs_post(c, r, true, (void *)buf, len, peer, tag, err);
}

int reqs_recv(cluster *c, req_list *r, void *buf, size_t len, int peer, int tag, spmv_error *err)
{
    return reqs_post(c, r, false, buf, len, peer, tag, err);
}

static void nap(long ns)
{
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

/* How long a wait polls MPI without sleeping (reqs_wait). */
#define YIELD_MS 2000.0

int reqs_wait(cluster *c, req_list *r, const char *what, spmv_error *err)
{
    return reqs_wait_within(c, r, what, c->o.timeout_ms, "cluster_timeout_ms", err);
}

int reqs_wait_within(cluster *c, req_list *r, const char *what, double timeout_ms, const char *key, spmv_error *err)
{
    double start = spmv_now_ms(), deadline = start + timeout_ms, look = 0;
    long sleep_ns = 20000;
    int rc = SPMV_OK;
    for (long polls = 0;; polls++) {
        int done = 0;
        int mrc = r->n ? MPI_Testall(r->n, r->req, &done, MPI_STATUSES_IGNORE) : (done = 1, MPI_SUCCESS);
        if (mrc != MPI_SUCCESS) {
            rc = cluster_fail(c, err, "%s: MPI reported error %d (a rank is gone?)", what, mrc);
            break;
        }
        if (done)
            break;
        /* a long wait: has a rank on this host exited, or a pulse stopped? (liveness.c) */
        if (polls > 200 && cluster_liveness_due(c, spmv_now_ms() - start, &look) &&
            (rc = cluster_liveness_look(c, what, err)) != SPMV_OK)
            break;
        if (spmv_now_ms() > deadline) {
            char who[128] = "";
            size_t used = 0;
            int listed[16], nlisted = 0;
            for (int i = 0; i < r->n && nlisted < 16; i++) {
                int flag = 0, seen = 0; /* MPI_Test retires the done ones; the rest name their rank, once */
                if (r->req[i] == MPI_REQUEST_NULL || MPI_Test(&r->req[i], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS ||
                    flag)
                    continue;
                for (int j = 0; j < nlisted; j++)
                    seen |= listed[j] == r->peer[i];
                if (seen)
                    continue;
                listed[nlisted++] = r->peer[i];
                used += (size_t)snprintf(who + used, sizeof who - used, "%s%d", used ? ", " : "", r->peer[i]);
            }
            rc = cluster_fail(c, err, "%s: rank %s did not answer within %.0f ms (%s); the cluster is marked failed",
                              what, who, timeout_ms, key);
            break;
        }
        /* MPI moves a large message in fragments, and only while it is
         * called: where ranks cannot copy from each other's memory in one
         * go (Open MPI's vader without CMA, as in containers) a nap between
         * polls is a nap per fragment (16 MB took 235 ms with naps growing
         * to 1 ms, 3 ms without). So the first YIELD_MS only yield the
         * core (to other ranks on it); past that, a long wait is a peer
         * that is slow or gone, and naps keep it from holding a core. */
        if (polls > 200 && spmv_now_ms() - start < YIELD_MS) {
            sched_yield();
        } else if (polls > 200) {
            nap(sleep_ns);
            if (sleep_ns < 1000000)
                sleep_ns *= 2;
        }
    }
    if (rc != SPMV_OK) { /* nothing may land in the caller's buffers later */
        for (int i = 0; i < r->n; i++)
            if (r->req[i] != MPI_REQUEST_NULL) {
                MPI_Cancel(&r->req[i]);
                MPI_Request_free(&r->req[i]);
            }
    }
    r->n = 0;
    return rc;
}

#endif /* SPMV_HAVE_MPI */
