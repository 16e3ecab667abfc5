#!/usr/bin/env bash
# numerics.sh — issue 33's "numerics are honest", through the API of a CPU
# daemon: /v1/ops nrm2 of a vector holding a NaN is NaN (it was 0) and of
# one holding an infinity is Infinity; a solve on diag(NaN, NaN, NaN) and a
# solve from x0 all NaN or all Infinity stop as "breakdown: non-finite"
# with every method (they "converged" with relres 0); tol 1e-300 is 400
# naming float64's bound 2.2e-15; a b of 1e-320 is refused as too small,
# never diagnosed "not positive definite"; float32 overflow is a 422 (an
# upload with 1e39, a fill of 1e300, JSON values of 1e300 into a float32
# vector); and POST /v1/vectors refuses values that conflict with its `n`.
. "$(dirname "$0")/lib.sh"

start_spmvd || { not_ok "spmvd starts" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
ok "spmvd starts"
body_has() { grep -q -- "$1" "$BODY_FILE"; }
expect() {
  if [ "$CODE" = "$2" ] && body_has "$3"; then ok "$1"
  else not_ok "$1" "expected HTTP $2 naming \"$3\", got $CODE" "$(head -c 300 "$BODY_FILE")"; fi
}
jpost() { req POST "$1" -H 'Content-Type: application/json' -d "$2"; }

# ---------------------------------------------------------------- norms
jpost /v1/vectors '{"values":[0,0,0,0]}'; V=$(jget 'd["id"]')
req PUT "/v1/vectors/$V" -H 'Content-Type: application/json' -d '{"values":["NaN",0,0,0]}'
jpost /v1/ops "{\"steps\":[{\"op\":\"nrm2\",\"x\":\"$V\",\"as\":\"n\"},{\"op\":\"dot\",\"x\":\"$V\",\"y\":\"$V\",\"as\":\"d\"}]}"
expect "ops nrm2 of [NaN, 0, 0, 0]: NaN (fmax used to skip it: 0)" 200 '"n":"NaN"'
check "ops dot of it: NaN" body_has '"d":"NaN"'
req PUT "/v1/vectors/$V" -H 'Content-Type: application/json' -d '{"values":["Infinity",1,0,0]}'
jpost /v1/ops "{\"steps\":[{\"op\":\"nrm2\",\"x\":\"$V\",\"as\":\"n\"}]}"
expect "ops nrm2 of [Inf, 1, 0, 0]: Infinity" 200 '"n":"Infinity"'

# ---------------------------------------------------------------- solves
printf '%%%%MatrixMarket matrix coordinate real general\n3 3 3\n1 1 nan\n2 2 nan\n3 3 nan\n' >"$E2E_TMP/nan.mtx"
upload_raw "$E2E_TMP/nan.mtx" "device=cpu"; NAN3=$MATRIX_ID
req POST "/v1/matrices?generate=poisson2d&n=10&device=cpu"; P=$(jget 'd["id"]')
ONES=$("$PYTHON" -c 'print([1.0] * 100)')
nonfinite() {
  local what=$1
  if [ "$CODE" = 200 ] && jget "(not d['converged'] and d['stop']['reason'] == 'breakdown' and
       'non-finite' in d['stop']['detail']) or 1/0" >/dev/null 2>&1; then ok "$what: breakdown, non-finite"
  else not_ok "$what: breakdown, non-finite" "HTTP $CODE" "$(head -c 300 "$BODY_FILE")"; fi
}
for m in cg bicgstab gmres; do
  jpost "/v1/matrices/$NAN3/solve" "{\"method\":\"$m\",\"b\":[1,1,1],\"kernel\":\"cpu.csr.omp\"}"
  nonfinite "$m on diag(NaN, NaN, NaN)"
  for x0 in '"NaN"' '"Infinity"'; do
    X0=$("$PYTHON" -c "print('[' + ','.join(['$x0'] * 100) + ']')")
    jpost "/v1/matrices/$P/solve" "{\"method\":\"$m\",\"b\":$ONES,\"x0\":$X0,\"kernel\":\"cpu.csr.omp\"}"
    nonfinite "$m from x0 all $x0"
  done
done
jpost "/v1/matrices/$P/solve" "{\"b\":$ONES,\"tol\":1e-300}"
expect "tol 1e-300: 400 naming float64's bound" 400 'at least 2.2e-15'
TINY=$("$PYTHON" -c 'print([1e-320] * 100)')
jpost "/v1/matrices/$P/solve" "{\"b\":$TINY,\"kernel\":\"cpu.csr.omp\"}"
if [ "$CODE" != 200 ] && body_has "too small" && ! body_has "positive definite"; then
  ok "b of 1e-320: refused as too small ($CODE), not 'not positive definite'"
else not_ok "b of 1e-320: refused as too small, not 'not positive definite'" "HTTP $CODE" "$(head -c 300 "$BODY_FILE")"; fi
SMALL=$("$PYTHON" -c 'print([1e-100] * 100)')
jpost "/v1/matrices/$P/solve" "{\"b\":$SMALL,\"kernel\":\"cpu.csr.omp\"}"
check "b of 1e-100 still solves: converged" jget "d['converged'] or 1/0"

# ------------------------------------------------------- float32 overflow
printf '%%%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n2 2 1e39\n' >"$E2E_TMP/big.mtx"
upload_raw "$E2E_TMP/big.mtx" "dtype=float32"
expect "dtype=float32 upload of 1e39: 422 naming the entry and float32" 422 'entry (2, 2) = 9.99.*float32'
upload_raw "$E2E_TMP/big.mtx" "dtype=float64"
expect_code "the same as float64: 201" 201
jpost /v1/vectors '{"n":4,"dtype":"float32","fill":1e300}'
expect "a float32 fill of 1e300: 422" 422 'float32'
jpost /v1/vectors '{"dtype":"float32","values":[1,1e300]}'
expect "float32 values of 1e300: 422 naming the value" 422 'values\[1\]'
jpost /v1/vectors '{"n":4,"dtype":"float32","fill":3.4e38}'
expect_code "a float32 fill of 3.4e38 (in range): 201" 201

# ------------------------------------------------------- n and the values
jpost /v1/vectors '{"n":5,"values":[1,2,3]}'
expect "POST /v1/vectors n 5 with 3 values: 400 shape_mismatch" 400 'shape_mismatch'
jpost /v1/vectors '{"n":3,"values":[1,2,3]}'
expect_code "n 3 with 3 values: 201" 201
jpost /v1/vectors "{\"like\":\"$P\",\"n\":7,\"fill\":1}"
expect "n 7 like a 100-row matrix: 400" 400 'conflicts with `like`'
done_testing
