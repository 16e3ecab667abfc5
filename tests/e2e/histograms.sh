#!/usr/bin/env bash
# histograms.sh — end to end: the Prometheus histograms of GET /metrics
# (daemon/metrics.c) and bench's `auto` row on a host matrix (issue 15).
#
# On a fresh daemon, N health requests and M spmv requests of R runs each
# must show as spmvd_request_duration_seconds{route="health"|"spmv"} with
# _count N and M, and spmvd_kernel_duration_seconds{kernel=K} with _count
# M*R; every series' buckets are cumulative (never decreasing, `le`
# increasing, ending at +Inf) with +Inf equal to _count, and its _sum is
# finite and not negative. A bench of `auto` on a host-held matrix runs it
# (a verified row naming the tuned choice) instead of skipping it for want
# of a GPU, and /v1/kernels lists auto as available.
. "$(dirname "$0")/lib.sh"

if ! start_spmvd; then
  not_ok "daemon starts" "$(tail -5 "$SPMVD_LOG")"; done_testing; exit
fi
ok "daemon starts"

N=$((3 + RANDOM % 5)); M=$((2 + RANDOM % 4)); R=$((1 + RANDOM % 4))
diag "health requests: $N, spmv requests: $M of $R runs each"
for ((i = 0; i < N; i++)); do curl -s -o /dev/null "$SPMVD_URL/v1/health"; done

upload_raw "$MATRICES/real/west0067.mtx" "device=cpu"
expect_code "upload west0067 to the host" 201
ID=$MATRIX_ID
x=$("$PYTHON" -c 'print(",".join(str(1 + (j % 7) / 8) for j in range(67)))')
for ((i = 0; i < M; i++)); do
  req POST "/v1/matrices/$ID/spmv" -H 'Content-Type: application/json' \
    -d "{\"kernel\":\"cpu.csr.serial\",\"x\":[$x],\"runs\":$R}"
  [ "$CODE" = 200 ] || not_ok "spmv $i answers 200" "got $CODE: $(head -c 300 "$BODY_FILE")"
done

req GET /metrics
expect_code "GET /metrics" 200
cp "$BODY_FILE" "$E2E_TMP/metrics"
check_hist() { # DESCRIPTION METRIC LABEL VALUE COUNT
  check "$1" "$PYTHON" - "$E2E_TMP/metrics" "$2" "$3" "$4" "$5" <<'PY'
import math, re, sys
text, name, label, value, want = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
assert f"# TYPE {name} histogram" in text, "no TYPE line"
buckets = []
for m in re.finditer(r'^%s_bucket\{%s="%s",le="([^"]+)"\} (\d+)$' % (name, label, re.escape(value)), text, re.M):
    buckets.append((float(m.group(1)), int(m.group(2))))
assert len(buckets) >= 2, "no buckets"
les = [b[0] for b in buckets]
assert les == sorted(les) and len(set(les)) == len(les) and les[-1] == math.inf, les
counts = [b[1] for b in buckets]
assert all(a <= b for a, b in zip(counts, counts[1:])), counts
cnt = int(re.search(r'^%s_count\{%s="%s"\} (\d+)$' % (name, label, re.escape(value)), text, re.M).group(1))
s = float(re.search(r'^%s_sum\{%s="%s"\} (\S+)$' % (name, label, re.escape(value)), text, re.M).group(1))
assert counts[-1] == cnt == want, (counts[-1], cnt, want)
assert math.isfinite(s) and s >= 0, s
PY
}
check_hist "request histogram, health: $N observations, monotone buckets, +Inf == _count" \
  spmvd_request_duration_seconds route health $N
check_hist "request histogram, spmv: $M observations" spmvd_request_duration_seconds route spmv $M
check_hist "kernel histogram, cpu.csr.serial: $((M * R)) runs" spmvd_kernel_duration_seconds kernel cpu.csr.serial $((M * R))
check "request histogram _count equals spmvd_requests_total summed over statuses, per route" \
  "$PYTHON" - "$E2E_TMP/metrics" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
tot = {}
for m in re.finditer(r'^spmvd_requests_total\{route="([^"]+)",status="\d+"\} (\d+)$', text, re.M):
    tot[m.group(1)] = tot.get(m.group(1), 0) + int(m.group(2))
cnt = {m.group(1): int(m.group(2)) for m in
       re.finditer(r'^spmvd_request_duration_seconds_count\{route="([^"]+)"\} (\d+)$', text, re.M)}
assert cnt and cnt == tot, (cnt, tot)
PY

# ------------------------------------------------------- bench: auto
req GET /v1/kernels
check "/v1/kernels: auto is available on this host" \
  jget "[k['available'] for k in d['kernels'] if k['name'] == 'auto'] == [True] or 1/0"
req POST "/v1/matrices/$ID/bench" -H 'Content-Type: application/json' \
  -d '{"kernels":["cpu.csr.omp","auto"],"runs":2,"warmup":0}'
expect_code "bench of auto on a host matrix: 202" 202
job=$(jget 'd["id"]')
wait_job "$job" 60 || not_ok "the bench job finishes" "$(head -c 300 "$BODY_FILE")"
check "bench: an auto row that ran, verified, with its choice and the choice's params" \
  jget "[(r['verified'], r['auto']['kernel'], r['device']) for r in d['result']['results'] if r['kernel'] == 'auto'][0][0] is True and not d['result']['skipped'] or 1/0"

stop_spmvd
done_testing
