/* client_server.c — what the daemon says about itself: GET /v1/health,
 * /v1/ready, /v1/info and /v1/kernels (docs/api.md).
 *
 * Each call is one GET through the transport (client_http.c); kernels is
 * a list read by spmvc_fetch_list() with its own descriptor parser.
 */
#include "client_internal.h"

#include <stdlib.h>
#include <string.h>

static spmv_client_status maybe_dump(spmv_client *h, const json_t *root, char **json)
{
    if (!json)
        return SPMV_CLIENT_OK;
    if (!(*json = spmvc_dump_json(root)))
        return spmvc_fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory");
    return SPMV_CLIENT_OK;
}

spmv_client_status spmv_client_health(spmv_client *h, char **json)
{
    json_t *root;
    if (json) *json = NULL;
    if (!h) return SPMV_CLIENT_ERR_INVALID;
    spmv_client_status st = spmvc_get_json(h, "/v1/health", &root);
    if (st == SPMV_CLIENT_OK) {
        const char *s = json_string_value(json_object_get(root, "status"));
        if (!s || strcmp(s, "ok") != 0)
            st = spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL, "health answer has status \"%s\", not \"ok\"", s ? s : "");
        else
            st = maybe_dump(h, root, json);
    }
    json_decref(root);
    return st;
}

spmv_client_status spmv_client_ready(spmv_client *h)
{
    if (!h) return SPMV_CLIENT_ERR_INVALID;
    request req = {.method = "GET", .path = "/v1/ready"};
    return spmvc_send_only(h, &req);
}

spmv_client_status spmv_client_info(spmv_client *h, char **json)
{
    json_t *root;
    if (!h || !json) return SPMV_CLIENT_ERR_INVALID;
    *json = NULL;
    spmv_client_status st = spmvc_get_json(h, "/v1/info", &root);
    if (st == SPMV_CLIENT_OK)
        st = maybe_dump(h, root, json);
    json_decref(root);
    return st;
}

static void kernel_clear(void *item)
{
    spmv_client_kernel *k = item;
    free(k->name);
    free(k->reason);
    free(k->parameters);
}

static bool parse_kernel(const json_t *v, void *item)
{
    spmv_client_kernel *k = item;
    const char *name = json_is_string(v) ? json_string_value(v) : json_string_value(json_object_get(v, "name"));
    const char *reason = json_string_value(json_object_get(v, "reason"));
    const json_t *avail = json_object_get(v, "available");
    const json_t *params = json_object_get(v, "parameters");
    if (!params) params = json_object_get(v, "params");

    if (!name)
        return false;
    k->name = strdup(name);
    k->available = avail ? json_is_true(avail) : 1;
    k->reason = reason ? strdup(reason) : NULL;
    k->parameters = params ? spmvc_dump_json(params) : NULL;
    return k->name && (!reason || k->reason) && (!params || k->parameters);
}

static const item_kind kernel_kind = {sizeof(spmv_client_kernel), parse_kernel, kernel_clear, "kernel",
                                       "a name"};

void spmv_client_kernel_list_free(spmv_client_kernel_list *l)
{
    FREE_LIST(&kernel_kind, l);
}

spmv_client_status spmv_client_kernels(spmv_client *h, spmv_client_kernel_list **out)
{
    FETCH_LIST(spmv_client_kernel_list, spmv_client_kernel_list_free, "/v1/kernels", "kernels", &kernel_kind);
}
