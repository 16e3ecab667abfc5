/* client_solve.c — POST /v1/matrices/{id}/solve (docs/api.md), and the
 * parser of a finished solve job's result.
 *
 * A solve run to its end answers x in binary with the rest in the
 * X-SpMV-Solve header when the caller gives a buffer, else all as JSON;
 * an async one answers with a job (client_jobs.c). b and x0 go as
 * resident vector ids or inline values.
 */
#include "client_internal.h"

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
    r->total_ms = spmvc_json_num(json_object_get(t, "total_ms"), NAN);
    r->spmv_ms = spmvc_json_num(json_object_get(t, "spmv_ms"), NAN);
    r->vector_ms = spmvc_json_num(json_object_get(t, "vector_ms"), NAN);
    r->setup_ms = spmvc_json_num(json_object_get(t, "setup_ms"), NAN);
    r->queue_ms = spmvc_json_num(json_object_get(t, "queue_ms"), NAN);
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
    if (!x || !a)
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
                                           size_t nx)
{
    if (!opts || !opts->b_vector == !opts->b)
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

/* The answer to a solve run to its end: x in binary with the rest in the
 * X-SpMV-Solve header, or all of it as JSON. */
static spmv_client_status solve_done(spmv_client *h, response *r, double *x, size_t nx,
                                     spmv_client_solve_result *res)
{
    spmv_client_status st;
    if (r->to_sink == 1) {
        if (r->sink_len != nx * 8)
            return spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL, "x has %zu bytes, expected %zu (%zu float64 values)",
                              r->sink_len, nx * 8, nx);
        if (!r->meta_header || !(r->json = json_loads(r->meta_header, 0, NULL)))
            return spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the X-SpMV-Solve header is %s",
                              r->meta_header ? "not JSON" : "missing");
        res->has_x = 1;
    } else if ((st = spmvc_parse_body(h, r, &r->json)) != SPMV_CLIENT_OK ||
               (st = solve_x(h, r->json, x, nx, res)) != SPMV_CLIENT_OK) {
        return st;
    }
    if (!parse_solve(r->json, res))
        return spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the solve answer has a count out of range (or memory ran out)");
    return SPMV_CLIENT_OK;
}

spmv_client_status spmv_client_solve(spmv_client *h, const char *id, const spmv_client_solve_options *opts,
                                     double *x, size_t nx, spmv_client_solve_result **out)
{
    spmv_client_solve_result *res;
    spmv_client_status st;

    if (!h || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    spmvc_clear_error(h);
    if ((st = spmvc_check_id(h, id, "matrix")) != SPMV_CLIENT_OK) return st;
    if ((st = solve_options_ok(h, opts, x, nx)) != SPMV_CLIENT_OK) return st;
    bool binary = x && !opts->x_out_vector && !opts->async;
    request req = {.method = "POST", .collection = "matrices", .id = id, .suffix = "/solve",
                   .accept = binary ? "application/octet-stream" : NULL, .sink = binary ? x : NULL,
                   .sink_cap = binary ? nx * 8 : 0, .sink_if_binary = true, .meta_name = "x-spmv-solve:"};
    if ((st = solve_body(h, opts, &req)) != SPMV_CLIENT_OK)
        return st;
    if (!(res = calloc(1, sizeof *res))) {
        json_decref(req.json);
        return spmvc_fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    }
    response r;
    if ((st = spmvc_request(h, &req, &r)) == SPMV_CLIENT_OK) {
        res->request_ms = r.total_ms;
        st = opts->async ? solve_job(h, &r, res) : solve_done(h, &r, x, nx, res);
    }
    spmvc_response_clear(&r);
    if (st == SPMV_CLIENT_OK)
        *out = res;
    else
        spmv_client_solve_result_free(res);
    return st;
}
