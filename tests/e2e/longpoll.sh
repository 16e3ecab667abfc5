#!/usr/bin/env bash
# longpoll.sh — end to end: GET /v1/jobs/{id}?wait=S holds the request.
#
# docs/api.md, "Jobs": a long poll answers when the job ends (woken by the
# worker that finishes it), when S seconds pass (the job registry's timer),
# or when the daemon drains (SIGTERM), with the job as it stands then; a
# finished job or no wait answers at once; S beyond 0..60 is a 400.
#
# The long job is an async CG solve that cannot converge (tol 3e-15, just above float64's 10 eps,
# maxit 10^6 on a 2-D Poisson matrix): it runs until DELETE stops it. The
# bounds on elapsed time are behaviour (woken or not), loose enough for a
# loaded host: a woken poll answers well before its deadline.
. "$(dirname "$0")/lib.sh"

if ! start_spmvd; then
  not_ok "spmvd starts" "$(tail -n 20 "$SPMVD_LOG")"; done_testing; exit
fi
req POST "/v1/matrices?generate=poisson2d&n=200&name=lp" -H 'Content-Type: application/octet-stream'
expect_code "generated a 40000-row Poisson matrix" 201
A=$(header Location | sed 's|.*/||')

# start_solve [MAXIT]: an async solve that runs until cancelled (or MAXIT
# iterations); its job id in $JOB.
start_solve() {
  req POST "/v1/matrices/$A/solve" -H 'Content-Type: application/json' \
    -d '{"b":{"vector":"'"$B"'"},"tol":3e-15,"maxit":'"${1:-1000000}"',"kernel":"cpu.csr.serial","async":true}'
  JOB=$(jget 'd["id"]' 2>/dev/null)
}
# poll WAIT: GET /v1/jobs/$JOB?wait=WAIT; $CODE, the body, and $ELAPSED (s).
poll() {
  local t0 t1
  t0=$(date +%s.%N)
  req GET "/v1/jobs/$JOB?wait=$1"
  t1=$(date +%s.%N)
  ELAPSED=$("$PYTHON" -c "print(f'{$t1 - $t0:.3f}')")
}
between() { "$PYTHON" -c "import sys; sys.exit(not ($2 <= $1 <= $3))"; }

req POST /v1/vectors -H 'Content-Type: application/json' -d '{"like":"'"$A"'","fill":1.0}'
expect_code "b as a resident vector" 201
B=$(jget 'd["id"]')

start_solve
check "the endless solve is a job" test -n "$JOB"

# 1. the deadline: the job still runs after 1 s, the poll answers then
poll 1
expect_code "wait=1 on a running job answers 200" 200
check "… after about 1 s (${ELAPSED} s)" between "$ELAPSED" 0.9 15
check "… with the job as it stands (running, an iteration reached)" \
  test "$(jget 'd["state"] + " " + str(d.get("iteration", -1) > 0)')" = "running True"

# 2. woken by the end: a 30 s poll, the job cancelled after 1 s
( sleep 1; curl -s -o /dev/null -X DELETE "$SPMVD_URL/v1/jobs/$JOB" ) &
DELETER=$!
poll 30
wait "$DELETER"
expect_code "wait=30 answers when the job ends" 200
check "… well before its deadline (${ELAPSED} s)" between "$ELAPSED" 0.5 20
check "… with the finished job (done, cancelled)" \
  test "$(jget 'd["state"] + " " + d["result"]["stop"]["reason"]')" = "done cancelled"

# 3. a finished job answers at once, wait or not
poll 30
expect_code "wait=30 on a finished job answers 200" 200
check "… at once (${ELAPSED} s)" between "$ELAPSED" 0 5
poll 0
expect_code "wait=0 answers 200" 200

# 4. the bounds
for w in 61 -1 abc 1e400 ''; do
  req GET "/v1/jobs/$JOB?wait=$w"
  expect_code "wait=$w is 400" 400
done
check "… invalid_parameter naming 0..60" test "$(jget 'd["error"]["code"] + " " + str("0..60" in d["error"]["message"])')" = "invalid_parameter True"
req GET "/v1/jobs/00000000-0000-4000-8000-000000000000?wait=5"
expect_code "an unknown job is 404 at once" 404

# 5. draining: a waiting poll answers when SIGTERM comes, not at its deadline
# nor at the job's end (the drain lets the running solve finish: a few
# seconds of iterations, not an endless one, since no DELETE gets in then)
start_solve 20000
t0=$(date +%s)
curl -s -o "$E2E_TMP/drain.json" -w '%{http_code}' --max-time 120 "$SPMVD_URL/v1/jobs/$JOB?wait=60" >"$E2E_TMP/drain.code" &
CURL_PID=$!
sleep 1
kill -TERM "$SPMVD_PID"
wait "$CURL_PID"
t1=$(date +%s)
check "a waiting poll answers 200 on SIGTERM" test "$(cat "$E2E_TMP/drain.code")" = 200
check "… within seconds, not at its 60 s deadline ($((t1 - t0)) s)" test $((t1 - t0)) -lt 30
check "… with the job still running" test "$(jget 'd["state"]' "$E2E_TMP/drain.json")" = running
stop_spmvd
check "spmvd stops cleanly" test $? -eq 0
done_testing
