/* vectors.h — resident vectors: the daemon's registry of working vectors.
 *
 * A solver keeps its x, r, p ... where the matrix is, so that a product or a
 * dot moves no vector across the network. A `rvec` is one such vector (or a
 * block of k), held on one device: host memory owned by the CPU worker, or
 * memory of one GPU owned by that GPU's worker (allocated, written, read and
 * freed only on that worker's thread, inside tasks, like a matrix's device
 * copy). Vectors are working state, never persisted: they expire after
 * vector_ttl_s without use, and each device holds at most max_vectors of
 * them and max_vector_bytes of their values (a request past either is a
 * 507). Records are reference counted: the registry holds one reference, a
 * request or task using the vector holds another, so a DELETE (or expiry)
 * while a task runs removes the vector from the listing at once and frees
 * its memory when the task is done.
 *
 * This header is the registry's interface: daemon/vectors.c implements the
 * registry, api/vectors.c the /v1/vectors routes over the task bodies of
 * daemon/vector_tasks.c, api/ops.c POST /v1/ops over daemon/ops.c;
 * api/spmv.c and api/solve.c take vectors as operands.
 *
 * A vector made like a sharded matrix (issue 16) is distributed: each MPI
 * rank holds its slice where its shard is (cluster/vectors.c), and the
 * record's worker is the cluster worker, which runs every task on it.
 */
#ifndef SPMVD_VECTORS_H
#define SPMVD_VECTORS_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon/matfile.h"
#include "spmv.h"

struct spmvd;
struct worker;

typedef struct rvec {
    char id[MATFILE_ID_LEN + 1];
    char like[MATFILE_ID_LEN + 1];  /* the matrix it was made like, or "" */
    spmv_vec v;                     /* data: host or device memory of `w` (NULL when distributed) */
    struct cluster_vec *dist;       /* distributed across the MPI ranks like a sharded matrix (w: the cluster
                                     * worker; v holds its dtype, n and k = 1), else NULL */
    struct worker *w;               /* the owning worker (CPU or one GPU) */
    size_t bytes;                   /* spmv_vec_bytes(&v), charged to w's quota */
    double created_ms;              /* monotonic */
    long long created_wall;         /* time(NULL) */
    _Atomic long long last_used_ms; /* monotonic, for the TTL */
    _Atomic int refs;
    bool listed;                    /* under the registry lock */
    struct vstore *store;           /* whose quota its bytes are charged to */
    struct rvec *next;
} rvec;

typedef struct vstore vstore;

/* Limits read on every admission; SIGHUP may change them (atomics). */
typedef struct vstore_limits {
    _Atomic int64_t ttl_s, max_bytes, max_count;
} vstore_limits;

vstore *vstore_new(void);
/* Frees every record still listed (the workers' device memory is released
 * by the GPU context teardown at shutdown). */
void vstore_free(vstore *s);

/* Admission: reserves count and bytes for a new vector on worker w, or
 * SPMV_ERR_LIMIT with a message naming the limit, the device and the
 * numbers (507). A reservation is either turned into a vector by
 * vstore_insert or returned by vstore_unreserve. */
int vstore_reserve(vstore *s, const vstore_limits *l, struct worker *w, size_t bytes, spmv_error *err);
void vstore_unreserve(vstore *s, struct worker *w, size_t bytes);

/* A fresh record (id assigned, one reference for the caller) around an
 * allocated spmv_vec of worker w; not listed yet. */
rvec *rvec_new(vstore *s, struct worker *w, const spmv_vec *v, const char *like);
/* Lists r (the registry takes its own reference); its bytes must have been
 * reserved. */
void vstore_insert(vstore *s, rvec *r);
/* A referenced vector, touching its idle clock, or NULL (unknown, deleted,
 * expired). */
rvec *vstore_get(vstore *s, const char *id);
rvec *rvec_ref(rvec *r);
/* Drops a reference; the last one frees the values on the owning worker's
 * thread (a release task, forced past the queue bound) and returns the
 * bytes to the quota. */
void rvec_unref(rvec *r);
/* Unlists: SPMV_ERR_NOT_FOUND if absent. */
int vstore_remove(vstore *s, const char *id, spmv_error *err);
/* Unlists vectors idle longer than ttl_s; returns how many. */
size_t vstore_sweep(vstore *s, double ttl_s);
/* Referenced snapshot of the listing, oldest first. */
int vstore_list(vstore *s, rvec ***out, size_t *n);
void vstore_list_free(rvec **list, size_t n);
/* Count and bytes held on worker w (listed or still referenced). */
void vstore_usage(vstore *s, const struct worker *w, size_t *count, size_t *bytes);

/* The descriptor the API shows: {"id","n","k","dtype","device","bytes",
 * "created","idle_s","expires_in_s","like"?}. */
json_t *rvec_json(const rvec *r, double ttl_s);

#endif
