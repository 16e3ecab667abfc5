/* test_payback.c — what building a format costs and when it pays (issue
 * 30): the payback arithmetic (engine/payback.c), the conversion time the
 * host build records (engine/matrix.c), auto's tuner leaving formats out
 * (engine/tune.c, skip_formats) and the daemon's rule for the packed
 * formats (daemon/payback.c: only those the matrix can hold deferred), on
 * random matrices drawn from the printed seed.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/config.h"
#include "daemon/payback.h"
#include "daemon/store.h"
#include "spmv.h"
#include "testutil.h"

static int64_t payback(spmv_format f, double conv, double csr, double fmt, spmv_payback_status want)
{
    int64_t n = -7;
    assert_int_equal(spmv_payback(f, conv, csr, fmt, &n), want);
    assert_true(n >= 0);
    if (want != SPMV_PAYBACK_REPAID)
        assert_int_equal(n, 0);
    return n;
}

/* conversion / (csr - format), rounded up; never negative or infinite. */
static void test_payback_arithmetic(void **state)
{
    (void)state;
    assert_int_equal(payback(SPMV_FMT_PSELL, 10.0, 1.0, 0.5, SPMV_PAYBACK_REPAID), 20);
    assert_int_equal(payback(SPMV_FMT_PCSR, 10.0, 1.0, 0.7, SPMV_PAYBACK_REPAID), 34);  /* 33.3 up */
    assert_int_equal(payback(SPMV_FMT_ELL, 0.001, 2.0, 1.0, SPMV_PAYBACK_REPAID), 1);   /* the first product */
    assert_int_equal(payback(SPMV_FMT_HLL, 3.0, 0.25, 0.125, SPMV_PAYBACK_REPAID), 24); /* exact: not 25 */
    /* not faster: equal, slower, or a gain no realistic count repays */
    payback(SPMV_FMT_PSELL, 10.0, 1.0, 1.0, SPMV_PAYBACK_NOT_FASTER);
    payback(SPMV_FMT_PSELL, 10.0, 1.0, 3.0, SPMV_PAYBACK_NOT_FASTER);
    payback(SPMV_FMT_PSELL, 1e6, 1.0, 1.0 - 1e-12, SPMV_PAYBACK_NOT_FASTER);
    /* not measured: any of the three times missing (0 or NaN) */
    payback(SPMV_FMT_PSELL, 0, 1.0, 0.5, SPMV_PAYBACK_NOT_MEASURED);
    payback(SPMV_FMT_PSELL, 10.0, 0, 0.5, SPMV_PAYBACK_NOT_MEASURED);
    payback(SPMV_FMT_PSELL, 10.0, 1.0, 0, SPMV_PAYBACK_NOT_MEASURED);
    payback(SPMV_FMT_PSELL, NAN, 1.0, 0.5, SPMV_PAYBACK_NOT_MEASURED);
    payback(SPMV_FMT_PSELL, 10.0, INFINITY, 0.5, SPMV_PAYBACK_NOT_MEASURED);
    payback(SPMV_FMT_PSELL, 10.0, 0, 0, SPMV_PAYBACK_NOT_MEASURED);
    /* CSR is what the others are measured against */
    payback(SPMV_FMT_CSR, 10.0, 1.0, 0.5, SPMV_PAYBACK_BASELINE);
    assert_null(spmv_payback_reason(SPMV_PAYBACK_REPAID));
    assert_string_equal(spmv_payback_reason(SPMV_PAYBACK_NOT_FASTER), "not faster");
    assert_string_equal(spmv_payback_reason(SPMV_PAYBACK_NOT_MEASURED), "not measured");
    assert_string_equal(spmv_payback_reason(SPMV_PAYBACK_BASELINE), "baseline");
    /* the packed formats are a property of the format */
    assert_true((SPMV_FMT_PACKED & SPMV_FMT_PCSR) && (SPMV_FMT_PACKED & SPMV_FMT_PSELL));
    assert_false(SPMV_FMT_PACKED & (SPMV_FMT_CSR | SPMV_FMT_COO | SPMV_FMT_ELL | SPMV_FMT_HLL | SPMV_FMT_HYB));
}

static void random_csr(uint64_t salt, spmv_dtype dt, spmv_matrix *m)
{
    tu_rng r;
    spmv_coo coo;
    spmv_error err;
    tu_rng_init(&r, tu_seed() ^ salt);
    tu_gen g = {(int32_t)tu_rng_range(&r, 200, 3000), (int32_t)tu_rng_range(&r, 200, 3000), 6, 0.05, false, 0, 0};
    tu_random_coo_gen(&r, &g, dt, &coo);
    assert_int_equal(spmv_matrix_build(&coo, dt, SPMV_FMT_CSR, 32, NULL, m, &err), SPMV_OK);
    spmv_coo_free(&coo);
}

/* Each host format built records its conversion time; one not built has none. */
static void test_host_conversion_timed(void **state)
{
    (void)state;
    spmv_matrix m;
    spmv_error err;
    random_csr(11, SPMV_FLOAT64, &m);
    for (int i = 0; i < SPMV_FORMAT_COUNT; i++)
        assert_true(m.convert_ms[i] == 0);
    assert_int_equal(spmv_matrix_add_format(&m, SPMV_FMT_PSELL, &err), SPMV_OK);
    assert_int_equal(spmv_matrix_add_format(&m, SPMV_FMT_ELL, &err), SPMV_OK);
    assert_true(m.convert_ms[spmv_format_index(SPMV_FMT_PSELL)] > 0);
    assert_true(m.convert_ms[spmv_format_index(SPMV_FMT_ELL)] > 0);
    assert_true(m.convert_ms[spmv_format_index(SPMV_FMT_PCSR)] == 0);
    assert_true(m.convert_ms[spmv_format_index(SPMV_FMT_CSR)] == 0);
    spmv_matrix_free(&m);
}

/* A runner that reports `fast` kernels at 0.1 ms and every other at 1 ms
 * (y stays the kernel's own), counting the runs of packed kernels. */
typedef struct runner {
    spmv_matrix *m;
    int packed_calls;
} runner;

static int run_cpu(void *ctx, const spmv_kernel *k, const spmv_params *p, const void *x, void *y, int32_t warmup,
                   int32_t runs, spmv_stats *st, spmv_error *err)
{
    runner *r = ctx;
    r->packed_calls += (k->format & SPMV_FMT_PACKED) != 0;
    int rc = spmv_cpu_run(k, r->m, p, x, y, warmup, runs, st, err);
    if (rc == SPMV_OK)
        st->median_ms = k->format == SPMV_FMT_PSELL ? 0.1 : 1.0;
    return rc;
}

/* skip_formats keeps the tuner off those formats' kernels, however fast
 * they would be; without it the fastest (psell here) wins. */
static void test_tune_skips_formats(void **state)
{
    (void)state;
    spmv_matrix m;
    spmv_tune_result res;
    spmv_error err;
    random_csr(21, SPMV_FLOAT64, &m);
    runner rn = {&m, 0};
    spmv_tune_options o = {SPMV_DEVICE_CPU, 60000, 0, 2, tu_seed(), 1, SPMV_FMT_PACKED};
    assert_int_equal(spmv_tune(&m.csr, &o, run_cpu, &rn, &res, &err), SPMV_OK);
    assert_int_equal(rn.packed_calls, 0);
    assert_false(res.kernel->format & SPMV_FMT_PACKED);
    runner all = {&m, 0};
    o.skip_formats = 0;
    assert_int_equal(spmv_tune(&m.csr, &o, run_cpu, &all, &res, &err), SPMV_OK);
    assert_true(all.packed_calls >= 2);
    assert_string_equal(res.kernel->name, "cpu.psell.omp");
    spmv_matrix_free(&m);
}

/* A daemon matrix of h's CSR (taken, h freed). */
static matrix *matrix_of(spmv_matrix *h)
{
    spmv_error err;
    matrix *m = NULL;
    matfile_meta meta = {0};
    snprintf(meta.name, sizeof meta.name, "payback");
    assert_int_equal(matrix_new_from_csr(&meta, &h->csr, 0, NULL, &m, &err), SPMV_OK);
    spmv_matrix_free(h);
    return m;
}

static matrix *coo_matrix(spmv_coo *coo)
{
    spmv_matrix h;
    spmv_error err;
    assert_int_equal(spmv_matrix_build(coo, SPMV_FLOAT64, SPMV_FMT_CSR, 32, NULL, &h, &err), SPMV_OK);
    spmv_coo_free(coo);
    return matrix_of(&h);
}

/* A random matrix: not square or not symmetric, no b x b blocks. */
static matrix *new_matrix(uint64_t salt)
{
    spmv_matrix h;
    random_csr(salt, SPMV_FLOAT64, &h);
    return matrix_of(&h);
}

/* The rule: a matrix multiplied fewer times than the threshold keeps auto
 * off the packed formats it does not hold; enough products, a format
 * already built, or eager lifts it. Tuning runs are not products. */
static void test_policy_products(void **state)
{
    (void)state;
    matrix *m = new_matrix(31);
    const spmv_kernel *omp = spmv_kernel_find("cpu.csr.omp");
    double none[SPMV_FORMAT_COUNT] = {0};
    payback_policy repaid = {false, 10}, eager = {true, 10};
    unsigned fit = SPMV_FMT_PCSR | SPMV_FMT_PSELL; /* the packed formats a random matrix can hold */
    assert_int_equal(payback_deferred(&repaid, m, PAYBACK_HOST, SPMV_FMT_CSR, none), fit);
    assert_int_equal(payback_deferred(&eager, m, PAYBACK_HOST, SPMV_FMT_CSR, none), 0);
    assert_int_equal(payback_deferred(&repaid, m, PAYBACK_HOST, SPMV_FMT_CSR | SPMV_FMT_PSELL, none), SPMV_FMT_PCSR);
    payback_note_run(m, omp, 0, true, 1.0); /* a tuning run: timed, not counted */
    payback_note_run(m, omp, 9, true, 2.0);
    assert_int_equal((int)atomic_load(&m->products), 9);
    assert_true(m->best_ms[PAYBACK_HOST][spmv_format_index(SPMV_FMT_CSR)] == 1.0); /* the best, not the last */
    assert_int_equal(payback_deferred(&repaid, m, PAYBACK_HOST, SPMV_FMT_CSR, none), fit);
    payback_note_run(m, omp, 1, false, 0.01); /* not a one-column op-n timing: counted, not kept */
    assert_true(m->best_ms[PAYBACK_HOST][spmv_format_index(SPMV_FMT_CSR)] == 1.0);
    assert_int_equal(payback_deferred(&repaid, m, PAYBACK_HOST, SPMV_FMT_CSR, none), 0);
    matrix_unref(m);
}

/* Only a format the matrix can hold is deferred: SPSELL on an exactly
 * symmetric matrix, PBSR on one of complete b x b blocks (found once and
 * kept: matrix.block_size); a random matrix gets PCSR and PSELL only. */
static void test_policy_structure(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 51);
    double none[SPMV_FORMAT_COUNT] = {0};
    payback_policy repaid = {false, 10};
    unsigned base = SPMV_FMT_PCSR | SPMV_FMT_PSELL;
    spmv_coo pat, sym, blk, symblk;
    tu_random_coo(&r, TU_SHAPE_RANDOM, 300, SPMV_FLOAT64, &pat);
    tu_symmetric_coo(&r, &pat, 0, &sym);
    tu_block_coo(&r, 40, 40, 3, 4, 20, SPMV_FLOAT64, &blk);
    tu_symmetric_coo(&r, &blk, 0, &symblk); /* blk + blkᵀ: complete blocks still */
    struct { spmv_coo *coo; unsigned want; const char *what; } cases[] = {
        {&pat, base, "random"},
        {&sym, base | SPMV_FMT_SPSELL, "symmetric"},
        {&blk, base | SPMV_FMT_PBSR, "3 x 3 blocks"},
        {&symblk, SPMV_FMT_PACKED, "symmetric, 3 x 3 blocks"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        matrix *m = coo_matrix(cases[i].coo);
        unsigned got = payback_deferred(&repaid, m, PAYBACK_HOST, SPMV_FMT_CSR, none);
        if (got != cases[i].want)
            fail_msg("%s (seed %llu): deferred %#x, want %#x", cases[i].what, (unsigned long long)tu_seed(), got,
                     cases[i].want);
        int32_t b = atomic_load(&m->block_size); /* looked for once: -1 none, else PBSR's b */
        assert_true((cases[i].want & SPMV_FMT_PBSR) ? b > 0 && b % 3 == 0 : b == -1);
        /* held or repaid: not deferred, whatever the structure */
        assert_int_equal(payback_deferred(&repaid, m, PAYBACK_HOST, SPMV_FMT_CSR | cases[i].want, none), 0);
        payback_note_run(m, spmv_kernel_find("cpu.csr.omp"), 10, false, 0);
        assert_int_equal(payback_deferred(&repaid, m, PAYBACK_HOST, SPMV_FMT_CSR, none), 0);
        matrix_unref(m);
    }
}

/* Where the payback was measured on the matrix (a format built once, then
 * dropped), it is the threshold; a format measured not faster stays out. */
static void test_policy_measured(void **state)
{
    (void)state;
    matrix *m = new_matrix(41);
    double conv[SPMV_FORMAT_COUNT] = {0};
    conv[spmv_format_index(SPMV_FMT_PSELL)] = 10.0; /* payback 10 / (1 - 0.5) = 20 */
    conv[spmv_format_index(SPMV_FMT_PCSR)] = 10.0;  /* not faster */
    payback_policy repaid = {false, 5};
    payback_note_run(m, spmv_kernel_find("cpu.csr.omp"), 0, true, 1.0);
    payback_note_run(m, spmv_kernel_find("cpu.psell.omp"), 0, true, 0.5);
    payback_note_run(m, spmv_kernel_find("cpu.pcsr.omp"), 0, true, 1.5);
    payback_note_run(m, spmv_kernel_find("cpu.csr.serial"), 19, false, 0);
    /* 19 products: PSELL's 20 not reached, PCSR not faster (SPSELL and PBSR: a random matrix holds
     * neither, so neither is deferred) */
    assert_int_equal(payback_deferred(&repaid, m, PAYBACK_HOST, SPMV_FMT_CSR, conv), SPMV_FMT_PCSR | SPMV_FMT_PSELL);
    payback_note_run(m, spmv_kernel_find("cpu.csr.serial"), 1, false, 0);
    assert_int_equal(payback_deferred(&repaid, m, PAYBACK_HOST, SPMV_FMT_CSR, conv), SPMV_FMT_PCSR);
    /* the device's times are its own: none there, so the configured count rules */
    assert_int_equal(payback_deferred(&repaid, m, PAYBACK_DEVICE, SPMV_FMT_CSR, conv), 0);
    payback_forget(m); /* new values: nothing measured, the configured count again */
    assert_int_equal(payback_deferred(&repaid, m, PAYBACK_HOST, SPMV_FMT_CSR, conv), 0);
    matrix_unref(m);
}

/* The descriptor's fields of a format entry. */
static void test_payback_json(void **state)
{
    (void)state;
    double best[SPMV_FORMAT_COUNT] = {0};
    best[spmv_format_index(SPMV_FMT_CSR)] = 1.0;
    best[spmv_format_index(SPMV_FMT_PSELL)] = 0.75;
    best[spmv_format_index(SPMV_FMT_ELL)] = 1.25;
    json_t *e = json_object();
    payback_json(e, best, SPMV_FMT_PSELL, 5.0);
    assert_int_equal(json_integer_value(json_object_get(e, "payback")), 20);
    assert_true(json_is_null(json_object_get(e, "payback_reason")));
    assert_true(json_real_value(json_object_get(e, "conversion_ms")) == 5.0);
    assert_true(json_real_value(json_object_get(e, "best_ms")) == 0.75);
    payback_json(e, best, SPMV_FMT_ELL, 5.0);
    assert_true(json_is_null(json_object_get(e, "payback")));
    assert_string_equal(json_string_value(json_object_get(e, "payback_reason")), "not faster");
    payback_json(e, best, SPMV_FMT_PCSR, 5.0);
    assert_true(json_is_null(json_object_get(e, "best_ms")));
    assert_string_equal(json_string_value(json_object_get(e, "payback_reason")), "not measured");
    payback_json(e, best, SPMV_FMT_CSR, 0);
    assert_true(json_is_null(json_object_get(e, "conversion_ms")));
    assert_string_equal(json_string_value(json_object_get(e, "payback_reason")), "baseline");
    json_decref(e);
}

/* auto_build takes repaid or eager, nothing else; auto_build_products a count. */
static void test_config_keys(void **state)
{
    (void)state;
    char err[512];
    spmvd_config c;
    config_defaults(&c);
    assert_string_equal(c.auto_build, "repaid");
    assert_int_equal(c.auto_build_products, 100);
    const char *ok = "{\"auto_build\":\"eager\",\"auto_build_products\":0}";
    assert_int_equal(config_apply_json(&c, ok, strlen(ok), "test", err, sizeof err), 0);
    assert_string_equal(c.auto_build, "eager");
    const char *bad = "{\"auto_build\":\"lazy\"}";
    assert_int_not_equal(config_apply_json(&c, bad, strlen(bad), "test", err, sizeof err), 0);
    assert_non_null(strstr(err, "auto_build"));
    const char *neg = "{\"auto_build_products\":-1}";
    assert_int_not_equal(config_apply_json(&c, neg, strlen(neg), "test", err, sizeof err), 0);
    config_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_payback_arithmetic),
        cmocka_unit_test(test_host_conversion_timed),
        cmocka_unit_test(test_tune_skips_formats),
        cmocka_unit_test(test_policy_products),
        cmocka_unit_test(test_policy_structure),
        cmocka_unit_test(test_policy_measured),
        cmocka_unit_test(test_payback_json),
        cmocka_unit_test(test_config_keys),
    };
    tu_seed();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
