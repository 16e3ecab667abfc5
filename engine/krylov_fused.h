/* krylov_fused.h — the fused path's device half, as its driver sees it.
 *
 * engine/krylov_fused.c runs CG, BiCGSTAB, GMRES and MINRES with their
 * scalars on the GPU; engine/gpu/krylov_fused.cu holds the kernels and the
 * machinery under them: one block of device memory with the recurrence's
 * scalars (fz_scalars) and a ring of residuals (the history), grid-wide
 * reductions whose last block forms the next scalars and sets the stop
 * flag, an asynchronous copy of that block into pinned host memory with an
 * event (two slots, so the host reads one while the next chunk runs), and
 * a CUDA graph of one chunk of iterations. A build without CUDA answers
 * SPMV_ERR_UNAVAILABLE (engine/gpu/absent.c); the driver never asks then.
 */
#ifndef SPMV_KRYLOV_FUSED_H
#define SPMV_KRYLOV_FUSED_H

#include <stdint.h>

#include "krylov.h"
#include "spmv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Why the device stopped iterating (fz_scalars.stop). CONVERGED means the
 * recurrence met tol (GMRES: the true residual at a cycle's end). */
enum fz_stop { FZ_RUNNING = 0, FZ_CONVERGED, FZ_BREAKDOWN, FZ_MAXIT };

/* The quantity a breakdown names (fz_scalars.what); the driver words it as
 * the host path does. */
enum fz_what {
    FZ_BD_PAP = 0, FZ_BD_RZ, FZ_BD_RHO, FZ_BD_R0V, FZ_BD_TT, FZ_BD_OMEGA, FZ_BD_MR_RZ, FZ_BD_GAMMA, FZ_BD_HESS,
    FZ_BD_PEER /* not a breakdown: a sum across the processes got no answer (spmv_allsum_dev) */
};

/* The scalars of a solve on the device. The driver writes them at a
 * (re)start and reads them at every check; the kernels own them between. */
typedef struct fz_scalars {
    int32_t it;            /* iterations done over the whole solve (the device's count) */
    int32_t stop;          /* enum fz_stop */
    int32_t what, bd_it;   /* a breakdown: the quantity and the 0-based iteration */
    double value;          /* its value */
    int32_t maxit;
    int32_t live;          /* 1: the iteration (GMRES: the cycle's columns) goes on */
    int32_t upd;           /* 1: the last step's update of x is still to be done */
    int32_t used, nused;   /* GMRES: columns of this cycle, columns the update applies */
    double thresh;         /* tol * ||b|| */
    double bnorm;
    double rnorm;          /* the last residual norm formed (GMRES: true, at a cycle's end) */
    /* CG */
    double rz, pq;
    /* CG and BiCGSTAB */
    double alpha, beta;
    /* BiCGSTAB */
    double rho, rho_new, omega;
    /* MINRES */
    double mbeta, oldb, dbar, epsln, phibar, cs, sn, scale, alfa, gamma, delta, oldeps, phi;
    /* GMRES */
    double hn;
} fz_scalars;

/* The kernels (spmv_gpu_fz_run's op); the vectors each takes, in order,
 * with "-" for an optional one (NULL: none). i and j index GMRES's basis. */
enum fz_op {
    FZ_CG_PQ,      /* p q: pq = p·q, alpha = rz/pq */
    FZ_CG_R,       /* q r -d: r -= alpha q, ||r||, and (i = 0) beta from rz = r·D⁻¹r or r·r */
    FZ_CG_RZ,      /* r z: rz = r·z, beta (a callback preconditioner made z) */
    FZ_CG_P,       /* r -d -z p x: x += alpha p, p = (z | D⁻¹r | r) + beta p */
    FZ_BI_P,       /* r v p -ph -d: p = r + beta (p - omega v), ph = D⁻¹p */
    FZ_BI_ALPHA,   /* r0 v: alpha = rho_new / r0·v */
    FZ_BI_S,       /* r v x ph -sh -d: r -= alpha v (now s), x += alpha ph, ||s||, sh = D⁻¹s */
    FZ_BI_OMEGA,   /* t r: omega = t·s / t·t */
    FZ_BI_END,     /* x r t sh r0: x += omega sh, r = s - omega t, ||r||, rho_new = r0·r, beta */
    FZ_MR_ALFA,    /* y r1 v: y -= (beta/oldb) r1, alfa = v·y */
    FZ_MR_BETA,    /* y r2 -d: y -= (alfa/beta) r2, then (i = 0) beta = sqrt(y·D⁻¹y or y·y) and the rotations */
    FZ_MR_RZ,      /* r2 z: beta = sqrt(r2·z) and the rotations (a callback preconditioner made z) */
    FZ_MR_WXV,     /* v w w1 w2 x r2 -d -z: w = (v - oldeps w1 - delta w2)/gamma, x += phi w, v = z/beta */
    FZ_GM_MGS,     /* V: w = V[j+1] -= H(i-1,j) V[i-1]; i <= j: H(i,j) = V[i]·w; i = j+1: ||w||, Givens */
    FZ_GM_SCALE,   /* V -zt -d: V[j+1] /= hn, zt = D⁻¹V[j+1] */
    FZ_GM_SOLVE,   /* (none): y = H⁻¹ g over the used columns */
    FZ_GM_UPDATE,  /* V x -d (i = 0) or V zt (i = 1): x += D⁻¹ V y, or zt = V y */
    FZ_GM_ADD,     /* z x: x += z (after the callback's z = M⁻¹ V y) */
    FZ_GM_RESID,   /* b r: r = b - r (r held A x), the cycle's true residual and what next */
    FZ_GM_START,   /* r V -zt -d: V[0] = r / ||r||, g = ||r|| e1, zt = D⁻¹V[0] */
    FZ_CG_ITER,    /* p q r -d x: FZ_CG_PQ, FZ_CG_R and FZ_CG_P in one cooperative launch (spmv_gpu_fz_one_pass) */
    FZ_OPS
};

typedef struct spmv_gpu_fz spmv_gpu_fz;

/* The device block for a solve of n values: scalars, a history ring of
 * hist_len entries, reduction scratch, and for GMRES (m > 0) the
 * Hessenberg matrix, rotations, g and y of restart m. GMRES's basis V is
 * one allocation of m+1 columns of n values, passed to its kernels.
 * all (NULL: one process): every reduction's sums are summed across the
 * processes of a distributed solve through it. */
int spmv_gpu_fz_new(spmv_gpu_ctx *ctx, int64_t n, int32_t hist_len, int32_t m, const spmv_allsum_dev *all,
                    spmv_gpu_fz **out, spmv_error *err);
/* The same for ncols columns of CG at once (the k-column lockstep): each
 * column its own scalars, history and reduction scratch in one block, CG's
 * kernels (FZ_CG_PQ, _R, _RZ, _P) launched once for all with the grid's y
 * the column, their block vectors n x ncols (column-major; Jacobi's 1/diag
 * one column for all); one status copy holds every column's. Not with a
 * restart or a distributed sum. */
int spmv_gpu_fz_new_k(spmv_gpu_ctx *ctx, int64_t n, int32_t ncols, int32_t hist_len, int32_t m,
                      const spmv_allsum_dev *all, spmv_gpu_fz **out, spmv_error *err);
void spmv_gpu_fz_free(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz);
/* Whether CG's vector work of an iteration can be FZ_CG_ITER, one
 * cooperative kernel holding q and r in registers across its two grid-wide
 * syncs (7 passes over the vectors where the three kernels make 10): one
 * process, the device takes cooperative launches, and n fits the
 * registers of the grid that is resident at once. */
bool spmv_gpu_fz_one_pass(const spmv_gpu_fz *fz);
/* Host <-> device copies of the scalars that wait (a (re)start, the end). */
int spmv_gpu_fz_put(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, const fz_scalars *sc, spmv_error *err);
int spmv_gpu_fz_put_col(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, int32_t col, const fz_scalars *sc, spmv_error *err);
/* Queues the copy of the scalars and the history into pinned slot 0 or 1
 * and records its event; wait returns them once the copy is done
 * (*hist[i % hist_len] is the relative residual of iteration i). */
int spmv_gpu_fz_post(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, int slot, spmv_error *err);
/* Whether slot's copy has landed (not waiting for it). */
int spmv_gpu_fz_poll(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, int slot, bool *ready, spmv_error *err);
int spmv_gpu_fz_wait(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, int slot, const fz_scalars **sc, const double **hist,
                     spmv_error *err);
/* Column col's scalars and history of slot's copy. */
int spmv_gpu_fz_wait_col(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, int slot, int32_t col, const fz_scalars **sc,
                         const double **hist, spmv_error *err);
/* Queues one kernel of the fused iteration (enum fz_op). */
int spmv_gpu_fz_run(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, int op, int32_t i, int32_t j, const spmv_vec *const *v,
                    spmv_error *err);
/* Capture what is queued between begin and end as fz's graph; end with
 * ok false (something failed in between) abandons it. end answers
 * SPMV_ERR_UNAVAILABLE when the work could not be captured: the caller
 * then launches it directly. */
int spmv_gpu_fz_capture_begin(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, spmv_error *err);
int spmv_gpu_fz_capture_end(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, bool ok, spmv_error *err);
int spmv_gpu_fz_replay(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, spmv_error *err);
/* Drops fz's graph (once the work queued so far is done): the next chunk
 * is queued directly, or captured again. */
void spmv_gpu_fz_uncapture(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz);

#ifdef __cplusplus
}
#endif
#endif /* SPMV_KRYLOV_FUSED_H */
