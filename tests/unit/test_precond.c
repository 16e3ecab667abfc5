/* test_precond.c — the preconditioner objects (engine/precond.c and
 * engine/precond_*.c) under the Krylov solvers (engine/krylov.c), on the
 * host.
 *
 * Each type is built on a generated 2-D Poisson matrix (SPD) and used by
 * CG (the symmetric types), BiCGSTAB and GMRES through
 * spmv_solve_options.precond; the answer is checked by its true residual
 * ||b - Ax|| / ||b|| computed here. The ones that should help must need
 * fewer iterations than Jacobi (which needs no more than none): AMG, ic0,
 * ilu0 and chebyshev. ilu0 also on a non-symmetric convection-diffusion
 * matrix built here. Each type's apply is checked against an independent
 * computation in this file: block_jacobi's z multiplied by the block
 * diagonal gives r back; chebyshev's residual D^-1 (r - A z) is the
 * Chebyshev residual polynomial R_m(D^-1 A) D^-1 r evaluated by the
 * three-term recurrence; ic0's and ilu0's z solve L L^T z = r and L U z = r
 * with L and U from dense factorisations written here. Every type takes
 * both dtypes of vectors on a matrix of either dtype. The refusals: an
 * unknown type name, a vector of the wrong length, a block_size or degree
 * out of range, a singular block, a zero pivot. Inputs drawn afresh (seed
 * printed), outputs poisoned before each apply.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "formats.h"
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

static void build(spmv_coo *coo, spmv_dtype dt, spmv_matrix *m)
{
    spmv_error err = {0};
    memset(m, 0, sizeof *m);
    assert_int_equal(spmv_matrix_build(coo, dt, SPMV_FMT_CSR, 32, 0, m, &err), SPMV_OK);
    spmv_coo_free(coo);
}

static void poisson(int64_t side, spmv_dtype dt, spmv_matrix *m)
{
    spmv_gen_spec g = {SPMV_GEN_POISSON2D, side, 5, 0, 1};
    spmv_coo coo;
    spmv_error err = {0};
    assert_int_equal(spmv_gen(&g, &coo, &err), SPMV_OK);
    build(&coo, dt, m);
}

/* -div grad u + c (u_x + u_y) on a side x side grid, first-order upwind:
 * non-symmetric, diagonally dominant. */
static void convection_diffusion(int32_t side, double c, spmv_dtype dt, spmv_matrix *m)
{
    int32_t n = side * side;
    spmv_coo coo;
    spmv_error err = {0};
    assert_int_equal(spmv_coo_alloc(&coo, n, n, (int64_t)n * 5, SPMV_FLOAT64, &err), SPMV_OK);
    int64_t e = 0;
    for (int32_t y = 0; y < side; y++)
        for (int32_t x = 0; x < side; x++) {
            int32_t i = y * side + x;
            int32_t nb[4] = {y > 0 ? i - side : -1, x > 0 ? i - 1 : -1, x + 1 < side ? i + 1 : -1,
                             y + 1 < side ? i + side : -1};
            double w[4] = {-1.0 - c, -1.0 - c, -1.0, -1.0}; /* upwind: the flow comes from -x and -y */
            for (int k = 0; k < 5; k++) {
                int32_t j = k < 2 ? nb[k] : k == 2 ? i : nb[k - 1];
                if (j < 0)
                    continue;
                coo.row[e] = i;
                coo.col[e] = j;
                ((double *)coo.val)[e++] = k == 2 ? 4.0 + 2.0 * c : w[k < 2 ? k : k - 1];
            }
        }
    coo.nnz = e;
    build(&coo, dt, m);
}

static const char *name_of(const spmv_precond *p)
{
    spmv_precond_info info;
    if (!p)
        return "none";
    spmv_precond_info_of(p, &info);
    return spmv_precond_type_name(info.type);
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
    spmv_precond_binding bind = {NULL, p, {0}};
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
    if (res.stop != SPMV_STOP_CONVERGED)
        fail_msg("%s with %s: %s", spmv_solve_method_name(method), name_of(p), res.detail);
    assert_true(rn <= tol * bn * 1.01);
    int32_t it = res.iterations;
    spmv_solve_result_free(&res);
    spmv_vec_free(NULL, &x);
    spmv_vec_free(NULL, &r);
    return it;
}

static spmv_precond *setup(const spmv_csr *a, spmv_precond_type t, int32_t block_size)
{
    spmv_error err = {0};
    spmv_precond *p = NULL;
    spmv_precond_options po;
    spmv_precond_defaults(&po, t);
    po.block_size = block_size;
    if (spmv_precond_setup(NULL, a, &po, &p, &err) != SPMV_OK)
        fail_msg("%s setup: %s", spmv_precond_type_name(t), err.message);
    return p;
}

#define NTYPES SPMV_PRECOND_COUNT

/* Iterations of every type (its[type]; -1: not run) with `method`. */
static void iterations(op_ctx *o, spmv_solve_method method, const spmv_vec *b, double tol, int32_t *its)
{
    char line[256];
    int at = snprintf(line, sizeof line, "# %s %s %d rows:", spmv_dtype_name(b->dtype),
                      spmv_solve_method_name(method), o->m.rows);
    for (int t = 0; t < NTYPES; t++) {
        its[t] = -1;
        spmv_precond *p = t ? setup(&o->m.csr, (spmv_precond_type)t, t == SPMV_PRECOND_BLOCK_JACOBI ? 4 : 1) : NULL;
        if (p) {
            spmv_precond_info info;
            spmv_precond_info_of(p, &info);
            assert_int_equal(info.symmetric, t != SPMV_PRECOND_ILU0);
            assert_true(info.host_bytes > 0 && info.device_bytes == 0 && info.device == SPMV_DEVICE_CPU);
            if (method == SPMV_SOLVE_CG && !info.symmetric) {
                spmv_precond_free(NULL, p);
                continue;
            }
        }
        its[t] = solve(o, method, p, b, tol);
        spmv_precond_free(NULL, p);
        at += snprintf(line + at, sizeof line - (size_t)at, " %s %d", spmv_precond_type_name((spmv_precond_type)t),
                       its[t]);
    }
    print_message("%s\n", line);
}

static void test_types_converge(void **state)
{
    (void)state;
    for (int d = 0; d < 2; d++) {
        spmv_dtype dt = d ? SPMV_FLOAT32 : SPMV_FLOAT64;
        double tol = d ? 1e-5 : 1e-9;
        op_ctx o;
        poisson(40 + 2 * tu_rng_range(&rng, 0, 8), dt, &o.m); /* an even side: block_size 4 divides the rows */
        spmv_error err = {0};
        spmv_vec b;
        assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, dt, o.m.rows, 1, &b, &err), SPMV_OK);
        tu_random_vector(&rng, dt, o.m.rows, b.data);
        for (int method = 0; method < 3; method++) {
            int32_t its[NTYPES];
            iterations(&o, (spmv_solve_method)method, &b, tol, its);
            int32_t jac = its[SPMV_PRECOND_JACOBI];
            assert_true(jac <= its[SPMV_PRECOND_NONE]);
            assert_true(its[SPMV_PRECOND_AMG] < jac && its[SPMV_PRECOND_IC0] < jac &&
                        its[SPMV_PRECOND_CHEBYSHEV] < jac);
            assert_true(method == SPMV_SOLVE_CG ? its[SPMV_PRECOND_ILU0] == -1 : its[SPMV_PRECOND_ILU0] < jac);
            if (method == SPMV_SOLVE_CG) /* the blocks hold each row's x neighbours: some help */
                assert_true(its[SPMV_PRECOND_BLOCK_JACOBI] < jac);
        }
        spmv_vec_free(NULL, &b);
        spmv_matrix_free(&o.m);
    }
}

/* AMG built through spmv_precond_setup with a near-nullspace uses it: on
 * three decoupled copies of a 2-D Poisson matrix (blocks of 3) with the six
 * rigid-body modes of its grid, each aggregate holds more coarse unknowns
 * than the 3 of the default candidates, so the coarse level has more rows
 * than the same setup without the near-nullspace (the setup once read a
 * copy of the options whose near-nullspace had already been cleared, and
 * silently used the 3 translations). The caller's array is not kept. */
static void test_amg_near_nullspace(void **state)
{
    (void)state;
    int64_t side = 20 + tu_rng_range(&rng, 0, 6);
    op_ctx o;
    poisson(side, SPMV_FLOAT64, &o.m);
    int32_t n = o.m.rows;
    const spmv_csr *s = &o.m.csr;
    spmv_coo coo;
    spmv_error err = {0};
    assert_int_equal(spmv_coo_alloc(&coo, 3 * n, 3 * n, 3 * s->nnz, SPMV_FLOAT64, &err), SPMV_OK);
    int64_t e = 0;
    for (int32_t i = 0; i < n; i++)
        for (int c = 0; c < 3; c++)
            for (int32_t p = s->row_ptr[i]; p < s->row_ptr[i + 1]; p++, e++) {
                coo.row[e] = 3 * i + c;
                coo.col[e] = 3 * s->col[p] + c;
                ((double *)coo.val)[e] = ((const double *)s->val)[p];
            }
    spmv_matrix v;
    build(&coo, SPMV_FLOAT64, &v);
    double *xyz = malloc((size_t)n * 3 * sizeof *xyz), *ns = malloc((size_t)n * 18 * sizeof *ns);
    assert_non_null(xyz);
    assert_non_null(ns);
    for (int32_t i = 0; i < n; i++) {
        xyz[3 * i] = (double)(i % side);
        xyz[3 * i + 1] = (double)(i / side);
        xyz[3 * i + 2] = 0.25 * (double)((i * 7) % 3); /* off the plane: no mode is dependent on an aggregate */
    }
    spmv_amg_rigid_body(n, xyz, ns);
    int32_t coarse[2];
    for (int with = 0; with < 2; with++) {
        spmv_precond_options po;
        spmv_precond_defaults(&po, SPMV_PRECOND_AMG);
        po.block_size = 3;
        po.amg.block_size = 3;
        po.amg.max_coarse = 50;
        po.amg.max_levels = 2;
        if (with) {
            po.amg.near_nullspace = ns;
            po.amg.nullspace_k = 6;
        }
        spmv_precond *p = NULL;
        assert_int_equal(spmv_precond_setup(NULL, &v.csr, &po, &p, &err), SPMV_OK);
        spmv_precond_info info;
        spmv_precond_info_of(p, &info);
        coarse[with] = info.coarse_rows;
        assert_true(info.levels == 2);
        spmv_precond_free(NULL, p);
    }
    print_message("# amg on %d rows, blocks of 3: coarse rows %d with the 3 translations, %d with the 6 rigid-body "
                  "modes\n", 3 * n, coarse[0], coarse[1]);
    assert_true(coarse[0] % 3 == 0 && coarse[1] > coarse[0]);
    assert_true(coarse[1] == 2 * coarse[0]); /* the same aggregates, 6 columns each instead of 3 */
    free(xyz);
    free(ns);
    spmv_matrix_free(&v);
    spmv_matrix_free(&o.m);
}

/* ilu0 (and block_jacobi) under BiCGSTAB and GMRES on convection-diffusion. */
static void test_nonsymmetric(void **state)
{
    (void)state;
    op_ctx o;
    double c = 0.5 + 2.0 * tu_rng_uniform(&rng);
    convection_diffusion(30 + 2 * (int32_t)tu_rng_range(&rng, 0, 10), c, SPMV_FLOAT64, &o.m);
    spmv_error err = {0};
    spmv_vec b;
    assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, SPMV_FLOAT64, o.m.rows, 1, &b, &err), SPMV_OK);
    tu_random_vector(&rng, SPMV_FLOAT64, o.m.rows, b.data);
    for (int method = 1; method < 3; method++) {
        int32_t none = solve(&o, (spmv_solve_method)method, NULL, &b, 1e-9);
        spmv_precond *j = setup(&o.m.csr, SPMV_PRECOND_JACOBI, 1), *ilu = setup(&o.m.csr, SPMV_PRECOND_ILU0, 1),
                     *bj = setup(&o.m.csr, SPMV_PRECOND_BLOCK_JACOBI, 2);
        int32_t jac = solve(&o, (spmv_solve_method)method, j, &b, 1e-9);
        int32_t il = solve(&o, (spmv_solve_method)method, ilu, &b, 1e-9);
        int32_t bl = solve(&o, (spmv_solve_method)method, bj, &b, 1e-9);
        print_message("# convection-diffusion c=%.2f %d rows %s: none %d, jacobi %d, block_jacobi %d, ilu0 %d\n", c,
                      o.m.rows, spmv_solve_method_name((spmv_solve_method)method), none, jac, bl, il);
        assert_true(il < jac && il < none);
        spmv_precond_free(NULL, j);
        spmv_precond_free(NULL, ilu);
        spmv_precond_free(NULL, bj);
    }
    spmv_vec_free(NULL, &b);
    spmv_matrix_free(&o.m);
}

/* ------------------------------------------- applies, checked independently */

/* z = M^-1 r for random r of dtype dt (z poisoned first); r and z in float64 into r64, z64. */
static void apply_random(spmv_precond *p, int32_t n, spmv_dtype dt, double *r64, double *z64)
{
    spmv_error err = {0};
    spmv_vec r, z;
    assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, dt, n, 1, &r, &err), SPMV_OK);
    assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, dt, n, 1, &z, &err), SPMV_OK);
    tu_random_vector(&rng, dt, n, r.data);
    tu_poison(z.data, dt, n);
    if (spmv_precond_apply(NULL, p, &r, &z, &err) != SPMV_OK)
        fail_msg("%s apply: %s", name_of(p), err.message);
    tu_vector_convert(r.data, dt, r64, SPMV_FLOAT64, n);
    tu_vector_convert(z.data, dt, z64, SPMV_FLOAT64, n);
    spmv_vec_free(NULL, &r);
    spmv_vec_free(NULL, &z);
}

/* max |x - y| / max |y| */
static double max_rel(const double *x, const double *y, int32_t n)
{
    double e = 0, s = 1e-300;
    for (int32_t i = 0; i < n; i++) {
        e = isnan(x[i]) ? INFINITY : fmax(e, fabs(x[i] - y[i]));
        s = fmax(s, fabs(y[i]));
    }
    return e / s;
}

/* a's values scaled by (1 + 0.5 u) each, u in [-1, 1): a non-symmetric
 * matrix on Poisson's pattern, still diagonally dominant enough. */
static void perturb(spmv_csr *a)
{
    for (int32_t i = 0; i < a->rows; i++)
        for (int32_t p = a->row_ptr[i]; p < a->row_ptr[i + 1]; p++)
            if (a->col[p] != i)
                ((double *)a->val)[p] *= 1.0 + 0.5 * tu_rng_value(&rng);
}

static void test_block_jacobi_apply(void **state)
{
    (void)state;
    int32_t b = (int32_t)tu_rng_range(&rng, 1, 8);
    op_ctx o;
    poisson(b * (3 + tu_rng_range(&rng, 0, 4)), SPMV_FLOAT64, &o.m);
    perturb(&o.m.csr);
    int32_t n = o.m.rows;
    spmv_precond *p = setup(&o.m.csr, SPMV_PRECOND_BLOCK_JACOBI, b);
    double *r = malloc((size_t)n * 8), *z = malloc((size_t)n * 8), *y = malloc((size_t)n * 8);
    for (int d = 0; d < 2; d++) {
        apply_random(p, n, d ? SPMV_FLOAT32 : SPMV_FLOAT64, r, z);
        for (int32_t i = 0; i < n; i++) { /* y = blockdiag(A) z */
            y[i] = 0;
            for (int32_t q = o.m.csr.row_ptr[i]; q < o.m.csr.row_ptr[i + 1]; q++)
                if (o.m.csr.col[q] / b == i / b)
                    y[i] += ((double *)o.m.csr.val)[q] * z[o.m.csr.col[q]];
        }
        double e = max_rel(y, r, n);
        print_message("# block_jacobi b=%d %d rows %s: max |B z - r| / max |r| = %.3g\n", b, n, d ? "float32" : "float64",
                      e);
        assert_true(e <= (d ? 1e-5 : 1e-12));
    }
    free(r);
    free(z);
    free(y);
    spmv_precond_free(NULL, p);
    spmv_matrix_free(&o.m);
}

/* D^-1 (r - A z) against R_m(M) D^-1 r, M = D^-1 A and R_m(t) =
 * T_m((theta - t) / delta) / T_m(theta / delta) on [rho/30, 1.1 rho]: the
 * residual polynomial of the Chebyshev iteration from zero, by the
 * three-term recurrence of T_m. */
static void test_chebyshev_apply(void **state)
{
    (void)state;
    op_ctx o;
    poisson(10 + tu_rng_range(&rng, 0, 20), SPMV_FLOAT64, &o.m);
    const spmv_csr *a = &o.m.csr;
    int32_t n = a->rows;
    double *r = malloc((size_t)n * 8), *z = malloc((size_t)n * 8), *u = malloc((size_t)n * 8),
           *t0 = malloc((size_t)n * 8), *t1 = malloc((size_t)n * 8), *t2 = malloc((size_t)n * 8),
           *dinv = malloc((size_t)n * 8), *got = malloc((size_t)n * 8);
    for (int32_t i = 0; i < n; i++) /* a random positive diagonal scaling: D is not a multiple of I */
        for (int32_t q = a->row_ptr[i]; q < a->row_ptr[i + 1]; q++)
            if (a->col[q] == i)
                ((double *)a->val)[q] *= 1.0 + tu_rng_uniform(&rng);
    assert_int_equal(spmv_csr_inv_diag(a, dinv, &(spmv_error){0}), SPMV_OK);
    for (int32_t degree = 1; degree <= 10; degree++) {
        spmv_precond_options po;
        spmv_precond *p = NULL;
        spmv_error err = {0};
        spmv_precond_defaults(&po, SPMV_PRECOND_CHEBYSHEV);
        po.degree = degree;
        assert_int_equal(spmv_precond_setup(NULL, a, &po, &p, &err), SPMV_OK);
        spmv_precond_info info;
        spmv_precond_info_of(p, &info);
        double hi = 1.1 * info.rho, lo = info.rho / 30, theta = (hi + lo) / 2, delta = (hi - lo) / 2;
        int d = degree % 2; /* both dtypes of vectors over the degrees */
        apply_random(p, n, d ? SPMV_FLOAT32 : SPMV_FLOAT64, r, z);
        for (int32_t i = 0; i < n; i++) {
            double az = 0;
            for (int32_t q = a->row_ptr[i]; q < a->row_ptr[i + 1]; q++)
                az += ((double *)a->val)[q] * z[a->col[q]];
            got[i] = dinv[i] * (r[i] - az);
            u[i] = t0[i] = dinv[i] * r[i];
        }
        /* t1 = X t0, X = (theta I - M) / delta; T_{j+1} = 2 X T_j - T_{j-1} */
        double s0 = 1, s1 = theta / delta, sigma = theta / delta;
        for (int32_t j = 0; j < degree; j++) {
            for (int32_t i = 0; i < n; i++) {
                double mt = 0;
                for (int32_t q = a->row_ptr[i]; q < a->row_ptr[i + 1]; q++)
                    mt += ((double *)a->val)[q] * (j ? t1 : t0)[a->col[q]];
                double xt = (theta * (j ? t1 : t0)[i] - dinv[i] * mt) / delta;
                t2[i] = j ? 2 * xt - t0[i] : xt;
            }
            if (j) {
                double s2 = 2 * sigma * s1 - s0;
                s0 = s1;
                s1 = s2;
                memcpy(t0, t1, (size_t)n * 8);
            }
            memcpy(t1, t2, (size_t)n * 8);
        }
        double e = 0, un = 0;
        for (int32_t i = 0; i < n; i++) {
            e = isnan(got[i]) ? INFINITY : fmax(e, fabs(got[i] - t1[i] / s1));
            un = fmax(un, fabs(u[i]));
        }
        print_message("# chebyshev degree %d rho %.4f %s: max |D^-1(r - Az) - R(M) D^-1 r| / max |D^-1 r| = %.3g\n",
                      degree, info.rho, d ? "float32" : "float64", e / un);
        assert_true(e <= (d ? 1e-5 : 1e-12) * un);
        spmv_precond_free(NULL, p);
    }
    free(r), free(z), free(u), free(t0), free(t1), free(t2), free(dinv), free(got);
    spmv_matrix_free(&o.m);
}

/* a as a dense n x n matrix, with its pattern. */
static void dense_of(const spmv_csr *a, double *m, char *mask)
{
    int32_t n = a->rows;
    memset(m, 0, (size_t)n * n * 8);
    memset(mask, 0, (size_t)n * n);
    for (int32_t i = 0; i < n; i++)
        for (int32_t q = a->row_ptr[i]; q < a->row_ptr[i + 1]; q++) {
            m[(size_t)i * n + a->col[q]] = ((double *)a->val)[q];
            mask[(size_t)i * n + a->col[q]] = 1;
        }
}

/* IC(0) by columns on the dense matrix (left-looking Cholesky kept to the
 * pattern): L in the lower triangle of m. */
static void dense_ic0(double *m, const char *mask, int32_t n)
{
    for (int32_t j = 0; j < n; j++) {
        double d = m[(size_t)j * n + j];
        for (int32_t k = 0; k < j; k++)
            d -= m[(size_t)j * n + k] * m[(size_t)j * n + k];
        assert_true(d > 0);
        m[(size_t)j * n + j] = sqrt(d);
        for (int32_t i = j + 1; i < n; i++) {
            if (!mask[(size_t)i * n + j])
                continue;
            double s = m[(size_t)i * n + j];
            for (int32_t k = 0; k < j; k++)
                s -= m[(size_t)i * n + k] * m[(size_t)j * n + k];
            m[(size_t)i * n + j] = s / m[(size_t)j * n + j];
        }
    }
}

/* ILU(0), KIJ order (right-looking Gaussian elimination kept to the
 * pattern): L (unit) below the diagonal of m, U on and above it. */
static void dense_ilu0(double *m, const char *mask, int32_t n)
{
    for (int32_t k = 0; k < n; k++)
        for (int32_t i = k + 1; i < n; i++) {
            if (!mask[(size_t)i * n + k])
                continue;
            double l = m[(size_t)i * n + k] /= m[(size_t)k * n + k];
            for (int32_t j = k + 1; j < n; j++)
                if (mask[(size_t)i * n + j])
                    m[(size_t)i * n + j] -= l * m[(size_t)k * n + j];
        }
}

/* y = L L^T z (lower) or L U z from the dense factors in m. */
static void dense_product(const double *m, int32_t n, bool lower, const double *z, double *y)
{
    double *t = malloc((size_t)n * 8);
    for (int32_t i = 0; i < n; i++) { /* t = L^T z or U z */
        double s = 0;
        for (int32_t j = i; j < n; j++)
            s += (lower ? m[(size_t)j * n + i] : m[(size_t)i * n + j]) * z[j];
        t[i] = s;
    }
    for (int32_t i = 0; i < n; i++) { /* y = L t */
        double s = lower ? 0 : t[i];
        for (int32_t j = 0; j < i + lower; j++)
            s += m[(size_t)i * n + j] * t[j];
        y[i] = s;
    }
    free(t);
}

static void test_factor_apply(void **state)
{
    (void)state;
    for (int lower = 0; lower < 2; lower++) {
        op_ctx o;
        poisson(6 + tu_rng_range(&rng, 0, 8), SPMV_FLOAT64, &o.m);
        spmv_csr *a = &o.m.csr;
        int32_t n = a->rows;
        if (lower) /* S A S with a random positive S: still SPD, no longer a constant diagonal */
            for (int32_t i = 0, k = 0; i < n; i++, k = 0)
                for (int32_t q = a->row_ptr[i]; q < a->row_ptr[i + 1]; q++, k++)
                    ((double *)a->val)[q] *= (1.5 + sin(1.0 + i)) * (1.5 + sin(1.0 + a->col[q]));
        else
            perturb(a);
        double *m = malloc((size_t)n * n * 8), *r = malloc((size_t)n * 8), *z = malloc((size_t)n * 8),
               *y = malloc((size_t)n * 8);
        char *mask = malloc((size_t)n * n);
        dense_of(a, m, mask);
        if (lower)
            dense_ic0(m, mask, n);
        else
            dense_ilu0(m, mask, n);
        spmv_precond *p = setup(a, lower ? SPMV_PRECOND_IC0 : SPMV_PRECOND_ILU0, 1);
        for (int d = 0; d < 2; d++) {
            apply_random(p, n, d ? SPMV_FLOAT32 : SPMV_FLOAT64, r, z);
            dense_product(m, n, lower, z, y);
            double e = max_rel(y, r, n);
            print_message("# %s %d rows %s: max |L%s z - r| / max |r| = %.3g\n", lower ? "ic0" : "ilu0", n,
                          d ? "float32" : "float64", lower ? " L^T" : " U", e);
            assert_true(e <= (d ? 1e-5 : 1e-12));
        }
        spmv_precond_free(NULL, p);
        free(m), free(r), free(z), free(y), free(mask);
        spmv_matrix_free(&o.m);
    }
}

/* "precision": "float32" on the host: documented to stay float64, so the
 * same z as the float64 preconditioner, bit for bit. */
static void test_host_float32_option(void **state)
{
    (void)state;
    op_ctx o;
    poisson(20 + tu_rng_range(&rng, 0, 10), SPMV_FLOAT64, &o.m);
    int32_t n = o.m.rows;
    static const spmv_precond_type types[] = {SPMV_PRECOND_AMG, SPMV_PRECOND_IC0, SPMV_PRECOND_ILU0};
    for (size_t t = 0; t < 3; t++) {
        spmv_precond *p[2];
        spmv_vec r, z[2];
        spmv_error err = {0};
        assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, SPMV_FLOAT64, n, 1, &r, &err), SPMV_OK);
        tu_random_vector(&rng, SPMV_FLOAT64, n, r.data);
        for (int f = 0; f < 2; f++) {
            spmv_precond_options po;
            spmv_precond_defaults(&po, types[t]);
            po.float32 = f;
            assert_int_equal(spmv_precond_setup(NULL, &o.m.csr, &po, &p[f], &err), SPMV_OK);
            assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, SPMV_FLOAT64, n, 1, &z[f], &err), SPMV_OK);
            tu_poison(z[f].data, SPMV_FLOAT64, n);
            assert_int_equal(spmv_precond_apply(NULL, p[f], &r, &z[f], &err), SPMV_OK);
        }
        assert_memory_equal(z[0].data, z[1].data, (size_t)n * 8);
        spmv_precond_info info;
        spmv_precond_info_of(p[1], &info);
        assert_false(info.float32); /* reported as held: float64 */
        for (int f = 0; f < 2; f++) {
            spmv_precond_free(NULL, p[f]);
            spmv_vec_free(NULL, &z[f]);
        }
        spmv_vec_free(NULL, &r);
    }
    spmv_matrix_free(&o.m);
}

/* Every type takes float64 and float32 vectors whatever the matrix's
 * dtype: the same r (float32 values) gives the same z to float32 rounding. */
static void test_vector_dtypes(void **state)
{
    (void)state;
    for (int md = 0; md < 2; md++) {
        op_ctx o;
        poisson(2 * (8 + tu_rng_range(&rng, 0, 8)), md ? SPMV_FLOAT32 : SPMV_FLOAT64, &o.m);
        int32_t n = o.m.rows;
        for (int t = 1; t < NTYPES; t++) {
            spmv_precond *p = setup(&o.m.csr, (spmv_precond_type)t, t == SPMV_PRECOND_BLOCK_JACOBI ? 4 : 1);
            spmv_vec r[2], z[2];
            spmv_error err = {0};
            for (int d = 0; d < 2; d++) {
                spmv_dtype dt = d ? SPMV_FLOAT32 : SPMV_FLOAT64;
                assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, dt, n, 1, &r[d], &err), SPMV_OK);
                assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, dt, n, 1, &z[d], &err), SPMV_OK);
                tu_poison(z[d].data, dt, n);
            }
            tu_random_vector(&rng, SPMV_FLOAT32, n, r[1].data);
            tu_vector_convert(r[1].data, SPMV_FLOAT32, r[0].data, SPMV_FLOAT64, n);
            double z64[4096], z32[4096];
            for (int d = 0; d < 2; d++)
                if (spmv_precond_apply(NULL, p, &r[d], &z[d], &err) != SPMV_OK)
                    fail_msg("%s, %s vectors: %s", name_of(p), d ? "float32" : "float64", err.message);
            tu_vector_convert(z[0].data, SPMV_FLOAT64, z64, SPMV_FLOAT64, n);
            tu_vector_convert(z[1].data, SPMV_FLOAT32, z32, SPMV_FLOAT64, n);
            double e = max_rel(z32, z64, n);
            if (!(e <= 1e-5))
                fail_msg("%s on a %s matrix: float32 vectors off by %.3g", name_of(p), md ? "float32" : "float64", e);
            for (int d = 0; d < 2; d++) {
                spmv_vec_free(NULL, &r[d]);
                spmv_vec_free(NULL, &z[d]);
            }
            spmv_precond_free(NULL, p);
        }
        spmv_matrix_free(&o.m);
    }
}

/* ------------------------------------------------------------- refusals */

/* Setup of type t (block_size b, degree deg) on a must fail with st and a
 * message holding `want`. */
static void refused(const spmv_csr *a, spmv_precond_type t, int32_t b, int32_t deg, int st, const char *want)
{
    spmv_error err = {0};
    spmv_precond *p = (spmv_precond *)&err; /* must come back NULL */
    spmv_precond_options po;
    spmv_precond_defaults(&po, t);
    po.block_size = b;
    po.degree = deg;
    assert_int_equal(spmv_precond_setup(NULL, a, &po, &p, &err), st);
    assert_null(p);
    if (!strstr(err.message, want))
        fail_msg("%s: \"%s\" does not say \"%s\"", spmv_precond_type_name(t), err.message, want);
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
    for (int k = 1; k < NTYPES; k++) { /* every type is built in */
        assert_int_equal(spmv_precond_type_parse(spmv_precond_type_name((spmv_precond_type)k), &t), SPMV_OK);
        assert_int_equal(t, k);
    }
    assert_int_equal(spmv_precond_type_parse("multigrid", &t), SPMV_ERR_INVALID);
    refused(&o.m.csr, SPMV_PRECOND_AMG, 7, 3, SPMV_ERR_INVALID, "block_size 7"); /* 144 rows */
    refused(&o.m.csr, SPMV_PRECOND_BLOCK_JACOBI, 9, 3, SPMV_ERR_INVALID, "block_size 9");
    refused(&o.m.csr, SPMV_PRECOND_BLOCK_JACOBI, 0, 3, SPMV_ERR_INVALID, "block_size 0");
    refused(&o.m.csr, SPMV_PRECOND_CHEBYSHEV, 1, 0, SPMV_ERR_INVALID, "degree 0");
    refused(&o.m.csr, SPMV_PRECOND_CHEBYSHEV, 1, 11, SPMV_ERR_INVALID, "degree 11");
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

/* A singular block (one row zero inside it), a zero pivot (row and column
 * k of Poisson zeroed, its entries kept in the pattern), a zero diagonal,
 * a missing one. */
static void test_numerical_refusals(void **state)
{
    (void)state;
    op_ctx o;
    poisson(12, SPMV_FLOAT64, &o.m);
    spmv_csr *a = &o.m.csr;
    double *v = a->val;
    int32_t b = 2 + 2 * (int32_t)tu_rng_range(&rng, 0, 1), s = b * (int32_t)tu_rng_range(&rng, 1, 144 / b - 1);
    double saved[8];
    int32_t row = s + (int32_t)tu_rng_range(&rng, 0, b - 1); /* one row of the block zero inside it */
    for (int32_t q = a->row_ptr[row]; q < a->row_ptr[row + 1]; q++)
        if (a->col[q] >= s && a->col[q] < s + b) {
            saved[q - a->row_ptr[row]] = v[q];
            v[q] = 0.0;
        }
    char want[64];
    snprintf(want, sizeof want, "at row %d is singular", s);
    refused(a, SPMV_PRECOND_BLOCK_JACOBI, b, 3, SPMV_ERR_INVALID, want);
    for (int32_t q = a->row_ptr[row]; q < a->row_ptr[row + 1]; q++)
        if (a->col[q] >= s && a->col[q] < s + b)
            v[q] = saved[q - a->row_ptr[row]];
    int32_t k = (int32_t)tu_rng_range(&rng, 1, 142);
    for (int32_t i = 0; i < a->rows; i++)
        for (int32_t q = a->row_ptr[i]; q < a->row_ptr[i + 1]; q++)
            if (i == k || a->col[q] == k)
                v[q] = 0.0;
    snprintf(want, sizeof want, "pivot at row %d", k);
    refused(a, SPMV_PRECOND_IC0, 1, 3, SPMV_ERR_INVALID, want);
    refused(a, SPMV_PRECOND_ILU0, 1, 3, SPMV_ERR_INVALID, want);
    snprintf(want, sizeof want, "row %d has a zero diagonal", k);
    refused(a, SPMV_PRECOND_CHEBYSHEV, 1, 3, SPMV_ERR_INVALID, want);
    spmv_matrix_free(&o.m);
    /* no diagonal in the pattern at row 0: a 2 x 2 [[0 1] [1 0]] */
    spmv_coo coo;
    spmv_error err = {0};
    assert_int_equal(spmv_coo_alloc(&coo, 2, 2, 2, SPMV_FLOAT64, &err), SPMV_OK);
    coo.row[0] = coo.col[1] = 0;
    coo.row[1] = coo.col[0] = 1;
    ((double *)coo.val)[0] = ((double *)coo.val)[1] = 1.0;
    build(&coo, SPMV_FLOAT64, &o.m);
    refused(&o.m.csr, SPMV_PRECOND_ILU0, 1, 3, SPMV_ERR_INVALID, "row 0 has no diagonal");
    refused(&o.m.csr, SPMV_PRECOND_IC0, 1, 3, SPMV_ERR_INVALID, "row 0 has no diagonal");
    spmv_matrix_free(&o.m);
}

/* ------------------------------------------- k columns at once */

/* y = A x for k columns: cpu.csr.omp, whose SpMM gives each column the
 * one-column product's bits (the lockstep's operator). */
static int apply_omp(void *c, const spmv_vec *x, spmv_vec *y, double *ms, spmv_error *err)
{
    op_ctx *o = c;
    spmv_stats st;
    spmv_apply_args a = {1.0, 0.0, 0, 1};
    int rc = spmv_cpu_apply(spmv_kernel_find("cpu.csr.omp"), &o->m, NULL, &a, x, y, &st, NULL, err);
    *ms = st.median_ms;
    return rc;
}

static spmv_precond *setup_amg(const spmv_csr *a, spmv_amg_smoother sm, int32_t presmooth)
{
    spmv_error err = {0};
    spmv_precond *p = NULL;
    spmv_precond_options po;
    spmv_precond_defaults(&po, SPMV_PRECOND_AMG);
    po.amg.max_coarse = 60; /* a few levels on a small matrix */
    po.amg.smoother = sm;
    po.amg.presmooth = presmooth;
    if (spmv_precond_setup(NULL, a, &po, &p, &err) != SPMV_OK)
        fail_msg("amg setup: %s", err.message);
    return p;
}

/* p's k-column apply on random r (dtype dt) against its one-column apply
 * of each column: the same bits; a column masked off keeps its poison. */
static void check_apply_k(spmv_precond *p, int32_t n, int32_t k, spmv_dtype dt, const bool *active)
{
    spmv_error err = {0};
    spmv_vec r, z, rj, zj;
    size_t vs = spmv_dtype_size(dt);
    assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, dt, n, k, &r, &err), SPMV_OK);
    assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, dt, n, k, &z, &err), SPMV_OK);
    assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, dt, n, 1, &zj, &err), SPMV_OK);
    tu_random_vector(&rng, dt, (int64_t)n * k, r.data);
    tu_poison(z.data, dt, (int64_t)n * k);
    if (spmv_precond_apply_k(NULL, p, &r, &z, active, &err) != SPMV_OK)
        fail_msg("%s apply_k: %s", name_of(p), err.message);
    for (int32_t j = 0; j < k; j++) {
        char *zk = (char *)z.data + (size_t)j * n * vs;
        if (active && !active[j]) {
            for (int32_t i = 0; i < n; i++)
                assert_true(isnan(spmv_val_get(zk, dt, i)));
            continue;
        }
        rj = (spmv_vec){SPMV_DEVICE_CPU, dt, n, 1, (char *)r.data + (size_t)j * n * vs};
        tu_poison(zj.data, dt, n);
        assert_int_equal(spmv_precond_apply(NULL, p, &rj, &zj, &err), SPMV_OK);
        if (memcmp(zk, zj.data, (size_t)n * vs) != 0)
            fail_msg("%s %s k=%d column %d: not the one-column apply's bits", name_of(p), spmv_dtype_name(dt), k, j);
    }
    spmv_vec_free(NULL, &r);
    spmv_vec_free(NULL, &z);
    spmv_vec_free(NULL, &zj);
}

/* spmv_precond_apply_k of amg (both smoothers, with and without a
 * presmoothing), chebyshev, jacobi and block_jacobi (k-column applies) and
 * ic0 (column by column), k = 1, 3, 8, both dtypes, all columns or a mask:
 * column j is spmv_precond_apply of column j, bit for bit. The refusal of
 * a block of another shape. */
static void test_apply_k(void **state)
{
    (void)state;
    spmv_error err = {0};
    op_ctx o;
    poisson(30 + 2 * tu_rng_range(&rng, 0, 10), SPMV_FLOAT64, &o.m); /* an even side: block_size 4 divides */
    int32_t n = o.m.rows;
    spmv_precond *ps[7] = {setup_amg(&o.m.csr, SPMV_AMG_CHEBYSHEV, 1), setup_amg(&o.m.csr, SPMV_AMG_JACOBI, 1),
                           setup_amg(&o.m.csr, SPMV_AMG_CHEBYSHEV, 0), setup(&o.m.csr, SPMV_PRECOND_CHEBYSHEV, 1),
                           setup(&o.m.csr, SPMV_PRECOND_JACOBI, 1),     setup(&o.m.csr, SPMV_PRECOND_BLOCK_JACOBI, 4),
                           setup(&o.m.csr, SPMV_PRECOND_IC0, 1)};
    spmv_precond_info info;
    spmv_precond_info_of(ps[0], &info);
    assert_true(info.levels >= 3);
    print_message("# apply_k: %d rows, amg of %d levels\n", n, info.levels);
    static const int32_t ks[3] = {1, 3, 8};
    bool mask[8] = {true, false, true, true, false, true, true, false};
    for (int t = 0; t < 7; t++) {
        assert_int_equal(spmv_precond_has_apply_k(ps[t]), t < 6);
        for (int d = 0; d < 2; d++)
            for (int c = 0; c < 3; c++) {
                spmv_dtype dt = d ? SPMV_FLOAT32 : SPMV_FLOAT64;
                check_apply_k(ps[t], n, ks[c], dt, NULL);
                check_apply_k(ps[t], n, ks[c], dt, mask);
            }
    }
    spmv_vec r, z;
    assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, SPMV_FLOAT64, n, 3, &r, &err), SPMV_OK);
    assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, SPMV_FLOAT64, n, 2, &z, &err), SPMV_OK);
    assert_int_equal(spmv_precond_apply_k(NULL, ps[0], &r, &z, NULL, &err), SPMV_ERR_INVALID);
    assert_non_null(strstr(err.message, "the same number of columns"));
    spmv_vec_free(NULL, &r);
    spmv_vec_free(NULL, &z);
    for (int t = 0; t < 7; t++)
        spmv_precond_free(NULL, ps[t]);
    spmv_matrix_free(&o.m);
}

/* CG in lockstep (spmv_solve_block) with AMG on k = 3 and 8 columns, the
 * V-cycle through precond_k on the running columns at once: every column
 * converges (its true residual checked), with the iterations and the x
 * bits of its solve alone (spmv_solve, the one-column apply). */
static void test_block_amg(void **state)
{
    (void)state;
    spmv_error err = {0};
    op_ctx o;
    poisson(30 + tu_rng_range(&rng, 0, 20), SPMV_FLOAT64, &o.m);
    int32_t n = o.m.rows;
    spmv_precond *p = setup_amg(&o.m.csr, SPMV_AMG_CHEBYSHEV, 1);
    spmv_precond_binding bind = {NULL, p, {0}};
    spmv_linop a = {n, n, &o, apply_omp};
    for (int c = 0; c < 2; c++) {
        int32_t k = c ? 8 : 3;
        spmv_vec b, x, xj;
        assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, SPMV_FLOAT64, n, k, &b, &err), SPMV_OK);
        assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, SPMV_FLOAT64, n, k, &x, &err), SPMV_OK);
        assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, SPMV_FLOAT64, n, 1, &xj, &err), SPMV_OK);
        tu_random_vector(&rng, SPMV_FLOAT64, (int64_t)n * k, b.data);
        spmv_vec_fill(NULL, &x, 0.0, &err);
        /* the last column starts near its answer v (b = A v, x0 = v within 1e-6): it stops first, masked off
         * while the others go on */
        spmv_vec bl = {SPMV_DEVICE_CPU, SPMV_FLOAT64, n, 1, (double *)b.data + (size_t)(k - 1) * n};
        spmv_vec xl = {SPMV_DEVICE_CPU, SPMV_FLOAT64, n, 1, (double *)x.data + (size_t)(k - 1) * n};
        double ms;
        tu_random_vector(&rng, SPMV_FLOAT64, n, xl.data);
        assert_int_equal(apply_omp(&o, &xl, &bl, &ms, &err), SPMV_OK);
        for (int32_t i = 0; i < n; i++)
            ((double *)xl.data)[i] *= 1.0 + 1e-6 * tu_rng_value(&rng);
        double *x0 = malloc((size_t)n * sizeof *x0);
        memcpy(x0, xl.data, (size_t)n * sizeof *x0);
        spmv_solve_options so = {.method = SPMV_SOLVE_CG, .tol = 1e-10, .maxit = 500, .precond = spmv_precond_apply_cb,
                                 .precond_k = spmv_precond_apply_k_cb, .precond_ctx = &bind};
        spmv_solve_result *res = calloc((size_t)k, sizeof *res);
        assert_int_equal(spmv_solve_block(NULL, &a, &b, &x, &so, res, &err), SPMV_OK);
        so.precond_k = NULL;
        for (int32_t j = 0; j < k; j++) {
            spmv_vec bj = {SPMV_DEVICE_CPU, SPMV_FLOAT64, n, 1, (double *)b.data + (size_t)j * n};
            spmv_vec xk = {SPMV_DEVICE_CPU, SPMV_FLOAT64, n, 1, (double *)x.data + (size_t)j * n};
            spmv_solve_result one;
            spmv_vec_fill(NULL, &xj, 0.0, &err);
            if (j == k - 1)
                memcpy(xj.data, x0, (size_t)n * sizeof *x0);
            assert_int_equal(spmv_solve(NULL, &a, &bj, &xj, &so, &one, &err), SPMV_OK);
            spmv_vec r;
            double rn, bn;
            assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, SPMV_FLOAT64, n, 1, &r, &err), SPMV_OK);
            assert_int_equal(apply_omp(&o, &xk, &r, &ms, &err), SPMV_OK);
            assert_int_equal(spmv_vec_axpby(NULL, 1.0, &bj, -1.0, &r, &err), SPMV_OK);
            assert_int_equal(spmv_vec_nrm2(NULL, &r, &rn, &err), SPMV_OK);
            assert_int_equal(spmv_vec_nrm2(NULL, &bj, &bn, &err), SPMV_OK);
            print_message("# lockstep amg k=%d column %d: %d iterations (alone %d), relres %.3g\n", k, j,
                          res[j].iterations, one.iterations, rn / bn);
            assert_int_equal(res[j].stop, SPMV_STOP_CONVERGED);
            assert_true(rn <= 1e-10 * bn * 1.01);
            assert_int_equal(res[j].iterations, one.iterations);
            assert_true(memcmp(xk.data, xj.data, (size_t)n * 8) == 0);
            if (j == k - 1) /* it stopped before the others */
                assert_true(one.iterations < res[0].iterations);
            spmv_solve_result_free(&one);
            spmv_solve_result_free(&res[j]);
            spmv_vec_free(NULL, &r);
        }
        free(res);
        free(x0);
        spmv_vec_free(NULL, &b);
        spmv_vec_free(NULL, &x);
        spmv_vec_free(NULL, &xj);
    }
    spmv_precond_free(NULL, p);
    spmv_matrix_free(&o.m);
}

int main(void)
{
    tu_rng_init(&rng, tu_seed());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_types_converge),      cmocka_unit_test(test_amg_near_nullspace),
        cmocka_unit_test(test_nonsymmetric),
        cmocka_unit_test(test_block_jacobi_apply),  cmocka_unit_test(test_chebyshev_apply),
        cmocka_unit_test(test_factor_apply),        cmocka_unit_test(test_host_float32_option),
        cmocka_unit_test(test_vector_dtypes),
        cmocka_unit_test(test_refusals),            cmocka_unit_test(test_numerical_refusals),
        cmocka_unit_test(test_apply_k),             cmocka_unit_test(test_block_amg),
    };
    return cmocka_run_group_tests_name("precond", tests, NULL, NULL);
}
