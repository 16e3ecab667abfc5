/* pbsr.c — cpu.pbsr.omp: OpenMP over the block rows of a packed block CSR.
 *
 * The CPU reference of the PBSR layout (engine/spmv.h spmv_pbsr,
 * docs/kernels.md "PBSR"). Block rows are split statically among the
 * threads; a block row is read once, block by block, with a sum for each
 * of its b rows, each adding its row's blocks in order and, within a
 * block, its columns in order: the columns of a CSR row in order, so
 * the same products are added in the same order as cpu.csr.serial adds
 * them, in the dtype, and the result is bitwise the reference's. A
 * block's column is its block column (the block row's base plus a 1- or
 * 2-byte delta, a wide block row's wide_col, or the block column itself
 * at 4 bytes) times b plus c; its value (r, c) is value entry
 * s*b*b + (r*b + c)*nb + k of the block row's nb blocks from s. One loop
 * per dtype x value mode (the macros below), so the inner loop decodes a
 * value without a switch.
 */
#include <omp.h>

#include "kernels.h"

/* Block column of block k of block row I (base b0 of I when idx_bytes < 4). */
static inline int64_t pbsr_bcol(const spmv_pbsr *a, int32_t I, int32_t b0, int64_t k)
{
    switch (a->idx_bytes) {
    case 1: return b0 >= 0 ? b0 + ((const uint8_t *)a->idx)[k] : a->wide_col[-1 - (int64_t)b0 + k - a->block_ptr[I]];
    case 2: return b0 >= 0 ? b0 + ((const uint16_t *)a->idx)[k] : a->wide_col[-1 - (int64_t)b0 + k - a->block_ptr[I]];
    default: return ((const int32_t *)a->idx)[k];
    }
}

/* Block rows [r0, r1) of b = B; VAL is value entry q's value. A block row
 * is read once, block by block: its block column decoded and its B values
 * of x loaded once for the B rows, B sums (one a row) each adding its
 * row's entries in the CSR's order. */
#define PBSR_LOOP_B(T, VAL, B)                                                                               \
    for (int32_t I = r0; I < r1; I++) {                                                                      \
        int64_t s = a->block_ptr[I], nb = a->block_ptr[I + 1] - s, v0 = s * (B) * (B);                        \
        int32_t b0 = a->idx_bytes < 4 ? a->base[I] : 0;                                                      \
        T sum[B];                                                                                            \
        for (int32_t r = 0; r < (B); r++)                                                                    \
            sum[r] = 0;                                                                                      \
        for (int64_t k = 0; k < nb; k++) {                                                                   \
            const T *restrict xb = x + pbsr_bcol(a, I, b0, s + k) * (B);                                     \
            int64_t q = v0 + k; /* entry (r, c) at v0 + (r*B + c)*nb + k: rows, then columns */              \
            for (int32_t r = 0; r < (B); r++)                                                                \
                for (int32_t c = 0; c < (B); c++, q += nb)                                                   \
                    sum[r] += (VAL) * xb[c];                                                                 \
        }                                                                                                    \
        for (int32_t r = 0; r < (B); r++)                                                                    \
            y[(int64_t)I * (B) + r] = sum[r];                                                                \
    }

/* PBSR_LOOP_B with B a constant (b's loops unrolled). */
#define PBSR_LOOP(T, VAL)                                                                                    \
    switch (a->b) {                                                                                          \
    case 2: PBSR_LOOP_B(T, VAL, 2) break;                                                                    \
    case 3: PBSR_LOOP_B(T, VAL, 3) break;                                                                    \
    case 4: PBSR_LOOP_B(T, VAL, 4) break;                                                                    \
    default: PBSR_LOOP_B(T, VAL, 6) break;                                                                   \
    }

#define DEFINE_PBSR_KERNEL(T, SFX)                                                                           \
    static void pbsr_rows_##SFX(const spmv_pbsr *a, const T *restrict x, T *restrict y, int32_t r0,          \
                                int32_t r1)                                                                  \
    {                                                                                                        \
        const T *restrict table = a->v.table;                                                                \
        switch (a->v.mode) {                                                                                 \
        case SPMV_VCODE_CONST: {                                                                             \
            const T one = table[0];                                                                          \
            PBSR_LOOP(T, one)                                                                                \
            break;                                                                                           \
        }                                                                                                    \
        case SPMV_VCODE_U8: {                                                                                \
            const uint8_t *restrict code = a->v.data;                                                        \
            PBSR_LOOP(T, table[code[q]])                                                                     \
            break;                                                                                           \
        }                                                                                                    \
        case SPMV_VCODE_U16: {                                                                               \
            const uint16_t *restrict code = a->v.data;                                                       \
            PBSR_LOOP(T, table[code[q]])                                                                     \
            break;                                                                                           \
        }                                                                                                    \
        case SPMV_VCODE_RAW: {                                                                               \
            const T *restrict val = a->v.data;                                                               \
            PBSR_LOOP(T, val[q])                                                                             \
            break;                                                                                           \
        }                                                                                                    \
        case SPMV_VCODE_F32: {                                                                               \
            const float *restrict val = a->v.data;                                                           \
            PBSR_LOOP(T, (T)val[q])                                                                          \
            break;                                                                                           \
        }                                                                                                    \
        }                                                                                                    \
    }

DEFINE_PBSR_KERNEL(double, f64)
DEFINE_PBSR_KERNEL(float, f32)

void spmv_cpu_pbsr_omp(const spmv_pbsr *a, int32_t threads, const void *x, void *y)
{
    /* One contiguous range of block rows a part; every part runs even if
     * OpenMP grants fewer threads than asked. */
    int32_t nparts = threads > 0 ? threads : 1;
#pragma omp parallel for schedule(static, 1) num_threads(nparts)
    for (int32_t t = 0; t < nparts; t++) {
        int32_t r0 = (int32_t)((int64_t)a->brows * t / nparts), r1 = (int32_t)((int64_t)a->brows * (t + 1) / nparts);
        if (a->dtype == SPMV_FLOAT32)
            pbsr_rows_f32(a, x, y, r0, r1);
        else
            pbsr_rows_f64(a, x, y, r0, r1);
    }
}
