/* vector_tasks.h — a resident vector's create, read and overwrite as a
 * worker task.
 *
 * The API decodes a /v1/vectors request (api/vectors.c), checks it,
 * reserves the quota of a new vector (vstore_reserve) and fills a
 * `vector_task`: what to do, the worker that owns (or will own) the
 * vector, its shape, and where its values are: host memory (the request
 * body, or decoded JSON), a fill, or a shared-memory region.
 * vector_task_run is the task body. It runs on the owning worker's
 * thread, since a GPU's memory belongs to its worker: it stages a
 * region's values (daemon/shm.h), allocates, writes, fills or reads the
 * values, and lists a new vector, whose record then holds the
 * reservation. A vector made like a sharded matrix is distributed across
 * the MPI ranks (cluster/vectors.c): its task runs on the cluster worker,
 * which scatters the values to the ranks' slices (a fill runs on every
 * rank) and gathers them for a read.
 */
#ifndef SPMVD_VECTOR_TASKS_H
#define SPMVD_VECTOR_TASKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/bufpool.h"
#include "daemon/shm.h"
#include "daemon/vectors.h"
#include "daemon/worker.h"

typedef enum vector_op { VECTOR_CREATE, VECTOR_READ, VECTOR_WRITE } vector_op;
typedef enum vector_fill { VECTOR_FILL_NONE, VECTOR_FILL_VALUE, VECTOR_FILL_RANDOM } vector_fill;

typedef struct vector_task {
    task base;
    vector_op op;
    worker *w;            /* the owning worker: the task runs there */
    rvec *v;              /* READ/WRITE: the vector; CREATE: the record made on the worker */
    spmv_dtype dtype;
    int64_t n;
    int32_t k;
    char like[MATFILE_ID_LEN + 1];
    matrix *m;            /* CREATE of a distributed vector: the sharded matrix it is cut like */
    bool rows;            /* ... as its rows (y), else as its x entries */
    void *values;         /* n*k host values: to write, or read back */
    bool values_from_body;/* `values` is the request body: not the task's to free */
    vector_fill fill;
    double fill_value;
    uint64_t seed;
    size_t reserved;      /* CREATE: bytes reserved in w's quota until the record holds them */
    shm_operand so;       /* values from (create, write) or into (read) a region */
    bufpool_buf *vbuf;    /* their staging buffer when not by DMA */
    int shm_rc;           /* shm_status of a region that failed on the worker */
    int rc;
    spmv_error err;
} vector_task;

/* The task body (t->base.run): on the owning worker's thread. The outcome
 * is t->rc with t->err, or t->shm_rc (a shm_status) when the region
 * failed; a created vector is t->v, listed. */
void vector_task_run(task *t, worker *w);
/* Releases what t holds (vector, matrix, values, region, buffer) and
 * returns a reservation no record took; not t. */
void vector_task_release(vector_task *t);

#endif
