#!/usr/bin/env bash
# packed-gpu.sh — issue 14 on the GPU host: `bash bundle/packed-gpu.sh [bench-gpu options]`
# (made by `make bench-gpu-bundle`).
#
# 1. test_gpu in full: every GPU kernel, gpu.pcsr and gpu.psell with them,
#    on every shared real matrix and the random ones in both dtypes against
#    cpu.csr.serial; the device PCSR/PSELL equal the host's bit for bit;
#    test_packed's matrices take every value mode and column width;
# 2. compute-sanitizer memcheck and racecheck (unless RACECHECK=0) over
#    test_packed (quick);
# 3. mixed_check.py (tests/e2e) with MIXED_DEVICE=gpu against a daemon of
#    the bundle: dtype mixed with GPU kernels, packed ones included;
# 4. bench-gpu (markdown bench-gpu.md, CSV bench-gpu.csv) unless
#    BENCH=0, options passed on (--deadline ...);
# 5. spmv-gatherrate (gatherrate.jsonl) unless GATHER=0: the random-gather
#    floor of the pattern-only graphs.
# Python: /opt/torch/.venv/bin/python3 (NumPy, SciPy) when present. Logs
# under $OUT; summary.txt says pass/fail per step.
set -u
B=$(cd "$(dirname "$0")" && pwd)
. "$B/common.sh"
bundle_out summary.txt
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a "$summary"

if [ "${TESTS:-1}" = 1 ]; then
  step test_gpu "$OUT/test_gpu.log" 260 env ${TEST_ONLY:+SPMV_GPU_ONLY=$TEST_ONLY} "$B/bin/test_gpu"
  grep -E '^# (FAIL|values seen|packed)|^not ok' "$OUT/test_gpu.log" | head -30 | tee -a "$summary"
  grep -E '^# (gpu\.pcsr|gpu\.psell) ' "$OUT/test_gpu.log" | tee -a "$summary"
  if command -v compute-sanitizer >/dev/null; then
    cs="compute-sanitizer --error-exitcode 99"
    step memcheck "$OUT/memcheck.log" 150 env SPMV_GPU_QUICK=1 SPMV_GPU_ONLY='test_packed' $cs --tool memcheck \
      --leak-check full "$B/bin/test_gpu"
    grep -E 'ERROR SUMMARY|LEAK SUMMARY' "$OUT/memcheck.log" | sort | uniq -c | tee -a "$summary"
    # racecheck on this project's kernels (cuSPARSE's own report hazards of their own design, as run.sh says)
    [ "${RACECHECK:-1}" = 1 ] && step racecheck "$OUT/racecheck.log" 240 env SPMV_GPU_QUICK=1 SPMV_GPU_ONLY='test_packed' $cs --tool racecheck \
      --racecheck-report all --kernel-name-exclude kns=cusparse "$B/bin/test_gpu"
    [ "${RACECHECK:-1}" = 1 ] && grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/racecheck.log" | sort | uniq -c |
      tee -a "$summary"
  fi
  mkdir -p "$B/state.mixed"
  "$B/bin/spmvd" --listen 127.0.0.1:18611 --state-dir "$B/state.mixed" --log-level warn >"$OUT/spmvd.mixed.log" 2>&1 &
  pid=$!
  wait_ready 18611
  MIXED_DEVICE=gpu SPMV_SEED=${SPMV_SEED:-$RANDOM} step mixed_check "$OUT/mixed_check.log" 200 "$PY" \
    "$B/mixed_check.py" http://127.0.0.1:18611 "$B/shared/matrices" "$B/state.mixed/ids.json"
  grep -E '^not ok|^# (seed|error)' "$OUT/mixed_check.log" | head -20 | tee -a "$summary"
  kill "$pid"; wait "$pid" 2>/dev/null
fi
if [ "${BENCH:-1}" = 1 ]; then
  "$B/bin/bench-gpu" --csv "$OUT/bench-gpu.csv" "$@" >"$OUT/bench-gpu.md" 2>"$OUT/bench.log"
  echo "bench-gpu rc=$?" | tee -a "$summary"
  tail -3 "$OUT/bench.log"
  sed -n '/## Geometric mean/,$p' "$OUT/bench-gpu.md" | head -40 | tee -a "$summary"
fi
if [ "${GATHER:-1}" = 1 ]; then
  # the random-gather floor under bench-gpu's pattern-only graphs (scale 1:
  # 4 M rows, uniformly random columns; 32 a row, and the power-law one's
  # mean of 16): x's gathers alone, no matrix bytes (tools/gatherrate.cu)
  for dt in float64 float32; do
    for per in 32 16; do "$B/bin/spmv-gatherrate" 4000000 4000000 "$per" "$dt"; done
  done | tee "$OUT/gatherrate.jsonl" | tee -a "$summary"
fi
