/* test_client.c — libspmvclient against a server that lies.
 *
 * The end-to-end suite (tests/e2e/clients.sh) runs the library against the
 * real daemon, which answers correctly. This suite checks what a correct
 * daemon never provokes: that the library refuses answers that do not fit
 * (sizes out of range, y longer or shorter than asked, a missing stats
 * header, JSON that is not JSON, job progress outside 0..1), maps each HTTP
 * error status to its spmv_client_status, keeps the server's message, and
 * refuses bad arguments before sending anything; and that the requests
 * of the 0.2 calls (vectors, resident spmv, ops, solve, job cancel) and
 * the 0.3 ones (shared-memory regions, spmv with operands in them) and
 * the 0.4 ones (binary solves in the matrix's dtype, long polls of
 * job_wait, the URL from $SPMVD_URL or $SPMV_URL) have the URL, query and
 * body the contract (docs/api.md) gives. The "server" is a thread on a
 * loopback port that reads one request and writes back a canned answer,
 * held back a while if asked (as a long poll is); the test queues the
 * answers before each call and can read the request lines the library
 * sent.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clients/spmvclient.h"

/* ---------------------------------------------------------- canned server */

/* Answers are queued: each request takes the first, and the last one
 * stays for every request after it. A delay holds the answer back, as a
 * long poll does. */
#define MAX_ANSWERS 4
typedef struct canned_answer {
    char text[1 << 16];
    size_t len;
    int delay_ms;
} canned_answer;

typedef struct canned {
    int listen_fd;
    int port;
    pthread_t thread;
    pthread_mutex_t lock;
    canned_answer answers[MAX_ANSWERS];
    int nanswers;
    char request[1 << 16];    /* the last request's head and body */
    size_t request_len;
    char lines[8192];         /* every request line since the last answer() */
} canned;

static size_t content_length(const char *head)
{
    const char *p = strcasestr(head, "\r\ncontent-length:");
    return p ? (size_t)strtoull(p + 17, NULL, 10) : 0;
}

/* Reads one request (head, then Content-Length bytes of body). */
static void read_request(canned *s, int fd)
{
    size_t len = 0, want = 0;
    char *end = NULL;
    while (len < sizeof s->request - 1) {
        ssize_t n = read(fd, s->request + len, sizeof s->request - 1 - len);
        if (n <= 0) break;
        len += (size_t)n;
        s->request[len] = '\0';
        if (!end && (end = strstr(s->request, "\r\n\r\n")))
            want = (size_t)(end + 4 - s->request) + content_length(s->request);
        if (end && len >= want) break;
    }
    s->request_len = len;
}

static void *serve(void *arg)
{
    canned *s = arg;
    for (;;) {
        int fd = accept(s->listen_fd, NULL, NULL);
        if (fd < 0) return NULL;
        pthread_mutex_lock(&s->lock);
        read_request(s, fd);
        size_t line = strcspn(s->request, "\r"), used = strlen(s->lines);
        snprintf(s->lines + used, sizeof s->lines - used, "%.*s\n", (int)line, s->request);
        canned_answer *a = &s->answers[0];
        if (a->delay_ms) usleep((useconds_t)a->delay_ms * 1000);
        size_t off = 0;
        while (off < a->len) {
            ssize_t n = write(fd, a->text + off, a->len - off);
            if (n <= 0) break;
            off += (size_t)n;
        }
        if (s->nanswers > 1)
            memmove(&s->answers[0], &s->answers[1], (size_t)--s->nanswers * sizeof *a);
        pthread_mutex_unlock(&s->lock);
        close(fd);
    }
}

/* Queues an answer, held back delay_ms: status line, extra headers, body
 * of len bytes. */
static void queue_answer(canned *s, int delay_ms, const char *status, const char *headers, const void *body,
                         size_t len)
{
    pthread_mutex_lock(&s->lock);
    assert_true(s->nanswers < MAX_ANSWERS);
    canned_answer *a = &s->answers[s->nanswers++];
    int n = snprintf(a->text, sizeof a->text, "HTTP/1.1 %s\r\nConnection: close\r\nContent-Length: %zu\r\n%s\r\n",
                     status, len, headers ? headers : "");
    assert_true(n > 0 && (size_t)n + len < sizeof a->text);
    memcpy(a->text + n, body, len);
    a->len = (size_t)n + len;
    a->delay_ms = delay_ms;
    pthread_mutex_unlock(&s->lock);
}

/* Sets the answer to every request from now on (forgetting the queue and
 * the request lines). */
static void answer(canned *s, const char *status, const char *headers, const void *body, size_t len)
{
    pthread_mutex_lock(&s->lock);
    s->nanswers = 0;
    s->lines[0] = '\0';
    pthread_mutex_unlock(&s->lock);
    queue_answer(s, 0, status, headers, body, len);
}

static void queue_json(canned *s, int delay_ms, const char *status, const char *json)
{
    queue_answer(s, delay_ms, status, "Content-Type: application/json\r\n", json, strlen(json));
}

static void answer_json(canned *s, const char *status, const char *json)
{
    answer(s, status, "Content-Type: application/json\r\n", json, strlen(json));
}

/* The last request's body (after the blank line), and its length. */
static const char *request_body(const canned *s, size_t *len)
{
    const char *b = memmem(s->request, s->request_len, "\r\n\r\n", 4);
    assert_non_null(b);
    *len = s->request_len - (size_t)(b + 4 - s->request);
    return b + 4;
}

static canned server;
static spmv_client *h;

static int setup(void **state)
{
    (void)state;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    server.listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    if (server.listen_fd < 0 || bind(server.listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(server.listen_fd, 16) != 0 || getsockname(server.listen_fd, (struct sockaddr *)&a, &alen) != 0)
        return -1;
    server.port = ntohs(a.sin_port);
    pthread_mutex_init(&server.lock, NULL);
    if (pthread_create(&server.thread, NULL, serve, &server) != 0)
        return -1;
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", server.port);
    spmv_client_options o = {.token = "t0ken", .timeout_ms = 5000};
    h = spmv_client_new(url, &o, NULL);
    return h ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    spmv_client_free(h);
    shutdown(server.listen_fd, SHUT_RDWR);
    close(server.listen_fd);
    pthread_join(server.thread, NULL);
    return 0;
}

static const char descriptor[] =
    "{\"id\":\"abc\",\"name\":\"m\",\"rows\":3,\"cols\":2,\"nnz\":4,\"dtype\":\"float64\","
    "\"symmetry\":\"general\",\"device\":\"cpu\",\"formats\":[{\"format\":\"csr\",\"device\":\"host\","
    "\"bytes\":80,\"padding\":0}],\"timings\":{\"parse_ms\":1.5,\"convert_ms\":0.25,\"transfer_ms\":0}}";

/* ------------------------------------------------------------------ tests */

static void test_strerror_and_groups(void **state)
{
    (void)state;
    for (int s = SPMV_CLIENT_OK; s >= SPMV_CLIENT_ERR_JOB_FAILED; s--)
        assert_string_not_equal(spmv_client_strerror(s), "unknown status");
    assert_string_equal(spmv_client_strerror(1), "unknown status");
    assert_true(spmv_client_status_is_client_error(SPMV_CLIENT_ERR_NOT_FOUND));
    assert_true(spmv_client_status_is_client_error(SPMV_CLIENT_ERR_BAD_MATRIX));
    assert_false(spmv_client_status_is_client_error(SPMV_CLIENT_ERR_BUSY));
    assert_true(spmv_client_status_is_server_error(SPMV_CLIENT_ERR_BUSY));
    assert_true(spmv_client_status_is_server_error(SPMV_CLIENT_ERR_SERVER));
    assert_false(spmv_client_status_is_server_error(SPMV_CLIENT_ERR_TIMEOUT));
}

static void test_new_refuses_bad_options(void **state)
{
    (void)state;
    spmv_client_status why = SPMV_CLIENT_OK;
    setenv("SPMVD_URL", "ftp://x", 1); /* NULL: the environment's URL, still checked */
    assert_null(spmv_client_new(NULL, NULL, &why));
    assert_int_equal(why, SPMV_CLIENT_ERR_INVALID);
    unsetenv("SPMVD_URL");
    assert_null(spmv_client_new("127.0.0.1:8080", NULL, &why)); /* no scheme */
    assert_int_equal(why, SPMV_CLIENT_ERR_INVALID);
    spmv_client_options o = {.connect_timeout_ms = -5};
    assert_null(spmv_client_new("http://x", &o, &why));
    assert_int_equal(why, SPMV_CLIENT_ERR_INVALID);
    spmv_client *ok = spmv_client_new("https://example.invalid", NULL, &why);
    assert_non_null(ok);
    assert_int_equal(why, SPMV_CLIENT_OK);
    spmv_client_free(ok);
    spmv_client_free(NULL);
}

/* $SPMVD_URL, else $SPMV_URL (the alias), else the default address. */
static void test_default_url(void **state)
{
    (void)state;
    setenv("SPMVD_URL", "http://first:1", 1);
    setenv("SPMV_URL", "http://alias:2", 1);
    assert_string_equal(spmv_client_default_url(), "http://first:1");
    setenv("SPMVD_URL", "", 1);
    assert_string_equal(spmv_client_default_url(), "http://alias:2");
    unsetenv("SPMVD_URL");
    unsetenv("SPMV_URL");
    assert_string_equal(spmv_client_default_url(), "http://127.0.0.1:8080");
    /* the handle of spmv_client_new(NULL) talks to it */
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", server.port);
    setenv("SPMV_URL", url, 1);
    spmv_client *d = spmv_client_new(NULL, NULL, NULL);
    unsetenv("SPMV_URL");
    assert_non_null(d);
    answer_json(&server, "200 OK", "{\"status\":\"ok\"}");
    char *json = NULL;
    assert_int_equal(spmv_client_health(d, &json), SPMV_CLIENT_OK);
    spmv_client_string_free(json);
    spmv_client_free(d);
}

static void test_arguments_checked_before_sending(void **state)
{
    (void)state;
    spmv_client_matrix *m = (spmv_client_matrix *)1;
    double x[2] = {0}, y[3];
    assert_int_equal(spmv_client_describe(h, "", &m), SPMV_CLIENT_ERR_INVALID);
    assert_null(m);
    char long_id[100];
    memset(long_id, 'a', sizeof long_id - 1);
    long_id[sizeof long_id - 1] = '\0';
    assert_int_equal(spmv_client_delete(h, long_id), SPMV_CLIENT_ERR_INVALID);
    assert_int_equal(spmv_client_multiply(h, "abc", (spmv_client_dtype)7, x, 2, y, 3, NULL, NULL),
                     SPMV_CLIENT_ERR_INVALID);
    assert_int_equal(spmv_client_multiply(h, "abc", SPMV_CLIENT_FLOAT64, NULL, 2, y, 3, NULL, NULL),
                     SPMV_CLIENT_ERR_INVALID);
    assert_int_equal(spmv_client_multiply(h, "abc", SPMV_CLIENT_FLOAT64, x, SIZE_MAX / 4, y, 3, NULL, NULL),
                     SPMV_CLIENT_ERR_INVALID);
    spmv_client_spmv_options neg = {.runs = -1};
    assert_int_equal(spmv_client_multiply(h, "abc", SPMV_CLIENT_FLOAT64, x, 2, y, 3, &neg, NULL),
                     SPMV_CLIENT_ERR_INVALID);
    spmv_client_upload_options hs = {.hack_size = -3};
    assert_int_equal(spmv_client_upload_memory(h, "x", 1, &hs, &m), SPMV_CLIENT_ERR_INVALID);
    assert_int_equal(spmv_client_health(NULL, NULL), SPMV_CLIENT_ERR_INVALID);
}

static void test_descriptor_parsed_and_request_formed(void **state)
{
    (void)state;
    answer_json(&server, "201 Created", descriptor);
    spmv_client_upload_options o = {.name = "my name", .dtype = "float32", .formats = "csr,hll", .hack_size = 64};
    spmv_client_matrix *m = NULL;
    assert_int_equal(spmv_client_upload_memory(h, "%%MatrixMarket", 14, &o, &m), SPMV_CLIENT_OK);
    assert_string_equal(m->id, "abc");
    assert_int_equal(m->rows, 3);
    assert_int_equal(m->cols, 2);
    assert_int_equal(m->nnz, 4);
    assert_int_equal(m->nformats, 1);
    assert_string_equal(m->formats[0].name, "csr");
    assert_string_equal(m->formats[0].device, "host");
    assert_int_equal(m->formats[0].bytes, 80);
    assert_true(m->parse_ms == 1.5 && m->convert_ms == 0.25);
    spmv_client_matrix_free(m);
    /* The request: multipart to /v1/matrices with the token and every option. */
    assert_non_null(strstr(server.request, "POST /v1/matrices HTTP/1.1"));
    assert_non_null(strstr(server.request, "Authorization: Bearer t0ken"));
    assert_non_null(strstr(server.request, "multipart/form-data"));
    assert_non_null(strstr(server.request, "name=\"file\""));
    assert_non_null(strstr(server.request, "name=\"hack_size\"\r\n\r\n64"));
    assert_non_null(strstr(server.request, "name=\"formats\"\r\n\r\ncsr,hll"));
    assert_non_null(strstr(server.request, "my name"));
}

static void test_bad_descriptors_are_protocol_errors(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "not json at all",
        "{\"name\":\"no id\",\"rows\":1,\"cols\":1,\"nnz\":1}",
        "{\"id\":\"a\",\"rows\":-1,\"cols\":1,\"nnz\":1}",
        "{\"id\":\"a\",\"rows\":1.5,\"cols\":1,\"nnz\":1}",
        "{\"id\":\"a\",\"rows\":\"many\",\"cols\":1,\"nnz\":1}",
        "{\"id\":\"a\",\"rows\":1e300,\"cols\":1,\"nnz\":1}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        spmv_client_matrix *m = (spmv_client_matrix *)1;
        answer_json(&server, "200 OK", bad[i]);
        assert_int_equal(spmv_client_describe(h, "a", &m), SPMV_CLIENT_ERR_PROTOCOL);
        assert_null(m);
        assert_true(strlen(spmv_client_errmsg(h)) > 0);
    }
}

static void test_http_errors_map_and_keep_message(void **state)
{
    (void)state;
    static const struct { const char *status; spmv_client_status want; } cases[] = {
        {"400 Bad Request", SPMV_CLIENT_ERR_BAD_REQUEST}, {"401 Unauthorized", SPMV_CLIENT_ERR_UNAUTHORIZED},
        {"404 Not Found", SPMV_CLIENT_ERR_NOT_FOUND},     {"409 Conflict", SPMV_CLIENT_ERR_CONFLICT},
        {"413 Too Large", SPMV_CLIENT_ERR_TOO_LARGE},     {"422 Unprocessable", SPMV_CLIENT_ERR_BAD_MATRIX},
        {"418 Teapot", SPMV_CLIENT_ERR_HTTP},             {"500 Oops", SPMV_CLIENT_ERR_SERVER},
        {"507 Full", SPMV_CLIENT_ERR_DEVICE_MEMORY},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        answer_json(&server, cases[i].status, "{\"error\":{\"code\":\"some_code\",\"message\":\"line 7: said \\\"no\\\"\"}}");
        assert_int_equal(spmv_client_delete(h, "a"), cases[i].want);
        assert_string_equal(spmv_client_errmsg(h), "line 7: said \"no\"");
        assert_string_equal(spmv_client_errcode(h), "some_code");
        assert_int_equal(spmv_client_http_status(h), atoi(cases[i].status));
    }
    answer(&server, "503 Busy", "Retry-After: 7\r\n", "queue full", 10);
    assert_int_equal(spmv_client_ready(h), SPMV_CLIENT_ERR_BUSY);
    assert_int_equal(spmv_client_retry_after(h), 7);
    assert_string_equal(spmv_client_errmsg(h), "HTTP 503: queue full");
    assert_string_equal(spmv_client_errcode(h), "");
    /* Success clears the detail. */
    answer_json(&server, "200 OK", "{\"status\":\"ok\"}");
    assert_int_equal(spmv_client_health(h, NULL), SPMV_CLIENT_OK);
    assert_string_equal(spmv_client_errmsg(h), "");
    assert_int_equal(spmv_client_retry_after(h), 0);
}

static const char stats_header[] =
    "X-SpMV-Stats: {\"kernel\":\"cpu.csr.serial\",\"stats\":{\"runs\":5,\"warmup\":1,\"mean_ms\":0.5,"
    "\"stddev_ms\":0.01,\"min_ms\":0.4,\"median_ms\":0.5,\"max_ms\":0.7,\"gflops\":\"NaN\",\"gbps\":2},"
    "\"queue_ms\":0.125,\"verify\":{\"max_rel_err\":1e-16}}\r\n";

static void test_multiply_checks_lengths_and_stats(void **state)
{
    (void)state;
    double x[2] = {1.0, -2.5}, y[3] = {NAN, NAN, NAN}, want[3] = {1.0, 2.0, -3.25};
    spmv_client_spmv_result r;
    const char *params[] = {"block_size=256", "alg=merge path", NULL};
    spmv_client_spmv_options o = {.kernel = "cpu.csr.serial", .runs = 5, .warmup = -1, .verify = 1,
                                  .params = params};

    answer(&server, "200 OK", stats_header, want, sizeof want);
    assert_int_equal(spmv_client_multiply(h, "abc", SPMV_CLIENT_FLOAT64, x, 2, y, 3, &o, &r), SPMV_CLIENT_OK);
    assert_memory_equal(y, want, sizeof want);
    assert_string_equal(r.kernel, "cpu.csr.serial");
    assert_int_equal(r.stats.runs, 5);
    assert_true(r.stats.median_ms == 0.5 && r.queue_ms == 0.125 && r.max_rel_err == 1e-16);
    assert_true(isnan(r.stats.gflops));
    /* The request: binary x, options and escaped parameters in the query. */
    assert_non_null(strstr(server.request,
                           "POST /v1/matrices/abc/spmv?kernel=cpu.csr.serial&runs=5&warmup=0&verify=true"
                           "&block_size=256&alg=merge%20path HTTP/1.1"));
    assert_non_null(strstr(server.request, "Content-Type: application/octet-stream"));
    assert_non_null(strstr(server.request, "Content-Length: 16"));
    assert_memory_equal(server.request + server.request_len - 16, x, 16);

    answer(&server, "200 OK", stats_header, want, sizeof want - 8); /* one value short */
    assert_int_equal(spmv_client_multiply(h, "abc", SPMV_CLIENT_FLOAT64, x, 2, y, 3, NULL, NULL),
                     SPMV_CLIENT_ERR_PROTOCOL);
    double four[4] = {0};
    answer(&server, "200 OK", stats_header, four, sizeof four); /* one value long */
    assert_int_equal(spmv_client_multiply(h, "abc", SPMV_CLIENT_FLOAT64, x, 2, y, 3, NULL, NULL),
                     SPMV_CLIENT_ERR_PROTOCOL);
    answer(&server, "200 OK", NULL, want, sizeof want); /* no stats header */
    assert_int_equal(spmv_client_multiply(h, "abc", SPMV_CLIENT_FLOAT64, x, 2, y, 3, NULL, NULL),
                     SPMV_CLIENT_ERR_PROTOCOL);
    assert_non_null(strstr(spmv_client_errmsg(h), "X-SpMV-Stats"));
    /* An error answer is not written into y. */
    double keep[3] = {7, 8, 9};
    answer_json(&server, "400 Bad Request", "{\"error\":{\"code\":\"shape_mismatch\",\"message\":\"x has 2\"}}");
    assert_int_equal(spmv_client_multiply(h, "abc", SPMV_CLIENT_FLOAT64, x, 2, keep, 3, NULL, NULL),
                     SPMV_CLIENT_ERR_BAD_REQUEST);
    assert_true(keep[0] == 7 && keep[1] == 8 && keep[2] == 9);
}

static void test_jobs(void **state)
{
    (void)state;
    char job[64];
    spmv_client_job *j = NULL;
    answer_json(&server, "202 Accepted", "{\"id\":\"j1\",\"state\":\"queued\",\"progress\":0}");
    const char *kernels[] = {"cpu.csr.serial", NULL};
    spmv_client_bench_options o = {.kernels = kernels, .runs = 3};
    assert_int_equal(spmv_client_bench_start(h, "abc", &o, job), SPMV_CLIENT_OK);
    assert_string_equal(job, "j1");
    assert_non_null(strstr(server.request, "{\"kernels\":[\"cpu.csr.serial\"],\"runs\":3}"));

    answer_json(&server, "200 OK", "{\"id\":\"j1\",\"state\":\"running\",\"progress\":1.5}");
    assert_int_equal(spmv_client_job_get(h, "j1", &j), SPMV_CLIENT_ERR_PROTOCOL);
    assert_null(j);
    answer_json(&server, "200 OK",
                "{\"id\":\"j1\",\"state\":\"failed\",\"progress\":0.5,\"error\":{\"code\":\"device\",\"message\":\"boom\"}}");
    assert_int_equal(spmv_client_job_wait(h, "j1", 10, NULL, NULL, &j), SPMV_CLIENT_ERR_JOB_FAILED);
    assert_non_null(j);
    assert_string_equal(j->state, "failed");
    assert_string_equal(spmv_client_errmsg(h), "boom");
    assert_string_equal(spmv_client_errcode(h), "device");
    spmv_client_job_free(j);
    answer_json(&server, "200 OK", "{\"id\":\"j1\",\"state\":\"done\",\"progress\":1,\"result\":{\"results\":[]}}");
    assert_int_equal(spmv_client_job_wait(h, "j1", 10, NULL, NULL, &j), SPMV_CLIENT_OK);
    assert_string_equal(j->result, "{\"results\":[]}");
    /* without a callback one long poll of the daemon's longest wait */
    assert_string_equal(server.lines, "GET /v1/jobs/j1?wait=60.000 HTTP/1.1\n");
    spmv_client_job_free(j);
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct calls {
    uint64_t done[8];
    int n;
    int stop_at;
} calls;

static int record(void *user, uint64_t done, uint64_t total)
{
    calls *c = user;
    assert_int_equal(total, 1000);
    if (c->n < 8) c->done[c->n] = done;
    return ++c->n == c->stop_at;
}

/* job_wait: long polls (?wait=) held by the daemon, the callback between
 * them, and no sleeping between polls the daemon held. */
static void test_job_long_poll(void **state)
{
    (void)state;
    spmv_client_job *j = NULL;
    calls c = {.stop_at = -1};
    answer_json(&server, "200 OK", "{\"id\":\"j2\",\"state\":\"running\",\"progress\":0.25}");
    server.answers[0].delay_ms = 120; /* held most of the 0.2 s wait, as the daemon does */
    queue_json(&server, 120, "200 OK", "{\"id\":\"j2\",\"state\":\"running\",\"progress\":0.5}");
    queue_json(&server, 30, "200 OK", "{\"id\":\"j2\",\"state\":\"done\",\"progress\":1,\"result\":{}}");
    double t0 = seconds();
    assert_int_equal(spmv_client_job_wait(h, "j2", 200, record, &c, &j), SPMV_CLIENT_OK);
    double took = seconds() - t0;
    assert_string_equal(server.lines, "GET /v1/jobs/j2?wait=0.200 HTTP/1.1\n"
                                      "GET /v1/jobs/j2?wait=0.200 HTTP/1.1\n"
                                      "GET /v1/jobs/j2?wait=0.200 HTTP/1.1\n");
    assert_int_equal(c.n, 3);
    assert_true(c.done[0] == 250 && c.done[1] == 500 && c.done[2] == 1000);
    /* the daemon's 270 ms of holding and no sleep of the client's own (one of
     * 200 ms between polls, as before 0.4, makes it 670 ms) */
    assert_true(took >= 0.27 && took < 0.27 + 0.15);
    assert_string_equal(j->state, "done");
    spmv_client_job_free(j);

    /* a callback's nonzero return stops waiting */
    answer_json(&server, "200 OK", "{\"id\":\"j2\",\"state\":\"running\",\"progress\":0.5}");
    server.answers[0].delay_ms = 60;
    c = (calls){.stop_at = 2};
    assert_int_equal(spmv_client_job_wait(h, "j2", 100, record, &c, &j), SPMV_CLIENT_ERR_ABORTED);
    assert_null(j);
    assert_int_equal(c.n, 2);

    /* a daemon that predates long polls answers at once: the polls are paced */
    answer_json(&server, "200 OK", "{\"id\":\"j2\",\"state\":\"running\",\"progress\":0.5}");
    queue_json(&server, 0, "200 OK", "{\"id\":\"j2\",\"state\":\"done\",\"progress\":1}");
    c = (calls){.stop_at = -1};
    t0 = seconds();
    assert_int_equal(spmv_client_job_wait(h, "j2", 100, record, &c, &j), SPMV_CLIENT_OK);
    assert_true(seconds() - t0 >= 0.1);
    spmv_client_job_free(j);
}

static void test_lists(void **state)
{
    (void)state;
    spmv_client_kernel_list *k = NULL;
    answer_json(&server, "200 OK",
                "{\"kernels\":[{\"name\":\"cpu.csr.serial\",\"available\":true},"
                "{\"name\":\"gpu.ell\",\"available\":false,\"reason\":\"no GPU\"}]}");
    assert_int_equal(spmv_client_kernels(h, &k), SPMV_CLIENT_OK);
    assert_int_equal(k->count, 2);
    assert_false(k->items[1].available);
    assert_string_equal(k->items[1].reason, "no GPU");
    spmv_client_kernel_list_free(k);
    answer_json(&server, "200 OK", "{\"kernels\":[{\"available\":true}]}");
    assert_int_equal(spmv_client_kernels(h, &k), SPMV_CLIENT_ERR_PROTOCOL);
    assert_null(k);

    spmv_client_matrix_list *l = NULL;
    char body[sizeof descriptor * 2 + 64];
    snprintf(body, sizeof body, "{\"matrices\":[%s,%s],\"count\":2}", descriptor, descriptor);
    answer_json(&server, "200 OK", body);
    assert_int_equal(spmv_client_list(h, &l), SPMV_CLIENT_OK);
    assert_int_equal(l->count, 2);
    assert_string_equal(l->items[1].id, "abc");
    spmv_client_matrix_list_free(l);
    answer_json(&server, "200 OK", "{\"matrices\":{}}");
    assert_int_equal(spmv_client_list(h, &l), SPMV_CLIENT_ERR_PROTOCOL);
    assert_null(l);
}

/* ------------------------------------------- vectors, ops, solve (0.2) */

static const char vdesc[] =
    "{\"id\":\"v1\",\"n\":3,\"k\":2,\"dtype\":\"float64\",\"device\":\"cpu\",\"bytes\":48,"
    "\"created\":\"2026-01-01T00:00:00Z\",\"idle_s\":0.5,\"expires_in_s\":3599,\"like\":\"abc\"}";

static void test_vector_arguments(void **state)
{
    (void)state;
    spmv_client_vector *v = (spmv_client_vector *)1;
    double x[6] = {0};
    spmv_client_vector_options k4 = {.k = 4};
    assert_int_equal(spmv_client_vector_create(h, SPMV_CLIENT_FLOAT64, x, 6, &k4, &v), SPMV_CLIENT_ERR_INVALID);
    assert_null(v);
    assert_non_null(strstr(spmv_client_errmsg(h), "multiple of k"));
    assert_int_equal(spmv_client_vector_create(h, SPMV_CLIENT_FLOAT64, NULL, 6, NULL, &v), SPMV_CLIENT_ERR_INVALID);
    assert_int_equal(spmv_client_vector_create(h, (spmv_client_dtype)9, x, 6, NULL, &v), SPMV_CLIENT_ERR_INVALID);
    spmv_client_vector_options side = {.side = "rows"};
    assert_int_equal(spmv_client_vector_create(h, SPMV_CLIENT_FLOAT64, x, 6, &side, &v), SPMV_CLIENT_ERR_INVALID);
    spmv_client_vector_options badside = {.like = "abc", .side = "diagonal"};
    assert_int_equal(spmv_client_vector_fill(h, 3, 1.0, &badside, &v), SPMV_CLIENT_ERR_INVALID);
    spmv_client_vector_options negk = {.k = -1};
    assert_int_equal(spmv_client_vector_fill(h, 3, 1.0, &negk, &v), SPMV_CLIENT_ERR_INVALID);
    assert_int_equal(spmv_client_vector_fill(h, 0, 1.0, NULL, &v), SPMV_CLIENT_ERR_INVALID); /* n from nothing */
    assert_int_equal(spmv_client_vector_fill(h, 3, NAN, NULL, &v), SPMV_CLIENT_ERR_INVALID);
    spmv_client_vector_options dt = {.dtype = "int8"};
    assert_int_equal(spmv_client_vector_random(h, 3, 1, &dt, &v), SPMV_CLIENT_ERR_INVALID);
    assert_int_equal(spmv_client_vector_read(h, "", SPMV_CLIENT_FLOAT64, x, 6, NULL), SPMV_CLIENT_ERR_INVALID);
    assert_int_equal(spmv_client_vector_write(h, "v1", SPMV_CLIENT_FLOAT64, x, 0, NULL), SPMV_CLIENT_ERR_INVALID);
    assert_int_equal(spmv_client_vector_delete(h, NULL), SPMV_CLIENT_ERR_INVALID);
    assert_int_equal(spmv_client_vectors(h, NULL), SPMV_CLIENT_ERR_INVALID);
}

static void test_vector_requests(void **state)
{
    (void)state;
    spmv_client_vector *v = NULL;
    double x[6] = {1, 2, 3, 4, 5, 6};
    spmv_client_vector_options o = {.k = 2, .like = "abc", .side = "rows", .device = "gpu0"};

    answer_json(&server, "201 Created", vdesc);
    assert_int_equal(spmv_client_vector_create(h, SPMV_CLIENT_FLOAT64, x, 6, &o, &v), SPMV_CLIENT_OK);
    assert_non_null(strstr(server.request, "POST /v1/vectors?dtype=float64&k=2&like=abc&side=rows&device=gpu0 HTTP/1.1"));
    assert_non_null(strstr(server.request, "Content-Type: application/octet-stream"));
    assert_non_null(strstr(server.request, "Content-Length: 48"));
    assert_memory_equal(server.request + server.request_len - 48, x, 48);
    assert_string_equal(v->id, "v1");
    assert_true(v->n == 3 && v->k == 2 && v->bytes == 48 && v->dtype == SPMV_CLIENT_FLOAT64);
    assert_string_equal(v->device, "cpu");
    assert_string_equal(v->like, "abc");
    assert_true(v->idle_s == 0.5 && v->expires_in_s == 3599);
    spmv_client_vector_free(v);

    answer_json(&server, "201 Created", vdesc);
    spmv_client_vector_options f = {.like = "abc", .dtype = "float32"};
    assert_int_equal(spmv_client_vector_fill(h, 0, -2.5, &f, &v), SPMV_CLIENT_OK);
    assert_non_null(strstr(server.request, "POST /v1/vectors HTTP/1.1"));
    assert_non_null(strstr(server.request, "\r\n\r\n{\"fill\":-2.5,\"dtype\":\"float32\",\"like\":\"abc\"}"));
    spmv_client_vector_free(v);
    answer_json(&server, "201 Created", vdesc);
    spmv_client_vector_options r = {.k = 3};
    assert_int_equal(spmv_client_vector_random(h, 7, 42, &r, &v), SPMV_CLIENT_OK);
    assert_non_null(strstr(server.request, "\r\n\r\n{\"n\":7,\"k\":3,\"fill\":\"random\",\"seed\":42}"));
    spmv_client_vector_free(v);

    /* read: binary values, the descriptor in X-SpMV-Vector */
    char hdr[512];
    snprintf(hdr, sizeof hdr, "Content-Type: application/octet-stream\r\nX-SpMV-Vector: %s\r\n", vdesc);
    double y[6] = {NAN, NAN, NAN, NAN, NAN, NAN};
    answer(&server, "200 OK", hdr, x, sizeof x);
    assert_int_equal(spmv_client_vector_read(h, "v1", SPMV_CLIENT_FLOAT64, y, 6, &v), SPMV_CLIENT_OK);
    assert_memory_equal(y, x, sizeof x);
    assert_true(v && v->n == 3 && v->k == 2);
    assert_non_null(strstr(server.request, "GET /v1/vectors/v1 HTTP/1.1"));
    assert_non_null(strstr(server.request, "Accept: application/octet-stream"));
    spmv_client_vector_free(v);
    answer(&server, "200 OK", hdr, x, sizeof x - 8); /* one value short */
    assert_int_equal(spmv_client_vector_read(h, "v1", SPMV_CLIENT_FLOAT64, y, 6, NULL), SPMV_CLIENT_ERR_PROTOCOL);
    answer(&server, "200 OK", hdr, x, 24); /* float32 buffer of 6 for a float64 vector */
    float yf[6];
    assert_int_equal(spmv_client_vector_read(h, "v1", SPMV_CLIENT_FLOAT32, yf, 6, NULL), SPMV_CLIENT_ERR_INVALID);
    assert_non_null(strstr(spmv_client_errmsg(h), "float64"));
    answer(&server, "200 OK", "Content-Type: application/octet-stream\r\n", x, sizeof x); /* no header */
    assert_int_equal(spmv_client_vector_read(h, "v1", SPMV_CLIENT_FLOAT64, y, 6, NULL), SPMV_CLIENT_ERR_PROTOCOL);
    assert_non_null(strstr(spmv_client_errmsg(h), "X-SpMV-Vector"));
    answer_json(&server, "200 OK", vdesc); /* JSON where binary was asked for */
    assert_int_equal(spmv_client_vector_read(h, "v1", SPMV_CLIENT_FLOAT64, y, 6, NULL), SPMV_CLIENT_ERR_PROTOCOL);

    /* write: PUT, binary */
    answer_json(&server, "200 OK", vdesc);
    assert_int_equal(spmv_client_vector_write(h, "v1", SPMV_CLIENT_FLOAT64, x, 6, &v), SPMV_CLIENT_OK);
    assert_non_null(strstr(server.request, "PUT /v1/vectors/v1 HTTP/1.1"));
    assert_memory_equal(server.request + server.request_len - 48, x, 48);
    assert_string_equal(v->id, "v1");
    spmv_client_vector_free(v);
    answer_json(&server, "400 Bad Request", "{\"error\":{\"code\":\"shape_mismatch\",\"message\":\"n 3 vs 4\"}}");
    assert_int_equal(spmv_client_vector_write(h, "v1", SPMV_CLIENT_FLOAT64, x, 4, NULL), SPMV_CLIENT_ERR_BAD_REQUEST);
    assert_string_equal(spmv_client_errcode(h), "shape_mismatch");

    answer(&server, "204 No Content", NULL, "", 0);
    assert_int_equal(spmv_client_vector_delete(h, "v/1"), SPMV_CLIENT_OK);
    assert_non_null(strstr(server.request, "DELETE /v1/vectors/v%2F1 HTTP/1.1"));
    answer_json(&server, "507 Full", "{\"error\":{\"code\":\"vector_limit\",\"message\":\"1024 vectors\"}}");
    assert_int_equal(spmv_client_vector_fill(h, 3, 0, NULL, &v), SPMV_CLIENT_ERR_DEVICE_MEMORY);
    assert_string_equal(spmv_client_errcode(h), "vector_limit");

    spmv_client_vector_list *l = NULL;
    char body[sizeof vdesc * 2 + 32];
    snprintf(body, sizeof body, "{\"vectors\":[%s,%s]}", vdesc, vdesc);
    answer_json(&server, "200 OK", body);
    assert_int_equal(spmv_client_vectors(h, &l), SPMV_CLIENT_OK);
    assert_int_equal(l->count, 2);
    assert_string_equal(l->items[1].id, "v1");
    spmv_client_vector_list_free(l);
    answer_json(&server, "200 OK", "{\"vectors\":[{\"id\":\"v\",\"n\":-3}]}");
    assert_int_equal(spmv_client_vectors(h, &l), SPMV_CLIENT_ERR_PROTOCOL);
    assert_null(l);
}

static void test_resident_spmv(void **state)
{
    (void)state;
    double x[4] = {1, 2, 3, 4}, y[6];
    spmv_client_product_result r;
    spmv_client_operands both = {.x_vector = "v1", .x = x, .nx = 4, .y_vector = "v2"};
    assert_int_equal(spmv_client_spmv(h, "abc", &both, NULL, NULL), SPMV_CLIENT_ERR_INVALID);
    spmv_client_operands none = {.y_vector = "v2"};
    assert_int_equal(spmv_client_spmv(h, "abc", &none, NULL, NULL), SPMV_CLIENT_ERR_INVALID);
    spmv_client_operands beta = {.x = x, .nx = 4, .y = y, .ny = 6, .scale = 1, .alpha = 1, .beta = 0.5};
    assert_int_equal(spmv_client_spmv(h, "abc", &beta, NULL, NULL), SPMV_CLIENT_ERR_INVALID);
    assert_non_null(strstr(spmv_client_errmsg(h), "y_vector"));
    spmv_client_operands op = {.x_vector = "v1", .y_vector = "v2", .op = 'x'};
    assert_int_equal(spmv_client_spmv(h, "abc", &op, NULL, NULL), SPMV_CLIENT_ERR_INVALID);
    spmv_client_operands k3 = {.x = x, .nx = 4, .y_vector = "v2", .k = 3};
    assert_int_equal(spmv_client_spmv(h, "abc", &k3, NULL, NULL), SPMV_CLIENT_ERR_INVALID);

    /* both resident: empty body, everything in the query, empty answer */
    answer(&server, "200 OK", "X-SpMV-Stats: {\"kernel\":\"cpu.csr.omp\",\"stats\":{\"runs\":1},\"queue_ms\":0.5,"
                              "\"axpby_ms\":0.25}\r\n", "", 0);
    spmv_client_operands res = {.x_vector = "v1", .y_vector = "v2", .op = 't', .k = 2, .scale = 1, .alpha = -1.5,
                                .beta = 1};
    spmv_client_spmv_options o = {.kernel = "cpu.csr.omp"};
    assert_int_equal(spmv_client_spmv(h, "abc", &res, &o, &r), SPMV_CLIENT_OK);
    assert_non_null(strstr(server.request, "POST /v1/matrices/abc/spmv?kernel=cpu.csr.omp&k=2&op=t&x=v1&y=v2"
                                           "&alpha=-1.5&beta=1 HTTP/1.1"));
    assert_non_null(strstr(server.request, "Content-Length: 0"));
    assert_string_equal(r.spmv.kernel, "cpu.csr.omp");
    assert_true(r.spmv.queue_ms == 0.5 && r.axpby_ms == 0.25);
    /* x inline, y inline: binary both ways, exactly ny values */
    double want[6] = {6, 5, 4, 3, 2, 1};
    answer(&server, "200 OK", stats_header, want, sizeof want);
    spmv_client_operands inl = {.x = x, .nx = 4, .y = y, .ny = 6};
    assert_int_equal(spmv_client_spmv(h, "abc", &inl, NULL, &r), SPMV_CLIENT_OK);
    assert_memory_equal(y, want, sizeof want);
    assert_true(isnan(r.axpby_ms));
    assert_non_null(strstr(server.request, "POST /v1/matrices/abc/spmv?dtype=float64 HTTP/1.1"));
    assert_memory_equal(server.request + server.request_len - 32, x, 32);
    answer(&server, "200 OK", stats_header, want, sizeof want); /* a body where y went to a vector */
    spmv_client_operands xin = {.x = x, .nx = 4, .y_vector = "v2"};
    assert_int_equal(spmv_client_spmv(h, "abc", &xin, NULL, NULL), SPMV_CLIENT_ERR_PROTOCOL);
    answer_json(&server, "409 Conflict", "{\"error\":{\"code\":\"wrong_device\",\"message\":\"v1 is on gpu0\"}}");
    assert_int_equal(spmv_client_spmv(h, "abc", &res, NULL, NULL), SPMV_CLIENT_ERR_CONFLICT);
    assert_string_equal(spmv_client_errcode(h), "wrong_device");
}

static void test_ops(void **state)
{
    (void)state;
    spmv_client_ops *o = spmv_client_ops_new();
    assert_non_null(o);
    assert_int_equal(spmv_client_ops_spmv(o, "A", "p", "Ap", 1, 0, 'n', NULL), SPMV_CLIENT_OK);
    assert_int_equal(spmv_client_ops_dot(o, "p", "Ap", "pap"), SPMV_CLIENT_OK);
    assert_int_equal(spmv_client_ops_nrm2(o, "r", "rn"), SPMV_CLIENT_OK);
    assert_int_equal(spmv_client_ops_axpy(o, 0.5, "p", "x"), SPMV_CLIENT_OK);
    assert_int_equal(spmv_client_ops_axpby(o, 1, "r", 0.25, "p"), SPMV_CLIENT_OK);
    assert_int_equal(spmv_client_ops_scal(o, -1, "r"), SPMV_CLIENT_OK);
    assert_int_equal(spmv_client_ops_copy(o, "r", "p"), SPMV_CLIENT_OK);
    assert_int_equal(spmv_client_ops_fill(o, "x", 0), SPMV_CLIENT_OK);
    assert_int_equal(spmv_client_ops_count(o), 8);
    char *json = spmv_client_ops_json(o);
    assert_string_equal(json,
        "{\"steps\":[{\"op\":\"spmv\",\"matrix\":\"A\",\"x\":\"p\",\"y\":\"Ap\",\"alpha\":1.0,\"beta\":0.0,"
        "\"trans\":\"n\",\"kernel\":\"auto\"},{\"op\":\"dot\",\"x\":\"p\",\"y\":\"Ap\",\"as\":\"pap\"},"
        "{\"op\":\"nrm2\",\"x\":\"r\",\"as\":\"rn\"},{\"op\":\"axpy\",\"alpha\":0.5,\"x\":\"p\",\"y\":\"x\"},"
        "{\"op\":\"axpby\",\"alpha\":1.0,\"x\":\"r\",\"beta\":0.25,\"y\":\"p\"},{\"op\":\"scal\",\"alpha\":-1.0,\"x\":\"r\"},"
        "{\"op\":\"copy\",\"x\":\"r\",\"y\":\"p\"},{\"op\":\"fill\",\"x\":\"x\",\"value\":0.0}]}");

    spmv_client_ops_result *r = NULL;
    answer_json(&server, "200 OK",
                "{\"results\":{\"pap\":2.5,\"rn\":[1,\"NaN\"]},\"steps\":[{\"op\":\"spmv\",\"ms\":0.5},"
                "{\"op\":\"dot\",\"ms\":0.125}],\"total_ms\":0.75,\"queue_ms\":0.01,\"device\":\"cpu\"}");
    assert_int_equal(spmv_client_ops_run(h, o, &r), SPMV_CLIENT_OK);
    assert_non_null(strstr(server.request, "POST /v1/ops HTTP/1.1"));
    assert_non_null(strstr(server.request, "Content-Type: application/json"));
    assert_non_null(strstr(server.request, json));
    assert_true(spmv_client_ops_result_get(r, "pap", 0) == 2.5);
    assert_true(spmv_client_ops_result_get(r, "rn", 0) == 1 && isnan(spmv_client_ops_result_get(r, "rn", 1)));
    assert_true(isnan(spmv_client_ops_result_get(r, "rn", 2)) && isnan(spmv_client_ops_result_get(r, "zz", 0)));
    assert_int_equal(r->nsteps, 2);
    assert_string_equal(r->steps[0].op, "spmv");
    assert_true(r->steps[1].ms == 0.125 && r->total_ms == 0.75 && r->queue_ms == 0.01);
    assert_string_equal(r->device, "cpu");
    spmv_client_ops_result_free(r);
    spmv_client_string_free(json);

    /* A failed append sticks: run refuses to send and names the step. */
    spmv_client_ops_clear(o);
    assert_int_equal(spmv_client_ops_count(o), 0);
    assert_int_equal(spmv_client_ops_run(h, o, &r), SPMV_CLIENT_ERR_INVALID); /* empty */
    assert_int_equal(spmv_client_ops_copy(o, "a", "b"), SPMV_CLIENT_OK);
    assert_int_equal(spmv_client_ops_dot(o, "a", "b", ""), SPMV_CLIENT_ERR_INVALID);
    assert_int_equal(spmv_client_ops_axpy(o, INFINITY, "a", "b"), SPMV_CLIENT_ERR_INVALID);
    assert_int_equal(spmv_client_ops_spmv(o, "A", "a", "b", 1, 0, 'q', NULL), SPMV_CLIENT_ERR_INVALID);
    assert_int_equal(spmv_client_ops_count(o), 1);
    server.request[0] = '\0';
    assert_int_equal(spmv_client_ops_run(h, o, &r), SPMV_CLIENT_ERR_INVALID);
    assert_null(r);
    assert_string_equal(spmv_client_errmsg(h), "step 2: dot: \"as\" must be 1 to 63 characters");
    assert_string_equal(server.request, ""); /* nothing was sent */
    spmv_client_ops_free(o);

    /* hand-written JSON, sent verbatim; errors keep the server's words */
    answer_json(&server, "400 Bad Request", "{\"error\":{\"code\":\"shape_mismatch\",\"message\":\"step 1: x has 3\"}}");
    assert_int_equal(spmv_client_ops_post(h, "{\"steps\":[]}", &r), SPMV_CLIENT_ERR_BAD_REQUEST);
    assert_non_null(strstr(server.request, "\r\n\r\n{\"steps\":[]}"));
    assert_string_equal(spmv_client_errmsg(h), "step 1: x has 3");
    answer_json(&server, "200 OK", "{\"results\":[1,2]}");
    assert_int_equal(spmv_client_ops_post(h, "{\"steps\":[]}", &r), SPMV_CLIENT_ERR_PROTOCOL);
    assert_int_equal(spmv_client_ops_post(h, "", &r), SPMV_CLIENT_ERR_INVALID);
}

static const char solve_answer[] =
    "{\"method\":\"cg\",\"converged\":true,\"stop\":{\"reason\":\"converged\",\"detail\":\"relres under tol\"},"
    "\"iterations\":3,\"relres\":1e-9,\"residual_history\":[1,0.1,0.001,1e-9],\"time\":{\"total_ms\":2,"
    "\"spmv_ms\":1,\"vector_ms\":0.5,\"setup_ms\":0.25,\"queue_ms\":0.125},\"spmv_calls\":4,\"kernel\":\"cpu.csr.omp\","
    "\"device\":\"cpu\"";

static const char solve_binary[] = /* the header of a binary answer: the history's length only */
    "{\"method\":\"cg\",\"converged\":true,\"stop\":{\"reason\":\"converged\",\"detail\":\"relres under tol\"},"
    "\"iterations\":3,\"relres\":1e-9,\"residual_history_len\":4,\"time\":{\"total_ms\":2,"
    "\"spmv_ms\":1,\"vector_ms\":0.5,\"setup_ms\":0.25,\"queue_ms\":0.125},\"spmv_calls\":4,\"kernel\":\"cpu.csr.omp\","
    "\"device\":\"cpu\"";

static const char descriptor_m64[] = "{\"id\":\"m64\",\"rows\":3,\"cols\":3,\"nnz\":3,\"dtype\":\"float64\"}";
static const char descriptor_m32[] = "{\"id\":\"m32\",\"rows\":3,\"cols\":3,\"nnz\":3,\"dtype\":\"float32\"}";

/* A float32 matrix: b and x0 go as float32 values (x0=body), x comes
 * back as float32 and is widened into the float64 buffer; the JSON
 * request's binary x too. */
static void solve_float32(const spmv_client_solve_options *base)
{
    double b[3] = {1, 2, 3}, x0[3] = {0.25, 0.5, 0.75}, x[3] = {NAN, NAN, NAN};
    float b32[6] = {1, 2, 3, 0.25f, 0.5f, 0.75f};
    char xh[3 * 4 + 4 * 8], hdr[1024];
    float x32[3] = {0.5f, -1.5f, 2.25f};
    double hist[4] = {1, 0.1, 0.001, 1e-9};
    memcpy(xh, x32, sizeof x32);
    memcpy(xh + sizeof x32, hist, sizeof hist);
    snprintf(hdr, sizeof hdr, "Content-Type: application/octet-stream\r\nX-SpMV-Solve: %s}\r\n", solve_binary);
    answer_json(&server, "200 OK", descriptor_m32);
    queue_answer(&server, 0, "200 OK", hdr, xh, sizeof xh);
    spmv_client_solve_options o = *base;
    o.x0_vector = NULL, o.x0 = x0, o.nx0 = 3, o.b = b;
    spmv_client_solve_result *r = NULL;
    assert_int_equal(spmv_client_solve(h, "m32", &o, x, 3, &r), SPMV_CLIENT_OK);
    assert_non_null(strstr(server.lines, "&x0=body&history=true HTTP/1.1\n"));
    size_t blen;
    const char *body_sent = request_body(&server, &blen);
    assert_int_equal(blen, sizeof b32);
    assert_memory_equal(body_sent, b32, sizeof b32);
    assert_true(r->has_x && x[0] == 0.5 && x[1] == -1.5 && x[2] == 2.25 && r->nhistory == 4 && r->history[2] == 0.001);
    spmv_client_solve_result_free(r);

    /* the JSON request: b as numbers, x asked for in binary, its float32 widened */
    answer(&server, "200 OK", hdr, x32, sizeof x32);
    x[0] = x[1] = x[2] = NAN;
    assert_int_equal(spmv_client_solve_json(h, "m32", &o, x, 3, &r), SPMV_CLIENT_OK);
    assert_string_equal(server.lines, "POST /v1/matrices/m32/solve HTTP/1.1\n");
    assert_non_null(strstr(server.request, "Accept: application/octet-stream"));
    assert_non_null(strstr(server.request, "\"b\":[1.0,2.0,3.0],\"x0\":[0.25,0.5,0.75]}"));
    assert_true(r->has_x && x[0] == 0.5 && x[1] == -1.5 && x[2] == 2.25);
    spmv_client_solve_result_free(r);

    /* a matrix not seen yet: its descriptor first, then x read in its
     * dtype (3 float64 values are 24 bytes, as 6 float32 ones would be:
     * a buffer of 6 is a PROTOCOL error, not 6 widened floats) */
    double x6[6], x64[3] = {4, 5, 6};
    answer_json(&server, "200 OK", "{\"id\":\"n64\",\"rows\":3,\"cols\":3,\"nnz\":3,\"dtype\":\"float64\"}");
    queue_answer(&server, 0, "200 OK", hdr, x64, sizeof x64);
    assert_int_equal(spmv_client_solve_json(h, "n64", &o, x6, 6, &r), SPMV_CLIENT_ERR_PROTOCOL);
    assert_string_equal(server.lines, "GET /v1/matrices/n64 HTTP/1.1\nPOST /v1/matrices/n64/solve HTTP/1.1\n");
    answer(&server, "200 OK", hdr, x64, sizeof x64);
    assert_int_equal(spmv_client_solve_json(h, "n64", &o, x, 3, &r), SPMV_CLIENT_OK);
    assert_true(r->has_x && x[0] == 4 && x[1] == 5 && x[2] == 6);
    spmv_client_solve_result_free(r);

    /* refused before sending: a value float32 cannot hold, x0 not b's length */
    double big[3] = {1, 1e300, 1};
    o.b = big;
    assert_int_equal(spmv_client_solve(h, "m32", &o, x, 3, &r), SPMV_CLIENT_ERR_INVALID);
    o.b = b, o.nx0 = 2;
    assert_int_equal(spmv_client_solve(h, "m32", &o, x, 3, &r), SPMV_CLIENT_ERR_INVALID);
    assert_string_equal(server.lines, "POST /v1/matrices/n64/solve HTTP/1.1\n"); /* m32 known: nothing more sent */
}

static void test_solve(void **state)
{
    (void)state;
    double b[3] = {1, 2, 3}, x[3] = {NAN, NAN, NAN}, want[3] = {0.5, -1, 2};
    spmv_client_solve_result *r = NULL;
    spmv_client_solve_options none = {0};
    assert_int_equal(spmv_client_solve(h, "abc", &none, x, 3, &r), SPMV_CLIENT_ERR_INVALID); /* no b */
    assert_null(r);
    spmv_client_solve_options two = {.b = b, .nb = 3, .b_vector = "vb"};
    assert_int_equal(spmv_client_solve(h, "abc", &two, x, 3, &r), SPMV_CLIENT_ERR_INVALID);
    spmv_client_solve_options neg = {.b = b, .nb = 3, .tol = -1};
    assert_int_equal(spmv_client_solve(h, "abc", &neg, x, 3, &r), SPMV_CLIENT_ERR_INVALID);
    double bad[3] = {1, NAN, 3};
    spmv_client_solve_options nan = {.b = bad, .nb = 3};
    assert_int_equal(spmv_client_solve(h, "abc", &nan, x, 3, &r), SPMV_CLIENT_ERR_INVALID);

    /* b inline: a binary request (the matrix's dtype learnt from its
     * descriptor), the options in the query, x back into the buffer, the
     * history after it, the rest in X-SpMV-Solve */
    char hdr[1024];
    snprintf(hdr, sizeof hdr, "Content-Type: application/octet-stream\r\nX-SpMV-Solve: %s}\r\n", solve_binary);
    double xh[7] = {0.5, -1, 2, 1, 0.1, 0.001, 1e-9}; /* x, then the history */
    answer_json(&server, "200 OK", descriptor_m64);
    queue_answer(&server, 0, "200 OK", hdr, xh, sizeof xh);
    spmv_client_solve_options o = {.method = "cg", .tol = 1e-10, .maxit = 50, .preconditioner = "jacobi",
                                   .kernel = "cpu.csr.omp", .b = b, .nb = 3, .x0_vector = "x0"};
    assert_int_equal(spmv_client_solve(h, "m64", &o, x, 3, &r), SPMV_CLIENT_OK);
    assert_string_equal(server.lines, "GET /v1/matrices/m64 HTTP/1.1\n"
                                      "POST /v1/matrices/m64/solve?method=cg&tol=1e-10&maxit=50&preconditioner=jacobi"
                                      "&kernel=cpu.csr.omp&x0=x0&history=true HTTP/1.1\n");
    assert_non_null(strstr(server.request, "Content-Type: application/octet-stream"));
    size_t blen;
    const char *body_sent = request_body(&server, &blen);
    assert_int_equal(blen, sizeof b);
    assert_memory_equal(body_sent, b, sizeof b);
    assert_memory_equal(x, want, sizeof want);
    assert_true(r->has_x && r->converged && r->iterations == 3 && r->relres == 1e-9 && r->spmv_calls == 4);
    assert_string_equal(r->stop_reason, "converged");
    assert_string_equal(r->stop_detail, "relres under tol");
    assert_true(isnan(r->stop_value));
    assert_int_equal(r->nhistory, 4);
    assert_true(r->history[1] == 0.1 && r->history[3] == 1e-9);
    assert_true(r->total_ms == 2 && r->queue_ms == 0.125 && r->setup_ms == 0.25);
    assert_string_equal(r->kernel, "cpu.csr.omp");
    spmv_client_solve_result_free(r);
    /* the same matrix again: its dtype is known, one request */
    answer(&server, "200 OK", hdr, xh, 3 * 8); /* the history missing after x */
    assert_int_equal(spmv_client_solve(h, "m64", &o, x, 3, &r), SPMV_CLIENT_ERR_PROTOCOL);
    assert_string_equal(server.lines, "POST /v1/matrices/m64/solve?method=cg&tol=1e-10&maxit=50&preconditioner=jacobi"
                                      "&kernel=cpu.csr.omp&x0=x0&history=true HTTP/1.1\n");
    answer(&server, "200 OK", hdr, want, 16); /* x one value short */
    assert_int_equal(spmv_client_solve(h, "m64", &o, x, 3, &r), SPMV_CLIENT_ERR_PROTOCOL);
    solve_float32(&o);

    /* A JSON answer is taken as well; maxit is no error */
    char body[1024];
    snprintf(body, sizeof body, "%s,\"x\":[3,2,1]}", solve_answer);
    memcpy(strstr(body, "\"converged\":true") + 12, "null", 4); /* not converged */
    answer_json(&server, "200 OK", body);
    assert_int_equal(spmv_client_solve(h, "m64", &o, x, 3, &r), SPMV_CLIENT_OK);
    assert_true(r->has_x && x[0] == 3 && x[2] == 1 && !r->converged);
    assert_null(strstr(r->json, "\"x\""));
    spmv_client_solve_result_free(r);
    answer_json(&server, "200 OK", body);
    assert_int_equal(spmv_client_solve(h, "m64", &o, x, 4, &r), SPMV_CLIENT_ERR_PROTOCOL); /* x is 3, not 4 */

    /* x into a vector: JSON asked for, no Accept */
    snprintf(body, sizeof body, "%s}", solve_answer);
    answer_json(&server, "200 OK", body);
    spmv_client_solve_options xv = {.b_vector = "vb", .x_out_vector = "vx", .restart = 20, .method = "gmres"};
    assert_int_equal(spmv_client_solve(h, "abc", &xv, NULL, 0, &r), SPMV_CLIENT_OK);
    assert_null(strstr(server.request, "Accept: application/octet-stream"));
    assert_non_null(strstr(server.request, "{\"method\":\"gmres\",\"restart\":20,\"b\":{\"vector\":\"vb\"},"
                                           "\"x_out\":{\"vector\":\"vx\"}}"));
    assert_false(r->has_x);
    spmv_client_solve_result_free(r);

    /* async: 202 and a job; its result parses with solve_parse */
    answer_json(&server, "202 Accepted", "{\"id\":\"j9\",\"state\":\"queued\",\"progress\":0}");
    spmv_client_solve_options as = {.b = b, .nb = 3, .async = 1};
    assert_int_equal(spmv_client_solve(h, "m64", &as, x, 3, &r), SPMV_CLIENT_OK);
    assert_string_equal(server.lines, "POST /v1/matrices/m64/solve?async=true HTTP/1.1\n");
    assert_string_equal(r->job_id, "j9");
    spmv_client_solve_result_free(r);
    snprintf(body, sizeof body, "%s,\"x\":[7,8,9]}", solve_answer);
    assert_int_equal(spmv_client_solve_parse(h, body, x, 3, &r), SPMV_CLIENT_OK);
    assert_true(x[1] == 8 && r->iterations == 3);
    spmv_client_solve_result_free(r);
    assert_int_equal(spmv_client_solve_parse(h, "{\"iterations\":-1}", NULL, 0, &r), SPMV_CLIENT_ERR_PROTOCOL);
    assert_null(r);

    /* cancel: 202 with the job, or 204 for a finished one */
    spmv_client_job *j = NULL;
    answer_json(&server, "202 Accepted", "{\"id\":\"j9\",\"state\":\"running\",\"progress\":0.5}");
    assert_int_equal(spmv_client_job_cancel(h, "j9", &j), SPMV_CLIENT_OK);
    assert_non_null(strstr(server.request, "DELETE /v1/jobs/j9 HTTP/1.1"));
    assert_string_equal(j->state, "running");
    spmv_client_job_free(j);
    answer(&server, "204 No Content", NULL, "", 0);
    assert_int_equal(spmv_client_job_cancel(h, "j9", &j), SPMV_CLIENT_OK);
    assert_null(j);
    answer_json(&server, "404 Not Found", "{\"error\":{\"code\":\"not_found\",\"message\":\"no job j9\"}}");
    assert_int_equal(spmv_client_job_cancel(h, "j9", NULL), SPMV_CLIENT_ERR_NOT_FOUND);
}

static const char shm_descriptor[] =
    "{\"name\":\"psm_a\",\"kind\":\"posix\",\"offset\":8,\"size\":4096,\"object_bytes\":8192,\"pinned\":true,"
    "\"state\":\"ok\",\"uses\":3,\"created\":\"2026-11-25T16:02:11Z\"}";

static void test_shm_regions(void **state)
{
    (void)state;
    spmv_client_shm *r = NULL;
    spmv_client_shm_list *l = NULL;

    /* names the daemon would refuse, and sizes, never leave the library */
    static const char *const bad[] = {"", "a/b", "..", ".x", "white space", "caf\xc3\xa9"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(spmv_client_shm_register(h, bad[i], 0, 64, &r), SPMV_CLIENT_ERR_INVALID);
    assert_null(r);
    assert_int_equal(spmv_client_shm_register(h, NULL, 0, 64, NULL), SPMV_CLIENT_ERR_INVALID);
    assert_int_equal(spmv_client_shm_register(h, "psm_a", 0, 0, NULL), SPMV_CLIENT_ERR_INVALID);
    assert_int_equal(spmv_client_shm_register(h, "psm_a", UINT64_MAX - 8, 64, NULL), SPMV_CLIENT_ERR_INVALID);
    assert_int_equal(spmv_client_shm_unregister(h, "../etc"), SPMV_CLIENT_ERR_INVALID);

    answer_json(&server, "201 Created", shm_descriptor);
    assert_int_equal(spmv_client_shm_register(h, "psm_a", 8, 4096, &r), SPMV_CLIENT_OK);
    assert_non_null(strstr(server.request, "POST /v1/shm HTTP/1.1"));
    assert_non_null(strstr(server.request, "Content-Type: application/json"));
    assert_non_null(strstr(server.request, "{\"name\":\"psm_a\",\"offset\":8,\"size\":4096}"));
    assert_string_equal(r->name, "psm_a");
    assert_true(r->offset == 8 && r->size == 4096 && r->object_bytes == 8192 && r->pinned == 1 && r->uses == 3);
    assert_string_equal(r->state, "ok");
    assert_string_equal(r->created, "2026-11-25T16:02:11Z");
    assert_string_equal(r->kind, "posix");
    assert_string_equal(r->device, "");
    assert_non_null(strstr(r->json, "\"object_bytes\":8192"));
    spmv_client_shm_free(r);
    answer_json(&server, "201 Created", shm_descriptor); /* out may be NULL */
    assert_int_equal(spmv_client_shm_register(h, "psm_a", 8, 4096, NULL), SPMV_CLIENT_OK);

    answer_json(&server, "200 OK", "{\"name\":\"psm_a\",\"offset\":0,\"size\":-5}");
    assert_int_equal(spmv_client_shm_get(h, "psm_a", &r), SPMV_CLIENT_ERR_PROTOCOL);
    assert_null(r);
    assert_non_null(strstr(server.request, "GET /v1/shm/psm_a HTTP/1.1"));
    answer_json(&server, "200 OK", "{\"offset\":0,\"size\":5}");
    assert_int_equal(spmv_client_shm_get(h, "psm_a", &r), SPMV_CLIENT_ERR_PROTOCOL);
    answer_json(&server, "200 OK", "{\"name\":\"psm_a\",\"size\":5,\"state\":\"shrunk\",\"object_bytes\":-1,"
                                   "\"kind\":\"cuda\",\"device\":\"gpu1\"}");
    assert_int_equal(spmv_client_shm_get(h, "psm_a", &r), SPMV_CLIENT_OK);
    assert_true(r->pinned == -1 && r->uses == 0 && r->object_bytes == 0);
    assert_string_equal(r->device, "gpu1");
    assert_string_equal(r->state, "shrunk");
    spmv_client_shm_free(r);

    char list[1024];
    snprintf(list, sizeof list, "{\"regions\":[%s,%s]}", shm_descriptor, shm_descriptor);
    answer_json(&server, "200 OK", list);
    assert_int_equal(spmv_client_shm_regions(h, &l), SPMV_CLIENT_OK);
    assert_non_null(strstr(server.request, "GET /v1/shm HTTP/1.1"));
    assert_int_equal(l->count, 2);
    assert_true(l->items[1].size == 4096 && l->json);
    spmv_client_shm_list_free(l);
    answer_json(&server, "200 OK", "{\"regions\":[{\"name\":\"psm_a\",\"uses\":1.5}]}");
    assert_int_equal(spmv_client_shm_regions(h, &l), SPMV_CLIENT_ERR_PROTOCOL);
    assert_null(l);
    answer_json(&server, "200 OK", "{\"regions\":7}");
    assert_int_equal(spmv_client_shm_regions(h, &l), SPMV_CLIENT_ERR_PROTOCOL);

    /* a CUDA region: the handle as 128 hex digits and the device */
    unsigned char handle[SPMV_CLIENT_CUDA_IPC_HANDLE_BYTES];
    for (int i = 0; i < SPMV_CLIENT_CUDA_IPC_HANDLE_BYTES; i++) handle[i] = (unsigned char)(i * 5);
    answer_json(&server, "201 Created", "{\"name\":\"gx\",\"kind\":\"cuda\",\"device\":\"gpu0\",\"offset\":0,"
                                        "\"size\":64,\"object_bytes\":1024,\"pinned\":true,\"state\":\"ok\",\"uses\":0}");
    assert_int_equal(spmv_client_shm_register_cuda(h, "gx", handle, "gpu0", 0, 64, &r), SPMV_CLIENT_OK);
    assert_non_null(strstr(server.request, "\"cuda_ipc\":\"00050a0f14191e23"));
    assert_non_null(strstr(server.request, "\"device\":\"gpu0\""));
    assert_non_null(strstr(server.request, "\"size\":64"));
    assert_string_equal(r->kind, "cuda");
    assert_string_equal(r->device, "gpu0");
    spmv_client_shm_free(r);
    assert_int_equal(spmv_client_shm_register_cuda(h, "gx", NULL, "gpu0", 0, 64, NULL), SPMV_CLIENT_ERR_INVALID);
    assert_int_equal(spmv_client_shm_register_cuda(h, "gx", handle, "", 0, 64, NULL), SPMV_CLIENT_ERR_INVALID);

    answer(&server, "204 No Content", NULL, "", 0);
    assert_int_equal(spmv_client_shm_unregister(h, "psm_a"), SPMV_CLIENT_OK);
    assert_non_null(strstr(server.request, "DELETE /v1/shm/psm_a HTTP/1.1"));
    answer_json(&server, "403 Forbidden", "{\"error\":{\"code\":\"shm_disabled\",\"message\":\"regions are off\"}}");
    assert_int_equal(spmv_client_shm_unregister(h, "psm_a"), SPMV_CLIENT_ERR_UNAUTHORIZED);
    assert_string_equal(spmv_client_errcode(h), "shm_disabled");
    assert_string_equal(spmv_client_errmsg(h), "regions are off");
}

static void test_spmv_shm(void **state)
{
    (void)state;
    double x[4] = {1, 2, 3, 4}, y[6];
    spmv_client_product_result r;
    spmv_client_shm_ref xr = {.name = "psm_a", .offset = 0}, yr = {.name = "psm_a", .offset = 64};
    spmv_client_operands none = {0};

    /* one way per operand, checked before sending */
    spmv_client_operands xin = {.x = x, .nx = 4};
    assert_int_equal(spmv_client_spmv_shm(h, "abc", &xin, &xr, &yr, NULL, NULL), SPMV_CLIENT_ERR_INVALID);
    spmv_client_operands yvec = {.y_vector = "v2"};
    assert_int_equal(spmv_client_spmv_shm(h, "abc", &yvec, &xr, &yr, NULL, NULL), SPMV_CLIENT_ERR_INVALID);
    assert_int_equal(spmv_client_spmv_shm(h, "abc", &none, &xr, NULL, NULL, NULL), SPMV_CLIENT_ERR_INVALID);
    assert_int_equal(spmv_client_spmv_shm(h, "abc", &none, NULL, NULL, NULL, NULL), SPMV_CLIENT_ERR_INVALID);
    spmv_client_shm_ref slash = {.name = "a/b"};
    assert_int_equal(spmv_client_spmv_shm(h, "abc", &none, &slash, &yr, NULL, NULL), SPMV_CLIENT_ERR_INVALID);
    spmv_client_operands beta = {.scale = 1, .alpha = 1, .beta = 2};
    assert_int_equal(spmv_client_spmv_shm(h, "abc", &beta, &xr, &yr, NULL, NULL), SPMV_CLIENT_ERR_INVALID);

    /* x and y in the region: empty body, the JSON statistics as the answer */
    answer_json(&server, "200 OK", "{\"y\":{\"shm\":\"psm_a\",\"offset\":64},\"kernel\":\"cpu.csr.omp\","
                                   "\"stats\":{\"runs\":2,\"median_ms\":0.5},\"queue_ms\":0.25}");
    assert_int_equal(spmv_client_spmv_shm(h, "abc", &none, &xr, &yr, NULL, &r), SPMV_CLIENT_OK);
    assert_non_null(strstr(server.request, "POST /v1/matrices/abc/spmv?x_shm=psm_a&x_offset=0&y_shm=psm_a"
                                           "&y_offset=64 HTTP/1.1"));
    assert_non_null(strstr(server.request, "Content-Length: 0"));
    assert_string_equal(r.spmv.kernel, "cpu.csr.omp");
    assert_true(r.spmv.stats.runs == 2 && r.spmv.queue_ms == 0.25 && isnan(r.axpby_ms));
    /* ... or an empty body with X-SpMV-Stats */
    answer(&server, "200 OK", stats_header, "", 0);
    assert_int_equal(spmv_client_spmv_shm(h, "abc", &none, &xr, &yr, NULL, &r), SPMV_CLIENT_OK);
    assert_string_equal(r.spmv.kernel, "cpu.csr.serial");
    /* ... but not values */
    answer(&server, "200 OK", "Content-Type: application/octet-stream\r\n", x, sizeof x);
    assert_int_equal(spmv_client_spmv_shm(h, "abc", &none, &xr, &yr, NULL, &r), SPMV_CLIENT_ERR_PROTOCOL);

    /* x in the region, y inline: y binary into the buffer */
    double want[6] = {6, 5, 4, 3, 2, 1};
    answer(&server, "200 OK", stats_header, want, sizeof want);
    spmv_client_operands yin = {.y = y, .ny = 6, .op = 't'};
    spmv_client_shm_ref x8 = {.name = "psm_a", .offset = 8};
    assert_int_equal(spmv_client_spmv_shm(h, "abc", &yin, &x8, NULL, NULL, &r), SPMV_CLIENT_OK);
    assert_memory_equal(y, want, sizeof want);
    assert_non_null(strstr(server.request, "POST /v1/matrices/abc/spmv?op=t&x_shm=psm_a&x_offset=8 HTTP/1.1"));
    /* x inline, y in the region: x binary in the body */
    answer(&server, "200 OK", stats_header, "", 0);
    assert_int_equal(spmv_client_spmv_shm(h, "abc", &xin, NULL, &yr, NULL, &r), SPMV_CLIENT_OK);
    assert_non_null(strstr(server.request, "POST /v1/matrices/abc/spmv?dtype=float64&y_shm=psm_a&y_offset=64 "));
    assert_memory_equal(server.request + server.request_len - 32, x, 32);

    /* resident vectors from and into a region */
    spmv_client_vector *v = NULL;
    spmv_client_vector_options like = {.like = "abc", .k = 2};
    spmv_client_shm_ref at16 = {.name = "psm_a", .offset = 16};
    answer_json(&server, "201 Created", vdesc);
    assert_int_equal(spmv_client_vector_create_shm(h, &at16, 0, &like, &v), SPMV_CLIENT_OK);
    assert_non_null(strstr(server.request, "POST /v1/vectors HTTP/1.1"));
    assert_non_null(strstr(server.request, "\"values\":{\"shm\":\"psm_a\",\"offset\":16}"));
    assert_non_null(strstr(server.request, "\"like\":\"abc\""));
    assert_null(strstr(server.request, "\"fill\""));
    assert_string_equal(v->id, "v1");
    spmv_client_vector_free(v);
    answer_json(&server, "200 OK", vdesc);
    assert_int_equal(spmv_client_vector_write_shm(h, "v1", &at16, &v), SPMV_CLIENT_OK);
    assert_non_null(strstr(server.request, "PUT /v1/vectors/v1 HTTP/1.1"));
    assert_non_null(strstr(server.request, "{\"values\":{\"shm\":\"psm_a\",\"offset\":16}}"));
    spmv_client_vector_free(v);
    answer_json(&server, "200 OK", vdesc);
    assert_int_equal(spmv_client_vector_read_shm(h, "v1", &at16, &v), SPMV_CLIENT_OK);
    assert_non_null(strstr(server.request, "GET /v1/vectors/v1?shm=psm_a&offset=16 HTTP/1.1"));
    assert_true(v->n == 3 && v->k == 2);
    spmv_client_vector_free(v);
    assert_int_equal(spmv_client_vector_read_shm(h, "v1", &slash, &v), SPMV_CLIENT_ERR_INVALID);
    assert_int_equal(spmv_client_vector_create_shm(h, NULL, 3, NULL, &v), SPMV_CLIENT_ERR_INVALID);
    assert_int_equal(spmv_client_vector_create_shm(h, &at16, 0, NULL, &v), SPMV_CLIENT_ERR_INVALID); /* no n, no like */

    answer_json(&server, "410 Gone", "{\"error\":{\"code\":\"shm_gone\",\"message\":\"psm_a was unlinked\"}}");
    assert_int_equal(spmv_client_spmv_shm(h, "abc", &none, &xr, &yr, NULL, &r), SPMV_CLIENT_ERR_HTTP);
    assert_string_equal(spmv_client_errcode(h), "shm_gone");
    assert_int_equal(spmv_client_http_status(h), 410);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strerror_and_groups),
        cmocka_unit_test(test_new_refuses_bad_options),
        cmocka_unit_test(test_default_url),
        cmocka_unit_test(test_arguments_checked_before_sending),
        cmocka_unit_test(test_descriptor_parsed_and_request_formed),
        cmocka_unit_test(test_bad_descriptors_are_protocol_errors),
        cmocka_unit_test(test_http_errors_map_and_keep_message),
        cmocka_unit_test(test_multiply_checks_lengths_and_stats),
        cmocka_unit_test(test_jobs),
        cmocka_unit_test(test_job_long_poll),
        cmocka_unit_test(test_lists),
        cmocka_unit_test(test_vector_arguments),
        cmocka_unit_test(test_vector_requests),
        cmocka_unit_test(test_resident_spmv),
        cmocka_unit_test(test_ops),
        cmocka_unit_test(test_solve),
        cmocka_unit_test(test_shm_regions),
        cmocka_unit_test(test_spmv_shm),
    };
    return cmocka_run_group_tests_name("client", tests, setup, teardown);
}
