/* test_tune.c — the `auto` tuner (engine/tune.c) on CPU kernels.
 *
 * The tuning loop is device-independent (the caller passes the runner), so
 * it is tested here with the CPU kernels on random matrices drawn fresh
 * each run (seed printed): the winner is a registry kernel whose y, run
 * again with the chosen parameters, matches cpu.csr.serial; a kernel that
 * answers wrongly is never chosen, however fast; and the budget in kernel
 * runs (max_runs) bounds the runs spent, probes and warm-ups included,
 * whatever the matrix (counted, never timed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "spmv.h"
#include "testutil.h"

typedef struct runner {
    spmv_matrix *m;
    const char *corrupt;   /* this kernel's y is made wrong (and claims 0 ms) */
    int32_t runs;          /* kernel runs asked for, warm-up included */
    double omp_ms, serial_ms, other_ms; /* when other_ms > 0: the medians reported (y stays the kernel's) */
    int32_t chunked_calls, hll_dynamic_calls; /* calls of cpu.csr.chunked, of cpu.hll.omp with schedule 2 */
} runner;

static int32_t spsell_calls; /* calls of cpu.spsell.omp, all runners */

static int run_cpu(void *ctx, const spmv_kernel *k, const spmv_params *p, const void *x, void *y, int32_t warmup,
                   int32_t runs, spmv_stats *st, spmv_error *err)
{
    runner *r = ctx;
    r->runs += warmup + runs;
    r->chunked_calls += k->impl == SPMV_IMPL_CPU_CSR_CHUNKED;
    r->hll_dynamic_calls += k->impl == SPMV_IMPL_CPU_HLL_OMP && p && p->v[SPMV_PARAM_SCHEDULE] == 2;
    spsell_calls += k->impl == SPMV_IMPL_CPU_SPSELL_OMP;
    int rc = spmv_cpu_run(k, r->m, p, x, y, warmup, runs, st, err);
    if (rc == SPMV_OK && r->corrupt && strcmp(k->name, r->corrupt) == 0) {
        if (r->m->dtype == SPMV_FLOAT64)
            ((double *)y)[0] += 1.0;
        else
            ((float *)y)[0] += 1.0f;
        st->median_ms = 0;
    }
    if (rc == SPMV_OK && r->other_ms > 0)
        st->median_ms = strcmp(k->name, "cpu.csr.omp") == 0      ? r->omp_ms
                        : strcmp(k->name, "cpu.csr.serial") == 0 ? r->serial_ms
                                                                 : r->other_ms;
    return rc;
}

static void random_matrix(uint64_t salt, spmv_dtype dt, spmv_matrix *m)
{
    tu_rng r;
    spmv_coo coo;
    spmv_error err;
    tu_rng_init(&r, tu_seed() ^ salt);
    tu_gen g = {(int32_t)tu_rng_range(&r, 50, 3000), (int32_t)tu_rng_range(&r, 50, 3000), 6, 0.05, true, 1, 400};
    tu_random_coo_gen(&r, &g, dt, &coo);
    assert_int_equal(spmv_matrix_build(&coo, dt, SPMV_FMT_CSR, 32, 0, m, &err), SPMV_OK);
    spmv_coo_free(&coo);
}

/* The winner exists, and running it again gives the reference's y. */
static void test_tune_picks_verified(void **state)
{
    (void)state;
    for (int d = 0; d < 2; d++) {
        spmv_matrix m;
        spmv_tune_result res;
        spmv_error err;
        spmv_stats st;
        random_matrix(31 + d, (spmv_dtype)d, &m);
        runner rn = {&m, NULL, 0, 0, 0, 0, 0, 0};
        spmv_tune_options o = {SPMV_DEVICE_CPU, 60000, 0, 3, tu_seed(), 1, 0};
        assert_int_equal(spmv_tune(&m.csr, &o, run_cpu, &rn, &res, &err), SPMV_OK);
        assert_non_null(res.kernel);
        assert_ptr_equal(spmv_kernel_find(res.kernel->name), res.kernel);
        assert_int_equal(res.kernel->device, SPMV_DEVICE_CPU);
        assert_true(res.timed >= 1 && res.timed <= res.candidates);
        assert_int_equal(res.runs, rn.runs);
        size_t vs = spmv_dtype_size(m.dtype);
        void *x = malloc((size_t)m.cols * vs), *y = malloc((size_t)m.rows * vs), *ref = malloc((size_t)m.rows * vs);
        assert_true(x && y && ref);
        tu_rng r;
        tu_rng_init(&r, tu_seed() ^ 77);
        tu_random_vector(&r, m.dtype, m.cols, x);
        tu_poison(y, m.dtype, m.rows);
        spmv_reference(&m.csr, x, ref);
        assert_int_equal(spmv_cpu_run(res.kernel, &m, &res.params, x, y, 0, 1, &st, &err), SPMV_OK);
        assert_true(spmv_max_rel_err(m.dtype, y, ref, m.rows) <= (d ? 1e-4 : 1e-12));
        free(x);
        free(y);
        free(ref);
        spmv_matrix_free(&m);
    }
}

/* A kernel that answers wrongly (and claims to take no time) is never chosen. */
static void test_tune_rejects_wrong(void **state)
{
    (void)state;
    spmv_matrix m;
    spmv_tune_result res;
    spmv_error err;
    random_matrix(41, SPMV_FLOAT64, &m);
    runner rn = {&m, "cpu.csr.omp", 0, 0, 0, 0, 0, 0};
    spmv_tune_options o = {SPMV_DEVICE_CPU, 60000, 0, 3, tu_seed(), 1, 0};
    assert_int_equal(spmv_tune(&m.csr, &o, run_cpu, &rn, &res, &err), SPMV_OK);
    assert_string_not_equal(res.kernel->name, "cpu.csr.omp");
    spmv_matrix_free(&m);
}

/* max_runs bounds the runs spent; a budget too small for one full timing
 * still picks a verified kernel on its probe (auto never fails where a
 * kernel works), and a time budget of nothing too. */
static void test_tune_budget_runs(void **state)
{
    (void)state;
    spmv_matrix m;
    spmv_tune_result res;
    spmv_error err;
    random_matrix(51, SPMV_FLOAT32, &m);
    int32_t budgets[] = {1, 2, 5, 13, 20, 40};
    for (size_t i = 0; i < sizeof budgets / sizeof *budgets; i++) {
        runner rn = {&m, NULL, 0, 0, 0, 0, 0, 0};
        spmv_tune_options o = {SPMV_DEVICE_CPU, 600000, budgets[i], 3, tu_seed(), 1, 0};
        int rc = spmv_tune(&m.csr, &o, run_cpu, &rn, &res, &err);
        assert_true(rn.runs <= budgets[i]);
        assert_int_equal(res.runs, rn.runs);
        assert_int_equal(rc, SPMV_OK);
        assert_non_null(res.kernel);
        if (budgets[i] < 1 + 2 + 3) { /* a probe plus 2 warm-ups and 3 timed runs: judged on a probe */
            assert_true(res.budget_hit);
            assert_int_equal(res.timed, 0);
        }
    }
    runner rn = {&m, NULL, 0, 0, 0, 0, 0, 0};
    spmv_tune_options o = {SPMV_DEVICE_CPU, 1e-9, 0, 3, tu_seed(), 1, 0};
    assert_int_equal(spmv_tune(&m.csr, &o, run_cpu, &rn, &res, &err), SPMV_OK);
    assert_non_null(res.kernel);
    assert_true(res.budget_hit);
    spmv_matrix_free(&m);
}

/* Where nothing clearly wins, the baseline (cpu.csr.omp here, cuSPARSE on
 * a GPU) is kept: a kernel 1 % faster loses to it, one 2x faster wins. */
static void test_tune_prefers_baseline(void **state)
{
    (void)state;
    spmv_matrix m;
    spmv_tune_result res;
    spmv_error err;
    random_matrix(61, SPMV_FLOAT64, &m);
    const double serial[] = {0.99, 0.5, 1.2};
    const char *want[] = {"cpu.csr.omp", "cpu.csr.serial", "cpu.csr.omp"};
    for (int i = 0; i < 3; i++) {
        runner rn = {&m, NULL, 0, 1.0, serial[i], 5.0, 0, 0};
        spmv_tune_options o = {SPMV_DEVICE_CPU, 600000, 0, 3, tu_seed(), 1, 0};
        assert_int_equal(spmv_tune(&m.csr, &o, run_cpu, &rn, &res, &err), SPMV_OK);
        assert_string_equal(res.kernel->name, want[i]);
    }
    spmv_matrix_free(&m);
}

/* auto never probes a pathological setting: cpu.csr.chunked at span 8 on
 * 1000 x 1000000 (125000 passes over the rows, 1.25e8 units a run against
 * a few thousand for a product) is not run at all, while on a narrow
 * matrix it is a candidate like the others, and cpu.hll.omp's dynamic
 * schedule is tried beside the static one. */
static void test_tune_skips_pathological(void **state)
{
    (void)state;
    spmv_gen_spec g = {.kind = SPMV_GEN_RANDOM, .n = 1000, .per_row = 1000000, .dense_len = 3000, .seed = tu_seed()};
    spmv_coo coo;
    spmv_matrix wide, narrow;
    spmv_tune_result res;
    spmv_error err;
    assert_int_equal(spmv_gen(&g, &coo, &err), SPMV_OK);
    assert_int_equal(spmv_matrix_build(&coo, SPMV_FLOAT64, SPMV_FMT_CSR, 32, 0, &wide, &err), SPMV_OK);
    spmv_coo_free(&coo);
    spmv_tune_options o = {SPMV_DEVICE_CPU, 60000, 0, 2, tu_seed(), 1, 0};
    runner rn = {.m = &wide};
    assert_int_equal(spmv_tune(&wide.csr, &o, run_cpu, &rn, &res, &err), SPMV_OK);
    assert_int_equal(rn.chunked_calls, 0);
    assert_true(res.kernel->impl != SPMV_IMPL_CPU_CSR_CHUNKED);
    random_matrix(57, SPMV_FLOAT64, &narrow);
    runner rn2 = {.m = &narrow};
    assert_int_equal(spmv_tune(&narrow.csr, &o, run_cpu, &rn2, &res, &err), SPMV_OK);
    assert_true(rn2.chunked_calls >= 1);
    assert_true(rn2.hll_dynamic_calls >= 1);
    spmv_matrix_free(&wide);
    spmv_matrix_free(&narrow);
}

static void test_auto_in_registry(void **state)
{
    (void)state;
    const spmv_kernel *k = spmv_kernel_find("auto");
    assert_non_null(k);
    assert_true(spmv_kernel_is_auto(k));
    assert_false(spmv_kernel_is_auto(spmv_kernel_find("cpu.csr.omp")));
    char buf[64];
    spmv_params p = {{0}};
    p.v[SPMV_PARAM_THREADS] = 8;
    spmv_params_format(spmv_kernel_find("gpu.csr.light"), &p, buf, sizeof buf);
    assert_string_equal(buf, "threads=8");
}

/* cpu.spsell.omp is a candidate of an exactly symmetric matrix only: auto
 * never runs it on another, and on a symmetric one it is timed (and the
 * winner, whichever it is, verified). */
static void test_tune_spsell_symmetric_only(void **state)
{
    (void)state;
    for (int sym = 0; sym < 2; sym++) {
        spmv_matrix m;
        spmv_tune_result res;
        spmv_error err;
        tu_rng r;
        spmv_coo pat, coo;
        tu_rng_init(&r, tu_seed() ^ (91 + (uint64_t)sym));
        tu_random_coo(&r, TU_SHAPE_POWER_LAW, 2000, SPMV_FLOAT64, &pat);
        if (sym)
            tu_symmetric_coo(&r, &pat, 0, &coo);
        assert_int_equal(spmv_matrix_build(sym ? &coo : &pat, SPMV_FLOAT64, SPMV_FMT_CSR, 32, 0, &m, &err), SPMV_OK);
        assert_int_equal(spmv_csr_symmetric(&m.csr), sym);
        runner rn = {&m, NULL, 0, 0, 0, 0, 0, 0};
        spmv_tune_options o = {SPMV_DEVICE_CPU, 60000, 0, 3, tu_seed(), 1, 0};
        spsell_calls = 0;
        assert_int_equal(spmv_tune(&m.csr, &o, run_cpu, &rn, &res, &err), SPMV_OK);
        assert_int_equal(spsell_calls > 0, sym);
        spmv_matrix_free(&m);
        spmv_coo_free(&pat);
        if (sym)
            spmv_coo_free(&coo);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto_in_registry),
        cmocka_unit_test(test_tune_picks_verified),
        cmocka_unit_test(test_tune_rejects_wrong),
        cmocka_unit_test(test_tune_budget_runs),
        cmocka_unit_test(test_tune_prefers_baseline),
        cmocka_unit_test(test_tune_skips_pathological),
        cmocka_unit_test(test_tune_spsell_symmetric_only),
    };
    tu_seed();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
