/* hll.c — cpu.hll.omp: OpenMP over the slices of an HLL.
 *
 * A slice is a small column-major ELL block of hack_size rows (stride
 * hack_size) and its own width, so one thread handles a whole slice with
 * its partial sums in a hack_size array on the stack. By default the
 * slices are partitioned statically as the HLL study does it (docs/kernels.md, the
 * studies' items #4): thread t of n
 * takes the contiguous range [t*S/n, (t+1)*S/n) of the S slices, decided
 * before the loop, no scheduling cost and each thread's rows (and y)
 * contiguous. Slices differ in width (that is HLL's point), so on a
 * matrix whose long rows cluster one thread can get most of the work;
 * `schedule` 2 hands the slices out dynamically in groups of
 * SLICES_PER_GRAB instead. Padding slots (column -1) are masked by a select on the column
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
    static void hll_range_##SFX(const spmv_hll *m, const T *x, T *y, int32_t s0, int32_t s1)        \
    {                                                                                              \
        int32_t h = m->hack_size;                                                                  \
        for (int32_t s = s0; s < s1; s++) {                                                        \
            int64_t r0 = (int64_t)s * h;                                                           \
            int32_t n = m->rows - r0 < h ? (int32_t)(m->rows - r0) : h;                            \
            hll_slice_##SFX(m->col + m->slice_off[s], (const T *)m->val + m->slice_off[s], x,      \
                            y + r0, h, m->slice_width[s], n);                                      \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    static void hll_omp_##SFX(const spmv_hll *m, int32_t threads, int32_t schedule, const T *x,   \
                              T *y)                                                                \
    {                                                                                              \
        int32_t ns = m->nslices;                                                                   \
        if (schedule == 2) {                                                                       \
            _Pragma("omp parallel for schedule(dynamic, SLICES_PER_GRAB) num_threads(threads)")    \
            for (int32_t s = 0; s < ns; s++)                                                       \
                hll_range_##SFX(m, x, y, s, s + 1);                                                \
            return;                                                                                \
        }                                                                                          \
        /* one iteration per part: every part runs even if fewer threads come */                  \
        _Pragma("omp parallel for schedule(static, 1) num_threads(threads)")                       \
        for (int32_t t = 0; t < threads; t++)                                                      \
            hll_range_##SFX(m, x, y, (int32_t)((int64_t)ns * t / threads),                         \
                            (int32_t)((int64_t)ns * (t + 1) / threads));                           \
    }

DEFINE_HLL_KERNEL(double, f64)
DEFINE_HLL_KERNEL(float, f32)

void spmv_cpu_hll_omp(const spmv_hll *h, int32_t threads, int32_t schedule, const void *x, void *y)
{
    if (threads <= 0)
        threads = omp_get_max_threads();
    if (h->hack_size < 1 || h->hack_size > MAX_HACK)
        return; /* spmv_cpu_run refuses such an HLL before timing */
    if (h->dtype == SPMV_FLOAT32)
        hll_omp_f32(h, threads, schedule, x, y);
    else
        hll_omp_f64(h, threads, schedule, x, y);
}
