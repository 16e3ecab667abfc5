/* fuzz_json.c — libFuzzer target: the JSON request decoders and ids.
 *
 * Each input is one request to the in-process daemon of fuzz_http.c:
 *
 *   byte 0 % 6   0: POST /v1/matrices/{A}/spmv, the rest as the JSON body
 *                   (A is the float64 5x4 matrix; 1: the float32 6x6 one)
 *                2: POST /v1/matrices/{A}/bench, JSON body (a job: 202)
 *                3: POST /v1/matrices?<rest as query string> with a small
 *                   valid Matrix Market body: the upload options decoder
 *                4: GET /v1/jobs/<rest>: a job id parsed strictly
 *                5: GET /v1/matrices/<rest>[/spy.png?size=..]: matrix ids,
 *                   paths and the spy.png query
 *
 * Any answer but a deliberate one is a finding: no answer, or a 500.
 * Seeds (tests/fuzz/corpus/fuzz_json/) are recorded request bodies.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tests/fuzz/fuzz_http.h"

static const char small_mtx[] = "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1\n3 2 -4\n";

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
    switch (data[0] % 6) {
    case 0:
    case 1:
        snprintf(head, sizeof head, "POST /v1/matrices/%s/spmv HTTP/1.1\r\nContent-Type: application/json",
                 fuzz_http_matrix(data[0] % 6));
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
