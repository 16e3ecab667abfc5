/* errors.c — building answers, errors above all.
 *
 * Every error is {"error":{"code":"...","message":"..."}} with the status
 * that fits; the engine's spmv_status values map to one status and code
 * each here, in one table, so a reader finds what a 422 or a 507 means in
 * one place. 503 answers carry Retry-After.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"

void api_header(request *r, const char *name, const char *value)
{
    if (r->resp)
        MHD_add_response_header(r->resp, name, value);
}

void api_header_json(request *r, const char *name, json_t *v)
{
    char *text = v ? api_json_dump(v, NULL) : NULL;
    json_decref(v);
    if (text)
        api_header(r, name, text);
    free(text);
}

static void set_response(request *r, int status, struct MHD_Response *resp, size_t len)
{
    if (r->resp)
        MHD_destroy_response(r->resp);
    r->resp = resp;
    r->status = status;
    r->resp_bytes = len;
}

void api_bytes(request *r, int status, const char *content_type, void *data, size_t len)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(data);
        return;
    }
    set_response(r, status, resp, len);
    if (content_type)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
}

void api_json_text(request *r, char *text, size_t len)
{
    if (!text)
        api_error(r, 500, "out_of_memory", "out of memory writing the answer");
    else
        api_bytes(r, 200, "application/json", text, len);
}

void api_file(request *r, int status, const char *content_type, int fd, uint64_t size)
{
    struct MHD_Response *resp = MHD_create_response_from_fd64(size, fd);
    if (!resp) {
        close(fd);
        api_error(r, 500, "out_of_memory", "out of memory answering a file");
        return;
    }
    set_response(r, status, resp, (size_t)size);
    if (content_type)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
}

static void put_back(void *cls) { bufpool_put(cls); }

void api_bytes_pooled(request *r, int status, const char *content_type, bufpool_buf *b, size_t len)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback_cls(len, b->ptr, put_back, b);
    if (!resp) {
        bufpool_put(b);
        return;
    }
    set_response(r, status, resp, len);
    if (content_type)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
}

void api_json(request *r, int status, json_t *body)
{
    size_t len = 0;
    char *text = body ? api_json_dump(body, &len) : NULL;
    json_decref(body);
    if (!text) {
        static const char oom[] = "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}";
        struct MHD_Response *resp = MHD_create_response_from_buffer(sizeof oom - 1, (void *)oom,
                                                                    MHD_RESPMEM_PERSISTENT);
        if (resp) {
            set_response(r, 500, resp, sizeof oom - 1);
            MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        }
        return;
    }
    /* a trailing newline keeps `curl` output tidy in a terminal */
    char *nl = realloc(text, len + 2);
    if (nl) {
        text = nl;
        text[len++] = '\n';
        text[len] = '\0';
    }
    api_bytes(r, status, "application/json", text, len);
}

json_t *api_error_body(const char *code, const char *message)
{
    return json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", message);
}

void api_error(request *r, int status, const char *code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *body = api_error_body(code, msg);
    if (!body) /* the message was not valid UTF-8 (echoed input): say so plainly */
        body = api_error_body(code, "request refused (the detail is not valid UTF-8)");
    api_json(r, status, body);
    r->failed = true;
    if (status == 503 || status == 429)
        api_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
}

int api_status_of(int st, const char **code)
{
    static const struct { int st, http; const char *code; } map[] = {
        {SPMV_ERR_NOMEM, 500, "out_of_memory"},
        {SPMV_ERR_INVALID, 400, "invalid_request"},
        {SPMV_ERR_PARSE, 422, "bad_matrix"},
        {SPMV_ERR_LIMIT, 422, "too_large"},
        {SPMV_ERR_UNSUPPORTED, 422, "unsupported_matrix"},
        {SPMV_ERR_IO, 500, "io_error"},
        {SPMV_ERR_UNAVAILABLE, 409, "unavailable"},
        {SPMV_ERR_DEVICE, 500, "device_error"},
        {SPMV_ERR_DEVICE_MEMORY, 507, "device_memory_full"},
        {SPMV_ERR_CORRUPT, 500, "corrupt"},
        {SPMV_ERR_NOT_FOUND, 404, "not_found"},
        {SPMV_ERR_SHAPE, 400, "shape_mismatch"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (map[i].st == st) {
            *code = map[i].code;
            return map[i].http;
        }
    *code = "internal";
    return 500;
}

void api_error_spmv(request *r, int st, const spmv_error *err)
{
    const char *code;
    int http = api_status_of(st, &code);
    api_error(r, http, code, "%s", err && err->message[0] ? err->message : spmv_strerror(st));
}

void api_error_shutting_down(request *r) { api_error(r, 503, "shutting_down", "the daemon is shutting down"); }

void api_error_submit(request *r, worker *w, int rc)
{
    if (rc == SPMV_ERR_LIMIT)
        api_error(r, 503, "queue_full", "the %s queue is full (%zu waiting); retry later", w->name,
                  queue_depth(&w->queue));
    else
        api_error_shutting_down(r);
}

void api_error_task(request *r, int rc, const spmv_error *err)
{
    if (rc == SPMV_ERR_UNAVAILABLE && atomic_load(&r->d->draining))
        api_error_shutting_down(r);
    else
        api_error_spmv(r, rc, err);
}
