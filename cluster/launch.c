/* launch.c — whether this process is one rank of an MPI job.
 *
 * Asked before MPI is initialised (and in builds without MPI, which must
 * refuse to run as several ranks rather than start several daemons on one
 * port): the launchers' environment says it. Open MPI's mpirun sets
 * OMPI_COMM_WORLD_SIZE, PMIx launchers PMIX_RANK, MPICH's Hydra PMI_SIZE.
 */
#include <stdlib.h>

#include "cluster/cluster.h"

bool cluster_launched(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i]))
            return true;
    return false;
}

int cluster_launched_size(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && atoi(v) > 0)
            return atoi(v);
    }
    return cluster_launched() ? 0 : 1;
}
