/* krylov.h — iterative solvers that run where the matrix lives.
 *
 * CG, BiCGSTAB, restarted GMRES and MINRES (symmetric indefinite A, an SPD
 * preconditioner), optionally preconditioned (Jacobi, or
 * any preconditioner of engine/precond.h), written once against the engine's vector calls
 * (spmv_vec_*: the same operations POST /v1/ops runs step by step) and an
 * operator callback for y = A*x. The vectors are host vectors (ctx NULL) or
 * vectors on ctx's GPU; the solver allocates its work vectors on the same
 * device and frees them before it returns. Scalars (alpha, beta, the
 * Hessenberg matrix and Givens rotations of GMRES) live on the host: each
 * dot or nrm2 waits for the device, as a hand-written CG over cuBLAS does.
 *
 * The fused path: on a GPU, when the options carry the operator's device_apply,
 * the scalars stay on the device instead (engine/krylov_fused.c,
 * engine/gpu/krylov_fused.cu). Each dot is computed in the kernel that
 * updates the vectors it needs, the next scalars are formed there too,
 * and the host learns the state only every check_every iterations (an
 * asynchronous copy of a small status block). A device flag stops the
 * iteration where it converged, broke down or hit maxit, so no work after
 * it changes x. Plain CG, BiCGSTAB and MINRES (no callback preconditioner)
 * replay a CUDA graph of check_every iterations. Same stop rules, messages
 * and history as the host path; docs/kernels.md ("Solvers") has the design.
 *
 * Stopping: converged when the residual norm ||b - A*x|| <= tol * ||b||
 * (SciPy's rtol rule; for b = 0, x = 0 is returned at once), maxit
 * iterations, a breakdown (a quantity that must not vanish did: the
 * message names it and its value), or a cancel asked for by the progress
 * callback. The relative residual of the answer is recomputed from b - A*x
 * at the end, so it does not trust the recurrence.
 */
#ifndef SPMV_KRYLOV_H
#define SPMV_KRYLOV_H

#include "spmv.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum spmv_solve_method {
    SPMV_SOLVE_CG = 0, SPMV_SOLVE_BICGSTAB, SPMV_SOLVE_GMRES, SPMV_SOLVE_MINRES
} spmv_solve_method;
typedef enum spmv_solve_stop {
    SPMV_STOP_CONVERGED = 0, SPMV_STOP_MAXIT, SPMV_STOP_BREAKDOWN, SPMV_STOP_CANCELLED
} spmv_solve_stop;

const char *spmv_solve_method_name(spmv_solve_method m);   /* "cg", "bicgstab", "gmres", "minres" */
int spmv_solve_method_parse(const char *name, spmv_solve_method *out);
const char *spmv_solve_stop_name(spmv_solve_stop s);       /* "converged", "maxit", "breakdown", "cancelled" */

/* y = A*x on the solve's device; *ms gets the product's own time (device
 * events on a GPU, the clock on the host). */
typedef struct spmv_linop {
    int64_t rows, cols;
    void *ctx;
    int (*apply)(void *ctx, const spmv_vec *x, spmv_vec *y, double *ms, spmv_error *err);
} spmv_linop;

/* An operator of a resident matrix and one GPU SpMV kernel: its apply is
 * spmv_gpu_apply (timed by events), its device_apply (for
 * spmv_solve_options.device_apply) spmv_gpu_launch. op must outlive the
 * solve; params may be NULL. */
typedef struct spmv_gpu_op {
    spmv_gpu_ctx *ctx;
    const spmv_kernel *kernel;
    spmv_gpu_matrix *m;
    const spmv_params *params;
} spmv_gpu_op;
int spmv_gpu_op_apply(void *op, const spmv_vec *x, spmv_vec *y, double *ms, spmv_error *err);
int spmv_gpu_op_device_apply(void *op, const spmv_vec *x, spmv_vec *y, spmv_error *err);

#define SPMV_GMRES_RESTART_DEFAULT 30
#define SPMV_GMRES_RESTART_MAX 1000
#define SPMV_CHECK_EVERY_DEFAULT 8
#define SPMV_CHECK_EVERY_MAX 4096

/* Sums across the processes of a distributed solve, done by the fused
 * kernels on the GPU itself (engine/comm.h spmv_gpu_allsum_new makes it:
 * CUDA IPC between the GPUs of one host). A reduction's last block writes
 * its partial sums into every process's mailbox (the half of the sum's
 * parity, this process's row), each value as two 8-byte words that carry
 * the sum's number beside half of the value's bits, then waits until
 * every word of every process's row here bears that number and adds the
 * rows in process order: every process gets the same bits. A word is
 * stored and loaded whole, so one that bears the number holds this sum's
 * bits: no fence and no flag between the values and their reader (NCCL's
 * LL protocol does the same). A wait past timeout_ns, or one the host
 * stops through *stop, ends the solve as a lost peer (krylov_fused.c). */
#define SPMV_ALLSUM_SLOTS 4 /* words a process's row holds: two a value */
typedef struct spmv_allsum_dev {
    int32_t rank, nranks;
    unsigned long long *box;                /* this process's: [2][nranks][SPMV_ALLSUM_SLOTS] words */
    unsigned long long *const *peer_box;    /* device array of nranks: every process's box (its own included) */
    unsigned *seq;                          /* device: the sums done so far */
    unsigned long long *waited_ns;          /* device: time spent waiting for the other processes */
    unsigned long long timeout_ns;
    int *stop;                              /* mapped host memory: a wait gave up, or the host stops them */
} spmv_allsum_dev;

typedef struct spmv_solve_options {
    spmv_solve_method method;
    int32_t restart;                 /* GMRES basis size (0: SPMV_GMRES_RESTART_DEFAULT) */
    double tol;                      /* relative residual to reach, finite and > 0 */
    int32_t maxit;                   /* iterations (GMRES: inner iterations, all cycles counted) */
    const spmv_vec *inv_diag;        /* Jacobi: 1/diag(A) on the solve's device; NULL: none */
    /* Any other preconditioner: z = M^-1 r on the solve's device
     * (engine/precond.h spmv_precond_apply_cb with a binding); NULL: none.
     * CG needs it symmetric positive definite. */
    int (*precond)(void *ctx, const spmv_vec *r, spmv_vec *z, spmv_error *err);
    void *precond_ctx;
    /* The same preconditioner on k columns at once, for spmv_solve_block's
     * lockstep: r and z n x k blocks, active (NULL: all) the columns to
     * apply, the others' z left alone (engine/precond.h
     * spmv_precond_apply_k_cb, with precond_ctx). NULL: the lockstep calls
     * precond column by column. Ignored without precond. */
    int (*precond_k)(void *ctx, const spmv_vec *r, spmv_vec *z, const bool *active, spmv_error *err);
    /* After every iteration: (it, relative residual of the recurrence).
     * A non-zero return stops the solve as SPMV_STOP_CANCELLED. */
    int (*progress)(void *ctx, int32_t it, double relres);
    void *progress_ctx;
    /* The fused path: the host reads the device's status every check_every
     * iterations (0: SPMV_CHECK_EVERY_DEFAULT; GMRES: at each cycle's end),
     * so progress is called in bursts and a cancel lands up to two checks
     * late (the iterations done by then are counted). no_graph: launch each
     * iteration's kernels instead of replaying a captured graph. */
    int32_t check_every;
    bool no_graph;
    /* CG on one GPU: its three vector kernels an iteration even where the
     * one-pass cooperative kernel fits (result's one_pass; benchmarks). */
    bool no_one_pass;
    /* The operator's product for the fused path (GPU only; NULL: the host
     * path): y = A*x queued on the context's stream and not waited for,
     * with no timing, poisoning or host synchronisation, so that a CUDA
     * graph can capture it; called with the operator's ctx (a->ctx), and
     * only after its apply has run once (formats and caches are built by
     * then). spmv_gpu_op_device_apply is one. */
    int (*device_apply)(void *ctx, const spmv_vec *x, spmv_vec *y, spmv_error *err);
    /* With device_apply, where other work may run on the device between two
     * checks (the daemon's worker serves short requests from the progress
     * callback): a number, asked with the operator's ctx before each chunk,
     * that changes whenever what device_apply queues may read other memory
     * than before (a format evicted or rebuilt, new values, another x's
     * texture). A graph captured under another number is not replayed: that
     * chunk is queued afresh (the operator resolves its formats again) and
     * the next one captured anew. Whoever moves such memory first waits
     * for the queued work (spmv_vec_sync: a replay may still be running).
     * NULL: nothing moves during the solve. */
    uint64_t (*device_epoch)(void *ctx);
    /* A distributed solve (cluster/solve.c): every process runs this same
     * solve on its own rows (b, x and the work vectors are its slices, the
     * operator's apply exchanges what the product needs), and reduce sums
     * v[0..n) over the processes in place, giving every one the same bits,
     * so every one takes the same branch. Each dot and norm goes through
     * it; one column only. NULL: one process. The fused path is taken
     * only with allsum as well (any method): its kernels sum on the
     * device through allsum, and reduce sums the host's dots (the start,
     * the true residual at the end) and, once a check, the ranks' wishes
     * to stop (so every one cancels at the same iteration). */
    int (*reduce)(void *ctx, double *v, int32_t n, spmv_error *err);
    void *reduce_ctx;
    const spmv_allsum_dev *allsum;
    /* While the fused path waits for the device's status: asked now and
     * then, with how long this wait has lasted and the wait's own schedule
     * (next_ms, 0 at its start). A non-zero return (err set) ends the solve
     * with that error, once the caller has made the device's waits for
     * other processes end. NULL: the status is waited for, no question
     * asked. */
    int (*watch)(void *ctx, double waited_ms, double *next_ms, spmv_error *err);
    void *watch_ctx;
} spmv_solve_options;

typedef struct spmv_solve_result {
    spmv_solve_stop stop;
    int32_t iterations;
    double relres;                   /* ||b - A*x|| / ||b||, recomputed at the end */
    double breakdown_value;          /* the quantity that vanished, for SPMV_STOP_BREAKDOWN */
    char detail[256];                /* one sentence: why it stopped, with the numbers */
    double *history;                 /* relres per iteration, history[0] at x0 (malloc; free it) */
    int32_t history_len;
    int32_t spmv_calls;
    double spmv_ms, vector_ms, setup_ms, total_ms;  /* vector_ms = total - spmv - setup */
    /* The fused path: taken, with a graph, and the host's status reads.
     * spmv_ms there is spmv_calls times the first product's timed apply. */
    bool fused, graph;
    int32_t checks;
    int32_t captures;                /* graphs captured (more than one: device_epoch moved) */
    bool one_pass;                   /* CG's vector work in one cooperative kernel an iteration */
} spmv_solve_result;

/* The smallest tol a solve in `dtype` may ask for: 10 eps (float64
 * 2.2e-15, float32 1.2e-6). Below it the relative residual is rounding
 * noise: a method would run to maxit, or break down, without ever
 * meeting it. */
double spmv_solve_min_tol(spmv_dtype dtype);

/* Solves A*x = b: x holds x0 on entry and the answer on return (also when
 * the stop is not convergence). b and x: one column, n = A's rows = cols,
 * A's dtype. SPMV_OK for every stop reason (res->stop says which); an error
 * only when a call failed (device, memory) or the arguments are wrong
 * (tol below spmv_solve_min_tol; a b whose norm squares under- or
 * overflow float64, so that no residual could be told from zero or
 * infinity). A residual that is not finite (NaN or Inf in A, x0 or an
 * iterate) stops the method as SPMV_STOP_BREAKDOWN, detail "breakdown:
 * non-finite ...": no further iteration could bring it back. */
int spmv_solve(spmv_gpu_ctx *ctx, const spmv_linop *a, const spmv_vec *b, spmv_vec *x,
               const spmv_solve_options *o, spmv_solve_result *res, spmv_error *err);
void spmv_solve_result_free(spmv_solve_result *res);

/* k systems with one A: b and x hold k columns (x: x0 on entry, the
 * answers on return), res[k] one report each, as spmv_solve's. CG runs
 * them in lockstep (engine/krylov_block.c): one product of the k-column
 * directions per iteration (the operator's apply gets k columns) and the
 * vector steps on the k columns at once (spmv_vec_*_k: inv_diag is applied
 * to all k, a precond callback to the running columns at once through
 * precond_k, else column by column), each column its own
 * scalars and stop; a column that has stopped stops counting. Other methods, and the fused path, solve the columns one
 * after the other. Each report's total_ms is the whole call's. */
int spmv_solve_block(spmv_gpu_ctx *ctx, const spmv_linop *a, const spmv_vec *b, spmv_vec *x,
                     const spmv_solve_options *o, spmv_solve_result *res, spmv_error *err);

/* 1/a_ii for every row of a square CSR, in its dtype, into out (rows
 * values); SPMV_ERR_INVALID naming the first row whose diagonal is missing
 * or zero (Jacobi cannot use it). */
int spmv_csr_inv_diag(const spmv_csr *a, void *out, spmv_error *err);

#ifdef __cplusplus
}
#endif
#endif /* SPMV_KRYLOV_H */
