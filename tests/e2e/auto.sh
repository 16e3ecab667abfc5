#!/usr/bin/env bash
# auto.sh — the `auto` kernel over HTTP (issue 5; daemon/autotune.c).
#
# A host-held matrix (no GPU here: the CPU kernels are the candidates):
# "kernel":"auto" tunes on first use within the run budget
# (--tune-max-runs, counted in runs, never timed), answers y that matches
# cpu.csr.serial, names the chosen kernel and what tuning cost; the second
# call reuses the choice ("cached", no tuning); POST .../tune tunes again;
# after a restart the stored choice is used ("stored"); DELETE removes the
# side file; auto with a parameter is a 400.
. "$(dirname "$0")/lib.sh"

REAL=$MATRICES/real
SPMVD_STATE=$E2E_TMP/state; mkdir -p "$SPMVD_STATE"
BUDGET=40
if ! start_spmvd --tune-max-runs $BUDGET --devices none; then
  not_ok "spmvd starts" "$(tail -5 "$SPMVD_LOG")"; done_testing; exit; fi
ok "spmvd starts with tune_max_runs $BUDGET"

upload_multipart "$REAL/cage5.mtx" "name=cage5"
id=$MATRIX_ID
check "upload" [ "$CODE" = 201 ]
cols=$(jget 'd["cols"]')
x=$("$PYTHON" -c "print(','.join(str(1 + (j % 5) / 4) for j in range($cols)))")

req POST "/v1/matrices/$id/spmv" -H 'Content-Type: application/json' \
  -d "{\"kernel\":\"auto\",\"x\":[$x],\"verify\":true}"
cp "$BODY_FILE" "$E2E_TMP/first.json"
check "auto: 200 (got $CODE)" [ "$CODE" = 200 ]
check "auto: first use tunes, within $BUDGET runs, and says so" "$PYTHON" - "$E2E_TMP/first.json" $BUDGET <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); a = d["auto"]
assert a["source"] == "tuned", a
assert 0 < a["tuning_runs"] <= int(sys.argv[2]), a
assert a["tuning_ms"] >= 0 and a["timed"] >= 1 and a["candidates"] >= a["timed"], a
assert d["kernel"] == a["kernel"] and d["kernel"].startswith("cpu."), d["kernel"]
assert d["verify"]["max_rel_err"] <= 1e-12, d["verify"]
PY
kernel=$(jget 'd["kernel"]' "$E2E_TMP/first.json")

req POST "/v1/matrices/$id/spmv" -H 'Content-Type: application/json' -d "{\"kernel\":\"auto\",\"x\":[$x]}"
check "auto: the second call reuses the choice (cached, $kernel)" \
  [ "$CODE" = 200 -a "$(jget 'd["auto"]["source"]')" = cached -a "$(jget 'd["kernel"]')" = "$kernel" ]
check "the choice is stored beside the matrix" [ -s "$SPMVD_STATE/$id.tune" ]

req POST "/v1/matrices/$id/spmv" -H 'Content-Type: application/json' -d "{\"kernel\":\"auto\",\"x\":[$x],\"threads\":2}"
check "auto takes no parameters: 400 (got $CODE)" [ "$CODE" = 400 ]

req POST "/v1/matrices/$id/tune"
check "POST .../tune: 200, tuned again within the budget" "$PYTHON" -c "
import json; d = json.load(open('$BODY_FILE')); a = d['auto']
assert '$CODE' == '200' and d['matrix'] == '$id' and a['source'] == 'tuned' and 0 < a['tuning_runs'] <= $BUDGET, d"
kernel=$(jget 'd["auto"]["kernel"]')
req POST "/v1/matrices/00000000-0000-4000-8000-000000000000/tune"
check "tune of an unknown matrix: 404 (got $CODE)" [ "$CODE" = 404 ]

stop_spmvd
if ! start_spmvd --tune-max-runs $BUDGET --devices none; then
  not_ok "spmvd restarts" "$(tail -5 "$SPMVD_LOG")"; done_testing; exit; fi
req POST "/v1/matrices/$id/spmv" -H 'Content-Type: application/json' -d "{\"kernel\":\"auto\",\"x\":[$x],\"verify\":true}"
check "after a restart the stored choice is used ($kernel, no tuning)" "$PYTHON" -c "
import json; d = json.load(open('$BODY_FILE'))
assert '$CODE' == '200' and d['auto']['source'] == 'stored' and d['kernel'] == '$kernel', d
assert d['verify']['max_rel_err'] <= 1e-12, d"

echo '{"kernel":"gpu.nonexistent"' >"$SPMVD_STATE/$id.tune"
echo '{"kernel":' >"$SPMVD_STATE/$id.tune.tmp" # a write a crash cut short
stop_spmvd
start_spmvd --tune-max-runs $BUDGET --devices none
check "a <id>.tune.tmp left by a crash is removed at start" [ ! -e "$SPMVD_STATE/$id.tune.tmp" ]
req POST "/v1/matrices/$id/spmv" -H 'Content-Type: application/json' -d "{\"kernel\":\"auto\",\"x\":[$x]}"
check "a damaged side file is ignored: tuned again" [ "$CODE" = 200 -a "$(jget 'd["auto"]["source"]')" = tuned ]
# the choice is fsynced before its rename (else a crash can leave an empty .tune under the name)
if command -v strace >/dev/null && strace -f -e trace=none true >/dev/null 2>&1; then
  timeout 60 strace -f -qq -o "$E2E_TMP/tune.strace" -e trace=openat,fsync,rename -p "$SPMVD_PID" &
  tracer=$!
  sleep 1
  req POST "/v1/matrices/$id/tune"
  sleep 0.5
  kill "$tracer" 2>/dev/null; wait "$tracer" 2>/dev/null
  check "POST .../tune: the .tune.tmp is fsynced before it is renamed" "$PYTHON" - "$E2E_TMP/tune.strace" <<'PY'
import re, sys
fd, synced = None, False
for line in open(sys.argv[1]):
    m = re.search(r'openat\(.*\.tune\.tmp".*= (\d+)$', line)
    if m:
        fd, synced = m.group(1), False
    if fd and re.search(r"fsync\(%s\)\s+= 0" % fd, line):
        synced = True
    if re.search(r'rename\(".*\.tune\.tmp"', line):
        sys.exit(0 if synced else 1)
sys.exit(2)
PY
else
  skip "strace cannot trace here: the fsync of .tune is not checked"
fi

req DELETE "/v1/matrices/$id"
check "DELETE removes the stored choice too" [ "$CODE" = 204 -a ! -e "$SPMVD_STATE/$id.tune" ]

# A matrix holding a NaN and an infinity: every kernel gives the same
# non-finite rows, so auto must answer (it answered 409 when a NaN in the
# reference counted as a mismatch), and verify matches them.
printf '%%%%MatrixMarket matrix coordinate real general\n4 4 5\n1 1 1.0\n2 2 nan\n3 3 2.0\n1 3 inf\n4 1 -3.5\n' \
  >"$E2E_TMP/nonfinite.mtx"
upload_raw "$E2E_TMP/nonfinite.mtx" "name=nonfinite"
nid=$MATRIX_ID
req POST "/v1/matrices/$nid/spmv" -H 'Content-Type: application/json' -d '{"kernel":"auto","x":[1,2,3,4],"verify":true}'
check "auto on a matrix with NaN and Inf: 200, y [Inf, NaN, 6, -3.5], verify matched" "$PYTHON" -c "
import json, math; d = json.load(open('$BODY_FILE'))
assert '$CODE' == '200', d
y = [float(v) for v in d['y']]
assert y[0] == math.inf and math.isnan(y[1]) and y[2] == 6 and y[3] == -3.5, y
assert d['verify']['max_rel_err'] == 0, d['verify']"
# (not PBSR's: the matrix has no b x b blocks, so it answers why, checked below)
for k in $(req GET /v1/kernels; jget '" ".join(k["name"] for k in d["kernels"] if k["device"] == "cpu" and k["available"] and k.get("op", "spmv") == "spmv" and k["name"] != "auto" and k["format"] != "pbsr")'); do
  req POST "/v1/matrices/$nid/spmv" -H 'Content-Type: application/json' -d "{\"kernel\":\"$k\",\"x\":[1,2,3,4],\"verify\":true}"
  if [ "$k" = cpu.spsell.omp ]; then # symmetric matrices only: this one is not
    check "$k on the NaN/Inf matrix (not symmetric): 409 saying why" \
      bash -c "[ '$CODE' = 409 ] && grep -q 'exactly symmetric' '$BODY_FILE'"
    continue
  fi
  check "$k on the NaN/Inf matrix: the same rows, verify 0" "$PYTHON" -c "
import json, math; d = json.load(open('$BODY_FILE'))
y = [float(v) for v in d['y']]
assert '$CODE' == '200' and y[0] == math.inf and math.isnan(y[1]) and y[2] == 6 and d['verify']['max_rel_err'] == 0, d"
done
req POST "/v1/matrices/$nid/spmv" -H 'Content-Type: application/json' -d '{"kernel":"cpu.pbsr.omp","x":[1,2,3,4]}'
check "cpu.pbsr.omp on a matrix without b x b blocks: 422 unsupported_matrix saying why" "$PYTHON" -c "
import json; d = json.load(open('$BODY_FILE'))
assert '$CODE' == '422' and 'unsupported_matrix' in json.dumps(d) and 'b x b blocks' in json.dumps(d), d"
stop_spmvd
done_testing
