/* test_gpu_batch.c — dynamic batching's product on the GPU (engine/gpu/batch.cu).
 *
 * spmv_gpu_run_batch runs k products, each with its own host x and y, as
 * one SpMM: x copied into a device block column by column, X turned to
 * rows for the kernel, Y back to columns, each y copied out on its own.
 * Every y of every batch is compared with cpu.csr.serial on the host
 * (spmv_cpu_run) and with the same kernel's unbatched product
 * (spmv_gpu_run), within the kernel's tolerance: max_i |y_i - ref_i| over
 * max_i (|A|·|x|)_i under 1e-12 (float64) or 1e-4 (float32).
 *
 * - test_batch_kernels: gpu.csr.spmm and cusparse.csr, both dtypes, four
 *   shapes (random columns, power-law rows, a dense row, no non-zeros),
 *   k = 1, 2, 3, 8, 13 (not a power of two, across gpu.csr.spmm's tile of
 *   8), 16 and SPMV_MAX_K; each x and y a separate host array (some
 *   page-locked, as the daemon's request bodies are), y poisoned (NaN)
 *   beforehand; the parts of the time are non-negative and add up to no
 *   more than the total.
 * - test_batch_one_column: k = 1 on kernels that take one column only
 *   (gpu.csr.vector, gpu.hll): the batch is their plain product.
 * - test_batch_refused: 0 or more than max_k products, k = 2 on a
 *   one-column kernel, a CPU kernel, a missing x: SPMV_ERR_INVALID, and no
 *   y written.
 * - test_batch_block: the device block is counted in the context's
 *   scratch, grows to the widest batch, and everything else spmvd holds
 *   on the device comes back to where it was.
 *
 * Random x and matrices from the printed seed (SPMV_SEED repeats a run).
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

/* One matrix on both sides. */
typedef struct both {
    spmv_coo coo;
    spmv_matrix host;
    spmv_gpu_matrix *dev;
    spmv_dtype dt;
} both;

static void both_make(tu_shape shape, int32_t n, spmv_dtype dt, both *b)
{
    spmv_error err = {0};
    spmv_gpu_upload_stats us;
    memset(b, 0, sizeof *b);
    b->dt = dt;
    tu_random_coo(&TG.rng, shape, n, SPMV_FLOAT64, &b->coo);
    assert_int_equal(spmv_matrix_build(&b->coo, dt, SPMV_FMT_CSR, 32, 0, &b->host, &err), SPMV_OK);
    if (spmv_gpu_matrix_upload(TG.ctx, &b->coo, dt, SPMV_FMT_CSR, 32, &b->dev, &us, &err) != SPMV_OK)
        fail_msg("upload: %s", err.message);
}

static void both_free(both *b)
{
    spmv_gpu_matrix_free(TG.ctx, b->dev);
    spmv_matrix_free(&b->host);
    spmv_coo_free(&b->coo);
}

/* k separate host arrays of n values each: page-locked when pinned. */
static void **arrays(int32_t k, int64_t n, spmv_dtype dt, bool pinned)
{
    void **a = calloc((size_t)k, sizeof *a);
    assert_non_null(a);
    size_t bytes = (size_t)(n ? n : 1) * spmv_dtype_size(dt);
    spmv_error err = {0};
    for (int32_t j = 0; j < k; j++) {
        if (pinned)
            assert_int_equal(spmv_gpu_host_alloc(bytes, &a[j], &err), SPMV_OK);
        else
            assert_non_null(a[j] = malloc(bytes));
    }
    return a;
}

static void arrays_free(void **a, int32_t k, bool pinned)
{
    for (int32_t j = 0; j < k; j++)
        pinned ? spmv_gpu_host_free(a[j]) : free(a[j]);
    free(a);
}

/* Bounds on max_i |y_i - ref_i| / max_i (|A|·|x|)_i: rounding scales with
 * |A|·|x|, not with y (a dense row's sum may cancel). */
static double tol_of(spmv_dtype dt) { return dt == SPMV_FLOAT32 ? 1e-4 : 1e-12; }

static double scale_of(const both *b, const void *x)
{
    double *abs_ax = malloc((size_t)(b->coo.rows ? b->coo.rows : 1) * sizeof *abs_ax), worst = 0;
    assert_non_null(abs_ax);
    tu_abs_product(&b->coo, b->dt, x, abs_ax);
    for (int32_t i = 0; i < b->coo.rows; i++)
        if (abs_ax[i] > worst)
            worst = abs_ax[i];
    free(abs_ax);
    return worst > 0 ? worst : 1;
}

static void check_times(const spmv_batch_times *t)
{
    assert_true(t->h2d_ms >= 0 && t->layout_ms >= 0 && t->spmm_ms >= 0 && t->d2h_ms >= 0 && t->host_ms >= 0);
    double parts = t->h2d_ms + t->layout_ms + t->spmm_ms + t->d2h_ms + t->host_ms;
    assert_true(parts <= t->total_ms * 1.001 + 1e-3);
}

/* One batch of k on kernel `name`: every y against cpu.csr.serial and the
 * kernel's own unbatched product. */
static void one_batch(both *b, const char *name, int32_t k, bool pinned)
{
    spmv_error err = {0};
    const spmv_kernel *kern = spmv_kernel_find(name), *ref = spmv_kernel_find("cpu.csr.serial");
    assert_non_null(kern);
    int64_t rows = b->host.rows, cols = b->host.cols;
    void **x = arrays(k, cols, b->dt, pinned), **y = arrays(k, rows, b->dt, pinned);
    void *want = malloc((size_t)(rows ? rows : 1) * spmv_dtype_size(b->dt)),
         *alone = malloc((size_t)(rows ? rows : 1) * spmv_dtype_size(b->dt));
    assert_true(want && alone);
    for (int32_t j = 0; j < k; j++) {
        tu_random_vector(&TG.rng, b->dt, cols, x[j]);
        tu_poison(y[j], b->dt, rows);
    }
    spmv_stats st;
    spmv_batch_times t;
    memset(&t, 0xff, sizeof t);
    if (spmv_gpu_run_batch(TG.ctx, kern, b->dev, NULL, k, (const void *const *)x, y, &st, &t, &err) != SPMV_OK)
        fail_msg("%s k=%d %s: %s", name, k, spmv_dtype_name(b->dt), err.message);
    check_times(&t);
    assert_int_equal(st.runs, 1);
    char what[128];
    for (int32_t j = 0; j < k; j++) {
        double scale = scale_of(b, x[j]);
        assert_int_equal(spmv_cpu_run(ref, &b->host, NULL, x[j], want, 0, 1, NULL, &err), SPMV_OK);
        snprintf(what, sizeof what, "%s k=%d %s column %d vs cpu.csr.serial", name, k, spmv_dtype_name(b->dt), j);
        TU_ASSERT_CLOSE_SCALED(what, b->dt, y[j], b->dt, want, rows, scale, tol_of(b->dt));
        if (j % 5 == 0 || j == k - 1) { /* the unbatched product of the same kernel (a few columns) */
            tu_poison(alone, b->dt, rows);
            if (spmv_gpu_run(TG.ctx, kern, b->dev, NULL, x[j], alone, 0, 1, NULL, &err) != SPMV_OK)
                fail_msg("%s alone: %s", name, err.message);
            snprintf(what, sizeof what, "%s k=%d %s column %d vs unbatched", name, k, spmv_dtype_name(b->dt), j);
            TU_ASSERT_CLOSE_SCALED(what, b->dt, y[j], b->dt, alone, rows, scale, tol_of(b->dt));
        }
    }
    free(want);
    free(alone);
    arrays_free(x, k, pinned);
    arrays_free(y, k, pinned);
}

static void test_batch_kernels(void **state)
{
    (void)state;
    TU_NEED_GPU();
    static const tu_shape shapes[] = {TU_SHAPE_RANDOM, TU_SHAPE_POWER_LAW, TU_SHAPE_DENSE_ROW, TU_SHAPE_NO_NONZEROS};
    static const char *const names[] = {"gpu.csr.spmm", "cusparse.csr"};
    static const int32_t ks[] = {1, 2, 3, 8, 13, 16, SPMV_MAX_K};
    for (int d = 0; d < 2; d++) {
        spmv_dtype dt = d ? SPMV_FLOAT32 : SPMV_FLOAT64;
        for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
            both b;
            int32_t n = TG.quick ? 3000 : 1 + (int32_t)tu_rng_range(&TG.rng, 20000, 60000);
            both_make(shapes[si], n, dt, &b);
            for (size_t kn = 0; kn < 2; kn++)
                for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
                    one_batch(&b, names[kn], ks[ki], ki % 2 == 1);
            print_message("# batch %s shape %zu (%d x %d, %lld nnz): gpu.csr.spmm, cusparse.csr ok\n",
                          spmv_dtype_name(dt), si, b.host.rows, b.host.cols, (long long)b.host.nnz);
            both_free(&b);
        }
    }
}

static void test_batch_one_column(void **state)
{
    (void)state;
    TU_NEED_GPU();
    static const char *const names[] = {"gpu.csr.vector", "gpu.hll", "gpu.csr.scalar"};
    for (int d = 0; d < 2; d++) {
        both b;
        both_make(TU_SHAPE_RANDOM, 4000, d ? SPMV_FLOAT32 : SPMV_FLOAT64, &b);
        for (size_t kn = 0; kn < sizeof names / sizeof *names; kn++)
            one_batch(&b, names[kn], 1, kn == 0);
        both_free(&b);
    }
}

static void test_batch_refused(void **state)
{
    (void)state;
    TU_NEED_GPU();
    both b;
    both_make(TU_SHAPE_RANDOM, 500, SPMV_FLOAT64, &b);
    const int32_t k = 2;
    void **x = arrays(SPMV_MAX_K + 1, b.host.cols, b.dt, false), **y = arrays(SPMV_MAX_K + 1, b.host.rows, b.dt, false);
    for (int32_t j = 0; j <= SPMV_MAX_K; j++) {
        tu_random_vector(&TG.rng, b.dt, b.host.cols, x[j]);
        tu_poison(y[j], b.dt, b.host.rows);
    }
    const void *const *cx = (const void *const *)x;
    spmv_error err = {0};
    const spmv_kernel *spmm = spmv_kernel_find("gpu.csr.spmm");
    assert_int_equal(spmv_gpu_run_batch(TG.ctx, spmm, b.dev, NULL, 0, cx, y, NULL, NULL, &err), SPMV_ERR_INVALID);
    assert_int_equal(spmv_gpu_run_batch(TG.ctx, spmm, b.dev, NULL, SPMV_MAX_K + 1, cx, y, NULL, NULL, &err),
                     SPMV_ERR_INVALID);
    assert_int_equal(spmv_gpu_run_batch(TG.ctx, spmv_kernel_find("gpu.csr.vector"), b.dev, NULL, k, cx, y, NULL,
                                        NULL, &err),
                     SPMV_ERR_INVALID);
    assert_int_equal(spmv_gpu_run_batch(TG.ctx, spmv_kernel_find("cpu.csr.serial"), b.dev, NULL, k, cx, y, NULL,
                                        NULL, &err),
                     SPMV_ERR_INVALID);
    const void *holes[2] = {x[0], NULL};
    assert_int_equal(spmv_gpu_run_batch(TG.ctx, spmm, b.dev, NULL, k, holes, y, NULL, NULL, &err), SPMV_ERR_INVALID);
    print_message("# the last refusal says: %s\n", err.message);
    for (int32_t j = 0; j <= SPMV_MAX_K; j++) /* nothing written */
        for (int32_t i = 0; i < b.host.rows; i++)
            assert_true(isnan(((double *)y[j])[i]));
    arrays_free(x, SPMV_MAX_K + 1, false);
    arrays_free(y, SPMV_MAX_K + 1, false);
    both_free(&b);
}

static void info(size_t *held, size_t *scratch)
{
    spmv_gpu_info i;
    assert_int_equal(spmv_gpu_ctx_info(TG.ctx, &i), SPMV_OK);
    *held = i.mem_used_by_spmvd - i.mem_scratch;
    *scratch = i.mem_scratch;
}

static void test_batch_block(void **state)
{
    (void)state;
    TU_NEED_GPU();
    size_t held0, s0, held1, s1, held2, s2;
    info(&held0, &s0);
    both b;
    both_make(TU_SHAPE_RANDOM, 30000, SPMV_FLOAT64, &b);
    size_t matrix = spmv_gpu_matrix_bytes(b.dev);
    one_batch(&b, "gpu.csr.spmm", 16, false);
    info(&held1, &s1);
    size_t want = (size_t)16 * ((size_t)b.host.cols * 2 + b.host.rows) * 8; /* Xc, X, Y */
    assert_true(s1 >= s0 + want || s0 >= want);
    one_batch(&b, "gpu.csr.spmm", 4, false); /* narrower: the block is kept, nothing grows */
    info(&held2, &s2);
    assert_int_equal(s2, s1);
    print_message("# batch block: %zu bytes of scratch after 16 columns (%zu before)\n", s1, s0);
    assert_true(spmv_gpu_matrix_bytes(b.dev) >= matrix);
    both_free(&b);
    info(&held2, &s2);
    assert_int_equal(held2, held0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_kernels),
        cmocka_unit_test(test_batch_one_column),
        cmocka_unit_test(test_batch_refused),
        cmocka_unit_test(test_batch_block),
    };
    return tu_gpu_run("gpu_batch", tests);
}
