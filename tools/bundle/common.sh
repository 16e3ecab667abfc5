# common.sh — what the GPU host's scripts share (sourced by run.sh,
# shm-gpu.sh, packed-gpu.sh, wide-gpu.sh, cluster-gpu.sh, check-gpu.sh, batch-gpu.sh, edges-gpu.sh, study-gpu.sh, realistic-gpu.sh, kernels-gpu.sh and
# solve-gpu.sh; copied into the bundle by make-bundle.sh). They set B, the
# bundle's folder, first.
#
# bundle_out SUMMARY: makes $OUT (default $B/out), exports what the test
# binaries and Python want (SPMV_ROOT, TAP output, unbuffered Python) and
# starts $summary, $OUT/SUMMARY, empty.
bundle_out() {
  OUT=${OUT:-$B/out}
  mkdir -p "$OUT"
  export SPMV_ROOT="$B/work" CMOCKA_MESSAGE_OUTPUT=TAP PYTHONUNBUFFERED=1
  summary="$OUT/$1"
  : >"$summary"
}

# gpu_bundle_out SUMMARY: bundle_out SUMMARY, then bundle/pyx first on
# PYTHONPATH, NVLink multicast off for NCCL, and the GPU's name, driver and
# memory as the summary's first line.
gpu_bundle_out() {
  bundle_out "$1"
  export PYTHONPATH="$B/pyx${PYTHONPATH:+:$PYTHONPATH}" NCCL_NVLS_ENABLE=0
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$summary"
}

# start_spmvd PORT [OPTIONS...]: the bundle's spmvd on 127.0.0.1:PORT
# (state in $B/state.PORT, log $OUT/spmvd.log, OPTIONS after its own),
# PID its pid, killed when the script exits. wait_ready PORT then waits
# for it.
start_spmvd() {
  mkdir -p "$B/state.$1"
  "$B/bin/spmvd" --listen "127.0.0.1:$1" --state-dir "$B/state.$1" --log-level warn "${@:2}" >"$OUT/spmvd.log" 2>&1 &
  PID=$!
  trap 'kill $PID 2>/dev/null; wait' EXIT
}

# wait_ready PORT: waits up to 20 s for spmvd on 127.0.0.1:PORT to answer
# /v1/ready; status 1 if it never does.
wait_ready() {
  for _ in $(seq 200); do curl -sf "http://127.0.0.1:$1/v1/ready" >/dev/null && return 0; sleep 0.1; done
  return 1
}

# step NAME LOG LIMIT CMD...: runs CMD with its output in LOG under a time
# limit and appends one line to $summary: the exit status and the TAP
# lines it printed (ok, not ok, skipped), with the seconds it took.
step() {
  local name=$1 log=$2 limit=$3; shift 3
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1
  local rc=$?
  printf '%-22s rc=%-3s %3s ok %3s not ok %3s skipped  %4ds\n' "$name" "$rc" "$(grep -cE '^ok [0-9]+' "$log")" \
    "$(grep -E '^not ok [0-9]+' "$log" | grep -vc SKIP)" "$(grep -c '# SKIP' "$log")" $((SECONDS - t0)) | tee -a "$summary"
}

# The host's Python with NumPy, SciPy (and CuPy) when it has one.
PY=$(command -v /opt/torch/.venv/bin/python3 || command -v python3)
