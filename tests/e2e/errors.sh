#!/usr/bin/env bash
# errors.sh — every kind of bad request gets its 4xx and a JSON error
# body, and the daemon keeps serving after each.
#
# Matrix Market files of conformance/invalid (422 naming the line), bodies
# over the limits (413, by Content-Length before the body is read and by
# counting a chunked body), malformed JSON, wrong-length x, unknown
# kernels, parameters out of range, unknown and malformed ids, wrong
# methods (405 + Allow), unknown routes, unsupported media types.
. "$(dirname "$0")/lib.sh"

INVALID=$MATRICES/conformance/invalid
LIMIT=65536
if ! start_spmvd --max-upload-bytes $LIMIT --max-body-bytes $LIMIT --max-runs 100; then
  not_ok "spmvd starts" "$(tail -5 "$SPMVD_LOG")"; done_testing; exit
fi
ok "spmvd starts with max_upload_bytes = max_body_bytes = $LIMIT"

error_body() { jget '(d["error"]["code"] and d["error"]["message"]) or 1/0' >/dev/null 2>&1; }

# -------------------------------------------- invalid Matrix Market files
n=0; bad=""
for f in "$INVALID"/*.mtx; do
  name=$(basename "$f")
  if [ $((n % 2)) -eq 0 ]; then upload_raw "$f"; else upload_multipart "$f"; fi
  msg=$(jget 'd["error"]["message"]' 2>/dev/null)
  if [ "$CODE" = 422 ] && [[ "$msg" == *line* ]] && healthy; then
    ok "$name: 422 naming the line ($msg)"
  else
    not_ok "$name: 422 naming the line" "HTTP $CODE: $(head -c 300 "$BODY_FILE")"
  fi
  n=$((n + 1))
done
check "the invalid files were found ($n)" [ "$n" -ge 10 ]
check "nothing was stored by the refused uploads" [ "$(ls "$SPMVD_STATE" | grep -c '\.csr$')" -eq 0 ]

cplx=$MATRICES/conformance/matrix_coordinate_complex_general.mtx
if [ -f "$cplx" ]; then
  upload_raw "$cplx"
  msg=$(jget 'd["error"]["message"]' 2>/dev/null)
  if [ "$CODE" = 422 ] && [[ "$msg" == *omplex* ]]; then ok "complex matrix: 422 saying complex is not supported"
  else not_ok "complex matrix: 422 saying complex is not supported" "HTTP $CODE $msg"; fi
fi
upload_raw /dev/null
expect_code "empty upload: 422" 422

# ------------------------------------------------------------ size limits
"$PYTHON" -c "
import sys
n = 5000
sys.stdout.write('%%MatrixMarket matrix coordinate real general\n%d %d %d\n' % (n, n, n))
for i in range(n): sys.stdout.write('%d %d 1.5\n' % (i + 1, i + 1))" >"$E2E_TMP/big.mtx"
upload_raw "$E2E_TMP/big.mtx"
expect_code "raw upload over max_upload_bytes (Content-Length): 413" 413
check "413 body is a JSON error" error_body
upload_multipart "$E2E_TMP/big.mtx"
expect_code "multipart upload over max_upload_bytes: 413" 413
req POST /v1/matrices -H 'Transfer-Encoding: chunked' -H 'Content-Type: application/octet-stream' --data-binary "@$E2E_TMP/big.mtx"
expect_code "chunked upload (no Content-Length) over the limit: 413" 413
check "still healthy after the 413s" healthy

# -------------------------------------------------------- upload options
small=$MATRICES/real/karate.mtx
upload_raw "$small" "dtype=int8"
expect_code "upload with an unknown dtype: 400" 400
upload_raw "$small" "hack_size=0"
expect_code "upload with hack_size 0: 400" 400
upload_raw "$small" "formats=csr,bogus"
expect_code "upload with an unknown format: 400" 400
upload_multipart "$small" "colour=blue"
expect_code "multipart with an unknown field: 400" 400
check "its message names the field and lists the known ones" grep -q 'colour.*known: file, name, dtype.*generate, n, per_row, dense_len, seed, rows, cols, nnz)' "$BODY_FILE"
req POST /v1/matrices -F "name=x"
expect_code "multipart without a file field: 400" 400
upload_raw "$small" "device=gpu7"
check "upload to a GPU that is not there: 409 (got $CODE)" [ "$CODE" = 409 ]
check "still healthy" healthy

upload_raw "$small" "name=karate"
expect_code "a good upload after all that: 201" 201
ID=$MATRIX_ID
COLS=$(jget 'd["cols"]')
X=$("$PYTHON" -c "print(','.join(['1.0'] * $COLS))")

# ------------------------------------------------------------------- spmv
spmv() { req POST "/v1/matrices/$ID/spmv" -H 'Content-Type: application/json' --data-binary "$1"; }
spmv '{"kernel":"cpu.csr.serial","x":['"$X"'}'
expect_code "malformed JSON: 400" 400
check "malformed JSON: code invalid_json" jget '(d["error"]["code"] == "invalid_json") or 1/0'
spmv '[1,2,3]'
expect_code "JSON that is not an object: 400" 400
spmv '{"kernel":"cpu.csr.serial","x":[1,2,3]}'
expect_code "x of the wrong length: 400" 400
check "wrong length: the message gives both lengths" jget '("3" in d["error"]["message"] and "'$COLS'" in d["error"]["message"]) or 1/0'
spmv '{"kernel":"cpu.csr.serial"}'
expect_code "x missing: 400" 400
spmv '{"kernel":"cpu.csr.serial","x":['"${X%,*}"',"one"]}'
expect_code "x with a word in it: 400" 400
spmv '{"kernel":"cpu.csr.serial","x":['"${X%,*}"',"NaN"],"verify":true}'
expect_code "x with \"NaN\" is accepted" 200
check "y carries NaN as the string \"NaN\"" grep -q '"NaN"' "$BODY_FILE"
spmv '{"kernel":"cpu.csr.nope","x":['"$X"']}'
expect_code "unknown kernel: 400" 400
check "unknown kernel: code unknown_kernel" jget '(d["error"]["code"] == "unknown_kernel") or 1/0'
spmv '{"kernel":"gpu.csr.scalar","x":['"$X"']}'
expect_code "GPU kernel on a host matrix / without a GPU: 409" 409
if [ -n "$(curl -s "$SPMVD_URL/v1/kernels" | grep -o '"cpu.spmspm.serial"')" ]; then
  spmv '{"kernel":"cpu.spmspm.serial","x":['"$X"']}'
  expect_code "an spmspm kernel on /spmv: 400" 400
  req POST "/v1/matrices/$ID/bench" -H 'Content-Type: application/json' --data-binary '{"kernels":["cpu.spmspm.serial"]}'
  expect_code "an spmspm kernel in a bench: 400" 400
fi
spmv '{"kernel":"cpu.csr.chunked","chunk":0,"x":['"$X"']}'
expect_code "chunk 0 (below its range): 400" 400
spmv '{"kernel":"cpu.csr.chunked","chunk":1000000,"x":['"$X"']}'
expect_code "chunk 1000000 (above its range): 400" 400
spmv '{"kernel":"cpu.csr.serial","block_size":64,"x":['"$X"']}'
expect_code "a parameter the kernel does not take: 400" 400
spmv '{"kernel":"cpu.csr.omp","threads":"four","x":['"$X"']}'
expect_code "a parameter that is not an integer: 400" 400
spmv '{"kernel":"cpu.csr.serial","runs":0,"x":['"$X"']}'
expect_code "runs 0: 400" 400
spmv '{"kernel":"cpu.csr.serial","runs":101,"x":['"$X"']}'
expect_code "runs over max_runs: 400" 400
spmv '{"kernel":"cpu.csr.serial","warmup":-1,"x":['"$X"']}'
expect_code "negative warmup: 400" 400
spmv '{"kernel":"cpu.csr.serial","verify":"yes","x":['"$X"']}'
expect_code "verify not a boolean: 400" 400
spmv '{"kernel":"cpu.csr.serial","x":['"$X"'],"colour":1}'
expect_code "unknown field: 400" 400
head -c 16 /dev/zero >"$E2E_TMP/x.bin"
req POST "/v1/matrices/$ID/spmv?kernel=cpu.csr.serial" -H 'Content-Type: application/octet-stream' --data-binary "@$E2E_TMP/x.bin"
expect_code "binary x of the wrong length: 400" 400
"$PYTHON" -c "import sys; sys.stdout.buffer.write(b'\0' * 8 * $COLS)" >"$E2E_TMP/x.bin"
"$PYTHON" -c "import sys; sys.stdout.buffer.write(b'\0' * 8 * ($COLS + 1))" >"$E2E_TMP/x1.bin"
req POST "/v1/matrices/$ID/spmv?kernel=cpu.csr.serial" -H 'Content-Type: application/octet-stream' --data-binary "@$E2E_TMP/x1.bin"
expect_code "binary x one value too long: 400" 400
"$PYTHON" -c "import sys; sys.stdout.buffer.write(b'\0' * 8 * (3 * $COLS + 1024))" >"$E2E_TMP/x3.bin"
req POST "/v1/matrices/$ID/spmv?kernel=cpu.csr.serial" -H 'Content-Type: application/octet-stream' --data-binary "@$E2E_TMP/x3.bin"
expect_code "binary x far beyond the matrix's size: 413 before it is read" 413
req POST "/v1/matrices/$ID/spmv?kernel=cpu.csr.serial&runs=abc" -H 'Content-Type: application/octet-stream' --data-binary "@$E2E_TMP/x.bin"
expect_code "binary with runs=abc: 400" 400
req POST "/v1/matrices/$ID/spmv?kernel=cpu.csr.chunked&chunk=-5" -H 'Content-Type: application/octet-stream' --data-binary "@$E2E_TMP/x.bin"
expect_code "binary with chunk=-5: 400" 400
req POST "/v1/matrices/$ID/spmv?kernel=cpu.csr.serial" -H 'Content-Type: application/octet-stream' --data-binary "@$E2E_TMP/x.bin"
expect_code "binary x of the right length: 200" 200
req POST "/v1/matrices/$ID/spmv" -H 'Content-Type: text/csv' --data-binary '1,2,3'
expect_code "spmv with Content-Type text/csv: 415" 415
"$PYTHON" -c "print('{\"x\":[' + ','.join(['1.0'] * 20000) + ']}')" >"$E2E_TMP/huge.json"
req POST "/v1/matrices/$ID/spmv" -H 'Content-Type: application/json' --data-binary "@$E2E_TMP/huge.json"
expect_code "spmv body over max_body_bytes: 413" 413
req POST "/v1/matrices/$ID/bench" -H 'Content-Type: application/json' --data-binary '{"kernels":["cpu.nope"]}'
expect_code "bench with an unknown kernel: 400" 400
req POST "/v1/matrices/$ID/bench" -H 'Content-Type: application/json' --data-binary '{"block_sizes":[7]}'
expect_code "bench with block size 7: 400" 400
req GET "/v1/matrices/$ID/spy.png?size=5"
expect_code "spy.png size 5 (below 16): 400" 400
check "still healthy after the bad requests" healthy

# ------------------------------------------------------- ids and routes
NOID=00000000-0000-4000-8000-000000000000
for r in "GET /v1/matrices/$NOID" "DELETE /v1/matrices/$NOID" "GET /v1/matrices/$NOID/spy.png" \
         "POST /v1/matrices/$NOID/spmv" "POST /v1/matrices/$NOID/bench" "GET /v1/jobs/$NOID" \
         "GET /v1/matrices/not-an-id" "GET /v1/matrices/${ID^^}" "GET /v1/jobs/../../etc/passwd" \
         "GET /v1/nothing" "GET /" "GET /v1/matrices/$ID/other"; do
  set -- $r
  req "$1" "$2" -H 'Content-Type: application/json' --data-binary '{}'
  if [ "$CODE" = 404 ] && error_body; then ok "$r: 404 with an error body"
  else not_ok "$r: 404 with an error body" "HTTP $CODE $(head -c 200 "$BODY_FILE")"; fi
done
req PUT /v1/matrices
expect_code "PUT /v1/matrices: 405" 405
check "405 carries Allow: GET, HEAD, POST" [ "$(header Allow)" = "GET, HEAD, POST" ]
req POST /v1/health
expect_code "POST /v1/health: 405" 405
req DELETE "/v1/matrices/$ID/spmv"
expect_code "DELETE on spmv: 405" 405
check "Allow: POST on spmv" [ "$(header Allow)" = POST ]
req GET "/v1/matrices/$ID"
expect_code "the good matrix is still there" 200
check "healthy at the end" healthy
stop_spmvd; rc=$?
check "SIGTERM: exit status 0 (got $rc)" [ "$rc" -eq 0 ]
done_testing
