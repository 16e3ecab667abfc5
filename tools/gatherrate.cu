/* gatherrate.cu — spmv-gatherrate ROWS COLS PER_ROW DTYPE: how long this
 * host's GPU 0 takes to gather PER_ROW uniformly random entries of an x of
 * COLS values for each of ROWS rows and sum them, with no matrix bytes at
 * all (the columns come from a hash of the row and the slot).
 *
 * A pattern-only graph whose columns are uniformly random (bench-gpu's
 * graph_uniform and graph_powerlaw) needs exactly those gathers: each one
 * touches a 32-byte sector of x that no neighbour shares, so this time is
 * a floor under any SpMV of such a matrix, whatever its format moves
 * besides (docs/benchmarks/packed.md). Two schedules are timed, a lane per
 * row with 8 and with 32 gathers in flight; the faster is the floor. One
 * JSON line: medians of 50 runs after 5 warm-up ones, by CUDA events.
 */
#include <stdint.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

static void check(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "spmv-gatherrate: %s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

__device__ __forceinline__ uint32_t next_col(uint32_t &h, uint32_t cols)
{
    h ^= h << 13; /* xorshift32: uniform enough over any cols */
    h ^= h >> 17;
    h ^= h << 5;
    return h % cols;
}

template <typename T, int INFLIGHT>
__global__ void gather(int32_t rows, uint32_t cols, int per, const T *__restrict__ x, T *__restrict__ y)
{
    int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (r >= rows)
        return;
    uint32_t h = (uint32_t)r * 2654435761u + 0x9e3779b9u;
    T sum = 0;
    for (int k = 0; k < per; k += INFLIGHT) {
        T v[INFLIGHT];
#pragma unroll
        for (int u = 0; u < INFLIGHT; u++)
            v[u] = k + u < per ? __ldg(x + next_col(h, cols)) : (T)0;
#pragma unroll
        for (int u = 0; u < INFLIGHT; u++)
            sum += v[u];
    }
    y[r] = sum;
}

template <typename T> __global__ void fill(int64_t n, T *x)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        x[i] = (T)(1.0 + (double)(i % 97) / 97.0);
}

template <typename T, int INFLIGHT> static double median_ms(int32_t rows, uint32_t cols, int per, const T *x, T *y)
{
    cudaEvent_t a, b;
    check(cudaEventCreate(&a), "cudaEventCreate");
    check(cudaEventCreate(&b), "cudaEventCreate");
    unsigned grid = (unsigned)(((int64_t)rows + 255) / 256);
    std::vector<float> t;
    for (int i = 0; i < 55; i++) {
        check(cudaEventRecord(a), "cudaEventRecord");
        gather<T, INFLIGHT><<<grid, 256>>>(rows, cols, per, x, y);
        check(cudaEventRecord(b), "cudaEventRecord");
        check(cudaEventSynchronize(b), "gather");
        float ms;
        check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
        if (i >= 5)
            t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return (t[t.size() / 2 - 1] + t[t.size() / 2]) / 2.0;
}

template <typename T> static int run(int32_t rows, uint32_t cols, int per, const char *dtype)
{
    T *x = nullptr, *y = nullptr;
    check(cudaMalloc(&x, (size_t)cols * sizeof(T)), "cudaMalloc x");
    check(cudaMalloc(&y, (size_t)rows * sizeof(T)), "cudaMalloc y");
    fill<T><<<1024, 256>>>(cols, x);
    check(cudaDeviceSynchronize(), "fill");
    double m8 = median_ms<T, 8>(rows, cols, per, x, y), m32 = median_ms<T, 32>(rows, cols, per, x, y);
    double best = std::min(m8, m32), gathers = (double)rows * per;
    cudaDeviceProp p;
    check(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties");
    printf("{\"gpu\": \"%s\", \"rows\": %d, \"cols\": %u, \"per_row\": %d, \"dtype\": \"%s\", \"gathers\": %.0f, "
           "\"median_ms_8\": %.4f, \"median_ms_32\": %.4f, \"floor_ms\": %.4f, \"gathers_per_ns\": %.2f}\n",
           p.name, rows, cols, per, dtype, gathers, m8, m32, best, gathers / (best * 1e6));
    cudaFree(x);
    cudaFree(y);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: spmv-gatherrate ROWS COLS PER_ROW float64|float32\n");
        return 2;
    }
    long rows = strtol(argv[1], nullptr, 10), cols = strtol(argv[2], nullptr, 10), per = strtol(argv[3], nullptr, 10);
    if (rows < 1 || rows > INT32_MAX || cols < 1 || cols > INT32_MAX || per < 1 || per > 1 << 20 ||
        (strcmp(argv[4], "float64") && strcmp(argv[4], "float32"))) {
        fprintf(stderr, "spmv-gatherrate: ROWS and COLS 1..2^31-1, PER_ROW 1..2^20, DTYPE float64 or float32\n");
        return 2;
    }
    return strcmp(argv[4], "float64") == 0 ? run<double>((int32_t)rows, (uint32_t)cols, (int)per, argv[4])
                                           : run<float>((int32_t)rows, (uint32_t)cols, (int)per, argv[4]);
}
