/* testutil.c — the shared test helpers declared in testutil.h.
 *
 * Kept independent of the code under test where it matters: the random
 * matrices are built directly as sorted COO (not through a conversion the
 * tests check), comparisons are done in double here rather than with
 * spmv_max_rel_err, and expected.json is read with jansson.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "testutil.h"

/* ------------------------------------------------------------------ seed */

uint64_t tu_seed(void)
{
    /* Test binaries are single processes; caching the seed here keeps
     * every test of one run on the seed that was printed. */
    static uint64_t seed;
    static bool have;
    if (!have) {
        const char *s = getenv("SPMV_SEED");
        seed = s && *s ? strtoull(s, NULL, 0)
                       : ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid() ^ (uint64_t)clock();
        have = true;
        printf("# seed %llu (SPMV_SEED=%llu repeats this run)\n", (unsigned long long)seed,
               (unsigned long long)seed);
        fflush(stdout);
    }
    return seed;
}

void tu_rng_init(tu_rng *r, uint64_t seed) { r->state = seed; }

uint64_t tu_rng_next(tu_rng *r)
{
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double tu_rng_uniform(tu_rng *r) { return (double)(tu_rng_next(r) >> 11) * 0x1.0p-53; }

double tu_rng_value(tu_rng *r)
{
    double v;
    do
        v = 2.0 * tu_rng_uniform(r) - 1.0;
    while (v == 0.0);
    return v;
}

int64_t tu_rng_range(tu_rng *r, int64_t lo, int64_t hi)
{
    if (hi <= lo)
        return lo;
    return lo + (int64_t)(tu_rng_next(r) % (uint64_t)(hi - lo + 1));
}

/* ------------------------------------------------------ random matrices */

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Up to `len` distinct sorted columns of [0, cols) into buf; returns the
 * count. Dense rows use selection sampling (exactly len, sorted by
 * construction); sparse ones draw, sort and drop repeats. */
static int32_t row_columns(tu_rng *r, int32_t cols, int32_t len, int32_t *buf)
{
    if (len <= 0 || cols <= 0)
        return 0;
    if (len > cols)
        len = cols;
    int32_t n = 0;
    if ((int64_t)len * 4 >= cols) {
        for (int32_t j = 0; j < cols && n < len; j++)
            if (tu_rng_uniform(r) * (cols - j) < (double)(len - n))
                buf[n++] = j;
        return n;
    }
    for (int32_t k = 0; k < len; k++)
        buf[k] = (int32_t)tu_rng_range(r, 0, cols - 1);
    qsort(buf, (size_t)len, sizeof *buf, cmp_i32);
    for (int32_t k = 0; k < len; k++)
        if (n == 0 || buf[n - 1] != buf[k])
            buf[n++] = buf[k];
    return n;
}

static int32_t row_length(tu_rng *r, const tu_gen *g, int32_t i)
{
    if (g->dense_rows > 0) {
        int64_t step = g->rows / g->dense_rows;
        if (step > 0 && i % step == step / 2 && i / step < g->dense_rows)
            return g->dense_len;
    }
    if (g->empty_row_frac > 0 && tu_rng_uniform(r) < g->empty_row_frac)
        return 0;
    double len;
    if (g->power_law) /* Pareto with shape 2 and mean mean_per_row, capped */
        len = g->mean_per_row / 2.0 / sqrt(1.0 - tu_rng_uniform(r));
    else
        len = tu_rng_uniform(r) * (2.0 * g->mean_per_row + 1.0);
    return len > g->cols ? g->cols : (int32_t)len;
}

void tu_random_coo_gen(tu_rng *r, const tu_gen *g, spmv_dtype dtype, spmv_coo *out)
{
    int32_t *len = calloc((size_t)g->rows + 1, sizeof *len);
    int32_t *buf = calloc((size_t)g->cols + 1, sizeof *buf);
    assert_non_null(len);
    assert_non_null(buf);
    /* Lengths first (capped), then columns, so the COO is allocated once. */
    int64_t nnz = 0;
    for (int32_t i = 0; i < g->rows; i++)
        nnz += len[i] = row_length(r, g, i);
    spmv_error err;
    assert_int_equal(spmv_coo_alloc(out, g->rows, g->cols, nnz, dtype, &err), SPMV_OK);
    int64_t k = 0;
    for (int32_t i = 0; i < g->rows; i++) {
        int32_t n = row_columns(r, g->cols, len[i], buf);
        for (int32_t j = 0; j < n; j++, k++) {
            out->row[k] = i;
            out->col[k] = buf[j];
            if (dtype == SPMV_FLOAT32)
                ((float *)out->val)[k] = (float)tu_rng_value(r);
            else
                ((double *)out->val)[k] = tu_rng_value(r);
        }
    }
    out->nnz = k; /* repeats dropped: at most the allocated count */
    free(len);
    free(buf);
}

const char *tu_shape_name(tu_shape s)
{
    static const char *const names[TU_SHAPE_COUNT] = {
        "random", "empty-rows", "dense-row", "power-law", "1x1", "n-x-1", "1-x-n", "no-nonzeros",
    };
    return (unsigned)s < TU_SHAPE_COUNT ? names[s] : "?";
}

void tu_random_coo(tu_rng *r, tu_shape shape, int32_t n, spmv_dtype dtype, spmv_coo *out)
{
    if (n < 1)
        n = 1;
    tu_gen g = {.rows = n, .cols = n, .mean_per_row = 4};
    switch (shape) {
    case TU_SHAPE_RANDOM: g.cols = n + n / 3; g.mean_per_row = 8; g.empty_row_frac = 0.1; break;
    case TU_SHAPE_EMPTY_ROWS: g.mean_per_row = 5; g.empty_row_frac = 0.6; break;
    case TU_SHAPE_DENSE_ROW: g.dense_rows = 1; g.dense_len = n; break;
    case TU_SHAPE_POWER_LAW: g.mean_per_row = 6; g.power_law = true; break;
    case TU_SHAPE_1X1: g.rows = g.cols = 1; g.dense_rows = 1; g.dense_len = 1; break;
    case TU_SHAPE_COLUMN: g.cols = 1; g.mean_per_row = 1; g.empty_row_frac = 0.3; break;
    case TU_SHAPE_ROW: g.rows = 1; g.mean_per_row = n / 2.0; break;
    case TU_SHAPE_NO_NONZEROS: g.mean_per_row = 0; g.empty_row_frac = 1; break;
    case TU_SHAPE_COUNT: break;
    }
    tu_random_coo_gen(r, &g, dtype, out);
}

/* Entry k of m's values: uniform in [-1, 1), in m's dtype. */
static void put_random_value(tu_rng *r, spmv_coo *m, int64_t k)
{
    if (m->dtype == SPMV_FLOAT32)
        ((float *)m->val)[k] = (float)tu_rng_value(r);
    else
        ((double *)m->val)[k] = tu_rng_value(r);
}

void tu_window_coo(tu_rng *r, int32_t rows, int32_t cols, int32_t per_row, int32_t span, spmv_dtype dtype,
                   spmv_coo *out)
{
    if (span > cols - 1)
        span = cols - 1;
    int32_t width = span + 1, n = per_row < width ? per_row : width;
    int32_t *buf = calloc((size_t)(n > 2 ? n : 2), sizeof *buf);
    assert_non_null(buf);
    assert_int_equal(spmv_coo_alloc(out, rows, cols, cols > 0 ? (int64_t)rows * n : 0, dtype, NULL), SPMV_OK);
    int64_t k = 0;
    for (int32_t i = 0; i < rows && cols > 0 && n > 0; i++) {
        int32_t lo = (int32_t)tu_rng_range(r, 0, cols - width), m = row_columns(r, width, n, buf);
        buf[0] = 0; /* the window's ends */
        if (m > 1)
            buf[m - 1] = span;
        for (int32_t j = 0; j < m; j++, k++) {
            out->row[k] = i;
            out->col[k] = lo + buf[j];
            put_random_value(r, out, k);
        }
    }
    out->nnz = k;
    free(buf);
}

void tu_block_coo(tu_rng *r, int32_t brows, int32_t bcols, int32_t b, int32_t per_row, int32_t span,
                  spmv_dtype dtype, spmv_coo *out)
{
    spmv_coo pat;
    tu_window_coo(r, brows, bcols, per_row, span, dtype, &pat);
    bool *empty = calloc((size_t)(brows > 0 ? brows : 1), sizeof *empty);
    assert_non_null(empty);
    int64_t kept = 0;
    for (int32_t I = 0; I < brows; I++)
        empty[I] = tu_rng_range(r, 0, 7) == 0;
    for (int64_t k = 0; k < pat.nnz; k++)
        kept += !empty[pat.row[k]];
    assert_int_equal(spmv_coo_alloc(out, brows * b, bcols * b, kept * b * b, dtype, NULL), SPMV_OK);
    int64_t n = 0;
    for (int64_t k0 = 0, k1; k0 < pat.nnz; k0 = k1) { /* block row pat.row[k0]: pattern entries [k0, k1) */
        int32_t I = pat.row[k0];
        for (k1 = k0; k1 < pat.nnz && pat.row[k1] == I; k1++)
            ;
        for (int32_t i = 0; i < b && !empty[I]; i++)
            for (int64_t k = k0; k < k1; k++)
                for (int32_t c = 0; c < b; c++, n++) {
                    out->row[n] = I * b + i;
                    out->col[n] = pat.col[k] * b + c;
                    put_random_value(r, out, n);
                }
    }
    assert_int_equal(n, kept * b * b);
    free(empty);
    spmv_coo_free(&pat);
}

void tu_diagonal_coo(tu_rng *r, int32_t rows, int32_t w, int32_t max_off, spmv_dtype dtype, spmv_coo *out)
{
    int32_t *off = calloc((size_t)(w > 0 ? w : 1), sizeof *off);
    assert_non_null(off);
    assert_true(w >= 0 && w <= max_off + 1);
    int32_t m = row_columns(r, max_off + 1, w, off); /* w distinct offsets in [0, max_off], ascending */
    assert_int_equal(spmv_coo_alloc(out, rows, rows + max_off, (int64_t)rows * m, dtype, NULL), SPMV_OK);
    int64_t k = 0;
    for (int32_t i = 0; i < rows; i++)
        for (int32_t j = 0; j < m; j++, k++) {
            out->row[k] = i;
            out->col[k] = i + off[j];
            put_random_value(r, out, k);
        }
    free(off);
}

void tu_palette_values(tu_rng *r, spmv_coo *m, int32_t distinct)
{
    for (int64_t k = 0; k < m->nnz && distinct > 0; k++) {
        int64_t c = k < distinct ? k : tu_rng_range(r, 0, distinct - 1);
        /* + 0.1: no float64 value is a float32, so F32 never competes */
        double v = (c % 2 ? -1.0 : 1.0) * ((double)(c / 2 + 1) / 4.0 + 0.1);
        if (m->dtype == SPMV_FLOAT32)
            ((float *)m->val)[k] = (float)v;
        else
            ((double *)m->val)[k] = v;
    }
}

static uint64_t mix64(uint64_t k) /* murmur3's finaliser */
{
    k ^= k >> 33;
    k *= UINT64_C(0xff51afd7ed558ccd);
    k ^= k >> 33;
    k *= UINT64_C(0xc4ceb9fe1a85ec53);
    return k ^ (k >> 33);
}

void tu_symmetric_coo(tu_rng *r, const spmv_coo *pattern, int32_t distinct, spmv_coo *out)
{
    int32_t n = pattern->rows > pattern->cols ? pattern->rows : pattern->cols;
    spmv_coo both;
    spmv_csr csr;
    assert_int_equal(spmv_coo_alloc(&both, n, n, 2 * pattern->nnz, SPMV_FLOAT64, NULL), SPMV_OK);
    for (int64_t k = 0; k < pattern->nnz; k++) { /* duplicates (the diagonal twice) summed by coo_to_csr */
        both.row[2 * k] = both.col[2 * k + 1] = pattern->row[k];
        both.col[2 * k] = both.row[2 * k + 1] = pattern->col[k];
        ((double *)both.val)[2 * k] = ((double *)both.val)[2 * k + 1] = 1.0;
    }
    assert_int_equal(spmv_coo_to_csr(&both, SPMV_FLOAT64, &csr, NULL), SPMV_OK);
    assert_int_equal(spmv_csr_to_coo(&csr, out, NULL), SPMV_OK);
    spmv_coo_free(&both);
    spmv_csr_free(&csr);
    uint64_t salt = tu_rng_next(r);
    for (int64_t k = 0; k < out->nnz; k++) {
        uint64_t lo = (uint64_t)(out->row[k] < out->col[k] ? out->row[k] : out->col[k]);
        uint64_t hi = (uint64_t)(out->row[k] < out->col[k] ? out->col[k] : out->row[k]);
        uint64_t h = mix64(salt ^ mix64(lo * UINT64_C(0x9e3779b97f4a7c15) + hi));
        double v;
        if (distinct > 0) {
            int64_t c = (int64_t)(h % (uint64_t)distinct);
            v = (c % 2 ? -1.0 : 1.0) * ((double)(c / 2 + 1) / 4.0 + 0.1);
        } else {
            v = ((double)(h >> 11) / 9007199254740992.0) * 2.0 - 1.0; /* [-1, 1), 53 random bits */
        }
        ((double *)out->val)[k] = v;
    }
}

/* -------------------------------------------------------------- vectors */

void *tu_vector_alloc(spmv_dtype dtype, int64_t n)
{
    assert_true(n >= 0);
    void *v = malloc(n > 0 ? (size_t)n * spmv_dtype_size(dtype) : 1);
    assert_non_null(v);
    return v;
}

static void set_value(void *v, spmv_dtype dtype, int64_t i, double x)
{
    if (dtype == SPMV_FLOAT32)
        ((float *)v)[i] = (float)x;
    else
        ((double *)v)[i] = x;
}

static double get_value(const void *v, spmv_dtype dtype, int64_t i)
{
    return dtype == SPMV_FLOAT32 ? ((const float *)v)[i] : ((const double *)v)[i];
}

void tu_random_vector(tu_rng *r, spmv_dtype dtype, int64_t n, void *out)
{
    for (int64_t i = 0; i < n; i++)
        set_value(out, dtype, i, tu_rng_value(r));
}

void tu_expected_x(spmv_dtype dtype, int64_t n, void *out)
{
    for (int64_t j = 0; j < n; j++)
        set_value(out, dtype, j, 1.0 + (double)(j % 7) / 8.0);
}

void tu_poison(void *v, spmv_dtype dtype, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        set_value(v, dtype, i, NAN);
}

void tu_vector_convert(const void *in, spmv_dtype din, void *out, spmv_dtype dout, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        set_value(out, dout, i, get_value(in, din, i));
}

/* ---------------------------------------------------------- comparison */

/* The first index whose error is the largest (or non-finite). */
static double max_diff(spmv_dtype ydt, const void *y, spmv_dtype rdt, const void *ref, int64_t n,
                       int64_t *where)
{
    double worst = 0;
    *where = -1;
    for (int64_t i = 0; i < n; i++) {
        double a = get_value(y, ydt, i), b = get_value(ref, rdt, i);
        double d = a == b ? 0.0 : fabs(a - b);
        if (isnan(d))
            d = INFINITY;
        if (d > worst || (*where < 0 && d > 0)) {
            worst = d;
            *where = i;
            if (isinf(d))
                break;
        }
    }
    return worst;
}

static double ref_norm(spmv_dtype rdt, const void *ref, int64_t n, tu_norm norm)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
        double b = fabs(get_value(ref, rdt, i));
        if (norm == TU_NORM_2)
            s += b * b;
        else if (b > s)
            s = b;
    }
    return norm == TU_NORM_2 ? sqrt(s) : s;
}

double tu_rel_err(spmv_dtype ydt, const void *y, spmv_dtype rdt, const void *ref, int64_t n, tu_norm norm)
{
    int64_t where;
    double d = max_diff(ydt, y, rdt, ref, n, &where);
    return d / fmax(ref_norm(rdt, ref, n, norm), 1e-300);
}

static void assert_close(const char *what, spmv_dtype ydt, const void *y, spmv_dtype rdt, const void *ref,
                         int64_t n, double scale, const char *scale_name, double bound, const char *file, int line)
{
    int64_t where;
    double d = max_diff(ydt, y, rdt, ref, n, &where);
    double e = d / fmax(scale, 1e-300);
    if (e <= bound)
        return;
    print_error("%s: relative error %.3g above %.3g (of %s %.3g); first worst index %lld: got %.17g, "
                "expected %.17g; SPMV_SEED=%llu\n",
                what, e, bound, scale_name, scale, (long long)where,
                where >= 0 ? get_value(y, ydt, where) : 0.0, where >= 0 ? get_value(ref, rdt, where) : 0.0,
                (unsigned long long)tu_seed());
    _fail(file, line);
}

void tu_assert_close_at(const char *what, spmv_dtype ydt, const void *y, spmv_dtype rdt, const void *ref,
                        int64_t n, tu_norm norm, double bound, const char *file, int line)
{
    assert_close(what, ydt, y, rdt, ref, n, ref_norm(rdt, ref, n, norm),
                 norm == TU_NORM_2 ? "||ref||_2" : "||ref||_inf", bound, file, line);
}

void tu_assert_close_scaled_at(const char *what, spmv_dtype ydt, const void *y, spmv_dtype rdt, const void *ref,
                               int64_t n, double scale, double bound, const char *file, int line)
{
    assert_close(what, ydt, y, rdt, ref, n, scale, "scale", bound, file, line);
}

double tu_vector_norm(spmv_dtype dtype, const void *v, int64_t n, tu_norm norm)
{
    return ref_norm(dtype, v, n, norm);
}

void tu_abs_product(const spmv_coo *a, spmv_dtype xdt, const void *x, double *out)
{
    for (int32_t i = 0; i < a->rows; i++)
        out[i] = 0;
    for (int64_t k = 0; k < a->nnz; k++)
        out[a->row[k]] += fabs(get_value(a->val, a->dtype, k)) * fabs(get_value(x, xdt, a->col[k]));
}

bool tu_coo_equal(const spmv_coo *a, const spmv_coo *b)
{
    if (a->rows != b->rows || a->cols != b->cols || a->nnz != b->nnz || a->dtype != b->dtype) {
        print_error("COO differ: %d x %d nnz %lld %s vs %d x %d nnz %lld %s\n", a->rows, a->cols,
                    (long long)a->nnz, spmv_dtype_name(a->dtype), b->rows, b->cols, (long long)b->nnz,
                    spmv_dtype_name(b->dtype));
        return false;
    }
    size_t vs = spmv_dtype_size(a->dtype);
    for (int64_t k = 0; k < a->nnz; k++)
        if (a->row[k] != b->row[k] || a->col[k] != b->col[k] ||
            memcmp((const char *)a->val + k * vs, (const char *)b->val + k * vs, vs) != 0) {
            print_error("COO differ at entry %lld: (%d, %d, %.17g) vs (%d, %d, %.17g)\n", (long long)k,
                        a->row[k], a->col[k], get_value(a->val, a->dtype, k), b->row[k], b->col[k],
                        get_value(b->val, b->dtype, k));
            return false;
        }
    return true;
}

/* ------------------------------------------------------ shared matrices */

const char *tu_matrices_path(char *buf, size_t len, const char *rel)
{
    const char *root = getenv("SPMV_ROOT");
    snprintf(buf, len, "%s/../shared/matrices/%s", root && *root ? root : ".", rel ? rel : "");
    return buf;
}

static int cmp_expected(const void *a, const void *b)
{
    return strcmp(((const tu_expected *)a)->file, ((const tu_expected *)b)->file);
}

/* One "matrices" member into *e; -1 if a field is missing or wrong. */
static int read_entry(const char *file, json_t *m, tu_expected *e)
{
    json_t *y = json_object_get(m, "y");
    memset(e, 0, sizeof *e);
    snprintf(e->file, sizeof e->file, "%s", file);
    e->rows = json_integer_value(json_object_get(m, "rows"));
    e->cols = json_integer_value(json_object_get(m, "cols"));
    e->nnz = json_integer_value(json_object_get(m, "nnz"));
    e->max_row = json_integer_value(json_object_get(m, "max_row"));
    e->y_norm2 = json_number_value(json_object_get(m, "y_norm2"));
    if (!json_is_array(y) || (int64_t)json_array_size(y) != e->rows || e->rows < 0)
        return -1;
    e->y = malloc((size_t)e->rows * sizeof(double) + 1);
    if (!e->y)
        return -1;
    for (int64_t i = 0; i < e->rows; i++)
        e->y[i] = json_number_value(json_array_get(y, (size_t)i));
    return 0;
}

int32_t tu_longest_row(const spmv_csr *a)
{
    int32_t w = 0;
    for (int32_t i = 0; i < a->rows; i++)
        if (a->row_ptr[i + 1] - a->row_ptr[i] > w)
            w = a->row_ptr[i + 1] - a->row_ptr[i];
    return w;
}

int tu_expected_load(tu_expected **out, size_t *count)
{
    char path[4096];
    json_error_t jerr;
    tu_matrices_path(path, sizeof path, "real/expected.json");
    json_t *root = json_load_file(path, 0, &jerr);
    json_t *ms = json_object_get(root, "matrices");
    tu_expected *e = NULL;
    size_t n = 0;
    *out = NULL;
    *count = 0;
    if (!json_is_object(ms)) {
        print_error("%s: %s\n", path, root ? "no \"matrices\" object" : jerr.text);
        goto fail;
    }
    e = calloc(json_object_size(ms) + 1, sizeof *e);
    if (!e)
        goto fail;
    const char *file;
    json_t *m;
    json_object_foreach(ms, file, m) {
        if (read_entry(file, m, &e[n]) != 0) {
            print_error("%s: entry %s is malformed\n", path, file);
            free(e[n].y);
            goto fail;
        }
        n++;
    }
    qsort(e, n, sizeof *e, cmp_expected);
    json_decref(root);
    *out = e;
    *count = n;
    return 0;
fail:
    tu_expected_free(e, n);
    json_decref(root);
    return -1;
}

void tu_expected_free(tu_expected *e, size_t count)
{
    if (!e)
        return;
    for (size_t i = 0; i < count; i++)
        free(e[i].y);
    free(e);
}

spmv_gpu_ctx *tu_gpu_open(const char **reason)
{
    spmv_gpu_ctx *ctx = NULL;
    spmv_error err = {0};
    if (spmv_gpu_count(reason) <= 0)
        return NULL;
    if (spmv_gpu_ctx_new(0, 0, &ctx, &err) != SPMV_OK) {
        fprintf(stderr, "# GPU context: %s\n", err.message);
        *reason = "the GPU context could not be made";
        return NULL;
    }
    return ctx;
}

tu_gpu TG;

int tu_gpu_setup(void **state)
{
    (void)state;
    tu_rng_init(&TG.rng, tu_seed());
    TG.quick = getenv("SPMV_GPU_QUICK") ? atoi(getenv("SPMV_GPU_QUICK")) : 0;
    TG.ctx = tu_gpu_open(&TG.reason);
    return 0;
}

int tu_gpu_teardown(void **state)
{
    (void)state;
    spmv_gpu_ctx_free(TG.ctx);
    TG.ctx = NULL;
    return 0;
}

/* ------------------------------------------------------- array equality */

bool tu_same_bytes(const char *what, const void *a, const void *b, size_t n)
{
    if (n == 0 || memcmp(a, b, n) == 0)
        return true;
    const unsigned char *x = a, *y = b;
    size_t i = 0;
    while (x[i] == y[i])
        i++;
    print_message("# FAIL %s differs at byte %zu of %zu\n", what, i, n);
    return false;
}

size_t tu_code_size(spmv_vcode mode, size_t vs)
{
    return mode == SPMV_VCODE_RAW ? vs : mode == SPMV_VCODE_F32 ? 4 : mode == SPMV_VCODE_U8 ? 1 : mode == SPMV_VCODE_U16 ? 2 : 0;
}

bool tu_same_values(const char *what, const spmv_packed_values *h, const spmv_packed_values *d, int64_t n,
                    size_t vs)
{
    if (h->mode != d->mode || h->ntable != d->ntable) {
        print_message("# FAIL %s values %s/%d vs device %s/%d\n", what, spmv_vcode_name(h->mode), h->ntable,
                      spmv_vcode_name(d->mode), d->ntable);
        return false;
    }
    return tu_same_bytes(what, h->table, d->table, (size_t)h->ntable * vs) &&
           (h->mode == SPMV_VCODE_CONST || tu_same_bytes(what, h->data, d->data, (size_t)n * tu_code_size(h->mode, vs)));
}

bool tu_same_psell(const char *what, const spmv_psell *h, const spmv_psell *d)
{
    if (h->nslices != d->nslices || h->slots != d->slots) {
        print_message("# FAIL %s PSELL %d slices, %lld slots vs device %d, %lld\n", what, h->nslices,
                      (long long)h->slots, d->nslices, (long long)d->slots);
        return false;
    }
    size_t ns = (size_t)h->nslices;
    return tu_same_bytes(what, h->slot_off, d->slot_off, (ns + 1) * 8) &&
           tu_same_bytes(what, h->idx_off, d->idx_off, (ns + 1) * 8) &&
           tu_same_bytes(what, h->val_off, d->val_off, (ns + 1) * 8) && tu_same_bytes(what, h->idx_bytes, d->idx_bytes, ns) &&
           tu_same_bytes(what, h->base, d->base, (size_t)h->slots / SPMV_PSELL_C * 4) &&
           tu_same_bytes(what, h->idx, d->idx, (size_t)h->idx_off[ns]) &&
           tu_same_values(what, &h->v, &d->v, h->val_off[ns], spmv_dtype_size(h->dtype));
}
