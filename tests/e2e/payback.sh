#!/usr/bin/env bash
# payback.sh — what building a format costs and when `auto` builds a packed
# one (issue 30; daemon/payback.c, docs/api.md "Formats on demand", "auto").
#
# A host matrix (no GPU here): every format entry of the descriptor carries
# conversion_ms, best_ms, payback and payback_reason; after a product with a
# packed kernel its entry shows the conversion time and a payback that is
# the formula of the measured times (or null with "not faster"); a format
# never timed says "not measured"; CSR is the baseline. `auto` under
# auto_build repaid leaves the packed formats out (answer's auto.deferred)
# until the matrix has had auto_build_products products, or a call built
# one; deferred names only the packed formats the matrix can hold (spsell
# on the symmetric Poisson, pbsr on a matrix of 3 x 3 blocks, neither where
# not); auto_build eager defers nothing; an unknown auto_build is refused.
. "$(dirname "$0")/lib.sh"

MIN=6
if ! "$SPMVD" --check-config --auto-build lazy >"$E2E_TMP/bad.out" 2>&1; then
  check "auto_build lazy is refused, naming the key and the values" grep -q "auto_build.*repaid or eager" "$E2E_TMP/bad.out"
else
  not_ok "auto_build lazy is refused" "$(cat "$E2E_TMP/bad.out")"
fi
if ! start_spmvd --devices none --tune-max-runs 40 --auto-build-products $MIN; then
  not_ok "spmvd starts" "$(tail -5 "$SPMVD_LOG")"; done_testing; exit; fi
ok "spmvd starts with auto_build_products $MIN"

req POST "/v1/matrices?generate=poisson2d&n=200&device=cpu"
expect_code "generate=poisson2d n=200 on the host" 201
id=$(jget 'd["id"]'); rows=$(jget 'd["rows"]')
check "a new matrix has had no products, its CSR is the baseline" "$PYTHON" -c "
import json; d = json.load(open('$BODY_FILE')); f = d['formats'][0]
assert d['products'] == 0 and f['format'] == 'csr' and f['payback'] is None and f['payback_reason'] == 'baseline', d
assert f['conversion_ms'] is None and f['best_ms'] is None, f"
x=$("$PYTHON" -c "print(','.join(str(1 + (j % 7) / 8) for j in range($rows)))")
spmv() { # the body from a file: x is too long for an argument
  printf '{"x":[%s],%s}' "$x" "$1" >"$E2E_TMP/req.json"
  req POST "/v1/matrices/$id/spmv" -H 'Content-Type: application/json' --data-binary "@$E2E_TMP/req.json"
}
formats() { req GET "/v1/matrices/$id"; jget '",".join(sorted(f["format"] for f in d["formats"]))'; }

spmv '"kernel":"auto"'
# deferred names the packed formats the matrix can hold, not held: spsell (the Poisson is symmetric), not pbsr (it
# has no b x b blocks, so auto never tries a PBSR kernel on it: engine/tune.c)
check "auto, first call: tuned with pcsr, psell and spsell deferred (not pbsr: no blocks), a kernel of another format (got $CODE)" "$PYTHON" -c "
import json; d = json.load(open('$BODY_FILE')); a = d['auto']
assert a['source'] == 'tuned' and a['deferred'] == ['pcsr', 'psell', 'spsell'], a
assert 'pcsr' not in d['kernel'] and 'psell' not in d['kernel'], d['kernel']"
check "no packed format built by auto ($(formats))" "$PYTHON" -c "assert not {'pcsr', 'psell'} & set('$(formats)'.split(','))"
check "the product counted (products $(jget 'd["products"]'))" [ "$(jget 'd["products"]')" = 1 ]

spmv '"kernel":"cpu.psell.omp","runs":3'
expect_code "cpu.psell.omp builds the PSELL" 200
req GET "/v1/matrices/$id"
cp "$BODY_FILE" "$E2E_TMP/desc.json"
check "the descriptor: psell's conversion_ms and best_ms, and its payback from them against CSR's best" \
  "$PYTHON" - "$E2E_TMP/desc.json" <<'PY'
import json, math, sys
d = json.load(open(sys.argv[1]))
f = {e["format"]: e for e in d["formats"] if e["device"] == "host"}
p, c = f["psell"], f["csr"]
assert p["conversion_ms"] > 0 and p["best_ms"] > 0 and c["best_ms"] > 0, (p, c)
if p["best_ms"] < c["best_ms"]:
    n = math.ceil(p["conversion_ms"] / (c["best_ms"] - p["best_ms"]))
    assert p["payback_reason"] is None and isinstance(p["payback"], int) and abs(p["payback"] - n) <= 1, (p, c, n)
else:
    assert p["payback"] is None and p["payback_reason"] == "not faster", (p, c)
assert d["products"] == 4, d["products"]
PY

spmv '"kernel":"auto"'
check "auto after a call built psell: tuned again, only pcsr and spsell deferred" "$PYTHON" -c "
import json; a = json.load(open('$BODY_FILE'))['auto']
assert a['source'] == 'tuned' and a['deferred'] == ['pcsr', 'spsell'], a"
spmv '"kernel":"auto"'
check "and cached on the next call" [ "$(jget 'd["auto"]["source"]')" = cached ]

spmv '"kernel":"cpu.csr.omp","runs":'$MIN
expect_code "$MIN more products" 200
spmv '"kernel":"auto"'
check "auto after $MIN products: tuned again, nothing deferred" "$PYTHON" -c "
import json; a = json.load(open('$BODY_FILE'))['auto']
assert a['source'] == 'tuned' and a['deferred'] == [], a"

# A matrix of complete 3 x 3 blocks (303 rows: b 3, not 6), not symmetric: pbsr is deferred, spsell is not
"$PYTHON" - "$E2E_TMP/blocks.mtx" <<'PY'
import sys
nb, b = 101, 3
blocks = sorted({(I, J) for I in range(nb) for J in (I, (I + 1) % nb, (7 * I + 3) % nb)})
ent = [(I * b + r, J * b + c) for I, J in blocks for r in range(b) for c in range(b)]
with open(sys.argv[1], "w") as f:
    f.write("%%%%MatrixMarket matrix coordinate real general\n%d %d %d\n" % (nb * b, nb * b, len(ent)))
    for i, j in ent:
        f.write("%d %d %g\n" % (i + 1, j + 1, 1 + ((3 * i + 5 * j) % 11) / 8))
PY
upload_raw "$E2E_TMP/blocks.mtx" "name=blocks&device=cpu"
expect_code "a matrix of 3 x 3 blocks uploaded" 201
id=$MATRIX_ID; rows=$(jget 'd["rows"]')
x=$("$PYTHON" -c "print(','.join(str(1 + (j % 7) / 8) for j in range($rows)))")
spmv '"kernel":"auto"'
check "auto on the blocked matrix: pcsr, psell and pbsr deferred (not spsell: not symmetric) (got $CODE)" "$PYTHON" -c "
import json; a = json.load(open('$BODY_FILE'))['auto']
assert a['source'] == 'tuned' and a['deferred'] == ['pcsr', 'psell', 'pbsr'], a"
spmv '"kernel":"cpu.pbsr.omp"'
expect_code "cpu.pbsr.omp builds the blocked matrix's PBSR" 200
spmv '"kernel":"auto"'
check "auto after a call built pbsr: tuned again, pbsr no longer deferred" "$PYTHON" -c "
import json; a = json.load(open('$BODY_FILE'))['auto']
assert a['source'] == 'tuned' and a['deferred'] == ['pcsr', 'psell'], a"

req POST "/v1/matrices?generate=poisson2d&n=50&device=cpu&formats=pcsr"
expect_code "a matrix with pcsr pinned at upload" 201
check "its pcsr: conversion timed, no kernel timed on it yet: not measured" "$PYTHON" -c "
import json; d = json.load(open('$BODY_FILE')); p = {e['format']: e for e in d['formats']}['pcsr']
assert p['conversion_ms'] > 0 and p['best_ms'] is None and p['payback'] is None, p
assert p['payback_reason'] == 'not measured', p"

stop_spmvd
SPMVD_STATE=
if ! start_spmvd --devices none --tune-max-runs 40 --auto-build eager; then
  not_ok "spmvd starts with auto_build eager" "$(tail -5 "$SPMVD_LOG")"; done_testing; exit; fi
req POST "/v1/matrices?generate=poisson2d&n=100&device=cpu"
id=$(jget 'd["id"]'); rows=$(jget 'd["rows"]')
x=$("$PYTHON" -c "print(','.join(str(1 + (j % 7) / 8) for j in range($rows)))")
spmv '"kernel":"auto"'
check "auto_build eager: the first auto call defers nothing" "$PYTHON" -c "
import json; a = json.load(open('$BODY_FILE'))['auto']
assert a['source'] == 'tuned' and a['deferred'] == [], a"

done_testing
