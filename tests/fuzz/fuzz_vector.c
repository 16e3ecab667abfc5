/* fuzz_vector.c — libFuzzer target: the binary x decoder.
 *
 * POST /v1/matrices/{id}/spmv with Content-Type application/octet-stream
 * to the in-process daemon of fuzz_http.c: the body is x as little-endian
 * values of the matrix dtype, the options (kernel, runs, warmup, verify,
 * async, kernel parameters) are in the query string. Layout of an input:
 *
 *   byte 0       bit 0: the float32 6x6 matrix (else the float64 5x4 one)
 *   bytes 1..    the query string (percent-encoded, '=' and '&' kept), to a NUL
 *   the rest     the body
 *
 * Any answer but a deliberate one is a finding: no answer, or a 500; a 200
 * must carry rows values of y for each of the k columns x held (?k=).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz_http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char head[4096], query[2048];
    const char *ans;
    fuzz_http_init();
    if (size < 1)
        return 0;
    int which = data[0] & 1;
    const uint8_t *rest = data + 1, *nul = memchr(rest, 0, size - 1);
    size_t qlen = nul ? (size_t)(nul - rest) : 0;
    const uint8_t *body = nul ? nul + 1 : rest;
    size_t blen = size - (size_t)(body - data);
    fuzz_http_url_encode(rest, qlen > 500 ? 500 : qlen, 1, query, sizeof query);
    snprintf(head, sizeof head, "POST /v1/matrices/%s/spmv?%s HTTP/1.1\r\nContent-Type: application/octet-stream",
             fuzz_http_matrix(which), query);
    int status = fuzz_http_request(head, body, blen, &ans);
    if (status == 0 || status == 500)
        __builtin_trap();
    if (status == 200 && strstr(ans, "application/octet-stream")) {
        /* y: rows values per column of x, for k = 1..SPMV_MAX_K columns (?k=) */
        const char *cl = strstr(ans, "Content-Length: ");
        long col = which ? 6 * 4 : 5 * 8, len = cl ? atol(cl + 16) : -1;
        if (len <= 0 || len % col != 0 || len / col > 64)
            __builtin_trap(); /* y of the wrong length */
    }
    return 0;
}
