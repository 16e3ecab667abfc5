/* cluster.h — one matrix across the ranks of an MPI job (issue 16).
 *
 * `mpirun -np N spmvd` runs one spmvd per rank: rank 0 serves HTTP as a
 * single daemon does, the other ranks run cluster_rank_loop() and take
 * ordered commands from rank 0 (load a shard, multiply, solve, free,
 * ping, shutdown), so every rank sees collective work in the same order. A
 * sharded matrix is split into row blocks with their non-zeros balanced
 * across the ranks, as PETSc's MPIAIJ, Ginkgo's distributed matrices and
 * AmgX split theirs: each rank holds
 *
 *   - the local block: its rows, the columns whose x entries it owns,
 *     renumbered from 0;
 *   - the off-diagonal block: its rows, the other columns, compacted to
 *     the distinct columns it needs (the "ghost" entries of x);
 *   - the halo plan: per peer, how many ghost entries come from it and
 *     which of its own x entries it sends, computed once at upload.
 *
 * A product posts the halo exchange, multiplies the local block while the
 * exchange runs, finishes the exchange and adds the off-diagonal block's
 * product; y comes back to rank 0. Host ranks exchange over MPI, GPU ranks
 * over NCCL (engine/gpu/comm.cu) — spmvd invents no transport of its own.
 *
 * Nothing waits without a deadline: every wait polls (MPI_Test,
 * cudaStreamQuery) and gives up after cluster_timeout_ms with a message
 * naming the rank and the step, and the cluster is then marked failed:
 * sharded requests answer 503, /v1/ready turns 503, the daemon's other
 * matrices keep working. A dead rank is seen much sooner than that
 * (liveness.c): a rank on rank 0's host by its process gone from /proc, in
 * any long wait of rank 0's, any rank, while the job is idle, by a
 * heartbeat ping it must answer within cluster_heartbeat_ms, and any rank,
 * busy or not, by its pulse (pulse.c: a UDP datagram every
 * cluster_pulse_ms from a thread of its own) falling silent. MPI is called
 * only from one thread per process
 * (rank 0's cluster worker, the other ranks' main thread).
 *
 * This file is the room's whole interface. partition.c (pure: layouts,
 * shards, halo plans, their wire form) needs no MPI; comm.c, spmv.c and
 * rank.c are compiled with MPI (SPMV_HAVE_MPI) and absent.c stands in for
 * them in a build without it, answering SPMV_ERR_UNAVAILABLE.
 */
#ifndef SPMV_CLUSTER_H
#define SPMV_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "krylov.h"
#include "precond.h"
#include "spmv.h"

/* ------------------------------------------------------------ partition */

/* Who owns what: rank r holds rows [row_begin[r], row_begin[r+1]) and the
 * x entries [col_begin[r], col_begin[r+1]). Row blocks are cut where the
 * running non-zero count passes r*nnz/nranks, so every block holds nnz /
 * nranks non-zeros give or take one row's worth. x is cut at the same
 * places for a square matrix (the local block is then the diagonal one),
 * in proportion to the rows otherwise. */
typedef struct cluster_layout {
    int nranks;
    int32_t rows, cols;
    int64_t nnz;
    int32_t *row_begin;   /* nranks + 1 */
    int32_t *col_begin;   /* nranks + 1 */
} cluster_layout;

int cluster_layout_balance(const spmv_csr *a, int nranks, cluster_layout *out, spmv_error *err);
void cluster_layout_free(cluster_layout *l);
/* The rank owning x entry (column) j. */
int cluster_layout_col_owner(const cluster_layout *l, int32_t j);

/* What one rank exchanges. Ghost entries are the off-diagonal block's
 * columns, in ascending global order, so the entries from one peer are
 * contiguous: recv_off[p] .. recv_off[p+1] of the ghost buffer. The
 * entries it sends peer p are its own x entries send_idx[send_off[p] ..
 * send_off[p+1]) (local numbering), in the order p's ghost buffer wants
 * them. */
typedef struct cluster_halo {
    int nranks;
    int32_t nghost;       /* = recv_off[nranks] */
    int32_t nsend;        /* = send_off[nranks] */
    int32_t *recv_off;    /* nranks + 1 */
    int32_t *send_off;    /* nranks + 1 */
    int32_t *ghost_col;   /* nghost global columns, ascending */
    int32_t *send_idx;    /* nsend local x indices */
} cluster_halo;

/* One rank's part of a sharded matrix. */
typedef struct cluster_shard {
    int rank, nranks;
    int32_t rows, cols;           /* of the whole matrix */
    int32_t row_begin, row_end;   /* global rows held */
    int32_t col_begin, col_end;   /* global x entries owned */
    spmv_csr local;               /* (row_end-row_begin) x (col_end-col_begin) */
    spmv_csr off;                 /* (row_end-row_begin) x halo.nghost */
    cluster_halo halo;
} cluster_shard;

/* Every rank's shard of a (rows x cols CSR) under layout l: local and
 * off-diagonal blocks and the halo plans, send lists included (rank 0
 * builds them all at upload, holding them together once). shards has
 * l->nranks entries; on failure none is left allocated. */
int cluster_shards_build(const spmv_csr *a, const cluster_layout *l, cluster_shard *shards, spmv_error *err);
void cluster_shard_free(cluster_shard *s);
/* Non-zeros of the shard (local + off-diagonal). */
int64_t cluster_shard_nnz(const cluster_shard *s);
/* Whether a GPU shard is split into interior and edge rows
 * (docs/cluster.md, "Interior and edge"), and where: the interior [*lo,
 * *hi) is the longest run of rows that read no ghost entry, its start
 * rounded up to 64 rows; the shard is split when the other rows are at
 * most a quarter of its rows and the interior holds an entry. Blocks of
 * 64-bit offsets and shards that read no ghost are not split. */
bool cluster_shard_interior(const cluster_shard *s, int32_t *lo, int32_t *hi);

/* The wire form of a shard (rank 0 -> its rank): a fixed header, then the
 * arrays, little-endian. unpack checks every count against the buffer's
 * length and every index against its range before trusting it. */
int cluster_shard_pack(const cluster_shard *s, void **buf, size_t *len, spmv_error *err);
int cluster_shard_unpack(const void *buf, size_t len, cluster_shard *out, spmv_error *err);

/* ------------------------------------------------------- the MPI job */

/* Whether this process was started by mpirun (Open MPI's
 * OMPI_COMM_WORLD_SIZE, or PMIx/PMI's size variables); no MPI call. */
bool cluster_launched(void);
/* The job's size as the launcher says (1 without one, 0 when unknown). */
int cluster_launched_size(void);

/* The job as this process sees it. */
typedef struct cluster cluster;

typedef struct cluster_options {
    double timeout_ms;          /* every wait: cluster_timeout_ms */
    double heartbeat_ms;        /* an idle rank answers the heartbeat within it: cluster_heartbeat_ms */
    int32_t tune_budget_ms;     /* `auto` on a shard */
    int32_t tune_max_runs;
    spmv_format_limits limits;  /* the padding rule for formats built on a shard */
    void (*log)(int level, const char *msg); /* 0 error, 1 warn, 2 info; NULL: stderr */
    const char *shard_dir;      /* ranks > 0 keep their shards here (shardfile.c); NULL: nowhere */
    bool halo_ipc;              /* GPU halos through CUDA IPC where every rank can (cluster_halo "auto") */
    int32_t pulse_ms;           /* every rank > 0 sends rank 0 a datagram this often: cluster_pulse_ms (0: none) */
    const char *pulse_addr;     /* rank 0's IPv4 address the pulses go to: cluster_pulse_addr (NULL, "auto": its host name's) */
    bool no_local_liveness;     /* rank 0 does not look at its host's ranks in /proc (cluster_local_liveness false: tests) */
} cluster_options;

/* MPI_Init_thread (MPI_THREAD_SERIALIZED: rank 0 calls MPI from its
 * cluster worker thread, the main thread only initialises and finalises)
 * and the communicator; errors return instead of aborting. Call with the
 * signals the daemon takes already blocked, so MPI's own threads inherit
 * the mask. */
int cluster_init(int *argc, char ***argv, const cluster_options *o, cluster **out, spmv_error *err);
int cluster_rank(const cluster *c);
int cluster_size(const cluster *c);
/* "host" of this rank (MPI_Get_processor_name). */
const char *cluster_host(const cluster *c);
/* Finalises MPI: MPI_Finalize when every rank is healthy, else exits
 * without it (a finalize waits for the dead), and frees c. */
void cluster_finish(cluster *c);

/* Ranks > 0: serve rank 0's commands until `shutdown` (or rank 0 is gone
 * and a SIGTERM came). Returns the exit status for main. */
int cluster_rank_loop(cluster *c);

/* ------------------------------------------------ rank 0's commands */

/* Everything below is called by rank 0 from one thread (the cluster
 * worker, daemon/worker_cluster.c). A call that times out or finds a rank
 * gone marks the cluster failed (cluster_failed) and returns
 * SPMV_ERR_UNAVAILABLE with the message; every later call returns the same
 * at once. */

/* Where a rank's shard lives and what it costs. */
typedef struct cluster_shard_info {
    int rank;
    int32_t row_begin, row_end;
    int64_t nnz;
    int32_t halo_recv, halo_send;
    char device[16];            /* "cpu" or "gpuN" */
    char host[64];
    size_t bytes;               /* host bytes of the shard */
    bool from_file;             /* read from the rank's own shard file (a restart), not sent */
    int32_t edge_rows;          /* rows a split GPU shard computes beside the exchange; 0: not split */
} cluster_shard_info;

/* A sharded matrix as rank 0 knows it. */
typedef struct cluster_matrix cluster_matrix;

/* Partitions a, sends every rank its shard (keeping rank 0's), waits for
 * every rank's answer. `id` names the matrix in every rank's table (36
 * characters). `gpu`: put the shards on the ranks' GPUs too (ranks with
 * none keep theirs on the host). */
int cluster_load(cluster *c, const char *id, const spmv_csr *a, bool gpu, cluster_matrix **out, spmv_error *err);
/* The same at a restart: a rank whose shard file holds exactly the shard
 * rank 0 cut loads it from there and is not sent it (shardfile.c). */
int cluster_reload(cluster *c, const char *id, const spmv_csr *a, bool gpu, cluster_matrix **out, spmv_error *err);
/* The matrix is being deleted: when its shards are freed, every rank
 * removes its shard file too (any thread; takes effect at the unload). */
void cluster_matrix_forget(cluster_matrix *m);
/* Frees the shards on every rank (a failed cluster frees rank 0's only). */
void cluster_unload(cluster *c, cluster_matrix *m);
int cluster_matrix_shards(const cluster_matrix *m, const cluster_shard_info **out);
int cluster_matrix_nranks(const cluster_matrix *m);

/* What a sharded product reports beyond spmv_stats: per run, the slowest
 * rank's time (stats), and of it the mean compute and communication time
 * (max over ranks of each run's, averaged over runs). comm_ms is the
 * time the halo exchange took beyond what the local product hid (posting
 * it and waiting for it); gather_ms the gather of y at rank 0, once per
 * request (0 when y is a distributed vector). */
typedef struct cluster_spmv_stats {
    spmv_stats st;
    /* When every shard is on a GPU: the same runs timed on the devices
     * (CUDA events from the run's first operation queued to its last done,
     * the slowest rank's), the measure a product on one GPU reports; else
     * runs 0. */
    spmv_stats device;
    double compute_ms, comm_ms, gather_ms;
    int64_t halo_values;          /* x entries exchanged per product, all ranks */
    const char *exchange;         /* how the halo moved: "ipc", "nccl" (GPU shards) or "mpi" (host shards) */
    char kernel[64];              /* the kernel run (auto: rank 0's choice) */
    char kernels[8][64];          /* auto: each rank's choice (first 8 ranks) */
} cluster_spmv_stats;

/* ------------------------------------------- distributed vectors */

/* A vector kept distributed across the ranks the way a sharded matrix's
 * rows (or x entries) are: rank r holds entries [begin[r], begin[r+1]),
 * on the device its shard of the matrix is on (its GPU, or its host), so
 * a product whose x and y are such vectors moves no vector through rank
 * 0 and a Krylov method's dots and updates run where the values are, with
 * only scalars coming back. A vector is made like a sharded matrix
 * (`rows`: the layout of y, else that of x; the same for a square
 * matrix), zeroed; rank 0's handle knows the layout and where each slice
 * is, so every operation is checked on rank 0 before any rank is told to
 * run it. One column (k = 1), the matrix's dtype. */
typedef struct cluster_vec cluster_vec;

int cluster_vec_new(cluster *c, const cluster_matrix *m, bool rows, const char *id, cluster_vec **out,
                    spmv_error *err);
/* Frees the slices on every rank (a failed cluster frees rank 0's only). */
void cluster_vec_free(cluster *c, cluster_vec *v);
/* Frees rank 0's handle only, from any thread (shutdown: every rank frees
 * its slices as it finishes). */
void cluster_vec_forget(cluster_vec *v);
/* All n values from / to rank 0's host memory (scattered, gathered). */
int cluster_vec_write(cluster *c, cluster_vec *v, const void *values, spmv_error *err);
int cluster_vec_read(cluster *c, const cluster_vec *v, void *values, spmv_error *err);
const char *cluster_vec_id(const cluster_vec *v);
int64_t cluster_vec_n(const cluster_vec *v);
spmv_dtype cluster_vec_dtype(const cluster_vec *v);
int cluster_vec_nranks(const cluster_vec *v);
/* "rows" or "cols" of the matrix it was made like; its id. */
const char *cluster_vec_side(const cluster_vec *v);
const char *cluster_vec_like(const cluster_vec *v);
/* Where rank r's slice lives: "cpu" or "gpuN". */
const char *cluster_vec_device(const cluster_vec *v, int r);
/* Whether v is laid out as m's x (rows false) or y (rows true), every
 * slice on the device of that rank's shard; else false with why. */
bool cluster_vec_fits(const cluster_vec *v, const cluster_matrix *m, bool rows, char *why, size_t len);
/* Whether a and b are cut alike and live alike (BLAS-1 operands). */
bool cluster_vec_same_layout(const cluster_vec *a, const cluster_vec *b);

/* BLAS-1 on distributed vectors, each rank on its slice: dot and nrm2
 * sum the ranks' partial sums on rank 0 (result), the others update y
 * (or x) in place: axpy y = alpha*x + y, axpby y = alpha*x + beta*y,
 * scal x = alpha*x, copy y = x, fill x = alpha. */
typedef enum cluster_vop {
    CLUSTER_VOP_DOT, CLUSTER_VOP_NRM2, CLUSTER_VOP_AXPY, CLUSTER_VOP_AXPBY, CLUSTER_VOP_SCAL, CLUSTER_VOP_COPY,
    CLUSTER_VOP_FILL, CLUSTER_VOP_COUNT
} cluster_vop;
int cluster_vec_op(cluster *c, cluster_vop op, double alpha, cluster_vec *x, double beta, cluster_vec *y,
                   double *result, spmv_error *err);

/* The operands of a sharded product: x inline (cols values on rank 0's
 * host, scattered) or a distributed vector laid out as x; y inline (rows
 * values gathered at rank 0) or a distributed vector laid out as y, which
 * then gets y = alpha*A*x + beta*y (inline y: alpha 1, beta 0). */
typedef struct cluster_operands {
    const void *x;
    cluster_vec *xv;
    void *y;
    cluster_vec *yv;
    double alpha, beta;
} cluster_operands;

/* y = A*x on the sharded matrix with kernel k (a CPU kernel, a GPU kernel
 * when the shards are on GPUs, or "auto": each rank tunes its shard once),
 * x and y as io says, of `dtype` (the matrix's). With a vector y the runs
 * multiply into scratch and y is updated once, after the last. */
int cluster_spmv(cluster *c, cluster_matrix *m, const spmv_kernel *k, const spmv_params *p,
                 const cluster_operands *io, int32_t warmup, int32_t runs, cluster_spmv_stats *out, spmv_error *err);

/* ------------------------------------------------ distributed solves */

/* A Krylov solve of A x = b on a square sharded matrix, every rank running
 * the same engine loop (spmv_solve) on its own rows (cluster/solve.c): b,
 * x and the work vectors are cut like the matrix's rows, each product
 * exchanges the halo and multiplies the rank's shard, each dot and norm
 * is every rank's partial sum gathered by all of them (MPI_Iallgather,
 * polled against cluster_timeout_ms) and added in rank order, so every
 * rank holds the same bits and takes the same branch. The preconditioner
 * is set up by each rank on its diagonal block (the local block), so its
 * apply needs no communication: jacobi, block_jacobi (blocks must not
 * straddle two ranks: block_size divides every rank's rows) and
 * chebyshev (its polynomial in D^-1 A_rr on each rank's block). One
 * command from rank 0 starts it; rank 0's progress callback may stop it
 * (every rank stops at the same iteration, one reduction later). */
typedef struct cluster_solve_args {
    const spmv_kernel *k;         /* a kernel of the shards' device, or auto (each rank tunes its shard) */
    const spmv_params *p;
    spmv_solve_options o;         /* method, tol, maxit, restart; the hooks are each rank's own */
    spmv_precond_options pc;      /* type none, jacobi, block_jacobi or chebyshev */
    const void *b, *x0;           /* rows values on rank 0's host (x0 NULL: zeros) */
    void *x;                      /* the answer: rows values on rank 0's host */
    int (*progress)(void *ctx, int32_t it, double relres); /* rank 0, after each iteration; non-zero stops */
    void *progress_ctx;
} cluster_solve_args;

/* What one rank spent: its products' compute and halo exchange, its
 * reductions (their waits include the slower ranks'), its preconditioner
 * (setup and applies), and the whole solve on it. */
#define CLUSTER_SOLVE_REPORT_RANKS 64
typedef struct cluster_solve_rank {
    double compute_ms, exchange_ms, reduce_ms, precond_ms, precond_setup_ms, total_ms;
    int64_t reductions;
    int32_t iterations;
    char kernel[64];
} cluster_solve_rank;

typedef struct cluster_solve_stats {
    int nranks;
    cluster_solve_rank rank[CLUSTER_SOLVE_REPORT_RANKS];  /* the first 64 ranks */
    int64_t halo_values;          /* x entries exchanged per product, all ranks */
    char kernel[64];              /* rank 0's kernel (auto: its choice) */
} cluster_solve_stats;

/* The solve: SPMV_OK for every stop reason (res says which, as
 * spmv_solve's: rank 0's report; every rank's iterations agree), res's
 * history to free with spmv_solve_result_free. SPMV_ERR_UNAVAILABLE and
 * the cluster failed when a rank is lost mid-solve (every wait is
 * deadline-bounded). */
int cluster_solve(cluster *c, cluster_matrix *m, const cluster_solve_args *a, spmv_solve_result *res,
                  cluster_solve_stats *st, spmv_error *err);

/* Every rank answers within the timeout. */
int cluster_ping(cluster *c, spmv_error *err);
/* The idle health check (liveness.c): every rank answers a ping within
 * heartbeat_ms, else the cluster is marked failed. Until every rank has
 * answered once the deadline is timeout_ms, so a rank slow to start (a
 * GPU context) is not taken for dead. Call it only between commands: an
 * idle rank answers in well under a millisecond, so the short deadline
 * tells a dead or stopped rank within heartbeat_ms of the ping. */
int cluster_heartbeat(cluster *c, spmv_error *err);
/* Rank 0: when `rank`'s last pulse came (age_ms, -1: never) and how many
 * came (pulse.c); -1 when there is no pulse (another rank, pulse off). */
int cluster_pulse_heard(const cluster *c, int rank, double *age_ms, int64_t *count);
/* Sends `shutdown` to every rank (failed or not: the live ones exit). */
void cluster_shutdown(cluster *c);
/* NULL while healthy; else why the cluster failed. Any thread may call it. */
const char *cluster_failed(cluster *c);

/* ------------------------------------------------- one rank's product */

/* The product on one shard, the same on every rank (rank.c runs it for
 * rank 0's commands, the tests call it directly on every rank): x_local
 * holds the rank's col_end - col_begin x entries, y_local gets its rows.
 * Exchanges with the other ranks, so every rank must call it, with the
 * same runs and warmup, in the same order. Times per timed run go to
 * run_ms, compute_ms, comm_ms, device_ms (runs entries each, may be NULL). A kernel that cannot run on this shard still takes part in the
 * exchange and then returns its error. */
typedef struct cluster_local cluster_local;   /* a shard ready to multiply */

int cluster_local_new(cluster *c, cluster_shard *s, spmv_dtype dtype, cluster_local **out, spmv_error *err);
void cluster_local_free(cluster *c, cluster_local *l);
/* Puts the blocks on this rank's GPU too (its context, made on first use);
 * SPMV_ERR_UNAVAILABLE when the rank has no GPU. */
int cluster_local_to_gpu(cluster *c, cluster_local *l, spmv_error *err);
const cluster_shard *cluster_local_shard(const cluster_local *l);
const char *cluster_local_device(const cluster_local *l);

/* Per run: the host clock around it, its compute and communication
 * split, and (GPU shards) its time on the device by CUDA events, 0 on a
 * host shard. CLUSTER_TIME_ROWS arrays of runs values, in that order, are
 * what every rank sends back. */
#define CLUSTER_TIME_ROWS 4
typedef struct cluster_run_times {
    double *run_ms, *compute_ms, *comm_ms, *device_ms;
} cluster_run_times;

int cluster_local_spmv(cluster *c, cluster_local *l, const spmv_kernel *k, const spmv_params *p,
                       const void *x_local, void *y_local, int32_t warmup, int32_t runs, const cluster_run_times *t,
                       const spmv_kernel **ran, spmv_error *err);

#endif /* SPMV_CLUSTER_H */
