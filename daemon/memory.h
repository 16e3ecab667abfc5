/* memory.h — host memory asked for before a request allocates it.
 *
 * A request that is about to allocate in proportion to what it declares
 * (an upload's reading, a generated build, a stored matrix at reload, an
 * SpMSpM's C) reserves its estimate first. It is admitted when the
 * estimate fits what the host can still give (MemAvailable in
 * /proc/meminfo, a tenth kept for everything else) less what other
 * requests have reserved and not yet released: concurrent requests each
 * see the others' reservations, not only what they have touched so far.
 * A refusal is SPMV_ERR_LIMIT with the numbers (422 or 507 by the route).
 *
 * The reservation is released once the request's memory is either freed
 * or held (a stored matrix's memory is then MemAvailable's business).
 * memory_trim gives freed heap back to the system after large frees, so
 * RSS falls again once a big request or result is gone.
 */
#ifndef SPMVD_MEMORY_H
#define SPMVD_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "spmv.h"

struct spmvd;

/* Bytes the host can still give (MemAvailable), or -1 when unknown. */
int64_t memory_available(void);
/* The host's memory (MemTotal), or -1 when unknown. */
int64_t memory_total(void);
/* What memory_reserve would admit now: 90 % of MemAvailable less the
 * reservations held; INT64_MAX when MemAvailable is unknown. */
int64_t memory_room(struct spmvd *d);
/* Reserves `bytes` for `what` (a phrase: "reading the upload") into *held
 * when they fit memory_room; else SPMV_ERR_LIMIT saying what needed how
 * much and what the host has. */
int memory_reserve(struct spmvd *d, int64_t bytes, const char *what, int64_t *held, spmv_error *err);
/* A matrix whose CSR takes `csr_bytes` and whose making takes `peak`
 * bytes at most: the CSR within max_matrix_bytes, then the peak reserved.
 * SPMV_ERR_LIMIT names the bound and the numbers. */
int memory_admit_matrix(struct spmvd *d, int64_t csr_bytes, int64_t peak, const char *what, int64_t *held,
                        spmv_error *err);
/* Gives back *held (and zeroes it). */
void memory_release(struct spmvd *d, int64_t *held);
/* After `bytes` were freed: once MEMORY_TRIM_BYTES or more were freed
 * since the last trim, the heap's free pages go back to the system
 * (malloc_trim). */
void memory_trim(size_t bytes);
#define MEMORY_TRIM_BYTES ((size_t)64 << 20)

#endif
