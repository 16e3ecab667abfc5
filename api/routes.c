/* routes.c — the route table: which path and method go to which handlers.
 *
 * Paths are matched segment by segment against the fixed shapes of docs/api.md
 * ("/v1/matrices/{id}/spmv" ...). An {id} must be a UUID in the form
 * the daemon hands out (lower-case, strictly parsed); anything else is a
 * 404, not a lookup. Unknown paths are 404; a known path with a method it
 * does not take is 405 with Allow.
 */
#include <string.h>

#include "api/api.h"

const char *const api_route_names[ROUTE_COUNT] = {
    [ROUTE_HEALTH] = "health",     [ROUTE_READY] = "ready",   [ROUTE_INFO] = "info",
    [ROUTE_KERNELS] = "kernels",   [ROUTE_MATRICES] = "matrices", [ROUTE_MATRIX] = "matrix",
    [ROUTE_SPY] = "spy",           [ROUTE_SPMV] = "spmv",     [ROUTE_BENCH] = "bench",
    [ROUTE_JOB] = "job",           [ROUTE_METRICS] = "metrics", [ROUTE_UNKNOWN] = "unknown",
    [ROUTE_SPMSPM] = "spmspm",     [ROUTE_TUNE] = "tune",     [ROUTE_VECTORS] = "vectors",
    [ROUTE_VECTOR] = "vector",     [ROUTE_OPS] = "ops",       [ROUTE_SOLVE] = "solve",
    [ROUTE_SHM] = "shm",           [ROUTE_SHM_REGION] = "shm_region",
};

/* Copies the {id} segment [s, e) and checks it. */
static bool take_id(const char *s, size_t n, char out[MATFILE_ID_LEN + 1])
{
    if (n != MATFILE_ID_LEN)
        return false;
    memcpy(out, s, n);
    out[n] = '\0';
    return store_id_valid(out);
}

route_id api_route_match(const char *path, char id_out[MATFILE_ID_LEN + 1], bool *bad_id)
{
    static const struct { const char *path; route_id id; } fixed[] = {
        {"/v1/health", ROUTE_HEALTH},     {"/v1/ready", ROUTE_READY},
        {"/v1/info", ROUTE_INFO},         {"/v1/kernels", ROUTE_KERNELS},
        {"/v1/matrices", ROUTE_MATRICES}, {"/metrics", ROUTE_METRICS},
        {"/v1/vectors", ROUTE_VECTORS},   {"/v1/ops", ROUTE_OPS},
        {"/v1/shm", ROUTE_SHM},
    };
    *bad_id = false;
    id_out[0] = '\0';
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (strcmp(path, fixed[i].path) == 0)
            return fixed[i].id;

    /* a region's {name} is no UUID: its handler checks it (a name with '/'
     * gets a 400 that says so, not a 404) */
    if (strncmp(path, "/v1/shm/", 8) == 0)
        return ROUTE_SHM_REGION;
    const char *rest;
    bool jobs = false, vectors = false;
    if (strncmp(path, "/v1/matrices/", 13) == 0)
        rest = path + 13;
    else if (strncmp(path, "/v1/jobs/", 9) == 0) {
        rest = path + 9;
        jobs = true;
    } else if (strncmp(path, "/v1/vectors/", 12) == 0) {
        rest = path + 12;
        vectors = true;
    } else
        return ROUTE_UNKNOWN;
    const char *slash = strchr(rest, '/');
    size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
    if (n == 0)
        return ROUTE_UNKNOWN;
    route_id route;
    if (!slash)
        route = jobs ? ROUTE_JOB : vectors ? ROUTE_VECTOR : ROUTE_MATRIX;
    else if (jobs || vectors)
        return ROUTE_UNKNOWN;
    else if (strcmp(slash, "/spmv") == 0)
        route = ROUTE_SPMV;
    else if (strcmp(slash, "/bench") == 0)
        route = ROUTE_BENCH;
    else if (strcmp(slash, "/spmspm") == 0)
        route = ROUTE_SPMSPM;
    else if (strcmp(slash, "/tune") == 0)
        route = ROUTE_TUNE;
    else if (strcmp(slash, "/solve") == 0)
        route = ROUTE_SOLVE;
    else if (strcmp(slash, "/spy.png") == 0)
        route = ROUTE_SPY;
    else
        return ROUTE_UNKNOWN;
    if (!take_id(rest, n, id_out))
        *bad_id = true;
    return route;
}

typedef struct route_methods {
    const char *allow;
    const route_handlers *get, *post, *del, *put;
} route_methods;

static const route_methods *methods_of(route_id route)
{
    static const route_methods table[ROUTE_COUNT] = {
        [ROUTE_HEALTH] = {"GET, HEAD", &api_health_get, NULL, NULL},
        [ROUTE_READY] = {"GET, HEAD", &api_ready_get, NULL, NULL},
        [ROUTE_INFO] = {"GET, HEAD", &api_info_get, NULL, NULL},
        [ROUTE_KERNELS] = {"GET, HEAD", &api_kernels_get, NULL, NULL},
        [ROUTE_MATRICES] = {"GET, HEAD, POST", &api_matrices_get, &api_upload_post, NULL},
        [ROUTE_MATRIX] = {"GET, HEAD, DELETE", &api_matrix_get, NULL, &api_matrix_delete},
        [ROUTE_SPY] = {"GET, HEAD", &api_spy_get, NULL, NULL},
        [ROUTE_SPMV] = {"POST", NULL, &api_spmv_post, NULL},
        [ROUTE_BENCH] = {"POST", NULL, &api_bench_post, NULL},
        [ROUTE_JOB] = {"GET, HEAD, DELETE", &api_job_get, NULL, &api_job_delete},
        [ROUTE_METRICS] = {"GET, HEAD", &api_metrics_get, NULL, NULL},
        [ROUTE_SPMSPM] = {"POST", NULL, &api_spmspm_post, NULL},
        [ROUTE_TUNE] = {"POST", NULL, &api_tune_post, NULL},
        [ROUTE_VECTORS] = {"GET, HEAD, POST", &api_vectors_get, &api_vectors_post, NULL},
        [ROUTE_VECTOR] = {"GET, HEAD, PUT, DELETE", &api_vector_get, NULL, &api_vector_delete, &api_vector_put},
        [ROUTE_OPS] = {"POST", NULL, &api_ops_post, NULL},
        [ROUTE_SOLVE] = {"POST", NULL, &api_solve_post, NULL},
        [ROUTE_SHM] = {"GET, HEAD, POST", &api_shm_list, &api_shm_post, NULL},
        [ROUTE_SHM_REGION] = {"GET, HEAD, DELETE", &api_shm_get, NULL, &api_shm_delete},
    };
    return route < ROUTE_UNKNOWN ? &table[route] : NULL;
}

const route_handlers *api_route_handlers(route_id route, const char *method, const char **allow)
{
    const route_methods *m = methods_of(route);
    *allow = m ? m->allow : "";
    if (!m)
        return NULL;
    if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)
        return m->get;
    if (strcmp(method, "POST") == 0)
        return m->post;
    if (strcmp(method, "DELETE") == 0)
        return m->del;
    if (strcmp(method, "PUT") == 0)
        return m->put;
    return NULL;
}
