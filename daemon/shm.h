/* shm.h — shared-memory regions: x and y without the HTTP body.
 *
 * A client on the same host creates a POSIX shared-memory object, writes x
 * into it and registers a window of it (POST /v1/shm). The daemon maps the
 * window once and, on a GPU host, pins it for DMA (cudaHostRegister), so a
 * GPU product copies x from the client's pages straight to the device and
 * y straight back: no socket, no body buffer, no staging copy.
 *
 * The object belongs to the client, who may shrink or unlink it at any
 * time. A CPU store or load to a page past a shrunk object's end is a
 * SIGBUS, so the daemon never touches a region's pages with the CPU: a
 * host product reads x with pread(2) and writes y with pwrite(2) on the
 * object's descriptor (a short read is an error, never a signal), and a
 * GPU product reads and writes the pinned pages by DMA only (pinned pages
 * stay in memory whatever happens to the file). Each use checks the object
 * before and after (fstat: size, link count) and answers 410 when it was
 * shrunk or unlinked.
 *
 * Regions are reference counted like resident vectors: the registry holds
 * one reference, each task using the region another, so an unregister
 * while a product runs unlists the region at once and unpins and unmaps it
 * when the product is done.
 *
 * A CUDA region (the second kind) is another process's device memory on
 * one of the daemon's GPUs, opened from its cudaIpcMemHandle, as Triton's
 * CUDA shared-memory extension takes it: x and y then stay on the device
 * and a product on that GPU reads and writes them in place. Device memory
 * cannot shrink under us; the client must unregister before it frees it.
 *
 * daemon/shm.c implements the registry, api/shm.c the /v1/shm routes;
 * api/spmv.c and api/vectors.c take operands in regions, which their
 * task bodies (daemon/products.c, daemon/vector_tasks.c) stage on the
 * worker with shm_operand_stage_pooled and shm_operand_unstage.
 */
#ifndef SPMVD_SHM_H
#define SPMVD_SHM_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/bufpool.h"

#define SHM_NAME_MAX 200

/* Outcomes, each with its HTTP status in api/shm.c (api_shm_error). */
typedef enum shm_status {
    SHM_OK = 0,
    SHM_DISABLED,     /* 403 shm_disabled: allow_shm is off */
    SHM_BAD_NAME,     /* 400 invalid_request: '/', "..", other characters */
    SHM_INVALID,      /* 400 invalid_request: size, offset, alignment */
    SHM_RANGE,        /* 400 out_of_range: past the object or the region */
    SHM_NOT_FOUND,    /* 404 shm_not_found: no object, or no region */
    SHM_FORBIDDEN,    /* 403 shm_forbidden: the object's mode refuses us */
    SHM_EXISTS,       /* 409 shm_exists: the name is registered */
    SHM_GONE,         /* 410 shm_gone: shrunk or unlinked since registration */
    SHM_LIMIT,        /* 507 shm_limit: max_shm_regions */
    SHM_IO,           /* 500 io_error: mmap, pread, pwrite failed */
    SHM_NOMEM,        /* 500 out_of_memory: no staging buffer for a worker */
} shm_status;

typedef struct shm_region {
    char name[SHM_NAME_MAX + 1];
    int fd;                        /* the object, read-write */
    void *map;                     /* the mapping, from offset rounded down to a page */
    size_t map_len;
    char *base;                    /* the region's first byte inside map */
    int64_t offset, size;          /* the window of the object */
    bool pinned;                   /* registered with CUDA for DMA */
    int device;                    /* a CUDA region's GPU; -1: a POSIX region */
    void *dptr;                    /* a CUDA region: the opened allocation's base */
    long long created_wall;
    _Atomic long long uses;
    _Atomic int refs;
    bool listed;                   /* under the registry lock */
    struct shm_registry *reg;
    struct shm_region *next;
} shm_region;

/* An operand: `bytes` from `offset` of a region, bounds checked. */
typedef struct shm_operand {
    shm_region *reg;               /* referenced; NULL: not in a region */
    int64_t offset;
    size_t bytes;
} shm_operand;

typedef struct shm_registry shm_registry;

/* Pins for DMA: 0 or -1 (the caller falls back to pread/pwrite). NULL
 * hooks: never pinned (a host without a GPU). */
typedef struct shm_pin_hooks {
    int (*pin)(void *p, size_t n, char *why, size_t whylen);
    void (*unpin)(void *p);
    /* CUDA IPC (NULL: no GPU): 0 with the base and size of the allocation,
     * or -1 with why. */
    int (*ipc_open)(int device, const void *handle, void **dptr, size_t *bytes, char *why, size_t whylen);
    void (*ipc_close)(int device, void *dptr);
} shm_pin_hooks;

shm_registry *shm_registry_new(const shm_pin_hooks *hooks);
/* Unpins and unmaps every listed region (tasks are done by then). */
void shm_registry_free(shm_registry *s);
/* Unlists every region (allow_shm turned off by SIGHUP); returns how many. */
size_t shm_clear(shm_registry *s);

/* Whether `name` may name an object; SHM_BAD_NAME with the reason. */
shm_status shm_name_check(const char *name, char *msg, size_t msglen);
/* Opens, checks (mode, size), maps and pins the window and lists it:
 * SHM_OK with *out referenced, or a status with msg saying what and where. */
shm_status shm_register(shm_registry *s, const char *name, int64_t offset, int64_t size, int64_t max_regions,
                        shm_region **out, char *msg, size_t msglen);
/* The same for a CUDA region: the 64-byte cudaIpcMemHandle of memory on
 * GPU `device`, the window [offset, offset + size) of its allocation. */
shm_status shm_register_cuda(shm_registry *s, const char *name, const void *handle, int device, int64_t offset,
                             int64_t size, int64_t max_regions, shm_region **out, char *msg, size_t msglen);
/* Unlists: SHM_NOT_FOUND if absent. */
shm_status shm_unregister(shm_registry *s, const char *name);
/* A referenced region, or NULL. */
shm_region *shm_get(shm_registry *s, const char *name);
shm_region *shm_ref(shm_region *r);
void shm_unref(shm_region *r);
/* Referenced snapshot, oldest first. */
int shm_list(shm_registry *s, shm_region ***out, size_t *n);
void shm_list_free(shm_region **list, size_t n);
size_t shm_count(shm_registry *s);

/* The operand `what` (x, y, values) of `bytes` at `offset` in region
 * `name`: found, in bounds, aligned to `align`. SHM_OK with o->reg
 * referenced. */
shm_status shm_operand_open(shm_registry *s, const char *name, int64_t offset, size_t bytes, size_t align,
                            const char *what, shm_operand *o, char *msg, size_t msglen);
void shm_operand_close(shm_operand *o);
/* The object still holds the region: SHM_GONE when shrunk or unlinked. */
shm_status shm_check_live(const shm_region *r, char *msg, size_t msglen);
/* Copies through the descriptor (pread/pwrite): never a SIGBUS. */
shm_status shm_operand_read(const shm_operand *o, void *dst, char *msg, size_t msglen);
shm_status shm_operand_write(const shm_operand *o, const void *src, char *msg, size_t msglen);
/* The operand's pages for DMA (pinned regions only), else NULL. Never
 * read or write them with the CPU. */
void *shm_operand_dma(const shm_operand *o);
/* Where a worker reads an operand (in: x, vector values) or writes one
 * (out: y, a vector read into the region): on a GPU worker with a pinned
 * region the pages themselves (DMA, no copy; *buf stays NULL), else a
 * buffer of o->bytes from `pool` (*buf, the caller puts it back), filled
 * with pread when `in`. The region is checked first. SHM_OK with *where,
 * SHM_NOMEM when the pool has no buffer, another status with msg. */
shm_status shm_operand_stage_pooled(const shm_operand *o, bool gpu, bool in, bufpool *pool, bufpool_buf **buf,
                                    void **where, char *msg, size_t msglen);
/* After the worker: an `out` operand staged in a buffer goes to the region
 * with pwrite; one moved by DMA is checked again (pinned pages outlive a
 * shrink, but what went through them is no longer the client's). */
shm_status shm_operand_unstage(const shm_operand *o, const void *where, bool out, char *msg, size_t msglen);
/* A CUDA region's operand: its device pointer (on reg->device), else NULL. */
void *shm_operand_device(const shm_operand *o);

/* {"name","offset","size","object_bytes","pinned","state","uses","created"} */
json_t *shm_region_json(const shm_region *r);

#endif
