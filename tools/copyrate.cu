/* copyrate.cu — spmv-copyrate BYTES: the pinned copy rate of this host's GPU 0.
 *
 * The floor of a remote product is kernel + H2D + D2H at the rate the PCIe
 * (or C2C) link gives page-locked memory; tools/bench_roundtrip.py asks this
 * program for that rate in the same run as the products it compares. One
 * JSON line: the medians of 11 copies each way of BYTES between
 * cudaHostAlloc memory and cudaMalloc memory, timed with events.
 */
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

static void check(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "spmv-copyrate: %s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

static double median_ms(void *dst, const void *src, size_t n, cudaMemcpyKind kind)
{
    cudaEvent_t a, b;
    check(cudaEventCreate(&a), "cudaEventCreate");
    check(cudaEventCreate(&b), "cudaEventCreate");
    std::vector<float> t;
    for (int i = 0; i < 12; i++) {
        check(cudaEventRecord(a), "cudaEventRecord");
        check(cudaMemcpyAsync(dst, src, n, kind), "cudaMemcpyAsync");
        check(cudaEventRecord(b), "cudaEventRecord");
        check(cudaEventSynchronize(b), "cudaEventSynchronize");
        float ms;
        check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
        if (i) /* the first warms the link */
            t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return t[t.size() / 2];
}

int main(int argc, char **argv)
{
    if (argc != 2 || atoll(argv[1]) <= 0) {
        fprintf(stderr, "usage: spmv-copyrate BYTES\n");
        return 2;
    }
    size_t n = (size_t)atoll(argv[1]);
    void *h, *d;
    check(cudaHostAlloc(&h, n, cudaHostAllocDefault), "cudaHostAlloc");
    check(cudaMalloc(&d, n), "cudaMalloc");
    check(cudaMemset(d, 0, n), "cudaMemset");
    double h2d = median_ms(d, h, n, cudaMemcpyHostToDevice), d2h = median_ms(h, d, n, cudaMemcpyDeviceToHost);
    printf("{\"bytes\":%zu,\"h2d_ms\":%.4f,\"d2h_ms\":%.4f,\"h2d_gbs\":%.2f,\"d2h_gbs\":%.2f}\n", n, h2d, d2h,
           n / h2d / 1e6, n / d2h / 1e6);
    cudaFree(d);
    cudaFreeHost(h);
    return 0;
}
