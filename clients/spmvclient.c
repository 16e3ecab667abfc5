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

/* What one request needs; zero-initialise and fill in. */
typedef struct request {
    const char *method;       /* "GET", "POST", "DELETE" */
    const char *path;         /* appended to the base URL, starts with "/" */
    const char *content_type; /* for body */
    const void *body;
    size_t body_len;
    curl_mime *mime;          /* multipart form instead of body */
    void *sink;               /* a 2xx answer's body goes here (binary) ... */
    size_t sink_cap;          /* ... at most this many bytes */
    spmv_client_progress_fn progress;
    void *progress_user;
} request;

/* What came back. */
typedef struct response {
    long status;
    buffer body;              /* the answer when there is no sink, or an error body */
    size_t sink_len;
    bool sink_overflow;
    char *stats_header;       /* X-SpMV-Stats */
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
    case SPMV_CLIENT_ERR_UNAUTHORIZED: return "not authorised (token missing or wrong)";
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
    if (r->req->sink && code >= 200 && code < 300) {
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

/* Picks X-SpMV-Stats out of the headers; Retry-After is read through
 * CURLINFO_RETRY_AFTER instead. */
static size_t on_header(char *data, size_t size, size_t nitems, void *user)
{
    response *r = user;
    size_t n = size * nitems;
    static const char name[] = "x-spmv-stats:";
    const size_t nl = sizeof name - 1;

    if (n > nl && strncasecmp(data, name, nl) == 0) {
        const char *v = data + nl;
        size_t len = n - nl;
        while (len && (*v == ' ' || *v == '\t')) v++, len--;
        while (len && (v[len - 1] == '\r' || v[len - 1] == '\n' || v[len - 1] == ' ')) len--;
        free(r->stats_header);
        r->stats_header = strndup(v, len);
    }
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

/* Runs one request. On SPMV_CLIENT_OK the server answered 2xx and r holds
 * the answer; otherwise the handle holds the error. The caller frees r
 * with response_clear() either way. */
static spmv_client_status do_request(spmv_client *h, const request *req, response *r)
{
    spmv_client_status st = SPMV_CLIENT_ERR_NOMEM;
    struct curl_slist *headers = NULL, *tmp;
    char *url = NULL, *ctype = NULL;

    memset(r, 0, sizeof *r);
    r->req = req;
    r->curl = h->curl;
    r->body.limit = MAX_JSON_BODY;
    clear_error(h);

    if (asprintf(&url, "%s%s", h->base, req->path) < 0) {
        url = NULL;
        goto fail;
    }
    /* An empty Expect: avoids a 1 s stall on servers that ignore 100-continue. */
    if (!(tmp = curl_slist_append(headers, "Expect:")))
        goto fail;
    headers = tmp;
    if (h->auth_header) {
        if (!(tmp = curl_slist_append(headers, h->auth_header)))
            goto fail;
        headers = tmp;
    }
    if (req->content_type) {
        if (asprintf(&ctype, "Content-Type: %s", req->content_type) < 0) {
            ctype = NULL;
            goto fail;
        }
        if (!(tmp = curl_slist_append(headers, ctype)))
            goto fail;
        headers = tmp;
    }
    set_options(h, req, r, headers, url);

    CURLcode rc = curl_easy_perform(h->curl);
    curl_off_t total_us = 0, retry = 0;
    curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_getinfo(h->curl, CURLINFO_TOTAL_TIME_T, &total_us);
    curl_easy_getinfo(h->curl, CURLINFO_RETRY_AFTER, &retry);
    r->total_ms = (double)total_us / 1e3;
    h->http_status = r->status;
    h->retry_after = (long)retry;
    if (rc != CURLE_OK)
        st = status_from_curl(h, rc, r);
    else if (r->status < 200 || r->status >= 300)
        st = http_error(h, r);
    else
        st = SPMV_CLIENT_OK;
    /* Leave nothing on the handle that points into this call's memory. */
    curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(h->curl, CURLOPT_MIMEPOST, NULL);
    free(url);
    free(ctype);
    curl_slist_free_all(headers);
    return st;
fail:
    free(url);
    free(ctype);
    curl_slist_free_all(headers);
    return fail(h, st, "out of memory building the request");
}

static void response_clear(response *r)
{
    free(r->body.data);
    free(r->stats_header);
    memset(r, 0, sizeof *r);
}

/* A path "/v1/<what>/<escaped id><suffix>". */
static char *id_path(spmv_client *h, const char *what, const char *id, const char *suffix)
{
    char *esc = curl_easy_escape(h->curl, id, 0);
    char *path = NULL;
    if (esc && asprintf(&path, "/v1/%s/%s%s", what, esc, suffix) < 0)
        path = NULL;
    curl_free(esc);
    return path;
}

static bool id_ok(const char *id)
{
    return id && *id && strlen(id) < 64;
}

/* ------------------------------------------------------------------ JSON */

/* Parses the answer body as JSON; PROTOCOL when it is not. */
static spmv_client_status parse_body(spmv_client *h, const response *r, json_t **out)
{
    json_error_t jerr;
    *out = json_loadb(r->body.data ? r->body.data : "", r->body.len, JSON_ALLOW_NUL, &jerr);
    if (!*out)
        return fail(h, SPMV_CLIENT_ERR_PROTOCOL, "answer is not JSON: %s (byte %d)", jerr.text, jerr.position);
    return SPMV_CLIENT_OK;
}

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

/* Fills *m from a descriptor object. False (m cleared) when it lacks an id
 * or a size is out of range. */
static bool parse_matrix(const json_t *d, spmv_client_matrix *m)
{
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

/* Parses a descriptor answer into a fresh spmv_client_matrix. */
static spmv_client_status matrix_from_response(spmv_client *h, const response *r, spmv_client_matrix **out)
{
    json_t *root = NULL;
    spmv_client_status st = parse_body(h, r, &root);
    if (st != SPMV_CLIENT_OK)
        return st;
    spmv_client_matrix *m = calloc(1, sizeof *m);
    if (!m) {
        st = fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    } else if (!parse_matrix(root, m)) {
        free(m);
        m = NULL;
        st = fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the matrix descriptor lacks an id or has a size out of range");
    }
    json_decref(root);
    *out = m;
    return st;
}

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
    request req = {.method = "GET", .path = path};
    response r;
    *root = NULL;
    spmv_client_status st = do_request(h, &req, &r);
    if (st == SPMV_CLIENT_OK)
        st = parse_body(h, &r, root);
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
    response r;
    spmv_client_status st = do_request(h, &req, &r);
    response_clear(&r);
    return st;
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

static bool parse_kernel(const json_t *v, spmv_client_kernel *k)
{
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

spmv_client_status spmv_client_kernels(spmv_client *h, spmv_client_kernel_list **out)
{
    json_t *root;
    spmv_client_kernel_list *l = NULL;
    if (!h || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    spmv_client_status st = get_json(h, "/v1/kernels", &root);
    if (st != SPMV_CLIENT_OK)
        goto fail;
    const json_t *arr = json_is_array(root) ? root : json_object_get(root, "kernels");
    if (!json_is_array(arr)) {
        st = fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the kernel list is not a JSON array");
        goto fail;
    }
    size_t n = json_array_size(arr);
    st = fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    if (!(l = calloc(1, sizeof *l)) || (n && !(l->items = calloc(n, sizeof *l->items))))
        goto fail;
    for (size_t i = 0; i < n; i++, l->count++) {
        if (!parse_kernel(json_array_get(arr, i), &l->items[i])) {
            kernel_clear(&l->items[i]);
            st = fail(h, SPMV_CLIENT_ERR_PROTOCOL, "kernel %zu has no name", i);
            goto fail;
        }
    }
    if (!(l->json = dump_json(root)))
        goto fail;
    json_decref(root);
    h->errmsg[0] = '\0';
    *out = l;
    return SPMV_CLIENT_OK;
fail:
    json_decref(root);
    spmv_client_kernel_list_free(l);
    return st;
}

/* -------------------------------------------------------------- matrices */

static bool mime_field(curl_mime *mime, const char *name, const char *value)
{
    curl_mimepart *p = curl_mime_addpart(mime);
    return p && curl_mime_name(p, name) == CURLE_OK && curl_mime_data(p, value, CURL_ZERO_TERMINATED) == CURLE_OK;
}

/* The option fields of an upload form (SPEC §6: name, dtype, formats,
 * hack_size, device). */
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

/* Sends a prepared form (whose "file" part is already added). */
static spmv_client_status upload_form(spmv_client *h, curl_mime *mime, const spmv_client_upload_options *opts,
                                      spmv_client_matrix **out)
{
    request req = {.method = "POST", .path = "/v1/matrices", .mime = mime};
    response r;
    if (opts && opts->progress) {
        req.progress = opts->progress;
        req.progress_user = opts->progress_user;
    }
    spmv_client_status st = do_request(h, &req, &r);
    if (st == SPMV_CLIENT_OK)
        st = matrix_from_response(h, &r, out);
    response_clear(&r);
    return st;
}

spmv_client_status spmv_client_upload_file(spmv_client *h, const char *path, const spmv_client_upload_options *opts,
                                           spmv_client_matrix **out)
{
    spmv_client_status st;
    curl_mime *mime = NULL;
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
    st = fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory building the form");
    if (!(mime = curl_mime_init(h->curl)) || !(part = curl_mime_addpart(mime)) ||
        curl_mime_name(part, "file") != CURLE_OK || curl_mime_filedata(part, path) != CURLE_OK ||
        curl_mime_type(part, "application/octet-stream") != CURLE_OK)
        goto done;
    if ((st = mime_options(h, mime, opts)) != SPMV_CLIENT_OK)
        goto done;
    st = upload_form(h, mime, opts, out);
done:
    curl_mime_free(mime);
    return st;
}

spmv_client_status spmv_client_upload_memory(spmv_client *h, const void *data, size_t len,
                                             const spmv_client_upload_options *opts, spmv_client_matrix **out)
{
    spmv_client_status st;
    curl_mime *mime = NULL;
    curl_mimepart *part;

    if (!h || !data || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    clear_error(h);
    st = fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory building the form");
    if (!(mime = curl_mime_init(h->curl)) || !(part = curl_mime_addpart(mime)) ||
        curl_mime_name(part, "file") != CURLE_OK || curl_mime_data(part, data, len) != CURLE_OK ||
        curl_mime_filename(part, opts && opts->name ? opts->name : "matrix.mtx") != CURLE_OK ||
        curl_mime_type(part, "application/octet-stream") != CURLE_OK)
        goto done;
    if ((st = mime_options(h, mime, opts)) != SPMV_CLIENT_OK)
        goto done;
    st = upload_form(h, mime, opts, out);
done:
    curl_mime_free(mime);
    return st;
}

spmv_client_status spmv_client_list(spmv_client *h, spmv_client_matrix_list **out)
{
    json_t *root;
    spmv_client_matrix_list *l = NULL;
    if (!h || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    spmv_client_status st = get_json(h, "/v1/matrices", &root);
    if (st != SPMV_CLIENT_OK)
        goto fail;
    const json_t *arr = json_is_array(root) ? root : json_object_get(root, "matrices");
    if (!json_is_array(arr)) {
        st = fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the matrix list is not a JSON array");
        goto fail;
    }
    size_t n = json_array_size(arr);
    st = fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    if (!(l = calloc(1, sizeof *l)) || (n && !(l->items = calloc(n, sizeof *l->items))))
        goto fail;
    for (size_t i = 0; i < n; i++, l->count++) {
        if (!parse_matrix(json_array_get(arr, i), &l->items[i])) {
            st = fail(h, SPMV_CLIENT_ERR_PROTOCOL, "descriptor %zu lacks an id or has a size out of range", i);
            goto fail;
        }
    }
    if (!(l->json = dump_json(root)))
        goto fail;
    json_decref(root);
    h->errmsg[0] = '\0';
    *out = l;
    return SPMV_CLIENT_OK;
fail:
    json_decref(root);
    spmv_client_matrix_list_free(l);
    return st;
}

spmv_client_status spmv_client_describe(spmv_client *h, const char *id, spmv_client_matrix **out)
{
    if (!h || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    clear_error(h);
    if (!id_ok(id)) return fail(h, SPMV_CLIENT_ERR_INVALID, "matrix id must be 1 to 63 characters");
    char *path = id_path(h, "matrices", id, "");
    if (!path) return fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    request req = {.method = "GET", .path = path};
    response r;
    spmv_client_status st = do_request(h, &req, &r);
    if (st == SPMV_CLIENT_OK)
        st = matrix_from_response(h, &r, out);
    response_clear(&r);
    free(path);
    return st;
}

spmv_client_status spmv_client_delete(spmv_client *h, const char *id)
{
    if (!h) return SPMV_CLIENT_ERR_INVALID;
    clear_error(h);
    if (!id_ok(id)) return fail(h, SPMV_CLIENT_ERR_INVALID, "matrix id must be 1 to 63 characters");
    char *path = id_path(h, "matrices", id, "");
    if (!path) return fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    request req = {.method = "DELETE", .path = path};
    response r;
    spmv_client_status st = do_request(h, &req, &r);
    response_clear(&r);
    free(path);
    return st;
}

/* ------------------------------------------------------------------ spmv */

/* Appends "&key=value" (escaped) to a growing query string. */
static bool query_add(CURL *c, buffer *q, const char *key, const char *value)
{
    char *k = curl_easy_escape(c, key, 0), *v = curl_easy_escape(c, value, 0);
    bool ok = k && v && buffer_append(q, q->len ? "&" : "?", 1) && buffer_append(q, k, strlen(k)) &&
              buffer_append(q, "=", 1) && buffer_append(q, v, strlen(v));
    curl_free(k);
    curl_free(v);
    return ok;
}

static bool query_add_int(CURL *c, buffer *q, const char *key, long value)
{
    char num[32];
    snprintf(num, sizeof num, "%ld", value);
    return query_add(c, q, key, num);
}

/* "key=value" strings into the query; false when one lacks its '='. */
static bool query_add_params(CURL *c, buffer *q, const char *const *params, bool *malformed)
{
    for (; params && *params; params++) {
        const char *eq = strchr(*params, '=');
        if (!eq || eq == *params) {
            *malformed = true;
            return false;
        }
        char *key = strndup(*params, (size_t)(eq - *params));
        bool ok = key && query_add(c, q, key, eq + 1);
        free(key);
        if (!ok)
            return false;
    }
    return true;
}

static spmv_client_status spmv_query(spmv_client *h, const spmv_client_spmv_options *o, buffer *q)
{
    bool malformed = false, ok = true;
    if (!o)
        return SPMV_CLIENT_OK;
    if (o->runs < 0)
        return fail(h, SPMV_CLIENT_ERR_INVALID, "runs must not be negative");
    if (o->kernel) ok = ok && query_add(h->curl, q, "kernel", o->kernel);
    if (o->runs) ok = ok && query_add_int(h->curl, q, "runs", o->runs);
    if (o->warmup) ok = ok && query_add_int(h->curl, q, "warmup", o->warmup < 0 ? 0 : o->warmup);
    if (o->verify) ok = ok && query_add(h->curl, q, "verify", "true");
    ok = ok && query_add_params(h->curl, q, o->params, &malformed);
    if (malformed)
        return fail(h, SPMV_CLIENT_ERR_INVALID, "a kernel parameter is not of the form key=value");
    return ok ? SPMV_CLIENT_OK : fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
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

spmv_client_status spmv_client_multiply(spmv_client *h, const char *id, spmv_client_dtype dtype, const void *x,
                                        size_t nx, void *y, size_t ny, const spmv_client_spmv_options *opts,
                                        spmv_client_spmv_result *res)
{
    buffer q = {.limit = 1 << 16};
    char *path = NULL, *full = NULL;
    response r = {0};
    spmv_client_spmv_result local;
    spmv_client_status st;
    size_t esize = dtype == SPMV_CLIENT_FLOAT32 ? 4 : 8;

    if (!h) return SPMV_CLIENT_ERR_INVALID;
    clear_error(h);
    if (!id_ok(id)) return fail(h, SPMV_CLIENT_ERR_INVALID, "matrix id must be 1 to 63 characters");
    if ((dtype != SPMV_CLIENT_FLOAT64 && dtype != SPMV_CLIENT_FLOAT32) || (!x && nx) || (!y && ny))
        return fail(h, SPMV_CLIENT_ERR_INVALID, "bad dtype or a NULL vector");
    if (nx > SIZE_MAX / esize || ny > SIZE_MAX / esize)
        return fail(h, SPMV_CLIENT_ERR_INVALID, "vector length overflows size_t");
    if (!res) res = &local;
    memset(res, 0, sizeof *res);
    res->max_rel_err = res->queue_ms = NAN;

    if ((st = spmv_query(h, opts, &q)) != SPMV_CLIENT_OK)
        goto done;
    st = fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    if (!(path = id_path(h, "matrices", id, "/spmv")) ||
        asprintf(&full, "%s%s", path, q.data ? q.data : "") < 0) {
        full = NULL;
        goto done;
    }
    request req = {.method = "POST", .path = full, .content_type = "application/octet-stream",
                   .body = nx ? x : "", .body_len = nx * esize, .sink = y, .sink_cap = ny * esize};
    st = do_request(h, &req, &r);
    res->request_ms = r.total_ms;
    if (st != SPMV_CLIENT_OK)
        goto done;
    if (r.sink_len != ny * esize) {
        st = fail(h, SPMV_CLIENT_ERR_PROTOCOL, "y has %zu bytes, expected %zu (%zu values of %zu bytes)",
                  r.sink_len, ny * esize, ny, esize);
        goto done;
    }
    st = parse_stats_header(h, r.stats_header, res);
done:
    response_clear(&r);
    free(q.data);
    free(path);
    free(full);
    return st;
}

/* ---------------------------------------------------------------- spmspm */

/* {"b", "kernel", "runs", "warmup", "verify", "store", params...}. */
static json_t *spmspm_body(const char *b, const spmv_client_spmspm_options *o, bool *bad_param)
{
    json_t *body = json_pack("{s:s}", "b", b);
    bool ok = body != NULL;
    *bad_param = false;
    if (!o)
        return body;
    if (ok && o->kernel) ok = json_object_set_new(body, "kernel", json_string(o->kernel)) == 0;
    if (ok && o->runs) ok = json_object_set_new(body, "runs", json_integer(o->runs)) == 0;
    if (ok && o->warmup) ok = json_object_set_new(body, "warmup", json_integer(o->warmup)) == 0;
    if (ok && o->verify) ok = json_object_set_new(body, "verify", json_true()) == 0;
    if (ok && o->store) ok = json_object_set_new(body, "store", json_true()) == 0;
    for (const char *const *p = o->params; ok && p && *p; p++) {
        const char *eq = strchr(*p, '=');
        char key[64], *end;
        long long v = eq ? strtoll(eq + 1, &end, 10) : 0;
        if (!eq || eq == *p || (size_t)(eq - *p) >= sizeof key || !eq[1] || *end) {
            *bad_param = true;
            break;
        }
        snprintf(key, sizeof key, "%.*s", (int)(eq - *p), *p);
        ok = json_object_set_new(body, key, json_integer(v)) == 0;
    }
    if (!ok || *bad_param) {
        json_decref(body);
        return NULL;
    }
    return body;
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
    json_t *body = NULL, *root = NULL;
    char *text = NULL, *path = NULL;
    response r = {0};
    spmv_client_spmspm_result local;
    spmv_client_status st;
    bool bad_param = false;

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
    body = spmspm_body(b, opts, &bad_param);
    if (bad_param) return fail(h, SPMV_CLIENT_ERR_INVALID, "a kernel parameter is not \"key=integer\"");
    st = fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    if (!body || !(text = json_dumps(body, JSON_COMPACT)) || !(path = id_path(h, "matrices", a, "/spmspm")))
        goto done;
    request req = {.method = "POST", .path = path, .content_type = "application/json",
                   .body = text, .body_len = strlen(text)};
    st = do_request(h, &req, &r);
    res->request_ms = r.total_ms;
    if (st != SPMV_CLIENT_OK || (st = parse_body(h, &r, &root)) != SPMV_CLIENT_OK)
        goto done;
    if (opts && opts->store) {
        spmspm_result(json_object_get(root, "product"), res);
        if (stored)
            st = matrix_from_response(h, &r, stored);
    } else {
        spmspm_result(root, res);
        if (c)
            st = coo_from_json(h, root, c);
    }
done:
    response_clear(&r);
    json_decref(body);
    json_decref(root);
    free(text);
    free(path);
    return st;
}

/* ----------------------------------------------------------- bench, jobs */

static json_t *bench_body(const spmv_client_bench_options *o)
{
    json_t *body = json_object();
    if (!body)
        return NULL;
    bool ok = true; /* bench is always a job: no "async" needed (or accepted) */
    if (o && o->kernels) {
        json_t *arr = json_array();
        ok = ok && arr && json_object_set_new(body, "kernels", arr) == 0;
        for (const char *const *k = o->kernels; ok && *k; k++)
            ok = json_array_append_new(arr, json_string(*k)) == 0;
    }
    if (o && o->runs) ok = ok && json_object_set_new(body, "runs", json_integer(o->runs)) == 0;
    if (o && o->warmup) ok = ok && json_object_set_new(body, "warmup", json_integer(o->warmup)) == 0;
    if (!ok) {
        json_decref(body);
        return NULL;
    }
    return body;
}

/* A job id from {"id"}, {"job_id"} or {"job":{"id"}}. */
static const char *job_id_of(const json_t *root)
{
    const char *id = json_string_value(json_object_get(root, "job_id"));
    if (!id) id = json_string_value(json_object_get(json_object_get(root, "job"), "id"));
    if (!id) id = json_string_value(json_object_get(root, "id"));
    return id;
}

spmv_client_status spmv_client_bench_start(spmv_client *h, const char *id, const spmv_client_bench_options *opts,
                                           char job_id[64])
{
    json_t *body = NULL, *root = NULL;
    char *text = NULL, *path = NULL;
    response r = {0};
    spmv_client_status st;

    if (!h || !job_id) return SPMV_CLIENT_ERR_INVALID;
    job_id[0] = '\0';
    clear_error(h);
    if (!id_ok(id)) return fail(h, SPMV_CLIENT_ERR_INVALID, "matrix id must be 1 to 63 characters");
    if (opts && (opts->runs < 0 || opts->warmup < 0))
        return fail(h, SPMV_CLIENT_ERR_INVALID, "runs and warmup must not be negative");
    st = fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    if (!(body = bench_body(opts)) || !(text = json_dumps(body, JSON_COMPACT)) ||
        !(path = id_path(h, "matrices", id, "/bench")))
        goto done;
    request req = {.method = "POST", .path = path, .content_type = "application/json",
                   .body = text, .body_len = strlen(text)};
    if ((st = do_request(h, &req, &r)) != SPMV_CLIENT_OK || (st = parse_body(h, &r, &root)) != SPMV_CLIENT_OK)
        goto done;
    const char *jid = job_id_of(root);
    if (!jid || !*jid || strlen(jid) >= 64) {
        st = fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the bench answer (HTTP %ld) names no job id", r.status);
        goto done;
    }
    snprintf(job_id, 64, "%s", jid);
done:
    response_clear(&r);
    json_decref(body);
    json_decref(root);
    free(text);
    free(path);
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

spmv_client_status spmv_client_job_get(spmv_client *h, const char *job_id, spmv_client_job **out)
{
    json_t *root = NULL;
    spmv_client_job *j = NULL;
    char *path = NULL;
    spmv_client_status st;

    if (!h || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    clear_error(h);
    if (!id_ok(job_id)) return fail(h, SPMV_CLIENT_ERR_INVALID, "job id must be 1 to 63 characters");
    st = fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    if (!(path = id_path(h, "jobs", job_id, "")) || !(j = calloc(1, sizeof *j)))
        goto fail;
    if ((st = get_json(h, path, &root)) != SPMV_CLIENT_OK || (st = parse_job(h, root, j)) != SPMV_CLIENT_OK)
        goto fail;
    if (strcmp(j->state, "failed") == 0)
        job_error(h, root);
    json_decref(root);
    free(path);
    *out = j;
    return SPMV_CLIENT_OK;
fail:
    json_decref(root);
    free(path);
    spmv_client_job_free(j);
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
