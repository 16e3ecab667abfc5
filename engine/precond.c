/* precond.c — the preconditioner objects (precond.h): one table of types,
 * each with its host setup, its optional copy to a GPU, its apply on the
 * host and on a GPU, and its free. amg for a GPU is built on the device
 * itself where it can be (spmv_gpu_amg_build, mis2 aggregation), else on
 * the host and copied.
 *
 * jacobi and amg live here; the other types have files of their own
 * (precond_block.c, precond_cheb.c, precond_ilu.c) and register in
 * precond_ops_of() below. A preconditioner built for a GPU keeps nothing
 * on the host beyond its small header. The host applies run in float64
 * whatever the vectors' dtype (float32 vectors are converted on the way:
 * precond_host_f64), and "precision": "float32" changes only what a GPU
 * holds (amg's hierarchy, ic0/ilu0's factors): a host preconditioner stays
 * float64.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "krylov.h"
#include "precond.h"
#include "precond_impl.h"

static const char *const names[SPMV_PRECOND_COUNT] = {
    [SPMV_PRECOND_NONE] = "none",           [SPMV_PRECOND_JACOBI] = "jacobi", [SPMV_PRECOND_BLOCK_JACOBI] = "block_jacobi",
    [SPMV_PRECOND_CHEBYSHEV] = "chebyshev", [SPMV_PRECOND_AMG] = "amg",       [SPMV_PRECOND_IC0] = "ic0",
    [SPMV_PRECOND_ILU0] = "ilu0",
};

const char *spmv_precond_type_name(spmv_precond_type t)
{
    return (unsigned)t < SPMV_PRECOND_COUNT ? names[t] : "?";
}

int spmv_precond_type_parse(const char *name, spmv_precond_type *out)
{
    for (int t = 0; t < SPMV_PRECOND_COUNT; t++)
        if (name && strcmp(name, names[t]) == 0 && (t == SPMV_PRECOND_NONE || precond_ops_of((spmv_precond_type)t))) {
            *out = (spmv_precond_type)t;
            return SPMV_OK;
        }
    return SPMV_ERR_INVALID;
}

void spmv_precond_defaults(spmv_precond_options *o, spmv_precond_type t)
{
    memset(o, 0, sizeof *o);
    o->type = t;
    o->block_size = 1;
    o->degree = 3;
    spmv_amg_defaults(&o->amg);
}

/* ------------------------------------------------------------ jacobi */

typedef struct jacobi {
    spmv_vec dinv; /* 1/diag(A) in float64, on the preconditioner's device */
} jacobi;

static int jacobi_setup(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_csr *a, spmv_error *err)
{
    jacobi *j = calloc(1, sizeof *j);
    void *h = malloc((size_t)(a->rows ? a->rows : 1) * spmv_dtype_size(a->dtype));
    int st = j && h ? SPMV_OK : spmv_error_set(err, SPMV_ERR_NOMEM, 0, "jacobi: out of memory");
    p->impl = j;
    if (st || (st = spmv_csr_inv_diag(a, h, err)) ||
        (st = spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, SPMV_FLOAT64, a->rows, 1, &j->dinv, err)))
        goto out;
    for (int32_t i = 0; i < a->rows; i++)
        ((double *)j->dinv.data)[i] = spmv_val_get(h, a->dtype, i);
    st = precond_rows_place(ctx, p, &j->dinv, err);
out:
    free(h);
    return st;
}

/* Blocks of one row: float64 1/diag times r, whatever r's dtype. */
static int jacobi_apply(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_vec *r, spmv_vec *z, spmv_error *err)
{
    jacobi *j = p->impl;
    return precond_rows_apply(ctx, &j->dinv, 1, r, z, err);
}

static int jacobi_apply_k(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_vec *r, spmv_vec *z, const bool *active,
                          spmv_error *err)
{
    jacobi *j = p->impl;
    return precond_rows_apply_k(ctx, &j->dinv, 1, r, z, active, err);
}

static void jacobi_free(spmv_gpu_ctx *ctx, spmv_precond *p)
{
    jacobi *j = p->impl;
    if (j)
        spmv_vec_free(ctx, &j->dinv);
    free(j);
}

static const precond_ops jacobi_ops = {jacobi_setup, jacobi_apply, jacobi_free, true, jacobi_apply_k, NULL};

/* --------------------------------------------------------------- amg */

typedef struct amg {
    spmv_amg *h;         /* the hierarchy (kept on the host only for a host solve) */
    spmv_gpu_amg *g;     /* its copy on the GPU */
    precond_staging st;  /* float32 vectors on the host: through float64 */
    precond_staging_k kst; /* k columns on the host: the active ones, in float64 */
} amg;

static int amg_setup(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_csr *a, spmv_error *err)
{
    amg *m = precond_impl_alloc(p, sizeof *m, "amg", err);
    if (!m)
        return SPMV_ERR_NOMEM;
    spmv_amg_options o = p->o.amg;
    o.block_size = p->o.block_size > 1 ? p->o.block_size : o.block_size;
    if (ctx) { /* built where it is used (mis2), unless this hierarchy is the host's kind */
        spmv_amg_summary sum;
        int st = spmv_gpu_amg_build(ctx, a, &o, p->o.float32 ? SPMV_FLOAT32 : SPMV_FLOAT64, &m->g, &sum, err);
        if (st == SPMV_OK) {
            p->levels = sum.nlevels;
            p->operator_complexity = sum.operator_complexity;
            p->coarse_rows = sum.coarse_n;
            p->device_bytes = spmv_gpu_amg_bytes(m->g);
            p->built_on_device = true;
            p->aggregation = SPMV_AMG_AGG_MIS2;
        }
        if (st != SPMV_ERR_UNAVAILABLE)
            return st;
    }
    /* On the host. For a GPU that is a block_size > 1, a near-nullspace,
     * standard aggregation or a matrix the device build does not take
     * (spmv_gpu_amg_build), then the copy of the hierarchy. */
    int st = spmv_amg_setup_with(a, &o, NULL, &m->h, err);
    if (st)
        return st;
    p->levels = m->h->nlevels;
    p->operator_complexity = m->h->operator_complexity;
    p->coarse_rows = m->h->coarse_n;
    p->aggregation = m->h->o.aggregation;
    if (!ctx) {
        p->host_bytes = (size_t)m->h->bytes + (size_t)a->nnz * 12;
        return SPMV_OK;
    }
    st = spmv_gpu_amg_upload(ctx, m->h, p->o.float32 ? SPMV_FLOAT32 : SPMV_FLOAT64, &m->g, err);
    if (st == SPMV_OK)
        p->device_bytes = spmv_gpu_amg_bytes(m->g);
    spmv_amg_free(m->h); /* the device holds the hierarchy now */
    m->h = NULL;
    return st;
}

void *precond_impl_alloc(spmv_precond *p, size_t size, const char *what, spmv_error *err)
{
    p->impl = calloc(1, size);
    if (!p->impl)
        spmv_error_set(err, SPMV_ERR_NOMEM, 0, "%s: out of memory", what);
    return p->impl;
}

int precond_host_f64(const spmv_vec *r, spmv_vec *z, precond_staging *s,
                     void (*f)(void *arg, const double *r, double *z), void *arg, spmv_error *err)
{
    int64_t n = r->n;
    if (r->dtype == SPMV_FLOAT64) {
        f(arg, r->data, z->data);
        return SPMV_OK;
    }
    if (!s->out && (!(s->in = malloc((size_t)(n ? n : 1) * 8)) || !(s->out = malloc((size_t)(n ? n : 1) * 8))))
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for float32 staging");
    for (int64_t i = 0; i < n; i++)
        s->in[i] = ((const float *)r->data)[i];
    f(arg, s->in, s->out);
    for (int64_t i = 0; i < n; i++)
        ((float *)z->data)[i] = (float)s->out[i];
    return SPMV_OK;
}

void precond_staging_free(precond_staging *s)
{
    free(s->in);
    free(s->out);
    s->in = s->out = NULL;
}

int precond_host_f64_k(const spmv_vec *r, spmv_vec *z, const bool *active, precond_staging_k *s,
                       int (*f)(void *arg, int32_t m, const double *r, double *z, spmv_error *err), void *arg,
                       spmv_error *err)
{
    size_t n = (size_t)r->n;
    int32_t m = 0;
    for (int32_t j = 0; j < r->k; j++)
        m += !active || active[j];
    if (m == 0)
        return SPMV_OK;
    if (m == r->k && r->dtype == SPMV_FLOAT64)
        return f(arg, m, r->data, z->data, err);
    size_t need = n * (size_t)m;
    if (need > s->cap) {
        precond_staging_k_free(s);
        if (!(s->in = malloc((need ? need : 1) * 8)) || !(s->out = malloc((need ? need : 1) * 8))) {
            precond_staging_k_free(s);
            return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for %d columns' staging", m);
        }
        s->cap = need;
    }
    for (int32_t j = 0, c = 0; j < r->k; j++)
        if (!active || active[j]) {
            spmv_vec rj = spmv_vec_column(r, j);
            for (size_t i = 0; i < n; i++)
                s->in[(size_t)c * n + i] = spmv_val_get(rj.data, rj.dtype, (int64_t)i);
            c++;
        }
    int st = f(arg, m, s->in, s->out, err);
    for (int32_t j = 0, c = 0; j < r->k && st == SPMV_OK; j++)
        if (!active || active[j]) {
            spmv_vec zj = spmv_vec_column(z, j);
            for (size_t i = 0; i < n; i++)
                spmv_val_set(zj.data, zj.dtype, (int64_t)i, s->out[(size_t)c * n + i]);
            c++;
        }
    return st;
}

void precond_staging_k_free(precond_staging_k *s)
{
    free(s->in);
    free(s->out);
    *s = (precond_staging_k){0};
}

static void amg_vcycle(void *h, const double *r, double *z) { spmv_amg_vcycle(h, r, z); }

/* One V-cycle; on a GPU level 0 by `fine` where it is lent (NULL: the
 * hierarchy's own copy of A). */
static int amg_apply_with(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_gpu_product *fine, const spmv_vec *r,
                          spmv_vec *z, spmv_error *err)
{
    amg *m = p->impl;
    if (ctx)
        return spmv_gpu_amg_vcycle_with(ctx, m->g, fine, r, z, err);
    return precond_host_f64(r, z, &m->st, amg_vcycle, m->h, err);
}

static int amg_apply(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_vec *r, spmv_vec *z, spmv_error *err)
{
    return amg_apply_with(ctx, p, NULL, r, z, err);
}

static int amg_vcycle_k(void *h, int32_t k, const double *r, double *z, spmv_error *err)
{
    return spmv_amg_vcycle_k(h, k, r, z, err);
}

/* The cycle on the active columns at once (spmv_amg_vcycle_k on the host,
 * spmv_gpu_amg_vcycle_k on a GPU). */
static int amg_apply_k(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_vec *r, spmv_vec *z, const bool *active,
                       spmv_error *err)
{
    amg *m = p->impl;
    if (ctx)
        return spmv_gpu_amg_vcycle_k(ctx, m->g, r, z, active, err);
    return precond_host_f64_k(r, z, active, &m->kst, amg_vcycle_k, m->h, err);
}

static void amg_free(spmv_gpu_ctx *ctx, spmv_precond *p)
{
    amg *m = p->impl;
    if (!m)
        return;
    spmv_gpu_amg_free(ctx, m->g);
    spmv_amg_free(m->h);
    precond_staging_free(&m->st);
    precond_staging_k_free(&m->kst);
    free(m);
}

static const precond_ops amg_ops = {amg_setup, amg_apply, amg_free, true, amg_apply_k, amg_apply_with};

/* ------------------------------------------------------------- objects */

const precond_ops *precond_ops_of(spmv_precond_type t)
{
    switch (t) {
    case SPMV_PRECOND_JACOBI: return &jacobi_ops;
    case SPMV_PRECOND_BLOCK_JACOBI: return &precond_block_jacobi_ops;
    case SPMV_PRECOND_CHEBYSHEV: return &precond_chebyshev_ops;
    case SPMV_PRECOND_AMG: return &amg_ops;
    case SPMV_PRECOND_IC0: return &precond_ic0_ops;
    case SPMV_PRECOND_ILU0: return &precond_ilu0_ops;
    default: return NULL;
    }
}

static int check_setup(const spmv_csr *a, const spmv_precond_options *o, spmv_error *err)
{
    if (!a || a->rows != a->cols)
        return spmv_error_set(err, SPMV_ERR_SHAPE, 0, "a preconditioner needs a square matrix");
    if (!precond_ops_of(o->type))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "no preconditioner of type %s", spmv_precond_type_name(o->type));
    if (o->block_size < 1 || o->block_size > 8 || a->rows % o->block_size)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "block_size %d: must be 1..8 and divide the rows (%d)",
                              o->block_size, a->rows);
    if (o->degree < 1 || o->degree > 10)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "degree %d: must be 1..10", o->degree);
    return SPMV_OK;
}

int spmv_precond_setup(spmv_gpu_ctx *ctx, const spmv_csr *a, const spmv_precond_options *o, spmv_precond **out,
                       spmv_error *err)
{
    double t0 = spmv_now_ms();
    *out = NULL;
    int st = check_setup(a, o, err);
    if (st)
        return st;
    spmv_precond *p = calloc(1, sizeof *p);
    if (!p)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for a preconditioner");
    p->o = *o; /* the setup reads the caller's near-nullspace; it is not kept after */
    p->ops = precond_ops_of(o->type);
    p->device = ctx ? SPMV_DEVICE_GPU : SPMV_DEVICE_CPU;
    p->rows = a->rows;
    st = p->ops->setup(ctx, p, a, err);
    p->o.amg.near_nullspace = NULL;
    if (st) {
        spmv_precond_free(ctx, p);
        return st;
    }
    p->setup_ms = spmv_now_ms() - t0;
    *out = p;
    return SPMV_OK;
}

void spmv_precond_free(spmv_gpu_ctx *ctx, spmv_precond *p)
{
    if (!p)
        return;
    p->ops->free(ctx, p);
    free(p);
}

/* What an apply of p on r and z must be: spmv_precond_apply's checks. */
static int apply_check(spmv_gpu_ctx *ctx, const spmv_precond *p, const spmv_vec *r, const spmv_vec *z,
                       spmv_error *err)
{
    spmv_device_kind dev = ctx ? SPMV_DEVICE_GPU : SPMV_DEVICE_CPU;
    if (!p || !r || !z || p->device != dev || r->device != dev || z->device != dev || r->n != p->rows ||
        z->n != p->rows || r->k != 1 || z->k != 1 || r->dtype != z->dtype || r->data == z->data)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "preconditioner %s: r and z must be distinct vectors of its "
                              "device, %d values, one column, one dtype", p ? spmv_precond_type_name(p->o.type) : "?",
                              p ? p->rows : 0);
    return SPMV_OK;
}

int spmv_precond_apply(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_vec *r, spmv_vec *z, spmv_error *err)
{
    int st = apply_check(ctx, p, r, z, err);
    return st ? st : p->ops->apply(ctx, p, r, z, err);
}

int spmv_precond_apply_with(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_gpu_product *fine, const spmv_vec *r,
                            spmv_vec *z, spmv_error *err)
{
    int st = apply_check(ctx, p, r, z, err);
    if (st)
        return st;
    if (fine && fine->m && ctx && p->ops->apply_with)
        return p->ops->apply_with(ctx, p, fine, r, z, err);
    return p->ops->apply(ctx, p, r, z, err);
}

int spmv_precond_apply_k(spmv_gpu_ctx *ctx, spmv_precond *p, const spmv_vec *r, spmv_vec *z, const bool *active,
                         spmv_error *err)
{
    spmv_device_kind dev = ctx ? SPMV_DEVICE_GPU : SPMV_DEVICE_CPU;
    if (!p || !r || !z || p->device != dev || r->device != dev || z->device != dev || r->n != p->rows ||
        z->n != p->rows || r->k < 1 || z->k != r->k || r->dtype != z->dtype || r->data == z->data)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "preconditioner %s: r and z must be distinct blocks of its "
                              "device, %d rows, the same number of columns (1 or more), one dtype",
                              p ? spmv_precond_type_name(p->o.type) : "?", p ? p->rows : 0);
    if (p->ops->apply_k)
        return p->ops->apply_k(ctx, p, r, z, active, err);
    for (int32_t j = 0; j < r->k; j++)
        if (!active || active[j]) {
            spmv_vec rj = spmv_vec_column(r, j), zj = spmv_vec_column(z, j);
            int st = p->ops->apply(ctx, p, &rj, &zj, err);
            if (st)
                return st;
        }
    return SPMV_OK;
}

bool spmv_precond_has_apply_k(const spmv_precond *p) { return p && p->ops->apply_k; }

void spmv_precond_info_of(const spmv_precond *p, spmv_precond_info *out)
{
    memset(out, 0, sizeof *out);
    out->type = p->o.type;
    out->device = p->device;
    out->setup_ms = p->setup_ms;
    out->host_bytes = p->host_bytes;
    out->device_bytes = p->device_bytes;
    out->symmetric = p->ops->symmetric;
    out->float32 = p->o.float32 && p->device == SPMV_DEVICE_GPU &&
                   (p->o.type == SPMV_PRECOND_AMG || p->o.type == SPMV_PRECOND_IC0 || p->o.type == SPMV_PRECOND_ILU0);
    out->levels = p->levels;
    out->operator_complexity = p->operator_complexity;
    out->coarse_rows = p->coarse_rows;
    out->built_on_device = p->built_on_device;
    out->aggregation = p->aggregation;
    out->rho = p->rho;
}

int spmv_precond_apply_cb(void *binding, const spmv_vec *r, spmv_vec *z, spmv_error *err)
{
    spmv_precond_binding *b = binding;
    return spmv_precond_apply_with(b->gpu, b->p, &b->fine, r, z, err);
}

int spmv_precond_apply_k_cb(void *binding, const spmv_vec *r, spmv_vec *z, const bool *active, spmv_error *err)
{
    spmv_precond_binding *b = binding;
    return spmv_precond_apply_k(b->gpu, b->p, r, z, active, err);
}
