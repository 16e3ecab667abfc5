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
