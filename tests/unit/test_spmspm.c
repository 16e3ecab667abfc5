/* test_spmspm.c — the CPU SpMSpM kernels (cpu.spmspm.serial, cpu.spmspm.omp,
 * cpu.spmspm.hash)
 * and the helpers of engine/spmspm.c.
 *
 * The reference here is the test's own: C = A*B computed in double from
 * the operands' values (float32 ones widened exactly), each row's products
 * gathered as (column, value) pairs, sorted and summed — no dense array,
 * no code shared with the engine. Small cases are also checked against a
 * dense rows x cols product. A kernel's C must have exactly the
 * reference's structure (rows sorted by column, no duplicates, every
 * symbolic product present) and values within a bound relative to
 * max sum |a_ik b_kj| (the scale rounding errors grow with, whatever the
 * cancellation): float64 1e-12, float32 1e-5, widened by
 * sqrt(products per row / 100) past 100. C is allocated by the engine, so
 * there is nothing to poison beforehand; instead every value must be
 * finite (the operands' are), which catches an entry never written.
 *
 * Inputs: every ../shared/matrices/real/ matrix times a random thin B of
 * 1, 8, 32 and 300 columns (B with empty rows, drawn afresh: the seed is
 * printed, SPMV_SEED repeats a run); random rectangular A of testutil's
 * shapes (empty rows, a dense row, power-law rows, 1 x 1, n x 1, 1 x n, no
 * non-zeros); the empty shapes 0 x 5, 5 x 0, 0 x 0 on either side; a B
 * wider than the dense accumulator's limit (the sort-and-merge path); both
 * dtypes. Refusals: shape mismatch (SPMV_ERR_SHAPE naming both shapes),
 * dtype mismatch, an SpMV kernel, bad runs.
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
/* wider than engine/cpu/spmspm.c's DENSE_MAX_COLS (1 << 21) */
#define WIDE_COLS 3000000

static const int32_t thin_cols[] = {1, 8, 32, 300};
#define NTHIN (sizeof thin_cols / sizeof thin_cols[0])

static tu_rng rng;

static double val_at(const spmv_csr *m, int64_t p)
{
    return m->dtype == SPMV_FLOAT32 ? (double)((const float *)m->val)[p] : ((const double *)m->val)[p];
}

/* ------------------------------------------------------------ reference */

typedef struct ref_c {
    int32_t rows, cols;
    int64_t nnz, max_row_products;
    int64_t *row_ptr;
    int32_t *col;
    double *val, *abs;  /* sum a*b and sum |a*b| per entry */
} ref_c;

typedef struct prod {
    int32_t col;
    double v;
} prod;

static int by_col(const void *x, const void *y)
{
    const prod *p = x, *q = y;
    return (p->col > q->col) - (p->col < q->col);
}

static int64_t row_products(const spmv_csr *a, const spmv_csr *b, int32_t i, prod *buf)
{
    int64_t n = 0;
    for (int32_t p = a->row_ptr[i]; p < a->row_ptr[i + 1]; p++)
        for (int32_t q = b->row_ptr[a->col[p]]; q < b->row_ptr[a->col[p] + 1]; q++) {
            if (buf)
                buf[n] = (prod){b->col[q], val_at(a, p) * val_at(b, q)};
            n++;
        }
    return n;
}

static void ref_product(const spmv_csr *a, const spmv_csr *b, ref_c *r)
{
    int64_t total = 0, cap = 1;
    memset(r, 0, sizeof *r);
    r->rows = a->rows;
    r->cols = b->cols;
    for (int32_t i = 0; i < a->rows; i++) {
        int64_t n = row_products(a, b, i, NULL);
        total += n;
        if (n > r->max_row_products)
            r->max_row_products = n;
    }
    prod *buf = malloc((size_t)(r->max_row_products + 1) * sizeof *buf);
    r->row_ptr = calloc((size_t)a->rows + 1, sizeof *r->row_ptr);
    cap = total + 1;
    r->col = malloc((size_t)cap * sizeof *r->col);
    r->val = malloc((size_t)cap * sizeof *r->val);
    r->abs = malloc((size_t)cap * sizeof *r->abs);
    assert_true(buf && r->row_ptr && r->col && r->val && r->abs);
    for (int32_t i = 0; i < a->rows; i++) {
        int64_t n = row_products(a, b, i, buf);
        qsort(buf, (size_t)n, sizeof *buf, by_col);
        for (int64_t p = 0; p < n; p++) {
            if (p == 0 || buf[p].col != buf[p - 1].col) {
                r->col[r->nnz] = buf[p].col;
                r->val[r->nnz] = r->abs[r->nnz] = 0;
                r->nnz++;
            }
            r->val[r->nnz - 1] += buf[p].v;
            r->abs[r->nnz - 1] += fabs(buf[p].v);
        }
        r->row_ptr[i + 1] = r->nnz;
    }
    free(buf);
}

static void ref_free(ref_c *r)
{
    free(r->row_ptr);
    free(r->col);
    free(r->val);
    free(r->abs);
}

/* Fails with `what` unless c has r's structure and values within bound. */
static void check_product(const char *what, const spmv_csr *c, const ref_c *r)
{
    double scale = 1e-300, worst = 0;
    double bound = c->dtype == SPMV_FLOAT32 ? F32_BOUND : F64_BOUND;
    if (r->max_row_products > 100)
        bound *= sqrt((double)r->max_row_products / 100.0);
    if (c->rows != r->rows || c->cols != r->cols || c->nnz != r->nnz)
        fail_msg("%s: C is %d x %d with %lld entries, expected %d x %d with %lld (seed %llu)", what, c->rows,
                 c->cols, (long long)c->nnz, r->rows, r->cols, (long long)r->nnz, (unsigned long long)tu_seed());
    for (int32_t i = 0; i <= c->rows; i++)
        if (c->row_ptr[i] != r->row_ptr[i])
            fail_msg("%s: row_ptr[%d] = %d, expected %lld (seed %llu)", what, i, c->row_ptr[i],
                     (long long)r->row_ptr[i], (unsigned long long)tu_seed());
    for (int64_t p = 0; p < r->nnz; p++) {
        if (c->col[p] != r->col[p])
            fail_msg("%s: entry %lld has column %d, expected %d (seed %llu)", what, (long long)p, c->col[p],
                     r->col[p], (unsigned long long)tu_seed());
        scale = fmax(scale, r->abs[p]);
    }
    for (int64_t p = 0; p < r->nnz; p++) {
        double d = fabs(val_at(c, p) - r->val[p]);
        if (!isfinite(val_at(c, p)))
            fail_msg("%s: entry %lld (column %d) is %g (seed %llu)", what, (long long)p, c->col[p], val_at(c, p),
                     (unsigned long long)tu_seed());
        worst = fmax(worst, d / scale);
    }
    if (worst > bound)
        fail_msg("%s: error %.3g over bound %.3g (seed %llu)", what, worst, bound, (unsigned long long)tu_seed());
}

/* ------------------------------------------------------------ operands */

static void to_csr(const spmv_coo *coo, spmv_dtype dt, spmv_csr *out)
{
    spmv_error err;
    if (spmv_coo_to_csr(coo, dt, out, &err) != SPMV_OK)
        fail_msg("coo -> csr: %s", err.message);
}

/* A random thin B of rows x cols, ~min(cols, 4) per row, 15% empty rows. */
static void thin_b(int32_t rows, int32_t cols, spmv_dtype dt, spmv_csr *out)
{
    spmv_coo coo;
    tu_gen g = {.rows = rows, .cols = cols, .mean_per_row = cols < 4 ? cols : 4, .empty_row_frac = 0.15};
    tu_random_coo_gen(&rng, &g, SPMV_FLOAT64, &coo);
    to_csr(&coo, dt, out);
    spmv_coo_free(&coo);
}

static void empty_csr(int32_t rows, int32_t cols, spmv_dtype dt, spmv_csr *out)
{
    spmv_coo coo;
    spmv_error err;
    assert_int_equal(spmv_coo_alloc(&coo, rows, cols, 0, SPMV_FLOAT64, &err), SPMV_OK);
    to_csr(&coo, dt, out);
    spmv_coo_free(&coo);
}

/* Every CPU SpMSpM kernel on (a, b) against the reference; the OpenMP
 * kernel must also equal the serial one bit for bit. */
static void check_all(const char *label, const spmv_csr *a, const spmv_csr *b)
{
    ref_c r;
    spmv_csr cs, co;
    spmv_error err;
    spmv_stats st;
    char what[256];
    ref_product(a, b, &r);
    const spmv_kernel *ser = spmv_kernel_find("cpu.spmspm.serial"), *omp = spmv_kernel_find("cpu.spmspm.omp");
    assert_non_null(ser);
    assert_non_null(omp);
    snprintf(what, sizeof what, "cpu.spmspm.serial %s on %s", spmv_dtype_name(a->dtype), label);
    if (spmv_cpu_spmspm(ser, a, b, NULL, 0, 1, &cs, &st, &err) != SPMV_OK)
        fail_msg("%s: %s", what, err.message);
    check_product(what, &cs, &r);
    snprintf(what, sizeof what, "cpu.spmspm.omp %s on %s", spmv_dtype_name(a->dtype), label);
    spmv_params p = {{0}};
    p.v[SPMV_PARAM_THREADS] = 3; /* more threads than the 2 cores: uneven shares */
    if (spmv_cpu_spmspm(omp, a, b, &p, 1, 2, &co, &st, &err) != SPMV_OK)
        fail_msg("%s: %s", what, err.message);
    check_product(what, &co, &r);
    assert_int_equal(st.runs, 2);
    assert_memory_equal(co.val, cs.val, (size_t)cs.nnz * spmv_dtype_size(cs.dtype));
    /* the SpMSpM study's baseline (docs/kernels.md #17): COO x CSR through a hash map, the same sums in
     * the same order, so bitwise the serial kernel's too */
    spmv_csr ch;
    snprintf(what, sizeof what, "cpu.spmspm.hash %s on %s", spmv_dtype_name(a->dtype), label);
    if (spmv_cpu_spmspm(spmv_kernel_find("cpu.spmspm.hash"), a, b, NULL, 1, 2, &ch, &st, &err) != SPMV_OK)
        fail_msg("%s: %s", what, err.message);
    check_product(what, &ch, &r);
    assert_int_equal(st.runs, 2);
    assert_memory_equal(ch.row_ptr, cs.row_ptr, ((size_t)cs.rows + 1) * sizeof(int32_t));
    assert_memory_equal(ch.col, cs.col, (size_t)cs.nnz * sizeof(int32_t));
    assert_memory_equal(ch.val, cs.val, (size_t)cs.nnz * spmv_dtype_size(cs.dtype));
    spmv_csr_free(&ch);
    spmv_csr_free(&cs);
    spmv_csr_free(&co);
    ref_free(&r);
}

/* --------------------------------------------------------------- tests */

static void test_real_times_thin(void **state)
{
    (void)state;
    tu_expected *ex = NULL;
    size_t n = 0;
    assert_int_equal(tu_expected_load(&ex, &n), 0);
    assert_true(n > 0);
    for (size_t i = 0; i < n; i++) {
        char rel[256], path[4096], label[256];
        spmv_coo coo;
        spmv_error err;
        snprintf(rel, sizeof rel, "real/%s", ex[i].file);
        tu_matrices_path(path, sizeof path, rel);
        if (spmv_mm_read_file(path, NULL, &coo, NULL, &err) != SPMV_OK)
            fail_msg("%s: %s", path, err.message);
        for (int d = 0; d < 2; d++)
            for (size_t t = 0; t < NTHIN; t++) {
                spmv_csr a, b;
                to_csr(&coo, (spmv_dtype)d, &a);
                thin_b(a.cols, thin_cols[t], (spmv_dtype)d, &b);
                snprintf(label, sizeof label, "%s x B %d x %d (%lld nnz)", ex[i].file, b.rows, b.cols,
                         (long long)b.nnz);
                check_all(label, &a, &b);
                spmv_csr_free(&a);
                spmv_csr_free(&b);
            }
        spmv_coo_free(&coo);
    }
    tu_expected_free(ex, n);
}

static void test_random_shapes(void **state)
{
    (void)state;
    for (int s = 0; s < TU_SHAPE_COUNT; s++)
        for (int d = 0; d < 2; d++)
            for (size_t t = 0; t < NTHIN; t++) {
                spmv_coo coo;
                spmv_csr a, b;
                char label[256];
                tu_random_coo(&rng, (tu_shape)s, 400, SPMV_FLOAT64, &coo);
                to_csr(&coo, (spmv_dtype)d, &a);
                thin_b(a.cols, thin_cols[t], (spmv_dtype)d, &b);
                snprintf(label, sizeof label, "random %s %d x %d times %d x %d", tu_shape_name((tu_shape)s), a.rows,
                         a.cols, b.rows, b.cols);
                check_all(label, &a, &b);
                spmv_csr_free(&a);
                spmv_csr_free(&b);
                spmv_coo_free(&coo);
            }
}

/* Small cases against a dense product, computed the plain way. */
static void test_dense_reference(void **state)
{
    (void)state;
    const spmv_kernel *ser = spmv_kernel_find("cpu.spmspm.serial");
    for (int trial = 0; trial < 40; trial++) {
        int32_t m = (int32_t)tu_rng_range(&rng, 1, 12), k = (int32_t)tu_rng_range(&rng, 1, 12),
                n = (int32_t)tu_rng_range(&rng, 1, 12);
        spmv_coo ca, cb;
        spmv_csr a, b, c;
        spmv_error err;
        tu_gen ga = {.rows = m, .cols = k, .mean_per_row = k / 3.0 + 0.5, .empty_row_frac = 0.2};
        tu_gen gb = {.rows = k, .cols = n, .mean_per_row = n / 3.0 + 0.5, .empty_row_frac = 0.2};
        tu_random_coo_gen(&rng, &ga, SPMV_FLOAT64, &ca);
        tu_random_coo_gen(&rng, &gb, SPMV_FLOAT64, &cb);
        to_csr(&ca, SPMV_FLOAT64, &a);
        to_csr(&cb, SPMV_FLOAT64, &b);
        double dense[12][12] = {{0}};
        bool present[12][12] = {{false}};
        for (int64_t p = 0; p < ca.nnz; p++)
            for (int64_t q = 0; q < cb.nnz; q++)
                if (cb.row[q] == ca.col[p]) {
                    dense[ca.row[p]][cb.col[q]] += ((double *)ca.val)[p] * ((double *)cb.val)[q];
                    present[ca.row[p]][cb.col[q]] = true;
                }
        assert_int_equal(spmv_cpu_spmspm(ser, &a, &b, NULL, 0, 1, &c, NULL, &err), SPMV_OK);
        int64_t e = 0;
        for (int32_t i = 0; i < m; i++)
            for (int32_t j = 0; j < n; j++) {
                if (!present[i][j])
                    continue;
                if (e >= c.row_ptr[i + 1] || c.col[e] != j)
                    fail_msg("trial %d: C(%d,%d) missing or out of order (seed %llu)", trial, i, j,
                             (unsigned long long)tu_seed());
                assert_true(fabs(((double *)c.val)[e] - dense[i][j]) <= 1e-14 * (1 + fabs(dense[i][j])));
                e++;
            }
        assert_int_equal(e, c.nnz);
        spmv_csr_free(&a);
        spmv_csr_free(&b);
        spmv_csr_free(&c);
        spmv_coo_free(&ca);
        spmv_coo_free(&cb);
    }
}

/* Empty operands on either side, rectangular, and B with no columns. */
static void test_empty_shapes(void **state)
{
    (void)state;
    static const int32_t shapes[][3] = {{0, 5, 7}, {5, 0, 7}, {0, 0, 0}, {5, 7, 0}, {7, 5, 3}, {3, 9, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int d = 0; d < 2; d++) {
            spmv_csr a, b, b0;
            char label[128];
            spmv_coo coo;
            tu_gen g = {.rows = shapes[s][0], .cols = shapes[s][1], .mean_per_row = 2, .empty_row_frac = 0.3};
            tu_random_coo_gen(&rng, &g, SPMV_FLOAT64, &coo);
            to_csr(&coo, (spmv_dtype)d, &a);
            spmv_coo_free(&coo);
            thin_b(shapes[s][1], shapes[s][2], (spmv_dtype)d, &b);
            empty_csr(shapes[s][1], shapes[s][2], (spmv_dtype)d, &b0);
            snprintf(label, sizeof label, "%d x %d times %d x %d", a.rows, a.cols, b.rows, b.cols);
            check_all(label, &a, &b);
            snprintf(label, sizeof label, "%d x %d times an empty %d x %d", a.rows, a.cols, b0.rows, b0.cols);
            check_all(label, &a, &b0);
            spmv_csr_free(&a);
            spmv_csr_free(&b);
            spmv_csr_free(&b0);
        }
}

/* B wider than the dense accumulator's limit: the sort-and-merge path. */
static void test_wide_b(void **state)
{
    (void)state;
    for (int d = 0; d < 2; d++) {
        spmv_coo coo;
        spmv_csr a, b;
        tu_random_coo(&rng, TU_SHAPE_POWER_LAW, 300, SPMV_FLOAT64, &coo);
        to_csr(&coo, (spmv_dtype)d, &a);
        spmv_coo_free(&coo);
        /* few distinct columns among millions, so rows collide */
        tu_gen g = {.rows = a.cols, .cols = 40, .mean_per_row = 5, .empty_row_frac = 0.1};
        tu_random_coo_gen(&rng, &g, SPMV_FLOAT64, &coo);
        coo.cols = WIDE_COLS;
        for (int64_t p = 0; p < coo.nnz; p++)
            coo.col[p] = coo.col[p] * (WIDE_COLS / 40) + 7; /* same order, spread wide */
        to_csr(&coo, (spmv_dtype)d, &b);
        spmv_coo_free(&coo);
        check_all("power-law 300 x 300 times B 300 x 3000000", &a, &b);
        spmv_csr_free(&a);
        spmv_csr_free(&b);
    }
}

static void test_refusals(void **state)
{
    (void)state;
    spmv_csr a, b, b32, c;
    spmv_error err;
    const spmv_kernel *ser = spmv_kernel_find("cpu.spmspm.serial");
    thin_b(10, 20, SPMV_FLOAT64, &a);
    thin_b(21, 4, SPMV_FLOAT64, &b);
    assert_int_equal(spmv_cpu_spmspm(ser, &a, &b, NULL, 0, 1, &c, NULL, &err), SPMV_ERR_SHAPE);
    assert_non_null(strstr(err.message, "10 x 20"));
    assert_non_null(strstr(err.message, "21 x 4"));
    assert_null(c.row_ptr);
    assert_int_equal(spmv_spmspm_check(&a, &b, &err), SPMV_ERR_SHAPE);
    spmv_csr_free(&b);
    thin_b(20, 4, SPMV_FLOAT32, &b32);
    assert_int_equal(spmv_cpu_spmspm(ser, &a, &b32, NULL, 0, 1, &c, NULL, &err), SPMV_ERR_INVALID);
    assert_non_null(strstr(err.message, "float32"));
    thin_b(20, 4, SPMV_FLOAT64, &b);
    /* an SpMV kernel, a GPU kernel, runs out of range, a foreign parameter */
    assert_int_equal(spmv_cpu_spmspm(spmv_kernel_find("cpu.csr.serial"), &a, &b, NULL, 0, 1, &c, NULL, &err),
                     SPMV_ERR_INVALID);
    assert_int_equal(spmv_cpu_spmspm(spmv_kernel_find("gpu.spmspm.warp_nnz"), &a, &b, NULL, 0, 1, &c, NULL, &err),
                     SPMV_ERR_INVALID);
    assert_int_equal(spmv_cpu_spmspm(ser, &a, &b, NULL, 0, 0, &c, NULL, &err), SPMV_ERR_INVALID);
    assert_int_equal(spmv_cpu_spmspm(ser, &a, &b, NULL, -1, 1, &c, NULL, &err), SPMV_ERR_INVALID);
    spmv_params p = {{0}};
    p.v[SPMV_PARAM_BLOCK_SIZE] = 64;
    assert_int_equal(spmv_cpu_spmspm(spmv_kernel_find("cpu.spmspm.omp"), &a, &b, &p, 0, 1, &c, NULL, &err),
                     SPMV_ERR_INVALID);
    assert_int_equal(spmv_cpu_spmspm(ser, &a, &b, NULL, 0, 1, NULL, NULL, &err), SPMV_ERR_INVALID);
    /* an SpMSpM kernel is not an SpMV one either */
    spmv_matrix m;
    spmv_coo coo;
    void *x = tu_vector_alloc(SPMV_FLOAT64, 20), *y = tu_vector_alloc(SPMV_FLOAT64, 10);
    assert_int_equal(spmv_csr_to_coo(&a, &coo, &err), SPMV_OK);
    assert_int_equal(spmv_matrix_build(&coo, SPMV_FLOAT64, SPMV_FMT_CSR, 32, 0, &m, &err), SPMV_OK);
    assert_int_not_equal(spmv_cpu_run(ser, &m, NULL, x, y, 0, 1, NULL, &err), SPMV_OK);
    spmv_matrix_free(&m);
    spmv_coo_free(&coo);
    free(x);
    free(y);
    spmv_csr_free(&a);
    spmv_csr_free(&b);
    spmv_csr_free(&b32);
}

/* GFLOPS from the multiply-adds actually done, bytes from A, B and C. */
static void test_stats(void **state)
{
    (void)state;
    spmv_csr a, b, c;
    spmv_error err;
    spmv_stats st;
    thin_b(500, 300, SPMV_FLOAT64, &a);
    thin_b(300, 32, SPMV_FLOAT64, &b);
    int64_t madds = 0;
    for (int64_t p = 0; p < a.nnz; p++)
        madds += b.row_ptr[a.col[p] + 1] - b.row_ptr[a.col[p]];
    assert_int_equal(spmv_spmspm_madds(&a, &b), madds);
    assert_true(madds > 0);
    assert_int_equal(spmv_cpu_spmspm(spmv_kernel_find("cpu.spmspm.omp"), &a, &b, NULL, 2, 5, &c, &st, &err),
                     SPMV_OK);
    assert_int_equal(st.runs, 5);
    assert_int_equal(st.warmup, 2);
    assert_true(st.median_ms > 0);
    double want = 2.0 * (double)madds / (st.median_ms * 1e6);
    assert_true(fabs(st.gflops - want) <= 1e-9 * want);
    int64_t bytes = (a.rows + 1) * 4 + a.nnz * 12 + (b.rows + 1) * 4 + b.nnz * 12 + (c.rows + 1) * 4 + c.nnz * 12;
    assert_int_equal(spmv_spmspm_bytes(&a, &b, &c), bytes);
    spmv_csr_free(&a);
    spmv_csr_free(&b);
    spmv_csr_free(&c);
}

/* spmv_csr_sort_rows undoes a shuffle; spmv_csr_compare sees a moved entry. */
static void test_sort_and_compare(void **state)
{
    (void)state;
    spmv_csr a, s;
    spmv_error err;
    double e = -1;
    for (int d = 0; d < 2; d++) {
        thin_b(200, 300, (spmv_dtype)d, &a);
        /* s: a copy of a with each row reversed */
        s = a;
        size_t vs = spmv_dtype_size(a.dtype);
        s.row_ptr = malloc(((size_t)a.rows + 1) * 4);
        s.col = malloc((size_t)a.nnz * 4 + 4);
        s.val = malloc((size_t)a.nnz * vs + vs);
        memcpy(s.row_ptr, a.row_ptr, ((size_t)a.rows + 1) * 4);
        for (int32_t i = 0; i < a.rows; i++)
            for (int32_t p = a.row_ptr[i], q = a.row_ptr[i + 1] - 1; p < a.row_ptr[i + 1]; p++, q--) {
                s.col[q] = a.col[p];
                memcpy((char *)s.val + (size_t)q * vs, (char *)a.val + (size_t)p * vs, vs);
            }
        if (a.nnz > 1)
            assert_int_equal(spmv_csr_compare(&s, &a, &e, &err), SPMV_ERR_SHAPE);
        assert_int_equal(spmv_csr_sort_rows(&s, &err), SPMV_OK);
        assert_int_equal(spmv_csr_compare(&s, &a, &e, &err), SPMV_OK);
        assert_true(e == 0);
        assert_memory_equal(s.val, a.val, (size_t)a.nnz * vs);
        spmv_csr_free(&s);
        assert_int_equal(spmv_spmspm_reference(&a, &(spmv_csr){0}, &s, &err), SPMV_ERR_INVALID);
        spmv_csr_free(&a);
    }
}

static int setup(void **state)
{
    (void)state;
    tu_rng_init(&rng, tu_seed());
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense_reference), cmocka_unit_test(test_random_shapes),
        cmocka_unit_test(test_real_times_thin), cmocka_unit_test(test_empty_shapes),
        cmocka_unit_test(test_wide_b),          cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_stats),           cmocka_unit_test(test_sort_and_compare),
    };
    return cmocka_run_group_tests_name("spmspm", tests, setup, NULL);
}
