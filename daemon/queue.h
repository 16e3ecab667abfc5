/* queue.h — a bounded FIFO of tasks, one per device worker.
 *
 * HTTP threads push, one worker thread pops. The bound is what turns
 * overload into an honest 503 instead of an ever-growing backlog; internal
 * housekeeping (freeing a matrix's device copy) may push past it with
 * `force`, since refusing it would leak device memory. Closing the queue
 * hands back every task still waiting so the caller can answer them.
 */
#ifndef SPMVD_QUEUE_H
#define SPMVD_QUEUE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

struct worker;

/* One unit of work for a worker. `run` executes on the worker's thread;
 * `finish` always follows exactly once: with status 0 after run, or with
 * SPMV_ERR_UNAVAILABLE when the task was cancelled (shutdown) without
 * running. finish owns the task's memory. */
typedef struct task task;
struct task {
    task *next;
    double enqueued_ms;   /* set by queue_push */
    double queue_ms;      /* time spent waiting, set when the worker takes it */
    void (*run)(task *t, struct worker *w);
    void (*finish)(task *t, int status);
    bool sliced;          /* runs in slices (worker_slice): never run inside another task's slice */
};

typedef struct task_queue {
    pthread_mutex_t lock;
    pthread_cond_t nonempty;
    task *head, *tail;
    size_t depth;
    _Atomic size_t capacity;
    bool closed;
} task_queue;

void queue_init(task_queue *q, size_t capacity);
void queue_destroy(task_queue *q);
/* 0; SPMV_ERR_LIMIT when full (and not forced); SPMV_ERR_UNAVAILABLE when
 * closed. */
int queue_push(task_queue *q, task *t, bool force);
/* The next task, waiting up to timeout_ms; NULL on timeout or when closed
 * and empty (*closed says which). */
task *queue_pop(task_queue *q, int timeout_ms, bool *closed);
/* The first waiting task that is not sliced, taken out of the queue
 * (the others keep their order), or NULL: what a long task runs between
 * two of its slices. */
task *queue_take_short(task_queue *q);
/* Dynamic batching (daemon/batch.c): takes out of the queue, in order,
 * the waiting tasks joins(lead, t) accepts, into out[0..max), waiting for
 * more until the monotonic time until_ms (spmv_now_ms's clock) or until
 * max are taken; returns how many. The others keep their order. */
size_t queue_take_joining(task_queue *q, const task *lead, bool (*joins)(const task *lead, const task *t),
                          task **out, size_t max, double until_ms);
/* Closes the queue; returns the waiting tasks as a list (via ->next). */
task *queue_close(task_queue *q);
size_t queue_depth(task_queue *q);
void queue_set_capacity(task_queue *q, size_t capacity);

#endif
