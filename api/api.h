/* api.h — what the files of the HTTP layer share (internal to api/).
 *
 * A `request` is the per-connection state libmicrohttpd hands back on every
 * call of the access handler (*con_cls). Each route is a small set of
 * handlers: begin (headers are in: route, auth, limits; may answer at
 * once), body (a chunk of the body), end (the body is complete: answer, or
 * queue a task and suspend), resumed (the task finished: build the answer
 * on an HTTP thread) and cleanup. A handler answers by setting r->resp and
 * r->status through api_json/api_error/api_bytes; server.c queues it at the
 * next point libmicrohttpd allows (the first call, or after the body).
 *
 * The API layer talks to the daemon only: store, workers' queues, jobs and
 * metrics; kernels run in workers, never here.
 */
#ifndef SPMVD_API_H
#define SPMVD_API_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <microhttpd.h>

#include "daemon/daemon.h"
#include "daemon/preconds.h"

typedef enum route_id {
    ROUTE_HEALTH, ROUTE_READY, ROUTE_INFO, ROUTE_KERNELS, ROUTE_MATRICES, ROUTE_MATRIX,
    ROUTE_SPY, ROUTE_SPMV, ROUTE_BENCH, ROUTE_JOB, ROUTE_METRICS, ROUTE_SPMSPM, ROUTE_TUNE,
    ROUTE_VECTORS, ROUTE_VECTOR, ROUTE_OPS, ROUTE_SOLVE, ROUTE_SHM, ROUTE_SHM_REGION, ROUTE_JOBS, ROUTE_VALUES,
    ROUTE_PRECONDS, ROUTE_PRECOND,
    ROUTE_UNKNOWN,
    ROUTE_COUNT
} route_id;

extern const char *const api_route_names[ROUTE_COUNT];

typedef struct request request;

/* What a route's body is: request_begin checks Content-Type against it
 * before the route's begin, so every JSON route refuses the same types. */
typedef enum api_body {
    API_BODY_NONE,           /* none read; Content-Type not looked at */
    API_BODY_JSON,           /* JSON: application/json, no Content-Type, or curl -d's
                              * application/x-www-form-urlencoded; anything else 415 */
    API_BODY_JSON_OR_BINARY, /* the same, or application/octet-stream (options in the query) */
    API_BODY_BINARY,         /* application/octet-stream (or no Content-Type) */
    API_BODY_OWN,            /* the route reads its own kinds (an upload's file) */
} api_body;

typedef struct route_handlers {
    void (*begin)(request *r);
    void (*body)(request *r, const char *data, size_t size);
    void (*end)(request *r);
    void (*resumed)(request *r);
    void (*cleanup)(request *r);
    bool accepts_body;   /* false: a body is read and ignored */
    api_body body_kind;
    /* The query parameters the route reads, NULL-terminated: every
     * handler declares its list (api_no_query when it reads none;
     * tests/unit/test_routes.c fails on a NULL). With a JSON body the
     * options are the body's, so the query must be empty. request_begin
     * refuses any other with 400 unknown_parameter. */
    const char *const *query;
    bool query_with_json; /* the query is read with a JSON body too */
} route_handlers;

extern const char *const api_no_query[];
/* In a query list: every kernel parameter's name (spmv_param_get). */
#define API_QUERY_PARAMS "{kernel parameters}"
#define API_QUERY_MAX 64
/* The names of a query list, API_QUERY_PARAMS expanded; the count (the
 * first `max` of them into out). */
size_t api_query_names(const char *const *list, const char **out, size_t max);

struct request {
    spmvd *d;
    struct MHD_Connection *conn;
    route_id route;
    const route_handlers *h;
    char method[16];
    char *path;
    bool binary;                    /* the body is application/octet-stream (API_BODY_JSON_OR_BINARY) */
    char id[MATFILE_ID_LEN + 1];    /* {id} of the path, validated (a matrix's name resolved to its id) */
    char name[MATFILE_NAME_MAX + 1]; /* the matrix's name when the path named it so, else empty */
    double t0;
    bool begun;                     /* the access handler's first call (headers in) was made */
    size_t query_args;              /* > 0: more query arguments than are read (414) */
    struct conn_watch *watch;       /* the connection's deadlines (api/conns.h), or NULL */

    /* the answer */
    struct MHD_Response *resp;
    int status;
    size_t resp_bytes;
    bool queued;
    bool ended;                     /* end() was called */
    bool failed;                    /* an error answer is set: discard the rest of the body */

    /* body, for routes that collect it whole (bounded by max_body_bytes) */
    char *body;
    size_t body_len, body_cap;
    bufpool_buf *body_buf;          /* body is this pooled buffer (binary spmv): put back, not freed */
    uint64_t body_seen;

    /* suspension: the handler suspends and queues under `lock`, the
     * worker's finish resumes under it, so a resume never precedes its
     * suspend */
    pthread_mutex_t lock;
    bool suspended;
    bool task_done;

    void *state;                    /* route-specific */
};

/* ------------------------------------------------------------ routes */
/* The route whose shape path has (ROUTE_UNKNOWN: none), and the text of
 * its {id} or {name} segment (*seg NULL when it has none). */
route_id api_route_match(const char *path, const char **seg, size_t *seglen);
/* The handlers of a route for a method; NULL with *allow set when the
 * method is not allowed there. */
const route_handlers *api_route_handlers(route_id route, const char *method, const char **allow);
/* The path of a route as docs/api.md writes it ("/v1/matrices/{id}/spmv"). */
const char *api_route_path(route_id route);

/* ----------------------------------------------------------- answers */
void api_json(request *r, int status, json_t *body);       /* steals body */
void api_bytes(request *r, int status, const char *content_type, void *data, size_t len); /* takes data (malloc) */
/* 200 application/json with text (taken), or 500 out_of_memory when text
 * is NULL: the answer could not be written. */
void api_json_text(request *r, char *text, size_t len);
/* The answer is the file open on fd, size bytes from its start (MHD
 * closes it when sent). */
void api_file(request *r, int status, const char *content_type, int fd, uint64_t size);
/* The same from a pooled buffer, answered without a copy and put back
 * when sent. */
void api_bytes_pooled(request *r, int status, const char *content_type, bufpool_buf *b, size_t len);
void api_error(request *r, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* An engine status mapped to its HTTP status and code, message from err. */
void api_error_spmv(request *r, int st, const spmv_error *err);
/* 503 shutting_down: the daemon is draining (SIGTERM). */
void api_error_shutting_down(request *r);
/* A task the worker's queue refused (rc of its submit): 503 queue_full
 * naming the queue and its depth, or 503 shutting_down. */
void api_error_submit(request *r, worker *w, int rc);
/* A task that failed on its worker: 503 shutting_down when the daemon
 * drains and the task never ran, else the engine status's answer. */
void api_error_task(request *r, int rc, const spmv_error *err);
/* The error body {"error":{code,message}} alone (for jobs). */
json_t *api_error_body(const char *code, const char *message);
int api_status_of(int spmv_st, const char **code);
/* Adds a header to the pending answer. */
void api_header(request *r, const char *name, const char *value);
/* Adds header `name` holding v as compact JSON (the report of a binary
 * answer); takes v. Nothing when v is NULL or could not be written. */
void api_header_json(request *r, const char *name, json_t *v);

/* ------------------------------------------------------------- JSON */
/* Serialises compactly: each real in the shortest form that reads back the
 * same, measurements (*_ms, *_s, gflops, gbps, speedup) to 6 digits. */
char *api_json_dump(const json_t *v, size_t *len);
/* A real; non-finite values as "NaN", "Infinity", "-Infinity". */
json_t *api_json_real(double v);
/* Checks the kernel a compute route was asked for (known, of op,
 * available, on m's device); 0, or -1 with the answer sent. */
/* The kernel named (NULL: the default) for a product on sharded matrix m,
 * or NULL with the error answered. */
const spmv_kernel *api_sharded_kernel(request *r, const char *name, const matrix *m);
int api_kernel_check(request *r, const spmv_kernel *k, const char *name, spmv_op op, const matrix *m,
                     const char *what);
/* The statistics object of every compute answer (spmv, spmspm, bench). */
json_t *api_stats_json(const spmv_stats *s);
/* The parameters kernel k takes, with the values p used (hack_size 0, the
 * kernel's own choice, as the matrix m's hack_size it then runs with). */
json_t *api_params_json(const spmv_kernel *k, const spmv_params *p, const matrix *m);
/* Appends a vector as a JSON array text ("[1,2.5,...]", %.17g) to f. */
void api_json_write_vector(FILE *f, spmv_dtype dtype, const void *v, int32_t n);
/* An answer {"<key>": values, <rest's members>} written straight out
 * (values can be millions of numbers, too many to build as jansson nodes
 * first) into one buffer of api_json_values_bound; without values (v
 * NULL) rest alone. k columns of n values: one array when k is 1, else a
 * list of k arrays. Takes rest; NULL when out of memory. */
char *api_json_values_answer(const char *key, spmv_dtype dtype, const void *v, int32_t n, int32_t k, json_t *rest,
                             size_t *len);
/* Whether r's JSON body, parsed into a tree (about JSON_NODE_BYTES a
 * value, 10 and more times its text for short numbers), fits
 * max_job_result_bytes; else 422 too_large naming it and the binary way,
 * and false. Asked before every body that may carry values is parsed. */
bool api_json_body_fits(request *r);
/* The first field of object o not in keys (NULL-terminated) answered 400
 * invalid_request and -1; else 0 (a non-object has no fields). */
int api_known_fields(request *r, const json_t *o, const char *const *keys);
/* The most bytes n x k values take as JSON text. */
int64_t api_json_values_bound(int64_t n, int32_t k);
/* Whether n x k values (`what`: "y") as JSON fit max_job_result_bytes,
 * which bounds every JSON answer of values and every job's result; else
 * 422 too_large naming it and the binary way, and false. */
bool api_json_values_fit(request *r, int64_t n, int32_t k, const char *what);

/* ---------------------------------------------------------- requests */
/* Query-string argument, or NULL. */
const char *api_query(request *r, const char *key);
/* Whether the query string is empty; if not, 400 unknown_parameter naming
 * the first, with `why` (a body that carries the options itself). */
bool api_query_empty(request *r, const char *why);
const char *api_header_in(request *r, const char *key);
/* Collects a body chunk into r->body, bounded by limit (413 beyond). */
/* The body of exactly Content-Length bytes goes into a pooled buffer
 * (d->iobufs: page-locked on a GPU host) instead of the heap; call before
 * the first chunk. No Content-Length, or over limit: the heap as usual. */
void api_body_pooled(request *r, int64_t limit);
/* Frees or puts back r->body. */
void api_body_free(request *r);
/* `key` in both: what sets the limit, for the 413 that names it (the
 * configuration key to raise, or what fixes the bound). */
void api_body_collect(request *r, const char *data, size_t size, int64_t limit, const char *key);
/* Checks Content-Length against a limit on the first call: 413 answer. */
bool api_check_content_length(request *r, int64_t limit, const char *key);
/* Suspends r while hand_off(r, ctx) gives it to whoever will call
 * api_task_done (a worker's queue, a job's waiters), under r->lock so that
 * no resume precedes the suspend; hand_off's false resumes r at once.
 * Returns hand_off's answer. */
bool api_suspend(request *r, bool (*hand_off)(request *r, void *ctx), void *ctx);
/* Suspends r and submits t to w; on a full queue answers 503 with
 * Retry-After. Returns true when the task was queued. */
bool api_submit_and_suspend(request *r, worker *w, task *t);
/* Called from a task's finish (any thread): marks done and resumes. */
void api_task_done(request *r);
/* A task's finish called with `status`: anything but SPMV_OK (the task
 * never ran: the daemon is shutting down) becomes the task's *rc and err. */
void api_task_status(int status, int *rc, spmv_error *err);

/* The longest long poll, GET /v1/jobs/{id}?wait=S, in seconds: under
 * common proxies' and clients' idle timeouts (60 s and more). */
#define API_JOB_WAIT_MAX_S 60

/* 202 + Location + the job as JSON. */
void api_answer_job(request *r, job *j);
/* An async compute request: a job of `kind` in *slot, t queued on w, 202
 * answered; false (answered 500/503) when it could not be queued, the task
 * then still r->state. */
bool api_submit_async(request *r, worker *w, task *t, job **slot, const char *kind, const char *matrix_id);
/* Finishes an async task's job: the error of rc, or the answer text
 * (taken, kept as text; past max_job_result_bytes the job fails with 507
 * result_too_large). */
void api_job_finish_answer(spmvd *d, job *j, int rc, const spmv_error *err, char *text, size_t len);

/* The matrix of r->id, or a 404 answer and NULL. */
matrix *api_get_matrix(request *r);
/* The matrix `ref` names: an id, or the name of exactly one matrix.
 * Referenced, or NULL with 404 (none) or 409 ambiguous_name (the ids of
 * those named so) answered; `what` says where ref came from (NULL: the path). */
matrix *api_matrix_ref(request *r, const char *ref, const char *what);
/* Whether m is sharded across the MPI ranks (issue 16), and if so answers
 * 422: `what` (the route) multiplies whole matrices only. */
bool api_refuse_sharded(request *r, const matrix *m, const char *what);
/* A matrix descriptor as the API shows it. */
json_t *api_matrix_json(spmvd *d, matrix *m);

/* ------------------------------------------------------ route tables */
extern const route_handlers api_health_get, api_ready_get, api_info_get, api_kernels_get,
    api_metrics_get, api_matrices_get, api_matrix_get, api_matrix_delete, api_job_get;
extern const route_handlers api_upload_post, api_spmv_post, api_bench_post, api_spy_get;
extern const route_handlers api_spmspm_post; /* api/spmspm.c */
extern const route_handlers api_tune_post;   /* api/tune.c */
extern const route_handlers api_vectors_get, api_vectors_post, api_vector_get, api_vector_put,
    api_vector_delete;                       /* api/vectors.c */
extern const route_handlers api_ops_post;    /* api/ops.c */
extern const route_handlers api_shm_list, api_shm_post, api_shm_get, api_shm_delete; /* api/shm.c */
/* A shm status answered with its HTTP status and code (api/shm.c). */
void api_shm_error(request *r, int st, const char *msg);
int api_shm_status(int st, const char **code);
/* allow_shm is on; otherwise 403 shm_disabled is answered and false. */
bool api_shm_enabled(request *r);
extern const route_handlers api_solve_post;  /* api/solve.c */
extern const route_handlers api_job_delete, api_jobs_get; /* api/info.c (jobs) */
extern const route_handlers api_values_put;  /* api/values.c */
extern const route_handlers api_preconds_get, api_preconds_post, api_precond_get,
    api_precond_delete;                      /* api/precond.c */
/* A preconditioner's options from a JSON object ({"type", options}; the
 * keys of docs/api.md "Preconditioners", and `extra`, which the caller
 * reads itself) for matrix m, built on worker w (a resident
 * near-nullspace must live on the host or w's device): *out, and *src
 * where amg's near-nullspace comes from. 0, or -1 answered (400). */
int api_precond_options(request *r, const json_t *o, matrix *m, worker *w, const char *const *extra,
                        spmv_precond_options *out, precond_source *src);

#endif
