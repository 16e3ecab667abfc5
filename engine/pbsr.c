/* pbsr.c — PBSR, the packed block CSR: detection of b x b blocks, CSR ->
 * PBSR, PBSR -> COO, its byte count and the plan the padding rule reads.
 *
 * Finite-element matrices of vector problems (elasticity: 3 unknowns a
 * node) hold their non-zeros in whole b x b blocks, and CSR repeats a
 * block's column b times per row, b rows over: b*b column indices where
 * one block column says them all. PBSR keeps one packed block column per
 * block, as PCSR keeps one packed column per entry (the same 1-, 2- or
 * 4-byte deltas from a per-row base, here per block row: engine/packed.c
 * lends its index packing), and the values in the shared modes of
 * spmv_packed_values (also lent by packed.c), laid out component-major
 * within a block row so that a GPU group with a lane per block reads each
 * of the b*b components of its blocks in one coalesced load.
 *
 * Only complete blocks qualify (spmv_csr_block_size): a block with an
 * entry missing would be stored with a padded zero, and 0 * x_j with x_j
 * infinite or NaN is NaN where CSR, which never reads x_j for that row,
 * gives a number (docs/kernels.md "Padding marker"). Explicit zeros count
 * as entries, as they do in CSR. A matrix without blocks is refused with
 * SPMV_ERR_UNSUPPORTED saying why, never padded.
 */
#include <stdio.h>
#include <string.h>

#include "formats.h"
#include "spmv.h"

/* The block sizes tried, largest first: the largest that fits wins. */
static const int32_t block_sizes[] = {6, 4, 3, 2};

/* Whether block row I of a (rows I*b .. I*b + b - 1) holds only complete
 * b x b blocks: its first row's columns come in runs c0, c0 + 1, ..
 * c0 + b - 1 with c0 a multiple of b, and every other row of the block
 * row has exactly the first row's columns. */
static bool block_row_complete(const spmv_csr *a, int32_t b, int32_t I)
{
    int32_t r0 = I * b, s0 = a->row_ptr[r0], len = a->row_ptr[r0 + 1] - s0;
    if (len % b)
        return false;
    for (int32_t g = 0; g < len; g += b) {
        int32_t c0 = a->col[s0 + g];
        if (c0 % b)
            return false;
        for (int32_t c = 1; c < b; c++)
            if (a->col[s0 + g + c] != c0 + c)
                return false;
    }
    for (int32_t r = 1; r < b; r++) {
        int32_t s = a->row_ptr[r0 + r];
        if (a->row_ptr[r0 + r + 1] - s != len || memcmp(a->col + s, a->col + s0, (size_t)len * sizeof(int32_t)))
            return false;
    }
    return true;
}

/* Whether a is made of complete b x b blocks; if not, why into why[n]. */
static bool blocked(const spmv_csr *a, int32_t b, char *why, size_t n)
{
    if (a->rows % b || a->cols % b) {
        snprintf(why, n, "b=%d: %d x %d is not a multiple of %d", b, a->rows, a->cols, b);
        return false;
    }
    for (int32_t I = 0; I < a->rows / b; I++)
        if (!block_row_complete(a, b, I)) {
            snprintf(why, n, "b=%d: rows %d..%d hold an incomplete block", b, I * b, I * b + b - 1);
            return false;
        }
    return true;
}

int32_t spmv_csr_block_size(const spmv_csr *a, spmv_error *err)
{
    char why[4][96];
    if (!a->row_ptr || a->nnz == 0) {
        spmv_error_set(err, SPMV_ERR_UNSUPPORTED, 0, "%s",
                       a->row_ptr     ? "PBSR: the matrix has no non-zeros, so no blocks"
                       : a->row_ptr64 ? "PBSR: the matrix holds 64-bit row offsets (a wide CSR); PBSR takes 32-bit ones"
                                      : "PBSR: no CSR to look for blocks in");
        return 0;
    }
    for (size_t i = 0; i < sizeof block_sizes / sizeof block_sizes[0]; i++)
        if (blocked(a, block_sizes[i], why[i], sizeof why[i]))
            return block_sizes[i];
    spmv_error_set(err, SPMV_ERR_UNSUPPORTED, 0,
                   "PBSR: the non-zeros do not come in complete b x b blocks for any b of 6, 4, 3, 2 (%s; %s; %s; %s); "
                   "a block with an entry missing is never padded (docs/kernels.md \"PBSR\")",
                   why[0], why[1], why[2], why[3]);
    return 0;
}

/* ------------------------------------------------------------- layout */

/* The block pattern of a blocked CSR: a CSR of rows/b rows whose columns
 * are the block columns (its row_ptr and col allocated here, no values). */
static int block_pattern(const spmv_csr *a, int32_t b, spmv_csr *pat, spmv_error *err)
{
    int st = SPMV_OK;
    memset(pat, 0, sizeof *pat);
    pat->rows = a->rows / b;
    pat->cols = a->cols / b;
    pat->nnz = a->nnz / ((int64_t)b * b);
    pat->dtype = a->dtype;
    pat->row_ptr = spmv_array_alloc((int64_t)pat->rows + 1, sizeof(int32_t), &st);
    pat->col = spmv_array_alloc(pat->nnz, sizeof(int32_t), &st);
    if (!pat->row_ptr || !pat->col) {
        spmv_csr_free(pat);
        return spmv_error_set(err, st, 0, "cannot allocate the block pattern of a PBSR of %d block rows (%s)",
                              a->rows / b, spmv_strerror(st));
    }
    pat->row_ptr[0] = 0;
    for (int32_t I = 0; I < pat->rows; I++) {
        int32_t s0 = a->row_ptr[I * b], nb = (a->row_ptr[I * b + 1] - s0) / b, k0 = pat->row_ptr[I];
        for (int32_t k = 0; k < nb; k++)
            pat->col[k0 + k] = a->col[s0 + k * b] / b;
        pat->row_ptr[I + 1] = k0 + nb;
    }
    return SPMV_OK;
}

/* Bytes of every PBSR array but the values: block_ptr and the packed block
 * columns (PCSR's formula on the block pattern). */
static int64_t pbsr_index_bytes(int64_t brows, int64_t index_bytes) { return (brows + 1) * 4 + index_bytes; }

spmv_format_info spmv_pbsr_info(const spmv_pbsr *m)
{
    int64_t vs = (int64_t)spmv_dtype_size(m->dtype), ib = 0;
    if (!m->idx_bytes)
        return spmv_info_of(0, 0, 0);
    ib = m->idx_bytes == 4 ? m->nblocks * 4 : m->nblocks * m->idx_bytes + (int64_t)m->brows * 4 + m->wide_nnz * 4;
    return spmv_info_of((size_t)(pbsr_index_bytes(m->brows, ib) +
                                 spmv_packed_values_bytes(m->v.mode, m->v.ntable, m->nnz, vs)),
                        0, 0);
}

/* What the plan and the conversion both need: b, the block pattern, its
 * index width and the distinct values. */
typedef struct pbsr_shape {
    int32_t b, ib;
    spmv_csr pat;
    int64_t wide, index_bytes, value_bytes;
    spmv_vcode mode;
    spmv_vpack *vp;
} pbsr_shape;

static void shape_free(pbsr_shape *sh)
{
    spmv_csr_free(&sh->pat);
    spmv_vpack_free(sh->vp);
    memset(sh, 0, sizeof *sh);
}

static int shape_of(const spmv_csr *a, pbsr_shape *sh, spmv_error *err)
{
    int st;
    memset(sh, 0, sizeof *sh);
    if ((st = spmv_csr_need_narrow(a, "PBSR", err)) || (st = spmv_check_shape(a->rows, a->cols, a->nnz, err)))
        return st;
    if (!(sh->b = spmv_csr_block_size(a, err)))
        return SPMV_ERR_UNSUPPORTED;
    if ((st = block_pattern(a, sh->b, &sh->pat, err)) || (st = spmv_vpack_new(a, &sh->vp, err))) {
        shape_free(sh);
        return st;
    }
    spmv_pcsr_index_plan(&sh->pat, &sh->ib, &sh->wide, &sh->index_bytes);
    sh->mode = spmv_vpack_mode(sh->vp, a->nnz, &sh->value_bytes);
    return SPMV_OK;
}

int spmv_pbsr_plan(const spmv_csr *a, int64_t *slots, int64_t *bytes, spmv_error *err)
{
    pbsr_shape sh;
    int st = shape_of(a, &sh, err);
    if (st)
        return st;
    *slots = a->nnz;
    *bytes = pbsr_index_bytes(sh.pat.rows, sh.index_bytes) + sh.value_bytes;
    shape_free(&sh);
    return SPMV_OK;
}

void spmv_pbsr_free(spmv_pbsr *m)
{
    if (!m)
        return;
    free(m->block_ptr);
    free(m->base);
    free(m->idx);
    free(m->wide_col);
    spmv_packed_values_free(&m->v);
    memset(m, 0, sizeof *m);
}

/* The values of a into out, component-major per block row. */
static void pbsr_fill_values(const spmv_csr *a, const pbsr_shape *sh, spmv_pbsr *out)
{
    int32_t b = sh->b;
    for (int32_t I = 0; I < out->brows; I++) {
        int64_t s = out->block_ptr[I], nb = out->block_ptr[I + 1] - s, v0 = s * b * b;
        for (int32_t r = 0; r < b; r++) {
            int64_t j = a->row_ptr[I * b + r];
            for (int64_t k = 0; k < nb; k++)
                for (int32_t c = 0; c < b; c++)
                    spmv_vpack_put(sh->vp, &out->v, v0 + (r * b + c) * nb + k, j++);
        }
    }
}

int spmv_csr_to_pbsr(const spmv_csr *in, const spmv_format_limits *lim, spmv_pbsr *out, spmv_error *err)
{
    pbsr_shape sh;
    memset(out, 0, sizeof *out);
    int st = shape_of(in, &sh, err);
    if (st)
        return st;
    if ((st = spmv_format_check(lim, SPMV_FMT_PBSR, in->nnz, in->nnz,
                                pbsr_index_bytes(sh.pat.rows, sh.index_bytes) + sh.value_bytes, err)))
        goto done;
    SPMV_COPY_SHAPE(out, in);
    out->b = sh.b;
    out->brows = sh.pat.rows;
    out->nblocks = sh.pat.nnz;
    out->idx_bytes = sh.ib;
    out->wide_nnz = sh.wide;
    out->block_ptr = sh.pat.row_ptr; /* the pattern's offsets are PBSR's */
    sh.pat.row_ptr = NULL;
    out->idx = spmv_array_alloc(out->nblocks, (size_t)sh.ib, &st);
    if (sh.ib < 4) {
        out->base = spmv_array_alloc(out->brows, sizeof(int32_t), &st);
        out->wide_col = spmv_array_alloc(sh.wide, sizeof(int32_t), &st);
    }
    if (!out->idx || (sh.ib < 4 && (!out->base || !out->wide_col)) ||
        (st = spmv_vpack_alloc(sh.vp, &out->v, sh.mode, in->nnz))) {
        st = spmv_error_set(err, st ? st : SPMV_ERR_NOMEM, 0, "cannot allocate a PBSR of %d block rows, %lld blocks (%s)",
                            out->brows, (long long)out->nblocks, spmv_strerror(st ? st : SPMV_ERR_NOMEM));
        goto done;
    }
    sh.pat.row_ptr = out->block_ptr; /* lent back for the index fill */
    spmv_pcsr_index_fill(&sh.pat, sh.ib, out->base, out->idx, out->wide_col);
    sh.pat.row_ptr = NULL;
    pbsr_fill_values(in, &sh, out);
done:
    shape_free(&sh);
    if (st)
        spmv_pbsr_free(out);
    return st;
}

/* ------------------------------------------------------------ to COO */

/* Block column of block k of block row I; -1 when a wide block row points
 * past wide_col. */
static int64_t pbsr_bcol(const spmv_pbsr *m, int32_t I, int64_t k)
{
    if (m->idx_bytes == 4)
        return ((const int32_t *)m->idx)[k];
    int64_t b = m->base[I];
    if (b < 0) {
        int64_t w = -1 - b + (k - m->block_ptr[I]);
        return w < m->wide_nnz ? m->wide_col[w] : -1;
    }
    return b + (m->idx_bytes == 1 ? ((const uint8_t *)m->idx)[k] : ((const uint16_t *)m->idx)[k]);
}

static bool pbsr_ok(const spmv_pbsr *m)
{
    int32_t ib = m->idx_bytes, b = m->b;
    if ((b != 2 && b != 3 && b != 4 && b != 6) || m->rows < 0 || m->brows != m->rows / b || m->rows % b ||
        m->cols % b || !m->block_ptr || !m->idx || (ib != 1 && ib != 2 && ib != 4) ||
        (ib < 4 && (!m->base || !m->wide_col)) || !spmv_packed_values_ok(&m->v) || m->block_ptr[0] != 0 ||
        m->block_ptr[m->brows] != m->nblocks || m->nnz != m->nblocks * b * b)
        return false;
    for (int32_t I = 0; I < m->brows; I++)
        if (m->block_ptr[I + 1] < m->block_ptr[I])
            return false;
    return true;
}

/* Row r of block row I into out's entries from *n on. */
static int pbsr_row_to_coo(const spmv_pbsr *in, int32_t I, int32_t r, spmv_coo *out, int64_t *n)
{
    int32_t b = in->b;
    int64_t s = in->block_ptr[I], nb = in->block_ptr[I + 1] - s, v0 = s * b * b;
    for (int64_t k = 0; k < nb; k++) {
        int64_t bc = pbsr_bcol(in, I, s + k);
        for (int32_t c = 0; c < b; c++) {
            int64_t col = bc * b + c;
            if (bc < 0 || col >= in->cols ||
                spmv_packed_values_get(&in->v, in->dtype, v0 + (r * b + c) * nb + k, out->val, *n))
                return SPMV_ERR_INVALID;
            out->row[*n] = I * b + r;
            out->col[(*n)++] = (int32_t)col;
        }
    }
    return SPMV_OK;
}

int spmv_pbsr_to_coo(const spmv_pbsr *in, spmv_coo *out, spmv_error *err)
{
    int64_t n = 0;
    memset(out, 0, sizeof *out);
    if (!pbsr_ok(in))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "malformed PBSR (%d rows, b %d, idx_bytes %d, values %s)",
                              in->rows, in->b, in->idx_bytes, spmv_vcode_name(in->v.mode));
    int st = spmv_coo_alloc(out, in->rows, in->cols, in->nnz, in->dtype, err);
    if (st)
        return st;
    for (int32_t I = 0; I < in->brows; I++)
        for (int32_t r = 0; r < in->b; r++)
            if (pbsr_row_to_coo(in, I, r, out, &n)) {
                spmv_coo_free(out);
                return spmv_error_set(err, SPMV_ERR_INVALID, 0, "malformed PBSR: row %d", I * in->b + r);
            }
    return SPMV_OK;
}
