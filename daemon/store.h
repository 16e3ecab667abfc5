/* store.h — the matrices the daemon holds, in memory and on disk.
 *
 * A `matrix` is one uploaded matrix: its descriptor fields, the host CSR
 * (always: persistence and CPU kernels need it) plus host formats built on
 * demand, and optionally a copy resident on one GPU, owned by that GPU's
 * worker (`dev` is the worker's opaque handle). Matrices are reference
 * counted: a request or task holds a reference while it uses one, so a
 * DELETE during a running spmv frees the memory only when the spmv is done.
 *
 * The store is the list of live matrices plus the state directory: insert
 * writes the file durably first (or stage, then commit, for an upload that
 * overlaps the write with its device copy), remove unlinks it, reload
 * reads every file back at start and moves damaged ones to
 * <state_dir>/damaged/.
 */
#ifndef SPMVD_STORE_H
#define SPMVD_STORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "daemon/matfile.h"
#include "spmv.h"

struct worker;

/* The `auto` kernel's choice for a matrix (daemon/autotune.c). */
typedef struct matrix_tuning {
    bool valid;
    const spmv_kernel *kernel;
    spmv_params params;
    double median_ms, cost_ms;  /* the winner's median; wall time tuning took */
    int32_t runs, timed, candidates;
    bool budget_hit;
    const char *source;         /* "tuned" (this call), "stored" (side file), "cached" */
    unsigned deferred;          /* packed formats left out of the candidates (daemon/payback.c's policy) */
} matrix_tuning;

typedef struct matrix {
    matfile_meta meta;          /* id, name, symmetry, options, timings */
    pthread_mutex_t lock;       /* guards host.formats and the formats built on demand */
    spmv_matrix host;
    struct worker *dev_worker;  /* NULL: held on the host only */
    void *dev;                  /* device copy, opaque outside the worker (spmv_gpu_matrix_usage reads it live) */
    uint64_t host_use[SPMV_FORMAT_COUNT];       /* when each host format was last read (LRU of the host format cache), under `lock` */
    int host_busy[SPMV_FORMAT_COUNT];           /* CPU kernels reading each host format now (never evicted then), under `lock` */
    matrix_tuning tuned;        /* `auto`'s choice, under `lock` */
    matrix_tuning tuned_k[8];   /* `auto`'s choices for k > 1 columns (kernel NULL: free), under `lock` */
    int32_t tuned_k_cols[8];
    atomic_bool values_changing; /* a PUT .../values is under way (daemon/values.c): one at a time */
    _Atomic unsigned values_gen; /* odd while the host values change: readers outside the worker retry */
    spmv_matrix *host_t;        /* Aᵀ on the host, built on first use of op "t" by a CPU kernel, under `lock`; in
                                 * the host format cache (host_format_bytes) like a format built on demand */
    uint64_t host_t_use;        /* when host_t was last read (the cache's LRU), under `lock` */
    int host_t_busy;            /* CPU kernels reading host_t now (never evicted then), under `lock` */
    struct worker *shard_worker; /* the cluster worker (daemon/worker_cluster.c) when sharded, else NULL */
    struct rprecond *preconds;  /* its resident preconditioners (daemon/preconds.c), under `lock` */
    void *shards;               /* its shards across the MPI ranks (a cluster_matrix), opaque outside it */
    _Atomic int refs;
    struct matrix *next;        /* store list */
    _Atomic uint64_t products;  /* products run on it since the daemon started, tuning's not counted (payback.c) */
    double best_ms[2][SPMV_FORMAT_COUNT]; /* best median of a one-column product by a kernel reading each format:
                                           * [0] on the host, [1] on its GPU (0: none yet), under `lock` */
    _Atomic int32_t block_size; /* PBSR's b for the host CSR (spmv_csr_block_size; the pattern never changes): 0 not
                                 * looked for yet, -1 no complete blocks (matrix_formats_fit) */
} matrix;

typedef struct store store;

/* Creates state_dir (and damaged/) if missing and takes an exclusive lock
 * on it, so two daemons never share one directory. */
int store_open(const char *state_dir, store **out, spmv_error *err);
void store_close(store *s);
const char *store_dir(const store *s);

/* A fresh matrix with one reference, its host matrix taking ownership of
 * *csr (zeroed), and the other host formats in `formats` built (pinned);
 * one the padding rule `lim` refuses is skipped. The content hash is
 * computed unless meta has it. */
int matrix_new_from_csr(const matfile_meta *meta, spmv_csr *csr, unsigned formats, const spmv_format_limits *lim,
                        matrix **out, spmv_error *err);
matrix *matrix_ref(matrix *m);
/* Drops a reference; the last one frees host memory and hands the device
 * copy back to its worker. */
void matrix_unref(matrix *m);
/* Host bytes of all formats held, and of the transpose. */
size_t matrix_host_bytes(matrix *m);
/* Whether m equals its transpose exactly (found at upload and at every
 * change of values: spmv_csr_symmetric); op t then runs as op n. Takes
 * m->lock. */
bool matrix_symmetric(matrix *m);
/* The formats whose structure can hold m at all: every one but SPSELL
 * when m is not exactly symmetric (matrix_symmetric) and PBSR when its
 * non-zeros do not come in complete b x b blocks (spmv_csr_block_size,
 * looked for once, on the first call). The padding rule and the memory
 * limits are not asked. */
unsigned matrix_formats_fit(matrix *m);
/* Frees the host transpose unless a kernel reads it; its bytes (0: none
 * or busy). Under m->lock. */
size_t matrix_drop_transpose(matrix *m);
/* What m holds on its GPU, per format (zeros when it is on none), and in
 * all: the API reads a matrix's device memory through these. */
void matrix_device_usage(const matrix *m, spmv_gpu_usage *u);
size_t matrix_device_bytes(const matrix *m);
/* The dtype the upload asked for: "mixed" (float32 values, float64
 * operands) or the host dtype's name. */
const char *matrix_dtype_name(const matrix *m);
/* Host formats never evicted: CSR, and for a host matrix the formats its
 * upload asked for. */
unsigned matrix_host_pinned(const matrix *m);
/* Host bytes of the derived formats held that are not pinned, and of the
 * transpose (the host format cache, daemon/worker_cpu.c). */
size_t matrix_host_cache_bytes(matrix *m);

/* Writes the file (timing it into meta.store_ms), then lists the matrix.
 * The store takes its own reference. */
int store_insert(store *s, matrix *m, spmv_error *err);

/* store_insert in two halves, for an upload whose device copy is made
 * meanwhile: store_stage writes the file durably under a temporary name
 * from meta and csr as given (the slow part; m's own meta may be changing
 * on a worker meanwhile, so the caller passes a copy); store_commit gives
 * the file its name with m's header as it is then (the device's timings
 * in) and lists m; store_discard removes a staged file that will not be
 * committed. `abandon` (NULL: never), once set by another thread, stops a
 * stage early (the load failed: the file will not be wanted; see
 * matfile_stage). meta.store_ms gets the time of both halves, the wait
 * between them left out. */
typedef struct store_staged {
    matfile_staged file;
    bool pending;              /* staged, neither committed nor discarded */
    double ms;                 /* the stage's time */
} store_staged;

int store_stage(store *s, const matfile_meta *meta, const spmv_csr *csr, const atomic_bool *abandon,
                store_staged *st, spmv_error *err);
int store_commit(store *s, matrix *m, store_staged *st, spmv_error *err);
void store_discard(store_staged *st);
/* A referenced matrix, or NULL. */
matrix *store_get(store *s, const char *id);
/* How many matrices are named `name` (or, with ext and when none is,
 * `name` and a matrix file's extension: .mtx, .mtx.gz, .npz); the first
 * `max` of them (oldest first) referenced into out. */
size_t store_named(store *s, const char *name, bool ext, matrix **out, size_t max);
/* Unlinks the file and drops the store's reference. SPMV_ERR_NOT_FOUND if
 * absent. */
int store_remove(store *s, const char *id, spmv_error *err);
/* A referenced snapshot, oldest first; free with store_list_free. */
int store_list(store *s, matrix ***out, size_t *n);
void store_list_free(matrix **list, size_t n);
size_t store_count(store *s);

/* GET with Accept: application/x-npz: m's CSR as SciPy's .npz (members
 * stored, not deflated) in an unlinked temporary file of the state
 * directory, read back from *fd (its size in *size). Values that change
 * meanwhile (PUT .../values) make it write again; SPMV_ERR_UNAVAILABLE
 * after a few tries. */
int store_export_npz(store *s, matrix *m, int *fd, uint64_t *size, spmv_error *err);

/* Reload at start. For each <id>.csr file: read and verify it; a damaged
 * one is moved to damaged/ with a log line; one `admit` refuses (NULL:
 * none; matfile_read) is skipped with a log line and kept, nothing of it
 * allocated; a good one is handed to `load`
 * (which builds the matrix, puts it on its device and lists it with
 * store_adopt). `progress` is called after each file (done, total). Returns
 * the number of files loaded. */
typedef int (*store_load_fn)(void *ctx, const matfile_meta *meta, spmv_csr *csr, spmv_error *err);
typedef void (*store_progress_fn)(void *ctx, size_t done, size_t total);
size_t store_reload(store *s, matfile_admit_fn admit, store_load_fn load, store_progress_fn progress, void *ctx);
/* Lists an already stored matrix (reload) without writing its file. */
void store_adopt(store *s, matrix *m);

/* Ids: fresh random UUIDs (lower-case text), and a strict check of one
 * read from a URL. */
void store_new_id(char out[MATFILE_ID_LEN + 1]);
bool store_id_valid(const char *text);

#endif
