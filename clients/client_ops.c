/* client_ops.c — batched steps: the spmv_client_ops builder and POST
 * /v1/ops (docs/api.md).
 *
 * The builder is a JSON array of steps; the first step that fails to
 * append is remembered, and spmv_client_ops_run() refuses the batch with
 * its message before anything is sent. The answer's named results
 * (scalars, or k values of a block) are read into an array searched by
 * name.
 */
#include "client_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct spmv_client_ops {
    json_t *steps;            /* the array of step objects */
    char error[256];          /* the first failed append, "" when none */
};

spmv_client_ops *spmv_client_ops_new(void)
{
    spmv_client_ops *o = calloc(1, sizeof *o);
    if (o && !(o->steps = json_array())) {
        free(o);
        return NULL;
    }
    return o;
}

void spmv_client_ops_free(spmv_client_ops *o)
{
    if (!o)
        return;
    json_decref(o->steps);
    free(o);
}

void spmv_client_ops_clear(spmv_client_ops *o)
{
    if (!o)
        return;
    json_array_clear(o->steps);
    o->error[0] = '\0';
}

size_t spmv_client_ops_count(const spmv_client_ops *o)
{
    return o ? json_array_size(o->steps) : 0;
}

char *spmv_client_ops_json(const spmv_client_ops *o)
{
    if (!o)
        return NULL;
    json_t *root = json_pack("{s:O}", "steps", o->steps);
    char *text = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    return text;
}

/* Records the first failed append; returns status. */
__attribute__((format(printf, 3, 4)))
static spmv_client_status ops_fail(spmv_client_ops *o, spmv_client_status st, const char *fmt, ...)
{
    if (o && !o->error[0]) {
        va_list ap;
        int n = snprintf(o->error, sizeof o->error, "step %zu: ", json_array_size(o->steps) + 1);
        va_start(ap, fmt);
        vsnprintf(o->error + n, sizeof o->error - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* Appends {"op": op, then (key, kind, value) triples}: kind 's' a
 * non-empty id or name, 'd' a finite number. Ends at a NULL key. */
static spmv_client_status ops_append(spmv_client_ops *o, const char *op, ...)
{
    va_list ap;
    spmv_client_status st = SPMV_CLIENT_OK;
    json_t *step;

    if (!o)
        return SPMV_CLIENT_ERR_INVALID;
    if (!(step = json_pack("{s:s}", "op", op)))
        return ops_fail(o, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    va_start(ap, op);
    for (const char *key; st == SPMV_CLIENT_OK && (key = va_arg(ap, const char *));) {
        int kind = va_arg(ap, int);
        json_t *v = NULL;
        if (kind == 's') {
            const char *s = va_arg(ap, const char *);
            if (!s || !*s || strlen(s) >= 64) {
                st = ops_fail(o, SPMV_CLIENT_ERR_INVALID, "%s: \"%s\" must be 1 to 63 characters", op, key);
                break;
            }
            v = json_string(s);
        } else {
            double d = va_arg(ap, double);
            if (!isfinite(d)) {
                st = ops_fail(o, SPMV_CLIENT_ERR_INVALID, "%s: \"%s\" must be a finite number", op, key);
                break;
            }
            v = json_real(d);
        }
        if (!v || json_object_set_new(step, key, v) != 0)
            st = ops_fail(o, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    }
    va_end(ap);
    if (st == SPMV_CLIENT_OK && json_array_append(o->steps, step) != 0)
        st = ops_fail(o, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    json_decref(step);
    return st;
}

spmv_client_status spmv_client_ops_spmv(spmv_client_ops *o, const char *matrix, const char *x, const char *y,
                                        double alpha, double beta, char trans, const char *kernel)
{
    if (trans != 'n' && trans != 't')
        return ops_fail(o, SPMV_CLIENT_ERR_INVALID, "spmv: trans must be 'n' or 't'");
    return ops_append(o, "spmv", "matrix", 's', matrix, "x", 's', x, "y", 's', y, "alpha", 'd', alpha, "beta", 'd',
                      beta, "trans", 's', trans == 't' ? "t" : "n", "kernel", 's', kernel ? kernel : "auto",
                      (const char *)NULL);
}

spmv_client_status spmv_client_ops_dot(spmv_client_ops *o, const char *x, const char *y, const char *as)
{
    return ops_append(o, "dot", "x", 's', x, "y", 's', y, "as", 's', as, (const char *)NULL);
}

spmv_client_status spmv_client_ops_nrm2(spmv_client_ops *o, const char *x, const char *as)
{
    return ops_append(o, "nrm2", "x", 's', x, "as", 's', as, (const char *)NULL);
}

spmv_client_status spmv_client_ops_axpy(spmv_client_ops *o, double alpha, const char *x, const char *y)
{
    return ops_append(o, "axpy", "alpha", 'd', alpha, "x", 's', x, "y", 's', y, (const char *)NULL);
}

spmv_client_status spmv_client_ops_axpby(spmv_client_ops *o, double alpha, const char *x, double beta,
                                         const char *y)
{
    return ops_append(o, "axpby", "alpha", 'd', alpha, "x", 's', x, "beta", 'd', beta, "y", 's', y,
                      (const char *)NULL);
}

spmv_client_status spmv_client_ops_scal(spmv_client_ops *o, double alpha, const char *x)
{
    return ops_append(o, "scal", "alpha", 'd', alpha, "x", 's', x, (const char *)NULL);
}

spmv_client_status spmv_client_ops_copy(spmv_client_ops *o, const char *x, const char *y)
{
    return ops_append(o, "copy", "x", 's', x, "y", 's', y, (const char *)NULL);
}

spmv_client_status spmv_client_ops_fill(spmv_client_ops *o, const char *x, double value)
{
    return ops_append(o, "fill", "x", 's', x, "value", 'd', value, (const char *)NULL);
}

void spmv_client_ops_result_free(spmv_client_ops_result *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nresults; i++) {
        free(r->results[i].name);
        free(r->results[i].values);
    }
    free(r->results);
    free(r->steps);
    free(r->json);
    free(r);
}

double spmv_client_ops_result_get(const spmv_client_ops_result *r, const char *name, size_t index)
{
    for (size_t i = 0; r && name && i < r->nresults; i++)
        if (strcmp(r->results[i].name, name) == 0)
            return index < r->results[i].k ? r->results[i].values[index] : NAN;
    return NAN;
}

/* {"results":{name: v | [v...]}, "steps":[{"op","ms"}], "total_ms", "queue_ms", "device"}. */
static bool parse_ops(const json_t *root, spmv_client_ops_result *r)
{
    const json_t *res = json_object_get(root, "results"), *steps = json_object_get(root, "steps");
    const char *key;
    json_t *v;

    if (!json_is_object(root) || (res && !json_is_object(res)) || (steps && !json_is_array(steps)))
        return false;
    size_t n = json_object_size(res), ns = json_array_size(steps);
    if ((n && !(r->results = calloc(n, sizeof *r->results))) || (ns && !(r->steps = calloc(ns, sizeof *r->steps))))
        return false;
    json_object_foreach((json_t *)res, key, v) {
        spmv_client_ops_value *o = &r->results[r->nresults++];
        size_t k = json_is_array(v) ? json_array_size(v) : 1;
        if (!(o->name = strdup(key)) || !(o->values = calloc(k ? k : 1, sizeof *o->values)))
            return false;
        o->k = k;
        for (size_t i = 0; i < k; i++)
            o->values[i] = spmvc_json_num(json_is_array(v) ? json_array_get(v, i) : v, NAN);
    }
    for (size_t i = 0; i < ns; i++, r->nsteps++) {
        const json_t *s = json_array_get(steps, i);
        spmvc_copy_str(r->steps[i].op, sizeof r->steps[i].op, json_object_get(s, "op"));
        r->steps[i].ms = spmvc_json_num(json_object_get(s, "ms"), NAN);
    }
    r->total_ms = spmvc_json_num(json_object_get(root, "total_ms"), NAN);
    r->queue_ms = spmvc_json_num(json_object_get(root, "queue_ms"), NAN);
    spmvc_copy_str(r->device, sizeof r->device, json_object_get(root, "device"));
    return (r->json = spmvc_dump_json(root)) != NULL;
}

/* The ops answer into a fresh result. */
static spmv_client_status ops_from_json(spmv_client *h, const response *r, spmv_client_ops_result **out)
{
    spmv_client_ops_result *res = calloc(1, sizeof *res);
    if (!res)
        return spmvc_fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    if (!parse_ops(r->json, res)) {
        spmv_client_ops_result_free(res);
        return spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL,
                          "the ops answer's results or steps are malformed (or memory ran out)");
    }
    res->request_ms = r->total_ms;
    *out = res;
    return SPMV_CLIENT_OK;
}

spmv_client_status spmv_client_ops_post(spmv_client *h, const char *json, spmv_client_ops_result **out)
{
    spmv_client_status st;

    if (out) *out = NULL;
    if (!h) return SPMV_CLIENT_ERR_INVALID;
    spmvc_clear_error(h);
    if (!json || !*json) return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "the steps are empty");
    request req = {.method = "POST", .path = "/v1/ops", .content_type = "application/json", .body = json,
                   .body_len = strlen(json), .want_json = out != NULL};
    response r;
    if ((st = spmvc_request(h, &req, &r)) == SPMV_CLIENT_OK && out)
        st = ops_from_json(h, &r, out);
    spmvc_response_clear(&r);
    return st;
}

spmv_client_status spmv_client_ops_run(spmv_client *h, const spmv_client_ops *ops, spmv_client_ops_result **out)
{
    if (out) *out = NULL;
    if (!h) return SPMV_CLIENT_ERR_INVALID;
    spmvc_clear_error(h);
    if (!ops) return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "no steps (NULL builder)");
    if (ops->error[0]) return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "%s", ops->error);
    if (json_array_size(ops->steps) == 0) return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "the builder holds no steps");
    char *text = spmv_client_ops_json(ops);
    if (!text) return spmvc_fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    spmv_client_status st = spmv_client_ops_post(h, text, out);
    free(text);
    return st;
}
