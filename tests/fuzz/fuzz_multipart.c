/* fuzz_multipart.c — libFuzzer target: matrix uploads as they arrive.
 *
 * Each input is one POST /v1/matrices to the in-process daemon of
 * fuzz_http.c, so the bytes go where a real upload's go: libmicrohttpd's
 * multipart post processor (boundary and body fuzzed) or the raw-body path,
 * then the daemon's form-field handling and the streaming Matrix Market
 * reader fed chunk by chunk, then option parsing, CSR building and the
 * store. Layout of an input:
 *
 *   byte 0       mode: bit 0 multipart (else a raw body), bit 1 quote the
 *                boundary, bit 2 add a fuzzed query string, bit 3 ask for float32
 *   bytes 1..    the boundary (multipart) or query string, up to a NUL
 *   the rest     the body, sent as it is
 *
 * Seeds (tests/fuzz/corpus/fuzz_multipart/) are recorded uploads: curl -F
 * bodies of conformance files, and raw ones.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tests/fuzz/fuzz_http.h"

/* Header-safe text: a boundary with CR/LF would make another header. */
static void header_safe(const uint8_t *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < cap; i++)
        out[o++] = (s[i] >= 0x20 && s[i] < 0x7f) ? (char)s[i] : '_';
    out[o] = '\0';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char head[1024], part[400];
    const char *ans;
    fuzz_http_init();
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    const uint8_t *rest = data + 1, *nul = memchr(rest, 0, size - 1);
    size_t plen = nul ? (size_t)(nul - rest) : 0;
    const uint8_t *body = nul ? nul + 1 : rest;
    size_t blen = size - (size_t)(body - data);
    if (plen > 120)
        plen = 120;
    if (mode & 1) {
        header_safe(rest, plen, part, sizeof part);
        snprintf(head, sizeof head,
                 "POST /v1/matrices%s HTTP/1.1\r\nContent-Type: multipart/form-data; boundary=%s%s%s",
                 mode & 8 ? "?dtype=float32" : "", mode & 2 ? "\"" : "", part, mode & 2 ? "\"" : "");
    } else {
        fuzz_http_url_encode(rest, plen, 1, part, sizeof part);
        snprintf(head, sizeof head, "POST /v1/matrices?device=cpu%s%s%s HTTP/1.1\r\nContent-Type: application/octet-stream",
                 mode & 8 ? "&dtype=float32" : "", mode & 4 ? "&" : "", mode & 4 ? part : "");
    }
    int status = fuzz_http_request(head, body, blen, &ans);
    if (status == 0 || status == 500)
        __builtin_trap(); /* no answer, or an internal error, for a bounded upload */
    fuzz_http_forget_created(status, ans);
    return 0;
}
