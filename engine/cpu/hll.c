/* hll.c — cpu.hll.omp: OpenMP over the slices of an HLL.
 *
 * A slice is a small column-major ELL block of hack_size rows (stride
 * hack_size) and its own width, so one thread handles a whole slice with
 * its partial sums in a hack_size array on the stack. Slices differ in
 * width (that is HLL's point), so they are handed out dynamically in
 * groups. Padding slots (column -1) are masked by a select on the column
 * as in cpu.ell.omp. The last slice's padding rows are computed and
 * dropped: they hold only padding.
 */
#include <omp.h>

#include "kernels.h"

#define MAX_HACK 1024  /* spmv_param_get(SPMV_PARAM_HACK_SIZE)->max */
#define SLICES_PER_GRAB 8

#define DEFINE_HLL_KERNEL(T, SFX)                                                                  \
    static void hll_slice_##SFX(const int32_t *restrict col, const T *restrict val,               \
                                const T *restrict x, T *restrict y, int32_t h, int32_t width,     \
                                int32_t n)                                                         \
    {                                                                                              \
        T acc[MAX_HACK];                                                                           \
        for (int32_t r = 0; r < h; r++)                                                            \
            acc[r] = 0;                                                                            \
        for (int64_t k = 0; k < width; k++) {                                                      \
            const int32_t *restrict c = col + k * h;                                               \
            const T *restrict v = val + k * h;                                                     \
            for (int32_t r = 0; r < h; r++) {                                                      \
                int32_t j = c[r] < 0 ? 0 : c[r];                                                   \
                T p = v[r] * x[j];                                                                 \
                acc[r] += c[r] < 0 ? (T)0 : p;                                                     \
            }                                                                                      \
        }                                                                                          \
        for (int32_t r = 0; r < n; r++)                                                            \
            y[r] = acc[r];                                                                         \
    }                                                                                              \
                                                                                                   \
    static void hll_omp_##SFX(const spmv_hll *m, int32_t threads, const T *x, T *y)               \
    {                                                                                              \
        const T *val = m->val;                                                                     \
        int32_t h = m->hack_size;                                                                  \
        _Pragma("omp parallel for schedule(dynamic, SLICES_PER_GRAB) num_threads(threads)")        \
        for (int32_t s = 0; s < m->nslices; s++) {                                                 \
            int64_t r0 = (int64_t)s * h;                                                           \
            int32_t n = m->rows - r0 < h ? (int32_t)(m->rows - r0) : h;                            \
            hll_slice_##SFX(m->col + m->slice_off[s], val + m->slice_off[s], x, y + r0, h,         \
                            m->slice_width[s], n);                                                 \
        }                                                                                          \
    }

DEFINE_HLL_KERNEL(double, f64)
DEFINE_HLL_KERNEL(float, f32)

void spmv_cpu_hll_omp(const spmv_hll *h, int32_t threads, const void *x, void *y)
{
    if (threads <= 0)
        threads = omp_get_max_threads();
    if (h->hack_size < 1 || h->hack_size > MAX_HACK)
        return; /* spmv_cpu_run refuses such an HLL before timing */
    if (h->dtype == SPMV_FLOAT32)
        hll_omp_f32(h, threads, x, y);
    else
        hll_omp_f64(h, threads, x, y);
}
