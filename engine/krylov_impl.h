/* krylov_impl.h — what the solver files share inside the engine.
 *
 * engine/krylov.c holds spmv_solve, the state of one solve and CG,
 * BiCGSTAB and GMRES on the host-scalar path; engine/minres.c adds MINRES
 * on that path; engine/krylov_fused.c drives the fused path on a GPU
 * (scalars on the device, engine/gpu/krylov_fused.cu). They share the
 * solve's state and its helpers (work vectors, the timed product, the
 * history, the stop rules) through the krylov_* functions below, thin
 * names over krylov.c's own, so every path records, stops and words its
 * messages the same way.
 */
#ifndef SPMV_KRYLOV_IMPL_H
#define SPMV_KRYLOV_IMPL_H

#include "krylov.h"

#define MAX_WORK 8

typedef struct solve_state {
    spmv_gpu_ctx *ctx;
    const spmv_linop *a;
    const spmv_solve_options *o;
    spmv_solve_result *res;
    spmv_error *err;
    spmv_vec w[MAX_WORK];      /* work vectors, like b */
    int nw;
    double bnorm;
    int32_t hist_cap;
} solve_state;

/* A work vector like `like`, freed when the solve ends. */
int krylov_work(solve_state *s, const spmv_vec *like, spmv_vec **out);
/* x·y and ||x|| of the whole vector (summed over the ranks by the options'
 * reduce hook when the solve is distributed). */
int krylov_dot(solve_state *s, const spmv_vec *x, const spmv_vec *y, double *out);
int krylov_nrm2(solve_state *s, const spmv_vec *x, double *out);
/* y = A*x through the operator's timed apply (counted in spmv_ms, spmv_calls). */
int krylov_apply(solve_state *s, const spmv_vec *x, spmv_vec *y);
/* r = b - A*x. */
int krylov_residual(solve_state *s, const spmv_vec *b, const spmv_vec *x, spmv_vec *r);
/* z = M^-1 r (the options' preconditioner, Jacobi, or a copy). */
int krylov_precond(solve_state *s, const spmv_vec *r, spmv_vec *z);
bool krylov_preconditioned(const solve_state *s);
/* The history entry of iteration `it`; non-zero when progress cancels. */
int krylov_record(solve_state *s, int32_t it, double relres);
/* The stop is a breakdown of `what` (value) at iteration it + 1. */
void krylov_breakdown(solve_state *s, const char *what, double value, int32_t it);
/* rnorm <= tol * ||b||, marking the stop when so. */
bool krylov_converged(solve_state *s, double rnorm);
/* The true residual b - A*x (into tmp) meets tol too; else the stop goes
 * back to "not yet" and tmp holds the residual to restart from. */
int krylov_truly_converged(solve_state *s, const spmv_vec *b, const spmv_vec *x, spmv_vec *tmp, bool *yes);

/* A column's start: ||b|| into s->bnorm; b = 0 answered (x = 0,
 * converged: *zero_b); a non-finite b or one whose squares under- or
 * overflow refused. */
int krylov_begin(solve_state *s, const spmv_vec *b, spmv_vec *x, bool *zero_b);
/* A column's end: relres from the true residual's norm, the stop (a
 * maxit or breakdown at the answer converged) and its words. */
void krylov_conclude(solve_state *s, double rnorm);
/* spmv_solve's argument checks (one column each of b and x). */
int krylov_check(const spmv_linop *a, const spmv_vec *b, const spmv_vec *x, const spmv_solve_options *o,
                 spmv_error *err);
/* MINRES on the host-scalar path (engine/minres.c), and its breakdowns'
 * words (both paths). */
#define KRYLOV_BD_MINRES_M "r·M⁻¹r (the preconditioner is not positive definite)"
#define KRYLOV_BD_MINRES_GAMMA "gamma (the rotated Lanczos diagonal)"
int krylov_minres(solve_state *s, const spmv_vec *b, spmv_vec *x);

/* The fused path (engine/krylov_fused.c): whether this solve takes it (a
 * GPU, device vectors, an operator with device_apply), and the solve. */
bool krylov_fused_eligible(const solve_state *s, const spmv_vec *b);
int krylov_fused(solve_state *s, const spmv_vec *b, spmv_vec *x);
/* k columns of CG fused at once (engine/krylov_fused.c): whether they
 * take it (the fused path's conditions, CG, no distribution, a callback
 * preconditioner only with its k-column form), and the solve of the
 * columns whose running[j] is true (s[j] begun: krylov_begin), b and x
 * n x k device blocks; each column's report as its own solve's, but for
 * the answer's residual (the caller's). */
bool krylov_fused_block_eligible(const solve_state *s, const spmv_vec *b);
int krylov_fused_block(solve_state *s, int32_t k, const spmv_vec *b, spmv_vec *x, const bool *running);

#define TRY(call)                     \
    do {                              \
        if ((st = (call)) != SPMV_OK) \
            return st;                \
    } while (0)

#endif /* SPMV_KRYLOV_IMPL_H */
