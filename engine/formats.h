/* formats.h — internal helpers shared by the storage-format files.
 *
 * engine/coo.c, csr.c, ell.c, hll.c, hyb.c, packed.c, matrix.c and the CPU
 * kernels all need the same three things: overflow-checked array allocation (every
 * count that sizes an array may come from an upload), reading and writing a
 * value of either dtype by index (conversions are not performance critical,
 * so they go through double), and the one padding marker. Beside those,
 * the pieces several format files share: the info a format reports, the
 * longest row, filling and walking an ELL block (ELL, HLL slices, HYB's
 * ELL part). Not part of the public API (engine/spmv.h); nothing outside
 * engine/ includes this.
 */
#ifndef SPMV_FORMATS_H
#define SPMV_FORMATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "spmv.h"

/* Column index of a padding slot in ELL and HLL (its value is 0). */
#define SPMV_PAD_COL (-1)

/* n elements of `size` bytes, or NULL with *status set to SPMV_ERR_LIMIT
 * (n negative or n*size overflowing) or SPMV_ERR_NOMEM. Never returns NULL
 * for n == 0, so a NULL array always means "not allocated". Large arrays
 * are 2 MiB aligned and advised to use transparent huge pages (matrix.c
 * says why). Free with free(). */
void *spmv_array_alloc(int64_t n, size_t size, int *status);

static inline double spmv_val_get(const void *val, spmv_dtype dtype, int64_t i)
{
    return dtype == SPMV_FLOAT32 ? (double)((const float *)val)[i] : ((const double *)val)[i];
}

static inline void spmv_val_set(void *val, spmv_dtype dtype, int64_t i, double v)
{
    if (dtype == SPMV_FLOAT32)
        ((float *)val)[i] = (float)v;
    else
        ((double *)val)[i] = v;
}

/* Copies one value between arrays of the same dtype, bit for bit. */
static inline void spmv_val_copy(void *dst, int64_t di, const void *src, int64_t si, spmv_dtype dtype)
{
    if (dtype == SPMV_FLOAT32)
        ((float *)dst)[di] = ((const float *)src)[si];
    else
        ((double *)dst)[di] = ((const double *)src)[si];
}

/* A format's info: its bytes and the slots it holds per entry (slots over
 * nnz; 1 without entries, and for a format without padding, which passes
 * slots and nnz 0). */
static inline spmv_format_info spmv_info_of(size_t bytes, int64_t slots, int64_t nnz)
{
    spmv_format_info info = {
        .bytes = bytes,
        .padding_ratio = nnz > 0 ? (double)slots / (double)nnz : 1.0,
    };
    return info;
}

/* Longest row of a CSR (0 for no rows). */
static inline int32_t spmv_csr_max_row(const spmv_csr *a)
{
    int32_t w = 0;
    for (int32_t i = 0; i < a->rows; i++) {
        int64_t len = spmv_csr_row_begin(a, i + 1) - spmv_csr_row_begin(a, i);
        if (len > w)
            w = (int32_t)len;
    }
    return w;
}

/* Fills a column-major ELL block of `width` slots per row for rows
 * [r0, r1) of `in` (at most `width` entries of each row) with a row stride
 * of `stride` (rows for ELL, hack_size for an HLL slice, whose rows past r1
 * are all padding); returns the entries stored. Defined in ell.c. */
int64_t spmv_ell_fill_block(const spmv_csr *in, int32_t r0, int32_t r1, int32_t width, int32_t stride,
                            int32_t *col, void *val);

/* The non-padding slots of an ELL block (the true nnz, not trusting a
 * format's ->nnz). Defined in ell.c. */
int64_t spmv_ell_count_entries(const int32_t *col, int64_t slots);

/* Appends row `row`'s entries of an ELL block to the COO out from entry n
 * (its `width` slots at first, first + stride, ..., padding skipped: ELL
 * and HYB's ELL part with stride rows, an HLL slice with hack_size);
 * returns the next free entry. Defined in ell.c. */
int64_t spmv_ell_row_to_coo(const int32_t *col, const void *val, spmv_dtype dtype, int64_t first, int64_t stride,
                            int64_t width, int32_t row, spmv_coo *out, int64_t n);

/* An ELL holding the first `width` entries of every row (HYB's ELL part;
 * plain ELL when width is the longest row). Defined in ell.c. */
int spmv_ell_build(const spmv_csr *in, int32_t width, int64_t max_slots, spmv_ell *out, spmv_error *err);

/* HYB's automatic width: the 2/3 quantile of the row lengths (0 for no
 * rows). Defined in hyb.c. */
int spmv_hyb_auto_width(const spmv_csr *in, int32_t *width, spmv_error *err);

/* The slots and bytes the packed conversions would hold for CSR a (PCSR:
 * slots nnz, bytes without the borrowed row_ptr; PSELL: the 32-row
 * slices' padded slots, bytes of every array), computed as the
 * conversions compute them, without building. Counting the distinct
 * values takes a small set (at most 65 537 values): SPMV_ERR_NOMEM if it
 * cannot be allocated. Defined in packed.c; spmv_format_plan answers
 * through them. */
int spmv_pcsr_plan(const spmv_csr *a, int64_t *slots, int64_t *bytes, spmv_error *err);
int spmv_psell_plan(const spmv_csr *a, int64_t *slots, int64_t *bytes, spmv_error *err);
/* SPSELL's: PSELL's slots; bytes with only the mirrored slices' stored
 * values, plus the mirror array. SPMV_ERR_UNAVAILABLE when a is not
 * square and exactly symmetric. */
int spmv_spsell_plan(const spmv_csr *a, int64_t *slots, int64_t *bytes, spmv_error *err);
/* PBSR's (engine/pbsr.c): slots nnz (no padding), bytes of every array;
 * SPMV_ERR_UNSUPPORTED for a matrix without blocks. */
int spmv_pbsr_plan(const spmv_csr *a, int64_t *slots, int64_t *bytes, spmv_error *err);

/* What engine/packed.c lends engine/pbsr.c, so PBSR packs its values and
 * its block columns exactly as PCSR packs values and columns.
 * spmv_vpack: the distinct values of a CSR (spmv_vpack_new counts them),
 * the mode with the fewest bytes for n entries of its nnz values
 * (spmv_vpack_mode), the arrays of that mode for n entries
 * (spmv_vpack_alloc), entry e set to CSR value src (spmv_vpack_put). */
typedef struct spmv_vpack spmv_vpack;
int spmv_vpack_new(const spmv_csr *a, spmv_vpack **out, spmv_error *err);
spmv_vcode spmv_vpack_mode(const spmv_vpack *p, int64_t n, int64_t *bytes);
int spmv_vpack_alloc(spmv_vpack *p, spmv_packed_values *v, spmv_vcode mode, int64_t n);
void spmv_vpack_put(const spmv_vpack *p, spmv_packed_values *v, int64_t e, int64_t src);
void spmv_vpack_free(spmv_vpack *p);
/* Value entry e of v into dst[di]; SPMV_ERR_INVALID for a code past the table. */
int spmv_packed_values_get(const spmv_packed_values *v, spmv_dtype dt, int64_t e, void *dst, int64_t di);
bool spmv_packed_values_ok(const spmv_packed_values *v);
void spmv_packed_values_free(spmv_packed_values *v);
/* Bytes of the values in `mode` for n entries (ntable 0 for raw and f32). */
int64_t spmv_packed_values_bytes(spmv_vcode mode, int64_t ntable, int64_t n, int64_t vs);
/* PCSR's column packing of pattern a: the width with the fewest bytes,
 * its wide entries and bytes; then base (rows), idx (nnz of ib bytes) and
 * wide_col filled at width ib. */
void spmv_pcsr_index_plan(const spmv_csr *a, int32_t *ib, int64_t *wide_nnz, int64_t *bytes);
void spmv_pcsr_index_fill(const spmv_csr *a, int32_t ib, int32_t *base, void *idx, int32_t *wide_col);

/* Validates the shape fields every conversion trusts. */
int spmv_check_shape(int32_t rows, int32_t cols, int64_t nnz, spmv_error *err);

#endif /* SPMV_FORMATS_H */
