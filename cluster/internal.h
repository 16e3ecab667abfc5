/* internal.h — what the cluster's MPI files share (not part of its API).
 *
 * The process's view of the job (struct cluster), the command header and
 * reply every rank agrees on, and comm.c's transport: non-blocking sends
 * and receives collected in a request list and completed by one
 * deadline-bounded wait. Only compiled with MPI.
 */
#ifndef SPMV_CLUSTER_INTERNAL_H
#define SPMV_CLUSTER_INTERNAL_H

#ifdef SPMV_HAVE_MPI

#include <mpi.h>
#include <stdatomic.h>

#include "cluster/cluster.h"
#include "comm.h"

/* Message tags: one per kind of message, so a late message of one kind is
 * never taken for another. Within a kind MPI keeps each pair's order. */
enum {
    TAG_CMD = 11,       /* cmd_header, rank 0 -> rank */
    TAG_PAYLOAD = 12,   /* the bytes a command carries (a shard, x) */
    TAG_REPLY = 13,     /* cmd_reply, rank -> rank 0 */
    TAG_HALO = 14,      /* ghost entries of x, rank -> rank */
    TAG_Y = 15,         /* a rank's rows of y, rank -> rank 0 */
    TAG_TIMES = 16,     /* a rank's per-run times, rank -> rank 0 */
    TAG_NCCL_ID = 17,   /* the NCCL unique id, rank 0 -> rank */
    TAG_IDENT = 18,     /* a rank's host, pid and start time, rank -> rank 0, once at start (liveness.c) */
    TAG_PULSE = 19,     /* where to pulse (pulse_where), rank 0 -> rank, once at start (pulse.c) */
};

enum {
    CMD_PING = 1,
    CMD_LOAD = 2,       /* payload: a packed shard; flags & CMD_FLAG_GPU: onto the GPU too */
    CMD_SPMV = 3,       /* payload: the rank's x entries */
    CMD_FREE = 4,
    CMD_SHUTDOWN = 5,   /* flags & CMD_FLAG_FINALIZE: MPI_Finalize, else exit without it */
    CMD_NCCL = 6,       /* make the NCCL communicator (then one TAG_NCCL_ID message) */
    CMD_VNEW = 7,       /* a distributed vector xid laid out like matrix id's shards (CMD_FLAG_ROWS: y), zeroed */
    CMD_VFREE = 8,      /* vector xid */
    CMD_VWRITE = 9,     /* payload: the rank's slice of vector xid */
    CMD_VREAD = 10,     /* the rank answers its slice of xid (TAG_Y) after the reply */
    CMD_VOP = 11,       /* BLAS-1 `vop` on xid (and yid); dot/nrm2: the partial sum in the reply */
    CMD_SOLVE = 12,     /* payload: the rank's rows of b (and of x0); x (TAG_Y) and times (TAG_TIMES) back */
};

#define CMD_FLAG_GPU 1u
#define CMD_FLAG_FINALIZE 2u
#define CMD_FLAG_TRY_FILE 4u  /* CMD_LOAD: file_len/file_crc name the shard; a first reply says if it is sent */
#define CMD_FLAG_FORGET 8u    /* CMD_FREE: remove the shard file too */
#define CMD_FLAG_ROWS 16u     /* CMD_VNEW: y's layout (the shards' rows), else x's */
#define CMD_FLAG_XVEC 32u     /* CMD_SPMV: x is the rank's slice of vector xid (no payload) */
#define CMD_FLAG_YVEC 64u     /* CMD_SPMV: y = alpha*A*x + beta*y into the slice of yid (nothing gathered) */
#define CMD_FLAG_X0 128u      /* CMD_SOLVE: x0's rows follow b's in the payload */
#define CMD_MAGIC 0x53504d56u /* "SPMV" */

typedef struct cmd_header {
    uint32_t magic, op;
    uint64_t seq;
    uint64_t payload;             /* bytes of the TAG_PAYLOAD message(s) that follow */
    char id[40];
    char kernel[64];
    int32_t params[SPMV_PARAM_COUNT];
    int32_t warmup, runs;
    int32_t dtype;
    uint32_t flags;
    uint64_t file_len;            /* CMD_FLAG_TRY_FILE: the shard's wire length and CRC-32 */
    uint32_t file_crc;
    int32_t vop;                  /* CMD_VOP: a cluster_vop */
    char xid[40], yid[40];        /* vector operands */
    double alpha, beta;
    /* CMD_SOLVE: the method and its options (spmv_solve_options), the
     * preconditioner each rank sets up on its diagonal block */
    int32_t method, maxit, restart, pc_type, pc_block, pc_degree;
    double tol;
} cmd_header;

typedef struct cmd_reply {
    uint64_t seq;
    int32_t status;
    int32_t rank;
    char message[512];
    char device[16];
    char host[64];
    char kernel[64];
    uint64_t bytes;
    int32_t from_file;            /* CMD_LOAD: the shard came from the rank's file */
    int32_t edge_rows;            /* CMD_LOAD: cluster_local_edge_rows of the shard */
    double value;                 /* CMD_VOP dot/nrm2: the rank's partial sum */
} cmd_reply;

/* One slice of a distributed vector this process holds, by vector id. */
typedef struct vec_entry {
    char id[40];
    spmv_vec v;                   /* host memory, or the rank's GPU's */
    struct vec_entry *next;
} vec_entry;

/* One shard this process holds, by matrix id. */
typedef struct local_entry {
    char id[40];
    cluster_local *l;
    struct local_entry *next;
} local_entry;

struct cluster {
    MPI_Comm comm;
    int rank, size;
    char host[64];
    cluster_options o;
    uint64_t seq;
    _Atomic bool failed;
    bool heard;                   /* rank 0: every rank has answered a heartbeat (liveness.c) */
    struct rank_watch {           /* rank 0: each rank's process, if it can see it (liveness.c) */
        int32_t pid;
        uint64_t start;           /* its start time in /proc (clock ticks since boot) */
        bool local;
        char host[64];            /* the host it runs on, as it said */
    } *watch;
    struct cluster_pulse *pulse;  /* rank 0: the pulses' receiver; ranks > 0: their sender (pulse.c) */
    char failed_msg[512];         /* written once, before `failed` is set */
    local_entry *table;           /* ranks > 0: their shards */
    vec_entry *vtable;            /* every rank: its slices of distributed vectors */
    /* this rank's GPU (context made on first use, on the MPI thread) */
    spmv_gpu_ctx *gpu;
    int gpu_index;
    bool gpu_tried;
    char gpu_reason[256];
    spmv_gpu_comm *nccl;          /* NULL until the first GPU product */
    spmv_gpu_allsum *allsum;      /* sums on the GPUs for fused solves (solve.c); NULL: on the hosts */
    bool allsum_tried;
};

/* ------------------------------------------------------------ comm.c */

/* Non-blocking operations waited for together. */
typedef struct req_list {
    MPI_Request *req;
    int *peer;                    /* whom each waits on, for the message */
    int n, cap;
} req_list;

void reqs_init(req_list *r);
void reqs_free(req_list *r);
/* Posts len bytes to/from peer under tag, in pieces of at most 1 GiB. */
int reqs_send(cluster *c, req_list *r, const void *buf, size_t len, int peer, int tag, spmv_error *err);
int reqs_recv(cluster *c, req_list *r, void *buf, size_t len, int peer, int tag, spmv_error *err);
/* Completes every request by the deadline (cluster_timeout_ms from now),
 * polling; past it the receives are cancelled and SPMV_ERR_UNAVAILABLE
 * names `what` and the ranks not heard from. The list is emptied. */
int reqs_wait(cluster *c, req_list *r, const char *what, spmv_error *err);
/* The same with a deadline of timeout_ms, which the message names as the
 * configuration key `key` (the heartbeat's is shorter). */
int reqs_wait_within(cluster *c, req_list *r, const char *what, double timeout_ms, const char *key, spmv_error *err);
/* Marks the cluster failed (the first message wins) and returns
 * SPMV_ERR_UNAVAILABLE with err set to it. */
int cluster_fail(cluster *c, spmv_error *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A sharded matrix as rank 0 holds it. */
struct cluster_matrix {
    char id[40];
    int nranks;
    int32_t rows, cols;
    int64_t nnz;
    spmv_dtype dtype;
    bool gpu;
    int32_t *row_begin, *col_begin;   /* nranks + 1 */
    cluster_shard_info *info;         /* nranks */
    cluster_local *own;               /* rank 0's shard */
    _Atomic bool forget;              /* deleted: the ranks remove their shard files at the unload */
};

/* ------------------------------------------------------- liveness.c */

/* Every rank tells rank 0 its host, pid and start time (cluster_init). */
int cluster_liveness_init(cluster *c, spmv_error *err);
void cluster_liveness_free(cluster *c);
/* Whether a wait that has lasted waited_ms should look at the ranks'
 * processes now (next_ms: the wait's own schedule, start it at 0). */
bool cluster_liveness_due(const cluster *c, double waited_ms, double *next_ms);
/* What a wait on the GPU asks now and then (engine/comm.h
 * spmv_gpu_comm_watch, the fused solve's watch): the cluster has failed
 * already, or, when due, a look at the ranks finds one lost
 * (SPMV_ERR_UNAVAILABLE naming `what`). */
int cluster_watch(cluster *c, const char *what, double waited_ms, double *next_ms, spmv_error *err);
/* Rank 0: a rank on this host whose process has exited fails the cluster
 * (SPMV_ERR_UNAVAILABLE naming `what` and the rank). */
int cluster_liveness_look(cluster *c, const char *what, spmv_error *err);

/* ---------------------------------------------------------- pulse.c */

/* Where the ranks pulse: rank 0's IPv4 address and UDP port (network
 * order for ip), the job's token, the period (port 0: no pulse). */
typedef struct pulse_where {
    uint32_t ip;
    uint16_t port, reserved16;
    int32_t pulse_ms;
    uint64_t token;
} pulse_where;

typedef struct cluster_pulse cluster_pulse;

/* Rank 0: binds the socket and starts the receiving thread (w zeroed: no
 * pulse, when cluster_pulse_ms is 0 or the job has one rank). */
int cluster_pulse_open(cluster *c, pulse_where *w, spmv_error *err);
/* Ranks > 0: starts the sending thread (none when w->port is 0). */
int cluster_pulse_start(cluster *c, const pulse_where *w, spmv_error *err);
/* Stops and joins the thread, closes the socket (any rank; none: nothing). */
void cluster_pulse_stop(cluster *c);
/* Rank 0: a rank heard once whose last pulse is older than
 * cluster_heartbeat_ms (or three periods, if longer) fails the cluster. */
int cluster_pulse_look(cluster *c, const char *what, spmv_error *err);

/* ------------------------------------------------------------ rank.c */

/* A command's header with the next sequence number. */
void cmd_init(cluster *c, cmd_header *h, uint32_t op, const char *id);
/* Posts the header (and payload, if any) to rank p. */
int cmd_post(cluster *c, req_list *r, const cmd_header *h, const void *payload, int p, spmv_error *err);
/* The first failed reply as err; SPMV_OK when all succeeded. */
int cmd_check(cluster *c, const cmd_reply *rep, uint64_t seq, spmv_error *err);
cmd_reply *cmd_replies(cluster *c, spmv_error *err);
/* A command without payload to every rank, and their replies. */
int cmd_round_trip(cluster *c, const cmd_header *h, cmd_reply *rep, const char *what, spmv_error *err);
/* Ranks > 0: the command's payload (len bytes) into a fresh buffer. */
int cmd_take_payload(cluster *c, size_t len, void **out, spmv_error *err);
/* Ranks > 0: this rank's shard of matrix id, or NULL. */
cluster_local *cluster_table_find(cluster *c, const char *id);
/* The reply to rank 0 (status and message from rc and err). */
void cmd_reply_send(cluster *c, cmd_reply *rep, int rc, const spmv_error *err);

/* Rank 0: CMD_NCCL to every rank and its own setup beside them (rep: c->size replies). */
int cluster_nccl_round(cluster *c, cmd_reply *rep, spmv_error *err);

/* --------------------------------------------------------- vectors.c */

/* This rank's slice of vector id, or NULL. */
spmv_vec *cluster_vec_slice(cluster *c, const char *id);
/* Ranks > 0: CMD_VNEW .. CMD_VOP (replies sent). */
void cluster_vec_command(cluster *c, const cmd_header *h, cmd_reply *rep);
/* Frees every slice (cluster_finish, before the GPU context). */
void cluster_vec_table_free(cluster *c);

/* ----------------------------------------------------------- solve.c */

/* Ranks > 0: CMD_SOLVE (the rank's part of the solve; reply, x and times
 * sent unless the cluster failed meanwhile). */
void cluster_solve_command(cluster *c, const cmd_header *h, cmd_reply *rep);

/* ------------------------------------------------------- shardfile.c */

uint32_t shard_crc(const void *buf, size_t len);
/* The shard's wire form into this rank's file (temporary name, fsync,
 * rename). */
int shard_file_write(const cluster *c, const char *id, const void *buf, size_t len, spmv_error *err);
/* The file's wire form when it is exactly len bytes with CRC crc (and
 * undamaged); else SPMV_ERR_NOT_FOUND / CORRUPT / IO saying why. */
int shard_file_read(const cluster *c, const char *id, uint64_t len, uint32_t crc, void **out, spmv_error *err);
void shard_file_remove(const cluster *c, const char *id);

/* ------------------------------------------------------------ spmv.c */

/* The process's GPU context, made on first use (SPMV_ERR_UNAVAILABLE with
 * the reason when there is none). */
int cluster_gpu(cluster *c, spmv_gpu_ctx **out, spmv_error *err);
/* The NCCL communicator over every rank: rank 0 draws the id and sends it
 * (each rank calls this at the same point, from a CMD_NCCL). */
int cluster_nccl_setup(cluster *c, spmv_error *err);
/* The shard's local block (its diagonal block for a square matrix), on
 * the host whatever device the shard is on. */
const spmv_csr *cluster_local_csr(const cluster_local *l);
/* How the shard's halo moves: "ipc" or "nccl" (a GPU shard, once its
 * first product has run), else "mpi". */
const char *cluster_local_exchange(const cluster_local *l);
/* The rows a split GPU shard computes beside the exchange (its edge:
 * docs/cluster.md, "Interior and edge"); 0 when it is not split. */
int32_t cluster_local_edge_rows(const cluster_local *l);
/* Bytes of the shard held in host memory. */
size_t cluster_local_bytes(const cluster_local *l);
/* cluster_local_spmv with x and y given either way: host values (xh, yh)
 * or this rank's slices of distributed vectors (xv, yv), which live where
 * the shard is; a vector y gets y = alpha*A*x + beta*y, once, after the
 * runs (into scratch unless alpha is 1 and beta 0). */
int cluster_local_product(cluster *c, cluster_local *l, const spmv_kernel *k, const spmv_params *p, const void *xh,
                          const spmv_vec *xv, void *yh, spmv_vec *yv, double alpha, double beta, int32_t warmup,
                          int32_t runs, const cluster_run_times *t, const spmv_kernel **ran, spmv_error *err);
/* One run of y = A x with x and y vector slices where the shard is, y
 * written whole and not poisoned first: a solve's operator. */
int cluster_local_apply(cluster *c, cluster_local *l, const spmv_kernel *k, const spmv_params *p, const spmv_vec *x,
                        spmv_vec *y, const cluster_run_times *t, const spmv_kernel **ran, spmv_error *err);
/* A rank is lost: the waits of l's exchange on the GPU end (engine/comm.h
 * spmv_gpu_halo_stop). */
void cluster_local_stop(cluster *c, cluster_local *l);
/* The same on a GPU shard, queued on the rank's GPU and not waited for,
 * timed or checked (the exchange, the local product, the boundary rows):
 * a fused solve's device_apply, after cluster_local_apply has run once. */
int cluster_local_queue(cluster *c, cluster_local *l, const spmv_kernel *k, const spmv_params *p, const spmv_vec *x,
                        spmv_vec *y, spmv_error *err);

#endif /* SPMV_HAVE_MPI */
#endif
