/* client_shm.c — the shared-memory regions resource: POST /v1/shm
 * (a POSIX object or a CUDA IPC handle), GET one or the list, DELETE
 * (docs/api.md).
 *
 * It also owns the daemon's rule for a region name and the JSON form of a
 * region operand ({"shm","offset"}), which the vector and spmv calls
 * (client_vectors.c, client_spmv.c) use through client_internal.h.
 */
#include "client_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The daemon's rule for a region name (docs/api.md): 1-200 characters of
 * A-Z a-z 0-9 _ . -, not starting with a dot. Checked here too, so that a
 * name never needs escaping in a path and a '/' never reaches the server. */
bool spmvc_shm_name_ok(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > 200 || name[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' ||
              ch == '.' || ch == '-'))
            return false;
    }
    return true;
}

static void shm_clear(void *item)
{
    spmv_client_shm *r = item;
    free(r->json);
    memset(r, 0, sizeof *r);
}

/* Fills the spmv_client_shm `item` from a descriptor; false (cleared)
 * when it lacks a valid name or a size is out of range. */
static bool parse_shm(const json_t *d, void *item)
{
    spmv_client_shm *r = item;
    const char *name = json_string_value(json_object_get(d, "name"));
    const json_t *pinned = json_object_get(d, "pinned");
    int64_t offset = 0, size = 0, object = 0, uses = 0;

    memset(r, 0, sizeof *r);
    if (!json_is_object(d) || !name || strlen(name) >= sizeof r->name)
        return false;
    const json_t *ob = json_object_get(d, "object_bytes");
    if (json_is_integer(ob) && json_integer_value(ob) == -1)
        ob = NULL; /* the daemon could not fstat the object: unknown */
    if (!spmvc_json_count(json_object_get(d, "offset"), INT64_MAX, &offset) ||
        !spmvc_json_count(json_object_get(d, "size"), INT64_MAX, &size) || !spmvc_json_count(ob, INT64_MAX, &object) ||
        !spmvc_json_count(json_object_get(d, "uses"), INT64_MAX, &uses))
        return false;
    snprintf(r->name, sizeof r->name, "%s", name);
    r->offset = (uint64_t)offset;
    r->size = (uint64_t)size;
    r->object_bytes = (uint64_t)object;
    r->uses = uses;
    r->pinned = json_is_boolean(pinned) ? json_is_true(pinned) : -1;
    spmvc_copy_str(r->state, sizeof r->state, json_object_get(d, "state"));
    spmvc_copy_str(r->created, sizeof r->created, json_object_get(d, "created"));
    spmvc_copy_str(r->kind, sizeof r->kind, json_object_get(d, "kind"));
    spmvc_copy_str(r->device, sizeof r->device, json_object_get(d, "device"));
    if (!(r->json = spmvc_dump_json(d))) {
        shm_clear(r);
        return false;
    }
    return true;
}

static const item_kind shm_kind = {sizeof(spmv_client_shm), parse_shm, shm_clear, "region", "a name"};

void spmv_client_shm_free(spmv_client_shm *r)
{
    spmvc_free_item(&shm_kind, r);
}

void spmv_client_shm_list_free(spmv_client_shm_list *l)
{
    FREE_LIST(&shm_kind, l);
}

/* Registers a region: POSIX when `ipc` is NULL, else CUDA on `device`. */
static spmv_client_status shm_register(spmv_client *h, const char *name, const unsigned char *ipc, const char *device,
                                       uint64_t offset, uint64_t size, spmv_client_shm **out)
{
    char hex[2 * SPMV_CLIENT_CUDA_IPC_HANDLE_BYTES + 1];

    if (!spmvc_shm_name_ok(name))
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "a region name is 1 to 200 characters of A-Z a-z 0-9 _ . -, "
                          "not starting with a dot (shm_open's name without its slash)");
    if (size == 0 || size > INT64_MAX || offset > INT64_MAX - size)
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "size must be > 0 and offset + size within 2^63 (offset %llu, "
                          "size %llu)", (unsigned long long)offset, (unsigned long long)size);
    request req = {.method = "POST", .path = "/v1/shm"};
    spmvc_body_set(&req, "name", json_string(name));
    spmvc_body_set(&req, "offset", json_integer((json_int_t)offset));
    spmvc_body_set(&req, "size", json_integer((json_int_t)size));
    if (ipc) {
        for (int i = 0; i < SPMV_CLIENT_CUDA_IPC_HANDLE_BYTES; i++)
            snprintf(hex + 2 * i, 3, "%02x", ipc[i]);
        spmvc_body_set(&req, "cuda_ipc", json_string(hex));
        spmvc_body_set(&req, "device", json_string(device));
    }
    return spmvc_request_item(h, &req, &shm_kind, (void **)out);
}

spmv_client_status spmv_client_shm_register(spmv_client *h, const char *name, uint64_t offset, uint64_t size,
                                            spmv_client_shm **out)
{
    if (out) *out = NULL;
    if (!h) return SPMV_CLIENT_ERR_INVALID;
    spmvc_clear_error(h);
    return shm_register(h, name, NULL, NULL, offset, size, out);
}

spmv_client_status spmv_client_shm_register_cuda(spmv_client *h, const char *name, const void *handle,
                                                 const char *device, uint64_t offset, uint64_t size,
                                                 spmv_client_shm **out)
{
    if (out) *out = NULL;
    if (!h) return SPMV_CLIENT_ERR_INVALID;
    spmvc_clear_error(h);
    if (!handle || !device || !*device || strlen(device) > 31)
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "a CUDA region needs the IPC handle and a device (\"gpu0\")");
    return shm_register(h, name, handle, device, offset, size, out);
}

spmv_client_status spmv_client_shm_get(spmv_client *h, const char *name, spmv_client_shm **out)
{
    if (out) *out = NULL;
    if (!h || !out) return SPMV_CLIENT_ERR_INVALID;
    spmvc_clear_error(h);
    if (!spmvc_shm_name_ok(name)) return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "not a region name");
    request req = {.method = "GET", .collection = "shm", .id = name};
    return spmvc_request_item(h, &req, &shm_kind, (void **)out);
}

spmv_client_status spmv_client_shm_regions(spmv_client *h, spmv_client_shm_list **out)
{
    FETCH_LIST(spmv_client_shm_list, spmv_client_shm_list_free, "/v1/shm", "regions", &shm_kind);
}

spmv_client_status spmv_client_shm_unregister(spmv_client *h, const char *name)
{
    return spmvc_delete_at(h, "shm", name, spmvc_shm_name_ok(name), "not a region name");
}

/* {"shm": name, "offset": bytes}, the JSON form of a region operand. */
json_t *spmvc_shm_ref_json(const spmv_client_shm_ref *r)
{
    return json_pack("{s:s, s:I}", "shm", r->name, "offset", (json_int_t)r->offset);
}

spmv_client_status spmvc_shm_ref_ok(spmv_client *h, const spmv_client_shm_ref *r)
{
    if (!r || !spmvc_shm_name_ok(r->name))
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "a region operand needs a region name of 1 to 200 characters of "
                          "A-Z a-z 0-9 _ . -, not starting with a dot");
    if (r->offset > INT64_MAX)
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "offset %llu is out of range", (unsigned long long)r->offset);
    return SPMV_CLIENT_OK;
}
