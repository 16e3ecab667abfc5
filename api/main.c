/* main.c — spmvd, the program: the daemon with the HTTP server on top.
 *
 * The daemon (daemon/lifecycle.c) boots, opens its state and workers, and
 * serves signals; the server (api/server.c) is started between the open and
 * the store's reload, so /v1/health and /v1/ready answer while matrices
 * load, and on SIGTERM it stops accepting before the workers stop and
 * answers every open request before the program exits. This file is the
 * one place that knows both, so the daemon never includes the API.
 */
#include <stdatomic.h>
#include <string.h>

#include "api/server.h"
#include "daemon/daemon.h"
#include "daemon/log.h"

#define SHUTDOWN_WAIT_MS 30000.0

int main(int argc, char **argv)
{
    static spmvd d; /* the one daemon object, handed to everything by pointer */
    api_server *server = NULL;
    spmv_error err = {0};
    /* the route table, for tests and tools (tests/e2e/params.sh): no daemon */
    if (argc == 2 && strcmp(argv[1], "--routes") == 0)
        return api_routes_print(stdout);
    int status = spmvd_boot(&d, &argc, &argv);
    if (status >= 0)
        return status;
    status = 1;
    size_t nroutes;
    const char *const *routes = api_route_labels(&nroutes);
    if (spmvd_open(&d, routes, nroutes) != 0)
        goto out;
    if (api_server_start(&d, &server, &err) != SPMV_OK) {
        log_error("%s", err.message);
        goto out;
    }
    spmvd_reload(&d);
    spmvd_serve(&d, argc, argv);

    spmvd_drain(&d);
    api_server_quiesce(server);
    spmvd_stop_workers(&d);
    api_server_stop(server, SHUTDOWN_WAIT_MS);
    server = NULL;
    status = 0;
    log_info("stopped");
out:
    if (server) {
        atomic_store(&d.draining, true);
        spmvd_stop_workers(&d);
        api_server_stop(server, 1000.0);
    } else if (status != 0) {
        spmvd_stop_workers(&d);
    }
    spmvd_close(&d);
    return status;
}
