/* upload.c — POST /v1/matrices: a Matrix Market or .npz upload, streamed,
 * or a matrix the daemon generates.
 *
 * Two shapes of body: multipart/form-data (curl -F file=@m.mtx, options as
 * more fields) through MHD's post processor, and a raw body (curl
 * --data-binary @m.mtx, options in the query string). Either way each
 * chunk of the file goes straight into the engine's streaming reader as it
 * arrives, so the text is never held whole; gzip is detected by the reader
 * from the magic bytes. A body that starts as a zip archive does (SciPy's
 * .npz, engine/npz.c) is spooled as it arrives to a temporary file in the
 * state directory (.upload-*.tmp: a crash leaves it for the next start to
 * remove) and read from there when the body ends, never held in memory;
 * the file is removed in every outcome. The Content-Length is checked against
 * max_upload_bytes before any of the body is read; a body without one is
 * counted as it comes.
 *
 * When the body ends the options are decoded and the daemon takes over
 * (daemon/upload.h), each step a call from here: upload_build makes the
 * matrix from the entries (the host CSR in the asked dtype, the host
 * formats asked for); upload_place says where it goes. A host matrix is
 * stored (upload_store) and the answer is 201. A matrix bound for a GPU,
 * or sharded across the ranks (shard=true under mpirun, issue 16, or the
 * configuration's shard_nnz / shard_when_full), is submitted as a task to
 * that GPU's worker or the cluster worker (upload_load_run) while this
 * thread writes its file under a temporary name (upload_stage); when both
 * are done, upload_commit gives the file its name and lists the matrix,
 * or says what failed: a failed load (507 when the device is full, 503
 * when the daemon stops) wins over a failed write (500 naming the step, a
 * full disk too), and nothing is kept. The answer is the descriptor plus
 * Location.
 *
 * With `generate=<kind>` (no file, no body) the recipe is decoded here
 * and the host CSR built by formula (upload_generate: bounded by max_rows,
 * max_nnz and the host's available memory before its entries are
 * allocated); everything after is the same, and the stored file holds the
 * recipe, not the arrays (daemon/matfile.h).
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "api/api.h"
#include "daemon/log.h"
#include "daemon/upload.h"

#define FIELD_MAX 256
#define POST_BUFFER 65536

typedef struct upload_req {
    upload up;                  /* first: the load's finish finds the request */
    request *r;
    spmv_mm_reader *reader;
    spmv_mm_options opts;       /* the reader's limits, for an .npz too */
    /* The body's first bytes decide its kind: a zip archive (.npz) is
     * spooled to a temporary file in the state directory (libzip needs to
     * seek), anything else streams into the Matrix Market reader. */
    unsigned char head[4];
    size_t head_len;
    bool decided, npz;
    int spool_fd;               /* -1: none */
    char spool_path[PATH_MAX];
    struct MHD_PostProcessor *pp;
    bool multipart;             /* the body is form fields (pp), not the file itself */
    bool file_seen;
    char name[FIELD_MAX], dtype[FIELD_MAX], formats[FIELD_MAX], hack_size[FIELD_MAX], device[FIELD_MAX];
    char shard[FIELD_MAX], offsets[FIELD_MAX];
    char generate[FIELD_MAX], gen_n[FIELD_MAX], gen_per_row[FIELD_MAX], gen_dense_len[FIELD_MAX], gen_seed[FIELD_MAX];
    char filename[FIELD_MAX];
    uint64_t bytes;
} upload_req;

static upload_req *U(request *r) { return r->state; }

static void mm_feed(request *r, const char *data, size_t size)
{
    upload_req *u = U(r);
    spmv_error err = {0};
    double t0 = spmv_now_ms();
    int rc = spmv_mm_reader_feed(u->reader, data, size, &err);
    u->up.parse_ms += spmv_now_ms() - t0;
    if (rc == SPMV_ERR_NOMEM)
        api_error(r, 500, "out_of_memory", "%s", err.message);
    else if (rc != SPMV_OK)
        api_error(r, 422, rc == SPMV_ERR_UNSUPPORTED ? "unsupported_matrix" : "bad_matrix", "%s", err.message);
}

static void spool_write(request *r, const void *data, size_t size)
{
    upload_req *u = U(r);
    const char *p = data;
    while (size > 0) {
        ssize_t n = write(u->spool_fd, p, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            api_error(r, 500, "io_error", "spooling the .npz upload to %s: %s", u->spool_path,
                      n < 0 ? strerror(errno) : "short write");
            return;
        }
        p += n;
        size -= (size_t)n;
    }
}

/* Settles the body's kind from its first bytes (or from fewer, at its end). */
static void decide(request *r)
{
    upload_req *u = U(r);
    u->decided = true;
    u->npz = spmv_npz_magic(u->head, u->head_len);
    if (!u->npz) {
        if (u->head_len)
            mm_feed(r, (const char *)u->head, u->head_len);
        return;
    }
    int n = snprintf(u->spool_path, sizeof u->spool_path, "%s/.upload-XXXXXX.tmp", store_dir(r->d->store));
    if (n < 0 || (size_t)n >= sizeof u->spool_path || (u->spool_fd = mkstemps(u->spool_path, 4)) < 0) {
        u->spool_fd = -1;
        api_error(r, 500, "io_error", "cannot create a spool file for the .npz upload in %s: %s",
                  store_dir(r->d->store), strerror(errno));
        return;
    }
    spool_write(r, u->head, u->head_len);
}

/* Feeds a chunk of the file to the reader (Matrix Market) or the spool
 * file (.npz), timing it. */
static void feed(request *r, const char *data, size_t size)
{
    upload_req *u = U(r);
    while (!u->decided && size > 0) {
        u->head[u->head_len++] = (unsigned char)*data++;
        size--;
        if (u->head_len == sizeof u->head)
            decide(r);
    }
    if (r->failed || size == 0)
        return;
    if (u->npz)
        spool_write(r, data, size);
    else
        mm_feed(r, data, size);
}

static void spool_remove(upload_req *u)
{
    if (u->spool_fd >= 0) {
        close(u->spool_fd);
        u->spool_fd = -1;
    }
    if (u->spool_path[0]) {
        unlink(u->spool_path);
        u->spool_path[0] = '\0';
    }
}

/* The upload's options, taken as form fields or query parameters (a form
 * field wins), each into its buffer of `upload_req`. */
static const struct {
    const char *name;
    size_t off;
} options[] = {
    {"name", offsetof(upload_req, name)},           {"dtype", offsetof(upload_req, dtype)},
    {"formats", offsetof(upload_req, formats)},     {"hack_size", offsetof(upload_req, hack_size)},
    {"device", offsetof(upload_req, device)},       {"shard", offsetof(upload_req, shard)},
    {"offsets", offsetof(upload_req, offsets)},     {"generate", offsetof(upload_req, generate)},
    {"n", offsetof(upload_req, gen_n)},             {"per_row", offsetof(upload_req, gen_per_row)},
    {"dense_len", offsetof(upload_req, gen_dense_len)}, {"seed", offsetof(upload_req, gen_seed)},
};
#define OPTION_COUNT (sizeof options / sizeof options[0])

static char *option_buf(upload_req *u, size_t i) { return (char *)u + options[i].off; }

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
        if (strcmp(key, options[i].name) == 0) {
            if (field_append(option_buf(u, i), data, off, size) != 0) {
                api_error(r, 400, "bad_request", "form field `%s` is longer than %d bytes", key, FIELD_MAX - 1);
                return MHD_NO;
            }
            return MHD_YES;
        }
    char known[256] = "file";
    for (size_t i = 0; i < OPTION_COUNT; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), ", %s", options[i].name);
    api_error(r, 400, "bad_request", "unknown form field `%s` (known: %s)", key, known);
    return MHD_NO;
}

static void upload_begin(request *r)
{
    spmvd *d = r->d;
    if (!api_check_content_length(r, atomic_load(&d->limits.max_upload_bytes)))
        return;
    upload_req *u = calloc(1, sizeof *u);
    if (!u) {
        api_error(r, 500, "out_of_memory", "out of memory");
        return;
    }
    r->state = u;
    u->r = r;
    u->spool_fd = -1;
    upload_init(&u->up, d);
    /* query options first: form fields, when present, override them */
    for (size_t i = 0; i < OPTION_COUNT; i++) {
        const char *v = api_query(r, options[i].name);
        if (v)
            snprintf(option_buf(u, i), FIELD_MAX, "%s", v);
    }
    upload_reader_options(&u->up, &u->opts);
    spmv_error err = {0};
    int rc = spmv_mm_reader_new(&u->opts, &u->reader, &err);
    if (rc != SPMV_OK) {
        api_error_spmv(r, rc, &err);
        return;
    }
    const char *ct = api_header_in(r, MHD_HTTP_HEADER_CONTENT_TYPE);
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
        api_error(r, 413, "too_large", "upload is over the limit of %lld bytes", (long long)limit);
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
    o->name = u->name[0] ? u->name : u->filename[0] ? u->filename : "matrix";
    if (strlen(o->name) > MATFILE_NAME_MAX || !name_ok(o->name)) {
        api_error(r, 400, "invalid_request", "`name` must be at most %d bytes of UTF-8 text without control characters",
                  MATFILE_NAME_MAX);
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
                  "uniform, powerlaw, graph_uniform, graph_powerlaw, banded_dense_row, lp, band), not \"%s\"",
                  u->generate);
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

/* ------------------------------------------------------------ the file */

/* The file's entries, read to their end: the Matrix Market reader's COO,
 * or the spooled .npz read straight into a CSR (the spool file removed).
 * 0, or -1 with the answer set. */
static int read_entries(request *r)
{
    upload_req *u = U(r);
    spmv_error err = {0};
    spmv_mm_info info;
    double t0 = spmv_now_ms();
    int rc;
    if (u->npz) {
        spmv_npz_info ninfo;
        close(u->spool_fd);
        u->spool_fd = -1;
        rc = spmv_npz_read_file_csr(u->spool_path, &u->opts, &u->up.csr, &ninfo, &err);
        spool_remove(u);
        if (rc == SPMV_OK)
            log_info("upload: .npz (%s layout) %lld x %lld, %lld entries, %lld duplicates summed, %s", ninfo.layout,
                     (long long)ninfo.rows, (long long)ninfo.cols, (long long)ninfo.entries,
                     (long long)ninfo.duplicates, ninfo.direct ? "read straight into the CSR" : "through a COO");
    } else if ((rc = spmv_mm_reader_finish(u->reader, &u->up.coo, &info, &err)) == SPMV_OK) {
        u->up.from_coo = true;
        u->up.symmetry = info.symmetry;
    }
    u->up.parse_ms += spmv_now_ms() - t0;
    spmv_mm_reader_free(u->reader);
    u->reader = NULL;
    if (rc == SPMV_OK)
        return 0;
    if (rc == SPMV_ERR_NOMEM)
        api_error_spmv(r, rc, &err);
    else
        api_error(r, 422, rc == SPMV_ERR_UNSUPPORTED ? "unsupported_matrix" : "bad_matrix", "%s", err.message);
    return -1;
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

static void load_finish(task *t, int status)
{
    upload_req *u = (upload_req *)t;
    upload_load_done(&u->up, status);
    api_task_done(u->r);
}

/* The matrix built: stored and answered (host), or loaded by the worker
 * upload_place chose while this thread writes the file. */
static void place(request *r)
{
    upload_req *u = U(r);
    spmv_error err = {0};
    worker *w = upload_place(&u->up);
    if (!w) {
        int rc = upload_store(&u->up, &err);
        if (rc != SPMV_OK)
            api_error_spmv(r, rc, &err);
        else
            answer_created(r);
        return;
    }
    u->up.base.run = upload_load_run;
    u->up.base.finish = load_finish;
    if (!api_submit_and_suspend(r, w, &u->up.base))
        return;
    /* While the worker loads the matrix, this thread writes the file; the
     * connection stays suspended, and upload_resumed (on this thread, so
     * only after this returns) answers once both are done. */
    upload_stage(&u->up);
}

/* The load and the write are both done: 201, or what failed (a load the
 * daemon's drain cancelled is a 503). */
static void upload_resumed(request *r)
{
    upload_req *u = U(r);
    spmv_error err = {0};
    int rc = upload_commit(&u->up, &err);
    if (rc != SPMV_OK)
        api_error_task(r, rc, &err);
    else
        answer_created(r);
}

/* The body is in: the options decoded, the entries read (or generated),
 * the matrix built and placed. */
static void upload_end(request *r)
{
    upload_req *u = U(r);
    spmv_error err = {0};
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
    if (u->generate[0]) {
        if (parse_options(r) != 0 || parse_recipe(r) != 0)
            return;
    } else {
        if (!u->decided)
            decide(r); /* a body of fewer than 4 bytes */
        if (r->failed || read_entries(r) != 0 || parse_options(r) != 0)
            return;
    }
    int rc = u->generate[0] ? upload_generate(&u->up, &err) : SPMV_OK;
    if (rc == SPMV_OK)
        rc = upload_build(&u->up, &err);
    if (rc != SPMV_OK) {
        api_error_spmv(r, rc, &err);
        return;
    }
    place(r);
}

static void upload_cleanup(request *r)
{
    upload_req *u = U(r);
    if (!u)
        return;
    if (u->pp)
        MHD_destroy_post_processor(u->pp);
    spool_remove(u);
    spmv_mm_reader_free(u->reader);
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
};
