/* decode.c — parsing and checking spmv and bench requests (see decode.h).
 *
 * JSON goes through jansson with duplicate keys refused; integers given as
 * reals with no fraction (3.0) are taken, for clients in languages without
 * integers. Query-string integers are strict: digits (and a sign) only.
 * Messages name the field and the accepted range, since they are what a
 * client's developer reads first.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api/decode.h"

static int fail(api_fail *f, int status, const char *code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(api_fail *f, int status, const char *code, const char *fmt, ...)
{
    va_list ap;
    f->status = status;
    f->code = code;
    va_start(ap, fmt);
    vsnprintf(f->message, sizeof f->message, fmt, ap);
    va_end(ap);
    return -1;
}

void api_spmv_req_free(spmv_req *r)
{
    free(r->x);
    r->x = NULL;
}

/* ------------------------------------------------------------ values */

static int json_to_double(const json_t *v, double *out)
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

/* An integer field (absent: def); 3.0 counts as 3. */
static int json_int(const json_t *o, const char *key, int64_t def, int64_t min, int64_t max, int64_t *out,
                    api_fail *f)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    int64_t x;
    if (json_is_integer(v)) {
        x = json_integer_value(v);
    } else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
               fabs(json_real_value(v)) < 9.2e18) {
        x = (int64_t)json_real_value(v);
    } else {
        return fail(f, 400, "invalid_request", "`%s` must be an integer in %" PRId64 "..%" PRId64, key, min, max);
    }
    if (x < min || x > max)
        return fail(f, 400, "invalid_request", "`%s` %" PRId64 " is out of range %" PRId64 "..%" PRId64, key, x,
                    min, max);
    *out = x;
    return 0;
}

static int json_bool(const json_t *o, const char *key, bool def, bool *out, api_fail *f)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (!json_is_boolean(v))
        return fail(f, 400, "invalid_request", "`%s` must be true or false", key);
    *out = json_is_true(v);
    return 0;
}

/* "stat": which statistic the rates come from. s NULL: the default. */
static int stat_value(const char *s, spmv_stat *out, api_fail *f)
{
    *out = SPMV_STAT_MEDIAN;
    if (s && spmv_stat_parse(s, out) != SPMV_OK)
        return fail(f, 400, "invalid_request", "`stat` must be " SPMV_STAT_NAMES " (the statistic of the timed "
                    "runs that GFLOP/s and GB/s come from), not \"%.32s\"", s);
    return 0;
}

static int json_stat(const json_t *o, spmv_stat *out, api_fail *f)
{
    const json_t *v = json_object_get(o, "stat");
    if (v && !json_is_null(v) && !json_is_string(v))
        return fail(f, 400, "invalid_request", "`stat` must be a string, " SPMV_STAT_NAMES);
    return stat_value(json_string_value(v), out, f);
}

/* Strict integer text within [min, max]. */
static int parse_long(const char *s, long long min, long long max, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static bool is_param_name(const char *key)
{
    for (int id = 0; id < SPMV_PARAM_COUNT; id++)
        if (strcmp(spmv_param_get((spmv_param_id)id)->name, key) == 0)
            return true;
    return false;
}

static int param_in_range(const spmv_param_desc *pd, long long v, api_fail *f)
{
    if (v < pd->min || v > pd->max)
        return fail(f, 400, "invalid_parameter", "`%s` %lld is out of range %d..%d", pd->name, v, pd->min, pd->max);
    return 0;
}

/* ------------------------------------------------------------- spmv */

static int params_from_json(const json_t *o, spmv_params *p, api_fail *f)
{
    memset(p, 0, sizeof *p);
    for (int id = 0; id < SPMV_PARAM_COUNT; id++) {
        const spmv_param_desc *pd = spmv_param_get((spmv_param_id)id);
        json_t *v = json_object_get(o, pd->name);
        if (!v || json_is_null(v))
            continue;
        if (!json_is_integer(v))
            return fail(f, 400, "invalid_parameter", "`%s` must be an integer in %d..%d", pd->name, pd->min, pd->max);
        if (param_in_range(pd, json_integer_value(v), f))
            return -1;
        p->v[id] = (int32_t)json_integer_value(v);
    }
    return 0;
}

/* One column of numbers into buf (n values of dt). */
static int column_from_json(const json_t *a, int64_t n, spmv_dtype dt, const char *what, int32_t col, bool block,
                            void *buf, api_fail *f)
{
    for (int64_t i = 0; i < n; i++) {
        double v;
        if (json_to_double(json_array_get(a, (size_t)i), &v) != 0) {
            if (block)
                return fail(f, 400, "invalid_request",
                            "`%s[%d][%lld]` is not a number (nor \"NaN\", \"Infinity\", \"-Infinity\")", what, col,
                            (long long)i);
            return fail(f, 400, "invalid_request", "`%s[%lld]` is not a number (nor \"NaN\", \"Infinity\", \"-Infinity\")",
                        what, (long long)i);
        }
        if (dt == SPMV_FLOAT32 && spmv_float32_overflows(v))
            return fail(f, 422, "out_of_range", "`%s[%lld]` = %.17g is outside float32's range (|v| <= 3.40282347e+38): "
                        "it would be stored as infinity", what, (long long)i, v);
        if (dt == SPMV_FLOAT32)
            ((float *)buf)[i] = (float)v;
        else
            ((double *)buf)[i] = v;
    }
    return 0;
}

int api_values_from_json(const json_t *v, int64_t n, spmv_dtype dt, const char *what, void **out, int64_t *n_out,
                         int32_t *k_out, api_fail *f)
{
    if (!v)
        return fail(f, 400, "invalid_request", "`%s` is missing", what);
    if (!json_is_array(v))
        return fail(f, 400, "invalid_request", "`%s` must be an array of numbers or an array of k arrays", what);
    bool block = json_array_size(v) > 0 && json_is_array(json_array_get(v, 0));
    int32_t k = 1;
    int64_t len = (int64_t)json_array_size(v);
    if (block) {
        if (json_array_size(v) > SPMV_MAX_K)
            return fail(f, 400, "invalid_request", "`%s` holds %zu columns; the most is %d", what, json_array_size(v),
                        SPMV_MAX_K);
        k = (int32_t)json_array_size(v);
        len = (int64_t)json_array_size(json_array_get(v, 0));
        for (int32_t j = 0; j < k; j++) {
            const json_t *c = json_array_get(v, (size_t)j);
            if (!json_is_array(c) || (int64_t)json_array_size(c) != len)
                return fail(f, 400, "shape_mismatch", "`%s[%d]` must be an array of %lld numbers like `%s[0]`", what, j,
                            (long long)len, what);
        }
    }
    if (n >= 0 && len != n)
        return fail(f, 400, "shape_mismatch", "`%s` has %lld values a column; %lld are needed", what, (long long)len,
                    (long long)n);
    size_t vs = spmv_dtype_size(dt);
    void *buf = malloc((size_t)(len > 0 ? len : 1) * (size_t)k * vs);
    if (!buf)
        return fail(f, 500, "out_of_memory", "out of memory for `%s`", what);
    for (int32_t j = 0; j < k; j++)
        if (column_from_json(block ? json_array_get(v, (size_t)j) : v, len, dt, what, j, block,
                             (char *)buf + (size_t)j * (size_t)len * vs, f)) {
            free(buf);
            return -1;
        }
    *out = buf;
    *n_out = len;
    *k_out = k;
    return 0;
}

int api_vector_ref(const json_t *v, const char *what, char id[40], api_fail *f)
{
    if (!json_is_object(v))
        return 0;
    const json_t *s = json_object_get(v, "vector");
    if (!json_is_string(s) || json_object_size(v) != 1 || json_string_length(s) >= 40)
        return fail(f, 400, "invalid_request", "`%s` must be {\"vector\": \"<id>\"}", what);
    snprintf(id, 40, "%s", json_string_value(s));
    return 1;
}

int api_shm_ref(const json_t *v, const char *what, char name[SHM_NAME_MAX + 1], int64_t *offset, api_fail *f)
{
    char msg[256];
    if (!json_is_object(v) || !json_object_get(v, "shm"))
        return 0;
    const json_t *s = json_object_get(v, "shm"), *o = json_object_get(v, "offset");
    size_t keys = json_object_size(v);
    if (!json_is_string(s) || (o && !json_is_integer(o)) || keys != (o ? 2u : 1u))
        return fail(f, 400, "invalid_request", "`%s` must be {\"shm\": \"<region>\", \"offset\": <bytes>}", what);
    if (shm_name_check(json_string_value(s), msg, sizeof msg) != SHM_OK)
        return fail(f, 400, "invalid_request", "%s: %s", what, msg);
    *offset = o ? json_integer_value(o) : 0;
    if (*offset < 0)
        return fail(f, 400, "invalid_request", "%s: offset %lld must be >= 0", what, (long long)*offset);
    snprintf(name, SHM_NAME_MAX + 1, "%s", json_string_value(s));
    return 1;
}

static int real_field(const json_t *o, const char *key, double def, double *out, api_fail *f)
{
    const json_t *v = json_object_get(o, key);
    *out = def;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v) || !isfinite(json_number_value(v)))
        return fail(f, 400, "invalid_request", "`%s` must be a finite number", key);
    *out = json_number_value(v);
    return 0;
}

static int op_field(const char *s, bool *trans, api_fail *f)
{
    if (!s || strcmp(s, "n") == 0 || strcmp(s, "N") == 0)
        *trans = false;
    else if (strcmp(s, "t") == 0 || strcmp(s, "T") == 0)
        *trans = true;
    else
        return fail(f, 400, "invalid_request", "`op` must be \"n\" (A) or \"t\" (A transposed), not \"%.32s\"", s);
    return 0;
}

/* x inline (array, or k arrays) or resident; y resident or absent. */
static int operands_from_json(const json_t *o, int32_t cols, spmv_dtype dt, spmv_req *out, api_fail *f)
{
    const json_t *x = json_object_get(o, "x"), *y = json_object_get(o, "y"), *k = json_object_get(o, "k");
    int rc = api_shm_ref(x, "x", out->x_shm, &out->x_shm_offset, f);
    if (rc == 0)
        rc = api_vector_ref(x, "x", out->x_vector, f);
    if (rc < 0)
        return -1;
    if (k && !out->x_shm[0])
        return fail(f, 400, "invalid_request", "`k` is for an x in a shared-memory region; inline x and vectors "
                    "carry their own columns");
    if (k && (!json_is_integer(k) || json_integer_value(k) < 1 || json_integer_value(k) > SPMV_MAX_K))
        return fail(f, 400, "invalid_request", "`k` must be an integer in 1..%d", SPMV_MAX_K);
    if (k)
        out->k = (int32_t)json_integer_value(k);
    if (rc == 0) {
        int64_t n;
        if (api_values_from_json(x, cols, dt, "x", &out->x, &n, &out->k, f))
            return -1;
    }
    if (y && !json_is_null(y)) {
        rc = api_shm_ref(y, "y", out->y_shm, &out->y_shm_offset, f);
        if (rc == 0)
            rc = api_vector_ref(y, "y", out->y_vector, f);
        if (rc <= 0)
            return rc < 0 ? -1 : fail(f, 400, "invalid_request", "`y` must be {\"vector\": \"<id>\"} or {\"shm\": "
                                      "\"<region>\", \"offset\": <bytes>} (y comes back in the answer otherwise)");
    }
    if (out->beta != 0.0 && !out->y_vector[0])
        return fail(f, 400, "invalid_request", "`beta` %g needs y as a resident vector ({\"vector\": id}) to scale", out->beta);
    return 0;
}

static int check_known_keys(const json_t *o, const char *const *base, bool params, api_fail *f)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        bool known = params && is_param_name(key);
        for (int i = 0; !known && base[i]; i++)
            known = strcmp(key, base[i]) == 0;
        if (!known)
            return fail(f, 400, "invalid_request", "unknown field `%s`", key);
    }
    return 0;
}

static json_t *load_object(const char *body, size_t len, api_fail *f)
{
    json_error_t jerr;
    json_t *o = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &jerr);
    if (!o) {
        fail(f, 400, "invalid_json", "body is not valid JSON: line %d column %d: %s", jerr.line, jerr.column, jerr.text);
        return NULL;
    }
    if (!json_is_object(o)) {
        json_decref(o);
        fail(f, 400, "invalid_json", "body must be a JSON object");
        return NULL;
    }
    return o;
}

int api_decode_spmv_json(const char *body, size_t len, int32_t rows, int32_t cols, spmv_dtype dtype,
                         int64_t max_runs, spmv_req *out, api_fail *f)
{
    static const char *const keys[] = {"kernel", "x", "y", "k", "alpha", "beta", "op", "runs", "warmup", "stat",
                                       "verify", "async", NULL};
    int64_t runs, warmup;
    int rc = -1;
    memset(out, 0, sizeof *out);
    json_t *o = load_object(body, len, f);
    if (!o)
        return -1;
    if (check_known_keys(o, keys, true, f))
        goto out;
    json_t *kn = json_object_get(o, "kernel");
    if (kn && !json_is_null(kn)) {
        if (!json_is_string(kn) || json_string_length(kn) >= sizeof out->kernel) {
            fail(f, 400, "invalid_request", "`kernel` must be a kernel name (GET /v1/kernels lists them)");
            goto out;
        }
        snprintf(out->kernel, sizeof out->kernel, "%s", json_string_value(kn));
    }
    if (json_int(o, "runs", 1, 1, max_runs, &runs, f) || json_int(o, "warmup", 0, 0, max_runs, &warmup, f) ||
        json_stat(o, &out->stat, f) || json_bool(o, "verify", false, &out->verify, f) ||
        json_bool(o, "async", false, &out->async, f) || params_from_json(o, &out->params, f))
        goto out;
    out->runs = (int32_t)runs;
    out->warmup = (int32_t)warmup;
    out->k = 1;
    json_t *op = json_object_get(o, "op");
    if (op && !json_is_null(op) && !json_is_string(op)) {
        fail(f, 400, "invalid_request", "`op` must be \"n\" or \"t\"");
        goto out;
    }
    if (real_field(o, "alpha", 1.0, &out->alpha, f) || real_field(o, "beta", 0.0, &out->beta, f) ||
        op_field(op ? json_string_value(op) : NULL, &out->trans, f))
        goto out;
    /* with op t, x has one value per row of the matrix */
    rc = operands_from_json(o, out->trans ? rows : cols, dtype, out, f);
out:
    json_decref(o);
    return rc;
}

static int query_int(api_lookup_fn get, void *ctx, const char *key, long long def, long long min, long long max,
                     int32_t *out, api_fail *f)
{
    const char *s = get(ctx, key);
    long long v = def;
    if (s && parse_long(s, min, max, &v) != 0)
        return fail(f, 400, "invalid_request", "`%s` must be an integer in %lld..%lld, not \"%.64s\"", key, min, max, s);
    *out = (int32_t)v;
    return 0;
}

static int query_bool(api_lookup_fn get, void *ctx, const char *key, bool *out, api_fail *f)
{
    const char *s = get(ctx, key);
    if (!s)
        return 0;
    if (strcmp(s, "true") == 0 || strcmp(s, "1") == 0 || strcmp(s, "") == 0)
        *out = true;
    else if (strcmp(s, "false") == 0 || strcmp(s, "0") == 0)
        *out = false;
    else
        return fail(f, 400, "invalid_request", "`%s` must be true or false, not \"%.64s\"", key, s);
    return 0;
}

static int query_real(api_lookup_fn get, void *ctx, const char *key, double def, double *out, api_fail *f)
{
    const char *s = get(ctx, key);
    char *end;
    *out = def;
    if (!s)
        return 0;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v))
        return fail(f, 400, "invalid_request", "`%s` must be a finite number, not \"%.64s\"", key, s);
    *out = v;
    return 0;
}

int api_query_shm(api_lookup_fn get, void *ctx, const char *what, char name[SHM_NAME_MAX + 1], int64_t *offset,
                  api_fail *f)
{
    char key[16], msg[256];
    snprintf(key, sizeof key, "%s_shm", what);
    const char *s = get(ctx, key);
    snprintf(key, sizeof key, "%s_offset", what);
    const char *o = get(ctx, key);
    long long v = 0;
    if (o && !s)
        return fail(f, 400, "invalid_request", "`%s` without `%s_shm`", key, what);
    if (!s)
        return 0;
    if (shm_name_check(s, msg, sizeof msg) != SHM_OK)
        return fail(f, 400, "invalid_request", "`%s_shm`: %s", what, msg);
    if (o && parse_long(o, 0, INT64_MAX, &v) != 0)
        return fail(f, 400, "invalid_request", "`%s` must be a byte offset >= 0, not \"%.64s\"", key, o);
    snprintf(name, SHM_NAME_MAX + 1, "%s", s);
    *offset = v;
    return 0;
}

static int query_id(api_lookup_fn get, void *ctx, const char *key, char id[40], api_fail *f)
{
    const char *s = get(ctx, key);
    if (!s)
        return 0;
    if (strlen(s) >= 40 || !*s)
        return fail(f, 400, "invalid_request", "`%s` must be a vector id, not \"%.64s\"", key, s);
    snprintf(id, 40, "%s", s);
    return 0;
}

int api_decode_spmv_query(api_lookup_fn get, void *ctx, int64_t max_runs, spmv_req *out, api_fail *f)
{
    memset(out, 0, sizeof *out);
    const char *kn = get(ctx, "kernel");
    if (kn) {
        if (strlen(kn) >= sizeof out->kernel)
            return fail(f, 400, "unknown_kernel", "no kernel \"%.64s...\"", kn);
        snprintf(out->kernel, sizeof out->kernel, "%s", kn);
    }
    if (query_int(get, ctx, "runs", 1, 1, max_runs, &out->runs, f) ||
        query_int(get, ctx, "warmup", 0, 0, max_runs, &out->warmup, f) || stat_value(get(ctx, "stat"), &out->stat, f) ||
        query_bool(get, ctx, "verify", &out->verify, f) || query_bool(get, ctx, "async", &out->async, f) ||
        query_int(get, ctx, "k", 1, 1, SPMV_MAX_K, &out->k, f) || op_field(get(ctx, "op"), &out->trans, f) ||
        query_real(get, ctx, "alpha", 1.0, &out->alpha, f) || query_real(get, ctx, "beta", 0.0, &out->beta, f) ||
        query_id(get, ctx, "x", out->x_vector, f) || query_id(get, ctx, "y", out->y_vector, f) ||
        api_query_shm(get, ctx, "x", out->x_shm, &out->x_shm_offset, f) ||
        api_query_shm(get, ctx, "y", out->y_shm, &out->y_shm_offset, f))
        return -1;
    if ((out->x_shm[0] && out->x_vector[0]) || (out->y_shm[0] && out->y_vector[0]))
        return fail(f, 400, "invalid_request", "an operand is a vector (?x=, ?y=) or in a region (?x_shm=, ?y_shm=), not both");
    if (out->beta != 0.0 && !out->y_vector[0])
        return fail(f, 400, "invalid_request", "`beta` %g needs y as a resident vector (?y=ID) to scale", out->beta);
    for (int id = 0; id < SPMV_PARAM_COUNT; id++) {
        const spmv_param_desc *pd = spmv_param_get((spmv_param_id)id);
        const char *s = get(ctx, pd->name);
        long long v;
        if (!s)
            continue;
        if (parse_long(s, INT32_MIN, INT32_MAX, &v) != 0)
            return fail(f, 400, "invalid_parameter", "`%s` must be an integer in %d..%d, not \"%.64s\"", pd->name,
                        pd->min, pd->max, s);
        if (param_in_range(pd, v, f))
            return -1;
        out->params.v[id] = (int32_t)v;
    }
    return 0;
}

int api_check_x_binary(size_t len, int32_t cols, int32_t k, spmv_dtype dtype, api_fail *f)
{
    size_t want = (size_t)(cols > 0 ? cols : 0) * (size_t)k * spmv_dtype_size(dtype);
    if (len != want)
        return fail(f, 400, "shape_mismatch", "x has %zu bytes; %d column%s of %d %s values (%zu bytes) are needed", len,
                    k, k == 1 ? "" : "s", cols, spmv_dtype_name(dtype), want);
    return 0;
}

/* ------------------------------------------------------------ bench */

static int int_list(const json_t *o, const char *key, const int32_t *def, size_t ndef, int32_t lo, int32_t hi,
                    size_t max, int32_t *out, size_t *n, api_fail *f)
{
    json_t *a = json_object_get(o, key);
    if (!a) {
        if (ndef)
            memcpy(out, def, ndef * sizeof *def);
        *n = ndef;
        return 0;
    }
    if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > max)
        return fail(f, 400, "invalid_request", "`%s` must be a list of 1 to %zu integers", key, max);
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
            return fail(f, 400, "invalid_parameter", "`%s[%zu]` must be an integer in %d..%d", key, i, lo, hi);
        out[i] = (int32_t)json_integer_value(v);
    }
    *n = json_array_size(a);
    return 0;
}

static int kernel_list(const json_t *o, bench_req *out, api_fail *f)
{
    json_t *list = json_object_get(o, "kernels");
    if (!list)
        return 0;
    if (!json_is_array(list) || json_array_size(list) == 0 || json_array_size(list) > API_BENCH_MAX_KERNELS)
        return fail(f, 400, "invalid_request", "`kernels` must be a list of 1 to %d kernel names", API_BENCH_MAX_KERNELS);
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v) {
        const char *name = json_string_value(v);
        const spmv_kernel *k = spmv_kernel_find(name);
        if (!k)
            return fail(f, 400, "unknown_kernel", "`kernels[%zu]`: no kernel \"%.64s\"", i, name ? name : "(not a string)");
        if (k->op != SPMV_OP_SPMV)
            return fail(f, 400, "unknown_kernel", "`kernels[%zu]`: %s is a %s kernel; bench runs spmv kernels", i,
                        k->name, spmv_op_name(k->op));
        out->kernels[out->nkernels++] = k;
    }
    return 0;
}

/* "threads": a list of thread counts, or "sweep" (1..the host's
 * threads, which the route knows); absent: no sweep. */
static int threads_list(const json_t *o, bench_req *out, api_fail *f)
{
    const spmv_param_desc *pt = spmv_param_get(SPMV_PARAM_THREADS);
    const json_t *v = json_object_get(o, "threads");
    if (json_is_string(v) && strcmp(json_string_value(v), "sweep") == 0) {
        out->threads_sweep = true;
        return 0;
    }
    if (v && !json_is_array(v))
        return fail(f, 400, "invalid_request", "`threads` must be a list of 1 to %d thread counts (%d..%d, 0: the "
                    "kernel's default) or \"sweep\" (1..the host's threads)", API_BENCH_MAX_THREADS, pt->min, pt->max);
    return int_list(o, "threads", NULL, 0, pt->min, pt->max, API_BENCH_MAX_THREADS, out->threads, &out->nthreads, f);
}

int api_decode_bench_json(const char *body, size_t len, int64_t max_runs, bench_req *out, api_fail *f)
{
    static const char *const keys[] = {"kernels", "runs", "warmup", "block_sizes", "hack_sizes", "threads", "stat",
                                       "verify", "seed", "async", NULL};
    static const int32_t def_bs[] = {32, 64, 128, 256, 512, 1024};
    static const int32_t def_hs[] = {16, 32, 64};
    const spmv_param_desc *pb = spmv_param_get(SPMV_PARAM_BLOCK_SIZE), *ph = spmv_param_get(SPMV_PARAM_HACK_SIZE);
    int64_t runs, warmup, seed;
    int rc = -1;
    memset(out, 0, sizeof *out);
    json_t *o = len ? load_object(body, len, f) : json_object();
    if (!o)
        return -1;
    if (check_known_keys(o, keys, false, f) || kernel_list(o, out, f) ||
        int_list(o, "block_sizes", def_bs, 6, pb->min, pb->max, API_BENCH_MAX_SWEEP, out->block_sizes,
                 &out->nblock_sizes, f) ||
        int_list(o, "hack_sizes", def_hs, 3, ph->min, ph->max, API_BENCH_MAX_SWEEP, out->hack_sizes,
                 &out->nhack_sizes, f) ||
        threads_list(o, out, f) || json_stat(o, &out->stat, f) ||
        json_int(o, "runs", max_runs < 10 ? max_runs : 10, 1, max_runs, &runs, f) ||
        json_int(o, "warmup", max_runs < 2 ? max_runs : 2, 0, max_runs, &warmup, f) ||
        json_int(o, "seed", 0, 0, INT64_MAX, &seed, f) || json_bool(o, "verify", true, &out->verify, f) ||
        json_bool(o, "async", true, &out->async, f))
        goto out;
    out->runs = (int32_t)runs;
    out->warmup = (int32_t)warmup;
    out->seed = (uint64_t)seed;
    rc = 0;
out:
    json_decref(o);
    return rc;
}

int api_check_work_per(int64_t per, int64_t nnz, int64_t execs, int64_t max_work, api_fail *f)
{
    if (per < 1)
        per = 1;
    if (execs < 0 || execs > max_work / per)
        return fail(f, 400, "too_much_work",
                    "the request asks for %" PRId64 " kernel runs of a matrix with %" PRId64 " entries, %" PRId64
                    " units of work a run (cpu.csr.chunked: plus the rows once per pass), over max_request_work (%"
                    PRId64 " multiply-adds); ask for fewer runs or kernels, or a wider span",
                    execs, nnz, per, max_work);
    return 0;
}

int api_check_work(int64_t nnz, int32_t rows, int64_t execs, int64_t max_work, api_fail *f)
{
    return api_check_work_per(nnz > rows ? nnz : rows, nnz, execs, max_work, f);
}
