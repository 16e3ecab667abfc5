/* coo.cu — the COO kernels: gpu.coo.atomic, gpu.coo.sliced and gpu.coo.scoo.
 *
 * All take one non-zero per thread and so are indifferent to row lengths;
 * the first two accumulate, so each run first zeroes y (inside the timed
 * region); gpu.coo.scoo zeroes it only when several blocks share a slice.
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
 *   gpu.coo.scoo    sliced COO, report 002 §2.3 (Dang and Schmidt's SCOO):
 *                   the rows in slices of S, each slice's entries (a
 *                   contiguous run of the row-sorted COO, bounded by the
 *                   CSR's row pointers) summed in a shared accumulator of
 *                   S rows x L lanes (`lanes`), S = SCOO_SMEM / (L x value
 *                   size). Thread t adds its product into lane t mod L of
 *                   its row with a shared atomic: consecutive threads,
 *                   mostly on one row in a row-sorted COO, hit L different
 *                   words (row-major, so different banks) rather than one.
 *                   Then the lanes of each row are summed and the row
 *                   stored. A slice with many non-zeros is split among
 *                   several blocks (grid.y, from the mean non-zeros per
 *                   slice), which then add their rows into a zeroed y with
 *                   global atomics. The entries keep the COO's row order
 *                   (SCOO's sort by column within a slice is not made: the
 *                   device COO is the CSR's arrays plus a row index).
 */
#include "gpu.cuh"

#define SLICE_PER_THREAD 4
#define SCOO_SMEM 16384     /* bytes of a gpu.coo.scoo slice's accumulator */
#define SCOO_PER_THREAD 8   /* gpu.coo.scoo: entries a thread, aimed at when splitting a slice */

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

/* Block (slice blockIdx.x, part blockIdx.y of gridDim.y): the slice's
 * rows [r0, r0 + srows) and its part of their non-zeros. */
template <typename T>
__global__ void __launch_bounds__(1024)
    scoo_kernel(int32_t rows, int32_t srows, int lanes, const int32_t *__restrict__ rp,
                const int32_t *__restrict__ row, const int32_t *__restrict__ col, const T *__restrict__ val,
                const T *__restrict__ x, T *__restrict__ y)
{
    extern __shared__ __align__(16) unsigned char scoo_smem[];
    T *acc = reinterpret_cast<T *>(scoo_smem);
    int64_t r0 = blockIdx.x * (int64_t)srows, r1 = r0 + srows < rows ? r0 + srows : rows;
    int64_t z0 = rp[r0], z1 = rp[r1], per = (z1 - z0 + gridDim.y - 1) / gridDim.y;
    int64_t a = z0 + blockIdx.y * per, b = a + per < z1 ? a + per : z1;
    int32_t nr = (int32_t)(r1 - r0);
    bool alone = gridDim.y == 1; /* the block owns its rows: store them, all of them */
    if (!alone && a >= b)        /* block-uniform: nothing of this part */
        return;
    for (int32_t k = threadIdx.x; k < nr * lanes; k += blockDim.x)
        acc[k] = 0;
    __syncthreads();
    int lane = threadIdx.x % lanes;
    for (int64_t j = a + threadIdx.x; j < b; j += blockDim.x)
        atomicAdd(acc + (int64_t)(__ldg(row + j) - r0) * lanes + lane, __ldg(val + j) * __ldg(x + __ldg(col + j)));
    __syncthreads();
    /* a shared slice adds only the rows its part touches */
    int32_t lo = alone ? 0 : (int32_t)(row[a] - r0), hi = alone ? nr : (int32_t)(row[b - 1] - r0) + 1;
    for (int32_t r = lo + threadIdx.x; r < hi; r += blockDim.x) {
        T s = 0;
        for (int l = 0; l < lanes; l++)
            s += acc[r * lanes + l];
        if (alone)
            y[r0 + r] = s;
        else
            atomicAdd(y + r0 + r, s);
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

/* Slices of SCOO_SMEM / (lanes x value size) rows; each split into as many
 * blocks as it takes for about SCOO_PER_THREAD entries a thread, from the
 * mean non-zeros per slice. */
template <typename T> static int launch_scoo(struct gpu_launch *l, spmv_error *err)
{
    spmv_gpu_matrix *m = l->m;
    int lanes = l->p.v[SPMV_PARAM_LANES] > 0 ? l->p.v[SPMV_PARAM_LANES] : 4;
    int32_t srows = (int32_t)(SCOO_SMEM / (sizeof(T) * (size_t)lanes));
    int64_t nslices = ((int64_t)m->rows + srows - 1) / srows;
    int64_t per_block = (int64_t)l->block * SCOO_PER_THREAD;
    int64_t parts = nslices ? (m->nnz / nslices + per_block - 1) / per_block : 1;
    if (parts < 1)
        parts = 1;
    if (parts > 65535) /* grid.y's bound */
        parts = 65535;
    if (parts > 1) {
        cudaError_t e = cudaMemsetAsync(l->y, 0, (size_t)m->rows * sizeof(T), l->ctx->stream);
        if (e != cudaSuccess)
            return gpu_cuda_error(e, err, "gpu.coo.scoo: zeroing y");
    }
    dim3 grid((unsigned)nslices, (unsigned)parts);
    scoo_kernel<T><<<grid, l->block, (size_t)srows * lanes * sizeof(T), l->ctx->stream>>>(
        m->rows, srows, lanes, m->row_ptr, m->coo_row, m->col, (const T *)m->val, (const T *)l->x, (T *)l->y);
    return gpu_check_launch(err, "gpu.coo.scoo");
}

int gpu_scoo(struct gpu_launch *l, spmv_error *err)
{
    if (l->m->rows == 0)
        return SPMV_OK;
    return l->m->dtype == SPMV_FLOAT64 ? launch_scoo<double>(l, err) : launch_scoo<float>(l, err);
}
