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
 * GPU should not sit idle for), and the off-diagonal product behind it;
 * a shard split into interior and edge rows (cluster/spmv.c) has its
 * edge rows computed on the exchange's stream instead, behind the ghost
 * entries and beside the interior's product. Device bytes (send
 * list, send buffer, ghost vector) count in the context like a vector's.
 *
 * Where every rank is on one host and its GPUs reach each other (CUDA
 * IPC), a halo skips NCCL on the product's path: each rank opens its
 * peers' ghost buffers and flag words once (halo_ipc_setup, agreed by
 * every rank), and an exchange is two kernels on the exchange stream, no
 * host call between them: halo_put writes the entries straight into each
 * peer's ghost buffer over NVLink and, its stores fenced, sets the peer's
 * flag for this rank to the product's sequence number; halo_wait spins
 * until every peer's flag here reaches it. Measured on 2 H200s
 * (tools/halo-latency.cu, docs/benchmarks/scaling.md): 0.017 ms for 387 KB
 * each way, against 0.026 ms through NCCL on a blocking communicator and
 * 0.085 ms on the non-blocking one the abortable waits need. The ghost
 * buffer has two halves, used by turns: a peer can be at most one product
 * ahead (it cannot finish product k+1 without this rank's entries of k+1,
 * sent only after this rank's product k), so it never overwrites the half
 * the off-diagonal (or edge) product is reading. A wait past timeout_ms ends its
 * kernel with a flag the host reads (mapped memory), and the halo fails
 * like a NCCL one.
 */
#include <nccl.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "gpu.cuh"

static_assert(sizeof(ncclUniqueId) == SPMV_GPU_COMM_ID_BYTES, "NCCL's unique id is 128 bytes");

struct spmv_gpu_comm {
    spmv_gpu_ctx *ctx;
    ncclComm_t comm;
    cudaStream_t stream;           /* the exchanges' own stream */
    int nranks, rank;
    bool broken;                   /* aborted: every call fails */
    bool ipc;                      /* halos may exchange through CUDA IPC (cluster_halo) */
    double timeout_ms;             /* every wait: cluster_timeout_ms */
    spmv_gpu_comm_watch watch;     /* asked during a wait: is every rank still there? */
    void *watch_ctx;
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
    cudaEvent_t local, done;       /* the local product's end (context stream), the exchange's (its stream) */
    cudaEvent_t begin, end;        /* a run's first and last (context stream): its time on the device */
    /* CUDA IPC (all false / NULL on the NCCL path) */
    bool ipc;
    spmv_vec ghosts;               /* device, 2 x recv_off[nranks] values: the two halves ghost takes by turns */
    unsigned *flags;               /* device, nranks: flags[p], the last product whose entries p delivered here */
    unsigned *blocks;              /* device, nranks: halo_put's block counter, one per peer */
    void **peer_ghosts;            /* host, nranks: peer p's ghosts, opened (NULL: self, or nothing sent to p) */
    unsigned **peer_flags;         /* host, nranks: peer p's flags, opened */
    int64_t *peer_at;              /* host, nranks: where this rank's entries start in p's ghosts, in values */
    int64_t *peer_half;            /* host, nranks: p's stride between its halves */
    volatile int *timed_out;       /* mapped host memory: a wait gave up (or the host tells the waits to stop) */
    int *timed_out_dev;            /* its device address */
    unsigned seq;                  /* products exchanged so far */
    int64_t stride;                /* values from one half of ghosts to the other (recv_off[nranks], rounded up to 128) */
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

extern "C" void spmv_gpu_comm_watch_set(spmv_gpu_comm *c, spmv_gpu_comm_watch fn, void *ctx)
{
    c->watch = fn;
    c->watch_ctx = ctx;
}

/* The watch's answer during a wait that began at `since`. */
static int watched(spmv_gpu_comm *c, double since, double *next, spmv_error *err)
{
    return c->watch ? c->watch(c->watch_ctx, spmv_now_ms() - since, next, err) : SPMV_OK;
}

/* Polls the communicator until it leaves ncclInProgress; past the
 * deadline, or a rank lost (the watch), it is aborted. */
static int comm_settle(spmv_gpu_comm *c, double deadline, const char *what, spmv_error *err)
{
    ncclResult_t state = ncclInProgress;
    double since = spmv_now_ms(), next = 0;
    while (state == ncclInProgress) {
        int lost = watched(c, since, &next, err);
        if (lost) {
            ncclCommAbort(c->comm);
            c->broken = true;
            return lost;
        }
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
                                 bool ipc, spmv_gpu_comm **out, spmv_error *err)
{
    *out = NULL;
    spmv_gpu_comm *c = (spmv_gpu_comm *)calloc(1, sizeof *c);
    if (!c)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for a NCCL communicator");
    c->ctx = ctx;
    c->nranks = nranks;
    c->rank = rank;
    c->ipc = ipc;
    c->timeout_ms = timeout_ms;
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

/* ------------------------------------------------------------- CUDA IPC */

/* Waits for what is queued on the exchange stream (a collective of the
 * set-up), polled against the communicator's deadline. */
static int exchange_stream_wait(spmv_gpu_comm *c, const char *what, spmv_error *err)
{
    int st = comm_settle(c, spmv_now_ms() + c->timeout_ms, what, err);
    double since = spmv_now_ms();
    while (!st) {
        cudaError_t e = cudaStreamQuery(c->stream);
        if (e == cudaSuccess)
            return SPMV_OK;
        if (e != cudaErrorNotReady)
            return gpu_cuda_error(e, err, what);
        if (spmv_now_ms() > since + c->timeout_ms) {
            ncclCommAbort(c->comm);
            c->broken = true;
            return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s: the other ranks did not take part within %.0f ms; "
                                  "NCCL communicator aborted", what, c->timeout_ms);
        }
        nap(since);
    }
    return st;
}

/* What each rank tells the others before a halo may go through CUDA IPC;
 * its receive offsets (nranks + 1 int32) follow it. */
struct ipc_rec {
    char host[64];
    int32_t ok;                    /* this rank's halo is allocated and IPC asked for */
    int32_t pad;
    int64_t half;                  /* values from one half of its ghosts to the other */
    cudaIpcMemHandle_t ghosts, flags;
};

static size_t ipc_rec_bytes(int nranks)
{
    return (sizeof(ipc_rec) + ((size_t)nranks + 1) * sizeof(int32_t) + 7) & ~(size_t)7;
}

/* Every rank's record, gathered over NCCL into all (nranks records). */
static int ipc_gather(spmv_gpu_comm *c, char *all, size_t rb, spmv_error *err)
{
    char *dev = NULL;
    size_t bytes = rb * (size_t)c->nranks;
    int st = gpu_ctx_alloc(c->ctx, (void **)&dev, bytes, "the halo's IPC records", err);
    cudaError_t e = st ? cudaSuccess : cudaMemcpy(dev + rb * c->rank, all + rb * c->rank, rb, cudaMemcpyHostToDevice);
    if (!st && e != cudaSuccess)
        st = gpu_cuda_error(e, err, "the halo's IPC record");
    if (!st) {
        ncclResult_t r = ncclAllGather(dev + rb * c->rank, dev, rb, ncclChar, c->comm, c->stream);
        st = r == ncclSuccess || r == ncclInProgress ? exchange_stream_wait(c, "gathering the halo's IPC records", err)
                                                     : nccl_error(r, err, "ncclAllGather");
    }
    if (!st && (e = cudaMemcpy(all, dev, bytes, cudaMemcpyDeviceToHost)) != cudaSuccess)
        st = gpu_cuda_error(e, err, "the halo's IPC records");
    gpu_ctx_free(c->ctx, dev, bytes);
    return st;
}

/* 1 when every rank says v is 1 (an all-reduce of the minimum). */
static int ipc_agree(spmv_gpu_comm *c, int32_t v, int32_t *all, spmv_error *err)
{
    int32_t *dev = NULL;
    int st = gpu_ctx_alloc(c->ctx, (void **)&dev, sizeof *dev, "the halo's IPC agreement", err);
    cudaError_t e = st ? cudaSuccess : cudaMemcpy(dev, &v, sizeof v, cudaMemcpyHostToDevice);
    if (!st && e != cudaSuccess)
        st = gpu_cuda_error(e, err, "the halo's IPC agreement");
    if (!st) {
        ncclResult_t r = ncclAllReduce(dev, dev, 1, ncclInt32, ncclMin, c->comm, c->stream);
        st = r == ncclSuccess || r == ncclInProgress ? exchange_stream_wait(c, "agreeing on the halo's IPC", err)
                                                     : nccl_error(r, err, "ncclAllReduce");
    }
    if (!st && (e = cudaMemcpy(all, dev, sizeof *all, cudaMemcpyDeviceToHost)) != cudaSuccess)
        st = gpu_cuda_error(e, err, "the halo's IPC agreement");
    gpu_ctx_free(c->ctx, dev, sizeof *dev);
    return st;
}

static void halo_ipc_close(spmv_gpu_halo *h)
{
    for (int p = 0; h->peer_ghosts && p < h->nranks; p++) {
        if (h->peer_ghosts[p])
            cudaIpcCloseMemHandle(h->peer_ghosts[p]);
        if (h->peer_flags[p])
            cudaIpcCloseMemHandle(h->peer_flags[p]);
        h->peer_ghosts[p] = NULL;
        h->peer_flags[p] = NULL;
    }
}

static void halo_ipc_free(spmv_gpu_comm *c, spmv_gpu_halo *h)
{
    halo_ipc_close(h);
    free(h->peer_ghosts);
    free(h->peer_flags);
    free(h->peer_at);
    free(h->peer_half);
    gpu_ctx_free(c->ctx, h->flags, (size_t)h->nranks * sizeof(unsigned));
    gpu_ctx_free(c->ctx, h->blocks, (size_t)h->nranks * sizeof(unsigned));
    if (h->timed_out)
        cudaFreeHost((void *)h->timed_out);
    h->peer_ghosts = NULL, h->peer_flags = NULL, h->flags = h->blocks = NULL, h->timed_out = NULL;
}

/* This rank's own side: flag words, block counters, the timeout flag, the
 * host tables; and its record (rec, with the receive offsets after it). */
static int ipc_own(spmv_gpu_comm *c, spmv_gpu_halo *h, ipc_rec *rec, spmv_error *err)
{
    int n = h->nranks;
    size_t fb = (size_t)n * sizeof(unsigned);
    h->peer_ghosts = (void **)calloc((size_t)n, sizeof(void *));
    h->peer_flags = (unsigned **)calloc((size_t)n, sizeof(unsigned *));
    h->peer_at = (int64_t *)calloc((size_t)n, sizeof(int64_t));
    h->peer_half = (int64_t *)calloc((size_t)n, sizeof(int64_t));
    if (!h->peer_ghosts || !h->peer_flags || !h->peer_at || !h->peer_half)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for the halo's IPC tables");
    int st = gpu_ctx_alloc(c->ctx, (void **)&h->flags, fb, "halo flags", err);
    if (!st)
        st = gpu_ctx_alloc(c->ctx, (void **)&h->blocks, fb, "halo counters", err);
    cudaError_t e = st ? cudaSuccess : cudaMemset(h->flags, 0, fb);
    if (e == cudaSuccess && !st)
        e = cudaMemset(h->blocks, 0, fb);
    if (e == cudaSuccess && !st)
        e = cudaHostAlloc((void **)&h->timed_out, sizeof(int), cudaHostAllocMapped);
    if (e == cudaSuccess && !st) {
        *(int *)h->timed_out = 0;
        e = cudaHostGetDevicePointer((void **)&h->timed_out_dev, (void *)h->timed_out, 0);
    }
    if (e == cudaSuccess && !st && h->ghosts.data) /* no ghosts: no peer writes here */
        e = cudaIpcGetMemHandle(&rec->ghosts, h->ghosts.data);
    if (e == cudaSuccess && !st)
        e = cudaIpcGetMemHandle(&rec->flags, h->flags);
    if (!st && e != cudaSuccess)
        st = gpu_cuda_error(e, err, "the halo's IPC buffers");
    return st;
}

/* Opens what this rank writes into: the ghosts and flags of every peer it
 * sends entries to. False when one cannot be opened. */
static bool ipc_open(spmv_gpu_halo *h, const char *all, size_t rb, int rank)
{
    for (int p = 0; p < h->nranks; p++) {
        const ipc_rec *r = (const ipc_rec *)(all + rb * p);
        const int32_t *roff = (const int32_t *)(r + 1);
        if (p == rank || h->send_off[p + 1] == h->send_off[p])
            continue;
        h->peer_at[p] = roff[rank];
        h->peer_half[p] = r->half;
        if (roff[rank + 1] - roff[rank] != h->send_off[p + 1] - h->send_off[p])
            return false; /* the plans disagree: never write past what p expects */
        if (cudaIpcOpenMemHandle(&h->peer_ghosts[p], r->ghosts, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess ||
            cudaIpcOpenMemHandle((void **)&h->peer_flags[p], r->flags, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) {
            cudaGetLastError();
            return false;
        }
    }
    return true;
}

/* Decides, with every rank, whether h exchanges through CUDA IPC: when
 * every rank asked for it, has its buffers, runs on this host, and every
 * rank opened its peers' buffers. Called by every rank of the
 * communicator at the same halo (ok: this rank's halo is allocated). */
static int halo_ipc_setup(spmv_gpu_comm *c, spmv_gpu_halo *h, bool ok, spmv_error *err)
{
    int n = h->nranks;
    size_t rb = ipc_rec_bytes(n);
    char *all = (char *)calloc((size_t)n, rb);
    if (!all)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for the halo's IPC records");
    ipc_rec *mine = (ipc_rec *)(all + rb * c->rank);
    spmv_error own; /* a rank that cannot share its buffers falls back to NCCL with the others */
    memset(&own, 0, sizeof own);
    int own_st = ok && n <= 64 ? ipc_own(c, h, mine, &own) : SPMV_ERR_LIMIT; /* halo_wait's mask: 64 peers */
    mine->ok = own_st == SPMV_OK;
    mine->half = h->stride;
    gethostname(mine->host, sizeof mine->host - 1);
    memcpy(mine + 1, h->recv_off, ((size_t)n + 1) * sizeof(int32_t));
    int st = ipc_gather(c, all, rb, err);
    bool use = st == SPMV_OK;
    for (int p = 0; use && p < n; p++) {
        const ipc_rec *r = (const ipc_rec *)(all + rb * p);
        use = r->ok && strncmp(r->host, mine->host, sizeof r->host) == 0;
    }
    use = use && ipc_open(h, all, rb, c->rank);
    int32_t agreed = 0;
    if (st == SPMV_OK)
        st = ipc_agree(c, use ? 1 : 0, &agreed, err);
    free(all);
    h->ipc = st == SPMV_OK && agreed == 1;
    if (!h->ipc)
        halo_ipc_free(c, h);
    return st;
}

/* -------------------------------------------- sums across the ranks */

struct spmv_gpu_allsum {
    spmv_allsum_dev dev;           /* what the fused kernels take */
    int nranks, rank;
    unsigned long long *box;       /* device: this rank's mailbox */
    unsigned long long *counters;  /* device: [0] the sums done (its low word: dev.seq), [1] the time waited */
    int *stop;                     /* mapped host memory */
    unsigned long long **peer_box; /* host, nranks: every rank's box here (opened, or this rank's own) */
    unsigned long long **peer_box_dev; /* the same table on the device */
};

/* What each rank tells the others before sums go through CUDA IPC. */
struct allsum_rec {
    char host[64];
    int32_t ok, pad;
    cudaIpcMemHandle_t box;
};

static size_t allsum_box_bytes(int n) { return (size_t)2 * n * SPMV_ALLSUM_SLOTS * sizeof(unsigned long long); }

extern "C" void spmv_gpu_allsum_free(spmv_gpu_comm *c, spmv_gpu_allsum *a)
{
    if (!a)
        return;
    cudaSetDevice(c->ctx->device);
    for (int p = 0; a->peer_box && p < a->nranks; p++)
        if (p != a->rank && a->peer_box[p])
            cudaIpcCloseMemHandle(a->peer_box[p]);
    size_t tb = (size_t)a->nranks * sizeof(void *);
    gpu_ctx_free(c->ctx, a->box, allsum_box_bytes(a->nranks));
    gpu_ctx_free(c->ctx, a->counters, 2 * sizeof(unsigned long long));
    gpu_ctx_free(c->ctx, a->peer_box_dev, tb);
    if (a->stop)
        cudaFreeHost(a->stop);
    free(a->peer_box);
    free(a);
}

/* This rank's mailbox (zeroed: no word bears a sum's number, the first is
 * 1), counters and stop word; its record. */
static int allsum_own(spmv_gpu_comm *c, spmv_gpu_allsum *a, allsum_rec *rec, spmv_error *err)
{
    int n = a->nranks;
    size_t tb = (size_t)n * sizeof(void *);
    a->peer_box = (unsigned long long **)calloc((size_t)n, sizeof(unsigned long long *));
    if (!a->peer_box)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for the ranks' sums");
    int st = gpu_ctx_alloc(c->ctx, (void **)&a->box, allsum_box_bytes(n), "the ranks' sums", err);
    if (!st)
        st = gpu_ctx_alloc(c->ctx, (void **)&a->counters, 2 * sizeof(unsigned long long), "the sums' counters", err);
    if (!st)
        st = gpu_ctx_alloc(c->ctx, (void **)&a->peer_box_dev, tb, "the ranks' sum table", err);
    if (st)
        return st;
    cudaError_t e = cudaMemset(a->box, 0, allsum_box_bytes(n));
    if (e == cudaSuccess)
        e = cudaMemset(a->counters, 0, 2 * sizeof(unsigned long long));
    if (e == cudaSuccess)
        e = cudaHostAlloc((void **)&a->stop, sizeof(int), cudaHostAllocMapped);
    if (e == cudaSuccess) {
        *a->stop = 0;
        e = cudaHostGetDevicePointer((void **)&a->dev.stop, a->stop, 0);
    }
    if (e == cudaSuccess)
        e = cudaIpcGetMemHandle(&rec->box, a->box);
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, "the ranks' sums");
}

/* Opens every other rank's mailbox; the table to the device. */
static bool allsum_open(spmv_gpu_allsum *a, const char *all)
{
    const allsum_rec *mine = (const allsum_rec *)all + a->rank;
    for (int p = 0; p < a->nranks; p++) {
        const allsum_rec *r = (const allsum_rec *)all + p;
        if (!r->ok || strncmp(r->host, mine->host, sizeof r->host) != 0)
            return false;
        if (p == a->rank) {
            a->peer_box[p] = a->box;
        } else if (cudaIpcOpenMemHandle((void **)&a->peer_box[p], r->box, cudaIpcMemLazyEnablePeerAccess) !=
                   cudaSuccess) {
            cudaGetLastError();
            return false;
        }
    }
    size_t tb = (size_t)a->nranks * sizeof(void *);
    return cudaMemcpy(a->peer_box_dev, a->peer_box, tb, cudaMemcpyHostToDevice) == cudaSuccess;
}

extern "C" int spmv_gpu_allsum_new(spmv_gpu_comm *c, bool ok, spmv_gpu_allsum **out, spmv_error *err)
{
    *out = NULL;
    if (c->broken)
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "the NCCL communicator was aborted after a failure");
    cudaSetDevice(c->ctx->device);
    int n = c->nranks;
    size_t rb = sizeof(allsum_rec);
    char *all = (char *)calloc((size_t)n, rb);
    spmv_gpu_allsum *a = (spmv_gpu_allsum *)calloc(1, sizeof *a);
    if (!all || !a) {
        free(all);
        free(a);
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for the ranks' sums");
    }
    a->nranks = n;
    a->rank = c->rank;
    allsum_rec *mine = (allsum_rec *)all + c->rank;
    spmv_error own; /* a rank that cannot share its mailbox: every rank sums on the hosts */
    memset(&own, 0, sizeof own);
    mine->ok = ok && c->ipc && n > 1 && allsum_own(c, a, mine, &own) == SPMV_OK;
    gethostname(mine->host, sizeof mine->host - 1);
    int st = ipc_gather(c, all, rb, err); /* every rank takes part, whatever its own state */
    bool use = st == SPMV_OK && allsum_open(a, all);
    int32_t agreed = 0;
    if (st == SPMV_OK)
        st = ipc_agree(c, use ? 1 : 0, &agreed, err);
    free(all);
    if (st != SPMV_OK || agreed != 1) {
        spmv_gpu_allsum_free(c, a);
        return st;
    }
    a->dev = spmv_allsum_dev{c->rank, n, a->box, a->peer_box_dev, (unsigned *)a->counters, a->counters + 1,
                             (unsigned long long)(c->timeout_ms * 1e6), a->dev.stop};
    *out = a;
    return SPMV_OK;
}

extern "C" const spmv_allsum_dev *spmv_gpu_allsum_dev(const spmv_gpu_allsum *a) { return a ? &a->dev : NULL; }

extern "C" int spmv_gpu_allsum_stats(spmv_gpu_allsum *a, unsigned *sums, double *waited_ms, spmv_error *err)
{
    unsigned long long c[2] = {0, 0};
    cudaError_t e = cudaMemcpy(c, a->counters, sizeof c, cudaMemcpyDeviceToHost);
    *sums = (unsigned)c[0];
    *waited_ms = (double)c[1] / 1e6;
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, "the ranks' sums' counters");
}

extern "C" bool spmv_gpu_allsum_failed(const spmv_gpu_allsum *a) { return a && *(volatile int *)a->stop; }

extern "C" void spmv_gpu_allsum_stop(spmv_gpu_allsum *a)
{
    if (a)
        *(volatile int *)a->stop = 1;
}

/* Writes this rank's entries for one peer straight into its ghosts (the
 * half of product seq) and, the last block done, sets its flag for this
 * rank to seq: every block's stores are fenced system-wide before it
 * counts itself, so the flag is seen after the values. */
template <typename T>
__global__ void halo_put(const T *__restrict__ x, const int32_t *__restrict__ idx, int32_t n, T *__restrict__ dst,
                         unsigned *peer_flag, unsigned seq, unsigned *done)
{
    int32_t i = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n)
        dst[i] = x[idx[i]];
    __threadfence_system();
    __syncthreads();
    if (threadIdx.x == 0 && atomicAdd(done, 1u) + 1 == gridDim.x) {
        *done = 0;
        __threadfence_system();
        atomicExch_system(peer_flag, seq);
    }
}

/* What halo_wait waits for: every peer in mask has delivered product seq. */
struct halo_arrival {
    unsigned *flags;
    unsigned long long mask;
    unsigned seq;
    unsigned long long timeout_ns;
    int *timed_out;
};

/* Spins (one thread) until a's peers have delivered; past its timeout it
 * sets *timed_out (the host fails the halo) and returns false, as it does
 * once the host has set *timed_out itself (a rank lost: its watch). */
__device__ bool halo_arrived(const halo_arrival &a)
{
    volatile unsigned *flags = a.flags;
    volatile int *stop = a.timed_out; /* mapped host memory: read every 256 spins, not every one */
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    for (int p = 0; p < 64; p++) {
        if (!(a.mask >> p & 1))
            continue;
        for (unsigned spin = 1; (int)(flags[p] - a.seq) < 0; spin++) {
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
            if (t - t0 > a.timeout_ns || (spin % 256 == 0 && *stop)) {
                *stop = 1;
                return false;
            }
        }
    }
    __threadfence(); /* the ghosts are read after the flags */
    return true;
}

/* Waits until every peer in a.mask has delivered product a.seq (one
 * thread): what the context's stream waits for, through `done`. */
__global__ void halo_wait(halo_arrival a) { halo_arrived(a); }

/* The exchange of product h->seq through CUDA IPC: halo_put for every
 * peer this rank sends to, then halo_wait for every peer it receives
 * from, on the exchange stream; ghost becomes the half they fill. */
static int halo_ipc_start(spmv_gpu_comm *c, spmv_gpu_halo *h, const spmv_vec *x, spmv_error *err)
{
    unsigned seq = ++h->seq;
    size_t vs = spmv_dtype_size(h->dtype);
    h->ghost.data = (char *)h->ghosts.data + (seq & 1) * (size_t)h->stride * vs;
    unsigned long long mask = 0;
    for (int p = 0; p < h->nranks; p++) {
        int32_t ns = h->send_off[p + 1] - h->send_off[p];
        if (h->recv_off[p + 1] > h->recv_off[p])
            mask |= 1ull << p;
        if (p == c->rank || !ns)
            continue;
        void *dst = (char *)h->peer_ghosts[p] + ((seq & 1) * (size_t)h->peer_half[p] + (size_t)h->peer_at[p]) * vs;
        int32_t threads = 256, blocks = (ns + threads - 1) / threads;
        const int32_t *idx = h->send_idx + h->send_off[p];
        if (h->dtype == SPMV_FLOAT32)
            halo_put<float><<<blocks, threads, 0, c->stream>>>((const float *)x->data, idx, ns, (float *)dst,
                                                                h->peer_flags[p] + c->rank, seq, h->blocks + p);
        else
            halo_put<double><<<blocks, threads, 0, c->stream>>>((const double *)x->data, idx, ns, (double *)dst,
                                                                 h->peer_flags[p] + c->rank, seq, h->blocks + p);
        int st = gpu_check_launch(err, "halo_put");
        if (st)
            return st;
    }
    if (mask) {
        halo_wait<<<1, 1, 0, c->stream>>>(
            halo_arrival{h->flags, mask, seq, (unsigned long long)(c->timeout_ms * 1e6), h->timed_out_dev});
        return gpu_check_launch(err, "halo_wait");
    }
    return SPMV_OK;
}

extern "C" bool spmv_gpu_halo_ipc(const spmv_gpu_halo *h) { return h && h->ipc; }

extern "C" void spmv_gpu_halo_stop(spmv_gpu_comm *c, spmv_gpu_halo *h)
{
    if (h && h->ipc) {
        *h->timed_out = 1;
    } else if (c && !c->broken) {
        ncclCommAbort(c->comm);
    }
    if (c)
        c->broken = true;
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
    /* two halves where the exchange may go through CUDA IPC, the second one
     * starting 512-byte aligned (a kernel may bind its x to a texture) */
    h->stride = ((int64_t)recv_off[c->nranks] + 127) / 128 * 128;
    if (!st)
        st = spmv_gpu_vec_alloc(c->ctx, dt, c->ipc && c->nranks > 1 ? h->stride : recv_off[c->nranks],
                                c->ipc && c->nranks > 1 ? 2 : 1, &h->ghosts, err);
    h->ghost = h->ghosts;
    h->ghost.n = recv_off[c->nranks];
    h->ghost.k = 1;
    h->n_off = n_off;
    if (!st)
        st = gpu_ctx_alloc(c->ctx, (void **)&h->off_rows, (size_t)n_off * sizeof(int32_t), "halo off-diagonal rows", err);
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
    if (c->ipc && c->nranks > 1) { /* every rank takes part, whatever its own state */
        int ist = halo_ipc_setup(c, h, st == SPMV_OK, err);
        st = st ? st : ist;
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
        halo_ipc_free(c, h);
        spmv_gpu_vec_free(c->ctx, &h->ghosts);
        gpu_ctx_free(c->ctx, h->off_rows, (size_t)h->n_off * sizeof(int32_t));
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

/* Rows of a halo's product, L lanes a row (a mesh's boundary row holds one
 * or two remote entries, a graph's may hold thousands: L from the block's
 * mean row, 1, 4 or 32), the lanes' sums added by shuffles within their
 * group. EDGE false: y[rows[i]] += (row i of the compacted off-diagonal
 * block) . ghost. EDGE true: a split shard's edge, y[rows[i]] = (row i) .
 * (x | ghost), columns below ncols x's, the others ghost's. */
template <typename T, int L, bool EDGE>
__global__ void halo_rows(const int32_t *__restrict__ rows, const int32_t *__restrict__ ptr,
                          const int32_t *__restrict__ col, const T *__restrict__ val, const T *__restrict__ ghost,
                          const T *__restrict__ x, int32_t ncols, int32_t n, T *__restrict__ y)
{
    int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int32_t w = (int32_t)(t / L), lane = (int32_t)(t % L);
    T s = 0;
    if (w < n)
        for (int32_t j = ptr[w] + lane; j < ptr[w + 1]; j += L) {
            int32_t c = col[j];
            s += val[j] * (EDGE ? (c < ncols ? x[c] : ghost[c - ncols]) : ghost[c]);
        }
    for (int o = L / 2; o > 0; o >>= 1)
        s += __shfl_down_sync(0xffffffffu, s, o, L);
    if (w < n && lane == 0) {
        if (EDGE)
            y[rows[w]] = s;
        else
            y[rows[w]] += s;
    }
}

template <typename T, bool EDGE>
static void rows_launch(const spmv_gpu_halo *h, const spmv_gpu_matrix *m, const void *x, int32_t ncols, void *y,
                        cudaStream_t st)
{
    double mean = (double)m->nnz / h->n_off;
    int lanes = mean <= 2 ? 1 : mean <= 16 ? 4 : 32;
    int32_t threads = 256, blocks = (int32_t)(((int64_t)h->n_off * lanes + threads - 1) / threads);
    const T *v = (const T *)m->val, *g = (const T *)h->ghost.data, *xx = (const T *)x;
    if (lanes == 1)
        halo_rows<T, 1, EDGE><<<blocks, threads, 0, st>>>(h->off_rows, m->row_ptr, m->col, v, g, xx, ncols, h->n_off,
                                                           (T *)y);
    else if (lanes == 4)
        halo_rows<T, 4, EDGE><<<blocks, threads, 0, st>>>(h->off_rows, m->row_ptr, m->col, v, g, xx, ncols, h->n_off,
                                                           (T *)y);
    else
        halo_rows<T, 32, EDGE><<<blocks, threads, 0, st>>>(h->off_rows, m->row_ptr, m->col, v, g, xx, ncols,
                                                            h->n_off, (T *)y);
}

/* What a block of the halo's rows (the off-diagonal one, or an edge) must
 * be to run against h and y. */
static int rows_check(const spmv_gpu_halo *h, const spmv_gpu_matrix *m, const spmv_vec *y, const char *what,
                      spmv_error *err)
{
    if (y->device != SPMV_DEVICE_GPU || y->dtype != h->dtype || m->dtype != h->dtype)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "the %s sums go into a device y of the shard's dtype", what);
    if (m->rows != h->n_off || !m->row_ptr)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "the %s block (%d rows%s) does not match the halo's %d rows",
                              what, m->rows, m->row_ptr ? "" : ", 64-bit offsets", h->n_off);
    return SPMV_OK;
}

extern "C" int spmv_gpu_halo_off_add(spmv_gpu_comm *c, spmv_gpu_halo *h, const spmv_gpu_matrix *off, spmv_vec *y,
                                     spmv_error *err)
{
    int st = rows_check(h, off, y, "off-diagonal", err);
    if (st || !h->n_off)
        return st;
    cudaSetDevice(c->ctx->device);
    if (h->dtype == SPMV_FLOAT32)
        rows_launch<float, false>(h, off, NULL, 0, y->data, c->ctx->stream);
    else
        rows_launch<double, false>(h, off, NULL, 0, y->data, c->ctx->stream);
    return gpu_check_launch(err, "halo_rows");
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
    if (h->ipc)
        return halo_ipc_start(c, h, x, err);
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
 * off-diagonal product) starts the moment both are done. (Letting the
 * off-diagonal kernel spin on the IPC flags itself instead, the context's
 * stream waiting only for this rank's entries to be sent, measured 1 to 3
 * us a product slower on 2 and 4 H200s: docs/benchmarks/scaling.md.) */
extern "C" int spmv_gpu_halo_join(spmv_gpu_comm *c, spmv_gpu_halo *h, const spmv_gpu_matrix *edge, const spmv_vec *x,
                                  spmv_vec *y, double timeout_ms, spmv_error *err)
{
    int st = h->ipc ? SPMV_OK /* nothing of NCCL's queued */
                    : comm_settle(c, spmv_now_ms() + timeout_ms, "the halo exchange", err); /* its kernels are queued */
    if (!st && edge) /* NCCL's receives are on the stream now: the edge reads what they bring */
        st = rows_check(h, edge, y, "edge", err);
    if (!st && edge && (x->device != SPMV_DEVICE_GPU || x->dtype != h->dtype || x->n > edge->cols))
        st = spmv_error_set(err, SPMV_ERR_INVALID, 0, "the edge reads a device x of the shard's dtype, at most %d values",
                            edge->cols);
    if (st)
        return st;
    cudaSetDevice(c->ctx->device);
    if (edge && h->n_off) {
        if (h->dtype == SPMV_FLOAT32)
            rows_launch<float, true>(h, edge, x->data, (int32_t)x->n, y->data, c->stream);
        else
            rows_launch<double, true>(h, edge, x->data, (int32_t)x->n, y->data, c->stream);
        if ((st = gpu_check_launch(err, "halo_rows (edge)")))
            return st;
    }
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
    double since = spmv_now_ms(), deadline = since + timeout_ms, next = 0;
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
        if (h->ipc && *h->timed_out)
            break;
        int lost = watched(c, since, &next, err);
        if (lost) { /* a rank is gone: the waiting kernels stop (IPC), or NCCL's are aborted */
            if (h->ipc)
                *h->timed_out = 1;
            else
                ncclCommAbort(c->comm);
            c->broken = true;
            return lost;
        }
        if (spmv_now_ms() > deadline) {
            ncclCommAbort(c->comm);
            c->broken = true;
            return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0,
                                  "the halo exchange over NCCL did not finish within %.0f ms; communicator aborted",
                                  timeout_ms);
        }
        nap(since);
    }
    if (h->ipc && *h->timed_out) { /* a peer never delivered: its rank is lost or hung */
        c->broken = true;
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0,
                              "the halo exchange (CUDA IPC) got no entries from a peer within %.0f ms",
                              c->timeout_ms);
    }
    float ms = 0;
    if (exposed_ms)
        *exposed_ms = cudaEventElapsedTime(&ms, h->local, h->done) == cudaSuccess && ms > 0 ? ms : 0.0;
    if (device_ms)
        *device_ms = cudaEventElapsedTime(&ms, h->begin, h->end) == cudaSuccess ? ms : 0.0;
    return SPMV_OK;
}
