#!/usr/bin/env bash
# preconds.sh — preconditioners as resident objects (docs/api.md,
# "Preconditioners"): built by POST, named or inline in solves, cached,
# dropped by new values, deleted; preconds_check.py drives the daemon.
. "$(dirname "$0")/lib.sh"

python_suite_start
SPMVD_URL=$SPMVD_URL "$PYTHON" "$SPMV_ROOT/tests/e2e/preconds_check.py" "$SEED" >"$E2E_TMP/pc.tap" 2>&1
relay_tap "$E2E_TMP/pc.tap" $? "preconds_check.py"
stop_spmvd
done_testing
