#!/usr/bin/env bash
# study-gpu.sh — issue 31's GPU studies, one device call:
# `bash bundle/study-gpu.sh`.
#
# 1. `spmvctl study` on the shared real matrices with a daemon of the
#    bundle on its GPU: every GPU SpMV and SpMSpM kernel of the catalogue in
#    float32 and float64 at the studies' mean, cpu.csr.serial the baseline;
#    results.json under $OUT/study (render the report and the PNGs on
#    another host: `spmvctl study --from results.json --out DIR --plot`);
# 2. bench-gpu (when the bundle has it, `make bench-gpu-bundle`): every GPU
#    kernel at block sizes 32..1024 on the generated matrices and the real
#    ones, against cuSPARSE, within BENCH_GPU_DEADLINE seconds (default 150);
#    BENCH_GPU=0 leaves it out.
# Logs under $OUT; summary.txt.
set -u
B=$(cd "$(dirname "$0")" && pwd)
. "$B/common.sh"
gpu_bundle_out summary.txt
start_spmvd 18641
wait_ready 18641 || { echo "spmvd did not start" | tee -a "$summary"; tail -5 "$OUT/spmvd.log"; exit 1; }
mkdir -p "$OUT/study"
step study "$OUT/study.log" ${T_STUDY:-240} "$B/bin/spmvctl" --url http://127.0.0.1:18641 --out "$OUT/study" \
  study "$B/shared/matrices/real" ${STUDY_ARGS:-}
tail -3 "$OUT/study.log" | tee -a "$summary"
kill -0 $PID && echo "daemon alive after the study" | tee -a "$summary"
if [ -x "$B/bin/bench-gpu" ] && [ "${BENCH_GPU:-1}" = 1 ]; then
  step bench_gpu "$OUT/bench-gpu.log" $((${BENCH_GPU_DEADLINE:-150} + 60)) "$B/bin/bench-gpu" --csv "$OUT/bench-gpu.csv" \
    --deadline ${BENCH_GPU_DEADLINE:-150} --real "$B/shared/matrices/real" ${BENCH_GPU_ARGS:-}
  tail -5 "$OUT/bench-gpu.log" | tee -a "$summary"
fi
