/* liveness.c — how rank 0 learns, in about a second, that a rank is dead.
 *
 * The Open MPI this runs on (4.1, no ULFM) tells no process that a peer
 * died: with --enable-recovery the job goes on, a shared-memory send to
 * the dead rank completes, a receive from it simply never does, and
 * MPI_ERRORS_RETURN has no error to return. Left to MPI, the only sign of
 * a death is silence, and a request's waits give silence
 * cluster_timeout_ms (30 s), because a rank multiplying a large shard is
 * rightly silent that long. Three cheaper signs are used instead:
 *
 *   - The kernel's word, for the ranks on rank 0's host (one node's GPUs,
 *     CI's CPU ranks): at start every rank tells rank 0 its host, pid and
 *     start time, and rank 0 keeps the ranks whose process it can see as
 *     that very process (same start time in /proc, so another pid
 *     namespace or a reused pid is never mistaken for it). Any wait of
 *     rank 0's that has lasted LOOK_AFTER_MS looks at them every
 *     LOOK_EVERY_MS (comm.c reqs_wait_within): a rank that has exited, or
 *     is a zombie, fails the cluster at once — in the middle of a product
 *     as well as between requests. A fast product never looks.
 *   - The heartbeat, for every rank wherever it runs: an idle rank sits in
 *     its command loop polling MPI (rank.c naps at most 1 ms), so it
 *     answers a ping in well under a millisecond. The cluster worker
 *     pings every rank at each idle tick, four times a second
 *     (daemon/worker_cluster.c), with a deadline of its own,
 *     cluster_heartbeat_ms (1 s): a rank killed, stopped or cut off
 *     between requests fails the cluster within a tick plus that long.
 *
 *   - The pulse, for every rank wherever it runs, busy or not (pulse.c):
 *     rank 0 tells every rank at start, with the ident messages, a UDP
 *     address of its own and a token for the job, and every rank > 0
 *     sends it a datagram every cluster_pulse_ms (200 ms) from a thread
 *     of its own, whatever its MPI thread is doing. The waits that look
 *     at the local ranks look at the pulses too: a rank heard once whose
 *     last pulse is older than cluster_heartbeat_ms (or three periods)
 *     fails the cluster. This is what sees a rank on another host that
 *     dies, stops or is cut off in the middle of a request.
 *
 * What is left to cluster_timeout_ms: a rank alive but stuck in a
 * request (its pulse goes on), and a rank whose pulses never reach rank 0
 * (a firewall; the pulse then never fails it). cluster_local_liveness
 * false (c->o.no_local_liveness) skips the /proc look, for the tests that
 * make the pulse see a death on one host. Until every rank has answered
 * one heartbeat its deadline is cluster_timeout_ms too: a rank still
 * creating its GPU context at start is slow, not dead.
 */
#ifdef SPMV_HAVE_MPI

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster/internal.h"

/* A wait looks at the local ranks once it has lasted this long, then this
 * often: a /proc read each, ~10 µs. */
#define LOOK_AFTER_MS 50.0
#define LOOK_EVERY_MS 50.0

/* What a rank says of its process at start. */
typedef struct ident_msg {
    char host[64];
    int32_t pid;
    int32_t reserved;
    uint64_t start;
} ident_msg;

/* /proc/<pid>/stat's state and start time (field 22, clock ticks since
 * boot); false when there is no such process. The command name, field 2,
 * may hold spaces and parentheses: fields are counted from its last ')'. */
static bool proc_stat(long pid, char *state, uint64_t *start)
{
    char path[64], buf[1024];
    if (pid > 0)
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    else
        snprintf(path, sizeof path, "/proc/self/stat");
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long long st = 0;
    if (!p || sscanf(p + 1, " %c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu", state,
                     &st) != 2)
        return false;
    *start = st;
    return true;
}

/* Rank 0: what every rank said of itself into c->watch. */
static void watch_fill(cluster *c, const ident_msg *all)
{
    for (int p = 1; p < c->size; p++) {
        char state;
        uint64_t start = 0;
        snprintf(c->watch[p].host, sizeof c->watch[p].host, "%.*s", (int)sizeof all[p].host - 1, all[p].host);
        c->watch[p].pid = all[p].pid;
        c->watch[p].start = all[p].start;
        /* the very process: this host, and the start time it gave (not
         * another pid namespace's process that has its number here) */
        c->watch[p].local = all[p].start != 0 && strcmp(c->watch[p].host, c->host) == 0 &&
                            proc_stat(all[p].pid, &state, &start) && start == all[p].start;
    }
}

int cluster_liveness_init(cluster *c, spmv_error *err)
{
    ident_msg me = {.pid = (int32_t)getpid()};
    snprintf(me.host, sizeof me.host, "%s", c->host);
    char state;
    if (!proc_stat(0, &state, &me.start))
        me.start = 0; /* no /proc: only the heartbeat */
    req_list r;
    reqs_init(&r);
    ident_msg *all = NULL;
    pulse_where where = {0};
    int rc = SPMV_OK;
    if (c->rank != 0) { /* its ident out, where to pulse in */
        if ((rc = reqs_send(c, &r, &me, sizeof me, 0, TAG_IDENT, err)) == SPMV_OK &&
            (rc = reqs_recv(c, &r, &where, sizeof where, 0, TAG_PULSE, err)) == SPMV_OK)
            rc = reqs_wait(c, &r, "telling rank 0 this rank's process", err);
        if (rc == SPMV_OK)
            rc = cluster_pulse_start(c, &where, err);
        goto out;
    }
    all = calloc((size_t)c->size, sizeof *all);
    c->watch = calloc((size_t)c->size, sizeof *c->watch);
    if (!all || !c->watch) {
        rc = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for %d ranks", c->size);
        goto out;
    }
    /* a socket that cannot be opened still tells the ranks (port 0: no
     * pulse), so that none waits for the message */
    int prc = cluster_pulse_open(c, &where, err);
    for (int p = 1; p < c->size && rc == SPMV_OK; p++)
        if ((rc = reqs_recv(c, &r, &all[p], sizeof all[p], p, TAG_IDENT, err)) == SPMV_OK)
            rc = reqs_send(c, &r, &where, sizeof where, p, TAG_PULSE, err);
    if (rc == SPMV_OK)
        rc = reqs_wait(c, &r, "learning the ranks' processes", err);
    if (rc == SPMV_OK)
        watch_fill(c, all);
    if (rc == SPMV_OK && prc != SPMV_OK) {
        char why[sizeof err->message];
        snprintf(why, sizeof why, "%s", err->message);
        rc = spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "the pulse (cluster_pulse_ms %d): %s",
                            (int)c->o.pulse_ms, why);
    }
out:
    reqs_free(&r);
    free(all);
    return rc;
}

void cluster_liveness_free(cluster *c)
{
    cluster_pulse_stop(c);
    free(c->watch);
    c->watch = NULL;
}

int cluster_liveness_look(cluster *c, const char *what, spmv_error *err)
{
    if (!c->watch)
        return SPMV_OK;
    for (int p = 1; p < c->size; p++) {
        char state = '?';
        uint64_t start = 0;
        if (!c->watch[p].local || c->o.no_local_liveness)
            continue;
        /* gone, a zombie, or its pid already another process's */
        bool seen = proc_stat(c->watch[p].pid, &state, &start);
        if (!seen || state == 'Z' || state == 'X' || start != c->watch[p].start)
            return cluster_fail(c, err, "%s: rank %d (pid %d on this host) has exited; the cluster is marked failed",
                                what, p, (int)c->watch[p].pid);
    }
    return cluster_pulse_look(c, what, err);
}

bool cluster_liveness_due(const cluster *c, double waited_ms, double *next_ms)
{
    if (!c->watch || waited_ms < LOOK_AFTER_MS || waited_ms < *next_ms)
        return false;
    *next_ms = waited_ms + LOOK_EVERY_MS;
    return true;
}

int cluster_watch(cluster *c, const char *what, double waited_ms, double *next_ms, spmv_error *err)
{
    if (cluster_failed(c))
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "the cluster has failed: %s", c->failed_msg);
    return cluster_liveness_due(c, waited_ms, next_ms) ? cluster_liveness_look(c, what, err) : SPMV_OK;
}

int cluster_heartbeat(cluster *c, spmv_error *err)
{
    if (cluster_failed(c))
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "the cluster has failed: %s", c->failed_msg);
    cmd_reply *rep = cmd_replies(c, err);
    if (!rep)
        return SPMV_ERR_NOMEM;
    bool shorter = c->heard && c->o.heartbeat_ms < c->o.timeout_ms;
    cmd_header h;
    cmd_init(c, &h, CMD_PING, NULL);
    req_list r;
    reqs_init(&r);
    int rc = SPMV_OK;
    for (int p = 1; p < c->size && rc == SPMV_OK; p++)
        if ((rc = cmd_post(c, &r, &h, NULL, p, err)) == SPMV_OK)
            rc = reqs_recv(c, &r, &rep[p], sizeof rep[p], p, TAG_REPLY, err);
    if (rc == SPMV_OK)
        rc = reqs_wait_within(c, &r, "heartbeat", shorter ? c->o.heartbeat_ms : c->o.timeout_ms,
                              shorter ? "cluster_heartbeat_ms" : "cluster_timeout_ms", err);
    reqs_free(&r);
    if (rc == SPMV_OK)
        rc = cmd_check(c, rep, h.seq, err);
    if (rc == SPMV_OK)
        c->heard = true;
    free(rep);
    return rc;
}

#endif /* SPMV_HAVE_MPI */
