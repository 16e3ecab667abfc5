/* spmspm.h — C = A*B as a worker task (SpMSpM).
 *
 * The API decodes POST /v1/matrices/{a}/spmspm (api/spmspm.c) and fills a
 * `spmspm_task`: A and B, the SpMSpM kernel and its parameters, runs,
 * whether to verify C against the reference and whether to store it as a
 * new matrix. spmspm_run is the task body, on the kernel's worker
 * (spmvd_worker_for): the product through worker_run_spmspm, verify, and
 * for `store` the new matrix made resident where A is.
 */
#ifndef SPMVD_SPMSPM_H
#define SPMVD_SPMSPM_H

#include <stdbool.h>

#include "daemon/worker.h"

struct spmvd;

typedef struct spmspm_task {
    task base;
    struct spmvd *d;
    matrix *a, *b;
    const spmv_kernel *k;
    spmv_params p;
    int32_t runs, warmup;
    bool store, verify;
    spmv_csr c;
    matrix *out;          /* store: the new matrix */
    int64_t mem_held;     /* host bytes reserved for C (spmspm_admit) */
    run_report report;    /* statistics, verify, queue wait, worker */
    int rc;
    spmv_error err;
} spmspm_task;

/* The task body (t->base.run): t->rc and t->err, C in t->c (and t->out
 * for `store`), the statistics in t->st. */
void spmspm_run(task *t, worker *w);
/* Before the product: C's most entries (`c_max`: the multiply-adds, sum
 * over A's non-zeros of B's row lengths, at most rows x cols) against
 * max_spmspm_nnz, a JSON answer of them (`json`) against
 * max_job_result_bytes, and C's CSR reserved against the host's memory
 * until spmspm_release. SPMV_ERR_LIMIT names the bound and the estimate. */
int spmspm_admit(spmspm_task *t, int64_t c_max, bool json, spmv_error *err);
/* Releases what t holds (A, B, C, the stored matrix); not t. */
void spmspm_release(spmspm_task *t);

#endif
