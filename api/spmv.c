/* spmv.c — POST /v1/matrices/{id}/spmv: one kernel, y = A*x.
 *
 * Two encodings. JSON: {"kernel","x":[...],"runs","warmup","verify",
 * "async", params...}, answered with {"y":[...],"kernel","stats",...}.
 * Binary (Content-Type: application/octet-stream): the body is x as
 * little-endian values of the matrix dtype, the options are in the query
 * string, and the answer is y the same way with the statistics as JSON in
 * the X-SpMV-Stats header — no text conversion either way, which is what a
 * remote solver wants for a million-row vector.
 *
 * Everything the request says is checked here, on the HTTP thread (kernel
 * known and available, x length, parameters against the registry's ranges,
 * runs against max_runs); the kernel then runs as a task on the worker of
 * its device, and the answer is built back on an HTTP thread after the
 * connection resumes. With "async": true the answer is 202 and a job.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/decode.h"
#include "daemon/autotune.h"
#include "daemon/log.h"

typedef struct spmv_task {
    task base;
    request *r;           /* NULL when async */
    job *job;             /* async only */
    spmvd *d;
    matrix *m;
    const spmv_kernel *k;
    spmv_params p;
    int32_t runs, warmup;
    bool verify, binary;
    int64_t body_limit;
    void *x, *y;
    spmv_stats st;
    double max_rel_err;
    double queue_ms;
    int rc;
    spmv_error err;
    char worker_name[16];
    bool is_auto;         /* "kernel":"auto": k becomes the tuned choice on the worker */
    matrix_tuning tuned;
} spmv_task;

/* ------------------------------------------------------ the request */

static spmv_task *T(request *r) { return r->state; }

/* max_body_bytes, tightened by what x can take for this matrix: in JSON
 * 64 bytes a value (a %.17g number is at most 24 characters) plus room for
 * the other fields, in binary twice the exact size plus 4 KiB (so an x a
 * little off still gets the 400 that names both lengths). A body beyond
 * that is refused before it is read, so jansson never builds a tree many
 * times the size of any legitimate request. */
static int64_t body_limit(request *r, const spmv_task *t)
{
    int64_t limit = atomic_load(&r->d->limits.max_body_bytes);
    int64_t cols = t->m->host.cols;
    int64_t shape = t->binary ? 4096 + 2 * cols * (int64_t)spmv_dtype_size(t->m->host.dtype) : 4096 + 64 * cols;
    return shape < limit ? shape : limit;
}

static void spmv_begin(request *r)
{
    const char *ct = api_header_in(r, MHD_HTTP_HEADER_CONTENT_TYPE);
    bool binary = ct && strncasecmp(ct, "application/octet-stream", 24) == 0;
    bool json = !ct || strncasecmp(ct, "application/json", 16) == 0 ||
                strncasecmp(ct, "application/x-www-form-urlencoded", 33) == 0 ||
                strncasecmp(ct, "text/plain", 10) == 0;
    if (!binary && !json) {
        api_error(r, 415, "unsupported_media_type",
                  "Content-Type %s: send application/json or application/octet-stream", ct);
        return;
    }
    spmv_task *t = calloc(1, sizeof *t);
    if (!t) {
        api_error(r, 500, "out_of_memory", "out of memory");
        return;
    }
    t->binary = binary;
    t->d = r->d;
    r->state = t;
    if (!(t->m = api_get_matrix(r)))
        return;
    t->body_limit = body_limit(r, t);
    api_check_content_length(r, t->body_limit);
}

static void spmv_body(request *r, const char *data, size_t size)
{
    api_body_collect(r, data, size, T(r)->body_limit);
}

/* The checks every compute route makes of the kernel it was asked for:
 * known, of the route's operation, available here, and on the device
 * that holds `m` (`what` names m in the message). 0, or -1 answered. */
int api_kernel_check(request *r, const spmv_kernel *k, const char *name, spmv_op op, const matrix *m,
                     const char *what)
{
    const char *why;
    if (!k) {
        api_error(r, 400, "unknown_kernel", "no kernel \"%s\" (GET /v1/kernels lists them)", name);
        return -1;
    }
    if (k->op != op) {
        api_error(r, 400, "unknown_kernel", "%s is a %s kernel; /%s runs %s kernels (GET /v1/kernels lists them)",
                  name, spmv_op_name(k->op), spmv_op_name(op), spmv_op_name(op));
        return -1;
    }
    if (!spmvd_kernel_available(r->d, k, &why)) {
        api_error(r, 409, "kernel_unavailable", "kernel %s is not available here: %s", name, why);
        return -1;
    }
    if (k->device == SPMV_DEVICE_GPU && !m->dev) {
        api_error(r, 409, "kernel_unavailable",
                  "matrix %s is held on the host only; GPU kernels need %s uploaded with device=gpu", m->meta.id,
                  what);
        return -1;
    }
    return 0;
}

static int pick_kernel(request *r, const char *name)
{
    spmv_task *t = T(r);
    if (!name)
        name = t->m->dev ? "gpu.csr.vector" : "cpu.csr.omp";
    t->k = spmv_kernel_find(name);
    if (spmv_kernel_is_auto(t->k)) { /* tuned for the matrix's own device (daemon/autotune.c) */
        t->is_auto = true;
        return 0;
    }
    return api_kernel_check(r, t->k, name, SPMV_OP_SPMV, t->m, "it");
    return 0;
}

static int resolve_params(request *r, const spmv_params *given)
{
    spmv_task *t = T(r);
    spmv_error err = {0};
    if (spmv_params_resolve(t->k, given, &t->p, &err) != SPMV_OK) {
        api_error(r, 400, "invalid_parameter", "%s", err.message);
        return -1;
    }
    return 0;
}

static const char *lookup_query(void *ctx, const char *key) { return api_query(ctx, key); }

/* The body (JSON) or the query string (binary) through the decoders, then
 * the kernel against this daemon and matrix. */
static int decode_request(request *r, spmv_params *given, bool *async)
{
    spmv_task *t = T(r);
    spmv_req q;
    api_fail f = {0};
    int32_t cols = t->m->host.cols;
    spmv_dtype dt = t->m->host.dtype;
    int64_t max_runs = atomic_load(&r->d->limits.max_runs);
    int rc = t->binary ? api_decode_spmv_query(lookup_query, r, max_runs, &q, &f)
                       : api_decode_spmv_json(r->body, r->body_len, cols, dt, max_runs, &q, &f);
    if (rc == 0 && t->binary)
        rc = api_check_x_binary(r->body_len, cols, dt, &f);
    if (rc != 0) {
        api_error(r, f.status, f.code, "%s", f.message);
        api_spmv_req_free(&q);
        return -1;
    }
    if (pick_kernel(r, q.kernel[0] ? q.kernel : NULL) != 0) {
        api_spmv_req_free(&q);
        return -1;
    }
    /* cumulative: every run of the request, timed, warm-up and the
     * reference of verify, against max_request_work */
    if (api_check_work(t->m->host.nnz, t->m->host.rows, (int64_t)q.runs + q.warmup + (q.verify ? 1 : 0),
                       atomic_load(&r->d->limits.max_request_work), &f) != 0) {
        api_error(r, f.status, f.code, "%s", f.message);
        api_spmv_req_free(&q);
        return -1;
    }
    t->runs = q.runs;
    t->warmup = q.warmup;
    t->verify = q.verify;
    *async = q.async;
    *given = q.params;
    if (t->binary) {
        /* the body buffer becomes x: no copy */
        t->x = r->body ? r->body : malloc(1);
        r->body = NULL;
        r->body_len = r->body_cap = 0;
    } else {
        t->x = q.x;
        q.x = NULL;
    }
    return t->x ? 0 : -1;
}

/* ----------------------------------------------------------- running */

static void poison(void *y, spmv_dtype dt, int32_t n)
{
    for (int32_t i = 0; i < n; i++) {
        if (dt == SPMV_FLOAT32)
            ((float *)y)[i] = NAN;
        else
            ((double *)y)[i] = NAN;
    }
}

static void spmv_run(task *base, worker *w)
{
    spmv_task *t = (spmv_task *)base;
    int32_t rows = t->m->host.rows;
    spmv_dtype dt = t->m->host.dtype;
    size_t bytes = (size_t)(rows ? rows : 1) * spmv_dtype_size(dt);
    t->queue_ms = base->queue_ms;
    snprintf(t->worker_name, sizeof t->worker_name, "%s", w->name);
    if (t->job)
        job_set_running(t->job);
    t->y = malloc(bytes);
    if (!t->y) {
        t->rc = spmv_error_set(&t->err, SPMV_ERR_NOMEM, 0, "out of memory for y");
        return;
    }
    poison(t->y, dt, rows);
    if (t->is_auto) {
        if ((t->rc = autotune_get(t->d, w, t->m, false, &t->tuned, &t->err)) != SPMV_OK)
            return;
        t->k = t->tuned.kernel;
        if ((t->rc = spmv_params_resolve(t->k, &t->tuned.params, &t->p, &t->err)) != SPMV_OK)
            return;
    }
    t->rc = worker_run_kernel(w, t->m, t->k, &t->p, t->x, t->y, t->warmup, t->runs, &t->st, &t->err);
    if (t->rc == SPMV_OK && t->verify) {
        void *ref = malloc(bytes);
        if (!ref) {
            t->rc = spmv_error_set(&t->err, SPMV_ERR_NOMEM, 0, "out of memory for the reference");
            return;
        }
        spmv_reference(&t->m->host.csr, t->x, ref);
        t->max_rel_err = spmv_max_rel_err(dt, t->y, ref, rows);
        free(ref);
    }
    log_info("spmv: %s on %s (%dx%d nnz %lld) by %s: %d runs, median %.4f ms, queued %.3f ms%s",
             t->k->name, t->m->meta.id, t->m->host.rows, t->m->host.cols, (long long)t->m->host.nnz, w->name,
             t->runs, t->st.median_ms, t->queue_ms, t->rc ? " FAILED" : "");
}


/* Everything of the answer but y. */
static json_t *result_json(const spmv_task *t)
{
    json_t *o = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o}", "kernel", t->k->name, "matrix", t->m->meta.id,
                          "device", t->worker_name, "params", api_params_json(t->k, &t->p), "stats", api_stats_json(&t->st),
                          "queue_ms", api_json_real(t->queue_ms));
    if (o && t->is_auto) /* the choice and what tuning cost, in every answer that used it */
        json_object_set_new(o, "auto", autotune_json(&t->tuned));
    if (o && t->verify)
        json_object_set_new(o, "verify", json_pack("{s:o, s:s}", "max_rel_err", api_json_real(t->max_rel_err),
                                                   "reference", "cpu.csr.serial"));
    return o;
}

/* {"y":[...], <rest of result>} written straight out: y can be millions of
 * numbers, too many to build as jansson nodes first. */
static char *json_answer(const spmv_task *t, size_t *len)
{
    json_t *rest = result_json(t);
    size_t rlen = 0;
    char *rtext = rest ? api_json_dump(rest, &rlen) : NULL;
    json_decref(rest);
    char *text = NULL;
    FILE *f = rtext ? open_memstream(&text, len) : NULL;
    if (f) {
        fputs("{\"y\":", f);
        api_json_write_vector(f, t->m->host.dtype, t->y, t->m->host.rows);
        fputc(',', f);
        fwrite(rtext + 1, 1, rlen - 1, f); /* the object without its '{' */
        fputc('\n', f);
        fclose(f);
    }
    free(rtext);
    return text;
}

static void answer(request *r)
{
    spmv_task *t = T(r);
    if (t->rc != SPMV_OK) {
        if (t->rc == SPMV_ERR_UNAVAILABLE && atomic_load(&r->d->draining))
            api_error(r, 503, "shutting_down", "the daemon is shutting down");
        else
            api_error_spmv(r, t->rc, &t->err);
        return;
    }
    if (t->binary) {
        json_t *hdr = result_json(t);
        char *htext = hdr ? api_json_dump(hdr, NULL) : NULL;
        json_decref(hdr);
        size_t n = (size_t)t->m->host.rows * spmv_dtype_size(t->m->host.dtype);
        api_bytes(r, 200, "application/octet-stream", t->y, n);
        t->y = NULL; /* the response owns it now */
        if (htext)
            api_header(r, "X-SpMV-Stats", htext);
        free(htext);
        return;
    }
    size_t len;
    char *text = json_answer(t, &len);
    if (!text)
        api_error(r, 500, "out_of_memory", "out of memory writing the answer");
    else
        api_bytes(r, 200, "application/json", text, len);
}

static void spmv_task_free(spmv_task *t)
{
    if (!t)
        return;
    matrix_unref(t->m);
    job_unref(t->job);
    free(t->x);
    free(t->y);
    free(t);
}

static void spmv_finish(task *base, int status)
{
    spmv_task *t = (spmv_task *)base;
    if (status != SPMV_OK) {
        t->rc = status;
        spmv_error_set(&t->err, status, 0, "the daemon is shutting down");
    }
    if (t->r) {
        api_task_done(t->r);
        return;
    }
    /* async: the result goes to the job, y as a JSON array */
    if (t->rc != SPMV_OK) {
        const char *code;
        int http = api_status_of(t->rc, &code);
        job_finish(t->job, http, api_error_body(code, t->err.message));
    } else {
        size_t len;
        char *text = json_answer(t, &len);
        json_t *body = text ? json_loadb(text, len, JSON_DECODE_ANY, NULL) : NULL;
        free(text);
        if (body)
            job_finish(t->job, 200, body);
        else
            job_finish(t->job, 500, api_error_body("out_of_memory", "out of memory writing the result"));
    }
    spmv_task_free(t);
}

void api_answer_job(request *r, job *j)
{
    char loc[64];
    snprintf(loc, sizeof loc, "/v1/jobs/%s", job_id(j));
    api_json(r, 202, job_to_json(j));
    api_header(r, MHD_HTTP_HEADER_LOCATION, loc);
}

static void spmv_end(request *r)
{
    spmv_task *t = T(r);
    spmv_params given;
    bool async = false;
    if (decode_request(r, &given, &async) != 0 || resolve_params(r, &given) != 0) {
        if (!r->resp)
            api_error(r, 500, "out_of_memory", "out of memory");
        return;
    }
    worker *w = t->is_auto ? autotune_worker(r->d, t->m) : spmvd_worker_for(r->d, t->m, t->k);
    t->base.run = spmv_run;
    t->base.finish = spmv_finish;
    if (!async) {
        t->r = r;
        api_submit_and_suspend(r, w, &t->base);
        return;
    }
    /* async: the task lives on its own, the request answers 202 now */
    t->job = jobs_create(r->d->jobs, "spmv", t->m->meta.id);
    if (!t->job) {
        api_error(r, 500, "out_of_memory", "out of memory");
        return;
    }
    job *j = job_ref(t->job); /* the task may finish and drop its own before we answer */
    int prc = w->ops->submit(w, &t->base, false);
    if (prc != SPMV_OK) {
        job_finish(j, 503, api_error_body("queue_full", "the queue was full"));
        api_error(r, 503, prc == SPMV_ERR_LIMIT ? "queue_full" : "shutting_down",
                  prc == SPMV_ERR_LIMIT ? "the %s queue is full; retry later" : "the daemon is shutting down (%s)",
                  w->name);
        job_unref(j);
        return; /* the task stays r->state and is freed with the request */
    }
    r->state = NULL;
    api_answer_job(r, j);
    job_unref(j);
}

static void spmv_cleanup(request *r)
{
    spmv_task_free(T(r));
    r->state = NULL;
}

const route_handlers api_spmv_post = {
    .begin = spmv_begin,
    .body = spmv_body,
    .end = spmv_end,
    .resumed = answer,
    .cleanup = spmv_cleanup,
    .accepts_body = true,
};
