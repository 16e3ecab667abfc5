/* absent.c — the GPU backend of a build without CUDA.
 *
 * Linked instead of the CUDA sources (engine/gpu, .cu) when nvcc is not found (or CUDA=0), so
 * the daemon and tools link the same way in both builds. Every entry point
 * answers SPMV_ERR_UNAVAILABLE with the reason; spmv_gpu_count() reports no
 * devices, which makes every GPU kernel list as unavailable.
 */
#include <string.h>

#include "amg.h"
#include "precond_impl.h"
#include "krylov_fused.h"
#include "spmv.h"

#define UNUSED(x) (void)(x)

static const char *const no_cuda = "this build of spmvd has no CUDA support (built without nvcc or with CUDA=0)";

int spmv_gpu_count(const char **reason)
{
    if (reason)
        *reason = no_cuda;
    return 0;
}

int spmv_gpu_ctx_new(int device, size_t reserve_bytes, spmv_gpu_ctx **out, spmv_error *err)
{
    UNUSED(reserve_bytes);
    *out = NULL;
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "GPU %d: %s", device, no_cuda);
}

void spmv_gpu_ctx_free(spmv_gpu_ctx *ctx) { (void)ctx; }

int spmv_gpu_profile(spmv_gpu_ctx *ctx, bool on, spmv_error *err)
{
    UNUSED(ctx);
    UNUSED(on);
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "the profiler: %s", no_cuda);
}

int spmv_gpu_ctx_info(spmv_gpu_ctx *ctx, spmv_gpu_info *info)
{
    UNUSED(ctx);
    UNUSED(info);
    return SPMV_ERR_UNAVAILABLE;
}

int spmv_gpu_matrix_upload(spmv_gpu_ctx *ctx, const spmv_coo *coo, spmv_dtype dtype,
                           unsigned formats, int32_t hack_size,
                           spmv_gpu_matrix **out, spmv_gpu_upload_stats *st, spmv_error *err)
{
    UNUSED(ctx); UNUSED(coo); UNUSED(dtype); UNUSED(formats); UNUSED(hack_size); UNUSED(st);
    *out = NULL;
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_cuda);
}

int spmv_gpu_matrix_upload_csr(spmv_gpu_ctx *ctx, const spmv_csr *csr, spmv_dtype dtype,
                               unsigned formats, int32_t hack_size,
                               spmv_gpu_matrix **out, spmv_gpu_upload_stats *st, spmv_error *err)
{
    UNUSED(ctx); UNUSED(csr); UNUSED(dtype); UNUSED(formats); UNUSED(hack_size); UNUSED(st);
    *out = NULL;
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_cuda);
}

void spmv_gpu_matrix_free(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m) { (void)ctx; (void)m; }

size_t spmv_gpu_matrix_bytes(const spmv_gpu_matrix *m)
{
    UNUSED(m);
    return 0;
}

void spmv_gpu_matrix_usage(const spmv_gpu_matrix *m, spmv_gpu_usage *out)
{
    UNUSED(m);
    memset(out, 0, sizeof *out);
}

void spmv_gpu_matrix_psell_patterns(const spmv_gpu_matrix *m, int32_t *patterns, int64_t *slices)
{
    UNUSED(m);
    *patterns = 0;
    *slices = 0;
}

void spmv_gpu_matrix_trim(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, unsigned keep)
{
    UNUSED(ctx); UNUSED(m); UNUSED(keep);
}

int spmv_gpu_matrix_set_values(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, const void *val, spmv_error *err)
{
    UNUSED(ctx); UNUSED(m); UNUSED(val);
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_cuda);
}

int spmv_gpu_ctx_set_limits(spmv_gpu_ctx *ctx, const spmv_format_limits *lim)
{
    UNUSED(ctx); UNUSED(lim);
    return SPMV_ERR_UNAVAILABLE;
}

int spmv_gpu_run(spmv_gpu_ctx *ctx, const spmv_kernel *k, spmv_gpu_matrix *m,
                 const spmv_params *p, const void *x, void *y,
                 int32_t warmup, int32_t runs, spmv_stats *stats, spmv_error *err)
{
    UNUSED(ctx); UNUSED(m); UNUSED(p); UNUSED(x); UNUSED(y); UNUSED(warmup); UNUSED(runs); UNUSED(stats);
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "kernel %s: %s", k ? k->name : "?", no_cuda);
}

int spmv_gpu_matrix_download(spmv_gpu_ctx *ctx, const spmv_gpu_matrix *m, spmv_format f,
                             spmv_matrix *out, spmv_error *err)
{
    UNUSED(ctx); UNUSED(m); UNUSED(f); UNUSED(out);
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_cuda);
}

/* Resident vectors and products with resident operands (issue 12). */
int spmv_gpu_vec_alloc(spmv_gpu_ctx *ctx, spmv_dtype dtype, int64_t n, int32_t k, spmv_vec *out, spmv_error *err)
{
    UNUSED(ctx); UNUSED(dtype); UNUSED(n); UNUSED(k); UNUSED(out);
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "GPU vectors: %s", no_cuda);
}

void spmv_gpu_vec_free(spmv_gpu_ctx *ctx, spmv_vec *v) { UNUSED(ctx); UNUSED(v); }

#define VEC_ABSENT(what) return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "GPU %s: %s", what, no_cuda)

int spmv_gpu_vec_write(spmv_gpu_ctx *ctx, spmv_vec *v, const void *src, spmv_error *err)
{
    UNUSED(ctx); UNUSED(v); UNUSED(src);
    VEC_ABSENT("vector write");
}
int spmv_gpu_vec_read(spmv_gpu_ctx *ctx, const spmv_vec *v, void *dst, spmv_error *err)
{
    UNUSED(ctx); UNUSED(v); UNUSED(dst);
    VEC_ABSENT("vector read");
}
int spmv_gpu_vec_fill(spmv_gpu_ctx *ctx, spmv_vec *v, double value, spmv_error *err)
{
    UNUSED(ctx); UNUSED(v); UNUSED(value);
    VEC_ABSENT("fill");
}
int spmv_gpu_vec_copy(spmv_gpu_ctx *ctx, const spmv_vec *x, spmv_vec *y, spmv_error *err)
{
    UNUSED(ctx); UNUSED(x); UNUSED(y);
    VEC_ABSENT("copy");
}
int spmv_gpu_vec_scal(spmv_gpu_ctx *ctx, double alpha, spmv_vec *x, spmv_error *err)
{
    UNUSED(ctx); UNUSED(alpha); UNUSED(x);
    VEC_ABSENT("scal");
}
int spmv_gpu_vec_axpby(spmv_gpu_ctx *ctx, double alpha, const spmv_vec *x, double beta, spmv_vec *y,
                       spmv_error *err)
{
    UNUSED(ctx); UNUSED(alpha); UNUSED(x); UNUSED(beta); UNUSED(y);
    VEC_ABSENT("axpby");
}
int spmv_gpu_vec_mul(spmv_gpu_ctx *ctx, const spmv_vec *x, spmv_vec *y, spmv_error *err)
{
    UNUSED(ctx); UNUSED(x); UNUSED(y);
    VEC_ABSENT("mul");
}
int spmv_gpu_vec_dot(spmv_gpu_ctx *ctx, const spmv_vec *x, const spmv_vec *y, double *out, spmv_error *err)
{
    UNUSED(ctx); UNUSED(x); UNUSED(y); UNUSED(out);
    VEC_ABSENT("dot");
}
int spmv_gpu_vec_nrm2(spmv_gpu_ctx *ctx, const spmv_vec *x, double *out, spmv_error *err)
{
    UNUSED(ctx); UNUSED(x); UNUSED(out);
    VEC_ABSENT("nrm2");
}
int spmv_gpu_vec_axpy_k(spmv_gpu_ctx *ctx, const double *alpha, const spmv_vec *x, spmv_vec *y, const bool *on,
                        spmv_error *err)
{
    UNUSED(ctx); UNUSED(alpha); UNUSED(x); UNUSED(y); UNUSED(on);
    VEC_ABSENT("axpy_k");
}
int spmv_gpu_vec_xpay_k(spmv_gpu_ctx *ctx, const spmv_vec *x, const double *beta, spmv_vec *y, const bool *on,
                        spmv_error *err)
{
    UNUSED(ctx); UNUSED(x); UNUSED(beta); UNUSED(y); UNUSED(on);
    VEC_ABSENT("xpay_k");
}
int spmv_gpu_vec_diag_k(spmv_gpu_ctx *ctx, const spmv_vec *d, const spmv_vec *x, spmv_vec *y, const bool *on,
                        spmv_error *err)
{
    UNUSED(ctx); UNUSED(d); UNUSED(x); UNUSED(y); UNUSED(on);
    VEC_ABSENT("diag_k");
}
int spmv_gpu_vec_nrm2_dot_k(spmv_gpu_ctx *ctx, const spmv_vec *x, const spmv_vec *y, const bool *on, double *nrm,
                            double *dot, spmv_error *err)
{
    UNUSED(ctx); UNUSED(x); UNUSED(y); UNUSED(on); UNUSED(nrm); UNUSED(dot);
    VEC_ABSENT("nrm2_dot_k");
}
int spmv_gpu_sync(spmv_gpu_ctx *ctx, spmv_error *err)
{
    UNUSED(ctx);
    VEC_ABSENT("sync");
}
int spmv_gpu_apply(spmv_gpu_ctx *ctx, const spmv_kernel *k, spmv_gpu_matrix *m, const spmv_params *p,
                   const spmv_apply_args *a, const spmv_vec *x, spmv_vec *y, spmv_stats *stats,
                   double *axpby_ms, spmv_error *err)
{
    UNUSED(ctx); UNUSED(m); UNUSED(p); UNUSED(a); UNUSED(x); UNUSED(y); UNUSED(stats); UNUSED(axpby_ms);
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "kernel %s: %s", k ? k->name : "?", no_cuda);
}
int spmv_gpu_launch(spmv_gpu_ctx *ctx, const spmv_kernel *k, spmv_gpu_matrix *m, const spmv_params *p,
                    const spmv_vec *x, spmv_vec *y, spmv_error *err)
{
    UNUSED(ctx); UNUSED(m); UNUSED(p); UNUSED(x); UNUSED(y);
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "kernel %s: %s", k ? k->name : "?", no_cuda);
}
int spmv_gpu_run_k(spmv_gpu_ctx *ctx, const spmv_kernel *k, spmv_gpu_matrix *m, const spmv_params *p,
                   int32_t ncols, const void *x, void *y, int32_t warmup, int32_t runs, spmv_stats *stats,
                   spmv_error *err)
{
    UNUSED(ctx); UNUSED(m); UNUSED(p); UNUSED(ncols); UNUSED(x); UNUSED(y); UNUSED(warmup); UNUSED(runs);
    UNUSED(stats);
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "kernel %s: %s", k ? k->name : "?", no_cuda);
}
int spmv_gpu_run_batch(spmv_gpu_ctx *ctx, const spmv_kernel *k, spmv_gpu_matrix *m, const spmv_params *p,
                       int32_t ncols, const void *const *x, void *const *y, spmv_stats *stats,
                       spmv_batch_times *times, spmv_error *err)
{
    UNUSED(ctx); UNUSED(m); UNUSED(p); UNUSED(ncols); UNUSED(x); UNUSED(y); UNUSED(stats); UNUSED(times);
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "kernel %s: %s", k ? k->name : "?", no_cuda);
}
int spmv_gpu_matrix_transpose(spmv_gpu_ctx *ctx, spmv_gpu_matrix *m, spmv_gpu_matrix **out, spmv_error *err)
{
    UNUSED(ctx); UNUSED(m);
    *out = NULL;
    VEC_ABSENT("transpose");
}

int spmv_gpu_matrix_generate_band(spmv_gpu_ctx *ctx, const spmv_band_spec *spec, spmv_gpu_matrix **out,
                                  spmv_error *err)
{
    UNUSED(ctx); UNUSED(spec);
    *out = NULL;
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_cuda);
}

int spmv_gpu_host_pin(void *p, size_t n, spmv_error *err)
{
    UNUSED(p);
    UNUSED(n);
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "pinning host memory: %s", no_cuda);
}

void spmv_gpu_host_unpin(void *p) { UNUSED(p); }

int spmv_gpu_host_alloc(size_t n, void **out, spmv_error *err)
{
    UNUSED(n);
    *out = NULL;
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "page-locked host memory: %s", no_cuda);
}

void spmv_gpu_host_free(void *p) { UNUSED(p); }

int spmv_gpu_ipc_open(int device, const void *handle, void **dptr, size_t *bytes, spmv_error *err)
{
    UNUSED(handle);
    *dptr = NULL;
    *bytes = 0;
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "CUDA IPC on GPU %d: %s", device, no_cuda);
}

void spmv_gpu_ipc_close(int device, void *dptr)
{
    UNUSED(device);
    UNUSED(dptr);
}

bool spmv_gpu_kernel_bound(const spmv_kernel *k)
{
    (void)k;
    return false; /* no GPU backend in this build */
}

int spmv_gpu_amg_upload(spmv_gpu_ctx *ctx, const spmv_amg *h, spmv_dtype dtype, spmv_gpu_amg **out, spmv_error *err)
{
    UNUSED(ctx);
    UNUSED(h);
    UNUSED(dtype);
    *out = NULL;
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "AMG on a GPU: %s", no_cuda);
}

int spmv_gpu_amg_upload_smoother(spmv_gpu_ctx *ctx, const spmv_amg_level *lv, int32_t degree, spmv_gpu_amg **out,
                                 spmv_error *err)
{
    UNUSED(ctx);
    UNUSED(lv);
    UNUSED(degree);
    *out = NULL;
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "a smoother on a GPU: %s", no_cuda);
}

void spmv_gpu_amg_free(spmv_gpu_ctx *ctx, spmv_gpu_amg *g)
{
    UNUSED(ctx);
    UNUSED(g);
}

int spmv_gpu_amg_products(void *ctx, const spmv_csr *A, const double *dinv, double omega, const spmv_csr *T,
                          spmv_csr *P, spmv_csr *R, spmv_csr *Ac, double *ms, spmv_error *err)
{
    UNUSED(ctx);
    UNUSED(A);
    UNUSED(dinv);
    UNUSED(omega);
    UNUSED(T);
    UNUSED(P);
    UNUSED(R);
    UNUSED(Ac);
    UNUSED(ms);
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "the AMG setup's products on a GPU: %s", no_cuda);
}

int spmv_gpu_amg_build(spmv_gpu_ctx *ctx, const spmv_csr *a, const spmv_amg_options *o, spmv_dtype dtype,
                       spmv_gpu_amg **out, spmv_amg_summary *sum, spmv_error *err)
{
    UNUSED(ctx);
    UNUSED(a);
    UNUSED(o);
    UNUSED(dtype);
    UNUSED(sum);
    *out = NULL;
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "the AMG setup on a GPU: %s", no_cuda);
}

int spmv_gpu_amg_level_get(spmv_gpu_ctx *ctx, const spmv_gpu_amg *g, int32_t l, spmv_csr *A, spmv_csr *P, spmv_csr *R,
                           spmv_error *err)
{
    UNUSED(ctx);
    UNUSED(g);
    UNUSED(l);
    UNUSED(A);
    UNUSED(P);
    UNUSED(R);
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "AMG on a GPU: %s", no_cuda);
}

size_t spmv_gpu_amg_bytes(const spmv_gpu_amg *g)
{
    UNUSED(g);
    return 0;
}

int spmv_gpu_amg_vcycle(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, const spmv_vec *r, spmv_vec *z, spmv_error *err)
{
    UNUSED(ctx);
    UNUSED(g);
    UNUSED(r);
    UNUSED(z);
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "AMG on a GPU: %s", no_cuda);
}

int spmv_gpu_amg_vcycle_with(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, const spmv_gpu_product *fine, const spmv_vec *r,
                             spmv_vec *z, spmv_error *err)
{
    UNUSED(fine);
    return spmv_gpu_amg_vcycle(ctx, g, r, z, err);
}

int spmv_gpu_amg_vcycle_k(spmv_gpu_ctx *ctx, spmv_gpu_amg *g, const spmv_vec *r, spmv_vec *z, const bool *active,
                          spmv_error *err)
{
    UNUSED(ctx);
    UNUSED(g);
    UNUSED(r);
    UNUSED(z);
    UNUSED(active);
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "AMG on a GPU: %s", no_cuda);
}

int spmv_gpu_block_jacobi_apply_k(spmv_gpu_ctx *ctx, const spmv_vec *inv, int32_t b, const spmv_vec *r, spmv_vec *z,
                                  const bool *active, spmv_error *err)
{
    UNUSED(ctx);
    UNUSED(inv);
    UNUSED(b);
    UNUSED(r);
    UNUSED(z);
    UNUSED(active);
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "block_jacobi on a GPU: %s", no_cuda);
}

int spmv_gpu_block_jacobi_apply(spmv_gpu_ctx *ctx, const spmv_vec *inv, int32_t b, const spmv_vec *r, spmv_vec *z,
                                spmv_error *err)
{
    UNUSED(ctx);
    UNUSED(inv);
    UNUSED(b);
    UNUSED(r);
    UNUSED(z);
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "block_jacobi on a GPU: %s", no_cuda);
}

int spmv_gpu_ilu_setup(spmv_gpu_ctx *ctx, const spmv_csr *f, bool lower, spmv_dtype dtype, spmv_gpu_ilu **out,
                       spmv_error *err)
{
    UNUSED(ctx);
    UNUSED(f);
    UNUSED(dtype);
    *out = NULL;
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s on a GPU: %s", lower ? "ic0" : "ilu0", no_cuda);
}

int spmv_gpu_ilu_apply(spmv_gpu_ctx *ctx, spmv_gpu_ilu *g, const spmv_vec *r, spmv_vec *z, spmv_error *err)
{
    UNUSED(ctx);
    UNUSED(g);
    UNUSED(r);
    UNUSED(z);
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "ic0/ilu0 on a GPU: %s", no_cuda);
}

void spmv_gpu_ilu_free(spmv_gpu_ctx *ctx, spmv_gpu_ilu *g)
{
    UNUSED(ctx);
    UNUSED(g);
}

size_t spmv_gpu_ilu_bytes(const spmv_gpu_ilu *g)
{
    UNUSED(g);
    return 0;
}

/* The fused Krylov path (engine/krylov_fused.h): never asked for without a
 * context, so these only keep the link whole. */
#define FZ_ABSENT return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "fused solver: %s", no_cuda)
int spmv_gpu_fz_new(spmv_gpu_ctx *ctx, int64_t n, int32_t hist_len, int32_t m, const spmv_allsum_dev *all,
                    spmv_gpu_fz **out, spmv_error *err)
{
    UNUSED(ctx); UNUSED(n); UNUSED(hist_len); UNUSED(m); UNUSED(all);
    *out = NULL;
    FZ_ABSENT;
}
int spmv_gpu_fz_new_k(spmv_gpu_ctx *ctx, int64_t n, int32_t ncols, int32_t hist_len, int32_t m,
                      const spmv_allsum_dev *all, spmv_gpu_fz **out, spmv_error *err)
{
    UNUSED(ctx); UNUSED(n); UNUSED(ncols); UNUSED(hist_len); UNUSED(m); UNUSED(all);
    *out = NULL;
    FZ_ABSENT;
}
void spmv_gpu_fz_free(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz) { UNUSED(ctx); UNUSED(fz); }
int spmv_gpu_fz_put_col(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, int32_t col, const fz_scalars *sc, spmv_error *err)
{
    UNUSED(ctx); UNUSED(fz); UNUSED(col); UNUSED(sc);
    FZ_ABSENT;
}
int spmv_gpu_fz_wait_col(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, int slot, int32_t col, const fz_scalars **sc,
                         const double **hist, spmv_error *err)
{
    UNUSED(ctx); UNUSED(fz); UNUSED(slot); UNUSED(col); UNUSED(sc); UNUSED(hist);
    FZ_ABSENT;
}
int spmv_gpu_fz_put(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, const fz_scalars *sc, spmv_error *err)
{
    UNUSED(ctx); UNUSED(fz); UNUSED(sc);
    FZ_ABSENT;
}
int spmv_gpu_fz_post(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, int slot, spmv_error *err)
{
    UNUSED(ctx); UNUSED(fz); UNUSED(slot);
    FZ_ABSENT;
}
int spmv_gpu_fz_poll(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, int slot, bool *ready, spmv_error *err)
{
    UNUSED(ctx); UNUSED(fz); UNUSED(slot);
    *ready = false;
    FZ_ABSENT;
}

int spmv_gpu_fz_wait(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, int slot, const fz_scalars **sc, const double **hist,
                     spmv_error *err)
{
    UNUSED(ctx); UNUSED(fz); UNUSED(slot); UNUSED(sc); UNUSED(hist);
    FZ_ABSENT;
}
int spmv_gpu_fz_run(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, int op, int32_t i, int32_t j, const spmv_vec *const *v,
                    spmv_error *err)
{
    UNUSED(ctx); UNUSED(fz); UNUSED(op); UNUSED(i); UNUSED(j); UNUSED(v);
    FZ_ABSENT;
}
int spmv_gpu_fz_capture_begin(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, spmv_error *err)
{
    UNUSED(ctx); UNUSED(fz);
    FZ_ABSENT;
}
int spmv_gpu_fz_capture_end(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, bool ok, spmv_error *err)
{
    UNUSED(ctx); UNUSED(fz); UNUSED(ok);
    FZ_ABSENT;
}
int spmv_gpu_fz_replay(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz, spmv_error *err)
{
    UNUSED(ctx); UNUSED(fz);
    FZ_ABSENT;
}
void spmv_gpu_fz_uncapture(spmv_gpu_ctx *ctx, spmv_gpu_fz *fz)
{
    UNUSED(ctx); UNUSED(fz);
}
bool spmv_gpu_fz_one_pass(const spmv_gpu_fz *fz)
{
    UNUSED(fz);
    return false;
}
