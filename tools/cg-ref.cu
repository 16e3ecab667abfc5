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

int main(int argc, char **argv)
{
    long side = 1000, iters = 500;
    unsigned long long seed = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--n"))
            side = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--iters"))
            iters = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed"))
            seed = strtoull(argv[i + 1], NULL, 0);
        else {
            fprintf(stderr, "usage: cg-ref --n GRID_SIDE [--iters N] [--seed S]\n");
            return 1;
        }
    }
    if (side < 2 || iters < 1) {
        fprintf(stderr, "cg-ref: --n must be >= 2 and --iters >= 1\n");
        return 1;
    }
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
    int n = csr.rows;
    int64_t nnz = csr.nnz;
    std::vector<double> hb(n);
    spmv_random_vector(SPMV_FLOAT64, n, seed, hb.data());

    int32_t *rp, *ci;
    double *val, *b, *x, *r, *p, *q;
    CK(cudaMalloc(&rp, (n + 1) * sizeof(int32_t)));
    CK(cudaMalloc(&ci, nnz * sizeof(int32_t)));
    CK(cudaMalloc(&val, nnz * sizeof(double)));
    for (double **v : {&b, &x, &r, &p, &q})
        CK(cudaMalloc(v, n * sizeof(double)));
    CK(cudaMemcpy(rp, csr.row_ptr, (n + 1) * sizeof(int32_t), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(ci, csr.col, nnz * sizeof(int32_t), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(val, csr.val, nnz * sizeof(double), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(b, hb.data(), n * sizeof(double), cudaMemcpyHostToDevice));
    spmv_csr_free(&csr);

    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cusparseHandle_t sp;
    cublasHandle_t bl;
    CS(cusparseCreate(&sp));
    CS(cusparseSetStream(sp, st));
    CB(cublasCreate(&bl));
    CB(cublasSetStream(bl, st));
    cusparseSpMatDescr_t A;
    cusparseDnVecDescr_t vp, vq;
    CS(cusparseCreateCsr(&A, n, n, nnz, rp, ci, val, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                         CUDA_R_64F));
    CS(cusparseCreateDnVec(&vp, n, p, CUDA_R_64F));
    CS(cusparseCreateDnVec(&vq, n, q, CUDA_R_64F));
    const double one = 1.0, zero = 0.0;
    size_t bufsz = 0;
    void *buf = NULL;
    CS(cusparseSpMV_bufferSize(sp, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vp, &zero, vq, CUDA_R_64F,
                               CUSPARSE_SPMV_ALG_DEFAULT, &bufsz));
    CK(cudaMalloc(&buf, bufsz ? bufsz : 1));

    /* x = 0, r = b, p = r */
    CK(cudaMemsetAsync(x, 0, n * sizeof(double), st));
    CK(cudaMemcpyAsync(r, b, n * sizeof(double), cudaMemcpyDeviceToDevice, st));
    CK(cudaMemcpyAsync(p, b, n * sizeof(double), cudaMemcpyDeviceToDevice, st));
    double rr, bb;
    CB(cublasDdot(bl, n, r, 1, r, 1, &rr));
    bb = rr;
    /* warm-up: one product (handles, buffers, module load) */
    CS(cusparseSpMV(sp, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vp, &zero, vq, CUDA_R_64F,
                    CUSPARSE_SPMV_ALG_DEFAULT, buf));
    CK(cudaStreamSynchronize(st));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventRecord(e0, st));
    for (long it = 0; it < iters; it++) {
        double pq, rr_new;
        CS(cusparseSpMV(sp, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vp, &zero, vq, CUDA_R_64F,
                        CUSPARSE_SPMV_ALG_DEFAULT, buf));
        CB(cublasDdot(bl, n, p, 1, q, 1, &pq));
        double alpha = rr / pq, malpha = -alpha;
        CB(cublasDaxpy(bl, n, &alpha, p, 1, x, 1));
        CB(cublasDaxpy(bl, n, &malpha, q, 1, r, 1));
        CB(cublasDdot(bl, n, r, 1, r, 1, &rr_new));
        double beta = rr_new / rr;
        CB(cublasDscal(bl, n, &beta, p, 1));
        CB(cublasDaxpy(bl, n, &one, r, 1, p, 1));
        rr = rr_new;
    }
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float loop_ms = 0;
    CK(cudaEventElapsedTime(&loop_ms, e0, e1));
    /* the product alone: median of 50 */
    std::vector<float> t(50);
    for (auto &ms : t) {
        CK(cudaEventRecord(e0, st));
        CS(cusparseSpMV(sp, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vp, &zero, vq, CUDA_R_64F,
                        CUSPARSE_SPMV_ALG_DEFAULT, buf));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1));
    }
    std::sort(t.begin(), t.end());
    printf("{\"rows\":%d,\"nnz\":%lld,\"iters\":%ld,\"ms_per_iter\":%.6f,\"total_ms\":%.3f,\"spmv_ms\":%.6f,"
           "\"final_relres\":%.6g}\n",
           n, (long long)nnz, iters, loop_ms / iters, loop_ms, (t[24] + t[25]) / 2.0, sqrt(rr / bb));
    cusparseDestroySpMat(A);
    cusparseDestroyDnVec(vp);
    cusparseDestroyDnVec(vq);
    cusparseDestroy(sp);
    cublasDestroy(bl);
    return 0;
}
