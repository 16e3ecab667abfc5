/* csr_merge.cu — gpu.csr.merge: merge-path SpMV (after Merrill and Garland,
 * "Merge-based parallel sparse matrix-vector multiplication", SC16).
 *
 * The work is the merge of two lists, the row ends (row_ptr[1..rows]) and
 * the non-zero indices (0..nnz-1): rows + nnz items, cut into equal pieces
 * of ITEMS per thread whatever the row lengths, so a row of 100 000 entries
 * and a million empty rows cost the same per thread. Each thread finds its
 * start on the merge path by binary search along its diagonal, then walks
 * ITEMS steps: a non-zero adds to the running sum, a row end writes the sum
 * to y and restarts it. The sum a thread holds when its piece ends belongs
 * to a row some later thread finishes (its carry-out); a second kernel adds
 * the carries into y with atomics, after every row end has been written.
 * Every row end is consumed by exactly one thread, so every y[i] is written
 * before the fix-up.
 */
#include "gpu.cuh"

#define ITEMS 8

/* The merge-path coordinate of diagonal d: rows consumed (*row) and
 * non-zeros consumed (*nz), with row ends before non-zeros at ties. */
__device__ __forceinline__ void merge_path_search(int64_t d, int32_t rows, int64_t nnz,
                                                  const int32_t *__restrict__ rp, int32_t *row, int64_t *nz)
{
    int64_t lo = d - nnz > 0 ? d - nnz : 0, hi = d < rows ? d : rows;
    while (lo < hi) {
        int64_t pivot = (lo + hi) / 2;
        if (rp[pivot + 1] <= d - pivot - 1)
            lo = pivot + 1;
        else
            hi = pivot;
    }
    *row = (int32_t)lo;
    *nz = d - lo;
}

template <typename T>
__global__ void __launch_bounds__(1024)
    csr_merge_kernel(int32_t rows, int64_t nnz, int64_t nthreads, const int32_t *__restrict__ rp,
                     const int32_t *__restrict__ col, const T *__restrict__ val, const T *__restrict__ x,
                     T *__restrict__ y, int32_t *__restrict__ carry_row, T *__restrict__ carry_val)
{
    int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (t >= nthreads)
        return;
    int64_t total = rows + nnz, d = t * ITEMS, d_end = d + ITEMS < total ? d + ITEMS : total;
    int32_t r;
    int64_t z;
    merge_path_search(d, rows, nnz, rp, &r, &z);
    T s = 0;
    for (; d < d_end; d++) {
        if (z < __ldg(rp + r + 1)) {
            s += __ldg(val + z) * __ldg(x + __ldg(col + z));
            z++;
        } else {
            y[r] = s;
            s = 0;
            r++;
        }
    }
    carry_row[t] = r;
    carry_val[t] = s;
}

template <typename T>
__global__ void __launch_bounds__(1024)
    csr_merge_fixup(int32_t rows, int64_t nthreads, const int32_t *__restrict__ carry_row,
                    const T *__restrict__ carry_val, T *__restrict__ y)
{
    int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (t < nthreads && carry_row[t] < rows && carry_val[t] != (T)0)
        atomicAdd(y + carry_row[t], carry_val[t]);
}

template <typename T> static int launch_merge(struct gpu_launch *l, spmv_error *err)
{
    spmv_gpu_matrix *m = l->m;
    int64_t nthreads = ((int64_t)m->rows + m->nnz + ITEMS - 1) / ITEMS;
    void *scratch = NULL;
    if (nthreads == 0)
        return SPMV_OK;
    int st = gpu_scratch(l->ctx, (size_t)nthreads * (sizeof(T) + 4) + 16, &scratch, err);
    if (st)
        return st;
    T *carry_val = (T *)scratch;
    int32_t *carry_row = (int32_t *)(carry_val + nthreads);
    unsigned grid = gpu_grid(nthreads, l->block);
    csr_merge_kernel<T><<<grid, l->block, 0, l->ctx->stream>>>(m->rows, m->nnz, nthreads, m->row_ptr, m->col,
                                                               (const T *)m->val, (const T *)l->x, (T *)l->y,
                                                               carry_row, carry_val);
    if ((st = gpu_check_launch(err, "gpu.csr.merge")))
        return st;
    csr_merge_fixup<T><<<grid, l->block, 0, l->ctx->stream>>>(m->rows, nthreads, carry_row, carry_val, (T *)l->y);
    return gpu_check_launch(err, "gpu.csr.merge fix-up");
}

int gpu_csr_merge(struct gpu_launch *l, spmv_error *err)
{
    return l->m->dtype == SPMV_FLOAT64 ? launch_merge<double>(l, err) : launch_merge<float>(l, err);
}
