/* partition.c — cutting a matrix into shards, and a shard's wire form.
 *
 * Pure engine-level code: no MPI, no threads, so the unit tests check it
 * on one process and rank 0 runs it at upload. A layout cuts the rows
 * where the running non-zero count passes r*nnz/nranks (a binary search
 * on row_ptr per cut), which bounds every block's non-zeros to nnz/nranks
 * plus or minus its longest row. Each shard is then built in one pass over
 * its rows: entries whose column the rank owns go to the local block
 * (columns renumbered from col_begin), the others to the off-diagonal
 * block, whose columns are the ghost entries numbered in ascending global
 * order. Because owners hold contiguous column ranges, ascending order
 * groups a rank's ghosts by owner, which is what lets each peer's part of
 * the halo be one contiguous message. The send lists are the receivers'
 * ghost lists seen from the owner, so they exist only once every shard is
 * built: rank 0 builds all of them together.
 *
 * The wire form is a header of 64-bit fields and the arrays back to back.
 * It travels between processes of one job, but it is still read as input:
 * every count is checked against the buffer and every index against its
 * range before anything is sized or indexed from it.
 */
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster.h"

#define CLUSTER_MAX_RANKS 65536
#define SHARD_MAGIC UINT64_C(0x3144524148535053) /* "SPSHARD1" */

/* ---------------------------------------------------------------- layout */

int cluster_layout_balance(const spmv_csr *a, int nranks, cluster_layout *out, spmv_error *err)
{
    memset(out, 0, sizeof *out);
    if (nranks < 1 || nranks > CLUSTER_MAX_RANKS)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "a layout needs 1..%d ranks, not %d", CLUSTER_MAX_RANKS,
                              nranks);
    int st = a ? spmv_csr_need_narrow(a, "sharding", err) : SPMV_OK;
    if (st)
        return st;
    if (!a || a->rows < 0 || a->cols < 0 || !a->row_ptr)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "a layout needs a CSR matrix");
    out->row_begin = calloc((size_t)nranks + 1, sizeof *out->row_begin);
    out->col_begin = calloc((size_t)nranks + 1, sizeof *out->col_begin);
    if (!out->row_begin || !out->col_begin) {
        cluster_layout_free(out);
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for a layout of %d ranks", nranks);
    }
    out->nranks = nranks;
    out->rows = a->rows;
    out->cols = a->cols;
    out->nnz = a->nnz;
    for (int r = 1; r < nranks; r++) {
        int32_t cut;
        if (a->nnz == 0) {
            cut = (int32_t)((int64_t)a->rows * r / nranks);
        } else {
            /* the first row whose start reaches r*nnz/nranks */
            int64_t target = a->nnz * r / nranks;
            int32_t lo = 0, hi = a->rows;
            while (lo < hi) {
                int32_t mid = lo + (hi - lo) / 2;
                if (a->row_ptr[mid] < target)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            cut = lo;
        }
        out->row_begin[r] = cut > out->row_begin[r - 1] ? cut : out->row_begin[r - 1];
    }
    out->row_begin[nranks] = a->rows;
    for (int r = 0; r <= nranks; r++) {
        if (a->rows == a->cols)
            out->col_begin[r] = out->row_begin[r];
        else if (a->rows > 0)
            out->col_begin[r] = (int32_t)((int64_t)a->cols * out->row_begin[r] / a->rows);
        else
            out->col_begin[r] = (int32_t)((int64_t)a->cols * r / nranks);
    }
    out->col_begin[nranks] = a->cols;
    return SPMV_OK;
}

void cluster_layout_free(cluster_layout *l)
{
    if (!l)
        return;
    free(l->row_begin);
    free(l->col_begin);
    memset(l, 0, sizeof *l);
}

int cluster_layout_col_owner(const cluster_layout *l, int32_t j)
{
    int lo = 0, hi = l->nranks - 1;
    while (lo < hi) { /* the last rank whose range starts at or before j */
        int mid = lo + (hi - lo + 1) / 2;
        if (l->col_begin[mid] <= j)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* ---------------------------------------------------------------- shards */

void cluster_shard_free(cluster_shard *s)
{
    if (!s)
        return;
    spmv_csr_free(&s->local);
    spmv_csr_free(&s->off);
    free(s->halo.recv_off);
    free(s->halo.send_off);
    free(s->halo.ghost_col);
    free(s->halo.send_idx);
    memset(s, 0, sizeof *s);
}

int64_t cluster_shard_nnz(const cluster_shard *s) { return s->local.nnz + s->off.nnz; }

/* An empty CSR of rows x cols with room for nnz entries. */
static int csr_alloc(spmv_csr *m, int32_t rows, int32_t cols, int64_t nnz, spmv_dtype dt, spmv_error *err)
{
    memset(m, 0, sizeof *m);
    m->rows = rows;
    m->cols = cols;
    m->nnz = nnz;
    m->dtype = dt;
    m->row_ptr = calloc((size_t)rows + 1, sizeof *m->row_ptr);
    m->col = malloc((size_t)(nnz ? nnz : 1) * sizeof *m->col);
    m->val = malloc((size_t)(nnz ? nnz : 1) * spmv_dtype_size(dt));
    if (!m->row_ptr || !m->col || !m->val) {
        spmv_csr_free(m);
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for a shard block of %d rows and %lld entries",
                              rows, (long long)nnz);
    }
    return SPMV_OK;
}

/* Rank r's blocks and ghost list. stamp/map are cols-long scratch arrays:
 * stamp[j] == r + 1 marks column j as one of r's ghosts, map[j] its index. */
static int shard_blocks(const spmv_csr *a, const cluster_layout *l, int r, int32_t *stamp, int32_t *map,
                        cluster_shard *s, spmv_error *err)
{
    int32_t rb = l->row_begin[r], re = l->row_begin[r + 1];
    int32_t cb = l->col_begin[r], ce = l->col_begin[r + 1];
    size_t vs = spmv_dtype_size(a->dtype);
    int64_t nloc = 0, noff = 0;
    int32_t nghost = 0;
    s->rank = r;
    s->nranks = l->nranks;
    s->rows = a->rows;
    s->cols = a->cols;
    s->row_begin = rb;
    s->row_end = re;
    s->col_begin = cb;
    s->col_end = ce;
    for (int64_t k = a->row_ptr[rb]; k < a->row_ptr[re]; k++) {
        int32_t j = a->col[k];
        if (j >= cb && j < ce) {
            nloc++;
            continue;
        }
        noff++;
        if (stamp[j] != r + 1) {
            stamp[j] = r + 1;
            nghost++;
        }
    }
    int rc;
    if ((rc = csr_alloc(&s->local, re - rb, ce - cb, nloc, a->dtype, err)) != SPMV_OK ||
        (rc = csr_alloc(&s->off, re - rb, nghost, noff, a->dtype, err)) != SPMV_OK)
        return rc;
    s->halo.nranks = l->nranks;
    s->halo.nghost = nghost;
    s->halo.ghost_col = malloc((size_t)(nghost ? nghost : 1) * sizeof *s->halo.ghost_col);
    s->halo.recv_off = calloc((size_t)l->nranks + 1, sizeof *s->halo.recv_off);
    if (!s->halo.ghost_col || !s->halo.recv_off)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for the halo of rank %d (%d ghosts)", r, nghost);
    /* ghosts in ascending order: a sweep of the columns outside [cb, ce),
     * which also counts each owner's share */
    int32_t g = 0;
    int owner = 0;
    for (int32_t j = 0; j < a->cols && g < nghost; j++) {
        if (stamp[j] != r + 1)
            continue;
        while (j >= l->col_begin[owner + 1])
            owner++;
        map[j] = g;
        s->halo.ghost_col[g++] = j;
        s->halo.recv_off[owner + 1]++;
    }
    for (int p = 0; p < l->nranks; p++)
        s->halo.recv_off[p + 1] += s->halo.recv_off[p];
    /* the blocks, row by row; columns stay ascending within each row */
    int64_t kl = 0, ko = 0;
    const char *val = a->val;
    for (int32_t i = rb; i < re; i++) {
        for (int64_t k = a->row_ptr[i]; k < a->row_ptr[i + 1]; k++) {
            int32_t j = a->col[k];
            if (j >= cb && j < ce) {
                s->local.col[kl] = j - cb;
                memcpy((char *)s->local.val + kl * vs, val + k * vs, vs);
                kl++;
            } else {
                s->off.col[ko] = map[j];
                memcpy((char *)s->off.val + ko * vs, val + k * vs, vs);
                ko++;
            }
        }
        s->local.row_ptr[i - rb + 1] = (int32_t)kl;
        s->off.row_ptr[i - rb + 1] = (int32_t)ko;
    }
    return SPMV_OK;
}

/* Rank p's send lists: what each other rank's ghost list wants of p. */
static int shard_sends(const cluster_layout *l, cluster_shard *shards, int p, spmv_error *err)
{
    cluster_halo *h = &shards[p].halo;
    h->send_off = calloc((size_t)l->nranks + 1, sizeof *h->send_off);
    if (!h->send_off)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for the send lists of rank %d", p);
    int64_t total = 0;
    for (int q = 0; q < l->nranks; q++) {
        const cluster_halo *hq = &shards[q].halo;
        total += q == p ? 0 : hq->recv_off[p + 1] - hq->recv_off[p];
        if (total > INT32_MAX)
            return spmv_error_set(err, SPMV_ERR_LIMIT, 0, "rank %d would send more than %d x entries", p, INT32_MAX);
        h->send_off[q + 1] = (int32_t)total;
    }
    h->nsend = (int32_t)total;
    h->send_idx = malloc((size_t)(total ? total : 1) * sizeof *h->send_idx);
    if (!h->send_idx)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for the send lists of rank %d", p);
    for (int q = 0; q < l->nranks; q++) {
        if (q == p)
            continue;
        const cluster_halo *hq = &shards[q].halo;
        int32_t n = hq->recv_off[p + 1] - hq->recv_off[p];
        for (int32_t e = 0; e < n; e++)
            h->send_idx[h->send_off[q] + e] = hq->ghost_col[hq->recv_off[p] + e] - l->col_begin[p];
    }
    return SPMV_OK;
}

int cluster_shards_build(const spmv_csr *a, const cluster_layout *l, cluster_shard *shards, spmv_error *err)
{
    int rc = SPMV_OK;
    if (!a || !l || l->rows != a->rows || l->cols != a->cols || l->nranks < 1)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "the layout does not match the matrix");
    memset(shards, 0, (size_t)l->nranks * sizeof *shards);
    int32_t *stamp = calloc((size_t)(a->cols ? a->cols : 1), sizeof *stamp);
    int32_t *map = malloc((size_t)(a->cols ? a->cols : 1) * sizeof *map);
    if (!stamp || !map) {
        rc = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory partitioning %d columns", a->cols);
        goto out;
    }
    for (int r = 0; r < l->nranks && rc == SPMV_OK; r++)
        rc = shard_blocks(a, l, r, stamp, map, &shards[r], err);
    for (int p = 0; p < l->nranks && rc == SPMV_OK; p++)
        rc = shard_sends(l, shards, p, err);
out:
    free(stamp);
    free(map);
    if (rc != SPMV_OK)
        for (int r = 0; r < l->nranks; r++)
            cluster_shard_free(&shards[r]);
    return rc;
}

/* ------------------------------------------------------------ wire form */

enum {
    H_MAGIC, H_RANK, H_NRANKS, H_ROWS, H_COLS, H_ROW_BEGIN, H_ROW_END, H_COL_BEGIN, H_COL_END, H_DTYPE,
    H_LOCAL_NNZ, H_OFF_NNZ, H_NGHOST, H_NSEND, H_COUNT
};

typedef struct wire {
    char *p;
    size_t len, at;
} wire;

/* Appends (pack) or takes (unpack) n bytes; -1 past the end. */
static void put(wire *w, const void *src, size_t n)
{
    memcpy(w->p + w->at, src, n);
    w->at += n;
}

static int take(wire *w, void *dst, size_t n)
{
    if (n > w->len - w->at)
        return -1;
    memcpy(dst, w->p + w->at, n);
    w->at += n;
    return 0;
}

static size_t csr_bytes(const spmv_csr *m)
{
    return ((size_t)m->rows + 1) * 4 + (size_t)m->nnz * (4 + spmv_dtype_size(m->dtype));
}

bool cluster_shard_interior(const cluster_shard *s, int32_t *lo, int32_t *hi)
{
    const spmv_csr *a = &s->local, *o = &s->off;
    int32_t rows = a->rows, b = 0, e = 0;
    *lo = *hi = 0;
    if (!rows || !o->nnz || spmv_csr_wide(a) || spmv_csr_wide(o))
        return false;
    for (int32_t i = 0, start = 0; i <= rows; i++)
        if (i == rows || o->row_ptr[i + 1] > o->row_ptr[i]) {
            if (i - start > e - b) {
                b = start;
                e = i;
            }
            start = i + 1;
        }
    b = (int32_t)(((int64_t)b + 63) / 64 * 64);
    if (e <= b || rows - (e - b) > rows / 4 || a->row_ptr[e] == a->row_ptr[b])
        return false;
    *lo = b;
    *hi = e;
    return true;
}

int cluster_shard_pack(const cluster_shard *s, void **buf, size_t *len, spmv_error *err)
{
    const cluster_halo *h = &s->halo;
    size_t n = H_COUNT * 8 + csr_bytes(&s->local) + csr_bytes(&s->off) + ((size_t)s->nranks + 1) * 8 +
               (size_t)h->nghost * 4 + (size_t)h->nsend * 4;
    wire w = {malloc(n), n, 0};
    if (!w.p)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory packing the shard of rank %d (%zu bytes)",
                              s->rank, n);
    int64_t hd[H_COUNT] = {
        [H_MAGIC] = (int64_t)SHARD_MAGIC, [H_RANK] = s->rank, [H_NRANKS] = s->nranks, [H_ROWS] = s->rows,
        [H_COLS] = s->cols, [H_ROW_BEGIN] = s->row_begin, [H_ROW_END] = s->row_end, [H_COL_BEGIN] = s->col_begin,
        [H_COL_END] = s->col_end, [H_DTYPE] = s->local.dtype, [H_LOCAL_NNZ] = s->local.nnz, [H_OFF_NNZ] = s->off.nnz,
        [H_NGHOST] = h->nghost, [H_NSEND] = h->nsend,
    };
    put(&w, hd, sizeof hd);
    const spmv_csr *blocks[2] = {&s->local, &s->off};
    for (int b = 0; b < 2; b++) {
        put(&w, blocks[b]->row_ptr, ((size_t)blocks[b]->rows + 1) * 4);
        put(&w, blocks[b]->col, (size_t)blocks[b]->nnz * 4);
        put(&w, blocks[b]->val, (size_t)blocks[b]->nnz * spmv_dtype_size(blocks[b]->dtype));
    }
    put(&w, h->recv_off, ((size_t)s->nranks + 1) * 4);
    put(&w, h->send_off, ((size_t)s->nranks + 1) * 4);
    put(&w, h->ghost_col, (size_t)h->nghost * 4);
    put(&w, h->send_idx, (size_t)h->nsend * 4);
    *buf = w.p;
    *len = w.at;
    return SPMV_OK;
}

/* The engine's CSR contract: row pointers from 0 to nnz never
 * decreasing, each row's columns inside the shape and strictly
 * increasing (what the blocks are cut with, and what a GPU copy relies
 * on: spmv_gpu_matrix_upload_csr sorts nothing). */
static int csr_valid(const spmv_csr *m)
{
    if (m->row_ptr[0] != 0 || m->row_ptr[m->rows] != m->nnz)
        return -1;
    for (int32_t i = 0; i < m->rows; i++) /* all of them first: a row is read only once every bound holds */
        if (m->row_ptr[i + 1] < m->row_ptr[i])
            return -1;
    for (int32_t i = 0; i < m->rows; i++)
        for (int32_t k = m->row_ptr[i]; k < m->row_ptr[i + 1]; k++)
            if (m->col[k] < 0 || m->col[k] >= m->cols || (k > m->row_ptr[i] && m->col[k] <= m->col[k - 1]))
                return -1;
    return 0;
}

/* An offsets array of n+1 entries from 0 to total, never decreasing. */
static int offsets_valid(const int32_t *off, int n, int32_t total)
{
    if (off[0] != 0 || off[n] != total)
        return -1;
    for (int i = 0; i < n; i++)
        if (off[i + 1] < off[i])
            return -1;
    return 0;
}

static int take_csr(wire *w, spmv_csr *m, int32_t rows, int32_t cols, int64_t nnz, spmv_dtype dt, spmv_error *err)
{
    size_t vs = spmv_dtype_size(dt), left = w->len - w->at;
    /* both counts against the bytes left before anything is sized from them */
    if (rows < 0 || ((size_t)rows + 1) > left / 4 || (uint64_t)nnz > (left - ((size_t)rows + 1) * 4) / (4 + vs))
        return spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "shard: a block of %d rows and %lld entries does not fit the "
                              "message (%zu bytes left)", rows, (long long)nnz, left);
    int rc = csr_alloc(m, rows, cols, nnz, dt, err);
    if (rc != SPMV_OK)
        return rc;
    if (take(w, m->row_ptr, ((size_t)rows + 1) * 4) || take(w, m->col, (size_t)nnz * 4) ||
        take(w, m->val, (size_t)nnz * vs) || csr_valid(m))
        return spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "shard: a block of %d x %d with %lld entries is malformed",
                              rows, cols, (long long)nnz);
    return SPMV_OK;
}

int cluster_shard_unpack(const void *buf, size_t len, cluster_shard *out, spmv_error *err)
{
    memset(out, 0, sizeof *out);
    wire w = {(char *)buf, len, 0};
    int64_t hd[H_COUNT];
    int rc = SPMV_OK;
    if (take(&w, hd, sizeof hd) || hd[H_MAGIC] != (int64_t)SHARD_MAGIC)
        return spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "shard: not a shard message (%zu bytes)", len);
    int64_t nranks = hd[H_NRANKS], rows = hd[H_ROWS], cols = hd[H_COLS];
    int64_t rb = hd[H_ROW_BEGIN], re = hd[H_ROW_END], cb = hd[H_COL_BEGIN], ce = hd[H_COL_END];
    int64_t nghost = hd[H_NGHOST], nsend = hd[H_NSEND];
    if (nranks < 1 || nranks > CLUSTER_MAX_RANKS || hd[H_RANK] < 0 || hd[H_RANK] >= nranks || rows < 0 ||
        rows > INT32_MAX || cols < 0 || cols > INT32_MAX || rb < 0 || rb > re || re > rows || cb < 0 || cb > ce ||
        ce > cols || (hd[H_DTYPE] != SPMV_FLOAT64 && hd[H_DTYPE] != SPMV_FLOAT32) || hd[H_LOCAL_NNZ] < 0 ||
        hd[H_OFF_NNZ] < 0 || nghost < 0 || nghost > cols || nsend < 0 || nsend > (int64_t)INT32_MAX ||
        (uint64_t)nghost + (uint64_t)nsend > len)
        return spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "shard: header out of range");
    out->rank = (int)hd[H_RANK];
    out->nranks = (int)nranks;
    out->rows = (int32_t)rows;
    out->cols = (int32_t)cols;
    out->row_begin = (int32_t)rb;
    out->row_end = (int32_t)re;
    out->col_begin = (int32_t)cb;
    out->col_end = (int32_t)ce;
    spmv_dtype dt = (spmv_dtype)hd[H_DTYPE];
    cluster_halo *h = &out->halo;
    if ((rc = take_csr(&w, &out->local, (int32_t)(re - rb), (int32_t)(ce - cb), hd[H_LOCAL_NNZ], dt, err)) ||
        (rc = take_csr(&w, &out->off, (int32_t)(re - rb), (int32_t)nghost, hd[H_OFF_NNZ], dt, err)))
        goto fail;
    h->nranks = (int)nranks;
    h->nghost = (int32_t)nghost;
    h->nsend = (int32_t)nsend;
    h->recv_off = malloc(((size_t)nranks + 1) * 4);
    h->send_off = malloc(((size_t)nranks + 1) * 4);
    h->ghost_col = malloc((size_t)(nghost ? nghost : 1) * 4);
    h->send_idx = malloc((size_t)(nsend ? nsend : 1) * 4);
    if (!h->recv_off || !h->send_off || !h->ghost_col || !h->send_idx) {
        rc = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for a halo of %lld ghosts", (long long)nghost);
        goto fail;
    }
    if (take(&w, h->recv_off, ((size_t)nranks + 1) * 4) || take(&w, h->send_off, ((size_t)nranks + 1) * 4) ||
        take(&w, h->ghost_col, (size_t)nghost * 4) || take(&w, h->send_idx, (size_t)nsend * 4) || w.at != w.len ||
        offsets_valid(h->recv_off, (int)nranks, h->nghost) || offsets_valid(h->send_off, (int)nranks, h->nsend)) {
        rc = spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "shard: the halo plan is malformed");
        goto fail;
    }
    for (int32_t g = 0; g < h->nghost; g++) /* ascending, outside the owned range */
        if (h->ghost_col[g] < 0 || h->ghost_col[g] >= cols || (g && h->ghost_col[g] <= h->ghost_col[g - 1]) ||
            (h->ghost_col[g] >= cb && h->ghost_col[g] < ce)) {
            rc = spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "shard: ghost column %d is out of order or range", g);
            goto fail;
        }
    for (int32_t e = 0; e < h->nsend; e++)
        if (h->send_idx[e] < 0 || h->send_idx[e] >= ce - cb) {
            rc = spmv_error_set(err, SPMV_ERR_CORRUPT, 0, "shard: send entry %d is out of range", e);
            goto fail;
        }
    return SPMV_OK;
fail:
    cluster_shard_free(out);
    return rc;
}
