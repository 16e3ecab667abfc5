/* transfer.cu — a matrix onto the device and back: upload, download.
 *
 * An upload copies the host COO to the device once, as it is (row, col and
 * its values in the COO's own dtype), and does everything else there:
 * values are cast to the requested dtype, the triplets are checked (indices
 * in range, sorted by row then column without duplicates), and if they are
 * not sorted they are sorted (CUB radix sort on the key row*cols+col, only
 * as many bits as the key needs) and duplicates summed (CUB reduce-by-key).
 * The CSR row pointers are a count per row and an exclusive scan; the
 * formats the upload pins are then built by engine/gpu/build.cu.
 *
 * An upload from a host CSR (spmv_gpu_matrix_upload_csr, what the daemon
 * holds anyway) copies row_ptr, col and values as they are and skips the
 * staging, checking and sorting: a host CSR is sorted and in range by
 * construction, and its row pointers are checked on the host on the way.
 *
 * Every allocation is tracked on the matrix (gpu_alloc), so any failure
 * path ends in gpu_matrix_destroy() (engine/gpu/residency.cu) and leaves
 * nothing on the device. Download copies a format back into a host
 * spmv_matrix, for the tests that compare the device conversions with the
 * host ones entry by entry.
 */
#include <stdlib.h>
#include <string.h>

#include <new>

#include <cub/cub.cuh>

#include "gpu.cuh"

int gpu_copy_to_host(spmv_gpu_ctx *ctx, void *dst, const void *src, size_t bytes, const char *what,
                     spmv_error *err)
{
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(ctx->stream);
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, what);
}

/* ------------------------------------------------------------- kernels */

template <typename S, typename T>
__global__ void cast_values(int64_t n, const S *__restrict__ in, T *__restrict__ out)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = (T)in[i];
}

/* flags bit 0: an index out of range; bit 1: not strictly increasing in
 * (row, col) order (unsorted or duplicates). */
__global__ void check_triplets(int64_t n, int32_t rows, int32_t cols, const int32_t *__restrict__ row,
                               const int32_t *__restrict__ col, unsigned *flags)
{
    unsigned f = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int32_t r = row[i], c = col[i];
        if (r < 0 || r >= rows || c < 0 || c >= cols)
            f |= 1u;
        if (i + 1 < n) {
            int32_t r2 = row[i + 1], c2 = col[i + 1];
            if (r2 < r || (r2 == r && c2 <= c))
                f |= 2u;
        }
    }
    if (f)
        atomicOr(flags, f);
}

__global__ void make_keys(int64_t n, int32_t cols, const int32_t *__restrict__ row, const int32_t *__restrict__ col,
                          uint64_t *__restrict__ keys, int32_t *__restrict__ perm)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        keys[i] = (uint64_t)row[i] * (uint64_t)cols + (uint64_t)col[i];
        perm[i] = (int32_t)i;
    }
}

template <typename T>
__global__ void gather_values(int64_t n, const int32_t *__restrict__ perm, const T *__restrict__ in, T *__restrict__ out)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = in[perm[i]];
}

__global__ void split_keys(int64_t n, int32_t cols, const uint64_t *__restrict__ keys, int32_t *__restrict__ row,
                           int32_t *__restrict__ col)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        row[i] = (int32_t)(keys[i] / (uint64_t)cols);
        col[i] = (int32_t)(keys[i] % (uint64_t)cols);
    }
}

__global__ void count_rows(int64_t n, const int32_t *__restrict__ row, int32_t *counts)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        atomicAdd(&counts[row[i]], 1);
}

/* --------------------------------------------------- staging and sorting */

/* The host triplets, copied once: row and col arrays and the values in
 * the host's dtype. */
struct staged {
    int32_t *row, *col;
    void *src_val;
};

static int stage_coo(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, const spmv_coo *coo, struct staged *s, spmv_error *err)
{
    size_t ib = 0, vb = 0;
    int st;
    cudaError_t e;
    if ((st = gpu_array_bytes(coo->nnz, 4, &ib, err, "COO indices")) ||
        (st = gpu_array_bytes(coo->nnz, spmv_dtype_size(coo->dtype), &vb, err, "COO values")))
        return st;
    if ((st = gpu_alloc(ctx, m, (void **)&s->row, ib, "COO rows", err)) ||
        (st = gpu_alloc(ctx, m, (void **)&s->col, ib, "COO columns", err)) ||
        (st = gpu_alloc(ctx, m, &s->src_val, vb, "COO values", err)))
        return st;
    if (ib && ((e = cudaMemcpyAsync(s->row, coo->row, ib, cudaMemcpyHostToDevice, ctx->stream)) != cudaSuccess ||
               (e = cudaMemcpyAsync(s->col, coo->col, ib, cudaMemcpyHostToDevice, ctx->stream)) != cudaSuccess ||
               (e = cudaMemcpyAsync(s->src_val, coo->val, vb, cudaMemcpyHostToDevice, ctx->stream)) != cudaSuccess))
        return gpu_cuda_error(e, err, "copying the COO to the device");
    return SPMV_OK;
}

/* Values in the matrix's dtype: the staged array itself or a cast copy. */
static int cast_staged(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, spmv_dtype src, struct staged *s, spmv_error *err)
{
    if (src == m->dtype || m->nnz == 0) {
        m->val = s->src_val;
        s->src_val = NULL;
        return SPMV_OK;
    }
    size_t vb = (size_t)m->nnz * gpu_vsize(m);
    int st = gpu_alloc(ctx, m, &m->val, vb, "values", err);
    if (st)
        return st;
    if (src == SPMV_FLOAT64)
        cast_values<<<gpu_stride_grid(ctx, m->nnz), FILL_BLOCK, 0, ctx->stream>>>(m->nnz, (const double *)s->src_val,
                                                                              (float *)m->val);
    else
        cast_values<<<gpu_stride_grid(ctx, m->nnz), FILL_BLOCK, 0, ctx->stream>>>(m->nnz, (const float *)s->src_val,
                                                                              (double *)m->val);
    if ((st = gpu_check_launch(err, "cast_values")))
        return st;
    gpu_release_ptr(ctx, m, &s->src_val);
    return SPMV_OK;
}

/* 0 when sorted and unique, 2 when not; SPMV_ERR_INVALID for an index out
 * of range. */
static int check_order(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, const struct staged *s, unsigned *flags, spmv_error *err)
{
    unsigned *d_flags = NULL;
    int st = gpu_alloc(ctx, m, (void **)&d_flags, sizeof(unsigned), "check flags", err);
    if (st)
        return st;
    cudaMemsetAsync(d_flags, 0, sizeof(unsigned), ctx->stream);
    check_triplets<<<gpu_stride_grid(ctx, m->nnz), FILL_BLOCK, 0, ctx->stream>>>(m->nnz, m->rows, m->cols, s->row,
                                                                             s->col, d_flags);
    if (!(st = gpu_check_launch(err, "check_triplets")))
        st = gpu_copy_to_host(ctx, flags, d_flags, sizeof(unsigned), "reading the check flags", err);
    gpu_release(ctx, m, d_flags);
    if (!st && (*flags & 1u))
        st = spmv_error_set(err, SPMV_ERR_INVALID, 0, "COO has an index outside its %d x %d shape", m->rows,
                            m->cols);
    return st;
}

struct add_op {
    template <typename T> __device__ __forceinline__ T operator()(const T &a, const T &b) const { return a + b; }
};

/* Sorts the staged triplets by (row, col) and sums duplicates; m->nnz
 * becomes the count of distinct entries. */
template <typename T>
static int sort_and_sum(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, struct staged *s, spmv_error *err)
{
    int64_t n = m->nnz;
    uint64_t *keys = NULL, *keys2 = NULL;
    int32_t *perm = NULL, *perm2 = NULL;
    T *val2 = NULL;
    int32_t *d_runs = NULL;
    int32_t runs = 0;
    uint64_t max_key = (uint64_t)m->rows * (uint64_t)m->cols - 1;
    int end_bit = max_key ? 64 - __builtin_clzll(max_key) : 1;
    int st;
    if ((st = gpu_alloc(ctx, m, (void **)&keys, n * 8, "sort keys", err)) ||
        (st = gpu_alloc(ctx, m, (void **)&keys2, n * 8, "sort keys", err)) ||
        (st = gpu_alloc(ctx, m, (void **)&perm, n * 4, "sort permutation", err)) ||
        (st = gpu_alloc(ctx, m, (void **)&perm2, n * 4, "sort permutation", err)))
        goto done;
    make_keys<<<gpu_stride_grid(ctx, n), FILL_BLOCK, 0, ctx->stream>>>(n, m->cols, s->row, s->col, keys, perm);
    if ((st = gpu_check_launch(err, "make_keys")))
        goto done;
    if ((st = gpu_cub_run(ctx, m, "radix sort of the COO", err, [&](void *t, size_t &b) {
             return cub::DeviceRadixSort::SortPairs(t, b, keys, keys2, perm, perm2, (int)n, 0, end_bit, ctx->stream);
         })))
        goto done;
    gpu_release_ptr(ctx, m, &perm);
    if ((st = gpu_alloc(ctx, m, (void **)&val2, n * sizeof(T), "sorted values", err)))
        goto done;
    gather_values<<<gpu_stride_grid(ctx, n), FILL_BLOCK, 0, ctx->stream>>>(n, perm2, (const T *)m->val, val2);
    if ((st = gpu_check_launch(err, "gather_values")))
        goto done;
    gpu_release_ptr(ctx, m, &perm2);
    if ((st = gpu_alloc(ctx, m, (void **)&d_runs, sizeof(int32_t), "run count", err)))
        goto done;
    /* keys2 sorted -> keys unique; val2 -> m->val summed. */
    if ((st = gpu_cub_run(ctx, m, "duplicate summing", err, [&](void *t, size_t &b) {
             return cub::DeviceReduce::ReduceByKey(t, b, keys2, keys, val2, (T *)m->val, d_runs, add_op(), (int)n,
                                                   ctx->stream);
         })))
        goto done;
    if ((st = gpu_copy_to_host(ctx, &runs, d_runs, sizeof runs, "reading the run count", err)))
        goto done;
    m->nnz = runs;
    split_keys<<<gpu_stride_grid(ctx, runs), FILL_BLOCK, 0, ctx->stream>>>(runs, m->cols, keys, s->row, s->col);
    st = gpu_check_launch(err, "split_keys");
done:
    gpu_release_each(ctx, m, {keys, keys2, perm, perm2, val2, d_runs});
    return st;
}

/* ---------------------------------------------------------------- CSR */

/* row_ptr by a count per row and an exclusive scan; max_row by a max. */
static int build_csr(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, const int32_t *row, spmv_error *err)
{
    int32_t *counts = NULL, *d_max = NULL;
    int64_t n1 = (int64_t)m->rows + 1;
    int st;
    if ((st = gpu_alloc(ctx, m, (void **)&m->row_ptr, n1 * 4, "CSR row pointers", err)) ||
        (st = gpu_alloc(ctx, m, (void **)&counts, n1 * 4, "row counts", err)) ||
        (st = gpu_alloc(ctx, m, (void **)&d_max, 4, "longest row", err)))
        goto done;
    cudaMemsetAsync(counts, 0, n1 * 4, ctx->stream);
    if (m->nnz > 0) {
        count_rows<<<gpu_stride_grid(ctx, m->nnz), FILL_BLOCK, 0, ctx->stream>>>(m->nnz, row, counts);
        if ((st = gpu_check_launch(err, "count_rows")))
            goto done;
    }
    if ((st = gpu_cub_run(ctx, m, "row pointer scan", err, [&](void *t, size_t &b) {
             return cub::DeviceScan::ExclusiveSum(t, b, counts, m->row_ptr, (int)n1, ctx->stream);
         })))
        goto done;
    m->max_row = 0;
    if (m->rows > 0) {
        if ((st = gpu_cub_run(ctx, m, "longest row", err, [&](void *t, size_t &b) {
                 return cub::DeviceReduce::Max(t, b, counts, d_max, (int)m->rows, ctx->stream);
             })))
            goto done;
        st = gpu_copy_to_host(ctx, &m->max_row, d_max, 4, "reading the longest row", err);
    }
done:
    gpu_release_each(ctx, m, {counts, d_max});
    return st;
}

/* --------------------------------------------------------------- upload */

/* The checks both uploads make of their arguments; `kind` ("COO" or
 * "CSR") names the host matrix and src_dtype is its dtype. */
static int check_common_args(const spmv_gpu_ctx *ctx, const void *host, const char *kind, spmv_dtype dtype,
                             spmv_dtype src_dtype, unsigned formats, int32_t hack_size, spmv_error *err)
{
    if (!ctx || !host)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "GPU upload: no context or no matrix");
    if (dtype != SPMV_FLOAT64 && dtype != SPMV_FLOAT32)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "GPU upload: unknown dtype %d", (int)dtype);
    if (src_dtype != SPMV_FLOAT64 && src_dtype != SPMV_FLOAT32)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "GPU upload: %s has unknown dtype %d", kind, (int)src_dtype);
    if (formats & ~(unsigned)SPMV_FMT_ALL)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "GPU upload: unknown format bits 0x%x", formats);
    if (hack_size < 0 || hack_size > 1024)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "GPU upload: hack_size %d out of range 1..1024", hack_size);
    return SPMV_OK;
}

/* A shape both uploads accept: nothing negative, at most max_nnz entries
 * (`why` ends the message when there are more) and no more entries than
 * the shape has places. */
static int check_upload_shape(int32_t rows, int32_t cols, int64_t nnz, int64_t max_nnz, const char *why,
                              spmv_error *err)
{
    if (rows < 0 || cols < 0 || nnz < 0 || nnz > max_nnz)
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0, "GPU upload: shape %d x %d with %lld entries is out of range%s",
                              rows, cols, (long long)nnz, why);
    if (nnz > (int64_t)rows * cols)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "GPU upload: %lld entries in a %d x %d matrix",
                              (long long)nnz, rows, cols);
    return SPMV_OK;
}

static int check_upload_args(const spmv_gpu_ctx *ctx, const spmv_coo *coo, spmv_dtype dtype, unsigned formats,
                             int32_t hack_size, spmv_error *err)
{
    int st;
    if ((st = check_common_args(ctx, coo, "COO", dtype, coo ? coo->dtype : dtype, formats, hack_size, err)) ||
        (st = check_upload_shape(coo->rows, coo->cols, coo->nnz, INT32_MAX, "", err)))
        return st;
    if (coo->nnz > 0 && (!coo->row || !coo->col || !coo->val))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "GPU upload: COO arrays missing");
    return SPMV_OK;
}

/* Refuses early when the CSR and the operand buffers alone would not fit:
 * the common case of a matrix too big for the device fails before any
 * copy. The per-allocation check catches the rest. */
static int precheck(spmv_gpu_ctx *ctx, int32_t rows, int32_t cols, int64_t nnz, double need, spmv_error *err)
{
    size_t free_b = 0, total_b = 0;
    cudaError_t e = cudaMemGetInfo(&free_b, &total_b);
    if (e != cudaSuccess)
        return gpu_cuda_error(e, err, "cudaMemGetInfo");
    /* derived formats of other matrices go first, least recently used */
    while (need + (double)ctx->reserve > (double)free_b && gpu_evict(ctx)) {
        if ((e = cudaMemGetInfo(&free_b, &total_b)) != cudaSuccess)
            return gpu_cuda_error(e, err, "cudaMemGetInfo");
    }
    if (need + (double)ctx->reserve > (double)free_b)
        return spmv_error_set(err, SPMV_ERR_DEVICE_MEMORY, 0,
                              "a %d x %d matrix with %lld entries needs about %.0f bytes on GPU %d; %zu are free "
                              "and %zu kept in reserve",
                              rows, cols, (long long)nnz, need, ctx->device, free_b, ctx->reserve);
    return SPMV_OK;
}

/* What a COO upload needs at its peak: the staged triplets, the cast
 * values and the CSR row pointers, and the operand buffers. */
static double coo_need(const spmv_coo *coo, spmv_dtype dtype)
{
    size_t vs = spmv_dtype_size(dtype);
    return ((double)coo->rows + 1) * 4 + (double)coo->nnz * (8 + vs + spmv_dtype_size(coo->dtype)) +
           ((double)coo->rows + coo->cols) * vs;
}

/* x and y buffers come with the first product that needs them
 * (spmv_gpu_run's host operands): a matrix multiplied only with resident
 * vectors never holds them. Pinned formats are built now, after the CSR;
 * one the padding rule refuses (or PBSR on a matrix without blocks) is skipped (its bit stays clear, its
 * kernels answer why), one that does not fit fails the upload. */
static int build_pinned(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, unsigned formats, spmv_error *err)
{
    static const spmv_format order[] = {SPMV_FMT_COO,  SPMV_FMT_ELL,   SPMV_FMT_HLL,    SPMV_FMT_HYB,
                                        SPMV_FMT_PCSR, SPMV_FMT_PSELL, SPMV_FMT_SPSELL, SPMV_FMT_PBSR};
    for (spmv_format f : order) {
        if (!(formats & f) || (m->formats & f))
            continue;
        int st = gpu_ensure_format(ctx, m, f, err);
        /* The padding rule; PBSR without blocks; SPSELL of a matrix not symmetric. */
        if (st == SPMV_ERR_LIMIT || st == SPMV_ERR_UNSUPPORTED ||
            (st == SPMV_ERR_UNAVAILABLE && f == SPMV_FMT_SPSELL)) {
            m->pinned &= ~(unsigned)f;
            continue;
        }
        if (st)
            return st;
    }
    return SPMV_OK;
}

template <typename T>
static int convert_all(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, const spmv_coo *coo, struct staged *s,
                       unsigned formats, spmv_error *err)
{
    unsigned flags = 0;
    int st;
    if ((st = cast_staged(ctx, m, coo->dtype, s, err)))
        return st;
    if (m->nnz > 0 && (st = check_order(ctx, m, s, &flags, err)))
        return st;
    if ((flags & 2u) && (st = sort_and_sum<T>(ctx, m, s, err)))
        return st;
    m->col = s->col;
    s->col = NULL;
    {
        gpu_cat_scope scope(m, gpu_cat_of(SPMV_FMT_CSR));
        if ((st = build_csr(ctx, m, s->row, err)))
            return st;
    }
    gpu_retag(m, m->col, gpu_cat_of(SPMV_FMT_CSR));
    gpu_retag(m, m->val, gpu_cat_of(SPMV_FMT_CSR));
    m->formats = SPMV_FMT_CSR;
    m->pinned = formats | SPMV_FMT_CSR;
    if (formats & SPMV_FMT_COO) {
        m->coo_row = s->row;
        s->row = NULL;
        gpu_retag(m, m->coo_row, gpu_cat_of(SPMV_FMT_COO));
        m->slots[gpu_cat_of(SPMV_FMT_COO)] = m->nnz;
        m->formats |= SPMV_FMT_COO;
    } else {
        gpu_release_ptr(ctx, m, &s->row);
    }
    return build_pinned(ctx, m, formats, err);
}

static float elapsed_ms(spmv_gpu_ctx *ctx)
{
    float ms = 0;
    if (cudaEventSynchronize(ctx->ev_stop) != cudaSuccess ||
        cudaEventElapsedTime(&ms, ctx->ev_start, ctx->ev_stop) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return ms;
}

/* The end of an upload whose conversion is queued: waits for it, frees
 * the staging left, lists the matrix on ctx and fills the stats. */
static int upload_done(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, struct staged *s, spmv_gpu_upload_stats *stats,
                       spmv_error *err)
{
    cudaEventRecord(ctx->ev_stop, ctx->stream);
    cudaError_t e = cudaStreamSynchronize(ctx->stream);
    if (e != cudaSuccess)
        return gpu_cuda_error(e, err, "converting on the device");
    gpu_release_ptr(ctx, m, &s->src_val);
    int st = gpu_ctx_adopt(ctx, m, err);
    if (st)
        return st;
    if (stats) {
        stats->convert_ms = elapsed_ms(ctx);
        stats->formats = m->formats;
        for (unsigned i = 0; i < SPMV_FORMAT_COUNT; i++) {
            stats->bytes[i] = m->cat_bytes[i];
            stats->padding[i] = gpu_format_padding(m, (spmv_format)(1u << i));
        }
    }
    return SPMV_OK;
}

/* The start both uploads share: the device chosen, the room checked, an
 * empty matrix of the shape made (CSR-less until the staging). */
static int new_upload(spmv_gpu_ctx *ctx, int32_t rows, int32_t cols, int64_t nnz, double need, spmv_dtype dtype,
                      int32_t hack_size, spmv_gpu_matrix **out, spmv_error *err)
{
    cudaError_t e;
    int st;
    if ((e = cudaSetDevice(ctx->device)) != cudaSuccess)
        return gpu_cuda_error(e, err, "cudaSetDevice");
    if ((st = precheck(ctx, rows, cols, nnz, need, err)))
        return st;
    spmv_gpu_matrix *m = new (std::nothrow) spmv_gpu_matrix();
    if (!m)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "cannot allocate a GPU matrix");
    m->rows = rows;
    m->cols = cols;
    m->nnz = nnz;
    m->dtype = dtype;
    m->hack_size = hack_size ? hack_size : SPMV_HACK_SIZE_DEFAULT;
    *out = m;
    return SPMV_OK;
}

/* The staging copies are queued (ctx->ev_start recorded before them):
 * their time goes into the stats and the conversion's time starts. */
static void staging_queued(spmv_gpu_ctx *ctx, spmv_gpu_upload_stats *stats)
{
    cudaEventRecord(ctx->ev_stop, ctx->stream);
    if (stats) {
        memset(stats, 0, sizeof *stats);
        stats->transfer_ms = elapsed_ms(ctx);
    }
    cudaEventRecord(ctx->ev_start, ctx->stream);
}

extern "C" int spmv_gpu_matrix_upload(spmv_gpu_ctx *ctx, const spmv_coo *coo, spmv_dtype dtype, unsigned formats,
                                      int32_t hack_size, spmv_gpu_matrix **out, spmv_gpu_upload_stats *stats,
                                      spmv_error *err)
{
    struct staged s = {NULL, NULL, NULL};
    spmv_gpu_matrix *m = NULL;
    int st;
    *out = NULL;
    if ((st = check_upload_args(ctx, coo, dtype, formats, hack_size, err)) ||
        (st = new_upload(ctx, coo->rows, coo->cols, coo->nnz, coo_need(coo, dtype), dtype, hack_size, &m, err)))
        return st;

    cudaEventRecord(ctx->ev_start, ctx->stream);
    if ((st = stage_coo(ctx, m, coo, &s, err)))
        goto fail;
    staging_queued(ctx, stats);
    st = dtype == SPMV_FLOAT64 ? convert_all<double>(ctx, m, coo, &s, formats, err)
                               : convert_all<float>(ctx, m, coo, &s, formats, err);
    if (st)
        goto fail;
    if ((st = upload_done(ctx, m, &s, stats, err)))
        goto fail;
    *out = m;
    return SPMV_OK;
fail:
    gpu_matrix_destroy(ctx, m);
    return st;
}

/* ------------------------------------------------------------ CSR upload */

static int check_csr_args(const spmv_gpu_ctx *ctx, const spmv_csr *csr, spmv_dtype dtype, unsigned formats,
                          int32_t hack_size, spmv_error *err)
{
    int st;
    if ((st = check_common_args(ctx, csr, "CSR", dtype, csr ? csr->dtype : dtype, formats, hack_size, err)))
        return st;
    bool wide = spmv_csr_wide(csr);
    if ((st = check_upload_shape(csr->rows, csr->cols, csr->nnz, wide ? INT64_MAX : INT32_MAX,
                                 wide ? "" : " for 32-bit row offsets", err)))
        return st;
    if ((!csr->row_ptr && !wide) || (csr->nnz > 0 && (!csr->col || !csr->val)))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "GPU upload: CSR arrays missing");
    /* a wide CSR (64-bit row offsets) is held on the device as CSR and
     * PSELL only: every other format reads 32-bit offsets (gpu_need_narrow) */
    unsigned narrow_only = formats & ~(unsigned)(SPMV_FMT_CSR | SPMV_FMT_PSELL);
    if (wide && narrow_only)
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0,
                              "GPU upload: a matrix of %lld non-zeros with 64-bit row offsets is held as CSR and PSELL "
                              "only; formats 0x%x read 32-bit offsets", (long long)csr->nnz, narrow_only);
    return SPMV_OK;
}

/* The row pointers size every per-row loop of the format builders, so
 * they are checked here (0 to nnz, never decreasing) while the longest
 * row is found. The columns are not checked again: a host CSR has every
 * column inside the shape and each row's columns strictly increasing by
 * construction (spmv_coo_to_csr checks the indices and sorts, the .npz
 * reader checks every index and each row's order, matfile_read checks a
 * stored file's columns), so the COO upload's device-side check and sort
 * are skipped. */
template <typename O> static int check_offsets(const O *rp, const spmv_csr *csr, int32_t *max_row, spmv_error *err)
{
    if (rp[0] != 0 || (int64_t)rp[csr->rows] != csr->nnz)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0,
                              "GPU upload: CSR row pointers run from %lld to %lld, not 0 to %lld", (long long)rp[0],
                              (long long)rp[csr->rows], (long long)csr->nnz);
    int64_t longest = 0, shortest = 0;
    for (int32_t i = 0; i < csr->rows; i++) {
        int64_t len = (int64_t)rp[i + 1] - (int64_t)rp[i];
        longest = len > longest ? len : longest;
        shortest = len < shortest ? len : shortest;
    }
    if (shortest < 0 || longest > csr->cols)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "GPU upload: CSR row pointers %s",
                              shortest < 0 ? "decrease" : "give a row more entries than columns");
    *max_row = (int32_t)longest;
    return SPMV_OK;
}

static int check_row_ptr(const spmv_csr *csr, int32_t *max_row, spmv_error *err)
{
    return spmv_csr_wide(csr) ? check_offsets(csr->row_ptr64, csr, max_row, err)
                              : check_offsets(csr->row_ptr, csr, max_row, err);
}

/* The host CSR's arrays, copied as they are; values in the CSR's dtype. */
static int stage_csr(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, const spmv_csr *csr, struct staged *s, spmv_error *err)
{
    size_t pb = 0, ib = 0, vb = 0;
    int st;
    cudaError_t e;
    bool wide = spmv_csr_wide(csr);
    const void *src_ptr = wide ? (const void *)csr->row_ptr64 : (const void *)csr->row_ptr;
    void *dst_ptr = NULL;
    if ((st = gpu_array_bytes((int64_t)csr->rows + 1, wide ? 8 : 4, &pb, err, "CSR row pointers")) ||
        (st = gpu_array_bytes(csr->nnz, 4, &ib, err, "CSR columns")) ||
        (st = gpu_array_bytes(csr->nnz, spmv_dtype_size(csr->dtype), &vb, err, "CSR values")))
        return st;
    if ((st = gpu_alloc(ctx, m, &dst_ptr, pb, "CSR row pointers", err)))
        return st;
    if (wide)
        m->row_ptr64 = (int64_t *)dst_ptr;
    else
        m->row_ptr = (int32_t *)dst_ptr;
    if ((st = gpu_alloc(ctx, m, (void **)&m->col, ib, "CSR columns", err)) ||
        (st = gpu_alloc(ctx, m, &s->src_val, vb, "CSR values", err)))
        return st;
    if ((e = cudaMemcpyAsync(dst_ptr, src_ptr, pb, cudaMemcpyHostToDevice, ctx->stream)) != cudaSuccess ||
        (ib && ((e = cudaMemcpyAsync(m->col, csr->col, ib, cudaMemcpyHostToDevice, ctx->stream)) != cudaSuccess ||
                (e = cudaMemcpyAsync(s->src_val, csr->val, vb, cudaMemcpyHostToDevice, ctx->stream)) != cudaSuccess)))
        return gpu_cuda_error(e, err, "copying the CSR to the device");
    return SPMV_OK;
}

extern "C" int spmv_gpu_matrix_upload_csr(spmv_gpu_ctx *ctx, const spmv_csr *csr, spmv_dtype dtype,
                                          unsigned formats, int32_t hack_size, spmv_gpu_matrix **out,
                                          spmv_gpu_upload_stats *stats, spmv_error *err)
{
    struct staged s = {NULL, NULL, NULL};
    spmv_gpu_matrix *m = NULL;
    int32_t max_row = 0;
    int st;
    *out = NULL;
    if ((st = check_csr_args(ctx, csr, dtype, formats, hack_size, err)) || (st = check_row_ptr(csr, &max_row, err)))
        return st;
    /* the CSR, the values in the CSR's dtype while they are cast, the operand buffers */
    size_t vs = spmv_dtype_size(dtype);
    double need = ((double)csr->rows + 1) * (spmv_csr_wide(csr) ? 8 : 4) + (double)csr->nnz * (4 + vs) +
                  (csr->dtype != dtype ? (double)csr->nnz * spmv_dtype_size(csr->dtype) : 0) +
                  ((double)csr->rows + csr->cols) * vs;
    if ((st = new_upload(ctx, csr->rows, csr->cols, csr->nnz, need, dtype, hack_size, &m, err)))
        return st;
    m->max_row = max_row;

    cudaEventRecord(ctx->ev_start, ctx->stream);
    if ((st = stage_csr(ctx, m, csr, &s, err)))
        goto fail;
    staging_queued(ctx, stats);
    if ((st = cast_staged(ctx, m, csr->dtype, &s, err)))
        goto fail;
    gpu_retag(m, m->row_ptr64 ? (void *)m->row_ptr64 : (void *)m->row_ptr, gpu_cat_of(SPMV_FMT_CSR));
    gpu_retag(m, m->col, gpu_cat_of(SPMV_FMT_CSR));
    gpu_retag(m, m->val, gpu_cat_of(SPMV_FMT_CSR));
    m->formats = SPMV_FMT_CSR;
    m->pinned = formats | SPMV_FMT_CSR;
    if ((st = build_pinned(ctx, m, formats, err)) || (st = upload_done(ctx, m, &s, stats, err)))
        goto fail;
    *out = m;
    return SPMV_OK;
fail:
    gpu_matrix_destroy(ctx, m);
    return st;
}

/* ----------------------------------------------------------------- view */

__global__ void longest_row(int32_t rows, const int32_t *__restrict__ rp, int32_t *out)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows)
        atomicMax(out, rp[i + 1] - rp[i]);
}

int gpu_matrix_view(spmv_gpu_ctx *ctx, int32_t rows, int32_t cols, int64_t nnz, spmv_dtype dtype, int32_t *row_ptr,
                    int32_t *col, void *val, spmv_gpu_matrix **out, spmv_error *err)
{
    spmv_gpu_matrix *m = NULL;
    int32_t *d_max = NULL;
    *out = NULL;
    int st = new_upload(ctx, rows, cols, nnz, 0, dtype, 0, &m, err);
    if (st)
        return st;
    /* borrowed: not in m->allocs, so never freed (nor evicted: pinned) with m */
    m->row_ptr = row_ptr;
    m->col = col;
    m->val = val;
    m->formats = SPMV_FMT_CSR;
    m->pinned = SPMV_FMT_CSR;
    if (rows > 0 && !(st = gpu_alloc(ctx, m, (void **)&d_max, 4, "longest row", err))) {
        cudaMemsetAsync(d_max, 0, 4, ctx->stream);
        longest_row<<<gpu_grid(rows, 256), 256, 0, ctx->stream>>>(rows, row_ptr, d_max);
        if (!(st = gpu_check_launch(err, "longest_row")))
            st = gpu_copy_to_host(ctx, &m->max_row, d_max, 4, "reading the longest row", err);
        gpu_release(ctx, m, d_max);
    }
    if (st) {
        gpu_matrix_destroy(ctx, m);
        return st;
    }
    *out = m;
    return SPMV_OK;
}

/* ------------------------------------------------------------- download */

/* A host copy of n elements of `size` bytes from the device (never NULL
 * on success, even for n == 0, as the host formats expect). */
static int download_array(spmv_gpu_ctx *ctx, const void *src, int64_t n, size_t size, void **out, spmv_error *err)
{
    size_t bytes = 0;
    int st = gpu_array_bytes(n, size, &bytes, err, "download");
    if (st)
        return st;
    *out = malloc(bytes ? bytes : 1);
    if (!*out)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "download: cannot allocate %zu bytes", bytes);
    if (bytes == 0)
        return SPMV_OK;
    return gpu_copy_to_host(ctx, *out, src, bytes, "download", err);
}

static int download_csr(spmv_gpu_ctx *ctx, const spmv_gpu_matrix *m, spmv_csr *c, spmv_error *err)
{
    int st;
    SPMV_COPY_SHAPE(c, m);
    if (m->row_ptr64 ? (st = download_array(ctx, m->row_ptr64, (int64_t)m->rows + 1, 8, (void **)&c->row_ptr64, err))
                     : (st = download_array(ctx, m->row_ptr, (int64_t)m->rows + 1, 4, (void **)&c->row_ptr, err)))
        return st;
    if ((st = download_array(ctx, m->col, m->nnz, 4, (void **)&c->col, err)) ||
        (st = download_array(ctx, m->val, m->nnz, gpu_vsize(m), &c->val, err)))
        return st;
    return SPMV_OK;
}

int gpu_download_csr(spmv_gpu_ctx *ctx, const spmv_gpu_matrix *m, spmv_csr *c, spmv_error *err)
{
    memset(c, 0, sizeof *c);
    int st = download_csr(ctx, m, c, err);
    if (st)
        spmv_csr_free(c);
    return st;
}

static int download_ell(spmv_gpu_ctx *ctx, const spmv_gpu_matrix *m, const struct gpu_ell *g, int64_t nnz,
                        spmv_ell *e, spmv_error *err)
{
    int st;
    e->rows = m->rows;
    e->cols = m->cols;
    e->nnz = nnz;
    e->width = g->width;
    e->dtype = m->dtype;
    if ((st = download_array(ctx, g->col, g->slots, 4, (void **)&e->col, err)) ||
        (st = download_array(ctx, g->val, g->slots, gpu_vsize(m), &e->val, err)))
        return st;
    return SPMV_OK;
}

static int download_hll(spmv_gpu_ctx *ctx, const spmv_gpu_matrix *m, spmv_hll *h, spmv_error *err)
{
    const struct gpu_hll *g = &m->hll;
    int st;
    SPMV_COPY_SHAPE(h, m);
    h->hack_size = g->hack_size;
    h->nslices = g->nslices;
    if ((st = download_array(ctx, g->slice_off, (int64_t)g->nslices + 1, 8, (void **)&h->slice_off, err)) ||
        (st = download_array(ctx, g->slice_width, g->nslices, 4, (void **)&h->slice_width, err)) ||
        (st = download_array(ctx, g->col, g->slots, 4, (void **)&h->col, err)) ||
        (st = download_array(ctx, g->val, g->slots, gpu_vsize(m), &h->val, err)))
        return st;
    return SPMV_OK;
}

static int download_coo(spmv_gpu_ctx *ctx, const spmv_gpu_matrix *m, const int32_t *row, const int32_t *col,
                        const void *val, int64_t nnz, spmv_coo *c, spmv_error *err)
{
    int st;
    c->rows = m->rows;
    c->cols = m->cols;
    c->nnz = nnz;
    c->dtype = m->dtype;
    if ((st = download_array(ctx, row, nnz, 4, (void **)&c->row, err)) ||
        (st = download_array(ctx, col, nnz, 4, (void **)&c->col, err)) ||
        (st = download_array(ctx, val, nnz, gpu_vsize(m), &c->val, err)))
        return st;
    return SPMV_OK;
}

static int download_values(spmv_gpu_ctx *ctx, const spmv_gpu_matrix *m, const struct gpu_packed_values *g,
                           int64_t n, spmv_packed_values *v, spmv_error *err)
{
    size_t vs = gpu_vsize(m);
    size_t code = spmv_vcode_entry_bytes(g->mode, vs);
    int st;
    v->mode = g->mode;
    v->ntable = g->ntable;
    if (g->ntable > 0 && (st = download_array(ctx, g->table, g->ntable, vs, &v->table, err)))
        return st;
    if (g->mode != SPMV_VCODE_CONST && (st = download_array(ctx, g->data, n, code, &v->data, err)))
        return st;
    return SPMV_OK;
}

/* A host PCSR borrowing the downloaded CSR's row_ptr; the arrays the device
 * borrows from the CSR (columns at 4 bytes, RAW values) come as copies. */
static int download_pcsr(spmv_gpu_ctx *ctx, const spmv_gpu_matrix *m, const spmv_csr *csr, spmv_pcsr *p,
                         spmv_error *err)
{
    const struct gpu_pcsr *g = &m->pcsr;
    int st;
    SPMV_COPY_SHAPE(p, m);
    p->row_ptr = csr->row_ptr;
    p->idx_bytes = g->idx_bytes;
    p->wide_nnz = g->wide_nnz;
    if ((st = download_array(ctx, g->idx, m->nnz, g->idx_bytes, &p->idx, err)))
        return st;
    if (g->idx_bytes < 4 && ((st = download_array(ctx, g->base, m->rows, 4, (void **)&p->base, err)) ||
                             (st = download_array(ctx, g->wide_col, g->wide_nnz, 4, (void **)&p->wide_col, err))))
        return st;
    return download_values(ctx, m, &g->v, m->nnz, &p->v, err);
}

static int download_pbsr(spmv_gpu_ctx *ctx, const spmv_gpu_matrix *m, spmv_pbsr *p, spmv_error *err)
{
    const struct gpu_pbsr *g = &m->pbsr;
    int st;
    SPMV_COPY_SHAPE(p, m);
    p->b = g->b;
    p->brows = g->brows;
    p->nblocks = g->nblocks;
    p->idx_bytes = g->idx_bytes;
    p->wide_nnz = g->wide_nnz;
    if ((st = download_array(ctx, g->block_ptr, (int64_t)g->brows + 1, 4, (void **)&p->block_ptr, err)) ||
        (st = download_array(ctx, g->idx, g->nblocks, g->idx_bytes, &p->idx, err)))
        return st;
    if (g->idx_bytes < 4 && ((st = download_array(ctx, g->base, g->brows, 4, (void **)&p->base, err)) ||
                             (st = download_array(ctx, g->wide_col, g->wide_nnz, 4, (void **)&p->wide_col, err))))
        return st;
    return download_values(ctx, m, &g->v, m->nnz, &p->v, err);
}

static int download_psell(spmv_gpu_ctx *ctx, const spmv_gpu_matrix *m, spmv_psell *p, spmv_error *err)
{
    const struct gpu_psell *g = &m->psell;
    int st;
    SPMV_COPY_SHAPE(p, m);
    p->nslices = g->nslices;
    p->slots = g->slots;
    if ((st = download_array(ctx, g->slot_off, (int64_t)g->nslices + 1, 8, (void **)&p->slot_off, err)) ||
        (st = download_array(ctx, g->idx_off, (int64_t)g->nslices + 1, 8, (void **)&p->idx_off, err)) ||
        (st = download_array(ctx, g->val_off, (int64_t)g->nslices + 1, 8, (void **)&p->val_off, err)) ||
        (st = download_array(ctx, g->idx_bytes, g->nslices, 1, (void **)&p->idx_bytes, err)) ||
        (st = download_array(ctx, g->base, g->slots / SPMV_PSELL_C, 4, (void **)&p->base, err)) ||
        (st = download_array(ctx, g->idx, g->idx_total, 1, (void **)&p->idx, err)))
        return st;
    return download_values(ctx, m, &g->v, g->nvals, &p->v, err);
}

static int download_spsell(spmv_gpu_ctx *ctx, const spmv_gpu_matrix *m, spmv_spsell *p, spmv_error *err)
{
    const struct gpu_spsell *g = &m->spsell;
    int st;
    SPMV_COPY_SHAPE(&p->p, m);
    p->p.nslices = g->nslices;
    p->p.slots = g->slots;
    p->nmirrored = g->nmirrored;
    if ((st = download_array(ctx, g->slot_off, (int64_t)g->nslices + 1, 8, (void **)&p->p.slot_off, err)) ||
        (st = download_array(ctx, g->idx_off, (int64_t)g->nslices + 1, 8, (void **)&p->p.idx_off, err)) ||
        (st = download_array(ctx, g->val_off, (int64_t)g->nslices + 1, 8, (void **)&p->p.val_off, err)) ||
        (st = download_array(ctx, g->idx_bytes, g->nslices, 1, (void **)&p->p.idx_bytes, err)) ||
        (st = download_array(ctx, g->mirror, g->nslices, 1, (void **)&p->mirror, err)) ||
        (st = download_array(ctx, g->base, g->slots / SPMV_PSELL_C, 4, (void **)&p->p.base, err)) ||
        (st = download_array(ctx, g->idx, g->idx_total, 1, (void **)&p->p.idx, err)))
        return st;
    return download_values(ctx, m, &g->v, g->nvals, &p->p.v, err);
}

static void free_host_matrix(spmv_matrix *out)
{
    void *arrays[] = {out->csr.row_ptr, out->csr.row_ptr64, out->csr.col, out->csr.val, out->coo.row, out->coo.col, out->coo.val,
                      out->ell.col, out->ell.val, out->hll.slice_off, out->hll.slice_width, out->hll.col,
                      out->hll.val, out->hyb.ell.col, out->hyb.ell.val, out->hyb.coo.row, out->hyb.coo.col,
                      out->hyb.coo.val, out->pcsr.base, out->pcsr.idx, out->pcsr.wide_col, out->pcsr.v.table,
                      out->pcsr.v.data, out->psell.slot_off, out->psell.idx_off, out->psell.val_off, out->psell.idx_bytes,
                      out->psell.base, out->psell.idx, out->psell.v.table, out->psell.v.data,
                      out->spsell.p.slot_off, out->spsell.p.idx_off, out->spsell.p.val_off, out->spsell.p.idx_bytes,
                      out->spsell.p.base, out->spsell.p.idx, out->spsell.p.v.table, out->spsell.p.v.data,
                      out->spsell.mirror, out->pbsr.block_ptr, out->pbsr.base, out->pbsr.idx, out->pbsr.wide_col,
                      out->pbsr.v.table, out->pbsr.v.data};
    for (void *p : arrays)
        free(p);
    memset(out, 0, sizeof *out);
}

extern "C" int spmv_gpu_matrix_download(spmv_gpu_ctx *ctx, const spmv_gpu_matrix *m, spmv_format f,
                                        spmv_matrix *out, spmv_error *err)
{
    int st;
    cudaError_t e;
    if (!ctx || !m || !out)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "GPU download: missing argument");
    memset(out, 0, sizeof *out);
    if (!spmv_format_takes_wide(f) && (st = gpu_need_narrow(m, "GPU download of a format beyond CSR and PSELL", err)))
        return st;
    if (!(m->formats & f))
        return spmv_error_set(err, SPMV_ERR_NOT_FOUND, 0, "GPU download: the matrix holds no %s on the device",
                              spmv_format_name(f));
    if ((e = cudaSetDevice(ctx->device)) != cudaSuccess)
        return gpu_cuda_error(e, err, "cudaSetDevice");
    SPMV_COPY_SHAPE(out, m);
    out->hack_size = m->hack_size;
    if ((st = download_csr(ctx, m, &out->csr, err)))
        goto fail;
    switch (f) {
    case SPMV_FMT_CSR:
        break;
    case SPMV_FMT_COO:
        st = download_coo(ctx, m, m->coo_row, m->col, m->val, m->nnz, &out->coo, err);
        break;
    case SPMV_FMT_ELL:
        st = download_ell(ctx, m, &m->ell, m->nnz, &out->ell, err);
        break;
    case SPMV_FMT_HLL:
        st = download_hll(ctx, m, &out->hll, err);
        break;
    case SPMV_FMT_HYB:
        if (!(st = download_ell(ctx, m, &m->hyb.ell, m->nnz - m->hyb.coo_nnz, &out->hyb.ell, err)))
            st = download_coo(ctx, m, m->hyb.row, m->hyb.col, m->hyb.val, m->hyb.coo_nnz, &out->hyb.coo, err);
        break;
    case SPMV_FMT_PCSR:
        st = download_pcsr(ctx, m, &out->csr, &out->pcsr, err);
        break;
    case SPMV_FMT_PSELL:
        st = download_psell(ctx, m, &out->psell, err);
        break;
    case SPMV_FMT_SPSELL:
        st = download_spsell(ctx, m, &out->spsell, err);
        break;
    case SPMV_FMT_PBSR:
        st = download_pbsr(ctx, m, &out->pbsr, err);
        break;
    default:
        st = spmv_error_set(err, SPMV_ERR_INVALID, 0, "GPU download: unknown format %u", (unsigned)f);
    }
    if (st)
        goto fail;
    out->formats = SPMV_FMT_CSR | f;
    return SPMV_OK;
fail:
    free_host_matrix(out);
    return st;
}

/* New values on the same pattern: the CSR's copied over in place (the
 * arrays and the cuSPARSE descriptors over them stay); every other format,
 * each holding its own copy of the values, and the transpose are dropped,
 * and the pinned formats rebuilt from the new CSR. */
extern "C" int spmv_gpu_matrix_set_values(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, const void *val, spmv_error *err)
{
    cudaSetDevice(ctx->device);
    cudaStreamSynchronize(ctx->stream);
    for (unsigned i = 0; i < SPMV_FORMAT_COUNT; i++)
        gpu_drop_format(ctx, m, (spmv_format)(1u << i)); /* all but CSR */
    if (m->transpose) {
        gpu_matrix_destroy(ctx, m->transpose);
        m->transpose = NULL;
    }
    gpu_sparse_cache_free(ctx, m); /* cuSPARSE's descriptors and analyses of the old values: made again on use */
    cudaError_t e = cudaMemcpy(m->val, val, (size_t)m->nnz * gpu_vsize(m), cudaMemcpyHostToDevice);
    if (e != cudaSuccess)
        return gpu_cuda_error(e, err, "copying the new values to the device");
    return build_pinned(ctx, m, m->pinned & ~(unsigned)SPMV_FMT_CSR, err);
}
