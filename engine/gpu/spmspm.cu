/* spmspm.cu — the GPU SpMSpM kernels, C = A*B on two resident CSR matrices
 * (SPEC §8): gpu.spmspm.thread_row, block_row, block_counter, warp_nnz,
 * warp_nnz_wide and cusparse.spgemm. spmv_gpu_spmspm is the entry point
 * (the SpMSpM counterpart of run.cu's spmv_gpu_run).
 *
 * The kernels are the steps of the study this operation comes from
 * (docs/kernels.md, "The studies' items"), each one changing who owns which
 * products and how output space is found:
 *   thread_row     kernel 0: a thread per row of A; the row's output
 *                  columns are visited in chunks of 32 starting at the
 *                  smallest column not yet done (empty chunks are
 *                  skipped), accumulated in a private array with a bit
 *                  mask, emitted in mask order.
 *   block_row      kernel 1: a block per row of A; a shared-memory
 *                  accumulator of CHUNK_W columns filled with shared
 *                  atomics.
 *     Both take `output`: 1 (atomic, the study's form) gives every entry
 *     of C its slot with one atomicAdd on a global counter, so C comes out
 *     as unordered COO triplets (row, col, val) that are then put in order
 *     (below); 2 (scan) counts each row first (same walk, no values),
 *     scans the counts into row_ptr and writes each row in place in order
 *     (block_row compacting with ballot/popc per 32-column tile).
 *   block_counter  kernel 2: block_row's accumulation, but output goes
 *                  through a block-private counter (shared atomics, any
 *                  order) into space the block reserved with one global
 *                  atomic; rows land anywhere in a staging buffer, are
 *                  gathered to their CSR place and sorted per row (CUB
 *                  segmented sort).
 *   warp_nnz       `accumulate` 1, kernel 3: a block per row of A, a warp
 *                  per non-zero a_ik of the row walking row k of B 32
 *                  entries at a time (coalesced) into a shared row
 *                  accumulator of 32 columns (shared atomics); the first
 *                  warp writes the chunk back: a ballot of the lanes whose
 *                  column was hit, one global atomic for the popc, each
 *                  lane's slot from the popc of the lanes below it. COO
 *                  triplets, then put in order.
 *                  `accumulate` 2: a warp per non-zero of A (grid-wide),
 *                  every warp writing its products as (row*cols + col,
 *                  value) pairs through one atomic per warp per 32-entry
 *                  chunk (ballot/popc compaction); a radix sort and a
 *                  reduce-by-key then sum duplicates into sorted CSR.
 *   warp_nnz_wide  kernel 4: warp_nnz `accumulate` 1 with chunks of 512
 *                  columns, every warp of the block writing its 32-column
 *                  parts of the chunk the same way (one atomic per warp per
 *                  part).
 *   cusparse.spgemm  cuSPARSE's generic SpGEMM: work estimation, compute,
 *                  copy.
 * Like thread_row and block_row, the chunked kernels start each chunk at
 * the smallest column past the last one (B's rows are sorted), so a wide B
 * costs chunks only where C has entries.
 *
 * Whatever the internal order, C leaves here as sorted CSR without
 * duplicates. The COO triplets of the atomic kernels become CSR the way
 * block_counter's staged rows do: each producing kernel also leaves its
 * rows' entry counts, a scan makes row_ptr, a scatter puts each triplet in
 * its row (a per-row atomic cursor), and the segmented sort orders each
 * row by column. The scan forms write rows in place in order; warp_nnz
 * `accumulate` 2 sorts; cuSPARSE's rows are checked and sorted on the host
 * if its output is not (not timed). The pattern is the symbolic product for
 * every kernel (see spmv.h): an entry is written where a product landed,
 * even when the sum is 0.
 *
 * Timing: buffers whose size follows from A and B alone (row counts, C
 * sized for min(multiply-adds, rows*cols) entries, triplet and sort
 * buffers, CUB's temporary storage, cuSPARSE's buffers from an untimed
 * first pass) are allocated once per call, before warm-up; a timed run is
 * every pass of the product on the stream between two CUDA events, so
 * kernels compare on the work they do, not on cudaMalloc. Temporaries are
 * tracked allocations of a holder matrix (gpu_alloc: the reserve is
 * respected and they show in the device's bytes while the call runs), all
 * freed when the call returns. C is copied back to the host at its exact
 * size.
 */
#include <stdlib.h>
#include <string.h>

#include <cub/cub.cuh>
#include <cuda/std/functional>
#include <new>

#include "gpu.cuh"

#define CHUNK_T 32          /* thread_row: columns per private chunk */
#define CHUNK_W 1024        /* block_row / block_counter: columns per shared chunk */
#define CHUNK_WARP 32       /* warp_nnz (kernel 3): columns per chunk, one warp writes */
#define CHUNK_WIDE 512      /* warp_nnz_wide (kernel 4): columns per chunk, every warp writes */
#define TILES (CHUNK_W / GPU_WARP)
#define NO_COL INT32_MAX
#define MAX_RUNS 1000000
#define MAX_GRID (1u << 20)

/* SP_WARP_ROW is warp_nnz `accumulate` 1 (the study's kernel 3),
 * SP_WARP_NNZ its `accumulate` 2. */
enum sp_kind { SP_THREAD_ROW, SP_BLOCK_ROW, SP_BLOCK_COUNTER, SP_WARP_NNZ, SP_WARP_ROW, SP_WARP_WIDE, SP_CUSPARSE };

/* Everything one call holds: operands, sizes, device buffers. */
struct sp_call {
    spmv_gpu_ctx *ctx;
    spmv_gpu_matrix *a, *b;
    spmv_gpu_matrix *hold;        /* owner of the temporaries (gpu_alloc) */
    enum sp_kind kind;
    bool triplets;                /* C comes as COO triplets through a global counter */
    int block;
    int64_t madds, cap;           /* multiply-adds; C's capacity */
    int32_t *counts, *row_ptr, *ccol;
    void *cval;
    /* block_counter; the triplet kernels (urow their rows) */
    int32_t *seg, *urow, *ucol, *gcol;
    void *uval, *gval;
    unsigned long long *counter;
    /* warp_nnz */
    uint64_t *keys, *keys_alt, *ukeys;
    void *vals, *vals_alt;
    int64_t *nruns;
    void *cub_tmp;
    size_t cub_bytes;
    /* cusparse */
    cusparseSpMatDescr_t da, db;
    void *sbuf1, *sbuf2;
    size_t sbytes1, sbytes2;
};

/* ---------------------------------------------------------- device code */

/* Multiply-adds of the product, into *total. */
__global__ void madds_kernel(int32_t rows, const int32_t *__restrict__ arp, const int32_t *__restrict__ acol,
                             const int32_t *__restrict__ brp, unsigned long long *total)
{
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= rows)
        return;
    unsigned long long n = 0;
    for (int32_t p = arp[i]; p < arp[i + 1]; p++)
        n += (unsigned long long)(brp[acol[p] + 1] - brp[acol[p]]);
    if (n)
        atomicAdd(total, n);
}

/* B row k's entries whose columns fall in the chunk [c0, c0 + width), each
 * handed to take(j - c0, q) (j its column, q its place in B); the first
 * column past the chunk lowers *next (B's rows are sorted: the rest lie
 * further right). thread_row's and the block kernels' inner loop. */
template <typename F>
__device__ __forceinline__ void chunk_b_row(const int32_t *__restrict__ brp, const int32_t *__restrict__ bcol,
                                            int32_t k, int32_t c0, int32_t width, int32_t *next, F take)
{
    for (int32_t q = brp[k]; q < brp[k + 1]; q++) {
        int32_t j = bcol[q];
        if (j < c0)
            continue;
        if (j - c0 >= width) {
            *next = min(*next, j);
            break;
        }
        take(j - c0, q);
    }
}

/* C as unordered COO triplets: the atomic kernels take each entry's slot
 * (or a warp's run of slots) from one global counter. */
template <typename T> struct triplets {
    unsigned long long *counter;
    int32_t *__restrict__ row, *__restrict__ col;
    T *__restrict__ val;
};

/* One entry through the global counter (kernels 0 and 1). */
template <typename T> __device__ __forceinline__ void emit(const triplets<T> &out, int32_t i, int32_t j, T v)
{
    unsigned long long pos = atomicAdd(out.counter, 1ull);
    out.row[pos] = i;
    out.col[pos] = j;
    out.val[pos] = v;
}

/* A warp's entries through one atomic (kernels 3 and 4): the lanes with
 * `hit` write (row i, column j, v) to consecutive slots in lane order;
 * returns how many did. Every lane of the warp must call it. */
template <typename T>
__device__ __forceinline__ int warp_emit(const triplets<T> &out, bool hit, int32_t i, int32_t j, T v)
{
    int lane = threadIdx.x % GPU_WARP;
    unsigned ball = __ballot_sync(GPU_FULL_MASK, hit);
    if (!ball)
        return 0;
    unsigned long long base = 0;
    if (lane == 0)
        base = atomicAdd(out.counter, (unsigned long long)__popc(ball));
    base = __shfl_sync(GPU_FULL_MASK, base, 0);
    if (hit) {
        unsigned long long pos = base + __popc(ball & ((1u << lane) - 1));
        out.row[pos] = i;
        out.col[pos] = j;
        out.val[pos] = v;
    }
    return __popc(ball);
}

/* What a pass of thread_row or block_row does: count each row's entries
 * (counts[i]), fill rows in place at crp[i] in column order, or emit
 * triplets through the global counter (counts[i] too, for the sort). */
enum sp_pass { PASS_COUNT, PASS_FILL, PASS_ATOMIC };

/* thread_row (kernel 0), one pass of it. */
template <typename T, sp_pass PASS>
__global__ void __launch_bounds__(1024)
    thread_row_kernel(int32_t rows, const int32_t *__restrict__ arp, const int32_t *__restrict__ acol,
                      const T *__restrict__ aval, const int32_t *__restrict__ brp, const int32_t *__restrict__ bcol,
                      const T *__restrict__ bval, int32_t *counts, const int32_t *__restrict__ crp,
                      int32_t *__restrict__ ccol, T *__restrict__ cval, triplets<T> trip)
{
    const bool values = PASS != PASS_COUNT;
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= rows)
        return;
    T acc[CHUNK_T];
    int32_t out = PASS == PASS_FILL ? crp[i] : 0, c0 = 0;
    for (;;) {
        uint32_t mask = 0;
        int32_t next = NO_COL;
        for (int32_t p = arp[i]; p < arp[i + 1]; p++) {
            int32_t k = acol[p];
            T a = values ? aval[p] : T(0);
            chunk_b_row(brp, bcol, k, c0, CHUNK_T, &next, [&](int32_t d, int32_t q) {
                uint32_t bit = 1u << d;
                if (values)
                    acc[d] = (mask & bit) ? acc[d] + a * bval[q] : a * bval[q];
                mask |= bit;
            });
        }
        if (PASS == PASS_COUNT) {
            out += __popc(mask);
        } else {
            for (uint32_t m = mask; m; m &= m - 1) {
                int b = __ffs(m) - 1;
                if (PASS == PASS_ATOMIC) {
                    emit(trip, (int32_t)i, c0 + b, acc[b]);
                    out++;
                } else {
                    ccol[out] = c0 + b;
                    cval[out++] = acc[b];
                }
            }
        }
        if (next == NO_COL)
            break;
        c0 = next;
    }
    if (PASS != PASS_FILL)
        counts[i] = out;
}

/* What block_row and block_counter keep in shared memory. */
template <typename T> struct chunk_smem {
    T acc[CHUNK_W];
    int32_t flag[CHUNK_W];
    int32_t tile_off[TILES + 1];
    int32_t next, count;
};

/* Accumulates row i's products with columns in [c0, c0 + CHUNK_W) into the
 * shared chunk; the block's smallest column past it goes to s->next. */
template <typename T, bool VALUES>
__device__ void chunk_accumulate(chunk_smem<T> *s, int64_t i, int32_t c0, const int32_t *__restrict__ arp,
                                 const int32_t *__restrict__ acol, const T *__restrict__ aval,
                                 const int32_t *__restrict__ brp, const int32_t *__restrict__ bcol,
                                 const T *__restrict__ bval)
{
    for (int t = threadIdx.x; t < CHUNK_W; t += blockDim.x) {
        s->flag[t] = 0;
        if (VALUES)
            s->acc[t] = T(0);
    }
    if (threadIdx.x == 0)
        s->next = NO_COL;
    __syncthreads();
    int32_t next = NO_COL;
    for (int32_t p = arp[i] + threadIdx.x; p < arp[i + 1]; p += blockDim.x) {
        int32_t k = acol[p];
        T a = VALUES ? aval[p] : T(0);
        chunk_b_row(brp, bcol, k, c0, CHUNK_W, &next, [&](int32_t d, int32_t q) {
            if (VALUES)
                atomicAdd(&s->acc[d], a * bval[q]);
            s->flag[d] = 1;
        });
    }
    if (next != NO_COL)
        atomicMin(&s->next, next);
    __syncthreads();
}

/* Ordered compaction: tile t (32 columns) starts at s->tile_off[t]; the
 * block's total is s->tile_off[TILES]. */
template <typename T> __device__ void chunk_offsets(chunk_smem<T> *s)
{
    int warp = threadIdx.x / GPU_WARP, lane = threadIdx.x % GPU_WARP, nwarps = blockDim.x / GPU_WARP;
    for (int t = warp; t < TILES; t += nwarps) {
        unsigned ball = __ballot_sync(GPU_FULL_MASK, s->flag[t * GPU_WARP + lane] != 0);
        if (lane == 0)
            s->tile_off[t + 1] = __popc(ball);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        s->tile_off[0] = 0;
        for (int t = 0; t < TILES; t++)
            s->tile_off[t + 1] += s->tile_off[t];
    }
    __syncthreads();
}

/* block_row (kernel 1), one pass of it: a block per row. */
template <typename T, sp_pass PASS>
__global__ void __launch_bounds__(1024)
    block_row_kernel(const int32_t *__restrict__ arp, const int32_t *__restrict__ acol, const T *__restrict__ aval,
                     const int32_t *__restrict__ brp, const int32_t *__restrict__ bcol, const T *__restrict__ bval,
                     int32_t *counts, const int32_t *__restrict__ crp, int32_t *__restrict__ ccol,
                     T *__restrict__ cval, triplets<T> trip)
{
    __shared__ chunk_smem<T> s;
    int64_t i = blockIdx.x;
    int warp = threadIdx.x / GPU_WARP, lane = threadIdx.x % GPU_WARP, nwarps = blockDim.x / GPU_WARP;
    int32_t out = PASS == PASS_FILL ? crp[i] : 0, c0 = 0, mine = 0;
    if (threadIdx.x == 0)
        s.count = 0; /* ordered before its atomics by chunk_accumulate's barrier */
    for (;;) {
        chunk_accumulate<T, PASS != PASS_COUNT>(&s, i, c0, arp, acol, aval, brp, bcol, bval);
        if (PASS == PASS_ATOMIC) { /* the study's kernel 1: one global atomic per entry */
            for (int c = threadIdx.x; c < CHUNK_W; c += blockDim.x)
                if (s.flag[c]) {
                    emit(trip, (int32_t)i, c0 + c, s.acc[c]);
                    mine++;
                }
        } else {
            chunk_offsets(&s);
            if (PASS == PASS_FILL)
                for (int t = warp; t < TILES; t += nwarps) {
                    int c = t * GPU_WARP + lane;
                    unsigned ball = __ballot_sync(GPU_FULL_MASK, s.flag[c] != 0);
                    if (s.flag[c]) {
                        int32_t pos = out + s.tile_off[t] + __popc(ball & ((1u << lane) - 1));
                        ccol[pos] = c0 + c;
                        cval[pos] = s.acc[c];
                    }
                }
            out += s.tile_off[TILES];
        }
        int32_t next = s.next;
        __syncthreads(); /* everyone has read s before the next chunk clears it */
        if (next == NO_COL)
            break;
        c0 = next;
    }
    if (PASS == PASS_ATOMIC) {
        if (mine)
            atomicAdd(&s.count, mine);
        __syncthreads();
        if (threadIdx.x == 0)
            counts[i] = s.count;
    } else if (PASS == PASS_COUNT && threadIdx.x == 0) {
        counts[i] = out;
    }
}

/* block_counter: the row's space reserved with one global atomic; entries
 * appended through the block's own counter in any order. */
template <typename T>
__global__ void __launch_bounds__(1024)
    block_counter_kernel(const int32_t *__restrict__ arp, const int32_t *__restrict__ acol,
                         const T *__restrict__ aval, const int32_t *__restrict__ brp,
                         const int32_t *__restrict__ bcol, const T *__restrict__ bval,
                         const int32_t *__restrict__ counts, unsigned long long *counter, int32_t *seg,
                         int32_t *__restrict__ ucol, T *__restrict__ uval)
{
    __shared__ chunk_smem<T> s;
    __shared__ int32_t base;
    int64_t i = blockIdx.x;
    if (threadIdx.x == 0) {
        base = counts[i] ? (int32_t)atomicAdd(counter, (unsigned long long)counts[i]) : 0;
        seg[i] = base;
        s.count = 0;
    }
    int32_t c0 = 0;
    for (;;) {
        chunk_accumulate<T, true>(&s, i, c0, arp, acol, aval, brp, bcol, bval);
        for (int c = threadIdx.x; c < CHUNK_W; c += blockDim.x)
            if (s.flag[c]) {
                int32_t pos = base + atomicAdd(&s.count, 1);
                ucol[pos] = c0 + c;
                uval[pos] = s.acc[c];
            }
        int32_t next = s.next;
        __syncthreads();
        if (next == NO_COL)
            break;
        c0 = next;
    }
}

/* Row i's staged entries to its CSR place (a warp per row). */
template <typename T>
__global__ void gather_rows_kernel(int32_t rows, const int32_t *__restrict__ seg, const int32_t *__restrict__ crp,
                                   const int32_t *__restrict__ ucol, const T *__restrict__ uval,
                                   int32_t *__restrict__ gcol, T *__restrict__ gval)
{
    int64_t w = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / GPU_WARP;
    int lane = threadIdx.x % GPU_WARP;
    int64_t nw = (int64_t)gridDim.x * blockDim.x / GPU_WARP;
    for (int64_t i = w; i < rows; i += nw)
        for (int32_t p = lane; p < crp[i + 1] - crp[i]; p += GPU_WARP) {
            gcol[crp[i] + p] = ucol[seg[i] + p];
            gval[crp[i] + p] = uval[seg[i] + p];
        }
}

/* warp_nnz `accumulate` 1 (kernel 3, W = CHUNK_WARP, warp 0 writes) and
 * warp_nnz_wide (kernel 4, W = CHUNK_WIDE, every warp writes): a block per
 * row i of A, warp w taking the row's non-zeros w, w + nwarps, ...; each
 * walks its row k of B 32 entries at a time, adding the products whose
 * columns fall in [c0, c0 + W) into the shared accumulator. B's rows are
 * sorted, so a warp stops at the first stride that reaches past the chunk,
 * and the smallest column past it starts the next chunk. */
template <typename T, int W>
__global__ void __launch_bounds__(1024)
    warp_row_kernel(const int32_t *__restrict__ arp, const int32_t *__restrict__ acol, const T *__restrict__ aval,
                    const int32_t *__restrict__ brp, const int32_t *__restrict__ bcol, const T *__restrict__ bval,
                    int32_t *counts, triplets<T> trip)
{
    __shared__ T acc[W];
    __shared__ int32_t flag[W];
    __shared__ int32_t next_s, total_s;
    int32_t i = (int32_t)blockIdx.x;
    int warp = threadIdx.x / GPU_WARP, lane = threadIdx.x % GPU_WARP, nwarps = blockDim.x / GPU_WARP;
    int32_t c0 = 0, a0 = arp[i], a1 = arp[i + 1];
    if (threadIdx.x == 0)
        total_s = 0;
    for (;;) {
        for (int t = threadIdx.x; t < W; t += blockDim.x) {
            acc[t] = T(0);
            flag[t] = 0;
        }
        if (threadIdx.x == 0)
            next_s = NO_COL;
        __syncthreads();
        int32_t next = NO_COL;
        for (int32_t p = a0 + warp; p < a1; p += nwarps) { /* warp-uniform: p, k, end */
            int32_t k = acol[p], end = brp[k + 1];
            T a = aval[p];
            for (int32_t q0 = brp[k]; q0 < end; q0 += GPU_WARP) {
                int32_t q = q0 + lane;
                bool valid = q < end;
                int32_t j = valid ? bcol[q] : 0;
                bool past = valid && j - c0 >= W; /* j >= c0 there: no overflow */
                if (valid && j >= c0 && !past) {
                    atomicAdd(&acc[j - c0], a * bval[q]);
                    flag[j - c0] = 1;
                }
                if (past)
                    next = min(next, j);
                if (__any_sync(GPU_FULL_MASK, past))
                    break;
            }
        }
        if (next != NO_COL)
            atomicMin(&next_s, next);
        __syncthreads();
        /* write-back: kernel 3 the first warp only (W is one warp wide),
         * kernel 4 every warp over its 32-column parts */
        for (int c = warp * GPU_WARP; c < W; c += nwarps * GPU_WARP) {
            int n = warp_emit(trip, flag[c + lane] != 0, i, c0 + c + lane, acc[c + lane]);
            if (n && lane == 0)
                atomicAdd(&total_s, n);
        }
        int32_t nx = next_s;
        __syncthreads(); /* the chunk is written and next_s read before it is cleared */
        if (nx == NO_COL)
            break;
        c0 = nx;
    }
    if (threadIdx.x == 0)
        counts[i] = total_s;
}

/* The triplets into their rows (row_ptr = crp, the scan of counts): each
 * takes a slot in its row from counts[row], counting it back down to 0
 * (ready for the next run); the order within a row is any, the segmented
 * sort fixes it. */
template <typename T>
__global__ void scatter_rows_kernel(int64_t n, const int32_t *__restrict__ urow, const int32_t *__restrict__ ucol,
                                    const T *__restrict__ uval, const int32_t *__restrict__ crp, int32_t *counts,
                                    int32_t *__restrict__ gcol, T *__restrict__ gval)
{
    int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (e >= n)
        return;
    int32_t r = urow[e];
    int32_t pos = crp[r] + atomicSub(&counts[r], 1) - 1;
    gcol[pos] = ucol[e];
    gval[pos] = uval[e];
}

/* warp_nnz: a warp per non-zero of A (grid-stride over warps). */
template <typename T>
__global__ void __launch_bounds__(1024)
    warp_nnz_kernel(int64_t nnz, uint64_t cols, const int32_t *__restrict__ arow, const int32_t *__restrict__ acol,
                    const T *__restrict__ aval, const int32_t *__restrict__ brp, const int32_t *__restrict__ bcol,
                    const T *__restrict__ bval, unsigned long long *counter, uint64_t *__restrict__ keys,
                    T *__restrict__ vals)
{
    int64_t w = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / GPU_WARP;
    int64_t nw = (int64_t)gridDim.x * blockDim.x / GPU_WARP;
    int lane = threadIdx.x % GPU_WARP;
    for (int64_t p = w; p < nnz; p += nw) {
        int32_t k = acol[p], end = brp[k + 1];
        uint64_t rowkey = (uint64_t)arow[p] * cols;
        T a = aval[p];
        for (int32_t q0 = brp[k]; q0 < end; q0 += GPU_WARP) {
            int32_t q = q0 + lane;
            bool valid = q < end;
            unsigned ball = __ballot_sync(GPU_FULL_MASK, valid);
            unsigned long long base = 0;
            if (lane == 0)
                base = atomicAdd(counter, (unsigned long long)__popc(ball));
            base = __shfl_sync(GPU_FULL_MASK, base, 0);
            if (valid) {
                unsigned long long pos = base + __popc(ball & ((1u << lane) - 1));
                keys[pos] = rowkey + (uint64_t)bcol[q];
                vals[pos] = a * bval[q];
            }
        }
    }
}

/* Sorted unique keys (row*cols + col) to CSR: col, and row_ptr from where
 * each row's run starts. Thread e looks at entries e-1 and e. */
__global__ void keys_to_csr_kernel(int32_t rows, uint64_t cols, const uint64_t *__restrict__ ukeys,
                                   const int64_t *__restrict__ nruns, int64_t cap, int32_t *__restrict__ crp,
                                   int32_t *__restrict__ ccol)
{
    int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int64_t n = *nruns;
    if (e > n || e > cap)
        return;
    int64_t prev = e > 0 ? (int64_t)(ukeys[e - 1] / cols) : -1;
    int64_t cur = e < n ? (int64_t)(ukeys[e] / cols) : rows;
    if (e < n)
        ccol[e] = (int32_t)(ukeys[e] % cols);
    for (int64_t r = prev + 1; r <= cur; r++)
        crp[r] = (int32_t)e;
}

/* ------------------------------------------------------------ host side */

static int launched(spmv_error *err, const char *what) { return gpu_check_launch(err, what); }

static int sp_alloc(struct sp_call *c, void **out, int64_t n, size_t size, const char *what, spmv_error *err)
{
    size_t bytes = 0;
    int st = gpu_array_bytes(n, size, &bytes, err, what);
    return st ? st : gpu_alloc(c->ctx, c->hold, out, bytes, what, err);
}

static int cuda_ok(cudaError_t e, spmv_error *err, const char *what)
{
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, what);
}

/* Multiply-adds on the device (one reduction, untimed). */
static int count_madds(struct sp_call *c, spmv_error *err)
{
    unsigned long long *d = NULL, h = 0;
    int st = sp_alloc(c, (void **)&d, 1, sizeof *d, "SpMSpM work count", err);
    if (st)
        return st;
    if ((st = cuda_ok(cudaMemsetAsync(d, 0, sizeof *d, c->ctx->stream), err, "cudaMemsetAsync")))
        return st;
    if (c->a->rows > 0) {
        madds_kernel<<<gpu_grid(c->a->rows, 256), 256, 0, c->ctx->stream>>>(c->a->rows, c->a->row_ptr, c->a->col,
                                                                           c->b->row_ptr, d);
        if ((st = launched(err, "SpMSpM work count")))
            return st;
    }
    if ((st = cuda_ok(cudaMemcpyAsync(&h, d, sizeof h, cudaMemcpyDeviceToHost, c->ctx->stream), err,
                      "copying the work count")) ||
        (st = cuda_ok(cudaStreamSynchronize(c->ctx->stream), err, "SpMSpM work count")))
        return st;
    c->madds = (int64_t)h;
    gpu_release(c->ctx, c->hold, d);
    return SPMV_OK;
}

/* CUB temporary storage: the largest any of this call's CUB steps needs. */
template <typename T> static int size_cub(struct sp_call *c, spmv_error *err)
{
    size_t need = 0, n = 0;
    cudaStream_t s = c->ctx->stream;
    int32_t rows = c->a->rows;
    cub::DeviceScan::ExclusiveSum(NULL, n, c->counts, c->row_ptr, rows + 1, s);
    need = n;
    if (c->kind == SP_BLOCK_COUNTER || c->triplets) {
        cub::DeviceSegmentedSort::SortPairs(NULL, n, c->gcol, c->ccol, (T *)c->gval, (T *)c->cval, c->cap, rows,
                                            c->row_ptr, c->row_ptr + 1, s);
        need = n > need ? n : need;
    }
    if (c->kind == SP_WARP_NNZ) {
        cub::DeviceRadixSort::SortPairs(NULL, n, c->keys, c->keys_alt, (T *)c->vals, (T *)c->vals_alt, c->madds, 0,
                                        64, s);
        need = n > need ? n : need;
        cub::DeviceReduce::ReduceByKey(NULL, n, c->keys_alt, c->ukeys, (T *)c->vals_alt, (T *)c->cval, c->nruns,
                                       ::cuda::std::plus<T>{}, c->madds, s);
        need = n > need ? n : need;
    }
    c->cub_bytes = need;
    return sp_alloc(c, &c->cub_tmp, (int64_t)need, 1, "SpMSpM CUB storage", err);
}

/* All bits set (column -1, NaN in both dtypes), untimed: an entry of C
 * that no pass writes shows in a comparison as a wrong column or a NaN,
 * not as a plausible value. */
static int poison(struct sp_call *c, void *p, int64_t bytes)
{
    if (!p || bytes <= 0)
        return SPMV_OK;
    return cudaMemsetAsync(p, 0xff, (size_t)bytes, c->ctx->stream) == cudaSuccess ? SPMV_OK : SPMV_ERR_DEVICE;
}

template <typename T> static int buffers(struct sp_call *c, spmv_error *err)
{
    int64_t rows = c->a->rows;
    size_t vs = sizeof(T);
    int st;
    if ((st = sp_alloc(c, (void **)&c->counts, rows + 1, 4, "SpMSpM row counts", err)) ||
        (st = sp_alloc(c, (void **)&c->row_ptr, rows + 1, 4, "C row_ptr", err)) ||
        (st = sp_alloc(c, (void **)&c->ccol, c->cap, 4, "C col", err)) ||
        (st = sp_alloc(c, &c->cval, c->cap, vs, "C val", err)))
        return st;
    if (c->kind == SP_BLOCK_COUNTER &&
        ((st = sp_alloc(c, (void **)&c->seg, rows, 4, "SpMSpM row segments", err)) ||
         (st = sp_alloc(c, (void **)&c->counter, 1, 8, "SpMSpM counter", err)) ||
         (st = sp_alloc(c, (void **)&c->ucol, c->cap, 4, "SpMSpM staging", err)) ||
         (st = sp_alloc(c, &c->uval, c->cap, vs, "SpMSpM staging", err)) ||
         (st = sp_alloc(c, (void **)&c->gcol, c->cap, 4, "SpMSpM gather", err)) ||
         (st = sp_alloc(c, &c->gval, c->cap, vs, "SpMSpM gather", err))))
        return st;
    if (c->triplets &&
        ((st = sp_alloc(c, (void **)&c->counter, 1, 8, "SpMSpM counter", err)) ||
         (st = sp_alloc(c, (void **)&c->urow, c->cap, 4, "C as COO triplets", err)) ||
         (st = sp_alloc(c, (void **)&c->ucol, c->cap, 4, "C as COO triplets", err)) ||
         (st = sp_alloc(c, &c->uval, c->cap, vs, "C as COO triplets", err)) ||
         (st = sp_alloc(c, (void **)&c->gcol, c->cap, 4, "SpMSpM rows to sort", err)) ||
         (st = sp_alloc(c, &c->gval, c->cap, vs, "SpMSpM rows to sort", err))))
        return st;
    if (c->kind == SP_WARP_NNZ &&
        ((st = sp_alloc(c, (void **)&c->counter, 1, 8, "SpMSpM counter", err)) ||
         (st = sp_alloc(c, (void **)&c->nruns, 1, 8, "SpMSpM run count", err)) ||
         (st = sp_alloc(c, (void **)&c->keys, c->madds, 8, "SpMSpM product keys", err)) ||
         (st = sp_alloc(c, (void **)&c->keys_alt, c->madds, 8, "SpMSpM product keys", err)) ||
         (st = sp_alloc(c, (void **)&c->ukeys, c->cap, 8, "SpMSpM unique keys", err)) ||
         (st = sp_alloc(c, &c->vals, c->madds, vs, "SpMSpM products", err)) ||
         (st = sp_alloc(c, &c->vals_alt, c->madds, vs, "SpMSpM products", err))))
        return st;
    if (c->kind != SP_CUSPARSE && (st = size_cub<T>(c, err)))
        return st;
    if ((st = poison(c, c->row_ptr, (rows + 1) * 4)) || (st = poison(c, c->ccol, c->cap * 4)) ||
        (st = poison(c, c->cval, c->cap * (int64_t)vs)) ||
        (c->triplets && ((st = poison(c, c->urow, c->cap * 4)) || (st = poison(c, c->ucol, c->cap * 4)) ||
                         (st = poison(c, c->uval, c->cap * (int64_t)vs)))))
        return spmv_error_set(err, st, 0, "poisoning C");
    return cuda_ok(cudaMemsetAsync(c->counts, 0, (size_t)(rows + 1) * 4, c->ctx->stream), err, "cudaMemsetAsync");
}

/* row_ptr = exclusive scan of counts (counts[rows] stays 0). */
static int scan_counts(struct sp_call *c, spmv_error *err)
{
    size_t n = c->cub_bytes;
    return cuda_ok(cub::DeviceScan::ExclusiveSum(c->cub_tmp, n, c->counts, c->row_ptr, c->a->rows + 1,
                                                 c->ctx->stream),
                   err, "scanning C's row counts");
}

template <typename T> static triplets<T> trip_of(const struct sp_call *c)
{
    triplets<T> t = {c->counter, c->urow, c->ucol, (T *)c->uval};
    return t;
}

/* C's entry count, the last of row_ptr, to the host (the sort's item
 * count). With `counter`, the triplet counter too, which must agree: a
 * row count that misses an entry, or an entry written twice, shows here. */
static int read_nnz(struct sp_call *c, bool counter, const char *what, int32_t *nnz, spmv_error *err)
{
    cudaStream_t s = c->ctx->stream;
    unsigned long long written = 0;
    int st;
    *nnz = 0;
    if ((st = cuda_ok(cudaMemcpyAsync(nnz, c->row_ptr + c->a->rows, 4, cudaMemcpyDeviceToHost, s), err,
                      "reading C's size")) ||
        (counter && (st = cuda_ok(cudaMemcpyAsync(&written, c->counter, 8, cudaMemcpyDeviceToHost, s), err,
                                  "reading C's size"))) ||
        (st = cuda_ok(cudaStreamSynchronize(s), err, what)))
        return st;
    if (counter && written != (unsigned long long)*nnz)
        return spmv_error_set(err, SPMV_ERR_DEVICE, 0, "%s: %llu entries written, the row counts say %d", what,
                              written, *nnz);
    return SPMV_OK;
}

/* Each row of (gcol, gval), placed by row_ptr, sorted by column into C. */
template <typename T> static int sort_rows(struct sp_call *c, int32_t nnz, const char *what, spmv_error *err)
{
    size_t n = c->cub_bytes;
    return cuda_ok(cub::DeviceSegmentedSort::SortPairs(c->cub_tmp, n, c->gcol, c->ccol, (const T *)c->gval,
                                                       (T *)c->cval, nnz, c->a->rows, c->row_ptr, c->row_ptr + 1,
                                                       c->ctx->stream),
                   err, what);
}

/* The atomic kernels' COO triplets (and row counts) to sorted CSR: scan,
 * scatter into rows, segmented sort. */
template <typename T> static int triplets_to_csr(struct sp_call *c, const char *what, spmv_error *err)
{
    int32_t nnz = 0;
    int st;
    if ((st = scan_counts(c, err)) || (st = read_nnz(c, true, what, &nnz, err)))
        return st;
    if (nnz == 0)
        return SPMV_OK;
    scatter_rows_kernel<T><<<gpu_grid(nnz, 256), 256, 0, c->ctx->stream>>>(
        nnz, c->urow, c->ucol, (const T *)c->uval, c->row_ptr, c->counts, c->gcol, (T *)c->gval);
    if ((st = launched(err, what)))
        return st;
    return sort_rows<T>(c, nnz, what, err);
}

static int zero_counter(struct sp_call *c, spmv_error *err)
{
    return cuda_ok(cudaMemsetAsync(c->counter, 0, 8, c->ctx->stream), err, "cudaMemsetAsync");
}

template <typename T> static int run_thread_row(struct sp_call *c, spmv_error *err)
{
    spmv_gpu_matrix *a = c->a, *b = c->b;
    unsigned g = gpu_grid(a->rows, c->block);
    cudaStream_t s = c->ctx->stream;
    triplets<T> none = {};
    int st;
    if (c->triplets) {
        if ((st = zero_counter(c, err)))
            return st;
        thread_row_kernel<T, PASS_ATOMIC><<<g, c->block, 0, s>>>(a->rows, a->row_ptr, a->col, (const T *)a->val,
                                                                 b->row_ptr, b->col, (const T *)b->val, c->counts,
                                                                 NULL, NULL, NULL, trip_of<T>(c));
        if ((st = launched(err, "gpu.spmspm.thread_row")))
            return st;
        return triplets_to_csr<T>(c, "gpu.spmspm.thread_row to CSR", err);
    }
    thread_row_kernel<T, PASS_COUNT><<<g, c->block, 0, s>>>(a->rows, a->row_ptr, a->col, (const T *)a->val,
                                                            b->row_ptr, b->col, (const T *)b->val, c->counts, NULL,
                                                            NULL, NULL, none);
    if ((st = launched(err, "gpu.spmspm.thread_row count")) || (st = scan_counts(c, err)))
        return st;
    thread_row_kernel<T, PASS_FILL><<<g, c->block, 0, s>>>(a->rows, a->row_ptr, a->col, (const T *)a->val,
                                                           b->row_ptr, b->col, (const T *)b->val, NULL, c->row_ptr,
                                                           c->ccol, (T *)c->cval, none);
    return launched(err, "gpu.spmspm.thread_row fill");
}

template <typename T> static int count_block_rows(struct sp_call *c, const char *what, spmv_error *err)
{
    spmv_gpu_matrix *a = c->a, *b = c->b;
    triplets<T> none = {};
    block_row_kernel<T, PASS_COUNT><<<(unsigned)a->rows, c->block, 0, c->ctx->stream>>>(
        a->row_ptr, a->col, (const T *)a->val, b->row_ptr, b->col, (const T *)b->val, c->counts, NULL, NULL, NULL,
        none);
    int st = launched(err, what);
    return st ? st : scan_counts(c, err);
}

template <typename T> static int run_block_row(struct sp_call *c, spmv_error *err)
{
    spmv_gpu_matrix *a = c->a, *b = c->b;
    cudaStream_t s = c->ctx->stream;
    triplets<T> none = {};
    int st;
    if (c->triplets) {
        if ((st = zero_counter(c, err)))
            return st;
        block_row_kernel<T, PASS_ATOMIC><<<(unsigned)a->rows, c->block, 0, s>>>(
            a->row_ptr, a->col, (const T *)a->val, b->row_ptr, b->col, (const T *)b->val, c->counts, NULL, NULL,
            NULL, trip_of<T>(c));
        if ((st = launched(err, "gpu.spmspm.block_row")))
            return st;
        return triplets_to_csr<T>(c, "gpu.spmspm.block_row to CSR", err);
    }
    if ((st = count_block_rows<T>(c, "gpu.spmspm.block_row count", err)))
        return st;
    block_row_kernel<T, PASS_FILL><<<(unsigned)a->rows, c->block, 0, s>>>(
        a->row_ptr, a->col, (const T *)a->val, b->row_ptr, b->col, (const T *)b->val, NULL, c->row_ptr, c->ccol,
        (T *)c->cval, none);
    return launched(err, "gpu.spmspm.block_row fill");
}

template <typename T> static int run_block_counter(struct sp_call *c, spmv_error *err)
{
    spmv_gpu_matrix *a = c->a, *b = c->b;
    cudaStream_t s = c->ctx->stream;
    int32_t nnz = 0;
    int st = count_block_rows<T>(c, "gpu.spmspm.block_counter count", err);
    if (st || (st = zero_counter(c, err)))
        return st;
    block_counter_kernel<T><<<(unsigned)a->rows, c->block, 0, s>>>(a->row_ptr, a->col, (const T *)a->val,
                                                                    b->row_ptr, b->col, (const T *)b->val, c->counts,
                                                                    c->counter, c->seg, c->ucol, (T *)c->uval);
    if ((st = launched(err, "gpu.spmspm.block_counter fill")))
        return st;
    gather_rows_kernel<T><<<gpu_grid((int64_t)a->rows * GPU_WARP, 256) < MAX_GRID
                                ? gpu_grid((int64_t)a->rows * GPU_WARP, 256)
                                : MAX_GRID,
                            256, 0, s>>>(a->rows, c->seg, c->row_ptr, c->ucol, (const T *)c->uval, c->gcol,
                                         (T *)c->gval);
    if ((st = launched(err, "gpu.spmspm.block_counter gather")) ||
        (st = read_nnz(c, false, "gpu.spmspm.block_counter", &nnz, err)))
        return st;
    return sort_rows<T>(c, nnz, "gpu.spmspm.block_counter segmented sort", err);
}

/* warp_nnz `accumulate` 1 (kernel 3) and warp_nnz_wide (kernel 4). */
template <typename T> static int run_warp_row(struct sp_call *c, spmv_error *err)
{
    spmv_gpu_matrix *a = c->a, *b = c->b;
    cudaStream_t s = c->ctx->stream;
    const char *name = c->kind == SP_WARP_WIDE ? "gpu.spmspm.warp_nnz_wide" : "gpu.spmspm.warp_nnz";
    int st = zero_counter(c, err);
    if (st)
        return st;
    if (c->kind == SP_WARP_WIDE)
        warp_row_kernel<T, CHUNK_WIDE><<<(unsigned)a->rows, c->block, 0, s>>>(
            a->row_ptr, a->col, (const T *)a->val, b->row_ptr, b->col, (const T *)b->val, c->counts, trip_of<T>(c));
    else
        warp_row_kernel<T, CHUNK_WARP><<<(unsigned)a->rows, c->block, 0, s>>>(
            a->row_ptr, a->col, (const T *)a->val, b->row_ptr, b->col, (const T *)b->val, c->counts, trip_of<T>(c));
    if ((st = launched(err, name)))
        return st;
    return triplets_to_csr<T>(c, name, err);
}

static int key_bits(uint64_t max_key)
{
    int bits = 1;
    while (bits < 64 && (max_key >> bits))
        bits++;
    return bits;
}

template <typename T> static int run_warp_nnz(struct sp_call *c, spmv_error *err)
{
    spmv_gpu_matrix *a = c->a, *b = c->b;
    cudaStream_t s = c->ctx->stream;
    uint64_t cols = (uint64_t)(b->cols > 0 ? b->cols : 1);
    size_t n = c->cub_bytes;
    int st;
    unsigned g = gpu_grid(a->nnz * GPU_WARP, c->block);
    if ((st = cuda_ok(cudaMemsetAsync(c->counter, 0, 8, s), err, "cudaMemsetAsync")))
        return st;
    warp_nnz_kernel<T><<<g < MAX_GRID ? g : MAX_GRID, c->block, 0, s>>>(
        a->nnz, cols, a->coo_row, a->col, (const T *)a->val, b->row_ptr, b->col, (const T *)b->val, c->counter,
        c->keys, (T *)c->vals);
    if ((st = launched(err, "gpu.spmspm.warp_nnz products")))
        return st;
    int bits = key_bits((uint64_t)a->rows * cols - 1);
    if ((st = cuda_ok(cub::DeviceRadixSort::SortPairs(c->cub_tmp, n, c->keys, c->keys_alt, (const T *)c->vals,
                                                      (T *)c->vals_alt, c->madds, 0, bits, s),
                      err, "gpu.spmspm.warp_nnz sort")))
        return st;
    n = c->cub_bytes;
    if ((st = cuda_ok(cub::DeviceReduce::ReduceByKey(c->cub_tmp, n, c->keys_alt, c->ukeys, (const T *)c->vals_alt,
                                                     (T *)c->cval, c->nruns, ::cuda::std::plus<T>{}, c->madds, s),
                      err, "gpu.spmspm.warp_nnz reduce")))
        return st;
    keys_to_csr_kernel<<<gpu_grid(c->cap + 1, 256), 256, 0, s>>>(a->rows, cols, c->ukeys, c->nruns, c->cap,
                                                                  c->row_ptr, c->ccol);
    return launched(err, "gpu.spmspm.warp_nnz to CSR");
}

/* ------------------------------------------------------------- cuSPARSE */

static cudaDataType sp_type(const spmv_gpu_matrix *m) { return m->dtype == SPMV_FLOAT64 ? CUDA_R_64F : CUDA_R_32F; }

static int sparse_ok(cusparseStatus_t s, spmv_error *err, const char *what)
{
    return s == CUSPARSE_STATUS_SUCCESS ? SPMV_OK : gpu_sparse_error(s, err, what);
}

static int csr_descr(cusparseSpMatDescr_t *d, int64_t rows, int64_t cols, int64_t nnz, int32_t *rp, int32_t *col,
                     void *val, cudaDataType ty, spmv_error *err, const char *what)
{
    return sparse_ok(cusparseCreateCsr(d, rows, cols, nnz, rp, col, val, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                       CUSPARSE_INDEX_BASE_ZERO, ty),
                     err, what);
}

static int cusparse_descriptors(struct sp_call *c, spmv_error *err)
{
    spmv_gpu_matrix *a = c->a, *b = c->b;
    int st = csr_descr(&c->da, a->rows, a->cols, a->nnz, a->row_ptr, a->col, a->val, sp_type(a), err,
                       "cusparseCreateCsr(A)");
    return st ? st
              : csr_descr(&c->db, b->rows, b->cols, b->nnz, b->row_ptr, b->col, b->val, sp_type(b), err,
                          "cusparseCreateCsr(B)");
}

/* A cuSPARSE buffer: its size asked for (`sizing`: allocated, untimed), or
 * checked against the one the sizing pass allocated. */
static int sparse_buffer(struct sp_call *c, bool sizing, size_t need, void **buf, size_t *have, spmv_error *err)
{
    if (sizing) {
        *have = need;
        return sp_alloc(c, buf, (int64_t)need, 1, "cuSPARSE SpGEMM buffer", err);
    }
    if (need > *have)
        return spmv_error_set(err, SPMV_ERR_DEVICE, 0, "cuSPARSE SpGEMM asks for %zu bytes, %zu the first time",
                              need, *have);
    return SPMV_OK;
}

/* One SpGEMM, all of cuSPARSE's phases: work estimation (size query,
 * then the estimation), compute (the same), copy into C's arrays. C's
 * descriptor is made afresh each time, as cuSPARSE expects an empty C.
 * With `sizing` the buffers are allocated as asked (the untimed first
 * pass); later runs reuse them (same operands, same sizes). */
template <typename T> static int run_cusparse(struct sp_call *c, bool sizing, spmv_error *err)
{
    cusparseHandle_t h = c->ctx->sparse;
    cusparseSpGEMMDescr_t d = NULL;
    cusparseSpMatDescr_t dc = NULL;
    T one = 1, zero = 0;
    cusparseOperation_t op = CUSPARSE_OPERATION_NON_TRANSPOSE;
    cudaDataType ty = sp_type(c->a);
    cusparseSpGEMMAlg_t alg = CUSPARSE_SPGEMM_DEFAULT;
    size_t n1 = 0, n2 = 0;
    int64_t r, cc, nz;
    int st = sparse_ok(cusparseSpGEMM_createDescr(&d), err, "cusparseSpGEMM_createDescr");
    if (st || (st = csr_descr(&dc, c->a->rows, c->b->cols, 0, c->row_ptr, NULL, NULL, ty, err, "cusparseCreateCsr(C)")))
        goto done;
    if ((st = sparse_ok(cusparseSpGEMM_workEstimation(h, op, op, &one, c->da, c->db, &zero, dc, ty, alg, d, &n1, NULL),
                        err, "cusparseSpGEMM_workEstimation")) ||
        (st = sparse_buffer(c, sizing, n1, &c->sbuf1, &c->sbytes1, err)) ||
        (st = sparse_ok(cusparseSpGEMM_workEstimation(h, op, op, &one, c->da, c->db, &zero, dc, ty, alg, d, &n1,
                                                      c->sbuf1),
                        err, "cusparseSpGEMM_workEstimation")) ||
        (st = sparse_ok(cusparseSpGEMM_compute(h, op, op, &one, c->da, c->db, &zero, dc, ty, alg, d, &n2, NULL), err,
                        "cusparseSpGEMM_compute")) ||
        (st = sparse_buffer(c, sizing, n2, &c->sbuf2, &c->sbytes2, err)) ||
        (st = sparse_ok(cusparseSpGEMM_compute(h, op, op, &one, c->da, c->db, &zero, dc, ty, alg, d, &n2, c->sbuf2),
                        err, "cusparseSpGEMM_compute")) ||
        (st = sparse_ok(cusparseSpMatGetSize(dc, &r, &cc, &nz), err, "cusparseSpMatGetSize")))
        goto done;
    if (nz > c->cap) {
        st = spmv_error_set(err, SPMV_ERR_DEVICE, 0, "cuSPARSE SpGEMM: C has %lld entries, more than its bound %lld",
                            (long long)nz, (long long)c->cap);
        goto done;
    }
    if ((st = sparse_ok(cusparseCsrSetPointers(dc, c->row_ptr, c->ccol, c->cval), err, "cusparseCsrSetPointers")))
        goto done;
    st = sparse_ok(cusparseSpGEMM_copy(h, op, op, &one, c->da, c->db, &zero, dc, ty, alg, d), err,
                   "cusparseSpGEMM_copy");
done:
    if (dc)
        cusparseDestroySpMat(dc);
    if (d)
        cusparseSpGEMM_destroyDescr(d);
    return st;
}

/* --------------------------------------------------------------- a call */

/* One product: every pass, queued on the stream. */
template <typename T> static int product(struct sp_call *c, spmv_error *err)
{
    if (c->madds == 0) /* nothing to multiply: C is all empty rows */
        return cuda_ok(cudaMemsetAsync(c->row_ptr, 0, ((size_t)c->a->rows + 1) * 4, c->ctx->stream), err,
                       "cudaMemsetAsync");
    switch (c->kind) {
    case SP_THREAD_ROW: return run_thread_row<T>(c, err);
    case SP_BLOCK_ROW: return run_block_row<T>(c, err);
    case SP_BLOCK_COUNTER: return run_block_counter<T>(c, err);
    case SP_WARP_NNZ: return run_warp_nnz<T>(c, err);
    case SP_WARP_ROW:
    case SP_WARP_WIDE: return run_warp_row<T>(c, err);
    case SP_CUSPARSE: return run_cusparse<T>(c, false, err);
    }
    return SPMV_ERR_INVALID;
}

static int timed_runs(struct sp_call *c, int32_t warmup, int32_t runs, double *times, spmv_error *err)
{
    spmv_gpu_ctx *ctx = c->ctx;
    for (int32_t i = 0; i < warmup + runs; i++) {
        cudaError_t e = cudaEventRecord(ctx->ev_start, ctx->stream);
        int st = e != cudaSuccess                  ? gpu_cuda_error(e, err, "cudaEventRecord")
                 : c->a->dtype == SPMV_FLOAT64 ? product<double>(c, err)
                                               : product<float>(c, err);
        if (st)
            return st;
        float ms = 0;
        if ((e = gpu_timed_stop(ctx, &ms)) != cudaSuccess)
            return gpu_cuda_error(e, err, "timing an SpMSpM");
        if (i >= warmup)
            times[i - warmup] = ms;
    }
    return SPMV_OK;
}

/* Buffers, cuSPARSE descriptors and (cuSPARSE) its buffers, untimed. */
static int prepare(struct sp_call *c, spmv_error *err)
{
    int st;
    if ((st = count_madds(c, err)))
        return st;
    int64_t dense = (int64_t)c->a->rows * c->b->cols;
    c->cap = c->madds < dense ? c->madds : dense;
    if (c->cap > INT32_MAX)
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0,
                              "C = A*B may hold up to %lld non-zeros (%lld multiply-adds); CSR indices are 32-bit",
                              (long long)c->cap, (long long)c->madds);
    if (c->kind == SP_WARP_NNZ && (st = gpu_ensure_format(c->ctx, c->a, SPMV_FMT_COO, err)))
        return st;
    st = c->a->dtype == SPMV_FLOAT64 ? buffers<double>(c, err) : buffers<float>(c, err);
    if (st || c->kind != SP_CUSPARSE || c->madds == 0)
        return st;
    if ((st = cusparse_descriptors(c, err)))
        return st;
    return c->a->dtype == SPMV_FLOAT64 ? run_cusparse<double>(c, true, err) : run_cusparse<float>(c, true, err);
}

/* C's size after the last run, then C to the host. */
static int download(struct sp_call *c, spmv_csr *out, spmv_error *err)
{
    cudaStream_t s = c->ctx->stream;
    int32_t rows = c->a->rows, last = 0;
    size_t vs = spmv_dtype_size(c->a->dtype);
    int st;
    if ((st = cuda_ok(cudaMemcpyAsync(&last, c->row_ptr + rows, 4, cudaMemcpyDeviceToHost, s), err,
                      "reading C's size")) ||
        (st = cuda_ok(cudaStreamSynchronize(s), err, "SpMSpM")))
        return st;
    memset(out, 0, sizeof *out);
    out->rows = rows;
    out->cols = c->b->cols;
    out->dtype = c->a->dtype;
    out->nnz = last;
    out->row_ptr = (int32_t *)malloc(((size_t)rows + 1) * 4);
    out->col = (int32_t *)malloc((size_t)last * 4 + 4);
    out->val = malloc((size_t)last * vs + vs);
    if (!out->row_ptr || !out->col || !out->val) {
        spmv_csr_free(out);
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "cannot allocate C on the host (%d rows, %d non-zeros)", rows,
                              last);
    }
    if ((st = cuda_ok(cudaMemcpyAsync(out->row_ptr, c->row_ptr, ((size_t)rows + 1) * 4, cudaMemcpyDeviceToHost, s),
                      err, "copying C")) ||
        (last && (st = cuda_ok(cudaMemcpyAsync(out->col, c->ccol, (size_t)last * 4, cudaMemcpyDeviceToHost, s), err,
                               "copying C"))) ||
        (last && (st = cuda_ok(cudaMemcpyAsync(out->val, c->cval, (size_t)last * vs, cudaMemcpyDeviceToHost, s),
                               err, "copying C"))) ||
        (st = cuda_ok(cudaStreamSynchronize(s), err, "copying C"))) {
        spmv_csr_free(out);
        return st;
    }
    /* cuSPARSE does not promise sorted rows: make sure (untimed) */
    if (c->kind == SP_CUSPARSE && (st = spmv_csr_sort_rows(out, err)))
        spmv_csr_free(out);
    return st;
}

static void call_free(struct sp_call *c)
{
    if (c->da)
        cusparseDestroySpMat(c->da);
    if (c->db)
        cusparseDestroySpMat(c->db);
    if (c->hold)
        gpu_matrix_destroy(c->ctx, c->hold); /* synchronises, then frees every temporary */
}

static int kind_of(const spmv_kernel *k, enum sp_kind *out)
{
    static const struct { spmv_impl id; enum sp_kind kind; } kinds[] = {
        {SPMV_IMPL_GPU_SPMSPM_THREAD_ROW, SP_THREAD_ROW},       {SPMV_IMPL_GPU_SPMSPM_BLOCK_ROW, SP_BLOCK_ROW},
        {SPMV_IMPL_GPU_SPMSPM_BLOCK_COUNTER, SP_BLOCK_COUNTER}, {SPMV_IMPL_GPU_SPMSPM_WARP_NNZ, SP_WARP_NNZ},
        {SPMV_IMPL_GPU_SPMSPM_WARP_NNZ_WIDE, SP_WARP_WIDE}, {SPMV_IMPL_CUSPARSE_SPGEMM, SP_CUSPARSE},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (k->impl == kinds[i].id) {
            *out = kinds[i].kind;
            return 0;
        }
    return -1;
}

bool gpu_spmspm_bound(const spmv_kernel *k)
{
    enum sp_kind kind;
    return kind_of(k, &kind) == 0;
}

static int check_call(spmv_gpu_ctx *ctx, const spmv_kernel *k, spmv_gpu_matrix *a, spmv_gpu_matrix *b,
                      spmv_csr *c, int32_t warmup, int32_t runs, spmv_error *err)
{
    if (!ctx || !k || !a || !b || !c)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "GPU SpMSpM: missing context, kernel, operand or C");
    if (k->device != SPMV_DEVICE_GPU || k->op != SPMV_OP_SPMSPM)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s is not a GPU SpMSpM kernel", k->name);
    int st = spmv_spmspm_check_shapes(a->rows, a->cols, a->dtype, b->rows, b->cols, b->dtype, err);
    if (st)
        return st;
    if (warmup < 0 || runs < 1 || runs > MAX_RUNS || warmup > MAX_RUNS)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "GPU SpMSpM: warmup %d / runs %d out of range (runs 1..%d)",
                              warmup, runs, MAX_RUNS);
    return SPMV_OK;
}

extern "C" int spmv_gpu_spmspm(spmv_gpu_ctx *ctx, const spmv_kernel *k, spmv_gpu_matrix *a, spmv_gpu_matrix *b,
                               const spmv_params *p, int32_t warmup, int32_t runs, spmv_csr *c, spmv_stats *stats,
                               spmv_error *err)
{
    struct sp_call call;
    spmv_params par;
    double *times = NULL;
    int st;
    memset(&call, 0, sizeof call);
    if (c)
        memset(c, 0, sizeof *c);
    if ((st = check_call(ctx, k, a, b, c, warmup, runs, err)))
        return st;
    if (kind_of(k, &call.kind) != 0)
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s has no GPU implementation in this build", k->name);
    if ((st = spmv_params_resolve(k, p, &par, err)))
        return st;
    call.ctx = ctx;
    call.a = a;
    call.b = b;
    call.block = par.v[SPMV_PARAM_BLOCK_SIZE] > 0 ? par.v[SPMV_PARAM_BLOCK_SIZE] : 256;
    if (call.kind == SP_WARP_NNZ && par.v[SPMV_PARAM_ACCUMULATE] != 2)
        call.kind = SP_WARP_ROW; /* accumulate 1: the study's kernel 3 */
    call.triplets = call.kind == SP_WARP_ROW || call.kind == SP_WARP_WIDE ||
                    ((call.kind == SP_THREAD_ROW || call.kind == SP_BLOCK_ROW) && par.v[SPMV_PARAM_OUTPUT] != 2);
    cudaError_t e = cudaSetDevice(ctx->device);
    if (e != cudaSuccess)
        return gpu_cuda_error(e, err, "cudaSetDevice");
    if ((st = gpu_need_narrow(a, "SpMSpM (A)", err)) || (st = gpu_need_narrow(b, "SpMSpM (B)", err)))
        return st;
    /* nothing of A or B is evicted while the product reads them */
    unsigned busy_a = a->busy, busy_b = b->busy;
    a->busy = SPMV_FMT_ALL;
    b->busy = SPMV_FMT_ALL;
    if (!(call.hold = new (std::nothrow) spmv_gpu_matrix()) || !(times = (double *)malloc((size_t)runs * sizeof *times))) {
        st = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "GPU SpMSpM: out of host memory");
        goto done;
    }
    if ((st = prepare(&call, err)) || (st = timed_runs(&call, warmup, runs, times, err)) ||
        (st = download(&call, c, err)))
        goto done;
    if (stats) { /* bytes: A, B and C as CSR, once */
        int64_t vs = (int64_t)spmv_dtype_size(a->dtype);
        int64_t bytes = ((int64_t)a->rows + b->rows + c->rows + 3) * 4 + (a->nnz + b->nnz + c->nnz) * (4 + vs);
        spmv_stats_compute(times, runs, warmup, 2 * call.madds, bytes, stats);
    }
done:
    if (st)
        cudaStreamSynchronize(ctx->stream);
    call_free(&call);
    free(times);
    a->busy = busy_a;
    b->busy = busy_b;
    return st;
}
