/* batch.h — dynamic batching of products (daemon/batch.c).
 *
 * product_run calls product_batch first: with `batch_window_us` on and a
 * batchable product, it gathers the products that may join it from the
 * worker's queue and runs them all as one SpMM.
 */
#ifndef SPMVD_BATCH_H
#define SPMVD_BATCH_H

#include <stdbool.h>

#include "daemon/products.h"

/* On worker w's thread, as product t starts: true when t ran in a batch
 * with others (t and they are answered; the others already finished),
 * false when t runs alone (t->batched says 1 when the window was open). */
bool product_batch(product *t, worker *w);

#endif
