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
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
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
} spmv_task;

/* ------------------------------------------------------ parameters */

static const char *const base_keys[] = {"kernel", "x", "runs", "warmup", "verify", "async", NULL};

static bool is_param_name(const char *key)
{
    for (int id = 0; id < SPMV_PARAM_COUNT; id++)
        if (strcmp(spmv_param_get((spmv_param_id)id)->name, key) == 0)
            return true;
    return false;
}

static bool param_in_range(request *r, const spmv_param_desc *pd, long long v)
{
    if (v < pd->min || v > pd->max) {
        api_error(r, 400, "invalid_parameter", "`%s` %lld is out of range %d..%d", pd->name, v, pd->min, pd->max);
        return false;
    }
    return true;
}

int api_params_from_json(request *r, const json_t *o, spmv_params *p)
{
    memset(p, 0, sizeof *p);
    for (int id = 0; id < SPMV_PARAM_COUNT; id++) {
        const spmv_param_desc *pd = spmv_param_get((spmv_param_id)id);
        json_t *v = json_object_get(o, pd->name);
        if (!v || json_is_null(v))
            continue;
        if (!json_is_integer(v)) {
            api_error(r, 400, "invalid_parameter", "`%s` must be an integer in %d..%d", pd->name, pd->min, pd->max);
            return -1;
        }
        if (!param_in_range(r, pd, json_integer_value(v)))
            return -1;
        p->v[id] = (int32_t)json_integer_value(v);
    }
    return 0;
}

/* Strict integer text: digits only (a leading '-' allowed), no trailing
 * junk, within [min, max]. */
static int parse_long(const char *s, long long min, long long max, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int api_params_from_query(request *r, spmv_params *p)
{
    memset(p, 0, sizeof *p);
    for (int id = 0; id < SPMV_PARAM_COUNT; id++) {
        const spmv_param_desc *pd = spmv_param_get((spmv_param_id)id);
        const char *s = api_query(r, pd->name);
        long long v;
        if (!s)
            continue;
        if (parse_long(s, INT32_MIN, INT32_MAX, &v) != 0) {
            api_error(r, 400, "invalid_parameter", "`%s` must be an integer in %d..%d, not \"%s\"", pd->name,
                      pd->min, pd->max, s);
            return -1;
        }
        if (!param_in_range(r, pd, v))
            return -1;
        p->v[id] = (int32_t)v;
    }
    return 0;
}

static int query_bool(request *r, const char *key, bool *out)
{
    const char *s = api_query(r, key);
    if (!s)
        return 0;
    if (strcmp(s, "true") == 0 || strcmp(s, "1") == 0 || strcmp(s, "") == 0)
        *out = true;
    else if (strcmp(s, "false") == 0 || strcmp(s, "0") == 0)
        *out = false;
    else {
        api_error(r, 400, "invalid_request", "`%s` must be true or false, not \"%s\"", key, s);
        return -1;
    }
    return 0;
}

static int query_int(request *r, const char *key, long long def, long long min, long long max, int32_t *out)
{
    const char *s = api_query(r, key);
    long long v = def;
    if (s && parse_long(s, min, max, &v) != 0) {
        api_error(r, 400, "invalid_request", "`%s` must be an integer in %lld..%lld, not \"%s\"", key, min, max, s);
        return -1;
    }
    *out = (int32_t)v;
    return 0;
}

/* ------------------------------------------------------ the request */

static spmv_task *T(request *r) { return r->state; }

/* max_body_bytes, tightened by what x can take for this matrix: exactly
 * cols values in binary; in JSON 64 bytes a value (a %.17g number is at
 * most 24 characters) plus room for the other fields. A body beyond that
 * is refused before it is read, so jansson never builds a tree many times
 * the size of any legitimate request. */
static int64_t body_limit(request *r, const spmv_task *t)
{
    int64_t limit = atomic_load(&r->d->limits.max_body_bytes);
    int64_t cols = t->m->host.cols;
    int64_t shape = t->binary ? cols * (int64_t)spmv_dtype_size(t->m->host.dtype) : 4096 + 64 * cols;
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

static int pick_kernel(request *r, const char *name)
{
    spmv_task *t = T(r);
    if (!name)
        name = t->m->dev ? "gpu.csr.vector" : "cpu.csr.omp";
    t->k = spmv_kernel_find(name);
    if (!t->k) {
        api_error(r, 400, "unknown_kernel", "no kernel \"%s\" (GET /v1/kernels lists them)", name);
        return -1;
    }
    const char *why;
    if (!spmvd_kernel_available(r->d, t->k, &why)) {
        api_error(r, 409, "kernel_unavailable", "kernel %s is not available here: %s", name, why);
        return -1;
    }
    if (t->k->device == SPMV_DEVICE_GPU && !t->m->dev) {
        api_error(r, 409, "kernel_unavailable",
                  "matrix %s is held on the host only; GPU kernels need it uploaded with device=gpu", t->m->meta.id);
        return -1;
    }
    return 0;
}

static int check_runs(request *r, int32_t runs, int32_t warmup)
{
    long long max = atomic_load(&r->d->limits.max_runs);
    if (runs < 1 || runs > max || warmup < 0 || warmup > max) {
        api_error(r, 400, "invalid_request", "`runs` must be in 1..%lld and `warmup` in 0..%lld (max_runs)", max, max);
        return -1;
    }
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

static int x_from_json(request *r, const json_t *x)
{
    spmv_task *t = T(r);
    int32_t cols = t->m->host.cols;
    spmv_dtype dt = t->m->host.dtype;
    if (!json_is_array(x)) {
        api_error(r, 400, "invalid_request", "`x` must be an array of %d numbers", cols);
        return -1;
    }
    if (json_array_size(x) != (size_t)cols) {
        api_error(r, 400, "shape_mismatch", "`x` has %zu values; the matrix has %d columns", json_array_size(x), cols);
        return -1;
    }
    t->x = malloc((size_t)(cols ? cols : 1) * spmv_dtype_size(dt));
    if (!t->x) {
        api_error(r, 500, "out_of_memory", "out of memory");
        return -1;
    }
    for (int32_t j = 0; j < cols; j++) {
        double v;
        if (api_json_to_double(json_array_get(x, (size_t)j), &v) != 0) {
            api_error(r, 400, "invalid_request",
                      "`x[%d]` is not a number (nor \"NaN\", \"Infinity\", \"-Infinity\")", j);
            return -1;
        }
        if (dt == SPMV_FLOAT32)
            ((float *)t->x)[j] = (float)v;
        else
            ((double *)t->x)[j] = v;
    }
    return 0;
}

static int parse_json_request(request *r, spmv_params *given, bool *async)
{
    spmv_task *t = T(r);
    json_error_t jerr;
    char msg[256];
    json_t *o = json_loadb(r->body ? r->body : "", r->body_len, JSON_REJECT_DUPLICATES, &jerr);
    int rc = -1;
    int64_t runs, warmup;
    if (!o) {
        api_error(r, 400, "invalid_json", "body is not valid JSON: line %d column %d: %s", jerr.line, jerr.column,
                  jerr.text);
        return -1;
    }
    if (!json_is_object(o)) {
        api_error(r, 400, "invalid_json", "body must be a JSON object");
        goto out;
    }
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        bool known = is_param_name(key);
        for (int i = 0; !known && base_keys[i]; i++)
            known = strcmp(key, base_keys[i]) == 0;
        if (!known) {
            api_error(r, 400, "invalid_request", "unknown field `%s`", key);
            goto out;
        }
    }
    json_t *kn = json_object_get(o, "kernel");
    if (kn && !json_is_string(kn)) {
        api_error(r, 400, "invalid_request", "`kernel` must be a string");
        goto out;
    }
    if (pick_kernel(r, json_string_value(kn)) != 0)
        goto out;
    if (api_json_int_field(o, "runs", 1, INT32_MIN, INT32_MAX, &runs, msg, sizeof msg) ||
        api_json_int_field(o, "warmup", 0, INT32_MIN, INT32_MAX, &warmup, msg, sizeof msg) ||
        api_json_bool_field(o, "verify", false, &t->verify, msg, sizeof msg) ||
        api_json_bool_field(o, "async", false, async, msg, sizeof msg)) {
        api_error(r, 400, "invalid_request", "%s", msg);
        goto out;
    }
    t->runs = (int32_t)runs;
    t->warmup = (int32_t)warmup;
    if (check_runs(r, t->runs, t->warmup) || api_params_from_json(r, o, given))
        goto out;
    json_t *x = json_object_get(o, "x");
    if (!x) {
        api_error(r, 400, "invalid_request", "`x` is missing");
        goto out;
    }
    rc = x_from_json(r, x);
out:
    json_decref(o);
    return rc;
}

static int parse_binary_request(request *r, spmv_params *given, bool *async)
{
    spmv_task *t = T(r);
    const char *kn = api_query(r, "kernel");
    size_t esize = spmv_dtype_size(t->m->host.dtype);
    if (pick_kernel(r, kn) != 0 || query_int(r, "runs", 1, INT32_MIN, INT32_MAX, &t->runs) ||
        query_int(r, "warmup", 0, INT32_MIN, INT32_MAX, &t->warmup) || check_runs(r, t->runs, t->warmup) ||
        query_bool(r, "verify", &t->verify) || query_bool(r, "async", async) || api_params_from_query(r, given))
        return -1;
    if (r->body_len != (size_t)t->m->host.cols * esize) {
        api_error(r, 400, "shape_mismatch",
                  "x has %zu bytes; the matrix has %d columns of %s (%zu bytes)", r->body_len, t->m->host.cols,
                  spmv_dtype_name(t->m->host.dtype), (size_t)t->m->host.cols * esize);
        return -1;
    }
    /* the body buffer becomes x: no copy */
    t->x = r->body ? r->body : malloc(1);
    r->body = NULL;
    r->body_len = r->body_cap = 0;
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

static json_t *stats_json(const spmv_stats *s)
{
    return json_pack("{s:i, s:i, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "runs", s->runs, "warmup", s->warmup,
                     "mean_ms", api_json_real(s->mean_ms), "stddev_ms", api_json_real(s->stddev_ms),
                     "min_ms", api_json_real(s->min_ms), "median_ms", api_json_real(s->median_ms),
                     "max_ms", api_json_real(s->max_ms), "gflops", api_json_real(s->gflops),
                     "gbps", api_json_real(s->gbps));
}

static json_t *params_json(const spmv_task *t)
{
    json_t *o = json_object();
    for (int id = 0; id < SPMV_PARAM_COUNT; id++)
        if (t->k->params & (1u << id))
            json_object_set_new(o, spmv_param_get((spmv_param_id)id)->name, json_integer(t->p.v[id]));
    return o;
}

/* Everything of the answer but y. */
static json_t *result_json(const spmv_task *t)
{
    json_t *o = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o}", "kernel", t->k->name, "matrix", t->m->meta.id,
                          "device", t->worker_name, "params", params_json(t), "stats", stats_json(&t->st),
                          "queue_ms", api_json_real(t->queue_ms));
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
    int rc = t->binary ? parse_binary_request(r, &given, &async) : parse_json_request(r, &given, &async);
    if (rc != 0 || resolve_params(r, &given) != 0) {
        if (!r->resp)
            api_error(r, 500, "out_of_memory", "out of memory");
        return;
    }
    worker *w = spmvd_worker_for(r->d, t->m, t->k);
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
