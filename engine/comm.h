/* comm.h — moving x entries between GPUs for sharded products (NCCL, or
 * CUDA IPC between the GPUs of one host).
 *
 * The engine's side of the cluster (cluster/): a communicator over the
 * GPUs of an MPI job's ranks, and a shard's halo plan on the device. The
 * engine knows nothing of MPI: the caller draws the unique id on one rank
 * (spmv_gpu_comm_id), carries it to the others itself and passes it in.
 * Exchanges run on a stream of their own, so the local block's product,
 * queued on the context's stream, overlaps them. Every wait polls
 * (cudaStreamQuery, ncclCommGetAsyncError) and gives up past its
 * deadline, aborting the communicator: a dead or hung peer never hangs the
 * caller. A build without CUDA or without MPI links engine/gpu/absent_comm.c,
 * which answers SPMV_ERR_UNAVAILABLE.
 */
#ifndef SPMV_COMM_H
#define SPMV_COMM_H

#include <stdbool.h>
#include <stdint.h>

#include "krylov.h"
#include "spmv.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SPMV_GPU_COMM_ID_BYTES 128

typedef struct spmv_gpu_comm spmv_gpu_comm;
typedef struct spmv_gpu_halo spmv_gpu_halo;
typedef struct spmv_gpu_allsum spmv_gpu_allsum;

/* A fresh NCCL unique id (rank 0). */
int spmv_gpu_comm_id(void *id, spmv_error *err);
/* Joins the communicator of nranks ranks on ctx's device; waits at most
 * timeout_ms for the others (non-blocking init, polled). ipc: its halos
 * exchange through CUDA IPC where every rank agrees it can (one host, GPUs
 * that reach each other), NCCL otherwise. */
int spmv_gpu_comm_new(spmv_gpu_ctx *ctx, int nranks, int rank, const void *id, double timeout_ms, bool ipc,
                      spmv_gpu_comm **out, spmv_error *err);
/* Destroys it (abort: after a failure, without waiting for the peers). */
void spmv_gpu_comm_free(spmv_gpu_comm *c, bool abort);
/* What a wait for the peers asks now and then, besides its own deadline:
 * is every rank still there? waited_ms: how long this wait has lasted;
 * next_ms: the wait's own schedule for the callback (0 at its start). A
 * non-zero return (err set) ends the wait: the communicator is aborted
 * (NCCL) or its waiting kernels told to stop (CUDA IPC), and the wait
 * fails with that error. */
typedef int (*spmv_gpu_comm_watch)(void *ctx, double waited_ms, double *next_ms, spmv_error *err);
void spmv_gpu_comm_watch_set(spmv_gpu_comm *c, spmv_gpu_comm_watch fn, void *ctx);

/* Sums across the ranks on their GPUs (engine/krylov.h spmv_allsum_dev,
 * for the fused kernels of a distributed solve), made by every rank of c
 * at once (ok: this rank can take part). *out is NULL, with SPMV_OK, where
 * not every rank can reach the others' memory through CUDA IPC (another
 * host, cluster_halo "nccl", or a failure on one rank): the solve then sums
 * on the hosts. */
int spmv_gpu_allsum_new(spmv_gpu_comm *c, bool ok, spmv_gpu_allsum **out, spmv_error *err);
void spmv_gpu_allsum_free(spmv_gpu_comm *c, spmv_gpu_allsum *a);
const spmv_allsum_dev *spmv_gpu_allsum_dev(const spmv_gpu_allsum *a);
/* The sums done so far and the time the device waited in them for the
 * other ranks (its counters: read after the solve's work is done). */
int spmv_gpu_allsum_stats(spmv_gpu_allsum *a, unsigned *sums, double *waited_ms, spmv_error *err);
/* Whether a sum's wait gave up (a rank lost or hung). */
bool spmv_gpu_allsum_failed(const spmv_gpu_allsum *a);
/* Ends every wait of a's sums on the device (a rank is lost). */
void spmv_gpu_allsum_stop(spmv_gpu_allsum *a);

/* A halo plan on the device: the send list (send_off: nranks + 1 offsets
 * into send_idx, local x indices), the receive offsets into the ghost
 * vector (recv_off: nranks + 1), dtype dt; and the way back: the local
 * rows (off_rows, n_off ascending) that hold off-diagonal entries, into
 * which spmv_gpu_halo_off_add adds the off-diagonal block's product with
 * the ghost vector. */
int spmv_gpu_halo_new(spmv_gpu_comm *c, spmv_dtype dt, const int32_t *send_off, const int32_t *send_idx,
                      const int32_t *recv_off, const int32_t *off_rows, int32_t n_off, spmv_gpu_halo **out,
                      spmv_error *err);
void spmv_gpu_halo_free(spmv_gpu_comm *c, spmv_gpu_halo *h);
/* Whether h exchanges through CUDA IPC (decided by every rank at
 * spmv_gpu_halo_new, which every rank calls at the same product). */
bool spmv_gpu_halo_ipc(const spmv_gpu_halo *h);
/* A rank is lost: ends h's waits on the device (CUDA IPC), or aborts the
 * communicator (NCCL); every later exchange fails. */
void spmv_gpu_halo_stop(spmv_gpu_comm *c, spmv_gpu_halo *h);
/* y[off_rows[i]] += (row i of off) . ghost, on the context's stream (not
 * waited for): the off-diagonal block (off: n_off rows, CSR on the
 * device, columns into the ghost vector) multiplied and added into y's
 * rows in one kernel behind the exchange. */
int spmv_gpu_halo_off_add(spmv_gpu_comm *c, spmv_gpu_halo *h, const spmv_gpu_matrix *off, spmv_vec *y,
                          spmv_error *err);
/* A run begins: an event on the context's stream (its device time is
 * counted from it), which the exchange's stream waits for. */
int spmv_gpu_halo_begin(spmv_gpu_comm *c, spmv_gpu_halo *h, spmv_error *err);
/* Packs the entries of x (a device vector on the context's GPU, written
 * before the run began) every peer wants, and posts the grouped ncclSend /
 * ncclRecv on the communicator's stream, which has the device's highest
 * priority: called after the local product is queued, its kernels take
 * SMs as the local product's first blocks leave them, and the host's time
 * in NCCL's enqueue is spent while the GPU already works. */
int spmv_gpu_halo_start(spmv_gpu_comm *c, spmv_gpu_halo *h, const spmv_vec *x, spmv_error *err);
/* Called after the local product is queued: marks its end and makes the
 * context's stream wait on the device for the exchange (NCCL's own
 * enqueue waited for at most timeout_ms), so the off-diagonal product
 * queued next starts as soon as the ghost entries are in, with no trip
 * through the host. edge (NULL: none) is a split shard's edge: its rows
 * (off_rows, n_off of them), written y[off_rows[i]] = (row i of edge) .
 * (x | ghost), columns below x->n reading x and the others the ghost
 * vector (column - x->n), queued on the exchange's stream behind the
 * ghost entries, beside the local product of the other rows, before the
 * context's stream is made to wait. spmv_gpu_halo_finish then waits for the context's
 * stream, at most timeout_ms (past it the communicator is aborted and
 * SPMV_ERR_UNAVAILABLE says so), and gives the time the exchange ended
 * after the local product (0 when the local product hid it) and the
 * run's time on the device, from halo_start's event to the end of what
 * was queued on the context's stream (CUDA events: what a product on one
 * GPU reports as its time). */
int spmv_gpu_halo_join(spmv_gpu_comm *c, spmv_gpu_halo *h, const spmv_gpu_matrix *edge, const spmv_vec *x, spmv_vec *y,
                       double timeout_ms, spmv_error *err);
int spmv_gpu_halo_finish(spmv_gpu_comm *c, spmv_gpu_halo *h, double timeout_ms, double *exposed_ms,
                         double *device_ms, spmv_error *err);

#ifdef __cplusplus
}
#endif
#endif
