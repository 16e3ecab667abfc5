/* pulse.c — the third sign of life: a datagram every rank sends rank 0
 * every cluster_pulse_ms from a thread of its own (docs/cluster.md, "A
 * dead rank").
 *
 * A rank busy in a request answers no MPI ping, and /proc shows only rank
 * 0's own host, so a rank on another host that dies, stops or is cut off
 * in the middle of a request used to be seen only at cluster_timeout_ms.
 * The pulse needs neither MPI progress nor the host: at start rank 0 binds
 * a UDP socket (cluster_pulse_addr, else every interface, any free port)
 * and tells every rank, with the ident messages (liveness.c), the address
 * to send to and a token drawn for this job; each rank > 0 then runs a
 * thread that sends {rank, sequence, token} every cluster_pulse_ms
 * whatever its MPI thread does, and stops with its process (SIGSTOP
 * stops it too: that is the point). Rank 0's receiving thread keeps each
 * rank's last-seen time; any long wait of rank 0's (comm.c) looks at the
 * ages, and a rank heard once and silent past the bound fails the
 * cluster. Datagrams of another job (another token), of no rank, or of
 * the wrong size are dropped. Plain sockets and pthreads; no MPI call
 * leaves the thread that makes it.
 *
 * The address sent to: cluster_pulse_addr when set (an IPv4 address of
 * rank 0's host, the interface the ranks reach it on: the one MPI uses),
 * else the first address rank 0's host name resolves to that is not a
 * loopback one, else 127.0.0.1 (then only ranks on rank 0's host can
 * pulse; the others are still covered by the heartbeat and the timeout).
 * A rank that never pulses is never failed by the pulse.
 */
#ifdef SPMV_HAVE_MPI

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cluster/internal.h"

#define PULSE_MAGIC 0x50554c53u /* "PULS" */
#define SLICE_MS 50             /* a thread sees its stop flag at least this often */

/* One datagram, little-endian as every rank of a job is. */
typedef struct pulse_msg {
    uint32_t magic;
    int32_t rank;
    uint64_t token;
    uint64_t seq;
} pulse_msg;

struct cluster_pulse {
    int fd;
    pthread_t thread;
    bool running;
    _Atomic bool stop;
    pulse_where where;
    int rank, size;
    _Atomic int64_t *last_us;     /* rank 0: each rank's last pulse (spmv_now_ms * 1000), 0: never */
    _Atomic int64_t *count;       /* rank 0: pulses heard from each rank */
    void (*log)(int level, const char *msg);
};

static void pulse_say(const cluster_pulse *pl, int level, const char *msg)
{
    if (pl->log)
        pl->log(level, msg);
    else
        fprintf(stderr, "spmvd cluster: %s\n", msg);
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static uint64_t draw_token(void)
{
    uint64_t t = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, &t, sizeof t) != (ssize_t)sizeof t)
            t = 0;
        close(fd);
    }
    if (!t) /* no urandom: the clock and the pid still tell jobs apart */
        t = ((uint64_t)(spmv_now_ms() * 1000.0) << 20) ^ (uint64_t)getpid() ^ 0x9e3779b97f4a7c15ull;
    return t;
}

/* The first IPv4 address of this host's name that is not a loopback one
 * (network order), or 0. */
static uint32_t host_address(void)
{
    char name[256];
    if (gethostname(name, sizeof name) != 0)
        return 0;
    name[sizeof name - 1] = '\0';
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *res = NULL;
    if (getaddrinfo(name, NULL, &hints, &res) != 0)
        return 0;
    uint32_t found = 0;
    for (struct addrinfo *a = res; a && !found; a = a->ai_next) {
        uint32_t ip = ((const struct sockaddr_in *)(const void *)a->ai_addr)->sin_addr.s_addr;
        if ((ntohl(ip) >> 24) != 127)
            found = ip;
    }
    freeaddrinfo(res);
    return found;
}

static void *receive_loop(void *arg)
{
    cluster_pulse *pl = arg;
    while (!atomic_load(&pl->stop)) {
        struct pollfd pf = {.fd = pl->fd, .events = POLLIN};
        if (poll(&pf, 1, SLICE_MS) <= 0)
            continue;
        pulse_msg m;
        for (;;) {
            ssize_t n = recv(pl->fd, &m, sizeof m, MSG_DONTWAIT);
            if (n < 0)
                break;
            if (n != (ssize_t)sizeof m || m.magic != PULSE_MAGIC || m.token != pl->where.token || m.rank < 1 ||
                m.rank >= pl->size)
                continue; /* a stray: another job, or not a pulse */
            atomic_store(&pl->last_us[m.rank], (int64_t)(spmv_now_ms() * 1000.0));
            atomic_fetch_add(&pl->count[m.rank], 1);
        }
    }
    return NULL;
}

static void *send_loop(void *arg)
{
    cluster_pulse *pl = arg;
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(pl->where.port)};
    to.sin_addr.s_addr = pl->where.ip;
    pulse_msg m = {.magic = PULSE_MAGIC, .rank = pl->rank, .token = pl->where.token};
    bool told = false;
    while (!atomic_load(&pl->stop)) {
        m.seq++;
        if (sendto(pl->fd, &m, sizeof m, 0, (const struct sockaddr *)&to, sizeof to) < 0 && !told) {
            char msg[256], ip[INET_ADDRSTRLEN] = "?";
            int e = errno;
            inet_ntop(AF_INET, &to.sin_addr, ip, sizeof ip);
            snprintf(msg, sizeof msg, "rank %d: a pulse to %s:%u failed (%s); rank 0 sees this rank by the "
                     "heartbeat and cluster_timeout_ms only", pl->rank, ip, pl->where.port, strerror(e));
            pulse_say(pl, 1, msg);
            told = true;
        }
        for (int32_t left = pl->where.pulse_ms; left > 0 && !atomic_load(&pl->stop); left -= SLICE_MS)
            nap_ms(left < SLICE_MS ? left : SLICE_MS);
    }
    return NULL;
}

static cluster_pulse *pulse_new(const cluster *c)
{
    cluster_pulse *pl = calloc(1, sizeof *pl);
    if (!pl)
        return NULL;
    pl->fd = -1;
    pl->rank = c->rank;
    pl->size = c->size;
    pl->log = c->o.log;
    return pl;
}

int cluster_pulse_open(cluster *c, pulse_where *w, spmv_error *err)
{
    memset(w, 0, sizeof *w);
    if (c->o.pulse_ms <= 0 || c->size < 2)
        return SPMV_OK;
    uint32_t ip = 0;
    const char *named = c->o.pulse_addr && *c->o.pulse_addr && strcmp(c->o.pulse_addr, "auto") != 0
                            ? c->o.pulse_addr : NULL;
    if (named && inet_pton(AF_INET, named, &ip) != 1)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "cluster_pulse_addr \"%s\" is not an IPv4 address", named);
    cluster_pulse *pl = pulse_new(c);
    if (!pl)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for the pulse");
    pl->last_us = calloc((size_t)c->size, sizeof *pl->last_us);
    pl->count = calloc((size_t)c->size, sizeof *pl->count);
    pl->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in at = {.sin_family = AF_INET, .sin_addr.s_addr = named ? ip : htonl(INADDR_ANY)};
    socklen_t len = sizeof at;
    int rc = SPMV_OK;
    if (!pl->last_us || !pl->count)
        rc = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for the pulse");
    else if (pl->fd < 0 || bind(pl->fd, (struct sockaddr *)&at, sizeof at) != 0 ||
             getsockname(pl->fd, (struct sockaddr *)&at, &len) != 0)
        rc = spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "the pulse's UDP socket on %s: %s",
                            named ? named : "every interface", strerror(errno));
    if (rc == SPMV_OK) {
        pl->where = (pulse_where){.ip = named ? ip : host_address(), .port = ntohs(at.sin_port),
                                  .token = draw_token(), .pulse_ms = (int32_t)c->o.pulse_ms};
        if (!pl->where.ip)
            pl->where.ip = htonl(INADDR_LOOPBACK);
        if (pthread_create(&pl->thread, NULL, receive_loop, pl) != 0)
            rc = spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "no thread for the pulse: %s", strerror(errno));
        pl->running = rc == SPMV_OK;
    }
    c->pulse = pl;
    if (rc != SPMV_OK)
        return rc;
    *w = pl->where;
    char msg[160], text[INET_ADDRSTRLEN] = "?";
    struct in_addr a = {.s_addr = w->ip};
    inet_ntop(AF_INET, &a, text, sizeof text);
    snprintf(msg, sizeof msg, "the ranks pulse to %s:%u every %d ms", text, w->port, (int)w->pulse_ms);
    pulse_say(pl, 2, msg);
    return SPMV_OK;
}

int cluster_pulse_start(cluster *c, const pulse_where *w, spmv_error *err)
{
    if (!w->port || w->pulse_ms <= 0)
        return SPMV_OK; /* rank 0 runs no pulse */
    cluster_pulse *pl = pulse_new(c);
    if (!pl)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for the pulse");
    pl->where = *w;
    pl->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    c->pulse = pl;
    if (pl->fd < 0)
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "the pulse's UDP socket: %s", strerror(errno));
    if (pthread_create(&pl->thread, NULL, send_loop, pl) != 0)
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "no thread for the pulse: %s", strerror(errno));
    pl->running = true;
    return SPMV_OK;
}

void cluster_pulse_stop(cluster *c)
{
    cluster_pulse *pl = c->pulse;
    if (!pl)
        return;
    atomic_store(&pl->stop, true);
    if (pl->running)
        pthread_join(pl->thread, NULL);
    if (pl->fd >= 0)
        close(pl->fd);
    free(pl->last_us);
    free(pl->count);
    free(pl);
    c->pulse = NULL;
}

/* How long a rank may be silent: cluster_heartbeat_ms, or three pulses
 * where they are further apart. */
static double pulse_bound_ms(const cluster *c)
{
    double three = 3.0 * c->pulse->where.pulse_ms;
    return c->o.heartbeat_ms > three ? c->o.heartbeat_ms : three;
}

int cluster_pulse_look(cluster *c, const char *what, spmv_error *err)
{
    if (!c->pulse || !c->pulse->last_us)
        return SPMV_OK;
    double now = spmv_now_ms(), bound = pulse_bound_ms(c);
    for (int p = 1; p < c->size; p++) {
        int64_t last = atomic_load(&c->pulse->last_us[p]);
        double age = now - (double)last / 1000.0;
        if (last > 0 && age > bound)
            return cluster_fail(c, err, "%s: rank %d (on %s) has sent no pulse for %.0f ms (cluster_pulse_ms %d, "
                                "bound %.0f ms: cluster_heartbeat_ms); the cluster is marked failed", what, p,
                                c->watch ? c->watch[p].host : "?", age, (int)c->pulse->where.pulse_ms, bound);
    }
    return SPMV_OK;
}

int cluster_pulse_heard(const cluster *c, int rank, double *age_ms, int64_t *count)
{
    *age_ms = -1;
    *count = 0;
    if (!c || c->rank != 0 || !c->pulse || !c->pulse->last_us || rank < 1 || rank >= c->size)
        return -1;
    int64_t last = atomic_load(&c->pulse->last_us[rank]);
    *count = atomic_load(&c->pulse->count[rank]);
    if (last > 0)
        *age_ms = spmv_now_ms() - (double)last / 1000.0;
    return 0;
}

#endif /* SPMV_HAVE_MPI */
