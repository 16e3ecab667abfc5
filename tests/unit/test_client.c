/* test_client.c — libspmvclient against a server that lies.
 *
 * The end-to-end suite (tests/e2e/clients.sh) runs the library against the
 * real daemon, which answers correctly. This suite checks what a correct
 * daemon never provokes: that the library refuses answers that do not fit
 * (sizes out of range, y longer or shorter than asked, a missing stats
 * header, JSON that is not JSON, job progress outside 0..1), maps each HTTP
 * error status to its spmv_client_status, keeps the server's message, and
 * refuses bad arguments before sending anything. The "server" is a thread
 * on a loopback port that reads one request and writes back a canned
 * answer; the test sets the answer before each call and can read the
 * request the library sent.
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
#include <unistd.h>

#include "clients/spmvclient.h"

/* ---------------------------------------------------------- canned server */

typedef struct canned {
    int listen_fd;
    int port;
    pthread_t thread;
    pthread_mutex_t lock;
    char answer[1 << 16];
    size_t answer_len;
    char request[1 << 16];    /* the last request's head and body */
    size_t request_len;
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
        size_t off = 0;
        while (off < s->answer_len) {
            ssize_t n = write(fd, s->answer + off, s->answer_len - off);
            if (n <= 0) break;
            off += (size_t)n;
        }
        pthread_mutex_unlock(&s->lock);
        close(fd);
    }
}

/* Sets the next answer: status line, extra headers, body of len bytes. */
static void answer(canned *s, const char *status, const char *headers, const void *body, size_t len)
{
    pthread_mutex_lock(&s->lock);
    int n = snprintf(s->answer, sizeof s->answer,
                     "HTTP/1.1 %s\r\nConnection: close\r\nContent-Length: %zu\r\n%s\r\n", status, len,
                     headers ? headers : "");
    assert_true(n > 0 && (size_t)n + len < sizeof s->answer);
    memcpy(s->answer + n, body, len);
    s->answer_len = (size_t)n + len;
    pthread_mutex_unlock(&s->lock);
}

static void answer_json(canned *s, const char *status, const char *json)
{
    answer(s, status, "Content-Type: application/json\r\n", json, strlen(json));
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
    assert_null(spmv_client_new(NULL, NULL, &why));
    assert_int_equal(why, SPMV_CLIENT_ERR_INVALID);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strerror_and_groups),
        cmocka_unit_test(test_new_refuses_bad_options),
        cmocka_unit_test(test_arguments_checked_before_sending),
        cmocka_unit_test(test_descriptor_parsed_and_request_formed),
        cmocka_unit_test(test_bad_descriptors_are_protocol_errors),
        cmocka_unit_test(test_http_errors_map_and_keep_message),
        cmocka_unit_test(test_multiply_checks_lengths_and_stats),
        cmocka_unit_test(test_jobs),
        cmocka_unit_test(test_lists),
    };
    return cmocka_run_group_tests_name("client", tests, setup, teardown);
}
