#!/usr/bin/env bash
# batch-gpu.sh — dynamic batching on the GPU host (issue 29), one device
# call: `bash bundle/batch-gpu.sh`. tools/bench-batch.sh with the bundle's
# spmvd, spmv-gen and wrk: 32 clients of binary products on a 1 M-row
# random-column matrix (16 M entries, gather-bound), cusparse.csr, with
# batch_window_us 0, 100, 500 and 2000; requests/s, p50/p99 and the mean
# batch. The table goes to $OUT/batch.md (BATCH_* and DURATION as in
# bench-batch.sh).
set -u
B=$(cd "$(dirname "$0")" && pwd)
. "$B/common.sh"
gpu_bundle_out summary.txt
[ -x "$B/bin/wrk" ] || { echo "batch-gpu: the bundle has no wrk (make bundle on a host with wrk)" | tee -a "$summary"; exit 1; }
PYTHON=$PY SPMV_E2E_LIB=$B/e2e/lib.sh BUILD=$B/bin WRK=$B/bin/wrk BATCH_LUA=$B/bench-api-spmv.lua \
  BATCH_ROWS=${BATCH_ROWS:-1000000} DURATION=${DURATION:-10} bash "$B/bench-batch.sh" >"$OUT/batch.md" 2>&1
echo "bench-batch rc=$?" | tee -a "$summary"
cat "$OUT/batch.md" | tee -a "$summary"
