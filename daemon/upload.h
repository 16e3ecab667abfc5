/* upload.h — a new matrix's way into the daemon: built, placed, stored.
 *
 * The API streams and decodes POST /v1/matrices (api/upload.c): a Matrix
 * Market file's entries (COO), an .npz's CSR or a generator's recipe, and
 * the options (upload_spec), into an `upload`. What follows is the
 * daemon's, in this order:
 *
 *   upload_admit      the reader's hook: declared sizes against
 *                     max_matrix_bytes and the host's available memory;
 *   upload_generate   HTTP thread: a generated matrix's CSR, bounded by
 *                     max_rows, max_nnz, max_matrix_bytes and the host's
 *                     available memory;
 *   upload_build      HTTP thread: the host CSR in the asked dtype, the
 *                     sharding by configuration, the matrix;
 *   upload_place      HTTP thread: where it goes (the host, a GPU, the
 *                     ranks) and so which worker loads it;
 *   upload_store      HTTP thread: a host matrix's file written, listed.
 *
 * A matrix bound for a device goes there as a task: the API submits the
 * upload (its `base`) to the worker upload_place chose, with
 *
 *   upload_load_run   the worker's thread: the host CSR copied to its GPU,
 *                     or cut into shards sent to the ranks;
 *   upload_stage      HTTP thread, meanwhile: the file written under a
 *                     temporary name;
 *   upload_load_done  the task's finish (any thread): a failed load stops
 *                     the write early;
 *   upload_commit     HTTP thread, once both are done: a failed load wins,
 *                     then a failed write; else the file gets its name and
 *                     the matrix is listed.
 *
 * upload_release frees what was not kept: the entries, a staged file, a
 * matrix never listed (its device copy with it).
 */
#ifndef SPMVD_UPLOAD_H
#define SPMVD_UPLOAD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon/store.h"
#include "daemon/worker.h"

struct spmvd;

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
} upload_spec;

typedef struct upload {
    task base;                  /* the load (upload_load_run) on w */
    struct spmvd *d;
    upload_spec spec;
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
/* A host matrix: the file written, the matrix listed. */
int upload_store(upload *u, spmv_error *err);
/* The task body (u->base.run) on u->w's thread. */
void upload_load_run(task *t, worker *w);
/* From the task's finish, with its status (not 0: it never ran). */
void upload_load_done(upload *u, int status);
/* On the HTTP thread while the load runs: the file under a temporary name. */
void upload_stage(upload *u);
/* Once the load and the stage are done: the load's status (a failed load,
 * its staged file removed), the write's, or the commit's. */
int upload_commit(upload *u, spmv_error *err);
void upload_release(upload *u);

#endif
