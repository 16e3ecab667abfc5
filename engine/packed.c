/* packed.c — the packed formats (PCSR, PSELL): CSR -> packed, packed ->
 * COO, their byte counts and the plans the padding rule reads.
 *
 * An SpMV streams the matrix once, so the bytes per non-zero bound its
 * speed (issue 14). CSR spends 4 bytes on a column and 4 or 8 on a value,
 * and most matrices need fewer: the columns of a row (or of one slot of a
 * 32-row slice) lie close together, so a 1- or 2-byte delta from a base
 * says them; and many matrices hold few distinct values (graphs, stencils,
 * pattern-only files), so a 1- or 2-byte code into a table says those, or
 * nothing at all when there is one. PCSR packs CSR row by row and borrows
 * its row_ptr; PSELL packs the HLL of 32-row slices slice by slice. Both
 * share the value compression (spmv_packed_values). Every choice (value
 * mode, PCSR's index width, each PSELL slice's index width) is the one
 * with the fewest bytes by the formulas of engine/spmv.h and
 * docs/kernels.md "Packed formats"; the GPU builds the same arrays on the
 * device and a test compares them byte for byte, so nothing here depends
 * on anything but the CSR.
 *
 * Distinct values are counted in a small open-addressing set capped one
 * past U16's table (65 537): no mode needs a larger count, so the count
 * costs O(nnz) time and at most 1.5 MiB whatever the matrix, where sorting
 * a copy of the values would cost a second value array. The same set,
 * sorted, gives each value its code. Plans (spmv_pcsr_plan,
 * spmv_psell_plan) and conversions run the same functions, so the bytes
 * the padding rule is asked about are the bytes then held.
 */
#include <string.h>

#include "formats.h"
#include "spmv.h"

#define C SPMV_PSELL_C
#define TABLE_MAX 65536 /* U16's codes */

/* ------------------------------------------------------ distinct values */

/* The distinct bit patterns of a CSR's values, at most TABLE_MAX + 1 of
 * them (n == TABLE_MAX + 1: more than any table holds). */
typedef struct vset {
    int64_t n;        /* patterns in keys */
    uint64_t *keys;   /* as found; ascending after vset_sort */
    int32_t *slot;    /* open addressing, load <= 1/2: index into keys, -1 empty */
    uint64_t mask;    /* slots - 1 */
    bool f32;         /* float64 values all survive float64 -> float32 -> float64 bit for bit */
} vset;

/* Value i as an unsigned integer of the dtype's width (float32 widened):
 * ascending order of these is ascending order of the patterns. */
static uint64_t val_bits(const void *val, spmv_dtype dt, int64_t i)
{
    if (dt == SPMV_FLOAT32) {
        uint32_t b;
        memcpy(&b, (const float *)val + i, sizeof b);
        return b;
    }
    uint64_t b;
    memcpy(&b, (const double *)val + i, sizeof b);
    return b;
}

static void val_from_bits(void *val, spmv_dtype dt, int64_t i, uint64_t bits)
{
    if (dt == SPMV_FLOAT32) {
        uint32_t b = (uint32_t)bits;
        memcpy((float *)val + i, &b, sizeof b);
    } else {
        memcpy((double *)val + i, &bits, sizeof bits);
    }
}

static uint64_t vset_hash(uint64_t k) /* murmur3's finaliser */
{
    k ^= k >> 33;
    k *= UINT64_C(0xff51afd7ed558ccd);
    k ^= k >> 33;
    k *= UINT64_C(0xc4ceb9fe1a85ec53);
    return k ^ (k >> 33);
}

/* The slot holding k, or the empty slot where it would go. */
static uint64_t vset_find(const vset *s, uint64_t k)
{
    uint64_t h = vset_hash(k) & s->mask;
    while (s->slot[h] >= 0 && s->keys[s->slot[h]] != k)
        h = (h + 1) & s->mask;
    return h;
}

static void vset_free(vset *s)
{
    free(s->keys);
    free(s->slot);
    memset(s, 0, sizeof *s);
}

static int vset_build(vset *s, const spmv_csr *a, spmv_error *err)
{
    int st = SPMV_OK;
    int64_t cap = a->nnz < TABLE_MAX + 1 ? a->nnz : TABLE_MAX + 1;
    uint64_t slots = 16;
    while (slots < 2 * (uint64_t)cap)
        slots <<= 1;
    memset(s, 0, sizeof *s);
    s->keys = spmv_array_alloc(cap, sizeof(uint64_t), &st);
    s->slot = spmv_array_alloc((int64_t)slots, sizeof(int32_t), &st);
    if (!s->keys || !s->slot) {
        vset_free(s);
        return spmv_error_set(err, st, 0, "cannot allocate the distinct-value set (%s)", spmv_strerror(st));
    }
    s->mask = slots - 1;
    memset(s->slot, 0xff, slots * sizeof(int32_t));
    for (int64_t j = 0; j < a->nnz && s->n < cap; j++) {
        uint64_t k = val_bits(a->val, a->dtype, j), h = vset_find(s, k);
        if (s->slot[h] < 0) {
            s->slot[h] = (int32_t)s->n;
            s->keys[s->n++] = k;
        }
    }
    /* F32 (a "mixed" upload's values): every float64 value a float32 exactly */
    s->f32 = a->dtype == SPMV_FLOAT64;
    const double *v = a->val;
    for (int64_t j = 0; s->f32 && j < a->nnz; j++) {
        double back = (double)(float)v[j];
        s->f32 = memcmp(&back, &v[j], sizeof back) == 0;
    }
    return SPMV_OK;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Sorts the patterns and re-indexes the slots: the index a pattern's slot
 * holds is then its code. */
static void vset_sort(vset *s)
{
    qsort(s->keys, (size_t)s->n, sizeof *s->keys, cmp_u64);
    memset(s->slot, 0xff, (size_t)(s->mask + 1) * sizeof(int32_t));
    for (int64_t i = 0; i < s->n; i++)
        s->slot[vset_find(s, s->keys[i])] = (int32_t)i;
}

/* ------------------------------------------------------ value compression */

/* Bytes of the values in `mode` for n stored entries (RAW and F32 have
 * no table: ntable 0). */
static int64_t values_bytes(spmv_vcode mode, int64_t ntable, int64_t n, int64_t vs)
{
    return ntable * vs + n * (int64_t)spmv_vcode_entry_bytes(mode, (size_t)vs);
}

/* Whether `mode` can code the nnz real entries of s (distinct values). */
static bool mode_fits(spmv_vcode mode, const vset *s, int64_t nnz)
{
    switch (mode) {
    case SPMV_VCODE_CONST: return nnz > 0 && s->n == 1;
    case SPMV_VCODE_U8: return nnz > 0 && s->n <= 256;
    case SPMV_VCODE_U16: return nnz > 0 && s->n <= TABLE_MAX;
    case SPMV_VCODE_F32: return nnz > 0 && s->f32;
    case SPMV_VCODE_RAW: break;
    }
    return true;
}

/* The mode with the fewest bytes for n stored entries (slots, padding
 * included) of nnz real ones whose distinct values s holds; ties go to the
 * first of CONST, U8, U16, F32, RAW. nnz 0: RAW. */
static spmv_vcode values_mode(const vset *s, int64_t nnz, int64_t n, int64_t vs, int64_t *bytes)
{
    static const spmv_vcode order[] = {SPMV_VCODE_CONST, SPMV_VCODE_U8, SPMV_VCODE_U16, SPMV_VCODE_F32,
                                       SPMV_VCODE_RAW};
    spmv_vcode best = SPMV_VCODE_RAW;
    int64_t best_bytes = -1;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        bool table = order[i] != SPMV_VCODE_RAW && order[i] != SPMV_VCODE_F32;
        int64_t b = values_bytes(order[i], table ? s->n : 0, n, vs);
        if (mode_fits(order[i], s, nnz) && (best_bytes < 0 || b < best_bytes)) {
            best = order[i];
            best_bytes = b;
        }
    }
    *bytes = best_bytes;
    return best;
}

/* v's arrays for n entries in `mode` (s sorted here when a table is kept). */
static int values_alloc(spmv_packed_values *v, spmv_vcode mode, vset *s, int64_t n, spmv_dtype dt)
{
    int st = SPMV_OK;
    size_t vs = spmv_dtype_size(dt);
    v->mode = mode;
    if (mode == SPMV_VCODE_RAW || mode == SPMV_VCODE_F32)
        return (v->data = spmv_array_alloc(n, mode == SPMV_VCODE_F32 ? 4 : vs, &st)) ? SPMV_OK : st;
    vset_sort(s);
    v->ntable = (int32_t)s->n;
    if (!(v->table = spmv_array_alloc(s->n, vs, &st)))
        return st;
    for (int64_t i = 0; i < s->n; i++)
        val_from_bits(v->table, dt, i, s->keys[i]);
    if (mode != SPMV_VCODE_CONST && !(v->data = spmv_array_alloc(n, mode == SPMV_VCODE_U8 ? 1 : 2, &st)))
        return st;
    return SPMV_OK;
}

/* Entry e of v: value `src` of a's values, or padding (src < 0: code 0,
 * or +0.0 when RAW). */
static void values_put(spmv_packed_values *v, const vset *s, const spmv_csr *a, int64_t e, int64_t src)
{
    int32_t code = 0;
    switch (v->mode) {
    case SPMV_VCODE_RAW:
        if (src < 0)
            spmv_val_set(v->data, a->dtype, e, 0.0);
        else
            spmv_val_copy(v->data, e, a->val, src, a->dtype);
        return;
    case SPMV_VCODE_F32:
        ((float *)v->data)[e] = src < 0 ? 0.0f : (float)((const double *)a->val)[src];
        return;
    case SPMV_VCODE_CONST:
        return;
    case SPMV_VCODE_U8:
    case SPMV_VCODE_U16:
        if (src >= 0)
            code = s->slot[vset_find(s, val_bits(a->val, a->dtype, src))];
        if (v->mode == SPMV_VCODE_U8)
            ((uint8_t *)v->data)[e] = (uint8_t)code;
        else
            ((uint16_t *)v->data)[e] = (uint16_t)code;
        return;
    }
}

/* Value of entry e into dst[di]; SPMV_ERR_INVALID for a code past the table. */
static int values_get(const spmv_packed_values *v, spmv_dtype dt, int64_t e, void *dst, int64_t di)
{
    int64_t code = 0;
    switch (v->mode) {
    case SPMV_VCODE_RAW: spmv_val_copy(dst, di, v->data, e, dt); return SPMV_OK;
    case SPMV_VCODE_F32: spmv_val_set(dst, dt, di, (double)((const float *)v->data)[e]); return SPMV_OK;
    case SPMV_VCODE_CONST: break;
    case SPMV_VCODE_U8: code = ((const uint8_t *)v->data)[e]; break;
    case SPMV_VCODE_U16: code = ((const uint16_t *)v->data)[e]; break;
    }
    if (code >= v->ntable)
        return SPMV_ERR_INVALID;
    spmv_val_copy(dst, di, v->table, code, dt);
    return SPMV_OK;
}

/* Whether v holds the arrays its mode says. */
static bool values_ok(const spmv_packed_values *v)
{
    switch (v->mode) {
    case SPMV_VCODE_RAW:
    case SPMV_VCODE_F32: return v->data != NULL;
    case SPMV_VCODE_CONST: return v->table && v->ntable == 1;
    case SPMV_VCODE_U8:
    case SPMV_VCODE_U16: return v->table && v->data && v->ntable >= 1;
    }
    return false;
}

static void values_free(spmv_packed_values *v)
{
    free(v->table);
    free(v->data);
    memset(v, 0, sizeof *v);
}

/* ------------------------------------------------------------------ PCSR */

void spmv_pcsr_free(spmv_pcsr *m)
{
    if (!m)
        return;
    free(m->base);
    free(m->idx);
    free(m->wide_col);
    values_free(&m->v);
    memset(m, 0, sizeof *m); /* row_ptr is the CSR's */
}

/* Bytes of PCSR's index arrays at width ib: idx, and with 1 or 2 bytes
 * base and wide_col. */
static int64_t pcsr_index_bytes(int64_t ib, int64_t rows, int64_t nnz, int64_t wide_nnz)
{
    return ib == 4 ? nnz * 4 : nnz * ib + rows * 4 + wide_nnz * 4;
}

spmv_format_info spmv_pcsr_info(const spmv_pcsr *m)
{
    int64_t vs = (int64_t)spmv_dtype_size(m->dtype);
    int64_t b = m->idx_bytes ? pcsr_index_bytes(m->idx_bytes, m->rows, m->nnz, m->wide_nnz) : 0;
    return spmv_info_of((size_t)(b + values_bytes(m->v.mode, m->v.ntable, m->nnz, vs)), 0, 0);
}

/* The index width with the fewest bytes (ties: narrower) and its wide
 * non-zeros: rows whose last column minus first passes what a delta of
 * that width says (255, 65 535) keep their columns in wide_col. */
static void pcsr_index_plan(const spmv_csr *a, int32_t *ib, int64_t *wide_nnz, int64_t *bytes)
{
    int64_t wide1 = 0, wide2 = 0;
    for (int32_t i = 0; i < a->rows; i++) {
        int32_t b = a->row_ptr[i], e = a->row_ptr[i + 1];
        if (e <= b)
            continue;
        int64_t span = (int64_t)a->col[e - 1] - a->col[b];
        wide1 += span > UINT8_MAX ? e - b : 0;
        wide2 += span > UINT16_MAX ? e - b : 0;
    }
    int64_t b1 = pcsr_index_bytes(1, a->rows, a->nnz, wide1), b2 = pcsr_index_bytes(2, a->rows, a->nnz, wide2);
    int64_t b4 = pcsr_index_bytes(4, a->rows, a->nnz, 0);
    *ib = b1 <= b2 && b1 <= b4 ? 1 : b2 <= b4 ? 2 : 4;
    *wide_nnz = *ib == 1 ? wide1 : *ib == 2 ? wide2 : 0;
    *bytes = *ib == 1 ? b1 : *ib == 2 ? b2 : b4;
}

int spmv_pcsr_plan(const spmv_csr *a, int64_t *slots, int64_t *bytes, spmv_error *err)
{
    vset s;
    int32_t ib;
    int64_t wide, ibytes, vbytes;
    int st = vset_build(&s, a, err);
    if (st)
        return st;
    pcsr_index_plan(a, &ib, &wide, &ibytes);
    values_mode(&s, a->nnz, a->nnz, (int64_t)spmv_dtype_size(a->dtype), &vbytes);
    vset_free(&s);
    *slots = a->nnz;
    *bytes = ibytes + vbytes;
    return SPMV_OK;
}

/* Columns of `in` into out's base, idx and wide_col (width out->idx_bytes). */
static void pcsr_fill_index(const spmv_csr *in, spmv_pcsr *out)
{
    int32_t ib = out->idx_bytes;
    int64_t limit = ib == 1 ? UINT8_MAX : UINT16_MAX, w = 0;
    if (ib == 4) {
        memcpy(out->idx, in->col, (size_t)in->nnz * sizeof(int32_t));
        return;
    }
    for (int32_t i = 0; i < in->rows; i++) {
        int32_t b = in->row_ptr[i], e = in->row_ptr[i + 1];
        int32_t first = e > b ? in->col[b] : 0;
        bool wide = e > b && (int64_t)in->col[e - 1] - first > limit;
        out->base[i] = wide ? (int32_t)(-1 - w) : first;
        for (int32_t j = b; j < e; j++) {
            int32_t d = wide ? 0 : in->col[j] - first;
            if (wide)
                out->wide_col[w++] = in->col[j];
            if (ib == 1)
                ((uint8_t *)out->idx)[j] = (uint8_t)d;
            else
                ((uint16_t *)out->idx)[j] = (uint16_t)d;
        }
    }
}

int spmv_csr_to_pcsr(const spmv_csr *in, const spmv_format_limits *lim, spmv_pcsr *out, spmv_error *err)
{
    vset s = {0};
    int32_t ib;
    int64_t ibytes, vbytes, wide;
    int st;
    memset(out, 0, sizeof *out);
    if ((st = spmv_check_shape(in->rows, in->cols, in->nnz, err)) || (st = vset_build(&s, in, err)))
        return st;
    pcsr_index_plan(in, &ib, &wide, &ibytes);
    spmv_vcode mode = values_mode(&s, in->nnz, in->nnz, (int64_t)spmv_dtype_size(in->dtype), &vbytes);
    if ((st = spmv_format_check(lim, SPMV_FMT_PCSR, in->nnz, in->nnz, ibytes + vbytes, err)))
        goto done;
    SPMV_COPY_SHAPE(out, in);
    out->row_ptr = in->row_ptr;
    out->idx_bytes = ib;
    out->wide_nnz = wide;
    out->idx = spmv_array_alloc(in->nnz, (size_t)ib, &st);
    if (ib < 4) {
        out->base = spmv_array_alloc(in->rows, sizeof(int32_t), &st);
        out->wide_col = spmv_array_alloc(wide, sizeof(int32_t), &st);
    }
    if (!out->idx || (ib < 4 && (!out->base || !out->wide_col)) ||
        (st = values_alloc(&out->v, mode, &s, in->nnz, in->dtype))) {
        /* st: spmv_array_alloc's status (SPMV_ERR_NOMEM or, on overflow, SPMV_ERR_LIMIT) */
        st = spmv_error_set(err, st, 0, "cannot allocate a PCSR of %d rows, %lld non-zeros (%s)", in->rows,
                            (long long)in->nnz, spmv_strerror(st));
        goto done;
    }
    pcsr_fill_index(in, out);
    for (int64_t j = 0; j < in->nnz; j++)
        values_put(&out->v, &s, in, j, j);
done:
    vset_free(&s);
    if (st)
        spmv_pcsr_free(out);
    return st;
}

/* Column of entry j (of row i); -1 when a wide row points past wide_col. */
static int64_t pcsr_col(const spmv_pcsr *m, int32_t i, int64_t j)
{
    if (m->idx_bytes == 4)
        return ((const int32_t *)m->idx)[j];
    int64_t b = m->base[i];
    if (b < 0) {
        int64_t w = -1 - b + (j - m->row_ptr[i]);
        return w < m->wide_nnz ? m->wide_col[w] : -1;
    }
    return b + (m->idx_bytes == 1 ? ((const uint8_t *)m->idx)[j] : ((const uint16_t *)m->idx)[j]);
}

int spmv_pcsr_to_coo(const spmv_pcsr *in, spmv_coo *out, spmv_error *err)
{
    int32_t ib = in->idx_bytes;
    memset(out, 0, sizeof *out);
    if (in->rows < 0 || in->nnz < 0 || !in->row_ptr || !in->idx || (ib != 1 && ib != 2 && ib != 4) ||
        (ib < 4 && (!in->base || !in->wide_col)) || !values_ok(&in->v) || in->row_ptr[0] != 0 ||
        in->row_ptr[in->rows] != in->nnz)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "malformed PCSR (%d rows, idx_bytes %d, values %s)",
                              in->rows, ib, spmv_vcode_name(in->v.mode));
    int st = spmv_coo_alloc(out, in->rows, in->cols, in->nnz, in->dtype, err);
    if (st)
        return st;
    for (int32_t i = 0; i < in->rows; i++)
        for (int64_t j = in->row_ptr[i]; j < in->row_ptr[i + 1]; j++) {
            int64_t c = j < in->nnz ? pcsr_col(in, i, j) : -1;
            if (c < 0 || c >= in->cols || values_get(&in->v, in->dtype, j, out->val, j)) {
                spmv_coo_free(out);
                return spmv_error_set(err, SPMV_ERR_INVALID, 0, "malformed PCSR: entry %lld of row %d", (long long)j,
                                      i);
            }
            out->row[j] = i;
            out->col[j] = (int32_t)c;
        }
    return SPMV_OK;
}

/* ----------------------------------------------------------------- PSELL */

void spmv_psell_free(spmv_psell *m)
{
    if (!m)
        return;
    free(m->slot_off);
    free(m->idx_off);
    free(m->val_off);
    free(m->idx_bytes);
    free(m->base);
    free(m->idx);
    values_free(&m->v);
    memset(m, 0, sizeof *m);
}

/* Bytes of every PSELL array but the values: slot_off, idx_off and
 * val_off, the per-slice widths, one base per slot column, the index
 * bytes. */
static int64_t psell_index_bytes(int64_t nslices, int64_t widths, int64_t idx_total)
{
    return (nslices + 1) * 3 * (int64_t)sizeof(int64_t) + nslices + widths * 4 + idx_total;
}

spmv_format_info spmv_psell_info(const spmv_psell *m)
{
    int64_t vs = (int64_t)spmv_dtype_size(m->dtype), b = 0;
    int64_t nvals = m->val_off ? m->val_off[m->nslices] : 0;
    if (m->slot_off && m->idx_off)
        b = psell_index_bytes(m->nslices, m->slot_off[m->nslices], m->idx_off[m->nslices]);
    return spmv_info_of((size_t)(b + values_bytes(m->v.mode, m->v.ntable, nvals, vs)), m->slots, m->nnz);
}

/* Rows [*r0, *r1) of slice s (64-bit: rows near INT32_MAX). */
static void psell_rows(const spmv_csr *a, int64_t s, int32_t *r0, int32_t *r1)
{
    int64_t b = s * C, e = b + C;
    *r0 = (int32_t)b;
    *r1 = (int32_t)(e > a->rows ? a->rows : e);
}

/* Row i's length, whichever offsets the CSR holds (a PSELL is built from a
 * wide CSR too: its entries are read at spmv_csr_row_begin). */
static int32_t row_len(const spmv_csr *a, int32_t i)
{
    return (int32_t)(spmv_csr_row_begin(a, i + 1) - spmv_csr_row_begin(a, i));
}

/* Smallest and largest column in slot k of rows [r0, r1) (some row has
 * more than k entries). */
static void psell_slot_range(const spmv_csr *a, int32_t r0, int32_t r1, int32_t k, int32_t *mn, int32_t *mx)
{
    *mn = INT32_MAX;
    *mx = 0;
    for (int32_t i = r0; i < r1; i++)
        if (row_len(a, i) > k) {
            int32_t c = a->col[spmv_csr_row_begin(a, i) + k];
            *mn = c < *mn ? c : *mn;
            *mx = c > *mx ? c : *mx;
        }
}

/* Whether slice [r0, r1) of width w is diagonal: C rows, each of w
 * entries, and in every slot k the column of local row r is row 0's plus
 * r (the slice is w shifted diagonals: a stencil's interior). */
static bool psell_slice_diagonal(const spmv_csr *a, int32_t r0, int32_t r1, int32_t w)
{
    if (w == 0 || r1 - r0 != C)
        return false;
    for (int32_t i = r0; i < r1; i++)
        if (row_len(a, i) != w)
            return false;
    for (int32_t k = 0; k < w; k++) {
        int32_t c0 = a->col[spmv_csr_row_begin(a, r0) + k];
        for (int32_t r = 1; r < C; r++)
            if ((int64_t)a->col[spmv_csr_row_begin(a, r0 + r) + k] != (int64_t)c0 + r)
                return false;
    }
    return true;
}

/* A slice's width (its longest row) and index bytes: 0 when it is
 * diagonal (no entries: the column is the slot's base plus the row), else
 * 1 when every slot's columns span at most 254 (255 deltas, 0xff is
 * padding), 2 when at most 65 534, else 4; an empty slice takes 1. */
static void psell_slice_shape(const spmv_csr *a, int32_t r0, int32_t r1, int32_t *width, int32_t *ib)
{
    int32_t w = 0;
    int64_t span = 0;
    for (int32_t i = r0; i < r1; i++)
        w = row_len(a, i) > w ? row_len(a, i) : w;
    *width = w;
    if (psell_slice_diagonal(a, r0, r1, w)) {
        *ib = 0;
        return;
    }
    for (int32_t k = 0; k < w && span < UINT16_MAX; k++) {
        int32_t mn, mx;
        psell_slot_range(a, r0, r1, k, &mn, &mx);
        span = (int64_t)mx - mn > span ? (int64_t)mx - mn : span;
    }
    *ib = span < UINT8_MAX ? 1 : span < UINT16_MAX ? 2 : 4;
}

/* Whether slice [r0, r1) of width w is uniform: w > k0 and each of slots
 * k0 .. w-1 (those that store values) holds one value in its real
 * entries, bit for bit (its entries are then one a slot). */
static bool psell_slice_uniform(const spmv_csr *a, int32_t r0, int32_t r1, int32_t w, int32_t k0)
{
    if (w <= k0)
        return false;
    for (int32_t k = k0; k < w; k++) {
        bool first = true;
        uint64_t bits = 0;
        for (int32_t i = r0; i < r1; i++) {
            if (row_len(a, i) <= k)
                continue;
            uint64_t b = val_bits(a->val, a->dtype, spmv_csr_row_begin(a, i) + k);
            if (!first && b != bits)
                return false;
            bits = b;
            first = false;
        }
    }
    return true;
}

/* What the sizes pass decides for a slice, kept for the fill pass: k0 is
 * the first slot that stores values (0; w/2 in a mirrored SPSELL slice). */
typedef struct psell_shape {
    int32_t width;
    uint8_t ib;
    bool uniform;
    int32_t k0;
} psell_shape;

/* Index bytes of a slice of width w, entries of ib bytes, k0 slots without
 * values: a mirrored SPSELL slice (k0 > 0, diagonal, no entries) holds its
 * source table there instead, a record of SPMV_SPSELL_SRC_BYTES a lower
 * slot. */
static int64_t psell_slice_idx_bytes(int64_t w, int64_t ib, int64_t k0)
{
    return k0 > 0 ? k0 * SPMV_SPSELL_SRC_BYTES : w * C * ib;
}

/* Offset of slot k of diagonal slice s: its column in local row 0 minus
 * the row. */
static int64_t slice_offset(const spmv_csr *a, int64_t s, int32_t k)
{
    return (int64_t)a->col[spmv_csr_row_begin(a, s * C) + k] - s * C;
}

/* Whether row j holds exactly diagonal slice s's offsets (w of them):
 * its columns minus j. */
static bool row_has_offsets(const spmv_csr *a, int64_t j, int64_t s, int32_t w)
{
    if (row_len(a, (int32_t)j) != w)
        return false;
    for (int32_t k = 0; k < w; k++)
        if ((int64_t)a->col[spmv_csr_row_begin(a, j) + k] - j != slice_offset(a, s, k))
            return false;
    return true;
}

/* SPSELL's rule (engine/spmv.h spmv_spsell): whether slice s is mirrored:
 * diagonal, its offsets in pairs, and every source row i - d (d > 0 an
 * offset, i a row of s) holding the same offsets, wherever it lies. */
static bool spsell_mirrored(const spmv_csr *a, const psell_shape *shapes, int64_t s)
{
    int32_t w = shapes[s].width;
    if (shapes[s].ib != 0 || w == 0)
        return false;
    for (int32_t k = 0; k < w; k++)
        if (slice_offset(a, s, k) != -slice_offset(a, s, w - 1 - k))
            return false;
    for (int32_t k = 0; k < w / 2; k++) {
        int64_t d = -slice_offset(a, s, k); /* > 0: offsets ascend */
        for (int64_t j = s * C - d; j < s * C + C - d; j++)
            if (j < 0 || !row_has_offsets(a, j, s, w))
                return false;
    }
    return true;
}

/* Sum of the slice widths, of the index bytes and of the value entries;
 * each slice's shape into shapes[] when it is not NULL (sym, the SPSELL
 * rule, needs it). */
static void psell_sizes(const spmv_csr *a, int64_t nslices, bool sym, int64_t *widths, int64_t *idx_total,
                        int64_t *nvals, psell_shape *shapes)
{
    *widths = *idx_total = *nvals = 0;
    for (int64_t s = 0; s < nslices; s++) {
        int32_t r0, r1, w, ib;
        psell_rows(a, s, &r0, &r1);
        psell_slice_shape(a, r0, r1, &w, &ib);
        if (shapes)
            shapes[s] = (psell_shape){w, (uint8_t)ib, false, 0};
        int32_t k0 = sym && spsell_mirrored(a, shapes, s) ? w / 2 : 0;
        bool uniform = psell_slice_uniform(a, r0, r1, w, k0);
        *widths += w;
        *idx_total += psell_slice_idx_bytes(w, ib, k0);
        *nvals += uniform ? w - k0 : (int64_t)(w - k0) * C;
        if (shapes)
            shapes[s] = (psell_shape){w, (uint8_t)ib, uniform, k0};
    }
}

static int64_t psell_nslices(const spmv_csr *a) { return ((int64_t)a->rows + C - 1) / C; }

/* PSELL's plan (sym false) or SPSELL's (sym: shapes needed by the rule,
 * so allocated here). */
static int psell_plan(const spmv_csr *a, bool sym, int64_t *slots, int64_t *bytes, spmv_error *err)
{
    vset s;
    psell_shape *shapes = NULL;
    int64_t ns = psell_nslices(a), widths, idx_total, nvals, vbytes;
    int st = vset_build(&s, a, err);
    if (st)
        return st;
    if (sym && !(shapes = spmv_array_alloc(ns, sizeof *shapes, &st))) {
        vset_free(&s);
        return spmv_error_set(err, st, 0, "cannot allocate the plan of an SPSELL of %d rows", a->rows);
    }
    psell_sizes(a, ns, sym, &widths, &idx_total, &nvals, shapes);
    values_mode(&s, a->nnz, nvals, (int64_t)spmv_dtype_size(a->dtype), &vbytes);
    vset_free(&s);
    free(shapes);
    *slots = widths * C;
    *bytes = psell_index_bytes(ns, widths, idx_total) + vbytes + (sym ? ns : 0);
    return SPMV_OK;
}

int spmv_psell_plan(const spmv_csr *a, int64_t *slots, int64_t *bytes, spmv_error *err)
{
    return psell_plan(a, false, slots, bytes, err);
}

/* Slice s of `in` into out: offsets, base, indices, values (out's offset
 * tables filled up to s); a mirrored slice's source table is filled once
 * every slice is (spsell_fill_sources). idx_off is a multiple of 16 bytes
 * (C in PSELL), so a slice's indices, or its table, are aligned for their
 * type. */
static void psell_fill_slice(const spmv_csr *in, spmv_psell *out, const vset *set, int32_t s, psell_shape sh)
{
    int32_t r0, r1, w = sh.width, ib = sh.ib, k0 = sh.k0;
    bool uniform = sh.uniform;
    psell_rows(in, s, &r0, &r1);
    int64_t s0 = out->slot_off[s], v0 = out->val_off[s];
    uint8_t *idx = out->idx + out->idx_off[s];
    out->slot_off[s + 1] = s0 + w;
    out->idx_off[s + 1] = out->idx_off[s] + psell_slice_idx_bytes(w, ib, k0);
    out->val_off[s + 1] = v0 + (uniform ? w - k0 : (int64_t)(w - k0) * C);
    out->idx_bytes[s] = (uint8_t)ib;
    for (int32_t k = 0; k < w; k++) {
        int32_t mn, mx;
        psell_slot_range(in, r0, r1, k, &mn, &mx);
        int32_t base = ib < 4 ? mn : 0;
        out->base[s0 + k] = base;
        for (int32_t r = 0; r < C; r++) {
            int32_t i = r0 + r;
            bool real = i < r1 && row_len(in, i) > k;
            int64_t src = real ? spmv_csr_row_begin(in, i) + k : -1;
            /* slots k < k0 (mirrored) store nothing: the source row's slot holds the value */
            if (k >= k0 && !uniform)
                values_put(&out->v, set, in, v0 + (int64_t)(k - k0) * C + r, src);
            else if (k >= k0 && real) /* every real entry of the slot holds this value */
                values_put(&out->v, set, in, v0 + k - k0, src);
            if (ib == 0) /* diagonal: every row real, column base + r, no entry */
                continue;
            int64_t at = (int64_t)k * C + r;
            int32_t d = real ? in->col[src] - base : -1; /* -1: all ones at every width */
            if (ib == 1)
                idx[at] = (uint8_t)d;
            else if (ib == 2)
                ((uint16_t *)idx)[at] = (uint16_t)d;
            else
                ((int32_t *)idx)[at] = d;
        }
    }
}

/* out's arrays for ns slices, `widths` slot columns, idx_total index
 * bytes, nvals value entries in `mode`. */
static int psell_alloc(spmv_psell *out, vset *s, spmv_vcode mode, int64_t ns, int64_t widths, int64_t idx_total,
                       int64_t nvals, spmv_dtype dt)
{
    int st = SPMV_OK;
    out->slot_off = spmv_array_alloc(ns + 1, sizeof(int64_t), &st);
    out->idx_off = spmv_array_alloc(ns + 1, sizeof(int64_t), &st);
    out->val_off = spmv_array_alloc(ns + 1, sizeof(int64_t), &st);
    out->idx_bytes = spmv_array_alloc(ns, 1, &st);
    out->base = spmv_array_alloc(widths, sizeof(int32_t), &st);
    out->idx = spmv_array_alloc(idx_total, 1, &st);
    if (!out->slot_off || !out->idx_off || !out->val_off || !out->idx_bytes || !out->base || !out->idx)
        return st;
    return values_alloc(&out->v, mode, s, nvals, dt);
}

/* First slot of slice s that stores values: w/2 when mirror (SPSELL's,
 * NULL for PSELL) marks it, else 0. */
static int64_t psell_k0(const spmv_psell *m, const uint8_t *mirror, int64_t s)
{
    return mirror && mirror[s] ? (m->slot_off[s + 1] - m->slot_off[s]) / 2 : 0;
}

/* The source entry of slot q of slice t (engine/spmv.h spmv_spsell): its
 * value entry in local row 0, which local row lr's is plus lr, or -1 -
 * the slot's one entry when t is uniform. */
static int64_t spsell_source(const spmv_psell *m, const uint8_t *mirror, int64_t t, int64_t q)
{
    int64_t w = m->slot_off[t + 1] - m->slot_off[t], k0 = psell_k0(m, mirror, t);
    int64_t v0 = m->val_off[t], nv = m->val_off[t + 1] - v0;
    return nv == (w - k0) * C ? v0 + (q - k0) * C : -1 - (v0 + q - k0);
}

/* Record k of mirrored slice s's source table: the source entries of slot
 * q = w-1-k in the slices of its source rows base_k + 0 .. base_k + C-1,
 * slice base_k / C's and, when the rows run into it, the next one's (else
 * 0). */
static void spsell_record(const spmv_psell *m, const uint8_t *mirror, int64_t s, int64_t k, int64_t rec[2])
{
    int64_t s0 = m->slot_off[s], w = m->slot_off[s + 1] - s0, j0 = m->base[s0 + k], q = w - 1 - k;
    rec[0] = spsell_source(m, mirror, j0 / C, q);
    rec[1] = j0 % C ? spsell_source(m, mirror, j0 / C + 1, q) : 0;
}

/* Every mirrored slice's source table, from the filled arrays (the source
 * slices' offsets and layouts are all known by then). */
static void spsell_fill_sources(spmv_psell *m, const uint8_t *mirror)
{
    for (int32_t s = 0; s < m->nslices; s++)
        for (int64_t k = 0; k < psell_k0(m, mirror, s); k++) {
            int64_t rec[2];
            spsell_record(m, mirror, s, k, rec);
            memcpy(m->idx + m->idx_off[s] + k * SPMV_SPSELL_SRC_BYTES, rec, sizeof rec);
        }
}

/* PSELL (mirror NULL) or SPSELL (*mirror: its mirror array, allocated
 * here) from `in` under the rule lim for format f. */
static int psell_build(const spmv_csr *in, const spmv_format_limits *lim, spmv_format f, spmv_psell *out,
                       uint8_t **mirror, spmv_error *err)
{
    vset s = {0};
    psell_shape *shapes = NULL;
    const char *name = f == SPMV_FMT_SPSELL ? "SPSELL" : "PSELL";
    int64_t ns, widths, idx_total, nvals, vbytes;
    int st;
    memset(out, 0, sizeof *out);
    /* a wide CSR's non-zeros may pass INT32_MAX: its PSELL's offsets are 64-bit */
    if ((st = spmv_check_shape(in->rows, in->cols, spmv_csr_wide(in) ? 0 : in->nnz, err)) ||
        (st = vset_build(&s, in, err)))
        return st;
    ns = psell_nslices(in);
    if (!(shapes = spmv_array_alloc(ns, sizeof *shapes, &st))) {
        st = spmv_error_set(err, st, 0, "cannot allocate the plan of a %s of %d rows", name, in->rows);
        goto done;
    }
    psell_sizes(in, ns, mirror != NULL, &widths, &idx_total, &nvals, shapes);
    spmv_vcode mode = values_mode(&s, in->nnz, nvals, (int64_t)spmv_dtype_size(in->dtype), &vbytes);
    if ((st = spmv_format_check(lim, f, in->nnz, widths * C,
                                psell_index_bytes(ns, widths, idx_total) + vbytes + (mirror ? ns : 0), err)))
        goto done;
    SPMV_COPY_SHAPE(out, in);
    out->nslices = (int32_t)ns;
    out->slots = widths * C;
    if ((mirror && !(*mirror = spmv_array_alloc(ns, 1, &st))) ||
        (st = psell_alloc(out, &s, mode, ns, widths, idx_total, nvals, in->dtype))) {
        st = spmv_error_set(err, st, 0, "cannot allocate a %s of %d rows, %lld slots (%s)", name, in->rows,
                            (long long)out->slots, spmv_strerror(st));
        goto done;
    }
    out->slot_off[0] = out->idx_off[0] = out->val_off[0] = 0;
    for (int32_t sl = 0; sl < out->nslices; sl++) {
        psell_fill_slice(in, out, &s, sl, shapes[sl]);
        if (mirror)
            (*mirror)[sl] = shapes[sl].k0 > 0;
    }
    if (mirror)
        spsell_fill_sources(out, *mirror);
done:
    free(shapes);
    vset_free(&s);
    if (st) {
        spmv_psell_free(out);
        if (mirror) {
            free(*mirror);
            *mirror = NULL;
        }
    }
    return st;
}

int spmv_csr_to_psell(const spmv_csr *in, const spmv_format_limits *lim, spmv_psell *out, spmv_error *err)
{
    return psell_build(in, lim, SPMV_FMT_PSELL, out, NULL, err);
}

/* Index entry of slot k, local row r of slice s: its column, or -1 for
 * padding. */
static int64_t psell_col(const spmv_psell *m, int32_t s, int64_t k, int32_t r)
{
    const uint8_t *p = m->idx + m->idx_off[s];
    int64_t at = k * C + r, base = m->base[m->slot_off[s] + k];
    switch (m->idx_bytes[s]) {
    case 0: return base + r;
    case 1: return p[at] == UINT8_MAX ? -1 : base + p[at];
    case 2: return ((const uint16_t *)p)[at] == UINT16_MAX ? -1 : base + ((const uint16_t *)p)[at];
    default: return ((const int32_t *)p)[at];
    }
}

/* Value entry of slot k, local row r of slice s (a uniform slice: one a
 * slot); a mirrored slice's slot k < w/2 (offset -d) reads the source row
 * j = i - d's slot w-1-k (offset +d) in j's slice, validated by
 * spsell_sources_ok. */
static int64_t psell_val(const spmv_psell *m, const uint8_t *mirror, int32_t s, int64_t k, int32_t r)
{
    int64_t w = m->slot_off[s + 1] - m->slot_off[s], k0 = psell_k0(m, mirror, s);
    if (k < k0) {
        int64_t j = m->base[m->slot_off[s] + k] + r; /* i - d: the column of a diagonal slice's slot */
        s = (int32_t)(j / C);
        r = (int32_t)(j % C);
        k = w - 1 - k;
        w = m->slot_off[s + 1] - m->slot_off[s];
        k0 = psell_k0(m, mirror, s);
    }
    int64_t ws = w - k0;
    return m->val_off[s + 1] - m->val_off[s] == ws * C ? m->val_off[s] + (k - k0) * C + r : m->val_off[s] + k - k0;
}

/* Whether mirrored slice s of SPSELL m follows the rule: diagonal, offsets
 * in pairs, each row's source row j = i - d holding, in its slot w-1-k of
 * its slice, a stored entry of column i, and its source table (aligned,
 * its size checked by psell_ok) saying where those entries are. */
static bool spsell_sources_ok(const spmv_psell *m, const uint8_t *mirror, int64_t s)
{
    int64_t s0 = m->slot_off[s], w = m->slot_off[s + 1] - s0, r0 = s * C;
    if (m->idx_bytes[s] != 0 || w == 0)
        return false;
    for (int64_t k = 0; k < w; k++)
        if ((int64_t)m->base[s0 + k] - r0 != r0 - (int64_t)m->base[s0 + w - 1 - k])
            return false;
    for (int64_t k = 0; k < w / 2; k++)
        for (int32_t r = 0; r < C; r++) {
            int64_t j = (int64_t)m->base[s0 + k] + r, q = w - 1 - k;
            if (j < 0 || j >= r0 + r)
                return false;
            int32_t t = (int32_t)(j / C);
            int64_t wt = m->slot_off[t + 1] - m->slot_off[t];
            if (q >= wt || q < psell_k0(m, mirror, t) || psell_col(m, t, q, (int32_t)(j % C)) != r0 + r)
                return false;
        }
    if (m->idx_off[s] % SPMV_SPSELL_SRC_BYTES)
        return false;
    for (int64_t k = 0; k < w / 2; k++) {
        int64_t want[2], have[2];
        spsell_record(m, mirror, s, k, want);
        memcpy(have, m->idx + m->idx_off[s] + k * SPMV_SPSELL_SRC_BYTES, sizeof have);
        if (have[0] != want[0] || have[1] != want[1])
            return false;
    }
    return true;
}

static bool psell_ok(const spmv_psell *m, const uint8_t *mirror)
{
    if (m->rows < 0 || m->nslices != ((int64_t)m->rows + C - 1) / C || !m->slot_off || !m->idx_off ||
        !m->val_off || !m->idx_bytes || !m->base || !m->idx || !values_ok(&m->v) ||
        m->slots != m->slot_off[m->nslices] * C || m->val_off[0] != 0)
        return false;
    for (int32_t s = 0; s < m->nslices; s++) {
        int ib = m->idx_bytes[s];
        int64_t w = m->slot_off[s + 1] - m->slot_off[s], nv = m->val_off[s + 1] - m->val_off[s];
        if ((ib != 0 && ib != 1 && ib != 2 && ib != 4) || (ib == 0 && (int64_t)s * C + C > m->rows) || w < 0 ||
            m->idx_off[s + 1] - m->idx_off[s] != psell_slice_idx_bytes(w, ib, psell_k0(m, mirror, s)))
            return false;
        int64_t ws = w - psell_k0(m, mirror, s); /* the slots that store values */
        if ((nv != ws * C && (nv != ws || ws == 0)) || (mirror && mirror[s] && !spsell_sources_ok(m, mirror, s)))
            return false;
    }
    return true;
}

/* PSELL (mirror NULL) or SPSELL's arrays back to COO; `name` for errors. */
static int psell_to_coo(const spmv_psell *in, const uint8_t *mirror, const char *name, spmv_coo *out,
                        spmv_error *err)
{
    memset(out, 0, sizeof *out);
    if (!psell_ok(in, mirror))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "malformed %s (%d rows, %d slices)", name, in->rows,
                              in->nslices);
    int64_t n = 0;
    for (int32_t s = 0; s < in->nslices; s++)
        for (int64_t k = 0; k < in->slot_off[s + 1] - in->slot_off[s]; k++)
            for (int32_t r = 0; r < C; r++)
                n += psell_col(in, s, k, r) >= 0;
    int st = spmv_coo_alloc(out, in->rows, in->cols, n, in->dtype, err);
    if (st)
        return st;
    n = 0;
    for (int32_t i = 0; i < in->rows; i++) {
        int32_t s = i / C, r = i % C;
        for (int64_t k = 0; k < in->slot_off[s + 1] - in->slot_off[s]; k++) {
            int64_t c = psell_col(in, s, k, r);
            if (c < 0)
                continue;
            if (c >= in->cols || n >= out->nnz ||
                values_get(&in->v, in->dtype, psell_val(in, mirror, s, k, r), out->val, n)) {
                spmv_coo_free(out);
                return spmv_error_set(err, SPMV_ERR_INVALID, 0, "malformed %s: slot %lld of row %d", name,
                                      (long long)k, i);
            }
            out->row[n] = i;
            out->col[n++] = (int32_t)c;
        }
    }
    if (n != out->nnz) { /* entries in the last slice's rows past `rows` */
        spmv_coo_free(out);
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "malformed %s: entries past row %d", name, in->rows);
    }
    return SPMV_OK;
}

int spmv_psell_to_coo(const spmv_psell *in, spmv_coo *out, spmv_error *err)
{
    return psell_to_coo(in, NULL, "PSELL", out, err);
}


/* ---------------------------------------------------------------- SPSELL */

void spmv_spsell_free(spmv_spsell *m)
{
    if (!m)
        return;
    spmv_psell_free(&m->p);
    free(m->mirror);
    memset(m, 0, sizeof *m);
}

spmv_format_info spmv_spsell_info(const spmv_spsell *m)
{
    spmv_format_info fi = spmv_psell_info(&m->p);
    fi.bytes += m->mirror ? (size_t)m->p.nslices : 0;
    return fi;
}

/* SPMV_OK when SPSELL can be built from a: square and exactly symmetric. */
static int spsell_need_symmetric(const spmv_csr *a, spmv_error *err)
{
    if (a->rows != a->cols)
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0,
                              "SPSELL needs a square, exactly symmetric matrix: this one is %d x %d", a->rows,
                              a->cols);
    if (!spmv_csr_symmetric(a))
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0,
                              "SPSELL needs an exactly symmetric matrix: this one differs from its transpose");
    return SPMV_OK;
}

int spmv_spsell_plan(const spmv_csr *a, int64_t *slots, int64_t *bytes, spmv_error *err)
{
    int st = spsell_need_symmetric(a, err);
    return st ? st : psell_plan(a, true, slots, bytes, err);
}

int spmv_csr_to_spsell(const spmv_csr *in, const spmv_format_limits *lim, spmv_spsell *out, spmv_error *err)
{
    int st;
    memset(out, 0, sizeof *out);
    if ((st = spmv_check_shape(in->rows, in->cols, in->nnz, err)) || (st = spsell_need_symmetric(in, err)) ||
        (st = psell_build(in, lim, SPMV_FMT_SPSELL, &out->p, &out->mirror, err)))
        return st;
    for (int32_t s = 0; s < out->p.nslices; s++)
        out->nmirrored += out->mirror[s];
    return SPMV_OK;
}

int spmv_spsell_to_coo(const spmv_spsell *in, spmv_coo *out, spmv_error *err)
{
    if (!in->mirror) {
        memset(out, 0, sizeof *out);
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "malformed SPSELL: no mirror array");
    }
    return psell_to_coo(&in->p, in->mirror, "SPSELL", out, err);
}

/* ------------------------------------------------ lent to engine/pbsr.c */

struct spmv_vpack {
    vset s;
    const spmv_csr *a;
};

int spmv_vpack_new(const spmv_csr *a, spmv_vpack **out, spmv_error *err)
{
    spmv_vpack *p = calloc(1, sizeof *p);
    int st;
    *out = NULL;
    if (!p)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "cannot allocate the distinct-value set");
    if ((st = vset_build(&p->s, a, err))) {
        free(p);
        return st;
    }
    p->a = a;
    *out = p;
    return SPMV_OK;
}

spmv_vcode spmv_vpack_mode(const spmv_vpack *p, int64_t n, int64_t *bytes)
{
    return values_mode(&p->s, p->a->nnz, n, (int64_t)spmv_dtype_size(p->a->dtype), bytes);
}

int spmv_vpack_alloc(spmv_vpack *p, spmv_packed_values *v, spmv_vcode mode, int64_t n)
{
    return values_alloc(v, mode, &p->s, n, p->a->dtype);
}

void spmv_vpack_put(const spmv_vpack *p, spmv_packed_values *v, int64_t e, int64_t src)
{
    values_put(v, &p->s, p->a, e, src);
}

void spmv_vpack_free(spmv_vpack *p)
{
    if (!p)
        return;
    vset_free(&p->s);
    free(p);
}

int spmv_packed_values_get(const spmv_packed_values *v, spmv_dtype dt, int64_t e, void *dst, int64_t di)
{
    return values_get(v, dt, e, dst, di);
}

bool spmv_packed_values_ok(const spmv_packed_values *v) { return values_ok(v); }

void spmv_packed_values_free(spmv_packed_values *v) { values_free(v); }

int64_t spmv_packed_values_bytes(spmv_vcode mode, int64_t ntable, int64_t n, int64_t vs)
{
    return values_bytes(mode, ntable, n, vs);
}

void spmv_pcsr_index_plan(const spmv_csr *a, int32_t *ib, int64_t *wide_nnz, int64_t *bytes)
{
    pcsr_index_plan(a, ib, wide_nnz, bytes);
}

void spmv_pcsr_index_fill(const spmv_csr *a, int32_t ib, int32_t *base, void *idx, int32_t *wide_col)
{
    spmv_pcsr t = {.idx_bytes = ib, .base = base, .idx = idx, .wide_col = wide_col};
    pcsr_fill_index(a, &t);
}
