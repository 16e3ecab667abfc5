/* amg.cu — the smoothed aggregation hierarchy on a GPU, and its V-cycle.
 *
 * The host builds the hierarchy (engine/amg.c); spmv_gpu_amg_upload copies
 * every level's A, P and R to the device once (devcsr.cu's operators: a
 * cuSPARSE descriptor and an SpMV buffer each), 1/diag, four work vectors
 * a level and the coarsest level's dense inverse, all in float64 or all
 * in float32 (issue 29's mixed precision: a float32 hierarchy under a
 * float64 Krylov solver, the vectors converted at level 0). The cycle is
 * the host's (spmv_amg_vcycle) step for step: residuals and transfers are
 * cuSPARSE SpMVs (r = b - A x as b copied, then -1 A x + r; x += P x_c
 * with beta 1), each smoothing step is one fused kernel (the Chebyshev
 * recurrence's d and x updates, or damped Jacobi), and the coarse solve is
 * one cuBLAS gemv with the dense inverse. Everything runs on the context's
 * stream; nothing returns to the host between the steps of a cycle.
 *
 * The same cycle runs on k columns at once (spmv_gpu_amg_vcycle_k, the
 * lockstep's blocks): every SpMV becomes one cuSPARSE SpMM of the n x k
 * column-major blocks (gpu_dcsr_mm), the smoothing kernels take the column
 * in blockIdx.y, the coarse solve is one gemm; its work blocks, four a
 * level of kcap columns, are made on the first such call and grown for a
 * larger k. One column goes through the SpMV and gemv paths above.
 *
 * A smoother-only object (spmv_gpu_amg_upload_smoother: one level, no
 * coarse inverse) is the chebyshev preconditioner: its "cycle" is one
 * Chebyshev sweep from zero.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <new>

#include "amg.cuh"

/* ------------------------------------------------------------- kernels */

/* The residual a smoothing step reads: r[i], or b[i] - r[i] where r holds
 * A x by the solve's own product (residual's `defer`: one pass over the
 * vectors fewer, the same bits as amg_b_minus's). */
template <typename T> __device__ __forceinline__ T amg_r(const T *__restrict__ r, const T *__restrict__ b, size_t i)
{
    return b ? (T)(b[i] - r[i]) : r[i];
}

/* x = (zero ? 0 : x) + w dinv r: a damped Jacobi step, or the first step
 * of the Chebyshev recurrence (then d gets the step too); on column
 * blockIdx.y of n x k blocks (the grid's y: the columns). b: r is b - r
 * (amg_r). */
template <typename T>
__global__ void amg_first(int32_t n, const T *__restrict__ dinv, const T *__restrict__ r, const T *__restrict__ b, T w,
                          T *__restrict__ d, T *__restrict__ x, bool zero)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    size_t o = (size_t)blockIdx.y * (size_t)n; /* column blockIdx.y of a k-column block */
    r += o;
    x += o;
    T s = w * dinv[i] * amg_r(r, b ? b + o : b, i);
    if (d)
        d[o + i] = s;
    x[i] = (zero ? (T)0 : x[i]) + s;
}

/* d = c1 d + c2 dinv r; x += d: one step of the Chebyshev recurrence, on
 * column blockIdx.y. b: r is b - r (amg_r). */
template <typename T>
__global__ void amg_cheb(int32_t n, const T *__restrict__ dinv, const T *__restrict__ r, const T *__restrict__ b, T c1,
                         T c2, T *__restrict__ d, T *__restrict__ x)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    size_t o = (size_t)blockIdx.y * (size_t)n;
    r += o;
    d += o;
    x += o;
    T s = c1 * d[i] + c2 * dinv[i] * amg_r(r, b ? b + o : b, i);
    d[i] = s;
    x[i] += s;
}

/* r = b - r (r held A x): a level-0 residual whose product was the
 * solve's own (spmv_gpu_amg_vcycle_with). */
template <typename T> __global__ void amg_b_minus(int32_t n, const T *__restrict__ b, T *__restrict__ r)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        r[i] = b[i] - r[i];
}

#define AMG_BLOCK 256
#define AMG_GRID(n, k) dim3(gpu_grid((n), AMG_BLOCK), (unsigned)(k)), AMG_BLOCK, 0, ctx->stream

/* -------------------------------------------------------------- upload */

static void kwork_release(spmv_gpu_ctx *ctx, spmv_gpu_amg *g);

int gpu_amg_alloc(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, void **p, size_t values, const char *what, spmv_error *err)
{
    return gpu_alloc_counted(ctx, p, values * spmv_dtype_size(g->dtype), &g->bytes, what, err);
}

/* Level hl's operators (P and R unless `last`), 1/diag and work vectors. */
static int level_copy(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, const spmv_amg_level *hl, gpu_amg_level *dl, bool last,
                      spmv_error *err)
{
    size_t n = (size_t)hl->A.rows;
    dl->rho = hl->rho;
    int st = gpu_dcsr_copy(ctx, &hl->A, g->dtype, &dl->A, &g->bytes, err);
    if (!st && !last && !(st = gpu_dcsr_copy(ctx, &hl->P, g->dtype, &dl->P, &g->bytes, err)))
        st = gpu_dcsr_copy(ctx, &hl->R, g->dtype, &dl->R, &g->bytes, err);
    if (st || (st = gpu_amg_alloc(ctx, g, &dl->dinv, n, "amg 1/diag", err)) ||
        (st = gpu_amg_alloc(ctx, g, &dl->r, n, "amg r", err)) || (st = gpu_amg_alloc(ctx, g, &dl->x, n, "amg x", err)) ||
        (st = gpu_amg_alloc(ctx, g, &dl->b, n, "amg b", err)) || (st = gpu_amg_alloc(ctx, g, &dl->d, n, "amg d", err)))
        return st;
    return gpu_put_values(ctx, dl->dinv, hl->dinv, (int64_t)n, g->dtype, err);
}

extern "C" void spmv_gpu_amg_free(spmv_gpu_ctx *ctx, spmv_gpu_amg *g)
{
    if (!g)
        return;
    cudaStreamSynchronize(ctx->stream);
    size_t vs = spmv_dtype_size(g->dtype);
    /* the staging vectors' size, read before the free below resets level 0's A */
    size_t n0 = gpu_nz(g->lv ? (size_t)g->lv[0].A.rows * vs : 0);
    if (g->lv)
        kwork_release(ctx, g); /* before the levels' rows are reset */
    for (int32_t l = 0; l < g->nlevels && g->lv; l++) {
        gpu_amg_level *dl = &g->lv[l];
        size_t n = gpu_nz((size_t)dl->A.rows * vs);
        if (dl->view) /* before the arrays it borrows */
            gpu_matrix_destroy(ctx, dl->view);
        gpu_dcsr_free(ctx, &dl->A);
        gpu_dcsr_free(ctx, &dl->P);
        gpu_dcsr_free(ctx, &dl->R);
        for (void *v : {dl->dinv, dl->r, dl->x, dl->b, dl->d})
            gpu_ctx_free(ctx, v, n);
    }
    gpu_ctx_free(ctx, g->in, n0);
    gpu_ctx_free(ctx, g->out, n0);
    gpu_ctx_free(ctx, g->coarse_inv, gpu_nz((size_t)g->coarse_n * g->coarse_n * vs));
    free(g->lv);
    delete g;
}

/* A fresh object of `levels` levels in dtype, on ctx's device. */
int gpu_amg_new(spmv_gpu_ctx *ctx, int32_t levels, spmv_dtype dtype, spmv_gpu_amg **out, spmv_error *err)
{
    spmv_gpu_amg *g = new (std::nothrow) spmv_gpu_amg();
    if (!g || !(g->lv = (gpu_amg_level *)calloc((size_t)levels, sizeof *g->lv))) {
        delete g;
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "amg upload: out of host memory");
    }
    g->nlevels = levels;
    g->dtype = dtype;
    *out = g;
    return cudaSetDevice(ctx->device) == cudaSuccess ? SPMV_OK
                                                     : spmv_error_set(err, SPMV_ERR_DEVICE, 0, "cudaSetDevice");
}

/* A level's view runs gpu.psell where the level has rows enough for its
 * 32-row slices to fill the GPU many times over, gpu.pcsr below: run 47
 * (docs/benchmarks/solve.md) timed the FV hierarchy's A1 (902 366 rows) at
 * 0.101 ms by gpu.psell, 0.149 by gpu.pcsr, 0.136 by cuSPARSE's CSR, and
 * A2 (12 490 rows) at 0.0096 by gpu.pcsr, 0.0155 by gpu.psell, 0.0158 by
 * cuSPARSE; their formats took 6.1 and 1.0 ms to build. */
#define AMG_VIEW_PSELL_ROWS 100000
static const spmv_params amg_view_params = {{0}};

int gpu_amg_views(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, spmv_error *err)
{
    for (int32_t l = 1; !g->smoother_only && l + 1 < g->nlevels; l++) {
        gpu_amg_level *lv = &g->lv[l];
        const spmv_kernel *k = spmv_kernel_find(lv->A.rows >= AMG_VIEW_PSELL_ROWS ? "gpu.psell" : "gpu.pcsr");
        if (!k || lv->view || lv->A.nnz == 0)
            continue;
        spmv_error verr;
        memset(&verr, 0, sizeof verr);
        int st = gpu_matrix_view(ctx, lv->A.rows, lv->A.cols, lv->A.nnz, lv->A.dtype, lv->A.row_ptr, lv->A.col,
                                 lv->A.val, &lv->view, &verr);
        if (!st && (st = gpu_ensure_format(ctx, lv->view, k->format, &verr))) {
            gpu_matrix_destroy(ctx, lv->view);
            lv->view = NULL;
        }
        if (st == SPMV_ERR_DEVICE) { /* a CUDA failure; anything else (memory, the padding rule) leaves cuSPARSE's */
            *err = verr;
            return st;
        }
        if (st)
            continue;
        lv->prod = spmv_gpu_product{lv->view, k, &amg_view_params};
        g->bytes += spmv_gpu_matrix_bytes(lv->view);
    }
    return SPMV_OK;
}

/* Waits for the copies, makes the levels' views; on failure frees g. */
static int upload_done(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, int st, spmv_gpu_amg **out, spmv_error *err)
{
    if (!st)
        st = gpu_amg_views(ctx, g, err);
    cudaError_t e = st ? cudaSuccess : cudaStreamSynchronize(ctx->stream);
    if (e != cudaSuccess)
        st = gpu_cuda_error(e, err, "copying the AMG hierarchy");
    if (st) {
        spmv_gpu_amg_free(ctx, g);
        return st;
    }
    *out = g;
    return SPMV_OK;
}

extern "C" int spmv_gpu_amg_upload(spmv_gpu_ctx *ctx, const spmv_amg *h, spmv_dtype dtype, spmv_gpu_amg **out,
                                   spmv_error *err)
{
    *out = NULL;
    if (!ctx || !h)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "amg upload: missing context or hierarchy");
    spmv_gpu_amg *g = NULL;
    int st = gpu_amg_new(ctx, h->nlevels, dtype, &g, err);
    if (!g)
        return st;
    g->smoother = h->o.smoother;
    g->presmooth = h->o.presmooth;
    g->postsmooth = h->o.postsmooth;
    g->degree = h->o.degree;
    g->coarse_n = h->coarse_n;
    for (int32_t l = 0; !st && l < h->nlevels; l++)
        st = level_copy(ctx, g, &h->lv[l], &g->lv[l], l + 1 == h->nlevels, err);
    size_t cn = (size_t)h->coarse_n * h->coarse_n;
    if (!st && !(st = gpu_amg_alloc(ctx, g, &g->coarse_inv, cn, "amg coarse inverse", err)))
        st = gpu_put_values(ctx, g->coarse_inv, h->coarse_inv, (int64_t)cn, dtype, err);
    return upload_done(ctx, g, st, out, err);
}

extern "C" int spmv_gpu_amg_upload_smoother(spmv_gpu_ctx *ctx, const spmv_amg_level *lv, int32_t degree,
                                            spmv_gpu_amg **out, spmv_error *err)
{
    *out = NULL;
    if (!ctx || !lv)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "smoother upload: missing context or level");
    spmv_gpu_amg *g = NULL;
    int st = gpu_amg_new(ctx, 1, SPMV_FLOAT64, &g, err);
    if (!g)
        return st;
    g->smoother_only = true;
    g->smoother = SPMV_AMG_CHEBYSHEV;
    g->degree = degree;
    if (!st)
        st = level_copy(ctx, g, lv, &g->lv[0], true, err);
    return upload_done(ctx, g, st, out, err);
}

extern "C" size_t spmv_gpu_amg_bytes(const spmv_gpu_amg *g) { return g ? g->bytes : 0; }

/* --------------------------------------------------------------- cycle */

static int launched(spmv_error *err, const char *what) { return gpu_check_launch(err, what); }

/* r = b - A x on k columns (w->r); fine (one column: the solve's product
 * lent at level 0, the level's view below it): A x by that product, then r = b - A x in one pass, or (defer)
 * not: w->r keeps A x and the smoothing kernel that reads it forms b - A x
 * itself (amg_r). */
template <typename T>
static int residual(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, gpu_amg_level *l, const gpu_amg_work *w, int32_t k,
                    const spmv_gpu_product *fine, const T *b, const T *x, bool defer, spmv_error *err)
{
    if (fine) {
        int32_t n = l->A.rows;
        spmv_vec xv = {SPMV_DEVICE_GPU, g->dtype, n, 1, (void *)x}, rv = {SPMV_DEVICE_GPU, g->dtype, n, 1, w->r};
        int st = spmv_gpu_launch(ctx, fine->k, fine->m, fine->p, &xv, &rv, err);
        if (st || defer)
            return st;
        amg_b_minus<T><<<AMG_GRID(n, 1)>>>(n, b, (T *)w->r);
        return launched(err, "amg_b_minus");
    }
    size_t bytes = (size_t)l->A.rows * (size_t)k * sizeof(T);
    cudaError_t e = cudaMemcpyAsync(w->r, b, bytes, cudaMemcpyDeviceToDevice, ctx->stream);
    if (e != cudaSuccess)
        return gpu_cuda_error(e, err, "amg residual");
    return gpu_dcsr_mm(ctx, &l->A, k, -1.0, x, 1.0, w->r, &g->bytes, err);
}

/* The host's smooth() and spmv_amg_chebyshev() (engine/amg.c) on the
 * device, on k columns (w: the level's work); the coefficients are
 * computed in float64, as on the host. */
template <typename T>
static int smooth(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, gpu_amg_level *l, const gpu_amg_work *w, int32_t k,
                  const spmv_gpu_product *fine, const T *b, T *x, int32_t sweeps, bool zero, spmv_error *err)
{
    int32_t n = l->A.rows;
    T *dinv = (T *)l->dinv, *lr = (T *)w->r, *ld = (T *)w->d;
    int st;
    const T *bm = fine ? b : NULL; /* with a catalogue kernel's product the kernels form r = b - A x themselves */
    for (int32_t s = 0; s < sweeps; s++, zero = false) {
        const T *r = b, *rb = NULL;
        if (!zero) {
            if ((st = residual<T>(ctx, g, l, w, k, fine, b, x, true, err)))
                return st;
            r = lr;
            rb = bm;
        }
        if (g->smoother == SPMV_AMG_JACOBI) {
            amg_first<T><<<AMG_GRID(n, k)>>>(n, dinv, r, rb, (T)(4.0 / 3.0 / l->rho), (T *)NULL, x, zero);
            if ((st = launched(err, "amg_first")))
                return st;
            continue;
        }
        double hi = 1.1 * l->rho, lo = l->rho / 30.0;
        double theta = (hi + lo) / 2, delta = (hi - lo) / 2, sigma = theta / delta, rk = 1.0 / sigma;
        amg_first<T><<<AMG_GRID(n, k)>>>(n, dinv, r, rb, (T)(1.0 / theta), ld, x, zero);
        if ((st = launched(err, "amg_first")))
            return st;
        for (int32_t j = 1; j < g->degree; j++) {
            double rn = 1.0 / (2.0 * sigma - rk);
            if ((st = residual<T>(ctx, g, l, w, k, fine, b, x, true, err)))
                return st;
            amg_cheb<T><<<AMG_GRID(n, k)>>>(n, dinv, lr, bm, (T)(rn * rk), (T)(2.0 * rn / delta), ld, x);
            if ((st = launched(err, "amg_cheb")))
                return st;
            rk = rn;
        }
    }
    return SPMV_OK;
}

/* x = inv b on k columns: a gemv for one, a gemm for more. */
static int coarse_solve(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, int32_t k, const void *b, void *x, spmv_error *err)
{
    int n = g->coarse_n;
    int st = gpu_blas_handle(ctx, err);
    if (st)
        return st;
    /* the inverse is row-major: its transpose, column-major */
    cublasStatus_t s;
    if (g->dtype == SPMV_FLOAT32) {
        const float one = 1.0f, zero = 0.0f;
        const float *a = (const float *)g->coarse_inv, *bb = (const float *)b;
        s = k == 1 ? cublasSgemv(ctx->blas, CUBLAS_OP_T, n, n, &one, a, n, bb, 1, &zero, (float *)x, 1)
                   : cublasSgemm(ctx->blas, CUBLAS_OP_T, CUBLAS_OP_N, n, k, n, &one, a, n, bb, n, &zero, (float *)x, n);
    } else {
        const double one = 1.0, zero = 0.0;
        const double *a = (const double *)g->coarse_inv, *bb = (const double *)b;
        s = k == 1 ? cublasDgemv(ctx->blas, CUBLAS_OP_T, n, n, &one, a, n, bb, 1, &zero, (double *)x, 1)
                   : cublasDgemm(ctx->blas, CUBLAS_OP_T, CUBLAS_OP_N, n, k, n, &one, a, n, bb, n, &zero, (double *)x,
                                 n);
    }
    return s == CUBLAS_STATUS_SUCCESS ? SPMV_OK
                                      : spmv_error_set(err, SPMV_ERR_DEVICE, 0, "amg coarse solve: cuBLAS status %d",
                                                       (int)s);
}

/* The cycle from level l on k columns, w every level's work; fine: level
 * 0's product lent by the solve (spmv_gpu_amg_vcycle_with), NULL below
 * it, where a level with a view (one column) multiplies by that instead. */
template <typename T>
static int cycle(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, const gpu_amg_work *w, int32_t k, int32_t l,
                 const spmv_gpu_product *fine, const T *b, T *x, spmv_error *err)
{
    gpu_amg_level *lv = &g->lv[l];
    if (g->smoother_only)
        return smooth<T>(ctx, g, lv, &w[l], k, fine, b, x, 1, true, err);
    if (l == g->nlevels - 1)
        return coarse_solve(ctx, g, k, b, x, err);
    if (!fine && k == 1 && lv->view) /* below level 0: A x by the level's own view, as level 0's by the solve's */
        fine = &lv->prod;
    const gpu_amg_work *wl = &w[l], *wn = &w[l + 1];
    int st = SPMV_OK;
    cudaError_t e = cudaSuccess;
    if (g->presmooth)
        st = smooth<T>(ctx, g, lv, wl, k, fine, b, x, g->presmooth, true, err);
    else
        e = cudaMemsetAsync(x, 0, (size_t)lv->A.rows * (size_t)k * sizeof(T), ctx->stream);
    if (e != cudaSuccess)
        return gpu_cuda_error(e, err, "amg cycle");
    if (st || (st = residual<T>(ctx, g, lv, wl, k, fine, b, x, false, err)) ||
        (st = gpu_dcsr_mm(ctx, &lv->R, k, 1.0, wl->r, 0.0, wn->b, &g->bytes, err)) ||
        (st = cycle<T>(ctx, g, w, k, l + 1, NULL, (const T *)wn->b, (T *)wn->x, err)) ||
        (st = gpu_dcsr_mm(ctx, &lv->P, k, 1.0, wn->x, 1.0, x, &g->bytes, err)))
        return st;
    return smooth<T>(ctx, g, lv, wl, k, fine, b, x, g->postsmooth, false, err);
}

/* The cycle on k columns in the hierarchy's dtype: w the k-column work
 * (NULL: one column, each level's own vectors). */
static int cycle_of(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, const gpu_amg_work *w, int32_t k,
                    const spmv_gpu_product *fine, const void *b, void *x, spmv_error *err)
{
    gpu_amg_work one[32];
    if (!w) {
        for (int32_t l = 0; l < g->nlevels; l++)
            one[l] = gpu_amg_work{g->lv[l].r, g->lv[l].x, g->lv[l].b, g->lv[l].d};
        w = one;
    }
    if (g->dtype == SPMV_FLOAT32)
        return cycle<float>(ctx, g, w, k, 0, fine, (const float *)b, (float *)x, err);
    return cycle<double>(ctx, g, w, k, 0, fine, (const double *)b, (double *)x, err);
}

/* Level 0's b and x: the vectors themselves in the hierarchy's dtype,
 * else converted on the way in and out. */
static int vcycle_converted(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, const spmv_vec *r, spmv_vec *z, spmv_error *err)
{
    int32_t n = g->lv[0].A.rows;
    int st;
    if (!g->in && ((st = gpu_amg_alloc(ctx, g, &g->in, (size_t)n, "amg vector staging", err)) ||
                   (st = gpu_amg_alloc(ctx, g, &g->out, (size_t)n, "amg vector staging", err))))
        return st;
    if ((st = gpu_cast(ctx, r->data, r->dtype, g->in, g->dtype, n, err)) ||
        (st = cycle_of(ctx, g, NULL, 1, NULL, g->in, g->out, err)))
        return st;
    return gpu_cast(ctx, g->out, g->dtype, z->data, z->dtype, n, err);
}

extern "C" int spmv_gpu_amg_vcycle(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, const spmv_vec *r, spmv_vec *z,
                                   spmv_error *err)
{
    return spmv_gpu_amg_vcycle_with(ctx, g, NULL, r, z, err);
}

extern "C" int spmv_gpu_amg_vcycle_with(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, const spmv_gpu_product *fine,
                                        const spmv_vec *r, spmv_vec *z, spmv_error *err)
{
    if (!ctx || !g || !r || !z)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "amg cycle: missing context, hierarchy or vector");
    int32_t n = g->lv[0].A.rows;
    if (r->device != SPMV_DEVICE_GPU || z->device != SPMV_DEVICE_GPU || r->n != n || z->n != n || r->k != 1 ||
        z->k != 1 || r->dtype != z->dtype || r->data == z->data)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "amg cycle: r and z must be distinct device vectors of %d "
                              "values, one column, one dtype", n);
    if (r->dtype != g->dtype)
        return vcycle_converted(ctx, g, r, z, err);
    if (fine && (!fine->m || !fine->k || fine->m->dtype != g->dtype || fine->m->rows != n || fine->m->cols != n))
        fine = NULL; /* not the hierarchy's matrix as it holds it: its own copy of A serves */
    return cycle_of(ctx, g, NULL, 1, fine, r->data, z->data, err);
}

/* Frees the k-column work blocks (kcap columns each; those allocated). */
static void kwork_release(spmv_gpu_ctx *ctx, spmv_gpu_amg *g)
{
    size_t vs = spmv_dtype_size(g->dtype), n0 = g->nlevels ? (size_t)g->lv[0].A.rows : 0;
    for (int32_t l = 0; l < g->nlevels && g->kw; l++) {
        size_t n = gpu_nz((size_t)g->lv[l].A.rows * (size_t)g->kcap * vs);
        for (void *v : {g->kw[l].r, g->kw[l].x, g->kw[l].b, g->kw[l].d})
            if (v) {
                gpu_ctx_free(ctx, v, n);
                g->bytes -= n;
            }
    }
    for (void *v : {g->kin, g->kout})
        if (v) {
            size_t n = gpu_nz(n0 * (size_t)g->kcap * vs);
            gpu_ctx_free(ctx, v, n);
            g->bytes -= n;
        }
    free(g->kw);
    g->kw = NULL;
    g->kin = g->kout = NULL;
    g->kcap = 0;
}

/* The k-column work for k columns: kept when made for k or more, else
 * made anew (and nothing kept when that fails). */
static int kwork_ready(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, int32_t k, spmv_error *err)
{
    if (g->kw && g->kcap >= k)
        return SPMV_OK;
    kwork_release(ctx, g);
    if (!(g->kw = (gpu_amg_work *)calloc((size_t)g->nlevels, sizeof *g->kw)))
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "amg cycle: out of host memory");
    g->kcap = k;
    int st = SPMV_OK;
    for (int32_t l = 0; l < g->nlevels && !st; l++) {
        size_t n = (size_t)g->lv[l].A.rows * (size_t)k;
        gpu_amg_work *w = &g->kw[l];
        if ((st = gpu_amg_alloc(ctx, g, &w->r, n, "amg k-column r", err)) ||
            (st = gpu_amg_alloc(ctx, g, &w->x, n, "amg k-column x", err)) ||
            (st = gpu_amg_alloc(ctx, g, &w->b, n, "amg k-column b", err)))
            break;
        st = gpu_amg_alloc(ctx, g, &w->d, n, "amg k-column d", err);
    }
    size_t n0 = (size_t)g->lv[0].A.rows * (size_t)k;
    if (!st && !(st = gpu_amg_alloc(ctx, g, &g->kin, n0, "amg k-column staging", err)))
        st = gpu_amg_alloc(ctx, g, &g->kout, n0, "amg k-column staging", err);
    if (st)
        kwork_release(ctx, g);
    return st;
}

/* Column j of a device block v. */
static void *column_of(const spmv_vec *v, int32_t j)
{
    return (char *)v->data + (size_t)j * (size_t)v->n * spmv_dtype_size(v->dtype);
}

extern "C" int spmv_gpu_amg_vcycle_k(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, const spmv_vec *r, spmv_vec *z,
                                     const bool *active, spmv_error *err)
{
    if (!ctx || !g || !r || !z)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "amg cycle: missing context, hierarchy or block");
    int32_t n = g->lv[0].A.rows, m = 0;
    if (r->device != SPMV_DEVICE_GPU || z->device != SPMV_DEVICE_GPU || r->n != n || z->n != n || r->k < 1 ||
        z->k != r->k || r->dtype != z->dtype || r->data == z->data)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "amg cycle: r and z must be distinct device blocks of %d "
                              "rows, the same columns, one dtype", n);
    for (int32_t j = 0; j < r->k; j++)
        m += !active || active[j];
    if (m == 0)
        return SPMV_OK;
    int st = kwork_ready(ctx, g, m, err);
    if (st)
        return st;
    if (m == r->k && r->dtype == g->dtype)
        return cycle_of(ctx, g, g->kw, m, NULL, r->data, z->data, err);
    size_t vs = spmv_dtype_size(g->dtype);
    for (int32_t j = 0, c = 0; j < r->k && !st; j++) /* the active columns, gathered (and converted) */
        if (!active || active[j])
            st = gpu_cast(ctx, column_of(r, j), r->dtype, (char *)g->kin + (size_t)c++ * n * vs, g->dtype, n, err);
    if (st || (st = cycle_of(ctx, g, g->kw, m, NULL, g->kin, g->kout, err)))
        return st;
    for (int32_t j = 0, c = 0; j < r->k && !st; j++) /* and scattered back */
        if (!active || active[j])
            st = gpu_cast(ctx, (char *)g->kout + (size_t)c++ * n * vs, g->dtype, column_of(z, j), z->dtype, n, err);
    return st;
}
