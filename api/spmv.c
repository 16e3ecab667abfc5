/* spmv.c — POST /v1/matrices/{id}/spmv: one kernel, y = A*x.
 *
 * Two encodings. JSON: {"kernel","x":[...],"runs","warmup","stat","verify",
 * "async", params...}, answered with {"y":[...],"kernel","stats",...};
 * "stat" (median, the default, or mean) is the statistic the rates in
 * stats come from, named there as stats.stat.
 * Binary (Content-Type: application/octet-stream): the body is x as
 * little-endian values of the matrix dtype, the options are in the query
 * string, and the answer is y the same way with the statistics as JSON in
 * the X-SpMV-Stats header — no text conversion either way, which is what a
 * remote solver wants for a million-row vector.
 *
 * Everything the request says is checked here, on the HTTP thread (kernel
 * known and available, x length, parameters against the registry's ranges,
 * runs against max_runs); the kernel then runs as a task on the worker of
 * its device, and the answer is built back on an HTTP thread after the
 * connection resumes. With "async": true the answer is 202 and a job.
 *
 * Operands may be resident vectors (daemon/vectors.h): x as {"vector": id} (?x=ID),
 * y written into {"vector": id} (?y=ID) as y = alpha*op(A)*x + beta*y, op
 * "t" for Aᵀ, and x may hold k columns (SpMM). A vector must live where the
 * kernel runs: on another device it is a 409, never a silent copy.
 *
 * Or x and y may lie in shared-memory regions (daemon/shm.h): x as {"shm": name,
 * "offset": bytes} (?x_shm=&x_offset=), y likewise. A GPU worker copies
 * them by DMA straight from and to a pinned region's pages; otherwise x is
 * read into a buffer with pread and y written back with pwrite, never
 * through the mapping (shm.h says why). The region is checked before and
 * after the product; a region shrunk or unlinked meanwhile is a 410. A
 * CUDA region (another process's device memory on the matrix's GPU) is
 * read and written in place, as a resident vector is.
 *
 * A sharded matrix (issue 16) runs on the cluster worker: the product of
 * every rank's shard with the halo exchange, the statistics split into
 * compute and communication. x and y are inline (x scattered to the
 * ranks, y gathered at rank 0) or vectors distributed like the matrix
 * (made with "like": its id), which stay on the ranks: y = alpha*A*x +
 * beta*y then moves no vector. It takes op n and one column: anything
 * else is a 422 that says so (sharded_check).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/decode.h"
#include "daemon/log.h"
#include "daemon/products.h"

typedef struct spmv_task {
    product pr;           /* what runs on the worker (daemon/products.h) */
    request *r;           /* NULL when async */
    bool binary;          /* x in the body and y in the answer as raw values */
    int64_t body_limit;
    const char *limit_key; /* what sets body_limit (body_limit()) */
    spmv_stat stat;        /* the statistic the answer's rates come from */
} spmv_task;

/* ------------------------------------------------------ the request */

static spmv_task *T(request *r) { return r->state; }

/* max_body_bytes, tightened by what x can take for this matrix: in JSON
 * 64 bytes a value (a %.17g number is at most 24 characters) plus room for
 * the other fields, in binary twice the exact size plus 4 KiB (so an x a
 * little off still gets the 400 that names both lengths). A body beyond
 * that is refused before it is read, so jansson never builds a tree many
 * times the size of any legitimate request. */
static int64_t body_limit(request *r, spmv_task *t)
{
    int64_t limit = atomic_load(&r->d->limits.max_body_bytes);
    int64_t len = t->pr.m->host.cols > t->pr.m->host.rows ? t->pr.m->host.cols : t->pr.m->host.rows; /* op t takes rows */
    int64_t k = SPMV_MAX_K;
    const char *ks = t->binary ? api_query(r, "k") : NULL;
    if (t->binary)
        k = ks && atoll(ks) >= 1 && atoll(ks) <= SPMV_MAX_K ? atoll(ks) : 1;
    int64_t shape = t->binary ? 4096 + 2 * k * len * (int64_t)spmv_dtype_size(t->pr.m->host.dtype)
                              : 4096 + 64 * k * len;
    t->limit_key = shape < limit ? (t->binary ? "what x of this matrix can take in binary: 4096 + 2 x k x n x value size"
                                              : "what x of this matrix can take in JSON: 4096 + 64 x k x n")
                                 : "max_body_bytes";
    return shape < limit ? shape : limit;
}

static void spmv_begin(request *r)
{
    bool binary = r->binary; /* Content-Type checked by request_begin */
    spmv_task *t = calloc(1, sizeof *t);
    if (!t) {
        api_error(r, 500, "out_of_memory", "out of memory");
        return;
    }
    t->binary = binary;
    t->pr.d = r->d;
    r->state = t;
    if (!(t->pr.m = api_get_matrix(r)))
        return;
    t->body_limit = body_limit(r, t);
    if (api_check_content_length(r, t->body_limit, t->limit_key) && binary)
        api_body_pooled(r, t->body_limit);
}

static void spmv_body(request *r, const char *data, size_t size)
{
    api_body_collect(r, data, size, T(r)->body_limit, T(r)->limit_key);
}

/* The checks every compute route makes of the kernel it was asked for:
 * known, of the route's operation, available here, and on the device
 * that holds `m` (`what` names m in the message). 0, or -1 answered. */
int api_kernel_check(request *r, const spmv_kernel *k, const char *name, spmv_op op, const matrix *m,
                     const char *what)
{
    const char *why;
    if (!k) {
        api_error(r, 400, "unknown_kernel", "no kernel \"%s\" (GET /v1/kernels lists them)", name);
        return -1;
    }
    if (k->op != op) {
        api_error(r, 400, "unknown_kernel", "%s is a %s kernel; /%s runs %s kernels (GET /v1/kernels lists them)",
                  name, spmv_op_name(k->op), spmv_op_name(op), spmv_op_name(op));
        return -1;
    }
    if (!spmvd_kernel_available(r->d, k, &why)) {
        api_error(r, 409, "kernel_unavailable", "kernel %s is not available here: %s", name, why);
        return -1;
    }
    if (k->device == SPMV_DEVICE_GPU && !m->dev) {
        api_error(r, 409, "kernel_unavailable",
                  "matrix %s is held on the host only; GPU kernels need %s uploaded with device=gpu", m->meta.id,
                  what);
        return -1;
    }
    return 0;
}

/* What a sharded product takes; 0, or -1 answered 422. */
static int sharded_check(request *r, const spmv_req *q)
{
    spmv_task *t = T(r);
    const char *what = q->x_shm[0] || q->y_shm[0]   ? "shared-memory operands"
                       : q->trans                     ? "op t"
                       : q->k > 1                     ? "k > 1 columns"
                       : !q->y_vector[0] && (q->alpha != 1.0 || q->beta != 0.0) ? "alpha and beta with y in the answer"
                                                           : NULL;
    if (what) {
        api_error(r, 422, "unsupported_matrix", "matrix %s is sharded across %d ranks; its products take x and y "
                  "inline or as vectors distributed like it, op n, one column, and alpha and beta with a vector y; "
                  "not %s", t->pr.m->meta.id, cluster_matrix_nranks(t->pr.m->shards), what);
        return -1;
    }
    if (cluster_failed(r->d->cluster)) {
        api_error(r, 503, "cluster_failed", "matrix %s is sharded and the cluster has failed: %s", t->pr.m->meta.id,
                  cluster_failed(r->d->cluster));
        return -1;
    }
    return 0;
}

/* The kernel a sharded product runs: any CPU kernel, auto, or a GPU kernel
 * when the shards are on GPUs (default: the shards' CSR kernel). */
const spmv_kernel *api_sharded_kernel(request *r, const char *name, const matrix *m)
{
    const char *why;
    const cluster_shard_info *info;
    cluster_matrix_shards(m->shards, &info);
    bool gpu = strncmp(info[0].device, "gpu", 3) == 0;
    const spmv_kernel *k = spmv_kernel_find(name ? name : gpu ? "gpu.csr.vector" : "cpu.csr.omp");
    if (!k) {
        api_error(r, 400, "unknown_kernel", "no kernel \"%s\" (GET /v1/kernels lists them)", name);
        return NULL;
    }
    if (k->op != SPMV_OP_SPMV) {
        api_error(r, 400, "unknown_kernel", "%s is a %s kernel; products run spmv kernels", name, spmv_op_name(k->op));
        return NULL;
    }
    if (spmv_kernel_is_auto(k))
        return k;
    if (!spmv_kernel_available(k, &why) && k->device == SPMV_DEVICE_CPU) {
        api_error(r, 409, "kernel_unavailable", "kernel %s is not available here: %s", k->name, why);
        return NULL;
    }
    if ((k->device == SPMV_DEVICE_GPU) != gpu) {
        api_error(r, 409, "kernel_unavailable", "matrix %s is sharded on the ranks' %s; %s runs on %s", m->meta.id,
                  gpu ? "GPUs" : "hosts", k->name, k->device == SPMV_DEVICE_GPU ? "a GPU" : "the host");
        return NULL;
    }
    return k;
}

static int pick_sharded_kernel(request *r, const char *name)
{
    spmv_task *t = T(r);
    t->pr.sharded = true;
    return (t->pr.k = api_sharded_kernel(r, name, t->pr.m)) ? 0 : -1;
}

static int pick_kernel(request *r, const char *name)
{
    spmv_task *t = T(r);
    if (t->pr.m->shards)
        return pick_sharded_kernel(r, name);
    if (!name)
        name = t->pr.m->dev ? "gpu.csr.vector" : "cpu.csr.omp";
    t->pr.k = spmv_kernel_find(name);
    if (spmv_kernel_is_auto(t->pr.k)) { /* tuned for the matrix's own device (daemon/autotune.c) */
        t->pr.is_auto = true;
        return 0;
    }
    return api_kernel_check(r, t->pr.k, name, SPMV_OP_SPMV, t->pr.m, "it");
    return 0;
}

static int resolve_params(request *r, const spmv_params *given)
{
    spmv_task *t = T(r);
    spmv_error err = {0};
    if (spmv_params_resolve(t->pr.k, given, &t->pr.p, &err) != SPMV_OK) {
        api_error(r, 400, "invalid_parameter", "%s", err.message);
        return -1;
    }
    return 0;
}

static const char *lookup_query(void *ctx, const char *key) { return api_query(ctx, key); }

/* A resident operand: known, on the kernel's device, of A's dtype, n and k.
 * NULL with the answer sent. */
static rvec *operand(request *r, const char *id, const char *what, int32_t n, int32_t k)
{
    spmv_task *t = T(r);
    rvec *v = vstore_get(r->d->vectors, id);
    worker *w = product_worker(r->d, &t->pr);
    char msg[512];
    if (!v) {
        api_error(r, 404, "vector_not_found", "%s: no vector %s (deleted, expired or never created)", what, id);
        return NULL;
    }
    if (v->w != w) {
        api_error(r, 409, "wrong_device",
                  "%s: vector %s is on %s but %s runs on %s; vectors are never copied between devices (create it "
                  "with \"like\": \"%s\")", what, id, v->w->name, t->pr.is_auto ? "auto" : t->pr.k->name,
                  w ? w->name : "no device", t->pr.m->meta.id);
    } else if (t->pr.sharded && !cluster_vec_fits(v->dist, t->pr.m->shards, strcmp(what, "y") == 0, msg, sizeof msg)) {
        api_error(r, 400, "shape_mismatch", "%s: %s", what, msg);
    } else if (v->v.dtype != t->pr.m->host.dtype) {
        api_error(r, 400, "dtype_mismatch", "%s: vector %s is %s but matrix %s is %s", what, id,
                  spmv_dtype_name(v->v.dtype), t->pr.m->meta.id, spmv_dtype_name(t->pr.m->host.dtype));
    } else if (v->v.n != n) {
        api_error(r, 400, "shape_mismatch", "%s: vector %s has %lld values a column; %s needs %d (matrix %d x %d%s)",
                  what, id, (long long)v->v.n, what, n, t->pr.m->host.rows, t->pr.m->host.cols, t->pr.trans ? ", op t" : "");
    } else if (k > 0 && v->v.k != k) {
        api_error(r, 400, "shape_mismatch", "%s: vector %s has %d columns; x has %d", what, id, v->v.k, k);
    } else
        return v;
    rvec_unref(v);
    return NULL;
}

/* x and y in shared-memory regions: registered, in bounds, aligned. The
 * regions stay referenced until the task is freed. 0, or -1 answered. */
static int resolve_shm(request *r, const spmv_req *q)
{
    spmv_task *t = T(r);
    char msg[512];
    size_t vs = spmv_dtype_size(t->pr.m->host.dtype);
    int st = SHM_OK;
    if ((q->x_shm[0] || q->y_shm[0]) && !api_shm_enabled(r))
        return -1;
    if (q->x_shm[0])
        st = shm_operand_open(r->d->shm, q->x_shm, q->x_shm_offset, (size_t)t->pr.xlen * (size_t)t->pr.ncols * vs, vs, "x",
                              &t->pr.xs, msg, sizeof msg);
    if (st == SHM_OK && q->y_shm[0])
        st = shm_operand_open(r->d->shm, q->y_shm, q->y_shm_offset, (size_t)t->pr.ylen * (size_t)t->pr.ncols * vs, vs, "y",
                              &t->pr.ys, msg, sizeof msg);
    if (st != SHM_OK) {
        api_shm_error(r, st, msg);
        return -1;
    }
    worker *w = product_worker(r->d, &t->pr);
    const shm_operand *ops[2] = {&t->pr.xs, &t->pr.ys};
    spmv_vec *views[2] = {&t->pr.xdv, &t->pr.ydv};
    int32_t lens[2] = {t->pr.xlen, t->pr.ylen};
    for (int i = 0; i < 2; i++) {
        void *dp = shm_operand_device(ops[i]);
        if (!dp)
            continue;
        if (!w || w->gpu != ops[i]->reg->device) {
            api_error(r, 409, "wrong_device", "%s: region %s is memory of gpu%d but %s runs on %s; a CUDA region "
                      "serves products on its own GPU", i ? "y" : "x", ops[i]->reg->name, ops[i]->reg->device,
                      t->pr.is_auto ? "auto" : t->pr.k->name, w ? w->name : "no device");
            return -1;
        }
        *views[i] = (spmv_vec){SPMV_DEVICE_GPU, t->pr.m->host.dtype, lens[i], t->pr.ncols, dp};
    }
    t->pr.xcuda = t->pr.xdv.data != NULL;
    t->pr.ycuda = t->pr.ydv.data != NULL;
    return 0;
}

/* x and y as resident vectors, k against the kernel. 0, or -1 answered. */
static int resolve_operands(request *r, const spmv_req *q)
{
    spmv_task *t = T(r);
    if (q->x_vector[0]) {
        if (!(t->pr.xv = operand(r, q->x_vector, "x", t->pr.xlen, 0)))
            return -1;
        t->pr.ncols = t->pr.xv->v.k;
    }
    if (q->y_vector[0]) {
        if (!(t->pr.yv = operand(r, q->y_vector, "y", t->pr.ylen, t->pr.ncols)))
            return -1;
        if (t->pr.xv && (t->pr.yv == t->pr.xv || (t->pr.yv->v.data && t->pr.yv->v.data == t->pr.xv->v.data))) {
            api_error(r, 400, "invalid_request", "x and y are the same vector %s: y = A*x in place is not defined",
                      q->y_vector);
            return -1;
        }
    }
    const spmv_kernel *k = t->pr.is_auto ? spmv_kernel_find("auto") : t->pr.k;
    if (t->pr.ncols > spmv_kernel_max_k(k)) {
        char list[512] = "";
        size_t used = 0;
        for (size_t i = 0; i < spmv_kernel_count() && used < sizeof list; i++) {
            const spmv_kernel *c = spmv_kernel_at(i);
            if (c->op == SPMV_OP_SPMV && spmv_kernel_max_k(c) >= t->pr.ncols)
                used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", c->name);
        }
        api_error(r, 400, "invalid_parameter", "kernel %s multiplies one column at a time, not k = %d; kernels that take "
                  "k columns: %s", k->name, t->pr.ncols, list);
        return -1;
    }
    if (t->pr.verify && (t->pr.trans || t->pr.xv || t->pr.yv || q->x_shm[0] || q->y_shm[0])) {
        api_error(r, 400, "invalid_request", "`verify` takes inline x, op n and y in the answer");
        return -1;
    }
    return resolve_shm(r, q);
}

/* ?dtype= with a binary body: the dtype the client says its values are
 * (the C client sends it), which must be the one x of this matrix takes. */
static int check_dtype(request *r, api_fail *f)
{
    const char *s = api_query(r, "dtype");
    spmv_dtype said, dt = T(r)->pr.m->host.dtype;
    if (!s)
        return 0;
    if (spmv_dtype_parse(s, &said) != SPMV_OK)
        return (f->status = 400, f->code = "invalid_request",
                snprintf(f->message, sizeof f->message, "`dtype` must be float64 or float32, not \"%.32s\"", s), -1);
    if (said != dt)
        return (f->status = 400, f->code = "dtype_mismatch",
                snprintf(f->message, sizeof f->message, "`dtype` %s: matrix %s takes x and gives y as %s",
                         spmv_dtype_name(said), T(r)->pr.m->meta.id, spmv_dtype_name(dt)), -1);
    return 0;
}

/* The body (JSON) or the query string (binary) through the decoders, then
 * the kernel against this daemon and matrix. */
static int decode_request(request *r, spmv_params *given, bool *async)
{
    spmv_task *t = T(r);
    spmv_req q;
    api_fail f = {0};
    int32_t cols = t->pr.m->host.cols, rows = t->pr.m->host.rows;
    spmv_dtype dt = t->pr.m->host.dtype;
    int64_t max_runs = atomic_load(&r->d->limits.max_runs);
    if (!t->binary && !api_json_body_fits(r))
        return -1;
    int rc = t->binary ? api_decode_spmv_query(lookup_query, r, max_runs, &q, &f)
                       : api_decode_spmv_json(r->body, r->body_len, rows, cols, dt, max_runs, &q, &f);
    if (rc == 0 && t->binary)
        rc = check_dtype(r, &f);
    if (rc == 0 && t->binary && !q.x_vector[0] && !q.x_shm[0])
        rc = api_check_x_binary(r->body_len, q.trans ? rows : cols, q.k, dt, &f);
    if (rc == 0 && t->binary && (q.x_vector[0] || q.x_shm[0]) && r->body_len)
        rc = (f.status = 400, f.code = "invalid_request",
              snprintf(f.message, sizeof f.message, "x is %s %s: the body must be empty",
                       q.x_shm[0] ? "in the region" : "the vector", q.x_shm[0] ? q.x_shm : q.x_vector), -1);
    if (rc == 0 && t->pr.m->shards && sharded_check(r, &q) != 0) {
        api_spmv_req_free(&q);
        return -1;
    }
    if (rc != 0) {
        api_error(r, f.status, f.code, "%s", f.message);
        api_spmv_req_free(&q);
        return -1;
    }
    if (pick_kernel(r, q.kernel[0] ? q.kernel : NULL) != 0) {
        api_spmv_req_free(&q);
        return -1;
    }
    /* cumulative: every run of the request, timed, warm-up and the
     * reference of verify, each at the kernel's work (cpu.csr.chunked's
     * passes included), against max_request_work */
    const spmv_matrix *hm = &t->pr.m->host;
    if (api_check_work_per(spmv_kernel_work(t->pr.is_auto ? NULL : t->pr.k, &q.params, hm->rows, hm->cols, hm->nnz),
                           hm->nnz, ((int64_t)q.runs + q.warmup + (q.verify ? 1 : 0)) * (q.k > 0 ? q.k : 1),
                           atomic_load(&r->d->limits.max_request_work), &f) != 0) {
        api_error(r, f.status, f.code, "%s", f.message);
        api_spmv_req_free(&q);
        return -1;
    }
    t->pr.runs = q.runs;
    t->pr.warmup = q.warmup;
    t->stat = q.stat;
    t->pr.verify = q.verify;
    t->pr.alpha = q.alpha;
    t->pr.beta = q.beta;
    t->pr.trans = q.trans;
    t->pr.ncols = q.k > 0 ? q.k : 1;
    t->pr.xlen = q.trans ? rows : cols;
    t->pr.ylen = q.trans ? cols : rows;
    *async = q.async;
    *given = q.params;
    if (resolve_operands(r, &q) != 0) {
        api_spmv_req_free(&q);
        return -1;
    }
    if (t->pr.xv || t->pr.xs.reg) {
        api_spmv_req_free(&q);
        return 0;
    }
    if (t->binary) {
        /* the body buffer becomes x: no copy */
        t->pr.x = r->body ? r->body : malloc(1);
        t->pr.x_buf = r->body_buf;
        r->body_buf = NULL;
        r->body = NULL;
        r->body_len = r->body_cap = 0;
    } else {
        t->pr.x = q.x;
        q.x = NULL;
    }
    return t->pr.x ? 0 : -1;
}

/* The statistics with the rates at the statistic asked for (stat). */
static json_t *stats_at(const spmv_stats *st, spmv_stat which)
{
    spmv_stats s = *st;
    spmv_stats_use(&s, which);
    return api_stats_json(&s);
}

static json_t *stats_json(const spmv_task *t)
{
    json_t *s = stats_at(&t->pr.report.st, t->stat);
    if (s && t->pr.sharded) {
        json_object_set_new(s, "compute_ms", api_json_real(t->pr.cst.compute_ms));
        json_object_set_new(s, "comm_ms", api_json_real(t->pr.cst.comm_ms));
        if (t->pr.cst.device.runs > 0) /* GPU shards: the runs by CUDA events, as one GPU's product is timed */
            json_object_set_new(s, "device_median_ms", api_json_real(t->pr.cst.device.median_ms));
    }
    return s;
}

/* A sharded product's split: stats gets compute_ms and comm_ms (mean per
 * run of the slowest rank's), and "cluster" the rest. */
static json_t *sharded_json(const spmv_task *t)
{
    const cluster_shard_info *info;
    int n = cluster_matrix_shards(t->pr.m->shards, &info);
    json_t *kernels = json_array();
    for (int q = 0; q < n && q < 8; q++)
        json_array_append_new(kernels, json_string(t->pr.cst.kernels[q]));
    json_t *o = json_pack("{s:i, s:o, s:o, s:o, s:I, s:o}", "ranks", n, "compute_ms",
                          api_json_real(t->pr.cst.compute_ms), "comm_ms", api_json_real(t->pr.cst.comm_ms), "gather_ms",
                          api_json_real(t->pr.cst.gather_ms), "halo_values", (json_int_t)t->pr.cst.halo_values, "kernels",
                          kernels);
    if (o && t->pr.cst.exchange)
        json_object_set_new(o, "exchange", json_string(t->pr.cst.exchange));
    if (o && t->pr.cst.device.runs > 0)
        json_object_set_new(o, "device_stats", stats_at(&t->pr.cst.device, t->stat));
    return o;
}

/* Everything of the answer but y. */
static json_t *result_json(const spmv_task *t)
{
    const run_report *rep = &t->pr.report;
    json_t *o = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:s, s:i, s:o, s:o}", "kernel", t->pr.k->name, "matrix",
                          t->pr.m->meta.id, "device", rep->worker_name, "params", api_params_json(t->pr.k, &t->pr.p, t->pr.m),
                          "stats", stats_json(t), "queue_ms", api_json_real(rep->queue_ms), "op", t->pr.trans ? "t" : "n",
                          "k", t->pr.ncols, "alpha", api_json_real(t->pr.alpha), "beta", api_json_real(t->pr.beta));
    if (o && (t->pr.alpha != 1.0 || t->pr.beta != 0.0))
        json_object_set_new(o, "axpby_ms", api_json_real(t->pr.axpby_ms));
    if (o && t->pr.xv)
        json_object_set_new(o, "x", json_pack("{s:s}", "vector", t->pr.xv->id));
    if (o && t->pr.xs.reg)
        json_object_set_new(o, "x", json_pack("{s:s, s:I}", "shm", t->pr.xs.reg->name, "offset", (json_int_t)t->pr.xs.offset));
    if (o && t->pr.sharded)
        json_object_set_new(o, "cluster", sharded_json(t));
    if (o && t->pr.is_auto) /* the choice and what tuning cost, in every answer that used it */
        json_object_set_new(o, "auto", autotune_json(&t->pr.tuned));
    if (o && t->pr.batched > 0) /* the window was open: the columns of the SpMM it ran in (stats are the SpMM's) */
        json_object_set_new(o, "batched", json_integer(t->pr.batched));
    if (o && t->pr.verify)
        json_object_set_new(o, "verify", json_pack("{s:o, s:s}", "max_rel_err", api_json_real(rep->max_rel_err),
                                                   "reference", "cpu.csr.serial"));
    return o;
}

/* {"y": [...] | {"vector"} | {"shm"}, <rest of result>}. */
static char *json_answer(const spmv_task *t, size_t *len)
{
    json_t *rest = result_json(t);
    bool inline_y = !t->pr.yv && !t->pr.ys.reg;
    if (rest && t->pr.yv)
        json_object_set_new(rest, "y", json_pack("{s:s}", "vector", t->pr.yv->id));
    if (rest && t->pr.ys.reg)
        json_object_set_new(rest, "y", json_pack("{s:s, s:I}", "shm", t->pr.ys.reg->name, "offset",
                                                 (json_int_t)t->pr.ys.offset));
    return api_json_values_answer("y", t->pr.m->host.dtype, inline_y ? t->pr.y : NULL, t->pr.ylen, t->pr.ncols, rest, len);
}

static void answer(request *r)
{
    spmv_task *t = T(r);
    if (t->pr.shm_rc) {
        api_shm_error(r, t->pr.shm_rc, t->pr.err.message);
        return;
    }
    if (t->pr.rc != SPMV_OK) {
        if (t->pr.sharded && t->pr.rc == SPMV_ERR_UNAVAILABLE && !atomic_load(&r->d->draining) &&
            cluster_failed(r->d->cluster))
            api_error(r, 503, "cluster_failed", "%s", t->pr.err.message);
        else
            api_error_task(r, t->pr.rc, &t->pr.err);
        return;
    }
    if (t->binary && !t->pr.ys.reg) { /* y in a region: the JSON result is the answer */
        json_t *hdr = result_json(t);
        size_t n = t->pr.yv ? 0 : (size_t)t->pr.ylen * (size_t)t->pr.ncols * spmv_dtype_size(t->pr.m->host.dtype);
        if (t->pr.yv)
            api_bytes(r, 200, "application/octet-stream", NULL, 0);
        else
            api_bytes_pooled(r, 200, "application/octet-stream", t->pr.y_buf, n);
        if (!t->pr.yv)
            t->pr.y = NULL, t->pr.y_buf = NULL; /* the response owns it now */
        api_header_json(r, "X-SpMV-Stats", hdr);
        return;
    }
    size_t len;
    char *text = json_answer(t, &len);
    api_json_text(r, text, len);
}

static void spmv_task_free(spmv_task *t)
{
    if (!t)
        return;
    product_release(&t->pr);
    free(t);
}

static void spmv_finish(task *base, int status)
{
    spmv_task *t = (spmv_task *)base;
    api_task_status(status, &t->pr.rc, &t->pr.err);
    if (t->r) {
        api_task_done(t->r);
        return;
    }
    /* async: the result goes to the job, y as a JSON array */
    size_t len = 0;
    char *text = t->pr.rc == SPMV_OK ? json_answer(t, &len) : NULL; /* before len is read */
    if (t->pr.shm_rc) {
        const char *code;
        int http = api_shm_status(t->pr.shm_rc, &code);
        job_finish(t->pr.job, http, api_error_body(code, t->pr.err.message));
    } else
        api_job_finish_answer(t->pr.d, t->pr.job, t->pr.rc, &t->pr.err, text, len);
    spmv_task_free(t);
}

void api_answer_job(request *r, job *j)
{
    char loc[64];
    snprintf(loc, sizeof loc, "/v1/jobs/%s", job_id(j));
    api_json(r, 202, job_to_json(j));
    api_header(r, MHD_HTTP_HEADER_LOCATION, loc);
}

void api_job_finish_answer(spmvd *d, job *j, int rc, const spmv_error *err, char *text, size_t len)
{
    if (rc != SPMV_OK) {
        const char *code;
        int http = api_status_of(rc, &code);
        job_finish(j, http, api_error_body(code, err->message));
        free(text);
        return;
    }
    if (!text) {
        job_finish(j, 500, api_error_body("out_of_memory", "out of memory writing the result"));
        return;
    }
    int64_t budget = atomic_load(&d->limits.max_job_result_bytes);
    if (!job_finish_text(d->jobs, j, text, len, budget)) {
        char msg[300];
        snprintf(msg, sizeof msg, "the result, %zu bytes of JSON, does not fit max_job_result_bytes (%lld; finished "
                 "jobs hold %lld): ask for it synchronously or binary, or drop finished jobs (DELETE /v1/jobs/{id})",
                 len, (long long)budget, (long long)jobs_result_bytes(d->jobs));
        job_finish(j, 507, api_error_body("result_too_large", msg));
    }
}

bool api_submit_async(request *r, worker *w, task *t, job **slot, const char *kind, const char *matrix_id)
{
    if (!(*slot = jobs_create(r->d->jobs, kind, matrix_id))) {
        api_error(r, 500, "out_of_memory", "out of memory");
        return false;
    }
    job *j = job_ref(*slot); /* the task may finish and drop its own before we answer */
    int prc = w->ops->submit(w, t, false);
    if (prc != SPMV_OK) {
        job_finish(j, 503, api_error_body(prc == SPMV_ERR_LIMIT ? "queue_full" : "shutting_down",
                                          prc == SPMV_ERR_LIMIT ? "the queue was full" : "the daemon is shutting down"));
        api_error_submit(r, w, prc);
        job_unref(j);
        return false; /* the task stays r->state and is freed with the request */
    }
    r->state = NULL;
    api_answer_job(r, j);
    job_unref(j);
    return true;
}

/* May this product run in one SpMM with others that arrive meanwhile
 * (daemon/batch.c)? A plain y = A*x of one column, x from the request, y
 * in the answer, one run, on a kernel that takes several columns. */
static bool batchable(const product *p, bool async)
{
    return !async && !p->verify && p->ncols == 1 && !p->trans && p->alpha == 1.0 && p->beta == 0.0 && p->runs == 1 &&
           p->warmup == 0 && !p->sharded && !p->xv && !p->yv && !p->xs.reg && !p->ys.reg && !p->xcuda && !p->ycuda &&
           (p->is_auto || p->k->max_k > 1);
}

static void spmv_end(request *r)
{
    spmv_task *t = T(r);
    spmv_params given;
    bool async = false;
    if (decode_request(r, &given, &async) != 0 || resolve_params(r, &given) != 0) {
        if (!r->resp)
            api_error(r, 500, "out_of_memory", "out of memory");
        return;
    }
    /* y inline as JSON (an answer or a job's result) is bounded before the product runs */
    if ((async || !t->binary) && !t->pr.yv && !t->pr.ys.reg && !api_json_values_fit(r, t->pr.ylen, t->pr.ncols, "y"))
        return;
    worker *w = product_worker(r->d, &t->pr);
    t->pr.batchable = batchable(&t->pr, async);
    t->pr.base.run = product_run;
    t->pr.base.finish = spmv_finish;
    if (!async) {
        t->r = r;
        api_submit_and_suspend(r, w, &t->pr.base);
        return;
    }
    /* async: the task lives on its own, the request answers 202 now */
    api_submit_async(r, w, &t->pr.base, &t->pr.job, "spmv", t->pr.m->meta.id);
}

static void spmv_cleanup(request *r)
{
    spmv_task_free(T(r));
    r->state = NULL;
}

/* The binary form's options (api_decode_spmv_query reads them). */
static const char *const spmv_query[] = {"kernel", "runs", "warmup", "stat", "verify", "async", "k", "op", "alpha",
                                         "beta", "x", "y", "x_shm", "x_offset", "y_shm", "y_offset", "dtype",
                                         API_QUERY_PARAMS, NULL};

const route_handlers api_spmv_post = {
    .begin = spmv_begin,
    .body = spmv_body,
    .end = spmv_end,
    .resumed = answer,
    .cleanup = spmv_cleanup,
    .accepts_body = true,
    .body_kind = API_BODY_JSON_OR_BINARY,
    .query = spmv_query,
};
