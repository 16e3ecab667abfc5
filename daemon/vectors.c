/* vectors.c — the registry of resident vectors (daemon/vectors.h).
 *
 * A list under one mutex, like the matrix store: a daemon holds at most
 * max_vectors per device, and every lookup is dwarfed by the request that
 * made it. Quotas are counted per owning worker and cover every vector
 * whose memory is still held: listed ones and unlisted ones a task still
 * references, so deleting a vector in use does not let a client allocate
 * past the limit before the memory is back. Admission reserves first
 * (vstore_reserve), the allocation happens on the worker, and the record
 * is listed after; a failed allocation returns its reservation.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/config.h"
#include "daemon/store.h"
#include "daemon/worker.h"
#include "cluster/cluster.h"
#include "daemon/vectors.h"

#define MAX_OWNERS (CONFIG_MAX_DEVICES + 1)

typedef struct quota {
    const struct worker *w;
    size_t count, bytes;
} quota;

struct vstore {
    pthread_mutex_t lock;
    rvec *head;          /* newest first */
    quota q[MAX_OWNERS];
};

vstore *vstore_new(void)
{
    vstore *s = calloc(1, sizeof *s);
    if (s)
        pthread_mutex_init(&s->lock, NULL);
    return s;
}

void vstore_free(vstore *s)
{
    if (!s)
        return;
    rvec *r = s->head;
    while (r) { /* at shutdown the workers are gone: host memory is freed, device memory went with the context */
        rvec *next = r->next;
        if (r->v.device == SPMV_DEVICE_CPU)
            spmv_vec_free(NULL, &r->v);
        free(r);
        r = next;
    }
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* The quota slot of w (created on first use); under the lock. */
static quota *slot(vstore *s, const struct worker *w)
{
    for (int i = 0; i < MAX_OWNERS; i++)
        if (s->q[i].w == w)
            return &s->q[i];
    for (int i = 0; i < MAX_OWNERS; i++)
        if (!s->q[i].w) {
            s->q[i].w = w;
            return &s->q[i];
        }
    return NULL;
}

int vstore_reserve(vstore *s, const vstore_limits *l, struct worker *w, size_t bytes, spmv_error *err)
{
    int64_t max_count = atomic_load(&l->max_count), max_bytes = atomic_load(&l->max_bytes);
    pthread_mutex_lock(&s->lock);
    quota *q = slot(s, w);
    int rc = SPMV_OK;
    if (!q)
        rc = spmv_error_set(err, SPMV_ERR_LIMIT, 0, "no room to account vectors on %s", w->name);
    else if ((int64_t)q->count + 1 > max_count)
        rc = spmv_error_set(err, SPMV_ERR_LIMIT, 0,
                            "%s holds %zu vectors, the most max_vectors (%lld) allows; delete some or wait for "
                            "idle ones to expire", w->name, q->count, (long long)max_count);
    else if ((int64_t)(q->bytes + bytes) > max_bytes || q->bytes + bytes < q->bytes)
        rc = spmv_error_set(err, SPMV_ERR_LIMIT, 0,
                            "a vector of %zu bytes on %s would bring its vectors to %zu bytes, over max_vector_bytes "
                            "(%lld)", bytes, w->name, q->bytes + bytes, (long long)max_bytes);
    else {
        q->count++;
        q->bytes += bytes;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

void vstore_unreserve(vstore *s, struct worker *w, size_t bytes)
{
    pthread_mutex_lock(&s->lock);
    quota *q = slot(s, w);
    if (q) {
        q->count = q->count ? q->count - 1 : 0;
        q->bytes = q->bytes >= bytes ? q->bytes - bytes : 0;
    }
    pthread_mutex_unlock(&s->lock);
}

rvec *rvec_new(vstore *s, struct worker *w, const spmv_vec *v, const char *like)
{
    rvec *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    store_new_id(r->id);
    snprintf(r->like, sizeof r->like, "%s", like ? like : "");
    r->v = *v;
    r->w = w;
    r->store = s;
    r->bytes = spmv_vec_bytes(v);
    r->created_ms = spmv_now_ms();
    r->created_wall = (long long)time(NULL);
    atomic_store(&r->last_used_ms, (long long)r->created_ms);
    atomic_store(&r->refs, 1);
    return r;
}

rvec *rvec_ref(rvec *r)
{
    atomic_fetch_add(&r->refs, 1);
    return r;
}

void rvec_unref(rvec *r)
{
    if (!r || atomic_fetch_sub(&r->refs, 1) != 1)
        return;
    if (r->v.data && r->w)
        r->w->ops->vec_release(r->w, &r->v);
    if (r->dist && r->w)
        r->w->ops->dist_release(r->w, r->dist);
    if (r->store)
        vstore_unreserve(r->store, r->w, r->bytes);
    free(r);
}

void vstore_insert(vstore *s, rvec *r)
{
    rvec_ref(r);
    pthread_mutex_lock(&s->lock);
    r->listed = true;
    r->next = s->head;
    s->head = r;
    pthread_mutex_unlock(&s->lock);
}

rvec *vstore_get(vstore *s, const char *id)
{
    rvec *found = NULL;
    pthread_mutex_lock(&s->lock);
    for (rvec *r = s->head; r; r = r->next)
        if (strcmp(r->id, id) == 0) {
            found = rvec_ref(r);
            atomic_store(&r->last_used_ms, (long long)spmv_now_ms());
            break;
        }
    pthread_mutex_unlock(&s->lock);
    return found;
}

/* Unlinks r from the list; under the lock. */
static void unlink_locked(vstore *s, rvec *r)
{
    for (rvec **p = &s->head; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            r->next = NULL;
            r->listed = false;
            return;
        }
}

int vstore_remove(vstore *s, const char *id, spmv_error *err)
{
    rvec *found = NULL;
    pthread_mutex_lock(&s->lock);
    for (rvec *r = s->head; r; r = r->next)
        if (strcmp(r->id, id) == 0) {
            found = r;
            unlink_locked(s, r);
            break;
        }
    pthread_mutex_unlock(&s->lock);
    if (!found)
        return spmv_error_set(err, SPMV_ERR_NOT_FOUND, 0, "no vector %s (deleted, expired or never created)", id);
    rvec_unref(found); /* the registry's reference */
    return SPMV_OK;
}

size_t vstore_sweep(vstore *s, double ttl_s)
{
    rvec *dead = NULL;
    double now = spmv_now_ms();
    pthread_mutex_lock(&s->lock);
    for (rvec **p = &s->head; *p;) {
        rvec *r = *p;
        /* a vector a task holds is in use, not idle */
        bool idle = atomic_load(&r->refs) == 1 && now - (double)atomic_load(&r->last_used_ms) > ttl_s * 1000.0;
        if (idle) {
            *p = r->next;
            r->listed = false;
            r->next = dead;
            dead = r;
        } else
            p = &r->next;
    }
    pthread_mutex_unlock(&s->lock);
    size_t n = 0;
    while (dead) {
        rvec *next = dead->next;
        dead->next = NULL;
        rvec_unref(dead);
        dead = next;
        n++;
    }
    return n;
}

int vstore_list(vstore *s, rvec ***out, size_t *n)
{
    pthread_mutex_lock(&s->lock);
    size_t count = 0;
    for (rvec *r = s->head; r; r = r->next)
        count++;
    rvec **list = calloc(count ? count : 1, sizeof *list);
    if (!list) {
        pthread_mutex_unlock(&s->lock);
        return SPMV_ERR_NOMEM;
    }
    size_t i = count;
    for (rvec *r = s->head; r; r = r->next) /* newest first in the list: oldest first out */
        list[--i] = rvec_ref(r);
    pthread_mutex_unlock(&s->lock);
    *out = list;
    *n = count;
    return SPMV_OK;
}

void vstore_list_free(rvec **list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        rvec_unref(list[i]);
    free(list);
}

void vstore_usage(vstore *s, const struct worker *w, size_t *count, size_t *bytes)
{
    *count = *bytes = 0;
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < MAX_OWNERS; i++)
        if (s->q[i].w == w) {
            *count = s->q[i].count;
            *bytes = s->q[i].bytes;
        }
    pthread_mutex_unlock(&s->lock);
}

json_t *rvec_json(const rvec *r, double ttl_s)
{
    char created[32];
    time_t t = (time_t)r->created_wall;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);
    double idle = (spmv_now_ms() - (double)atomic_load(&r->last_used_ms)) / 1000.0;
    json_t *o = json_pack("{s:s, s:I, s:i, s:s, s:s, s:I, s:s, s:f, s:f}", "id", r->id, "n", (json_int_t)r->v.n,
                          "k", r->v.k, "dtype", spmv_dtype_name(r->v.dtype), "device", r->w ? r->w->name : "?",
                          "bytes", (json_int_t)r->bytes, "created", created, "idle_s", idle, "expires_in_s",
                          ttl_s - idle > 0 ? ttl_s - idle : 0.0);
    if (o && r->like[0])
        json_object_set_new(o, "like", json_string(r->like));
    if (o && r->dist) { /* where each rank's slice is */
        json_t *devs = json_array();
        for (int p = 0; p < cluster_vec_nranks(r->dist); p++)
            json_array_append_new(devs, json_string(cluster_vec_device(r->dist, p)));
        json_object_set_new(o, "distributed", json_pack("{s:i, s:s, s:o}", "ranks", cluster_vec_nranks(r->dist),
                                                        "side", cluster_vec_side(r->dist), "devices", devs));
    }
    return o;
}
