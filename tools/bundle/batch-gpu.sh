#!/usr/bin/env bash
# batch-gpu.sh — dynamic batching on the GPU host (issue 29), one device
# call: `bash bundle/batch-gpu.sh`.
#
# 1. test_gpu_batch: spmv_gpu_run_batch (engine/gpu/batch.cu) on
#    gpu.csr.spmm and cusparse.csr, k = 1 .. SPMV_MAX_K, every y against
#    cpu.csr.serial and the unbatched product;
# 2. batch_check.py on a daemon with a window: concurrent products batched
#    on the CPU and GPU kernels, each y against SciPy, and /metrics' parts
#    of the batches' time;
# 3. tools/bench-batch.sh with the bundle's spmvd, spmv-gen and wrk: 32
#    clients of binary products on a 1 M-row random-column matrix (16 M
#    entries, gather-bound), cusparse.csr, with batch_window_us 0, 100, 500
#    and 2000; requests/s, p50/p99, the mean batch and a batch's parts
#    (h2d / layout / spmm / d2h / host). The table goes to $OUT/batch.md
#    (BATCH_* and DURATION as in bench-batch.sh; BATCH_KERNEL=gpu.csr.spmm
#    for ours).
set -u
B=$(cd "$(dirname "$0")" && pwd)
. "$B/common.sh"
gpu_bundle_out summary.txt
[ -x "$B/bin/wrk" ] || { echo "batch-gpu: the bundle has no wrk (make bundle on a host with wrk)" | tee -a "$summary"; exit 1; }

step test_gpu_batch "$OUT/test_gpu_batch.log" ${T_BATCH:-150} "$B/bin/test_gpu_batch"
grep -E '^not ok|^# (FAIL|seed|batch)' "$OUT/test_gpu_batch.log" | head -20 | tee -a "$summary"

seed=${SPMV_SEED:-$RANDOM}
mkdir -p "$B/state.18629"
"$B/bin/spmvd" --listen 127.0.0.1:18629 --state-dir "$B/state.18629" --log-level info --threads 8 \
  --batch-window-us 300000 >"$OUT/spmvd-batch.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait' EXIT
if wait_ready 18629; then
  echo "# batch_check.py seed $seed" | tee -a "$summary"
  SPMVD_URL=http://127.0.0.1:18629 PYTHONPATH="$B/e2e${PYTHONPATH:+:$PYTHONPATH}" \
    step batch_check "$OUT/batch_check.log" ${T_CHECK:-90} "$PY" "$B/e2e/batch_check.py" "$seed" 300000
  grep -E '^not ok' -A3 "$OUT/batch_check.log" | head -20 | tee -a "$summary"
  grep -E 'batch of' "$OUT/spmvd-batch.log" | tail -4 | tee -a "$summary"
else
  echo "batch_check: spmvd did not start: $(tail -3 "$OUT/spmvd-batch.log")" | tee -a "$summary"
fi
kill $PID 2>/dev/null; wait $PID 2>/dev/null; trap - EXIT

PYTHON=$PY SPMV_E2E_LIB=$B/e2e/lib.sh BUILD=$B/bin WRK=$B/bin/wrk BATCH_LUA=$B/bench-api-spmv.lua \
  BATCH_ROWS=${BATCH_ROWS:-1000000} DURATION=${DURATION:-10} bash "$B/bench-batch.sh" >"$OUT/batch.md" 2>&1
echo "bench-batch rc=$?" | tee -a "$summary"
cat "$OUT/batch.md" | tee -a "$summary"
