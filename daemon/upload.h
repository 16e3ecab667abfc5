/* upload.h — a new matrix's way into the daemon: read, built, placed, stored.
 *
 * The API streams POST /v1/matrices (api/upload.c): the HTTP thread only
 * writes the file's bytes to a spool file (upload_spool_write) and decodes
 * the options (upload_spec) or a generator's recipe. Everything heavy then
 * runs on an upload worker (d->loaders), one task, `ingest`:
 *
 *   upload_ingest_run  an upload worker's thread, in this order:
 *     upload_read      the spool read: a Matrix Market file's entries
 *                      (COO) or an .npz's CSR, its declared sizes admitted
 *                      first (upload_admit: max_matrix_bytes, the host's
 *                      available memory); or upload_generate, a generated
 *                      matrix's CSR, bounded by max_rows, max_nnz,
 *                      max_matrix_bytes and the host's available memory;
 *     upload_build     the host CSR in the asked dtype, the sharding by
 *                      configuration, the matrix;
 *     upload_place     where it goes (the host, a GPU, the ranks) and so
 *                      which worker loads it;
 *     upload_store     a host matrix's file written, listed; or the load
 *                      submitted to the device's worker (`base`), and the
 *                      file staged meanwhile:
 *
 *   upload_load_run    the device worker's thread: the host CSR copied to
 *                      its GPU, or cut into shards sent to the ranks;
 *   upload_stage       the upload worker, meanwhile: the file written under
 *                      a temporary name;
 *   upload_load_done   the load's finish (any thread): a failed load stops
 *                      the write early;
 *   upload_commit      HTTP thread, once both tasks finished (`pending`): a
 *                      failed load wins, then a failed write; else the file
 *                      gets its name and the matrix is listed.
 *
 * `phase` and ingest_rc say how far the ingest got and what failed there,
 * so the API answers each failure as it did when these steps ran on it.
 *
 * upload_release frees what was not kept: the entries, a staged file, a
 * matrix never listed (its device copy with it).
 */
#ifndef SPMVD_UPLOAD_H
#define SPMVD_UPLOAD_H

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon/store.h"
#include "daemon/worker.h"

struct spmvd;

/* What an upload does when a matrix of its name is stored already: store
 * another (new), answer the stored one when its content (sha256) and dtype
 * are the same (reuse), or store this one and delete every other of the
 * name (replace). */
typedef enum upload_if_exists { UPLOAD_NEW, UPLOAD_REUSE, UPLOAD_REPLACE } upload_if_exists;

/* What the request asks for, decoded by the API. */
typedef struct upload_spec {
    const char *name;  /* the matrix's name; read by upload_build */
    spmv_dtype dtype;
    bool mixed;        /* dtype "mixed": float64 held, values rounded to float32 */
    unsigned formats;  /* host formats to build (CSR always) */
    int32_t hack_size;
    int device;        /* -1: the host, -2: the GPU with most free memory, else a GPU index */
    bool shard;        /* across the ranks of the MPI job */
    bool placed;       /* `shard` or `device` was given, whatever its value: no sharding by configuration */
    bool offsets64;    /* 64-bit row offsets whatever the size (nnz past INT32_MAX has them anyway) */
    upload_if_exists if_exists;
} upload_spec;

/* How far the ingest got (upload_ingest_run); with ingest_rc, what failed. */
typedef enum upload_phase {
    UPLOAD_QUEUED,              /* never ran: the daemon stopped first */
    UPLOAD_READ,                /* reading the spooled file */
    UPLOAD_BUILD,               /* generating, building the matrix */
    UPLOAD_STORE,               /* a host matrix: stored (the answer is 201 once ingest_rc is 0) */
    UPLOAD_SUBMIT,              /* the load refused by the device's queue (ingest_rc its status) */
    UPLOAD_LOAD,                /* the load submitted, the file staged: upload_commit decides */
} upload_phase;

typedef struct upload {
    task base;                  /* the load (upload_load_run) on w */
    task ingest;                /* read, build, place (upload_ingest_run) on an upload worker */
    struct spmvd *d;
    upload_spec spec;
    /* the body, spooled by the HTTP thread: in memory while it fits
     * UPLOAD_MEMORY_BYTES, then in a file */
    char *head;
    size_t head_len, head_cap;
    int spool_fd;               /* -1: none (the body is in head) */
    char spool_path[PATH_MAX];
    uint64_t spooled;           /* bytes written */
    bool generate;              /* no body: u->recipe is built */
    /* the ingest's outcome */
    upload_phase phase;
    int ingest_rc;
    spmv_error ingest_err;
    matrix *reused;             /* if_exists=reuse: the stored matrix of the same name and content (referenced) */
    atomic_int pending;         /* tasks (ingest, load) whose finish has not come */
    /* the entries, as the API parsed them */
    spmv_coo coo;               /* a Matrix Market file's (from_coo), until the CSR is built */
    bool from_coo;
    spmv_csr csr;               /* an .npz's (float64) or a generated one; then the matrix's, moved into m */
    spmv_mm_symmetry symmetry;
    bool generated;             /* built by formula: csr in its dtype, the file keeps the recipe */
    spmv_gen_spec recipe;
    double parse_ms;
    /* the daemon's */
    matrix *m;
    worker *w;                  /* the worker that loads m (a GPU's, the cluster's); NULL: the host */
    bool shard_gpu;             /* sharded onto the ranks' GPUs */
    matfile_meta meta;          /* m's header as the load began: what upload_stage writes */
    int rc;                     /* the load, with err */
    spmv_error err;
    atomic_bool load_failed;    /* set by upload_load_done: the write stops early */
    int64_t mem_held;           /* host bytes reserved for the reading (daemon/memory.h) */
    store_staged staged;        /* the file, written while the load runs */
    int store_rc;
    spmv_error store_err;
} upload;

void upload_init(upload *u, struct spmvd *d);
/* HTTP thread: the body's next bytes appended to the spool: memory up to
 * UPLOAD_MEMORY_BYTES, then a file in the state directory (.upload-*.tmp,
 * which a restart removes). SPMV_ERR_IO with err saying why. */
#define UPLOAD_MEMORY_BYTES (256 * 1024)
int upload_spool_write(upload *u, const void *data, size_t size, spmv_error *err);
/* The task body (u->ingest.run) on an upload worker: reads the spool (or
 * generates), builds, places; stores a host matrix, or submits the load
 * (u->base, its finish set by the caller) to the device's worker and
 * stages the file meanwhile. u->phase and u->ingest_rc say how it went. */
void upload_ingest_run(task *t, worker *w);
/* The spooled file's entries: u->coo (Matrix Market) or u->csr (.npz). */
int upload_read(upload *u, worker *w, spmv_error *err);
/* The reader's options for u's file (Matrix Market or .npz): max_rows,
 * max_nnz, and upload_admit as the hook on the declared sizes. */
void upload_reader_options(upload *u, spmv_mm_options *o);
/* A file's declared sizes, before anything is allocated from them: its
 * CSR within max_matrix_bytes, the reading's peak reserved against the
 * host's memory (held until upload_release). SPMV_ERR_LIMIT names the
 * bound and the numbers. Any thread. */
int upload_admit(upload *u, const spmv_mm_declared *dcl, spmv_error *err);
/* u->recipe (defaults applied) counted, admitted as a file is, then built
 * into u->csr in u->spec.dtype; past max_rows, max_nnz, max_matrix_bytes
 * or the host's memory SPMV_ERR_LIMIT, the message saying which bound and
 * the numbers. */
int upload_generate(upload *u, spmv_error *err);
/* u->m from the entries, in u->spec.dtype (and offsets), with the host
 * formats asked for when it stays on the host. Sets spec.shard when the
 * configuration shards it (shard_nnz, shard_when_full). */
int upload_build(upload *u, spmv_error *err);
/* Where m goes: NULL for the host (then upload_store), else the worker
 * to submit the load to (u->w), m's device set in its header. */
worker *upload_place(upload *u);
/* if_exists=reuse: a referenced stored matrix of m's name, content hash
 * and dtype, or NULL (then m is stored as usual). */
matrix *upload_reusable(upload *u);
/* if_exists=replace, once m is stored: every other matrix of its name
 * deleted; how many. */
size_t upload_replace(upload *u);
/* A host matrix: the file written, the matrix listed. */
int upload_store(upload *u, spmv_error *err);
/* The task body (u->base.run) on u->w's thread. */
void upload_load_run(task *t, worker *w);
/* From the task's finish, with its status (not 0: it never ran). */
void upload_load_done(upload *u, int status);
/* On the upload worker while the load runs: the file under a temporary name. */
void upload_stage(upload *u);
/* Once the load and the stage are done: the load's status (a failed load,
 * its staged file removed), the write's, or the commit's. */
int upload_commit(upload *u, spmv_error *err);
void upload_release(upload *u);

#endif
