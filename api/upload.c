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
 * When the body ends the host CSR is built in the asked dtype: an .npz is
 * read straight into it (a CSR archive with sorted rows: engine/npz.c),
 * a Matrix Market reader's COO is converted and freed at once; "mixed"
 * rounds its values to float32. Any other host formats asked for are
 * built, and then either the file is written and the answer is 201 (host
 * matrices), or a task copies the host CSR to the chosen GPU on that GPU's
 * worker while this thread writes the file under a temporary name; when
 * both are done the file gets its name and the answer is 201. If either
 * failed nothing is kept: a failed load (507 when the device is full, 503
 * when the daemon stops) removes the file, a failed write (500 naming the
 * step, a full disk too) frees the device copy with the matrix. The
 * answer is the descriptor plus Location.
 *
 * With `generate=<kind>` (no file, no body) the host CSR is built by
 * formula instead (spmv_gen_csr, counted against max_rows and max_nnz
 * before its entries are allocated) and everything after is the same; the
 * stored file then holds the recipe, not the arrays (daemon/matfile.h).
 *
 * With shard=true (under mpirun, issue 16) the matrix is held whole on
 * rank 0's host, as a host upload is (that copy is what is stored, and
 * what a restart re-shards), and a task on the cluster worker splits it
 * into row blocks and sends every rank its shard while the file is
 * written, as a GPU load does.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "daemon/log.h"

#define FIELD_MAX 256
#define POST_BUFFER 65536

typedef struct upload {
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
    double parse_ms;
    uint64_t bytes;
    /* after the body */
    spmv_coo coo;               /* the Matrix Market reader's, until the CSR is built */
    spmv_csr csr;               /* float64 from the reader, then the matrix's (moved into m) */
    bool generated;             /* `generate`: csr built by formula in its dtype, `recipe` kept */
    spmv_gen_spec recipe;
    matrix *m;
    worker *gpu;
    bool shard_gpu;             /* shard=true: onto the ranks' GPUs */
    int task_rc;
    spmv_error task_err;
    store_staged staged;        /* the file, written while the GPU loads */
    int store_rc;
    spmv_error store_err;
    atomic_bool load_failed;    /* set by the load's finish: the write stops early */
} upload;

typedef struct load_task {
    task base;
    request *r;
} load_task;

static upload *U(request *r) { return r->state; }

static void mm_feed(request *r, const char *data, size_t size)
{
    upload *u = U(r);
    spmv_error err = {0};
    double t0 = spmv_now_ms();
    int rc = spmv_mm_reader_feed(u->reader, data, size, &err);
    u->parse_ms += spmv_now_ms() - t0;
    if (rc == SPMV_ERR_NOMEM)
        api_error(r, 500, "out_of_memory", "%s", err.message);
    else if (rc != SPMV_OK)
        api_error(r, 422, rc == SPMV_ERR_UNSUPPORTED ? "unsupported_matrix" : "bad_matrix", "%s", err.message);
}

static void spool_write(request *r, const void *data, size_t size)
{
    upload *u = U(r);
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
    upload *u = U(r);
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
    upload *u = U(r);
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

static void spool_remove(upload *u)
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
 * field wins), each into its buffer of `upload`. */
static const struct {
    const char *name;
    size_t off;
} options[] = {
    {"name", offsetof(upload, name)},           {"dtype", offsetof(upload, dtype)},
    {"formats", offsetof(upload, formats)},     {"hack_size", offsetof(upload, hack_size)},
    {"device", offsetof(upload, device)},       {"shard", offsetof(upload, shard)},
    {"offsets", offsetof(upload, offsets)},     {"generate", offsetof(upload, generate)},
    {"n", offsetof(upload, gen_n)},             {"per_row", offsetof(upload, gen_per_row)},
    {"dense_len", offsetof(upload, gen_dense_len)}, {"seed", offsetof(upload, gen_seed)},
};
#define OPTION_COUNT (sizeof options / sizeof options[0])

static char *option_buf(upload *u, size_t i) { return (char *)u + options[i].off; }

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
    upload *u = U(r);
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
    upload *u = calloc(1, sizeof *u);
    if (!u) {
        api_error(r, 500, "out_of_memory", "out of memory");
        return;
    }
    r->state = u;
    u->spool_fd = -1;
    atomic_init(&u->load_failed, false);
    /* query options first: form fields, when present, override them */
    for (size_t i = 0; i < OPTION_COUNT; i++) {
        const char *v = api_query(r, options[i].name);
        if (v)
            snprintf(option_buf(u, i), FIELD_MAX, "%s", v);
    }
    spmv_mm_options opts = {.max_rows = atomic_load(&d->limits.max_rows),
                            .max_cols = atomic_load(&d->limits.max_rows),
                            .max_nnz = atomic_load(&d->limits.max_nnz), .threads = 0};
    u->opts = opts;
    spmv_error err = {0};
    int rc = spmv_mm_reader_new(&opts, &u->reader, &err);
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
    upload *u = U(r);
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

typedef struct upload_opts {
    spmv_dtype dtype;
    bool mixed;        /* dtype "mixed": float64 held, values rounded to float32 */
    unsigned formats;
    int32_t hack_size;
    int device;        /* -1: host only, -2: the GPU with most free memory, else GPU index */
    bool shard;        /* across the ranks of the MPI job */
    bool offsets64;    /* `offsets=64`: 64-bit row offsets whatever the size (nnz past INT32_MAX has them anyway) */
    bool device_named; /* `device` was given (not auto) */
    const char *name;
} upload_opts;

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

static int parse_options(request *r, upload_opts *o)
{
    upload *u = U(r);
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
    o->device_named = u->device[0] && strcmp(u->device, "auto") != 0;
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

/* ----------------------------------------------------------- finishing */

static void answer_created(request *r)
{
    upload *u = U(r);
    char loc[64];
    snprintf(loc, sizeof loc, "/v1/matrices/%s", u->m->meta.id);
    log_info("upload: stored %s \"%s\" %dx%d nnz %lld %s on %s (%llu bytes, parse %.1f ms)", u->m->meta.id,
             u->m->meta.name, u->m->host.rows, u->m->host.cols, (long long)u->m->host.nnz,
             matrix_dtype_name(u->m), u->m->dev_worker ? u->m->dev_worker->name : "cpu",
             (unsigned long long)u->bytes, u->m->meta.parse_ms);
    metrics_upload(r->d->metrics, u->bytes);
    api_json(r, 201, api_matrix_json(r->d, u->m));
    api_header(r, MHD_HTTP_HEADER_LOCATION, loc);
}

static void store_and_answer(request *r)
{
    upload *u = U(r);
    spmv_error err = {0};
    int rc = store_insert(r->d->store, u->m, &err);
    if (rc != SPMV_OK) {
        log_error("upload: %s", err.message);
        api_error_spmv(r, rc, &err);
        return;
    }
    answer_created(r);
}

static void load_run(task *t, worker *w)
{
    request *r = ((load_task *)t)->r;
    upload *u = U(r);
    if (u->m->meta.sharded)
        u->task_rc = worker_cluster_load(w, u->m, u->shard_gpu, false, &u->task_err);
    else
        u->task_rc = w->ops->matrix_load(w, u->m, &u->task_err);
}

static void load_finish(task *t, int status)
{
    request *r = ((load_task *)t)->r;
    if (status != SPMV_OK) {
        U(r)->task_rc = status;
        spmv_error_set(&U(r)->task_err, status, 0, "the daemon is shutting down");
    }
    if (U(r)->task_rc != SPMV_OK)
        atomic_store(&U(r)->load_failed, true); /* a 507 need not wait for the file it would remove */
    free(t);
    api_task_done(r);
}

/* The load and the write are both done: a failed load wins (as when the
 * file was written after it), then a failed write; else the file gets its
 * name, the matrix is listed and the answer is 201. What is not kept goes:
 * the staged file here, the device copy with the matrix in cleanup. */
static void upload_resumed(request *r)
{
    upload *u = U(r);
    spmv_error err = {0};
    if (u->task_rc != SPMV_OK) {
        store_discard(&u->staged);
        api_error_task(r, u->task_rc, &u->task_err);
        return;
    }
    if (u->store_rc != SPMV_OK) {
        log_error("upload: %s", u->store_err.message);
        api_error_spmv(r, u->store_rc, &u->store_err);
        return;
    }
    int rc = store_commit(r->d->store, u->m, &u->staged, &err);
    if (rc != SPMV_OK) {
        log_error("upload: %s", err.message);
        api_error_spmv(r, rc, &err);
        return;
    }
    answer_created(r);
}

/* The host CSR in the asked dtype, in u->csr: the Matrix Market reader's
 * COO converted (and freed: it is not needed past this), or the .npz
 * reader's float64 CSR as it is (its values cast for float32). */
static int host_csr(upload *u, const upload_opts *o, spmv_error *err)
{
    int rc = SPMV_OK;
    if (u->generated) {
        /* built in its dtype (float64 for mixed) */
    } else if (!u->npz) {
        rc = spmv_coo_to_csr(&u->coo, o->dtype, &u->csr, err);
        spmv_coo_free(&u->coo);
    } else if (u->csr.dtype != o->dtype) {
        rc = spmv_csr_to_dtype(&u->csr, o->dtype, err);
    }
    if (rc == SPMV_OK && o->mixed)
        rc = spmv_csr_round_to_float32(&u->csr, err);
    return rc;
}

/* Sharding by configuration (issue 16), for an upload under mpirun (more
 * than one rank, the cluster healthy) that names neither `shard` nor
 * `device`: at least shard_nnz entries, or (shard_when_full) bound for a
 * GPU with a CSR larger than the free memory of every GPU of rank 0 less
 * device_reserve_bytes. Says why in `why`. */
static bool shard_by_config(request *r, const upload_opts *o, const spmv_csr *c, char *why, size_t len)
{
    upload *u = U(r);
    spmvd *d = r->d;
    if (u->shard[0] || u->device[0] || spmv_csr_wide(c) || !d->cluster_worker || cluster_size(d->cluster) < 2 ||
        cluster_failed(d->cluster))
        return false;
    if (d->cfg.shard_nnz > 0 && c->nnz >= d->cfg.shard_nnz) {
        snprintf(why, len, "%lld entries >= shard_nnz %lld", (long long)c->nnz, (long long)d->cfg.shard_nnz);
        return true;
    }
    if (!d->cfg.shard_when_full || o->device != -2)
        return false;
    size_t need = ((size_t)c->rows + 1) * 4 + (size_t)c->nnz * (4 + spmv_dtype_size(o->dtype)), most = 0;
    for (int i = 0; i < d->ngpus; i++) {
        worker_info wi;
        d->gpus[i]->ops->info(d->gpus[i], &wi);
        size_t reserve = (size_t)d->cfg.device_reserve_bytes;
        size_t avail = wi.have_gpu_info && wi.gpu_info.mem_free > reserve ? wi.gpu_info.mem_free - reserve : 0;
        most = avail > most ? avail : most;
    }
    if (need <= most)
        return false;
    snprintf(why, len, "its CSR (%zu bytes) fits none of rank 0's GPUs (the most free: %zu bytes), shard_when_full",
             need, most);
    return true;
}

static int build_matrix(request *r, upload_opts *o, const spmv_mm_info *info)
{
    upload *u = U(r);
    spmv_error err = {0};
    matfile_meta meta;
    memset(&meta, 0, sizeof meta);
    store_new_id(meta.id);
    snprintf(meta.name, sizeof meta.name, "%s", o->name);
    meta.symmetry = info->symmetry;
    meta.formats = o->formats;
    meta.hack_size = o->hack_size;
    meta.device = o->device == -1 ? MATFILE_DEVICE_HOST : 0;
    meta.created = (int64_t)time(NULL);
    meta.parse_ms = u->parse_ms;
    meta.mixed = o->mixed;
    meta.generated = u->generated;
    meta.recipe = u->recipe;
    double t0 = spmv_now_ms();
    int rc = host_csr(u, o, &err);
    if (rc == SPMV_OK && o->offsets64)
        rc = spmv_csr_widen(&u->csr, &err);
    if (rc == SPMV_OK && spmv_csr_wide(&u->csr) && (o->shard || o->formats != SPMV_FMT_CSR)) {
        api_error(r, 422, "too_large", "matrix of %lld non-zeros with 64-bit row offsets%s: it is held as CSR only, "
                  "on the host or one GPU, in this version, not %s", (long long)u->csr.nnz,
                  o->offsets64 ? " (offsets=64)" : "", o->shard ? "sharded" : "with other formats (`formats`)");
        return SPMV_ERR_LIMIT;
    }
    char why[256];
    if (rc == SPMV_OK && shard_by_config(r, o, &u->csr, why, sizeof why)) {
        log_info("upload %s: sharded across the ranks: %s", meta.id, why);
        o->shard = true;
    }
    meta.sharded = o->shard;
    /* a GPU matrix keeps only the CSR on the host; other formats live on the device */
    spmv_format_limits lim = spmvd_format_limits(r->d);
    if (rc == SPMV_OK)
        rc = matrix_new_from_csr(&meta, &u->csr, o->device == -1 && !o->shard ? o->formats : SPMV_FMT_CSR, &lim,
                                 &u->m, &err);
    if (rc != SPMV_OK) {
        api_error_spmv(r, rc, &err);
        return rc;
    }
    u->m->meta.convert_ms = spmv_now_ms() - t0;
    return SPMV_OK;
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

/* Bytes the host can still give (MemAvailable), or -1 when unknown. */
static int64_t host_available_bytes(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    long long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb < 0 ? -1 : (int64_t)kb * 1024;
}

/* `generate=<kind>` (with n, per_row, dense_len, seed as spmv-gen takes
 * them): the matrix is built here by formula, straight into the CSR of the
 * asked dtype, instead of read from a body; the file keeps the recipe. */
static int generate_csr(request *r, const upload_opts *o)
{
    upload *u = U(r);
    spmv_error err = {0};
    spmv_gen_spec *g = &u->recipe;
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
    double t0 = spmv_now_ms();
    int64_t rows = 0, cols = 0, max_rows = atomic_load(&r->d->limits.max_rows);
    int rc = spmv_gen_shape(g, &rows, &cols, &err);
    if (rc == SPMV_OK && (rows > max_rows || cols > max_rows)) /* max_rows bounds the columns too, as for uploads */
        rc = spmv_error_set(&err, SPMV_ERR_LIMIT, 0, "%s with n = %lld is %lld x %lld, past max_rows",
                            spmv_gen_kind_name(g->kind), (long long)g->n, (long long)rows, (long long)cols);
    /* The host's memory bounds the build as max_nnz does (nothing of it is
     * allocated before the count): the row offsets of pass 1 (8 bytes a
     * row) and the entries (a column and a value each), a tenth of what
     * is available kept for everything else. */
    int64_t limit = atomic_load(&r->d->limits.max_nnz), avail = host_available_bytes();
    if (rc == SPMV_OK && avail > 0) {
        int64_t room = avail - avail / 10 - (rows + 1) * 8;
        int64_t fit = room > 0 ? room / (int64_t)(4 + spmv_dtype_size(o->dtype)) : 0;
        if (fit < 1 && rows > 0)
            rc = spmv_error_set(&err, SPMV_ERR_LIMIT, 0, "%s with n = %lld: its %lld row offsets alone do not fit "
                                "the host's memory", spmv_gen_kind_name(g->kind), (long long)g->n, (long long)rows);
        limit = fit < limit ? fit : limit;
    }
    if (rc == SPMV_OK)
        rc = spmv_gen_csr(g, o->dtype, o->offsets64, limit, &u->csr, &err);
    u->parse_ms = spmv_now_ms() - t0;
    if (rc != SPMV_OK) {
        if (rc == SPMV_ERR_LIMIT)
            api_error(r, 422, "too_large", "`generate`: %s (this daemon's max_nnz %lld, max_rows %lld; the host has "
                      "%lld bytes of memory available, 90 %% of which a build may take)", err.message,
                      (long long)atomic_load(&r->d->limits.max_nnz), (long long)atomic_load(&r->d->limits.max_rows),
                      (long long)avail);
        else
            api_error_spmv(r, rc, &err);
        return -1;
    }
    u->generated = true;
    log_info("upload: generated %s n %lld per_row %d dense_len %lld seed %llu: %d x %d, %lld non-zeros in %.1f ms",
             spmv_gen_kind_name(g->kind), (long long)g->n, g->per_row, (long long)g->dense_len,
             (unsigned long long)g->seed, u->csr.rows, u->csr.cols, (long long)u->csr.nnz, u->parse_ms);
    return 0;
}

static void upload_place(request *r, const upload_opts *o);

static void upload_end(request *r)
{
    upload *u = U(r);
    spmv_error err = {0};
    spmv_mm_info info;
    upload_opts o;
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
        memset(&info, 0, sizeof info);
        info.symmetry = SPMV_MM_GENERAL;
        if (parse_options(r, &o) != 0 || generate_csr(r, &o) != 0 || build_matrix(r, &o, &info) != 0)
            return;
        upload_place(r, &o);
        return;
    }
    if (!u->decided)
        decide(r); /* a body of fewer than 4 bytes */
    if (r->failed)
        return;
    double t0 = spmv_now_ms();
    int rc;
    if (u->npz) {
        spmv_npz_info ninfo;
        close(u->spool_fd);
        u->spool_fd = -1;
        rc = spmv_npz_read_file_csr(u->spool_path, &u->opts, &u->csr, &ninfo, &err);
        spool_remove(u);
        memset(&info, 0, sizeof info);
        info.symmetry = SPMV_MM_GENERAL;
        if (rc == SPMV_OK)
            log_info("upload: .npz (%s layout) %lld x %lld, %lld entries, %lld duplicates summed, %s", ninfo.layout,
                     (long long)ninfo.rows, (long long)ninfo.cols, (long long)ninfo.entries,
                     (long long)ninfo.duplicates, ninfo.direct ? "read straight into the CSR" : "through a COO");
    } else {
        rc = spmv_mm_reader_finish(u->reader, &u->coo, &info, &err);
    }
    u->parse_ms += spmv_now_ms() - t0;
    spmv_mm_reader_free(u->reader);
    u->reader = NULL;
    if (rc != SPMV_OK) {
        if (rc == SPMV_ERR_NOMEM)
            api_error_spmv(r, rc, &err);
        else
            api_error(r, 422, rc == SPMV_ERR_UNSUPPORTED ? "unsupported_matrix" : "bad_matrix", "%s", err.message);
        return;
    }
    if (parse_options(r, &o) != 0 || build_matrix(r, &o, &info) != 0)
        return;
    upload_place(r, &o);
}

/* The matrix built: stored and answered (host), or loaded onto its GPU or
 * the ranks while its file is written. */
static void upload_place(request *r, const upload_opts *o)
{
    upload *u = U(r);
    if (o->device == -1 && !o->shard) {
        store_and_answer(r);
        return;
    }
    if (o->shard) { /* the host CSR is what the shards are cut from */
        u->shard_gpu = o->device != -1;
        u->gpu = r->d->cluster_worker;
    } else {
        u->gpu = spmvd_pick_gpu(r->d, o->device == -2 ? -1 : o->device);
        u->m->meta.device = u->gpu->gpu; /* known now: the file is written while the load runs */
    }
    matfile_meta meta = u->m->meta; /* a copy: the worker fills in its timings meanwhile */
    load_task *t = calloc(1, sizeof *t);
    if (!t) {
        api_error(r, 500, "out_of_memory", "out of memory");
        return;
    }
    t->base.run = load_run;
    t->base.finish = load_finish;
    t->r = r;
    if (!api_submit_and_suspend(r, u->gpu, &t->base)) {
        free(t);
        return;
    }
    /* While the worker copies the CSR to its device, this thread writes the
     * file; the connection stays suspended, and upload_resumed (on this
     * thread, so only after this returns) answers once both are done. */
    u->store_rc = store_stage(r->d->store, &meta, &u->m->host.csr, &u->load_failed, &u->staged, &u->store_err);
}

static void upload_cleanup(request *r)
{
    upload *u = U(r);
    if (!u)
        return;
    if (u->pp)
        MHD_destroy_post_processor(u->pp);
    spool_remove(u);
    spmv_mm_reader_free(u->reader);
    spmv_coo_free(&u->coo);
    spmv_csr_free(&u->csr);
    store_discard(&u->staged);
    matrix_unref(u->m);
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
