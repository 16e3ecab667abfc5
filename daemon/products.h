/* products.h — a product y = alpha*op(A)*x + beta*y as a worker task.
 *
 * The API decodes a /spmv request (api/spmv.c), checks it, and fills a
 * `product`: the matrix, the kernel (or auto), its parameters, runs, and
 * the operands — inline x, resident vectors, shared-memory regions or CUDA
 * regions. product_run is the task body: it runs on the worker of the
 * kernel's device (product_worker), stages the operands there, runs the
 * kernel through the worker (daemon/worker.c worker_run), checks the
 * answer against the reference when asked, and leaves y, the statistics
 * and the outcome in the product for the API to encode. A sharded matrix's
 * product runs on the cluster worker instead.
 */
#ifndef SPMVD_PRODUCTS_H
#define SPMVD_PRODUCTS_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/autotune.h"
#include "daemon/bufpool.h"
#include "daemon/jobs.h"
#include "daemon/shm.h"
#include "daemon/vectors.h"
#include "daemon/worker.h"

struct spmvd;

typedef struct product {
    task base;
    job *job;             /* async only */
    struct spmvd *d;
    matrix *m;
    const spmv_kernel *k;
    spmv_params p;
    int32_t runs, warmup;
    bool verify;
    void *x, *y;
    run_report report;    /* statistics, verify, queue wait, worker */
    int rc;
    spmv_error err;
    bool is_auto;         /* "kernel":"auto": k becomes the tuned choice on the worker */
    matrix_tuning tuned;
    /* resident operands, scaling, op and columns (the API decodes them) */
    rvec *xv, *yv;
    double alpha, beta, axpby_ms;
    bool trans;
    int32_t ncols;
    int32_t xlen, ylen;   /* values a column: cols and rows, swapped for op t */
    shm_operand xs, ys;   /* operands in shared-memory regions (reg NULL: not) */
    bool x_borrowed, y_borrowed; /* x, y point into a pinned region: not ours to free */
    bufpool_buf *x_buf, *y_buf;  /* x (the binary body), y: pooled buffers (daemon/bufpool.h) */
    int shm_rc;           /* a region failed on the worker: shm_status, message in err */
    spmv_vec xdv, ydv;    /* x, y in CUDA regions: views of the client's device memory */
    bool xcuda, ycuda;
    bool sharded;         /* the matrix's shards, across the MPI ranks, multiply */
    bool batchable;       /* may run in one SpMM with others (daemon/batch.c; the API decides) */
    int32_t batched;      /* columns of the SpMM it ran in (0: the window was off) */
    cluster_spmv_stats cst;
} product;

/* The worker p runs on: the cluster worker for a sharded matrix, where
 * `auto` tunes, or the kernel's device. */
worker *product_worker(struct spmvd *d, const product *p);
/* The task body (p->base.run): on worker w's thread. The outcome is
 * p->rc with p->err, or p->shm_rc (a shm_status) when a region failed. */
void product_run(task *t, worker *w);
/* Releases what p holds (matrix, vectors, regions, buffers, job); not p. */
void product_release(product *p);

#endif
