#!/usr/bin/env bash
# bench_async.sh — end to end: POST /v1/matrices/{id}/bench takes "async".
#
# docs/api.md: a bench is a job by default ("async" absent or true: 202 and
# a job, waited for here with a long poll) and synchronous with "async":
# false (the request waits; 200 with the table itself). Each way the table
# holds cpu.csr.serial's result, verified; a non-boolean "async" is a 400.
# The matrix is random (seed printed; SPMV_SEED repeats it).
. "$(dirname "$0")/lib.sh"

SEED=${SPMV_SEED:-$$}
diag "seed $SEED (SPMV_SEED=$SEED repeats this run)"
M=$E2E_TMP/a.mtx
SPMV_SEED=$SEED gen_matrix "$M" 200 5

if ! start_spmvd; then
  not_ok "spmvd starts" "$(tail -n 20 "$SPMVD_LOG")"; done_testing; exit
fi
upload_raw "$M"
expect_code "upload" 201

# bench_with ASYNC: posts a one-kernel bench with "async": ASYNC.
bench_with() {
  req POST "/v1/matrices/$MATRIX_ID/bench" -H 'Content-Type: application/json' \
    -d '{"kernels":["cpu.csr.serial"],"runs":1,"warmup":0,"async":'"$1"'}'
}

for a in true null; do
  bench_with $a
  expect_code "bench with \"async\": $a is 202 (a job)" 202
  job=$(jget 'd["id"]' 2>/dev/null)
  req GET "/v1/jobs/$job?wait=60"
  check "bench (\"async\": $a): one long poll returns the job done and verified" \
    test "$(jget 'd["state"] + " " + str(d["result"]["results"][0]["verified"])' 2>/dev/null)" = "done True"
done

bench_with false
expect_code "bench with \"async\": false is 200: the request waited" 200
check "… and the answer is the table itself, verified" \
  test "$(jget 'str("id" in d) + " " + d["results"][0]["kernel"] + " " + str(d["results"][0]["verified"])')" = "False cpu.csr.serial True"

for a in '"yes"' 1; do
  bench_with "$a"
  expect_code "bench with \"async\": $a is 400" 400
done

# a bench of every kernel leaves out a pathological cpu.csr.chunked: on 1000 x 2000000 (1000 entries)
# span 8 is 250000 passes over the rows, 2.5e8 units a run against 1000 for a product; named, it runs
req POST "/v1/matrices?generate=random&rows=1000&cols=2000000&nnz=1000&device=cpu"
expect_code "a wide random matrix is generated" 201
W=$(jget 'd["id"]')
req POST "/v1/matrices/$W/bench" -H 'Content-Type: application/json' -d '{"runs":1,"warmup":0,"async":false}'
expect_code "bench of every kernel on it: 200" 200
check "cpu.csr.chunked is under skipped, naming its passes, and not in the results" \
  jget '("passes" in [e["reason"] for e in d["skipped"] if e["kernel"] == "cpu.csr.chunked"][0] and not [e for e in d["results"] if e["kernel"] == "cpu.csr.chunked"]) or 1/0'
req POST "/v1/matrices/$W/bench" -H 'Content-Type: application/json' \
  -d '{"runs":1,"warmup":0,"async":false,"kernels":["cpu.csr.chunked"]}'
expect_code "bench naming cpu.csr.chunked: it runs (200)" 200
check "… verified against the baseline" \
  jget '[e for e in d["results"] if e["kernel"] == "cpu.csr.chunked"][0]["verified"] or 1/0'

stop_spmvd
check "spmvd stops cleanly" test $? -eq 0
done_testing
