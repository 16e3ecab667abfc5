/* worker_spmspm.c — C = A*B as a worker runs it (SpMSpM, SPEC §8).
 *
 * The SpMSpM counterpart of worker_run_kernel: called from a task on the
 * worker that spmvd_worker_for() picked for the kernel — the CPU worker
 * for cpu.spmspm.*, A's GPU worker for gpu.spmspm.* and cusparse.spgemm —
 * so a GPU context is still only ever touched by its own thread.
 *
 * Residency on a GPU: A must be resident on this worker's device (the API
 * answers 409 before queueing otherwise). B need not be: when B is held on
 * the host only, or on another GPU, its host CSR (always kept) is copied to
 * this device for the call and freed after it. That copy is not timed (the
 * statistics are the product's), and it is why B's device is never
 * touched from here: another GPU's copy belongs to that GPU's thread.
 */
#include <string.h>

#include "daemon/daemon.h"
#include "daemon/worker.h"

/* B on w's device: its own copy, or a temporary one in *tmp. */
static int b_on_device(worker *w, matrix *b, spmv_gpu_matrix **out, spmv_gpu_matrix **tmp, spmv_error *err)
{
    spmv_gpu_upload_stats st;
    *tmp = NULL;
    if (b->dev_worker == w && b->dev) {
        *out = b->dev;
        return SPMV_OK;
    }
    memset(&st, 0, sizeof st);
    int rc = spmv_gpu_matrix_upload_csr(w->ctx, &b->host.csr, b->host.dtype, SPMV_FMT_CSR, b->host.hack_size, tmp,
                                        &st, err);
    *out = *tmp;
    return rc;
}

static int gpu_spmspm(worker *w, matrix *a, matrix *b, const spmv_kernel *k, const spmv_params *p,
                      int32_t warmup, int32_t runs, spmv_csr *c, spmv_stats *st, spmv_error *err)
{
    spmv_gpu_matrix *db = NULL, *tmp = NULL;
    if (a->dev_worker != w || !a->dev)
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "matrix %s is not resident on %s", a->meta.id, w->name);
    int rc = b_on_device(w, b, &db, &tmp, err);
    if (rc == SPMV_OK)
        rc = spmv_gpu_spmspm(w->ctx, k, a->dev, db, p, warmup, runs, c, st, err);
    spmv_gpu_matrix_free(w->ctx, tmp);
    return rc;
}

int worker_run_spmspm(worker *w, matrix *a, matrix *b, const spmv_kernel *k, const spmv_params *p,
                      int32_t warmup, int32_t runs, spmv_csr *c, spmv_stats *st, spmv_error *err)
{
    int rc;
    worker_heartbeat(w);
    if (k->device == SPMV_DEVICE_CPU)
        rc = spmv_cpu_spmspm(k, &a->host.csr, &b->host.csr, p, warmup, runs, c, st, err);
    else
        rc = gpu_spmspm(w, a, b, k, p, warmup, runs, c, st, err);
    worker_heartbeat(w);
    if (rc == SPMV_OK && w->d && w->d->metrics)
        metrics_kernel(w->d->metrics, k->name, st->mean_ms, st->runs);
    return rc;
}
