/* json.c — JSON conventions of the API on top of jansson.
 *
 * Numbers go out with 17 significant digits (every float64 round-trips);
 * JSON has no NaN or infinities, so those travel as the strings "NaN",
 * "Infinity" and "-Infinity", both ways. Vectors (x in, y out) can be
 * millions of values: y is written straight from the array with %.17g
 * instead of building a jansson array of that many nodes.
 */
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
