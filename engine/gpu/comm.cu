/* comm.cu — NCCL halo exchange of sharded products (engine/comm.h).
 *
 * A communicator over the job's GPUs, made non-blocking (ncclConfig_t
 * blocking = 0) so its set-up and every exchange can be polled against a
 * deadline and aborted (ncclCommAbort) when a peer is dead or hung. The
 * exchange runs on a stream of its own: a small kernel packs the x entries
 * each peer wants into one send buffer, then one ncclGroupStart/End posts
 * every ncclSend and ncclRecv, straight into the ghost vector (a peer's
 * ghosts are contiguous there, partition.c says why). The caller queues
 * the local block's product on the context's stream first, then the
 * exchange (its host side, NCCL's enqueue, takes tens of microseconds the
 * GPU should not sit idle for), and the off-diagonal product behind it. Device bytes (send
 * list, send buffer, ghost vector) count in the context like a vector's.
 */
#include <nccl.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm.h"
#include "gpu.cuh"

static_assert(sizeof(ncclUniqueId) == SPMV_GPU_COMM_ID_BYTES, "NCCL's unique id is 128 bytes");

struct spmv_gpu_comm {
    spmv_gpu_ctx *ctx;
    ncclComm_t comm;
    cudaStream_t stream;           /* the exchanges' own stream */
    int nranks, rank;
    bool broken;                   /* aborted: every call fails */
};

struct spmv_gpu_halo {
    spmv_dtype dtype;
    int nranks;
    int32_t *send_off, *recv_off;  /* host copies, nranks + 1 */
    int32_t nsend;
    int32_t *send_idx;             /* device */
    void *send_buf;                /* device, nsend values */
    spmv_vec ghost;                /* device, recv_off[nranks] values */
    int32_t n_off;
    int32_t *off_rows;             /* device, n_off local rows */
    spmv_vec offsum;               /* device, n_off values */
    cudaEvent_t local, done;       /* the local product's end (context stream), the exchange's (its stream) */
    cudaEvent_t begin, end;        /* a run's first and last (context stream): its time on the device */
};

static int nccl_error(ncclResult_t r, spmv_error *err, const char *what)
{
    return spmv_error_set(err, SPMV_ERR_DEVICE, 0, "%s: NCCL %s", what, ncclGetErrorString(r));
}

/* Between two polls of a wait that began at `since` (spmv_now_ms): none
 * for its first 2 ms, since an exchange takes tens of microseconds and a
 * sleep at least the kernel's timer slack (50 us), which would double a
 * sharded product's time; then 20 us naps, so that a wait on a hung peer
 * does not hold a core for cluster_timeout_ms. */
static void nap(double since)
{
    if (spmv_now_ms() - since < 2.0)
        return;
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
}

/* Polls the communicator until it leaves ncclInProgress; past the
 * deadline it is aborted. */
static int comm_settle(spmv_gpu_comm *c, double deadline, const char *what, spmv_error *err)
{
    ncclResult_t state = ncclInProgress;
    double since = spmv_now_ms();
    while (state == ncclInProgress) {
        ncclResult_t r = ncclCommGetAsyncError(c->comm, &state);
        if (r != ncclSuccess)
            return nccl_error(r, err, what);
        if (state == ncclInProgress && spmv_now_ms() > deadline) {
            ncclCommAbort(c->comm);
            c->broken = true;
            return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0,
                                  "%s: the GPUs of the other ranks did not answer in time; NCCL communicator aborted",
                                  what);
        }
        if (state == ncclInProgress)
            nap(since);
    }
    return state == ncclSuccess ? SPMV_OK : nccl_error(state, err, what);
}

extern "C" int spmv_gpu_comm_id(void *id, spmv_error *err)
{
    ncclUniqueId u;
    ncclResult_t r = ncclGetUniqueId(&u);
    if (r != ncclSuccess)
        return nccl_error(r, err, "ncclGetUniqueId");
    memcpy(id, &u, sizeof u);
    return SPMV_OK;
}

extern "C" int spmv_gpu_comm_new(spmv_gpu_ctx *ctx, int nranks, int rank, const void *id, double timeout_ms,
                                 spmv_gpu_comm **out, spmv_error *err)
{
    *out = NULL;
    spmv_gpu_comm *c = (spmv_gpu_comm *)calloc(1, sizeof *c);
    if (!c)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for a NCCL communicator");
    c->ctx = ctx;
    c->nranks = nranks;
    c->rank = rank;
    /* The exchange's stream has the device's highest priority: posted just
     * after the local product, its pack and NCCL kernels take the SMs as
     * the local kernel's first blocks leave them, instead of waiting for
     * all of its blocks (then the exchange would follow the local product
     * rather than overlap it). */
    int least = 0, greatest = 0;
    cudaError_t e = cudaSetDevice(ctx->device);
    if (e == cudaSuccess)
        e = cudaDeviceGetStreamPriorityRange(&least, &greatest);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithPriority(&c->stream, cudaStreamNonBlocking, greatest);
    if (e != cudaSuccess) {
        free(c);
        return gpu_cuda_error(e, err, "the exchange stream");
    }
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&c->comm, nranks, u, rank, &config);
    int st = SPMV_OK;
    if (r != ncclSuccess && r != ncclInProgress)
        st = nccl_error(r, err, "ncclCommInitRankConfig");
    else
        st = comm_settle(c, spmv_now_ms() + timeout_ms, "ncclCommInitRankConfig", err);
    if (st != SPMV_OK) {
        if (!c->broken && c->comm)
            ncclCommAbort(c->comm);
        cudaStreamDestroy(c->stream);
        free(c);
        return st;
    }
    *out = c;
    return SPMV_OK;
}

extern "C" void spmv_gpu_comm_free(spmv_gpu_comm *c, bool abort)
{
    if (!c)
        return;
    cudaSetDevice(c->ctx->device);
    if (!c->broken) {
        if (abort)
            ncclCommAbort(c->comm);
        else
            ncclCommDestroy(c->comm);
    }
    cudaStreamDestroy(c->stream);
    free(c);
}

extern "C" int spmv_gpu_halo_new(spmv_gpu_comm *c, spmv_dtype dt, const int32_t *send_off, const int32_t *send_idx,
                                 const int32_t *recv_off, const int32_t *off_rows, int32_t n_off,
                                 spmv_gpu_halo **out, spmv_error *err)
{
    *out = NULL;
    spmv_gpu_halo *h = (spmv_gpu_halo *)calloc(1, sizeof *h);
    size_t offs = ((size_t)c->nranks + 1) * sizeof(int32_t);
    if (!h || !(h->send_off = (int32_t *)malloc(offs)) || !(h->recv_off = (int32_t *)malloc(offs))) {
        spmv_gpu_halo_free(c, h);
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for a halo plan");
    }
    h->dtype = dt;
    h->nranks = c->nranks;
    memcpy(h->send_off, send_off, offs);
    memcpy(h->recv_off, recv_off, offs);
    h->nsend = send_off[c->nranks];
    size_t vs = spmv_dtype_size(dt);
    int st = gpu_ctx_alloc(c->ctx, (void **)&h->send_idx, (size_t)h->nsend * sizeof(int32_t), "halo send list", err);
    if (!st)
        st = gpu_ctx_alloc(c->ctx, &h->send_buf, (size_t)h->nsend * vs, "halo send buffer", err);
    if (!st)
        st = spmv_gpu_vec_alloc(c->ctx, dt, recv_off[c->nranks], 1, &h->ghost, err);
    h->n_off = n_off;
    if (!st)
        st = gpu_ctx_alloc(c->ctx, (void **)&h->off_rows, (size_t)n_off * sizeof(int32_t), "halo off-diagonal rows", err);
    if (!st)
        st = spmv_gpu_vec_alloc(c->ctx, dt, n_off, 1, &h->offsum, err);
    if (!st && h->nsend) {
        cudaError_t e = cudaMemcpy(h->send_idx, send_idx, (size_t)h->nsend * sizeof(int32_t), cudaMemcpyHostToDevice);
        if (e != cudaSuccess)
            st = gpu_cuda_error(e, err, "halo send list");
    }
    if (!st && n_off) {
        cudaError_t e = cudaMemcpy(h->off_rows, off_rows, (size_t)n_off * sizeof(int32_t), cudaMemcpyHostToDevice);
        if (e != cudaSuccess)
            st = gpu_cuda_error(e, err, "halo off-diagonal rows");
    }
    if (!st) {
        cudaEvent_t *ev[] = {&h->local, &h->done, &h->begin, &h->end};
        cudaError_t e = cudaSuccess;
        int made = 0;
        while (made < 4 && (e = cudaEventCreate(ev[made])) == cudaSuccess)
            made++;
        if (e != cudaSuccess) {
            while (made > 0)
                cudaEventDestroy(*ev[--made]);
            h->local = NULL;
            st = gpu_cuda_error(e, err, "halo events");
        }
    }
    if (st) {
        spmv_gpu_halo_free(c, h);
        return st;
    }
    *out = h;
    return SPMV_OK;
}

extern "C" void spmv_gpu_halo_free(spmv_gpu_comm *c, spmv_gpu_halo *h)
{
    if (!h)
        return;
    if (c) {
        gpu_ctx_free(c->ctx, h->send_idx, (size_t)h->nsend * sizeof(int32_t));
        gpu_ctx_free(c->ctx, h->send_buf, (size_t)h->nsend * spmv_dtype_size(h->dtype));
        spmv_gpu_vec_free(c->ctx, &h->ghost);
        gpu_ctx_free(c->ctx, h->off_rows, (size_t)h->n_off * sizeof(int32_t));
        spmv_gpu_vec_free(c->ctx, &h->offsum);
        if (h->local) {
            cudaEventDestroy(h->local);
            cudaEventDestroy(h->done);
            cudaEventDestroy(h->begin);
            cudaEventDestroy(h->end);
        }
    }
    free(h->send_off);
    free(h->recv_off);
    free(h);
}

extern "C" const spmv_vec *spmv_gpu_halo_ghost(const spmv_gpu_halo *h) { return &h->ghost; }
extern "C" spmv_vec *spmv_gpu_halo_offsum(spmv_gpu_halo *h) { return &h->offsum; }

template <typename T> __global__ void halo_add(const int32_t *__restrict__ rows, const T *__restrict__ t, int32_t n,
                                               T *__restrict__ y)
{
    int32_t i = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n)
        y[rows[i]] += t[i];
}

extern "C" int spmv_gpu_halo_add(spmv_gpu_comm *c, spmv_gpu_halo *h, spmv_vec *y, spmv_error *err)
{
    if (y->device != SPMV_DEVICE_GPU || y->dtype != h->dtype)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "the halo's sums go into a device y of the shard's dtype");
    if (!h->n_off)
        return SPMV_OK;
    cudaSetDevice(c->ctx->device);
    int32_t threads = 256, blocks = (h->n_off + threads - 1) / threads;
    if (h->dtype == SPMV_FLOAT32)
        halo_add<float><<<blocks, threads, 0, c->ctx->stream>>>(h->off_rows, (const float *)h->offsum.data, h->n_off,
                                                                 (float *)y->data);
    else
        halo_add<double><<<blocks, threads, 0, c->ctx->stream>>>(h->off_rows, (const double *)h->offsum.data,
                                                                  h->n_off, (double *)y->data);
    return gpu_check_launch(err, "halo_add");
}

template <typename T> __global__ void halo_pack(const T *__restrict__ x, const int32_t *__restrict__ idx, int32_t n,
                                                T *__restrict__ out)
{
    int32_t i = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n)
        out[i] = x[idx[i]];
}

extern "C" int spmv_gpu_halo_begin(spmv_gpu_comm *c, spmv_gpu_halo *h, spmv_error *err)
{
    if (c->broken)
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "the NCCL communicator was aborted after a failure");
    cudaSetDevice(c->ctx->device);
    cudaError_t e = cudaEventRecord(h->begin, c->ctx->stream);
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, "marking the run's start");
}

extern "C" int spmv_gpu_halo_start(spmv_gpu_comm *c, spmv_gpu_halo *h, const spmv_vec *x, spmv_error *err)
{
    if (c->broken)
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "the NCCL communicator was aborted after a failure");
    if (x->device != SPMV_DEVICE_GPU || x->dtype != h->dtype)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "the halo exchange takes a device x of the shard's dtype");
    cudaSetDevice(c->ctx->device);
    cudaError_t e = cudaStreamWaitEvent(c->stream, h->begin, 0);
    if (e != cudaSuccess)
        return gpu_cuda_error(e, err, "waiting for the run's start");
    if (h->nsend) {
        int32_t threads = 256, blocks = (h->nsend + threads - 1) / threads;
        if (h->dtype == SPMV_FLOAT32)
            halo_pack<float><<<blocks, threads, 0, c->stream>>>((const float *)x->data, h->send_idx, h->nsend,
                                                                 (float *)h->send_buf);
        else
            halo_pack<double><<<blocks, threads, 0, c->stream>>>((const double *)x->data, h->send_idx, h->nsend,
                                                                  (double *)h->send_buf);
        int st = gpu_check_launch(err, "halo_pack");
        if (st)
            return st;
    }
    ncclDataType_t type = h->dtype == SPMV_FLOAT32 ? ncclFloat32 : ncclFloat64;
    size_t vs = spmv_dtype_size(h->dtype);
    ncclResult_t r = ncclGroupStart();
    for (int p = 0; p < h->nranks && r == ncclSuccess; p++) {
        size_t ns = (size_t)(h->send_off[p + 1] - h->send_off[p]);
        size_t nr = (size_t)(h->recv_off[p + 1] - h->recv_off[p]);
        if (p == c->rank)
            continue;
        if (ns)
            r = ncclSend((char *)h->send_buf + (size_t)h->send_off[p] * vs, ns, type, p, c->comm, c->stream);
        if (nr && (r == ncclSuccess || r == ncclInProgress))
            r = ncclRecv((char *)h->ghost.data + (size_t)h->recv_off[p] * vs, nr, type, p, c->comm, c->stream);
        if (r == ncclInProgress)
            r = ncclSuccess;
    }
    ncclResult_t g = ncclGroupEnd();
    if (r != ncclSuccess)
        return nccl_error(r, err, "ncclSend/ncclRecv");
    if (g != ncclSuccess && g != ncclInProgress)
        return nccl_error(g, err, "ncclGroupEnd");
    return SPMV_OK;
}

/* The products that read the ghost entries wait for the exchange on the
 * device, not on the host: the local product's end is marked on the
 * context's stream, the exchange's end on its own, and the context's
 * stream waits for the latter, so whatever is queued on it next (the
 * off-diagonal product, halo_add) starts the moment both are done. */
extern "C" int spmv_gpu_halo_join(spmv_gpu_comm *c, spmv_gpu_halo *h, double timeout_ms, spmv_error *err)
{
    int st = comm_settle(c, spmv_now_ms() + timeout_ms, "the halo exchange", err); /* its kernels are queued */
    if (st)
        return st;
    cudaSetDevice(c->ctx->device);
    cudaError_t e = cudaEventRecord(h->local, c->ctx->stream);
    if (e == cudaSuccess)
        e = cudaEventRecord(h->done, c->stream);
    if (e == cudaSuccess)
        e = cudaStreamWaitEvent(c->ctx->stream, h->done, 0);
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, "joining the halo exchange");
}

extern "C" int spmv_gpu_halo_finish(spmv_gpu_comm *c, spmv_gpu_halo *h, double timeout_ms, double *exposed_ms,
                                    double *device_ms, spmv_error *err)
{
    double since = spmv_now_ms(), deadline = since + timeout_ms;
    cudaSetDevice(c->ctx->device);
    cudaError_t rec = cudaEventRecord(h->end, c->ctx->stream);
    if (rec != cudaSuccess)
        return gpu_cuda_error(rec, err, "marking the run's end");
    for (;;) {
        cudaError_t e = cudaStreamQuery(c->ctx->stream);
        if (e == cudaSuccess)
            break;
        if (e != cudaErrorNotReady)
            return gpu_cuda_error(e, err, "a sharded product");
        ncclResult_t state;
        if (ncclCommGetAsyncError(c->comm, &state) == ncclSuccess && state != ncclSuccess && state != ncclInProgress)
            return nccl_error(state, err, "the halo exchange");
        if (spmv_now_ms() > deadline) {
            ncclCommAbort(c->comm);
            c->broken = true;
            return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0,
                                  "the halo exchange over NCCL did not finish within %.0f ms; communicator aborted",
                                  timeout_ms);
        }
        nap(since);
    }
    float ms = 0;
    if (exposed_ms)
        *exposed_ms = cudaEventElapsedTime(&ms, h->local, h->done) == cudaSuccess && ms > 0 ? ms : 0.0;
    if (device_ms)
        *device_ms = cudaEventElapsedTime(&ms, h->begin, h->end) == cudaSuccess ? ms : 0.0;
    return SPMV_OK;
}
