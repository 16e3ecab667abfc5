/* precond.c — preconditioners as resident objects (docs/api.md,
 * "Preconditioners"):
 *
 *   POST   /v1/matrices/{id}/preconditioners  {"type", options, "device"}
 *   GET    /v1/matrices/{id}/preconditioners  the matrix's list
 *   GET    /v1/preconditioners/{id}           one descriptor
 *   DELETE /v1/preconditioners/{id}           unlisted; freed once no solve uses it
 *
 * The options are decoded here, on the HTTP thread, for the route and for
 * a solve's inline "preconditioner" object alike (api_precond_options);
 * the build is a task on the worker of the device asked for (by default
 * the matrix's), whose body is daemon/preconds.c's precond_task_run.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/decode.h"
#include "daemon/autotune.h"
#include "daemon/preconds.h"

static const char *const option_keys[] = {"type", "block_size", "degree", "precision", "max_levels", "max_coarse",
                                          "strength", "smoother", "presmooth", "postsmooth", "near_nullspace",
                                          "coordinates", "aggregation", NULL};

static bool listed(const char *key, const char *const *keys)
{
    for (int i = 0; keys && keys[i]; i++)
        if (strcmp(key, keys[i]) == 0)
            return true;
    return false;
}

/* An integer option in lo..hi into *v (absent: unchanged). */
static int int_option(request *r, const json_t *o, const char *key, int32_t lo, int32_t hi, int32_t *v)
{
    const json_t *j = json_object_get(o, key);
    if (!j)
        return 0;
    if (!json_is_integer(j) || json_integer_value(j) < lo || json_integer_value(j) > hi) {
        api_error(r, 400, "invalid_parameter", "preconditioner `%s` must be an integer in %d..%d", key, lo, hi);
        return -1;
    }
    *v = (int32_t)json_integer_value(j);
    return 0;
}

/* amg's named choices: smoother and aggregation. */
static int amg_choices(request *r, const json_t *o, spmv_amg_options *a)
{
    const char *sm = json_string_value(json_object_get(o, "smoother"));
    if (json_object_get(o, "smoother") && (!sm || (strcmp(sm, "jacobi") && strcmp(sm, "chebyshev")))) {
        api_error(r, 400, "invalid_parameter", "preconditioner `smoother` must be \"chebyshev\" or \"jacobi\"");
        return -1;
    }
    if (sm)
        a->smoother = strcmp(sm, "jacobi") == 0 ? SPMV_AMG_JACOBI : SPMV_AMG_CHEBYSHEV;
    const char *ag = json_string_value(json_object_get(o, "aggregation"));
    if (json_object_get(o, "aggregation") && (!ag || (strcmp(ag, "auto") && strcmp(ag, "standard") && strcmp(ag, "mis2")))) {
        api_error(r, 400, "invalid_parameter", "preconditioner `aggregation` must be \"auto\", \"standard\" or \"mis2\"");
        return -1;
    }
    if (ag)
        a->aggregation = !strcmp(ag, "mis2") ? SPMV_AMG_AGG_MIS2 : !strcmp(ag, "standard") ? SPMV_AMG_AGG_STANDARD
                                                                                              : SPMV_AMG_AGG_AUTO;
    return 0;
}

/* type, precision and the numbers of every type. */
static int scalar_options(request *r, const json_t *o, spmv_precond_options *out)
{
    const char *type = json_string_value(json_object_get(o, "type"));
    spmv_precond_type t;
    if (!type || spmv_precond_type_parse(type, &t) != SPMV_OK || t == SPMV_PRECOND_NONE) {
        api_error(r, 400, "invalid_parameter", "preconditioner `type` must be one of jacobi, block_jacobi, chebyshev, "
                  "amg, ic0, ilu0");
        return -1;
    }
    spmv_precond_defaults(out, t);
    const char *prec = json_string_value(json_object_get(o, "precision"));
    if (json_object_get(o, "precision") && (!prec || (strcmp(prec, "float32") && strcmp(prec, "float64")))) {
        api_error(r, 400, "invalid_parameter", "preconditioner `precision` must be \"float32\" or \"float64\"");
        return -1;
    }
    out->float32 = prec && strcmp(prec, "float32") == 0;
    spmv_amg_options *a = &out->amg;
    const json_t *strength = json_object_get(o, "strength");
    if (strength && (!json_is_number(strength) || !(json_number_value(strength) >= 0 && json_number_value(strength) < 1))) {
        api_error(r, 400, "invalid_parameter", "preconditioner `strength` must be a number in [0, 1)");
        return -1;
    }
    if (strength)
        a->strength = json_number_value(strength);
    if (amg_choices(r, o, a))
        return -1;
    int32_t degree = t == SPMV_PRECOND_AMG ? a->degree : out->degree;
    if (int_option(r, o, "block_size", 1, 64, &out->block_size) || int_option(r, o, "degree", 1, 10, &degree) ||
        int_option(r, o, "max_levels", 1, 32, &a->max_levels) || int_option(r, o, "max_coarse", 1, 100000, &a->max_coarse) ||
        int_option(r, o, "presmooth", 0, 16, &a->presmooth) || int_option(r, o, "postsmooth", 0, 16, &a->postsmooth))
        return -1;
    out->degree = degree;
    a->degree = degree;
    a->block_size = out->block_size;
    return 0;
}

/* near_nullspace: inline k columns, {"vector": id}, or "rigid_body" with
 * the nodes' coordinates (inline or a vector) in `coordinates`. */
static int nullspace_option(request *r, const json_t *o, matrix *m, worker *w, spmv_precond_options *out,
                            precond_source *src)
{
    const json_t *ns = json_object_get(o, "near_nullspace"), *xyz = json_object_get(o, "coordinates");
    bool rigid = json_is_string(ns) && strcmp(json_string_value(ns), "rigid_body") == 0;
    if (!ns && !xyz)
        return 0;
    if (out->type != SPMV_PRECOND_AMG || (xyz && !rigid) || (rigid && !xyz)) {
        api_error(r, 400, "invalid_parameter", "%s", out->type != SPMV_PRECOND_AMG
                  ? "`near_nullspace` and `coordinates` are amg's" : rigid
                  ? "`near_nullspace`: \"rigid_body\" needs `coordinates` (x y z of each node, interleaved)"
                  : "`coordinates` go with \"near_nullspace\": \"rigid_body\"");
        return -1;
    }
    if (rigid && (out->block_size != 3 || m->host.rows % 3)) {
        api_error(r, 400, "invalid_parameter", "rigid-body modes are 3-D elasticity's: `block_size` 3 and rows a "
                  "multiple of 3 (%d rows)", m->host.rows);
        return -1;
    }
    const json_t *vals = rigid ? xyz : ns;
    const char *what = rigid ? "coordinates" : "near_nullspace";
    char id[40];
    api_fail f = {0};
    int ref = api_vector_ref(vals, what, id, &f);
    int64_t len;
    src->rigid = rigid;
    if (ref == 0 && api_values_from_json(vals, m->host.rows, SPMV_FLOAT64, what, (void **)&src->values, &len, &src->k,
                                         &f) == 0 && (!rigid || src->k == 1))
        return 0;
    if (ref == 0 && !f.status)
        api_error(r, 400, "shape_mismatch", "`coordinates` is one column of %d values (x y z of each node)",
                  m->host.rows);
    if (ref <= 0) {
        if (f.status)
            api_error(r, f.status, f.code, "%s", f.message);
        return -1;
    }
    src->v = vstore_get(r->d->vectors, id);
    const spmv_vec *v = src->v ? &src->v->v : NULL;
    if (!v || v->n != m->host.rows || (rigid && v->k != 1) ||
        (v->device == SPMV_DEVICE_GPU && src->v->w != w)) {
        api_error(r, v ? 400 : 404, v ? "shape_mismatch" : "vector_not_found", v ? "`%s`: vector %s must have %d rows%s"
                  " and live on the host or %s" : "`%s`: no vector %s", what, id, m->host.rows,
                  rigid ? ", one column" : "", w->name);
        return -1;
    }
    return 0;
}

int api_precond_options(request *r, const json_t *o, matrix *m, worker *w, const char *const *extra,
                        spmv_precond_options *out, precond_source *src)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        if (!listed(key, option_keys) && !listed(key, extra)) {
            api_error(r, 400, "invalid_parameter", "unknown preconditioner option `%s` (docs/api.md, "
                      "\"Preconditioners\")", key);
            return -1;
        }
    }
    if (scalar_options(r, o, out) || nullspace_option(r, o, m, w, out, src))
        return -1;
    if (m->host.rows % out->block_size) {
        api_error(r, 400, "invalid_parameter", "`block_size` %d does not divide the matrix's %d rows",
                  out->block_size, m->host.rows);
        return -1;
    }
    spmv_error err = {0};
    if (out->type == SPMV_PRECOND_AMG && spmv_amg_check_options(&out->amg, m->host.rows, &err) != SPMV_OK) {
        api_error(r, 400, "invalid_parameter", "%s", err.message);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ routes */

typedef struct precond_req {
    precond_task t;        /* first: the task's finish finds the request */
    request *r;
    worker *w;
} precond_req;

static precond_req *P(request *r) { return r->state; }

static void post_begin(request *r)
{
    precond_req *q = calloc(1, sizeof *q);
    if (!q) {
        api_error(r, 500, "out_of_memory", "out of memory");
        return;
    }
    q->r = r;
    r->state = q;
    q->t.m = api_get_matrix(r);
    if (!q->t.m || api_refuse_sharded(r, q->t.m, "a preconditioner"))
        return;
    api_check_content_length(r, atomic_load(&r->d->limits.max_body_bytes), "max_body_bytes");
}

static void post_body(request *r, const char *data, size_t size)
{
    api_body_collect(r, data, size, atomic_load(&r->d->limits.max_body_bytes), "max_body_bytes");
}

static void post_finish(task *base, int status)
{
    precond_req *q = (precond_req *)base;
    if (status != SPMV_OK && q->t.rc == SPMV_OK) {
        q->t.rc = status;
        spmv_error_set(&q->t.err, status, 0, "the daemon is shutting down");
    }
    api_task_done(q->r);
}

/* The worker of `device` (default: the matrix's). */
static worker *build_worker(request *r, const json_t *o, matrix *m)
{
    const json_t *dev = json_object_get(o, "device");
    if (!dev)
        return autotune_worker(r->d, m);
    const char *why = "no such device";
    worker *w = json_is_string(dev) ? spmvd_worker_named(r->d, json_string_value(dev), &why) : NULL;
    if (!w)
        api_error(r, 400, "invalid_parameter", "`device` %s: %s", json_is_string(dev) ? json_string_value(dev) : "",
                  json_is_string(dev) ? why : "must be \"cpu\" or \"gpuN\"");
    return w;
}

static void post_end(request *r)
{
    static const char *const extra[] = {"device", NULL};
    precond_req *q = P(r);
    if (!q || !q->t.m || !api_json_body_fits(r))
        return;
    json_error_t jerr;
    json_t *o = json_loadb(r->body ? r->body : "", r->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(o))
        api_error(r, 400, "invalid_json", "body must be a JSON object%s%s", o ? "" : ": ", o ? "" : jerr.text);
    else if ((q->w = build_worker(r, o, q->t.m)) &&
             api_precond_options(r, o, q->t.m, q->w, extra, &q->t.o, &q->t.src) == 0) {
        q->t.base.run = precond_task_run;
        q->t.base.finish = post_finish;
        api_submit_and_suspend(r, q->w, &q->t.base);
    }
    json_decref(o);
}

static void post_answer(request *r)
{
    precond_req *q = P(r);
    if (q->t.rc != SPMV_OK) {
        api_error_spmv(r, q->t.rc, &q->t.err);
        return;
    }
    char loc[96];
    snprintf(loc, sizeof loc, "/v1/preconditioners/%s", q->t.r->id);
    api_header(r, MHD_HTTP_HEADER_LOCATION, loc);
    api_json(r, 201, rprecond_json(q->t.r, q->t.m));
}

static void post_cleanup(request *r)
{
    precond_req *q = P(r);
    if (q)
        precond_task_release(&q->t);
    free(q);
    r->state = NULL;
}

static void list_begin(request *r)
{
    matrix *m = api_get_matrix(r);
    rprecond **list;
    size_t n;
    if (!m)
        return;
    if (preconds_list(m, &list, &n) != SPMV_OK) {
        api_error(r, 500, "out_of_memory", "out of memory");
    } else {
        json_t *a = json_array();
        for (size_t i = 0; i < n; i++)
            json_array_append_new(a, rprecond_json(list[i], m));
        preconds_list_free(list, n);
        api_json(r, 200, json_pack("{s:I, s:o}", "count", (json_int_t)n, "preconditioners", a));
    }
    matrix_unref(m);
}

static void one_begin(request *r)
{
    matrix *m;
    rprecond *p = preconds_find(r->d->store, r->id, &m);
    spmv_error err = {0};
    if (!p)
        api_error(r, 404, "not_found", "no preconditioner %s (deleted, or its matrix was)", r->id);
    else if (strcmp(r->method, "DELETE") == 0 && preconds_remove(m, r->id, &err) != SPMV_OK)
        api_error(r, 404, "not_found", "%s", err.message);
    else if (strcmp(r->method, "DELETE") == 0)
        api_bytes(r, 204, NULL, NULL, 0);
    else
        api_json(r, 200, rprecond_json(p, m));
    rprecond_unref(p);
    matrix_unref(m);
}

const route_handlers api_preconds_get = {.begin = list_begin, .body_kind = API_BODY_NONE, .query = api_no_query};
const route_handlers api_preconds_post = {
    .begin = post_begin, .body = post_body, .end = post_end, .resumed = post_answer, .cleanup = post_cleanup,
    .accepts_body = true, .body_kind = API_BODY_JSON, .query = api_no_query,
};
const route_handlers api_precond_get = {.begin = one_begin, .body_kind = API_BODY_NONE, .query = api_no_query};
const route_handlers api_precond_delete = {.begin = one_begin, .body_kind = API_BODY_NONE, .query = api_no_query};
