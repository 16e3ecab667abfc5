/* metrics.h — counters for GET /metrics (Prometheus text format).
 *
 * Counters are plain atomics updated on hot paths (one increment per
 * request or kernel run); everything that is a state rather than an event
 * (queue depth, matrices resident, device memory) is read from its owner at
 * scrape time instead of being mirrored here.
 */
#ifndef SPMVD_METRICS_H
#define SPMVD_METRICS_H

#include <stddef.h>

#include "spmv.h"

struct spmvd;
typedef struct metrics metrics;

#define METRICS_MAX_ROUTES 32

/* `routes` names the route indexes requests are counted under. */
metrics *metrics_new(const char *const *routes, size_t nroutes);
void metrics_free(metrics *m);

void metrics_request(metrics *m, size_t route, int status, double ms);
void metrics_kernel(metrics *m, const char *kernel, double ms_per_run, int runs);
void metrics_upload(metrics *m, size_t bytes);
void metrics_host_eviction(metrics *m);
/* One SpMM of `products` batched products (daemon/batch.c) and the parts
 * of its time (spmvd_batch_part_seconds_total). */
void metrics_batch(metrics *m, int products, const spmv_batch_times *bt);

/* The exposition text (caller frees). */
char *metrics_render(metrics *m, struct spmvd *d);

#endif
