/* csr.cu — the row-oriented CSR kernels: scalar, warp_buffer, vector,
 * tiled and texture (SPEC §5).
 *
 * They differ in how many threads share a row and where x comes from:
 *   gpu.csr.scalar       one thread per row (uncoalesced, the baseline);
 *   gpu.csr.warp_buffer  one warp per row, the 32 partial sums written to a
 *                        global buffer and reduced there by the warp as a
 *                        tree (the pre-shuffle way of report 000, kept as a
 *                        point of comparison);
 *   gpu.csr.vector       2-32 threads per row (a power of two chosen from the
 *                        mean row length, or `threads`), shuffle reduction,
 *                        read-only loads;
 *   gpu.csr.tiled        one warp per row, x staged through a per-warp tile
 *                        of 128 values in shared memory: the warp loads the
 *                        tile holding the next column, consumes every entry
 *                        falling in it, moves to the next non-empty tile;
 *   gpu.csr.texture      one thread per row, x read through a texture object
 *                        (float64 as int2, reassembled).
 * Every kernel writes every y[i] (empty rows get 0), so none needs y zeroed.
 * __launch_bounds__(1024) keeps each kernel launchable at block_size 1024.
 */
#include <stdio.h>
#include <string.h>

#include "gpu.cuh"

#define TILE 128

template <typename T>
__global__ void __launch_bounds__(1024)
    csr_scalar_kernel(int32_t rows, const int32_t *__restrict__ rp, const int32_t *__restrict__ col,
                      const T *__restrict__ val, const T *__restrict__ x, T *__restrict__ y)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= rows)
        return;
    T s = 0;
    for (int32_t j = rp[i]; j < rp[i + 1]; j++)
        s += val[j] * x[col[j]];
    y[i] = s;
}

/* A persistent grid of warps walks the rows; each warp owns 32 slots of
 * buf (its partial sums). The warp then reduces them cooperatively as a
 * tree, report 000's "Improved GPU" (report 001 Alg. 1): at step s = 1, 2,
 * 4, 8, 16 the lanes whose id is a multiple of 2s add the slot s above
 * theirs, so after five steps slot 0 holds the row's sum. __syncwarp
 * orders each step's writes before the next step's reads, and lane 0's
 * last read before the next row's writes. */
template <typename T>
__global__ void __launch_bounds__(1024)
    csr_warp_buffer_kernel(int32_t rows, const int32_t *__restrict__ rp, const int32_t *__restrict__ col,
                           const T *__restrict__ val, const T *__restrict__ x, T *__restrict__ y, T *buf)
{
    int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / GPU_WARP;
    int64_t nwarps = (int64_t)gridDim.x * blockDim.x / GPU_WARP;
    int lane = threadIdx.x % GPU_WARP;
    T *mine = buf + warp * GPU_WARP;
    for (int64_t r = warp; r < rows; r += nwarps) {
        T s = 0;
        for (int32_t j = rp[r] + lane; j < rp[r + 1]; j += GPU_WARP)
            s += val[j] * x[col[j]];
        mine[lane] = s;
        for (int step = 1; step < GPU_WARP; step *= 2) {
            __syncwarp();
            if ((lane & (2 * step - 1)) == 0)
                mine[lane] = mine[lane] + mine[lane + step];
        }
        __syncwarp();
        if (lane == 0)
            y[r] = mine[0];
        __syncwarp();
    }
}

/* O: the row offsets' type, int32_t, or int64_t for a matrix whose
 * non-zeros pass INT32_MAX (columns stay 32-bit). */
template <typename T, typename O, int TPR>
__global__ void __launch_bounds__(1024)
    csr_vector_kernel(int32_t rows, const O *__restrict__ rp, const int32_t *__restrict__ col,
                      const T *__restrict__ val, const T *__restrict__ x, T *__restrict__ y)
{
    int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int64_t r = t / TPR;
    int lane = threadIdx.x % TPR;
    T s = 0;
    if (r < rows) {
        O end = __ldg(rp + r + 1);
        for (O j = __ldg(rp + r) + lane; j < end; j += TPR)
            s += __ldg(val + j) * __ldg(x + __ldg(col + j));
    }
    /* Every lane of the warp takes part in the shuffles, rows or not. */
    s = gpu_group_sum(s, TPR);
    if (r < rows && lane == 0)
        y[r] = s;
}

template <typename T>
__global__ void __launch_bounds__(1024)
    csr_tiled_kernel(int32_t rows, int32_t cols, const int32_t *__restrict__ rp, const int32_t *__restrict__ col,
                     const T *__restrict__ val, const T *__restrict__ x, T *__restrict__ y)
{
    extern __shared__ __align__(16) unsigned char tiled_smem[];
    T *tile = reinterpret_cast<T *>(tiled_smem) + (threadIdx.x / GPU_WARP) * TILE;
    int64_t r = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / GPU_WARP;
    int lane = threadIdx.x % GPU_WARP;
    if (r >= rows) /* warp-uniform */
        return;
    int32_t p = rp[r], end = rp[r + 1];
    T s = 0;
    while (p < end) {
        int32_t base = col[p] / TILE * TILE; /* the same address for all lanes: one broadcast load */
        for (int k = lane; k < TILE; k += GPU_WARP)
            tile[k] = base + k < cols ? __ldg(x + base + k) : (T)0;
        __syncwarp();
        for (;;) {
            int32_t j = p + lane, c = 0;
            bool in = false;
            if (j < end) {
                c = col[j];
                in = c >= base && c < base + TILE;
            }
            /* The leading run of in-tile entries (all of them when the row's
             * columns are sorted, as the device CSR's are). */
            unsigned ball = __ballot_sync(GPU_FULL_MASK, in);
            int n = ball == GPU_FULL_MASK ? GPU_WARP : __ffs(~ball) - 1;
            if (lane < n)
                s += val[j] * tile[c - base];
            p += n;
            if (n < GPU_WARP || p >= end)
                break;
        }
        __syncwarp(); /* all lanes done with this tile before it is overwritten */
    }
    s = gpu_group_sum(s, GPU_WARP);
    if (lane == 0)
        y[r] = s;
}

template <typename T>
__global__ void __launch_bounds__(1024)
    csr_texture_kernel(int32_t rows, const int32_t *__restrict__ rp, const int32_t *__restrict__ col,
                       const T *__restrict__ val, cudaTextureObject_t x, int32_t x_off, T *__restrict__ y)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= rows)
        return;
    T s = 0;
    for (int32_t j = rp[i]; j < rp[i + 1]; j++)
        s += val[j] * gpu_tex_x<T>(x, x_off + col[j]);
    y[i] = s;
}

/* -------------------------------------------------------------- launchers */

#define CSR_ARGS(T) m->rows, m->row_ptr, m->col, (const T *)m->val

template <typename T> static void launch_scalar(struct gpu_launch *l)
{
    spmv_gpu_matrix *m = l->m;
    csr_scalar_kernel<T><<<gpu_grid(m->rows, l->block), l->block, 0, l->ctx->stream>>>(CSR_ARGS(T), (const T *)l->x,
                                                                                      (T *)l->y);
}

int gpu_csr_scalar(struct gpu_launch *l, spmv_error *err)
{
    if (l->m->dtype == SPMV_FLOAT64)
        launch_scalar<double>(l);
    else
        launch_scalar<float>(l);
    return gpu_check_launch(err, "gpu.csr.scalar");
}

template <typename T> static int launch_warp_buffer(struct gpu_launch *l, spmv_error *err)
{
    spmv_gpu_matrix *m = l->m;
    /* Enough warps to fill the device (64 per multiprocessor), no more
     * than there are rows: the buffer stays small. */
    int64_t warps = (int64_t)l->ctx->sm_count * 64;
    if (warps > m->rows)
        warps = m->rows;
    unsigned grid = gpu_grid(warps * GPU_WARP, l->block);
    void *buf = NULL;
    int st = gpu_scratch(l->ctx, (size_t)grid * l->block * sizeof(T), &buf, err);
    if (st)
        return st;
    csr_warp_buffer_kernel<T><<<grid, l->block, 0, l->ctx->stream>>>(CSR_ARGS(T), (const T *)l->x, (T *)l->y,
                                                                     (T *)buf);
    return gpu_check_launch(err, "gpu.csr.warp_buffer");
}

int gpu_csr_warp_buffer(struct gpu_launch *l, spmv_error *err)
{
    return l->m->dtype == SPMV_FLOAT64 ? launch_warp_buffer<double>(l, err) : launch_warp_buffer<float>(l, err);
}

/* Threads per row: the `threads` parameter, else the power of two at or
 * above the mean row length, within 2..32. */
static int vector_width(const struct gpu_launch *l)
{
    int t = l->p.v[SPMV_PARAM_THREADS];
    if (t >= 2 && t <= 32 && (t & (t - 1)) == 0)
        return t;
    double mean = l->m->rows > 0 ? (double)l->m->nnz / l->m->rows : 0;
    int w = 2;
    while (w < 32 && w < mean)
        w *= 2;
    return w;
}

template <typename T, int TPR> static void launch_vector_w(struct gpu_launch *l)
{
    spmv_gpu_matrix *m = l->m;
    unsigned grid = gpu_grid((int64_t)m->rows * TPR, l->block);
    if (m->row_ptr64)
        csr_vector_kernel<T, int64_t, TPR><<<grid, l->block, 0, l->ctx->stream>>>(
            m->rows, m->row_ptr64, m->col, (const T *)m->val, (const T *)l->x, (T *)l->y);
    else
        csr_vector_kernel<T, int32_t, TPR><<<grid, l->block, 0, l->ctx->stream>>>(CSR_ARGS(T), (const T *)l->x,
                                                                                  (T *)l->y);
}

template <typename T> static void launch_vector(struct gpu_launch *l)
{
    switch (vector_width(l)) {
    case 2: launch_vector_w<T, 2>(l); break;
    case 4: launch_vector_w<T, 4>(l); break;
    case 8: launch_vector_w<T, 8>(l); break;
    case 16: launch_vector_w<T, 16>(l); break;
    default: launch_vector_w<T, 32>(l); break;
    }
}

int gpu_csr_vector(struct gpu_launch *l, spmv_error *err)
{
    if (l->m->dtype == SPMV_FLOAT64)
        launch_vector<double>(l);
    else
        launch_vector<float>(l);
    return gpu_check_launch(err, "gpu.csr.vector");
}

template <typename T> static void launch_tiled(struct gpu_launch *l)
{
    spmv_gpu_matrix *m = l->m;
    size_t smem = (size_t)(l->block / GPU_WARP) * TILE * sizeof(T);
    csr_tiled_kernel<T><<<gpu_grid((int64_t)m->rows * GPU_WARP, l->block), l->block, smem, l->ctx->stream>>>(
        m->rows, m->cols, m->row_ptr, m->col, (const T *)m->val, (const T *)l->x, (T *)l->y);
}

int gpu_csr_tiled(struct gpu_launch *l, spmv_error *err)
{
    if (l->m->dtype == SPMV_FLOAT64)
        launch_tiled<double>(l);
    else
        launch_tiled<float>(l);
    return gpu_check_launch(err, "gpu.csr.tiled");
}

/* The texture object over the launch's x buffer, made once and kept with
 * the matrix (the buffer does not move while the matrix lives); made anew
 * when a launch reads another x (a resident vector, a fused solve's work
 * vector). A texture's base must be aligned (ctx->tex_align): an x that is
 * not (a column of GMRES's basis) is read at tex_x_off elements past the
 * aligned base. gpu.csr.texture and gpu.hll (x_cache 1) read x through it. */
int gpu_tex_x_prepare(struct gpu_launch *l, const char *kernel, spmv_error *err)
{
    spmv_gpu_matrix *m = l->m;
    char what[96];
    if ((m->tex_x && m->tex_x_ptr == l->x) || m->cols == 0)
        return SPMV_OK;
    if (m->tex_x) {
        cudaDestroyTextureObject(m->tex_x);
        m->tex_x = 0;
    }
    size_t vs = spmv_dtype_size(m->dtype);
    uintptr_t base = (uintptr_t)l->x & ~(uintptr_t)(l->ctx->tex_align - 1);
    int64_t off = (int64_t)(((uintptr_t)l->x - base) / vs);
    if (m->cols + off > l->ctx->tex1d_linear_max)
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0, "%s: %d columns exceed the %d elements a linear texture spans",
                              kernel, m->cols, l->ctx->tex1d_linear_max);
    cudaResourceDesc res;
    memset(&res, 0, sizeof res);
    res.resType = cudaResourceTypeLinear;
    res.res.linear.devPtr = (void *)base;
    res.res.linear.sizeInBytes = (size_t)(m->cols + off) * vs;
    res.res.linear.desc = m->dtype == SPMV_FLOAT64 ? cudaCreateChannelDesc<int2>() : cudaCreateChannelDesc<float>();
    cudaTextureDesc td;
    memset(&td, 0, sizeof td);
    td.readMode = cudaReadModeElementType;
    cudaError_t e = cudaCreateTextureObject(&m->tex_x, &res, &td, NULL);
    if (e != cudaSuccess) {
        m->tex_x = 0;
        snprintf(what, sizeof what, "%s: cudaCreateTextureObject", kernel);
        return gpu_cuda_error(e, err, what);
    }
    m->tex_x_ptr = l->x;
    m->tex_x_off = (int32_t)off;
    return SPMV_OK;
}

/* The texture object over the x buffer of this launch (gpu_tex_x_prepare). */
int gpu_csr_texture_prepare(struct gpu_launch *l, spmv_error *err)
{
    return gpu_tex_x_prepare(l, "gpu.csr.texture", err);
}

template <typename T> static void launch_texture(struct gpu_launch *l)
{
    spmv_gpu_matrix *m = l->m;
    csr_texture_kernel<T><<<gpu_grid(m->rows, l->block), l->block, 0, l->ctx->stream>>>(CSR_ARGS(T), m->tex_x,
                                                                                       m->tex_x_off, (T *)l->y);
}

int gpu_csr_texture(struct gpu_launch *l, spmv_error *err)
{
    if (l->m->dtype == SPMV_FLOAT64)
        launch_texture<double>(l);
    else
        launch_texture<float>(l);
    return gpu_check_launch(err, "gpu.csr.texture");
}
