#!/usr/bin/env bash
# queue.sh — the bounded queue: overload gets 503 + Retry-After, not a
# backlog; and SIGTERM answers every waiting request.
#
# With queue_depth 1 and one slow job running (a generated matrix, many
# runs of cpu.csr.serial sized from a calibration run to last about one
# seconds), one more job waits in the queue and the next request is
# refused with 503 and Retry-After, while cheap routes keep answering.
. "$(dirname "$0")/lib.sh"

if ! start_spmvd --queue-depth 1 --max-runs 1000000; then
  not_ok "spmvd starts" "$(tail -5 "$SPMVD_LOG")"; done_testing; exit
fi
ok "spmvd starts with queue_depth 1"
N=20000
gen_matrix "$E2E_TMP/big.mtx" $N 10
upload_raw "$E2E_TMP/big.mtx" "name=big"
expect_code "a generated $N-row matrix uploads" 201
ID=$MATRIX_ID
body() { # RUNS ASYNC -> a JSON request file
  "$PYTHON" -c "import json; print(json.dumps({'kernel': 'cpu.csr.serial', 'x': [1.0] * $N, 'runs': $1, 'async': $2}))" >"$E2E_TMP/req-$1-$2.json"
  echo "$E2E_TMP/req-$1-$2.json"
}
req POST "/v1/matrices/$ID/spmv" -H 'Content-Type: application/json' --data-binary "@$(body 20 False)"
expect_code "calibration run" 200
ms=$(jget 'd["stats"]["median_ms"]')
RUNS=$("$PYTHON" -c "print(min(1000000, max(10, int(1000 / max($ms, 1e-3)))))")
diag "one run takes $ms ms: $RUNS runs for about 1 s"
SLOW=$(body "$RUNS" True)

req POST "/v1/matrices/$ID/spmv" -H 'Content-Type: application/json' --data-binary "@$SLOW"
expect_code "slow job 1 accepted (202)" 202
J1=$(jget 'd["id"]')
for i in $(seq 100); do req GET "/v1/jobs/$J1"; [ "$(jget 'd["state"]')" = running ] && break; sleep 0.02; done
check "slow job 1 is running" jget '(d["state"] == "running") or 1/0'
req POST "/v1/matrices/$ID/spmv" -H 'Content-Type: application/json' --data-binary "@$SLOW"
expect_code "job 2 waits in the queue (202)" 202
J2=$(jget 'd["id"]')
req POST "/v1/matrices/$ID/spmv" -H 'Content-Type: application/json' --data-binary "@$(body 1 False)"
expect_code "the next request finds the queue full: 503" 503
check "the 503 carries Retry-After" [ -n "$(header Retry-After)" ]
check "the 503 says the queue is full" jget '(d["error"]["code"] == "queue_full") or 1/0'
req POST "/v1/matrices/$ID/bench" -H 'Content-Type: application/json' --data-binary '{"runs":1}'
expect_code "a bench finds the queue full too: 503" 503
check "health answers while the queue is full" healthy
req GET /metrics
check "metrics show the waiting job" grep -q '^spmvd_queue_depth{device="cpu"} 1' "$BODY_FILE"
if wait_job "$J2" 60; then
  check "the queued job ran to completion afterwards" jget '(d["state"] == "done") or 1/0'
else not_ok "the queued job ran to completion afterwards" "$(head -c 300 "$BODY_FILE")"; fi

# ------------------------------------------------- SIGTERM drains the queue
# about 4 s: the second request must still be waiting when SIGTERM comes
# 0.6 s after the first started, however slow the build (ASan) and the host
SYNC=$(body "$("$PYTHON" -c "print(min(1000000, 4 * $RUNS))")" False)
curl -s -o "$E2E_TMP/d1.body" -w '%{http_code}' --max-time 60 -H 'Content-Type: application/json' \
  --data-binary "@$SYNC" "$SPMVD_URL/v1/matrices/$ID/spmv" >"$E2E_TMP/d1.code" &
c1=$!
for i in $(seq 100); do
  req GET /metrics; grep -q '^spmvd_queue_depth{device="cpu"} 0' "$BODY_FILE" && \
    grep -q 'spmvd_worker_busy' "$BODY_FILE" && [ "$(grep -c '^spmvd_tasks_total{device="cpu"}' "$BODY_FILE")" = 1 ] && break
  sleep 0.02
done
sleep 0.3
curl -s -o "$E2E_TMP/d2.body" -w '%{http_code}' --max-time 60 -H 'Content-Type: application/json' \
  --data-binary "@$SYNC" "$SPMVD_URL/v1/matrices/$ID/spmv" >"$E2E_TMP/d2.code" &
c2=$!
sleep 0.3
stop_spmvd; rc=$?
wait $c1 $c2
check "SIGTERM with a job running and one waiting: exit status 0 (got $rc)" [ "$rc" -eq 0 ]
check "the running request finished with 200 (got $(cat "$E2E_TMP/d1.code"))" [ "$(cat "$E2E_TMP/d1.code")" = 200 ]
check "the waiting request was answered 503 (got $(cat "$E2E_TMP/d2.code"))" [ "$(cat "$E2E_TMP/d2.code")" = 503 ]
done_testing
