/* vectors.c — distributed vectors: each rank's slice where its shard is.
 *
 * A vector made like a sharded matrix is cut as the matrix's rows (y) or
 * x entries (x) are, and each rank keeps its slice on the device of its
 * shard of that matrix: so a product whose x and y are such vectors
 * exchanges only the halo, and a Krylov method's dots and updates run on
 * every rank's slice at once, with one partial sum per rank coming back.
 *
 * Every operation is one command (CMD_VNEW .. CMD_VOP) that every rank,
 * rank 0 included, runs on its own slice with vec_exec(); rank 0 checks
 * the operands against the layouts and devices it recorded before any
 * rank is told to run, so a rank never finds an operand it cannot use.
 * Slices are allocated, written, read and freed on the MPI thread only
 * (rank 0's cluster worker, the other ranks' main thread), like shards.
 */
#ifdef SPMV_HAVE_MPI

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/internal.h"

struct cluster_vec {
    char id[40], like[40];
    int nranks;
    int64_t n;
    spmv_dtype dtype;
    bool rows;
    int32_t *begin;               /* nranks + 1 */
    char (*device)[16];           /* nranks: where each slice is */
};

/* ------------------------------------------------------ the slice table */

static vec_entry **find_link(cluster *c, const char *id)
{
    vec_entry **pp = &c->vtable;
    for (; *pp; pp = &(*pp)->next)
        if (strncmp((*pp)->id, id, sizeof (*pp)->id) == 0)
            return pp;
    return NULL;
}

spmv_vec *cluster_vec_slice(cluster *c, const char *id)
{
    vec_entry **pp = find_link(c, id);
    return pp ? &(*pp)->v : NULL;
}

static spmv_gpu_ctx *ctx_of(cluster *c, const spmv_vec *v) { return v->device == SPMV_DEVICE_GPU ? c->gpu : NULL; }

static void slice_drop(cluster *c, const char *id)
{
    vec_entry **pp = find_link(c, id);
    if (!pp)
        return;
    vec_entry *e = *pp;
    *pp = e->next;
    spmv_vec_free(ctx_of(c, &e->v), &e->v);
    free(e);
}

void cluster_vec_table_free(cluster *c)
{
    while (c->vtable)
        slice_drop(c, c->vtable->id);
}

/* CMD_VNEW on this rank: a zeroed slice on the device of shard l. */
static int slice_new(cluster *c, cluster_local *l, const cmd_header *h, cmd_reply *rep, spmv_error *err)
{
    if (!l)
        return spmv_error_set(err, SPMV_ERR_NOT_FOUND, 0, "rank %d holds no shard of %s", c->rank, h->id);
    if (find_link(c, h->xid))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "rank %d holds a vector %s already", c->rank, h->xid);
    const cluster_shard *s = cluster_local_shard(l);
    int64_t n = (h->flags & CMD_FLAG_ROWS) ? s->row_end - s->row_begin : s->col_end - s->col_begin;
    bool gpu = strncmp(cluster_local_device(l), "gpu", 3) == 0;
    spmv_gpu_ctx *ctx = NULL;
    vec_entry *e = calloc(1, sizeof *e);
    if (!e)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "rank %d: out of memory", c->rank);
    int rc = gpu ? cluster_gpu(c, &ctx, err) : SPMV_OK;
    if (rc == SPMV_OK)
        rc = spmv_vec_alloc(ctx, gpu ? SPMV_DEVICE_GPU : SPMV_DEVICE_CPU, (spmv_dtype)h->dtype, n, 1, &e->v, err);
    if (rc == SPMV_OK && (rc = spmv_vec_fill(ctx, &e->v, 0.0, err)) == SPMV_OK)
        rc = spmv_vec_sync(ctx, err);
    if (rc != SPMV_OK) {
        spmv_vec_free(ctx, &e->v);
        free(e);
        return spmv_error_set(err, rc, 0, "rank %d: a slice of %lld values: %.400s", c->rank, (long long)n,
                              err->message);
    }
    snprintf(e->id, sizeof e->id, "%s", h->xid);
    e->next = c->vtable;
    c->vtable = e;
    snprintf(rep->device, sizeof rep->device, "%s", cluster_local_device(l));
    rep->bytes = spmv_vec_bytes(&e->v);
    return SPMV_OK;
}

static int slice_get(cluster *c, const char *id, spmv_vec **out, spmv_error *err)
{
    *out = cluster_vec_slice(c, id);
    return *out ? SPMV_OK : spmv_error_set(err, SPMV_ERR_NOT_FOUND, 0, "rank %d holds no vector %s", c->rank, id);
}

static int slice_op(cluster *c, const cmd_header *h, cmd_reply *rep, spmv_error *err)
{
    spmv_vec *x, *y = NULL;
    int rc = slice_get(c, h->xid, &x, err);
    if (rc == SPMV_OK && h->yid[0])
        rc = slice_get(c, h->yid, &y, err);
    if (rc != SPMV_OK)
        return rc;
    spmv_gpu_ctx *ctx = ctx_of(c, x);
    rep->value = 0;
    if (x->n == 0) /* nothing here: a rank past the matrix's last row */
        return SPMV_OK;
    switch ((cluster_vop)h->vop) {
    case CLUSTER_VOP_DOT: rc = spmv_vec_dot(ctx, x, y, &rep->value, err); break;
    case CLUSTER_VOP_NRM2: rc = spmv_vec_dot(ctx, x, x, &rep->value, err); break;
    case CLUSTER_VOP_AXPY: rc = spmv_vec_axpy(ctx, h->alpha, x, y, err); break;
    case CLUSTER_VOP_AXPBY: rc = spmv_vec_axpby(ctx, h->alpha, x, h->beta, y, err); break;
    case CLUSTER_VOP_SCAL: rc = spmv_vec_scal(ctx, h->alpha, x, err); break;
    case CLUSTER_VOP_COPY: rc = spmv_vec_copy(ctx, x, y, err); break;
    case CLUSTER_VOP_FILL: rc = spmv_vec_fill(ctx, x, h->alpha, err); break;
    default: return spmv_error_set(err, SPMV_ERR_INVALID, 0, "rank %d: unknown vector operation %d", c->rank, h->vop);
    }
    if (rc == SPMV_OK)
        rc = spmv_vec_sync(ctx, err);
    return rc;
}

/* One vector command on this rank's slice. `in` (VWRITE) and `out`
 * (VREAD) are the slice's values in host memory; l is this rank's shard
 * of the matrix a VNEW is laid out like. */
static int vec_exec(cluster *c, cluster_local *l, const cmd_header *h, const void *in, void *out, cmd_reply *rep,
                    spmv_error *err)
{
    spmv_vec *v;
    int rc;
    switch (h->op) {
    case CMD_VNEW: return slice_new(c, l, h, rep, err);
    case CMD_VFREE: slice_drop(c, h->xid); return SPMV_OK;
    case CMD_VOP: return slice_op(c, h, rep, err);
    case CMD_VWRITE:
    case CMD_VREAD:
        if ((rc = slice_get(c, h->xid, &v, err)) != SPMV_OK)
            return rc;
        if (h->op == CMD_VWRITE && h->payload != spmv_vec_bytes(v))
            return spmv_error_set(err, SPMV_ERR_SHAPE, 0, "rank %d: %llu bytes for a slice of %zu", c->rank,
                                  (unsigned long long)h->payload, spmv_vec_bytes(v));
        if (v->n == 0)
            return SPMV_OK;
        rc = h->op == CMD_VWRITE ? spmv_vec_write(ctx_of(c, v), v, in, err) : spmv_vec_read(ctx_of(c, v), v, out, err);
        return rc == SPMV_OK ? spmv_vec_sync(ctx_of(c, v), err) : rc;
    }
    return spmv_error_set(err, SPMV_ERR_INVALID, 0, "unknown vector command %u", h->op);
}

/* Ranks > 0: the command, its reply, and for VREAD the slice (always sent,
 * empty on failure, so rank 0 never waits for a message that will not
 * come). */
void cluster_vec_command(cluster *c, const cmd_header *h, cmd_reply *rep)
{
    spmv_error err = {0};
    void *in = NULL, *out = NULL;
    size_t out_len = 0;
    int rc = SPMV_OK;
    if (h->op == CMD_VWRITE && (rc = cmd_take_payload(c, h->payload, &in, &err)) != SPMV_OK)
        return; /* a lost payload failed the cluster */
    if (h->op == CMD_VREAD) {
        spmv_vec *v = cluster_vec_slice(c, h->xid);
        out_len = v ? spmv_vec_bytes(v) : 0;
        if (!(out = malloc(out_len ? out_len : 1)))
            rc = spmv_error_set(&err, SPMV_ERR_NOMEM, 0, "rank %d: out of memory for %zu bytes", c->rank, out_len);
    }
    if (rc == SPMV_OK)
        rc = vec_exec(c, h->op == CMD_VNEW ? cluster_table_find(c, h->id) : NULL, h, in, out, rep, &err);
    cmd_reply_send(c, rep, rc, &err);
    if (h->op == CMD_VREAD) {
        req_list r;
        reqs_init(&r);
        spmv_error e = {0};
        if (reqs_send(c, &r, out ? out : (void *)rep, rc == SPMV_OK ? out_len : 0, 0, TAG_Y, &e) != SPMV_OK ||
            reqs_wait(c, &r, "sending a vector's slice", &e) != SPMV_OK)
            fprintf(stderr, "spmvd rank %d: %s\n", c->rank, e.message);
        reqs_free(&r);
    }
    free(in);
    free(out);
}

/* ---------------------------------------------------- rank 0's commands */

/* Sends h to every rank (VWRITE: each its slice of `in`), runs it on rank
 * 0's slice, gathers the replies (VREAD: each slice into `out`) and sums
 * their values into *sum (may be NULL). */
static int vec_round(cluster *c, const cluster_vec *v, cluster_local *own, cmd_header *h, const void *in, void *out,
                     double *sum, const char *what, spmv_error *err)
{
    if (cluster_failed(c))
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "the cluster has failed: %s", cluster_failed(c));
    size_t vs = spmv_dtype_size(v->dtype);
    cmd_reply *rep = cmd_replies(c, err);
    if (!rep)
        return SPMV_ERR_NOMEM;
    cmd_header *hs = calloc((size_t)c->size, sizeof *hs); /* each rank's, alive until the sends are done */
    if (!hs) {
        free(rep);
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for %d commands", c->size);
    }
    req_list r;
    reqs_init(&r);
    int rc = SPMV_OK;
    for (int p = 1; p < c->size && rc == SPMV_OK; p++) {
        size_t off = (size_t)v->begin[p] * vs, len = (size_t)(v->begin[p + 1] - v->begin[p]) * vs;
        hs[p] = *h;
        hs[p].payload = h->op == CMD_VWRITE ? len : 0;
        if ((rc = cmd_post(c, &r, &hs[p], in ? (const char *)in + off : NULL, p, err)) == SPMV_OK)
            rc = reqs_recv(c, &r, &rep[p], sizeof rep[p], p, TAG_REPLY, err);
        if (rc == SPMV_OK && h->op == CMD_VREAD) /* an empty slice comes as an empty message */
            rc = reqs_recv(c, &r, out ? (char *)out + off : (void *)&rep[p], len, p, TAG_Y, err);
    }
    spmv_error own_err = {0};
    cmd_header h0 = *h;
    h0.payload = h->op == CMD_VWRITE ? (uint64_t)(v->begin[1] - v->begin[0]) * vs : 0;
    int own_rc = rc == SPMV_OK ? vec_exec(c, own, &h0, in, out, &rep[0], &own_err) : rc;
    if (rc == SPMV_OK)
        rc = reqs_wait(c, &r, what, err);
    reqs_free(&r);
    if (rc == SPMV_OK && own_rc != SPMV_OK)
        rc = spmv_error_set(err, own_rc, 0, "rank 0: %.500s", own_err.message);
    if (rc == SPMV_OK)
        rc = cmd_check(c, rep, h->seq, err);
    if (rc == SPMV_OK && sum) {
        *sum = 0;
        for (int p = 0; p < c->size; p++)
            *sum += rep[p].value;
    }
    if (rc == SPMV_OK && h->op == CMD_VNEW) {
        for (int p = 0; p < c->size; p++)
            snprintf(((cluster_vec *)v)->device[p], sizeof v->device[p], "%s", rep[p].device);
    }
    free(rep);
    free(hs);
    return rc;
}

static void vec_handle_free(cluster_vec *v)
{
    if (!v)
        return;
    free(v->begin);
    free(v->device);
    free(v);
}

int cluster_vec_new(cluster *c, const cluster_matrix *m, bool rows, const char *id, cluster_vec **out,
                    spmv_error *err)
{
    *out = NULL;
    if (m->nranks != c->size)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "matrix %s is cut over %d ranks; the job has %d", m->id,
                              m->nranks, c->size);
    cluster_vec *v = calloc(1, sizeof *v);
    if (v) {
        v->begin = malloc(((size_t)m->nranks + 1) * sizeof *v->begin);
        v->device = calloc((size_t)m->nranks, sizeof *v->device);
    }
    if (!v || !v->begin || !v->device) {
        vec_handle_free(v);
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for a distributed vector");
    }
    snprintf(v->id, sizeof v->id, "%s", id);
    snprintf(v->like, sizeof v->like, "%s", m->id);
    v->nranks = m->nranks;
    v->rows = rows;
    v->dtype = m->dtype;
    v->n = rows ? m->rows : m->cols;
    memcpy(v->begin, rows ? m->row_begin : m->col_begin, ((size_t)m->nranks + 1) * sizeof *v->begin);
    cmd_header h;
    cmd_init(c, &h, CMD_VNEW, m->id);
    snprintf(h.xid, sizeof h.xid, "%s", id);
    h.flags = rows ? CMD_FLAG_ROWS : 0;
    h.dtype = m->dtype;
    int rc = vec_round(c, v, m->own, &h, NULL, NULL, NULL, "making a distributed vector", err);
    if (rc != SPMV_OK) { /* the ranks that made theirs drop them */
        cluster_vec_free(c, v);
        return rc;
    }
    *out = v;
    return SPMV_OK;
}

void cluster_vec_forget(cluster_vec *v) { vec_handle_free(v); }

void cluster_vec_free(cluster *c, cluster_vec *v)
{
    if (!v)
        return;
    spmv_error err = {0};
    cmd_reply *rep = cluster_failed(c) ? NULL : cmd_replies(c, &err);
    if (rep) {
        cmd_header h;
        cmd_init(c, &h, CMD_VFREE, NULL);
        snprintf(h.xid, sizeof h.xid, "%s", v->id);
        if (cmd_round_trip(c, &h, rep, "freeing a distributed vector", &err) != SPMV_OK && c->o.log)
            c->o.log(1, err.message);
    }
    free(rep);
    slice_drop(c, v->id);
    vec_handle_free(v);
}

int cluster_vec_write(cluster *c, cluster_vec *v, const void *values, spmv_error *err)
{
    cmd_header h;
    cmd_init(c, &h, CMD_VWRITE, NULL);
    snprintf(h.xid, sizeof h.xid, "%s", v->id);
    return vec_round(c, v, NULL, &h, values, NULL, NULL, "scattering a vector", err);
}

int cluster_vec_read(cluster *c, const cluster_vec *v, void *values, spmv_error *err)
{
    cmd_header h;
    cmd_init(c, &h, CMD_VREAD, NULL);
    snprintf(h.xid, sizeof h.xid, "%s", v->id);
    return vec_round(c, v, NULL, &h, NULL, values, NULL, "gathering a vector", err);
}

int64_t cluster_vec_n(const cluster_vec *v) { return v->n; }
spmv_dtype cluster_vec_dtype(const cluster_vec *v) { return v->dtype; }
int cluster_vec_nranks(const cluster_vec *v) { return v->nranks; }
const char *cluster_vec_side(const cluster_vec *v) { return v->rows ? "rows" : "cols"; }
const char *cluster_vec_like(const cluster_vec *v) { return v->like; }
const char *cluster_vec_device(const cluster_vec *v, int r) { return r >= 0 && r < v->nranks ? v->device[r] : ""; }
const char *cluster_vec_id(const cluster_vec *v) { return v->id; }

static bool same_cut(const int32_t *a, const int32_t *b, int n) { return memcmp(a, b, ((size_t)n + 1) * sizeof *a) == 0; }

bool cluster_vec_fits(const cluster_vec *v, const cluster_matrix *m, bool rows, char *why, size_t len)
{
    const int32_t *cut = rows ? m->row_begin : m->col_begin;
    int64_t n = rows ? m->rows : m->cols;
    if (v->dtype != m->dtype) {
        snprintf(why, len, "vector %s is %s and matrix %s %s", v->id, spmv_dtype_name(v->dtype), m->id,
                 spmv_dtype_name(m->dtype));
        return false;
    }
    if (v->nranks != m->nranks || v->n != n || !same_cut(v->begin, cut, v->nranks)) {
        snprintf(why, len, "vector %s (%lld values, made like %s's %s) is not cut as matrix %s's %s (%lld values over "
                 "%d ranks): make it with \"like\": \"%s\", \"side\": \"%s\"", v->id, (long long)v->n, v->like,
                 cluster_vec_side(v), m->id, rows ? "rows" : "x entries", (long long)n, m->nranks, m->id,
                 rows ? "rows" : "cols");
        return false;
    }
    for (int p = 0; p < v->nranks; p++)
        if (strcmp(v->device[p], m->info[p].device) != 0) {
            snprintf(why, len, "rank %d's slice of vector %s is on %s, its shard of %s on %s", p, v->id, v->device[p],
                     m->id, m->info[p].device);
            return false;
        }
    return true;
}

bool cluster_vec_same_layout(const cluster_vec *a, const cluster_vec *b)
{
    if (a->nranks != b->nranks || a->n != b->n || a->dtype != b->dtype || !same_cut(a->begin, b->begin, a->nranks))
        return false;
    for (int p = 0; p < a->nranks; p++)
        if (strcmp(a->device[p], b->device[p]) != 0)
            return false;
    return true;
}

int cluster_vec_op(cluster *c, cluster_vop op, double alpha, cluster_vec *x, double beta, cluster_vec *y,
                   double *result, spmv_error *err)
{
    bool two = op == CLUSTER_VOP_DOT || op == CLUSTER_VOP_AXPY || op == CLUSTER_VOP_AXPBY || op == CLUSTER_VOP_COPY;
    if ((int)op < 0 || op >= CLUSTER_VOP_COUNT)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "unknown vector operation %d", (int)op);
    if (two && !y)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "this operation takes two vectors");
    if (two && !cluster_vec_same_layout(x, y))
        return spmv_error_set(err, SPMV_ERR_SHAPE, 0, "vectors %s and %s are not cut alike across the ranks (made "
                              "like %s's %s and %s's %s)", x->id, y->id, x->like, cluster_vec_side(x), y->like,
                              cluster_vec_side(y));
    cmd_header h;
    cmd_init(c, &h, CMD_VOP, NULL);
    h.vop = (int32_t)op;
    snprintf(h.xid, sizeof h.xid, "%s", x->id);
    if (two)
        snprintf(h.yid, sizeof h.yid, "%s", y->id);
    h.alpha = alpha;
    h.beta = beta;
    double sum = 0;
    int rc = vec_round(c, x, NULL, &h, NULL, NULL, &sum, "a vector operation", err);
    if (rc == SPMV_OK && result)
        *result = op == CLUSTER_VOP_NRM2 ? sqrt(sum) : sum;
    return rc;
}

#endif /* SPMV_HAVE_MPI */
