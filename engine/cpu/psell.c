/* psell.c — cpu.psell.omp: OpenMP over the 32-row slices of a packed
 * sliced ELL.
 *
 * The CPU reference of the PSELL layout (engine/spmv.h, docs/kernels.md
 * "Packed formats"). A slice is a column-major ELL block of 32 rows, so a
 * thread takes whole slices, handed out dynamically in groups (slices
 * differ in width), with the 32 partial sums on the stack. Slot k of local
 * row r holds a 1-, 2- or 4-byte index (the slice's width): with 1 or 2
 * the column is the slot's base plus the index, with 4 the index itself;
 * an index of all ones is padding. A diagonal slice (width 0) holds no
 * index: the column is the slot's base plus r, and no slot is padding. A
 * uniform slice holds one value a slot, which every row of the slot
 * reads. A value is decoded as in cpu.pcsr.omp.
 * Padding is masked with a select on the index, never by its value (code
 * 0 or 0.0): it reads a valid x (the slot's base, or x[0]) and leaves the
 * sum untouched, so an Inf or NaN in x cannot leak in and a row is summed
 * exactly as cpu.csr.serial sums it, in column order, in the dtype.
 */
#include <stdbool.h>

#include <omp.h>

#include "kernels.h"

#define C SPMV_PSELL_C
#define SLICES_PER_GRAB 8

/* Slots of one slice: IT the index type, KIND 0 a diagonal slice (no
 * indices: the column is the slot's base plus r), 1 indices that are
 * deltas from the slot's base, 2 indices that are the columns; VAL the
 * value of entry e0 + r·rs (rs 0 in a uniform slice: slot k's one value at
 * e0). */
#define PSELL_LOOP(T, IT, KIND, VAL)                                                               \
    for (int64_t k = 0; k < w; k++) {                                                              \
        const IT *restrict c = KIND ? idx + k * C : idx;                                           \
        int32_t b = base[s0 + k];                                                                  \
        int64_t e0 = v0 + k * (uni ? 1 : C); /* value entry of local row 0 (CONST reads none) */   \
        (void)e0;                                                                                  \
        for (int32_t r = 0; r < C; r++) {                                                          \
            bool pad = KIND && c[r] == (IT)-1;                                                     \
            int32_t j = KIND == 0   ? b + r                                                        \
                        : KIND == 1 ? b + (pad ? 0 : (int32_t)c[r])                                \
                                    : (pad ? 0 : (int32_t)c[r]);                                   \
            T p = (VAL) * x[j];                                                                    \
            acc[r] = pad ? acc[r] : acc[r] + p;                                                    \
        }                                                                                          \
    }

#define DEFINE_PSELL_SLICE(T, SFX, IT, ISFX, KIND)                                                 \
    static void psell_slice_##SFX##_##ISFX(const spmv_psell *a, int32_t s, const T *restrict x,    \
                                           T *restrict y, int32_t n)                               \
    {                                                                                              \
        T acc[C];                                                                                  \
        const IT *restrict idx = (const IT *)(a->idx + a->idx_off[s]);                             \
        const int32_t *restrict base = a->base;                                                    \
        const T *restrict table = a->v.table;                                                      \
        int64_t s0 = a->slot_off[s], w = a->slot_off[s + 1] - s0, v0 = a->val_off[s];              \
        bool uni = a->val_off[s + 1] - v0 != w * C; /* a uniform slice: a value a slot */          \
        int64_t rs = uni ? 0 : 1;                                                                  \
        (void)rs;                                                                                  \
        for (int32_t r = 0; r < C; r++)                                                            \
            acc[r] = 0;                                                                            \
        switch (a->v.mode) {                                                                       \
        case SPMV_VCODE_CONST: {                                                                   \
            const T one = table[0];                                                                \
            PSELL_LOOP(T, IT, KIND, one)                                                           \
            break;                                                                                 \
        }                                                                                          \
        case SPMV_VCODE_U8: {                                                                      \
            const uint8_t *restrict code = a->v.data;                                              \
            PSELL_LOOP(T, IT, KIND, table[code[e0 + r * rs]])                                      \
            break;                                                                                 \
        }                                                                                          \
        case SPMV_VCODE_U16: {                                                                     \
            const uint16_t *restrict code = a->v.data;                                             \
            PSELL_LOOP(T, IT, KIND, table[code[e0 + r * rs]])                                      \
            break;                                                                                 \
        }                                                                                          \
        case SPMV_VCODE_RAW: {                                                                     \
            const T *restrict val = a->v.data;                                                     \
            PSELL_LOOP(T, IT, KIND, val[e0 + r * rs])                                              \
            break;                                                                                 \
        }                                                                                          \
        case SPMV_VCODE_F32: {                                                                     \
            const float *restrict val = a->v.data;                                                 \
            PSELL_LOOP(T, IT, KIND, (T)val[e0 + r * rs])                                           \
            break;                                                                                 \
        }                                                                                          \
        }                                                                                          \
        for (int32_t r = 0; r < n; r++)                                                            \
            y[r] = acc[r];                                                                         \
    }

#define DEFINE_PSELL_KERNEL(T, SFX)                                                                \
    DEFINE_PSELL_SLICE(T, SFX, uint8_t, diag, 0)                                                   \
    DEFINE_PSELL_SLICE(T, SFX, uint8_t, u8, 1)                                                     \
    DEFINE_PSELL_SLICE(T, SFX, uint16_t, u16, 1)                                                   \
    DEFINE_PSELL_SLICE(T, SFX, int32_t, i32, 2)                                                    \
                                                                                                   \
    static void psell_omp_##SFX(const spmv_psell *a, int32_t threads, const T *x, T *y)            \
    {                                                                                              \
        _Pragma("omp parallel for schedule(dynamic, SLICES_PER_GRAB) num_threads(threads)")        \
        for (int32_t s = 0; s < a->nslices; s++) {                                                 \
            int64_t r0 = (int64_t)s * C;                                                           \
            int32_t n = a->rows - r0 < C ? (int32_t)(a->rows - r0) : C;                            \
            if (a->idx_bytes[s] == 0)                                                              \
                psell_slice_##SFX##_diag(a, s, x, y + r0, n);                                      \
            else if (a->idx_bytes[s] == 1)                                                         \
                psell_slice_##SFX##_u8(a, s, x, y + r0, n);                                        \
            else if (a->idx_bytes[s] == 2)                                                         \
                psell_slice_##SFX##_u16(a, s, x, y + r0, n);                                       \
            else                                                                                   \
                psell_slice_##SFX##_i32(a, s, x, y + r0, n);                                       \
        }                                                                                          \
    }

DEFINE_PSELL_KERNEL(double, f64)
DEFINE_PSELL_KERNEL(float, f32)

void spmv_cpu_psell_omp(const spmv_psell *a, int32_t threads, const void *x, void *y)
{
    if (threads <= 0)
        threads = omp_get_max_threads();
    if (a->dtype == SPMV_FLOAT32)
        psell_omp_f32(a, threads, x, y);
    else
        psell_omp_f64(a, threads, x, y);
}
