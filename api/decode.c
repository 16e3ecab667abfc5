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

static int x_from_json(const json_t *x, int32_t cols, spmv_dtype dt, void **out, api_fail *f)
{
    if (!x)
        return fail(f, 400, "invalid_request", "`x` is missing");
    if (!json_is_array(x))
        return fail(f, 400, "invalid_request", "`x` must be an array of %d numbers", cols);
    if (json_array_size(x) != (size_t)cols)
        return fail(f, 400, "shape_mismatch", "`x` has %zu values; the matrix has %d columns", json_array_size(x), cols);
    void *buf = malloc((size_t)(cols > 0 ? cols : 1) * spmv_dtype_size(dt));
    if (!buf)
        return fail(f, 500, "out_of_memory", "out of memory for x");
    for (int32_t j = 0; j < cols; j++) {
        double v;
        if (json_to_double(json_array_get(x, (size_t)j), &v) != 0) {
            free(buf);
            return fail(f, 400, "invalid_request", "`x[%d]` is not a number (nor \"NaN\", \"Infinity\", \"-Infinity\")", j);
        }
        if (dt == SPMV_FLOAT32)
            ((float *)buf)[j] = (float)v;
        else
            ((double *)buf)[j] = v;
    }
    *out = buf;
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

int api_decode_spmv_json(const char *body, size_t len, int32_t cols, spmv_dtype dtype, int64_t max_runs,
                         spmv_req *out, api_fail *f)
{
    static const char *const keys[] = {"kernel", "x", "runs", "warmup", "verify", "async", NULL};
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
        json_bool(o, "verify", false, &out->verify, f) || json_bool(o, "async", false, &out->async, f) ||
        params_from_json(o, &out->params, f))
        goto out;
    out->runs = (int32_t)runs;
    out->warmup = (int32_t)warmup;
    rc = x_from_json(json_object_get(o, "x"), cols, dtype, &out->x, f);
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
        query_int(get, ctx, "warmup", 0, 0, max_runs, &out->warmup, f) ||
        query_bool(get, ctx, "verify", &out->verify, f) || query_bool(get, ctx, "async", &out->async, f))
        return -1;
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

int api_check_x_binary(size_t len, int32_t cols, spmv_dtype dtype, api_fail *f)
{
    size_t want = (size_t)(cols > 0 ? cols : 0) * spmv_dtype_size(dtype);
    if (len != want)
        return fail(f, 400, "shape_mismatch", "x has %zu bytes; the matrix has %d columns of %s (%zu bytes)", len,
                    cols, spmv_dtype_name(dtype), want);
    return 0;
}

/* ------------------------------------------------------------ bench */

static int int_list(const json_t *o, const char *key, const int32_t *def, size_t ndef, int32_t lo, int32_t hi,
                    int32_t *out, size_t *n, api_fail *f)
{
    json_t *a = json_object_get(o, key);
    if (!a) {
        memcpy(out, def, ndef * sizeof *def);
        *n = ndef;
        return 0;
    }
    if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > API_BENCH_MAX_SWEEP)
        return fail(f, 400, "invalid_request", "`%s` must be a list of 1 to %d integers", key, API_BENCH_MAX_SWEEP);
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

int api_decode_bench_json(const char *body, size_t len, int64_t max_runs, bench_req *out, api_fail *f)
{
    static const char *const keys[] = {"kernels", "runs", "warmup", "block_sizes", "hack_sizes", "verify", "seed",
                                       "async", NULL};
    static const int32_t def_bs[] = {32, 64, 128, 256, 512, 1024};
    static const int32_t def_hs[] = {16, 32, 64};
    const spmv_param_desc *pb = spmv_param_get(SPMV_PARAM_BLOCK_SIZE), *ph = spmv_param_get(SPMV_PARAM_HACK_SIZE);
    int64_t runs, warmup, seed;
    bool async; /* SPEC §6 lets any request say "async"; a bench is always a job, so it is checked and ignored */
    int rc = -1;
    memset(out, 0, sizeof *out);
    json_t *o = len ? load_object(body, len, f) : json_object();
    if (!o)
        return -1;
    if (check_known_keys(o, keys, false, f) || kernel_list(o, out, f) ||
        int_list(o, "block_sizes", def_bs, 6, pb->min, pb->max, out->block_sizes, &out->nblock_sizes, f) ||
        int_list(o, "hack_sizes", def_hs, 3, ph->min, ph->max, out->hack_sizes, &out->nhack_sizes, f) ||
        json_int(o, "runs", max_runs < 10 ? max_runs : 10, 1, max_runs, &runs, f) ||
        json_int(o, "warmup", max_runs < 2 ? max_runs : 2, 0, max_runs, &warmup, f) ||
        json_int(o, "seed", 0, 0, INT64_MAX, &seed, f) || json_bool(o, "verify", true, &out->verify, f) ||
        json_bool(o, "async", true, &async, f))
        goto out;
    out->runs = (int32_t)runs;
    out->warmup = (int32_t)warmup;
    out->seed = (uint64_t)seed;
    rc = 0;
out:
    json_decref(o);
    return rc;
}

int api_check_work(int64_t nnz, int32_t rows, int64_t execs, int64_t max_work, api_fail *f)
{
    int64_t per = nnz > rows ? nnz : rows;
    if (per < 1)
        per = 1;
    if (execs < 0 || execs > max_work / per)
        return fail(f, 400, "too_much_work",
                    "the request asks for %" PRId64 " kernel runs of a matrix with %" PRId64
                    " entries, over max_request_work (%" PRId64 " multiply-adds); ask for fewer runs or kernels",
                    execs, nnz, max_work);
    return 0;
}
