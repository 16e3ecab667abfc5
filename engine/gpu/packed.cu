/* packed.cu — the packed formats on the device: PCSR and PSELL built from
 * the resident CSR, and their kernels gpu.pcsr and gpu.psell.
 *
 * SpMV moves bytes, so a matrix multiplied thousands of times repays being
 * compressed once. The layouts are engine/spmv.h's (spmv_pcsr, spmv_psell,
 * spmv_packed_values) and the arrays built here are the host's
 * (engine/packed.c) byte for byte, which test_gpu checks; the device only
 * differs in ownership: a PCSR whose values stay RAW reads the CSR's value
 * array instead of a copy, and one whose columns stay 4 bytes reads the
 * CSR's column array, so a PCSR never holds what the CSR already does.
 *
 * Value compression: the values' bit patterns are radix sorted and made
 * unique (CUB) to give the table; an entry's code is its index there,
 * found by binary search. Kernels keep a 1-byte code's table (at most 256
 * values, 2 KB) in shared memory; 2-byte codes read theirs through the
 * read-only cache; a constant matrix (pattern-only) reads no values.
 *
 * PCSR: one pass over the rows finds each row's column span and the
 * non-zeros of rows too wide for 1 and for 2 bytes (scans give the wide
 * rows' offsets); the width with the fewest bytes is kept and a second
 * pass fills base, deltas and wide columns. gpu.pcsr runs like
 * gpu.csr.vector: `threads` lanes per row (power of two, from the mean row
 * length when 0), shuffle reduction.
 *
 * PSELL: a warp per 32-row slice finds the slice width and the span of
 * each slot's columns (warp min/max), scans give slot and byte offsets,
 * the padding rule is checked with the exact bytes, then a warp per slice
 * fills. gpu.psell runs a warp per slice, a lane per row: per slot the
 * warp reads 32 deltas of 1 byte (one 32-byte sector), one broadcast base
 * and 32 codes, so a 5-point stencil in float64 moves about 2 bytes per
 * non-zero where CSR moves 12.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <cub/cub.cuh>

#include "gpu.cuh"
#include "packed.cuh"

#define PK_BLOCK 256
#define PK_C SPMV_PSELL_C

template <typename T> struct pk_bits;
template <> struct pk_bits<double> { typedef unsigned long long U; };
template <> struct pk_bits<float> { typedef unsigned int U; };

/* Index of `key` in the ascending table (it is there: the table is made of
 * the keys). */
template <typename U> __device__ __forceinline__ int32_t pk_code(U key, const U *__restrict__ table, int32_t n)
{
    int32_t lo = 0, hi = n;
    while (lo < hi) {
        int32_t mid = (lo + hi) >> 1;
        if (table[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Writes entry e's value (or code) in the format's value array. */
template <typename T>
__device__ __forceinline__ void pk_put(spmv_vcode mode, void *data, int64_t e, T v, const T *table, int32_t n)
{
    typedef typename pk_bits<T>::U U;
    if (mode == SPMV_VCODE_RAW) {
        ((T *)data)[e] = v;
    } else if (mode == SPMV_VCODE_F32) {
        ((float *)data)[e] = (float)v;
    } else if (mode == SPMV_VCODE_U8 || mode == SPMV_VCODE_U16) {
        U key;
        memcpy(&key, &v, sizeof key);
        int32_t c = pk_code<U>(key, (const U *)table, n);
        if (mode == SPMV_VCODE_U8)
            ((uint8_t *)data)[e] = (uint8_t)c;
        else
            ((uint16_t *)data)[e] = (uint16_t)c;
    }
}

template <typename T> __device__ __forceinline__ void pk_put_pad(spmv_vcode mode, void *data, int64_t e)
{
    if (mode == SPMV_VCODE_RAW)
        ((T *)data)[e] = (T)0;
    else if (mode == SPMV_VCODE_F32)
        ((float *)data)[e] = 0.0f;
    else if (mode == SPMV_VCODE_U8)
        ((uint8_t *)data)[e] = 0;
    else if (mode == SPMV_VCODE_U16)
        ((uint16_t *)data)[e] = 0;
}

__device__ __forceinline__ int32_t pk_warp_min(int32_t v)
{
    for (int off = 16; off > 0; off /= 2)
        v = min(v, __shfl_xor_sync(GPU_FULL_MASK, v, off));
    return v;
}

__device__ __forceinline__ int32_t pk_warp_max(int32_t v)
{
    for (int off = 16; off > 0; off /= 2)
        v = max(v, __shfl_xor_sync(GPU_FULL_MASK, v, off));
    return v;
}

/* ------------------------------------------------------ value tables */

/* engine/spmv.h's rule: the fewest bytes for n entries, ties to the first
 * of CONST, U8, U16, F32, RAW (F32: float64 values all exact in float32). */
static spmv_vcode pk_choose_mode(int64_t nnz, int64_t ntable, int64_t n, int64_t vs, bool f32_exact)
{
    if (nnz == 0)
        return SPMV_VCODE_RAW;
    spmv_vcode best = SPMV_VCODE_RAW;
    int64_t best_bytes = INT64_MAX;
    struct { spmv_vcode mode; bool ok; bool table; } c[] = {
        {SPMV_VCODE_CONST, ntable == 1, true},   {SPMV_VCODE_U8, ntable <= 256, true},
        {SPMV_VCODE_U16, ntable <= 65536, true}, {SPMV_VCODE_F32, vs == 8 && f32_exact, false},
        {SPMV_VCODE_RAW, true, false},
    };
    for (auto &k : c) {
        int64_t bytes = (k.table ? ntable * vs : 0) + n * (int64_t)spmv_vcode_entry_bytes(k.mode, (size_t)vs);
        if (k.ok && bytes < best_bytes) {
            best = k.mode;
            best_bytes = bytes;
        }
    }
    return best;
}

/* Sets *flag when a float64 value does not survive a round trip through
 * float32 bit for bit. */
__global__ void pk_f32_check(int64_t n, const unsigned long long *__restrict__ bits, unsigned *flag)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        double v = __longlong_as_double((long long)bits[i]);
        if ((unsigned long long)__double_as_longlong((double)(float)v) != bits[i])
            atomicOr(flag, 1u);
    }
}

/* Values one sort takes: a larger matrix's (past INT32_MAX non-zeros, or
 * only past this) are sorted chunk by chunk, each chunk with the distinct
 * values found so far, until more than PK_TABLE_MAX are found (no table
 * mode takes more: the count then stops, as the host's set stops at
 * 65 537). The scratch stays two chunks, whatever the matrix. */
#define PK_SORT_CHUNK ((int64_t)1 << 28)
#define PK_TABLE_MAX 65536

/* The distinct values of the CSR (as bit patterns, ascending) and the mode
 * for n entries; the table is allocated (in the current category) unless
 * the mode is RAW or F32. */
template <typename T>
static int pk_values(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, int64_t n, struct gpu_packed_values *v, spmv_error *err)
{
    typedef typename pk_bits<T>::U U;
    U *a = NULL, *b = NULL, *uniq = NULL;
    int *d_count = NULL, count = 0;
    unsigned *d_flag = NULL, flag = 1;
    int st = SPMV_OK;
    memset(v, 0, sizeof *v);
    v->mode = SPMV_VCODE_RAW;
    if (m->nnz == 0)
        return SPMV_OK;
    int64_t chunk = m->nnz < PK_SORT_CHUNK ? m->nnz : PK_SORT_CHUNK;
    size_t cap = (size_t)chunk + (m->nnz > chunk ? PK_TABLE_MAX : 0); /* a chunk and the set so far */
    cudaError_t e = cudaSuccess;
    if ((st = gpu_alloc(ctx, m, (void **)&a, cap * sizeof(U), "value table sort", err)) ||
        (st = gpu_alloc(ctx, m, (void **)&b, cap * sizeof(U), "value table sort", err)) ||
        (st = gpu_alloc(ctx, m, (void **)&d_count, sizeof(int), "value count", err)))
        goto done;
    for (int64_t off = 0; off < m->nnz && count <= PK_TABLE_MAX; off += chunk) {
        int64_t c = m->nnz - off < chunk ? m->nnz - off : chunk;
        /* the chunk, then the set so far, into the buffer the set is not in */
        U *in = uniq == a ? b : a, *other = in == a ? b : a;
        if ((e = cudaMemcpyAsync(in, (const U *)m->val + off, (size_t)c * sizeof(U), cudaMemcpyDeviceToDevice,
                                 ctx->stream)) != cudaSuccess ||
            (count && (e = cudaMemcpyAsync(in + c, uniq, (size_t)count * sizeof(U), cudaMemcpyDeviceToDevice,
                                           ctx->stream)) != cudaSuccess)) {
            st = gpu_cuda_error(e, err, "copying the values to sort");
            goto done;
        }
        int items = (int)(c + count);
        cub::DoubleBuffer<U> db(in, other);
        if ((st = gpu_cub_run(ctx, m, "value sort", err, [&](void *t, size_t &tb) {
                 return cub::DeviceRadixSort::SortKeys(t, tb, db, items, 0, (int)sizeof(U) * 8, ctx->stream);
             })) ||
            (st = gpu_cub_run(ctx, m, "distinct values", err, [&](void *t, size_t &tb) {
                 return cub::DeviceSelect::Unique(t, tb, db.Current(), db.Alternate(), d_count, items, ctx->stream);
             })) ||
            (st = gpu_copy_to_host(ctx, &count, d_count, sizeof count, "reading the distinct value count", err)))
            goto done;
        uniq = db.Alternate();
    }
    if (sizeof(T) == 8) { /* float64 values all exact in float32 (a "mixed" upload's): F32 may do */
        if ((st = gpu_alloc(ctx, m, (void **)&d_flag, sizeof(unsigned), "float32 check", err)))
            goto done;
        if ((e = cudaMemsetAsync(d_flag, 0, sizeof(unsigned), ctx->stream)) != cudaSuccess) {
            st = gpu_cuda_error(e, err, "float32 check");
            goto done;
        }
        pk_f32_check<<<gpu_grid(m->nnz, 256), 256, 0, ctx->stream>>>(m->nnz, (const unsigned long long *)m->val,
                                                                      d_flag);
        if ((st = gpu_check_launch(err, "pk_f32_check")) ||
            (st = gpu_copy_to_host(ctx, &flag, d_flag, sizeof flag, "reading the float32 check", err)))
            goto done;
    }
    v->mode = pk_choose_mode(m->nnz, count, n, sizeof(T), flag == 0);
    if (v->mode != SPMV_VCODE_RAW && v->mode != SPMV_VCODE_F32) {
        v->ntable = count;
        if ((st = gpu_alloc(ctx, m, &v->table, (size_t)count * sizeof(T), "value table", err)))
            goto done;
        if ((e = cudaMemcpyAsync(v->table, uniq, (size_t)count * sizeof(T), cudaMemcpyDeviceToDevice,
                                 ctx->stream)) != cudaSuccess ||
            (e = cudaStreamSynchronize(ctx->stream)) != cudaSuccess)
            st = gpu_cuda_error(e, err, "copying the value table");
    }
done:
    gpu_release_each(ctx, m, {a, b, d_count, d_flag});
    return st;
}

static size_t pk_values_bytes(const struct gpu_packed_values *v, int64_t n, size_t vs)
{
    return (size_t)v->ntable * vs + (size_t)n * spmv_vcode_entry_bytes(v->mode, vs);
}

/* CSR-order codes for PCSR (U8/U16). */
template <typename T>
__global__ void pk_codes(int64_t n, const T *__restrict__ val, spmv_vcode mode, const T *table, int32_t ntable,
                         void *data)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        pk_put<T>(mode, data, i, val[i], table, ntable);
}

/* ----------------------------------------------------------------- PCSR */

/* Per row: its non-zeros if its span passes 1 byte (w1) and 2 bytes (w2),
 * else 0; entry `rows` is 0 (so an exclusive scan ends in the total). */
__global__ void pcsr_spans(int32_t rows, const int32_t *__restrict__ row_ptr, const int32_t *__restrict__ col,
                           int32_t *w1, int32_t *w2)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i <= rows; i += (int64_t)gridDim.x * blockDim.x) {
        int32_t len = 0, span = 0;
        if (i < rows) {
            int32_t s = row_ptr[i], e = row_ptr[i + 1];
            len = e - s;
            span = len ? col[e - 1] - col[s] : 0;
        }
        w1[i] = span > 255 ? len : 0;
        w2[i] = span > 65535 ? len : 0;
    }
}

template <typename I>
__global__ void pcsr_fill(int32_t rows, const int32_t *__restrict__ row_ptr, const int32_t *__restrict__ col,
                          int32_t limit, const int32_t *__restrict__ woff, int32_t *base, I *idx, int32_t *wide_col)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows; i += (int64_t)gridDim.x * blockDim.x) {
        int32_t s = row_ptr[i], e = row_ptr[i + 1];
        int32_t first = e > s ? col[s] : 0;
        if (e == s || col[e - 1] - first <= limit) {
            base[i] = first;
            for (int32_t j = s; j < e; j++)
                idx[j] = (I)(col[j] - first);
        } else {
            int32_t w = woff[i];
            base[i] = -1 - w;
            for (int32_t j = s; j < e; j++) {
                idx[j] = 0;
                wide_col[w + (j - s)] = col[j];
            }
        }
    }
}

void gpu_free_pcsr(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m)
{
    struct gpu_pcsr *p = &m->pcsr;
    gpu_release_ptr(ctx, m, &p->base);
    gpu_release_ptr(ctx, m, &p->wide_col);
    if (p->idx != (void *)m->col)
        gpu_release(ctx, m, p->idx);
    if (p->v.data != m->val)
        gpu_release(ctx, m, p->v.data);
    gpu_release(ctx, m, p->v.table);
    memset(p, 0, sizeof *p);
}

/* Bytes the PCSR holds of its own (borrowed CSR arrays not counted). */
size_t gpu_pcsr_bytes(const spmv_gpu_matrix *m)
{
    const struct gpu_pcsr *p = &m->pcsr;
    size_t vs = spmv_dtype_size(m->dtype), b = 0;
    if (!p->idx_bytes)
        return 0;
    if (p->idx_bytes < 4)
        b += (size_t)m->rows * 4 + (size_t)m->nnz * p->idx_bytes + (size_t)p->wide_nnz * 4;
    b += (size_t)p->v.ntable * vs;
    if (p->v.mode != SPMV_VCODE_RAW)
        b += (size_t)m->nnz * spmv_vcode_entry_bytes(p->v.mode, vs);
    return b;
}

size_t gpu_pcsr_read_bytes(const spmv_gpu_matrix *m)
{
    const struct gpu_pcsr *p = &m->pcsr;
    size_t vs = spmv_dtype_size(m->dtype);
    return ((size_t)m->rows + 1) * 4 + (p->idx_bytes < 4 ? (size_t)m->rows * 4 + (size_t)p->wide_nnz * 4 : 0) +
           (size_t)m->nnz * p->idx_bytes + pk_values_bytes(&p->v, m->nnz, vs);
}

template <typename T> static int build_pcsr(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, spmv_error *err)
{
    struct gpu_pcsr *p = &m->pcsr;
    int32_t *w1 = NULL, *w2 = NULL, *o1 = NULL, *o2 = NULL;
    int32_t tot[2] = {0, 0};
    int64_t rows = m->rows, nnz = m->nnz, n1 = rows + 1;
    size_t vs = sizeof(T);
    int st;
    if ((st = gpu_alloc(ctx, m, (void **)&w1, n1 * 4, "PCSR spans", err)) ||
        (st = gpu_alloc(ctx, m, (void **)&w2, n1 * 4, "PCSR spans", err)) ||
        (st = gpu_alloc(ctx, m, (void **)&o1, n1 * 4, "PCSR wide offsets", err)) ||
        (st = gpu_alloc(ctx, m, (void **)&o2, n1 * 4, "PCSR wide offsets", err)))
        goto done;
    pcsr_spans<<<gpu_grid(n1, PK_BLOCK), PK_BLOCK, 0, ctx->stream>>>(m->rows, m->row_ptr, m->col, w1, w2);
    if ((st = gpu_check_launch(err, "pcsr_spans")) ||
        (st = gpu_cub_run(ctx, m, "PCSR wide scan", err, [&](void *t, size_t &b) {
             return cub::DeviceScan::ExclusiveSum(t, b, w1, o1, (int)n1, ctx->stream);
         })) ||
        (st = gpu_cub_run(ctx, m, "PCSR wide scan", err, [&](void *t, size_t &b) {
             return cub::DeviceScan::ExclusiveSum(t, b, w2, o2, (int)n1, ctx->stream);
         })) ||
        (st = gpu_copy_to_host(ctx, &tot[0], o1 + rows, 4, "reading the wide non-zeros", err)) ||
        (st = gpu_copy_to_host(ctx, &tot[1], o2 + rows, 4, "reading the wide non-zeros", err)))
        goto done;
    {
        int64_t b1 = nnz + rows * 4 + (int64_t)tot[0] * 4, b2 = 2 * nnz + rows * 4 + (int64_t)tot[1] * 4,
                b4 = 4 * nnz;
        p->idx_bytes = b1 <= b2 && b1 <= b4 ? 1 : b2 <= b4 ? 2 : 4;
        p->wide_nnz = p->idx_bytes == 1 ? tot[0] : p->idx_bytes == 2 ? tot[1] : 0;
    }
    if ((st = pk_values<T>(ctx, m, nnz, &p->v, err)))
        goto done;
    {
        /* the format's own bytes, as the host counts them (with the arrays
         * the device borrows from the CSR), under the padding rule */
        int64_t host_bytes = (p->idx_bytes < 4 ? rows * 4 + (int64_t)p->wide_nnz * 4 : 0) +
                             nnz * p->idx_bytes + (int64_t)pk_values_bytes(&p->v, nnz, vs);
        if ((st = spmv_format_check(&ctx->limits, SPMV_FMT_PCSR, nnz, nnz, host_bytes, err)))
            goto done;
    }
    if (p->idx_bytes == 4) {
        p->idx = m->col;
    } else {
        if ((st = gpu_alloc(ctx, m, (void **)&p->base, (size_t)rows * 4, "PCSR bases", err)) ||
            (st = gpu_alloc(ctx, m, &p->idx, (size_t)nnz * p->idx_bytes, "PCSR column deltas", err)) ||
            (st = gpu_alloc(ctx, m, (void **)&p->wide_col, (size_t)p->wide_nnz * 4, "PCSR wide columns", err)))
            goto done;
        if (rows > 0) {
            unsigned g = gpu_grid(rows, PK_BLOCK);
            if (p->idx_bytes == 1)
                pcsr_fill<uint8_t><<<g, PK_BLOCK, 0, ctx->stream>>>(m->rows, m->row_ptr, m->col, 255, o1, p->base,
                                                                   (uint8_t *)p->idx, p->wide_col);
            else
                pcsr_fill<uint16_t><<<g, PK_BLOCK, 0, ctx->stream>>>(m->rows, m->row_ptr, m->col, 65535, o2,
                                                                    p->base, (uint16_t *)p->idx, p->wide_col);
            if ((st = gpu_check_launch(err, "pcsr_fill")))
                goto done;
        }
    }
    if (p->v.mode == SPMV_VCODE_RAW) {
        p->v.data = m->val;
    } else if (p->v.mode != SPMV_VCODE_CONST) { /* codes, or float32 values */
        if ((st = gpu_alloc(ctx, m, &p->v.data, (size_t)nnz * spmv_vcode_entry_bytes(p->v.mode, vs), "PCSR value codes", err)))
            goto done;
        pk_codes<T><<<gpu_grid(nnz, PK_BLOCK), PK_BLOCK, 0, ctx->stream>>>(nnz, (const T *)m->val, p->v.mode,
                                                                           (const T *)p->v.table, p->v.ntable,
                                                                           p->v.data);
        st = gpu_check_launch(err, "pk_codes");
    }
done:
    gpu_release_each(ctx, m, {w1, w2, o1, o2});
    return st;
}

int gpu_build_pcsr(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, spmv_error *err)
{
    return m->dtype == SPMV_FLOAT64 ? build_pcsr<double>(ctx, m, err) : build_pcsr<float>(ctx, m, err);
}

/* ---------------------------------------------------------------- PSELL */

/* A warp per slice: its width, the bytes of its column entries, their
 * width (the widest slot span decides; 0 for a diagonal slice) and its
 * value entries (its width when uniform, else 32 a slot). Entry nslices of
 * the outputs is 0. */
template <typename T, typename O>
__global__ void psell_plan(int32_t rows, int32_t ns, const O *__restrict__ row_ptr,
                           const int32_t *__restrict__ col, const T *__restrict__ val, int64_t *width,
                           int64_t *ibytes, int64_t *nvals, uint8_t *ib)
{
    typedef typename pk_bits<T>::U U;
    int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    if (warp > ns)
        return;
    if (warp == ns) {
        if (lane == 0)
            width[ns] = ibytes[ns] = nvals[ns] = 0;
        return;
    }
    int64_t r = warp * PK_C + lane;
    int64_t s = r < rows ? (int64_t)row_ptr[r] : 0;
    int32_t len = r < rows ? (int32_t)(row_ptr[r + 1] - s) : 0;
    int32_t w = pk_warp_max(len);
    int64_t span = 0;
    /* diagonal: every lane a row of length w, each slot's column minus the
     * lane the same on every lane */
    bool diag = w > 0 && __all_sync(GPU_FULL_MASK, r < rows && len == w), uniform = w > 0;
    for (int32_t k = 0; k < w; k++) {
        int32_t c = k < len ? col[s + k] : -1;
        int32_t mx = pk_warp_max(c), mn = pk_warp_min(k < len ? c : INT_MAX);
        if ((int64_t)mx - mn > span)
            span = (int64_t)mx - mn;
        if (diag) {
            int64_t off = (int64_t)c - lane;
            diag = __all_sync(GPU_FULL_MASK, off == __shfl_sync(GPU_FULL_MASK, off, 0));
        }
        if (uniform) { /* every real entry of the slot the value of its first, bit for bit */
            bool real = k < len;
            U bits = 0;
            if (real)
                memcpy(&bits, val + s + k, sizeof bits);
            int first = __ffs(__ballot_sync(GPU_FULL_MASK, real)) - 1; /* some row has k < len */
            U b0 = __shfl_sync(GPU_FULL_MASK, bits, first);
            uniform = __all_sync(GPU_FULL_MASK, !real || bits == b0);
        }
    }
    if (lane == 0) {
        int b = diag ? 0 : w == 0 || span <= 254 ? 1 : span <= 65534 ? 2 : 4;
        width[warp] = w;
        ib[warp] = (uint8_t)b;
        ibytes[warp] = (int64_t)w * PK_C * b;
        nvals[warp] = uniform ? w : (int64_t)w * PK_C;
    }
}

template <typename T, typename O>
__global__ void psell_fill(int32_t rows, int32_t ns, const O *__restrict__ row_ptr,
                           const int32_t *__restrict__ col, const T *__restrict__ val,
                           const int64_t *__restrict__ slot_off, const int64_t *__restrict__ idx_off,
                           const int64_t *__restrict__ val_off, const uint8_t *__restrict__ ib, int32_t *base,
                           uint8_t *idx, spmv_vcode mode, const T *table, int32_t ntable, void *data)
{
    int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    if (warp >= ns)
        return;
    int64_t r = warp * PK_C + lane, so = slot_off[warp], w = slot_off[warp + 1] - so;
    int64_t s = r < rows ? (int64_t)row_ptr[r] : 0;
    int32_t len = r < rows ? (int32_t)(row_ptr[r + 1] - s) : 0;
    int b = ib[warp];
    uint8_t *blk = idx + idx_off[warp];
    int64_t vo = val_off[warp];
    bool uniform = val_off[warp + 1] - vo != w * PK_C; /* one value a slot */
    for (int32_t k = 0; k < w; k++) {
        bool real = k < len;
        int32_t c = real ? col[s + k] : INT_MAX;
        int32_t mn = b < 4 ? pk_warp_min(c) : 0; /* diagonal: lane 0's */
        if (lane == 0)
            base[so + k] = mn;
        int64_t at = (int64_t)k * PK_C + lane, e = vo + (int64_t)k * PK_C + lane;
        if (b == 0) /* diagonal: no entries */
            ;
        else if (b == 1)
            blk[at] = real ? (uint8_t)(c - mn) : (uint8_t)0xff;
        else if (b == 2)
            ((uint16_t *)blk)[at] = real ? (uint16_t)(c - mn) : (uint16_t)0xffff;
        else
            ((int32_t *)blk)[at] = real ? c : -1;
        if (uniform) { /* the slot's value, from its first real row */
            if (lane == __ffs(__ballot_sync(GPU_FULL_MASK, real)) - 1)
                pk_put<T>(mode, data, vo + k, val[s + k], table, ntable);
        } else if (real) {
            pk_put<T>(mode, data, e, val[s + k], table, ntable);
        } else {
            pk_put_pad<T>(mode, data, e);
        }
    }
}

static void pat_free(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, struct gpu_psell_patterns *pt)
{
    gpu_release_ptr(ctx, m, &pt->pid);
    gpu_release_ptr(ctx, m, &pt->off);
    gpu_release(ctx, m, pt->val);
    memset(pt, 0, sizeof *pt);
}

void gpu_free_psell(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m)
{
    struct gpu_psell *p = &m->psell;
    pat_free(ctx, m, &p->pat);
    gpu_release_ptr(ctx, m, &p->slot_off);
    gpu_release_ptr(ctx, m, &p->idx_off);
    gpu_release_ptr(ctx, m, &p->val_off);
    gpu_release_ptr(ctx, m, &p->idx_bytes);
    gpu_release_ptr(ctx, m, &p->base);
    gpu_release_ptr(ctx, m, &p->idx);
    gpu_release(ctx, m, p->v.data);
    gpu_release(ctx, m, p->v.table);
    memset(p, 0, sizeof *p);
}

static size_t psell_bytes(int32_t ns, int64_t slots, int64_t idx_total, int64_t nvals,
                          const struct gpu_packed_values *v, size_t vs)
{
    return ((size_t)ns + 1) * 24 + (size_t)ns + (size_t)(slots / PK_C) * 4 + (size_t)idx_total +
           pk_values_bytes(v, nvals, vs);
}

/* The PSELL's arrays and, when it has slice patterns, their slice ids,
 * offsets and values (what gpu.psell reads besides). */
size_t gpu_psell_bytes(const spmv_gpu_matrix *m)
{
    const struct gpu_psell *p = &m->psell;
    size_t vs = spmv_dtype_size(m->dtype);
    size_t pat = p->pat.n ? (size_t)p->nslices + (size_t)p->pat.start[p->pat.n] * (4 + vs) : 0;
    return p->built ? psell_bytes(p->nslices, p->slots, p->idx_total, p->nvals, &p->v, vs) + pat : 0;
}

extern "C" void spmv_gpu_matrix_psell_patterns(const spmv_gpu_matrix *m, int32_t *patterns, int64_t *slices)
{
    *patterns = m && m->psell.built ? m->psell.pat.n : 0;
    *slices = m && m->psell.built ? m->psell.pat.slices : 0;
}

/* ------------------------------------------------------ slice patterns
 *
 * (gpu.cuh gpu_psell_patterns.) A slice can follow a pattern when it is
 * diagonal (index width 0: every row of the full slice at the same
 * offsets, column = base + lane), uniform (one value a slot), non-empty and
 * at most PK_PAT_WIDTH slots wide (pat_width); its key is its width, each
 * slot's base minus the slice's first row and each slot's value bits
 * (pat_slot). A diagonal slice of distinct values (the
 * finite-volume matrix's) would gain nothing: its values are a round of
 * loads anyway, and the kernel is at the memory's bandwidth there
 * (docs/benchmarks/realistic.md run 7). PK_PAT_SAMPLE slices, one from
 * each of as many equal windows (pat_sample), are keyed on the device and
 * their keys copied back; the host counts equal keys and keeps the most
 * frequent (each at least 1/PK_PAT_SHARE of the sample, at most
 * GPU_PAT_MAX of them and GPU_PAT_SLOTS slots in all); a pass over every
 * slice then gives each the first kept pattern its own key equals,
 * compared in full. A stencil's interior slices share one pattern; a
 * matrix without such slices gets none and its kernel reads nothing more. */

#define PK_PAT_WIDTH 32
#define PK_PAT_SAMPLE 4096
#define PK_PAT_SHARE 256
#define PK_PAT_REC (1 + 2 * PK_PAT_WIDTH) /* a key in int64 words: width, offsets, value bits */

/* Value entry e of a PSELL's values, whatever their mode. */
template <typename T>
__device__ __forceinline__ T pk_value_any(spmv_vcode mode, const void *data, const T *table, int64_t e)
{
    switch (mode) {
    case SPMV_VCODE_RAW: return ((const T *)data)[e];
    case SPMV_VCODE_F32: return (T)((const float *)data)[e];
    case SPMV_VCODE_U8: return table[((const uint8_t *)data)[e]];
    case SPMV_VCODE_U16: return table[((const uint16_t *)data)[e]];
    default: return table[0]; /* CONST */
    }
}

struct pk_psell_view {
    int32_t rows;
    const int64_t *slot_off, *val_off;
    const uint8_t *ib;
    const int32_t *base;
    spmv_vcode mode;
    const void *data, *table;
};

/* Slice s's width when it can follow a pattern (diagonal, uniform, full,
 * 1 to PK_PAT_WIDTH slots), else -1. */
__device__ __forceinline__ int64_t pat_width(const pk_psell_view &v, int64_t s)
{
    int64_t w = v.slot_off[s + 1] - v.slot_off[s];
    bool uniform = v.val_off[s + 1] - v.val_off[s] != w * PK_C;
    return v.ib[s] == 0 && uniform && w > 0 && w <= PK_PAT_WIDTH && (s + 1) * PK_C <= v.rows ? w : -1;
}

/* Slot k of such a slice as a key holds it: its base minus the slice's
 * first row (*off) and its value's bits (*bits). */
template <typename T>
__device__ __forceinline__ void pat_slot(const pk_psell_view &v, int64_t s, int64_t k, long long *off, long long *bits)
{
    *off = (long long)v.base[v.slot_off[s] + k] - s * PK_C;
    T val = pk_value_any<T>(v.mode, v.data, (const T *)v.table, v.val_off[s] + k);
    typename pk_bits<T>::U b;
    memcpy(&b, &val, sizeof b);
    *bits = (long long)b;
}

/* Slice s's key into rec (PK_PAT_REC words, unused ones 0; width -1: the
 * slice can follow no pattern). */
template <typename T> __device__ void pat_key(const pk_psell_view &v, int64_t s, long long *rec)
{
    int64_t w = pat_width(v, s);
    for (int i = 0; i < PK_PAT_REC; i++)
        rec[i] = 0;
    rec[0] = w;
    for (int64_t k = 0; k < w; k++)
        pat_slot<T>(v, s, k, rec + 1 + k, rec + 1 + PK_PAT_WIDTH + k);
}

/* Sample i: a slice of window [i stride, (i+1) stride) chosen by a hash of
 * i, not its first: a grid whose lines are a multiple of the window long
 * would otherwise be sampled at its lines' ends only (2-D Poisson 4096²:
 * every window's first slice holds a boundary row). */
template <typename T> __global__ void pat_sample(pk_psell_view v, int64_t n, int64_t stride, long long *recs)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n)
        pat_key<T>(v, i * stride + (int64_t)(((uint64_t)i * 0x9E3779B97F4A7C15ull) >> 33) % stride,
                   recs + i * PK_PAT_REC);
}

/* pid of every slice: the first pattern (keys: n records) whose key
 * equals its own, compared slot by slot as pat_key writes it. */
template <typename T>
__global__ void pat_assign(pk_psell_view v, int64_t ns, const long long *__restrict__ keys, int n, uint8_t *pid,
                           unsigned long long *count)
{
    int64_t s = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (s >= ns)
        return;
    int64_t w = pat_width(v, s);
    int got = GPU_PAT_NONE;
    for (int p = 0; w > 0 && p < n && got == GPU_PAT_NONE; p++) {
        const long long *k = keys + p * PK_PAT_REC;
        bool same = k[0] == w;
        for (int64_t j = 0; j < w && same; j++) {
            long long off, bits;
            pat_slot<T>(v, s, j, &off, &bits);
            same = k[1 + j] == off && k[1 + PK_PAT_WIDTH + j] == bits;
        }
        if (same)
            got = p;
    }
    pid[s] = (uint8_t)got;
    unsigned live = __activemask(), hit = __ballot_sync(live, got != GPU_PAT_NONE); /* one atomic a warp */
    if (hit && (threadIdx.x & 31) == __ffs(live) - 1)
        atomicAdd(count, (unsigned long long)__popc(hit));
}

static int pat_cmp(const void *a, const void *b) { return memcmp(a, b, PK_PAT_REC * sizeof(long long)); }

/* The kept keys (at most GPU_PAT_MAX, into keep) of the sample's n sorted
 * keys: the most frequent first. */
static int pat_choose(const long long *sorted, int64_t n, long long *keep)
{
    struct run { int64_t at, count; } runs[GPU_PAT_MAX];
    int nr = 0;
    int64_t least = n / PK_PAT_SHARE > 2 ? n / PK_PAT_SHARE : 2;
    for (int64_t i = 0; i < n;) {
        int64_t j = i + 1;
        while (j < n && !pat_cmp(sorted + i * PK_PAT_REC, sorted + j * PK_PAT_REC))
            j++;
        if (sorted[i * PK_PAT_REC] > 0 && j - i >= least) { /* insert by count, keep the top GPU_PAT_MAX */
            int at = nr < GPU_PAT_MAX ? nr++ : GPU_PAT_MAX;
            while (at > 0 && runs[at - 1].count < j - i) {
                if (at < GPU_PAT_MAX)
                    runs[at] = runs[at - 1];
                at--;
            }
            if (at < GPU_PAT_MAX)
                runs[at] = run{i, j - i};
        }
        i = j;
    }
    int kept = 0;
    int64_t slots = 0;
    for (int r = 0; r < nr; r++) {
        const long long *k = sorted + runs[r].at * PK_PAT_REC;
        if (slots + k[0] > GPU_PAT_SLOTS)
            continue;
        slots += k[0];
        memcpy(keep + (size_t)kept++ * PK_PAT_REC, k, PK_PAT_REC * sizeof(long long));
    }
    return kept;
}

template <typename T> static int psell_patterns(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, spmv_error *err)
{
    struct gpu_psell *p = &m->psell;
    struct gpu_psell_patterns *pt = &p->pat;
    int64_t ns = p->nslices, n = ns < PK_PAT_SAMPLE ? ns : PK_PAT_SAMPLE, stride = n ? ns / n : 1;
    pk_psell_view v{m->rows, p->slot_off, p->val_off, p->idx_bytes, p->base, p->v.mode, p->v.data, p->v.table};
    long long *recs = NULL, *host = NULL, keep[GPU_PAT_MAX * PK_PAT_REC];
    unsigned long long *count = NULL, covered = 0;
    size_t rb = (size_t)n * PK_PAT_REC * sizeof(long long);
    int st = SPMV_OK, kept = 0;
    memset(pt, 0, sizeof *pt);
    if (n == 0)
        return SPMV_OK;
    if (!(host = (long long *)malloc(rb)))
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of host memory for the PSELL's slice patterns");
    if ((st = gpu_alloc(ctx, m, (void **)&recs, rb, "PSELL slice keys", err)))
        goto done;
    pat_sample<T><<<gpu_grid(n, PK_BLOCK), PK_BLOCK, 0, ctx->stream>>>(v, n, stride, recs);
    if ((st = gpu_check_launch(err, "pat_sample")) ||
        (st = gpu_copy_to_host(ctx, host, recs, rb, "reading the PSELL's slice keys", err)))
        goto done;
    qsort(host, (size_t)n, PK_PAT_REC * sizeof(long long), pat_cmp);
    if (!(kept = pat_choose(host, n, keep)))
        goto done;
    {
        int32_t off[GPU_PAT_SLOTS];
        T val[GPU_PAT_SLOTS];
        int32_t at = 0;
        for (int q = 0; q < kept; q++) {
            const long long *k = keep + q * PK_PAT_REC;
            pt->start[q] = at;
            for (int j = 0; j < k[0]; j++, at++) {
                off[at] = (int32_t)k[1 + j];
                typename pk_bits<T>::U bits = (typename pk_bits<T>::U)k[1 + PK_PAT_WIDTH + j];
                memcpy(&val[at], &bits, sizeof bits);
            }
        }
        for (int q = kept; q <= GPU_PAT_MAX; q++)
            pt->start[q] = at;
        cudaError_t e;
        if ((st = gpu_alloc(ctx, m, (void **)&pt->pid, (size_t)ns, "PSELL slice patterns", err)) ||
            (st = gpu_alloc(ctx, m, (void **)&pt->off, (size_t)at * 4, "PSELL slice patterns", err)) ||
            (st = gpu_alloc(ctx, m, &pt->val, (size_t)at * sizeof(T), "PSELL slice patterns", err)) ||
            (st = gpu_alloc(ctx, m, (void **)&count, 8, "PSELL slice patterns", err)))
            goto done;
        if ((e = cudaMemcpyAsync(pt->off, off, (size_t)at * 4, cudaMemcpyHostToDevice, ctx->stream)) != cudaSuccess ||
            (e = cudaMemcpyAsync(pt->val, val, (size_t)at * sizeof(T), cudaMemcpyHostToDevice, ctx->stream)) !=
                cudaSuccess ||
            (e = cudaMemcpyAsync(recs, keep, (size_t)kept * PK_PAT_REC * sizeof(long long), cudaMemcpyHostToDevice,
                                 ctx->stream)) != cudaSuccess ||
            (e = cudaMemsetAsync(count, 0, 8, ctx->stream)) != cudaSuccess) {
            st = gpu_cuda_error(e, err, "PSELL slice patterns");
            goto done;
        }
        pat_assign<T><<<gpu_grid(ns, PK_BLOCK), PK_BLOCK, 0, ctx->stream>>>(v, ns, recs, kept, pt->pid, count);
        if ((st = gpu_check_launch(err, "pat_assign")) ||
            (st = gpu_copy_to_host(ctx, &covered, count, 8, "reading the PSELL's slice patterns", err)))
            goto done;
        pt->n = covered ? kept : 0;
        pt->slices = (int64_t)covered;
    }
done:
    gpu_release_each(ctx, m, {recs, count});
    free(host);
    if (st || !pt->n)
        pat_free(ctx, m, pt);
    return st;
}

/* O: the CSR's row offsets, int32_t or (a wide matrix) int64_t; the
 * PSELL's own offsets are 64-bit either way. */
template <typename T, typename O>
static int build_psell(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, const O *row_ptr, spmv_error *err)
{
    struct gpu_psell *p = &m->psell;
    int64_t *width = NULL, *ibytes = NULL, *nvals = NULL;
    int64_t ns = ((int64_t)m->rows + PK_C - 1) / PK_C, nslots = 0;
    unsigned grid = gpu_grid((ns + 1) * 32, PK_BLOCK);
    int st;
    p->nslices = (int32_t)ns;
    if ((st = gpu_alloc(ctx, m, (void **)&width, (ns + 1) * 8, "PSELL widths", err)) ||
        (st = gpu_alloc(ctx, m, (void **)&ibytes, (ns + 1) * 8, "PSELL index sizes", err)) ||
        (st = gpu_alloc(ctx, m, (void **)&nvals, (ns + 1) * 8, "PSELL value counts", err)) ||
        (st = gpu_alloc(ctx, m, (void **)&p->idx_bytes, ns ? ns : 1, "PSELL index widths", err)) ||
        (st = gpu_alloc(ctx, m, (void **)&p->slot_off, (ns + 1) * 8, "PSELL slot offsets", err)) ||
        (st = gpu_alloc(ctx, m, (void **)&p->idx_off, (ns + 1) * 8, "PSELL index offsets", err)) ||
        (st = gpu_alloc(ctx, m, (void **)&p->val_off, (ns + 1) * 8, "PSELL value offsets", err)))
        goto done;
    psell_plan<T, O><<<grid, PK_BLOCK, 0, ctx->stream>>>(m->rows, (int32_t)ns, row_ptr, m->col, (const T *)m->val,
                                                         width, ibytes, nvals, p->idx_bytes);
    if ((st = gpu_check_launch(err, "psell_plan")) ||
        (st = gpu_cub_run(ctx, m, "PSELL slot scan", err, [&](void *t, size_t &b) {
             return cub::DeviceScan::ExclusiveSum(t, b, width, p->slot_off, (int)(ns + 1), ctx->stream);
         })) ||
        (st = gpu_cub_run(ctx, m, "PSELL index scan", err, [&](void *t, size_t &b) {
             return cub::DeviceScan::ExclusiveSum(t, b, ibytes, p->idx_off, (int)(ns + 1), ctx->stream);
         })) ||
        (st = gpu_cub_run(ctx, m, "PSELL value scan", err, [&](void *t, size_t &b) {
             return cub::DeviceScan::ExclusiveSum(t, b, nvals, p->val_off, (int)(ns + 1), ctx->stream);
         })) ||
        (st = gpu_copy_to_host(ctx, &nslots, p->slot_off + ns, 8, "reading the PSELL size", err)) ||
        (st = gpu_copy_to_host(ctx, &p->idx_total, p->idx_off + ns, 8, "reading the PSELL size", err)) ||
        (st = gpu_copy_to_host(ctx, &p->nvals, p->val_off + ns, 8, "reading the PSELL size", err)))
        goto done;
    p->slots = nslots * PK_C;
    /* the padding rule on the slots first: a refused format sorts nothing */
    if ((st = spmv_format_check(&ctx->limits, SPMV_FMT_PSELL, m->nnz, p->slots, 0, err)) ||
        (st = pk_values<T>(ctx, m, p->nvals, &p->v, err)) ||
        (st = spmv_format_check(&ctx->limits, SPMV_FMT_PSELL, m->nnz, p->slots,
                                (int64_t)psell_bytes((int32_t)ns, p->slots, p->idx_total, p->nvals, &p->v, sizeof(T)),
                                err)) ||
        (st = gpu_alloc(ctx, m, (void **)&p->base, (size_t)nslots * 4, "PSELL bases", err)) ||
        (st = gpu_alloc(ctx, m, (void **)&p->idx, (size_t)p->idx_total, "PSELL column entries", err)) ||
        (st = gpu_alloc(ctx, m, &p->v.data, (size_t)p->nvals * spmv_vcode_entry_bytes(p->v.mode, sizeof(T)),
                        "PSELL values", err)))
        goto done;
    if (ns > 0 && nslots > 0) {
        psell_fill<T, O><<<gpu_grid(ns * 32, PK_BLOCK), PK_BLOCK, 0, ctx->stream>>>(
            m->rows, (int32_t)ns, row_ptr, m->col, (const T *)m->val, p->slot_off, p->idx_off, p->val_off,
            p->idx_bytes, p->base, p->idx, p->v.mode, (const T *)p->v.table, p->v.ntable, p->v.data);
        st = gpu_check_launch(err, "psell_fill");
    }
    if (!st)
        st = psell_patterns<T>(ctx, m, err);
    if (!st)
        p->built = true;
done:
    gpu_release_each(ctx, m, {width, ibytes, nvals});
    return st;
}

int gpu_build_psell(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, spmv_error *err)
{
    bool f64 = m->dtype == SPMV_FLOAT64;
    if (m->row_ptr64)
        return f64 ? build_psell<double>(ctx, m, m->row_ptr64, err) : build_psell<float>(ctx, m, m->row_ptr64, err);
    return f64 ? build_psell<double>(ctx, m, m->row_ptr, err) : build_psell<float>(ctx, m, m->row_ptr, err);
}

/* -------------------------------------------------------------- kernels */

/* The loops below take PK_STEP entries a step, the last step predicated:
 * a step's column entries, bases and values are loaded first, then its
 * gathers of x, so a lane has PK_STEP loads in flight where one entry at a
 * time would wait out each load's latency in turn, and a row of up to
 * PK_STEP entries costs one round of loads, not one per entry (the sum is
 * still taken in the entries' order). */
#define PK_STEP 8

/* Row entries s + lane, s + lane + tpr, ... < e of a PCSR: column col(j)
 * = the base plus the delta, or the wide column. */
template <typename T, int VM, typename I, typename COL>
__device__ __forceinline__ T pcsr_sum(int32_t s, int32_t e, int lane, int tpr, const void *__restrict__ data,
                                     const T *tab, T c, const T *__restrict__ x, COL col)
{
    T sum = 0;
    for (int64_t j = (int64_t)s + lane; j < e; j += PK_STEP * tpr) { /* 64-bit: e may be near INT32_MAX */
        int32_t cl[PK_STEP];
        T v[PK_STEP];
#pragma unroll
        for (int u = 0; u < PK_STEP; u++) {
            int64_t jj = j + u * tpr;
            cl[u] = jj < e ? col((int32_t)jj) : 0;
            v[u] = jj < e ? pk_value<T, VM>(data, tab, c, jj) : (T)0;
        }
#pragma unroll
        for (int u = 0; u < PK_STEP; u++)
            if (j + u * tpr < e)
                sum += v[u] * __ldg(x + cl[u]);
    }
    return sum;
}

template <typename T, int VM, typename I>
__global__ void __launch_bounds__(1024)
    pcsr_kernel(int32_t rows, int tpr, const int32_t *__restrict__ row_ptr, const int32_t *__restrict__ base,
                const I *__restrict__ idx, const int32_t *__restrict__ wide_col, const void *__restrict__ data,
                const T *__restrict__ table, int32_t ntable, const T *__restrict__ x, T *__restrict__ y)
{
    __shared__ T shared[VM == SPMV_VCODE_U8 ? 256 : 1];
    const T *tab = pk_table<T, VM>(table, ntable, shared);
    T c = VM == SPMV_VCODE_CONST ? __ldg(table) : (T)0;
    int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int64_t row = t / tpr;
    int lane = (int)(t % tpr);
    T sum = 0;
    if (row < rows) {
        int32_t s = __ldg(row_ptr + row), e = __ldg(row_ptr + row + 1);
        if (sizeof(I) == 4) {
            sum = pcsr_sum<T, VM, I>(s, e, lane, tpr, data, tab, c, x,
                                     [=](int32_t j) { return (int32_t)__ldcs(idx + j); });
        } else {
            int32_t b = __ldg(base + row);
            if (b >= 0) {
                sum = pcsr_sum<T, VM, I>(s, e, lane, tpr, data, tab, c, x,
                                         [=](int32_t j) { return b + (int32_t)__ldcs(idx + j); });
            } else {
                const int32_t *wc = wide_col + (-1 - b) - s;
                sum = pcsr_sum<T, VM, I>(s, e, lane, tpr, data, tab, c, x,
                                         [=](int32_t j) { return __ldg(wc + j); });
            }
        }
    }
    sum = gpu_group_sum(sum, tpr);
    if (row < rows && lane == 0)
        y[row] = sum;
}

/* A lane's pointer to its values in a PSELL slice (value entry e: the
 * slice's val_off plus the lane, or the val_off alone in a uniform slice),
 * read slot by slot: at(off) is the value `off` entries further on. */
template <typename T, int VM> struct pk_lane_values {
    const void *p;
    __device__ __forceinline__ pk_lane_values(const void *data, int64_t e)
    {
        p = (const char *)data + e * (int64_t)spmv_vcode_entry_bytes((spmv_vcode)VM, sizeof(T));
    }
    __device__ __forceinline__ T at(int off, const T *tab, T c) const { return pk_value<T, VM>(p, tab, c, off); }
};

/* How a PSELL slice gives a slot's column (engine/spmv.h): the slot's base
 * plus the lane (a diagonal slice, no entries), the base plus a 1- or
 * 2-byte entry, or a 4-byte entry itself; an entry of all ones is
 * padding. */
enum { PK_DIAG, PK_NARROW, PK_WIDE };

/* W slots (k .. k+W-1 of the slice, already applied to the pointers) of
 * one lane's row, added to *sum in slot order: their column entries, bases
 * and values loaded first, then the gathers of x, so W loads are in flight
 * at once and no slot past the slice's width is issued. VS: value entries
 * from one slot to the next (C, or 1 in a uniform slice, whose lanes all
 * read the slot's one value). */
template <int W, typename T, int VM, typename I, int KIND, int VS>
__device__ __forceinline__ void psell_slots(const I *__restrict__ d_at, const int32_t *__restrict__ b_at, int lane,
                                            const pk_lane_values<T, VM> &v_at, const T *tab, T c,
                                            const T *__restrict__ x, T &sum)
{
    const I pad = (I)~(I)0;
    I d[W];
    int32_t b[W];
    T v[W];
#pragma unroll
    for (int u = 0; u < W; u++) {
        d[u] = KIND == PK_DIAG ? (I)lane : __ldcs(d_at + u * PK_C);
        b[u] = KIND == PK_WIDE ? 0 : __ldg(b_at + u);
        v[u] = v_at.at(u * VS, tab, c);
    }
#pragma unroll
    for (int u = 0; u < W; u++)
        if (KIND == PK_DIAG || d[u] != pad)
            sum += v[u] * __ldg(x + (b[u] + (int32_t)d[u]));
}

/* One lane's row of a PSELL slice of width w: slots of entries I (0, 1, 2
 * or 4 bytes) at blk + k*C + lane, values from entry ve (the slice's first
 * plus the lane, or the first alone in a uniform slice). Full groups of
 * PK_STEP slots, then the rest as one group of its exact size, so a
 * 5-point stencil's slice of 5 slots costs 5 slots' instructions, not
 * PK_STEP's. */
template <typename T, int VM, typename I, int KIND, int VS>
__device__ __forceinline__ T psell_row(const I *__restrict__ blk, const int32_t *__restrict__ bs, int32_t w, int lane,
                                      int64_t ve, const void *__restrict__ data, const T *tab, T c,
                                      const T *__restrict__ x)
{
    const I *d_at = blk + lane;
    pk_lane_values<T, VM> v_at(data, ve);
    T sum = 0;
    int32_t k = 0;
    for (; k + PK_STEP <= w; k += PK_STEP) {
        psell_slots<PK_STEP, T, VM, I, KIND, VS>(d_at, bs, lane, v_at, tab, c, x, sum);
        d_at += PK_STEP * PK_C;
        bs += PK_STEP;
        v_at = pk_lane_values<T, VM>(v_at.p, PK_STEP * VS);
    }
    switch (w - k) {
    case 1: psell_slots<1, T, VM, I, KIND, VS>(d_at, bs, lane, v_at, tab, c, x, sum); break;
    case 2: psell_slots<2, T, VM, I, KIND, VS>(d_at, bs, lane, v_at, tab, c, x, sum); break;
    case 3: psell_slots<3, T, VM, I, KIND, VS>(d_at, bs, lane, v_at, tab, c, x, sum); break;
    case 4: psell_slots<4, T, VM, I, KIND, VS>(d_at, bs, lane, v_at, tab, c, x, sum); break;
    case 5: psell_slots<5, T, VM, I, KIND, VS>(d_at, bs, lane, v_at, tab, c, x, sum); break;
    case 6: psell_slots<6, T, VM, I, KIND, VS>(d_at, bs, lane, v_at, tab, c, x, sum); break;
    case 7: psell_slots<7, T, VM, I, KIND, VS>(d_at, bs, lane, v_at, tab, c, x, sum); break;
    default: break;
    }
    return sum;
}

/* A lane's sum over its slice, by the slice's index width and whether its
 * values are uniform. */
template <typename T, int VM>
__device__ __forceinline__ T psell_slice(int b, bool uniform, const uint8_t *__restrict__ blk,
                                        const int32_t *__restrict__ bs, int32_t w, int lane, int64_t vo,
                                        const void *__restrict__ data, const T *tab, T c, const T *__restrict__ x)
{
    typedef const unsigned short *U16;
    typedef const unsigned int *U32;
    if (uniform) {
        switch (b) {
        case 0: return psell_row<T, VM, unsigned char, PK_DIAG, 1>(blk, bs, w, lane, vo, data, tab, c, x);
        case 1: return psell_row<T, VM, unsigned char, PK_NARROW, 1>(blk, bs, w, lane, vo, data, tab, c, x);
        case 2: return psell_row<T, VM, unsigned short, PK_NARROW, 1>((U16)blk, bs, w, lane, vo, data, tab, c, x);
        default: return psell_row<T, VM, unsigned int, PK_WIDE, 1>((U32)blk, bs, w, lane, vo, data, tab, c, x);
        }
    }
    int64_t ve = vo + lane;
    switch (b) {
    case 0: return psell_row<T, VM, unsigned char, PK_DIAG, PK_C>(blk, bs, w, lane, ve, data, tab, c, x);
    case 1: return psell_row<T, VM, unsigned char, PK_NARROW, PK_C>(blk, bs, w, lane, ve, data, tab, c, x);
    case 2: return psell_row<T, VM, unsigned short, PK_NARROW, PK_C>((U16)blk, bs, w, lane, ve, data, tab, c, x);
    default: return psell_row<T, VM, unsigned int, PK_WIDE, PK_C>((U32)blk, bs, w, lane, ve, data, tab, c, x);
    }
}

/* A pattern slice's W slots (k .. k+W-1, applied to po and pv: their
 * offsets from the slice's first row and their values, in shared memory)
 * of one lane's row, added to *sum in slot order as psell_slots adds a
 * diagonal slice's; x starts at the slice's first row. */
template <int W, typename T>
__device__ __forceinline__ void pat_slots(const int32_t *po, const T *pv, int lane, const T *__restrict__ x, T &sum)
{
    int32_t b[W];
    T v[W];
#pragma unroll
    for (int u = 0; u < W; u++) {
        b[u] = po[u];
        v[u] = pv[u];
    }
#pragma unroll
    for (int u = 0; u < W; u++)
        sum += v[u] * __ldg(x + (b[u] + lane));
}

/* One lane's row of a slice of width w that follows a pattern, in
 * psell_row's groups. */
template <typename T>
__device__ __forceinline__ T pat_row(const int32_t *po, const T *pv, int32_t w, int lane, const T *__restrict__ x)
{
    T sum = 0;
    int32_t k = 0;
    for (; k + PK_STEP <= w; k += PK_STEP, po += PK_STEP, pv += PK_STEP)
        pat_slots<PK_STEP, T>(po, pv, lane, x, sum);
    switch (w - k) {
    case 1: pat_slots<1, T>(po, pv, lane, x, sum); break;
    case 2: pat_slots<2, T>(po, pv, lane, x, sum); break;
    case 3: pat_slots<3, T>(po, pv, lane, x, sum); break;
    case 4: pat_slots<4, T>(po, pv, lane, x, sum); break;
    case 5: pat_slots<5, T>(po, pv, lane, x, sum); break;
    case 6: pat_slots<6, T>(po, pv, lane, x, sum); break;
    case 7: pat_slots<7, T>(po, pv, lane, x, sum); break;
    default: break;
    }
    return sum;
}

/* What gpu.psell reads of a PSELL's slice patterns (gpu_psell_patterns): n
 * 0 when it has none or the launch takes none (`patterns` 2, or `threads`
 * past one). */
struct pk_pat_args {
    const uint8_t *pid;
    const int32_t *off;
    const void *val;
    int32_t n, total;
    int32_t start[GPU_PAT_MAX + 1];
};

/* A warp per slice, or PARTS warps (`threads` per row), each summing a
 * contiguous part of the slice's slots, the parts' sums then added in
 * part order by the first (through shared memory: a slice's warps are in
 * one block). The slice's header is read before the block's U8 table and
 * slice patterns are loaded and waited for, so the round trips overlap. A
 * warp per slice: a slice that follows a pattern takes its offsets and
 * values from the block's copy of the patterns, its gathers waiting for
 * nothing but the header; the sums are taken in the same order either
 * way. */
template <typename T, int VM, bool SPLIT>
__global__ void __launch_bounds__(1024)
    psell_kernel(int32_t rows, int32_t ns, int parts, const int64_t *__restrict__ slot_off,
                 const int64_t *__restrict__ idx_off, const int64_t *__restrict__ val_off,
                 const uint8_t *__restrict__ ib, const int32_t *__restrict__ base, const uint8_t *__restrict__ idx,
                 const void *__restrict__ data, const T *__restrict__ table, int32_t ntable, pk_pat_args pa,
                 const T *__restrict__ x, T *__restrict__ y)
{
    __shared__ T shared[VM == SPMV_VCODE_U8 ? 256 : 1];
    __shared__ T part_sum[SPLIT ? 1024 : 1];
    /* the patterns (launched with pk_pat_shared bytes, none without): values, offsets, starts */
    extern __shared__ __align__(8) unsigned char pk_dyn[];
    T *pat_val = (T *)pk_dyn;
    int32_t *pat_off = (int32_t *)(pat_val + pa.total), *pat_start = pat_off + pa.total;
    int64_t gw = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32, warp = SPLIT ? gw / parts : gw;
    int part = SPLIT ? (int)(gw % parts) : 0, lane = threadIdx.x & 31;
    bool live = warp < ns;
    int64_t so = 0, w = 0, io = 0, vo = 0, nv = 0;
    int b = 0, pid = GPU_PAT_NONE;
    if (live) {
        so = __ldg(slot_off + warp);
        w = __ldg(slot_off + warp + 1) - so;
        io = __ldg(idx_off + warp);
        vo = __ldg(val_off + warp);
        nv = __ldg(val_off + warp + 1) - vo;
        b = __ldg(ib + warp);
        if (!SPLIT && pa.n)
            pid = __ldg(pa.pid + warp);
    }
    if (!SPLIT && pa.n) { /* n is the launch's: every thread of the block is here */
        for (int i = threadIdx.x; i < pa.total; i += blockDim.x) {
            pat_off[i] = __ldg(pa.off + i);
            pat_val[i] = __ldg((const T *)pa.val + i);
        }
        if (threadIdx.x == 0) {
#pragma unroll
            for (int q = 0; q <= GPU_PAT_MAX; q++)
                pat_start[q] = pa.start[q];
        }
        if (VM != SPMV_VCODE_U8) /* pk_table waits for U8 */
            __syncthreads();
    }
    const T *tab = pk_table<T, VM>(table, ntable, shared);
    T c = VM == SPMV_VCODE_CONST ? __ldg(table) : (T)0;
    int64_t row = warp * PK_C + lane;
    bool uniform = nv != w * PK_C;
    if (!SPLIT) {
        if (!live)
            return;
        T sum;
        if (pid != GPU_PAT_NONE) { /* a full diagonal uniform slice: x from its first row */
            int32_t at = pat_start[pid];
            sum = pat_row<T>(pat_off + at, pat_val + at, (int32_t)w, lane, x + warp * PK_C);
        } else {
            sum = psell_slice<T, VM>(b, uniform, idx + io, base + so, (int32_t)w, lane, vo, data, tab, c, x);
        }
        if (row < rows)
            y[row] = sum;
        return;
    }
    /* part p: slots [w p / parts, w (p+1) / parts) */
    int64_t k0 = w * part / parts, k1 = w * (part + 1) / parts;
    T sum = live ? psell_slice<T, VM>(b, uniform, idx + io + k0 * PK_C * b, base + so + k0, (int32_t)(k1 - k0), lane,
                                     vo + k0 * (uniform ? 1 : PK_C), data, tab, c, x)
                 : (T)0;
    part_sum[threadIdx.x] = sum;
    __syncthreads();
    if (live && part == 0 && row < rows) {
        T total = sum;
        for (int q = 1; q < parts; q++)
            total += part_sum[threadIdx.x + q * 32];
        y[row] = total;
    }
}

/* The dynamic shared memory psell_kernel takes for pa's patterns. */
static size_t pk_pat_shared(const pk_pat_args &pa, size_t vs)
{
    return pa.n ? (size_t)pa.total * (vs + 4) + (GPU_PAT_MAX + 1) * 4 : 0;
}

/* Warps per slice: `threads` (1..32, a power of two), else 1: the slots
 * summed in order by one lane, as cpu.csr.serial sums a row. */
static int psell_parts(const struct gpu_launch *l)
{
    int t = l->p.v[SPMV_PARAM_THREADS];
    return t >= 1 && t <= 32 && (t & (t - 1)) == 0 ? t : 1;
}

/* Lanes per row: `threads`, else the power of two nearest a quarter of the
 * mean row length, 1..32 (docs/benchmarks/packed-run.md: 1 lane for 5
 * entries a row; for 27 it picks 8 where 4 measured faster: auto tries 1, 4
 * and 32 besides). */
static int pcsr_width(const struct gpu_launch *l)
{
    int t = l->p.v[SPMV_PARAM_THREADS];
    if (t >= 1 && t <= 32 && (t & (t - 1)) == 0)
        return t;
    double want = l->m->rows > 0 ? (double)l->m->nnz / l->m->rows / 4 : 0;
    int w = 1;
    while (w < 32 && w * 1.41421356 < want)
        w *= 2;
    return w;
}

template <typename T, int VM> struct pcsr_launcher {
    template <typename I> static void with(struct gpu_launch *l)
    {
        spmv_gpu_matrix *m = l->m;
        const struct gpu_pcsr *p = &m->pcsr;
        int tpr = pcsr_width(l);
        pcsr_kernel<T, VM, I><<<gpu_grid((int64_t)m->rows * tpr, l->block), l->block, 0, l->ctx->stream>>>(
            m->rows, tpr, m->row_ptr, p->base, (const I *)p->idx, p->wide_col, p->v.data, (const T *)p->v.table,
            p->v.ntable, (const T *)l->x, (T *)l->y);
    }
    static void launch(struct gpu_launch *l)
    {
        switch (l->m->pcsr.idx_bytes) {
        case 1: with<uint8_t>(l); break;
        case 2: with<uint16_t>(l); break;
        default: with<int32_t>(l); break;
        }
    }
};

int gpu_pcsr_run(struct gpu_launch *l, spmv_error *err)
{
    return pk_run<pcsr_launcher>(l, l->m->pcsr.v.mode, "gpu.pcsr", err);
}

template <typename T, int VM> struct psell_launcher {
    static void launch(struct gpu_launch *l)
    {
        spmv_gpu_matrix *m = l->m;
        const struct gpu_psell *p = &m->psell;
        int parts = psell_parts(l), per = 32 * parts;
        pk_pat_args pa;
        memset(&pa, 0, sizeof pa);
        if (parts == 1 && p->pat.n && l->p.v[SPMV_PARAM_PATTERNS] != 2) {
            pa = pk_pat_args{p->pat.pid, p->pat.off, p->pat.val, p->pat.n, p->pat.start[p->pat.n], {}};
            memcpy(pa.start, p->pat.start, sizeof pa.start);
        }
        if (parts == 1) {
            psell_kernel<T, VM, false><<<gpu_grid((int64_t)p->nslices * 32, l->block), l->block,
                                         pk_pat_shared(pa, sizeof(T)), l->ctx->stream>>>(
                m->rows, p->nslices, 1, p->slot_off, p->idx_off, p->val_off, p->idx_bytes, p->base, p->idx,
                p->v.data, (const T *)p->v.table, p->v.ntable, pa, (const T *)l->x, (T *)l->y);
            return;
        }
        int block = l->block >= per ? l->block / per * per : per; /* whole slices a block */
        psell_kernel<T, VM, true><<<gpu_grid((int64_t)p->nslices * per, block), block, 0, l->ctx->stream>>>(
            m->rows, p->nslices, parts, p->slot_off, p->idx_off, p->val_off, p->idx_bytes, p->base, p->idx,
            p->v.data, (const T *)p->v.table, p->v.ntable, pa, (const T *)l->x, (T *)l->y);
    }
};

int gpu_psell_run(struct gpu_launch *l, spmv_error *err)
{
    return pk_run<psell_launcher>(l, l->m->psell.v.mode, "gpu.psell", err);
}

/* --------------------------------------------------------------- SPSELL
 *
 * Symmetric PSELL (engine/spmv.h spmv_spsell, docs/kernels.md "Symmetric
 * PSELL"). Its rule asks, for every lower slot of a slice, whether the
 * source row holds the same offsets: a pass that is easy on the host and
 * long to write for the device, and the format is built once per matrix.
 * So the device copies the resident CSR to the host, engine/packed.c
 * builds the SPSELL there (under the context's padding rule), and its
 * arrays are uploaded: the same arrays as the host's by construction. The
 * host holds a copy of the CSR and the SPSELL while it builds. */

void gpu_free_spsell(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m)
{
    struct gpu_spsell *p = &m->spsell;
    gpu_release_ptr(ctx, m, &p->slot_off);
    gpu_release_ptr(ctx, m, &p->idx_off);
    gpu_release_ptr(ctx, m, &p->val_off);
    gpu_release_ptr(ctx, m, &p->idx_bytes);
    gpu_release_ptr(ctx, m, &p->mirror);
    gpu_release_ptr(ctx, m, &p->base);
    gpu_release_ptr(ctx, m, &p->idx);
    gpu_release(ctx, m, p->v.data);
    gpu_release(ctx, m, p->v.table);
    memset(p, 0, sizeof *p);
}

size_t gpu_spsell_bytes(const spmv_gpu_matrix *m)
{
    const struct gpu_spsell *p = &m->spsell;
    return p->built ? psell_bytes(p->nslices, p->slots, p->idx_total, p->nvals, &p->v, spmv_dtype_size(m->dtype)) +
                          (size_t)p->nslices
                    : 0;
}

/* A device copy of `bytes` host bytes at *dst (NULL when bytes is 0, as
 * gpu_alloc gives: a PSELL of diagonal slices only holds no index bytes),
 * so the bytes held are gpu_spsell_bytes's. */
static int spsell_put(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, void **dst, const void *src, size_t bytes,
                      const char *what, spmv_error *err)
{
    int st = gpu_alloc(ctx, m, dst, bytes, what, err);
    cudaError_t e;
    if (st)
        return st;
    if (bytes && (e = cudaMemcpyAsync(*dst, src, bytes, cudaMemcpyHostToDevice, ctx->stream)) != cudaSuccess)
        return gpu_cuda_error(e, err, what);
    return SPMV_OK;
}

/* The resident CSR on the host (freed by spmv_csr_free). */
static int spsell_host_csr(spmv_gpu_ctx *ctx, const spmv_gpu_matrix *m, spmv_csr *h, spmv_error *err)
{
    size_t rb = 0, cb = 0, vb = 0;
    int st;
    memset(h, 0, sizeof *h);
    SPMV_COPY_SHAPE(h, m);
    if ((st = gpu_array_bytes((int64_t)m->rows + 1, 4, &rb, err, "SPSELL: CSR rows")) ||
        (st = gpu_array_bytes(m->nnz, 4, &cb, err, "SPSELL: CSR columns")) ||
        (st = gpu_array_bytes(m->nnz, gpu_vsize(m), &vb, err, "SPSELL: CSR values")))
        return st;
    h->row_ptr = (int32_t *)malloc(rb);
    h->col = (int32_t *)malloc(cb ? cb : 1);
    h->val = malloc(vb ? vb : 1);
    if (!h->row_ptr || !h->col || !h->val)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "SPSELL: cannot allocate a host copy of the CSR (%zu bytes)",
                              rb + cb + vb);
    if ((st = gpu_copy_to_host(ctx, h->row_ptr, m->row_ptr, rb, "SPSELL: CSR rows", err)) ||
        (cb && (st = gpu_copy_to_host(ctx, h->col, m->col, cb, "SPSELL: CSR columns", err))) ||
        (vb && (st = gpu_copy_to_host(ctx, h->val, m->val, vb, "SPSELL: CSR values", err))))
        return st;
    return SPMV_OK;
}

/* The host SPSELL's arrays onto the device. */
static int spsell_upload(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, const spmv_spsell *h, spmv_error *err)
{
    struct gpu_spsell *p = &m->spsell;
    const spmv_psell *a = &h->p;
    size_t ns = (size_t)a->nslices, vs = gpu_vsize(m), nw = (size_t)(a->slots / PK_C);
    int st;
    p->nslices = a->nslices;
    p->slots = a->slots;
    p->nvals = a->val_off[ns];
    p->idx_total = a->idx_off[ns];
    p->nmirrored = h->nmirrored;
    p->v.mode = a->v.mode;
    p->v.ntable = a->v.ntable;
    if ((st = spsell_put(ctx, m, (void **)&p->slot_off, a->slot_off, (ns + 1) * 8, "SPSELL slot offsets", err)) ||
        (st = spsell_put(ctx, m, (void **)&p->idx_off, a->idx_off, (ns + 1) * 8, "SPSELL index offsets", err)) ||
        (st = spsell_put(ctx, m, (void **)&p->val_off, a->val_off, (ns + 1) * 8, "SPSELL value offsets", err)) ||
        (st = spsell_put(ctx, m, (void **)&p->idx_bytes, a->idx_bytes, ns, "SPSELL index widths", err)) ||
        (st = spsell_put(ctx, m, (void **)&p->mirror, h->mirror, ns, "SPSELL mirror flags", err)) ||
        (st = spsell_put(ctx, m, (void **)&p->base, a->base, nw * 4, "SPSELL bases", err)) ||
        (st = spsell_put(ctx, m, (void **)&p->idx, a->idx, (size_t)p->idx_total, "SPSELL column entries", err)) ||
        (a->v.table && (st = spsell_put(ctx, m, &p->v.table, a->v.table, (size_t)a->v.ntable * vs,
                                        "SPSELL value table", err))) ||
        (a->v.data && (st = spsell_put(ctx, m, &p->v.data, a->v.data,
                                       (size_t)p->nvals * spmv_vcode_entry_bytes(a->v.mode, vs), "SPSELL values",
                                       err))))
        return st;
    cudaError_t e = cudaStreamSynchronize(ctx->stream); /* before the host arrays go */
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, "SPSELL upload");
}

int gpu_build_spsell(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, spmv_error *err)
{
    spmv_csr h;
    spmv_spsell s;
    int st;
    memset(&s, 0, sizeof s);
    if ((st = gpu_need_narrow(m, "SPSELL", err)))
        return st;
    if (m->rows != m->cols)
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0,
                              "SPSELL needs a square, exactly symmetric matrix: this one is %d x %d", m->rows,
                              m->cols);
    if (!(st = spsell_host_csr(ctx, m, &h, err)) && !(st = spmv_csr_to_spsell(&h, &ctx->limits, &s, err)))
        st = spsell_upload(ctx, m, &s, err);
    spmv_csr_free(&h);
    spmv_spsell_free(&s);
    if (!st)
        m->spsell.built = true;
    return st;
}

/* A value entry that may be read again (a mirrored slice's lower slots
 * re-read the upper values of earlier rows): through the read-only cache,
 * not streamed past it as pk_value streams. */
template <typename T, int VM>
__device__ __forceinline__ T spsell_value(const void *__restrict__ data, const T *tab, T c, int64_t e)
{
    if constexpr (VM == SPMV_VCODE_RAW)
        return __ldg((const T *)data + e);
    else if constexpr (VM == SPMV_VCODE_CONST)
        return c;
    else if constexpr (VM == SPMV_VCODE_F32)
        return (T)__ldg((const float *)data + e);
    else if constexpr (VM == SPMV_VCODE_U8)
        return tab[__ldg((const unsigned char *)data + e)];
    else
        return __ldg(tab + __ldg((const unsigned short *)data + e));
}

/* Value entry of a lane's row in a lower slot of a mirrored slice (offset
 * -d, column b + lane, b >= 0), by the slot's record in the slice's source
 * table (engine/spmv.h spmv_spsell): the source row j = b + lane lies in
 * slice b/C (src[0]) or the next (src[1]); its entry is the record's plus
 * j's local row, or -1 - the record when that slice is uniform. The
 * step's records are spread over the warp, one int64 a lane (word), and
 * this lane takes its src from lane 2u + (0 or 1) by a shuffle: so the
 * lanes' entries run contiguous in at most two pieces, and no header of
 * the source slices is read. Every lane of the warp calls it. */
__device__ __forceinline__ int64_t spsell_lower(long long word, int u, int32_t b, int lane)
{
    uint32_t j = (uint32_t)b + (uint32_t)lane;
    long long a = __shfl_sync(0xffffffffu, word, 2 * u + (j / PK_C != (uint32_t)b / PK_C));
    return a >= 0 ? a + (int64_t)(j % PK_C) : -1 - a;
}

/* One lane's row of a mirrored slice of width w (diagonal: column base +
 * lane), PK_STEP slots a step as in psell_slots: the step's bases and the
 * records of its slots k < w/2 (from the table at src: lane l < 2*PK_STEP
 * loads int64 l of them, one coalesced load for the warp, two registers a
 * lane) first, then the value entries (the lower ones by spsell_lower),
 * its values and gathers of x, then the sums in slot order, which is
 * column order. */
template <typename T, int VM>
__device__ __forceinline__ T spsell_row(const long long *__restrict__ src, const int32_t *__restrict__ bs, int32_t w,
                                       int lane, int64_t vo, int64_t nv, const void *__restrict__ data, const T *tab,
                                       T c, const T *__restrict__ x)
{
    int32_t k0 = w / 2;
    bool uni = nv != (int64_t)(w - k0) * PK_C;
    int64_t up = uni ? vo - k0 : vo - (int64_t)k0 * PK_C + lane, ustep = uni ? 1 : PK_C; /* slot k >= k0: up + k*ustep */
    const T *xl = x + lane;
    T sum = 0;
    for (int32_t k = 0; k < w; k += PK_STEP) {
        int32_t b[PK_STEP];
        T v[PK_STEP], xv[PK_STEP];
        long long word = lane < 2 * PK_STEP && k + lane / 2 < k0 ? __ldg(src + 2 * k + lane) : 0;
#pragma unroll
        for (int u = 0; u < PK_STEP; u++)
            b[u] = k + u < w ? __ldg(bs + k + u) : 0;
#pragma unroll
        for (int u = 0; u < PK_STEP; u++) {
            int32_t ku = k + u;
            int64_t e = ku < k0 ? spsell_lower(word, u, b[u], lane) : up + ku * ustep;
            v[u] = ku < w ? spsell_value<T, VM>(data, tab, c, e) : (T)0;
            xv[u] = ku < w ? __ldg(xl + b[u]) : (T)0;
        }
#pragma unroll
        for (int u = 0; u < PK_STEP; u++)
            if (k + u < w)
                sum += v[u] * xv[u];
    }
    return sum;
}

/* A warp per slice: a mirrored one by spsell_row (its source table where
 * its index entries would be), another as gpu.psell. */
template <typename T, int VM>
__global__ void __launch_bounds__(1024)
    spsell_kernel(int32_t rows, int32_t ns, const int64_t *__restrict__ slot_off, const int64_t *__restrict__ idx_off,
                  const int64_t *__restrict__ val_off, const uint8_t *__restrict__ ib,
                  const uint8_t *__restrict__ mirror, const int32_t *__restrict__ base,
                  const uint8_t *__restrict__ idx, const void *__restrict__ data, const T *__restrict__ table,
                  int32_t ntable, const T *__restrict__ x, T *__restrict__ y)
{
    __shared__ T shared[VM == SPMV_VCODE_U8 ? 256 : 1];
    int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    bool live = warp < ns, mirrored = false;
    int64_t so = 0, w = 0, io = 0, vo = 0, nv = 0;
    int b = 0;
    if (live) {
        so = __ldg(slot_off + warp);
        w = __ldg(slot_off + warp + 1) - so;
        io = __ldg(idx_off + warp);
        vo = __ldg(val_off + warp);
        nv = __ldg(val_off + warp + 1) - vo;
        b = __ldg(ib + warp);
        mirrored = __ldg(mirror + warp) != 0;
    }
    const T *tab = pk_table<T, VM>(table, ntable, shared);
    T c = VM == SPMV_VCODE_CONST ? __ldg(table) : (T)0;
    if (!live)
        return;
    T sum = mirrored ? spsell_row<T, VM>((const long long *)(idx + io), base + so, (int32_t)w, lane, vo, nv, data,
                                         tab, c, x)
                     : psell_slice<T, VM>(b, nv != w * PK_C, idx + io, base + so, (int32_t)w, lane, vo, data, tab,
                                          c, x);
    int64_t row = warp * PK_C + lane;
    if (row < rows)
        y[row] = sum;
}

template <typename T, int VM> struct spsell_launcher {
    static void launch(struct gpu_launch *l)
    {
        spmv_gpu_matrix *m = l->m;
        const struct gpu_spsell *p = &m->spsell;
        spsell_kernel<T, VM><<<gpu_grid((int64_t)p->nslices * 32, l->block), l->block, 0, l->ctx->stream>>>(
            m->rows, p->nslices, p->slot_off, p->idx_off, p->val_off, p->idx_bytes, p->mirror, p->base, p->idx,
            p->v.data, (const T *)p->v.table, p->v.ntable, (const T *)l->x, (T *)l->y);
    }
};

int gpu_spsell_run(struct gpu_launch *l, spmv_error *err)
{
    return pk_run<spsell_launcher>(l, l->m->spsell.v.mode, "gpu.spsell", err);
}
