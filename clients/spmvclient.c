/* spmvclient.c — libspmvclient: the spmvd HTTP API over libcurl and jansson.
 *
 * Every public call builds one request (method, path, optional body or
 * multipart form, optional binary sink), hands it to do_request(), which
 * runs it on the handle's one curl easy handle and turns what came back
 * into an spmv_client_status plus the handle's error detail, and then
 * parses the JSON answer into the caller's structures. The handle is reset
 * before each request (curl_easy_reset keeps the connection cache, so
 * keep-alive still works) so no option leaks from one call to the next.
 *
 * Nothing from the server is trusted: bodies are capped in size, JSON
 * numbers that become counts are checked for range and integrality, and a
 * binary y must be exactly as long as the caller asked for.
 */
#include "spmvclient.h"

#include <curl/curl.h>
#include <jansson.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* JSON answers are small (descriptors, job tables); anything past this is
 * a misbehaving server, not a bigger answer. */
#define MAX_JSON_BODY ((size_t)64 << 20)
#define DEFAULT_CONNECT_MS 10000L
/* A query string (kernel parameters, ids, region names) stays short. */
#define MAX_QUERY ((size_t)1 << 16)

struct spmv_client {
    CURL *curl;
    char *base;               /* URL without trailing slash */
    char *auth_header;        /* "Authorization: Bearer ...", or NULL */
    char *ca_file;
    int insecure;
    long connect_ms, total_ms;
    long http_status, retry_after;
    char errcode[64];
    char errmsg[1024];
    char curl_err[CURL_ERROR_SIZE];
};

/* A growable byte buffer, NUL-terminated, with a hard cap. */
typedef struct buffer {
    char *data;
    size_t len, cap, limit;
} buffer;

/* What one request needs; zero-initialise and fill in. The path is either
 * `path` as it stands or "/v1/<collection>/<escaped id><suffix>"; the
 * query and a JSON body are built for this one request (query_add(),
 * body_set()), and do_request() releases them. A step of building that
 * runs out of memory marks the request, so the builder reads as a plain
 * list of fields and do_request() reports the failure once. */
typedef struct request {
    const char *method;       /* "GET", "POST", "PUT", "DELETE" */
    const char *path;         /* appended to the base URL, starts with "/" */
    const char *collection;   /* ... or this, with id and suffix */
    const char *id;
    const char *suffix;
    buffer query;             /* "?k=v&..." from query_add(), or empty */
    json_t *json;             /* a JSON body (sent compact) ... */
    const char *content_type; /* ... or a body of this type */
    const void *body;
    size_t body_len;
    curl_mime *mime;          /* multipart form instead of body */
    void *sink;               /* a 2xx answer's body goes here (binary) ... */
    size_t sink_cap;          /* ... at most this many bytes */
    bool sink_if_binary;      /* ... only when it is application/octet-stream */
    bool want_json;           /* a 2xx answer must be JSON: parsed into response.json */
    bool nomem;               /* building it ran out of memory: nothing is sent */
    const char *accept;       /* Accept header, or NULL */
    const char *meta_name;    /* a header to keep besides X-SpMV-Stats ("x-spmv-vector:") */
    spmv_client_progress_fn progress;
    void *progress_user;
} request;

/* What came back. */
typedef struct response {
    long status;
    buffer body;              /* the answer when there is no sink, or an error body */
    json_t *json;             /* the answer parsed, when the request wants JSON */
    size_t sink_len;
    bool sink_overflow;
    char *stats_header;       /* X-SpMV-Stats */
    char *meta_header;        /* the header req->meta_name names */
    int to_sink;              /* -1 undecided, 0 body buffer, 1 the request's sink */
    double total_ms;
    const request *req;
    CURL *curl;
} response;

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
static spmv_client_status fail(spmv_client *h, spmv_client_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->errmsg, sizeof h->errmsg, fmt, ap);
    va_end(ap);
    return status;
}

static void clear_error(spmv_client *h)
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

spmv_client *spmv_client_new(const char *url, const spmv_client_options *opts, spmv_client_status *why)
{
    spmv_client_status st = SPMV_CLIENT_ERR_INVALID;
    spmv_client *h = NULL;
    bool global = false;

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
        if (n > r->req->sink_cap - r->sink_len) {
            r->sink_overflow = true;
            return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
        }
        memcpy((char *)r->req->sink + r->sink_len, data, n);
        r->sink_len += n;
        return n;
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
        return fail(h, SPMV_CLIENT_ERR_UNREACHABLE, "%s: %s", h->base, detail);
    case CURLE_OPERATION_TIMEDOUT:
        return fail(h, SPMV_CLIENT_ERR_TIMEOUT, "%s: %s", h->base, detail);
    case CURLE_ABORTED_BY_CALLBACK:
        return fail(h, SPMV_CLIENT_ERR_ABORTED, "upload aborted by the progress callback");
    case CURLE_WRITE_ERROR:
        if (r->sink_overflow)
            return fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the answer is longer than the %zu bytes expected",
                        r->req->sink_cap);
        return fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the answer is larger than %zu bytes or memory ran out",
                    r->body.limit);
    case CURLE_READ_ERROR:
        return fail(h, SPMV_CLIENT_ERR_IO, "reading the upload failed: %s", detail);
    case CURLE_OUT_OF_MEMORY:
        return fail(h, SPMV_CLIENT_ERR_NOMEM, "%s", detail);
    default:
        return fail(h, SPMV_CLIENT_ERR_TRANSPORT, "%s: %s", h->base, detail);
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
        fail(h, st, "%s", msg);
    else if (r->body.len && r->body.len < 512)
        fail(h, st, "HTTP %ld: %.*s", r->status, (int)r->body.len, r->body.data);
    else
        fail(h, st, "HTTP %ld", r->status);
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
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, h->total_ms);
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
static spmv_client_status parse_body(spmv_client *h, const response *r, json_t **out)
{
    json_error_t jerr;
    *out = json_loadb(r->body.data ? r->body.data : "", r->body.len, JSON_ALLOW_NUL, &jerr);
    if (!*out)
        return fail(h, SPMV_CLIENT_ERR_PROTOCOL, "answer is not JSON: %s (byte %d)", jerr.text, jerr.position);
    return SPMV_CLIENT_OK;
}

/* Runs one request: the one way every call reaches the server. On
 * SPMV_CLIENT_OK the server answered 2xx and r holds the answer (parsed
 * into r->json when the request wants JSON); otherwise the handle holds
 * the error. The request's JSON body and query are released either way;
 * the caller frees r with response_clear() either way. */
static spmv_client_status do_request(spmv_client *h, request *req, response *r)
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
    clear_error(h);
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
        st = parse_body(h, r, &r->json);
done:
    if (st == SPMV_CLIENT_ERR_NOMEM && !h->errmsg[0])
        fail(h, st, "out of memory building the request");
    free(url);
    free(text);
    curl_slist_free_all(headers);
    json_decref(req->json);
    free(req->query.data);
    req->json = NULL;
    req->query = (buffer){0};
    return st;
}

static void response_clear(response *r)
{
    free(r->body.data);
    free(r->stats_header);
    free(r->meta_header);
    json_decref(r->json);
    memset(r, 0, sizeof *r);
}

/* Runs a request whose answer only matters for its status. */
static spmv_client_status send_only(spmv_client *h, request *req)
{
    response r;
    spmv_client_status st = do_request(h, req, &r);
    response_clear(&r);
    return st;
}

/* Appends "&key=value" (escaped) to the request's query. */
static void query_add(spmv_client *h, request *req, const char *key, const char *value)
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

static void query_add_int(spmv_client *h, request *req, const char *key, long value)
{
    char num[32];
    snprintf(num, sizeof num, "%ld", value);
    query_add(h, req, key, num);
}

static void query_add_u64(spmv_client *h, request *req, const char *key, uint64_t value)
{
    char num[32];
    snprintf(num, sizeof num, "%llu", (unsigned long long)value);
    query_add(h, req, key, num);
}

static void query_add_double(spmv_client *h, request *req, const char *key, double value)
{
    char num[40];
    snprintf(num, sizeof num, "%.17g", value);
    query_add(h, req, key, num);
}

/* Gives the request a JSON body, {} until body_set() fills it. */
static void body_start(request *req)
{
    if (!req->json && !(req->json = json_object()))
        req->nomem = true;
}

/* Sets "key": v (stolen) in the request's JSON body. */
static void body_set(request *req, const char *key, json_t *v)
{
    body_start(req);
    if (req->nomem)
        json_decref(v);
    else if (json_object_set_new(req->json, key, v) != 0)
        req->nomem = true;
}

static bool id_ok(const char *id)
{
    return id && *id && strlen(id) < 64;
}

/* INVALID, "<what> id must be 1 to 63 characters", unless id is one. */
static spmv_client_status check_id(spmv_client *h, const char *id, const char *what)
{
    if (id_ok(id))
        return SPMV_CLIENT_OK;
    return fail(h, SPMV_CLIENT_ERR_INVALID, "%s id must be 1 to 63 characters", what);
}

/* ------------------------------------------------------------------ JSON */

/* A JSON number, or one of the strings "NaN", "Infinity", "-Infinity"
 * (SPEC §6); `fallback` when absent or anything else. */
static double json_num(const json_t *v, double fallback)
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

/* A count: a non-negative integer (written as integer or integral real) not
 * above `max`. Absent gives 0; anything else is false. */
static bool json_count(const json_t *v, int64_t max, int64_t *out)
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

static void copy_str(char *dst, size_t cap, const json_t *v)
{
    const char *s = json_string_value(v);
    snprintf(dst, cap, "%s", s ? s : "");
}

static char *dump_json(const json_t *v)
{
    return v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
}

/* How to read one kind of descriptor (a matrix, vector, region, kernel):
 * into an item of `size` bytes, by `parse`; `what` and `key` (what it
 * cannot lack) name it in messages. */
typedef bool (*parse_item_fn)(const json_t *d, void *item);
typedef struct item_kind {
    size_t size;
    parse_item_fn parse;
    const char *what;         /* "matrix" */
    const char *key;          /* "an id" */
} item_kind;

/* One descriptor into a fresh item; PROTOCOL when it is incomplete or has
 * a size out of range. `where` (" (answer)", or "") goes into the message. */
static spmv_client_status parse_item(spmv_client *h, const item_kind *k, const json_t *d, const char *where,
                                     void **out)
{
    void *item = calloc(1, k->size);
    *out = NULL;
    if (!item)
        return fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    if (!k->parse(d, item)) {
        free(item);
        return fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the %s descriptor%s lacks %s or has a size out of range", k->what,
                    where, k->key);
    }
    *out = item;
    return SPMV_CLIENT_OK;
}

/* Runs a request whose answer is one descriptor of kind k, parsed into a
 * fresh item at *out (out NULL: the answer is not read). */
static spmv_client_status request_item(spmv_client *h, request *req, const item_kind *k, void **out)
{
    response r;
    req->want_json = out != NULL;
    spmv_client_status st = do_request(h, req, &r);
    if (st == SPMV_CLIENT_OK && out)
        st = parse_item(h, k, r.json, "", out);
    response_clear(&r);
    return st;
}

static void parse_stats(const json_t *s, spmv_client_stats *st)
{
    int64_t n;
    memset(st, 0, sizeof *st);
    if (json_count(json_object_get(s, "runs"), INT_MAX, &n)) st->runs = (int)n;
    if (json_count(json_object_get(s, "warmup"), INT_MAX, &n)) st->warmup = (int)n;
    st->mean_ms = json_num(json_object_get(s, "mean_ms"), NAN);
    st->stddev_ms = json_num(json_object_get(s, "stddev_ms"), NAN);
    st->min_ms = json_num(json_object_get(s, "min_ms"), NAN);
    st->median_ms = json_num(json_object_get(s, "median_ms"), NAN);
    st->max_ms = json_num(json_object_get(s, "max_ms"), NAN);
    st->gflops = json_num(json_object_get(s, "gflops"), NAN);
    st->gbps = json_num(json_object_get(s, "gbps"), NAN);
}

/* One format entry, from either {"csr": {...}} (key) or [{"format":"csr",...}]. */
static void parse_format(const char *key, const json_t *v, spmv_client_format *f)
{
    int64_t bytes = 0;
    const char *name = key ? key : json_string_value(json_object_get(v, "format"));
    if (!name) name = json_string_value(json_object_get(v, "name"));
    if (!name) name = json_string_value(v);
    snprintf(f->name, sizeof f->name, "%s", name ? name : "");
    copy_str(f->device, sizeof f->device, json_object_get(v, "device"));
    if (json_count(json_object_get(v, "bytes"), INT64_MAX, &bytes))
        f->bytes = (uint64_t)bytes;
    f->padding = json_num(json_object_get(v, "padding"), 0);
    if (json_object_get(v, "padding_ratio"))
        f->padding = json_num(json_object_get(v, "padding_ratio"), 0);
}

static bool parse_formats(const json_t *fm, spmv_client_matrix *m)
{
    size_t n = json_is_array(fm) ? json_array_size(fm) : json_is_object(fm) ? json_object_size(fm) : 0;
    if (n == 0)
        return true;
    if (n > 64)
        return false; /* five formats exist; a long list is garbage */
    m->formats = calloc(n, sizeof *m->formats);
    if (!m->formats)
        return false;
    if (json_is_array(fm)) {
        size_t i;
        json_t *v;
        json_array_foreach(fm, i, v) parse_format(NULL, v, &m->formats[i]);
    } else {
        const char *k;
        json_t *v;
        size_t i = 0;
        json_object_foreach((json_t *)fm, k, v) parse_format(k, v, &m->formats[i++]);
    }
    m->nformats = n;
    return true;
}

static void parse_timings(const json_t *d, spmv_client_matrix *m)
{
    const json_t *t = json_object_get(d, "timings");
    if (!t) t = json_object_get(d, "upload");
    if (!t) t = json_object_get(d, "upload_ms");
    if (!t) t = d;
    m->parse_ms = json_num(json_object_get(t, "parse_ms"), NAN);
    m->transfer_ms = json_num(json_object_get(t, "transfer_ms"), NAN);
    m->convert_ms = json_num(json_object_get(t, "convert_ms"), NAN);
    if (isnan(m->parse_ms)) m->parse_ms = json_num(json_object_get(t, "parse"), NAN);
    if (isnan(m->transfer_ms)) m->transfer_ms = json_num(json_object_get(t, "transfer"), NAN);
    if (isnan(m->convert_ms)) m->convert_ms = json_num(json_object_get(t, "convert"), NAN);
}

static void matrix_clear(spmv_client_matrix *m)
{
    free(m->name);
    free(m->formats);
    free(m->json);
    memset(m, 0, sizeof *m);
}

/* Fills the spmv_client_matrix `item` from a descriptor object. False (m
 * cleared) when it lacks an id or a size is out of range. */
static bool parse_matrix(const json_t *d, void *item)
{
    spmv_client_matrix *m = item;
    const char *id = json_string_value(json_object_get(d, "id"));
    const char *name = json_string_value(json_object_get(d, "name"));
    const char *dtype = json_string_value(json_object_get(d, "dtype"));
    const json_t *dev = json_object_get(d, "device");

    memset(m, 0, sizeof *m);
    if (!json_is_object(d) || !id || !*id || strlen(id) >= sizeof m->id)
        return false;
    snprintf(m->id, sizeof m->id, "%s", id);
    if (!json_count(json_object_get(d, "rows"), INT64_MAX, &m->rows) ||
        !json_count(json_object_get(d, "cols"), INT64_MAX, &m->cols) ||
        !json_count(json_object_get(d, "nnz"), INT64_MAX, &m->nnz))
        goto fail;
    m->dtype = dtype && (strcmp(dtype, "float32") == 0 || strcmp(dtype, "f32") == 0) ? SPMV_CLIENT_FLOAT32
                                                                                     : SPMV_CLIENT_FLOAT64;
    m->mixed = dtype && strcmp(dtype, "mixed") == 0; /* its vectors are float64 */
    copy_str(m->symmetry, sizeof m->symmetry, json_object_get(d, "symmetry"));
    if (json_is_object(dev))
        dev = json_object_get(dev, "name");
    copy_str(m->device, sizeof m->device, dev);
    m->name = strdup(name ? name : "");
    m->json = dump_json(d);
    if (!m->name || !m->json || !parse_formats(json_object_get(d, "formats"), m))
        goto fail;
    parse_timings(d, m);
    return true;
fail:
    matrix_clear(m);
    return false;
}

static const item_kind matrix_kind = {sizeof(spmv_client_matrix), parse_matrix, "matrix", "an id"};

void spmv_client_matrix_free(spmv_client_matrix *m)
{
    if (!m)
        return;
    matrix_clear(m);
    free(m);
}

void spmv_client_matrix_list_free(spmv_client_matrix_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->count; i++)
        matrix_clear(&l->items[i]);
    free(l->items);
    free(l->json);
    free(l);
}

/* ---------------------------------------------------------------- server */

/* GET path into a parsed JSON root (caller decrefs). */
static spmv_client_status get_json(spmv_client *h, const char *path, json_t **root)
{
    request req = {.method = "GET", .path = path, .want_json = true};
    response r;
    spmv_client_status st = do_request(h, &req, &r);
    *root = r.json;
    r.json = NULL;
    response_clear(&r);
    return st;
}

static spmv_client_status maybe_dump(spmv_client *h, const json_t *root, char **json)
{
    if (!json)
        return SPMV_CLIENT_OK;
    if (!(*json = dump_json(root)))
        return fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    return SPMV_CLIENT_OK;
}

spmv_client_status spmv_client_health(spmv_client *h, char **json)
{
    json_t *root;
    if (json) *json = NULL;
    if (!h) return SPMV_CLIENT_ERR_INVALID;
    spmv_client_status st = get_json(h, "/v1/health", &root);
    if (st == SPMV_CLIENT_OK) {
        const char *s = json_string_value(json_object_get(root, "status"));
        if (!s || strcmp(s, "ok") != 0)
            st = fail(h, SPMV_CLIENT_ERR_PROTOCOL, "health answer has status \"%s\", not \"ok\"", s ? s : "");
        else
            st = maybe_dump(h, root, json);
    }
    json_decref(root);
    return st;
}

spmv_client_status spmv_client_ready(spmv_client *h)
{
    if (!h) return SPMV_CLIENT_ERR_INVALID;
    request req = {.method = "GET", .path = "/v1/ready"};
    return send_only(h, &req);
}

spmv_client_status spmv_client_info(spmv_client *h, char **json)
{
    json_t *root;
    if (!h || !json) return SPMV_CLIENT_ERR_INVALID;
    *json = NULL;
    spmv_client_status st = get_json(h, "/v1/info", &root);
    if (st == SPMV_CLIENT_OK)
        st = maybe_dump(h, root, json);
    json_decref(root);
    return st;
}

static void kernel_clear(spmv_client_kernel *k)
{
    free(k->name);
    free(k->reason);
    free(k->parameters);
}

void spmv_client_kernel_list_free(spmv_client_kernel_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->count; i++)
        kernel_clear(&l->items[i]);
    free(l->items);
    free(l->json);
    free(l);
}

static bool parse_kernel(const json_t *v, void *item)
{
    spmv_client_kernel *k = item;
    const char *name = json_is_string(v) ? json_string_value(v) : json_string_value(json_object_get(v, "name"));
    const char *reason = json_string_value(json_object_get(v, "reason"));
    const json_t *avail = json_object_get(v, "available");
    const json_t *params = json_object_get(v, "parameters");
    if (!params) params = json_object_get(v, "params");

    if (!name)
        return false;
    k->name = strdup(name);
    k->available = avail ? json_is_true(avail) : 1;
    k->reason = reason ? strdup(reason) : NULL;
    k->parameters = params ? dump_json(params) : NULL;
    return k->name && (!reason || k->reason) && (!params || k->parameters);
}

static const item_kind kernel_kind = {sizeof(spmv_client_kernel), parse_kernel, "kernel", "a name"};

/* A list route: GET path, the array under `key` (or the body when it is
 * one), each element parsed into the next item of *items. The caller's
 * list is {items, count, json}: every item tried is counted, so its free
 * releases what a failed parse left. */
static spmv_client_status fetch_list(spmv_client *h, const char *path, const char *key, const item_kind *k,
                                     void **items, size_t *count, char **json)
{
    json_t *root;
    spmv_client_status st = get_json(h, path, &root);
    if (st != SPMV_CLIENT_OK)
        return st;
    const json_t *arr = json_is_array(root) ? root : json_object_get(root, key);
    size_t n = json_array_size(arr);
    if (!json_is_array(arr))
        st = fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the %s list is not a JSON array", k->what);
    else if (n && !(*items = calloc(n, k->size)))
        st = fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == SPMV_CLIENT_OK && i < n; i++, (*count)++)
        if (!k->parse(json_array_get(arr, i), (char *)*items + i * k->size))
            st = fail(h, SPMV_CLIENT_ERR_PROTOCOL, "%s descriptor %zu is incomplete or has a size out of range",
                      k->what, i);
    if (st == SPMV_CLIENT_OK && !(*json = dump_json(root)))
        st = fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    json_decref(root);
    return st;
}

/* GET a list route into a fresh list `l` of type T (freed with FREE on
 * failure). */
#define FETCH_LIST(T, FREE, path, key, kind)                                                                    \
    do {                                                                                                        \
        if (!h || !out)                                                                                         \
            return SPMV_CLIENT_ERR_INVALID;                                                                     \
        *out = NULL;                                                                                            \
        T *l = calloc(1, sizeof *l);                                                                            \
        if (!l)                                                                                                 \
            return fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");                                             \
        spmv_client_status st_ = fetch_list(h, path, key, kind, (void **)&l->items, &l->count, &l->json);       \
        if (st_ != SPMV_CLIENT_OK)                                                                              \
            FREE(l);                                                                                            \
        else                                                                                                    \
            *out = l;                                                                                           \
        return st_;                                                                                             \
    } while (0)

spmv_client_status spmv_client_kernels(spmv_client *h, spmv_client_kernel_list **out)
{
    FETCH_LIST(spmv_client_kernel_list, spmv_client_kernel_list_free, "/v1/kernels", "kernels", &kernel_kind);
}

/* -------------------------------------------------------------- matrices */

static bool mime_field(curl_mime *mime, const char *name, const char *value)
{
    curl_mimepart *p = curl_mime_addpart(mime);
    return p && curl_mime_name(p, name) == CURLE_OK && curl_mime_data(p, value, CURL_ZERO_TERMINATED) == CURLE_OK;
}

/* The option fields of an upload form (docs/api.md, POST /v1/matrices:
 * name, dtype, formats, hack_size, device). */
static spmv_client_status mime_options(spmv_client *h, curl_mime *mime, const spmv_client_upload_options *o)
{
    char num[32];
    bool ok = true;
    if (!o)
        return SPMV_CLIENT_OK;
    if (o->hack_size < 0)
        return fail(h, SPMV_CLIENT_ERR_INVALID, "hack_size must not be negative");
    if (o->name) ok = ok && mime_field(mime, "name", o->name);
    if (o->dtype) ok = ok && mime_field(mime, "dtype", o->dtype);
    if (o->formats) ok = ok && mime_field(mime, "formats", o->formats);
    if (o->device) ok = ok && mime_field(mime, "device", o->device);
    if (o->hack_size) {
        snprintf(num, sizeof num, "%d", o->hack_size);
        ok = ok && mime_field(mime, "hack_size", num);
    }
    return ok ? SPMV_CLIENT_OK : fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory building the form");
}

/* A new form whose first part is the "file" field, typed, for the caller
 * to fill with the matrix; NULL when memory runs out. */
static curl_mime *file_form(spmv_client *h, curl_mimepart **part)
{
    curl_mime *mime = curl_mime_init(h->curl);
    if (mime && (*part = curl_mime_addpart(mime)) && curl_mime_name(*part, "file") == CURLE_OK &&
        curl_mime_type(*part, "application/octet-stream") == CURLE_OK)
        return mime;
    curl_mime_free(mime);
    return NULL;
}

/* Adds the options' fields to a form, sends it, frees it: the one way an
 * upload or a generate goes out. `built` is false when filling the form
 * ran out of memory. */
static spmv_client_status upload_form(spmv_client *h, curl_mime *mime, bool built,
                                      const spmv_client_upload_options *opts, spmv_client_matrix **out)
{
    spmv_client_status st = SPMV_CLIENT_ERR_NOMEM;
    if (!built)
        st = fail(h, st, "out of memory building the form");
    else if ((st = mime_options(h, mime, opts)) == SPMV_CLIENT_OK) {
        request req = {.method = "POST", .path = "/v1/matrices", .mime = mime};
        if (opts) {
            req.progress = opts->progress;
            req.progress_user = opts->progress_user;
        }
        st = request_item(h, &req, &matrix_kind, (void **)out);
    }
    curl_mime_free(mime);
    return st;
}

spmv_client_status spmv_client_upload_file(spmv_client *h, const char *path, const spmv_client_upload_options *opts,
                                           spmv_client_matrix **out)
{
    curl_mime *mime;
    curl_mimepart *part;
    FILE *f;

    if (!h || !path || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    clear_error(h);
    /* Open it here so a missing file is IO with errno's words, not a
     * transfer error from inside libcurl's read callback. */
    if (!(f = fopen(path, "rb")))
        return fail(h, SPMV_CLIENT_ERR_IO, "%s: %s", path, strerror(errno));
    fclose(f);
    mime = file_form(h, &part);
    return upload_form(h, mime, mime && curl_mime_filedata(part, path) == CURLE_OK, opts, out);
}

spmv_client_status spmv_client_upload_memory(spmv_client *h, const void *data, size_t len,
                                             const spmv_client_upload_options *opts, spmv_client_matrix **out)
{
    curl_mime *mime;
    curl_mimepart *part;

    if (!h || !data || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    clear_error(h);
    mime = file_form(h, &part);
    return upload_form(h, mime,
                       mime && curl_mime_data(part, data, len) == CURLE_OK &&
                           curl_mime_filename(part, opts && opts->name ? opts->name : "matrix.mtx") == CURLE_OK,
                       opts, out);
}

/* A form field holding an integer. */
static bool mime_int(curl_mime *mime, const char *name, long long value)
{
    char num[24];
    snprintf(num, sizeof num, "%lld", value);
    return mime_field(mime, name, num);
}

spmv_client_status spmv_client_generate(spmv_client *h, const char *kind, int64_t n, int64_t per_row,
                                        int64_t dense_len, uint64_t seed, const spmv_client_upload_options *opts,
                                        spmv_client_matrix **out)
{
    spmv_client_upload_options o = opts ? *opts : (spmv_client_upload_options){0};
    char sd[24];

    if (!h || !kind || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    clear_error(h);
    o.progress = NULL; /* nothing to upload */
    snprintf(sd, sizeof sd, "%llu", (unsigned long long)seed);
    curl_mime *mime = curl_mime_init(h->curl);
    bool built = mime && mime_field(mime, "generate", kind) && mime_int(mime, "n", n) &&
                 (per_row < 0 || mime_int(mime, "per_row", per_row)) &&
                 (dense_len < 0 || mime_int(mime, "dense_len", dense_len)) && (!seed || mime_field(mime, "seed", sd));
    return upload_form(h, mime, built, &o, out);
}

spmv_client_status spmv_client_list(spmv_client *h, spmv_client_matrix_list **out)
{
    FETCH_LIST(spmv_client_matrix_list, spmv_client_matrix_list_free, "/v1/matrices", "matrices", &matrix_kind);
}

spmv_client_status spmv_client_describe(spmv_client *h, const char *id, spmv_client_matrix **out)
{
    spmv_client_status st;
    if (!h || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    clear_error(h);
    if ((st = check_id(h, id, "matrix")) != SPMV_CLIENT_OK) return st;
    request req = {.method = "GET", .collection = "matrices", .id = id};
    return request_item(h, &req, &matrix_kind, (void **)out);
}

/* DELETE /v1/<collection>/<name>; `valid` is the caller's check of the
 * name (refused with `invalid` before anything is sent). */
static spmv_client_status delete_at(spmv_client *h, const char *collection, const char *name, bool valid,
                                    const char *invalid)
{
    if (!h) return SPMV_CLIENT_ERR_INVALID;
    clear_error(h);
    if (!valid) return fail(h, SPMV_CLIENT_ERR_INVALID, "%s", invalid);
    request req = {.method = "DELETE", .collection = collection, .id = name};
    return send_only(h, &req);
}

spmv_client_status spmv_client_delete(spmv_client *h, const char *id)
{
    return delete_at(h, "matrices", id, id_ok(id), "matrix id must be 1 to 63 characters");
}

/* ------------------------------------------------------------------ spmv */

/* True when every "key=value" kernel parameter has a key and its '='. */
static bool params_ok(const char *const *params)
{
    for (; params && *params; params++) {
        const char *eq = strchr(*params, '=');
        if (!eq || eq == *params)
            return false;
    }
    return true;
}

/* The spmv options into the request's query: kernel, runs, warmup, verify
 * and the kernel parameters. */
static spmv_client_status spmv_query(spmv_client *h, const spmv_client_spmv_options *o, request *req)
{
    if (!o)
        return SPMV_CLIENT_OK;
    if (o->runs < 0)
        return fail(h, SPMV_CLIENT_ERR_INVALID, "runs must not be negative");
    if (!params_ok(o->params))
        return fail(h, SPMV_CLIENT_ERR_INVALID, "a kernel parameter is not of the form key=value");
    if (o->kernel) query_add(h, req, "kernel", o->kernel);
    if (o->runs) query_add_int(h, req, "runs", o->runs);
    if (o->warmup) query_add_int(h, req, "warmup", o->warmup < 0 ? 0 : o->warmup);
    if (o->verify) query_add(h, req, "verify", "true");
    for (const char *const *p = o->params; p && *p; p++) {
        const char *eq = strchr(*p, '=');
        char *key = strndup(*p, (size_t)(eq - *p));
        if (key)
            query_add(h, req, key, eq + 1);
        else
            req->nomem = true;
        free(key);
    }
    return SPMV_CLIENT_OK;
}

/* The X-SpMV-Stats header: either the stats object itself or an object
 * holding "stats", "kernel", "queue_ms" and "verify". */
static spmv_client_status parse_stats_header(spmv_client *h, const char *text, spmv_client_spmv_result *res)
{
    json_t *root = text ? json_loads(text, 0, NULL) : NULL;
    if (!json_is_object(root)) {
        json_decref(root);
        return fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the X-SpMV-Stats header is %s",
                    text ? "not a JSON object" : "missing");
    }
    const json_t *stats = json_object_get(root, "stats");
    parse_stats(stats ? stats : root, &res->stats);
    copy_str(res->kernel, sizeof res->kernel, json_object_get(root, "kernel"));
    res->queue_ms = json_num(json_object_get(root, "queue_ms"), NAN);
    const json_t *verify = json_object_get(root, "verify");
    res->max_rel_err = json_num(json_object_get(verify, "max_rel_err"), NAN);
    json_decref(root);
    return SPMV_CLIENT_OK;
}

/* A fresh spmv result: zero, with what was not measured NaN. */
static void spmv_result_start(spmv_client_spmv_result *res)
{
    memset(res, 0, sizeof *res);
    res->max_rel_err = res->queue_ms = NAN;
}

spmv_client_status spmv_client_multiply(spmv_client *h, const char *id, spmv_client_dtype dtype, const void *x,
                                        size_t nx, void *y, size_t ny, const spmv_client_spmv_options *opts,
                                        spmv_client_spmv_result *res)
{
    spmv_client_spmv_result local;
    spmv_client_status st;
    size_t esize = dtype == SPMV_CLIENT_FLOAT32 ? 4 : 8;

    if (!h) return SPMV_CLIENT_ERR_INVALID;
    clear_error(h);
    if ((st = check_id(h, id, "matrix")) != SPMV_CLIENT_OK) return st;
    if ((dtype != SPMV_CLIENT_FLOAT64 && dtype != SPMV_CLIENT_FLOAT32) || (!x && nx) || (!y && ny))
        return fail(h, SPMV_CLIENT_ERR_INVALID, "bad dtype or a NULL vector");
    if (nx > SIZE_MAX / esize || ny > SIZE_MAX / esize)
        return fail(h, SPMV_CLIENT_ERR_INVALID, "vector length overflows size_t");
    if (!res) res = &local;
    spmv_result_start(res);
    request req = {.method = "POST", .collection = "matrices", .id = id, .suffix = "/spmv",
                   .content_type = "application/octet-stream", .body = nx ? x : "", .body_len = nx * esize,
                   .sink = y, .sink_cap = ny * esize};
    if ((st = spmv_query(h, opts, &req)) != SPMV_CLIENT_OK)
        return st;
    response r;
    st = do_request(h, &req, &r);
    res->request_ms = r.total_ms;
    if (st == SPMV_CLIENT_OK && r.sink_len != ny * esize)
        st = fail(h, SPMV_CLIENT_ERR_PROTOCOL, "y has %zu bytes, expected %zu (%zu values of %zu bytes)",
                  r.sink_len, ny * esize, ny, esize);
    else if (st == SPMV_CLIENT_OK)
        st = parse_stats_header(h, r.stats_header, res);
    response_clear(&r);
    return st;
}

/* ---------------------------------------------------------------- spmspm */

/* The spmspm body: {"b", "kernel", "runs", "warmup", "verify", "store",
 * params...}; false when a parameter is not "key=integer". */
static bool spmspm_body(request *req, const char *b, const spmv_client_spmspm_options *o)
{
    body_set(req, "b", json_string(b));
    if (!o)
        return true;
    if (o->kernel) body_set(req, "kernel", json_string(o->kernel));
    if (o->runs) body_set(req, "runs", json_integer(o->runs));
    if (o->warmup) body_set(req, "warmup", json_integer(o->warmup));
    if (o->verify) body_set(req, "verify", json_true());
    if (o->store) body_set(req, "store", json_true());
    for (const char *const *p = o->params; p && *p; p++) {
        const char *eq = strchr(*p, '=');
        char key[64], *end;
        long long v = eq ? strtoll(eq + 1, &end, 10) : 0;
        if (!eq || eq == *p || (size_t)(eq - *p) >= sizeof key || !eq[1] || *end)
            return false;
        snprintf(key, sizeof key, "%.*s", (int)(eq - *p), *p);
        body_set(req, key, json_integer(v));
    }
    return true;
}

static void spmspm_result(const json_t *o, spmv_client_spmspm_result *res)
{
    int64_t n;
    parse_stats(json_object_get(o, "stats"), &res->stats);
    copy_str(res->kernel, sizeof res->kernel, json_object_get(o, "kernel"));
    res->queue_ms = json_num(json_object_get(o, "queue_ms"), NAN);
    res->max_rel_err = json_num(json_object_get(json_object_get(o, "verify"), "max_rel_err"), NAN);
    if (json_count(json_object_get(o, "madds"), INT64_MAX, &n)) res->madds = n;
}

void spmv_client_coo_free(spmv_client_coo *c)
{
    if (!c)
        return;
    free(c->row);
    free(c->col);
    free(c->val);
    free(c);
}

/* An index array of n entries, each in [0, bound). */
static bool index_array(const json_t *a, int64_t n, int64_t bound, int32_t *out)
{
    if (!json_is_array(a) || (int64_t)json_array_size(a) != n)
        return false;
    for (int64_t i = 0; i < n; i++) {
        int64_t v;
        if (!json_count(json_array_get(a, (size_t)i), bound - 1, &v) || !json_array_get(a, (size_t)i))
            return false;
        out[i] = (int32_t)v;
    }
    return true;
}

/* C from the answer's COO fields, every count and index range-checked. */
static spmv_client_status coo_from_json(spmv_client *h, const json_t *o, spmv_client_coo **out)
{
    int64_t rows, cols, nnz;
    spmv_client_coo *c = NULL;
    const json_t *val = json_object_get(o, "val");
    if (!json_count(json_object_get(o, "rows"), INT32_MAX, &rows) ||
        !json_count(json_object_get(o, "cols"), INT32_MAX, &cols) ||
        !json_count(json_object_get(o, "nnz"), INT32_MAX, &nnz) || nnz > rows * cols || !json_is_array(val) ||
        (int64_t)json_array_size(val) != nnz)
        return fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the product's rows, cols, nnz or val are missing or out of range");
    if (!(c = calloc(1, sizeof *c)) || !(c->row = malloc((size_t)nnz * 4 + 4)) ||
        !(c->col = malloc((size_t)nnz * 4 + 4)) || !(c->val = malloc((size_t)nnz * 8 + 8))) {
        spmv_client_coo_free(c);
        return fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory for a product of %lld entries", (long long)nnz);
    }
    c->rows = (int32_t)rows;
    c->cols = (int32_t)cols;
    c->nnz = nnz;
    if (!index_array(json_object_get(o, "row"), nnz, rows, c->row) ||
        !index_array(json_object_get(o, "col"), nnz, cols, c->col)) {
        spmv_client_coo_free(c);
        return fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the product's row or col array is malformed or out of range");
    }
    for (int64_t i = 0; i < nnz; i++)
        c->val[i] = json_num(json_array_get(val, (size_t)i), NAN);
    *out = c;
    return SPMV_CLIENT_OK;
}

spmv_client_status spmv_client_spmspm(spmv_client *h, const char *a, const char *b,
                                      const spmv_client_spmspm_options *opts, spmv_client_coo **c,
                                      spmv_client_matrix **stored, spmv_client_spmspm_result *res)
{
    spmv_client_spmspm_result local;
    spmv_client_status st;

    if (c) *c = NULL;
    if (stored) *stored = NULL;
    if (!h) return SPMV_CLIENT_ERR_INVALID;
    clear_error(h);
    if (!id_ok(a) || !id_ok(b)) return fail(h, SPMV_CLIENT_ERR_INVALID, "matrix ids must be 1 to 63 characters");
    if (opts && (opts->runs < 0 || opts->warmup < 0))
        return fail(h, SPMV_CLIENT_ERR_INVALID, "runs and warmup must not be negative");
    if (!res) res = &local;
    memset(res, 0, sizeof *res);
    res->max_rel_err = res->queue_ms = NAN;
    request req = {.method = "POST", .collection = "matrices", .id = a, .suffix = "/spmspm", .want_json = true};
    if (!spmspm_body(&req, b, opts)) {
        json_decref(req.json);
        return fail(h, SPMV_CLIENT_ERR_INVALID, "a kernel parameter is not \"key=integer\"");
    }
    response r;
    st = do_request(h, &req, &r);
    res->request_ms = r.total_ms;
    if (st == SPMV_CLIENT_OK && opts && opts->store) {
        spmspm_result(json_object_get(r.json, "product"), res);
        if (stored)
            st = parse_item(h, &matrix_kind, r.json, "", (void **)stored);
    } else if (st == SPMV_CLIENT_OK) {
        spmspm_result(r.json, res);
        if (c)
            st = coo_from_json(h, r.json, c);
    }
    response_clear(&r);
    return st;
}

/* ----------------------------------------------------------- bench, jobs */

/* The job id an answer names ({"job_id"}, {"job":{"id"}} or {"id"}) into
 * id (cap bytes); PROTOCOL when it names none. `what` names the call. */
static spmv_client_status take_job_id(spmv_client *h, const response *r, const char *what, char *id, size_t cap)
{
    const char *jid = json_string_value(json_object_get(r->json, "job_id"));
    if (!jid) jid = json_string_value(json_object_get(json_object_get(r->json, "job"), "id"));
    if (!jid) jid = json_string_value(json_object_get(r->json, "id"));
    if (!jid || !*jid || strlen(jid) >= cap)
        return fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the %s answer (HTTP %ld) names no job id", what, r->status);
    snprintf(id, cap, "%s", jid);
    return SPMV_CLIENT_OK;
}

spmv_client_status spmv_client_bench_start(spmv_client *h, const char *id, const spmv_client_bench_options *opts,
                                           char job_id[64])
{
    spmv_client_status st;

    if (!h || !job_id) return SPMV_CLIENT_ERR_INVALID;
    job_id[0] = '\0';
    clear_error(h);
    if ((st = check_id(h, id, "matrix")) != SPMV_CLIENT_OK) return st;
    if (opts && (opts->runs < 0 || opts->warmup < 0))
        return fail(h, SPMV_CLIENT_ERR_INVALID, "runs and warmup must not be negative");
    /* bench is always a job: no "async" needed (or accepted) */
    request req = {.method = "POST", .collection = "matrices", .id = id, .suffix = "/bench", .want_json = true};
    body_start(&req);
    if (opts && opts->kernels) {
        json_t *arr = json_array();
        for (const char *const *k = opts->kernels; arr && *k; k++)
            if (json_array_append_new(arr, json_string(*k)) != 0)
                req.nomem = true;
        body_set(&req, "kernels", arr);
    }
    if (opts && opts->runs) body_set(&req, "runs", json_integer(opts->runs));
    if (opts && opts->warmup) body_set(&req, "warmup", json_integer(opts->warmup));
    response r;
    if ((st = do_request(h, &req, &r)) == SPMV_CLIENT_OK)
        st = take_job_id(h, &r, "bench", job_id, 64);
    response_clear(&r);
    return st;
}

void spmv_client_job_free(spmv_client_job *j)
{
    if (!j)
        return;
    free(j->result);
    free(j->json);
    free(j);
}

/* The job's own error message, if it carries one as a string or as
 * {"code","message"}. */
static void job_error(spmv_client *h, const json_t *root)
{
    const json_t *e = json_object_get(root, "error");
    const char *code = json_string_value(json_object_get(e, "code"));
    const char *msg = json_is_string(e) ? json_string_value(e) : json_string_value(json_object_get(e, "message"));
    if (code)
        snprintf(h->errcode, sizeof h->errcode, "%s", code);
    fail(h, SPMV_CLIENT_ERR_JOB_FAILED, "%s", msg ? msg : "the job failed without a message");
}

static spmv_client_status parse_job(spmv_client *h, const json_t *root, spmv_client_job *j)
{
    const json_t *job = json_is_object(json_object_get(root, "job")) ? json_object_get(root, "job") : root;
    const char *id = json_string_value(json_object_get(job, "id"));
    const char *state = json_string_value(json_object_get(job, "state"));
    double p = json_num(json_object_get(job, "progress"), 0);
    const json_t *result = json_object_get(job, "result");

    if (!id || strlen(id) >= sizeof j->id || !state || strlen(state) >= sizeof j->state)
        return fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the job answer lacks an id or a state");
    if (!(p >= 0 && p <= 1))
        return fail(h, SPMV_CLIENT_ERR_PROTOCOL, "job progress %g is outside 0..1", p);
    snprintf(j->id, sizeof j->id, "%s", id);
    snprintf(j->state, sizeof j->state, "%s", state);
    j->progress = p;
    if ((result && !json_is_null(result) && !(j->result = dump_json(result))) || !(j->json = dump_json(root)))
        return fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    return SPMV_CLIENT_OK;
}

/* A job answer into a fresh spmv_client_job. */
static spmv_client_status job_from_json(spmv_client *h, const json_t *root, spmv_client_job **out)
{
    spmv_client_job *j = calloc(1, sizeof *j);
    spmv_client_status st = j ? parse_job(h, root, j) : fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    if (st == SPMV_CLIENT_OK)
        *out = j;
    else
        spmv_client_job_free(j);
    return st;
}

spmv_client_status spmv_client_job_get(spmv_client *h, const char *job_id, spmv_client_job **out)
{
    spmv_client_status st;

    if (!h || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    clear_error(h);
    if ((st = check_id(h, job_id, "job")) != SPMV_CLIENT_OK) return st;
    request req = {.method = "GET", .collection = "jobs", .id = job_id, .want_json = true};
    response r;
    if ((st = do_request(h, &req, &r)) == SPMV_CLIENT_OK && (st = job_from_json(h, r.json, out)) == SPMV_CLIENT_OK &&
        strcmp((*out)->state, "failed") == 0)
        job_error(h, r.json);
    response_clear(&r);
    return st;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static bool job_finished(const spmv_client_job *j)
{
    return strcmp(j->state, "done") == 0 || strcmp(j->state, "failed") == 0 ||
           strcmp(j->state, "succeeded") == 0 || strcmp(j->state, "cancelled") == 0;
}

spmv_client_status spmv_client_job_wait(spmv_client *h, const char *job_id, long interval_ms,
                                        spmv_client_progress_fn progress, void *user, spmv_client_job **out)
{
    if (!h || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    if (interval_ms <= 0) interval_ms = 200;
    for (;;) {
        spmv_client_job *j;
        spmv_client_status st = spmv_client_job_get(h, job_id, &j);
        if (st != SPMV_CLIENT_OK)
            return st;
        if (progress && progress(user, (uint64_t)(j->progress * 1000 + 0.5), 1000)) {
            spmv_client_job_free(j);
            return fail(h, SPMV_CLIENT_ERR_ABORTED, "stopped waiting for job %s", job_id);
        }
        if (job_finished(j)) {
            *out = j;
            if (strcmp(j->state, "done") == 0 || strcmp(j->state, "succeeded") == 0)
                return SPMV_CLIENT_OK;
            if (!h->errmsg[0])
                fail(h, SPMV_CLIENT_ERR_JOB_FAILED, "job %s ended %s", job_id, j->state);
            return SPMV_CLIENT_ERR_JOB_FAILED;
        }
        spmv_client_job_free(j);
        sleep_ms(interval_ms);
    }
}

spmv_client_status spmv_client_job_cancel(spmv_client *h, const char *job_id, spmv_client_job **out)
{
    spmv_client_status st;

    if (out) *out = NULL;
    if (!h) return SPMV_CLIENT_ERR_INVALID;
    clear_error(h);
    if ((st = check_id(h, job_id, "job")) != SPMV_CLIENT_OK) return st;
    request req = {.method = "DELETE", .collection = "jobs", .id = job_id};
    response r;
    /* 204: cancelled with nothing to say; else the job as it stands */
    if ((st = do_request(h, &req, &r)) == SPMV_CLIENT_OK && r.status != 204 && out &&
        (st = parse_body(h, &r, &r.json)) == SPMV_CLIENT_OK)
        st = job_from_json(h, r.json, out);
    response_clear(&r);
    return st;
}

/* ------------------------------------------------------ resident vectors */

static size_t dtype_size(spmv_client_dtype d) { return d == SPMV_CLIENT_FLOAT32 ? 4 : 8; }
static bool dtype_ok(spmv_client_dtype d) { return d == SPMV_CLIENT_FLOAT64 || d == SPMV_CLIENT_FLOAT32; }
static const char *dtype_text(spmv_client_dtype d) { return d == SPMV_CLIENT_FLOAT32 ? "float32" : "float64"; }

static void vector_clear(spmv_client_vector *v)
{
    free(v->json);
    memset(v, 0, sizeof *v);
}

void spmv_client_vector_free(spmv_client_vector *v)
{
    if (!v)
        return;
    vector_clear(v);
    free(v);
}

void spmv_client_vector_list_free(spmv_client_vector_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->count; i++)
        vector_clear(&l->items[i]);
    free(l->items);
    free(l->json);
    free(l);
}

/* Fills the spmv_client_vector `item` from a descriptor; false (cleared)
 * when it lacks an id or a size is out of range (n·k values must be
 * addressable here). */
static bool parse_vector(const json_t *d, void *item)
{
    spmv_client_vector *v = item;
    const char *id = json_string_value(json_object_get(d, "id"));
    const char *dtype = json_string_value(json_object_get(d, "dtype"));
    int64_t bytes = 0;

    memset(v, 0, sizeof *v);
    if (!json_is_object(d) || !id || !*id || strlen(id) >= sizeof v->id)
        return false;
    snprintf(v->id, sizeof v->id, "%s", id);
    if (!json_count(json_object_get(d, "n"), INT64_MAX, &v->n) ||
        !json_count(json_object_get(d, "k"), INT64_MAX, &v->k) ||
        !json_count(json_object_get(d, "bytes"), INT64_MAX, &bytes))
        goto fail;
    if (!json_object_get(d, "k"))
        v->k = 1;
    if (v->k < 1 || (v->n && (uint64_t)v->k > SIZE_MAX / 8 / (uint64_t)v->n))
        goto fail;
    v->bytes = (uint64_t)bytes;
    v->dtype = dtype && strcmp(dtype, "float32") == 0 ? SPMV_CLIENT_FLOAT32 : SPMV_CLIENT_FLOAT64;
    copy_str(v->device, sizeof v->device, json_object_get(d, "device"));
    copy_str(v->created, sizeof v->created, json_object_get(d, "created"));
    copy_str(v->like, sizeof v->like, json_object_get(d, "like"));
    v->idle_s = json_num(json_object_get(d, "idle_s"), NAN);
    v->expires_in_s = json_num(json_object_get(d, "expires_in_s"), NAN);
    /* The descriptor without "values" (a JSON GET carries them). */
    json_t *copy = json_copy((json_t *)d);
    if (copy) json_object_del(copy, "values");
    v->json = dump_json(copy);
    json_decref(copy);
    if (!v->json)
        goto fail;
    return true;
fail:
    vector_clear(v);
    return false;
}

static const item_kind vector_kind = {sizeof(spmv_client_vector), parse_vector, "vector", "an id"};

/* A descriptor from JSON text (an answer body or the X-SpMV-Vector
 * header) into a fresh spmv_client_vector. */
static spmv_client_status vector_from_text(spmv_client *h, const char *text, size_t len, const char *where,
                                           spmv_client_vector **out)
{
    json_t *root = text ? json_loadb(text, len, 0, NULL) : NULL;
    char paren[64];
    spmv_client_status st;
    *out = NULL;
    snprintf(paren, sizeof paren, " (%s)", where);
    if (!root)
        return fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the vector descriptor%s is %s", paren, text ? "not JSON" : "missing");
    st = parse_item(h, &vector_kind, root, paren, (void **)out);
    json_decref(root);
    return st;
}

/* Runs a request whose answer is a vector descriptor, into *out (NULL:
 * the answer is not read). */
static spmv_client_status request_vector(spmv_client *h, request *req, spmv_client_vector **out)
{
    response r;
    spmv_client_status st = do_request(h, req, &r);
    if (st == SPMV_CLIENT_OK && out)
        st = vector_from_text(h, r.body.data, r.body.len, "answer", out);
    response_clear(&r);
    return st;
}

/* Checks the options every create shares; a message names the field. */
static spmv_client_status vector_options_ok(spmv_client *h, const spmv_client_vector_options *o)
{
    if (!o)
        return SPMV_CLIENT_OK;
    if (o->k < 0)
        return fail(h, SPMV_CLIENT_ERR_INVALID, "k must be 1 or more (0: 1), not %lld", (long long)o->k);
    if (o->like && !id_ok(o->like))
        return fail(h, SPMV_CLIENT_ERR_INVALID, "like must be a matrix id of 1 to 63 characters");
    if (o->side && strcmp(o->side, "rows") != 0 && strcmp(o->side, "cols") != 0)
        return fail(h, SPMV_CLIENT_ERR_INVALID, "side must be \"rows\" or \"cols\", not \"%s\"", o->side);
    if (o->side && !o->like)
        return fail(h, SPMV_CLIENT_ERR_INVALID, "side needs like (a matrix to take rows or cols from)");
    if (o->dtype && strcmp(o->dtype, "float64") != 0 && strcmp(o->dtype, "float32") != 0)
        return fail(h, SPMV_CLIENT_ERR_INVALID, "dtype must be \"float64\" or \"float32\", not \"%s\"", o->dtype);
    return SPMV_CLIENT_OK;
}

spmv_client_status spmv_client_vector_create(spmv_client *h, spmv_client_dtype dtype, const void *values,
                                             size_t count, const spmv_client_vector_options *opts,
                                             spmv_client_vector **out)
{
    spmv_client_status st;
    int64_t k = opts && opts->k ? opts->k : 1;

    if (!h || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    clear_error(h);
    if (!dtype_ok(dtype)) return fail(h, SPMV_CLIENT_ERR_INVALID, "dtype must be SPMV_CLIENT_FLOAT64 or _FLOAT32");
    if (!values || count == 0) return fail(h, SPMV_CLIENT_ERR_INVALID, "a vector needs at least one value");
    if (count > SIZE_MAX / dtype_size(dtype)) return fail(h, SPMV_CLIENT_ERR_INVALID, "count overflows size_t");
    if ((st = vector_options_ok(h, opts)) != SPMV_CLIENT_OK) return st;
    if (count % (uint64_t)k != 0)
        return fail(h, SPMV_CLIENT_ERR_INVALID, "%zu values are not a multiple of k = %lld", count, (long long)k);
    request req = {.method = "POST", .path = "/v1/vectors", .content_type = "application/octet-stream",
                   .body = values, .body_len = count * dtype_size(dtype)};
    query_add(h, &req, "dtype", dtype_text(dtype));
    if (opts && opts->k) query_add_int(h, &req, "k", (long)opts->k);
    if (opts && opts->like) query_add(h, &req, "like", opts->like);
    if (opts && opts->side) query_add(h, &req, "side", opts->side);
    if (opts && opts->device) query_add(h, &req, "device", opts->device);
    return request_vector(h, &req, out);
}

/* The JSON create: {"n","k",key: source,"seed","dtype","like","side","device"}, where key is
 * "fill" (a number or "random") or "values" (a region: {"shm","offset"}); source is stolen. */
static spmv_client_status vector_create_json(spmv_client *h, int64_t n, const char *key, json_t *source,
                                             const uint64_t *seed, const spmv_client_vector_options *opts,
                                             spmv_client_vector **out)
{
    spmv_client_status st;
    if (!source)
        return fail(h, strcmp(key, "fill") == 0 ? SPMV_CLIENT_ERR_INVALID : SPMV_CLIENT_ERR_NOMEM,
                    strcmp(key, "fill") == 0 ? "the fill value must be a finite number" : "out of memory");
    if ((st = vector_options_ok(h, opts)) == SPMV_CLIENT_OK && (n < 0 || (n == 0 && !(opts && opts->like))))
        st = fail(h, SPMV_CLIENT_ERR_INVALID, "n must be 1 or more, or 0 with like giving it (not %lld)",
                  (long long)n);
    if (st != SPMV_CLIENT_OK) {
        json_decref(source);
        return st;
    }
    request req = {.method = "POST", .path = "/v1/vectors"};
    if (n) body_set(&req, "n", json_integer((json_int_t)n));
    if (opts && opts->k) body_set(&req, "k", json_integer((json_int_t)opts->k));
    body_set(&req, key, source);
    if (seed) body_set(&req, "seed", json_integer((json_int_t)(*seed & INT64_MAX)));
    if (opts && opts->dtype) body_set(&req, "dtype", json_string(opts->dtype));
    if (opts && opts->like) body_set(&req, "like", json_string(opts->like));
    if (opts && opts->side) body_set(&req, "side", json_string(opts->side));
    if (opts && opts->device) body_set(&req, "device", json_string(opts->device));
    return request_vector(h, &req, out);
}

spmv_client_status spmv_client_vector_fill(spmv_client *h, int64_t n, double value,
                                           const spmv_client_vector_options *opts, spmv_client_vector **out)
{
    if (!h || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    clear_error(h);
    return vector_create_json(h, n, "fill", isfinite(value) ? json_real(value) : NULL, NULL, opts, out);
}

spmv_client_status spmv_client_vector_random(spmv_client *h, int64_t n, uint64_t seed,
                                             const spmv_client_vector_options *opts, spmv_client_vector **out)
{
    if (!h || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    clear_error(h);
    return vector_create_json(h, n, "fill", json_string("random"), &seed, opts, out);
}

/* Why a read's answer did not fit the buffer, when the X-SpMV-Vector
 * header tells (its dtype or length differs): INVALID with both; else st. */
static spmv_client_status read_misfit(spmv_client *h, const response *r, const char *id, spmv_client_dtype dtype,
                                      size_t count, spmv_client_status st)
{
    spmv_client_vector *v = NULL;
    if (st == SPMV_CLIENT_ERR_PROTOCOL && r->meta_header &&
        vector_from_text(h, r->meta_header, strlen(r->meta_header), "X-SpMV-Vector header", &v) == SPMV_CLIENT_OK &&
        (v->dtype != dtype || (uint64_t)v->n * (uint64_t)v->k != count))
        st = fail(h, SPMV_CLIENT_ERR_INVALID, "vector %s holds %lld x %lld %s values; the buffer takes %zu %s", id,
                  (long long)v->n, (long long)v->k, dtype_text(v->dtype), count, dtype_text(dtype));
    spmv_client_vector_free(v);
    return st;
}

/* A read's binary answer checked against its X-SpMV-Vector descriptor
 * (which goes to *desc when wanted). */
static spmv_client_status read_answer(spmv_client *h, const response *r, const char *id, spmv_client_dtype dtype,
                                      size_t count, spmv_client_vector **desc)
{
    spmv_client_vector *v = NULL;
    spmv_client_status st;
    if (r->to_sink != 1 && r->body.len)
        return fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the vector came back as %s, not as binary values",
                    r->body.data[0] == '{' ? "JSON" : "something else");
    if ((st = vector_from_text(h, r->meta_header, r->meta_header ? strlen(r->meta_header) : 0,
                               "X-SpMV-Vector header", &v)) != SPMV_CLIENT_OK)
        return st;
    if (v->dtype != dtype)
        st = fail(h, SPMV_CLIENT_ERR_INVALID, "vector %s holds %s values, the buffer %s", id, dtype_text(v->dtype),
                  dtype_text(dtype));
    else if (r->sink_len != count * dtype_size(dtype) || (uint64_t)v->n * (uint64_t)v->k != count)
        st = fail(h, SPMV_CLIENT_ERR_PROTOCOL, "vector %s: %zu bytes for n = %lld, k = %lld, expected %zu values",
                  id, r->sink_len, (long long)v->n, (long long)v->k, count);
    if (st == SPMV_CLIENT_OK && desc) {
        *desc = v;
        v = NULL;
    }
    spmv_client_vector_free(v);
    return st;
}

spmv_client_status spmv_client_vector_read(spmv_client *h, const char *id, spmv_client_dtype dtype, void *values,
                                           size_t count, spmv_client_vector **desc)
{
    spmv_client_status st;
    size_t esize = dtype_size(dtype);

    if (desc) *desc = NULL;
    if (!h) return SPMV_CLIENT_ERR_INVALID;
    clear_error(h);
    if ((st = check_id(h, id, "vector")) != SPMV_CLIENT_OK) return st;
    if (!dtype_ok(dtype) || (!values && count) || count > SIZE_MAX / esize)
        return fail(h, SPMV_CLIENT_ERR_INVALID, "bad dtype, a NULL buffer or a count that overflows size_t");
    request req = {.method = "GET", .collection = "vectors", .id = id, .accept = "application/octet-stream",
                   .sink = values, .sink_cap = count * esize, .sink_if_binary = true,
                   .meta_name = "x-spmv-vector:"};
    response r;
    if ((st = do_request(h, &req, &r)) != SPMV_CLIENT_OK)
        st = read_misfit(h, &r, id, dtype, count, st);
    else
        st = read_answer(h, &r, id, dtype, count, desc);
    response_clear(&r);
    return st;
}

spmv_client_status spmv_client_vector_write(spmv_client *h, const char *id, spmv_client_dtype dtype,
                                            const void *values, size_t count, spmv_client_vector **desc)
{
    spmv_client_status st;

    if (desc) *desc = NULL;
    if (!h) return SPMV_CLIENT_ERR_INVALID;
    clear_error(h);
    if ((st = check_id(h, id, "vector")) != SPMV_CLIENT_OK) return st;
    if (!dtype_ok(dtype) || !values || count == 0 || count > SIZE_MAX / dtype_size(dtype))
        return fail(h, SPMV_CLIENT_ERR_INVALID, "bad dtype, no values, or a count that overflows size_t");
    request req = {.method = "PUT", .collection = "vectors", .id = id, .content_type = "application/octet-stream",
                   .body = values, .body_len = count * dtype_size(dtype)};
    return request_vector(h, &req, desc);
}

spmv_client_status spmv_client_vector_delete(spmv_client *h, const char *id)
{
    return delete_at(h, "vectors", id, id_ok(id), "vector id must be 1 to 63 characters");
}

spmv_client_status spmv_client_vectors(spmv_client *h, spmv_client_vector_list **out)
{
    FETCH_LIST(spmv_client_vector_list, spmv_client_vector_list_free, "/v1/vectors", "vectors", &vector_kind);
}

/* --------------------------------------- spmv with resident operands */

static bool shm_name_ok(const char *name);

/* Everything spmv_client_spmv() and _spmv_shm() refuse before sending;
 * xs / ys (may be NULL) are the operands in a region. */
static spmv_client_status operands_ok(spmv_client *h, const spmv_client_operands *a, const spmv_client_shm_ref *xs,
                                      const spmv_client_shm_ref *ys)
{
    int64_t k = a->k ? a->k : 1;
    int xways = (a->x_vector != NULL) + (a->x != NULL) + (xs != NULL);
    int yways = (a->y_vector != NULL) + (a->y != NULL) + (ys != NULL);
    if (!dtype_ok(a->dtype))
        return fail(h, SPMV_CLIENT_ERR_INVALID, "dtype must be SPMV_CLIENT_FLOAT64 or _FLOAT32");
    if (a->k < 0)
        return fail(h, SPMV_CLIENT_ERR_INVALID, "k must be 1 or more (0: 1), not %lld", (long long)a->k);
    if (a->op && a->op != 'n' && a->op != 't')
        return fail(h, SPMV_CLIENT_ERR_INVALID, "op must be 'n' or 't'");
    if (xways != 1)
        return fail(h, SPMV_CLIENT_ERR_INVALID, "give x one way: as a vector id (x_vector), inline (x)%s, not %s",
                    xs || ys ? " or in a region" : "", xways ? "several" : "none");
    if (yways != 1)
        return fail(h, SPMV_CLIENT_ERR_INVALID, "give y one way: as a vector id (y_vector), a buffer (y)%s, not %s",
                    xs || ys ? " or in a region" : "", yways ? "several" : "none");
    if ((a->x_vector && !id_ok(a->x_vector)) || (a->y_vector && !id_ok(a->y_vector)))
        return fail(h, SPMV_CLIENT_ERR_INVALID, "vector ids must be 1 to 63 characters");
    if ((xs && !shm_name_ok(xs->name)) || (ys && !shm_name_ok(ys->name)))
        return fail(h, SPMV_CLIENT_ERR_INVALID, "region names are 1 to 200 characters of A-Z a-z 0-9 _ . -, "
                    "not starting with a dot");
    if (xs && xs->offset > INT64_MAX)
        return fail(h, SPMV_CLIENT_ERR_INVALID, "x_offset %llu is out of range", (unsigned long long)xs->offset);
    if (ys && ys->offset > INT64_MAX)
        return fail(h, SPMV_CLIENT_ERR_INVALID, "y_offset %llu is out of range", (unsigned long long)ys->offset);
    if (a->scale && a->beta != 0 && !a->y_vector)
        return fail(h, SPMV_CLIENT_ERR_INVALID, "beta = %g needs y as a resident vector (y_vector)", a->beta);
    if (a->scale && !(isfinite(a->alpha) && isfinite(a->beta)))
        return fail(h, SPMV_CLIENT_ERR_INVALID, "alpha and beta must be finite");
    if ((a->x && (a->nx == 0 || a->nx % (uint64_t)k)) || (a->y && (a->ny == 0 || a->ny % (uint64_t)k)))
        return fail(h, SPMV_CLIENT_ERR_INVALID, "inline x (%zu values) and y (%zu) must be non-empty multiples of k = %lld",
                    a->nx, a->ny, (long long)k);
    if (a->nx > SIZE_MAX / 8 || a->ny > SIZE_MAX / 8)
        return fail(h, SPMV_CLIENT_ERR_INVALID, "vector length overflows size_t");
    return SPMV_CLIENT_OK;
}

/* The query of a product: dtype of an inline x, k, op, where x and y are
 * (vector ids, regions and offsets), alpha and beta. */
static void product_query(spmv_client *h, const spmv_client_operands *a, const spmv_client_shm_ref *xs,
                          const spmv_client_shm_ref *ys, request *req)
{
    if (a->x) query_add(h, req, "dtype", dtype_text(a->dtype));
    if (a->k) query_add_int(h, req, "k", (long)a->k);
    if (a->op) query_add(h, req, "op", a->op == 't' ? "t" : "n");
    if (a->x_vector) query_add(h, req, "x", a->x_vector);
    if (a->y_vector) query_add(h, req, "y", a->y_vector);
    if (xs) {
        query_add(h, req, "x_shm", xs->name);
        query_add_u64(h, req, "x_offset", xs->offset);
    }
    if (ys) {
        query_add(h, req, "y_shm", ys->name);
        query_add_u64(h, req, "y_offset", ys->offset);
    }
    if (a->scale) {
        query_add_double(h, req, "alpha", a->alpha);
        query_add_double(h, req, "beta", a->beta);
    }
}

/* The statistics of a product whose y did not come back inline: from
 * X-SpMV-Stats, or from a JSON answer body (y in a region may be answered
 * either way). */
static spmv_client_status product_stats(spmv_client *h, const response *r, spmv_client_product_result *res)
{
    const char *text = r->stats_header;
    if (!text && r->body.len && r->body.data[0] == '{')
        text = r->body.data;
    spmv_client_status st = parse_stats_header(h, text, &res->spmv);
    if (st == SPMV_CLIENT_OK) {
        json_t *root = json_loads(text, 0, NULL);
        res->axpby_ms = json_num(json_object_get(root, "axpby_ms"), NAN);
        json_decref(root);
    }
    return st;
}

/* What a product answered: y inline of the length asked for, or (y on the
 * daemon's side) nothing but the statistics. */
static spmv_client_status product_answer(spmv_client *h, const response *r, const spmv_client_operands *a,
                                         const spmv_client_shm_ref *ys, spmv_client_product_result *res)
{
    size_t esize = dtype_size(a->dtype);
    if (a->y && r->sink_len != a->ny * esize)
        return fail(h, SPMV_CLIENT_ERR_PROTOCOL, "y has %zu bytes, expected %zu", r->sink_len, a->ny * esize);
    /* y went into a vector (an empty answer) or a region (empty, or the JSON statistics) */
    if (!a->y && r->body.len && !(ys && r->body.data[0] == '{'))
        return fail(h, SPMV_CLIENT_ERR_PROTOCOL, "y went to the daemon's side, yet the answer has %zu bytes",
                    r->body.len);
    return product_stats(h, r, res);
}

static spmv_client_status product(spmv_client *h, const char *id, const spmv_client_operands *a,
                                  const spmv_client_shm_ref *xs, const spmv_client_shm_ref *ys,
                                  const spmv_client_spmv_options *opts, spmv_client_product_result *res)
{
    spmv_client_product_result local;
    spmv_client_status st;

    if (!h || !a) return SPMV_CLIENT_ERR_INVALID;
    clear_error(h);
    if ((st = check_id(h, id, "matrix")) != SPMV_CLIENT_OK) return st;
    if ((st = operands_ok(h, a, xs, ys)) != SPMV_CLIENT_OK) return st;
    if (!res) res = &local;
    memset(res, 0, sizeof *res);
    res->spmv.max_rel_err = res->spmv.queue_ms = res->axpby_ms = NAN;
    size_t esize = dtype_size(a->dtype);
    request req = {.method = "POST", .collection = "matrices", .id = id, .suffix = "/spmv",
                   .content_type = "application/octet-stream", .body = a->x ? a->x : "",
                   .body_len = a->x ? a->nx * esize : 0, .accept = "application/octet-stream", .sink = a->y,
                   .sink_cap = a->y ? a->ny * esize : 0};
    if ((st = spmv_query(h, opts, &req)) != SPMV_CLIENT_OK)
        return st;
    product_query(h, a, xs, ys, &req);
    response r;
    st = do_request(h, &req, &r);
    res->spmv.request_ms = r.total_ms;
    if (st == SPMV_CLIENT_OK)
        st = product_answer(h, &r, a, ys, res);
    response_clear(&r);
    return st;
}

spmv_client_status spmv_client_spmv(spmv_client *h, const char *id, const spmv_client_operands *a,
                                    const spmv_client_spmv_options *opts, spmv_client_product_result *res)
{
    return product(h, id, a, NULL, NULL, opts, res);
}

spmv_client_status spmv_client_spmv_shm(spmv_client *h, const char *id, const spmv_client_operands *a,
                                        const spmv_client_shm_ref *x, const spmv_client_shm_ref *y,
                                        const spmv_client_spmv_options *opts, spmv_client_product_result *res)
{
    if (h && !x && !y) {
        clear_error(h);
        return fail(h, SPMV_CLIENT_ERR_INVALID, "spmv_client_spmv_shm needs x or y in a region");
    }
    return product(h, id, a, x, y, opts, res);
}

/* ---------------------------------------------------- shared memory */

/* The daemon's rule for a region name (docs/api.md): 1-200 characters of
 * A-Z a-z 0-9 _ . -, not starting with a dot. Checked here too, so that a
 * name never needs escaping in a path and a '/' never reaches the server. */
static bool shm_name_ok(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > 200 || name[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' ||
              ch == '.' || ch == '-'))
            return false;
    }
    return true;
}

static void shm_clear(spmv_client_shm *r)
{
    free(r->json);
    memset(r, 0, sizeof *r);
}

void spmv_client_shm_free(spmv_client_shm *r)
{
    if (!r)
        return;
    shm_clear(r);
    free(r);
}

void spmv_client_shm_list_free(spmv_client_shm_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->count; i++)
        shm_clear(&l->items[i]);
    free(l->items);
    free(l->json);
    free(l);
}

/* Fills the spmv_client_shm `item` from a descriptor; false (cleared)
 * when it lacks a valid name or a size is out of range. */
static bool parse_shm(const json_t *d, void *item)
{
    spmv_client_shm *r = item;
    const char *name = json_string_value(json_object_get(d, "name"));
    const json_t *pinned = json_object_get(d, "pinned");
    int64_t offset = 0, size = 0, object = 0, uses = 0;

    memset(r, 0, sizeof *r);
    if (!json_is_object(d) || !name || strlen(name) >= sizeof r->name)
        return false;
    const json_t *ob = json_object_get(d, "object_bytes");
    if (json_is_integer(ob) && json_integer_value(ob) == -1)
        ob = NULL; /* the daemon could not fstat the object: unknown */
    if (!json_count(json_object_get(d, "offset"), INT64_MAX, &offset) ||
        !json_count(json_object_get(d, "size"), INT64_MAX, &size) || !json_count(ob, INT64_MAX, &object) ||
        !json_count(json_object_get(d, "uses"), INT64_MAX, &uses))
        return false;
    snprintf(r->name, sizeof r->name, "%s", name);
    r->offset = (uint64_t)offset;
    r->size = (uint64_t)size;
    r->object_bytes = (uint64_t)object;
    r->uses = uses;
    r->pinned = json_is_boolean(pinned) ? json_is_true(pinned) : -1;
    copy_str(r->state, sizeof r->state, json_object_get(d, "state"));
    copy_str(r->created, sizeof r->created, json_object_get(d, "created"));
    copy_str(r->kind, sizeof r->kind, json_object_get(d, "kind"));
    copy_str(r->device, sizeof r->device, json_object_get(d, "device"));
    if (!(r->json = dump_json(d))) {
        shm_clear(r);
        return false;
    }
    return true;
}

static const item_kind shm_kind = {sizeof(spmv_client_shm), parse_shm, "region", "a name"};

/* Registers a region: POSIX when `ipc` is NULL, else CUDA on `device`. */
static spmv_client_status shm_register(spmv_client *h, const char *name, const unsigned char *ipc, const char *device,
                                       uint64_t offset, uint64_t size, spmv_client_shm **out)
{
    char hex[2 * SPMV_CLIENT_CUDA_IPC_HANDLE_BYTES + 1];

    if (!shm_name_ok(name))
        return fail(h, SPMV_CLIENT_ERR_INVALID, "a region name is 1 to 200 characters of A-Z a-z 0-9 _ . -, "
                    "not starting with a dot (shm_open's name without its slash)");
    if (size == 0 || size > INT64_MAX || offset > INT64_MAX - size)
        return fail(h, SPMV_CLIENT_ERR_INVALID, "size must be > 0 and offset + size within 2^63 (offset %llu, "
                    "size %llu)", (unsigned long long)offset, (unsigned long long)size);
    request req = {.method = "POST", .path = "/v1/shm"};
    body_set(&req, "name", json_string(name));
    body_set(&req, "offset", json_integer((json_int_t)offset));
    body_set(&req, "size", json_integer((json_int_t)size));
    if (ipc) {
        for (int i = 0; i < SPMV_CLIENT_CUDA_IPC_HANDLE_BYTES; i++)
            snprintf(hex + 2 * i, 3, "%02x", ipc[i]);
        body_set(&req, "cuda_ipc", json_string(hex));
        body_set(&req, "device", json_string(device));
    }
    return request_item(h, &req, &shm_kind, (void **)out);
}

spmv_client_status spmv_client_shm_register(spmv_client *h, const char *name, uint64_t offset, uint64_t size,
                                            spmv_client_shm **out)
{
    if (out) *out = NULL;
    if (!h) return SPMV_CLIENT_ERR_INVALID;
    clear_error(h);
    return shm_register(h, name, NULL, NULL, offset, size, out);
}

spmv_client_status spmv_client_shm_register_cuda(spmv_client *h, const char *name, const void *handle,
                                                 const char *device, uint64_t offset, uint64_t size,
                                                 spmv_client_shm **out)
{
    if (out) *out = NULL;
    if (!h) return SPMV_CLIENT_ERR_INVALID;
    clear_error(h);
    if (!handle || !device || !*device || strlen(device) > 31)
        return fail(h, SPMV_CLIENT_ERR_INVALID, "a CUDA region needs the IPC handle and a device (\"gpu0\")");
    return shm_register(h, name, handle, device, offset, size, out);
}

spmv_client_status spmv_client_shm_get(spmv_client *h, const char *name, spmv_client_shm **out)
{
    if (out) *out = NULL;
    if (!h || !out) return SPMV_CLIENT_ERR_INVALID;
    clear_error(h);
    if (!shm_name_ok(name)) return fail(h, SPMV_CLIENT_ERR_INVALID, "not a region name");
    request req = {.method = "GET", .collection = "shm", .id = name};
    return request_item(h, &req, &shm_kind, (void **)out);
}

spmv_client_status spmv_client_shm_regions(spmv_client *h, spmv_client_shm_list **out)
{
    FETCH_LIST(spmv_client_shm_list, spmv_client_shm_list_free, "/v1/shm", "regions", &shm_kind);
}

spmv_client_status spmv_client_shm_unregister(spmv_client *h, const char *name)
{
    return delete_at(h, "shm", name, shm_name_ok(name), "not a region name");
}

/* {"shm": name, "offset": bytes}, the JSON form of a region operand. */
static json_t *shm_ref_json(const spmv_client_shm_ref *r)
{
    return json_pack("{s:s, s:I}", "shm", r->name, "offset", (json_int_t)r->offset);
}

static spmv_client_status shm_ref_ok(spmv_client *h, const spmv_client_shm_ref *r)
{
    if (!r || !shm_name_ok(r->name))
        return fail(h, SPMV_CLIENT_ERR_INVALID, "a region operand needs a region name of 1 to 200 characters of "
                    "A-Z a-z 0-9 _ . -, not starting with a dot");
    if (r->offset > INT64_MAX)
        return fail(h, SPMV_CLIENT_ERR_INVALID, "offset %llu is out of range", (unsigned long long)r->offset);
    return SPMV_CLIENT_OK;
}

spmv_client_status spmv_client_vector_create_shm(spmv_client *h, const spmv_client_shm_ref *values, int64_t n,
                                                 const spmv_client_vector_options *opts, spmv_client_vector **out)
{
    spmv_client_status st;
    if (!h || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    clear_error(h);
    if ((st = shm_ref_ok(h, values)) != SPMV_CLIENT_OK)
        return st;
    return vector_create_json(h, n, "values", shm_ref_json(values), NULL, opts, out);
}

spmv_client_status spmv_client_vector_write_shm(spmv_client *h, const char *id, const spmv_client_shm_ref *values,
                                                spmv_client_vector **desc)
{
    spmv_client_status st;

    if (desc) *desc = NULL;
    if (!h) return SPMV_CLIENT_ERR_INVALID;
    clear_error(h);
    if ((st = check_id(h, id, "vector")) != SPMV_CLIENT_OK) return st;
    if ((st = shm_ref_ok(h, values)) != SPMV_CLIENT_OK) return st;
    request req = {.method = "PUT", .collection = "vectors", .id = id};
    body_set(&req, "values", shm_ref_json(values));
    return request_vector(h, &req, desc);
}

spmv_client_status spmv_client_vector_read_shm(spmv_client *h, const char *id, const spmv_client_shm_ref *into,
                                               spmv_client_vector **desc)
{
    spmv_client_status st;

    if (desc) *desc = NULL;
    if (!h) return SPMV_CLIENT_ERR_INVALID;
    clear_error(h);
    if ((st = check_id(h, id, "vector")) != SPMV_CLIENT_OK) return st;
    if ((st = shm_ref_ok(h, into)) != SPMV_CLIENT_OK) return st;
    request req = {.method = "GET", .collection = "vectors", .id = id, .accept = "application/json"};
    query_add(h, &req, "shm", into->name);
    query_add_u64(h, &req, "offset", into->offset);
    return request_vector(h, &req, desc);
}

/* --------------------------------------------------------- batched steps */

struct spmv_client_ops {
    json_t *steps;            /* the array of step objects */
    char error[256];          /* the first failed append, "" when none */
};

spmv_client_ops *spmv_client_ops_new(void)
{
    spmv_client_ops *o = calloc(1, sizeof *o);
    if (o && !(o->steps = json_array())) {
        free(o);
        return NULL;
    }
    return o;
}

void spmv_client_ops_free(spmv_client_ops *o)
{
    if (!o)
        return;
    json_decref(o->steps);
    free(o);
}

void spmv_client_ops_clear(spmv_client_ops *o)
{
    if (!o)
        return;
    json_array_clear(o->steps);
    o->error[0] = '\0';
}

size_t spmv_client_ops_count(const spmv_client_ops *o)
{
    return o ? json_array_size(o->steps) : 0;
}

char *spmv_client_ops_json(const spmv_client_ops *o)
{
    if (!o)
        return NULL;
    json_t *root = json_pack("{s:O}", "steps", o->steps);
    char *text = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    return text;
}

/* Records the first failed append; returns status. */
__attribute__((format(printf, 3, 4)))
static spmv_client_status ops_fail(spmv_client_ops *o, spmv_client_status st, const char *fmt, ...)
{
    if (o && !o->error[0]) {
        va_list ap;
        int n = snprintf(o->error, sizeof o->error, "step %zu: ", json_array_size(o->steps) + 1);
        va_start(ap, fmt);
        vsnprintf(o->error + n, sizeof o->error - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* Appends {"op": op, then (key, kind, value) triples}: kind 's' a
 * non-empty id or name, 'd' a finite number. Ends at a NULL key. */
static spmv_client_status ops_append(spmv_client_ops *o, const char *op, ...)
{
    va_list ap;
    spmv_client_status st = SPMV_CLIENT_OK;
    json_t *step;

    if (!o)
        return SPMV_CLIENT_ERR_INVALID;
    if (!(step = json_pack("{s:s}", "op", op)))
        return ops_fail(o, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    va_start(ap, op);
    for (const char *key; st == SPMV_CLIENT_OK && (key = va_arg(ap, const char *));) {
        int kind = va_arg(ap, int);
        json_t *v = NULL;
        if (kind == 's') {
            const char *s = va_arg(ap, const char *);
            if (!s || !*s || strlen(s) >= 64) {
                st = ops_fail(o, SPMV_CLIENT_ERR_INVALID, "%s: \"%s\" must be 1 to 63 characters", op, key);
                break;
            }
            v = json_string(s);
        } else {
            double d = va_arg(ap, double);
            if (!isfinite(d)) {
                st = ops_fail(o, SPMV_CLIENT_ERR_INVALID, "%s: \"%s\" must be a finite number", op, key);
                break;
            }
            v = json_real(d);
        }
        if (!v || json_object_set_new(step, key, v) != 0)
            st = ops_fail(o, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    }
    va_end(ap);
    if (st == SPMV_CLIENT_OK && json_array_append(o->steps, step) != 0)
        st = ops_fail(o, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    json_decref(step);
    return st;
}

spmv_client_status spmv_client_ops_spmv(spmv_client_ops *o, const char *matrix, const char *x, const char *y,
                                        double alpha, double beta, char trans, const char *kernel)
{
    if (trans != 'n' && trans != 't')
        return ops_fail(o, SPMV_CLIENT_ERR_INVALID, "spmv: trans must be 'n' or 't'");
    return ops_append(o, "spmv", "matrix", 's', matrix, "x", 's', x, "y", 's', y, "alpha", 'd', alpha, "beta", 'd',
                      beta, "trans", 's', trans == 't' ? "t" : "n", "kernel", 's', kernel ? kernel : "auto",
                      (const char *)NULL);
}

spmv_client_status spmv_client_ops_dot(spmv_client_ops *o, const char *x, const char *y, const char *as)
{
    return ops_append(o, "dot", "x", 's', x, "y", 's', y, "as", 's', as, (const char *)NULL);
}

spmv_client_status spmv_client_ops_nrm2(spmv_client_ops *o, const char *x, const char *as)
{
    return ops_append(o, "nrm2", "x", 's', x, "as", 's', as, (const char *)NULL);
}

spmv_client_status spmv_client_ops_axpy(spmv_client_ops *o, double alpha, const char *x, const char *y)
{
    return ops_append(o, "axpy", "alpha", 'd', alpha, "x", 's', x, "y", 's', y, (const char *)NULL);
}

spmv_client_status spmv_client_ops_axpby(spmv_client_ops *o, double alpha, const char *x, double beta,
                                         const char *y)
{
    return ops_append(o, "axpby", "alpha", 'd', alpha, "x", 's', x, "beta", 'd', beta, "y", 's', y,
                      (const char *)NULL);
}

spmv_client_status spmv_client_ops_scal(spmv_client_ops *o, double alpha, const char *x)
{
    return ops_append(o, "scal", "alpha", 'd', alpha, "x", 's', x, (const char *)NULL);
}

spmv_client_status spmv_client_ops_copy(spmv_client_ops *o, const char *x, const char *y)
{
    return ops_append(o, "copy", "x", 's', x, "y", 's', y, (const char *)NULL);
}

spmv_client_status spmv_client_ops_fill(spmv_client_ops *o, const char *x, double value)
{
    return ops_append(o, "fill", "x", 's', x, "value", 'd', value, (const char *)NULL);
}

void spmv_client_ops_result_free(spmv_client_ops_result *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nresults; i++) {
        free(r->results[i].name);
        free(r->results[i].values);
    }
    free(r->results);
    free(r->steps);
    free(r->json);
    free(r);
}

double spmv_client_ops_result_get(const spmv_client_ops_result *r, const char *name, size_t index)
{
    for (size_t i = 0; r && name && i < r->nresults; i++)
        if (strcmp(r->results[i].name, name) == 0)
            return index < r->results[i].k ? r->results[i].values[index] : NAN;
    return NAN;
}

/* {"results":{name: v | [v...]}, "steps":[{"op","ms"}], "total_ms", "queue_ms", "device"}. */
static bool parse_ops(const json_t *root, spmv_client_ops_result *r)
{
    const json_t *res = json_object_get(root, "results"), *steps = json_object_get(root, "steps");
    const char *key;
    json_t *v;

    if (!json_is_object(root) || (res && !json_is_object(res)) || (steps && !json_is_array(steps)))
        return false;
    size_t n = json_object_size(res), ns = json_array_size(steps);
    if ((n && !(r->results = calloc(n, sizeof *r->results))) || (ns && !(r->steps = calloc(ns, sizeof *r->steps))))
        return false;
    json_object_foreach((json_t *)res, key, v) {
        spmv_client_ops_value *o = &r->results[r->nresults++];
        size_t k = json_is_array(v) ? json_array_size(v) : 1;
        if (!(o->name = strdup(key)) || !(o->values = calloc(k ? k : 1, sizeof *o->values)))
            return false;
        o->k = k;
        for (size_t i = 0; i < k; i++)
            o->values[i] = json_num(json_is_array(v) ? json_array_get(v, i) : v, NAN);
    }
    for (size_t i = 0; i < ns; i++, r->nsteps++) {
        const json_t *s = json_array_get(steps, i);
        copy_str(r->steps[i].op, sizeof r->steps[i].op, json_object_get(s, "op"));
        r->steps[i].ms = json_num(json_object_get(s, "ms"), NAN);
    }
    r->total_ms = json_num(json_object_get(root, "total_ms"), NAN);
    r->queue_ms = json_num(json_object_get(root, "queue_ms"), NAN);
    copy_str(r->device, sizeof r->device, json_object_get(root, "device"));
    return (r->json = dump_json(root)) != NULL;
}

/* The ops answer into a fresh result. */
static spmv_client_status ops_from_json(spmv_client *h, const response *r, spmv_client_ops_result **out)
{
    spmv_client_ops_result *res = calloc(1, sizeof *res);
    if (!res)
        return fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    if (!parse_ops(r->json, res)) {
        spmv_client_ops_result_free(res);
        return fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the ops answer's results or steps are malformed (or memory ran out)");
    }
    res->request_ms = r->total_ms;
    *out = res;
    return SPMV_CLIENT_OK;
}

spmv_client_status spmv_client_ops_post(spmv_client *h, const char *json, spmv_client_ops_result **out)
{
    spmv_client_status st;

    if (out) *out = NULL;
    if (!h) return SPMV_CLIENT_ERR_INVALID;
    clear_error(h);
    if (!json || !*json) return fail(h, SPMV_CLIENT_ERR_INVALID, "the steps are empty");
    request req = {.method = "POST", .path = "/v1/ops", .content_type = "application/json", .body = json,
                   .body_len = strlen(json), .want_json = out != NULL};
    response r;
    if ((st = do_request(h, &req, &r)) == SPMV_CLIENT_OK && out)
        st = ops_from_json(h, &r, out);
    response_clear(&r);
    return st;
}

spmv_client_status spmv_client_ops_run(spmv_client *h, const spmv_client_ops *ops, spmv_client_ops_result **out)
{
    if (out) *out = NULL;
    if (!h) return SPMV_CLIENT_ERR_INVALID;
    clear_error(h);
    if (!ops) return fail(h, SPMV_CLIENT_ERR_INVALID, "no steps (NULL builder)");
    if (ops->error[0]) return fail(h, SPMV_CLIENT_ERR_INVALID, "%s", ops->error);
    if (json_array_size(ops->steps) == 0) return fail(h, SPMV_CLIENT_ERR_INVALID, "the builder holds no steps");
    char *text = spmv_client_ops_json(ops);
    if (!text) return fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    spmv_client_status st = spmv_client_ops_post(h, text, out);
    free(text);
    return st;
}

/* --------------------------------------------------------------- solvers */

void spmv_client_solve_result_free(spmv_client_solve_result *r)
{
    if (!r)
        return;
    free(r->stop_detail);
    free(r->history);
    free(r->json);
    free(r);
}

/* An operand as an inline array of n doubles or {"vector": id}. */
static json_t *operand_json(const char *vector, const double *v, size_t n, bool *finite)
{
    if (vector)
        return json_pack("{s:s}", "vector", vector);
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        if (!isfinite(v[i])) {
            *finite = false;
            break;
        }
        if (json_array_append_new(a, json_real(v[i])) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* The solve body: method, tol, maxit, restart, preconditioner, kernel, b,
 * x0, x_out, async; INVALID when an inline value is not finite. */
static spmv_client_status solve_body(spmv_client *h, const spmv_client_solve_options *o, request *req)
{
    bool finite = true;
    if (o->method) body_set(req, "method", json_string(o->method));
    if (o->tol) body_set(req, "tol", json_real(o->tol));
    if (o->maxit) body_set(req, "maxit", json_integer(o->maxit));
    if (o->restart) body_set(req, "restart", json_integer(o->restart));
    if (o->preconditioner) body_set(req, "preconditioner", json_string(o->preconditioner));
    if (o->kernel) body_set(req, "kernel", json_string(o->kernel));
    body_set(req, "b", operand_json(o->b_vector, o->b, o->nb, &finite));
    if (o->x0_vector || o->x0) body_set(req, "x0", operand_json(o->x0_vector, o->x0, o->nx0, &finite));
    if (o->x_out_vector) body_set(req, "x_out", json_pack("{s:s}", "vector", o->x_out_vector));
    if (o->async) body_set(req, "async", json_true());
    if (finite)
        return SPMV_CLIENT_OK;
    json_decref(req->json);
    req->json = NULL;
    return fail(h, SPMV_CLIENT_ERR_INVALID, "b and x0 must hold finite values");
}

/* Fills *r from a solve answer (x excluded); false when a count is out of
 * range or memory runs out. */
static bool parse_solve(const json_t *root, spmv_client_solve_result *r)
{
    const json_t *stop = json_object_get(root, "stop"), *t = json_object_get(root, "time");
    const json_t *hist = json_object_get(root, "residual_history");
    const char *detail = json_string_value(json_object_get(stop, "detail"));

    if (!json_is_object(root) || (hist && !json_is_array(hist)) ||
        !json_count(json_object_get(root, "iterations"), INT64_MAX, &r->iterations) ||
        !json_count(json_object_get(root, "spmv_calls"), INT64_MAX, &r->spmv_calls))
        return false;
    copy_str(r->method, sizeof r->method, json_object_get(root, "method"));
    r->converged = json_is_true(json_object_get(root, "converged"));
    copy_str(r->stop_reason, sizeof r->stop_reason, json_object_get(stop, "reason"));
    r->stop_value = json_num(json_object_get(stop, "value"), NAN);
    r->relres = json_num(json_object_get(root, "relres"), NAN);
    r->total_ms = json_num(json_object_get(t, "total_ms"), NAN);
    r->spmv_ms = json_num(json_object_get(t, "spmv_ms"), NAN);
    r->vector_ms = json_num(json_object_get(t, "vector_ms"), NAN);
    r->setup_ms = json_num(json_object_get(t, "setup_ms"), NAN);
    r->queue_ms = json_num(json_object_get(t, "queue_ms"), NAN);
    copy_str(r->kernel, sizeof r->kernel, json_object_get(root, "kernel"));
    const json_t *dev = json_object_get(root, "device");
    copy_str(r->device, sizeof r->device, json_is_object(dev) ? json_object_get(dev, "name") : dev);
    r->nhistory = json_array_size(hist);
    if (r->nhistory && !(r->history = malloc(r->nhistory * sizeof *r->history)))
        return false;
    for (size_t i = 0; i < r->nhistory; i++)
        r->history[i] = json_num(json_array_get(hist, i), NAN);
    json_t *copy = json_copy((json_t *)root);
    if (copy) json_object_del(copy, "x");
    r->json = dump_json(copy);
    json_decref(copy);
    return (r->stop_detail = strdup(detail ? detail : "")) && r->json;
}

/* The answer's "x" into the caller's buffer: exactly nx finite-or-not numbers. */
static spmv_client_status solve_x(spmv_client *h, const json_t *root, double *x, size_t nx,
                                  spmv_client_solve_result *r)
{
    const json_t *a = json_object_get(root, "x");
    if (!x || !a)
        return SPMV_CLIENT_OK;
    if (!json_is_array(a) || json_array_size(a) != nx)
        return fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the answer's x has %zu values, expected %zu",
                    json_is_array(a) ? json_array_size(a) : 0, nx);
    for (size_t i = 0; i < nx; i++)
        x[i] = json_num(json_array_get(a, i), NAN);
    r->has_x = 1;
    return SPMV_CLIENT_OK;
}

spmv_client_status spmv_client_solve_parse(spmv_client *h, const char *json, double *x, size_t nx,
                                           spmv_client_solve_result **out)
{
    json_t *root = NULL;
    spmv_client_solve_result *r = NULL;
    spmv_client_status st;

    if (!h || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    clear_error(h);
    if (!json) return fail(h, SPMV_CLIENT_ERR_INVALID, "no JSON text to parse");
    if (!(root = json_loads(json, 0, NULL)))
        return fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the solve answer is not JSON");
    st = fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    if (!(r = calloc(1, sizeof *r)))
        goto done;
    r->request_ms = NAN;
    if (!parse_solve(root, r)) {
        st = fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the solve answer has a count out of range (or memory ran out)");
        goto done;
    }
    if ((st = solve_x(h, root, x, nx, r)) != SPMV_CLIENT_OK)
        goto done;
    h->errmsg[0] = '\0';
    *out = r;
    r = NULL;
done:
    spmv_client_solve_result_free(r);
    json_decref(root);
    return st;
}

/* Everything spmv_client_solve() refuses before sending. */
static spmv_client_status solve_options_ok(spmv_client *h, const spmv_client_solve_options *opts, const double *x,
                                           size_t nx)
{
    if (!opts || !opts->b_vector == !opts->b)
        return fail(h, SPMV_CLIENT_ERR_INVALID, "give b either as a vector id (b_vector) or inline (b, nb), not %s",
                    opts && opts->b ? "both" : "neither");
    if (opts->x0_vector && opts->x0)
        return fail(h, SPMV_CLIENT_ERR_INVALID, "give x0 as a vector id or inline, not both");
    if ((opts->b && opts->nb == 0) || (opts->x0 && opts->nx0 == 0))
        return fail(h, SPMV_CLIENT_ERR_INVALID, "inline b and x0 need at least one value");
    if (!(opts->tol >= 0 && isfinite(opts->tol)) || opts->maxit < 0 || opts->restart < 0)
        return fail(h, SPMV_CLIENT_ERR_INVALID, "tol must be finite and >= 0, maxit and restart >= 0 (0: server default)");
    if ((opts->b_vector && !id_ok(opts->b_vector)) || (opts->x0_vector && !id_ok(opts->x0_vector)) ||
        (opts->x_out_vector && !id_ok(opts->x_out_vector)))
        return fail(h, SPMV_CLIENT_ERR_INVALID, "vector ids must be 1 to 63 characters");
    if (x && nx > SIZE_MAX / 8)
        return fail(h, SPMV_CLIENT_ERR_INVALID, "x length overflows size_t");
    return SPMV_CLIENT_OK;
}

/* The answer to an async solve: the job's id, and the answer as JSON. */
static spmv_client_status solve_job(spmv_client *h, response *r, spmv_client_solve_result *res)
{
    spmv_client_status st = parse_body(h, r, &r->json);
    if (st == SPMV_CLIENT_OK)
        st = take_job_id(h, r, "async solve", res->job_id, sizeof res->job_id);
    if (st == SPMV_CLIENT_OK && (!(res->json = dump_json(r->json)) || !(res->stop_detail = strdup(""))))
        st = fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    return st;
}

/* The answer to a solve run to its end: x in binary with the rest in the
 * X-SpMV-Solve header, or all of it as JSON. */
static spmv_client_status solve_done(spmv_client *h, response *r, double *x, size_t nx,
                                     spmv_client_solve_result *res)
{
    spmv_client_status st;
    if (r->to_sink == 1) {
        if (r->sink_len != nx * 8)
            return fail(h, SPMV_CLIENT_ERR_PROTOCOL, "x has %zu bytes, expected %zu (%zu float64 values)",
                        r->sink_len, nx * 8, nx);
        if (!r->meta_header || !(r->json = json_loads(r->meta_header, 0, NULL)))
            return fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the X-SpMV-Solve header is %s",
                        r->meta_header ? "not JSON" : "missing");
        res->has_x = 1;
    } else if ((st = parse_body(h, r, &r->json)) != SPMV_CLIENT_OK ||
               (st = solve_x(h, r->json, x, nx, res)) != SPMV_CLIENT_OK) {
        return st;
    }
    if (!parse_solve(r->json, res))
        return fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the solve answer has a count out of range (or memory ran out)");
    return SPMV_CLIENT_OK;
}

spmv_client_status spmv_client_solve(spmv_client *h, const char *id, const spmv_client_solve_options *opts,
                                     double *x, size_t nx, spmv_client_solve_result **out)
{
    spmv_client_solve_result *res;
    spmv_client_status st;

    if (!h || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    clear_error(h);
    if ((st = check_id(h, id, "matrix")) != SPMV_CLIENT_OK || (st = solve_options_ok(h, opts, x, nx)) != SPMV_CLIENT_OK)
        return st;
    bool binary = x && !opts->x_out_vector && !opts->async;
    request req = {.method = "POST", .collection = "matrices", .id = id, .suffix = "/solve",
                   .accept = binary ? "application/octet-stream" : NULL, .sink = binary ? x : NULL,
                   .sink_cap = binary ? nx * 8 : 0, .sink_if_binary = true, .meta_name = "x-spmv-solve:"};
    if ((st = solve_body(h, opts, &req)) != SPMV_CLIENT_OK)
        return st;
    if (!(res = calloc(1, sizeof *res))) {
        json_decref(req.json);
        return fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    }
    response r;
    if ((st = do_request(h, &req, &r)) == SPMV_CLIENT_OK) {
        res->request_ms = r.total_ms;
        st = opts->async ? solve_job(h, &r, res) : solve_done(h, &r, x, nx, res);
    }
    response_clear(&r);
    if (st == SPMV_CLIENT_OK)
        *out = res;
    else
        spmv_client_solve_result_free(res);
    return st;
}
