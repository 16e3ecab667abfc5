/* bench.h — a sweep of many kernels on one matrix, as a worker task.
 *
 * The API plans the sweep from POST /v1/matrices/{id}/bench (api/bench.c):
 * one entry per kernel and combination of the swept parameters (block
 * and hack sizes, the CPU kernels' thread counts), `auto` included where
 * it serves. bench_run is the task body, on the matrix's
 * device worker: one random x from the seed, the reference y, then every
 * entry in turn (auto tuned first when nothing was chosen yet), each y
 * poisoned first and compared with the reference, progress reported to
 * the job after every entry and a DELETE of the job honoured between
 * entries. The API turns the entries into the job's table.
 */
#ifndef SPMVD_BENCH_H
#define SPMVD_BENCH_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon/autotune.h"
#include "daemon/jobs.h"
#include "daemon/worker.h"

struct spmvd;

typedef struct bench_entry {
    const spmv_kernel *k;       /* the row's name: a kernel, or `auto` */
    const spmv_kernel *ran;     /* what ran: k, or auto's choice */
    matrix_tuning tuned;        /* auto's choice (k is auto) */
    spmv_params p;
    spmv_stats st;
    int32_t threads;            /* CPU rows: the team that ran (what efficiency divides by); 0 on a GPU */
    double max_rel_err;
    int rc;
    char error[512];
} bench_entry;

typedef struct bench_task {
    task base;
    struct spmvd *d;
    job *job;              /* NULL for a synchronous bench ("async": false) */
    matrix *m;
    int32_t runs, warmup;
    bool verify;
    uint64_t seed;
    bench_entry *entries;
    size_t nentries;
    json_t *skipped;
} bench_task;

/* The task body (b->base.run): every entry's rc, stats and error. */
void bench_run(task *t, worker *w);
/* Frees b and what it holds. */
void bench_free(bench_task *b);

#endif
