/* fuzz_http.h — a real spmvd in the fuzzing process, spoken to over HTTP.
 *
 * The network-facing fuzz targets (fuzz_multipart, fuzz_json, fuzz_vector)
 * drive the code path a real request takes: libmicrohttpd's parser and post
 * processor, the route table, auth, the handlers, the JSON and binary
 * decoders, the streaming Matrix Market reader and the store. fuzz_http
 * starts the daemon's pieces once (store on a temporary directory, the CPU
 * worker, the HTTP server on a loopback port, small limits so one input
 * cannot take gigabytes), and each input becomes one request on a fresh
 * connection whose whole answer is read back. A request that gets no
 * answer within FUZZ_HTTP_TIMEOUT_MS aborts the process: a hang is a bug.
 * Matrices an input manages to store are deleted again, so the store does
 * not grow over millions of inputs.
 *
 * The targets also build without libFuzzer: tests/fuzz/replay_main.c
 * then feeds them the files named on the command line, which is how
 * tests/e2e/fuzz_replay.sh replays tests/fuzz/regressions/<target>/ in
 * `make test`.
 */
#ifndef SPMVD_FUZZ_HTTP_H
#define SPMVD_FUZZ_HTTP_H

#include <stddef.h>

#define FUZZ_HTTP_TIMEOUT_MS 20000

/* Starts the daemon once (later calls return at once). */
void fuzz_http_init(void);

/* The id of a stored matrix made at start: 0 is a 5x4 float64 general
 * matrix, 1 a 6x6 float32 symmetric one. */
const char *fuzz_http_matrix(int which);

/* Sends `head` (request line and headers, without the blank line; a
 * Content-Length for `body` and Connection: close are added) and `body`;
 * returns the HTTP status of the answer (its text in *answer, static,
 * NUL-terminated, cut at a few KiB). Aborts on no answer. */
int fuzz_http_request(const char *head, const void *body, size_t len, const char **answer);

/* Percent-encodes the bytes of s[0..n) that cannot stand in a URL as they
 * are into out (at most cap - 1 characters); for fuzzed paths and query
 * strings. '=' and '&' are kept when keep_query is set. */
void fuzz_http_url_encode(const unsigned char *s, size_t n, int keep_query, char *out, size_t cap);

/* Deletes the matrix a 201 answer's Location names, if any. */
void fuzz_http_forget_created(int status, const char *answer);

#endif
