/* cg-ref.cu — the floor of `make bench-remote`: CG written directly on
 * cuSPARSE and cuBLAS, with no daemon, no HTTP and no engine in the loop.
 *
 *   cg-ref --n GRID_SIDE [--iters N] [--seed S]
 *
 * Builds the 2-D Poisson matrix of the engine's generator (n^2 rows, f64),
 * copies its CSR to the GPU once, and runs exactly N iterations of plain
 * CG with b random and x0 = 0, the way a careful hand-written solver does:
 * one cusparseSpMV (CSR, default algorithm, buffer made once), cublasDdot
 * for the two dots (host scalars, so each waits for the device, as the
 * daemon's solver does), cublasDaxpy/Dscal for the updates. Times the whole
 * loop with events, and separately the median of 50 SpMVs. Prints one JSON
 * line: {"rows","nnz","iters","ms_per_iter","spmv_ms","final_relres"}.
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusparse.h>

#include <algorithm>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "spmv.h"

#define CK(call)                                                                             \
    do {                                                                                     \
        cudaError_t e_ = (call);                                                             \
        if (e_ != cudaSuccess) {                                                             \
            fprintf(stderr, "cg-ref: %s: %s\n", #call, cudaGetErrorString(e_));              \
            exit(3);                                                                         \
        }                                                                                    \
    } while (0)
#define CS(call)                                                                             \
    do {                                                                                     \
        cusparseStatus_t s_ = (call);                                                        \
        if (s_ != CUSPARSE_STATUS_SUCCESS) {                                                 \
            fprintf(stderr, "cg-ref: %s: %s\n", #call, cusparseGetErrorString(s_));          \
            exit(3);                                                                         \
        }                                                                                    \
    } while (0)
#define CB(call)                                                                             \
    do {                                                                                     \
        cublasStatus_t b_ = (call);                                                          \
        if (b_ != CUBLAS_STATUS_SUCCESS) {                                                   \
            fprintf(stderr, "cg-ref: %s: %s\n", #call, cublasGetStatusString(b_));           \
            exit(3);                                                                         \
        }                                                                                    \
    } while (0)

/* The device side: A, the vectors, the handles and the SpMV's buffer. */
struct ref {
    int n;
    int64_t nnz;
    int32_t *rp, *ci;
    double *val, *b, *x, *r, *p, *q;
    cudaStream_t st;
    cusparseHandle_t sp;
    cublasHandle_t bl;
    cusparseSpMatDescr_t A;
    cusparseDnVecDescr_t vp, vq;
    void *buf;
};

static const double one = 1.0, zero = 0.0;

static int parse(int argc, char **argv, long *side, long *iters, unsigned long long *seed)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--n"))
            *side = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--iters"))
            *iters = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed"))
            *seed = strtoull(argv[i + 1], NULL, 0);
        else {
            fprintf(stderr, "usage: cg-ref --n GRID_SIDE [--iters N] [--seed S]\n");
            return 1;
        }
    }
    if (*side < 2 || *iters < 1) {
        fprintf(stderr, "cg-ref: --n must be >= 2 and --iters >= 1\n");
        return 1;
    }
    return 0;
}

/* The engine's 2-D Poisson matrix and a random b, onto the device. */
static int upload(struct ref *R, long side, unsigned long long seed)
{
    spmv_error err;
    memset(&err, 0, sizeof err);
    spmv_coo coo;
    spmv_csr csr;
    spmv_gen_spec g = {SPMV_GEN_POISSON2D, side, 5, 0, seed};
    if (spmv_gen(&g, &coo, &err) || spmv_coo_to_csr(&coo, SPMV_FLOAT64, &csr, &err)) {
        fprintf(stderr, "cg-ref: %s\n", err.message);
        return 2;
    }
    spmv_coo_free(&coo);
    int n = R->n = csr.rows;
    int64_t nnz = R->nnz = csr.nnz;
    std::vector<double> hb(n);
    spmv_random_vector(SPMV_FLOAT64, n, seed, hb.data());
    CK(cudaMalloc(&R->rp, (n + 1) * sizeof(int32_t)));
    CK(cudaMalloc(&R->ci, nnz * sizeof(int32_t)));
    CK(cudaMalloc(&R->val, nnz * sizeof(double)));
    for (double **v : {&R->b, &R->x, &R->r, &R->p, &R->q})
        CK(cudaMalloc(v, n * sizeof(double)));
    CK(cudaMemcpy(R->rp, csr.row_ptr, (n + 1) * sizeof(int32_t), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(R->ci, csr.col, nnz * sizeof(int32_t), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(R->val, csr.val, nnz * sizeof(double), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(R->b, hb.data(), n * sizeof(double), cudaMemcpyHostToDevice));
    spmv_csr_free(&csr);
    return 0;
}

/* Stream, handles, descriptors and the SpMV's buffer (made once). */
static void handles(struct ref *R)
{
    CK(cudaStreamCreateWithFlags(&R->st, cudaStreamNonBlocking));
    CS(cusparseCreate(&R->sp));
    CS(cusparseSetStream(R->sp, R->st));
    CB(cublasCreate(&R->bl));
    CB(cublasSetStream(R->bl, R->st));
    CS(cusparseCreateCsr(&R->A, R->n, R->n, R->nnz, R->rp, R->ci, R->val, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                         CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F));
    CS(cusparseCreateDnVec(&R->vp, R->n, R->p, CUDA_R_64F));
    CS(cusparseCreateDnVec(&R->vq, R->n, R->q, CUDA_R_64F));
    size_t bufsz = 0;
    CS(cusparseSpMV_bufferSize(R->sp, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, R->A, R->vp, &zero, R->vq, CUDA_R_64F,
                               CUSPARSE_SPMV_ALG_DEFAULT, &bufsz));
    CK(cudaMalloc(&R->buf, bufsz ? bufsz : 1));
}

static void spmv(struct ref *R)
{
    CS(cusparseSpMV(R->sp, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, R->A, R->vp, &zero, R->vq, CUDA_R_64F,
                    CUSPARSE_SPMV_ALG_DEFAULT, R->buf));
}

/* `iters` CG iterations from x = 0, timed by events: the loop's ms.
 * *relres: sqrt(r·r / b·b) at the end. */
static float cg(struct ref *R, long iters, double *relres)
{
    int n = R->n;
    CK(cudaMemsetAsync(R->x, 0, n * sizeof(double), R->st));
    CK(cudaMemcpyAsync(R->r, R->b, n * sizeof(double), cudaMemcpyDeviceToDevice, R->st));
    CK(cudaMemcpyAsync(R->p, R->b, n * sizeof(double), cudaMemcpyDeviceToDevice, R->st));
    double rr, bb;
    CB(cublasDdot(R->bl, n, R->r, 1, R->r, 1, &rr));
    bb = rr;
    spmv(R); /* warm-up: handles, buffers, module load */
    CK(cudaStreamSynchronize(R->st));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventRecord(e0, R->st));
    for (long it = 0; it < iters; it++) {
        double pq, rr_new;
        spmv(R);
        CB(cublasDdot(R->bl, n, R->p, 1, R->q, 1, &pq));
        double alpha = rr / pq, malpha = -alpha;
        CB(cublasDaxpy(R->bl, n, &alpha, R->p, 1, R->x, 1));
        CB(cublasDaxpy(R->bl, n, &malpha, R->q, 1, R->r, 1));
        CB(cublasDdot(R->bl, n, R->r, 1, R->r, 1, &rr_new));
        double beta = rr_new / rr;
        CB(cublasDscal(R->bl, n, &beta, R->p, 1));
        CB(cublasDaxpy(R->bl, n, &one, R->r, 1, R->p, 1));
        rr = rr_new;
    }
    CK(cudaEventRecord(e1, R->st));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    *relres = sqrt(rr / bb);
    return ms;
}

/* The product alone: the median of 50, by events. */
static double spmv_median(struct ref *R)
{
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> t(50);
    for (auto &ms : t) {
        CK(cudaEventRecord(e0, R->st));
        spmv(R);
        CK(cudaEventRecord(e1, R->st));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1));
    }
    std::sort(t.begin(), t.end());
    return (t[24] + t[25]) / 2.0;
}

int main(int argc, char **argv)
{
    long side = 1000, iters = 500;
    unsigned long long seed = 1;
    struct ref R;
    memset(&R, 0, sizeof R);
    int rc = parse(argc, argv, &side, &iters, &seed);
    if (rc || (rc = upload(&R, side, seed)))
        return rc;
    handles(&R);
    double relres;
    float loop_ms = cg(&R, iters, &relres);
    double spmv_ms = spmv_median(&R);
    printf("{\"rows\":%d,\"nnz\":%lld,\"iters\":%ld,\"ms_per_iter\":%.6f,\"total_ms\":%.3f,\"spmv_ms\":%.6f,"
           "\"final_relres\":%.6g}\n",
           R.n, (long long)R.nnz, iters, loop_ms / iters, loop_ms, spmv_ms, relres);
    cusparseDestroySpMat(R.A);
    cusparseDestroyDnVec(R.vp);
    cusparseDestroyDnVec(R.vq);
    cusparseDestroy(R.sp);
    cublasDestroy(R.bl);
    return 0;
}
