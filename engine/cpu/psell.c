/* psell.c — cpu.psell.omp and cpu.spsell.omp: OpenMP over the 32-row
 * slices of a packed sliced ELL, and of its symmetric form (below).
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
    /* slice s (n real rows) by its index width: SPSELL's slices that are not mirrored too */     \
    static void psell_slice_##SFX(const spmv_psell *a, int32_t s, const T *x, T *y, int32_t n)     \
    {                                                                                              \
        if (a->idx_bytes[s] == 0)                                                                  \
            psell_slice_##SFX##_diag(a, s, x, y, n);                                               \
        else if (a->idx_bytes[s] == 1)                                                             \
            psell_slice_##SFX##_u8(a, s, x, y, n);                                                 \
        else if (a->idx_bytes[s] == 2)                                                             \
            psell_slice_##SFX##_u16(a, s, x, y, n);                                                \
        else                                                                                       \
            psell_slice_##SFX##_i32(a, s, x, y, n);                                                \
    }                                                                                              \
    static void psell_omp_##SFX(const spmv_psell *a, int32_t threads, const T *x, T *y)            \
    {                                                                                              \
        _Pragma("omp parallel for schedule(dynamic, SLICES_PER_GRAB) num_threads(threads)")        \
        for (int32_t s = 0; s < a->nslices; s++) {                                                 \
            int64_t r0 = (int64_t)s * C;                                                           \
            psell_slice_##SFX(a, s, x, y + r0, a->rows - r0 < C ? (int32_t)(a->rows - r0) : C);    \
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

/* ------------------------------------------------------------ cpu.spsell.omp
 *
 * SPSELL (engine/spmv.h spmv_spsell, docs/kernels.md "Symmetric PSELL"):
 * a slice that is not mirrored is PSELL's and runs as above; a mirrored
 * slice is diagonal (column base + r) and stores values for its slots k >=
 * w/2 only; slot k < w/2 (offset -d) of row i reads the value the source
 * row i - d stores in its slot w-1-k (offset +d): A[i][i-d] = A[i-d][i].
 * The sum runs in slot order, which is column order, with the very values
 * of the CSR: a row's sum is cpu.csr.serial's bit for bit. */

/* Value entry of slot q of row j, which its slice (mirrored or not, of
 * whatever width) stores. */
static inline int64_t spsell_entry(const spmv_spsell *m, int64_t j, int64_t q)
{
    const spmv_psell *a = &m->p;
    int64_t t = j / C, v0 = a->val_off[t], w = a->slot_off[t + 1] - a->slot_off[t];
    int64_t k0 = m->mirror[t] ? w / 2 : 0, ws = w - k0;
    return a->val_off[t + 1] - v0 == ws * C ? v0 + (q - k0) * C + j % C : v0 + q - k0;
}

/* Slots of a mirrored slice, VAL the value of entry e. */
#define SPSELL_LOOP(T, VAL)                                                                        \
    for (int64_t k = 0; k < w; k++) {                                                              \
        int32_t b = base[s0 + k];                                                                  \
        int64_t q = w - 1 - k; /* slot k < k0: source row b + r's slot q (offset +d) */           \
        for (int32_t r = 0; r < C; r++) {                                                          \
            int64_t e = k >= k0 ? v0 + (k - k0) * (uni ? 1 : C) + (uni ? 0 : r)                    \
                                : spsell_entry(m, (int64_t)b + r, q);                              \
            (void)e;                                                                               \
            acc[r] += (VAL) * x[b + r];                                                            \
        }                                                                                          \
    }

#define DEFINE_SPSELL_MIRRORED(T, SFX)                                                             \
    static void spsell_mirrored_##SFX(const spmv_spsell *m, int32_t s, const T *restrict x,        \
                                      T *restrict y)                                               \
    {                                                                                              \
        T acc[C];                                                                                  \
        const spmv_psell *a = &m->p;                                                               \
        const int32_t *restrict base = a->base;                                                    \
        const T *restrict table = a->v.table;                                                      \
        int64_t s0 = a->slot_off[s], w = a->slot_off[s + 1] - s0, v0 = a->val_off[s];              \
        int64_t k0 = w / 2, ws = w - k0;                                                           \
        bool uni = a->val_off[s + 1] - v0 != ws * C;                                               \
        for (int32_t r = 0; r < C; r++)                                                            \
            acc[r] = 0;                                                                            \
        switch (a->v.mode) {                                                                       \
        case SPMV_VCODE_CONST: {                                                                   \
            const T one = table[0];                                                                \
            SPSELL_LOOP(T, one)                                                                    \
            break;                                                                                 \
        }                                                                                          \
        case SPMV_VCODE_U8: {                                                                      \
            const uint8_t *restrict code = a->v.data;                                              \
            SPSELL_LOOP(T, table[code[e]])                                                         \
            break;                                                                                 \
        }                                                                                          \
        case SPMV_VCODE_U16: {                                                                     \
            const uint16_t *restrict code = a->v.data;                                             \
            SPSELL_LOOP(T, table[code[e]])                                                         \
            break;                                                                                 \
        }                                                                                          \
        case SPMV_VCODE_RAW: {                                                                     \
            const T *restrict val = a->v.data;                                                     \
            SPSELL_LOOP(T, val[e])                                                                 \
            break;                                                                                 \
        }                                                                                          \
        case SPMV_VCODE_F32: {                                                                     \
            const float *restrict val = a->v.data;                                                 \
            SPSELL_LOOP(T, (T)val[e])                                                              \
            break;                                                                                 \
        }                                                                                          \
        }                                                                                          \
        for (int32_t r = 0; r < C; r++) /* a mirrored slice has C rows */                          \
            y[r] = acc[r];                                                                         \
    }                                                                                              \
                                                                                                   \
    static void spsell_omp_##SFX(const spmv_spsell *m, int32_t threads, const T *x, T *y)          \
    {                                                                                              \
        const spmv_psell *a = &m->p;                                                               \
        _Pragma("omp parallel for schedule(dynamic, SLICES_PER_GRAB) num_threads(threads)")        \
        for (int32_t s = 0; s < a->nslices; s++) {                                                 \
            int64_t r0 = (int64_t)s * C;                                                           \
            int32_t n = a->rows - r0 < C ? (int32_t)(a->rows - r0) : C;                            \
            if (m->mirror[s])                                                                      \
                spsell_mirrored_##SFX(m, s, x, y + r0);                                            \
            else                                                                                   \
                psell_slice_##SFX(a, s, x, y + r0, n);                                             \
        }                                                                                          \
    }

DEFINE_SPSELL_MIRRORED(double, f64)
DEFINE_SPSELL_MIRRORED(float, f32)

void spmv_cpu_spsell_omp(const spmv_spsell *a, int32_t threads, const void *x, void *y)
{
    if (threads <= 0)
        threads = omp_get_max_threads();
    if (a->p.dtype == SPMV_FLOAT32)
        spsell_omp_f32(a, threads, x, y);
    else
        spsell_omp_f64(a, threads, x, y);
}
