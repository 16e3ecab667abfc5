/* amg_build.cu — the whole smoothed aggregation setup on a GPU (issue 29).
 *
 * spmv_gpu_amg_build (amg.h) makes the hierarchy where its V-cycle runs:
 * level 0's A goes up once, and every level is made from the one before
 * on the context's stream:
 *
 *   1/diag          one thread a row (a zero or non-finite diagonal named,
 *                   as the host names it)
 *   rho(D^-1 A)     the host's 20 Lanczos steps (cuSPARSE SpMV, dots in a
 *                   fixed order: the same value every run)
 *   strength        |a_ij|^2 >= theta^2 |a_ii a_jj|: a count, a scan (CUB),
 *                   a fill; the host's graph exactly (the same products)
 *   aggregates      mis2 (amg.h): rounds of two max-sweeps of the nodes'
 *                   keys over the graph, then the joins, each a kernel
 *                   that reads only what the step before wrote, so the
 *                   aggregates are the host's spmv_amg_mis2's exactly
 *   T, B_c          the candidate's norm per aggregate (atomics), T's one
 *                   entry a row, B_c the norms
 *   P, R, A_c       amg_setup.cu's products on the device operands
 *
 * until the host's stop (max_levels, max_coarse, no aggregate or too few
 * fewer); only the coarsest A comes back, for its dense inverse
 * (spmv_amg_dense_inverse). The hierarchy is built in float64 and
 * converted at the end when held in float32. Everything a level needs
 * only while it is made is freed before the next.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cub/cub.cuh>

#include "amg.cuh"

#define BB 256
#define DOT_BLOCKS 1024
#define GRID(n) gpu_grid((n), BB), BB, 0, b->ctx->stream

enum { MIS_OUT = 0, MIS_UNDECIDED = 1, MIS_ROOT = 2 };

/* The build's state. */
struct build {
    spmv_gpu_ctx *ctx;
    spmv_amg_options o;
    spmv_gpu_amg *g;
    spmv_amg_summary *sum;
    double t0;
    double *dinv[32];    /* each level's 1/diag in float64 while building */
    int *flags;          /* [0] a bad diagonal's row (INT32_MAX: none), [1] one not positive, [2] a count */
    double *part;        /* DOT_BLOCKS partial sums, then the dot at part[DOT_BLOCKS] */
    size_t scratch;      /* bytes counted for the build's own arrays (not kept) */
};

static int cuda_ok(cudaError_t e, spmv_error *err, const char *what)
{
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, what);
}

static int sparse_ok(cusparseStatus_t s, spmv_error *err, const char *what)
{
    return s == CUSPARSE_STATUS_SUCCESS ? SPMV_OK : gpu_sparse_error(s, err, what);
}

/* Waits for the stream; adds the time since the last lap to `phase`. */
static int lap(build *b, spmv_amg_phase phase, spmv_error *err)
{
    int st = gpu_sync_stream(b->ctx, err, spmv_amg_phase_name(phase));
    double t = spmv_now_ms();
    b->sum->phase_ms[phase] += t - b->t0;
    b->t0 = t;
    return st;
}

static int take(build *b, void **p, size_t bytes, const char *what, spmv_error *err)
{
    return gpu_ctx_alloc(b->ctx, p, gpu_nz(bytes), what, err);
}

static void give(build *b, void *p, size_t bytes) { gpu_ctx_free(b->ctx, p, gpu_nz(bytes)); }

/* --------------------------------------------------------- the kernels */

/* dinv = 1 / diag (summed over a row's diagonal entries, as the host
 * does), dn = diag^2 (the strength test's norm); flags[0]: the first bad
 * row, flags[1]: a diagonal not positive. */
__global__ void bd_diag(int32_t n, const int32_t *__restrict__ rp, const int32_t *__restrict__ col,
                        const double *__restrict__ val, double *dinv, double *dn, int *flags)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    double d = 0;
    for (int32_t p = rp[i]; p < rp[i + 1]; p++)
        if (col[p] == i)
            d += val[p];
    if (d == 0.0 || !isfinite(d))
        atomicMin(&flags[0], i);
    dinv[i] = 1.0 / d;
    dn[i] = __dmul_rn(d, d);
    if (!(dinv[i] > 0))
        flags[1] = 1;
}

/* The strong entries of row i: counted (adj NULL) or written at adj[sp[i]..]. */
__global__ void bd_strength(int32_t n, const int32_t *__restrict__ rp, const int32_t *__restrict__ col,
                            const double *__restrict__ val, const double *__restrict__ dn, double t2, int32_t *cnt,
                            const int32_t *__restrict__ sp, int32_t *adj)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    int32_t c = 0, e = adj ? sp[i] : 0;
    for (int32_t p = rp[i]; p < rp[i + 1]; p++) {
        int32_t j = col[p];
        double nrm = __dmul_rn(val[p], val[p]);
        if (j != i && nrm > 0.0 && nrm >= __dmul_rn(t2, sqrt(__dmul_rn(dn[i], dn[j])))) {
            if (adj)
                adj[e++] = j;
            c++;
        }
    }
    if (!adj)
        cnt[i] = c;
}

__global__ void bd_mis_init(int32_t n, const int32_t *__restrict__ sp, uint8_t *state)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        state[i] = sp[i + 1] > sp[i] ? MIS_UNDECIDED : MIS_OUT;
}

__global__ void bd_mis_keys(int32_t n, const uint8_t *__restrict__ state, uint64_t *t)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        t[i] = spmv_amg_mis2_key(state[i], i);
}

__global__ void bd_mis_spread(int32_t n, const int32_t *__restrict__ sp, const int32_t *__restrict__ adj,
                              const uint64_t *__restrict__ in, uint64_t *__restrict__ out)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    uint64_t m = in[i];
    for (int32_t p = sp[i]; p < sp[i + 1]; p++)
        m = max(m, in[adj[p]]);
    out[i] = m;
}

/* flags[2] counts the nodes left undecided. */
__global__ void bd_mis_decide(int32_t n, uint8_t *state, const uint64_t *__restrict__ t, int *flags)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || state[i] != MIS_UNDECIDED)
        return;
    if (t[i] == spmv_amg_mis2_key(MIS_UNDECIDED, i))
        state[i] = MIS_ROOT;
    else if (t[i] >> 62 == MIS_ROOT)
        state[i] = MIS_OUT;
    else
        atomicAdd(&flags[2], 1);
}

/* what[i] = 1 where state[i] is `s` (roots), or where agg[i] == -2 (s < 0). */
__global__ void bd_flag(int32_t n, const uint8_t *__restrict__ state, int s, const int32_t *__restrict__ agg,
                        int32_t *what)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        what[i] = s >= 0 ? state[i] == s : agg[i] == -2;
}

__global__ void bd_agg_init(int32_t n, const uint8_t *__restrict__ state, const int32_t *__restrict__ sp,
                            const int32_t *__restrict__ id, int32_t *agg)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        agg[i] = state[i] == MIS_ROOT ? id[i] : sp[i + 1] > sp[i] ? -2 : -1;
}

/* A node still to join takes the aggregate of its neighbour of largest key
 * among those already in one, marked (<= -3) so this pass reads only those. */
__global__ void bd_agg_join(int32_t n, const int32_t *__restrict__ sp, const int32_t *__restrict__ adj, int32_t *agg)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || agg[i] != -2)
        return;
    int32_t best = -1, a = -1;
    for (int32_t p = sp[i]; p < sp[i + 1]; p++) {
        int32_t j = adj[p], aj = agg[j];
        if (aj >= 0 && (best < 0 || spmv_amg_mis2_key(0, j) > spmv_amg_mis2_key(0, best))) {
            best = j;
            a = aj;
        }
    }
    if (best >= 0)
        agg[i] = -(a + 3);
}

/* Unmarks the joins; with id (the leftovers' scan), numbers the leftovers from `next`. */
__global__ void bd_agg_settle(int32_t n, int32_t *agg, const int32_t *__restrict__ id, int32_t next)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    int32_t a = agg[i];
    agg[i] = a <= -3 ? -a - 3 : (a == -2 && id) ? next + id[i] : a;
}

__global__ void bd_norms(int32_t n, const int32_t *__restrict__ agg, const double *__restrict__ B, double *nrm2)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && agg[i] >= 0)
        atomicAdd(&nrm2[agg[i]], __dmul_rn(B[i], B[i]));
}

__global__ void bd_sqrt(int32_t n, double *v)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        v[i] = sqrt(v[i]);
}

__global__ void bd_in_agg(int32_t n, const int32_t *__restrict__ agg, int32_t *c)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = agg[i] >= 0;
}

/* T's entry of row i: column agg[i], B[i] / the aggregate's norm (0 for a
 * zero norm: the host's dependent column). */
__global__ void bd_tent(int32_t n, const int32_t *__restrict__ agg, const double *__restrict__ B,
                        const double *__restrict__ norm, const int32_t *__restrict__ rp, int32_t *col, double *val)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || agg[i] < 0)
        return;
    double s = norm[agg[i]];
    col[rp[i]] = agg[i];
    val[rp[i]] = s > 0 ? B[i] / s : 0.0;
}

/* Lanczos's vector steps, rounded as the host's are (no contraction). */
__global__ void lz_init(int32_t n, const double *__restrict__ dinv, double *sd, double *p, double *v)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    sd[i] = sqrt(dinv[i]);
    p[i] = 0.0;
    v[i] = spmv_amg_start_value(i);
}

__global__ void lz_div(int32_t n, double *v, double s)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        v[i] = v[i] / s;
}

__global__ void lz_pre(int32_t n, const double *__restrict__ v, const double *__restrict__ sd, double *w)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        w[i] = __dmul_rn(v[i], sd[i]);
}

/* t = t sd - beta p (c = 0), or t -= c v (sd NULL). */
__global__ void lz_axpy(int32_t n, double *t, const double *__restrict__ sd, double beta, const double *__restrict__ p,
                        double c, const double *__restrict__ v)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    t[i] = sd ? __dsub_rn(__dmul_rn(t[i], sd[i]), __dmul_rn(beta, p[i])) : __dsub_rn(t[i], __dmul_rn(c, v[i]));
}

/* The block's sum of every thread's s, in a fixed order, into *out. */
__device__ void bd_block_sum(double s, double *out)
{
    __shared__ double sh[BB / 32];
    s = gpu_group_sum(s, 32);
    if (threadIdx.x % 32 == 0)
        sh[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0;
        for (int w = 0; w < BB / 32; w++)
            t += sh[w];
        *out = t;
    }
}

/* x.y: DOT_BLOCKS partial sums, then one block adds them in order into
 * part[DOT_BLOCKS]. */
__global__ void lz_dot(int64_t n, const double *__restrict__ x, const double *__restrict__ y, double *part)
{
    double s = 0;
    for (int64_t i = blockIdx.x * (int64_t)BB + threadIdx.x; i < n; i += (int64_t)gridDim.x * BB)
        s = __dadd_rn(s, __dmul_rn(x[i], y[i]));
    bd_block_sum(s, &part[blockIdx.x]);
}

__global__ void lz_dot_end(double *part)
{
    double s = 0;
    for (int i = threadIdx.x; i < DOT_BLOCKS; i += BB)
        s += part[i];
    bd_block_sum(s, &part[DOT_BLOCKS]);
}

/* ---------------------------------------------------------- the steps */

static int dot(build *b, int32_t n, const double *x, const double *y, double *out, spmv_error *err)
{
    lz_dot<<<DOT_BLOCKS, BB, 0, b->ctx->stream>>>(n, x, y, b->part);
    lz_dot_end<<<1, BB, 0, b->ctx->stream>>>(b->part);
    int st = gpu_check_launch(err, "amg setup dot");
    if (st || (st = cuda_ok(cudaMemcpyAsync(out, b->part + DOT_BLOCKS, 8, cudaMemcpyDeviceToHost, b->ctx->stream),
                            err, "amg setup dot")))
        return st;
    return cuda_ok(cudaStreamSynchronize(b->ctx->stream), err, "amg setup dot");
}

/* Exclusive sum of in[0..n) into out[0..n] (out[n] the total, read into
 * *total when asked); in has room for n+1. */
static int scan(build *b, int32_t *in, int32_t *out, int32_t n, int32_t *total, spmv_error *err)
{
    void *tmp = NULL;
    size_t nt = 0;
    cudaStream_t s = b->ctx->stream;
    int st = cuda_ok(cudaMemsetAsync(in + n, 0, 4, s), err, "amg setup scan"); /* in[n]: 0, so out[n] is the total */
    if (!st)
        st = cuda_ok(cub::DeviceScan::ExclusiveSum(NULL, nt, in, out, n + 1, s), err, "amg setup scan");
    if (st || (st = take(b, &tmp, nt, "amg setup scan", err)))
        return st;
    st = cuda_ok(cub::DeviceScan::ExclusiveSum(tmp, nt, in, out, n + 1, s), err, "amg setup scan");
    give(b, tmp, nt); /* waits for the scan */
    if (!st && total)
        st = cuda_ok(cudaMemcpy(total, out + n, 4, cudaMemcpyDeviceToHost), err, "amg setup scan");
    return st;
}

/* rho(D^-1 A) by the host's Lanczos (spmv_amg_spectral_radius). */
static int radius(build *b, gpu_dcsr *A, const double *dinv, double *rho, spmv_error *err)
{
    int32_t n = A->rows;
    size_t nb = (size_t)n * 8;
    double *sd = NULL, *p = NULL, *v = NULL, *w = NULL, *t = NULL, alpha[SPMV_AMG_RHO_ITERS], beta[SPMV_AMG_RHO_ITERS];
    double beta_prev = 0, nv = 0;
    size_t count = 0;
    int k = 0, st;
    if ((st = take(b, (void **)&sd, nb, "amg rho", err)) || (st = take(b, (void **)&p, nb, "amg rho", err)) ||
        (st = take(b, (void **)&v, nb, "amg rho", err)) || (st = take(b, (void **)&w, nb, "amg rho", err)) ||
        (st = take(b, (void **)&t, nb, "amg rho", err)))
        goto done;
    lz_init<<<GRID(n)>>>(n, dinv, sd, p, v);
    if ((st = dot(b, n, v, v, &nv, err)))
        goto done;
    lz_div<<<GRID(n)>>>(n, v, sqrt(nv));
    while (k < SPMV_AMG_RHO_ITERS && k < n) {
        double al, bt;
        lz_pre<<<GRID(n)>>>(n, v, sd, w);
        if ((st = gpu_dcsr_mv(b->ctx, A, 1.0, w, 0.0, t, &count, err)))
            goto done;
        lz_axpy<<<GRID(n)>>>(n, t, sd, beta_prev, p, 0.0, NULL);
        if ((st = dot(b, n, t, v, &al, err)))
            goto done;
        lz_axpy<<<GRID(n)>>>(n, t, NULL, 0.0, NULL, al, v);
        if ((st = dot(b, n, t, t, &bt, err)))
            goto done;
        alpha[k] = al;
        beta[k] = sqrt(bt);
        if (beta[k++] <= 1e-12 * fabs(alpha[0]))
            break;
        double *old = p;
        p = v;
        v = t;
        t = old;
        lz_div<<<GRID(n)>>>(n, v, beta[k - 1]);
        beta_prev = beta[k - 1];
    }
    st = gpu_check_launch(err, "amg rho");
    *rho = spmv_amg_ritz_max(alpha, beta, k);
done:
    for (double *x : {sd, p, v, w, t})
        give(b, x, nb);
    return st;
}

/* Level l's 1/diag and rho (A: its operator, float64). */
static int level_ready(build *b, int32_t l, gpu_dcsr *A, double *dn, spmv_error *err)
{
    int32_t n = A->rows, fl[2] = {INT32_MAX, 0};
    int st = take(b, (void **)&b->dinv[l], (size_t)n * 8, "amg 1/diag", err);
    if (st || (st = cuda_ok(cudaMemcpyAsync(b->flags, fl, 8, cudaMemcpyHostToDevice, b->ctx->stream), err, "amg")))
        return st;
    bd_diag<<<GRID(n)>>>(n, A->row_ptr, A->col, (const double *)A->val, b->dinv[l], dn, b->flags);
    if ((st = gpu_check_launch(err, "bd_diag")) ||
        (st = cuda_ok(cudaMemcpyAsync(fl, b->flags, 8, cudaMemcpyDeviceToHost, b->ctx->stream), err, "amg")) ||
        (st = gpu_sync_stream(b->ctx, err, "amg 1/diag")))
        return st;
    if (fl[0] != INT32_MAX)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "row %d has a zero or non-finite diagonal: smoothing in "
                              "D^-1 A needs a non-zero diagonal", fl[0]);
    if (fl[1])
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "amg setup on a GPU: a diagonal that is not positive "
                              "(level %d): the host builds it", l);
    return radius(b, A, b->dinv[l], &b->g->lv[l].rho, err);
}

/* The strong graph of A into (*sp, *adj): sp n+1 offsets. */
static int strength(build *b, gpu_dcsr *A, const double *dn, int32_t **sp, int32_t **adj, int32_t *edges,
                    spmv_error *err)
{
    int32_t n = A->rows;
    int32_t *cnt = NULL;
    double t2 = b->o.strength * b->o.strength;
    int st = take(b, (void **)&cnt, ((size_t)n + 1) * 4, "amg strength", err);
    if (st || (st = take(b, (void **)sp, ((size_t)n + 1) * 4, "amg strength", err)))
        goto done;
    bd_strength<<<GRID(n)>>>(n, A->row_ptr, A->col, (const double *)A->val, dn, t2, cnt, NULL, NULL);
    if ((st = gpu_check_launch(err, "bd_strength")) || (st = scan(b, cnt, *sp, n, edges, err)) ||
        (st = take(b, (void **)adj, (size_t)*edges * 4, "amg strength", err)))
        goto done;
    bd_strength<<<GRID(n)>>>(n, A->row_ptr, A->col, (const double *)A->val, dn, t2, NULL, *sp, *adj);
    st = gpu_check_launch(err, "bd_strength");
done:
    give(b, cnt, ((size_t)n + 1) * 4);
    return st;
}

/* The mis2 rounds into state (amg.h). */
static int mis_rounds(build *b, int32_t n, const int32_t *sp, const int32_t *adj, uint8_t *state, int32_t *rounds,
                      spmv_error *err)
{
    uint64_t *t = NULL, *u = NULL;
    int st = take(b, (void **)&t, (size_t)n * 8, "amg aggregation", err);
    if (st || (st = take(b, (void **)&u, (size_t)n * 8, "amg aggregation", err)))
        goto done;
    bd_mis_init<<<GRID(n)>>>(n, sp, state);
    for (int undecided = 1; undecided && !st; ++*rounds) {
        bd_mis_keys<<<GRID(n)>>>(n, state, t);
        bd_mis_spread<<<GRID(n)>>>(n, sp, adj, t, u);
        bd_mis_spread<<<GRID(n)>>>(n, sp, adj, u, t);
        if ((st = cuda_ok(cudaMemsetAsync(b->flags + 2, 0, 4, b->ctx->stream), err, "amg aggregation")))
            break;
        bd_mis_decide<<<GRID(n)>>>(n, state, t, b->flags);
        if (!(st = gpu_check_launch(err, "amg aggregation")) &&
            !(st = cuda_ok(cudaMemcpyAsync(&undecided, b->flags + 2, 4, cudaMemcpyDeviceToHost, b->ctx->stream), err,
                           "amg aggregation")))
            st = gpu_sync_stream(b->ctx, err, "amg aggregation");
    }
done:
    give(b, t, (size_t)n * 8);
    give(b, u, (size_t)n * 8);
    return st;
}

/* spmv_amg_mis2 on the device: agg (n) and *naggs. */
static int aggregate(build *b, int32_t n, const int32_t *sp, const int32_t *adj, int32_t *agg, int32_t *naggs,
                     int32_t *rounds, spmv_error *err)
{
    uint8_t *state = NULL;
    int32_t *flag = NULL, *id = NULL, left = 0;
    size_t fb = ((size_t)n + 1) * 4;
    int st = take(b, (void **)&state, (size_t)n, "amg aggregation", err);
    if (st || (st = take(b, (void **)&flag, fb, "amg aggregation", err)) ||
        (st = take(b, (void **)&id, fb, "amg aggregation", err)) ||
        (st = mis_rounds(b, n, sp, adj, state, rounds, err)))
        goto done;
    bd_flag<<<GRID(n)>>>(n, state, MIS_ROOT, NULL, flag);
    if ((st = scan(b, flag, id, n, naggs, err)))
        goto done;
    bd_agg_init<<<GRID(n)>>>(n, state, sp, id, agg);
    for (int pass = 0; pass < 2; pass++) { /* next to a root, then next to those */
        bd_agg_join<<<GRID(n)>>>(n, sp, adj, agg);
        bd_agg_settle<<<GRID(n)>>>(n, agg, NULL, 0);
    }
    bd_flag<<<GRID(n)>>>(n, state, -1, agg, flag);
    if ((st = gpu_check_launch(err, "amg aggregation")) || (st = scan(b, flag, id, n, &left, err)))
        goto done;
    bd_agg_settle<<<GRID(n)>>>(n, agg, id, *naggs);
    *naggs += left;
    st = gpu_check_launch(err, "amg aggregation");
done:
    give(b, state, (size_t)n);
    give(b, flag, fb);
    give(b, id, fb);
    return st;
}

/* T (n x naggs) and the next candidates Bc (naggs) from B. */
static int tentative(build *b, int32_t n, const int32_t *agg, int32_t naggs, const double *B, gpu_dcsr *T, double **Bc,
                     spmv_error *err)
{
    int32_t *cnt = NULL, nnz = 0;
    size_t cb = ((size_t)n + 1) * 4;
    int st = take(b, (void **)Bc, (size_t)naggs * 8, "amg candidates", err);
    if (st || (st = cuda_ok(cudaMemsetAsync(*Bc, 0, (size_t)naggs * 8, b->ctx->stream), err, "amg candidates")) ||
        (st = take(b, (void **)&cnt, cb, "amg tentative", err)))
        goto done;
    bd_norms<<<GRID(n)>>>(n, agg, B, *Bc);
    bd_sqrt<<<GRID(naggs)>>>(naggs, *Bc);
    bd_in_agg<<<GRID(n)>>>(n, agg, cnt);
    T->rows = n;
    T->cols = naggs;
    T->dtype = SPMV_FLOAT64;
    if ((st = gpu_check_launch(err, "amg tentative")) ||
        (st = take(b, (void **)&T->row_ptr, cb, "amg tentative", err)) ||
        (st = scan(b, cnt, T->row_ptr, n, &nnz, err)))
        goto done;
    T->nnz = nnz;
    if ((st = take(b, (void **)&T->col, (size_t)nnz * 4, "amg tentative", err)) ||
        (st = take(b, &T->val, (size_t)nnz * 8, "amg tentative", err)))
        goto done;
    bd_tent<<<GRID(n)>>>(n, agg, B, *Bc, T->row_ptr, T->col, (double *)T->val);
    if (!(st = gpu_check_launch(err, "bd_tent")))
        st = sparse_ok(cusparseCreateCsr(&T->descr, n, naggs, nnz, T->row_ptr, T->col, T->val, CUSPARSE_INDEX_32I,
                                         CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F),
                       err, "cusparseCreateCsr(T)");
done:
    give(b, cnt, cb);
    return st;
}

/* One coarsening step from level l (g->lv[l].A, 1/diag b->dinv[l], dn):
 * its P and R, and level l+1's A (g->nlevels grows); B (level l's
 * candidates) becomes the next level's. *done: level l is the coarsest. */
static int coarsen(build *b, int32_t l, const double *dn, double **B, bool *done, spmv_error *err)
{
    gpu_amg_level *lv = &b->g->lv[l];
    int32_t n = lv->A.rows, *sp = NULL, *adj = NULL, *agg = NULL, edges = 0, naggs = 0;
    gpu_dcsr T = gpu_dcsr();
    double *Bc = NULL;
    int st = strength(b, &lv->A, dn, &sp, &adj, &edges, err);
    if (st || (st = lap(b, SPMV_AMG_STRENGTH, err)) || (st = take(b, (void **)&agg, (size_t)n * 4, "amg", err)) ||
        (st = aggregate(b, n, sp, adj, agg, &naggs, &b->sum->rounds[l], err)) ||
        (st = lap(b, SPMV_AMG_AGGREGATE, err)))
        goto out;
    *done = naggs == 0 || (int64_t)naggs >= (int64_t)n * 9 / 10;
    if (*done || (st = tentative(b, n, agg, naggs, *B, &T, &Bc, err)) || (st = lap(b, SPMV_AMG_TENTATIVE, err)))
        goto out;
    st = gpu_amg_products_dev(b->ctx, &lv->A, b->dinv[l], 4.0 / 3.0 / lv->rho, &T, &lv->P, &lv->R,
                              &b->g->lv[l + 1].A, b->sum->phase_ms, err);
    b->t0 = spmv_now_ms();
    if (st)
        goto out;
    b->g->nlevels++;
    give(b, *B, (size_t)n * 8);
    *B = Bc;
    Bc = NULL;
out:
    give(b, sp, ((size_t)n + 1) * 4);
    give(b, adj, (size_t)edges * 4);
    give(b, agg, (size_t)n * 4);
    give(b, Bc, (size_t)naggs * 8);
    gpu_dcsr_free(b->ctx, &T);
    return st;
}

__global__ void bd_ones(int32_t n, double *v)
{
    int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        v[i] = 1.0;
}

/* Level 0's A from the host's CSR (either dtype) as float64; refused
 * (UNAVAILABLE) when a row's columns do not increase. */
static int upload(build *b, const spmv_csr *a, gpu_dcsr *A, spmv_error *err)
{
    cudaStream_t s = b->ctx->stream;
    size_t rp = ((size_t)a->rows + 1) * 4, cb = (size_t)a->nnz * 4;
    int unsorted = 0;
    void *tmp = NULL;
    A->rows = a->rows;
    A->cols = a->cols;
    A->nnz = a->nnz;
    A->dtype = SPMV_FLOAT64;
    int st = take(b, (void **)&A->row_ptr, rp, "amg level 0", err);
    if (st || (st = take(b, (void **)&A->col, cb, "amg level 0", err)) ||
        (st = take(b, &A->val, (size_t)a->nnz * 8, "amg level 0", err)) ||
        (st = cuda_ok(cudaMemcpyAsync(A->row_ptr, a->row_ptr, rp, cudaMemcpyHostToDevice, s), err, "amg level 0")) ||
        (st = cuda_ok(cudaMemcpyAsync(A->col, a->col, cb, cudaMemcpyHostToDevice, s), err, "amg level 0")))
        return st;
    if (a->dtype == SPMV_FLOAT64)
        st = cuda_ok(cudaMemcpyAsync(A->val, a->val, (size_t)a->nnz * 8, cudaMemcpyHostToDevice, s), err, "amg");
    else if (!(st = take(b, &tmp, cb, "amg level 0", err)) &&
             !(st = cuda_ok(cudaMemcpyAsync(tmp, a->val, cb, cudaMemcpyHostToDevice, s), err, "amg level 0")))
        st = gpu_cast(b->ctx, tmp, SPMV_FLOAT32, A->val, SPMV_FLOAT64, a->nnz, err);
    give(b, tmp, cb);
    if (st || (st = cuda_ok(cudaMemsetAsync(b->flags + 2, 0, 4, s), err, "amg level 0")))
        return st;
    amg_rows_unsorted<<<GRID(a->rows)>>>(a->rows, A->row_ptr, A->col, b->flags + 2);
    if ((st = gpu_check_launch(err, "amg_rows_unsorted")) ||
        (st = cuda_ok(cudaMemcpyAsync(&unsorted, b->flags + 2, 4, cudaMemcpyDeviceToHost, s), err, "amg")) ||
        (st = gpu_sync_stream(b->ctx, err, "amg level 0")))
        return st;
    if (unsorted)
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "amg setup on a GPU: a row's columns do not increase: "
                              "the host builds it");
    return sparse_ok(cusparseCreateCsr(&A->descr, A->rows, A->cols, A->nnz, A->row_ptr, A->col, A->val,
                                       CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F),
                     err, "cusparseCreateCsr(A)");
}

/* The levels from level 0 on, until the host's stop. */
static int levels(build *b, const spmv_csr *a, double **B, spmv_error *err)
{
    spmv_gpu_amg *g = b->g;
    int st = upload(b, a, &g->lv[0].A, err);
    g->nlevels = 1;
    if (st || (st = lap(b, SPMV_AMG_COPY, err)) || (st = take(b, (void **)B, (size_t)a->rows * 8, "amg", err)))
        return st;
    bd_ones<<<GRID(a->rows)>>>(a->rows, *B);
    for (int32_t l = 0;; l++) {
        int32_t n = g->lv[l].A.rows;
        double *dn = NULL;
        bool done = false;
        if ((st = take(b, (void **)&dn, (size_t)n * 8, "amg", err)) || (st = level_ready(b, l, &g->lv[l].A, dn, err)) ||
            (st = lap(b, SPMV_AMG_LEVEL, err)) || l + 1 >= b->o.max_levels || n <= b->o.max_coarse ||
            (st = coarsen(b, l, dn, B, &done, err)) || done) {
            give(b, dn, (size_t)n * 8);
            return st;
        }
        give(b, dn, (size_t)n * 8);
    }
}

/* The coarsest level's dense inverse: its A back to the host. */
static int coarse(build *b, spmv_error *err)
{
    spmv_gpu_amg *g = b->g;
    spmv_csr h = {};
    double *inv = NULL;
    int st = gpu_dcsr_download(b->ctx, &g->lv[g->nlevels - 1].A, &h, err);
    if (!st)
        st = spmv_amg_dense_inverse(&h, &inv, err);
    spmv_csr_free(&h);
    g->coarse_n = g->lv[g->nlevels - 1].A.rows;
    size_t cn = (size_t)g->coarse_n * g->coarse_n;
    if (!st && !(st = gpu_amg_alloc(b->ctx, g, &g->coarse_inv, cn, "amg coarse inverse", err)))
        st = gpu_put_values(b->ctx, g->coarse_inv, inv, (int64_t)cn, g->dtype, err);
    free(inv);
    return st;
}

/* m's values to float32, its descriptor anew. */
static int narrow(build *b, gpu_dcsr *m, spmv_error *err)
{
    void *v = NULL;
    int st = take(b, &v, (size_t)m->nnz * 4, "amg float32", err);
    if (st || (st = gpu_cast(b->ctx, m->val, SPMV_FLOAT64, v, SPMV_FLOAT32, m->nnz, err))) {
        give(b, v, (size_t)m->nnz * 4);
        return st;
    }
    cusparseDestroySpMat(m->descr);
    m->descr = NULL;
    gpu_ctx_free(b->ctx, m->buf, m->buf_bytes); /* made for the float64 descriptor: made again on first use */
    m->buf = NULL;
    m->buf_bytes = 0;
    give(b, m->val, (size_t)m->nnz * 8);
    m->val = v;
    m->dtype = SPMV_FLOAT32;
    return sparse_ok(cusparseCreateCsr(&m->descr, m->rows, m->cols, m->nnz, m->row_ptr, m->col, m->val,
                                       CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F),
                     err, "cusparseCreateCsr");
}

static size_t dcsr_bytes(const gpu_dcsr *m)
{
    if (!m->row_ptr)
        return 0;
    return gpu_nz(((size_t)m->rows + 1) * 4) + gpu_nz((size_t)m->nnz * 4) +
           gpu_nz((size_t)m->nnz * spmv_dtype_size(m->dtype)) + m->buf_bytes + m->mm_buf_bytes;
}

/* Every level in the hierarchy's dtype with its 1/diag and work vectors;
 * the bytes and the summary. */
static int finish(build *b, spmv_error *err)
{
    spmv_gpu_amg *g = b->g;
    spmv_amg_summary *sum = b->sum;
    size_t vs = spmv_dtype_size(g->dtype);
    int st = SPMV_OK;
    double nnz = 0, rows = 0;
    for (int32_t l = 0; l < g->nlevels && !st; l++) {
        gpu_amg_level *lv = &g->lv[l];
        size_t n = (size_t)lv->A.rows;
        for (gpu_dcsr *m : {&lv->A, &lv->P, &lv->R})
            if (!st && m->row_ptr && g->dtype == SPMV_FLOAT32)
                st = narrow(b, m, err);
        if (st || (st = gpu_amg_alloc(b->ctx, g, &lv->dinv, n, "amg 1/diag", err)) ||
            (st = gpu_cast(b->ctx, b->dinv[l], SPMV_FLOAT64, lv->dinv, g->dtype, (int64_t)n, err)) ||
            (st = gpu_amg_alloc(b->ctx, g, &lv->r, n, "amg r", err)) ||
            (st = gpu_amg_alloc(b->ctx, g, &lv->x, n, "amg x", err)) ||
            (st = gpu_amg_alloc(b->ctx, g, &lv->b, n, "amg b", err)))
            break;
        st = gpu_amg_alloc(b->ctx, g, &lv->d, n, "amg d", err);
        sum->rows[l] = lv->A.rows;
        sum->nnz[l] = lv->A.nnz;
        nnz += (double)lv->A.nnz;
        rows += lv->A.rows;
    }
    if (st || (st = gpu_sync_stream(b->ctx, err, "amg setup")))
        return st;
    g->bytes = gpu_nz((size_t)g->coarse_n * g->coarse_n * vs);
    for (int32_t l = 0; l < g->nlevels; l++) {
        const gpu_amg_level *lv = &g->lv[l];
        g->bytes += dcsr_bytes(&lv->A) + dcsr_bytes(&lv->P) + dcsr_bytes(&lv->R) + 5 * gpu_nz(lv->A.rows * vs);
    }
    sum->nlevels = g->nlevels;
    sum->coarse_n = g->coarse_n;
    sum->operator_complexity = nnz / (double)(sum->nnz[0] ? sum->nnz[0] : 1);
    sum->grid_complexity = rows / (double)(sum->rows[0] ? sum->rows[0] : 1);
    return SPMV_OK;
}

/* Why the device does not build this hierarchy (NULL: it does). */
static const char *not_here(const spmv_csr *a, const spmv_amg_options *o)
{
    return o->block_size != 1                        ? "block_size > 1 (the nodes' blocks)"
           : o->near_nullspace                       ? "a near-nullspace"
           : o->aggregation == SPMV_AMG_AGG_STANDARD ? "standard aggregation (serial)"
           : spmv_csr_wide(a)                        ? "64-bit row offsets"
                                                     : NULL;
}

extern "C" int spmv_gpu_amg_build(spmv_gpu_ctx *ctx, const spmv_csr *a, const spmv_amg_options *opt,
                                  spmv_dtype dtype, spmv_gpu_amg **out, spmv_amg_summary *sum, spmv_error *err)
{
    *out = NULL;
    memset(sum, 0, sizeof *sum);
    build b = {};
    if (opt)
        b.o = *opt;
    else
        spmv_amg_defaults(&b.o);
    if (!ctx || !a)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "amg setup on a GPU: missing context or matrix");
    if (a->rows != a->cols)
        return spmv_error_set(err, SPMV_ERR_SHAPE, 0, "amg needs a square matrix (%d x %d)", a->rows, a->cols);
    int st = spmv_amg_check_options(&b.o, a->rows, err);
    const char *why = st ? NULL : not_here(a, &b.o);
    if (st || why)
        return st ? st : spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "amg setup on a GPU: %s: the host builds it", why);
    b.ctx = ctx;
    b.sum = sum;
    double start = b.t0 = spmv_now_ms();
    double *B = NULL;
    if ((st = gpu_amg_new(ctx, b.o.max_levels, dtype, &b.g, err)))
        return st;
    b.g->nlevels = 0;
    b.g->smoother = b.o.smoother;
    b.g->presmooth = b.o.presmooth;
    b.g->postsmooth = b.o.postsmooth;
    b.g->degree = b.o.degree;
    if (!(st = take(&b, (void **)&b.flags, 12, "amg setup", err)) &&
        !(st = take(&b, (void **)&b.part, (DOT_BLOCKS + 1) * 8, "amg setup", err)) && !(st = levels(&b, a, &B, err)) &&
        !(st = coarse(&b, err)) && !(st = lap(&b, SPMV_AMG_COARSE, err)) && !(st = finish(&b, err)))
        st = gpu_amg_views(ctx, b.g, err);
    give(&b, B, B ? (size_t)b.g->lv[b.g->nlevels - 1].A.rows * 8 : 0);
    give(&b, b.flags, 12);
    give(&b, b.part, (DOT_BLOCKS + 1) * 8);
    for (int32_t l = 0; l < 32; l++)
        give(&b, b.dinv[l], l < b.g->nlevels ? (size_t)b.g->lv[l].A.rows * 8 : 0);
    if (st) {
        spmv_gpu_amg_free(ctx, b.g);
        return st;
    }
    sum->setup_ms = spmv_now_ms() - start;
    *out = b.g;
    return SPMV_OK;
}

extern "C" int spmv_gpu_amg_level_get(spmv_gpu_ctx *ctx, const spmv_gpu_amg *g, int32_t l, spmv_csr *A, spmv_csr *P,
                                      spmv_csr *R, spmv_error *err)
{
    memset(A, 0, sizeof *A);
    memset(P, 0, sizeof *P);
    memset(R, 0, sizeof *R);
    if (!ctx || !g || l < 0 || l >= g->nlevels || g->smoother_only)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "amg: no level %d", l);
    const gpu_amg_level *lv = &g->lv[l];
    int st = gpu_dcsr_download(ctx, &lv->A, A, err);
    if (!st && lv->P.row_ptr && !(st = gpu_dcsr_download(ctx, &lv->P, P, err)))
        st = gpu_dcsr_download(ctx, &lv->R, R, err);
    return st;
}
