/* blas.c — vectors where the matrix lives, and the BLAS-1 calls on them.
 *
 * One entry point per operation (spmv_vec_dot, spmv_vec_axpby, ...) for
 * every device: the operands are checked here, once, then host vectors run
 * the OpenMP loops below and device vectors go to the GPU backend
 * (engine/gpu/blas.cu, or absent.c's refusals in a build without CUDA).
 * The solvers (solvers/) and the daemon's /v1/ops steps call only these,
 * so a Krylov method is written once and runs wherever its vectors are.
 *
 * Reductions accumulate in float64 whatever the dtype and are column-wise
 * for blocks (k > 1: one result per column). nrm2 scales as LAPACK's dnrm2
 * does, so a vector of huge or tiny values neither overflows nor
 * underflows to a wrong norm.
 *
 * Every host loop asks OpenMP for its team only from spmv_cpu_serial_below()
 * values up (the `if` clause, PAR below): a Krylov iteration on a matrix of
 * a few thousand rows is a dozen such loops of microseconds each, and a
 * team woken for each of them cost a CPU solve of bcsstk13 several times
 * SciPy's time (issue 28). The threshold is the calling thread's
 * (spmv.h); the kernels' thread count follows the same rule.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "spmv.h"

static _Thread_local int64_t serial_below = SPMV_SERIAL_BELOW_DEFAULT;

void spmv_cpu_set_serial_below(int64_t values) { serial_below = values > 0 ? values : 0; }

int64_t spmv_cpu_serial_below(void) { return serial_below; }

int32_t spmv_cpu_threads(int32_t threads, int64_t work)
{
    if (threads > 0)
        return threads;
    return work < serial_below ? 1 : omp_get_max_threads();
}

/* The team for a loop over n values: OpenMP's `if` clause. */
#define PAR(n) ((n) >= serial_below)

size_t spmv_vec_bytes(const spmv_vec *v)
{
    return v ? (size_t)v->n * (size_t)v->k * spmv_dtype_size(v->dtype) : 0;
}

static int check_shape(int64_t n, int32_t k, spmv_error *err)
{
    if (n < 0 || k < 1 || k > SPMV_MAX_K)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "a vector needs n >= 0 and 1 <= k <= %d (got n %lld, k %d)",
                              SPMV_MAX_K, (long long)n, k);
    if ((uint64_t)n > SIZE_MAX / 8 / (uint64_t)k)
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0, "a vector of %lld x %d values overflows the address space",
                              (long long)n, k);
    return SPMV_OK;
}

int spmv_vec_alloc(spmv_gpu_ctx *ctx, spmv_device_kind device, spmv_dtype dtype, int64_t n, int32_t k,
                   spmv_vec *out, spmv_error *err)
{
    memset(out, 0, sizeof *out);
    int st = check_shape(n, k, err);
    if (st)
        return st;
    if (device == SPMV_DEVICE_GPU)
        return spmv_gpu_vec_alloc(ctx, dtype, n, k, out, err);
    size_t bytes = (size_t)n * (size_t)k * spmv_dtype_size(dtype);
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of host memory for a vector of %zu bytes", bytes);
    *out = (spmv_vec){.device = SPMV_DEVICE_CPU, .dtype = dtype, .n = n, .k = k, .data = p};
    return SPMV_OK;
}

void spmv_vec_free(spmv_gpu_ctx *ctx, spmv_vec *v)
{
    if (!v || !v->data)
        return;
    if (v->device == SPMV_DEVICE_GPU)
        spmv_gpu_vec_free(ctx, v);
    else
        free(v->data);
    memset(v, 0, sizeof *v);
}

/* Operands of one call: same device, dtype, n and k. */
static int check_pair(const spmv_vec *x, const spmv_vec *y, const char *op, spmv_error *err)
{
    if (!x || !y || (!x->data && x->n * x->k > 0) || (!y->data && y->n * y->k > 0))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s: missing operand", op);
    if (x->device != y->device)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s: x is on the %s and y on the %s", op,
                              x->device == SPMV_DEVICE_GPU ? "GPU" : "CPU", y->device == SPMV_DEVICE_GPU ? "GPU" : "CPU");
    if (x->dtype != y->dtype)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s: x is %s and y is %s", op, spmv_dtype_name(x->dtype),
                              spmv_dtype_name(y->dtype));
    if (x->n != y->n || x->k != y->k)
        return spmv_error_set(err, SPMV_ERR_SHAPE, 0, "%s: x has %lld x %d values and y %lld x %d", op,
                              (long long)x->n, x->k, (long long)y->n, y->k);
    return SPMV_OK;
}

static int check_one(const spmv_vec *x, const char *op, spmv_error *err)
{
    if (!x || (!x->data && x->n * x->k > 0))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s: missing operand", op);
    return SPMV_OK;
}

#define GPU(v) ((v)->device == SPMV_DEVICE_GPU)
#define LEN(v) ((int64_t)(v)->n * (v)->k)

/* The host loops of fill, scal, mul, dot and nrm2, once per dtype. Sums
 * are float64 whatever T is (the (double) casts are no-ops for double). */
#define DEFINE_HOST_LOOPS(T, SFX)                                                                  \
    static void host_fill_##SFX(T *p, int64_t n, double value)                                    \
    {                                                                                              \
        T f = (T)value;                                                                            \
        _Pragma("omp parallel for if (PAR(n)) schedule(static)")                                   \
        for (int64_t i = 0; i < n; i++)                                                            \
            p[i] = f;                                                                              \
    }                                                                                              \
                                                                                                   \
    static void host_scal_##SFX(T *p, int64_t n, double alpha)                                    \
    {                                                                                              \
        T a = (T)alpha;                                                                            \
        _Pragma("omp parallel for if (PAR(n)) schedule(static)")                                   \
        for (int64_t i = 0; i < n; i++)                                                            \
            p[i] *= a;                                                                             \
    }                                                                                              \
                                                                                                   \
    static void host_mul_##SFX(const T *a, T *b, int64_t n)                                       \
    {                                                                                              \
        _Pragma("omp parallel for if (PAR(n)) schedule(static)")                                   \
        for (int64_t i = 0; i < n; i++)                                                            \
            b[i] *= a[i];                                                                          \
    }                                                                                              \
                                                                                                   \
    static double host_dot_col_##SFX(const T *a, const T *b, int64_t n)                           \
    {                                                                                              \
        double s = 0.0;                                                                            \
        _Pragma("omp parallel for if (PAR(n)) reduction(+ : s) schedule(static)")                  \
        for (int64_t i = 0; i < n; i++)                                                            \
            s += (double)a[i] * (double)b[i];                                                      \
        return s;                                                                                  \
    }

/* ||x||_2 of one column: the largest magnitude first, then the sum of
 * squares scaled by it (two passes; no overflow for values near DBL_MAX).
 * NaN anywhere is NaN, else an infinity is Inf: fmax (and OpenMP's max)
 * would skip a NaN, so the first pass counts them apart. */
#define DEFINE_HOST_NRM2(T, SFX)                                                                   \
    static double host_nrm2_col_##SFX(const T *a, int64_t n)                                      \
    {                                                                                              \
        double amax = 0.0, s = 0.0;                                                                \
        int nans = 0;                                                                              \
        _Pragma("omp parallel for if (PAR(n)) reduction(max : amax) reduction(| : nans) schedule(static)") \
        for (int64_t i = 0; i < n; i++) {                                                          \
            amax = fmax(amax, fabs((double)a[i]));                                                 \
            nans |= isnan(a[i]);                                                                   \
        }                                                                                          \
        if (nans)                                                                                  \
            return NAN;                                                                            \
        if (amax == 0.0 || !isfinite(amax))                                                        \
            return amax;                                                                           \
        _Pragma("omp parallel for if (PAR(n)) reduction(+ : s) schedule(static)")                  \
        for (int64_t i = 0; i < n; i++) {                                                          \
            double t = (double)a[i] / amax;                                                        \
            s += t * t;                                                                            \
        }                                                                                          \
        return isnan(s) ? s : amax * sqrt(s);                                                      \
    }

DEFINE_HOST_LOOPS(double, f64)
DEFINE_HOST_LOOPS(float, f32)
DEFINE_HOST_NRM2(double, f64)
DEFINE_HOST_NRM2(float, f32)

int spmv_vec_write(spmv_gpu_ctx *ctx, spmv_vec *v, const void *src, spmv_error *err)
{
    int st = check_one(v, "write", err);
    if (st)
        return st;
    if (GPU(v))
        return spmv_gpu_vec_write(ctx, v, src, err);
    if (spmv_vec_bytes(v))
        memcpy(v->data, src, spmv_vec_bytes(v));
    return SPMV_OK;
}

int spmv_vec_read(spmv_gpu_ctx *ctx, const spmv_vec *v, void *dst, spmv_error *err)
{
    int st = check_one(v, "read", err);
    if (st)
        return st;
    if (GPU(v))
        return spmv_gpu_vec_read(ctx, v, dst, err);
    if (spmv_vec_bytes(v))
        memcpy(dst, v->data, spmv_vec_bytes(v));
    return SPMV_OK;
}

int spmv_vec_fill(spmv_gpu_ctx *ctx, spmv_vec *v, double value, spmv_error *err)
{
    int st = check_one(v, "fill", err);
    if (st)
        return st;
    if (GPU(v))
        return spmv_gpu_vec_fill(ctx, v, value, err);
    if (v->dtype == SPMV_FLOAT64)
        host_fill_f64(v->data, LEN(v), value);
    else
        host_fill_f32(v->data, LEN(v), value);
    return SPMV_OK;
}

int spmv_vec_fill_random(spmv_gpu_ctx *ctx, spmv_vec *v, uint64_t seed, spmv_error *err)
{
    int st = check_one(v, "fill", err);
    if (st)
        return st;
    if (!GPU(v)) {
        size_t col = (size_t)v->n * spmv_dtype_size(v->dtype);
        for (int32_t j = 0; j < v->k; j++)
            spmv_random_vector(v->dtype, v->n, seed + (uint64_t)j * UINT64_C(0x9E3779B97F4A7C15), (char *)v->data + j * col);
        return SPMV_OK;
    }
    /* drawn on the host, so one seed gives the same values on every device */
    size_t bytes = spmv_vec_bytes(v);
    void *h = malloc(bytes ? bytes : 1);
    if (!h)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of host memory drawing %zu bytes of random values", bytes);
    spmv_vec hv = *v;
    hv.device = SPMV_DEVICE_CPU;
    hv.data = h;
    spmv_vec_fill_random(NULL, &hv, seed, err);
    st = spmv_gpu_vec_write(ctx, v, h, err);
    free(h);
    return st;
}

int spmv_vec_copy(spmv_gpu_ctx *ctx, const spmv_vec *x, spmv_vec *y, spmv_error *err)
{
    int st = check_pair(x, y, "copy", err);
    if (st)
        return st;
    if (GPU(x))
        return spmv_gpu_vec_copy(ctx, x, y, err);
    if (x->data != y->data && spmv_vec_bytes(x))
        memcpy(y->data, x->data, spmv_vec_bytes(x));
    return SPMV_OK;
}

int spmv_vec_scal(spmv_gpu_ctx *ctx, double alpha, spmv_vec *x, spmv_error *err)
{
    int st = check_one(x, "scal", err);
    if (st)
        return st;
    if (GPU(x))
        return spmv_gpu_vec_scal(ctx, alpha, x, err);
    if (x->dtype == SPMV_FLOAT64)
        host_scal_f64(x->data, LEN(x), alpha);
    else
        host_scal_f32(x->data, LEN(x), alpha);
    return SPMV_OK;
}

/* y = alpha*x + beta*y on the host; beta == 1 is axpy. */
static void host_axpby(double alpha, const spmv_vec *x, double beta, spmv_vec *y)
{
    int64_t n = LEN(x);
    if (x->dtype == SPMV_FLOAT64) {
        const double *a = x->data;
        double *b = y->data;
        if (beta == 1.0) {
#pragma omp parallel for if (PAR(n)) schedule(static)
            for (int64_t i = 0; i < n; i++)
                b[i] += alpha * a[i];
        } else if (beta == 0.0) { /* y's old values, NaN or not, are not read */
#pragma omp parallel for if (PAR(n)) schedule(static)
            for (int64_t i = 0; i < n; i++)
                b[i] = alpha * a[i];
        } else {
#pragma omp parallel for if (PAR(n)) schedule(static)
            for (int64_t i = 0; i < n; i++)
                b[i] = alpha * a[i] + beta * b[i];
        }
    } else {
        const float *a = x->data;
        float *b = y->data, al = (float)alpha, be = (float)beta;
        if (beta == 0.0) {
#pragma omp parallel for if (PAR(n)) schedule(static)
            for (int64_t i = 0; i < n; i++)
                b[i] = al * a[i];
        } else {
#pragma omp parallel for if (PAR(n)) schedule(static)
            for (int64_t i = 0; i < n; i++)
                b[i] = al * a[i] + be * b[i];
        }
    }
}

int spmv_vec_axpy(spmv_gpu_ctx *ctx, double alpha, const spmv_vec *x, spmv_vec *y, spmv_error *err)
{
    return spmv_vec_axpby(ctx, alpha, x, 1.0, y, err);
}

int spmv_vec_axpby(spmv_gpu_ctx *ctx, double alpha, const spmv_vec *x, double beta, spmv_vec *y, spmv_error *err)
{
    int st = check_pair(x, y, "axpby", err);
    if (st)
        return st;
    if (GPU(x))
        return spmv_gpu_vec_axpby(ctx, alpha, x, beta, y, err);
    host_axpby(alpha, x, beta, y);
    return SPMV_OK;
}

int spmv_vec_mul(spmv_gpu_ctx *ctx, const spmv_vec *x, spmv_vec *y, spmv_error *err)
{
    int st = check_pair(x, y, "mul", err);
    if (st)
        return st;
    if (GPU(x))
        return spmv_gpu_vec_mul(ctx, x, y, err);
    if (x->dtype == SPMV_FLOAT64)
        host_mul_f64(x->data, y->data, LEN(x));
    else
        host_mul_f32(x->data, y->data, LEN(x));
    return SPMV_OK;
}

static double host_dot_col(spmv_dtype dt, const void *x, const void *y, int64_t n)
{
    return dt == SPMV_FLOAT64 ? host_dot_col_f64(x, y, n) : host_dot_col_f32(x, y, n);
}

int spmv_vec_dot(spmv_gpu_ctx *ctx, const spmv_vec *x, const spmv_vec *y, double *out, spmv_error *err)
{
    int st = check_pair(x, y, "dot", err);
    if (st)
        return st;
    if (GPU(x))
        return spmv_gpu_vec_dot(ctx, x, y, out, err);
    size_t col = (size_t)x->n * spmv_dtype_size(x->dtype);
    for (int32_t j = 0; j < x->k; j++)
        out[j] = host_dot_col(x->dtype, (const char *)x->data + j * col, (const char *)y->data + j * col, x->n);
    return SPMV_OK;
}

static double host_nrm2_col(spmv_dtype dt, const void *x, int64_t n)
{
    return dt == SPMV_FLOAT64 ? host_nrm2_col_f64(x, n) : host_nrm2_col_f32(x, n);
}

int spmv_vec_nrm2(spmv_gpu_ctx *ctx, const spmv_vec *x, double *out, spmv_error *err)
{
    int st = check_one(x, "nrm2", err);
    if (st)
        return st;
    if (GPU(x))
        return spmv_gpu_vec_nrm2(ctx, x, out, err);
    size_t col = (size_t)x->n * spmv_dtype_size(x->dtype);
    for (int32_t j = 0; j < x->k; j++)
        out[j] = host_nrm2_col(x->dtype, (const char *)x->data + j * col, x->n);
    return SPMV_OK;
}

int spmv_vec_sync(spmv_gpu_ctx *ctx, spmv_error *err)
{
    return ctx ? spmv_gpu_sync(ctx, err) : SPMV_OK;
}

/* ------------------------------------------------ k columns, each its own */

spmv_vec spmv_vec_column(const spmv_vec *v, int32_t j)
{
    spmv_vec c = *v;
    c.k = 1;
    c.data = (char *)v->data + (size_t)j * (size_t)v->n * spmv_dtype_size(v->dtype);
    return c;
}

#define ON(on, j) (!(on) || (on)[j])

/* A k-column update's scalars: present (any value goes, as in axpby: a
 * solver's breakdown shows in the next reduction, not as an error here),
 * and x and y two blocks (the device kernels read x while writing y). */
static int check_update(const double *s, const spmv_vec *x, const spmv_vec *y, const char *op, spmv_error *err)
{
    if (!s)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s: missing scalars", op);
    if (x->data && x->data == y->data)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s: x and y are one block", op);
    return SPMV_OK;
}

int spmv_vec_axpy_k(spmv_gpu_ctx *ctx, const double *alpha, const spmv_vec *x, spmv_vec *y, const bool *on,
                    spmv_error *err)
{
    int st = check_pair(x, y, "axpy_k", err);
    if (st || (st = check_update(alpha, x, y, "axpy_k", err)))
        return st;
    if (GPU(x))
        return spmv_gpu_vec_axpy_k(ctx, alpha, x, y, on, err);
    for (int32_t j = 0; j < x->k; j++)
        if (ON(on, j)) {
            spmv_vec xj = spmv_vec_column(x, j), yj = spmv_vec_column(y, j);
            host_axpby(alpha[j], &xj, 1.0, &yj);
        }
    return SPMV_OK;
}

int spmv_vec_xpay_k(spmv_gpu_ctx *ctx, const spmv_vec *x, const double *beta, spmv_vec *y, const bool *on,
                    spmv_error *err)
{
    int st = check_pair(x, y, "xpay_k", err);
    if (st || (st = check_update(beta, x, y, "xpay_k", err)))
        return st;
    if (GPU(x))
        return spmv_gpu_vec_xpay_k(ctx, x, beta, y, on, err);
    for (int32_t j = 0; j < x->k; j++)
        if (ON(on, j)) {
            spmv_vec xj = spmv_vec_column(x, j), yj = spmv_vec_column(y, j);
            host_axpby(1.0, &xj, beta[j], &yj);
        }
    return SPMV_OK;
}

/* y_j = d .* x_j: with x and y one block, spmv_vec_mul's own loop. */
#define DEFINE_HOST_DIAG(T, SFX)                                                                   \
    static void host_diag_##SFX(const T *d, const T *x, T *y, int64_t n)                          \
    {                                                                                              \
        _Pragma("omp parallel for if (PAR(n)) schedule(static)")                                   \
        for (int64_t i = 0; i < n; i++)                                                            \
            y[i] = x[i] * d[i];                                                                    \
    }
DEFINE_HOST_DIAG(double, f64)
DEFINE_HOST_DIAG(float, f32)

int spmv_vec_diag_k(spmv_gpu_ctx *ctx, const spmv_vec *d, const spmv_vec *x, spmv_vec *y, const bool *on,
                    spmv_error *err)
{
    int st = check_pair(x, y, "diag_k", err);
    if (st || (st = check_one(d, "diag_k", err)))
        return st;
    spmv_vec like = *x;
    like.k = 1;
    like.data = d->data;
    if (d->k != 1 || (st = check_pair(d, &like, "diag_k (the diagonal against one column of x)", err)))
        return st ? st : spmv_error_set(err, SPMV_ERR_SHAPE, 0, "diag_k: the diagonal has %d columns, not 1", d->k);
    if (GPU(x))
        return spmv_gpu_vec_diag_k(ctx, d, x, y, on, err);
    for (int32_t j = 0; j < x->k; j++)
        if (ON(on, j)) {
            spmv_vec xj = spmv_vec_column(x, j), yj = spmv_vec_column(y, j);
            if (x->dtype == SPMV_FLOAT64)
                host_diag_f64(d->data, xj.data, yj.data, x->n);
            else
                host_diag_f32(d->data, xj.data, yj.data, x->n);
        }
    return SPMV_OK;
}

int spmv_vec_dot_k(spmv_gpu_ctx *ctx, const spmv_vec *x, const spmv_vec *y, const bool *on, double *out,
                   spmv_error *err)
{
    int st = check_pair(x, y, "dot_k", err);
    if (st)
        return st;
    if (!out)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "dot_k: missing output");
    if (GPU(x))
        return spmv_gpu_vec_nrm2_dot_k(ctx, x, y, on, NULL, out, err);
    for (int32_t j = 0; j < x->k; j++) {
        spmv_vec xj = spmv_vec_column(x, j), yj = spmv_vec_column(y, j);
        out[j] = ON(on, j) ? host_dot_col(x->dtype, xj.data, yj.data, x->n) : 0.0;
    }
    return SPMV_OK;
}

int spmv_vec_nrm2_dot_k(spmv_gpu_ctx *ctx, const spmv_vec *x, const spmv_vec *y, const bool *on, double *nrm,
                        double *dot, spmv_error *err)
{
    int st = y ? check_pair(x, y, "nrm2_dot_k", err) : check_one(x, "nrm2_dot_k", err);
    if (st)
        return st;
    if (!nrm || (y && !dot))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "nrm2_dot_k: missing output");
    if (GPU(x))
        return spmv_gpu_vec_nrm2_dot_k(ctx, x, y, on, nrm, y ? dot : NULL, err);
    for (int32_t j = 0; j < x->k; j++) {
        spmv_vec xj = spmv_vec_column(x, j);
        nrm[j] = ON(on, j) ? host_nrm2_col(x->dtype, xj.data, x->n) : 0.0;
        if (y) {
            spmv_vec yj = spmv_vec_column(y, j);
            dot[j] = ON(on, j) ? host_dot_col(x->dtype, xj.data, yj.data, x->n) : 0.0;
        }
    }
    return SPMV_OK;
}
