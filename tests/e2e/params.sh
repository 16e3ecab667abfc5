#!/usr/bin/env bash
# params.sh — strict parameters (issue 28): every route refuses a query
# parameter it does not read, with 400 unknown_parameter naming it and the
# parameters it takes, and every JSON route refuses other Content-Types.
#
# params_check.py walks the daemon's own route table (spmvd --routes), so a
# new route is walked without editing this file; below, the faults the
# issue found, on a real matrix.
. "$(dirname "$0")/lib.sh"

if ! start_spmvd; then
  not_ok "spmvd starts" "$(tail -5 "$SPMVD_LOG")"; done_testing; exit
fi
ok "spmvd starts"

SPMVD_URL=$SPMVD_URL SPMVD=$SPMVD "$PYTHON" "$SPMV_ROOT/tests/e2e/params_check.py" >"$E2E_TMP/walk.tap" 2>&1
relay_tap "$E2E_TMP/walk.tap" $? "params_check.py (every route of spmvd --routes)"

# ------------------------------------------------ the issue's fault list
seed=${SPMV_SEED:-$RANDOM}
diag "seed $seed"
gen_matrix "$E2E_TMP/a.mtx" 50 4
upload_raw "$E2E_TMP/a.mtx" "name=a"
expect_code "a matrix is stored" 201
ID=$MATRIX_ID
"$PYTHON" -c 'import struct; open("'"$E2E_TMP"'/x.f64", "wb").write(struct.pack("<50d", *range(50)))'

req POST "/v1/matrices/$ID/spmv?kernal=cpu.hll.omp&run=50" --data-binary "@$E2E_TMP/x.f64" \
    -H 'Content-Type: application/octet-stream'
msg=$(jget 'd["error"]["message"]' 2>/dev/null)
if [ "$CODE" = 400 ] && [ "$(jget 'd["error"]["code"]')" = unknown_parameter ] && [[ "$msg" == *kernal* ]] &&
   [[ "$msg" == *kernel* ]] && [[ "$msg" == *runs* ]]; then
  ok "binary spmv ?kernal=&run=: 400 unknown_parameter ($msg)"
else not_ok "binary spmv ?kernal=&run=: 400 unknown_parameter" "HTTP $CODE $(head -c 300 "$BODY_FILE")"; fi

req POST "/v1/matrices/$ID/spmv?kernel=cpu.hll.omp&runs=50&kernel=cpu.csr.serial" --data-binary "@$E2E_TMP/x.f64" \
    -H 'Content-Type: application/octet-stream'
that "binary spmv with ?kernel= twice: 400 naming it" \
  '[ "$CODE" = 400 ] && jget "d[\"error\"][\"message\"]" | grep -q "\`kernel\` is given twice"'

req POST "/v1/matrices/$ID/spmv?dtype=float32" --data-binary "@$E2E_TMP/x.f64" -H 'Content-Type: application/octet-stream'
that "binary spmv saying ?dtype=float32 to a float64 matrix: 400 dtype_mismatch, not bytes read as the wrong type" \
  '[ "$CODE" = 400 ] && [ "$(jget "d[\"error\"][\"code\"]")" = dtype_mismatch ]'
req POST "/v1/matrices/$ID/spmv?dtype=float64" --data-binary "@$E2E_TMP/x.f64" -H 'Content-Type: application/octet-stream'
expect_code "binary spmv saying ?dtype=float64: 200" 200
x=$("$PYTHON" -c 'print(list(range(50)))')
req POST "/v1/matrices/$ID/spmv?kernel=cpu.hll.omp" -H 'Content-Type: application/json' -d "{\"x\": $x}"
that "JSON spmv with a query string: 400 unknown_parameter (the options are in the body)" \
  '[ "$CODE" = 400 ] && [ "$(jget "d[\"error\"][\"code\"]")" = unknown_parameter ]'
req POST "/v1/matrices/$ID/spmv" -H 'Content-Type: application/json' -d "{\"x\": $x, \"kernel\": \"cpu.hll.omp\"}"
that "JSON spmv without a query string: 200 with the kernel asked" \
  '[ "$CODE" = 200 ] && [ "$(jget "d[\"kernel\"]")" = cpu.hll.omp ]'
req POST "/v1/matrices/$ID/spmv" -H 'Content-Type: text/plain' -d "{\"x\": $x}"
check "JSON spmv as text/plain: 415" [ "$CODE" = 415 ]

before=$(ls "$SPMVD_STATE" | grep -c '\.csr$')
upload_raw "$E2E_TMP/a.mtx" "dtyp=float32&nmae=x"
msg=$(jget 'd["error"]["message"]' 2>/dev/null)
if [ "$CODE" = 400 ] && [[ "$msg" == *dtyp* ]] && [[ "$msg" == *dtype* ]] && [[ "$msg" == *name* ]]; then
  ok "raw upload ?dtyp=&nmae=: 400 naming dtyp and the options ($msg)"
else not_ok "raw upload ?dtyp=&nmae=: 400" "HTTP $CODE $msg"; fi
check "nothing was stored by it" [ "$(ls "$SPMVD_STATE" | grep -c '\.csr$')" -eq "$before" ]

req POST "/v1/vectors?like=$ID" -H 'Content-Type: application/json' -d '{"fill": 1}'
that "a vector from a JSON object with a query string: 400 unknown_parameter" \
  '[ "$CODE" = 400 ] && [ "$(jget "d[\"error\"][\"code\"]")" = unknown_parameter ]'
req POST "/v1/vectors?like=$ID" -H 'Content-Type: application/json' -d "$x"
that "a vector from a JSON array takes its options from the query: 201" '[ "$CODE" = 201 ] && [ "$(jget "d[\"n\"]")" = 50 ]'
check "the daemon logged no undeclared query read" bash -c "! grep -q 'do not declare' '$SPMVD_LOG'"

done_testing
