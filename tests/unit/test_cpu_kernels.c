/* test_cpu_kernels.c — every CPU kernel against the reference, plus the
 * timing statistics and byte counts (engine/cpu/, engine/stats.c).
 *
 * For every CPU kernel of the registry, in both dtypes, at the edges of its
 * parameters (span 1..INT32_MAX and the count form chunk 1..65536, threads
 * 1..16 and auto, hack sizes 1, 7, 32, 64, 1024 and the matrix's own, both
 * cpu.hll.omp schedules), on random matrices (rectangular ones included) of every test shape
 * drawn afresh each run (seed printed): y is poisoned with NaN, the kernel
 * runs through spmv_cpu_run, and y must match cpu.csr.serial (float64:
 * 1e-12 of ||y||_inf; float32: 1e-5 of ||y||_2, both against the float32
 * reference and against the float64 one). Rounding errors scale with
 * |A|·|x|, not with y: a random 1 x n row can sum to nearly 0 by
 * cancellation, so the yardstick is the larger of ||y|| and || |A|·|x| ||
 * (same norm). The reference itself is checked against a plain COO loop.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cpu/kernels.h"
#include "spmv.h"
#include "testutil.h"

#define F64_BOUND 1e-12
#define F32_BOUND 1e-5

/* Parameter edges per CPU kernel; every CPU kernel of the registry must
 * appear here (test_every_cpu_kernel_covered). A value 0 is the default. */
typedef struct edge_set {
    const char *kernel;
    spmv_param_id param; /* SPMV_PARAM_COUNT: none */
    int32_t values[8];
    int nvalues;
} edge_set;

static const edge_set edges[] = {
    {"cpu.csr.serial", SPMV_PARAM_COUNT, {0}, 1},
    {"cpu.csr.chunked", SPMV_PARAM_SPAN, {0, 1, 2, 7, 300, INT32_MAX}, 6},
    {"cpu.csr.omp", SPMV_PARAM_THREADS, {0, 1, 2, 3, 16}, 5},
    {"cpu.ell.omp", SPMV_PARAM_THREADS, {0, 1, 3}, 3},
    {"cpu.hll.omp", SPMV_PARAM_HACK_SIZE, {0, 1, 7, 32, 64, 1024}, 6},
    {"cpu.pcsr.omp", SPMV_PARAM_THREADS, {0, 1, 2, 3, 16}, 5},
    {"cpu.psell.omp", SPMV_PARAM_THREADS, {0, 1, 3}, 3},
    {"cpu.spsell.omp", SPMV_PARAM_THREADS, {0, 1, 3}, 3}, /* on symmetric matrices: test_spsell_omp */
};

/* More edges of kernels with a second parameter, run after the first. */
static const edge_set more_edges[] = {
    {"cpu.csr.chunked", SPMV_PARAM_CHUNK, {1, 2, 7, 300, 65536}, 5},
    {"cpu.hll.omp", SPMV_PARAM_SCHEDULE, {1, 2}, 2},
    {"cpu.hll.omp", SPMV_PARAM_THREADS, {1, 2, 3, 16}, 4},
};

static const int32_t sizes[] = {1, 33, 200};

/* One matrix in both dtypes with its references. */
typedef struct fixture {
    spmv_coo coo;
    spmv_matrix m64, m32;
    double *x64, *ref64;
    float *x32, *ref32;
    double scale_inf, scale_2;  /* max(||y||, || |A||x| ||) */
    char what[96];
} fixture;

static void fixture_scales(fixture *f)
{
    double *abs = tu_vector_alloc(SPMV_FLOAT64, f->coo.rows);
    tu_abs_product(&f->coo, SPMV_FLOAT64, f->x64, abs);
    f->scale_inf = fmax(tu_vector_norm(SPMV_FLOAT64, f->ref64, f->coo.rows, TU_NORM_INF),
                        tu_vector_norm(SPMV_FLOAT64, abs, f->coo.rows, TU_NORM_INF));
    f->scale_2 = fmax(tu_vector_norm(SPMV_FLOAT64, f->ref64, f->coo.rows, TU_NORM_2),
                      tu_vector_norm(SPMV_FLOAT64, abs, f->coo.rows, TU_NORM_2));
    free(abs);
}

/* Builds the matrices, x and the references around f->coo. */
static void fixture_build(fixture *f, tu_rng *r)
{
    spmv_error err;
    /* Float64 holds every format (HLL of 32, PCSR, PSELL); float32 only
     * CSR, so its kernels build theirs in scratch: both paths of
     * spmv_cpu_run. */
    assert_int_equal(spmv_matrix_build(&f->coo, SPMV_FLOAT64, SPMV_FMT_ALL, 32, 0, &f->m64, &err), SPMV_OK);
    assert_int_equal(spmv_matrix_build(&f->coo, SPMV_FLOAT32, SPMV_FMT_CSR, 32, 0, &f->m32, &err), SPMV_OK);
    f->x64 = tu_vector_alloc(SPMV_FLOAT64, f->coo.cols);
    f->x32 = tu_vector_alloc(SPMV_FLOAT32, f->coo.cols);
    f->ref64 = tu_vector_alloc(SPMV_FLOAT64, f->coo.rows);
    f->ref32 = tu_vector_alloc(SPMV_FLOAT32, f->coo.rows);
    tu_random_vector(r, SPMV_FLOAT64, f->coo.cols, f->x64);
    tu_vector_convert(f->x64, SPMV_FLOAT64, f->x32, SPMV_FLOAT32, f->coo.cols);
    tu_poison(f->ref64, SPMV_FLOAT64, f->coo.rows);
    tu_poison(f->ref32, SPMV_FLOAT32, f->coo.rows);
    spmv_reference(&f->m64.csr, f->x64, f->ref64);
    spmv_reference(&f->m32.csr, f->x32, f->ref32);
    fixture_scales(f);
}

static void fixture_make(fixture *f, tu_rng *r, tu_shape shape, int32_t n)
{
    memset(f, 0, sizeof *f);
    tu_random_coo(r, shape, n, SPMV_FLOAT64, &f->coo);
    snprintf(f->what, sizeof f->what, "%s n=%d (%d x %d, nnz %lld)", tu_shape_name(shape), n, f->coo.rows,
             f->coo.cols, (long long)f->coo.nnz);
    fixture_build(f, r);
}

static void fixture_free(fixture *f)
{
    spmv_coo_free(&f->coo);
    spmv_matrix_free(&f->m64);
    spmv_matrix_free(&f->m32);
    free(f->x64);
    free(f->x32);
    free(f->ref64);
    free(f->ref32);
}

static void run_and_check(const spmv_kernel *k, const fixture *f, const spmv_params *p, spmv_dtype dt,
                          const char *label)
{
    const spmv_matrix *m = dt == SPMV_FLOAT64 ? &f->m64 : &f->m32;
    void *y = tu_vector_alloc(dt, m->rows);
    spmv_stats st;
    spmv_error err;
    char what[256];
    snprintf(what, sizeof what, "%s %s %s on %s", k->name, label, spmv_dtype_name(dt), f->what);
    tu_poison(y, dt, m->rows);
    int rc = spmv_cpu_run(k, m, p, dt == SPMV_FLOAT64 ? (void *)f->x64 : (void *)f->x32, y, 0, 1, &st, &err);
    if (rc != SPMV_OK)
        fail_msg("%s: %s", what, err.message);
    assert_int_equal(st.runs, 1);
    if (dt == SPMV_FLOAT64) {
        TU_ASSERT_CLOSE_SCALED(what, SPMV_FLOAT64, y, SPMV_FLOAT64, f->ref64, m->rows, f->scale_inf, F64_BOUND);
    } else {
        TU_ASSERT_CLOSE_SCALED(what, SPMV_FLOAT32, y, SPMV_FLOAT32, f->ref32, m->rows, f->scale_2, F32_BOUND);
        TU_ASSERT_CLOSE_SCALED(what, SPMV_FLOAT32, y, SPMV_FLOAT64, f->ref64, m->rows, f->scale_2, F32_BOUND);
    }
    free(y);
}

static void check_edges(const spmv_kernel *k, const edge_set *e, tu_rng *r)
{
    for (int s = 0; s < TU_SHAPE_COUNT; s++)
        for (size_t n = 0; n < sizeof sizes / sizeof sizes[0]; n++) {
            fixture f;
            fixture_make(&f, r, (tu_shape)s, sizes[n]);
            for (int v = 0; v < e->nvalues; v++) {
                spmv_params p = {{0}};
                char label[64] = "defaults";
                if (e->param != SPMV_PARAM_COUNT && e->values[v] != 0) {
                    p.v[e->param] = e->values[v];
                    snprintf(label, sizeof label, "%s=%d", spmv_param_get(e->param)->name, e->values[v]);
                }
                run_and_check(k, &f, &p, SPMV_FLOAT64, label);
                run_and_check(k, &f, &p, SPMV_FLOAT32, label);
            }
            fixture_free(&f);
        }
}

static void check_kernel(const char *name, uint64_t salt)
{
    const spmv_kernel *k = spmv_kernel_find(name);
    const edge_set *e = NULL;
    assert_non_null(k);
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        if (strcmp(edges[i].kernel, name) == 0)
            e = &edges[i];
    assert_non_null(e);
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ salt);
    check_edges(k, e, &r);
    for (size_t i = 0; i < sizeof more_edges / sizeof more_edges[0]; i++)
        if (strcmp(more_edges[i].kernel, name) == 0)
            check_edges(k, &more_edges[i], &r);
}

/* cpu.csr.chunked on wide and tall rectangular random matrices, at span 1
 * (a pass per column), spans around the width and past it (one pass), and
 * the count form; the work it reports counts the passes. */
static void test_csr_chunked_rectangular(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 31);
    const spmv_kernel *k = spmv_kernel_find("cpu.csr.chunked");
    for (int t = 0; t < 4; t++) {
        int32_t rows = (int32_t)tu_rng_range(&r, 1, t % 2 ? 3000 : 60);
        int32_t cols = (int32_t)tu_rng_range(&r, 1, t % 2 ? 60 : 3000);
        tu_gen g = {.rows = rows, .cols = cols, .mean_per_row = (double)tu_rng_range(&r, 1, 12)};
        fixture f;
        memset(&f, 0, sizeof f);
        tu_random_coo_gen(&r, &g, SPMV_FLOAT64, &f.coo);
        snprintf(f.what, sizeof f.what, "random %d x %d (nnz %lld)", rows, cols, (long long)f.coo.nnz);
        fixture_build(&f, &r);
        const int32_t spans[] = {1, 3, 8, cols - 1 > 0 ? cols - 1 : 1, cols, cols + 1, INT32_MAX};
        for (size_t i = 0; i < sizeof spans / sizeof spans[0]; i++) {
            spmv_params p = {{0}};
            char label[64];
            p.v[SPMV_PARAM_SPAN] = spans[i];
            snprintf(label, sizeof label, "span=%d", spans[i]);
            run_and_check(k, &f, &p, SPMV_FLOAT64, label);
            run_and_check(k, &f, &p, SPMV_FLOAT32, label);
            int64_t passes = ((int64_t)cols + spans[i] - 1) / spans[i], base = f.coo.nnz > rows ? f.coo.nnz : rows;
            assert_int_equal(spmv_kernel_work(k, &p, rows, cols, f.coo.nnz), (base ? base : 1) + (passes - 1) * rows);
        }
        spmv_params p = {{0}};
        p.v[SPMV_PARAM_CHUNK] = (int32_t)tu_rng_range(&r, 1, 70);
        run_and_check(k, &f, &p, SPMV_FLOAT64, "chunk");
        fixture_free(&f);
    }
}

/* Span and chunk together are refused; a span of 8 on a wide matrix is
 * counted as its passes and judged pathological for sweeps; other kernels
 * cost max(nnz, rows). */
static void test_chunked_work(void **state)
{
    (void)state;
    const spmv_kernel *k = spmv_kernel_find("cpu.csr.chunked"), *omp = spmv_kernel_find("cpu.csr.omp");
    spmv_params p = {{0}}, res;
    spmv_error err = {0};
    p.v[SPMV_PARAM_SPAN] = 4;
    p.v[SPMV_PARAM_CHUNK] = 4;
    assert_int_equal(spmv_params_resolve(k, &p, &res, &err), SPMV_ERR_INVALID);
    assert_non_null(strstr(err.message, "span"));
    assert_non_null(strstr(err.message, "not both"));
    p.v[SPMV_PARAM_SPAN] = 0;
    assert_int_equal(spmv_params_resolve(k, &p, &res, &err), SPMV_OK);
    assert_int_equal(res.v[SPMV_PARAM_SPAN], 0);
    assert_int_equal(spmv_chunked_width(&res, 1000), 250);
    assert_int_equal(spmv_params_resolve(k, NULL, &res, &err), SPMV_OK);
    assert_int_equal(res.v[SPMV_PARAM_SPAN], 8);
    /* 1M columns at span 8: 125000 passes over 1M rows */
    int64_t w = spmv_kernel_work(k, NULL, 1000000, 1000000, 5000000);
    assert_int_equal(w, 5000000 + INT64_C(124999) * 1000000);
    assert_true(spmv_kernel_work_excessive(w, 1000000, 5000000));
    assert_int_equal(spmv_kernel_work(omp, NULL, 1000000, 1000000, 5000000), 5000000);
    assert_false(spmv_kernel_work_excessive(5000000, 1000000, 5000000));
    /* the study's 30000 x 20000 random matrix (6 M entries): 2500 passes, kept */
    assert_false(spmv_kernel_work_excessive(spmv_kernel_work(k, NULL, 30000, 20000, 6000000), 30000, 6000000));
    /* small matrices never are, whatever the ratio */
    assert_false(spmv_kernel_work_excessive(spmv_kernel_work(k, NULL, 1200, 1200, 4726), 1200, 4726));
    p.v[SPMV_PARAM_CHUNK] = 0;
    p.v[SPMV_PARAM_SPAN] = INT32_MAX;
    assert_int_equal(spmv_kernel_work(k, &p, 1000000, 1000000, 5000000), 5000000);
}

static void test_csr_serial(void **state) { (void)state; check_kernel("cpu.csr.serial", 11); }
static void test_csr_chunked(void **state) { (void)state; check_kernel("cpu.csr.chunked", 12); }
static void test_csr_omp(void **state) { (void)state; check_kernel("cpu.csr.omp", 13); }
static void test_ell_omp(void **state) { (void)state; check_kernel("cpu.ell.omp", 14); }
static void test_hll_omp(void **state) { (void)state; check_kernel("cpu.hll.omp", 15); }
static void test_pcsr_omp(void **state) { (void)state; check_kernel("cpu.pcsr.omp", 23); }
static void test_psell_omp(void **state) { (void)state; check_kernel("cpu.psell.omp", 24); }

static void run_exact(const spmv_kernel *k, const fixture *f, spmv_dtype dt);

/* A symmetric fixture: the pattern of `pat` made symmetric, values drawn
 * (distinct 0: every pair its own) or kept (keep: pat is symmetric). */
static void fixture_symmetric(fixture *f, tu_rng *r, const spmv_coo *pat, int32_t distinct, bool keep,
                              const char *what)
{
    memset(f, 0, sizeof *f);
    if (keep)
        assert_int_equal(spmv_coo_copy(pat, &f->coo, NULL), SPMV_OK);
    else
        tu_symmetric_coo(r, pat, distinct, &f->coo);
    snprintf(f->what, sizeof f->what, "symmetric %s (%d x %d, nnz %lld)", what, f->coo.rows, f->coo.cols,
             (long long)f->coo.nnz);
    fixture_build(f, r);
    if (!(f->m64.formats & SPMV_FMT_SPSELL))
        fail_msg("%s: no SPSELL built (SPMV_SEED=%llu)", f->what, (unsigned long long)tu_seed());
}

/* A generated matrix (engine/gen.c) as COO. */
static void gen_coo(spmv_gen_kind kind, int64_t n, spmv_coo *out)
{
    spmv_gen_spec g = {kind, n, 0, 0, 1};
    spmv_gen_defaults(&g, false, false, false);
    assert_int_equal(spmv_gen(&g, out, NULL), SPMV_OK);
}

/* cpu.spsell.omp at its thread edges on symmetric matrices: every test
 * shape made symmetric, and stencils with mirrored slices (the generator's
 * constant values: uniform slices; random values, every pair distinct: a
 * finite-volume matrix of log-normal-like coefficients; a palette: U8). On
 * the stencils y must be cpu.csr.serial's bit for bit (same values, same
 * order), and SPSELL must mirror slices and hold fewer bytes than PSELL. */
static void test_spsell_omp(void **state)
{
    (void)state;
    const spmv_kernel *k = spmv_kernel_find("cpu.spsell.omp");
    static const struct {
        spmv_gen_kind kind;
        int64_t n;
        int32_t distinct; /* -1: the generator's values */
    } stencils[] = {{SPMV_GEN_POISSON2D, 70, -1}, {SPMV_GEN_POISSON3D, 50, -1}, {SPMV_GEN_POISSON3D, 50, 0},
                    {SPMV_GEN_POISSON3D, 37, 100}, {SPMV_GEN_POISSON2D, 90, 0},  {SPMV_GEN_STENCIL27, 45, 0}};
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 26);
    assert_non_null(k);
    for (int s = 0; s < TU_SHAPE_COUNT; s++)
        for (size_t n = 0; n < sizeof sizes / sizeof sizes[0]; n++) {
            fixture f;
            spmv_coo pat;
            tu_random_coo(&r, (tu_shape)s, sizes[n], SPMV_FLOAT64, &pat);
            fixture_symmetric(&f, &r, &pat, s % 2 ? 50 : 0, false, tu_shape_name((tu_shape)s));
            for (int v = 0; v < 3; v++) {
                spmv_params p = {{0}};
                p.v[SPMV_PARAM_THREADS] = (int32_t[]){0, 1, 3}[v]; /* edges[]'s row */
                run_and_check(k, &f, &p, SPMV_FLOAT64, "threads");
                run_and_check(k, &f, &p, SPMV_FLOAT32, "threads");
            }
            spmv_coo_free(&pat);
            fixture_free(&f);
        }
    for (size_t c = 0; c < sizeof stencils / sizeof stencils[0]; c++) {
        fixture f;
        spmv_coo pat;
        char what[64];
        gen_coo(stencils[c].kind, stencils[c].n, &pat);
        snprintf(what, sizeof what, "%s n=%lld values %d", spmv_gen_kind_name(stencils[c].kind),
                 (long long)stencils[c].n, stencils[c].distinct);
        fixture_symmetric(&f, &r, &pat, stencils[c].distinct, stencils[c].distinct < 0, what);
        run_exact(k, &f, SPMV_FLOAT64);
        run_exact(k, &f, SPMV_FLOAT32);
        /* GB/s's bytes: SPSELL's own and x and y, held (m64) or planned (m32) */
        int64_t xy = ((int64_t)f.m64.rows + f.m64.cols) * 8;
        assert_int_equal(spmv_kernel_bytes(k, &f.m64), (int64_t)spmv_spsell_info(&f.m64.spsell).bytes + xy);
        spmv_spsell s32;
        assert_int_equal(spmv_csr_to_spsell(&f.m32.csr, NULL, &s32, NULL), SPMV_OK);
        assert_int_equal(spmv_kernel_bytes(k, &f.m32), (int64_t)spmv_spsell_info(&s32).bytes + xy / 2);
        spmv_spsell_free(&s32);
        /* distinct values: fewer bytes (uniform slices store a value a slot either way) */
        if (f.m64.spsell.nmirrored == 0 ||
            (stencils[c].distinct >= 0 &&
             spmv_spsell_info(&f.m64.spsell).bytes >= spmv_psell_info(&f.m64.psell).bytes))
            fail_msg("%s: %d of %d slices mirrored, %zu bytes against PSELL's %zu", f.what, f.m64.spsell.nmirrored,
                     f.m64.spsell.p.nslices, spmv_spsell_info(&f.m64.spsell).bytes,
                     spmv_psell_info(&f.m64.psell).bytes);
        printf("# %s: %d of %d slices mirrored, %zu bytes (PSELL %zu)\n", f.what, f.m64.spsell.nmirrored,
               f.m64.spsell.p.nslices, spmv_spsell_info(&f.m64.spsell).bytes, spmv_psell_info(&f.m64.psell).bytes);
        spmv_coo_free(&pat);
        fixture_free(&f);
    }
}

/* On a matrix that is not square and exactly symmetric, cpu.spsell.omp
 * answers why, and a matrix build with every format skips SPSELL. */
static void test_spsell_refusal(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 27);
    for (int c = 0; c < 2; c++) {
        spmv_coo pat, coo;
        spmv_matrix m;
        spmv_stats st;
        spmv_error err;
        tu_random_coo(&r, TU_SHAPE_EMPTY_ROWS, 100, SPMV_FLOAT64, &pat);
        tu_symmetric_coo(&r, &pat, 0, &coo);
        if (c == 0) { /* one value of a pair off by an ulp */
            int64_t k = 0;
            while (coo.row[k] == coo.col[k])
                k++;
            ((double *)coo.val)[k] = nextafter(((double *)coo.val)[k], 2.0);
        } else {
            coo.cols += 1; /* square no more */
        }
        assert_int_equal(spmv_matrix_build(&coo, SPMV_FLOAT64, SPMV_FMT_ALL, 32, NULL, &m, &err), SPMV_OK);
        assert_true((m.formats & SPMV_FMT_PSELL) && !(m.formats & SPMV_FMT_SPSELL));
        double *x = tu_vector_alloc(SPMV_FLOAT64, m.cols), *y = tu_vector_alloc(SPMV_FLOAT64, m.rows);
        tu_random_vector(&r, SPMV_FLOAT64, m.cols, x);
        assert_int_equal(spmv_cpu_run(spmv_kernel_find("cpu.spsell.omp"), &m, NULL, x, y, 0, 1, &st, &err),
                         SPMV_ERR_UNAVAILABLE);
        assert_non_null(strstr(err.message, c == 0 ? "exactly symmetric" : "square"));
        spmv_spsell sp;
        assert_int_equal(spmv_csr_to_spsell(&m.csr, NULL, &sp, &err), SPMV_ERR_UNAVAILABLE);
        assert_null(sp.mirror);
        int64_t slots, bytes;
        assert_int_equal(spmv_format_plan(&m.csr, SPMV_FMT_SPSELL, 32, &slots, &bytes, &err), SPMV_ERR_UNAVAILABLE);
        free(x);
        free(y);
        spmv_matrix_free(&m);
        spmv_coo_free(&pat);
        spmv_coo_free(&coo);
    }
}

/* The packed kernels on matrices made to reach every value mode (CONST, U8,
 * U16, RAW, and 0.0 / -0.0 / NaN values), every index width (PCSR 1, 2, 4
 * and wide rows; PSELL slices of 1, 2 and 4 bytes in one matrix), empty
 * rows and a padded last slice: each row is summed as cpu.csr.serial sums
 * it, so y must equal the reference bit for bit (NaN rows included), in
 * both dtypes, held (float64) and built in scratch (float32). x[0] is Inf
 * and column 0 unused: a 4-byte PSELL slice's padding must not read it. */
static void stack_rows(spmv_coo *top, const spmv_coo *bottom)
{
    spmv_coo m;
    int32_t cols = top->cols > bottom->cols ? top->cols : bottom->cols;
    assert_int_equal(spmv_coo_alloc(&m, top->rows + bottom->rows, cols, top->nnz + bottom->nnz, top->dtype, NULL),
                     SPMV_OK);
    size_t vs = spmv_dtype_size(top->dtype);
    for (int64_t k = 0; k < top->nnz; k++) {
        m.row[k] = top->row[k];
        m.col[k] = top->col[k];
    }
    for (int64_t k = 0; k < bottom->nnz; k++) {
        m.row[top->nnz + k] = bottom->row[k] + top->rows;
        m.col[top->nnz + k] = bottom->col[k];
    }
    memcpy(m.val, top->val, (size_t)top->nnz * vs);
    memcpy((char *)m.val + (size_t)top->nnz * vs, bottom->val, (size_t)bottom->nnz * vs);
    spmv_coo_free(top);
    *top = m;
}

/* Moves every row's columns to start at column 1 (spans kept), so rows of
 * a slice share their columns' range and column 0 is never used. */
static void rows_from_one(spmv_coo *m)
{
    int64_t first = 0;
    for (int64_t k = 0; k < m->nnz; k++) {
        if (k == 0 || m->row[k] != m->row[k - 1])
            first = m->col[k];
        m->col[k] = (int32_t)(m->col[k] - first + 1);
    }
    m->cols += 1;
}

static void run_exact(const spmv_kernel *k, const fixture *f, spmv_dtype dt)
{
    const spmv_matrix *m = dt == SPMV_FLOAT64 ? &f->m64 : &f->m32;
    size_t bytes = (size_t)m->rows * spmv_dtype_size(dt);
    void *y = tu_vector_alloc(dt, m->rows);
    spmv_stats st;
    spmv_error err;
    tu_poison(y, dt, m->rows);
    if (spmv_cpu_run(k, m, NULL, dt == SPMV_FLOAT64 ? (void *)f->x64 : (void *)f->x32, y, 0, 1, &st, &err))
        fail_msg("%s %s on %s: %s", k->name, spmv_dtype_name(dt), f->what, err.message);
    if (memcmp(y, dt == SPMV_FLOAT64 ? (void *)f->ref64 : (void *)f->ref32, bytes) != 0)
        fail_msg("%s %s on %s: y differs from cpu.csr.serial's bits (SPMV_SEED=%llu)", k->name, spmv_dtype_name(dt),
                 f->what, (unsigned long long)tu_seed());
    free(y);
}

static void test_packed_kernels_exact(void **state)
{
    (void)state;
    static const struct {
        const char *what;
        int32_t rows, cols, per_row, span, palette; /* palette 0: every value distinct; -1: 0.0, -0.0, NaNs;
                                                       -2: distinct, rounded to float32 (F32 in float64) */
    } cases[] = {
        {"const", 300, 400, 6, 100, 1},        {"u8", 300, 400, 6, 100, 200},
        {"u16", 3000, 400, 30, 300, 3000},     {"raw", 300, 400, 6, 100, 0},
        {"zeros and NaN", 200, 300, 5, 50, -1}, {"2-byte columns", 200, 70000, 4, 60000, 7},
        {"4-byte columns", 100, 200000, 3, 150000, 0}, {"long rows", 64, 1 << 20, 40, 1000, 0},
        {"f32 (mixed)", 300, 400, 6, 100, -2},
    };
    const spmv_kernel *kernels[2] = {spmv_kernel_find("cpu.pcsr.omp"), spmv_kernel_find("cpu.psell.omp")};
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 25);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0] + 1; c++) {
        fixture f;
        memset(&f, 0, sizeof f);
        if (c < sizeof cases / sizeof cases[0]) {
            tu_window_coo(&r, cases[c].rows, cases[c].cols, cases[c].per_row, cases[c].span, SPMV_FLOAT64, &f.coo);
            rows_from_one(&f.coo);
            if (cases[c].palette > 0)
                tu_palette_values(&r, &f.coo, cases[c].palette);
            for (int64_t k = 0; cases[c].palette == -2 && k < f.coo.nnz; k++)
                ((double *)f.coo.val)[k] = (double)(float)((double *)f.coo.val)[k];
            for (int64_t k = 0; cases[c].palette == -1 && k < f.coo.nnz; k++) {
                static const double special[4] = {0.0, -0.0, NAN, 1.5};
                ((double *)f.coo.val)[k] = special[k % 4];
            }
            snprintf(f.what, sizeof f.what, "%s (%d x %d, nnz %lld)", cases[c].what, f.coo.rows, f.coo.cols,
                     (long long)f.coo.nnz);
        } else {
            /* PSELL slices of 0 (two diagonal ones of 19 slots), 1, 2 and
             * 4 bytes in one matrix (rows of a slice spanning 200, 30 000,
             * 300 000), PCSR rows narrow and wide, an empty slice, a
             * padded last slice of 21 rows */
            static const int32_t part_rows[5] = {64, 128, 64, 40, 45}, part_span[5] = {-1, 200, 30000, 0, 299998};
            for (int j = 0; j < 5; j++) {
                spmv_coo part;
                if (part_span[j] < 0) {
                    tu_diagonal_coo(&r, part_rows[j], 19, 400, SPMV_FLOAT64, &part);
                } else if (part_span[j] > 0) {
                    tu_window_coo(&r, part_rows[j], 300000, 5, part_span[j], SPMV_FLOAT64, &part);
                    rows_from_one(&part);
                } else {
                    assert_int_equal(spmv_coo_alloc(&part, part_rows[j], 300001, 0, SPMV_FLOAT64, NULL), SPMV_OK);
                }
                if (j == 0)
                    f.coo = part;
                else
                    stack_rows(&f.coo, &part);
                if (j > 0)
                    spmv_coo_free(&part);
            }
            tu_palette_values(&r, &f.coo, 100);
            /* the diagonal part's first slice uniform: a row's k-th value k + 1/4 */
            for (int64_t k = 0, at = 0; k < f.coo.nnz && f.coo.row[k] < 32; k++, at++) {
                if (k > 0 && f.coo.row[k] != f.coo.row[k - 1])
                    at = 0;
                ((double *)f.coo.val)[k] = (double)at + 0.25;
            }
            snprintf(f.what, sizeof f.what, "mixed slices (%d x %d, nnz %lld)", f.coo.rows, f.coo.cols,
                     (long long)f.coo.nnz);
        }
        fixture_build(&f, &r);
        f.x64[0] = INFINITY;
        f.x32[0] = INFINITY;
        spmv_reference(&f.m64.csr, f.x64, f.ref64);
        spmv_reference(&f.m32.csr, f.x32, f.ref32);
        for (int i = 0; i < 2; i++) {
            run_exact(kernels[i], &f, SPMV_FLOAT64);
            run_exact(kernels[i], &f, SPMV_FLOAT32);
        }
        if (c == sizeof cases / sizeof cases[0]) { /* it reached what it was made for */
            bool seen[5] = {false};
            int32_t uniform = 0;
            for (int32_t s = 0; s < f.m64.psell.nslices; s++) {
                seen[f.m64.psell.idx_bytes[s]] = true;
                int64_t w = f.m64.psell.slot_off[s + 1] - f.m64.psell.slot_off[s];
                uniform += w > 0 && f.m64.psell.val_off[s + 1] - f.m64.psell.val_off[s] == w;
            }
            assert_true(seen[0] && seen[1] && seen[2] && seen[4]);
            assert_true(uniform >= 1 && f.m64.psell.v.mode == SPMV_VCODE_U8); /* the first slice, at least */
            assert_true(f.m64.pcsr.idx_bytes < 4 && f.m64.pcsr.wide_nnz > 0);
        }
        fixture_free(&f);
    }
}

static void test_every_cpu_kernel_covered(void **state)
{
    (void)state;
    for (size_t i = 0; i < spmv_kernel_count(); i++) {
        const spmv_kernel *k = spmv_kernel_at(i);
        bool found = false;
        if (k->device != SPMV_DEVICE_CPU || k->op != SPMV_OP_SPMV)
            continue;
        for (size_t j = 0; j < sizeof edges / sizeof edges[0]; j++)
            found |= strcmp(edges[j].kernel, k->name) == 0;
        found |= strcmp(k->name, "cpu.pbsr.omp") == 0; /* blocked matrices only: test_pbsr_omp */
        if (!found)
            fail_msg("CPU kernel %s has no test here", k->name);
    }
}

/* The reference against a plain COO loop done here. */
static void test_reference_dense(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 16);
    for (int s = 0; s < TU_SHAPE_COUNT; s++) {
        fixture f;
        fixture_make(&f, &r, (tu_shape)s, 60);
        double *dense = tu_vector_alloc(SPMV_FLOAT64, f.coo.rows);
        for (int32_t i = 0; i < f.coo.rows; i++)
            dense[i] = 0;
        for (int64_t k = 0; k < f.coo.nnz; k++)
            dense[f.coo.row[k]] += ((double *)f.coo.val)[k] * f.x64[f.coo.col[k]];
        TU_ASSERT_CLOSE_SCALED(f.what, SPMV_FLOAT64, f.ref64, SPMV_FLOAT64, dense, f.coo.rows, f.scale_inf, F64_BOUND);
        free(dense);
        fixture_free(&f);
    }
}

/* A larger matrix with more parts than a short test reaches. */
static void test_omp_partition_large(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 17);
    fixture f;
    fixture_make(&f, &r, TU_SHAPE_POWER_LAW, 20000);
    const spmv_kernel *k = spmv_kernel_find("cpu.csr.omp");
    static const int32_t threads[] = {1, 2, 5, 64};
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        spmv_params p = {{0}};
        p.v[SPMV_PARAM_THREADS] = threads[t];
        run_and_check(k, &f, &p, SPMV_FLOAT64, "large");
        run_and_check(k, &f, &p, SPMV_FLOAT32, "large");
    }
    fixture_free(&f);
}

/* cpu.pbsr.omp on random matrices of complete b x b blocks for each b
 * (value modes raw, u8, const and, in float64, f32; 1- and 2-byte block
 * columns and wide block rows; empty block rows), held (float64) and built
 * in scratch (float32), at 1, 3 and the default threads: each row is
 * summed in the CSR's order, so y must equal cpu.csr.serial's bit for bit.
 * x holds an Inf at a column some rows have no entry in: those rows stay
 * finite, as in the reference (no padded zero multiplies it). On a
 * matrix without blocks it answers SPMV_ERR_UNSUPPORTED saying why. */
static void test_pbsr_omp(void **state)
{
    (void)state;
    static const int32_t bs[] = {2, 3, 4, 6};
    static const struct { int32_t bcols, per_row, span, palette; } cases[] = {
        {300, 6, 80, 0}, {20000, 4, 5000, 0}, {300, 5, 60, 40}, {200, 3, 30, 1}, {300, 6, 80, -2},
        {300000, 6, 100, -3}, /* -3: 8 block rows spanning 200 000 block columns below: wide block rows */
    };
    const spmv_kernel *k = spmv_kernel_find("cpu.pbsr.omp");
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 26);
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            fixture f;
            memset(&f, 0, sizeof f);
            tu_block_coo(&r, 50, cases[c].bcols, bs[i], cases[c].per_row, cases[c].span, SPMV_FLOAT64, &f.coo);
            if (cases[c].palette == -3) {
                spmv_coo wide;
                tu_block_coo(&r, 8, cases[c].bcols, bs[i], 4, 200000, SPMV_FLOAT64, &wide);
                stack_rows(&f.coo, &wide);
                spmv_coo_free(&wide);
            }
            if (cases[c].palette > 0)
                tu_palette_values(&r, &f.coo, cases[c].palette);
            for (int64_t e = 0; cases[c].palette == -2 && e < f.coo.nnz; e++)
                ((double *)f.coo.val)[e] = (double)(float)((double *)f.coo.val)[e];
            snprintf(f.what, sizeof f.what, "b=%d case %zu (%d x %d, nnz %lld)", bs[i], c, f.coo.rows, f.coo.cols,
                     (long long)f.coo.nnz);
            fixture_build(&f, &r);
            assert_true(f.m64.formats & SPMV_FMT_PBSR);
            assert_int_equal(f.m64.pbsr.b % bs[i], 0);
            if (cases[c].palette == -3) { /* 1-byte deltas, the 8 block rows below wide */
                spmv_coo back, ref;
                spmv_error err;
                assert_int_equal(f.m64.pbsr.idx_bytes, 1);
                assert_true(f.m64.pbsr.wide_nnz > 0);
                assert_int_equal(spmv_pbsr_to_coo(&f.m64.pbsr, &back, &err), SPMV_OK);
                assert_int_equal(spmv_csr_to_coo(&f.m64.csr, &ref, &err), SPMV_OK);
                assert_true(tu_coo_equal(&back, &ref));
                spmv_coo_free(&back);
                spmv_coo_free(&ref);
            }
            /* Inf at the last row's first column (block rows are windows at random offsets: others miss it) */
            int32_t j = f.coo.col[f.coo.nnz - 1];
            f.x64[j] = INFINITY;
            f.x32[j] = INFINITY;
            spmv_reference(&f.m64.csr, f.x64, f.ref64);
            spmv_reference(&f.m32.csr, f.x32, f.ref32);
            int32_t finite = 0;
            for (int32_t row = 0; row < f.coo.rows; row++)
                finite += isfinite(f.ref64[row]);
            assert_true(finite > 0 && finite < f.coo.rows);
            static const int32_t threads[] = {0, 1, 3};
            for (size_t t = 0; t < 3; t++) {
                spmv_params p = {{0}};
                p.v[SPMV_PARAM_THREADS] = threads[t];
                for (int d = 0; d < 2; d++) {
                    const spmv_matrix *m = d == 0 ? &f.m64 : &f.m32;
                    spmv_dtype dt = d == 0 ? SPMV_FLOAT64 : SPMV_FLOAT32;
                    void *y = tu_vector_alloc(dt, m->rows);
                    spmv_stats st;
                    spmv_error err;
                    tu_poison(y, dt, m->rows);
                    if (spmv_cpu_run(k, m, &p, d == 0 ? (void *)f.x64 : (void *)f.x32, y, 0, 1, &st, &err))
                        fail_msg("%s %s on %s: %s", k->name, spmv_dtype_name(dt), f.what, err.message);
                    if (memcmp(y, d == 0 ? (void *)f.ref64 : (void *)f.ref32, (size_t)m->rows * spmv_dtype_size(dt)))
                        fail_msg("%s %s threads=%d on %s: y differs from cpu.csr.serial's bits (SPMV_SEED=%llu)",
                                 k->name, spmv_dtype_name(dt), threads[t], f.what, (unsigned long long)tu_seed());
                    free(y);
                }
            }
            fixture_free(&f);
        }
    /* without blocks (a random matrix): refused, saying why */
    fixture f;
    fixture_make(&f, &r, TU_SHAPE_RANDOM, 33);
    void *y = tu_vector_alloc(SPMV_FLOAT64, f.coo.rows);
    spmv_stats st;
    spmv_error err;
    assert_false(f.m64.formats & SPMV_FMT_PBSR);
    assert_int_equal(spmv_cpu_run(k, &f.m64, NULL, f.x64, y, 0, 1, &st, &err), SPMV_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.message, "b x b blocks"));
    free(y);
    fixture_free(&f);
}

/* 0 x 5 and 5 x 0: no rows, or rows with nothing to multiply (y = 0). */
static void test_empty_shapes(void **state)
{
    (void)state;
    static const int32_t shapes[][2] = {{0, 5}, {5, 0}, {0, 0}};
    for (size_t s = 0; s < 3; s++)
        for (int d = 0; d < 2; d++) {
            spmv_coo coo;
            spmv_matrix m;
            spmv_error err;
            assert_int_equal(spmv_coo_alloc(&coo, shapes[s][0], shapes[s][1], 0, SPMV_FLOAT64, &err), SPMV_OK);
            assert_int_equal(spmv_matrix_build(&coo, (spmv_dtype)d, SPMV_FMT_ALL, 0, 0, &m, &err), SPMV_OK);
            void *x = tu_vector_alloc(m.dtype, m.cols), *y = tu_vector_alloc(m.dtype, m.rows);
            void *zero = tu_vector_alloc(m.dtype, m.rows);
            tu_random_vector(&(tu_rng){tu_seed()}, m.dtype, m.cols, x);
            memset(zero, 0, (size_t)m.rows * spmv_dtype_size(m.dtype));
            for (size_t i = 0; i < spmv_kernel_count(); i++) {
                const spmv_kernel *k = spmv_kernel_at(i);
                spmv_stats st;
                if (k->device != SPMV_DEVICE_CPU || k->op != SPMV_OP_SPMV)
                    continue;
                tu_poison(y, m.dtype, m.rows);
                int rc = spmv_cpu_run(k, &m, NULL, x, y, 1, 2, &st, &err);
                if (k->format == SPMV_FMT_PBSR) { /* no non-zeros, no blocks: refused, saying so */
                    assert_int_equal(rc, SPMV_ERR_UNSUPPORTED);
                    assert_non_null(strstr(err.message, "no non-zeros"));
                    continue;
                }
                if (rc == SPMV_ERR_UNAVAILABLE && k->format == SPMV_FMT_SPSELL && m.rows != m.cols)
                    continue; /* symmetric matrices only */
                if (rc != SPMV_OK)
                    fail_msg("%s on %d x %d: %s", k->name, m.rows, m.cols, err.message);
                assert_memory_equal(y, zero, (size_t)m.rows * spmv_dtype_size(m.dtype));
            }
            free(x);
            free(y);
            free(zero);
            spmv_matrix_free(&m);
            spmv_coo_free(&coo);
        }
}

/* The cpu.csr.omp partition: every part holds its share of non-zeros,
 * give or take one row (a row is never split). */
static void test_partition_shares(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 22);
    for (int s = 0; s < TU_SHAPE_COUNT; s++) {
        fixture f;
        fixture_make(&f, &r, (tu_shape)s, 3000);
        const spmv_csr *a = &f.m64.csr;
        int32_t maxrow = 0;
        for (int32_t i = 0; i < a->rows; i++)
            if (a->row_ptr[i + 1] - a->row_ptr[i] > maxrow)
                maxrow = a->row_ptr[i + 1] - a->row_ptr[i];
        static const int32_t parts[] = {1, 2, 3, 7, 64, 5000};
        for (size_t j = 0; j < sizeof parts / sizeof parts[0]; j++) {
            int32_t T = parts[j];
            int32_t *b = calloc((size_t)T + 1, sizeof *b);
            assert_non_null(b);
            spmv_cpu_csr_partition(a, T, b);
            assert_int_equal(b[0], 0);
            assert_int_equal(b[T], a->rows);
            for (int32_t t = 0; t < T; t++) {
                int64_t share = a->row_ptr[b[t + 1]] - a->row_ptr[b[t]];
                assert_true(b[t] <= b[t + 1]);
                if (share > a->nnz / T + 1 + maxrow)
                    fail_msg("%s: part %d of %d holds %lld of %lld non-zeros", f.what, t, T, (long long)share,
                             (long long)a->nnz);
            }
            free(b);
        }
        fixture_free(&f);
    }
}

/* x holding Inf where a column is never used: padding must not read it
 * into a NaN (0 * Inf), so padded kernels must agree with the reference. */
static void test_padding_ignores_x(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 18);
    fixture f;
    memset(&f, 0, sizeof f);
    /* Rows of very different lengths (so there is padding), column 0 empty. */
    tu_gen g = {.rows = 90, .cols = 90, .mean_per_row = 3, .dense_rows = 1, .dense_len = 60};
    tu_random_coo_gen(&r, &g, SPMV_FLOAT64, &f.coo);
    int64_t w = 0;
    for (int64_t k = 0; k < f.coo.nnz; k++)
        if (f.coo.col[k] != 0) {
            f.coo.row[w] = f.coo.row[k];
            f.coo.col[w] = f.coo.col[k];
            ((double *)f.coo.val)[w++] = ((double *)f.coo.val)[k];
        }
    f.coo.nnz = w;
    snprintf(f.what, sizeof f.what, "padded, x[0] = Inf (nnz %lld)", (long long)w);
    fixture_build(&f, &r);
    f.x64[0] = INFINITY;
    f.x32[0] = INFINITY;
    spmv_reference(&f.m64.csr, f.x64, f.ref64);
    spmv_reference(&f.m32.csr, f.x32, f.ref32);
    fixture_scales(&f);
    for (int32_t i = 0; i < f.coo.rows; i++)
        assert_true(isfinite(f.ref64[i]));
    static const char *const padded[] = {"cpu.ell.omp", "cpu.hll.omp", "cpu.psell.omp"};
    for (int i = 0; i < 3; i++) {
        run_and_check(spmv_kernel_find(padded[i]), &f, NULL, SPMV_FLOAT64, "inf-x");
        run_and_check(spmv_kernel_find(padded[i]), &f, NULL, SPMV_FLOAT32, "inf-x");
    }
    fixture_free(&f);
}

static void test_run_refusals(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 19);
    fixture f;
    fixture_make(&f, &r, TU_SHAPE_RANDOM, 40);
    double *y = tu_vector_alloc(SPMV_FLOAT64, f.coo.rows);
    spmv_error err = {0};
    spmv_stats st;
    spmv_params p = {{0}};
    const spmv_kernel *omp = spmv_kernel_find("cpu.csr.omp");
    assert_int_equal(spmv_cpu_run(spmv_kernel_find("gpu.csr.scalar"), &f.m64, NULL, f.x64, y, 0, 1, &st, &err),
                     SPMV_ERR_INVALID);
    assert_non_null(strstr(err.message, "gpu.csr.scalar"));
    p.v[SPMV_PARAM_CHUNK] = 4;
    assert_int_equal(spmv_cpu_run(omp, &f.m64, &p, f.x64, y, 0, 1, &st, &err), SPMV_ERR_INVALID);
    assert_non_null(strstr(err.message, "chunk"));
    p.v[SPMV_PARAM_CHUNK] = 0;
    p.v[SPMV_PARAM_THREADS] = 5000;
    assert_int_equal(spmv_cpu_run(omp, &f.m64, &p, f.x64, y, 0, 1, &st, &err), SPMV_ERR_INVALID);
    assert_non_null(strstr(err.message, "5000"));
    assert_int_equal(spmv_cpu_run(omp, &f.m64, NULL, f.x64, y, 0, 0, &st, &err), SPMV_ERR_INVALID);
    assert_int_equal(spmv_cpu_run(omp, &f.m64, NULL, f.x64, y, -1, 1, &st, &err), SPMV_ERR_INVALID);
    assert_int_equal(spmv_cpu_run(omp, &f.m64, NULL, NULL, y, 0, 1, &st, &err), SPMV_ERR_INVALID);
    /* an SpMSpM kernel of the table is not an SpMV one */
    for (size_t i = 0; i < spmv_kernel_count(); i++)
        if (spmv_kernel_at(i)->op != SPMV_OP_SPMV && spmv_kernel_at(i)->device == SPMV_DEVICE_CPU) {
            assert_int_equal(spmv_cpu_run(spmv_kernel_at(i), &f.m64, NULL, f.x64, y, 0, 1, &st, &err),
                             SPMV_ERR_INVALID);
            assert_non_null(strstr(err.message, spmv_kernel_at(i)->name));
        }
    free(y);
    fixture_free(&f);

    /* A scratch ELL that one long row would blow up is refused by the
     * padding rule, not built: 6000 rows x width 6000 = 36M slots, past 3
     * per non-zero + 65536. */
    tu_gen g = {.rows = 6000, .cols = 6000, .mean_per_row = 1, .dense_rows = 1, .dense_len = 6000};
    spmv_coo coo;
    spmv_matrix m;
    tu_random_coo_gen(&r, &g, SPMV_FLOAT64, &coo);
    spmv_format_limits lim = spmv_format_limits_default();
    assert_int_equal(spmv_matrix_build(&coo, SPMV_FLOAT64, SPMV_FMT_CSR, 0, &lim, &m, &err), SPMV_OK);
    double *x = tu_vector_alloc(SPMV_FLOAT64, m.cols);
    y = tu_vector_alloc(SPMV_FLOAT64, m.rows);
    tu_random_vector(&r, SPMV_FLOAT64, m.cols, x);
    assert_int_equal(spmv_cpu_run(spmv_kernel_find("cpu.ell.omp"), &m, NULL, x, y, 0, 1, &st, &err), SPMV_ERR_LIMIT);
    assert_non_null(strstr(err.message, "36000000 slots"));
    assert_non_null(strstr(err.message, "max_padding 3.00"));
    /* the same for a scratch PSELL (the dense row's slice: 32 x 6000 slots);
     * PCSR has no padding and runs */
    assert_int_equal(spmv_cpu_run(spmv_kernel_find("cpu.psell.omp"), &m, NULL, x, y, 0, 1, &st, &err),
                     SPMV_ERR_LIMIT);
    assert_non_null(strstr(err.message, "psell format"));
    assert_int_equal(spmv_cpu_run(spmv_kernel_find("cpu.pcsr.omp"), &m, NULL, x, y, 0, 1, &st, &err), SPMV_OK);
    free(x);
    free(y);
    spmv_matrix_free(&m);
    spmv_coo_free(&coo);
}

static void test_run_stats(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 20);
    fixture f;
    fixture_make(&f, &r, TU_SHAPE_RANDOM, 3000);
    double *y = tu_vector_alloc(SPMV_FLOAT64, f.coo.rows);
    spmv_stats st;
    spmv_error err;
    const spmv_kernel *k = spmv_kernel_find("cpu.csr.serial");
    tu_poison(y, SPMV_FLOAT64, f.coo.rows);
    assert_int_equal(spmv_cpu_run(k, &f.m64, NULL, f.x64, y, 2, 5, &st, &err), SPMV_OK);
    TU_ASSERT_CLOSE_SCALED("stats run", SPMV_FLOAT64, y, SPMV_FLOAT64, f.ref64, f.coo.rows, f.scale_inf, F64_BOUND);
    assert_int_equal(st.runs, 5);
    assert_int_equal(st.warmup, 2);
    assert_true(st.min_ms <= st.median_ms && st.median_ms <= st.max_ms);
    assert_true(st.min_ms <= st.mean_ms && st.mean_ms <= st.max_ms);
    assert_true(st.stddev_ms >= 0);
    if (st.median_ms > 0) {
        assert_true(fabs(st.gflops - 2.0 * (double)f.coo.nnz / (st.median_ms * 1e6)) <= 1e-9 * st.gflops);
        double bytes = (double)spmv_kernel_bytes(k, &f.m64);
        assert_true(fabs(st.gbps - bytes / (st.median_ms * 1e6)) <= 1e-9 * st.gbps);
    }
    free(y);
    fixture_free(&f);
}

static void test_stats_compute(void **state)
{
    (void)state;
    double t[4] = {3, 1, 2, 4};
    spmv_stats s;
    spmv_stats_compute(t, 4, 7, 2000000, 5000000, &s);
    assert_int_equal(s.runs, 4);
    assert_int_equal(s.warmup, 7);
    assert_true(s.mean_ms == 2.5 && s.median_ms == 2.5 && s.min_ms == 1 && s.max_ms == 4);
    assert_true(fabs(s.stddev_ms - sqrt(5.0 / 3.0)) < 1e-12);
    assert_true(fabs(s.gflops - 0.8) < 1e-12); /* 2e6 flop in 2.5 ms */
    assert_true(fabs(s.gbps - 2.0) < 1e-12);
    double one[1] = {0.5};
    spmv_stats_compute(one, 1, 0, 10, 10, &s);
    assert_true(s.median_ms == 0.5 && s.stddev_ms == 0 && s.mean_ms == 0.5);
    double odd[3] = {9, 1, 5};
    spmv_stats_compute(odd, 3, 0, 0, 0, &s);
    assert_true(s.median_ms == 5 && s.gflops == 0);
    spmv_stats_compute(NULL, 0, 0, 0, 0, &s);
    assert_int_equal(s.runs, 0);
    double a = spmv_now_ms(), b = spmv_now_ms();
    assert_true(b >= a && a > 0);
}

/* The rates at either statistic: flops and bytes over that time, from
 * the same timings; a statistic's name goes both ways and nothing else
 * is taken. The times are random (tu_seed), so mean and median differ. */
static void test_stats_use(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed());
    double t[9], sum = 0;
    for (int i = 0; i < 9; i++)
        sum += t[i] = (i == 8 ? 10.0 : 0.1) + tu_rng_uniform(&r); /* one slow run pulls the mean up */
    spmv_stats s;
    spmv_stats_compute(t, 9, 3, 2000000, 7000000, &s);
    assert_int_equal(s.stat, SPMV_STAT_MEDIAN);
    assert_true(s.flops == 2000000 && s.bytes == 7000000 && fabs(s.mean_ms - sum / 9) < 1e-12);
    assert_true(fabs(s.gflops - 2e6 / (s.median_ms * 1e6)) < 1e-12 * s.gflops);
    spmv_stats_use(&s, SPMV_STAT_MEAN);
    assert_int_equal(s.stat, SPMV_STAT_MEAN);
    assert_true(s.mean_ms != s.median_ms);
    assert_true(fabs(s.gflops - 2e6 / (s.mean_ms * 1e6)) < 1e-12 * s.gflops);
    assert_true(fabs(s.gbps - 7e6 / (s.mean_ms * 1e6)) < 1e-12 * s.gbps);
    assert_true(spmv_stats_ms(&s, SPMV_STAT_MEAN) == s.mean_ms && spmv_stats_ms(&s, SPMV_STAT_MEDIAN) == s.median_ms);
    spmv_stats_use(&s, SPMV_STAT_MEDIAN);
    assert_true(fabs(s.gbps - 7e6 / (s.median_ms * 1e6)) < 1e-12 * s.gbps);
    spmv_stat st = SPMV_STAT_MEDIAN;
    assert_int_equal(spmv_stat_parse("mean", &st), SPMV_OK);
    assert_int_equal(st, SPMV_STAT_MEAN);
    assert_string_equal(spmv_stat_name(st), "mean");
    assert_int_equal(spmv_stat_parse("median", &st), SPMV_OK);
    assert_string_equal(spmv_stat_name(st), "median");
    assert_int_equal(spmv_stat_parse("Mean", &st), SPMV_ERR_INVALID);
    assert_int_equal(spmv_stat_parse("min", &st), SPMV_ERR_INVALID);
    assert_int_equal(spmv_stat_parse(NULL, &st), SPMV_ERR_INVALID);
    spmv_stats z = {0}; /* no timed run: no rate, at either statistic */
    spmv_stats_use(&z, SPMV_STAT_MEAN);
    assert_true(z.gflops == 0 && z.gbps == 0);
}

static void test_max_rel_err(void **state)
{
    (void)state;
    double ref[3] = {1, -4, 2}, y[3] = {1, -4.5, 2};
    float ref32[2] = {0, 0}, y32[2] = {0, 0};
    assert_true(fabs(spmv_max_rel_err(SPMV_FLOAT64, y, ref, 3) - 0.125) < 1e-15);
    assert_true(spmv_max_rel_err(SPMV_FLOAT64, ref, ref, 3) == 0);
    assert_true(spmv_max_rel_err(SPMV_FLOAT32, y32, ref32, 2) == 0);
    y32[1] = 1e-30f;
    assert_true(spmv_max_rel_err(SPMV_FLOAT32, y32, ref32, 2) > 1e100); /* zero reference: tiny floor */
    y[1] = NAN;
    assert_true(isinf(spmv_max_rel_err(SPMV_FLOAT64, y, ref, 3)));
    y[1] = -4;
    y[2] = INFINITY;
    assert_true(isinf(spmv_max_rel_err(SPMV_FLOAT64, y, ref, 3)));
    /* a non-finite reference is matched by the same value only; the rest
     * is measured against the finite entries */
    double r2[4] = {NAN, INFINITY, -INFINITY, 2}, y2[4] = {NAN, INFINITY, -INFINITY, 2.5};
    assert_true(fabs(spmv_max_rel_err(SPMV_FLOAT64, y2, r2, 4) - 0.25) < 1e-15);
    y2[0] = 1;
    assert_true(isinf(spmv_max_rel_err(SPMV_FLOAT64, y2, r2, 4)));
    y2[0] = NAN;
    y2[1] = -INFINITY;
    assert_true(isinf(spmv_max_rel_err(SPMV_FLOAT64, y2, r2, 4)));
    y2[1] = NAN;
    assert_true(isinf(spmv_max_rel_err(SPMV_FLOAT64, y2, r2, 4)));
    float r3[2] = {NAN, 1}, y3[2] = {NAN, 1};
    assert_true(spmv_max_rel_err(SPMV_FLOAT32, y3, r3, 2) == 0);
}

/* Byte counts as docs/kernels.md writes them. */
static void test_kernel_bytes(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 21);
    fixture f;
    fixture_make(&f, &r, TU_SHAPE_POWER_LAW, 500);
    for (int d = 0; d < 2; d++) {
        const spmv_matrix *m = d ? &f.m32 : &f.m64; /* m32 holds CSR only: counts from the CSR */
        int64_t vs = d ? 4 : 8, rows = m->rows, cols = m->cols, nnz = m->nnz, xy = (rows + cols) * vs;
        spmv_ell ell;
        spmv_hll hll;
        spmv_hyb hyb;
        assert_int_equal(spmv_csr_to_ell(&m->csr, 0, &ell, NULL), SPMV_OK);
        assert_int_equal(spmv_csr_to_hll(&m->csr, 32, &hll, NULL), SPMV_OK);
        assert_int_equal(spmv_csr_to_hyb(&m->csr, -1, &hyb, NULL), SPMV_OK);
        int64_t slots = hll.slice_off[hll.nslices];
        assert_int_equal(spmv_kernel_bytes(spmv_kernel_find("cpu.csr.omp"), m), (rows + 1) * 4 + nnz * (4 + vs) + xy);
        assert_int_equal(spmv_kernel_bytes(spmv_kernel_find("cpu.ell.omp"), m), ell.width * rows * (4 + vs) + xy);
        assert_int_equal(spmv_kernel_bytes(spmv_kernel_find("cpu.hll.omp"), m),
                         slots * (4 + vs) + (hll.nslices + 1) * 8 + hll.nslices * 4 + xy);
        assert_int_equal(spmv_kernel_bytes(spmv_kernel_find("gpu.coo.atomic"), m), nnz * (8 + vs) + xy);
        assert_int_equal(spmv_kernel_bytes(spmv_kernel_find("gpu.hyb"), m),
                         hyb.ell.width * rows * (4 + vs) + hyb.coo.nnz * (8 + vs) + xy);
        /* packed: PCSR reads the CSR's row_ptr and its own arrays, PSELL its
         * arrays; held (m64) or planned (m32), the same count */
        spmv_pcsr pc;
        spmv_psell ps;
        assert_int_equal(spmv_csr_to_pcsr(&m->csr, NULL, &pc, NULL), SPMV_OK);
        assert_int_equal(spmv_csr_to_psell(&m->csr, NULL, &ps, NULL), SPMV_OK);
        assert_int_equal(spmv_kernel_bytes(spmv_kernel_find("cpu.pcsr.omp"), m),
                         (rows + 1) * 4 + (int64_t)spmv_pcsr_info(&pc).bytes + xy);
        assert_int_equal(spmv_kernel_bytes(spmv_kernel_find("cpu.psell.omp"), m),
                         (int64_t)spmv_psell_info(&ps).bytes + xy);
        assert_true(spmv_pcsr_info(&pc).bytes < (size_t)(nnz * (4 + vs))); /* power-law, 500 x 500: 1-byte deltas */
        spmv_pcsr_free(&pc);
        spmv_psell_free(&ps);
        spmv_ell_free(&ell);
        spmv_hll_free(&hll);
        spmv_hyb_free(&hyb);
    }
    fixture_free(&f);
}

/* A wide CSR (64-bit row offsets, as a matrix past INT32_MAX non-zeros
 * holds them): the reference, cpu.csr.serial and cpu.csr.omp (every
 * thread count) give bitwise the 32-bit matrix's y — the same row loop
 * over other offsets — on every test shape and both dtypes, and so does
 * cpu.psell.omp, whose PSELL built from the wide CSR is the 32-bit one's
 * array for array (and its plan the same); every other CPU kernel, every
 * other derived format, the transpose, a k > 1 product and the format
 * plan answer SPMV_ERR_LIMIT naming the 64-bit offsets; the CSR kernels'
 * bytes count 8-byte offsets. */
static void test_wide_csr(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed() ^ 0x64);
    for (int s = 0; s < TU_SHAPE_COUNT; s++)
        for (size_t n = 0; n < sizeof sizes / sizeof sizes[0]; n++)
            for (int d = 0; d < 2; d++) {
                spmv_dtype dt = d ? SPMV_FLOAT32 : SPMV_FLOAT64;
                spmv_coo coo;
                spmv_matrix narrow, wide;
                spmv_error err;
                tu_random_coo(&r, (tu_shape)s, sizes[n], SPMV_FLOAT64, &coo);
                assert_int_equal(spmv_matrix_build(&coo, dt, SPMV_FMT_CSR, 32, 0, &narrow, &err), SPMV_OK);
                assert_int_equal(spmv_matrix_build(&coo, dt, SPMV_FMT_CSR, 32, 0, &wide, &err), SPMV_OK);
                assert_int_equal(spmv_csr_widen(&wide.csr, &err), SPMV_OK);
                assert_true(spmv_csr_wide(&wide.csr) && !wide.csr.row_ptr && !spmv_csr_wide(&narrow.csr));
                for (int32_t i = 0; i <= coo.rows; i++)
                    assert_int_equal(wide.csr.row_ptr64[i], narrow.csr.row_ptr[i]);
                char what[160];
                snprintf(what, sizeof what, "%s n=%d %s (nnz %lld)", tu_shape_name((tu_shape)s), sizes[n],
                         spmv_dtype_name(dt), (long long)coo.nnz);
                void *x = tu_vector_alloc(dt, coo.cols), *ref = tu_vector_alloc(dt, coo.rows),
                     *y = tu_vector_alloc(dt, coo.rows);
                size_t bytes = (size_t)coo.rows * spmv_dtype_size(dt);
                tu_random_vector(&r, dt, coo.cols, x);
                spmv_reference(&narrow.csr, x, ref);
                tu_poison(y, dt, coo.rows);
                spmv_reference(&wide.csr, x, y);
                if (bytes && memcmp(y, ref, bytes) != 0)
                    fail_msg("%s: the reference on 64-bit offsets differs from 32-bit", what);
                static const int32_t threads[] = {0, 1, 3};
                for (size_t t = 0; t < 4; t++) {
                    const spmv_kernel *k = spmv_kernel_find(t == 0 ? "cpu.csr.serial" : "cpu.csr.omp");
                    spmv_params p = {{0}};
                    if (t > 0)
                        p.v[SPMV_PARAM_THREADS] = threads[t - 1];
                    spmv_stats st;
                    tu_poison(y, dt, coo.rows);
                    if (spmv_cpu_run(k, &wide, &p, x, y, 0, 1, &st, &err) != SPMV_OK)
                        fail_msg("%s: %s on 64-bit offsets: %s", what, k->name, err.message);
                    if (bytes && memcmp(y, ref, bytes) != 0)
                        fail_msg("%s: %s (threads %d) on 64-bit offsets differs from the 32-bit reference", what,
                                 k->name, p.v[SPMV_PARAM_THREADS]);
                    assert_int_equal(spmv_kernel_bytes(k, &wide) - spmv_kernel_bytes(k, &narrow),
                                     ((int64_t)coo.rows + 1) * 4);
                }
                {
                    const spmv_kernel *k = spmv_kernel_find("cpu.psell.omp");
                    spmv_stats st;
                    tu_poison(y, dt, coo.rows);
                    if (spmv_cpu_run(k, &wide, NULL, x, y, 0, 1, &st, &err) != SPMV_OK)
                        fail_msg("%s: %s on 64-bit offsets: %s", what, k->name, err.message);
                    if (bytes && memcmp(y, ref, bytes) != 0)
                        fail_msg("%s: %s on 64-bit offsets differs from the 32-bit reference", what, k->name);
                }
                for (size_t i = 0; i < spmv_kernel_count(); i++) {
                    const spmv_kernel *k = spmv_kernel_at(i);
                    if (k->device != SPMV_DEVICE_CPU || k->op != SPMV_OP_SPMV || !strcmp(k->name, "cpu.csr.serial") ||
                        !strcmp(k->name, "cpu.csr.omp") || !strcmp(k->name, "cpu.psell.omp") || spmv_kernel_is_auto(k))
                        continue;
                    spmv_stats st;
                    memset(&err, 0, sizeof err);
                    if (spmv_cpu_run(k, &wide, NULL, x, y, 0, 1, &st, &err) != SPMV_ERR_LIMIT ||
                        !strstr(err.message, "64-bit row offsets"))
                        fail_msg("%s: %s on 64-bit offsets answered \"%s\", not SPMV_ERR_LIMIT", what, k->name,
                                 err.message);
                }
                for (spmv_format f = SPMV_FMT_COO; f <= SPMV_FMT_LAST; f <<= 1) {
                    int64_t slots, fbytes, nslots, nbytes;
                    if (f == SPMV_FMT_CSR)
                        continue;
                    if (f == SPMV_FMT_PSELL) { /* its slices' offsets are 64-bit: the 32-bit CSR's PSELL */
                        assert_int_equal(spmv_format_plan(&wide.csr, f, 32, &slots, &fbytes, &err), SPMV_OK);
                        assert_int_equal(spmv_format_plan(&narrow.csr, f, 32, &nslots, &nbytes, &err), SPMV_OK);
                        assert_true(slots == nslots && fbytes == nbytes);
                        assert_int_equal(spmv_matrix_add_format(&wide, f, &err), SPMV_OK);
                        assert_int_equal(spmv_matrix_add_format(&narrow, f, &err), SPMV_OK);
                        if (!tu_same_psell(what, &narrow.psell, &wide.psell))
                            fail_msg("%s: the PSELL of the 64-bit CSR differs from the 32-bit one's", what);
                        continue;
                    }
                    assert_int_equal(spmv_matrix_add_format(&wide, f, &err), SPMV_ERR_LIMIT);
                    assert_int_equal(spmv_format_plan(&wide.csr, f, 32, &slots, &fbytes, &err), SPMV_ERR_LIMIT);
                }
                assert_int_equal(wide.formats, SPMV_FMT_CSR | SPMV_FMT_PSELL);
                spmv_matrix t;
                assert_int_equal(spmv_matrix_transpose(&wide, &t, &err), SPMV_ERR_LIMIT);
                spmv_vec vx = {SPMV_DEVICE_CPU, dt, coo.cols, 2, NULL}, vy = {SPMV_DEVICE_CPU, dt, coo.rows, 2, NULL};
                vx.data = tu_vector_alloc(dt, (int64_t)coo.cols * 2);
                vy.data = tu_vector_alloc(dt, (int64_t)coo.rows * 2);
                spmv_apply_args a = {1.0, 0.0, 0, 1};
                assert_int_equal(spmv_cpu_apply(spmv_kernel_find("cpu.csr.omp"), &wide, NULL, &a, &vx, &vy, NULL, NULL,
                                                &err), SPMV_ERR_LIMIT);
                free(vx.data);
                free(vy.data);
                free(x);
                free(ref);
                free(y);
                spmv_matrix_free(&narrow);
                spmv_matrix_free(&wide);
                spmv_coo_free(&coo);
            }
}

int main(void)
{
    tu_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_cpu_kernel_covered),
        cmocka_unit_test(test_reference_dense),
        cmocka_unit_test(test_csr_serial),
        cmocka_unit_test(test_pbsr_omp),
        cmocka_unit_test(test_csr_chunked),
        cmocka_unit_test(test_csr_chunked_rectangular),
        cmocka_unit_test(test_chunked_work),
        cmocka_unit_test(test_csr_omp),
        cmocka_unit_test(test_ell_omp),
        cmocka_unit_test(test_hll_omp),
        cmocka_unit_test(test_pcsr_omp),
        cmocka_unit_test(test_psell_omp),
        cmocka_unit_test(test_spsell_omp),
        cmocka_unit_test(test_spsell_refusal),
        cmocka_unit_test(test_packed_kernels_exact),
        cmocka_unit_test(test_omp_partition_large),
        cmocka_unit_test(test_partition_shares),
        cmocka_unit_test(test_empty_shapes),
        cmocka_unit_test(test_padding_ignores_x),
        cmocka_unit_test(test_run_refusals),
        cmocka_unit_test(test_run_stats),
        cmocka_unit_test(test_stats_compute),
        cmocka_unit_test(test_stats_use),
        cmocka_unit_test(test_max_rel_err),
        cmocka_unit_test(test_kernel_bytes),
        cmocka_unit_test(test_wide_csr),
    };
    return cmocka_run_group_tests_name("cpu_kernels", tests, NULL, NULL);
}
