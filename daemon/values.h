/* values.h — PUT /v1/matrices/{id}/values: a stored matrix's values
 * replaced on the same pattern, as Newton and time-stepping codes need.
 *
 * The new values (nnz of them, CSR order) are checked and, for dtype
 * mixed, rounded to float32 on the HTTP thread (values_prepare); the file
 * is written with them under its temporary name (values_stage: the same
 * atomic write as an upload's) before anything in memory changes. The
 * change itself is a task on the matrix's worker (values_run), the one
 * thread that runs its kernels, so no product reads half-changed values:
 * the host CSR's values copied over, every derived format and transpose
 * dropped (the pinned ones rebuilt), the device copy updated the same way
 * (worker_ops.matrix_set_values), `auto`'s choice forgotten, the header's
 * sha256 changed. Then values_commit gives the file its name (a failed
 * task discards it instead: nothing changed). One change at a time per
 * matrix (values_begin).
 */
#ifndef SPMVD_VALUES_H
#define SPMVD_VALUES_H

#include "daemon/store.h"
#include "daemon/worker.h"

struct spmvd;

typedef struct values_task {
    task base;                  /* values_run on w */
    struct spmvd *d;
    matrix *m;
    worker *w;                  /* the matrix's worker (autotune_worker's) */
    void *val;                  /* nnz values in m's host dtype (the request's body, not owned) */
    matfile_meta meta;          /* m's header with the new sha256: what is written */
    matfile_staged staged;
    bool claimed;               /* m's one change at a time is this one */
    int rc;                     /* the task, with err */
    spmv_error err;
} values_task;

/* Claims m for this change (false: another change of its values is under
 * way) and picks its worker. */
bool values_begin(values_task *t, struct spmvd *d, matrix *m);
/* The values from a body of len bytes (nnz of m's dtype; mixed: float64,
 * rounded here in place); SPMV_ERR_INVALID naming both lengths,
 * SPMV_ERR_LIMIT naming a value past float32's range. */
int values_prepare(values_task *t, void *body, size_t len, spmv_error *err);
/* The file with the new values, under its temporary name. */
int values_stage(values_task *t, spmv_error *err);
/* The task body (t->base.run), on t->w's thread. */
void values_run(task *base, worker *w);
/* After the task: the file renamed into place (or discarded if the task
 * failed, whose status is returned). */
int values_commit(values_task *t, int status, spmv_error *err);
/* Discards a staged file never committed, releases the claim and m. */
void values_release(values_task *t);

#endif
