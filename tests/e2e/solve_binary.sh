#!/usr/bin/env bash
# solve_binary.sh — end to end: POST /v1/matrices/{id}/solve with b in
# binary (docs/api.md, "Solvers", binary encoding). solve_binary_check.py
# checks against SciPy: x comes back binary with the report in
# X-SpMV-Solve (no residual history there; after x with ?history=true),
# ?k= columns are k sequential solves each bitwise equal to its own
# one-column solve, ?x0=body, options in the query (the same checks as
# JSON), wrong lengths and bad values refused, an async binary solve's
# job, the synchronous default, and JSON bodies with k columns.
. "$(dirname "$0")/lib.sh"

"$PYTHON" -c 'import numpy, scipy' 2>/dev/null || { skip "needs NumPy and SciPy (tools/bootstrap.sh)"; done_testing; exit; }
if start_spmvd; then
  SPMV_SEED=${SPMV_SEED:-$RANDOM} "$PYTHON" "$(dirname "$0")/solve_binary_check.py" "$SPMVD_URL" >"$E2E_TMP/sb.tap" 2>&1
  relay_tap "$E2E_TMP/sb.tap" $? solve_binary_check.py
  stop_spmvd
  check "spmvd stops cleanly" [ $? -eq 0 ]
else
  not_ok "spmvd starts" "$(tail -3 "$SPMVD_LOG")"
fi
done_testing
