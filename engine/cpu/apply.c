/* apply.c — y = alpha*A*x + beta*y on the host, for one column or k.
 *
 * spmv_cpu_run times one kernel on host arrays; this file puts it behind
 * the vector interface (spmv_vec operands, alpha and beta applied once
 * after the timed runs, y or the scratch poisoned before the first run) and
 * adds the k-column product (SpMM) of the two CPU kernels that take a block
 * of x: cpu.csr.serial, the reference (k independent row-by-row products),
 * and cpu.csr.omp (one pass over A for all k columns: each non-zero is read
 * once and used k times, which is where an SpMM beats k SpMVs; X is first
 * interleaved row-major, so the k values a non-zero gathers share a cache
 * line instead of lying cols apart). Also the
 * host transpose that op "t" runs on.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "kernels.h"
#include "spmv.h"

/* ------------------------------------------------------------ SpMM */

/* Rows [r0, r1) of Y = A*X, k columns, column-major with leading
 * dimensions cols (X) and rows (Y). Sums in the dtype, as the SpMV kernels. */
#define SPMM_ROWS(T)                                                                                  \
    static void spmm_rows_##T(const spmv_csr *a, int32_t k, const T *x, T *y, int32_t r0, int32_t r1) \
    {                                                                                                 \
        T acc[SPMV_MAX_K];                                                                            \
        for (int32_t i = r0; i < r1; i++) {                                                           \
            for (int32_t j = 0; j < k; j++)                                                           \
                acc[j] = 0;                                                                           \
            const T *v = (const T *)a->val;                                                           \
            for (int32_t p = a->row_ptr[i]; p < a->row_ptr[i + 1]; p++) {                             \
                T av = v[p];                                                                          \
                const T *xc = x + a->col[p];                                                          \
                for (int32_t j = 0; j < k; j++)                                                       \
                    acc[j] += av * xc[(int64_t)j * a->cols];                                          \
            }                                                                                         \
            for (int32_t j = 0; j < k; j++)                                                           \
                y[(int64_t)j * a->rows + i] = acc[j];                                                 \
        }                                                                                             \
    }
SPMM_ROWS(double)
SPMM_ROWS(float)

/* The same rows from X in tiles of SPMM_TILE_MAX columns, each tile
 * interleaved (xt: tile from column j0 at j0 * cols, its row c holding
 * x_c of its W columns), one tile at a time: W is a constant, so the W
 * sums stay in registers (a variable-length accumulator array does not,
 * and made the block product slower per column than k SpMVs), and the x
 * one pass gathers from is W * cols values, a working set the cache holds
 * where all k columns interleaved (k * cols) did not. A is read once per
 * tile. Then X into that layout. */
#define SPMM_TILE_MAX 4
#define SPMM_TILE(T, W)                                                                                 \
    static void spmm_tile##W##_##T(const spmv_csr *a, int32_t j0, const T *xt, T *y, int32_t r0, \
                                   int32_t r1)                                                          \
    {                                                                                                   \
        const T *v = (const T *)a->val;                                                                 \
        for (int32_t i = r0; i < r1; i++) {                                                             \
            T acc[W] = {0};                                                                             \
            for (int32_t p = a->row_ptr[i]; p < a->row_ptr[i + 1]; p++) {                               \
                T av = v[p];                                                                            \
                const T *xc = xt + (int64_t)j0 * a->cols + (int64_t)a->col[p] * W;                      \
                for (int32_t j = 0; j < W; j++)                                                         \
                    acc[j] += av * xc[j];                                                               \
            }                                                                                           \
            for (int32_t j = 0; j < W; j++)                                                             \
                y[(int64_t)(j0 + j) * a->rows + i] = acc[j];                                            \
        }                                                                                               \
    }
#define SPMM_ROWS_INTERLEAVED(T)                                                                        \
    SPMM_TILE(T, 1)                                                                                     \
    SPMM_TILE(T, 2)                                                                                     \
    SPMM_TILE(T, 4)                                                                                     \
    static void spmm_rows_il_##T(const spmv_csr *a, int32_t k, const T *xt, T *y, int32_t r0, int32_t r1) \
    {                                                                                                   \
        int32_t j = 0;                                                                                  \
        for (; j + 4 <= k; j += 4)                                                                      \
            spmm_tile4_##T(a, j, xt, y, r0, r1);                                                     \
        if (j + 2 <= k)                                                                                 \
            spmm_tile2_##T(a, j, xt, y, r0, r1), j += 2;                                             \
        if (j < k)                                                                                      \
            spmm_tile1_##T(a, j, xt, y, r0, r1);                                                     \
    }                                                                                                   \
    static void interleave_##T(int32_t cols, int32_t k, const T *x, T *xt, int32_t c0, int32_t c1)     \
    {                                                                                                   \
        for (int32_t j0 = 0; j0 < k; j0 += SPMM_TILE_MAX) {                                             \
            int32_t w = k - j0 < SPMM_TILE_MAX ? k - j0 : SPMM_TILE_MAX;                                \
            w = w == 3 ? 2 : w; /* the tiles spmm_rows_il takes: 4s, then a 2 and a 1 */                \
            for (int32_t c = c0; c < c1; c++)                                                           \
                for (int32_t j = 0; j < w; j++)                                                         \
                    xt[(int64_t)j0 * cols + (int64_t)c * w + j] = x[(int64_t)(j0 + j) * cols + c];     \
            if (w == 2 && k - j0 == 3) /* the last column, its own tile of 1 */                         \
                for (int32_t c = c0; c < c1; c++)                                                       \
                    xt[(int64_t)(j0 + 2) * cols + c] = x[(int64_t)(j0 + 2) * cols + c];                 \
        }                                                                                               \
    }
SPMM_ROWS_INTERLEAVED(double)
SPMM_ROWS_INTERLEAVED(float)

/* Rows [r0, r1) of Y = A*X: from the interleaved xt when there is one. */
static void spmm_block(const spmv_csr *a, int32_t k, const void *x, const void *xt, void *y, int32_t r0, int32_t r1)
{
    if (a->dtype == SPMV_FLOAT64 && xt)
        spmm_rows_il_double(a, k, xt, y, r0, r1);
    else if (a->dtype == SPMV_FLOAT64)
        spmm_rows_double(a, k, x, y, r0, r1);
    else if (xt)
        spmm_rows_il_float(a, k, xt, y, r0, r1);
    else
        spmm_rows_float(a, k, x, y, r0, r1);
}

/* Columns [c0, c1) of X into xt. */
static void interleave(const spmv_csr *a, int32_t k, const void *x, void *xt, int32_t c0, int32_t c1)
{
    if (a->dtype == SPMV_FLOAT64)
        interleave_double(a->cols, k, x, xt, c0, c1);
    else
        interleave_float(a->cols, k, x, xt, c0, c1);
}

/* cpu.csr.serial with k columns: k products, each the reference's own. */
static void spmm_serial(const spmv_csr *a, int32_t k, const void *x, void *y)
{
    size_t vs = spmv_dtype_size(a->dtype);
    for (int32_t j = 0; j < k; j++)
        spmv_cpu_csr_serial(a, (const char *)x + (size_t)j * a->cols * vs, (char *)y + (size_t)j * a->rows * vs);
}

/* xt: scratch of cols * k values for the interleaved X (NULL: X read as it is). */
static void spmm_omp(const spmv_csr *a, int32_t k, int32_t parts, const int32_t *bounds, const void *x, void *xt,
                     void *y)
{
    if (parts == 1) { /* no team to wake for one part */
        if (xt)
            interleave(a, k, x, xt, 0, a->cols);
        spmm_block(a, k, x, xt, y, 0, a->rows);
        return;
    }
#pragma omp parallel num_threads(parts)
    {
        int32_t t = omp_get_thread_num(), n = omp_get_num_threads();
        if (xt) {
            interleave(a, k, x, xt, (int32_t)((int64_t)a->cols * t / n), (int32_t)((int64_t)a->cols * (t + 1) / n));
#pragma omp barrier
        }
#pragma omp for schedule(static, 1)
        for (int32_t q = 0; q < parts; q++)
            spmm_block(a, k, x, xt, y, bounds[q], bounds[q + 1]);
    }
}

/* Warm-up and timed runs of a k-column product of a CPU kernel that takes k. */
static int cpu_spmm_run(const spmv_kernel *kern, const spmv_matrix *m, const spmv_params *p, int32_t k,
                        const void *x, void *y, int32_t warmup, int32_t runs, spmv_stats *stats, spmv_error *err)
{
    spmv_params par;
    int st = spmv_csr_need_narrow(&m->csr, "k > 1 columns", err);
    if (st || (st = spmv_params_resolve(kern, p, &par, err)))
        return st;
    bool omp = kern->impl == SPMV_IMPL_CPU_CSR_OMP;
    int32_t threads = spmv_cpu_threads(par.v[SPMV_PARAM_THREADS], m->nnz * k); /* small work: one thread */
    int32_t *bounds = NULL;
    void *xt = NULL;
    double *times = spmv_array_alloc(runs, sizeof(double), &st);
    if (!times)
        return spmv_error_set(err, st, 0, "cannot allocate %d timings", runs);
    if (omp && k > 1) /* without the scratch the product reads X as it lies: slower, still right */
        xt = spmv_array_alloc((int64_t)m->csr.cols * k, spmv_dtype_size(m->dtype), &st);
    if (omp) {
        if (!(bounds = spmv_array_alloc((int64_t)threads + 1, sizeof(int32_t), &st))) {
            free(times);
            return spmv_error_set(err, st, 0, "cannot allocate the row partition");
        }
        spmv_cpu_csr_partition(&m->csr, threads, bounds);
    }
    for (int32_t i = 0; i < warmup + runs; i++) {
        double t0 = spmv_now_ms();
        if (omp)
            spmm_omp(&m->csr, k, threads, bounds, x, xt, y);
        else
            spmm_serial(&m->csr, k, x, y);
        if (i >= warmup)
            times[i - warmup] = spmv_now_ms() - t0;
    }
    if (stats)
        spmv_stats_compute(times, runs, warmup, 2 * m->nnz * k, spmv_kernel_bytes_k(kern, m, k), stats);
    free(bounds);
    free(xt);
    free(times);
    return SPMV_OK;
}

/* ------------------------------------------------------------ apply */

void spmv_host_poison(spmv_dtype dt, void *y, int64_t n)
{
#pragma omp parallel for schedule(static) if (n > (1 << 20))
    for (int64_t i = 0; i < n; i++) {
        if (dt == SPMV_FLOAT32)
            ((float *)y)[i] = NAN;
        else
            ((double *)y)[i] = NAN;
    }
}

/* The checks every apply makes, host or device (shared with gpu/run.cu's
 * through the same messages): x and y distinct, one dtype, k taken by the
 * kernel, lengths of A. */
int spmv_apply_check(const spmv_kernel *k, int32_t rows, int32_t cols, spmv_dtype dtype, const spmv_vec *x,
                     const spmv_vec *y, const spmv_apply_args *a, spmv_error *err)
{
    if (!k || !x || !y || !a)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "apply: missing kernel, operand or arguments");
    if (x->data && x->data == y->data)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "x and y must be different vectors (y = A*x in place is not defined)");
    if (x->dtype != dtype || y->dtype != dtype)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "the matrix is %s but x is %s and y is %s",
                              spmv_dtype_name(dtype), spmv_dtype_name(x->dtype), spmv_dtype_name(y->dtype));
    if (x->k != y->k)
        return spmv_error_set(err, SPMV_ERR_SHAPE, 0, "x has %d columns and y %d", x->k, y->k);
    if (x->k > spmv_kernel_max_k(k))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "kernel %s multiplies %d column%s at a time, not %d", k->name,
                              spmv_kernel_max_k(k), spmv_kernel_max_k(k) == 1 ? "" : "s", x->k);
    if (x->n != cols || y->n != rows)
        return spmv_error_set(err, SPMV_ERR_SHAPE, 0,
                              "the matrix is %d x %d: x needs %d values and y %d a column, not %lld and %lld", rows,
                              cols, cols, rows, (long long)x->n, (long long)y->n);
    if (!isfinite(a->alpha) || !isfinite(a->beta))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "alpha and beta must be finite");
    return SPMV_OK;
}

int spmv_cpu_apply(const spmv_kernel *k, const spmv_matrix *m, const spmv_params *p, const spmv_apply_args *a,
                   const spmv_vec *x, spmv_vec *y, spmv_stats *stats, double *axpby_ms, spmv_error *err)
{
    if (!m)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "apply: missing matrix");
    int st = spmv_apply_check(k, m->rows, m->cols, m->dtype, x, y, a, err);
    if (st)
        return st;
    if (x->device != SPMV_DEVICE_CPU || y->device != SPMV_DEVICE_CPU)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s runs on the CPU: x and y must be host vectors", k->name);
    bool direct = a->alpha == 1.0 && a->beta == 0.0;
    spmv_vec t = *y;
    if (!direct && (st = spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, y->dtype, y->n, y->k, &t, err)))
        return st;
    spmv_host_poison(t.dtype, t.data, t.n * t.k);
    if (x->k == 1)
        st = spmv_cpu_run(k, m, p, x->data, t.data, a->warmup, a->runs, stats, err);
    else if (a->runs < 1 || a->warmup < 0)
        st = spmv_error_set(err, SPMV_ERR_INVALID, 0, "runs %d / warmup %d out of range", a->runs, a->warmup);
    else
        st = cpu_spmm_run(k, m, p, x->k, x->data, t.data, a->warmup, a->runs, stats, err);
    if (axpby_ms)
        *axpby_ms = 0;
    if (st == SPMV_OK && !direct) {
        double t0 = spmv_now_ms();
        st = spmv_vec_axpby(NULL, a->alpha, &t, a->beta, y, err);
        if (axpby_ms)
            *axpby_ms = spmv_now_ms() - t0;
    }
    if (!direct)
        spmv_vec_free(NULL, &t);
    return st;
}

int spmv_cpu_run_k(const spmv_kernel *k, const spmv_matrix *m, const spmv_params *p, int32_t ncols, const void *x,
                   void *y, int32_t warmup, int32_t runs, spmv_stats *stats, spmv_error *err)
{
    if (!m)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "run: missing matrix");
    spmv_vec vx = {SPMV_DEVICE_CPU, m->dtype, m->cols, ncols, (void *)x};
    spmv_vec vy = {SPMV_DEVICE_CPU, m->dtype, m->rows, ncols, y};
    spmv_apply_args a = {1.0, 0.0, warmup, runs};
    return spmv_cpu_apply(k, m, p, &a, &vx, &vy, stats, NULL, err);
}

/* ------------------------------------------------------------ transpose */

int spmv_matrix_transpose(const spmv_matrix *m, spmv_matrix *out, spmv_error *err)
{
    memset(out, 0, sizeof *out);
    if (!m || !(m->formats & SPMV_FMT_CSR))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "transpose: the matrix holds no CSR");
    const spmv_csr *a = &m->csr;
    size_t vs = spmv_dtype_size(a->dtype);
    int st = spmv_csr_need_narrow(a, "the transpose (op t)", err);
    if (st)
        return st;
    spmv_csr t = {.rows = a->cols, .cols = a->rows, .nnz = a->nnz, .dtype = a->dtype};
    t.row_ptr = spmv_array_alloc((int64_t)a->cols + 1, sizeof(int32_t), &st);
    t.col = t.row_ptr ? spmv_array_alloc(a->nnz ? a->nnz : 1, sizeof(int32_t), &st) : NULL;
    t.val = t.col ? spmv_array_alloc(a->nnz ? a->nnz : 1, vs, &st) : NULL;
    if (!t.val) {
        spmv_csr_free(&t);
        return spmv_error_set(err, st, 0, "cannot allocate the transpose (%lld non-zeros)", (long long)a->nnz);
    }
    memset(t.row_ptr, 0, ((size_t)a->cols + 1) * sizeof(int32_t));
    for (int64_t p = 0; p < a->nnz; p++)
        t.row_ptr[a->col[p] + 1]++;
    for (int32_t j = 0; j < a->cols; j++)
        t.row_ptr[j + 1] += t.row_ptr[j];
    /* rows of A in order: each row of Aᵀ gets its entries sorted by column */
    int32_t *next = spmv_array_alloc(a->cols ? a->cols : 1, sizeof(int32_t), &st);
    if (!next) {
        spmv_csr_free(&t);
        return spmv_error_set(err, st, 0, "cannot allocate the transpose's cursors");
    }
    memcpy(next, t.row_ptr, (size_t)a->cols * sizeof(int32_t));
    for (int32_t i = 0; i < a->rows; i++)
        for (int32_t p = a->row_ptr[i]; p < a->row_ptr[i + 1]; p++) {
            int32_t q = next[a->col[p]]++;
            t.col[q] = i;
            memcpy((char *)t.val + (size_t)q * vs, (const char *)a->val + (size_t)p * vs, vs);
        }
    free(next);
    SPMV_COPY_SHAPE(out, &t);
    out->hack_size = m->hack_size;
    out->limits = m->limits;
    out->formats = SPMV_FMT_CSR;
    out->csr = t;
    return SPMV_OK;
}
