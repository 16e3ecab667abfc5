/* test_krylov.c — host vectors, BLAS-1, products with resident operands,
 * k-column products, the transpose and the Krylov solvers (engine/blas.c,
 * engine/cpu/apply.c, engine/krylov.c).
 *
 * Inputs are drawn afresh each run (seed printed). BLAS-1 calls are checked
 * against plain loops in float64, the k-column calls of the lockstep
 * (spmv_vec_*_k) against the one-column calls on each column, bit for bit; apply with alpha/beta, k columns and Aᵀ
 * against products computed here from the COO triplets, with the outputs
 * poisoned first; the solvers by the true residual ||b - A x|| / ||b||
 * computed here and the distance to a known x_true, on generated 2-D
 * Poisson matrices (SPD), a non-symmetric one and a shifted, symmetric
 * indefinite one (MINRES), plus every stop reason (converged, maxit,
 * breakdown, cancelled) and the refusals. Small work stays serial: under
 * spmv_cpu_serial_below() values dot and nrm2 are the in-order sums bit
 * for bit and cpu.csr.omp's team is one thread, and the threshold is the
 * calling thread's alone.
 */
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "krylov.h"
#include "spmv.h"
#include "testutil.h"

static tu_rng rng;

static void hv(spmv_dtype dt, int64_t n, int32_t k, spmv_vec *v)
{
    spmv_error err = {0};
    assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, dt, n, k, v, &err), SPMV_OK);
    tu_random_vector(&rng, dt, n * k, v->data);
}

static double at(const spmv_vec *v, int64_t i)
{
    return v->dtype == SPMV_FLOAT64 ? ((double *)v->data)[i] : ((float *)v->data)[i];
}

static void test_blas1(void **state)
{
    (void)state;
    spmv_error err = {0};
    for (int d = 0; d < 2; d++) {
        spmv_dtype dt = d ? SPMV_FLOAT32 : SPMV_FLOAT64;
        double tol = d ? 1e-5 : 1e-13;
        for (int32_t k = 1; k <= 3; k += 2) {
            int64_t n = 1000 + tu_rng_range(&rng, 0, 500);
            spmv_vec x, y, y0;
            hv(dt, n, k, &x);
            hv(dt, n, k, &y);
            hv(dt, n, k, &y0);
            memcpy(y0.data, y.data, spmv_vec_bytes(&y));
            double a = tu_rng_value(&rng), b = tu_rng_value(&rng);
            assert_int_equal(spmv_vec_axpby(NULL, a, &x, b, &y, &err), SPMV_OK);
            for (int64_t i = 0; i < n * k; i++)
                assert_true(fabs(at(&y, i) - (a * at(&x, i) + b * at(&y0, i))) <= tol * 4);
            memcpy(y.data, y0.data, spmv_vec_bytes(&y));
            assert_int_equal(spmv_vec_axpy(NULL, a, &x, &y, &err), SPMV_OK);
            for (int64_t i = 0; i < n * k; i++)
                assert_true(fabs(at(&y, i) - (a * at(&x, i) + at(&y0, i))) <= tol * 4);
            double dots[3], norms[3];
            assert_int_equal(spmv_vec_dot(NULL, &x, &y0, dots, &err), SPMV_OK);
            assert_int_equal(spmv_vec_nrm2(NULL, &x, norms, &err), SPMV_OK);
            for (int32_t j = 0; j < k; j++) {
                double s = 0, q = 0;
                for (int64_t i = 0; i < n; i++) {
                    s += at(&x, j * n + i) * at(&y0, j * n + i);
                    q += at(&x, j * n + i) * at(&x, j * n + i);
                }
                assert_true(fabs(dots[j] - s) <= 1e-12 * (fabs(s) + sqrt(q) * n));
                assert_true(fabs(norms[j] - sqrt(q)) <= 1e-12 * sqrt(q));
            }
            assert_int_equal(spmv_vec_scal(NULL, 2.0, &y, &err), SPMV_OK);
            assert_int_equal(spmv_vec_copy(NULL, &x, &y, &err), SPMV_OK);
            assert_memory_equal(x.data, y.data, spmv_vec_bytes(&x));
            assert_int_equal(spmv_vec_mul(NULL, &x, &y, &err), SPMV_OK);
            for (int64_t i = 0; i < n * k; i++)
                assert_true(fabs(at(&y, i) - at(&x, i) * at(&x, i)) <= tol);
            assert_int_equal(spmv_vec_fill(NULL, &y, 2.5, &err), SPMV_OK);
            for (int64_t i = 0; i < n * k; i++)
                assert_true(at(&y, i) == 2.5);
            /* the same seed gives the same values; columns differ */
            assert_int_equal(spmv_vec_fill_random(NULL, &y, 77, &err), SPMV_OK);
            assert_int_equal(spmv_vec_fill_random(NULL, &y0, 77, &err), SPMV_OK);
            assert_memory_equal(y.data, y0.data, spmv_vec_bytes(&y));
            if (k > 1)
                assert_true(at(&y, 0) != at(&y, n));
            /* refusals: shape and dtype, named */
            spmv_vec z;
            hv(dt, n + 1, k, &z);
            assert_int_equal(spmv_vec_copy(NULL, &x, &z, &err), SPMV_ERR_SHAPE);
            assert_non_null(strstr(err.message, "values"));
            spmv_vec_free(NULL, &z);
            hv(d ? SPMV_FLOAT64 : SPMV_FLOAT32, n, k, &z);
            assert_int_equal(spmv_vec_dot(NULL, &x, &z, dots, &err), SPMV_ERR_INVALID);
            assert_non_null(strstr(err.message, "float"));
            spmv_vec_free(NULL, &z);
            spmv_vec_free(NULL, &x);
            spmv_vec_free(NULL, &y);
            spmv_vec_free(NULL, &y0);
        }
    }
    /* nrm2 of huge values does not overflow */
    spmv_vec h;
    assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, SPMV_FLOAT64, 4, 1, &h, &err), SPMV_OK);
    spmv_vec_fill(NULL, &h, 1e300, &err);
    double nn;
    spmv_vec_nrm2(NULL, &h, &nn, &err);
    assert_true(fabs(nn - 2e300) < 1e285);
    spmv_vec_free(NULL, &h);
}

/* Column j of v as a one-column vector. */
static spmv_vec column_of(const spmv_vec *v, int32_t j)
{
    spmv_vec c = *v;
    c.k = 1;
    c.data = (char *)v->data + (size_t)j * (size_t)v->n * spmv_dtype_size(v->dtype);
    return c;
}

/* The k-column calls of the lockstep (spmv_vec_*_k) against the
 * one-column calls on each column, bit for bit: random n and k, a random
 * mask (masked columns keep their poison, reductions give 0 there), the
 * outputs poisoned with NaN where the call must not read them. */
static void test_blas_k(void **state)
{
    (void)state;
    spmv_error err = {0};
    for (int round = 0; round < 6; round++) {
        spmv_dtype dt = round % 2 ? SPMV_FLOAT32 : SPMV_FLOAT64;
        int64_t n = round == 0 ? 0 : 1 + tu_rng_range(&rng, 0, round < 4 ? 3000 : 200000);
        int32_t k = round == 5 ? SPMV_MAX_K : 1 + (int32_t)tu_rng_range(&rng, 0, 9);
        bool on[SPMV_MAX_K];
        double al[SPMV_MAX_K], be[SPMV_MAX_K];
        int32_t non = 0;
        for (int32_t j = 0; j < k; j++) {
            on[j] = k == 1 || tu_rng_range(&rng, 0, 3) > 0;
            non += on[j];
            al[j] = tu_rng_value(&rng);
            be[j] = j % 3 == 0 ? 0.0 : tu_rng_value(&rng); /* 0: y not read */
        }
        print_message("# blas_k: %s, n %lld, k %d, %d columns on\n", spmv_dtype_name(dt), (long long)n, k, non);
        spmv_vec x, y, y1, d, want;
        hv(dt, n, k, &x);
        hv(dt, n, k, &y);
        hv(dt, n, k, &y1);
        hv(dt, n, k, &want);
        hv(dt, n, 1, &d);
        /* axpy_k: y_j += alpha_j x_j */
        memcpy(y1.data, y.data, spmv_vec_bytes(&y));
        memcpy(want.data, y.data, spmv_vec_bytes(&y));
        assert_int_equal(spmv_vec_axpy_k(NULL, al, &x, &y1, on, &err), SPMV_OK);
        for (int32_t j = 0; j < k; j++)
            if (on[j]) {
                spmv_vec xj = column_of(&x, j), wj = column_of(&want, j);
                assert_int_equal(spmv_vec_axpy(NULL, al[j], &xj, &wj, &err), SPMV_OK);
            }
        assert_memory_equal(y1.data, want.data, spmv_vec_bytes(&y));
        /* xpay_k: y_j = x_j + beta_j y_j; beta_j 0 reads no y (poisoned) */
        memcpy(y1.data, y.data, spmv_vec_bytes(&y));
        for (int32_t j = 0; j < k; j++)
            if (be[j] == 0.0) {
                spmv_vec yj = column_of(&y1, j);
                spmv_vec_fill(NULL, &yj, NAN, &err);
            }
        memcpy(want.data, y1.data, spmv_vec_bytes(&y));
        assert_int_equal(spmv_vec_xpay_k(NULL, &x, be, &y1, on, &err), SPMV_OK);
        for (int32_t j = 0; j < k; j++)
            if (on[j]) {
                spmv_vec xj = column_of(&x, j), wj = column_of(&want, j);
                assert_int_equal(spmv_vec_axpby(NULL, 1.0, &xj, be[j], &wj, &err), SPMV_OK);
            }
        assert_memory_equal(y1.data, want.data, spmv_vec_bytes(&y));
        /* diag_k: y_j = d .* x_j into a poisoned y, then in place */
        spmv_vec_fill(NULL, &y1, NAN, &err);
        spmv_vec_fill(NULL, &want, NAN, &err);
        assert_int_equal(spmv_vec_diag_k(NULL, &d, &x, &y1, on, &err), SPMV_OK);
        for (int32_t j = 0; j < k; j++)
            if (on[j]) {
                spmv_vec xj = column_of(&x, j), wj = column_of(&want, j);
                assert_int_equal(spmv_vec_copy(NULL, &xj, &wj, &err), SPMV_OK);
                assert_int_equal(spmv_vec_mul(NULL, &d, &wj, &err), SPMV_OK);
            }
        assert_memory_equal(y1.data, want.data, spmv_vec_bytes(&y));
        memcpy(y1.data, x.data, spmv_vec_bytes(&x));
        assert_int_equal(spmv_vec_diag_k(NULL, &d, &y1, &y1, NULL, &err), SPMV_OK);
        for (int32_t j = 0; j < k; j++) {
            spmv_vec xj = column_of(&x, j), wj = column_of(&want, j);
            spmv_vec_copy(NULL, &xj, &wj, &err);
            spmv_vec_mul(NULL, &d, &wj, &err);
        }
        assert_memory_equal(y1.data, want.data, spmv_vec_bytes(&y));
        /* dot_k and nrm2_dot_k: the one-column numbers, 0 where masked */
        double dk[SPMV_MAX_K], nk[SPMV_MAX_K], dk2[SPMV_MAX_K], nk1[SPMV_MAX_K];
        for (int32_t j = 0; j < k; j++)
            dk[j] = nk[j] = dk2[j] = nk1[j] = NAN;
        assert_int_equal(spmv_vec_dot_k(NULL, &x, &y, on, dk, &err), SPMV_OK);
        assert_int_equal(spmv_vec_nrm2_dot_k(NULL, &x, &y, on, nk, dk2, &err), SPMV_OK);
        assert_int_equal(spmv_vec_nrm2_dot_k(NULL, &x, NULL, on, nk1, NULL, &err), SPMV_OK);
        for (int32_t j = 0; j < k; j++) {
            spmv_vec xj = column_of(&x, j), yj = column_of(&y, j);
            double dw = 0.0, nw = 0.0;
            if (on[j]) {
                assert_int_equal(spmv_vec_dot(NULL, &xj, &yj, &dw, &err), SPMV_OK);
                assert_int_equal(spmv_vec_nrm2(NULL, &xj, &nw, &err), SPMV_OK);
            }
            assert_memory_equal(&dk[j], &dw, sizeof dw);
            assert_memory_equal(&dk2[j], &dw, sizeof dw);
            assert_memory_equal(&nk[j], &nw, sizeof nw);
            assert_memory_equal(&nk1[j], &nw, sizeof nw);
        }
        /* refusals: a diagonal of two columns, of another length; no scalars */
        spmv_vec d2;
        hv(dt, n, 2, &d2);
        assert_int_equal(spmv_vec_diag_k(NULL, &d2, &x, &y1, on, &err), SPMV_ERR_SHAPE);
        assert_non_null(strstr(err.message, "diag_k"));
        spmv_vec_free(NULL, &d2);
        hv(dt, n + 1, 1, &d2);
        assert_int_equal(spmv_vec_diag_k(NULL, &d2, &x, &y1, on, &err), SPMV_ERR_SHAPE);
        spmv_vec_free(NULL, &d2);
        assert_int_equal(spmv_vec_axpy_k(NULL, NULL, &x, &y1, on, &err), SPMV_ERR_INVALID);
        if (n > 0) {
            assert_int_equal(spmv_vec_xpay_k(NULL, &x, be, &x, on, &err), SPMV_ERR_INVALID);
            assert_non_null(strstr(err.message, "one block"));
        }
        assert_int_equal(spmv_vec_nrm2_dot_k(NULL, &x, &y, on, nk, NULL, &err), SPMV_ERR_INVALID);
        spmv_vec_free(NULL, &x);
        spmv_vec_free(NULL, &y);
        spmv_vec_free(NULL, &y1);
        spmv_vec_free(NULL, &want);
        spmv_vec_free(NULL, &d);
    }
}

/* y = A x straight from the COO (float64). */
static void coo_product(const spmv_coo *a, bool trans, const spmv_vec *x, int32_t col, double *y)
{
    int64_t ny = trans ? a->cols : a->rows, nx = trans ? a->rows : a->cols;
    for (int64_t i = 0; i < ny; i++)
        y[i] = 0;
    for (int64_t p = 0; p < a->nnz; p++) {
        double v = ((double *)a->val)[p];
        int32_t r = a->row[p], c = a->col[p];
        if (trans)
            y[c] += v * at(x, (int64_t)col * nx + r);
        else
            y[r] += v * at(x, (int64_t)col * nx + c);
    }
}

static void *other_thread_threshold(void *arg)
{
    *(int64_t *)arg = spmv_cpu_serial_below();
    return NULL;
}

/* Below the threshold a host loop runs alone, in order: dot is the plain
 * in-order float64 sum and nrm2 the scaled one, bit for bit (a team of two
 * splits the sum in halves, which rounds differently on random values), and
 * a CPU kernel at the default thread count gets one thread. */
static void test_small_work_serial(void **state)
{
    (void)state;
    spmv_error err = {0};
    assert_int_equal(spmv_cpu_serial_below(), SPMV_SERIAL_BELOW_DEFAULT);
    int64_t n = tu_rng_range(&rng, 1000, 50000);
    spmv_vec x, y;
    hv(SPMV_FLOAT64, n, 1, &x);
    hv(SPMV_FLOAT64, n, 1, &y);
    double want = 0.0, amax = 0.0, ss = 0.0, got, norm;
    for (int64_t i = 0; i < n; i++) {
        want += at(&x, i) * at(&y, i);
        amax = fmax(amax, fabs(at(&x, i)));
    }
    for (int64_t i = 0; i < n; i++)
        ss += (at(&x, i) / amax) * (at(&x, i) / amax);
    spmv_cpu_set_serial_below(n + 1);
    assert_int_equal(spmv_vec_dot(NULL, &x, &y, &got, &err), SPMV_OK);
    assert_memory_equal(&got, &want, sizeof got);
    assert_int_equal(spmv_vec_nrm2(NULL, &x, &norm, &err), SPMV_OK);
    double want_norm = amax * sqrt(ss);
    assert_memory_equal(&norm, &want_norm, sizeof norm);
    /* the kernels' team: one thread under it, the whole team from it, an explicit count obeyed */
    assert_int_equal(spmv_cpu_threads(0, n), 1);
    assert_int_equal(spmv_cpu_threads(0, n + 1), omp_get_max_threads());
    assert_int_equal(spmv_cpu_threads(3, n), 3);
    spmv_cpu_set_serial_below(0); /* never serial */
    assert_int_equal(spmv_cpu_threads(0, 1), omp_get_max_threads());
    assert_int_equal(spmv_vec_dot(NULL, &x, &y, &got, &err), SPMV_OK);
    assert_true(fabs(got - want) <= 1e-12 * (fabs(want) + 1.0));
    /* another thread keeps the default: the setting is this thread's */
    int64_t other = -1;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, other_thread_threshold, &other), 0);
    pthread_join(t, NULL);
    assert_int_equal(other, SPMV_SERIAL_BELOW_DEFAULT);
    spmv_cpu_set_serial_below(-5);
    assert_int_equal(spmv_cpu_serial_below(), 0);
    spmv_cpu_set_serial_below(SPMV_SERIAL_BELOW_DEFAULT);
    spmv_vec_free(NULL, &x);
    spmv_vec_free(NULL, &y);
}

static void test_apply(void **state)
{
    (void)state;
    spmv_error err = {0};
    for (int d = 0; d < 2; d++) {
        spmv_dtype dt = d ? SPMV_FLOAT32 : SPMV_FLOAT64;
        double tol = d ? 1e-4 : 1e-12;
        spmv_coo coo;
        tu_random_coo(&rng, TU_SHAPE_RANDOM, 300, SPMV_FLOAT64, &coo);
        spmv_matrix m, mt;
        assert_int_equal(spmv_matrix_build(&coo, dt, SPMV_FMT_CSR, 32, 0, &m, &err), SPMV_OK);
        assert_int_equal(spmv_matrix_transpose(&m, &mt, &err), SPMV_OK);
        assert_int_equal(mt.rows, m.cols);
        const char *names[] = {"cpu.csr.serial", "cpu.csr.omp"};
        for (int kn = 0; kn < 2; kn++) {
            const spmv_kernel *kern = spmv_kernel_find(names[kn]);
            for (int32_t k = 1; k <= 5; k += 4) {
                for (int t = 0; t < 2; t++) {
                    const spmv_matrix *use = t ? &mt : &m;
                    spmv_vec x, y, y0;
                    hv(dt, use->cols, k, &x);
                    hv(dt, use->rows, k, &y);
                    hv(dt, use->rows, k, &y0);
                    memcpy(y0.data, y.data, spmv_vec_bytes(&y));
                    double alpha = tu_rng_value(&rng), beta = t ? 0.0 : tu_rng_value(&rng);
                    if (beta == 0.0)
                        tu_poison(y.data, dt, y.n * k);
                    spmv_apply_args a = {alpha, beta, 1, 2};
                    spmv_stats st;
                    double axms = -1;
                    assert_int_equal(spmv_cpu_apply(kern, use, NULL, &a, &x, &y, &st, &axms, &err), SPMV_OK);
                    assert_true(axms >= 0);
                    double *ref = malloc(sizeof(double) * (size_t)use->rows);
                    for (int32_t j = 0; j < k; j++) {
                        coo_product(&coo, t, &x, j, ref);
                        double scale = 1;
                        for (int64_t i = 0; i < use->rows; i++)
                            scale = fmax(scale, fabs(ref[i]));
                        for (int64_t i = 0; i < use->rows; i++) {
                            double want = alpha * ref[i] + beta * at(&y0, (int64_t)j * use->rows + i);
                            double got = at(&y, (int64_t)j * use->rows + i);
                            if (!(fabs(got - want) <= tol * scale))
                                fail_msg("%s k=%d op %s %s: y[%lld] = %g, want %g", names[kn], k, t ? "t" : "n",
                                         spmv_dtype_name(dt), (long long)i, got, want);
                        }
                    }
                    free(ref);
                    spmv_vec_free(NULL, &x);
                    spmv_vec_free(NULL, &y);
                    spmv_vec_free(NULL, &y0);
                }
            }
        }
        /* refusals: k > 1 for a one-column kernel, lengths, aliasing */
        spmv_vec x, y;
        hv(dt, m.cols, 2, &x);
        hv(dt, m.rows, 2, &y);
        spmv_apply_args a = {1, 0, 0, 1};
        assert_int_equal(spmv_cpu_apply(spmv_kernel_find("cpu.ell.omp"), &m, NULL, &a, &x, &y, NULL, NULL, &err),
                         SPMV_ERR_INVALID);
        assert_non_null(strstr(err.message, "column"));
        assert_int_equal(spmv_cpu_apply(spmv_kernel_find("cpu.csr.omp"), &m, NULL, &a, &y, &x, NULL, NULL, &err),
                         m.rows == m.cols ? SPMV_ERR_INVALID : SPMV_ERR_SHAPE);
        assert_int_equal(spmv_cpu_apply(spmv_kernel_find("cpu.csr.omp"), &m, NULL, &a, &x, &x, NULL, NULL, &err),
                         SPMV_ERR_INVALID);
        spmv_vec_free(NULL, &x);
        spmv_vec_free(NULL, &y);
        spmv_matrix_free(&m);
        spmv_matrix_free(&mt);
        spmv_coo_free(&coo);
    }
}

/* ------------------------------------------------------------- solvers */

typedef struct host_op {
    const spmv_matrix *m;
} host_op;

static int host_apply(void *ctx, const spmv_vec *x, spmv_vec *y, double *ms, spmv_error *err)
{
    host_op *h = ctx;
    spmv_apply_args a = {1, 0, 0, 1};
    spmv_stats st;
    int rc = spmv_cpu_apply(spmv_kernel_find("cpu.csr.omp"), h->m, NULL, &a, x, y, &st, NULL, err);
    *ms = st.median_ms;
    return rc;
}

static double true_relres(const spmv_matrix *m, const spmv_vec *b, const spmv_vec *x)
{
    double *ax = malloc(sizeof(double) * (size_t)m->rows), num = 0, den = 0;
    for (int32_t i = 0; i < m->rows; i++) {
        double s = 0;
        for (int32_t p = m->csr.row_ptr[i]; p < m->csr.row_ptr[i + 1]; p++)
            s += ((double *)m->csr.val)[p] * at(x, m->csr.col[p]);
        num += (at(b, i) - s) * (at(b, i) - s);
        den += at(b, i) * at(b, i);
    }
    free(ax);
    return sqrt(num / den);
}

static int cancel_at_5(void *ctx, int32_t it, double relres)
{
    (void)ctx;
    (void)relres;
    return it >= 5;
}

static void solve_one(const spmv_matrix *m, spmv_solve_method meth, bool jacobi, double tol, bool want_conv)
{
    spmv_error err = {0};
    spmv_vec xt, b, x, dinv;
    hv(SPMV_FLOAT64, m->rows, 1, &xt);
    hv(SPMV_FLOAT64, m->rows, 1, &b);
    hv(SPMV_FLOAT64, m->rows, 1, &x);
    spmv_reference(&m->csr, xt.data, b.data);
    spmv_vec_fill(NULL, &x, 0.0, &err);
    host_op h = {m};
    spmv_linop op = {m->rows, m->cols, &h, host_apply};
    spmv_solve_options o = {.method = meth, .restart = 20, .tol = tol, .maxit = 5000};
    if (jacobi) {
        hv(SPMV_FLOAT64, m->rows, 1, &dinv);
        assert_int_equal(spmv_csr_inv_diag(&m->csr, dinv.data, &err), SPMV_OK);
        o.inv_diag = &dinv;
    }
    spmv_solve_result r;
    assert_int_equal(spmv_solve(NULL, &op, &b, &x, &o, &r, &err), SPMV_OK);
    double rr = true_relres(m, &b, &x);
    print_message("# %s%s: %s, %d iterations, relres %.3g (recomputed here %.3g), %s\n",
                  spmv_solve_method_name(meth), jacobi ? "+jacobi" : "", spmv_solve_stop_name(r.stop), r.iterations,
                  r.relres, rr, r.detail);
    if (want_conv) {
        assert_int_equal(r.stop, SPMV_STOP_CONVERGED);
        assert_true(rr <= tol * 1.01);
        assert_true(fabs(rr - r.relres) <= 1e-3 * tol + 1e-15);
        assert_int_equal(r.history_len, r.iterations + 1);
        assert_true(r.spmv_calls >= r.iterations);
        double dx = 0, nx = 0;
        for (int64_t i = 0; i < m->rows; i++) {
            dx += (at(&x, i) - at(&xt, i)) * (at(&x, i) - at(&xt, i));
            nx += at(&xt, i) * at(&xt, i);
        }
        assert_true(sqrt(dx / nx) < 1e-5);
    }
    spmv_solve_result_free(&r);
    if (jacobi)
        spmv_vec_free(NULL, &dinv);
    spmv_vec_free(NULL, &xt);
    spmv_vec_free(NULL, &b);
    spmv_vec_free(NULL, &x);
}

static void build(spmv_gen_kind kind, int64_t n, spmv_matrix *m)
{
    spmv_error err = {0};
    spmv_coo coo;
    spmv_gen_spec g = {.kind = kind, .n = n, .per_row = 8, .seed = tu_rng_next(&rng)};
    assert_int_equal(spmv_gen(&g, &coo, &err), SPMV_OK);
    assert_int_equal(spmv_matrix_build(&coo, SPMV_FLOAT64, SPMV_FMT_CSR, 32, 0, m, &err), SPMV_OK);
    spmv_coo_free(&coo);
}

static void test_solvers_poisson(void **state)
{
    (void)state;
    spmv_matrix m;
    build(SPMV_GEN_POISSON2D, 30, &m);
    for (int meth = 0; meth < 4; meth++) /* MINRES too: Poisson is symmetric */
        for (int j = 0; j < 2; j++)
            solve_one(&m, (spmv_solve_method)meth, j, 1e-10, true);
    spmv_matrix_free(&m);
}

/* Poisson plus a skew part: non-symmetric, still well conditioned. */
static void test_solvers_nonsymmetric(void **state)
{
    (void)state;
    spmv_matrix m;
    build(SPMV_GEN_POISSON2D, 25, &m);
    double *v = m.csr.val;
    for (int32_t i = 0; i < m.rows; i++)
        for (int32_t p = m.csr.row_ptr[i]; p < m.csr.row_ptr[i + 1]; p++)
            if (m.csr.col[p] > i)
                v[p] += 0.4; /* upper neighbours heavier than lower ones */
    for (int meth = 1; meth < 3; meth++)
        for (int j = 0; j < 2; j++)
            solve_one(&m, (spmv_solve_method)meth, j, 1e-9, true);
    spmv_matrix_free(&m);
}

static void test_solver_stops(void **state)
{
    (void)state;
    spmv_error err = {0};
    spmv_matrix m;
    build(SPMV_GEN_POISSON2D, 20, &m);
    host_op h = {&m};
    spmv_linop op = {m.rows, m.cols, &h, host_apply};
    spmv_vec b, x;
    hv(SPMV_FLOAT64, m.rows, 1, &b);
    hv(SPMV_FLOAT64, m.rows, 1, &x);
    spmv_solve_result r;
    /* maxit */
    spmv_vec_fill(NULL, &x, 0, &err);
    spmv_solve_options o = {.method = SPMV_SOLVE_CG, .tol = 1e-14, .maxit = 3};
    assert_int_equal(spmv_solve(NULL, &op, &b, &x, &o, &r, &err), SPMV_OK);
    assert_int_equal(r.stop, SPMV_STOP_MAXIT);
    assert_int_equal(r.iterations, 3);
    assert_true(fabs(r.relres - true_relres(&m, &b, &x)) < 1e-12);
    spmv_solve_result_free(&r);
    /* cancelled */
    o.maxit = 1000;
    o.progress = cancel_at_5;
    for (int meth = 0; meth < 4; meth++) {
        o.method = (spmv_solve_method)meth;
        spmv_vec_fill(NULL, &x, 0, &err);
        assert_int_equal(spmv_solve(NULL, &op, &b, &x, &o, &r, &err), SPMV_OK);
        assert_int_equal(r.stop, SPMV_STOP_CANCELLED);
        assert_int_equal(r.iterations, 5);
        spmv_solve_result_free(&r);
    }
    o.progress = NULL;
    /* b = 0 */
    spmv_vec_fill(NULL, &b, 0, &err);
    spmv_vec_fill(NULL, &x, 3, &err);
    o.method = SPMV_SOLVE_GMRES;
    assert_int_equal(spmv_solve(NULL, &op, &b, &x, &o, &r, &err), SPMV_OK);
    assert_int_equal(r.stop, SPMV_STOP_CONVERGED);
    assert_true(at(&x, 0) == 0.0);
    spmv_solve_result_free(&r);
    /* refusals */
    o.tol = NAN;
    assert_int_equal(spmv_solve(NULL, &op, &b, &x, &o, &r, &err), SPMV_ERR_INVALID);
    assert_non_null(strstr(err.message, "tol"));
    o.tol = 1e-8;
    o.maxit = 0;
    assert_int_equal(spmv_solve(NULL, &op, &b, &x, &o, &r, &err), SPMV_ERR_INVALID);
    /* CG on -A: p·Ap < 0 is a breakdown, reported with its value */
    for (int64_t p = 0; p < m.nnz; p++)
        ((double *)m.csr.val)[p] = -((double *)m.csr.val)[p];
    tu_random_vector(&rng, SPMV_FLOAT64, m.rows, b.data);
    spmv_vec_fill(NULL, &x, 0, &err);
    o.maxit = 100;
    o.method = SPMV_SOLVE_CG;
    assert_int_equal(spmv_solve(NULL, &op, &b, &x, &o, &r, &err), SPMV_OK);
    assert_int_equal(r.stop, SPMV_STOP_BREAKDOWN);
    assert_true(r.breakdown_value < 0);
    assert_non_null(strstr(r.detail, "p·Ap"));
    spmv_solve_result_free(&r);
    /* 1/a_ii (found by a binary search a row) is the naive scan's, exactly */
    assert_int_equal(spmv_csr_inv_diag(&m.csr, x.data, &err), SPMV_OK);
    for (int32_t i = 0; i < m.rows; i++) {
        double d = 0;
        for (int32_t p = m.csr.row_ptr[i]; p < m.csr.row_ptr[i + 1]; p++)
            d += m.csr.col[p] == i ? ((double *)m.csr.val)[p] : 0.0;
        assert_true(((double *)x.data)[i] == 1.0 / d);
    }
    /* Jacobi refuses a zero diagonal, naming the row */
    int32_t row = (int32_t)tu_rng_range(&rng, 0, m.rows - 1);
    for (int32_t p = m.csr.row_ptr[row]; p < m.csr.row_ptr[row + 1]; p++)
        if (m.csr.col[p] == row)
            ((double *)m.csr.val)[p] = 0;
    assert_int_equal(spmv_csr_inv_diag(&m.csr, x.data, &err), SPMV_ERR_INVALID);
    char want[32];
    snprintf(want, sizeof want, "row %d ", row);
    assert_non_null(strstr(err.message, want));
    spmv_vec_free(NULL, &b);
    spmv_vec_free(NULL, &x);
    spmv_matrix_free(&m);
}

/* One solve of m from b (all `bval`) and x0 (all `x0`): the result. */
static int solve_filled(const spmv_matrix *m, spmv_solve_method meth, double bval, double x0, double tol,
                        spmv_solve_result *r, spmv_error *err)
{
    spmv_vec b, x;
    hv(SPMV_FLOAT64, m->rows, 1, &b);
    hv(SPMV_FLOAT64, m->rows, 1, &x);
    spmv_vec_fill(NULL, &b, bval, err);
    spmv_vec_fill(NULL, &x, x0, err);
    host_op h = {m};
    spmv_linop op = {m->rows, m->cols, &h, host_apply};
    spmv_solve_options o = {.method = meth, .tol = tol, .maxit = 500};
    int rc = spmv_solve(NULL, &op, &b, &x, &o, r, err);
    print_message("# %s b %g x0 %g tol %g: rc %d, %s, %s\n", spmv_solve_method_name(meth), bval, x0, tol, rc,
                  rc ? err->message : spmv_solve_stop_name(r->stop), rc ? "" : r->detail);
    spmv_vec_free(NULL, &b);
    spmv_vec_free(NULL, &x);
    return rc;
}

/* Issue 33: NaN never converges. Norms carry NaN and Inf (fmax skipped a
 * NaN: ||[NaN, 0, 0, 0]|| was 0); a residual that is not finite (NaN in
 * A, x0 all NaN or all Inf) stops every method as a non-finite breakdown,
 * never "converged, relres 0"; tol below 10 eps of the dtype is refused
 * with the bound (1e-300 ran 75 208 iterations, then "not positive
 * definite"); a b of 1e-320 is refused as too small, not diagnosed as an
 * indefinite matrix, while one of 1e-100 still solves. */
static void test_solver_nonfinite(void **state)
{
    (void)state;
    spmv_error err = {0};
    for (int d = 0; d < 2; d++) {
        spmv_dtype dt = d ? SPMV_FLOAT32 : SPMV_FLOAT64;
        spmv_vec v;
        double n2, dot;
        hv(dt, 4, 1, &v);
        spmv_vec_fill(NULL, &v, 0, &err);
        d ? (void)(((float *)v.data)[0] = NAN) : (void)(((double *)v.data)[0] = NAN);
        assert_int_equal(spmv_vec_nrm2(NULL, &v, &n2, &err), SPMV_OK);
        assert_true(isnan(n2));
        assert_int_equal(spmv_vec_dot(NULL, &v, &v, &dot, &err), SPMV_OK);
        assert_true(isnan(dot));
        d ? (void)(((float *)v.data)[0] = INFINITY) : (void)(((double *)v.data)[0] = INFINITY);
        d ? (void)(((float *)v.data)[3] = 1) : (void)(((double *)v.data)[3] = 1);
        assert_int_equal(spmv_vec_nrm2(NULL, &v, &n2, &err), SPMV_OK);
        assert_true(isinf(n2) && n2 > 0);
        d ? (void)(((float *)v.data)[2] = NAN) : (void)(((double *)v.data)[2] = NAN);
        assert_int_equal(spmv_vec_nrm2(NULL, &v, &n2, &err), SPMV_OK);
        assert_true(isnan(n2));
        spmv_vec_free(NULL, &v);
    }
    spmv_matrix m, nan3;
    build(SPMV_GEN_POISSON2D, 12, &m);
    build(SPMV_GEN_POISSON2D, 1, &nan3); /* 1 x 1, its one value made NaN */
    ((double *)nan3.csr.val)[0] = NAN;
    spmv_solve_result r;
    for (int meth = 0; meth <= SPMV_SOLVE_MINRES; meth++) {
        spmv_solve_method sm = (spmv_solve_method)meth;
        const double x0s[3] = {NAN, INFINITY, -INFINITY};
        for (int k = 0; k < 4; k++) {
            assert_int_equal(solve_filled(k < 3 ? &m : &nan3, sm, 1.0, k < 3 ? x0s[k] : 0.0, 1e-8, &r, &err), SPMV_OK);
            assert_int_equal(r.stop, SPMV_STOP_BREAKDOWN);
            assert_non_null(strstr(r.detail, "breakdown: non-finite"));
            assert_false(r.relres == 0.0);
            spmv_solve_result_free(&r);
        }
        assert_int_equal(solve_filled(&m, sm, 1.0, 0.0, 1e-300, &r, &err), SPMV_ERR_INVALID);
        assert_non_null(strstr(err.message, "below what float64 can reach: at least 2.2e-15"));
        assert_int_equal(solve_filled(&m, sm, 1e-320, 0.0, 1e-8, &r, &err), SPMV_ERR_INVALID);
        assert_non_null(strstr(err.message, "too small"));
        assert_null(strstr(err.message, "positive definite"));
        assert_int_equal(solve_filled(&m, sm, 1e-100, 0.0, 1e-8, &r, &err), SPMV_OK);
        assert_int_equal(r.stop, SPMV_STOP_CONVERGED);
        spmv_solve_result_free(&r);
    }
    assert_true(spmv_solve_min_tol(SPMV_FLOAT32) > 1e-6 && spmv_solve_min_tol(SPMV_FLOAT32) < 1.3e-6);
    spmv_matrix_free(&m);
    spmv_matrix_free(&nan3);
}

/* 2-D Poisson (grid side n) minus sigma on the diagonal: symmetric, and
 * indefinite for sigma inside (0, 8), its spectrum. */
static void shifted_poisson(int64_t n, double sigma, spmv_matrix *m)
{
    build(SPMV_GEN_POISSON2D, n, m);
    for (int32_t i = 0; i < m->rows; i++)
        for (int32_t p = m->csr.row_ptr[i]; p < m->csr.row_ptr[i + 1]; p++)
            if (m->csr.col[p] == i)
                ((double *)m->csr.val)[p] -= sigma;
}

/* MINRES on a symmetric indefinite matrix, plain and with Jacobi (SPD
 * there: the diagonal 4 - sigma is positive), against the true residual
 * and x_true; CG on the same matrix breaks down (p·Ap < 0 somewhere). */
static void test_minres(void **state)
{
    (void)state;
    spmv_matrix m;
    double sigma = 0.9 + 0.5 * tu_rng_value(&rng) * tu_rng_value(&rng);
    shifted_poisson(24 + tu_rng_range(&rng, 0, 8), sigma, &m);
    print_message("# minres: shifted Poisson, %d rows, sigma %.4f\n", m.rows, sigma);
    solve_one(&m, SPMV_SOLVE_MINRES, false, 1e-10, true);
    solve_one(&m, SPMV_SOLVE_MINRES, true, 1e-10, true);
    spmv_error err = {0};
    spmv_vec b, x;
    hv(SPMV_FLOAT64, m.rows, 1, &b);
    hv(SPMV_FLOAT64, m.rows, 1, &x);
    spmv_vec_fill(NULL, &x, 0, &err);
    host_op h = {&m};
    spmv_linop op = {m.rows, m.cols, &h, host_apply};
    spmv_solve_options o = {.method = SPMV_SOLVE_CG, .tol = 1e-10, .maxit = 5000};
    spmv_solve_result r;
    assert_int_equal(spmv_solve(NULL, &op, &b, &x, &o, &r, &err), SPMV_OK);
    assert_int_equal(r.stop, SPMV_STOP_BREAKDOWN);
    spmv_solve_result_free(&r);
    spmv_vec_free(NULL, &b);
    spmv_vec_free(NULL, &x);
    spmv_matrix_free(&m);
}

/* MINRES's stops: maxit, a preconditioner that is not positive definite
 * (a breakdown named as such), b = 0, the name (test_solver_stops cancels
 * it with the others). */
static void test_minres_stops(void **state)
{
    (void)state;
    spmv_error err = {0};
    spmv_matrix m;
    shifted_poisson(20, 1.1, &m);
    host_op h = {&m};
    spmv_linop op = {m.rows, m.cols, &h, host_apply};
    spmv_vec b, x, dneg;
    hv(SPMV_FLOAT64, m.rows, 1, &b);
    hv(SPMV_FLOAT64, m.rows, 1, &x);
    hv(SPMV_FLOAT64, m.rows, 1, &dneg);
    spmv_solve_result r;
    spmv_solve_options o = {.method = SPMV_SOLVE_MINRES, .tol = 1e-14, .maxit = 7};
    spmv_vec_fill(NULL, &x, 0, &err);
    assert_int_equal(spmv_solve(NULL, &op, &b, &x, &o, &r, &err), SPMV_OK);
    assert_int_equal(r.stop, SPMV_STOP_MAXIT);
    assert_int_equal(r.iterations, 7);
    assert_int_equal(r.history_len, 8);
    assert_true(fabs(r.relres - true_relres(&m, &b, &x)) < 1e-12);
    /* MINRES minimises the residual: the history never rises */
    for (int32_t i = 1; i < r.history_len; i++)
        assert_true(r.history[i] <= r.history[i - 1] * (1 + 1e-12));
    spmv_solve_result_free(&r);
    o.maxit = 1000;
    spmv_vec_fill(NULL, &dneg, -0.25, &err); /* M = -4 I: negative definite */
    o.inv_diag = &dneg;
    spmv_vec_fill(NULL, &x, 0, &err);
    assert_int_equal(spmv_solve(NULL, &op, &b, &x, &o, &r, &err), SPMV_OK);
    assert_int_equal(r.stop, SPMV_STOP_BREAKDOWN);
    assert_true(r.breakdown_value < 0);
    assert_non_null(strstr(r.detail, "not positive definite"));
    spmv_solve_result_free(&r);
    o.inv_diag = NULL;
    spmv_vec_fill(NULL, &b, 0, &err);
    spmv_vec_fill(NULL, &x, 3, &err);
    assert_int_equal(spmv_solve(NULL, &op, &b, &x, &o, &r, &err), SPMV_OK);
    assert_int_equal(r.stop, SPMV_STOP_CONVERGED);
    assert_true(at(&x, 0) == 0.0);
    spmv_solve_result_free(&r);
    spmv_solve_method meth;
    assert_int_equal(spmv_solve_method_parse("MINRES", &meth), SPMV_OK);
    assert_int_equal(meth, SPMV_SOLVE_MINRES);
    assert_string_equal(spmv_solve_method_name(SPMV_SOLVE_MINRES), "minres");
    o.method = (spmv_solve_method)(SPMV_SOLVE_MINRES + 1);
    assert_int_equal(spmv_solve(NULL, &op, &b, &x, &o, &r, &err), SPMV_ERR_INVALID);
    o.method = SPMV_SOLVE_MINRES;
    o.check_every = SPMV_CHECK_EVERY_MAX + 1;
    assert_int_equal(spmv_solve(NULL, &op, &b, &x, &o, &r, &err), SPMV_ERR_INVALID);
    assert_non_null(strstr(err.message, "check_every"));
    spmv_vec_free(NULL, &b);
    spmv_vec_free(NULL, &x);
    spmv_vec_free(NULL, &dneg);
    spmv_matrix_free(&m);
}

/* k right-hand sides in lockstep (spmv_solve_block): each column's
 * iterations, stop and x as spmv_solve gives them one by one (the same
 * arithmetic through the k-column calls, one SpMM for the k products: x
 * bit for bit), with a zero column (answered
 * at once), plain and Jacobi, CG; and a column poisoned by NaN stops alone
 * as a non-finite breakdown while the others converge. */
static void test_block(void **state)
{
    (void)state;
    spmv_error err = {0};
    spmv_matrix m;
    build(SPMV_GEN_POISSON2D, 20 + tu_rng_range(&rng, 0, 10), &m);
    int32_t n = m.rows, k = 2 + (int32_t)tu_rng_range(&rng, 0, 5), zero = (int32_t)tu_rng_range(&rng, 0, k - 1);
    host_op h = {&m};
    spmv_linop op = {n, n, &h, host_apply};
    spmv_vec b, x, dinv;
    hv(SPMV_FLOAT64, n, k, &b);
    hv(SPMV_FLOAT64, n, k, &x);
    hv(SPMV_FLOAT64, n, 1, &dinv);
    for (int64_t i = 0; i < (int64_t)n * k; i++)
        ((double *)b.data)[i] = i / n == zero ? 0.0 : tu_rng_value(&rng);
    assert_int_equal(spmv_csr_inv_diag(&m.csr, dinv.data, &err), SPMV_OK);
    print_message("# block: %d rows, k = %d, column %d zero\n", n, k, zero);
    for (int jac = 0; jac < 2; jac++) {
        spmv_solve_options o = {.method = SPMV_SOLVE_CG, .tol = 1e-10, .maxit = 2000, .inv_diag = jac ? &dinv : NULL};
        spmv_solve_result *res = calloc((size_t)k, sizeof *res);
        spmv_vec_fill(NULL, &x, NAN, &err); /* poisoned: x0 below */
        spmv_vec_fill(NULL, &x, 0.0, &err);
        assert_int_equal(spmv_solve_block(NULL, &op, &b, &x, &o, res, &err), SPMV_OK);
        for (int32_t j = 0; j < k; j++) {
            spmv_vec bj = {SPMV_DEVICE_CPU, SPMV_FLOAT64, n, 1, (double *)b.data + (size_t)j * n}, xj;
            hv(SPMV_FLOAT64, n, 1, &xj);
            spmv_vec_fill(NULL, &xj, 0.0, &err);
            spmv_solve_result one;
            assert_int_equal(spmv_solve(NULL, &op, &bj, &xj, &o, &one, &err), SPMV_OK);
            double d = 0, mx = 0;
            for (int32_t i = 0; i < n; i++) {
                d = fmax(d, fabs(((double *)x.data)[(size_t)j * n + i] - ((double *)xj.data)[i]));
                mx = fmax(mx, fabs(((double *)xj.data)[i]));
            }
            print_message("# %s column %d: %d iterations (alone %d), %s, x within %.2g\n", jac ? "jacobi" : "plain", j,
                          res[j].iterations, one.iterations, spmv_solve_stop_name(res[j].stop), mx ? d / mx : d);
            assert_int_equal(res[j].stop, SPMV_STOP_CONVERGED);
            assert_int_equal(res[j].iterations, one.iterations);
            assert_int_equal(res[j].history_len, one.history_len);
            assert_true(d == 0.0); /* the one-column loops: x bit for bit */
            assert_true(fabs(res[j].relres - true_relres(&m, &bj, &(spmv_vec){SPMV_DEVICE_CPU, SPMV_FLOAT64, n, 1,
                                                                             (double *)x.data + (size_t)j * n})) <
                        1e-12 || j == zero);
            if (j == zero)
                assert_int_equal(res[j].iterations, 0);
            spmv_solve_result_free(&one);
            spmv_solve_result_free(&res[j]);
            spmv_vec_free(NULL, &xj);
        }
        free(res);
    }
    /* a NaN in one column's b past the start: its x0 NaN, the others fine */
    spmv_solve_options o = {.method = SPMV_SOLVE_CG, .tol = 1e-10, .maxit = 2000};
    spmv_solve_result *res = calloc((size_t)k, sizeof *res);
    spmv_vec_fill(NULL, &x, 0.0, &err);
    int32_t bad = (zero + 1) % k;
    ((double *)x.data)[(size_t)bad * n + n / 2] = NAN;
    assert_int_equal(spmv_solve_block(NULL, &op, &b, &x, &o, res, &err), SPMV_OK);
    for (int32_t j = 0; j < k; j++) {
        assert_int_equal(res[j].stop, j == bad ? SPMV_STOP_BREAKDOWN : SPMV_STOP_CONVERGED);
        spmv_solve_result_free(&res[j]);
    }
    free(res);
    spmv_vec_free(NULL, &b);
    spmv_vec_free(NULL, &x);
    spmv_vec_free(NULL, &dinv);
    spmv_matrix_free(&m);
}

int main(void)
{
    uint64_t seed = tu_seed();
    tu_rng_init(&rng, seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blas1),
        cmocka_unit_test(test_blas_k),
        cmocka_unit_test(test_small_work_serial),
        cmocka_unit_test(test_apply),
        cmocka_unit_test(test_solvers_poisson),
        cmocka_unit_test(test_solvers_nonsymmetric),
        cmocka_unit_test(test_solver_stops),
        cmocka_unit_test(test_solver_nonfinite),
        cmocka_unit_test(test_minres),
        cmocka_unit_test(test_minres_stops),
        cmocka_unit_test(test_block),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
