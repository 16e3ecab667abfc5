#!/usr/bin/env bash
# npz.sh — SciPy .npz uploads: files written by scipy.sparse.save_npz (CSR,
# CSC and COO; compressed or not; float64, float32 and int values; int32
# and int64 indices) from the shared real matrices and from a random matrix
# drawn from $SPMV_SEED or $RANDOM (printed), uploaded raw and multipart,
# detected by their first bytes whatever their name, multiplied, and y
# compared with SciPy's A @ x; spmv-gen --npz next to its Matrix Market
# twin, in float64, float32 and mixed (the CSR archive read straight into
# the CSR, the text through the reader's COO: the same y, bit for bit; a
# value past float32's range refused alike); bad archives (truncated, an index outside the shape, indptr not
# monotone, a missing member, shape over max_rows) answered 422 naming the
# member, with nothing stored and no spool file left in the state directory.
. "$(dirname "$0")/lib.sh"

if ! "$PYTHON" -c 'import numpy, scipy' 2>/dev/null; then
  skip "SciPy is not installed (tools/bootstrap.sh installs python3-scipy)"; done_testing; exit
fi
SEED=${SPMV_SEED:-$RANDOM}
diag "seed $SEED"
start_spmvd --max-rows 100000 || { not_ok "spmvd starts" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
ok "spmvd starts"

# the archives: good ones with their expected y, bad ones
"$PYTHON" - "$E2E_TMP" "$MATRICES/real" "$SEED" <<'EOF'
import io, json, os, sys, zipfile
import numpy as np, scipy.io, scipy.sparse as sp
out, real, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = np.random.default_rng(seed)
cases = []
def add(name, A, layout, compressed, fn=None):
    A = {"csr": sp.csr_matrix, "csc": sp.csc_matrix, "coo": sp.coo_matrix}[layout](A)
    path = f"{out}/{name}.{layout}.{'z' if compressed else 's'}" + (".npz" if fn is None else fn)
    with open(path, "wb") as f:  # a file object: save_npz would append .npz to a name without it
        sp.save_npz(f, A, compressed=compressed)
    x = np.array([1 + (j % 7) / 8 for j in range(A.shape[1])])
    y = np.asarray(A.astype(np.float64) @ x).ravel()
    cases.append({"path": path, "rows": A.shape[0], "cols": A.shape[1], "x": x.tolist(), "y": y.tolist(),
                  "dtype": "float32" if A.dtype == np.float32 else "float64"})
for i, f in enumerate(["bcsstk13.mtx", "rajat01.mtx", "lp_afiro.mtx", "karate.mtx"]):
    A = scipy.io.mmread(os.path.join(real, f)).tocsr()
    for j, layout in enumerate(("csr", "csc", "coo")):
        add(f, A, layout, (i + j) % 2 == 0, None if j else ".bin")  # one of each without the .npz suffix
# random: int64 indices, float32 values, int values with duplicates (COO)
R = sp.random(700, 500, density=0.01, random_state=seed % 2**32, format="csr")
R.indices = R.indices.astype(np.int64); R.indptr = R.indptr.astype(np.int64)
add("random64", R, "csr", True)
add("random32", R.astype(np.float32), "csc", False)
n = 300
rows, cols = rng.integers(0, n, 2000), rng.integers(0, n, 2000)
D = sp.coo_matrix((rng.integers(-5, 6, 2000), (rows, cols)), shape=(n, n))
sp.save_npz(f"{out}/dups.npz", D, compressed=True)
x = np.array([1 + (j % 7) / 8 for j in range(n)])
cases.append({"path": f"{out}/dups.npz", "rows": n, "cols": n, "x": x.tolist(),
              "y": (D.tocsr().astype(np.float64) @ x).tolist(), "dtype": "float64"})
json.dump(cases, open(f"{out}/cases.json", "w"))
# bad archives
good = open(cases[0]["path"], "rb").read()
open(f"{out}/bad-truncated.npz", "wb").write(good[: len(good) // 2])
def savez(name, **arrays):
    np.savez(f"{out}/{name}", **arrays)
ip, ix, d = np.array([0, 2, 2, 4]), np.array([0, 2, 1, 4]), np.array([1.0, 2, 3, 4])
savez("bad-index.npz", format=np.array("csr"), shape=np.array([3, 5]), indptr=ip, indices=np.array([0, 2, 9, 4]), data=d)
savez("bad-indptr.npz", format=np.array("csr"), shape=np.array([3, 5]), indptr=np.array([0, 3, 2, 4]), indices=ix, data=d)
savez("bad-missing.npz", format=np.array("csr"), shape=np.array([3, 5]), indices=ix, data=d)
savez("bad-shape.npz", format=np.array("csr"), shape=np.array([200000, 5]), indptr=ip, indices=ix, data=d)
EOF
check "SciPy wrote the archives" [ -s "$E2E_TMP/cases.json" ]

ncases=$("$PYTHON" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$E2E_TMP/cases.json")
for ((i = 0; i < ncases; i++)); do
  read -r path dtype < <("$PYTHON" -c 'import json,sys; c=json.load(open(sys.argv[1]))[int(sys.argv[2])]; print(c["path"], c["dtype"])' "$E2E_TMP/cases.json" "$i")
  base=$(basename "$path")
  for how in raw multipart; do
    if [ "$how" = raw ]; then upload_raw "$path" "device=cpu&dtype=$dtype&name=$base"; else upload_multipart "$path" device=cpu "dtype=$dtype" "name=$base"; fi
    if [ "$CODE" != 201 ]; then not_ok "$base ($how) uploads" "HTTP $CODE $(head -c 300 "$BODY_FILE")"; continue; fi
    id=$MATRIX_ID
    "$PYTHON" -c 'import json,sys; c=json.load(open(sys.argv[1]))[int(sys.argv[2])]; json.dump({"kernel":"cpu.csr.serial","x":c["x"]}, open(sys.argv[3],"w"))' \
      "$E2E_TMP/cases.json" "$i" "$E2E_TMP/req.json"
    req POST "/v1/matrices/$id/spmv" -H 'Content-Type: application/json' --data-binary "@$E2E_TMP/req.json"
    if "$PYTHON" - "$E2E_TMP/cases.json" "$i" "$BODY_FILE" "$CODE" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))[int(sys.argv[2])]
if sys.argv[4] != "200":
    sys.exit(1)
y = [float(v) for v in json.load(open(sys.argv[3]))["y"]]
scale = max((abs(v) for v in c["y"]), default=1) or 1
tol = 1e-12 if c["dtype"] == "float64" else 1e-5
sys.exit(0 if len(y) == c["rows"] and max((abs(a - b) for a, b in zip(y, c["y"])), default=0) / scale <= tol else 1)
EOF
    then ok "$base ($how, $dtype): 201, y matches SciPy's A @ x"
    else not_ok "$base ($how, $dtype): y matches SciPy's A @ x" "HTTP $CODE $(head -c 200 "$BODY_FILE")"; fi
  done
done

# spmv-gen --npz against its Matrix Market twin
"$BUILD_DIR/spmv-gen" --kind powerlaw --n 3000 --per-row 6 --seed "$SEED" --npz --out "$E2E_TMP/gen.npz" >/dev/null
"$BUILD_DIR/spmv-gen" --kind powerlaw --n 3000 --per-row 6 --seed "$SEED" --out "$E2E_TMP/gen.mtx" >/dev/null
upload_raw "$E2E_TMP/gen.npz" "device=cpu&name=gen-npz"; A=$MATRIX_ID; ca=$CODE
upload_raw "$E2E_TMP/gen.mtx" "device=cpu&name=gen-mtx"; B=$MATRIX_ID; cb=$CODE
check "spmv-gen --npz and its .mtx twin upload (HTTP $ca, $cb)" [ "$ca$cb" = 201201 ]
req GET "/v1/matrices/$A"; da=$(jget '(d["rows"], d["cols"], d["nnz"])')
req GET "/v1/matrices/$B"; db=$(jget '(d["rows"], d["cols"], d["nnz"])')
check "same shape and nnz ($da, $db)" [ "$da" = "$db" ]
x=$("$PYTHON" -c 'print([((7 * j) % 11) / 5 - 1 for j in range(3000)])')
req POST "/v1/matrices/$A/spmv" -H 'Content-Type: application/json' -d "{\"kernel\":\"cpu.csr.serial\",\"x\":$x}"; cp "$BODY_FILE" "$E2E_TMP/ya.json"
req POST "/v1/matrices/$B/spmv" -H 'Content-Type: application/json' -d "{\"kernel\":\"cpu.csr.serial\",\"x\":$x}"
check "the same y, bit for bit" "$PYTHON" -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["y"] == json.load(open(sys.argv[2]))["y"] else 1)' "$E2E_TMP/ya.json" "$BODY_FILE"

check "a CSR archive is read straight into the CSR (the log says so)" grep -q "read straight into the CSR" "$SPMVD_LOG"
check "a CSC archive goes through a COO (the log says so)" grep -q "csc layout.*through a COO" "$SPMVD_LOG"

# float32 and mixed from the direct CSR and from Matrix Market: the same y, bit for bit
for dt in float32 mixed; do
  upload_raw "$E2E_TMP/gen.npz" "device=cpu&dtype=$dt&name=gen-npz-$dt"; A=$MATRIX_ID; ca=$CODE
  upload_raw "$E2E_TMP/gen.mtx" "device=cpu&dtype=$dt&name=gen-mtx-$dt"; B=$MATRIX_ID; cb=$CODE
  req POST "/v1/matrices/$A/spmv" -H 'Content-Type: application/json' -d "{\"kernel\":\"cpu.csr.serial\",\"x\":$x}"; cp "$BODY_FILE" "$E2E_TMP/ya.json"
  req POST "/v1/matrices/$B/spmv" -H 'Content-Type: application/json' -d "{\"kernel\":\"cpu.csr.serial\",\"x\":$x}"
  check "dtype $dt: the .npz and its .mtx twin upload (HTTP $ca, $cb) and give the same y, bit for bit" \
    "$PYTHON" -c 'import json,sys; sys.exit(0 if sys.argv[3] == "201201" and json.load(open(sys.argv[1]))["y"] == json.load(open(sys.argv[2]))["y"] else 1)' "$E2E_TMP/ya.json" "$BODY_FILE" "$ca$cb"
done
# mixed: a value past float32's range is refused the same way from either format
printf '%%%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n2 2 3.5e38\n' >"$E2E_TMP/big.mtx"
"$PYTHON" -c 'import sys, numpy as np, scipy.sparse as sp; sp.save_npz(sys.argv[1], sp.csr_matrix(np.array([[1.0, 0], [0, 3.5e38]])), compressed=False)' "$E2E_TMP/big.npz"
for f in big.mtx big.npz; do
  upload_raw "$E2E_TMP/$f" "device=cpu&dtype=mixed"
  if [ "$CODE" = 422 ] && grep -q "entry (2, 2) = 3.5e+38 is outside float32's range" "$BODY_FILE"; then
    ok "dtype mixed, $f: a value past float32's range is answered 422 naming entry and limit"
  else not_ok "dtype mixed, $f: a value past float32's range is answered 422 naming entry and limit" "HTTP $CODE $(head -c 300 "$BODY_FILE")"; fi
done

# bad archives: 422 naming the member, nothing stored, no spool file left
req GET /v1/matrices; before=$(jget 'd["count"]')
for bad in "truncated:not a readable zip archive" "index:indices.npy: entry 2 is 9, outside 0..4" \
           "indptr:indptr.npy: entry 2 is 2" "missing:indptr.npy: missing" "shape:over the limit of 100000 rows"; do
  name=${bad%%:*}; want=${bad#*:}
  upload_raw "$E2E_TMP/bad-$name.npz" "device=cpu"
  if [ "$CODE" = 422 ] && grep -q -- "$want" "$BODY_FILE"; then ok "bad .npz ($name): 422 naming \"$want\""
  else not_ok "bad .npz ($name): 422 naming \"$want\"" "HTTP $CODE $(head -c 300 "$BODY_FILE")"; fi
done
req GET /v1/matrices
check "nothing stored by the bad uploads ($before matrices)" jget "(d['count'] == $before) or 1/0"
check "no spool file left in the state directory" [ -z "$(ls -A "$SPMVD_STATE" | grep upload)" ]
check "the daemon is still up" alive "$SPMVD_PID"
done_testing
