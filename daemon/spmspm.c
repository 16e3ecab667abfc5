/* spmspm.c — C = A*B as a worker runs it (SpMSpM, docs/api.md "SpMSpM"),
 * and the task body of POST /spmspm (daemon/spmspm.h).
 *
 * worker_run_spmspm is the SpMSpM counterpart of worker_run: called from a task on the
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
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "daemon/daemon.h"
#include "daemon/log.h"
#include "daemon/memory.h"
#include "daemon/spmspm.h"

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

/* ------------------------------------------------------ the task body */

/* The product as a new matrix, resident where A is (on this worker). */
static int make_stored(spmspm_task *t, worker *w)
{
    matfile_meta meta;
    memset(&meta, 0, sizeof meta);
    store_new_id(meta.id);
    snprintf(meta.name, sizeof meta.name, "%.120s*%.120s", t->a->meta.name, t->b->meta.name);
    meta.symmetry = SPMV_MM_GENERAL;
    meta.formats = SPMV_FMT_CSR;
    meta.hack_size = t->a->meta.hack_size;
    meta.device = w->gpu >= 0 ? w->gpu : MATFILE_DEVICE_HOST;
    meta.created = (int64_t)time(NULL);
    spmv_format_limits lim = spmvd_format_limits(w->d);
    int rc = matrix_new_from_csr(&meta, &t->c, SPMV_FMT_CSR, &lim, &t->out, &t->err);
    if (rc != SPMV_OK || w->gpu < 0)
        return rc;
    return w->ops->matrix_load(w, t->out, &t->err);
}

static void verify(spmspm_task *t)
{
    spmv_csr ref;
    spmv_error err;
    if (spmv_spmspm_reference(&t->a->host.csr, &t->b->host.csr, &ref, &t->err) != SPMV_OK) {
        t->rc = t->err.status;
        return;
    }
    if (spmv_csr_compare(&t->c, &ref, &t->report.max_rel_err, &err) != SPMV_OK)
        t->report.max_rel_err = -1; /* structure differs: reported as -1 */
    spmv_csr_free(&ref);
}

void spmspm_run(task *base, worker *w)
{
    spmspm_task *t = (spmspm_task *)base;
    run_report_start(&t->report, base, w);
    t->rc = worker_run_spmspm(w, t->a, t->b, t->k, &t->p, t->warmup, t->runs, &t->c, &t->report.st, &t->err);
    if (t->rc == SPMV_OK && t->verify)
        verify(t);
    log_info("spmspm: %s on %s (%dx%d) x %s (%dx%d) by %s: C nnz %lld, %d runs, median %.4f ms%s", t->k->name,
             t->a->meta.id, t->a->host.rows, t->a->host.cols, t->b->meta.id, t->b->host.rows, t->b->host.cols,
             w->name, (long long)t->c.nnz, t->runs, t->report.st.median_ms, t->rc ? " FAILED" : "");
    if (t->rc == SPMV_OK && t->store)
        t->rc = make_stored(t, w);
}

/* A JSON answer writes about this many bytes an entry of C: its row,
 * its column and its value as text (api/spmspm.c). */
#define SPMSPM_JSON_ENTRY_BYTES 32

int spmspm_admit(spmspm_task *t, int64_t c_max, bool json, spmv_error *err)
{
    spmvd *d = t->d;
    int64_t most = atomic_load(&d->limits.max_spmspm_nnz), budget = atomic_load(&d->limits.max_job_result_bytes);
    if (c_max > most)
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0, "C = A*B may hold up to %lld entries (its estimate: the sum "
                              "over A's non-zeros of B's row lengths, at most rows x cols), over max_spmspm_nnz (%lld)",
                              (long long)c_max, (long long)most);
    if (json && c_max > budget / SPMSPM_JSON_ENTRY_BYTES)
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0, "C = A*B may hold up to %lld entries, about %lld bytes as "
                              "JSON, over max_job_result_bytes (%lld): ask for it binary (Accept: "
                              "application/octet-stream) or stored (\"store\": true)", (long long)c_max,
                              (long long)c_max * SPMSPM_JSON_ENTRY_BYTES, (long long)budget);
    int64_t c_bytes = ((int64_t)t->a->host.rows + 1) * 4 + c_max * (4 + (int64_t)spmv_dtype_size(t->a->host.dtype));
    if (t->store) /* C becomes a matrix: bounded as an upload is */
        return memory_admit_matrix(d, c_bytes, c_bytes, "C = A*B, stored", &t->mem_held, err);
    return memory_reserve(d, c_bytes, "C = A*B", &t->mem_held, err);
}

void spmspm_release(spmspm_task *t)
{
    if (t->d) {
        size_t held = (size_t)t->mem_held;
        memory_release(t->d, &t->mem_held);
        memory_trim(held);
    }
    matrix_unref(t->a);
    matrix_unref(t->b);
    matrix_unref(t->out);
    spmv_csr_free(&t->c);
    t->a = t->b = t->out = NULL;
}
