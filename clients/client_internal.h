/* client_internal.h — what the files of libspmvclient share; not installed.
 *
 * The library is a transport (client_http.c: the handle, libcurl, the one
 * request function spmvc_request(), error mapping, JSON helpers) and one
 * file per resource of the API (docs/api.md): client_server.c (health,
 * ready, info, kernels), client_matrices.c, client_spmv.c (products,
 * spmspm, bench), client_jobs.c, client_vectors.c, client_shm.c,
 * client_ops.c and client_solve.c. A resource file states a request
 * (method, path, query, body, what answer it wants), hands it to
 * spmvc_request() and reads the answer into the public structures.
 *
 * Everything here is internal: the names carry the spmvc_ prefix so that
 * they cannot clash with a program that links the static archive, and
 * -fvisibility=hidden keeps them out of the shared library's exports
 * (only what spmvclient.h marks SPMV_CLIENT_API is exported).
 */
#ifndef SPMV_CLIENT_INTERNAL_H
#define SPMV_CLIENT_INTERNAL_H

#include "spmvclient.h"

#include <curl/curl.h>
#include <jansson.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h> /* FETCH_LIST, FREE_LIST */

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
    /* The dtypes of the last matrices described or uploaded, by id (a
     * binary solve sends b in its matrix's): ids are never reused and a
     * matrix keeps its dtype, so an entry is never stale. Empty id: none. */
    struct {
        char id[64];
        spmv_client_dtype dtype;
    } known[4];
    unsigned known_next;      /* the entry the next one replaces */
    char stat[8];             /* spmv_client_set_stat: sent as `stat` with products and benches; "" not sent */
};

/* A growable byte buffer, NUL-terminated, with a hard cap. */
typedef struct buffer {
    char *data;
    size_t len, cap, limit;
} buffer;

/* What one request needs; zero-initialise and fill in. The path is either
 * `path` as it stands or "/v1/<collection>/<escaped id><suffix>"; the
 * query and a JSON body are built for this one request (spmvc_query_add(),
 * spmvc_body_set()), and spmvc_request() releases them. A step of
 * building that runs out of memory marks the request, so a builder reads
 * as a plain list of fields and spmvc_request() reports the failure once. */
typedef struct request {
    const char *method;       /* "GET", "POST", "PUT", "DELETE" */
    const char *path;         /* appended to the base URL, starts with "/" */
    const char *collection;   /* ... or this, with id and suffix */
    const char *id;
    const char *suffix;
    buffer query;             /* "?k=v&..." from spmvc_query_add(), or empty */
    json_t *json;             /* a JSON body (sent compact) ... */
    const char *content_type; /* ... or a body of this type */
    const void *body;
    size_t body_len;
    curl_mime *mime;          /* multipart form instead of body */
    void *sink;               /* a 2xx answer's body goes here (binary) ... */
    size_t sink_cap;          /* ... at most this many bytes */
    bool sink_if_binary;      /* ... only when it is application/octet-stream */
    bool sink_then_body;      /* ... and what follows sink_cap goes to response.body */
    bool want_json;           /* a 2xx answer must be JSON: parsed into response.json */
    bool nomem;               /* building it ran out of memory: nothing is sent */
    const char *accept;       /* Accept header, or NULL */
    const char *meta_name;    /* a header to keep besides X-SpMV-Stats ("x-spmv-vector:") */
    long hold_ms;             /* a long poll: the server may hold the answer this long (added to the timeout) */
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

/* How to read one kind of descriptor (a matrix, vector, region, kernel):
 * into an item of `size` bytes, by `parse`, released by `clear`; `what`
 * and `key` (what it cannot lack) name it in messages. */
typedef bool (*parse_item_fn)(const json_t *d, void *item);
typedef struct item_kind {
    size_t size;
    parse_item_fn parse;
    void (*clear)(void *item);
    const char *what;         /* "matrix" */
    const char *key;          /* "an id" */
} item_kind;

/* GET a list route into a fresh list `l` of type T (freed with FREE on
 * failure). */
#define FETCH_LIST(T, FREE, path, key, kind)                                                                        \
    do {                                                                                                            \
        if (!h || !out)                                                                                             \
            return SPMV_CLIENT_ERR_INVALID;                                                                         \
        *out = NULL;                                                                                                \
        T *l = calloc(1, sizeof *l);                                                                                \
        if (!l)                                                                                                     \
            return spmvc_fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");                                           \
        spmv_client_status st_ = spmvc_fetch_list(h, path, key, kind, (void **)&l->items, &l->count, &l->json);     \
        if (st_ != SPMV_CLIENT_OK)                                                                                  \
            FREE(l);                                                                                                \
        else                                                                                                        \
            *out = l;                                                                                               \
        return st_;                                                                                                 \
    } while (0)

/* Frees a list {items, count, json} of items of `kind`: the public
 * spmv_client_*_list_free(). */
#define FREE_LIST(kind, l)                                                                                          \
    do {                                                                                                            \
        if (l) {                                                                                                    \
            spmvc_free_items(kind, (l)->items, (l)->count);                                                         \
            free((l)->json);                                                                                        \
            free(l);                                                                                                \
        }                                                                                                           \
    } while (0)

/* --------------------------------------------------------------- errors */

/* Records the error detail on the handle and returns status. */
__attribute__((format(printf, 3, 4)))
spmv_client_status spmvc_fail(spmv_client *h, spmv_client_status status, const char *fmt, ...);
/* Forgets the last call's error detail (every call starts with it). */
void spmvc_clear_error(spmv_client *h);

/* ------------------------------------------------------------- requests */

/* Runs one request: the one way every call reaches the server. On
 * SPMV_CLIENT_OK the server answered 2xx and r holds the answer;
 * otherwise the handle holds the error. The request's JSON body and query
 * are released either way; free r with spmvc_response_clear() either way. */
spmv_client_status spmvc_request(spmv_client *h, request *req, response *r);
void spmvc_response_clear(response *r);
/* A request whose answer only matters for its status. */
spmv_client_status spmvc_send_only(spmv_client *h, request *req);
/* A request whose answer is one descriptor of kind k, into a fresh item
 * at *out (out NULL: the answer is not read). */
spmv_client_status spmvc_request_item(spmv_client *h, request *req, const item_kind *k, void **out);
/* GET path into a parsed JSON root (the caller decrefs it). */
spmv_client_status spmvc_get_json(spmv_client *h, const char *path, json_t **root);
/* The answer body as JSON into *out; PROTOCOL when it is not JSON. */
spmv_client_status spmvc_parse_body(spmv_client *h, const response *r, json_t **out);
/* DELETE /v1/<collection>/<name>, refused with `invalid` unless `valid`. */
spmv_client_status spmvc_delete_at(spmv_client *h, const char *collection, const char *name, bool valid,
                                   const char *invalid);
/* A list route's array (under `key`, or the body) into {items, count, json}. */
spmv_client_status spmvc_fetch_list(spmv_client *h, const char *path, const char *key, const item_kind *k,
                                    void **items, size_t *count, char **json);

/* Building a request: "&key=value" (escaped) onto its query, "key": v
 * (stolen) into its JSON body ({} after spmvc_body_start()). */
void spmvc_query_add(spmv_client *h, request *req, const char *key, const char *value);
void spmvc_query_add_int(spmv_client *h, request *req, const char *key, long value);
void spmvc_query_add_u64(spmv_client *h, request *req, const char *key, uint64_t value);
void spmvc_query_add_double(spmv_client *h, request *req, const char *key, double value);
void spmvc_body_start(request *req);
void spmvc_body_set(request *req, const char *key, json_t *v);

/* An id of 1 to 63 characters; spmvc_check_id() says "<what> id must be ...". */
bool spmvc_id_ok(const char *id);
spmv_client_status spmvc_check_id(spmv_client *h, const char *id, const char *what);

/* ----------------------------------------------------------------- JSON */

double spmvc_json_num(const json_t *v, double fallback);
/* A double member of a result and the key it is read from: the member's
 * own name (SPMVC_NUM(spmv_client_stats, mean_ms) reads "mean_ms"). */
typedef struct spmvc_num_field {
    const char *key;
    size_t offset;
} spmvc_num_field;
#define SPMVC_NUM(type, member) {#member, offsetof(type, member)}
/* Each of the n fields of object o into its double in out, through
 * spmvc_json_num (NAN when absent). */
void spmvc_json_nums(const json_t *o, const spmvc_num_field *fields, size_t n, void *out);
bool spmvc_json_count(const json_t *v, int64_t max, int64_t *out);
void spmvc_copy_str(char *dst, size_t cap, const json_t *v);
char *spmvc_dump_json(const json_t *v);
/* Frees one item of kind k (NULL: nothing), or an array of count. */
void spmvc_free_item(const item_kind *k, void *item);
void spmvc_free_items(const item_kind *k, void *items, size_t count);
/* One descriptor into a fresh item of kind k; `where` goes into the message. */
spmv_client_status spmvc_parse_item(spmv_client *h, const item_kind *k, const json_t *d, const char *where,
                                    void **out);

/* ------------------------------------------------------------ resources */

extern const item_kind spmvc_matrix_kind;       /* client_matrices.c */
/* The dtype of a matrix's vectors (float64 for a mixed one), from the
 * handle's memory or GET /v1/matrices/{id}; client_matrices.c. */
spmv_client_status spmvc_matrix_dtype(spmv_client *h, const char *id, spmv_client_dtype *out);
/* The job id an answer names, into id (cap bytes); client_jobs.c. */
spmv_client_status spmvc_take_job_id(spmv_client *h, const response *r, const char *what, char *id, size_t cap);
/* Region names and region operands; client_shm.c. */
bool spmvc_shm_name_ok(const char *name);
json_t *spmvc_shm_ref_json(const spmv_client_shm_ref *r);
spmv_client_status spmvc_shm_ref_ok(spmv_client *h, const spmv_client_shm_ref *r);

/* The element size, validity and wire name of a dtype. */
static inline size_t spmvc_dtype_size(spmv_client_dtype d) { return d == SPMV_CLIENT_FLOAT32 ? 4 : 8; }
static inline bool spmvc_dtype_ok(spmv_client_dtype d) { return d == SPMV_CLIENT_FLOAT64 || d == SPMV_CLIENT_FLOAT32; }
static inline const char *spmvc_dtype_text(spmv_client_dtype d)
{
    return d == SPMV_CLIENT_FLOAT32 ? "float32" : "float64";
}

#endif
