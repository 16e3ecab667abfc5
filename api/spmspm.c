/* spmspm.c — POST /v1/matrices/{a}/spmspm: C = A*B with a stored B (docs/api.md, "SpMSpM").
 *
 * The body is JSON: {"b": "<id>", "kernel", "runs", "warmup", "store",
 * "verify", params...}. A's columns must equal B's rows (422 naming both
 * shapes otherwise) and the two must share a dtype (422). The kernel is an
 * SpMSpM one (op "spmspm" in GET /v1/kernels; an SpMV kernel is a 400);
 * a GPU kernel needs A on a GPU (409), B is copied to A's device for the
 * call when it is not there (daemon/worker_spmspm.c).
 *
 * Answers:
 *   "store": true   C becomes a new matrix, persisted like an upload and
 *                   resident where A is (A's GPU, or the host): 201,
 *                   Location, its descriptor plus "product" (kernel,
 *                   operands, statistics);
 *   otherwise       C as COO, 0-based, rows sorted by column: JSON
 *                   {"rows","cols","nnz","row":[...],"col":[...],"val":[...],
 *                   "kernel","a","b","device","params","stats",...}; with
 *                   Accept: application/octet-stream, nnz packed
 *                   little-endian triplets (int32 row, int32 col, value of
 *                   the dtype: 16 bytes each in float64, 12 in float32) and
 *                   everything else as JSON in the X-SpMV-Stats header.
 * Statistics are spmv's; GFLOPS count 2 flops per multiply-add done.
 *
 * As for spmv: the request is checked on the HTTP thread, the product runs
 * as a task on the kernel's worker, the answer is built on an HTTP thread
 * after the connection resumes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "api/decode.h"
#include "daemon/log.h"
#include "daemon/spmspm.h"

#define SPMSPM_BODY_MAX 65536

typedef struct spmspm_req {
    spmspm_task s;        /* what runs on the worker (daemon/spmspm.h) */
    request *r;
    bool binary;          /* C in the answer as packed triplets */
} spmspm_req;

static spmspm_req *T(request *r) { return r->state; }

static const char *const base_keys[] = {"b", "kernel", "runs", "warmup", "store", "verify", NULL};

/* ------------------------------------------------------------ decoding */

static bool known_key(const char *key)
{
    for (int i = 0; base_keys[i]; i++)
        if (strcmp(key, base_keys[i]) == 0)
            return true;
    for (int id = 0; id < SPMV_PARAM_COUNT; id++)
        if (strcmp(spmv_param_get((spmv_param_id)id)->name, key) == 0)
            return true;
    return false;
}

/* An integer field in [min, max], def when absent; -1 with an answer. */
static int int_field(request *r, const json_t *o, const char *key, int64_t def, int64_t min, int64_t max,
                     int32_t *out)
{
    json_t *v = json_object_get(o, key);
    int64_t x = def;
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
            api_error(r, 400, "invalid_request", "`%s` must be an integer in %lld..%lld", key, (long long)min,
                      (long long)max);
            return -1;
        }
        x = json_integer_value(v);
    }
    *out = (int32_t)x;
    return 0;
}

static int bool_field(request *r, const json_t *o, const char *key, bool *out)
{
    json_t *v = json_object_get(o, key);
    *out = false;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v)) {
        api_error(r, 400, "invalid_request", "`%s` must be true or false", key);
        return -1;
    }
    *out = json_is_true(v);
    return 0;
}

static int params_field(request *r, const json_t *o, spmv_params *p)
{
    memset(p, 0, sizeof *p);
    for (int id = 0; id < SPMV_PARAM_COUNT; id++) {
        const spmv_param_desc *pd = spmv_param_get((spmv_param_id)id);
        if (int_field(r, o, pd->name, 0, pd->min, pd->max, &p->v[id]))
            return -1;
    }
    return 0;
}

/* B by id: a well-formed id of a stored matrix. */
static int pick_b(request *r, const json_t *o)
{
    spmspm_req *t = T(r);
    const char *id = json_string_value(json_object_get(o, "b"));
    if (!id) {
        api_error(r, 400, "invalid_request", "`b` (the id or name of the stored matrix B) is missing or not a string");
        return -1;
    }
    if (!(t->s.b = api_matrix_ref(r, id, "`b`")))
        return -1;
    if (api_refuse_sharded(r, t->s.b, "SpMSpM"))
        return -1;
    return 0;
}

static int check_operands(request *r)
{
    spmspm_req *t = T(r);
    spmv_error err = {0};
    int st = spmv_spmspm_check(&t->s.a->host.csr, &t->s.b->host.csr, &err);
    if (st != SPMV_OK) {
        api_error(r, 422, st == SPMV_ERR_SHAPE ? "shape_mismatch" : st == SPMV_ERR_LIMIT ? "too_large" : "dtype_mismatch",
                  "%s", err.message);
        return -1;
    }
    return 0;
}

static int pick_kernel(request *r, const char *name)
{
    spmspm_req *t = T(r);
    if (!name)
        name = t->s.a->dev ? "gpu.spmspm.block_row" : "cpu.spmspm.omp";
    t->s.k = spmv_kernel_find(name);
    return api_kernel_check(r, t->s.k, name, SPMV_OP_SPMSPM, t->s.a, "A");
}

/* The cumulative limits of a product, before it runs: its multiply-adds
 * (one pass over A) times every run asked for against max_request_work,
 * and the most entries C can have (no more than the multiply-adds, nor
 * than rows x cols) against max_nnz, so a pair of small matrices whose
 * product is dense cannot make the daemon allocate gigabytes. */
static int check_size(request *r)
{
    spmspm_req *t = T(r);
    api_fail f = {0};
    int64_t madds = spmv_spmspm_madds(&t->s.a->host.csr, &t->s.b->host.csr);
    int64_t cells = (int64_t)t->s.a->host.rows * t->s.b->host.cols;
    int64_t c_max = madds < cells ? madds : cells;
    spmv_error err = {0};
    if (api_check_work(madds, t->s.a->host.rows, (int64_t)t->s.runs + t->s.warmup + (t->s.verify ? 1 : 0),
                       atomic_load(&r->d->limits.max_request_work), &f) != 0) {
        api_error(r, f.status, f.code, "%s", f.message);
        return -1;
    }
    /* json: C's entries go into the answer as JSON (not binary, not stored) */
    if (spmspm_admit(&t->s, c_max, !t->binary && !t->s.store, &err) != SPMV_OK) {
        api_error(r, 422, "too_large", "%s", err.message);
        return -1;
    }
    return 0;
}

static int decode(request *r, const json_t *o)
{
    spmspm_req *t = T(r);
    spmv_params given;
    spmv_error err = {0};
    const char *key;
    json_t *v;
    int64_t max = atomic_load(&r->d->limits.max_runs);
    json_object_foreach((json_t *)o, key, v) {
        if (!known_key(key)) {
            api_error(r, 400, "invalid_request", "unknown field `%s`", key);
            return -1;
        }
    }
    json_t *kn = json_object_get(o, "kernel");
    if (kn && !json_is_string(kn)) {
        api_error(r, 400, "invalid_request", "`kernel` must be a string");
        return -1;
    }
    if (pick_b(r, o) || check_operands(r) || pick_kernel(r, json_string_value(kn)) ||
        int_field(r, o, "runs", 1, 1, max, &t->s.runs) || int_field(r, o, "warmup", 0, 0, max, &t->s.warmup) ||
        bool_field(r, o, "store", &t->s.store) || bool_field(r, o, "verify", &t->s.verify) || params_field(r, o, &given))
        return -1;
    if (spmv_params_resolve(t->s.k, &given, &t->s.p, &err) != SPMV_OK) {
        api_error(r, 400, "invalid_parameter", "%s", err.message);
        return -1;
    }
    return check_size(r);
}

static void spmspm_finish(task *base, int status)
{
    spmspm_req *t = (spmspm_req *)base;
    api_task_status(status, &t->s.rc, &t->s.err);
    api_task_done(t->r);
}

/* ------------------------------------------------------------ answering */


/* Everything of the answer but C's entries. */
static json_t *result_json(const spmspm_req *t)
{
    json_t *params = api_params_json(t->s.k, &t->s.p, NULL);
    const run_report *rep = &t->s.report;
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:I}", "kernel", t->s.k->name, "a", t->s.a->meta.id,
                          "b", t->s.b->meta.id, "device", rep->worker_name, "dtype", matrix_dtype_name(t->s.a),
                          "params", params, "stats", api_stats_json(&rep->st), "queue_ms", api_json_real(rep->queue_ms),
                          "madds", (json_int_t)spmv_spmspm_madds(&t->s.a->host.csr, &t->s.b->host.csr));
    if (o && t->s.verify)
        json_object_set_new(o, "verify", json_pack("{s:o, s:s}", "max_rel_err", api_json_real(rep->max_rel_err),
                                                   "reference", "cpu.spmspm.serial"));
    return o;
}

/* {"rows","cols","nnz","row":[...],"col":[...],"val":[...], <result>}
 * written straight out (C can be millions of entries). */
static char *json_answer(const spmspm_req *t, size_t *len)
{
    const spmv_csr *c = &t->s.c;
    json_t *rest = result_json(t);
    size_t rlen = 0;
    char *rtext = rest ? api_json_dump(rest, &rlen) : NULL, *text = NULL;
    json_decref(rest);
    FILE *f = rtext ? open_memstream(&text, len) : NULL;
    if (!f) {
        free(rtext);
        return NULL;
    }
    fprintf(f, "{\"rows\":%d,\"cols\":%d,\"nnz\":%lld,\"row\":[", c->rows, c->cols, (long long)c->nnz);
    for (int32_t i = 0; i < c->rows; i++)
        for (int32_t p = c->row_ptr[i]; p < c->row_ptr[i + 1]; p++)
            fprintf(f, p ? ",%d" : "%d", i);
    fputs("],\"col\":[", f);
    for (int64_t p = 0; p < c->nnz; p++)
        fprintf(f, p ? ",%d" : "%d", c->col[p]);
    fputs("],\"val\":", f);
    api_json_write_vector(f, c->dtype, c->val, (int32_t)c->nnz);
    fputc(',', f);
    fwrite(rtext + 1, 1, rlen - 1, f); /* the object without its '{' */
    fputc('\n', f);
    fclose(f);
    free(rtext);
    return text;
}

/* nnz packed triplets: int32 row, int32 col, value (little-endian). */
static void *binary_answer(const spmspm_req *t, size_t *len)
{
    const spmv_csr *c = &t->s.c;
    size_t vs = spmv_dtype_size(c->dtype), rec = 8 + vs;
    char *buf = malloc((size_t)c->nnz * rec + 1), *q = buf;
    if (!buf)
        return NULL;
    for (int32_t i = 0; i < c->rows; i++)
        for (int32_t p = c->row_ptr[i]; p < c->row_ptr[i + 1]; p++, q += rec) {
            memcpy(q, &i, 4);
            memcpy(q + 4, &c->col[p], 4);
            memcpy(q + 8, (const char *)c->val + (size_t)p * vs, vs);
        }
    *len = (size_t)c->nnz * rec;
    return buf;
}

static void answer_stored(request *r)
{
    spmspm_req *t = T(r);
    spmv_error err = {0};
    char loc[64];
    int rc = store_insert(r->d->store, t->s.out, &err);
    if (rc != SPMV_OK) {
        log_error("spmspm: %s", err.message);
        api_error_spmv(r, rc, &err);
        return;
    }
    json_t *o = api_matrix_json(r->d, t->s.out);
    if (o)
        json_object_set_new(o, "product", result_json(t));
    snprintf(loc, sizeof loc, "/v1/matrices/%s", t->s.out->meta.id);
    api_json(r, 201, o);
    api_header(r, MHD_HTTP_HEADER_LOCATION, loc);
}

static void answer(request *r)
{
    spmspm_req *t = T(r);
    size_t len = 0;
    if (t->s.rc != SPMV_OK) {
        api_error_task(r, t->s.rc, &t->s.err);
        return;
    }
    if (t->s.store) {
        answer_stored(r);
        return;
    }
    if (t->binary) {
        json_t *hdr = result_json(t);
        if (hdr)
            json_object_set_new(hdr, "shape", json_pack("{s:i, s:i, s:I}", "rows", t->s.c.rows, "cols", t->s.c.cols,
                                                         "nnz", (json_int_t)t->s.c.nnz));
        char *htext = hdr ? api_json_dump(hdr, NULL) : NULL;
        void *body = binary_answer(t, &len);
        json_decref(hdr);
        if (!body || !htext) {
            free(body);
            api_error(r, 500, "out_of_memory", "out of memory writing the answer");
        } else {
            api_bytes(r, 200, "application/octet-stream", body, len);
            api_header(r, "X-SpMV-Stats", htext);
        }
        free(htext);
        return;
    }
    char *text = json_answer(t, &len);
    api_json_text(r, text, len);
}

/* ------------------------------------------------------------ handlers */

static void spmspm_begin(request *r)
{
    const char *accept = api_header_in(r, MHD_HTTP_HEADER_ACCEPT);
    spmspm_req *t = calloc(1, sizeof *t);
    if (!t) {
        api_error(r, 500, "out_of_memory", "out of memory");
        return;
    }
    t->s.d = r->d;
    t->binary = accept && strstr(accept, "application/octet-stream") != NULL;
    r->state = t;
    if (!(t->s.a = api_get_matrix(r)) || api_refuse_sharded(r, t->s.a, "SpMSpM"))
        return;
    api_check_content_length(r, SPMSPM_BODY_MAX, "an SpMSpM body's fixed 64 KiB");
}

static void spmspm_body(request *r, const char *data, size_t size)
{
    api_body_collect(r, data, size, SPMSPM_BODY_MAX, "an SpMSpM body's fixed 64 KiB");
}

static void spmspm_end(request *r)
{
    spmspm_req *t = T(r);
    json_error_t jerr;
    json_t *o = json_loadb(r->body ? r->body : "", r->body_len, JSON_REJECT_DUPLICATES, &jerr);
    int rc = -1;
    if (!o)
        api_error(r, 400, "invalid_json", "body is not valid JSON: line %d column %d: %s", jerr.line, jerr.column,
                  jerr.text);
    else if (!json_is_object(o))
        api_error(r, 400, "invalid_json", "body must be a JSON object");
    else
        rc = decode(r, o);
    json_decref(o);
    if (rc != 0)
        return;
    worker *w = spmvd_worker_for(r->d, t->s.a, t->s.k);
    t->s.base.run = spmspm_run;
    t->s.base.finish = spmspm_finish;
    t->r = r;
    api_submit_and_suspend(r, w, &t->s.base);
}

static void spmspm_cleanup(request *r)
{
    spmspm_req *t = T(r);
    if (!t)
        return;
    spmspm_release(&t->s);
    free(t);
    r->state = NULL;
}

const route_handlers api_spmspm_post = {
    .begin = spmspm_begin,
    .body = spmspm_body,
    .end = spmspm_end,
    .resumed = answer,
    .cleanup = spmspm_cleanup,
    .accepts_body = true,
    .body_kind = API_BODY_JSON,
    .query = api_no_query,
};
