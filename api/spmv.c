/* spmv.c — POST /v1/matrices/{id}/spmv: one kernel, y = A*x.
 *
 * Two encodings. JSON: {"kernel","x":[...],"runs","warmup","verify",
 * "async", params...}, answered with {"y":[...],"kernel","stats",...}.
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
#include "daemon/autotune.h"
#include "daemon/log.h"
#include "daemon/vectors.h"

typedef struct spmv_task {
    task base;
    request *r;           /* NULL when async */
    job *job;             /* async only */
    spmvd *d;
    matrix *m;
    const spmv_kernel *k;
    spmv_params p;
    int32_t runs, warmup;
    bool verify, binary;
    int64_t body_limit;
    void *x, *y;
    spmv_stats st;
    double max_rel_err;
    double queue_ms;
    int rc;
    spmv_error err;
    char worker_name[16];
    bool is_auto;         /* "kernel":"auto": k becomes the tuned choice on the worker */
    matrix_tuning tuned;
    /* resident operands, scaling, op and columns (api/decode.h spmv_req) */
    rvec *xv, *yv;
    double alpha, beta, axpby_ms;
    bool trans;
    int32_t ncols;
    int32_t xlen, ylen;   /* values a column: cols and rows, swapped for op t */
    shm_operand xs, ys;   /* operands in shared-memory regions (reg NULL: not) */
    bool x_borrowed, y_borrowed; /* x, y point into a pinned region: not ours to free */
    bufpool_buf *x_buf, *y_buf;  /* x (the binary body), y: pooled buffers (daemon/bufpool.h) */
    int shm_rc;           /* a region failed on the worker: shm_status, message in err */
    spmv_vec xdv, ydv;    /* x, y in CUDA regions: views of the client's device memory */
    bool xcuda, ycuda;
    bool sharded;         /* the matrix's shards, across the MPI ranks, multiply */
    cluster_spmv_stats cst;
} spmv_task;

/* ------------------------------------------------------ the request */

static spmv_task *T(request *r) { return r->state; }

/* max_body_bytes, tightened by what x can take for this matrix: in JSON
 * 64 bytes a value (a %.17g number is at most 24 characters) plus room for
 * the other fields, in binary twice the exact size plus 4 KiB (so an x a
 * little off still gets the 400 that names both lengths). A body beyond
 * that is refused before it is read, so jansson never builds a tree many
 * times the size of any legitimate request. */
static int64_t body_limit(request *r, const spmv_task *t)
{
    int64_t limit = atomic_load(&r->d->limits.max_body_bytes);
    int64_t len = t->m->host.cols > t->m->host.rows ? t->m->host.cols : t->m->host.rows; /* op t takes rows */
    int64_t k = SPMV_MAX_K;
    const char *ks = t->binary ? api_query(r, "k") : NULL;
    if (t->binary)
        k = ks && atoll(ks) >= 1 && atoll(ks) <= SPMV_MAX_K ? atoll(ks) : 1;
    int64_t shape = t->binary ? 4096 + 2 * k * len * (int64_t)spmv_dtype_size(t->m->host.dtype)
                              : 4096 + 64 * k * len;
    return shape < limit ? shape : limit;
}

static void spmv_begin(request *r)
{
    const char *ct = api_header_in(r, MHD_HTTP_HEADER_CONTENT_TYPE);
    bool binary = ct && strncasecmp(ct, "application/octet-stream", 24) == 0;
    bool json = !ct || strncasecmp(ct, "application/json", 16) == 0 ||
                strncasecmp(ct, "application/x-www-form-urlencoded", 33) == 0 ||
                strncasecmp(ct, "text/plain", 10) == 0;
    if (!binary && !json) {
        api_error(r, 415, "unsupported_media_type",
                  "Content-Type %s: send application/json or application/octet-stream", ct);
        return;
    }
    spmv_task *t = calloc(1, sizeof *t);
    if (!t) {
        api_error(r, 500, "out_of_memory", "out of memory");
        return;
    }
    t->binary = binary;
    t->d = r->d;
    r->state = t;
    if (!(t->m = api_get_matrix(r)))
        return;
    t->body_limit = body_limit(r, t);
    if (api_check_content_length(r, t->body_limit) && binary)
        api_body_pooled(r, t->body_limit);
}

static void spmv_body(request *r, const char *data, size_t size)
{
    api_body_collect(r, data, size, T(r)->body_limit);
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
                  "not %s", t->m->meta.id, cluster_matrix_nranks(t->m->shards), what);
        return -1;
    }
    if (cluster_failed(r->d->cluster)) {
        api_error(r, 503, "cluster_failed", "matrix %s is sharded and the cluster has failed: %s", t->m->meta.id,
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
    t->sharded = true;
    return (t->k = api_sharded_kernel(r, name, t->m)) ? 0 : -1;
}

static int pick_kernel(request *r, const char *name)
{
    spmv_task *t = T(r);
    if (t->m->shards)
        return pick_sharded_kernel(r, name);
    if (!name)
        name = t->m->dev ? "gpu.csr.vector" : "cpu.csr.omp";
    t->k = spmv_kernel_find(name);
    if (spmv_kernel_is_auto(t->k)) { /* tuned for the matrix's own device (daemon/autotune.c) */
        t->is_auto = true;
        return 0;
    }
    return api_kernel_check(r, t->k, name, SPMV_OP_SPMV, t->m, "it");
    return 0;
}

static int resolve_params(request *r, const spmv_params *given)
{
    spmv_task *t = T(r);
    spmv_error err = {0};
    if (spmv_params_resolve(t->k, given, &t->p, &err) != SPMV_OK) {
        api_error(r, 400, "invalid_parameter", "%s", err.message);
        return -1;
    }
    return 0;
}

static const char *lookup_query(void *ctx, const char *key) { return api_query(ctx, key); }

/* The worker the product runs on: where `auto` tunes, or the kernel's. */
static worker *task_worker(spmvd *d, spmv_task *t)
{
    if (t->sharded)
        return d->cluster_worker;
    return t->is_auto ? autotune_worker(d, t->m) : spmvd_worker_for(d, t->m, t->k);
}

/* A resident operand: known, on the kernel's device, of A's dtype, n and k.
 * NULL with the answer sent. */
static rvec *operand(request *r, const char *id, const char *what, int32_t n, int32_t k)
{
    spmv_task *t = T(r);
    rvec *v = vstore_get(r->d->vectors, id);
    worker *w = task_worker(r->d, t);
    char msg[512];
    if (!v) {
        api_error(r, 404, "vector_not_found", "%s: no vector %s (deleted, expired or never created)", what, id);
        return NULL;
    }
    if (v->w != w) {
        api_error(r, 409, "wrong_device",
                  "%s: vector %s is on %s but %s runs on %s; vectors are never copied between devices (create it "
                  "with \"like\": \"%s\")", what, id, v->w->name, t->is_auto ? "auto" : t->k->name,
                  w ? w->name : "no device", t->m->meta.id);
    } else if (t->sharded && !cluster_vec_fits(v->dist, t->m->shards, strcmp(what, "y") == 0, msg, sizeof msg)) {
        api_error(r, 400, "shape_mismatch", "%s: %s", what, msg);
    } else if (v->v.dtype != t->m->host.dtype) {
        api_error(r, 400, "dtype_mismatch", "%s: vector %s is %s but matrix %s is %s", what, id,
                  spmv_dtype_name(v->v.dtype), t->m->meta.id, spmv_dtype_name(t->m->host.dtype));
    } else if (v->v.n != n) {
        api_error(r, 400, "shape_mismatch", "%s: vector %s has %lld values a column; %s needs %d (matrix %d x %d%s)",
                  what, id, (long long)v->v.n, what, n, t->m->host.rows, t->m->host.cols, t->trans ? ", op t" : "");
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
    size_t vs = spmv_dtype_size(t->m->host.dtype);
    int st = SHM_OK;
    if ((q->x_shm[0] || q->y_shm[0]) && !api_shm_enabled(r))
        return -1;
    if (q->x_shm[0])
        st = shm_operand_open(r->d->shm, q->x_shm, q->x_shm_offset, (size_t)t->xlen * (size_t)t->ncols * vs, vs, "x",
                              &t->xs, msg, sizeof msg);
    if (st == SHM_OK && q->y_shm[0])
        st = shm_operand_open(r->d->shm, q->y_shm, q->y_shm_offset, (size_t)t->ylen * (size_t)t->ncols * vs, vs, "y",
                              &t->ys, msg, sizeof msg);
    if (st != SHM_OK) {
        api_shm_error(r, st, msg);
        return -1;
    }
    worker *w = task_worker(r->d, t);
    const shm_operand *ops[2] = {&t->xs, &t->ys};
    spmv_vec *views[2] = {&t->xdv, &t->ydv};
    int32_t lens[2] = {t->xlen, t->ylen};
    for (int i = 0; i < 2; i++) {
        void *dp = shm_operand_device(ops[i]);
        if (!dp)
            continue;
        if (!w || w->gpu != ops[i]->reg->device) {
            api_error(r, 409, "wrong_device", "%s: region %s is memory of gpu%d but %s runs on %s; a CUDA region "
                      "serves products on its own GPU", i ? "y" : "x", ops[i]->reg->name, ops[i]->reg->device,
                      t->is_auto ? "auto" : t->k->name, w ? w->name : "no device");
            return -1;
        }
        *views[i] = (spmv_vec){SPMV_DEVICE_GPU, t->m->host.dtype, lens[i], t->ncols, dp};
    }
    t->xcuda = t->xdv.data != NULL;
    t->ycuda = t->ydv.data != NULL;
    return 0;
}

/* x and y as resident vectors, k against the kernel. 0, or -1 answered. */
static int resolve_operands(request *r, const spmv_req *q)
{
    spmv_task *t = T(r);
    if (q->x_vector[0]) {
        if (!(t->xv = operand(r, q->x_vector, "x", t->xlen, 0)))
            return -1;
        t->ncols = t->xv->v.k;
    }
    if (q->y_vector[0]) {
        if (!(t->yv = operand(r, q->y_vector, "y", t->ylen, t->ncols)))
            return -1;
        if (t->xv && (t->yv == t->xv || (t->yv->v.data && t->yv->v.data == t->xv->v.data))) {
            api_error(r, 400, "invalid_request", "x and y are the same vector %s: y = A*x in place is not defined",
                      q->y_vector);
            return -1;
        }
    }
    const spmv_kernel *k = t->is_auto ? spmv_kernel_find("auto") : t->k;
    if (t->ncols > spmv_kernel_max_k(k)) {
        char list[512] = "";
        size_t used = 0;
        for (size_t i = 0; i < spmv_kernel_count() && used < sizeof list; i++) {
            const spmv_kernel *c = spmv_kernel_at(i);
            if (c->op == SPMV_OP_SPMV && spmv_kernel_max_k(c) >= t->ncols)
                used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", c->name);
        }
        api_error(r, 400, "invalid_parameter", "kernel %s multiplies one column at a time, not k = %d; kernels that take "
                  "k columns: %s", k->name, t->ncols, list);
        return -1;
    }
    if (t->verify && (t->trans || t->xv || t->yv || q->x_shm[0] || q->y_shm[0])) {
        api_error(r, 400, "invalid_request", "`verify` takes inline x, op n and y in the answer");
        return -1;
    }
    return resolve_shm(r, q);
}

/* The body (JSON) or the query string (binary) through the decoders, then
 * the kernel against this daemon and matrix. */
static int decode_request(request *r, spmv_params *given, bool *async)
{
    spmv_task *t = T(r);
    spmv_req q;
    api_fail f = {0};
    int32_t cols = t->m->host.cols, rows = t->m->host.rows;
    spmv_dtype dt = t->m->host.dtype;
    int64_t max_runs = atomic_load(&r->d->limits.max_runs);
    int rc = t->binary ? api_decode_spmv_query(lookup_query, r, max_runs, &q, &f)
                       : api_decode_spmv_json(r->body, r->body_len, rows, cols, dt, max_runs, &q, &f);
    if (rc == 0 && t->binary && !q.x_vector[0] && !q.x_shm[0])
        rc = api_check_x_binary(r->body_len, q.trans ? rows : cols, q.k, dt, &f);
    if (rc == 0 && t->binary && (q.x_vector[0] || q.x_shm[0]) && r->body_len)
        rc = (f.status = 400, f.code = "invalid_request",
              snprintf(f.message, sizeof f.message, "x is %s %s: the body must be empty",
                       q.x_shm[0] ? "in the region" : "the vector", q.x_shm[0] ? q.x_shm : q.x_vector), -1);
    if (rc == 0 && t->m->shards && sharded_check(r, &q) != 0) {
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
     * reference of verify, against max_request_work */
    if (api_check_work(t->m->host.nnz, t->m->host.rows,
                       ((int64_t)q.runs + q.warmup + (q.verify ? 1 : 0)) * (q.k > 0 ? q.k : 1),
                       atomic_load(&r->d->limits.max_request_work), &f) != 0) {
        api_error(r, f.status, f.code, "%s", f.message);
        api_spmv_req_free(&q);
        return -1;
    }
    t->runs = q.runs;
    t->warmup = q.warmup;
    t->verify = q.verify;
    t->alpha = q.alpha;
    t->beta = q.beta;
    t->trans = q.trans;
    t->ncols = q.k > 0 ? q.k : 1;
    t->xlen = q.trans ? rows : cols;
    t->ylen = q.trans ? cols : rows;
    *async = q.async;
    *given = q.params;
    if (resolve_operands(r, &q) != 0) {
        api_spmv_req_free(&q);
        return -1;
    }
    if (t->xv || t->xs.reg) {
        api_spmv_req_free(&q);
        return 0;
    }
    if (t->binary) {
        /* the body buffer becomes x: no copy */
        t->x = r->body ? r->body : malloc(1);
        t->x_buf = r->body_buf;
        r->body_buf = NULL;
        r->body = NULL;
        r->body_len = r->body_cap = 0;
    } else {
        t->x = q.x;
        q.x = NULL;
    }
    return t->x ? 0 : -1;
}

/* ----------------------------------------------------------- running */

static void poison(void *y, spmv_dtype dt, int32_t n)
{
#pragma omp parallel for schedule(static) if (n > (1 << 20))
    for (int32_t i = 0; i < n; i++) {
        if (dt == SPMV_FLOAT32)
            ((float *)y)[i] = NAN;
        else
            ((double *)y)[i] = NAN;
    }
}

/* y = alpha*op(A)*x + beta*y with at least one resident operand: an
 * inline x is staged into a vector of the worker's device, a y that goes
 * back in the answer is read from one. */
static int run_resident(spmv_task *t, worker *w)
{
    spmv_gpu_ctx *ctx = worker_gpu_ctx(w);
    spmv_device_kind dev = ctx ? SPMV_DEVICE_GPU : SPMV_DEVICE_CPU;
    spmv_dtype dt = t->m->host.dtype;
    spmv_vec xs = {0}, ys = {0};
    const spmv_vec *x = t->xv ? &t->xv->v : t->xcuda ? &t->xdv : &xs;
    spmv_vec *y = t->yv ? &t->yv->v : t->ycuda ? &t->ydv : &ys;
    spmv_apply_args a = {t->alpha, t->beta, t->warmup, t->runs};
    int rc = SPMV_OK;
    if (!t->xv && !t->xcuda &&
        ((rc = spmv_vec_alloc(ctx, dev, dt, t->xlen, t->ncols, &xs, &t->err)) ||
         (rc = spmv_vec_write(ctx, &xs, t->x, &t->err))))
        goto out;
    if (!t->yv && !t->ycuda && (rc = spmv_vec_alloc(ctx, dev, dt, t->ylen, t->ncols, &ys, &t->err)))
        goto out;
    if ((rc = worker_run_apply(w, t->m, t->k, &t->p, t->trans, &a, x, y, &t->st, &t->axpby_ms, &t->err)))
        goto out;
    if (!t->yv && !t->ycuda)
        rc = spmv_vec_read(ctx, &ys, t->y, &t->err);
    else if (t->ycuda && ctx) /* the answer says y is there */
        rc = spmv_vec_sync(ctx, &t->err);
out:
    spmv_vec_free(ctx, &xs);
    spmv_vec_free(ctx, &ys);
    return rc;
}

/* Operands in regions onto the worker (shm_operand_stage): x from the
 * pinned pages or read into a pooled buffer, y to be written to the pinned
 * pages or staged in one. SPMV_OK, or SPMV_ERR_INVALID with t->shm_rc and
 * the message set. */
static int shm_stage(spmv_task *t, worker *w)
{
    bool gpu = worker_gpu_ctx(w) != NULL;
    int st = SHM_OK;
    void *where;
    if (t->xs.reg && !t->xcuda) {
        bool dma = gpu && shm_operand_dma(&t->xs); /* then no buffer is needed */
        if (!dma && !(t->x_buf = bufpool_get(t->d->iobufs, t->xs.bytes)))
            return t->rc = spmv_error_set(&t->err, SPMV_ERR_NOMEM, 0, "out of memory for x");
        st = shm_operand_stage(&t->xs, gpu, dma ? NULL : t->x_buf->ptr, true, &where, t->err.message,
                               sizeof t->err.message);
        t->x = where;
        t->x_borrowed = dma;
    }
    if (!st && t->ys.reg && !t->ycuda &&
        !(st = shm_operand_stage(&t->ys, gpu, NULL, false, &where, t->err.message, sizeof t->err.message)) && where) {
        t->y = where; /* the pinned pages; else y comes from the pool below */
        t->y_borrowed = true;
    }
    if (st)
        t->shm_rc = st, t->rc = SPMV_ERR_INVALID;
    return t->rc;
}

/* y into its region and both regions checked again (shm_operand_unstage). */
static void shm_unstage(spmv_task *t)
{
    int st = SHM_OK;
    if (t->ys.reg && !t->ycuda)
        st = shm_operand_unstage(&t->ys, t->y, true, t->err.message, sizeof t->err.message);
    if (!st && t->xs.reg && !t->xcuda)
        st = shm_operand_unstage(&t->xs, t->x, false, t->err.message, sizeof t->err.message);
    if (st)
        t->shm_rc = st, t->rc = SPMV_ERR_INVALID;
}

static void spmv_run(task *base, worker *w)
{
    spmv_task *t = (spmv_task *)base;
    int32_t rows = t->m->host.rows;
    spmv_dtype dt = t->m->host.dtype;
    int64_t ny = (int64_t)t->ylen * t->ncols;
    size_t bytes = (size_t)(ny ? ny : 1) * spmv_dtype_size(dt);
    t->queue_ms = base->queue_ms;
    snprintf(t->worker_name, sizeof t->worker_name, "%s", w->name);
    if (t->job)
        job_set_running(t->job);
    if (job_cancelled(t->job)) {
        t->rc = spmv_error_set(&t->err, SPMV_ERR_UNAVAILABLE, 0, "cancelled (DELETE /v1/jobs/%s) before it ran",
                               job_id(t->job));
        return;
    }
    if (((t->xs.reg && !t->xcuda) || (t->ys.reg && !t->ycuda)) && shm_stage(t, w) != SPMV_OK)
        return;
    if (!t->yv && !t->y_borrowed && !t->ycuda) {
        if (!(t->y_buf = bufpool_get(t->d->iobufs, bytes))) {
            t->rc = spmv_error_set(&t->err, SPMV_ERR_NOMEM, 0, "out of memory for y");
            return;
        }
        t->y = t->y_buf->ptr;
        /* a GPU product poisons its device y and copies all of it back */
        if (!worker_gpu_ctx(w))
            poison(t->y, dt, (int32_t)(ny < INT32_MAX ? ny : INT32_MAX));
    }
    if (t->sharded) {
        cluster_operands io = {.x = t->xv ? NULL : t->x, .xv = t->xv ? t->xv->dist : NULL,
                               .y = t->yv ? NULL : t->y, .yv = t->yv ? t->yv->dist : NULL,
                               .alpha = t->alpha, .beta = t->beta};
        t->rc = worker_cluster_spmv(w, t->m, t->k, &t->p, &io, t->warmup, t->runs, &t->cst, &t->err);
        t->st = t->cst.st;
    } else if (t->is_auto) {
        if ((t->rc = autotune_get_k(t->d, w, t->m, t->ncols, &t->tuned, &t->err)) != SPMV_OK)
            return;
        t->k = t->tuned.kernel;
        if ((t->rc = spmv_params_resolve(t->k, &t->tuned.params, &t->p, &t->err)) != SPMV_OK)
            return;
    }
    if (t->sharded)
        ; /* done above */
    else if (t->xv || t->yv || t->xcuda || t->ycuda || t->alpha != 1.0)
        t->rc = run_resident(t, w);
    else
        t->rc = worker_run_kernel_k(w, t->m, t->k, &t->p, t->trans, t->ncols, t->x, t->y, t->warmup, t->runs,
                                    &t->st, &t->err);
    if (t->rc == SPMV_OK && (t->xs.reg || t->ys.reg))
        shm_unstage(t);
    if (t->rc == SPMV_OK && t->verify) {
        void *ref = malloc(bytes);
        if (!ref) {
            t->rc = spmv_error_set(&t->err, SPMV_ERR_NOMEM, 0, "out of memory for the reference");
            return;
        }
        size_t vs = spmv_dtype_size(dt);
        t->max_rel_err = 0;
        for (int32_t j = 0; j < t->ncols; j++) { /* the worst column */
            spmv_reference(&t->m->host.csr, (char *)t->x + (size_t)j * t->xlen * vs, (char *)ref + (size_t)j * rows * vs);
            double e = spmv_max_rel_err(dt, (char *)t->y + (size_t)j * rows * vs, (char *)ref + (size_t)j * rows * vs, rows);
            if (!(e <= t->max_rel_err))
                t->max_rel_err = e;
        }
        free(ref);
    }
    log_info("spmv: %s on %s (%dx%d nnz %lld) by %s: %d runs, median %.4f ms, queued %.3f ms%s",
             t->k->name, t->m->meta.id, t->m->host.rows, t->m->host.cols, (long long)t->m->host.nnz, w->name,
             t->runs, t->st.median_ms, t->queue_ms, t->rc ? " FAILED" : "");
}


static json_t *stats_json(const spmv_task *t)
{
    json_t *s = api_stats_json(&t->st);
    if (s && t->sharded) {
        json_object_set_new(s, "compute_ms", api_json_real(t->cst.compute_ms));
        json_object_set_new(s, "comm_ms", api_json_real(t->cst.comm_ms));
        if (t->cst.device.runs > 0) /* GPU shards: the runs by CUDA events, as one GPU's product is timed */
            json_object_set_new(s, "device_median_ms", api_json_real(t->cst.device.median_ms));
    }
    return s;
}

/* A sharded product's split: stats gets compute_ms and comm_ms (mean per
 * run of the slowest rank's), and "cluster" the rest. */
static json_t *sharded_json(const spmv_task *t)
{
    const cluster_shard_info *info;
    int n = cluster_matrix_shards(t->m->shards, &info);
    json_t *kernels = json_array();
    for (int q = 0; q < n && q < 8; q++)
        json_array_append_new(kernels, json_string(t->cst.kernels[q]));
    json_t *o = json_pack("{s:i, s:o, s:o, s:o, s:I, s:o}", "ranks", n, "compute_ms",
                          api_json_real(t->cst.compute_ms), "comm_ms", api_json_real(t->cst.comm_ms), "gather_ms",
                          api_json_real(t->cst.gather_ms), "halo_values", (json_int_t)t->cst.halo_values, "kernels",
                          kernels);
    if (o && t->cst.device.runs > 0)
        json_object_set_new(o, "device_stats", api_stats_json(&t->cst.device));
    return o;
}

/* Everything of the answer but y. */
static json_t *result_json(const spmv_task *t)
{
    json_t *o = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:s, s:i, s:o, s:o}", "kernel", t->k->name, "matrix",
                          t->m->meta.id, "device", t->worker_name, "params", api_params_json(t->k, &t->p), "stats",
                          stats_json(t), "queue_ms", api_json_real(t->queue_ms), "op", t->trans ? "t" : "n",
                          "k", t->ncols, "alpha", api_json_real(t->alpha), "beta", api_json_real(t->beta));
    if (o && (t->alpha != 1.0 || t->beta != 0.0))
        json_object_set_new(o, "axpby_ms", api_json_real(t->axpby_ms));
    if (o && t->xv)
        json_object_set_new(o, "x", json_pack("{s:s}", "vector", t->xv->id));
    if (o && t->xs.reg)
        json_object_set_new(o, "x", json_pack("{s:s, s:I}", "shm", t->xs.reg->name, "offset", (json_int_t)t->xs.offset));
    if (o && t->sharded)
        json_object_set_new(o, "cluster", sharded_json(t));
    if (o && t->is_auto) /* the choice and what tuning cost, in every answer that used it */
        json_object_set_new(o, "auto", autotune_json(&t->tuned));
    if (o && t->verify)
        json_object_set_new(o, "verify", json_pack("{s:o, s:s}", "max_rel_err", api_json_real(t->max_rel_err),
                                                   "reference", "cpu.csr.serial"));
    return o;
}

/* {"y":[...], <rest of result>} written straight out: y can be millions of
 * numbers, too many to build as jansson nodes first. */
static char *json_answer(const spmv_task *t, size_t *len)
{
    json_t *rest = result_json(t);
    size_t rlen = 0;
    char *rtext = rest ? api_json_dump(rest, &rlen) : NULL;
    json_decref(rest);
    char *text = NULL;
    FILE *f = rtext ? open_memstream(&text, len) : NULL;
    if (f) {
        fputs("{\"y\":", f);
        size_t col = (size_t)t->ylen * spmv_dtype_size(t->m->host.dtype);
        if (t->yv)
            fprintf(f, "{\"vector\":\"%s\"}", t->yv->id);
        else if (t->ys.reg)
            fprintf(f, "{\"shm\":\"%s\",\"offset\":%lld}", t->ys.reg->name, (long long)t->ys.offset);
        else if (t->ncols == 1)
            api_json_write_vector(f, t->m->host.dtype, t->y, t->ylen);
        else
            for (int32_t j = 0; j < t->ncols; j++) { /* k columns: a list of k arrays */
                fputc(j ? ',' : '[', f);
                api_json_write_vector(f, t->m->host.dtype, (char *)t->y + j * col, t->ylen);
            }
        if (!t->yv && !t->ys.reg && t->ncols > 1)
            fputc(']', f);
        fputc(',', f);
        fwrite(rtext + 1, 1, rlen - 1, f); /* the object without its '{' */
        fputc('\n', f);
        fclose(f);
    }
    free(rtext);
    return text;
}

static void answer(request *r)
{
    spmv_task *t = T(r);
    if (t->shm_rc) {
        api_shm_error(r, t->shm_rc, t->err.message);
        return;
    }
    if (t->rc != SPMV_OK) {
        if (t->rc == SPMV_ERR_UNAVAILABLE && atomic_load(&r->d->draining))
            api_error(r, 503, "shutting_down", "the daemon is shutting down");
        else if (t->sharded && t->rc == SPMV_ERR_UNAVAILABLE && cluster_failed(r->d->cluster))
            api_error(r, 503, "cluster_failed", "%s", t->err.message);
        else
            api_error_spmv(r, t->rc, &t->err);
        return;
    }
    if (t->binary && !t->ys.reg) { /* y in a region: the JSON result is the answer */
        json_t *hdr = result_json(t);
        char *htext = hdr ? api_json_dump(hdr, NULL) : NULL;
        json_decref(hdr);
        size_t n = t->yv ? 0 : (size_t)t->ylen * (size_t)t->ncols * spmv_dtype_size(t->m->host.dtype);
        if (t->yv)
            api_bytes(r, 200, "application/octet-stream", NULL, 0);
        else
            api_bytes_pooled(r, 200, "application/octet-stream", t->y_buf, n);
        if (!t->yv)
            t->y = NULL, t->y_buf = NULL; /* the response owns it now */
        if (htext)
            api_header(r, "X-SpMV-Stats", htext);
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

static void spmv_task_free(spmv_task *t)
{
    if (!t)
        return;
    matrix_unref(t->m);
    rvec_unref(t->xv);
    rvec_unref(t->yv);
    if (t->x_borrowed || t->x_buf)
        t->x = NULL;
    if (t->y_borrowed || t->y_buf)
        t->y = NULL;
    bufpool_put(t->x_buf);
    bufpool_put(t->y_buf);
    shm_operand_close(&t->xs);
    shm_operand_close(&t->ys);
    job_unref(t->job);
    free(t->x);
    free(t->y);
    free(t);
}

static void spmv_finish(task *base, int status)
{
    spmv_task *t = (spmv_task *)base;
    if (status != SPMV_OK) {
        t->rc = status;
        spmv_error_set(&t->err, status, 0, "the daemon is shutting down");
    }
    if (t->r) {
        api_task_done(t->r);
        return;
    }
    /* async: the result goes to the job, y as a JSON array */
    size_t len = 0;
    char *text = t->rc == SPMV_OK ? json_answer(t, &len) : NULL; /* before len is read */
    if (t->shm_rc) {
        const char *code;
        int http = api_shm_status(t->shm_rc, &code);
        job_finish(t->job, http, api_error_body(code, t->err.message));
    } else
        api_job_finish_answer(t->job, t->rc, &t->err, text, len);
    spmv_task_free(t);
}

void api_answer_job(request *r, job *j)
{
    char loc[64];
    snprintf(loc, sizeof loc, "/v1/jobs/%s", job_id(j));
    api_json(r, 202, job_to_json(j));
    api_header(r, MHD_HTTP_HEADER_LOCATION, loc);
}

void api_job_finish_answer(job *j, int rc, const spmv_error *err, char *text, size_t len)
{
    if (rc != SPMV_OK) {
        const char *code;
        int http = api_status_of(rc, &code);
        job_finish(j, http, api_error_body(code, err->message));
        free(text);
        return;
    }
    json_t *body = text ? json_loadb(text, len, JSON_DECODE_ANY, NULL) : NULL;
    free(text);
    if (body)
        job_finish(j, 200, body);
    else
        job_finish(j, 500, api_error_body("out_of_memory", "out of memory writing the result"));
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
        job_finish(j, 503, api_error_body("queue_full", "the queue was full"));
        api_error(r, 503, prc == SPMV_ERR_LIMIT ? "queue_full" : "shutting_down",
                  prc == SPMV_ERR_LIMIT ? "the %s queue is full; retry later" : "the daemon is shutting down (%s)",
                  w->name);
        job_unref(j);
        return false; /* the task stays r->state and is freed with the request */
    }
    r->state = NULL;
    api_answer_job(r, j);
    job_unref(j);
    return true;
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
    worker *w = task_worker(r->d, t);
    t->base.run = spmv_run;
    t->base.finish = spmv_finish;
    if (!async) {
        t->r = r;
        api_submit_and_suspend(r, w, &t->base);
        return;
    }
    /* async: the task lives on its own, the request answers 202 now */
    api_submit_async(r, w, &t->base, &t->job, "spmv", t->m->meta.id);
}

static void spmv_cleanup(request *r)
{
    spmv_task_free(T(r));
    r->state = NULL;
}

const route_handlers api_spmv_post = {
    .begin = spmv_begin,
    .body = spmv_body,
    .end = spmv_end,
    .resumed = answer,
    .cleanup = spmv_cleanup,
    .accepts_body = true,
};
