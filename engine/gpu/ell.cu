/* ell.cu — the padded-format kernels: gpu.ell, gpu.hll and gpu.hyb.
 *
 * ELL and HLL are column-major, so thread i reading slot k*stride + i has
 * its warp's loads coalesced; each thread walks its row until the first
 * padding slot (column -1: padding only ever follows a row's entries).
 * HLL is ELL per slice of hack_size rows, each slice as wide as its longest
 * row, which bounds the padding that one long row costs to its own slice.
 * gpu.hyb runs the ELL kernel over HYB's ELL part (writing every y[i]) and
 * then adds the COO remainder with one atomic per entry; the two launches
 * are ordered on the stream, so no zeroing is needed.
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

template <typename T>
__global__ void __launch_bounds__(1024)
    hll_kernel(int32_t rows, int32_t hack, const int64_t *__restrict__ off, const int32_t *__restrict__ width,
               const int32_t *__restrict__ col, const T *__restrict__ val, const T *__restrict__ x,
               T *__restrict__ y)
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
        s += __ldg(val + slot) * __ldg(x + c);
    }
    y[i] = s;
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
    hll_kernel<T><<<gpu_grid(m->rows, l->block), l->block, 0, l->ctx->stream>>>(
        m->rows, h->hack_size, h->slice_off, h->slice_width, h->col, (const T *)h->val, (const T *)l->x, (T *)l->y);
}

int gpu_hll_run(struct gpu_launch *l, spmv_error *err)
{
    if (l->m->dtype == SPMV_FLOAT64)
        launch_hll<double>(l);
    else
        launch_hll<float>(l);
    return gpu_check_launch(err, "gpu.hll");
}

template <typename T> static int launch_hyb(struct gpu_launch *l, spmv_error *err)
{
    spmv_gpu_matrix *m = l->m;
    const struct gpu_hyb *h = &m->hyb;
    launch_ell<T>(l, &h->ell);
    int st = gpu_check_launch(err, "gpu.hyb (ELL part)");
    if (st || h->coo_nnz == 0)
        return st;
    return gpu_coo_atomic_add(l, h->coo_nnz, h->row, h->col, h->val, err);
}

int gpu_hyb_run(struct gpu_launch *l, spmv_error *err)
{
    return l->m->dtype == SPMV_FLOAT64 ? launch_hyb<double>(l, err) : launch_hyb<float>(l, err);
}
