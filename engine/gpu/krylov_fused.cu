/* krylov_fused.cu — the kernels of the fused Krylov path and what carries them.
 *
 * engine/krylov_fused.c drives CG, BiCGSTAB, GMRES and MINRES with their
 * scalars in device memory (krylov_fused.h says what each kernel does).
 * Every kernel here is one pass over the vectors that also forms the dot
 * products the next step needs: each block sums its part in float64 and
 * writes it to a scratch array, and the block that arrives last (an atomic
 * counter, CUDA's threadFenceReduction pattern) adds the parts in block
 * order, so the sum is the same on every run, and then, on one thread,
 * computes the next scalars (alpha, beta, the rotations ...), records the
 * residual in the history ring, and sets the stop flag. Kernels read the
 * flags first and do nothing once the solve has stopped, so a chunk of
 * iterations queued ahead costs only its empty launches after a stop.
 *
 * The flags: `live` (the iteration goes on; GMRES: this cycle's columns)
 * and `upd` (the last step's x update is still owed, for the methods that
 * update x after the test: CG's x += alpha p rides with the p update,
 * MINRES's w and x with the next v). A kernel that finds live off clears
 * upd from one thread: nothing else in that launch reads upd, and the
 * later kernels see it cleared.
 *
 * The rest: the block of scalars and history, copied to pinned host memory
 * with an event per slot (two slots, so the host reads one while the next
 * chunk runs), and a CUDA graph of a chunk of iterations captured from the
 * stream (the operator's device_apply included) and replayed.
 */
#include <math.h>
#include <string.h>

#include <cooperative_groups.h>

#include "gpu.cuh"
#include "krylov_fused.h"

#define FZ_BLOCK 256
#define FZ_WARPS (FZ_BLOCK / GPU_WARP)
#define FZ_PARTS 3 /* sums one reduction carries at most */
static_assert(FZ_PARTS <= SPMV_ALLSUM_SLOTS, "a reduction's sums fit a row of the mailbox");
/* Blocks an SM holds at once (1536 threads): the kernels fit 40 registers
 * without spilling (32, for 2048 threads, spills in CG's two updates), and
 * the grid (spmv_gpu_fz_new) is that many per SM, one wave. */
#define FZ_MIN_BLOCKS 6
#define FZ_KERNEL __global__ void __launch_bounds__(FZ_BLOCK, FZ_MIN_BLOCKS)

struct spmv_gpu_fz {
    int64_t n;
    int32_t hist_len, m;
    int32_t ncols;           /* columns solved at once (CG's k-column lockstep), each its own block and scratch */
    size_t col_bytes;        /* one column's fz_scalars + history */
    unsigned grid;
    unsigned coop_grid;      /* FZ_CG_ITER's grid (every block resident at once); 0: not taken */
    int coop_e;              /* values of each vector a thread of it holds */
    size_t block_bytes;      /* fz_scalars + history */
    void *dev;               /* the block on the device */
    double *part;            /* grid * FZ_PARTS block sums, then the counter */
    size_t part_bytes;
    double *gm;              /* GMRES: H ((m+1) x m), cs, sn (m), g (m+1), y (m) */
    size_t gm_bytes;
    void *host[2];           /* pinned copies of the block */
    cudaEvent_t ev[2];
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    spmv_allsum_dev all;     /* nranks 0: one process */
};

/* Where a kernel finds everything (by value, so a graph keeps it). */
struct fz_dev {
    fz_scalars *f;
    double *hist;
    int32_t hist_len;
    double *part;
    unsigned *count;
    double *H, *cs, *sn, *g, *y;
    int32_t m;
    int64_t n;
    spmv_allsum_dev all;     /* a distributed solve's sums across the processes (nranks 0: none) */
    size_t col_bytes;        /* column c's scalars at f + c * col_bytes (bytes), its history after them */
    size_t part_stride;      /* column c's reduction scratch at part + c * part_stride (doubles), its counter last */
};

/* Column blockIdx.y's block and scratch (CG's k columns: the grid's y is
 * the column; one column: y = 0, d as it is). */
__device__ __forceinline__ fz_dev fz_column(fz_dev d)
{
    d.f = (fz_scalars *)((char *)d.f + blockIdx.y * d.col_bytes);
    d.hist = (double *)((char *)d.hist + blockIdx.y * d.col_bytes);
    d.count = (unsigned *)(d.part + blockIdx.y * d.part_stride + (d.part_stride - 1));
    d.part += blockIdx.y * d.part_stride;
    return d;
}

/* Column blockIdx.y of an n x k block (NULL stays NULL). */
template <typename T> __device__ __forceinline__ T *fz_col(T *v, int64_t n)
{
    return v ? v + (size_t)blockIdx.y * (size_t)n : v;
}

#define FZ_LOOP(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)FZ_BLOCK + threadIdx.x; i < (n); i += (int64_t)gridDim.x * FZ_BLOCK)

/* ------------------------------------------------------ device helpers */

/* v[0..K-1] summed across the processes (one thread): written into row
 * `rank` of every process's mailbox half for this sum, each value as two
 * words (its low or high 32 bits under the sum's number, stored whole),
 * and the rows of every process read here in process order once all
 * their words bear the number. False when one has not come within the
 * timeout, or the host said stop (*a.stop, read every 256 spins: mapped
 * host memory is slow). */
template <int K> __device__ bool fz_allsum(const spmv_allsum_dev &a, double (&v)[K])
{
    static_assert(2 * K <= SPMV_ALLSUM_SLOTS, "a sum's values fit a row of the mailbox");
    unsigned s = *a.seq + 1;
    *a.seq = s;
    size_t half = (size_t)(s & 1) * a.nranks * SPMV_ALLSUM_SLOTS;
    unsigned long long tag = (unsigned long long)s << 32, w[2 * K];
    for (int k = 0; k < K; k++) {
        unsigned long long bits = (unsigned long long)__double_as_longlong(v[k]);
        w[2 * k] = tag | (bits & 0xffffffffull);
        w[2 * k + 1] = tag | (bits >> 32);
    }
    for (int q = 0; q < a.nranks; q++) {
        volatile unsigned long long *dst = a.peer_box[q] + half + (size_t)a.rank * SPMV_ALLSUM_SLOTS;
        for (int j = 0; j < 2 * K; j++)
            dst[j] = w[j];
    }
    volatile const unsigned long long *box = a.box + half;
    volatile int *stop = a.stop;
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    t = t0;
    double sum[K];
    for (int k = 0; k < K; k++)
        sum[k] = 0;
    for (int p = 0; p < a.nranks; p++) { /* the words as they were when they bore s: added in process order */
        for (int j = 0; j < 2 * K; j++)
            for (unsigned spin = 1; (unsigned)((w[j] = box[(size_t)p * SPMV_ALLSUM_SLOTS + j]) >> 32) != s; spin++) {
                asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
                if (t - t0 > a.timeout_ns || (spin % 256 == 0 && *stop)) {
                    *stop = 1;
                    return false;
                }
            }
        for (int k = 0; k < K; k++)
            sum[k] += __longlong_as_double((long long)((w[2 * k] & 0xffffffffull) | (w[2 * k + 1] << 32)));
    }
    *a.waited_ns += t - t0;
    for (int k = 0; k < K; k++)
        v[k] = sum[k];
    return true;
}

__device__ void fz_peer_lost(fz_scalars *f)
{
    f->stop = FZ_BREAKDOWN;
    f->what = FZ_BD_PEER;
    f->value = 0;
    f->bd_it = f->it;
    f->live = 0;
    f->upd = 0;
}

/* Sums v[0..K-1] over the grid (and, distributed, across the processes).
 * true on thread 0 of the block that arrives last, with the totals in v;
 * false everywhere else, and there too when a process did not answer (the
 * solve then stops: fz_peer_lost). */
template <int K> __device__ __forceinline__ bool fz_reduce(const fz_dev &d, double (&v)[K])
{
    __shared__ double sh[K][FZ_WARPS];
    __shared__ bool last;
    int lane = threadIdx.x % GPU_WARP, warp = threadIdx.x / GPU_WARP;
    for (int k = 0; k < K; k++) {
        double s = gpu_group_sum(v[k], GPU_WARP);
        if (lane == 0)
            sh[k][warp] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int k = 0; k < K; k++) {
            double s = 0;
            for (int w = 0; w < FZ_WARPS; w++)
                s += sh[k][w];
            d.part[blockIdx.x * FZ_PARTS + k] = s;
        }
        __threadfence();
        last = atomicAdd(d.count, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last)
        return false;
    __threadfence();
    for (int k = 0; k < K; k++) {
        double s = 0;
        for (unsigned b = threadIdx.x; b < gridDim.x; b += FZ_BLOCK)
            s += __ldcg(&d.part[b * FZ_PARTS + k]);
        s = gpu_group_sum(s, GPU_WARP);
        if (lane == 0)
            sh[k][warp] = s; /* every block's writes above are read: safe to reuse */
    }
    __syncthreads();
    if (threadIdx.x != 0)
        return false;
    for (int k = 0; k < K; k++) {
        double s = 0;
        for (int w = 0; w < FZ_WARPS; w++)
            s += sh[k][w];
        v[k] = s;
    }
    *d.count = 0;
    if (d.all.nranks > 1 && !fz_allsum(d.all, v)) {
        fz_peer_lost(d.f);
        return false;
    }
    return true;
}

__device__ void fz_breakdown(fz_scalars *f, int what, double value, int32_t it)
{
    f->stop = FZ_BREAKDOWN;
    f->what = what;
    f->value = value;
    f->bd_it = it;
    f->live = 0;
}

/* One more iteration done, with this relative residual. */
__device__ void fz_record(const fz_dev &d, double rnorm)
{
    fz_scalars *f = d.f;
    f->rnorm = rnorm;
    f->it++;
    d.hist[f->it % d.hist_len] = rnorm / f->bnorm;
}

__device__ bool fz_met(fz_scalars *f, double rnorm)
{
    if (rnorm > f->thresh)
        return false;
    f->stop = FZ_CONVERGED;
    f->live = 0;
    return true;
}

__device__ bool fz_maxit(fz_scalars *f)
{
    if (f->it < f->maxit)
        return false;
    f->stop = FZ_MAXIT;
    f->live = 0;
    return true;
}

/* live off: clear upd (one thread) and tell the caller to return. */
__device__ __forceinline__ bool fz_idle(fz_scalars *f)
{
    if (f->live)
        return false;
    if (blockIdx.x == 0 && threadIdx.x == 0)
        f->upd = 0;
    return true;
}

/* ------------------------------------------------------------------ CG */

template <typename T> FZ_KERNEL cg_pq(fz_dev d, const T *p, const T *q)
{
    d = fz_column(d);
    p = fz_col(p, d.n);
    q = fz_col(q, d.n);
    fz_scalars *f = d.f;
    if (fz_idle(f))
        return;
    double v[1] = {0};
    FZ_LOOP(i, d.n) v[0] += (double)p[i] * (double)q[i];
    if (!fz_reduce(d, v))
        return;
    f->pq = v[0];
    f->upd = 0;
    if (!(v[0] > 0.0) || !isfinite(v[0])) {
        fz_breakdown(f, FZ_BD_PAP, v[0], f->it);
        return;
    }
    f->alpha = f->rz / v[0];
    f->upd = 1;
}

/* After rz_new: the breakdown test, maxit, beta. */
__device__ void cg_beta(fz_scalars *f, double rz_new)
{
    if (f->rz == 0.0 || !isfinite(rz_new)) {
        fz_breakdown(f, FZ_BD_RZ, rz_new, f->it - 1);
        return;
    }
    if (fz_maxit(f))
        return;
    f->beta = rz_new / f->rz;
    f->rz = rz_new;
}

/* r -= alpha q, ||r||, and rz = r·D⁻¹r (dg) or r·r; later (a callback
 * preconditioner) leaves beta to cg_rz. */
template <typename T>
FZ_KERNEL cg_r(fz_dev d, const T *q, T *r, const T *dg, bool later)
{
    d = fz_column(d); /* dg, the diagonal, is every column's */
    q = fz_col(q, d.n);
    r = fz_col(r, d.n);
    fz_scalars *f = d.f;
    if (!f->upd)
        return;
    double a = f->alpha, v[2] = {0, 0};
    FZ_LOOP(i, d.n)
    {
        T ri = (T)(r[i] - a * q[i]);
        r[i] = ri;
        v[0] += (double)ri * ri;
        if (dg)
            v[1] += (double)ri * ri * dg[i];
    }
    if (!fz_reduce(d, v))
        return;
    fz_record(d, sqrt(v[0]));
    if (fz_met(f, f->rnorm) || later)
        return;
    cg_beta(f, dg ? v[1] : v[0]);
}

__device__ void cg_finish(const fz_dev &d, double rz) { cg_beta(d.f, rz); }

/* r·z after a callback preconditioner made z, then the method's scalars
 * from it (CG: cg_finish, MINRES: mr_finish). */
template <typename T, void (*FINISH)(const fz_dev &, double)> FZ_KERNEL dot_rz(fz_dev d, const T *r, const T *z)
{
    d = fz_column(d);
    r = fz_col(r, d.n);
    z = fz_col(z, d.n);
    if (!d.f->live)
        return;
    double v[1] = {0};
    FZ_LOOP(i, d.n) v[0] += (double)r[i] * z[i];
    if (fz_reduce(d, v))
        FINISH(d, v[0]);
}

/* x += alpha p (owed), then p = z + beta p with z the callback's, D⁻¹r or r. */
template <typename T>
FZ_KERNEL cg_p(fz_dev d, const T *r, const T *dg, const T *z, T *p, T *x)
{
    d = fz_column(d);
    r = fz_col(r, d.n);
    z = fz_col(z, d.n);
    p = fz_col(p, d.n);
    x = fz_col(x, d.n);
    fz_scalars *f = d.f;
    bool upd = f->upd, live = f->live;
    if (!upd && !live)
        return;
    T a = (T)f->alpha, b = (T)f->beta;
    FZ_LOOP(i, d.n)
    {
        T pi = p[i];
        if (upd)
            x[i] += a * pi;
        if (live)
            p[i] = (z ? z[i] : dg ? dg[i] * r[i] : r[i]) + b * pi;
    }
}

/* CG's iteration after its product in one cooperative launch: p·q (q
 * kept in registers), a grid-wide sync, alpha; r -= alpha q with ||r||
 * and r·D⁻¹r (r kept), a sync, the test and beta; x += alpha p and
 * p = D⁻¹r + beta p. After each sync every block adds the blocks' parts
 * in block order itself (the same bits everywhere, no second sync) and
 * decides on its copy of the scalars in shared memory; block 0 writes
 * them back. Each thread holds E values of q and of r: n <= E x the grid's
 * threads (spmv_gpu_fz_one_pass). */
#define FZ_COOP_BLOCKS 4 /* blocks an SM holds: 64 registers a thread */
#define FZ_COOP_E 8
#define FZ_COOP_KERNEL __global__ void __launch_bounds__(FZ_BLOCK, FZ_COOP_BLOCKS)

/* The block's sum of v, on every thread (a fixed order: deterministic). */
__device__ double coop_block_sum(double v)
{
    __shared__ double sh[FZ_WARPS];
    __shared__ double total;
    int lane = threadIdx.x % GPU_WARP, warp = threadIdx.x / GPU_WARP;
    double s = gpu_group_sum(v, GPU_WARP);
    if (lane == 0)
        sh[warp] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0;
        for (int w = 0; w < FZ_WARPS; w++)
            t += sh[w];
        total = t;
    }
    __syncthreads();
    double t = total;
    __syncthreads(); /* sh and total are used again by the next sum */
    return t;
}

/* part[b * stride + k] over the grid's blocks b, in block order. */
__device__ double coop_grid_sum(const double *part, int stride, int k)
{
    double s = 0;
    for (unsigned b = threadIdx.x; b < gridDim.x; b += FZ_BLOCK)
        s += __ldcg(&part[(size_t)b * stride + k]);
    return coop_block_sum(s);
}

/* FZ_CG_PQ's and FZ_CG_R's scalars on a block's copy sf (thread 0); block
 * 0 records the history and writes them back. */
__device__ void coop_cg_scalars(const fz_dev &d, fz_scalars *sf, double pq, double a, double rr, double rz_new)
{
    sf->pq = pq;
    sf->alpha = a;
    sf->rnorm = sqrt(rr);
    sf->it++;
    if (blockIdx.x == 0)
        d.hist[sf->it % d.hist_len] = sf->rnorm / sf->bnorm;
    if (!fz_met(sf, sf->rnorm))
        cg_beta(sf, rz_new);
    sf->upd = 0; /* x's update is done in the same launch */
    if (blockIdx.x == 0)
        *d.f = *sf;
}

template <typename T, int E>
FZ_COOP_KERNEL cg_iter(fz_dev d, T *p, const T *q, T *r, const T *dg, T *x)
{
    namespace cgr = cooperative_groups;
    __shared__ fz_scalars sf;
    fz_scalars *f = d.f;
    if (threadIdx.x == 0)
        sf = *f; /* every block reads the scalars before block 0 writes them (after the second sync) */
    __syncthreads();
    if (!sf.live) {
        if (blockIdx.x == 0 && threadIdx.x == 0)
            f->upd = 0;
        return;
    }
    cgr::grid_group grid = cgr::this_grid();
    int64_t tid = blockIdx.x * (int64_t)FZ_BLOCK + threadIdx.x, stride = (int64_t)gridDim.x * FZ_BLOCK;
    T qv[E], rv[E];
    double s0 = 0, s1 = 0;
#pragma unroll
    for (int e = 0; e < E; e++) {
        int64_t i = tid + e * stride;
        if (i < d.n) {
            qv[e] = q[i];
            s0 += (double)p[i] * (double)qv[e];
        }
    }
    s0 = coop_block_sum(s0);
    if (threadIdx.x == 0)
        d.part[blockIdx.x] = s0;
    grid.sync();
    double pq = coop_grid_sum(d.part, 1, 0);
    if (!(pq > 0.0) || !isfinite(pq)) { /* every block sees it: all return */
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            sf.pq = pq;
            sf.upd = 0;
            fz_breakdown(&sf, FZ_BD_PAP, pq, sf.it);
            *f = sf;
        }
        return;
    }
    double a = sf.rz / pq;
    double *part2 = d.part + gridDim.x; /* a slow block may still read the first parts */
    s0 = 0;
#pragma unroll
    for (int e = 0; e < E; e++) {
        int64_t i = tid + e * stride;
        if (i < d.n) {
            T ri = (T)(r[i] - a * qv[e]);
            r[i] = ri;
            rv[e] = ri;
            s0 += (double)ri * ri;
            if (dg)
                s1 += (double)ri * ri * dg[i];
        }
    }
    s0 = coop_block_sum(s0);
    s1 = coop_block_sum(s1);
    if (threadIdx.x == 0) {
        part2[2 * blockIdx.x] = s0;
        part2[2 * blockIdx.x + 1] = s1;
    }
    grid.sync();
    double rr = coop_grid_sum(part2, 2, 0), rz = coop_grid_sum(part2, 2, 1);
    if (threadIdx.x == 0)
        coop_cg_scalars(d, &sf, pq, a, rr, dg ? rz : rr);
    __syncthreads();
    bool live = sf.live;
    T ta = (T)a, tb = (T)sf.beta;
#pragma unroll
    for (int e = 0; e < E; e++) {
        int64_t i = tid + e * stride;
        if (i < d.n) {
            T pi = p[i];
            x[i] += ta * pi;
            if (live)
                p[i] = (dg ? dg[i] * rv[e] : rv[e]) + tb * pi;
        }
    }
}

/* ------------------------------------------------------------ BiCGSTAB */

/* p = r + beta (p - omega v); ph = D⁻¹p. */
template <typename T>
FZ_KERNEL bi_p(fz_dev d, const T *r, const T *v, T *p, T *ph, const T *dg)
{
    fz_scalars *f = d.f;
    if (!f->live)
        return;
    T b = (T)f->beta, om = (T)f->omega;
    FZ_LOOP(i, d.n)
    {
        T pi = r[i] + b * (p[i] - om * v[i]);
        p[i] = pi;
        if (ph)
            ph[i] = dg[i] * pi;
    }
}

template <typename T> FZ_KERNEL bi_alpha(fz_dev d, const T *r0, const T *v)
{
    fz_scalars *f = d.f;
    if (!f->live)
        return;
    double s[1] = {0};
    FZ_LOOP(i, d.n) s[0] += (double)r0[i] * v[i];
    if (!fz_reduce(d, s))
        return;
    if (s[0] == 0.0 || !isfinite(s[0])) {
        fz_breakdown(f, FZ_BD_R0V, s[0], f->it);
        return;
    }
    f->alpha = f->rho_new / s[0];
}

/* s = r - alpha v (into r), x += alpha ph, ||s||: met tol ends the
 * iteration here; sh = D⁻¹s. */
template <typename T>
FZ_KERNEL
    bi_s(fz_dev d, T *r, const T *v, T *x, const T *ph, T *sh, const T *dg)
{
    fz_scalars *f = d.f;
    if (!f->live)
        return;
    T a = (T)f->alpha;
    double s[1] = {0};
    FZ_LOOP(i, d.n)
    {
        T si = r[i] - a * v[i];
        r[i] = si;
        x[i] += a * ph[i];
        s[0] += (double)si * si;
        if (sh)
            sh[i] = dg[i] * si;
    }
    if (!fz_reduce(d, s))
        return;
    double sn = sqrt(s[0]);
    if (sn <= f->thresh) {
        fz_record(d, sn);
        fz_met(f, sn);
    }
}

template <typename T> FZ_KERNEL bi_omega(fz_dev d, const T *t, const T *s)
{
    fz_scalars *f = d.f;
    if (!f->live)
        return;
    double v[2] = {0, 0};
    FZ_LOOP(i, d.n)
    {
        v[0] += (double)t[i] * s[i];
        v[1] += (double)t[i] * t[i];
    }
    if (!fz_reduce(d, v))
        return;
    if (v[1] == 0.0 || !isfinite(v[1])) {
        fz_breakdown(f, FZ_BD_TT, v[1], f->it);
        return;
    }
    f->omega = v[0] / v[1];
}

/* The iteration's end: omega, then the next rho and beta. */
__device__ void bi_next(const fz_dev &d, double rnorm, double rho_new)
{
    fz_scalars *f = d.f;
    fz_record(d, rnorm);
    if (fz_met(f, rnorm))
        return;
    if (f->omega == 0.0) {
        fz_breakdown(f, FZ_BD_OMEGA, f->omega, f->it - 1);
        return;
    }
    if (fz_maxit(f))
        return;
    f->rho = f->rho_new;
    f->rho_new = rho_new;
    if (rho_new == 0.0 || !isfinite(rho_new)) {
        fz_breakdown(f, FZ_BD_RHO, rho_new, f->it);
        return;
    }
    f->beta = (rho_new / f->rho) * (f->alpha / f->omega);
}

template <typename T>
FZ_KERNEL bi_end(fz_dev d, T *x, T *r, const T *t, const T *sh, const T *r0)
{
    fz_scalars *f = d.f;
    if (!f->live)
        return;
    T om = (T)f->omega;
    double v[2] = {0, 0};
    FZ_LOOP(i, d.n)
    {
        x[i] += om * sh[i];
        T ri = r[i] - om * t[i];
        r[i] = ri;
        v[0] += (double)ri * ri;
        v[1] += (double)r0[i] * ri;
    }
    if (fz_reduce(d, v))
        bi_next(d, sqrt(v[0]), v[1]);
}

/* -------------------------------------------------------------- MINRES */

/* y -= (beta/oldb) r1 (from the second step on), alfa = v·y. */
template <typename T> FZ_KERNEL mr_alfa(fz_dev d, T *y, const T *r1, const T *v)
{
    fz_scalars *f = d.f;
    if (fz_idle(f))
        return;
    T c = f->oldb != 0.0 ? (T)(f->mbeta / f->oldb) : T(0);
    double s[1] = {0};
    FZ_LOOP(i, d.n)
    {
        T yi = y[i];
        if (c != T(0))
            yi -= c * r1[i];
        y[i] = yi;
        s[0] += (double)v[i] * yi;
    }
    if (fz_reduce(d, s))
        f->alfa = s[0];
}

/* beta_new = sqrt(r2·M⁻¹r2), the plane rotation of the QR factorisation,
 * phibar (the residual), the stop. */
__device__ void mr_finish(const fz_dev &d, double rz)
{
    fz_scalars *f = d.f;
    f->upd = 0;
    if (rz < 0.0 || !isfinite(rz) || !isfinite(f->alfa)) {
        fz_breakdown(f, FZ_BD_MR_RZ, rz, f->it);
        return;
    }
    double beta_new = sqrt(rz);
    f->oldeps = f->epsln;
    f->delta = f->cs * f->dbar + f->sn * f->alfa;
    double gbar = f->sn * f->dbar - f->cs * f->alfa;
    f->epsln = f->sn * beta_new;
    f->dbar = -f->cs * beta_new;
    double gamma = hypot(gbar, beta_new);
    if (gamma == 0.0 || !isfinite(gamma)) {
        fz_breakdown(f, FZ_BD_GAMMA, gamma, f->it);
        return;
    }
    f->gamma = gamma;
    f->cs = gbar / gamma;
    f->sn = beta_new / gamma;
    f->phi = f->cs * f->phibar;
    f->phibar *= f->sn;
    f->oldb = f->mbeta;
    f->mbeta = beta_new;
    f->upd = 1;
    fz_record(d, f->phibar * f->scale);
    if (fz_met(f, f->rnorm))
        return;
    if (beta_new == 0.0) { /* an invariant space: x is exact; the true residual decides */
        f->stop = FZ_CONVERGED;
        f->live = 0;
        return;
    }
    fz_maxit(f);
}

/* y -= (alfa/beta) r2; then, unless a callback preconditioner follows
 * (later), beta_new from y·D⁻¹y or y·y. */
template <typename T>
FZ_KERNEL mr_beta(fz_dev d, T *y, const T *r2, const T *dg, bool later)
{
    fz_scalars *f = d.f;
    if (!f->live)
        return;
    T c = (T)(f->alfa / f->mbeta);
    double s[1] = {0};
    FZ_LOOP(i, d.n)
    {
        T yi = y[i] - c * r2[i];
        y[i] = yi;
        s[0] += (double)yi * (dg ? dg[i] * yi : yi);
    }
    if (!later && fz_reduce(d, s))
        mr_finish(d, s[0]);
}

/* w = (v - oldeps w1 - delta w2) / gamma, x += phi w (owed), then the next
 * v = z / beta with z the callback's, D⁻¹r2 or r2. */
template <typename T>
FZ_KERNEL
    mr_wxv(fz_dev d, T *v, T *w, const T *w1, const T *w2, T *x, const T *r2, const T *dg, const T *z)
{
    fz_scalars *f = d.f;
    if (!f->upd)
        return;
    bool live = f->live;
    T g = (T)(1.0 / f->gamma), oe = (T)f->oldeps, de = (T)f->delta, ph = (T)f->phi;
    T ib = live ? (T)(1.0 / f->mbeta) : T(0);
    FZ_LOOP(i, d.n)
    {
        T wi = (v[i] - oe * w1[i] - de * w2[i]) * g;
        w[i] = wi;
        x[i] += ph * wi;
        if (live)
            v[i] = (z ? z[i] : dg ? dg[i] * r2[i] : r2[i]) * ib;
    }
}

/* --------------------------------------------------------------- GMRES */

#define HH(d, i, j) (d).H[(size_t)(j) * ((d).m + 1) + (i)]

/* Column j's end: H(j+1, j) = hn, the earlier rotations on the column, its
 * own, g, the estimate |g[j+1]| and whether the cycle goes on. */
__device__ void gm_column(const fz_dev &d, int32_t j, double hn)
{
    fz_scalars *f = d.f;
    f->hn = hn;
    HH(d, j + 1, j) = hn;
    for (int32_t i = 0; i < j; i++) {
        double t = d.cs[i] * HH(d, i, j) + d.sn[i] * HH(d, i + 1, j);
        HH(d, i + 1, j) = -d.sn[i] * HH(d, i, j) + d.cs[i] * HH(d, i + 1, j);
        HH(d, i, j) = t;
    }
    double den = hypot(HH(d, j, j), HH(d, j + 1, j));
    if (den == 0.0 || !isfinite(den)) {
        fz_breakdown(f, FZ_BD_HESS, den, f->it);
        return;
    }
    d.cs[j] = HH(d, j, j) / den;
    d.sn[j] = HH(d, j + 1, j) / den;
    HH(d, j, j) = den;
    HH(d, j + 1, j) = 0.0;
    d.g[j + 1] = -d.sn[j] * d.g[j];
    d.g[j] = d.cs[j] * d.g[j];
    f->used = j + 1;
    double est = fabs(d.g[j + 1]);
    fz_record(d, est);
    if (est <= f->thresh || hn == 0.0 || f->it >= f->maxit)
        f->live = 0; /* the cycle ends; its update and the true residual decide */
}

/* Modified Gram-Schmidt, one pass per basis vector: w = V[j+1] loses its
 * V[i-1] part (coefficient from the step before) and is dotted with V[i];
 * the pass after V[j] gives ||w||. */
template <typename T> FZ_KERNEL gm_mgs(fz_dev d, T *V, int32_t i, int32_t j)
{
    if (!d.f->live)
        return;
    T *w = V + (size_t)(j + 1) * d.n;
    const T *vi = V + (size_t)i * d.n, *vp = i > 0 ? V + (size_t)(i - 1) * d.n : NULL;
    T h = i > 0 ? (T)HH(d, i - 1, j) : T(0);
    double s[1] = {0};
    FZ_LOOP(k, d.n)
    {
        T wk = w[k];
        if (vp) {
            wk -= h * vp[k];
            w[k] = wk;
        }
        s[0] += (double)wk * (i <= j ? vi[k] : wk);
    }
    if (!fz_reduce(d, s))
        return;
    if (i <= j)
        HH(d, i, j) = s[0];
    else
        gm_column(d, j, sqrt(s[0]));
}

/* V[j+1] /= hn; zt = D⁻¹V[j+1] (Jacobi). */
template <typename T> FZ_KERNEL gm_scale(fz_dev d, T *V, int32_t j, T *zt, const T *dg)
{
    if (!d.f->live)
        return;
    T *w = V + (size_t)(j + 1) * d.n, s = (T)(1.0 / d.f->hn);
    FZ_LOOP(k, d.n)
    {
        T wk = w[k] * s;
        w[k] = wk;
        if (zt)
            zt[k] = dg[k] * wk;
    }
}

/* y = H⁻¹ g over the used columns (one warp: each row's sum split across
 * the lanes); the update then owes nused columns and the cycle none. */
__global__ void gm_solve(fz_dev d)
{
    fz_scalars *f = d.f;
    int32_t u = f->used;
    for (int32_t i = u - 1; i >= 0; i--) {
        double t = 0;
        for (int32_t k = i + 1 + threadIdx.x; k < u; k += GPU_WARP)
            t += HH(d, i, k) * d.y[k];
        t = gpu_group_sum(t, GPU_WARP);
        if (threadIdx.x == 0)
            d.y[i] = (d.g[i] - t) / HH(d, i, i);
        __syncwarp();
    }
    if (threadIdx.x == 0) {
        f->nused = u;
        f->used = 0;
    }
}

/* acc = V y over the owed columns; x += D⁻¹acc or acc (x), or zt = acc. */
template <typename T>
FZ_KERNEL gm_update(fz_dev d, const T *V, T *x, T *zt, const T *dg)
{
    int32_t u = d.f->nused;
    if (u == 0)
        return;
    FZ_LOOP(k, d.n)
    {
        double acc = 0;
        for (int32_t i = 0; i < u; i++)
            acc += d.y[i] * V[(size_t)i * d.n + k];
        if (zt)
            zt[k] = (T)acc;
        else
            x[k] += dg ? dg[k] * (T)acc : (T)acc;
    }
}

template <typename T> FZ_KERNEL gm_add(fz_dev d, const T *z, T *x)
{
    if (d.f->nused == 0)
        return;
    FZ_LOOP(k, d.n) x[k] += z[k];
}

/* r = b - r (r held A x): the true residual after a cycle, and whether
 * another cycle runs. */
template <typename T> FZ_KERNEL gm_resid(fz_dev d, const T *b, T *r)
{
    fz_scalars *f = d.f;
    if (f->stop != FZ_RUNNING)
        return;
    double s[1] = {0};
    FZ_LOOP(k, d.n)
    {
        T rk = b[k] - r[k];
        r[k] = rk;
        s[0] += (double)rk * rk;
    }
    if (!fz_reduce(d, s))
        return;
    f->rnorm = sqrt(s[0]);
    if (f->rnorm <= f->thresh)
        f->stop = FZ_CONVERGED;
    else if (f->it >= f->maxit)
        f->stop = FZ_MAXIT;
    else
        f->live = 1;
}

/* A cycle's start: V[0] = r / ||r||, g = ||r|| e1, zt = D⁻¹V[0]. */
template <typename T>
FZ_KERNEL gm_start(fz_dev d, const T *r, T *V, T *zt, const T *dg)
{
    fz_scalars *f = d.f;
    if (f->stop != FZ_RUNNING || !f->live)
        return;
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        for (int32_t i = 0; i <= d.m; i++)
            d.g[i] = 0.0;
        d.g[0] = f->rnorm;
    }
    T s = (T)(1.0 / f->rnorm);
    FZ_LOOP(k, d.n)
    {
        T vk = r[k] * s;
        V[k] = vk;
        if (zt)
            zt[k] = dg[k] * vk;
    }
}

#undef HH

/* ----------------------------------------------------------- launching */

static fz_dev dev_of(const spmv_gpu_fz *z)
{
    fz_dev d;
    d.f = (fz_scalars *)z->dev;
    d.hist = (double *)((char *)z->dev + sizeof(fz_scalars));
    d.hist_len = z->hist_len;
    d.part = z->part;
    d.part_stride = (size_t)z->grid * FZ_PARTS + 1;
    d.count = (unsigned *)(z->part + (size_t)z->grid * FZ_PARTS);
    d.col_bytes = z->col_bytes;
    d.m = z->m;
    d.H = z->gm;
    d.cs = d.H ? d.H + (size_t)(z->m + 1) * z->m : NULL;
    d.sn = d.H ? d.cs + z->m : NULL;
    d.g = d.H ? d.sn + z->m : NULL;
    d.y = d.H ? d.g + z->m + 1 : NULL;
    d.n = z->n;
    d.all = z->all;
    return d;
}

template <typename T> static T *vp(const spmv_vec *const *v, int k) { return v[k] ? (T *)v[k]->data : NULL; }

/* The kernels of CG and BiCGSTAB. */
template <typename T>
static bool launch_cg_bi(cudaStream_t st, dim3 g, const fz_dev &d, int op, int32_t i, const spmv_vec *const *v)
{
    switch (op) {
    case FZ_CG_PQ: cg_pq<T><<<g, FZ_BLOCK, 0, st>>>(d, vp<T>(v, 0), vp<T>(v, 1)); return true;
    case FZ_CG_R: cg_r<T><<<g, FZ_BLOCK, 0, st>>>(d, vp<T>(v, 0), vp<T>(v, 1), vp<T>(v, 2), i != 0); return true;
    case FZ_CG_RZ: dot_rz<T, cg_finish><<<g, FZ_BLOCK, 0, st>>>(d, vp<T>(v, 0), vp<T>(v, 1)); return true;
    case FZ_CG_P:
        cg_p<T><<<g, FZ_BLOCK, 0, st>>>(d, vp<T>(v, 0), vp<T>(v, 1), vp<T>(v, 2), vp<T>(v, 3), vp<T>(v, 4));
        return true;
    case FZ_BI_P:
        bi_p<T><<<g, FZ_BLOCK, 0, st>>>(d, vp<T>(v, 0), vp<T>(v, 1), vp<T>(v, 2), vp<T>(v, 3), vp<T>(v, 4));
        return true;
    case FZ_BI_ALPHA: bi_alpha<T><<<g, FZ_BLOCK, 0, st>>>(d, vp<T>(v, 0), vp<T>(v, 1)); return true;
    case FZ_BI_S:
        bi_s<T><<<g, FZ_BLOCK, 0, st>>>(d, vp<T>(v, 0), vp<T>(v, 1), vp<T>(v, 2), vp<T>(v, 3), vp<T>(v, 4),
                                        vp<T>(v, 5));
        return true;
    case FZ_BI_OMEGA: bi_omega<T><<<g, FZ_BLOCK, 0, st>>>(d, vp<T>(v, 0), vp<T>(v, 1)); return true;
    case FZ_BI_END:
        bi_end<T><<<g, FZ_BLOCK, 0, st>>>(d, vp<T>(v, 0), vp<T>(v, 1), vp<T>(v, 2), vp<T>(v, 3), vp<T>(v, 4));
        return true;
    }
    return false;
}

/* The kernels of MINRES and GMRES. */
template <typename T>
static bool launch_mr_gm(cudaStream_t st, unsigned g, const fz_dev &d, int op, int32_t i, int32_t j,
                         const spmv_vec *const *v)
{
    switch (op) {
    case FZ_MR_ALFA: mr_alfa<T><<<g, FZ_BLOCK, 0, st>>>(d, vp<T>(v, 0), vp<T>(v, 1), vp<T>(v, 2)); return true;
    case FZ_MR_BETA:
        mr_beta<T><<<g, FZ_BLOCK, 0, st>>>(d, vp<T>(v, 0), vp<T>(v, 1), vp<T>(v, 2), i != 0);
        return true;
    case FZ_MR_RZ: dot_rz<T, mr_finish><<<g, FZ_BLOCK, 0, st>>>(d, vp<T>(v, 0), vp<T>(v, 1)); return true;
    case FZ_MR_WXV:
        mr_wxv<T><<<g, FZ_BLOCK, 0, st>>>(d, vp<T>(v, 0), vp<T>(v, 1), vp<T>(v, 2), vp<T>(v, 3), vp<T>(v, 4),
                                          vp<T>(v, 5), vp<T>(v, 6), vp<T>(v, 7));
        return true;
    case FZ_GM_MGS: gm_mgs<T><<<g, FZ_BLOCK, 0, st>>>(d, vp<T>(v, 0), i, j); return true;
    case FZ_GM_SCALE: gm_scale<T><<<g, FZ_BLOCK, 0, st>>>(d, vp<T>(v, 0), j, vp<T>(v, 1), vp<T>(v, 2)); return true;
    case FZ_GM_SOLVE: gm_solve<<<1, GPU_WARP, 0, st>>>(d); return true;
    case FZ_GM_UPDATE:
        gm_update<T><<<g, FZ_BLOCK, 0, st>>>(d, vp<T>(v, 0), i ? NULL : vp<T>(v, 1), i ? vp<T>(v, 1) : NULL,
                                             vp<T>(v, 2));
        return true;
    case FZ_GM_ADD: gm_add<T><<<g, FZ_BLOCK, 0, st>>>(d, vp<T>(v, 0), vp<T>(v, 1)); return true;
    case FZ_GM_RESID: gm_resid<T><<<g, FZ_BLOCK, 0, st>>>(d, vp<T>(v, 0), vp<T>(v, 1)); return true;
    case FZ_GM_START:
        gm_start<T><<<g, FZ_BLOCK, 0, st>>>(d, vp<T>(v, 0), vp<T>(v, 1), vp<T>(v, 2), vp<T>(v, 3));
        return true;
    }
    return false;
}

template <typename T>
static bool launch_op(cudaStream_t st, unsigned g, int32_t cols, const fz_dev &d, int op, int32_t i, int32_t j,
                      const spmv_vec *const *v)
{
    return launch_cg_bi<T>(st, dim3(g, (unsigned)cols), d, op, i, v) || launch_mr_gm<T>(st, g, d, op, i, j, v);
}

/* FZ_CG_ITER: every block resident at once, as grid.sync needs. */
template <typename T, int E>
static cudaError_t launch_iter_e(cudaStream_t st, unsigned g, fz_dev d, const spmv_vec *const *v)
{
    T *p = vp<T>(v, 0), *r = vp<T>(v, 2), *x = vp<T>(v, 4);
    const T *q = vp<T>(v, 1), *dg = vp<T>(v, 3);
    void *args[] = {&d, &p, &q, &r, &dg, &x};
    return cudaLaunchCooperativeKernel((const void *)cg_iter<T, E>, g, FZ_BLOCK, args, 0, st);
}

template <typename T>
static cudaError_t launch_iter(cudaStream_t st, const spmv_gpu_fz *z, const fz_dev &d, const spmv_vec *const *v)
{
    switch (z->coop_e) {
    case 1: return launch_iter_e<T, 1>(st, z->coop_grid, d, v);
    case 2: return launch_iter_e<T, 2>(st, z->coop_grid, d, v);
    case 4: return launch_iter_e<T, 4>(st, z->coop_grid, d, v);
    default: return launch_iter_e<T, FZ_COOP_E>(st, z->coop_grid, d, v);
    }
}

/* FZ_CG_ITER's grid: as many blocks as n needs, at most those resident at
 * once (of its largest instantiation; at most FZ_MIN_BLOCKS an SM, so its
 * three parts a block fit the reduction scratch), each thread E <=
 * FZ_COOP_E values; none for a distributed solve, a device without
 * cooperative launches, or an n past the registers. */
static void coop_plan(spmv_gpu_ctx *ctx, spmv_gpu_fz *z)
{
    int coop = 0, per_sm = 0;
    z->coop_grid = 0;
    if (z->all.nranks > 1 || cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, ctx->device) != cudaSuccess ||
        !coop || cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, cg_iter<double, FZ_COOP_E>, FZ_BLOCK, 0) !=
                     cudaSuccess) {
        cudaGetLastError();
        return;
    }
    per_sm = per_sm < FZ_MIN_BLOCKS ? per_sm : FZ_MIN_BLOCKS;
    int64_t resident = (int64_t)ctx->sm_count * per_sm, want = (z->n + FZ_BLOCK - 1) / FZ_BLOCK;
    int64_t grid = want < resident ? want : resident;
    if (grid < 1)
        return;
    int64_t e = (z->n + grid * FZ_BLOCK - 1) / (grid * FZ_BLOCK);
    if (e > FZ_COOP_E)
        return;
    z->coop_e = e <= 1 ? 1 : e <= 2 ? 2 : e <= 4 ? 4 : FZ_COOP_E;
    z->coop_grid = (unsigned)grid;
}

extern "C" bool spmv_gpu_fz_one_pass(const spmv_gpu_fz *fz) { return fz && fz->coop_grid > 0; }

extern "C" int spmv_gpu_fz_run(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, int op, int32_t i, int32_t j,
                               const spmv_vec *const *v, spmv_error *err)
{
    fz_dev d = dev_of(fz);
    bool f32 = v[0] && v[0]->dtype == SPMV_FLOAT32;
    if (op == FZ_CG_ITER) {
        if (!fz->coop_grid || fz->ncols > 1)
            return spmv_error_set(err, SPMV_ERR_INVALID, 0, "fused solver: CG's one-pass kernel does not fit here");
        cudaError_t e = f32 ? launch_iter<float>(ctx->stream, fz, d, v) : launch_iter<double>(ctx->stream, fz, d, v);
        return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, "fused solver: CG's cooperative kernel");
    }
    bool cg = op == FZ_CG_PQ || op == FZ_CG_R || op == FZ_CG_RZ || op == FZ_CG_P;
    if (fz->ncols > 1 && !cg)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "fused solver: kernel %d runs one column", op);
    bool known = f32 ? launch_op<float>(ctx->stream, fz->grid, fz->ncols, d, op, i, j, v)
                     : launch_op<double>(ctx->stream, fz->grid, fz->ncols, d, op, i, j, v);
    if (!known)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "fused solver: unknown kernel %d", op);
    return gpu_check_launch(err, "a fused solver kernel");
}

/* ------------------------------------------------------ the device block */

extern "C" void spmv_gpu_fz_free(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz)
{
    if (!fz)
        return;
    cudaStreamSynchronize(ctx->stream);
    if (fz->exec)
        cudaGraphExecDestroy(fz->exec);
    if (fz->graph)
        cudaGraphDestroy(fz->graph);
    for (int k = 0; k < 2; k++) {
        if (fz->ev[k])
            cudaEventDestroy(fz->ev[k]);
        spmv_gpu_host_free(fz->host[k]);
    }
    gpu_ctx_free(ctx, fz->dev, fz->block_bytes);
    gpu_ctx_free(ctx, fz->part, fz->part_bytes);
    gpu_ctx_free(ctx, fz->gm, fz->gm_bytes);
    cudaGetLastError();
    delete fz;
}

static int fz_alloc(spmv_gpu_ctx *ctx, spmv_gpu_fz *z, spmv_error *err)
{
    int st;
    z->col_bytes = sizeof(fz_scalars) + (size_t)z->hist_len * sizeof(double);
    z->block_bytes = z->col_bytes * (size_t)z->ncols;
    z->part_bytes = ((size_t)z->grid * FZ_PARTS + 1) * sizeof(double) * (size_t)z->ncols;
    z->gm_bytes = z->m ? ((size_t)(z->m + 1) * z->m + 4 * (size_t)z->m + 1) * sizeof(double) : 0;
    if ((st = gpu_ctx_alloc(ctx, &z->dev, z->block_bytes, "fused solver: scalars", err)) ||
        (st = gpu_ctx_alloc(ctx, (void **)&z->part, z->part_bytes, "fused solver: reduction scratch", err)) ||
        (st = gpu_ctx_alloc(ctx, (void **)&z->gm, z->gm_bytes, "fused solver: GMRES's Hessenberg matrix", err)))
        return st;
    cudaError_t e = cudaMemsetAsync(z->part, 0, z->part_bytes, ctx->stream); /* the counter starts at 0 */
    if (e == cudaSuccess && z->gm)
        e = cudaMemsetAsync(z->gm, 0, z->gm_bytes, ctx->stream);
    if (e != cudaSuccess)
        return gpu_cuda_error(e, err, "fused solver: clearing its scratch");
    for (int k = 0; k < 2; k++) {
        if ((st = spmv_gpu_host_alloc(z->block_bytes, &z->host[k], err)))
            return st;
        if ((e = cudaEventCreateWithFlags(&z->ev[k], cudaEventDisableTiming)) != cudaSuccess)
            return gpu_cuda_error(e, err, "fused solver: cudaEventCreate");
    }
    return SPMV_OK;
}

extern "C" int spmv_gpu_fz_new(spmv_gpu_ctx *ctx, int64_t n, int32_t hist_len, int32_t m,
                               const spmv_allsum_dev *all, spmv_gpu_fz **out, spmv_error *err)
{
    return spmv_gpu_fz_new_k(ctx, n, 1, hist_len, m, all, out, err);
}

extern "C" int spmv_gpu_fz_new_k(spmv_gpu_ctx *ctx, int64_t n, int32_t ncols, int32_t hist_len, int32_t m,
                                 const spmv_allsum_dev *all, spmv_gpu_fz **out, spmv_error *err)
{
    *out = NULL;
    if (hist_len < 1 || m < 0 || ncols < 1 || ncols > 65535 || (ncols > 1 && (m > 0 || all)))
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "fused solver: history %d, restart %d, %d columns%s",
                              hist_len, m, ncols, ncols > 1 && all ? " distributed" : "");
    spmv_gpu_fz *z = new (std::nothrow) spmv_gpu_fz();
    if (!z)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for the fused solver");
    z->n = n;
    z->ncols = ncols;
    z->hist_len = hist_len;
    z->m = m;
    if (all)
        z->all = *all;
    int64_t want = (n + FZ_BLOCK - 1) / FZ_BLOCK, cap = (int64_t)ctx->sm_count * FZ_MIN_BLOCKS;
    z->grid = (unsigned)(want < 1 ? 1 : want < cap ? want : cap);
    if (ncols == 1)
        coop_plan(ctx, z);
    int st = fz_alloc(ctx, z, err);
    if (st) {
        spmv_gpu_fz_free(ctx, z);
        return st;
    }
    *out = z;
    return SPMV_OK;
}

extern "C" int spmv_gpu_fz_put(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, const fz_scalars *sc, spmv_error *err)
{
    return spmv_gpu_fz_put_col(ctx, fz, 0, sc, err);
}

extern "C" int spmv_gpu_fz_put_col(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, int32_t col, const fz_scalars *sc,
                                   spmv_error *err)
{
    if (col < 0 || col >= fz->ncols)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "fused solver: no column %d", col);
    cudaError_t e = cudaMemcpyAsync((char *)fz->dev + (size_t)col * fz->col_bytes, sc, sizeof *sc,
                                    cudaMemcpyHostToDevice, ctx->stream);
    if (e == cudaSuccess) /* sc may go when we return */
        e = cudaStreamSynchronize(ctx->stream);
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, "fused solver: writing its scalars");
}

extern "C" int spmv_gpu_fz_post(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, int slot, spmv_error *err)
{
    cudaError_t e = cudaMemcpyAsync(fz->host[slot], fz->dev, fz->block_bytes, cudaMemcpyDeviceToHost, ctx->stream);
    if (e == cudaSuccess)
        e = cudaEventRecord(fz->ev[slot], ctx->stream);
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, "fused solver: reading its status");
}

extern "C" int spmv_gpu_fz_poll(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, int slot, bool *ready, spmv_error *err)
{
    (void)ctx;
    cudaError_t e = cudaEventQuery(fz->ev[slot]);
    *ready = e == cudaSuccess;
    return e == cudaSuccess || e == cudaErrorNotReady ? SPMV_OK
                                                      : gpu_cuda_error(e, err, "fused solver: polling its status");
}

extern "C" int spmv_gpu_fz_wait(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, int slot, const fz_scalars **sc,
                                const double **hist, spmv_error *err)
{
    return spmv_gpu_fz_wait_col(ctx, fz, slot, 0, sc, hist, err);
}

extern "C" int spmv_gpu_fz_wait_col(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, int slot, int32_t col, const fz_scalars **sc,
                                    const double **hist, spmv_error *err)
{
    (void)ctx;
    if (col < 0 || col >= fz->ncols)
        return spmv_error_set(err, SPMV_ERR_INVALID, 0, "fused solver: no column %d", col);
    cudaError_t e = cudaEventSynchronize(fz->ev[slot]);
    if (e != cudaSuccess)
        return gpu_cuda_error(e, err, "fused solver: waiting for its status");
    const char *base = (const char *)fz->host[slot] + (size_t)col * fz->col_bytes;
    *sc = (const fz_scalars *)base;
    *hist = (const double *)(base + sizeof(fz_scalars));
    return SPMV_OK;
}

/* ---------------------------------------------------------------- graphs */

extern "C" int spmv_gpu_fz_capture_begin(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, spmv_error *err)
{
    (void)fz;
    /* thread-local: other threads' allocations (other workers) may go on */
    cudaError_t e = cudaStreamBeginCapture(ctx->stream, cudaStreamCaptureModeThreadLocal);
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, "fused solver: cudaStreamBeginCapture");
}

extern "C" int spmv_gpu_fz_capture_end(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, bool ok, spmv_error *err)
{
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(ctx->stream, &g);
    if (ok && e == cudaSuccess && g)
        e = cudaGraphInstantiate(&fz->exec, g, 0);
    if (!ok || e != cudaSuccess || !g || !fz->exec) {
        if (g)
            cudaGraphDestroy(g);
        fz->exec = NULL;
        cudaGetLastError(); /* the capture's failure is not the stream's */
        return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "fused solver: the iteration could not be captured (%s)",
                              cudaGetErrorString(e));
    }
    fz->graph = g;
    return SPMV_OK;
}

extern "C" void spmv_gpu_fz_uncapture(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz)
{
    cudaStreamSynchronize(ctx->stream); /* no replay still running reads the graph */
    if (fz->exec)
        cudaGraphExecDestroy(fz->exec);
    if (fz->graph)
        cudaGraphDestroy(fz->graph);
    fz->exec = NULL;
    fz->graph = NULL;
}

extern "C" int spmv_gpu_fz_replay(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, spmv_error *err)
{
    cudaError_t e = cudaGraphLaunch(fz->exec, ctx->stream);
    return e == cudaSuccess ? SPMV_OK : gpu_cuda_error(e, err, "fused solver: cudaGraphLaunch");
}
