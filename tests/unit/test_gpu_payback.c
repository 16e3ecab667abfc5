/* test_gpu_payback.c — the device's conversion times (issue 30): every
 * format built on the GPU, pinned at upload or on a kernel's first use,
 * records the wall time of its build (spmv_gpu_usage.convert_ms, what the
 * descriptor's conversion_ms shows for a GPU entry); CSR and formats never
 * built have none. Each kernel that builds one is also checked against the
 * host reference (spmv_reference) on random matrices (seed printed), with
 * y poisoned before each run. Without a GPU every case is skipped.
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

static void random_csr(spmv_dtype dt, spmv_matrix *m)
{
    spmv_coo coo;
    spmv_error err;
    tu_gen g = {(int32_t)tu_rng_range(&TG.rng, 500, 20000), (int32_t)tu_rng_range(&TG.rng, 500, 20000), 8, 0.05,
                false, 0, 0};
    tu_random_coo_gen(&TG.rng, &g, dt, &coo);
    assert_int_equal(spmv_matrix_build(&coo, dt, SPMV_FMT_CSR, 32, NULL, m, &err), SPMV_OK);
    spmv_coo_free(&coo);
}

/* Runs kernel `name` on gm and checks y against the reference. */
static void run_checked(spmv_gpu_matrix *gm, const spmv_matrix *h, const char *name)
{
    const spmv_kernel *k = spmv_kernel_find(name);
    size_t vs = spmv_dtype_size(h->dtype);
    void *x = malloc((size_t)h->cols * vs), *y = malloc((size_t)h->rows * vs), *ref = malloc((size_t)h->rows * vs);
    spmv_params p;
    spmv_stats st;
    spmv_error err;
    assert_true(k && x && y && ref);
    tu_random_vector(&TG.rng, h->dtype, h->cols, x);
    tu_poison(y, h->dtype, h->rows);
    spmv_reference(&h->csr, x, ref);
    assert_int_equal(spmv_params_resolve(k, NULL, &p, &err), SPMV_OK);
    int rc = spmv_gpu_run(TG.ctx, k, gm, &p, x, y, 0, 1, &st, &err);
    if (rc != SPMV_OK)
        print_message("# %s: %s\n", name, err.message);
    assert_int_equal(rc, SPMV_OK);
    double e = spmv_max_rel_err(h->dtype, y, ref, h->rows);
    assert_true(e <= (h->dtype == SPMV_FLOAT32 ? 1e-4 : 1e-12));
    free(x);
    free(y);
    free(ref);
}

static void test_convert_ms_on_first_use(void **state)
{
    (void)state;
    TU_NEED_GPU();
    static const char *const ks[] = {"gpu.ell", "gpu.hll", "gpu.hyb", "cusparse.coo", "gpu.pcsr", "gpu.psell"};
    for (int d = 0; d < 2; d++) {
        spmv_matrix h;
        spmv_gpu_matrix *gm;
        spmv_gpu_usage u;
        spmv_error err;
        random_csr((spmv_dtype)d, &h);
        assert_int_equal(spmv_gpu_matrix_upload_csr(TG.ctx, &h.csr, h.dtype, SPMV_FMT_CSR, 32, &gm, NULL, &err),
                         SPMV_OK);
        spmv_gpu_matrix_usage(gm, &u);
        for (int i = 0; i < SPMV_FORMAT_COUNT; i++)
            assert_true(u.convert_ms[i] == 0);
        run_checked(gm, &h, "gpu.csr.vector");
        for (size_t i = 0; i < sizeof ks / sizeof *ks; i++) {
            const spmv_kernel *k = spmv_kernel_find(ks[i]);
            if (!k || !spmv_kernel_available(k, NULL))
                continue;
            run_checked(gm, &h, ks[i]);
            spmv_gpu_matrix_usage(gm, &u);
            assert_true(u.formats & k->format);
            assert_true(u.convert_ms[spmv_format_index(k->format)] > 0);
            print_message("# %s %s: built in %.3f ms\n", spmv_dtype_name(h.dtype), spmv_format_name(k->format),
                          u.convert_ms[spmv_format_index(k->format)]);
        }
        assert_true(u.convert_ms[spmv_format_index(SPMV_FMT_CSR)] == 0);
        spmv_gpu_matrix_free(TG.ctx, gm);
        spmv_matrix_free(&h);
    }
}

/* A format pinned at upload is timed there, and again when new values
 * rebuild it. */
static void test_convert_ms_pinned(void **state)
{
    (void)state;
    TU_NEED_GPU();
    spmv_matrix h;
    spmv_gpu_matrix *gm;
    spmv_gpu_usage u;
    spmv_error err;
    random_csr(SPMV_FLOAT64, &h);
    assert_int_equal(spmv_gpu_matrix_upload_csr(TG.ctx, &h.csr, h.dtype, SPMV_FMT_CSR | SPMV_FMT_PSELL, 32, &gm,
                                                NULL, &err), SPMV_OK);
    spmv_gpu_matrix_usage(gm, &u);
    int ip = spmv_format_index(SPMV_FMT_PSELL);
    assert_true((u.formats & SPMV_FMT_PSELL) && u.convert_ms[ip] > 0);
    assert_true(u.convert_ms[spmv_format_index(SPMV_FMT_PCSR)] == 0);
    run_checked(gm, &h, "gpu.psell");
    for (int64_t j = 0; j < h.nnz; j++)
        ((double *)h.csr.val)[j] = tu_rng_range(&TG.rng, 1, 3) * 0.5; /* three distinct values: packs differently */
    assert_int_equal(spmv_gpu_matrix_set_values(TG.ctx, gm, h.csr.val, &err), SPMV_OK);
    spmv_gpu_matrix_usage(gm, &u);
    assert_true((u.formats & SPMV_FMT_PSELL) && u.convert_ms[ip] > 0);
    run_checked(gm, &h, "gpu.psell");
    spmv_gpu_matrix_free(TG.ctx, gm);
    spmv_matrix_free(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_convert_ms_on_first_use),
        cmocka_unit_test(test_convert_ms_pinned),
    };
    return tu_gpu_run("gpu_payback", tests);
}
