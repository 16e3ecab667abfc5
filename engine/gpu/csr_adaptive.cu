/* csr_adaptive.cu — gpu.csr.adaptive: CSR-Stream / CSR-Vector / CSR-VectorL
 * by row block (after Greathouse and Daga, "Efficient sparse matrix-vector
 * multiplication on GPUs using the CSR storage format", SC14, as report 002
 * listings 4-5 give it).
 *
 * The rows are cut into row blocks, one thread block each. With W =
 * nnz_per_wg, `row_blocks` 1 (the default) is the study's form:
 *   blocks   rows are gathered into a block while their non-zeros together
 *            fit W (the local-memory size) and the block holds at most W
 *            rows; a row that does not fit starts the next block, and a row
 *            longer than W gets a block by itself. The rule is a greedy walk
 *            over the row pointers, so it runs on the host, once per matrix
 *            and W (the row pointers are copied down for it).
 *   Stream   several rows: the block stages their products val*x in shared
 *            memory with coalesced loads; then t = the power of two at or
 *            below block_size / rows threads share each row, each summing a
 *            stride of it from shared memory, and the t partial sums are
 *            reduced as a tree in shared memory (listing 5); with t = 1 each
 *            thread sums whole rows.
 *   Vector   one row of at most 64 entries: the first warp, shuffle sum.
 *   VectorL  one longer row: the whole block reduces it (warp shuffles,
 *            then one warp over the warps' sums); a row past 4W is cut into
 *            chunks of 4W, one block each, partial sums added into y with
 *            atomics (so y is zeroed first in every run that has one).
 * `row_blocks` 2 keeps the project's earlier form, built on the device in
 * parallel: a row starts a block when it is the first row, a multiple of
 * 1024 (bounding rows per block), a long row (over W) or the one after a
 * long row, or when its first non-zero falls in another W-sized bin of the
 * non-zero index than the previous row's, so a Stream block holds fewer
 * than 2W non-zeros, each of whose rows one thread sums; a single row of up
 * to 4W is one block's (as VectorL above), a longer one chunked likewise.
 * A Stream block whose products exceed the staging area (STREAM_CAP
 * values; W above it) runs a warp per row from global memory instead.
 */
#include <stdlib.h>
#include <string.h>

#include <cub/cub.cuh>

#include "gpu.cuh"

#define ROWS_PER_BLOCK_MAX 1024
#define STREAM_CAP 4096 /* shared elements for Stream staging */
#define VECTOR_MAX 64   /* the study's CSR-Vector: a single row of at most this many entries */

/* 1 where a row block starts (flag[rows] = 0 so the scan gives the count). */
__global__ void adaptive_flags(int32_t rows, int32_t w, const int32_t *__restrict__ rp, int32_t *__restrict__ flag)
{
    int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (r > rows)
        return;
    if (r == rows) {
        flag[r] = 0;
        return;
    }
    bool start = r == 0 || r % ROWS_PER_BLOCK_MAX == 0;
    if (!start) {
        int32_t a = rp[r - 1], b = rp[r], c = rp[r + 1];
        start = c - b > w || b - a > w || a / w != b / w;
    }
    flag[r] = start;
}

__global__ void adaptive_scatter(int32_t rows, const int32_t *__restrict__ flag, const int32_t *__restrict__ pos,
                                 int32_t *__restrict__ starts)
{
    int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (r < rows && flag[r])
        starts[pos[r]] = (int32_t)r;
}

/* Chunks per row block: 1, or ceil(len / 4W) for a single long row. */
__global__ void adaptive_chunks(int32_t nrb, int32_t rows, int32_t w, const int32_t *__restrict__ starts,
                                const int32_t *__restrict__ rp, int32_t *__restrict__ cnt)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i > nrb)
        return;
    if (i == nrb) {
        cnt[i] = 0;
        return;
    }
    int32_t b = starts[i], e = i + 1 < nrb ? starts[i + 1] : rows;
    int64_t n = (int64_t)rp[e] - rp[b], ch = 4 * (int64_t)w;
    cnt[i] = e - b == 1 && n > ch ? (int32_t)((n + ch - 1) / ch) : 1;
}

__global__ void adaptive_fill(int32_t nrb, int32_t rows, int32_t w, const int32_t *__restrict__ starts,
                              const int32_t *__restrict__ rp, const int32_t *__restrict__ off,
                              gpu_row_block *__restrict__ blocks)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= nrb)
        return;
    int32_t b = starts[i], e = i + 1 < nrb ? starts[i + 1] : rows;
    int32_t n = off[i + 1] - off[i];
    int64_t ch = 4 * (int64_t)w;
    for (int32_t c = 0; c < n; c++) {
        gpu_row_block blk;
        blk.row_begin = b;
        blk.row_end = e;
        if (n == 1) {
            blk.nz_begin = rp[b];
            blk.nz_end = rp[e];
        } else {
            int64_t z0 = rp[b] + c * ch, z1 = z0 + ch;
            blk.nz_begin = (int32_t)z0;
            blk.nz_end = (int32_t)(z1 < rp[e] ? z1 : rp[e]);
        }
        blocks[off[i] + c] = blk;
    }
}

/* A warp per row straight from global memory: a Stream block whose
 * products do not fit the staging area. */
template <typename T>
__device__ __forceinline__ void adaptive_rows_by_warp(const gpu_row_block &b, const int32_t *__restrict__ rp,
                                                      const int32_t *__restrict__ col, const T *__restrict__ val,
                                                      const T *__restrict__ x, T *__restrict__ y)
{
    int lane = threadIdx.x % GPU_WARP;
    for (int32_t r = b.row_begin + threadIdx.x / GPU_WARP; r < b.row_end; r += blockDim.x / GPU_WARP) {
        T s = 0;
        for (int32_t j = rp[r] + lane; j < rp[r + 1]; j += GPU_WARP)
            s += __ldg(val + j) * __ldg(x + __ldg(col + j));
        s = gpu_group_sum(s, GPU_WARP);
        if (lane == 0)
            y[r] = s;
    }
}

template <typename T>
__device__ __forceinline__ void adaptive_vector(const gpu_row_block &b, const int32_t *__restrict__ rp,
                                                const int32_t *__restrict__ col, const T *__restrict__ val,
                                                const T *__restrict__ x, T *__restrict__ y, T *buf)
{
    T s = 0;
    for (int32_t j = b.nz_begin + threadIdx.x; j < b.nz_end; j += blockDim.x)
        s += __ldg(val + j) * __ldg(x + __ldg(col + j));
    s = gpu_group_sum(s, GPU_WARP);
    int lane = threadIdx.x % GPU_WARP, warp = threadIdx.x / GPU_WARP;
    if (lane == 0)
        buf[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = lane < (int)(blockDim.x / GPU_WARP) ? buf[lane] : (T)0;
        s = gpu_group_sum(s, GPU_WARP);
        if (lane == 0) {
            int32_t r = b.row_begin;
            bool whole = b.nz_begin == rp[r] && b.nz_end == rp[r + 1];
            if (whole)
                y[r] = s;
            else
                atomicAdd(y + r, s); /* VectorL chunk; y was zeroed */
        }
    }
}

template <typename T>
__device__ __forceinline__ void adaptive_stream(const gpu_row_block &b, int32_t cap, const int32_t *__restrict__ rp,
                                                const int32_t *__restrict__ col, const T *__restrict__ val,
                                                const T *__restrict__ x, T *__restrict__ y, T *buf)
{
    int32_t n = b.nz_end - b.nz_begin;
    if (n <= cap) {
        for (int32_t k = threadIdx.x; k < n; k += blockDim.x) {
            int32_t j = b.nz_begin + k;
            buf[k] = __ldg(val + j) * __ldg(x + __ldg(col + j));
        }
        __syncthreads();
        for (int32_t r = b.row_begin + threadIdx.x; r < b.row_end; r += blockDim.x) {
            T s = 0;
            for (int32_t k = rp[r] - b.nz_begin; k < rp[r + 1] - b.nz_begin; k++)
                s += buf[k];
            y[r] = s;
        }
        return;
    }
    /* More than the staging area holds (nnz_per_wg above STREAM_CAP/2) */
    adaptive_rows_by_warp<T>(b, rp, col, val, x, y);
}

/* The study's CSR-Stream (report 002 listing 5). buf holds at least
 * max(cap, blockDim.x) values: the products first, then one partial sum
 * per thread for the tree. Every branch below is block-uniform, so every
 * thread meets every __syncthreads. */
template <typename T>
__device__ __forceinline__ void adaptive_stream_study(const gpu_row_block &b, int32_t cap,
                                                      const int32_t *__restrict__ rp, const int32_t *__restrict__ col,
                                                      const T *__restrict__ val, const T *__restrict__ x,
                                                      T *__restrict__ y, T *buf)
{
    int32_t n = b.nz_end - b.nz_begin, nrows = b.row_end - b.row_begin;
    if (n > cap) {
        adaptive_rows_by_warp<T>(b, rp, col, val, x, y);
        return;
    }
    for (int32_t k = threadIdx.x; k < n; k += blockDim.x) {
        int32_t j = b.nz_begin + k;
        buf[k] = __ldg(val + j) * __ldg(x + __ldg(col + j));
    }
    __syncthreads();
    unsigned per = blockDim.x / (unsigned)nrows;
    int t = per ? 1 << (31 - __clz((int)per)) : 1; /* threads per row: a power of two, t * nrows <= blockDim.x */
    if (t == 1) {
        for (int32_t r = b.row_begin + threadIdx.x; r < b.row_end; r += blockDim.x) {
            T s = 0;
            for (int32_t k = rp[r] - b.nz_begin; k < rp[r + 1] - b.nz_begin; k++)
                s += buf[k];
            y[r] = s;
        }
        return;
    }
    /* the groups of t threads of the rows: t * nrows <= blockDim.x, so a
     * live group's buf[i + j] stays below blockDim.x (t need not divide it) */
    int i = threadIdx.x, lane = i % t;
    int32_t r = b.row_begin + i / t;
    bool live = r < b.row_end;
    T s = 0;
    if (live)
        for (int32_t k = rp[r] - b.nz_begin + lane; k < rp[r + 1] - b.nz_begin; k += t)
            s += buf[k];
    __syncthreads(); /* every product read before buf is reused for the sums */
    buf[i] = s;
    for (int j = t / 2; j > 0; j /= 2) {
        __syncthreads();
        if (live && lane < j)
            s += buf[i + j];
        __syncthreads();
        if (live && lane < j)
            buf[i] = s;
    }
    if (live && lane == 0)
        y[r] = s;
}

/* The study's CSR-Vector: one row of at most VECTOR_MAX entries, the first
 * warp alone. */
template <typename T>
__device__ __forceinline__ void adaptive_vector_warp(const gpu_row_block &b, const int32_t *__restrict__ col,
                                                     const T *__restrict__ val, const T *__restrict__ x,
                                                     T *__restrict__ y)
{
    if (threadIdx.x >= GPU_WARP)
        return;
    T s = 0;
    for (int32_t j = b.nz_begin + threadIdx.x; j < b.nz_end; j += GPU_WARP)
        s += __ldg(val + j) * __ldg(x + __ldg(col + j));
    s = gpu_group_sum(s, GPU_WARP);
    if (threadIdx.x == 0)
        y[b.row_begin] = s;
}

/* STUDY: row_blocks 1 (Stream with several threads per row, Vector for a
 * short single row); else the earlier form. */
template <typename T, bool STUDY>
__global__ void __launch_bounds__(1024)
    csr_adaptive_kernel(const gpu_row_block *__restrict__ blocks, int32_t cap, const int32_t *__restrict__ rp,
                        const int32_t *__restrict__ col, const T *__restrict__ val, const T *__restrict__ x,
                        T *__restrict__ y)
{
    extern __shared__ __align__(16) unsigned char adaptive_smem[];
    T *buf = reinterpret_cast<T *>(adaptive_smem);
    gpu_row_block b = blocks[blockIdx.x];
    if (b.row_end - b.row_begin == 1) { /* block-uniform branches */
        if (STUDY && b.nz_end - b.nz_begin <= VECTOR_MAX && b.nz_begin == rp[b.row_begin] &&
            b.nz_end == rp[b.row_end])
            adaptive_vector_warp<T>(b, col, val, x, y);
        else
            adaptive_vector<T>(b, rp, col, val, x, y, buf);
    } else if (STUDY) {
        adaptive_stream_study<T>(b, cap, rp, col, val, x, y, buf);
    } else {
        adaptive_stream<T>(b, cap, rp, col, val, x, y, buf);
    }
}

/* ------------------------------------------------------------ row blocks */

void gpu_adaptive_free(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m)
{
    gpu_release_ptr(ctx, m, &m->adaptive.blocks);
    memset(&m->adaptive, 0, sizeof m->adaptive);
}

/* What a failed CUB step of the row-block build is called. */
#define ADAPTIVE_SCAN "gpu.csr.adaptive: scan"

static int build_row_blocks(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, int32_t w, spmv_error *err)
{
    int32_t *flag = NULL, *pos = NULL, *starts = NULL, *cnt = NULL, *off = NULL;
    int32_t nrb = 0, nblocks = 0, maxc = 0, *d_max = NULL;
    int64_t n1 = (int64_t)m->rows + 1;
    cudaError_t e;
    int st;
    if ((st = gpu_alloc(ctx, m, (void **)&flag, n1 * 4, "row-block flags", err)) ||
        (st = gpu_alloc(ctx, m, (void **)&pos, n1 * 4, "row-block positions", err)))
        goto done;
    adaptive_flags<<<gpu_grid(n1, 256), 256, 0, ctx->stream>>>(m->rows, w, m->row_ptr, flag);
    if ((st = gpu_check_launch(err, "adaptive_flags")) ||
        (st = gpu_cub_run(ctx, m, ADAPTIVE_SCAN, err, [&](void *t, size_t &b) {
             return cub::DeviceScan::ExclusiveSum(t, b, flag, pos, (int)n1, ctx->stream);
         })))
        goto done;
    if ((e = cudaMemcpy(&nrb, pos + m->rows, 4, cudaMemcpyDeviceToHost)) != cudaSuccess) {
        st = gpu_cuda_error(e, err, "gpu.csr.adaptive: row-block count");
        goto done;
    }
    if ((st = gpu_alloc(ctx, m, (void **)&starts, (size_t)nrb * 4, "row-block starts", err)) ||
        (st = gpu_alloc(ctx, m, (void **)&cnt, ((size_t)nrb + 1) * 4, "row-block chunks", err)) ||
        (st = gpu_alloc(ctx, m, (void **)&off, ((size_t)nrb + 1) * 4, "row-block offsets", err)) ||
        (st = gpu_alloc(ctx, m, (void **)&d_max, 4, "row-block chunks", err)))
        goto done;
    adaptive_scatter<<<gpu_grid(m->rows, 256), 256, 0, ctx->stream>>>(m->rows, flag, pos, starts);
    adaptive_chunks<<<gpu_grid((int64_t)nrb + 1, 256), 256, 0, ctx->stream>>>(nrb, m->rows, w, starts, m->row_ptr,
                                                                              cnt);
    if ((st = gpu_check_launch(err, "adaptive_chunks")) ||
        (st = gpu_cub_run(ctx, m, ADAPTIVE_SCAN, err, [&](void *t, size_t &b) {
             return cub::DeviceScan::ExclusiveSum(t, b, cnt, off, nrb + 1, ctx->stream);
         })) ||
        (st = gpu_cub_run(ctx, m, ADAPTIVE_SCAN, err, [&](void *t, size_t &b) {
             return cub::DeviceReduce::Max(t, b, cnt, d_max, nrb + 1, ctx->stream);
         })))
        goto done;
    if ((e = cudaMemcpy(&nblocks, off + nrb, 4, cudaMemcpyDeviceToHost)) != cudaSuccess ||
        (e = cudaMemcpy(&maxc, d_max, 4, cudaMemcpyDeviceToHost)) != cudaSuccess) {
        st = gpu_cuda_error(e, err, "gpu.csr.adaptive: block count");
        goto done;
    }
    if ((st = gpu_alloc(ctx, m, (void **)&m->adaptive.blocks, (size_t)nblocks * sizeof(gpu_row_block),
                        "gpu.csr.adaptive row blocks", err)))
        goto done;
    adaptive_fill<<<gpu_grid(nrb, 256), 256, 0, ctx->stream>>>(nrb, m->rows, w, starts, m->row_ptr, off,
                                                               m->adaptive.blocks);
    if ((st = gpu_check_launch(err, "adaptive_fill")))
        goto done;
    if ((e = cudaStreamSynchronize(ctx->stream)) != cudaSuccess) {
        st = gpu_cuda_error(e, err, "gpu.csr.adaptive: building row blocks");
        goto done;
    }
    m->adaptive.nnz_per_wg = w;
    m->adaptive.rule = 2;
    m->adaptive.nblocks = nblocks;
    m->adaptive.has_chunks = maxc > 1;
done:
    gpu_release_each(ctx, m, {flag, pos, starts, cnt, off, d_max});
    if (st)
        gpu_adaptive_free(ctx, m);
    return st;
}

/* The study's row blocks over the host copy rp of the row pointers: a
 * block gathers rows while their non-zeros fit w and it holds at most w
 * rows; a row over w is a block alone, cut into chunks of 4w past 4w.
 * Writes the blocks into out (NULL: counts them); returns the count. */
static int64_t study_row_blocks(const int32_t *rp, int32_t rows, int32_t w, gpu_row_block *out, bool *chunked)
{
    int64_t n = 0, ch = 4 * (int64_t)w;
    for (int32_t begin = 0; begin < rows;) {
        int32_t end = begin + 1;
        if ((int64_t)rp[end] - rp[begin] <= w)
            while (end < rows && end - begin < w && (int64_t)rp[end + 1] - rp[begin] <= w)
                end++;
        int64_t z0 = rp[begin], z1 = rp[end];
        if (end - begin == 1 && z1 - z0 > ch) {
            for (int64_t z = z0; z < z1; z += ch, n++)
                if (out)
                    out[n] = {begin, end, (int32_t)z, (int32_t)(z + ch < z1 ? z + ch : z1)};
            *chunked = true;
        } else {
            if (out)
                out[n] = {begin, end, (int32_t)z0, (int32_t)z1};
            n++;
        }
        begin = end;
    }
    return n;
}

static int build_row_blocks_study(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, int32_t w, spmv_error *err)
{
    int32_t *rp = (int32_t *)malloc(((size_t)m->rows + 1) * 4);
    gpu_row_block *blocks = NULL;
    bool chunked = false;
    int64_t n = 0;
    cudaError_t e;
    int st;
    if (!rp)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "gpu.csr.adaptive: no host memory for %d row pointers",
                              m->rows + 1);
    if ((st = gpu_copy_to_host(ctx, rp, m->row_ptr, ((size_t)m->rows + 1) * 4, "gpu.csr.adaptive: row pointers",
                               err)))
        goto done;
    n = study_row_blocks(rp, m->rows, w, NULL, &chunked);
    if (n > INT32_MAX) {
        st = spmv_error_set(err, SPMV_ERR_LIMIT, 0, "gpu.csr.adaptive: %lld row blocks exceed a grid", (long long)n);
        goto done;
    }
    if (!(blocks = (gpu_row_block *)malloc((size_t)n * sizeof *blocks))) {
        st = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "gpu.csr.adaptive: no host memory for %lld row blocks",
                            (long long)n);
        goto done;
    }
    study_row_blocks(rp, m->rows, w, blocks, &chunked);
    if ((st = gpu_alloc(ctx, m, (void **)&m->adaptive.blocks, (size_t)n * sizeof(gpu_row_block),
                        "gpu.csr.adaptive row blocks", err)))
        goto done;
    if ((e = cudaMemcpyAsync(m->adaptive.blocks, blocks, (size_t)n * sizeof *blocks, cudaMemcpyHostToDevice,
                             ctx->stream)) != cudaSuccess ||
        (e = cudaStreamSynchronize(ctx->stream)) != cudaSuccess) {
        st = gpu_cuda_error(e, err, "gpu.csr.adaptive: copying row blocks");
        goto done;
    }
    m->adaptive.nnz_per_wg = w;
    m->adaptive.rule = 1;
    m->adaptive.nblocks = (int32_t)n;
    m->adaptive.has_chunks = chunked;
done:
    free(rp);
    free(blocks);
    if (st)
        gpu_adaptive_free(ctx, m);
    return st;
}

int gpu_csr_adaptive_prepare(struct gpu_launch *l, spmv_error *err)
{
    spmv_gpu_matrix *m = l->m;
    int32_t w = l->p.v[SPMV_PARAM_NNZ_PER_WG], rule = l->p.v[SPMV_PARAM_ROW_BLOCKS] == 2 ? 2 : 1;
    if (w <= 0)
        w = 2048;
    if (m->adaptive.nnz_per_wg == w && m->adaptive.rule == rule)
        return SPMV_OK;
    cudaError_t e = cudaStreamSynchronize(l->ctx->stream);
    if (e != cudaSuccess)
        return gpu_cuda_error(e, err, "gpu.csr.adaptive");
    gpu_adaptive_free(l->ctx, m);
    if (m->rows == 0)
        return SPMV_OK;
    return rule == 1 ? build_row_blocks_study(l->ctx, m, w, err) : build_row_blocks(l->ctx, m, w, err);
}

template <typename T> static int launch_adaptive(struct gpu_launch *l, spmv_error *err)
{
    spmv_gpu_matrix *m = l->m;
    bool study = m->adaptive.rule == 1;
    /* staging: the study's Stream blocks hold at most W products, the
     * earlier form's fewer than 2W; the study's tree needs a value per thread */
    int32_t cap = (study ? 1 : 2) * m->adaptive.nnz_per_wg;
    if (cap > STREAM_CAP)
        cap = STREAM_CAP;
    if (m->adaptive.nblocks == 0)
        return SPMV_OK;
    if (m->adaptive.has_chunks) {
        cudaError_t e = cudaMemsetAsync(l->y, 0, (size_t)m->rows * sizeof(T), l->ctx->stream);
        if (e != cudaSuccess)
            return gpu_cuda_error(e, err, "gpu.csr.adaptive: zeroing y");
    }
    int32_t cells = cap > GPU_WARP ? cap : GPU_WARP;
    if (study && cells < l->block)
        cells = l->block;
    size_t smem = (size_t)cells * sizeof(T);
    if (study)
        csr_adaptive_kernel<T, true><<<(unsigned)m->adaptive.nblocks, l->block, smem, l->ctx->stream>>>(
            m->adaptive.blocks, cap, m->row_ptr, m->col, (const T *)m->val, (const T *)l->x, (T *)l->y);
    else
        csr_adaptive_kernel<T, false><<<(unsigned)m->adaptive.nblocks, l->block, smem, l->ctx->stream>>>(
            m->adaptive.blocks, cap, m->row_ptr, m->col, (const T *)m->val, (const T *)l->x, (T *)l->y);
    return gpu_check_launch(err, "gpu.csr.adaptive");
}

int gpu_csr_adaptive(struct gpu_launch *l, spmv_error *err)
{
    return l->m->dtype == SPMV_FLOAT64 ? launch_adaptive<double>(l, err) : launch_adaptive<float>(l, err);
}
