#!/usr/bin/env bash
# measures.sh — the measures of issue 31: rates at the mean or the median
# (`stat`), efficiency against cpu.csr.serial, the bench's thread sweep,
# warm-ups as asked, and max_request_work over a sweep. The checks live in
# tests/e2e/measures_check.py; the daemon runs with OMP_NUM_THREADS=3 (on
# any host: a thread count is a request, oversubscribed on two cores) so
# the default team and "sweep" are known, and with a max_request_work a
# sweep can exceed.
. "$(dirname "$0")/lib.sh"

TEAM=3 MAX_WORK=50000000
OMP_NUM_THREADS=$TEAM start_spmvd --max-request-work $MAX_WORK \
  || { not_ok "spmvd starts" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
ok "spmvd starts (OMP_NUM_THREADS $TEAM, max_request_work $MAX_WORK)"
"$PYTHON" "$(dirname "$0")/measures_check.py" "$SPMVD_URL" $TEAM $MAX_WORK >"$E2E_TMP/measures.tap" 2>&1
relay_tap "$E2E_TMP/measures.tap" $? measures_check.py
check "the daemon is still up" alive "$SPMVD_PID"
done_testing
