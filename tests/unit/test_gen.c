/* test_gen.c — the seeded matrix generator (engine/gen.c).
 *
 * Every kind is built at random sizes drawn afresh each run (the seed is
 * printed; SPMV_SEED repeats a run) and checked against its shape and
 * non-zero formula, worked out here independently of gen.c; every output
 * must be sorted COO without duplicates, the same for the same seed whatever
 * the thread count, different for another seed, and Poisson must be
 * symmetric with its stencil values. Sizes past the 32-bit limits must be
 * refused before anything is allocated from them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <omp.h>

#include "spmv.h"
#include "testutil.h"

/* The run's draws (sizes, seeds), from the run's seed (tu_seed). */
static uint64_t test_seed;
static tu_rng draws;

static uint64_t draw(void) { return tu_rng_next(&draws); }
static int64_t draw_in(int64_t lo, int64_t hi) { return tu_rng_range(&draws, lo, hi); }

static int setup_seed(void **state)
{
    (void)state;
    test_seed = tu_seed();
    tu_rng_init(&draws, test_seed);
    return 0;
}

static spmv_coo gen_ok(spmv_gen_kind kind, int64_t n, int32_t per_row, int64_t dense_len, uint64_t seed)
{
    spmv_gen_spec spec = {.kind = kind, .n = n, .per_row = per_row, .dense_len = dense_len, .seed = seed};
    spmv_coo m;
    spmv_error err = {0};
    int rc = spmv_gen(&spec, &m, &err);
    if (rc != SPMV_OK)
        fail_msg("spmv_gen(%s, n=%lld, per_row=%d, dense_len=%lld): %s (SPMV_SEED=%llu)",
                 spmv_gen_kind_name(kind), (long long)n, per_row, (long long)dense_len, err.message,
                 (unsigned long long)test_seed);
    assert_int_equal(m.dtype, SPMV_FLOAT64);
    return m;
}

/* Sorted by row then column, no duplicates, indices in range, values finite. */
static void assert_sorted_coo(const spmv_coo *m)
{
    const double *v = m->val;
    for (int64_t k = 0; k < m->nnz; k++) {
        assert_in_range(m->row[k], 0, m->rows - 1);
        assert_in_range(m->col[k], 0, m->cols - 1);
        assert_true(v[k] == v[k] && v[k] >= -1e300 && v[k] <= 1e300);
        if (k > 0) {
            int before = m->row[k - 1] < m->row[k] ||
                         (m->row[k - 1] == m->row[k] && m->col[k - 1] < m->col[k]);
            if (!before)
                fail_msg("entry %lld (%d,%d) is not after (%d,%d) (SPMV_SEED=%llu)", (long long)k, m->row[k],
                         m->col[k], m->row[k - 1], m->col[k - 1], (unsigned long long)test_seed);
        }
    }
}

/* Entries per row, counted from the COO. */
static int64_t *row_counts(const spmv_coo *m)
{
    int64_t *c = calloc((size_t)m->rows + 1, sizeof *c);
    assert_non_null(c);
    for (int64_t k = 0; k < m->nnz; k++)
        c[m->row[k]]++;
    return c;
}

/* Index of entry (i, j), or -1; the COO is sorted, so binary search. */
static int64_t find_entry(const spmv_coo *m, int32_t i, int32_t j)
{
    int64_t lo = 0, hi = m->nnz;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (m->row[mid] < i || (m->row[mid] == i && m->col[mid] < j))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < m->nnz && m->row[lo] == i && m->col[lo] == j ? lo : -1;
}

static void assert_symmetric(const spmv_coo *m)
{
    const double *v = m->val;
    for (int64_t k = 0; k < m->nnz; k++) {
        int64_t t = find_entry(m, m->col[k], m->row[k]);
        assert_true(t >= 0);
        assert_true(v[t] == v[k]);
    }
}

static int coo_equal(const spmv_coo *a, const spmv_coo *b)
{
    return a->rows == b->rows && a->cols == b->cols && a->nnz == b->nnz &&
           memcmp(a->row, b->row, (size_t)a->nnz * sizeof *a->row) == 0 &&
           memcmp(a->col, b->col, (size_t)a->nnz * sizeof *a->col) == 0 &&
           memcmp(a->val, b->val, (size_t)a->nnz * sizeof(double)) == 0;
}

static void assert_values_in_unit_range(const spmv_coo *m)
{
    const double *v = m->val;
    for (int64_t k = 0; k < m->nnz; k++)
        assert_true(v[k] >= -1.0 && v[k] <= 1.0);
}

/* ------------------------------------------------------------------ tests */

static void test_kind_names(void **state)
{
    (void)state;
    spmv_gen_kind k;
    const spmv_gen_kind all[] = {SPMV_GEN_POISSON2D, SPMV_GEN_POISSON3D, SPMV_GEN_UNIFORM,
                                 SPMV_GEN_POWERLAW, SPMV_GEN_BANDED_DENSE_ROW, SPMV_GEN_LP,
                                 SPMV_GEN_STENCIL27, SPMV_GEN_GRAPH_UNIFORM, SPMV_GEN_GRAPH_POWERLAW,
                                 SPMV_GEN_BAND, SPMV_GEN_RANDOM};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        assert_int_equal(spmv_gen_kind_parse(spmv_gen_kind_name(all[i]), &k), SPMV_OK);
        assert_int_equal(k, all[i]);
    }
    assert_string_equal(spmv_gen_kind_name(SPMV_GEN_POISSON3D), "poisson3d");
    assert_int_equal(spmv_gen_kind_parse("Uniform", &k), SPMV_OK);
    assert_int_equal(k, SPMV_GEN_UNIFORM);
    assert_int_equal(spmv_gen_kind_parse("poisson4d", &k), SPMV_ERR_INVALID);
}

static void test_poisson2d(void **state)
{
    (void)state;
    int64_t n = draw_in(1, 60);
    spmv_coo m = gen_ok(SPMV_GEN_POISSON2D, n, 0, 0, draw());
    assert_int_equal(m.rows, n * n);
    assert_int_equal(m.cols, n * n);
    assert_int_equal(m.nnz, 5 * n * n - 4 * n);
    assert_sorted_coo(&m);
    assert_symmetric(&m);
    const double *v = m.val;
    for (int64_t k = 0; k < m.nnz; k++)
        assert_true(v[k] == (m.row[k] == m.col[k] ? 4.0 : -1.0));
    spmv_coo_free(&m);
}

static void test_poisson3d(void **state)
{
    (void)state;
    int64_t n = draw_in(1, 20);
    spmv_coo m = gen_ok(SPMV_GEN_POISSON3D, n, 0, 0, draw());
    assert_int_equal(m.rows, n * n * n);
    assert_int_equal(m.nnz, 7 * n * n * n - 6 * n * n);
    assert_sorted_coo(&m);
    assert_symmetric(&m);
    const double *v = m.val;
    for (int64_t k = 0; k < m.nnz; k++) {
        assert_true(v[k] == (m.row[k] == m.col[k] ? 6.0 : -1.0));
        /* Neighbours differ by 1, n or n^2 only. */
        int64_t d = llabs((long long)m.row[k] - m.col[k]);
        assert_true(d == 0 || d == 1 || d == n || d == n * n);
    }
    spmv_coo_free(&m);
}

/* The 27-point stencil: every neighbour within one step along each axis,
 * (3n - 2)^3 entries, 26 on the diagonal and -1 elsewhere, symmetric. */
static void test_stencil27(void **state)
{
    (void)state;
    int64_t n = draw_in(1, 16);
    spmv_coo m = gen_ok(SPMV_GEN_STENCIL27, n, 0, 0, draw());
    assert_int_equal(m.rows, n * n * n);
    assert_int_equal(m.nnz, (3 * n - 2) * (3 * n - 2) * (3 * n - 2));
    assert_sorted_coo(&m);
    assert_symmetric(&m);
    for (int64_t k = 0; k < m.nnz; k++) {
        int64_t i = m.row[k], j = m.col[k];
        assert_true(((const double *)m.val)[k] == (i == j ? 26.0 : -1.0));
        int64_t da = llabs((long long)(i / (n * n) - j / (n * n))), db = llabs((long long)((i / n) % n - (j / n) % n)),
                dc = llabs((long long)(i % n - j % n));
        assert_true(da <= 1 && db <= 1 && dc <= 1);
    }
    int64_t *c = row_counts(&m); /* an interior point has all 27 */
    if (n >= 3)
        assert_int_equal(c[n * n + n + 1], 27);
    assert_int_equal(c[0], n == 1 ? 1 : 8); /* a corner has 2 x 2 x 2 */
    free(c);
    spmv_coo_free(&m);
}

/* A graph kind is its weighted twin's pattern, every value 1. */
static void test_graphs(void **state)
{
    (void)state;
    const spmv_gen_kind graph[] = {SPMV_GEN_GRAPH_UNIFORM, SPMV_GEN_GRAPH_POWERLAW},
                        twin[] = {SPMV_GEN_UNIFORM, SPMV_GEN_POWERLAW};
    for (int t = 0; t < 2; t++) {
        int64_t n = draw_in(1000, 20000);
        int32_t p = (int32_t)draw_in(1, 24);
        uint64_t seed = draw();
        spmv_coo g = gen_ok(graph[t], n, p, 0, seed), w = gen_ok(twin[t], n, p, 0, seed);
        assert_int_equal(g.nnz, w.nnz);
        assert_memory_equal(g.row, w.row, (size_t)g.nnz * sizeof *g.row);
        assert_memory_equal(g.col, w.col, (size_t)g.nnz * sizeof *g.col);
        int64_t ones = 0, weighted_ones = 0;
        for (int64_t k = 0; k < g.nnz; k++) {
            ones += ((const double *)g.val)[k] == 1.0;
            weighted_ones += ((const double *)w.val)[k] == 1.0;
        }
        assert_int_equal(ones, g.nnz);
        assert_true(weighted_ones < w.nnz || w.nnz == 0);
        spmv_coo_free(&g);
        spmv_coo_free(&w);
    }
}

/* Both sampling paths: sparse rows (draw, sort, top up) and dense rows
 * (selection sampling), and the extremes 0 and n. */
static void test_uniform(void **state)
{
    (void)state;
    int64_t n = draw_in(1, 3000);
    const int32_t per_rows[] = {0, (int32_t)draw_in(0, n / 8), (int32_t)draw_in(n / 8, n), (int32_t)n};
    for (size_t t = 0; t < sizeof per_rows / sizeof per_rows[0]; t++) {
        int32_t p = per_rows[t];
        spmv_coo m = gen_ok(SPMV_GEN_UNIFORM, n, p, 0, draw());
        assert_int_equal(m.rows, n);
        assert_int_equal(m.cols, n);
        assert_int_equal(m.nnz, n * p);
        assert_sorted_coo(&m);
        assert_values_in_unit_range(&m);
        int64_t *c = row_counts(&m);
        for (int64_t i = 0; i < n; i++)
            assert_int_equal(c[i], p);
        free(c);
        spmv_coo_free(&m);
    }
}

/* random: rows x cols with exactly nnz entries (cols in per_row's slot,
 * nnz in dense_len's), no duplicates, columns in range, sorted, values in
 * [-1, 1); rectangular both ways, empty, full, one row, one column; the
 * same for the same seed whatever the thread count, another for another
 * seed; row lengths spread as a uniform placement's (mean nnz/rows, no row
 * past cols); bad shapes refused. */
static void test_random(void **state)
{
    (void)state;
    int threads = omp_get_max_threads();
    for (int t = 0; t < 8; t++) {
        int64_t rows = t == 2 ? 1 : draw_in(1, 3000), cols = t == 3 ? 1 : draw_in(1, 3000);
        int64_t nnz = t == 0 ? 0 : t == 1 ? rows * cols : draw_in(0, rows * cols < 200000 ? rows * cols : 200000);
        uint64_t seed = draw();
        omp_set_num_threads(1);
        spmv_coo m = gen_ok(SPMV_GEN_RANDOM, rows, (int32_t)cols, nnz, seed);
        omp_set_num_threads(threads > 1 ? threads : 2);
        spmv_coo same = gen_ok(SPMV_GEN_RANDOM, rows, (int32_t)cols, nnz, seed);
        omp_set_num_threads(threads);
        assert_int_equal(m.rows, rows);
        assert_int_equal(m.cols, cols);
        assert_int_equal(m.nnz, nnz);
        assert_sorted_coo(&m); /* sorted strictly: no duplicate (i, j) */
        assert_values_in_unit_range(&m);
        assert_true(coo_equal(&m, &same));
        spmv_coo other = gen_ok(SPMV_GEN_RANDOM, rows, (int32_t)cols, nnz, seed + 1);
        if (nnz > 0 && nnz < rows * cols) /* empty and full matrices have one pattern; values still differ */
            assert_false(coo_equal(&m, &other));
        spmv_coo_free(&m);
        spmv_coo_free(&same);
        spmv_coo_free(&other);
    }
    /* the study's 30000 x 20000 with 6 M entries: counted exactly without
     * building; a 3000 x 2000 of 60000 built, its rows ~ binomial(60000, 1/3000) */
    spmv_gen_spec big = {.kind = SPMV_GEN_RANDOM, .n = 30000, .per_row = 20000, .dense_len = 6000000, .seed = draw()};
    int64_t count = 0, r0 = 0, c0 = 0;
    spmv_error err = {0};
    assert_int_equal(spmv_gen_count(&big, &count, &err), SPMV_OK);
    assert_int_equal(count, 6000000);
    assert_int_equal(spmv_gen_shape(&big, &r0, &c0, &err), SPMV_OK);
    assert_true(r0 == 30000 && c0 == 20000);
    spmv_coo m = gen_ok(SPMV_GEN_RANDOM, 3000, 2000, 60000, draw());
    int64_t *c = row_counts(&m), lo = INT64_MAX, hi = 0;
    for (int64_t i = 0; i < 3000; i++) {
        lo = c[i] < lo ? c[i] : lo;
        hi = c[i] > hi ? c[i] : hi;
    }
    if (lo < 1 || hi > 45 || hi - lo < 8) /* mean 20, sd 4.5: 3000 rows all within 20 +- 19, yet not all equal */
        fail_msg("random 3000 x 2000, 60000: row lengths %lld..%lld (SPMV_SEED=%llu)", (long long)lo, (long long)hi,
                 (unsigned long long)test_seed);
    free(c);
    spmv_coo_free(&m);
    /* refused: no columns, more entries than places, negative nnz */
    spmv_gen_spec bad = {.kind = SPMV_GEN_RANDOM, .n = 10, .per_row = 0, .dense_len = 5, .seed = 1};
    assert_int_equal(spmv_gen(&bad, &m, &err), SPMV_ERR_INVALID);
    assert_non_null(strstr(err.message, "cols"));
    bad.per_row = 10;
    bad.dense_len = 101;
    assert_int_equal(spmv_gen(&bad, &m, &err), SPMV_ERR_INVALID);
    assert_non_null(strstr(err.message, "rows x cols = 100"));
    bad.dense_len = -1;
    assert_int_equal(spmv_gen_count(&bad, &count, &err), SPMV_ERR_INVALID);
}

static void test_powerlaw(void **state)
{
    (void)state;
    int64_t n = draw_in(100000, 200000);
    int32_t p = (int32_t)draw_in(4, 32);
    spmv_coo m = gen_ok(SPMV_GEN_POWERLAW, n, p, 0, draw());
    assert_int_equal(m.rows, n);
    assert_int_equal(m.cols, n);
    assert_sorted_coo(&m);
    assert_values_in_unit_range(&m);
    int64_t *c = row_counts(&m);
    int64_t longest = 0;
    for (int64_t i = 0; i < n; i++)
        longest = c[i] > longest ? c[i] : longest;
    free(c);
    double mean = (double)m.nnz / (double)n;
    printf("# powerlaw n=%lld per_row=%d: mean %.2f, longest row %lld\n", (long long)n, p, mean,
           (long long)longest);
    /* The mean is near per_row and the tail is heavy: with shape 1.5 the
     * longest of 10^5 rows is around per_row * 10^(10/3) / 3, far beyond
     * any light-tailed distribution. Both bounds are loose. */
    assert_true(mean > 0.8 * p && mean < 1.2 * p);
    assert_true(longest > 50 * p);
    spmv_coo_free(&m);

    /* Rows are capped at the column count. */
    m = gen_ok(SPMV_GEN_POWERLAW, 50, 50, 0, draw());
    assert_sorted_coo(&m);
    assert_true(m.nnz <= 50 * 50);
    spmv_coo_free(&m);
}

static int64_t band_len(int64_t n, int64_t h, int64_t i)
{
    int64_t lo = i - h, hi = i + h;
    if (lo < 0) lo = 0;
    if (hi > n - 1) hi = n - 1;
    return hi - lo + 1;
}

static void test_banded_dense_row(void **state)
{
    (void)state;
    int64_t n = draw_in(1, 5000);
    int32_t p = (int32_t)draw_in(0, 40);
    int64_t dense = draw_in(1, n);
    spmv_coo m = gen_ok(SPMV_GEN_BANDED_DENSE_ROW, n, p, dense, draw());
    int64_t h = p / 2, expect = 0, mid = n / 2;
    for (int64_t i = 0; i < n; i++)
        expect += i == mid ? dense : band_len(n, h, i);
    assert_int_equal(m.rows, n);
    assert_int_equal(m.cols, n);
    assert_int_equal(m.nnz, expect);
    assert_sorted_coo(&m);
    assert_values_in_unit_range(&m);
    for (int64_t k = 0; k < m.nnz; k++)
        if (m.row[k] != mid)
            assert_true(llabs((long long)m.row[k] - m.col[k]) <= h);
    int64_t *c = row_counts(&m);
    assert_int_equal(c[mid], dense);
    free(c);
    spmv_coo_free(&m);

    /* dense_len 0: a plain band. */
    m = gen_ok(SPMV_GEN_BANDED_DENSE_ROW, n, p, 0, draw());
    expect = 0;
    for (int64_t i = 0; i < n; i++)
        expect += band_len(n, h, i);
    assert_int_equal(m.nnz, expect);
    spmv_coo_free(&m);
}

static void test_lp(void **state)
{
    (void)state;
    int64_t n = draw_in(1, 400);
    int32_t p = (int32_t)draw_in(0, n < 6 ? n : 6);
    spmv_coo m = gen_ok(SPMV_GEN_LP, n, p, 0, draw());
    int64_t dense_rows = (n + 7) / 8, dense_struct = n / 2 > p ? n / 2 : p;
    assert_int_equal(m.rows, n);
    assert_int_equal(m.cols, 2 * n);
    assert_true(m.rows < m.cols);
    assert_int_equal(m.nnz, (n - dense_rows) * (p + 1) + dense_rows * (dense_struct + 1));
    assert_sorted_coo(&m);
    /* Each row ends with its slack column n + i, value 1. */
    const double *v = m.val;
    for (int64_t k = 0; k < m.nnz; k++) {
        int last = k == m.nnz - 1 || m.row[k + 1] != m.row[k];
        if (last) {
            assert_int_equal(m.col[k], n + m.row[k]);
            assert_true(v[k] == 1.0);
        } else {
            assert_true(m.col[k] < n);
        }
    }
    spmv_coo_free(&m);
}

/* Same seed: same matrix, with one thread or all; another seed: another
 * matrix (for the kinds with random content). */
static void test_determinism(void **state)
{
    (void)state;
    const spmv_gen_kind kinds[] = {SPMV_GEN_UNIFORM, SPMV_GEN_POWERLAW, SPMV_GEN_BANDED_DENSE_ROW, SPMV_GEN_LP,
                                   SPMV_GEN_POISSON2D, SPMV_GEN_GRAPH_POWERLAW};
    int threads = omp_get_max_threads();
    for (size_t t = 0; t < sizeof kinds / sizeof kinds[0]; t++) {
        int64_t n = draw_in(20000, 40000);
        if (kinds[t] == SPMV_GEN_POISSON2D)
            n = draw_in(50, 150);
        int32_t p = kinds[t] == SPMV_GEN_LP ? 4 : 12;
        uint64_t seed = draw();
        omp_set_num_threads(1);
        spmv_coo a = gen_ok(kinds[t], n, p, n / 3, seed);
        omp_set_num_threads(threads > 1 ? threads : 2);
        spmv_coo b = gen_ok(kinds[t], n, p, n / 3, seed);
        omp_set_num_threads(threads);
        assert_true(coo_equal(&a, &b));
        spmv_coo c = gen_ok(kinds[t], n, p, n / 3, seed + 1);
        if (kinds[t] == SPMV_GEN_POISSON2D) /* no randomness in a stencil */
            assert_true(coo_equal(&a, &c));
        else
            assert_false(coo_equal(&a, &c));
        spmv_coo_free(&a);
        spmv_coo_free(&b);
        spmv_coo_free(&c);
    }
}

/* What spmv-gen writes reads back as the same matrix (full-precision values). */
static void test_write_read_round_trip(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_gen.XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/m.mtx", dir);
    spmv_coo a = gen_ok(SPMV_GEN_POWERLAW, draw_in(100, 3000), 8, 0, draw()), b;
    spmv_error err = {0};
    assert_int_equal(spmv_mm_write_file(path, &a, &err), SPMV_OK);
    assert_int_equal(spmv_mm_read_file(path, NULL, &b, NULL, &err), SPMV_OK);
    remove(path);
    rmdir(dir);
    assert_true(coo_equal(&a, &b));
    spmv_coo_free(&a);
    spmv_coo_free(&b);
}

static void expect_refused(spmv_gen_kind kind, int64_t n, int32_t per_row, int64_t dense_len, int status)
{
    spmv_gen_spec spec = {.kind = kind, .n = n, .per_row = per_row, .dense_len = dense_len, .seed = 1};
    spmv_coo m;
    spmv_error err = {0};
    memset(&m, 0xAB, sizeof m); /* spmv_gen must leave it empty on failure */
    int rc = spmv_gen(&spec, &m, &err);
    if (rc != status)
        fail_msg("spmv_gen(%s, n=%lld, per_row=%d, dense_len=%lld) returned %d, expected %d",
                 spmv_gen_kind_name(kind), (long long)n, per_row, (long long)dense_len, rc, status);
    assert_int_equal(err.status, status);
    assert_true(strlen(err.message) > 0);
    assert_null(m.row);
    assert_null(m.col);
    assert_null(m.val);
}

static void test_limits(void **state)
{
    (void)state;
    /* Rows past 2^31 - 1. */
    expect_refused(SPMV_GEN_POISSON2D, 46341, 0, 0, SPMV_ERR_LIMIT);
    expect_refused(SPMV_GEN_POISSON3D, 1291, 0, 0, SPMV_ERR_LIMIT);
    expect_refused(SPMV_GEN_UNIFORM, (int64_t)INT32_MAX + 1, 1, 0, SPMV_ERR_LIMIT);
    expect_refused(SPMV_GEN_LP, (int64_t)INT32_MAX / 2 + 1, 1, 0, SPMV_ERR_LIMIT);
    expect_refused(SPMV_GEN_POISSON2D, INT64_MAX, 0, 0, SPMV_ERR_LIMIT);
    /* Rows fit, non-zeros do not. */
    expect_refused(SPMV_GEN_POISSON3D, 1290, 0, 0, SPMV_ERR_LIMIT);
    expect_refused(SPMV_GEN_POISSON2D, 46340, 0, 0, SPMV_ERR_LIMIT);
    expect_refused(SPMV_GEN_UNIFORM, 1000000, 3000, 0, SPMV_ERR_LIMIT);
    expect_refused(SPMV_GEN_UNIFORM, INT32_MAX, INT32_MAX, 0, SPMV_ERR_LIMIT);
    /* Bad arguments. */
    expect_refused(SPMV_GEN_UNIFORM, 0, 1, 0, SPMV_ERR_INVALID);
    expect_refused(SPMV_GEN_UNIFORM, -5, 1, 0, SPMV_ERR_INVALID);
    expect_refused(SPMV_GEN_UNIFORM, 10, 11, 0, SPMV_ERR_INVALID);
    expect_refused(SPMV_GEN_UNIFORM, 10, -1, 0, SPMV_ERR_INVALID);
    expect_refused(SPMV_GEN_POWERLAW, 10, 11, 0, SPMV_ERR_INVALID);
    expect_refused(SPMV_GEN_BANDED_DENSE_ROW, 10, 3, 11, SPMV_ERR_INVALID);
    expect_refused(SPMV_GEN_BANDED_DENSE_ROW, 10, 3, -1, SPMV_ERR_INVALID);
    expect_refused((spmv_gen_kind)99, 10, 3, 0, SPMV_ERR_INVALID);
    spmv_error err = {0};
    spmv_coo m;
    assert_int_equal(spmv_gen(NULL, &m, &err), SPMV_ERR_INVALID);
}

/* spmv_gen_csr: for every kind, both dtypes, both offset widths, the CSR
 * spmv_gen's COO converts to (values rounded once for float32); the band's
 * entries follow spmv_band_value; max_nnz refuses before allocating. */
static void test_gen_csr(void **state)
{
    (void)state;
    static const spmv_gen_kind kinds[] = {SPMV_GEN_POISSON2D, SPMV_GEN_POISSON3D, SPMV_GEN_UNIFORM,
                                          SPMV_GEN_POWERLAW, SPMV_GEN_BANDED_DENSE_ROW, SPMV_GEN_LP,
                                          SPMV_GEN_STENCIL27, SPMV_GEN_GRAPH_UNIFORM, SPMV_GEN_GRAPH_POWERLAW,
                                          SPMV_GEN_BAND, SPMV_GEN_RANDOM};
    spmv_error err = {0};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (int d = 0; d < 2; d++)
            for (int wide = 0; wide < 2; wide++) {
                bool grid = kinds[k] == SPMV_GEN_POISSON2D || kinds[k] == SPMV_GEN_POISSON3D ||
                            kinds[k] == SPMV_GEN_STENCIL27;
                spmv_gen_spec spec = {.kind = kinds[k], .n = grid ? draw_in(2, 12) : draw_in(20, 400),
                                      .seed = draw()};
                spmv_gen_defaults(&spec, true, false, true);
                spec.per_row = (int32_t)draw_in(1, kinds[k] == SPMV_GEN_BAND ? 41 : 12);
                spmv_coo coo = gen_ok(spec.kind, spec.n, spec.per_row, spec.dense_len, spec.seed);
                spmv_csr want, got;
                assert_int_equal(spmv_coo_to_csr(&coo, (spmv_dtype)d, &want, &err), SPMV_OK);
                if (spmv_gen_csr(&spec, (spmv_dtype)d, wide, INT64_MAX, &got, &err) != SPMV_OK)
                    fail_msg("spmv_gen_csr(%s): %s (SPMV_SEED=%llu)", spmv_gen_kind_name(spec.kind), err.message,
                             (unsigned long long)test_seed);
                assert_int_equal(spmv_csr_wide(&got), wide);
                assert_int_equal(got.rows, want.rows);
                assert_int_equal(got.cols, want.cols);
                assert_int_equal(got.nnz, want.nnz);
                int64_t counted = -1; /* the count before anything is allocated is the build's */
                assert_int_equal(spmv_gen_count(&spec, &counted, &err), SPMV_OK);
                assert_int_equal(counted, got.nnz);
                for (int32_t i = 0; i <= got.rows; i++)
                    assert_int_equal(spmv_csr_row_begin(&got, i), want.row_ptr[i]);
                assert_memory_equal(got.col, want.col, (size_t)got.nnz * 4);
                assert_memory_equal(got.val, want.val, (size_t)got.nnz * spmv_dtype_size((spmv_dtype)d));
                if (spec.kind == SPMV_GEN_BAND)
                    for (int32_t i = 0; i < got.rows; i++)
                        for (int64_t q = spmv_csr_row_begin(&got, i); q < spmv_csr_row_begin(&got, i + 1); q++) {
                            double v = d == SPMV_FLOAT64 ? ((double *)got.val)[q] : ((float *)got.val)[q];
                            assert_true(v == spmv_band_value(i, got.col[q]));
                            assert_true(got.col[q] >= i - spec.per_row / 2 && got.col[q] <= i + spec.per_row / 2);
                        }
                spmv_csr_free(&got);
                spmv_csr_free(&want);
                spmv_coo_free(&coo);
            }
    /* past max_nnz: refused from the spec (band: its count by formula) or after pass 1 (powerlaw) */
    spmv_gen_spec band = {.kind = SPMV_GEN_BAND, .n = INT32_MAX, .per_row = 65, .seed = 1};
    spmv_csr c;
    assert_int_equal(spmv_gen_csr(&band, SPMV_FLOAT32, false, INT64_C(1) << 36, &c, &err), SPMV_ERR_LIMIT);
    assert_non_null(strstr(err.message, "allowed"));
    /* issue 33: lp and banded_dense_row allocated 8 bytes a row before they
     * counted (8.45 GB for this one); now their count is a formula */
    spmv_gen_spec lp = {.kind = SPMV_GEN_LP, .n = 1073741823, .per_row = 1, .seed = 1};
    double t0 = spmv_now_ms();
    assert_int_equal(spmv_gen_csr(&lp, SPMV_FLOAT64, false, INT64_C(1) << 36, &c, &err), SPMV_ERR_LIMIT);
    spmv_gen_spec bdr = {.kind = SPMV_GEN_BANDED_DENSE_ROW, .n = INT32_MAX, .per_row = 65, .dense_len = 1000, .seed = 1};
    assert_int_equal(spmv_gen_csr(&bdr, SPMV_FLOAT64, false, INT64_C(1) << 36, &c, &err), SPMV_ERR_LIMIT);
    assert_true(spmv_now_ms() - t0 < 1000.0); /* a formula, not a pass over 2^31 rows */
    spmv_gen_spec pl = {.kind = SPMV_GEN_POWERLAW, .n = 1000, .per_row = 8, .seed = 3};
    assert_int_equal(spmv_gen_csr(&pl, SPMV_FLOAT64, false, 100, &c, &err), SPMV_ERR_LIMIT);
    assert_int_equal(spmv_gen_csr(&pl, (spmv_dtype)7, false, 100, &c, &err), SPMV_ERR_INVALID);
}

/* spmv_random_vector: one stream per seed, in [-1, 1), float32 the
 * rounding of float64; different seeds give different vectors. */
static void test_random_vector(void **state)
{
    (void)state;
    const int64_t n = 10000;
    uint64_t seed = tu_seed();
    double *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    float *f = malloc((size_t)n * sizeof *f);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(f);
    spmv_random_vector(SPMV_FLOAT64, n, seed, a);
    spmv_random_vector(SPMV_FLOAT64, n, seed, b);
    assert_memory_equal(a, b, (size_t)n * sizeof *a);
    spmv_random_vector(SPMV_FLOAT32, n, seed, f);
    int64_t distinct = 0, negative = 0;
    for (int64_t i = 0; i < n; i++) {
        assert_true(a[i] >= -1.0 && a[i] < 1.0);
        assert_true(f[i] == (float)a[i]);
        negative += a[i] < 0;
        distinct += i > 0 && a[i] != a[i - 1];
    }
    assert_true(negative > n / 3 && negative < 2 * n / 3);
    assert_true(distinct > n - 10);
    spmv_random_vector(SPMV_FLOAT64, n, seed + 1, b);
    assert_true(memcmp(a, b, (size_t)n * sizeof *a) != 0);
    spmv_random_vector(SPMV_FLOAT64, 4, 0, a);   /* seed 0 counts as 1 */
    spmv_random_vector(SPMV_FLOAT64, 4, 1, b);
    assert_memory_equal(a, b, 4 * sizeof *a);
    free(a);
    free(b);
    free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_vector),
        cmocka_unit_test(test_kind_names),       cmocka_unit_test(test_poisson2d),
        cmocka_unit_test(test_poisson3d),        cmocka_unit_test(test_uniform),
        cmocka_unit_test(test_powerlaw),         cmocka_unit_test(test_banded_dense_row),
        cmocka_unit_test(test_lp),               cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_limits),           cmocka_unit_test(test_write_read_round_trip),
        cmocka_unit_test(test_stencil27),        cmocka_unit_test(test_graphs),
        cmocka_unit_test(test_gen_csr),          cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, setup_seed, NULL);
}
