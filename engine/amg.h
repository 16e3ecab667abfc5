/* amg.h — smoothed aggregation algebraic multigrid, as a preconditioner.
 *
 * The algorithm PyAMG's smoothed_aggregation_solver and AmgX's aggregation
 * AMG implement, written here: per level, the strength of connection
 * (|a_ij| >= theta sqrt(|a_ii a_jj|), on blocks for block_size > 1), an
 * aggregation of the strong graph (PyAMG's standard three passes, or the
 * parallel mis2), a tentative
 * prolongator that fits the near-nullspace candidates on each aggregate
 * (a QR per aggregate: the constant vector by default, the rigid-body
 * modes for elasticity), smoothed by one damped Jacobi step
 * (P = (I - omega D^-1 A) T, omega = 4/3 / rho(D^-1 A)), R = P^T and the
 * Galerkin product A_c = R A P; until the coarsest level has at most
 * max_coarse rows, whose inverse is kept dense. A V-cycle smooths with
 * damped Jacobi or a Chebyshev polynomial in D^-1 A, the same before and
 * after, so the preconditioner is symmetric when A is (what CG needs).
 *
 * The host's setup runs in float64 (OpenMP where it pays); a level's
 * products (P, R and A_c from A and T) may go to another backend through
 * spmv_amg_products (the GPU's cuSPARSE SpGEMM, engine/gpu/amg_setup.cu:
 * tested, used by amg-profile --gpu). A GPU preconditioner builds the whole
 * hierarchy on the device instead (spmv_gpu_amg_build, engine/gpu/
 * amg_build.cu) with mis2 aggregation, the host's setup with mis2 its
 * reference; the host's hierarchy is what spmv_gpu_amg_upload copies where
 * the device build does not apply (docs/kernels.md, "The AMG setup"), and
 * spmv_amg_vcycle is the host's cycle, the reference the device's is
 * tested against.
 */
#ifndef SPMV_AMG_H
#define SPMV_AMG_H

#include <stdbool.h>
#include <stdint.h>

#include "spmv.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum spmv_amg_smoother { SPMV_AMG_CHEBYSHEV = 0, SPMV_AMG_JACOBI = 1 } spmv_amg_smoother;

/* How a level's nodes are grouped. standard: PyAMG's serial three-pass
 * aggregation. mis2: the roots are a maximal distance-2 independent set of
 * the strong graph, found in parallel rounds (Bell, Dalton & Olson 2012),
 * every other node joins a root at distance one, then two: the same
 * aggregates on the host (spmv_amg_mis2) and on a GPU, which builds the
 * whole hierarchy itself with it (spmv_gpu_amg_build). auto: mis2 where
 * the setup runs on a GPU, standard on the host. */
typedef enum spmv_amg_aggregation {
    SPMV_AMG_AGG_AUTO = 0,
    SPMV_AMG_AGG_STANDARD = 1,
    SPMV_AMG_AGG_MIS2 = 2
} spmv_amg_aggregation;

/* "auto", "standard", "mis2". */
const char *spmv_amg_aggregation_name(spmv_amg_aggregation a);

typedef struct spmv_amg_options {
    int32_t max_levels;           /* 10 */
    int32_t max_coarse;           /* rows of the coarsest level, solved densely: 500 */
    double strength;              /* theta of the strength test: 0.0 (every non-zero is strong) */
    spmv_amg_smoother smoother;   /* Chebyshev (default) or damped Jacobi */
    int32_t presmooth, postsmooth;/* sweeps before and after the coarse correction: 1, 1 */
    int32_t degree;               /* Chebyshev degree: 2 */
    int32_t block_size;           /* unknowns per node (3 for 3-D elasticity): 1 */
    const double *near_nullspace; /* rows x k, column-major; NULL: the constant per block component */
    int32_t nullspace_k;          /* its columns (k <= 16) */
    spmv_amg_aggregation aggregation; /* auto */
} spmv_amg_options;

/* The defaults above. */
void spmv_amg_defaults(spmv_amg_options *o);
/* Checks the options' ranges: SPMV_OK or SPMV_ERR_INVALID naming the one
 * out of range. */
int spmv_amg_check_options(const spmv_amg_options *o, int32_t rows, spmv_error *err);

/* One level: its operator, the interpolation to it from the next coarser
 * level (P: rows x coarse rows) and back (R = P^T), and what the smoother
 * needs. All float64 host CSR. Level 0's A is the caller's matrix (a copy
 * when it was not float64). */
typedef struct spmv_amg_level {
    spmv_csr A, P, R;
    double *dinv;                 /* 1 / diag(A) */
    double rho;                   /* estimate of the spectral radius of D^-1 A */
    double *r, *x, *b, *d;        /* the cycle's work vectors at this level */
} spmv_amg_level;

/* The setup's phases, timed (spmv_amg's phase_ms; tools/amg-profile.c
 * prints them): the graph and the aggregates, the tentative prolongator,
 * the products, copies to and from a device when the products run on one,
 * a level's 1/diag and rho, the coarse inverse. */
typedef enum spmv_amg_phase {
    SPMV_AMG_STRENGTH,
    SPMV_AMG_AGGREGATE,
    SPMV_AMG_TENTATIVE,
    SPMV_AMG_AT,          /* A T */
    SPMV_AMG_SMOOTH,      /* P = T - omega D^-1 (A T), element-wise */
    SPMV_AMG_TRANSPOSE,   /* R = P^T */
    SPMV_AMG_AP,          /* A P */
    SPMV_AMG_RAP,         /* A_c = R (A P) */
    SPMV_AMG_COPY,        /* host <-> device, when the products run on a device */
    SPMV_AMG_LEVEL,       /* 1/diag, rho, the work vectors */
    SPMV_AMG_COARSE,      /* the coarsest level's dense inverse */
    SPMV_AMG_PHASES
} spmv_amg_phase;

/* The phase's name ("strength", "A*T", ...). */
const char *spmv_amg_phase_name(spmv_amg_phase p);

typedef struct spmv_amg {
    spmv_amg_options o;
    int32_t nlevels;
    spmv_amg_level *lv;
    int32_t coarse_n;             /* rows of the coarsest level */
    double *coarse_inv;           /* its dense inverse, row-major */
    double setup_ms;
    double phase_ms[SPMV_AMG_PHASES]; /* setup_ms split by phase, summed over the levels */
    double operator_complexity;   /* sum of nnz(A_l) / nnz(A_0) */
    double grid_complexity;       /* sum of rows(A_l) / rows(A_0) */
    int64_t bytes;                /* host bytes of the hierarchy (level 0's A not counted) */
    double *kwork;                /* spmv_amg_vcycle_k's blocks, made on first use, grown for more columns */
    int64_t kwork_len;            /* their doubles */
} spmv_amg;

/* Builds the hierarchy of a square matrix (either dtype; the hierarchy is
 * float64). *out is freshly allocated; spmv_amg_free frees it. */
int spmv_amg_setup(const spmv_csr *a, const spmv_amg_options *o, spmv_amg **out, spmv_error *err);

/* A level's products, given A (float64 CSR, sorted), 1/diag(A), the
 * damping omega and the tentative prolongator T (sorted, at most one
 * aggregate's k columns a row): P = T - omega D^-1 (A T) on the pattern of
 * A T, R = P^T and A_c = R (A P), each sorted float64 CSR, the pattern the
 * symbolic product's (cancellations kept), freshly allocated (the caller
 * frees them, also on failure). ms: spmv_amg's phase_ms, where the hook
 * adds the time of the phases it runs (AT .. COPY). arg is the hook's
 * own (a GPU context for spmv_gpu_amg_products). */
typedef int (*spmv_amg_products_fn)(void *arg, const spmv_csr *A, const double *dinv, double omega,
                                    const spmv_csr *T, spmv_csr *P, spmv_csr *R, spmv_csr *Ac, double *ms,
                                    spmv_error *err);
typedef struct spmv_amg_products {
    spmv_amg_products_fn fn;
    void *arg;
} spmv_amg_products;

/* spmv_amg_setup with the level's products by `products` (NULL: the
 * host's, spmv_amg_host_products). Strength, aggregation, the tentative
 * prolongator, 1/diag, rho and the coarse inverse stay on the host, so the
 * aggregates are the same whichever computes the products. */
int spmv_amg_setup_with(const spmv_csr *a, const spmv_amg_options *o, const spmv_amg_products *products,
                        spmv_amg **out, spmv_error *err);
/* The host's products (arg unused): cpu.spmspm.omp for A T, A P and
 * R (A P), an OpenMP pass for the smoothing, a serial transpose. The
 * reference every other hook is tested against. */
int spmv_amg_host_products(void *arg, const spmv_csr *A, const double *dinv, double omega, const spmv_csr *T,
                           spmv_csr *P, spmv_csr *R, spmv_csr *Ac, double *ms, spmv_error *err);
void spmv_amg_free(spmv_amg *h);
/* z = M^-1 r: one V-cycle from z = 0 on the host (n = rows of level 0). */
void spmv_amg_vcycle(spmv_amg *h, const double *r, double *z);
/* The same cycle on k columns at once: r and z n x k, column-major (column
 * j at j * n), each level's products one pass over its operator for all k
 * (an SpMM), each smoothing step one loop over the block, the coarse solve
 * the dense inverse times the k columns; inside, the blocks are
 * interleaved (a row's k values side by side). Column j of z is, bit for bit,
 * spmv_amg_vcycle of column j of r. Its work blocks (4 per level, n_l x k)
 * are kept in h and grown for a larger k: SPMV_ERR_NOMEM when they cannot
 * be, SPMV_ERR_INVALID for k < 1. Not for two threads at once on one h. */
int spmv_amg_vcycle_k(spmv_amg *h, int32_t k, const double *r, double *z, spmv_error *err);

/* A level on its own, for a smoother used alone (engine/precond_cheb.c's
 * chebyshev preconditioner): a float64 copy of square matrix a (either
 * dtype, 32-bit offsets), 1/diag (SPMV_ERR_INVALID naming a row whose
 * diagonal is zero), rho and the work vectors; P and R empty. Nothing is
 * left allocated on failure. */
int spmv_amg_level_init(const spmv_csr *a, spmv_amg_level *lv, spmv_error *err);
void spmv_amg_level_free(spmv_amg_level *lv);
/* The spectral radius of D^-1 A (a float64), estimated by 20 Lanczos
 * steps on D^-1/2 A D^-1/2 from a fixed start of every frequency (power
 * iteration when the diagonal is not positive), times 1.05; u and w:
 * rows scratch. */
double spmv_amg_spectral_radius(const spmv_csr *a, const double *dinv, double *u, double *w);
/* The pieces of spmv_amg_spectral_radius a device shares (the GPU's
 * setup runs the same Lanczos): its steps, its start (a fixed value of
 * every frequency at row i), and the estimate from the tridiagonal
 * (alpha, beta) of order k: its largest eigenvalue times 1.05, 1 for
 * k = 0. */
#define SPMV_AMG_RHO_ITERS 20
double spmv_amg_ritz_max(const double *alpha, const double *beta, int k);
/* The mis2 aggregation of a graph of n nodes (adj[ptr[i] .. ptr[i+1]):
 * node i's strong neighbours, i not among them; symmetric, as a
 * symmetric matrix's strength graph is): agg[i] is node i's aggregate, -1
 * for an isolated node (no neighbour); *naggs their count. In rounds
 * until no node is undecided, every undecided node whose key is the
 * largest within distance two joins the roots, and one that sees a root's
 * key there leaves; keys order by state (root > undecided > out), then
 * spmv_amg_mis2_key's hash, then index. Roots are numbered in index
 * order; a node next to a root joins the one of largest key, a node next
 * to such a node joins that node's aggregate (of largest key), and what
 * is left (an asymmetric graph) forms one aggregate a node, numbered
 * after, in index order. The GPU's (engine/gpu/amg_build.cu) makes the
 * same aggregates. SPMV_ERR_NOMEM when its scratch cannot be had. */
int spmv_amg_mis2(int32_t n, const int32_t *ptr, const int32_t *adj, int32_t *agg, int32_t *naggs, int32_t *rounds,
                  spmv_error *err);
#ifdef __CUDACC__
#define SPMV_AMG_HD __host__ __device__
#else
#define SPMV_AMG_HD
#endif
/* Node i's key in mis2 with state s (0 out, 1 undecided, 2 root): the
 * state, then 31 bits of hash, then the index. */
static inline SPMV_AMG_HD uint64_t spmv_amg_mis2_key(uint32_t s, int32_t i)
{
    uint32_t h = (uint32_t)i * 0x9E3779B1u;
    h ^= h >> 15;
    h *= 0x85EBCA77u;
    h ^= h >> 13;
    return ((uint64_t)s << 62) | ((uint64_t)(h & 0x7FFFFFFFu) << 31) | (uint64_t)(uint32_t)i;
}
/* Lanczos's start at row i: a fixed value in [-1, 1) with every frequency
 * in it (a smooth start holds little of the top eigenvector of D^-1 A,
 * the oscillating one, and an estimate from it comes out low, which a
 * Chebyshev smoother past its interval turns into divergence). */
static inline SPMV_AMG_HD double spmv_amg_start_value(int32_t i)
{
    uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53 * 2.0 - 1.0;
}
/* The coarsest level's inverse: a's dense inverse (n x n, row-major, n =
 * a's rows) by Gauss-Jordan with partial pivoting; a pivot that vanishes
 * leaves its row and column zero (a generalised inverse). */
int spmv_amg_dense_inverse(const spmv_csr *a, double **inv, spmv_error *err);

/* One Chebyshev sweep on lv->A x = b with the level's rho: the polynomial
 * of `degree` in D^-1 A smallest on [rho/30, 1.1 rho]; `zero`: x is zero
 * on entry, and then x = p(D^-1 A) D^-1 b. Uses lv->r and lv->d. */
void spmv_amg_chebyshev(spmv_amg_level *lv, int32_t degree, const double *b, double *x, bool zero);
/* The same sweep from zero on k columns at once (b and x n x k,
 * column-major), r, d, bi and xi its n x k work blocks: each column of x
 * is, bit for bit, spmv_amg_chebyshev's (zero) for that column alone. */
void spmv_amg_chebyshev_k(const spmv_amg_level *lv, int32_t degree, int32_t k, const double *b, double *x, double *r,
                          double *d, double *bi, double *xi);
/* The rigid-body modes of 3-D elasticity at nodes with coordinates xyz
 * (n nodes, x y z interleaved): 6 columns of 3n rows, column-major, into
 * out (18 n values): three translations, three rotations. */
void spmv_amg_rigid_body(int64_t n, const double *xyz, double *out);

/* ------------------------------------------------ on a GPU (gpu/amg.cu) */

/* A hierarchy copied to a GPU: every level's A, P and R as device CSR
 * with cuSPARSE descriptors, 1/diag, the work vectors, and the coarse
 * inverse, all in float64, or all in float32 (issue 29's "precision":
 * "float32": half the bytes and memory traffic, the cycle in float32); the
 * cycle runs on the context's stream, the same algorithm as
 * spmv_amg_vcycle (its reference in the tests). */
typedef struct spmv_gpu_amg spmv_gpu_amg;

/* Copies h to ctx's device (on the context's own thread), its values
 * converted to dtype. */
int spmv_gpu_amg_upload(spmv_gpu_ctx *ctx, const spmv_amg *h, spmv_dtype dtype, spmv_gpu_amg **out, spmv_error *err);
/* A smoother alone on a GPU (the chebyshev preconditioner): level lv
 * (spmv_amg_level_init's) copied in float64; spmv_gpu_amg_vcycle then runs
 * one Chebyshev sweep of `degree` from zero, spmv_amg_chebyshev's. */
int spmv_gpu_amg_upload_smoother(spmv_gpu_ctx *ctx, const spmv_amg_level *lv, int32_t degree, spmv_gpu_amg **out,
                                 spmv_error *err);
void spmv_gpu_amg_free(spmv_gpu_ctx *ctx, spmv_gpu_amg *g);
/* spmv_amg_products_fn on ctx's device (arg: the spmv_gpu_ctx, on its own
 * thread): A and T copied up, A T, A P and R (A P) by cuSPARSE SpGEMM in
 * float64, the smoothing by a kernel, R = P^T by cusparseCsr2cscEx2; P, R
 * and A_c copied back (rows sorted). Equal to spmv_amg_host_products up to
 * rounding, the same patterns. */
int spmv_gpu_amg_products(void *ctx, const spmv_csr *A, const double *dinv, double omega, const spmv_csr *T,
                          spmv_csr *P, spmv_csr *R, spmv_csr *Ac, double *ms, spmv_error *err);
/* What a hierarchy built on a GPU is: its levels' rows and non-zeros,
 * the complexities, its setup time split by phase (spmv_amg's phase_ms),
 * the mis2 rounds a level took. */
typedef struct spmv_amg_summary {
    int32_t nlevels, coarse_n;
    int32_t rows[32];
    int64_t nnz[32];
    int32_t rounds[32];
    double operator_complexity, grid_complexity;
    double setup_ms, phase_ms[SPMV_AMG_PHASES];
} spmv_amg_summary;
/* Builds the whole hierarchy on ctx's device (on its own thread), the
 * host's algorithm with mis2 aggregation (engine/gpu/amg_build.cu): level
 * 0's A copied up once, then every level's 1/diag, rho (the host's
 * Lanczos), strength graph, aggregates, tentative prolongator, P, R and
 * A_c made there, only the coarsest A coming back for its dense inverse;
 * held in dtype. The hierarchy is the host's spmv_amg_setup with
 * aggregation mis2 to rounding (the tests' reference).
 * SPMV_ERR_UNAVAILABLE (nothing built: the host builds it) where the
 * device build does not apply: block_size > 1, a near-nullspace, standard
 * aggregation, 64-bit offsets, a row whose columns do not increase, a
 * diagonal that is not positive. SPMV_ERR_INVALID names a row with a zero
 * or non-finite diagonal. */
int spmv_gpu_amg_build(spmv_gpu_ctx *ctx, const spmv_csr *a, const spmv_amg_options *o, spmv_dtype dtype,
                       spmv_gpu_amg **out, spmv_amg_summary *sum, spmv_error *err);
/* Level l's A, P and R of a hierarchy on a GPU, copied back as float64
 * host CSR (P and R empty at the coarsest level): for the tests. */
int spmv_gpu_amg_level_get(spmv_gpu_ctx *ctx, const spmv_gpu_amg *g, int32_t l, spmv_csr *A, spmv_csr *P, spmv_csr *R,
                           spmv_error *err);
/* Device bytes the hierarchy holds. */
size_t spmv_gpu_amg_bytes(const spmv_gpu_amg *g);
/* z = M^-1 r, one V-cycle from zero; r and z vectors of ctx's device, one
 * column, of the hierarchy's rows, float64 or float32 (converted on the
 * way in and out when not the hierarchy's dtype). */
int spmv_gpu_amg_vcycle(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, const spmv_vec *r, spmv_vec *z, spmv_error *err);
/* The same with level 0's products by `fine` (NULL: as spmv_gpu_amg_vcycle),
 * a product by the matrix the hierarchy was built from, resident on ctx's
 * device in the hierarchy's dtype, on r and z of that dtype (else it is
 * not used, and vectors of the other dtype are converted through the
 * hierarchy's own cycle): each residual of
 * level 0 is fine's y = A x and one pass r = b - y, in place of the
 * hierarchy's own copy of A (cuSPARSE's CSR SpMV on r = b, then -A x + r). */
int spmv_gpu_amg_vcycle_with(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, const spmv_gpu_product *fine, const spmv_vec *r,
                             spmv_vec *z, spmv_error *err);
/* The same cycle (or a smoother-only object's sweep) on k columns at once:
 * r and z n x k device blocks (column-major) of one dtype; active (NULL:
 * all) the columns to cycle, the others' z left alone. Every product is
 * one cuSPARSE SpMM of the active columns, every smoothing step one
 * kernel over them, the coarse solve one cuBLAS gemm: the launches of one
 * column's cycle whatever k is. The active columns are gathered into
 * staging blocks (and converted there when not the hierarchy's dtype)
 * unless all are active and of its dtype; the work blocks (4 per level,
 * n_l x k) are made on first use and grown for a larger k. Column j of z
 * equals spmv_gpu_amg_vcycle of column j of r to rounding (cuSPARSE's
 * SpMM adds in its own order). */
int spmv_gpu_amg_vcycle_k(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, const spmv_vec *r, spmv_vec *z, const bool *active,
                          spmv_error *err);

#ifdef __cplusplus
}
#endif

#endif
