/* config.c — parsing and validating the daemon's configuration.
 *
 * One table (`keys`) lists every key with its type, default, range and help
 * line; the JSON file parser, the flag parser, --help and config_to_json all
 * walk it, so a key added here is a file key, a flag and a help line at once.
 * Strings are owned by the struct (strdup'd); "null" strings (no token file,
 * no TLS) are NULL.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <jansson.h>

#include "daemon/config.h"
#include "daemon/log.h"
#include "spmv.h"

/* KEY_BOOL is stored as an int64 0/1 beside the integers: true/false in a
 * file, true/false/yes/no/1/0 as a flag's value. */
typedef enum key_type { KEY_STRING, KEY_OPTSTRING, KEY_INT, KEY_BOOL } key_type;

typedef int (*key_check)(const char *value, char *err, size_t errlen);

typedef struct key_desc {
    const char *name;
    key_type type;
    size_t offset;
    int64_t min, max;      /* KEY_INT range */
    int64_t def_int;
    const char *def_str;   /* KEY_STRING default (NULL for OPTSTRING) */
    key_check check;       /* extra validation of a string value */
    const char *help;
} key_desc;

#define KiB (INT64_C(1) << 10)
#define MiB (INT64_C(1) << 20)
#define GiB (INT64_C(1) << 30)
#define TiB (INT64_C(1) << 40)

static int check_listen(const char *v, char *err, size_t errlen);
static int check_devices(const char *v, char *err, size_t errlen);
static int check_dtype(const char *v, char *err, size_t errlen);
static int check_log_level(const char *v, char *err, size_t errlen);
static int check_nonempty(const char *v, char *err, size_t errlen);
static int check_auto_build(const char *v, char *err, size_t errlen);
static int check_halo(const char *v, char *err, size_t errlen);
static int check_pulse_addr(const char *v, char *err, size_t errlen);

#define OFF(field) offsetof(spmvd_config, field)
static const key_desc keys[] = {
    {"listen", KEY_STRING, OFF(listen), 0, 0, 0, "127.0.0.1:8080", check_listen,
     "address and port to listen on (host:port, [v6]:port)"},
    {"state_dir", KEY_STRING, OFF(state_dir), 0, 0, 0, "/var/lib/spmvd", check_nonempty,
     "directory holding the stored matrices"},
    {"threads", KEY_INT, OFF(threads), 1, 256, 4, NULL, NULL,
     "HTTP threads (libmicrohttpd thread pool)"},
    {"max_upload_bytes", KEY_INT, OFF(max_upload_bytes), 1, 64 * TiB, 4 * GiB, NULL, NULL,
     "largest matrix upload body in bytes (compressed size for .mtx.gz)"},
    {"max_body_bytes", KEY_INT, OFF(max_body_bytes), 1, 64 * GiB, 512 * MiB, NULL, NULL,
     "largest spmv/bench request body in bytes"},
    {"max_rows", KEY_INT, OFF(max_rows), 1, INT32_MAX, INT32_MAX, NULL, NULL,
     "most rows (and columns) an uploaded matrix may declare"},
    {"max_nnz", KEY_INT, OFF(max_nnz), 0, INT64_C(1) << 40, INT64_C(1) << 36, NULL, NULL,
     "most entries an uploaded matrix may declare (after symmetric expansion); past INT32_MAX only an .npz CSR "
     "archive with sorted rows or a generated matrix (64-bit row offsets), a Matrix Market file stops at INT32_MAX"},
    {"max_matrix_bytes", KEY_INT, OFF(max_matrix_bytes), 0, 64 * TiB, 0, NULL, NULL,
     "host bytes one matrix's CSR (row offsets, columns, values) may take, from its declared sizes before anything is "
     "allocated: uploads, generate, a stored SpMSpM product, the reload at start (0: a quarter of the host's memory)"},
    {"max_spmspm_nnz", KEY_INT, OFF(max_spmspm_nnz), 0, INT32_MAX, 0, NULL, NULL,
     "most entries an SpMSpM's C may have by its estimate (sum over A's non-zeros of B's row lengths, at most rows x "
     "cols), refused before the product (0: max_matrix_bytes / 16)"},
    {"max_job_result_bytes", KEY_INT, OFF(max_job_result_bytes), 1, 64 * TiB, 256 * MiB, NULL, NULL,
     "bytes the finished jobs' results may hold together (kept binary), and the most one JSON answer or JSON request "
     "body's values may take: past it a job fails with 507 and an answer is 413, both naming this key"},
    {"max_runs", KEY_INT, OFF(max_runs), 1, 1000000, 1000, NULL, NULL,
     "most timed runs (and warm-up runs) one spmv request may ask for"},
    {"max_request_work", KEY_INT, OFF(max_request_work), 1, INT64_C(1) << 62, INT64_C(1000000000000), NULL, NULL,
     "most multiply-adds one spmv or bench request may ask for: nnz x every run (timed and warm-up) of every kernel "
     "(cpu.csr.chunked: plus the rows once per extra pass over them)"},
    {"tune_budget_ms", KEY_INT, OFF(tune_budget_ms), 1, 3600000, 2000, NULL, NULL,
     "milliseconds the auto kernel may spend tuning one matrix (first use or POST .../tune)"},
    {"tune_max_runs", KEY_INT, OFF(tune_max_runs), 0, 1000000, 0, NULL, NULL,
     "kernel runs the auto kernel may spend tuning one matrix, probes and warm-ups counted (0: no bound but the time)"},
    {"auto_build", KEY_STRING, OFF(auto_build), 0, 0, 0, "repaid", check_auto_build,
     "when auto builds a packed format (pcsr, psell, spsell, pbsr) a matrix does not hold: \"repaid\" once the "
     "matrix's products repay it (its measured payback, else auto_build_products), \"eager\" whenever it tunes"},
    {"auto_build_products", KEY_INT, OFF(auto_build_products), 0, INT64_C(1) << 50, 100, NULL, NULL,
     "products a matrix must have had before auto (auto_build repaid) builds a packed format whose payback on it is "
     "not measured yet"},
    {"vector_ttl_s", KEY_INT, OFF(vector_ttl_s), 1, 30 * 86400, 3600, NULL, NULL,
     "seconds a resident vector may stay unused before it expires (vectors are never persisted)"},
    {"max_vector_bytes", KEY_INT, OFF(max_vector_bytes), 0, 64 * TiB, 4 * GiB, NULL, NULL,
     "bytes of resident vector values each device (the CPU, each GPU) may hold: past it 507"},
    {"max_vectors", KEY_INT, OFF(max_vectors), 0, 1000000, 1024, NULL, NULL,
     "resident vectors each device may hold: past it 507"},
    {"max_ops_steps", KEY_INT, OFF(max_ops_steps), 1, 1000000, 4096, NULL, NULL,
     "most steps one POST /v1/ops request may hold"},
    {"max_solve_iterations", KEY_INT, OFF(max_solve_iterations), 1, 100000000, 1000000, NULL, NULL,
     "largest maxit a solve may ask for"},
    {"queue_depth", KEY_INT, OFF(queue_depth), 1, 1000000, 64, NULL, NULL,
     "jobs waiting per device queue before requests get 503"},
    {"batch_window_us", KEY_INT, OFF(batch_window_us), 0, 1000000, 0, NULL, NULL,
     "dynamic batching: a product (one column, x inline, y in the answer, one run) waits up to this many "
     "microseconds from its arrival for others on the same matrix, kernel and parameters, and all run as one "
     "SpMM of up to 64 columns (0: off)"},
    {"upload_workers", KEY_INT, OFF(upload_workers), 1, CONFIG_MAX_UPLOAD_WORKERS, 2, NULL, NULL,
     "threads that read, build and store uploads (never the HTTP threads); each has a queue of queue_depth"},
    {"job_retention", KEY_INT, OFF(job_retention), 1, 7 * 86400, 600, NULL, NULL,
     "seconds a finished job's result stays readable at /v1/jobs/{id}"},
    {"devices", KEY_STRING, OFF(devices), 0, 0, 0, "all", check_devices,
     "GPUs to use: \"all\", \"none\" or a list of indices \"0,2\""},
    {"default_dtype", KEY_STRING, OFF(default_dtype), 0, 0, 0, "float64", check_dtype,
     "value type of uploads that name none (float64, float32 or mixed)"},
    {"default_hack_size", KEY_INT, OFF(default_hack_size), 1, 1024, SPMV_HACK_SIZE_DEFAULT, NULL, NULL,
     "HLL slice height of uploads that name none"},
    {"device_reserve_bytes", KEY_INT, OFF(device_reserve_bytes), 0, 64 * TiB, 256 * MiB, NULL, NULL,
     "GPU memory kept free: an upload that would eat into it gets 507"},
    {"max_padding", KEY_INT, OFF(max_padding), 0, 1000000, 3, NULL, NULL,
     "a padded format (ELL, HLL, HYB) holding more than this many slots per non-zero (plus 65536) is not built: its "
     "kernels answer 422 (0: no bound)"},
    {"padding_allowance_bytes", KEY_INT, OFF(padding_allowance_bytes), 0, 64 * TiB, SPMV_PADDING_ALLOWANCE_DEFAULT,
     NULL, NULL,
     "a format past max_padding is still built while its bytes stay within this (and, on the host, half the host's "
     "available memory): small matrices keep their ELL whatever it pads (0: max_padding alone)"},
    {"max_format_bytes", KEY_INT, OFF(max_format_bytes), 0, 64 * TiB, 0, NULL, NULL,
     "bytes one derived format may hold; past it the format is not built and its kernels answer 422 (0: no bound)"},
    {"host_format_bytes", KEY_INT, OFF(host_format_bytes), 0, 64 * TiB, 4 * GiB, NULL, NULL,
     "host memory for formats built on first use by CPU kernels; past it the least recently used are freed (0: no "
     "bound)"},
    {"serial_below", KEY_INT, OFF(serial_below), 0, INT64_C(1) << 40, SPMV_SERIAL_BELOW_DEFAULT, NULL, NULL,
     "host loops (BLAS-1 on host vectors, CPU kernels at their default thread count) under this many values or "
     "non-zeros run on one thread (0: never)"},
    {"allow_shm", KEY_BOOL, OFF(allow_shm), 0, 1, 0, NULL, NULL,
     "let same-host clients register POSIX shared-memory regions (/v1/shm) for x and y (docs/security.md)"},
    {"max_shm_regions", KEY_INT, OFF(max_shm_regions), 0, 65536, 64, NULL, NULL,
     "shared-memory regions registered at once: past it 507"},
    {"io_buffer_bytes", KEY_INT, OFF(io_buffer_bytes), 0, 64 * TiB, 1 * GiB, NULL, NULL,
     "idle host buffers kept for the bodies and answers of binary products (page-locked on a GPU host); 0: none kept"},
    {"cluster_timeout_ms", KEY_INT, OFF(cluster_timeout_ms), 100, 3600000, 30000, NULL, NULL,
     "under mpirun: how long rank 0 waits for any rank at any step of a request (a shard, an exchange, y); past it the "
     "cluster is marked failed (/v1/ready 503, sharded requests 503) and nothing waits longer"},
    {"cluster_heartbeat_ms", KEY_INT, OFF(cluster_heartbeat_ms), 50, 3600000, 1000, NULL, NULL,
     "under mpirun: how long an idle rank may take to answer the heartbeat rank 0 sends four times a second; past it "
     "the cluster is marked failed, so a dead rank is seen in about this long (capped at cluster_timeout_ms)"},
    {"cluster_pulse_ms", KEY_INT, OFF(cluster_pulse_ms), 0, 60000, 200, NULL, NULL,
     "under mpirun: every rank sends rank 0 a UDP datagram this often from a thread of its own, busy or not; a rank "
     "silent past cluster_heartbeat_ms in any long wait of rank 0's marks the cluster failed (0: no pulse)"},
    {"cluster_pulse_addr", KEY_STRING, OFF(cluster_pulse_addr), 0, 0, 0, "auto", check_pulse_addr,
     "under mpirun: the IPv4 address of rank 0's host the pulses go to (the interface the ranks reach it on); "
     "\"auto\": the address rank 0's host name resolves to (not a loopback one), else 127.0.0.1"},
    {"cluster_local_liveness", KEY_BOOL, OFF(cluster_local_liveness), 0, 1, 1, NULL, NULL,
     "under mpirun: rank 0 sees a rank on its own host exit through /proc (a test and diagnostic switch: false "
     "leaves the pulse, the heartbeat and cluster_timeout_ms)"},
    {"cluster_halo", KEY_STRING, OFF(cluster_halo), 0, 0, 0, "auto", check_halo,
     "under mpirun, GPU shards: how a sharded product's halo moves: \"auto\" (CUDA IPC, each rank writing straight "
     "into its peers' GPUs, where every rank is on one host and its GPUs reach each other; NCCL otherwise) or "
     "\"nccl\" (always NCCL)"},
    {"shard_nnz", KEY_INT, OFF(shard_nnz), 0, INT32_MAX, 0, NULL, NULL,
     "under mpirun: an upload naming neither `shard` nor `device` with at least this many entries is sharded across the "
     "ranks (0: only when asked)"},
    {"shard_when_full", KEY_BOOL, OFF(shard_when_full), 0, 1, 1, NULL, NULL,
     "under mpirun: an upload naming neither `shard` nor `device`, bound for a GPU, whose CSR fits the free memory of "
     "none of rank 0's GPUs is sharded across the ranks' GPUs instead of refused with 507"},
    {"connection_timeout", KEY_INT, OFF(connection_timeout), 1, 86400, 60, NULL, NULL,
     "seconds an idle connection is kept open"},
    {"connection_memory_limit", KEY_INT, OFF(connection_memory_limit), 16 * KiB, 64 * MiB, 256 * KiB, NULL, NULL,
     "bytes libmicrohttpd may use per connection for headers and read buffers"},
    {"max_connections", KEY_INT, OFF(max_connections), 1, 65536, 1024, NULL, NULL,
     "most simultaneous connections"},
    {"per_ip_connections", KEY_INT, OFF(per_ip_connections), 0, 65536, 64, NULL, NULL,
     "most simultaneous connections from one client address (0: no limit)"},
    {"header_timeout_s", KEY_INT, OFF(header_timeout_s), 1, 3600, 20, NULL, NULL,
     "seconds a client may take to send a request's line and headers, counted from the connection's opening or its "
     "previous answer (so also how long an idle keep-alive connection stays open)"},
    {"body_timeout_s", KEY_INT, OFF(body_timeout_s), 1, 86400, 10, NULL, NULL,
     "seconds a request body may take before its pace is checked against body_min_rate"},
    {"body_min_rate", KEY_INT, OFF(body_min_rate), 0, INT64_C(1) << 40, 1024, NULL, NULL,
     "bytes a second a request body must average once body_timeout_s has passed, or the connection is closed (0: no "
     "bound)"},
    {"log_level", KEY_STRING, OFF(log_level), 0, 0, 0, "info", check_log_level,
     "error, warn, info or debug"},
    {"auth_token_file", KEY_OPTSTRING, OFF(auth_token_file), 0, 0, 0, NULL, NULL,
     "file holding the bearer token every route but /v1/health requires (null: none)"},
    {"tls_cert", KEY_OPTSTRING, OFF(tls_cert), 0, 0, 0, NULL, NULL,
     "PEM certificate file: serve HTTPS (needs tls_key)"},
    {"tls_key", KEY_OPTSTRING, OFF(tls_key), 0, 0, 0, NULL, NULL,
     "PEM private key file of tls_cert"},
};
#define NKEYS (sizeof keys / sizeof keys[0])

static char **str_field(spmvd_config *c, const key_desc *k)
{
    return (char **)(void *)((char *)c + k->offset);
}

static int64_t *int_field(spmvd_config *c, const key_desc *k)
{
    return (int64_t *)(void *)((char *)c + k->offset);
}

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

void config_defaults(spmvd_config *c)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < NKEYS; i++) {
        const key_desc *k = &keys[i];
        if (k->type == KEY_INT || k->type == KEY_BOOL)
            *int_field(c, k) = k->def_int;
        else
            *str_field(c, k) = k->def_str ? strdup(k->def_str) : NULL;
    }
}

void config_free(spmvd_config *c)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (keys[i].type == KEY_STRING || keys[i].type == KEY_OPTSTRING) {
            free(*str_field(c, &keys[i]));
            *str_field(c, &keys[i]) = NULL;
        }
    free(c->config_file);
    c->config_file = NULL;
}

static const key_desc *key_find(const char *name)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp(keys[i].name, name) == 0)
            return &keys[i];
    return NULL;
}

/* ------------------------------------------------------- value checks */

int config_split_listen(const char *listen, char *host, size_t hostlen,
                        int *port, char *err, size_t errlen)
{
    const char *colon;
    const char *h = listen;
    size_t hl;
    if (listen[0] == '[') {
        const char *close = strchr(listen, ']');
        if (!close || close[1] != ':')
            return fail(err, errlen, "expected [address]:port, got \"%s\"", listen);
        h = listen + 1;
        hl = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(listen, ':');
        if (!colon)
            return fail(err, errlen, "expected host:port, got \"%s\"", listen);
        hl = (size_t)(colon - listen);
    }
    if (hl == 0 || hl >= hostlen)
        return fail(err, errlen, "bad host in \"%s\"", listen);
    char *end;
    errno = 0;
    long p = strtol(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end || errno || p < 0 || p > 65535)
        return fail(err, errlen, "port must be 0..65535 in \"%s\"", listen);
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = (int)p;
    return 0;
}

static int check_listen(const char *v, char *err, size_t errlen)
{
    char host[256];
    int port;
    return config_split_listen(v, host, sizeof host, &port, err, errlen);
}

int config_parse_devices(const char *spec, bool *all, int *list, int *count,
                         char *err, size_t errlen)
{
    *all = false;
    *count = 0;
    if (strcmp(spec, "all") == 0) {
        *all = true;
        return 0;
    }
    if (strcmp(spec, "none") == 0 || strcmp(spec, "cpu") == 0)
        return 0;
    const char *p = spec;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v >= CONFIG_MAX_DEVICES)
            return fail(err, errlen, "expected \"all\", \"none\" or GPU indices 0..%d separated by commas, got \"%s\"",
                        CONFIG_MAX_DEVICES - 1, spec);
        if (*count >= CONFIG_MAX_DEVICES)
            return fail(err, errlen, "too many devices in \"%s\"", spec);
        for (int i = 0; i < *count; i++)
            if (list[i] == (int)v)
                return fail(err, errlen, "device %ld listed twice in \"%s\"", v, spec);
        list[(*count)++] = (int)v;
        p = end;
        if (*p == ',')
            p++;
        else if (*p)
            return fail(err, errlen, "unexpected '%c' in \"%s\"", *p, spec);
    }
    if (*count == 0)
        return fail(err, errlen, "empty device list");
    return 0;
}

static int check_devices(const char *v, char *err, size_t errlen)
{
    bool all;
    int list[CONFIG_MAX_DEVICES], n;
    return config_parse_devices(v, &all, list, &n, err, errlen);
}

static int check_auto_build(const char *v, char *err, size_t errlen)
{
    if (strcmp(v, "repaid") != 0 && strcmp(v, "eager") != 0)
        return fail(err, errlen, "expected repaid or eager, got \"%s\"", v);
    return 0;
}

static int check_dtype(const char *v, char *err, size_t errlen)
{
    spmv_dtype d;
    if (strcasecmp(v, "mixed") != 0 && spmv_dtype_parse(v, &d) != 0)
        return fail(err, errlen, "expected float64, float32 or mixed, got \"%s\"", v);
    return 0;
}

static int check_log_level(const char *v, char *err, size_t errlen)
{
    if (log_level_parse(v) < 0)
        return fail(err, errlen, "expected error, warn, info or debug, got \"%s\"", v);
    return 0;
}

static int check_halo(const char *v, char *err, size_t errlen)
{
    if (strcmp(v, "auto") == 0 || strcmp(v, "nccl") == 0)
        return 0;
    return fail(err, errlen, "expected \"auto\" or \"nccl\", got \"%s\"", v);
}

static int check_pulse_addr(const char *v, char *err, size_t errlen)
{
    struct in_addr a;
    if (strcmp(v, "auto") == 0 || inet_pton(AF_INET, v, &a) == 1)
        return 0;
    return fail(err, errlen, "expected \"auto\" or an IPv4 address (a.b.c.d), got \"%s\"", v);
}

static int check_nonempty(const char *v, char *err, size_t errlen)
{
    if (!*v)
        return fail(err, errlen, "must not be empty");
    return 0;
}

/* -------------------------------------------------------- setting keys */

static int set_string(spmvd_config *c, const key_desc *k, const char *v,
                      const char *origin, char *err, size_t errlen)
{
    char why[256];
    if (v && k->check && k->check(v, why, sizeof why) != 0)
        return fail(err, errlen, "%s: config key `%s`: %s", origin, k->name, why);
    if (!v && k->type != KEY_OPTSTRING)
        return fail(err, errlen, "%s: config key `%s`: expected a string", origin, k->name);
    char *copy = v ? strdup(v) : NULL;
    if (v && !copy)
        return fail(err, errlen, "out of memory");
    free(*str_field(c, k));
    *str_field(c, k) = copy;
    return 0;
}

static int set_int(spmvd_config *c, const key_desc *k, int64_t v,
                   const char *origin, char *err, size_t errlen)
{
    if (v < k->min || v > k->max)
        return fail(err, errlen, "%s: config key `%s`: %" PRId64 " is out of range %" PRId64 "..%" PRId64,
                    origin, k->name, v, k->min, k->max);
    *int_field(c, k) = v;
    return 0;
}

/* Integer text with an optional binary suffix (k, M, G, T) as flags take it. */
static int parse_int_text(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || errno)
        return -1;
    int shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    case 't': case 'T': shift = 40; end++; break;
    default: break;
    }
    if (*end)
        return -1;
    if (shift && (v > (INT64_MAX >> shift) || v < (INT64_MIN >> shift)))
        return -1;
    *out = (int64_t)v * (INT64_C(1) << shift);
    return 0;
}

static int devices_from_array(json_t *arr, char *buf, size_t buflen)
{
    size_t i, used = 0;
    json_t *v;
    buf[0] = '\0';
    json_array_foreach(arr, i, v) {
        if (!json_is_integer(v))
            return -1;
        int n = snprintf(buf + used, buflen - used, "%s%" JSON_INTEGER_FORMAT,
                         i ? "," : "", json_integer_value(v));
        if (n < 0 || (size_t)n >= buflen - used)
            return -1;
        used += (size_t)n;
    }
    return i == 0 ? -1 : 0;
}

static int apply_json_value(spmvd_config *c, const key_desc *k, json_t *v,
                            const char *origin, char *err, size_t errlen)
{
    if (k->type == KEY_BOOL) {
        if (!json_is_boolean(v))
            return fail(err, errlen, "%s: config key `%s`: expected true or false", origin, k->name);
        return set_int(c, k, json_is_true(v), origin, err, errlen);
    }
    if (k->type == KEY_INT) {
        if (!json_is_integer(v))
            return fail(err, errlen, "%s: config key `%s`: expected an integer in %" PRId64 "..%" PRId64,
                        origin, k->name, k->min, k->max);
        return set_int(c, k, json_integer_value(v), origin, err, errlen);
    }
    if (json_is_null(v) && k->type == KEY_OPTSTRING)
        return set_string(c, k, NULL, origin, err, errlen);
    if (strcmp(k->name, "devices") == 0 && json_is_array(v)) {
        char buf[512];
        if (devices_from_array(v, buf, sizeof buf) != 0)
            return fail(err, errlen, "%s: config key `devices`: expected a non-empty array of GPU indices",
                        origin);
        return set_string(c, k, buf, origin, err, errlen);
    }
    if (!json_is_string(v))
        return fail(err, errlen, "%s: config key `%s`: expected a string%s", origin, k->name,
                    k->type == KEY_OPTSTRING ? " or null" : "");
    return set_string(c, k, json_string_value(v), origin, err, errlen);
}

int config_apply_json(spmvd_config *c, const char *text, size_t len,
                      const char *origin, char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    int rc = -1;
    if (!root)
        return fail(err, errlen, "%s: line %d column %d: %s", origin, jerr.line, jerr.column, jerr.text);
    if (!json_is_object(root)) {
        fail(err, errlen, "%s: expected a JSON object of configuration keys", origin);
        goto out;
    }
    const char *name;
    json_t *v;
    json_object_foreach(root, name, v) {
        const key_desc *k = key_find(name);
        if (!k) {
            fail(err, errlen, "%s: unknown config key `%s`", origin, name);
            goto out;
        }
        if (apply_json_value(c, k, v, origin, err, errlen) != 0)
            goto out;
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}

int config_apply_file(spmvd_config *c, const char *path, char *err, size_t errlen)
{
    enum { MAX_CONFIG_BYTES = 1 << 20 };
    FILE *f = fopen(path, "rb");
    if (!f)
        return fail(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    char *text = malloc(MAX_CONFIG_BYTES);
    size_t n = text ? fread(text, 1, MAX_CONFIG_BYTES, f) : 0;
    int rc = -1;
    if (!text)
        fail(err, errlen, "%s: out of memory", path);
    else if (ferror(f))
        fail(err, errlen, "%s: read error", path);
    else if (n == MAX_CONFIG_BYTES)
        fail(err, errlen, "%s: larger than %d bytes", path, MAX_CONFIG_BYTES);
    else
        rc = config_apply_json(c, text, n, path, err, errlen);
    free(text);
    fclose(f);
    return rc;
}

/* --------------------------------------------------------------- flags */

static int apply_flag(spmvd_config *c, const char *flag, const char *value,
                      char *err, size_t errlen)
{
    char name[64];
    size_t n = strlen(flag);
    if (n >= sizeof name)
        return fail(err, errlen, "unknown option --%s", flag);
    for (size_t i = 0; i <= n; i++)
        name[i] = flag[i] == '-' ? '_' : flag[i];
    const key_desc *k = key_find(name);
    if (!k)
        return fail(err, errlen, "unknown option --%s (see --help)", flag);
    char origin[80];
    snprintf(origin, sizeof origin, "--%s", flag);
    if (k->type == KEY_BOOL) {
        bool yes = !strcmp(value, "true") || !strcmp(value, "yes") || !strcmp(value, "1");
        if (!yes && strcmp(value, "false") && strcmp(value, "no") && strcmp(value, "0"))
            return fail(err, errlen, "--%s: config key `%s`: expected true or false, got \"%s\"", flag, k->name, value);
        return set_int(c, k, yes, origin, err, errlen);
    }
    if (k->type == KEY_INT) {
        int64_t v;
        if (parse_int_text(value, &v) != 0)
            return fail(err, errlen, "--%s: config key `%s`: expected an integer (k/M/G/T suffix allowed), got \"%s\"",
                        flag, k->name, value);
        return set_int(c, k, v, origin, err, errlen);
    }
    if (k->type == KEY_OPTSTRING && value[0] == '\0')
        return set_string(c, k, NULL, origin, err, errlen);
    return set_string(c, k, value, origin, err, errlen);
}

static bool is_meta_flag(const char *name)
{
    return strcmp(name, "config") == 0 || strcmp(name, "help") == 0 ||
           strcmp(name, "version") == 0 || strcmp(name, "check-config") == 0;
}

static int apply_meta_flag(spmvd_config *c, const char *name, const char *value)
{
    if (strcmp(name, "help") == 0)
        c->show_help = true;
    else if (strcmp(name, "version") == 0)
        c->show_version = true;
    else if (strcmp(name, "check-config") == 0)
        c->check_only = true;
    else {
        free(c->config_file);
        c->config_file = strdup(value);
    }
    return 0;
}

int config_parse_args(spmvd_config *c, int argc, char **argv, int pass,
                      char *err, size_t errlen)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0)
            a = "--help";
        else if (strcmp(a, "-V") == 0)
            a = "--version";
        else if (strcmp(a, "-c") == 0)
            a = "--config";
        if (strncmp(a, "--", 2) != 0)
            return fail(err, errlen, "unexpected argument \"%s\" (see --help)", a);
        char name[64];
        const char *eq = strchr(a + 2, '=');
        size_t n = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (n == 0 || n >= sizeof name)
            return fail(err, errlen, "unknown option %s", a);
        memcpy(name, a + 2, n);
        name[n] = '\0';
        bool takes_value = !(strcmp(name, "help") == 0 || strcmp(name, "version") == 0 ||
                             strcmp(name, "check-config") == 0);
        const char *value = NULL;
        if (takes_value) {
            if (eq)
                value = eq + 1;
            else if (i + 1 < argc)
                value = argv[++i];
            else
                return fail(err, errlen, "option --%s needs a value", name);
        } else if (eq) {
            return fail(err, errlen, "option --%s takes no value", name);
        }
        int rc = 0;
        if (is_meta_flag(name)) {
            if (pass == 0)
                rc = apply_meta_flag(c, name, value);
        } else if (pass == 1) {
            rc = apply_flag(c, name, value, err, errlen);
        } else {
            for (size_t j = 0; j <= n; j++)
                name[j] = name[j] == '-' ? '_' : name[j];
            if (!key_find(name))
                rc = fail(err, errlen, "unknown option %.*s (see --help)", (int)(n + 2), a);
        }
        if (rc != 0)
            return rc;
    }
    return 0;
}

int config_validate(const spmvd_config *c, char *err, size_t errlen)
{
    if ((c->tls_cert == NULL) != (c->tls_key == NULL))
        return fail(err, errlen, "config keys `tls_cert` and `tls_key` go together: set both or neither");
    return 0;
}

int config_load(spmvd_config *c, int argc, char **argv, char *err, size_t errlen)
{
    config_defaults(c);
    if (config_parse_args(c, argc, argv, 0, err, errlen) != 0)
        return -1;
    if (c->show_help || c->show_version)
        return 0;
    if (c->config_file) {
        if (config_apply_file(c, c->config_file, err, errlen) != 0)
            return -1;
    } else if (access(CONFIG_DEFAULT_FILE, F_OK) == 0) {
        if (config_apply_file(c, CONFIG_DEFAULT_FILE, err, errlen) != 0)
            return -1;
        c->config_file = strdup(CONFIG_DEFAULT_FILE);
    }
    if (config_parse_args(c, argc, argv, 1, err, errlen) != 0)
        return -1;
    return config_validate(c, err, errlen);
}

/* ---------------------------------------------------------------- help */

void config_print_help(const char *prog)
{
    printf("usage: %s [--config FILE] [--check-config] [--KEY VALUE ...]\n\n"
           "spmvd keeps sparse matrices resident and serves y = A*x over HTTP.\n\n"
           "  --config FILE     JSON configuration (default %s if it exists)\n"
           "  --check-config    validate the configuration, print it as JSON, exit\n"
           "  --routes          print every route, its body and query parameters (JSON lines), exit\n"
           "  --help, --version\n\n"
           "Every configuration key is also a flag (flags win over the file);\n"
           "integers take k/M/G/T suffixes, an empty value clears a file or token key:\n\n",
           prog, CONFIG_DEFAULT_FILE);
    for (size_t i = 0; i < NKEYS; i++) {
        const key_desc *k = &keys[i];
        char flag[64], def[64];
        size_t n = strlen(k->name);
        for (size_t j = 0; j <= n; j++)
            flag[j] = k->name[j] == '_' ? '-' : k->name[j];
        if (k->type == KEY_BOOL)
            snprintf(def, sizeof def, "%s", k->def_int ? "true" : "false");
        else if (k->type == KEY_INT)
            snprintf(def, sizeof def, "%" PRId64, k->def_int);
        else
            snprintf(def, sizeof def, "%s", k->def_str ? k->def_str : "none");
        printf("  --%-25s %s (default %s)\n", flag, k->help, def);
    }
}

char *config_to_json(const spmvd_config *c)
{
    json_t *o = json_object();
    spmvd_config *mc = (spmvd_config *)c; /* fields are only read */
    for (size_t i = 0; i < NKEYS; i++) {
        const key_desc *k = &keys[i];
        json_t *v;
        if (k->type == KEY_BOOL)
            v = json_boolean(*int_field(mc, k));
        else if (k->type == KEY_INT)
            v = json_integer(*int_field(mc, k));
        else
            v = *str_field(mc, k) ? json_string(*str_field(mc, k)) : json_null();
        json_object_set_new(o, k->name, v);
    }
    char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}
