/* upload.c — POST /v1/matrices: a Matrix Market or .npz upload, streamed,
 * or a matrix the daemon generates.
 *
 * Two shapes of body: multipart/form-data (curl -F file=@m.mtx, options as
 * more fields) through MHD's post processor, and a raw body (curl
 * --data-binary @m.mtx, options in the query string). Either way this
 * thread only writes the file's bytes, as they arrive, to a spool file in
 * the state directory (upload_spool_write: .upload-*.tmp, which a crash
 * leaves for the next start to remove); nothing is parsed here, so an
 * upload never holds up the other requests this thread serves (8 uploads
 * of 2^26-row matrices held /v1/health for 7 s when they were built here).
 * The Content-Length is checked against max_upload_bytes before any of the
 * body is read; a body without one is counted as it comes.
 *
 * When the body ends the options are decoded here and the rest is one task
 * on an upload worker (daemon/upload.h, upload_ingest_run): the spool read
 * (gzip and .npz found by their magic bytes), or the recipe built; the
 * matrix built and placed; a host matrix stored, or the load submitted to
 * the GPU's worker or the cluster worker (sharded: shard=true under
 * mpirun, or the configuration's shard_nnz / shard_when_full) while the
 * upload worker writes its file under a temporary name. The connection
 * stays suspended until the ingest and the load (when there is one) have
 * both finished; then, here, upload_commit gives the file its name and
 * lists the matrix, or says what failed: a failed load (507 when the
 * device is full, 503 when the daemon stops) wins over a failed write (500
 * naming the step, a full disk too), and nothing is kept. The answer is
 * the descriptor plus Location.
 *
 * With `generate=<kind>` (no file, no body) the recipe is decoded here
 * and the host CSR built by formula on the upload worker (upload_generate:
 * bounded by max_rows, max_nnz and the host's available memory before its
 * entries are allocated); everything after is the same, and the stored
 * file holds the recipe, not the arrays (daemon/matfile.h).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api.h"
#include "daemon/log.h"
#include "daemon/upload.h"

#define FIELD_MAX 256
#define POST_BUFFER 65536

typedef struct upload_req {
    upload up;                  /* first: the tasks' finishes find the request */
    request *r;
    struct MHD_PostProcessor *pp;
    bool multipart;             /* the body is form fields (pp), not the file itself */
    bool file_seen;
    char name[FIELD_MAX], dtype[FIELD_MAX], formats[FIELD_MAX], hack_size[FIELD_MAX], device[FIELD_MAX];
    char shard[FIELD_MAX], offsets[FIELD_MAX], if_exists[FIELD_MAX];
    char generate[FIELD_MAX], gen_n[FIELD_MAX], gen_per_row[FIELD_MAX], gen_dense_len[FIELD_MAX], gen_seed[FIELD_MAX];
    char gen_rows[FIELD_MAX], gen_cols[FIELD_MAX], gen_nnz[FIELD_MAX]; /* generate=random */
    char filename[FIELD_MAX];
    uint64_t bytes;
} upload_req;

static upload_req *U(request *r) { return r->state; }

/* A chunk of the file: to the spool, nothing more on this thread. */
static void feed(request *r, const char *data, size_t size)
{
    spmv_error err = {0};
    int rc = upload_spool_write(&U(r)->up, data, size, &err);
    if (rc != SPMV_OK)
        api_error_spmv(r, rc, &err);
}

/* The upload's options, taken as form fields or query parameters (a form
 * field wins), each into its buffer of `upload_req`: the names are the
 * route's query parameters, in the order of their buffers. */
static const char *const option_names[] = {"name", "dtype", "formats", "hack_size", "device", "shard", "offsets",
                                           "if_exists", "generate", "n", "per_row", "dense_len", "seed",
                                           "rows", "cols", "nnz", NULL};
static const size_t option_off[] = {
    offsetof(upload_req, name),      offsetof(upload_req, dtype),       offsetof(upload_req, formats),
    offsetof(upload_req, hack_size), offsetof(upload_req, device),      offsetof(upload_req, shard),
    offsetof(upload_req, offsets),   offsetof(upload_req, if_exists),   offsetof(upload_req, generate),
    offsetof(upload_req, gen_n),     offsetof(upload_req, gen_per_row), offsetof(upload_req, gen_dense_len),
    offsetof(upload_req, gen_seed),  offsetof(upload_req, gen_rows),    offsetof(upload_req, gen_cols),
    offsetof(upload_req, gen_nnz),
};
#define OPTION_COUNT (sizeof option_off / sizeof option_off[0])
_Static_assert(OPTION_COUNT + 1 == sizeof option_names / sizeof option_names[0], "a buffer for every option");

static char *option_buf(upload_req *u, size_t i) { return (char *)u + option_off[i]; }

/* Appends a form field's chunk to its (bounded) buffer. */
static int field_append(char *buf, const char *data, uint64_t off, size_t size)
{
    if (off + size >= FIELD_MAX)
        return -1;
    memcpy(buf + off, data, size);
    buf[off + size] = '\0';
    return 0;
}

static enum MHD_Result on_field(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
                                const char *content_type, const char *transfer_encoding, const char *data,
                                uint64_t off, size_t size)
{
    (void)kind; (void)content_type; (void)transfer_encoding;
    request *r = cls;
    upload_req *u = U(r);
    if (r->failed)
        return MHD_NO;
    if (!key) { /* a part whose Content-Disposition has no name= (found by fuzz_multipart) */
        api_error(r, 400, "bad_request", "a multipart/form-data part without a field name");
        return MHD_NO;
    }
    if (strcmp(key, "file") == 0) {
        if (u->file_seen && off == 0) {
            api_error(r, 400, "bad_request", "more than one `file` field");
            return MHD_NO;
        }
        u->file_seen = true;
        if (filename && off == 0)
            snprintf(u->filename, sizeof u->filename, "%s", filename);
        if (size)
            feed(r, data, size);
        return r->failed ? MHD_NO : MHD_YES;
    }
    for (size_t i = 0; i < OPTION_COUNT; i++)
        if (strcmp(key, option_names[i]) == 0) {
            if (field_append(option_buf(u, i), data, off, size) != 0) {
                api_error(r, 400, "bad_request", "form field `%s` is longer than %d bytes", key, FIELD_MAX - 1);
                return MHD_NO;
            }
            return MHD_YES;
        }
    char known[256] = "file";
    for (size_t i = 0; i < OPTION_COUNT; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), ", %s", option_names[i]);
    api_error(r, 400, "bad_request", "unknown form field `%s` (known: %s)", key, known);
    return MHD_NO;
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The file name a raw body's Content-Disposition gives (RFC 6266:
 * filename*=UTF-8''percent-encoded wins over filename="quoted" or
 * filename=token), its directories dropped; empty when it gives none. */
static void disposition_name(const char *cd, char out[FIELD_MAX])
{
    const char *v = strcasestr(cd, "filename*=");
    size_t n = 0;
    bool ext = v && strncasecmp(v + 10, "UTF-8''", 7) == 0, quoted = false;
    v = ext ? v + 17 : strcasestr(cd, "filename=");
    if (v && !ext) {
        v += 9;
        quoted = *v == '"';
        v += quoted;
    }
    for (; v && *v && n + 1 < FIELD_MAX; v++) {
        if (quoted ? *v == '"' : (*v == ';' || *v == ' '))
            break;
        if (quoted && *v == '\\' && v[1])
            v++;
        else if (ext && *v == '%' && hex_digit(v[1]) >= 0 && hex_digit(v[2]) >= 0) {
            out[n++] = (char)(hex_digit(v[1]) * 16 + hex_digit(v[2]));
            v += 2;
            continue;
        }
        out[n++] = *v;
    }
    out[n] = '\0';
    const char *base = out;
    for (const char *p = out; *p; p++)
        if (*p == '/' || *p == '\\')
            base = p + 1;
    memmove(out, base, strlen(base) + 1);
}

static void upload_begin(request *r)
{
    spmvd *d = r->d;
    if (!api_check_content_length(r, atomic_load(&d->limits.max_upload_bytes), "max_upload_bytes"))
        return;
    upload_req *u = calloc(1, sizeof *u);
    if (!u) {
        api_error(r, 500, "out_of_memory", "out of memory");
        return;
    }
    r->state = u;
    u->r = r;
    upload_init(&u->up, d);
    /* query options first: form fields, when present, override them */
    for (size_t i = 0; i < OPTION_COUNT; i++) {
        const char *v = api_query(r, option_names[i]);
        if (v)
            snprintf(option_buf(u, i), FIELD_MAX, "%s", v);
    }
    const char *ct = api_header_in(r, MHD_HTTP_HEADER_CONTENT_TYPE);
    const char *cd = api_header_in(r, "Content-Disposition");
    if (cd && !(ct && strncasecmp(ct, "multipart/form-data", 19) == 0))
        disposition_name(cd, u->filename);
    if (ct && strncasecmp(ct, "multipart/form-data", 19) == 0) {
        u->multipart = true;
        u->pp = MHD_create_post_processor(r->conn, POST_BUFFER, on_field, r);
        if (!u->pp)
            api_error(r, 400, "bad_request", "malformed multipart/form-data header (no boundary?)");
    }
}

static void upload_body(request *r, const char *data, size_t size)
{
    upload_req *u = U(r);
    int64_t limit = atomic_load(&r->d->limits.max_upload_bytes);
    u->bytes += size;
    if (u->bytes > (uint64_t)limit) {
        api_error(r, 413, "too_large", "upload of at least %llu bytes is over the limit of %lld bytes (max_upload_bytes)",
                  (unsigned long long)u->bytes, (long long)limit);
        return;
    }
    if (u->pp) {
        if (MHD_post_process(u->pp, data, size) != MHD_YES && !r->failed)
            api_error(r, 400, "bad_request", "malformed multipart/form-data body");
    } else {
        feed(r, data, size);
    }
}

/* ------------------------------------------------------------ options */

static bool name_ok(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return false;
    json_t *probe = json_string(s); /* NULL unless valid UTF-8 */
    json_decref(probe);
    return probe != NULL;
}

static int parse_device(request *r, const char *s, int *out)
{
    char *end;
    if (!*s || strcmp(s, "auto") == 0) {
        *out = r->d->ngpus > 0 ? -2 : -1;
        return 0;
    }
    if (strcmp(s, "cpu") == 0 || strcmp(s, "host") == 0) {
        *out = -1;
        return 0;
    }
    if (strcmp(s, "gpu") == 0) {
        *out = -2;
    } else {
        const char *num = strncmp(s, "gpu", 3) == 0 ? s + 3 : s;
        long v = strtol(num, &end, 10);
        if (end == num || *end || v < 0 || v >= CONFIG_MAX_DEVICES) {
            api_error(r, 400, "invalid_request", "`device` must be auto, cpu, gpu or gpuN, not \"%s\"", s);
            return -1;
        }
        *out = (int)v;
    }
    if (!spmvd_pick_gpu(r->d, *out)) {
        api_error(r, 409, "unavailable", "`device` %s: %s", s,
                  r->d->ngpus == 0 ? r->d->gpu_reason : "no such GPU in use by this daemon");
        return -1;
    }
    return 0;
}

/* The options into u->up.spec; 0, or -1 with the answer set. */
static int parse_options(request *r)
{
    upload_req *u = U(r);
    upload_spec *o = &u->up.spec;
    spmvd *d = r->d;
    spmv_error err = {0};
    const char *dt = u->dtype[0] ? u->dtype : d->cfg.default_dtype;
    o->mixed = strcasecmp(dt, "mixed") == 0;
    if (o->mixed) {
        o->dtype = SPMV_FLOAT64;
    } else if (spmv_dtype_parse(dt, &o->dtype) != 0) {
        api_error(r, 400, "invalid_request", "`dtype` must be float64, float32 or mixed, not \"%s\"", dt);
        return -1;
    }
    o->hack_size = (int32_t)d->cfg.default_hack_size;
    if (u->hack_size[0]) {
        char *end;
        long v = strtol(u->hack_size, &end, 10);
        const spmv_param_desc *pd = spmv_param_get(SPMV_PARAM_HACK_SIZE);
        if (*end || end == u->hack_size || v < pd->min || v > pd->max) {
            api_error(r, 400, "invalid_request", "`hack_size` must be an integer in %d..%d, not \"%s\"",
                      pd->min, pd->max, u->hack_size);
            return -1;
        }
        o->hack_size = (int32_t)v;
    }
    if (parse_device(r, u->device, &o->device) != 0)
        return -1;
    o->placed = u->device[0] || u->shard[0];
    if (u->offsets[0] && strcmp(u->offsets, "auto") && strcmp(u->offsets, "64")) {
        api_error(r, 400, "invalid_request", "`offsets` must be auto or 64, not \"%s\"", u->offsets);
        return -1;
    }
    o->offsets64 = strcmp(u->offsets, "64") == 0;
    o->formats = SPMV_FMT_CSR; /* every other format is built on first use (docs/api.md, "Formats") */
    if (u->formats[0] && spmv_formats_parse(u->formats, &o->formats, &err) != 0) {
        api_error(r, 400, "invalid_request", "`formats`: %s", err.message);
        return -1;
    }
    o->formats |= SPMV_FMT_CSR;
    if (u->shard[0] && strcmp(u->shard, "true") && strcmp(u->shard, "1") && strcmp(u->shard, "false") &&
        strcmp(u->shard, "0")) {
        api_error(r, 400, "invalid_request", "`shard` must be true or false, not \"%s\"", u->shard);
        return -1;
    }
    o->shard = !strcmp(u->shard, "true") || !strcmp(u->shard, "1");
    if (o->shard && !d->cluster_worker) {
        api_error(r, 409, "unavailable", "`shard`: sharded matrices need spmvd started by mpirun (docs/cluster.md); "
                  "this daemon runs alone");
        return -1;
    }
    if (o->shard && cluster_failed(d->cluster)) {
        api_error(r, 503, "cluster_failed", "`shard`: the cluster has failed: %s", cluster_failed(d->cluster));
        return -1;
    }
    static const char *const modes[] = {[UPLOAD_NEW] = "new", [UPLOAD_REUSE] = "reuse", [UPLOAD_REPLACE] = "replace"};
    o->if_exists = UPLOAD_NEW;
    while (u->if_exists[0] && strcmp(u->if_exists, modes[o->if_exists]) != 0)
        if (++o->if_exists > UPLOAD_REPLACE) {
            api_error(r, 400, "invalid_request", "`if_exists` must be new, reuse or replace, not \"%.64s\"", u->if_exists);
            return -1;
        }
    o->name = u->name[0] ? u->name : u->filename[0] ? u->filename : "matrix";
    if (strlen(o->name) > MATFILE_NAME_MAX || !name_ok(o->name)) {
        api_error(r, 400, "invalid_request", "`name` (or the file name) must be at most %d bytes of UTF-8 text without "
                  "control characters", MATFILE_NAME_MAX);
        return -1;
    }
    return 0;
}

/* ----------------------------------------------------------- generate */

static int gen_number(request *r, const char *key, const char *text, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > hi) {
        api_error(r, 400, "invalid_request", "`%s` must be an integer in %lld..%lld, not \"%s\"", key, (long long)lo,
                  (long long)hi, text);
        return -1;
    }
    *out = v;
    return 0;
}

/* generate=random: `rows`, `cols`, `nnz` (all three) and `seed`; what the
 * other kinds take is refused. The spec keeps cols in per_row's slot and
 * nnz in dense_len's (spmv_gen_spec). */
static int parse_random(request *r, spmv_gen_spec *g)
{
    upload_req *u = U(r);
    int64_t cols = 0, seed = 0;
    if (u->gen_n[0] || u->gen_per_row[0] || u->gen_dense_len[0] || !u->gen_rows[0] || !u->gen_cols[0] ||
        !u->gen_nnz[0]) {
        api_error(r, 400, "invalid_request", "generate=random takes `rows`, `cols` and `nnz` (and `seed`), not `n`, "
                  "`per_row` or `dense_len`");
        return -1;
    }
    if (gen_number(r, "rows", u->gen_rows, 1, INT32_MAX, &g->n) != 0 ||
        gen_number(r, "cols", u->gen_cols, 1, INT32_MAX, &cols) != 0 ||
        gen_number(r, "nnz", u->gen_nnz, 0, INT64_MAX, &g->dense_len) != 0 ||
        (u->gen_seed[0] && gen_number(r, "seed", u->gen_seed, 0, INT64_MAX, &seed) != 0))
        return -1;
    g->per_row = (int32_t)cols;
    g->seed = (uint64_t)seed;
    spmv_gen_defaults(g, true, true, u->gen_seed[0]);
    return 0;
}

/* `generate=<kind>` (with n, per_row, dense_len, seed as spmv-gen takes
 * them) into u->up.recipe: the matrix is built by formula
 * (upload_generate) instead of read from a body; the file keeps the
 * recipe. */
static int parse_recipe(request *r)
{
    upload_req *u = U(r);
    spmv_gen_spec *g = &u->up.recipe;
    memset(g, 0, sizeof *g);
    if (u->file_seen || (!u->multipart && u->bytes > 0)) {
        api_error(r, 400, "invalid_request", "`generate` builds the matrix: the request must carry no file or body");
        return -1;
    }
    if (spmv_gen_kind_parse(u->generate, &g->kind) != SPMV_OK) {
        api_error(r, 400, "invalid_request", "`generate` must name a generator (poisson2d, poisson3d, stencil27, "
                  "uniform, powerlaw, graph_uniform, graph_powerlaw, banded_dense_row, lp, band, random), not \"%s\"",
                  u->generate);
        return -1;
    }
    if (g->kind == SPMV_GEN_RANDOM)
        return parse_random(r, g);
    if (u->gen_rows[0] || u->gen_cols[0] || u->gen_nnz[0]) {
        api_error(r, 400, "invalid_request", "`rows`, `cols` and `nnz` are for generate=random only (%s takes `n`)",
                  spmv_gen_kind_name(g->kind));
        return -1;
    }
    if (!u->gen_n[0]) {
        api_error(r, 400, "invalid_request", "`generate` needs `n` (grid side or rows)");
        return -1;
    }
    int64_t per_row = 0, seed = 0;
    if (gen_number(r, "n", u->gen_n, 1, INT32_MAX, &g->n) != 0 ||
        (u->gen_per_row[0] && gen_number(r, "per_row", u->gen_per_row, 0, INT32_MAX, &per_row) != 0) ||
        (u->gen_dense_len[0] && gen_number(r, "dense_len", u->gen_dense_len, 0, INT32_MAX, &g->dense_len) != 0) ||
        (u->gen_seed[0] && gen_number(r, "seed", u->gen_seed, 0, INT64_MAX, &seed) != 0))
        return -1;
    g->per_row = (int32_t)per_row;
    g->seed = (uint64_t)seed;
    spmv_gen_defaults(g, u->gen_per_row[0], u->gen_dense_len[0], u->gen_seed[0]);
    return 0;
}

/* ----------------------------------------------------------- finishing */

static void answer_created(request *r)
{
    upload_req *u = U(r);
    matrix *m = u->up.m;
    char loc[64];
    snprintf(loc, sizeof loc, "/v1/matrices/%s", m->meta.id);
    log_info("upload: stored %s \"%s\" %dx%d nnz %lld %s on %s (%llu bytes, parse %.1f ms)", m->meta.id,
             m->meta.name, m->host.rows, m->host.cols, (long long)m->host.nnz, matrix_dtype_name(m),
             m->dev_worker ? m->dev_worker->name : "cpu", (unsigned long long)u->bytes, m->meta.parse_ms);
    metrics_upload(r->d->metrics, u->bytes);
    api_json(r, 201, api_matrix_json(r->d, m));
    api_header(r, MHD_HTTP_HEADER_LOCATION, loc);
}

/* One of the upload's tasks (the ingest, the load) finished; the last
 * resumes the connection. */
static void part_done(upload_req *u)
{
    if (atomic_fetch_sub(&u->up.pending, 1) == 1)
        api_task_done(u->r);
}

static void load_finish(task *t, int status)
{
    upload_req *u = (upload_req *)t;
    upload_load_done(&u->up, status);
    part_done(u);
}

static void ingest_finish(task *t, int status)
{
    upload_req *u = (upload_req *)((char *)t - offsetof(upload_req, up.ingest));
    api_task_status(status, &u->up.ingest_rc, &u->up.ingest_err); /* never ran: the daemon stopped */
    part_done(u);
}

/* What the ingest stopped at, answered as each step answered when it ran
 * on this thread: the file unreadable is a 422 (but memory, I/O and the
 * drain are the daemon's), a refused load is the device queue's 503. */
static void answer_ingest_failure(request *r)
{
    upload *up = &U(r)->up;
    int rc = up->ingest_rc;
    if (up->phase == UPLOAD_QUEUED || rc == SPMV_ERR_UNAVAILABLE)
        api_error_task(r, rc, &up->ingest_err);
    else if (up->phase == UPLOAD_SUBMIT)
        api_error_submit(r, up->w, rc);
    else if (up->phase == UPLOAD_READ && rc != SPMV_ERR_NOMEM && rc != SPMV_ERR_IO)
        api_error(r, 422, rc == SPMV_ERR_UNSUPPORTED ? "unsupported_matrix" : rc == SPMV_ERR_LIMIT ? "too_large" : "bad_matrix",
                  "%s", up->ingest_err.message);
    else
        api_error_spmv(r, rc, &up->ingest_err);
}

/* if_exists=reuse found the same matrix: 200, not 201, nothing stored. */
static void answer_reused(request *r)
{
    matrix *same = U(r)->up.reused;
    char loc[64];
    snprintf(loc, sizeof loc, "/v1/matrices/%s", same->meta.id);
    log_info("upload: \"%s\" is %s already (same sha256 and dtype): reused, nothing stored", same->meta.name,
             same->meta.id);
    api_json(r, 200, api_matrix_json(r->d, same));
    api_header(r, MHD_HTTP_HEADER_LOCATION, loc);
}

/* The tasks are done: 201 (200 for a reuse), or what failed. */
static void upload_resumed(request *r)
{
    upload_req *u = U(r);
    spmv_error err = {0};
    if (u->up.ingest_rc != SPMV_OK) {
        answer_ingest_failure(r);
        return;
    }
    if (u->up.reused) {
        answer_reused(r);
        return;
    }
    int rc = u->up.phase == UPLOAD_STORE ? SPMV_OK : upload_commit(&u->up, &err);
    if (rc != SPMV_OK) {
        api_error_task(r, rc, &err);
        return;
    }
    if (u->up.spec.if_exists == UPLOAD_REPLACE)
        upload_replace(&u->up);
    answer_created(r);
}

/* The body is in: the options decoded here, the rest handed to an upload
 * worker (the connection suspended until it is done). */
static void upload_end(request *r)
{
    upload_req *u = U(r);
    if (u->pp) {
        MHD_destroy_post_processor(u->pp); /* flushes the last field */
        u->pp = NULL;
        if (r->resp)
            return;
        if (!u->file_seen && !u->generate[0]) {
            api_error(r, 400, "bad_request", "multipart upload without a `file` field");
            return;
        }
    }
    if (r->failed || parse_options(r) != 0 || (u->generate[0] && parse_recipe(r) != 0))
        return;
    u->up.generate = u->generate[0] != '\0';
    u->up.base.finish = load_finish;
    u->up.ingest.run = upload_ingest_run;
    u->up.ingest.finish = ingest_finish;
    atomic_store(&u->up.pending, 1);
    api_submit_and_suspend(r, spmvd_upload_worker(r->d), &u->up.ingest);
}

static void upload_cleanup(request *r)
{
    upload_req *u = U(r);
    if (!u)
        return;
    if (u->pp)
        MHD_destroy_post_processor(u->pp);
    upload_release(&u->up);
    free(u);
    r->state = NULL;
}

const route_handlers api_upload_post = {
    .begin = upload_begin,
    .body = upload_body,
    .end = upload_end,
    .resumed = upload_resumed,
    .cleanup = upload_cleanup,
    .accepts_body = true,
    .body_kind = API_BODY_OWN,
    .query = option_names,
};
