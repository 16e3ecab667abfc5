/* spmm.cu — products of A with k columns of x at once (SpMM).
 *
 * gpu.csr.spmm, ours: a group of g lanes per row (g from the mean row
 * length, 2..32, as gpu.csr.vector picks it), each lane walking the row's
 * non-zeros and keeping a register tile of up to 8 columns of y (16 when k
 * is above 8); the tile's sums are reduced over the group with shuffles.
 * For k <= 16 the row is read once for all k columns (one pass over A);
 * beyond, once per tile of 16, the repeats hitting cache where A fits it. x and y are column-major with leading
 * dimensions cols and rows, as the API ships blocks; for dynamic batching
 * (batch.cu, l->xrow) x is row-major instead, so the k values one entry
 * gathers lie side by side in one or two cache lines rather than in k.
 *
 * cusparse.csr with k > 1 is cuSPARSE's SpMM (its default CSR algorithm),
 * on column-major dense matrices, or row-major X and Y (CUSPARSE_ORDER_ROW)
 * for batch.cu; the descriptors and the work buffer are made per call in
 * gpu_cusparse_spmm_prepare, before the timed runs.
 */
#include <string.h>

#include "gpu.cuh"

/* XROW: x row-major (entry c's columns at x[c*k ..]); y column-major either
 * way. TILE: the columns one pass over a row carries (8 for k <= 8, else 16:
 * a batch of up to 16 reads A once). */
template <typename T, bool XROW, int TILE>
__global__ void csr_spmm_kernel(int32_t rows, int32_t cols, const int32_t *__restrict__ rp,
                                const int32_t *__restrict__ ci, const T *__restrict__ v, int32_t k, int32_t g,
                                const T *__restrict__ x, T *__restrict__ y)
{
    int64_t tid = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int64_t row = tid / g;
    int lane = (int)(tid % g);
    bool active = row < rows; /* inactive lanes still take part in the shuffles */
    int32_t b = active ? rp[row] : 0, e = active ? rp[row + 1] : 0;
    for (int32_t c0 = 0; c0 < k; c0 += TILE) {
        int32_t kc = k - c0 < TILE ? k - c0 : TILE;
        T acc[TILE];
#pragma unroll
        for (int j = 0; j < TILE; j++)
            acc[j] = 0;
        for (int32_t p = b + lane; p < e; p += g) {
            T a = v[p];
            const T *xc = XROW ? x + (int64_t)ci[p] * k + c0 : x + (int64_t)c0 * cols + ci[p];
            int64_t step = XROW ? 1 : cols;
#pragma unroll
            for (int j = 0; j < TILE; j++)
                if (j < kc)
                    acc[j] += a * __ldg(xc + (int64_t)j * step);
        }
#pragma unroll
        for (int j = 0; j < TILE; j++) {
            T s = gpu_group_sum(acc[j], g);
            if (active && lane == 0 && j < kc)
                y[(int64_t)(c0 + j) * rows + row] = s;
        }
    }
}

/* Lanes per row: the mean row length rounded up to a power of two, 2..32. */
static int32_t lanes_for(const spmv_gpu_matrix *m)
{
    double mean = m->rows ? (double)m->nnz / m->rows : 0;
    int32_t g = 2;
    while (g < 32 && g < mean)
        g *= 2;
    return g;
}

template <typename T, int TILE> static void launch_tile(struct gpu_launch *l, int32_t g)
{
    spmv_gpu_matrix *m = l->m;
    dim3 grid = gpu_grid((int64_t)m->rows * g, l->block);
    if (l->xrow)
        csr_spmm_kernel<T, true, TILE><<<grid, l->block, 0, l->ctx->stream>>>(
            m->rows, m->cols, m->row_ptr, m->col, (const T *)m->val, l->ncols, g, (const T *)l->x, (T *)l->y);
    else
        csr_spmm_kernel<T, false, TILE><<<grid, l->block, 0, l->ctx->stream>>>(
            m->rows, m->cols, m->row_ptr, m->col, (const T *)m->val, l->ncols, g, (const T *)l->x, (T *)l->y);
}

template <typename T> static void launch_spmm(struct gpu_launch *l)
{
    int32_t g = l->p.v[SPMV_PARAM_THREADS] ? l->p.v[SPMV_PARAM_THREADS] : lanes_for(l->m);
    if (l->ncols <= 8)
        launch_tile<T, 8>(l, g);
    else
        launch_tile<T, 16>(l, g);
}

int gpu_csr_spmm(struct gpu_launch *l, spmv_error *err)
{
    if (l->m->rows == 0)
        return SPMV_OK;
    if (l->m->dtype == SPMV_FLOAT64)
        launch_spmm<double>(l);
    else
        launch_spmm<float>(l);
    return gpu_check_launch(err, "gpu.csr.spmm");
}

/* ------------------------------------------------------ cuSPARSE SpMM */

struct gpu_spmm {
    cusparseSpMatDescr_t a;
    cusparseDnMatDescr_t x, y;
    void *buf;
    size_t buf_bytes;
    bool borrowed;   /* buf is the context's kept scratch (batch.cu's calls): not freed here */
};

static cudaDataType value_type(const spmv_gpu_matrix *m) { return m->dtype == SPMV_FLOAT64 ? CUDA_R_64F : CUDA_R_32F; }

static const double d_one = 1.0, d_zero = 0.0;
static const float f_one = 1.0f, f_zero = 0.0f;

void gpu_cusparse_spmm_free(struct gpu_launch *l)
{
    struct gpu_spmm *s = l->spmm;
    if (!s)
        return;
    if (s->a)
        cusparseDestroySpMat(s->a);
    if (s->x)
        cusparseDestroyDnMat(s->x);
    if (s->y)
        cusparseDestroyDnMat(s->y);
    if (!s->borrowed)
        gpu_ctx_free(l->ctx, s->buf, s->buf_bytes);
    delete s;
    l->spmm = NULL;
}

int gpu_cusparse_spmm_prepare(struct gpu_launch *l, spmv_error *err)
{
    spmv_gpu_matrix *m = l->m;
    struct gpu_spmm *s = new (std::nothrow) gpu_spmm();
    if (!s)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "cusparse.csr SpMM: out of host memory");
    memset(s, 0, sizeof *s);
    l->spmm = s;
    cudaDataType vt = value_type(m);
    bool d = m->dtype == SPMV_FLOAT64;
    cusparseOrder_t order = l->xrow ? CUSPARSE_ORDER_ROW : CUSPARSE_ORDER_COL;
    int64_t ldx = l->xrow ? l->ncols : m->cols, ldy = l->xrow ? l->ncols : m->rows;
    cusparseStatus_t st;
    if ((st = cusparseCreateCsr(&s->a, m->rows, m->cols, m->nnz, m->row_ptr, m->col, m->val, CUSPARSE_INDEX_32I,
                                CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, vt)) != CUSPARSE_STATUS_SUCCESS ||
        (st = cusparseCreateDnMat(&s->x, m->cols, l->ncols, ldx, (void *)l->x, vt, order)) !=
            CUSPARSE_STATUS_SUCCESS ||
        (st = cusparseCreateDnMat(&s->y, m->rows, l->ncols, ldy, l->y, vt, order)) !=
            CUSPARSE_STATUS_SUCCESS ||
        (st = cusparseSpMM_bufferSize(l->ctx->sparse, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                      CUSPARSE_OPERATION_NON_TRANSPOSE, d ? (const void *)&d_one : &f_one, s->a, s->x,
                                      d ? (const void *)&d_zero : &f_zero, s->y, vt, CUSPARSE_SPMM_ALG_DEFAULT,
                                      &s->buf_bytes)) != CUSPARSE_STATUS_SUCCESS)
        return gpu_sparse_error(st, err, "cusparse.csr SpMM: descriptors");
    /* a batch (row-major) runs once per call: the kept scratch spares it a
     * cudaMalloc and a device-wide cudaFree each time */
    if (l->xrow && s->buf_bytes) {
        s->borrowed = true;
        return gpu_scratch(l->ctx, s->buf_bytes, &s->buf, err);
    }
    return gpu_ctx_alloc(l->ctx, &s->buf, s->buf_bytes, "cusparse.csr SpMM buffer", err);
}

int gpu_cusparse_csr_spmm(struct gpu_launch *l, spmv_error *err)
{
    struct gpu_spmm *s = l->spmm;
    bool d = l->m->dtype == SPMV_FLOAT64;
    cusparseStatus_t st = cusparseSpMM(l->ctx->sparse, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                       CUSPARSE_OPERATION_NON_TRANSPOSE, d ? (const void *)&d_one : &f_one, s->a,
                                       s->x, d ? (const void *)&d_zero : &f_zero, s->y, value_type(l->m),
                                       CUSPARSE_SPMM_ALG_DEFAULT, s->buf);
    if (st != CUSPARSE_STATUS_SUCCESS)
        return gpu_sparse_error(st, err, "cusparse.csr SpMM");
    return gpu_check_launch(err, "cusparse.csr SpMM");
}
