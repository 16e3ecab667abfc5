/* blas.cu — resident vectors on a GPU and the BLAS-1 calls on them.
 *
 * The device half of engine/blas.c: spmv_vec_* check their operands and
 * call these for vectors on a GPU. Everything is queued on the context's
 * one stream, in order with the products; only the calls that hand a
 * number or values to the host (dot, nrm2, read, write) wait for it.
 * float64 dot and nrm2 are cuBLAS's (the library made for the job, bound to
 * the stream, results to the host); float32 reductions use a small kernel
 * of our own that accumulates in float64, which cuBLAS's float32 dot does
 * not. axpby, scal, mul and fill are one-pass kernels (cuBLAS has no axpby:
 * scal + axpy would read y twice). Vector memory is counted in the
 * context's used bytes and keeps the device reserve free, like a matrix's.
 */
#include <math.h>
#include <string.h>

#include "gpu.cuh"

int gpu_blas_handle(spmv_gpu_ctx *ctx, spmv_error *err)
{
    if (ctx->blas)
        return SPMV_OK;
    cublasHandle_t h;
    cublasStatus_t s = cublasCreate(&h);
    if (s == CUBLAS_STATUS_SUCCESS && (s = cublasSetStream(h, ctx->stream)) == CUBLAS_STATUS_SUCCESS &&
        (s = cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST)) == CUBLAS_STATUS_SUCCESS) {
        ctx->blas = h;
        return SPMV_OK;
    }
    if (s != CUBLAS_STATUS_NOT_INITIALIZED)
        cublasDestroy(h);
    return spmv_error_set(err, SPMV_ERR_DEVICE, 0, "cuBLAS: %s (%s)", cublasGetStatusName(s), cublasGetStatusString(s));
}

static int blas_error(cublasStatus_t s, spmv_error *err, const char *what)
{
    return spmv_error_set(err, SPMV_ERR_DEVICE, 0, "%s: %s (%s)", what, cublasGetStatusName(s),
                          cublasGetStatusString(s));
}

static int64_t len(const spmv_vec *v) { return v->n * (int64_t)v->k; }

static unsigned grid_of(int64_t n, int block)
{
    int64_t g = (n + block - 1) / block;
    if (g > 65535 * 16) /* grid-stride loops cover the rest */
        g = 65535 * 16;
    return (unsigned)(g < 1 ? 1 : g);
}

#define BLOCK 256

/* ------------------------------------------------------------ memory */

extern "C" int spmv_gpu_vec_alloc(spmv_gpu_ctx *ctx, spmv_dtype dtype, int64_t n, int32_t k, spmv_vec *out,
                                  spmv_error *err)
{
    memset(out, 0, sizeof *out);
    if (!ctx)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "a GPU vector needs the device's context");
    cudaError_t e = cudaSetDevice(ctx->device);
    if (e != cudaSuccess)
        return gpu_cuda_error(e, err, "cudaSetDevice");
    size_t bytes = (size_t)n * (size_t)k * spmv_dtype_size(dtype);
    void *p = NULL;
    int st = gpu_ctx_alloc(ctx, &p, bytes, "vector", err);
    if (st)
        return st;
    *out = (spmv_vec){SPMV_DEVICE_GPU, dtype, n, k, p};
    return SPMV_OK;
}

/* cudaHostRegisterPortable: the pages are pinned for every device's
 * context, so a region serves matrices on any GPU. */
extern "C" int spmv_gpu_host_pin(void *p, size_t n, spmv_error *err)
{
    cudaError_t e = cudaHostRegister(p, n, cudaHostRegisterPortable);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return spmv_error_set(err, SPMV_ERR_DEVICE, 0, "cudaHostRegister of %zu bytes: %s", n, cudaGetErrorString(e));
    }
    return SPMV_OK;
}

extern "C" void spmv_gpu_host_unpin(void *p)
{
    if (p && cudaHostUnregister(p) != cudaSuccess)
        cudaGetLastError();
}

extern "C" int spmv_gpu_host_alloc(size_t n, void **out, spmv_error *err)
{
    cudaError_t e = cudaHostAlloc(out, n ? n : 1, cudaHostAllocPortable);
    if (e != cudaSuccess) {
        cudaGetLastError();
        *out = NULL;
        return spmv_error_set(err, e == cudaErrorMemoryAllocation ? SPMV_ERR_NOMEM : SPMV_ERR_DEVICE, 0,
                              "cudaHostAlloc of %zu bytes: %s", n, cudaGetErrorString(e));
    }
    return SPMV_OK;
}

extern "C" void spmv_gpu_host_free(void *p)
{
    if (p && cudaFreeHost(p) != cudaSuccess)
        cudaGetLastError();
}

/* cuMemGetAddressRange from the driver the runtime already loaded (no
 * link to libcuda): the size of the allocation an IPC handle opens. */
typedef int (*mem_range_fn)(unsigned long long *base, size_t *size, unsigned long long ptr);

extern "C" int spmv_gpu_ipc_open(int device, const void *handle, void **dptr, size_t *bytes, spmv_error *err)
{
    static_assert(sizeof(cudaIpcMemHandle_t) == SPMV_GPU_IPC_HANDLE_BYTES, "IPC handle size");
    *dptr = NULL;
    *bytes = 0;
    cudaIpcMemHandle_t h;
    memcpy(&h, handle, sizeof h);
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess)
        e = cudaIpcOpenMemHandle(dptr, h, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
        cudaGetLastError();
        *dptr = NULL;
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "cudaIpcOpenMemHandle on GPU %d: %s (a handle from "
                              "cudaIpcGetMemHandle in another process, of memory on this GPU)", device,
                              cudaGetErrorString(e));
    }
    void *fn = NULL;
    cudaDriverEntryPointQueryResult q;
    unsigned long long base = 0;
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || !fn ||
        ((mem_range_fn)fn)(&base, bytes, (unsigned long long)(uintptr_t)*dptr) != 0) {
        cudaGetLastError();
        cudaIpcCloseMemHandle(*dptr);
        *dptr = NULL;
        return spmv_error_set(err, SPMV_ERR_DEVICE, 0, "cuMemGetAddressRange of an IPC allocation failed");
    }
    return SPMV_OK;
}

extern "C" void spmv_gpu_ipc_close(int device, void *dptr)
{
    if (dptr && (cudaSetDevice(device) != cudaSuccess || cudaIpcCloseMemHandle(dptr) != cudaSuccess))
        cudaGetLastError();
}

extern "C" void spmv_gpu_vec_free(spmv_gpu_ctx *ctx, spmv_vec *v)
{
    if (!ctx || !v || !v->data)
        return;
    cudaSetDevice(ctx->device);
    gpu_ctx_free(ctx, v->data, spmv_vec_bytes(v));
    cudaGetLastError();
    v->data = NULL;
}

extern "C" int spmv_gpu_vec_write(spmv_gpu_ctx *ctx, spmv_vec *v, const void *src, spmv_error *err)
{
    size_t bytes = spmv_vec_bytes(v);
    cudaError_t e = bytes ? cudaMemcpyAsync(v->data, src, bytes, cudaMemcpyHostToDevice, ctx->stream) : cudaSuccess;
    if (e == cudaSuccess) /* the caller may free src when we return */
        e = cudaStreamSynchronize(ctx->stream);
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, "copying a vector to the device");
}

extern "C" int spmv_gpu_vec_read(spmv_gpu_ctx *ctx, const spmv_vec *v, void *dst, spmv_error *err)
{
    size_t bytes = spmv_vec_bytes(v);
    cudaError_t e = bytes ? cudaMemcpyAsync(dst, v->data, bytes, cudaMemcpyDeviceToHost, ctx->stream) : cudaSuccess;
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(ctx->stream);
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, "copying a vector from the device");
}

extern "C" int spmv_gpu_sync(spmv_gpu_ctx *ctx, spmv_error *err)
{
    cudaError_t e = cudaStreamSynchronize(ctx->stream);
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, "waiting for the device");
}

/* ------------------------------------------------------------ kernels */

template <typename T> __global__ void fill_kernel(int64_t n, T value, T *x)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        x[i] = value;
}

template <typename T> __global__ void scal_kernel(int64_t n, T alpha, T *x)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        x[i] *= alpha;
}

/* y = alpha*x + beta*y; with beta == 0 y is not read (it may hold NaN). */
template <typename T>
__global__ void axpby_kernel(int64_t n, T alpha, const T *__restrict__ x, T beta, T *__restrict__ y)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = beta == T(0) ? alpha * x[i] : alpha * x[i] + beta * y[i];
}

/* The same when x and y are one buffer (axpy of a vector onto itself). */
template <typename T> __global__ void axpby_alias_kernel(int64_t n, T alpha, T beta, T *y)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = (alpha + beta) * y[i];
}

template <typename T> __global__ void mul_kernel(int64_t n, const T *x, T *y)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] *= x[i];
}

/* sum x_i*y_i in float64 into *out (zeroed first), one atomic per block. */
template <typename T> __global__ void dot_kernel(int64_t n, const T *x, const T *y, double *out)
{
    double s = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        s += (double)x[i] * (double)y[i];
    s = gpu_group_sum(s, GPU_WARP);
    __shared__ double part[BLOCK / GPU_WARP];
    int lane = threadIdx.x % GPU_WARP, warp = threadIdx.x / GPU_WARP;
    if (lane == 0)
        part[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = lane < (int)(blockDim.x / GPU_WARP) ? part[lane] : 0.0;
        s = gpu_group_sum(s, GPU_WARP);
        if (lane == 0)
            atomicAdd(out, s);
    }
}

template <typename T> static void launch_fill(spmv_gpu_ctx *ctx, spmv_vec *v, double value)
{
    fill_kernel<T><<<grid_of(len(v), BLOCK), BLOCK, 0, ctx->stream>>>(len(v), (T)value, (T *)v->data);
}

extern "C" int spmv_gpu_vec_fill(spmv_gpu_ctx *ctx, spmv_vec *v, double value, spmv_error *err)
{
    if (len(v) == 0)
        return SPMV_OK;
    if (v->dtype == SPMV_FLOAT64)
        launch_fill<double>(ctx, v, value);
    else
        launch_fill<float>(ctx, v, value);
    return gpu_check_launch(err, "fill");
}

extern "C" int spmv_gpu_vec_copy(spmv_gpu_ctx *ctx, const spmv_vec *x, spmv_vec *y, spmv_error *err)
{
    size_t bytes = spmv_vec_bytes(x);
    if (!bytes || x->data == y->data)
        return SPMV_OK;
    cudaError_t e = cudaMemcpyAsync(y->data, x->data, bytes, cudaMemcpyDeviceToDevice, ctx->stream);
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, "copy");
}

extern "C" int spmv_gpu_vec_scal(spmv_gpu_ctx *ctx, double alpha, spmv_vec *x, spmv_error *err)
{
    if (len(x) == 0)
        return SPMV_OK;
    if (x->dtype == SPMV_FLOAT64)
        scal_kernel<double><<<grid_of(len(x), BLOCK), BLOCK, 0, ctx->stream>>>(len(x), alpha, (double *)x->data);
    else
        scal_kernel<float><<<grid_of(len(x), BLOCK), BLOCK, 0, ctx->stream>>>(len(x), (float)alpha, (float *)x->data);
    return gpu_check_launch(err, "scal");
}

template <typename T>
static void launch_axpby(spmv_gpu_ctx *ctx, double alpha, const spmv_vec *x, double beta, spmv_vec *y)
{
    unsigned g = grid_of(len(x), BLOCK);
    if (x->data == y->data)
        axpby_alias_kernel<T><<<g, BLOCK, 0, ctx->stream>>>(len(x), (T)alpha, (T)beta, (T *)y->data);
    else
        axpby_kernel<T><<<g, BLOCK, 0, ctx->stream>>>(len(x), (T)alpha, (const T *)x->data, (T)beta, (T *)y->data);
}

extern "C" int spmv_gpu_vec_axpby(spmv_gpu_ctx *ctx, double alpha, const spmv_vec *x, double beta, spmv_vec *y,
                                  spmv_error *err)
{
    if (len(x) == 0)
        return SPMV_OK;
    if (x->dtype == SPMV_FLOAT64)
        launch_axpby<double>(ctx, alpha, x, beta, y);
    else
        launch_axpby<float>(ctx, alpha, x, beta, y);
    return gpu_check_launch(err, "axpby");
}

extern "C" int spmv_gpu_vec_mul(spmv_gpu_ctx *ctx, const spmv_vec *x, spmv_vec *y, spmv_error *err)
{
    if (len(x) == 0)
        return SPMV_OK;
    if (x->dtype == SPMV_FLOAT64)
        mul_kernel<double><<<grid_of(len(x), BLOCK), BLOCK, 0, ctx->stream>>>(len(x), (const double *)x->data,
                                                                               (double *)y->data);
    else
        mul_kernel<float><<<grid_of(len(x), BLOCK), BLOCK, 0, ctx->stream>>>(len(x), (const float *)x->data,
                                                                              (float *)y->data);
    return gpu_check_launch(err, "mul");
}

/* The context's reduction area (GPU_RED_BYTES), allocated on first use
 * with its counters zeroed (the k-column reductions leave them zero). */
static int red_area(spmv_gpu_ctx *ctx, const char *what, spmv_error *err)
{
    if (ctx->dev_scalar)
        return SPMV_OK;
    int st = gpu_ctx_alloc(ctx, (void **)&ctx->dev_scalar, GPU_RED_BYTES, "the reductions' area", err);
    if (st)
        return st;
    cudaError_t e = cudaMemsetAsync(ctx->dev_scalar, 0, GPU_RED_BYTES, ctx->stream);
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, what);
}

/* The context's device scalar (8 bytes at the area's start), zeroed. */
static int scalar_zero(spmv_gpu_ctx *ctx, const char *what, spmv_error *err)
{
    int st = red_area(ctx, what, err);
    if (st)
        return st;
    cudaError_t e = cudaMemsetAsync(ctx->dev_scalar, 0, sizeof(double), ctx->stream);
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, what);
}

/* Bit 2 where x holds a NaN, bit 1 where it holds an infinity: cuBLAS's
 * nrm2 scales by the largest magnitude and need not carry a NaN through
 * (the host's norm is NaN for any NaN, Inf for any infinity). */
static __global__ void nonfinite_kernel(int64_t n, const double *x, unsigned *flags)
{
    unsigned f = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        f |= isnan(x[i]) ? 2u : isinf(x[i]) ? 1u : 0u;
    if (f)
        atomicOr(flags, f);
}

static int nonfinite64(spmv_gpu_ctx *ctx, int64_t n, const double *x, unsigned *flags, spmv_error *err)
{
    int st = scalar_zero(ctx, "nrm2", err);
    if (st)
        return st;
    *flags = 0;
    if (n == 0)
        return SPMV_OK;
    nonfinite_kernel<<<grid_of(n, BLOCK) > 4096 ? 4096 : grid_of(n, BLOCK), BLOCK, 0, ctx->stream>>>(
        n, x, (unsigned *)ctx->dev_scalar);
    if ((st = gpu_check_launch(err, "nrm2")))
        return st;
    cudaError_t e;
    if ((e = cudaMemcpyAsync(flags, ctx->dev_scalar, sizeof *flags, cudaMemcpyDeviceToHost, ctx->stream)) !=
            cudaSuccess ||
        (e = cudaStreamSynchronize(ctx->stream)) != cudaSuccess)
        return gpu_cuda_error(e, err, "nrm2");
    return SPMV_OK;
}

/* float32 column reduction in float64 through the context's device scalar
 * (a sum: NaN and infinities carry through). */
static int dot32(spmv_gpu_ctx *ctx, int64_t n, const float *x, const float *y, double *out, spmv_error *err)
{
    int st = scalar_zero(ctx, "dot", err);
    cudaError_t e;
    if (st)
        return st;
    if (n > 0) {
        dot_kernel<float><<<grid_of(n, BLOCK) > 4096 ? 4096 : grid_of(n, BLOCK), BLOCK, 0, ctx->stream>>>(
            n, x, y, ctx->dev_scalar);
        if ((st = gpu_check_launch(err, "dot")))
            return st;
    }
    if ((e = cudaMemcpyAsync(out, ctx->dev_scalar, sizeof(double), cudaMemcpyDeviceToHost, ctx->stream)) !=
            cudaSuccess ||
        (e = cudaStreamSynchronize(ctx->stream)) != cudaSuccess)
        return gpu_cuda_error(e, err, "dot");
    return SPMV_OK;
}

extern "C" int spmv_gpu_vec_dot(spmv_gpu_ctx *ctx, const spmv_vec *x, const spmv_vec *y, double *out,
                                spmv_error *err)
{
    if (x->k > 1) /* one launch and one copy for the k columns */
        return spmv_gpu_vec_nrm2_dot_k(ctx, x, y, NULL, NULL, out, err);
    int st = gpu_blas_handle(ctx, err);
    if (st)
        return st;
    size_t vs = spmv_dtype_size(x->dtype);
    for (int32_t j = 0; j < x->k; j++) {
        const char *xj = (const char *)x->data + (size_t)j * x->n * vs, *yj = (const char *)y->data + (size_t)j * x->n * vs;
        if (x->dtype == SPMV_FLOAT32) {
            if ((st = dot32(ctx, x->n, (const float *)xj, (const float *)yj, &out[j], err)))
                return st;
            continue;
        }
        if (x->n > INT32_MAX)
            return spmv_error_set(err, SPMV_ERR_LIMIT, 0, "dot: %lld values exceed cuBLAS's 32-bit count",
                                  (long long)x->n);
        out[j] = 0; /* a zero-length vector */
        cublasStatus_t s = x->n ? cublasDdot(ctx->blas, (int)x->n, (const double *)xj, 1, (const double *)yj, 1, &out[j])
                                : CUBLAS_STATUS_SUCCESS;
        if (s != CUBLAS_STATUS_SUCCESS)
            return blas_error(s, err, "cublasDdot");
    }
    return SPMV_OK;
}

extern "C" int spmv_gpu_vec_nrm2(spmv_gpu_ctx *ctx, const spmv_vec *x, double *out, spmv_error *err)
{
    if (x->k > 1)
        return spmv_gpu_vec_nrm2_dot_k(ctx, x, NULL, NULL, out, NULL, err);
    int st = gpu_blas_handle(ctx, err);
    if (st)
        return st;
    size_t vs = spmv_dtype_size(x->dtype);
    for (int32_t j = 0; j < x->k; j++) {
        const char *xj = (const char *)x->data + (size_t)j * x->n * vs;
        if (x->dtype == SPMV_FLOAT32) {
            double ss;
            if ((st = dot32(ctx, x->n, (const float *)xj, (const float *)xj, &ss, err)))
                return st;
            out[j] = sqrt(ss);
            continue;
        }
        if (x->n > INT32_MAX)
            return spmv_error_set(err, SPMV_ERR_LIMIT, 0, "nrm2: %lld values exceed cuBLAS's 32-bit count",
                                  (long long)x->n);
        out[j] = 0;
        cublasStatus_t s = x->n ? cublasDnrm2(ctx->blas, (int)x->n, (const double *)xj, 1, &out[j])
                                : CUBLAS_STATUS_SUCCESS;
        if (s != CUBLAS_STATUS_SUCCESS)
            return blas_error(s, err, "cublasDnrm2");
        unsigned flags;
        if ((st = nonfinite64(ctx, x->n, (const double *)xj, &flags, err)))
            return st;
        out[j] = flags & 2u ? NAN : flags & 1u ? INFINITY : out[j];
    }
    return SPMV_OK;
}

/* ------------------------------------------------- k columns at once
 *
 * The lockstep's calls (engine/krylov_block.c): a 2-D grid, blockIdx.y
 * the column, its scalar and its flag passed by value in the launch (no
 * copy to the device first), a masked column's blocks returning at once.
 * The reductions are deterministic: each block writes its partial sums,
 * the last block of a column to finish (a counter per column, reset by
 * that block) adds them in block order, so one input gives one answer
 * bit for bit, and one copy brings every column's results to the host. */

struct colscal {
    double s[SPMV_MAX_K];
    unsigned long long on; /* bit j: column j runs */
};

static colscal colscal_of(const double *s, const bool *on, int32_t k)
{
    colscal c;
    memset(&c, 0, sizeof c);
    for (int32_t j = 0; j < k; j++) {
        c.s[j] = s ? s[j] : 0.0;
        if (!on || on[j])
            c.on |= 1ull << j;
    }
    return c;
}

/* The k of a k-column call: 1..SPMV_MAX_K (the scalars and the mask
 * travel in the launch, the results in the reductions' area). */
static int k_fits(const spmv_vec *x, const char *op, spmv_error *err)
{
    if (x->k >= 1 && x->k <= SPMV_MAX_K)
        return SPMV_OK;
    return spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s: %d columns (1..%d)", op, x->k, SPMV_MAX_K);
}

static dim3 grid_k(int64_t n, int32_t k, unsigned cap)
{
    unsigned g = grid_of(n, BLOCK);
    return dim3(g < cap ? g : cap, (unsigned)k);
}

#define COLUMN_LOOP(n) for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); \
                            i += (int64_t)gridDim.x * blockDim.x)

template <typename T>
__global__ void axpy_k_kernel(int64_t n, colscal a, const T *__restrict__ x, T *__restrict__ y)
{
    int j = blockIdx.y;
    if (!(a.on >> j & 1ull))
        return;
    T al = (T)a.s[j];
    const T *xj = x + (size_t)j * n;
    T *yj = y + (size_t)j * n;
    COLUMN_LOOP(n)
    yj[i] += al * xj[i];
}

template <typename T>
__global__ void xpay_k_kernel(int64_t n, const T *__restrict__ x, colscal b, T *__restrict__ y)
{
    int j = blockIdx.y;
    if (!(b.on >> j & 1ull))
        return;
    T be = (T)b.s[j];
    const T *xj = x + (size_t)j * n;
    T *yj = y + (size_t)j * n;
    if (be == T(0)) {
        COLUMN_LOOP(n)
        yj[i] = xj[i];
    } else {
        COLUMN_LOOP(n)
        yj[i] = xj[i] + be * yj[i];
    }
}

/* x and y may be one block: no __restrict__. */
template <typename T> __global__ void diag_k_kernel(int64_t n, colscal m, const T *d, const T *x, T *y)
{
    int j = blockIdx.y;
    if (!(m.on >> j & 1ull))
        return;
    const T *xj = x + (size_t)j * n;
    T *yj = y + (size_t)j * n;
    COLUMN_LOOP(n)
    yj[i] = xj[i] * d[i];
}

/* The block's sum of v, in thread 0 (every thread calls it). */
static __device__ double block_sum(double v)
{
    __shared__ double part[BLOCK / GPU_WARP];
    int lane = threadIdx.x % GPU_WARP, warp = threadIdx.x / GPU_WARP;
    v = gpu_group_sum(v, GPU_WARP);
    __syncthreads(); /* part may still be read by a previous call */
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)(blockDim.x / GPU_WARP) ? part[lane] : 0.0;
        v = gpu_group_sum(v, GPU_WARP);
    }
    return v;
}

/* Column j's sums x·y (DOT) and x·x (NRM) in float64: partials in
 * part[(2j + s) * GPU_RED_BLOCKS + block], the column's results in
 * out[j] (x·y) and out[k + j] (x·x) by its last block. */
template <typename T, bool DOT, bool NRM>
__global__ void __launch_bounds__(BLOCK) reduce_k_kernel(int64_t n, int32_t k, unsigned long long on, const T *x,
                                                         const T *y, double *part, unsigned *count, double *out)
{
    int j = blockIdx.y;
    if (!(on >> j & 1ull))
        return;
    const T *xj = x + (size_t)j * n;
    const T *yj = DOT ? y + (size_t)j * n : NULL;
    double sd = 0, sn = 0;
    COLUMN_LOOP(n) {
        double a = (double)xj[i];
        if (DOT)
            sd += a * (double)yj[i];
        if (NRM)
            sn += a * a;
    }
    if (DOT)
        sd = block_sum(sd);
    if (NRM)
        sn = block_sum(sn);
    __shared__ bool last;
    if (threadIdx.x == 0) {
        part[(2 * j) * GPU_RED_BLOCKS + blockIdx.x] = sd;
        part[(2 * j + 1) * GPU_RED_BLOCKS + blockIdx.x] = sn;
        __threadfence(); /* the partials are seen before the count */
        last = atomicAdd(&count[j], 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last)
        return;
    __threadfence();
    sd = sn = 0;
    for (unsigned b = threadIdx.x; b < gridDim.x; b += blockDim.x) {
        if (DOT)
            sd += __ldcg(&part[(2 * j) * GPU_RED_BLOCKS + b]);
        if (NRM)
            sn += __ldcg(&part[(2 * j + 1) * GPU_RED_BLOCKS + b]);
    }
    if (DOT)
        sd = block_sum(sd);
    if (NRM)
        sn = block_sum(sn);
    if (threadIdx.x == 0) {
        out[j] = sd;
        out[k + j] = sn;
        count[j] = 0;
    }
}

template <typename T>
static void launch_reduce(spmv_gpu_ctx *ctx, const spmv_vec *x, const spmv_vec *y, bool nrm, unsigned long long on)
{
    dim3 g = grid_k(x->n, x->k, GPU_RED_BLOCKS);
    double *out = ctx->dev_scalar + 1, *part = out + 2 * SPMV_MAX_K;
    unsigned *count = (unsigned *)(part + GPU_RED_PARTS);
    const T *xd = (const T *)x->data, *yd = y ? (const T *)y->data : NULL;
    if (y && nrm)
        reduce_k_kernel<T, true, true><<<g, BLOCK, 0, ctx->stream>>>(x->n, x->k, on, xd, yd, part, count, out);
    else if (y)
        reduce_k_kernel<T, true, false><<<g, BLOCK, 0, ctx->stream>>>(x->n, x->k, on, xd, yd, part, count, out);
    else
        reduce_k_kernel<T, false, true><<<g, BLOCK, 0, ctx->stream>>>(x->n, x->k, on, xd, yd, part, count, out);
}

/* ||x_j|| from its float64 sum of squares, which is exact enough unless
 * it over- or underflowed (float64 values past 1e154 or all under 1e-140):
 * then cuBLAS's scaled norm of that column (and its NaN/Inf flags), as
 * the one-column call gives. A NaN anywhere is NaN already. */
static int norm_of(spmv_gpu_ctx *ctx, const spmv_vec *x, int32_t j, double ss, double *out, spmv_error *err)
{
    if (x->dtype == SPMV_FLOAT32 || x->n == 0 || isnan(ss) || (isfinite(ss) && ss >= 1e-280)) {
        *out = sqrt(ss);
        return SPMV_OK;
    }
    spmv_vec c = *x;
    c.k = 1;
    c.data = (char *)x->data + (size_t)j * (size_t)x->n * spmv_dtype_size(x->dtype);
    return spmv_gpu_vec_nrm2(ctx, &c, out, err);
}

extern "C" int spmv_gpu_vec_nrm2_dot_k(spmv_gpu_ctx *ctx, const spmv_vec *x, const spmv_vec *y, const bool *on,
                                       double *nrm, double *dot, spmv_error *err)
{
    int st = k_fits(x, "nrm2_dot_k", err);
    if (st)
        return st;
    int32_t k = x->k;
    colscal m = colscal_of(NULL, on, k);
    double res[2 * SPMV_MAX_K];
    for (int32_t j = 0; j < 2 * k; j++)
        res[j] = 0.0;
    bool want_dot = y && dot;
    if ((st = red_area(ctx, "nrm2_dot_k", err)))
        return st;
    if (x->n > 0 && m.on) {
        if (x->dtype == SPMV_FLOAT64)
            launch_reduce<double>(ctx, x, want_dot ? y : NULL, nrm != NULL, m.on);
        else
            launch_reduce<float>(ctx, x, want_dot ? y : NULL, nrm != NULL, m.on);
        if ((st = gpu_check_launch(err, "nrm2_dot_k")))
            return st;
        cudaError_t e;
        if ((e = cudaMemcpyAsync(res, ctx->dev_scalar + 1, 2 * (size_t)k * sizeof(double), cudaMemcpyDeviceToHost,
                                 ctx->stream)) != cudaSuccess ||
            (e = cudaStreamSynchronize(ctx->stream)) != cudaSuccess)
            return gpu_cuda_error(e, err, "nrm2_dot_k");
    }
    for (int32_t j = 0; j < k; j++) {
        bool run = m.on >> j & 1ull;
        if (want_dot)
            dot[j] = run ? res[j] : 0.0;
        if (nrm) {
            nrm[j] = 0.0;
            if (run && (st = norm_of(ctx, x, j, res[k + j], &nrm[j], err)))
                return st;
        }
    }
    return SPMV_OK;
}

extern "C" int spmv_gpu_vec_axpy_k(spmv_gpu_ctx *ctx, const double *alpha, const spmv_vec *x, spmv_vec *y,
                                   const bool *on, spmv_error *err)
{
    int st = k_fits(x, "axpy_k", err);
    if (st)
        return st;
    colscal a = colscal_of(alpha, on, x->k);
    if (x->n == 0 || !a.on)
        return SPMV_OK;
    dim3 g = grid_k(x->n, x->k, 65535u * 16u);
    if (x->dtype == SPMV_FLOAT64)
        axpy_k_kernel<double><<<g, BLOCK, 0, ctx->stream>>>(x->n, a, (const double *)x->data, (double *)y->data);
    else
        axpy_k_kernel<float><<<g, BLOCK, 0, ctx->stream>>>(x->n, a, (const float *)x->data, (float *)y->data);
    return gpu_check_launch(err, "axpy_k");
}

extern "C" int spmv_gpu_vec_xpay_k(spmv_gpu_ctx *ctx, const spmv_vec *x, const double *beta, spmv_vec *y,
                                   const bool *on, spmv_error *err)
{
    int st = k_fits(x, "xpay_k", err);
    if (st)
        return st;
    colscal b = colscal_of(beta, on, x->k);
    if (x->n == 0 || !b.on)
        return SPMV_OK;
    dim3 g = grid_k(x->n, x->k, 65535u * 16u);
    if (x->dtype == SPMV_FLOAT64)
        xpay_k_kernel<double><<<g, BLOCK, 0, ctx->stream>>>(x->n, (const double *)x->data, b, (double *)y->data);
    else
        xpay_k_kernel<float><<<g, BLOCK, 0, ctx->stream>>>(x->n, (const float *)x->data, b, (float *)y->data);
    return gpu_check_launch(err, "xpay_k");
}

extern "C" int spmv_gpu_vec_diag_k(spmv_gpu_ctx *ctx, const spmv_vec *d, const spmv_vec *x, spmv_vec *y,
                                   const bool *on, spmv_error *err)
{
    int st = k_fits(x, "diag_k", err);
    if (st)
        return st;
    colscal m = colscal_of(NULL, on, x->k);
    if (x->n == 0 || !m.on)
        return SPMV_OK;
    dim3 g = grid_k(x->n, x->k, 65535u * 16u);
    if (x->dtype == SPMV_FLOAT64)
        diag_k_kernel<double><<<g, BLOCK, 0, ctx->stream>>>(x->n, m, (const double *)d->data,
                                                             (const double *)x->data, (double *)y->data);
    else
        diag_k_kernel<float><<<g, BLOCK, 0, ctx->stream>>>(x->n, m, (const float *)d->data, (const float *)x->data,
                                                            (float *)y->data);
    return gpu_check_launch(err, "diag_k");
}
