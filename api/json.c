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

json_t *api_stats_json(const spmv_stats *s)
{
    return json_pack("{s:i, s:i, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "runs", s->runs, "warmup", s->warmup,
                     "mean_ms", api_json_real(s->mean_ms), "stddev_ms", api_json_real(s->stddev_ms),
                     "min_ms", api_json_real(s->min_ms), "median_ms", api_json_real(s->median_ms),
                     "max_ms", api_json_real(s->max_ms), "gflops", api_json_real(s->gflops),
                     "gbps", api_json_real(s->gbps));
}

json_t *api_params_json(const spmv_kernel *k, const spmv_params *p)
{
    json_t *o = json_object();
    for (int id = 0; id < SPMV_PARAM_COUNT; id++)
        if (k->params & (1u << id))
            json_object_set_new(o, spmv_param_get((spmv_param_id)id)->name, json_integer(p->v[id]));
    return o;
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

void api_json_write_columns(FILE *f, spmv_dtype dtype, const void *v, int32_t n, int32_t k)
{
    if (k <= 1) {
        api_json_write_vector(f, dtype, v, n);
        return;
    }
    size_t col = (size_t)n * spmv_dtype_size(dtype);
    for (int32_t j = 0; j < k; j++) {
        fputc(j ? ',' : '[', f);
        api_json_write_vector(f, dtype, (const char *)v + (size_t)j * col, n);
    }
    fputc(']', f);
}

char *api_json_values_answer(const char *key, spmv_dtype dtype, const void *v, int32_t n, int32_t k, json_t *rest,
                             size_t *len)
{
    size_t rlen = 0;
    char *rtext = rest ? api_json_dump(rest, &rlen) : NULL;
    json_decref(rest);
    char *text = NULL;
    FILE *f = rtext ? open_memstream(&text, len) : NULL;
    if (f) {
        fputc('{', f);
        if (v) {
            fprintf(f, "\"%s\":", key);
            api_json_write_columns(f, dtype, v, n, k);
            if (rlen > 2)
                fputc(',', f);
        }
        fwrite(rtext + 1, 1, rlen - 1, f); /* the object without its '{' */
        fputc('\n', f);
        fclose(f);
    }
    free(rtext);
    return text;
}
