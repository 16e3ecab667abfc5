/* bench.c — the task body of a bench sweep (daemon/bench.h).
 *
 * Each entry runs with the bench's runs and warmup exactly (auto's row
 * too: its tuning is separate, and not part of the row's stats), and
 * records the team a CPU kernel ran on, which the table's efficiency
 * divides by. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "daemon/bench.h"
#include "daemon/daemon.h"

/* The threads a CPU kernel ran on: its `threads` as spmv_cpu_run
 * resolves it, on this thread (the default, 0, is one thread for small
 * work, set by the worker per task), or one for a kernel without it. */
static int32_t team(const bench_task *b, const spmv_kernel *k, const spmv_params *p)
{
    if (k->device != SPMV_DEVICE_CPU)
        return 0;
    if (!(k->params & (1u << SPMV_PARAM_THREADS)))
        return 1;
    return spmv_cpu_threads(p->v[SPMV_PARAM_THREADS], b->m->host.nnz);
}

static void run_entry(bench_task *b, worker *w, bench_entry *e, const void *x, void *y, const void *ref)
{
    spmv_error err = {0};
    spmv_params resolved;
    spmv_dtype dt = b->m->host.dtype;
    int32_t rows = b->m->host.rows;
    for (int32_t i = 0; i < rows; i++) {
        if (dt == SPMV_FLOAT32)
            ((float *)y)[i] = NAN;
        else
            ((double *)y)[i] = NAN;
    }
    e->ran = e->k;
    e->rc = SPMV_OK;
    if (spmv_kernel_is_auto(e->k)) { /* tuned on this worker, as /spmv with kernel auto would */
        e->rc = autotune_get(b->d, w, b->m, false, &e->tuned, &err);
        if (e->rc == SPMV_OK) {
            e->ran = e->tuned.kernel;
            e->p = e->tuned.params;
        }
    }
    if (e->rc == SPMV_OK)
        e->rc = spmv_params_resolve(e->ran, &e->p, &resolved, &err);
    if (e->rc == SPMV_OK) {
        e->p = resolved;
        e->rc = worker_run_kernel(w, b->m, e->ran, &e->p, x, y, b->warmup, b->runs, &e->st, &err);
    }
    if (e->rc != SPMV_OK) {
        snprintf(e->error, sizeof e->error, "%s", err.message[0] ? err.message : spmv_strerror(e->rc));
        return;
    }
    e->threads = team(b, e->ran, &e->p);
    e->max_rel_err = b->verify ? spmv_max_rel_err(dt, y, ref, rows) : NAN;
}

void bench_run(task *base, worker *w)
{
    bench_task *b = (bench_task *)base;
    spmv_dtype dt = b->m->host.dtype;
    size_t es = spmv_dtype_size(dt);
    size_t xn = (size_t)(b->m->host.cols ? b->m->host.cols : 1), yn = (size_t)(b->m->host.rows ? b->m->host.rows : 1);
    void *x = malloc(xn * es), *y = malloc(yn * es), *ref = malloc(yn * es);
    if (b->job) /* none for a synchronous bench */
        job_set_running(b->job);
    if (!x || !y || !ref) {
        for (size_t i = 0; i < b->nentries; i++) {
            b->entries[i].rc = SPMV_ERR_NOMEM;
            snprintf(b->entries[i].error, sizeof b->entries[i].error, "out of memory for the vectors");
        }
        goto out;
    }
    spmv_random_vector(dt, b->m->host.cols, b->seed, x);
    spmv_reference(&b->m->host.csr, x, ref);
    for (size_t i = 0; i < b->nentries; i++) {
        /* a slice a kernel: products queued meanwhile run between two */
        bool draining = i > 0 && worker_slice(w);
        if (draining || job_cancelled(b->job)) { /* SIGTERM, DELETE /v1/jobs/{id}: the kernels not run say so */
            for (size_t j = i; j < b->nentries; j++) {
                b->entries[j].rc = SPMV_ERR_UNAVAILABLE;
                snprintf(b->entries[j].error, sizeof b->entries[j].error, "not run: %s",
                         draining ? "the daemon is shutting down" : "the job was cancelled");
            }
            break;
        }
        run_entry(b, w, &b->entries[i], x, y, ref);
        if (b->job)
            job_set_progress(b->job, (double)(i + 1) / (double)b->nentries);
    }
out:
    free(x);
    free(y);
    free(ref);
}

void bench_free(bench_task *b)
{
    if (!b)
        return;
    matrix_unref(b->m);
    job_unref(b->job);
    json_decref(b->skipped);
    free(b->entries);
    free(b);
}

