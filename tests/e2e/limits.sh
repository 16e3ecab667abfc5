#!/usr/bin/env bash
# limits.sh — every number from the network is range-checked, limits are
# cumulative per request, ids are parsed strictly, names never reach a path,
# and without the token nothing but /v1/health answers.
#
# A daemon with small limits (max_runs 50, max_request_work 100000,
# max_body_bytes 64 KiB, max_upload_bytes 256 KiB, max_rows 1000,
# max_nnz 5000) is sent each limit plus one and values no parser should
# take (negative, fractional, overflowing, not numbers); each answer must
# be the 4xx that names the limit, and the daemon must still serve normal
# requests afterwards. A second daemon with a token checks that unknown
# routes and wrong methods are 401 too, and that the token can come from a
# systemd credential ($CREDENTIALS_DIRECTORY/spmvd-token).
. "$(dirname "$0")/lib.sh"

start_spmvd --max-runs 50 --max-request-work 100000 --max-body-bytes 64k --max-upload-bytes 256k \
  --max-rows 1000 --max-nnz 5000 --max-spmspm-nnz 5000 || { not_ok "spmvd starts with small limits" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
ok "spmvd starts with small limits"

# body_has TEXT: the last answer's body holds TEXT.
body_has() { grep -q -- "$1" "$BODY_FILE"; }
# expect DESC CODE TEXT: status CODE and TEXT in the body.
expect() {
  if [ "$CODE" = "$2" ] && body_has "$3"; then ok "$1"
  else not_ok "$1" "expected HTTP $2 naming \"$3\", got $CODE" "$(head -c 300 "$BODY_FILE")"; fi
}

upload_raw "$MATRICES/real/karate.mtx" "device=cpu"   # 34x34, nnz 156
expect_code "karate uploads" 201
K=$MATRIX_ID
spmv_json() { req POST "/v1/matrices/$K/spmv" -H 'Content-Type: application/json' -d "$1"; }
spmv_bin() { req POST "/v1/matrices/$K/spmv?$1" -H 'Content-Type: application/octet-stream' --data-binary "@$2"; }
X34=$("$PYTHON" -c 'print("[" + ",".join(["1"] * 34) + "]")')
"$PYTHON" -c 'import struct, sys; sys.stdout.buffer.write(struct.pack("<34d", *([1.0] * 34)))' >"$E2E_TMP/x34.f64"

# ------------------------------------------------------------ generated matrices
# counted against max_rows and max_nnz before anything is built
req POST "/v1/matrices?generate=poisson2d&n=40&device=cpu"
expect "generate=poisson2d n=40 (1600 rows > max_rows 1000): 422 naming max_rows" 422 'max_rows'
req POST "/v1/matrices?generate=band&n=1000&per_row=9&device=cpu"
expect "generate=band n=1000 per_row=9 (8980 non-zeros > max_nnz 5000): 422 naming it" 422 'at most 5000'
req POST "/v1/matrices?generate=band&n=500&per_row=5&device=cpu"
expect "generate=band n=500 per_row=5 (2494 non-zeros): 201" 201 '"nnz": *2494'
[ "$CODE" = 201 ] && req DELETE "/v1/matrices/$(jget 'd["id"]')"

# random (the CSR study's rectangular matrices, docs/kernels.md): rows, cols, nnz, bounded as the others, deterministic by seed
req POST "/v1/matrices?generate=random&rows=10&cols=1001&nnz=5&device=cpu"
expect "generate=random 10 x 1001 (cols > max_rows 1000): 422 naming max_rows" 422 'max_rows'
req POST "/v1/matrices?generate=random&rows=100&cols=100&nnz=5001&device=cpu"
expect "generate=random nnz=5001 > max_nnz 5000: 422 naming it" 422 'at most 5000'
req POST "/v1/matrices?generate=random&rows=10&cols=10&nnz=101&device=cpu"
expect "generate=random nnz 101 > 10 x 10 places: 400" 400 'rows x cols = 100'
req POST "/v1/matrices?generate=random&rows=20&cols=1000&device=cpu"
expect "generate=random without nnz: 400 naming rows, cols and nnz" 400 'takes `rows`, `cols` and `nnz`'
req POST "/v1/matrices?generate=random&rows=20&cols=1000&nnz=400&per_row=3&device=cpu"
expect "generate=random with per_row: 400" 400 'not `n`, `per_row`'
req POST "/v1/matrices?generate=uniform&n=20&cols=40&device=cpu"
expect "generate=uniform with cols: 400 (random's only)" 400 'generate=random only'
req POST "/v1/matrices?generate=random&rows=20&cols=1000&nnz=400&color=3&device=cpu"
expect_code "generate=random with an unknown parameter: 400" 400
req POST "/v1/matrices?generate=random&rows=20&cols=1000&nnz=400&seed=7&device=cpu"
expect "generate=random 20 x 1000, nnz 400, seed 7: 201" 201 '"nnz": *400'
check "its descriptor: 20 x 1000, generated {kind random, rows, cols, nnz, seed}" \
  jget '(d["rows"], d["cols"], d["generated"]) == (20, 1000, {"kind": "random", "rows": 20, "cols": 1000, "nnz": 400, "seed": 7}) or 1/0'
R=$(jget 'd["id"]'); RSHA=$(jget 'd["sha256"]')
req POST "/v1/matrices?generate=random&rows=20&cols=1000&nnz=400&seed=7&device=cpu"
check "the same seed again: the same matrix (sha256)" [ "$(jget 'd["sha256"]')" = "$RSHA" ]
[ "$CODE" = 201 ] && req DELETE "/v1/matrices/$(jget 'd["id"]')"
req POST "/v1/matrices?generate=random&rows=20&cols=1000&nnz=400&seed=8&device=cpu"
check "seed 8: another matrix" [ "$(jget 'd["sha256"]')" != "$RSHA" ]
[ "$CODE" = 201 ] && req DELETE "/v1/matrices/$(jget 'd["id"]')"
# a bench counts cpu.csr.chunked's passes: span 8 over 1000 columns is 125 passes, 400 + 124 * 20 = 2880 a run,
# with the baseline's 400: 3280 a run; 31 runs = 101680 > 100000, 30 fit
req POST "/v1/matrices/$R/bench" -H 'Content-Type: application/json' -d '{"runs":30,"warmup":1,"kernels":["cpu.csr.chunked"]}'
expect "bench of chunked on 20 x 1000, 31 runs: 400 counting the passes (101680 units)" 400 '101680 units of work.*max_request_work'
req POST "/v1/matrices/$R/bench" -H 'Content-Type: application/json' -d '{"runs":29,"warmup":1,"async":false,"kernels":["cpu.csr.chunked"]}'
expect_code "bench of chunked, 30 runs (98400 units): 200" 200
check "its table: chunked at span 8 verified against the baseline" \
  jget '[e for e in d["results"] if e["kernel"] == "cpu.csr.chunked"][0]["params"]["span"] == 8 and all(e["verified"] for e in d["results"]) or 1/0'
req DELETE "/v1/matrices/$R"

# ------------------------------------------------------------ runs, warmup
spmv_json "{\"x\":$X34,\"runs\":51}"
expect "runs 51 > max_runs 50: 400 naming the range" 400 '1\.\.50'
spmv_json "{\"x\":$X34,\"warmup\":51}"
expect "warmup 51 > max_runs: 400" 400 'warmup'
spmv_json "{\"x\":$X34,\"runs\":0}"
expect "runs 0: 400" 400 'runs'
spmv_json "{\"x\":$X34,\"runs\":-1}"
expect "runs -1: 400" 400 'runs'
spmv_json "{\"x\":$X34,\"runs\":2.5}"
expect "runs 2.5: 400" 400 'runs'
spmv_json "{\"x\":$X34,\"runs\":1e300}"
expect "runs 1e300: 400" 400 'runs'
spmv_json "{\"x\":$X34,\"runs\":99999999999999999999999}"
expect_code "runs 10^23 (beyond int64): 400" 400
spmv_json "{\"x\":$X34,\"runs\":\"5\"}"
expect "runs as a string: 400" 400 'runs'
spmv_bin "runs=51" "$E2E_TMP/x34.f64"
expect "binary: runs=51 in the query: 400" 400 'runs'
spmv_bin "runs=18446744073709551617" "$E2E_TMP/x34.f64"
expect "binary: runs=2^64+1: 400" 400 'runs'
spmv_bin "runs=5abc" "$E2E_TMP/x34.f64"
expect "binary: runs=5abc: 400" 400 'runs'
spmv_bin "runs=+0x10" "$E2E_TMP/x34.f64"
expect "binary: runs=+0x10: 400" 400 'runs'
spmv_bin "warmup=-3" "$E2E_TMP/x34.f64"
expect "binary: warmup=-3: 400" 400 'warmup'
spmv_bin "block_size=2147483648" "$E2E_TMP/x34.f64"
expect_code "binary: block_size=2^31: 400" 400

# ------------------------------------------------- cumulative: request work
# nnz 156: 156 * 641 > 100000 >= 156 * 641 - ...; runs 50 + warmup 50 = 100 runs -> 15600: fits
spmv_json "{\"x\":$X34,\"runs\":50,\"warmup\":50,\"verify\":true}"
expect_code "runs 50 + warmup 50 (15756 multiply-adds) fits max_request_work" 200
req POST "/v1/matrices/$K/bench" -H 'Content-Type: application/json' \
  -d '{"runs":50,"warmup":50,"kernels":["cpu.csr.omp","cpu.csr.serial","cpu.ell.omp","cpu.hll.omp"],"hack_sizes":[1,2,4,8,16,32,64,128]}'
expect "bench: every run of every kernel and combination counts: 400 naming max_request_work" 400 'max_request_work'
req POST "/v1/matrices/$K/bench" -H 'Content-Type: application/json' -d '{"runs":2,"warmup":0,"kernels":["cpu.csr.omp"]}'
expect_code "bench within the budget: 202" 202
# cpu.csr.chunked counts its passes: span 1 on 34 columns is 34 passes, 156 + 33 * 34 = 1278 units a run;
# 101 runs = 129078 > 100000, where cpu.csr.serial's 15756 fit; span 34 (one pass) fits again
spmv_json "{\"x\":$X34,\"runs\":50,\"warmup\":50,\"verify\":true,\"kernel\":\"cpu.csr.chunked\",\"span\":1}"
expect "chunked span 1, 101 runs: 400 counting the passes (1278 units a run) against max_request_work" 400 '1278 units of work a run.*max_request_work'
spmv_json "{\"x\":$X34,\"runs\":50,\"warmup\":50,\"verify\":true,\"kernel\":\"cpu.csr.chunked\",\"span\":34}"
expect_code "chunked span 34 (one pass), 101 runs: fits" 200
spmv_json "{\"x\":$X34,\"kernel\":\"cpu.csr.chunked\",\"span\":4,\"chunk\":4}"
expect "chunked with span and chunk both: 400 naming both" 400 'span.*chunk.*not both'
req POST "/v1/matrices/$K/bench" -H 'Content-Type: application/json' \
  -d '{"block_sizes":[32,32,32,32,32,32,32,32,32,32,32,32,32,32,32,32,32]}'
expect "bench: 17 block sizes: 400" 400 'block_sizes'
req POST "/v1/matrices/$K/bench" -H 'Content-Type: application/json' -d '{"hack_sizes":[0]}'
expect "bench: hack size 0: 400" 400 'hack_sizes'

# ---------------------------------------------- cumulative: SpMSpM C = A*B
# A 100x1 and B 1x100, 100 entries each: C is dense, 10000 entries > max_spmspm_nnz
"$PYTHON" -c 'print("%%MatrixMarket matrix coordinate real general\n100 1 100"); [print(i + 1, 1, 0.5) for i in range(100)]' >"$E2E_TMP/col.mtx"
"$PYTHON" -c 'print("%%MatrixMarket matrix coordinate real general\n1 100 100"); [print(1, j + 1, 2) for j in range(100)]' >"$E2E_TMP/row.mtx"
upload_raw "$E2E_TMP/col.mtx" "device=cpu"; COL=$MATRIX_ID
upload_raw "$E2E_TMP/row.mtx" "device=cpu"; ROW=$MATRIX_ID
spmspm() { req POST "/v1/matrices/$1/spmspm" -H 'Content-Type: application/json' -d "$2"; }
spmspm "$COL" "{\"b\":\"$ROW\"}"
expect "spmspm whose C may hold 10000 entries > max_spmspm_nnz 5000: 422 naming max_spmspm_nnz" 422 'up to 10000 entries.*over max_spmspm_nnz (5000)'
spmspm "$K" "{\"b\":\"$K\",\"runs\":50,\"warmup\":50}"
expect "spmspm karate*karate 100 times over max_request_work: 400 naming it" 400 'max_request_work'
spmspm "$K" "{\"b\":\"$K\",\"runs\":2}"
expect_code "spmspm karate*karate twice fits: 200" 200

# ------------------------------------------------------------- x, bodies
spmv_json '{"x":[1,2,3]}'
expect "x of 3 values for 34 columns: 400 naming both" 400 '34'
head -c 100 "$E2E_TMP/x34.f64" >"$E2E_TMP/x-short"
spmv_bin "" "$E2E_TMP/x-short"
expect "binary x of 100 bytes: 400 naming the sizes" 400 '100'
head -c 200000 /dev/zero >"$E2E_TMP/big"
spmv_bin "" "$E2E_TMP/big"
expect "binary x of 200000 bytes: 413 naming what sets the bound for x" 413 'what x of this matrix can take in binary'
"$PYTHON" -c 'print("{\"x\":[" + ",".join(["1"] * 40000) + "]}")' >"$E2E_TMP/big.json"
req POST "/v1/matrices/$K/spmv" -H 'Content-Type: application/json' --data-binary "@$E2E_TMP/big.json"
expect "a JSON body over max_body_bytes: 413 naming the key" 413 'over the limit of 65536 bytes (max_body_bytes)'

# raw HTTP for Content-Length values curl would not send
raw_http() {
  "$PYTHON" - "$SPMVD_PORT" "$1" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(sys.argv[2].encode().decode("unicode_escape").encode("latin-1"))
data = b""
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
except socket.timeout:
    pass
print(data.split(b"\r\n", 1)[0].decode("latin-1", "replace"))
print(data.decode("latin-1", "replace").split("\r\n\r\n", 1)[-1][:300])
EOF
}
raw_expect() {
  local out; out=$(raw_http "$2")
  if printf '%s' "$out" | head -1 | grep -qE "^HTTP/1\.[01] ($3)"; then ok "$1"
  else not_ok "$1" "expected $3, got: $(printf '%s' "$out" | head -2 | tr '\n' ' ')"; fi
}
raw_expect "Content-Length 10^20 on an upload: refused (400 or 413) before any body" \
  'POST /v1/matrices HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000000000000000\r\nConnection: close\r\n\r\n' '400|413'
raw_expect "Content-Length 1 GiB on an upload over max_upload_bytes: 413 before the body" \
  'POST /v1/matrices HTTP/1.1\r\nHost: x\r\nContent-Length: 1073741824\r\nConnection: close\r\n\r\n' '413'
raw_expect "Content-Length -5: 400" \
  'POST /v1/matrices HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\nConnection: close\r\n\r\n' '400|413'
raw_expect "Content-Length abc: 400" \
  'POST /v1/matrices HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\nConnection: close\r\n\r\n' '400|413'
raw_expect "two different Content-Lengths: 400" \
  'POST /v1/matrices HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 7\r\nConnection: close\r\n\r\nhello' '400|413'
raw_expect "spmv Content-Length 1 MiB over max_body_bytes: 413 before the body" \
  "POST /v1/matrices/$K/spmv HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\nConnection: close\r\n\r\n" '413'
out=$("$PYTHON" - "$SPMVD_PORT" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"POST /v1/matrices?device=cpu HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
try:
    for _ in range(16):  # 16 chunks of 32 KiB: twice max_upload_bytes
        s.sendall(b"8000\r\n" + b"1" * 0x8000 + b"\r\n")
    s.sendall(b"0\r\n\r\n")
except OSError:
    pass  # the server may answer and close before the end
data = b""
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
except OSError:
    pass
print(data.split(b"\r\n", 1)[0].decode())
EOF
)
check "a chunked upload over max_upload_bytes (no Content-Length): 413 as it arrives ($out)" \
  bash -c "printf '%s' '$out' | grep -q '^HTTP/1.[01] 413'"

# --------------------------------------------------------- uploads' sizes
up_text() { printf '%s' "$1" >"$E2E_TMP/m.mtx"; upload_raw "$E2E_TMP/m.mtx" "device=cpu"; }
up_text $'%%MatrixMarket matrix coordinate real general\n1001 5 1\n1 1 1\n'
expect "1001 rows > max_rows 1000: 422 naming the limit and the key" 422 'over the limit of 1000 (max_rows)'
up_text $'%%MatrixMarket matrix coordinate real general\n5 1001 1\n1 1 1\n'
expect "1001 columns > max_rows 1000: 422 naming the key" 422 '1000 (max_rows)'
up_text $'%%MatrixMarket matrix coordinate real general\n100 100 5001\n1 1 1\n'
expect "5001 entries > max_nnz 5000: 422 too_large naming the limit and the key" 422 '"too_large".*5000 (max_nnz)'
up_text $'%%MatrixMarket matrix coordinate real symmetric\n1000 1000 3000\n'"$(for i in $(seq 2 3001); do echo "$(( (i % 999) + 2 )) 1 1"; done)"
expect "a symmetric file expanding past max_nnz: 422 too_large naming max_nnz" 422 \
  '"too_large".*after symmetric expansion are over the limit of 5000 (max_nnz)'
up_text $'%%MatrixMarket matrix coordinate real general\n4294967297 4294967297 1\n1 1 1\n'
expect_code "sizes 2^32+1 (overflowing int32): 422" 422
up_text $'%%MatrixMarket matrix coordinate real general\n3 3 18446744073709551617\n1 1 1\n'
expect_code "nnz 2^64+1: 422" 422
up_text $'%%MatrixMarket matrix array real general\n1000 1000\n1\n'
expect_code "a dense 1000x1000 array (10^6 entries > max_nnz): 422" 422
head -c 300000 /dev/zero | tr '\0' '1' >"$E2E_TMP/huge.mtx"
upload_raw "$E2E_TMP/huge.mtx" "device=cpu"
expect "an upload of 300000 bytes > max_upload_bytes: 413 naming the key" 413 \
  'body of 300000 bytes is over the limit of 262144 bytes (max_upload_bytes)'
req POST "/v1/matrices?device=cpu" -H 'Transfer-Encoding: chunked' -H 'Content-Type: application/octet-stream' \
  --data-binary "@$E2E_TMP/huge.mtx"
expect "a chunked upload past max_upload_bytes: 413 naming the key" 413 'over the limit of 262144 bytes (max_upload_bytes)'
for q in "hack_size=0" "hack_size=99999999999999999999" "hack_size=16x" "dtype=float16" "device=gpu99999999999" "formats=csr,nope"; do
  upload_raw "$MATRICES/real/karate.mtx" "$q"
  case $CODE in 400 | 409) ok "upload option $q: $CODE" ;; *) not_ok "upload option $q: 400/409" "got $CODE: $(head -c 200 "$BODY_FILE")" ;; esac
done

# ------------------------------------------------------------ spy.png size
for s in 4097 15 0 -16 abc 99999999999999999999 512x ''; do
  req GET "/v1/matrices/$K/spy.png?size=$s"
  expect "spy.png size=$s: 400 naming 16..4096" 400 '16\.\.4096'
done
req GET "/v1/matrices/$K/spy.png?size=4096"
check "spy.png size=4096 of a 34x34 matrix: 200, at most 34 pixels a side" \
  bash -c "[ $CODE = 200 ] && \"$PYTHON\" -c 'import struct,sys; d=open(sys.argv[1],\"rb\").read(); w,h=struct.unpack(\">II\", d[16:24]); assert w<=34 and h<=34' '$BODY_FILE'"

# ------------------------------------------------------------ ids, names
for p in "/v1/matrices/${K^^}" "/v1/matrices/${K}0" "/v1/matrices/${K:0:35}" "/v1/matrices/..%2F..%2Fetc%2Fpasswd" \
         "/v1/matrices/%00$K" "/v1/jobs/../matrices" "/v1/jobs/${K}x" "/v1/jobs/00000000-0000-0000-0000-00000000000g"; do
  req GET "$p" --path-as-is
  expect_code "id ${p#/v1/}: 404, never a lookup" 404
done
req GET "/v1/jobs/$K"
expect_code "a matrix id is not a job: 404" 404
req POST "/v1/matrices/$K%00/spmv" -H 'Content-Type: application/json' -d "{\"x\":$X34}"
expect_code "<id>%00/spmv: the NUL does not cut the id short: 404" 404
req GET "/v1/matrices/$K%00"
expect_code "<id>%00: 404" 404
for name in "../../escape" "/etc/passwd" "a/b/c" "..%2F.." "x.csr"; do
  printf '%%%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1\n' >"$E2E_TMP/n.mtx"
  req POST /v1/matrices -F "file=@$E2E_TMP/n.mtx;filename=$name" -F "device=cpu"
  [ "$CODE" = 201 ] || not_ok "upload named $name" "got $CODE"
  req POST "/v1/matrices?device=cpu&name=$(printf '%s' "$name" | sed 's|/|%2F|g')" --data-binary "@$E2E_TMP/n.mtx"
done
check "names and file names never reach a path: the state dir holds only <uuid>.csr" \
  bash -c "ls -A '$SPMVD_STATE' | grep -vE '^(\.lock|damaged|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.csr)$' | grep -q . && exit 1; [ ! -e '$E2E_TMP/escape' ] && [ -z \"\$(ls -A '$SPMVD_STATE/damaged')\" ]"
req POST "/v1/matrices?device=cpu&name=a%01b" --data-binary "@$E2E_TMP/n.mtx"
expect "a name with a control character: 400" 400 'name'
req POST "/v1/matrices?device=cpu&name=%FF%FE" --data-binary "@$E2E_TMP/n.mtx"
expect "a name that is not UTF-8: 400" 400 'name'

check "after all that the daemon still multiplies" bash -c \
  "[ \"\$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' -d '{\"x\":$X34}' '$SPMVD_URL/v1/matrices/$K/spmv')\" = 200 ]"
stop_spmvd
check "and stops cleanly" [ $? -eq 0 ]

# ---------------------------------------------------------------- access
TOKEN=limits-token-$RANDOM$RANDOM-abcdefghijklmnop
mkdir -p "$E2E_TMP/creds"
printf '%s\n' "$TOKEN" >"$E2E_TMP/creds/spmvd-token"
unset SPMVD_STATE
SPMVD_CURL=(-H "Authorization: Bearer $TOKEN")
if CREDENTIALS_DIRECTORY=$E2E_TMP/creds start_spmvd; then
  ok "the token from the systemd credential spmvd-token is in force"
  SPMVD_CURL=()
  for m_p in "GET /nope" "GET /v1/matrices/not-an-id" "DELETE /v1/info" "PUT /v1/matrices" "GET /v1/jobs/x" "POST /v1/health/x"; do
    req ${m_p% *} "${m_p#* }"
    expect_code "without the token ${m_p}: 401 (no 404/405 telling routes apart)" 401
  done
  req GET /v1/health
  expect_code "/v1/health needs no token" 200
  req GET /v1/info -H "Authorization: Bearer $TOKEN"
  expect_code "the credential's token: 200" 200
  req GET /v1/info -H "Authorization: Basic $TOKEN"
  expect_code "the token under another scheme: 401" 401
  req GET /v1/info -H "Authorization: Bearer ${TOKEN}x"
  expect_code "the token plus one character: 401" 401
  stop_spmvd
else
  not_ok "spmvd starts with a systemd credential" "$(tail -3 "$SPMVD_LOG")"
fi
printf 'short\n' >"$E2E_TMP/creds/spmvd-token"
CREDENTIALS_DIRECTORY=$E2E_TMP/creds "$SPMVD" --check-config >/dev/null 2>"$E2E_TMP/short.log"; rc=$?
check "a credential token under 16 characters is refused, naming the credential (exit $rc)" \
  bash -c "[ $rc -ne 0 ] && grep -q spmvd-token '$E2E_TMP/short.log'"
done_testing
