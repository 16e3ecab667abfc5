/* batch.cu — spmv_gpu_run_batch: k products with host operands of their own as one SpMM.
 *
 * The daemon's dynamic batching (daemon/batch.c) gathers products that
 * arrive together; each x lies in its own request body and each y goes
 * to its own answer. Packing them into one host block and unpacking the
 * answer cost more than the SpMM saved (docs/benchmarks/api.md): a
 * memcpy of k bodies on one thread while the GPU waited, twice. Here
 * nothing is packed on the host:
 *
 *   x[j] --H2D--> column j of Xc (column-major, the context's block)
 *   Xc --transpose--> X (row-major: one entry's k values in one line)
 *   SpMM: gpu.csr.spmm X -> Y column-major; cusparse.csr X -> Yr row-major
 *   Yr --transpose--> Y (cusparse.csr only)
 *   column j of Y --D2H--> y[j]
 *
 * all on the context's stream, with one wait at the end. Events between
 * the steps give the batch's parts (spmv_batch_times). A transpose of the
 * block costs about two passes over it in device memory, far less than one
 * gathering SpMM of a random-column matrix reads; with k = 1 there is none.
 * The block (Xc, X, Y, Yr) is one allocation kept by the context, grown to
 * the widest batch seen: an allocation per batch would cost a cudaMalloc
 * and a device-wide cudaFree each time.
 */
#include <string.h>

#include "gpu.cuh"

#define TR_TILE 32
#define TR_ROWS 8

/* Between column-major (n x k, leading dimension n) and row-major (n x k,
 * leading dimension k) through a shared tile, both sides coalesced: a
 * block takes 32 of the n rows (grid x, which holds billions) and 32 of
 * the k columns (grid y). */
template <typename T, bool TO_ROWS>
__global__ void transpose_kernel(int64_t n, int32_t k, const T *__restrict__ in, T *__restrict__ out)
{
    __shared__ T tile[TR_TILE][TR_TILE + 1];
    int64_t i0 = (int64_t)blockIdx.x * TR_TILE;
    int32_t j0 = blockIdx.y * TR_TILE;
    for (int r = threadIdx.y; r < TR_TILE; r += TR_ROWS) {
        /* TO_ROWS reads columns (i along the lanes), else rows (j along them) */
        int64_t i = TO_ROWS ? i0 + threadIdx.x : i0 + r;
        int32_t j = TO_ROWS ? j0 + r : j0 + (int32_t)threadIdx.x;
        if (i < n && j < k)
            tile[r][threadIdx.x] = TO_ROWS ? in[(int64_t)j * n + i] : in[i * k + j];
    }
    __syncthreads();
    for (int r = threadIdx.y; r < TR_TILE; r += TR_ROWS) {
        int64_t i = TO_ROWS ? i0 + r : i0 + threadIdx.x;
        int32_t j = TO_ROWS ? j0 + (int32_t)threadIdx.x : j0 + r;
        if (i < n && j < k) {
            if (TO_ROWS)
                out[i * k + j] = tile[threadIdx.x][r];
            else
                out[(int64_t)j * n + i] = tile[threadIdx.x][r];
        }
    }
}

static int transpose(spmv_gpu_ctx *ctx, spmv_dtype dt, bool to_rows, int64_t n, int32_t k, const void *in, void *out,
                     spmv_error *err)
{
    if (n == 0)
        return SPMV_OK;
    dim3 grid((unsigned)((n + TR_TILE - 1) / TR_TILE), (unsigned)((k + TR_TILE - 1) / TR_TILE)), block(TR_TILE, TR_ROWS);
    if (dt == SPMV_FLOAT64 && to_rows)
        transpose_kernel<double, true><<<grid, block, 0, ctx->stream>>>(n, k, (const double *)in, (double *)out);
    else if (dt == SPMV_FLOAT64)
        transpose_kernel<double, false><<<grid, block, 0, ctx->stream>>>(n, k, (const double *)in, (double *)out);
    else if (to_rows)
        transpose_kernel<float, true><<<grid, block, 0, ctx->stream>>>(n, k, (const float *)in, (float *)out);
    else
        transpose_kernel<float, false><<<grid, block, 0, ctx->stream>>>(n, k, (const float *)in, (float *)out);
    return gpu_check_launch(err, to_rows ? "batch: X to rows" : "batch: Y to columns");
}

/* The context's block of at least `bytes`, grown (after the stream's work
 * that may read the old one) when smaller. */
static int batch_block(spmv_gpu_ctx *ctx, size_t bytes, char **out, spmv_error *err)
{
    if (bytes > ctx->batch_bytes) {
        gpu_ctx_free(ctx, ctx->batch, ctx->batch_bytes); /* cudaFree waits for the device */
        ctx->batch = NULL;
        ctx->batch_bytes = 0;
        int st = gpu_ctx_alloc(ctx, &ctx->batch, bytes, "the batch block", err);
        if (st)
            return st;
        ctx->batch_bytes = bytes;
    }
    *out = (char *)ctx->batch;
    return SPMV_OK;
}

/* Where one batch's operands lie in the block, and the events between its steps. */
struct batch_plan {
    size_t xcol, ycol;       /* bytes of one x, one y */
    bool xrow, yrow;         /* the kernel reads X by rows; cuSPARSE writes Y by rows too */
    char *xc, *x, *y, *yr;   /* x[j] land in xc; the kernel reads x, writes yr (or y); y[j] leave from y */
    cudaEvent_t ev[6];       /* before the copies in, after them, after X's transpose, after the SpMM,
                              * after Y's transpose, after the copies out */
};

static int plan_batch(spmv_gpu_ctx *ctx, const spmv_kernel *k, const spmv_gpu_matrix *m, int32_t ncols,
                      struct batch_plan *b, spmv_error *err)
{
    size_t vs = spmv_dtype_size(m->dtype);
    memset(b, 0, sizeof *b);
    b->xcol = (size_t)m->cols * vs;
    b->ycol = (size_t)m->rows * vs;
    b->xrow = ncols > 1 && (k->impl == SPMV_IMPL_GPU_CSR_SPMM || k->impl == SPMV_IMPL_CUSPARSE_CSR);
    b->yrow = b->xrow && k->impl == SPMV_IMPL_CUSPARSE_CSR;
    /* each region 256-byte aligned, as cudaMalloc's own are (cuSPARSE's dense operands want it) */
    size_t xs = (b->xcol * (size_t)ncols + 255) & ~(size_t)255, ys = (b->ycol * (size_t)ncols + 255) & ~(size_t)255;
    char *base;
    int st = batch_block(ctx, xs * (b->xrow ? 2 : 1) + ys * (b->yrow ? 2 : 1), &base, err);
    if (st)
        return st;
    b->xc = base;
    b->x = b->xrow ? base + xs : base;
    b->y = b->x + xs;
    b->yr = b->yrow ? b->y + ys : b->y;
    for (int i = 0; i < 6; i++) {
        cudaError_t e = cudaEventCreate(&b->ev[i]);
        if (e != cudaSuccess)
            return gpu_cuda_error(e, err, "batch: events");
    }
    return SPMV_OK;
}

static void plan_free(struct batch_plan *b)
{
    for (int i = 0; i < 6; i++)
        if (b->ev[i])
            cudaEventDestroy(b->ev[i]);
}

static float elapsed(const struct batch_plan *b, int from, int to)
{
    float ms = 0;
    return cudaEventElapsedTime(&ms, b->ev[from], b->ev[to]) == cudaSuccess ? ms : 0;
}

/* The copies in, the layouts, the SpMM and the copies out, queued; then the wait. */
static int queue_batch(spmv_gpu_ctx *ctx, const spmv_gpu_matrix *m, struct gpu_launch *l, gpu_launch_fn fn,
                       int32_t ncols, const void *const *x, void *const *y, struct batch_plan *b, spmv_error *err)
{
    cudaStream_t s = ctx->stream;
    cudaError_t e = cudaSuccess;
    int st;
    size_t ybytes = b->ycol * (size_t)ncols;
    /* all bits set: NaN in both dtypes, so a row the kernel leaves unwritten shows */
    if (ybytes && (e = cudaMemsetAsync(b->yr, 0xff, ybytes, s)) != cudaSuccess)
        return gpu_cuda_error(e, err, "batch: poisoning Y");
    if ((e = cudaEventRecord(b->ev[0], s)) != cudaSuccess)
        return gpu_cuda_error(e, err, "batch: events");
    for (int32_t j = 0; j < ncols && b->xcol && e == cudaSuccess; j++)
        e = cudaMemcpyAsync(b->xc + (size_t)j * b->xcol, x[j], b->xcol, cudaMemcpyHostToDevice, s);
    if (e != cudaSuccess || (e = cudaEventRecord(b->ev[1], s)) != cudaSuccess)
        return gpu_cuda_error(e, err, "batch: copying x to the device");
    if (b->xrow && (st = transpose(ctx, m->dtype, true, m->cols, ncols, b->xc, b->x, err)))
        return st;
    if ((e = cudaEventRecord(b->ev[2], s)) != cudaSuccess)
        return gpu_cuda_error(e, err, "batch: events");
    if ((st = fn(l, err)))
        return st;
    if ((e = cudaEventRecord(b->ev[3], s)) != cudaSuccess)
        return gpu_cuda_error(e, err, "batch: events");
    if (b->yrow && (st = transpose(ctx, m->dtype, false, m->rows, ncols, b->yr, b->y, err)))
        return st;
    if ((e = cudaEventRecord(b->ev[4], s)) != cudaSuccess)
        return gpu_cuda_error(e, err, "batch: events");
    for (int32_t j = 0; j < ncols && b->ycol && e == cudaSuccess; j++)
        e = cudaMemcpyAsync(y[j], b->y + (size_t)j * b->ycol, b->ycol, cudaMemcpyDeviceToHost, s);
    if (e != cudaSuccess || (e = cudaEventRecord(b->ev[5], s)) != cudaSuccess)
        return gpu_cuda_error(e, err, "batch: copying y from the device");
    if ((e = cudaStreamSynchronize(s)) != cudaSuccess)
        return gpu_cuda_error(e, err, "batch");
    return SPMV_OK;
}

static int batch_check(spmv_gpu_ctx *ctx, const spmv_kernel *k, const spmv_gpu_matrix *m, int32_t ncols,
                       const void *const *x, void *const *y, spmv_error *err)
{
    if (!ctx || !k || !m || !x || !y)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "GPU batch: missing context, kernel, matrix or operands");
    if (k->device != SPMV_DEVICE_GPU || k->op != SPMV_OP_SPMV)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "%s is not a GPU SpMV kernel", k->name);
    if (ncols < 1 || ncols > spmv_kernel_max_k(k))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "GPU batch: %d products; %s takes 1..%d columns", ncols,
                              k->name, spmv_kernel_max_k(k));
    for (int32_t j = 0; j < ncols; j++)
        if ((m->cols > 0 && !x[j]) || (m->rows > 0 && !y[j]))
            return spmv_error_set(err, SPMV_ERR_INVALID, 0, "GPU batch: product %d has no x or y", j);
    return SPMV_OK;
}

extern "C" int spmv_gpu_run_batch(spmv_gpu_ctx *ctx, const spmv_kernel *k, spmv_gpu_matrix *m,
                                  const spmv_params *p, int32_t ncols, const void *const *x, void *const *y,
                                  spmv_stats *stats, spmv_batch_times *times, spmv_error *err)
{
    double t0 = spmv_now_ms();
    struct batch_plan b;
    struct gpu_launch l;
    gpu_launch_fn fn = NULL;
    size_t fmt_bytes = 0;
    int st = batch_check(ctx, k, m, ncols, x, y, err);
    if (st)
        return st;
    cudaError_t e = cudaSetDevice(ctx->device);
    if (e != cudaSuccess)
        return gpu_cuda_error(e, err, "cudaSetDevice");
    memset(&l, 0, sizeof l);
    unsigned busy_before = m->busy; /* what the batch reads is never evicted under it */
    if (!(st = plan_batch(ctx, k, m, ncols, &b, err)) &&
        !(st = gpu_launch_prepare(ctx, k, m, p, b.x, b.yr, ncols, b.xrow, &l, &fn, &fmt_bytes, err)))
        st = queue_batch(ctx, m, &l, fn, ncols, x, y, &b, err);
    if (st) /* let queued work finish before the caller reuses anything */
        cudaStreamSynchronize(ctx->stream);
    if (!st) {
        double spmm = elapsed(&b, 2, 3), vs = (double)spmv_dtype_size(m->dtype);
        if (stats)
            spmv_stats_compute(&spmm, 1, 0, 2 * m->nnz * ncols,
                               (int64_t)(fmt_bytes + ((double)m->rows + m->cols) * vs * ncols), stats);
        if (times) {
            times->h2d_ms = elapsed(&b, 0, 1);
            times->layout_ms = elapsed(&b, 1, 2) + elapsed(&b, 3, 4);
            times->spmm_ms = spmm;
            times->d2h_ms = elapsed(&b, 4, 5);
            times->total_ms = spmv_now_ms() - t0;
            double dev = times->h2d_ms + times->layout_ms + times->spmm_ms + times->d2h_ms;
            times->host_ms = times->total_ms > dev ? times->total_ms - dev : 0;
        }
    }
    gpu_cusparse_spmm_free(&l);
    plan_free(&b);
    m->busy = busy_before;
    return st;
}
