/* fuzz_http.c — the in-process spmvd of the network fuzz targets.
 *
 * See fuzz_http.h. The daemon is assembled the way api/main.c does it
 * (store, jobs, metrics, the CPU worker, an upload worker, the HTTP
 * server), without GPUs,
 * signals or the reload; its state directory is a fresh temporary one
 * (under /dev/shm when it exists, so fsync costs nothing). Limits are
 * small: 1 MiB bodies, 4096 rows, 65536 entries, 20 runs, so an input
 * that asks for the maximum stays cheap and the fuzzer keeps its pace.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/server.h"
#include "daemon/daemon.h"
#include "daemon/log.h"
#include "tests/fuzz/fuzz_http.h"
#include "tests/fuzz/fuzz_tmp.h"

static spmvd D;           /* the one daemon of the process */
static int port;
static char matrix_ids[2][MATFILE_ID_LEN + 1];
static char answer_buf[8192];
static api_server *server; /* kept reachable: the daemon lives as long as the process */

static void die(const char *what)
{
    fprintf(stderr, "fuzz_http: %s\n", what);
    abort();
}

static int free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        die("no free port");
    close(fd);
    return ntohs(a.sin_port);
}

static void configure(spmvd_config *c, const char *state_dir)
{
    char listen[64];
    config_defaults(c);
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    free(c->listen);
    free(c->state_dir);
    c->listen = strdup(listen);
    c->state_dir = strdup(state_dir);
    c->threads = 2;
    c->max_upload_bytes = 1 << 20;
    c->max_body_bytes = 1 << 20;
    c->max_rows = 4096;
    c->max_nnz = 65536;
    c->max_runs = 20;
    c->queue_depth = 8;
    c->allow_shm = 1; /* the /v1/shm routes and operands are fuzzed too */
    c->io_buffer_bytes = 64 << 20;
    c->job_retention = 2;
    c->connection_timeout = 10;
    c->max_vectors = 64;               /* fuzzed creates must not fill the host */
    c->max_vector_bytes = 8 << 20;
    c->vector_ttl_s = 2;
    c->max_ops_steps = 64;
    c->max_solve_iterations = 200;
}

static const char *const mtx_general =
    "%%MatrixMarket matrix coordinate real general\n5 4 6\n1 1 1.5\n2 2 -2\n3 4 3\n4 1 0.25\n5 3 7\n5 4 -1\n";
static const char *const mtx_symmetric =
    "%%MatrixMarket matrix coordinate real symmetric\n6 6 5\n1 1 2\n2 1 -1\n3 3 4\n6 2 0.5\n6 6 1\n";

static void make_matrix(int which, const char *text, const char *query)
{
    char head[256];
    const char *ans;
    snprintf(head, sizeof head, "POST /v1/matrices?%s HTTP/1.1\r\nContent-Type: application/octet-stream", query);
    if (fuzz_http_request(head, text, strlen(text), &ans) != 201)
        die(ans);
    const char *id = strstr(ans, "\"id\":\"");
    if (!id)
        die("no id in the upload answer");
    memcpy(matrix_ids[which], id + 6, MATFILE_ID_LEN);
    matrix_ids[which][MATFILE_ID_LEN] = '\0';
}

void fuzz_http_init(void)
{
    static int started;
    static char dir[128];
    spmv_error err = {0};
    if (started)
        return;
    started = 1;
    signal(SIGPIPE, SIG_IGN);
    log_init();
    log_set_level(LOG_LEVEL_ERROR);
    const char *tmp = fuzz_tmp_make("spmvd-fuzz");
    if (!tmp)
        die("mkdtemp");
    snprintf(dir, sizeof dir, "%s", tmp);
    port = free_port();
    configure(&D.cfg, dir);
    D.started_ms = spmv_now_ms();
    spmvd_limits_from_config(&D.limits, &D.cfg);
    spmvd_vlimits_from_config(&D.vlimits, &D.cfg);
    size_t nroutes;
    const char *const *routes = api_route_labels(&nroutes);
    snprintf(D.gpu_reason, sizeof D.gpu_reason, "the fuzzing build has no GPU");
    if (store_open(dir, &D.store, &err) != SPMV_OK)
        die(err.message);
    D.jobs = jobs_new();
    D.vectors = vstore_new();
    D.shm = shm_registry_new(NULL);
    D.iobufs = bufpool_new(&D.limits.io_buffer_bytes, false);
    D.metrics = metrics_new(routes, nroutes);
    D.cpu = worker_cpu_new(&D, (size_t)D.cfg.queue_depth);
    if (!D.jobs || !D.vectors || !D.shm || !D.iobufs || !D.metrics || !D.cpu || D.cpu->ops->start(D.cpu, &err) != SPMV_OK)
        die("cannot start the CPU worker");
    D.loaders[0] = worker_upload_new(&D, 0, (size_t)D.cfg.queue_depth); /* uploads are read and built there */
    if (!D.loaders[0] || D.loaders[0]->ops->start(D.loaders[0], &err) != SPMV_OK)
        die("cannot start the upload worker");
    D.nloaders = 1;
    if (api_server_start(&D, &server, &err) != SPMV_OK)
        die(err.message);
    atomic_store(&D.ready, true);
    make_matrix(0, mtx_general, "name=general&device=cpu");
    make_matrix(1, mtx_symmetric, "name=symmetric&dtype=float32&device=cpu");
}

const char *fuzz_http_matrix(int which) { return matrix_ids[which ? 1 : 0]; }

static int connect_daemon(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    for (int tries = 0; tries < 100; tries++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            die("socket");
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
            return fd;
        close(fd);
        usleep(10000); /* the listen backlog is full for a moment */
    }
    die("cannot connect to the in-process spmvd");
    return -1;
}

static int send_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1; /* the server may close early (413, 400): not an error */
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads the answer until the server closes; keeps the first few KiB. */
static size_t read_answer(int fd)
{
    size_t got = 0;
    char sink[4096];
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int rc = poll(&p, 1, FUZZ_HTTP_TIMEOUT_MS);
        if (rc == 0)
            die("no answer within FUZZ_HTTP_TIMEOUT_MS: the daemon hangs on this input");
        if (rc < 0 && errno == EINTR)
            continue;
        bool room = got < sizeof answer_buf - 1;
        ssize_t n = recv(fd, room ? answer_buf + got : sink, room ? sizeof answer_buf - 1 - got : sizeof sink, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (room)
            got += (size_t)n;
    }
    answer_buf[got] = '\0';
    return got;
}

int fuzz_http_request(const char *head, const void *body, size_t len, const char **answer)
{
    char hdr[512];
    int fd = connect_daemon();
    snprintf(hdr, sizeof hdr, "\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", len);
    if (send_all(fd, head, strlen(head)) == 0 && send_all(fd, hdr, strlen(hdr)) == 0)
        send_all(fd, body, len);
    size_t got = read_answer(fd);
    close(fd);
    *answer = answer_buf;
    int status = 0;
    if (got >= 12 && strncmp(answer_buf, "HTTP/1.", 7) == 0)
        status = atoi(answer_buf + 9);
    return status;
}

void fuzz_http_url_encode(const unsigned char *s, size_t n, int keep_query, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < n && o + 4 < cap; i++) {
        unsigned char c = s[i];
        bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                     c == '.' || c == '_' || c == '~' || c == '/' || (keep_query && (c == '=' || c == '&'));
        if (plain) {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = '\0';
}

void fuzz_http_forget_created(int status, const char *answer)
{
    if (status != 201)
        return;
    const char *loc = strstr(answer, "\r\nLocation: /v1/matrices/");
    if (!loc)
        return;
    char head[128];
    const char *ans;
    snprintf(head, sizeof head, "DELETE /v1/matrices/%.36s HTTP/1.1", loc + 25);
    if (fuzz_http_request(head, "", 0, &ans) != 204)
        die("a matrix the fuzzer stored could not be deleted");
}
