/* vectors.c — /v1/vectors: create, list, read, overwrite and delete resident
 * vectors (docs/api.md, "Resident vectors").
 *
 * A vector is made from a binary body, a JSON array (or k arrays), or a
 * fill ({"n", "fill": value | "random", "seed"}), on the device a `like`
 * matrix lives on (its length from the matrix), a named `device`, or by
 * default where uploads go (the GPU with most free memory, else the CPU).
 * Everything is decoded and checked here, on the HTTP thread, and the
 * quotas are reserved before the task runs (507 past max_vectors or
 * max_vector_bytes), so a refused request allocates nothing. The values
 * are allocated, written and read by a task on the owning worker, since a
 * GPU's memory belongs to its worker's thread: its body is
 * daemon/vector_tasks.c (vector_task_run), which also lists a new vector
 * and returns the reservation of a failed one.
 *
 * Values may also come from, or go to, a shared-memory region (daemon/shm.h):
 * {"values": {"shm": name, "offset": bytes}} and GET ?shm=&offset=; the
 * region is opened and checked here, copied on the worker.
 *
 * A vector made like a sharded matrix is distributed over the MPI ranks
 * (cluster/vectors.c): its task runs on the cluster worker; one column
 * only.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/decode.h"
#include "daemon/log.h"
#include "daemon/vector_tasks.h"

typedef struct vec_request {
    vector_task vt;       /* first: the task's finish finds the request */
    request *r;
    bool binary_out;      /* READ: the values as application/octet-stream */
} vec_request;

static vec_request *Q(request *r) { return r->state; }
static vector_task *T(request *r) { return &Q(r)->vt; }

static double ttl(spmvd *d) { return (double)atomic_load(&d->vlimits.ttl_s); }

static bool wants_binary(request *r)
{
    const char *a = api_header_in(r, MHD_HTTP_HEADER_ACCEPT);
    return a && strstr(a, "application/octet-stream");
}

static bool body_is_binary(request *r) { return r->binary; /* Content-Type checked by request_begin */ }

static vector_task *task_new(request *r, vector_op op)
{
    vec_request *q = calloc(1, sizeof *q);
    if (!q) {
        api_error(r, 500, "out_of_memory", "out of memory");
        return NULL;
    }
    q->vt.op = op;
    q->vt.k = 1;
    q->r = r;
    r->state = q;
    return &q->vt;
}

static void vec_finish(task *base, int status)
{
    vec_request *q = (vec_request *)base;
    api_task_status(status, &q->vt.rc, &q->vt.err);
    api_task_done(q->r);
}

/* ------------------------------------------------------------ answers */

/* {"values": [...], <descriptor>}. */
static char *values_json(spmvd *d, const vector_task *t, size_t *len)
{
    const spmv_vec *v = &t->v->v;
    return api_json_values_answer("values", v->dtype, t->values, (int32_t)v->n, v->k, rvec_json(t->v, ttl(d)), len);
}

static void answer(request *r)
{
    vector_task *t = T(r);
    spmvd *d = r->d;
    if (t->shm_rc) {
        api_shm_error(r, t->shm_rc, t->err.message);
        return;
    }
    if (t->rc != SPMV_OK) {
        if (t->rc == SPMV_ERR_DEVICE_MEMORY || t->rc == SPMV_ERR_NOMEM)
            api_error(r, 507, "device_memory", "%s", t->err.message);
        else
            api_error_spmv(r, t->rc, &t->err);
        return;
    }
    if (t->op == VECTOR_CREATE) {
        char loc[64];
        snprintf(loc, sizeof loc, "/v1/vectors/%s", t->v->id);
        api_json(r, 201, rvec_json(t->v, ttl(d)));
        api_header(r, MHD_HTTP_HEADER_LOCATION, loc);
        log_info("vector %s: %lld x %d %s on %s", t->v->id, (long long)t->v->v.n, t->v->v.k,
                 spmv_dtype_name(t->v->v.dtype), t->v->w->name);
        return;
    }
    if (t->op == VECTOR_WRITE || t->so.reg) {
        json_t *o = rvec_json(t->v, ttl(d));
        if (o && t->op == VECTOR_READ)
            json_object_set_new(o, "values", json_pack("{s:s, s:I}", "shm", t->so.reg->name, "offset",
                                                       (json_int_t)t->so.offset));
        api_json(r, 200, o);
        return;
    }
    if (Q(r)->binary_out) {
        json_t *desc = rvec_json(t->v, ttl(d));
        api_bytes(r, 200, "application/octet-stream", t->values, spmv_vec_bytes(&t->v->v));
        t->values = NULL; /* the response owns it */
        api_header_json(r, "X-SpMV-Vector", desc);
        return;
    }
    size_t len;
    char *text = values_json(d, t, &len);
    api_json_text(r, text, len);
}

static void cleanup(request *r)
{
    vec_request *q = Q(r);
    if (q)
        vector_task_release(&q->vt);
    free(q);
    r->state = NULL;
}

/* ------------------------------------------------------------ decoding */

static int parse_dtype(request *r, const char *s, spmv_dtype *out)
{
    if (spmv_dtype_parse(s, out) != SPMV_OK) {
        api_error(r, 400, "invalid_request", "`dtype` must be float64 or float32, not \"%.32s\"", s);
        return -1;
    }
    return 0;
}

/* The options every create takes, from the JSON object (o) or the query
 * string: like/side/device/dtype/k/n. Sets t->w, dtype, n (0: unknown), k. */
static int placement(request *r, const json_t *o)
{
    vector_task *t = T(r);
    spmvd *d = r->d;
#define OPT(key) (o ? json_string_value(json_object_get(o, key)) : api_query(r, key))
    const char *like = OPT("like"), *side = OPT("side"), *dtype = OPT("dtype");
    const char *dev = NULL;
    char devbuf[16];
    const json_t *jd = o ? json_object_get(o, "device") : NULL;
    if (jd && json_is_integer(jd)) {
        snprintf(devbuf, sizeof devbuf, "%lld", (long long)json_integer_value(jd));
        dev = devbuf;
    } else
        dev = o ? json_string_value(jd) : api_query(r, "device");
    if ((o && json_object_get(o, "like") && !like) || (o && json_object_get(o, "side") && !side) ||
        (o && json_object_get(o, "dtype") && !dtype) || (jd && !dev)) {
        api_error(r, 400, "invalid_request", "`like`, `side` and `dtype` are strings; `device` a string or an index");
        return -1;
    }
#undef OPT
    t->dtype = SPMV_FLOAT64;
    spmv_dtype_parse(d->cfg.default_dtype, &t->dtype);
    if (like) {
        matrix *m = api_matrix_ref(r, like, "`like`");
        if (!m)
            return -1;
        bool rows = side && strcmp(side, "rows") == 0;
        if (side && !rows && strcmp(side, "cols") != 0) {
            matrix_unref(m);
            api_error(r, 400, "invalid_request", "`side` must be \"cols\" (x of A*x) or \"rows\" (y), not \"%.16s\"", side);
            return -1;
        }
        t->w = m->shards ? d->cluster_worker : m->dev ? m->dev_worker : d->cpu;
        t->n = rows ? m->host.rows : m->host.cols;
        t->dtype = m->host.dtype;
        snprintf(t->like, sizeof t->like, "%s", m->meta.id);
        t->rows = rows;
        if (m->shards)
            t->m = m; /* the task keeps it: the worker cuts the vector like its shards */
        else
            matrix_unref(m);
    } else if (side) {
        api_error(r, 400, "invalid_request", "`side` goes with `like`");
        return -1;
    }
    if (dev) {
        const char *why;
        worker *w = spmvd_worker_named(d, dev, &why);
        if (!w) {
            api_error(r, strncmp(dev, "gpu", 3) == 0 || (dev[0] >= '0' && dev[0] <= '9') ? 409 : 400,
                      "device_unavailable", "`device` %.16s: %s", dev, why ? why : "unknown");
            return -1;
        }
        if (t->w && w != t->w) {
            api_error(r, 400, "invalid_request", "`device` %s disagrees with `like` %s, which lives on %s", w->name,
                      t->like, t->w->name);
            return -1;
        }
        t->w = w;
    }
    if (!t->w) {
        const char *why;
        t->w = spmvd_worker_named(d, "auto", &why);
    }
    if (dtype && parse_dtype(r, dtype, &t->dtype))
        return -1;
    return 0;
}

static int int_opt(request *r, const json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    if (o) {
        const json_t *v = json_object_get(o, key);
        if (!v)
            return 0;
        if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
            api_error(r, 400, "invalid_request", "`%s` must be an integer in %lld..%lld", key, (long long)lo,
                      (long long)hi);
            return -1;
        }
        *out = json_integer_value(v);
        return 0;
    }
    const char *s = api_query(r, key);
    if (!s)
        return 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || v < lo || v > hi) {
        api_error(r, 400, "invalid_request", "`%s` must be an integer in %lld..%lld, not \"%.32s\"", key, (long long)lo,
                  (long long)hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

/* n and k of a fill or of values in a region: those of the vector when
 * its shape is fixed (n_want, k_want > 0), else the body's `n` and `k`;
 * without n the answer says what `needs` it. */
static int shape_from_body(request *r, const json_t *body, int64_t n_want, int32_t k_want, const char *needs)
{
    vector_task *t = T(r);
    int64_t n = n_want > 0 ? n_want : 0, k = k_want > 0 ? k_want : 1;
    int64_t max_rows = atomic_load(&r->d->limits.max_rows);
    if ((n_want <= 0 && int_opt(r, body, "n", 1, max_rows, &n)) ||
        (k_want <= 0 && int_opt(r, body, "k", 1, SPMV_MAX_K, &k)))
        return -1;
    if (n < 1 && t->like[0]) { /* `n` is the matrix's: asking for it would be wrong */
        api_error(r, 400, "invalid_request", "`like` %s: the matrix has 0 %s, so a vector like it would hold no "
                  "values; a vector holds at least one", t->like, t->rows ? "rows" : "columns");
        return -1;
    }
    if (n < 1) {
        api_error(r, 400, "invalid_request", "%s `n` (or `like` a matrix)", needs);
        return -1;
    }
    t->n = n;
    t->k = (int32_t)k;
    return 0;
}

/* The values of a create or overwrite in a region: n (and k) given or
 * fixed, the region's bytes checked now, read on the worker. */
static int values_from_region(request *r, const json_t *body, const char *name, int64_t offset, int64_t n_want,
                              int32_t k_want)
{
    vector_task *t = T(r);
    char msg[512];
    if (!api_shm_enabled(r) || shape_from_body(r, body, n_want, k_want, "values in a region need"))
        return -1;
    size_t vs = spmv_dtype_size(t->dtype);
    int st = shm_operand_open(r->d->shm, name, offset, (size_t)t->n * (size_t)t->k * vs, vs, "values", &t->so, msg,
                              sizeof msg);
    if (st) {
        api_shm_error(r, st, msg);
        return -1;
    }
    if (shm_operand_device(&t->so)) {
        api_error(r, 400, "invalid_request", "region %s is a CUDA region: vectors take POSIX regions; a CUDA "
                  "region serves spmv's x and y", name);
        return -1;
    }
    return 0;
}

/* The values as the binary body (no copy): a whole number of columns of
 * k (the query's `k`, or fixed) values, n of them when fixed. */
static int values_from_binary(request *r, int64_t n_want, int32_t k_want)
{
    vector_task *t = T(r);
    size_t vs = spmv_dtype_size(t->dtype);
    int64_t k = k_want > 0 ? k_want : 1;
    if (k_want <= 0 && int_opt(r, NULL, "k", 1, SPMV_MAX_K, &k))
        return -1;
    size_t colbytes = vs * (size_t)k;
    int64_t n = (int64_t)(r->body_len / colbytes);
    if (r->body_len % colbytes || (n_want > 0 && n != n_want) || n < 1) {
        char want[64] = "";
        if (n_want > 0)
            snprintf(want, sizeof want, " (%lld values a column)", (long long)n_want);
        api_error(r, 400, "shape_mismatch", "the body has %zu bytes: %svalues of %d column%s of %s%s are needed",
                  r->body_len, n_want > 0 ? "" : "a whole number of ", (int)k, k == 1 ? "" : "s",
                  spmv_dtype_name(t->dtype), want);
        return -1;
    }
    t->n = n;
    t->k = (int32_t)k;
    t->values = r->body;
    t->values_from_body = true;
    return 0;
}

/* The values as a JSON array (or k arrays). */
static int values_from_json(request *r, const json_t *vals, int64_t n_want, int32_t k_want)
{
    vector_task *t = T(r);
    api_fail f = {0};
    int64_t n;
    int32_t k;
    if (api_values_from_json(vals, n_want > 0 ? n_want : -1, t->dtype, "values", &t->values, &n, &k, &f)) {
        api_error(r, f.status, f.code, "%s", f.message);
        return -1;
    }
    if ((k_want > 0 && k != k_want) || n < 1) {
        api_error(r, 400, "shape_mismatch", "`values` has %d column%s of %lld; %d of %lld are needed", k,
                  k == 1 ? "" : "s", (long long)n, k_want > 0 ? k_want : k, (long long)(n_want > 0 ? n_want : 1));
        return -1;
    }
    t->n = n;
    t->k = k;
    return 0;
}

/* {"fill": value | "random", "seed"}: the values made on the worker. */
static int values_from_fill(request *r, const json_t *body, const json_t *fill, int64_t n_want, int32_t k_want)
{
    vector_task *t = T(r);
    if (json_is_number(fill) && isfinite(json_number_value(fill))) {
        t->fill = VECTOR_FILL_VALUE;
        t->fill_value = json_number_value(fill);
    } else if (json_is_string(fill) && strcmp(json_string_value(fill), "random") == 0) {
        t->fill = VECTOR_FILL_RANDOM;
        json_t *s = json_object_get(body, "seed");
        if (s && (!json_is_integer(s) || json_integer_value(s) < 0)) {
            api_error(r, 400, "invalid_request", "`seed` must be a non-negative integer");
            return -1;
        }
        t->seed = s ? (uint64_t)json_integer_value(s) : (uint64_t)spmv_now_ms() * 2654435761u;
    } else {
        api_error(r, 400, "invalid_request", "`fill` must be a finite number or \"random\"");
        return -1;
    }
    return shape_from_body(r, body, n_want, k_want, "a fill needs");
}

/* `n` when the request gives one (body or query): the shape the values
 * must have (values, a binary body or a region of another length are 400
 * shape_mismatch, not taken as they come); a `like` of another length is
 * a 400 too. *n: the matrix's from `like`, or 0. */
static int given_n(request *r, const json_t *opts, int64_t *n)
{
    int64_t want = 0;
    if (int_opt(r, opts, "n", 1, atomic_load(&r->d->limits.max_rows), &want))
        return -1;
    if (want && *n && want != *n) {
        api_error(r, 400, "shape_mismatch", "`n` %lld conflicts with `like`, whose vectors hold %lld", (long long)want,
                  (long long)*n);
        return -1;
    }
    *n = want ? want : *n;
    return 0;
}

/* A fill value past float32's range on a float32 vector: 422, not a
 * vector of infinities. */
static bool fill_fits(request *r)
{
    vector_task *t = T(r);
    if (t->fill != VECTOR_FILL_VALUE || t->dtype != SPMV_FLOAT32 || !spmv_float32_overflows(t->fill_value))
        return true;
    api_error(r, 422, "out_of_range", "`fill` %.17g is outside float32's range (|v| <= 3.40282347e+38): the vector "
              "would hold infinities", t->fill_value);
    return false;
}

/* The values of a create or overwrite: binary body, JSON array(s),
 * {"values"} or {"fill", "seed"}. n_want/k_want > 0 when the vector's
 * shape is already fixed (PUT, `like`, `n`). */
static int decode_values(request *r, json_t *body, int64_t n_want, int32_t k_want)
{
    if (body_is_binary(r))
        return values_from_binary(r, n_want, k_want);
    const json_t *vals = json_is_array(body) ? body : json_object_get(body, "values");
    const json_t *fill = json_is_object(body) ? json_object_get(body, "fill") : NULL;
    if (vals && fill) {
        api_error(r, 400, "invalid_request", "give `values` or `fill`, not both");
        return -1;
    }
    char name[SHM_NAME_MAX + 1];
    int64_t offset;
    api_fail f = {0};
    int ref = vals ? api_shm_ref(vals, "values", name, &offset, &f) : 0;
    if (ref < 0) {
        api_error(r, f.status, f.code, "%s", f.message);
        return -1;
    }
    if (ref > 0)
        return values_from_region(r, body, name, offset, n_want, k_want);
    if (vals)
        return values_from_json(r, vals, n_want, k_want);
    if (!fill) {
        api_error(r, 400, "invalid_request", "the body needs `values` (or is an array) or `fill`");
        return -1;
    }
    return values_from_fill(r, body, fill, n_want, k_want);
}

static json_t *load_body(request *r)
{
    json_error_t jerr;
    if (!api_json_body_fits(r))
        return NULL;
    json_t *o = json_loadb(r->body ? r->body : "", r->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!o)
        api_error(r, 400, "invalid_json", "body is not valid JSON: line %d column %d: %s", jerr.line, jerr.column,
                  jerr.text);
    else if (!json_is_object(o) && !json_is_array(o)) {
        api_error(r, 400, "invalid_json", "body must be a JSON array or object");
        json_decref(o);
        o = NULL;
    }
    return o;
}

/* ------------------------------------------------------------ routes */

static void collect(request *r, const char *data, size_t size)
{
    api_body_collect(r, data, size, atomic_load(&r->d->limits.max_body_bytes), "max_body_bytes");
}

static void post_begin(request *r)
{
    if (task_new(r, VECTOR_CREATE))
        api_check_content_length(r, atomic_load(&r->d->limits.max_body_bytes), "max_body_bytes");
}

static void submit(request *r)
{
    vector_task *t = T(r);
    t->base.run = vector_task_run;
    t->base.finish = vec_finish;
    api_submit_and_suspend(r, t->w, &t->base);
}

static void post_end(request *r)
{
    static const char *const keys[] = {"values", "n", "k", "fill", "seed", "dtype", "like", "side", "device", NULL};
    vector_task *t = T(r);
    json_t *body = NULL;
    int64_t max_rows = atomic_load(&r->d->limits.max_rows);
    if (!body_is_binary(r) && !(body = load_body(r)))
        return;
    json_t *opts = json_is_object(body) ? body : NULL;
    if ((opts && !api_query_empty(r, "a JSON object carries its own options (a query string goes with a binary body "
                                     "or a JSON array)")) ||
        api_known_fields(r, body, keys) || placement(r, opts))
        goto out;
    int64_t k = 0;
    if (int_opt(r, opts, "k", 1, SPMV_MAX_K, &k))
        goto out;
    if (t->m && k > 1) {
        api_error(r, 422, "unsupported_matrix", "matrix %s is sharded across %d ranks; a vector made like it is "
                  "distributed the same way and holds one column, not k = %lld", t->like,
                  cluster_matrix_nranks(t->m->shards), (long long)k);
        goto out;
    }
    if (given_n(r, opts, &t->n) || decode_values(r, body, t->n, (int32_t)k) || !fill_fits(r))
        goto out;
    if (t->n > max_rows) {
        api_error(r, 400, "too_large", "a vector of %lld values a column is over max_rows (%lld)", (long long)t->n,
                  (long long)max_rows);
        goto out;
    }
    spmv_vec shape = {.dtype = t->dtype, .n = t->n, .k = t->k};
    spmv_error err = {0};
    if (vstore_reserve(r->d->vectors, &r->d->vlimits, t->w, spmv_vec_bytes(&shape), &err) != SPMV_OK) {
        api_error(r, 507, "vector_limit", "%s", err.message);
        goto out;
    }
    t->reserved = spmv_vec_bytes(&shape);
    submit(r);
out:
    json_decref(body);
}

/* The vector of r->id, referenced into the task, or a 404 answered. */
static rvec *get_vector(request *r, vector_task *t)
{
    if (!(t->v = vstore_get(r->d->vectors, r->id)))
        api_error(r, 404, "vector_not_found", "no vector %s (deleted, expired after vector_ttl_s %lld s idle, or never "
                  "created)", r->id, (long long)atomic_load(&r->d->vlimits.ttl_s));
    else
        t->w = t->v->w;
    return t->v;
}

static void get_end(request *r)
{
    vector_task *t = task_new(r, VECTOR_READ);
    if (!t || !get_vector(r, t))
        return;
    const char *name = api_query(r, "shm"), *off = api_query(r, "offset");
    if (name || off) {
        char msg[512], *end = NULL;
        errno = 0;
        long long o = off ? strtoll(off, &end, 10) : 0; /* past 2^63-1 ERANGE, not a wrong number in the answer */
        size_t vs = spmv_dtype_size(t->v->v.dtype);
        if (!name || (off && (!*off || *end || o < 0 || errno))) {
            api_error(r, 400, "invalid_request", name ? "`offset` must be a byte offset >= 0, not \"%.64s\""
                                                      : "`offset` without `shm`%.0s", off);
            return;
        }
        int st = !api_shm_enabled(r) ? -1
                                     : (int)shm_operand_open(r->d->shm, name, o, spmv_vec_bytes(&t->v->v), vs, "values",
                                                        &t->so, msg, sizeof msg);
        if (st > 0)
            api_shm_error(r, st, msg);
        else if (st == SHM_OK && shm_operand_device(&t->so))
            api_error(r, 400, "invalid_request", "region %s is a CUDA region: vectors take POSIX regions", name);
        else if (st == SHM_OK)
            submit(r);
        return;
    }
    Q(r)->binary_out = wants_binary(r);
    if (!Q(r)->binary_out && !api_json_values_fit(r, t->v->v.n, t->v->v.k, "the vector's values"))
        return;
    if (!(t->values = malloc(spmv_vec_bytes(&t->v->v) ? spmv_vec_bytes(&t->v->v) : 1))) {
        api_error(r, 507, "out_of_memory", "no host memory to read %zu bytes", spmv_vec_bytes(&t->v->v));
        return;
    }
    submit(r);
}

static void put_begin(request *r)
{
    if (task_new(r, VECTOR_WRITE))
        api_check_content_length(r, atomic_load(&r->d->limits.max_body_bytes), "max_body_bytes");
}

static void put_end(request *r)
{
    static const char *const keys[] = {"values", "fill", "seed", NULL};
    vector_task *t = T(r);
    json_t *body = NULL;
    if (!get_vector(r, t))
        return;
    t->dtype = t->v->v.dtype;
    if (!body_is_binary(r) && !(body = load_body(r)))
        return;
    if (api_known_fields(r, body, keys) || decode_values(r, body, t->v->v.n, t->v->v.k) || !fill_fits(r))
        goto out;
    submit(r);
out:
    json_decref(body);
}

static void delete_begin(request *r)
{
    spmv_error err = {0};
    if (vstore_remove(r->d->vectors, r->id, &err) != SPMV_OK)
        api_error(r, 404, "vector_not_found", "%s", err.message);
    else
        api_bytes(r, 204, NULL, NULL, 0);
}

static void list_begin(request *r)
{
    rvec **list;
    size_t n;
    if (vstore_list(r->d->vectors, &list, &n) != SPMV_OK) {
        api_error(r, 500, "out_of_memory", "out of memory");
        return;
    }
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, rvec_json(list[i], ttl(r->d)));
    vstore_list_free(list, n);
    api_json(r, 200, json_pack("{s:o}", "vectors", a));
}

/* A create's options with a binary body or a bare JSON array (a JSON
 * object carries its own: post_end refuses a query then). */
static const char *const create_query[] = {"like", "side", "dtype", "device", "k", "n", NULL};
static const char *const read_query[] = {"shm", "offset", NULL};

const route_handlers api_vectors_get = {.begin = list_begin, .body_kind = API_BODY_NONE, .query = api_no_query};
const route_handlers api_vectors_post = {
    .begin = post_begin, .body = collect, .end = post_end, .resumed = answer, .cleanup = cleanup, .accepts_body = true,
    .body_kind = API_BODY_JSON_OR_BINARY, .query = create_query, .query_with_json = true,
};
const route_handlers api_vector_get = {.end = get_end, .resumed = answer, .cleanup = cleanup,
                                       .body_kind = API_BODY_NONE, .query = read_query};
const route_handlers api_vector_put = {
    .begin = put_begin, .body = collect, .end = put_end, .resumed = answer, .cleanup = cleanup, .accepts_body = true,
    .body_kind = API_BODY_JSON_OR_BINARY, .query = api_no_query,
};
const route_handlers api_vector_delete = {.begin = delete_begin, .body_kind = API_BODY_NONE, .query = api_no_query};
