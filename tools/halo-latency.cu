/* halo-latency.cu — where a sharded product's fixed cost goes (issue 32):
 * the halo exchange alone, on 2 ranks (one GPU each), five ways.
 *
 *   mpirun -np 2 build/halo-latency [n] [iters] [big_mb]
 *
 * n values (float64) each way (default 48 400: one plane of the 220^3
 * finite-volume matrix), iters timed iterations (default 300, after 30),
 * a "local product" stand-in reading big_mb MiB (default 320: half of that
 * matrix's values) where a case runs one beside the exchange.
 *
 *   nccl-blocking     pack + ncclSend/ncclRecv on a blocking communicator, sync
 *   nccl-nonblocking  the same on a non-blocking one (what the daemon makes),
 *                     its state polled after ncclGroupEnd as the daemon does
 *   nccl+local        the local kernel on one stream, then the exchange on a
 *                     high-priority stream (the daemon's order), both waited
 *   ipc               the pack kernel writes straight into the peer's ghost
 *                     buffer (CUDA IPC over NVLink), fences, bumps the peer's
 *                     flag; a one-thread kernel waits for its own flag
 *   ipc+local         the same beside the local kernel
 *   local             the local kernel alone
 *
 * Prints, per case, the median and p90 of each iteration's host time (from
 * the first launch to the last wait), and the median device time between
 * events on the first stream. Measures only; asserts nothing (but that the
 * ghost values arrived: every case checks them once at the end).
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#define CK(x)                                                                                                  \
    do {                                                                                                       \
        cudaError_t e_ = (x);                                                                                  \
        if (e_ != cudaSuccess) {                                                                               \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                  \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                                      \
        }                                                                                                      \
    } while (0)
#define NK(x)                                                                                                  \
    do {                                                                                                       \
        ncclResult_t r_ = (x);                                                                                 \
        if (r_ != ncclSuccess && r_ != ncclInProgress) {                                                       \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(r_));                 \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                                      \
        }                                                                                                      \
    } while (0)

static double now_ms()
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

__global__ void pack(const double *x, int n, int stride, double *out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = x[(long)i * stride % (4 * n)];
}

/* The pack writing into the peer's ghost buffer, then the peer's flag. */
__global__ void pack_remote(const double *x, int n, int stride, double *peer_ghost, unsigned *peer_flag,
                            unsigned seq, unsigned *done)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        peer_ghost[i] = x[(long)i * stride % (4 * n)];
    __threadfence_system();
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned blocks = atomicAdd(done, 1u) + 1;
        if (blocks == gridDim.x) { /* the last block: every block's stores are fenced */
            __threadfence_system();
            atomicExch_system(peer_flag, seq);
            *done = 0;
        }
    }
}

__global__ void wait_flag(volatile unsigned *flag, unsigned seq)
{
    while (*flag < seq) {
    }
}

/* A bandwidth-bound stand-in for the local product: a sum over big bytes. */
__global__ void local_kernel(const double4_32a *a, long n, double *out)
{
    double s = 0;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        double4_32a v = a[i];
        s += v.x + v.y + v.z + v.w;
    }
    if (s == 12345.678)
        *out = s;
}

struct ctx {
    int rank, peer, n, iters;
    long big4;
    double *x, *sendbuf, *ghost, *peer_ghost, *sink;
    double4_32a *big;
    unsigned *flag, *peer_flag, *done, seq;
    cudaStream_t s0, s1;
    cudaEvent_t e0, e1;
    ncclComm_t blocking, nonblocking;
};

static void exchange_nccl(ctx &c, ncclComm_t comm, bool poll, cudaStream_t s)
{
    int th = 256, bl = (c.n + th - 1) / th;
    pack<<<bl, th, 0, s>>>(c.x, c.n, 7, c.sendbuf);
    NK(ncclGroupStart());
    NK(ncclSend(c.sendbuf, c.n, ncclFloat64, c.peer, comm, s));
    NK(ncclRecv(c.ghost, c.n, ncclFloat64, c.peer, comm, s));
    ncclResult_t g = ncclGroupEnd();
    NK(g);
    if (poll) {
        ncclResult_t st = ncclInProgress;
        while (st == ncclInProgress)
            NK(ncclCommGetAsyncError(comm, &st));
    }
}

static void exchange_ipc(ctx &c, cudaStream_t s)
{
    int th = 256, bl = (c.n + th - 1) / th;
    c.seq++;
    pack_remote<<<bl, th, 0, s>>>(c.x, c.n, 7, c.peer_ghost, c.peer_flag, c.seq, c.done);
    wait_flag<<<1, 1, 0, s>>>(c.flag, c.seq);
}

enum kind { NCCL_BLOCKING, NCCL_NONBLOCKING, NCCL_LOCAL, IPC, IPC_LOCAL, LOCAL };
static const char *names[] = {"nccl-blocking", "nccl-nonblocking", "nccl+local", "ipc", "ipc+local", "local"};

static void one(ctx &c, kind k)
{
    bool local = k == NCCL_LOCAL || k == IPC_LOCAL || k == LOCAL;
    CK(cudaEventRecord(c.e0, c.s0));
    if (local)
        local_kernel<<<132 * 8, 512, 0, c.s0>>>(c.big, c.big4, c.sink);
    cudaStream_t xs = local ? c.s1 : c.s0;
    if (local)
        CK(cudaStreamWaitEvent(c.s1, c.e0, 0));
    if (k == NCCL_BLOCKING || k == NCCL_LOCAL)
        exchange_nccl(c, c.blocking, false, xs);
    else if (k == NCCL_NONBLOCKING)
        exchange_nccl(c, c.nonblocking, true, xs);
    else if (k == IPC || k == IPC_LOCAL)
        exchange_ipc(c, xs);
    if (local) {
        cudaEvent_t j;
        CK(cudaEventCreateWithFlags(&j, cudaEventDisableTiming));
        CK(cudaEventRecord(j, c.s1));
        CK(cudaStreamWaitEvent(c.s0, j, 0));
        CK(cudaEventDestroy(j));
    }
    CK(cudaEventRecord(c.e1, c.s0));
    CK(cudaStreamSynchronize(c.s0));
}

static void run_case(ctx &c, kind k)
{
    std::vector<double> host, dev;
    for (int it = 0; it < 30 + c.iters; it++) {
        MPI_Barrier(MPI_COMM_WORLD); /* both ranks start together: the skew is not what is measured */
        double t0 = now_ms();
        one(c, k);
        double t1 = now_ms();
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, c.e0, c.e1));
        if (it >= 30)
            host.push_back(t1 - t0), dev.push_back(ms);
    }
    std::sort(host.begin(), host.end());
    std::sort(dev.begin(), dev.end());
    double mx[3] = {host[host.size() / 2], host[host.size() * 9 / 10], dev[dev.size() / 2]}, g[3];
    MPI_Reduce(mx, g, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    /* the ghost arrived: the peer's x[(i*7) % 4n] for the first entries */
    if (k != LOCAL) {
        double got[4], want[4];
        CK(cudaMemcpy(got, c.ghost, sizeof got, cudaMemcpyDeviceToHost));
        for (int i = 0; i < 4; i++)
            want[i] = c.peer * 1e6 + (double)((long)i * 7 % (4 * c.n));
        if (memcmp(got, want, sizeof got) != 0)
            fprintf(stderr, "rank %d %s: ghost[0] %g, want %g\n", c.rank, names[k], got[0], want[0]);
    }
    if (c.rank == 0)
        printf("| %-17s | %8.4f | %8.4f | %8.4f |\n", names[k], g[0], g[1], g[2]);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    ctx c = {};
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (c.rank == 0)
            fprintf(stderr, "halo-latency: run it on 2 ranks (mpirun -np 2)\n");
        MPI_Finalize();
        return 2;
    }
    c.peer = 1 - c.rank;
    c.n = argc > 1 ? atoi(argv[1]) : 48400;
    c.iters = argc > 2 ? atoi(argv[2]) : 300;
    long big_mb = argc > 3 ? atol(argv[3]) : 320;
    int ndev = 0;
    CK(cudaGetDeviceCount(&ndev));
    CK(cudaSetDevice(c.rank % ndev));
    int lo, hi;
    CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    CK(cudaStreamCreateWithFlags(&c.s0, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithPriority(&c.s1, cudaStreamNonBlocking, hi));
    CK(cudaEventCreate(&c.e0));
    CK(cudaEventCreate(&c.e1));
    std::vector<double> hx(4 * (size_t)c.n);
    for (size_t i = 0; i < hx.size(); i++)
        hx[i] = c.rank * 1e6 + (double)i;
    CK(cudaMalloc(&c.x, hx.size() * sizeof(double)));
    CK(cudaMemcpy(c.x, hx.data(), hx.size() * sizeof(double), cudaMemcpyHostToDevice));
    CK(cudaMalloc(&c.sendbuf, c.n * sizeof(double)));
    CK(cudaMalloc(&c.ghost, c.n * sizeof(double)));
    CK(cudaMalloc(&c.sink, sizeof(double)));
    CK(cudaMalloc(&c.flag, 2 * sizeof(unsigned)));
    CK(cudaMemset(c.flag, 0, 2 * sizeof(unsigned)));
    c.done = c.flag + 1;
    c.big4 = big_mb * (1L << 20) / (long)sizeof(double4_32a);
    CK(cudaMalloc(&c.big, c.big4 * sizeof(double4_32a)));
    CK(cudaMemset(c.big, 0, c.big4 * sizeof(double4_32a)));
    /* NCCL: both kinds of communicator */
    ncclUniqueId id[2];
    if (c.rank == 0) {
        NK(ncclGetUniqueId(&id[0]));
        NK(ncclGetUniqueId(&id[1]));
    }
    MPI_Bcast(id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    NK(ncclCommInitRank(&c.blocking, 2, id[0], c.rank));
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    NK(ncclCommInitRankConfig(&c.nonblocking, 2, id[1], c.rank, &cfg));
    ncclResult_t st = ncclInProgress;
    while (st == ncclInProgress)
        NK(ncclCommGetAsyncError(c.nonblocking, &st));
    /* IPC: each rank opens the peer's ghost buffer and flag */
    cudaIpcMemHandle_t mine[2], theirs[2];
    CK(cudaIpcGetMemHandle(&mine[0], c.ghost));
    CK(cudaIpcGetMemHandle(&mine[1], c.flag));
    MPI_Sendrecv(mine, sizeof mine, MPI_BYTE, c.peer, 0, theirs, sizeof theirs, MPI_BYTE, c.peer, 0, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    int can = 0;
    CK(cudaDeviceCanAccessPeer(&can, c.rank % ndev, c.peer % ndev));
    CK(cudaIpcOpenMemHandle((void **)&c.peer_ghost, theirs[0], cudaIpcMemLazyEnablePeerAccess));
    CK(cudaIpcOpenMemHandle((void **)&c.peer_flag, theirs[1], cudaIpcMemLazyEnablePeerAccess));
    if (c.rank == 0) {
        cudaDeviceProp p;
        CK(cudaGetDeviceProperties(&p, 0));
        printf("halo-latency: 2 ranks, %s, peer access %d, n %d float64 each way (%.1f KB), %d iterations, local "
               "kernel over %ld MiB; NCCL %d\n\n",
               p.name, can, c.n, c.n * 8 / 1e3, c.iters, big_mb, NCCL_VERSION_CODE);
        printf("| case | host median ms | host p90 ms | device median ms (events) |\n| --- | ---: | ---: | ---: |\n");
    }
    for (int k = NCCL_BLOCKING; k <= LOCAL; k++)
        run_case(c, (kind)k);
    MPI_Barrier(MPI_COMM_WORLD);
    CK(cudaIpcCloseMemHandle(c.peer_ghost));
    CK(cudaIpcCloseMemHandle(c.peer_flag));
    ncclCommDestroy(c.blocking);
    ncclCommDestroy(c.nonblocking);
    MPI_Finalize();
    return 0;
}
