/* run.cu — spmv_gpu_run: one multiply job on a resident matrix.
 *
 * The registry (engine/registry.c) names every GPU kernel and its
 * parameters; this file maps each name to its launcher, keyed by the registry entry's impl (and the optional
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
    spmv_impl id;            /* the registry entry's impl (spmv.h) */
    spmv_format format;
    gpu_prepare_fn prepare;
    gpu_launch_fn launch;
    bool wide;               /* runs on 64-bit row offsets too (matrices past INT32_MAX non-zeros) */
};

static const struct gpu_kernel_impl impls[] = {
    {SPMV_IMPL_GPU_CSR_SCALAR, SPMV_FMT_CSR, NULL, gpu_csr_scalar, false},
    {SPMV_IMPL_GPU_CSR_WARP_BUFFER, SPMV_FMT_CSR, NULL, gpu_csr_warp_buffer, false},
    {SPMV_IMPL_GPU_CSR_VECTOR, SPMV_FMT_CSR, NULL, gpu_csr_vector, true},
    {SPMV_IMPL_GPU_CSR_TILED, SPMV_FMT_CSR, NULL, gpu_csr_tiled, false},
    {SPMV_IMPL_GPU_CSR_TEXTURE, SPMV_FMT_CSR, gpu_csr_texture_prepare, gpu_csr_texture, false},
    {SPMV_IMPL_GPU_CSR_ADAPTIVE, SPMV_FMT_CSR, gpu_csr_adaptive_prepare, gpu_csr_adaptive, false},
    {SPMV_IMPL_GPU_CSR_MERGE, SPMV_FMT_CSR, NULL, gpu_csr_merge, false},
    {SPMV_IMPL_GPU_CSR_LIGHT, SPMV_FMT_CSR, gpu_csr_light_prepare, gpu_csr_light, false},
    {SPMV_IMPL_GPU_CSR_BINNED, SPMV_FMT_CSR, gpu_csr_binned_prepare, gpu_csr_binned, false},
    {SPMV_IMPL_GPU_CSR_SPMM, SPMV_FMT_CSR, NULL, gpu_csr_spmm, false},
    {SPMV_IMPL_GPU_ELL, SPMV_FMT_ELL, NULL, gpu_ell_run, false},
    {SPMV_IMPL_GPU_HLL, SPMV_FMT_HLL, gpu_hll_prepare, gpu_hll_run, false},
    {SPMV_IMPL_GPU_COO_ATOMIC, SPMV_FMT_COO, NULL, gpu_coo_atomic, false},
    {SPMV_IMPL_GPU_COO_SLICED, SPMV_FMT_COO, NULL, gpu_coo_sliced, false},
    {SPMV_IMPL_GPU_SCOO, SPMV_FMT_COO, NULL, gpu_scoo, false},
    {SPMV_IMPL_GPU_HYB, SPMV_FMT_HYB, NULL, gpu_hyb_run, false},
    {SPMV_IMPL_CUSPARSE_CSR, SPMV_FMT_CSR, gpu_cusparse_csr_prepare, gpu_cusparse_csr, true},
    {SPMV_IMPL_CUSPARSE_COO, SPMV_FMT_COO, gpu_cusparse_coo_prepare, gpu_cusparse_coo, false},
    {SPMV_IMPL_CUSPARSE_SELL, SPMV_FMT_HLL, gpu_cusparse_sell_prepare, gpu_cusparse_sell, false},
    {SPMV_IMPL_GPU_PCSR, SPMV_FMT_PCSR, NULL, gpu_pcsr_run, false},
    {SPMV_IMPL_GPU_PSELL, SPMV_FMT_PSELL, NULL, gpu_psell_run, true},
    {SPMV_IMPL_GPU_SPSELL, SPMV_FMT_SPSELL, NULL, gpu_spsell_run, false},
    {SPMV_IMPL_GPU_PBSR, SPMV_FMT_PBSR, NULL, gpu_pbsr_run, false},
};

static const struct gpu_kernel_impl *find_impl(spmv_impl id)
{
    for (size_t i = 0; i < sizeof impls / sizeof impls[0]; i++)
        if (impls[i].id == id)
            return &impls[i];
    return NULL;
}

extern "C" bool spmv_gpu_kernel_bound(const spmv_kernel *k)
{
    if (!k || k->device != SPMV_DEVICE_GPU)
        return false;
    return k->op == SPMV_OP_SPMSPM ? gpu_spmspm_bound(k) : find_impl(k->impl) != NULL;
}

/* The format held for the kernel (built now if missing; the HLL of its
 * hack_size, the HYB of its width) and its bytes. */
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
    if (impl->format == SPMV_FMT_HYB) {
        if ((st = gpu_get_hyb(l->ctx, m, l->p.v[SPMV_PARAM_WIDTH], &l->hyb, err)))
            return st;
        *fmt_bytes = gpu_hyb_bytes(m, l->hyb);
        return SPMV_OK;
    }
    if ((st = gpu_ensure_format(l->ctx, m, impl->format, err)))
        return st;
    /* PCSR reads the CSR's row offsets (and its columns or values where they stay as they are) */
    *fmt_bytes = impl->format == SPMV_FMT_PCSR ? gpu_pcsr_read_bytes(m) : gpu_format_bytes(m, impl->format);
    return SPMV_OK;
}

/* The launch of kernel k on m with the call's parameters resolved. */
static int setup_launch(spmv_gpu_ctx *ctx, const spmv_kernel *k, spmv_gpu_matrix *m, const spmv_params *p,
                        struct gpu_launch *l, const struct gpu_kernel_impl **impl, spmv_error *err)
{
    int st;
    if (!(*impl = find_impl(k->impl)))
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s has no GPU implementation in this build", k->name);
    memset(l, 0, sizeof *l);
    if ((st = spmv_params_resolve(k, p, &l->p, err)))
        return st;
    /* An HLL kernel without an explicit hack_size uses the upload's. */
    if ((k->params & (1u << SPMV_PARAM_HACK_SIZE)) && !(p && p->v[SPMV_PARAM_HACK_SIZE]))
        l->p.v[SPMV_PARAM_HACK_SIZE] = m->hack_size;
    l->ctx = ctx;
    l->m = m;
    l->ncols = 1;
    l->block = l->p.v[SPMV_PARAM_BLOCK_SIZE] > 0 ? l->p.v[SPMV_PARAM_BLOCK_SIZE] : 256;
    cudaError_t e = cudaSetDevice(ctx->device);
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, "cudaSetDevice");
}

/* `runs` launches of fn, each timed between two events. */
static int timed_fn(struct gpu_launch *l, gpu_launch_fn fn, const char *name, int32_t runs, double *times,
                    spmv_error *err)
{
    spmv_gpu_ctx *ctx = l->ctx;
    for (int32_t i = 0; i < runs; i++) {
        cudaError_t e = cudaEventRecord(ctx->ev_start, ctx->stream);
        int st = e == cudaSuccess ? fn(l, err) : gpu_cuda_error(e, err, "cudaEventRecord");
        if (st)
            return st;
        float ms = 0;
        if ((e = gpu_timed_stop(ctx, &ms)) != cudaSuccess)
            return gpu_cuda_error(e, err, name);
        times[i] = ms;
    }
    return SPMV_OK;
}

/* The matrix's own x and y buffers (host operands are copied through
 * them), made on first need and kept with the matrix ("other" bytes). */
static int operand_buffers(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, spmv_error *err)
{
    size_t vs = spmv_dtype_size(m->dtype);
    gpu_cat_scope scope(m, GPU_CAT_OTHER);
    int st = SPMV_OK;
    if (!m->x && m->cols > 0)
        st = gpu_alloc(ctx, m, &m->x, (size_t)m->cols * vs, "x", err);
    if (!st && !m->y && m->rows > 0)
        st = gpu_alloc(ctx, m, &m->y, (size_t)m->rows * vs, "y", err);
    return st;
}

/* What spmv_gpu_apply checks before anything runs. */
static int apply_check(spmv_gpu_ctx *ctx, const spmv_kernel *k, spmv_gpu_matrix *m, const spmv_apply_args *a,
                       const spmv_vec *x, const spmv_vec *y, spmv_error *err)
{
    int st;
    if (!ctx || !m)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "GPU apply: missing context or matrix");
    if ((st = spmv_apply_check(k, m->rows, m->cols, m->dtype, x, y, a, err)))
        return st;
    if (k->device != SPMV_DEVICE_GPU || k->op != SPMV_OP_SPMV)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s is not a GPU SpMV kernel", k->name);
    if (x->device != SPMV_DEVICE_GPU || y->device != SPMV_DEVICE_GPU)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s runs on GPU %d: x and y must be vectors there", k->name,
                              ctx->device);
    if (a->warmup < 0 || a->runs < 1 || a->runs > 1000000 || a->warmup > 1000000)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "GPU run: warmup %d / runs %d out of range (runs 1..1000000)",
                              a->warmup, a->runs);
    return SPMV_OK;
}

/* y = alpha*target + beta*y once after the timed runs, timed by events. */
static int timed_axpby(spmv_gpu_ctx *ctx, const spmv_apply_args *a, const spmv_vec *target, spmv_vec *y,
                       double *axpby_ms, spmv_error *err)
{
    float ms = 0;
    cudaError_t e;
    int st = SPMV_OK;
    if ((e = cudaEventRecord(ctx->ev_start, ctx->stream)) != cudaSuccess ||
        (st = spmv_gpu_vec_axpby(ctx, a->alpha, target, a->beta, y, err)) ||
        (e = gpu_timed_stop(ctx, &ms)) != cudaSuccess)
        return st ? st : gpu_cuda_error(e, err, "axpby");
    if (axpby_ms)
        *axpby_ms = ms;
    return SPMV_OK;
}

extern "C" int spmv_gpu_apply(spmv_gpu_ctx *ctx, const spmv_kernel *k, spmv_gpu_matrix *m, const spmv_params *p,
                              const spmv_apply_args *a, const spmv_vec *x, spmv_vec *y, spmv_stats *stats,
                              double *axpby_ms, spmv_error *err)
{
    struct gpu_launch l;
    const struct gpu_kernel_impl *impl;
    double *times = NULL;
    size_t fmt_bytes = 0, vs, tmp_bytes = 0;
    void *tmp = NULL;
    gpu_launch_fn fn;
    cudaError_t e;
    int st;
    if ((st = apply_check(ctx, k, m, a, x, y, err)))
        return st;
    if ((st = setup_launch(ctx, k, m, p, &l, &impl, err)))
        return st;
    if ((!impl->wide || x->k > 1) && (st = gpu_need_narrow(m, x->k > 1 ? "an SpMM (k > 1)" : k->name, err)))
        return st;
    /* what this call reads is never evicted under it (other formats of m
     * may be, should this call's own allocations need the room) */
    unsigned busy_before = m->busy;
    m->busy |= impl->format | SPMV_FMT_CSR;
    vs = spmv_dtype_size(m->dtype);
    bool direct = a->alpha == 1.0 && a->beta == 0.0;
    spmv_vec target = *y; /* where the kernel writes: y, or scratch for alpha/beta */
    if (!direct) {
        if (x->k == 1 && (st = operand_buffers(ctx, m, err)))
            goto done;
        if (x->k == 1)
            target.data = m->y;
        else if ((st = gpu_ctx_alloc(ctx, &tmp, tmp_bytes = spmv_vec_bytes(y), "SpMM scratch", err)))
            goto done;
        else
            target.data = tmp;
    }
    l.x = x->data;
    l.y = target.data;
    l.ncols = x->k;
    fn = impl->launch;
    if (!(times = (double *)malloc((size_t)a->runs * sizeof *times))) {
        st = spmv_error_set(err, SPMV_ERR_NOMEM, 0, "GPU run: cannot allocate %d timings", a->runs);
        goto done;
    }
    if (spmv_vec_bytes(&target) && (e = cudaMemsetAsync(target.data, 0xff, spmv_vec_bytes(&target), ctx->stream)) !=
                                       cudaSuccess) { /* all bits set: NaN in both dtypes */
        st = gpu_cuda_error(e, err, "poisoning y");
        goto done;
    }
    if ((st = ready_format(&l, impl, &fmt_bytes, err)))
        goto done;
    if (x->k > 1) { /* SpMM: ours or cuSPARSE's (spmv_apply_check refused the others) */
        if (k->impl == SPMV_IMPL_CUSPARSE_CSR) {
            if ((st = gpu_cusparse_spmm_prepare(&l, err)))
                goto done;
            fn = gpu_cusparse_csr_spmm;
        }
    } else if (impl->prepare && (st = impl->prepare(&l, err)))
        goto done;
    for (int32_t i = 0; i < a->warmup; i++)
        if ((st = fn(&l, err)))
            goto done;
    if ((st = timed_fn(&l, fn, k->name, a->runs, times, err)))
        goto done;
    if (axpby_ms)
        *axpby_ms = 0;
    if (!direct && (st = timed_axpby(ctx, a, &target, y, axpby_ms, err)))
        goto done;
    if (stats)
        spmv_stats_compute(times, a->runs, a->warmup, 2 * m->nnz * x->k,
                           (int64_t)(fmt_bytes + ((size_t)m->rows + m->cols) * vs * (size_t)x->k), stats);
done:
    if (st) /* let queued work finish before the caller reuses anything */
        cudaStreamSynchronize(ctx->stream);
    gpu_cusparse_spmm_free(&l);
    if (tmp)
        gpu_ctx_free(ctx, tmp, tmp_bytes);
    free(times);
    m->busy = busy_before;
    return st;
}

int gpu_launch_prepare(spmv_gpu_ctx *ctx, const spmv_kernel *k, spmv_gpu_matrix *m, const spmv_params *p,
                       const void *x, void *y, int32_t ncols, bool xrow, struct gpu_launch *l, gpu_launch_fn *fn,
                       size_t *fmt_bytes, spmv_error *err)
{
    const struct gpu_kernel_impl *impl;
    int st;
    if ((st = setup_launch(ctx, k, m, p, l, &impl, err)))
        return st;
    if ((!impl->wide || ncols > 1) && (st = gpu_need_narrow(m, ncols > 1 ? "an SpMM (k > 1)" : k->name, err)))
        return st;
    m->busy |= impl->format | SPMV_FMT_CSR;
    l->x = x;
    l->y = y;
    l->ncols = ncols;
    l->xrow = xrow;
    *fn = impl->launch;
    if ((st = ready_format(l, impl, fmt_bytes, err)))
        return st;
    if (ncols == 1)
        return impl->prepare ? impl->prepare(l, err) : SPMV_OK;
    if (k->impl == SPMV_IMPL_CUSPARSE_CSR) {
        *fn = gpu_cusparse_csr_spmm;
        return gpu_cusparse_spmm_prepare(l, err);
    }
    return k->impl == SPMV_IMPL_GPU_CSR_SPMM ? SPMV_OK
                                              : spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s takes one column", k->name);
}

extern "C" int spmv_gpu_launch(spmv_gpu_ctx *ctx, const spmv_kernel *k, spmv_gpu_matrix *m, const spmv_params *p,
                               const spmv_vec *x, spmv_vec *y, spmv_error *err)
{
    struct gpu_launch l;
    const struct gpu_kernel_impl *impl;
    spmv_apply_args a = {1.0, 0.0, 0, 1};
    size_t fmt_bytes = 0;
    int st;
    if (!ctx || !m)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "GPU launch: missing context or matrix");
    if ((st = spmv_apply_check(k, m->rows, m->cols, m->dtype, x, y, &a, err)))
        return st;
    if (k->device != SPMV_DEVICE_GPU || k->op != SPMV_OP_SPMV || (x->k != 1 && k->impl != SPMV_IMPL_GPU_CSR_SPMM))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s: a GPU launch is one SpMV by a GPU kernel (k columns: "
                              "gpu.csr.spmm's)", k->name);
    if (x->device != SPMV_DEVICE_GPU || y->device != SPMV_DEVICE_GPU)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s runs on GPU %d: x and y must be vectors there", k->name,
                              ctx->device);
    if ((st = setup_launch(ctx, k, m, p, &l, &impl, err)))
        return st;
    if ((!impl->wide || x->k > 1) && (st = gpu_need_narrow(m, x->k > 1 ? "an SpMM (k > 1)" : k->name, err)))
        return st;
    unsigned busy_before = m->busy;
    m->busy |= impl->format | SPMV_FMT_CSR;
    l.x = x->data;
    l.y = y->data;
    l.ncols = x->k; /* column-major blocks, as spmv_gpu_apply's */
    if (!(st = ready_format(&l, impl, &fmt_bytes, err)) && !(impl->prepare && (st = impl->prepare(&l, err))))
        st = impl->launch(&l, err);
    if (st)
        cudaStreamSynchronize(ctx->stream);
    m->busy = busy_before;
    return st;
}

extern "C" int spmv_gpu_run(spmv_gpu_ctx *ctx, const spmv_kernel *k, spmv_gpu_matrix *m, const spmv_params *p,
                            const void *x, void *y, int32_t warmup, int32_t runs, spmv_stats *stats,
                            spmv_error *err)
{
    if (!ctx || !k || !m)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "GPU run: missing context, kernel or matrix");
    if ((m->cols > 0 && !x) || (m->rows > 0 && !y))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "GPU run: missing x or y");
    size_t vs = spmv_dtype_size(m->dtype);
    cudaError_t e = cudaSetDevice(ctx->device);
    if (e != cudaSuccess)
        return gpu_cuda_error(e, err, "cudaSetDevice");
    int st = operand_buffers(ctx, m, err);
    if (st)
        return st;
    spmv_vec vx = {SPMV_DEVICE_GPU, m->dtype, m->cols, 1, m->x}, vy = {SPMV_DEVICE_GPU, m->dtype, m->rows, 1, m->y};
    spmv_apply_args a = {1.0, 0.0, warmup, runs};
    if (e == cudaSuccess && m->cols > 0)
        e = cudaMemcpyAsync(m->x, x, (size_t)m->cols * vs, cudaMemcpyHostToDevice, ctx->stream);
    if (e != cudaSuccess)
        return gpu_cuda_error(e, err, "copying x to the device");
    if ((st = spmv_gpu_apply(ctx, k, m, p, &a, &vx, &vy, stats, NULL, err)))
        return st;
    if (m->rows > 0 && (e = cudaMemcpyAsync(y, m->y, (size_t)m->rows * vs, cudaMemcpyDeviceToHost, ctx->stream)) !=
                           cudaSuccess)
        return gpu_cuda_error(e, err, "copying y from the device");
    if ((e = cudaStreamSynchronize(ctx->stream)) != cudaSuccess)
        return gpu_cuda_error(e, err, k->name);
    return SPMV_OK;
}

extern "C" int spmv_gpu_run_k(spmv_gpu_ctx *ctx, const spmv_kernel *k, spmv_gpu_matrix *m, const spmv_params *p,
                              int32_t ncols, const void *x, void *y, int32_t warmup, int32_t runs, spmv_stats *stats,
                              spmv_error *err)
{
    if (ncols == 1)
        return spmv_gpu_run(ctx, k, m, p, x, y, warmup, runs, stats, err);
    if (!ctx || !m)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "GPU run: missing context or matrix");
    spmv_vec vx, vy;
    spmv_apply_args a = {1.0, 0.0, warmup, runs};
    int st = spmv_gpu_vec_alloc(ctx, m->dtype, m->cols, ncols, &vx, err);
    if (st)
        return st;
    if ((st = spmv_gpu_vec_alloc(ctx, m->dtype, m->rows, ncols, &vy, err))) {
        spmv_gpu_vec_free(ctx, &vx);
        return st;
    }
    if (!(st = spmv_gpu_vec_write(ctx, &vx, x, err)) &&
        !(st = spmv_gpu_apply(ctx, k, m, p, &a, &vx, &vy, stats, NULL, err)))
        st = spmv_gpu_vec_read(ctx, &vy, y, err);
    spmv_gpu_vec_free(ctx, &vx);
    spmv_gpu_vec_free(ctx, &vy);
    return st;
}

/* Aᵀ as a resident CSR: cuSPARSE's csr2csc of A is the CSR of Aᵀ. Built
 * once, kept with m, freed with it; its bytes count in m's. */
/* Aᵀ's CSR from A's by cuSPARSE's csr2csc, into t's arrays. */
static int csr2csc(spmv_gpu_ctx *ctx, const spmv_gpu_matrix *m, spmv_gpu_matrix *t, spmv_error *err)
{
    size_t buf_bytes = 0;
    void *buf = NULL;
    cudaDataType vt = m->dtype == SPMV_FLOAT64 ? CUDA_R_64F : CUDA_R_32F;
    cusparseStatus_t s;
    cudaError_t e;
    int st;
    if (m->nnz == 0)
        return (e = cudaMemsetAsync(t->row_ptr, 0, ((size_t)t->rows + 1) * 4, ctx->stream)) == cudaSuccess
                   ? SPMV_OK
                   : gpu_cuda_error(e, err, "transpose");
    if ((s = cusparseCsr2cscEx2_bufferSize(ctx->sparse, m->rows, m->cols, (int)m->nnz, m->val, m->row_ptr, m->col,
                                           t->val, t->row_ptr, t->col, vt, CUSPARSE_ACTION_NUMERIC,
                                           CUSPARSE_INDEX_BASE_ZERO, CUSPARSE_CSR2CSC_ALG1, &buf_bytes)) !=
        CUSPARSE_STATUS_SUCCESS)
        return gpu_sparse_error(s, err, "transpose: csr2csc buffer size");
    if ((st = gpu_ctx_alloc(ctx, &buf, buf_bytes, "transpose scratch", err)))
        return st;
    if ((s = cusparseCsr2cscEx2(ctx->sparse, m->rows, m->cols, (int)m->nnz, m->val, m->row_ptr, m->col, t->val,
                                t->row_ptr, t->col, vt, CUSPARSE_ACTION_NUMERIC, CUSPARSE_INDEX_BASE_ZERO,
                                CUSPARSE_CSR2CSC_ALG1, buf)) != CUSPARSE_STATUS_SUCCESS)
        st = gpu_sparse_error(s, err, "transpose: csr2csc");
    if (!st && (e = cudaStreamSynchronize(ctx->stream)) != cudaSuccess)
        st = gpu_cuda_error(e, err, "transpose");
    gpu_ctx_free(ctx, buf, buf_bytes);
    return st;
}

/* The longest row of t (some kernels size their work by it). */
static int longest_row(spmv_gpu_ctx *ctx, spmv_gpu_matrix *t, spmv_error *err)
{
    int32_t *host_ptr = (int32_t *)malloc(((size_t)t->rows + 1) * 4);
    cudaError_t e;
    if (!host_ptr)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "transpose: out of host memory");
    if ((e = cudaMemcpyAsync(host_ptr, t->row_ptr, ((size_t)t->rows + 1) * 4, cudaMemcpyDeviceToHost, ctx->stream)) !=
            cudaSuccess ||
        (e = cudaStreamSynchronize(ctx->stream)) != cudaSuccess) {
        free(host_ptr);
        return gpu_cuda_error(e, err, "transpose");
    }
    for (int32_t i = 0; i < t->rows; i++)
        if (host_ptr[i + 1] - host_ptr[i] > t->max_row)
            t->max_row = host_ptr[i + 1] - host_ptr[i];
    free(host_ptr);
    return SPMV_OK;
}

extern "C" int spmv_gpu_matrix_transpose(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, spmv_gpu_matrix **out,
                                         spmv_error *err)
{
    *out = NULL;
    if (!ctx || !m)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "transpose: missing context or matrix");
    if (m->transpose) {
        *out = m->transpose;
        return SPMV_OK;
    }
    int st = gpu_need_narrow(m, "the transpose (csr2csc)", err);
    if (st)
        return st;
    spmv_gpu_matrix *t = new (std::nothrow) spmv_gpu_matrix();
    if (!t)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "transpose: out of host memory");
    t->rows = m->cols;
    t->cols = m->rows;
    t->nnz = m->nnz;
    t->dtype = m->dtype;
    t->hack_size = m->hack_size;
    t->parent = m;
    t->pinned = SPMV_FMT_CSR;
    t->cat = gpu_cat_of(SPMV_FMT_CSR);
    size_t vs = spmv_dtype_size(m->dtype);
    if ((st = cudaSetDevice(ctx->device) == cudaSuccess ? SPMV_OK : SPMV_ERR_DEVICE) ||
        (st = gpu_alloc(ctx, t, (void **)&t->row_ptr, ((size_t)t->rows + 1) * 4, "transpose row_ptr", err)) ||
        (st = gpu_alloc(ctx, t, (void **)&t->col, (size_t)t->nnz * 4, "transpose col", err)) ||
        (st = gpu_alloc(ctx, t, &t->val, (size_t)t->nnz * vs, "transpose val", err)))
        goto fail;
    t->cat = GPU_CAT_OTHER;
    if ((st = csr2csc(ctx, m, t, err)) || (st = longest_row(ctx, t, err)) || (st = gpu_ctx_adopt(ctx, t, err)))
        goto fail;
    t->formats = SPMV_FMT_CSR;
    m->transpose = t;
    *out = t;
    return SPMV_OK;
fail:
    if (st == SPMV_ERR_DEVICE && !err->message[0])
        spmv_error_set(err, st, 0, "transpose: cudaSetDevice failed");
    gpu_matrix_destroy(ctx, t);
    return st;
}
