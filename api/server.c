/* server.c — libmicrohttpd set-up and the one access handler.
 *
 * MHD runs its own thread pool on epoll; every request goes through
 * on_request(), which drives the route's handlers (see api.h) through the
 * three kinds of call MHD makes: the first (headers in), the body chunks,
 * and the final one (body complete, or the connection resumed after a
 * task). Answers can only be queued on the first or the final call (MHD
 * refuses mid-body), so an error found mid-body (a bad Matrix Market line,
 * a body over the limit) is remembered, the rest of the body discarded,
 * and the answer sent at the end.
 *
 * The listening socket is the one systemd passed (LISTEN_FDS) or one MHD
 * binds to `listen`. Without an auth token, binding anything but loopback
 * is refused: the daemon holds other people's data.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/api.h"
#include "api/conns.h"
#include "api/server.h"
#include "daemon/log.h"
#include "daemon/notify.h"

struct api_server {
    spmvd *d;
    struct MHD_Daemon *mhd;
    char *tls_cert, *tls_key;   /* PEM text; MHD keeps pointers to it */
    struct sockaddr_storage addr;
    int listen_fd;              /* socket activation fd, or -1 */
    conn_watcher *watcher;      /* the deadlines of slow clients (api/conns.c) */
    atomic_bool serving;        /* MHD started: its messages are about connections (mhd_log) */
};

const char *const *api_route_labels(size_t *count)
{
    *count = ROUTE_COUNT;
    return api_route_names;
}

/* --------------------------------------------------- request helpers */

const char *api_query(request *r, const char *key)
{
    const char *names[API_QUERY_MAX];
    size_t n = r->h ? api_query_names(r->h->query, names, API_QUERY_MAX) : 0;
    bool declared = false;
    for (size_t i = 0; i < n && i < API_QUERY_MAX && !declared; i++)
        declared = strcmp(names[i], key) == 0;
    if (!declared) /* a route reading what it does not declare: request_begin refused it as unknown */
        log_error("internal: %s %s reads query parameter `%s`, which its handlers do not declare (api.h)", r->method,
                  api_route_path(r->route), key);
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

const char *api_header_in(request *r, const char *key)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, key);
}

bool api_check_content_length(request *r, int64_t limit, const char *key)
{
    const char *cl = api_header_in(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (!cl)
        return true;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(cl, &end, 10);
    if (errno || *end || end == cl) {
        api_error(r, 400, "bad_request", "Content-Length \"%s\" is not a number", cl);
        return false;
    }
    if (n > (unsigned long long)limit) {
        api_error(r, 413, "too_large", "body of %llu bytes is over the limit of %" PRId64 " bytes (%s)", n, limit, key);
        return false;
    }
    return true;
}

void api_body_free(request *r)
{
    if (r->body_buf)
        bufpool_put(r->body_buf);
    else
        free(r->body);
    r->body_buf = NULL;
    r->body = NULL;
    r->body_len = r->body_cap = 0;
}

void api_body_pooled(request *r, int64_t limit)
{
    const char *cl = api_header_in(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    unsigned long long want = cl ? strtoull(cl, NULL, 10) : 0;
    if (r->body || !cl || want == 0 || want > (unsigned long long)limit || !r->d->iobufs)
        return;
    if ((r->body_buf = bufpool_get(r->d->iobufs, (size_t)want + 1))) {
        r->body = r->body_buf->ptr;
        r->body_cap = r->body_buf->cap;
    }
}

void api_body_collect(request *r, const char *data, size_t size, int64_t limit, const char *key)
{
    if (r->failed)
        return;
    r->body_seen += size;
    if (r->body_seen > (uint64_t)limit) {
        api_error(r, 413, "too_large", "body of at least %" PRId64 " bytes is over the limit of %" PRId64 " bytes (%s)",
                  (int64_t)r->body_seen, limit, key);
        api_body_free(r);
        r->body_len = r->body_cap = 0;
        return;
    }
    if (r->body_len + size + 1 > r->body_cap && r->body_buf) { /* sized from Content-Length, which MHD enforces */
        api_error(r, 400, "bad_request", "body longer than its Content-Length");
        api_body_free(r);
        return;
    }
    if (r->body_len + size + 1 > r->body_cap) {
        /* with a Content-Length (already checked against the limit) the
         * first allocation is exact: no copies while a big x arrives */
        size_t cap = r->body_cap ? r->body_cap : 4096;
        const char *cl = r->body_cap ? NULL : api_header_in(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
        unsigned long long want = cl ? strtoull(cl, NULL, 10) : 0;
        if (want > 0 && want <= (unsigned long long)limit)
            cap = (size_t)want + 1;
        while (cap < r->body_len + size + 1)
            cap *= 2;
        char *nb = realloc(r->body, cap);
        if (!nb) {
            api_error(r, 500, "out_of_memory", "out of memory collecting the body");
            return;
        }
        r->body = nb;
        r->body_cap = cap;
    }
    memcpy(r->body + r->body_len, data, size);
    r->body_len += size;
    r->body[r->body_len] = '\0';
}

bool api_suspend(request *r, bool (*hand_off)(request *r, void *ctx), void *ctx)
{
    pthread_mutex_lock(&r->lock);
    MHD_suspend_connection(r->conn);
    r->suspended = true;
    bool handed = hand_off(r, ctx);
    if (!handed) {
        MHD_resume_connection(r->conn);
        r->suspended = false;
    }
    pthread_mutex_unlock(&r->lock);
    return handed;
}

typedef struct submit_ctx {
    worker *w;
    task *t;
    int rc;
} submit_ctx;

static bool submit_to_worker(request *r, void *ctx)
{
    (void)r;
    submit_ctx *c = ctx;
    c->rc = c->w->ops->submit(c->w, c->t, false);
    return c->rc == SPMV_OK;
}

bool api_submit_and_suspend(request *r, worker *w, task *t)
{
    submit_ctx c = {w, t, SPMV_OK};
    if (api_suspend(r, submit_to_worker, &c))
        return true;
    api_error_submit(r, w, c.rc);
    return false;
}

void api_task_status(int status, int *rc, spmv_error *err)
{
    if (status != SPMV_OK) {
        *rc = status;
        spmv_error_set(err, status, 0, "the daemon is shutting down");
    }
}

void api_task_done(request *r)
{
    pthread_mutex_lock(&r->lock);
    r->task_done = true;
    if (r->suspended) {
        r->suspended = false;
        MHD_resume_connection(r->conn);
    }
    pthread_mutex_unlock(&r->lock);
}

matrix *api_get_matrix(request *r)
{
    matrix *m = r->id[0] ? store_get(r->d->store, r->id) : NULL;
    if (!m)
        api_error(r, 404, "not_found", "no matrix %s", r->id);
    return m;
}

#define NAMED_LISTED 8

matrix *api_matrix_ref(request *r, const char *ref, const char *what)
{
    matrix *found[NAMED_LISTED];
    const char *sep = what ? ": " : "";
    what = what ? what : "";
    if (store_id_valid(ref)) {
        matrix *m = store_get(r->d->store, ref);
        if (!m)
            api_error(r, 404, "not_found", "%s%sno matrix %s", what, sep, ref);
        return m;
    }
    size_t n = store_named(r->d->store, ref, true, found, NAMED_LISTED);
    if (n == 1)
        return found[0];
    if (n == 0) {
        api_error(r, 404, "not_found", "%s%sno matrix has the id or name \"%.255s\"", what, sep, ref);
        return NULL;
    }
    char ids[NAMED_LISTED * (MATFILE_ID_LEN + 2) + 8] = "";
    for (size_t i = 0; i < n && i < NAMED_LISTED; i++) {
        snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%s", i ? ", " : "", found[i]->meta.id);
        matrix_unref(found[i]);
    }
    api_error(r, 409, "ambiguous_name", "%s%s%zu matrices are named \"%.255s\" (%s%s); use an id", what, sep, n, ref,
              ids, n > NAMED_LISTED ? ", ..." : "");
    return NULL;
}

/* The path named a matrix by its name: r->id becomes its id. */
static bool resolve_name(request *r)
{
    matrix *m = api_matrix_ref(r, r->name, NULL);
    if (!m)
        return false;
    memcpy(r->id, m->meta.id, sizeof r->id);
    matrix_unref(m);
    return true;
}

bool api_refuse_sharded(request *r, const matrix *m, const char *what)
{
    if (!m || !m->shards)
        return false;
    api_error(r, 422, "unsupported_matrix", "matrix %s is sharded across %d ranks; %s takes whole matrices "
              "(POST /v1/matrices/%s/spmv multiplies sharded ones)", m->meta.id, cluster_matrix_nranks(m->shards), what,
              m->meta.id);
    return true;
}

/* ------------------------------------------------------- auth */

/* Constant-time: the time taken depends on the lengths only. */
static bool token_equal(const char *given, size_t glen, const char *want, size_t wlen)
{
    unsigned char diff = glen != wlen;
    for (size_t i = 0; i < wlen; i++)
        diff |= (unsigned char)(want[i] ^ (i < glen ? given[i] : 0));
    return diff == 0;
}

static bool authorized(request *r)
{
    spmvd *d = r->d;
    if (!d->auth_token || r->route == ROUTE_HEALTH)
        return true;
    const char *h = NULL;
    size_t hlen = 0;
    if (MHD_lookup_connection_value_n(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION,
                                      strlen(MHD_HTTP_HEADER_AUTHORIZATION), &h, &hlen) != MHD_YES)
        h = NULL;
    /* the header's whole length: a NUL inside would cut a C string short,
     * so "Bearer <token>\0anything" must not read as the token (libmicrohttpd
     * 0.9.75 itself ends the value at the NUL, so there it cannot be seen) */
    if (h && !memchr(h, '\0', hlen) && strncasecmp(h, "Bearer ", 7) == 0) {
        const char *tok = h + 7;
        while (*tok == ' ')
            tok++;
        if (token_equal(tok, hlen - (size_t)(tok - h), d->auth_token, d->auth_token_len))
            return true;
    }
    api_error(r, 401, "unauthorized", "%s", h ? "the bearer token is not valid" : "this route needs Authorization: Bearer <token>");
    api_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"spmvd\"");
    return false;
}

/* ------------------------------------------------ request lifecycle */

static bool needs_ready(route_id route)
{
    return route == ROUTE_MATRICES || route == ROUTE_MATRIX || route == ROUTE_SPY ||
           route == ROUTE_SPMV || route == ROUTE_BENCH || route == ROUTE_JOB || route == ROUTE_SPMSPM ||
           route == ROUTE_TUNE || route == ROUTE_VECTORS || route == ROUTE_VECTOR || route == ROUTE_OPS ||
           route == ROUTE_SOLVE || route == ROUTE_JOBS || route == ROUTE_VALUES || route == ROUTE_PRECONDS ||
           route == ROUTE_PRECOND;
}

/* A request's state, made when its request line is in (on_uri) and
 * completed with its path and method on the access handler's first call. */
static request *request_new(spmvd *d, struct MHD_Connection *conn)
{
    request *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->d = d;
    r->conn = conn;
    r->t0 = spmv_now_ms();
    r->route = ROUTE_UNKNOWN;
    pthread_mutex_init(&r->lock, NULL);
    atomic_fetch_add(&d->open_requests, 1);
    return r;
}

/* Content-Length given twice with different values: which one a proxy in
 * front believed is unknown (request smuggling), so neither is taken. */
typedef struct cl_seen {
    const char *first;
    bool conflict;
} cl_seen;

static enum MHD_Result note_content_length(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    cl_seen *c = cls;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) != 0)
        return MHD_YES;
    if (!c->first)
        c->first = value;
    else if (strcmp(c->first, value ? value : "") != 0)
        c->conflict = true;
    return MHD_YES;
}

static bool content_length_conflicts(request *r)
{
    cl_seen c = {NULL, false};
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, note_content_length, &c);
    return c.conflict;
}

/* What a route's {id} names, for its 404 (NULL: no id, or a shm name). */
static const char *id_kind(route_id route)
{
    const char *p = api_route_path(route);
    if (!strstr(p, "{id}"))
        return NULL;
    if (strncmp(p, "/v1/jobs/", 9) == 0)
        return "job";
    if (strncmp(p, "/v1/preconditioners/", 20) == 0)
        return "preconditioner";
    return strncmp(p, "/v1/vectors/", 12) == 0 ? "vector" : "matrix";
}

/* The {id} segment: a UUID goes to r->id; a matrix's may be its name
 * (r->name, resolved once the store is ready). false with 404 answered. */
static bool take_id(request *r, const char *seg, size_t n)
{
    const char *kind = id_kind(r->route);
    if (!kind)
        return true;
    if (n == MATFILE_ID_LEN) {
        memcpy(r->id, seg, n);
        r->id[n] = '\0';
        if (store_id_valid(r->id))
            return true;
        r->id[0] = '\0';
    }
    if (strcmp(kind, "matrix") == 0 && n <= MATFILE_NAME_MAX) {
        memcpy(r->name, seg, n);
        r->name[n] = '\0';
        return true;
    }
    api_error(r, 404, "not_found", "%s is not a %s id (ids are UUIDs as the daemon returns them%s)", r->path, kind,
              strcmp(kind, "matrix") == 0 ? "; a matrix's name has at most 255 bytes" : "");
    return false;
}

/* Whether Content-Type is what the route reads (api_body); 415 if not.
 * Types are compared whole, up to their parameters. */
static bool media_is(const char *ct, const char *type)
{
    size_t n = strlen(type);
    return strncasecmp(ct, type, n) == 0 && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

/* What an upload (API_BODY_OWN) takes: a matrix file, raw or in a form. */
static bool upload_type(const char *ct)
{
    static const char *const types[] = {"multipart/form-data", "application/octet-stream",
                                        "application/x-www-form-urlencoded", "application/gzip", "application/x-gzip",
                                        "application/zip", "application/x-zip-compressed", "application/x-npz",
                                        "application/x-matrix-market", NULL};
    if (strncasecmp(ct, "text/", 5) == 0)
        return true;
    for (const char *const *t = types; *t; t++)
        if (media_is(ct, *t))
            return true;
    return false;
}

static bool content_type_ok(request *r)
{
    const char *ct = api_header_in(r, MHD_HTTP_HEADER_CONTENT_TYPE);
    api_body b = r->h->body_kind;
    if (b == API_BODY_NONE || (b == API_BODY_OWN && (!ct || upload_type(ct))))
        return true;
    if (b == API_BODY_OWN) {
        api_error(r, 415, "unsupported_media_type", "Content-Type %.100s: %s %s takes a Matrix Market or .npz file "
                  "(raw, gzip, or multipart/form-data)", ct, r->method, api_route_path(r->route));
        return false;
    }
    if (b != API_BODY_JSON && ct && media_is(ct, "application/octet-stream")) {
        r->binary = true;
        return true;
    }
    if (b != API_BODY_BINARY && (!ct || media_is(ct, "application/json") || media_is(ct, "application/x-www-form-urlencoded")))
        return true;
    if (b == API_BODY_BINARY && !ct) {
        r->binary = true;
        return true;
    }
    api_error(r, 415, "unsupported_media_type", "Content-Type %s: %s %s reads %s", ct ? ct : "(none)", r->method,
              api_route_path(r->route), b == API_BODY_JSON ? "application/json"
                                        : b == API_BODY_BINARY ? "application/octet-stream"
                                                               : "application/json or application/octet-stream");
    return false;
}

/* Every query parameter must be one the route reads (api.h); with a JSON
 * body, none. The first that is not, or one given twice, is answered. */
typedef struct query_seen {
    const char *names[API_QUERY_MAX];
    size_t n;
    uint64_t seen;
    const char *bad;
    bool twice;
} query_seen;

static enum MHD_Result note_query(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    (void)value;
    query_seen *q = cls;
    for (size_t i = 0; i < q->n; i++)
        if (strcmp(q->names[i], key) == 0) {
            q->twice = q->seen & (UINT64_C(1) << i);
            q->seen |= UINT64_C(1) << i;
            if (!q->twice)
                return MHD_YES;
            break;
        }
    q->bad = key;
    return MHD_NO;
}

/* The first query parameter not in list (or given twice), or NULL. */
static const char *query_check(request *r, const char *const *list, query_seen *q)
{
    memset(q, 0, sizeof *q);
    q->n = api_query_names(list, q->names, API_QUERY_MAX);
    if (q->n > API_QUERY_MAX)
        q->n = API_QUERY_MAX;
    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, note_query, q);
    return q->bad;
}

static bool query_ok(request *r)
{
    const char *const *allowed = r->h->query ? r->h->query : api_no_query;
    bool json = !r->h->query_with_json &&
                (r->h->body_kind == API_BODY_JSON || (r->h->body_kind == API_BODY_JSON_OR_BINARY && !r->binary));
    query_seen q;
    if (!query_check(r, json ? api_no_query : allowed, &q))
        return true;
    if (q.twice) {
        api_error(r, 400, "invalid_parameter", "query parameter `%.64s` is given twice", q.bad);
        return false;
    }
    const char *route = api_route_path(r->route);
    char list[1024] = "";
    size_t n = api_query_names(allowed, q.names, API_QUERY_MAX);
    for (size_t i = 0; i < n && i < API_QUERY_MAX; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", q.names[i]);
    if (json && n)
        api_error(r, 400, "unknown_parameter", "unknown query parameter `%.64s`: with a JSON body %s %s takes its options "
                  "in the body (the query string, %s, goes with Content-Type: application/octet-stream)", q.bad,
                  r->method, route, list);
    else if (json)
        api_error(r, 400, "unknown_parameter", "unknown query parameter `%.64s`: %s %s takes no query parameters (its "
                  "options are in the JSON body)", q.bad, r->method, route);
    else
        api_error(r, 400, "unknown_parameter", "unknown query parameter `%.64s`: %s %s takes %s%s", q.bad, r->method,
                  route, n ? "" : "no query parameters", list);
    return false;
}

bool api_query_empty(request *r, const char *why)
{
    query_seen q;
    if (query_check(r, api_no_query, &q))
        api_error(r, 400, "unknown_parameter", "unknown query parameter `%.64s`: %s", q.bad, why);
    return !q.bad;
}

/* The most query arguments a request may carry: libmicrohttpd keeps each
 * in the connection's memory pool, and one that runs out of it while it
 * parses them never answers (the client waits for connection_timeout). */
static size_t max_query_args(const spmvd *d) { return (size_t)d->cfg.connection_memory_limit / 256; }

/* Whether a body follows the headers (a Content-Length above 0, or chunks). */
static bool has_body(request *r)
{
    const char *cl = api_header_in(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    return api_header_in(r, MHD_HTTP_HEADER_TRANSFER_ENCODING) || (cl && strtoull(cl, NULL, 10) > 0);
}

/* What the headers alone can refuse, before the route is known. */
static bool headers_ok(request *r)
{
    if (r->query_args) {
        api_error(r, 414, "uri_too_long", "the query string has %zu arguments; at most %zu are read",
                  r->query_args, max_query_args(r->d));
        return false;
    }
    if (content_length_conflicts(r)) {
        api_error(r, 400, "bad_request", "Content-Length given twice with different values");
        return false;
    }
    /* a proxy in front may have framed the body by the other one (request
     * smuggling): RFC 9112 6.3 lets a server refuse, and we do */
    if (api_header_in(r, MHD_HTTP_HEADER_TRANSFER_ENCODING) && api_header_in(r, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
        api_error(r, 400, "bad_request", "Content-Length together with Transfer-Encoding: send one of them");
        return false;
    }
    return true;
}

static void request_begin(request *r)
{
    const char *allow, *seg;
    size_t seglen;
    r->route = api_route_match(r->path ? r->path : "", &seg, &seglen);
    /* before anything that tells routes apart (404, 405): without the
     * token a client learns nothing but that it needs one */
    if (!authorized(r) || !headers_ok(r))
        return;
    if (r->route == ROUTE_UNKNOWN) {
        api_error(r, 404, "not_found", "no route %s %s", r->method, r->path ? r->path : "");
        return;
    }
    r->h = api_route_handlers(r->route, r->method, &allow);
    if (!r->h) {
        api_error(r, 405, "method_not_allowed", "%s does not take %s (allowed: %s)", r->path, r->method, allow);
        api_header(r, MHD_HTTP_HEADER_ALLOW, allow);
        return;
    }
    if ((seg && !take_id(r, seg, seglen)) || !content_type_ok(r) || !query_ok(r))
        return;
    if (atomic_load(&r->d->draining)) {
        api_error_shutting_down(r);
        return;
    }
    if (needs_ready(r->route) && !atomic_load(&r->d->ready)) {
        api_error(r, 503, "not_ready", "the daemon is still loading its stored matrices");
        return;
    }
    if (r->name[0] && !resolve_name(r))
        return;
    if (r->h->begin)
        r->h->begin(r);
}

static enum MHD_Result flush(request *r)
{
    if (!r->resp || r->queued)
        return MHD_YES;
    r->queued = true;
    enum MHD_Result rc = MHD_queue_response(r->conn, (unsigned)r->status, r->resp);
    MHD_destroy_response(r->resp);
    r->resp = NULL;
    return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    (void)version;
    spmvd *d = cls;
    request *r = *con_cls;
    if (!r && !(r = *con_cls = request_new(d, conn)))
        return MHD_NO;
    if (!r->begun) {
        /* The headers are in. The answer is queued only once the whole
         * request is, so the connection can stay open for the next one;
         * a request refused before its body is answered at once (its body
         * is never read, and MHD closes the connection after). */
        r->begun = true;
        r->path = strdup(url);
        snprintf(r->method, sizeof r->method, "%s", method);
        r->watch = conn_watch_of(conn);
        bool body = has_body(r);
        conn_watch_headers_in(r->watch, body);
        request_begin(r);
        if (!r->resp || !body)
            return MHD_YES;
        conn_watch_body_in(r->watch);
        return flush(r);
    }
    if (*upload_data_size > 0) {
        conn_watch_bytes(r->watch, *upload_data_size);
        if (!r->failed && !r->resp && r->h && r->h->accepts_body && r->h->body)
            r->h->body(r, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (r->queued)
        return MHD_YES;
    conn_watch_body_in(r->watch);
    if (!r->ended) {
        r->ended = true;
        if (!r->resp && r->h && r->h->end)
            r->h->end(r);
    } else {
        pthread_mutex_lock(&r->lock);
        bool done = r->task_done;
        pthread_mutex_unlock(&r->lock);
        if (done && !r->resp && r->h && r->h->resumed)
            r->h->resumed(r);
    }
    pthread_mutex_lock(&r->lock);
    bool waiting = r->suspended || r->task_done;
    pthread_mutex_unlock(&r->lock);
    if (!r->resp && !waiting)
        api_error(r, 500, "internal", "the request was not answered");
    return flush(r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)conn;
    spmvd *d = cls;
    request *r = *con_cls;
    if (!r)
        return;
    double ms = spmv_now_ms() - r->t0;
    int status = r->queued ? r->status : 0;
    if (status)
        log_info("%s %s %d %zu B %.3f ms", r->method, r->path ? r->path : "?", status, r->resp_bytes, ms);
    else
        log_info("%s %s aborted (%s) after %.3f ms", r->begun ? r->method : "a request",
                 r->path ? r->path : "(headers incomplete)",
                 toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED ? "timeout" : "connection closed", ms);
    metrics_request(d->metrics, r->route, status, ms);
    if (r->h && r->h->cleanup)
        r->h->cleanup(r);
    conn_watch_answered(r->watch); /* kept alive: the next request's headers are awaited */
    if (r->resp)
        MHD_destroy_response(r->resp);
    api_body_free(r);
    free(r->path);
    pthread_mutex_destroy(&r->lock);
    free(r);
    *con_cls = NULL;
    atomic_fetch_sub(&d->open_requests, 1);
}

/* The request line is in: the request's state is made here, before
 * libmicrohttpd parses the query string. One with too many arguments is
 * cut at its `?` (the pool could not hold them) and answered 414. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    spmvd *d = cls;
    request *r = request_new(d, conn);
    char *q = strchr(uri, '?');
    if (!r || !q)
        return r;
    size_t args = 1;
    for (const char *p = q; *p; p++)
        args += *p == '&';
    if (args > max_query_args(d)) {
        r->query_args = args;
        q[1] = '\0'; /* MHD's own buffer, parsed after this returns: no arguments are left to it */
    }
    return r;
}

static int hex_value(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Percent-decoding of the path and the query string, in place: as MHD's
 * own, except that %00 is left as it is, so a NUL never cuts a path or a
 * value short ("/v1/matrices/<id>%00/spmv" would otherwise read as
 * "/v1/matrices/<id>"); the id check then refuses it. */
static size_t unescape_no_nul(void *cls, struct MHD_Connection *conn, char *s)
{
    (void)cls;
    (void)conn;
    char *w = s;
    for (const char *p = s; *p; p++) {
        int hi = p[0] == '%' ? hex_value(p[1]) : -1, lo = hi >= 0 ? hex_value(p[2]) : -1;
        if (lo >= 0 && (hi | lo) != 0) {
            *w++ = (char)(hi * 16 + lo);
            p += 2;
        } else {
            *w++ = *p;
        }
    }
    *w = '\0';
    return (size_t)(w - s);
}

/* libmicrohttpd's messages: at warn while it starts (why it cannot), at
 * info once it serves, where they are about single connections (a client
 * that closed, a header too large): a flood of slow clients cut by the
 * deadlines would otherwise write a warning a socket. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    const api_server *s = cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    if (s && atomic_load(&s->serving))
        log_info("http: %s", msg);
    else
        log_warn("http: %s", msg);
}

/* ---------------------------------------------------------- start */

static bool is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
            return true;
        return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127;
    }
    return sa->sa_family == AF_UNIX;
}

static int resolve_listen(api_server *s, const char *listen, socklen_t *len, spmv_error *err)
{
    char host[256], port[16], why[256];
    int p;
    if (config_split_listen(listen, host, sizeof host, &p, why, sizeof why) != 0)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "config key `listen`: %s", why);
    snprintf(port, sizeof port, "%d", p);
    struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(strcmp(host, "*") == 0 ? NULL : host, port, &hints, &res);
    if (rc != 0 || !res)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "config key `listen`: cannot resolve \"%s\": %s",
                              host, gai_strerror(rc));
    memcpy(&s->addr, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return SPMV_OK;
}

static char *read_text_file(const char *path, size_t max)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(max + 1);
    size_t n = buf ? fread(buf, 1, max, f) : 0;
    fclose(f);
    if (!buf || n == max) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

static int load_tls(api_server *s, const spmvd_config *c, spmv_error *err)
{
    if (!c->tls_cert)
        return SPMV_OK;
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "TLS is configured but this libmicrohttpd has no TLS support");
    s->tls_cert = read_text_file(c->tls_cert, 1 << 20);
    s->tls_key = read_text_file(c->tls_key, 1 << 20);
    if (!s->tls_cert)
        return spmv_error_set(err, SPMV_ERR_IO, 0, "config key `tls_cert`: cannot read %s", c->tls_cert);
    if (!s->tls_key)
        return spmv_error_set(err, SPMV_ERR_IO, 0, "config key `tls_key`: cannot read %s", c->tls_key);
    return SPMV_OK;
}

/* libmicrohttpd's options from the configuration, into opts (20 at most). */
static void mhd_options(api_server *s, struct MHD_OptionItem *opts)
{
    const spmvd_config *c = &s->d->cfg;
    int n = 0;
    /* first, so MHD's own start-up messages go through it too */
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log, s};
    if (c->threads > 1)
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)c->threads, NULL};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)c->connection_timeout, NULL};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)c->connection_memory_limit, NULL};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, (intptr_t)c->max_connections, NULL};
    if (c->per_ip_connections > 0)
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_PER_IP_CONNECTION_LIMIT, (intptr_t)c->per_ip_connections, NULL};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, s->d};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)conn_watcher_notify, s->watcher};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)on_uri, s->d};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_UNESCAPE_CALLBACK, (intptr_t)unescape_no_nul, NULL};
    if (s->listen_fd >= 0)
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, s->listen_fd, NULL};
    else
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, &s->addr};
    if (s->tls_cert) {
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, s->tls_cert};
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, s->tls_key};
    }
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
}

int api_server_start(spmvd *d, api_server **out, spmv_error *err)
{
    const spmvd_config *c = &d->cfg;
    api_server *s = calloc(1, sizeof *s);
    socklen_t alen = 0;
    int rc;
    if (!s)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory");
    s->d = d;
    s->listen_fd = notify_listen_fd();
    if (s->listen_fd == -2) {
        rc = spmv_error_set(err, SPMV_ERR_INVALID, 0, "socket activation passed more than one socket; spmvd serves one");
        goto fail;
    }
    if (s->listen_fd >= 0) {
        alen = sizeof s->addr;
        if (getsockname(s->listen_fd, (struct sockaddr *)&s->addr, &alen) != 0) {
            rc = spmv_error_set(err, SPMV_ERR_IO, 0, "socket activation fd: %s", strerror(errno));
            goto fail;
        }
    } else if ((rc = resolve_listen(s, c->listen, &alen, err)) != 0) {
        goto fail;
    }
    if (!d->auth_token && !is_loopback((struct sockaddr *)&s->addr)) {
        rc = spmv_error_set(err, SPMV_ERR_INVALID, 0,
                            "refusing to listen on %s without authentication: set auth_token_file "
                            "(--auth-token-file) or listen on a loopback address",
                            s->listen_fd >= 0 ? "the passed socket's non-loopback address" : c->listen);
        goto fail;
    }
    if ((rc = load_tls(s, c, err)) != 0)
        goto fail;

    if (!(s->watcher = conn_watcher_new(c))) {
        rc = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "cannot start the connection watcher");
        goto fail;
    }
    struct MHD_OptionItem opts[20];
    mhd_options(s, opts);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG | (s->addr.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0) |
                     (s->tls_cert ? MHD_USE_TLS : 0);
    s->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, d, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
    if (!s->mhd) {
        rc = spmv_error_set(err, SPMV_ERR_IO, 0, "cannot start the HTTP server on %s (address in use? bad TLS files?)",
                            s->listen_fd >= 0 ? "the socket-activation fd" : c->listen);
        goto fail;
    }
    atomic_store(&s->serving, true);
    log_info("listening on %s%s%s", s->listen_fd >= 0 ? "the socket passed by systemd" : c->listen,
             s->tls_cert ? " (TLS)" : "", d->auth_token ? " (bearer token required)" : "");
    *out = s;
    return SPMV_OK;
fail:
    conn_watcher_free(s->watcher);
    free(s->tls_cert);
    free(s->tls_key);
    free(s);
    return rc;
}

void api_server_quiesce(api_server *s)
{
    if (!s || !s->mhd)
        return;
    MHD_socket fd = MHD_quiesce_daemon(s->mhd);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
}

void api_server_stop(api_server *s, double wait_ms)
{
    if (!s)
        return;
    double t0 = spmv_now_ms();
    while (atomic_load(&s->d->open_requests) > 0 && spmv_now_ms() - t0 < wait_ms) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    long left = atomic_load(&s->d->open_requests);
    if (left > 0)
        log_warn("stopping with %ld request(s) still open (clients slow to send or read)", left);
    conn_watcher_halt(s->watcher);
    MHD_stop_daemon(s->mhd);
    conn_watcher_free(s->watcher);
    free(s->tls_cert);
    free(s->tls_key);
    free(s);
}
