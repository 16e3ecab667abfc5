/* json.c — JSON conventions of the API on top of jansson.
 *
 * Numbers go out with 17 significant digits (every float64 round-trips);
 * JSON has no NaN or infinities, so those travel as the strings "NaN",
 * "Infinity" and "-Infinity", both ways. Vectors (x in, y out) can be
 * millions of values: y is written straight from the array with %.17g
 * instead of building a jansson array of that many nodes.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"

char *api_json_dump(const json_t *v, size_t *len)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_REAL_PRECISION(17) | JSON_PRESERVE_ORDER);
    if (s && len)
        *len = strlen(s);
    return s;
}

json_t *api_json_real(double v)
{
    if (isnan(v))
        return json_string("NaN");
    if (isinf(v))
        return json_string(v > 0 ? "Infinity" : "-Infinity");
    return json_real(v);
}

int api_json_to_double(const json_t *v, double *out)
{
    if (json_is_number(v)) {
        *out = json_number_value(v);
        return 0;
    }
    const char *s = json_string_value(v);
    if (!s)
        return -1;
    if (strcmp(s, "NaN") == 0)
        *out = NAN;
    else if (strcmp(s, "Infinity") == 0)
        *out = INFINITY;
    else if (strcmp(s, "-Infinity") == 0)
        *out = -INFINITY;
    else
        return -1;
    return 0;
}

static void write_number(FILE *f, double v)
{
    if (isnan(v))
        fputs("\"NaN\"", f);
    else if (isinf(v))
        fputs(v > 0 ? "\"Infinity\"" : "\"-Infinity\"", f);
    else
        fprintf(f, "%.17g", v);
}

void api_json_write_vector(FILE *f, spmv_dtype dtype, const void *v, int32_t n)
{
    fputc('[', f);
    for (int32_t i = 0; i < n; i++) {
        if (i)
            fputc(',', f);
        write_number(f, dtype == SPMV_FLOAT32 ? (double)((const float *)v)[i] : ((const double *)v)[i]);
    }
    fputc(']', f);
}

int api_json_int_field(const json_t *o, const char *key, int64_t def, int64_t min, int64_t max,
                       int64_t *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    /* 3.0 is accepted as 3: clients in languages without integers send it */
    double d = json_is_real(v) ? json_real_value(v) : 0;
    if (json_is_real(v) && (d != floor(d) || d < (double)INT64_MIN || d > (double)INT64_MAX))
        goto bad;
    int64_t x = json_is_integer(v) ? json_integer_value(v) : (int64_t)d;
    if (!json_is_integer(v) && !json_is_real(v))
        goto bad;
    if (x < min || x > max)
        goto bad;
    *out = x;
    return 0;
bad:
    snprintf(err, errlen, "`%s` must be an integer in %" PRId64 "..%" PRId64, key, min, max);
    return -1;
}

int api_json_bool_field(const json_t *o, const char *key, bool def, bool *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (!json_is_boolean(v)) {
        snprintf(err, errlen, "`%s` must be true or false", key);
        return -1;
    }
    *out = json_is_true(v);
    return 0;
}
