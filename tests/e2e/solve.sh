#!/usr/bin/env bash
# solve.sh — POST /v1/matrices/{id}/solve on a CPU daemon. First the
# daemon's CG, BiCGSTAB and GMRES, with and without Jacobi, against SciPy's
# on the shared real matrices (tests/e2e/solve_scipy.py says how they are
# compared; it needs NumPy and SciPy, which tools/bootstrap.sh installs, and
# is skipped with the reason without them). Then, in plain shell and
# Python: every method (MINRES too) on a matrix with a known solution, the binary
# answer, x0, the maxit stop and a CG breakdown (200s with their reason),
# every refusal (tol, maxit, restart, method, preconditioner, lengths,
# dtypes, a non-square matrix, unknown vectors), and an async solve whose
# job reports iteration, relres and progress, cancelled by DELETE
# /v1/jobs/{id} at its next iteration, with a second solve cancelled while
# queued behind it (never runs), then the finished record dropped (204).
. "$(dirname "$0")/lib.sh"

MAX_IT=100000
start_spmvd --max-solve-iterations $MAX_IT || { not_ok "spmvd starts" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
ok "spmvd starts"
if ! "$PYTHON" -c 'import numpy, scipy' 2>/dev/null; then
  skip "the comparison with SciPy: NumPy/SciPy are not installed (tools/bootstrap.sh installs python3-scipy)"
else
  "$PYTHON" "$(dirname "$0")/solve_scipy.py" "$SPMVD_URL" "$MATRICES/real" >"$E2E_TMP/scipy.tap" 2>&1
  relay_tap "$E2E_TMP/scipy.tap" $? solve_scipy.py
fi

# ------------------------------------------------ answers and refusals (no SciPy)
jpost() { req POST "$1" -H 'Content-Type: application/json' -d "$2"; }
expect() {
  if [ "$CODE" = "$2" ] && grep -q -- "$3" "$BODY_FILE"; then ok "$1"
  else not_ok "$1" "expected HTTP $2 naming \"$3\", got $CODE" "$(head -c 300 "$BODY_FILE")"; fi
}
# a 50 x 50 SPD tridiagonal (2, -1) and its negative; b = A·1
"$PYTHON" - "$E2E_TMP" <<'PY'
import sys
n = 50
for name, s in (("spd", 1.0), ("neg", -1.0)):
    ent = [(i, i, 2.0 * s) for i in range(n)] + [(i, i + 1, -s) for i in range(n - 1)] + [(i + 1, i, -s) for i in range(n - 1)]
    with open("%s/%s.mtx" % (sys.argv[1], name), "w") as f:
        f.write("%%%%MatrixMarket matrix coordinate real general\n%d %d %d\n" % (n, n, len(ent)))
        f.writelines("%d %d %.17g\n" % (i + 1, j + 1, v) for i, j, v in ent)
b = [1.0] + [0.0] * (n - 2) + [1.0]
open("%s/b.json" % sys.argv[1], "w").write(repr(b))
PY
B=$(cat "$E2E_TMP/b.json")
upload_raw "$E2E_TMP/spd.mtx" "device=cpu"; SPD=$MATRIX_ID
upload_raw "$E2E_TMP/neg.mtx" "device=cpu"; NEG=$MATRIX_ID
printf '%%%%MatrixMarket matrix coordinate real general\n3 2 3\n1 1 1\n2 2 1\n3 1 1\n' >"$E2E_TMP/rect.mtx"
upload_raw "$E2E_TMP/rect.mtx" "device=cpu"; RECT=$MATRIX_ID
check "the matrices upload" [ -n "$SPD" -a -n "$NEG" -a -n "$RECT" ]
for m in cg bicgstab gmres minres; do for p in none jacobi; do
  jpost "/v1/matrices/$SPD/solve" "{\"method\":\"$m\",\"preconditioner\":\"$p\",\"b\":$B,\"tol\":1e-12,\"maxit\":500,\"kernel\":\"cpu.csr.serial\"}"
  check "$m $p: x = 1 on the (2, -1) tridiagonal, relres <= tol, history of iterations + 1, fused false (the host)" "$PYTHON" -c '
import json,sys; d=json.load(open(sys.argv[1]))
sys.exit(0 if d["converged"] and d["stop"]["reason"]=="converged" and max(abs(v-1) for v in d["x"])<1e-9 and d["relres"]<=1e-12
         and d["fused"] is False
         and len(d["residual_history"])==d["iterations"]+1 and d["preconditioner"]==sys.argv[2] and d["device"]=="cpu"
         and d["kernel"]=="cpu.csr.serial" and d["spmv_calls"]>=d["iterations"] and all(k in d["time"] for k in ("total_ms","spmv_ms","vector_ms","setup_ms","queue_ms")) else 1)' "$BODY_FILE" $p
done; done
req POST "/v1/matrices/$SPD/solve" -H 'Content-Type: application/json' -H 'Accept: application/octet-stream' -d "{\"b\":$B,\"tol\":1e-12}"
check "Accept: application/octet-stream: 200, x as 50 float64 values equal to 1" "$PYTHON" -c '
import struct,sys; b=open(sys.argv[1],"rb").read(); x=struct.unpack("<50d",b) if len(b)==400 else [0]
sys.exit(0 if max(abs(v-1) for v in x)<1e-9 else 1)' "$BODY_FILE"
check "the rest comes in X-SpMV-Solve, without x" "$PYTHON" -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if d["converged"] and "x" not in d and d["method"]=="cg" else 1)' "$(header X-SpMV-Solve)"
jpost "/v1/matrices/$SPD/solve" "{\"b\":$B,\"x0\":$("$PYTHON" -c 'print([1.0]*50)'),\"tol\":1e-12}"
check "x0 = the solution: converged after 0 iterations" "$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["converged"] and d["iterations"]==0 else 1)' "$BODY_FILE"
jpost "/v1/matrices/$SPD/solve" "{\"b\":$B,\"tol\":1e-14,\"maxit\":3}"
check "maxit 3: 200, reason maxit, 3 iterations, x present" "$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if not d["converged"] and d["stop"]["reason"]=="maxit" and d["iterations"]==3 and len(d["x"])==50 else 1)' "$BODY_FILE"
jpost "/v1/matrices/$NEG/solve" "{\"b\":$B,\"method\":\"cg\"}"
check "CG on a negative definite matrix: 200, reason breakdown, a negative p·Ap in stop.value" "$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if not d["converged"] and d["stop"]["reason"]=="breakdown" and d["stop"]["value"]<0 and d["stop"]["detail"] else 1)' "$BODY_FILE"
for bad in '"tol":"NaN"' '"tol":"Infinity"' '"tol":0' '"tol":-1e-8' '"tol":1e999'; do
  jpost "/v1/matrices/$SPD/solve" "{\"b\":$B,$bad}"
  check "$bad: 400" [ "$CODE" = 400 ]
done
jpost "/v1/matrices/$SPD/solve" "{\"b\":$B,\"maxit\":$((MAX_IT + 1))}"
expect "maxit over max_solve_iterations: 400 naming the limit" 400 "max_solve_iterations"
jpost "/v1/matrices/$SPD/solve" "{\"b\":$B,\"maxit\":0}"
expect "maxit 0: 400" 400 "maxit"
jpost "/v1/matrices/$SPD/solve" "{\"b\":$B,\"method\":\"gmres\",\"restart\":1001}"
expect "restart 1001: 400 naming 1..1000" 400 "1000"
jpost "/v1/matrices/$SPD/solve" "{\"b\":$B,\"method\":\"qmr\"}"
expect "an unknown method: 400" 400 "method"
jpost "/v1/matrices/$SPD/solve" "{\"b\":$B,\"preconditioner\":\"ilu\"}"
expect "an unknown preconditioner: 400" 400 "preconditioner"
jpost "/v1/matrices/$SPD/solve" '{"b":[1,2,3]}'
expect "b of 3 values for 50 rows: 400" 400 "50"
jpost "/v1/matrices/$SPD/solve" "{\"b\":$B,\"x0\":[1]}"
expect "x0 of 1 value: 400" 400 "x0"
jpost "/v1/matrices/$SPD/solve" '{"tol":1e-8}'
expect "no b: 400" 400 "b"
jpost "/v1/matrices/$RECT/solve" '{"b":[1]}'
expect "a non-square matrix: 400 naming its shape" 400 "square"
jpost "/v1/vectors" '{"n":50,"fill":1,"dtype":"float32","device":"cpu"}'; V32=$(jget 'd["id"]')
jpost "/v1/matrices/$SPD/solve" "{\"b\":{\"vector\":\"$V32\"}}"
expect "b a float32 vector for a float64 matrix: 400 naming both" 400 "float32"
jpost "/v1/matrices/$SPD/solve" '{"b":{"vector":"00000000-0000-4000-8000-000000000000"}}'
expect "b an unknown vector: 404" 404 "vector_not_found"

# ------------------------------------------------ async: progress, cancel
# A 250 000-row 2-D Poisson matrix and CG with an unreachable tol (3e-15, just above 10 eps): seconds
# per thousand iterations, long enough to watch and cancel. A small solve
# queued behind it on the same (CPU) worker is cancelled before it runs.
"$BUILD_DIR/spmv-gen" --kind poisson2d --n 500 --out "$E2E_TMP/big.mtx" >/dev/null
upload_raw "$E2E_TMP/big.mtx" "device=cpu&formats=csr"; BIG=$MATRIX_ID
expect_code "the 250 000-row matrix uploads" 201
jpost "/v1/vectors" "{\"like\":\"$BIG\",\"fill\":\"random\",\"seed\":3}"; VB=$(jget 'd["id"]')
jpost "/v1/matrices/$BIG/solve" "{\"b\":{\"vector\":\"$VB\"},\"tol\":3e-15,\"maxit\":$MAX_IT,\"kernel\":\"cpu.csr.omp\",\"async\":true}"
expect "async solve: 202 with a job of kind solve" 202 '"kind":"solve"'
J1=$(jget 'd["id"]')
check "Location names the job" grep -qi "location: /v1/jobs/$J1" "$HDR_FILE"
jpost "/v1/matrices/$SPD/solve" "{\"b\":$B,\"async\":true,\"kernel\":\"cpu.csr.serial\"}"
J2=$(jget 'd["id"]')
req DELETE "/v1/jobs/$J2"
expect "DELETE of the queued solve: 202, cancel_requested" 202 '"cancel_requested":true'
seen=
for _ in $(seq 300); do
  req GET "/v1/jobs/$J1"
  "$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["state"]=="running" and d.get("iteration",0)>=3 else 1)' "$BODY_FILE" && { seen=1; break; }
  sleep 0.1
done
check "the running solve's job shows iteration >= 3" [ -n "$seen" ]
check "progress = iteration / maxit, relres a finite number in (0, 1.01]" "$PYTHON" -c '
import json,math,sys; d=json.load(open(sys.argv[1])); m=float(sys.argv[2])
sys.exit(0 if abs(d["progress"]-d["iteration"]/m)<=2/m and 0<d["progress"]<1 and isinstance(d["relres"],float) and 0<d["relres"]<=1.01 else 1)' "$BODY_FILE" "$MAX_IT"
IT0=$(jget 'd["iteration"]')
req DELETE "/v1/jobs/$J1"
expect "DELETE of the running solve: 202 with the job, cancel_requested" 202 '"cancel_requested":true'
wait_job "$J1" 60
check "the cancelled solve ends done with status 200, reason cancelled, the partial x" "$PYTHON" -c '
import json,sys; d=json.load(open(sys.argv[1])); r=d["result"]
sys.exit(0 if d["state"]=="done" and d["status"]==200 and r["stop"]["reason"]=="cancelled" and not r["converged"]
         and int(sys.argv[2])<=r["iterations"]<int(sys.argv[3]) and len(r.get("x",[]))==250000 else 1)' "$BODY_FILE" "$IT0" "$MAX_IT"
wait_job "$J2" 30
check "the solve cancelled while queued never ran: failed, its error says cancelled before it ran" "$PYTHON" -c '
import json,sys; d=json.load(open(sys.argv[1]))
sys.exit(0 if d["state"]=="failed" and "result" not in d and "before it ran" in d["error"]["message"] and "iteration" not in d else 1)' "$BODY_FILE"
req DELETE "/v1/jobs/$J1"
expect_code "DELETE of the finished job: 204" 204
req GET "/v1/jobs/$J1"
expect "its record is gone: 404" 404 "no job"
req DELETE "/v1/jobs/$J1"
expect "DELETE again: 404" 404 "no job"
check "the daemon is still up" alive "$SPMVD_PID"
done_testing
