/* test_cpu_spmm.c — the k-column product of the CPU kernels that take a
 * block of x (engine/cpu/apply.c): Y = A*X on cpu.csr.omp, whose X is
 * interleaved row-major before the pass over A, and on cpu.csr.serial,
 * against the reference applied column by column.
 *
 * Random matrices of every test shape, drawn afresh (seed printed), both
 * dtypes, k = 2, 3, 8, 17 and SPMV_MAX_K, one and several threads: Y is
 * poisoned, each of its columns must match spmv_reference of that column
 * of X (float64: 1e-12, float32: 1e-5 of the column's ||y||_inf, or of
 * || |A|·|x| || where cancellation makes y small).
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

static void check_block(const spmv_kernel *k, const spmv_coo *coo, spmv_dtype dt, int32_t ncols, int32_t threads,
                        tu_rng *r, const char *what)
{
    spmv_matrix m;
    spmv_error err;
    assert_int_equal(spmv_matrix_build(coo, dt, SPMV_FMT_CSR, 32, 0, &m, &err), SPMV_OK);
    size_t vs = spmv_dtype_size(dt);
    int64_t nx = (int64_t)m.cols * ncols, ny = (int64_t)m.rows * ncols;
    char *x = tu_vector_alloc(dt, nx), *y = tu_vector_alloc(dt, ny), *ref = tu_vector_alloc(dt, m.rows);
    double *x64 = tu_vector_alloc(SPMV_FLOAT64, m.cols), *abs = tu_vector_alloc(SPMV_FLOAT64, m.rows);
    tu_random_vector(r, dt, nx, x);
    tu_poison(y, dt, ny);
    spmv_params p = {{0}};
    if (k->params & (1u << SPMV_PARAM_THREADS))
        p.v[SPMV_PARAM_THREADS] = threads;
    spmv_stats st;
    int rc = spmv_cpu_run_k(k, &m, &p, ncols, x, y, 0, 1, &st, &err);
    if (rc != SPMV_OK)
        fail_msg("%s: %s", what, err.message);
    for (int32_t j = 0; j < ncols; j++) {
        const char *xj = x + (size_t)j * m.cols * vs, *yj = y + (size_t)j * m.rows * vs;
        tu_poison(ref, dt, m.rows);
        spmv_reference(&m.csr, xj, ref);
        tu_vector_convert(xj, dt, x64, SPMV_FLOAT64, m.cols);
        tu_abs_product(coo, SPMV_FLOAT64, x64, abs);
        double scale = fmax(tu_vector_norm(dt, ref, m.rows, TU_NORM_INF), tu_vector_norm(SPMV_FLOAT64, abs, m.rows, TU_NORM_INF));
        char label[200];
        snprintf(label, sizeof label, "%s, %s, column %d of %d, threads %d", what, k->name, j, ncols, threads);
        TU_ASSERT_CLOSE_SCALED(label, dt, yj, dt, ref, m.rows, scale > 0 ? scale : 1.0,
                               dt == SPMV_FLOAT64 ? 1e-12 : 1e-5);
    }
    free(x);
    free(y);
    free(ref);
    free(x64);
    free(abs);
    spmv_matrix_free(&m);
}

static void test_block_products(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 0x5eedULL);
    static const int32_t ks[] = {2, 3, 8, 17, SPMV_MAX_K};
    static const int32_t threads[] = {1, 3};
    const char *kernels[] = {"cpu.csr.omp", "cpu.csr.serial"};
    for (int s = 0; s < TU_SHAPE_COUNT; s++) {
        spmv_coo coo;
        tu_random_coo(&r, (tu_shape)s, 150, SPMV_FLOAT64, &coo);
        for (size_t q = 0; q < 2; q++)
            for (int d = 0; d < 2; d++)
                for (size_t i = 0; i < sizeof ks / sizeof *ks; i++)
                    for (size_t t = 0; t < (q == 0 ? 2 : 1); t++)
                        check_block(spmv_kernel_find(kernels[q]), &coo, d ? SPMV_FLOAT32 : SPMV_FLOAT64, ks[i],
                                    threads[t], &r, tu_shape_name((tu_shape)s));
        spmv_coo_free(&coo);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_products),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
