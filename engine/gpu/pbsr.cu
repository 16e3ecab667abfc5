/* pbsr.cu — the packed block CSR on the device: PBSR built on the host and
 * uploaded, and its kernel gpu.pbsr.
 *
 * The layout is engine/spmv.h's spmv_pbsr. The device does not build it:
 * detecting complete b x b blocks and packing their columns and values is
 * one pass over the CSR (engine/pbsr.c), and a matrix of blocks is a
 * finite-element matrix uploaded once and multiplied many times, so the
 * CSR is copied to the host, converted there under the context's padding
 * rule, and the arrays copied up as they are (the bytes a GPU test can
 * compare with the host's by downloading them). A matrix without blocks
 * answers SPMV_ERR_UNSUPPORTED with the host's reason, and the reason is
 * kept with the matrix (its pattern never changes: new values keep it), so
 * asking again costs no second copy of the CSR.
 *
 * gpu.pbsr: a group of `threads` lanes per block row (a power of two,
 * 1..32; 0: the one nearest half the mean blocks a block row), a lane per
 * block in turn. A lane reads its block's packed block column, the b
 * values of x the block multiplies (read once for its b rows), then the
 * b*b values: value (r, c) of block k sits at s*b*b + (r*b + c)*nb + k - s,
 * so for each (r, c) the group's lanes read consecutive entries — one
 * coalesced load per component. b sums a lane, reduced over the group by
 * shuffles; lane 0 writes the block row's b values of y. The kernel is a
 * template per b (2, 3, 4, 6), so the sums live in registers.
 */
#include <stdio.h>
#include <string.h>

#include "gpu.cuh"
#include "packed.cuh"

void gpu_free_pbsr(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m)
{
    struct gpu_pbsr *p = &m->pbsr;
    gpu_release_ptr(ctx, m, &p->block_ptr);
    gpu_release_ptr(ctx, m, &p->base);
    gpu_release_ptr(ctx, m, &p->idx);
    gpu_release_ptr(ctx, m, &p->wide_col);
    gpu_release_ptr(ctx, m, &p->v.table);
    gpu_release_ptr(ctx, m, &p->v.data);
    p->b = p->brows = p->idx_bytes = 0;
    p->nblocks = p->wide_nnz = 0;
    memset(&p->v, 0, sizeof p->v); /* `refused` stays: it is the pattern's */
}

size_t gpu_pbsr_bytes(const spmv_gpu_matrix *m)
{
    const struct gpu_pbsr *p = &m->pbsr;
    size_t vs = gpu_vsize(m), b;
    if (!p->b)
        return 0;
    b = ((size_t)p->brows + 1) * 4 + (size_t)p->nblocks * p->idx_bytes;
    if (p->idx_bytes < 4)
        b += (size_t)p->brows * 4 + (size_t)p->wide_nnz * 4;
    return b + (size_t)p->v.ntable * vs + (size_t)m->nnz * spmv_vcode_entry_bytes(p->v.mode, vs);
}

/* n host values of `size` bytes into a fresh tracked device array (none
 * for n 0: the kernel never reads it). */
static int upload(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, const void *src, int64_t n, size_t size, const char *what,
                  void **dst, spmv_error *err)
{
    size_t bytes = 0;
    int st;
    *dst = NULL;
    if ((st = gpu_array_bytes(n, size, &bytes, err, what)) || bytes == 0 ||
        (st = gpu_alloc(ctx, m, dst, bytes, what, err)))
        return st;
    cudaError_t e = cudaMemcpyAsync(*dst, src, bytes, cudaMemcpyHostToDevice, ctx->stream);
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, what);
}

static int upload_pbsr(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, const spmv_pbsr *h, spmv_error *err)
{
    struct gpu_pbsr *p = &m->pbsr;
    size_t vs = gpu_vsize(m);
    int st;
    if ((st = upload(ctx, m, h->block_ptr, (int64_t)h->brows + 1, 4, "PBSR block_ptr", (void **)&p->block_ptr, err)) ||
        (st = upload(ctx, m, h->idx, h->nblocks, (size_t)h->idx_bytes, "PBSR idx", &p->idx, err)) ||
        (h->base && (st = upload(ctx, m, h->base, h->brows, 4, "PBSR base", (void **)&p->base, err))) ||
        (h->wide_col && (st = upload(ctx, m, h->wide_col, h->wide_nnz, 4, "PBSR wide_col", (void **)&p->wide_col,
                                     err))) ||
        (st = upload(ctx, m, h->v.table, h->v.ntable, vs, "PBSR value table", &p->v.table, err)) ||
        (h->v.data && (st = upload(ctx, m, h->v.data, h->nnz, spmv_vcode_entry_bytes(h->v.mode, vs),
                                   "PBSR values", &p->v.data, err))))
        return st;
    cudaError_t e = cudaStreamSynchronize(ctx->stream); /* before the host arrays go */
    if (e != cudaSuccess)
        return gpu_cuda_error(e, err, "PBSR upload");
    p->b = h->b;
    p->brows = h->brows;
    p->nblocks = h->nblocks;
    p->idx_bytes = h->idx_bytes;
    p->wide_nnz = h->wide_nnz;
    p->v.mode = h->v.mode;
    p->v.ntable = h->v.ntable;
    return SPMV_OK;
}

int gpu_build_pbsr(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, spmv_error *err)
{
    struct gpu_pbsr *p = &m->pbsr;
    spmv_error mine;
    spmv_csr csr;
    spmv_pbsr h;
    int st;
    if (!err)
        err = &mine; /* the refusal's reason is kept whether the caller asks for it or not */
    if (p->refused[0])
        return spmv_error_set(err, SPMV_ERR_UNSUPPORTED, 0, "%s", p->refused);
    if ((st = gpu_download_csr(ctx, m, &csr, err)))
        return st;
    st = spmv_csr_to_pbsr(&csr, &ctx->limits, &h, err);
    spmv_csr_free(&csr);
    if (st == SPMV_ERR_UNSUPPORTED)
        snprintf(p->refused, sizeof p->refused, "%s", err->message);
    if (st)
        return st;
    st = upload_pbsr(ctx, m, &h, err);
    spmv_pbsr_free(&h);
    return st;
}

/* ---------------------------------------------------------------- kernel */

template <typename T, int VM, typename I, int B>
__global__ void __launch_bounds__(1024)
    pbsr_kernel(int32_t brows, int tpr, const int32_t *__restrict__ block_ptr, const int32_t *__restrict__ base,
                const I *__restrict__ idx, const int32_t *__restrict__ wide_col, const void *__restrict__ data,
                const T *__restrict__ table, int32_t ntable, const T *__restrict__ x, T *__restrict__ y)
{
    __shared__ T shared[VM == SPMV_VCODE_U8 ? 256 : 1];
    const T *tab = pk_table<T, VM>(table, ntable, shared);
    T c = VM == SPMV_VCODE_CONST ? __ldg(table) : (T)0;
    int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int64_t br = t / tpr;
    int lane = (int)(t % tpr);
    T sum[B];
#pragma unroll
    for (int r = 0; r < B; r++)
        sum[r] = 0;
    if (br < brows) {
        int32_t s = __ldg(block_ptr + br), e = __ldg(block_ptr + br + 1);
        int64_t nb = e - s, v0 = (int64_t)s * B * B;
        int32_t b0 = sizeof(I) == 4 ? 0 : __ldg(base + br);
        for (int32_t k = s + lane; k < e; k += tpr) {
            int64_t bc = sizeof(I) == 4 ? (int64_t)__ldcs(idx + k)
                         : b0 >= 0      ? (int64_t)b0 + __ldcs(idx + k)
                                        : (int64_t)__ldg(wide_col + (-1 - (int64_t)b0) + (k - s));
            T xv[B];
#pragma unroll
            for (int j = 0; j < B; j++)
                xv[j] = __ldg(x + bc * B + j);
            int64_t q = v0 + (k - s);
#pragma unroll
            for (int r = 0; r < B; r++)
#pragma unroll
                for (int j = 0; j < B; j++)
                    sum[r] += pk_value<T, VM>(data, tab, c, q + (int64_t)(r * B + j) * nb) * xv[j];
        }
    }
#pragma unroll
    for (int r = 0; r < B; r++)
        sum[r] = gpu_group_sum(sum[r], tpr);
    if (br < brows && lane == 0)
#pragma unroll
        for (int r = 0; r < B; r++)
            y[br * B + r] = sum[r];
}

/* Lanes per block row: `threads`, else the power of two nearest half the
 * mean blocks a block row, 1..32. */
static int pbsr_width(const struct gpu_launch *l)
{
    const struct gpu_pbsr *p = &l->m->pbsr;
    int t = l->p.v[SPMV_PARAM_THREADS];
    if (t >= 1 && t <= 32 && (t & (t - 1)) == 0)
        return t;
    double want = p->brows > 0 ? (double)p->nblocks / p->brows / 2 : 0;
    int w = 1;
    while (w < 32 && w * 1.41421356 < want)
        w *= 2;
    return w;
}

template <typename T, int VM> struct pbsr_launcher {
    template <typename I, int B> static void with(struct gpu_launch *l)
    {
        const struct gpu_pbsr *p = &l->m->pbsr;
        int tpr = pbsr_width(l);
        pbsr_kernel<T, VM, I, B><<<gpu_grid((int64_t)p->brows * tpr, l->block), l->block, 0, l->ctx->stream>>>(
            p->brows, tpr, p->block_ptr, p->base, (const I *)p->idx, p->wide_col, p->v.data, (const T *)p->v.table,
            p->v.ntable, (const T *)l->x, (T *)l->y);
    }
    template <typename I> static void with_b(struct gpu_launch *l)
    {
        switch (l->m->pbsr.b) {
        case 2: with<I, 2>(l); break;
        case 3: with<I, 3>(l); break;
        case 4: with<I, 4>(l); break;
        default: with<I, 6>(l); break;
        }
    }
    static void launch(struct gpu_launch *l)
    {
        switch (l->m->pbsr.idx_bytes) {
        case 1: with_b<uint8_t>(l); break;
        case 2: with_b<uint16_t>(l); break;
        default: with_b<int32_t>(l); break;
        }
    }
};

int gpu_pbsr_run(struct gpu_launch *l, spmv_error *err)
{
    return pk_run<pbsr_launcher>(l, l->m->pbsr.v.mode, "gpu.pbsr", err);
}
