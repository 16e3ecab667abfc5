/* conns.h — deadlines for slow clients (api/conns.c).
 *
 * The watcher follows every connection through its phases (headers, body,
 * answer) and closes one that takes longer than header_timeout_s for its
 * headers or whose body falls under body_min_rate after body_timeout_s.
 * conn_watcher_notify is MHD's MHD_OPTION_NOTIFY_CONNECTION callback; the
 * access handler reports the phases with the conn_watch_* calls (a NULL
 * watch is ignored).
 */
#ifndef SPMVD_CONNS_H
#define SPMVD_CONNS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <microhttpd.h>

#include "daemon/config.h"

typedef struct conn_watch conn_watch;
typedef struct conn_watcher conn_watcher;

/* Starts the watcher's thread; NULL when out of memory. */
conn_watcher *conn_watcher_new(const spmvd_config *c);
/* Stops the thread (before MHD stops: nothing is shut down after). */
void conn_watcher_halt(conn_watcher *cw);
/* After MHD stopped. */
void conn_watcher_free(conn_watcher *cw);
void conn_watcher_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                         enum MHD_ConnectionNotificationCode code);

conn_watch *conn_watch_of(struct MHD_Connection *conn);
/* The request's headers are in; a body follows or not. */
void conn_watch_headers_in(conn_watch *w, bool body);
void conn_watch_bytes(conn_watch *w, size_t n);
/* The body is complete: the request is being answered. */
void conn_watch_body_in(conn_watch *w);
/* The answer went out: the next request's headers are awaited. */
void conn_watch_answered(conn_watch *w);

#endif
