/* amg.cu — the smoothed aggregation hierarchy on a GPU, and its V-cycle.
 *
 * The host builds the hierarchy (engine/amg.c); spmv_gpu_amg_upload copies
 * every level's A, P and R (float64 CSR) to the device once, with a
 * cuSPARSE descriptor and an SpMV buffer each, 1/diag, four work vectors
 * a level and the coarsest level's dense inverse. The cycle is the host's
 * (spmv_amg_vcycle) step for step: residuals and transfers are cuSPARSE
 * SpMVs (r = b - A x as b copied, then -1 A x + r; x += P x_c with beta
 * 1), each smoothing step is one fused kernel (the Chebyshev recurrence's
 * d and x updates, or damped Jacobi), and the coarse solve is one cuBLAS
 * gemv with the dense inverse. Everything runs on the context's stream;
 * nothing returns to the host between the steps of a cycle.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <new>

#include "amg.h"
#include "gpu.cuh"

struct gpu_amg_csr {
    int32_t rows, cols;
    int64_t nnz;
    int32_t *row_ptr, *col;
    double *val;
    cusparseSpMatDescr_t descr;
    void *buf;
    size_t buf_bytes;
};

struct gpu_amg_level {
    gpu_amg_csr A, P, R;
    double *dinv, *r, *x, *b, *d;
    double rho;
};

struct spmv_gpu_amg {
    int32_t nlevels;
    gpu_amg_level *lv;
    spmv_amg_smoother smoother;
    int32_t presmooth, postsmooth, degree;
    int32_t coarse_n;
    double *coarse_inv;   /* row-major */
    double *in, *out;     /* level 0's b and x when the solve's vectors are float32 */
    size_t bytes;
};

/* ------------------------------------------------------------- kernels */

/* x = (zero ? 0 : x) + w dinv r: a damped Jacobi step, or the first step
 * of the Chebyshev recurrence (then d gets the step too). */
__global__ void amg_first(int32_t n, const double *__restrict__ dinv, const double *__restrict__ r, double w,
                          double *__restrict__ d, double *__restrict__ x, bool zero)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    double s = w * dinv[i] * r[i];
    if (d)
        d[i] = s;
    x[i] = (zero ? 0.0 : x[i]) + s;
}

/* d = c1 d + c2 dinv r; x += d: one step of the Chebyshev recurrence. */
__global__ void amg_cheb(int32_t n, const double *__restrict__ dinv, const double *__restrict__ r, double c1,
                         double c2, double *__restrict__ d, double *__restrict__ x)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    double s = c1 * d[i] + c2 * dinv[i] * r[i];
    d[i] = s;
    x[i] += s;
}

template <typename S, typename T> __global__ void amg_cast(int32_t n, const S *__restrict__ in, T *__restrict__ out)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = (T)in[i];
}

#define AMG_BLOCK 256
#define AMG_GRID(n) gpu_grid((n), AMG_BLOCK), AMG_BLOCK, 0, ctx->stream

/* -------------------------------------------------------------- upload */

/* Every array is at least one byte (an empty one too), so a pointer of
 * the hierarchy is NULL only when never allocated, and frees give back
 * what was taken (nz on both sides). */
static size_t nz(size_t bytes) { return bytes ? bytes : 1; }

static int alloc_track(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, void **p, size_t bytes, const char *what, spmv_error *err)
{
    int st = gpu_ctx_alloc(ctx, p, nz(bytes), what, err);
    if (st == SPMV_OK)
        g->bytes += nz(bytes);
    return st;
}

static int csr_copy(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, const spmv_csr *h, gpu_amg_csr *d, spmv_error *err)
{
    d->rows = h->rows;
    d->cols = h->cols;
    d->nnz = h->nnz;
    int st;
    cudaError_t e;
    if ((st = alloc_track(ctx, g, (void **)&d->row_ptr, ((size_t)h->rows + 1) * 4, "amg row_ptr", err)) ||
        (st = alloc_track(ctx, g, (void **)&d->col, (size_t)h->nnz * 4, "amg col", err)) ||
        (st = alloc_track(ctx, g, (void **)&d->val, (size_t)h->nnz * 8, "amg val", err)))
        return st;
    if ((e = cudaMemcpyAsync(d->row_ptr, h->row_ptr, ((size_t)h->rows + 1) * 4, cudaMemcpyHostToDevice, ctx->stream)) ||
        (e = cudaMemcpyAsync(d->col, h->col, (size_t)h->nnz * 4, cudaMemcpyHostToDevice, ctx->stream)) ||
        (e = cudaMemcpyAsync(d->val, h->val, (size_t)h->nnz * 8, cudaMemcpyHostToDevice, ctx->stream)))
        return gpu_cuda_error(e, err, "copying the AMG hierarchy");
    cusparseStatus_t s = cusparseCreateCsr(&d->descr, h->rows, h->cols, h->nnz, d->row_ptr, d->col, d->val,
                                           CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                                           CUDA_R_64F);
    return s == CUSPARSE_STATUS_SUCCESS ? SPMV_OK : gpu_sparse_error(s, err, "amg: cusparseCreateCsr");
}

/* y = alpha M x + beta y with cuSPARSE, M's buffer made on first use. */
static int csr_mv(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, gpu_amg_csr *m, double alpha, const double *x, double beta,
                  double *y, spmv_error *err)
{
    cusparseDnVecDescr_t vx, vy;
    cusparseStatus_t s;
    int st = SPMV_OK;
    if ((s = cusparseCreateDnVec(&vx, m->cols, (void *)x, CUDA_R_64F)) != CUSPARSE_STATUS_SUCCESS)
        return gpu_sparse_error(s, err, "amg: cusparseCreateDnVec");
    if ((s = cusparseCreateDnVec(&vy, m->rows, y, CUDA_R_64F)) != CUSPARSE_STATUS_SUCCESS) {
        cusparseDestroyDnVec(vx);
        return gpu_sparse_error(s, err, "amg: cusparseCreateDnVec");
    }
    if (!m->buf) {
        size_t bytes = 0;
        if ((s = cusparseSpMV_bufferSize(ctx->sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, m->descr, vx, &beta, vy,
                                         CUDA_R_64F, CUSPARSE_SPMV_CSR_ALG1, &bytes)) != CUSPARSE_STATUS_SUCCESS)
            st = gpu_sparse_error(s, err, "amg: cusparseSpMV_bufferSize");
        else if (!(st = alloc_track(ctx, g, &m->buf, bytes, "amg SpMV buffer", err)))
            m->buf_bytes = nz(bytes);
    }
    if (!st && (s = cusparseSpMV(ctx->sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, m->descr, vx, &beta, vy,
                                 CUDA_R_64F, CUSPARSE_SPMV_CSR_ALG1, m->buf)) != CUSPARSE_STATUS_SUCCESS)
        st = gpu_sparse_error(s, err, "amg: cusparseSpMV");
    cusparseDestroyDnVec(vx);
    cusparseDestroyDnVec(vy);
    return st;
}

static int level_copy(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, const spmv_amg *h, int32_t l, spmv_error *err)
{
    const spmv_amg_level *hl = &h->lv[l];
    gpu_amg_level *dl = &g->lv[l];
    size_t n = (size_t)hl->A.rows * 8;
    dl->rho = hl->rho;
    int st = csr_copy(ctx, g, &hl->A, &dl->A, err);
    if (!st && l + 1 < h->nlevels && !(st = csr_copy(ctx, g, &hl->P, &dl->P, err)))
        st = csr_copy(ctx, g, &hl->R, &dl->R, err);
    if (st || (st = alloc_track(ctx, g, (void **)&dl->dinv, n, "amg 1/diag", err)) ||
        (st = alloc_track(ctx, g, (void **)&dl->r, n, "amg r", err)) ||
        (st = alloc_track(ctx, g, (void **)&dl->x, n, "amg x", err)) ||
        (st = alloc_track(ctx, g, (void **)&dl->b, n, "amg b", err)) ||
        (st = alloc_track(ctx, g, (void **)&dl->d, n, "amg d", err)))
        return st;
    cudaError_t e = cudaMemcpyAsync(dl->dinv, hl->dinv, n, cudaMemcpyHostToDevice, ctx->stream);
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, "copying 1/diag");
}

static void csr_free(spmv_gpu_ctx *ctx, gpu_amg_csr *m)
{
    if (m->descr)
        cusparseDestroySpMat(m->descr);
    gpu_ctx_free(ctx, m->row_ptr, nz(((size_t)m->rows + 1) * 4));
    gpu_ctx_free(ctx, m->col, nz((size_t)m->nnz * 4));
    gpu_ctx_free(ctx, m->val, nz((size_t)m->nnz * 8));
    gpu_ctx_free(ctx, m->buf, m->buf_bytes);
}

extern "C" void spmv_gpu_amg_free(spmv_gpu_ctx *ctx, spmv_gpu_amg *g)
{
    if (!g)
        return;
    cudaStreamSynchronize(ctx->stream);
    for (int32_t l = 0; l < g->nlevels && g->lv; l++) {
        gpu_amg_level *dl = &g->lv[l];
        size_t n = nz((size_t)dl->A.rows * 8);
        csr_free(ctx, &dl->A);
        csr_free(ctx, &dl->P);
        csr_free(ctx, &dl->R);
        for (double *v : {dl->dinv, dl->r, dl->x, dl->b, dl->d})
            gpu_ctx_free(ctx, v, n);
    }
    size_t n0 = nz(g->lv ? (size_t)g->lv[0].A.rows * 8 : 0);
    gpu_ctx_free(ctx, g->in, n0);
    gpu_ctx_free(ctx, g->out, n0);
    gpu_ctx_free(ctx, g->coarse_inv, nz((size_t)g->coarse_n * g->coarse_n * 8));
    free(g->lv);
    delete g;
}

extern "C" int spmv_gpu_amg_upload(spmv_gpu_ctx *ctx, const spmv_amg *h, spmv_gpu_amg **out, spmv_error *err)
{
    *out = NULL;
    if (!ctx || !h)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "amg upload: missing context or hierarchy");
    spmv_gpu_amg *g = new (std::nothrow) spmv_gpu_amg();
    if (!g || !(g->lv = (gpu_amg_level *)calloc((size_t)h->nlevels, sizeof *g->lv))) {
        delete g;
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "amg upload: out of host memory");
    }
    g->nlevels = h->nlevels;
    g->smoother = h->o.smoother;
    g->presmooth = h->o.presmooth;
    g->postsmooth = h->o.postsmooth;
    g->degree = h->o.degree;
    g->coarse_n = h->coarse_n;
    int st = cudaSetDevice(ctx->device) == cudaSuccess ? SPMV_OK
                                                       : spmv_error_set(err, SPMV_ERR_DEVICE, 0, "cudaSetDevice");
    for (int32_t l = 0; !st && l < h->nlevels; l++)
        st = level_copy(ctx, g, h, l, err);
    size_t cb = (size_t)h->coarse_n * h->coarse_n * 8;
    if (!st && !(st = alloc_track(ctx, g, (void **)&g->coarse_inv, cb, "amg coarse inverse", err))) {
        cudaError_t e = cudaMemcpyAsync(g->coarse_inv, h->coarse_inv, cb, cudaMemcpyHostToDevice, ctx->stream);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(ctx->stream);
        if (e != cudaSuccess)
            st = gpu_cuda_error(e, err, "copying the AMG hierarchy");
    }
    if (st) {
        spmv_gpu_amg_free(ctx, g);
        return st;
    }
    *out = g;
    return SPMV_OK;
}

extern "C" size_t spmv_gpu_amg_bytes(const spmv_gpu_amg *g) { return g ? g->bytes : 0; }

/* --------------------------------------------------------------- cycle */

static int launched(spmv_error *err, const char *what) { return gpu_check_launch(err, what); }

/* r = b - A x */
static int residual(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, gpu_amg_level *l, const double *b, const double *x,
                    spmv_error *err)
{
    cudaError_t e = cudaMemcpyAsync(l->r, b, (size_t)l->A.rows * 8, cudaMemcpyDeviceToDevice, ctx->stream);
    if (e != cudaSuccess)
        return gpu_cuda_error(e, err, "amg residual");
    return csr_mv(ctx, g, &l->A, -1.0, x, 1.0, l->r, err);
}

/* The host's smooth() (engine/amg.c) on the device. */
static int smooth(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, gpu_amg_level *l, const double *b, double *x, int32_t sweeps,
                  bool zero, spmv_error *err)
{
    int32_t n = l->A.rows;
    int st;
    for (int32_t s = 0; s < sweeps; s++, zero = false) {
        const double *r = b;
        if (!zero) {
            if ((st = residual(ctx, g, l, b, x, err)))
                return st;
            r = l->r;
        }
        if (g->smoother == SPMV_AMG_JACOBI) {
            amg_first<<<AMG_GRID(n)>>>(n, l->dinv, r, 4.0 / 3.0 / l->rho, NULL, x, zero);
            if ((st = launched(err, "amg_first")))
                return st;
            continue;
        }
        double hi = 1.1 * l->rho, lo = l->rho / 30.0;
        double theta = (hi + lo) / 2, delta = (hi - lo) / 2, sigma = theta / delta, rk = 1.0 / sigma;
        amg_first<<<AMG_GRID(n)>>>(n, l->dinv, r, 1.0 / theta, l->d, x, zero);
        if ((st = launched(err, "amg_first")))
            return st;
        for (int32_t j = 1; j < g->degree; j++) {
            double rn = 1.0 / (2.0 * sigma - rk);
            if ((st = residual(ctx, g, l, b, x, err)))
                return st;
            amg_cheb<<<AMG_GRID(n)>>>(n, l->dinv, l->r, rn * rk, 2.0 * rn / delta, l->d, x);
            if ((st = launched(err, "amg_cheb")))
                return st;
            rk = rn;
        }
    }
    return SPMV_OK;
}

static int coarse_solve(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, const double *b, double *x, spmv_error *err)
{
    const double one = 1.0, zero = 0.0;
    int n = g->coarse_n;
    int st = gpu_blas_handle(ctx, err);
    if (st)
        return st;
    /* the inverse is row-major: its transpose, column-major */
    cublasStatus_t s = cublasDgemv(ctx->blas, CUBLAS_OP_T, n, n, &one, g->coarse_inv, n, b, 1, &zero, x, 1);
    return s == CUBLAS_STATUS_SUCCESS ? SPMV_OK
                                      : spmv_error_set(err, SPMV_ERR_DEVICE, 0, "amg coarse solve: cuBLAS status %d",
                                                       (int)s);
}

static int cycle(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, int32_t l, const double *b, double *x, spmv_error *err)
{
    gpu_amg_level *lv = &g->lv[l];
    if (l == g->nlevels - 1)
        return coarse_solve(ctx, g, b, x, err);
    gpu_amg_level *next = &g->lv[l + 1];
    int st = SPMV_OK;
    cudaError_t e = cudaSuccess;
    if (g->presmooth)
        st = smooth(ctx, g, lv, b, x, g->presmooth, true, err);
    else
        e = cudaMemsetAsync(x, 0, (size_t)lv->A.rows * 8, ctx->stream);
    if (e != cudaSuccess)
        return gpu_cuda_error(e, err, "amg cycle");
    if (st || (st = residual(ctx, g, lv, b, x, err)) || (st = csr_mv(ctx, g, &lv->R, 1.0, lv->r, 0.0, next->b, err)) ||
        (st = cycle(ctx, g, l + 1, next->b, next->x, err)) || (st = csr_mv(ctx, g, &lv->P, 1.0, next->x, 1.0, x, err)))
        return st;
    return smooth(ctx, g, lv, b, x, g->postsmooth, false, err);
}

/* Level 0's b and x: the vectors themselves in float64, else converted. */
static int vcycle_f32(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, const spmv_vec *r, spmv_vec *z, spmv_error *err)
{
    int32_t n = g->lv[0].A.rows;
    int st;
    if (!g->in && ((st = alloc_track(ctx, g, (void **)&g->in, (size_t)n * 8, "amg float32 staging", err)) ||
                   (st = alloc_track(ctx, g, (void **)&g->out, (size_t)n * 8, "amg float32 staging", err))))
        return st;
    amg_cast<float, double><<<AMG_GRID(n)>>>(n, (const float *)r->data, g->in);
    if ((st = launched(err, "amg_cast")) || (st = cycle(ctx, g, 0, g->in, g->out, err)))
        return st;
    amg_cast<double, float><<<AMG_GRID(n)>>>(n, g->out, (float *)z->data);
    return launched(err, "amg_cast");
}

extern "C" int spmv_gpu_amg_vcycle(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, const spmv_vec *r, spmv_vec *z,
                                   spmv_error *err)
{
    if (!ctx || !g || !r || !z)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "amg cycle: missing context, hierarchy or vector");
    int32_t n = g->lv[0].A.rows;
    if (r->device != SPMV_DEVICE_GPU || z->device != SPMV_DEVICE_GPU || r->n != n || z->n != n || r->k != 1 ||
        z->k != 1 || r->dtype != z->dtype || r->data == z->data)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "amg cycle: r and z must be distinct device vectors of %d "
                              "values, one column, one dtype", n);
    if (r->dtype == SPMV_FLOAT32)
        return vcycle_f32(ctx, g, r, z, err);
    return cycle(ctx, g, 0, (const double *)r->data, (double *)z->data, err);
}
