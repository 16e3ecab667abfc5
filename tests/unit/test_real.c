/* test_real.c — the shared real matrices through every CPU kernel.
 *
 * Every file of ../shared/matrices/real/ is read with spmv_mm_read_file and
 * must have expected.json's rows, cols, nnz and longest row; then every CPU
 * kernel of the registry, in float64 and float32, must reproduce the peer's
 * y (SciPy, x[j] = 1 + (j mod 7)/8) within the README's bounds: float64
 * 1e-12 relative to ||y||_inf, float32 1e-5 relative to y_norm2. y is
 * poisoned with NaN before every run. Each file is one cmocka test.
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

#define F64_BOUND 1e-12
#define F32_BOUND 1e-5

static tu_expected *expected;
static size_t nexpected;

/* Runs every CPU kernel on m (cpu.spsell.omp where m is exactly
 * symmetric; on another it must refuse, saying so); returns the worst
 * relative error seen. */
static double check_kernels(const tu_expected *e, const spmv_matrix *m)
{
    spmv_dtype dt = m->dtype;
    void *x = tu_vector_alloc(dt, m->cols), *y = tu_vector_alloc(dt, m->rows);
    double worst = 0;
    bool symmetric = spmv_csr_symmetric(&m->csr);
    tu_expected_x(dt, m->cols, x);
    for (size_t i = 0; i < spmv_kernel_count(); i++) {
        const spmv_kernel *k = spmv_kernel_at(i);
        spmv_error err;
        char what[160];
        if (k->device != SPMV_DEVICE_CPU || k->op != SPMV_OP_SPMV)
            continue;
        snprintf(what, sizeof what, "%s %s on %s", k->name, spmv_dtype_name(dt), e->file);
        tu_poison(y, dt, m->rows);
        int rc = spmv_cpu_run(k, m, NULL, x, y, 0, 1, NULL, &err);
        if (k->format == SPMV_FMT_SPSELL && !symmetric) {
            if (rc != SPMV_ERR_UNAVAILABLE || !strstr(err.message, "symmetric"))
                fail_msg("%s (not symmetric): %s", what, rc ? err.message : "ran");
            continue;
        }
        if (rc == SPMV_ERR_UNSUPPORTED && k->format == SPMV_FMT_PBSR && spmv_csr_block_size(&m->csr, NULL) == 0) {
            print_message("# %s: no b x b blocks, refused as it must be\n", what);
            continue;
        }
        if (rc != SPMV_OK)
            fail_msg("%s: %s", what, err.message);
        /* float64 against ||y||_inf, float32 against ||y||_2 (= y_norm2) */
        tu_norm norm = dt == SPMV_FLOAT64 ? TU_NORM_INF : TU_NORM_2;
        double bound = dt == SPMV_FLOAT64 ? F64_BOUND : F32_BOUND;
        TU_ASSERT_CLOSE(what, dt, y, SPMV_FLOAT64, e->y, m->rows, norm, bound);
        worst = fmax(worst, tu_rel_err(dt, y, SPMV_FLOAT64, e->y, m->rows, norm));
    }
    free(x);
    free(y);
    return worst;
}

static void test_file(void **state)
{
    const tu_expected *e = *state;
    char path[4096], rel[256];
    spmv_coo coo;
    spmv_mm_info info;
    spmv_error err;
    snprintf(rel, sizeof rel, "real/%s", e->file);
    tu_matrices_path(path, sizeof path, rel);
    if (spmv_mm_read_file(path, NULL, &coo, &info, &err) != SPMV_OK)
        fail_msg("%s: %s", path, err.message);
    assert_int_equal(coo.rows, e->rows);
    assert_int_equal(coo.cols, e->cols);
    assert_int_equal(coo.nnz, e->nnz);
    double norm = 0, worst[2];
    for (int64_t r = 0; r < e->rows; r++)
        norm += e->y[r] * e->y[r];
    assert_true(fabs(sqrt(norm) - e->y_norm2) <= 1e-9 * fmax(e->y_norm2, 1.0));
    for (int d = 0; d < 2; d++) {
        spmv_matrix m;
        /* float32 holds only CSR: the other kernels build theirs in scratch */
        unsigned formats = d == 0 ? SPMV_FMT_ALL : SPMV_FMT_CSR;
        if (spmv_matrix_build(&coo, (spmv_dtype)d, formats, 0, 0, &m, &err) != SPMV_OK)
            fail_msg("%s: %s", e->file, err.message);
        assert_int_equal(tu_longest_row(&m.csr), e->max_row);
        worst[d] = check_kernels(e, &m);
        spmv_matrix_free(&m);
    }
    printf("# %s: worst relative error float64 %.2g, float32 %.2g\n", e->file, worst[0], worst[1]);
    spmv_coo_free(&coo);
}

int main(void)
{
    tu_seed();
    if (tu_expected_load(&expected, &nexpected) != 0 || nexpected == 0) {
        /* cmocka has no whole-group skip before tests exist: report one. */
        printf("1..1\nnot ok 1 - expected.json could not be read\n");
        return 1;
    }
    struct CMUnitTest *tests = calloc(nexpected, sizeof *tests);
    assert_non_null(tests);
    for (size_t i = 0; i < nexpected; i++) {
        tests[i] = (struct CMUnitTest)cmocka_unit_test_prestate(test_file, &expected[i]);
        tests[i].name = expected[i].file;
    }
    int rc = _cmocka_run_group_tests("real", tests, nexpected, NULL, NULL);
    free(tests);
    tu_expected_free(expected, nexpected);
    return rc;
}
