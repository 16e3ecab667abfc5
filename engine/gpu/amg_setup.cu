/* amg_setup.cu — the AMG setup's products on a GPU (issue 29).
 *
 * engine/amg.c builds a level's graph, aggregates and tentative
 * prolongator T on the host, then hands A, 1/diag(A), omega and T to an
 * spmv_amg_products hook for the three products that took most of the
 * host's setup (A T, A P and R (A P): about two thirds of it on a 1 M-row
 * finite-volume problem, docs/benchmarks/solve.md). spmv_gpu_amg_products
 * is that hook on a GPU: A and T go up once, then on the context's stream
 *
 *   A T           cuSPARSE SpGEMM (work estimation, compute, copy), float64
 *   P             T - omega D^-1 (A T) in place, one thread a row (T's row
 *                 holds at most k <= 16 entries, found by a scan, so P's
 *                 rows need not be sorted for it)
 *   R = P^T       cusparseCsr2cscEx2 (SpGEMM takes no transposed operand)
 *   A P, R (A P)  cuSPARSE SpGEMM
 *
 * Every SpGEMM output is checked for sorted rows on the device and, if
 * cuSPARSE left one unsorted (it promises nothing), sorted there (CUB
 * segmented sort) before it is the next step's operand: the smoothing's
 * pattern, the transpose and the next products then see what the host's
 * sorted CSR would be.
 *
 * and P, R and A_c come back as host CSR (the pattern is the symbolic
 * product's, as the host's cpu.spmspm.omp gives). Everything the call allocates on the
 * device is freed before it returns: the hierarchy is uploaded afterwards
 * by spmv_gpu_amg_upload (amg.cu) in the solve's dtype. Each phase waits
 * for the stream before it is timed (a setup, not a hot path).
 */
#include <stdlib.h>
#include <string.h>

#include <cub/cub.cuh>

#include "amg.cuh"

/* The call's state: its device operators, the bytes they hold. */
struct prod_call {
    spmv_gpu_ctx *ctx;
    gpu_dcsr A, T, P, R, AP, Ac;
    double *dinv;
    size_t bytes;
    double *ms, t0;
};

static int sparse_ok(cusparseStatus_t s, spmv_error *err, const char *what)
{
    return s == CUSPARSE_STATUS_SUCCESS ? SPMV_OK : gpu_sparse_error(s, err, what);
}

static int cuda_ok(cudaError_t e, spmv_error *err, const char *what)
{
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, what);
}

/* Waits for the stream and adds the time since the last lap to `phase`. */
static int lap(struct prod_call *c, spmv_amg_phase phase, spmv_error *err)
{
    int st = gpu_sync_stream(c->ctx, err, spmv_amg_phase_name(phase));
    double t = spmv_now_ms();
    if (c->ms)
        c->ms[phase] += t - c->t0;
    c->t0 = t;
    return st;
}

/* P = T - omega D^-1 P in place (P holds A T on entry); the host's
 * smooth_prolongator, its rounding included (no contraction). */
__global__ void amg_smooth_p(int32_t rows, const int32_t *__restrict__ prp, const int32_t *__restrict__ pcol,
                             double *__restrict__ pv, const int32_t *__restrict__ trp,
                             const int32_t *__restrict__ tcol, const double *__restrict__ tv,
                             const double *__restrict__ dinv, double omega)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows)
        return;
    double s = __dmul_rn(-omega, dinv[i]);
    int32_t t0 = trp[i], te = trp[i + 1];
    for (int32_t p = prp[i]; p < prp[i + 1]; p++) {
        double v = __dmul_rn(s, pv[p]);
        for (int32_t t = t0; t < te; t++)
            if (tcol[t] == pcol[p])
                v = __dadd_rn(v, tv[t]);
        pv[p] = v;
    }
}

static int sort_rows(struct prod_call *c, gpu_dcsr *m, spmv_error *err);

/* c = a b by cuSPARSE SpGEMM in float64; c's arrays are allocated once
 * its size is known, its descriptor kept (c may be the next product's
 * operand). The SpGEMM buffers are freed before returning. */
static int spgemm(struct prod_call *c, gpu_dcsr *a, gpu_dcsr *b, gpu_dcsr *out, spmv_error *err)
{
    spmv_gpu_ctx *ctx = c->ctx;
    cusparseHandle_t h = ctx->sparse;
    cusparseSpGEMMDescr_t d = NULL;
    cusparseOperation_t op = CUSPARSE_OPERATION_NON_TRANSPOSE;
    cusparseSpGEMMAlg_t alg = CUSPARSE_SPGEMM_DEFAULT;
    const double one = 1.0, zero = 0.0;
    void *buf1 = NULL, *buf2 = NULL;
    size_t n1 = 0, n2 = 0;
    int64_t r, cc, nz = 0;
    out->rows = a->rows;
    out->cols = b->cols;
    out->dtype = SPMV_FLOAT64;
    int st = gpu_alloc_counted(ctx, (void **)&out->row_ptr, ((size_t)a->rows + 1) * 4, &c->bytes, "SpGEMM row_ptr",
                               err);
    if (st || (st = sparse_ok(cusparseSpGEMM_createDescr(&d), err, "cusparseSpGEMM_createDescr")) ||
        (st = sparse_ok(cusparseCreateCsr(&out->descr, a->rows, b->cols, 0, out->row_ptr, NULL, NULL,
                                          CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                                          CUDA_R_64F),
                        err, "cusparseCreateCsr(C)")))
        goto done;
    if ((st = sparse_ok(cusparseSpGEMM_workEstimation(h, op, op, &one, a->descr, b->descr, &zero, out->descr,
                                                      CUDA_R_64F, alg, d, &n1, NULL),
                        err, "cusparseSpGEMM_workEstimation")) ||
        (st = gpu_ctx_alloc(ctx, &buf1, gpu_nz(n1), "SpGEMM buffer", err)) ||
        (st = sparse_ok(cusparseSpGEMM_workEstimation(h, op, op, &one, a->descr, b->descr, &zero, out->descr,
                                                      CUDA_R_64F, alg, d, &n1, buf1),
                        err, "cusparseSpGEMM_workEstimation")) ||
        (st = sparse_ok(cusparseSpGEMM_compute(h, op, op, &one, a->descr, b->descr, &zero, out->descr, CUDA_R_64F,
                                               alg, d, &n2, NULL),
                        err, "cusparseSpGEMM_compute")) ||
        (st = gpu_ctx_alloc(ctx, &buf2, gpu_nz(n2), "SpGEMM buffer", err)) ||
        (st = sparse_ok(cusparseSpGEMM_compute(h, op, op, &one, a->descr, b->descr, &zero, out->descr, CUDA_R_64F,
                                               alg, d, &n2, buf2),
                        err, "cusparseSpGEMM_compute")) ||
        (st = sparse_ok(cusparseSpMatGetSize(out->descr, &r, &cc, &nz), err, "cusparseSpMatGetSize")))
        goto done;
    if (nz > INT32_MAX) {
        st = spmv_error_set(err, SPMV_ERR_LIMIT, 0, "amg setup: a product of %lld non-zeros is beyond 32-bit "
                            "indices", (long long)nz);
        goto done;
    }
    out->nnz = nz;
    if ((st = gpu_alloc_counted(ctx, (void **)&out->col, (size_t)nz * 4, &c->bytes, "SpGEMM col", err)) ||
        (st = gpu_alloc_counted(ctx, &out->val, (size_t)nz * 8, &c->bytes, "SpGEMM val", err)) ||
        (st = sparse_ok(cusparseCsrSetPointers(out->descr, out->row_ptr, out->col, out->val), err,
                        "cusparseCsrSetPointers")))
        goto done;
    if (!(st = sparse_ok(cusparseSpGEMM_copy(h, op, op, &one, a->descr, b->descr, &zero, out->descr, CUDA_R_64F,
                                             alg, d),
                         err, "cusparseSpGEMM_copy")))
        st = sort_rows(c, out, err);
done:
    if (d)
        cusparseSpGEMM_destroyDescr(d);
    gpu_ctx_free(ctx, buf1, gpu_nz(n1)); /* cudaFree waits for the work that reads it */
    gpu_ctx_free(ctx, buf2, gpu_nz(n2));
    return st;
}

/* *flag = 1 when a row of m has a column not above the one before it. */
__global__ void amg_rows_unsorted(int32_t rows, const int32_t *__restrict__ rp, const int32_t *__restrict__ col,
                                  int *flag)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows)
        return;
    for (int32_t p = rp[i] + 1; p < rp[i + 1]; p++)
        if (col[p] <= col[p - 1]) {
            *flag = 1;
            return;
        }
}

/* Sorts m's rows by column on the device when one is not (values
 * follow): new col and val arrays of the same sizes, the descriptor
 * pointed at them. */
static int sort_rows(struct prod_call *c, gpu_dcsr *m, spmv_error *err)
{
    spmv_gpu_ctx *ctx = c->ctx;
    cudaStream_t s = ctx->stream;
    int *flag = NULL, unsorted = 0;
    int32_t *col2 = NULL;
    void *val2 = NULL, *tmp = NULL;
    size_t nt = 0, cb = gpu_nz((size_t)m->nnz * 4), vb = gpu_nz((size_t)m->nnz * 8);
    int st = gpu_ctx_alloc(ctx, (void **)&flag, sizeof(int), "amg setup flag", err);
    if (st || m->nnz == 0 || (st = cuda_ok(cudaMemsetAsync(flag, 0, sizeof(int), s), err, "amg setup flag")))
        goto done;
    amg_rows_unsorted<<<gpu_grid(m->rows, 256), 256, 0, s>>>(m->rows, m->row_ptr, m->col, flag);
    if ((st = gpu_check_launch(err, "amg_rows_unsorted")) ||
        (st = cuda_ok(cudaMemcpyAsync(&unsorted, flag, sizeof(int), cudaMemcpyDeviceToHost, s), err,
                      "amg setup flag")) ||
        (st = cuda_ok(cudaStreamSynchronize(s), err, "amg setup flag")) || !unsorted)
        goto done;
    if ((st = cuda_ok(cub::DeviceSegmentedSort::SortPairs(NULL, nt, m->col, col2, (const double *)m->val,
                                                          (double *)val2, m->nnz, m->rows, m->row_ptr,
                                                          m->row_ptr + 1, s),
                      err, "sorting a product's rows")) ||
        (st = gpu_ctx_alloc(ctx, &tmp, gpu_nz(nt), "amg setup sort", err)) ||
        (st = gpu_ctx_alloc(ctx, (void **)&col2, cb, "amg setup sort", err)) ||
        (st = gpu_ctx_alloc(ctx, &val2, vb, "amg setup sort", err)) ||
        (st = cuda_ok(cub::DeviceSegmentedSort::SortPairs(tmp, nt, m->col, col2, (const double *)m->val,
                                                          (double *)val2, m->nnz, m->rows, m->row_ptr,
                                                          m->row_ptr + 1, s),
                      err, "sorting a product's rows")) ||
        (st = sparse_ok(cusparseCsrSetPointers(m->descr, m->row_ptr, col2, val2), err, "cusparseCsrSetPointers")))
        goto done;
    gpu_ctx_free(ctx, m->col, cb); /* waits for the sort */
    gpu_ctx_free(ctx, m->val, vb);
    m->col = col2;
    m->val = val2;
    col2 = NULL;
    val2 = NULL;
done:
    gpu_ctx_free(ctx, flag, sizeof(int));
    gpu_ctx_free(ctx, tmp, gpu_nz(nt));
    gpu_ctx_free(ctx, col2, cb);
    gpu_ctx_free(ctx, val2, vb);
    return st;
}

/* R = P^T: P's CSC is R's CSR (cusparseCsr2cscEx2, ALG1). */
static int transpose(struct prod_call *c, spmv_error *err)
{
    spmv_gpu_ctx *ctx = c->ctx;
    gpu_dcsr *p = &c->P, *r = &c->R;
    void *buf = NULL;
    size_t nb = 0;
    r->rows = p->cols;
    r->cols = p->rows;
    r->nnz = p->nnz;
    r->dtype = SPMV_FLOAT64;
    int st;
    if ((st = gpu_alloc_counted(ctx, (void **)&r->row_ptr, ((size_t)r->rows + 1) * 4, &c->bytes, "R row_ptr", err)) ||
        (st = gpu_alloc_counted(ctx, (void **)&r->col, (size_t)r->nnz * 4, &c->bytes, "R col", err)) ||
        (st = gpu_alloc_counted(ctx, &r->val, (size_t)r->nnz * 8, &c->bytes, "R val", err)) ||
        (st = sparse_ok(cusparseCsr2cscEx2_bufferSize(ctx->sparse, p->rows, p->cols, (int)p->nnz, p->val, p->row_ptr,
                                                      p->col, r->val, r->row_ptr, r->col, CUDA_R_64F,
                                                      CUSPARSE_ACTION_NUMERIC, CUSPARSE_INDEX_BASE_ZERO,
                                                      CUSPARSE_CSR2CSC_ALG1, &nb),
                        err, "cusparseCsr2cscEx2_bufferSize")) ||
        (st = gpu_ctx_alloc(ctx, &buf, gpu_nz(nb), "csr2csc buffer", err)))
        goto done;
    if ((st = sparse_ok(cusparseCsr2cscEx2(ctx->sparse, p->rows, p->cols, (int)p->nnz, p->val, p->row_ptr, p->col,
                                           r->val, r->row_ptr, r->col, CUDA_R_64F, CUSPARSE_ACTION_NUMERIC,
                                           CUSPARSE_INDEX_BASE_ZERO, CUSPARSE_CSR2CSC_ALG1, buf),
                        err, "cusparseCsr2cscEx2")))
        goto done;
    st = sparse_ok(cusparseCreateCsr(&r->descr, r->rows, r->cols, r->nnz, r->row_ptr, r->col, r->val,
                                     CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F),
                   err, "cusparseCreateCsr(R)");
done:
    gpu_ctx_free(ctx, buf, gpu_nz(nb));
    return st;
}

int gpu_dcsr_download(spmv_gpu_ctx *ctx, const gpu_dcsr *d, spmv_csr *h, spmv_error *err)
{
    cudaStream_t s = ctx->stream;
    size_t vs = spmv_dtype_size(d->dtype);
    memset(h, 0, sizeof *h);
    h->rows = d->rows;
    h->cols = d->cols;
    h->nnz = d->nnz;
    h->dtype = SPMV_FLOAT64;
    h->row_ptr = (int32_t *)malloc(((size_t)d->rows + 1) * 4);
    h->col = (int32_t *)malloc((size_t)d->nnz * 4 + 4);
    h->val = malloc((size_t)d->nnz * 8 + 8);
    if (!h->row_ptr || !h->col || !h->val)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "amg setup: out of host memory for a %d x %d operator of %lld "
                              "entries", d->rows, d->cols, (long long)d->nnz);
    int st;
    if ((st = cuda_ok(cudaMemcpyAsync(h->row_ptr, d->row_ptr, ((size_t)d->rows + 1) * 4, cudaMemcpyDeviceToHost, s),
                      err, "copying an AMG operator back")) ||
        (d->nnz && (st = cuda_ok(cudaMemcpyAsync(h->col, d->col, (size_t)d->nnz * 4, cudaMemcpyDeviceToHost, s), err,
                                 "copying an AMG operator back"))) ||
        (d->nnz && (st = cuda_ok(cudaMemcpyAsync(h->val, d->val, (size_t)d->nnz * vs, cudaMemcpyDeviceToHost, s), err,
                                 "copying an AMG operator back"))) ||
        (st = cuda_ok(cudaStreamSynchronize(s), err, "copying an AMG operator back")))
        return st;
    if (d->dtype == SPMV_FLOAT32) /* widened in place, from the end */
        for (int64_t p = d->nnz - 1; p >= 0; p--)
            ((double *)h->val)[p] = ((const float *)h->val)[p];
    return SPMV_OK;
}

static void call_free(struct prod_call *c)
{
    gpu_ctx_free(c->ctx, c->dinv, gpu_nz((size_t)c->A.rows * 8)); /* before A: freeing A zeroes its rows */
    for (gpu_dcsr *m : {&c->A, &c->T, &c->P, &c->R, &c->AP, &c->Ac})
        gpu_dcsr_free(c->ctx, m);
}

static int check_operands(const spmv_csr *A, const spmv_csr *T, spmv_error *err)
{
    if (A->dtype != SPMV_FLOAT64 || T->dtype != SPMV_FLOAT64 || spmv_csr_wide(A) || spmv_csr_wide(T) ||
        A->rows != A->cols || T->rows != A->rows)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "amg setup on a GPU: A (%d x %d) and T (%d x %d) must be "
                              "float64 CSR with 32-bit offsets, A square, T of A's rows", A->rows, A->cols, T->rows,
                              T->cols);
    return SPMV_OK;
}

/* P, R and Ac from c's A, T and dinv (on the device). */
static int products(struct prod_call *c, double omega, spmv_error *err)
{
    spmv_gpu_ctx *ctx = c->ctx;
    int32_t n = c->A.rows;
    int st;
    if ((st = spgemm(c, &c->A, &c->T, &c->P, err)) || (st = lap(c, SPMV_AMG_AT, err)))
        return st;
    amg_smooth_p<<<gpu_grid(n, 256), 256, 0, ctx->stream>>>(n, c->P.row_ptr, c->P.col, (double *)c->P.val,
                                                            c->T.row_ptr, c->T.col, (const double *)c->T.val, c->dinv,
                                                            omega);
    if ((st = gpu_check_launch(err, "amg_smooth_p")) || (st = lap(c, SPMV_AMG_SMOOTH, err)) ||
        (st = transpose(c, err)) || (st = sort_rows(c, &c->R, err)) || (st = lap(c, SPMV_AMG_TRANSPOSE, err)) ||
        (st = spgemm(c, &c->A, &c->P, &c->AP, err)) || (st = lap(c, SPMV_AMG_AP, err)) ||
        (st = spgemm(c, &c->R, &c->AP, &c->Ac, err)))
        return st;
    return lap(c, SPMV_AMG_RAP, err);
}

extern "C" int spmv_gpu_amg_products(void *arg, const spmv_csr *A, const double *dinv, double omega,
                                     const spmv_csr *T, spmv_csr *P, spmv_csr *R, spmv_csr *Ac, double *ms,
                                     spmv_error *err)
{
    spmv_gpu_ctx *ctx = (spmv_gpu_ctx *)arg;
    memset(P, 0, sizeof *P);
    memset(R, 0, sizeof *R);
    memset(Ac, 0, sizeof *Ac);
    if (!ctx || !A || !dinv || !T)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "amg setup on a GPU: missing context or operand");
    int st = check_operands(A, T, err);
    if (st)
        return st;
    if (cudaSetDevice(ctx->device) != cudaSuccess)
        return spmv_error_set(err, SPMV_ERR_DEVICE, 0, "amg setup: cudaSetDevice(%d)", ctx->device);
    struct prod_call c = {};
    c.ctx = ctx;
    c.ms = ms;
    c.t0 = spmv_now_ms();
    int32_t n = A->rows;
    if ((st = gpu_dcsr_copy(ctx, A, SPMV_FLOAT64, &c.A, &c.bytes, err)) ||
        (st = gpu_dcsr_copy(ctx, T, SPMV_FLOAT64, &c.T, &c.bytes, err)) ||
        (st = gpu_alloc_counted(ctx, (void **)&c.dinv, (size_t)n * 8, &c.bytes, "amg setup 1/diag", err)) ||
        (st = gpu_put_values(ctx, c.dinv, dinv, n, SPMV_FLOAT64, err)) || (st = lap(&c, SPMV_AMG_COPY, err)) ||
        (st = products(&c, omega, err)) || (st = gpu_dcsr_download(ctx, &c.P, P, err)) ||
        (st = gpu_dcsr_download(ctx, &c.R, R, err)) || (st = gpu_dcsr_download(ctx, &c.Ac, Ac, err)))
        goto done;
    st = lap(&c, SPMV_AMG_COPY, err);
done:
    call_free(&c);
    return st;
}

int gpu_amg_products_dev(spmv_gpu_ctx *ctx, gpu_dcsr *A, const double *dinv, double omega, gpu_dcsr *T, gpu_dcsr *P,
                         gpu_dcsr *R, gpu_dcsr *Ac, double *ms, spmv_error *err)
{
    struct prod_call c = {};
    c.ctx = ctx;
    c.ms = ms;
    c.t0 = spmv_now_ms();
    c.A = *A; /* borrowed: given back untouched below */
    c.T = *T;
    c.dinv = (double *)dinv;
    int st = products(&c, omega, err);
    c.A = gpu_dcsr();
    c.T = gpu_dcsr();
    c.dinv = NULL;
    if (st == SPMV_OK) { /* the caller's now */
        *P = c.P;
        *R = c.R;
        *Ac = c.Ac;
        c.P = c.R = c.Ac = gpu_dcsr();
    }
    call_free(&c);
    return st;
}
