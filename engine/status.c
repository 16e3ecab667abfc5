/* status.c — status codes, error detail and the small enums' names.
 *
 * Everything here is pure lookup: the engine's one table of status names
 * (spmv_strerror), the spmv_error filler every module reports through, and
 * the text forms of dtypes, formats and the packed formats' value modes
 * that the API and the docs share.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "spmv.h"

const char *spmv_strerror(int status)
{
    switch (status) {
    case SPMV_OK: return "success";
    case SPMV_ERR_NOMEM: return "out of host memory";
    case SPMV_ERR_INVALID: return "invalid argument";
    case SPMV_ERR_PARSE: return "malformed Matrix Market input";
    case SPMV_ERR_LIMIT: return "size limit exceeded";
    case SPMV_ERR_UNSUPPORTED: return "unsupported input";
    case SPMV_ERR_IO: return "input/output error";
    case SPMV_ERR_UNAVAILABLE: return "not available on this build or host";
    case SPMV_ERR_DEVICE: return "device error";
    case SPMV_ERR_DEVICE_MEMORY: return "device memory full";
    case SPMV_ERR_CORRUPT: return "corrupt data";
    case SPMV_ERR_NOT_FOUND: return "not found";
    case SPMV_ERR_SHAPE: return "shape mismatch";
    default: return "unknown status";
    }
}

int spmv_error_set(spmv_error *err, int status, int64_t line, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        err->status = status;
        err->line = line;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return status;
}

int spmv_format_index(spmv_format f)
{
    int i = 0;
    while (i < SPMV_FORMAT_COUNT && (1u << i) != (unsigned)f)
        i++;
    return i;
}

size_t spmv_dtype_size(spmv_dtype dtype) { return dtype == SPMV_FLOAT32 ? 4 : 8; }

const char *spmv_dtype_name(spmv_dtype dtype) { return dtype == SPMV_FLOAT32 ? "float32" : "float64"; }

int spmv_dtype_parse(const char *name, spmv_dtype *out)
{
    static const struct { const char *name; spmv_dtype dtype; } names[] = {
        {"float64", SPMV_FLOAT64}, {"f64", SPMV_FLOAT64}, {"double", SPMV_FLOAT64},
        {"float32", SPMV_FLOAT32}, {"f32", SPMV_FLOAT32}, {"float", SPMV_FLOAT32},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(name, names[i].name) == 0) {
            *out = names[i].dtype;
            return SPMV_OK;
        }
    return SPMV_ERR_INVALID;
}

static const char *const format_names[SPMV_FORMAT_COUNT] = {"coo", "csr",  "ell",   "hll",   "hyb",
                                                            "pcsr", "psell", "spsell", "pbsr"};

const char *spmv_format_name(spmv_format f)
{
    for (unsigned i = 0; i < SPMV_FORMAT_COUNT; i++)
        if (f == (1u << i))
            return format_names[i];
    return "?";
}

const char *spmv_vcode_name(spmv_vcode mode)
{
    switch (mode) {
    case SPMV_VCODE_RAW: return "raw";
    case SPMV_VCODE_CONST: return "const";
    case SPMV_VCODE_U8: return "u8";
    case SPMV_VCODE_U16: return "u16";
    case SPMV_VCODE_F32: return "f32";
    }
    return "?";
}

int spmv_formats_parse(const char *list, unsigned *mask, spmv_error *err)
{
    unsigned m = 0;
    const char *p = list;
    while (*p) {
        size_t n = strcspn(p, ", ");
        if (n > 0) {
            unsigned i;
            for (i = 0; i < SPMV_FORMAT_COUNT; i++)
                if (strlen(format_names[i]) == n && strncasecmp(p, format_names[i], n) == 0)
                    break;
            if (i == SPMV_FORMAT_COUNT)
                return spmv_error_set(err, SPMV_ERR_INVALID, 0,
                                      "unknown format '%.*s' in formats (expected coo, csr, ell, hll, hyb, pcsr, psell, "
                                      "spsell, pbsr)",
                                      (int)(n > 32 ? 32 : n), p);
            m |= 1u << i;
        }
        p += n;
        p += strspn(p, ", ");
    }
    *mask = m;
    return SPMV_OK;
}
