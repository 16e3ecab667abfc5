/* test_registry.c — the kernel catalogue (engine/registry.c) and its docs.
 *
 * The table must hold the whole catalogue (docs/kernels.md) with
 * consistent names, devices, formats and parameter masks; every kernel must
 * name an implementation of its own that its backend binds (the CPU's
 * always; the GPU's in a CUDA build); parameters must
 * resolve to their defaults and be refused (with parameter, value and range
 * in the message) when out of range or not taken; availability must follow
 * the GPU backend's answer; and docs/kernels.md must hold the catalogue
 * block generated from the table, verbatim, so the docs read the one table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "registry.h"
#include "spmv.h"
#include "testutil.h"

/* The SpMV catalogue the issues ask for; the table may only grow past it. */
static const char *const required[] = {
    "cpu.csr.serial", "cpu.csr.chunked", "cpu.csr.omp", "cpu.ell.omp", "cpu.hll.omp",
    "gpu.csr.scalar", "gpu.csr.warp_buffer", "gpu.csr.vector", "gpu.csr.tiled", "gpu.csr.texture",
    "gpu.csr.adaptive", "gpu.csr.merge", "gpu.ell", "gpu.hll", "gpu.coo.atomic", "gpu.coo.sliced",
    "gpu.hyb", "cusparse.csr", "cusparse.coo", "cusparse.sell", "gpu.coo.scoo",
};

static void test_catalogue_complete(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        const spmv_kernel *k = spmv_kernel_find(required[i]);
        if (!k)
            fail_msg("kernel %s missing from the registry", required[i]);
        assert_int_equal(k->op, SPMV_OP_SPMV);
    }
    assert_null(spmv_kernel_find("cpu.csr.nope"));
    assert_null(spmv_kernel_find(NULL));
    assert_null(spmv_kernel_at(spmv_kernel_count()));
}

static void test_table_sane(void **state)
{
    (void)state;
    for (size_t i = 0; i < spmv_kernel_count(); i++) {
        const spmv_kernel *k = spmv_kernel_at(i);
        assert_non_null(k->name);
        assert_true(k->summary && *k->summary);
        assert_ptr_equal(spmv_kernel_find(k->name), k); /* names unique */
        if (spmv_kernel_is_auto(k)) /* a choice among the others (engine/tune.c), no device or format of its own */
            continue;
        bool cpu = strncmp(k->name, "cpu.", 4) == 0;
        bool gpu = strncmp(k->name, "gpu.", 4) == 0 || strncmp(k->name, "cusparse.", 9) == 0;
        assert_true(cpu != gpu);
        assert_int_equal(k->device, cpu ? SPMV_DEVICE_CPU : SPMV_DEVICE_GPU);
        /* exactly one format bit, and the name's format where it says one */
        assert_true(k->format && !(k->format & (k->format - 1)) && (k->format & SPMV_FMT_ALL));
        const char *fmt = strchr(k->name, '.') + 1;
        assert_true(k->op == SPMV_OP_SPMV || k->op == SPMV_OP_SPMSPM);
        if (k->op == SPMV_OP_SPMSPM)
            assert_int_equal(k->format, SPMV_FMT_CSR); /* C = A*B reads CSR; its name says the op */
        else if (strncmp(k->name, "cusparse.sell", 13) == 0)
            assert_int_equal(k->format, SPMV_FMT_HLL);
        else
            assert_int_equal(strncmp(fmt, spmv_format_name(k->format), 3), 0);
        assert_int_equal(k->params & ~((1u << SPMV_PARAM_COUNT) - 1), 0);
        /* GPU kernels of our own take block_size; CPU ones never do */
        if (strncmp(k->name, "gpu.", 4) == 0)
            assert_true(k->params & (1u << SPMV_PARAM_BLOCK_SIZE));
        if (cpu)
            assert_false(k->params & (1u << SPMV_PARAM_BLOCK_SIZE));
    }
}

static void test_param_table(void **state)
{
    (void)state;
    static const struct { spmv_param_id id; const char *name; int32_t def, min, max; } want[] = {
        {SPMV_PARAM_BLOCK_SIZE, "block_size", 256, 32, 1024}, {SPMV_PARAM_HACK_SIZE, "hack_size", 0, 1, 1024},
        {SPMV_PARAM_CHUNK, "chunk", 0, 1, 65536},             {SPMV_PARAM_ALG, "alg", 1, 1, 2},
        {SPMV_PARAM_THREADS, "threads", 0, 0, 1024},          {SPMV_PARAM_NNZ_PER_WG, "nnz_per_wg", 2048, 64, 1048576},
        {SPMV_PARAM_SPAN, "span", 8, 1, INT32_MAX},           {SPMV_PARAM_SCHEDULE, "schedule", 1, 1, 2},
        {SPMV_PARAM_OUTPUT, "output", 1, 1, 2},               {SPMV_PARAM_ACCUMULATE, "accumulate", 1, 1, 2},
        {SPMV_PARAM_X_CACHE, "x_cache", 1, 1, 2},             {SPMV_PARAM_WIDTH, "width", 0, 1, INT32_MAX},
        {SPMV_PARAM_LAUNCHES, "launches", 1, 1, 2},           {SPMV_PARAM_ROW_BLOCKS, "row_blocks", 1, 1, 2},
        {SPMV_PARAM_LANES, "lanes", 4, 1, 32},                {SPMV_PARAM_PATTERNS, "patterns", 1, 1, 2},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const spmv_param_desc *d = spmv_param_get(want[i].id);
        assert_non_null(d);
        assert_string_equal(d->name, want[i].name);
        assert_int_equal(d->def, want[i].def);
        assert_int_equal(d->min, want[i].min);
        assert_int_equal(d->max, want[i].max);
        assert_true(d->doc && *d->doc);
    }
    assert_null(spmv_param_get(SPMV_PARAM_COUNT));
}

static void expect_refused(const char *kernel, spmv_param_id id, int32_t v, const char *const *needles)
{
    spmv_params p = {{0}}, r;
    spmv_error err = {0};
    p.v[id] = v;
    int st = spmv_params_resolve(spmv_kernel_find(kernel), &p, &r, &err);
    if (st != SPMV_ERR_INVALID)
        fail_msg("%s %s=%d: accepted", kernel, spmv_param_get(id)->name, v);
    for (; *needles; needles++)
        if (!strstr(err.message, *needles))
            fail_msg("%s %s=%d: message \"%s\" lacks \"%s\"", kernel, spmv_param_get(id)->name, v,
                     err.message, *needles);
}

static void test_params_resolve(void **state)
{
    (void)state;
    spmv_params p = {{0}}, r;
    spmv_error err;
    /* defaults, for the parameters the kernel takes only */
    assert_int_equal(spmv_params_resolve(spmv_kernel_find("gpu.csr.adaptive"), NULL, &r, &err), SPMV_OK);
    assert_int_equal(r.v[SPMV_PARAM_BLOCK_SIZE], 256);
    assert_int_equal(r.v[SPMV_PARAM_NNZ_PER_WG], 2048);
    assert_int_equal(r.v[SPMV_PARAM_HACK_SIZE], 0);
    assert_int_equal(spmv_params_resolve(spmv_kernel_find("cpu.csr.chunked"), &p, &r, &err), SPMV_OK);
    assert_int_equal(r.v[SPMV_PARAM_SPAN], 8); /* the study's default width */
    assert_int_equal(r.v[SPMV_PARAM_CHUNK], 0);
    assert_int_equal(spmv_params_resolve(spmv_kernel_find("cpu.hll.omp"), &p, &r, &err), SPMV_OK);
    assert_int_equal(r.v[SPMV_PARAM_SCHEDULE], 1); /* static, as the HLL study (docs/kernels.md) */
    /* the SpMSpM study's forms by default: the global atomic counter
     * (kernels 0 and 1), the shared row accumulator (kernel 3) */
    assert_int_equal(spmv_params_resolve(spmv_kernel_find("gpu.spmspm.thread_row"), &p, &r, &err), SPMV_OK);
    assert_int_equal(r.v[SPMV_PARAM_OUTPUT], 1);
    assert_int_equal(spmv_params_resolve(spmv_kernel_find("gpu.spmspm.block_row"), &p, &r, &err), SPMV_OK);
    assert_int_equal(r.v[SPMV_PARAM_OUTPUT], 1);
    assert_int_equal(spmv_params_resolve(spmv_kernel_find("gpu.spmspm.warp_nnz"), &p, &r, &err), SPMV_OK);
    assert_int_equal(r.v[SPMV_PARAM_ACCUMULATE], 1);
    assert_int_equal(r.v[SPMV_PARAM_OUTPUT], 0);
    p.v[SPMV_PARAM_HACK_SIZE] = 64;
    p.v[SPMV_PARAM_THREADS] = 3;
    assert_int_equal(spmv_params_resolve(spmv_kernel_find("cpu.hll.omp"), &p, &r, &err), SPMV_OK);
    assert_int_equal(r.v[SPMV_PARAM_HACK_SIZE], 64);
    assert_int_equal(r.v[SPMV_PARAM_THREADS], 3);
    /* the studies' forms are the defaults (docs/kernels.md, "The studies' items") */
    memset(&p, 0, sizeof p);
    assert_int_equal(spmv_params_resolve(spmv_kernel_find("gpu.csr.adaptive"), &p, &r, &err), SPMV_OK);
    assert_int_equal(r.v[SPMV_PARAM_ROW_BLOCKS], 1);
    assert_int_equal(spmv_params_resolve(spmv_kernel_find("gpu.hll"), &p, &r, &err), SPMV_OK);
    assert_int_equal(r.v[SPMV_PARAM_X_CACHE], 1); /* the texture cache */
    assert_int_equal(spmv_params_resolve(spmv_kernel_find("gpu.hyb"), &p, &r, &err), SPMV_OK);
    assert_int_equal(r.v[SPMV_PARAM_LAUNCHES], 1); /* one launch, the atomic case */
    assert_int_equal(r.v[SPMV_PARAM_WIDTH], 0);    /* the automatic width */
    assert_int_equal(spmv_params_resolve(spmv_kernel_find("gpu.coo.scoo"), &p, &r, &err), SPMV_OK);
    assert_int_equal(r.v[SPMV_PARAM_LANES], 4);
    p.v[SPMV_PARAM_WIDTH] = INT32_MAX; /* clamped to the longest row when built */
    assert_int_equal(spmv_params_resolve(spmv_kernel_find("gpu.hyb"), &p, &r, &err), SPMV_OK);
    assert_int_equal(r.v[SPMV_PARAM_WIDTH], INT32_MAX);
    /* hack_size defaults to 0, the matrix's own: kept, not range-checked */
    memset(&p, 0, sizeof p);
    assert_int_equal(spmv_params_resolve(spmv_kernel_find("gpu.hll"), &p, &r, &err), SPMV_OK);
    assert_int_equal(r.v[SPMV_PARAM_HACK_SIZE], 0);
    assert_int_equal(r.v[SPMV_PARAM_BLOCK_SIZE], 256);
    /* edges of the ranges are accepted */
    memset(&p, 0, sizeof p);
    p.v[SPMV_PARAM_BLOCK_SIZE] = 1024;
    assert_int_equal(spmv_params_resolve(spmv_kernel_find("gpu.ell"), &p, &r, &err), SPMV_OK);
    p.v[SPMV_PARAM_BLOCK_SIZE] = 32;
    assert_int_equal(spmv_params_resolve(spmv_kernel_find("gpu.ell"), &p, &r, &err), SPMV_OK);
    memset(&p, 0, sizeof p);
    p.v[SPMV_PARAM_THREADS] = 16;
    assert_int_equal(spmv_params_resolve(spmv_kernel_find("gpu.csr.vector"), &p, &r, &err), SPMV_OK);
    p.v[SPMV_PARAM_THREADS] = 2;
    assert_int_equal(spmv_params_resolve(spmv_kernel_find("gpu.csr.vector"), &p, &r, &err), SPMV_OK);
    for (int32_t t = 0; t <= 32; t = t ? 2 * t : 1) { /* gpu.psell: warps a slice, 0 or a power of two to 32 */
        p.v[SPMV_PARAM_THREADS] = t;
        assert_int_equal(spmv_params_resolve(spmv_kernel_find("gpu.psell"), &p, &r, &err), SPMV_OK);
        assert_int_equal(r.v[SPMV_PARAM_THREADS], t);
        assert_int_equal(r.v[SPMV_PARAM_PATTERNS], 1); /* the slice patterns, by default */
    }

    /* refusals name parameter, value and range */
    expect_refused("cpu.csr.serial", SPMV_PARAM_THREADS, 4, (const char *const[]){"threads", "4", NULL});
    expect_refused("cpu.csr.omp", SPMV_PARAM_BLOCK_SIZE, 256, (const char *const[]){"block_size", NULL});
    expect_refused("gpu.csr.scalar", SPMV_PARAM_BLOCK_SIZE, 2048,
                   (const char *const[]){"block_size", "2048", "32..1024", NULL});
    expect_refused("gpu.csr.scalar", SPMV_PARAM_BLOCK_SIZE, 16, (const char *const[]){"block_size", "16", NULL});
    expect_refused("gpu.csr.scalar", SPMV_PARAM_BLOCK_SIZE, 100,
                   (const char *const[]){"block_size", "100", "multiple of 32", NULL});
    expect_refused("gpu.csr.scalar", SPMV_PARAM_BLOCK_SIZE, -32, (const char *const[]){"-32", NULL});
    expect_refused("cpu.hll.omp", SPMV_PARAM_HACK_SIZE, 1025, (const char *const[]){"hack_size", "1..1024", NULL});
    expect_refused("cpu.csr.chunked", SPMV_PARAM_CHUNK, 65537, (const char *const[]){"chunk", "65537", NULL});
    expect_refused("cpu.csr.chunked", SPMV_PARAM_SPAN, -1, (const char *const[]){"span", "-1", NULL});
    expect_refused("cpu.hll.omp", SPMV_PARAM_SCHEDULE, 3, (const char *const[]){"schedule", "1..2", NULL});
    expect_refused("gpu.spmspm.thread_row", SPMV_PARAM_OUTPUT, 3, (const char *const[]){"output", "1..2", NULL});
    expect_refused("gpu.spmspm.block_row", SPMV_PARAM_OUTPUT, -1, (const char *const[]){"output", "1..2", NULL});
    expect_refused("gpu.spmspm.warp_nnz", SPMV_PARAM_ACCUMULATE, 3,
                   (const char *const[]){"accumulate", "1..2", NULL});
    expect_refused("gpu.spmspm.warp_nnz", SPMV_PARAM_OUTPUT, 2, (const char *const[]){"takes no parameter output", NULL});
    expect_refused("gpu.spmspm.warp_nnz_wide", SPMV_PARAM_ACCUMULATE, 1,
                   (const char *const[]){"takes no parameter accumulate", NULL});
    expect_refused("cpu.csr.omp", SPMV_PARAM_SPAN, 8, (const char *const[]){"takes no parameter span", NULL});
    expect_refused("cusparse.csr", SPMV_PARAM_ALG, 3, (const char *const[]){"alg", "3", "1..2", NULL});
    expect_refused("cpu.csr.omp", SPMV_PARAM_THREADS, 1025, (const char *const[]){"threads", "0..1024", NULL});
    expect_refused("gpu.csr.adaptive", SPMV_PARAM_NNZ_PER_WG, 63, (const char *const[]){"nnz_per_wg", NULL});
    expect_refused("gpu.csr.vector", SPMV_PARAM_THREADS, 3, (const char *const[]){"power of two", NULL});
    expect_refused("gpu.csr.vector", SPMV_PARAM_THREADS, 64, (const char *const[]){"threads", "64", NULL});
    expect_refused("gpu.psell", SPMV_PARAM_THREADS, 3, (const char *const[]){"power of two", "1..32", NULL});
    expect_refused("gpu.psell", SPMV_PARAM_THREADS, 64, (const char *const[]){"threads", "64", NULL});
    expect_refused("gpu.spsell", SPMV_PARAM_THREADS, 2, (const char *const[]){"takes no parameter threads", NULL});
    expect_refused("gpu.psell", SPMV_PARAM_PATTERNS, 3, (const char *const[]){"patterns", "3", "1..2", NULL});
    expect_refused("gpu.spsell", SPMV_PARAM_PATTERNS, 2, (const char *const[]){"takes no parameter patterns", NULL});
    expect_refused("cpu.psell.omp", SPMV_PARAM_PATTERNS, 1, (const char *const[]){"takes no parameter patterns", NULL});
    expect_refused("gpu.hll", SPMV_PARAM_X_CACHE, 3, (const char *const[]){"x_cache", "3", "1..2", NULL});
    expect_refused("gpu.csr.texture", SPMV_PARAM_X_CACHE, 2, (const char *const[]){"takes no parameter x_cache", NULL});
    expect_refused("gpu.hyb", SPMV_PARAM_LAUNCHES, 3, (const char *const[]){"launches", "1..2", NULL});
    expect_refused("gpu.hyb", SPMV_PARAM_WIDTH, -1, (const char *const[]){"width", "-1", NULL});
    expect_refused("gpu.ell", SPMV_PARAM_WIDTH, 4, (const char *const[]){"takes no parameter width", NULL});
    expect_refused("gpu.csr.adaptive", SPMV_PARAM_ROW_BLOCKS, 3, (const char *const[]){"row_blocks", "1..2", NULL});
    expect_refused("gpu.coo.scoo", SPMV_PARAM_LANES, 33, (const char *const[]){"lanes", "33", "1..32", NULL});
    expect_refused("gpu.coo.sliced", SPMV_PARAM_LANES, 4, (const char *const[]){"takes no parameter lanes", NULL});
    assert_int_equal(spmv_params_resolve(NULL, &p, &r, &err), SPMV_ERR_INVALID);
}

static void test_availability(void **state)
{
    (void)state;
    const char *gpu_reason = NULL;
    int ngpu = spmv_gpu_count(&gpu_reason);
    for (size_t i = 0; i < spmv_kernel_count(); i++) {
        const spmv_kernel *k = spmv_kernel_at(i);
        const char *reason = "unset";
        bool ok = spmv_kernel_available(k, &reason);
        /* auto runs wherever the matrix is held: always available */
        if (k->device == SPMV_DEVICE_CPU || ngpu > 0 || spmv_kernel_is_auto(k)) {
            assert_true(ok);
            assert_null(reason);
        } else {
            assert_false(ok);
            assert_non_null(reason);
            if (gpu_reason)
                assert_string_equal(reason, gpu_reason);
        }
    }
    const char *reason = NULL;
    assert_false(spmv_kernel_available(NULL, &reason));
    assert_non_null(reason);
    printf("# %d GPU(s)%s%s\n", ngpu, gpu_reason ? ": " : "", gpu_reason ? gpu_reason : "");
}

static char *read_docs(void)
{
    char path[4096];
    const char *root = getenv("SPMV_ROOT");
    snprintf(path, sizeof path, "%s/docs/kernels.md", root && *root ? root : ".");
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        fwrite(chunk, 1, n, mem);
    fclose(f);
    fclose(mem);
    return buf;
}

static void test_kernels_bound(void **state)
{
    (void)state;
    bool seen[SPMV_IMPL_COUNT] = {false};
    size_t gpu_bound = 0, gpu = 0;
    for (size_t i = 0; i < spmv_kernel_count(); i++) {
        const spmv_kernel *k = spmv_kernel_at(i);
        if (!(k->impl > SPMV_IMPL_NONE && k->impl < SPMV_IMPL_COUNT))
            fail_msg("%s names no implementation (impl %d)", k->name, (int)k->impl);
        if (seen[k->impl])
            fail_msg("%s shares its implementation %d with another kernel", k->name, (int)k->impl);
        seen[k->impl] = true;
        if (spmv_kernel_is_auto(k)) {
            assert_false(spmv_cpu_kernel_bound(k)); /* auto is the daemon's choice, run by no backend itself */
            continue;
        }
        if (k->device == SPMV_DEVICE_CPU) {
            if (!spmv_cpu_kernel_bound(k))
                fail_msg("CPU kernel %s is not bound in engine/cpu", k->name);
            assert_false(spmv_gpu_kernel_bound(k));
            continue;
        }
        gpu++;
        gpu_bound += spmv_gpu_kernel_bound(k);
        assert_false(spmv_cpu_kernel_bound(k));
    }
#ifdef SPMV_HAVE_CUDA
    if (gpu_bound != gpu) /* a CUDA build binds every GPU kernel of the catalogue */
        for (size_t i = 0; i < spmv_kernel_count(); i++) {
            const spmv_kernel *k = spmv_kernel_at(i);
            if (k->device == SPMV_DEVICE_GPU && !spmv_kernel_is_auto(k) && !spmv_gpu_kernel_bound(k))
                fail_msg("GPU kernel %s is not bound in engine/gpu", k->name);
        }
#else
    assert_int_equal(gpu_bound, 0); /* no GPU backend: none bound */
#endif
    printf("# %zu GPU kernels, %zu bound in this build\n", gpu, gpu_bound);
}

static void test_docs_hold_the_table(void **state)
{
    (void)state;
    char *doc = read_docs(), *block = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&block, &len);
    spmv_registry_markdown(mem);
    fclose(mem);
    bool held = strstr(doc, block) != NULL;
    free(block);
    if (!held) {
        free(doc);
        fail_msg("docs/kernels.md does not hold the catalogue of engine/registry.c: run make kernels-doc");
    }
    for (size_t i = 0; i < spmv_kernel_count(); i++) {
        char needle[80];
        snprintf(needle, sizeof needle, "`%s`", spmv_kernel_at(i)->name);
        assert_non_null(strstr(doc, needle));
    }
    for (int id = 0; id < SPMV_PARAM_COUNT; id++) {
        char needle[80];
        snprintf(needle, sizeof needle, "`%s`", spmv_param_get((spmv_param_id)id)->name);
        assert_non_null(strstr(doc, needle));
    }
    free(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_catalogue_complete), cmocka_unit_test(test_table_sane),
        cmocka_unit_test(test_param_table),        cmocka_unit_test(test_params_resolve),
        cmocka_unit_test(test_availability),       cmocka_unit_test(test_docs_hold_the_table),
        cmocka_unit_test(test_kernels_bound),
    };
    return cmocka_run_group_tests_name("registry", tests, NULL, NULL);
}
