/* upload.c — a new matrix read, built, placed and stored (daemon/upload.h).
 *
 * The HTTP thread only spools the body (a gzip chunk may expand a
 * thousandfold: no parsing on a thread that serves /v1/health): in memory
 * up to UPLOAD_MEMORY_BYTES, past it to a file in the state directory
 * (libzip needs to seek in an .npz anyway). Small uploads, most of them,
 * so never cost the HTTP thread a file's creation and unlink, which wait
 * behind the fsyncs of the stores on a busy disk. The rest
 * is one task on an upload worker: the spool read in chunks through the
 * Matrix Market reader (gzip found by its magic bytes), or as an .npz
 * (zip magic) straight into a CSR; the spool removed.
 *
 * The host CSR is built in the asked dtype on the upload worker that read
 * the body: a Matrix Market reader's COO converted (and freed at once),
 * an .npz's float64 CSR cast, a generated one taken as built; "mixed"
 * rounds the values to float32. Any other host formats asked for are built
 * with the matrix when it stays on the host; a GPU matrix keeps only the
 * CSR on the host and builds the rest on the device on first use.
 *
 * A device matrix is loaded by its worker while the HTTP thread writes its
 * file under a temporary name: the two overlap, and either failing keeps
 * nothing (a failed load removes the staged file; a failed write leaves
 * the device copy to go with the matrix).
 *
 * Nothing a request declares is allocated before it is admitted
 * (upload_admit, daemon/memory.h): a file's sizes reach it through the
 * reader's hook as soon as they are read (the Matrix Market size line, an
 * .npz's shape and data header), a generated matrix's once counted; its
 * CSR must fit max_matrix_bytes, and the reading's peak is reserved
 * against the host's available memory until the request ends.
 *
 * Under mpirun (issue 16) a matrix is sharded when the request says so
 * (shard=true) or by configuration: at least shard_nnz entries, or
 * (shard_when_full) bound for a GPU and larger than every GPU of rank 0
 * can take. It is held whole on rank 0's host, which is what is stored
 * and what a restart re-shards, and the cluster worker cuts it into row
 * blocks and sends every rank its shard while the file is written.
 */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "daemon/log.h"
#include "daemon/memory.h"
#include "daemon/upload.h"

#define READ_CHUNK (1 << 20)

void upload_init(upload *u, spmvd *d)
{
    u->d = d;
    u->symmetry = SPMV_MM_GENERAL;
    u->spool_fd = -1;
    atomic_init(&u->load_failed, false);
    atomic_init(&u->pending, 0);
}

/* ------------------------------------------------------------- spool */

/* Appends to the in-memory head when it still fits UPLOAD_MEMORY_BYTES. */
static bool head_append(upload *u, const void *data, size_t size)
{
    if (u->spool_fd >= 0 || u->head_len + size > UPLOAD_MEMORY_BYTES)
        return false;
    if (u->head_len + size > u->head_cap) {
        size_t cap = u->head_cap ? u->head_cap : 16384;
        while (cap < u->head_len + size)
            cap *= 2;
        char *nb = realloc(u->head, cap < UPLOAD_MEMORY_BYTES ? cap : UPLOAD_MEMORY_BYTES);
        if (!nb)
            return false; /* to the file then */
        u->head = nb;
        u->head_cap = cap < UPLOAD_MEMORY_BYTES ? cap : UPLOAD_MEMORY_BYTES;
    }
    memcpy(u->head + u->head_len, data, size);
    u->head_len += size;
    u->spooled += size;
    return true;
}

static int spool_out(upload *u, const void *data, size_t size, spmv_error *err)
{
    for (const char *p = data; size > 0;) {
        ssize_t n = write(u->spool_fd, p, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return spmv_error_set(err, SPMV_ERR_IO, 0, "spooling the upload to %s: %s", u->spool_path,
                                  n < 0 ? strerror(errno) : "short write");
        p += n;
        size -= (size_t)n;
        u->spooled += (uint64_t)n;
    }
    return SPMV_OK;
}

int upload_spool_write(upload *u, const void *data, size_t size, spmv_error *err)
{
    if (head_append(u, data, size))
        return SPMV_OK;
    if (u->spool_fd < 0) {
        const char *dir = store_dir(u->d->store);
        int n = snprintf(u->spool_path, sizeof u->spool_path, "%s/.upload-XXXXXX.tmp", dir);
        if (n < 0 || (size_t)n >= sizeof u->spool_path || (u->spool_fd = mkostemps(u->spool_path, 4, O_CLOEXEC)) < 0) {
            u->spool_fd = -1;
            u->spool_path[0] = '\0';
            return spmv_error_set(err, SPMV_ERR_IO, 0, "cannot create a spool file for the upload in %s: %s", dir,
                                  strerror(errno));
        }
        u->spooled -= u->head_len; /* counted again as it goes to the file */
        int rc = spool_out(u, u->head, u->head_len, err);
        free(u->head);
        u->head = NULL;
        u->head_len = u->head_cap = 0;
        if (rc != SPMV_OK)
            return rc;
    }
    return spool_out(u, data, size, err);
}

static void spool_remove(upload *u)
{
    free(u->head);
    u->head = NULL;
    u->head_len = u->head_cap = 0;
    if (u->spool_fd >= 0)
        close(u->spool_fd);
    u->spool_fd = -1;
    if (u->spool_path[0])
        unlink(u->spool_path);
    u->spool_path[0] = '\0';
}

/* -------------------------------------------------------------- read */

/* The spool through the Matrix Market reader, a chunk at a time, into
 * u->coo; the daemon's drain stops it between two chunks. */
static int read_mm(upload *u, worker *w, const spmv_mm_options *opts, spmv_error *err)
{
    spmv_mm_reader *reader = NULL;
    spmv_mm_info info;
    char *buf = malloc(READ_CHUNK);
    int rc = buf ? spmv_mm_reader_new(opts, &reader, err)
                 : spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory for the read buffer");
    if (rc == SPMV_OK && u->head_len) /* a body that stayed in memory */
        rc = spmv_mm_reader_feed(reader, u->head, u->head_len, err);
    if (rc == SPMV_OK && u->spool_fd >= 0 && lseek(u->spool_fd, 0, SEEK_SET) != 0)
        rc = spmv_error_set(err, SPMV_ERR_IO, 0, "reading the spooled upload %s: %s", u->spool_path, strerror(errno));
    while (rc == SPMV_OK && u->spool_fd >= 0) {
        ssize_t n = read(u->spool_fd, buf, READ_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            rc = spmv_error_set(err, SPMV_ERR_IO, 0, "reading the spooled upload %s: %s", u->spool_path,
                                strerror(errno));
        if (n <= 0)
            break;
        if (w)
            worker_heartbeat(w);
        if (atomic_load(&u->d->draining))
            rc = spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "the daemon is shutting down");
        else
            rc = spmv_mm_reader_feed(reader, buf, (size_t)n, err);
    }
    if (rc == SPMV_OK && (rc = spmv_mm_reader_finish(reader, &u->coo, &info, err)) == SPMV_OK) {
        u->from_coo = true;
        u->symmetry = info.symmetry;
    }
    spmv_mm_reader_free(reader);
    free(buf);
    return rc;
}

/* Whether the spool starts as a zip archive does (an .npz). */
static bool spool_is_npz(upload *u)
{
    unsigned char head[4];
    if (u->spool_fd < 0)
        return spmv_npz_magic(u->head, u->head_len);
    return pread(u->spool_fd, head, sizeof head, 0) == (ssize_t)sizeof head && spmv_npz_magic(head, sizeof head);
}

int upload_read(upload *u, worker *w, spmv_error *err)
{
    spmv_mm_options opts;
    upload_reader_options(u, &opts);
    double t0 = spmv_now_ms();
    int rc;
    if (spool_is_npz(u)) {
        spmv_npz_info ninfo;
        rc = u->spool_fd >= 0 ? spmv_npz_read_file_csr(u->spool_path, &opts, &u->csr, &ninfo, err)
                              : spmv_npz_read_buffer_csr(u->head, u->head_len, &opts, &u->csr, &ninfo, err);
        if (rc == SPMV_OK)
            log_info("upload: .npz (%s layout) %lld x %lld, %lld entries, %lld duplicates summed, %s", ninfo.layout,
                     (long long)ninfo.rows, (long long)ninfo.cols, (long long)ninfo.entries,
                     (long long)ninfo.duplicates, ninfo.direct ? "read straight into the CSR" : "through a COO");
    } else {
        rc = read_mm(u, w, &opts, err);
    }
    spool_remove(u);
    u->parse_ms += spmv_now_ms() - t0;
    return rc;
}

/* ------------------------------------------------------------ ingest */

/* The built matrix where upload_place sends it: stored now (the host), or
 * its load submitted to the device's worker while this thread stages the
 * file. */
static void place_and_store(upload *u)
{
    worker *lw = upload_place(u);
    if (!lw) {
        u->phase = UPLOAD_STORE;
        u->ingest_rc = upload_store(u, &u->ingest_err);
        return;
    }
    u->phase = UPLOAD_SUBMIT;
    u->base.run = upload_load_run;
    atomic_fetch_add(&u->pending, 1); /* the load's finish, as the ingest's, must come before the answer */
    int rc = lw->ops->submit(lw, &u->base, false);
    if (rc != SPMV_OK) {
        atomic_fetch_sub(&u->pending, 1);
        u->ingest_rc = rc;
        return;
    }
    u->phase = UPLOAD_LOAD;
    upload_stage(u);
}

void upload_ingest_run(task *t, worker *w)
{
    upload *u = (upload *)((char *)t - offsetof(upload, ingest));
    u->phase = UPLOAD_READ;
    if (!u->generate && (u->ingest_rc = upload_read(u, w, &u->ingest_err)) != SPMV_OK)
        return;
    u->phase = UPLOAD_BUILD;
    if ((u->generate && (u->ingest_rc = upload_generate(u, &u->ingest_err)) != SPMV_OK) ||
        (u->ingest_rc = upload_build(u, &u->ingest_err)) != SPMV_OK)
        return;
    if (u->spec.if_exists == UPLOAD_REUSE && (u->reused = upload_reusable(u)))
        return; /* the same matrix is stored already: nothing placed or stored */
    place_and_store(u);
}

/* ---------------------------------------------------------- admission */

/* The reader's hook (spmv_mm_options.admit): the sizes a file declares,
 * before anything is allocated from them. */
static int reader_admit(void *ctx, const spmv_mm_declared *dcl, spmv_error *err)
{
    return upload_admit(ctx, dcl, err);
}

void upload_reader_options(upload *u, spmv_mm_options *o)
{
    spmvd *d = u->d;
    memset(o, 0, sizeof *o);
    o->max_rows = o->max_cols = atomic_load(&d->limits.max_rows);
    o->max_nnz = atomic_load(&d->limits.max_nnz);
    o->admit = reader_admit;
    o->admit_ctx = u;
}

int upload_admit(upload *u, const spmv_mm_declared *dcl, spmv_error *err)
{
    char what[160];
    snprintf(what, sizeof what, "a %lld x %lld matrix of %lld entries", (long long)dcl->rows, (long long)dcl->cols,
             (long long)dcl->entries);
    return memory_admit_matrix(u->d, dcl->csr_bytes, dcl->peak_bytes, what, &u->mem_held, err);
}

/* ----------------------------------------------------------- generate */

/* A recipe's matrix counted (spmv_gen_count allocates nothing) and
 * admitted before it is built: its entries against max_nnz, its CSR
 * against max_matrix_bytes, and the build's peak (pass 1's 8-byte row
 * offsets beside the CSR) reserved. *nnz: the count. */
static int gen_admit(upload *u, int64_t rows, int64_t *nnz, spmv_error *err)
{
    const spmv_gen_spec *g = &u->recipe;
    int rc = spmv_gen_count(g, nnz, err);
    int64_t max_nnz = atomic_load(&u->d->limits.max_nnz);
    if (rc != SPMV_OK)
        return rc;
    if (*nnz > max_nnz)
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0, "%s with n = %lld has %lld non-zeros; at most %lld are allowed "
                              "(max_nnz)",
                              spmv_gen_kind_name(g->kind), (long long)g->n, (long long)*nnz, (long long)max_nnz);
    int64_t offset = u->spec.offsets64 || *nnz > INT32_MAX ? 8 : 4;
    int64_t csr = (rows + 1) * offset + *nnz * (int64_t)(4 + spmv_dtype_size(u->spec.dtype));
    char what[160];
    snprintf(what, sizeof what, "%s with n = %lld (%lld x %lld rows, %lld non-zeros)", spmv_gen_kind_name(g->kind),
             (long long)g->n, (long long)rows, (long long)rows, (long long)*nnz);
    return memory_admit_matrix(u->d, csr, csr + (rows + 1) * 8, what, &u->mem_held, err);
}

int upload_generate(upload *u, spmv_error *err)
{
    const spmv_gen_spec *g = &u->recipe;
    double t0 = spmv_now_ms();
    int64_t rows = 0, cols = 0, nnz = 0, max_rows = atomic_load(&u->d->limits.max_rows);
    int rc = spmv_gen_shape(g, &rows, &cols, err);
    if (rc == SPMV_OK && (rows > max_rows || cols > max_rows)) /* max_rows bounds the columns too, as for uploads */
        rc = spmv_error_set(err, SPMV_ERR_LIMIT, 0, "%s with n = %lld is %lld x %lld, past max_rows (%lld)",
                            spmv_gen_kind_name(g->kind), (long long)g->n, (long long)rows, (long long)cols,
                            (long long)max_rows);
    /* counted and admitted first: nothing of it is allocated before */
    if (rc == SPMV_OK)
        rc = gen_admit(u, rows, &nnz, err);
    if (rc == SPMV_OK)
        rc = spmv_gen_csr(g, u->spec.dtype, u->spec.offsets64, nnz, &u->csr, err);
    u->parse_ms = spmv_now_ms() - t0;
    if (rc == SPMV_ERR_LIMIT) {
        char why[sizeof err->message];
        snprintf(why, sizeof why, "%s", err->message);
        return spmv_error_set(err, rc, 0, "`generate`: %s", why);
    }
    if (rc != SPMV_OK)
        return rc;
    u->generated = true;
    log_info("upload: generated %s n %lld per_row %d dense_len %lld seed %llu: %d x %d, %lld non-zeros in %.1f ms",
             spmv_gen_kind_name(g->kind), (long long)g->n, g->per_row, (long long)g->dense_len,
             (unsigned long long)g->seed, u->csr.rows, u->csr.cols, (long long)u->csr.nnz, u->parse_ms);
    return SPMV_OK;
}

/* -------------------------------------------------------------- build */

/* dtype float32: the first value the reader's float64 entries hold past
 * float32's range, refused naming its entry (docs/matrix-market.md: no
 * silent infinity). */
static int fits_float32(const upload *u, spmv_error *err)
{
    bool coo = u->from_coo;
    int64_t k = coo ? spmv_float32_overflow_at(u->coo.val, u->coo.nnz) : spmv_float32_overflow_at(u->csr.val, u->csr.nnz);
    if (k < 0)
        return SPMV_OK;
    int32_t i = 0;
    while (!coo && spmv_csr_row_begin(&u->csr, i + 1) <= k) /* the row of entry k (an error path: a scan is fine) */
        i++;
    double v = coo ? ((const double *)u->coo.val)[k] : ((const double *)u->csr.val)[k];
    return spmv_error_set(err, SPMV_ERR_LIMIT, 0, "dtype float32: entry (%d, %d) = %.17g is outside float32's range "
                          "(|v| <= %.9g): it would be stored as infinity (upload it as float64)",
                          (coo ? u->coo.row[k] : i) + 1, (coo ? u->coo.col[k] : u->csr.col[k]) + 1, v, (double)FLT_MAX);
}

/* The host CSR in the asked dtype, in u->csr: the Matrix Market reader's
 * COO converted (and freed: it is not needed past this), or the .npz
 * reader's float64 CSR as it is (its values cast for float32); a
 * generated CSR is in its dtype already. */
static int host_csr(upload *u, spmv_error *err)
{
    const upload_spec *o = &u->spec;
    int rc = SPMV_OK;
    /* float32 asked for: a value past its range is refused, not made infinite (the reader's values are float64) */
    if (!u->generated && o->dtype == SPMV_FLOAT32 && (u->from_coo || u->csr.dtype == SPMV_FLOAT64) &&
        (rc = fits_float32(u, err)) != SPMV_OK)
        return rc;
    if (u->generated) {
        /* built in its dtype (float64 for mixed) */
    } else if (u->from_coo) {
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
static bool shard_by_config(upload *u, char *why, size_t len)
{
    spmvd *d = u->d;
    const upload_spec *o = &u->spec;
    const spmv_csr *c = &u->csr;
    if (o->placed || spmv_csr_wide(c) || !d->cluster_worker || cluster_size(d->cluster) < 2 ||
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

/* The new matrix's header: its id, what was asked, how it was read. */
static void new_meta(const upload *u, matfile_meta *meta)
{
    const upload_spec *o = &u->spec;
    memset(meta, 0, sizeof *meta);
    store_new_id(meta->id);
    snprintf(meta->name, sizeof meta->name, "%s", o->name);
    meta->symmetry = u->symmetry;
    meta->formats = o->formats;
    meta->hack_size = o->hack_size;
    meta->device = o->device == -1 ? MATFILE_DEVICE_HOST : 0;
    meta->created = (int64_t)time(NULL);
    meta->parse_ms = u->parse_ms;
    meta->mixed = o->mixed;
    meta->generated = u->generated;
    meta->recipe = u->recipe;
}

int upload_build(upload *u, spmv_error *err)
{
    upload_spec *o = &u->spec;
    matfile_meta meta;
    new_meta(u, &meta);
    double t0 = spmv_now_ms();
    int rc = host_csr(u, err);
    if (rc == SPMV_OK && o->offsets64)
        rc = spmv_csr_widen(&u->csr, err);
    if (rc == SPMV_OK && spmv_csr_wide(&u->csr) &&
        (o->shard || (o->formats & ~(unsigned)(SPMV_FMT_CSR | SPMV_FMT_PSELL))))
        return spmv_error_set(err, SPMV_ERR_LIMIT, 0, "matrix of %lld non-zeros with 64-bit row offsets%s: it is "
                              "held as CSR and PSELL only, on the host or one GPU, in this version, not %s",
                              (long long)u->csr.nnz, o->offsets64 ? " (offsets=64)" : "",
                              o->shard ? "sharded" : "with other formats (`formats`)");
    char why[256];
    if (rc == SPMV_OK && shard_by_config(u, why, sizeof why)) {
        log_info("upload %s: sharded across the ranks: %s", meta.id, why);
        o->shard = true;
    }
    meta.sharded = o->shard;
    /* a GPU matrix keeps only the CSR on the host; other formats live on the device */
    spmv_format_limits lim = spmvd_format_limits(u->d);
    if (rc == SPMV_OK)
        rc = matrix_new_from_csr(&meta, &u->csr, o->device == -1 && !o->shard ? o->formats : SPMV_FMT_CSR, &lim,
                                 &u->m, err);
    if (rc != SPMV_OK)
        return rc;
    u->m->meta.convert_ms = spmv_now_ms() - t0;
    return SPMV_OK;
}

/* --------------------------------------------------------- if_exists */

#define NAMED_MAX 64

matrix *upload_reusable(upload *u)
{
    matrix *named[NAMED_MAX], *found = NULL;
    size_t n = store_named(u->d->store, u->m->meta.name, false, named, NAMED_MAX);
    for (size_t i = 0; i < n && i < NAMED_MAX; i++) {
        matrix *m = named[i];
        pthread_mutex_lock(&m->lock);
        bool same = memcmp(m->meta.sha256, u->m->meta.sha256, sizeof m->meta.sha256) == 0;
        pthread_mutex_unlock(&m->lock);
        if (!found && same && m->meta.mixed == u->m->meta.mixed && m->host.dtype == u->m->host.dtype)
            found = matrix_ref(m);
        matrix_unref(m);
    }
    return found;
}

size_t upload_replace(upload *u)
{
    matrix *named[NAMED_MAX];
    size_t n = store_named(u->d->store, u->m->meta.name, false, named, NAMED_MAX), gone = 0;
    for (size_t i = 0; i < n && i < NAMED_MAX; i++) {
        spmv_error err = {0};
        int rc = named[i] == u->m ? SPMV_ERR_NOT_FOUND : spmvd_remove_matrix(u->d, named[i]->meta.id, &err);
        if (rc == SPMV_OK) {
            log_info("upload %s: replaces %s \"%s\" (if_exists=replace)", u->m->meta.id, named[i]->meta.id,
                     named[i]->meta.name);
            gone++;
        } else if (rc != SPMV_ERR_NOT_FOUND) {
            log_error("upload %s: if_exists=replace: %s", u->m->meta.id, err.message);
        }
        matrix_unref(named[i]);
    }
    return gone;
}

/* -------------------------------------------------------------- place */

worker *upload_place(upload *u)
{
    const upload_spec *o = &u->spec;
    if (o->device == -1 && !o->shard)
        return u->w = NULL;
    if (o->shard) { /* the host CSR is what the shards are cut from */
        u->shard_gpu = o->device != -1;
        u->w = u->d->cluster_worker;
    } else {
        u->w = spmvd_pick_gpu(u->d, o->device == -2 ? -1 : o->device);
        u->m->meta.device = u->w->gpu; /* known now: the file is written while the load runs */
    }
    u->meta = u->m->meta; /* a copy: the worker fills in its timings meanwhile */
    return u->w;
}

int upload_store(upload *u, spmv_error *err)
{
    int rc = store_insert(u->d->store, u->m, err);
    if (rc != SPMV_OK)
        log_error("upload: %s", err->message);
    return rc;
}

void upload_load_run(task *t, worker *w)
{
    upload *u = (upload *)t;
    if (u->m->meta.sharded)
        u->rc = worker_cluster_load(w, u->m, u->shard_gpu, false, &u->err);
    else
        u->rc = w->ops->matrix_load(w, u->m, &u->err);
}

void upload_load_done(upload *u, int status)
{
    if (status != SPMV_OK) {
        u->rc = status;
        spmv_error_set(&u->err, status, 0, "the daemon is shutting down");
    }
    if (u->rc != SPMV_OK)
        atomic_store(&u->load_failed, true); /* a 507 need not wait for the file it would remove */
}

void upload_stage(upload *u)
{
    u->store_rc = store_stage(u->d->store, &u->meta, &u->m->host.csr, &u->load_failed, &u->staged, &u->store_err);
}

/* A failed load wins (as when the file was written after it), then a
 * failed write; else the file gets its name and the matrix is listed.
 * What is not kept goes: the staged file here, the device copy with the
 * matrix in upload_release. */
int upload_commit(upload *u, spmv_error *err)
{
    if (u->rc != SPMV_OK) {
        store_discard(&u->staged);
        *err = u->err;
        return u->rc;
    }
    if (u->store_rc != SPMV_OK) {
        log_error("upload: %s", u->store_err.message);
        *err = u->store_err;
        return u->store_rc;
    }
    int rc = store_commit(u->d->store, u->m, &u->staged, err);
    if (rc != SPMV_OK)
        log_error("upload: %s", err->message);
    return rc;
}

void upload_release(upload *u)
{
    matrix_unref(u->reused);
    u->reused = NULL;
    spool_remove(u);
    spmv_coo_free(&u->coo);
    spmv_csr_free(&u->csr);
    store_discard(&u->staged);
    matrix_unref(u->m);
    u->m = NULL;
    /* what the reading reserved is freed or held by the stored matrix now */
    size_t held = (size_t)u->mem_held;
    memory_release(u->d, &u->mem_held);
    memory_trim(held);
}
