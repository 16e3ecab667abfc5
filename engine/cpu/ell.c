/* ell.c — cpu.ell.omp: OpenMP over blocks of rows of a column-major ELL.
 *
 * Each thread takes blocks of ROW_BLOCK consecutive rows and walks the
 * width columns of slots for that block: the slots of one column are
 * contiguous, so the inner loop is unit-stride over col/val and keeps the
 * block's partial sums in a small array that stays in L1. Padding slots
 * (column -1) are masked with a select on the column, not a branch and not
 * by their zero value: 0 * x[0] would turn an Inf in x[0] into NaN.
 */
#include <omp.h>

#include "kernels.h"

#define ROW_BLOCK 256

#define DEFINE_ELL_KERNEL(T, SFX)                                                                  \
    static void ell_block_##SFX(const int32_t *restrict col, const T *restrict val,               \
                                const T *restrict x, T *restrict y, int64_t stride,               \
                                int32_t width, int32_t r0, int32_t n)                              \
    {                                                                                              \
        T acc[ROW_BLOCK];                                                                          \
        for (int32_t i = 0; i < n; i++)                                                            \
            acc[i] = 0;                                                                            \
        for (int64_t k = 0; k < width; k++) {                                                      \
            const int32_t *restrict c = col + k * stride + r0;                                     \
            const T *restrict v = val + k * stride + r0;                                           \
            for (int32_t i = 0; i < n; i++) {                                                      \
                int32_t j = c[i] < 0 ? 0 : c[i];                                                   \
                T p = v[i] * x[j];                                                                 \
                acc[i] += c[i] < 0 ? (T)0 : p;                                                     \
            }                                                                                      \
        }                                                                                          \
        for (int32_t i = 0; i < n; i++)                                                            \
            y[r0 + i] = acc[i];                                                                    \
    }                                                                                              \
                                                                                                   \
    static void ell_omp_##SFX(const spmv_ell *e, int32_t threads, const T *x, T *y)               \
    {                                                                                              \
        int32_t nblocks = (int32_t)(((int64_t)e->rows + ROW_BLOCK - 1) / ROW_BLOCK);               \
        _Pragma("omp parallel for schedule(static) num_threads(threads)")                          \
        for (int32_t b = 0; b < nblocks; b++) {                                                    \
            int32_t r0 = b * ROW_BLOCK;                                                            \
            int32_t n = e->rows - r0 < ROW_BLOCK ? e->rows - r0 : ROW_BLOCK;                       \
            ell_block_##SFX(e->col, (const T *)e->val, x, y, e->rows, e->width, r0, n);            \
        }                                                                                          \
    }

DEFINE_ELL_KERNEL(double, f64)
DEFINE_ELL_KERNEL(float, f32)

void spmv_cpu_ell_omp(const spmv_ell *e, int32_t threads, const void *x, void *y)
{
    if (threads <= 0)
        threads = omp_get_max_threads();
    if (e->dtype == SPMV_FLOAT32)
        ell_omp_f32(e, threads, x, y);
    else
        ell_omp_f64(e, threads, x, y);
}
