#!/usr/bin/env bash
# kernels-gpu.sh — new GPU kernels checked on the GPU in one device call,
# under ten minutes: `bash bundle/kernels-gpu.sh`.
#
# 1. test_gpu in full: every GPU kernel x dtype x parameter value against
#    the host's reference on the real and random matrices, the device
#    formats against the host's, memory accounting;
# 2. test_gpu_spmspm: every SpMSpM kernel and output mode against
#    cpu.spmspm.serial;
# 3. test_gpu_vectors: BLAS-1 and the k-column calls, the solvers and the
#    preconditioners (the AMG hierarchy built with the GPU's products
#    against the host's), k columns in lockstep;
# 4. compute-sanitizer memcheck over test_gpu's kernel cases (quick
#    subset), over test_gpu_spmspm and test_gpu_vectors; racecheck over
#    test_gpu's kernel cases (quick subset, this project's kernels).
# Step limits (T_*) keep the whole under the device tool's ten minutes.
# Logs under $OUT; summary.txt says pass/fail per step.
set -u
B=$(cd "$(dirname "$0")" && pwd)
. "$B/common.sh"
gpu_bundle_out summary.txt

step test_gpu "$OUT/test_gpu.log" ${T_GPU:-170} "$B/bin/test_gpu"
grep -E '^not ok|^# (FAIL|GPU)' "$OUT/test_gpu.log" | head -30 | tee -a "$summary"
step test_gpu_spmspm "$OUT/test_gpu_spmspm.log" ${T_SPMSPM:-80} "$B/bin/test_gpu_spmspm"
grep -E '^not ok|^# (FAIL|SKIP)' "$OUT/test_gpu_spmspm.log" | head -20 | tee -a "$summary"
step test_gpu_vectors "$OUT/test_gpu_vectors.log" ${T_VECTORS:-90} "$B/bin/test_gpu_vectors"
grep -E '^not ok|lockstep|amg|AMG|setup' "$OUT/test_gpu_vectors.log" | head -30 | tee -a "$summary"
if command -v compute-sanitizer >/dev/null; then
  cs="compute-sanitizer --error-exitcode 99"
  step memcheck_kernels "$OUT/memcheck.log" ${T_MEMCHECK:-90} env SPMV_GPU_QUICK=1 SPMV_GPU_ONLY='test_kernels_*' \
    $cs --tool memcheck "$B/bin/test_gpu"
  step memcheck_spmspm "$OUT/memcheck_spmspm.log" ${T_MEMCHECK_SPMSPM:-60} $cs --tool memcheck "$B/bin/test_gpu_spmspm"
  step memcheck_vectors "$OUT/memcheck_vectors.log" ${T_MEMCHECK_VECTORS:-60} $cs --tool memcheck "$B/bin/test_gpu_vectors"
  step racecheck "$OUT/racecheck.log" ${T_RACECHECK:-50} env SPMV_GPU_QUICK=1 SPMV_GPU_ONLY='test_kernels_*' \
    $cs --tool racecheck --racecheck-report all --kernel-name-exclude kns=cusparse "$B/bin/test_gpu"
  for f in memcheck memcheck_spmspm memcheck_vectors racecheck; do
    echo "$f: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$f.log" | sort | uniq -c | tr '\n' ' ')" | tee -a "$summary"
  done
else
  echo "compute-sanitizer: not found on this host" | tee -a "$summary"
fi
