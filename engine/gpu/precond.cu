/* precond.cu — the GPU halves of block_jacobi, ic0 and ilu0
 * (engine/precond_block.c, engine/precond_ilu.c; chebyshev and amg run on
 * amg.cu).
 *
 * block_jacobi: one thread a row, the row's coefficients of its block's
 * inverse (float64, copied once at setup) dotted with the block's part of
 * r, in float64 whatever the vectors' dtype.
 *
 * ic0 and ilu0: the host hands over A's pattern in float64 (its lower
 * triangle for ic0), copied as a device operator (devcsr.cu) in float64 or
 * float32 and factored in place by cuSPARSE's csric02 / csrilu02; a zero
 * pivot (cusparseX*02_zeroPivot), or one the factorisation left non-finite
 * (the square root of a negative ic0 pivot), is refused naming its row. An
 * apply is two cusparseSpSV solves, analysed once at setup: L then L^T (the
 * same descriptor, transposed) for ic0, unit L then U (two descriptors over
 * the factors' arrays) for ilu0. The solves always read and write the
 * object's own three vectors (r converted or copied in, z out): the SpSV
 * analysis is made with those descriptors, and the conversion is needed
 * anyway when the factors are float32 under float64 vectors.
 */
#include <limits.h>

#include <new>

#include "gpu.cuh"
#include "precond_impl.h"

/* ------------------------------------------------------- block_jacobi */

template <typename T>
__global__ void block_jacobi_kernel(int64_t n, int32_t b, const double *__restrict__ inv, const T *__restrict__ r,
                                    T *__restrict__ z)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const double *row = inv + i * b;
    int64_t s = i - i % b;
    double v = 0;
    for (int32_t c = 0; c < b; c++)
        v += row[c] * (double)r[s + c];
    z[i] = (T)v;
}

extern "C" int spmv_gpu_block_jacobi_apply(spmv_gpu_ctx *ctx, const spmv_vec *inv, int32_t b, const spmv_vec *r,
                                           spmv_vec *z, spmv_error *err)
{
    int64_t n = r->n;
    const double *iv = (const double *)inv->data;
    if (r->dtype == SPMV_FLOAT32)
        block_jacobi_kernel<float><<<FILL_GRID(n), 0, ctx->stream>>>(n, b, iv, (const float *)r->data,
                                                                     (float *)z->data);
    else
        block_jacobi_kernel<double><<<FILL_GRID(n), 0, ctx->stream>>>(n, b, iv, (const double *)r->data,
                                                                      (double *)z->data);
    return gpu_check_launch(err, "block_jacobi_kernel");
}

/* The same on k columns at once: column c0 + blockIdx.y of n x k blocks,
 * skipped when its bit of `on` (the chunk's mask) is clear. */
template <typename T>
__global__ void block_jacobi_kernel_k(int64_t n, int32_t b, const double *__restrict__ inv, const T *__restrict__ r,
                                      T *__restrict__ z, uint64_t on)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || !((on >> blockIdx.y) & 1))
        return;
    size_t o = (size_t)blockIdx.y * (size_t)n;
    const double *row = inv + i * b;
    int64_t s = i - i % b;
    double v = 0;
    for (int32_t c = 0; c < b; c++)
        v += row[c] * (double)r[o + s + c];
    z[o + i] = (T)v;
}

extern "C" int spmv_gpu_block_jacobi_apply_k(spmv_gpu_ctx *ctx, const spmv_vec *inv, int32_t b, const spmv_vec *r,
                                             spmv_vec *z, const bool *active, spmv_error *err)
{
    int64_t n = r->n;
    const double *iv = (const double *)inv->data;
    size_t vs = spmv_dtype_size(r->dtype);
    for (int32_t c0 = 0; c0 < r->k; c0 += 64) { /* 64 columns a launch: the mask's bits */
        int32_t kc = r->k - c0 < 64 ? r->k - c0 : 64;
        uint64_t on = 0;
        for (int32_t c = 0; c < kc; c++)
            on |= (uint64_t)(!active || active[c0 + c]) << c;
        if (!on)
            continue;
        const char *rc = (const char *)r->data + (size_t)c0 * (size_t)n * vs;
        char *zc = (char *)z->data + (size_t)c0 * (size_t)n * vs;
        dim3 grid(gpu_grid(n, FILL_BLOCK), (unsigned)kc);
        if (r->dtype == SPMV_FLOAT32)
            block_jacobi_kernel_k<float><<<grid, FILL_BLOCK, 0, ctx->stream>>>(n, b, iv, (const float *)rc,
                                                                             (float *)zc, on);
        else
            block_jacobi_kernel_k<double><<<grid, FILL_BLOCK, 0, ctx->stream>>>(n, b, iv, (const double *)rc,
                                                                              (double *)zc, on);
        int st = gpu_check_launch(err, "block_jacobi_kernel_k");
        if (st)
            return st;
    }
    return SPMV_OK;
}

/* ---------------------------------------------------------- ic0, ilu0 */

struct spmv_gpu_ilu {
    bool lower;                      /* ic0: f is L; ilu0: f is L\U */
    spmv_dtype dtype;                /* of the factors and the three vectors */
    gpu_dcsr f;                      /* f.descr: the lower factor, for the solves */
    cusparseSpMatDescr_t upper;      /* ilu0: U over f's arrays */
    cusparseSpSVDescr_t sv[2];       /* the two solves */
    void *buf[2];
    size_t buf_bytes[2];
    void *in, *mid, *out;            /* rows values each */
    cusparseDnVecDescr_t vin, vmid, vout;
    size_t bytes;
};

static const char *ilu_name(const spmv_gpu_ilu *g) { return g->lower ? "ic0" : "ilu0"; }
static cudaDataType ilu_type(const spmv_gpu_ilu *g) { return g->dtype == SPMV_FLOAT32 ? CUDA_R_32F : CUDA_R_64F; }

/* cuSPARSE 12 deprecated csric02 and csrilu02 (and their info and policy
 * types) with no generic-API replacement for an incomplete factorisation;
 * CUDA 13 still ships them, and they are what issue 29 asks for. The
 * deprecation warnings are silenced here only, from the calls' wrappers to
 * the end of the factorisation, so the build warns on nothing: the host
 * compiler's -Wdeprecated-declarations (what CUDA 13 reports), and nvcc's
 * own diagnostic 1444 (its front end's word for the same, in versions that
 * report it). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#pragma nv_diag_suppress 1444

/* The legacy calls of each precision (P: cuSPARSE's D or S), picked by
 * the factors' dtype. */
#define LEGACY_CALLS(T, P)                                                     \
    template <> struct legacy<T> {                                             \
        static constexpr auto ic_size = cusparse##P##csric02_bufferSize;       \
        static constexpr auto ic_analysis = cusparse##P##csric02_analysis;     \
        static constexpr auto ic = cusparse##P##csric02;                       \
        static constexpr auto ilu_size = cusparse##P##csrilu02_bufferSize;     \
        static constexpr auto ilu_analysis = cusparse##P##csrilu02_analysis;   \
        static constexpr auto ilu = cusparse##P##csrilu02;                     \
    };
template <typename T> struct legacy;
LEGACY_CALLS(double, D)
LEGACY_CALLS(float, S)
#undef LEGACY_CALLS

/* One factorisation of g->f in place with one family's calls (Info its
 * info type): buffer, analysis, factorisation, each checked for a zero
 * pivot. */
template <typename T, typename Info, typename Size, typename Analysis, typename Factor, typename Zero>
static int factor_with(spmv_gpu_ctx *ctx, spmv_gpu_ilu *g, Info info, Size size, Analysis analysis, Factor factor,
                       Zero zero, spmv_error *err)
{
    gpu_dcsr *f = &g->f;
    int n = f->rows, nnz = (int)f->nnz, bytes = 0, pos = -1, st = SPMV_OK;
    T *val = (T *)f->val;
    void *buf = NULL;
    cusparseMatDescr_t md = NULL; /* general, base zero: what csric02 and csrilu02 take */
    const cusparseSolvePolicy_t policy = CUSPARSE_SOLVE_POLICY_USE_LEVEL;
    cusparseStatus_t s = cusparseCreateMatDescr(&md);
    if (s == CUSPARSE_STATUS_SUCCESS)
        s = size(ctx->sparse, n, nnz, md, val, f->row_ptr, f->col, info, &bytes);
    if (s != CUSPARSE_STATUS_SUCCESS)
        st = gpu_sparse_error(s, err, ilu_name(g));
    else if (!(st = gpu_ctx_alloc(ctx, &buf, gpu_nz((size_t)bytes), "factorisation buffer", err)) &&
             (s = analysis(ctx->sparse, n, nnz, md, val, f->row_ptr, f->col, info, policy, buf)) !=
                 CUSPARSE_STATUS_SUCCESS)
        st = gpu_sparse_error(s, err, ilu_name(g));
    if (!st && zero(ctx->sparse, info, &pos) == CUSPARSE_STATUS_ZERO_PIVOT)
        st = spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s: row %d has no diagonal entry", ilu_name(g), pos);
    if (!st && (s = factor(ctx->sparse, n, nnz, md, val, f->row_ptr, f->col, info, policy, buf)) !=
                   CUSPARSE_STATUS_SUCCESS)
        st = gpu_sparse_error(s, err, ilu_name(g));
    if (!st && zero(ctx->sparse, info, &pos) == CUSPARSE_STATUS_ZERO_PIVOT)
        st = spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s: zero pivot at row %d (cuSPARSE): A has no incomplete "
                            "factorisation without pivoting", ilu_name(g), pos);
    gpu_ctx_free(ctx, buf, gpu_nz((size_t)bytes));
    if (md)
        cusparseDestroyMatDescr(md);
    return st;
}

template <typename T> static int factor_as(spmv_gpu_ctx *ctx, spmv_gpu_ilu *g, spmv_error *err)
{
    int st;
    if (g->lower) {
        csric02Info_t info = NULL;
        if (cusparseCreateCsric02Info(&info) != CUSPARSE_STATUS_SUCCESS)
            return spmv_error_set(err, SPMV_ERR_DEVICE, 0, "ic0: cusparseCreateCsric02Info failed");
        st = factor_with<T>(ctx, g, info, legacy<T>::ic_size, legacy<T>::ic_analysis, legacy<T>::ic,
                            cusparseXcsric02_zeroPivot, err);
        cusparseDestroyCsric02Info(info);
        return st;
    }
    csrilu02Info_t info = NULL;
    if (cusparseCreateCsrilu02Info(&info) != CUSPARSE_STATUS_SUCCESS)
        return spmv_error_set(err, SPMV_ERR_DEVICE, 0, "ilu0: cusparseCreateCsrilu02Info failed");
    st = factor_with<T>(ctx, g, info, legacy<T>::ilu_size, legacy<T>::ilu_analysis, legacy<T>::ilu,
                        cusparseXcsrilu02_zeroPivot, err);
    cusparseDestroyCsrilu02Info(info);
    return st;
}

#pragma nv_diag_default 1444
#pragma GCC diagnostic pop

/* *first = the first row whose pivot (the factors' diagonal) is zero or
 * not finite. */
template <typename T>
__global__ void bad_pivot_kernel(int32_t n, const int32_t *__restrict__ row_ptr, const int32_t *__restrict__ col,
                                 const T *__restrict__ val, int *first)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    for (int32_t p = row_ptr[i]; p < row_ptr[i + 1]; p++)
        if (col[p] == i) {
            double d = (double)val[p];
            if (d == 0.0 || !isfinite(d))
                atomicMin(first, i);
            return;
        }
}

/* After the factorisation: a pivot cuSPARSE left non-finite (ic0's square
 * root of a negative number) is refused as the host refuses it. */
static int check_pivots(spmv_gpu_ctx *ctx, spmv_gpu_ilu *g, spmv_error *err)
{
    int *first = NULL, h = INT_MAX, st = gpu_scratch(ctx, sizeof(int), (void **)&first, err);
    cudaError_t e;
    if (st)
        return st;
    if ((e = cudaMemcpyAsync(first, &h, sizeof h, cudaMemcpyHostToDevice, ctx->stream)) != cudaSuccess)
        return gpu_cuda_error(e, err, "checking the pivots");
    const gpu_dcsr *f = &g->f;
    if (g->dtype == SPMV_FLOAT32)
        bad_pivot_kernel<float><<<FILL_GRID(f->rows), 0, ctx->stream>>>(f->rows, f->row_ptr, f->col,
                                                                        (const float *)f->val, first);
    else
        bad_pivot_kernel<double><<<FILL_GRID(f->rows), 0, ctx->stream>>>(f->rows, f->row_ptr, f->col,
                                                                         (const double *)f->val, first);
    if ((st = gpu_check_launch(err, "bad_pivot_kernel")) ||
        (st = gpu_copy_to_host(ctx, &h, first, sizeof h, "checking the pivots", err)))
        return st;
    if (h != INT_MAX)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s: zero or negative pivot at row %d: A is not %s",
                              ilu_name(g), h, g->lower ? "positive definite enough for an incomplete Cholesky "
                              "factorisation" : "factorable without pivoting");
    return SPMV_OK;
}

/* Solve k (0: the lower factor, 1: L^T or U): x -> y, analysed now. */
static int solve_prepare(spmv_gpu_ctx *ctx, spmv_gpu_ilu *g, int k, spmv_error *err)
{
    double one = 1.0;
    float onef = 1.0f;
    const void *alpha = g->dtype == SPMV_FLOAT32 ? (const void *)&onef : (const void *)&one;
    cusparseSpMatDescr_t m = k == 0 || g->lower ? g->f.descr : g->upper;
    cusparseOperation_t op = k == 1 && g->lower ? CUSPARSE_OPERATION_TRANSPOSE : CUSPARSE_OPERATION_NON_TRANSPOSE;
    cusparseDnVecDescr_t x = k ? g->vmid : g->vin, y = k ? g->vout : g->vmid;
    size_t bytes = 0;
    int st;
    cusparseStatus_t s = cusparseSpSV_createDescr(&g->sv[k]);
    if (s == CUSPARSE_STATUS_SUCCESS)
        s = cusparseSpSV_bufferSize(ctx->sparse, op, alpha, m, x, y, ilu_type(g), CUSPARSE_SPSV_ALG_DEFAULT, g->sv[k],
                                    &bytes);
    if (s != CUSPARSE_STATUS_SUCCESS)
        return gpu_sparse_error(s, err, "cusparseSpSV_bufferSize");
    if ((st = gpu_alloc_counted(ctx, &g->buf[k], bytes, &g->bytes, "SpSV buffer", err)))
        return st;
    g->buf_bytes[k] = gpu_nz(bytes);
    s = cusparseSpSV_analysis(ctx->sparse, op, alpha, m, x, y, ilu_type(g), CUSPARSE_SPSV_ALG_DEFAULT, g->sv[k],
                              g->buf[k]);
    return s == CUSPARSE_STATUS_SUCCESS ? SPMV_OK : gpu_sparse_error(s, err, "cusparseSpSV_analysis");
}

static int set_triangle(cusparseSpMatDescr_t m, cusparseFillMode_t fill, cusparseDiagType_t diag, spmv_error *err)
{
    cusparseStatus_t s = cusparseSpMatSetAttribute(m, CUSPARSE_SPMAT_FILL_MODE, &fill, sizeof fill);
    if (s == CUSPARSE_STATUS_SUCCESS)
        s = cusparseSpMatSetAttribute(m, CUSPARSE_SPMAT_DIAG_TYPE, &diag, sizeof diag);
    return s == CUSPARSE_STATUS_SUCCESS ? SPMV_OK : gpu_sparse_error(s, err, "cusparseSpMatSetAttribute");
}

/* The three vectors, the triangles' descriptors and both analyses. */
static int solves_prepare(spmv_gpu_ctx *ctx, spmv_gpu_ilu *g, spmv_error *err)
{
    const gpu_dcsr *f = &g->f;
    size_t vb = (size_t)f->rows * spmv_dtype_size(g->dtype);
    int st;
    cusparseStatus_t s = CUSPARSE_STATUS_SUCCESS;
    if ((st = gpu_alloc_counted(ctx, &g->in, vb, &g->bytes, "factor solve vectors", err)) ||
        (st = gpu_alloc_counted(ctx, &g->mid, vb, &g->bytes, "factor solve vectors", err)) ||
        (st = gpu_alloc_counted(ctx, &g->out, vb, &g->bytes, "factor solve vectors", err)))
        return st;
    if ((s = cusparseCreateDnVec(&g->vin, f->rows, g->in, ilu_type(g))) ||
        (s = cusparseCreateDnVec(&g->vmid, f->rows, g->mid, ilu_type(g))) ||
        (s = cusparseCreateDnVec(&g->vout, f->rows, g->out, ilu_type(g))) ||
        (!g->lower && (s = cusparseCreateCsr(&g->upper, f->rows, f->cols, f->nnz, f->row_ptr, f->col, f->val,
                                             CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                                             ilu_type(g)))))
        return gpu_sparse_error(s, err, "the factors' descriptors");
    if ((st = set_triangle(g->f.descr, CUSPARSE_FILL_MODE_LOWER,
                           g->lower ? CUSPARSE_DIAG_TYPE_NON_UNIT : CUSPARSE_DIAG_TYPE_UNIT, err)) ||
        (!g->lower && (st = set_triangle(g->upper, CUSPARSE_FILL_MODE_UPPER, CUSPARSE_DIAG_TYPE_NON_UNIT, err))))
        return st;
    if ((st = solve_prepare(ctx, g, 0, err)) || (st = solve_prepare(ctx, g, 1, err)))
        return st;
    return gpu_sync_stream(ctx, err, "analysing the triangular solves");
}

extern "C" void spmv_gpu_ilu_free(spmv_gpu_ctx *ctx, spmv_gpu_ilu *g)
{
    if (!g)
        return;
    cudaStreamSynchronize(ctx->stream);
    size_t vb = gpu_nz((size_t)g->f.rows * spmv_dtype_size(g->dtype));
    for (int k = 0; k < 2; k++) {
        if (g->sv[k])
            cusparseSpSV_destroyDescr(g->sv[k]);
        gpu_ctx_free(ctx, g->buf[k], g->buf_bytes[k]);
    }
    for (cusparseDnVecDescr_t v : {g->vin, g->vmid, g->vout})
        if (v)
            cusparseDestroyDnVec(v);
    if (g->upper)
        cusparseDestroySpMat(g->upper);
    for (void *v : {g->in, g->mid, g->out})
        gpu_ctx_free(ctx, v, vb);
    gpu_dcsr_free(ctx, &g->f);
    delete g;
}

extern "C" int spmv_gpu_ilu_setup(spmv_gpu_ctx *ctx, const spmv_csr *f, bool lower, spmv_dtype dtype,
                                  spmv_gpu_ilu **out, spmv_error *err)
{
    *out = NULL;
    if (!ctx || !f)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s setup: missing context or matrix", lower ? "ic0" : "ilu0");
    spmv_gpu_ilu *g = new (std::nothrow) spmv_gpu_ilu();
    if (!g)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "%s setup: out of host memory", lower ? "ic0" : "ilu0");
    g->lower = lower;
    g->dtype = dtype;
    int st = cudaSetDevice(ctx->device) == cudaSuccess ? SPMV_OK
                                                       : spmv_error_set(err, SPMV_ERR_DEVICE, 0, "cudaSetDevice");
    if (!st && !(st = gpu_dcsr_copy(ctx, f, dtype, &g->f, &g->bytes, err)) &&
        !(st = dtype == SPMV_FLOAT32 ? factor_as<float>(ctx, g, err) : factor_as<double>(ctx, g, err)) &&
        !(st = check_pivots(ctx, g, err)))
        st = solves_prepare(ctx, g, err);
    if (st) {
        spmv_gpu_ilu_free(ctx, g);
        return st;
    }
    *out = g;
    return SPMV_OK;
}

extern "C" size_t spmv_gpu_ilu_bytes(const spmv_gpu_ilu *g) { return g ? g->bytes : 0; }

extern "C" int spmv_gpu_ilu_apply(spmv_gpu_ctx *ctx, spmv_gpu_ilu *g, const spmv_vec *r, spmv_vec *z,
                                  spmv_error *err)
{
    double one = 1.0;
    float onef = 1.0f;
    const void *alpha = g->dtype == SPMV_FLOAT32 ? (const void *)&onef : (const void *)&one;
    int32_t n = g->f.rows;
    int st = gpu_cast(ctx, r->data, r->dtype, g->in, g->dtype, n, err);
    for (int k = 0; k < 2 && !st; k++) {
        cusparseSpMatDescr_t m = k == 0 || g->lower ? g->f.descr : g->upper;
        cusparseOperation_t op = k == 1 && g->lower ? CUSPARSE_OPERATION_TRANSPOSE : CUSPARSE_OPERATION_NON_TRANSPOSE;
        cusparseStatus_t s = cusparseSpSV_solve(ctx->sparse, op, alpha, m, k ? g->vmid : g->vin,
                                                k ? g->vout : g->vmid, ilu_type(g), CUSPARSE_SPSV_ALG_DEFAULT, g->sv[k]);
        if (s != CUSPARSE_STATUS_SUCCESS)
            st = gpu_sparse_error(s, err, "cusparseSpSV_solve");
    }
    return st ? st : gpu_cast(ctx, g->out, g->dtype, z->data, z->dtype, n, err);
}
