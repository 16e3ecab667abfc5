#!/usr/bin/env bash
# vectors.sh — resident vectors, spmv with resident operands, /v1/ops and
# solve over HTTP, on a CPU daemon (the GPU paths run in the bundle's
# api_test_vectors.py): values checked against products computed here with
# python3 (seeded from $RANDOM, printed), and every bad input answered with
# its 4xx while nothing changes: unknown, deleted and expired ids, lengths,
# dtypes, k, aliasing, limits (max_vectors, max_vector_bytes, max_ops_steps,
# max_solve_iterations), non-finite scalars and tol, a zero diagonal for
# Jacobi, a breakdown (200 with the reason), an async solve cancelled by
# DELETE /v1/jobs/{id}, and the vector gauges in /metrics and /v1/info.
. "$(dirname "$0")/lib.sh"

SEED=${SPMV_SEED:-$RANDOM}
diag "seed $SEED"
start_spmvd --max-vectors 6 --max-vector-bytes 200000 --max-ops-steps 8 --max-solve-iterations 5000 \
  --vector-ttl-s 8 || { not_ok "spmvd starts" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
ok "spmvd starts with small vector limits"

body_has() { grep -q -- "$1" "$BODY_FILE"; }
expect() {
  if [ "$CODE" = "$2" ] && body_has "$3"; then ok "$1"
  else not_ok "$1" "expected HTTP $2 naming \"$3\", got $CODE" "$(head -c 300 "$BODY_FILE")"; fi
}
jpost() { req POST "$1" -H 'Content-Type: application/json' -d "$2"; }
vid() { jget 'd["id"]'; }

# A 30 x 30 SPD matrix (tridiagonal, dominant diagonal), written here.
"$PYTHON" - "$E2E_TMP/spd.mtx" "$SEED" <<'EOF'
import random, sys
random.seed(int(sys.argv[2]))
n = 30
ent = []
for i in range(n):
    ent.append((i, i, 3.0 + random.random()))
    if i + 1 < n:
        v = -random.random()
        ent += [(i, i + 1, v), (i + 1, i, v)]
with open(sys.argv[1], "w") as f:
    f.write("%%%%MatrixMarket matrix coordinate real general\n%d %d %d\n" % (n, n, len(ent)))
    for i, j, v in ent:
        f.write("%d %d %.17g\n" % (i + 1, j + 1, v))
EOF
upload_raw "$E2E_TMP/spd.mtx" "device=cpu"
expect_code "the SPD matrix uploads" 201
A=$MATRIX_ID
upload_raw "$MATRICES/real/karate.mtx" "device=cpu&dtype=float32"
expect_code "a float32 matrix uploads" 201
F=$MATRIX_ID

# python3 helpers over the matrix file: A x, Aᵀ x
prod() { "$PYTHON" - "$E2E_TMP/spd.mtx" "$@" <<'EOF'
import json, sys
lines = [l for l in open(sys.argv[1]) if not l.startswith("%")]
n = int(lines[0].split()[0])
ent = [(int(a) - 1, int(b) - 1, float(v)) for a, b, v in (l.split() for l in lines[1:])]
x = json.loads(sys.argv[2]); alpha = float(sys.argv[3]); beta = float(sys.argv[4]); y0 = json.loads(sys.argv[5])
t = sys.argv[6] == "t"
y = [0.0] * n
for i, j, v in ent:
    if t: y[j] += v * x[i]
    else: y[i] += v * x[j]
print(json.dumps([alpha * a + beta * b for a, b in zip(y, y0)]))
EOF
}
close() { "$PYTHON" -c 'import json,sys; a=json.loads(sys.argv[1]); b=json.loads(sys.argv[2]); s=max(1e-300,max(abs(v) for v in b)); sys.exit(0 if len(a)==len(b) and max(abs(p-q) for p,q in zip(a,b))<=1e-12*s else 1)' "$1" "$2"; }
rand30() { "$PYTHON" -c 'import json,random,sys; random.seed(int(sys.argv[1])); print(json.dumps([random.uniform(-1,1) for _ in range(30)]))' "$1"; }
X=$(rand30 $SEED); Y0=$(rand30 $((SEED + 1)))

# ------------------------------------------------------------ create, read
jpost /v1/vectors "{\"like\":\"$A\",\"values\":$X}"
expect "POST /v1/vectors with values like the matrix: 201" 201 '"n":30'
VX=$(vid)
check "Location names the vector" grep -qi "location: /v1/vectors/$VX" "$HDR_FILE"
req GET "/v1/vectors/$VX"
check "GET returns the values exactly" "$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["values"]==json.loads(sys.argv[2]) else 1)' "$BODY_FILE" "$X"
"$PYTHON" -c 'import json,struct,sys; v=json.loads(sys.argv[1]); sys.stdout.buffer.write(struct.pack("<30d",*v))' "$Y0" >"$E2E_TMP/y0.bin"
req POST "/v1/vectors?like=$A&side=rows" -H 'Content-Type: application/octet-stream' --data-binary "@$E2E_TMP/y0.bin"
expect "POST binary values: 201" 201 '"float64"'
VY=$(vid)
req GET "/v1/vectors/$VY" -H 'Accept: application/octet-stream'
check "GET binary returns the same bytes" cmp -s "$BODY_FILE" "$E2E_TMP/y0.bin"
check "the descriptor comes in X-SpMV-Vector" grep -qi "x-spmv-vector: {" "$HDR_FILE"
jpost /v1/vectors '{"n":30,"k":2,"fill":"random","seed":5,"device":"cpu"}'
expect "a random block of k = 2: 201" 201 '"k":2'
VK=$(vid)
jpost /v1/vectors '{"n":30,"k":2,"fill":"random","seed":5,"device":"cpu"}'
VK2=$(vid)
req GET "/v1/vectors/$VK"; cp "$BODY_FILE" "$E2E_TMP/k1.json"
req GET "/v1/vectors/$VK2"
check "the same seed gives the same values" "$PYTHON" -c 'import json,sys; a=json.load(open(sys.argv[1]))["values"]; b=json.load(open(sys.argv[2]))["values"]; sys.exit(0 if a==b and a[0]!=a[1] else 1)' "$E2E_TMP/k1.json" "$BODY_FILE"
req GET /v1/vectors
check "GET /v1/vectors lists them" "$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if len(d["vectors"])==4 else 1)' "$BODY_FILE"

# ------------------------------------------------------- spmv, resident
ALPHA=0.75; BETA=-0.5
jpost "/v1/matrices/$A/spmv" "{\"kernel\":\"cpu.csr.omp\",\"x\":{\"vector\":\"$VX\"},\"y\":{\"vector\":\"$VY\"},\"alpha\":$ALPHA,\"beta\":$BETA,\"runs\":3}"
expect "spmv with x and y resident, alpha and beta: 200" 200 '"y":{"vector"'
req GET "/v1/vectors/$VY"
GOT=$(jget 'json.dumps(d["values"])')
check "y = alpha A x + beta y, applied once (runs 3)" close "$GOT" "$(prod "$X" $ALPHA $BETA "$Y0" n)"
jpost "/v1/matrices/$A/spmv" "{\"kernel\":\"cpu.csr.serial\",\"x\":$X,\"op\":\"t\"}"
GOT=$(jget 'json.dumps(d["y"])')
check "op t with inline x equals Aᵀ x" close "$GOT" "$(prod "$X" 1 0 "$Y0" t)"
jpost "/v1/matrices/$A/spmv" "{\"kernel\":\"cpu.csr.omp\",\"x\":[$X,$Y0]}"
check "k = 2 inline: y holds 2 columns, each A x_j" "$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if len(d["y"])==2 and d["k"]==2 else 1)' "$BODY_FILE"
GOT=$(jget 'json.dumps(d["y"][1])')
check "k = 2: the second column is A y0" close "$GOT" "$(prod "$Y0" 1 0 "$Y0" n)"
jpost "/v1/matrices/$A/spmv" "{\"kernel\":\"cpu.ell.omp\",\"x\":[$X,$Y0]}"
expect "k = 2 with a one-column kernel: 400 naming the kernels that take k" 400 'cpu.csr.omp'
jpost "/v1/matrices/$A/spmv" "{\"kernel\":\"cpu.csr.omp\",\"x\":{\"vector\":\"$VX\"},\"y\":{\"vector\":\"$VX\"}}"
expect "x and y the same vector: 400" 400 'same vector'
jpost "/v1/matrices/$A/spmv" "{\"x\":$X,\"beta\":1}"
expect "beta without a resident y: 400" 400 'beta'
jpost "/v1/matrices/$F/spmv" "{\"kernel\":\"cpu.csr.omp\",\"x\":{\"vector\":\"$VX\"}}"
expect "a float64 30-vector on a float32 34x34 matrix: 400 naming both" 400 'float'
jpost "/v1/matrices/$A/spmv" "{\"kernel\":\"cpu.csr.omp\",\"x\":{\"vector\":\"00000000-0000-4000-8000-000000000000\"}}"
expect "an unknown vector id: 404" 404 'vector_not_found'
jpost "/v1/matrices/$A/spmv" "{\"kernel\":\"cpu.csr.omp\",\"x\":{\"vector\":\"$VX\"},\"alpha\":\"NaN\"}"
expect "a non-finite alpha: 400" 400 'alpha'

# ------------------------------------------------------------ limits
jpost /v1/vectors '{"n":30000,"fill":1,"device":"cpu"}'
expect "a vector over max_vector_bytes: 507 naming the limit" 507 'max_vector_bytes'
jpost /v1/vectors '{"n":10,"fill":1,"device":"cpu"}'; V5=$(vid)
jpost /v1/vectors '{"n":10,"fill":1,"device":"cpu"}'; V6=$(vid)
jpost /v1/vectors '{"n":10,"fill":1,"device":"cpu"}'
expect "a seventh vector: 507 naming max_vectors" 507 'max_vectors'
req DELETE "/v1/vectors/$V6"
expect_code "DELETE: 204" 204
req GET "/v1/vectors/$V6"
expect "a deleted vector: 404" 404 'vector_not_found'
req DELETE "/v1/vectors/$V5"
jpost /v1/vectors "{\"like\":\"$A\",\"values\":[1,2,3]}"
expect "values of the wrong length for like: 400" 400 'shape_mismatch'
jpost /v1/vectors '{"n":5,"fill":"lots","device":"cpu"}'
expect "a fill that is not a number: 400" 400 'fill'
jpost /v1/vectors '{"n":5,"fill":1,"device":"gpu7"}'
check "a device that does not exist: 4xx" [ "${CODE:0:1}" = 4 ]
req PUT "/v1/vectors/$VX" -H 'Content-Type: application/json' -d '[1,2]'
expect "PUT of the wrong length: 400" 400 'shape_mismatch'
req GET "/v1/vectors/$VX"
check "the failed PUT changed nothing" "$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["values"]==json.loads(sys.argv[2]) else 1)' "$BODY_FILE" "$X"

# ------------------------------------------------------------ ops
jpost /v1/vectors "{\"like\":\"$A\",\"side\":\"rows\",\"fill\":0}"; VQ=$(vid)
jpost /v1/ops "{\"steps\":[{\"op\":\"spmv\",\"matrix\":\"$A\",\"x\":\"$VX\",\"y\":\"$VQ\",\"kernel\":\"cpu.csr.serial\"},{\"op\":\"dot\",\"x\":\"$VX\",\"y\":\"$VQ\",\"as\":\"xAx\"},{\"op\":\"nrm2\",\"x\":\"$VQ\",\"as\":\"n\"}]}"
expect "ops spmv, dot, nrm2: 200 with named results" 200 '"xAx"'
check "dot and nrm2 match python" "$PYTHON" -c '
import json,math,sys
d=json.load(open(sys.argv[1])); x=json.loads(sys.argv[2]); ax=json.loads(sys.argv[3])
xax=sum(a*b for a,b in zip(x,ax)); n=math.sqrt(sum(a*a for a in ax))
sys.exit(0 if abs(d["results"]["xAx"]-xax)<=1e-12*abs(xax) and abs(d["results"]["n"]-n)<=1e-12*n and len(d["steps"])==3 else 1)' "$BODY_FILE" "$X" "$(prod "$X" 1 0 "$Y0" n)"
jpost /v1/ops "{\"steps\":[{\"op\":\"fill\",\"x\":\"$VQ\",\"value\":2},{\"op\":\"scal\",\"alpha\":3,\"x\":\"$VQ\"},{\"op\":\"axpby\",\"alpha\":1,\"x\":\"$VQ\",\"beta\":0,\"y\":\"$VY\"},{\"op\":\"axpy\",\"alpha\":-1,\"x\":\"$VQ\",\"y\":\"$VY\"},{\"op\":\"copy\",\"x\":\"$VY\",\"y\":\"$VQ\"},{\"op\":\"nrm2\",\"x\":\"$VQ\",\"as\":\"z\"}]}"
check "fill, scal, axpby, axpy, copy: 6 - 6 = 0" [ "$(jget 'd["results"]["z"]')" = "0.0" ]
jpost /v1/ops "{\"steps\":[{\"op\":\"fill\",\"x\":\"$VQ\",\"value\":9},{\"op\":\"dot\",\"x\":\"$VQ\",\"y\":\"$VK\",\"as\":\"bad\"}]}"
expect "ops with mismatched shapes: 400, and nothing ran" 400 'shape_mismatch'
req GET "/v1/vectors/$VQ"
check "the refused request did not fill" "$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if all(v==0 for v in d["values"]) else 1)' "$BODY_FILE"
jpost /v1/ops "{\"steps\":[{\"op\":\"nrm2\",\"x\":\"$VQ\",\"as\":\"a\"},{\"op\":\"nrm2\",\"x\":\"$VQ\",\"as\":\"a\"}]}"
expect "a duplicate as: 400" 400 'names steps'
jpost /v1/ops "{\"steps\":[$(printf '{"op":"scal","alpha":1,"x":"%s"},' $VQ $VQ $VQ $VQ $VQ $VQ $VQ $VQ){\"op\":\"scal\",\"alpha\":1,\"x\":\"$VQ\"}]}"
expect "9 steps over max_ops_steps 8: 400" 400 'max_ops_steps'
jpost /v1/ops '{"steps":[{"op":"launch","x":"a"}]}'
expect "an unknown op: 400" 400 'op'
jpost /v1/ops "{\"steps\":[{\"op\":\"scal\",\"alpha\":1e999,\"x\":\"$VQ\"}]}"
check "a non-finite scalar: 400" [ "$CODE" = 400 ]
jpost /v1/ops "{\"steps\":[{\"op\":\"spmv\",\"matrix\":\"$A\",\"x\":\"$VX\",\"y\":\"$VQ\",\"trans\":\"T\",\"kernel\":\"cpu.csr.serial\"}]}"
expect "ops spmv with \"trans\":\"T\" is taken as /spmv's \"op\":\"T\" is: 200" 200 '"steps"'
jpost /v1/ops "{\"steps\":[{\"op\":\"spmv\",\"matrix\":\"$A\",\"x\":\"$VX\",\"y\":\"$VQ\",\"trans\":\"x\"}]}"
expect "ops spmv with \"trans\":\"x\": 400 naming what it got" 400 'not \\"x\\"'

# ------------------------------------------------------------ error texts
req POST /v1/vectors -H 'Content-Type: application/octet-stream' --data-binary "@/dev/null"
expect "an empty binary vector: 400 naming float64 (not \"float640\")" 400 '1 column of float64 are needed'
printf '%%%%MatrixMarket matrix coordinate real general\n0 5 0\n' >"$E2E_TMP/zero-rows.mtx"
upload_raw "$E2E_TMP/zero-rows.mtx" "device=cpu"; Z=$MATRIX_ID
jpost /v1/vectors "{\"like\":\"$Z\",\"side\":\"rows\",\"fill\":1}"
expect "a fill like a 0-row matrix: 400 saying the matrix has 0 rows (not \"needs n\")" 400 'the matrix has 0 rows'
req GET "/v1/vectors/$VQ?shm=none&offset=9223372036854775808"
expect "an offset of 2^63: 400 quoting it, not a wrapped number" 400 '9223372036854775808'
req DELETE "/v1/matrices/$Z"

# ------------------------------------------------------------ solve
B=$(prod "$("$PYTHON" -c 'print([1.0]*30)')" 1 0 "$Y0" n)
for m in cg bicgstab gmres; do
  for p in none jacobi; do
    jpost "/v1/matrices/$A/solve" "{\"method\":\"$m\",\"b\":$B,\"tol\":1e-12,\"maxit\":500,\"preconditioner\":\"$p\",\"kernel\":\"cpu.csr.omp\"}"
    check "solve $m $p converges to x = 1" "$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["converged"] and max(abs(v-1) for v in d["x"])<1e-9 and d["relres"]<=1e-12 and len(d["residual_history"])==d["iterations"]+1 else 1)' "$BODY_FILE"
  done
done
jpost /v1/vectors "{\"like\":\"$A\",\"values\":$B}"; VB=$(vid)
jpost "/v1/matrices/$A/solve" "{\"b\":{\"vector\":\"$VB\"},\"x_out\":{\"vector\":\"$VQ\"},\"tol\":1e-12}"
expect "solve into a resident vector: x not in the answer" 200 '"x":{"vector"'
req GET "/v1/vectors/$VQ"
check "x_out holds x = 1" "$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if max(abs(v-1) for v in d["values"])<1e-9 else 1)' "$BODY_FILE"
jpost "/v1/matrices/$A/solve" "{\"b\":$B,\"tol\":1e-14,\"maxit\":2}"
expect "maxit 2: 200 with reason maxit" 200 '"reason":"maxit"'
jpost "/v1/matrices/$A/solve" "{\"b\":$B,\"tol\":\"NaN\"}"
expect "a non-finite tol: 400" 400 'tol'
jpost "/v1/matrices/$A/solve" "{\"b\":$B,\"maxit\":5001}"
expect "maxit over max_solve_iterations: 400" 400 'max_solve_iterations'
jpost "/v1/matrices/$A/solve" "{\"b\":[1,2,3]}"
expect "b of the wrong length: 400" 400 'shape_mismatch'
jpost "/v1/matrices/$A/solve" "{\"b\":$B,\"method\":\"qmr\"}"
expect "an unknown method: 400" 400 'method'
# -A: CG sees p·Ap < 0, a breakdown answered 200 with its value
"$PYTHON" -c 'import sys; l=open(sys.argv[1]).read().splitlines(); h=l[:2]; print("\n".join(h+["%s %s %.17g"%(a,b,-float(v)) for a,b,v in (x.split() for x in l[2:])]))' "$E2E_TMP/spd.mtx" >"$E2E_TMP/neg.mtx"
upload_raw "$E2E_TMP/neg.mtx" "device=cpu"; NEG=$MATRIX_ID
jpost "/v1/matrices/$NEG/solve" "{\"b\":$B,\"method\":\"cg\"}"
expect "CG on a negative definite matrix: 200, breakdown" 200 '"reason":"breakdown"'
check "the breakdown names p·Ap and its value" "$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if "p·Ap" in d["stop"]["detail"] and d["stop"]["value"]<0 else 1)' "$BODY_FILE"
# a zero diagonal: Jacobi refused naming the row
printf '%%%%MatrixMarket matrix coordinate real general\n3 3 4\n1 1 2\n2 3 1\n3 2 1\n3 3 2\n' >"$E2E_TMP/zd.mtx"
upload_raw "$E2E_TMP/zd.mtx" "device=cpu"; ZD=$MATRIX_ID
jpost "/v1/matrices/$ZD/solve" '{"b":[1,1,1],"preconditioner":"jacobi","method":"gmres"}'
expect "Jacobi with a zero diagonal: 400 naming row 1" 400 'row 1 '
# async + cancel: a long GMRES on the negative matrix is cancelled
jpost "/v1/matrices/$NEG/solve" "{\"b\":$B,\"method\":\"gmres\",\"restart\":1,\"tol\":3e-15,\"maxit\":5000,\"async\":true}"
expect "async solve: 202 and a job" 202 '"id"'
JOB=$(jget 'd["id"]')
req DELETE "/v1/jobs/$JOB"
DEL=$CODE
check "DELETE /v1/jobs/{id}: 202 (or 204 when it finished first)" [ "$DEL" = 202 -o "$DEL" = 204 ]
if [ "$DEL" = 204 ]; then
  req GET "/v1/jobs/$JOB"
  expect "a finished job's record is dropped by DELETE: 404" 404 'no job'
else
  for _ in $(seq 100); do req GET "/v1/jobs/$JOB"; st=$(jget 'd["state"]'); [ "$st" = running ] || [ "$st" = queued ] || break; sleep 0.1; done
  check "the cancelled solve ends done, stopped as cancelled (or finished before it saw the flag)" "$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["state"]=="done" and d["result"]["stop"]["reason"] in ("cancelled","maxit","breakdown") and d.get("cancel_requested") else 1)' "$BODY_FILE"
fi
req DELETE "/v1/jobs/00000000-0000-4000-8000-000000000000"
expect "DELETE of an unknown job: 404" 404 'no job'

# ------------------------------------------------------------ gauges, TTL
req GET /metrics
check "/metrics has spmvd_vectors{device=\"cpu\"}" grep -q 'spmvd_vectors{device="cpu"}' "$BODY_FILE"
check "/metrics has spmvd_vector_bytes" grep -q 'spmvd_vector_bytes{device="cpu"}' "$BODY_FILE"
req GET /v1/info
check "/v1/info shows the vector limits" "$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["limits"]["max_vectors"]==6 and "vectors" in d else 1)' "$BODY_FILE"
sleep 10  # vector_ttl_s 8 (long enough for a loaded 2-core CI between uses), swept by the main loop
req GET "/v1/vectors/$VX"
expect "an idle vector expires after vector_ttl_s: 404" 404 'vector_not_found'
req GET /v1/vectors
check "the listing is empty after the expiry" "$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["vectors"]==[] else 1)' "$BODY_FILE"
check "the daemon is still up" alive "$SPMVD_PID"
done_testing
