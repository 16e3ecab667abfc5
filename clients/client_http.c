/* client_http.c — libspmvclient's transport: the handle, libcurl, and the
 * one request function every call of the library goes through.
 *
 * spmvc_request() takes a request as the resource files state it (method;
 * a path, or a collection, id and suffix; a query; a JSON or binary body
 * or a multipart form; a binary sink; whether the answer must be JSON),
 * runs it on the handle's one curl easy handle, and turns what came back
 * into an spmv_client_status plus the handle's error detail: the server's
 * {"error":{"code","message"}} verbatim, or libcurl's words. The handle is
 * reset before each request (curl_easy_reset keeps the connection cache,
 * so keep-alive still works) so no option leaks from one call to the next.
 * The rest of this file is what the resource files share around it: the
 * status names, the query and body builders, id checks, the JSON readers,
 * and the readers of one descriptor and of a list; and the default URL
 * ($SPMVD_URL, else $SPMV_URL) of spmv_client_new(NULL, ...). A long poll
 * (request.hold_ms) has its wait added to the handle's timeout.
 *
 * Nothing from the server is trusted: bodies are capped in size, JSON
 * numbers that become counts are checked for range and integrality, and a
 * binary answer must be exactly as long as the caller asked for.
 */
#include "client_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* JSON answers are small (descriptors, job tables); anything past this is
 * a misbehaving server, not a bigger answer. */
#define MAX_JSON_BODY ((size_t)64 << 20)
#define DEFAULT_CONNECT_MS 10000L
/* A query string (kernel parameters, ids, region names) stays short. */
#define MAX_QUERY ((size_t)1 << 16)

/* ---------------------------------------------------------------- status */

const char *spmv_client_strerror(int status)
{
    switch (status) {
    case SPMV_CLIENT_OK: return "success";
    case SPMV_CLIENT_ERR_INVALID: return "invalid argument";
    case SPMV_CLIENT_ERR_NOMEM: return "out of memory";
    case SPMV_CLIENT_ERR_IO: return "local file could not be read or written";
    case SPMV_CLIENT_ERR_UNREACHABLE: return "server unreachable";
    case SPMV_CLIENT_ERR_TIMEOUT: return "request timed out";
    case SPMV_CLIENT_ERR_TRANSPORT: return "transfer failed";
    case SPMV_CLIENT_ERR_PROTOCOL: return "malformed answer from the server";
    case SPMV_CLIENT_ERR_ABORTED: return "aborted by the progress callback";
    case SPMV_CLIENT_ERR_BAD_REQUEST: return "bad request";
    case SPMV_CLIENT_ERR_UNAUTHORIZED: return "not authorised (token missing or wrong, or refused by the daemon's settings)";
    case SPMV_CLIENT_ERR_NOT_FOUND: return "not found";
    case SPMV_CLIENT_ERR_CONFLICT: return "conflict";
    case SPMV_CLIENT_ERR_TOO_LARGE: return "request too large";
    case SPMV_CLIENT_ERR_BAD_MATRIX: return "matrix refused";
    case SPMV_CLIENT_ERR_HTTP: return "request refused by the server";
    case SPMV_CLIENT_ERR_BUSY: return "server busy or not ready";
    case SPMV_CLIENT_ERR_DEVICE_MEMORY: return "device memory full";
    case SPMV_CLIENT_ERR_SERVER: return "server error";
    case SPMV_CLIENT_ERR_JOB_FAILED: return "job failed";
    default: return "unknown status";
    }
}

int spmv_client_status_is_client_error(int status)
{
    return status <= SPMV_CLIENT_ERR_BAD_REQUEST && status >= SPMV_CLIENT_ERR_HTTP;
}

int spmv_client_status_is_server_error(int status)
{
    return status <= SPMV_CLIENT_ERR_BUSY && status >= SPMV_CLIENT_ERR_SERVER;
}

static spmv_client_status status_from_http(long code)
{
    switch (code) {
    case 400: case 405: case 415: return SPMV_CLIENT_ERR_BAD_REQUEST;
    case 401: case 403: return SPMV_CLIENT_ERR_UNAUTHORIZED;
    case 404: return SPMV_CLIENT_ERR_NOT_FOUND;
    case 409: return SPMV_CLIENT_ERR_CONFLICT;
    case 413: return SPMV_CLIENT_ERR_TOO_LARGE;
    case 422: return SPMV_CLIENT_ERR_BAD_MATRIX;
    case 503: return SPMV_CLIENT_ERR_BUSY;
    case 507: return SPMV_CLIENT_ERR_DEVICE_MEMORY;
    default: break;
    }
    if (code >= 500) return SPMV_CLIENT_ERR_SERVER;
    if (code >= 400) return SPMV_CLIENT_ERR_HTTP;
    return SPMV_CLIENT_ERR_PROTOCOL; /* 1xx/3xx where a final answer was due */
}

/* Records the error detail on the handle and returns status. */
__attribute__((format(printf, 3, 4)))
spmv_client_status spmvc_fail(spmv_client *h, spmv_client_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->errmsg, sizeof h->errmsg, fmt, ap);
    va_end(ap);
    return status;
}

void spmvc_clear_error(spmv_client *h)
{
    h->errmsg[0] = '\0';
    h->errcode[0] = '\0';
    h->curl_err[0] = '\0';
    h->http_status = 0;
    h->retry_after = 0;
}

const char *spmv_client_errmsg(const spmv_client *h) { return h ? h->errmsg : ""; }
const char *spmv_client_errcode(const spmv_client *h) { return h ? h->errcode : ""; }
long spmv_client_http_status(const spmv_client *h) { return h ? h->http_status : 0; }
long spmv_client_retry_after(const spmv_client *h) { return h ? h->retry_after : 0; }
void spmv_client_string_free(char *s) { free(s); }

/* --------------------------------------------------------------- handles */

static bool url_is_http(const char *url)
{
    return strncmp(url, "http://", 7) == 0 || strncmp(url, "https://", 8) == 0;
}

/* $SPMVD_URL, else $SPMV_URL (its older name), else the default address. */
const char *spmv_client_default_url(void)
{
    static const char *const vars[] = {"SPMVD_URL", "SPMV_URL"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return v;
    }
    return "http://127.0.0.1:8080";
}

spmv_client *spmv_client_new(const char *url, const spmv_client_options *opts, spmv_client_status *why)
{
    spmv_client_status st = SPMV_CLIENT_ERR_INVALID;
    spmv_client *h = NULL;
    bool global = false;

    if (!url)
        url = spmv_client_default_url();
    if (!url || !url_is_http(url) || strlen(url) > 4096)
        goto fail;
    if (opts && (opts->connect_timeout_ms < 0 || opts->timeout_ms < 0))
        goto fail;
    st = SPMV_CLIENT_ERR_NOMEM;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        goto fail;
    global = true;
    h = calloc(1, sizeof *h);
    if (!h)
        goto fail;
    h->base = strdup(url);
    h->curl = curl_easy_init();
    if (!h->base || !h->curl)
        goto fail;
    for (size_t n = strlen(h->base); n > 0 && h->base[n - 1] == '/'; n--)
        h->base[n - 1] = '\0';
    h->connect_ms = opts && opts->connect_timeout_ms ? opts->connect_timeout_ms : DEFAULT_CONNECT_MS;
    h->total_ms = opts ? opts->timeout_ms : 0;
    h->insecure = opts ? opts->insecure : 0;
    if (opts && opts->token && *opts->token) {
        if (strpbrk(opts->token, "\r\n")) {
            st = SPMV_CLIENT_ERR_INVALID;
            goto fail;
        }
        if (asprintf(&h->auth_header, "Authorization: Bearer %s", opts->token) < 0) {
            h->auth_header = NULL;
            goto fail;
        }
    }
    if (opts && opts->ca_file && !(h->ca_file = strdup(opts->ca_file)))
        goto fail;
    if (why) *why = SPMV_CLIENT_OK;
    return h;
fail:
    if (h) {
        spmv_client_free(h);
    } else if (global) {
        curl_global_cleanup();
    }
    if (why) *why = st;
    return NULL;
}

void spmv_client_free(spmv_client *h)
{
    if (!h)
        return;
    if (h->curl)
        curl_easy_cleanup(h->curl);
    free(h->base);
    free(h->auth_header);
    free(h->ca_file);
    free(h);
    curl_global_cleanup(); /* reference-counted by libcurl: pairs with _new */
}

/* ---------------------------------------------------------------- buffer */

static bool buffer_append(buffer *b, const void *data, size_t n)
{
    if (n > b->limit - b->len)
        return false;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p)
            return false;
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
    return true;
}

/* ------------------------------------------------------------- transfers */

static size_t on_body(char *data, size_t size, size_t nmemb, void *user)
{
    response *r = user;
    size_t n = size * nmemb;
    long code = 0;

    curl_easy_getinfo(r->curl, CURLINFO_RESPONSE_CODE, &code);
    if (r->to_sink < 0) {
        const char *ctype = NULL;
        curl_easy_getinfo(r->curl, CURLINFO_CONTENT_TYPE, &ctype);
        r->to_sink = r->req->sink && code >= 200 && code < 300 &&
                     (!r->req->sink_if_binary ||
                      (ctype && strncasecmp(ctype, "application/octet-stream", 24) == 0));
    }
    if (r->to_sink) {
        size_t room = r->req->sink_cap - r->sink_len, take = n < room ? n : room;
        if (n > room && !r->req->sink_then_body) {
            r->sink_overflow = true;
            return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
        }
        memcpy((char *)r->req->sink + r->sink_len, data, take);
        r->sink_len += take;
        if (take == n)
            return n;
        return buffer_append(&r->body, data + take, n - take) ? n : 0; /* what follows the sink */
    }
    return buffer_append(&r->body, data, n) ? n : 0;
}

/* The value of header line `data` (n bytes) when it is `name` ("x-...:"),
 * trimmed, into *dst (replacing what was there). */
static void keep_header(const char *data, size_t n, const char *name, char **dst)
{
    size_t nl = strlen(name);
    if (n <= nl || strncasecmp(data, name, nl) != 0)
        return;
    const char *v = data + nl;
    size_t len = n - nl;
    while (len && (*v == ' ' || *v == '\t')) v++, len--;
    while (len && (v[len - 1] == '\r' || v[len - 1] == '\n' || v[len - 1] == ' ')) len--;
    free(*dst);
    *dst = strndup(v, len);
}

/* Picks X-SpMV-Stats (and the request's meta header) out of the headers;
 * Retry-After is read through CURLINFO_RETRY_AFTER instead. A new status
 * line (a 100 Continue before the answer) forgets what came before. */
static size_t on_header(char *data, size_t size, size_t nitems, void *user)
{
    response *r = user;
    size_t n = size * nitems;

    if (n > 5 && strncmp(data, "HTTP/", 5) == 0) {
        r->to_sink = -1;
        return n;
    }
    keep_header(data, n, "x-spmv-stats:", &r->stats_header);
    if (r->req->meta_name)
        keep_header(data, n, r->req->meta_name, &r->meta_header);
    return n;
}

static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow;
    const request *req = user;
    return req->progress(req->progress_user, (uint64_t)(ulnow > 0 ? ulnow : 0),
                         (uint64_t)(ultotal > 0 ? ultotal : 0));
}

static spmv_client_status status_from_curl(spmv_client *h, CURLcode rc, const response *r)
{
    const char *detail = h->curl_err[0] ? h->curl_err : curl_easy_strerror(rc);
    switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
        return spmvc_fail(h, SPMV_CLIENT_ERR_UNREACHABLE, "%s: %s", h->base, detail);
    case CURLE_OPERATION_TIMEDOUT:
        return spmvc_fail(h, SPMV_CLIENT_ERR_TIMEOUT, "%s: %s", h->base, detail);
    case CURLE_ABORTED_BY_CALLBACK:
        return spmvc_fail(h, SPMV_CLIENT_ERR_ABORTED, "upload aborted by the progress callback");
    case CURLE_WRITE_ERROR:
        if (r->sink_overflow)
            return spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the answer is longer than the %zu bytes expected",
                              r->req->sink_cap);
        return spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the answer is larger than %zu bytes or memory ran out",
                          r->body.limit);
    case CURLE_READ_ERROR:
        return spmvc_fail(h, SPMV_CLIENT_ERR_IO, "reading the upload failed: %s", detail);
    case CURLE_OUT_OF_MEMORY:
        return spmvc_fail(h, SPMV_CLIENT_ERR_NOMEM, "%s", detail);
    default:
        return spmvc_fail(h, SPMV_CLIENT_ERR_TRANSPORT, "%s: %s", h->base, detail);
    }
}

/* Turns a 4xx/5xx answer into a status, copying the server's
 * {"error":{"code","message"}} verbatim into the handle. */
static spmv_client_status http_error(spmv_client *h, const response *r)
{
    spmv_client_status st = status_from_http(r->status);
    json_t *root = r->body.data ? json_loadb(r->body.data, r->body.len, 0, NULL) : NULL;
    json_t *err = json_object_get(root, "error");
    const char *code = json_string_value(json_object_get(err, "code"));
    const char *msg = json_string_value(json_object_get(err, "message"));

    if (code)
        snprintf(h->errcode, sizeof h->errcode, "%s", code);
    if (msg)
        spmvc_fail(h, st, "%s", msg);
    else if (r->body.len && r->body.len < 512)
        spmvc_fail(h, st, "HTTP %ld: %.*s", r->status, (int)r->body.len, r->body.data);
    else
        spmvc_fail(h, st, "HTTP %ld", r->status);
    json_decref(root);
    return st;
}

static void set_options(spmv_client *h, const request *req, response *r, struct curl_slist *headers,
                        const char *url)
{
    CURL *c = h->curl;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, h->curl_err);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, h->connect_ms);
    /* A long poll may be held its whole wait before the answer starts. */
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, h->total_ms ? h->total_ms + req->hold_ms : 0L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "libspmvclient/" SPMV_CLIENT_VERSION);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    if (h->ca_file)
        curl_easy_setopt(c, CURLOPT_CAINFO, h->ca_file);
    if (h->insecure) {
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (req->mime) {
        curl_easy_setopt(c, CURLOPT_MIMEPOST, req->mime);
    } else if (req->body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, req->body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
    } else if (strcmp(req->method, "POST") == 0) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
    }
    if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "POST") != 0)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req->method);
    if (req->progress) {
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(c, CURLOPT_XFERINFODATA, (void *)req);
    }
}

/* Appends one header line (printf-style) to *headers; false when memory
 * runs out. */
__attribute__((format(printf, 2, 3)))
static bool add_header(struct curl_slist **headers, const char *fmt, ...)
{
    char *line;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return false;
    struct curl_slist *l = curl_slist_append(*headers, line);
    free(line);
    if (l)
        *headers = l;
    return l != NULL;
}

/* The headers of a request whose body has type ctype (NULL: none); NULL
 * when memory runs out. */
static struct curl_slist *request_headers(spmv_client *h, const request *req, const char *ctype)
{
    struct curl_slist *l = NULL;
    /* An empty Expect: avoids a 1 s stall on servers that ignore 100-continue. */
    bool ok = add_header(&l, "Expect:") && (!h->auth_header || add_header(&l, "%s", h->auth_header)) &&
              (!req->accept || add_header(&l, "Accept: %s", req->accept)) &&
              (!ctype || add_header(&l, "Content-Type: %s", ctype));
    if (!ok) {
        curl_slist_free_all(l);
        return NULL;
    }
    return l;
}

/* The whole URL: the base, the path (or /v1/<collection>/<escaped
 * id><suffix>) and the query; NULL when memory runs out. */
static char *request_url(spmv_client *h, const request *req)
{
    const char *q = req->query.data ? req->query.data : "";
    char *url = NULL, *esc = NULL;
    int n;
    if (req->collection) {
        if (!(esc = curl_easy_escape(h->curl, req->id, 0)))
            return NULL;
        n = asprintf(&url, "%s/v1/%s/%s%s%s", h->base, req->collection, esc, req->suffix ? req->suffix : "", q);
        curl_free(esc);
    } else {
        n = asprintf(&url, "%s%s%s", h->base, req->path, q);
    }
    return n < 0 ? NULL : url;
}

/* Runs the transfer set_options() prepared; the status of what came back. */
static spmv_client_status perform(spmv_client *h, response *r)
{
    CURLcode rc = curl_easy_perform(h->curl);
    curl_off_t total_us = 0, retry = 0;
    curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_getinfo(h->curl, CURLINFO_TOTAL_TIME_T, &total_us);
    curl_easy_getinfo(h->curl, CURLINFO_RETRY_AFTER, &retry);
    r->total_ms = (double)total_us / 1e3;
    h->http_status = r->status;
    h->retry_after = (long)retry;
    /* Leave nothing on the handle that points into this call's memory. */
    curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(h->curl, CURLOPT_MIMEPOST, NULL);
    if (rc != CURLE_OK)
        return status_from_curl(h, rc, r);
    if (r->status < 200 || r->status >= 300)
        return http_error(h, r);
    return SPMV_CLIENT_OK;
}

/* Parses the answer body as JSON; PROTOCOL when it is not. */
spmv_client_status spmvc_parse_body(spmv_client *h, const response *r, json_t **out)
{
    json_error_t jerr;
    *out = json_loadb(r->body.data ? r->body.data : "", r->body.len, JSON_ALLOW_NUL, &jerr);
    if (!*out)
        return spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL, "answer is not JSON: %s (byte %d)", jerr.text, jerr.position);
    return SPMV_CLIENT_OK;
}

/* Runs one request: the one way every call reaches the server. On
 * SPMV_CLIENT_OK the server answered 2xx and r holds the answer (parsed
 * into r->json when the request wants JSON); otherwise the handle holds
 * the error. The request's JSON body and query are released either way;
 * the caller frees r with spmvc_response_clear() either way. */
spmv_client_status spmvc_request(spmv_client *h, request *req, response *r)
{
    spmv_client_status st = SPMV_CLIENT_ERR_NOMEM;
    struct curl_slist *headers = NULL;
    request sent = *req; /* with the JSON body as text */
    char *url = NULL, *text = NULL;

    memset(r, 0, sizeof *r);
    r->req = req;
    r->curl = h->curl;
    r->to_sink = -1;
    r->body.limit = MAX_JSON_BODY;
    spmvc_clear_error(h);
    if (req->nomem)
        goto done;
    if (req->json) {
        if (!(text = json_dumps(req->json, JSON_COMPACT)))
            goto done;
        sent.body = text;
        sent.body_len = strlen(text);
        sent.content_type = "application/json";
    }
    if (!(url = request_url(h, req)) || !(headers = request_headers(h, req, sent.content_type)))
        goto done;
    set_options(h, &sent, r, headers, url);
    st = perform(h, r);
    if (st == SPMV_CLIENT_OK && req->want_json)
        st = spmvc_parse_body(h, r, &r->json);
done:
    if (st == SPMV_CLIENT_ERR_NOMEM && !h->errmsg[0])
        spmvc_fail(h, st, "out of memory building the request");
    free(url);
    free(text);
    curl_slist_free_all(headers);
    json_decref(req->json);
    free(req->query.data);
    req->json = NULL;
    req->query = (buffer){0};
    return st;
}

void spmvc_response_clear(response *r)
{
    free(r->body.data);
    free(r->stats_header);
    free(r->meta_header);
    json_decref(r->json);
    memset(r, 0, sizeof *r);
}

/* Runs a request whose answer only matters for its status. */
spmv_client_status spmvc_send_only(spmv_client *h, request *req)
{
    response r;
    spmv_client_status st = spmvc_request(h, req, &r);
    spmvc_response_clear(&r);
    return st;
}

/* ----------------------------------------------------- building requests */

/* Appends "&key=value" (escaped) to the request's query. */
void spmvc_query_add(spmv_client *h, request *req, const char *key, const char *value)
{
    buffer *q = &req->query;
    char *k = curl_easy_escape(h->curl, key, 0), *v = curl_easy_escape(h->curl, value, 0);
    if (!q->limit)
        q->limit = MAX_QUERY;
    if (!(k && v && buffer_append(q, q->len ? "&" : "?", 1) && buffer_append(q, k, strlen(k)) &&
          buffer_append(q, "=", 1) && buffer_append(q, v, strlen(v))))
        req->nomem = true;
    curl_free(k);
    curl_free(v);
}

void spmvc_query_add_int(spmv_client *h, request *req, const char *key, long value)
{
    char num[32];
    snprintf(num, sizeof num, "%ld", value);
    spmvc_query_add(h, req, key, num);
}

void spmvc_query_add_u64(spmv_client *h, request *req, const char *key, uint64_t value)
{
    char num[32];
    snprintf(num, sizeof num, "%llu", (unsigned long long)value);
    spmvc_query_add(h, req, key, num);
}

void spmvc_query_add_double(spmv_client *h, request *req, const char *key, double value)
{
    char num[40];
    snprintf(num, sizeof num, "%.17g", value);
    spmvc_query_add(h, req, key, num);
}

/* Gives the request a JSON body, {} until spmvc_body_set() fills it. */
void spmvc_body_start(request *req)
{
    if (!req->json && !(req->json = json_object()))
        req->nomem = true;
}

/* Sets "key": v (stolen) in the request's JSON body. */
void spmvc_body_set(request *req, const char *key, json_t *v)
{
    spmvc_body_start(req);
    if (req->nomem)
        json_decref(v);
    else if (json_object_set_new(req->json, key, v) != 0)
        req->nomem = true;
}

bool spmvc_id_ok(const char *id)
{
    return id && *id && strlen(id) < 64;
}

/* INVALID, "<what> id must be 1 to 63 characters", unless id is one. */
spmv_client_status spmvc_check_id(spmv_client *h, const char *id, const char *what)
{
    if (spmvc_id_ok(id))
        return SPMV_CLIENT_OK;
    return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "%s id must be 1 to 63 characters", what);
}

/* ------------------------------------------------------------------ JSON */

/* A JSON number, or one of the strings "NaN", "Infinity", "-Infinity"
 * (docs/api.md, "Conventions"); `fallback` when absent or anything else. */
double spmvc_json_num(const json_t *v, double fallback)
{
    if (json_is_number(v))
        return json_number_value(v);
    const char *s = json_string_value(v);
    if (!s) return fallback;
    if (strcmp(s, "NaN") == 0) return NAN;
    if (strcmp(s, "Infinity") == 0) return INFINITY;
    if (strcmp(s, "-Infinity") == 0) return -INFINITY;
    return fallback;
}

void spmvc_json_nums(const json_t *o, const spmvc_num_field *fields, size_t n, void *out)
{
    for (size_t i = 0; i < n; i++)
        *(double *)(void *)((char *)out + fields[i].offset) = spmvc_json_num(json_object_get(o, fields[i].key), NAN);
}

/* A count: a non-negative integer (written as integer or integral real) not
 * above `max`. Absent gives 0; anything else is false. */
bool spmvc_json_count(const json_t *v, int64_t max, int64_t *out)
{
    if (!v) {
        *out = 0;
        return true;
    }
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i < 0 || i > max) return false;
        *out = (int64_t)i;
        return true;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (!(d >= 0) || d > (double)max || d != floor(d)) return false;
        *out = (int64_t)d;
        return true;
    }
    return false;
}

void spmvc_copy_str(char *dst, size_t cap, const json_t *v)
{
    const char *s = json_string_value(v);
    snprintf(dst, cap, "%s", s ? s : "");
}

char *spmvc_dump_json(const json_t *v)
{
    return v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
}

/* ------------------------------------------------- descriptors and lists */

/* One descriptor into a fresh item; PROTOCOL when it is incomplete or has
 * a size out of range. `where` (" (answer)", or "") goes into the message. */
spmv_client_status spmvc_parse_item(spmv_client *h, const item_kind *k, const json_t *d, const char *where,
                                    void **out)
{
    void *item = calloc(1, k->size);
    *out = NULL;
    if (!item)
        return spmvc_fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    if (!k->parse(d, item)) {
        free(item);
        return spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the %s descriptor%s lacks %s or has a size out of range",
                          k->what, where, k->key);
    }
    *out = item;
    return SPMV_CLIENT_OK;
}

void spmvc_free_item(const item_kind *k, void *item)
{
    if (!item)
        return;
    k->clear(item);
    free(item);
}

void spmvc_free_items(const item_kind *k, void *items, size_t count)
{
    for (size_t i = 0; i < count; i++)
        k->clear((char *)items + i * k->size);
    free(items);
}

/* Runs a request whose answer is one descriptor of kind k, parsed into a
 * fresh item at *out (out NULL: the answer is not read). */
spmv_client_status spmvc_request_item(spmv_client *h, request *req, const item_kind *k, void **out)
{
    response r;
    req->want_json = out != NULL;
    spmv_client_status st = spmvc_request(h, req, &r);
    if (st == SPMV_CLIENT_OK && out)
        st = spmvc_parse_item(h, k, r.json, "", out);
    spmvc_response_clear(&r);
    return st;
}

/* GET path into a parsed JSON root (caller decrefs). */
spmv_client_status spmvc_get_json(spmv_client *h, const char *path, json_t **root)
{
    request req = {.method = "GET", .path = path, .want_json = true};
    response r;
    spmv_client_status st = spmvc_request(h, &req, &r);
    *root = r.json;
    r.json = NULL;
    spmvc_response_clear(&r);
    return st;
}

/* A list route: GET path, the array under `key` (or the body when it is
 * one), each element parsed into the next item of *items. The caller's
 * list is {items, count, json}: every item tried is counted, so its free
 * releases what a failed parse left. */
spmv_client_status spmvc_fetch_list(spmv_client *h, const char *path, const char *key, const item_kind *k,
                                    void **items, size_t *count, char **json)
{
    json_t *root;
    spmv_client_status st = spmvc_get_json(h, path, &root);
    if (st != SPMV_CLIENT_OK)
        return st;
    const json_t *arr = json_is_array(root) ? root : json_object_get(root, key);
    size_t n = json_array_size(arr);
    if (!json_is_array(arr))
        st = spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the %s list is not a JSON array", k->what);
    else if (n && !(*items = calloc(n, k->size)))
        st = spmvc_fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == SPMV_CLIENT_OK && i < n; i++, (*count)++)
        if (!k->parse(json_array_get(arr, i), (char *)*items + i * k->size))
            st = spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL, "%s descriptor %zu is incomplete or has a size out of range",
                            k->what, i);
    if (st == SPMV_CLIENT_OK && !(*json = spmvc_dump_json(root)))
        st = spmvc_fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    json_decref(root);
    return st;
}

/* DELETE /v1/<collection>/<name>; `valid` is the caller's check of the
 * name (refused with `invalid` before anything is sent). */
spmv_client_status spmvc_delete_at(spmv_client *h, const char *collection, const char *name, bool valid,
                                   const char *invalid)
{
    if (!h) return SPMV_CLIENT_ERR_INVALID;
    spmvc_clear_error(h);
    if (!valid) return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "%s", invalid);
    request req = {.method = "DELETE", .collection = collection, .id = name};
    return spmvc_send_only(h, &req);
}
