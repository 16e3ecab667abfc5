#!/usr/bin/env bash
# symmetric.sh — the descriptor's `symmetric` and op t on such a matrix
# (symmetric_check.py), then a restart: the stored files keep what was found.
. "$(dirname "$0")/lib.sh"

python_suite_start
SPMVD_URL=$SPMVD_URL MATRICES=$MATRICES "$PYTHON" "$SPMV_ROOT/tests/e2e/symmetric_check.py" "$SEED" "$E2E_TMP/keep.json" \
  >"$E2E_TMP/symmetric.tap" 2>&1
relay_tap "$E2E_TMP/symmetric.tap" $? "symmetric_check.py"
stop_spmvd
start_spmvd || { not_ok "spmvd restarts" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
for pair in sym:True nearly:False lfat5:True; do
  what=${pair%%:*} want=${pair#*:}
  id=$(jget "d['$what']" "$E2E_TMP/keep.json")
  req GET "/v1/matrices/$id"
  that "after a restart $what says symmetric $want" '[ "$CODE" = 200 ] && [ "$(jget "d[\"symmetric\"]")" = '$want' ]'
done
stop_spmvd
done_testing
