/* pcsr.c — cpu.pcsr.omp: OpenMP over the rows of a packed CSR.
 *
 * The CPU reference of the PCSR layout (engine/spmv.h, docs/kernels.md
 * "Packed formats"). Rows are split as cpu.csr.omp splits them (equal
 * shares of non-zeros, spmv_cpu_csr_partition, computed before timing) and
 * each row is summed in column order, in the dtype, as cpu.csr.serial
 * sums it: a column is the row's base plus its 1- or 2-byte delta (a wide
 * row, base < 0, reads its columns from wide_col), or the column itself
 * at 4 bytes; a value is the table entry its code names, the one value of
 * a CONST matrix, or the value itself (RAW). The same products added in
 * the same order, so the result is bitwise the reference's. One loop per
 * dtype x index width x value mode, written once by the macros below, so
 * the inner loop carries no switch.
 */
#include <omp.h>

#include "kernels.h"

/* Rows [r0, r1) with columns stored as themselves; VAL is entry k's value. */
#define PCSR_LOOP_COL(T, VAL)                                                                      \
    for (int32_t i = r0; i < r1; i++) {                                                            \
        T sum = 0;                                                                                 \
        for (int32_t k = rp[i]; k < rp[i + 1]; k++)                                                \
            sum += (VAL) * x[idx[k]];                                                              \
        y[i] = sum;                                                                                \
    }

/* The same with columns as deltas from base[i], or in wide_col for a wide row. */
#define PCSR_LOOP_DELTA(T, VAL)                                                                    \
    for (int32_t i = r0; i < r1; i++) {                                                            \
        T sum = 0;                                                                                 \
        int32_t b = base[i], start = rp[i], end = rp[i + 1];                                       \
        if (b >= 0) {                                                                              \
            for (int32_t k = start; k < end; k++)                                                  \
                sum += (VAL) * x[b + idx[k]];                                                      \
        } else {                                                                                   \
            const int32_t *restrict wc = wide + (-1 - (int64_t)b);                                 \
            for (int32_t k = start; k < end; k++)                                                  \
                sum += (VAL) * x[wc[k - start]];                                                   \
        }                                                                                          \
        y[i] = sum;                                                                                \
    }

/* LOOP once per value mode. */
#define PCSR_MODES(LOOP, T)                                                                        \
    switch (a->v.mode) {                                                                           \
    case SPMV_VCODE_CONST: {                                                                       \
        const T one = table[0];                                                                    \
        LOOP(T, one)                                                                               \
        break;                                                                                     \
    }                                                                                              \
    case SPMV_VCODE_U8: {                                                                          \
        const uint8_t *restrict code = a->v.data;                                                  \
        LOOP(T, table[code[k]])                                                                    \
        break;                                                                                     \
    }                                                                                              \
    case SPMV_VCODE_U16: {                                                                         \
        const uint16_t *restrict code = a->v.data;                                                 \
        LOOP(T, table[code[k]])                                                                    \
        break;                                                                                     \
    }                                                                                              \
    case SPMV_VCODE_RAW: {                                                                         \
        const T *restrict val = a->v.data;                                                         \
        LOOP(T, val[k])                                                                            \
        break;                                                                                     \
    }                                                                                              \
    case SPMV_VCODE_F32: {                                                                         \
        const float *restrict val = a->v.data;                                                     \
        LOOP(T, (T)val[k])                                                                         \
        break;                                                                                     \
    }                                                                                              \
    }

#define DEFINE_PCSR_KERNEL(T, SFX)                                                                 \
    static void pcsr_rows_##SFX(const spmv_pcsr *a, const T *restrict x, T *restrict y,            \
                                int32_t r0, int32_t r1)                                            \
    {                                                                                              \
        const int32_t *restrict rp = a->row_ptr, *restrict base = a->base;                         \
        const int32_t *restrict wide = a->wide_col;                                                \
        const T *restrict table = a->v.table;                                                      \
        if (a->idx_bytes == 1) {                                                                   \
            const uint8_t *restrict idx = a->idx;                                                  \
            PCSR_MODES(PCSR_LOOP_DELTA, T)                                                         \
        } else if (a->idx_bytes == 2) {                                                            \
            const uint16_t *restrict idx = a->idx;                                                 \
            PCSR_MODES(PCSR_LOOP_DELTA, T)                                                         \
        } else {                                                                                   \
            const int32_t *restrict idx = a->idx;                                                  \
            PCSR_MODES(PCSR_LOOP_COL, T)                                                           \
        }                                                                                          \
    }

DEFINE_PCSR_KERNEL(double, f64)
DEFINE_PCSR_KERNEL(float, f32)

void spmv_cpu_pcsr_omp(const spmv_pcsr *a, int32_t nparts, const int32_t *bounds, const void *x, void *y)
{
    /* One iteration per part, as cpu.csr.omp: every part runs even if
     * OpenMP grants fewer threads than asked. */
#pragma omp parallel for schedule(static, 1) num_threads(nparts)
    for (int32_t t = 0; t < nparts; t++) {
        if (a->dtype == SPMV_FLOAT32)
            pcsr_rows_f32(a, x, y, bounds[t], bounds[t + 1]);
        else
            pcsr_rows_f64(a, x, y, bounds[t], bounds[t + 1]);
    }
}
