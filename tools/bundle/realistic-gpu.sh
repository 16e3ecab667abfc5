#!/usr/bin/env bash
# realistic-gpu.sh — issue 30's realistic benchmark set on the GPU host,
# one device call: `bash bundle/realistic-gpu.sh` (`make bench-realistic`
# packs it). tools/bench_realistic.py against a daemon of the bundle on
# its GPU: finite-volume diffusion with log-normal permeability (74 M
# non-zeros), P1 Poisson on an unstructured disk, P2 elasticity (scikit-fem)
# and an upwind convection-diffusion, built on the host (seeded), every GPU
# kernel in float64 and float32 against the best cuSPARSE kernel of the same
# bench, with each format's bytes per non-zero. REALISTIC_ARGS as the
# script takes them (--matrices, --dtypes, --runs, --size). Python: the
# host's /opt/torch/.venv/bin/python3 with bundle/pyx (scikit-fem) first on
# its path. Logs and results under $OUT.
set -u
B=$(cd "$(dirname "$0")" && pwd)
. "$B/common.sh"
gpu_bundle_out summary.txt
"$PY" -c 'import numpy, scipy, skfem, sys; print(sys.version.split()[0], numpy.__version__, scipy.__version__, "skfem", skfem.__version__)' 2>&1 |
  tail -1 | tee -a "$summary"
start_spmvd 18651
wait_ready 18651 || { echo "spmvd did not start" | tee -a "$summary"; tail -5 "$OUT/spmvd.log"; exit 1; }
SPMVD_CLIENT_PATH=$B/client step realistic "$OUT/realistic.log" ${T_REALISTIC:-540} "$PY" "$B/bench_realistic.py" \
  http://127.0.0.1:18651 "$OUT/realistic" ${REALISTIC_ARGS:-}
sed -n '1,/^## Every kernel/p' "$OUT/realistic/realistic.md" 2>/dev/null | tee -a "$summary"
grep '^#' "$OUT/realistic.log" | tail -12 | tee -a "$summary"
kill -0 $PID && echo "daemon alive at the end" | tee -a "$summary"
