/* vector_tasks.c — the task body of a vector's create, read and overwrite
 * (daemon/vector_tasks.h).
 *
 * On the owning worker's thread: a region's values are staged first (the
 * pinned pages for DMA on a GPU, else a pooled buffer read with pread:
 * shm_operand_stage_pooled), then the values are allocated, written,
 * filled or read through the engine's spmv_vec_* calls on the worker's
 * device, synchronised (the answer says the values are there), and a
 * region written to goes back with pwrite (shm_operand_unstage). A new
 * record is listed only once its values are in place, and takes the
 * quota the API reserved; on a failure nothing is listed and the
 * reservation goes back with vector_task_release. Distributed vectors go
 * through the cluster (cluster_vec_*) instead.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon.h"
#include "daemon/vector_tasks.h"

/* A region's values, or a place for them (shm_operand_stage_pooled): the
 * pinned pages on a GPU worker, else a pooled buffer (filled with pread
 * for a create or write). NULL with t->rc / t->shm_rc set; a buffer the
 * pool could not give is the vector's memory running short (507), as a
 * failed allocation of the vector is. */
static void *region_stage(vector_task *t, bufpool *pool, spmv_gpu_ctx *ctx)
{
    void *where = NULL;
    int st = shm_operand_stage_pooled(&t->so, ctx != NULL, t->op != VECTOR_READ, pool, &t->vbuf, &where,
                                      t->err.message, sizeof t->err.message);
    if (st == SHM_NOMEM)
        t->rc = SPMV_ERR_NOMEM;
    else if (st)
        t->shm_rc = st, t->rc = SPMV_ERR_INVALID;
    return st ? NULL : where;
}

/* After the worker: values read into the region go there, DMA is checked. */
static void region_unstage(vector_task *t, const void *where)
{
    if ((t->shm_rc = shm_operand_unstage(&t->so, where, t->op == VECTOR_READ, t->err.message, sizeof t->err.message)))
        t->rc = SPMV_ERR_INVALID;
}

/* The values of a distributed vector: scattered from or gathered into
 * host memory, a fill run on every rank's slice. */
static int dist_values(vector_task *t, worker *w, rvec *v, void *host)
{
    cluster *c = worker_cluster_of(w);
    if (t->op == VECTOR_READ)
        return cluster_vec_read(c, v->dist, host, &t->err);
    if (t->fill == VECTOR_FILL_VALUE)
        return cluster_vec_op(c, CLUSTER_VOP_FILL, t->fill_value, v->dist, 0, NULL, NULL, &t->err);
    if (t->fill != VECTOR_FILL_RANDOM)
        return cluster_vec_write(c, v->dist, host, &t->err);
    /* the same values as a vector of one device would get: drawn on the host, then scattered */
    spmv_vec tmp;
    int rc = spmv_vec_alloc(NULL, SPMV_DEVICE_CPU, v->v.dtype, v->v.n, 1, &tmp, &t->err);
    if (rc == SPMV_OK && (rc = spmv_vec_fill_random(NULL, &tmp, t->seed, &t->err)) == SPMV_OK)
        rc = cluster_vec_write(c, v->dist, tmp.data, &t->err);
    spmv_vec_free(NULL, &tmp);
    return rc;
}

/* On the cluster worker: a distributed vector made like t->m, or the
 * values of one read or written. */
static void dist_run(vector_task *t, worker *w, void *staged)
{
    void *host = staged ? staged : t->values;
    if (t->op == VECTOR_CREATE) {
        spmv_vec shape = {.device = SPMV_DEVICE_CPU, .dtype = t->dtype, .n = t->n, .k = 1};
        rvec *v = rvec_new(w->d->vectors, w, &shape, t->like);
        if (!v) {
            t->rc = spmv_error_set(&t->err, SPMV_ERR_NOMEM, 0, "out of memory for the vector record");
            return;
        }
        if ((t->rc = cluster_vec_new(worker_cluster_of(w), t->m->shards, t->rows, v->id, &v->dist, &t->err)) ||
            (t->rc = dist_values(t, w, v, host))) {
            v->store = NULL; /* the reservation is the task's to return */
            rvec_unref(v);
            return;
        }
        t->v = v;
        t->reserved = 0;
        vstore_insert(w->d->vectors, v);
    } else {
        t->rc = dist_values(t, w, t->v, host);
    }
    if (t->rc == SPMV_OK && staged)
        region_unstage(t, staged);
}

/* A vector's values read into host memory or the region. */
static void read_values(vector_task *t, spmv_gpu_ctx *ctx, void *staged)
{
    if (!(t->rc = spmv_vec_read(ctx, &t->v->v, staged ? staged : t->values, &t->err)) && ctx)
        t->rc = spmv_vec_sync(ctx, &t->err);
    if (!t->rc && staged)
        region_unstage(t, staged);
}

void vector_task_run(task *base, worker *w)
{
    vector_task *t = (vector_task *)base;
    spmv_gpu_ctx *ctx = worker_gpu_ctx(w);
    void *staged = NULL;
    if (t->so.reg && !(staged = region_stage(t, w->d->iobufs, ctx)))
        return;
    if (worker_is_cluster(w)) {
        dist_run(t, w, staged);
        return;
    }
    if (t->op == VECTOR_READ) {
        read_values(t, ctx, staged);
        return;
    }
    const void *src = staged ? staged : t->values;
    spmv_vec nv = {0}, *dst = t->v ? &t->v->v : &nv;
    if (t->op == VECTOR_CREATE &&
        (t->rc = spmv_vec_alloc(ctx, ctx ? SPMV_DEVICE_GPU : SPMV_DEVICE_CPU, t->dtype, t->n, t->k, &nv, &t->err)))
        return;
    if (t->fill == VECTOR_FILL_VALUE)
        t->rc = spmv_vec_fill(ctx, dst, t->fill_value, &t->err);
    else if (t->fill == VECTOR_FILL_RANDOM)
        t->rc = spmv_vec_fill_random(ctx, dst, t->seed, &t->err);
    else
        t->rc = spmv_vec_write(ctx, dst, src, &t->err);
    if (t->rc == SPMV_OK && ctx)
        t->rc = spmv_vec_sync(ctx, &t->err); /* the answer says the values are there */
    if (t->rc == SPMV_OK && staged)
        region_unstage(t, staged);
    if (t->op != VECTOR_CREATE)
        return;
    if (t->rc != SPMV_OK || !(t->v = rvec_new(w->d->vectors, w, &nv, t->like))) {
        if (t->rc == SPMV_OK)
            t->rc = spmv_error_set(&t->err, SPMV_ERR_NOMEM, 0, "out of memory for the vector record");
        spmv_vec_free(ctx, &nv);
        return;
    }
    t->reserved = 0; /* the record owns the quota now; its last unref returns it */
    vstore_insert(w->d->vectors, t->v);
}

void vector_task_release(vector_task *t)
{
    if (!t)
        return;
    if (t->reserved)
        vstore_unreserve(t->w->d->vectors, t->w, t->reserved);
    t->reserved = 0;
    rvec_unref(t->v);
    t->v = NULL;
    if (t->m)
        matrix_unref(t->m);
    t->m = NULL;
    if (!t->values_from_body)
        free(t->values);
    t->values = NULL;
    shm_operand_close(&t->so);
    bufpool_put(t->vbuf);
    t->vbuf = NULL;
}
