#!/usr/bin/env bash
# names.sh — a matrix's name wherever its id goes, if_exists, sha256,
# names from Content-Disposition (names_check.py), and sha256 across a
# restart: kept in the stored file's header.
. "$(dirname "$0")/lib.sh"

python_suite_start

SPMVD_URL=$SPMVD_URL SPMVD=$SPMVD "$PYTHON" "$SPMV_ROOT/tests/e2e/names_check.py" \
  "$SEED" >"$E2E_TMP/names.tap" 2>&1
relay_tap "$E2E_TMP/names.tap" $? "names_check.py"

req GET /v1/matrices
before=$(jget '" ".join(sorted(m["id"] + "=" + m["sha256"] for m in d["matrices"]))')
stop_spmvd
start_spmvd || { not_ok "spmvd restarts" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
req GET /v1/matrices
after=$(jget '" ".join(sorted(m["id"] + "=" + m["sha256"] for m in d["matrices"]))')
that "every sha256 is the same after a restart ($(echo "$before" | wc -w) matrices)" '[ -n "$before" ] && [ "$before" = "$after" ]'
req GET /v1/matrices/reuse-other
check "a name still names its matrix after a restart" [ "$CODE" = 200 ]

done_testing
