#!/usr/bin/env bash
# bench-solve-cpu.sh SPMVD [OUTDIR] — `make bench-solve BENCH_SOLVE_CPU=1`:
# tools/bench_solve.py against a daemon of this build on the CPU (no GPU,
# no CuPy), at sizes a workstation solves in a minute (3-D Poisson 60^3,
# log-normal finite volumes 60^3, P2 elasticity n = 4; SOLVE_ARGS to
# change them). PyAMG and scikit-fem from .whl/ when Python can import
# them there. Results in OUTDIR (default build/bench-solve-cpu/, ignored).
set -eu
SPMVD=$1
OUT=${2:-build/bench-solve-cpu}
STATE=$(mktemp -d)
PORT=$((20000 + RANDOM % 10000))
"$SPMVD" --listen "127.0.0.1:$PORT" --state-dir "$STATE" --log-level warn >"$STATE/spmvd.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$STATE"' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/v1/ready" >/dev/null && break; sleep 0.1; done
python3 "$(dirname "$0")/bench_solve.py" "http://127.0.0.1:$PORT" "$OUT" --device cpu --cupy none \
  ${SOLVE_ARGS:---poisson 60 --fv 60 --elast 4}
echo "bench-solve: $OUT/solve.md"
