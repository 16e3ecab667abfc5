/* spmv.c — the sharded product on one rank.
 *
 * Every rank runs the same loop, once per warm-up and timed run:
 *
 *   1. pack the x entries each peer wants and post the exchange
 *      (MPI_Isend/Irecv on host shards; a pack kernel and grouped
 *      ncclSend/ncclRecv on the exchange stream on GPU shards);
 *   2. multiply the local block, y = A_loc x_loc, while it runs;
 *   3. wait for the ghost entries (deadline-bounded; on a GPU the stream
 *      waits on the device, so step 4 is queued at once);
 *   4. add the off-diagonal block's product, y += A_off x_ghost.
 *
 * A GPU shard whose boundary rows are few (a mesh's) is split instead
 * (split_plan): step 2 multiplies its interior rows alone, and its edge
 * rows, local and ghost entries together, are computed on the exchange's
 * stream behind the ghosts, beside step 2, so step 4 has nothing left to
 * do (docs/cluster.md, "Interior and edge").
 *
 * Communication is the time posting the exchange took plus the time it
 * ended after the local product (what the local product did not hide:
 * host clock on host shards, CUDA events on GPU shards), compute the rest
 * of the run; both are reported per run. The products
 * are the engine's own kernels on per-shard spmv_matrix / spmv_gpu_matrix
 * objects, so every kernel of the catalogue that reads the shard's format
 * serves sharded products; `auto` tunes each rank's local block once on
 * the shard's device and keeps the winner. The same kernel multiplies the
 * off-diagonal block. A rank whose kernel cannot run (a format the padding
 * rule refuses on its shard) still takes part in every exchange, so the
 * others are not left waiting, and reports its error afterwards.
 */
#ifdef SPMV_HAVE_MPI

#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/internal.h"

struct cluster_local {
    cluster_shard s;              /* ranges and halo plan; s.local / s.off alias loc.csr / off.csr */
    spmv_matrix loc, off;         /* host blocks (own the CSR arrays) */
    spmv_dtype dtype;
    void *sbuf, *ghost, *tmp;     /* host scratch: nsend, nghost, rows values */
    /* auto's choice for this shard (tuned on first use) */
    bool tuned;
    const spmv_kernel *tk;
    spmv_params tp;
    /* the shard on this rank's GPU */
    spmv_gpu_matrix *gloc, *goff; /* goff: the off-diagonal block's rows that hold entries */
    int32_t *off_rows, n_off;     /* which local rows those are (host) */
    spmv_gpu_halo *ghalo;
    char device[16];
    /* A GPU shard whose rows that read ghost entries are few is split
     * (split_plan): gloc holds only the rows [lo, hi) of the local block,
     * which read none (the interior), and goff every other row (the edge,
     * off_rows) with its local and ghost entries, the ghosts numbered
     * after the shard's columns. The edge is computed on the exchange's
     * stream as soon as the ghosts are in, beside the interior's product,
     * so nothing is left to run after it. Unsplit: goff is the compacted
     * off-diagonal block, added after the local product. */
    bool split;
    int32_t lo, hi;
    spmv_csr inner;               /* host view of rows [lo, hi): own row offsets, loc's columns and values */
};

/* ------------------------------------------------------------- the GPU */

int cluster_gpu(cluster *c, spmv_gpu_ctx **out, spmv_error *err)
{
    if (!c->gpu_tried) {
        c->gpu_tried = true;
        const char *why = NULL;
        int n = spmv_gpu_count(&why);
        const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
        int local = lr ? atoi(lr) : c->rank;
        if (n <= 0) {
            snprintf(c->gpu_reason, sizeof c->gpu_reason, "rank %d (%s) has no GPU: %s", c->rank, c->host,
                     why ? why : "none found");
        } else {
            spmv_error e = {0};
            c->gpu_index = local % n;
            if (spmv_gpu_ctx_new(c->gpu_index, 0, &c->gpu, &e) != SPMV_OK) {
                snprintf(c->gpu_reason, sizeof c->gpu_reason, "rank %d: GPU %d: %.200s", c->rank, c->gpu_index,
                         e.message);
                c->gpu = NULL;
            } else {
                spmv_gpu_ctx_set_limits(c->gpu, &c->o.limits);
            }
        }
    }
    *out = c->gpu;
    return c->gpu ? SPMV_OK : spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", c->gpu_reason);
}

/* What the GPU's waits for the peers ask (spmv_gpu_comm_watch). */
static int gpu_watch(void *ctx, double waited_ms, double *next_ms, spmv_error *err)
{
    return cluster_watch(ctx, "a sharded product on the GPUs", waited_ms, next_ms, err);
}

int cluster_nccl_setup(cluster *c, spmv_error *err)
{
    spmv_gpu_ctx *ctx;
    unsigned char id[SPMV_GPU_COMM_ID_BYTES];
    memset(id, 0, sizeof id);
    int rc = cluster_gpu(c, &ctx, err);
    /* rank 0 draws the id and sends it to every rank, whatever its own
     * state: the others wait for it */
    if (c->rank == 0) {
        spmv_error e = {0};
        if (rc == SPMV_OK && (rc = spmv_gpu_comm_id(id, &e)) != SPMV_OK)
            *err = e;
        req_list r;
        reqs_init(&r);
        int wrc = SPMV_OK;
        for (int p = 1; p < c->size && wrc == SPMV_OK; p++)
            wrc = reqs_send(c, &r, id, sizeof id, p, TAG_NCCL_ID, err);
        if (wrc == SPMV_OK)
            wrc = reqs_wait(c, &r, "sending the NCCL id", err);
        reqs_free(&r);
        if (wrc != SPMV_OK)
            return wrc;
    } else {
        req_list r;
        reqs_init(&r);
        spmv_error e = {0};
        int wrc = reqs_recv(c, &r, id, sizeof id, 0, TAG_NCCL_ID, &e);
        if (wrc == SPMV_OK)
            wrc = reqs_wait(c, &r, "waiting for the NCCL id", &e);
        reqs_free(&r);
        if (wrc != SPMV_OK) {
            *err = e;
            return wrc;
        }
    }
    if (rc != SPMV_OK)
        return rc;
    rc = spmv_gpu_comm_new(ctx, c->size, c->rank, id, c->o.timeout_ms, c->o.halo_ipc, &c->nccl, err);
    if (rc == SPMV_OK)
        spmv_gpu_comm_watch_set(c->nccl, gpu_watch, c);
    return rc;
}

/* -------------------------------------------------------- a local shard */

static int host_matrix(spmv_csr *csr, const spmv_format_limits *lim, spmv_matrix *m)
{
    memset(m, 0, sizeof *m);
    SPMV_COPY_SHAPE(m, csr);
    m->hack_size = SPMV_HACK_SIZE_DEFAULT;
    m->formats = SPMV_FMT_CSR;
    m->csr = *csr;
    m->limits = *lim;
    return SPMV_OK;
}

int cluster_local_new(cluster *c, cluster_shard *s, spmv_dtype dtype, cluster_local **out, spmv_error *err)
{
    *out = NULL;
    cluster_local *l = calloc(1, sizeof *l);
    if (!l)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for a shard");
    size_t vs = spmv_dtype_size(dtype);
    int32_t rows = s->row_end - s->row_begin;
    l->sbuf = malloc((size_t)(s->halo.nsend ? s->halo.nsend : 1) * vs);
    l->ghost = malloc((size_t)(s->halo.nghost ? s->halo.nghost : 1) * vs);
    l->tmp = malloc((size_t)(rows ? rows : 1) * vs);
    if (!l->sbuf || !l->ghost || !l->tmp) {
        free(l->sbuf);
        free(l->ghost);
        free(l->tmp);
        free(l);
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for the scratch of a shard of %d rows", rows);
    }
    /* the blocks move into host matrices; the shard keeps aliases */
    l->s = *s;
    memset(s, 0, sizeof *s);
    l->dtype = dtype;
    host_matrix(&l->s.local, &c->o.limits, &l->loc);
    host_matrix(&l->s.off, &c->o.limits, &l->off);
    snprintf(l->device, sizeof l->device, "cpu");
    *out = l;
    return SPMV_OK;
}

static void local_drop_gpu(cluster *c, cluster_local *l);

void cluster_local_free(cluster *c, cluster_local *l)
{
    if (!l)
        return;
    if (c && c->gpu) /* device copies go before the context they live in */
        local_drop_gpu(c, l);
    spmv_matrix_free(&l->loc);
    spmv_matrix_free(&l->off);
    memset(&l->s.local, 0, sizeof l->s.local);
    memset(&l->s.off, 0, sizeof l->s.off);
    cluster_shard_free(&l->s);
    free(l->sbuf);
    free(l->ghost);
    free(l->tmp);
    free(l);
}

/* Frees the device copies on the rank's context (before the context). */
static void local_drop_gpu(cluster *c, cluster_local *l)
{
    if (l->gloc)
        spmv_gpu_matrix_free(c->gpu, l->gloc);
    if (l->goff)
        spmv_gpu_matrix_free(c->gpu, l->goff);
    spmv_gpu_halo_free(c->nccl, l->ghalo);
    free(l->off_rows);
    free(l->inner.row_ptr);
    l->gloc = l->goff = NULL;
    l->ghalo = NULL;
    l->off_rows = NULL;
    l->n_off = 0;
    l->split = false;
    memset(&l->inner, 0, sizeof l->inner);
}

const cluster_shard *cluster_local_shard(const cluster_local *l) { return &l->s; }
const char *cluster_local_device(const cluster_local *l) { return l->device; }
const spmv_csr *cluster_local_csr(const cluster_local *l) { return &l->loc.csr; }

size_t cluster_local_bytes(const cluster_local *l)
{
    size_t b = spmv_matrix_format_bytes(&l->loc, SPMV_FMT_ALL) + spmv_matrix_format_bytes(&l->off, SPMV_FMT_ALL);
    if (l->split) /* the interior's own row offsets (what auto tunes on) */
        b += ((size_t)l->inner.rows + 1) * sizeof *l->inner.row_ptr;
    return b + ((size_t)l->s.halo.nghost + (size_t)l->s.halo.nsend) * 4;
}

/* A block's CSR straight to the device: its columns keep their order
 * (owned ones shifted by col_begin, ghosts numbered in ascending global
 * order), so the engine's CSR contract holds and nothing is sorted. */
static int block_to_gpu(spmv_gpu_ctx *ctx, const spmv_csr *csr, spmv_gpu_matrix **out, spmv_error *err)
{
    *out = NULL;
    if (csr->rows == 0 || csr->nnz == 0) /* nothing to multiply: no device copy */
        return SPMV_OK;
    return spmv_gpu_matrix_upload_csr(ctx, csr, csr->dtype, SPMV_FMT_CSR, SPMV_HACK_SIZE_DEFAULT, out, NULL, err);
}

/* The off-diagonal block on the device holds only its rows with entries
 * (a few boundary rows of a mesh's block, however many rows the block
 * has): its product is n_off sums, which spmv_gpu_halo_off_add adds into
 * y's rows, rather than a pass over every row of y. The columns and values are the
 * block's own (compaction keeps their order); only the row offsets are
 * new. */
static int off_to_gpu(spmv_gpu_ctx *ctx, cluster_local *l, spmv_error *err)
{
    const spmv_csr *a = &l->off.csr;
    int32_t n = 0;
    for (int32_t i = 0; i < a->rows; i++)
        n += a->row_ptr[i + 1] > a->row_ptr[i];
    l->n_off = n;
    l->off_rows = malloc((size_t)(n ? n : 1) * sizeof *l->off_rows);
    int32_t *ptr = malloc(((size_t)n + 1) * sizeof *ptr);
    if (!l->off_rows || !ptr) {
        free(ptr);
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for %d off-diagonal rows", n);
    }
    ptr[0] = 0;
    for (int32_t i = 0, j = 0; i < a->rows; i++)
        if (a->row_ptr[i + 1] > a->row_ptr[i]) {
            l->off_rows[j] = i;
            ptr[++j] = a->row_ptr[i + 1];
        }
    spmv_csr c = *a;
    c.rows = n;
    c.row_ptr = ptr;
    int rc = block_to_gpu(ctx, &c, &l->goff, err);
    free(ptr);
    return rc;
}

/* Whether to split the shard (cluster_shard_interior), and the host view
 * of its interior rows if so. */
static int split_plan(cluster_local *l, spmv_error *err)
{
    const spmv_csr *a = &l->loc.csr;
    int32_t lo, hi;
    l->split = false;
    if (!cluster_shard_interior(&l->s, &lo, &hi))
        return SPMV_OK;
    int32_t *ptr = malloc(((size_t)(hi - lo) + 1) * sizeof *ptr);
    if (!ptr)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for the interior rows of a shard (%d)", hi - lo);
    for (int32_t i = lo; i <= hi; i++)
        ptr[i - lo] = a->row_ptr[i] - a->row_ptr[lo];
    l->inner = (spmv_csr){.rows = hi - lo, .cols = a->cols, .nnz = ptr[hi - lo], .row_ptr = ptr,
                          .col = a->col + a->row_ptr[lo],
                          .val = (char *)a->val + (size_t)a->row_ptr[lo] * spmv_dtype_size(a->dtype),
                          .dtype = a->dtype};
    l->lo = lo;
    l->hi = hi;
    l->split = true;
    return SPMV_OK;
}

/* A split shard's edge on the device: the rows outside [lo, hi), each its
 * local entries then its ghost ones (columns cols + ghost index), so every
 * row's columns still increase; an edge row with no entry is there too
 * (its y is written 0). */
static int edge_to_gpu(spmv_gpu_ctx *ctx, cluster_local *l, spmv_error *err)
{
    const spmv_csr *a = &l->loc.csr, *o = &l->off.csr;
    int32_t rows = a->rows, n = rows - (l->hi - l->lo);
    size_t vs = spmv_dtype_size(a->dtype);
    int64_t nnz = (a->row_ptr[l->lo] - a->row_ptr[0]) + (a->row_ptr[rows] - a->row_ptr[l->hi]) +
                  (o->row_ptr[l->lo] - o->row_ptr[0]) + (o->row_ptr[rows] - o->row_ptr[l->hi]);
    l->n_off = n;
    l->off_rows = malloc((size_t)n * sizeof *l->off_rows);
    int32_t *ptr = malloc(((size_t)n + 1) * sizeof *ptr), *col = malloc((size_t)(nnz ? nnz : 1) * sizeof *col);
    char *val = malloc((size_t)(nnz ? nnz : 1) * vs);
    int rc = SPMV_OK;
    if (!l->off_rows || !ptr || !col || !val) {
        rc = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for the %d edge rows of a shard", n);
        goto out;
    }
    ptr[0] = 0;
    for (int32_t i = 0, j = 0, e = 0; i < rows; i++) {
        if (i == l->lo)
            i = l->hi;
        if (i >= rows)
            break;
        for (int32_t q = a->row_ptr[i]; q < a->row_ptr[i + 1]; q++, e++) {
            col[e] = a->col[q];
            memcpy(val + (size_t)e * vs, (const char *)a->val + (size_t)q * vs, vs);
        }
        for (int32_t q = o->row_ptr[i]; q < o->row_ptr[i + 1]; q++, e++) {
            col[e] = a->cols + o->col[q];
            memcpy(val + (size_t)e * vs, (const char *)o->val + (size_t)q * vs, vs);
        }
        l->off_rows[j] = i;
        ptr[++j] = e;
    }
    spmv_csr c = {.rows = n, .cols = a->cols + o->cols, .nnz = nnz, .row_ptr = ptr, .col = col, .val = val,
                  .dtype = a->dtype};
    rc = nnz ? spmv_gpu_matrix_upload_csr(ctx, &c, c.dtype, SPMV_FMT_CSR, SPMV_HACK_SIZE_DEFAULT, &l->goff, NULL, err)
             : SPMV_OK;
out:
    free(ptr);
    free(col);
    free(val);
    return rc;
}

int cluster_local_to_gpu(cluster *c, cluster_local *l, spmv_error *err)
{
    spmv_gpu_ctx *ctx;
    int rc = cluster_gpu(c, &ctx, err);
    if (rc == SPMV_OK)
        rc = split_plan(l, err);
    if (rc == SPMV_OK && l->split) {
        if ((rc = block_to_gpu(ctx, &l->inner, &l->gloc, err)) == SPMV_OK)
            rc = edge_to_gpu(ctx, l, err);
    } else if (rc == SPMV_OK && (rc = block_to_gpu(ctx, &l->loc.csr, &l->gloc, err)) == SPMV_OK) {
        rc = off_to_gpu(ctx, l, err);
    }
    if (rc != SPMV_OK) {
        local_drop_gpu(c, l);
        return rc;
    }
    snprintf(l->device, sizeof l->device, "gpu%d", c->gpu_index);
    return SPMV_OK;
}

/* ------------------------------------------------------------- kernels */

static int tune_cpu(void *ctx, const spmv_kernel *k, const spmv_params *p, const void *x, void *y, int32_t warmup,
                    int32_t runs, spmv_stats *st, spmv_error *err)
{
    return spmv_cpu_run(k, &((cluster_local *)ctx)->loc, p, x, y, warmup, runs, st, err);
}

typedef struct gpu_tune {
    spmv_gpu_ctx *ctx;
    spmv_gpu_matrix *m;
} gpu_tune;

static int tune_gpu(void *ctx, const spmv_kernel *k, const spmv_params *p, const void *x, void *y, int32_t warmup,
                    int32_t runs, spmv_stats *st, spmv_error *err)
{
    gpu_tune *g = ctx;
    return spmv_gpu_run(g->ctx, k, g->m, p, x, y, warmup, runs, st, err);
}

/* The kernel this shard runs: k itself, or for auto the local block's
 * winner, tuned once on the shard's device. */
static int shard_kernel(cluster *c, cluster_local *l, const spmv_kernel *k, const spmv_params *p,
                        const spmv_kernel **out, spmv_params *par, spmv_error *err)
{
    if (!spmv_kernel_is_auto(k)) {
        *out = k;
        return spmv_params_resolve(k, p, par, err);
    }
    bool on_gpu = strncmp(l->device, "gpu", 3) == 0;
    if (!l->tuned && on_gpu && !l->gloc) { /* nothing local to tune on: any GPU kernel serves the off block */
        l->tk = spmv_kernel_find("gpu.csr.vector");
        memset(&l->tp, 0, sizeof l->tp);
        l->tuned = l->tk != NULL;
        if (!l->tuned)
            return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "auto: gpu.csr.vector is missing from this build");
    }
    if (!l->tuned) {
        spmv_tune_options o = {.device = on_gpu ? SPMV_DEVICE_GPU : SPMV_DEVICE_CPU,
                               .budget_ms = c->o.tune_budget_ms, .max_runs = c->o.tune_max_runs,
                               .seed = 0x5eed + (uint64_t)c->rank};
        spmv_tune_result r;
        gpu_tune g = {c->gpu, l->gloc};
        int rc = l->gloc ? spmv_tune(l->split ? &l->inner : &l->loc.csr, &o, tune_gpu, &g, &r, err)
                         : spmv_tune(&l->loc.csr, &o, tune_cpu, l, &r, err);
        if (rc != SPMV_OK)
            return rc;
        l->tk = r.kernel;
        l->tp = r.params;
        l->tuned = true;
    }
    *out = l->tk;
    return spmv_params_resolve(l->tk, &l->tp, par, err);
}

/* The kernel of the off-diagonal block on the host: k's own, but for
 * SPSELL, which holds only a square, exactly symmetric matrix (the local
 * block of a symmetric matrix is one; a block of ghost columns is not),
 * its unmirrored layout, PSELL. */
static const spmv_kernel *off_kernel(const spmv_kernel *k)
{
    const spmv_kernel *p = k->format == SPMV_FMT_SPSELL ? spmv_kernel_find("cpu.psell.omp") : NULL;
    return p ? p : k;
}

/* The formats k (local block) and off_kernel(k) (off-diagonal block)
 * read, built once into the host blocks. */
static int host_formats(cluster_local *l, const spmv_kernel *k, spmv_error *err)
{
    if (k->device != SPMV_DEVICE_CPU)
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s runs on a GPU; this shard (rank %d) is on the host",
                              k->name, l->s.rank);
    spmv_format off = off_kernel(k)->format;
    int rc = SPMV_OK;
    if (k->format != SPMV_FMT_CSR && l->loc.nnz && (rc = spmv_matrix_add_format(&l->loc, k->format, err)) != SPMV_OK)
        return rc;
    if (off != SPMV_FMT_CSR && l->off.nnz)
        rc = spmv_matrix_add_format(&l->off, off, err);
    return rc;
}

static void add_into(spmv_dtype dt, void *y, const void *t, int32_t n)
{
    if (dt == SPMV_FLOAT32)
        for (int32_t i = 0; i < n; i++)
            ((float *)y)[i] += ((const float *)t)[i];
    else
        for (int32_t i = 0; i < n; i++)
            ((double *)y)[i] += ((const double *)t)[i];
}

/* --------------------------------------------------------- the exchange */

/* Packs what each peer wants and posts every send and receive. */
static int halo_post(cluster *c, cluster_local *l, const void *x, req_list *r, spmv_error *err)
{
    const cluster_halo *h = &l->s.halo;
    size_t vs = spmv_dtype_size(l->dtype);
    for (int32_t e = 0; e < h->nsend; e++)
        memcpy((char *)l->sbuf + (size_t)e * vs, (const char *)x + (size_t)h->send_idx[e] * vs, vs);
    int rc = SPMV_OK;
    for (int p = 0; p < h->nranks && rc == SPMV_OK; p++) {
        int32_t nr = h->recv_off[p + 1] - h->recv_off[p], ns = h->send_off[p + 1] - h->send_off[p];
        if (p == c->rank)
            continue;
        if (nr)
            rc = reqs_recv(c, r, (char *)l->ghost + (size_t)h->recv_off[p] * vs, (size_t)nr * vs, p, TAG_HALO, err);
        if (ns && rc == SPMV_OK)
            rc = reqs_send(c, r, (char *)l->sbuf + (size_t)h->send_off[p] * vs, (size_t)ns * vs, p, TAG_HALO, err);
    }
    return rc;
}

static void record(const cluster_run_times *t, int32_t i, double run, double compute, double comm, double device)
{
    if (!t)
        return;
    if (t->run_ms)
        t->run_ms[i] = run;
    if (t->compute_ms)
        t->compute_ms[i] = compute;
    if (t->comm_ms)
        t->comm_ms[i] = comm;
    if (t->device_ms)
        t->device_ms[i] = device;
}

static int host_product(cluster *c, cluster_local *l, const spmv_kernel *k, const spmv_params *par, int krc,
                        const void *x, void *y, int32_t warmup, int32_t runs, const cluster_run_times *t,
                        spmv_error *kerr, spmv_error *err)
{
    int32_t rows = l->s.row_end - l->s.row_begin;
    const spmv_kernel *ok = off_kernel(k);
    spmv_params opar = *par;
    if (krc == SPMV_OK && ok != k) /* its own defaults */
        krc = spmv_params_resolve(ok, &(spmv_params){{0}}, &opar, kerr);
    req_list r;
    reqs_init(&r);
    int rc = SPMV_OK;
    for (int32_t it = 0; it < warmup + runs && rc == SPMV_OK; it++) {
        double t0 = spmv_now_ms();
        rc = halo_post(c, l, x, &r, err);
        double t1 = spmv_now_ms();
        if (rc == SPMV_OK && krc == SPMV_OK && rows && l->loc.nnz)
            krc = spmv_cpu_run(k, &l->loc, par, x, y, 0, 1, NULL, kerr);
        else if (rc == SPMV_OK && krc == SPMV_OK && rows)
            memset(y, 0, (size_t)rows * spmv_dtype_size(l->dtype)); /* an empty local block: y starts at 0 */
        double t2 = spmv_now_ms();
        if (rc == SPMV_OK)
            rc = reqs_wait(c, &r, "the halo exchange", err);
        double t3 = spmv_now_ms();
        if (rc == SPMV_OK && krc == SPMV_OK && rows && l->off.nnz &&
            (krc = spmv_cpu_run(ok, &l->off, &opar, l->ghost, l->tmp, 0, 1, NULL, kerr)) == SPMV_OK)
            add_into(l->dtype, y, l->tmp, rows);
        double t4 = spmv_now_ms();
        if (it >= warmup)
            record(t, it - warmup, t4 - t0, (t2 - t1) + (t4 - t3), (t1 - t0) + (t3 - t2), 0.0);
    }
    reqs_free(&r);
    if (rc == SPMV_OK && krc != SPMV_OK)
        *err = *kerr;
    return rc != SPMV_OK ? rc : krc;
}

/* The local product queued on the context's stream: y = A_loc x, or on
 * a split shard the interior's rows of y alone (the edge's are the
 * exchange stream's); an empty local block writes y 0. */
static int local_launch(cluster *c, cluster_local *l, const spmv_kernel *k, const spmv_params *par,
                        const spmv_vec *x, spmv_vec *y, spmv_error *err)
{
    if (!l->gloc)
        return spmv_vec_fill(c->gpu, y, 0.0, err);
    if (!l->split)
        return spmv_gpu_launch(c->gpu, k, l->gloc, par, x, y, err);
    spmv_vec in = *y;
    in.n = l->hi - l->lo;
    in.data = (char *)y->data + (size_t)l->lo * spmv_dtype_size(l->dtype);
    return spmv_gpu_launch(c->gpu, k, l->gloc, par, x, &in, err);
}

/* A run on the rank's GPU: the local block's product launched on the
 * context's stream, then the exchange posted on the communicator's
 * (high-priority) stream beside it — in this order, so that the GPU is
 * busy while the host spends tens of microseconds in NCCL's enqueue (the
 * other order measured 1.68x against 1.86x for gpu.psell on 2 GPUs,
 * docs/benchmarks/scaling.md) — and once the ghost entries are in, the
 * compacted off-diagonal block's product and its sums added into y's
 * rows; then a sync. Nothing
 * between those is timed or synchronised (spmv_gpu_launch), so the local
 * product overlaps the exchange. y is poisoned once before the runs (a
 * row no kernel writes stays NaN through them all) unless the caller
 * writes y whole each time (a solve's operator: a pass over y saved per
 * iteration). The split: comm is
 * the host time spent posting and waiting for the exchange (what the
 * local product did not hide), compute the rest of the run; and the run's
 * time on the device by CUDA events (halo_start to halo_finish). */
static int gpu_product(cluster *c, cluster_local *l, const spmv_kernel *k, const spmv_params *par, int *krc,
                       const spmv_vec *xd, spmv_vec *yd, int32_t warmup, int32_t runs, bool poison,
                       const cluster_run_times *t, spmv_error *kerr, spmv_error *err)
{
    spmv_gpu_ctx *ctx = c->gpu;
    int32_t rows = l->s.row_end - l->s.row_begin;
    int rc = SPMV_OK;
    if (!c->nccl)
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "rank %d has no NCCL communicator", c->rank);
    if (!l->ghalo && (rc = spmv_gpu_halo_new(c->nccl, l->dtype, l->s.halo.send_off, l->s.halo.send_idx,
                                             l->s.halo.recv_off, l->off_rows, l->n_off, &l->ghalo, err)) != SPMV_OK)
        return rc;
    if (*krc == SPMV_OK && rows && poison)
        *krc = spmv_vec_fill(ctx, yd, NAN, kerr);
    for (int32_t it = 0; it < warmup + runs && rc == SPMV_OK; it++) {
        double t0 = spmv_now_ms(), exposed = 0, device = 0, posting = 0;
        rc = spmv_gpu_halo_begin(c->nccl, l->ghalo, err);
        if (rc == SPMV_OK && *krc == SPMV_OK && rows)
            *krc = local_launch(c, l, k, par, xd, yd, kerr);
        if (rc == SPMV_OK) { /* the local product is queued: the GPU works while NCCL enqueues */
            double s0 = spmv_now_ms();
            rc = spmv_gpu_halo_start(c->nccl, l->ghalo, xd, err);
            posting = spmv_now_ms() - s0;
        }
        double t2 = spmv_now_ms();
        if (rc == SPMV_OK) /* a split shard's edge behind the ghosts, beside the interior (whatever the kernel did) */
            rc = spmv_gpu_halo_join(c->nccl, l->ghalo, l->split ? l->goff : NULL, xd, yd, c->o.timeout_ms, err);
        if (rc != SPMV_OK)
            cluster_fail(c, err, "rank %d: %s", c->rank, err->message);
        double t3 = spmv_now_ms();
        if (rc == SPMV_OK && *krc == SPMV_OK && l->goff && !l->split) /* the boundary rows' remote part */
            *krc = spmv_gpu_halo_off_add(c->nccl, l->ghalo, l->goff, yd, kerr);
        if (rc == SPMV_OK) { /* the stream waits for the exchange whatever the kernels did */
            rc = spmv_gpu_halo_finish(c->nccl, l->ghalo, c->o.timeout_ms, &exposed, &device, err);
            if (rc != SPMV_OK)
                cluster_fail(c, err, "rank %d: %s", c->rank, err->message);
        }
        if (rc == SPMV_OK && *krc == SPMV_OK)
            *krc = spmv_vec_sync(ctx, kerr);
        double t4 = spmv_now_ms();
        double comm = posting + (t3 - t2) + exposed;
        if (it >= warmup)
            record(t, it - warmup, t4 - t0, (t4 - t0) - comm, comm, device);
    }
    return rc;
}

int32_t cluster_local_edge_rows(const cluster_local *l) { return l->split ? l->n_off : 0; }

const char *cluster_local_exchange(const cluster_local *l)
{
    if (!l->ghalo)
        return "mpi";
    return spmv_gpu_halo_ipc(l->ghalo) ? "ipc" : "nccl";
}

/* The local product with x and y given either way: host values (xh, yh),
 * copied to and from the device for a GPU shard, or vector slices (xv,
 * yv) where the shard is. The runs go into y's slice itself when alpha is
 * 1 and beta 0, else into scratch, and y = alpha*scratch + beta*y once. */
static int local_product(cluster *c, cluster_local *l, const spmv_kernel *k, const spmv_params *p, const void *xh,
                         const spmv_vec *xv, void *yh, spmv_vec *yv, double alpha, double beta, int32_t warmup,
                         int32_t runs, bool poison, const cluster_run_times *t, const spmv_kernel **ran,
                         spmv_error *err)
{
    spmv_params par;
    spmv_error kerr = {0};
    const spmv_kernel *use = NULL;
    int krc = shard_kernel(c, l, k, p, &use, &par, &kerr);
    bool gpu = strncmp(l->device, "gpu", 3) == 0; /* the shard's blocks, empty or not, are on this rank's GPU */
    spmv_gpu_ctx *ctx = gpu ? c->gpu : NULL;
    spmv_device_kind where = gpu ? SPMV_DEVICE_GPU : SPMV_DEVICE_CPU;
    int32_t rows = l->s.row_end - l->s.row_begin, cols = l->s.col_end - l->s.col_begin;
    if (ran)
        *ran = use;
    if (krc == SPMV_OK && !gpu)
        krc = host_formats(l, use, &kerr);
    if (krc == SPMV_OK && gpu && use->device != SPMV_DEVICE_GPU)
        krc = spmv_error_set(&kerr, SPMV_ERR_UNAVAILABLE, 0, "%s is a CPU kernel; this shard (rank %d) is on %s",
                             use->name, c->rank, l->device);
    if (krc == SPMV_OK && gpu && !c->gpu)
        krc = spmv_error_set(&kerr, SPMV_ERR_UNAVAILABLE, 0, "rank %d has no GPU context", c->rank);
    if (runs < 1 || warmup < 0)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "runs %d / warmup %d out of range", runs, warmup);
    if ((xv && (xv->device != where || xv->n != cols)) || (yv && (yv->device != where || yv->n != rows)))
        return spmv_error_set(err, SPMV_ERR_SHAPE, 0, "rank %d: the vectors' slices (%lld, %lld values) are not "
                              "where its shard (%d x %d, %s) is", c->rank, xv ? (long long)xv->n : -1LL,
                              yv ? (long long)yv->n : -1LL, rows, cols, l->device);
    if (gpu && !c->gpu) /* nothing to run on: a host shard's path exchanges, then reports */
        gpu = false;
    spmv_vec xs = {0}, ys = {0}, tmp = {0};
    const spmv_vec *x = xv;
    spmv_vec *y = yv;
    bool scaled = yv && (alpha != 1.0 || beta != 0.0);
    int rc = SPMV_OK;
    if (!x) { /* host values: a view on a host shard, a copy on a GPU shard */
        xs = (spmv_vec){.device = SPMV_DEVICE_CPU, .dtype = l->dtype, .n = cols, .k = 1, .data = (void *)xh};
        if (gpu && ((rc = spmv_vec_alloc(ctx, SPMV_DEVICE_GPU, l->dtype, cols, 1, &xs, err)) ||
                    (rc = spmv_vec_write(ctx, &xs, xh, err))))
            goto out;
        x = &xs;
    }
    if (!y || scaled) {
        if (!gpu && !scaled)
            ys = (spmv_vec){.device = SPMV_DEVICE_CPU, .dtype = l->dtype, .n = rows, .k = 1, .data = yh};
        else if ((rc = spmv_vec_alloc(ctx, gpu ? SPMV_DEVICE_GPU : SPMV_DEVICE_CPU, l->dtype, rows, 1, &tmp, err)))
            goto out;
        y = tmp.data ? &tmp : &ys;
    }
    rc = gpu ? gpu_product(c, l, use, &par, &krc, x, y, warmup, runs, poison, t, &kerr, err)
             : host_product(c, l, use, &par, krc, x->data, y->data, warmup, runs, t, &kerr, err);
    if (rc == SPMV_OK && krc == SPMV_OK && rows) {
        if (scaled)
            krc = spmv_vec_axpby(ctx, alpha, y, beta, yv, &kerr);
        else if (!yv && gpu)
            krc = spmv_vec_read(ctx, y, yh, &kerr);
        if (krc == SPMV_OK)
            krc = spmv_vec_sync(ctx, &kerr);
    }
    if (rc == SPMV_OK && krc != SPMV_OK) {
        *err = kerr;
        rc = krc;
    }
out:
    if (gpu && xs.data && xs.device == SPMV_DEVICE_GPU)
        spmv_vec_free(ctx, &xs);
    spmv_vec_free(ctx, &tmp);
    return rc;
}

int cluster_local_product(cluster *c, cluster_local *l, const spmv_kernel *k, const spmv_params *p, const void *xh,
                          const spmv_vec *xv, void *yh, spmv_vec *yv, double alpha, double beta, int32_t warmup,
                          int32_t runs, const cluster_run_times *t, const spmv_kernel **ran, spmv_error *err)
{
    return local_product(c, l, k, p, xh, xv, yh, yv, alpha, beta, warmup, runs, true, t, ran, err);
}

int cluster_local_apply(cluster *c, cluster_local *l, const spmv_kernel *k, const spmv_params *p, const spmv_vec *x,
                        spmv_vec *y, const cluster_run_times *t, const spmv_kernel **ran, spmv_error *err)
{
    return local_product(c, l, k, p, NULL, x, NULL, y, 1.0, 0.0, 0, 1, false, t, ran, err);
}

void cluster_local_stop(cluster *c, cluster_local *l)
{
    if (l && l->ghalo)
        spmv_gpu_halo_stop(c->nccl, l->ghalo);
}

int cluster_local_queue(cluster *c, cluster_local *l, const spmv_kernel *k, const spmv_params *p, const spmv_vec *x,
                        spmv_vec *y, spmv_error *err)
{
    spmv_params par;
    const spmv_kernel *use = NULL;
    int rc = shard_kernel(c, l, k, p, &use, &par, err);
    if (rc != SPMV_OK)
        return rc;
    if (!l->ghalo || !c->nccl || use->device != SPMV_DEVICE_GPU)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "rank %d: a queued product needs a GPU shard whose first "
                              "product has run", c->rank);
    int32_t rows = l->s.row_end - l->s.row_begin;
    if ((rc = spmv_gpu_halo_begin(c->nccl, l->ghalo, err)) == SPMV_OK && rows)
        rc = local_launch(c, l, use, &par, x, y, err);
    if (rc == SPMV_OK)
        rc = spmv_gpu_halo_start(c->nccl, l->ghalo, x, err);
    if (rc == SPMV_OK)
        rc = spmv_gpu_halo_join(c->nccl, l->ghalo, l->split ? l->goff : NULL, x, y, c->o.timeout_ms, err);
    if (rc == SPMV_OK && l->goff && !l->split)
        rc = spmv_gpu_halo_off_add(c->nccl, l->ghalo, l->goff, y, err);
    return rc;
}

int cluster_local_spmv(cluster *c, cluster_local *l, const spmv_kernel *k, const spmv_params *p,
                       const void *x_local, void *y_local, int32_t warmup, int32_t runs, const cluster_run_times *t,
                       const spmv_kernel **ran, spmv_error *err)
{
    return cluster_local_product(c, l, k, p, x_local, NULL, y_local, NULL, 1.0, 0.0, warmup, runs, t, ran, err);
}

#endif /* SPMV_HAVE_MPI */
