#!/usr/bin/env bash
# cluster_lib.sh — what the suites that run `mpirun -np N spmvd` share
# (cluster.sh, cluster_solve.sh; sourced after lib.sh): the suite ends
# skipped, with the reason, in a build without MPI or on a host without
# mpirun; then the job's state folder, mpirun's flags (CPU ranks
# oversubscribed, one OpenMP thread, recovery on so a killed rank does not
# take mpirun down), and the job's life: start_job, rank0, other_ranks,
# end_job. A suite adds its own daemon flags in JOB_FLAGS before
# start_job.

# a bundle's bin/spmvd is a wrapper script; ldd reads the binary beside it
SPMVD_BIN=$SPMVD
[ -x "$(dirname "$SPMVD")/real/spmvd" ] && SPMVD_BIN=$(dirname "$SPMVD")/real/spmvd
if ! ldd "$SPMVD_BIN" 2>/dev/null | grep -q libmpi; then
  skip "this spmvd is built without MPI (MPI=0, or libopenmpi-dev missing)"; done_testing; exit
fi
if ! command -v mpirun >/dev/null; then
  skip "mpirun is not installed (tools/bootstrap.sh installs openmpi-bin)"; done_testing; exit
fi
TIMEOUT_MS=${TIMEOUT_MS:-3000}
MPI_FLAGS=(--oversubscribe --enable-recovery -x OMP_NUM_THREADS=1 -x OMP_WAIT_POLICY=passive)
[ "$(id -u)" -eq 0 ] && MPI_FLAGS+=(--allow-run-as-root)
JOB_FLAGS=()
STATE=$E2E_TMP/state; mkdir -p "$STATE"

# start_job NP: mpirun NP ranks on STATE (with JOB_FLAGS); sets MPIRUN_PID,
# SPMVD_URL, JOB_LOG.
start_job() {
  SPMVD_PORT=$(free_port)
  SPMVD_URL=http://127.0.0.1:$SPMVD_PORT
  JOB_LOG=$E2E_TMP/job.$SPMVD_PORT.log
  rm -f "$STATE/rank0.pid"
  mpirun -np "$1" "${MPI_FLAGS[@]}" "$SPMVD" --listen "127.0.0.1:$SPMVD_PORT" --state-dir "$STATE" --threads 2 \
    --cluster-timeout-ms "$TIMEOUT_MS" ${JOB_FLAGS[@]+"${JOB_FLAGS[@]}"} >"$JOB_LOG" 2>&1 &
  MPIRUN_PID=$!
  SPMVD_PIDS+=("$MPIRUN_PID")
  SPMVD_PID=$MPIRUN_PID
  wait_ready "$SPMVD_URL" 60
}
rank0() { cat "$STATE/rank0.pid"; }
other_ranks() { pgrep -P "$MPIRUN_PID" -x spmvd | grep -vx "$(rank0)"; }
# end_job: SIGTERM to rank 0; waits for mpirun; $JOB_RC its status (124: killed).
end_job() {
  local i killed=0
  kill -TERM "$(rank0)" 2>/dev/null
  for ((i = 0; i < 600; i++)); do alive "$MPIRUN_PID" || break; sleep 0.1; done
  if alive "$MPIRUN_PID"; then
    pkill -KILL -P "$MPIRUN_PID" 2>/dev/null; kill -KILL "$MPIRUN_PID" 2>/dev/null; killed=1
  fi
  wait "$MPIRUN_PID" 2>/dev/null
  JOB_RC=$?
  [ "$killed" -eq 0 ] || JOB_RC=124
}
