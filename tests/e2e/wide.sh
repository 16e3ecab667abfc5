#!/usr/bin/env bash
# wide.sh — matrices with 64-bit row offsets through the daemon (issue 13,
# part 4), on the host: uploads with offsets=64 (what a matrix past
# INT32_MAX non-zeros gets), their products against SciPy, what they
# refuse, resident vectors, /v1/ops and /solve on them, and a restart that
# reads their files back with the offsets (wide_check.py says what).
. "$(dirname "$0")/lib.sh"

if ! "$PYTHON" -c 'import numpy, scipy' 2>/dev/null; then
  skip "SciPy is not installed (tools/bootstrap.sh installs python3-scipy)"; done_testing; exit
fi
SEED=${SPMV_SEED:-$RANDOM}
diag "seed $SEED"
SPMVD_STATE=$E2E_TMP/state; mkdir -p "$SPMVD_STATE"
start_spmvd || { not_ok "spmvd starts" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
ok "spmvd starts"
SPMV_SEED=$SEED "$PYTHON" "$(dirname "$0")/wide_check.py" "$SPMVD_URL" "$MATRICES" "$E2E_TMP" >"$E2E_TMP/wide.tap" 2>&1
relay_tap "$E2E_TMP/wide.tap" $? wide_check.py
stop_spmvd
start_spmvd || { not_ok "spmvd restarts" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
ok "spmvd restarts on the same state directory"
SPMV_SEED=$SEED "$PYTHON" "$(dirname "$0")/wide_check.py" "$SPMVD_URL" "$MATRICES" "$E2E_TMP" --after-restart \
  >"$E2E_TMP/wide2.tap" 2>&1
relay_tap "$E2E_TMP/wide2.tap" $? "wide_check.py --after-restart"
check "the daemon is still up" alive "$SPMVD_PID"
done_testing
