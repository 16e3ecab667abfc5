#!/usr/bin/env bash
# shm.sh — shared-memory regions (/v1/shm, operands in regions) end to end:
# three CPU daemons (allow_shm on; off; on with max_shm_regions 2) driven by
# shm_check.py, which makes POSIX objects, compares every y with SciPy and
# checks every refusal (its docstring lists them). The seed is printed.
. "$(dirname "$0")/lib.sh"

if ! "$PYTHON" -c 'import numpy, scipy' 2>/dev/null; then
  skip "SciPy is not installed (tools/bootstrap.sh installs python3-scipy)"; done_testing; exit
fi
if [ ! -d /dev/shm ]; then
  skip "no /dev/shm on this host"; done_testing; exit
fi
SEED=${SPMV_SEED:-$RANDOM}
start_spmvd --allow-shm true || { not_ok "spmvd starts" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
ON_URL=$SPMVD_URL ON_PID=$SPMVD_PID
SPMVD_STATE= start_spmvd || { not_ok "spmvd starts (allow_shm off)"; done_testing; exit; }
OFF_URL=$SPMVD_URL
SPMVD_STATE= start_spmvd --allow-shm true --max-shm-regions 2 || { not_ok "spmvd starts (2 regions)"; done_testing; exit; }
SMALL_URL=$SPMVD_URL
ok "three daemons start"
SPMV_SEED=$SEED "$PYTHON" "$(dirname "$0")/shm_check.py" "$ON_URL" "$OFF_URL" "$SMALL_URL" "$MATRICES" \
  >"$E2E_TMP/shm.tap" 2>&1
relay_tap "$E2E_TMP/shm.tap" $? shm_check.py
check "the daemon is still up" alive "$ON_PID"
done_testing
