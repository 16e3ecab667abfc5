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
#include "daemon/solve.h"

typedef struct solve_req {
    solve_task s;          /* what runs on the worker (daemon/solve.h) */
    request *r;            /* NULL when async */
    bool binary_out;       /* x in the answer as raw values (Accept: application/octet-stream) */
} solve_req;

static solve_req *T(request *r) { return r->state; }

static void solve_free(solve_req *t)
{
    if (!t)
        return;
    solve_release(&t->s);
    free(t);
}


/* ------------------------------------------------------------ checking */

/* An operand: inline values (into *vals) or a resident vector (into *v). */
static int operand(request *r, const json_t *o, const char *key, bool required, void **vals, rvec **v)
{
    solve_req *t = T(r);
    const json_t *j = json_object_get(o, key);
    char id[40];
    api_fail f = {0};
    int32_t n = t->s.m->host.rows;
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
        if (api_values_from_json(j, n, t->s.m->host.dtype, key, vals, &len, &k, &f)) {
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
    if ((*v)->w != t->s.w) {
        api_error(r, 409, "wrong_device", "`%s`: vector %s is on %s but the solve runs on %s (where its kernel runs); "
                  "vectors are never copied between devices", key, id, (*v)->w->name, t->s.w ? t->s.w->name : "no device");
        return -1;
    }
    if ((*v)->v.dtype != t->s.m->host.dtype || (*v)->v.n != n || (*v)->v.k != 1) {
        api_error(r, 400, "shape_mismatch", "`%s`: vector %s is %lld x %d %s; the solve needs %d x 1 %s", key, id,
                  (long long)(*v)->v.n, (*v)->v.k, spmv_dtype_name((*v)->v.dtype), n,
                  spmv_dtype_name(t->s.m->host.dtype));
        return -1;
    }
    return 0;
}

/* The method and its options: method, tol, maxit, restart, preconditioner. */
static int decode_options(request *r, const json_t *o)
{
    solve_req *t = T(r);
    const char *method = json_object_get(o, "method") ? json_string_value(json_object_get(o, "method")) : "cg";
    if (!method || spmv_solve_method_parse(method, &t->s.o.method) != SPMV_OK) {
        api_error(r, 400, "invalid_request", "`method` must be \"cg\", \"bicgstab\" or \"gmres\"");
        return -1;
    }
    json_t *tol = json_object_get(o, "tol"), *maxit = json_object_get(o, "maxit"), *restart = json_object_get(o, "restart");
    t->s.o.tol = tol ? json_number_value(tol) : 1e-8;
    if ((tol && !json_is_number(tol)) || !isfinite(t->s.o.tol) || t->s.o.tol <= 0) {
        api_error(r, 400, "invalid_request", "`tol` must be a finite number > 0 (the relative residual to reach)");
        return -1;
    }
    if (t->s.o.tol < spmv_solve_min_tol(t->s.m->host.dtype)) {
        api_error(r, 400, "invalid_request", "`tol` %g is below what %s can reach: at least %.2g (10 eps)", t->s.o.tol,
                  matrix_dtype_name(t->s.m), spmv_solve_min_tol(t->s.m->host.dtype));
        return -1;
    }
    int64_t max_it = atomic_load(&r->d->limits.max_solve_iterations);
    if (maxit && (!json_is_integer(maxit) || json_integer_value(maxit) < 1 || json_integer_value(maxit) > max_it)) {
        api_error(r, 400, "invalid_request", "`maxit` must be an integer in 1..%lld (max_solve_iterations)",
                  (long long)max_it);
        return -1;
    }
    t->s.o.maxit = maxit ? (int32_t)json_integer_value(maxit) : (int32_t)(max_it < 1000 ? max_it : 1000);
    if (restart && (!json_is_integer(restart) || json_integer_value(restart) < 1 ||
                    json_integer_value(restart) > SPMV_GMRES_RESTART_MAX)) {
        api_error(r, 400, "invalid_request", "`restart` must be an integer in 1..%d", SPMV_GMRES_RESTART_MAX);
        return -1;
    }
    t->s.o.restart = restart ? (int32_t)json_integer_value(restart) : 0;
    const char *pre = json_string_value(json_object_get(o, "preconditioner"));
    if (json_object_get(o, "preconditioner") && (!pre || (strcmp(pre, "none") && strcmp(pre, "jacobi")))) {
        api_error(r, 400, "invalid_request", "`preconditioner` must be \"none\" or \"jacobi\"");
        return -1;
    }
    t->s.jacobi = pre && strcmp(pre, "jacobi") == 0;
    return 0;
}

/* The operator's kernel (default auto, tuned for the matrix) and the worker it runs on. */
static int decode_kernel(request *r, const json_t *o)
{
    solve_req *t = T(r);
    const char *kn = json_string_value(json_object_get(o, "kernel"));
    if (json_object_get(o, "kernel") && !kn) {
        api_error(r, 400, "invalid_request", "`kernel` must be a kernel name");
        return -1;
    }
    t->s.k = spmv_kernel_find(kn ? kn : "auto");
    if (spmv_kernel_is_auto(t->s.k)) {
        t->s.is_auto = true;
        t->s.w = autotune_worker(r->d, t->s.m);
    } else {
        if (api_kernel_check(r, t->s.k, kn, SPMV_OP_SPMV, t->s.m, "it") != 0)
            return -1;
        t->s.w = spmvd_worker_for(r->d, t->s.m, t->s.k);
        spmv_error err = {0};
        if (spmv_params_resolve(t->s.k, NULL, &t->s.p, &err) != SPMV_OK) {
            api_error(r, 400, "invalid_parameter", "%s", err.message);
            return -1;
        }
    }
    return 0;
}

/* b, x0 and x_out (inline values or resident vectors on the solve's device); a zero diagonal
 * under Jacobi is refused here, not after queueing: it is the client's mistake. */
static int decode_operands(request *r, const json_t *o)
{
    solve_req *t = T(r);
    if (operand(r, o, "b", true, &t->s.b_vals, &t->s.bv) || operand(r, o, "x0", false, &t->s.x0_vals, &t->s.x0v) ||
        operand(r, o, "x_out", false, NULL, &t->s.xout))
        return -1;
    if (t->s.xout && t->s.bv && t->s.xout == t->s.bv) {
        api_error(r, 400, "invalid_request", "`x_out` and `b` are the same vector");
        return -1;
    }
    if (t->s.jacobi) { /* refused here, not after queueing: a zero diagonal is the client's mistake */
        spmv_error err = {0};
        void *d = malloc((size_t)(t->s.m->host.rows ? t->s.m->host.rows : 1) * spmv_dtype_size(t->s.m->host.dtype));
        int jrc = d ? spmv_csr_inv_diag(&t->s.m->host.csr, d, &err) : SPMV_ERR_NOMEM;
        free(d);
        if (jrc != SPMV_OK) {
            api_error(r, 400, "invalid_request", "%s", d ? err.message : "out of memory");
            return -1;
        }
    }
    return 0;
}

static int decode(request *r)
{
    static const char *const keys[] = {"method", "restart", "b", "x0", "tol", "maxit", "preconditioner", "kernel",
                                       "x_out", "async", NULL};
    solve_req *t = T(r);
    json_error_t jerr;
    if (!api_json_body_fits(r))
        return -1;
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
    if (t->s.m->host.rows != t->s.m->host.cols) {
        api_error(r, 400, "shape_mismatch", "solve needs a square matrix; %s is %d x %d", t->s.m->meta.id,
                  t->s.m->host.rows, t->s.m->host.cols);
        goto out;
    }
    if (decode_options(r, o) || decode_kernel(r, o))
        goto out;
    json_t *async = json_object_get(o, "async");
    if (async && !json_is_boolean(async)) {
        api_error(r, 400, "invalid_request", "`async` must be true or false");
        goto out;
    }
    if (decode_operands(r, o))
        goto out;
    t->binary_out = !t->s.xout && api_header_in(r, MHD_HTTP_HEADER_ACCEPT) &&
                    strstr(api_header_in(r, MHD_HTTP_HEADER_ACCEPT), "application/octet-stream");
    rc = async && json_is_true(async) ? 1 : 0;
out:
    json_decref(o);
    return rc;
}

/* ------------------------------------------------------------ answers */

static json_t *result_json(const solve_req *t)
{
    const spmv_solve_result *s = &t->s.res;
    json_t *hist = json_array();
    for (int32_t i = 0; i < s->history_len; i++)
        json_array_append_new(hist, api_json_real(s->history[i]));
    json_t *stop = json_pack("{s:s, s:s}", "reason", spmv_solve_stop_name(s->stop), "detail", s->detail);
    if (s->stop == SPMV_STOP_BREAKDOWN)
        json_object_set_new(stop, "value", api_json_real(s->breakdown_value));
    json_t *o = json_pack("{s:s, s:b, s:o, s:i, s:o, s:o, s:{s:o, s:o, s:o, s:o, s:o}, s:i, s:s, s:o, s:s, s:s}",
                          "method", spmv_solve_method_name(t->s.o.method), "converged", s->stop == SPMV_STOP_CONVERGED,
                          "stop", stop, "iterations", s->iterations, "relres", api_json_real(s->relres),
                          "residual_history", hist, "time", "total_ms", api_json_real(s->total_ms), "spmv_ms",
                          api_json_real(s->spmv_ms), "vector_ms", api_json_real(s->vector_ms), "setup_ms",
                          api_json_real(s->setup_ms), "queue_ms", api_json_real(t->s.queue_ms), "spmv_calls",
                          s->spmv_calls, "kernel", t->s.k->name, "params", api_params_json(t->s.k, &t->s.p), "matrix",
                          t->s.m->meta.id, "device", t->s.w->name);
    if (o && t->s.xout)
        json_object_set_new(o, "x", json_pack("{s:s}", "vector", t->s.xout->id));
    if (o)
        json_object_set_new(o, "preconditioner", json_string(t->s.jacobi ? "jacobi" : "none"));
    return o;
}

/* {"x":[...], <rest>}, or the rest alone when x went into a vector. */
static char *json_answer(const solve_req *t, size_t *len)
{
    return api_json_values_answer("x", t->s.m->host.dtype, t->s.x, t->s.m->host.rows, 1, result_json(t), len);
}

static void answer(request *r)
{
    solve_req *t = T(r);
    if (t->s.rc != SPMV_OK) {
        api_error_task(r, t->s.rc, &t->s.err);
        return;
    }
    if (t->binary_out) {
        json_t *hdr = result_json(t);
        char *htext = hdr ? api_json_dump(hdr, NULL) : NULL;
        json_decref(hdr);
        api_bytes(r, 200, "application/octet-stream", t->s.x, (size_t)t->s.m->host.rows * spmv_dtype_size(t->s.m->host.dtype));
        t->s.x = NULL;
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
    solve_req *t = (solve_req *)base;
    if (status != SPMV_OK) {
        t->s.rc = status;
        spmv_error_set(&t->s.err, status, 0, "the daemon is shutting down");
    }
    if (t->r) {
        api_task_done(t->r);
        return;
    }
    size_t len = 0;
    char *text = t->s.rc == SPMV_OK ? json_answer(t, &len) : NULL; /* before len is read */
    api_job_finish_answer(t->s.d, t->s.job, t->s.rc, &t->s.err, text, len);
    solve_free(t);
}

/* ------------------------------------------------------------ route */

static void solve_begin(request *r)
{
    solve_req *t = calloc(1, sizeof *t);
    if (!t) {
        api_error(r, 500, "out_of_memory", "out of memory");
        return;
    }
    t->s.d = r->d;
    r->state = t;
    if (!(t->s.m = api_get_matrix(r)) || api_refuse_sharded(r, t->s.m, "/solve"))
        return;
    api_check_content_length(r, atomic_load(&r->d->limits.max_body_bytes));
}

static void solve_body(request *r, const char *data, size_t size)
{
    api_body_collect(r, data, size, atomic_load(&r->d->limits.max_body_bytes));
}

static void solve_end(request *r)
{
    solve_req *t = T(r);
    int async = decode(r);
    if (async < 0)
        return;
    /* x inline as JSON (an answer or a job's result) is bounded before the solve runs */
    if ((async || !t->binary_out) && !t->s.xout && !api_json_values_fit(r, t->s.m->host.rows, 1, "x"))
        return;
    t->s.base.run = solve_run;
    t->s.base.finish = solve_finish;
    if (!async) {
        t->r = r;
        api_submit_and_suspend(r, t->s.w, &t->s.base);
        return;
    }
    api_submit_async(r, t->s.w, &t->s.base, &t->s.job, "solve", t->s.m->meta.id);
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
