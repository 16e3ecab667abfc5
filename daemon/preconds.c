/* preconds.c — the preconditioners resident with a matrix (preconds.h).
 *
 * The list lives on the matrix under its lock, like the host formats it
 * builds on demand; the build runs in a task on the worker of the solve's
 * device (preconds_build, called by daemon/solve.c and by the task of
 * POST /v1/matrices/{id}/preconditioners), and the free is posted to that
 * worker (worker_post), since a GPU preconditioner's memory belongs to its
 * worker's thread.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/log.h"
#include "daemon/preconds.h"
#include "daemon/vectors.h"

rprecond *rprecond_new(worker *w, const spmv_precond_options *o, double *near_nullspace)
{
    rprecond *r = calloc(1, sizeof *r);
    if (!r) {
        free(near_nullspace);
        return NULL;
    }
    store_new_id(r->id);
    r->o = *o;
    r->near_nullspace = near_nullspace;
    r->o.amg.near_nullspace = NULL;
    r->w = w;
    r->created_wall = (long long)time(NULL);
    atomic_init(&r->refs, 1);
    return r;
}

rprecond *rprecond_ref(rprecond *r)
{
    if (r)
        atomic_fetch_add(&r->refs, 1);
    return r;
}

/* On the worker's thread (w), or without it when it stopped (w NULL:
 * the context teardown frees the device side). */
static void free_on_worker(worker *w, void *arg)
{
    rprecond *r = arg;
    if (w)
        spmv_precond_free(worker_gpu_ctx(w), r->p);
    free(r->near_nullspace);
    free(r);
}

void rprecond_unref(rprecond *r)
{
    if (!r || atomic_fetch_sub(&r->refs, 1) != 1)
        return;
    if (r->p && r->w)
        worker_post(r->w, free_on_worker, r);
    else
        free_on_worker(NULL, r);
}

int preconds_build(worker *w, matrix *m, rprecond *r, spmv_error *err)
{
    spmv_precond_options o = r->o;
    o.amg.near_nullspace = r->near_nullspace;
    r->values_version = atomic_load(&m->values_gen);
    worker_heartbeat(w);
    int st = spmv_precond_setup(worker_gpu_ctx(w), &m->host.csr, &o, &r->p, err);
    worker_heartbeat(w);
    if (st)
        return st;
    spmv_precond_info info;
    spmv_precond_info_of(r->p, &info);
    r->bytes = info.host_bytes + info.device_bytes;
    r->setup_ms = info.setup_ms;
    log_info("preconditioner %s (%s) of %s built on %s in %.1f ms, %zu bytes", r->id,
             spmv_precond_type_name(o.type), m->meta.id, w->name, r->setup_ms, r->bytes);
    return SPMV_OK;
}

void preconds_insert(matrix *m, rprecond *r)
{
    rprecond_ref(r);
    pthread_mutex_lock(&m->lock);
    r->listed = true;
    r->next = m->preconds;
    m->preconds = r;
    pthread_mutex_unlock(&m->lock);
}

rprecond *preconds_get(matrix *m, const char *id)
{
    rprecond *found = NULL;
    pthread_mutex_lock(&m->lock);
    for (rprecond *r = m->preconds; r && !found; r = r->next)
        if (strcmp(r->id, id) == 0)
            found = rprecond_ref(r);
    pthread_mutex_unlock(&m->lock);
    return found;
}

/* The options a cache entry must match: the type and every option the
 * type reads (the inline form takes none but the type, block_size and
 * precision). */
static bool same_options(const spmv_precond_options *a, const spmv_precond_options *b)
{
    return a->type == b->type && a->block_size == b->block_size && a->degree == b->degree &&
           a->float32 == b->float32 && memcmp(&a->amg, &b->amg, sizeof a->amg) == 0;
}

rprecond *preconds_cached(matrix *m, worker *w, const spmv_precond_options *o, uint64_t nullspace_hash)
{
    rprecond *found = NULL;
    pthread_mutex_lock(&m->lock);
    for (rprecond *r = m->preconds; r && !found; r = r->next)
        if (r->inline_cache && r->w == w && r->values_version == atomic_load(&m->values_gen) &&
            r->nullspace_hash == nullspace_hash && same_options(&r->o, o))
            found = rprecond_ref(r);
    pthread_mutex_unlock(&m->lock);
    return found;
}

rprecond *preconds_find(store *s, const char *id, matrix **m)
{
    matrix **list;
    size_t n;
    rprecond *found = NULL;
    *m = NULL;
    if (store_list(s, &list, &n) != SPMV_OK)
        return NULL;
    for (size_t i = 0; i < n && !found; i++)
        if ((found = preconds_get(list[i], id)))
            *m = matrix_ref(list[i]);
    store_list_free(list, n);
    return found;
}

int preconds_remove(matrix *m, const char *id, spmv_error *err)
{
    rprecond *gone = NULL;
    pthread_mutex_lock(&m->lock);
    for (rprecond **pp = &m->preconds; *pp; pp = &(*pp)->next)
        if (strcmp((*pp)->id, id) == 0) {
            gone = *pp;
            *pp = gone->next;
            gone->listed = false;
            break;
        }
    pthread_mutex_unlock(&m->lock);
    if (!gone)
        return spmv_error_set(err, SPMV_ERR_NOT_FOUND, 0, "matrix %s has no preconditioner %s", m->meta.id, id);
    rprecond_unref(gone);
    return SPMV_OK;
}

int preconds_list(matrix *m, rprecond ***out, size_t *n)
{
    pthread_mutex_lock(&m->lock);
    size_t count = 0;
    for (rprecond *r = m->preconds; r; r = r->next)
        count++;
    rprecond **list = calloc(count + 1, sizeof *list);
    if (list) {
        size_t i = 0;
        for (rprecond *r = m->preconds; r; r = r->next)
            list[i++] = rprecond_ref(r);
    }
    pthread_mutex_unlock(&m->lock);
    *out = list;
    *n = list ? count : 0;
    return list ? SPMV_OK : SPMV_ERR_NOMEM;
}

void preconds_list_free(rprecond **list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        rprecond_unref(list[i]);
    free(list);
}

/* Unlists every preconditioner of m, or only the inline caches built from
 * values it no longer holds. */
static void prune(matrix *m, bool stale_cache_only)
{
    rprecond *gone = NULL;
    uint64_t now = atomic_load(&m->values_gen);
    pthread_mutex_lock(&m->lock);
    for (rprecond **pp = &m->preconds; *pp;) {
        rprecond *r = *pp;
        if (!stale_cache_only || (r->inline_cache && r->values_version != now)) {
            *pp = r->next;
            r->next = gone;
            gone = r;
        } else {
            pp = &r->next;
        }
    }
    pthread_mutex_unlock(&m->lock);
    for (rprecond *r = gone; r;) {
        rprecond *next = r->next;
        r->listed = false;
        rprecond_unref(r);
        r = next;
    }
}

void preconds_clear(matrix *m) { prune(m, false); }

void preconds_values_changed(matrix *m) { prune(m, true); }

size_t preconds_bytes(matrix *m)
{
    size_t total = 0;
    pthread_mutex_lock(&m->lock);
    for (rprecond *r = m->preconds; r; r = r->next)
        total += r->bytes;
    pthread_mutex_unlock(&m->lock);
    return total;
}

static json_t *options_json(const spmv_precond_options *o)
{
    json_t *j = json_object();
    if (o->block_size > 1 || o->type == SPMV_PRECOND_BLOCK_JACOBI)
        json_object_set_new(j, "block_size", json_integer(o->block_size));
    if (o->type == SPMV_PRECOND_CHEBYSHEV)
        json_object_set_new(j, "degree", json_integer(o->degree));
    if (o->type == SPMV_PRECOND_AMG) {
        const spmv_amg_options *a = &o->amg;
        json_object_set_new(j, "max_levels", json_integer(a->max_levels));
        json_object_set_new(j, "max_coarse", json_integer(a->max_coarse));
        json_object_set_new(j, "strength", json_real(a->strength));
        json_object_set_new(j, "smoother", json_string(a->smoother == SPMV_AMG_JACOBI ? "jacobi" : "chebyshev"));
        json_object_set_new(j, "presmooth", json_integer(a->presmooth));
        json_object_set_new(j, "postsmooth", json_integer(a->postsmooth));
        json_object_set_new(j, "degree", json_integer(a->degree));
        json_object_set_new(j, "near_nullspace_columns", json_integer(a->nullspace_k ? a->nullspace_k : o->block_size));
        json_object_set_new(j, "aggregation", json_string(spmv_amg_aggregation_name(a->aggregation)));
    }
    json_object_set_new(j, "precision", json_string(o->float32 ? "float32" : "float64"));
    return j;
}

json_t *rprecond_json(const rprecond *r, const matrix *m)
{
    spmv_precond_info info = {0};
    if (r->p)
        spmv_precond_info_of(r->p, &info);
    char created[32];
    time_t t = (time_t)r->created_wall;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:f, s:I, s:b, s:b, s:o, s:s}", "id", r->id, "type",
                          spmv_precond_type_name(r->o.type), "matrix", m->meta.id, "device",
                          r->w ? r->w->name : "cpu", "setup_ms", r->setup_ms, "bytes", (json_int_t)r->bytes,
                          "symmetric", info.symmetric, "inline", r->inline_cache, "options", options_json(&r->o),
                          "created", created);
    if (o) /* built from values the matrix no longer holds (PUT .../values since) */
        json_object_set_new(o, "stale", json_boolean(r->values_version != atomic_load(&((matrix *)m)->values_gen)));
    if (o && r->o.type == SPMV_PRECOND_AMG)
        json_object_set_new(o, "hierarchy", json_pack("{s:i, s:f, s:i, s:s, s:s}", "levels", info.levels,
                                                      "operator_complexity", info.operator_complexity,
                                                      "coarse_rows", info.coarse_rows, "aggregation",
                                                      spmv_amg_aggregation_name(info.aggregation), "built_on",
                                                      info.built_on_device ? "gpu" : "host"));
    return o;
}

/* ------------------------------------------------------- building one */

void precond_source_release(precond_source *s)
{
    free(s->values);
    rvec_unref(s->v);
    *s = (precond_source){0};
}

/* A resident vector's values as float64 on the host, read on w's thread
 * (the vector is on the host or on w's device: api/precond.c checks). */
static int read_vector(worker *w, const rvec *v, double **out, spmv_error *err)
{
    size_t n = (size_t)v->v.n * (size_t)v->v.k;
    double *d = malloc((n ? n : 1) * sizeof *d);
    void *raw = v->v.dtype == SPMV_FLOAT64 ? (void *)d : malloc((n ? n : 1) * sizeof(float));
    int rc = d && raw ? SPMV_OK : spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory reading the near-nullspace");
    spmv_gpu_ctx *ctx = v->v.device == SPMV_DEVICE_GPU ? worker_gpu_ctx(w) : NULL;
    if (rc == SPMV_OK)
        rc = spmv_vec_read(ctx, &v->v, raw, err);
    if (rc == SPMV_OK && raw != d)
        for (size_t i = 0; i < n; i++)
            d[i] = ((const float *)raw)[i];
    if (raw != d)
        free(raw);
    if (rc != SPMV_OK) {
        free(d);
        d = NULL;
    }
    *out = d;
    return rc;
}

/* FNV-1a of the values: a cache entry's near-nullspace must be the same. */
static uint64_t hash_values(const double *v, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)v;
    for (size_t i = 0; i < n * sizeof *v; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h ? h : 1;
}

/* src's near-nullspace (rows x *k, malloc'd; NULL with *k 0: none). */
static int source_values(worker *w, int32_t rows, precond_source *src, double **out, int32_t *k, spmv_error *err)
{
    double *vals = src->values;
    int32_t cols = src->k;
    src->values = NULL;
    *out = NULL;
    *k = 0;
    if (src->v) {
        int rc = read_vector(w, src->v, &vals, err);
        if (rc != SPMV_OK)
            return rc;
        cols = src->v->v.k;
    }
    if (!vals)
        return SPMV_OK;
    if (src->rigid) { /* the coordinates: x y z of each of rows / 3 nodes */
        double *modes = malloc((size_t)rows * 6 * sizeof *modes);
        if (!modes) {
            free(vals);
            return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for the rigid-body modes");
        }
        spmv_amg_rigid_body(rows / 3, vals, modes);
        free(vals);
        vals = modes;
        cols = 6;
    }
    *out = vals;
    *k = cols;
    return SPMV_OK;
}

int precond_obtain(worker *w, matrix *m, const spmv_precond_options *o, precond_source *src, bool cache,
                   rprecond **out, bool *built, spmv_error *err)
{
    double *ns;
    int32_t k;
    *out = NULL;
    *built = false;
    int rc = source_values(w, m->host.rows, src, &ns, &k, err);
    if (rc != SPMV_OK)
        return rc;
    spmv_precond_options opts = *o;
    opts.amg.nullspace_k = k;
    uint64_t hash = ns ? hash_values(ns, (size_t)m->host.rows * (size_t)k) : 0;
    if (cache && (*out = preconds_cached(m, w, &opts, hash))) {
        free(ns);
        return SPMV_OK;
    }
    rprecond *r = rprecond_new(w, &opts, ns);
    if (!r)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for the preconditioner");
    r->nullspace_hash = hash;
    r->inline_cache = cache;
    if ((rc = preconds_build(w, m, r, err)) != SPMV_OK) {
        rprecond_unref(r);
        return rc;
    }
    preconds_insert(m, r);
    *out = r;
    *built = true;
    return SPMV_OK;
}

void precond_task_run(task *base, worker *w)
{
    precond_task *t = (precond_task *)base;
    bool built;
    t->rc = precond_obtain(w, t->m, &t->o, &t->src, false, &t->r, &built, &t->err);
}

void precond_task_release(precond_task *t)
{
    if (!t)
        return;
    precond_source_release(&t->src);
    rprecond_unref(t->r);
    matrix_unref(t->m);
    t->r = NULL;
    t->m = NULL;
}
