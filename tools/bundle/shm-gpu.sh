#!/usr/bin/env bash
# shm-gpu.sh — issue 17 on the GPU host: `bash bundle/shm-gpu.sh`.
#
# 1. shm_check.py (tests/e2e/shm_check.py) with SHM_GPU=1 against three
#    daemons of the bundle (allow_shm on; off; on with max_shm_regions 2):
#    pinned POSIX regions with GPU kernels, CUDA IPC regions made with CuPy,
#    every refusal; the same checks CI runs on the CPU;
# 2. test_gpu_vectors and api_test.py's accounting (the binary spmv path now
#    runs on pooled, page-locked buffers) — the GPU suites the change touches;
# 3. bench_roundtrip.py: 1, 9 and 16 M-row products of gpu.csr.vector over
#    binary HTTP and over a shared-memory region, beside kernel + H2D + D2H at
#    the pinned copy rate spmv-copyrate measures in the same run; then the
#    same through the CPU worker (cpu.csr.omp) for comparison.
# Python: the host's /opt/torch/.venv/bin/python3 (NumPy, SciPy, CuPy) when
# present. Logs and results under $OUT; summary.txt says pass/fail per step.
set -u
B=$(cd "$(dirname "$0")" && pwd)
. "$B/common.sh"
bundle_out summary.txt
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$summary"
"$PY" -c 'import numpy, scipy, sys; print(sys.version.split()[0], numpy.__version__, scipy.__version__)' | tee -a "$summary"

PIDS=()
start() { # port, flags...: a daemon of the bundle on 127.0.0.1:port
  local port=$1; shift
  mkdir -p "$B/state.$port"
  "$B/bin/spmvd" --listen "127.0.0.1:$port" --state-dir "$B/state.$port" --log-level warn "$@" >"$OUT/spmvd.$port.log" 2>&1 &
  PIDS+=($!)
  wait_ready "$port" && return 0
  echo "spmvd on $port did not start" | tee -a "$summary"; tail -5 "$OUT/spmvd.$port.log"
}
trap 'kill ${PIDS[@]} 2>/dev/null; wait' EXIT
start 18601 --allow-shm true
start 18602
start 18603 --allow-shm true --max-shm-regions 2
BASE=()
if [ -x "$B/bin/real/spmvd-old" ]; then # the binary path before this issue, for the same-run baseline
  mkdir -p "$B/state.18604"
  LD_LIBRARY_PATH="$B/lib" "$B/bin/real/spmvd-old" --listen 127.0.0.1:18604 --state-dir "$B/state.18604" \
    --log-level warn >"$OUT/spmvd.18604.log" 2>&1 &
  PIDS+=($!)
  wait_ready 18604
  BASE=(--baseline http://127.0.0.1:18604)
fi
SHM_GPU=1 step shm_check "$OUT/shm_check.log" 240 "$PY" "$B/shm_check.py" http://127.0.0.1:18601 \
  http://127.0.0.1:18602 http://127.0.0.1:18603 "$B/shared/matrices"
grep -E '^not ok|SKIP|seed' "$OUT/shm_check.log" | head -20 | tee -a "$summary"
kill -0 "${PIDS[0]}" && echo "daemon alive after shm_check" | tee -a "$summary"

if [ -x "$B/bin/real/test_gpu_vectors" ]; then
  step test_gpu_vectors "$OUT/test_gpu_vectors.log" 150 "$B/bin/test_gpu_vectors"
fi
step api_test "$OUT/api_test.log" 200 python3 "$B/api_test.py" --bundle "$B" --out "$OUT"
tail -3 "$OUT/api_test.log" | tee -a "$summary"

step roundtrip_gpu "$OUT/roundtrip_gpu.log" 200 "$PY" "$B/bench_roundtrip.py" http://127.0.0.1:18601 \
  --kernel gpu.csr.vector --device gpu --reps 10 --copyrate "$B/bin/spmv-copyrate" --json "$OUT/roundtrip_gpu.json" \
  "${BASE[@]}"
cat "$OUT/roundtrip_gpu.log" | tee -a "$summary"
step roundtrip_cpu "$OUT/roundtrip_cpu.log" 200 "$PY" "$B/bench_roundtrip.py" http://127.0.0.1:18601 \
  --kernel cpu.csr.omp --device cpu --reps 5 --copyrate "$B/bin/spmv-copyrate" --json "$OUT/roundtrip_cpu.json" \
  "${BASE[@]}"
cat "$OUT/roundtrip_cpu.log" | tee -a "$summary"
