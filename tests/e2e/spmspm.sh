#!/usr/bin/env bash
# spmspm.sh — end to end: POST /v1/matrices/{a}/spmspm against a real spmvd.
#
# A is a real matrix of ../shared/matrices/real/ (square, and the
# rectangular lp_afiro), B a random thin matrix written here (seeded:
# SPMV_SEED repeats it) with empty rows, uploaded like any matrix. C comes
# back as COO JSON and as binary triplets and is compared with a product
# python computes from the two Matrix Market files (structure exactly,
# values to 1e-12 of max |C|); every CPU SpMSpM kernel the daemon lists
# is run, and the GPU ones where there is a GPU and A is on it. store: true
# gives a new matrix (201, Location) that survives a restart and
# multiplies a vector like A*(B*x). Refusals: shape mismatch (422 with both
# shapes), dtype mismatch (422), an spmv kernel on /spmspm and an spmspm
# kernel on /spmv (400), no or unknown B (400, 404), unknown field (400),
# a GPU kernel for a host A (409).
. "$(dirname "$0")/lib.sh"

REAL=$MATRICES/real
[ -f "$REAL/west0067.mtx" ] || { echo "1..0 # SKIP no $REAL"; exit 0; }
SEED=${SPMV_SEED:-$$}
diag "seed $SEED (SPMV_SEED=$SEED repeats this run)"
W=$E2E_TMP/w; mkdir -p "$W"

# thin_mtx FILE ROWS COLS [float]: a random sparse ROWS x COLS real general matrix.
thin_mtx() {
  "$PYTHON" - "$@" "$SEED" <<'EOF'
import random, sys
path, rows, cols, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[-1])
rnd = random.Random(seed * 1000003 + rows * 7 + cols)
ent = []
for i in range(rows):
    if rnd.random() < 0.2:
        continue  # empty rows of B: empty columns of the product's contributions
    for j in sorted(rnd.sample(range(cols), min(cols, rnd.randint(1, 4)))):
        ent.append((i + 1, j + 1, rnd.uniform(-1, 1)))
with open(path, "w") as f:
    f.write("%%%%MatrixMarket matrix coordinate real general\n%d %d %d\n" % (rows, cols, len(ent)))
    for i, j, v in ent:
        f.write("%d %d %.17g\n" % (i, j, v))
EOF
}

# check_product A.mtx B.mtx ANSWER.json: C of the answer against python's A*B.
CHECK_PY='
import json, sys
def read(path):
    with open(path) as f:
        head = f.readline().lower().split()
        sym = head[4] if len(head) > 4 else "general"
        line = f.readline()
        while line.startswith("%"):
            line = f.readline()
        r, c, n = map(int, line.split())
        rows = {}
        for line in f:
            p = line.split()
            if not p:
                continue
            i, j = int(p[0]) - 1, int(p[1]) - 1
            v = float(p[2]) if len(p) > 2 else 1.0
            rows.setdefault(i, {}).setdefault(j, 0.0)
            rows[i][j] += v
            if sym != "general" and i != j:
                rows.setdefault(j, {}).setdefault(i, 0.0)
                rows[j][i] += -v if sym == "skew-symmetric" else v
        return r, c, rows
ar, ac, a = read(sys.argv[1]); br, bc, b = read(sys.argv[2]); d = json.load(open(sys.argv[3]))
want = {}
for i, row in a.items():
    for k, av in row.items():
        for j, bv in b.get(k, {}).items():
            want[(i, j)] = want.get((i, j), 0.0) + av * bv
keys = sorted(want)
assert (d["rows"], d["cols"], d["nnz"]) == (ar, bc, len(keys)), (d["rows"], d["cols"], d["nnz"], ar, bc, len(keys))
got = list(zip(d["row"], d["col"]))
assert got == keys, "structure differs"
scale = max([abs(v) for v in want.values()] + [1e-300])
err = max([abs(v - want[k]) / scale for k, v in zip(keys, d["val"])] + [0])
assert err <= float(sys.argv[4]), err
'
check_product() { "$PYTHON" -c "$CHECK_PY" "$1" "$2" "$3" "${4:-1e-12}"; }

if ! start_spmvd; then not_ok "spmvd starts" "$(tail -5 "$SPMVD_LOG")"; done_testing; exit; fi
ok "spmvd starts and is ready on $SPMVD_URL"

req GET /v1/kernels
SP_CPU=$(jget '" ".join(k["name"] for k in d["kernels"] if k["op"] == "spmspm" and k["device"] == "cpu" and k["available"])')
SP_GPU=$(jget '" ".join(k["name"] for k in d["kernels"] if k["op"] == "spmspm" and k["device"] == "gpu" and k["available"])')
check "the CPU SpMSpM kernels are listed available, the study's hash baseline among them ($SP_CPU)" \
  [ "$(echo $SP_CPU | wc -w):$(echo " $SP_CPU " | grep -c ' cpu.spmspm.hash ')" = "3:1" ]
check "nine SpMSpM kernels are listed with op spmspm" \
  jget '1 / (sum(k["op"] == "spmspm" for k in d["kernels"]) == 9)'
check "thread_row and block_row list output (default 1, atomic), warp_nnz accumulate (default 1, shared)" \
  jget '1 / all([p["name"], p["default"], p["min"], p["max"]] == [n, 1, 1, 2] for k in d["kernels"] for p in k["params"] for n in ["output", "accumulate"] if p["name"] == n and k["name"] in ("gpu.spmspm.thread_row", "gpu.spmspm.block_row", "gpu.spmspm.warp_nnz")) and 3 == sum(p["name"] in ("output", "accumulate") for k in d["kernels"] for p in k["params"])'

# ------------------------------------------------------------- operands
A=$REAL/west0067.mtx; R=$REAL/lp_afiro.mtx
thin_mtx "$W/b8.mtx" 67 8; thin_mtx "$W/b1.mtx" 67 1; thin_mtx "$W/b300.mtx" 67 300; thin_mtx "$W/br.mtx" 51 32
thin_mtx "$W/bbad.mtx" 51 4
upload_raw "$A"; A_ID=$MATRIX_ID
upload_raw "$R"; R_ID=$MATRIX_ID
upload_raw "$W/b8.mtx"; B8=$MATRIX_ID
upload_raw "$W/b1.mtx"; B1=$MATRIX_ID
upload_raw "$W/b300.mtx"; B300=$MATRIX_ID
upload_raw "$W/br.mtx"; BR=$MATRIX_ID
upload_raw "$W/bbad.mtx"; BBAD=$MATRIX_ID
upload_raw "$W/b8.mtx" "dtype=float32"; B8F=$MATRIX_ID
check "operands uploaded" [ -n "$A_ID" ] && [ -n "$BBAD" ] && [ -n "$B8F" ]

spmspm() { # A_ID BODY [CURL ARGS]
  local a=$1 body=$2; shift 2
  req POST "/v1/matrices/$a/spmspm" -H 'Content-Type: application/json' -d "$body" "$@"
}

# ------------------------------------------------------------- products
for k in $SP_CPU; do
  for b in "b1.mtx $B1" "b8.mtx $B8" "b300.mtx $B300"; do
    set -- $b
    spmspm "$A_ID" "{\"b\":\"$2\",\"kernel\":\"$k\",\"runs\":3,\"warmup\":1}"
    if [ "$CODE" = 200 ] && check_product "$A" "$W/$1" "$BODY_FILE" 2>"$W/err"; then
      ok "$k: west0067 x $1 equals the product computed here"
    else
      not_ok "$k: west0067 x $1" "HTTP $CODE $(head -c 300 "$BODY_FILE") $(tail -1 "$W/err")"
    fi
  done
  spmspm "$R_ID" "{\"b\":\"$BR\",\"kernel\":\"$k\"}"
  if [ "$CODE" = 200 ] && check_product "$R" "$W/br.mtx" "$BODY_FILE" 2>"$W/err"; then
    ok "$k: lp_afiro (27 x 51) x B (51 x 32), rectangular"
  else
    not_ok "$k: lp_afiro x B" "HTTP $CODE $(head -c 300 "$BODY_FILE") $(tail -1 "$W/err")"
  fi
done

spmspm "$A_ID" "{\"b\":\"$B8\",\"kernel\":\"cpu.spmspm.omp\",\"runs\":5,\"verify\":true,\"threads\":2}"
cp "$BODY_FILE" "$W/json.answer"
# (gflops and median_ms carry 6 significant digits each: docs/api.md, "Numbers")
check "stats: runs, GFLOPS from the multiply-adds, verify against cpu.spmspm.serial" jget '1 / (
  d["stats"]["runs"] == 5 and d["params"]["threads"] == 2 and d["verify"]["max_rel_err"] <= 1e-12 and
  abs(d["stats"]["gflops"] - 2 * d["madds"] / (d["stats"]["median_ms"] * 1e6)) <= 1e-5 * d["stats"]["gflops"] and
  d["madds"] >= d["nnz"] > 0 and d["kernel"] == "cpu.spmspm.omp" and d["b"] == "'"$B8"'")'
spmspm "$A_ID" "{\"b\":\"$B8\",\"kernel\":\"cpu.spmspm.serial\"}" -H 'Accept: application/octet-stream'
cp "$BODY_FILE" "$W/bin.answer"
header X-SpMV-Stats >"$W/bin.stats"
check "binary answer: packed (int32 row, int32 col, float64) triplets equal the JSON answer" "$PYTHON" -c '
import json, struct, sys
d = json.load(open(sys.argv[1])); raw = open(sys.argv[2], "rb").read(); h = json.loads(open(sys.argv[3]).read())
assert h["shape"]["nnz"] == d["nnz"] and h["dtype"] == "float64" and len(raw) == 16 * d["nnz"]
t = [struct.unpack_from("<iid", raw, 16 * e) for e in range(d["nnz"])]
assert [(r, c) for r, c, v in t] == list(zip(d["row"], d["col"]))
assert max(abs(v - w) for (r, c, v), w in zip(t, d["val"])) <= 1e-12 * max(map(abs, d["val"]))
' "$W/json.answer" "$W/bin.answer" "$W/bin.stats"

# ------------------------------------------------------------- spmvctl
if [ -x "$BUILD_DIR/spmvctl" ]; then
  CTL=("$BUILD_DIR/spmvctl" --url "$SPMVD_URL")
  "${CTL[@]}" spmspm "$A_ID" "$B8" --kernel cpu.spmspm.omp --c-out "$W/c.mtx" >/dev/null 2>"$W/err"
  check "spmvctl spmspm --c-out writes C as Matrix Market, equal to the JSON answer" "$PYTHON" -c '
import json, sys
d = json.load(open(sys.argv[1])); lines = open(sys.argv[2]).read().split("\n")
assert lines[1].split() == [str(d["rows"]), str(d["cols"]), str(d["nnz"])]
e = [l.split() for l in lines[2:] if l]
assert [(int(r) - 1, int(c) - 1) for r, c, v in e] == list(zip(d["row"], d["col"]))
assert all(float(v) == w for (r, c, v), w in zip(e, d["val"]))
' "$W/json.answer" "$W/c.mtx"
  "${CTL[@]}" --json spmspm "$A_ID" "$B8" --store --runs 2 >"$W/ctl.json" 2>"$W/err"
  check "spmvctl spmspm --store prints the new matrix's id" jget '1 / (len(d["stored"]) == 36 and d["stats"]["runs"] == 2)' "$W/ctl.json"
  "${CTL[@]}" spmspm "$A_ID" "$BBAD" >/dev/null 2>"$W/err"
  rc=$?
  check "spmvctl spmspm on mismatched shapes exits 2 (refused)" [ "$rc" = 2 ]
  check "... and prints the server's message with both shapes" grep -q "67 x 67 and B is 51 x 4" "$W/err"
else
  skip "spmvctl not built"
fi

# ------------------------------------------------------------- GPU side
if [ -n "$SP_GPU" ]; then
  upload_raw "$A" "device=gpu"; AG=$MATRIX_ID
  for k in $SP_GPU; do
    spmspm "$AG" "{\"b\":\"$B300\",\"kernel\":\"$k\",\"runs\":2}"
    if [ "$CODE" = 200 ] && check_product "$A" "$W/b300.mtx" "$BODY_FILE" 1e-11 2>"$W/err"; then
      ok "$k: west0067 on the GPU x B on the host (copied for the call)"
    else
      not_ok "$k on the GPU" "HTTP $CODE $(head -c 300 "$BODY_FILE") $(tail -1 "$W/err")"
    fi
  done
  for kp in "gpu.spmspm.thread_row output 2" "gpu.spmspm.block_row output 2" "gpu.spmspm.warp_nnz accumulate 2"; do
    read -r kn pn pv <<<"$kp"
    spmspm "$AG" "{\"b\":\"$B300\",\"kernel\":\"$kn\",\"$pn\":$pv,\"runs\":2}"
    if [ "$CODE" = 200 ] && check_product "$A" "$W/b300.mtx" "$BODY_FILE" 1e-11 2>"$W/err"; then
      ok "$kn $pn=$pv: west0067 on the GPU x B"
    else
      not_ok "$kn $pn=$pv on the GPU" "HTTP $CODE $(head -c 300 "$BODY_FILE") $(tail -1 "$W/err")"
    fi
  done
  spmspm "$AG" "{\"b\":\"$B300\",\"kernel\":\"gpu.spmspm.block_row\",\"output\":3}"
  expect_code "output 3 (1 atomic, 2 scan) is a 400" 400
  upload_raw "$W/b8.mtx" "device=gpu"; BG=$MATRIX_ID
  spmspm "$AG" "{\"b\":\"$BG\",\"kernel\":\"gpu.spmspm.warp_nnz\",\"verify\":true}"
  if [ "$CODE" = 200 ] && check_product "$A" "$W/b8.mtx" "$BODY_FILE" 1e-11 2>"$W/err"; then
    ok "gpu.spmspm.warp_nnz: A and B both resident on the GPU"
  else
    not_ok "A and B on the GPU" "HTTP $CODE $(head -c 300 "$BODY_FILE") $(tail -1 "$W/err")"
  fi
  spmspm "$AG" "{\"b\":\"$BG\",\"kernel\":\"cusparse.spgemm\",\"store\":true}"
  expect_code "store: true with a GPU A answers 201" 201
  check "the stored product of a GPU A is resident on that GPU" jget '1 / d["device"].startswith("gpu")'
else
  skip "GPU SpMSpM kernels: none available here"
  spmspm "$A_ID" "{\"b\":\"$B8\",\"kernel\":\"gpu.spmspm.block_row\"}"
  expect_code "a GPU kernel without a GPU is a 409" 409
fi

# -------------------------------------------------------------- store
spmspm "$A_ID" "{\"b\":\"$B8\",\"kernel\":\"cpu.spmspm.serial\",\"store\":true}"
expect_code "store: true answers 201" 201
C_ID=$(header Location | sed 's|.*/||')
cp "$BODY_FILE" "$W/stored.json"
check "the descriptor of C: 67 x 8, float64, product stats, Location" jget '1 / (
  d["rows"] == 67 and d["cols"] == 8 and d["dtype"] == "float64" and d["product"]["stats"]["runs"] == 1 and
  d["id"] == "'"$C_ID"'" and d["product"]["a"] == "'"$A_ID"'")'
stop_spmvd >/dev/null
start_spmvd || not_ok "spmvd restarts on the same state" "$(tail -5 "$SPMVD_LOG")"
req GET "/v1/matrices/$C_ID"
expect_code "C survives a restart" 200
X=$("$PYTHON" -c 'print([1 + (j % 7) / 8 for j in range(8)])')
req POST "/v1/matrices/$C_ID/spmv" -H 'Content-Type: application/json' -d "{\"x\":$X}"
cp "$BODY_FILE" "$W/cx.json"
spmspm "$A_ID" "{\"b\":\"$B8\"}"
check "C*x from the stored C equals (A*B)*x from the returned C" "$PYTHON" -c '
import json, sys
y = json.load(open(sys.argv[1]))["y"]; d = json.load(open(sys.argv[2]))
x = [1 + (j % 7) / 8 for j in range(8)]; z = [0.0] * d["rows"]
for r, c, v in zip(d["row"], d["col"], d["val"]):
    z[r] += v * x[c]
assert max(abs(a - b) for a, b in zip(y, z)) <= 1e-12 * max(map(abs, z))
' "$W/cx.json" "$BODY_FILE"

# ------------------------------------------------------------ refusals
spmspm "$A_ID" "{\"b\":\"$BBAD\"}"
expect_code "A 67 x 67 times B 51 x 4 is a 422" 422
check "the 422 names both shapes" jget '1 / ("67 x 67" in d["error"]["message"] and "51 x 4" in d["error"]["message"])'
spmspm "$A_ID" "{\"b\":\"$B8F\"}"
expect_code "float64 A times float32 B is a 422" 422
spmspm "$A_ID" "{\"b\":\"$B8\",\"kernel\":\"cpu.csr.omp\"}"
expect_code "an spmv kernel on /spmspm is a 400" 400
req POST "/v1/matrices/$A_ID/spmv" -H 'Content-Type: application/json' \
  -d "{\"kernel\":\"cpu.spmspm.omp\",\"x\":$("$PYTHON" -c 'print([1.0] * 67)')}"
expect_code "an spmspm kernel on /spmv is a 400" 400
spmspm "$A_ID" '{"kernel":"cpu.spmspm.omp"}'
expect_code "no b is a 400" 400
spmspm "$A_ID" '{"b":"00000000-0000-4000-8000-000000000000"}'
expect_code "an unknown b is a 404" 404
spmspm "$A_ID" "{\"b\":\"$B8\",\"x\":[1]}"
expect_code "an unknown field is a 400" 400
spmspm "$A_ID" "{\"b\":\"$B8\",\"kernel\":\"cpu.spmspm.omp\",\"block_size\":64}"
expect_code "a parameter the kernel does not take is a 400" 400
spmspm "$A_ID" "{\"b\":\"$B8\",\"kernel\":\"cpu.spmspm.serial\",\"output\":2}"
expect_code "output (a GPU SpMSpM kernel's parameter) to a CPU kernel is a 400" 400
req GET "/v1/matrices/$A_ID/spmspm"
expect_code "GET /spmspm is a 405" 405

stop_spmvd >/dev/null
done_testing
