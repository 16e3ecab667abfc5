/* json.c — JSON conventions of the API on top of jansson.
 *
 * A number goes out in the shortest form that reads back as the same
 * float64 (0.1 as 0.1, not 0.10000000000000001), except measurements: a
 * member named *_ms or *_s (a time), gflops, gbps, speedup,
 * ratio_cusparse or efficiency is rounded to six significant digits, all a
 * timer's reading carries. So the answer is written by daemon/jsondump.c,
 * walking the jansson tree, rather than by json_dumps, whose %.17g knows
 * neither (the job registry writes its envelopes with it too). JSON
 * has no NaN or infinities, so those travel as the strings "NaN",
 * "Infinity" and "-Infinity", both ways. Vectors (x in, y out) can be
 * millions of values: y is written straight from the array with %.17g
 * instead of building a jansson array of that many nodes, into one buffer
 * of its bound. Both ways JSON of values is bounded by
 * max_job_result_bytes before the memory is taken: an answer by its bound
 * (25 bytes a value), a body by the tree jansson would build of it (48
 * bytes a value: ten times the text of short numbers).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "daemon/jsondump.h"

char *api_json_dump(const json_t *v, size_t *len) { return spmvd_json_dump(v, len); }

/* The longest value written: "-2.2250738585072014e-308" (%.17g), or "-Infinity" quoted. */
#define JSON_VALUE_MAX 24

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
    return json_pack("{s:i, s:i, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:s}", "runs", s->runs, "warmup", s->warmup,
                     "mean_ms", api_json_real(s->mean_ms), "stddev_ms", api_json_real(s->stddev_ms),
                     "min_ms", api_json_real(s->min_ms), "median_ms", api_json_real(s->median_ms),
                     "max_ms", api_json_real(s->max_ms), "gflops", api_json_real(s->gflops),
                     "gbps", api_json_real(s->gbps), "stat", spmv_stat_name(s->stat));
}

json_t *api_params_json(const spmv_kernel *k, const spmv_params *p, const matrix *m)
{
    json_t *o = json_object();
    for (int id = 0; id < SPMV_PARAM_COUNT; id++) {
        int32_t v = p->v[id];
        if (id == SPMV_PARAM_HACK_SIZE && v == 0 && m) /* 0: the matrix's own, which every HLL kernel then uses */
            v = m->host.hack_size;
        if (k->params & (1u << id))
            json_object_set_new(o, spmv_param_get((spmv_param_id)id)->name, json_integer(v));
    }
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

/* One value as write_number writes it, into p (room for JSON_VALUE_MAX). */
static size_t put_number(char *p, double v)
{
    if (isnan(v))
        return (size_t)sprintf(p, "\"NaN\"");
    if (isinf(v))
        return (size_t)sprintf(p, v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    return (size_t)sprintf(p, "%.17g", v);
}

static size_t put_columns(char *p, spmv_dtype dtype, const void *v, int32_t n, int32_t k)
{
    char *q = p;
    for (int32_t j = 0; j < (k > 1 ? k : 1); j++) {
        if (k > 1)
            *q++ = j ? ',' : '[';
        *q++ = '[';
        const char *col = (const char *)v + (size_t)j * (size_t)n * spmv_dtype_size(dtype);
        for (int32_t i = 0; i < n; i++) {
            if (i)
                *q++ = ',';
            q += put_number(q, dtype == SPMV_FLOAT32 ? (double)((const float *)col)[i] : ((const double *)col)[i]);
        }
        *q++ = ']';
    }
    if (k > 1)
        *q++ = ']';
    return (size_t)(q - p);
}

/* What jansson holds a number in as a node: the node (a json_real_t, 24
 * bytes), its allocation's header and an array slot, rounded up. */
#define JSON_NODE_BYTES 48

bool api_json_body_fits(request *r)
{
    const char *p = r->body, *end = r->body ? r->body + r->body_len : NULL;
    int64_t values = 1; /* commas + 1 counts every element at least (one in a string too: an overestimate) */
    while (p && (p = memchr(p, ',', (size_t)(end - p))) != NULL) {
        values++;
        p++;
    }
    int64_t cost = values * JSON_NODE_BYTES, budget = atomic_load(&r->d->limits.max_job_result_bytes);
    if (cost <= budget)
        return true;
    api_error(r, 422, "too_large", "a JSON body of %lld values would take about %lld bytes as a tree, over "
              "max_job_result_bytes (%lld): send the values binary (Content-Type: application/octet-stream) or as a "
              "resident vector", (long long)values, (long long)cost, (long long)budget);
    return false;
}

int api_known_fields(request *r, const json_t *o, const char *const *keys)
{
    const char *key;
    json_t *v;
    if (!json_is_object(o))
        return 0;
    json_object_foreach((json_t *)o, key, v) {
        bool known = false;
        for (int i = 0; keys[i] && !known; i++)
            known = strcmp(key, keys[i]) == 0;
        if (!known) {
            api_error(r, 400, "invalid_request", "unknown field `%s`", key);
            return -1;
        }
    }
    return 0;
}

int64_t api_json_values_bound(int64_t n, int32_t k)
{
    int64_t cols = k > 1 ? k : 1;
    return n * cols * (JSON_VALUE_MAX + 1) + 2 * cols + 64;
}

bool api_json_values_fit(request *r, int64_t n, int32_t k, const char *what)
{
    int64_t bound = api_json_values_bound(n, k), budget = atomic_load(&r->d->limits.max_job_result_bytes);
    if (bound <= budget)
        return true;
    api_error(r, 422, "too_large", "%s: %lld values as JSON may take %lld bytes, over max_job_result_bytes (%lld): ask "
              "for them binary (Accept: application/octet-stream)", what, (long long)n * (k > 1 ? k : 1),
              (long long)bound, (long long)budget);
    return false;
}

/* Written into one buffer sized for the longest values (no stream that
 * doubles as it grows), then trimmed to what was written. */
char *api_json_values_answer(const char *key, spmv_dtype dtype, const void *v, int32_t n, int32_t k, json_t *rest,
                             size_t *len)
{
    size_t rlen = 0;
    char *rtext = rest ? api_json_dump(rest, &rlen) : NULL;
    json_decref(rest);
    size_t room = rlen + strlen(key) + 8 + (v ? (size_t)api_json_values_bound(n, k) : 0);
    char *text = rtext ? malloc(room) : NULL, *q = text;
    if (text) {
        *q++ = '{';
        if (v) {
            q += sprintf(q, "\"%s\":", key);
            q += put_columns(q, dtype, v, n, k);
            if (rlen > 2)
                *q++ = ',';
        }
        memcpy(q, rtext + 1, rlen - 1); /* the object without its '{' */
        q += rlen - 1;
        *q++ = '\n';
        *q = '\0';
        *len = (size_t)(q - text);
        char *fit = realloc(text, *len + 1);
        text = fit ? fit : text;
    }
    free(rtext);
    return text;
}
