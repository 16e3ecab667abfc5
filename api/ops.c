/* ops.c — POST /v1/ops: a list of vector steps run in order on one device.
 *
 * What a remote Krylov method needs between its scalar decisions: products
 * and BLAS-1 on vectors that stay where the matrix is, with only scalars
 * crossing the network (a CG iteration is two such requests). Steps name
 * resident vectors by id and take literal scalars; `dot` and `nrm2` return
 * their value under the name the step gives (`as`). There is no expression
 * language: the client computes its scalars between requests.
 *
 * The whole request is checked here, on the HTTP thread, before anything
 * runs (ids, devices, shapes, dtypes, kernels, names, limits), so a bad
 * request changes nothing. Then one task on the operands' worker runs the
 * steps: its body is daemon/ops.c (ops_run), each step timed on the wall
 * clock up to the point its device work is done, so a step's `ms` is its
 * own. A step that fails on the device stops the list: the steps before
 * it took effect, and the answer (500) says which step failed.
 *
 * Vectors distributed like a sharded matrix (issue 16) run their steps on
 * the cluster worker, one command every MPI rank runs on its slice.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api.h"
#include "api/decode.h"
#include "daemon/autotune.h"
#include "daemon/ops.h"

typedef struct ops_request {
    ops_batch b;                /* first: the task's finish finds the request */
    request *r;
} ops_request;

static ops_batch *T(request *r) { return r->state; }

/* ------------------------------------------------------------ checking */

static int bad(request *r, size_t i, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int bad(request *r, size_t i, int status, const char *code, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    api_error(r, status, code, "steps[%zu]: %s", i, msg);
    return -1;
}

/* A vector operand by id, on the request's device (the first operand
 * decides it). */
static int vec_field(request *r, size_t i, const json_t *o, const char *key, rvec **out)
{
    ops_batch *t = T(r);
    const char *id = json_string_value(json_object_get(o, key));
    if (!id)
        return bad(r, i, 400, "invalid_request", "`%s` must be a vector id", key);
    if (!(*out = vstore_get(r->d->vectors, id)))
        return bad(r, i, 404, "vector_not_found", "`%s`: no vector %.40s (deleted, expired or never created)", key, id);
    if (!t->w)
        t->w = (*out)->w;
    else if ((*out)->w != t->w)
        return bad(r, i, 409, "wrong_device", "`%s`: vector %s is on %s but the request's operands are on %s; one "
                   "request runs on one device", key, id, (*out)->w->name, t->w->name);
    return 0;
}

static int scalar(request *r, size_t i, const json_t *o, const char *key, double def, bool required, double *out)
{
    const json_t *v = json_object_get(o, key);
    *out = def;
    if (!v) {
        if (required)
            return bad(r, i, 400, "invalid_request", "`%s` is missing", key);
        return 0;
    }
    if (!json_is_number(v) || !isfinite(json_number_value(v)))
        return bad(r, i, 400, "invalid_request", "`%s` must be a finite number", key);
    *out = json_number_value(v);
    return 0;
}

static int same_shape(request *r, size_t i, const rvec *a, const rvec *b)
{
    if (a->v.dtype != b->v.dtype)
        return bad(r, i, 400, "dtype_mismatch", "x %s is %s and y %s is %s", a->id, spmv_dtype_name(a->v.dtype), b->id,
                   spmv_dtype_name(b->v.dtype));
    if (a->v.n != b->v.n || a->v.k != b->v.k)
        return bad(r, i, 400, "shape_mismatch", "x %s has %lld x %d values and y %s %lld x %d", a->id,
                   (long long)a->v.n, a->v.k, b->id, (long long)b->v.n, b->v.k);
    if (a->dist && b->dist && !cluster_vec_same_layout(a->dist, b->dist))
        return bad(r, i, 400, "shape_mismatch", "x %s and y %s are not cut alike across the MPI ranks (made like %s's "
                   "%s and %s's %s)", a->id, b->id, cluster_vec_like(a->dist), cluster_vec_side(a->dist),
                   cluster_vec_like(b->dist), cluster_vec_side(b->dist));
    return 0;
}

static int check_keys(request *r, size_t i, const json_t *o, const char *const *keys)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        bool known = strcmp(key, "op") == 0;
        for (int j = 0; keys[j] && !known; j++)
            known = strcmp(key, keys[j]) == 0;
        if (!known)
            return bad(r, i, 400, "invalid_request", "unknown field `%s` for %s", key, json_string_value(json_object_get(o, "op")));
    }
    return 0;
}

/* A product with a sharded matrix: x and y distributed like it. */
static int decode_sharded_spmv(request *r, size_t i, const json_t *o, ops_step *s, const char *kn)
{
    ops_batch *t = T(r);
    char why[512];
    if (s->trans)
        return bad(r, i, 422, "unsupported_matrix", "matrix %s is sharded across the MPI ranks; its products take "
                   "trans n", s->m->meta.id);
    if (!(s->k = api_sharded_kernel(r, kn, s->m)))
        return -1;
    s->is_auto = spmv_kernel_is_auto(s->k);
    spmv_error err = {0};
    if (!s->is_auto && spmv_params_resolve(s->k, NULL, &s->p, &err) != SPMV_OK)
        return bad(r, i, 400, "invalid_parameter", "%s", err.message);
    if (vec_field(r, i, o, "x", &s->x) || vec_field(r, i, o, "y", &s->y) ||
        scalar(r, i, o, "alpha", 1.0, false, &s->alpha) || scalar(r, i, o, "beta", 0.0, false, &s->beta))
        return -1;
    if (t->w != r->d->cluster_worker)
        return bad(r, i, 409, "wrong_device", "matrix %s is sharded across the MPI ranks but the vectors are on %s; "
                   "make them with \"like\": \"%s\" so they are distributed as it is", s->m->meta.id, t->w->name,
                   s->m->meta.id);
    if (!cluster_vec_fits(s->x->dist, s->m->shards, false, why, sizeof why) ||
        !cluster_vec_fits(s->y->dist, s->m->shards, true, why, sizeof why))
        return bad(r, i, 400, "shape_mismatch", "%s", why);
    if (s->x == s->y)
        return bad(r, i, 400, "invalid_request", "x and y are the same vector: y = A*x in place is not defined");
    return 0;
}

static int decode_spmv(request *r, size_t i, const json_t *o, ops_step *s)
{
    static const char *const keys[] = {"matrix", "x", "y", "alpha", "beta", "trans", "kernel", NULL};
    ops_batch *t = T(r);
    if (check_keys(r, i, o, keys))
        return -1;
    const char *mid = json_string_value(json_object_get(o, "matrix"));
    char what[48];
    snprintf(what, sizeof what, "steps[%zu]: `matrix`", i);
    if (!mid)
        return bad(r, i, 400, "invalid_request", "`matrix` (an id or name) is missing or not a string");
    if (!(s->m = api_matrix_ref(r, mid, what)))
        return -1;
    const char *tr = json_string_value(json_object_get(o, "trans"));
    /* as /spmv's `op`: either case */
    if (json_object_get(o, "trans") && (!tr || (strcasecmp(tr, "n") && strcasecmp(tr, "t"))))
        return bad(r, i, 400, "invalid_request", "`trans` must be \"n\" (A) or \"t\" (A transposed), not \"%.32s\"",
                   tr ? tr : "(not a string)");
    s->trans = tr && strcasecmp(tr, "t") == 0;
    const char *kn = json_string_value(json_object_get(o, "kernel"));
    if (json_object_get(o, "kernel") && !kn)
        return bad(r, i, 400, "invalid_request", "`kernel` must be a kernel name");
    if (!kn)
        kn = "auto";
    if (s->m->shards)
        return decode_sharded_spmv(r, i, o, s, kn);
    s->k = spmv_kernel_find(kn);
    worker *kw;
    if (spmv_kernel_is_auto(s->k)) {
        s->is_auto = true;
        kw = autotune_worker(r->d, s->m);
    } else {
        if (api_kernel_check(r, s->k, kn, SPMV_OP_SPMV, s->m, "the matrix") != 0)
            return -1;
        kw = spmvd_worker_for(r->d, s->m, s->k);
        spmv_error err = {0};
        if (spmv_params_resolve(s->k, NULL, &s->p, &err) != SPMV_OK)
            return bad(r, i, 400, "invalid_parameter", "%s", err.message);
    }
    if (vec_field(r, i, o, "x", &s->x) || vec_field(r, i, o, "y", &s->y) ||
        scalar(r, i, o, "alpha", 1.0, false, &s->alpha) || scalar(r, i, o, "beta", 0.0, false, &s->beta))
        return -1;
    if (kw != t->w)
        return bad(r, i, 409, "wrong_device", "%s on matrix %s runs on %s but the vectors are on %s%s", kn, mid,
                   kw ? kw->name : "no device", t->w->name,
                   t->w == r->d->cpu ? " (name a CPU kernel, e.g. cpu.csr.omp, for host vectors)" : "");
    int32_t xn = s->trans ? s->m->host.rows : s->m->host.cols, yn = s->trans ? s->m->host.cols : s->m->host.rows;
    if (s->x->v.dtype != s->m->host.dtype || s->y->v.dtype != s->m->host.dtype)
        return bad(r, i, 400, "dtype_mismatch", "matrix %s is %s; x is %s and y %s", mid,
                   spmv_dtype_name(s->m->host.dtype), spmv_dtype_name(s->x->v.dtype), spmv_dtype_name(s->y->v.dtype));
    if (s->x->v.n != xn || s->y->v.n != yn || s->x->v.k != s->y->v.k)
        return bad(r, i, 400, "shape_mismatch", "matrix %s is %d x %d%s: x needs %d values and y %d a column, in the "
                   "same number of columns (x %lld x %d, y %lld x %d)", mid, s->m->host.rows, s->m->host.cols,
                   s->trans ? " (trans t)" : "", xn, yn, (long long)s->x->v.n, s->x->v.k, (long long)s->y->v.n,
                   s->y->v.k);
    if (s->x == s->y || s->x->v.data == s->y->v.data)
        return bad(r, i, 400, "invalid_request", "x and y are the same vector: y = A*x in place is not defined");
    if (s->x->v.k > spmv_kernel_max_k(s->k))
        return bad(r, i, 400, "invalid_parameter", "%s takes %d column(s), x has %d", kn, spmv_kernel_max_k(s->k),
                   s->x->v.k);
    return 0;
}

static int decode_step(request *r, size_t i, const json_t *o, ops_step *s)
{
    static const char *const k_dot[] = {"x", "y", "as", NULL}, *const k_nrm2[] = {"x", "as", NULL},
                             *const k_axpy[] = {"alpha", "x", "y", NULL},
                             *const k_axpby[] = {"alpha", "x", "beta", "y", NULL},
                             *const k_scal[] = {"alpha", "x", NULL}, *const k_copy[] = {"x", "y", NULL},
                             *const k_fill[] = {"x", "value", NULL};
    static const char *const *const keys[OPS_COUNT] = {NULL, k_dot, k_nrm2, k_axpy, k_axpby, k_scal, k_copy, k_fill};
    if (!json_is_object(o))
        return bad(r, i, 400, "invalid_request", "a step is an object with an `op`");
    const char *op = json_string_value(json_object_get(o, "op"));
    int kind = -1;
    for (int j = 0; op && j < OPS_COUNT; j++)
        if (strcmp(op, ops_names[j]) == 0)
            kind = j;
    if (kind < 0)
        return bad(r, i, 400, "invalid_request", "`op` must be one of spmv, dot, nrm2, axpy, axpby, scal, copy, fill");
    s->op = (ops_kind)kind;
    if (s->op == OPS_SPMV)
        return decode_spmv(r, i, o, s);
    if (check_keys(r, i, o, keys[kind]) || vec_field(r, i, o, "x", &s->x))
        return -1;
    bool two = s->op == OPS_DOT || s->op == OPS_AXPY || s->op == OPS_AXPBY || s->op == OPS_COPY;
    if (two && (vec_field(r, i, o, "y", &s->y) || same_shape(r, i, s->x, s->y)))
        return -1;
    bool alpha = s->op == OPS_AXPY || s->op == OPS_AXPBY || s->op == OPS_SCAL;
    if ((alpha && scalar(r, i, o, "alpha", 0, true, &s->alpha)) ||
        (s->op == OPS_AXPBY && scalar(r, i, o, "beta", 0, true, &s->beta)) ||
        (s->op == OPS_FILL && scalar(r, i, o, "value", 0, true, &s->value)))
        return -1;
    if (s->op == OPS_DOT || s->op == OPS_NRM2) {
        const char *as = json_string_value(json_object_get(o, "as"));
        if (!as || !*as || strlen(as) >= sizeof s->as)
            return bad(r, i, 400, "invalid_request", "`as` must name the result (1 to %zu characters)", sizeof s->as - 1);
        snprintf(s->as, sizeof s->as, "%s", as);
    }
    return 0;
}

/* A step's work as max_request_work counts it: a product's multiply-adds
 * (nnz a column, rows when more); a vector step's values moved, each value
 * read or written one unit as a multiply-add is (which reads a value, an
 * index and an entry of x): axpy reads x and y and writes y, three a row.
 * BLAS-1 steps are cheap one by one, but 4096 axpby on 2^27 values ran 14
 * minutes (1.6e12 units now, past the default 10^12). */
static int64_t step_work(const ops_step *s)
{
    static const int streams[OPS_COUNT] = {[OPS_DOT] = 2, [OPS_NRM2] = 1, [OPS_AXPY] = 3, [OPS_AXPBY] = 3,
                                           [OPS_SCAL] = 2, [OPS_COPY] = 2, [OPS_FILL] = 1};
    if (s->op == OPS_SPMV) {
        const spmv_matrix *h = &s->m->host; /* cpu.csr.chunked: its passes too (spmv_kernel_work) */
        return spmv_kernel_work(s->is_auto ? NULL : s->k, &s->p, h->rows, h->cols, h->nnz) * s->x->v.k;
    }
    return s->x->v.n * s->x->v.k * streams[s->op];
}

static int decode(request *r)
{
    ops_batch *t = T(r);
    json_error_t jerr;
    if (!api_json_body_fits(r))
        return -1;
    json_t *o = json_loadb(r->body ? r->body : "", r->body_len, JSON_REJECT_DUPLICATES, &jerr);
    int rc = -1;
    if (!o) {
        api_error(r, 400, "invalid_json", "body is not valid JSON: line %d column %d: %s", jerr.line, jerr.column,
                  jerr.text);
        return -1;
    }
    const json_t *steps = json_object_get(o, "steps");
    int64_t max = atomic_load(&r->d->limits.max_ops_steps);
    if (!json_is_object(o) || json_object_size(o) != 1 || !json_is_array(steps) || json_array_size(steps) == 0) {
        api_error(r, 400, "invalid_request", "the body is {\"steps\": [step, ...]} with at least one step");
        goto out;
    }
    if ((int64_t)json_array_size(steps) > max) {
        api_error(r, 400, "too_many_steps", "%zu steps; max_ops_steps allows %lld", json_array_size(steps),
                  (long long)max);
        goto out;
    }
    t->nsteps = json_array_size(steps);
    if (!(t->steps = calloc(t->nsteps, sizeof *t->steps))) {
        api_error(r, 500, "out_of_memory", "out of memory");
        goto out;
    }
    int64_t work = 0;
    for (size_t i = 0; i < t->nsteps; i++) {
        ops_step *s = &t->steps[i];
        if (decode_step(r, i, json_array_get(steps, i), s))
            goto out;
        for (size_t j = 0; s->as[0] && j < i; j++)
            if (strcmp(t->steps[j].as, s->as) == 0) {
                bad(r, i, 400, "invalid_request", "`as` \"%s\" names steps[%zu] already", s->as, j);
                goto out;
            }
        int64_t w = step_work(s);
        work = work > INT64_MAX - w ? INT64_MAX : work + w;
    }
    int64_t max_work = atomic_load(&r->d->limits.max_request_work);
    if (work > max_work) {
        api_error(r, 400, "too_much_work", "the steps ask for %" PRId64 " units of work (the products' multiply-adds "
                  "plus every value the vector steps read or write), over max_request_work (%" PRId64 "); send fewer "
                  "steps a request", work, max_work);
        goto out;
    }
    rc = 0;
out:
    json_decref(o);
    return rc;
}

/* ------------------------------------------------------------ answer */

static void ops_finish(task *base, int status)
{
    ops_request *q = (ops_request *)base;
    api_task_status(status, &q->b.rc, &q->b.err);
    api_task_done(q->r);
}

static json_t *result_value(const ops_step *s)
{
    int32_t k = s->x->v.k;
    if (k == 1)
        return api_json_real(s->res[0]);
    json_t *a = json_array();
    for (int32_t j = 0; j < k; j++)
        json_array_append_new(a, api_json_real(s->res[j]));
    return a;
}

static void answer(request *r)
{
    ops_batch *t = T(r);
    if (t->rc != SPMV_OK) {
        if (t->rc == SPMV_ERR_UNAVAILABLE && atomic_load(&r->d->draining))
            api_error_shutting_down(r);
        else {
            const char *code;
            int http = api_status_of(t->rc, &code);
            api_error(r, http >= 500 ? http : 500, "step_failed",
                      "steps[%zu] (%s) failed: %s; the %zu step%s before it took effect", t->failed_at,
                      ops_names[t->steps[t->failed_at].op], t->err.message, t->failed_at, t->failed_at == 1 ? "" : "s");
        }
        return;
    }
    json_t *results = json_object(), *steps = json_array();
    for (size_t i = 0; i < t->nsteps; i++) {
        const ops_step *s = &t->steps[i];
        json_t *o = json_pack("{s:s, s:o}", "op", ops_names[s->op], "ms", api_json_real(s->ms));
        if (s->as[0]) {
            json_object_set_new(results, s->as, result_value(s));
            json_object_set_new(o, "as", json_string(s->as));
        }
        if (s->op == OPS_SPMV)
            json_object_set_new(o, "kernel", json_string(s->k->name));
        json_array_append_new(steps, o);
    }
    api_json(r, 200, json_pack("{s:o, s:o, s:o, s:o, s:s}", "results", results, "steps", steps, "total_ms",
                               api_json_real(t->total_ms), "queue_ms", api_json_real(t->queue_ms), "device",
                               t->w->name));
}

/* ------------------------------------------------------------ route */

static void ops_begin(request *r)
{
    ops_request *q = calloc(1, sizeof *q);
    if (!q) {
        api_error(r, 500, "out_of_memory", "out of memory");
        return;
    }
    q->b.d = r->d;
    q->r = r;
    r->state = q;
    api_check_content_length(r, atomic_load(&r->d->limits.max_body_bytes), "max_body_bytes");
}

static void ops_body(request *r, const char *data, size_t size)
{
    api_body_collect(r, data, size, atomic_load(&r->d->limits.max_body_bytes), "max_body_bytes");
}

static void ops_end(request *r)
{
    ops_batch *t = T(r);
    if (decode(r) != 0)
        return;
    t->base.run = ops_run;
    t->base.sliced = true; /* step by step */
    t->base.finish = ops_finish;
    api_submit_and_suspend(r, t->w, &t->base);
}

static void ops_cleanup(request *r)
{
    ops_release(T(r));
    free(r->state);
    r->state = NULL;
}

const route_handlers api_ops_post = {
    .begin = ops_begin, .body = ops_body, .end = ops_end, .resumed = answer, .cleanup = ops_cleanup,
    .accepts_body = true,
    .body_kind = API_BODY_JSON,
    .query = api_no_query,
};
