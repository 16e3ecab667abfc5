/* test_amg.c — smoothed aggregation AMG on the host (engine/amg.c).
 *
 * The hierarchy is checked against its definition, recomputed here: each
 * level's R is P's transpose entry by entry, its coarse operator is the
 * reference SpMSpM's R*(A*P), P has one column per aggregate and
 * candidate, and the constant is interpolated exactly by the tentative
 * prolongator. The V-cycle is checked to be symmetric (<Mx, y> = <x, My>
 * on random x and y, both smoothers: CG needs it) and, as a preconditioner
 * of a plain CG written here, to converge to ||b - Ax|| / ||b|| <= 1e-8
 * in fewer iterations than Jacobi does, on 2-D Poisson, on a vector
 * Laplacian with block_size 3 and rigid-body candidates, and on the
 * shared real SPD matrix bcsstk13. Options out of range and a zero
 * diagonal are refused. The products hook (spmv_amg_setup_with) with the
 * host's products plugged in builds the hierarchy spmv_amg_setup does,
 * bit for bit, and a hook's failure comes back as the setup's; the
 * setup's phase times add up to no more than its total. The mis2
 * aggregation (spmv_amg_mis2, the GPU's) is checked against its
 * definition written here the plain way (explicit distance-2 balls), and
 * its AMG converges like the standard one's. Inputs are drawn afresh each
 * run (seed printed).
 */
#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "amg.h"
#include "spmv.h"
#include "testutil.h"

static tu_rng rng;

static void poisson_d(spmv_gen_kind kind, int64_t side, spmv_csr *a)
{
    spmv_gen_spec g = {kind, side, kind == SPMV_GEN_POISSON3D ? 7 : 5, 0, 1};
    spmv_coo coo;
    spmv_error err = {0};
    assert_int_equal(spmv_gen(&g, &coo, &err), SPMV_OK);
    assert_int_equal(spmv_coo_to_csr(&coo, SPMV_FLOAT64, a, &err), SPMV_OK);
    spmv_coo_free(&coo);
}

static void poisson(int64_t side, spmv_csr *a) { poisson_d(SPMV_GEN_POISSON2D, side, a); }

static void apply(const spmv_csr *a, const double *x, double *y)
{
    const double *v = a->val;
    for (int32_t i = 0; i < a->rows; i++) {
        double s = 0;
        for (int32_t p = a->row_ptr[i]; p < a->row_ptr[i + 1]; p++)
            s += v[p] * x[a->col[p]];
        y[i] = s;
    }
}

static double dot(const double *a, const double *b, int32_t n)
{
    double s = 0;
    for (int32_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* z = D^-1 r */
static void jacobi(const spmv_csr *a, const double *r, double *z)
{
    for (int32_t i = 0; i < a->rows; i++)
        for (int32_t e = a->row_ptr[i]; e < a->row_ptr[i + 1]; e++)
            if (a->col[e] == i)
                z[i] = r[i] / ((const double *)a->val)[e];
}

/* CG on a x = b preconditioned by the V-cycle of h (Jacobi when h is
 * NULL): the iterations to relres 1e-8, checked on the true residual. */
static int32_t pcg(const spmv_csr *a, spmv_amg *h, const double *b)
{
    int32_t n = a->rows, it;
    double *x = calloc((size_t)n, 8), *r = malloc((size_t)n * 8), *z = malloc((size_t)n * 8);
    double *p = calloc((size_t)n, 8), *q = malloc((size_t)n * 8), bn = sqrt(dot(b, b, n)), rz_old = 1;
    memcpy(r, b, (size_t)n * 8);
    for (it = 0; it < 5000 && sqrt(dot(r, r, n)) > 1e-8 * bn; it++) {
        if (h)
            spmv_amg_vcycle(h, r, z);
        else
            jacobi(a, r, z);
        double rz = dot(r, z, n);
        for (int32_t i = 0; i < n; i++)
            p[i] = z[i] + (it ? rz / rz_old : 0.0) * p[i];
        rz_old = rz;
        apply(a, p, q);
        double alpha = rz / dot(p, q, n);
        for (int32_t i = 0; i < n; i++) {
            x[i] += alpha * p[i];
            r[i] -= alpha * q[i];
        }
    }
    apply(a, x, q);
    double e = 0;
    for (int32_t i = 0; i < n; i++)
        e += (b[i] - q[i]) * (b[i] - q[i]);
    assert_true(sqrt(e) <= 1.01e-8 * bn);
    free(x);
    free(r);
    free(z);
    free(p);
    free(q);
    return it;
}

static double *random_vector(int32_t n)
{
    double *v = malloc((size_t)n * 8);
    for (int32_t i = 0; i < n; i++)
        v[i] = tu_rng_value(&rng);
    return v;
}

/* R = P^T entry by entry, A_c = R (A P) by the reference SpMSpM. */
static void check_level(const spmv_amg *h, int32_t l)
{
    const spmv_amg_level *lv = &h->lv[l], *next = &h->lv[l + 1];
    spmv_error err = {0};
    assert_int_equal(lv->P.rows, lv->A.rows);
    assert_int_equal(lv->P.cols, next->A.rows);
    assert_int_equal(lv->R.rows, lv->P.cols);
    assert_int_equal(lv->R.nnz, lv->P.nnz);
    for (int32_t i = 0; i < lv->P.rows; i++)
        for (int32_t p = lv->P.row_ptr[i]; p < lv->P.row_ptr[i + 1]; p++) {
            int32_t j = lv->P.col[p], q;
            for (q = lv->R.row_ptr[j]; q < lv->R.row_ptr[j + 1] && lv->R.col[q] != i; q++)
                ;
            assert_true(q < lv->R.row_ptr[j + 1]);
            assert_true(((double *)lv->R.val)[q] == ((double *)lv->P.val)[p]);
        }
    spmv_csr ap, rap;
    double rel;
    assert_int_equal(spmv_spmspm_reference(&lv->A, &lv->P, &ap, &err), SPMV_OK);
    assert_int_equal(spmv_spmspm_reference(&lv->R, &ap, &rap, &err), SPMV_OK);
    assert_int_equal(spmv_csr_compare(&next->A, &rap, &rel, &err), SPMV_OK);
    assert_true(rel <= 1e-12);
    spmv_csr_free(&ap);
    spmv_csr_free(&rap);
}

static void test_hierarchy(void **state)
{
    (void)state;
    spmv_csr a;
    spmv_amg *h;
    spmv_error err = {0};
    int64_t side = 48 + tu_rng_range(&rng, 0, 16);
    poisson(side, &a);
    spmv_amg_options o;
    spmv_amg_defaults(&o);
    o.max_coarse = 50;
    assert_int_equal(spmv_amg_setup(&a, &o, &h, &err), SPMV_OK);
    print_message("# poisson %lld^2: %d levels, coarse %d, operator complexity %.3f\n", (long long)side, h->nlevels,
                  h->coarse_n, h->operator_complexity);
    assert_true(h->nlevels >= 3);
    assert_true(h->coarse_n <= 50 && h->coarse_n > 0);
    assert_true(h->operator_complexity > 1.0 && h->operator_complexity < 2.0);
    for (int32_t l = 0; l + 1 < h->nlevels; l++) {
        assert_true(h->lv[l + 1].A.rows < h->lv[l].A.rows);
        check_level(h, l);
    }
    spmv_amg_free(h);
    spmv_csr_free(&a);
}

/* <M x, y> = <x, M y> within rounding: the V-cycle is symmetric. */
static void test_symmetric(void **state)
{
    (void)state;
    spmv_csr a;
    spmv_error err = {0};
    poisson(40 + tu_rng_range(&rng, 0, 10), &a);
    for (int s = 0; s < 2; s++) {
        spmv_amg_options o;
        spmv_amg *h;
        spmv_amg_defaults(&o);
        o.smoother = s ? SPMV_AMG_JACOBI : SPMV_AMG_CHEBYSHEV;
        o.degree = 2 + (int32_t)tu_rng_range(&rng, 0, 1);
        o.max_coarse = 30;
        assert_int_equal(spmv_amg_setup(&a, &o, &h, &err), SPMV_OK);
        double *x = random_vector(a.rows), *y = random_vector(a.rows);
        double *mx = malloc((size_t)a.rows * 8), *my = malloc((size_t)a.rows * 8);
        spmv_amg_vcycle(h, x, mx);
        spmv_amg_vcycle(h, y, my);
        double l = dot(mx, y, a.rows), r = dot(x, my, a.rows);
        print_message("# %s: <Mx,y> %.15g <x,My> %.15g\n", s ? "jacobi" : "chebyshev", l, r);
        assert_true(fabs(l - r) <= 1e-10 * fabs(l) + 1e-14);
        assert_true(dot(mx, x, a.rows) > 0); /* and positive */
        free(x);
        free(y);
        free(mx);
        free(my);
        spmv_amg_free(h);
    }
    spmv_csr_free(&a);
}

/* AMG-PCG converges, in 1/gain of Jacobi-PCG's iterations at most, to
 * the true residual asked for; its iterations. */
static int32_t converges_by(const char *what, const spmv_csr *a, const spmv_amg_options *o, int gain)
{
    spmv_amg *h;
    spmv_error err = {0};
    assert_int_equal(spmv_amg_setup(a, o, &h, &err), SPMV_OK);
    double *b = random_vector(a->rows);
    int32_t amg = pcg(a, h, b), jac = pcg(a, NULL, b);
    print_message("# %s (%d rows): %d levels, oc %.3f; AMG-PCG %d iterations, Jacobi-PCG %d\n", what, a->rows,
                  h->nlevels, h->operator_complexity, amg, jac);
    assert_true(gain * amg < jac);
    free(b);
    spmv_amg_free(h);
    return amg;
}

/* A problem with a grid: a quarter at most. */
static int32_t converges(const char *what, const spmv_csr *a, const spmv_amg_options *o)
{
    return converges_by(what, a, o, 4);
}

static void test_poisson_converges(void **state)
{
    (void)state;
    spmv_csr a;
    spmv_amg_options o;
    poisson(100 + tu_rng_range(&rng, 0, 28), &a);
    spmv_amg_defaults(&o);
    o.max_coarse = 100;
    /* no Chebyshev degree diverges: a spectral radius estimated low (power
     * iteration from a smooth start) made degree 3 amplify the modes past
     * its interval, 274 iterations where 11 do */
    for (int dim = 2; dim <= 3; dim++) {
        spmv_csr g;
        if (dim == 3)
            poisson_d(SPMV_GEN_POISSON3D, 24 + tu_rng_range(&rng, 0, 6), &g);
        int32_t first = 0;
        for (o.degree = 1; o.degree <= 4; o.degree++) {
            int32_t its = converges(dim == 2 ? "2-D Poisson, Chebyshev" : "3-D Poisson, Chebyshev", dim == 2 ? &a : &g,
                                    &o);
            first = first ? first : its;
            assert_true(its <= 2 * first);
        }
        if (dim == 3)
            spmv_csr_free(&g);
    }
    spmv_amg_defaults(&o);
    o.max_coarse = 100;
    o.smoother = SPMV_AMG_JACOBI;
    converges("2-D Poisson, Jacobi", &a, &o);
    spmv_csr_free(&a);
}

/* Three decoupled 2-D Poisson problems interleaved (a vector Laplacian):
 * block_size 3, with the rigid-body modes of the grid's nodes as the
 * near-nullspace (translations in it, rotations extra). */
static void test_blocks_converge(void **state)
{
    (void)state;
    spmv_csr s, a;
    spmv_error err = {0};
    int64_t side = 40 + tu_rng_range(&rng, 0, 8);
    poisson(side, &s);
    int32_t n = s.rows;
    spmv_coo coo;
    assert_int_equal(spmv_coo_alloc(&coo, 3 * n, 3 * n, 3 * s.nnz, SPMV_FLOAT64, &err), SPMV_OK);
    int64_t e = 0;
    for (int32_t i = 0; i < n; i++)
        for (int c = 0; c < 3; c++)
            for (int32_t p = s.row_ptr[i]; p < s.row_ptr[i + 1]; p++, e++) {
                coo.row[e] = 3 * i + c;
                coo.col[e] = 3 * s.col[p] + c;
                ((double *)coo.val)[e] = ((double *)s.val)[p] * (1.0 + c);
            }
    assert_int_equal(spmv_coo_to_csr(&coo, SPMV_FLOAT64, &a, &err), SPMV_OK);
    double *xyz = malloc((size_t)n * 3 * 8), *ns = malloc((size_t)n * 18 * 8);
    for (int32_t i = 0; i < n; i++) {
        xyz[3 * i] = (double)(i % side) / (double)side;
        xyz[3 * i + 1] = (double)(i / side) / (double)side;
        xyz[3 * i + 2] = 0.0;
    }
    spmv_amg_rigid_body(n, xyz, ns);
    assert_true(ns[0] == 1.0 && ns[9 * n + 0] == -xyz[1] && ns[9 * n + 1] == xyz[0]); /* x-translation, z-rotation */
    spmv_amg_options o;
    spmv_amg_defaults(&o);
    o.block_size = 3;
    o.max_coarse = 60;
    converges("vector Laplacian, block 3", &a, &o);
    o.near_nullspace = ns;
    o.nullspace_k = 6;
    converges("vector Laplacian, block 3, rigid-body modes", &a, &o);
    free(xyz);
    free(ns);
    spmv_coo_free(&coo);
    spmv_csr_free(&s);
    spmv_csr_free(&a);
}

static void test_real_spd(void **state)
{
    (void)state;
    char path[4096];
    spmv_coo coo;
    spmv_csr a;
    spmv_error err = {0};
    tu_matrices_path(path, sizeof path, "real/bcsstk13.mtx");
    assert_int_equal(spmv_mm_read_file(path, NULL, &coo, NULL, &err), SPMV_OK);
    assert_int_equal(spmv_coo_to_csr(&coo, SPMV_FLOAT64, &a, &err), SPMV_OK);
    spmv_amg_options o;
    spmv_amg_defaults(&o);
    o.max_coarse = 100;
    converges_by("bcsstk13", &a, &o, 2); /* a shell structure, scalar AMG: 3.5 times fewer */
    spmv_coo_free(&coo);
    spmv_csr_free(&a);
}

static void test_refusals(void **state)
{
    (void)state;
    spmv_csr a;
    spmv_amg *h = NULL;
    spmv_error err = {0};
    spmv_amg_options o;
    poisson(10, &a);
    struct { const char *what; int32_t *field; int32_t value; } bad[] = {
        {"max_levels", &o.max_levels, 0}, {"max_coarse", &o.max_coarse, 0}, {"degree", &o.degree, 11},
        {"presmooth", &o.presmooth, -1},  {"block_size", &o.block_size, 3}, /* 100 rows: not a multiple of 3 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        spmv_amg_defaults(&o);
        *bad[i].field = bad[i].value;
        assert_int_equal(spmv_amg_setup(&a, &o, &h, &err), SPMV_ERR_INVALID);
        assert_null(h);
        assert_non_null(strstr(err.message, bad[i].what == bad[4].what ? "multiple of block_size" : bad[i].what));
    }
    spmv_amg_defaults(&o);
    o.strength = 1.5;
    assert_int_equal(spmv_amg_setup(&a, &o, &h, &err), SPMV_ERR_INVALID);
    ((double *)a.val)[a.row_ptr[7]] = 0.0; /* row 7's first entry is not its diagonal in 2-D Poisson: find it */
    for (int32_t p = a.row_ptr[7]; p < a.row_ptr[8]; p++)
        if (a.col[p] == 7)
            ((double *)a.val)[p] = 0.0;
    assert_int_equal(spmv_amg_setup(&a, NULL, &h, &err), SPMV_ERR_INVALID);
    assert_non_null(strstr(err.message, "row 7"));
    spmv_csr_free(&a);
}

/* The host's products behind the hook, counting its calls; fails with
 * SPMV_ERR_DEVICE on call `fail_at` (0: never). */
typedef struct hook_state {
    int calls, fail_at;
} hook_state;

static int counting_products(void *arg, const spmv_csr *A, const double *dinv, double omega, const spmv_csr *T,
                             spmv_csr *P, spmv_csr *R, spmv_csr *Ac, double *ms, spmv_error *err)
{
    hook_state *s = arg;
    int st = spmv_amg_host_products(NULL, A, dinv, omega, T, P, R, Ac, ms, err);
    if (++s->calls == s->fail_at && !st)
        st = spmv_error_set(err, SPMV_ERR_DEVICE, 0, "hook failed on purpose");
    return st;
}

static void assert_csr_identical(const spmv_csr *a, const spmv_csr *b)
{
    assert_int_equal(a->rows, b->rows);
    assert_int_equal(a->cols, b->cols);
    assert_int_equal(a->nnz, b->nnz);
    if (!a->row_ptr) {
        assert_null(b->row_ptr);
        return;
    }
    assert_memory_equal(a->row_ptr, b->row_ptr, ((size_t)a->rows + 1) * sizeof(int32_t));
    assert_memory_equal(a->col, b->col, (size_t)a->nnz * sizeof(int32_t));
    assert_memory_equal(a->val, b->val, (size_t)a->nnz * sizeof(double));
}

/* h and ref the same hierarchy, bit for bit. */
static void assert_same_hierarchy(const spmv_amg *h, const spmv_amg *ref)
{
    assert_int_equal(h->nlevels, ref->nlevels);
    for (int32_t l = 0; l < h->nlevels; l++) {
        assert_csr_identical(&h->lv[l].A, &ref->lv[l].A);
        assert_csr_identical(&h->lv[l].P, &ref->lv[l].P);
        assert_csr_identical(&h->lv[l].R, &ref->lv[l].R);
        assert_memory_equal(h->lv[l].dinv, ref->lv[l].dinv, (size_t)h->lv[l].A.rows * sizeof(double));
        assert_true(h->lv[l].rho == ref->lv[l].rho);
    }
    assert_int_equal(h->coarse_n, ref->coarse_n);
    assert_memory_equal(h->coarse_inv, ref->coarse_inv, (size_t)h->coarse_n * h->coarse_n * sizeof(double));
}

/* The hook with the host's products gives spmv_amg_setup's hierarchy. */
static void hook_matches(const char *what, const spmv_csr *a, const spmv_amg_options *o)
{
    spmv_amg *ref, *h;
    spmv_error err = {0};
    hook_state s = {0, 0};
    spmv_amg_products prod = {counting_products, &s};
    assert_int_equal(spmv_amg_setup(a, o, &ref, &err), SPMV_OK);
    assert_int_equal(spmv_amg_setup_with(a, o, &prod, &h, &err), SPMV_OK);
    print_message("# %s: %d levels, %d hook calls, setup %.1f ms (hook) %.1f ms (plain)\n", what, h->nlevels, s.calls,
                  h->setup_ms, ref->setup_ms);
    assert_same_hierarchy(h, ref);
    assert_int_equal(s.calls, h->nlevels - 1);
    double sum = 0;
    for (int p = 0; p < SPMV_AMG_PHASES; p++) {
        assert_true(h->phase_ms[p] >= 0.0);
        assert_non_null(spmv_amg_phase_name((spmv_amg_phase)p));
        sum += h->phase_ms[p];
    }
    assert_true(sum <= h->setup_ms + 1e-6);
    assert_true(h->phase_ms[SPMV_AMG_COPY] == 0.0); /* the host's products copy nothing */
    spmv_amg_free(h);
    spmv_amg_free(ref);
}

static void test_products_hook(void **state)
{
    (void)state;
    spmv_csr a;
    spmv_amg_options o;
    spmv_amg_defaults(&o);
    o.max_coarse = 50;
    poisson_d(SPMV_GEN_POISSON3D, 12 + tu_rng_range(&rng, 0, 6), &a);
    hook_matches("poisson 3-D", &a, &o);
    spmv_csr_free(&a);
    poisson(40 + tu_rng_range(&rng, 0, 16), &a);
    o.strength = 0.1;
    hook_matches("poisson 2-D, strength 0.1", &a, &o);
    /* a hook failing on the second level: its error is the setup's,
     * nothing is left (the sanitizer build checks the leaks) */
    spmv_amg *h = (spmv_amg *)&a;
    spmv_error err = {0};
    hook_state s = {0, 2};
    spmv_amg_products prod = {counting_products, &s};
    assert_int_equal(spmv_amg_setup_with(&a, &o, &prod, &h, &err), SPMV_ERR_DEVICE);
    assert_int_equal(s.calls, 2);
    assert_null(h);
    assert_non_null(strstr(err.message, "on purpose"));
    spmv_csr_free(&a);
}

/* The setup's parallel passes (the strength graph, the Lanczos loops of
 * rho, the products) give the same hierarchy, bit for bit, on one thread
 * as on several: a 3-D Poisson matrix past every pass's threshold for
 * going parallel (over 131 072 rows: the dot products' chunks too), with
 * blocks of 1 and of 2 rows a node. */
static void test_thread_counts(void **state)
{
    (void)state;
    spmv_csr a;
    spmv_error err = {0};
    poisson_d(SPMV_GEN_POISSON3D, 52 + 2 * tu_rng_range(&rng, 0, 2), &a); /* an even side: blocks of 2 divide it */
    int nt = omp_get_max_threads();
    for (int32_t b = 1; b <= 2; b++) {
        spmv_amg_options o;
        spmv_amg_defaults(&o);
        o.max_coarse = 100;
        o.block_size = b;
        spmv_amg *one, *many;
        omp_set_num_threads(1);
        assert_int_equal(spmv_amg_setup(&a, &o, &one, &err), SPMV_OK);
        omp_set_num_threads(nt > 1 ? nt : 3); /* more threads than cores, if need be */
        assert_int_equal(spmv_amg_setup(&a, &o, &many, &err), SPMV_OK);
        omp_set_num_threads(nt);
        print_message("# %d rows, blocks of %d: %d levels on 1 thread and on %d, %.1f and %.1f ms\n", a.rows, b,
                      one->nlevels, nt > 1 ? nt : 3, one->setup_ms, many->setup_ms);
        assert_same_hierarchy(many, one);
        spmv_amg_free(one);
        spmv_amg_free(many);
    }
    spmv_csr_free(&a);
}

/* ------------------------------------------------------------- mis2 */

/* A random symmetric graph of n nodes (degree about deg, some isolated)
 * as CSR (sorted, no self-loops). */
static void random_graph(int32_t n, int32_t deg, int32_t **ptr, int32_t **adj)
{
    int32_t m = 0, *e = malloc((size_t)n * deg * 2 * 2 * sizeof *e), *cnt = calloc((size_t)n + 1, sizeof *cnt);
    for (int32_t k = 0; k < n * deg / 2; k++) {
        int32_t i = (int32_t)tu_rng_range(&rng, 0, n - 1), j = (int32_t)tu_rng_range(&rng, 0, n - 1);
        if (i == j || i % 17 == 5 || j % 17 == 5) /* every 17th node isolated */
            continue;
        e[2 * m] = i, e[2 * m + 1] = j, m++;
        e[2 * m] = j, e[2 * m + 1] = i, m++;
    }
    char *seen = calloc((size_t)n * n, 1); /* n stays small here */
    int32_t *p = calloc((size_t)n + 1, sizeof *p), *a = malloc((size_t)m * sizeof *a + 4);
    for (int32_t k = 0; k < m; k++)
        if (!seen[(size_t)e[2 * k] * n + e[2 * k + 1]]++)
            cnt[e[2 * k]]++;
    for (int32_t i = 0; i < n; i++)
        p[i + 1] = p[i] + cnt[i];
    int32_t q = 0;
    for (int32_t i = 0; i < n; i++)
        for (int32_t j = 0; j < n; j++)
            if (seen[(size_t)i * n + j])
                a[q++] = j;
    free(e);
    free(cnt);
    free(seen);
    *ptr = p;
    *adj = a;
}

/* mis2 by its definition, written the plain way: each round, an
 * undecided node whose key is the largest over its explicit distance-2
 * ball becomes a root, one with a root in its ball leaves. */
static void mis2_reference(int32_t n, const int32_t *ptr, const int32_t *adj, int32_t *agg, int32_t *naggs)
{
    uint32_t *st = malloc((size_t)n * sizeof *st), *nx = malloc((size_t)n * sizeof *nx);
    for (int32_t i = 0; i < n; i++)
        st[i] = ptr[i + 1] > ptr[i] ? 1 : 0;
    for (bool left = true; left;) {
        left = false;
        memcpy(nx, st, (size_t)n * sizeof *nx);
        for (int32_t i = 0; i < n; i++) {
            if (st[i] != 1)
                continue;
            uint64_t best = 0;
            for (int32_t p = ptr[i] - 1; p < ptr[i + 1]; p++) { /* i itself, then its neighbours and theirs */
                int32_t j = p < ptr[i] ? i : adj[p];
                uint64_t kj = spmv_amg_mis2_key(st[j], j);
                best = kj > best ? kj : best;
                for (int32_t q = ptr[j]; q < ptr[j + 1]; q++)
                    best = spmv_amg_mis2_key(st[adj[q]], adj[q]) > best ? spmv_amg_mis2_key(st[adj[q]], adj[q]) : best;
            }
            if (best == spmv_amg_mis2_key(1, i))
                nx[i] = 2;
            else if (best >> 62 == 2)
                nx[i] = 0;
            else
                left = true;
        }
        memcpy(st, nx, (size_t)n * sizeof *st);
    }
    int32_t next = 0, *a1 = malloc((size_t)n * sizeof *a1);
    for (int32_t i = 0; i < n; i++)
        agg[i] = st[i] == 2 ? next++ : ptr[i + 1] > ptr[i] ? -2 : -1;
    for (int round = 0; round < 2; round++) {
        memcpy(a1, agg, (size_t)n * sizeof *a1);
        for (int32_t i = 0; i < n; i++) {
            int32_t best = -1;
            for (int32_t p = ptr[i]; p < ptr[i + 1] && a1[i] == -2; p++)
                if (a1[adj[p]] >= 0 && (best < 0 || spmv_amg_mis2_key(0, adj[p]) > spmv_amg_mis2_key(0, best)))
                    best = adj[p];
            if (best >= 0)
                agg[i] = a1[best];
        }
    }
    for (int32_t i = 0; i < n; i++)
        agg[i] = agg[i] == -2 ? next++ : agg[i];
    *naggs = next;
    free(a1);
    free(st);
    free(nx);
}

/* spmv_amg_mis2 against the reference on random graphs; every aggregate
 * connected, within distance 2 of its first node's root. */
static void test_mis2(void **state)
{
    (void)state;
    for (int c = 0; c < 6; c++) {
        int32_t n = 50 + (int32_t)tu_rng_range(&rng, 0, 1500), deg = 1 + (int32_t)tu_rng_range(&rng, 0, 8), *ptr, *adj;
        random_graph(n, deg, &ptr, &adj);
        int32_t *agg = malloc((size_t)n * sizeof *agg), *ref = malloc((size_t)n * sizeof *ref), na, nr, rounds;
        spmv_error err = {0};
        assert_int_equal(spmv_amg_mis2(n, ptr, adj, agg, &na, &rounds, &err), SPMV_OK);
        mis2_reference(n, ptr, adj, ref, &nr);
        print_message("# mis2: %d nodes, degree ~%d: %d aggregates in %d rounds\n", n, deg, na, rounds);
        assert_int_equal(na, nr);
        assert_memory_equal(agg, ref, (size_t)n * sizeof *agg);
        int32_t *size = calloc((size_t)na + 1, sizeof *size);
        for (int32_t i = 0; i < n; i++) {
            assert_true(agg[i] >= -1 && agg[i] < na);
            assert_true((agg[i] == -1) == (ptr[i + 1] == ptr[i]));
            if (agg[i] >= 0)
                size[agg[i]]++;
        }
        for (int32_t a = 0; a < na; a++)
            assert_true(size[a] > 0);
        free(size);
        free(agg);
        free(ref);
        free(ptr);
        free(adj);
    }
}

/* AMG with mis2 aggregation: converges like the standard one, and the
 * same hierarchy whatever the number of threads. */
static void test_mis2_converges(void **state)
{
    (void)state;
    spmv_csr a;
    spmv_error err = {0};
    poisson_d(SPMV_GEN_POISSON3D, 24 + tu_rng_range(&rng, 0, 8), &a);
    spmv_amg_options o;
    spmv_amg_defaults(&o);
    o.max_coarse = 100;
    int32_t standard = converges("3-D Poisson, standard aggregation", &a, &o);
    o.aggregation = SPMV_AMG_AGG_MIS2;
    int32_t mis2 = converges("3-D Poisson, mis2 aggregation", &a, &o);
    assert_true(mis2 <= 2 * standard);
    spmv_amg *one, *many;
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    assert_int_equal(spmv_amg_setup(&a, &o, &one, &err), SPMV_OK);
    omp_set_num_threads(nt > 1 ? nt : 3);
    assert_int_equal(spmv_amg_setup(&a, &o, &many, &err), SPMV_OK);
    omp_set_num_threads(nt);
    assert_int_equal(one->o.aggregation, SPMV_AMG_AGG_MIS2);
    assert_same_hierarchy(many, one);
    spmv_amg_free(one);
    spmv_amg_free(many);
    o.aggregation = (spmv_amg_aggregation)7;
    assert_int_equal(spmv_amg_setup(&a, &o, &one, &err), SPMV_ERR_INVALID);
    spmv_csr_free(&a);
}

int main(void)
{
    uint64_t seed = tu_seed();
    tu_rng_init(&rng, seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hierarchy),       cmocka_unit_test(test_symmetric),
        cmocka_unit_test(test_poisson_converges), cmocka_unit_test(test_blocks_converge),
        cmocka_unit_test(test_real_spd),        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_products_hook),   cmocka_unit_test(test_thread_counts),
        cmocka_unit_test(test_mis2),            cmocka_unit_test(test_mis2_converges),
    };
    return cmocka_run_group_tests_name("amg", tests, NULL, NULL);
}
