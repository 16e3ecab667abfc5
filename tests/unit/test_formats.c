/* test_formats.c — storage formats and host conversions (engine/coo.c,
 * csr.c, ell.c, hll.c, hyb.c, packed.c, matrix.c).
 *
 * Random matrices in every test shape (drawn afresh each run, seed printed)
 * go COO -> CSR -> {COO, ELL, HLL, HYB, PCSR, PSELL} -> COO and must come back identical,
 * bit for bit. The ELL and HLL layouts are checked slot by slot against the
 * CSR (column-major, padding column -1 value 0, HLL row stride hack_size
 * with the last slice padded), byte counts and padding ratios against
 * formulas worked out here, and the limits (slot bound, 32-bit counts, bad
 * hack sizes, out-of-range indices) must be refused with a message that
 * names them. COO -> CSR must also repair input that breaks the COO
 * contract (unsorted, duplicates).
 *
 * The packed formats (PCSR, PSELL) are checked against engine/spmv.h's
 * layout, recomputed here independently (distinct values by sorting,
 * widths from the byte formulas, every slot and padding entry), on the
 * random shapes in both dtypes with their values and columns varied to
 * reach every value mode and index width, and on matrices made to sit on
 * each edge: the mode ties and payoff, 0.0 / -0.0 / NaN, spans of 255 and
 * 256, 65 535 and 65 536 (PCSR), 254 and 255, 65 534 and 65 535 (PSELL),
 * wide rows, empty rows and matrices, the padding rule.
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
     * of 32 x 25 slots, PSELL the same slots (1825 bytes); HYB (width 1:
     * 4 slots + 24 COO), COO and PCSR (151 bytes) fit. */
    spmv_matrix m;
    spmv_format_limits lim = {.max_padding = SPMV_MAX_PADDING_DEFAULT, .max_format_bytes = 799};
    assert_int_equal(spmv_matrix_build(&coo, SPMV_FLOAT32, SPMV_FMT_ALL, 0, &lim, &m, &err), SPMV_OK);
    assert_int_equal(m.formats, SPMV_FMT_CSR | SPMV_FMT_COO | SPMV_FMT_HYB | SPMV_FMT_PCSR);
    assert_int_equal(spmv_matrix_format_bytes(&m, SPMV_FMT_PCSR), 151);
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
    assert_int_equal(m.formats, SPMV_FMT_CSR | SPMV_FMT_COO | SPMV_FMT_HYB | SPMV_FMT_PCSR);
    assert_int_equal(spmv_matrix_format_bytes(&m, SPMV_FMT_ELL), 0);
    spmv_matrix_free(&m);
    spmv_csr_free(&csr);
    spmv_coo_free(&coo);
}

/* The padding rule: slots <= max_padding * nnz + SPMV_PADDING_SLACK (or
 * bytes <= padding_allowance_bytes and, on the host, half its available
 * memory) and bytes <= max_format_bytes, exact at the bounds; the plan of each format
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
    /* past the ratio, padding_allowance_bytes still builds what is small,
     * exact at its bound, and names both keys when it refuses */
    int64_t allow = 1000 + (int64_t)(tu_seed() % 100000);
    lim.padding_allowance_bytes = allow;
    assert_int_equal(spmv_format_check(&lim, SPMV_FMT_ELL, nnz, edge + 1, allow, &err), SPMV_OK);
    assert_int_equal(spmv_format_check(&lim, SPMV_FMT_ELL, nnz, edge + 1, allow + 1, &err), SPMV_ERR_LIMIT);
    assert_non_null(strstr(err.message, "max_padding 3.00"));
    snprintf(want, sizeof want, "padding_allowance_bytes %lld", (long long)allow);
    assert_non_null(strstr(err.message, want));
    /* ... and, for a host format, only within half the host's available memory */
    lim.padding_allowance_bytes = INT64_MAX;
    assert_true(lim.host_memory);
    assert_int_equal(spmv_format_check(&lim, SPMV_FMT_ELL, nnz, INT64_MAX / 4, INT64_MAX / 4, &err), SPMV_ERR_LIMIT);
    assert_non_null(strstr(err.message, "available memory"));
    lim.host_memory = false; /* a device's conversions check its own memory */
    assert_int_equal(spmv_format_check(&lim, SPMV_FMT_ELL, nnz, INT64_MAX / 4, INT64_MAX / 4, &err), SPMV_OK);
    lim.padding_allowance_bytes = 0;
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
    static const spmv_format fs[] = {SPMV_FMT_CSR, SPMV_FMT_COO,  SPMV_FMT_ELL,  SPMV_FMT_HLL,
                                     SPMV_FMT_HYB, SPMV_FMT_PCSR, SPMV_FMT_PSELL};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) {
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
        /* SPSELL only of a square matrix (0 x 0 is one); never PBSR: without
         * non-zeros there are no blocks (both skipped, not an error) */
        assert_int_equal(m.formats, (rows == 0 ? SPMV_FMT_ALL : SPMV_FMT_ALL & ~(unsigned)SPMV_FMT_SPSELL) &
                                        ~(unsigned)SPMV_FMT_PBSR);
        assert_int_equal(m.ell.width, 0);
        assert_int_equal(m.hll.nslices, (rows + 63) / 64);
        assert_true(spmv_ell_info(&m.ell).padding_ratio == 1.0);
        spmv_matrix_free(&m);
        spmv_coo_free(&coo);
    }
}

/* ------------------------------------------------------- packed formats */

/* The packed layouts are checked here against engine/spmv.h's words,
 * computed independently: distinct values by sorting a copy (packed.c
 * hashes), index widths and wide rows from the formulas, every slot. */

static uint64_t bits_of(const void *val, spmv_dtype dt, int64_t k)
{
    if (dt == SPMV_FLOAT32) {
        uint32_t b;
        memcpy(&b, (const float *)val + k, sizeof b);
        return b;
    }
    uint64_t b;
    memcpy(&b, (const double *)val + k, sizeof b);
    return b;
}

static void set_val(void *val, spmv_dtype dt, int64_t k, double v)
{
    if (dt == SPMV_FLOAT32)
        ((float *)val)[k] = (float)v;
    else
        ((double *)val)[k] = v;
}

static double get_val(const void *val, spmv_dtype dt, int64_t k)
{
    return dt == SPMV_FLOAT32 ? ((const float *)val)[k] : ((const double *)val)[k];
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* What the value compression of a's nnz values, stored as n entries, must be. */
typedef struct want_values {
    spmv_vcode mode;
    int64_t ntable;
    uint64_t *table; /* ascending */
} want_values;

static void want_values_of(const spmv_csr *a, int64_t n, want_values *w)
{
    int64_t vs = (int64_t)spmv_dtype_size(a->dtype);
    w->table = calloc((size_t)a->nnz + 1, sizeof *w->table);
    assert_non_null(w->table);
    for (int64_t k = 0; k < a->nnz; k++)
        w->table[k] = bits_of(a->val, a->dtype, k);
    qsort(w->table, (size_t)a->nnz, sizeof *w->table, cmp_u64);
    w->ntable = 0;
    for (int64_t k = 0; k < a->nnz; k++)
        if (w->ntable == 0 || w->table[w->ntable - 1] != w->table[k])
            w->table[w->ntable++] = w->table[k];
    /* F32: a float64 matrix whose values all survive a round trip through float32 */
    bool f32 = a->dtype == SPMV_FLOAT64 && a->nnz > 0;
    for (int64_t k = 0; f32 && k < a->nnz; k++) {
        double v = ((const double *)a->val)[k], back = (double)(float)v;
        f32 = memcmp(&v, &back, sizeof v) == 0;
    }
    /* CONST, U8, U16, F32, RAW: the fewest bytes, the first on a tie */
    int64_t t = w->ntable, cost[5] = {vs, t * vs + n, t * vs + 2 * n, 4 * n, n * vs};
    bool ok[5] = {t == 1, t >= 1 && t <= 256, t >= 1 && t <= 65536, f32, true};
    const spmv_vcode modes[5] = {SPMV_VCODE_CONST, SPMV_VCODE_U8, SPMV_VCODE_U16, SPMV_VCODE_F32, SPMV_VCODE_RAW};
    int best = 4;
    for (int i = 4; i >= 0; i--)
        if (ok[i] && cost[i] <= cost[best])
            best = i;
    w->mode = modes[best];
}

/* The mode, the table, and which arrays exist. */
static void check_table(const spmv_packed_values *v, const want_values *w, spmv_dtype dt)
{
    assert_int_equal(v->mode, w->mode);
    if (v->mode == SPMV_VCODE_RAW || v->mode == SPMV_VCODE_F32) {
        assert_int_equal(v->ntable, 0);
        assert_null(v->table);
        assert_non_null(v->data);
        return;
    }
    assert_int_equal(v->ntable, w->ntable);
    assert_non_null(v->table);
    for (int64_t k = 0; k < w->ntable; k++)
        assert_true(bits_of(v->table, dt, k) == w->table[k]);
    if (v->mode == SPMV_VCODE_CONST)
        assert_null(v->data);
    else
        assert_non_null(v->data);
}

/* Entry e holds value src of a (src < 0: padding, code 0 or +0.0). */
static void check_value(const spmv_packed_values *v, const spmv_csr *a, int64_t e, int64_t src)
{
    uint64_t want = src < 0 ? 0 : bits_of(a->val, a->dtype, src);
    switch (v->mode) {
    case SPMV_VCODE_RAW: assert_true(bits_of(v->data, a->dtype, e) == want); break;
    case SPMV_VCODE_F32: {
        double got = (double)((const float *)v->data)[e];
        assert_true(bits_of(&got, SPMV_FLOAT64, 0) == want);
        break;
    }
    case SPMV_VCODE_CONST: break;
    case SPMV_VCODE_U8:
    case SPMV_VCODE_U16: {
        int64_t code = v->mode == SPMV_VCODE_U8 ? ((const uint8_t *)v->data)[e] : ((const uint16_t *)v->data)[e];
        if (src < 0)
            assert_int_equal(code, 0);
        else
            assert_true(code < v->ntable && bits_of(v->table, a->dtype, code) == want);
        break;
    }
    }
}

/* Bytes of the value arrays, from their counts. */
static size_t values_array_bytes(const spmv_packed_values *v, spmv_dtype dt, int64_t n)
{
    size_t vs = spmv_dtype_size(dt), b = (size_t)v->ntable * vs;
    switch (v->mode) {
    case SPMV_VCODE_RAW: return b + (size_t)n * vs;
    case SPMV_VCODE_F32: return b + (size_t)n * 4;
    case SPMV_VCODE_CONST: return b;
    case SPMV_VCODE_U8: return b + (size_t)n;
    case SPMV_VCODE_U16: return b + (size_t)n * 2;
    }
    return 0;
}

static int64_t row_span(const spmv_csr *a, int32_t i)
{
    int32_t b = a->row_ptr[i], e = a->row_ptr[i + 1];
    return e > b ? (int64_t)a->col[e - 1] - a->col[b] : 0;
}

/* The index width PCSR must choose for a. */
static int32_t want_pcsr_width(const spmv_csr *a)
{
    int64_t w1 = 0, w2 = 0, nnz = a->nnz, rows = a->rows;
    for (int32_t i = 0; i < a->rows; i++) {
        w1 += row_span(a, i) > 255 ? a->row_ptr[i + 1] - a->row_ptr[i] : 0;
        w2 += row_span(a, i) > 65535 ? a->row_ptr[i + 1] - a->row_ptr[i] : 0;
    }
    int64_t b1 = nnz + rows * 4 + w1 * 4, b2 = 2 * nnz + rows * 4 + w2 * 4, b4 = 4 * nnz;
    return b1 <= b2 && b1 <= b4 ? 1 : b2 <= b4 ? 2 : 4;
}

static void check_pcsr_layout(const spmv_csr *a, const spmv_pcsr *p)
{
    int32_t ib = want_pcsr_width(a);
    assert_int_equal(p->idx_bytes, ib);
    assert_true(p->rows == a->rows && p->cols == a->cols && p->nnz == a->nnz && p->dtype == a->dtype);
    assert_ptr_equal(p->row_ptr, a->row_ptr);
    assert_non_null(p->idx);
    if (ib == 4) {
        assert_null(p->base);
        assert_null(p->wide_col);
        assert_int_equal(p->wide_nnz, 0);
        assert_memory_equal(p->idx, a->col, (size_t)a->nnz * 4);
    } else {
        int64_t w = 0, limit = ib == 1 ? 255 : 65535;
        assert_non_null(p->base);
        assert_non_null(p->wide_col); /* a 0-entry allocation when no row is wide */
        for (int32_t i = 0; i < a->rows; i++) {
            int32_t b = a->row_ptr[i], e = a->row_ptr[i + 1];
            bool wide = row_span(a, i) > limit;
            assert_int_equal(p->base[i], wide ? -1 - w : e > b ? a->col[b] : 0);
            for (int32_t j = b; j < e; j++) {
                int64_t d = ib == 1 ? ((const uint8_t *)p->idx)[j] : ((const uint16_t *)p->idx)[j];
                if (wide) {
                    assert_int_equal(d, 0);
                    assert_int_equal(p->wide_col[w++], a->col[j]);
                } else {
                    assert_int_equal(d, a->col[j] - a->col[b]);
                }
            }
        }
        assert_int_equal(p->wide_nnz, w);
    }
    want_values wv;
    want_values_of(a, a->nnz, &wv);
    check_table(&p->v, &wv, a->dtype);
    for (int64_t j = 0; j < a->nnz; j++)
        check_value(&p->v, a, j, j);
    free(wv.table);
    /* info: the arrays, from their counts; the plan says the same */
    size_t bytes = (size_t)a->nnz * (size_t)ib + (ib < 4 ? ((size_t)a->rows + (size_t)p->wide_nnz) * 4 : 0) +
                   values_array_bytes(&p->v, a->dtype, a->nnz);
    int64_t slots = -1, planned = -1;
    assert_int_equal(spmv_pcsr_info(p).bytes, bytes);
    assert_true(spmv_pcsr_info(p).padding_ratio == 1.0);
    assert_int_equal(spmv_format_plan(a, SPMV_FMT_PCSR, 0, &slots, &planned, NULL), SPMV_OK);
    assert_int_equal(slots, a->nnz);
    assert_int_equal(planned, (int64_t)bytes);
}

/* Index entry of slot k, local row r of slice s, as stored (little-endian,
 * the machine's own uint8/uint16/int32). */
static int64_t psell_entry(const spmv_psell *p, int32_t s, int64_t k, int32_t r)
{
    const uint8_t *at = p->idx + p->idx_off[s] + (k * SPMV_PSELL_C + r) * p->idx_bytes[s];
    uint8_t u8;
    uint16_t u16;
    int32_t i32;
    switch (p->idx_bytes[s]) {
    case 1: memcpy(&u8, at, 1); return u8;
    case 2: memcpy(&u16, at, 2); return u16;
    default: memcpy(&i32, at, 4); return (uint32_t)i32;
    }
}

static void check_psell_layout(const spmv_csr *a, const spmv_psell *p)
{
    const int32_t c = SPMV_PSELL_C;
    int32_t ns = (int32_t)(((int64_t)a->rows + c - 1) / c);
    assert_int_equal(p->nslices, ns);
    assert_true(p->rows == a->rows && p->cols == a->cols && p->nnz == a->nnz && p->dtype == a->dtype);
    assert_int_equal(p->slot_off[0], 0);
    assert_int_equal(p->idx_off[0], 0);
    assert_int_equal(p->val_off[0], 0);
    for (int32_t s = 0; s < ns; s++) {
        int32_t r0 = s * c, r1 = r0 + c < a->rows ? r0 + c : a->rows, w = 0;
        int64_t span = 0;
        for (int32_t i = r0; i < r1; i++)
            w = a->row_ptr[i + 1] - a->row_ptr[i] > w ? a->row_ptr[i + 1] - a->row_ptr[i] : w;
        assert_int_equal(p->slot_off[s + 1] - p->slot_off[s], w);
        int32_t *mn = calloc((size_t)w + 1, sizeof *mn);
        assert_non_null(mn);
        for (int32_t k = 0; k < w; k++) {
            int32_t lo = INT32_MAX, hi = INT32_MIN;
            for (int32_t i = r0; i < r1; i++)
                if (a->row_ptr[i + 1] - a->row_ptr[i] > k) {
                    lo = a->col[a->row_ptr[i] + k] < lo ? a->col[a->row_ptr[i] + k] : lo;
                    hi = a->col[a->row_ptr[i] + k] > hi ? a->col[a->row_ptr[i] + k] : hi;
                }
            mn[k] = lo;
            span = (int64_t)hi - lo > span ? (int64_t)hi - lo : span;
        }
        /* diagonal: C rows of one length w > 0, slot k of row r at row 0's column + r */
        bool diag = w > 0 && r1 - r0 == c;
        for (int32_t i = r0; diag && i < r1; i++)
            diag = a->row_ptr[i + 1] - a->row_ptr[i] == w;
        for (int32_t k = 0; diag && k < w; k++)
            for (int32_t r = 1; diag && r < c; r++)
                diag = a->col[a->row_ptr[r0 + r] + k] == a->col[a->row_ptr[r0] + k] + r;
        int32_t ib = diag ? 0 : span <= 254 ? 1 : span <= 65534 ? 2 : 4;
        assert_int_equal(p->idx_bytes[s], ib);
        assert_int_equal(p->idx_off[s + 1] - p->idx_off[s], (int64_t)w * c * ib);
        /* uniform: w > 0, each slot's real entries one value bit for bit; one value a slot */
        bool uniform = w > 0;
        for (int32_t k = 0; uniform && k < w; k++) {
            int64_t first = -1;
            for (int32_t i = r0; uniform && i < r1; i++)
                if (a->row_ptr[i + 1] - a->row_ptr[i] > k) {
                    if (first < 0)
                        first = a->row_ptr[i] + k;
                    uniform = bits_of(a->val, a->dtype, a->row_ptr[i] + k) == bits_of(a->val, a->dtype, first);
                }
        }
        assert_int_equal(p->val_off[s + 1] - p->val_off[s], uniform ? w : (int64_t)w * c);
        for (int32_t k = 0; k < w; k++) {
            int32_t base = ib < 4 ? mn[k] : 0;
            assert_int_equal(p->base[p->slot_off[s] + k], base);
            for (int32_t r = 0; r < c; r++) {
                int32_t i = r0 + r;
                int64_t e = uniform ? p->val_off[s] + k : p->val_off[s] + (int64_t)k * c + r;
                if (diag) { /* no entries: the column is the base + r */
                    assert_int_equal(a->col[a->row_ptr[i] + k], base + r);
                    check_value(&p->v, a, e, a->row_ptr[i] + k);
                    continue;
                }
                int64_t entry = psell_entry(p, s, k, r);
                if (i < r1 && a->row_ptr[i + 1] - a->row_ptr[i] > k) {
                    int64_t src = a->row_ptr[i] + k;
                    assert_int_equal(entry, a->col[src] - base);
                    check_value(&p->v, a, e, src);
                } else {
                    assert_int_equal(entry, ib == 1 ? 0xff : ib == 2 ? 0xffff : 0xffffffffu);
                    if (!uniform) /* a uniform slice stores no padding value */
                        check_value(&p->v, a, e, -1);
                }
            }
        }
        free(mn);
    }
    int64_t widths = p->slot_off[ns];
    assert_int_equal(p->slots, widths * c);
    want_values wv;
    want_values_of(a, p->val_off[ns], &wv);
    check_table(&p->v, &wv, a->dtype);
    free(wv.table);
    size_t bytes = ((size_t)ns + 1) * 24 + (size_t)ns + (size_t)widths * 4 + (size_t)p->idx_off[ns] +
                   values_array_bytes(&p->v, a->dtype, p->val_off[ns]);
    int64_t slots = -1, planned = -1;
    assert_int_equal(spmv_psell_info(p).bytes, bytes);
    assert_true(fabs(spmv_psell_info(p).padding_ratio - (a->nnz ? (double)p->slots / (double)a->nnz : 1.0)) < 1e-12);
    assert_int_equal(spmv_format_plan(a, SPMV_FMT_PSELL, 7, &slots, &planned, NULL), SPMV_OK); /* 32 whatever hack */
    assert_int_equal(slots, p->slots);
    assert_int_equal(planned, (int64_t)bytes);
}

/* CSR -> PCSR and PSELL, layouts checked, -> COO identical; returns the
 * modes and widths seen through *pc and *ps (NULL: freed here). */
static void packed_round_trip_keep(const spmv_coo *coo, const char *what, spmv_pcsr *pc, spmv_psell *ps)
{
    spmv_csr csr;
    spmv_pcsr p;
    spmv_psell q;
    spmv_coo back;
    spmv_error err = {0};
    to_csr(coo, &csr);
    if (spmv_csr_to_pcsr(&csr, NULL, &p, &err) != SPMV_OK)
        fail_msg("%s: csr_to_pcsr: %s", what, err.message);
    check_pcsr_layout(&csr, &p);
    assert_int_equal(spmv_pcsr_to_coo(&p, &back, &err), SPMV_OK);
    expect_same(coo, &back, what, "PCSR");
    if (spmv_csr_to_psell(&csr, NULL, &q, &err) != SPMV_OK)
        fail_msg("%s: csr_to_psell: %s", what, err.message);
    check_psell_layout(&csr, &q);
    assert_int_equal(spmv_psell_to_coo(&q, &back, &err), SPMV_OK);
    expect_same(coo, &back, what, "PSELL");
    if (pc) {
        *pc = p;
        pc->row_ptr = NULL; /* the CSR's, freed below */
    } else {
        spmv_pcsr_free(&p);
    }
    if (ps)
        *ps = q;
    else
        spmv_psell_free(&q);
    spmv_csr_free(&csr);
}

static void packed_round_trip(const spmv_coo *coo, const char *what)
{
    packed_round_trip_keep(coo, what, NULL, NULL);
}

static void test_packed_round_trip(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 31);
    for_each_matrix(&r, packed_round_trip);
}

/* The same shapes with few distinct values (CONST, U8, U16 on random
 * structure) and rows spread wide (2- and 4-byte indices, wide rows). */
static void test_packed_random_modes(void **state)
{
    (void)state;
    static const int32_t palettes[] = {1, 3, 200, 256, 257, 3000};
    static const struct { int32_t rows, cols, per_row, span; } windows[] = {
        {300, 400, 6, 255}, {300, 400, 6, 256}, {200, 70000, 4, 65535}, {200, 70000, 4, 65536},
        {100, 200000, 3, 150000}, {64, 1 << 20, 40, 1000},
    };
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 32);
    for (int d = 0; d < 2; d++) {
        for (int s = 0; s < TU_SHAPE_COUNT; s++)
            for (size_t j = 0; j < sizeof palettes / sizeof palettes[0]; j++) {
                spmv_coo coo;
                char what[128];
                tu_random_coo(&r, (tu_shape)s, 150, (spmv_dtype)d, &coo);
                tu_palette_values(&r, &coo, palettes[j]);
                snprintf(what, sizeof what, "%s n=150 %s, %d values", tu_shape_name((tu_shape)s),
                         spmv_dtype_name((spmv_dtype)d), palettes[j]);
                packed_round_trip(&coo, what);
                spmv_coo_free(&coo);
            }
        for (size_t w = 0; w < sizeof windows / sizeof windows[0]; w++)
            for (size_t j = 0; j < 3; j++) {
                spmv_coo coo;
                char what[128];
                tu_window_coo(&r, windows[w].rows, windows[w].cols, windows[w].per_row, windows[w].span,
                              (spmv_dtype)d, &coo);
                if (j > 0)
                    tu_palette_values(&r, &coo, j == 1 ? 1 : 100);
                snprintf(what, sizeof what, "window %d x %d span %d %s, palette %zu", windows[w].rows,
                         windows[w].cols, windows[w].span, spmv_dtype_name((spmv_dtype)d), j);
                packed_round_trip(&coo, what);
                spmv_coo_free(&coo);
            }
    }
}

/* A COO of `dtype` from triplets sorted by row then column. */
static void coo_from(int32_t rows, int32_t cols, int64_t n, const int32_t *r, const int32_t *c, const double *v,
                     spmv_dtype dt, spmv_coo *coo)
{
    assert_int_equal(spmv_coo_alloc(coo, rows, cols, n, dt, NULL), SPMV_OK);
    for (int64_t k = 0; k < n; k++) {
        coo->row[k] = r[k];
        coo->col[k] = c[k];
        set_val(coo->val, dt, k, v[k]);
    }
}

/* The modes and widths a round trip chose. */
static void packed_modes(const spmv_coo *coo, const char *what, spmv_vcode *pmode, int32_t *pib,
                         spmv_vcode *smode)
{
    spmv_pcsr p;
    spmv_psell q;
    packed_round_trip_keep(coo, what, &p, &q);
    if (pmode)
        *pmode = p.v.mode;
    if (pib)
        *pib = p.idx_bytes;
    if (smode)
        *smode = q.v.mode;
    spmv_pcsr_free(&p);
    spmv_psell_free(&q);
}

/* Every value mode, forced; the tie and payoff edges; 0.0, -0.0 and NaNs
 * kept apart bit for bit. */
static void test_packed_value_modes(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 33);
    static const struct { int32_t distinct; spmv_vcode f64, f32; } cases[] = {
        {1, SPMV_VCODE_CONST, SPMV_VCODE_CONST}, {2, SPMV_VCODE_U8, SPMV_VCODE_U8},
        {256, SPMV_VCODE_U8, SPMV_VCODE_U8},     {257, SPMV_VCODE_U16, SPMV_VCODE_U16},
        {65536, SPMV_VCODE_U16, SPMV_VCODE_U16}, {65537, SPMV_VCODE_RAW, SPMV_VCODE_RAW},
    };
    for (size_t j = 0; j < sizeof cases / sizeof cases[0]; j++)
        for (int d = 0; d < 2; d++) {
            /* 200 000 entries: enough that a table of 65 536 pays in float32 too */
            spmv_coo coo;
            spmv_vcode pm, sm;
            char what[96];
            tu_window_coo(&r, 4000, 4000, 50, 100, (spmv_dtype)d, &coo);
            assert_int_equal(coo.nnz, 200000);
            tu_palette_values(&r, &coo, cases[j].distinct);
            snprintf(what, sizeof what, "%d distinct %s", cases[j].distinct, spmv_dtype_name((spmv_dtype)d));
            packed_modes(&coo, what, &pm, NULL, &sm);
            assert_int_equal(pm, d ? cases[j].f32 : cases[j].f64);
            assert_int_equal(sm, d ? cases[j].f32 : cases[j].f64);
            spmv_coo_free(&coo);
        }
    /* all distinct: RAW; in float64 rounded to float32 (a "mixed" upload's
     * values): F32, the values in 4 bytes, decoded bit for bit */
    for (int d = 0; d < 3; d++) {
        spmv_coo coo;
        spmv_vcode pm, sm;
        tu_window_coo(&r, 500, 600, 8, 40, d == 1 ? SPMV_FLOAT32 : SPMV_FLOAT64, &coo);
        if (d == 2)
            for (int64_t k = 0; k < coo.nnz; k++)
                ((double *)coo.val)[k] = (double)(float)((double *)coo.val)[k];
        packed_modes(&coo, d == 2 ? "mixed" : "all distinct", &pm, NULL, &sm);
        spmv_vcode want = d == 2 ? SPMV_VCODE_F32 : SPMV_VCODE_RAW;
        assert_true(pm == want && sm == want);
        spmv_coo_free(&coo);
    }
    /* the payoff edge: two entries, two values; a table of 2 float64 plus 2
     * codes is 18 bytes, the values 16: RAW. Ties go to the first mode:
     * float64 8 entries of 7 values (U8 7*8 + 8 = 64 = RAW's 64): U8;
     * float32 4 entries of 3 values (U8 12 + 4 = 16 = RAW's 16): U8, and
     * 600 entries of 300 values (U16 1200 + 1200 = RAW's 2400): U16. */
    {
        const int32_t row[8] = {0, 0, 1, 1, 2, 2, 3, 3}, col[8] = {0, 1, 0, 1, 0, 1, 0, 1};
        /* float64 values that are no float32 (F32 would win otherwise: below) */
        const double two[2] = {1.1, 2.1}, seven[8] = {1.1, 2.1, 3.1, 4.1, 5.1, 6.1, 7.1, 7.1},
                     three[4] = {1, 2, 3, 3}, two32[2] = {1, 2};
        spmv_coo coo;
        spmv_vcode pm;
        coo_from(1, 2, 2, row, col, two, SPMV_FLOAT64, &coo);
        packed_modes(&coo, "payoff", &pm, NULL, NULL);
        assert_int_equal(pm, SPMV_VCODE_RAW);
        spmv_coo_free(&coo);
        /* the same with values that are float32s: F32 (8 bytes) */
        coo_from(1, 2, 2, row, col, two32, SPMV_FLOAT64, &coo);
        packed_modes(&coo, "payoff f32", &pm, NULL, NULL);
        assert_int_equal(pm, SPMV_VCODE_F32);
        spmv_coo_free(&coo);
        coo_from(4, 2, 8, row, col, seven, SPMV_FLOAT64, &coo);
        packed_modes(&coo, "tie f64", &pm, NULL, NULL);
        assert_int_equal(pm, SPMV_VCODE_U8);
        spmv_coo_free(&coo);
        coo_from(2, 2, 4, row, col, three, SPMV_FLOAT32, &coo);
        packed_modes(&coo, "tie f32", &pm, NULL, NULL);
        assert_int_equal(pm, SPMV_VCODE_U8);
        spmv_coo_free(&coo);
        tu_window_coo(&r, 300, 300, 2, 1, SPMV_FLOAT32, &coo);
        assert_int_equal(coo.nnz, 600);
        tu_palette_values(&r, &coo, 300);
        packed_modes(&coo, "tie u16", &pm, NULL, NULL);
        assert_int_equal(pm, SPMV_VCODE_U16);
        spmv_coo_free(&coo);
    }
    /* 0.0, -0.0 and two NaNs: four table entries, ascending as unsigned */
    for (int d = 0; d < 2; d++) {
        spmv_coo coo;
        spmv_pcsr p;
        spmv_psell q;
        tu_window_coo(&r, 100, 100, 10, 20, (spmv_dtype)d, &coo);
        const uint64_t b64[4] = {UINT64_C(0x8000000000000000), 0, UINT64_C(0x7ff8000000000001),
                                 UINT64_C(0xfff8000000000000)};
        const uint32_t b32[4] = {0x80000000u, 0, 0x7fc00001u, 0xffc00000u};
        for (int64_t k = 0; k < coo.nnz; k++) {
            if (d)
                memcpy((float *)coo.val + k, &b32[k % 4], 4);
            else
                memcpy((double *)coo.val + k, &b64[k % 4], 8);
        }
        packed_round_trip_keep(&coo, "zeros and NaNs", &p, &q);
        assert_int_equal(p.v.mode, SPMV_VCODE_U8);
        assert_int_equal(p.v.ntable, 4);
        for (int k = 0; k < 4; k++) {
            static const int order[4] = {1, 2, 0, 3}; /* +0, NaN, -0, -NaN */
            assert_true(bits_of(p.v.table, coo.dtype, k) == (d ? b32[order[k]] : b64[order[k]]));
        }
        assert_int_equal(q.v.ntable, 4);
        spmv_pcsr_free(&p);
        spmv_psell_free(&q);
        spmv_coo_free(&coo);
    }
    /* PSELL: padding adds no 0.0 to the table (real values all 1: CONST),
     * and its byte formulas count slots: 8 rows of one entry, 8 values,
     * are RAW as PCSR (U8 8*8 + 8 > 64) but U8 as PSELL (32 slots: 96 < 256) */
    {
        const int32_t row[8] = {0, 1, 2, 3, 4, 5, 6, 7}, col[8] = {0, 1, 2, 3, 4, 5, 6, 7};
        const double vals[8] = {1.1, 2.1, 3.1, 4.1, 5.1, 6.1, 7.1, 8.1};
        spmv_coo coo;
        spmv_vcode pm, sm;
        tu_window_coo(&r, 70, 90, 9, 30, SPMV_FLOAT64, &coo);
        tu_palette_values(&r, &coo, 1);
        packed_modes(&coo, "ones, padded", &pm, NULL, &sm);
        assert_true(pm == SPMV_VCODE_CONST && sm == SPMV_VCODE_CONST);
        spmv_coo_free(&coo);
        coo_from(8, 8, 8, row, col, vals, SPMV_FLOAT64, &coo);
        packed_modes(&coo, "slots count", &pm, NULL, &sm);
        assert_int_equal(pm, SPMV_VCODE_RAW);
        assert_int_equal(sm, SPMV_VCODE_U8);
        spmv_coo_free(&coo);
    }
    assert_string_equal(spmv_vcode_name(SPMV_VCODE_RAW), "raw");
    assert_string_equal(spmv_vcode_name(SPMV_VCODE_CONST), "const");
    assert_string_equal(spmv_vcode_name(SPMV_VCODE_U8), "u8");
    assert_string_equal(spmv_vcode_name(SPMV_VCODE_U16), "u16");
    assert_string_equal(spmv_vcode_name(SPMV_VCODE_F32), "f32");
}

/* PCSR's index widths: 1, 2, 4, the ties, the 255 / 65 535 edges and the
 * wide-row fallback; empty rows and empty matrices. */
static void test_pcsr_widths(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 34);
    int32_t ib;
    spmv_coo coo;
    /* rows 3, nnz 4, narrow: 4 + 12 = 16 bytes at 1, 16 at 4: the tie goes to 1 */
    {
        const int32_t row[4] = {0, 0, 1, 2}, col[4] = {3, 9, 0, 7};
        const double val[4] = {1, 2, 3, 4};
        coo_from(3, 10, 4, row, col, val, SPMV_FLOAT64, &coo);
        packed_modes(&coo, "tie 1/4", NULL, &ib, NULL);
        assert_int_equal(ib, 1);
        spmv_coo_free(&coo);
    }
    /* rows 2 of 2 spanning 1000: 28 bytes at 1 (wide), 16 at 2 and at 4: 2 */
    {
        const int32_t row[4] = {0, 0, 1, 1}, col[4] = {0, 1000, 5, 1005};
        const double val[4] = {1, 2, 3, 4};
        coo_from(2, 2000, 4, row, col, val, SPMV_FLOAT32, &coo);
        packed_modes(&coo, "tie 2/4", NULL, &ib, NULL);
        assert_int_equal(ib, 2);
        spmv_coo_free(&coo);
    }
    /* sparse rows far apart and empty rows: 4 */
    {
        const int32_t row[4] = {10, 10, 500, 500}, col[4] = {0, 99999, 3, 70000};
        const double val[4] = {1, 2, 3, 4};
        coo_from(1000, 100000, 4, row, col, val, SPMV_FLOAT64, &coo);
        packed_modes(&coo, "4 bytes", NULL, &ib, NULL);
        assert_int_equal(ib, 4);
        spmv_coo_free(&coo);
    }
    /* mostly narrow rows with one spanning exactly 255 (fits) and one 256
     * (wide), and two spanning the whole 100 000 columns: 1 byte, the
     * wide rows' columns in wide_col in row order */
    for (int d = 0; d < 2; d++) {
        static const int32_t last[4] = {255, 256, 99999, 99998};
        spmv_pcsr p;
        spmv_coo rest;
        tu_window_coo(&r, 396, 100000, 20, 200, (spmv_dtype)d, &rest);
        assert_int_equal(spmv_coo_alloc(&coo, 400, 100000, rest.nnz + 8, (spmv_dtype)d, NULL), SPMV_OK);
        int64_t k = 0;
        for (int32_t i = 0; i < 4; i++)
            for (int e = 0; e < 2; e++, k++) {
                coo.row[k] = i;
                coo.col[k] = e ? last[i] : 0;
                set_val(coo.val, coo.dtype, k, 1.0 + (double)k);
            }
        for (int64_t j = 0; j < rest.nnz; j++, k++) {
            coo.row[k] = rest.row[j] + 4;
            coo.col[k] = rest.col[j];
            set_val(coo.val, coo.dtype, k, get_val(rest.val, rest.dtype, j));
        }
        spmv_coo_free(&rest);
        packed_round_trip_keep(&coo, "wide rows", &p, NULL);
        assert_int_equal(p.idx_bytes, 1);
        assert_int_equal(p.base[0], 0);  /* span 255 fits */
        assert_int_equal(((uint8_t *)p.idx)[1], 255);
        assert_int_equal(p.base[1], -1); /* 256: wide, at wide_col[0] */
        assert_int_equal(p.base[2], -3); /* then at wide_col[2] */
        assert_int_equal(p.base[3], -5);
        assert_int_equal(p.wide_nnz, 6);
        assert_int_equal(p.wide_col[5], 99998);
        assert_int_equal(((uint8_t *)p.idx)[3], 0);
        spmv_pcsr_free(&p);
        spmv_coo_free(&coo);
    }
    /* rows spanning 1000 everywhere (wide at 1 byte) but one spanning
     * exactly 65 535 (fits 2) and one 65 536 (wide): 2 bytes */
    {
        spmv_pcsr p;
        spmv_coo rest;
        tu_window_coo(&r, 300, 70000, 10, 1000, SPMV_FLOAT64, &rest);
        assert_int_equal(spmv_coo_alloc(&coo, 302, 70000, rest.nnz + 4, SPMV_FLOAT64, NULL), SPMV_OK);
        const int32_t col[4] = {10, 65545, 0, 65536};
        int64_t k = 0;
        for (; k < 4; k++) {
            coo.row[k] = (int32_t)(k / 2);
            coo.col[k] = col[k];
            ((double *)coo.val)[k] = (double)k;
        }
        for (int64_t j = 0; j < rest.nnz; j++, k++) {
            coo.row[k] = rest.row[j] + 2;
            coo.col[k] = rest.col[j];
            ((double *)coo.val)[k] = ((double *)rest.val)[j];
        }
        spmv_coo_free(&rest);
        packed_round_trip_keep(&coo, "2-byte edge", &p, NULL);
        assert_int_equal(p.idx_bytes, 2);
        assert_int_equal(p.base[0], 10);
        assert_int_equal(((uint16_t *)p.idx)[1], 65535);
        assert_int_equal(p.base[1], -1);
        assert_int_equal(p.wide_col[1], 65536);
        assert_int_equal(p.wide_nnz, 2);
        spmv_pcsr_free(&p);
        spmv_coo_free(&coo);
    }
    /* empty rows (base 0) and empty matrices */
    {
        const int32_t row[3] = {1, 1, 4}, col[3] = {5, 6, 2};
        const double val[3] = {1, 2, 3};
        spmv_pcsr p;
        coo_from(6, 8, 3, row, col, val, SPMV_FLOAT64, &coo);
        packed_round_trip_keep(&coo, "empty rows", &p, NULL);
        assert_int_equal(p.idx_bytes, 4); /* 3 + 24 > 12 */
        spmv_pcsr_free(&p);
        spmv_coo_free(&coo);
        const int32_t row0[3] = {0, 0, 0}, col0[3] = {2, 5, 6};
        coo_from(1, 8, 3, row0, col0, val, SPMV_FLOAT64, &coo);
        packed_round_trip_keep(&coo, "one row", &p, NULL);
        assert_int_equal(p.idx_bytes, 1); /* 3 + 4 <= 12 */
        assert_int_equal(p.base[0], 2);
        spmv_pcsr_free(&p);
        spmv_coo_free(&coo);
        for (int32_t rows = 0; rows <= 5; rows += 5) {
            spmv_psell q;
            assert_int_equal(spmv_coo_alloc(&coo, rows, rows, 0, SPMV_FLOAT32, NULL), SPMV_OK);
            packed_round_trip_keep(&coo, "empty", &p, &q);
            assert_int_equal(p.idx_bytes, rows ? 4 : 1); /* 0 x 0: every width costs 0, the tie to 1 */
            assert_int_equal(p.v.mode, SPMV_VCODE_RAW);
            assert_int_equal(p.v.ntable, 0);
            assert_null(p.v.table);
            assert_non_null(p.v.data); /* 0 entries, allocated */
            assert_int_equal(q.nslices, rows ? 1 : 0);
            assert_int_equal(q.slots, 0);
            if (rows)
                assert_int_equal(q.idx_bytes[0], 1); /* an empty slice: 1 */
            assert_int_equal(spmv_pcsr_info(&p).bytes, 0);
            assert_int_equal(spmv_psell_info(&q).bytes, ((size_t)q.nslices + 1) * 24 + (size_t)q.nslices);
            spmv_pcsr_free(&p);
            spmv_psell_free(&q);
            spmv_coo_free(&coo);
        }
    }
}

/* PSELL's slice widths: 1, 2 and 4 bytes in one matrix, at the edges (a
 * slot spanning 254 takes 1 byte, 255 takes 2: 0xff is padding; 65 534
 * takes 2, 65 535 takes 4), a slot past the first deciding, an empty
 * slice, a padded last slice; and fewer rows than a slice. */
static void test_psell_widths(void **state)
{
    (void)state;
    /* slice s: row 32s holds columns {0, a1}, row 32s+1 {b0, b1} (b1 < 0: none) */
    static const struct { int32_t a1, b0, b1; int want; } slices[] = {
        {10, 254, -1, 1},  {10, 255, -1, 2}, {10, 65534, -1, 2}, {10, 65535, -1, 4},
        {10, 1, 265, 2},   {100, 1, 354, 1},
    };
    const int32_t ns = (int32_t)(sizeof slices / sizeof slices[0]);
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 35);
    for (int d = 0; d < 2; d++) {
        spmv_coo coo;
        spmv_psell q;
        int32_t rows = 32 * ns + 32 + 7; /* then an empty slice, then a last one of 7 rows */
        assert_int_equal(spmv_coo_alloc(&coo, rows, 70001, 4 * ns + 3, (spmv_dtype)d, NULL), SPMV_OK);
        int64_t k = 0;
        for (int32_t s = 0; s < ns; s++) {
            const int32_t row[4] = {32 * s, 32 * s, 32 * s + 1, 32 * s + 1};
            const int32_t col[4] = {0, slices[s].a1, slices[s].b0, slices[s].b1};
            for (int e = 0; e < 4; e++)
                if (col[e] >= 0) {
                    coo.row[k] = row[e];
                    coo.col[k] = col[e];
                    set_val(coo.val, coo.dtype, k, tu_rng_value(&r));
                    k++;
                }
        }
        const int32_t lrow[3] = {rows - 7, rows - 7, rows - 1}, lcol[3] = {3, 4, 7};
        for (int e = 0; e < 3; e++, k++) {
            coo.row[k] = lrow[e];
            coo.col[k] = lcol[e];
            set_val(coo.val, coo.dtype, k, tu_rng_value(&r));
        }
        coo.nnz = k;
        packed_round_trip_keep(&coo, "psell widths", NULL, &q);
        for (int32_t s = 0; s < ns; s++)
            assert_int_equal(q.idx_bytes[s], slices[s].want);
        assert_int_equal(q.slot_off[ns + 1], q.slot_off[ns]); /* the empty slice: width 0, 1 byte */
        assert_int_equal(q.idx_bytes[ns], 1);
        assert_int_equal(q.idx_bytes[ns + 1], 1);
        assert_int_equal(q.slot_off[ns + 2] - q.slot_off[ns + 1], 2);
        assert_int_equal(psell_entry(&q, ns + 1, 0, 6), 4);    /* column 7 - base 3 */
        assert_int_equal(psell_entry(&q, ns + 1, 1, 6), 0xff); /* row shorter than the slot */
        assert_int_equal(psell_entry(&q, ns + 1, 0, 7), 0xff); /* rows past `rows` */
        assert_int_equal(psell_entry(&q, 3, 1, 1), 0xffffffffu);
        assert_int_equal(q.base[q.slot_off[3]], 0); /* a 4-byte slice's bases are 0 */
        assert_int_equal(psell_entry(&q, 3, 0, 1), 65535);
        assert_int_equal(q.base[q.slot_off[2]], 0);
        assert_int_equal(psell_entry(&q, 2, 0, 1), 65534);
        assert_int_equal(psell_entry(&q, 2, 0, 5), 0xffff);
        assert_int_equal(q.base[q.slot_off[4] + 1], 10);
        spmv_psell_free(&q);
        spmv_coo_free(&coo);
    }
    /* fewer rows than a slice, and rows not a multiple of 32 */
    static const int32_t few[] = {1, 5, 31, 32, 33, 95};
    for (size_t j = 0; j < sizeof few / sizeof few[0]; j++) {
        spmv_coo coo;
        tu_window_coo(&r, few[j], 3000, 5, (int32_t)tu_rng_range(&r, 1, 2999), SPMV_FLOAT32, &coo);
        packed_round_trip(&coo, "few rows");
        spmv_coo_free(&coo);
    }
}

/* PSELL's diagonal slices (0 bytes of indices): every full slice of a
 * diagonal band, wider than one group of slots; not the partial last one;
 * not a slice with a row one entry short, nor one with a column moved by
 * one; the interior of a 2-D Poisson matrix exactly. Layouts are checked
 * against the rule recomputed here and the COO comes back identical. */
static void test_psell_diagonal(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 36);
    for (int d = 0; d < 2; d++) {
        spmv_coo coo;
        spmv_psell q;
        int32_t rows = 32 * 6 + 7;
        tu_diagonal_coo(&r, rows, 11 + (int32_t)tu_rng_range(&r, 0, 20), 300, (spmv_dtype)d, &coo);
        int32_t w = (int32_t)(coo.nnz / rows);
        packed_round_trip_keep(&coo, "diagonal band", NULL, &q);
        for (int32_t s = 0; s < 6; s++)
            assert_int_equal(q.idx_bytes[s], 0);
        assert_int_equal(q.idx_bytes[6], 1); /* 7 rows: not a full slice */
        assert_int_equal(q.idx_off[6], 0);
        assert_int_equal(q.slot_off[6], 6 * w);
        spmv_psell_free(&q);
        /* slice 2: its row 5 one entry short; slice 3: its last row's last column one further */
        int64_t at = 0;
        for (int64_t k = 0; k < coo.nnz; k++) {
            if (coo.row[k] == 2 * 32 + 5 && (k + 1 == coo.nnz || coo.row[k + 1] != coo.row[k]))
                continue;
            coo.row[at] = coo.row[k];
            coo.col[at] = coo.col[k] + (coo.row[k] == 3 * 32 + 31 && coo.row[k + 1] != coo.row[k]);
            memcpy((char *)coo.val + at * spmv_dtype_size(coo.dtype), (char *)coo.val + k * spmv_dtype_size(coo.dtype),
                   spmv_dtype_size(coo.dtype));
            at++;
        }
        coo.nnz = at;
        packed_round_trip_keep(&coo, "diagonal band, two slices broken", NULL, &q);
        for (int32_t s = 0; s < 6; s++)
            assert_int_equal(q.idx_bytes[s], s == 2 || s == 3 ? 1 : 0);
        assert_int_equal(q.idx_off[2], 0);
        spmv_psell_free(&q);
        spmv_coo_free(&coo);
    }
    /* 2-D Poisson on a 128-wide grid: a grid line is 4 slices, its 2 inner
     * ones diagonal (on the first and last lines too: 4 diagonals each) */
    spmv_gen_spec spec = {SPMV_GEN_POISSON2D, 128, 0, 0, 1};
    spmv_coo coo;
    spmv_psell q;
    assert_int_equal(spmv_gen(&spec, &coo, NULL), SPMV_OK);
    packed_round_trip_keep(&coo, "poisson2d 128", NULL, &q);
    int32_t diag = 0;
    for (int32_t s = 0; s < q.nslices; s++) {
        int64_t w = q.slot_off[s + 1] - q.slot_off[s];
        diag += q.idx_bytes[s] == 0;
        if (q.idx_bytes[s] == 0) /* constant coefficients: a diagonal slice's values are uniform too */
            assert_int_equal(q.val_off[s + 1] - q.val_off[s], w);
    }
    assert_int_equal(diag, 128 * 2);
    assert_int_equal(q.v.mode, SPMV_VCODE_U8); /* 4 and -1 */
    spmv_psell_free(&q);
    spmv_coo_free(&coo);
}

/* PSELL's uniform slices (one value a slot): rows whose k-th entry holds
 * value k + 1/4, so every slice is uniform, the padded last one too (its
 * value entries: the width, not 32 of each); then one entry changed makes
 * its slice store every value again, and so does a -0.0 among +0.0s (bits,
 * not ==). The values come back identical. */
static void test_psell_uniform(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 37);
    for (int d = 0; d < 2; d++) {
        spmv_coo coo;
        spmv_psell q;
        tu_window_coo(&r, 32 * 5 + 9, 5000, 12, 3000, (spmv_dtype)d, &coo);
        for (int64_t k = 0, at = 0; k < coo.nnz; k++, at++) {
            if (k > 0 && coo.row[k] != coo.row[k - 1])
                at = 0;
            set_val(coo.val, coo.dtype, k, (double)at + 0.25);
        }
        packed_round_trip_keep(&coo, "uniform slices", NULL, &q);
        for (int32_t s = 0; s < q.nslices; s++)
            assert_int_equal(q.val_off[s + 1] - q.val_off[s], q.slot_off[s + 1] - q.slot_off[s]);
        assert_int_equal(q.v.mode, SPMV_VCODE_U8);
        spmv_psell_free(&q);
        int64_t k = 0;
        while (coo.row[k] < 2 * 32 + 7) /* slice 2's row 7, its first entry */
            k++;
        set_val(coo.val, coo.dtype, k, -3.0);
        /* bit for bit: slice 3's first slot all +0.0 but one -0.0 is not uniform, slice 4's all +0.0 is */
        for (int64_t j = 0; j < coo.nnz; j++)
            if ((coo.row[j] / 32 == 3 || coo.row[j] / 32 == 4) && (j == 0 || coo.row[j - 1] != coo.row[j]))
                set_val(coo.val, coo.dtype, j, coo.row[j] == 3 * 32 + 9 ? -0.0 : 0.0);
        packed_round_trip_keep(&coo, "uniform slices, two broken", NULL, &q);
        for (int32_t s = 0; s < q.nslices; s++)
            assert_int_equal(q.val_off[s + 1] - q.val_off[s],
                             (q.slot_off[s + 1] - q.slot_off[s]) * (s == 2 || s == 3 ? SPMV_PSELL_C : 1));
        spmv_psell_free(&q);
        spmv_coo_free(&coo);
    }
}

/* The padding rule: one full row makes its slice 32 x cols slots, past 3
 * per non-zero + 65 536: PSELL is refused with nothing allocated, PCSR
 * (no padding) builds; the matrix skips the one and holds the other. A
 * byte bound is exact at the PCSR's own bytes. */
/* Value entry of slot q of row j in SPSELL sp, by the layout of j's slice
 * (engine/spmv.h spmv_spsell, read here from its definition). */
static int64_t spsell_entry_of(const spmv_spsell *sp, int64_t j, int64_t q)
{
    const spmv_psell *a = &sp->p;
    int64_t t = j / SPMV_PSELL_C, w = a->slot_off[t + 1] - a->slot_off[t], k0 = sp->mirror[t] ? w / 2 : 0;
    int64_t v0 = a->val_off[t];
    if (a->val_off[t + 1] - v0 == (w - k0) * SPMV_PSELL_C)
        return v0 + (q - k0) * SPMV_PSELL_C + j % SPMV_PSELL_C;
    return v0 + q - k0;
}

/* Source records seen: of a uniform source slice (negative), and of
 * source rows in two slices (src[1] read). */
static struct {
    int64_t uniform, split;
} spsell_seen;

/* Mirrored slice s's source table: w/2 records of two int64 where its
 * index entries would be, and for every lower slot k and row r the entry
 * the record gives (src[0] or src[1] by the source row's slice, plus its
 * local row unless negative: -1 - a uniform slot's entry) is the source
 * row's entry of slot w-1-k. Returns the records checked. */
static int64_t spsell_table_check(const spmv_spsell *sp, int32_t s, const char *what)
{
    const spmv_psell *a = &sp->p;
    int64_t s0 = a->slot_off[s], w = a->slot_off[s + 1] - s0;
    assert_int_equal(a->idx_off[s + 1] - a->idx_off[s], w / 2 * SPMV_SPSELL_SRC_BYTES);
    assert_int_equal(a->idx_off[s] % SPMV_SPSELL_SRC_BYTES, 0);
    for (int64_t k = 0; k < w / 2; k++) {
        int64_t rec[2], j0 = a->base[s0 + k];
        memcpy(rec, a->idx + a->idx_off[s] + k * SPMV_SPSELL_SRC_BYTES, sizeof rec);
        if (j0 % SPMV_PSELL_C == 0)
            assert_int_equal(rec[1], 0);
        spsell_seen.uniform += rec[0] < 0 || rec[1] < 0;
        spsell_seen.split += j0 % SPMV_PSELL_C != 0;
        for (int64_t r = 0; r < SPMV_PSELL_C; r++) {
            int64_t j = j0 + r, at = rec[j / SPMV_PSELL_C != j0 / SPMV_PSELL_C];
            int64_t e = at >= 0 ? at + j % SPMV_PSELL_C : -1 - at;
            if (e != spsell_entry_of(sp, j, w - 1 - k))
                fail_msg("%s: slice %d slot %lld row %lld: table gives entry %lld, the source row's is %lld", what, s,
                         (long long)k, (long long)r, (long long)e, (long long)spsell_entry_of(sp, j, w - 1 - k));
        }
    }
    return w / 2;
}

/* SPSELL of a symmetric matrix: back to COO it is the CSR's COO; its
 * arrays are PSELL's but for the values and index bytes of mirrored slices
 * (w - w/2 slots stored, the rule of engine/spmv.h re-checked here from
 * the CSR, the source table where the index entries would be); its bytes
 * are what the plan said; a mirror flag on a slice the rule does not allow,
 * or a wrong source record, is refused as malformed. */
static void spsell_check(const spmv_coo *coo, const char *what, int32_t *mirrored)
{
    spmv_csr csr;
    spmv_psell ps;
    spmv_spsell sp;
    spmv_coo back, want;
    spmv_error err = {0};
    int64_t slots, bytes;
    to_csr(coo, &csr);
    assert_int_equal(spmv_csr_to_psell(&csr, NULL, &ps, &err), SPMV_OK);
    if (spmv_csr_to_spsell(&csr, NULL, &sp, &err) != SPMV_OK)
        fail_msg("%s: csr_to_spsell: %s", what, err.message);
    assert_int_equal(spmv_format_plan(&csr, SPMV_FMT_SPSELL, 32, &slots, &bytes, &err), SPMV_OK);
    assert_int_equal(spmv_spsell_info(&sp).bytes, (size_t)bytes);
    assert_int_equal(sp.p.slots, slots);
    assert_int_equal(sp.p.nslices, ps.nslices);
    assert_memory_equal(sp.p.slot_off, ps.slot_off, ((size_t)ps.nslices + 1) * 8);
    if (ps.nslices > 0)
        assert_memory_equal(sp.p.idx_bytes, ps.idx_bytes, (size_t)ps.nslices);
    int32_t n = 0;
    int64_t records = 0, last = -1;
    for (int32_t s = 0; s < sp.p.nslices; s++) {
        int64_t w = sp.p.slot_off[s + 1] - sp.p.slot_off[s], nv = sp.p.val_off[s + 1] - sp.p.val_off[s];
        int64_t ws = sp.mirror[s] ? w - w / 2 : w;
        assert_true(nv == ws * SPMV_PSELL_C || (nv == ws && ws > 0));
        assert_true(!sp.mirror[s] || ps.idx_bytes[s] == 0);
        if (sp.mirror[s]) {
            records += spsell_table_check(&sp, s, what);
            last = w >= 2 ? s : last;
        } else { /* PSELL's index bytes, wherever they start */
            assert_int_equal(sp.p.idx_off[s + 1] - sp.p.idx_off[s], ps.idx_off[s + 1] - ps.idx_off[s]);
            assert_memory_equal(sp.p.idx + sp.p.idx_off[s], ps.idx + ps.idx_off[s],
                                (size_t)(ps.idx_off[s + 1] - ps.idx_off[s]));
        }
        n += sp.mirror[s];
    }
    assert_int_equal(n, sp.nmirrored);
    assert_int_equal(sp.p.idx_off[sp.p.nslices], ps.idx_off[ps.nslices] + records * SPMV_SPSELL_SRC_BYTES);
    assert_int_equal(spmv_csr_to_coo(&csr, &want, &err), SPMV_OK);
    assert_int_equal(spmv_spsell_to_coo(&sp, &back, &err), SPMV_OK);
    expect_same(&want, &back, what, "SPSELL");
    for (int32_t s = 0; s < sp.p.nslices; s++) /* a mirror flag where the rule forbids it */
        if (!sp.mirror[s] && sp.p.idx_bytes[s] != 0 && sp.p.slot_off[s + 1] > sp.p.slot_off[s]) {
            sp.mirror[s] = 1;
            assert_int_equal(spmv_spsell_to_coo(&sp, &back, &err), SPMV_ERR_INVALID);
            assert_non_null(strstr(err.message, "malformed SPSELL"));
            sp.mirror[s] = 0;
            break;
        }
    if (last >= 0) { /* a source record one entry off */
        int64_t *rec = (int64_t *)(sp.p.idx + sp.p.idx_off[last]);
        rec[0]++;
        assert_int_equal(spmv_spsell_to_coo(&sp, &back, &err), SPMV_ERR_INVALID);
        assert_non_null(strstr(err.message, "malformed SPSELL"));
        rec[0]--;
        assert_int_equal(spmv_spsell_to_coo(&sp, &back, &err), SPMV_OK);
        spmv_coo_free(&back);
    }
    *mirrored = sp.nmirrored;
    spmv_coo_free(&want);
    spmv_spsell_free(&sp);
    spmv_psell_free(&ps);
    spmv_csr_free(&csr);
}

static void test_spsell_round_trip(void **state)
{
    (void)state;
    static const struct {
        spmv_gen_kind kind;
        int64_t n;
        int32_t distinct; /* -1: the generator's values; 0: every pair distinct */
    } gens[] = {{SPMV_GEN_POISSON3D, 50, 0},  {SPMV_GEN_POISSON3D, 50, -1}, {SPMV_GEN_POISSON3D, 37, 200},
                {SPMV_GEN_POISSON2D, 90, 0},  {SPMV_GEN_POISSON2D, 90, 3000}, {SPMV_GEN_BAND, 500, 0}};
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 0x5353);
    for (int s = 0; s < TU_SHAPE_COUNT; s++) {
        spmv_coo pat, coo;
        int32_t mirrored;
        tu_random_coo(&r, (tu_shape)s, 100, SPMV_FLOAT64, &pat);
        tu_symmetric_coo(&r, &pat, s % 3 == 0 ? 0 : 40, &coo);
        spsell_check(&coo, tu_shape_name((tu_shape)s), &mirrored);
        spmv_coo_free(&pat);
        spmv_coo_free(&coo);
    }
    for (size_t c = 0; c < sizeof gens / sizeof gens[0]; c++) {
        spmv_gen_spec g = {gens[c].kind, gens[c].n, 7, 0, 1};
        spmv_coo pat, coo;
        int32_t mirrored;
        spmv_gen_defaults(&g, true, false, false);
        assert_int_equal(spmv_gen(&g, &pat, NULL), SPMV_OK);
        if (gens[c].distinct >= 0)
            tu_symmetric_coo(&r, &pat, gens[c].distinct, &coo);
        else
            assert_int_equal(spmv_coo_copy(&pat, &coo, NULL), SPMV_OK);
        spsell_check(&coo, spmv_gen_kind_name(gens[c].kind), &mirrored);
        if (mirrored == 0)
            fail_msg("%s n=%lld: no slice mirrored", spmv_gen_kind_name(gens[c].kind), (long long)gens[c].n);
        spmv_coo_free(&pat);
        spmv_coo_free(&coo);
    }
    print_message("# SPSELL source records: %lld with a uniform source slice, %lld over two slices\n",
                  (long long)spsell_seen.uniform, (long long)spsell_seen.split);
    assert_true(spsell_seen.uniform > 0 && spsell_seen.split > 0);
}

static void test_packed_padding_rule(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 36);
    tu_gen g = {.rows = 4000, .cols = 4000, .mean_per_row = 1, .dense_rows = 1, .dense_len = 4000};
    spmv_coo coo;
    spmv_csr csr;
    spmv_pcsr p;
    spmv_psell q;
    spmv_matrix m;
    spmv_error err = {0};
    spmv_format_limits lim = spmv_format_limits_default();
    tu_random_coo_gen(&r, &g, SPMV_FLOAT64, &coo);
    to_csr(&coo, &csr);
    int64_t slots = 0, bytes = 0;
    assert_int_equal(spmv_format_plan(&csr, SPMV_FMT_PSELL, 32, &slots, &bytes, &err), SPMV_OK);
    assert_true(slots > 3 * csr.nnz + SPMV_PADDING_SLACK);
    memset(&q, 0x5a, sizeof q);
    assert_int_equal(spmv_csr_to_psell(&csr, &lim, &q, &err), SPMV_ERR_LIMIT);
    assert_non_null(strstr(err.message, "psell format"));
    assert_non_null(strstr(err.message, "max_padding 3.00"));
    char want[64];
    snprintf(want, sizeof want, "%lld slots", (long long)slots);
    assert_non_null(strstr(err.message, want));
    assert_true(!q.slot_off && !q.idx_off && !q.idx_bytes && !q.base && !q.idx && !q.v.table && !q.v.data);
    assert_int_equal(spmv_csr_to_pcsr(&csr, &lim, &p, &err), SPMV_OK);
    size_t own = spmv_pcsr_info(&p).bytes;
    spmv_pcsr_free(&p);
    assert_int_equal(spmv_matrix_build(&coo, SPMV_FLOAT64, SPMV_FMT_PCSR | SPMV_FMT_PSELL, 0, &lim, &m, &err),
                     SPMV_OK);
    assert_int_equal(m.formats, SPMV_FMT_CSR | SPMV_FMT_PCSR);
    assert_int_equal(spmv_matrix_add_format(&m, SPMV_FMT_PSELL, &err), SPMV_ERR_LIMIT);
    assert_null(m.psell.slot_off);
    assert_int_equal(spmv_matrix_format_bytes(&m, SPMV_FMT_PCSR), own);
    spmv_matrix_drop_format(&m, SPMV_FMT_PCSR);
    assert_int_equal(m.formats, SPMV_FMT_CSR);
    assert_null(m.pcsr.idx);
    /* the byte bound, at the PCSR's own bytes and one below */
    m.limits.max_format_bytes = (int64_t)own - 1;
    assert_int_equal(spmv_matrix_add_format(&m, SPMV_FMT_PCSR, &err), SPMV_ERR_LIMIT);
    assert_non_null(strstr(err.message, "pcsr format"));
    assert_null(m.pcsr.idx);
    m.limits.max_format_bytes = (int64_t)own;
    assert_int_equal(spmv_matrix_add_format(&m, SPMV_FMT_PCSR, &err), SPMV_OK);
    assert_ptr_equal(m.pcsr.row_ptr, m.csr.row_ptr);
    /* without a bound PSELL builds, padded as planned */
    assert_int_equal(spmv_csr_to_psell(&csr, NULL, &q, &err), SPMV_OK);
    assert_int_equal(q.slots, slots);
    assert_int_equal(spmv_psell_info(&q).bytes, (size_t)bytes);
    spmv_psell_free(&q);
    spmv_matrix_free(&m);
    spmv_csr_free(&csr);
    spmv_coo_free(&coo);
}

/* -------------------------------------------------------------- PBSR */

/* PBSR's layout checked against engine/spmv.h's words: b the largest
 * block size that fits, block_ptr, each block's column (decoded here from
 * base/idx/wide_col) and, for raw values, entry (r, c) of block k of block
 * row I at s*b*b + (r*b + c)*nb + (k - s), computed from the CSR. */
static void pbsr_check_layout(const spmv_csr *csr, const spmv_pbsr *p, const char *what)
{
    int32_t b = p->b;
    assert_int_equal(p->brows * b, csr->rows);
    assert_int_equal(p->nblocks * b * b, csr->nnz);
    for (int32_t I = 0; I < p->brows; I++) {
        int64_t s = p->block_ptr[I], nb = p->block_ptr[I + 1] - s;
        assert_int_equal(nb * b, csr->row_ptr[I * b + 1] - csr->row_ptr[I * b]);
        for (int64_t k = 0; k < nb; k++) {
            int64_t bc = p->idx_bytes == 4   ? ((const int32_t *)p->idx)[s + k]
                         : p->base[I] < 0    ? p->wide_col[-1 - (int64_t)p->base[I] + k]
                         : p->idx_bytes == 1 ? p->base[I] + ((const uint8_t *)p->idx)[s + k]
                                             : p->base[I] + ((const uint16_t *)p->idx)[s + k];
            for (int32_t r = 0; r < b; r++)
                for (int32_t c = 0; c < b; c++) {
                    int64_t j = csr->row_ptr[I * b + r] + k * b + c;
                    if (csr->col[j] != bc * b + c)
                        fail_msg("%s: block %lld of block row %d has column %lld, CSR %d", what, (long long)k, I,
                                 (long long)(bc * b + c), csr->col[j]);
                    if (p->v.mode == SPMV_VCODE_RAW)
                        assert_memory_equal((const char *)p->v.data + (s * b * b + (r * b + c) * nb + k) * 8,
                                            (const char *)csr->val + j * 8, 8); /* float64 in these cases */
                }
        }
    }
}

/* Round trip PBSR -> COO equal to the CSR's COO, the layout, bytes as
 * planned, for each b, each index width (block-column spans of 100, 5000
 * and 200 000 blocks: 1, 2 and 4 bytes or wide block rows) and value modes
 * (raw, u8 and const through a palette). */
static void test_pbsr_round_trip(void **state)
{
    (void)state;
    static const int32_t bs[] = {2, 3, 4, 6};
    static const struct { int32_t bcols, per_row, span, palette; } cases[] = {
        {400, 5, 100, 0}, {20000, 4, 5000, 0}, {300000, 3, 200000, 0}, {400, 6, 100, 50}, {300, 4, 40, 1},
    };
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 37);
    bool widths[5] = {false}, wide = false, modes[SPMV_VCODE_COUNT] = {false};
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            spmv_coo coo, back, ref;
            spmv_csr csr;
            spmv_pbsr p;
            spmv_error err = {0};
            char what[128];
            tu_block_coo(&r, 60, cases[c].bcols, bs[i], cases[c].per_row, cases[c].span, SPMV_FLOAT64, &coo);
            if (cases[c].palette)
                tu_palette_values(&r, &coo, cases[c].palette);
            snprintf(what, sizeof what, "b=%d case %zu (%d x %d, nnz %lld, seed %llu)", bs[i], c, coo.rows, coo.cols,
                     (long long)coo.nnz, (unsigned long long)tu_seed());
            to_csr(&coo, &csr);
            int32_t b = spmv_csr_block_size(&csr, &err);
            if (b == 0 || b % bs[i])
                fail_msg("%s: block size %d (%s)", what, b, err.message);
            assert_int_equal(spmv_csr_to_pbsr(&csr, NULL, &p, &err), SPMV_OK);
            assert_int_equal(p.b, b);
            pbsr_check_layout(&csr, &p, what);
            int64_t slots = 0, bytes = 0;
            assert_int_equal(spmv_format_plan(&csr, SPMV_FMT_PBSR, 32, &slots, &bytes, &err), SPMV_OK);
            assert_int_equal(slots, csr.nnz);
            assert_int_equal(spmv_pbsr_info(&p).bytes, (size_t)bytes);
            assert_true(spmv_pbsr_info(&p).padding_ratio == 1.0);
            assert_int_equal(spmv_pbsr_to_coo(&p, &back, &err), SPMV_OK);
            assert_int_equal(spmv_csr_to_coo(&csr, &ref, &err), SPMV_OK);
            if (!tu_coo_equal(&back, &ref))
                fail_msg("%s: PBSR -> COO differs from the CSR's COO", what);
            widths[p.idx_bytes] = true;
            wide |= p.wide_nnz > 0;
            modes[p.v.mode] = true;
            spmv_coo_free(&back);
            spmv_coo_free(&ref);
            spmv_pbsr_free(&p);
            spmv_csr_free(&csr);
            spmv_coo_free(&coo);
        }
    assert_true(widths[1] && widths[2] && (widths[4] || wide));
    assert_true(modes[SPMV_VCODE_RAW] && modes[SPMV_VCODE_U8] && modes[SPMV_VCODE_CONST]);
}

/* A matrix without complete blocks is refused (SPMV_ERR_UNSUPPORTED,
 * saying why, nothing allocated) and skipped by spmv_matrix_build: one
 * entry of one 3 x 3 block missing; rows not a multiple of any b; no
 * non-zeros. An explicit zero completes a block. */
static void test_pbsr_refused(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 38);
    spmv_coo coo;
    spmv_csr csr;
    spmv_pbsr p;
    spmv_matrix m;
    spmv_error err = {0};
    tu_block_coo(&r, 40, 40, 3, 4, 20, SPMV_FLOAT64, &coo);
    /* an entry of a block (not a b=6 one: rows 120 are 6's multiple) set to 0.0: still complete */
    ((double *)coo.val)[coo.nnz / 2] = 0.0;
    to_csr(&coo, &csr);
    assert_true(spmv_csr_block_size(&csr, &err) % 3 == 0);
    spmv_csr_free(&csr);
    /* drop that entry: its block is incomplete */
    int64_t gone = coo.nnz / 2;
    for (int64_t k = gone; k + 1 < coo.nnz; k++) {
        coo.row[k] = coo.row[k + 1];
        coo.col[k] = coo.col[k + 1];
        ((double *)coo.val)[k] = ((double *)coo.val)[k + 1];
    }
    coo.nnz--;
    to_csr(&coo, &csr);
    assert_int_equal(spmv_csr_block_size(&csr, &err), 0);
    assert_int_equal(err.status, SPMV_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.message, "incomplete block"));
    memset(&p, 0x5a, sizeof p);
    assert_int_equal(spmv_csr_to_pbsr(&csr, NULL, &p, &err), SPMV_ERR_UNSUPPORTED);
    assert_true(!p.block_ptr && !p.idx && !p.base && !p.v.data && !p.v.table);
    int64_t slots, bytes;
    assert_int_equal(spmv_format_plan(&csr, SPMV_FMT_PBSR, 32, &slots, &bytes, &err), SPMV_ERR_UNSUPPORTED);
    assert_int_equal(spmv_matrix_build(&coo, SPMV_FLOAT64, SPMV_FMT_PCSR | SPMV_FMT_PBSR, 0, NULL, &m, &err), SPMV_OK);
    assert_int_equal(m.formats, SPMV_FMT_CSR | SPMV_FMT_PCSR);
    assert_int_equal(spmv_matrix_add_format(&m, SPMV_FMT_PBSR, &err), SPMV_ERR_UNSUPPORTED);
    spmv_matrix_free(&m);
    spmv_csr_free(&csr);
    spmv_coo_free(&coo);
    /* 7 x 7 (no b divides it), and 6 x 6 without non-zeros */
    for (int32_t n = 7; n >= 6; n--) {
        tu_gen g = {.rows = n, .cols = n, .mean_per_row = n == 7 ? 7 : 0};
        tu_random_coo_gen(&r, &g, SPMV_FLOAT64, &coo);
        to_csr(&coo, &csr);
        assert_int_equal(spmv_csr_to_pbsr(&csr, NULL, &p, &err), SPMV_ERR_UNSUPPORTED);
        assert_non_null(strstr(err.message, n == 7 ? "not a multiple" : "no non-zeros"));
        spmv_csr_free(&csr);
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
        cmocka_unit_test(test_packed_round_trip),
        cmocka_unit_test(test_packed_random_modes),
        cmocka_unit_test(test_packed_value_modes),
        cmocka_unit_test(test_pcsr_widths),
        cmocka_unit_test(test_psell_widths),
        cmocka_unit_test(test_psell_diagonal),
        cmocka_unit_test(test_psell_uniform),
        cmocka_unit_test(test_packed_padding_rule),
        cmocka_unit_test(test_spsell_round_trip),
        cmocka_unit_test(test_pbsr_round_trip),
        cmocka_unit_test(test_pbsr_refused),
    };
    return cmocka_run_group_tests_name("formats", tests, NULL, NULL);
}
