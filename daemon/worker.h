/* worker.h — the interface every device worker implements.
 *
 * A worker is one thread and its bounded task queue: the CPU worker (OpenMP
 * kernels: running two at once would spoil both timings) and one worker per
 * GPU (the thread that owns the device context, its stream and cuSPARSE
 * handle). Both are the same struct with a different `ops` table, so the
 * API layer queues work for "the matrix's device" without knowing which.
 * The matrix_* and spmv operations run only on the worker's own thread,
 * from inside a task: that is what keeps each GPU context single-threaded.
 */
#ifndef SPMVD_WORKER_H
#define SPMVD_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "daemon/queue.h"
#include "cluster/cluster.h"
#include "daemon/store.h"
#include "spmv.h"

struct spmvd;
typedef struct worker worker;

typedef struct worker_info {
    char name[16];            /* "cpu", "gpu0", ... */
    const char *kind;         /* "cpu" or "gpu" */
    int gpu;                  /* device index, -1 for the CPU */
    bool have_gpu_info;
    spmv_gpu_info gpu_info;   /* last snapshot taken by the worker thread */
    size_t queue_depth;
    unsigned long long tasks_run;
    double busy_ms;
    double queue_wait_ms_sum;
} worker_info;

/* What a timed product (spmv, spmspm) reports of its run: the statistics,
 * the verify error against the reference, the queue wait and the worker
 * it ran on (the last two from run_report_start). */
typedef struct run_report {
    spmv_stats st;
    double max_rel_err;
    double queue_ms;
    char worker_name[16];
} run_report;

/* One kernel run on a worker (worker_run): host arrays x and y of `ncols`
 * columns (swapped for trans), or, when `apply` is set, vectors xv and yv
 * of the worker's device with y = alpha*op(A)*x + beta*y; on the cluster
 * worker the sharded product with operands `io`, its split in `cst`. */
typedef struct worker_run_args {
    matrix *m;
    const spmv_kernel *k;
    const spmv_params *p;
    bool trans;                   /* Aᵀ, built on first use and kept with the matrix */
    int32_t warmup, runs;
    int32_t ncols;                /* host arrays */
    const void *x;
    void *y;
    const spmv_apply_args *apply; /* vectors */
    const spmv_vec *xv;
    spmv_vec *yv;
    double *axpby_ms;
    const cluster_operands *io;   /* the sharded product */
    cluster_spmv_stats *cst;
    spmv_stats *st;               /* out: the timings */
    spmv_error *err;
    const void *const *xs;        /* a batch (worker_run_batch): ncols products' own x and y */
    void *const *ys;
    spmv_batch_times *bt;         /* out: the batch's parts */
    bool tuning;                  /* auto's tuning run: timed, not counted as a product (daemon/payback.h) */
} worker_run_args;

typedef struct worker_ops {
    const char *kind;
    /* Starts the thread; for a GPU, waits until it created its context. */
    int (*start)(worker *w, spmv_error *err);
    /* Queues a task: 0, SPMV_ERR_LIMIT (full) or SPMV_ERR_UNAVAILABLE. */
    int (*submit)(worker *w, task *t, bool force);
    /* Cancels waiting tasks (finish(SPMV_ERR_UNAVAILABLE)), lets the running
     * one finish, joins the thread. */
    void (*stop)(worker *w);
    void (*info)(worker *w, worker_info *out);
    /* On the worker thread: puts m's host CSR on the worker's device (a
     * no-op for the CPU, whose copy is the host's); reads m->host.csr, which
     * no one changes, so another thread may read it meanwhile (the upload
     * writes the matrix file from it). */
    int (*matrix_load)(worker *w, matrix *m, spmv_error *err);
    void (*matrix_release)(worker *w, void *dev);
    /* On the worker thread (the one that runs m's kernels): m's values
     * replaced by val (nnz, in m's dtype, CSR order), host and device;
     * every derived format and transpose dropped, the pinned formats
     * rebuilt. NULL: the worker's matrices take no new values (cluster). */
    int (*matrix_set_values)(worker *w, matrix *m, const void *val, spmv_error *err);
    /* Frees a resident vector's values on the owning thread (any thread
     * may call it; the GPU queues a forced task, the CPU frees at once). */
    void (*vec_release)(worker *w, const spmv_vec *v);
    /* The cluster worker: frees a distributed vector on every rank (a
     * queued, forced task). */
    void (*dist_release)(worker *w, struct cluster_vec *v);
    /* On the worker thread: one kernel run (worker_run). */
    int (*run)(worker *w, const worker_run_args *a);
    /* Thread start/end hooks (the GPU worker creates/frees its context). */
    int (*thread_init)(worker *w, spmv_error *err);
    void (*thread_fini)(worker *w);
    /* Called by the loop between tasks (refreshes the memory snapshot). */
    void (*idle)(worker *w);
} worker_ops;

struct worker {
    const worker_ops *ops;
    char name[16];
    int gpu;                         /* -1 for the CPU worker */
    size_t reserve_bytes;
    struct spmvd *d;
    task_queue queue;
    pthread_t thread;
    bool started;
    _Atomic long long heartbeat_ms;  /* last loop tick: the watchdog checks it */
    _Atomic long long task_started_ms; /* 0 while idle */
    _Atomic long long slice_ms;      /* a sliced task's last slice boundary (worker_slice) */
    bool in_slice;                   /* worker thread only: running short tasks inside a slice */
    _Atomic unsigned long long tasks_run;
    _Atomic long long busy_us, wait_us;
    /* start handshake */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int init_status;                 /* 1 while pending */
    spmv_error init_err;
    /* GPU state, touched by the worker thread; the snapshot under `lock`. */
    void *ctx;
    spmv_gpu_info gpu_info;
    bool have_gpu_info;
};

worker *worker_cpu_new(struct spmvd *d, size_t queue_depth);
/* An upload worker ("upload0", ...): a thread and its queue that runs the
 * uploads' reads and builds, off the HTTP threads and off the devices'
 * workers; it runs no kernel. */
worker *worker_upload_new(struct spmvd *d, int index, size_t queue_depth);
worker *worker_gpu_new(struct spmvd *d, int device, size_t reserve_bytes, size_t queue_depth);
/* The cluster worker (rank 0 under mpirun): the only thread that calls
 * MPI. Its idle loop pings every rank at each idle tick (cluster_heartbeat:
 * a rank silent past cluster_heartbeat_ms fails the cluster); stopping it sends
 * `shutdown` to every rank. */
worker *worker_cluster_new(struct spmvd *d, size_t queue_depth);
/* On the cluster worker's thread: shards m over the ranks (gpu: onto
 * their GPUs), and a sharded product. */
int worker_cluster_load(worker *w, matrix *m, bool gpu, bool reload, spmv_error *err);
int worker_cluster_spmv(worker *w, matrix *m, const spmv_kernel *k, const spmv_params *p, const cluster_operands *io,
                        int32_t warmup, int32_t runs, cluster_spmv_stats *st, spmv_error *err); /* worker_run's wrapper */
/* The job's cluster (rank 0's view), for the distributed vectors' calls
 * made on the cluster worker's thread. */
cluster *worker_cluster_of(worker *w);
bool worker_is_cluster(const worker *w);
void worker_free(worker *w);

/* On w's thread, from the running task `lead`: the tasks waiting in w's
 * queue that joins(lead, t) accepts, taken out into out[0..max) (waiting
 * until until_ms for more, except inside a slice); their queue_ms is set.
 * The lead runs them with itself and ends each with worker_finish_joined
 * (daemon/batch.c). */
size_t worker_join(worker *w, const task *lead, bool (*joins)(const task *lead, const task *t), task **out,
                   size_t max, double until_ms);
void worker_finish_joined(worker *w, task *t);
/* On w's thread as task t starts: its queue wait and w's name into r. */
void run_report_start(run_report *r, const task *t, const worker *w);

/* Shared pieces both implementations use. */
worker *worker_alloc(struct spmvd *d, const worker_ops *ops, const char *name, int gpu, size_t queue_depth);
int worker_generic_start(worker *w, spmv_error *err);
int worker_generic_submit(worker *w, task *t, bool force);
void worker_generic_stop(worker *w);
void worker_generic_info(worker *w, worker_info *out);
/* The entries of a worker_ops that every kind shares: the thread and queue
 * of worker.c (each kind's table names only what is its own). */
#define WORKER_GENERIC_OPS                                                                         \
    .start = worker_generic_start, .submit = worker_generic_submit, .stop = worker_generic_stop,   \
    .info = worker_generic_info

/* A CPU kernel on the host copy, caching a format it builds: the CPU
 * worker's run, which a GPU worker calls for CPU kernels too. */
int worker_host_run(worker *w, const worker_run_args *a);
/* The host matrix (a shallow snapshot) CPU kernel k reads, the format it
 * needs built and cached first (p: its hack_size, may be NULL); the format
 * stays held, never evicted, until worker_cpu_release. */
int worker_cpu_acquire(struct spmvd *d, matrix *m, const spmv_kernel *k, const spmv_params *p, spmv_matrix *snap,
                       spmv_error *err);
void worker_cpu_release(matrix *m, const spmv_kernel *k);
/* Frees the host formats neither pinned nor in `keep` (auto's winner). */
void worker_cpu_trim(matrix *m, unsigned keep);
/* The host half of matrix_set_values (the CPU worker's, and the GPU
 * worker's before its device copy). */
int worker_host_set_values(matrix *m, const void *val, spmv_error *err);
/* Runs one kernel from worker w's thread through its ops table: CPU
 * kernels on the host copy, GPU kernels through w's device, a sharded
 * product on the cluster worker. Records the kernel time in the metrics.
 * The wrappers below fill the arguments for each kind of operand. */
int worker_run(worker *w, const worker_run_args *a);
/* y = A*x with host arrays of one column. */
int worker_run_kernel(worker *w, matrix *m, const spmv_kernel *k, const spmv_params *p,
                      const void *x, void *y, int32_t warmup, int32_t runs,
                      spmv_stats *st, spmv_error *err);
/* y = alpha*op(A)*x + beta*y, x and y resident on w's device (host vectors
 * for CPU kernels, w's GPU for GPU kernels). */
int worker_run_apply(worker *w, matrix *m, const spmv_kernel *k, const spmv_params *p, bool trans,
                     const spmv_apply_args *a, const spmv_vec *x, spmv_vec *y, spmv_stats *st, double *axpby_ms,
                     spmv_error *err);
/* The same for host arrays of k columns (x: k*cols values, y: k*rows;
 * swapped for trans), staged through the device for GPU kernels. */
int worker_run_kernel_k(worker *w, matrix *m, const spmv_kernel *k, const spmv_params *p, bool trans,
                        int32_t ncols, const void *x, void *y, int32_t warmup, int32_t runs, spmv_stats *st,
                        spmv_error *err);
/* Dynamic batching's SpMM on a GPU kernel (daemon/batch.c): y[j] = A*x[j]
 * for j < ncols, each a host array of its own, copied to and from the
 * device one by one, nothing packed on the host (spmv_gpu_run_batch); bt
 * gets the parts of its time. A CPU kernel answers SPMV_ERR_INVALID (the
 * batch packs a block for it and calls worker_run_kernel_k). */
int worker_run_batch(worker *w, matrix *m, const spmv_kernel *k, const spmv_params *p, int32_t ncols,
                     const void *const *x, void *const *y, spmv_stats *st, spmv_batch_times *bt, spmv_error *err);
/* The GPU context of w (NULL for the CPU worker): what spmv_vec_* calls take. */
spmv_gpu_ctx *worker_gpu_ctx(worker *w);
/* C = A*B with SpMSpM kernel k from worker w's thread (worker_spmspm.c):
 * CPU kernels on the host CSRs, GPU kernels on w's device, where A must be
 * resident; B is copied there for the call when it is not. *c gets C. */
int worker_run_spmspm(worker *w, matrix *a, matrix *b, const spmv_kernel *k, const spmv_params *p,
                      int32_t warmup, int32_t runs, spmv_csr *c, spmv_stats *st, spmv_error *err);
/* Runs fn(w, arg) on w's thread as a forced task, without waiting:
 * housekeeping that must happen where the memory belongs (freeing a GPU
 * object). When the worker is stopping, fn(NULL, arg) runs instead, on the
 * caller's thread: it may free host memory only. */
void worker_post(worker *w, void (*fn)(worker *w, void *arg), void *arg);
/* Marks the worker alive (the loop and long tasks call it). */
void worker_heartbeat(worker *w);
/* Whether the worker's loop is healthy: it ticked within stale_ms, or it is
 * inside a task that began, or ended a slice (worker_slice), less than
 * WORKER_TASK_GRACE_MS ago (a kernel with many runs is busy, not stuck; a
 * long task whose slices keep ending is busy however old it is; one slice
 * running ten minutes is stuck). */
#define WORKER_TASK_GRACE_MS (600.0 * 1000.0)
bool worker_alive(worker *w, double stale_ms);
/* On the worker's thread, between two slices of a long task (task.sliced:
 * a step of an ops batch, an iteration of a solve, a kernel of a bench):
 * marks progress for the watchdog, runs the short tasks waiting now (not
 * sliced ones: they keep their place), and returns true when the daemon
 * drains (SIGTERM), so the task stops here. A task with a job checks its
 * cancel beside it. */
bool worker_slice(worker *w);

#endif
