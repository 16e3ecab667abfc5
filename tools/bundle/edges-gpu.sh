#!/usr/bin/env bash
# edges-gpu.sh — issue 28's goals on the GPU host, one device call:
# `bash bundle/edges-gpu.sh`.
#
# 1. bench_roundtrip.py against a daemon of the bundle with its GPU: 1 M and
#    16 M-row products of gpu.csr.vector, a bare loopback TCP echo of the
#    same bytes between two processes, the raw binary round trip
#    (http.client), the Python client's Client.spmv (with and without out=)
#    and a shared-memory region, in the same run;
# 2. bench_solve_cpu.py --wall: the Python client's Client.solve around a
#    500-iteration CG on the 1 M-row 2-D Poisson on the GPU, against the
#    daemon's own solve time.
# The Python client is the bundle's copy (bundle/client). Python: the host's
# /opt/torch/.venv/bin/python3 when present. Logs under $OUT; summary.txt.
set -u
B=$(cd "$(dirname "$0")" && pwd)
. "$B/common.sh"
gpu_bundle_out summary.txt
"$PY" -c 'import numpy, scipy, sys; print(sys.version.split()[0], numpy.__version__, scipy.__version__)' | tee -a "$summary"
mkdir -p "$B/state.18631"
"$B/bin/spmvd" --listen 127.0.0.1:18631 --state-dir "$B/state.18631" --log-level warn --allow-shm true \
  >"$OUT/spmvd.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait' EXIT
wait_ready 18631 || { echo "spmvd did not start" | tee -a "$summary"; tail -5 "$OUT/spmvd.log"; exit 1; }
URL=http://127.0.0.1:18631

step roundtrip "$OUT/roundtrip.log" ${T_ROUNDTRIP:-240} "$PY" "$B/bench_roundtrip.py" "$URL" \
  --client-path "$B/client" --kernel gpu.csr.vector --device gpu --rows 1000000,16000000 --reps ${REPS:-7} \
  --copyrate "$B/bin/spmv-copyrate" --json "$OUT/roundtrip.json"
cat "$OUT/roundtrip.log" | tee -a "$summary"
step solve_wall "$OUT/solve_wall.log" ${T_WALL:-120} "$PY" "$B/bench_solve_cpu.py" "$URL" \
  --client-path "$B/client" --wall 1000 --maxit 500 --reps 5 --kernel auto --labels "gpu0 (auto)"
cat "$OUT/solve_wall.log" | tee -a "$summary"
kill -0 $PID && echo "daemon alive at the end" | tee -a "$summary"
