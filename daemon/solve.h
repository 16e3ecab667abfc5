/* solve.h — a Krylov solve next to the matrix, as a worker task.
 *
 * The API decodes POST /v1/matrices/{id}/solve (api/solve.c) and fills a
 * `solve_task`: the method and its options (engine/krylov.h), the operator's
 * kernel (or auto) on the matrix's device, b and x0 inline or as resident
 * vectors, and x_out. solve_run is the task body, on the worker `w` of the
 * kernel's device: it sets up b, x and the Jacobi diagonal (or finds or
 * builds the preconditioner object, daemon/preconds.h) on that device,
 * runs spmv_solve with every product through the worker (worker_run_apply)
 * and a heartbeat, progress and cancellation through the job each
 * iteration, and leaves x (unless it went into x_out) and the report for
 * the API to encode. k right-hand sides (ncols) each get their own report:
 * under CG they run in lockstep, one product of the k directions an
 * iteration (spmv_solve_block); other methods solve them in turn on the
 * same set-up. A sharded matrix's solve runs on the cluster worker
 * instead: one cluster_solve (cluster/solve.c), every MPI rank iterating
 * on its own rows, with the time split of each rank in `cst`.
 */
#ifndef SPMVD_SOLVE_H
#define SPMVD_SOLVE_H

#include <stdbool.h>

#include "daemon/jobs.h"
#include "daemon/preconds.h"
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
    void *dinv_host;       /* Jacobi's 1/diag as the API checked it (malloc), from values of generation dinv_gen */
    unsigned dinv_gen;
    /* A preconditioner object (engine/precond.h): named by id (pc,
     * referenced by the API), or inline (pc_inline: pc_opts and its
     * near-nullspace source), then the matrix's cached one or one built
     * on the worker, which sets pc. pc_built: this solve paid its setup. */
    bool pc_inline;
    spmv_precond_options pc_opts;
    precond_source pc_src;
    rprecond *pc;
    bool pc_built;
    spmv_precond_binding pc_bind;
    int32_t ncols;         /* k systems with one A (>= 1) */
    bool lockstep;         /* ... solved at once (CG, engine/krylov_block.c), not one after the other */
    void *b_vals, *x0_vals; /* inline b, x0 (n x ncols values, column after column) */
    bool vals_borrowed;    /* b_vals, x0_vals point into the request's body: not freed here */
    rvec *bv, *x0v, *xout;  /* resident b, x0, x_out (one column) */
    void *x;               /* the answer for the body (n x ncols values) */
    spmv_solve_result *res; /* one per column */
    int32_t col;           /* the column being solved */
    cluster_solve_stats cst; /* a sharded matrix's solve: each rank's time split */
    double queue_ms;
    int rc;
    spmv_error err;
} solve_task;

/* The task body (t->base.run), on worker t->w's thread: t->rc and t->err,
 * t->res[ncols] and t->x. */
void solve_run(task *t, worker *w);
/* Releases what t holds (matrix, job, vectors, values, result); not t. */
void solve_release(solve_task *t);

#endif
