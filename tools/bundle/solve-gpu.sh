#!/usr/bin/env bash
# solve-gpu.sh — issue 29 on the GPU host: `bash bundle/solve-gpu.sh`
# (`make bench-solve` packs it).
#
# 1. test_gpu_vectors: every preconditioner's GPU apply against its host
#    apply, GPU CG with each, float32 AMG, the fused path against the
#    host-scalar one (MINRES, check_every, the stops);
# 1b. amg-profile on fv_diffusion(AMG_FV, default 216: 10 M rows): the
#    AMG setup's phases with the products on the host, then on the GPU
#    (issue 29; docs/benchmarks/solve.md has the host's profile);
# 2. spmv-cgbench --n 1000: 500 CG iterations on the 1 M-row Poisson, the
#    fused path against the host-scalar one (docs/benchmarks/cg-fused.md);
# 3. preconds_check.py (tests/e2e) against a daemon of the bundle with its
#    GPU: every preconditioner built on gpu0 and on the CPU, checked
#    against SciPy's solution, the inline cache, refusals, DELETE;
# 4. bench_solve.py: time to 1e-8 for every preconditioner of the daemon,
#    CuPy's cg on the same GPU and PyAMG on the host's cores
#    (SOLVE_ARGS, default --poisson 100 --fv 216 --elast 6); the daemon
#    has allow_shm, so SOLVE_ARGS="... --shm" moves b and x through
#    shared memory instead of the socket.
# Python: the host's python3 (NumPy, SciPy) with bundle/pyx (pyamg,
# scikit-fem unpacked from their wheels) first on its path; CuPy's Python
# for the CuPy rows. Logs and results under $OUT.
set -u
B=$(cd "$(dirname "$0")" && pwd)
. "$B/common.sh"
gpu_bundle_out summary.txt
python3 -c 'import numpy, scipy, sys; print(sys.version.split()[0], numpy.__version__, scipy.__version__)' | tee -a "$summary"
python3 -c 'import pyamg, skfem; print("pyamg", pyamg.__version__, "skfem", skfem.__version__)' 2>&1 | tail -1 | tee -a "$summary"

step test_gpu_vectors "$OUT/test_gpu_vectors.log" ${T_VECTORS:-170} "$B/bin/test_gpu_vectors"
grep -E '^not ok|FAIL|ERROR|^# (fused|precond|GPU)' "$OUT/test_gpu_vectors.log" | head -40 | tee -a "$summary"
if [ -x "$B/bin/amg-profile" ]; then
  fv=/tmp/spmv-amg-fv.npz # not under $OUT: about 1 GB at 10 M rows
  PYTHONPATH="$B" python3 -c "import sys, solve_problems as s, scipy.sparse as sp
sp.save_npz(sys.argv[2], s.fv_diffusion(int(sys.argv[1])), compressed=False)" "${AMG_FV:-216}" "$fv" &&
    step amg_profile "$OUT/amg_profile.log" 300 "$B/bin/amg-profile" "$fv" &&
    step amg_profile_gpu "$OUT/amg_profile_gpu.log" 300 "$B/bin/amg-profile" --gpu --runs 2 "$fv"
  grep -hE '^\| (total|A\*P|R\*\(A\*P\)|diag|strength|device)|products on' "$OUT"/amg_profile*.log | tee -a "$summary"
  rm -f "$fv"
fi
[ -x "$B/bin/spmv-cgbench" ] && step cgbench "$OUT/cgbench.log" 60 "$B/bin/spmv-cgbench" --n 1000 &&
  tail -12 "$OUT/cgbench.log" | tee -a "$summary"

start_spmvd 18611 --allow-shm true
wait_ready 18611 || { echo "spmvd did not start" | tee -a "$summary"; tail -5 "$OUT/spmvd.log"; exit 1; }
SEED=$RANDOM
echo "preconds_check seed $SEED" | tee -a "$summary"
SPMVD_URL=http://127.0.0.1:18611 step preconds "$OUT/preconds.log" 120 python3 "$B/e2e/preconds_check.py" "$SEED"
grep -E '^not ok|iterations|PyAMG' "$OUT/preconds.log" | head -30 | tee -a "$summary"

step bench_solve "$OUT/bench_solve.log" ${T_BENCH:-330} python3 "$B/bench_solve.py" http://127.0.0.1:18611 "$OUT/solve" \
  ${SOLVE_ARGS:---poisson 100 --fv 216 --elast 6}
cat "$OUT/solve/solve.md" 2>/dev/null | tee -a "$summary"
kill -0 $PID && echo "daemon alive at the end" | tee -a "$summary"
