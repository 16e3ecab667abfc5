#!/usr/bin/env bash
# check-gpu.sh — a change's quick GPU check in one device call, under ten
# minutes: `bash bundle/check-gpu.sh`.
#
# 1. test_gpu_vectors (BLAS-1, SpMM, the solvers, the preconditioners, the
#    fused path, k columns in lockstep, against the host);
# 2. test_gpu's quick subset (every GPU kernel on the quick matrices);
# 3. api_test.py and api_test_vectors.py (the daemon over HTTP on the GPU:
#    real matrices, resident vectors, ops, solve);
# 3b. solve_fused_check.py: the daemon's /solve fused on the GPU (every
#    method against SciPy, a long CG beside products that make it capture
#    its graph again, a cancel);
# 4. bench_solve.py on the small problems (CHECK_SOLVE_ARGS, default
#    --poisson 100 --fv 0 --elast 6): the preconditioners, and k = 8
#    right-hand sides at once against one.
# Step limits (T_*) keep the whole under the device tool's ten minutes.
# Logs under $OUT; summary.txt says pass/fail per step.
set -u
B=$(cd "$(dirname "$0")" && pwd)
. "$B/common.sh"
gpu_bundle_out summary.txt

step test_gpu_vectors "$OUT/test_gpu_vectors.log" ${T_VECTORS:-90} "$B/bin/test_gpu_vectors"
grep -E '^not ok|lockstep' "$OUT/test_gpu_vectors.log" | head -20 | tee -a "$summary"
SPMV_GPU_QUICK=1 step test_gpu_quick "$OUT/test_gpu.log" ${T_GPU:-110} "$B/bin/test_gpu"
grep -E '^not ok|^# FAIL' "$OUT/test_gpu.log" | head -20 | tee -a "$summary"
step api_test "$OUT/api_test.log" ${T_API:-120} python3 "$B/api_test.py" --bundle "$B" --out "$OUT"
tail -5 "$OUT/api_test.log" | tee -a "$summary"
step api_test_vectors "$OUT/api_test_vectors.log" ${T_APIV:-70} python3 "$B/api_test_vectors.py" --bundle "$B" --out "$OUT"
grep -E '^not ok|passed, ' "$OUT/api_test_vectors.log" | head -20 | tee -a "$summary"
step solve_fused "$OUT/solve_fused.log" ${T_FUSED:-120} python3 "$B/solve_fused_check.py" --bundle "$B" --out "$OUT"
grep -E '^not ok|long CG|while the solve|cancelled|passed, ' "$OUT/solve_fused.log" | head -20 | tee -a "$summary"

start_spmvd 18621
if wait_ready 18621; then
  step bench_solve "$OUT/bench_solve.log" ${T_BENCH:-110} python3 "$B/bench_solve.py" http://127.0.0.1:18621 \
    "$OUT/solve" ${CHECK_SOLVE_ARGS:---poisson 100 --fv 0 --elast 6}
  grep -E 'k = 8|^\| spmvd gpu0 \| cg \+ amg \|' "$OUT/solve/solve.md" 2>/dev/null | tee -a "$summary"
else
  echo "spmvd did not start" | tee -a "$summary"
fi
