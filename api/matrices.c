/* matrices.c — listing, describing and deleting stored matrices.
 *
 * The descriptor is the one JSON shape a matrix has in the API (upload
 * answer, list entries, GET /v1/matrices/{id}): sizes, dtype, the
 * symmetry the file declared, every format held with its bytes and padding
 * and where it is held (host or a GPU), what building it cost and how many
 * products repay that (daemon/payback.h), and the upload timings.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "daemon/payback.h"

static void add_format(json_t *list, const char *where, unsigned f, size_t bytes, double padding)
{
    json_array_append_new(list, json_pack("{s:s, s:s, s:I, s:o}", "format", spmv_format_name((spmv_format)f),
                                          "device", where, "bytes", (json_int_t)bytes,
                                          "padding", api_json_real(padding)));
}

/* Each entry's conversion time and payback where it is held (host: the
 * host's build times and best times; a GPU: the device's). */
static void add_paybacks(matrix *m, json_t *list)
{
    double best[2][SPMV_FORMAT_COUNT], convert[2][SPMV_FORMAT_COUNT];
    spmv_gpu_usage u;
    matrix_device_usage(m, &u);
    memcpy(convert[PAYBACK_DEVICE], u.convert_ms, sizeof u.convert_ms);
    payback_best(m, PAYBACK_HOST, best[PAYBACK_HOST]);
    payback_best(m, PAYBACK_DEVICE, best[PAYBACK_DEVICE]);
    pthread_mutex_lock(&m->lock);
    memcpy(convert[PAYBACK_HOST], m->host.convert_ms, sizeof m->host.convert_ms);
    pthread_mutex_unlock(&m->lock);
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e) {
        unsigned f = 0;
        int where = strcmp(json_string_value(json_object_get(e, "device")), "host") ? PAYBACK_DEVICE : PAYBACK_HOST;
        if (spmv_formats_parse(json_string_value(json_object_get(e, "format")), &f, NULL) == SPMV_OK && f)
            payback_json(e, best[where], (spmv_format)f, convert[where][spmv_format_index((spmv_format)f)]);
    }
}

static json_t *formats_json(matrix *m)
{
    json_t *list = json_array();
    pthread_mutex_lock(&m->lock);
    const spmv_matrix *h = &m->host;
    spmv_format_info fi = spmv_csr_info(&h->csr);
    add_format(list, "host", SPMV_FMT_CSR, fi.bytes, fi.padding_ratio);
    if (h->formats & SPMV_FMT_COO) {
        fi = spmv_coo_info(&h->coo);
        add_format(list, "host", SPMV_FMT_COO, fi.bytes, fi.padding_ratio);
    }
    if (h->formats & SPMV_FMT_ELL) {
        fi = spmv_ell_info(&h->ell);
        add_format(list, "host", SPMV_FMT_ELL, fi.bytes, fi.padding_ratio);
    }
    if (h->formats & SPMV_FMT_HLL) {
        fi = spmv_hll_info(&h->hll);
        add_format(list, "host", SPMV_FMT_HLL, fi.bytes, fi.padding_ratio);
    }
    if (h->formats & SPMV_FMT_HYB) {
        fi = spmv_hyb_info(&h->hyb);
        add_format(list, "host", SPMV_FMT_HYB, fi.bytes, fi.padding_ratio);
    }
    if (h->formats & SPMV_FMT_PCSR) {
        fi = spmv_pcsr_info(&h->pcsr); /* its own arrays: the row_ptr it borrows is the CSR's */
        add_format(list, "host", SPMV_FMT_PCSR, fi.bytes, fi.padding_ratio);
    }
    if (h->formats & SPMV_FMT_PSELL) {
        fi = spmv_psell_info(&h->psell);
        add_format(list, "host", SPMV_FMT_PSELL, fi.bytes, fi.padding_ratio);
    }
    if (h->formats & SPMV_FMT_SPSELL) {
        fi = spmv_spsell_info(&h->spsell);
        add_format(list, "host", SPMV_FMT_SPSELL, fi.bytes, fi.padding_ratio);
    }
    if (h->formats & SPMV_FMT_PBSR) {
        fi = spmv_pbsr_info(&h->pbsr);
        add_format(list, "host", SPMV_FMT_PBSR, fi.bytes, fi.padding_ratio);
    }
    pthread_mutex_unlock(&m->lock);
    if (m->dev && m->dev_worker) {
        spmv_gpu_usage u;
        matrix_device_usage(m, &u);
        for (int b = 0; b < SPMV_FORMAT_COUNT; b++)
            if (u.formats & (1u << b))
                add_format(list, m->dev_worker->name, 1u << b, u.bytes[b], u.padding[b]);
    }
    add_paybacks(m, list);
    return list;
}

/* Formats never evicted: CSR and what the upload asked for. */
static json_t *pinned_json(matrix *m)
{
    json_t *list = json_array();
    for (unsigned f = 1; f <= SPMV_FMT_LAST; f <<= 1)
        if ((m->meta.formats | SPMV_FMT_CSR) & f)
            json_array_append_new(list, json_string(spmv_format_name((spmv_format)f)));
    return list;
}

/* Where the device bytes are: per format, the transpose, the rest. */
static json_t *device_memory_json(matrix *m)
{
    spmv_gpu_usage u;
    matrix_device_usage(m, &u);
    json_t *per = json_object();
    for (unsigned b = 0; b < SPMV_FORMAT_COUNT; b++)
        json_object_set_new(per, spmv_format_name((spmv_format)(1u << b)), json_integer((json_int_t)u.bytes[b]));
    return json_pack("{s:o, s:I, s:I, s:I}", "formats", per, "transpose", (json_int_t)u.transpose, "other",
                     (json_int_t)u.other, "total", (json_int_t)u.total);
}

static json_t *matrix_json(spmvd *d, matrix *m);

/* Where each rank's shard is (issue 16). */
static json_t *shards_json(matrix *m)
{
    const cluster_shard_info *info;
    int n = cluster_matrix_shards(m->shards, &info);
    json_t *list = json_array();
    for (int q = 0; q < n; q++)
        json_array_append_new(list, json_pack("{s:i, s:[i, i], s:I, s:i, s:i, s:s, s:s, s:I, s:s, s:i}", "rank",
                                              info[q].rank, "rows", info[q].row_begin, info[q].row_end, "nnz",
                                              (json_int_t)info[q].nnz, "halo_recv", info[q].halo_recv, "halo_send",
                                              info[q].halo_send, "device", info[q].device, "host", info[q].host,
                                              "bytes", (json_int_t)info[q].bytes, "loaded_from",
                                              q == 0 ? "cut" : info[q].from_file ? "file" : "sent", "edge_rows",
                                              info[q].edge_rows));
    return list;
}

json_t *api_matrix_json(spmvd *d, matrix *m)
{
    json_t *o = matrix_json(d, m);
    if (o)
        json_object_set_new(o, "sharded", json_boolean(m->shards != NULL));
    if (o) /* 64 for a wide CSR (nnz past INT32_MAX, or offsets=64) */
        json_object_set_new(o, "row_offsets", json_integer(spmv_csr_wide(&m->host.csr) ? 64 : 32));
    if (o && m->shards)
        json_object_set_new(o, "shards", shards_json(m));
    if (o) /* what auto's build rule counts (daemon/payback.h) */
        json_object_set_new(o, "products", json_integer((json_int_t)atomic_load(&m->products)));
    if (o) /* its resident preconditioners (daemon/preconds.h), counted with it */
        json_object_set_new(o, "preconditioner_bytes", json_integer((json_int_t)preconds_bytes(m)));
    if (o) { /* under the lock: PUT .../values changes it */
        char hex[65];
        pthread_mutex_lock(&m->lock);
        spmv_sha256_hex(m->meta.sha256, hex);
        pthread_mutex_unlock(&m->lock);
        json_object_set_new(o, "sha256", json_string(hex));
    }
    if (o && m->meta.generated) { /* built by formula; the file keeps this recipe */
        const spmv_gen_spec *g = &m->meta.recipe;
        if (g->kind == SPMV_GEN_RANDOM) /* its cols and nnz in per_row's and dense_len's slots (spmv_gen_spec) */
            json_object_set_new(o, "generated", json_pack("{s:s, s:I, s:i, s:I, s:I}", "kind", "random", "rows",
                                                          (json_int_t)g->n, "cols", g->per_row, "nnz",
                                                          (json_int_t)g->dense_len, "seed", (json_int_t)g->seed));
        else
            json_object_set_new(o, "generated",
                                json_pack("{s:s, s:I, s:i, s:I, s:I}", "kind", spmv_gen_kind_name(g->kind), "n",
                                          (json_int_t)g->n, "per_row", g->per_row, "dense_len",
                                          (json_int_t)g->dense_len, "seed", (json_int_t)g->seed));
    }
    return o;
}

static json_t *matrix_json(spmvd *d, matrix *m)
{
    (void)d;
    char created[32];
    time_t t = (time_t)m->meta.created;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);
    const matfile_meta *mt = &m->meta;
    return json_pack("{s:s, s:s, s:I, s:I, s:I, s:s, s:s, s:o, s:i, s:s, s:o, s:o, s:I, s:I, s:o, s:s,"
                     " s:{s:o, s:o, s:o, s:o}}",
                     "id", mt->id, "name", mt->name, "rows", (json_int_t)m->host.rows,
                     "cols", (json_int_t)m->host.cols, "nnz", (json_int_t)m->host.nnz,
                     "dtype", matrix_dtype_name(m), "symmetry", spmv_mm_symmetry_name(mt->symmetry),
                     "symmetric", json_boolean(matrix_symmetric(m)),
                     "hack_size", m->host.hack_size,
                     "device", m->shards ? "cluster" : m->dev && m->dev_worker ? m->dev_worker->name : "cpu",
                     "formats", formats_json(m), "pinned", pinned_json(m),
                     "host_bytes", (json_int_t)matrix_host_bytes(m),
                     "device_bytes", (json_int_t)matrix_device_bytes(m),
                     "device_memory", device_memory_json(m),
                     "created", created,
                     "timings", "parse_ms", api_json_real(mt->parse_ms), "convert_ms", api_json_real(mt->convert_ms),
                     "transfer_ms", api_json_real(mt->transfer_ms), "store_ms", api_json_real(mt->store_ms));
}

static void list_begin(request *r)
{
    matrix **list;
    size_t n;
    if (store_list(r->d->store, &list, &n) != SPMV_OK) {
        api_error(r, 500, "out_of_memory", "out of memory listing matrices");
        return;
    }
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, api_matrix_json(r->d, list[i]));
    store_list_free(list, n);
    api_json(r, 200, json_pack("{s:o, s:I}", "matrices", a, "count", (json_int_t)n));
}

/* Accept: application/x-npz: the CSR as scipy.sparse.load_npz reads it. */
static void answer_npz(request *r, matrix *m)
{
    spmv_error err = {0};
    int fd;
    uint64_t size;
    int rc = store_export_npz(r->d->store, m, &fd, &size, &err);
    if (rc != SPMV_OK) {
        api_error_spmv(r, rc, &err);
        return;
    }
    char cd[80];
    snprintf(cd, sizeof cd, "attachment; filename=\"%s.npz\"", m->meta.id);
    api_file(r, 200, "application/x-npz", fd, size);
    api_header(r, "Content-Disposition", cd);
}

static void get_begin(request *r)
{
    matrix *m = api_get_matrix(r);
    if (!m)
        return;
    const char *accept = api_header_in(r, MHD_HTTP_HEADER_ACCEPT);
    if (accept && strstr(accept, "application/x-npz"))
        answer_npz(r, m);
    else
        api_json(r, 200, api_matrix_json(r->d, m));
    matrix_unref(m);
}

/* A DELETE is a task on an upload worker (daemon.h remove_task): the
 * file's unlink and the directory's fsync are disk work, kept off the HTTP
 * threads as uploads'. */
typedef struct delete_req {
    remove_task t;
    request *r;
} delete_req;

static void delete_finish(task *t, int status)
{
    delete_req *q = (delete_req *)t;
    api_task_status(status, &q->t.rc, &q->t.err);
    api_task_done(q->r);
}

static void delete_end(request *r)
{
    delete_req *q = calloc(1, sizeof *q);
    if (!q) {
        api_error(r, 500, "out_of_memory", "out of memory");
        return;
    }
    r->state = q;
    *q = (delete_req){.t = {.base = {.run = spmvd_remove_run, .finish = delete_finish}, .d = r->d}, .r = r};
    snprintf(q->t.id, sizeof q->t.id, "%s", r->id);
    api_submit_and_suspend(r, spmvd_upload_worker(r->d), &q->t.base);
}

static void delete_answer(request *r)
{
    delete_req *q = r->state;
    if (q->t.rc == SPMV_ERR_NOT_FOUND)
        api_error(r, 404, "not_found", "no matrix %s", r->id);
    else if (q->t.rc != SPMV_OK)
        api_error_task(r, q->t.rc, &q->t.err);
    else
        api_bytes(r, 204, NULL, NULL, 0);
}

static void delete_cleanup(request *r)
{
    free(r->state);
    r->state = NULL;
}

const route_handlers api_matrices_get = {.begin = list_begin, .body_kind = API_BODY_NONE, .query = api_no_query};
const route_handlers api_matrix_get = {.begin = get_begin, .body_kind = API_BODY_NONE, .query = api_no_query};
const route_handlers api_matrix_delete = {.end = delete_end, .resumed = delete_answer, .cleanup = delete_cleanup,
                                          .body_kind = API_BODY_NONE, .query = api_no_query};
