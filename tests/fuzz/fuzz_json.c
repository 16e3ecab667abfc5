/* fuzz_json.c — libFuzzer target: the JSON request decoders and ids.
 *
 * Each input is one request to the in-process daemon of fuzz_http.c:
 *
 *   byte 0 % 13  0: POST /v1/matrices/{A}/spmv, the rest as the JSON body
 *                   (A is the float64 5x4 matrix; 1: the float32 6x6 one)
 *                2: POST /v1/matrices/{A}/bench, JSON body (a job: 202)
 *                3: POST /v1/matrices?<rest as query string> with a small
 *                   valid Matrix Market body: the upload options decoder
 *                4: GET /v1/jobs/<rest>: a job id parsed strictly
 *                5: GET /v1/matrices/<rest>[/spy.png?size=..]: matrix ids,
 *                   paths and the spy.png query
 *                6: api_decode_spmv_json called directly (no HTTP: many
 *                   more inputs a second), byte 1 picks cols and dtype
 *                7: api_decode_bench_json called directly
 *                8: POST /v1/matrices/{S}/spmspm (S: the float32 6x6 one),
 *                   the rest as the JSON body with "@0" and "@1" replaced
 *                   by the two matrices' ids (so "b" can name one)
 *                9: POST /v1/vectors, 10: POST /v1/ops, 11: POST
 *                   /v1/matrices/{S}/solve, JSON bodies with "@0"/"@1"
 *                   replaced by the matrices' ids (like, spmv steps)
 *               12: POST /v1/shm, the rest as the body (names, offsets,
 *                   sizes, CUDA handles: the daemon has allow_shm on and
 *                   no GPU), then DELETE /v1/shm/<the same name> so the
 *                   region limit is never what answers
 *
 * Any answer but a deliberate one is a finding: no answer, or a 500.
 * Seeds (tests/fuzz/corpus/fuzz_json/) are recorded request bodies.
 */
#include <stdint.h>
#include <stdio.h>
#include <math.h>
#include <string.h>

#include "api/decode.h"
#include "tests/fuzz/fuzz_http.h"

static const char small_mtx[] = "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1\n3 2 -4\n";

/* The decoders alone: what they accept must be within every limit. */
static void decode_direct(int which, const uint8_t *d, size_t n)
{
    api_fail f;
    if (which == 6) {
        spmv_req q;
        int32_t cols = n ? d[0] % 9 : 0;
        spmv_dtype dt = n && (d[0] & 0x80) ? SPMV_FLOAT32 : SPMV_FLOAT64;
        memset(&q, 0, sizeof q);
        if (api_decode_spmv_json(n ? (const char *)d + 1 : "", n ? n - 1 : 0, cols, cols, dt, 20, &q, &f) == 0) {
            char msg[256];
            if (q.runs < 1 || q.runs > 20 || q.warmup < 0 || q.warmup > 20 ||
                (cols && !q.x && !q.x_vector[0] && !q.x_shm[0]) || q.k < 1 || q.k > SPMV_MAX_K ||
                !isfinite(q.alpha) || !isfinite(q.beta) || (q.beta != 0.0 && !q.y_vector[0]) ||
                q.x_shm_offset < 0 || q.y_shm_offset < 0 ||
                (q.x_shm[0] && shm_name_check(q.x_shm, msg, sizeof msg) != SHM_OK) ||
                (q.y_shm[0] && shm_name_check(q.y_shm, msg, sizeof msg) != SHM_OK) || (q.x_shm[0] && q.x))
                __builtin_trap();
            api_spmv_req_free(&q);
        } else if (f.status < 400 || f.status > 499) {
            __builtin_trap();
        }
    } else {
        bench_req q;
        if (api_decode_bench_json((const char *)d, n, 20, &q, &f) == 0) {
            if (q.runs < 1 || q.runs > 20 || q.warmup < 0 || q.warmup > 20 || q.nkernels > API_BENCH_MAX_KERNELS ||
                q.nblock_sizes > API_BENCH_MAX_SWEEP || q.nhack_sizes > API_BENCH_MAX_SWEEP)
                __builtin_trap();
        } else if (f.status < 400 || f.status > 499) {
            __builtin_trap();
        }
    }
}

/* body with every "@0" / "@1" replaced by the ids of the two matrices */
static size_t with_ids(const uint8_t *in, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 40 < cap; i++) {
        if (in[i] == '@' && i + 1 < n && (in[i + 1] == '0' || in[i + 1] == '1')) {
            const char *id = fuzz_http_matrix(in[i + 1] - '0');
            memcpy(out + o, id, strlen(id));
            o += strlen(id);
            i++;
        } else {
            out[o++] = (char)in[i];
        }
    }
    return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char head[8192], enc[4096];
    const char *ans;
    int status;
    fuzz_http_init();
    if (size < 1)
        return 0;
    const uint8_t *rest = data + 1;
    size_t n = size - 1;
    if (data[0] % 13 == 6 || data[0] % 13 == 7) {
        decode_direct(data[0] % 13, rest, n);
        return 0;
    }
    switch (data[0] % 13) {
    case 0:
    case 1:
        snprintf(head, sizeof head, "POST /v1/matrices/%s/spmv HTTP/1.1\r\nContent-Type: application/json",
                 fuzz_http_matrix(data[0] % 13));
        status = fuzz_http_request(head, rest, n, &ans);
        break;
    case 2:
        snprintf(head, sizeof head, "POST /v1/matrices/%s/bench HTTP/1.1\r\nContent-Type: application/json",
                 fuzz_http_matrix(0));
        status = fuzz_http_request(head, rest, n, &ans);
        break;
    case 3:
        fuzz_http_url_encode(rest, n > 1000 ? 1000 : n, 1, enc, sizeof enc);
        snprintf(head, sizeof head, "POST /v1/matrices?%s HTTP/1.1\r\nContent-Type: text/plain", enc);
        status = fuzz_http_request(head, small_mtx, sizeof small_mtx - 1, &ans);
        fuzz_http_forget_created(status, ans);
        break;
    case 4:
        fuzz_http_url_encode(rest, n > 1000 ? 1000 : n, 0, enc, sizeof enc);
        snprintf(head, sizeof head, "GET /v1/jobs/%s HTTP/1.1", enc);
        status = fuzz_http_request(head, "", 0, &ans);
        break;
    case 8: {
        static char body[20000];
        size_t len = with_ids(rest, n, body, sizeof body);
        snprintf(head, sizeof head, "POST /v1/matrices/%s/spmspm HTTP/1.1\r\nContent-Type: application/json",
                 fuzz_http_matrix(1));
        status = fuzz_http_request(head, body, len, &ans);
        fuzz_http_forget_created(status, ans); /* "store": true makes C a matrix */
        break;
    }
    case 9:   /* POST /v1/vectors: values, fills, like (@0/@1), side, device, k */
    case 10:  /* POST /v1/ops: steps over @0/@1 and whatever ids the body names */
    case 11: { /* POST /v1/matrices/{id}/solve */
        static char body[20000];
        size_t len = with_ids(rest, n, body, sizeof body);
        int which = data[0] % 13;
        if (which == 11)
            snprintf(head, sizeof head, "POST /v1/matrices/%s/solve HTTP/1.1\r\nContent-Type: application/json",
                     fuzz_http_matrix(1)); /* the square one */
        else
            snprintf(head, sizeof head, "POST /v1/%s HTTP/1.1\r\nContent-Type: application/json",
                     which == 9 ? "vectors" : "ops");
        status = fuzz_http_request(head, body, len, &ans);
        break;
    }
    case 12: {
        snprintf(head, sizeof head, "POST /v1/shm HTTP/1.1\r\nContent-Type: application/json");
        status = fuzz_http_request(head, (const char *)rest, n, &ans);
        if (status == 201) { /* unregister what the input registered */
            const char *nm = strstr(ans, "\"name\":\"");
            size_t len = nm ? strcspn(nm + 8, "\"") : 0;
            if (nm && len < 256) {
                snprintf(head, sizeof head, "DELETE /v1/shm/%.*s HTTP/1.1", (int)len, nm + 8);
                fuzz_http_request(head, "", 0, &ans);
            }
        }
        break;
    }
    default:
        fuzz_http_url_encode(rest, n > 1000 ? 1000 : n, 1, enc, sizeof enc);
        /* '?' is encoded, so a query comes only from this choice */
        snprintf(head, sizeof head, "GET /v1/matrices/%s%s%s HTTP/1.1",
                 n && rest[0] == 's' ? fuzz_http_matrix(0) : "", n && rest[0] == 's' ? "/spy.png?size=" : "", enc);
        status = fuzz_http_request(head, "", 0, &ans);
        break;
    }
    if (status == 0 || status == 500)
        __builtin_trap();
    return 0;
}
