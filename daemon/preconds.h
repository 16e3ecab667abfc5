/* preconds.h — preconditioners resident with their matrix.
 *
 * A preconditioner (engine/precond.h) is built for one matrix on the
 * device where the matrix's solves run (its GPU, or the host), by a task on
 * that device's worker, and lives with the matrix: it is listed on the
 * matrix (m->preconds, under m->lock), its bytes are counted in the
 * matrix's, it goes when the matrix goes (deleted, or its last reference
 * dropped) and when DELETE /v1/preconditioners/{id} asks.
 * A solve names one by id, or inline by type: an inline one is built on
 * first use, kept on the matrix as its cache for that type and options,
 * and reused until the matrix's values change (m->values_gen moves on:
 * preconds_values_changed).
 *
 * Records are reference counted like resident vectors: the matrix's list
 * holds one reference, each solve using it another, so a DELETE during a
 * solve unlists it at once and frees it (on its worker's thread, where a
 * GPU preconditioner's memory belongs) when the solve is done.
 */
#ifndef SPMVD_PRECONDS_H
#define SPMVD_PRECONDS_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "daemon/store.h"
#include "daemon/vectors.h"
#include "daemon/worker.h"
#include "precond.h"

typedef struct rprecond {
    char id[MATFILE_ID_LEN + 1];
    spmv_precond_options o;
    double *near_nullspace;     /* amg's candidates given by the request (rows x k), kept for the setup */
    spmv_precond *p;            /* NULL until built */
    worker *w;                  /* the worker that built it and frees it */
    bool inline_cache;          /* built by a solve's inline preconditioner (the matrix's cache) */
    uint64_t nullspace_hash;    /* of amg's near-nullspace values (0: none given): part of the cache's key */
    uint64_t values_version;    /* the matrix's values_gen it was built from */
    size_t bytes;               /* host + device bytes */
    double setup_ms;
    long long created_wall;
    _Atomic int refs;
    bool listed;                /* on its matrix's list (under the matrix's lock) */
    struct rprecond *next;
} rprecond;

/* A record for options o on matrix m, built by the caller's task on w
 * (preconds_build); one reference for the caller; not listed. Takes
 * near_nullspace (malloc'd, or NULL). */
rprecond *rprecond_new(worker *w, const spmv_precond_options *o, double *near_nullspace);
rprecond *rprecond_ref(rprecond *r);
/* Drops a reference; the last frees the preconditioner on its worker's
 * thread (a queued, forced task for a GPU one). */
void rprecond_unref(rprecond *r);

/* On worker w's thread (inside a task): builds r's preconditioner for m
 * on w's device. */
int preconds_build(worker *w, matrix *m, rprecond *r, spmv_error *err);
/* Lists r on m (the list takes a reference) and counts its bytes. */
void preconds_insert(matrix *m, rprecond *r);
/* The listed preconditioner `id` of m, referenced, or NULL. */
rprecond *preconds_get(matrix *m, const char *id);
/* m's inline cache for options o on worker w (same type, options and
 * near-nullspace, built from the current values), referenced, or NULL. */
rprecond *preconds_cached(matrix *m, worker *w, const spmv_precond_options *o, uint64_t nullspace_hash);
/* The listed preconditioner `id` of any stored matrix, referenced, and
 * its matrix (referenced) in *m; NULL if none. */
rprecond *preconds_find(store *s, const char *id, matrix **m);
/* Unlists `id`: SPMV_ERR_NOT_FOUND if m has none of that id. */
int preconds_remove(matrix *m, const char *id, spmv_error *err);
/* A referenced snapshot of m's list (free with preconds_list_free). */
int preconds_list(matrix *m, rprecond ***out, size_t *n);
void preconds_list_free(rprecond **list, size_t n);
/* Unlists every preconditioner of m (it goes). */
void preconds_clear(matrix *m);
/* m's values changed: its inline caches are stale and go; preconditioners
 * the client built by id stay (still a valid preconditioner, built from
 * the old values: their descriptor says so). */
void preconds_values_changed(matrix *m);
/* Bytes of m's listed preconditioners. */
size_t preconds_bytes(matrix *m);

/* ------------------------------------------------------- building one */

/* Where amg's near-nullspace comes from, read on the building worker:
 * values given inline (rows x k, float64, column-major), or a resident
 * vector (k columns of rows values, on the host or the building worker's
 * device); with `rigid` they are the nodes' coordinates instead (one
 * column: x y z of each node interleaved, rows values), from which the six
 * rigid-body modes are made. Neither: none (the constant). */
typedef struct precond_source {
    double *values;            /* inline (malloc'd; taken by precond_obtain) */
    rvec *v;                   /* resident (referenced) */
    int32_t k;                 /* columns of `values` */
    bool rigid;
} precond_source;

void precond_source_release(precond_source *s);

/* On worker w's thread: the preconditioner of options o for m, from its
 * source: with `cache` m's inline cache when it holds one (*built false),
 * else built now (*built true) and listed on m (as its inline cache when
 * `cache`). *out referenced. */
int precond_obtain(worker *w, matrix *m, const spmv_precond_options *o, precond_source *src, bool cache,
                   rprecond **out, bool *built, spmv_error *err);

/* POST /v1/matrices/{id}/preconditioners as a task on the worker of the
 * device it is built for: r (referenced) and rc. */
typedef struct precond_task {
    task base;
    matrix *m;
    spmv_precond_options o;
    precond_source src;
    rprecond *r;
    int rc;
    spmv_error err;
} precond_task;

void precond_task_run(task *t, worker *w);
void precond_task_release(precond_task *t);

/* {"id","type","matrix","device","setup_ms","bytes","symmetric","options":{...},"levels"...} */
json_t *rprecond_json(const rprecond *r, const matrix *m);

#endif
