#!/usr/bin/env bash
# run.sh — the GPU host's part: run from anywhere as `bash bundle/run.sh`.
#
# 1. the GPU and driver (nvidia-smi) into gpu-info.txt;
# 2. test_gpu in full (every GPU kernel x dtype x parameter edge on every
#    real and random matrix, device conversions, memory accounting);
# 3. compute-sanitizer: memcheck over the whole of test_gpu, then racecheck
#    (this project's kernels), synccheck and initcheck over its quick subset;
# 5. api_test_vectors.py: resident vectors, spmv with resident operands,
#    k-column products, /v1/ops and solve on the GPU, against products
#    computed by the script (issue 12);
# 4. the end-to-end API test (api_test.py): spmvd on loopback, every real
#    matrix uploaded with curl, multiplied with every GPU kernel over HTTP,
#    compared with expected.json; then generated matrices larger than the
#    L2, every GPU kernel timed (reported, not asserted) and checked against
#    cpu.csr.omp — when the bundle holds spmvd.
# SAN=quick: memcheck over test_gpu's quick subset, and no racecheck,
# synccheck or initcheck (for a change that touches no kernel).
# Logs go to $OUT (the device tool's folder that comes back) or bundle/out;
# summary.txt says pass/fail per step. Step time limits keep the whole
# under the device tool's 10 minutes.
set -u
B=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$B/out}
mkdir -p "$OUT"
export SPMV_ROOT="$B/work" CMOCKA_MESSAGE_OUTPUT=TAP
summary="$OUT/summary.txt"
: >"$summary"

. "$B/common.sh"

{
  date -u '+%Y-%m-%d %H:%M:%S UTC'
  uname -a
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,clocks.max.sm,clocks.max.mem --format=csv
  nvidia-smi
  command -v compute-sanitizer && compute-sanitizer --version | tail -1
  ls "$B/lib"
  LD_LIBRARY_PATH="$B/lib" ldd "$B/bin/real/test_gpu" "$B/bin/real/spmvd" 2>&1 | grep -E "not found|cusparse|cudart"
} >"$OUT/gpu-info.txt" 2>&1
head -3 "$OUT/gpu-info.txt" | tee -a "$summary"

step test_gpu "$OUT/test_gpu.log" 200 "$B/bin/test_gpu"
grep -E '^# (FAIL|GPU|upload|refused)' "$OUT/test_gpu.log" | head -40 | tee -a "$summary"
if [ -x "$B/bin/real/test_gpu_spmspm" ]; then  # the SpMSpM kernels (C = A*B)
  step test_gpu_spmspm "$OUT/test_gpu_spmspm.log" 150 "$B/bin/test_gpu_spmspm"
  grep -E '^# (FAIL|SKIP)' "$OUT/test_gpu_spmspm.log" | head -20 | tee -a "$summary"
fi

if [ -x "$B/bin/real/test_gpu_vectors" ]; then  # resident vectors, BLAS-1, apply, SpMM, Aᵀ, solvers
  step test_gpu_vectors "$OUT/test_gpu_vectors.log" 150 "$B/bin/test_gpu_vectors"
  grep -E '^# (GPU|blas1|SKIP)|^not ok|FAIL|ERROR' "$OUT/test_gpu_vectors.log" | head -30 | tee -a "$summary"
fi

if command -v compute-sanitizer >/dev/null; then
  cs="compute-sanitizer --error-exitcode 99"
  # memcheck over the whole test, leaks included
  # (SAN=quick: over test_gpu's quick subset, when the whole would not fit the call)
  step memcheck "$OUT/memcheck.log" 150 env ${SAN:+SPMV_GPU_QUICK=1} $cs --tool memcheck --leak-check full "$B/bin/test_gpu"
  [ -x "$B/bin/real/test_gpu_vectors" ] && step memcheck_vectors "$OUT/memcheck_vectors.log" 120 $cs --tool memcheck \
    "$B/bin/test_gpu_vectors"
  grep -E 'ERROR SUMMARY|LEAK SUMMARY|Invalid|Error' "$OUT/memcheck.log" | sort | uniq -c | head -12 | tee -a "$summary"
  if [ -z "${SAN:-}" ]; then
  # racecheck on this project's kernels (cuSPARSE's own csrmv kernel is
  # reported separately: see docs/gpu-test-log.md)
  step racecheck "$OUT/racecheck.log" 100 env SPMV_GPU_QUICK=1 SPMV_GPU_ONLY='test_kernels_*' \
    $cs --tool racecheck --racecheck-report all --kernel-name-exclude kns=cusparse "$B/bin/test_gpu"
  grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|hazard' "$OUT/racecheck.log" | sort | uniq -c | head -12 | tee -a "$summary"
  step synccheck "$OUT/synccheck.log" 60 env SPMV_GPU_QUICK=1 SPMV_GPU_ONLY='test_kernels_*' \
    $cs --tool synccheck "$B/bin/test_gpu"
  grep -E 'ERROR SUMMARY|Barrier|Error' "$OUT/synccheck.log" | sort | uniq -c | head -12 | tee -a "$summary"
  step initcheck "$OUT/initcheck.log" 60 env SPMV_GPU_QUICK=1 $cs --tool initcheck "$B/bin/test_gpu"
  grep -E 'ERROR SUMMARY|Uninitialized|Error' "$OUT/initcheck.log" | sort | uniq -c | head -12 | tee -a "$summary"
  else
    echo "racecheck, synccheck, initcheck: not run (SAN=quick: no kernel changed)" | tee -a "$summary"
  fi
else
  echo "compute-sanitizer: not found on this host" | tee -a "$summary"
fi

if [ -x "$B/bin/spmvd" ]; then
  PYTHONUNBUFFERED=1 timeout --kill-after=10 200 python3 "$B/api_test.py" --bundle "$B" --out "$OUT" \
    >"$OUT/api_test.log" 2>&1
  echo "api_test rc=$?" | tee -a "$summary"
  tail -75 "$OUT/api_test.log" | tee -a "$summary"
  # resident vectors, ops and solve on the GPU (issue 12), against host products
  PYTHONUNBUFFERED=1 timeout --kill-after=10 200 python3 "$B/api_test_vectors.py" --bundle "$B" --out "$OUT" \
    >"$OUT/api_test_vectors.log" 2>&1
  echo "api_test_vectors rc=$?" | tee -a "$summary"
  grep -E '^not ok|^# seed|passed, ' "$OUT/api_test_vectors.log" | head -40 | tee -a "$summary"
else
  echo "api_test: not run (the bundle holds no spmvd)" | tee -a "$summary"
fi
