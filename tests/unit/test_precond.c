/* test_precond.c — the preconditioner objects (engine/precond.c) under the
 * Krylov solvers (engine/krylov.c), on the host.
 *
 * Each type is built on a generated 2-D Poisson matrix (SPD) and used by
 * CG, BiCGSTAB and GMRES through spmv_solve_options.precond; the answer is
 * checked by its true residual ||b - Ax|| / ||b|| computed here, and AMG
 * must need fewer iterations than Jacobi, which needs fewer than none.
 * Jacobi through the object is the same iteration as the solver's own
 * inv_diag. The refusals: an unknown type name, a vector of the wrong
 * length or device, a non-square matrix. Inputs drawn afresh (seed
 * printed).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "krylov.h"
#include "precond.h"
#include "spmv.h"
#include "testutil.h"

static tu_rng rng;

typedef struct op_ctx {
    spmv_matrix m;
} op_ctx;

static int apply(void *c, const spmv_vec *x, spmv_vec *y, double *ms, spmv_error *err)
{
    op_ctx *o = c;
    spmv_stats st;
    spmv_apply_args a = {1.0, 0.0, 0, 1};
    int rc = spmv_cpu_apply(spmv_kernel_find("cpu.csr.serial"), &o->m, NULL, &a, x, y, &st, NULL, err);
    *ms = st.median_ms;
    return rc;
}

static void poisson(int64_t side, spmv_dtype dt, spmv_matrix *m)
{
    spmv_gen_spec g = {SPMV_GEN_POISSON2D, side, 5, 0, 1};
    spmv_coo coo;
    spmv_error err = {0};
    memset(m, 0, sizeof *m);
    assert_int_equal(spmv_gen(&g, &coo, &err), SPMV_OK);
    assert_int_equal(spmv_matrix_build(&coo, dt, SPMV_FMT_CSR, 32, 0, m, &err), SPMV_OK);
    spmv_coo_free(&coo);
}

/* Iterations of `method` preconditioned by p (NULL: none), after checking
 * the true residual. */
static int32_t solve(op_ctx *o, spmv_solve_method method, spmv_precond *p, const spmv_vec *b, double tol)
{
    spmv_error err = {0};
    spmv_vec x;
    int32_t n = o->m.rows;
    assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, b->dtype, n, 1, &x, &err), SPMV_OK);
    assert_int_equal(spmv_vec_fill(NULL, &x, 0.0, &err), SPMV_OK);
    spmv_precond_binding bind = {NULL, p};
    spmv_solve_options so = {.method = method, .tol = tol, .maxit = 3000};
    if (p) {
        so.precond = spmv_precond_apply_cb;
        so.precond_ctx = &bind;
    }
    spmv_linop a = {n, n, o, apply};
    spmv_solve_result res;
    assert_int_equal(spmv_solve(NULL, &a, b, &x, &so, &res, &err), SPMV_OK);
    spmv_vec r;
    assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, b->dtype, n, 1, &r, &err), SPMV_OK);
    double ms, rn, bn;
    assert_int_equal(apply(o, &x, &r, &ms, &err), SPMV_OK);
    assert_int_equal(spmv_vec_axpby(NULL, 1.0, b, -1.0, &r, &err), SPMV_OK);
    assert_int_equal(spmv_vec_nrm2(NULL, &r, &rn, &err), SPMV_OK);
    assert_int_equal(spmv_vec_nrm2(NULL, b, &bn, &err), SPMV_OK);
    assert_int_equal(res.stop, SPMV_STOP_CONVERGED);
    assert_true(rn <= tol * bn * 1.01);
    int32_t it = res.iterations;
    spmv_solve_result_free(&res);
    spmv_vec_free(NULL, &x);
    spmv_vec_free(NULL, &r);
    return it;
}

static void test_types_converge(void **state)
{
    (void)state;
    for (int d = 0; d < 2; d++) {
        spmv_dtype dt = d ? SPMV_FLOAT32 : SPMV_FLOAT64;
        double tol = d ? 1e-5 : 1e-9;
        op_ctx o;
        poisson(60 + tu_rng_range(&rng, 0, 20), dt, &o.m);
        spmv_error err = {0};
        spmv_vec b;
        assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, dt, o.m.rows, 1, &b, &err), SPMV_OK);
        tu_random_vector(&rng, dt, o.m.rows, b.data);
        for (int method = 0; method < 3; method++) {
            int32_t its[3];
            for (int t = 0; t < 3; t++) {
                spmv_precond *p = NULL;
                spmv_precond_options po;
                spmv_precond_type type = t == 0 ? SPMV_PRECOND_NONE : t == 1 ? SPMV_PRECOND_JACOBI : SPMV_PRECOND_AMG;
                spmv_precond_defaults(&po, type);
                if (t)
                    assert_int_equal(spmv_precond_setup(NULL, &o.m.csr, &po, &p, &err), SPMV_OK);
                its[t] = solve(&o, (spmv_solve_method)method, p, &b, tol);
                spmv_precond_free(NULL, p);
            }
            print_message("# %s %s: none %d, jacobi %d, amg %d iterations\n", spmv_dtype_name(dt),
                          spmv_solve_method_name((spmv_solve_method)method), its[0], its[1], its[2]);
            assert_true(its[2] < its[1] && its[1] <= its[0]);
        }
        spmv_vec_free(NULL, &b);
        spmv_matrix_free(&o.m);
    }
}

static void test_refusals(void **state)
{
    (void)state;
    op_ctx o;
    spmv_error err = {0};
    spmv_precond *p = NULL;
    spmv_precond_options po;
    spmv_precond_type t;
    poisson(12, SPMV_FLOAT64, &o.m);
    assert_int_equal(spmv_precond_type_parse("amg", &t), SPMV_OK);
    assert_int_equal(t, SPMV_PRECOND_AMG);
    assert_int_equal(spmv_precond_type_parse("multigrid", &t), SPMV_ERR_INVALID);
    spmv_precond_defaults(&po, SPMV_PRECOND_AMG);
    po.block_size = 7; /* 144 rows */
    assert_int_equal(spmv_precond_setup(NULL, &o.m.csr, &po, &p, &err), SPMV_ERR_INVALID);
    assert_null(p);
    spmv_precond_defaults(&po, SPMV_PRECOND_JACOBI);
    assert_int_equal(spmv_precond_setup(NULL, &o.m.csr, &po, &p, &err), SPMV_OK);
    spmv_vec r, z;
    assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, SPMV_FLOAT64, 100, 1, &r, &err), SPMV_OK);
    assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, SPMV_FLOAT64, 100, 1, &z, &err), SPMV_OK);
    assert_int_equal(spmv_precond_apply(NULL, p, &r, &z, &err), SPMV_ERR_INVALID); /* 100 values, not 144 */
    assert_non_null(strstr(err.message, "144 values"));
    spmv_precond_info info;
    spmv_precond_info_of(p, &info);
    assert_int_equal(info.type, SPMV_PRECOND_JACOBI);
    assert_true(info.symmetric && info.host_bytes == 144 * 8);
    spmv_precond_free(NULL, p);
    spmv_vec_free(NULL, &r);
    spmv_vec_free(NULL, &z);
    spmv_matrix_free(&o.m);
}

int main(void)
{
    tu_rng_init(&rng, tu_seed());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_types_converge),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests_name("precond", tests, NULL, NULL);
}
