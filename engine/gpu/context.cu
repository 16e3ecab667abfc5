/* context.cu — GPU discovery, device contexts and device-memory accounting.
 *
 * spmv_gpu_count() asks the CUDA runtime once per process how many devices
 * there are; on a host without a driver or a device it answers 0 and keeps
 * CUDA's own words as the reason (the registry shows it for every GPU
 * kernel). That probe is the backend's only process-wide datum: it is
 * computed once (C++ guarantees a function-local static is initialised
 * exactly once, thread-safely) and never written again.
 *
 * A context belongs to one device and one thread: its stream, its cuSPARSE
 * handle and its byte counter. Every device allocation the backend makes
 * passes gpu_alloc(), which first checks that the device would keep the
 * configured reserve free afterwards: an upload that would not fit fails
 * with SPMV_ERR_DEVICE_MEMORY before CUDA itself runs out.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <new>
#include <cuda_profiler_api.h>
#include <string>

#include "gpu.cuh"

/* ----------------------------------------------------------- discovery */

struct gpu_probe {
    int count;
    std::string reason;
};

static gpu_probe probe_devices(void)
{
    gpu_probe p;
    p.count = 0;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    /* without a GPU the runtime says its driver is too old (there is none):
     * say what the host lacks instead of suggesting an upgrade */
    bool driver = access("/proc/driver/nvidia/version", F_OK) == 0;
    if (e == cudaErrorNoDevice || (e == cudaErrorInsufficientDriver && !driver)) {
        p.reason = "no GPU on this host (no NVIDIA driver is loaded: /proc/driver/nvidia is absent)";
        if (driver)
            p.reason = "no GPU on this host (the NVIDIA driver reports no device)";
        cudaGetLastError();
    } else if (e != cudaSuccess) {
        p.reason = std::string("no CUDA-capable device: ") + cudaGetErrorString(e);
        cudaGetLastError();
    } else if (n <= 0) {
        p.reason = "no CUDA-capable device: the driver reports 0 devices";
    } else {
        p.count = n;
    }
    return p;
}

extern "C" int spmv_gpu_count(const char **reason)
{
    static const gpu_probe probe = probe_devices();
    if (reason)
        *reason = probe.count > 0 ? NULL : probe.reason.c_str();
    return probe.count;
}

/* --------------------------------------------------------------- errors */

int gpu_cuda_error(cudaError_t e, spmv_error *err, const char *what)
{
    int st = e == cudaErrorMemoryAllocation ? SPMV_ERR_DEVICE_MEMORY : SPMV_ERR_DEVICE;
    cudaGetLastError(); /* clear it if it is not sticky */
    return spmv_error_set(err, st, 0, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

int gpu_sparse_error(cusparseStatus_t s, spmv_error *err, const char *what)
{
    int st = s == CUSPARSE_STATUS_ALLOC_FAILED ? SPMV_ERR_DEVICE_MEMORY : SPMV_ERR_DEVICE;
    return spmv_error_set(err, st, 0, "%s: cuSPARSE %s (%s)", what, cusparseGetErrorString(s),
                          cusparseGetErrorName(s));
}

int gpu_check_launch(spmv_error *err, const char *kernel)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        return SPMV_OK;
    return spmv_error_set(err, SPMV_ERR_DEVICE, 0, "launch of %s failed: %s (%s)", kernel,
                          cudaGetErrorString(e), cudaGetErrorName(e));
}

/* ------------------------------------------------------------- contexts */

static int read_properties(spmv_gpu_ctx *c, spmv_error *err)
{
    cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, c->device);
    if (e != cudaSuccess)
        return gpu_cuda_error(e, err, "cudaGetDeviceProperties");
    size_t n = strnlen(prop.name, sizeof c->name - 1); /* CUDA's name field is longer than ours */
    memcpy(c->name, prop.name, n);
    c->name[n] = '\0';
    c->cc_major = prop.major;
    c->cc_minor = prop.minor;
    c->sm_count = prop.multiProcessorCount;
    /* Texture fetches over linear memory address at most this many elements. */
    c->tex1d_linear_max = 1 << 27;
    c->tex_align = prop.textureAlignment > 0 ? prop.textureAlignment : 512;
    return SPMV_OK;
}

extern "C" int spmv_gpu_ctx_new(int device, size_t reserve_bytes, spmv_gpu_ctx **out, spmv_error *err)
{
    const char *why = NULL;
    int n = spmv_gpu_count(&why);
    spmv_gpu_ctx *c = NULL;
    cudaError_t e;
    cusparseStatus_t s;
    int st;
    *out = NULL;
    if (n <= 0)
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "GPU %d: %s", device, why);
    if (device < 0 || device >= n)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "GPU %d does not exist (this host has %d)", device, n);
    c = new (std::nothrow) spmv_gpu_ctx();
    if (!c)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "cannot allocate a GPU context");
    c->device = device;
    c->reserve = reserve_bytes;
    c->limits = spmv_format_limits_default();
    if ((e = cudaSetDevice(device)) != cudaSuccess) {
        st = gpu_cuda_error(e, err, "cudaSetDevice");
        goto fail;
    }
    if ((st = read_properties(c, err)))
        goto fail;
    if ((e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaEventCreate(&c->ev_start)) != cudaSuccess || (e = cudaEventCreate(&c->ev_stop)) != cudaSuccess) {
        st = gpu_cuda_error(e, err, "creating the GPU stream and events");
        goto fail;
    }
    if ((s = cusparseCreate(&c->sparse)) != CUSPARSE_STATUS_SUCCESS ||
        (s = cusparseSetStream(c->sparse, c->stream)) != CUSPARSE_STATUS_SUCCESS) {
        st = gpu_sparse_error(s, err, "creating the cuSPARSE handle");
        goto fail;
    }
    *out = c;
    return SPMV_OK;
fail:
    spmv_gpu_ctx_free(c);
    return st;
}

extern "C" int spmv_gpu_profile(spmv_gpu_ctx *ctx, bool on, spmv_error *err)
{
    cudaSetDevice(ctx->device);
    cudaError_t e = cudaStreamSynchronize(ctx->stream);
    if (e == cudaSuccess)
        e = on ? cudaProfilerStart() : cudaProfilerStop();
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, on ? "cudaProfilerStart" : "cudaProfilerStop");
}

extern "C" void spmv_gpu_ctx_free(spmv_gpu_ctx *ctx)
{
    if (!ctx)
        return;
    cudaSetDevice(ctx->device);
    if (ctx->stream)
        cudaStreamSynchronize(ctx->stream);
    if (ctx->scratch)
        cudaFree(ctx->scratch);
    if (ctx->batch)
        cudaFree(ctx->batch);
    if (ctx->sparse)
        cusparseDestroy(ctx->sparse);
    if (ctx->blas)
        cublasDestroy(ctx->blas);
    if (ctx->dev_scalar)
        cudaFree(ctx->dev_scalar);
    if (ctx->ev_start)
        cudaEventDestroy(ctx->ev_start);
    if (ctx->ev_stop)
        cudaEventDestroy(ctx->ev_stop);
    if (ctx->stream)
        cudaStreamDestroy(ctx->stream);
    cudaGetLastError();
    delete ctx;
}

extern "C" int spmv_gpu_ctx_info(spmv_gpu_ctx *ctx, spmv_gpu_info *info)
{
    size_t free_b = 0, total_b = 0;
    if (!ctx || !info)
        return SPMV_ERR_INVALID;
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "%s", ctx->name);
    info->cc_major = ctx->cc_major;
    info->cc_minor = ctx->cc_minor;
    info->sm_count = ctx->sm_count;
    info->mem_used_by_spmvd = ctx->used;
    info->mem_scratch = ctx->scratch_bytes + ctx->batch_bytes + (ctx->dev_scalar ? GPU_RED_BYTES : 0);
    info->evictions = ctx->evictions;
    if (cudaSetDevice(ctx->device) != cudaSuccess || cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
        cudaGetLastError();
        return SPMV_ERR_DEVICE;
    }
    info->mem_free = free_b;
    info->mem_total = total_b;
    return SPMV_OK;
}

/* ------------------------------------------------------------ allocation */

/* Whether `bytes` more would leave the reserve free. */
static int fits(spmv_gpu_ctx *ctx, size_t bytes, size_t *free_out, spmv_error *err)
{
    size_t free_b = 0, total_b = 0;
    cudaError_t e = cudaMemGetInfo(&free_b, &total_b);
    if (e != cudaSuccess)
        return gpu_cuda_error(e, err, "cudaMemGetInfo");
    *free_out = free_b;
    return bytes <= free_b && free_b - bytes >= ctx->reserve ? SPMV_OK : SPMV_ERR_DEVICE_MEMORY;
}

/* Whether `bytes` more would leave the reserve free, after evicting
 * derived formats (gpu_evict) if that is what it takes. */
static int check_fits(spmv_gpu_ctx *ctx, size_t bytes, const char *what, spmv_error *err)
{
    size_t free_b = 0;
    int st = fits(ctx, bytes, &free_b, err);
    while (st == SPMV_ERR_DEVICE_MEMORY && gpu_evict(ctx))
        st = fits(ctx, bytes, &free_b, err);
    if (st == SPMV_ERR_DEVICE_MEMORY)
        return spmv_error_set(err, SPMV_ERR_DEVICE_MEMORY, 0,
                              "%s: %zu bytes do not fit on GPU %d (%zu bytes free, %zu kept in reserve, "
                              "%zu held by spmvd, no derived format left to evict)",
                              what, bytes, ctx->device, free_b, ctx->reserve, ctx->used);
    return st;
}

/* Adds `delta` bytes of category cat to m (and to its matrix's transpose
 * count when m is a transpose). */
static void account(spmv_gpu_matrix *m, int cat, size_t bytes, bool add)
{
    if (add) {
        m->bytes += bytes;
        m->cat_bytes[cat] += bytes;
        if (m->parent)
            m->parent->cat_bytes[GPU_CAT_TRANSPOSE] += bytes;
    } else {
        m->bytes -= bytes;
        m->cat_bytes[cat] -= bytes;
        if (m->parent)
            m->parent->cat_bytes[GPU_CAT_TRANSPOSE] -= bytes;
    }
}

int gpu_alloc(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, void **out, size_t bytes, const char *what,
              spmv_error *err)
{
    *out = NULL;
    if (bytes == 0)
        return SPMV_OK;
    int st = check_fits(ctx, bytes, what, err);
    if (st)
        return st;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation && gpu_evict(ctx)) { /* fragmentation, or another process */
        cudaGetLastError();
        e = cudaMalloc(&p, bytes);
    }
    if (e != cudaSuccess)
        return gpu_cuda_error(e, err, what);
    try {
        m->allocs.push_back(gpu_alloc_rec{p, bytes, m->cat});
    } catch (...) {
        cudaFree(p);
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "%s: out of host memory", what);
    }
    account(m, m->cat, bytes, true);
    ctx->used += bytes;
    *out = p;
    return SPMV_OK;
}

void gpu_retag(spmv_gpu_matrix *m, const void *p, int cat)
{
    for (gpu_alloc_rec &r : m->allocs)
        if (r.ptr == p && r.cat != cat) {
            m->cat_bytes[r.cat] -= r.bytes;
            m->cat_bytes[cat] += r.bytes;
            r.cat = cat;
        }
}

int gpu_ctx_alloc(spmv_gpu_ctx *ctx, void **out, size_t bytes, const char *what, spmv_error *err)
{
    *out = NULL;
    if (bytes == 0)
        return SPMV_OK;
    int st = check_fits(ctx, bytes, what, err);
    if (st)
        return st;
    cudaError_t e = cudaMalloc(out, bytes);
    if (e != cudaSuccess) {
        *out = NULL;
        return gpu_cuda_error(e, err, what);
    }
    ctx->used += bytes;
    return SPMV_OK;
}

void gpu_ctx_free(spmv_gpu_ctx *ctx, void *p, size_t bytes)
{
    if (!p)
        return;
    cudaFree(p); /* waits for the device: nothing queued still reads it */
    ctx->used -= bytes <= ctx->used ? bytes : ctx->used;
}

void gpu_release(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, void *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < m->allocs.size(); i++) {
        if (m->allocs[i].ptr != p)
            continue;
        cudaFree(p);
        account(m, m->allocs[i].cat, m->allocs[i].bytes, false);
        ctx->used -= m->allocs[i].bytes;
        m->allocs[i] = m->allocs.back();
        m->allocs.pop_back();
        return;
    }
}

int gpu_scratch(spmv_gpu_ctx *ctx, size_t bytes, void **out, spmv_error *err)
{
    if (bytes <= ctx->scratch_bytes && ctx->scratch) {
        *out = ctx->scratch;
        return SPMV_OK;
    }
    /* The stream may still read the old scratch. */
    cudaError_t e = cudaStreamSynchronize(ctx->stream);
    if (e != cudaSuccess)
        return gpu_cuda_error(e, err, "synchronising before growing the scratch buffer");
    if (ctx->scratch) {
        cudaFree(ctx->scratch);
        ctx->used -= ctx->scratch_bytes;
        ctx->scratch = NULL;
        ctx->scratch_bytes = 0;
    }
    int st = check_fits(ctx, bytes, "kernel scratch", err);
    if (st)
        return st;
    if ((e = cudaMalloc(&ctx->scratch, bytes)) != cudaSuccess) {
        ctx->scratch = NULL;
        return gpu_cuda_error(e, err, "kernel scratch");
    }
    ctx->scratch_bytes = bytes;
    ctx->used += bytes;
    *out = ctx->scratch;
    return SPMV_OK;
}
