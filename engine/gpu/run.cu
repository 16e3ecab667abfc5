/* run.cu — spmv_gpu_run: one multiply job on a resident matrix.
 *
 * The registry (engine/registry.c) names every GPU kernel and its
 * parameters; this file maps each name to its launcher (and the optional
 * prepare step that builds what the kernel caches: a format made on first
 * use, an HLL of another hack size, adaptive row blocks, cuSPARSE buffers
 * and preprocessing, a texture object). A new or faster kernel is one more
 * launcher and one more row of `impls`.
 *
 * A run: x is copied into the matrix's x buffer; y on the device is
 * poisoned (all bits set: a NaN in both dtypes), so a kernel that leaves a
 * row unwritten shows as NaN rather than as last run's answer; prepare;
 * `warmup` untimed launches; `runs` launches each between two CUDA events
 * (so a timing is the kernel alone, including any zeroing of y the kernel
 * needs); y copied back. Statistics come from spmv_stats_compute with the
 * bytes of the format as held on the device plus x and y once.
 */
#include <stdlib.h>
#include <string.h>

#include "gpu.cuh"

struct gpu_kernel_impl {
    const char *name;
    spmv_format format;
    gpu_prepare_fn prepare;
    gpu_launch_fn launch;
};

static const struct gpu_kernel_impl impls[] = {
    {"gpu.csr.scalar", SPMV_FMT_CSR, NULL, gpu_csr_scalar},
    {"gpu.csr.warp_buffer", SPMV_FMT_CSR, NULL, gpu_csr_warp_buffer},
    {"gpu.csr.vector", SPMV_FMT_CSR, NULL, gpu_csr_vector},
    {"gpu.csr.tiled", SPMV_FMT_CSR, NULL, gpu_csr_tiled},
    {"gpu.csr.texture", SPMV_FMT_CSR, gpu_csr_texture_prepare, gpu_csr_texture},
    {"gpu.csr.adaptive", SPMV_FMT_CSR, gpu_csr_adaptive_prepare, gpu_csr_adaptive},
    {"gpu.csr.merge", SPMV_FMT_CSR, NULL, gpu_csr_merge},
    {"gpu.csr.light", SPMV_FMT_CSR, gpu_csr_light_prepare, gpu_csr_light},
    {"gpu.csr.binned", SPMV_FMT_CSR, gpu_csr_binned_prepare, gpu_csr_binned},
    {"gpu.ell", SPMV_FMT_ELL, NULL, gpu_ell_run},
    {"gpu.hll", SPMV_FMT_HLL, NULL, gpu_hll_run},
    {"gpu.coo.atomic", SPMV_FMT_COO, NULL, gpu_coo_atomic},
    {"gpu.coo.sliced", SPMV_FMT_COO, NULL, gpu_coo_sliced},
    {"gpu.hyb", SPMV_FMT_HYB, NULL, gpu_hyb_run},
    {"cusparse.csr", SPMV_FMT_CSR, gpu_cusparse_csr_prepare, gpu_cusparse_csr},
    {"cusparse.coo", SPMV_FMT_COO, gpu_cusparse_coo_prepare, gpu_cusparse_coo},
    {"cusparse.sell", SPMV_FMT_HLL, gpu_cusparse_sell_prepare, gpu_cusparse_sell},
};

static const struct gpu_kernel_impl *find_impl(const char *name)
{
    for (size_t i = 0; i < sizeof impls / sizeof impls[0]; i++)
        if (strcmp(impls[i].name, name) == 0)
            return &impls[i];
    return NULL;
}

/* The format held for the kernel (built now if missing) and its bytes. */
static int ready_format(struct gpu_launch *l, const struct gpu_kernel_impl *impl, size_t *fmt_bytes, spmv_error *err)
{
    spmv_gpu_matrix *m = l->m;
    int st;
    if (impl->format == SPMV_FMT_HLL) {
        int32_t hack = l->p.v[SPMV_PARAM_HACK_SIZE] ? l->p.v[SPMV_PARAM_HACK_SIZE] : m->hack_size;
        if ((st = gpu_get_hll(l->ctx, m, hack, &l->hll, err)))
            return st;
        *fmt_bytes = gpu_hll_bytes(m, l->hll);
        return SPMV_OK;
    }
    if ((st = gpu_ensure_format(l->ctx, m, impl->format, err)))
        return st;
    *fmt_bytes = gpu_format_bytes(m, impl->format);
    return SPMV_OK;
}

static int check_run_args(spmv_gpu_ctx *ctx, const spmv_kernel *k, spmv_gpu_matrix *m, const void *x, void *y,
                          int32_t warmup, int32_t runs, spmv_error *err)
{
    if (!ctx || !k || !m)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "GPU run: missing context, kernel or matrix");
    if (k->device != SPMV_DEVICE_GPU)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s is not a GPU kernel", k->name);
    if (k->op != SPMV_OP_SPMV)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s computes C = A*B (%s), not y = A*x", k->name,
                              spmv_op_name(k->op));
    if ((m->cols > 0 && !x) || (m->rows > 0 && !y))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "GPU run: missing x or y");
    if (warmup < 0 || runs < 1 || runs > 1000000 || warmup > 1000000)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "GPU run: warmup %d / runs %d out of range (runs 1..1000000)",
                              warmup, runs);
    return SPMV_OK;
}

/* Copies x in and poisons y on the device. */
static int stage_operands(struct gpu_launch *l, const void *x, spmv_error *err)
{
    spmv_gpu_matrix *m = l->m;
    size_t vs = spmv_dtype_size(m->dtype);
    cudaError_t e = cudaSuccess;
    if (m->cols > 0)
        e = cudaMemcpyAsync(m->x, x, (size_t)m->cols * vs, cudaMemcpyHostToDevice, l->ctx->stream);
    if (e == cudaSuccess && m->rows > 0)
        e = cudaMemsetAsync(m->y, 0xff, (size_t)m->rows * vs, l->ctx->stream);
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, "copying x to the device");
}

/* `runs` launches, each timed between two events. */
static int timed_runs(struct gpu_launch *l, const struct gpu_kernel_impl *impl, int32_t runs, double *times,
                      spmv_error *err)
{
    spmv_gpu_ctx *ctx = l->ctx;
    for (int32_t i = 0; i < runs; i++) {
        cudaError_t e = cudaEventRecord(ctx->ev_start, ctx->stream);
        int st = e == cudaSuccess ? impl->launch(l, err) : gpu_cuda_error(e, err, "cudaEventRecord");
        if (st)
            return st;
        float ms = 0;
        if ((e = cudaEventRecord(ctx->ev_stop, ctx->stream)) != cudaSuccess ||
            (e = cudaEventSynchronize(ctx->ev_stop)) != cudaSuccess ||
            (e = cudaEventElapsedTime(&ms, ctx->ev_start, ctx->ev_stop)) != cudaSuccess)
            return gpu_cuda_error(e, err, impl->name);
        times[i] = ms;
    }
    return SPMV_OK;
}

extern "C" int spmv_gpu_run(spmv_gpu_ctx *ctx, const spmv_kernel *k, spmv_gpu_matrix *m, const spmv_params *p,
                            const void *x, void *y, int32_t warmup, int32_t runs, spmv_stats *stats,
                            spmv_error *err)
{
    struct gpu_launch l;
    const struct gpu_kernel_impl *impl;
    double *times = NULL;
    size_t fmt_bytes = 0, vs;
    cudaError_t e;
    int st;
    if ((st = check_run_args(ctx, k, m, x, y, warmup, runs, err)))
        return st;
    if (!(impl = find_impl(k->name)))
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s has no GPU implementation in this build", k->name);
    memset(&l, 0, sizeof l);
    if ((st = spmv_params_resolve(k, p, &l.p, err)))
        return st;
    /* An HLL kernel without an explicit hack_size uses the upload's. */
    if ((k->params & (1u << SPMV_PARAM_HACK_SIZE)) && !(p && p->v[SPMV_PARAM_HACK_SIZE]))
        l.p.v[SPMV_PARAM_HACK_SIZE] = m->hack_size;
    l.ctx = ctx;
    l.m = m;
    l.block = l.p.v[SPMV_PARAM_BLOCK_SIZE] > 0 ? l.p.v[SPMV_PARAM_BLOCK_SIZE] : 256;
    if ((e = cudaSetDevice(ctx->device)) != cudaSuccess)
        return gpu_cuda_error(e, err, "cudaSetDevice");
    if (!(times = (double *)malloc((size_t)runs * sizeof *times)))
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "GPU run: cannot allocate %d timings", runs);
    if ((st = ready_format(&l, impl, &fmt_bytes, err)) || (st = stage_operands(&l, x, err)) ||
        (impl->prepare && (st = impl->prepare(&l, err))))
        goto done;
    for (int32_t i = 0; i < warmup; i++)
        if ((st = impl->launch(&l, err)))
            goto done;
    if ((st = timed_runs(&l, impl, runs, times, err)))
        goto done;
    vs = spmv_dtype_size(m->dtype);
    if (m->rows > 0 && (e = cudaMemcpyAsync(y, m->y, (size_t)m->rows * vs, cudaMemcpyDeviceToHost, ctx->stream)) !=
                           cudaSuccess) {
        st = gpu_cuda_error(e, err, "copying y from the device");
        goto done;
    }
    if ((e = cudaStreamSynchronize(ctx->stream)) != cudaSuccess) {
        st = gpu_cuda_error(e, err, k->name);
        goto done;
    }
    if (stats)
        spmv_stats_compute(times, runs, warmup, 2 * m->nnz,
                           (int64_t)(fmt_bytes + ((size_t)m->rows + m->cols) * vs), stats);
done:
    if (st) /* let queued work finish before the caller reuses anything */
        cudaStreamSynchronize(ctx->stream);
    free(times);
    return st;
}
