/* client_solve.c — POST /v1/matrices/{id}/solve (docs/api.md), and the
 * parser of a finished solve job's result.
 *
 * Inline b (and x0) go binary: their raw values in the matrix's dtype
 * (float64 for a mixed matrix; the handle knows it from a describe) are
 * the body, the options the query string, and x comes back the same way
 * straight into the caller's buffer, the residual history after it
 * (?history=true) and the report in the X-SpMV-Solve header. A resident
 * b, or spmv_client_solve_json(), sends JSON; x then still comes back
 * binary when the caller gives a buffer (Accept), in the matrix's dtype
 * too. float32 values are widened into the caller's float64 buffer in
 * place. An async solve answers with a job (client_jobs.c).
 * spmv_client_solve_shm() sends the binary form with b and/or x in
 * shared-memory regions (?b_shm=&b_offset=&k=, ?x_shm=&x_offset=): the
 * body is then x0 alone or empty, and with x in a region the answer is
 * the JSON report.
 */
#include "client_internal.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    if (o->method) spmvc_body_set(req, "method", json_string(o->method));
    if (o->tol) spmvc_body_set(req, "tol", json_real(o->tol));
    if (o->maxit) spmvc_body_set(req, "maxit", json_integer(o->maxit));
    if (o->restart) spmvc_body_set(req, "restart", json_integer(o->restart));
    if (o->preconditioner) spmvc_body_set(req, "preconditioner", json_string(o->preconditioner));
    if (o->kernel) spmvc_body_set(req, "kernel", json_string(o->kernel));
    spmvc_body_set(req, "b", operand_json(o->b_vector, o->b, o->nb, &finite));
    if (o->x0_vector || o->x0) spmvc_body_set(req, "x0", operand_json(o->x0_vector, o->x0, o->nx0, &finite));
    if (o->x_out_vector) spmvc_body_set(req, "x_out", json_pack("{s:s}", "vector", o->x_out_vector));
    if (o->async) spmvc_body_set(req, "async", json_true());
    if (finite)
        return SPMV_CLIENT_OK;
    json_decref(req->json);
    req->json = NULL;
    return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "b and x0 must hold finite values");
}

/* Fills *r from a solve answer (x excluded); false when a count is out of
 * range or memory runs out. */
static bool parse_solve(const json_t *root, spmv_client_solve_result *r)
{
    static const spmvc_num_field times[] = {
        SPMVC_NUM(spmv_client_solve_result, total_ms), SPMVC_NUM(spmv_client_solve_result, spmv_ms),
        SPMVC_NUM(spmv_client_solve_result, vector_ms), SPMVC_NUM(spmv_client_solve_result, setup_ms),
        SPMVC_NUM(spmv_client_solve_result, queue_ms)};
    const json_t *stop = json_object_get(root, "stop"), *t = json_object_get(root, "time");
    const json_t *hist = json_object_get(root, "residual_history");
    const char *detail = json_string_value(json_object_get(stop, "detail"));

    if (!json_is_object(root) || (hist && !json_is_array(hist)) ||
        !spmvc_json_count(json_object_get(root, "iterations"), INT64_MAX, &r->iterations) ||
        !spmvc_json_count(json_object_get(root, "spmv_calls"), INT64_MAX, &r->spmv_calls))
        return false;
    spmvc_copy_str(r->method, sizeof r->method, json_object_get(root, "method"));
    r->converged = json_is_true(json_object_get(root, "converged"));
    spmvc_copy_str(r->stop_reason, sizeof r->stop_reason, json_object_get(stop, "reason"));
    r->stop_value = spmvc_json_num(json_object_get(stop, "value"), NAN);
    r->relres = spmvc_json_num(json_object_get(root, "relres"), NAN);
    spmvc_json_nums(t, times, sizeof times / sizeof *times, r);
    spmvc_copy_str(r->kernel, sizeof r->kernel, json_object_get(root, "kernel"));
    const json_t *dev = json_object_get(root, "device");
    spmvc_copy_str(r->device, sizeof r->device, json_is_object(dev) ? json_object_get(dev, "name") : dev);
    r->nhistory = json_array_size(hist);
    if (r->nhistory && !(r->history = malloc(r->nhistory * sizeof *r->history)))
        return false;
    for (size_t i = 0; i < r->nhistory; i++)
        r->history[i] = spmvc_json_num(json_array_get(hist, i), NAN);
    json_t *copy = json_copy((json_t *)root);
    if (copy) json_object_del(copy, "x");
    r->json = spmvc_dump_json(copy);
    json_decref(copy);
    return (r->stop_detail = strdup(detail ? detail : "")) && r->json;
}

/* The answer's "x" into the caller's buffer: exactly nx finite-or-not numbers. */
static spmv_client_status solve_x(spmv_client *h, const json_t *root, double *x, size_t nx,
                                  spmv_client_solve_result *r)
{
    const json_t *a = json_object_get(root, "x");
    if (!x || !a || json_is_object(a)) /* {"vector": id}: x went into x_out */
        return SPMV_CLIENT_OK;
    if (!json_is_array(a) || json_array_size(a) != nx)
        return spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the answer's x has %zu values, expected %zu",
                          json_is_array(a) ? json_array_size(a) : 0, nx);
    for (size_t i = 0; i < nx; i++)
        x[i] = spmvc_json_num(json_array_get(a, i), NAN);
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
    spmvc_clear_error(h);
    if (!json) return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "no JSON text to parse");
    if (!(root = json_loads(json, 0, NULL)))
        return spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the solve answer is not JSON");
    st = spmvc_fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    if (!(r = calloc(1, sizeof *r)))
        goto done;
    r->request_ms = NAN;
    if (!parse_solve(root, r)) {
        st = spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the solve answer has a count out of range (or memory ran out)");
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
                                           size_t nx, bool b_in_region)
{
    if (opts && b_in_region && (opts->b_vector || opts->b))
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "b is in a region: opts->b and opts->b_vector must be NULL");
    if (!opts || (!b_in_region && !opts->b_vector == !opts->b))
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID,
                          "give b either as a vector id (b_vector) or inline (b, nb), not %s",
                          opts && opts->b ? "both" : "neither");
    if (opts->x0_vector && opts->x0)
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "give x0 as a vector id or inline, not both");
    if ((opts->b && opts->nb == 0) || (opts->x0 && opts->nx0 == 0))
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "inline b and x0 need at least one value");
    if (!(opts->tol >= 0 && isfinite(opts->tol)) || opts->maxit < 0 || opts->restart < 0)
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID,
                          "tol must be finite and >= 0, maxit and restart >= 0 (0: server default)");
    if ((opts->b_vector && !spmvc_id_ok(opts->b_vector)) || (opts->x0_vector && !spmvc_id_ok(opts->x0_vector)) ||
        (opts->x_out_vector && !spmvc_id_ok(opts->x_out_vector)))
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "vector ids must be 1 to 63 characters");
    if (x && nx > SIZE_MAX / 8)
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "x length overflows size_t");
    return SPMV_CLIENT_OK;
}

/* What one solve call sends and where its answer goes. */
typedef struct solve_call {
    const spmv_client_solve_options *o;
    double *x;          /* x's destination: the caller's buffer, scratch, or NULL */
    size_t nx;
    size_t dsize;       /* bytes per value of a binary x: the matrix's dtype */
    bool callers_x;     /* x is the caller's buffer (result->has_x) */
    bool history_body;  /* the residual history follows x in the body */
    void *body;         /* the binary body when b could not be sent as it stands */
    double *scratch;    /* x of a binary answer the caller gave no buffer for */
    const spmv_client_shm_ref *bs, *xs; /* b and x in regions (spmv_client_solve_shm), NULL: not */
    int k;              /* b's columns in its region */
} solve_call;

/* The answer to an async solve: the job's id, and the answer as JSON. */
static spmv_client_status solve_job(spmv_client *h, response *r, spmv_client_solve_result *res)
{
    spmv_client_status st = spmvc_parse_body(h, r, &r->json);
    if (st == SPMV_CLIENT_OK)
        st = spmvc_take_job_id(h, r, "async solve", res->job_id, sizeof res->job_id);
    if (st == SPMV_CLIENT_OK && (!(res->json = spmvc_dump_json(r->json)) || !(res->stop_detail = strdup(""))))
        st = spmvc_fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    return st;
}

/* n float32 values at the start of x's memory widened into n doubles, in
 * place: from the last, so each float is read before its bytes are
 * overwritten (double i starts at byte 8i >= 4i + 4 for i >= 1). */
static void widen_f32(double *x, size_t n)
{
    for (size_t i = n; i-- > 0;) {
        float f;
        memcpy(&f, (const char *)x + 4 * i, sizeof f);
        double d = f;
        memcpy((char *)x + 8 * i, &d, sizeof d);
    }
}

/* x as it came in binary: nx values of the matrix's dtype (c->dsize
 * bytes each), float32 widened to float64. */
static spmv_client_status binary_x(spmv_client *h, const response *r, const solve_call *c)
{
    size_t dsize = c->dsize;
    if (r->sink_len != c->nx * dsize)
        return spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL, "x has %zu bytes, expected %zu (%zu %s values)", r->sink_len,
                          c->nx * dsize, c->nx, dsize == 4 ? "float32" : "float64");
    if (dsize == 4)
        widen_f32(c->x, c->nx);
    return SPMV_CLIENT_OK;
}

/* The residual history that follows x in a binary answer: the
 * residual_history_len float64 values X-SpMV-Solve counts. */
static spmv_client_status binary_history(spmv_client *h, const response *r, spmv_client_solve_result *res)
{
    int64_t n = 0;
    if (!spmvc_json_count(json_object_get(r->json, "residual_history_len"), (int64_t)(SIZE_MAX / 8), &n) ||
        r->body.len != (size_t)n * 8)
        return spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL,
                          "the answer has %zu bytes after x, not the %lld float64 residuals X-SpMV-Solve counts",
                          r->body.len, (long long)n);
    if (n == 0)
        return SPMV_CLIENT_OK;
    free(res->history);
    res->nhistory = 0;
    if (!(res->history = malloc((size_t)n * 8)))
        return spmvc_fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    memcpy(res->history, r->body.data, (size_t)n * 8);
    res->nhistory = (size_t)n;
    return SPMV_CLIENT_OK;
}

/* The answer to a solve run to its end: x in binary with the rest in the
 * X-SpMV-Solve header (and the history after x), or all of it as JSON. */
static spmv_client_status solve_done(spmv_client *h, response *r, const solve_call *c, spmv_client_solve_result *res)
{
    spmv_client_status st;
    if (r->to_sink == 1) {
        if ((st = binary_x(h, r, c)) != SPMV_CLIENT_OK)
            return st;
        if (!r->meta_header || !(r->json = json_loads(r->meta_header, 0, NULL)))
            return spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the X-SpMV-Solve header is %s",
                              r->meta_header ? "not JSON" : "missing");
        res->has_x = c->callers_x;
    } else if ((st = spmvc_parse_body(h, r, &r->json)) != SPMV_CLIENT_OK ||
               (st = solve_x(h, r->json, c->callers_x ? c->x : NULL, c->nx, res)) != SPMV_CLIENT_OK) {
        return st;
    }
    if (!parse_solve(r->json, res))
        return spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the solve answer has a count out of range (or memory ran out)");
    return r->to_sink == 1 && c->history_body ? binary_history(h, r, res) : SPMV_CLIENT_OK;
}

/* One operand's values into a binary body of dtype dt (dst NULL: only
 * checked); false when one is not finite (for float32: not as a float). */
static bool pack_values(const double *v, size_t n, spmv_client_dtype dt, char *dst)
{
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(v[i]) || (dt == SPMV_CLIENT_FLOAT32 && fabs(v[i]) > FLT_MAX))
            return false;
        if (dst && dt == SPMV_CLIENT_FLOAT32) {
            float f = (float)v[i];
            memcpy(dst + 4 * i, &f, sizeof f);
        } else if (dst) {
            memcpy(dst + 8 * i, &v[i], sizeof v[i]);
        }
    }
    return true;
}

/* The body of a binary solve: b, then x0 (?x0=body), as raw values of the
 * matrix's dtype; float64 b alone goes as it stands. */
static spmv_client_status binary_body(spmv_client *h, solve_call *c, spmv_client_dtype dt, request *req)
{
    const spmv_client_solve_options *o = c->o;
    size_t n = o->nb, parts = o->x0 ? 2 : 1, dsize = spmvc_dtype_size(dt);
    bool ok;
    req->content_type = "application/octet-stream";
    if (c->bs) { /* b in its region: the body is x0 alone (the daemon checks its length), or nothing */
        req->body = "";
        req->body_len = 0;
        if (!o->x0)
            return SPMV_CLIENT_OK;
        if (o->nx0 > SIZE_MAX / 8 || !(c->body = malloc(o->nx0 * dsize)))
            return spmvc_fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
        if (!pack_values(o->x0, o->nx0, dt, c->body))
            return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "x0 must hold finite values%s",
                              dt == SPMV_CLIENT_FLOAT32 ? " within float32's range (the matrix is float32)" : "");
        req->body = c->body;
        req->body_len = o->nx0 * dsize;
        return SPMV_CLIENT_OK;
    }
    if (o->x0 && o->nx0 != n)
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "inline x0 has %zu values and b %zu", o->nx0, n);
    if (n > SIZE_MAX / 16)
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "b's length overflows size_t");
    if (dt == SPMV_CLIENT_FLOAT64 && parts == 1) {
        ok = pack_values(o->b, n, dt, NULL);
        req->body = o->b;
    } else {
        char *body = c->body = malloc(parts * n * dsize);
        if (!body)
            return spmvc_fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
        ok = pack_values(o->b, n, dt, body) && (!o->x0 || pack_values(o->x0, n, dt, body + n * dsize));
        req->body = body;
    }
    if (!ok)
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "b and x0 must hold finite values%s",
                          dt == SPMV_CLIENT_FLOAT32 ? " within float32's range (the matrix is float32)" : "");
    req->body_len = parts * n * dsize;
    return SPMV_CLIENT_OK;
}

/* The options of a binary solve in its query string, with the JSON
 * route's names. */
static void solve_query(spmv_client *h, const solve_call *c, request *req)
{
    const spmv_client_solve_options *o = c->o;
    if (c->bs) {
        spmvc_query_add(h, req, "b_shm", c->bs->name);
        spmvc_query_add_int(h, req, "b_offset", (long)c->bs->offset);
        if (c->k > 1) spmvc_query_add_int(h, req, "k", c->k);
    }
    if (c->xs) {
        spmvc_query_add(h, req, "x_shm", c->xs->name);
        spmvc_query_add_int(h, req, "x_offset", (long)c->xs->offset);
    }
    if (o->method) spmvc_query_add(h, req, "method", o->method);
    if (o->tol) spmvc_query_add_double(h, req, "tol", o->tol);
    if (o->maxit) spmvc_query_add_int(h, req, "maxit", o->maxit);
    if (o->restart) spmvc_query_add_int(h, req, "restart", o->restart);
    if (o->preconditioner) spmvc_query_add(h, req, "preconditioner", o->preconditioner);
    if (o->kernel) spmvc_query_add(h, req, "kernel", o->kernel);
    if (o->x0 || o->x0_vector) spmvc_query_add(h, req, "x0", o->x0 ? "body" : o->x0_vector);
    if (o->x_out_vector) spmvc_query_add(h, req, "x_out", o->x_out_vector);
    if (o->async) spmvc_query_add(h, req, "async", "true");
}

/* A binary solve: b (and x0) as the body in the matrix's dtype, and x
 * back in it, into the caller's buffer (or scratch when it gave none),
 * the residual history after it. */
static spmv_client_status binary_request(spmv_client *h, const char *id, solve_call *c, request *req)
{
    spmv_client_dtype dt;
    spmv_client_status st = spmvc_matrix_dtype(h, id, &dt);
    if (st != SPMV_CLIENT_OK || (st = binary_body(h, c, dt, req)) != SPMV_CLIENT_OK)
        return st;
    solve_query(h, c, req);
    if (c->o->x_out_vector || c->o->async || c->xs) /* x in a vector or a region: a JSON answer */
        return SPMV_CLIENT_OK;
    c->dsize = spmvc_dtype_size(dt);
    if (!c->x && c->bs) /* b's length is the region's: nothing here says how long x is */
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "with b in a region, x needs a buffer (x, nx) or a region");
    if (!c->x) {
        if (!(c->x = c->scratch = malloc((c->o->nb ? c->o->nb : 1) * sizeof *c->x)))
            return spmvc_fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
        c->nx = c->o->nb;
    }
    req->sink = c->x;
    req->sink_cap = c->nx * c->dsize;
    req->sink_then_body = c->history_body = true;
    spmvc_query_add(h, req, "history", "true");
    return SPMV_CLIENT_OK;
}

/* A JSON solve: x, when the caller gives a buffer and it is to come back,
 * in binary (Accept), in the matrix's dtype (learnt as for a binary
 * request: x's length alone cannot tell nx float32 values from nx / 2
 * float64 ones). */
static spmv_client_status json_request(spmv_client *h, const char *id, solve_call *c, request *req)
{
    if (c->x && !c->o->x_out_vector && !c->o->async) {
        spmv_client_dtype dt;
        spmv_client_status st = spmvc_matrix_dtype(h, id, &dt);
        if (st != SPMV_CLIENT_OK)
            return st;
        c->dsize = spmvc_dtype_size(dt);
        req->accept = "application/octet-stream";
        req->sink = c->x;
        req->sink_cap = c->nx * c->dsize;
    }
    return solve_body(h, c->o, req);
}

/* spmv_client_solve() and spmv_client_solve_json(): binary unless `json`
 * or b is a resident vector. */
static spmv_client_status solve(spmv_client *h, const char *id, const spmv_client_solve_options *opts, double *x,
                                size_t nx, bool json, const spmv_client_shm_ref *bs, int k,
                                const spmv_client_shm_ref *xs, spmv_client_solve_result **out)
{
    spmv_client_solve_result *res = NULL;
    spmv_client_status st;

    if (!h || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    spmvc_clear_error(h);
    if ((st = spmvc_check_id(h, id, "matrix")) != SPMV_CLIENT_OK) return st;
    if ((st = solve_options_ok(h, opts, x, nx, bs != NULL)) != SPMV_CLIENT_OK) return st;
    if ((bs && (st = spmvc_shm_ref_ok(h, bs)) != SPMV_CLIENT_OK) || (xs && (st = spmvc_shm_ref_ok(h, xs)) != SPMV_CLIENT_OK))
        return st;
    if (xs && (opts->x_out_vector || x))
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "x goes into its region: no x_out_vector, no x buffer");
    if (xs && !bs && !opts->b)
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "with x in a region, b is inline or in a region");
    if (k < 0 || k > 64 || (k > 1 && !bs))
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "k (%d) is b's columns in its region: 0 or 1 to 64, and only "
                          "with b in a region", k);
    solve_call c = {.o = opts, .x = x, .nx = nx, .callers_x = x != NULL, .bs = bs, .xs = xs, .k = k ? k : 1};
    request req = {.method = "POST", .collection = "matrices", .id = id, .suffix = "/solve", .sink_if_binary = true,
                   .meta_name = "x-spmv-solve:"};
    st = !json && (opts->b || bs) ? binary_request(h, id, &c, &req) : json_request(h, id, &c, &req);
    if (st == SPMV_CLIENT_OK && !(res = calloc(1, sizeof *res)))
        st = spmvc_fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    response r = {0};
    if (st == SPMV_CLIENT_OK && (st = spmvc_request(h, &req, &r)) == SPMV_CLIENT_OK) {
        res->request_ms = r.total_ms;
        st = opts->async ? solve_job(h, &r, res) : solve_done(h, &r, &c, res);
    }
    json_decref(req.json);
    free(req.query.data);
    spmvc_response_clear(&r);
    free(c.body);
    free(c.scratch);
    if (st == SPMV_CLIENT_OK)
        *out = res;
    else
        spmv_client_solve_result_free(res);
    return st;
}

spmv_client_status spmv_client_solve(spmv_client *h, const char *id, const spmv_client_solve_options *opts,
                                     double *x, size_t nx, spmv_client_solve_result **out)
{
    return solve(h, id, opts, x, nx, false, NULL, 0, NULL, out);
}

spmv_client_status spmv_client_solve_json(spmv_client *h, const char *id, const spmv_client_solve_options *opts,
                                          double *x, size_t nx, spmv_client_solve_result **out)
{
    return solve(h, id, opts, x, nx, true, NULL, 0, NULL, out);
}

spmv_client_status spmv_client_solve_shm(spmv_client *h, const char *id, const spmv_client_solve_options *opts,
                                         const spmv_client_shm_ref *b, int k, const spmv_client_shm_ref *x_region,
                                         double *x, size_t nx, spmv_client_solve_result **out)
{
    if (h && !b && !x_region) {
        spmvc_clear_error(h);
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "spmv_client_solve_shm needs b or x in a region");
    }
    return solve(h, id, opts, x, nx, false, b, k, x_region, out);
}
