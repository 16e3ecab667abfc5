/* coo.cu — the COO kernels: gpu.coo.atomic and gpu.coo.sliced.
 *
 * Both take one non-zero per thread and so are indifferent to row lengths;
 * both accumulate, so each run first zeroes y (inside the timed region).
 *   gpu.coo.atomic  one atomicAdd into global y per non-zero (native
 *                   float64 atomics on sm_60 and later, so on sm_90);
 *   gpu.coo.sliced  the non-zeros cut into slices of SLICE_PER_THREAD *
 *                   block_size entries, one block each. The device COO is
 *                   sorted, so a slice covers a contiguous row range; when
 *                   that range fits the block's shared accumulator the
 *                   products are summed there (shared-memory atomics), and
 *                   only the per-row totals go out: rows strictly inside
 *                   the range belong to this slice alone and are stored,
 *                   the first and last row may be shared with neighbouring
 *                   slices and are added atomically. A slice spanning more
 *                   rows than that (very sparse rows) falls back to global
 *                   atomics.
 */
#include "gpu.cuh"

#define SLICE_PER_THREAD 4

template <typename T>
__global__ void __launch_bounds__(1024)
    coo_atomic_kernel(int64_t nnz, const int32_t *__restrict__ row, const int32_t *__restrict__ col,
                      const T *__restrict__ val, const T *__restrict__ x, T *__restrict__ y)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nnz; i += (int64_t)gridDim.x * blockDim.x)
        atomicAdd(y + __ldg(row + i), __ldg(val + i) * __ldg(x + __ldg(col + i)));
}

template <typename T>
__global__ void __launch_bounds__(1024)
    coo_sliced_kernel(int64_t nnz, int32_t slice, const int32_t *__restrict__ row, const int32_t *__restrict__ col,
                      const T *__restrict__ val, const T *__restrict__ x, T *__restrict__ y)
{
    extern __shared__ __align__(16) unsigned char sliced_smem[];
    T *acc = reinterpret_cast<T *>(sliced_smem);
    int64_t b0 = blockIdx.x * (int64_t)slice, b1 = b0 + slice < nnz ? b0 + slice : nnz;
    int32_t r0 = row[b0], r1 = row[b1 - 1];
    int64_t span = (int64_t)r1 - r0 + 1;
    if (span > slice) { /* block-uniform */
        for (int64_t j = b0 + threadIdx.x; j < b1; j += blockDim.x)
            atomicAdd(y + row[j], __ldg(val + j) * __ldg(x + __ldg(col + j)));
        return;
    }
    for (int64_t k = threadIdx.x; k < span; k += blockDim.x)
        acc[k] = 0;
    __syncthreads();
    for (int64_t j = b0 + threadIdx.x; j < b1; j += blockDim.x)
        atomicAdd(acc + (row[j] - r0), __ldg(val + j) * __ldg(x + __ldg(col + j)));
    __syncthreads();
    for (int64_t k = threadIdx.x; k < span; k += blockDim.x) {
        T v = acc[k];
        if (k == 0 || k == span - 1)
            atomicAdd(y + r0 + k, v);
        else
            y[r0 + k] = v;
    }
}

/* ------------------------------------------------------------ launchers */

static int zero_y(struct gpu_launch *l, spmv_error *err)
{
    size_t bytes = (size_t)l->m->rows * spmv_dtype_size(l->m->dtype);
    cudaError_t e = bytes ? cudaMemsetAsync(l->y, 0, bytes, l->ctx->stream) : cudaSuccess;
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, "zeroing y");
}

template <typename T>
static void launch_atomic(struct gpu_launch *l, int64_t nnz, const int32_t *row, const int32_t *col, const void *val)
{
    int64_t blocks = (nnz + l->block - 1) / l->block, cap = (int64_t)l->ctx->sm_count * 2048 / l->block;
    coo_atomic_kernel<T><<<(unsigned)(blocks < cap ? blocks : cap), l->block, 0, l->ctx->stream>>>(
        nnz, row, col, (const T *)val, (const T *)l->x, (T *)l->y);
}

int gpu_coo_atomic_add(struct gpu_launch *l, int64_t nnz, const int32_t *row, const int32_t *col, const void *val,
                       spmv_error *err)
{
    if (nnz == 0)
        return SPMV_OK;
    if (l->m->dtype == SPMV_FLOAT64)
        launch_atomic<double>(l, nnz, row, col, val);
    else
        launch_atomic<float>(l, nnz, row, col, val);
    return gpu_check_launch(err, "COO atomics");
}

int gpu_coo_atomic(struct gpu_launch *l, spmv_error *err)
{
    int st = zero_y(l, err);
    if (st)
        return st;
    return gpu_coo_atomic_add(l, l->m->nnz, l->m->coo_row, l->m->col, l->m->val, err);
}

template <typename T> static void launch_sliced(struct gpu_launch *l)
{
    spmv_gpu_matrix *m = l->m;
    int32_t slice = l->block * SLICE_PER_THREAD;
    coo_sliced_kernel<T><<<gpu_grid(m->nnz, slice), l->block, (size_t)slice * sizeof(T), l->ctx->stream>>>(
        m->nnz, slice, m->coo_row, m->col, (const T *)m->val, (const T *)l->x, (T *)l->y);
}

int gpu_coo_sliced(struct gpu_launch *l, spmv_error *err)
{
    int st = zero_y(l, err);
    if (st || l->m->nnz == 0)
        return st;
    if (l->m->dtype == SPMV_FLOAT64)
        launch_sliced<double>(l);
    else
        launch_sliced<float>(l);
    return gpu_check_launch(err, "gpu.coo.sliced");
}
