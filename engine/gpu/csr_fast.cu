/* csr_fast.cu — gpu.csr.light: the CSR kernel tuned for the H200 (issue 5).
 *
 * Made from what the benchmark (docs/benchmarks/gpu.md) says costs time:
 *   - rows of ordinary length are done by groups of `threads` lanes (1..32,
 *     a power of two; 0 picks it from the mean length of those rows), one
 *     row per group, so short rows do not leave 28 of 32 lanes idle as a
 *     warp per row does, and lanes of a group read neighbouring entries;
 *   - the matrix arrays (col, val, row_ptr) are read with streaming loads
 *     (ld.global.cs, evict-first), x with read-only loads: the matrix is
 *     read once per product and should not push x out of the 50 MB L2,
 *     which a random-column matrix re-reads all the time;
 *   - rows longer than FAST_LONG entries (the power-law tail, a dense row)
 *     are cut into chunks of FAST_CHUNK entries, one block per chunk
 *     (a second launch), each adding its block-reduced sum into y with one
 *     atomic; the first launch writes 0 to those rows, and the stream
 *     orders the two launches. So no row costs more than one chunk's time.
 * The chunk list is built once per matrix on first use (prepare: row_ptr
 * copied to the host, the long rows cut) and kept in m->fast; its device
 * array is a tracked allocation, freed with the matrix.
 * Every y[i] is written by the first launch (long rows: 0, then the
 * chunks' sums), so y needs no zeroing pass.
 */
#include <stdlib.h>
#include <string.h>

#include "gpu.cuh"

#define FAST_LONG 8192   /* rows longer than this are chunked */
#define FAST_CHUNK 4096  /* non-zeros per chunk block */
#define FAST_CHUNK_BLOCK 256
#define FAST_BINS 6          /* gpu.csr.binned: 1, 2, 4, 8, 16, 32 lanes per row */

/* Streaming (evict-first) loads of the arrays read once per product. */
template <typename T> __device__ __forceinline__ T ld_stream(const T *p) { return __ldcs(p); }

template <typename T, int G>
__global__ void __launch_bounds__(1024)
    csr_light_kernel(int32_t rows, const int32_t *__restrict__ list, int32_t long_len, const int32_t *__restrict__ rp,
                     const int32_t *__restrict__ col, const T *__restrict__ val, const T *__restrict__ x,
                     T *__restrict__ y)
{
    int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int64_t i = t / G;
    int lane = threadIdx.x % G;
    int64_t r = i < rows && list ? __ldg(list + i) : i;
    T s = 0;
    if (i < rows) {
        int32_t begin = ld_stream(rp + r), end = ld_stream(rp + r + 1);
        if (end - begin <= long_len) {
            int32_t j = begin + lane;
            /* two entries in flight per lane before the first use */
            for (; j + G < end; j += 2 * G) {
                int32_t c0 = ld_stream(col + j), c1 = ld_stream(col + j + G);
                T v0 = ld_stream(val + j), v1 = ld_stream(val + j + G);
                s += v0 * __ldg(x + c0);
                s += v1 * __ldg(x + c1);
            }
            if (j < end)
                s += ld_stream(val + j) * __ldg(x + ld_stream(col + j));
        }
    }
    if (G > 1)
        s = gpu_group_sum(s, G);
    if (i < rows && lane == 0)
        y[r] = s;
}

/* One block per chunk of a long row: block-reduced partial sum, one atomic. */
template <typename T>
__global__ void __launch_bounds__(FAST_CHUNK_BLOCK)
    csr_light_chunks(const struct gpu_fast_chunk *__restrict__ chunks, const int32_t *__restrict__ col,
                     const T *__restrict__ val, const T *__restrict__ x, T *__restrict__ y)
{
    __shared__ T part[FAST_CHUNK_BLOCK / GPU_WARP];
    struct gpu_fast_chunk c = chunks[blockIdx.x];
    T s = 0;
    for (int32_t j = c.begin + threadIdx.x; j < c.end; j += FAST_CHUNK_BLOCK)
        s += ld_stream(val + j) * __ldg(x + ld_stream(col + j));
    s = gpu_group_sum(s, GPU_WARP);
    if (threadIdx.x % GPU_WARP == 0)
        part[threadIdx.x / GPU_WARP] = s;
    __syncthreads();
    if (threadIdx.x < GPU_WARP) {
        s = threadIdx.x < FAST_CHUNK_BLOCK / GPU_WARP ? part[threadIdx.x] : (T)0;
        s = gpu_group_sum(s, GPU_WARP);
        if (threadIdx.x == 0)
            atomicAdd(y + c.row, s);
    }
}

/* ------------------------------------------------------------- prepare */

/* Threads per row from the mean length of the rows not chunked: about two
 * entries per lane, a power of two in 1..32. */
static int32_t light_threads(int64_t short_nnz, int64_t short_rows)
{
    double mean = short_rows > 0 ? (double)short_nnz / (double)short_rows : 1.0;
    int32_t g = 1;
    while (g < 32 && 2.0 * g < mean)
        g *= 2;
    return g;
}

/* Counts (or, with out, fills) the chunks of the rows longer than FAST_LONG. */
static int64_t light_cut(const int32_t *rp, int32_t rows, struct gpu_fast_chunk *out, int64_t *short_nnz)
{
    int64_t n = 0, sn = 0;
    for (int32_t r = 0; r < rows; r++) {
        int32_t b = rp[r], e = rp[r + 1];
        if (e - b <= FAST_LONG) {
            sn += e - b;
            continue;
        }
        for (int32_t j = b; j < e; j += FAST_CHUNK, n++)
            if (out) {
                out[n].row = r;
                out[n].begin = j;
                out[n].end = e - j > FAST_CHUNK ? j + FAST_CHUNK : e;
            }
    }
    if (short_nnz)
        *short_nnz = sn;
    return n;
}

static int light_build(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, spmv_error *err)
{
    int32_t *rp = NULL;
    struct gpu_fast_chunk *chunks = NULL;
    int64_t n, short_nnz = 0, short_rows = 0;
    int st = SPMV_OK;
    cudaError_t e;
    if (!(rp = (int32_t *)malloc(((size_t)m->rows + 1) * sizeof *rp)))
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "gpu.csr.light: row_ptr copy of %d rows", m->rows);
    if ((e = cudaMemcpyAsync(rp, m->row_ptr, ((size_t)m->rows + 1) * 4, cudaMemcpyDeviceToHost, ctx->stream)) !=
            cudaSuccess ||
        (e = cudaStreamSynchronize(ctx->stream)) != cudaSuccess) {
        st = gpu_cuda_error(e, err, "gpu.csr.light: reading row_ptr");
        goto done;
    }
    n = light_cut(rp, m->rows, NULL, &short_nnz);
    for (int32_t r = 0; r < m->rows; r++)
        short_rows += rp[r + 1] - rp[r] <= FAST_LONG;
    if (n > INT32_MAX / 2) {
        st = spmv_error_set(err, SPMV_ERR_LIMIT, 0, "gpu.csr.light: %lld chunks", (long long)n);
        goto done;
    }
    if (n > 0) {
        if (!(chunks = (struct gpu_fast_chunk *)malloc((size_t)n * sizeof *chunks))) {
            st = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "gpu.csr.light: %lld chunks", (long long)n);
            goto done;
        }
        light_cut(rp, m->rows, chunks, NULL);
        if ((st = gpu_alloc(ctx, m, (void **)&m->fast.chunks, (size_t)n * sizeof *chunks, "gpu.csr.light chunks",
                            err)))
            goto done;
        if ((e = cudaMemcpy(m->fast.chunks, chunks, (size_t)n * sizeof *chunks, cudaMemcpyHostToDevice)) !=
            cudaSuccess) {
            st = gpu_cuda_error(e, err, "gpu.csr.light: chunk list");
            gpu_release_ptr(ctx, m, &m->fast.chunks);
            goto done;
        }
    }
    m->fast.nchunks = (int32_t)n;
    m->fast.threads = light_threads(short_nnz, short_rows);
    m->fast.built = true;
done:
    free(rp);
    free(chunks);
    return st;
}

int gpu_csr_light_prepare(struct gpu_launch *l, spmv_error *err)
{
    if (l->m->fast.built || l->m->rows == 0)
        return SPMV_OK;
    return light_build(l->ctx, l->m, err);
}

/* ------------------------------------------------------- binned rows */

/* Bin of a row of `len` entries: the lanes per row are 1 << bin, about
 * two entries or more per lane (long rows go to the last bin, which skips
 * them: the chunks do them). */
static int bin_of(int32_t len)
{
    int b = 0;
    while (b < FAST_BINS - 1 && len > 2 * (1 << b) + 1)
        b++;
    return b;
}

static int binned_build(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, spmv_error *err)
{
    int32_t *rp = NULL, *list = NULL, off[FAST_BINS + 1] = {0}, at[FAST_BINS];
    int st = SPMV_OK;
    cudaError_t e;
    if ((st = light_build(ctx, m, err)))
        return st;
    if (!(rp = (int32_t *)malloc(((size_t)m->rows + 1) * sizeof *rp)) ||
        !(list = (int32_t *)malloc(((size_t)m->rows + 1) * sizeof *list))) {
        st = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "gpu.csr.binned: row lists of %d rows", m->rows);
        goto done;
    }
    if ((e = cudaMemcpy(rp, m->row_ptr, ((size_t)m->rows + 1) * 4, cudaMemcpyDeviceToHost)) != cudaSuccess) {
        st = gpu_cuda_error(e, err, "gpu.csr.binned: reading row_ptr");
        goto done;
    }
    for (int32_t r = 0; r < m->rows; r++) /* counting sort by bin, rows in order within a bin */
        off[bin_of(rp[r + 1] - rp[r]) + 1]++;
    for (int b = 0; b < FAST_BINS; b++) {
        off[b + 1] += off[b];
        at[b] = off[b];
    }
    for (int32_t r = 0; r < m->rows; r++)
        list[at[bin_of(rp[r + 1] - rp[r])]++] = r;
    memcpy(m->fast.bin_off, off, sizeof off);
    for (int b = 0; b < FAST_BINS; b++)
        if (off[b + 1] - off[b] == m->rows) /* one bin holds every row, in order: no list */
            goto built;
    if ((st = gpu_alloc(ctx, m, (void **)&m->fast.rows, (size_t)m->rows * 4, "gpu.csr.binned row list", err)))
        goto done;
    if ((e = cudaMemcpy(m->fast.rows, list, (size_t)m->rows * 4, cudaMemcpyHostToDevice)) != cudaSuccess) {
        st = gpu_cuda_error(e, err, "gpu.csr.binned: row list");
        gpu_release_ptr(ctx, m, &m->fast.rows);
        goto done;
    }
built:
    m->fast.binned = true;
done:
    free(rp);
    free(list);
    return st;
}

int gpu_csr_binned_prepare(struct gpu_launch *l, spmv_error *err)
{
    if (l->m->fast.binned || l->m->rows == 0)
        return SPMV_OK;
    if (l->m->fast.built) { /* light's cache alone: rebuild both */
        gpu_release_ptr(l->ctx, l->m, &l->m->fast.chunks);
        memset(&l->m->fast, 0, sizeof l->m->fast);
    }
    return binned_build(l->ctx, l->m, err);
}

template <typename T, int G>
static int binned_bin(struct gpu_launch *l, int32_t first, int32_t n, int32_t long_len, spmv_error *err)
{
    spmv_gpu_matrix *m = l->m;
    const int32_t *list = m->fast.rows ? m->fast.rows + first : NULL;
    if (n == 0)
        return SPMV_OK;
    csr_light_kernel<T, G><<<gpu_grid((int64_t)n * G, l->block), l->block, 0, l->ctx->stream>>>(
        n, list, long_len, m->row_ptr, m->col, (const T *)m->val, (const T *)l->x, (T *)l->y);
    return gpu_check_launch(err, "gpu.csr.binned");
}

template <typename T> static int binned_launch(struct gpu_launch *l, spmv_error *err)
{
    spmv_gpu_matrix *m = l->m;
    const int32_t *o = m->fast.bin_off;
    int32_t long_len = m->fast.nchunks > 0 ? FAST_LONG : INT32_MAX;
    int st;
    if (m->rows == 0)
        return SPMV_OK;
    if ((st = binned_bin<T, 1>(l, o[0], o[1] - o[0], long_len, err)) ||
        (st = binned_bin<T, 2>(l, o[1], o[2] - o[1], long_len, err)) ||
        (st = binned_bin<T, 4>(l, o[2], o[3] - o[2], long_len, err)) ||
        (st = binned_bin<T, 8>(l, o[3], o[4] - o[3], long_len, err)) ||
        (st = binned_bin<T, 16>(l, o[4], o[5] - o[4], long_len, err)) ||
        (st = binned_bin<T, 32>(l, o[5], o[6] - o[5], long_len, err)))
        return st;
    if (m->fast.nchunks == 0)
        return SPMV_OK;
    csr_light_chunks<T><<<(unsigned)m->fast.nchunks, FAST_CHUNK_BLOCK, 0, l->ctx->stream>>>(
        m->fast.chunks, m->col, (const T *)m->val, (const T *)l->x, (T *)l->y);
    return gpu_check_launch(err, "gpu.csr.binned chunks");
}

int gpu_csr_binned(struct gpu_launch *l, spmv_error *err)
{
    return l->m->dtype == SPMV_FLOAT64 ? binned_launch<double>(l, err) : binned_launch<float>(l, err);
}

/* ------------------------------------------------------------- launch */

template <typename T, int G> static int light_main(struct gpu_launch *l, spmv_error *err)
{
    spmv_gpu_matrix *m = l->m;
    int32_t long_len = m->fast.nchunks > 0 ? FAST_LONG : INT32_MAX;
    csr_light_kernel<T, G><<<gpu_grid((int64_t)m->rows * G, l->block), l->block, 0, l->ctx->stream>>>(
        m->rows, (const int32_t *)NULL, long_len, m->row_ptr, m->col, (const T *)m->val, (const T *)l->x, (T *)l->y);
    return gpu_check_launch(err, "gpu.csr.light");
}

template <typename T> static int light_launch(struct gpu_launch *l, spmv_error *err)
{
    spmv_gpu_matrix *m = l->m;
    int32_t g = l->p.v[SPMV_PARAM_THREADS] ? l->p.v[SPMV_PARAM_THREADS] : m->fast.threads;
    int st;
    if (m->rows == 0)
        return SPMV_OK;
    switch (g) {
    case 1: st = light_main<T, 1>(l, err); break;
    case 2: st = light_main<T, 2>(l, err); break;
    case 4: st = light_main<T, 4>(l, err); break;
    case 8: st = light_main<T, 8>(l, err); break;
    case 16: st = light_main<T, 16>(l, err); break;
    case 32: st = light_main<T, 32>(l, err); break;
    default: return spmv_error_set(err, SPMV_ERR_INVALID, 0, "gpu.csr.light: threads %d is not 1..32, a power of two", g);
    }
    if (st || m->fast.nchunks == 0)
        return st;
    csr_light_chunks<T><<<(unsigned)m->fast.nchunks, FAST_CHUNK_BLOCK, 0, l->ctx->stream>>>(
        m->fast.chunks, m->col, (const T *)m->val, (const T *)l->x, (T *)l->y);
    return gpu_check_launch(err, "gpu.csr.light chunks");
}

int gpu_csr_light(struct gpu_launch *l, spmv_error *err)
{
    return l->m->dtype == SPMV_FLOAT64 ? light_launch<double>(l, err) : light_launch<float>(l, err);
}
