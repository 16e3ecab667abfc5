#!/usr/bin/env bash
# bounds.sh — issue 33: no small request makes the daemon allocate what it
# declares. Each hostile request of the issue is sent to a CPU daemon with
# the default limits, and the daemon's memory is measured around it: the
# answer must be the refusal naming the bound, and the peak resident set
# (VmHWM, /proc/PID/status) may grow by at most BOUND_MB past what it was
# before (plus the request's own body where the daemon must collect one):
#
#   a 76-byte Matrix Market file declaring 2^31-1 x 2^31-1 (its CSR: 8.6 GB)
#   874 KB of gzip: a 1 x 1 matrix declaring 10^8 entries (duplicates)
#   an .npz whose zip directory claims 1.6 GB for a deflated member of bytes
#   an .npz holding data.npy twice (refused as ambiguous, not first-wins)
#   generate=lp n=2^30-1 per_row=1 (counted before its 8.6 GB row table)
#   SpMSpM 6000x1 times 1x6000 (a 36 M-entry C) answered as JSON
#   a JSON body of 20 M values (a jansson tree of about a gigabyte)
#   GET /v1/vectors/{id} as JSON for 16.7 M values
#   86 async spmv jobs on a 10^6-row matrix (results kept as text under
#   max_job_result_bytes: the later ones fail with 507), and RSS back down
#   once they are dropped
# then the host transpose (op t) counted in host_bytes and evicted under
# host_format_bytes, and a stored matrix past max_matrix_bytes skipped (and
# kept) at reload. Files come from bounds_files.py (standard library only).
. "$(dirname "$0")/lib.sh"

BOUND_MB=64
"$PYTHON" "$(dirname "$0")/bounds_files.py" "$E2E_TMP" || { not_ok "bounds_files.py writes the hostile files"; done_testing; exit; }
# the default limits; a queue of 100 so the 86 jobs below all wait their turn
start_spmvd --queue-depth 100 || { not_ok "spmvd starts" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
ok "spmvd starts with the default limits"
req GET /v1/info
check "/v1/info shows max_matrix_bytes, max_spmspm_nnz (sized to memory) and max_job_result_bytes 256 MiB" \
  jget "(d['limits']['max_matrix_bytes'] > 0 and d['limits']['max_spmspm_nnz'] > 0 and
         d['limits']['max_job_result_bytes'] == 268435456) or 1/0"

status_kb() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$SPMVD_PID/status"; }
body_has() { grep -q -- "$1" "$BODY_FILE"; }
# hostile WHAT CODE TEXT EXTRA_MB CURL...: the request answered CODE naming
# TEXT, the peak RSS grown by at most BOUND_MB + EXTRA_MB across it
hostile() {
  local what=$1 code=$2 text=$3 extra=$4; shift 4
  local before peak
  echo 5 >"/proc/$SPMVD_PID/clear_refs" # VmHWM := VmRSS (Linux 4.0+)
  before=$(status_kb VmRSS)
  CODE=$(curl -s -o "$BODY_FILE" -w '%{http_code}' --max-time 120 "$@")
  peak=$(status_kb VmHWM)
  diag "$what: HTTP $CODE, RSS before $((before / 1024)) MB, peak during it $((peak / 1024)) MB"
  if [ "$CODE" = "$code" ] && body_has "$text"; then ok "$what: $code naming \"$text\""
  else not_ok "$what: $code naming \"$text\"" "got $CODE" "$(head -c 300 "$BODY_FILE")"; fi
  if [ $((peak - before)) -le $(((BOUND_MB + extra) * 1024)) ]; then
    ok "$what: the peak RSS grew $(((peak - before) / 1024)) MB, at most $((BOUND_MB + extra)) MB"
  else not_ok "$what: the peak RSS grew $(((peak - before) / 1024)) MB, past $((BOUND_MB + extra)) MB"; fi
}
U=$SPMVD_URL/v1/matrices
raw() { printf '%s\n' --data-binary "@$E2E_TMP/$1" -H 'Content-Type: application/octet-stream' "$U"; }

mapfile -t a < <(raw huge_decl.mtx)
hostile "2147483647 x 2147483647 declared in 76 bytes" 422 "over max_matrix_bytes" 0 "${a[@]}"
mapfile -t a < <(raw dup_bomb.mtx.gz)
hostile "874 KB of gzip declaring 10^8 entries of a 1 x 1 matrix" 422 "only duplicates could fill them" 0 "${a[@]}"
mapfile -t a < <(raw lying_cd.npz)
hostile ".npz whose directory claims 1.6 GB for a few deflated bytes" 422 "compressed bytes can hold" 0 "${a[@]}"
mapfile -t a < <(raw twice_data.npz)
hostile ".npz with data.npy twice" 422 "twice" 0 "${a[@]}"
hostile "generate=lp n=1073741823 per_row=1" 422 "max_nnz" 0 -X POST "$U?generate=lp&n=1073741823&per_row=1"
req GET /v1/matrices
check "nothing was stored" jget "len(d['matrices']) == 0 or 1/0"

# SpMSpM: C may hold 36 M entries, over 1 GB as JSON
upload_raw "$E2E_TMP/col.mtx"; COL=$MATRIX_ID
upload_raw "$E2E_TMP/row.mtx"; ROW=$MATRIX_ID
hostile "SpMSpM 6000x1 times 1x6000 as JSON" 422 "36000000 entries.*max_job_result_bytes" 0 \
  -X POST "$U/$COL/spmspm" -H 'Content-Type: application/json' -d "{\"b\":\"$ROW\"}"

# a JSON body of 20 M short values: collected (40 MB), then refused before jansson
"$PYTHON" -c 'import sys; sys.stdout.write("{\"values\":[" + ",".join(["1"] * 20000000) + "]}")' >"$E2E_TMP/big.json"
hostile "a JSON body of 20 M values" 422 "max_job_result_bytes" 40 -X POST "$SPMVD_URL/v1/vectors" \
  -H 'Content-Type: application/json' --data-binary "@$E2E_TMP/big.json"
rm -f "$E2E_TMP/big.json"

# a resident vector of 16.7 M values (134 MB) read back as JSON
req POST /v1/vectors -H 'Content-Type: application/json' -d '{"n":16777216,"fill":0.5}'
V=$(jget 'd["id"]')
hostile "GET /v1/vectors/{id} as JSON for 16.7 M values" 422 "max_job_result_bytes" 0 "$SPMVD_URL/v1/vectors/$V"
req GET "/v1/vectors/$V" -H 'Accept: application/octet-stream'
check "the same vector binary: 200, 134217728 bytes" [ "$CODE" = 200 ] && [ "$(stat -c %s "$BODY_FILE")" = 134217728 ]
req DELETE "/v1/vectors/$V"

# 86 async products on 10^6 rows: the results are bounded by max_job_result_bytes (256 MiB)
req POST "/v1/matrices?generate=poisson2d&n=1000"
P=$(jget 'd["id"]')
req POST /v1/vectors -H 'Content-Type: application/json' -d '{"n":1000000,"fill":"random","seed":7}'
XV=$(jget 'd["id"]')
before=$(status_kb VmRSS)
jobs=()
for i in $(seq 86); do
  req POST "/v1/matrices/$P/spmv" -H 'Content-Type: application/json' -d "{\"async\":true,\"runs\":1,\"x\":{\"vector\":\"$XV\"}}"
  [ "$CODE" = 202 ] && jobs+=("$(jget 'd["id"]')")
done
check "86 async products accepted (202)" [ "${#jobs[@]}" = 86 ]
wait_job "${jobs[${#jobs[@]} - 1]}" 300 # one worker runs them in order: the last is the last done
done_n=0; failed_n=0
for j in "${jobs[@]}"; do
  req GET "/v1/jobs/$j" # read without parsing: a kept result is 20 MB of JSON
  if grep -q '"state":"done"' "$BODY_FILE"; then done_n=$((done_n + 1))
  elif grep -q '"code":"result_too_large"' "$BODY_FILE"; then failed_n=$((failed_n + 1)); fi
done
peak=$(status_kb VmRSS)
diag "86 jobs: $done_n done, $failed_n failed result_too_large; RSS $((before / 1024)) MB -> $((peak / 1024)) MB"
check "every job done or failed with 507 result_too_large ($done_n + $failed_n)" [ $((done_n + failed_n)) = 86 ]
check "some results were refused past max_job_result_bytes ($failed_n)" [ "$failed_n" -gt 0 ]
# Under ASan (SAN=1) RSS is not the allocator's: redzones grow every
# block and the quarantine holds freed ones (256 MB by default), so the
# two RSS bounds of the results are checked in the plain build only.
if [ "${SAN:-0}" = 1 ]; then
  skip "RSS of 256 MiB of results: not under ASan (redzones and quarantine; the plain build checks it)"
else
  check "RSS grew $(((peak - before) / 1024)) MB, at most 256 MiB of results + $BOUND_MB MB" \
    [ $((peak - before)) -le $(((256 + BOUND_MB) * 1024)) ]
fi
req GET "/v1/jobs/${jobs[0]}"
check "a kept result reads back: 10^6 values of y" jget "len(d['result']['y']) == 1000000 or 1/0"
for j in "${jobs[@]}"; do req DELETE "/v1/jobs/$j"; done
after=$(status_kb VmRSS)
diag "after dropping every job: RSS $((after / 1024)) MB"
if [ "${SAN:-0}" = 1 ]; then
  skip "RSS back once the results are dropped: not under ASan (its quarantine keeps freed memory)"
else
  check "RSS back within $BOUND_MB MB of before the jobs once they are dropped" [ $((after - before)) -le $((BOUND_MB * 1024)) ]
fi

# the host transpose: counted, and evicted under host_format_bytes like a format
upload_raw "$E2E_TMP/wide1.mtx"; W1=$MATRIX_ID
t_spmv() { req POST "/v1/matrices/$1/spmv" -H 'Content-Type: application/json' -d '{"x":[2],"op":"t","kernel":"cpu.csr.omp","runs":1}'; }
t_spmv "$W1"
check "op t on a 1 x 4194304 matrix: 200, y[4194303] = 5" jget "d['y'][4194303] == 5.0 or 1/0"
req GET "/v1/matrices/$W1"
check "its transpose counts in host_bytes (>= 16 MB)" jget "d['host_bytes'] >= 4194305 * 4 or 1/0"
stop_spmvd
SPMVD_STATE=
start_spmvd --host-format-bytes 20M || { not_ok "spmvd starts with host_format_bytes 20M"; done_testing; exit; }
upload_raw "$E2E_TMP/wide1.mtx"; W1=$MATRIX_ID
upload_raw "$E2E_TMP/wide1.mtx"; W2=$MATRIX_ID
t_spmv "$W1"; t_spmv "$W2"
req GET "/v1/matrices/$W1"
check "host_format_bytes 20M: the second transpose evicted the first (host_bytes $(jget "d['host_bytes']"))" \
  jget "d['host_bytes'] < 1000 or 1/0"
t_spmv "$W1"
check "the evicted transpose is built again on its next use: y right" jget "d['y'][4194303] == 5.0 or 1/0"

# reload: a stored matrix past max_matrix_bytes is skipped and kept, not loaded
req POST "/v1/matrices?generate=poisson2d&n=300"
G=$(jget 'd["id"]')
upload_raw "$E2E_TMP/col.mtx"; KEEP=$MATRIX_ID
stop_spmvd
start_spmvd --max-matrix-bytes 100k || { not_ok "spmvd restarts with max_matrix_bytes 100k"; done_testing; exit; }
req GET "/v1/matrices/$G"
expect_code "restart with max_matrix_bytes 100k: the 1.3 MB stored matrix is not loaded (404)" 404
req GET "/v1/matrices/$KEEP"
expect_code "the small one is" 200
check "the log says why" grep -q "max_matrix_bytes" "$SPMVD_LOG"
check "its file is kept" [ -f "$SPMVD_STATE/$G.csr" ]
stop_spmvd
start_spmvd || { not_ok "spmvd restarts with the defaults"; done_testing; exit; }
req GET "/v1/matrices/$G"
expect_code "restart with the defaults: it is back" 200
done_testing
