/* worker.c — what the CPU and GPU workers share: thread, loop, queue.
 *
 * The loop pops a task, runs it, finishes it, and ticks a heartbeat at
 * least every WORKER_TICK_MS even when idle; the main thread sends the
 * systemd watchdog ping only while every worker's heartbeat is fresh, so a
 * worker stuck in a kernel stops the pings.
 *
 * A long task (an ops batch, a solve, a bench: task.sliced) runs in slices
 * (a step, an iteration, a kernel) and calls worker_slice between two: that
 * marks progress, runs the short tasks waiting meanwhile (so a product
 * queued behind a long batch waits one slice, not the batch), and says
 * whether the daemon drains. The watchdog trusts a task for
 * WORKER_TASK_GRACE_MS from its start or its last slice, whichever is
 * later: a long task that progresses is busy however old it is, one slice
 * that runs past the grace is stuck. Start is a handshake: the
 * thread runs the implementation's thread_init (a GPU creates its context
 * there, on the thread that will own it) and reports back before start
 * returns, so a device that cannot be opened is known at start-up.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "daemon/log.h"
#include "daemon/payback.h"
#include "daemon/worker.h"

#define WORKER_TICK_MS 250
#define UPLOAD_WORKER_NICE 10

void worker_heartbeat(worker *w) { atomic_store(&w->heartbeat_ms, (long long)spmv_now_ms()); }

bool worker_alive(worker *w, double stale_ms)
{
    double now = spmv_now_ms();
    long long started = atomic_load(&w->task_started_ms), slice = atomic_load(&w->slice_ms);
    if (started > 0)
        return now - (double)(slice > started ? slice : started) < WORKER_TASK_GRACE_MS;
    return now - (double)atomic_load(&w->heartbeat_ms) < stale_ms;
}

/* Runs t and finishes it; inside a slice (nested) the outer task's start
 * is put back after, and the time counts as the outer task's busy time. */
static void run_one(worker *w, task *t, bool nested)
{
    double t0 = spmv_now_ms();
    long long outer = atomic_load(&w->task_started_ms);
    t->queue_ms = t0 - t->enqueued_ms;
    atomic_store(&w->task_started_ms, (long long)t0);
    atomic_fetch_add(&w->wait_us, (long long)(t->queue_ms * 1000.0));
    if (w->gpu >= 0 && w->ctx && w->d) { /* the padding rule in force now (SIGHUP may change it) */
        spmv_format_limits lim = spmvd_format_limits(w->d);
        lim.host_memory = false; /* the device's conversions check its free memory themselves */
        spmv_gpu_ctx_set_limits(w->ctx, &lim);
    }
    if (w->d) /* this thread's host loops: small work on one thread (SIGHUP may change it) */
        spmv_cpu_set_serial_below(atomic_load(&w->d->limits.serial_below));
    t->run(t, w);
    if (!nested)
        atomic_fetch_add(&w->busy_us, (long long)((spmv_now_ms() - t0) * 1000.0));
    atomic_fetch_add(&w->tasks_run, 1);
    atomic_store(&w->task_started_ms, nested ? outer : 0);
    worker_heartbeat(w);
    t->finish(t, SPMV_OK);
}

size_t worker_join(worker *w, const task *lead, bool (*joins)(const task *lead, const task *t), task **out,
                   size_t max, double until_ms)
{
    /* inside another task's slice: only what waits now, the long task must not wait for a window */
    size_t n = queue_take_joining(&w->queue, lead, joins, out, max, w->in_slice ? 0 : until_ms);
    double now = spmv_now_ms();
    for (size_t i = 0; i < n; i++) {
        out[i]->queue_ms = now - out[i]->enqueued_ms;
        atomic_fetch_add(&w->wait_us, (long long)(out[i]->queue_ms * 1000.0));
    }
    worker_heartbeat(w);
    return n;
}

void worker_finish_joined(worker *w, task *t)
{
    atomic_fetch_add(&w->tasks_run, 1);
    t->finish(t, SPMV_OK);
}

bool worker_slice(worker *w)
{
    bool draining = w->d && atomic_load(&w->d->draining);
    atomic_store(&w->slice_ms, (long long)spmv_now_ms());
    worker_heartbeat(w);
    if (draining || w->in_slice)
        return draining;
    /* only those waiting now: a stream of new ones cannot hold the long task */
    w->in_slice = true;
    for (size_t n = queue_depth(&w->queue); n > 0; n--) {
        task *t = queue_take_short(&w->queue);
        if (!t)
            break;
        run_one(w, t, true);
    }
    w->in_slice = false;
    atomic_store(&w->slice_ms, (long long)spmv_now_ms());
    return w->d && atomic_load(&w->d->draining);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    spmv_error err = {0};
    int rc = w->ops->thread_init ? w->ops->thread_init(w, &err) : SPMV_OK;
    pthread_mutex_lock(&w->lock);
    w->init_status = rc;
    w->init_err = err;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    if (rc != SPMV_OK)
        return NULL;
    for (;;) {
        bool closed;
        worker_heartbeat(w);
        task *t = queue_pop(&w->queue, WORKER_TICK_MS, &closed);
        if (t)
            run_one(w, t, false);
        else if (closed)
            break;
        else if (w->ops->idle)
            w->ops->idle(w);
    }
    if (w->ops->thread_fini)
        w->ops->thread_fini(w);
    return NULL;
}

int worker_generic_start(worker *w, spmv_error *err)
{
    w->init_status = 1;
    worker_heartbeat(w);
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "%s: cannot create the worker thread", w->name);
    pthread_mutex_lock(&w->lock);
    while (w->init_status == 1)
        pthread_cond_wait(&w->cond, &w->lock);
    int rc = w->init_status;
    pthread_mutex_unlock(&w->lock);
    if (rc != SPMV_OK) {
        pthread_join(w->thread, NULL);
        if (err)
            *err = w->init_err;
        return rc;
    }
    w->started = true;
    return SPMV_OK;
}

int worker_generic_submit(worker *w, task *t, bool force)
{
    return queue_push(&w->queue, t, force);
}

void worker_generic_stop(worker *w)
{
    task *t = queue_close(&w->queue);
    while (t) {
        task *next = t->next;
        t->finish(t, SPMV_ERR_UNAVAILABLE);
        t = next;
    }
    if (w->started) {
        pthread_join(w->thread, NULL);
        w->started = false;
    }
}

void run_report_start(run_report *r, const task *t, const worker *w)
{
    r->queue_ms = t->queue_ms;
    snprintf(r->worker_name, sizeof r->worker_name, "%s", w->name);
}

void worker_generic_info(worker *w, worker_info *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", w->name);
    out->kind = w->ops->kind;
    out->gpu = w->gpu;
    out->queue_depth = queue_depth(&w->queue);
    out->tasks_run = atomic_load(&w->tasks_run);
    out->busy_ms = (double)atomic_load(&w->busy_us) / 1000.0;
    out->queue_wait_ms_sum = (double)atomic_load(&w->wait_us) / 1000.0;
    pthread_mutex_lock(&w->lock);
    out->have_gpu_info = w->have_gpu_info;
    out->gpu_info = w->gpu_info;
    pthread_mutex_unlock(&w->lock);
}

worker *worker_alloc(struct spmvd *d, const worker_ops *ops, const char *name, int gpu, size_t queue_depth)
{
    worker *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->ops = ops;
    w->d = d;
    w->gpu = gpu;
    snprintf(w->name, sizeof w->name, "%s", name);
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    queue_init(&w->queue, queue_depth);
    return w;
}

/* An upload worker yields the CPU to the HTTP threads and the devices'
 * workers: a gzip file's parse or a 2^26-row build must not make
 * /v1/health wait for a core (nice 10 for this thread only, as Linux
 * allows per thread). */
static int upload_thread_init(worker *w, spmv_error *err)
{
    (void)err;
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), UPLOAD_WORKER_NICE) != 0)
        log_warn("%s: cannot lower its priority: %s", w->name, strerror(errno));
    return SPMV_OK;
}

static const worker_ops upload_ops = {
    .kind = "upload",
    .thread_init = upload_thread_init,
    WORKER_GENERIC_OPS,
};

worker *worker_upload_new(struct spmvd *d, int index, size_t queue_depth)
{
    char name[16];
    snprintf(name, sizeof name, "upload%d", index);
    return worker_alloc(d, &upload_ops, name, -1, queue_depth);
}

void worker_free(worker *w)
{
    if (!w)
        return;
    queue_destroy(&w->queue);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

spmv_gpu_ctx *worker_gpu_ctx(worker *w) { return w && w->gpu >= 0 ? (spmv_gpu_ctx *)w->ctx : NULL; }

/* What the run tells the matrix's payback (daemon/payback.h): the products
 * it made (warm-ups included, k a block of k columns; none when tuning) and,
 * for one column of op n on host arrays, its median. */
static void note_run(const worker_run_args *a)
{
    int32_t cols = a->apply ? (a->xv ? a->xv->k : 1) : a->ncols;
    uint64_t products = a->tuning ? 0 : (uint64_t)(a->warmup + a->runs) * (uint64_t)(cols > 0 ? cols : 1);
    bool timed = !a->apply && a->ncols == 1 && !a->trans;
    payback_note_run(a->m, a->k, products, timed, a->st->median_ms);
}

int worker_run(worker *w, const worker_run_args *a)
{
    worker_heartbeat(w);
    int rc = w->ops->run ? w->ops->run(w, a)
                         : spmv_error_set(a->err, SPMV_ERR_UNAVAILABLE, 0, "%s runs no kernels", w->name);
    worker_heartbeat(w);
    if (rc == SPMV_OK && w->d && w->d->metrics) /* a sharded auto names what the ranks ran */
        metrics_kernel(w->d->metrics, a->cst ? a->cst->kernel : a->k->name, a->st->mean_ms, a->st->runs);
    if (rc == SPMV_OK && !a->cst && a->m && a->k)
        note_run(a);
    return rc;
}

int worker_run_kernel(worker *w, matrix *m, const spmv_kernel *k, const spmv_params *p, const void *x, void *y,
                      int32_t warmup, int32_t runs, spmv_stats *st, spmv_error *err)
{
    worker_run_args a = {.m = m, .k = k, .p = p, .warmup = warmup, .runs = runs, .ncols = 1, .x = x, .y = y,
                         .st = st, .err = err};
    return worker_run(w, &a);
}

/* op t on a matrix equal to its transpose (matrix_symmetric) runs as op n:
 * no transpose built, the kernel asked for on A itself. */
int worker_run_kernel_k(worker *w, matrix *m, const spmv_kernel *k, const spmv_params *p, bool trans,
                        int32_t ncols, const void *x, void *y, int32_t warmup, int32_t runs, spmv_stats *st,
                        spmv_error *err)
{
    worker_run_args a = {.m = m, .k = k, .p = p, .trans = trans && !matrix_symmetric(m), .warmup = warmup, .runs = runs, .ncols = ncols,
                         .x = x, .y = y, .st = st, .err = err};
    return worker_run(w, &a);
}

int worker_run_batch(worker *w, matrix *m, const spmv_kernel *k, const spmv_params *p, int32_t ncols,
                     const void *const *x, void *const *y, spmv_stats *st, spmv_batch_times *bt, spmv_error *err)
{
    worker_run_args a = {.m = m, .k = k, .p = p, .runs = 1, .ncols = ncols, .xs = x, .ys = y, .bt = bt, .st = st,
                         .err = err};
    return worker_run(w, &a);
}

int worker_run_apply(worker *w, matrix *m, const spmv_kernel *k, const spmv_params *p, bool trans,
                     const spmv_apply_args *apply, const spmv_vec *x, spmv_vec *y, spmv_stats *st, double *axpby_ms,
                     spmv_error *err)
{
    worker_run_args a = {.m = m, .k = k, .p = p, .trans = trans && !matrix_symmetric(m), .warmup = apply->warmup,
                         .runs = apply->runs,
                         .apply = apply, .xv = x, .yv = y, .axpby_ms = axpby_ms, .st = st, .err = err};
    return worker_run(w, &a);
}

int worker_cluster_spmv(worker *w, matrix *m, const spmv_kernel *k, const spmv_params *p, const cluster_operands *io,
                        int32_t warmup, int32_t runs, cluster_spmv_stats *st, spmv_error *err)
{
    worker_run_args a = {.m = m, .k = k, .p = p, .warmup = warmup, .runs = runs, .io = io, .cst = st,
                         .st = &st->st, .err = err};
    return worker_run(w, &a);
}

/* ------------------------------------------------------- housekeeping */

typedef struct post_task {
    task base;
    void (*fn)(worker *w, void *arg);
    void *arg;
} post_task;

static void post_run(task *t, worker *w)
{
    post_task *p = (post_task *)t;
    p->fn(w, p->arg);
}

static void post_finish(task *t, int status)
{
    post_task *p = (post_task *)t;
    if (status != SPMV_OK) /* the worker stopped first: fn learns it, and frees host memory only */
        p->fn(NULL, p->arg);
    free(p);
}

void worker_post(worker *w, void (*fn)(worker *w, void *arg), void *arg)
{
    post_task *p = calloc(1, sizeof *p);
    if (!p) {
        log_error("%s: out of memory queueing housekeeping; its memory leaks until shutdown", w->name);
        return;
    }
    p->base.run = post_run;
    p->base.finish = post_finish;
    p->fn = fn;
    p->arg = arg;
    if (queue_push(&w->queue, &p->base, true) != SPMV_OK)
        post_finish(&p->base, SPMV_ERR_UNAVAILABLE);
}
