#!/usr/bin/env bash
# bench-api.sh — the API benchmark of issue 3 (make bench-api). Reports, never asserts.
#
# Starts a real spmvd (tests/e2e/lib.sh: a free loopback port, a temporary
# state directory, everything killed and removed on exit) and measures
#  1. small requests: requests/s, latency p50/p99 and errors of one small
#     JSON spmv (cpu.csr.serial, runs 1, warmup 0) with 1, 8 and 64
#     concurrent connections, driven by wrk and tools/bench-api-spmv.lua;
#  2. a 1 M-row matrix (spmv-gen poisson2d --n 1000): upload time, then the
#     round trip of one spmv (cpu.csr.omp, runs 1, warmup 0) in JSON and in
#     binary, each repeated $REPS times (median), against the kernel time
#     the daemon reports (stats.median_ms) and against two 8 MB memory
#     copies (x in, y out) timed in python3 (bytes(bytearray): a memcpy);
#  3. large round trips (tools/bench_roundtrip.py): 1 and 16 M rows over
#     a bare loopback TCP echo of the same bytes, binary HTTP (raw
#     http.client and the Python client) and a shared-memory region,
#     against kernel + copies (the daemon runs with allow_shm);
#  4. a CPU solve (tools/bench_solve_cpu.py): Jacobi PCG on bcsstk13 in the
#     daemon against SciPy's own, with small work serial (the default) and
#     with --serial-below 0 (every host loop on the whole team, as before
#     issue 28), taking turns in one run;
#  5. dynamic batching (tools/bench-batch.sh, issue 29): 32 clients of binary
#     products on a random-column matrix, with batch_window_us 0 and on.
# The machine is shared: the load average is printed before and after
# every measurement. Markdown goes to stdout; make bench-api tees it to
# $BUILD/bench-api.md.
#
# Environment: BUILD (build dir), SMALL (matrix, default real/karate.mtx),
# DURATION (wrk seconds, 5), REPS (round trips, 10), BIG_N (poisson2d n, 1000),
# LARGE_ROWS (the large round trips' sizes, 1,16 M), LARGE_REPS (5), SOLVE_REPS (9),
# BASELINE_URL (another daemon, e.g. an older build, for the binary path).
. "$(dirname "$0")/../tests/e2e/lib.sh"

LUA=$SPMV_ROOT/tools/bench-api-spmv.lua
SMALL=${SMALL:-$MATRICES/real/karate.mtx}
DURATION=${DURATION:-5}
REPS=${REPS:-10}
BIG_N=${BIG_N:-1000}
LARGE_ROWS=${LARGE_ROWS:-1000000,16000000}
LARGE_REPS=${LARGE_REPS:-5}
SOLVE_REPS=${SOLVE_REPS:-9}
command -v wrk >/dev/null || { echo "bench-api: wrk is not installed (tools/bootstrap.sh)" >&2; exit 1; }

load() { uptime | sed 's/.*load average: //; s/,//g'; }
median() { sort -g | awk '{v[NR] = $1} END {if (NR % 2) m = v[(NR + 1) / 2]; else m = (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.3f\n", m}'; }
kv() { sed -n "s/.* $1=\\([^ ]*\\).*/\\1/p"; }  # a key=value of the BENCH-API line

start_spmvd --log-level warn --allow-shm true || { echo "bench-api: spmvd did not start: $(tail -n 5 "$SPMVD_LOG")" >&2; exit 1; }

echo "# spmvd API benchmark"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "- machine: $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) CPUs online, $(free -g | awk '/^Mem:/ {print $2}') GiB"
echo "- spmvd: $SPMVD --threads 2 --log-level warn (other settings default: queue_depth 64), on $SPMVD_URL"
echo "- load average (1, 5, 15 min) at start: $(load)"

# ------------------------------------------------------- small requests
upload_raw "$SMALL"
[ "$CODE" = 201 ] || { echo "bench-api: upload of $SMALL failed: HTTP $CODE $(head -c 300 "$BODY_FILE")" >&2; exit 1; }
COLS=$(jget 'd["cols"]')
echo
echo "## Small JSON spmv"
echo
echo "Matrix $(basename "$SMALL") ($(jget 'd["rows"]') x $COLS, nnz $(jget 'd["nnz"]')); body"
echo "\`{\"kernel\":\"cpu.csr.serial\",\"runs\":1,\"warmup\":0,\"x\":[1,...]}\` ($(SPMV_COLS=$COLS "$PYTHON" -c 'import os; print(len("{\"kernel\":\"cpu.csr.serial\",\"runs\":1,\"warmup\":0,\"x\":[" + ",".join(["1"] * int(os.environ["SPMV_COLS"])) + "]}"))') bytes)."
echo "\`wrk -t T -c N -d ${DURATION}s --latency -s tools/bench-api-spmv.lua\` (T = 2, 1 for N = 1: wrk needs a connection per thread)."
echo
echo "| connections | requests/s | p50 ms | p99 ms | requests | errors (non-2xx) | load before | load after |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"
for c in 1 8 64; do
  t=2; [ "$c" -lt 2 ] && t=1
  l0=$(load)
  line=$(SPMV_COLS=$COLS wrk -t "$t" -c "$c" -d "${DURATION}s" --latency -s "$LUA" \
         "$SPMVD_URL/v1/matrices/$MATRIX_ID/spmv" 2>&1 | grep '^BENCH-API')
  l1=$(load)
  echo "| $c | $(kv rps <<<"$line") | $(kv p50_ms <<<"$line") | $(kv p99_ms <<<"$line") | $(kv requests <<<"$line") | $(kv errors <<<"$line") ($(kv non2xx <<<"$line")) | $l0 | $l1 |"
done

# ------------------------------------------------------ 1 M-row matrix
BIG=$E2E_TMP/big.mtx
"$BUILD_DIR/spmv-gen" --kind poisson2d --n "$BIG_N" --out "$BIG" >/dev/null
echo
echo "## 1 M-row matrix"
echo
echo "\`spmv-gen --kind poisson2d --n $BIG_N\` ($(du -m "$BIG" | cut -f1) MB of Matrix Market text)."
echo
l0=$(load)
up_s=$(curl -s -o "$BODY_FILE" -D "$HDR_FILE" -w '%{http_code} %{time_total}' --max-time 600 \
       --data-binary "@$BIG" -H 'Content-Type: application/octet-stream' "$SPMVD_URL/v1/matrices")
l1=$(load)
if [ "${up_s%% *}" != 201 ]; then
  echo "Upload FAILED: HTTP ${up_s%% *}: $(head -c 300 "$BODY_FILE")"
  exit 0
fi
MATRIX_ID=$(header Location | sed 's|.*/||')
ROWS=$(jget 'd["rows"]'); BCOLS=$(jget 'd["cols"]')
echo "Upload (raw body): $(awk -v s="${up_s#* }" 'BEGIN {printf "%.2f", s}') s round trip; rows $ROWS, cols $BCOLS, nnz $(jget 'd["nnz"]');"
echo "daemon timings (ms) $(jget '", ".join("%s %.1f" % kv for kv in d["timings"].items())'). Load before/after: $l0 / $l1."

# x: uniform in [-1, 1), as little-endian float64 and as a JSON request
"$PYTHON" - "$BCOLS" "$E2E_TMP" <<'PY'
import json, random, struct, sys
n, d = int(sys.argv[1]), sys.argv[2]
rnd = random.Random(1)
x = [rnd.uniform(-1.0, 1.0) for _ in range(n)]
open(d + "/x.f64", "wb").write(struct.pack("<%dd" % n, *x))
open(d + "/x.json", "w").write(json.dumps({"kernel": "cpu.csr.omp", "runs": 1, "warmup": 0, "x": x}))
PY

# round_trips MODE: REPS lines "round_trip_ms kernel_ms queue_ms"
round_trips() {
  local i rt
  for ((i = 0; i < REPS; i++)); do
    if [ "$1" = binary ]; then
      # y is received in full but not written to a file: writing 8 MB to
      # disk costs curl ~9 ms here, a client cost, not the service's
      read -r rt got < <(curl -s -o /dev/null -D "$HDR_FILE" -w '%{time_total} %{size_download}' --max-time 120 \
           -H 'Content-Type: application/octet-stream' --data-binary "@$E2E_TMP/x.f64" \
           "$SPMVD_URL/v1/matrices/$MATRIX_ID/spmv?kernel=cpu.csr.omp&runs=1&warmup=0")
      [ "$got" = $((8 * ROWS)) ] || echo "bench-api: binary y has $got bytes, not $((8 * ROWS))" >&2
      header X-SpMV-Stats >"$E2E_TMP/stats.json"
    else
      rt=$(curl -s -o "$E2E_TMP/stats.json" -w '%{time_total}' --max-time 120 \
           -H 'Content-Type: application/json' --data-binary "@$E2E_TMP/x.json" \
           "$SPMVD_URL/v1/matrices/$MATRIX_ID/spmv")
    fi
    echo "$(awk -v s="$rt" 'BEGIN {printf "%.3f", s * 1000}') $(jget '"%.3f %.3f" % (d["stats"]["median_ms"], d["queue_ms"])' "$E2E_TMP/stats.json")"
  done
}

# "warm": into a preallocated destination (a plain memcpy, the goal's
# basis); "fresh": into a new buffer each time (page faults included, as
# when a buffer is allocated per request)
read -r memcpy_ms fresh_ms < <("$PYTHON" - "$ROWS" <<'PY'
import sys, time
n = 8 * int(sys.argv[1])
src, dst = bytearray(b"\x01" * n), bytearray(n)
warm, fresh = [], []
for _ in range(21):
    t0 = time.perf_counter(); dst[:] = src; warm.append(time.perf_counter() - t0)
    t0 = time.perf_counter(); c = bytes(src); fresh.append(time.perf_counter() - t0); del c
warm.sort(); fresh.sort()
print("%.3f %.3f" % (warm[10] * 1000, fresh[10] * 1000))
PY
)
echo
echo "One memory copy of a vector ($(awk -v r="$ROWS" 'BEGIN {printf "%.1f", 8 * r / 1e6}') MB, python3, median of 21): $memcpy_ms ms into a"
echo "preallocated buffer (\`dst[:] = src\`, a memcpy: used below), $fresh_ms ms into a fresh one (\`bytes(src)\`, page faults included)."
echo
# the transport floor: a python3 echo over loopback TCP (x in, the same
# bytes back as y), no HTTP, no kernel: what moving the vectors costs here
loop_ms=$("$PYTHON" - "$ROWS" <<'PY'
import socket, sys, threading, time
n = 8 * int(sys.argv[1])
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
def recv_all(s, n):
    buf = bytearray(n); v = memoryview(buf); got = 0
    while got < n:
        got += s.recv_into(v[got:], n - got)
    return buf
def echo():
    c, _ = srv.accept()
    for _ in range(11):
        c.sendall(recv_all(c, n))
threading.Thread(target=echo, daemon=True).start()
cl = socket.create_connection(srv.getsockname())
x, t = b"\x01" * n, []
for _ in range(11):
    t0 = time.perf_counter(); cl.sendall(x); recv_all(cl, n); t.append(time.perf_counter() - t0)
t.sort(); print("%.3f" % (t[5] * 1000))
PY
)
echo "Loopback floor: $loop_ms ms to send x and receive y (8 bytes x rows each way) over one python3 TCP"
echo "connection on 127.0.0.1, no HTTP and no kernel (median of 11)."
echo
echo "Round trips are curl's \`time_total\` (connection included); binary y goes to /dev/null, JSON's"
echo "answer to a file (its stats are read from it)."
echo
echo "| spmv (cpu.csr.omp, runs 1) | round trip ms (median of $REPS) | min | kernel median_ms (median) | queue ms | kernel + 2 copies ms | round trip / (kernel + 2 copies) | load before | load after |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"
for mode in binary json; do
  l0=$(load)
  round_trips "$mode" >"$E2E_TMP/rt.$mode"
  l1=$(load)
  rt=$(cut -d' ' -f1 "$E2E_TMP/rt.$mode" | median)
  rtmin=$(cut -d' ' -f1 "$E2E_TMP/rt.$mode" | sort -g | head -n 1)
  km=$(cut -d' ' -f2 "$E2E_TMP/rt.$mode" | median)
  qm=$(cut -d' ' -f3 "$E2E_TMP/rt.$mode" | median)
  base=$(awk -v k="$km" -v m="$memcpy_ms" 'BEGIN {printf "%.3f", k + 2 * m}')
  echo "| $mode | $rt | $rtmin | $km | $qm | $base | $(awk -v r="$rt" -v b="$base" 'BEGIN {printf "%.2f", r / b}') | $l0 | $l1 |"
done
echo
echo "## Large round trips: loopback TCP, binary HTTP, the Python client, shared memory"
echo
echo "\`python3 tools/bench_roundtrip.py\` (issues 17, 28): tridiagonal float64 matrices of ${LARGE_ROWS} rows,"
echo "one cpu.csr.omp product each (runs 1), $LARGE_REPS reps each way on one kept-alive connection; the"
echo "loopback column is a bare TCP echo of the same bytes between two processes in the same run, the floor"
echo "kernel + two host memory copies of the vector (no GPU here). load before: $(load)"
echo
if "$PYTHON" -c 'import numpy, scipy' 2>/dev/null; then
  "$PYTHON" "$SPMV_ROOT/tools/bench_roundtrip.py" "$SPMVD_URL" --rows "$LARGE_ROWS" --reps "$LARGE_REPS" \
    --kernel cpu.csr.omp --device cpu ${BASELINE_URL:+--baseline "$BASELINE_URL"} 2>&1
else
  echo "(skipped: NumPy and SciPy are not installed)"
fi
echo
echo "## A CPU solve against SciPy"
echo
echo "\`python3 tools/bench_solve_cpu.py\` (issue 28): Jacobi PCG on bcsstk13 to tol 1e-8 in the daemon"
echo "(\`Client.solve\`, synchronous, binary) and in SciPy in this process, $SOLVE_REPS reps taking turns;"
echo "the daemon as configured (serial_below 131072) and a second one started with --serial-below 0."
echo "load before: $(load)"
echo
if "$PYTHON" -c 'import numpy, scipy' 2>/dev/null && [ -f "$MATRICES/real/bcsstk13.mtx" ]; then
  MAIN_URL=$SPMVD_URL MAIN_PID=$SPMVD_PID
  SPMVD_STATE=""
  start_spmvd --log-level warn --serial-below 0 || { echo "bench-api: a second spmvd did not start" >&2; exit 1; }
  "$PYTHON" "$SPMV_ROOT/tools/bench_solve_cpu.py" "$MAIN_URL" "$SPMVD_URL" --matrix "$MATRICES/real/bcsstk13.mtx" \
    --reps "$SOLVE_REPS" --labels "serial_below 131072 (default),serial_below 0 (as before)" 2>&1
  stop_spmvd >/dev/null
  SPMVD_URL=$MAIN_URL SPMVD_PID=$MAIN_PID
else
  echo "(skipped: NumPy/SciPy or $MATRICES/real/bcsstk13.mtx missing)"
fi
stop_spmvd >/dev/null
bash "$SPMV_ROOT/tools/bench-batch.sh" || exit 1
echo
echo "- load average at end: $(load)"
