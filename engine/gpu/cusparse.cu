/* cusparse.cu — cusparse.csr, cusparse.coo and cusparse.sell: cuSPARSE's
 * generic SpMV over the matrix's own device arrays.
 *
 * The descriptors wrap the resident arrays (no copy): CSR is row_ptr, col,
 * val; COO is the device COO row array with the CSR's col and val; SELL is
 * the HLL of the requested hack_size, whose layout is cuSPARSE's sliced
 * ELL (column-major slices of sliceSize rows, padding column -1), with a
 * 32-bit copy of the slice offsets. Descriptors for x and y are made once
 * and pointed at each call's operands, so everything is made on first use
 * and kept with the matrix: the work buffer of each algorithm,
 * and for CSR the result of cusparseSpMV_preprocess (per algorithm, on its
 * own descriptor, since preprocessing attaches to the descriptor). A run
 * then costs one cusparseSpMV call. Matrices without non-zeros never reach
 * cuSPARSE: y is zeroed instead.
 */
#include <new>

#include "gpu.cuh"

struct gpu_sparse_cache {
    cusparseDnVecDescr_t vx, vy;
    cusparseSpMatDescr_t csr[2], coo[2], sell;
    void *csr_buf[2], *coo_buf[2], *sell_buf;
    bool csr_ready[2], coo_ready[2];
    /* cuSPARSE takes 64-bit row offsets only with 64-bit column indices:
     * for a matrix past INT32_MAX non-zeros, a 64-bit copy of the columns,
     * made on first use of cusparse.csr (its bytes are "other"). */
    int64_t *col64;
    /* What the SELL descriptor wraps: an HLL rebuilt since (another hack
     * size evicted it) has other arrays, and the descriptor is remade. */
    int32_t sell_hack;
    const void *sell_arrays[3];
};

static cudaDataType value_type(const spmv_gpu_matrix *m)
{
    return m->dtype == SPMV_FLOAT64 ? CUDA_R_64F : CUDA_R_32F;
}

void gpu_sparse_cache_free(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m)
{
    struct gpu_sparse_cache *c = m->sparse;
    if (!c)
        return;
    for (int a = 0; a < 2; a++) {
        if (c->csr[a])
            cusparseDestroySpMat(c->csr[a]);
        if (c->coo[a])
            cusparseDestroySpMat(c->coo[a]);
        gpu_release(ctx, m, c->csr_buf[a]);
        gpu_release(ctx, m, c->coo_buf[a]);
    }
    if (c->sell)
        cusparseDestroySpMat(c->sell);
    gpu_release(ctx, m, c->sell_buf);
    gpu_release(ctx, m, c->col64);
    if (c->vx)
        cusparseDestroyDnVec(c->vx);
    if (c->vy)
        cusparseDestroyDnVec(c->vy);
    delete c;
    m->sparse = NULL;
}

void gpu_sparse_cache_drop(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, spmv_format f)
{
    struct gpu_sparse_cache *c = m->sparse;
    if (!c)
        return;
    if (f == SPMV_FMT_COO)
        for (int a = 0; a < 2; a++) {
            if (c->coo[a])
                cusparseDestroySpMat(c->coo[a]);
            c->coo[a] = NULL;
            c->coo_ready[a] = false;
            gpu_release_ptr(ctx, m, &c->coo_buf[a]);
        }
    if (f == SPMV_FMT_HLL) {
        if (c->sell)
            cusparseDestroySpMat(c->sell);
        c->sell = NULL;
        c->sell_hack = 0;
        gpu_release_ptr(ctx, m, &c->sell_buf);
    }
}

/* The cache with the x and y descriptors. */
static int sparse_cache(struct gpu_launch *l, struct gpu_sparse_cache **out, spmv_error *err)
{
    spmv_gpu_matrix *m = l->m;
    cusparseStatus_t s;
    if (!m->sparse) {
        m->sparse = new (std::nothrow) gpu_sparse_cache();
        if (!m->sparse)
            return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "cuSPARSE cache: out of host memory");
    }
    struct gpu_sparse_cache *c = m->sparse;
    if (!c->vx && (s = cusparseCreateDnVec(&c->vx, m->cols, (void *)l->x, value_type(m))) != CUSPARSE_STATUS_SUCCESS) {
        c->vx = NULL;
        return gpu_sparse_error(s, err, "cusparseCreateDnVec(x)");
    }
    if (!c->vy && (s = cusparseCreateDnVec(&c->vy, m->rows, l->y, value_type(m))) != CUSPARSE_STATUS_SUCCESS) {
        c->vy = NULL;
        return gpu_sparse_error(s, err, "cusparseCreateDnVec(y)");
    }
    /* the operands of this launch (the matrix's buffers or resident vectors) */
    if ((s = cusparseDnVecSetValues(c->vx, (void *)l->x)) != CUSPARSE_STATUS_SUCCESS ||
        (s = cusparseDnVecSetValues(c->vy, l->y)) != CUSPARSE_STATUS_SUCCESS)
        return gpu_sparse_error(s, err, "cusparseDnVecSetValues");
    *out = c;
    return SPMV_OK;
}

/* alpha = 1, beta = 0 in the compute type. */
struct scalars {
    double d1, d0;
    float f1, f0;
};
static const struct scalars one_zero = {1.0, 0.0, 1.0f, 0.0f};
static const void *alpha_of(const spmv_gpu_matrix *m)
{
    return m->dtype == SPMV_FLOAT64 ? (const void *)&one_zero.d1 : (const void *)&one_zero.f1;
}
static const void *beta_of(const spmv_gpu_matrix *m)
{
    return m->dtype == SPMV_FLOAT64 ? (const void *)&one_zero.d0 : (const void *)&one_zero.f0;
}

/* Sizes and allocates the work buffer of `alg` for `mat`. */
static int make_buffer(struct gpu_launch *l, cusparseSpMatDescr_t mat, cusparseSpMVAlg_t alg, void **buf,
                       const char *what, spmv_error *err)
{
    spmv_gpu_matrix *m = l->m;
    struct gpu_sparse_cache *c = m->sparse;
    size_t bytes = 0;
    cusparseStatus_t s = cusparseSpMV_bufferSize(l->ctx->sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, alpha_of(m), mat,
                                                 c->vx, beta_of(m), c->vy, value_type(m), alg, &bytes);
    if (s != CUSPARSE_STATUS_SUCCESS)
        return gpu_sparse_error(s, err, what);
    return gpu_alloc(l->ctx, m, buf, bytes, what, err);
}

static int run_spmv(struct gpu_launch *l, cusparseSpMatDescr_t mat, cusparseSpMVAlg_t alg, void *buf,
                    const char *what, spmv_error *err)
{
    spmv_gpu_matrix *m = l->m;
    cusparseStatus_t s = cusparseSpMV(l->ctx->sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, alpha_of(m), mat,
                                      m->sparse->vx, beta_of(m), m->sparse->vy, value_type(m), alg, buf);
    if (s != CUSPARSE_STATUS_SUCCESS)
        return gpu_sparse_error(s, err, what);
    return gpu_check_launch(err, what);
}

static int zero_y(struct gpu_launch *l, spmv_error *err)
{
    size_t bytes = (size_t)l->m->rows * spmv_dtype_size(l->m->dtype);
    cudaError_t e = bytes ? cudaMemsetAsync(l->y, 0, bytes, l->ctx->stream) : cudaSuccess;
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, "zeroing y");
}

static int alg_index(const struct gpu_launch *l) { return l->p.v[SPMV_PARAM_ALG] == 2 ? 1 : 0; }
static cusparseSpMVAlg_t csr_alg(int a) { return a ? CUSPARSE_SPMV_CSR_ALG2 : CUSPARSE_SPMV_CSR_ALG1; }
static cusparseSpMVAlg_t coo_alg(int a) { return a ? CUSPARSE_SPMV_COO_ALG2 : CUSPARSE_SPMV_COO_ALG1; }

/* The start of every prepare: an empty matrix needs nothing (*c stays
 * NULL); otherwise the cache, whose x and y descriptors are pointed at
 * this call's operands on every call. */
static int prepare_start(struct gpu_launch *l, struct gpu_sparse_cache **c, spmv_error *err)
{
    *c = NULL;
    return l->m->nnz == 0 ? SPMV_OK : sparse_cache(l, c, err);
}

/* ----------------------------------------------------------------- CSR */

__global__ void widen_columns(int64_t n, const int32_t *__restrict__ in, int64_t *__restrict__ out)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = in[i];
}

int gpu_cusparse_csr_prepare(struct gpu_launch *l, spmv_error *err)
{
    spmv_gpu_matrix *m = l->m;
    struct gpu_sparse_cache *c = NULL;
    int a = alg_index(l), st;
    cusparseSpMVAlg_t alg = csr_alg(a);
    cusparseStatus_t s;
    if ((st = prepare_start(l, &c, err)) || !c || c->csr_ready[a])
        return st;
    if (m->row_ptr64 && !c->col64) {
        if ((st = gpu_alloc(l->ctx, m, (void **)&c->col64, (size_t)m->nnz * 8, "cusparse.csr: 64-bit columns", err)))
            return st;
        widen_columns<<<(unsigned)(l->ctx->sm_count * 8), 256, 0, l->ctx->stream>>>(m->nnz, m->col, c->col64);
        if ((st = gpu_check_launch(err, "widen_columns")))
            return st;
    }
    if (!c->csr[a] &&
        (s = cusparseCreateCsr(&c->csr[a], m->rows, m->cols, m->nnz, m->row_ptr64 ? (void *)m->row_ptr64 : m->row_ptr,
                               m->row_ptr64 ? (void *)c->col64 : m->col, m->val,
                               m->row_ptr64 ? CUSPARSE_INDEX_64I : CUSPARSE_INDEX_32I,
                               m->row_ptr64 ? CUSPARSE_INDEX_64I : CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                               value_type(m))) != CUSPARSE_STATUS_SUCCESS) {
        c->csr[a] = NULL;
        return gpu_sparse_error(s, err, "cusparseCreateCsr");
    }
    if (!c->csr_buf[a] && (st = make_buffer(l, c->csr[a], alg, &c->csr_buf[a], "cusparse.csr buffer", err)))
        return st;
    s = cusparseSpMV_preprocess(l->ctx->sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, alpha_of(m), c->csr[a], c->vx,
                                beta_of(m), c->vy, value_type(m), alg, c->csr_buf[a]);
    /* Preprocessing is an optimisation: cuSPARSE 13 fails it (internal
     * error) on 64-bit matrices of billions of non-zeros, where SpMV itself
     * still runs. */
    if (s != CUSPARSE_STATUS_SUCCESS && !m->row_ptr64)
        return gpu_sparse_error(s, err, "cusparseSpMV_preprocess");
    cudaGetLastError();
    c->csr_ready[a] = true;
    return SPMV_OK;
}

int gpu_cusparse_csr(struct gpu_launch *l, spmv_error *err)
{
    int a = alg_index(l);
    if (l->m->nnz == 0)
        return zero_y(l, err);
    return run_spmv(l, l->m->sparse->csr[a], csr_alg(a), l->m->sparse->csr_buf[a], "cusparse.csr", err);
}

/* ----------------------------------------------------------------- COO */

int gpu_cusparse_coo_prepare(struct gpu_launch *l, spmv_error *err)
{
    spmv_gpu_matrix *m = l->m;
    struct gpu_sparse_cache *c = NULL;
    int a = alg_index(l), st;
    cusparseSpMVAlg_t alg = coo_alg(a);
    cusparseStatus_t s;
    if ((st = prepare_start(l, &c, err)) || !c || c->coo_ready[a])
        return st;
    if (!c->coo[a] &&
        (s = cusparseCreateCoo(&c->coo[a], m->rows, m->cols, m->nnz, m->coo_row, m->col, m->val, CUSPARSE_INDEX_32I,
                               CUSPARSE_INDEX_BASE_ZERO, value_type(m))) != CUSPARSE_STATUS_SUCCESS) {
        c->coo[a] = NULL;
        return gpu_sparse_error(s, err, "cusparseCreateCoo");
    }
    if (!c->coo_buf[a] && (st = make_buffer(l, c->coo[a], alg, &c->coo_buf[a], "cusparse.coo buffer", err)))
        return st;
    c->coo_ready[a] = true;
    return SPMV_OK;
}

int gpu_cusparse_coo(struct gpu_launch *l, spmv_error *err)
{
    int a = alg_index(l);
    if (l->m->nnz == 0)
        return zero_y(l, err);
    return run_spmv(l, l->m->sparse->coo[a], coo_alg(a), l->m->sparse->coo_buf[a], "cusparse.coo", err);
}

/* ---------------------------------------------------------------- SELL */

__global__ void offsets_to_32(int64_t n, const int64_t *__restrict__ in, int32_t *__restrict__ out)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = (int32_t)in[i];
}

int gpu_cusparse_sell_prepare(struct gpu_launch *l, spmv_error *err)
{
    spmv_gpu_matrix *m = l->m;
    struct gpu_hll *h = l->hll;
    struct gpu_sparse_cache *c = NULL;
    cusparseStatus_t s;
    int st;
    if ((st = prepare_start(l, &c, err)) || !c)
        return st;
    if (c->sell && c->sell_hack == h->hack_size && c->sell_arrays[0] == h->slice_off32 &&
        c->sell_arrays[1] == h->col && c->sell_arrays[2] == h->val)
        return SPMV_OK;
    if (h->slots > INT32_MAX)
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0, "cusparse.sell: %lld slots exceed 32-bit slice offsets",
                              (long long)h->slots);
    if ((st = sparse_cache(l, &c, err)))
        return st;
    /* A different hack size than last time: drop the old descriptor. */
    if (c->sell) {
        cusparseDestroySpMat(c->sell);
        c->sell = NULL;
        gpu_release_ptr(l->ctx, m, &c->sell_buf);
    }
    if (!h->slice_off32) {
        if ((st = gpu_alloc(l->ctx, m, (void **)&h->slice_off32, ((size_t)h->nslices + 1) * 4, "SELL offsets", err)))
            return st;
        offsets_to_32<<<gpu_grid((int64_t)h->nslices + 1, 256), 256, 0, l->ctx->stream>>>(h->nslices + 1,
                                                                                         h->slice_off, h->slice_off32);
        if ((st = gpu_check_launch(err, "offsets_to_32")))
            return st;
    }
    s = cusparseCreateSlicedEll(&c->sell, m->rows, m->cols, m->nnz, h->slots, h->hack_size, h->slice_off32, h->col,
                                h->val, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                                value_type(m));
    if (s != CUSPARSE_STATUS_SUCCESS) {
        c->sell = NULL;
        return gpu_sparse_error(s, err, "cusparseCreateSlicedEll");
    }
    c->sell_hack = h->hack_size;
    c->sell_arrays[0] = h->slice_off32;
    c->sell_arrays[1] = h->col;
    c->sell_arrays[2] = h->val;
    return make_buffer(l, c->sell, CUSPARSE_SPMV_SELL_ALG1, &c->sell_buf, "cusparse.sell buffer", err);
}

int gpu_cusparse_sell(struct gpu_launch *l, spmv_error *err)
{
    if (l->m->nnz == 0)
        return zero_y(l, err);
    return run_spmv(l, l->m->sparse->sell, CUSPARSE_SPMV_SELL_ALG1, l->m->sparse->sell_buf, "cusparse.sell", err);
}
