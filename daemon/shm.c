/* shm.c — the registry of shared-memory regions (daemon/shm.h).
 *
 * A list under one mutex, like the vector registry: at most
 * max_shm_regions entries, each lookup dwarfed by the product that made
 * it. Registration does everything that can fail before the region is
 * listed (open, mode, size, map, pin), so a refused registration leaves
 * nothing open or mapped. The last reference unpins, unmaps and closes.
 *
 * Why not plain loads and stores on the mapping for host copies: the
 * client owns the object and may ftruncate it under us; a load from a
 * mapped page past the new end raises SIGBUS in whichever thread touches
 * it (an OpenMP worker inside a kernel, say), which no handler can unwind
 * safely. Reads go through the descriptor (pread returns short instead);
 * writes go to the mapping through process_vm_writev on ourselves, which
 * returns EFAULT there instead, and which, unlike pwrite, cannot grow a
 * shrunk object back. Pinned pages are held by the driver and stay valid
 * for DMA whatever happens to the file.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "daemon/shm.h"

struct shm_registry {
    pthread_mutex_t lock;
    shm_region *head;            /* newest first */
    shm_pin_hooks hooks;
};

static shm_status fail(char *msg, size_t len, shm_status st, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static shm_status fail(char *msg, size_t len, shm_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, len, fmt, ap);
    va_end(ap);
    return st;
}

shm_registry *shm_registry_new(const shm_pin_hooks *hooks)
{
    shm_registry *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    pthread_mutex_init(&s->lock, NULL);
    if (hooks)
        s->hooks = *hooks;
    return s;
}

static void region_destroy(shm_region *r)
{
    if (r->dptr && r->reg->hooks.ipc_close)
        r->reg->hooks.ipc_close(r->device, r->dptr);
    if (r->pinned && r->reg->hooks.unpin)
        r->reg->hooks.unpin(r->map);
    if (r->map)
        munmap(r->map, r->map_len);
    if (r->fd >= 0)
        close(r->fd);
    free(r);
}

size_t shm_clear(shm_registry *s)
{
    size_t n = 0;
    pthread_mutex_lock(&s->lock);
    shm_region *r = s->head;
    s->head = NULL;
    pthread_mutex_unlock(&s->lock);
    while (r) {
        shm_region *next = r->next;
        r->listed = false;
        shm_unref(r);
        r = next;
        n++;
    }
    return n;
}

void shm_registry_free(shm_registry *s)
{
    if (!s)
        return;
    shm_clear(s);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

shm_status shm_name_check(const char *name, char *msg, size_t msglen)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > SHM_NAME_MAX)
        return fail(msg, msglen, SHM_BAD_NAME, "a region name has 1 to %d characters, not %zu", SHM_NAME_MAX, n);
    if (strchr(name, '/'))
        return fail(msg, msglen, SHM_BAD_NAME,
                    "region name \"%.64s\" holds '/': give the object's name without the slash shm_open takes", name);
    if (strstr(name, ".."))
        return fail(msg, msglen, SHM_BAD_NAME, "region name \"%.64s\" holds \"..\"", name);
    if (name[0] == '.')
        return fail(msg, msglen, SHM_BAD_NAME, "region name \"%.64s\" starts with a dot", name);
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '-'))
            return fail(msg, msglen, SHM_BAD_NAME,
                        "region name \"%.64s\": character %zu (0x%02x) is not one of A-Z a-z 0-9 _ . -", name, i + 1,
                        (unsigned char)c);
    }
    return SHM_OK;
}

/* The object's mode, applied as the kernel would to a daemon that is not
 * root: a daemon run as root must not open another user's private object
 * just because it can. */
static bool mode_allows(const struct stat *st)
{
    if (st->st_uid == geteuid())
        return (st->st_mode & 0600) == 0600;
    gid_t groups[256];
    int n = getgroups(256, groups);
    bool in_group = st->st_gid == getegid();
    for (int i = 0; !in_group && i < n; i++)
        in_group = groups[i] == st->st_gid;
    if (in_group)
        return (st->st_mode & 0060) == 0060;
    return (st->st_mode & 0006) == 0006;
}

shm_status shm_check_live(const shm_region *r, char *msg, size_t msglen)
{
    struct stat st;
    if (r->device >= 0)
        return SHM_OK; /* device memory does not shrink; its owner unregisters before it frees */
    if (fstat(r->fd, &st) != 0)
        return fail(msg, msglen, SHM_IO, "region %s: fstat: %s", r->name, strerror(errno));
    if (st.st_nlink == 0)
        return fail(msg, msglen, SHM_GONE,
                    "region %s: the object /dev/shm/%s was unlinked after registration (unregister it and register "
                    "the new one)", r->name, r->name);
    if ((int64_t)st.st_size < r->offset + r->size)
        return fail(msg, msglen, SHM_GONE,
                    "region %s: the object shrank to %lld bytes after registration; the region needs %lld (offset "
                    "%lld + size %lld)", r->name, (long long)st.st_size, (long long)(r->offset + r->size),
                    (long long)r->offset, (long long)r->size);
    return SHM_OK;
}

static shm_region *find_locked(shm_registry *s, const char *name)
{
    for (shm_region *r = s->head; r; r = r->next)
        if (strcmp(r->name, name) == 0)
            return r;
    return NULL;
}

/* Opens and maps the window; nothing is left open on failure. */
static shm_status open_window(shm_region *r, char *msg, size_t msglen)
{
    char path[SHM_NAME_MAX + 2];
    snprintf(path, sizeof path, "/%s", r->name);
    r->fd = shm_open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
    if (r->fd < 0) {
        int e = errno;
        if (e == ENOENT)
            return fail(msg, msglen, SHM_NOT_FOUND, "no shared-memory object /dev/shm/%s (create it first)", r->name);
        if (e == EACCES || e == EPERM)
            return fail(msg, msglen, SHM_FORBIDDEN,
                        "/dev/shm/%s: permission denied: the object's mode must let the daemon's user or group read "
                        "and write it", r->name);
        return fail(msg, msglen, e == ELOOP ? SHM_FORBIDDEN : SHM_IO, "/dev/shm/%s: %s", r->name, strerror(e));
    }
    struct stat st;
    if (fstat(r->fd, &st) != 0)
        return fail(msg, msglen, SHM_IO, "/dev/shm/%s: fstat: %s", r->name, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return fail(msg, msglen, SHM_FORBIDDEN, "/dev/shm/%s is not a shared-memory object", r->name);
    if (!mode_allows(&st))
        return fail(msg, msglen, SHM_FORBIDDEN,
                    "/dev/shm/%s has mode %04o and owner %u:%u: it must grant read and write to the daemon (uid %u), "
                    "its group, or others (docs/security.md)", r->name, (unsigned)(st.st_mode & 07777),
                    (unsigned)st.st_uid, (unsigned)st.st_gid, (unsigned)geteuid());
    if (r->offset > (int64_t)st.st_size || r->size > (int64_t)st.st_size - r->offset)
        return fail(msg, msglen, SHM_RANGE,
                    "region %s: offset %lld + size %lld is past the end of the object (%lld bytes)", r->name,
                    (long long)r->offset, (long long)r->size, (long long)st.st_size);
    long page = sysconf(_SC_PAGESIZE);
    int64_t start = r->offset / page * page;
    r->map_len = (size_t)(r->offset - start + r->size);
    void *m = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, (off_t)start);
    if (m == MAP_FAILED)
        return fail(msg, msglen, SHM_IO, "region %s: mmap of %zu bytes: %s", r->name, r->map_len, strerror(errno));
    r->map = m;
    r->base = (char *)m + (r->offset - start);
    return SHM_OK;
}

/* A record for `name`, checked and not yet registered, or NULL with the
 * status in *st. */
static shm_region *region_new(shm_registry *s, const char *name, int64_t offset, int64_t size, shm_status *st,
                              char *msg, size_t msglen)
{
    if ((*st = shm_name_check(name, msg, msglen)))
        return NULL;
    if (offset < 0 || size <= 0) {
        *st = fail(msg, msglen, SHM_INVALID, "a region needs offset >= 0 and size > 0 (bytes), not %lld and %lld",
                   (long long)offset, (long long)size);
        return NULL;
    }
    pthread_mutex_lock(&s->lock); /* a cheap early answer; checked again when listing */
    bool exists = find_locked(s, name) != NULL;
    pthread_mutex_unlock(&s->lock);
    if (exists) {
        *st = fail(msg, msglen, SHM_EXISTS, "region %s is registered already (DELETE /v1/shm/%s first)", name, name);
        return NULL;
    }
    shm_region *r = calloc(1, sizeof *r);
    if (!r) {
        *st = fail(msg, msglen, SHM_IO, "out of memory");
        return NULL;
    }
    snprintf(r->name, sizeof r->name, "%s", name);
    r->fd = -1;
    r->device = -1;
    r->offset = offset;
    r->size = size;
    r->reg = s;
    atomic_init(&r->refs, 1);
    atomic_init(&r->uses, 0);
    r->created_wall = (long long)time(NULL);
    return r;
}

/* Lists r unless the name was taken meanwhile or the limit is reached;
 * destroys it otherwise. */
static shm_status region_list(shm_registry *s, shm_region *r, int64_t max_regions, shm_region **out, char *msg,
                              size_t msglen);

shm_status shm_register(shm_registry *s, const char *name, int64_t offset, int64_t size, int64_t max_regions,
                        shm_region **out, char *msg, size_t msglen)
{
    *out = NULL;
    shm_status st;
    shm_region *r = region_new(s, name, offset, size, &st, msg, msglen);
    if (!r)
        return st;
    if ((st = open_window(r, msg, msglen))) {
        region_destroy(r);
        return st;
    }
    if (s->hooks.pin) {
        char why[256] = "";
        r->pinned = s->hooks.pin(r->map, r->map_len, why, sizeof why) == 0;
    }
    return region_list(s, r, max_regions, out, msg, msglen);
}

shm_status shm_register_cuda(shm_registry *s, const char *name, const void *handle, int device, int64_t offset,
                             int64_t size, int64_t max_regions, shm_region **out, char *msg, size_t msglen)
{
    *out = NULL;
    shm_status st;
    if (!s->hooks.ipc_open)
        return fail(msg, msglen, SHM_INVALID, "CUDA regions need a GPU, and this daemon has none");
    shm_region *r = region_new(s, name, offset, size, &st, msg, msglen);
    if (!r)
        return st;
    size_t bytes = 0;
    char why[512] = "";
    if (s->hooks.ipc_open(device, handle, &r->dptr, &bytes, why, sizeof why) != 0) {
        region_destroy(r);
        return fail(msg, msglen, SHM_INVALID, "region %s: %s", name, why);
    }
    r->device = device;
    if (offset > (int64_t)bytes || size > (int64_t)bytes - offset) {
        region_destroy(r);
        return fail(msg, msglen, SHM_RANGE, "region %s: offset %lld + size %lld is past the end of the allocation "
                    "(%zu bytes)", name, (long long)offset, (long long)size, bytes);
    }
    r->base = (char *)r->dptr + offset;
    r->map_len = bytes; /* the allocation's size, shown as object_bytes */
    return region_list(s, r, max_regions, out, msg, msglen);
}

static shm_status region_list(shm_registry *s, shm_region *r, int64_t max_regions, shm_region **out, char *msg,
                              size_t msglen)
{
    const char *name = r->name;
    shm_status st = SHM_OK;
    pthread_mutex_lock(&s->lock);
    size_t n = 0;
    for (shm_region *p = s->head; p; p = p->next)
        n++;
    if (find_locked(s, name))
        st = fail(msg, msglen, SHM_EXISTS, "region %s is registered already (DELETE /v1/shm/%s first)", name, name);
    else if ((int64_t)n >= max_regions)
        st = fail(msg, msglen, SHM_LIMIT, "%zu regions are registered: max_shm_regions is %lld", n,
                  (long long)max_regions);
    else {
        r->listed = true;
        r->next = s->head;
        s->head = r;
        atomic_fetch_add(&r->refs, 1); /* the registry's */
    }
    pthread_mutex_unlock(&s->lock);
    if (st) {
        region_destroy(r);
        return st;
    }
    *out = r;
    return SHM_OK;
}

shm_status shm_unregister(shm_registry *s, const char *name)
{
    pthread_mutex_lock(&s->lock);
    shm_region **pp = &s->head, *r = NULL;
    for (; *pp; pp = &(*pp)->next)
        if (strcmp((*pp)->name, name) == 0) {
            r = *pp;
            *pp = r->next;
            r->listed = false;
            break;
        }
    pthread_mutex_unlock(&s->lock);
    if (!r)
        return SHM_NOT_FOUND;
    shm_unref(r);
    return SHM_OK;
}

shm_region *shm_get(shm_registry *s, const char *name)
{
    pthread_mutex_lock(&s->lock);
    shm_region *r = find_locked(s, name);
    if (r)
        atomic_fetch_add(&r->refs, 1);
    pthread_mutex_unlock(&s->lock);
    return r;
}

shm_region *shm_ref(shm_region *r)
{
    if (r)
        atomic_fetch_add(&r->refs, 1);
    return r;
}

void shm_unref(shm_region *r)
{
    if (r && atomic_fetch_sub(&r->refs, 1) == 1)
        region_destroy(r);
}

size_t shm_count(shm_registry *s)
{
    size_t n = 0;
    pthread_mutex_lock(&s->lock);
    for (shm_region *r = s->head; r; r = r->next)
        n++;
    pthread_mutex_unlock(&s->lock);
    return n;
}

int shm_list(shm_registry *s, shm_region ***out, size_t *n)
{
    pthread_mutex_lock(&s->lock);
    size_t count = 0;
    for (shm_region *r = s->head; r; r = r->next)
        count++;
    shm_region **list = calloc(count ? count : 1, sizeof *list);
    if (!list) {
        pthread_mutex_unlock(&s->lock);
        return -1;
    }
    size_t i = count;
    for (shm_region *r = s->head; r; r = r->next) { /* newest first: fill from the end */
        atomic_fetch_add(&r->refs, 1);
        list[--i] = r;
    }
    pthread_mutex_unlock(&s->lock);
    *out = list;
    *n = count;
    return 0;
}

void shm_list_free(shm_region **list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        shm_unref(list[i]);
    free(list);
}

shm_status shm_operand_open(shm_registry *s, const char *name, int64_t offset, size_t bytes, size_t align,
                            const char *what, shm_operand *o, char *msg, size_t msglen)
{
    memset(o, 0, sizeof *o);
    shm_status st = shm_name_check(name, msg, msglen);
    if (st)
        return st;
    shm_region *r = shm_get(s, name);
    if (!r)
        return fail(msg, msglen, SHM_NOT_FOUND, "%s: no region %s (POST /v1/shm registers one)", what, name);
    if (offset < 0 || (align && offset % (int64_t)align))
        st = fail(msg, msglen, SHM_INVALID, "%s: offset %lld in region %s must be a multiple of %zu (the value size)",
                  what, (long long)offset, name, align);
    else if (offset > r->size || (int64_t)bytes > r->size - offset)
        st = fail(msg, msglen, SHM_RANGE,
                  "%s: %zu bytes from offset %lld run past the end of region %s (%lld bytes)", what, bytes,
                  (long long)offset, name, (long long)r->size);
    if (st) {
        shm_unref(r);
        return st;
    }
    atomic_fetch_add(&r->uses, 1);
    o->reg = r;
    o->offset = offset;
    o->bytes = bytes;
    return SHM_OK;
}

void shm_operand_close(shm_operand *o)
{
    shm_unref(o->reg);
    o->reg = NULL;
}

/* Writes [done, to) of buf into the region's mapping with
 * process_vm_writev on this process: a page past the object's end (a
 * client's ftruncate at any moment, even mid-copy) fails the call with
 * EFAULT where a store would raise SIGBUS, and, unlike pwrite, nothing
 * written can grow the object back. -1 with errno ENOSYS or EPERM when a
 * filter denies the call (the caller falls back to pwrite). */
static ssize_t write_mapped(const shm_operand *o, const char *buf, size_t done, size_t to)
{
    struct iovec local = {(void *)(uintptr_t)(buf + done), to - done};
    struct iovec remote = {o->reg->base + o->offset + (int64_t)done, to - done};
    ssize_t n = process_vm_writev(getpid(), &local, 1, &remote, 1, 0);
    if (n < 0 && errno == EFAULT)
        return 0; /* the object ended first */
    return n;
}

/* Copies one piece [from, to) of the operand: reads through the
 * descriptor (pread returns short past the end), writes through the
 * mapping (write_mapped) or, where that is denied, the descriptor: 0, or
 * errno (ENODATA: the object ended first). */
static int copy_piece(const shm_operand *o, char *buf, size_t from, size_t to, bool write)
{
    size_t done = from;
    bool mapped = write && o->reg->base;
    while (done < to) {
        off_t at = (off_t)(o->reg->offset + o->offset + (int64_t)done);
        ssize_t n = mapped ? write_mapped(o, buf, done, to) : write ? pwrite(o->reg->fd, buf + done, to - done, at)
                                                                    : pread(o->reg->fd, buf + done, to - done, at);
        if (n < 0 && mapped && (errno == ENOSYS || errno == EPERM)) {
            mapped = false;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno;
        if (n == 0)
            return write ? EIO : ENODATA;
        done += (size_t)n;
    }
    return 0;
}

/* The operand to or from buf in 16 MiB pieces, over the OpenMP threads when
 * it is large: one core copies a 128 MB vector at a few GB/s, a socket's
 * worth of cores at the memory's speed. Checked before and after; a
 * shrink in between stops the writes at the new end rather than growing
 * the object back (write_mapped; a pwrite past the end would regrow it,
 * which the client did not ask for). */
#define PIECE ((size_t)16 << 20)

static shm_status copy_operand(const shm_operand *o, char *buf, bool write, char *msg, size_t msglen)
{
    shm_status st = shm_check_live(o->reg, msg, msglen);
    if (st)
        return st;
    int64_t pieces = (int64_t)((o->bytes + PIECE - 1) / PIECE);
    int first_err = 0;
#pragma omp parallel for schedule(static) if (pieces > 1)
    for (int64_t p = 0; p < pieces; p++) {
        size_t from = (size_t)p * PIECE, to = from + PIECE < o->bytes ? from + PIECE : o->bytes;
        int e = copy_piece(o, buf, from, to, write);
        if (e) {
#pragma omp critical(shm_copy_err)
            if (!first_err)
                first_err = e;
        }
    }
    if ((st = shm_check_live(o->reg, msg, msglen)))
        return st;
    if (first_err == ENODATA)
        return fail(msg, msglen, SHM_GONE, "region %s: the object ended inside the operand", o->reg->name);
    if (first_err)
        return fail(msg, msglen, SHM_IO, "region %s: %s: %s", o->reg->name, write ? "write" : "read",
                    strerror(first_err));
    return SHM_OK;
}

shm_status shm_operand_read(const shm_operand *o, void *dst, char *msg, size_t msglen)
{
    return copy_operand(o, dst, false, msg, msglen);
}

shm_status shm_operand_write(const shm_operand *o, const void *src, char *msg, size_t msglen)
{
    return copy_operand(o, (char *)(uintptr_t)src, true, msg, msglen);
}

shm_status shm_operand_stage_pooled(const shm_operand *o, bool gpu, bool in, bufpool *pool, bufpool_buf **buf,
                                    void **where, char *msg, size_t msglen)
{
    *where = NULL;
    shm_status st = shm_check_live(o->reg, msg, msglen);
    if (st)
        return st;
    if (gpu && (*where = shm_operand_dma(o)))
        return SHM_OK;
    if (!(*buf = bufpool_get(pool, o->bytes)))
        return fail(msg, msglen, SHM_NOMEM, "out of memory for %zu bytes", o->bytes);
    *where = (*buf)->ptr;
    return in ? shm_operand_read(o, *where, msg, msglen) : SHM_OK;
}

shm_status shm_operand_unstage(const shm_operand *o, const void *where, bool out, char *msg, size_t msglen)
{
    if (where == shm_operand_dma(o))
        return shm_check_live(o->reg, msg, msglen);
    return out ? shm_operand_write(o, where, msg, msglen) : SHM_OK;
}

void *shm_operand_dma(const shm_operand *o)
{
    return o->reg && o->reg->pinned && o->reg->device < 0 ? o->reg->base + o->offset : NULL;
}

void *shm_operand_device(const shm_operand *o)
{
    return o->reg && o->reg->device >= 0 ? o->reg->base + o->offset : NULL;
}

json_t *shm_region_json(const shm_region *r)
{
    char created[32], msg[256];
    struct tm tm;
    time_t t = (time_t)r->created_wall;
    gmtime_r(&t, &tm);
    strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);
    struct stat st;
    long long object = r->device >= 0 ? (long long)r->map_len : fstat(r->fd, &st) == 0 ? (long long)st.st_size : -1;
    shm_status live = shm_check_live(r, msg, sizeof msg);
    const char *state = live == SHM_OK ? "ok" : object >= 0 && st.st_nlink == 0 ? "unlinked" : "shrunk";
    json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:b, s:s, s:I, s:s}", "name", r->name, "kind",
                          r->device >= 0 ? "cuda" : "posix", "offset", (json_int_t)r->offset, "size",
                          (json_int_t)r->size, "object_bytes", (json_int_t)object, "pinned", r->pinned, "state", state,
                          "uses", (json_int_t)atomic_load(&r->uses), "created", created);
    if (o && r->device >= 0) {
        char dev[16];
        snprintf(dev, sizeof dev, "gpu%d", r->device);
        json_object_set_new(o, "device", json_string(dev));
    }
    return o;
}
