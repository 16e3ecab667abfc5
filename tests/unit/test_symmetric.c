/* test_symmetric.c — spmv_csr_symmetric (engine/csr.c): A equals its
 * transpose exactly.
 *
 * A random matrix drawn afresh (seed printed) is made symmetric as
 * B + Bᵀ; it must be found so in both dtypes and with 64-bit offsets.
 * Then each way of breaking the mirror must be found: one value changed,
 * an entry without its mirror, a rectangular shape; and the edges: no
 * entry, the diagonal alone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "spmv.h"
#include "testutil.h"

/* coo + its transpose, as one COO (entries of both; the build sums duplicates). */
static void symmetrize(const spmv_coo *b, spmv_coo *out)
{
    out->rows = out->cols = b->rows;
    out->nnz = 2 * b->nnz;
    out->dtype = SPMV_FLOAT64;
    out->row = malloc((size_t)out->nnz * sizeof(int32_t) + 1);
    out->col = malloc((size_t)out->nnz * sizeof(int32_t) + 1);
    out->val = malloc((size_t)out->nnz * sizeof(double) + 1);
    assert_non_null(out->row);
    assert_non_null(out->col);
    assert_non_null(out->val);
    for (int64_t p = 0; p < b->nnz; p++) {
        double v = ((const double *)b->val)[p];
        out->row[2 * p] = b->row[p], out->col[2 * p] = b->col[p], ((double *)out->val)[2 * p] = v;
        out->row[2 * p + 1] = b->col[p], out->col[2 * p + 1] = b->row[p], ((double *)out->val)[2 * p + 1] = v;
    }
}

static bool symmetric_as(const spmv_coo *c, spmv_dtype dt)
{
    spmv_matrix m;
    spmv_error err;
    assert_int_equal(spmv_matrix_build(c, dt, SPMV_FMT_CSR, 32, 0, &m, &err), SPMV_OK);
    bool s = spmv_csr_symmetric(&m.csr);
    spmv_matrix_free(&m);
    return s;
}

static void test_symmetric(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed());
    spmv_coo b, s;
    tu_random_coo(&r, TU_SHAPE_POWER_LAW, 300, SPMV_FLOAT64, &b);
    symmetrize(&b, &s);
    assert_true(symmetric_as(&s, SPMV_FLOAT64));
    assert_true(symmetric_as(&s, SPMV_FLOAT32));
    spmv_matrix m;
    spmv_error err;
    assert_int_equal(spmv_matrix_build(&s, SPMV_FLOAT64, SPMV_FMT_CSR, 32, 0, &m, &err), SPMV_OK);
    assert_int_equal(spmv_csr_widen(&m.csr, &err), SPMV_OK);
    assert_true(spmv_csr_symmetric(&m.csr));
    spmv_matrix_free(&m);
    int64_t p = tu_rng_range(&r, 0, b.nnz - 1);
    while (b.row[p] == b.col[p]) /* an off-diagonal entry: its mirror is another one */
        p = (p + 1) % b.nnz;
    ((double *)s.val)[2 * p] += 0.25; /* (i, j) and (j, i) now differ */
    assert_false(symmetric_as(&s, SPMV_FLOAT64));
    ((double *)s.val)[2 * p] -= 0.25;
    s.col[2 * p + 1] = (s.col[2 * p + 1] + 1) % s.cols; /* the mirror moved: (i, j) has none */
    assert_false(symmetric_as(&s, SPMV_FLOAT64));
    s.cols += 1; /* a rectangular matrix never is */
    s.col[2 * p + 1] = b.row[p];
    assert_false(symmetric_as(&s, SPMV_FLOAT64));
    spmv_coo_free(&s);
    spmv_coo_free(&b);
}

static void test_edges(void **state)
{
    (void)state;
    int32_t idx[3] = {0, 1, 2};
    double val[3] = {1.0, -2.0, 3.0};
    spmv_coo diag = {3, 3, 3, idx, idx, val, SPMV_FLOAT64}, none = {3, 3, 0, idx, idx, val, SPMV_FLOAT64};
    assert_true(symmetric_as(&diag, SPMV_FLOAT64));
    assert_true(symmetric_as(&none, SPMV_FLOAT64));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_symmetric),
        cmocka_unit_test(test_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
