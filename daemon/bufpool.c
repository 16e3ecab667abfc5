/* bufpool.c — reusable host buffers (bufpool.h).
 *
 * An idle list under one mutex, best fit first. Sizes are rounded up to
 * 2 MiB so a vector a few values longer than the last one reuses its
 * buffer. Page-locked allocations go through the engine
 * (spmv_gpu_host_alloc); where the driver refuses, the pool falls back to
 * malloc and says so once.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "daemon/bufpool.h"
#include "daemon/log.h"
#include "spmv.h"

#define ROUND (2u << 20)

struct bufpool {
    pthread_mutex_t lock;
    bufpool_buf *idle;
    size_t idle_bytes, allocated;
    const _Atomic int64_t *max_idle;
    bool pinned;
    bool warned;
};

bufpool *bufpool_new(const _Atomic int64_t *max_idle, bool pinned)
{
    bufpool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    pthread_mutex_init(&p->lock, NULL);
    p->max_idle = max_idle;
    p->pinned = pinned;
    return p;
}

static void release(bufpool_buf *b)
{
    if (b->pinned)
        spmv_gpu_host_free(b->ptr);
    else
        free(b->ptr);
    free(b);
}

void bufpool_free(bufpool *p)
{
    if (!p)
        return;
    for (bufpool_buf *b = p->idle, *next; b; b = next) {
        next = b->next;
        release(b);
    }
    pthread_mutex_destroy(&p->lock);
    free(p);
}

bufpool_buf *bufpool_get(bufpool *p, size_t n)
{
    pthread_mutex_lock(&p->lock);
    bufpool_buf **best = NULL;
    for (bufpool_buf **pp = &p->idle; *pp; pp = &(*pp)->next)
        if ((*pp)->cap >= n && (!best || (*pp)->cap < (*best)->cap))
            best = pp;
    bufpool_buf *b = NULL;
    if (best) {
        b = *best;
        *best = b->next;
        p->idle_bytes -= b->cap;
    }
    pthread_mutex_unlock(&p->lock);
    if (b)
        return b;
    if (!(b = calloc(1, sizeof *b)))
        return NULL;
    b->pool = p;
    b->cap = n > SIZE_MAX - ROUND ? n : (n + ROUND - 1) / ROUND * ROUND;
    spmv_error err = {0};
    if (p->pinned && spmv_gpu_host_alloc(b->cap, &b->ptr, &err) == SPMV_OK)
        b->pinned = true;
    else {
        if (p->pinned && !p->warned) {
            log_warn("io buffers are not page-locked (binary products copy through the driver's staging): %s",
                     err.message);
            p->warned = true;
        }
        b->ptr = malloc(b->cap ? b->cap : 1);
    }
    if (!b->ptr) {
        free(b);
        return NULL;
    }
    pthread_mutex_lock(&p->lock);
    p->allocated++;
    pthread_mutex_unlock(&p->lock);
    return b;
}

void bufpool_put(bufpool_buf *b)
{
    if (!b)
        return;
    bufpool *p = b->pool;
    int64_t max = atomic_load(p->max_idle);
    pthread_mutex_lock(&p->lock);
    bool keep = max > 0 && p->idle_bytes + b->cap <= (size_t)max;
    if (keep) {
        b->next = p->idle;
        p->idle = b;
        p->idle_bytes += b->cap;
    }
    pthread_mutex_unlock(&p->lock);
    if (!keep)
        release(b);
}

void bufpool_stats(bufpool *p, size_t *idle_bytes, size_t *allocated)
{
    pthread_mutex_lock(&p->lock);
    *idle_bytes = p->idle_bytes;
    *allocated = p->allocated;
    pthread_mutex_unlock(&p->lock);
}
