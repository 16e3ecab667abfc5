/* solve.h — a Krylov solve next to the matrix, as a worker task.
 *
 * The API decodes POST /v1/matrices/{id}/solve (api/solve.c) and fills a
 * `solve_task`: the method and its options (engine/krylov.h), the operator's
 * kernel (or auto) on the matrix's device, b and x0 inline or as resident
 * vectors, and x_out. solve_run is the task body, on the worker `w` of the
 * kernel's device: it sets up b, x and the Jacobi diagonal on that device,
 * runs spmv_solve with every product through the worker (worker_run_apply)
 * and a heartbeat, progress and cancellation through the job each
 * iteration, and leaves x (unless it went into x_out) and the report for
 * the API to encode.
 */
#ifndef SPMVD_SOLVE_H
#define SPMVD_SOLVE_H

#include <stdbool.h>

#include "daemon/jobs.h"
#include "daemon/vectors.h"
#include "daemon/worker.h"
#include "krylov.h"

struct spmvd;

typedef struct solve_task {
    task base;
    job *job;
    struct spmvd *d;
    matrix *m;
    worker *w;
    const spmv_kernel *k;
    bool is_auto;
    spmv_params p;
    spmv_solve_options o;
    bool jacobi;
    void *b_vals, *x0_vals; /* inline b, x0 (n values) */
    rvec *bv, *x0v, *xout;
    void *x;               /* the answer for the body (n values) */
    spmv_solve_result res;
    double queue_ms;
    int rc;
    spmv_error err;
} solve_task;

/* The task body (t->base.run), on worker t->w's thread: t->rc and t->err,
 * t->res and t->x. */
void solve_run(task *t, worker *w);
/* Releases what t holds (matrix, job, vectors, values, result); not t. */
void solve_release(solve_task *t);

#endif
