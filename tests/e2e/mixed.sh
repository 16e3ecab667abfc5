#!/usr/bin/env bash
# mixed.sh — dtype "mixed" (float32 values, float64 x, y and sums) end to
# end: mixed_check.py uploads a random matrix and shared real matrices as
# mixed, checks every y against SciPy with the values rounded to float32
# (tight) and against the float64 product (the documented bound), the
# refusals (a value past float32's range, nothing stored), binary x/y in
# float64 and resident vectors; then the daemon restarts on the same state
# and the matrices are still mixed and still right (the flag is stored);
# with default_dtype mixed an upload naming no dtype is mixed.
. "$(dirname "$0")/lib.sh"

python_suite_start
SPMV_SEED=$SEED "$PYTHON" "$(dirname "$0")/mixed_check.py" "$SPMVD_URL" "$MATRICES" "$E2E_TMP/ids.json" \
  >"$E2E_TMP/mixed.tap" 2>&1
relay_tap "$E2E_TMP/mixed.tap" $? mixed_check.py

stop_spmvd
check "spmvd stops" [ $? -eq 0 ]
start_spmvd --default-dtype mixed || { not_ok "spmvd restarts" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
ok "spmvd restarts on the same state (default_dtype mixed)"
upload_raw "$MATRICES/real/west0067.mtx" "device=cpu"
check "an upload naming no dtype takes default_dtype mixed" [ "$CODE" = 201 -a "$(jget 'd["dtype"]')" = mixed ]
SPMV_SEED=$SEED MIXED_RELOAD=1 "$PYTHON" "$(dirname "$0")/mixed_check.py" "$SPMVD_URL" "$MATRICES" \
  "$E2E_TMP/ids.json" >"$E2E_TMP/mixed2.tap" 2>&1
relay_tap "$E2E_TMP/mixed2.tap" $? "mixed_check.py after the restart"
done_testing
