/* routes.c — the route table: which path and method go to which handlers.
 *
 * Paths are matched against the shapes of docs/api.md, one table
 * ("/v1/matrices/{id}/spmv" ...). A job's or a vector's {id} must be a
 * UUID in the form the daemon hands out (lower-case, strictly parsed);
 * a matrix's {id} may also be its name, which api/server.c resolves.
 * Unknown paths are 404; a known path with a method it does not take is
 * 405 with Allow. Each method's handlers declare the body they read and
 * the query parameters they take (api.h), so one check refuses the rest.
 */
#include <stdio.h>
#include <string.h>

#include "api/api.h"

const char *const api_route_names[ROUTE_COUNT] = {
    [ROUTE_HEALTH] = "health",     [ROUTE_READY] = "ready",   [ROUTE_INFO] = "info",
    [ROUTE_KERNELS] = "kernels",   [ROUTE_MATRICES] = "matrices", [ROUTE_MATRIX] = "matrix",
    [ROUTE_SPY] = "spy",           [ROUTE_SPMV] = "spmv",     [ROUTE_BENCH] = "bench",
    [ROUTE_JOB] = "job",           [ROUTE_METRICS] = "metrics", [ROUTE_UNKNOWN] = "unknown",
    [ROUTE_SPMSPM] = "spmspm",     [ROUTE_TUNE] = "tune",     [ROUTE_VECTORS] = "vectors",
    [ROUTE_VECTOR] = "vector",     [ROUTE_OPS] = "ops",       [ROUTE_SOLVE] = "solve",
    [ROUTE_SHM] = "shm",           [ROUTE_SHM_REGION] = "shm_region", [ROUTE_JOBS] = "jobs",
    [ROUTE_VALUES] = "values",     [ROUTE_PRECONDS] = "preconditioners", [ROUTE_PRECOND] = "preconditioner",
};

const char *const api_no_query[] = {NULL};

size_t api_query_names(const char *const *list, const char **out, size_t max)
{
    size_t n = 0;
    for (int i = 0; list && list[i]; i++) {
        if (strcmp(list[i], API_QUERY_PARAMS) != 0) {
            if (n < max)
                out[n] = list[i];
            n++;
            continue;
        }
        for (int id = 0; id < SPMV_PARAM_COUNT; id++, n++)
            if (n < max)
                out[n] = spmv_param_get((spmv_param_id)id)->name;
    }
    return n;
}

/* The shapes of docs/api.md; a {..} is one segment, except a region's
 * {name}, which is the rest of the path (its handler checks it: a name
 * with '/' gets a 400 that says so, not a 404). */
static const char *const paths[ROUTE_COUNT] = {
    [ROUTE_HEALTH] = "/v1/health",         [ROUTE_READY] = "/v1/ready",
    [ROUTE_INFO] = "/v1/info",             [ROUTE_KERNELS] = "/v1/kernels",
    [ROUTE_METRICS] = "/metrics",          [ROUTE_MATRICES] = "/v1/matrices",
    [ROUTE_MATRIX] = "/v1/matrices/{id}",  [ROUTE_SPY] = "/v1/matrices/{id}/spy.png",
    [ROUTE_SPMV] = "/v1/matrices/{id}/spmv", [ROUTE_BENCH] = "/v1/matrices/{id}/bench",
    [ROUTE_SPMSPM] = "/v1/matrices/{id}/spmspm", [ROUTE_TUNE] = "/v1/matrices/{id}/tune",
    [ROUTE_SOLVE] = "/v1/matrices/{id}/solve", [ROUTE_VALUES] = "/v1/matrices/{id}/values",
    [ROUTE_JOBS] = "/v1/jobs",             [ROUTE_JOB] = "/v1/jobs/{id}",
    [ROUTE_VECTORS] = "/v1/vectors",       [ROUTE_VECTOR] = "/v1/vectors/{id}",
    [ROUTE_OPS] = "/v1/ops",               [ROUTE_SHM] = "/v1/shm",
    [ROUTE_SHM_REGION] = "/v1/shm/{name}",
    [ROUTE_PRECONDS] = "/v1/matrices/{id}/preconditioners", [ROUTE_PRECOND] = "/v1/preconditioners/{id}",
};

const char *api_route_path(route_id route)
{
    return route < ROUTE_UNKNOWN ? paths[route] : "";
}

/* Whether path has the shape pat; its {..} segment (non-empty) in seg. */
static bool shape_match(const char *pat, const char *path, const char **seg, size_t *seglen)
{
    const char *open = strchr(pat, '{');
    if (!open)
        return strcmp(pat, path) == 0;
    size_t pre = (size_t)(open - pat);
    if (strncmp(pat, path, pre) != 0)
        return false;
    const char *tail = strchr(open, '}') + 1, *s = path + pre;
    const char *slash = strchr(s, '/');
    size_t n = strlen(s);
    if (strncmp(open, "{name}", 6) != 0 && slash)
        n = (size_t)(slash - s);
    if (n == 0 || strcmp(s + n, tail) != 0)
        return false;
    *seg = s;
    *seglen = n;
    return true;
}

route_id api_route_match(const char *path, const char **seg, size_t *seglen)
{
    *seg = NULL;
    *seglen = 0;
    for (int i = 0; i < ROUTE_UNKNOWN; i++)
        if (shape_match(paths[i], path, seg, seglen))
            return (route_id)i;
    *seg = NULL;
    return ROUTE_UNKNOWN;
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
        [ROUTE_JOBS] = {"GET, HEAD", &api_jobs_get, NULL, NULL},
        [ROUTE_VALUES] = {"PUT", NULL, NULL, NULL, &api_values_put},
        [ROUTE_PRECONDS] = {"GET, HEAD, POST", &api_preconds_get, &api_preconds_post, NULL},
        [ROUTE_PRECOND] = {"GET, HEAD, DELETE", &api_precond_get, NULL, &api_precond_delete},
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

static const char *body_name(api_body b)
{
    static const char *const names[] = {[API_BODY_NONE] = "none", [API_BODY_JSON] = "json",
                                        [API_BODY_JSON_OR_BINARY] = "json_or_binary", [API_BODY_BINARY] = "binary",
                                        [API_BODY_OWN] = "own"};
    return names[b];
}

/* One line of JSON for a method of a route: what `spmvd --routes` prints
 * (query null: the handlers declare none, which tests/e2e/params.sh fails). */
static void print_route(FILE *f, route_id route, const char *method, const route_handlers *h)
{
    const char *names[API_QUERY_MAX];
    size_t n = h->query ? api_query_names(h->query, names, API_QUERY_MAX) : 0;
    json_t *q = h->query ? json_array() : json_null();
    for (size_t i = 0; i < n && i < API_QUERY_MAX; i++)
        json_array_append_new(q, json_string(names[i]));
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:b, s:o}", "route", api_route_names[route], "method", method, "path",
                          paths[route], "body", body_name(h->body_kind), "query_with_json", h->query_with_json, "query", q);
    json_dumpf(o, f, JSON_COMPACT);
    fputc('\n', f);
    json_decref(o);
}

int api_routes_print(FILE *f)
{
    static const char *const methods[] = {"GET", "POST", "PUT", "DELETE"};
    for (int route = 0; route < ROUTE_UNKNOWN; route++)
        for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
            const char *allow;
            const route_handlers *h = api_route_handlers((route_id)route, methods[i], &allow);
            if (h)
                print_route(f, (route_id)route, methods[i], h);
        }
    return ferror(f) ? 1 : 0;
}
