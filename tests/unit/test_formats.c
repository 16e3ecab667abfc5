/* test_formats.c — storage formats and host conversions (engine/coo.c,
 * csr.c, ell.c, hll.c, hyb.c, matrix.c).
 *
 * Random matrices in every test shape (drawn afresh each run, seed printed)
 * go COO -> CSR -> {COO, ELL, HLL, HYB} -> COO and must come back identical,
 * bit for bit. The ELL and HLL layouts are checked slot by slot against the
 * CSR (column-major, padding column -1 value 0, HLL row stride hack_size
 * with the last slice padded), byte counts and padding ratios against
 * formulas worked out here, and the limits (slot bound, 32-bit counts, bad
 * hack sizes, out-of-range indices) must be refused with a message that
 * names them. COO -> CSR must also repair input that breaks the COO
 * contract (unsorted, duplicates).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "spmv.h"
#include "testutil.h"

static const int32_t hack_sizes[] = {1, 7, 32, 64};
static const int32_t sizes[] = {1, 2, 31, 33, 150};

/* Calls body(coo) for every shape x size x dtype. */
static void for_each_matrix(tu_rng *r, void (*body)(const spmv_coo *, const char *))
{
    for (int s = 0; s < TU_SHAPE_COUNT; s++)
        for (size_t n = 0; n < sizeof sizes / sizeof sizes[0]; n++)
            for (int d = 0; d < 2; d++) {
                spmv_coo coo;
                char what[96];
                tu_random_coo(r, (tu_shape)s, sizes[n], (spmv_dtype)d, &coo);
                snprintf(what, sizeof what, "%s n=%d %s (%d x %d, nnz %lld)", tu_shape_name((tu_shape)s),
                         sizes[n], spmv_dtype_name((spmv_dtype)d), coo.rows, coo.cols, (long long)coo.nnz);
                body(&coo, what);
                spmv_coo_free(&coo);
            }
}

static void to_csr(const spmv_coo *coo, spmv_csr *csr)
{
    spmv_error err;
    int st = spmv_coo_to_csr(coo, coo->dtype, csr, &err);
    if (st)
        fail_msg("coo_to_csr: %s", err.message);
}

static void expect_same(const spmv_coo *a, spmv_coo *b, const char *what, const char *path)
{
    if (!tu_coo_equal(a, b))
        fail_msg("%s: round trip through %s differs (SPMV_SEED=%llu)", what, path,
                 (unsigned long long)tu_seed());
    spmv_coo_free(b);
}

/* ------------------------------------------------------------ round trips */

static void csr_round_trip(const spmv_coo *coo, const char *what)
{
    spmv_csr csr;
    spmv_coo back;
    to_csr(coo, &csr);
    /* row_ptr counts the entries of each row, checked independently. */
    assert_int_equal(csr.row_ptr[0], 0);
    for (int64_t k = 0; k < coo->nnz; k++)
        assert_true(k >= csr.row_ptr[coo->row[k]] && k < csr.row_ptr[coo->row[k] + 1]);
    assert_int_equal(csr.row_ptr[csr.rows], coo->nnz);
    assert_int_equal(spmv_csr_to_coo(&csr, &back, NULL), SPMV_OK);
    expect_same(coo, &back, what, "CSR");
    spmv_csr_free(&csr);
}

/* ELL: column-major, entry k of row i at k*rows + i, padding -1 / 0. */
static void check_ell_layout(const spmv_csr *csr, const spmv_ell *e, int32_t width)
{
    assert_int_equal(e->width, width);
    assert_int_equal(e->rows, csr->rows);
    for (int32_t i = 0; i < csr->rows; i++) {
        int32_t len = csr->row_ptr[i + 1] - csr->row_ptr[i];
        for (int32_t k = 0; k < width; k++) {
            int64_t slot = (int64_t)k * csr->rows + i;
            double v = e->dtype == SPMV_FLOAT32 ? ((float *)e->val)[slot] : ((double *)e->val)[slot];
            if (k < len) {
                assert_int_equal(e->col[slot], csr->col[csr->row_ptr[i] + k]);
            } else {
                assert_int_equal(e->col[slot], -1);
                assert_true(v == 0.0 && !signbit(v));
            }
        }
    }
}

static int32_t max_row(const spmv_csr *csr)
{
    int32_t w = 0;
    for (int32_t i = 0; i < csr->rows; i++)
        if (csr->row_ptr[i + 1] - csr->row_ptr[i] > w)
            w = csr->row_ptr[i + 1] - csr->row_ptr[i];
    return w;
}

static void ell_round_trip(const spmv_coo *coo, const char *what)
{
    spmv_csr csr;
    spmv_ell ell;
    spmv_coo back;
    to_csr(coo, &csr);
    assert_int_equal(spmv_csr_to_ell(&csr, 0, &ell, NULL), SPMV_OK);
    check_ell_layout(&csr, &ell, max_row(&csr));
    assert_int_equal(ell.nnz, coo->nnz);
    size_t vs = spmv_dtype_size(coo->dtype);
    spmv_format_info info = spmv_ell_info(&ell);
    int64_t slots = (int64_t)max_row(&csr) * csr.rows;
    assert_int_equal(info.bytes, (size_t)slots * (4 + vs));
    assert_true(fabs(info.padding_ratio - (coo->nnz ? (double)slots / coo->nnz : 1.0)) < 1e-12);
    assert_int_equal(spmv_ell_to_coo(&ell, &back, NULL), SPMV_OK);
    expect_same(coo, &back, what, "ELL");
    spmv_ell_free(&ell);
    spmv_csr_free(&csr);
}

/* HLL: slice s at slice_off[s], entry k of local row r at + k*h + r. */
static void check_hll_layout(const spmv_csr *csr, const spmv_hll *m, int32_t h)
{
    int32_t nslices = (csr->rows + h - 1) / h;
    assert_int_equal(m->hack_size, h);
    assert_int_equal(m->nslices, nslices);
    assert_int_equal(m->slice_off[0], 0);
    for (int32_t s = 0; s < nslices; s++) {
        int32_t w = 0;
        for (int32_t i = s * h; i < csr->rows && i < (s + 1) * h; i++)
            if (csr->row_ptr[i + 1] - csr->row_ptr[i] > w)
                w = csr->row_ptr[i + 1] - csr->row_ptr[i];
        assert_int_equal(m->slice_width[s], w);
        assert_int_equal(m->slice_off[s + 1] - m->slice_off[s], (int64_t)w * h);
        for (int32_t r = 0; r < h; r++) {
            int32_t i = s * h + r;
            int32_t len = i < csr->rows ? csr->row_ptr[i + 1] - csr->row_ptr[i] : 0;
            for (int32_t k = 0; k < w; k++) {
                int64_t slot = m->slice_off[s] + (int64_t)k * h + r;
                double v = m->dtype == SPMV_FLOAT32 ? ((float *)m->val)[slot] : ((double *)m->val)[slot];
                if (k < len)
                    assert_int_equal(m->col[slot], csr->col[csr->row_ptr[i] + k]);
                else
                    assert_true(m->col[slot] == -1 && v == 0.0);
            }
        }
    }
}

static void hll_round_trip(const spmv_coo *coo, const char *what)
{
    spmv_csr csr;
    to_csr(coo, &csr);
    for (size_t j = 0; j < sizeof hack_sizes / sizeof hack_sizes[0]; j++) {
        spmv_hll hll;
        spmv_coo back;
        int32_t h = hack_sizes[j];
        char path[32];
        assert_int_equal(spmv_csr_to_hll(&csr, h, &hll, NULL), SPMV_OK);
        check_hll_layout(&csr, &hll, h);
        assert_int_equal(hll.nnz, coo->nnz);
        size_t vs = spmv_dtype_size(coo->dtype);
        int64_t slots = hll.slice_off[hll.nslices];
        spmv_format_info info = spmv_hll_info(&hll);
        assert_int_equal(info.bytes, (size_t)slots * (4 + vs) + ((size_t)hll.nslices + 1) * 8 + hll.nslices * 4);
        assert_true(fabs(info.padding_ratio - (coo->nnz ? (double)slots / coo->nnz : 1.0)) < 1e-12);
        assert_int_equal(spmv_hll_to_coo(&hll, &back, NULL), SPMV_OK);
        snprintf(path, sizeof path, "HLL hack %d", h);
        expect_same(coo, &back, what, path);
        spmv_hll_free(&hll);
    }
    spmv_csr_free(&csr);
}

static void hyb_round_trip(const spmv_coo *coo, const char *what)
{
    static const int32_t widths[] = {-1, 0, 1, 3, 1 << 30};
    spmv_csr csr;
    to_csr(coo, &csr);
    for (size_t j = 0; j < sizeof widths / sizeof widths[0]; j++) {
        spmv_hyb hyb;
        spmv_coo back;
        assert_int_equal(spmv_csr_to_hyb(&csr, widths[j], &hyb, NULL), SPMV_OK);
        int32_t w = hyb.ell.width;
        if (widths[j] >= 0)
            assert_int_equal(w, widths[j] < max_row(&csr) ? widths[j] : max_row(&csr));
        check_ell_layout(&csr, &hyb.ell, w); /* the first w entries of each row */
        assert_int_equal(hyb.ell.nnz + hyb.coo.nnz, coo->nnz);
        spmv_format_info info = spmv_hyb_info(&hyb);
        size_t vs = spmv_dtype_size(coo->dtype);
        assert_int_equal(info.bytes, (size_t)w * csr.rows * (4 + vs) + (size_t)hyb.coo.nnz * (8 + vs));
        assert_int_equal(spmv_hyb_to_coo(&hyb, &back, NULL), SPMV_OK);
        expect_same(coo, &back, what, "HYB");
        spmv_hyb_free(&hyb);
    }
    spmv_csr_free(&csr);
}

static void test_csr_round_trip(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 1);
    for_each_matrix(&r, csr_round_trip);
}

static void test_ell_round_trip(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 2);
    for_each_matrix(&r, ell_round_trip);
}

static void test_hll_round_trip(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 3);
    for_each_matrix(&r, hll_round_trip);
}

static void test_hyb_round_trip(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 4);
    for_each_matrix(&r, hyb_round_trip);
}

/* ------------------------------------------------------- small, by hand */

/* A 9 x 30 float64 COO with the given row lengths, columns 0..len-1. */
static void coo_with_lengths(const int32_t *len, int32_t rows, spmv_coo *coo)
{
    int64_t nnz = 0;
    for (int32_t i = 0; i < rows; i++)
        nnz += len[i];
    assert_int_equal(spmv_coo_alloc(coo, rows, 30, nnz, SPMV_FLOAT64, NULL), SPMV_OK);
    int64_t k = 0;
    for (int32_t i = 0; i < rows; i++)
        for (int32_t j = 0; j < len[i]; j++, k++) {
            coo->row[k] = i;
            coo->col[k] = j;
            ((double *)coo->val)[k] = 1.0 + (double)k;
        }
}

static void test_hyb_auto_width(void **state)
{
    (void)state;
    /* 9 rows; two thirds = 6 rows must fit: sorted lengths 0 1 1 2 2 2 | 3 10 20. */
    const int32_t len[9] = {2, 20, 0, 1, 2, 10, 1, 2, 3};
    spmv_coo coo;
    spmv_csr csr;
    spmv_hyb hyb;
    coo_with_lengths(len, 9, &coo);
    to_csr(&coo, &csr);
    assert_int_equal(spmv_csr_to_hyb(&csr, -1, &hyb, NULL), SPMV_OK);
    assert_int_equal(hyb.ell.width, 2);
    assert_int_equal(hyb.coo.nnz, (3 - 2) + (10 - 2) + (20 - 2));
    assert_int_equal(hyb.ell.nnz, coo.nnz - hyb.coo.nnz);
    /* padding ratio: (2*9 slots + 27 COO) / nnz */
    assert_true(fabs(spmv_hyb_info(&hyb).padding_ratio - (18.0 + 27.0) / (double)coo.nnz) < 1e-12);
    spmv_hyb_free(&hyb);
    spmv_csr_free(&csr);
    spmv_coo_free(&coo);
}

static void test_ell_slot_limit(void **state)
{
    (void)state;
    const int32_t len[4] = {1, 25, 1, 0};
    spmv_coo coo;
    spmv_csr csr;
    spmv_ell ell;
    spmv_error err = {0};
    coo_with_lengths(len, 4, &coo);
    to_csr(&coo, &csr);
    assert_int_equal(spmv_csr_to_ell(&csr, 99, &ell, &err), SPMV_ERR_LIMIT);
    assert_int_equal(err.status, SPMV_ERR_LIMIT);
    assert_non_null(strstr(err.message, "width 25"));
    assert_non_null(strstr(err.message, "4 rows"));
    assert_null(ell.col);
    assert_int_equal(spmv_csr_to_ell(&csr, 100, &ell, &err), SPMV_OK);
    assert_int_equal(ell.width, 25);
    spmv_ell_free(&ell);

    /* A matrix build skips the formats the padding rule refuses (bit
     * clear) instead of failing: ELL 100 slots = 800 bytes, HLL one slice
     * of 32 x 25 slots; HYB (width 1: 4 slots + 24 COO) and COO fit. */
    spmv_matrix m;
    spmv_format_limits lim = {SPMV_MAX_PADDING_DEFAULT, 799};
    assert_int_equal(spmv_matrix_build(&coo, SPMV_FLOAT32, SPMV_FMT_ALL, 0, &lim, &m, &err), SPMV_OK);
    assert_int_equal(m.formats, SPMV_FMT_CSR | SPMV_FMT_COO | SPMV_FMT_HYB);
    assert_int_equal(m.hack_size, SPMV_HACK_SIZE_DEFAULT);
    assert_int_equal(m.dtype, SPMV_FLOAT32);
    assert_int_equal(spmv_matrix_add_format(&m, SPMV_FMT_ELL, &err), SPMV_ERR_LIMIT);
    assert_non_null(strstr(err.message, "ell format"));
    assert_non_null(strstr(err.message, "800 bytes"));
    assert_non_null(strstr(err.message, "max_format_bytes 799"));
    assert_false(m.formats & SPMV_FMT_ELL);
    assert_null(m.ell.col);
    m.limits.max_format_bytes = 800;
    assert_int_equal(spmv_matrix_add_format(&m, SPMV_FMT_ELL, &err), SPMV_OK);
    assert_true(m.formats & SPMV_FMT_ELL);
    assert_int_equal(m.ell.width, 25);
    /* dropped and rebuilt: the same entries */
    assert_int_equal(spmv_matrix_format_bytes(&m, SPMV_FMT_ELL), 800);
    spmv_matrix_drop_format(&m, SPMV_FMT_ELL);
    spmv_matrix_drop_format(&m, SPMV_FMT_CSR); /* never dropped */
    assert_int_equal(m.formats, SPMV_FMT_CSR | SPMV_FMT_COO | SPMV_FMT_HYB);
    assert_int_equal(spmv_matrix_format_bytes(&m, SPMV_FMT_ELL), 0);
    spmv_matrix_free(&m);
    spmv_csr_free(&csr);
    spmv_coo_free(&coo);
}

/* The padding rule: slots <= max_padding * nnz + SPMV_PADDING_SLACK and
 * bytes <= max_format_bytes, exact at the bounds; the plan of each format
 * equals what the conversion then holds. */
static void test_padding_rule(void **state)
{
    (void)state;
    spmv_error err = {0};
    spmv_format_limits lim = spmv_format_limits_default();
    int64_t nnz = 1000 + (int64_t)(tu_seed() % 1000), edge = 3 * nnz + SPMV_PADDING_SLACK;
    assert_true(lim.max_padding == 3.0 && lim.max_format_bytes == 0);
    assert_int_equal(spmv_format_check(&lim, SPMV_FMT_ELL, nnz, edge, 1, &err), SPMV_OK);
    assert_int_equal(spmv_format_check(&lim, SPMV_FMT_ELL, nnz, edge + 1, 1, &err), SPMV_ERR_LIMIT);
    char want[64];
    snprintf(want, sizeof want, "%lld slots for %lld non-zeros", (long long)(edge + 1), (long long)nnz);
    assert_non_null(strstr(err.message, want));
    assert_non_null(strstr(err.message, "max_padding 3.00"));
    assert_int_equal(spmv_format_check(NULL, SPMV_FMT_ELL, nnz, INT64_MAX / 2, INT64_MAX / 2, &err), SPMV_OK);
    lim.max_padding = 0; /* no bound */
    assert_int_equal(spmv_format_check(&lim, SPMV_FMT_HLL, nnz, INT64_MAX / 2, 5, &err), SPMV_OK);
    lim.max_format_bytes = 5;
    assert_int_equal(spmv_format_check(&lim, SPMV_FMT_HLL, nnz, 1, 6, &err), SPMV_ERR_LIMIT);
    assert_non_null(strstr(err.message, "max_format_bytes 5"));

    tu_rng r;
    spmv_coo coo;
    spmv_matrix m;
    tu_rng_init(&r, tu_seed() ^ 11);
    tu_random_coo(&r, TU_SHAPE_POWER_LAW, 500, SPMV_FLOAT64, &coo);
    assert_int_equal(spmv_matrix_build(&coo, SPMV_FLOAT64, SPMV_FMT_ALL, 16, NULL, &m, &err), SPMV_OK);
    static const spmv_format fs[] = {SPMV_FMT_CSR, SPMV_FMT_COO, SPMV_FMT_ELL, SPMV_FMT_HLL, SPMV_FMT_HYB};
    for (size_t i = 0; i < 5; i++) {
        int64_t slots = -1, bytes = -1;
        assert_int_equal(spmv_format_plan(&m.csr, fs[i], 16, &slots, &bytes, &err), SPMV_OK);
        assert_int_equal((size_t)bytes, spmv_matrix_format_bytes(&m, fs[i]));
    }
    spmv_matrix_free(&m);
    spmv_coo_free(&coo);
}

static void test_matrix_build(void **state)
{
    (void)state;
    tu_rng r;
    spmv_coo coo, back;
    spmv_matrix m;
    spmv_error err;
    tu_rng_init(&r, tu_seed() ^ 5);
    tu_random_coo(&r, TU_SHAPE_POWER_LAW, 300, SPMV_FLOAT64, &coo);
    assert_int_equal(spmv_matrix_build(&coo, SPMV_FLOAT64, SPMV_FMT_HLL, 7, 0, &m, &err), SPMV_OK);
    assert_int_equal(m.formats, SPMV_FMT_CSR | SPMV_FMT_HLL);
    assert_int_equal(m.hll.hack_size, 7);
    assert_int_equal(m.rows, coo.rows);
    assert_int_equal(m.nnz, coo.nnz);
    assert_int_equal(spmv_matrix_add_format(&m, SPMV_FMT_COO, &err), SPMV_OK);
    assert_true(tu_coo_equal(&coo, &m.coo));
    assert_int_equal(spmv_matrix_add_format(&m, SPMV_FMT_HYB, &err), SPMV_OK);
    assert_int_equal(spmv_hyb_to_coo(&m.hyb, &back, &err), SPMV_OK);
    expect_same(&coo, &back, "matrix", "HYB");
    spmv_matrix_free(&m);
    spmv_matrix_free(&m); /* freeing twice is harmless: the struct is zeroed */
    assert_int_equal(spmv_matrix_build(&coo, SPMV_FLOAT64, 1u << 9, 0, 0, &m, &err), SPMV_ERR_INVALID);
    assert_int_equal(spmv_matrix_build(&coo, SPMV_FLOAT64, 0, -3, 0, &m, &err), SPMV_ERR_INVALID);
    assert_null(m.csr.row_ptr);
    spmv_coo_free(&coo);
}

static void test_coo_to_csr_repairs(void **state)
{
    (void)state;
    /* Unsorted rows and columns, and (1,2) twice: summed, sorted. */
    const int32_t row[] = {2, 1, 0, 1, 1, 2};
    const int32_t col[] = {0, 2, 3, 0, 2, 1};
    const double val[] = {1, 2, 3, 4, 5, 6};
    spmv_coo coo;
    spmv_csr csr;
    assert_int_equal(spmv_coo_alloc(&coo, 3, 4, 6, SPMV_FLOAT64, NULL), SPMV_OK);
    memcpy(coo.row, row, sizeof row);
    memcpy(coo.col, col, sizeof col);
    memcpy(coo.val, val, sizeof val);
    assert_int_equal(spmv_coo_to_csr(&coo, SPMV_FLOAT32, &csr, NULL), SPMV_OK);
    const int32_t rp[] = {0, 1, 3, 5}, cc[] = {3, 0, 2, 0, 1};
    const float vv[] = {3, 4, 7, 1, 6};
    assert_int_equal(csr.nnz, 5);
    assert_memory_equal(csr.row_ptr, rp, sizeof rp);
    assert_memory_equal(csr.col, cc, sizeof cc);
    assert_memory_equal(csr.val, vv, sizeof vv);
    assert_int_equal(csr.dtype, SPMV_FLOAT32);
    spmv_csr_free(&csr);

    /* An index outside the shape is refused, naming the entry. */
    spmv_error err = {0};
    coo.col[4] = 4;
    assert_int_equal(spmv_coo_to_csr(&coo, SPMV_FLOAT64, &csr, &err), SPMV_ERR_INVALID);
    assert_non_null(strstr(err.message, "(1, 4)"));
    coo.col[4] = 2;
    coo.row[0] = -1;
    assert_int_equal(spmv_coo_to_csr(&coo, SPMV_FLOAT64, &csr, &err), SPMV_ERR_INVALID);
    assert_null(csr.row_ptr);
    spmv_coo_free(&coo);
}

static void test_limits(void **state)
{
    (void)state;
    spmv_coo coo;
    spmv_csr csr;
    spmv_hll hll;
    spmv_error err = {0};
    assert_int_equal(spmv_coo_alloc(&coo, -1, 3, 0, SPMV_FLOAT64, &err), SPMV_ERR_INVALID);
    assert_int_equal(spmv_coo_alloc(&coo, 3, 3, INT64_MAX, SPMV_FLOAT64, &err), SPMV_ERR_LIMIT);
    assert_null(coo.row);
    /* More than 2^31-1 non-zeros cannot be CSR: refused before any allocation. */
    spmv_coo big = {.rows = 1 << 20, .cols = 1 << 20, .nnz = (int64_t)INT32_MAX + 1, .dtype = SPMV_FLOAT64};
    assert_int_equal(spmv_coo_to_csr(&big, SPMV_FLOAT64, &csr, &err), SPMV_ERR_LIMIT);
    assert_non_null(strstr(err.message, "2147483648"));
    /* hack_size below 1 */
    assert_int_equal(spmv_coo_alloc(&coo, 2, 2, 0, SPMV_FLOAT64, NULL), SPMV_OK);
    to_csr(&coo, &csr);
    assert_int_equal(spmv_csr_to_hll(&csr, 0, &hll, &err), SPMV_ERR_INVALID);
    assert_non_null(strstr(err.message, "hack_size 0"));
    spmv_csr_free(&csr);
    spmv_coo_free(&coo);
}

static void test_info_and_copies(void **state)
{
    (void)state;
    tu_rng r;
    spmv_coo coo, c32, c64, copy;
    spmv_csr csr;
    tu_rng_init(&r, tu_seed() ^ 6);
    tu_random_coo(&r, TU_SHAPE_RANDOM, 100, SPMV_FLOAT64, &coo);
    to_csr(&coo, &csr);
    assert_int_equal(spmv_coo_info(&coo).bytes, (size_t)coo.nnz * 16);
    assert_true(spmv_coo_info(&coo).padding_ratio == 1.0);
    assert_int_equal(spmv_csr_info(&csr).bytes, (size_t)(csr.rows + 1) * 4 + (size_t)csr.nnz * 12);
    assert_true(spmv_csr_info(&csr).padding_ratio == 1.0);
    assert_int_equal(spmv_coo_copy(&coo, &copy, NULL), SPMV_OK);
    assert_true(tu_coo_equal(&coo, &copy));
    assert_ptr_not_equal(copy.val, coo.val);
    assert_int_equal(spmv_coo_convert(&coo, SPMV_FLOAT32, &c32, NULL), SPMV_OK);
    assert_int_equal(c32.dtype, SPMV_FLOAT32);
    assert_int_equal(spmv_coo_info(&c32).bytes, (size_t)coo.nnz * 12);
    for (int64_t k = 0; k < coo.nnz; k++)
        assert_true(((float *)c32.val)[k] == (float)((double *)coo.val)[k]);
    assert_int_equal(spmv_coo_convert(&c32, SPMV_FLOAT64, &c64, NULL), SPMV_OK);
    assert_memory_equal(c64.row, coo.row, (size_t)coo.nnz * 4);
    spmv_coo_free(&c64);
    spmv_coo_free(&c32);
    spmv_coo_free(&copy);
    spmv_csr_free(&csr);
    spmv_coo_free(&coo);
}

static void test_empty_matrix(void **state)
{
    (void)state;
    /* 0 x 0, and 5 x 0: no rows or no columns at all. */
    for (int32_t rows = 0; rows <= 5; rows += 5) {
        spmv_coo coo;
        spmv_matrix m;
        assert_int_equal(spmv_coo_alloc(&coo, rows, 0, 0, SPMV_FLOAT64, NULL), SPMV_OK);
        assert_int_equal(spmv_matrix_build(&coo, SPMV_FLOAT64, SPMV_FMT_ALL, 64, 0, &m, NULL), SPMV_OK);
        assert_int_equal(m.formats, SPMV_FMT_ALL);
        assert_int_equal(m.ell.width, 0);
        assert_int_equal(m.hll.nslices, (rows + 63) / 64);
        assert_true(spmv_ell_info(&m.ell).padding_ratio == 1.0);
        spmv_matrix_free(&m);
        spmv_coo_free(&coo);
    }
}

int main(void)
{
    tu_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_csr_round_trip),  cmocka_unit_test(test_ell_round_trip),
        cmocka_unit_test(test_hll_round_trip),  cmocka_unit_test(test_hyb_round_trip),
        cmocka_unit_test(test_hyb_auto_width),  cmocka_unit_test(test_ell_slot_limit),
        cmocka_unit_test(test_matrix_build),
        cmocka_unit_test(test_padding_rule),
        cmocka_unit_test(test_coo_to_csr_repairs),
        cmocka_unit_test(test_limits),          cmocka_unit_test(test_info_and_copies),
        cmocka_unit_test(test_empty_matrix),
    };
    return cmocka_run_group_tests_name("formats", tests, NULL, NULL);
}
