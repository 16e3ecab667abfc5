/* absent_comm.c — the NCCL transport of a build without CUDA or without MPI.
 *
 * Linked instead of engine/gpu/comm.cu, so cluster/ links the same way in
 * every build; each call answers SPMV_ERR_UNAVAILABLE with the reason.
 */
#include <stddef.h>

#include "comm.h"

static const char *const no_nccl =
    "this build of spmvd has no NCCL transport (it needs both CUDA and MPI: built without nvcc, CUDA=0 or MPI=0)";

int spmv_gpu_comm_id(void *id, spmv_error *err)
{
    (void)id;
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_nccl);
}

int spmv_gpu_comm_new(spmv_gpu_ctx *ctx, int nranks, int rank, const void *id, double timeout_ms, bool ipc,
                      spmv_gpu_comm **out, spmv_error *err)
{
    (void)ctx; (void)nranks; (void)rank; (void)id; (void)timeout_ms; (void)ipc;
    *out = NULL;
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_nccl);
}

void spmv_gpu_comm_free(spmv_gpu_comm *c, bool abort) { (void)c; (void)abort; }

int spmv_gpu_halo_new(spmv_gpu_comm *c, spmv_dtype dt, const int32_t *send_off, const int32_t *send_idx,
                      const int32_t *recv_off, const int32_t *off_rows, int32_t n_off, spmv_gpu_halo **out,
                      spmv_error *err)
{
    (void)c; (void)dt; (void)send_off; (void)send_idx; (void)recv_off; (void)off_rows; (void)n_off;
    *out = NULL;
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_nccl);
}

void spmv_gpu_halo_free(spmv_gpu_comm *c, spmv_gpu_halo *h) { (void)c; (void)h; }

void spmv_gpu_comm_watch_set(spmv_gpu_comm *c, spmv_gpu_comm_watch fn, void *ctx)
{
    (void)c; (void)fn; (void)ctx;
}

int spmv_gpu_allsum_new(spmv_gpu_comm *c, bool ok, spmv_gpu_allsum **out, spmv_error *err)
{
    (void)c; (void)ok; (void)err;
    *out = NULL;
    return SPMV_OK;
}

void spmv_gpu_allsum_free(spmv_gpu_comm *c, spmv_gpu_allsum *a) { (void)c; (void)a; }

const spmv_allsum_dev *spmv_gpu_allsum_dev(const spmv_gpu_allsum *a)
{
    (void)a;
    return NULL;
}

int spmv_gpu_allsum_stats(spmv_gpu_allsum *a, unsigned *sums, double *waited_ms, spmv_error *err)
{
    (void)a;
    *sums = 0;
    *waited_ms = 0;
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_nccl);
}

bool spmv_gpu_allsum_failed(const spmv_gpu_allsum *a)
{
    (void)a;
    return false;
}

void spmv_gpu_allsum_stop(spmv_gpu_allsum *a) { (void)a; }

void spmv_gpu_halo_stop(spmv_gpu_comm *c, spmv_gpu_halo *h)
{
    (void)c; (void)h;
}

bool spmv_gpu_halo_ipc(const spmv_gpu_halo *h) { (void)h; return false; }

int spmv_gpu_halo_off_add(spmv_gpu_comm *c, spmv_gpu_halo *h, const spmv_gpu_matrix *off, spmv_vec *y,
                          spmv_error *err)
{
    (void)c; (void)h; (void)off; (void)y;
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_nccl);
}

int spmv_gpu_halo_begin(spmv_gpu_comm *c, spmv_gpu_halo *h, spmv_error *err)
{
    (void)c; (void)h;
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_nccl);
}

int spmv_gpu_halo_start(spmv_gpu_comm *c, spmv_gpu_halo *h, const spmv_vec *x, spmv_error *err)
{
    (void)c; (void)h; (void)x;
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_nccl);
}

int spmv_gpu_halo_join(spmv_gpu_comm *c, spmv_gpu_halo *h, const spmv_gpu_matrix *edge, const spmv_vec *x, spmv_vec *y,
                       double timeout_ms, spmv_error *err)
{
    (void)c; (void)h; (void)edge; (void)x; (void)y; (void)timeout_ms;
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_nccl);
}

int spmv_gpu_halo_finish(spmv_gpu_comm *c, spmv_gpu_halo *h, double timeout_ms, double *exposed_ms, double *device_ms,
                         spmv_error *err)
{
    (void)c; (void)h; (void)timeout_ms; (void)exposed_ms; (void)device_ms;
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_nccl);
}
