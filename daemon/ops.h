/* ops.h — a batch of vector steps (POST /v1/ops) as one worker task.
 *
 * The API decodes and checks the whole batch on the HTTP thread
 * (api/ops.c): every step's vectors are found (referenced), on one
 * device, of matching shapes and dtypes, its matrix and kernel resolved.
 * ops_run is the task body: on that device's worker it runs the steps in
 * order, a product through the worker (worker_run_apply) and BLAS-1 steps
 * through the engine's spmv_vec_* calls, each timed up to the point its
 * device work is done. The first step that fails stops the batch; the
 * steps before it have taken effect. The batch is a sliced task: between
 * two steps the short tasks queued meanwhile run (worker_slice), and a
 * SIGTERM stops it there. Steps on vectors distributed across
 * the MPI ranks run on the cluster worker, each one command every rank
 * runs on its slice (cluster/vectors.c).
 */
#ifndef SPMVD_OPS_H
#define SPMVD_OPS_H

#include <stdbool.h>
#include <stddef.h>

#include "daemon/vectors.h"
#include "daemon/worker.h"

struct spmvd;

typedef enum ops_kind {
    OPS_SPMV, OPS_DOT, OPS_NRM2, OPS_AXPY, OPS_AXPBY, OPS_SCAL, OPS_COPY, OPS_FILL, OPS_COUNT
} ops_kind;

/* The steps' names in requests and answers ("spmv", "dot", ...). */
extern const char *const ops_names[OPS_COUNT];

typedef struct ops_step {
    ops_kind op;
    rvec *x, *y;                /* referenced */
    matrix *m;                  /* spmv, referenced */
    const spmv_kernel *k;       /* spmv; NULL until auto is resolved on the worker */
    bool is_auto, trans;
    spmv_params p;
    double alpha, beta, value;
    char as[64];                /* dot, nrm2: the result's name */
    double ms;                  /* out: the step's time */
    double res[SPMV_MAX_K];     /* out: dot, nrm2, a value a column */
} ops_step;

typedef struct ops_batch {
    task base;
    struct spmvd *d;
    worker *w;                  /* the operands' worker: the batch runs there */
    ops_step *steps;
    size_t nsteps;
    double queue_ms, total_ms;
    size_t failed_at;           /* the step that failed (rc != 0) */
    int rc;
    spmv_error err;
} ops_batch;

/* The task body (b->base.run): on worker w's thread. */
void ops_run(task *t, worker *w);
/* Releases the steps and what they reference; not b. */
void ops_release(ops_batch *b);

#endif
