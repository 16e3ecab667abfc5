/* ell.cu — the padded-format kernels: gpu.ell, gpu.hll and gpu.hyb.
 *
 * ELL and HLL are column-major, so thread i reading slot k*stride + i has
 * its warp's loads coalesced; each thread walks its row until the first
 * padding slot (column -1: padding only ever follows a row's entries).
 * HLL is ELL per slice of hack_size rows, each slice as wide as its longest
 * row, which bounds the padding that one long row costs to its own slice.
 * gpu.hll reads x through the texture cache by default (x_cache 1, the
 * HLL study's form) or through __ldg (x_cache 2).
 * gpu.hyb by default runs one kernel, the HYB study's "atomic case": each
 * thread adds its row's ELL sum and a stride of the COO entries into a
 * zeroed y with atomicAdd. launches 2 runs the ELL kernel over the ELL part
 * (writing every y[i]) and then adds the COO remainder with one atomic per
 * entry; the two launches are ordered on the stream, so no zeroing is
 * needed. `width` asks for a HYB of another ELL width (build.cu keeps one
 * such beside the automatic one).
 */
#include "gpu.cuh"

template <typename T>
__global__ void __launch_bounds__(1024)
    ell_kernel(int32_t rows, int32_t width, const int32_t *__restrict__ col, const T *__restrict__ val,
               const T *__restrict__ x, T *__restrict__ y)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= rows)
        return;
    T s = 0;
    for (int32_t k = 0; k < width; k++) {
        int64_t slot = (int64_t)k * rows + i;
        int32_t c = __ldg(col + slot);
        if (c < 0)
            break;
        s += __ldg(val + slot) * __ldg(x + c);
    }
    y[i] = s;
}

/* x_cache 1 (TEX): x through the texture cache, as report 004 Alg. 7;
 * 2: through the read-only data cache (__ldg). */
template <typename T, bool TEX>
__global__ void __launch_bounds__(1024)
    hll_kernel(int32_t rows, int32_t hack, const int64_t *__restrict__ off, const int32_t *__restrict__ width,
               const int32_t *__restrict__ col, const T *__restrict__ val, const T *__restrict__ x,
               cudaTextureObject_t tx, int32_t tx_off, T *__restrict__ y)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= rows)
        return;
    int64_t s_idx = i / hack, r = i % hack;
    int64_t base = __ldg(off + s_idx) + r;
    int32_t w = __ldg(width + s_idx);
    T s = 0;
    for (int32_t k = 0; k < w; k++) {
        int64_t slot = base + (int64_t)k * hack;
        int32_t c = __ldg(col + slot);
        if (c < 0)
            break;
        s += __ldg(val + slot) * (TEX ? gpu_tex_x<T>(tx, tx_off + c) : __ldg(x + c));
    }
    y[i] = s;
}

/* HYB in one launch, report 002's atomic case (listing 8): thread i adds
 * its row's ELL sum into y[i] and then takes every stride-th COO entry,
 * both with atomicAdd, so y must be zeroed first (gpu_hyb_run does, in
 * the timed region). Its ELL loop stops at the row's first padding slot. */
template <typename T>
__global__ void __launch_bounds__(1024)
    hyb_atomic_kernel(int32_t rows, int32_t width, const int32_t *__restrict__ ecol, const T *__restrict__ eval,
                      int64_t coo_nnz, const int32_t *__restrict__ crow, const int32_t *__restrict__ ccol,
                      const T *__restrict__ cval, const T *__restrict__ x, T *__restrict__ y)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < rows && width > 0) {
        T s = 0;
        for (int32_t k = 0; k < width; k++) {
            int64_t slot = (int64_t)k * rows + i;
            int32_t c = __ldg(ecol + slot);
            if (c < 0)
                break;
            s += __ldg(eval + slot) * __ldg(x + c);
        }
        atomicAdd(y + i, s);
    }
    for (int64_t j = i; j < coo_nnz; j += (int64_t)gridDim.x * blockDim.x)
        atomicAdd(y + __ldg(crow + j), __ldg(cval + j) * __ldg(x + __ldg(ccol + j)));
}

/* ------------------------------------------------------------ launchers */

template <typename T> static void launch_ell(struct gpu_launch *l, const struct gpu_ell *e)
{
    spmv_gpu_matrix *m = l->m;
    ell_kernel<T><<<gpu_grid(m->rows, l->block), l->block, 0, l->ctx->stream>>>(
        m->rows, e->width, e->col, (const T *)e->val, (const T *)l->x, (T *)l->y);
}

int gpu_ell_run(struct gpu_launch *l, spmv_error *err)
{
    if (l->m->dtype == SPMV_FLOAT64)
        launch_ell<double>(l, &l->m->ell);
    else
        launch_ell<float>(l, &l->m->ell);
    return gpu_check_launch(err, "gpu.ell");
}

template <typename T> static void launch_hll(struct gpu_launch *l)
{
    spmv_gpu_matrix *m = l->m;
    const struct gpu_hll *h = l->hll;
    unsigned grid = gpu_grid(m->rows, l->block);
    if (l->p.v[SPMV_PARAM_X_CACHE] == 2)
        hll_kernel<T, false><<<grid, l->block, 0, l->ctx->stream>>>(m->rows, h->hack_size, h->slice_off,
                                                                    h->slice_width, h->col, (const T *)h->val,
                                                                    (const T *)l->x, 0, 0, (T *)l->y);
    else
        hll_kernel<T, true><<<grid, l->block, 0, l->ctx->stream>>>(m->rows, h->hack_size, h->slice_off,
                                                                   h->slice_width, h->col, (const T *)h->val,
                                                                   (const T *)l->x, m->tex_x, m->tex_x_off, (T *)l->y);
}

/* x_cache 1 reads x through the matrix's texture object over l->x; a
 * matrix wider than a linear texture spans reads it through __ldg. */
int gpu_hll_prepare(struct gpu_launch *l, spmv_error *err)
{
    if (l->p.v[SPMV_PARAM_X_CACHE] == 2)
        return SPMV_OK;
    if (l->m->cols > l->ctx->tex1d_linear_max) {
        l->p.v[SPMV_PARAM_X_CACHE] = 2;
        return SPMV_OK;
    }
    return gpu_tex_x_prepare(l, "gpu.hll", err);
}

int gpu_hll_run(struct gpu_launch *l, spmv_error *err)
{
    if (l->m->dtype == SPMV_FLOAT64)
        launch_hll<double>(l);
    else
        launch_hll<float>(l);
    return gpu_check_launch(err, "gpu.hll");
}

/* launches 1: one kernel (the study's atomic case) over a zeroed y;
 * 2: the ELL kernel writes every y[i], then the COO entries are added
 * atomically (the two launches ordered on the stream). */
template <typename T> static int launch_hyb(struct gpu_launch *l, spmv_error *err)
{
    spmv_gpu_matrix *m = l->m;
    const struct gpu_hyb *h = l->hyb;
    if (l->p.v[SPMV_PARAM_LAUNCHES] == 2) {
        launch_ell<T>(l, &h->ell);
        int st = gpu_check_launch(err, "gpu.hyb (ELL part)");
        if (st || h->coo_nnz == 0)
            return st;
        return gpu_coo_atomic_add(l, h->coo_nnz, h->row, h->col, h->val, err);
    }
    size_t bytes = (size_t)m->rows * sizeof(T);
    cudaError_t e = bytes ? cudaMemsetAsync(l->y, 0, bytes, l->ctx->stream) : cudaSuccess;
    if (e != cudaSuccess)
        return gpu_cuda_error(e, err, "gpu.hyb: zeroing y");
    /* a thread per row, and at least enough threads to cover the COO part
     * in a few strides (no more blocks than fill the device for it) */
    int64_t threads = m->rows, cap = (int64_t)l->ctx->sm_count * 2048;
    if (threads < h->coo_nnz)
        threads = h->coo_nnz < cap ? h->coo_nnz : (cap > threads ? cap : threads);
    if (threads == 0)
        return SPMV_OK;
    hyb_atomic_kernel<T><<<gpu_grid(threads, l->block), l->block, 0, l->ctx->stream>>>(
        m->rows, h->ell.width, h->ell.col, (const T *)h->ell.val, h->coo_nnz, h->row, h->col, (const T *)h->val,
        (const T *)l->x, (T *)l->y);
    return gpu_check_launch(err, "gpu.hyb");
}

int gpu_hyb_run(struct gpu_launch *l, spmv_error *err)
{
    return l->m->dtype == SPMV_FLOAT64 ? launch_hyb<double>(l, err) : launch_hyb<float>(l, err);
}
