/* test_gpu_vectors.c — resident vectors on a GPU, BLAS-1 there, products
 * with resident operands (alpha, beta, k columns, Aᵀ) and the solvers on
 * the device (engine/gpu/blas.cu, engine/gpu/spmm.cu, engine/gpu/run.cu,
 * engine/krylov.c with device vectors), the AMG cycle and every
 * preconditioner of engine/precond.h on the device (engine/gpu/amg.cu,
 * engine/gpu/precond.cu), each against its host implementation, the AMG
 * setup with its products on the device (engine/gpu/amg_setup.cu) against
 * the host's (the same hierarchy within rounding, the same CG iteration
 * counts, both setup times printed), and the
 * fused path (engine/krylov_fused.c, engine/gpu/krylov_fused.cu) against
 * the host-scalar one on the same GPU: same stop, iteration counts within
 * 2, the true residual (recomputed on the host) under tol.
 *
 * On a host without a GPU every case is skipped with spmv_gpu_count()'s
 * reason; the GPU host runs the binary from the bundle. Every device result
 * is compared with the host: BLAS-1 and the lockstep's k-column calls with
 * the host vector calls on the same values, the lockstep of k columns
 * (plain, Jacobi, AMG column by column and AMG's k-column cycle; k = 8
 * among them) with the host's CG column by column, the k-column V-cycle and
 * spmv_precond_apply_k with the host's, products with spmv_reference (k columns: column by column) or a
 * host loop over Aᵀ, solvers by the residual recomputed on the host. Inputs
 * are drawn afresh (seed printed, SPMV_SEED repeats); outputs are poisoned
 * (NaN) before each kernel. The context's used bytes must come back to
 * where they started after every vector and scratch is freed.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "amg.h"
#include "krylov.h"
#include "krylov_fused.h"
#include "precond.h"
#include "spmv.h"
#include "testutil.h"

/* Bytes spmvd holds on the device, less the context's kernel scratch
 * (grown by gpu.csr.merge and kept between calls on purpose). */
static size_t used(void)
{
    spmv_gpu_info info;
    assert_int_equal(spmv_gpu_ctx_info(TG.ctx, &info), SPMV_OK);
    return info.mem_used_by_spmvd - info.mem_scratch;
}

/* A device vector holding the values of host vector h. */
static void to_device(const spmv_vec *h, spmv_vec *d)
{
    spmv_error err = {0};
    assert_int_equal(spmv_vec_alloc(TG.ctx, SPMV_DEVICE_GPU, h->dtype, h->n, h->k, d, &err), SPMV_OK);
    assert_int_equal(spmv_vec_write(TG.ctx, d, h->data, &err), SPMV_OK);
}

static void host_random(spmv_dtype dt, int64_t n, int32_t k, spmv_vec *v)
{
    spmv_error err = {0};
    assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, dt, n, k, v, &err), SPMV_OK);
    tu_random_vector(&TG.rng, dt, n * k, v->data);
}

static double at(const spmv_vec *v, int64_t i)
{
    return v->dtype == SPMV_FLOAT64 ? ((double *)v->data)[i] : ((float *)v->data)[i];
}

/* max |a - b| / max(|b|, tiny) of two host vectors. */
static double rel(const spmv_vec *a, const spmv_vec *b)
{
    double d = 0, s = 1e-300;
    for (int64_t i = 0; i < a->n * a->k; i++) {
        double x = at(a, i), y = at(b, i);
        if (isnan(x) != isnan(y))
            return INFINITY;
        d = fmax(d, fabs(x - y));
        s = fmax(s, fabs(y));
    }
    return d / s;
}

static void read_back(const spmv_vec *d, spmv_vec *h)
{
    spmv_error err = {0};
    assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, d->dtype, d->n, d->k, h, &err), SPMV_OK);
    tu_poison(h->data, d->dtype, d->n * d->k);
    assert_int_equal(spmv_vec_read(TG.ctx, d, h->data, &err), SPMV_OK);
}

static void test_blas1(void **state)
{
    (void)state;
    TU_NEED_GPU();
    spmv_error err = {0};
    size_t u0 = used();
    for (int d = 0; d < 2; d++) {
        spmv_dtype dt = d ? SPMV_FLOAT32 : SPMV_FLOAT64;
        double tol = d ? 1e-6 : 1e-14;
        for (int32_t k = 1; k <= 3; k += 2) {
            int64_t n = 1 + tu_rng_range(&TG.rng, 0, 3000000);
            spmv_vec hx, hy, dx, dy, back;
            host_random(dt, n, k, &hx);
            host_random(dt, n, k, &hy);
            to_device(&hx, &dx);
            to_device(&hy, &dy);
            double a = tu_rng_value(&TG.rng), b = tu_rng_value(&TG.rng);
            double hd[3], dd[3], hn[3], dn[3];
            assert_int_equal(spmv_vec_dot(NULL, &hx, &hy, hd, &err), SPMV_OK);
            assert_int_equal(spmv_vec_dot(TG.ctx, &dx, &dy, dd, &err), SPMV_OK);
            assert_int_equal(spmv_vec_nrm2(NULL, &hx, hn, &err), SPMV_OK);
            assert_int_equal(spmv_vec_nrm2(TG.ctx, &dx, dn, &err), SPMV_OK);
            for (int32_t j = 0; j < k; j++) {
                assert_true(fabs(hd[j] - dd[j]) <= 1e-10 * hn[j] * hn[j] + 1e-12);
                assert_true(fabs(hn[j] - dn[j]) <= 1e-12 * hn[j]);
            }
            /* the same sequence on both sides, then compared */
            for (int side = 0; side < 2; side++) {
                spmv_gpu_ctx *c = side ? TG.ctx : NULL;
                spmv_vec *x = side ? &dx : &hx, *y = side ? &dy : &hy;
                assert_int_equal(spmv_vec_axpby(c, a, x, b, y, &err), SPMV_OK);
                assert_int_equal(spmv_vec_axpy(c, b, x, y, &err), SPMV_OK);
                assert_int_equal(spmv_vec_scal(c, a, y, &err), SPMV_OK);
                assert_int_equal(spmv_vec_mul(c, x, y, &err), SPMV_OK);
                assert_int_equal(spmv_vec_axpby(c, a, y, 0.0, x, &err), SPMV_OK);
            }
            read_back(&dy, &back);
            double e = rel(&back, &hy);
            print_message("# blas1 %s n=%lld k=%d: rel %.3g\n", spmv_dtype_name(dt), (long long)n, k, e);
            assert_true(e <= tol * 10);
            spmv_vec_free(NULL, &back);
            read_back(&dx, &back);
            assert_true(rel(&back, &hx) <= tol * 10);
            spmv_vec_free(NULL, &back);
            /* fill, random fill (same values as the host for one seed), copy */
            assert_int_equal(spmv_vec_fill_random(TG.ctx, &dx, 99, &err), SPMV_OK);
            assert_int_equal(spmv_vec_fill_random(NULL, &hx, 99, &err), SPMV_OK);
            assert_int_equal(spmv_vec_copy(TG.ctx, &dx, &dy, &err), SPMV_OK);
            read_back(&dy, &back);
            assert_memory_equal(back.data, hx.data, spmv_vec_bytes(&hx));
            spmv_vec_free(NULL, &back);
            assert_int_equal(spmv_vec_fill(TG.ctx, &dy, -2.5, &err), SPMV_OK);
            read_back(&dy, &back);
            for (int64_t i = 0; i < n * k; i++)
                assert_true(at(&back, i) == -2.5);
            spmv_vec_free(NULL, &back);
            spmv_vec_free(TG.ctx, &dx);
            spmv_vec_free(TG.ctx, &dy);
            spmv_vec_free(NULL, &hx);
            spmv_vec_free(NULL, &hy);
        }
    }
    assert_int_equal(used(), u0);
}

/* Issue 33: norms and dots carry NaN and infinities, on the device as on
 * the host: ||[NaN, 0, ...]|| is NaN (cuBLAS's Dnrm2 and a max-based
 * scaling may skip it), ||[Inf, 1, ...]|| is Inf, ||[NaN, Inf, ...]|| is
 * NaN; a dot with a NaN is NaN. Both dtypes, the bad value at the start, in
 * the middle and at the end of a vector long enough for many blocks. */
static void test_nonfinite(void **state)
{
    (void)state;
    TU_NEED_GPU();
    spmv_error err = {0};
    size_t u0 = used();
    const int64_t n = 1000003, where[3] = {0, 500001, 1000002};
    for (int d = 0; d < 2; d++)
        for (int w = 0; w < 3; w++)
            for (int kind = 0; kind < 3; kind++) { /* NaN, Inf, NaN and Inf */
                spmv_dtype dt = d ? SPMV_FLOAT32 : SPMV_FLOAT64;
                spmv_vec hx, dx;
                host_random(dt, n, 1, &hx);
                double bad = kind == 1 ? INFINITY : NAN;
                if (dt == SPMV_FLOAT64)
                    ((double *)hx.data)[where[w]] = bad;
                else
                    ((float *)hx.data)[where[w]] = (float)bad;
                if (kind == 2)
                    dt == SPMV_FLOAT64 ? (void)(((double *)hx.data)[(where[w] + 7) % n] = -INFINITY)
                                       : (void)(((float *)hx.data)[(where[w] + 7) % n] = -INFINITY);
                to_device(&hx, &dx);
                double hn, dn, hd, dd;
                assert_int_equal(spmv_vec_nrm2(NULL, &hx, &hn, &err), SPMV_OK);
                assert_int_equal(spmv_vec_nrm2(TG.ctx, &dx, &dn, &err), SPMV_OK);
                assert_int_equal(spmv_vec_dot(TG.ctx, &dx, &dx, &dd, &err), SPMV_OK);
                assert_int_equal(spmv_vec_dot(NULL, &hx, &hx, &hd, &err), SPMV_OK);
                print_message("# nonfinite %s at %lld kind %d: host %g device %g, dot %g / %g\n", spmv_dtype_name(dt),
                              (long long)where[w], kind, hn, dn, hd, dd);
                if (kind == 1) {
                    assert_true(isinf(hn) && hn > 0 && isinf(dn) && dn > 0);
                    assert_true(isinf(dd) && isinf(hd));
                } else {
                    assert_true(isnan(hn) && isnan(dn));
                    assert_true(isnan(dd) && isnan(hd));
                }
                spmv_vec_free(TG.ctx, &dx);
                spmv_vec_free(NULL, &hx);
            }
    assert_int_equal(used(), u0);
}

/* Column j of v as a one-column vector. */
static spmv_vec column_of(const spmv_vec *v, int32_t j)
{
    spmv_vec c = *v;
    c.k = 1;
    c.data = (char *)v->data + (size_t)j * (size_t)v->n * spmv_dtype_size(v->dtype);
    return c;
}

/* One k-column call on the host and on the device, the device's result
 * read back and compared with the host's (NaN where the host has NaN:
 * a masked column keeps its poison, a beta 0 column loses it). */
static void blas_k_compare(const char *op, const spmv_vec *hy, const spmv_vec *dy, double tol)
{
    spmv_vec back;
    read_back(dy, &back);
    double e = rel(&back, hy);
    print_message("#   %s: rel %.3g\n", op, e);
    assert_true(e <= tol);
    spmv_vec_free(NULL, &back);
}

/* The k-column calls of the lockstep (engine/gpu/blas.cu, one launch for
 * all columns) against the host's (the one-column loops): random n and k
 * (up to SPMV_MAX_K), a random mask, outputs poisoned; the reductions
 * deterministic (two calls, the same bits), 0 where masked, and a float64
 * norm that over- or underflows its sum of squares (1e300, 1e-200) or
 * holds NaN or Inf as the host's. */
static void test_blas_k(void **state)
{
    (void)state;
    TU_NEED_GPU();
    spmv_error err = {0};
    size_t u0 = used();
    for (int round = 0; round < 8; round++) {
        spmv_dtype dt = round % 2 ? SPMV_FLOAT32 : SPMV_FLOAT64;
        double tol = dt == SPMV_FLOAT32 ? 1e-6 : 1e-14;
        int64_t n = round == 0 ? 0 : 1 + tu_rng_range(&TG.rng, 0, round < 4 ? 5000 : round < 6 ? 2000000 : 40000);
        int32_t k = round >= 6 ? SPMV_MAX_K : round == 1 ? 1 : 2 + (int32_t)tu_rng_range(&TG.rng, 0, 8);
        bool on[SPMV_MAX_K];
        double al[SPMV_MAX_K], be[SPMV_MAX_K];
        int32_t non = 0;
        for (int32_t j = 0; j < k; j++) {
            on[j] = k == 1 || tu_rng_range(&TG.rng, 0, 3) > 0;
            non += on[j];
            al[j] = tu_rng_value(&TG.rng);
            be[j] = j % 3 == 0 ? 0.0 : tu_rng_value(&TG.rng);
        }
        print_message("# blas_k %s n=%lld k=%d, %d columns on\n", spmv_dtype_name(dt), (long long)n, k, non);
        spmv_vec hx, hy, hd, hz, dx, dy, dd, dz;
        host_random(dt, n, k, &hx);
        host_random(dt, n, k, &hy);
        host_random(dt, n, 1, &hd);
        host_random(dt, n, k, &hz);
        for (int32_t j = 0; j < k; j++)
            if (be[j] == 0.0) { /* xpay must not read these */
                spmv_vec zj = column_of(&hz, j);
                spmv_vec_fill(NULL, &zj, NAN, &err);
            }
        to_device(&hx, &dx);
        to_device(&hy, &dy);
        to_device(&hd, &dd);
        to_device(&hz, &dz);
        for (int side = 0; side < 2; side++) {
            spmv_gpu_ctx *c = side ? TG.ctx : NULL;
            spmv_vec *x = side ? &dx : &hx, *y = side ? &dy : &hy, *z = side ? &dz : &hz;
            assert_int_equal(spmv_vec_axpy_k(c, al, x, y, on, &err), SPMV_OK);
            assert_int_equal(spmv_vec_xpay_k(c, x, be, z, on, &err), SPMV_OK);
        }
        blas_k_compare("axpy_k", &hy, &dy, tol * 10);
        blas_k_compare("xpay_k", &hz, &dz, tol * 10);
        spmv_vec_fill(NULL, &hz, NAN, &err); /* diag_k into a poisoned block, then in place */
        spmv_vec_fill(TG.ctx, &dz, NAN, &err);
        assert_int_equal(spmv_vec_diag_k(NULL, &hd, &hx, &hz, on, &err), SPMV_OK);
        assert_int_equal(spmv_vec_diag_k(TG.ctx, &dd, &dx, &dz, on, &err), SPMV_OK);
        blas_k_compare("diag_k", &hz, &dz, tol);
        assert_int_equal(spmv_vec_diag_k(NULL, &hd, &hy, &hy, NULL, &err), SPMV_OK);
        assert_int_equal(spmv_vec_diag_k(TG.ctx, &dd, &dy, &dy, NULL, &err), SPMV_OK);
        blas_k_compare("diag_k in place", &hy, &dy, tol * 10);
        double hdot[SPMV_MAX_K], hn[SPMV_MAX_K], ddot[SPMV_MAX_K], dn[SPMV_MAX_K], ddot2[SPMV_MAX_K],
            ddot3[SPMV_MAX_K], dn2[SPMV_MAX_K], dn3[SPMV_MAX_K];
        for (int32_t j = 0; j < k; j++)
            ddot[j] = dn[j] = ddot2[j] = ddot3[j] = dn2[j] = dn3[j] = NAN;
        assert_int_equal(spmv_vec_nrm2_dot_k(NULL, &hx, &hy, on, hn, hdot, &err), SPMV_OK);
        assert_int_equal(spmv_vec_nrm2_dot_k(TG.ctx, &dx, &dy, on, dn, ddot, &err), SPMV_OK);
        assert_int_equal(spmv_vec_dot_k(TG.ctx, &dx, &dy, on, ddot2, &err), SPMV_OK);
        assert_int_equal(spmv_vec_dot_k(TG.ctx, &dx, &dy, on, ddot3, &err), SPMV_OK);
        assert_int_equal(spmv_vec_nrm2_dot_k(TG.ctx, &dx, NULL, on, dn2, NULL, &err), SPMV_OK);
        assert_int_equal(spmv_vec_nrm2_dot_k(TG.ctx, &dx, NULL, on, dn3, NULL, &err), SPMV_OK);
        for (int32_t j = 0; j < k; j++) {
            double ny = 0;
            if (on[j]) {
                spmv_vec yj = column_of(&hy, j);
                spmv_vec_nrm2(NULL, &yj, &ny, &err);
            }
            /* sums in the dtype, in another order: float32's rounding is 1e-7 a term */
            double rel = dt == SPMV_FLOAT32 ? 1e-5 : 1e-12, dtol = rel * hn[j] * ny + 1e-300;
            assert_true(fabs(ddot[j] - hdot[j]) <= dtol);
            assert_true(fabs(ddot2[j] - hdot[j]) <= dtol);
            assert_true(fabs(dn[j] - hn[j]) <= rel * hn[j]);
            assert_true(fabs(dn2[j] - hn[j]) <= rel * hn[j]);
            assert_memory_equal(&ddot3[j], &ddot2[j], sizeof(double)); /* deterministic: the same call, the same bits */
            assert_memory_equal(&dn3[j], &dn2[j], sizeof(double));
            if (!on[j])
                assert_true(ddot[j] == 0.0 && dn[j] == 0.0 && ddot2[j] == 0.0 && dn2[j] == 0.0);
        }
        spmv_vec_free(TG.ctx, &dx);
        spmv_vec_free(TG.ctx, &dy);
        spmv_vec_free(TG.ctx, &dd);
        spmv_vec_free(TG.ctx, &dz);
        spmv_vec_free(NULL, &hx);
        spmv_vec_free(NULL, &hy);
        spmv_vec_free(NULL, &hd);
        spmv_vec_free(NULL, &hz);
    }
    /* float64 norms past the plain sum of squares, NaN and Inf: 6 columns */
    const int64_t n = 300007;
    const double fill[6] = {1e300, 1e-200, 0.0, 1.0, 1.0, 1.0};
    spmv_vec hx, dx;
    host_random(SPMV_FLOAT64, n, 6, &hx);
    for (int32_t j = 0; j < 6; j++)
        for (int64_t i = 0; i < n; i++)
            ((double *)hx.data)[j * n + i] *= fill[j];
    ((double *)hx.data)[3 * n + n / 2] = NAN;
    ((double *)hx.data)[4 * n + n - 1] = -INFINITY;
    ((double *)hx.data)[5 * n] = NAN;
    ((double *)hx.data)[5 * n + 1] = INFINITY;
    to_device(&hx, &dx);
    double hn[6], dn[6];
    assert_int_equal(spmv_vec_nrm2_dot_k(NULL, &hx, NULL, NULL, hn, NULL, &err), SPMV_OK);
    assert_int_equal(spmv_vec_nrm2_dot_k(TG.ctx, &dx, NULL, NULL, dn, NULL, &err), SPMV_OK);
    for (int32_t j = 0; j < 6; j++) {
        print_message("# nrm2_k column %d: host %.17g device %.17g\n", j, hn[j], dn[j]);
        if (j == 3 || j == 5)
            assert_true(isnan(hn[j]) && isnan(dn[j]));
        else if (j == 4)
            assert_true(isinf(hn[j]) && isinf(dn[j]));
        else
            assert_true(fabs(dn[j] - hn[j]) <= 1e-12 * hn[j]);
    }
    assert_true(hn[0] > 1e300 && isfinite(hn[0]) && hn[1] > 0 && hn[2] == 0);
    spmv_vec_free(TG.ctx, &dx);
    spmv_vec_free(NULL, &hx);
    assert_int_equal(used(), u0);
}

/* Products: every kernel taking k columns with k = 1, 3, 8, 17; alpha and
 * beta through several single-column kernels; Aᵀ. */
static void test_apply(void **state)
{
    (void)state;
    TU_NEED_GPU();
    spmv_error err = {0};
    size_t u0 = used();
    static const tu_shape shapes[] = {TU_SHAPE_RANDOM, TU_SHAPE_POWER_LAW, TU_SHAPE_DENSE_ROW};
    for (int d = 0; d < 2; d++) {
        spmv_dtype dt = d ? SPMV_FLOAT32 : SPMV_FLOAT64;
        double tol = d ? 1e-4 : 1e-11;
        for (size_t si = 0; si < 3; si++) {
            spmv_coo coo;
            tu_random_coo(&TG.rng, shapes[si], 5000, SPMV_FLOAT64, &coo);
            spmv_matrix hm, ht;
            spmv_gpu_matrix *gm = NULL, *gt = NULL;
            spmv_gpu_upload_stats us;
            assert_int_equal(spmv_matrix_build(&coo, dt, SPMV_FMT_CSR, 32, 0, &hm, &err), SPMV_OK);
            assert_int_equal(spmv_matrix_transpose(&hm, &ht, &err), SPMV_OK);
            assert_int_equal(spmv_gpu_matrix_upload(TG.ctx, &coo, dt, SPMV_FMT_CSR, 32, &gm, &us, &err), SPMV_OK);
            size_t before_t = spmv_gpu_matrix_bytes(gm);
            assert_int_equal(spmv_gpu_matrix_transpose(TG.ctx, gm, &gt, &err), SPMV_OK);
            assert_true(spmv_gpu_matrix_bytes(gm) > before_t);
            static const char *const names[] = {"gpu.csr.spmm", "cusparse.csr", "gpu.csr.vector", "gpu.csr.light",
                                                "gpu.csr.merge", "gpu.csr.texture"};
            for (size_t kn = 0; kn < sizeof names / sizeof *names; kn++) {
                const spmv_kernel *kern = spmv_kernel_find(names[kn]);
                static const int32_t ks[] = {1, 3, 8, 17};
                for (size_t ki = 0; ki < 4; ki++) {
                    int32_t k = ks[ki];
                    if (k > spmv_kernel_max_k(kern))
                        break;
                    for (int t = 0; t < 2; t++) {
                        const spmv_matrix *hu = t ? &ht : &hm;
                        spmv_gpu_matrix *gu = t ? gt : gm;
                        spmv_vec hx, hy, dx, dy, back, want;
                        host_random(dt, hu->cols, k, &hx);
                        host_random(dt, hu->rows, k, &hy);
                        to_device(&hx, &dx);
                        to_device(&hy, &dy);
                        double alpha = (k == 1 && !t) ? tu_rng_value(&TG.rng) : 1.0;
                        double beta = (k == 1 && !t) ? tu_rng_value(&TG.rng) : 0.0;
                        spmv_apply_args a = {alpha, beta, 1, 2};
                        spmv_stats st;
                        double axms = -1;
                        if (beta == 0.0) { /* y is output only: poison it */
                            tu_poison(hy.data, dt, hu->rows * (int64_t)k);
                            assert_int_equal(spmv_vec_write(TG.ctx, &dy, hy.data, &err), SPMV_OK);
                        }
                        int rc = spmv_gpu_apply(TG.ctx, kern, gu, NULL, &a, &dx, &dy, &st, &axms, &err);
                        if (rc != SPMV_OK)
                            fail_msg("%s k=%d op %c %s: %s", names[kn], k, t ? 't' : 'n', spmv_dtype_name(dt),
                                     err.message);
                        read_back(&dy, &back);
                        /* the host side: the reference per column, then alpha/beta */
                        assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, dt, hu->rows, k, &want, &err), SPMV_OK);
                        size_t vs = spmv_dtype_size(dt);
                        for (int32_t j = 0; j < k; j++)
                            spmv_reference(&hu->csr, (char *)hx.data + (size_t)j * hu->cols * vs,
                                           (char *)want.data + (size_t)j * hu->rows * vs);
                        if (beta != 0.0 || alpha != 1.0)
                            assert_int_equal(spmv_vec_axpby(NULL, beta, &hy, alpha, &want, &err), SPMV_OK);
                        double e = rel(&back, &want);
                        if (!(e <= tol))
                            fail_msg("%s k=%d op %c %s shape %zu: rel err %.3g", names[kn], k, t ? 't' : 'n',
                                     spmv_dtype_name(dt), si, e);
                        spmv_vec_free(NULL, &back);
                        spmv_vec_free(NULL, &want);
                        spmv_vec_free(TG.ctx, &dx);
                        spmv_vec_free(TG.ctx, &dy);
                        spmv_vec_free(NULL, &hx);
                        spmv_vec_free(NULL, &hy);
                    }
                }
                print_message("# apply %s %s shape %zu: ok\n", names[kn], spmv_dtype_name(dt), si);
            }
            /* a one-column kernel refuses k = 2 */
            spmv_vec dx, dy;
            assert_int_equal(spmv_vec_alloc(TG.ctx, SPMV_DEVICE_GPU, dt, hm.cols, 2, &dx, &err), SPMV_OK);
            assert_int_equal(spmv_vec_alloc(TG.ctx, SPMV_DEVICE_GPU, dt, hm.rows, 2, &dy, &err), SPMV_OK);
            spmv_apply_args a = {1, 0, 0, 1};
            assert_int_equal(spmv_gpu_apply(TG.ctx, spmv_kernel_find("gpu.csr.vector"), gm, NULL, &a, &dx, &dy, NULL,
                                            NULL, &err), SPMV_ERR_INVALID);
            spmv_vec_free(TG.ctx, &dx);
            spmv_vec_free(TG.ctx, &dy);
            spmv_gpu_matrix_free(TG.ctx, gm);
            spmv_matrix_free(&hm);
            spmv_matrix_free(&ht);
            spmv_coo_free(&coo);
        }
    }
    assert_int_equal(used(), u0);
}

typedef struct gop {
    spmv_gpu_matrix *m;
    const spmv_kernel *k;
} gop;

static int gop_apply(void *ctx, const spmv_vec *x, spmv_vec *y, double *ms, spmv_error *err)
{
    gop *g = ctx;
    spmv_apply_args a = {1, 0, 0, 1};
    spmv_stats st;
    int rc = spmv_gpu_apply(TG.ctx, g->k, g->m, NULL, &a, x, y, &st, NULL, err);
    *ms = st.median_ms;
    return rc;
}

/* The same product queued and not waited for: the fused path's
 * device_apply (one column, or k for gpu.csr.spmm). */
static int gop_device_apply(void *ctx, const spmv_vec *x, spmv_vec *y, spmv_error *err)
{
    gop *g = ctx;
    return spmv_gpu_launch(TG.ctx, g->k, g->m, NULL, x, y, err);
}

static void test_solvers(void **state)
{
    (void)state;
    TU_NEED_GPU();
    spmv_error err = {0};
    size_t u0 = used();
    spmv_coo coo;
    spmv_gen_spec g = {.kind = SPMV_GEN_POISSON2D, .n = 200, .seed = tu_rng_next(&TG.rng)};
    assert_int_equal(spmv_gen(&g, &coo, &err), SPMV_OK);
    spmv_matrix hm;
    spmv_gpu_matrix *gm;
    spmv_gpu_upload_stats us;
    assert_int_equal(spmv_matrix_build(&coo, SPMV_FLOAT64, SPMV_FMT_CSR, 32, 0, &hm, &err), SPMV_OK);
    assert_int_equal(spmv_gpu_matrix_upload(TG.ctx, &coo, SPMV_FLOAT64, SPMV_FMT_CSR, 32, &gm, &us, &err), SPMV_OK);
    gop op = {gm, spmv_kernel_find("cusparse.csr")};
    spmv_linop a = {hm.rows, hm.cols, &op, gop_apply};
    spmv_vec hxt, hb, db, dx, hx, hd, dd;
    host_random(SPMV_FLOAT64, hm.rows, 1, &hxt);
    host_random(SPMV_FLOAT64, hm.rows, 1, &hb);
    spmv_reference(&hm.csr, hxt.data, hb.data);
    to_device(&hb, &db);
    host_random(SPMV_FLOAT64, hm.rows, 1, &hd);
    assert_int_equal(spmv_csr_inv_diag(&hm.csr, hd.data, &err), SPMV_OK);
    to_device(&hd, &dd);
    for (int meth = 0; meth < 3; meth++)
        for (int j = 0; j < 2; j++) {
            assert_int_equal(spmv_vec_alloc(TG.ctx, SPMV_DEVICE_GPU, SPMV_FLOAT64, hm.rows, 1, &dx, &err), SPMV_OK);
            assert_int_equal(spmv_vec_fill(TG.ctx, &dx, 0, &err), SPMV_OK);
            spmv_solve_options o = {.method = (spmv_solve_method)meth, .restart = 40, .tol = 1e-10, .maxit = 20000,
                                    .inv_diag = j ? &dd : NULL};
            spmv_solve_result r;
            assert_int_equal(spmv_solve(TG.ctx, &a, &db, &dx, &o, &r, &err), SPMV_OK);
            read_back(&dx, &hx);
            /* the residual on the host */
            double *ax = malloc(sizeof(double) * (size_t)hm.rows), num = 0, den = 0;
            spmv_reference(&hm.csr, hx.data, ax);
            for (int32_t i = 0; i < hm.rows; i++) {
                num += (at(&hb, i) - ax[i]) * (at(&hb, i) - ax[i]);
                den += at(&hb, i) * at(&hb, i);
            }
            free(ax);
            double rr = sqrt(num / den);
            print_message("# GPU %s%s: %s, %d iterations, relres %.3g (host %.3g), %.1f ms (spmv %.1f)\n",
                          spmv_solve_method_name(o.method), j ? "+jacobi" : "", spmv_solve_stop_name(r.stop),
                          r.iterations, r.relres, rr, r.total_ms, r.spmv_ms);
            assert_int_equal(r.stop, SPMV_STOP_CONVERGED);
            assert_true(rr <= 1.01e-10);
            spmv_solve_result_free(&r);
            spmv_vec_free(NULL, &hx);
            spmv_vec_free(TG.ctx, &dx);
        }
    spmv_vec_free(TG.ctx, &db);
    spmv_vec_free(TG.ctx, &dd);
    spmv_vec_free(NULL, &hb);
    spmv_vec_free(NULL, &hd);
    spmv_vec_free(NULL, &hxt);
    spmv_gpu_matrix_free(TG.ctx, gm);
    spmv_matrix_free(&hm);
    spmv_coo_free(&coo);
    assert_int_equal(used(), u0);
}

/* The device V-cycle against the host's (engine/amg.c, the reference) on
 * 2-D Poisson with both smoothers, the hierarchy in float64 and in float32
 * (issue 29's mixed precision), with float64 and float32 vectors, z
 * poisoned first; every byte back after the free. */
static void test_amg(void **state)
{
    (void)state;
    TU_NEED_GPU();
    spmv_error err = {0};
    spmv_gen_spec g = {SPMV_GEN_POISSON2D, 120 + tu_rng_range(&TG.rng, 0, 40), 5, 0, 1};
    spmv_coo coo;
    spmv_csr a;
    assert_int_equal(spmv_gen(&g, &coo, &err), SPMV_OK);
    assert_int_equal(spmv_coo_to_csr(&coo, SPMV_FLOAT64, &a, &err), SPMV_OK);
    size_t u0 = used();
    for (int s = 0; s < 4; s++) {
        spmv_dtype ht = s / 2 ? SPMV_FLOAT32 : SPMV_FLOAT64; /* the hierarchy's */
        spmv_amg_options o;
        spmv_amg_defaults(&o);
        o.smoother = s % 2 ? SPMV_AMG_JACOBI : SPMV_AMG_CHEBYSHEV;
        o.max_coarse = 80;
        spmv_amg *h;
        spmv_gpu_amg *dg;
        assert_int_equal(spmv_amg_setup(&a, &o, &h, &err), SPMV_OK);
        assert_int_equal(spmv_gpu_amg_upload(TG.ctx, h, ht, &dg, &err), SPMV_OK);
        assert_true(spmv_gpu_amg_bytes(dg) > 0);
        for (int d = 0; d < 2; d++) {
            spmv_dtype dt = d ? SPMV_FLOAT32 : SPMV_FLOAT64;
            spmv_vec hr, hz, dr, dz;
            host_random(dt, a.rows, 1, &hr);
            to_device(&hr, &dr);
            assert_int_equal(spmv_vec_alloc(TG.ctx, SPMV_DEVICE_GPU, dt, a.rows, 1, &dz, &err), SPMV_OK);
            assert_int_equal(spmv_vec_fill(TG.ctx, &dz, NAN, &err), SPMV_OK); /* poisoned */
            assert_int_equal(spmv_gpu_amg_vcycle(TG.ctx, dg, &dr, &dz, &err), SPMV_OK);
            assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, dt, a.rows, 1, &hz, &err), SPMV_OK);
            assert_int_equal(spmv_vec_read(TG.ctx, &dz, hz.data, &err), SPMV_OK);
            double *r64 = malloc((size_t)a.rows * 8), *z64 = malloc((size_t)a.rows * 8);
            for (int32_t i = 0; i < a.rows; i++)
                r64[i] = at(&hr, i);
            spmv_amg_vcycle(h, r64, z64);
            double e = 0, m = 0;
            for (int32_t i = 0; i < a.rows; i++) {
                e = fmax(e, fabs(at(&hz, i) - z64[i]));
                m = fmax(m, fabs(z64[i]));
            }
            print_message("# GPU amg %s, %s hierarchy, %s vectors: %d levels, max |z - z_host| / max |z_host| = "
                          "%.3g\n", s % 2 ? "jacobi" : "chebyshev", spmv_dtype_name(ht), spmv_dtype_name(dt),
                          h->nlevels, e / m);
            assert_true(isfinite(e) && e <= (s / 2 ? 1e-4 : d ? 1e-5 : 1e-11) * m);
            free(r64);
            free(z64);
            spmv_vec_free(NULL, &hr);
            spmv_vec_free(NULL, &hz);
            spmv_vec_free(TG.ctx, &dr);
            spmv_vec_free(TG.ctx, &dz);
        }
        spmv_gpu_amg_free(TG.ctx, dg);
        spmv_amg_free(h);
    }
    assert_int_equal(used(), u0);
    spmv_coo_free(&coo);
    spmv_csr_free(&a);
}

/* The device V-cycle on k columns (spmv_gpu_amg_vcycle_k: an SpMM per
 * product, 2-D smoothing kernels, a gemm coarse solve) against the host's
 * k-column cycle (engine/amg.c spmv_amg_vcycle_k, which is the one-column
 * cycle's bits per column), k = 1, 3, 8, both smoothers, the hierarchy in
 * float64 and float32, float64 and float32 blocks; k = 8 also under a
 * mask whose columns off must keep their poison. Then the preconditioner
 * objects' spmv_precond_apply_k on the GPU (amg, chebyshev, jacobi and
 * block_jacobi: one pass each) against the host objects'. z poisoned
 * first; every byte back after the frees. */
static void amg_k_case(spmv_amg *h, spmv_gpu_amg *dg, spmv_dtype dt, int32_t k, const bool *active, double tol,
                       const char *what)
{
    spmv_error err = {0};
    int32_t n = h->lv[0].A.rows;
    spmv_vec hr, hz, dr, dz;
    host_random(dt, n, k, &hr);
    to_device(&hr, &dr);
    assert_int_equal(spmv_vec_alloc(TG.ctx, SPMV_DEVICE_GPU, dt, n, k, &dz, &err), SPMV_OK);
    assert_int_equal(spmv_vec_fill(TG.ctx, &dz, NAN, &err), SPMV_OK); /* poisoned */
    if (spmv_gpu_amg_vcycle_k(TG.ctx, dg, &dr, &dz, active, &err) != SPMV_OK)
        fail_msg("GPU amg k=%d: %s", k, err.message);
    assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, dt, n, k, &hz, &err), SPMV_OK);
    assert_int_equal(spmv_vec_read(TG.ctx, &dz, hz.data, &err), SPMV_OK);
    size_t nk = (size_t)n * k;
    double *r64 = malloc(nk * 8), *z64 = malloc(nk * 8);
    for (size_t i = 0; i < nk; i++)
        r64[i] = at(&hr, (int64_t)i);
    assert_int_equal(spmv_amg_vcycle_k(h, k, r64, z64, &err), SPMV_OK);
    double worst = 0;
    for (int32_t j = 0; j < k; j++) {
        double e = 0, m = 0;
        for (int32_t i = 0; i < n; i++) {
            double v = at(&hz, (int64_t)j * n + i);
            if (active && !active[j]) {
                assert_true(isnan(v)); /* left alone */
                continue;
            }
            e = isnan(v) ? INFINITY : fmax(e, fabs(v - z64[(size_t)j * n + i]));
            m = fmax(m, fabs(z64[(size_t)j * n + i]));
        }
        if (active && !active[j])
            continue;
        worst = fmax(worst, e / m);
        if (!(e <= tol * m))
            fail_msg("GPU amg %s, %s block, k=%d column %d: max |z - z_host| / max |z_host| = %.3g", what,
                     spmv_dtype_name(dt), k, j, e / m);
    }
    print_message("# GPU amg k-column %s, %s block, k=%d%s: worst column max |z - z_host| / max |z_host| = %.3g\n",
                  what, spmv_dtype_name(dt), k, active ? " (masked)" : "", worst);
    free(r64);
    free(z64);
    spmv_vec_free(NULL, &hr);
    spmv_vec_free(NULL, &hz);
    spmv_vec_free(TG.ctx, &dr);
    spmv_vec_free(TG.ctx, &dz);
}

/* spmv_precond_apply_k of a GPU object against the host object's, k = 8,
 * half the columns masked off (their z keep the poison). */
static void precond_k_case(const spmv_csr *a, spmv_precond_type t)
{
    spmv_error err = {0};
    spmv_precond_options po;
    spmv_precond_defaults(&po, t);
    po.amg.aggregation = SPMV_AMG_AGG_MIS2; /* the GPU's: the host's object then holds the same hierarchy */
    if (t == SPMV_PRECOND_BLOCK_JACOBI)
        po.block_size = a->rows % 4 == 0 ? 4 : a->rows % 3 == 0 ? 3 : 1;
    spmv_precond *hp, *dp;
    assert_int_equal(spmv_precond_setup(NULL, a, &po, &hp, &err), SPMV_OK);
    assert_int_equal(spmv_precond_setup(TG.ctx, a, &po, &dp, &err), SPMV_OK);
    int32_t n = a->rows, k = 8;
    bool active[8] = {true, true, false, true, false, false, true, true};
    spmv_vec hr, hz, dr, dz, gz;
    host_random(SPMV_FLOAT64, n, k, &hr);
    to_device(&hr, &dr);
    assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, SPMV_FLOAT64, n, k, &hz, &err), SPMV_OK);
    assert_int_equal(spmv_vec_alloc(TG.ctx, SPMV_DEVICE_GPU, SPMV_FLOAT64, n, k, &dz, &err), SPMV_OK);
    assert_int_equal(spmv_vec_fill(NULL, &hz, NAN, &err), SPMV_OK);
    assert_int_equal(spmv_vec_fill(TG.ctx, &dz, NAN, &err), SPMV_OK);
    assert_int_equal(spmv_precond_apply_k(NULL, hp, &hr, &hz, active, &err), SPMV_OK);
    if (spmv_precond_apply_k(TG.ctx, dp, &dr, &dz, active, &err) != SPMV_OK)
        fail_msg("GPU %s apply_k: %s", spmv_precond_type_name(t), err.message);
    read_back(&dz, &gz);
    double worst = 0;
    for (int32_t j = 0; j < k; j++) {
        double e = 0, m = 0;
        for (int32_t i = 0; i < n; i++) {
            double g = ((double *)gz.data)[(size_t)j * n + i], hv = ((double *)hz.data)[(size_t)j * n + i];
            if (!active[j]) {
                assert_true(isnan(g) && isnan(hv));
                continue;
            }
            e = isnan(g) ? INFINITY : fmax(e, fabs(g - hv));
            m = fmax(m, fabs(hv));
        }
        if (active[j])
            worst = fmax(worst, e / m);
    }
    print_message("# GPU %s apply_k (k=8, 5 active): worst column max |z - z_host| / max |z_host| = %.3g\n",
                  spmv_precond_type_name(t), worst);
    assert_true(worst <= 1e-11);
    spmv_vec_free(NULL, &hr);
    spmv_vec_free(NULL, &hz);
    spmv_vec_free(NULL, &gz);
    spmv_vec_free(TG.ctx, &dr);
    spmv_vec_free(TG.ctx, &dz);
    spmv_precond_free(NULL, hp);
    spmv_precond_free(TG.ctx, dp);
}

static void test_amg_k(void **state)
{
    (void)state;
    TU_NEED_GPU();
    spmv_error err = {0};
    spmv_gen_spec g = {SPMV_GEN_POISSON2D, 120 + tu_rng_range(&TG.rng, 0, 40), 5, 0, 1};
    spmv_coo coo;
    spmv_csr a;
    assert_int_equal(spmv_gen(&g, &coo, &err), SPMV_OK);
    assert_int_equal(spmv_coo_to_csr(&coo, SPMV_FLOAT64, &a, &err), SPMV_OK);
    size_t u0 = used();
    static const int32_t ks[3] = {1, 3, 8};
    bool mask[8] = {false, true, true, false, true, true, false, true};
    for (int s = 0; s < 4; s++) {
        spmv_dtype ht = s / 2 ? SPMV_FLOAT32 : SPMV_FLOAT64; /* the hierarchy's */
        spmv_amg_options o;
        spmv_amg_defaults(&o);
        o.smoother = s % 2 ? SPMV_AMG_JACOBI : SPMV_AMG_CHEBYSHEV;
        o.max_coarse = 80;
        spmv_amg *h;
        spmv_gpu_amg *dg;
        assert_int_equal(spmv_amg_setup(&a, &o, &h, &err), SPMV_OK);
        assert_int_equal(spmv_gpu_amg_upload(TG.ctx, h, ht, &dg, &err), SPMV_OK);
        char what[64];
        snprintf(what, sizeof what, "%s, %s hierarchy, %d levels", s % 2 ? "jacobi" : "chebyshev",
                 spmv_dtype_name(ht), h->nlevels);
        for (int d = 0; d < 2; d++) {
            spmv_dtype dt = d ? SPMV_FLOAT32 : SPMV_FLOAT64;
            double tol = s / 2 ? 1e-4 : d ? 1e-5 : 1e-11;
            for (int c = 0; c < 3; c++)
                amg_k_case(h, dg, dt, ks[c], NULL, tol, what);
            amg_k_case(h, dg, dt, 8, mask, tol, what);
            amg_k_case(h, dg, dt, 3, NULL, tol, what); /* fewer columns than the work was grown for */
        }
        spmv_gpu_amg_free(TG.ctx, dg);
        spmv_amg_free(h);
    }
    precond_k_case(&a, SPMV_PRECOND_AMG);
    precond_k_case(&a, SPMV_PRECOND_CHEBYSHEV);
    precond_k_case(&a, SPMV_PRECOND_JACOBI);
    precond_k_case(&a, SPMV_PRECOND_BLOCK_JACOBI);
    assert_int_equal(used(), u0);
    spmv_coo_free(&coo);
    spmv_csr_free(&a);
}

/* ------------------------------------------- the AMG setup on the GPU */

/* A CSR of n rows whose row i holds columns i + off[0..m) (ascending
 * offsets, 0 among them, those outside 0..n-1 dropped), the value of each
 * off-diagonal (i, j) given by w(min(i, j), max(i, j)) (symmetric), the
 * diagonal the sum of the row's |off-diagonals| plus extra(i): SPD when
 * extra >= 0 and one row has extra > 0 in each connected part. */
typedef double (*pair_weight)(int64_t i, int64_t j, const void *arg);
typedef double (*row_extra)(int64_t i, const void *arg);

static void stencil_csr(int32_t n, const int64_t *off, int m, pair_weight w, row_extra extra, const void *arg,
                        spmv_csr *a)
{
    memset(a, 0, sizeof *a);
    a->rows = a->cols = n;
    a->dtype = SPMV_FLOAT64;
    a->row_ptr = malloc(((size_t)n + 1) * sizeof(int32_t));
    a->col = malloc((size_t)n * m * sizeof(int32_t));
    double *v = malloc((size_t)n * m * sizeof(double));
    a->val = v;
    assert_non_null(a->row_ptr);
    assert_non_null(a->col);
    assert_non_null(v);
    int64_t e = 0;
    a->row_ptr[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t d = -1;
        double s = extra(i, arg);
        for (int q = 0; q < m; q++) {
            int64_t j = i + off[q];
            if (j < 0 || j >= n)
                continue;
            if (off[q] == 0) {
                d = e;
            } else {
                double x = w(i < j ? i : j, i < j ? j : i, arg);
                if (x == 0.0)
                    continue;
                v[e] = x;
                s += fabs(x);
            }
            a->col[e++] = (int32_t)j;
        }
        v[d] = s;
        a->row_ptr[i + 1] = (int32_t)e;
    }
    a->nnz = e;
}

/* 3-D finite volumes of side nx with a log-normal cell permeability
 * (tools/solve_problems.py's fv_diffusion, uncorrelated): harmonic-mean
 * transmissibilities between face neighbours, Dirichlet faces at x = 0
 * and x = 1 (half a cell away). */
typedef struct fv_grid {
    int64_t nx;
    double *k;
} fv_grid;

static double fv_weight(int64_t i, int64_t j, const void *arg)
{
    const fv_grid *g = arg;
    int64_t d = j - i, nx = g->nx;
    /* i and j are face neighbours only if the offset does not wrap a row or a plane */
    if ((d == 1 && (j % nx) == 0) || (d == nx && (j / nx) % nx == 0))
        return 0.0;
    return -2.0 * g->k[i] * g->k[j] / (g->k[i] + g->k[j]);
}

static double fv_extra(int64_t i, const void *arg)
{
    const fv_grid *g = arg;
    int64_t x = i / (g->nx * g->nx);
    return x == 0 || x == g->nx - 1 ? 2.0 * g->k[i] : 0.0;
}

static void fv_diffusion(int64_t nx, spmv_csr *a)
{
    fv_grid g = {nx, malloc((size_t)(nx * nx * nx) * sizeof(double))};
    assert_non_null(g.k);
    for (int64_t i = 0; i < nx * nx * nx; i++) { /* exp(2 z), z about standard normal (a sum of 12 uniforms) */
        double z = -6.0;
        for (int u = 0; u < 12; u++)
            z += tu_rng_uniform(&TG.rng);
        g.k[i] = exp(2.0 * z);
    }
    const int64_t off[7] = {-nx * nx, -nx, -1, 0, 1, nx, nx * nx};
    stencil_csr((int32_t)(nx * nx * nx), off, 7, fv_weight, fv_extra, &g, a);
    free(g.k);
}

/* Random SPD: a symmetric graph of random offsets with weights hashed
 * from the pair and the seed, diagonally dominant (extra 1e-3 a row). */
typedef struct rnd_spd {
    uint64_t salt;
} rnd_spd;

static double rnd_weight(int64_t i, int64_t j, const void *arg)
{
    uint64_t z = ((const rnd_spd *)arg)->salt ^ ((uint64_t)i * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)j << 32);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return -(0.1 + 0.9 * (double)(z >> 11) * 0x1.0p-53);
}

static double rnd_extra(int64_t i, const void *arg)
{
    (void)i;
    (void)arg;
    return 1e-3;
}

static void random_spd(int32_t n, spmv_csr *a)
{
    int64_t off[9];
    int m = 0;
    off[m++] = 0;
    while (m < 5) { /* four distinct positive offsets, mirrored */
        int64_t o = tu_rng_range(&TG.rng, 1, n / 8);
        bool seen = false;
        for (int q = 1; q < m; q++)
            seen = seen || off[q] == o;
        if (!seen)
            off[m++] = o;
    }
    for (int q = 1; q < 5; q++)
        off[m++] = -off[q];
    for (int p = 1; p < m; p++) /* ascending */
        for (int q = p; q > 0 && off[q] < off[q - 1]; q--) {
            int64_t t = off[q];
            off[q] = off[q - 1];
            off[q - 1] = t;
        }
    rnd_spd r = {tu_rng_next(&TG.rng)};
    stencil_csr(n, off, m, rnd_weight, rnd_extra, &r, a);
}

/* CG on the host preconditioned by h's V-cycle: iterations to 1e-8. */
static int32_t amg_pcg(const spmv_csr *a, spmv_amg *h, const double *b)
{
    int32_t n = a->rows, it;
    const double *v = a->val;
    double *x = calloc((size_t)n, 8), *r = malloc((size_t)n * 8), *z = malloc((size_t)n * 8);
    double *p = calloc((size_t)n, 8), *q = malloc((size_t)n * 8), bb = 0, rz_old = 1;
    for (int32_t i = 0; i < n; i++)
        bb += b[i] * b[i];
    memcpy(r, b, (size_t)n * 8);
    for (it = 0; it < 1000; it++) {
        double rr = 0, rz = 0, pq = 0;
        for (int32_t i = 0; i < n; i++)
            rr += r[i] * r[i];
        if (rr <= 1e-16 * bb)
            break;
        spmv_amg_vcycle(h, r, z);
        for (int32_t i = 0; i < n; i++)
            rz += r[i] * z[i];
        for (int32_t i = 0; i < n; i++)
            p[i] = z[i] + (it ? rz / rz_old : 0.0) * p[i];
        rz_old = rz;
        for (int32_t i = 0; i < n; i++) {
            double s = 0;
            for (int32_t e = a->row_ptr[i]; e < a->row_ptr[i + 1]; e++)
                s += v[e] * p[a->col[e]];
            q[i] = s;
            pq += p[i] * s;
        }
        for (int32_t i = 0; i < n; i++) {
            x[i] += rz / pq * p[i];
            r[i] -= rz / pq * q[i];
        }
    }
    free(x);
    free(r);
    free(z);
    free(p);
    free(q);
    return it;
}

/* The hierarchy with the GPU's products (spmv_gpu_amg_products) against
 * the host's on one matrix: the same levels, every level's A, P and R of
 * the same pattern with values within 1e-12 (relative to the operator's
 * largest), CG iteration counts within one; both setups' times printed
 * (reported, not asserted), every device byte back. */
static void amg_setup_pair(const char *what, const spmv_csr *a)
{
    spmv_error err = {0};
    spmv_amg_options o;
    spmv_amg_defaults(&o);
    o.max_coarse = 100;
    spmv_amg *hh, *hg;
    spmv_amg_products gpu = {spmv_gpu_amg_products, TG.ctx};
    size_t u0 = used();
    assert_int_equal(spmv_amg_setup_with(a, &o, NULL, &hh, &err), SPMV_OK);
    int st = spmv_amg_setup_with(a, &o, &gpu, &hg, &err);
    if (st)
        print_message("# %s: %s\n", what, err.message);
    assert_int_equal(st, SPMV_OK);
    assert_int_equal(used(), u0);
    assert_int_equal(hg->nlevels, hh->nlevels);
    assert_true(hh->nlevels >= 2);
    double worst = 0;
    for (int32_t l = 0; l < hh->nlevels; l++) {
        const spmv_csr *g3[3] = {&hg->lv[l].A, &hg->lv[l].P, &hg->lv[l].R};
        const spmv_csr *h3[3] = {&hh->lv[l].A, &hh->lv[l].P, &hh->lv[l].R};
        for (int m = 0; m < 3; m++) {
            if (!h3[m]->row_ptr) { /* the coarsest level's P and R */
                assert_null(g3[m]->row_ptr);
                continue;
            }
            double e = INFINITY;
            st = spmv_csr_compare(g3[m], h3[m], &e, &err);
            if (st)
                print_message("# %s level %d %c: %s\n", what, l, "APR"[m], err.message);
            assert_int_equal(st, SPMV_OK);
            worst = fmax(worst, e);
            assert_true(e <= 1e-12);
        }
    }
    double *b = malloc((size_t)a->rows * 8);
    for (int32_t i = 0; i < a->rows; i++)
        b[i] = tu_rng_value(&TG.rng);
    int32_t ith = amg_pcg(a, hh, b), itg = amg_pcg(a, hg, b);
    print_message("# GPU amg setup, %s (%d rows): %d levels, oc %.3f, max rel diff %.2g; CG %d iterations "
                  "(host setup), %d (GPU products); setup %.1f ms host, %.1f ms with GPU products (A*T %.1f, "
                  "A*P %.1f, R*(A*P) %.1f, copies %.1f)\n",
                  what, a->rows, hh->nlevels, hh->operator_complexity, worst, ith, itg, hh->setup_ms, hg->setup_ms,
                  hg->phase_ms[SPMV_AMG_AT], hg->phase_ms[SPMV_AMG_AP], hg->phase_ms[SPMV_AMG_RAP],
                  hg->phase_ms[SPMV_AMG_COPY]);
    assert_true(ith < 1000 && abs(ith - itg) <= 1);
    free(b);
    spmv_amg_free(hh);
    spmv_amg_free(hg);
}

static void scaled_poisson(int64_t side, spmv_csr *a);

/* Each matrix the AMG setup tests take, built afresh (3-D Poisson, 3-D FV
 * diffusion, a random SPD matrix, a scaled 2-D Poisson), handed to pair;
 * the first also to extra, when given. */
static void each_amg_matrix(void (*pair)(const char *, const spmv_csr *), void (*extra)(spmv_csr *))
{
    spmv_error err = {0};
    spmv_csr a;
    spmv_coo coo;
    spmv_gen_spec g = {SPMV_GEN_POISSON3D, 24 + tu_rng_range(&TG.rng, 0, 12), 7, 0, 1};
    assert_int_equal(spmv_gen(&g, &coo, &err), SPMV_OK);
    assert_int_equal(spmv_coo_to_csr(&coo, SPMV_FLOAT64, &a, &err), SPMV_OK);
    spmv_coo_free(&coo);
    pair("3-D Poisson", &a);
    if (extra)
        extra(&a);
    spmv_csr_free(&a);
    fv_diffusion(20 + tu_rng_range(&TG.rng, 0, 12), &a);
    pair("3-D FV diffusion", &a);
    spmv_csr_free(&a);
    random_spd(20000 + (int32_t)tu_rng_range(&TG.rng, 0, 20000), &a);
    pair("random SPD", &a);
    spmv_csr_free(&a);
    scaled_poisson(100 + 2 * tu_rng_range(&TG.rng, 0, 20), &a);
    pair("scaled 2-D Poisson", &a);
    spmv_csr_free(&a);
}

static void test_amg_setup_gpu(void **state)
{
    (void)state;
    TU_NEED_GPU();
    each_amg_matrix(amg_setup_pair, NULL);
}

/* The V-cycle of a device hierarchy against the host's on a random r
 * (float64 vectors): max |z - z_host| / max |z_host|. */
static double vcycle_gap(spmv_amg *h, spmv_gpu_amg *dg, int32_t n)
{
    spmv_error err = {0};
    spmv_vec hr, hz, dr, dz;
    host_random(SPMV_FLOAT64, n, 1, &hr);
    to_device(&hr, &dr);
    assert_int_equal(spmv_vec_alloc(TG.ctx, SPMV_DEVICE_GPU, SPMV_FLOAT64, n, 1, &dz, &err), SPMV_OK);
    assert_int_equal(spmv_vec_fill(TG.ctx, &dz, NAN, &err), SPMV_OK); /* poisoned */
    assert_int_equal(spmv_gpu_amg_vcycle(TG.ctx, dg, &dr, &dz, &err), SPMV_OK);
    read_back(&dz, &hz);
    double *z = malloc((size_t)n * 8), e = 0, m = 0;
    spmv_amg_vcycle(h, hr.data, z);
    for (int32_t i = 0; i < n; i++) {
        e = fmax(e, fabs(at(&hz, i) - z[i]));
        m = fmax(m, fabs(z[i]));
    }
    free(z);
    spmv_vec_free(NULL, &hr);
    spmv_vec_free(NULL, &hz);
    spmv_vec_free(TG.ctx, &dr);
    spmv_vec_free(TG.ctx, &dz);
    return isfinite(e) ? e / m : INFINITY;
}

/* The hierarchy built on the GPU (spmv_gpu_amg_build) against the host's
 * with mis2 aggregation on one matrix: the same levels of the same sizes,
 * every level's A, P and R within 1e-12 of the host's (relative to the
 * operator's largest: the device's dots and norms add in their own
 * order), the V-cycles within 1e-10, in float64 and float32; every
 * device byte back. */
static void amg_build_pair(const char *what, const spmv_csr *a)
{
    spmv_error err = {0};
    spmv_amg_options o;
    spmv_amg_defaults(&o);
    o.max_coarse = 100;
    o.aggregation = SPMV_AMG_AGG_MIS2;
    spmv_amg *hh;
    spmv_gpu_amg *dg;
    spmv_amg_summary sum;
    size_t u0 = used();
    assert_int_equal(spmv_amg_setup(a, &o, &hh, &err), SPMV_OK);
    int st = spmv_gpu_amg_build(TG.ctx, a, &o, SPMV_FLOAT64, &dg, &sum, &err);
    if (st)
        fail_msg("%s: GPU build: %s", what, err.message);
    assert_int_equal(sum.nlevels, hh->nlevels);
    assert_true(hh->nlevels >= 2);
    double worst = 0;
    for (int32_t l = 0; l < hh->nlevels; l++) {
        spmv_csr g3[3];
        assert_int_equal(spmv_gpu_amg_level_get(TG.ctx, dg, l, &g3[0], &g3[1], &g3[2], &err), SPMV_OK);
        const spmv_csr *h3[3] = {&hh->lv[l].A, &hh->lv[l].P, &hh->lv[l].R};
        for (int m = 0; m < 3; m++) {
            if (!h3[m]->row_ptr) {
                assert_null(g3[m].row_ptr);
                continue;
            }
            double e = INFINITY;
            assert_int_equal(g3[m].rows, h3[m]->rows);
            assert_int_equal(g3[m].nnz, h3[m]->nnz);
            if (spmv_csr_compare(&g3[m], h3[m], &e, &err) != SPMV_OK)
                fail_msg("%s level %d %c: %s", what, l, "APR"[m], err.message);
            worst = fmax(worst, e);
            assert_true(e <= 1e-12);
            spmv_csr_free(&g3[m]);
        }
    }
    double gap = vcycle_gap(hh, dg, a->rows);
    print_message("# GPU amg build, %s (%d rows): %d levels (rows %d .. %d), oc %.3f, mis2 rounds %d; max rel diff "
                  "%.2g, V-cycle %.2g; setup %.1f ms on the GPU (strength %.1f, aggregation %.1f, rho %.1f, products "
                  "%.1f), %.1f ms on the host\n",
                  what, a->rows, sum.nlevels, sum.rows[0], sum.coarse_n, sum.operator_complexity, sum.rounds[0], worst,
                  gap, sum.setup_ms, sum.phase_ms[SPMV_AMG_STRENGTH], sum.phase_ms[SPMV_AMG_AGGREGATE],
                  sum.phase_ms[SPMV_AMG_LEVEL],
                  sum.phase_ms[SPMV_AMG_AT] + sum.phase_ms[SPMV_AMG_AP] + sum.phase_ms[SPMV_AMG_RAP], hh->setup_ms);
    assert_true(gap <= 1e-10);
    spmv_gpu_amg_free(TG.ctx, dg);
    assert_int_equal(spmv_gpu_amg_build(TG.ctx, a, &o, SPMV_FLOAT32, &dg, &sum, &err), SPMV_OK);
    gap = vcycle_gap(hh, dg, a->rows);
    print_message("# GPU amg build, %s, float32 hierarchy: V-cycle %.2g\n", what, gap);
    assert_true(gap <= 1e-4);
    spmv_gpu_amg_free(TG.ctx, dg);
    spmv_amg_free(hh);
    assert_int_equal(used(), u0);
}

/* What the device build refuses: the host's kinds (UNAVAILABLE, nothing
 * built), a zero diagonal (INVALID, the row named); nothing left behind. */
static void amg_build_refusals(spmv_csr *a)
{
    spmv_error err = {0};
    spmv_amg_options o;
    spmv_gpu_amg *dg = (spmv_gpu_amg *)&err;
    spmv_amg_summary sum;
    size_t u0 = used();
    spmv_amg_defaults(&o);
    o.aggregation = SPMV_AMG_AGG_STANDARD;
    assert_int_equal(spmv_gpu_amg_build(TG.ctx, a, &o, SPMV_FLOAT64, &dg, &sum, &err), SPMV_ERR_UNAVAILABLE);
    assert_null(dg);
    spmv_amg_defaults(&o);
    double *ones = malloc((size_t)a->rows * 8);
    for (int32_t i = 0; i < a->rows; i++)
        ones[i] = 1.0;
    o.near_nullspace = ones;
    o.nullspace_k = 1;
    assert_int_equal(spmv_gpu_amg_build(TG.ctx, a, &o, SPMV_FLOAT64, &dg, &sum, &err), SPMV_ERR_UNAVAILABLE);
    free(ones);
    spmv_amg_defaults(&o);
    int32_t row = (int32_t)tu_rng_range(&TG.rng, 0, a->rows - 1);
    double keep = 0;
    for (int32_t p = a->row_ptr[row]; p < a->row_ptr[row + 1]; p++)
        if (a->col[p] == row) {
            keep = ((double *)a->val)[p];
            ((double *)a->val)[p] = 0.0;
        }
    assert_int_equal(spmv_gpu_amg_build(TG.ctx, a, &o, SPMV_FLOAT64, &dg, &sum, &err), SPMV_ERR_INVALID);
    char want[32];
    snprintf(want, sizeof want, "row %d ", row);
    print_message("# GPU amg build refused: %s\n", err.message);
    assert_non_null(strstr(err.message, want));
    for (int32_t p = a->row_ptr[row]; p < a->row_ptr[row + 1]; p++)
        if (a->col[p] == row)
            ((double *)a->val)[p] = keep;
    assert_int_equal(used(), u0);
}

static void test_amg_build_gpu(void **state)
{
    (void)state;
    TU_NEED_GPU();
    each_amg_matrix(amg_build_pair, amg_build_refusals);
}

/* ------------------------------------------------------ preconditioners */

/* The preconditioners of engine/precond.h to try on a GPU: every type, and
 * the float32 ("precision": "float32") variants of amg, ic0 and ilu0. */
typedef struct pc_case {
    spmv_precond_type type;
    bool float32;
    bool standard; /* amg: standard aggregation (built on the host, copied), else mis2 (built on the GPU) */
} pc_case;

static const pc_case pc_cases[] = {
    {SPMV_PRECOND_JACOBI, false, false}, {SPMV_PRECOND_BLOCK_JACOBI, false, false},
    {SPMV_PRECOND_CHEBYSHEV, false, false}, {SPMV_PRECOND_AMG, false, false},
    {SPMV_PRECOND_AMG, true, false},     {SPMV_PRECOND_AMG, false, true},
    {SPMV_PRECOND_IC0, false, false},    {SPMV_PRECOND_IC0, true, false},
    {SPMV_PRECOND_ILU0, false, false},   {SPMV_PRECOND_ILU0, true, false},
};
#define NPC (sizeof pc_cases / sizeof *pc_cases)

static void pc_options(const pc_case *c, spmv_precond_options *po)
{
    spmv_precond_defaults(po, c->type);
    po->float32 = c->float32;
    po->amg.aggregation = c->standard ? SPMV_AMG_AGG_STANDARD : SPMV_AMG_AGG_MIS2; /* the host's the same */
    if (c->type == SPMV_PRECOND_BLOCK_JACOBI)
        po->block_size = 4;
    if (c->type == SPMV_PRECOND_CHEBYSHEV)
        po->degree = 1 + (int32_t)tu_rng_range(&TG.rng, 0, 9);
}

/* 2-D Poisson of an even side scaled to S A S (S random, positive): SPD,
 * a diagonal that varies, rows a multiple of 4. */
static void scaled_poisson(int64_t side, spmv_csr *a)
{
    spmv_error err = {0};
    spmv_gen_spec g = {SPMV_GEN_POISSON2D, side, 5, 0, 1};
    spmv_coo coo;
    assert_int_equal(spmv_gen(&g, &coo, &err), SPMV_OK);
    assert_int_equal(spmv_coo_to_csr(&coo, SPMV_FLOAT64, a, &err), SPMV_OK);
    spmv_coo_free(&coo);
    double *s = malloc((size_t)a->rows * 8);
    for (int32_t i = 0; i < a->rows; i++)
        s[i] = 0.5 + tu_rng_uniform(&TG.rng);
    for (int32_t i = 0; i < a->rows; i++)
        for (int32_t p = a->row_ptr[i]; p < a->row_ptr[i + 1]; p++)
            ((double *)a->val)[p] *= s[i] * s[a->col[p]];
    free(s);
}

/* dp's apply on dr into dz (poisoned first) with level 0 lent to kernel kn
 * on gm, read back into *back (its last contents freed): the relative
 * distance from the host's hz. */
static double apply_lent(spmv_precond *dp, spmv_precond_type type, spmv_gpu_matrix *gm, const char *kn,
                         const spmv_vec *dr, spmv_vec *dz, spmv_vec *back, const spmv_vec *hz)
{
    spmv_error err = {0};
    spmv_params p = {{0}};
    spmv_gpu_product fine = {gm, spmv_kernel_find(kn), &p};
    spmv_vec_free(NULL, back);
    assert_int_equal(spmv_vec_fill(TG.ctx, dz, NAN, &err), SPMV_OK);
    if (spmv_precond_apply_with(TG.ctx, dp, &fine, dr, dz, &err) != SPMV_OK)
        fail_msg("GPU %s apply with level 0 by %s: %s", spmv_precond_type_name(type), kn, err.message);
    read_back(dz, back);
    return rel(back, hz);
}

/* Every preconditioner's GPU apply against its host apply on the same r
 * (float64 and float32 vectors, z poisoned); its device bytes reported and
 * all given back after the free. */
static void test_precond_apply(void **state)
{
    (void)state;
    TU_NEED_GPU();
    spmv_error err = {0};
    spmv_csr a;
    scaled_poisson(100 + 2 * tu_rng_range(&TG.rng, 0, 20), &a);
    /* the matrix resident, as a solve lends its product to amg and chebyshev (spmv_precond_apply_with): in float64
     * (the hierarchy's dtype: used) and float32 (not: the object's own copy serves) */
    spmv_gpu_matrix *gm[3];
    for (int d = 0; d < 2; d++)
        assert_int_equal(spmv_gpu_matrix_upload_csr(TG.ctx, &a, d ? SPMV_FLOAT32 : SPMV_FLOAT64, SPMV_FMT_CSR,
                                                    SPMV_HACK_SIZE_DEFAULT, &gm[d], NULL, &err), SPMV_OK);
    /* and 2 A in float64: lent in A's place, it moves z wherever the lent product is used */
    for (int64_t p = 0; p < a.nnz; p++) /* doubled, then halved back: exact */
        ((double *)a.val)[p] *= 2.0;
    assert_int_equal(spmv_gpu_matrix_upload_csr(TG.ctx, &a, SPMV_FLOAT64, SPMV_FMT_CSR, SPMV_HACK_SIZE_DEFAULT, &gm[2],
                                                NULL, &err), SPMV_OK);
    for (int64_t p = 0; p < a.nnz; p++)
        ((double *)a.val)[p] *= 0.5;
    static const char *const fine_kernels[] = {"gpu.psell", "cusparse.csr", "gpu.csr.vector"};
    spmv_params fine_p = {{0}};
    for (int d = 0; d < 3; d++) /* their formats built before the count of bytes starts */
        for (int k = 0; k < 3; k++) {
            spmv_vec x, y;
            spmv_dtype dt = d == 1 ? SPMV_FLOAT32 : SPMV_FLOAT64;
            assert_int_equal(spmv_vec_alloc(TG.ctx, SPMV_DEVICE_GPU, dt, a.rows, 1, &x, &err), SPMV_OK);
            assert_int_equal(spmv_vec_alloc(TG.ctx, SPMV_DEVICE_GPU, dt, a.rows, 1, &y, &err), SPMV_OK);
            assert_int_equal(spmv_vec_fill(TG.ctx, &x, 1.0, &err), SPMV_OK);
            assert_int_equal(spmv_gpu_launch(TG.ctx, spmv_kernel_find(fine_kernels[k]), gm[d], &fine_p, &x, &y, &err),
                             SPMV_OK);
            assert_int_equal(spmv_vec_sync(TG.ctx, &err), SPMV_OK);
            spmv_vec_free(TG.ctx, &x);
            spmv_vec_free(TG.ctx, &y);
        }
    size_t u0 = used();
    for (size_t c = 0; c < NPC; c++) {
        spmv_precond_options po;
        pc_options(&pc_cases[c], &po);
        spmv_precond *hp, *dp;
        assert_int_equal(spmv_precond_setup(NULL, &a, &po, &hp, &err), SPMV_OK);
        if (spmv_precond_setup(TG.ctx, &a, &po, &dp, &err) != SPMV_OK)
            fail_msg("GPU %s setup: %s", spmv_precond_type_name(po.type), err.message);
        spmv_precond_info info;
        spmv_precond_info_of(dp, &info);
        assert_true(info.device == SPMV_DEVICE_GPU && info.device_bytes > 0 && info.host_bytes == 0);
        assert_int_equal(info.float32, po.float32);
        assert_int_equal(info.built_on_device, po.type == SPMV_PRECOND_AMG && !pc_cases[c].standard);
        for (int d = 0; d < 2; d++) {
            spmv_dtype dt = d ? SPMV_FLOAT32 : SPMV_FLOAT64;
            spmv_vec hr, hz, dr, dz, back;
            host_random(dt, a.rows, 1, &hr);
            host_random(dt, a.rows, 1, &hz);
            tu_poison(hz.data, dt, a.rows);
            to_device(&hr, &dr);
            assert_int_equal(spmv_vec_alloc(TG.ctx, SPMV_DEVICE_GPU, dt, a.rows, 1, &dz, &err), SPMV_OK);
            assert_int_equal(spmv_vec_fill(TG.ctx, &dz, NAN, &err), SPMV_OK);
            assert_int_equal(spmv_precond_apply(NULL, hp, &hr, &hz, &err), SPMV_OK);
            if (spmv_precond_apply(TG.ctx, dp, &dr, &dz, &err) != SPMV_OK)
                fail_msg("GPU %s apply: %s", spmv_precond_type_name(po.type), err.message);
            read_back(&dz, &back);
            double e = rel(&back, &hz), tol = po.float32 ? 1e-3 : d ? 1e-5 : 1e-10;
            print_message("# GPU %s%s (%zu bytes), %s vectors: max |z - z_host| / max |z_host| = %.3g\n",
                          spmv_precond_type_name(po.type), po.float32 ? " float32" : "", info.device_bytes,
                          spmv_dtype_name(dt), e);
            assert_true(e <= tol);
            /* the same with level 0 multiplied by the resident matrix's kernel: the same answer to rounding */
            for (int f = 0; f < 2; f++) {
                const char *kn = fine_kernels[(c + (size_t)f) % 3];
                double ef = apply_lent(dp, po.type, gm[f], kn, &dr, &dz, &back, &hz);
                print_message("# GPU %s%s, %s vectors, level 0 by %s on a %s matrix: %.3g\n",
                              spmv_precond_type_name(po.type), po.float32 ? " float32" : "", spmv_dtype_name(dt), kn,
                              spmv_dtype_name(f ? SPMV_FLOAT32 : SPMV_FLOAT64), ef);
                assert_true(ef <= tol);
            }
            /* lent 2 A: amg's cycle and a chebyshev sweep of degree 2 or more (degree 1 is alpha D^-1 r, no
             * product) multiply by it where the hierarchy and the vectors are float64 as it is, so z moves;
             * every other object, and any on float32 vectors (converted through the object's own cycle), keeps
             * its own copy */
            bool lends = !po.float32 && !d && (po.type == SPMV_PRECOND_AMG ||
                                               (po.type == SPMV_PRECOND_CHEBYSHEV && po.degree >= 2));
            const char *k2 = fine_kernels[c % 3];
            double e2 = apply_lent(dp, po.type, gm[2], k2, &dr, &dz, &back, &hz);
            print_message("# GPU %s%s, %s vectors, 2 A lent (%s): %.3g from the host's z (%s)\n",
                          spmv_precond_type_name(po.type), po.float32 ? " float32" : "", spmv_dtype_name(dt), k2, e2,
                          lends ? "used: must move" : "not used: must not");
            assert_true(lends ? e2 > 1e-2 : e2 <= tol);
            spmv_vec_free(NULL, &hr);
            spmv_vec_free(NULL, &hz);
            spmv_vec_free(NULL, &back);
            spmv_vec_free(TG.ctx, &dr);
            spmv_vec_free(TG.ctx, &dz);
        }
        spmv_precond_free(NULL, hp);
        spmv_precond_free(TG.ctx, dp);
        assert_int_equal(used(), u0);
    }
    for (int d = 0; d < 3; d++)
        spmv_gpu_matrix_free(TG.ctx, gm[d]);
    spmv_csr_free(&a);
}

/* Iterations of a float64 GPU solve of A x = b by `method` with the
 * preconditioner of case c, the residual checked on the host. */
static int32_t gpu_solve(const spmv_csr *a, spmv_gpu_matrix *gm, const spmv_vec *hb, const spmv_vec *db,
                         spmv_solve_method method, const pc_case *c)
{
    spmv_error err = {0};
    spmv_precond_options po;
    pc_options(c, &po);
    spmv_precond *p;
    assert_int_equal(spmv_precond_setup(TG.ctx, a, &po, &p, &err), SPMV_OK);
    spmv_precond_binding bind = {TG.ctx, p, {0}};
    gop op = {gm, spmv_kernel_find("cusparse.csr")};
    spmv_linop l = {a->rows, a->cols, &op, gop_apply};
    spmv_vec dx, hx;
    assert_int_equal(spmv_vec_alloc(TG.ctx, SPMV_DEVICE_GPU, SPMV_FLOAT64, a->rows, 1, &dx, &err), SPMV_OK);
    assert_int_equal(spmv_vec_fill(TG.ctx, &dx, 0, &err), SPMV_OK);
    spmv_solve_options o = {.method = method, .tol = 1e-8, .maxit = 5000, .precond = spmv_precond_apply_cb,
                            .precond_ctx = &bind};
    spmv_solve_result r;
    assert_int_equal(spmv_solve(TG.ctx, &l, db, &dx, &o, &r, &err), SPMV_OK);
    read_back(&dx, &hx);
    double *ax = malloc(sizeof(double) * (size_t)a->rows), num = 0, den = 0;
    spmv_reference(a, hx.data, ax);
    for (int32_t i = 0; i < a->rows; i++) {
        num += (at(hb, i) - ax[i]) * (at(hb, i) - ax[i]);
        den += at(hb, i) * at(hb, i);
    }
    free(ax);
    print_message("# GPU %s + %s%s: %s, %d iterations, relres %.3g (host %.3g), %.1f ms\n",
                  spmv_solve_method_name(method), spmv_precond_type_name(po.type), po.float32 ? " float32" : "",
                  spmv_solve_stop_name(r.stop), r.iterations, r.relres, sqrt(num / den), r.total_ms);
    assert_int_equal(r.stop, SPMV_STOP_CONVERGED);
    assert_true(sqrt(num / den) <= 1.01e-8);
    int32_t it = r.iterations;
    spmv_solve_result_free(&r);
    spmv_vec_free(NULL, &hx);
    spmv_vec_free(TG.ctx, &dx);
    spmv_precond_free(TG.ctx, p);
    return it;
}

/* A float64 GPU CG with every symmetric preconditioner converges to 1e-8;
 * a float32 AMG hierarchy needs at most 3 iterations more than a float64
 * one; ilu0 (not symmetric) under BiCGSTAB. */
static void test_precond_solve(void **state)
{
    (void)state;
    TU_NEED_GPU();
    spmv_error err = {0};
    spmv_csr a;
    scaled_poisson(200 + 2 * tu_rng_range(&TG.rng, 0, 20), &a);
    size_t u0 = used();
    spmv_coo coo;
    assert_int_equal(spmv_csr_to_coo(&a, &coo, &err), SPMV_OK);
    spmv_gpu_matrix *gm;
    spmv_gpu_upload_stats us;
    assert_int_equal(spmv_gpu_matrix_upload(TG.ctx, &coo, SPMV_FLOAT64, SPMV_FMT_CSR, 32, &gm, &us, &err), SPMV_OK);
    spmv_vec hb, db;
    host_random(SPMV_FLOAT64, a.rows, 1, &hb);
    to_device(&hb, &db);
    int32_t its[NPC];
    for (size_t c = 0; c < NPC; c++) {
        bool sym = pc_cases[c].type != SPMV_PRECOND_ILU0;
        its[c] = gpu_solve(&a, gm, &hb, &db, sym ? SPMV_SOLVE_CG : SPMV_SOLVE_BICGSTAB, &pc_cases[c]);
    }
    assert_true(its[4] <= its[3] + 3); /* amg float32 against amg float64 */
    spmv_vec_free(TG.ctx, &db);
    spmv_vec_free(NULL, &hb);
    spmv_gpu_matrix_free(TG.ctx, gm);
    spmv_coo_free(&coo);
    spmv_csr_free(&a);
    assert_int_equal(used(), u0);
}

/* cuSPARSE's zero pivot, and a singular block, refused on the GPU as on
 * the host, naming the row; nothing left on the device. */
static void test_precond_refusals(void **state)
{
    (void)state;
    TU_NEED_GPU();
    spmv_error err = {0};
    spmv_csr a;
    scaled_poisson(20, &a);
    size_t u0 = used();
    int32_t k = (int32_t)tu_rng_range(&TG.rng, 1, a.rows - 2);
    for (int32_t i = 0; i < a.rows; i++) /* row and column k zero, kept in the pattern */
        for (int32_t p = a.row_ptr[i]; p < a.row_ptr[i + 1]; p++)
            if (i == k || a.col[p] == k)
                ((double *)a.val)[p] = 0.0;
    char want[64];
    snprintf(want, sizeof want, "pivot at row %d", k);
    for (size_t c = 0; c < NPC; c++) {
        spmv_precond_type t = pc_cases[c].type;
        if (t != SPMV_PRECOND_IC0 && t != SPMV_PRECOND_ILU0 && t != SPMV_PRECOND_BLOCK_JACOBI)
            continue;
        spmv_precond_options po;
        pc_options(&pc_cases[c], &po);
        spmv_precond *p = NULL;
        assert_int_equal(spmv_precond_setup(TG.ctx, &a, &po, &p, &err), SPMV_ERR_INVALID);
        assert_null(p);
        print_message("# GPU %s%s refused: %s\n", spmv_precond_type_name(t), po.float32 ? " float32" : "",
                      err.message);
        if (t != SPMV_PRECOND_BLOCK_JACOBI)
            assert_non_null(strstr(err.message, want));
        assert_int_equal(used(), u0);
    }
    spmv_csr_free(&a);
}

/* The host's product, for the reference solves. */
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

/* k right-hand sides in lockstep on the GPU (spmv_solve_block over
 * gpu.csr.spmm and the k-column calls of engine/gpu/blas.cu): k random in
 * 2..7, then k = 8 (issue 29's case), one column of b zero (answered at
 * once, masked off from the start); plain, Jacobi (diag_k on the k
 * columns), AMG (a callback, column by column) and AMG's k-column apply
 * (precond_k: the V-cycle on the running columns at once, SpMMs on every
 * level: engine/gpu/amg.cu spmv_gpu_amg_vcycle_k). Each column against
 * the host's CG alone on it: converged, its recomputed residual under tol,
 * iterations within 2 (the device sums in another order), x within 1e-8
 * (AMG: 1e-6). Each mode twice: the host's lockstep, then the fused one
 * (device_apply given, check_every random in 1..13: every column's
 * scalars on the device, the block's SpMM and each column's kernels a
 * graph; AMG without its k-column form goes column by column, fused). */
static void test_block_solve(void **state)
{
    (void)state;
    TU_NEED_GPU();
    spmv_error err = {0};
    size_t u0 = used();
    spmv_coo coo;
    spmv_gen_spec g = {.kind = SPMV_GEN_POISSON2D, .n = 120 + tu_rng_range(&TG.rng, 0, 40), .seed = 1};
    assert_int_equal(spmv_gen(&g, &coo, &err), SPMV_OK);
    spmv_matrix hm;
    spmv_gpu_matrix *gm;
    spmv_gpu_upload_stats us;
    assert_int_equal(spmv_matrix_build(&coo, SPMV_FLOAT64, SPMV_FMT_CSR, 32, 0, &hm, &err), SPMV_OK);
    assert_int_equal(spmv_gpu_matrix_upload(TG.ctx, &coo, SPMV_FLOAT64, SPMV_FMT_CSR, 32, &gm, &us, &err), SPMV_OK);
    int32_t n = hm.rows;
    gop op = {gm, spmv_kernel_find("gpu.csr.spmm")};
    spmv_linop a = {n, n, &op, gop_apply};
    spmv_vec hd, dd;
    host_random(SPMV_FLOAT64, n, 1, &hd);
    assert_int_equal(spmv_csr_inv_diag(&hm.csr, hd.data, &err), SPMV_OK);
    to_device(&hd, &dd);
    spmv_precond_options po;
    spmv_precond_defaults(&po, SPMV_PRECOND_AMG);
    po.amg.aggregation = SPMV_AMG_AGG_MIS2; /* the same hierarchy on both */
    spmv_precond *hp, *dp;
    assert_int_equal(spmv_precond_setup(NULL, &hm.csr, &po, &hp, &err), SPMV_OK);
    assert_int_equal(spmv_precond_setup(TG.ctx, &hm.csr, &po, &dp, &err), SPMV_OK);
    spmv_precond_binding hbind = {NULL, hp, {0}}, dbind = {TG.ctx, dp, {0}};
    static const char *const mode_name[4] = {"plain", "jacobi", "amg", "amg k-column"};
    for (int round = 0; round < 2; round++) {
        int32_t k = round ? 8 : 2 + (int32_t)tu_rng_range(&TG.rng, 0, 6), zero = (int32_t)tu_rng_range(&TG.rng, 0, k - 1);
        spmv_vec hb, db, dx, hx;
        host_random(SPMV_FLOAT64, n, k, &hb);
        memset((double *)hb.data + (size_t)zero * n, 0, sizeof(double) * (size_t)n);
        to_device(&hb, &db);
        assert_int_equal(spmv_vec_alloc(TG.ctx, SPMV_DEVICE_GPU, SPMV_FLOAT64, n, k, &dx, &err), SPMV_OK);
        for (int run = 0; run < 8; run++) {
            int mode = run % 4;
            bool fz = run >= 4; /* the fused path: device_apply, every column's scalars on the device */
            spmv_solve_options o = {.method = SPMV_SOLVE_CG, .tol = 1e-10, .maxit = 3000,
                                    .inv_diag = mode == 1 ? &dd : NULL,
                                    .precond = mode >= 2 ? spmv_precond_apply_cb : NULL,
                                    .precond_ctx = mode >= 2 ? &dbind : NULL,
                                    .precond_k = mode == 3 ? spmv_precond_apply_k_cb : NULL,
                                    .device_apply = fz ? gop_device_apply : NULL,
                                    .check_every = fz ? 1 + (int32_t)tu_rng_range(&TG.rng, 0, 12) : 0};
            spmv_solve_result *res = calloc((size_t)k, sizeof *res);
            assert_int_equal(spmv_vec_fill(TG.ctx, &dx, NAN, &err), SPMV_OK); /* poisoned, then x0 = 0 */
            assert_int_equal(spmv_vec_fill(TG.ctx, &dx, 0.0, &err), SPMV_OK);
            if (spmv_solve_block(TG.ctx, &a, &db, &dx, &o, res, &err) != SPMV_OK)
                fail_msg("GPU lockstep %s%s k=%d: %s", mode_name[mode], fz ? " fused" : "", k, err.message);
            read_back(&dx, &hx);
            spmv_solve_options ho = o;
            ho.inv_diag = mode == 1 ? &hd : NULL;
            ho.precond_ctx = mode >= 2 ? &hbind : NULL;
            ho.precond_k = NULL;
            host_op h = {&hm};
            spmv_linop ha = {n, n, &h, host_apply};
            for (int32_t j = 0; j < k; j++) {
                spmv_vec bj = {SPMV_DEVICE_CPU, SPMV_FLOAT64, n, 1, (double *)hb.data + (size_t)j * n}, xj;
                assert_int_equal(spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, SPMV_FLOAT64, n, 1, &xj, &err), SPMV_OK);
                spmv_vec_fill(NULL, &xj, 0.0, &err);
                spmv_solve_result one;
                assert_int_equal(spmv_solve(NULL, &ha, &bj, &xj, &ho, &one, &err), SPMV_OK);
                double d = 0, m = 0;
                for (int32_t i = 0; i < n; i++) {
                    d = fmax(d, fabs(((double *)hx.data)[(size_t)j * n + i] - ((double *)xj.data)[i]));
                    m = fmax(m, fabs(((double *)xj.data)[i]));
                }
                print_message("# GPU lockstep %s%s column %d of %d%s: %d iterations (host alone %d), x within %.2g%s\n",
                              mode_name[mode], fz ? " fused" : "", j, k, j == zero ? " (b = 0)" : "",
                              res[j].iterations, one.iterations, m > 0 ? d / m : d,
                              res[j].graph ? ", graph" : "");
                assert_int_equal(res[j].stop, SPMV_STOP_CONVERGED);
                assert_true(res[j].fused == (fz && j != zero)); /* b = 0 is answered before any iteration */
                assert_true(abs(res[j].iterations - one.iterations) <= 2);
                assert_true(res[j].relres <= 1.01e-10); /* recomputed from b - A x at the end */
                assert_true(d <= (mode >= 2 ? 1e-6 : 1e-8) * m); /* AMG: a count off by one moves x more */
                if (j == zero)
                    assert_true(res[j].iterations == 0 && m == 0 && d == 0);
                spmv_solve_result_free(&one);
                spmv_solve_result_free(&res[j]);
                spmv_vec_free(NULL, &xj);
            }
            spmv_vec_free(NULL, &hx);
            free(res);
        }
        spmv_vec_free(TG.ctx, &db);
        spmv_vec_free(TG.ctx, &dx);
        spmv_vec_free(NULL, &hb);
    }
    spmv_precond_free(NULL, hp);
    spmv_precond_free(TG.ctx, dp);
    spmv_vec_free(TG.ctx, &dd);
    spmv_vec_free(NULL, &hd);
    spmv_gpu_matrix_free(TG.ctx, gm);
    spmv_matrix_free(&hm);
    spmv_coo_free(&coo);
    assert_int_equal(used(), u0);
}

/* ------------------------------------------------- the fused path */

/* A device copy of host matrix hm (2-D Poisson of side n, plus skew for
 * a non-symmetric one, minus sigma on the diagonal for an indefinite one),
 * its operator and Jacobi diagonal. */
typedef struct fz_case {
    spmv_matrix hm;
    spmv_gpu_matrix *gm;
    spmv_gpu_op op;
    spmv_linop a;
    spmv_vec hb, db, dd;
} fz_case;

static void fz_case_new(int64_t side, double skew, double sigma, spmv_dtype dt, const char *kernel, fz_case *c)
{
    spmv_error err = {0};
    spmv_coo coo;
    spmv_gen_spec g = {.kind = SPMV_GEN_POISSON2D, .n = side, .seed = tu_rng_next(&TG.rng)};
    assert_int_equal(spmv_gen(&g, &coo, &err), SPMV_OK);
    for (int64_t p = 0; p < coo.nnz; p++) {
        double *v = &((double *)coo.val)[p];
        *v += coo.col[p] > coo.row[p] ? skew : coo.col[p] == coo.row[p] ? -sigma : 0.0;
    }
    spmv_gpu_upload_stats us;
    assert_int_equal(spmv_matrix_build(&coo, SPMV_FLOAT64, SPMV_FMT_CSR, 32, 0, &c->hm, &err), SPMV_OK);
    assert_int_equal(spmv_gpu_matrix_upload(TG.ctx, &coo, dt, SPMV_FMT_CSR, 32, &c->gm, &us, &err), SPMV_OK);
    spmv_coo_free(&coo);
    c->op = (spmv_gpu_op){TG.ctx, spmv_kernel_find(kernel), c->gm, NULL};
    c->a = (spmv_linop){c->hm.rows, c->hm.cols, &c->op, spmv_gpu_op_apply};
    spmv_vec hxt, h32, hd;
    host_random(SPMV_FLOAT64, c->hm.rows, 1, &hxt);
    host_random(SPMV_FLOAT64, c->hm.rows, 1, &c->hb);
    spmv_reference(&c->hm.csr, hxt.data, c->hb.data);
    host_random(SPMV_FLOAT64, c->hm.rows, 1, &hd);
    assert_int_equal(spmv_csr_inv_diag(&c->hm.csr, hd.data, &err), SPMV_OK);
    for (int k = 0; k < 2; k++) { /* b and 1/diag in the solve's dtype */
        spmv_vec *src = k ? &hd : &c->hb;
        host_random(dt, c->hm.rows, 1, &h32);
        for (int32_t i = 0; i < c->hm.rows; i++)
            if (dt == SPMV_FLOAT32)
                ((float *)h32.data)[i] = (float)at(src, i);
            else
                ((double *)h32.data)[i] = at(src, i);
        to_device(&h32, k ? &c->dd : &c->db);
        spmv_vec_free(NULL, &h32);
    }
    spmv_vec_free(NULL, &hxt);
    spmv_vec_free(NULL, &hd);
}

static void fz_case_free(fz_case *c)
{
    spmv_vec_free(TG.ctx, &c->db);
    spmv_vec_free(TG.ctx, &c->dd);
    spmv_vec_free(NULL, &c->hb);
    spmv_gpu_matrix_free(TG.ctx, c->gm);
    spmv_matrix_free(&c->hm);
}

/* ||b - A x|| / ||b|| on the host for device x, in float64. */
static double fz_true_relres(const fz_case *c, const spmv_vec *dx)
{
    spmv_vec hx;
    read_back(dx, &hx);
    double *x64 = malloc(sizeof(double) * (size_t)c->hm.rows), *ax = malloc(sizeof(double) * (size_t)c->hm.rows);
    double num = 0, den = 0;
    for (int32_t i = 0; i < c->hm.rows; i++)
        x64[i] = at(&hx, i);
    spmv_reference(&c->hm.csr, x64, ax);
    for (int32_t i = 0; i < c->hm.rows; i++) {
        num += (at(&c->hb, i) - ax[i]) * (at(&c->hb, i) - ax[i]);
        den += at(&c->hb, i) * at(&c->hb, i);
    }
    free(x64);
    free(ax);
    spmv_vec_free(NULL, &hx);
    return sqrt(num / den);
}

/* One solve from x = 0, fused (o->device_apply set) or not; *rr the true
 * relative residual. */
static void fz_solve(fz_case *c, const spmv_solve_options *o, spmv_solve_result *r, double *rr)
{
    spmv_error err = {0};
    spmv_vec dx;
    assert_int_equal(spmv_vec_alloc(TG.ctx, SPMV_DEVICE_GPU, c->db.dtype, c->hm.rows, 1, &dx, &err), SPMV_OK);
    assert_int_equal(spmv_vec_fill(TG.ctx, &dx, 0, &err), SPMV_OK);
    int rc = spmv_solve(TG.ctx, &c->a, &c->db, &dx, o, r, &err);
    if (rc != SPMV_OK)
        fail_msg("%s%s: %s", spmv_solve_method_name(o->method), o->device_apply ? " fused" : "", err.message);
    *rr = fz_true_relres(c, &dx);
    assert_int_equal(r->fused, o->device_apply != NULL);
    print_message("# %s %s%s%s every %d: %s, %d iterations, relres %.3g (host %.3g), %.2f ms (spmv %.2f), "
                  "%d checks, graph %d, one pass %d\n",
                  spmv_dtype_name(c->db.dtype), spmv_solve_method_name(o->method),
                  o->inv_diag ? "+jacobi" : o->precond ? "+amg" : "", o->device_apply ? " fused" : " host",
                  o->check_every, spmv_solve_stop_name(r->stop), r->iterations, r->relres, *rr, r->total_ms,
                  r->spmv_ms, r->checks, r->graph, r->one_pass);
    spmv_vec_free(TG.ctx, &dx);
}

/* The fused solve against the host-scalar one with the same options:
 * both converge, counts within 2 (BiCGSTAB: 2%), the history complete,
 * the true residual under tol. */
static void fz_compare(fz_case *c, spmv_solve_options o)
{
    spmv_solve_result rh, rf;
    double rrh, rrf;
    o.device_apply = NULL;
    fz_solve(c, &o, &rh, &rrh);
    o.device_apply = spmv_gpu_op_device_apply;
    fz_solve(c, &o, &rf, &rrf);
    assert_int_equal(rh.stop, SPMV_STOP_CONVERGED);
    assert_int_equal(rf.stop, SPMV_STOP_CONVERGED);
    /* BiCGSTAB's residual is erratic: where it crosses tol moves with
     * rounding (on the H200, 315 fused against 279 host-scalar on the
     * skewed case, both under tol by the true residual); MINRES over
     * thousands of iterations on an indefinite matrix drifts by a few
     * tenths of a percent (3991 against 3994; 4782 against 4796 on the
     * H200, 2026-11-28) */
    int slack = o.method == SPMV_SOLVE_BICGSTAB ? 2 + rh.iterations / 5
                : o.method == SPMV_SOLVE_MINRES ? 2 + rh.iterations / 200 : 2;
    assert_true(abs(rf.iterations - rh.iterations) <= slack);
    assert_int_equal(rf.history_len, rf.iterations + 1);
    assert_true(rrf <= o.tol * (c->db.dtype == SPMV_FLOAT32 ? 1.1 : 1.01));
    assert_true(fabs(rf.relres - rrf) <= 1e-3 * o.tol + 1e-15 || c->db.dtype == SPMV_FLOAT32);
    assert_int_equal(rf.graph, !o.precond && !o.no_graph);
    assert_int_equal(rf.one_pass, o.method == SPMV_SOLVE_CG && !o.precond && !o.no_one_pass); /* Hopper has it */
    assert_true(rf.checks >= 1);
    spmv_solve_result_free(&rh);
    spmv_solve_result_free(&rf);
}

/* Every method, plain and Jacobi, on SPD Poisson (MINRES too), and
 * BiCGSTAB and GMRES on a non-symmetric one, with cuSPARSE and with one
 * of our kernels behind the operator. */
static void test_fused(void **state)
{
    (void)state;
    TU_NEED_GPU();
    size_t u0 = used();
    static const char *const kernels[] = {"cusparse.csr", "gpu.csr.vector"};
    for (int kn = 0; kn < 2; kn++) {
        fz_case c;
        fz_case_new(100 + tu_rng_range(&TG.rng, 0, 30), 0.0, 0.0, SPMV_FLOAT64, kernels[kn], &c);
        for (int meth = 0; meth < 4; meth++)
            for (int j = 0; j < 2; j++)
                fz_compare(&c, (spmv_solve_options){.method = (spmv_solve_method)meth, .restart = 40, .tol = 1e-10,
                                                    .maxit = 20000, .inv_diag = j ? &c.dd : NULL});
        fz_case_free(&c);
    }
    fz_case c;
    fz_case_new(60 + tu_rng_range(&TG.rng, 0, 20), 0.4, 0.0, SPMV_FLOAT64, "cusparse.csr", &c);
    for (int meth = 1; meth < 3; meth++)
        for (int j = 0; j < 2; j++)
            fz_compare(&c, (spmv_solve_options){.method = (spmv_solve_method)meth, .restart = 25, .tol = 1e-9,
                                                .maxit = 20000, .inv_diag = j ? &c.dd : NULL});
    fz_case_free(&c);
    assert_int_equal(used(), u0);
}

/* MINRES on a symmetric indefinite matrix (Poisson shifted into its
 * spectrum), plain and Jacobi; a callback preconditioner (the device AMG)
 * under CG, MINRES, BiCGSTAB and GMRES; float32 CG. */
static void test_fused_minres_amg(void **state)
{
    (void)state;
    TU_NEED_GPU();
    spmv_error err = {0};
    size_t u0 = used();
    fz_case c;
    fz_case_new(100 + tu_rng_range(&TG.rng, 0, 30), 0.0, 0.7 + 0.3 * fabs(tu_rng_value(&TG.rng)), SPMV_FLOAT64,
                "cusparse.csr", &c);
    for (int j = 0; j < 2; j++)
        fz_compare(&c, (spmv_solve_options){.method = SPMV_SOLVE_MINRES, .tol = 1e-9, .maxit = 20000,
                                            .inv_diag = j ? &c.dd : NULL});
    fz_case_free(&c);
    fz_case_new(120, 0.0, 0.0, SPMV_FLOAT64, "cusparse.csr", &c);
    spmv_precond_options po;
    spmv_precond_defaults(&po, SPMV_PRECOND_AMG);
    spmv_precond *p;
    assert_int_equal(spmv_precond_setup(TG.ctx, &c.hm.csr, &po, &p, &err), SPMV_OK);
    spmv_precond_binding bind = {TG.ctx, p, {0}};
    for (int meth = 0; meth < 4; meth++)
        fz_compare(&c, (spmv_solve_options){.method = (spmv_solve_method)meth, .restart = 30, .tol = 1e-10,
                                            .maxit = 2000, .precond = spmv_precond_apply_cb, .precond_ctx = &bind});
    spmv_precond_free(TG.ctx, p);
    fz_case_free(&c);
    fz_case_new(100, 0.0, 0.0, SPMV_FLOAT32, "cusparse.csr", &c);
    fz_compare(&c, (spmv_solve_options){.method = SPMV_SOLVE_CG, .tol = 1e-4, .maxit = 5000});
    fz_case_free(&c);
    assert_int_equal(used(), u0);
}

/* The check interval: 1, 3, 8, 64 and a graph-less run all stop on a
 * right answer, with the same count (one device arithmetic); tol met in
 * the middle of a chunk leaves x at that iteration. */
static void test_fused_check_every(void **state)
{
    (void)state;
    TU_NEED_GPU();
    size_t u0 = used();
    fz_case c;
    fz_case_new(90 + tu_rng_range(&TG.rng, 0, 30), 0.0, 0.0, SPMV_FLOAT64, "cusparse.csr", &c);
    static const int32_t every[] = {1, 3, 8, 64, 8};
    for (int meth = 0; meth < 4; meth++) {
        int32_t its = -1;
        for (int k = 0; k < 5; k++) {
            spmv_solve_options o = {.method = (spmv_solve_method)meth, .restart = 30, .tol = 1e-9, .maxit = 20000,
                                    .check_every = every[k], .no_graph = k == 4,
                                    .device_apply = spmv_gpu_op_device_apply};
            spmv_solve_result r;
            double rr;
            fz_solve(&c, &o, &r, &rr);
            assert_int_equal(r.stop, SPMV_STOP_CONVERGED);
            assert_true(rr <= o.tol * 1.01);
            assert_int_equal(r.graph, k != 4);
            if (its < 0)
                its = r.iterations;
            assert_true(abs(r.iterations - its) <= 1);
            if (meth != SPMV_SOLVE_GMRES && every[k] > 1)
                assert_true(r.checks <= r.iterations / every[k] + 6);
            spmv_solve_result_free(&r);
        }
    }
    fz_case_free(&c);
    assert_int_equal(used(), u0);
}

/* What moves under a fused solve's graph, as the daemon's slices may move
 * it: every few iterations the progress callback waits for the queued
 * work, drops the matrix's derived formats (PSELL) or points its texture
 * at another x (a product of gpu.csr.texture on other vectors), and says
 * so through device_epoch. */
typedef struct fz_mover {
    fz_case *c;
    spmv_vec x2, y2;
    uint64_t epoch;
    int32_t moves;
} fz_mover;

static fz_mover *the_mover; /* device_epoch gets the operator's ctx, not the mover */

static uint64_t mover_epoch(void *op)
{
    (void)op;
    return the_mover ? the_mover->epoch : 0;
}

static int mover_progress(void *ctx, int32_t it, double relres)
{
    fz_mover *mv = ctx;
    spmv_error err = {0};
    (void)relres;
    if (it % 7)
        return 0;
    assert_int_equal(spmv_vec_sync(TG.ctx, &err), SPMV_OK);
    spmv_gpu_matrix_trim(TG.ctx, mv->c->gm, 0);
    assert_int_equal(spmv_gpu_launch(TG.ctx, mv->c->op.kernel, mv->c->gm, NULL, &mv->x2, &mv->y2, &err), SPMV_OK);
    assert_int_equal(spmv_vec_sync(TG.ctx, &err), SPMV_OK);
    mv->epoch++;
    mv->moves++;
    return 0;
}

/* The graph dropped and captured again when the epoch moves: the same
 * iterations as the host path, the true residual under tol, one capture
 * more than once (gpu.csr.texture makes its texture anew for each new x
 * its product reads, which a capture cannot do: only CG, whose products
 * all read p, replays a graph with it). */
static void test_fused_epoch(void **state)
{
    (void)state;
    TU_NEED_GPU();
    spmv_error err = {0};
    size_t u0 = used();
    static const char *const kernels[] = {"gpu.psell", "gpu.csr.texture"};
    for (int kn = 0; kn < 2; kn++) {
        fz_case c;
        fz_case_new(90 + tu_rng_range(&TG.rng, 0, 30), 0.0, 0.0, SPMV_FLOAT64, kernels[kn], &c);
        fz_mover mv = {.c = &c};
        assert_int_equal(spmv_vec_alloc(TG.ctx, SPMV_DEVICE_GPU, SPMV_FLOAT64, c.hm.rows, 1, &mv.x2, &err), SPMV_OK);
        assert_int_equal(spmv_vec_alloc(TG.ctx, SPMV_DEVICE_GPU, SPMV_FLOAT64, c.hm.rows, 1, &mv.y2, &err), SPMV_OK);
        assert_int_equal(spmv_vec_fill(TG.ctx, &mv.x2, 1.0, &err), SPMV_OK);
        the_mover = &mv;
        for (int meth = 0; meth < 4; meth++) {
            spmv_solve_options o = {.method = (spmv_solve_method)meth, .restart = 30, .tol = 1e-9, .maxit = 20000,
                                    .check_every = 4};
            spmv_solve_result rh, rf;
            double rrh, rrf;
            fz_solve(&c, &o, &rh, &rrh);
            o.device_apply = spmv_gpu_op_device_apply;
            o.device_epoch = mover_epoch;
            o.progress = mover_progress;
            o.progress_ctx = &mv;
            mv.moves = 0;
            fz_solve(&c, &o, &rf, &rrf);
            print_message("# %s %s: %d moves, %d captures\n", kernels[kn], spmv_solve_method_name(o.method),
                          mv.moves, rf.captures);
            assert_int_equal(rf.stop, SPMV_STOP_CONVERGED);
            assert_true(rrf <= o.tol * 1.01);
            int slack = meth == SPMV_SOLVE_BICGSTAB ? 2 + rh.iterations / 5 : 2;
            assert_true(abs(rf.iterations - rh.iterations) <= slack);
            assert_true(mv.moves >= 2);
            if (kn == 0 || meth == SPMV_SOLVE_CG) { /* the texture kernel's x must stay one vector: CG's p */
                assert_true(rf.graph);
                assert_true(rf.captures >= 2);
            }
            spmv_solve_result_free(&rh);
            spmv_solve_result_free(&rf);
        }
        the_mover = NULL;
        spmv_vec_free(TG.ctx, &mv.x2);
        spmv_vec_free(TG.ctx, &mv.y2);
        fz_case_free(&c);
    }
    assert_int_equal(used(), u0);
}

/* CG's one-pass kernel (each thread 1 to 8 values of q and r in
 * registers) against the host path and the three kernels, at sizes that
 * take each E, and past what the registers hold (the three kernels then):
 * the same iterations within 2, the true residual under tol. */
static void test_fused_one_pass(void **state)
{
    (void)state;
    TU_NEED_GPU();
    size_t u0 = used();
    static const int64_t sides[] = {40, 300, 600, 1000, 1300};
    for (int k = 0; k < 5; k++) {
        fz_case c;
        fz_case_new(sides[k] + tu_rng_range(&TG.rng, 0, 9), 0.0, 0.0, k == 2 ? SPMV_FLOAT32 : SPMV_FLOAT64, "gpu.psell",
                    &c);
        for (int j = 0; j < 2; j++) {
            spmv_solve_options o = {.method = SPMV_SOLVE_CG, .tol = k == 2 ? 1e-4 : 1e-8, .maxit = 20000,
                                    .inv_diag = j ? &c.dd : NULL};
            spmv_solve_result r3, r1;
            double rr3, rr1;
            if (k < 3)
                fz_compare(&c, o); /* the host path against the one pass */
            o.device_apply = spmv_gpu_op_device_apply;
            o.no_one_pass = true;
            fz_solve(&c, &o, &r3, &rr3);
            o.no_one_pass = false;
            fz_solve(&c, &o, &r1, &rr1);
            assert_int_equal(r3.stop, SPMV_STOP_CONVERGED);
            assert_int_equal(r1.stop, SPMV_STOP_CONVERGED);
            assert_false(r3.one_pass);
            assert_int_equal(r1.one_pass, k < 4); /* 1.7 M rows: past the registers of a Hopper's grid */
            assert_true(abs(r1.iterations - r3.iterations) <= 2 + r3.iterations / 200); /* rounding over thousands */
            assert_true(rr1 <= o.tol * (k == 2 ? 1.1 : 1.01));
            spmv_solve_result_free(&r3);
            spmv_solve_result_free(&r1);
        }
        fz_case_free(&c);
    }
    assert_int_equal(used(), u0);
}

static int cancel_at_5(void *ctx, int32_t it, double relres)
{
    (void)ctx;
    (void)relres;
    return it >= 5;
}

/* The stops on the fused path: maxit exactly, a cancel (late by at most
 * two chunks, the iterations done counted), CG's breakdown on -A worded
 * as the host's, MINRES's on a negative preconditioner. */
/* The fused block of k columns (spmv_gpu_fz_new_k) refuses what it does
 * not carry, allocating nothing: no column, more than the grid's y holds,
 * GMRES's restart or a distributed solve's sums with k > 1, no history;
 * a column past k is refused by put_col and wait_col; k = 3 is made, its
 * columns written and read back, and freed to the byte. */
static void test_fused_new_k(void **state)
{
    (void)state;
    TU_NEED_GPU();
    size_t u0 = used();
    spmv_gpu_fz *z = NULL;
    spmv_error err;
    spmv_allsum_dev all;
    memset(&all, 0, sizeof all);
    static const struct { int32_t ncols, hist, m; bool dist; const char *why; } bad[] = {
        {0, 8, 0, false, "no column"}, {65536, 8, 0, false, "more columns than the grid's y"},
        {2, 8, 10, false, "GMRES's restart"}, {2, 8, 0, true, "sums across processes"}, {3, 0, 0, false, "no history"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        int rc = spmv_gpu_fz_new_k(TG.ctx, 1000, bad[i].ncols, bad[i].hist, bad[i].m, bad[i].dist ? &all : NULL, &z,
                                   &err);
        if (rc != SPMV_ERR_INVALID || z != NULL)
            fail_msg("fz_new_k with %s answered %d (%s)", bad[i].why, rc, err.message);
        print_message("# refused (%s): %s\n", bad[i].why, err.message);
        assert_int_equal(used(), u0);
    }
    assert_int_equal(spmv_gpu_fz_new_k(TG.ctx, 1000, 3, 8, 0, NULL, &z, &err), SPMV_OK);
    fz_scalars sc;
    memset(&sc, 0, sizeof sc);
    for (int32_t j = 0; j < 3; j++) {
        sc.it = 7 * j + 1;
        assert_int_equal(spmv_gpu_fz_put_col(TG.ctx, z, j, &sc, &err), SPMV_OK);
    }
    assert_int_equal(spmv_gpu_fz_put_col(TG.ctx, z, 3, &sc, &err), SPMV_ERR_INVALID);
    assert_int_equal(spmv_gpu_fz_put_col(TG.ctx, z, -1, &sc, &err), SPMV_ERR_INVALID);
    assert_int_equal(spmv_gpu_fz_post(TG.ctx, z, 0, &err), SPMV_OK);
    const fz_scalars *got;
    const double *hist;
    for (int32_t j = 0; j < 3; j++) {
        assert_int_equal(spmv_gpu_fz_wait_col(TG.ctx, z, 0, j, &got, &hist, &err), SPMV_OK);
        assert_int_equal(got->it, 7 * j + 1);
    }
    assert_int_equal(spmv_gpu_fz_wait_col(TG.ctx, z, 0, 3, &got, &hist, &err), SPMV_ERR_INVALID);
    spmv_gpu_fz_free(TG.ctx, z);
    assert_int_equal(used(), u0);
}

static void test_fused_stops(void **state)
{
    (void)state;
    TU_NEED_GPU();
    size_t u0 = used();
    fz_case c;
    fz_case_new(80, 0.0, 0.0, SPMV_FLOAT64, "cusparse.csr", &c);
    for (int meth = 0; meth < 4; meth++) {
        spmv_solve_options o = {.method = (spmv_solve_method)meth, .restart = 10, .tol = 1e-14, .maxit = 13,
                                .check_every = 4, .device_apply = spmv_gpu_op_device_apply};
        spmv_solve_result r;
        double rr;
        fz_solve(&c, &o, &r, &rr);
        assert_int_equal(r.stop, SPMV_STOP_MAXIT);
        assert_int_equal(r.iterations, 13);
        assert_true(fabs(r.relres - rr) < 1e-10);
        assert_int_equal(r.history_len, 14);
        spmv_solve_result_free(&r);
        o.maxit = 1000;
        o.progress = cancel_at_5;
        fz_solve(&c, &o, &r, &rr);
        assert_int_equal(r.stop, SPMV_STOP_CANCELLED);
        int32_t chunk = meth == SPMV_SOLVE_GMRES ? 10 : meth == SPMV_SOLVE_MINRES ? 6 : 4; /* MINRES: 3s */
        assert_true(r.iterations >= 5 && r.iterations <= 5 + 2 * chunk);
        assert_non_null(strstr(r.detail, "cancelled after"));
        spmv_solve_result_free(&r);
    }
    spmv_error err = {0};
    assert_int_equal(spmv_vec_scal(TG.ctx, -1.0, &c.dd, &err), SPMV_OK); /* negative definite Jacobi */
    spmv_solve_options o = {.method = SPMV_SOLVE_MINRES, .tol = 1e-10, .maxit = 100, .inv_diag = &c.dd,
                            .device_apply = spmv_gpu_op_device_apply};
    spmv_solve_result r;
    double rr;
    fz_solve(&c, &o, &r, &rr);
    assert_int_equal(r.stop, SPMV_STOP_BREAKDOWN);
    assert_non_null(strstr(r.detail, "not positive definite"));
    spmv_solve_result_free(&r);
    fz_case_free(&c);
    fz_case_new(60, 0.0, 8.5, SPMV_FLOAT64, "cusparse.csr", &c); /* negative definite: CG breaks down at once */
    for (int f = 0; f < 2; f++) {
        o = (spmv_solve_options){.method = SPMV_SOLVE_CG, .tol = 1e-10, .maxit = 100,
                                 .device_apply = f ? spmv_gpu_op_device_apply : NULL};
        fz_solve(&c, &o, &r, &rr);
        assert_int_equal(r.stop, SPMV_STOP_BREAKDOWN);
        assert_true(r.breakdown_value < 0);
        assert_non_null(strstr(r.detail, "p·Ap"));
        assert_non_null(strstr(r.detail, "at iteration 1"));
        spmv_solve_result_free(&r);
    }
    fz_case_free(&c);
    assert_int_equal(used(), u0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blas1),
        cmocka_unit_test(test_nonfinite),
        cmocka_unit_test(test_blas_k),
        cmocka_unit_test(test_apply),
        cmocka_unit_test(test_solvers),
        cmocka_unit_test(test_amg),
        cmocka_unit_test(test_amg_k),
        cmocka_unit_test(test_amg_setup_gpu),
        cmocka_unit_test(test_amg_build_gpu),
        cmocka_unit_test(test_precond_apply),
        cmocka_unit_test(test_precond_solve),
        cmocka_unit_test(test_precond_refusals),
        cmocka_unit_test(test_block_solve),
        cmocka_unit_test(test_fused),
        cmocka_unit_test(test_fused_minres_amg),
        cmocka_unit_test(test_fused_check_every),
        cmocka_unit_test(test_fused_stops),
        cmocka_unit_test(test_fused_new_k),
        cmocka_unit_test(test_fused_epoch),
        cmocka_unit_test(test_fused_one_pass),
    };
    return tu_gpu_run("gpu_vectors", tests);
}
