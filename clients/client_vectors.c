/* client_vectors.c — the resident vectors resource: POST /v1/vectors
 * (binary values, a fill, random values, or values in a shared-memory
 * region), GET (binary values with the descriptor in X-SpMV-Vector, or
 * into a region), PUT, DELETE and the list (docs/api.md).
 *
 * Every answer but a binary read is a vector descriptor, read by
 * request_vector(); a read checks the values that came back against the
 * descriptor's dtype and length. Region operands are checked and written
 * by client_shm.c.
 */
#include "client_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void vector_clear(void *item)
{
    spmv_client_vector *v = item;
    free(v->json);
    memset(v, 0, sizeof *v);
}

/* Fills the spmv_client_vector `item` from a descriptor; false (cleared)
 * when it lacks an id or a size is out of range (n·k values must be
 * addressable here). */
static bool parse_vector(const json_t *d, void *item)
{
    spmv_client_vector *v = item;
    const char *id = json_string_value(json_object_get(d, "id"));
    const char *dtype = json_string_value(json_object_get(d, "dtype"));
    int64_t bytes = 0;

    memset(v, 0, sizeof *v);
    if (!json_is_object(d) || !id || !*id || strlen(id) >= sizeof v->id)
        return false;
    snprintf(v->id, sizeof v->id, "%s", id);
    if (!spmvc_json_count(json_object_get(d, "n"), INT64_MAX, &v->n) ||
        !spmvc_json_count(json_object_get(d, "k"), INT64_MAX, &v->k) ||
        !spmvc_json_count(json_object_get(d, "bytes"), INT64_MAX, &bytes))
        goto fail;
    if (!json_object_get(d, "k"))
        v->k = 1;
    if (v->k < 1 || (v->n && (uint64_t)v->k > SIZE_MAX / 8 / (uint64_t)v->n))
        goto fail;
    v->bytes = (uint64_t)bytes;
    v->dtype = dtype && strcmp(dtype, "float32") == 0 ? SPMV_CLIENT_FLOAT32 : SPMV_CLIENT_FLOAT64;
    spmvc_copy_str(v->device, sizeof v->device, json_object_get(d, "device"));
    spmvc_copy_str(v->created, sizeof v->created, json_object_get(d, "created"));
    spmvc_copy_str(v->like, sizeof v->like, json_object_get(d, "like"));
    v->idle_s = spmvc_json_num(json_object_get(d, "idle_s"), NAN);
    v->expires_in_s = spmvc_json_num(json_object_get(d, "expires_in_s"), NAN);
    /* The descriptor without "values" (a JSON GET carries them). */
    json_t *copy = json_copy((json_t *)d);
    if (copy) json_object_del(copy, "values");
    v->json = spmvc_dump_json(copy);
    json_decref(copy);
    if (!v->json)
        goto fail;
    return true;
fail:
    vector_clear(v);
    return false;
}

static const item_kind vector_kind = {sizeof(spmv_client_vector), parse_vector, vector_clear, "vector", "an id"};

void spmv_client_vector_free(spmv_client_vector *v)
{
    spmvc_free_item(&vector_kind, v);
}

void spmv_client_vector_list_free(spmv_client_vector_list *l)
{
    FREE_LIST(&vector_kind, l);
}

/* A descriptor from JSON text (an answer body or the X-SpMV-Vector
 * header) into a fresh spmv_client_vector. */
static spmv_client_status vector_from_text(spmv_client *h, const char *text, size_t len, const char *where,
                                           spmv_client_vector **out)
{
    json_t *root = text ? json_loadb(text, len, 0, NULL) : NULL;
    char paren[64];
    spmv_client_status st;
    *out = NULL;
    snprintf(paren, sizeof paren, " (%s)", where);
    if (!root)
        return spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the vector descriptor%s is %s", paren,
                          text ? "not JSON" : "missing");
    st = spmvc_parse_item(h, &vector_kind, root, paren, (void **)out);
    json_decref(root);
    return st;
}

/* Runs a request whose answer is a vector descriptor, into *out (NULL:
 * the answer is not read). */
static spmv_client_status request_vector(spmv_client *h, request *req, spmv_client_vector **out)
{
    response r;
    spmv_client_status st = spmvc_request(h, req, &r);
    if (st == SPMV_CLIENT_OK && out)
        st = vector_from_text(h, r.body.data, r.body.len, "answer", out);
    spmvc_response_clear(&r);
    return st;
}

/* Checks the options every create shares; a message names the field. */
static spmv_client_status vector_options_ok(spmv_client *h, const spmv_client_vector_options *o)
{
    if (!o)
        return SPMV_CLIENT_OK;
    if (o->k < 0)
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "k must be 1 or more (0: 1), not %lld", (long long)o->k);
    if (o->like && !spmvc_id_ok(o->like))
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "like must be a matrix id of 1 to 63 characters");
    if (o->side && strcmp(o->side, "rows") != 0 && strcmp(o->side, "cols") != 0)
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "side must be \"rows\" or \"cols\", not \"%s\"", o->side);
    if (o->side && !o->like)
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "side needs like (a matrix to take rows or cols from)");
    if (o->dtype && strcmp(o->dtype, "float64") != 0 && strcmp(o->dtype, "float32") != 0)
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "dtype must be \"float64\" or \"float32\", not \"%s\"", o->dtype);
    return SPMV_CLIENT_OK;
}

spmv_client_status spmv_client_vector_create(spmv_client *h, spmv_client_dtype dtype, const void *values,
                                             size_t count, const spmv_client_vector_options *opts,
                                             spmv_client_vector **out)
{
    spmv_client_status st;
    int64_t k = opts && opts->k ? opts->k : 1;

    if (!h || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    spmvc_clear_error(h);
    if (!spmvc_dtype_ok(dtype))
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "dtype must be SPMV_CLIENT_FLOAT64 or _FLOAT32");
    if (!values || count == 0) return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "a vector needs at least one value");
    if (count > SIZE_MAX / spmvc_dtype_size(dtype))
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "count overflows size_t");
    if ((st = vector_options_ok(h, opts)) != SPMV_CLIENT_OK) return st;
    if (count % (uint64_t)k != 0)
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "%zu values are not a multiple of k = %lld", count, (long long)k);
    request req = {.method = "POST", .path = "/v1/vectors", .content_type = "application/octet-stream",
                   .body = values, .body_len = count * spmvc_dtype_size(dtype)};
    spmvc_query_add(h, &req, "dtype", spmvc_dtype_text(dtype));
    if (opts && opts->k) spmvc_query_add_int(h, &req, "k", (long)opts->k);
    if (opts && opts->like) spmvc_query_add(h, &req, "like", opts->like);
    if (opts && opts->side) spmvc_query_add(h, &req, "side", opts->side);
    if (opts && opts->device) spmvc_query_add(h, &req, "device", opts->device);
    return request_vector(h, &req, out);
}

/* The JSON create: {"n","k",key: source,"seed","dtype","like","side","device"}, where key is
 * "fill" (a number or "random") or "values" (a region: {"shm","offset"}); source is stolen. */
static spmv_client_status vector_create_json(spmv_client *h, int64_t n, const char *key, json_t *source,
                                             const uint64_t *seed, const spmv_client_vector_options *opts,
                                             spmv_client_vector **out)
{
    spmv_client_status st;
    if (!source)
        return spmvc_fail(h, strcmp(key, "fill") == 0 ? SPMV_CLIENT_ERR_INVALID : SPMV_CLIENT_ERR_NOMEM,
                          strcmp(key, "fill") == 0 ? "the fill value must be a finite number" : "out of memory");
    if ((st = vector_options_ok(h, opts)) == SPMV_CLIENT_OK && (n < 0 || (n == 0 && !(opts && opts->like))))
        st = spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "n must be 1 or more, or 0 with like giving it (not %lld)",
                        (long long)n);
    if (st != SPMV_CLIENT_OK) {
        json_decref(source);
        return st;
    }
    request req = {.method = "POST", .path = "/v1/vectors"};
    if (n) spmvc_body_set(&req, "n", json_integer((json_int_t)n));
    if (opts && opts->k) spmvc_body_set(&req, "k", json_integer((json_int_t)opts->k));
    spmvc_body_set(&req, key, source);
    if (seed) spmvc_body_set(&req, "seed", json_integer((json_int_t)(*seed & INT64_MAX)));
    if (opts && opts->dtype) spmvc_body_set(&req, "dtype", json_string(opts->dtype));
    if (opts && opts->like) spmvc_body_set(&req, "like", json_string(opts->like));
    if (opts && opts->side) spmvc_body_set(&req, "side", json_string(opts->side));
    if (opts && opts->device) spmvc_body_set(&req, "device", json_string(opts->device));
    return request_vector(h, &req, out);
}

spmv_client_status spmv_client_vector_fill(spmv_client *h, int64_t n, double value,
                                           const spmv_client_vector_options *opts, spmv_client_vector **out)
{
    if (!h || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    spmvc_clear_error(h);
    return vector_create_json(h, n, "fill", isfinite(value) ? json_real(value) : NULL, NULL, opts, out);
}

spmv_client_status spmv_client_vector_random(spmv_client *h, int64_t n, uint64_t seed,
                                             const spmv_client_vector_options *opts, spmv_client_vector **out)
{
    if (!h || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    spmvc_clear_error(h);
    return vector_create_json(h, n, "fill", json_string("random"), &seed, opts, out);
}

/* Why a read's answer did not fit the buffer, when the X-SpMV-Vector
 * header tells (its dtype or length differs): INVALID with both; else st. */
static spmv_client_status read_misfit(spmv_client *h, const response *r, const char *id, spmv_client_dtype dtype,
                                      size_t count, spmv_client_status st)
{
    spmv_client_vector *v = NULL;
    if (st == SPMV_CLIENT_ERR_PROTOCOL && r->meta_header &&
        vector_from_text(h, r->meta_header, strlen(r->meta_header), "X-SpMV-Vector header", &v) == SPMV_CLIENT_OK &&
        (v->dtype != dtype || (uint64_t)v->n * (uint64_t)v->k != count))
        st = spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "vector %s holds %lld x %lld %s values; the buffer takes %zu %s",
                        id, (long long)v->n, (long long)v->k, spmvc_dtype_text(v->dtype), count,
                        spmvc_dtype_text(dtype));
    spmv_client_vector_free(v);
    return st;
}

/* A read's binary answer checked against its X-SpMV-Vector descriptor
 * (which goes to *desc when wanted). */
static spmv_client_status read_answer(spmv_client *h, const response *r, const char *id, spmv_client_dtype dtype,
                                      size_t count, spmv_client_vector **desc)
{
    spmv_client_vector *v = NULL;
    spmv_client_status st;
    if (r->to_sink != 1 && r->body.len)
        return spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL, "the vector came back as %s, not as binary values",
                          r->body.data[0] == '{' ? "JSON" : "something else");
    if ((st = vector_from_text(h, r->meta_header, r->meta_header ? strlen(r->meta_header) : 0,
                               "X-SpMV-Vector header", &v)) != SPMV_CLIENT_OK)
        return st;
    if (v->dtype != dtype)
        st = spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "vector %s holds %s values, the buffer %s", id,
                        spmvc_dtype_text(v->dtype), spmvc_dtype_text(dtype));
    else if (r->sink_len != count * spmvc_dtype_size(dtype) || (uint64_t)v->n * (uint64_t)v->k != count)
        st = spmvc_fail(h, SPMV_CLIENT_ERR_PROTOCOL, "vector %s: %zu bytes for n = %lld, k = %lld, expected %zu values",
                        id, r->sink_len, (long long)v->n, (long long)v->k, count);
    if (st == SPMV_CLIENT_OK && desc) {
        *desc = v;
        v = NULL;
    }
    spmv_client_vector_free(v);
    return st;
}

spmv_client_status spmv_client_vector_read(spmv_client *h, const char *id, spmv_client_dtype dtype, void *values,
                                           size_t count, spmv_client_vector **desc)
{
    spmv_client_status st;
    size_t esize = spmvc_dtype_size(dtype);

    if (desc) *desc = NULL;
    if (!h) return SPMV_CLIENT_ERR_INVALID;
    spmvc_clear_error(h);
    if ((st = spmvc_check_id(h, id, "vector")) != SPMV_CLIENT_OK) return st;
    if (!spmvc_dtype_ok(dtype) || (!values && count) || count > SIZE_MAX / esize)
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "bad dtype, a NULL buffer or a count that overflows size_t");
    request req = {.method = "GET", .collection = "vectors", .id = id, .accept = "application/octet-stream",
                   .sink = values, .sink_cap = count * esize, .sink_if_binary = true,
                   .meta_name = "x-spmv-vector:"};
    response r;
    if ((st = spmvc_request(h, &req, &r)) != SPMV_CLIENT_OK)
        st = read_misfit(h, &r, id, dtype, count, st);
    else
        st = read_answer(h, &r, id, dtype, count, desc);
    spmvc_response_clear(&r);
    return st;
}

spmv_client_status spmv_client_vector_write(spmv_client *h, const char *id, spmv_client_dtype dtype,
                                            const void *values, size_t count, spmv_client_vector **desc)
{
    spmv_client_status st;

    if (desc) *desc = NULL;
    if (!h) return SPMV_CLIENT_ERR_INVALID;
    spmvc_clear_error(h);
    if ((st = spmvc_check_id(h, id, "vector")) != SPMV_CLIENT_OK) return st;
    if (!spmvc_dtype_ok(dtype) || !values || count == 0 || count > SIZE_MAX / spmvc_dtype_size(dtype))
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "bad dtype, no values, or a count that overflows size_t");
    request req = {.method = "PUT", .collection = "vectors", .id = id, .content_type = "application/octet-stream",
                   .body = values, .body_len = count * spmvc_dtype_size(dtype)};
    return request_vector(h, &req, desc);
}

spmv_client_status spmv_client_vector_delete(spmv_client *h, const char *id)
{
    return spmvc_delete_at(h, "vectors", id, spmvc_id_ok(id), "vector id must be 1 to 63 characters");
}

spmv_client_status spmv_client_vectors(spmv_client *h, spmv_client_vector_list **out)
{
    FETCH_LIST(spmv_client_vector_list, spmv_client_vector_list_free, "/v1/vectors", "vectors", &vector_kind);
}

spmv_client_status spmv_client_vector_create_shm(spmv_client *h, const spmv_client_shm_ref *values, int64_t n,
                                                 const spmv_client_vector_options *opts, spmv_client_vector **out)
{
    spmv_client_status st;
    if (!h || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    spmvc_clear_error(h);
    if ((st = spmvc_shm_ref_ok(h, values)) != SPMV_CLIENT_OK)
        return st;
    return vector_create_json(h, n, "values", spmvc_shm_ref_json(values), NULL, opts, out);
}

/* What writing a vector from a region and reading one into a region check
 * before sending: the vector's id and the region operand. */
static spmv_client_status shm_vector_ok(spmv_client *h, const char *id, const spmv_client_shm_ref *r,
                                        spmv_client_vector **desc)
{
    spmv_client_status st;
    if (desc) *desc = NULL;
    if (!h) return SPMV_CLIENT_ERR_INVALID;
    spmvc_clear_error(h);
    if ((st = spmvc_check_id(h, id, "vector")) != SPMV_CLIENT_OK) return st;
    return spmvc_shm_ref_ok(h, r);
}

spmv_client_status spmv_client_vector_write_shm(spmv_client *h, const char *id, const spmv_client_shm_ref *values,
                                                spmv_client_vector **desc)
{
    spmv_client_status st;

    if ((st = shm_vector_ok(h, id, values, desc)) != SPMV_CLIENT_OK) return st;
    request req = {.method = "PUT", .collection = "vectors", .id = id};
    spmvc_body_set(&req, "values", spmvc_shm_ref_json(values));
    return request_vector(h, &req, desc);
}

spmv_client_status spmv_client_vector_read_shm(spmv_client *h, const char *id, const spmv_client_shm_ref *into,
                                               spmv_client_vector **desc)
{
    spmv_client_status st;

    if ((st = shm_vector_ok(h, id, into, desc)) != SPMV_CLIENT_OK) return st;
    request req = {.method = "GET", .collection = "vectors", .id = id, .accept = "application/json"};
    spmvc_query_add(h, &req, "shm", into->name);
    spmvc_query_add_u64(h, &req, "offset", into->offset);
    return request_vector(h, &req, desc);
}
