/* test_gpu_spmspm.c — the GPU SpMSpM kernels (engine/gpu/spmspm.cu):
 * gpu.spmspm.thread_row and block_row (`output` 1 atomic and 2 scan),
 * block_counter, warp_nnz (`accumulate` 1 shared and 2 sort),
 * warp_nnz_wide and cusparse.spgemm, each in float64 and float32.
 *
 * On a host without a GPU every case is skipped with spmv_gpu_count()'s
 * reason, so `make test` passes there and says why; the GPU host runs the
 * binary from the bundle (tools/bundle/run.sh runs every test_gpu*).
 *
 * Each kernel's C is compared with the CPU reference, cpu.spmspm.serial
 * (spmv_spmspm_reference) on the same operands in the same dtype: the
 * structure must be identical (sorted rows, no duplicates, the symbolic
 * pattern) and the values within max |c - ref| / max |ref| of 1e-12
 * (float64) or 1e-5 (float32), widened by sqrt(products per row / 100)
 * past 100 since the kernels sum in other orders. Inputs: every
 * ../shared/matrices/real/ matrix times a random thin B of 1, 8, 32 and
 * 300 columns (drawn afresh; the seed is printed, SPMV_SEED repeats a
 * run); testutil's random shapes times B; B of 3000 columns (several
 * shared-memory chunks per row); a row of 20 000 entries; the empty shapes
 * 0 x 5, 5 x 0, 0 x 0 on either side; block_size 32 and 1024. The
 * engine poisons C's device arrays (and the triplet buffers) before the
 * first run, and each call runs three times on the same buffers (one
 * warm-up, two timed), so a counter or row count not reset between runs
 * shows. Refusals:
 * a shape mismatch (SPMV_ERR_SHAPE naming both shapes), mixed dtypes, an
 * SpMV kernel. A table "# kernel dtype passed failed" closes each case.
 * SPMV_GPU_ONLY=pattern runs only the cases whose name matches.
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

/* Every kernel and every value of its algorithm parameter (`output`,
 * `accumulate`): the GPU run checks each form against the reference. */
static const struct variant {
    const char *kernel, *label;
    spmv_param_id param; /* SPMV_PARAM_COUNT: none */
    int32_t value;
} variants[] = {
    {"gpu.spmspm.thread_row", "thread_row output=1", SPMV_PARAM_OUTPUT, 1},
    {"gpu.spmspm.thread_row", "thread_row output=2", SPMV_PARAM_OUTPUT, 2},
    {"gpu.spmspm.block_row", "block_row output=1", SPMV_PARAM_OUTPUT, 1},
    {"gpu.spmspm.block_row", "block_row output=2", SPMV_PARAM_OUTPUT, 2},
    {"gpu.spmspm.block_counter", "block_counter", SPMV_PARAM_COUNT, 0},
    {"gpu.spmspm.warp_nnz", "warp_nnz accumulate=1", SPMV_PARAM_ACCUMULATE, 1},
    {"gpu.spmspm.warp_nnz", "warp_nnz accumulate=2", SPMV_PARAM_ACCUMULATE, 2},
    {"gpu.spmspm.warp_nnz_wide", "warp_nnz_wide", SPMV_PARAM_COUNT, 0},
    {"cusparse.spgemm", "cusparse.spgemm", SPMV_PARAM_COUNT, 0},
};
#define NKERNELS ((int)(sizeof variants / sizeof variants[0]))

static const int32_t thin_cols[] = {1, 8, 32, 300};
#define NTHIN (sizeof thin_cols / sizeof thin_cols[0])

static struct {
    int pass[NKERNELS][2], fail[NKERNELS][2];
} fx;

static void print_tallies(const char *title)
{
    print_message("# %s\n# %-26s %-8s %6s %6s\n", title, "kernel", "dtype", "passed", "failed");
    for (int k = 0; k < NKERNELS; k++)
        for (int d = 0; d < 2; d++)
            print_message("# %-26s %-8s %6d %6d %s\n", variants[k].label, spmv_dtype_name((spmv_dtype)d),
                          fx.pass[k][d], fx.fail[k][d], fx.fail[k][d] ? "FAIL" : "ok");
    memset(fx.pass, 0, sizeof fx.pass);
    memset(fx.fail, 0, sizeof fx.fail);
}

/* ------------------------------------------------------------ operands */

/* Both sides of one product: host CSR (for the reference) and device. */
typedef struct operand {
    spmv_coo coo;
    spmv_csr csr;
    spmv_gpu_matrix *dev;
} operand;

static void operand_make(spmv_coo *coo, spmv_dtype dt, operand *o)
{
    spmv_error err;
    spmv_gpu_upload_stats st;
    o->coo = *coo;
    memset(coo, 0, sizeof *coo);
    if (spmv_coo_to_csr(&o->coo, dt, &o->csr, &err) != SPMV_OK)
        fail_msg("coo -> csr: %s", err.message);
    if (spmv_gpu_matrix_upload(TG.ctx, &o->coo, dt, SPMV_FMT_CSR, 32, &o->dev, &st, &err) != SPMV_OK)
        fail_msg("upload %d x %d: %s", o->coo.rows, o->coo.cols, err.message);
}

static void operand_free(operand *o)
{
    spmv_gpu_matrix_free(TG.ctx, o->dev);
    spmv_csr_free(&o->csr);
    spmv_coo_free(&o->coo);
}

static void thin_coo(int32_t rows, int32_t cols, spmv_coo *out)
{
    tu_gen g = {.rows = rows, .cols = cols, .mean_per_row = cols < 4 ? cols : 4, .empty_row_frac = 0.15};
    tu_random_coo_gen(&TG.rng, &g, SPMV_FLOAT64, out);
}

static int64_t max_row_products(const spmv_csr *a, const spmv_csr *b)
{
    int64_t best = 0;
    for (int32_t i = 0; i < a->rows; i++) {
        int64_t n = 0;
        for (int32_t p = a->row_ptr[i]; p < a->row_ptr[i + 1]; p++)
            n += b->row_ptr[a->col[p] + 1] - b->row_ptr[a->col[p]];
        best = n > best ? n : best;
    }
    return best;
}

/* Every GPU SpMSpM kernel on (a, b) at `block`; returns the failures. */
static int check_kernels(const char *label, const operand *a, const operand *b, int32_t block)
{
    spmv_csr ref;
    spmv_error err;
    int failures = 0;
    spmv_dtype dt = a->csr.dtype;
    double bound = dt == SPMV_FLOAT32 ? F32_BOUND : F64_BOUND;
    int64_t longest = max_row_products(&a->csr, &b->csr);
    if (longest > 100)
        bound *= sqrt((double)longest / 100.0);
    if (spmv_spmspm_reference(&a->csr, &b->csr, &ref, &err) != SPMV_OK)
        fail_msg("reference on %s: %s", label, err.message);
    for (int k = 0; k < NKERNELS; k++) {
        const spmv_kernel *kern = spmv_kernel_find(variants[k].kernel);
        spmv_params p = {{0}};
        if (variants[k].param != SPMV_PARAM_COUNT)
            p.v[variants[k].param] = variants[k].value;
        spmv_csr c;
        spmv_stats st;
        double e = -1;
        bool ok;
        if (kern->params & (1u << SPMV_PARAM_BLOCK_SIZE))
            p.v[SPMV_PARAM_BLOCK_SIZE] = block;
        else if (block != 256)
            continue; /* cuSPARSE takes no block size: once is enough */
        int rc = spmv_gpu_spmspm(TG.ctx, kern, a->dev, b->dev, &p, 1, 2, &c, &st, &err);
        ok = rc == SPMV_OK && spmv_csr_compare(&c, &ref, &e, &err) == SPMV_OK && e <= bound && st.runs == 2;
        if (!ok) {
            print_message("# FAIL %s %s block %d on %s: %s (error %.3g, bound %.3g, seed %llu)\n", variants[k].label,
                          spmv_dtype_name(dt), block, label, rc ? err.message : e > bound ? "values" : err.message,
                          e, bound, (unsigned long long)tu_seed());
            failures++;
        }
        (ok ? fx.pass : fx.fail)[k][dt]++;
        if (rc == SPMV_OK)
            spmv_csr_free(&c);
    }
    spmv_csr_free(&ref);
    return failures;
}

/* A x B for a fresh B of each thin width, both dtypes. */
static int check_thin_products(const char *name, const spmv_coo *a64, const int32_t *widths, size_t nw,
                               int32_t block)
{
    int failures = 0;
    for (int d = 0; d < 2; d++)
        for (size_t t = 0; t < nw; t++) {
            operand a, b;
            spmv_coo ac, bc;
            spmv_error err;
            char label[256];
            assert_int_equal(spmv_coo_copy(a64, &ac, &err), SPMV_OK);
            thin_coo(a64->cols, widths[t], &bc);
            operand_make(&ac, (spmv_dtype)d, &a);
            operand_make(&bc, (spmv_dtype)d, &b);
            snprintf(label, sizeof label, "%s x B %d x %d (%lld nnz)", name, b.csr.rows, b.csr.cols,
                     (long long)b.csr.nnz);
            failures += check_kernels(label, &a, &b, block);
            operand_free(&a);
            operand_free(&b);
        }
    return failures;
}

/* --------------------------------------------------------------- tests */

static void test_real_times_thin(void **state)
{
    (void)state;
    TU_NEED_GPU();
    tu_expected *ex = NULL;
    size_t n = 0;
    int failures = 0;
    assert_int_equal(tu_expected_load(&ex, &n), 0);
    for (size_t i = 0; i < n; i++) {
        char rel[256], path[4096];
        spmv_coo coo;
        spmv_error err;
        snprintf(rel, sizeof rel, "real/%s", ex[i].file);
        tu_matrices_path(path, sizeof path, rel);
        if (spmv_mm_read_file(path, NULL, &coo, NULL, &err) != SPMV_OK)
            fail_msg("%s: %s", path, err.message);
        failures += check_thin_products(ex[i].file, &coo, thin_cols, NTHIN, 256);
        spmv_coo_free(&coo);
    }
    tu_expected_free(ex, n);
    print_tallies("real matrices x thin B");
    assert_int_equal(failures, 0);
}

static void test_random_shapes(void **state)
{
    (void)state;
    TU_NEED_GPU();
    int failures = 0;
    static const int32_t blocks[] = {32, 256, 1024};
    for (int s = 0; s < TU_SHAPE_COUNT; s++)
        for (size_t bl = 0; bl < sizeof blocks / sizeof blocks[0]; bl++) {
            spmv_coo coo;
            char label[128];
            tu_random_coo(&TG.rng, (tu_shape)s, 2000, SPMV_FLOAT64, &coo);
            snprintf(label, sizeof label, "random %s %d x %d", tu_shape_name((tu_shape)s), coo.rows, coo.cols);
            failures += check_thin_products(label, &coo, thin_cols, NTHIN, blocks[bl]);
            spmv_coo_free(&coo);
        }
    print_tallies("random shapes x thin B, block_size 32 / 256 / 1024");
    assert_int_equal(failures, 0);
}

/* B wider than one shared chunk (1024 columns), and a row of 20 000
 * entries of A (many products per row, every chunk loop long). */
static void test_wide_and_long(void **state)
{
    (void)state;
    TU_NEED_GPU();
    int failures = 0;
    static const int32_t wide[] = {3000};
    spmv_coo coo;
    tu_random_coo(&TG.rng, TU_SHAPE_POWER_LAW, 3000, SPMV_FLOAT64, &coo);
    failures += check_thin_products("random power-law 3000 x 3000", &coo, wide, 1, 256);
    spmv_coo_free(&coo);
    tu_gen g = {.rows = 500, .cols = 30000, .mean_per_row = 3, .empty_row_frac = 0.2, .dense_rows = 1,
                .dense_len = 20000};
    tu_random_coo_gen(&TG.rng, &g, SPMV_FLOAT64, &coo);
    failures += check_thin_products("a row of 20000 (500 x 30000)", &coo, thin_cols, NTHIN, 256);
    spmv_coo_free(&coo);
    print_tallies("wide B and a long row");
    assert_int_equal(failures, 0);
}

static void test_empty_shapes(void **state)
{
    (void)state;
    TU_NEED_GPU();
    static const int32_t shapes[][3] = {{0, 5, 7}, {5, 0, 7}, {0, 0, 0}, {5, 7, 0}, {7, 5, 3}};
    int failures = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        spmv_coo coo;
        char label[64];
        tu_gen g = {.rows = shapes[s][0], .cols = shapes[s][1], .mean_per_row = 2, .empty_row_frac = 0.3};
        tu_random_coo_gen(&TG.rng, &g, SPMV_FLOAT64, &coo);
        snprintf(label, sizeof label, "%d x %d", shapes[s][0], shapes[s][1]);
        failures += check_thin_products(label, &coo, &shapes[s][2], 1, 256);
        spmv_coo_free(&coo);
    }
    print_tallies("empty shapes");
    assert_int_equal(failures, 0);
}

static void test_refusals(void **state)
{
    (void)state;
    TU_NEED_GPU();
    operand a, b, b32;
    spmv_coo ca, cb, cb32;
    spmv_csr c;
    spmv_error err;
    const spmv_kernel *k = spmv_kernel_find("gpu.spmspm.block_row");
    thin_coo(10, 20, &ca);
    thin_coo(21, 4, &cb);
    thin_coo(20, 4, &cb32);
    operand_make(&ca, SPMV_FLOAT64, &a);
    operand_make(&cb, SPMV_FLOAT64, &b);
    operand_make(&cb32, SPMV_FLOAT32, &b32);
    assert_int_equal(spmv_gpu_spmspm(TG.ctx, k, a.dev, b.dev, NULL, 0, 1, &c, NULL, &err), SPMV_ERR_SHAPE);
    assert_non_null(strstr(err.message, "10 x 20"));
    assert_non_null(strstr(err.message, "21 x 4"));
    assert_int_equal(spmv_gpu_spmspm(TG.ctx, k, a.dev, b32.dev, NULL, 0, 1, &c, NULL, &err), SPMV_ERR_INVALID);
    assert_int_equal(spmv_gpu_spmspm(TG.ctx, spmv_kernel_find("gpu.csr.scalar"), a.dev, b32.dev, NULL, 0, 1, &c,
                                     NULL, &err),
                     SPMV_ERR_INVALID);
    assert_int_equal(spmv_gpu_spmspm(TG.ctx, spmv_kernel_find("cpu.spmspm.serial"), a.dev, b32.dev, NULL, 0, 1, &c,
                                     NULL, &err),
                     SPMV_ERR_INVALID);
    spmv_params p = {{0}};
    p.v[SPMV_PARAM_BLOCK_SIZE] = 48;
    operand_free(&b32);
    thin_coo(20, 4, &cb32);
    operand_make(&cb32, SPMV_FLOAT64, &b32);
    assert_int_equal(spmv_gpu_spmspm(TG.ctx, k, a.dev, b32.dev, &p, 0, 1, &c, NULL, &err), SPMV_ERR_INVALID);
    p.v[SPMV_PARAM_BLOCK_SIZE] = 0;
    p.v[SPMV_PARAM_OUTPUT] = 3; /* 1 atomic, 2 scan */
    assert_int_equal(spmv_gpu_spmspm(TG.ctx, k, a.dev, b32.dev, &p, 0, 1, &c, NULL, &err), SPMV_ERR_INVALID);
    assert_non_null(strstr(err.message, "output"));
    p.v[SPMV_PARAM_OUTPUT] = 0;
    p.v[SPMV_PARAM_ACCUMULATE] = 2; /* warp_nnz's, not block_row's */
    assert_int_equal(spmv_gpu_spmspm(TG.ctx, k, a.dev, b32.dev, &p, 0, 1, &c, NULL, &err), SPMV_ERR_INVALID);
    assert_int_equal(spmv_gpu_spmspm(TG.ctx, k, a.dev, b32.dev, NULL, 0, 0, &c, NULL, &err), SPMV_ERR_INVALID);
    assert_int_equal(spmv_gpu_spmspm(TG.ctx, k, a.dev, b32.dev, NULL, 0, 1, &c, NULL, &err), SPMV_OK);
    spmv_csr_free(&c);
    operand_free(&a);
    operand_free(&b);
    operand_free(&b32);
}

/* ---------------------------------------------------------------- main */

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals),      cmocka_unit_test(test_empty_shapes),
        cmocka_unit_test(test_real_times_thin), cmocka_unit_test(test_random_shapes),
        cmocka_unit_test(test_wide_and_long),
    };
    return tu_gpu_run("gpu_spmspm", tests);
}
