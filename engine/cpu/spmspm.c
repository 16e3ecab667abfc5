/* spmspm.c — the CPU SpMSpM kernels: cpu.spmspm.serial and cpu.spmspm.omp,
 * and the timing of cpu.spmspm.hash (its product: spmspm_hash.c).
 *
 * C = A*B row by row (Gustavson): row i of C is the sum over A's entries
 * a_ik of a_ik times row k of B. Two passes, so C is allocated once at its
 * exact size and written in place, sorted: a count pass finds each row's
 * number of distinct columns, a prefix sum gives C's row_ptr, a fill pass
 * computes the values into the row's own slice of C.
 *
 * Accumulator. B is thin (few columns), so each thread keeps a dense
 * accumulator over B's columns plus a marker per column (which row last
 * touched it): O(1) per product, no hashing, and the row's columns come out
 * sorted by a scan of the marker when the row is dense in B's columns, or
 * by sorting the row's short list of columns otherwise. When B is wide
 * (more than DENSE_MAX_COLS columns) a dense accumulator per thread would
 * cost more memory than the operands, so the row's products are expanded
 * instead, sorted by (column, order of the product) and merged — the same
 * sums in the same order, so both paths give bitwise the same C.
 *
 * One row loop serves both kernels: cpu.spmspm.serial runs it on one
 * thread (it is the reference, spmv_spmspm_reference), cpu.spmspm.omp
 * splits rows over `threads` OpenMP threads (dynamic chunks: row work
 * varies with A's row lengths times B's). Sums accumulate in the dtype, in
 * the order of A's row, so the OpenMP kernel's C is bitwise the serial
 * one. Workspaces are allocated before timing; a timed run is the whole
 * product, C's allocation included, as on the GPU.
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "kernels.h"
#include "spmv.h"

/* Past this many columns of B the per-thread dense accumulator (12 bytes
 * a column in float64) gives way to the sort-and-merge path. */
#define DENSE_MAX_COLS (INT32_C(1) << 21)
#define MAX_RUNS 1000000
/* Rows a thread takes at a time in the OpenMP passes. */
#define ROW_CHUNK 64

typedef struct prod_key {
    int32_t col;
    int64_t seq;  /* product's position in the row: the order sums are made in */
} prod_key;

/* One thread's scratch. Dense: mark[j] is the last row that touched column
 * j (-1: none), acc[j] its running sum, list the row's columns. Wide:
 * keys and vals hold one row's products. */
typedef struct sp_ws {
    int32_t *mark;
    void *acc;
    int32_t *list;
    prod_key *keys;
    void *vals;
} sp_ws;

typedef struct sp_plan {
    const spmv_csr *a, *b;
    bool wide;
    int32_t threads;
    int64_t max_row_madds;   /* wide: products of the busiest row */
    int32_t *arow;           /* cpu.spmspm.hash: A's row per entry (A as COO), made before timing */
    sp_ws *ws;
    double *times;
} sp_plan;

static int cmp_i32(const void *x, const void *y)
{
    int32_t p = *(const int32_t *)x, q = *(const int32_t *)y;
    return (p > q) - (p < q);
}

static int cmp_key(const void *x, const void *y)
{
    const prod_key *p = x, *q = y;
    if (p->col != q->col)
        return p->col < q->col ? -1 : 1;
    return (p->seq > q->seq) - (p->seq < q->seq);
}

/* Sorts a row's n columns: a marker scan when the row covers a good part
 * of B's columns (linear, no comparisons), else a sort of the list. */
static void sort_cols(int32_t *cols, int32_t n, const int32_t *mark, int32_t row, int32_t bcols)
{
    if (n < 2)
        return;
    if ((int64_t)n * 16 >= bcols) {
        int32_t k = 0;
        for (int32_t j = 0; j < bcols && k < n; j++)
            if (mark[j] == row)
                cols[k++] = j;
        return;
    }
    if (n <= 16) { /* insertion sort: rows of a thin product are short */
        for (int32_t p = 1; p < n; p++) {
            int32_t v = cols[p], q = p;
            for (; q > 0 && cols[q - 1] > v; q--)
                cols[q] = cols[q - 1];
            cols[q] = v;
        }
        return;
    }
    qsort(cols, (size_t)n, sizeof *cols, cmp_i32);
}

/* Dense count: distinct columns of row i. */
static int32_t count_row_dense(const spmv_csr *a, const spmv_csr *b, int32_t i, int32_t *mark)
{
    int32_t n = 0;
    for (int32_t p = a->row_ptr[i]; p < a->row_ptr[i + 1]; p++) {
        int32_t k = a->col[p];
        for (int32_t q = b->row_ptr[k]; q < b->row_ptr[k + 1]; q++) {
            int32_t j = b->col[q];
            if (mark[j] != i) {
                mark[j] = i;
                n++;
            }
        }
    }
    return n;
}

/* Wide: a row's products as keys, sorted; returns how many. */
static int64_t expand_row(const spmv_csr *a, const spmv_csr *b, int32_t i, prod_key *keys)
{
    int64_t n = 0;
    for (int32_t p = a->row_ptr[i]; p < a->row_ptr[i + 1]; p++) {
        int32_t k = a->col[p];
        for (int32_t q = b->row_ptr[k]; q < b->row_ptr[k + 1]; q++, n++)
            keys[n] = (prod_key){b->col[q], n};
    }
    qsort(keys, (size_t)n, sizeof *keys, cmp_key);
    return n;
}

static int32_t count_row_wide(const spmv_csr *a, const spmv_csr *b, int32_t i, prod_key *keys)
{
    int64_t n = expand_row(a, b, i, keys);
    int32_t distinct = 0;
    for (int64_t p = 0; p < n; p++)
        distinct += p == 0 || keys[p].col != keys[p - 1].col;
    return distinct;
}

/* The fill pass per dtype: row i of C into its slice at c->row_ptr[i]. */
#define DEFINE_SPMSPM_FILL(T, SFX)                                                                  \
    static void fill_row_dense_##SFX(const spmv_csr *a, const spmv_csr *b, spmv_csr *c, int32_t i, \
                                     sp_ws *w)                                                     \
    {                                                                                              \
        const T *av = a->val, *bv = b->val;                                                        \
        T *acc = w->acc, *cv = c->val;                                                             \
        int32_t *cols = c->col + c->row_ptr[i], n = 0;                                             \
        for (int32_t p = a->row_ptr[i]; p < a->row_ptr[i + 1]; p++) {                              \
            int32_t k = a->col[p];                                                                 \
            T aik = av[p];                                                                         \
            for (int32_t q = b->row_ptr[k]; q < b->row_ptr[k + 1]; q++) {                          \
                int32_t j = b->col[q];                                                             \
                if (w->mark[j] != i) {                                                             \
                    w->mark[j] = i;                                                                \
                    acc[j] = aik * bv[q];                                                          \
                    cols[n++] = j;                                                                 \
                } else {                                                                           \
                    acc[j] += aik * bv[q];                                                         \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        sort_cols(cols, n, w->mark, i, b->cols);                                                   \
        for (int32_t p = 0; p < n; p++)                                                            \
            cv[c->row_ptr[i] + p] = acc[cols[p]];                                                  \
    }                                                                                              \
                                                                                                   \
    static void fill_row_wide_##SFX(const spmv_csr *a, const spmv_csr *b, spmv_csr *c, int32_t i,  \
                                    sp_ws *w)                                                      \
    {                                                                                              \
        const T *av = a->val, *bv = b->val;                                                        \
        T *prod = w->vals, *cv = c->val;                                                           \
        int64_t n = 0, out = c->row_ptr[i];                                                        \
        for (int32_t p = a->row_ptr[i]; p < a->row_ptr[i + 1]; p++)                                \
            for (int32_t q = b->row_ptr[a->col[p]]; q < b->row_ptr[a->col[p] + 1]; q++)            \
                prod[n++] = av[p] * bv[q];                                                         \
        n = expand_row(a, b, i, w->keys);                                                          \
        for (int64_t p = 0; p < n; out++) {                                                        \
            int32_t j = w->keys[p].col;                                                            \
            T sum = prod[w->keys[p++].seq];                                                        \
            for (; p < n && w->keys[p].col == j; p++)                                              \
                sum += prod[w->keys[p].seq];                                                       \
            c->col[out] = j;                                                                       \
            cv[out] = sum;                                                                         \
        }                                                                                          \
    }

DEFINE_SPMSPM_FILL(double, f64)
DEFINE_SPMSPM_FILL(float, f32)

static void fill_row(const sp_plan *pl, spmv_csr *c, int32_t i, sp_ws *w)
{
    bool f32 = pl->a->dtype == SPMV_FLOAT32;
    if (pl->wide)
        (f32 ? fill_row_wide_f32 : fill_row_wide_f64)(pl->a, pl->b, c, i, w);
    else
        (f32 ? fill_row_dense_f32 : fill_row_dense_f64)(pl->a, pl->b, c, i, w);
}

static void reset_marks(const sp_plan *pl, sp_ws *w)
{
    if (!pl->wide)
        for (int32_t j = 0; j < pl->b->cols; j++)
            w->mark[j] = -1;
}

/* Count pass: counts[i + 1] = distinct columns of row i. */
static void count_pass(const sp_plan *pl, int32_t *counts)
{
    const spmv_csr *a = pl->a, *b = pl->b;
#pragma omp parallel num_threads(pl->threads)
    {
        sp_ws *w = &pl->ws[omp_get_thread_num()];
        reset_marks(pl, w);
#pragma omp for schedule(dynamic, ROW_CHUNK)
        for (int32_t i = 0; i < a->rows; i++)
            counts[i + 1] = pl->wide ? count_row_wide(a, b, i, w->keys) : count_row_dense(a, b, i, w->mark);
    }
}

static void fill_pass(const sp_plan *pl, spmv_csr *c)
{
#pragma omp parallel num_threads(pl->threads)
    {
        sp_ws *w = &pl->ws[omp_get_thread_num()];
        reset_marks(pl, w);
#pragma omp for schedule(dynamic, ROW_CHUNK)
        for (int32_t i = 0; i < pl->a->rows; i++)
            fill_row(pl, c, i, w);
    }
}

/* One whole product into a fresh *c. */
static int product(const sp_plan *pl, spmv_csr *c, spmv_error *err)
{
    const spmv_csr *a = pl->a;
    int st = SPMV_OK;
    int64_t total = 0;
    if (pl->arow)
        return spmv_cpu_spmspm_hash(a, pl->arow, pl->b, c, err);
    memset(c, 0, sizeof *c);
    c->rows = a->rows;
    c->cols = pl->b->cols;
    c->dtype = a->dtype;
    if (!(c->row_ptr = spmv_array_alloc((int64_t)a->rows + 1, sizeof(int32_t), &st)))
        goto fail;
    c->row_ptr[0] = 0;
    count_pass(pl, c->row_ptr);
    for (int32_t i = 0; i < a->rows; i++) {
        total += c->row_ptr[i + 1];
        if (total > INT32_MAX) {
            st = spmv_error_set(err, SPMV_ERR_LIMIT, 0, "C = A*B would hold more than %d non-zeros (from row %d on)",
                                INT32_MAX, i);
            goto out;
        }
        c->row_ptr[i + 1] = (int32_t)total;
    }
    c->nnz = total;
    if (!(c->col = spmv_array_alloc(total, sizeof(int32_t), &st)) ||
        !(c->val = spmv_array_alloc(total, spmv_dtype_size(c->dtype), &st)))
        goto fail;
    fill_pass(pl, c);
    return SPMV_OK;
fail:
    st = spmv_error_set(err, st, 0, "cannot allocate C (%d rows, %lld non-zeros)", a->rows, (long long)total);
out:
    spmv_csr_free(c);
    return st;
}

/* ------------------------------------------------------------- the plan */

static int64_t max_row_madds(const spmv_csr *a, const spmv_csr *b)
{
    int64_t best = 0;
    for (int32_t i = 0; i < a->rows; i++) {
        int64_t n = 0;
        for (int32_t p = a->row_ptr[i]; p < a->row_ptr[i + 1]; p++)
            n += (int64_t)b->row_ptr[a->col[p] + 1] - b->row_ptr[a->col[p]];
        if (n > best)
            best = n;
    }
    return best;
}

static void plan_free(sp_plan *pl)
{
    for (int32_t t = 0; pl->ws && t < pl->threads; t++) {
        free(pl->ws[t].mark);
        free(pl->ws[t].acc);
        free(pl->ws[t].keys);
        free(pl->ws[t].vals);
    }
    free(pl->ws);
    free(pl->times);
    free(pl->arow);
}

/* A's COO rows for cpu.spmspm.hash: row i once per entry of the row. */
static int32_t *coo_rows(const spmv_csr *a, int *st)
{
    int32_t *r = spmv_array_alloc(a->nnz, sizeof *r, st);
    for (int32_t i = 0; r && i < a->rows; i++)
        for (int32_t p = a->row_ptr[i]; p < a->row_ptr[i + 1]; p++)
            r[p] = i;
    return r;
}

static int ws_alloc(const sp_plan *pl, sp_ws *w)
{
    int st = SPMV_OK;
    size_t vs = spmv_dtype_size(pl->a->dtype);
    if (pl->wide) {
        if ((w->keys = spmv_array_alloc(pl->max_row_madds, sizeof *w->keys, &st)))
            w->vals = spmv_array_alloc(pl->max_row_madds, vs, &st);
        return st;
    }
    if ((w->mark = spmv_array_alloc(pl->b->cols, sizeof(int32_t), &st)))
        w->acc = spmv_array_alloc(pl->b->cols, vs, &st);
    return st;
}

static int plan_make(sp_plan *pl, bool hash, int32_t runs, spmv_error *err)
{
    int st = SPMV_OK;
    if (hash) { /* its map is the product's own, made in the timed run */
        if (!(pl->times = spmv_array_alloc(runs, sizeof(double), &st)) || !(pl->arow = coo_rows(pl->a, &st)))
            return spmv_error_set(err, st, 0, "cannot allocate cpu.spmspm.hash's COO rows of A (%lld entries)",
                                  (long long)pl->a->nnz);
        return SPMV_OK;
    }
    pl->wide = pl->b->cols > DENSE_MAX_COLS;
    if (pl->wide)
        pl->max_row_madds = max_row_madds(pl->a, pl->b);
    if (!(pl->times = spmv_array_alloc(runs, sizeof(double), &st)) ||
        !(pl->ws = spmv_array_alloc(pl->threads, sizeof *pl->ws, &st)))
        goto fail;
    memset(pl->ws, 0, (size_t)pl->threads * sizeof *pl->ws);
    for (int32_t t = 0; t < pl->threads; t++)
        if ((st = ws_alloc(pl, &pl->ws[t])))
            goto fail;
    return SPMV_OK;
fail:
    return spmv_error_set(err, st, 0, "cannot allocate SpMSpM workspaces for %d thread(s) (%s)", pl->threads,
                          pl->wide ? "products of the busiest row" : "an accumulator over B's columns");
}

static int check_call(const spmv_kernel *k, const spmv_csr *a, const spmv_csr *b, const spmv_csr *c,
                      int32_t warmup, int32_t runs, spmv_error *err)
{
    if (!k || k->device != SPMV_DEVICE_CPU || k->op != SPMV_OP_SPMSPM)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s is not a CPU SpMSpM kernel (cpu.spmspm.*)",
                              k ? k->name : "(null)");
    if (!c)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "SpMSpM: no place for C");
    if (runs < 1 || runs > MAX_RUNS || warmup < 0 || warmup > MAX_RUNS)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0,
                              "runs %d (range 1..%d) or warmup %d (range 0..%d) out of range", runs, MAX_RUNS,
                              warmup, MAX_RUNS);
    return spmv_spmspm_check(a, b, err);
}

int spmv_cpu_spmspm(const spmv_kernel *k, const spmv_csr *a, const spmv_csr *b, const spmv_params *p,
                    int32_t warmup, int32_t runs, spmv_csr *c, spmv_stats *stats, spmv_error *err)
{
    sp_plan pl;
    spmv_params par;
    memset(&pl, 0, sizeof pl);
    if (c)
        memset(c, 0, sizeof *c);
    int st = check_call(k, a, b, c, warmup, runs, err);
    if (st || (st = spmv_params_resolve(k, p, &par, err)))
        return st;
    pl.a = a;
    pl.b = b;
    pl.threads = k->impl != SPMV_IMPL_CPU_SPMSPM_OMP ? 1
                 : par.v[SPMV_PARAM_THREADS] > 0         ? par.v[SPMV_PARAM_THREADS]
                                                          : omp_get_max_threads();
    if ((st = plan_make(&pl, k->impl == SPMV_IMPL_CPU_SPMSPM_HASH, runs, err)))
        goto done;
    for (int32_t i = 0; i < warmup + runs; i++) {
        spmv_csr_free(c); /* the previous run's C, outside the clock */
        double t0 = spmv_now_ms();
        if ((st = product(&pl, c, err)))
            goto done;
        if (i >= warmup)
            pl.times[i - warmup] = spmv_now_ms() - t0;
    }
    if (stats)
        spmv_stats_compute(pl.times, runs, warmup, 2 * spmv_spmspm_madds(a, b), spmv_spmspm_bytes(a, b, c), stats);
done:
    plan_free(&pl);
    return st;
}

bool spmv_cpu_spmspm_bound(const spmv_kernel *k)
{
    return k->impl == SPMV_IMPL_CPU_SPMSPM_SERIAL || k->impl == SPMV_IMPL_CPU_SPMSPM_OMP ||
           k->impl == SPMV_IMPL_CPU_SPMSPM_HASH;
}
