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

/* The context's device scalar (8 bytes), allocated on first use, zeroed. */
static int scalar_zero(spmv_gpu_ctx *ctx, const char *what, spmv_error *err)
{
    int st;
    if (!ctx->dev_scalar &&
        (st = gpu_ctx_alloc(ctx, (void **)&ctx->dev_scalar, sizeof(double), "the device scalar", err)))
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
