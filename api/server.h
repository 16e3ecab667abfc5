/* server.h — the HTTP server: libmicrohttpd set up from the configuration.
 *
 * api_server_start binds (or takes the socket-activation fd), loads TLS
 * material if configured, and starts MHD's internal thread pool on epoll.
 * api_server_quiesce stops accepting; api_server_stop waits for every
 * open request to be answered (bounded) and stops MHD.
 */
#ifndef SPMVD_SERVER_H
#define SPMVD_SERVER_H

#include <stdio.h>

#include "daemon/daemon.h"

typedef struct api_server api_server;

/* The route labels metrics count requests under. */
const char *const *api_route_labels(size_t *count);

/* Every route and method, its body and query parameters, one JSON line
 * each (`spmvd --routes`); 0, or 1 when the output failed. */
int api_routes_print(FILE *f);

int api_server_start(spmvd *d, api_server **out, spmv_error *err);
void api_server_quiesce(api_server *s);
void api_server_stop(api_server *s, double wait_ms);

#endif
