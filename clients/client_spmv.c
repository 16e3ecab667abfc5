/* client_spmv.c — the products of a matrix: POST /v1/matrices/{id}/spmv,
 * /spmspm and /bench (docs/api.md).
 *
 * spmv_client_multiply() sends x and takes y back as binary;
 * spmv_client_spmv() and _spmv_shm() take each operand as a resident
 * vector, inline, or in a shared-memory region (client_shm.c checks the
 * names), and may scale (y = alpha A x + beta y). Their options become
 * the query; the timings come back in the X-SpMV-Stats header.
 * spmv_client_spmspm() sends a JSON body and reads C as COO, or the
 * stored product's descriptor; spmv_client_bench_start() starts a job
 * that client_jobs.c follows. The handle's statistic (spmv_client_set_stat)
 * goes with every product and bench as `stat`.
 */
#include "client_internal.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void parse_stats(const json_t *s, spmv_client_stats *st)
{
    static const spmvc_num_field nums[] = {
        SPMVC_NUM(spmv_client_stats, mean_ms), SPMVC_NUM(spmv_client_stats, stddev_ms),
        SPMVC_NUM(spmv_client_stats, min_ms),  SPMVC_NUM(spmv_client_stats, median_ms),
        SPMVC_NUM(spmv_client_stats, max_ms),  SPMVC_NUM(spmv_client_stats, gflops),
        SPMVC_NUM(spmv_client_stats, gbps)};
    int64_t n;
    memset(st, 0, sizeof *st);
    if (spmvc_json_count(json_object_get(s, "runs"), INT_MAX, &n)) st->runs = (int)n;
    if (spmvc_json_count(json_object_get(s, "warmup"), INT_MAX, &n)) st->warmup = (int)n;
    spmvc_json_nums(s, nums, sizeof nums / sizeof *nums, st);
}

/* ------------------------------------------------------------------ spmv */

/* True when every "key=value" kernel parameter has a key and its '='. */
static bool params_ok(const char *const *params)
{
    for (; params && *params; params++) {
        const char *eq = strchr(*params, '=');
        if (!eq || eq == *params)
            return false;
    }
    return true;
}

spmv_client_status spmv_client_set_stat(spmv_client *h, const char *stat)
{
    if (!h) return SPMV_CLIENT_ERR_INVALID;
    spmvc_clear_error(h);
    if (stat && *stat && strcmp(stat, "mean") != 0 && strcmp(stat, "median") != 0)
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "stat must be \"median\" or \"mean\", not \"%.32s\"", stat);
    snprintf(h->stat, sizeof h->stat, "%s", stat ? stat : "");
    return SPMV_CLIENT_OK;
}

/* The spmv options into the request's query: the handle's stat, kernel,
 * runs, warmup, verify and the kernel parameters. */
static spmv_client_status spmv_query(spmv_client *h, const spmv_client_spmv_options *o, request *req)
{
    if (h->stat[0])
        spmvc_query_add(h, req, "stat", h->stat);
    if (!o)
        return SPMV_CLIENT_OK;
    if (o->runs < 0)
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "runs must not be negative");
    if (!params_ok(o->params))
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "a kernel parameter is not of the form key=value");
    if (o->kernel) spmvc_query_add(h, req, "kernel", o->kernel);
    if (o->runs) spmvc_query_add_int(h, req, "runs", o->runs);
    if (o->warmup) spmvc_query_add_int(h, req, "warmup", o->warmup < 0 ? 0 : o->warmup);
    if (o->verify) spmvc_query_add(h, req, "verify", "true");
    for (const char *const *p = o->params; p && *p; p++) {
        const char *eq = strchr(*p, '=');
        char *key = strndup(*p, (size_t)(eq - *p));
        if (key)
            spmvc_query_add(h, req, key, eq + 1);
        else
            req->nomem = true;
        free(key);
    }
    return SPMV_CLIENT_OK;
}

/* The X-SpMV-Stats header: either the stats object itself or an object
 * holding "stats", "kernel", "queue_ms" and "verify". */
static spmv_client_status parse_stats_header(spmv_client *h, const char *text, spmv_client_spmv_result *res)
{
    json_t *root = text ? json_loads(text, 0, NULL) : NULL;
    if (!json_is_object(root)) {
        json_decref(root);
        return spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the X-SpMV-Stats header is %s",
                          text ? "not a JSON object" : "missing");
    }
    const json_t *stats = json_object_get(root, "stats");
    parse_stats(stats ? stats : root, &res->stats);
    spmvc_copy_str(res->kernel, sizeof res->kernel, json_object_get(root, "kernel"));
    res->queue_ms = spmvc_json_num(json_object_get(root, "queue_ms"), NAN);
    const json_t *verify = json_object_get(root, "verify");
    res->max_rel_err = spmvc_json_num(json_object_get(verify, "max_rel_err"), NAN);
    json_decref(root);
    return SPMV_CLIENT_OK;
}

/* A fresh spmv result: zero, with what was not measured NaN. */
static void spmv_result_start(spmv_client_spmv_result *res)
{
    memset(res, 0, sizeof *res);
    res->max_rel_err = res->queue_ms = NAN;
}

spmv_client_status spmv_client_multiply(spmv_client *h, const char *id, spmv_client_dtype dtype, const void *x,
                                        size_t nx, void *y, size_t ny, const spmv_client_spmv_options *opts,
                                        spmv_client_spmv_result *res)
{
    spmv_client_spmv_result local;
    spmv_client_status st;
    size_t esize = dtype == SPMV_CLIENT_FLOAT32 ? 4 : 8;

    if (!h) return SPMV_CLIENT_ERR_INVALID;
    spmvc_clear_error(h);
    if ((st = spmvc_check_id(h, id, "matrix")) != SPMV_CLIENT_OK) return st;
    if ((dtype != SPMV_CLIENT_FLOAT64 && dtype != SPMV_CLIENT_FLOAT32) || (!x && nx) || (!y && ny))
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "bad dtype or a NULL vector");
    if (nx > SIZE_MAX / esize || ny > SIZE_MAX / esize)
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "vector length overflows size_t");
    if (!res) res = &local;
    spmv_result_start(res);
    request req = {.method = "POST", .collection = "matrices", .id = id, .suffix = "/spmv",
                   .content_type = "application/octet-stream", .body = nx ? x : "", .body_len = nx * esize,
                   .sink = y, .sink_cap = ny * esize};
    if ((st = spmv_query(h, opts, &req)) != SPMV_CLIENT_OK)
        return st;
    response r;
    st = spmvc_request(h, &req, &r);
    res->request_ms = r.total_ms;
    if (st == SPMV_CLIENT_OK && r.sink_len != ny * esize)
        st = spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL, "y has %zu bytes, expected %zu (%zu values of %zu bytes)",
                        r.sink_len, ny * esize, ny, esize);
    else if (st == SPMV_CLIENT_OK)
        st = parse_stats_header(h, r.stats_header, res);
    spmvc_response_clear(&r);
    return st;
}

/* ------------------------------------------- spmv with resident operands */

/* Everything spmv_client_spmv() and _spmv_shm() refuse before sending;
 * xs / ys (may be NULL) are the operands in a region. */
static spmv_client_status operands_ok(spmv_client *h, const spmv_client_operands *a, const spmv_client_shm_ref *xs,
                                      const spmv_client_shm_ref *ys)
{
    int64_t k = a->k ? a->k : 1;
    int xways = (a->x_vector != NULL) + (a->x != NULL) + (xs != NULL);
    int yways = (a->y_vector != NULL) + (a->y != NULL) + (ys != NULL);
    if (!spmvc_dtype_ok(a->dtype))
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "dtype must be SPMV_CLIENT_FLOAT64 or _FLOAT32");
    if (a->k < 0)
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "k must be 1 or more (0: 1), not %lld", (long long)a->k);
    if (a->op && a->op != 'n' && a->op != 't')
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "op must be 'n' or 't'");
    if (xways != 1)
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "give x one way: as a vector id (x_vector), inline (x)%s, not %s",
                          xs || ys ? " or in a region" : "", xways ? "several" : "none");
    if (yways != 1)
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID,
                          "give y one way: as a vector id (y_vector), a buffer (y)%s, not %s",
                          xs || ys ? " or in a region" : "", yways ? "several" : "none");
    if ((a->x_vector && !spmvc_id_ok(a->x_vector)) || (a->y_vector && !spmvc_id_ok(a->y_vector)))
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "vector ids must be 1 to 63 characters");
    if ((xs && !spmvc_shm_name_ok(xs->name)) || (ys && !spmvc_shm_name_ok(ys->name)))
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "region names are 1 to 200 characters of A-Z a-z 0-9 _ . -, "
                          "not starting with a dot");
    if (xs && xs->offset > INT64_MAX)
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "x_offset %llu is out of range", (unsigned long long)xs->offset);
    if (ys && ys->offset > INT64_MAX)
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "y_offset %llu is out of range", (unsigned long long)ys->offset);
    if (a->scale && a->beta != 0 && !a->y_vector)
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "beta = %g needs y as a resident vector (y_vector)", a->beta);
    if (a->scale && !(isfinite(a->alpha) && isfinite(a->beta)))
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "alpha and beta must be finite");
    if ((a->x && (a->nx == 0 || a->nx % (uint64_t)k)) || (a->y && (a->ny == 0 || a->ny % (uint64_t)k)))
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID,
                          "inline x (%zu values) and y (%zu) must be non-empty multiples of k = %lld",
                          a->nx, a->ny, (long long)k);
    if (a->nx > SIZE_MAX / 8 || a->ny > SIZE_MAX / 8)
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "vector length overflows size_t");
    return SPMV_CLIENT_OK;
}

/* The query of a product: dtype of an inline x, k, op, where x and y are
 * (vector ids, regions and offsets), alpha and beta. */
static void product_query(spmv_client *h, const spmv_client_operands *a, const spmv_client_shm_ref *xs,
                          const spmv_client_shm_ref *ys, request *req)
{
    if (a->x) spmvc_query_add(h, req, "dtype", spmvc_dtype_text(a->dtype));
    if (a->k) spmvc_query_add_int(h, req, "k", (long)a->k);
    if (a->op) spmvc_query_add(h, req, "op", a->op == 't' ? "t" : "n");
    if (a->x_vector) spmvc_query_add(h, req, "x", a->x_vector);
    if (a->y_vector) spmvc_query_add(h, req, "y", a->y_vector);
    if (xs) {
        spmvc_query_add(h, req, "x_shm", xs->name);
        spmvc_query_add_u64(h, req, "x_offset", xs->offset);
    }
    if (ys) {
        spmvc_query_add(h, req, "y_shm", ys->name);
        spmvc_query_add_u64(h, req, "y_offset", ys->offset);
    }
    if (a->scale) {
        spmvc_query_add_double(h, req, "alpha", a->alpha);
        spmvc_query_add_double(h, req, "beta", a->beta);
    }
}

/* The statistics of a product whose y did not come back inline: from
 * X-SpMV-Stats, or from a JSON answer body (y in a region may be answered
 * either way). */
static spmv_client_status product_stats(spmv_client *h, const response *r, spmv_client_product_result *res)
{
    const char *text = r->stats_header;
    if (!text && r->body.len && r->body.data[0] == '{')
        text = r->body.data;
    spmv_client_status st = parse_stats_header(h, text, &res->spmv);
    if (st == SPMV_CLIENT_OK) {
        json_t *root = json_loads(text, 0, NULL);
        res->axpby_ms = spmvc_json_num(json_object_get(root, "axpby_ms"), NAN);
        json_decref(root);
    }
    return st;
}

/* What a product answered: y inline of the length asked for, or (y on the
 * daemon's side) nothing but the statistics. */
static spmv_client_status product_answer(spmv_client *h, const response *r, const spmv_client_operands *a,
                                         const spmv_client_shm_ref *ys, spmv_client_product_result *res)
{
    size_t esize = spmvc_dtype_size(a->dtype);
    if (a->y && r->sink_len != a->ny * esize)
        return spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL, "y has %zu bytes, expected %zu", r->sink_len, a->ny * esize);
    /* y went into a vector (an empty answer) or a region (empty, or the JSON statistics) */
    if (!a->y && r->body.len && !(ys && r->body.data[0] == '{'))
        return spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL, "y went to the daemon's side, yet the answer has %zu bytes",
                          r->body.len);
    return product_stats(h, r, res);
}

static spmv_client_status product(spmv_client *h, const char *id, const spmv_client_operands *a,
                                  const spmv_client_shm_ref *xs, const spmv_client_shm_ref *ys,
                                  const spmv_client_spmv_options *opts, spmv_client_product_result *res)
{
    spmv_client_product_result local;
    spmv_client_status st;

    if (!h || !a) return SPMV_CLIENT_ERR_INVALID;
    spmvc_clear_error(h);
    if ((st = spmvc_check_id(h, id, "matrix")) != SPMV_CLIENT_OK) return st;
    if ((st = operands_ok(h, a, xs, ys)) != SPMV_CLIENT_OK) return st;
    if (!res) res = &local;
    memset(res, 0, sizeof *res);
    res->spmv.max_rel_err = res->spmv.queue_ms = res->axpby_ms = NAN;
    size_t esize = spmvc_dtype_size(a->dtype);
    request req = {.method = "POST", .collection = "matrices", .id = id, .suffix = "/spmv",
                   .content_type = "application/octet-stream", .body = a->x ? a->x : "",
                   .body_len = a->x ? a->nx * esize : 0, .accept = "application/octet-stream", .sink = a->y,
                   .sink_cap = a->y ? a->ny * esize : 0};
    if ((st = spmv_query(h, opts, &req)) != SPMV_CLIENT_OK)
        return st;
    product_query(h, a, xs, ys, &req);
    response r;
    st = spmvc_request(h, &req, &r);
    res->spmv.request_ms = r.total_ms;
    if (st == SPMV_CLIENT_OK)
        st = product_answer(h, &r, a, ys, res);
    spmvc_response_clear(&r);
    return st;
}

spmv_client_status spmv_client_spmv(spmv_client *h, const char *id, const spmv_client_operands *a,
                                    const spmv_client_spmv_options *opts, spmv_client_product_result *res)
{
    return product(h, id, a, NULL, NULL, opts, res);
}

spmv_client_status spmv_client_spmv_shm(spmv_client *h, const char *id, const spmv_client_operands *a,
                                        const spmv_client_shm_ref *x, const spmv_client_shm_ref *y,
                                        const spmv_client_spmv_options *opts, spmv_client_product_result *res)
{
    if (h && !x && !y) {
        spmvc_clear_error(h);
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "spmv_client_spmv_shm needs x or y in a region");
    }
    return product(h, id, a, x, y, opts, res);
}

/* ---------------------------------------------------------------- spmspm */

/* The spmspm body: {"b", "kernel", "runs", "warmup", "verify", "store",
 * params...}; false when a parameter is not "key=integer". */
static bool spmspm_body(request *req, const char *b, const spmv_client_spmspm_options *o)
{
    spmvc_body_set(req, "b", json_string(b));
    if (!o)
        return true;
    if (o->kernel) spmvc_body_set(req, "kernel", json_string(o->kernel));
    if (o->runs) spmvc_body_set(req, "runs", json_integer(o->runs));
    if (o->warmup) spmvc_body_set(req, "warmup", json_integer(o->warmup));
    if (o->verify) spmvc_body_set(req, "verify", json_true());
    if (o->store) spmvc_body_set(req, "store", json_true());
    for (const char *const *p = o->params; p && *p; p++) {
        const char *eq = strchr(*p, '=');
        char key[64], *end;
        long long v = eq ? strtoll(eq + 1, &end, 10) : 0;
        if (!eq || eq == *p || (size_t)(eq - *p) >= sizeof key || !eq[1] || *end)
            return false;
        snprintf(key, sizeof key, "%.*s", (int)(eq - *p), *p);
        spmvc_body_set(req, key, json_integer(v));
    }
    return true;
}

static void spmspm_result(const json_t *o, spmv_client_spmspm_result *res)
{
    int64_t n;
    parse_stats(json_object_get(o, "stats"), &res->stats);
    spmvc_copy_str(res->kernel, sizeof res->kernel, json_object_get(o, "kernel"));
    res->queue_ms = spmvc_json_num(json_object_get(o, "queue_ms"), NAN);
    res->max_rel_err = spmvc_json_num(json_object_get(json_object_get(o, "verify"), "max_rel_err"), NAN);
    if (spmvc_json_count(json_object_get(o, "madds"), INT64_MAX, &n)) res->madds = n;
}

void spmv_client_coo_free(spmv_client_coo *c)
{
    if (!c)
        return;
    free(c->row);
    free(c->col);
    free(c->val);
    free(c);
}

/* An index array of n entries, each in [0, bound). */
static bool index_array(const json_t *a, int64_t n, int64_t bound, int32_t *out)
{
    if (!json_is_array(a) || (int64_t)json_array_size(a) != n)
        return false;
    for (int64_t i = 0; i < n; i++) {
        int64_t v;
        if (!spmvc_json_count(json_array_get(a, (size_t)i), bound - 1, &v) || !json_array_get(a, (size_t)i))
            return false;
        out[i] = (int32_t)v;
    }
    return true;
}

/* C from the answer's COO fields, every count and index range-checked. */
static spmv_client_status coo_from_json(spmv_client *h, const json_t *o, spmv_client_coo **out)
{
    int64_t rows, cols, nnz;
    spmv_client_coo *c = NULL;
    const json_t *val = json_object_get(o, "val");
    if (!spmvc_json_count(json_object_get(o, "rows"), INT32_MAX, &rows) ||
        !spmvc_json_count(json_object_get(o, "cols"), INT32_MAX, &cols) ||
        !spmvc_json_count(json_object_get(o, "nnz"), INT32_MAX, &nnz) || nnz > rows * cols || !json_is_array(val) ||
        (int64_t)json_array_size(val) != nnz)
        return spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL,
                          "the product's rows, cols, nnz or val are missing or out of range");
    if (!(c = calloc(1, sizeof *c)) || !(c->row = malloc((size_t)nnz * 4 + 4)) ||
        !(c->col = malloc((size_t)nnz * 4 + 4)) || !(c->val = malloc((size_t)nnz * 8 + 8))) {
        spmv_client_coo_free(c);
        return spmvc_fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory for a product of %lld entries", (long long)nnz);
    }
    c->rows = (int32_t)rows;
    c->cols = (int32_t)cols;
    c->nnz = nnz;
    if (!index_array(json_object_get(o, "row"), nnz, rows, c->row) ||
        !index_array(json_object_get(o, "col"), nnz, cols, c->col)) {
        spmv_client_coo_free(c);
        return spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the product's row or col array is malformed or out of range");
    }
    for (int64_t i = 0; i < nnz; i++)
        c->val[i] = spmvc_json_num(json_array_get(val, (size_t)i), NAN);
    *out = c;
    return SPMV_CLIENT_OK;
}

spmv_client_status spmv_client_spmspm(spmv_client *h, const char *a, const char *b,
                                      const spmv_client_spmspm_options *opts, spmv_client_coo **c,
                                      spmv_client_matrix **stored, spmv_client_spmspm_result *res)
{
    spmv_client_spmspm_result local;
    spmv_client_status st;

    if (c) *c = NULL;
    if (stored) *stored = NULL;
    if (!h) return SPMV_CLIENT_ERR_INVALID;
    spmvc_clear_error(h);
    if (!spmvc_id_ok(a) || !spmvc_id_ok(b))
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "matrix ids must be 1 to 63 characters");
    if (opts && (opts->runs < 0 || opts->warmup < 0))
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "runs and warmup must not be negative");
    if (!res) res = &local;
    memset(res, 0, sizeof *res);
    res->max_rel_err = res->queue_ms = NAN;
    request req = {.method = "POST", .collection = "matrices", .id = a, .suffix = "/spmspm", .want_json = true};
    if (!spmspm_body(&req, b, opts)) {
        json_decref(req.json);
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "a kernel parameter is not \"key=integer\"");
    }
    response r;
    st = spmvc_request(h, &req, &r);
    res->request_ms = r.total_ms;
    if (st == SPMV_CLIENT_OK && opts && opts->store) {
        spmspm_result(json_object_get(r.json, "product"), res);
        if (stored)
            st = spmvc_parse_item(h, &spmvc_matrix_kind, r.json, "", (void **)stored);
    } else if (st == SPMV_CLIENT_OK) {
        spmspm_result(r.json, res);
        if (c)
            st = coo_from_json(h, r.json, c);
    }
    spmvc_response_clear(&r);
    return st;
}

/* ----------------------------------------------------------------- bench */

spmv_client_status spmv_client_bench_start(spmv_client *h, const char *id, const spmv_client_bench_options *opts,
                                           char job_id[64])
{
    spmv_client_status st;

    if (!h || !job_id) return SPMV_CLIENT_ERR_INVALID;
    job_id[0] = '\0';
    spmvc_clear_error(h);
    if ((st = spmvc_check_id(h, id, "matrix")) != SPMV_CLIENT_OK) return st;
    if (opts && (opts->runs < 0 || opts->warmup < 0))
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "runs and warmup must not be negative");
    /* bench is always a job: no "async" needed (or accepted) */
    request req = {.method = "POST", .collection = "matrices", .id = id, .suffix = "/bench", .want_json = true};
    spmvc_body_start(&req);
    if (opts && opts->kernels) {
        json_t *arr = json_array();
        for (const char *const *k = opts->kernels; arr && *k; k++)
            if (json_array_append_new(arr, json_string(*k)) != 0)
                req.nomem = true;
        spmvc_body_set(&req, "kernels", arr);
    }
    if (opts && opts->runs) spmvc_body_set(&req, "runs", json_integer(opts->runs));
    if (opts && opts->warmup) spmvc_body_set(&req, "warmup", json_integer(opts->warmup));
    if (h->stat[0]) spmvc_body_set(&req, "stat", json_string(h->stat));
    response r;
    if ((st = spmvc_request(h, &req, &r)) == SPMV_CLIENT_OK)
        st = spmvc_take_job_id(h, &r, "bench", job_id, 64);
    spmvc_response_clear(&r);
    return st;
}

spmv_client_status spmv_client_bench_start_json(spmv_client *h, const char *id, const char *json, char job_id[64])
{
    spmv_client_status st;
    json_error_t e;

    if (!h || !job_id) return SPMV_CLIENT_ERR_INVALID;
    job_id[0] = '\0';
    spmvc_clear_error(h);
    if ((st = spmvc_check_id(h, id, "matrix")) != SPMV_CLIENT_OK) return st;
    json_t *body = json ? json_loads(json, JSON_REJECT_DUPLICATES, &e) : NULL;
    if (!json_is_object(body)) {
        const char *why = !json ? "NULL" : body ? "not an object" : e.text;
        json_decref(body);
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "the bench's body is no JSON object: %s", why);
    }
    request req = {.method = "POST", .collection = "matrices", .id = id, .suffix = "/bench", .want_json = true,
                   .json = body};
    if (h->stat[0] && !json_object_get(body, "stat")) spmvc_body_set(&req, "stat", json_string(h->stat));
    response r;
    if ((st = spmvc_request(h, &req, &r)) == SPMV_CLIENT_OK)
        st = spmvc_take_job_id(h, &r, "bench", job_id, 64);
    spmvc_response_clear(&r);
    return st;
}
