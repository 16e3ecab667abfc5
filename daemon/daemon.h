/* daemon.h — the daemon as one object, passed to everything that needs it.
 *
 * `spmvd` owns the configuration, the runtime limits (which SIGHUP may
 * change), the store, the workers (one CPU, one per GPU), the job registry
 * and the metrics. The API layer receives a pointer to it and reaches the
 * store and queues only through it: there is no other global state.
 */
#ifndef SPMVD_DAEMON_H
#define SPMVD_DAEMON_H

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cluster/cluster.h"
#include "daemon/bufpool.h"
#include "daemon/config.h"
#include "daemon/jobs.h"
#include "daemon/metrics.h"
#include "daemon/store.h"
#include "daemon/worker.h"
#include "daemon/shm.h"
#include "daemon/vectors.h"

/* Limits a request handler reads on every request; SIGHUP swaps them. */
typedef struct spmvd_limits {
    _Atomic int64_t max_upload_bytes, max_body_bytes, max_runs, job_retention, max_request_work;
    _Atomic int64_t max_rows, max_nnz;
    _Atomic int64_t max_matrix_bytes, max_spmspm_nnz, max_job_result_bytes; /* resolved: never 0 */
    _Atomic int64_t max_ops_steps, max_solve_iterations;
    _Atomic int64_t max_padding, max_format_bytes, host_format_bytes; /* the padding rule, the host format cache */
    _Atomic int64_t serial_below;   /* small host work on one thread (spmv_cpu_set_serial_below) */
    _Atomic int64_t allow_shm, max_shm_regions, io_buffer_bytes;
    _Atomic int64_t batch_window_us; /* dynamic batching of products (daemon/batch.c); 0: off */
} spmvd_limits;

typedef struct spmvd {
    spmvd_config cfg;
    spmvd_limits limits;
    char *auth_token;            /* NULL: no authentication */
    size_t auth_token_len;
    store *store;
    job_registry *jobs;
    vstore *vectors;             /* resident vectors (daemon/vectors.c) */
    vstore_limits vlimits;       /* SIGHUP swaps them with the other limits */
    shm_registry *shm;           /* shared-memory regions (daemon/shm.c) */
    bufpool *iobufs;             /* bodies and answers of binary products */
    metrics *metrics;
    worker *cpu;
    worker *loaders[CONFIG_MAX_UPLOAD_WORKERS]; /* upload workers: read, build, store (daemon/upload.c) */
    int nloaders;
    worker *gpus[CONFIG_MAX_DEVICES];
    int ngpus;
    char gpu_reason[256];        /* why there are none, when ngpus is 0 */
    cluster *cluster;            /* the MPI job when started by mpirun (rank 0), else NULL */
    worker *cluster_worker;      /* the one thread that talks MPI (daemon/worker_cluster.c) */
    _Atomic bool ready;          /* store reloaded, workers up */
    _Atomic bool draining;       /* SIGTERM seen: no new work */
    _Atomic int64_t mem_reserved; /* host bytes requests reserved before allocating (daemon/memory.h) */
    _Atomic long open_requests;  /* requests not yet completed */
    double started_ms;
    sigset_t signals;            /* SIGTERM, SIGINT, SIGHUP: blocked in every thread, taken by spmvd_serve */
} spmvd;

void spmvd_limits_from_config(spmvd_limits *l, const spmvd_config *c);
void spmvd_vlimits_from_config(vstore_limits *l, const spmvd_config *c);
/* The padding rule now in force (max_padding, max_format_bytes). */
spmv_format_limits spmvd_format_limits(spmvd *d);

/* The upload worker with the fewest tasks waiting. */
worker *spmvd_upload_worker(spmvd *d);
/* The GPU worker an upload goes to: `want` < 0 picks the one with the most
 * free memory; NULL when there is no GPU (or `want` is not one). */
worker *spmvd_pick_gpu(spmvd *d, int want);
/* The worker named "cpu", "gpu" (the GPU with most free memory), "gpuN"
 * or "N"; NULL with *why set when there is no such device here. */
worker *spmvd_worker_named(spmvd *d, const char *name, const char **why);
/* The worker that runs kernel k on matrix m: the CPU worker for CPU
 * kernels, m's GPU worker for GPU kernels (NULL if m is not on a GPU). */
worker *spmvd_worker_for(spmvd *d, matrix *m, const spmv_kernel *k);
/* Whether kernel k can run in this daemon (build, host, configured
 * devices); *reason says why not. */
bool spmvd_kernel_available(spmvd *d, const spmv_kernel *k, const char **reason);
/* DELETE of a matrix as a task (on an upload worker: the unlink and the
 * directory's fsync are disk work): spmvd_remove_run is its body. */
typedef struct remove_task {
    task base;
    struct spmvd *d;
    char id[MATFILE_ID_LEN + 1];
    int rc;
    spmv_error err;
} remove_task;
void spmvd_remove_run(task *t, worker *w);
/* DELETE of a matrix: its file removed and the store's reference dropped
 * (the ranks forget a sharded one's shard files). SPMV_ERR_NOT_FOUND if
 * there is no such matrix. */
int spmvd_remove_matrix(spmvd *d, const char *id, spmv_error *err);
/* Runs fn(w, arg) on worker w's thread and waits for its result (start-up
 * reload puts matrices on their GPU this way). SPMV_ERR_UNAVAILABLE if the
 * worker is stopping. */
int spmvd_call_on_worker(worker *w, int (*fn)(worker *w, void *arg), void *arg);

/* The daemon's life (daemon/lifecycle.c), called in this order by the
 * program's main around the HTTP server. spmvd_boot: -1 to go on, else the
 * exit status (help, version, --check-config, a bad configuration, a rank
 * other than 0 done). spmvd_open: 0, or -1 logged; spmvd_close frees
 * whatever of it was made. spmvd_serve returns on SIGTERM or SIGINT. */
int spmvd_boot(spmvd *d, int *argc, char ***argv);
int spmvd_open(spmvd *d, const char *const *routes, size_t nroutes);
void spmvd_reload(spmvd *d);
void spmvd_serve(spmvd *d, int argc, char **argv);
void spmvd_drain(spmvd *d);
void spmvd_stop_workers(spmvd *d);
void spmvd_close(spmvd *d);

#endif
