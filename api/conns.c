/* conns.c — deadlines for slow clients: the whole header, a body's pace.
 *
 * libmicrohttpd's own time-out (connection_timeout) is an idle time-out:
 * a client that sends one byte every few seconds is never idle, and one
 * such connection per slot starves everyone else. So every connection is
 * watched from its opening (MHD_OPTION_NOTIFY_CONNECTION) through three
 * phases the access handler reports:
 *
 *   header   from the opening, or from the previous answer on a kept-alive
 *            connection, until the request's headers are in: at most
 *            header_timeout_s;
 *   body     from the headers to the body's end: once body_timeout_s has
 *            passed, the bytes received must average body_min_rate a
 *            second;
 *   busy     the request is being answered (or waits for its task): no
 *            deadline of ours, MHD's idle time-out still applies.
 *
 * A thread looks at every watched connection a few times a second and
 * shuts down the socket of one past its deadline; MHD then sees the
 * connection end and closes it as any other. The socket is only touched
 * under the list's lock, and MHD tells of a connection's end (CLOSED,
 * which takes the lock to unlink it) before it closes the descriptor, so
 * a descriptor is never shut down after it was reused.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "api/conns.h"
#include "daemon/log.h"
#include "spmv.h"

#define REAP_EVERY_MS 100

enum { PHASE_HEADER, PHASE_BODY, PHASE_BUSY };

struct conn_watch {
    conn_watch *prev, *next;
    int fd;
    char peer[64];
    _Atomic int phase;
    _Atomic long long since_ms;      /* the phase's start */
    _Atomic unsigned long long bytes; /* of the body so far */
    bool cut;
};

struct conn_watcher {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    conn_watch *head;
    bool stop;
    pthread_t thread;
    bool started;
    int64_t header_ms, body_ms, min_rate;
};

static long long now_ms(void) { return (long long)spmv_now_ms(); }

static void peer_name(struct MHD_Connection *conn, char *out, size_t len)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    snprintf(out, len, "?");
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out, (socklen_t)len);
    else if (sa && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, out, (socklen_t)len);
}

static void watch_open(conn_watcher *cw, struct MHD_Connection *conn, void **ctx)
{
    conn_watch *w = calloc(1, sizeof *w);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    *ctx = w;
    if (!w)
        return; /* unwatched: MHD's idle time-out still applies */
    w->fd = ci ? ci->connect_fd : -1;
    peer_name(conn, w->peer, sizeof w->peer);
    atomic_init(&w->phase, PHASE_HEADER);
    atomic_init(&w->since_ms, now_ms());
    atomic_init(&w->bytes, 0);
    pthread_mutex_lock(&cw->lock);
    w->next = cw->head;
    if (cw->head)
        cw->head->prev = w;
    cw->head = w;
    pthread_mutex_unlock(&cw->lock);
}

static void watch_close(conn_watcher *cw, conn_watch *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&cw->lock);
    if (w->prev)
        w->prev->next = w->next;
    else
        cw->head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    pthread_mutex_unlock(&cw->lock);
    free(w);
}

void conn_watcher_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                         enum MHD_ConnectionNotificationCode code)
{
    conn_watcher *cw = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        watch_open(cw, conn, socket_context);
    else {
        watch_close(cw, *socket_context);
        *socket_context = NULL;
    }
}

conn_watch *conn_watch_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void set_phase(conn_watch *w, int phase)
{
    if (!w)
        return;
    atomic_store(&w->bytes, 0);
    atomic_store(&w->since_ms, now_ms());
    atomic_store(&w->phase, phase);
}

void conn_watch_headers_in(conn_watch *w, bool body) { set_phase(w, body ? PHASE_BODY : PHASE_BUSY); }
void conn_watch_body_in(conn_watch *w) { set_phase(w, PHASE_BUSY); }
void conn_watch_answered(conn_watch *w) { set_phase(w, PHASE_HEADER); }

void conn_watch_bytes(conn_watch *w, size_t n)
{
    if (w)
        atomic_fetch_add(&w->bytes, (unsigned long long)n);
}

enum { CUT_NONE, CUT_HEADER, CUT_BODY };

/* Whether w is past its deadline, and which (CUT_*); a body's pace in *rate. */
static int overdue(conn_watcher *cw, conn_watch *w, long long now, double *rate)
{
    long long since = atomic_load(&w->since_ms);
    int phase = atomic_load(&w->phase);
    if (phase == PHASE_HEADER && now - since > cw->header_ms)
        return CUT_HEADER;
    if (phase != PHASE_BODY || cw->min_rate <= 0 || now - since <= cw->body_ms)
        return CUT_NONE;
    double secs = (double)(now - since) / 1000.0;
    *rate = (double)atomic_load(&w->bytes) / secs;
    return *rate < (double)cw->min_rate ? CUT_BODY : CUT_NONE;
}

/* One sweep's cuts, counted by kind, logged once the lock is released: a
 * hundred slow sockets cut at once make two lines, not two hundred. */
typedef struct cut_tally {
    unsigned n[3];
    char peer[3][64];
    double worst_rate;
} cut_tally;

static void log_cuts(const conn_watcher *cw, const cut_tally *t)
{
    if (t->n[CUT_HEADER])
        log_warn("closed %u connection%s (%s%s) whose request line and headers took over %lld s (header_timeout_s)",
                 t->n[CUT_HEADER], t->n[CUT_HEADER] == 1 ? "" : "s", t->n[CUT_HEADER] == 1 ? "from " : "e.g. from ",
                 t->peer[CUT_HEADER], (long long)(cw->header_ms / 1000));
    if (t->n[CUT_BODY])
        log_warn("closed %u connection%s (%s%s) whose body came under body_min_rate %lld bytes a second after %lld s "
                 "(the slowest at %.0f)", t->n[CUT_BODY], t->n[CUT_BODY] == 1 ? "" : "s",
                 t->n[CUT_BODY] == 1 ? "from " : "e.g. from ", t->peer[CUT_BODY], (long long)cw->min_rate,
                 (long long)(cw->body_ms / 1000), t->worst_rate);
}

static void reap(conn_watcher *cw)
{
    long long now = now_ms();
    cut_tally t = {.worst_rate = 1e300};
    pthread_mutex_lock(&cw->lock);
    for (conn_watch *w = cw->head; w; w = w->next) {
        double rate = 0;
        int kind = w->cut || w->fd < 0 ? CUT_NONE : overdue(cw, w, now, &rate);
        if (kind == CUT_NONE)
            continue;
        w->cut = true;
        shutdown(w->fd, SHUT_RDWR); /* under the lock: MHD closes the fd only after CLOSED unlinked w */
        if (t.n[kind]++ == 0)
            snprintf(t.peer[kind], sizeof t.peer[kind], "%s", w->peer);
        if (kind == CUT_BODY && rate < t.worst_rate)
            t.worst_rate = rate;
    }
    pthread_mutex_unlock(&cw->lock);
    log_cuts(cw, &t);
}

static void *reaper_main(void *arg)
{
    conn_watcher *cw = arg;
    pthread_mutex_lock(&cw->lock);
    while (!cw->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += REAP_EVERY_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&cw->wake, &cw->lock, &ts);
        if (cw->stop)
            break;
        pthread_mutex_unlock(&cw->lock);
        reap(cw);
        pthread_mutex_lock(&cw->lock);
    }
    pthread_mutex_unlock(&cw->lock);
    return NULL;
}

conn_watcher *conn_watcher_new(const spmvd_config *c)
{
    conn_watcher *cw = calloc(1, sizeof *cw);
    if (!cw)
        return NULL;
    pthread_mutex_init(&cw->lock, NULL);
    pthread_cond_init(&cw->wake, NULL);
    cw->header_ms = c->header_timeout_s * 1000;
    cw->body_ms = c->body_timeout_s * 1000;
    cw->min_rate = c->body_min_rate;
    if (pthread_create(&cw->thread, NULL, reaper_main, cw) != 0) {
        conn_watcher_free(cw);
        return NULL;
    }
    cw->started = true;
    return cw;
}

void conn_watcher_halt(conn_watcher *cw)
{
    if (!cw || !cw->started)
        return;
    pthread_mutex_lock(&cw->lock);
    cw->stop = true;
    pthread_cond_signal(&cw->wake);
    pthread_mutex_unlock(&cw->lock);
    pthread_join(cw->thread, NULL);
    cw->started = false;
}

void conn_watcher_free(conn_watcher *cw)
{
    if (!cw)
        return;
    conn_watcher_halt(cw);
    while (cw->head) /* connections MHD never told the end of (it was stopped first) */
        watch_close(cw, cw->head);
    pthread_cond_destroy(&cw->wake);
    pthread_mutex_destroy(&cw->lock);
    free(cw);
}

