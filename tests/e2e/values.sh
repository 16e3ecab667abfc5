#!/usr/bin/env bash
# values.sh — a stored matrix's values change (PUT /v1/matrices/{id}/values)
# and it comes back (GET with Accept: application/x-npz, loaded by SciPy):
# values_check.py, then a restart: the rewritten files hold the new values.
. "$(dirname "$0")/lib.sh"

python_suite_start

SPMVD_URL=$SPMVD_URL "$PYTHON" "$SPMV_ROOT/tests/e2e/values_check.py" "$SEED" "$E2E_TMP/keep.json" \
  >"$E2E_TMP/values.tap" 2>&1
relay_tap "$E2E_TMP/values.tap" $? "values_check.py"
check "no temporary file is left in the state directory" [ -z "$(ls -A "$SPMVD_STATE" | grep '\.tmp$')" ]

stop_spmvd
start_spmvd || { not_ok "spmvd restarts" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
for what in float64 float32 generated; do
  id=$(jget "d['$what'][0]" "$E2E_TMP/keep.json")
  req GET "/v1/matrices/$id"
  that "$what: after a restart the sha256 is the new values'" \
    '[ "$CODE" = 200 ] && [ "$(jget "d[\"sha256\"]")" = "$(jget "d[\"'$what'\"][1]" "$E2E_TMP/keep.json")" ]'
  curl -s -H 'Accept: application/x-npz' -o "$E2E_TMP/$what.npz" "$SPMVD_URL/v1/matrices/$id"
  that "$what: after a restart the download holds the new values" \
    '"$PYTHON" -c "import json, sys, scipy.sparse as sp; k = json.load(open(sys.argv[2]))[sys.argv[3]]; \
       s = float(sp.load_npz(sys.argv[1]).data.astype(float).sum()); sys.exit(abs(s - k[2]) > 1e-9 * max(1, abs(k[2])))" \
       "$E2E_TMP/$what.npz" "$E2E_TMP/keep.json" '$what
done
done_testing
