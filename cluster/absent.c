/* absent.c — the cluster of a build without MPI.
 *
 * Stands in for comm.c, spmv.c and rank.c when the build has no MPI
 * (MPI=0, or no Open MPI found), so the daemon links the same way in every
 * build: cluster_init answers SPMV_ERR_UNAVAILABLE with the reason, and
 * nothing else is reachable without a cluster.
 */
#ifndef SPMV_HAVE_MPI

#include <stddef.h>
#include <stdio.h>

#include "cluster/cluster.h"

#define UNUSED(x) (void)(x)

static const char *const no_mpi = "this build of spmvd has no MPI support (built with MPI=0 or without Open MPI)";

int cluster_init(int *argc, char ***argv, const cluster_options *o, cluster **out, spmv_error *err)
{
    UNUSED(argc); UNUSED(argv); UNUSED(o);
    *out = NULL;
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_mpi);
}

int cluster_rank(const cluster *c) { UNUSED(c); return 0; }
int cluster_size(const cluster *c) { UNUSED(c); return 1; }
const char *cluster_host(const cluster *c) { UNUSED(c); return ""; }
void cluster_finish(cluster *c) { UNUSED(c); }
int cluster_rank_loop(cluster *c) { UNUSED(c); return 1; }

int cluster_load(cluster *c, const char *id, const spmv_csr *a, bool gpu, cluster_matrix **out, spmv_error *err)
{
    UNUSED(c); UNUSED(id); UNUSED(a); UNUSED(gpu);
    *out = NULL;
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_mpi);
}

int cluster_reload(cluster *c, const char *id, const spmv_csr *a, bool gpu, cluster_matrix **out, spmv_error *err)
{
    return cluster_load(c, id, a, gpu, out, err);
}

void cluster_matrix_forget(cluster_matrix *m) { UNUSED(m); }

void cluster_unload(cluster *c, cluster_matrix *m) { UNUSED(c); UNUSED(m); }

int cluster_matrix_shards(const cluster_matrix *m, const cluster_shard_info **out)
{
    UNUSED(m);
    *out = NULL;
    return 0;
}

int cluster_matrix_nranks(const cluster_matrix *m) { UNUSED(m); return 0; }

int cluster_spmv(cluster *c, cluster_matrix *m, const spmv_kernel *k, const spmv_params *p,
                 const cluster_operands *io, int32_t warmup, int32_t runs, cluster_spmv_stats *out, spmv_error *err)
{
    UNUSED(c); UNUSED(m); UNUSED(k); UNUSED(p); UNUSED(io); UNUSED(warmup); UNUSED(runs); UNUSED(out);
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_mpi);
}

/* No sharded matrix exists without MPI, so no distributed vector does. */
int cluster_vec_new(cluster *c, const cluster_matrix *m, bool rows, const char *id, cluster_vec **out,
                    spmv_error *err)
{
    UNUSED(c); UNUSED(m); UNUSED(rows); UNUSED(id);
    *out = NULL;
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_mpi);
}

void cluster_vec_free(cluster *c, cluster_vec *v) { UNUSED(c); UNUSED(v); }
void cluster_vec_forget(cluster_vec *v) { UNUSED(v); }

int cluster_vec_write(cluster *c, cluster_vec *v, const void *values, spmv_error *err)
{
    UNUSED(c); UNUSED(v); UNUSED(values);
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_mpi);
}

int cluster_vec_read(cluster *c, const cluster_vec *v, void *values, spmv_error *err)
{
    UNUSED(c); UNUSED(v); UNUSED(values);
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_mpi);
}

const char *cluster_vec_id(const cluster_vec *v) { UNUSED(v); return ""; }
int64_t cluster_vec_n(const cluster_vec *v) { UNUSED(v); return 0; }
spmv_dtype cluster_vec_dtype(const cluster_vec *v) { UNUSED(v); return SPMV_FLOAT64; }
int cluster_vec_nranks(const cluster_vec *v) { UNUSED(v); return 0; }
const char *cluster_vec_side(const cluster_vec *v) { UNUSED(v); return ""; }
const char *cluster_vec_like(const cluster_vec *v) { UNUSED(v); return ""; }
const char *cluster_vec_device(const cluster_vec *v, int r) { UNUSED(v); UNUSED(r); return ""; }

bool cluster_vec_fits(const cluster_vec *v, const cluster_matrix *m, bool rows, char *why, size_t len)
{
    UNUSED(v); UNUSED(m); UNUSED(rows);
    snprintf(why, len, "%s", no_mpi);
    return false;
}

bool cluster_vec_same_layout(const cluster_vec *a, const cluster_vec *b) { UNUSED(a); UNUSED(b); return false; }

int cluster_vec_op(cluster *c, cluster_vop op, double alpha, cluster_vec *x, double beta, cluster_vec *y,
                   double *result, spmv_error *err)
{
    UNUSED(c); UNUSED(op); UNUSED(alpha); UNUSED(x); UNUSED(beta); UNUSED(y); UNUSED(result);
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_mpi);
}

int cluster_solve(cluster *c, cluster_matrix *m, const cluster_solve_args *a, spmv_solve_result *res,
                  cluster_solve_stats *st, spmv_error *err)
{
    UNUSED(c); UNUSED(m); UNUSED(a); UNUSED(res); UNUSED(st);
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_mpi);
}

int cluster_ping(cluster *c, spmv_error *err)
{
    UNUSED(c);
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_mpi);
}

int cluster_heartbeat(cluster *c, spmv_error *err)
{
    UNUSED(c);
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_mpi);
}

int cluster_pulse_heard(const cluster *c, int rank, double *age_ms, int64_t *count)
{
    UNUSED(c);
    UNUSED(rank);
    *age_ms = -1;
    *count = 0;
    return -1;
}

void cluster_shutdown(cluster *c) { UNUSED(c); }
const char *cluster_failed(cluster *c) { UNUSED(c); return no_mpi; }

int cluster_local_new(cluster *c, cluster_shard *s, spmv_dtype dtype, cluster_local **out, spmv_error *err)
{
    UNUSED(c); UNUSED(s); UNUSED(dtype);
    *out = NULL;
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_mpi);
}

void cluster_local_free(cluster *c, cluster_local *l) { UNUSED(c); UNUSED(l); }

int cluster_local_to_gpu(cluster *c, cluster_local *l, spmv_error *err)
{
    UNUSED(c); UNUSED(l);
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_mpi);
}

const cluster_shard *cluster_local_shard(const cluster_local *l) { UNUSED(l); return NULL; }
const char *cluster_local_device(const cluster_local *l) { UNUSED(l); return "cpu"; }

int cluster_local_spmv(cluster *c, cluster_local *l, const spmv_kernel *k, const spmv_params *p,
                       const void *x_local, void *y_local, int32_t warmup, int32_t runs, const cluster_run_times *t,
                       const spmv_kernel **ran, spmv_error *err)
{
    UNUSED(c); UNUSED(l); UNUSED(k); UNUSED(p); UNUSED(x_local); UNUSED(y_local); UNUSED(warmup); UNUSED(runs);
    UNUSED(t);
    if (ran)
        *ran = NULL;
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_mpi);
}

#else
typedef int cluster_absent_unused; /* ISO C wants a translation unit to hold something */
#endif
