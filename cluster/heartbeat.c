/* heartbeat.c — rank 0 tells a dead rank from an idle one in about a second.
 *
 * The Open MPI this runs on (4.1, no ULFM) does not tell a process that a
 * peer died: with --enable-recovery the job goes on, a shared-memory send
 * to the dead rank completes, and a receive from it simply never does
 * (MPI_ERRORS_RETURN returns no error to poll). So the only sign of a
 * death is silence, and the command waits give silence cluster_timeout_ms
 * (30 s), because a rank multiplying a large shard is rightly silent that
 * long. An idle rank is not: it sits in its command loop polling MPI
 * (rank.c naps at most 1 ms), so it answers a ping in well under a
 * millisecond. The heartbeat is that ping with a deadline of its own,
 * cluster_heartbeat_ms (1 s by default), sent by the cluster worker
 * between tasks several times a second (daemon/worker_cluster.c): a rank
 * killed or stopped between requests marks the cluster failed within a
 * ping interval plus cluster_heartbeat_ms, and /v1/ready and every later
 * sharded request answer 503 from then on.
 *
 * The trade-off: the heartbeat only runs while no command is in flight
 * (pings are commands, ordered with the others on one thread), so the
 * product path pays nothing for it, and a rank that dies in the middle of
 * a command is still seen by that command's cluster_timeout_ms. Until
 * every rank has answered once the deadline is cluster_timeout_ms too: a
 * rank still creating its GPU context at start is slow, not dead.
 */
#ifdef SPMV_HAVE_MPI

#include <stdlib.h>

#include "cluster/internal.h"

int cluster_heartbeat(cluster *c, spmv_error *err)
{
    if (cluster_failed(c))
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "the cluster has failed: %s", c->failed_msg);
    cmd_reply *rep = cmd_replies(c, err);
    if (!rep)
        return SPMV_ERR_NOMEM;
    bool heard = c->heard;
    double limit = heard && c->o.heartbeat_ms < c->o.timeout_ms ? c->o.heartbeat_ms : c->o.timeout_ms;
    const char *key = heard && c->o.heartbeat_ms < c->o.timeout_ms ? "cluster_heartbeat_ms" : "cluster_timeout_ms";
    cmd_header h;
    cmd_init(c, &h, CMD_PING, NULL);
    req_list r;
    reqs_init(&r);
    int rc = SPMV_OK;
    for (int p = 1; p < c->size && rc == SPMV_OK; p++)
        if ((rc = cmd_post(c, &r, &h, NULL, p, err)) == SPMV_OK)
            rc = reqs_recv(c, &r, &rep[p], sizeof rep[p], p, TAG_REPLY, err);
    if (rc == SPMV_OK)
        rc = reqs_wait_within(c, &r, "heartbeat", limit, key, err);
    reqs_free(&r);
    if (rc == SPMV_OK)
        rc = cmd_check(c, rep, h.seq, err);
    if (rc == SPMV_OK)
        c->heard = true;
    free(rep);
    return rc;
}

#endif /* SPMV_HAVE_MPI */
