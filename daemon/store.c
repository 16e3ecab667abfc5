/* store.c — the live matrix list and its state directory.
 *
 * The list is a singly linked list under one mutex: the daemon holds tens
 * to hundreds of matrices, and every lookup is dwarfed by the request that
 * made it, so a hash table would buy nothing measurable. Files are written
 * before a matrix is listed (an answered upload is on disk) and unlinked
 * before it is unlisted (a DELETE that answered 204 does not come back
 * after a crash). Reload moves any file that fails verification into
 * damaged/ so one bad file never keeps the daemon from starting.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <uuid/uuid.h>

#include "daemon/log.h"
#include "daemon/memory.h"
#include "daemon/preconds.h"
#include "daemon/store.h"
#include "daemon/autotune.h"
#include "daemon/worker.h"

struct store {
    char *dir;
    int lock_fd;
    pthread_mutex_t lock;
    matrix *head, *tail;
    size_t count;
};

/* ------------------------------------------------------------- ids */

void store_new_id(char out[MATFILE_ID_LEN + 1])
{
    uuid_t u;
    uuid_generate_random(u);
    uuid_unparse_lower(u, out);
}

bool store_id_valid(const char *text)
{
    uuid_t u;
    if (strlen(text) != MATFILE_ID_LEN)
        return false;
    for (int i = 0; i < MATFILE_ID_LEN; i++) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        char c = text[i];
        if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
    }
    return uuid_parse(text, u) == 0;
}

/* --------------------------------------------------------- matrices */

int matrix_new_from_csr(const matfile_meta *meta, spmv_csr *csr, unsigned formats, const spmv_format_limits *lim,
                        matrix **out, spmv_error *err)
{
    matrix *m = calloc(1, sizeof *m);
    if (!m)
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory");
    m->meta = *meta;
    if (!m->meta.has_sha256 && spmv_csr_sha256(csr, m->meta.sha256) != SPMV_OK) {
        free(m);
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory hashing the matrix");
    }
    m->meta.has_sha256 = true;
    if (!m->meta.symmetry_known) {
        m->meta.symmetric = spmv_csr_symmetric(csr);
        m->meta.symmetry_known = true;
    }
    pthread_mutex_init(&m->lock, NULL);
    atomic_store(&m->refs, 1);
    m->host.rows = csr->rows;
    m->host.cols = csr->cols;
    m->host.nnz = csr->nnz;
    m->host.dtype = csr->dtype;
    m->host.hack_size = meta->hack_size;
    m->host.formats = SPMV_FMT_CSR;
    if (lim)
        m->host.limits = *lim;
    m->host.csr = *csr;
    memset(csr, 0, sizeof *csr);
    for (unsigned f = SPMV_FMT_COO; f <= SPMV_FMT_LAST; f <<= 1) {
        if (!(formats & f) || f == SPMV_FMT_CSR)
            continue;
        int rc = spmv_matrix_add_format(&m->host, (spmv_format)f, err);
        /* Past the padding rule, PBSR without blocks or SPSELL of a matrix
         * not symmetric: not built, its kernels say why. */
        if (rc == SPMV_ERR_LIMIT || rc == SPMV_ERR_UNSUPPORTED ||
            (rc == SPMV_ERR_UNAVAILABLE && f == SPMV_FMT_SPSELL))
            continue;
        if (rc != 0) {
            matrix_unref(m);
            return rc;
        }
    }
    *out = m;
    return SPMV_OK;
}

matrix *matrix_ref(matrix *m)
{
    atomic_fetch_add(&m->refs, 1);
    return m;
}

static size_t transpose_bytes(const matrix *m);

void matrix_unref(matrix *m)
{
    if (!m || atomic_fetch_sub(&m->refs, 1) != 1)
        return;
    preconds_clear(m); /* each freed on its worker: before the device copy's release, queued after them */
    if (m->dev && m->dev_worker)
        m->dev_worker->ops->matrix_release(m->dev_worker, m->dev);
    if (m->shards && m->shard_worker) /* freed on every rank, from the cluster worker's thread */
        m->shard_worker->ops->matrix_release(m->shard_worker, m->shards);
    size_t freed = spmv_matrix_format_bytes(&m->host, SPMV_FMT_ALL) + transpose_bytes(m);
    spmv_matrix_free(&m->host);
    if (m->host_t) {
        spmv_matrix_free(m->host_t);
        free(m->host_t);
    }
    pthread_mutex_destroy(&m->lock);
    free(m);
    memory_trim(freed); /* a deleted matrix's memory goes back to the system */
}

const char *matrix_dtype_name(const matrix *m)
{
    return m->meta.mixed ? "mixed" : spmv_dtype_name(m->host.dtype);
}

static size_t transpose_bytes(const matrix *m)
{
    return m->host_t ? spmv_matrix_format_bytes(m->host_t, SPMV_FMT_ALL) : 0;
}

bool matrix_symmetric(matrix *m)
{
    pthread_mutex_lock(&m->lock);
    bool s = m->meta.symmetric;
    pthread_mutex_unlock(&m->lock);
    return s;
}

unsigned matrix_formats_fit(matrix *m)
{
    int32_t b = atomic_load(&m->block_size);
    if (b == 0) { /* two threads may both look: they find the same b */
        b = spmv_csr_block_size(&m->host.csr, NULL); /* 0 for a wide CSR: PBSR takes 32-bit offsets */
        b = b > 0 ? b : -1;
        atomic_store(&m->block_size, b);
    }
    unsigned fit = SPMV_FMT_ALL;
    if (!matrix_symmetric(m))
        fit &= ~(unsigned)SPMV_FMT_SPSELL;
    if (b < 0)
        fit &= ~(unsigned)SPMV_FMT_PBSR;
    return fit;
}

size_t matrix_drop_transpose(matrix *m)
{
    size_t bytes = transpose_bytes(m);
    if (!m->host_t || m->host_t_busy)
        return 0;
    spmv_matrix_free(m->host_t);
    free(m->host_t);
    m->host_t = NULL;
    return bytes;
}

size_t matrix_host_bytes(matrix *m)
{
    pthread_mutex_lock(&m->lock);
    size_t total = spmv_matrix_format_bytes(&m->host, SPMV_FMT_ALL) + transpose_bytes(m);
    pthread_mutex_unlock(&m->lock);
    return total;
}

void matrix_device_usage(const matrix *m, spmv_gpu_usage *u)
{
    memset(u, 0, sizeof *u);
    if (m->dev && m->dev_worker)
        spmv_gpu_matrix_usage(m->dev, u);
}

size_t matrix_device_bytes(const matrix *m) { return m->dev ? spmv_gpu_matrix_bytes(m->dev) : 0; }

unsigned matrix_host_pinned(const matrix *m)
{
    return SPMV_FMT_CSR | (m->meta.device == MATFILE_DEVICE_HOST ? m->meta.formats : 0);
}

size_t matrix_host_cache_bytes(matrix *m)
{
    pthread_mutex_lock(&m->lock);
    size_t total = spmv_matrix_format_bytes(&m->host, SPMV_FMT_ALL & ~matrix_host_pinned(m)) + transpose_bytes(m);
    pthread_mutex_unlock(&m->lock);
    return total;
}

/* ------------------------------------------------------------ store */

static int make_dir(const char *path, spmv_error *err)
{
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        return spmv_error_set(err, SPMV_ERR_IO, 0, "cannot create %s: %s", path, strerror(errno));
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return spmv_error_set(err, SPMV_ERR_IO, 0, "%s is not a directory", path);
    return SPMV_OK;
}

int store_open(const char *state_dir, store **out, spmv_error *err)
{
    char path[PATH_MAX];
    int rc;
    store *s = calloc(1, sizeof *s);
    if (!s || !(s->dir = strdup(state_dir))) {
        free(s);
        return spmv_error_set(err, SPMV_ERR_NOMEM, 0, "out of memory");
    }
    s->lock_fd = -1;
    pthread_mutex_init(&s->lock, NULL);
    if ((rc = make_dir(state_dir, err)) != 0)
        goto fail;
    snprintf(path, sizeof path, "%s/damaged", state_dir);
    if ((rc = make_dir(path, err)) != 0)
        goto fail;
    snprintf(path, sizeof path, "%s/.lock", state_dir);
    s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (s->lock_fd < 0) {
        rc = spmv_error_set(err, SPMV_ERR_IO, 0, "cannot open %s: %s", path, strerror(errno));
        goto fail;
    }
    if (flock(s->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        rc = spmv_error_set(err, SPMV_ERR_IO, 0, "state directory %s is in use by another spmvd (%s)",
                            state_dir, strerror(errno));
        goto fail;
    }
    *out = s;
    return SPMV_OK;
fail:
    store_close(s);
    return rc;
}

void store_close(store *s)
{
    if (!s)
        return;
    matrix *m = s->head;
    while (m) {
        matrix *next = m->next;
        matrix_unref(m);
        m = next;
    }
    if (s->lock_fd >= 0)
        close(s->lock_fd);
    pthread_mutex_destroy(&s->lock);
    free(s->dir);
    free(s);
}

const char *store_dir(const store *s) { return s->dir; }

static void list_append(store *s, matrix *m)
{
    m->next = NULL;
    if (s->tail)
        s->tail->next = m;
    else
        s->head = m;
    s->tail = m;
    s->count++;
}

void store_adopt(store *s, matrix *m)
{
    matrix_ref(m);
    pthread_mutex_lock(&s->lock);
    list_append(s, m);
    pthread_mutex_unlock(&s->lock);
}

int store_insert(store *s, matrix *m, spmv_error *err)
{
    double t0 = spmv_now_ms();
    /* The timing goes into the file too, so it is measured up to the write
     * and the fsyncs after it are left out of the stored figure. */
    m->meta.store_ms = 0;
    int rc = matfile_write(s->dir, &m->meta, &m->host.csr, err);
    if (rc != 0)
        return rc;
    m->meta.store_ms = spmv_now_ms() - t0;
    store_adopt(s, m);
    return SPMV_OK;
}

int store_stage(store *s, const matfile_meta *meta, const spmv_csr *csr, const atomic_bool *abandon,
                store_staged *st, spmv_error *err)
{
    double t0 = spmv_now_ms();
    matfile_meta stored = *meta;
    stored.store_ms = 0; /* as store_insert writes it */
    memset(st, 0, sizeof *st);
    int rc = matfile_stage(s->dir, &stored, csr, abandon, &st->file, err);
    st->pending = rc == SPMV_OK;
    st->ms = spmv_now_ms() - t0;
    return rc;
}

int store_commit(store *s, matrix *m, store_staged *st, spmv_error *err)
{
    double t0 = spmv_now_ms();
    m->meta.store_ms = 0;
    st->pending = false;
    int rc = matfile_commit(s->dir, &st->file, &m->meta, &m->host.csr, err);
    if (rc != 0)
        return rc;
    m->meta.store_ms = st->ms + spmv_now_ms() - t0;
    store_adopt(s, m);
    return SPMV_OK;
}

void store_discard(store_staged *st)
{
    if (st->pending)
        matfile_discard(&st->file);
    st->pending = false;
}

matrix *store_get(store *s, const char *id)
{
    matrix *found = NULL;
    pthread_mutex_lock(&s->lock);
    for (matrix *m = s->head; m; m = m->next)
        if (strcmp(m->meta.id, id) == 0) {
            found = matrix_ref(m);
            break;
        }
    pthread_mutex_unlock(&s->lock);
    return found;
}

/* Whether a matrix's name is `name`, or (file) `name` and a matrix file's
 * extension. */
static bool name_is(const char *have, const char *name, bool file)
{
    static const char *const ext[] = {".mtx", ".mtx.gz", ".npz"};
    size_t n = strlen(name);
    if (!file)
        return strcmp(have, name) == 0;
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++)
        if (strncmp(have, name, n) == 0 && strcmp(have + n, ext[i]) == 0)
            return true;
    return false;
}

size_t store_named(store *s, const char *name, bool ext, matrix **out, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&s->lock);
    for (int file = 0; file < (ext ? 2 : 1) && n == 0; file++)
        for (matrix *m = s->head; m; m = m->next)
            if (name_is(m->meta.name, name, file)) {
                if (n < max)
                    out[n] = matrix_ref(m);
                n++;
            }
    pthread_mutex_unlock(&s->lock);
    return n;
}

#define EXPORT_TRIES 4

int store_export_npz(store *s, matrix *m, int *fd, uint64_t *size, spmv_error *err)
{
    char path[PATH_MAX];
    for (int attempt = 0; attempt < EXPORT_TRIES; attempt++) {
        unsigned gen = atomic_load(&m->values_gen);
        struct stat st;
        int tmp = -1, rc = SPMV_OK;
        if (gen & 1u) { /* the worker is copying new values in */
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        if (snprintf(path, sizeof path, "%s/.download-XXXXXX.tmp", s->dir) >= (int)sizeof path || (tmp = mkstemps(path, 4)) < 0)
            return spmv_error_set(err, SPMV_ERR_IO, 0, "a temporary file in %s: %s", s->dir, strerror(errno));
        close(tmp);
        rc = spmv_npz_write_csr_file(path, &m->host.csr, false, err);
        tmp = rc == SPMV_OK ? open(path, O_RDONLY | O_CLOEXEC) : -1;
        if (rc == SPMV_OK && (tmp < 0 || fstat(tmp, &st) != 0))
            rc = spmv_error_set(err, SPMV_ERR_IO, 0, "reading back %s: %s", path, strerror(errno));
        unlink(path);
        if (rc == SPMV_OK && atomic_load(&m->values_gen) == gen) {
            *fd = tmp;
            *size = (uint64_t)st.st_size;
            return SPMV_OK;
        }
        if (tmp >= 0)
            close(tmp);
        if (rc != SPMV_OK)
            return rc;
    }
    return spmv_error_set(err, SPMV_ERR_UNAVAILABLE, 0, "the values of %s kept changing while it was written; try again",
                          m->meta.id);
}

int store_remove(store *s, const char *id, spmv_error *err)
{
    matrix *prev = NULL, *m;
    int rc = SPMV_OK;
    matrix *known = store_get(s, id);
    if (!known)
        return spmv_error_set(err, SPMV_ERR_NOT_FOUND, 0, "no matrix %s", id);
    matrix_unref(known);
    /* The file goes first, outside the lock: the unlink and the directory's
     * fsync can take a disk's while, and every lookup (each product's) waits
     * on the lock. A crash in between brings the matrix back at the next
     * start, before its DELETE was answered. */
    if ((rc = matfile_remove(s->dir, id, err)) != 0)
        return rc;
    autotune_remove(s->dir, id); /* the auto kernel's stored choice, if any */
    pthread_mutex_lock(&s->lock);
    for (m = s->head; m; prev = m, m = m->next)
        if (strcmp(m->meta.id, id) == 0)
            break;
    if (!m) { /* a DELETE beside this one took it */
        rc = spmv_error_set(err, SPMV_ERR_NOT_FOUND, 0, "no matrix %s", id);
        goto out;
    }
    if (prev)
        prev->next = m->next;
    else
        s->head = m->next;
    if (s->tail == m)
        s->tail = prev;
    s->count--;
out:
    pthread_mutex_unlock(&s->lock);
    if (rc == SPMV_OK)
        matrix_unref(m);
    return rc;
}

int store_list(store *s, matrix ***out, size_t *n)
{
    pthread_mutex_lock(&s->lock);
    matrix **list = malloc((s->count ? s->count : 1) * sizeof *list);
    size_t i = 0;
    if (list)
        for (matrix *m = s->head; m; m = m->next)
            list[i++] = matrix_ref(m);
    pthread_mutex_unlock(&s->lock);
    if (!list)
        return SPMV_ERR_NOMEM;
    *out = list;
    *n = i;
    return SPMV_OK;
}

void store_list_free(matrix **list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        matrix_unref(list[i]);
    free(list);
}

size_t store_count(store *s)
{
    pthread_mutex_lock(&s->lock);
    size_t n = s->count;
    pthread_mutex_unlock(&s->lock);
    return n;
}

/* ----------------------------------------------------------- reload */

static bool has_suffix(const char *name, const char *suffix)
{
    size_t n = strlen(name), k = strlen(suffix);
    return n >= k && strcmp(name + n - k, suffix) == 0;
}

static void move_aside(store *s, const char *name, const char *why)
{
    char from[PATH_MAX], to[PATH_MAX];
    snprintf(from, sizeof from, "%s/%s", s->dir, name);
    snprintf(to, sizeof to, "%s/damaged/%s", s->dir, name);
    if (rename(from, to) != 0)
        log_error("store: %s is damaged (%s) and could not be moved aside: %s", from, why, strerror(errno));
    else
        log_error("store: %s is damaged (%s); moved to %s", from, why, to);
}

/* Names of the stored files, sorted so reload order is stable. */
static int list_files(store *s, char ***names, size_t *count)
{
    struct dirent **entries;
    int n = scandir(s->dir, &entries, NULL, alphasort);
    if (n < 0)
        return -1;
    char **out = calloc((size_t)n + 1, sizeof *out);
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        const char *name = entries[i]->d_name;
        if (out && has_suffix(name, ".tmp")) {
            /* a store, spool or tuning choice (<id>.tune.tmp) interrupted
             * by a crash: never answered, never valid */
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/%s", s->dir, name);
            if (unlink(path) == 0)
                log_warn("store: removed %s left by an interrupted upload", path);
        } else if (out && has_suffix(name, MATFILE_SUFFIX)) {
            out[k++] = strdup(name);
        }
        free(entries[i]);
    }
    free(entries);
    if (!out)
        return -1;
    *names = out;
    *count = k;
    return 0;
}

size_t store_reload(store *s, matfile_admit_fn admit, store_load_fn load, store_progress_fn progress, void *ctx)
{
    char **names;
    size_t total, loaded = 0;
    if (list_files(s, &names, &total) != 0) {
        log_error("store: cannot list %s: %s", s->dir, strerror(errno));
        return 0;
    }
    for (size_t i = 0; i < total; i++) {
        char path[PATH_MAX];
        matfile_meta meta;
        spmv_csr csr;
        spmv_error err = {0};
        snprintf(path, sizeof path, "%s/%s", s->dir, names[i]);
        size_t stem = strlen(names[i]) - strlen(MATFILE_SUFFIX);
        int rc = matfile_read(path, admit, ctx, &meta, &csr, &err);
        if (rc == SPMV_OK && (stem != MATFILE_ID_LEN || strncmp(names[i], meta.id, stem) != 0 ||
                              !store_id_valid(meta.id))) {
            rc = spmv_error_set(&err, SPMV_ERR_CORRUPT, 0, "file name does not match the id inside");
            spmv_csr_free(&csr);
        }
        if (rc == SPMV_ERR_CORRUPT) {
            move_aside(s, names[i], err.message);
        } else if (rc != SPMV_OK) {
            log_error("store: skipping %s: %s", path, err.message);
        } else if ((rc = load(ctx, &meta, &csr, &err)) != SPMV_OK) {
            log_error("store: cannot load %s: %s", path, err.message);
            spmv_csr_free(&csr);
        } else {
            loaded++;
        }
        free(names[i]);
        if (progress)
            progress(ctx, i + 1, total);
    }
    free(names);
    return loaded;
}
