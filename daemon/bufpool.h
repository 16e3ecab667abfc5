/* bufpool.h — reusable host buffers for the binary spmv path.
 *
 * A 16 M-row float64 product moves 128 MB in and 128 MB out. Fresh
 * buffers for each request cost more than the copies themselves: the
 * kernel zeroes every new page on first touch (a quarter of the daemon's
 * time at that size, measured with perf), and on a GPU host a pageable
 * buffer goes to the device through the driver's staging copy. So the
 * request body (x) and the answer (y) of binary products come from this
 * pool: page-locked on a GPU host (one DMA each way), kept after use up
 * to io_buffer_bytes of idle buffers, freed past that.
 *
 * Any thread may get and put; a buffer handed to libmicrohttpd as an
 * answer comes back through bufpool_put when the answer is sent.
 */
#ifndef SPMVD_BUFPOOL_H
#define SPMVD_BUFPOOL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct bufpool bufpool;

typedef struct bufpool_buf {
    void *ptr;
    size_t cap;
    bool pinned;
    bufpool *pool;
    struct bufpool_buf *next;   /* in the idle list */
} bufpool_buf;

/* max_idle: bytes of idle buffers kept (atomic: SIGHUP may change it).
 * pinned: allocate page-locked memory (falls back to malloc if refused). */
bufpool *bufpool_new(const _Atomic int64_t *max_idle, bool pinned);
void bufpool_free(bufpool *p);
/* A buffer of at least n bytes (the smallest idle one that fits, else a
 * new one), or NULL when memory is short. */
bufpool_buf *bufpool_get(bufpool *p, size_t n);
/* Back to the pool (or freed past max_idle); NULL is a no-op. */
void bufpool_put(bufpool_buf *b);
/* Idle bytes held, and buffers ever allocated (for /v1/info). */
void bufpool_stats(bufpool *p, size_t *idle_bytes, size_t *allocated);

#endif
