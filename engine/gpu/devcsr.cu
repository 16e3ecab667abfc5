/* devcsr.cu — device arrays and CSR operators that solver objects own:
 * the AMG hierarchy (amg.cu), the chebyshev and ic0/ilu0 preconditioners
 * (precond.cu).
 *
 * Unlike a resident matrix (gpu.cuh's spmv_gpu_matrix) such an operator
 * has one format, no eviction and no kernel choice: a CSR with a cuSPARSE
 * descriptor for SpMV (or SpSV), in float64 or float32. Its owner counts
 * its bytes (the `count` every allocation adds to) and frees it with
 * gpu_dcsr_free on the context's thread. Host data comes in float64 (the
 * setups run in float64) and is converted on the host when the object is
 * held in float32.
 */
#include <stdlib.h>

#include "gpu.cuh"

int gpu_alloc_counted(spmv_gpu_ctx *ctx, void **p, size_t bytes, size_t *count, const char *what, spmv_error *err)
{
    int st = gpu_ctx_alloc(ctx, p, gpu_nz(bytes), what, err);
    if (st == SPMV_OK)
        *count += gpu_nz(bytes);
    return st;
}

int gpu_put_values(spmv_gpu_ctx *ctx, void *dst, const double *src, int64_t n, spmv_dtype dtype, spmv_error *err)
{
    cudaError_t e;
    if (dtype == SPMV_FLOAT64) {
        e = cudaMemcpyAsync(dst, src, (size_t)n * 8, cudaMemcpyHostToDevice, ctx->stream);
        return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, "copying values to the device");
    }
    float *f = (float *)malloc(gpu_nz((size_t)n * 4));
    if (!f)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory converting %lld values to float32", (long long)n);
    for (int64_t i = 0; i < n; i++)
        f[i] = (float)src[i];
    e = cudaMemcpyAsync(dst, f, (size_t)n * 4, cudaMemcpyHostToDevice, ctx->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(ctx->stream); /* f is freed next */
    free(f);
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, "copying values to the device");
}

template <typename S, typename T> __global__ void cast_kernel(int64_t n, const S *__restrict__ in, T *__restrict__ out)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = (T)in[i];
}

int gpu_cast(spmv_gpu_ctx *ctx, const void *in, spmv_dtype from, void *out, spmv_dtype to, int64_t n,
             spmv_error *err)
{
    if (from == to) {
        cudaError_t e =
            cudaMemcpyAsync(out, in, (size_t)n * spmv_dtype_size(to), cudaMemcpyDeviceToDevice, ctx->stream);
        return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, "copying a vector");
    }
    if (from == SPMV_FLOAT32)
        cast_kernel<float, double><<<FILL_GRID(n), 0, ctx->stream>>>(n, (const float *)in, (double *)out);
    else
        cast_kernel<double, float><<<FILL_GRID(n), 0, ctx->stream>>>(n, (const double *)in, (float *)out);
    return gpu_check_launch(err, "cast_kernel");
}

static cudaDataType cuda_type(spmv_dtype dt) { return dt == SPMV_FLOAT32 ? CUDA_R_32F : CUDA_R_64F; }

int gpu_dcsr_copy(spmv_gpu_ctx *ctx, const spmv_csr *h, spmv_dtype dtype, gpu_dcsr *d, size_t *count,
                  spmv_error *err)
{
    d->rows = h->rows;
    d->cols = h->cols;
    d->nnz = h->nnz;
    d->dtype = dtype;
    int st;
    cudaError_t e;
    size_t rp = ((size_t)h->rows + 1) * 4, cb = (size_t)h->nnz * 4;
    if ((st = gpu_alloc_counted(ctx, (void **)&d->row_ptr, rp, count, "operator row_ptr", err)) ||
        (st = gpu_alloc_counted(ctx, (void **)&d->col, cb, count, "operator col", err)) ||
        (st = gpu_alloc_counted(ctx, &d->val, (size_t)h->nnz * spmv_dtype_size(dtype), count, "operator val", err)))
        return st;
    if ((e = cudaMemcpyAsync(d->row_ptr, h->row_ptr, rp, cudaMemcpyHostToDevice, ctx->stream)) ||
        (e = cudaMemcpyAsync(d->col, h->col, cb, cudaMemcpyHostToDevice, ctx->stream)))
        return gpu_cuda_error(e, err, "copying an operator");
    if ((st = gpu_put_values(ctx, d->val, (const double *)h->val, h->nnz, dtype, err)))
        return st;
    cusparseStatus_t s = cusparseCreateCsr(&d->descr, h->rows, h->cols, h->nnz, d->row_ptr, d->col, d->val,
                                           CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                                           cuda_type(dtype));
    return s == CUSPARSE_STATUS_SUCCESS ? SPMV_OK : gpu_sparse_error(s, err, "cusparseCreateCsr");
}

int gpu_dcsr_mv(spmv_gpu_ctx *ctx, gpu_dcsr *m, double alpha, const void *x, double beta, void *y, size_t *count,
                spmv_error *err)
{
    cudaDataType t = cuda_type(m->dtype);
    float af = (float)alpha, bf = (float)beta;
    const void *pa = m->dtype == SPMV_FLOAT32 ? (const void *)&af : (const void *)&alpha;
    const void *pb = m->dtype == SPMV_FLOAT32 ? (const void *)&bf : (const void *)&beta;
    cusparseDnVecDescr_t vx, vy;
    cusparseStatus_t s;
    int st = SPMV_OK;
    if ((s = cusparseCreateDnVec(&vx, m->cols, (void *)x, t)) != CUSPARSE_STATUS_SUCCESS)
        return gpu_sparse_error(s, err, "cusparseCreateDnVec");
    if ((s = cusparseCreateDnVec(&vy, m->rows, y, t)) != CUSPARSE_STATUS_SUCCESS) {
        cusparseDestroyDnVec(vx);
        return gpu_sparse_error(s, err, "cusparseCreateDnVec");
    }
    if (!m->buf) {
        size_t bytes = 0;
        if ((s = cusparseSpMV_bufferSize(ctx->sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, pa, m->descr, vx, pb, vy, t,
                                         CUSPARSE_SPMV_CSR_ALG1, &bytes)) != CUSPARSE_STATUS_SUCCESS)
            st = gpu_sparse_error(s, err, "cusparseSpMV_bufferSize");
        else if (!(st = gpu_alloc_counted(ctx, &m->buf, bytes, count, "operator SpMV buffer", err))) {
            m->buf_bytes = gpu_nz(bytes);
            /* the row partition kept with the buffer, not recomputed by every SpMV (a V-cycle's 14
             * SpMVs spent 5 % of it there: docs/benchmarks/solve.md, "Where a V-cycle's time goes");
             * it depends on the pattern only. An optimisation: where it fails, SpMV partitions itself */
            if (cusparseSpMV_preprocess(ctx->sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, pa, m->descr, vx, pb, vy, t,
                                        CUSPARSE_SPMV_CSR_ALG1, m->buf) != CUSPARSE_STATUS_SUCCESS)
                cudaGetLastError();
        }
    }
    if (!st && (s = cusparseSpMV(ctx->sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, pa, m->descr, vx, pb, vy, t,
                                 CUSPARSE_SPMV_CSR_ALG1, m->buf)) != CUSPARSE_STATUS_SUCCESS)
        st = gpu_sparse_error(s, err, "cusparseSpMV");
    cusparseDestroyDnVec(vx);
    cusparseDestroyDnVec(vy);
    return st;
}

/* The SpMM's descriptors of x and y, its buffer (grown), the product. */
static int dcsr_spmm(spmv_gpu_ctx *ctx, gpu_dcsr *m, int32_t k, const void *pa, const void *x, const void *pb,
                     void *y, size_t *count, spmv_error *err)
{
    cudaDataType t = cuda_type(m->dtype);
    cusparseDnMatDescr_t mx = NULL, my = NULL;
    cusparseStatus_t s;
    int st = SPMV_OK;
    size_t bytes = 0;
    if ((s = cusparseCreateDnMat(&mx, m->cols, k, m->cols, (void *)x, t, CUSPARSE_ORDER_COL)) ||
        (s = cusparseCreateDnMat(&my, m->rows, k, m->rows, y, t, CUSPARSE_ORDER_COL)))
        st = gpu_sparse_error(s, err, "cusparseCreateDnMat");
    else if ((s = cusparseSpMM_bufferSize(ctx->sparse, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                          CUSPARSE_OPERATION_NON_TRANSPOSE, pa, m->descr, mx, pb, my, t,
                                          CUSPARSE_SPMM_CSR_ALG1, &bytes)))
        st = gpu_sparse_error(s, err, "cusparseSpMM_bufferSize");
    if (!st && (!m->mm_buf || gpu_nz(bytes) > m->mm_buf_bytes)) {
        gpu_ctx_free(ctx, m->mm_buf, m->mm_buf_bytes);
        *count -= m->mm_buf ? m->mm_buf_bytes : 0;
        m->mm_buf = NULL;
        m->mm_buf_bytes = 0;
        if (!(st = gpu_alloc_counted(ctx, &m->mm_buf, bytes, count, "operator SpMM buffer", err)))
            m->mm_buf_bytes = gpu_nz(bytes);
    }
    if (!st && (s = cusparseSpMM(ctx->sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, pa,
                                 m->descr, mx, pb, my, t, CUSPARSE_SPMM_CSR_ALG1, m->mm_buf)) != CUSPARSE_STATUS_SUCCESS)
        st = gpu_sparse_error(s, err, "cusparseSpMM");
    if (mx)
        cusparseDestroyDnMat(mx);
    if (my)
        cusparseDestroyDnMat(my);
    return st;
}

int gpu_dcsr_mm(spmv_gpu_ctx *ctx, gpu_dcsr *m, int32_t k, double alpha, const void *x, double beta, void *y,
                size_t *count, spmv_error *err)
{
    if (k == 1)
        return gpu_dcsr_mv(ctx, m, alpha, x, beta, y, count, err);
    float af = (float)alpha, bf = (float)beta;
    const void *pa = m->dtype == SPMV_FLOAT32 ? (const void *)&af : (const void *)&alpha;
    const void *pb = m->dtype == SPMV_FLOAT32 ? (const void *)&bf : (const void *)&beta;
    return dcsr_spmm(ctx, m, k, pa, x, pb, y, count, err);
}

void gpu_dcsr_free(spmv_gpu_ctx *ctx, gpu_dcsr *m)
{
    if (m->descr)
        cusparseDestroySpMat(m->descr);
    gpu_ctx_free(ctx, m->row_ptr, gpu_nz(((size_t)m->rows + 1) * 4));
    gpu_ctx_free(ctx, m->col, gpu_nz((size_t)m->nnz * 4));
    gpu_ctx_free(ctx, m->val, gpu_nz((size_t)m->nnz * spmv_dtype_size(m->dtype)));
    gpu_ctx_free(ctx, m->buf, m->buf_bytes);
    gpu_ctx_free(ctx, m->mm_buf, m->mm_buf_bytes);
    *m = gpu_dcsr();
}
