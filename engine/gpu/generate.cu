/* generate.cu — matrices built on the device by formula, past 2^31 non-zeros.
 *
 * A matrix of billions of non-zeros cannot come through the host: its text
 * or COO would not fit the host's memory, its staging on the device would
 * not fit beside it. spmv_gpu_matrix_generate_band builds a banded CSR where
 * it will live: row i holds the columns max(0, i-h) .. min(cols-1, i+h) with
 * the values spmv_band_value(i, j) (exact in float32), so that any y = A x
 * can be checked against the same formula computed another way (the tests
 * do it on the host, in float64, row by row). The row offsets are 64-bit
 * when the non-zeros pass INT32_MAX (or when asked, so small matrices can
 * test the 64-bit path against the 32-bit one); columns stay 32-bit.
 * Row lengths by formula, offsets by a CUB scan, entries one thread a row.
 */
#include <string.h>

#include <new>

#include <cub/cub.cuh>

#include "gpu.cuh"

__host__ __device__ static inline void band_cols(int64_t i, int64_t cols, int64_t h, int64_t *lo, int64_t *hi)
{
    *lo = i - h > 0 ? i - h : 0;
    *hi = i + h < cols - 1 ? i + h : cols - 1; /* empty when lo > hi */
}

template <typename O> __global__ void band_lengths(int64_t rows, int64_t cols, int64_t h, O *len)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i <= rows; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t lo, hi;
        band_cols(i, cols, h, &lo, &hi);
        len[i] = i < rows && hi >= lo ? (O)(hi - lo + 1) : (O)0;
    }
}

template <typename T, typename O>
__global__ void band_fill(int64_t rows, int64_t cols, int64_t h, const O *__restrict__ rp, int32_t *__restrict__ col,
                          T *__restrict__ val)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t lo, hi;
        band_cols(i, cols, h, &lo, &hi);
        O p = rp[i];
        for (int64_t j = lo; j <= hi; j++, p++) {
            col[p] = (int32_t)j;
            val[p] = (T)spmv_band_value(i, j);
        }
    }
}

/* Non-zeros of the band, exactly, in 64 bits. */
static int64_t band_nnz(int64_t rows, int64_t cols, int64_t h)
{
    int64_t n = 0;
    /* rows whose band is clipped at either end are few (2h): count them
     * one by one; the others hold 2h+1 each. */
    int64_t full_lo = h, full_hi = cols - 1 - h; /* rows whose band is whole */
    for (int64_t i = 0; i < rows; i++) {
        if (i >= full_lo && i <= full_hi) {
            int64_t last = full_hi < rows - 1 ? full_hi : rows - 1;
            n += (last - i + 1) * (2 * h + 1);
            i = last;
            continue;
        }
        int64_t lo, hi;
        band_cols(i, cols, h, &lo, &hi);
        n += hi >= lo ? hi - lo + 1 : 0;
    }
    return n;
}

template <typename T, typename O>
static int band_build(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, int64_t h, O *rp, spmv_error *err)
{
    int64_t n1 = (int64_t)m->rows + 1;
    O *len = NULL;
    void *tmp = NULL;
    size_t tmp_bytes = 0;
    int st;
    unsigned grid = (unsigned)(ctx->sm_count * 8);
    if ((st = gpu_alloc(ctx, m, (void **)&len, (size_t)n1 * sizeof(O), "band row lengths", err)))
        return st;
    band_lengths<O><<<grid, 256, 0, ctx->stream>>>(m->rows, m->cols, h, len);
    if ((st = gpu_check_launch(err, "band_lengths")))
        goto done;
    if (cub::DeviceScan::ExclusiveSum(NULL, tmp_bytes, len, rp, n1, ctx->stream) != cudaSuccess) {
        st = spmv_error_set(err, SPMV_ERR_DEVICE, 0, "band: sizing the offset scan failed");
        goto done;
    }
    if ((st = gpu_alloc(ctx, m, &tmp, tmp_bytes ? tmp_bytes : 16, "band offset scan", err)))
        goto done;
    if (cub::DeviceScan::ExclusiveSum(tmp, tmp_bytes, len, rp, n1, ctx->stream) != cudaSuccess) {
        st = spmv_error_set(err, SPMV_ERR_DEVICE, 0, "band: the offset scan failed");
        goto done;
    }
    band_fill<T, O><<<grid, 256, 0, ctx->stream>>>(m->rows, m->cols, h, rp, m->col, (T *)m->val);
    if (!(st = gpu_check_launch(err, "band_fill"))) {
        cudaError_t e = cudaStreamSynchronize(ctx->stream);
        if (e != cudaSuccess)
            st = gpu_cuda_error(e, err, "generating the band");
    }
done:
    gpu_release_each(ctx, m, {tmp, len});
    return st;
}

extern "C" int spmv_gpu_matrix_generate_band(spmv_gpu_ctx *ctx, const spmv_band_spec *spec,
                                             spmv_gpu_matrix **out, spmv_error *err)
{
    *out = NULL;
    if (!ctx || !spec)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "band: missing context or spec");
    if (spec->rows < 1 || spec->cols < 1 || spec->rows > INT32_MAX || spec->cols > INT32_MAX || spec->half_width < 0 ||
        spec->half_width > INT32_MAX / 2)
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0, "band: %lld x %lld with half-width %lld is out of range (rows and "
                              "columns 1..%d)", (long long)spec->rows, (long long)spec->cols,
                              (long long)spec->half_width, INT32_MAX);
    if (spec->dtype != SPMV_FLOAT64 && spec->dtype != SPMV_FLOAT32)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "band: unknown dtype %d", (int)spec->dtype);
    cudaError_t e = cudaSetDevice(ctx->device);
    if (e != cudaSuccess)
        return gpu_cuda_error(e, err, "cudaSetDevice");
    int64_t nnz = band_nnz(spec->rows, spec->cols, spec->half_width);
    bool wide = spec->wide || nnz > INT32_MAX;
    size_t vs = spmv_dtype_size(spec->dtype), ob = wide ? 8 : 4;
    spmv_gpu_matrix *m = new (std::nothrow) spmv_gpu_matrix();
    if (!m)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "band: out of host memory");
    m->rows = (int32_t)spec->rows;
    m->cols = (int32_t)spec->cols;
    m->nnz = nnz;
    m->dtype = spec->dtype;
    m->hack_size = SPMV_HACK_SIZE_DEFAULT;
    m->pinned = SPMV_FMT_CSR;
    m->max_row = (int32_t)(2 * spec->half_width + 1 < spec->cols ? 2 * spec->half_width + 1 : spec->cols);
    int st;
    {
        gpu_cat_scope scope(m, gpu_cat_of(SPMV_FMT_CSR));
        void *rp = NULL;
        if ((st = gpu_alloc(ctx, m, &rp, ((size_t)spec->rows + 1) * ob, "band row offsets", err)) ||
            (st = gpu_alloc(ctx, m, (void **)&m->col, (size_t)nnz * 4, "band columns", err)) ||
            (st = gpu_alloc(ctx, m, &m->val, (size_t)nnz * vs, "band values", err)))
            goto fail;
        if (wide)
            m->row_ptr64 = (int64_t *)rp;
        else
            m->row_ptr = (int32_t *)rp;
    }
    if (wide)
        st = spec->dtype == SPMV_FLOAT64 ? band_build<double, int64_t>(ctx, m, spec->half_width, m->row_ptr64, err)
                                         : band_build<float, int64_t>(ctx, m, spec->half_width, m->row_ptr64, err);
    else
        st = spec->dtype == SPMV_FLOAT64 ? band_build<double, int32_t>(ctx, m, spec->half_width, m->row_ptr, err)
                                         : band_build<float, int32_t>(ctx, m, spec->half_width, m->row_ptr, err);
    if (st || (st = gpu_ctx_adopt(ctx, m, err)))
        goto fail;
    m->formats = SPMV_FMT_CSR;
    *out = m;
    return SPMV_OK;
fail:
    gpu_matrix_destroy(ctx, m);
    return st;
}
