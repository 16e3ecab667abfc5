/* solve.c — POST /v1/matrices/{id}/solve: a Krylov solve next to the matrix.
 *
 * The HTTP face of engine/krylov.c (docs/api.md, "Solvers"). b and x0
 * come inline or as resident vectors, the answer x goes back in the body
 * (JSON, or binary with Accept: application/octet-stream) or into a
 * resident vector (`x_out`). The operator is one kernel of the catalogue
 * (default `auto`, tuned once per matrix) on the matrix's device, run by
 * the daemon's worker, so a GPU solve moves no vector over PCIe between
 * iterations. Everything is checked on the HTTP thread; a breakdown or
 * maxit is a 200 whose `stop` says why. With "async": true the solve is a
 * job that reports its iteration and residual, and DELETE /v1/jobs/{id}
 * stops it at the next iteration.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/decode.h"
#include "daemon/autotune.h"
#include "daemon/log.h"
#include "krylov.h"
#include "daemon/vectors.h"

typedef struct solve_task {
    task base;
    request *r;            /* NULL when async */
    job *job;
    spmvd *d;
    matrix *m;
    worker *w;
    const spmv_kernel *k;
    bool is_auto;
    spmv_params p;
    spmv_solve_options o;
    bool jacobi, binary_out;
    void *b_vals, *x0_vals; /* inline b, x0 (n values) */
    rvec *bv, *x0v, *xout;
    void *x;               /* the answer for the body (n values) */
    spmv_solve_result res;
    double queue_ms;
    int rc;
    spmv_error err;
} solve_task;

static solve_task *T(request *r) { return r->state; }

static void solve_free(solve_task *t)
{
    if (!t)
        return;
    matrix_unref(t->m);
    job_unref(t->job);
    rvec_unref(t->bv);
    rvec_unref(t->x0v);
    rvec_unref(t->xout);
    free(t->b_vals);
    free(t->x0_vals);
    free(t->x);
    spmv_solve_result_free(&t->res);
    free(t);
}

/* ------------------------------------------------------------ checking */

/* An operand: inline values (into *vals) or a resident vector (into *v). */
static int operand(request *r, const json_t *o, const char *key, bool required, void **vals, rvec **v)
{
    solve_task *t = T(r);
    const json_t *j = json_object_get(o, key);
    char id[40];
    api_fail f = {0};
    int32_t n = t->m->host.rows;
    if (!j || json_is_null(j)) {
        if (required) {
            api_error(r, 400, "invalid_request", "`%s` is missing", key);
            return -1;
        }
        return 0;
    }
    int ref = api_vector_ref(j, key, id, &f);
    if (ref < 0) {
        api_error(r, f.status, f.code, "%s", f.message);
        return -1;
    }
    if (ref == 0) {
        int64_t len;
        int32_t k;
        if (!vals) {
            api_error(r, 400, "invalid_request", "`%s` must be {\"vector\": \"<id>\"}", key);
            return -1;
        }
        if (api_values_from_json(j, n, t->m->host.dtype, key, vals, &len, &k, &f)) {
            api_error(r, f.status, f.code, "%s", f.message);
            return -1;
        }
        if (k != 1) {
            api_error(r, 400, "shape_mismatch", "`%s` must be one column of %d values, not %d columns", key, n, k);
            return -1;
        }
        return 0;
    }
    if (!(*v = vstore_get(r->d->vectors, id))) {
        api_error(r, 404, "vector_not_found", "`%s`: no vector %s (deleted, expired or never created)", key, id);
        return -1;
    }
    if ((*v)->w != t->w) {
        api_error(r, 409, "wrong_device", "`%s`: vector %s is on %s but the solve runs on %s (where its kernel runs); "
                  "vectors are never copied between devices", key, id, (*v)->w->name, t->w ? t->w->name : "no device");
        return -1;
    }
    if ((*v)->v.dtype != t->m->host.dtype || (*v)->v.n != n || (*v)->v.k != 1) {
        api_error(r, 400, "shape_mismatch", "`%s`: vector %s is %lld x %d %s; the solve needs %d x 1 %s", key, id,
                  (long long)(*v)->v.n, (*v)->v.k, spmv_dtype_name((*v)->v.dtype), n,
                  spmv_dtype_name(t->m->host.dtype));
        return -1;
    }
    return 0;
}

static int decode(request *r)
{
    static const char *const keys[] = {"method", "restart", "b", "x0", "tol", "maxit", "preconditioner", "kernel",
                                       "x_out", "async", NULL};
    solve_task *t = T(r);
    json_error_t jerr;
    json_t *o = json_loadb(r->body ? r->body : "", r->body_len, JSON_REJECT_DUPLICATES, &jerr);
    int rc = -1;
    if (!o || !json_is_object(o)) {
        api_error(r, 400, "invalid_json", "body must be a JSON object%s%s", o ? "" : ": ", o ? "" : jerr.text);
        json_decref(o);
        return -1;
    }
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        bool known = false;
        for (int i = 0; keys[i] && !known; i++)
            known = strcmp(key, keys[i]) == 0;
        if (!known) {
            api_error(r, 400, "invalid_request", "unknown field `%s`", key);
            goto out;
        }
    }
    if (t->m->host.rows != t->m->host.cols) {
        api_error(r, 400, "shape_mismatch", "solve needs a square matrix; %s is %d x %d", t->m->meta.id,
                  t->m->host.rows, t->m->host.cols);
        goto out;
    }
    const char *method = json_object_get(o, "method") ? json_string_value(json_object_get(o, "method")) : "cg";
    if (!method || spmv_solve_method_parse(method, &t->o.method) != SPMV_OK) {
        api_error(r, 400, "invalid_request", "`method` must be \"cg\", \"bicgstab\" or \"gmres\"");
        goto out;
    }
    json_t *tol = json_object_get(o, "tol"), *maxit = json_object_get(o, "maxit"), *restart = json_object_get(o, "restart");
    t->o.tol = tol ? json_number_value(tol) : 1e-8;
    if ((tol && !json_is_number(tol)) || !isfinite(t->o.tol) || t->o.tol <= 0) {
        api_error(r, 400, "invalid_request", "`tol` must be a finite number > 0 (the relative residual to reach)");
        goto out;
    }
    int64_t max_it = atomic_load(&r->d->limits.max_solve_iterations);
    if (maxit && (!json_is_integer(maxit) || json_integer_value(maxit) < 1 || json_integer_value(maxit) > max_it)) {
        api_error(r, 400, "invalid_request", "`maxit` must be an integer in 1..%lld (max_solve_iterations)",
                  (long long)max_it);
        goto out;
    }
    t->o.maxit = maxit ? (int32_t)json_integer_value(maxit) : (int32_t)(max_it < 1000 ? max_it : 1000);
    if (restart && (!json_is_integer(restart) || json_integer_value(restart) < 1 ||
                    json_integer_value(restart) > SPMV_GMRES_RESTART_MAX)) {
        api_error(r, 400, "invalid_request", "`restart` must be an integer in 1..%d", SPMV_GMRES_RESTART_MAX);
        goto out;
    }
    t->o.restart = restart ? (int32_t)json_integer_value(restart) : 0;
    const char *pre = json_string_value(json_object_get(o, "preconditioner"));
    if (json_object_get(o, "preconditioner") && (!pre || (strcmp(pre, "none") && strcmp(pre, "jacobi")))) {
        api_error(r, 400, "invalid_request", "`preconditioner` must be \"none\" or \"jacobi\"");
        goto out;
    }
    t->jacobi = pre && strcmp(pre, "jacobi") == 0;
    const char *kn = json_string_value(json_object_get(o, "kernel"));
    if (json_object_get(o, "kernel") && !kn) {
        api_error(r, 400, "invalid_request", "`kernel` must be a kernel name");
        goto out;
    }
    t->k = spmv_kernel_find(kn ? kn : "auto");
    if (spmv_kernel_is_auto(t->k)) {
        t->is_auto = true;
        t->w = autotune_worker(r->d, t->m);
    } else {
        if (api_kernel_check(r, t->k, kn, SPMV_OP_SPMV, t->m, "it") != 0)
            goto out;
        t->w = spmvd_worker_for(r->d, t->m, t->k);
        spmv_error err = {0};
        if (spmv_params_resolve(t->k, NULL, &t->p, &err) != SPMV_OK) {
            api_error(r, 400, "invalid_parameter", "%s", err.message);
            goto out;
        }
    }
    json_t *async = json_object_get(o, "async");
    if (async && !json_is_boolean(async)) {
        api_error(r, 400, "invalid_request", "`async` must be true or false");
        goto out;
    }
    if (operand(r, o, "b", true, &t->b_vals, &t->bv) || operand(r, o, "x0", false, &t->x0_vals, &t->x0v) ||
        operand(r, o, "x_out", false, NULL, &t->xout))
        goto out;
    if (t->xout && t->bv && t->xout == t->bv) {
        api_error(r, 400, "invalid_request", "`x_out` and `b` are the same vector");
        goto out;
    }
    if (t->jacobi) { /* refused here, not after queueing: a zero diagonal is the client's mistake */
        spmv_error err = {0};
        void *d = malloc((size_t)(t->m->host.rows ? t->m->host.rows : 1) * spmv_dtype_size(t->m->host.dtype));
        int jrc = d ? spmv_csr_inv_diag(&t->m->host.csr, d, &err) : SPMV_ERR_NOMEM;
        free(d);
        if (jrc != SPMV_OK) {
            api_error(r, 400, "invalid_request", "%s", d ? err.message : "out of memory");
            goto out;
        }
    }
    t->binary_out = !t->xout && api_header_in(r, MHD_HTTP_HEADER_ACCEPT) &&
                    strstr(api_header_in(r, MHD_HTTP_HEADER_ACCEPT), "application/octet-stream");
    rc = async && json_is_true(async) ? 1 : 0;
out:
    json_decref(o);
    return rc;
}

/* ------------------------------------------------------------ running */

typedef struct op_ctx {
    solve_task *t;
    worker *w;
} op_ctx;

static int apply(void *c, const spmv_vec *x, spmv_vec *y, double *ms, spmv_error *err)
{
    op_ctx *o = c;
    spmv_apply_args a = {1.0, 0.0, 0, 1};
    spmv_stats st;
    int rc = worker_run_apply(o->w, o->t->m, o->t->k, &o->t->p, false, &a, x, y, &st, NULL, err);
    *ms = rc == SPMV_OK ? st.median_ms : 0;
    return rc;
}

static int progress(void *c, int32_t it, double relres)
{
    op_ctx *o = c;
    worker_heartbeat(o->w);
    if (o->t->job) {
        job_set_iteration(o->t->job, it, relres);
        job_set_progress(o->t->job, (double)it / (double)o->t->o.maxit);
    }
    return job_cancelled(o->t->job);
}

static void solve_run(task *base, worker *w)
{
    solve_task *t = (solve_task *)base;
    spmv_gpu_ctx *ctx = worker_gpu_ctx(w);
    spmv_device_kind dev = ctx ? SPMV_DEVICE_GPU : SPMV_DEVICE_CPU;
    spmv_dtype dt = t->m->host.dtype;
    int32_t n = t->m->host.rows;
    spmv_vec b = {0}, x = {0}, dinv = {0};
    t->queue_ms = base->queue_ms;
    if (t->job)
        job_set_running(t->job);
    if (job_cancelled(t->job)) {
        t->rc = spmv_error_set(&t->err, SPMV_ERR_UNAVAILABLE, 0, "cancelled (DELETE /v1/jobs/%s) before it ran",
                               job_id(t->job));
        return;
    }
    if (t->is_auto) {
        matrix_tuning tuned;
        if ((t->rc = autotune_get(t->d, w, t->m, false, &tuned, &t->err)) ||
            (t->rc = spmv_params_resolve(tuned.kernel, &tuned.params, &t->p, &t->err)))
            return;
        t->k = tuned.kernel;
    }
    spmv_error *e = &t->err;
    int rc = SPMV_OK;
    /* b, x (x_out or scratch, starting from x0 or zeros), 1/diag */
    if (t->bv)
        b = t->bv->v;
    else if ((rc = spmv_vec_alloc(ctx, dev, dt, n, 1, &b, e)) || (rc = spmv_vec_write(ctx, &b, t->b_vals, e)))
        goto out;
    if (t->xout)
        x = t->xout->v;
    else if ((rc = spmv_vec_alloc(ctx, dev, dt, n, 1, &x, e)))
        goto out;
    if (t->x0v && (!t->xout || t->x0v != t->xout))
        rc = spmv_vec_copy(ctx, &t->x0v->v, &x, e);
    else if (t->x0_vals)
        rc = spmv_vec_write(ctx, &x, t->x0_vals, e);
    else if (!t->x0v)
        rc = spmv_vec_fill(ctx, &x, 0.0, e);
    if (rc)
        goto out;
    if (t->jacobi) {
        void *h = malloc((size_t)(n ? n : 1) * spmv_dtype_size(dt));
        if (!h)
            rc = spmv_error_set(e, SPMV_ERR_NOMEM, 0, "out of memory for the Jacobi diagonal");
        else if (!(rc = spmv_csr_inv_diag(&t->m->host.csr, h, e)) && !(rc = spmv_vec_alloc(ctx, dev, dt, n, 1, &dinv, e)))
            rc = spmv_vec_write(ctx, &dinv, h, e);
        free(h);
        if (rc)
            goto out;
        t->o.inv_diag = &dinv;
    }
    op_ctx oc = {t, w};
    spmv_linop a = {n, n, &oc, apply};
    t->o.progress = progress;
    t->o.progress_ctx = &oc;
    if ((rc = spmv_solve(ctx, &a, &b, &x, &t->o, &t->res, e)))
        goto out;
    if (!t->xout) {
        if (!(t->x = malloc((size_t)(n ? n : 1) * spmv_dtype_size(dt))))
            rc = spmv_error_set(e, SPMV_ERR_NOMEM, 0, "out of memory for x");
        else
            rc = spmv_vec_read(ctx, &x, t->x, e);
    }
    log_info("solve: %s on %s by %s with %s: %s after %d iterations, relres %.3g, %.1f ms",
             spmv_solve_method_name(t->o.method), t->m->meta.id, w->name, t->k->name,
             spmv_solve_stop_name(t->res.stop), t->res.iterations, t->res.relres, t->res.total_ms);
out:
    if (!t->bv)
        spmv_vec_free(ctx, &b);
    if (!t->xout)
        spmv_vec_free(ctx, &x);
    spmv_vec_free(ctx, &dinv);
    t->rc = rc;
}

/* ------------------------------------------------------------ answers */

static json_t *result_json(const solve_task *t)
{
    const spmv_solve_result *s = &t->res;
    json_t *hist = json_array();
    for (int32_t i = 0; i < s->history_len; i++)
        json_array_append_new(hist, api_json_real(s->history[i]));
    json_t *stop = json_pack("{s:s, s:s}", "reason", spmv_solve_stop_name(s->stop), "detail", s->detail);
    if (s->stop == SPMV_STOP_BREAKDOWN)
        json_object_set_new(stop, "value", api_json_real(s->breakdown_value));
    json_t *o = json_pack("{s:s, s:b, s:o, s:i, s:o, s:o, s:{s:o, s:o, s:o, s:o, s:o}, s:i, s:s, s:o, s:s, s:s}",
                          "method", spmv_solve_method_name(t->o.method), "converged", s->stop == SPMV_STOP_CONVERGED,
                          "stop", stop, "iterations", s->iterations, "relres", api_json_real(s->relres),
                          "residual_history", hist, "time", "total_ms", api_json_real(s->total_ms), "spmv_ms",
                          api_json_real(s->spmv_ms), "vector_ms", api_json_real(s->vector_ms), "setup_ms",
                          api_json_real(s->setup_ms), "queue_ms", api_json_real(t->queue_ms), "spmv_calls",
                          s->spmv_calls, "kernel", t->k->name, "params", api_params_json(t->k, &t->p), "matrix",
                          t->m->meta.id, "device", t->w->name);
    if (o && t->xout)
        json_object_set_new(o, "x", json_pack("{s:s}", "vector", t->xout->id));
    if (o)
        json_object_set_new(o, "preconditioner", json_string(t->jacobi ? "jacobi" : "none"));
    return o;
}

/* {"x":[...], <rest>}, or the rest alone when x went into a vector. */
static char *json_answer(const solve_task *t, size_t *len)
{
    return api_json_values_answer("x", t->m->host.dtype, t->x, t->m->host.rows, 1, result_json(t), len);
}

static void answer(request *r)
{
    solve_task *t = T(r);
    if (t->rc != SPMV_OK) {
        api_error_task(r, t->rc, &t->err);
        return;
    }
    if (t->binary_out) {
        json_t *hdr = result_json(t);
        char *htext = hdr ? api_json_dump(hdr, NULL) : NULL;
        json_decref(hdr);
        api_bytes(r, 200, "application/octet-stream", t->x, (size_t)t->m->host.rows * spmv_dtype_size(t->m->host.dtype));
        t->x = NULL;
        if (htext)
            api_header(r, "X-SpMV-Solve", htext);
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

static void solve_finish(task *base, int status)
{
    solve_task *t = (solve_task *)base;
    if (status != SPMV_OK) {
        t->rc = status;
        spmv_error_set(&t->err, status, 0, "the daemon is shutting down");
    }
    if (t->r) {
        api_task_done(t->r);
        return;
    }
    size_t len = 0;
    char *text = t->rc == SPMV_OK ? json_answer(t, &len) : NULL; /* before len is read */
    api_job_finish_answer(t->job, t->rc, &t->err, text, len);
    solve_free(t);
}

/* ------------------------------------------------------------ route */

static void solve_begin(request *r)
{
    solve_task *t = calloc(1, sizeof *t);
    if (!t) {
        api_error(r, 500, "out_of_memory", "out of memory");
        return;
    }
    t->d = r->d;
    r->state = t;
    if (!(t->m = api_get_matrix(r)) || api_refuse_sharded(r, t->m, "/solve"))
        return;
    api_check_content_length(r, atomic_load(&r->d->limits.max_body_bytes));
}

static void solve_body(request *r, const char *data, size_t size)
{
    api_body_collect(r, data, size, atomic_load(&r->d->limits.max_body_bytes));
}

static void solve_end(request *r)
{
    solve_task *t = T(r);
    int async = decode(r);
    if (async < 0)
        return;
    t->base.run = solve_run;
    t->base.finish = solve_finish;
    if (!async) {
        t->r = r;
        api_submit_and_suspend(r, t->w, &t->base);
        return;
    }
    api_submit_async(r, t->w, &t->base, &t->job, "solve", t->m->meta.id);
}

static void solve_cleanup(request *r)
{
    solve_free(T(r));
    r->state = NULL;
}

const route_handlers api_solve_post = {
    .begin = solve_begin, .body = solve_body, .end = solve_end, .resumed = answer, .cleanup = solve_cleanup,
    .accepts_body = true,
};
