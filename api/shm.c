/* shm.c — /v1/shm: register, list, show and unregister shared-memory
 * regions (docs/api.md, "Shared memory").
 *
 * Everything happens on the HTTP thread: registration opens, maps and
 * pins (a few milliseconds per hundred megabytes pinned), the others are
 * lookups. Every route answers 403 shm_disabled unless allow_shm is on,
 * so a daemon configured without it maps nothing a client names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "daemon/shm.h"

int api_shm_status(int st, const char **code)
{
    static const struct { shm_status st; int http; const char *code; } map[] = {
        {SHM_DISABLED, 403, "shm_disabled"}, {SHM_BAD_NAME, 400, "invalid_request"},
        {SHM_INVALID, 400, "invalid_request"}, {SHM_RANGE, 400, "out_of_range"},
        {SHM_NOT_FOUND, 404, "shm_not_found"}, {SHM_FORBIDDEN, 403, "shm_forbidden"},
        {SHM_EXISTS, 409, "shm_exists"},     {SHM_GONE, 410, "shm_gone"},
        {SHM_LIMIT, 507, "shm_limit"},       {SHM_IO, 500, "io_error"},
        {SHM_NOMEM, 500, "out_of_memory"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if ((int)map[i].st == st) {
            *code = map[i].code;
            return map[i].http;
        }
    *code = "internal";
    return 500;
}

void api_shm_error(request *r, int st, const char *msg)
{
    const char *code;
    int http = api_shm_status(st, &code);
    api_error(r, http, code, "%s", msg);
}

bool api_shm_enabled(request *r)
{
    if (atomic_load(&r->d->limits.allow_shm))
        return true;
    api_error(r, 403, "shm_disabled",
              "shared-memory regions are off in this daemon: set allow_shm = true (docs/security.md)");
    return false;
}

static const char *path_name(request *r)
{
    return r->path + strlen("/v1/shm/");
}

static void collect(request *r, const char *data, size_t size)
{
    api_body_collect(r, data, size, 64 * 1024, "a registration's fixed 64 KiB");
}

static void post_begin(request *r)
{
    if (api_shm_enabled(r))
        api_check_content_length(r, 64 * 1024, "a registration's fixed 64 KiB");
}

static int int_field(request *r, const json_t *o, const char *key, int64_t def, int64_t *out)
{
    const json_t *v = json_object_get(o, key);
    *out = def;
    if (!v)
        return 0;
    if (!json_is_integer(v)) {
        api_error(r, 400, "invalid_request", "`%s` must be an integer number of bytes", key);
        return -1;
    }
    *out = json_integer_value(v);
    return 0;
}

/* "cuda_ipc": the cudaIpcMemHandle as 128 hex digits, "device": a GPU of
 * this daemon ("gpu1", 1). 0, or -1 answered. */
static int cuda_fields(request *r, const json_t *ipc, const json_t *dev, unsigned char *handle, int *device)
{
    const char *h = json_is_string(ipc) ? json_string_value(ipc) : "";
    if (strlen(h) != 2 * SPMV_GPU_IPC_HANDLE_BYTES || strspn(h, "0123456789abcdefABCDEF") != strlen(h)) {
        api_error(r, 400, "invalid_request", "`cuda_ipc` must be the %d-byte cudaIpcMemHandle as %d hex digits",
                  SPMV_GPU_IPC_HANDLE_BYTES, 2 * SPMV_GPU_IPC_HANDLE_BYTES);
        return -1;
    }
    for (int i = 0; i < SPMV_GPU_IPC_HANDLE_BYTES; i++) {
        unsigned v;
        sscanf(h + 2 * i, "%2x", &v);
        handle[i] = (unsigned char)v;
    }
    char name[32];
    if (json_is_integer(dev))
        snprintf(name, sizeof name, "%lld", (long long)json_integer_value(dev));
    else if (json_is_string(dev) && json_string_length(dev) < sizeof name)
        snprintf(name, sizeof name, "%s", json_string_value(dev));
    else {
        api_error(r, 400, "invalid_request", "a CUDA region needs `device`: the GPU its memory is on (\"gpu0\" or 0)");
        return -1;
    }
    const char *why = NULL;
    worker *w = strcmp(name, "cpu") == 0 || strcmp(name, "gpu") == 0 ? NULL : spmvd_worker_named(r->d, name, &why);
    if (!w || w->gpu < 0) {
        api_error(r, 409, "unavailable", "`device` %s: %s", name, why ? why : "a CUDA region needs one named GPU");
        return -1;
    }
    *device = w->gpu;
    return 0;
}

static void post_end(request *r)
{
    json_error_t jerr;
    json_t *o = json_loadb(r->body ? r->body : "", r->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!o) {
        api_error(r, 400, "invalid_json", "body is not valid JSON: line %d column %d: %s", jerr.line, jerr.column,
                  jerr.text);
        return;
    }
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        if (strcmp(key, "name") && strcmp(key, "offset") && strcmp(key, "size") && strcmp(key, "cuda_ipc") &&
            strcmp(key, "device")) {
            api_error(r, 400, "invalid_request", "unknown field `%s` (a region is {\"name\", \"offset\", \"size\"}, "
                      "and a CUDA one has \"cuda_ipc\" and \"device\")", key);
            goto out;
        }
    }
    const json_t *name = json_object_get(o, "name");
    int64_t offset, size;
    if (!json_is_string(name)) {
        api_error(r, 400, "invalid_request", "`name` (the shared-memory object's name, without '/') is required");
        goto out;
    }
    if (!json_object_get(o, "size")) {
        api_error(r, 400, "invalid_request", "`size` (bytes of the region) is required");
        goto out;
    }
    if (int_field(r, o, "offset", 0, &offset) || int_field(r, o, "size", 0, &size))
        goto out;
    char msg[512];
    shm_region *reg;
    shm_status st;
    const json_t *ipc = json_object_get(o, "cuda_ipc");
    if (ipc || json_object_get(o, "device")) {
        unsigned char handle[SPMV_GPU_IPC_HANDLE_BYTES];
        int device;
        if (cuda_fields(r, ipc, json_object_get(o, "device"), handle, &device))
            goto out;
        st = shm_register_cuda(r->d->shm, json_string_value(name), handle, device, offset, size,
                               atomic_load(&r->d->limits.max_shm_regions), &reg, msg, sizeof msg);
    } else
        st = shm_register(r->d->shm, json_string_value(name), offset, size,
                          atomic_load(&r->d->limits.max_shm_regions), &reg, msg, sizeof msg);
    if (st) {
        api_shm_error(r, st, msg);
        goto out;
    }
    char loc[SHM_NAME_MAX + 16];
    snprintf(loc, sizeof loc, "/v1/shm/%s", reg->name);
    api_json(r, 201, shm_region_json(reg));
    api_header(r, MHD_HTTP_HEADER_LOCATION, loc);
    shm_unref(reg);
out:
    json_decref(o);
}

static void list_begin(request *r)
{
    if (!api_shm_enabled(r))
        return;
    shm_region **list;
    size_t n;
    if (shm_list(r->d->shm, &list, &n) != 0) {
        api_error(r, 500, "out_of_memory", "out of memory");
        return;
    }
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, shm_region_json(list[i]));
    shm_list_free(list, n);
    api_json(r, 200, json_pack("{s:o}", "regions", a));
}

/* The {name} of the path, checked; NULL answered. */
static const char *region_name(request *r)
{
    char msg[256];
    const char *name = path_name(r);
    shm_status st = shm_name_check(name, msg, sizeof msg);
    if (st) {
        api_shm_error(r, st, msg);
        return NULL;
    }
    return name;
}

static void get_begin(request *r)
{
    const char *name;
    if (!api_shm_enabled(r) || !(name = region_name(r)))
        return;
    shm_region *reg = shm_get(r->d->shm, name);
    if (!reg) {
        api_error(r, 404, "shm_not_found", "no region %s (never registered, or unregistered)", name);
        return;
    }
    api_json(r, 200, shm_region_json(reg));
    shm_unref(reg);
}

static void delete_begin(request *r)
{
    const char *name;
    if (!api_shm_enabled(r) || !(name = region_name(r)))
        return;
    if (shm_unregister(r->d->shm, name) != SHM_OK)
        api_error(r, 404, "shm_not_found", "no region %s (never registered, or unregistered)", name);
    else
        api_bytes(r, 204, NULL, NULL, 0);
}

const route_handlers api_shm_list = {.begin = list_begin, .body_kind = API_BODY_NONE, .query = api_no_query};
const route_handlers api_shm_post = {.begin = post_begin, .body = collect, .end = post_end, .accepts_body = true,
                                     .body_kind = API_BODY_JSON, .query = api_no_query};
const route_handlers api_shm_get = {.begin = get_begin, .body_kind = API_BODY_NONE, .query = api_no_query};
const route_handlers api_shm_delete = {.begin = delete_begin, .body_kind = API_BODY_NONE, .query = api_no_query};
