/* absent.c — the cluster of a build without MPI.
 *
 * Stands in for comm.c, spmv.c and rank.c when the build has no MPI
 * (MPI=0, or no Open MPI found), so the daemon links the same way in every
 * build: cluster_init answers SPMV_ERR_UNAVAILABLE with the reason, and
 * nothing else is reachable without a cluster.
 */
#ifndef SPMV_HAVE_MPI

#include <stddef.h>

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

int cluster_spmv(cluster *c, cluster_matrix *m, const spmv_kernel *k, const spmv_params *p, const void *x,
                 void *y, int32_t warmup, int32_t runs, cluster_spmv_stats *out, spmv_error *err)
{
    UNUSED(c); UNUSED(m); UNUSED(k); UNUSED(p); UNUSED(x); UNUSED(y); UNUSED(warmup); UNUSED(runs); UNUSED(out);
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_mpi);
}

int cluster_ping(cluster *c, spmv_error *err)
{
    UNUSED(c);
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "%s", no_mpi);
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
