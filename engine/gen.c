/* gen.c — seeded generator of large sparse matrices for benchmarks and tests.
 *
 * spmv_gen() builds, as sorted float64 COO, matrices shaped like those of the
 * published SpMV studies: 2-D and 3-D Poisson stencils, a 3-D 27-point
 * stencil, uniform random rows, power-law row lengths, a band with one
 * dense row, a tiny LP-like rectangular matrix, the two random patterns
 * again with every value 1 (unweighted graphs: what pattern-only uploads
 * look like), and `random`: M x N with exactly Z entries at uniformly
 * random places (the CSR study's 30000 x 20000 with 6 M: docs/kernels.md,
 * the studies' items). bench-cpu (tools/bench-cpu.c) builds its set in memory
 * with it, spmv-gen (tools/spmv-gen.c) writes .mtx files from it, and the
 * unit tests draw random shapes from it. spmv_random_vector (at the end)
 * is the one seeded x that the bench route, tuning and the benchmark tools
 * share, so their timings run on the same inputs.
 *
 * Determinism: every row draws from its own splitmix64 stream whose state is
 * a hash of (seed, kind, row). Output therefore depends on the seed only,
 * never on the thread count or on the order rows are filled in, and rows can
 * be built in parallel. splitmix64 (Steele, Lea, Flood 2014; the seeder of
 * xoshiro) is used rather than rand(): it is fast, has a 64-bit state we can
 * derive per row, and is the same on every libc.
 *
 * Speed: the matrix is built in two passes over the rows. Pass 1 works out
 * every row's length (from the row's stream where it is random), a prefix sum
 * turns lengths into offsets and checks the total against the 32-bit limit
 * before anything large is allocated, and pass 2 writes each row straight
 * into its slot in sorted order. No global sort is needed, so ~100 M
 * non-zeros take seconds.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "spmv.h"

/* ------------------------------------------------------------ random bits */

typedef struct gen_rng {
    uint64_t state;
} gen_rng;

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rng_next(gen_rng *r)
{
    r->state += 0x9E3779B97F4A7C15ull;
    return mix64(r->state);
}

/* The stream of one row. Hashing (rather than offsetting the state by
 * row * golden ratio) keeps the streams of neighbouring rows from being
 * shifted copies of one another. */
static gen_rng rng_for_row(uint64_t seed, spmv_gen_kind kind, int64_t row)
{
    gen_rng r;
    r.state = mix64(mix64(seed ^ ((uint64_t)kind << 56)) ^ mix64((uint64_t)row + 1));
    return r;
}

/* Uniform integer in [0, n), n <= 2^32 (Lemire's multiply-shift; the bias is
 * below 2^-32 and irrelevant here). */
static int32_t rng_below(gen_rng *r, int64_t n)
{
    return (int32_t)(((rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

/* Uniform double in [0, 1) with 53 random bits. */
static double rng_unit(gen_rng *r)
{
    return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

/* Uniform in [-1, 1): the value range of the random kinds. */
static double rng_value(gen_rng *r)
{
    return 2.0 * rng_unit(r) - 1.0;
}

/* ------------------------------------------------------------- names */

static const char *const kind_names[] = {
    [SPMV_GEN_POISSON2D] = "poisson2d",
    [SPMV_GEN_POISSON3D] = "poisson3d",
    [SPMV_GEN_UNIFORM] = "uniform",
    [SPMV_GEN_POWERLAW] = "powerlaw",
    [SPMV_GEN_BANDED_DENSE_ROW] = "banded_dense_row",
    [SPMV_GEN_LP] = "lp",
    [SPMV_GEN_STENCIL27] = "stencil27",
    [SPMV_GEN_GRAPH_UNIFORM] = "graph_uniform",
    [SPMV_GEN_GRAPH_POWERLAW] = "graph_powerlaw",
    [SPMV_GEN_BAND] = "band",
    [SPMV_GEN_RANDOM] = "random",
};
#define KIND_COUNT ((int)(sizeof kind_names / sizeof kind_names[0]))

const char *spmv_gen_kind_name(spmv_gen_kind k)
{
    if ((int)k < 0 || (int)k >= KIND_COUNT)
        return "unknown";
    return kind_names[k];
}

int spmv_gen_kind_parse(const char *name, spmv_gen_kind *out)
{
    if (!name || !out)
        return SPMV_ERR_INVALID;
    for (int k = 0; k < KIND_COUNT; k++) {
        if (strcasecmp(name, kind_names[k]) == 0) {
            *out = (spmv_gen_kind)k;
            return SPMV_OK;
        }
    }
    if (strcasecmp(name, "banded") == 0) {
        *out = SPMV_GEN_BANDED_DENSE_ROW;
        return SPMV_OK;
    }
    return SPMV_ERR_INVALID;
}

void spmv_gen_defaults(spmv_gen_spec *s, bool per_row_given, bool dense_len_given, bool seed_given)
{
    if (s->kind == SPMV_GEN_RANDOM) { /* its cols and nnz are given, never defaulted */
        if (!seed_given)
            s->seed = 1;
        return;
    }
    if (!per_row_given)
        s->per_row = s->kind == SPMV_GEN_LP ? 4 : 16;
    if (!dense_len_given)
        s->dense_len = s->kind == SPMV_GEN_BANDED_DENSE_ROW ? (s->n / 2 > 0 ? s->n / 2 : 1) : 0;
    if (!seed_given)
        s->seed = 1;
}

/* ------------------------------------------------------------ geometry */

/* Everything the two passes need to know about the matrix, worked out and
 * range-checked once from the spec. */
typedef struct gen_plan {
    spmv_gen_kind kind;
    uint64_t seed;
    int64_t n;          /* grid side or rows, as given */
    int64_t rows, cols;
    int64_t per_row;    /* uniform/powerlaw/lp: row length; banded: band width */
    int64_t half;       /* banded: band half-width */
    int64_t dense_row;  /* banded: index of the dense row, -1 if none */
    int64_t dense_len;  /* banded: its length */
    double xm;          /* powerlaw: Pareto scale */
    int64_t total;      /* random: the non-zeros */
} gen_plan;

/* Power-law rows: lengths are floor(X) with X Pareto of shape ALPHA, i.e.
 * P(X > x) = (xm/x)^ALPHA, capped at the column count. ALPHA = 1.5 gives an
 * infinite-variance tail like the degree distributions of web and social
 * graphs (P(k) ~ k^-2.5); xm is set so the mean of floor(X) is about per_row:
 * E[X] = ALPHA*xm/(ALPHA-1) = 3*xm, and flooring takes off about 1/2. */
#define POWERLAW_ALPHA 1.5

/* LP-like rows: one row in LP_DENSE_EVERY is dense-ish (half the structural
 * columns), like the objective and balance rows of an LP. */
#define LP_DENSE_EVERY 8

static int lp_is_dense_row(int64_t i) { return i % LP_DENSE_EVERY == 0; }

static int plan_check_rows(const gen_plan *p, spmv_error *err)
{
    if (p->rows > INT32_MAX || p->cols > INT32_MAX)
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0,
                              "%s with n = %lld is %lld x %lld; rows and columns must fit 32-bit signed (at most %d)",
                              spmv_gen_kind_name(p->kind), (long long)p->n, (long long)p->rows,
                              (long long)p->cols, INT32_MAX);
    return SPMV_OK;
}

/* random: n rows (checked by the caller) x cols, exactly nnz entries; the
 * spec holds its columns in per_row's slot, its non-zeros in dense_len's. */
static int plan_random(const spmv_gen_spec *s, gen_plan *p, spmv_error *err)
{
    int64_t cols = s->per_row, nnz = s->dense_len;
    p->rows = s->n;
    p->cols = cols;
    p->total = nnz;
    p->per_row = 0;
    if (cols < 1)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "random needs cols in 1..%d, got %lld", INT32_MAX,
                              (long long)cols);
    if (nnz < 0 || nnz > s->n * cols)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "random: nnz = %lld must lie in [0, rows x cols = %lld]",
                              (long long)nnz, (long long)(s->n * cols));
    return plan_check_rows(p, err);
}

static int plan_make(const spmv_gen_spec *s, gen_plan *p, spmv_error *err)
{
    memset(p, 0, sizeof *p);
    p->kind = s->kind;
    p->seed = s->seed;
    p->n = s->n;
    p->per_row = s->per_row;
    p->dense_row = -1;
    if ((int)s->kind < 0 || (int)s->kind >= KIND_COUNT)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "unknown generator kind %d", (int)s->kind);
    if (s->n < 1)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "n must be at least 1, got %lld", (long long)s->n);
    if (s->per_row < 0)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "per_row must not be negative, got %d", s->per_row);
    /* n is cut at 2^31 first so that n*n and n*n*n below cannot overflow int64. */
    if (s->n > INT32_MAX)
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0, "n = %lld exceeds the 32-bit limit %d",
                              (long long)s->n, INT32_MAX);
    switch (s->kind) {
    case SPMV_GEN_POISSON2D:
        if (s->n > 46340) /* 46341^2 > INT32_MAX */
            return spmv_error_set(err, SPMV_ERR_LIMIT, 0,
                                  "poisson2d with n = %lld has n^2 rows; at most n = 46340 fits 32-bit signed",
                                  (long long)s->n);
        p->rows = p->cols = s->n * s->n;
        break;
    case SPMV_GEN_POISSON3D:
    case SPMV_GEN_STENCIL27:
        if (s->n > 1290) /* 1291^3 > INT32_MAX */
            return spmv_error_set(err, SPMV_ERR_LIMIT, 0,
                                  "%s with n = %lld has n^3 rows; at most n = 1290 fits 32-bit signed",
                                  spmv_gen_kind_name(s->kind), (long long)s->n);
        p->rows = p->cols = s->n * s->n * s->n;
        break;
    case SPMV_GEN_UNIFORM:
    case SPMV_GEN_POWERLAW:
    case SPMV_GEN_GRAPH_UNIFORM:
    case SPMV_GEN_GRAPH_POWERLAW:
        p->rows = p->cols = s->n;
        if (s->per_row > s->n)
            return spmv_error_set(err, SPMV_ERR_INVALID, 0,
                                  "per_row = %d exceeds the %lld columns", s->per_row, (long long)s->n);
        p->xm = ((double)s->per_row + 0.5) * (POWERLAW_ALPHA - 1.0) / POWERLAW_ALPHA;
        break;
    case SPMV_GEN_BAND:
        p->rows = p->cols = s->n;
        p->half = s->per_row / 2;
        break;
    case SPMV_GEN_BANDED_DENSE_ROW:
        p->rows = p->cols = s->n;
        p->half = s->per_row / 2;
        if (s->dense_len < 0 || s->dense_len > s->n)
            return spmv_error_set(err, SPMV_ERR_INVALID, 0, "dense_len = %lld must lie in [0, n = %lld]",
                                  (long long)s->dense_len, (long long)s->n);
        if (s->dense_len > 0) {
            p->dense_row = s->n / 2;
            p->dense_len = s->dense_len;
        }
        break;
    case SPMV_GEN_RANDOM:
        return plan_random(s, p, err);
    case SPMV_GEN_LP:
        /* lp_afiro is 27 x 51: about twice as many columns (structural
         * plus one slack per row) as rows. */
        p->rows = s->n;
        p->cols = 2 * s->n;
        if (s->per_row > s->n)
            return spmv_error_set(err, SPMV_ERR_INVALID, 0,
                                  "per_row = %d exceeds the %lld structural columns", s->per_row,
                                  (long long)s->n);
        break;
    }
    return plan_check_rows(p, err);
}

int spmv_gen_shape(const spmv_gen_spec *spec, int64_t *rows, int64_t *cols, spmv_error *err)
{
    gen_plan p;
    if (!spec)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "spmv_gen_shape: no spec");
    int rc = plan_make(spec, &p, err);
    if (rc == SPMV_OK) {
        *rows = p.rows;
        *cols = p.cols;
    }
    return rc;
}

/* ------------------------------------------------------------ row lengths */

static int64_t band_len(const gen_plan *p, int64_t i)
{
    int64_t lo = i - p->half < 0 ? 0 : i - p->half;
    int64_t hi = i + p->half > p->cols - 1 ? p->cols - 1 : i + p->half;
    return hi - lo + 1;
}

static int64_t banded_len(const gen_plan *p, int64_t i)
{
    return i == p->dense_row ? p->dense_len : band_len(p, i);
}

static int64_t powerlaw_draw_len(const gen_plan *p, gen_rng *r)
{
    /* 1 - u lies in (0, 1], so the power is finite. */
    double u = 1.0 - rng_unit(r);
    double x = p->xm * pow(u, -1.0 / POWERLAW_ALPHA);
    return x >= (double)p->cols ? p->cols : (int64_t)x;
}

static int64_t lp_len(const gen_plan *p, int64_t i)
{
    int64_t structural = p->per_row;
    if (lp_is_dense_row(i) && structural < p->n / 2)
        structural = p->n / 2;
    return structural + 1; /* + the row's slack column */
}

/* How many of `count` entries spread uniformly over n rows of `cols`
 * columns fall in the first nl rows: a binomial draw, exact (count coin
 * tosses) when count is small, else its normal approximation (the sum of
 * 12 uniforms less 6: only additions and a sqrt, so every libm gives the
 * same), clamped so that neither part holds more than its rows can. */
static int64_t split_draw(gen_rng *r, int64_t count, int64_t nl, int64_t n, int64_t cols)
{
    double q = (double)nl / (double)n;
    int64_t left = 0;
    if (count <= 32) {
        for (int64_t k = 0; k < count; k++)
            left += rng_unit(r) < q;
    } else {
        double z = -6.0;
        for (int k = 0; k < 12; k++)
            z += rng_unit(r);
        left = llround((double)count * q + z * sqrt((double)count * q * (1.0 - q)));
    }
    int64_t lo = count - (n - nl) * cols, hi = nl * cols < count ? nl * cols : count;
    return left < lo ? lo : left > hi ? hi : left < 0 ? 0 : left;
}

/* Row i's length in a `random` matrix: its share of the `total` entries
 * split down a binary tree over the rows, each node drawing how many of its
 * entries go to its left half (split_draw) from a stream of its own. Every
 * split is a function of (seed, node), so a row's length needs only the
 * log2(rows) nodes above it (rows stay independent: pass 1 runs in
 * parallel), the lengths sum to total exactly, and they spread as a
 * uniform placement's would. Node streams take negative "rows", apart from
 * the rows' own. */
static int64_t random_len(const gen_plan *p, int64_t i)
{
    int64_t lo = 0, hi = p->rows, count = p->total, node = 1;
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        gen_rng r = rng_for_row(p->seed, SPMV_GEN_RANDOM, -node);
        int64_t left = split_draw(&r, count, mid - lo, hi - lo, p->cols);
        if (i < mid) {
            hi = mid;
            count = left;
            node = 2 * node;
        } else {
            lo = mid;
            count -= left;
            node = 2 * node + 1;
        }
    }
    return count;
}

/* A graph kind draws the very pattern of its weighted twin (same seed,
 * same rows), so the two can be compared format for format. */
static spmv_gen_kind pattern_kind(spmv_gen_kind k)
{
    return k == SPMV_GEN_GRAPH_UNIFORM ? SPMV_GEN_UNIFORM : k == SPMV_GEN_GRAPH_POWERLAW ? SPMV_GEN_POWERLAW : k;
}

static int64_t row_len(const gen_plan *p, int64_t i)
{
    int64_t n = p->n;
    switch (p->kind) {
    case SPMV_GEN_POISSON2D: {
        int64_t a = i / n, b = i % n;
        return 1 + (a > 0) + (a < n - 1) + (b > 0) + (b < n - 1);
    }
    case SPMV_GEN_POISSON3D: {
        int64_t a = i / (n * n), b = (i / n) % n, c = i % n;
        return 1 + (a > 0) + (a < n - 1) + (b > 0) + (b < n - 1) + (c > 0) + (c < n - 1);
    }
    case SPMV_GEN_STENCIL27: {
        int64_t a = i / (n * n), b = (i / n) % n, c = i % n;
        return (1 + (a > 0) + (a < n - 1)) * (1 + (b > 0) + (b < n - 1)) * (1 + (c > 0) + (c < n - 1));
    }
    case SPMV_GEN_UNIFORM:
    case SPMV_GEN_GRAPH_UNIFORM:
        return p->per_row;
    case SPMV_GEN_POWERLAW:
    case SPMV_GEN_GRAPH_POWERLAW: {
        gen_rng r = rng_for_row(p->seed, pattern_kind(p->kind), i);
        return powerlaw_draw_len(p, &r);
    }
    case SPMV_GEN_BANDED_DENSE_ROW:
    case SPMV_GEN_BAND:
        return banded_len(p, i);
    case SPMV_GEN_LP:
        return lp_len(p, i);
    case SPMV_GEN_RANDOM:
        return random_len(p, i);
    }
    return 0;
}

/* ------------------------------------------------------------ row filling */

static void sort_cols(int32_t *c, int64_t k);

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static void sort_cols(int32_t *c, int64_t k)
{
    if (k > 32) {
        qsort(c, (size_t)k, sizeof *c, cmp_i32);
        return;
    }
    for (int64_t i = 1; i < k; i++) {
        int32_t v = c[i];
        int64_t j = i;
        for (; j > 0 && c[j - 1] > v; j--)
            c[j] = c[j - 1];
        c[j] = v;
    }
}

static int64_t dedupe_sorted(int32_t *c, int64_t k)
{
    int64_t m = 0;
    for (int64_t i = 0; i < k; i++)
        if (m == 0 || c[m - 1] != c[i])
            c[m++] = c[i];
    return m;
}

/* k distinct sorted columns drawn uniformly from [base, base + n), with
 * k <= n. Sparse rows draw, sort and top up until k are distinct: while
 * k <= n/8 each round leaves under 1/8 of the missing ones missing. Denser
 * rows use selection sampling (Knuth's Algorithm S), which is O(n) = O(8k)
 * and yields the columns already in order. */
static void sample_cols(gen_rng *r, int32_t base, int64_t n, int64_t k, int32_t *out)
{
    if (k * 8 > n) {
        int64_t need = k;
        for (int64_t j = 0; j < n && need > 0; j++) {
            if ((double)(n - j) * rng_unit(r) < (double)need) {
                out[k - need] = base + (int32_t)j;
                need--;
            }
        }
        return;
    }
    int64_t m = 0;
    while (m < k) {
        for (int64_t i = m; i < k; i++)
            out[i] = base + rng_below(r, n);
        sort_cols(out, k);
        m = dedupe_sorted(out, k);
    }
}

static void fill_values_random(gen_rng *r, double *v, int64_t k)
{
    for (int64_t i = 0; i < k; i++)
        v[i] = rng_value(r);
}

static void put(int32_t *row, int32_t *col, double *val, int64_t *at, int64_t i, int64_t j, double v)
{
    if (row) /* NULL: a CSR is being built */
        row[*at] = (int32_t)i;
    col[*at] = (int32_t)j;
    val[*at] = v;
    (*at)++;
}

/* Stencil rows in column order: the neighbours below the diagonal (largest
 * stride first), the diagonal, then those above. */
static void fill_poisson2d(const gen_plan *p, int64_t i, int32_t *row, int32_t *col, double *val)
{
    int64_t n = p->n, a = i / n, b = i % n, at = 0;
    if (a > 0) put(row, col, val, &at, i, i - n, -1.0);
    if (b > 0) put(row, col, val, &at, i, i - 1, -1.0);
    put(row, col, val, &at, i, i, 4.0);
    if (b < n - 1) put(row, col, val, &at, i, i + 1, -1.0);
    if (a < n - 1) put(row, col, val, &at, i, i + n, -1.0);
}

static void fill_poisson3d(const gen_plan *p, int64_t i, int32_t *row, int32_t *col, double *val)
{
    int64_t n = p->n, nn = n * n, at = 0;
    int64_t a = i / nn, b = (i / n) % n, c = i % n;
    if (a > 0) put(row, col, val, &at, i, i - nn, -1.0);
    if (b > 0) put(row, col, val, &at, i, i - n, -1.0);
    if (c > 0) put(row, col, val, &at, i, i - 1, -1.0);
    put(row, col, val, &at, i, i, 6.0);
    if (c < n - 1) put(row, col, val, &at, i, i + 1, -1.0);
    if (b < n - 1) put(row, col, val, &at, i, i + n, -1.0);
    if (a < n - 1) put(row, col, val, &at, i, i + nn, -1.0);
}

/* The 3 x 3 x 3 neighbourhood in column order (a, then b, then c). */
static void fill_stencil27(const gen_plan *p, int64_t i, int32_t *row, int32_t *col, double *val)
{
    int64_t n = p->n, nn = n * n, at = 0;
    int64_t a = i / nn, b = (i / n) % n, c = i % n;
    for (int64_t da = -1; da <= 1; da++)
        for (int64_t db = -1; db <= 1; db++)
            for (int64_t dc = -1; dc <= 1; dc++) {
                if (a + da < 0 || a + da >= n || b + db < 0 || b + db >= n || c + dc < 0 || c + dc >= n)
                    continue;
                int64_t j = i + da * nn + db * n + dc;
                put(row, col, val, &at, i, j, j == i ? 26.0 : -1.0);
            }
}

static void fill_banded(const gen_plan *p, int64_t i, int64_t len, gen_rng *r, int32_t *col, double *val)
{
    if (i == p->dense_row) {
        /* Spread evenly over all columns, like a constraint touching every
         * variable; distinct because dense_len <= cols. */
        for (int64_t k = 0; k < len; k++)
            col[k] = (int32_t)(k * p->cols / len);
    } else {
        int64_t lo = i - p->half < 0 ? 0 : i - p->half;
        for (int64_t k = 0; k < len; k++)
            col[k] = (int32_t)(lo + k);
    }
    fill_values_random(r, val, len);
}

static void fill_lp(const gen_plan *p, int64_t i, int64_t len, gen_rng *r, int32_t *col, double *val)
{
    /* Structural columns [0, n) first, then the slack n + i (value 1), which
     * is larger than all of them, so the row stays sorted. */
    sample_cols(r, 0, p->n, len - 1, col);
    fill_values_random(r, val, len - 1);
    col[len - 1] = (int32_t)(p->n + i);
    val[len - 1] = 1.0;
}

static void fill_row(const gen_plan *p, int64_t i, int64_t len, int32_t *row, int32_t *col, double *val)
{
    gen_rng r = rng_for_row(p->seed, pattern_kind(p->kind), i);
    switch (p->kind) {
    case SPMV_GEN_POISSON2D:
        fill_poisson2d(p, i, row, col, val);
        return;
    case SPMV_GEN_POISSON3D:
        fill_poisson3d(p, i, row, col, val);
        return;
    case SPMV_GEN_STENCIL27:
        fill_stencil27(p, i, row, col, val);
        return;
    case SPMV_GEN_UNIFORM:
    case SPMV_GEN_GRAPH_UNIFORM:
    case SPMV_GEN_RANDOM:
        sample_cols(&r, 0, p->cols, len, col);
        fill_values_random(&r, val, len);
        break;
    case SPMV_GEN_POWERLAW:
    case SPMV_GEN_GRAPH_POWERLAW:
        (void)powerlaw_draw_len(p, &r); /* the draw pass 1 made: len */
        sample_cols(&r, 0, p->cols, len, col);
        fill_values_random(&r, val, len);
        break;
    case SPMV_GEN_BANDED_DENSE_ROW:
        fill_banded(p, i, len, &r, col, val);
        break;
    case SPMV_GEN_BAND: {
        int64_t lo = i - p->half < 0 ? 0 : i - p->half;
        for (int64_t k = 0; k < len; k++) {
            col[k] = (int32_t)(lo + k);
            val[k] = spmv_band_value(i, lo + k);
        }
        break;
    }
    case SPMV_GEN_LP:
        fill_lp(p, i, len, &r, col, val);
        break;
    }
    for (int64_t k = 0; row && k < len; k++)
        row[k] = (int32_t)i;
    if (p->kind == SPMV_GEN_GRAPH_UNIFORM || p->kind == SPMV_GEN_GRAPH_POWERLAW)
        for (int64_t k = 0; k < len; k++)
            val[k] = 1.0; /* drawn above all the same, so the pattern is the weighted twin's */
}

/* ------------------------------------------------------------ the passes */

static int nnz_refusal(const gen_plan *p, int64_t nnz, int64_t limit, spmv_error *err)
{
    return spmv_error_set(err, SPMV_ERR_LIMIT, 0, "%s with n = %lld has %lld non-zeros; at most %lld %s",
                          spmv_gen_kind_name(p->kind), (long long)p->n, (long long)nnz, (long long)limit,
                          limit == INT32_MAX ? "fit 32-bit signed" : "are allowed");
}

/* Pass 1 and the prefix sum: off[i] = first entry of row i, off[rows] = nnz
 * (at most `limit`). */
static int plan_offsets(const gen_plan *p, int64_t *off, int64_t limit, spmv_error *err)
{
    int64_t rows = p->rows;
    off[0] = 0;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < rows; i++)
        off[i + 1] = row_len(p, i);
    /* Row lengths are at most cols < 2^31 and there are < 2^31 rows, so the
     * running sum stays below 2^62: no overflow before the check. */
    for (int64_t i = 0; i < rows; i++)
        off[i + 1] += off[i];
    if (off[rows] > limit)
        return nnz_refusal(p, off[rows], limit, err);
    return SPMV_OK;
}

/* The exact non-zero count, before anything is allocated: a closed form
 * where the spec gives one, else a pass over the row lengths that keeps
 * nothing (a row's length is a function of the row alone). Without it the
 * kinds that draw or vary their rows (powerlaw, graph_powerlaw, lp,
 * banded_dense_row) would allocate the offset table, 8 bytes a row, before
 * a huge request could be refused. The products are below 2^62 because
 * rows and per_row are below 2^31 (and n <= 1290 for 3-D); so is the sum,
 * each row being shorter than 2^31. */
static int64_t plan_count(const gen_plan *p)
{
    int64_t n = p->n, nnz = 0;
    switch (p->kind) {
    case SPMV_GEN_POISSON2D: return 5 * n * n - 4 * n;
    case SPMV_GEN_POISSON3D: return 7 * n * n * n - 6 * n * n;
    case SPMV_GEN_STENCIL27: return (3 * n - 2) * (3 * n - 2) * (3 * n - 2);
    case SPMV_GEN_UNIFORM:
    case SPMV_GEN_GRAPH_UNIFORM: return p->rows * p->per_row;
    case SPMV_GEN_RANDOM: return p->total;
    case SPMV_GEN_BAND: /* every row but the h at either end is whole */
        if (n > 2 * p->half)
            return n * (2 * p->half + 1) - p->half * (p->half + 1);
        break;
    case SPMV_GEN_BANDED_DENSE_ROW: /* the band, its dense row's band length swapped for dense_len */
        if (n > 2 * p->half)
            return n * (2 * p->half + 1) - p->half * (p->half + 1) +
                   (p->dense_row >= 0 ? p->dense_len - band_len(p, p->dense_row) : 0);
        break;
    case SPMV_GEN_LP: /* every row per_row + its slack; one in LP_DENSE_EVERY (from row 0) n/2 + slack if longer */
        return p->rows * (p->per_row + 1) +
               (p->per_row < n / 2 ? (p->rows + LP_DENSE_EVERY - 1) / LP_DENSE_EVERY * (n / 2 - p->per_row) : 0);
    default: break;
    }
    const int64_t rows = p->rows;
#pragma omp parallel for reduction(+ : nnz) schedule(static)
    for (int64_t i = 0; i < rows; i++)
        nnz += row_len(p, i);
    return nnz;
}

static int plan_precheck_nnz(const gen_plan *p, int64_t limit, spmv_error *err)
{
    int64_t nnz = plan_count(p);
    return nnz > limit ? nnz_refusal(p, nnz, limit, err) : SPMV_OK;
}

int spmv_gen_count(const spmv_gen_spec *spec, int64_t *nnz, spmv_error *err)
{
    gen_plan p;
    if (!spec)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "spmv_gen_count: no spec");
    int rc = plan_make(spec, &p, err);
    if (rc == SPMV_OK)
        *nnz = plan_count(&p);
    return rc;
}

/* The plan and pass 1 (every row's first entry in a fresh *off) of a
 * matrix of at most `limit` non-zeros; nothing left allocated on failure. */
static int plan_rows(const spmv_gen_spec *spec, int64_t limit, gen_plan *p, int64_t **off, spmv_error *err)
{
    int rc;
    *off = NULL;
    if ((rc = plan_make(spec, p, err)) != SPMV_OK || (rc = plan_precheck_nnz(p, limit, err)) != SPMV_OK)
        return rc;
    if (!(*off = malloc(((size_t)p->rows + 1) * sizeof **off)))
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "no memory for %lld row offsets", (long long)p->rows + 1);
    if ((rc = plan_offsets(p, *off, limit, err)) != SPMV_OK) {
        free(*off);
        *off = NULL;
    }
    return rc;
}

int spmv_gen(const spmv_gen_spec *spec, spmv_coo *out, spmv_error *err)
{
    gen_plan p;
    int64_t *off = NULL;
    int rc;

    if (!spec || !out)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "spmv_gen: spec and out must not be NULL");
    memset(out, 0, sizeof *out);
    if ((rc = plan_rows(spec, INT32_MAX, &p, &off, err)) != SPMV_OK)
        return rc;
    if ((rc = spmv_coo_alloc(out, (int32_t)p.rows, (int32_t)p.cols, off[p.rows], SPMV_FLOAT64, err)) != SPMV_OK)
        goto fail;
    int32_t *row = out->row, *col = out->col;
    double *val = out->val;
    /* Dynamic chunks: power-law and dense rows make the cost per row uneven.
     * Every row writes only its own slot, so the result does not depend on
     * which thread fills it. */
#pragma omp parallel for schedule(dynamic, 4096)
    for (int64_t i = 0; i < p.rows; i++)
        fill_row(&p, i, off[i + 1] - off[i], row + off[i], col + off[i], val + off[i]);
    free(off);
    return SPMV_OK;

fail:
    free(off);
    spmv_coo_free(out);
    return rc;
}

/* One row into the CSR: columns in place, values through a float64
 * scratch row (grown as needed) when the CSR holds float32. */
static int fill_csr_row(const gen_plan *p, int64_t i, int64_t begin, int64_t len, spmv_csr *out, double **scratch,
                        int64_t *cap)
{
    if (out->dtype == SPMV_FLOAT64) {
        fill_row(p, i, len, NULL, out->col + begin, (double *)out->val + begin);
        return 0;
    }
    if (len > *cap) {
        double *grown = realloc(*scratch, (size_t)len * sizeof **scratch);
        if (!grown)
            return -1;
        *scratch = grown;
        *cap = len;
    }
    fill_row(p, i, len, NULL, out->col + begin, *scratch);
    float *v = (float *)out->val + begin;
    for (int64_t k = 0; k < len; k++)
        v[k] = (float)(*scratch)[k];
    return 0;
}

int spmv_gen_csr(const spmv_gen_spec *spec, spmv_dtype dtype, bool offsets64, int64_t max_nnz, spmv_csr *out,
                 spmv_error *err)
{
    gen_plan p;
    int64_t *off = NULL;
    int rc;
    if (!spec || !out)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "spmv_gen_csr: spec and out must not be NULL");
    memset(out, 0, sizeof *out);
    if (dtype != SPMV_FLOAT64 && dtype != SPMV_FLOAT32)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "spmv_gen_csr: unknown dtype %d", (int)dtype);
    if ((rc = plan_rows(spec, max_nnz, &p, &off, err)) != SPMV_OK)
        return rc;
    int64_t nnz = off[p.rows];
    out->rows = (int32_t)p.rows;
    out->cols = (int32_t)p.cols;
    out->nnz = nnz;
    out->dtype = dtype;
    if (offsets64 || nnz > INT32_MAX) {
        out->row_ptr64 = off; /* the offsets as pass 1 made them */
        off = NULL;
    } else if ((out->row_ptr = malloc(((size_t)p.rows + 1) * sizeof *out->row_ptr))) {
        for (int64_t i = 0; i <= p.rows; i++)
            out->row_ptr[i] = (int32_t)off[i];
    }
    /* malloc, not calloc: the fill below touches every page first, from
     * the thread that will write it */
    out->col = malloc(nnz ? (size_t)nnz * sizeof *out->col : 1);
    out->val = malloc(nnz ? (size_t)nnz * spmv_dtype_size(dtype) : 1);
    if ((!out->row_ptr && !out->row_ptr64) || !out->col || !out->val) {
        free(off);
        spmv_csr_free(out);
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "no memory for a %lld x %lld CSR of %lld non-zeros",
                              (long long)p.rows, (long long)p.cols, (long long)nnz);
    }
    const int64_t *o = off ? off : out->row_ptr64;
    int failed = 0;
#pragma omp parallel reduction(| : failed)
    {
        double *scratch = NULL;
        int64_t cap = 0;
#pragma omp for schedule(dynamic, 4096)
        for (int64_t i = 0; i < p.rows; i++)
            if (!failed)
                failed |= fill_csr_row(&p, i, o[i], o[i + 1] - o[i], out, &scratch, &cap);
        free(scratch);
    }
    free(off);
    if (failed) {
        spmv_csr_free(out);
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "no memory for a row of the generated matrix");
    }
    return SPMV_OK;
}

void spmv_random_vector(spmv_dtype dtype, int64_t n, uint64_t seed, void *v)
{
    uint64_t s = seed ? seed : 1;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        double u = 2.0 * ((double)(s >> 11) * 0x1.0p-53) - 1.0;
        if (dtype == SPMV_FLOAT32)
            ((float *)v)[i] = (float)u;
        else
            ((double *)v)[i] = u;
    }
}
