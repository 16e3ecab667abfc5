#!/usr/bin/env bash
# bench_async.sh — end to end: POST /v1/matrices/{id}/bench takes "async".
#
# docs/api.md lets any compute request carry "async": true and be answered 202 with a
# job. A bench is always a job, so the daemon accepts "async" (true or
# false, a boolean only) and ignores it: both answer 202 and the job
# finishes with cpu.csr.serial's result verified; a non-boolean "async" is
# a 400. The matrix is random (seed printed; SPMV_SEED repeats it).
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

for a in true false; do
  bench_with $a
  expect_code "bench with \"async\": $a is 202" 202
  job=$(jget 'd["id"]' 2>/dev/null)
  if [ -n "$job" ] && wait_job "$job" 60; then
    check "bench (\"async\": $a) job done and verified" \
      test "$(jget 'd["state"] + " " + str(d["result"]["results"][0]["verified"])')" = "done True"
  else
    not_ok "bench (\"async\": $a) job done and verified" "no job id or it did not finish"
  fi
done

for a in '"yes"' 1 null; do
  bench_with "$a"
  if [ "$a" = null ]; then expect_code "bench with \"async\": null (absent) is 202" 202
  else expect_code "bench with \"async\": $a is 400" 400; fi
done

stop_spmvd
check "spmvd stops cleanly" test $? -eq 0
done_testing
