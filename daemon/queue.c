/* queue.c — the bounded task FIFO between HTTP threads and a worker.
 *
 * A mutex and one condition variable; the worker waits with a timeout so
 * its loop also ticks when idle (watchdog heartbeats). The capacity is
 * atomic because SIGHUP may change queue_depth while requests push.
 */
#include <errno.h>
#include <time.h>

#include "daemon/queue.h"
#include "spmv.h"

void queue_init(task_queue *q, size_t capacity)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->nonempty, &attr);
    pthread_condattr_destroy(&attr);
    q->head = q->tail = NULL;
    q->depth = 0;
    atomic_store(&q->capacity, capacity);
    q->closed = false;
}

void queue_destroy(task_queue *q)
{
    pthread_cond_destroy(&q->nonempty);
    pthread_mutex_destroy(&q->lock);
}

int queue_push(task_queue *q, task *t, bool force)
{
    int rc = SPMV_OK;
    pthread_mutex_lock(&q->lock);
    if (q->closed)
        rc = SPMV_ERR_UNAVAILABLE;
    else if (!force && q->depth >= atomic_load(&q->capacity))
        rc = SPMV_ERR_LIMIT;
    else {
        t->next = NULL;
        t->enqueued_ms = spmv_now_ms();
        if (q->tail)
            q->tail->next = t;
        else
            q->head = t;
        q->tail = t;
        q->depth++;
        pthread_cond_signal(&q->nonempty);
    }
    pthread_mutex_unlock(&q->lock);
    return rc;
}

task *queue_pop(task_queue *q, int timeout_ms, bool *closed)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&q->lock);
    while (!q->head && !q->closed) {
        if (pthread_cond_timedwait(&q->nonempty, &q->lock, &until) == ETIMEDOUT)
            break;
    }
    task *t = q->head;
    if (t) {
        q->head = t->next;
        if (!q->head)
            q->tail = NULL;
        q->depth--;
        t->next = NULL;
    }
    *closed = q->closed;
    pthread_mutex_unlock(&q->lock);
    return t;
}

task *queue_take_short(task_queue *q)
{
    pthread_mutex_lock(&q->lock);
    task *prev = NULL, *t = q->head;
    while (t && t->sliced) {
        prev = t;
        t = t->next;
    }
    if (t) {
        if (prev)
            prev->next = t->next;
        else
            q->head = t->next;
        if (q->tail == t)
            q->tail = prev;
        q->depth--;
        t->next = NULL;
    }
    pthread_mutex_unlock(&q->lock);
    return t;
}

/* Unlinks from the list the waiting tasks `joins` accepts, in order, into
 * out[*n..max). Under q->lock. */
static void take_joining(task_queue *q, const task *lead, bool (*joins)(const task *, const task *), task **out,
                         size_t max, size_t *n)
{
    task *prev = NULL, *t = q->head;
    while (t && *n < max) {
        task *next = t->next;
        if (joins(lead, t)) {
            if (prev)
                prev->next = next;
            else
                q->head = next;
            if (q->tail == t)
                q->tail = prev;
            q->depth--;
            t->next = NULL;
            out[(*n)++] = t;
        } else
            prev = t;
        t = next;
    }
}

size_t queue_take_joining(task_queue *q, const task *lead, bool (*joins)(const task *, const task *), task **out,
                          size_t max, double until_ms)
{
    size_t n = 0;
    struct timespec now, until;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double wait_ms = until_ms - spmv_now_ms();
    long long ns = wait_ms > 0 ? (long long)(wait_ms * 1e6) : 0;
    until.tv_sec = now.tv_sec + (time_t)(ns / 1000000000LL);
    until.tv_nsec = now.tv_nsec + (long)(ns % 1000000000LL);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&q->lock);
    for (;;) {
        take_joining(q, lead, joins, out, max, &n);
        if (n >= max || q->closed || ns == 0 ||
            pthread_cond_timedwait(&q->nonempty, &q->lock, &until) == ETIMEDOUT) {
            take_joining(q, lead, joins, out, max, &n); /* what came with the timeout */
            break;
        }
    }
    pthread_mutex_unlock(&q->lock);
    return n;
}

task *queue_close(task_queue *q)
{
    pthread_mutex_lock(&q->lock);
    q->closed = true;
    task *list = q->head;
    q->head = q->tail = NULL;
    q->depth = 0;
    pthread_cond_broadcast(&q->nonempty);
    pthread_mutex_unlock(&q->lock);
    return list;
}

size_t queue_depth(task_queue *q)
{
    pthread_mutex_lock(&q->lock);
    size_t d = q->depth;
    pthread_mutex_unlock(&q->lock);
    return d;
}

void queue_set_capacity(task_queue *q, size_t capacity) { atomic_store(&q->capacity, capacity); }
