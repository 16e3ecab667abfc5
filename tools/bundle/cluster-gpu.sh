#!/usr/bin/env bash
# cluster-gpu.sh — issues 16 and 32 on a host of 2, 4 or 8 GPUs:
# `bash bundle/cluster-gpu.sh` (NP ranks, one a GPU: every GPU of the host
# by default; NP=2 on a larger host gives the 2-GPU runs)
# (made by `make bundle`; the host's own Open MPI and NCCL are used: see
# make-bundle.sh).
#
# 1. mpi_cluster under `mpirun -np NP`: every rank's product against
#    cpu.csr.serial, on the hosts and on the ranks' GPUs (GPU kernels and
#    auto, the halo through CUDA IPC), and the command protocol; then again
#    with the halo over NCCL (MPI_CLUSTER_HALO=nccl);
# 2. tests/e2e/cluster.sh with SPMV_CLUSTER_GPU=1: `mpirun -np 2 spmvd`,
#    every shared real matrix sharded onto the two GPUs and multiplied with
#    every GPU kernel against SciPy's answer, what sharded matrices refuse,
#    SIGTERM and restart on 1 rank, a rank hung (SIGSTOP) and one killed;
#    then tests/e2e/cluster_solve.sh the same way: CG, BiCGSTAB, GMRES and
#    MINRES on matrices sharded onto the two GPUs against SciPy, and a
#    rank killed mid-solve;
# 3. (NP 2) halo-latency: the exchange alone through NCCL and CUDA IPC;
#    bench_scaling.py (unless BENCH=0): 1 GPU against NP on a 2-D Poisson
#    matrix of 205 M non-zeros and a power-law one, and a matrix larger
#    than one GPU's free memory held across them (options in SCALING_ARGS).
# NCCL_NVLS_ENABLE=0 throughout. Logs under $OUT; summary.txt says
# pass/fail per step.
set -u
B=$(cd "$(dirname "$0")" && pwd)
. "$B/common.sh"
bundle_out summary-cluster.txt
export NCCL_NVLS_ENABLE=0
{
  nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
  nvidia-smi topo -m 2>&1 | head -4
  mpirun --version 2>&1 | head -1
  ldconfig -p | grep -E "libnccl|libmpi\.so" | head -4
  LD_LIBRARY_PATH="$B/lib" ldd "$B/bin/real/spmvd" | grep -E "not found|libmpi|libnccl"
} 2>&1 | tee -a "$summary"
# the host's Open MPI when it has one; the bundle's own copies otherwise
if LD_LIBRARY_PATH="$B/lib" ldd "$B/bin/real/spmvd" | grep -q "libmpi.*not found"; then
  echo "this host lacks libmpi.so.40: the bundle's lib-mpi/ is used" | tee -a "$summary"
  export LD_LIBRARY_PATH="$B/lib-mpi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# the host's NCCL when it has one; the bundle's copy of the toolkit's otherwise
if LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$B/bin/real/spmvd" | grep -q "libnccl.*not found"; then
  if [ -e "$B/lib-nccl/libnccl.so.2" ]; then
    echo "this host lacks libnccl.so.2: the bundle's lib-nccl/ is used" | tee -a "$summary"
    export LD_LIBRARY_PATH="$B/lib-nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  else
    echo "this host lacks libnccl.so.2 and the bundle was made without it (BUNDLE_NCCL=0, or sent by the device tool)" |
      tee -a "$summary"
  fi
fi
NP=${NP:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')}
[ "$NP" -ge 2 ] 2>/dev/null || NP=2
echo "ranks: $NP (one a GPU)" | tee -a "$summary"
MPI=(mpirun --allow-run-as-root --bind-to none -x NCCL_NVLS_ENABLE -x SPMV_ROOT -x CMOCKA_MESSAGE_OUTPUT
  -x OMP_NUM_THREADS=4 ${LD_LIBRARY_PATH:+-x LD_LIBRARY_PATH})

# SUITES: which of mpi (mpi_cluster), products (cluster.sh) and solves
# (cluster_solve.sh) run; TESTS=0 runs none.
SUITES=",${SUITES:-mpi,products,solves},"
[ "${TESTS:-1}" = 1 ] || SUITES=","
if [[ $SUITES == *,mpi,* ]]; then
  step mpi_cluster_np$NP "$OUT/mpi_cluster.log" 240 "${MPI[@]}" -np "$NP" "$B/bin/mpi_cluster"
  grep -E '^# (SKIP|FAIL|GPU shards)|^not ok|on [0-9]+ GPUs' "$OUT/mpi_cluster.log" | head -40 | tee -a "$summary"
  # the same with the halo over NCCL (cluster_halo "nccl"; the default goes through CUDA IPC on one host)
  step mpi_cluster_np${NP}_nccl "$OUT/mpi_cluster_nccl.log" 240 "${MPI[@]}" -x MPI_CLUSTER_HALO=nccl -np "$NP" \
    "$B/bin/mpi_cluster"
  grep -E '^# (SKIP|FAIL|GPU shards)|^not ok|on [0-9]+ GPUs' "$OUT/mpi_cluster_nccl.log" | head -40 | tee -a "$summary"
fi
if [[ $SUITES == *,products,* ]]; then
  step e2e_cluster_gpu "$OUT/e2e_cluster_gpu.log" 300 env SPMV_CLUSTER_GPU=1 SPMV_CLUSTER_NP="$NP" SPMVD="$B/bin/spmvd" \
    BUILD="$B/bin" PYTHON="$PY" bash "$B/e2e/cluster.sh"
  grep -E '^not ok|^# ' "$OUT/e2e_cluster_gpu.log" | head -40 | tee -a "$summary"
fi
if [[ $SUITES == *,solves,* ]]; then
  step e2e_cluster_solve_gpu "$OUT/e2e_cluster_solve_gpu.log" 300 env SPMV_CLUSTER_GPU=1 SPMV_CLUSTER_NP="$NP" SPMVD="$B/bin/spmvd" \
    BUILD="$B/bin" PYTHON="$PY" bash "$B/e2e/cluster_solve.sh"
  grep -E '^not ok|^# ' "$OUT/e2e_cluster_solve_gpu.log" | head -40 | tee -a "$summary"
fi
if [ "${BENCH:-1}" = 1 ] && [ "$NP" = 2 ]; then # the exchange alone, five ways (tools/halo-latency.cu)
  for n in 48400 6400; do
    timeout 60 "${MPI[@]}" -np 2 "$B/bin/halo-latency" $n 300 320 >"$OUT/halo-latency-$n.log" 2>&1
    echo "halo-latency $n rc=$?" | tee -a "$summary"
    grep -E '^\|' "$OUT/halo-latency-$n.log" | tee -a "$summary"
  done
fi
if [ "${BENCH:-1}" = 1 ]; then
  timeout --kill-after=10 "${BENCH_LIMIT:-420}" "$PY" "$B/bench_scaling.py" --bundle "$B" --out "$OUT" --gpus "$NP" \
    ${SCALING_ARGS:-} >"$OUT/bench_scaling.log" 2>&1
  echo "bench_scaling rc=$?" | tee -a "$summary"
  tail -40 "$OUT/bench_scaling.log" | tee -a "$summary"
fi
