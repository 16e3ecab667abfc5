/* client_matrices.c — the matrices resource: POST /v1/matrices (a Matrix
 * Market file from disk or memory, or a matrix the daemon generates), GET
 * the list or one descriptor, DELETE (docs/api.md).
 *
 * Uploads are multipart forms: the "file" part (streamed from disk by
 * libcurl, or from the caller's memory) and the option fields, sent by
 * upload_form() through the transport (client_http.c). The descriptor
 * parser here (spmvc_matrix_kind) also reads the product spmspm stores.
 * The handle remembers the dtypes of the last matrices described,
 * uploaded or generated, by id: spmvc_matrix_dtype() answers a binary
 * solve (client_solve.c) from there, else with one GET.
 */
#include "client_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------- descriptors */

/* One format entry, from either {"csr": {...}} (key) or [{"format":"csr",...}]. */
static void parse_format(const char *key, const json_t *v, spmv_client_format *f)
{
    int64_t bytes = 0;
    const char *name = key ? key : json_string_value(json_object_get(v, "format"));
    if (!name) name = json_string_value(json_object_get(v, "name"));
    if (!name) name = json_string_value(v);
    snprintf(f->name, sizeof f->name, "%s", name ? name : "");
    spmvc_copy_str(f->device, sizeof f->device, json_object_get(v, "device"));
    if (spmvc_json_count(json_object_get(v, "bytes"), INT64_MAX, &bytes))
        f->bytes = (uint64_t)bytes;
    f->padding = spmvc_json_num(json_object_get(v, "padding"), 0);
    if (json_object_get(v, "padding_ratio"))
        f->padding = spmvc_json_num(json_object_get(v, "padding_ratio"), 0);
}

static bool parse_formats(const json_t *fm, spmv_client_matrix *m)
{
    size_t n = json_is_array(fm) ? json_array_size(fm) : json_is_object(fm) ? json_object_size(fm) : 0;
    if (n == 0)
        return true;
    if (n > 64)
        return false; /* five formats exist; a long list is garbage */
    m->formats = calloc(n, sizeof *m->formats);
    if (!m->formats)
        return false;
    if (json_is_array(fm)) {
        size_t i;
        json_t *v;
        json_array_foreach(fm, i, v) parse_format(NULL, v, &m->formats[i]);
    } else {
        const char *k;
        json_t *v;
        size_t i = 0;
        json_object_foreach((json_t *)fm, k, v) parse_format(k, v, &m->formats[i++]);
    }
    m->nformats = n;
    return true;
}

static void parse_timings(const json_t *d, spmv_client_matrix *m)
{
    const json_t *t = json_object_get(d, "timings");
    if (!t) t = json_object_get(d, "upload");
    if (!t) t = json_object_get(d, "upload_ms");
    if (!t) t = d;
    m->parse_ms = spmvc_json_num(json_object_get(t, "parse_ms"), NAN);
    m->transfer_ms = spmvc_json_num(json_object_get(t, "transfer_ms"), NAN);
    m->convert_ms = spmvc_json_num(json_object_get(t, "convert_ms"), NAN);
    if (isnan(m->parse_ms)) m->parse_ms = spmvc_json_num(json_object_get(t, "parse"), NAN);
    if (isnan(m->transfer_ms)) m->transfer_ms = spmvc_json_num(json_object_get(t, "transfer"), NAN);
    if (isnan(m->convert_ms)) m->convert_ms = spmvc_json_num(json_object_get(t, "convert"), NAN);
}

static void matrix_clear(void *item)
{
    spmv_client_matrix *m = item;
    free(m->name);
    free(m->formats);
    free(m->json);
    memset(m, 0, sizeof *m);
}

/* Fills the spmv_client_matrix `item` from a descriptor object. False (m
 * cleared) when it lacks an id or a size is out of range. */
static bool parse_matrix(const json_t *d, void *item)
{
    spmv_client_matrix *m = item;
    const char *id = json_string_value(json_object_get(d, "id"));
    const char *name = json_string_value(json_object_get(d, "name"));
    const char *dtype = json_string_value(json_object_get(d, "dtype"));
    const json_t *dev = json_object_get(d, "device");

    memset(m, 0, sizeof *m);
    if (!json_is_object(d) || !id || !*id || strlen(id) >= sizeof m->id)
        return false;
    snprintf(m->id, sizeof m->id, "%s", id);
    if (!spmvc_json_count(json_object_get(d, "rows"), INT64_MAX, &m->rows) ||
        !spmvc_json_count(json_object_get(d, "cols"), INT64_MAX, &m->cols) ||
        !spmvc_json_count(json_object_get(d, "nnz"), INT64_MAX, &m->nnz))
        goto fail;
    m->dtype = dtype && (strcmp(dtype, "float32") == 0 || strcmp(dtype, "f32") == 0) ? SPMV_CLIENT_FLOAT32
                                                                                     : SPMV_CLIENT_FLOAT64;
    m->mixed = dtype && strcmp(dtype, "mixed") == 0; /* its vectors are float64 */
    spmvc_copy_str(m->symmetry, sizeof m->symmetry, json_object_get(d, "symmetry"));
    if (json_is_object(dev))
        dev = json_object_get(dev, "name");
    spmvc_copy_str(m->device, sizeof m->device, dev);
    m->name = strdup(name ? name : "");
    m->json = spmvc_dump_json(d);
    if (!m->name || !m->json || !parse_formats(json_object_get(d, "formats"), m))
        goto fail;
    parse_timings(d, m);
    return true;
fail:
    matrix_clear(m);
    return false;
}

const item_kind spmvc_matrix_kind = {sizeof(spmv_client_matrix), parse_matrix, matrix_clear, "matrix", "an id"};

void spmv_client_matrix_free(spmv_client_matrix *m)
{
    spmvc_free_item(&spmvc_matrix_kind, m);
}

void spmv_client_matrix_list_free(spmv_client_matrix_list *l)
{
    FREE_LIST(&spmvc_matrix_kind, l);
}

/* ---------------------------------------------------------------- routes */

static bool mime_field(curl_mime *mime, const char *name, const char *value)
{
    curl_mimepart *p = curl_mime_addpart(mime);
    return p && curl_mime_name(p, name) == CURLE_OK && curl_mime_data(p, value, CURL_ZERO_TERMINATED) == CURLE_OK;
}

/* The option fields of an upload form (docs/api.md, POST /v1/matrices:
 * name, dtype, formats, hack_size, device). */
static spmv_client_status mime_options(spmv_client *h, curl_mime *mime, const spmv_client_upload_options *o)
{
    char num[32];
    bool ok = true;
    if (!o)
        return SPMV_CLIENT_OK;
    if (o->hack_size < 0)
        return spmvc_fail(h, SPMV_CLIENT_ERR_INVALID, "hack_size must not be negative");
    if (o->name) ok = ok && mime_field(mime, "name", o->name);
    if (o->dtype) ok = ok && mime_field(mime, "dtype", o->dtype);
    if (o->formats) ok = ok && mime_field(mime, "formats", o->formats);
    if (o->device) ok = ok && mime_field(mime, "device", o->device);
    if (o->hack_size) {
        snprintf(num, sizeof num, "%d", o->hack_size);
        ok = ok && mime_field(mime, "hack_size", num);
    }
    return ok ? SPMV_CLIENT_OK : spmvc_fail(h, SPMV_CLIENT_ERR_NOMEM, "out of memory building the form");
}

/* A new form whose first part is the "file" field, typed, for the caller
 * to fill with the matrix; NULL when memory runs out. */
static curl_mime *file_form(spmv_client *h, curl_mimepart **part)
{
    curl_mime *mime = curl_mime_init(h->curl);
    if (mime && (*part = curl_mime_addpart(mime)) && curl_mime_name(*part, "file") == CURLE_OK &&
        curl_mime_type(*part, "application/octet-stream") == CURLE_OK)
        return mime;
    curl_mime_free(mime);
    return NULL;
}

/* Keeps a described matrix's dtype on the handle under its id (not a
 * name, which may come to mean another matrix), for the binary solve. */
static void remember(spmv_client *h, spmv_client_status st, const spmv_client_matrix *m)
{
    const size_t slots = sizeof h->known / sizeof h->known[0];
    if (st != SPMV_CLIENT_OK || !m)
        return;
    for (size_t i = 0; i < slots; i++)
        if (strcmp(h->known[i].id, m->id) == 0)
            return;
    size_t i = h->known_next++ % slots;
    snprintf(h->known[i].id, sizeof h->known[i].id, "%s", m->id);
    h->known[i].dtype = m->dtype;
}

/* Adds the options' fields to a form, sends it, frees it: the one way an
 * upload or a generate goes out. `built` is false when filling the form
 * ran out of memory. */
static spmv_client_status upload_form(spmv_client *h, curl_mime *mime, bool built,
                                      const spmv_client_upload_options *opts, spmv_client_matrix **out)
{
    spmv_client_status st = SPMV_CLIENT_ERR_NOMEM;
    if (!built)
        st = spmvc_fail(h, st, "out of memory building the form");
    else if ((st = mime_options(h, mime, opts)) == SPMV_CLIENT_OK) {
        request req = {.method = "POST", .path = "/v1/matrices", .mime = mime};
        if (opts) {
            req.progress = opts->progress;
            req.progress_user = opts->progress_user;
        }
        st = spmvc_request_item(h, &req, &spmvc_matrix_kind, (void **)out);
        remember(h, st, *out);
    }
    curl_mime_free(mime);
    return st;
}

spmv_client_status spmv_client_upload_file(spmv_client *h, const char *path, const spmv_client_upload_options *opts,
                                           spmv_client_matrix **out)
{
    curl_mime *mime;
    curl_mimepart *part;
    FILE *f;

    if (!h || !path || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    spmvc_clear_error(h);
    /* Open it here so a missing file is IO with errno's words, not a
     * transfer error from inside libcurl's read callback. */
    if (!(f = fopen(path, "rb")))
        return spmvc_fail(h, SPMV_CLIENT_ERR_IO, "%s: %s", path, strerror(errno));
    fclose(f);
    mime = file_form(h, &part);
    return upload_form(h, mime, mime && curl_mime_filedata(part, path) == CURLE_OK, opts, out);
}

spmv_client_status spmv_client_upload_memory(spmv_client *h, const void *data, size_t len,
                                             const spmv_client_upload_options *opts, spmv_client_matrix **out)
{
    curl_mime *mime;
    curl_mimepart *part;

    if (!h || !data || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    spmvc_clear_error(h);
    mime = file_form(h, &part);
    return upload_form(h, mime,
                       mime && curl_mime_data(part, data, len) == CURLE_OK &&
                           curl_mime_filename(part, opts && opts->name ? opts->name : "matrix.mtx") == CURLE_OK,
                       opts, out);
}

/* A form field holding an integer. */
static bool mime_int(curl_mime *mime, const char *name, long long value)
{
    char num[24];
    snprintf(num, sizeof num, "%lld", value);
    return mime_field(mime, name, num);
}

spmv_client_status spmv_client_generate(spmv_client *h, const char *kind, int64_t n, int64_t per_row,
                                        int64_t dense_len, uint64_t seed, const spmv_client_upload_options *opts,
                                        spmv_client_matrix **out)
{
    spmv_client_upload_options o = opts ? *opts : (spmv_client_upload_options){0};
    char sd[24];

    if (!h || !kind || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    spmvc_clear_error(h);
    o.progress = NULL; /* nothing to upload */
    snprintf(sd, sizeof sd, "%llu", (unsigned long long)seed);
    curl_mime *mime = curl_mime_init(h->curl);
    bool built = mime && mime_field(mime, "generate", kind) && mime_int(mime, "n", n) &&
                 (per_row < 0 || mime_int(mime, "per_row", per_row)) &&
                 (dense_len < 0 || mime_int(mime, "dense_len", dense_len)) && (!seed || mime_field(mime, "seed", sd));
    return upload_form(h, mime, built, &o, out);
}

spmv_client_status spmv_client_list(spmv_client *h, spmv_client_matrix_list **out)
{
    FETCH_LIST(spmv_client_matrix_list, spmv_client_matrix_list_free, "/v1/matrices", "matrices", &spmvc_matrix_kind);
}

spmv_client_status spmv_client_describe(spmv_client *h, const char *id, spmv_client_matrix **out)
{
    spmv_client_status st;
    if (!h || !out) return SPMV_CLIENT_ERR_INVALID;
    *out = NULL;
    spmvc_clear_error(h);
    if ((st = spmvc_check_id(h, id, "matrix")) != SPMV_CLIENT_OK) return st;
    request req = {.method = "GET", .collection = "matrices", .id = id};
    st = spmvc_request_item(h, &req, &spmvc_matrix_kind, (void **)out);
    remember(h, st, *out);
    return st;
}

spmv_client_status spmvc_matrix_dtype(spmv_client *h, const char *id, spmv_client_dtype *out)
{
    spmv_client_matrix *m = NULL;
    for (size_t i = 0; i < sizeof h->known / sizeof h->known[0]; i++)
        if (h->known[i].id[0] && strcmp(h->known[i].id, id) == 0) {
            *out = h->known[i].dtype;
            return SPMV_CLIENT_OK;
        }
    spmv_client_status st = spmv_client_describe(h, id, &m);
    if (st == SPMV_CLIENT_OK)
        *out = m->dtype;
    spmv_client_matrix_free(m);
    return st;
}

spmv_client_status spmv_client_delete(spmv_client *h, const char *id)
{
    return spmvc_delete_at(h, "matrices", id, spmvc_id_ok(id), "matrix id must be 1 to 63 characters");
}
