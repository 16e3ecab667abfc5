/* test_gpu_wide.c — matrices past 2^31 non-zeros: 64-bit row offsets on the GPU.
 *
 * Band matrices built on the device by formula (spmv_gpu_matrix_generate_band)
 * are multiplied and every checked row of y is compared with the same
 * product computed another way: on the host, in float64, from the formula
 * (spmv_band_value) and x. Random x rows and checked rows are drawn afresh
 * (the seed is printed); y is poisoned before each run by the backend.
 *
 * - test_band_paths: small bands, both dtypes, 32-bit and 64-bit offsets:
 *   gpu.csr.vector, cusparse.csr (ALG1, ALG2) and gpu.psell right on every
 *   row; the kernels and formats that read 32-bit offsets answer
 *   SPMV_ERR_LIMIT on the 64-bit matrix and allocate nothing; the bytes
 *   are the CSR's with 8-byte offsets, and come back after the free.
 * - test_wide_upload: a wide host CSR (spmv_gen_csr's band) uploaded as it
 *   is equals the device's own band array for array; the PSELL the device
 *   builds from either is the host's (spmv_csr_to_psell of the wide CSR)
 *   array for array; CSR kernels and gpu.psell right, a pinned ELL and
 *   gpu.ell refused, a pinned PSELL built.
 * - test_band_huge: a float32 band of 250 M rows, half-width 16: 8.25 x 10^9
 *   non-zeros (66 GB) resident on one GPU, multiplied by gpu.csr.vector,
 *   gpu.psell (its PSELL built from the 64-bit CSR: the distinct values
 *   sorted in chunks) and cusparse.csr, 2000 rows checked (the ends and
 *   random ones). Skipped when the device has less than 76 GiB free (it
 *   says so).
 * - test_offsets_cost: the same band with 32-bit and with 64-bit offsets,
 *   gpu.csr.vector and cusparse.csr medians side by side (printed, never
 *   asserted: the 32-bit path is kept so small matrices lose nothing).
 *
 * SPMV_GPU_QUICK (compute-sanitizer runs) leaves the huge band out.
 * Without a GPU every case is skipped with the reason.
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

static double x_value(int64_t j) { return 1.0 + (double)(j % 5) / 4.0; }

/* max over the checked rows of |y - ref| / sum |a x|. */
static double check_rows(const spmv_band_spec *s, const void *y, const int64_t *rows, int64_t n)
{
    double worst = 0;
    for (int64_t k = 0; k < n; k++) {
        int64_t i = rows[k], lo = i - s->half_width > 0 ? i - s->half_width : 0,
                hi = i + s->half_width < s->cols - 1 ? i + s->half_width : s->cols - 1;
        double ref = 0, scale = 0;
        for (int64_t j = lo; j <= hi; j++) {
            double t = spmv_band_value(i, j) * x_value(j);
            ref += t;
            scale += fabs(t);
        }
        double got = s->dtype == SPMV_FLOAT32 ? ((const float *)y)[i] : ((const double *)y)[i];
        double e = fabs(got - ref) / (scale > 0 ? scale : 1);
        if (!(e <= worst))
            worst = isnan(e) ? INFINITY : e;
    }
    return worst;
}

static void *make_x(const spmv_band_spec *s)
{
    size_t vs = spmv_dtype_size(s->dtype);
    void *x = malloc((size_t)s->cols * vs);
    assert_non_null(x);
    for (int64_t j = 0; j < s->cols; j++) {
        if (s->dtype == SPMV_FLOAT32)
            ((float *)x)[j] = (float)x_value(j);
        else
            ((double *)x)[j] = x_value(j);
    }
    return x;
}

static int64_t band_nnz_host(const spmv_band_spec *s)
{
    int64_t n = 0;
    for (int64_t i = 0; i < s->rows; i++) {
        int64_t lo = i - s->half_width > 0 ? i - s->half_width : 0,
                hi = i + s->half_width < s->cols - 1 ? i + s->half_width : s->cols - 1;
        n += hi >= lo ? hi - lo + 1 : 0;
    }
    return n;
}

static double run_check(spmv_gpu_matrix *m, const spmv_band_spec *s, const char *kname, int alg, const void *x, void *y,
                        const int64_t *rows, int64_t nrows, int32_t runs, spmv_stats *st)
{
    spmv_error err;
    spmv_params p = {{0}};
    p.v[SPMV_PARAM_ALG] = alg;
    memset(y, 0xff, (size_t)s->rows * spmv_dtype_size(s->dtype));
    int rc = spmv_gpu_run(TG.ctx, spmv_kernel_find(kname), m, alg ? &p : NULL, x, y, 1, runs, st, &err);
    if (rc != SPMV_OK)
        fail_msg("%s on the %lld x %lld band: %s", kname, (long long)s->rows, (long long)s->cols, err.message);
    return check_rows(s, y, rows, nrows);
}

static void test_band_paths(void **state)
{
    (void)state;
    TU_NEED_GPU();
    spmv_error err;
    for (int d = 0; d < 2; d++)
        for (int wide = 0; wide < 2; wide++) {
            spmv_band_spec s = {.rows = 3000 + tu_rng_range(&TG.rng, 0, 4000), .cols = 3000 + tu_rng_range(&TG.rng, 0, 4000),
                                .half_width = tu_rng_range(&TG.rng, 0, 40), .dtype = (spmv_dtype)d, .wide = wide};
            spmv_gpu_info before, after;
            spmv_gpu_matrix *m = NULL;
            assert_int_equal(spmv_gpu_ctx_info(TG.ctx, &before), SPMV_OK);
            if (spmv_gpu_matrix_generate_band(TG.ctx, &s, &m, &err) != SPMV_OK)
                fail_msg("generate: %s", err.message);
            spmv_gpu_usage u;
            spmv_gpu_matrix_usage(m, &u);
            int64_t nnz = band_nnz_host(&s);
            size_t vs = spmv_dtype_size(s.dtype);
            assert_int_equal(u.bytes[1], ((size_t)s.rows + 1) * (wide ? 8 : 4) + (size_t)nnz * (4 + vs));
            int64_t *rows = malloc((size_t)s.rows * sizeof *rows);
            for (int64_t i = 0; i < s.rows; i++)
                rows[i] = i;
            void *x = make_x(&s), *y = malloc((size_t)s.rows * vs);
            double bound = d == SPMV_FLOAT32 ? 1e-6 : 1e-14;
            static const struct { const char *k; int alg; } ks[] = {
                {"gpu.csr.vector", 0}, {"cusparse.csr", 1}, {"cusparse.csr", 2}, {"gpu.psell", 0}};
            for (size_t k = 0; k < sizeof ks / sizeof ks[0]; k++) {
                double e = run_check(m, &s, ks[k].k, ks[k].alg, x, y, rows, s.rows, 2, NULL);
                print_message("# band %lld x %lld h %lld %s %s offsets: %s alg %d: error %.3g\n", (long long)s.rows,
                              (long long)s.cols, (long long)s.half_width, spmv_dtype_name(s.dtype),
                              wide ? "64-bit" : "32-bit", ks[k].k, ks[k].alg, e);
                assert_true(e <= bound);
            }
            if (wide) { /* the 32-bit readers refuse, holding nothing more */
                static const char *const narrow[] = {"gpu.csr.scalar", "gpu.csr.adaptive", "gpu.ell", "gpu.hll",
                                                     "gpu.coo.atomic", "cusparse.sell", "gpu.csr.spmm"};
                size_t held = spmv_gpu_matrix_bytes(m);
                for (size_t k = 0; k < sizeof narrow / sizeof narrow[0]; k++) {
                    int rc = spmv_gpu_run(TG.ctx, spmv_kernel_find(narrow[k]), m, NULL, x, y, 0, 1, NULL, &err);
                    assert_int_equal(rc, SPMV_ERR_LIMIT);
                    assert_non_null(strstr(err.message, "64-bit"));
                }
                assert_int_equal(spmv_gpu_matrix_bytes(m), held);
                spmv_gpu_matrix *t = NULL;
                assert_int_equal(spmv_gpu_matrix_transpose(TG.ctx, m, &t, &err), SPMV_ERR_LIMIT);
                spmv_matrix h;
                assert_int_equal(spmv_gpu_matrix_download(TG.ctx, m, SPMV_FMT_ELL, &h, &err), SPMV_ERR_LIMIT);
                print_message("# refused as expected: %s\n", err.message);
            }
            spmv_gpu_matrix_free(TG.ctx, m);
            assert_int_equal(spmv_gpu_ctx_info(TG.ctx, &after), SPMV_OK);
            assert_int_equal(after.mem_used_by_spmvd - after.mem_scratch, before.mem_used_by_spmvd - before.mem_scratch);
            free(rows);
            free(x);
            free(y);
        }
}

/* A wide host CSR (the engine's generator, as the daemon's `generate` and
 * a large .npz give) uploaded as it is: the device CSR equals the band
 * the device builds by formula array for array (downloaded, 64-bit
 * offsets and all), the CSR kernels multiply it right, a pinned format
 * beyond CSR is refused holding nothing, and the bytes come back. */
static void test_wide_upload(void **state)
{
    (void)state;
    TU_NEED_GPU();
    spmv_error err;
    for (int d = 0; d < 2; d++) {
        int64_t n = 3000 + tu_rng_range(&TG.rng, 0, 4000), h = tu_rng_range(&TG.rng, 0, 40);
        spmv_band_spec s = {.rows = n, .cols = n, .half_width = h, .dtype = (spmv_dtype)d, .wide = true};
        spmv_gen_spec g = {.kind = SPMV_GEN_BAND, .n = n, .per_row = (int32_t)(2 * h + 1)};
        spmv_csr host = {0};
        assert_int_equal(spmv_gen_csr(&g, s.dtype, true, INT64_MAX, &host, &err), SPMV_OK);
        assert_true(spmv_csr_wide(&host));
        spmv_gpu_info before, after;
        assert_int_equal(spmv_gpu_ctx_info(TG.ctx, &before), SPMV_OK);
        spmv_gpu_matrix *up = NULL, *gen = NULL;
        assert_int_equal(spmv_gpu_matrix_upload_csr(TG.ctx, &host, s.dtype, SPMV_FMT_CSR | SPMV_FMT_ELL, 0, &up, NULL,
                                                    &err), SPMV_ERR_LIMIT);
        print_message("# refused as expected: %s\n", err.message);
        assert_null(up);
        if (spmv_gpu_matrix_upload_csr(TG.ctx, &host, s.dtype, SPMV_FMT_CSR | SPMV_FMT_PSELL, 0, &up, NULL, &err) !=
            SPMV_OK)
            fail_msg("uploading a wide CSR with a pinned PSELL: %s", err.message);
        if (spmv_gpu_matrix_generate_band(TG.ctx, &s, &gen, &err) != SPMV_OK)
            fail_msg("generate: %s", err.message);
        spmv_matrix a, b;
        assert_int_equal(spmv_gpu_matrix_download(TG.ctx, up, SPMV_FMT_CSR, &a, &err), SPMV_OK);
        assert_int_equal(spmv_gpu_matrix_download(TG.ctx, gen, SPMV_FMT_CSR, &b, &err), SPMV_OK);
        size_t vs = spmv_dtype_size(s.dtype);
        assert_true(spmv_csr_wide(&a.csr) && spmv_csr_wide(&b.csr));
        assert_int_equal(a.csr.nnz, host.nnz);
        assert_int_equal(b.csr.nnz, host.nnz);
        assert_memory_equal(a.csr.row_ptr64, host.row_ptr64, ((size_t)n + 1) * 8);
        assert_memory_equal(b.csr.row_ptr64, host.row_ptr64, ((size_t)n + 1) * 8);
        assert_memory_equal(a.csr.col, host.col, (size_t)host.nnz * 4);
        assert_memory_equal(b.csr.col, host.col, (size_t)host.nnz * 4);
        assert_memory_equal(a.csr.val, host.val, (size_t)host.nnz * vs);
        assert_memory_equal(b.csr.val, host.val, (size_t)host.nnz * vs);
        spmv_matrix_free(&a);
        spmv_matrix_free(&b);
        /* the PSELL built on the device (pinned at the upload, on first use
         * on the generated band) is the host's, built from the wide CSR */
        spmv_psell hp;
        assert_int_equal(spmv_csr_to_psell(&host, NULL, &hp, &err), SPMV_OK);
        void *x0 = make_x(&s), *y0 = malloc((size_t)n * vs);
        assert_int_equal(spmv_gpu_run(TG.ctx, spmv_kernel_find("gpu.psell"), gen, NULL, x0, y0, 0, 1, NULL, &err),
                         SPMV_OK);
        assert_int_equal(spmv_gpu_matrix_download(TG.ctx, up, SPMV_FMT_PSELL, &a, &err), SPMV_OK);
        assert_int_equal(spmv_gpu_matrix_download(TG.ctx, gen, SPMV_FMT_PSELL, &b, &err), SPMV_OK);
        assert_true(tu_same_psell("uploaded wide CSR's PSELL", &hp, &a.psell));
        assert_true(tu_same_psell("generated wide band's PSELL", &hp, &b.psell));
        print_message("# PSELL of the wide band: %d slices, %lld slots, values %s: the host's on both\n", hp.nslices,
                      (long long)hp.slots, spmv_vcode_name(hp.v.mode));
        spmv_psell_free(&hp);
        spmv_matrix_free(&a);
        spmv_matrix_free(&b);
        free(x0);
        free(y0);
        int64_t *rows = malloc((size_t)n * sizeof *rows);
        for (int64_t i = 0; i < n; i++)
            rows[i] = i;
        void *x = make_x(&s), *y = malloc((size_t)n * vs);
        double bound = d == SPMV_FLOAT32 ? 1e-6 : 1e-14;
        assert_true(run_check(up, &s, "gpu.csr.vector", 0, x, y, rows, n, 2, NULL) <= bound);
        assert_true(run_check(up, &s, "cusparse.csr", 0, x, y, rows, n, 2, NULL) <= bound);
        assert_true(run_check(up, &s, "gpu.psell", 0, x, y, rows, n, 2, NULL) <= bound);
        assert_int_equal(spmv_gpu_run(TG.ctx, spmv_kernel_find("gpu.ell"), up, NULL, x, y, 0, 1, NULL, &err),
                         SPMV_ERR_LIMIT);
        print_message("# uploaded wide CSR %lld x %lld, %lld non-zeros, %s: equal to the device's band, "
                      "gpu.csr.vector, cusparse.csr and gpu.psell right\n", (long long)n, (long long)n, (long long)host.nnz,
                      spmv_dtype_name(s.dtype));
        spmv_gpu_matrix_free(TG.ctx, up);
        spmv_gpu_matrix_free(TG.ctx, gen);
        assert_int_equal(spmv_gpu_ctx_info(TG.ctx, &after), SPMV_OK);
        assert_int_equal(after.mem_used_by_spmvd - after.mem_scratch, before.mem_used_by_spmvd - before.mem_scratch);
        spmv_csr_free(&host);
        free(rows);
        free(x);
        free(y);
    }
}

static void test_band_huge(void **state)
{
    (void)state;
    TU_NEED_GPU();
    spmv_gpu_info info;
    spmv_error err;
    assert_int_equal(spmv_gpu_ctx_info(TG.ctx, &info), SPMV_OK);
    spmv_band_spec s = {.rows = 250000000, .cols = 250000000, .half_width = 16, .dtype = SPMV_FLOAT32, .wide = false};
    if (getenv("SPMV_GPU_QUICK")) { /* compute-sanitizer runs: 66 GB under memcheck would take hours */
        print_message("# SKIP SPMV_GPU_QUICK set: the 8.25e9-non-zero band is left out\n");
        skip();
    }
    /* CSR 68.0 GB, x and y 2, the PSELL 9.3 and its build's scratch 2.3 */
    if (info.mem_free < ((size_t)76 << 30)) {
        print_message("# SKIP the 8.25e9-non-zero band needs 76 GiB free; this device has %zu MiB\n",
                      info.mem_free >> 20);
        skip();
    }
    spmv_gpu_matrix *m = NULL;
    double t0 = spmv_now_ms();
    if (spmv_gpu_matrix_generate_band(TG.ctx, &s, &m, &err) != SPMV_OK)
        fail_msg("generate: %s", err.message);
    double gen_ms = spmv_now_ms() - t0;
    spmv_gpu_usage u;
    spmv_gpu_matrix_usage(m, &u);
    int64_t nnz = 33 * s.rows - 2 * (16 * 17 / 2);
    print_message("# band of %lld rows, half-width 16, float32: %lld non-zeros (INT32_MAX is %d), %.1f GB resident, "
                  "generated in %.0f ms\n", (long long)s.rows, (long long)nnz, INT32_MAX, u.total / 1e9, gen_ms);
    assert_true(nnz > 8000000000LL);
    int64_t nrows = 2000, *rows = malloc((size_t)nrows * sizeof *rows);
    for (int64_t k = 0; k < nrows; k++)
        rows[k] = k < 500 ? k : k < 1000 ? s.rows - 1 - (k - 500) : tu_rng_range(&TG.rng, 0, s.rows - 1);
    void *x = make_x(&s), *y = malloc((size_t)s.rows * 4);
    spmv_stats st;
    memset(&st, 0, sizeof st);
    double e = run_check(m, &s, "gpu.csr.vector", 0, x, y, rows, nrows, 5, &st);
    print_message("# gpu.csr.vector on %lld non-zeros: median %.3f ms, %.0f GB/s, %lld rows checked against the "
                  "formula, error %.3g\n", (long long)nnz, st.median_ms, st.gbps, (long long)nrows, e);
    assert_true(e <= 1e-6);
    double vector_ms = st.median_ms;
    e = run_check(m, &s, "gpu.psell", 0, x, y, rows, nrows, 5, &st);
    spmv_gpu_matrix_usage(m, &u);
    int fi = spmv_format_index(SPMV_FMT_PSELL);
    print_message("# gpu.psell on %lld non-zeros: median %.3f ms (gpu.csr.vector / gpu.psell %.2f), %.0f GB/s of CSR "
                  "bytes, PSELL %.2f GB (%.2f bytes a non-zero) built in %.0f ms, error %.3g\n",
                  (long long)nnz, st.median_ms, vector_ms / st.median_ms, st.gbps, u.bytes[fi] / 1e9,
                  (double)u.bytes[fi] / nnz, u.convert_ms[fi], e);
    assert_true(e <= 1e-6);
    /* cuSPARSE at this size (it needs a 64-bit copy of the columns, 66 GB
     * more): right if it answers; an error it gives is reported, and the
     * matrix must still multiply right after it */
    memset(y, 0xff, (size_t)s.rows * 4);
    int rc = spmv_gpu_run(TG.ctx, spmv_kernel_find("cusparse.csr"), m, NULL, x, y, 1, 5, &st, &err);
    if (rc == SPMV_OK) {
        e = check_rows(&s, y, rows, nrows);
        print_message("# cusparse.csr on %lld non-zeros: median %.3f ms, %.0f GB/s, error %.3g\n", (long long)nnz,
                      st.median_ms, st.gbps, e);
        assert_true(e <= 1e-6);
    } else {
        print_message("# cusparse.csr on %lld non-zeros: %s (%s)\n", (long long)nnz, err.message, spmv_strerror(rc));
        assert_true(rc == SPMV_ERR_DEVICE || rc == SPMV_ERR_DEVICE_MEMORY);
        assert_true(run_check(m, &s, "gpu.csr.vector", 0, x, y, rows, nrows, 1, NULL) <= 1e-6);
    }
    spmv_gpu_matrix_free(TG.ctx, m);
    free(rows);
    free(x);
    free(y);
}

static void test_offsets_cost(void **state)
{
    (void)state;
    TU_NEED_GPU();
    spmv_error err;
    print_message("# offsets: kernel dtype 32-bit median ms, 64-bit median ms, 64/32\n");
    for (int d = 0; d < 2; d++) {
        spmv_band_spec s = {.rows = 8000000, .cols = 8000000, .half_width = 8, .dtype = (spmv_dtype)d};
        spmv_gpu_matrix *m32 = NULL, *m64 = NULL;
        s.wide = false;
        assert_int_equal(spmv_gpu_matrix_generate_band(TG.ctx, &s, &m32, &err), SPMV_OK);
        s.wide = true;
        assert_int_equal(spmv_gpu_matrix_generate_band(TG.ctx, &s, &m64, &err), SPMV_OK);
        void *x = make_x(&s), *y = malloc((size_t)s.rows * spmv_dtype_size(s.dtype));
        int64_t rows[64];
        for (int k = 0; k < 64; k++)
            rows[k] = tu_rng_range(&TG.rng, 0, s.rows - 1);
        static const char *const ks[] = {"gpu.csr.vector", "cusparse.csr"};
        for (int k = 0; k < 2; k++) {
            spmv_stats a, b;
            assert_true(run_check(m32, &s, ks[k], 0, x, y, rows, 64, 20, &a) <= 1e-6);
            assert_true(run_check(m64, &s, ks[k], 0, x, y, rows, 64, 20, &b) <= 1e-6);
            print_message("# offsets: %-15s %-8s %.4f %.4f %.3f\n", ks[k], spmv_dtype_name(s.dtype), a.median_ms,
                          b.median_ms, b.median_ms / a.median_ms);
        }
        spmv_gpu_matrix_free(TG.ctx, m32);
        spmv_gpu_matrix_free(TG.ctx, m64);
        free(x);
        free(y);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_band_paths),
        cmocka_unit_test(test_wide_upload),
        cmocka_unit_test(test_offsets_cost),
        cmocka_unit_test(test_band_huge),
    };
    return tu_gpu_run("gpu_wide", tests);
}
