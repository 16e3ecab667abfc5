#!/usr/bin/env bash
# bench.sh — the GPU host's benchmark step: `bash bundle/bench.sh [bench-gpu options]`
# (made by `make bench-gpu-bundle`, issue 5).
#
# 1. the GPU and driver into gpu-info.txt;
# 2. test_gpu in full: every GPU kernel must verify after any GPU code
#    change, before its timings mean anything;
# 3. bench-gpu (markdown bench-gpu.md, CSV bench-gpu.csv);
# 4. the PNG plots of GB/s per kernel per matrix (tools/plot-bench.py,
#    matplotlib on the GPU host).
# 5. the SpMSpM table (below);
# 6. the realistic set beside the synthetic one (issue 30): realistic-gpu.sh
#    (finite-volume diffusion, P1 Poisson and P2 elasticity from scikit-fem,
#    convection-diffusion; every GPU kernel against the best cuSPARSE, bytes
#    per non-zero of each format) into $OUT/realistic, when the bundle holds
#    it and scikit-fem (bundle/pyx, `make bench-gpu-bundle` packs both).
# Everything lands in $OUT (the device tool's folder that comes back) or
# bundle/out. BENCH_TEST=0 skips step 2, BENCH_MEMCHECK=1 adds a quick
# compute-sanitizer memcheck of test_gpu, BENCH_REALISTIC=0 skips step 6.
set -u
B=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$B/out}
mkdir -p "$OUT"
export SPMV_ROOT="$B/work" CMOCKA_MESSAGE_OUTPUT=TAP
{
  date -u '+%Y-%m-%d %H:%M:%S UTC'
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,temperature.gpu,power.draw --format=csv
  nvcc --version 2>/dev/null | tail -2
} >"$OUT/gpu-info.txt" 2>&1
cat "$OUT/gpu-info.txt"
rc=0
if [ "${BENCH_TEST:-1}" = 1 ]; then
  timeout --kill-after=5 120 "$B/bin/test_gpu" >"$OUT/test_gpu.log" 2>&1 || rc=1
  echo "test_gpu rc=$? ok=$(grep -cE '^ok [0-9]+' "$OUT/test_gpu.log") not_ok=$(grep -cE '^not ok' "$OUT/test_gpu.log")"
  grep -E '^# (FAIL|GPU)|^not ok' "$OUT/test_gpu.log" | head -20
  grep -E 'gpu.csr.light' "$OUT/test_gpu.log" | head -4
fi
if [ "${BENCH_MEMCHECK:-0}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  SPMV_GPU_QUICK=1 SPMV_GPU_ONLY='test_kernels_*' timeout 60 compute-sanitizer --error-exitcode 99 --tool memcheck \
    "$B/bin/test_gpu" >"$OUT/memcheck.log" 2>&1
  echo "memcheck rc=$?"; grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | sort | uniq -c
fi
"$B/bin/bench-gpu" --csv "$OUT/bench-gpu.csv" "$@" >"$OUT/bench-gpu.md" 2>"$OUT/run.log"
brc=$?
echo "bench-gpu rc=$brc"
tail -5 "$OUT/run.log"
python3 "$B/plot-bench.py" "$OUT/bench-gpu.csv" "$OUT" >>"$OUT/run.log" 2>&1 || echo "plot failed: $(tail -2 "$OUT/run.log")"
sed -n '/## Best kernel/,$p' "$OUT/bench-gpu.md"
# 5. the SpMSpM table (thin B of 32 and 512 columns, every SpMSpM kernel vs
#    cusparse.spgemm), appended to bench-gpu.md; BENCH_SPMSPM=0 skips it
if [ "${BENCH_SPMSPM:-1}" = 1 ] && [ -x "$B/bin/real/bench-spmspm" ]; then
  timeout --kill-after=5 120 "$B/bin/bench-spmspm" --runs 5 --warmup 1 >>"$OUT/bench-gpu.md" 2>>"$OUT/run.log"
  echo "bench-spmspm rc=$?"
fi
rrc=0
if [ "${BENCH_REALISTIC:-1}" = 1 ] && [ -f "$B/realistic-gpu.sh" ] && [ -d "$B/pyx/skfem" ]; then
  OUT=$OUT/realistic bash "$B/realistic-gpu.sh" >"$OUT/realistic.log" 2>&1
  rrc=$?
  echo "realistic rc=$rrc (results in realistic/realistic.md)"
elif [ "${BENCH_REALISTIC:-1}" = 1 ]; then
  echo "realistic: skipped, the bundle has no realistic-gpu.sh or scikit-fem (make bench-gpu-bundle packs them)"
fi
exit $((rc || brc || rrc))
