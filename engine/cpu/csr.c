/* csr.c — the CPU CSR kernels: cpu.csr.serial, cpu.csr.chunked, cpu.csr.omp.
 *
 * One row loop (csr_rows_*) serves the serial kernel, the reference and
 * every OpenMP part, so the parallel kernel differs from the reference only
 * in who runs which rows: its result is bitwise the reference's. The loops
 * are written once per dtype by a macro; restrict pointers and a branch-free
 * inner loop let the compiler keep the sum in a register and stream
 * val/col, which is what makes a CSR SpMV run at memory bandwidth. A wide
 * CSR (64-bit row offsets) has the same loop over int64 offsets; the
 * 32-bit one stays as it was, so small matrices lose nothing. cpu.csr.omp
 * on one part (a matrix under spmv_cpu_serial_below() non-zeros at the
 * default thread count) is the serial loop itself, with no team woken.
 */
#include <omp.h>

#include "kernels.h"

/* Rows [r0, r1) of y = A*x, offsets of type OT (32-bit, or 64-bit for a
 * wide CSR). */
#define DEFINE_CSR_ROWS(T, OT, NAME)                                                               \
    static void NAME(const OT *restrict rp, const int32_t *restrict col, const T *restrict val,    \
                     const T *restrict x, T *restrict y, int32_t r0, int32_t r1)                   \
    {                                                                                              \
        for (int32_t i = r0; i < r1; i++) {                                                        \
            T sum = 0;                                                                             \
            OT end = rp[i + 1];                                                                    \
            for (OT k = rp[i]; k < end; k++)                                                       \
                sum += val[k] * x[col[k]];                                                         \
            y[i] = sum;                                                                            \
        }                                                                                          \
    }

#define DEFINE_CSR_KERNELS(T, SFX)                                                                \
    DEFINE_CSR_ROWS(T, int32_t, csr_rows_##SFX)                                                    \
    DEFINE_CSR_ROWS(T, int64_t, csr_rows64_##SFX)                                                  \
                                                                                                   \
    /* One pass of the chunked kernel: the entries of columns below `cend`. */                     \
    static void csr_chunk_pass_##SFX(const int32_t *restrict rp, const int32_t *restrict col,       \
                                     const T *restrict val, const T *restrict x, T *restrict y,    \
                                     int32_t *restrict cursor, int32_t rows, int64_t cend)         \
    {                                                                                              \
        for (int32_t i = 0; i < rows; i++) {                                                       \
            T sum = 0;                                                                             \
            int32_t k = cursor[i], end = rp[i + 1];                                                \
            for (; k < end && col[k] < cend; k++)                                                  \
                sum += val[k] * x[col[k]];                                                         \
            cursor[i] = k;                                                                         \
            y[i] += sum;                                                                           \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    static void csr_chunked_##SFX(const spmv_csr *a, int64_t span, int32_t *cursor, const T *x, T *y)  \
    {                                                                                              \
        for (int32_t i = 0; i < a->rows; i++) {                                                    \
            cursor[i] = a->row_ptr[i];                                                             \
            y[i] = 0;                                                                              \
        }                                                                                          \
        for (int64_t c0 = 0; c0 < a->cols; c0 += span)                                             \
            csr_chunk_pass_##SFX(a->row_ptr, a->col, (const T *)a->val, x, y, cursor, a->rows,     \
                                 c0 + span);                                                       \
    }

DEFINE_CSR_KERNELS(double, f64)
DEFINE_CSR_KERNELS(float, f32)

static void csr_rows(const spmv_csr *a, const void *x, void *y, int32_t r0, int32_t r1)
{
    if (a->row_ptr64 && a->dtype == SPMV_FLOAT32)
        csr_rows64_f32(a->row_ptr64, a->col, a->val, x, y, r0, r1);
    else if (a->row_ptr64)
        csr_rows64_f64(a->row_ptr64, a->col, a->val, x, y, r0, r1);
    else if (a->dtype == SPMV_FLOAT32)
        csr_rows_f32(a->row_ptr, a->col, a->val, x, y, r0, r1);
    else
        csr_rows_f64(a->row_ptr, a->col, a->val, x, y, r0, r1);
}

void spmv_cpu_csr_serial(const spmv_csr *a, const void *x, void *y)
{
    csr_rows(a, x, y, 0, a->rows);
}

void spmv_reference(const spmv_csr *a, const void *x, void *y)
{
    csr_rows(a, x, y, 0, a->rows);
}

void spmv_cpu_csr_chunked(const spmv_csr *a, int64_t span, int32_t *cursor, const void *x, void *y)
{
    if (span < 1)
        span = 1;
    if (a->dtype == SPMV_FLOAT32)
        csr_chunked_f32(a, span, cursor, x, y);
    else
        csr_chunked_f64(a, span, cursor, x, y);
}

/* First row r in [lo, rows] with row_ptr[r] >= target. */
static int32_t lower_bound_row(const spmv_csr *a, int32_t lo, int32_t rows, int64_t target)
{
    int32_t hi = rows;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (spmv_csr_row_begin(a, mid) < target)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void spmv_cpu_csr_partition(const spmv_csr *a, int32_t nparts, int32_t *bounds)
{
    bounds[0] = 0;
    for (int32_t t = 1; t < nparts; t++)
        bounds[t] = lower_bound_row(a, bounds[t - 1], a->rows, a->nnz * t / nparts);
    bounds[nparts] = a->rows;
}

void spmv_cpu_csr_omp(const spmv_csr *a, int32_t nparts, const int32_t *bounds, const void *x, void *y)
{
    if (nparts == 1) { /* small work (spmv_cpu_threads): the serial loop, no team to wake */
        csr_rows(a, x, y, 0, a->rows);
        return;
    }
    /* One iteration per part, not one thread id per part: if OpenMP grants
     * fewer threads than asked, every part still runs. */
#pragma omp parallel for schedule(static, 1) num_threads(nparts)
    for (int32_t t = 0; t < nparts; t++)
        csr_rows(a, x, y, bounds[t], bounds[t + 1]);
}
