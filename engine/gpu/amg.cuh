/* amg.cuh — the AMG hierarchy on a GPU as its two files see it: amg.cu
 * (the copy of a host hierarchy, the V-cycle) and amg_build.cu (the whole
 * setup on the device), with what amg_setup.cu's products lend them.
 */
#ifndef SPMV_GPU_AMG_CUH
#define SPMV_GPU_AMG_CUH

#include "amg.h"
#include "gpu.cuh"

struct gpu_amg_level {
    gpu_dcsr A, P, R;
    void *dinv, *r, *x, *b, *d; /* the hierarchy's dtype */
    double rho;
    /* A x of a one-column cycle by a kernel of the catalogue on a view of A
     * (levels 1 to the last but one: gpu_amg_views), NULL: cuSPARSE's */
    spmv_gpu_matrix *view;
    spmv_gpu_product prod;
};

/* One level's work blocks for a cycle of k columns (n x k, column-major):
 * the level's own vectors for one column, the k-column blocks else. */
struct gpu_amg_work {
    void *r, *x, *b, *d;
};

struct spmv_gpu_amg {
    spmv_dtype dtype;     /* of every value and work vector */
    bool smoother_only;   /* the chebyshev preconditioner: one level, one sweep */
    int32_t nlevels;
    gpu_amg_level *lv;
    spmv_amg_smoother smoother;
    int32_t presmooth, postsmooth, degree;
    int32_t coarse_n;
    void *coarse_inv;     /* row-major */
    void *in, *out;       /* level 0's b and x when the solve's vectors are of the other dtype */
    size_t bytes;
    /* spmv_gpu_amg_vcycle_k's: every level's work blocks, and level 0's
     * staging blocks (kin, kout), kcap columns each, made on first use */
    gpu_amg_work *kw;
    void *kin, *kout;
    int32_t kcap;
};

/* Each level's A below level 0 but the coarsest gets a view and a kernel
 * of the catalogue, its format built now and counted in g->bytes
 * (docs/kernels.md, "The AMG V-cycle"). */
int gpu_amg_views(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, spmv_error *err);
/* A fresh object of `levels` levels (zeroed) in dtype, on ctx's device. */
int gpu_amg_new(spmv_gpu_ctx *ctx, int32_t levels, spmv_dtype dtype, spmv_gpu_amg **out, spmv_error *err);
/* values of g's dtype on the device, counted in g->bytes. */
int gpu_amg_alloc(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, void **p, size_t values, const char *what, spmv_error *err);
/* A level's products on the device (amg_setup.cu): P = T - omega D^-1
 * (A T), R = P^T and Ac = R (A P) from float64 device operands A (with
 * its descriptor), dinv and T, each sorted float64 CSR with a descriptor;
 * A and T are left as they were. ms: spmv_amg's phase_ms. */
int gpu_amg_products_dev(spmv_gpu_ctx *ctx, gpu_dcsr *A, const double *dinv, double omega, gpu_dcsr *T, gpu_dcsr *P,
                         gpu_dcsr *R, gpu_dcsr *Ac, double *ms, spmv_error *err);
/* d (either dtype) into a fresh float64 host CSR. */
int gpu_dcsr_download(spmv_gpu_ctx *ctx, const gpu_dcsr *d, spmv_csr *h, spmv_error *err);
/* *flag = 1 when a row of the CSR has a column not above the one before. */
__global__ void amg_rows_unsorted(int32_t rows, const int32_t *__restrict__ rp, const int32_t *__restrict__ col,
                                  int *flag);

#endif /* SPMV_GPU_AMG_CUH */
