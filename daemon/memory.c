/* memory.c — host memory asked for before a request allocates it
 * (daemon/memory.h).
 *
 * /proc/meminfo is read at every check: it is a few hundred bytes from the
 * kernel, and a check comes before an allocation large enough to matter.
 * The reservations are one atomic counter in the daemon; a check and its
 * reservation are one compare-and-swap, so two requests never both take
 * the last of the room.
 */
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>

#include "daemon/daemon.h"
#include "daemon/memory.h"

static int64_t meminfo(const char *key)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256], fmt[64];
    long long kb = -1;
    snprintf(fmt, sizeof fmt, "%s: %%lld kB", key);
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, fmt, &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb < 0 ? -1 : (int64_t)kb * 1024;
}

int64_t memory_available(void) { return meminfo("MemAvailable"); }

int64_t memory_total(void) { return meminfo("MemTotal"); }

static int64_t room_of(int64_t avail, int64_t reserved)
{
    if (avail < 0)
        return INT64_MAX;
    int64_t room = avail - avail / 10 - reserved;
    return room > 0 ? room : 0;
}

int64_t memory_room(spmvd *d) { return room_of(memory_available(), atomic_load(&d->mem_reserved)); }

int memory_reserve(spmvd *d, int64_t bytes, const char *what, int64_t *held, spmv_error *err)
{
    int64_t avail = memory_available();
    int64_t reserved = atomic_load(&d->mem_reserved);
    do {
        if (bytes > room_of(avail, reserved))
            return spmv_error_set(err, SPMV_ERR_LIMIT, 0, "%s needs %lld bytes; the host has %lld available, 90 %% "
                                  "of which requests may take, and requests in flight hold %lld of that", what,
                                  (long long)bytes, (long long)avail, (long long)reserved);
    } while (!atomic_compare_exchange_weak(&d->mem_reserved, &reserved, reserved + bytes));
    *held += bytes;
    return SPMV_OK;
}

int memory_admit_matrix(spmvd *d, int64_t csr_bytes, int64_t peak, const char *what, int64_t *held,
                        spmv_error *err)
{
    int64_t most = atomic_load(&d->limits.max_matrix_bytes);
    if (csr_bytes > most)
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0, "%s: its CSR would take %lld bytes, over max_matrix_bytes "
                              "(%lld)", what, (long long)csr_bytes, (long long)most);
    return memory_reserve(d, peak, what, held, err);
}

void memory_release(spmvd *d, int64_t *held)
{
    if (*held)
        atomic_fetch_sub(&d->mem_reserved, *held);
    *held = 0;
}

/* Frees since the last trim, summed: many small frees (results of a few
 * megabytes each, dropped one by one) add up to one trim. */
static _Atomic size_t freed_since_trim;

void memory_trim(size_t bytes)
{
    if (bytes == 0 || atomic_fetch_add(&freed_since_trim, bytes) + bytes < MEMORY_TRIM_BYTES)
        return;
    atomic_store(&freed_since_trim, 0);
    malloc_trim(0);
}
