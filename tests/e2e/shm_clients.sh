#!/usr/bin/env bash
# shm_clients.sh — the clients' side of shared-memory regions (/v1/shm) against a live daemon.
#
# Starts spmvd with allow_shm (--allow-shm true) and one without, then:
#   - runs $BUILD/tests/e2e/shm_calls (every libspmvclient shm call, its
#     products checked against y computed in C from a random matrix, and
#     the refusals: 404, 400, 409, 410, 403 from the daemon without
#     allow_shm);
#   - drives spmvctl shm register/list/rm and spmv --x-shm/--y-shm, with
#     y read back from the object and compared with A·x computed here in
#     python3 from the uploaded Matrix Market file, and their exit codes;
#     and solve --b-shm/--x-shm, x checked by its true residual;
#   - runs the docs' example clients/examples/shm.c and checks that
#     docs/client.md quotes it verbatim.
# A daemon that does not take allow_shm (it predates /v1/shm) skips the
# suite. Objects live in /dev/shm under names holding this shell's pid and
# are removed at exit. Speaks TAP; random inputs come from a printed seed
# (SPMV_SEED repeats it).
set -u
ROOT=${SPMV_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${BUILD:-build}
cd "$ROOT" || exit 1
. tests/e2e/lib.sh

B=$BUILD_DIR
SPMVCTL=$B/spmvctl
CALLS=$B/tests/e2e/shm_calls
EXAMPLE=$B/examples/shm
for bin in "$SPMVCTL" "$CALLS" "$EXAMPLE"; do
  if [ ! -x "$bin" ]; then skip "$bin not built"; done_testing; exit; fi
done
if [ ! -d /dev/shm ] || [ ! -w /dev/shm ]; then skip "no writable /dev/shm on this host"; done_testing; exit; fi

W=$E2E_TMP/shm
mkdir -p "$W"
OBJ=spmvd-e2e-$$
trap 'rm -f /dev/shm/$OBJ /dev/shm/$OBJ-*; cleanup' EXIT
SEED=${SPMV_SEED:-$RANDOM}
diag "seed $SEED (SPMV_SEED=$SEED repeats it)"
diag_file() { sed 's/^/#   /' "$1"; }

if ! start_spmvd --allow-shm true; then
  if grep -qi 'allow.shm' "$SPMVD_LOG"; then
    skip "this spmvd does not take allow_shm (no /v1/shm yet): $(head -c 200 "$SPMVD_LOG")"
  else
    not_ok "spmvd --allow-shm true started"; diag_file "$SPMVD_LOG"
  fi
  done_testing; exit
fi
URL=$SPMVD_URL
ok "spmvd --allow-shm true started"
SPMVD_STATE= start_spmvd || { not_ok "a second spmvd (without allow_shm) started"; diag_file "$SPMVD_LOG"; }
URL_OFF=$SPMVD_URL
unset SPMV_TOKEN

# ---------------------------------------------------------- library calls
SPMV_SEED=$SEED "$CALLS" "$URL" "$URL_OFF" >"$W/calls.tap" 2>"$W/calls.err"
relay_tap "$W/calls.tap" $? "shm_calls"
[ -s "$W/calls.err" ] && diag_file "$W/calls.err"

# ---------------------------------------------------------------- spmvctl
ctl() { "$SPMVCTL" --url "$URL" "$@"; }
expect_rc() { # WANT DESC CMD...
  local want=$1 what=$2; shift 2
  "$@" >"$W/out" 2>"$W/err"
  local rc=$?
  if [ "$rc" -eq "$want" ]; then ok "$what"; else not_ok "$what" "exit $rc, wanted $want: $*"; diag_file "$W/err"; fi
}

# shm_tool.py: writes x into the object, reads y back, and compares it with
# A·x from the Matrix Market file (plain python: an independent reference).
cat >"$W/shm_tool.py" <<'EOF'
import random, struct, sys
def read(path):
    with open(path) as f:
        f.readline()
        for line in f:
            if line.strip() and not line.startswith("%"):
                rows, cols, _ = map(int, line.split()); break
        ents = [(int(t[0]) - 1, int(t[1]) - 1, float(t[2])) for t in (l.split() for l in f) if t]
    return rows, cols, ents
def pair(shm, n0, n1, path=None):
    # the object's first n0 values, and the n1 after them (or the file's values)
    data = open(shm, "rb").read()
    second = [float(l) for l in open(path) if l.strip()] if path else struct.unpack_from("<%dd" % n1, data, 8 * n0)
    return struct.unpack_from("<%dd" % n0, data, 0), second
cmd = sys.argv[1]
if cmd == "matrix":          # matrix PATH ROWS COLS SEED
    path, rows, cols, seed = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    rnd = random.Random(seed); ents = {}
    for i in range(rows):
        for _ in range(rnd.randint(1, 6)): ents[(i, rnd.randrange(cols))] = rnd.uniform(-1, 1)
    with open(path, "w") as f:
        f.write("%%%%MatrixMarket matrix coordinate real general\n%d %d %d\n" % (rows, cols, len(ents)))
        for (i, j), v in sorted(ents.items()): f.write("%d %d %.17g\n" % (i + 1, j + 1, v))
elif cmd == "object":        # object SHMPATH MTX SEED: x at 0, y (NaN) after it; x also to SHMPATH.x
    shm, mtx, seed = sys.argv[2], sys.argv[3], int(sys.argv[4])
    rows, cols, _ = read(mtx); rnd = random.Random(seed + 1)
    x = [rnd.uniform(-1, 1) for _ in range(cols)]
    with open(shm, "wb") as f:
        f.write(struct.pack("<%dd" % cols, *x) + struct.pack("<%dd" % rows, *([float("nan")] * rows)))
    with open(shm + ".x", "w") as f: f.write("\n".join("%.17g" % v for v in x) + "\n")
elif cmd == "check":         # check SHMPATH MTX [YFILE]: y (from the object, or YFILE) against A·x
    shm, mtx = sys.argv[2], sys.argv[3]
    rows, cols, ents = read(mtx)
    x, y = pair(shm, cols, rows, sys.argv[4] if len(sys.argv) > 4 else None)
    ref = [0.0] * rows
    for i, j, v in ents: ref[i] += v * x[j]
    num = sum((a - b) ** 2 for a, b in zip(y, ref)); den = sum(b * b for b in ref)
    err = (num / den) ** 0.5 if den else num ** 0.5
    bad = len(y) != rows or any(v != v for v in y) or not err < 1e-12
    print("rel err %.3g over %d rows" % (err, len(y))); sys.exit(1 if bad else 0)
elif cmd == "lap":           # lap PATH G: the 5-point Laplacian of a G x G grid (SPD)
    path, g = sys.argv[2], int(sys.argv[3]); ents = []
    for i in range(g * g):
        a, c = divmod(i, g)
        ents += [(i, i, 4.0)] + [(i, j, -1.0) for j, ok in ((i - g, a > 0), (i + g, a < g - 1), (i - 1, c > 0),
                                                              (i + 1, c < g - 1)) if ok]
    with open(path, "w") as f:
        f.write("%%%%MatrixMarket matrix coordinate real general\n%d %d %d\n" % (g * g, g * g, len(ents)))
        for i, j, v in ents: f.write("%d %d %g\n" % (i + 1, j + 1, v))
elif cmd == "bobject":       # bobject SHMPATH N SEED: b (N values) at 0, x (NaN) after it
    shm, n, seed = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]); rnd = random.Random(seed + 2)
    with open(shm, "wb") as f:
        f.write(struct.pack("<%dd" % n, *[rnd.uniform(-1, 1) for _ in range(n)]) + struct.pack("<%dd" % n, *([float("nan")] * n)))
elif cmd == "solved":        # solved SHMPATH MTX [XFILE]: ||b - A x|| / ||b|| <= 1.01e-8, x from the object or XFILE
    shm, mtx = sys.argv[2], sys.argv[3]
    rows, cols, ents = read(mtx)
    b, x = pair(shm, rows, rows, sys.argv[4] if len(sys.argv) > 4 else None)
    r = list(b)
    for i, j, v in ents: r[i] -= v * x[j]
    rel = (sum(v * v for v in r) / sum(v * v for v in b)) ** 0.5
    print("relres %.3g" % rel); sys.exit(0 if len(x) == rows and rel == rel and rel <= 1.01e-8 else 1)
EOF

# tool_ok DESC ARGS...: ok when shm_tool.py ARGS exits 0, its line after DESC
tool_ok() {
  local what=$1; shift
  if "$PYTHON" "$W/shm_tool.py" "$@" >"$W/cmp" 2>&1; then ok "$what ($(cat "$W/cmp"))"; else not_ok "$what" "$(cat "$W/cmp")"; fi
}

"$PYTHON" "$W/shm_tool.py" matrix "$W/a.mtx" 157 93 "$SEED"
expect_rc 0 "spmvctl upload" ctl --json upload "$W/a.mtx"
MID=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$W/out" 2>/dev/null)
BYTES=$(((157 + 93) * 8))
"$PYTHON" "$W/shm_tool.py" object "/dev/shm/$OBJ" "$W/a.mtx" "$SEED"
chmod 600 "/dev/shm/$OBJ"
mv "/dev/shm/$OBJ.x" "$W/x.txt"

expect_rc 0 "spmvctl shm register $OBJ --size $BYTES" ctl shm register "$OBJ" --size "$BYTES"
check "spmvctl shm register prints the region" grep -qE "^$OBJ +0 +$BYTES +$BYTES " "$W/out"
expect_rc 0 "spmvctl --json shm list" ctl --json shm list
check "shm list --json holds $OBJ with state ok" "$PYTHON" -c '
import json, sys; d = json.load(open(sys.argv[1])); rs = d if isinstance(d, list) else d.get("regions", d.get("shm", []))
sys.exit(0 if any(r["name"] == sys.argv[2] and r["state"] == "ok" and r["size"] == int(sys.argv[3]) for r in rs) else 1)' \
  "$W/out" "$OBJ" "$BYTES"
expect_rc 0 "spmvctl shm ls (table)" ctl shm ls
check "shm ls lists $OBJ" grep -q "^$OBJ " "$W/out"
expect_rc 2 "spmvctl shm register twice exits 2" ctl shm register "$OBJ" --size "$BYTES"
check "the refusal names shm_exists" grep -q 'shm_exists' "$W/err"
expect_rc 2 "spmvctl shm register of a missing object exits 2" ctl shm register "$OBJ-missing" --size 64
check "the refusal names shm_not_found" grep -q 'shm_not_found' "$W/err"
cp "/dev/shm/$OBJ" "/dev/shm/$OBJ-small" && chmod 600 "/dev/shm/$OBJ-small"
expect_rc 2 "spmvctl shm register past the object's end exits 2" ctl shm register "$OBJ-small" --offset 8 --size "$BYTES"
check "the refusal names out_of_range" grep -q 'out_of_range' "$W/err"
expect_rc 1 "spmvctl shm register without --size exits 1" ctl shm register "$OBJ"
expect_rc 1 "spmvctl shm register --size 0 exits 1" ctl shm register "$OBJ" --size 0
expect_rc 1 "spmvctl shm register a/b (not a region name) exits 1" ctl shm register a/b --size 64
expect_rc 1 "spmvctl shm frobnicate exits 1" ctl shm frobnicate

expect_rc 0 "spmvctl spmv --x-shm $OBJ:0 --y-shm $OBJ:$((93 * 8))" ctl spmv "$MID" --x-shm "$OBJ:0" --y-shm "$OBJ:$((93 * 8))"
check "spmv with --y-shm prints where y went" grep -q "in region $OBJ at byte $((93 * 8))" "$W/out"
tool_ok "y in the object = A*x" check "/dev/shm/$OBJ" "$W/a.mtx"
expect_rc 0 "spmvctl spmv --x-shm $OBJ (offset 0) --y-out FILE" ctl spmv "$MID" --x-shm "$OBJ" --y-out "$W/y.txt"
tool_ok "--y-out y = A*x" check "/dev/shm/$OBJ" "$W/a.mtx" "$W/y.txt"
"$PYTHON" -c 'import struct,sys; f=open(sys.argv[1],"r+b"); f.seek(8*93); f.write(struct.pack("<157d", *[float("nan")]*157))' "/dev/shm/$OBJ"
expect_rc 0 "spmvctl spmv --x FILE --y-shm $OBJ:$((93 * 8))" ctl spmv "$MID" --x "$W/x.txt" --y-shm "$OBJ:$((93 * 8))"
tool_ok "y in the object = A*x from --x FILE" check "/dev/shm/$OBJ" "$W/a.mtx"
expect_rc 0 "spmvctl --json spmv --x-shm --y-shm" ctl --json spmv "$MID" --x-shm "$OBJ:0" --y-shm "$OBJ:$((93 * 8))"
check "--json spmv carries the kernel" "$PYTHON" -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["kernel"] else 1)' "$W/out"
expect_rc 2 "spmvctl spmv --y-shm past the region exits 2" ctl spmv "$MID" --x-shm "$OBJ:0" --y-shm "$OBJ:$((93 * 8 + 8))"
check "the refusal names out_of_range" grep -q 'out_of_range' "$W/err"
expect_rc 2 "spmvctl spmv --x-shm of an unknown region exits 2" ctl spmv "$MID" --x-shm "$OBJ-nobody" --y-shm "$OBJ:$((93 * 8))"
check "the refusal names shm_not_found" grep -q 'shm_not_found' "$W/err"
expect_rc 1 "spmvctl spmv --x and --x-shm together exit 1" ctl spmv "$MID" --x "$W/x.txt" --x-shm "$OBJ"
expect_rc 1 "spmvctl spmv --x-shm NAME:junk exits 1" ctl spmv "$MID" --x-shm "$OBJ:12x"
expect_rc 1 "spmvctl spmv --y-shm with --y-out exits 1" ctl spmv "$MID" --x-shm "$OBJ" --y-shm "$OBJ:744" --y-out "$W/y2.txt"
# solve --b-shm / --x-shm on a 10 x 10 grid's Laplacian: b read from the object, x written after it
"$PYTHON" "$W/shm_tool.py" lap "$W/lap.mtx" 10
expect_rc 0 "spmvctl upload the Laplacian" ctl --json upload "$W/lap.mtx"
LID=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$W/out" 2>/dev/null)
"$PYTHON" "$W/shm_tool.py" bobject "/dev/shm/$OBJ-s" 100 "$SEED" && chmod 600 "/dev/shm/$OBJ-s"
expect_rc 0 "spmvctl shm register $OBJ-s" ctl shm register "$OBJ-s" --size 1600
expect_rc 0 "spmvctl solve --b-shm $OBJ-s --x-shm $OBJ-s:800" ctl solve "$LID" --b-shm "$OBJ-s" --x-shm "$OBJ-s:800" --precond jacobi
check "solve prints that it converged" grep -q "^converged    yes" "$W/out"
tool_ok "x in the object solves A x = b" solved "/dev/shm/$OBJ-s" "$W/lap.mtx"
expect_rc 0 "spmvctl solve --b-shm $OBJ-s:0 --x-out FILE" ctl solve "$LID" --b-shm "$OBJ-s:0" --x-out "$W/solve.x"
tool_ok "--x-out x solves A x = b" solved "/dev/shm/$OBJ-s" "$W/lap.mtx" "$W/solve.x"
expect_rc 1 "spmvctl solve --b-shm with --b exits 1" ctl solve "$LID" --b-shm "$OBJ-s" --b "$W/x.txt"
expect_rc 1 "spmvctl solve --x-shm with --x-out exits 1" ctl solve "$LID" --b-shm "$OBJ-s" --x-shm "$OBJ-s:800" --x-out "$W/x2"
expect_rc 1 "spmvctl solve --k without --b-shm exits 1" ctl solve "$LID" --k 2
expect_rc 1 "spmvctl solve --k 2 without --x-shm exits 1" ctl solve "$LID" --b-shm "$OBJ-s" --k 2
expect_rc 2 "spmvctl solve --b-shm past the region exits 2" ctl solve "$LID" --b-shm "$OBJ-s:808" --x-shm "$OBJ-s:0"
check "the refusal names out_of_range" grep -q 'out_of_range' "$W/err"
ctl shm rm "$OBJ-s" >/dev/null 2>&1
ctl rm "$LID" >/dev/null 2>&1

expect_rc 0 "spmvctl shm rm $OBJ" ctl shm rm "$OBJ"
check "shm rm says so" grep -q "unregistered $OBJ" "$W/out"
check "shm rm leaves the object in /dev/shm" test -f "/dev/shm/$OBJ"
expect_rc 2 "spmvctl shm rm again exits 2" ctl shm rm "$OBJ"
expect_rc 0 "spmvctl --json shm list after rm" ctl --json shm list
check "the region is gone from the list" bash -c "! grep -q '\"$OBJ\"' '$W/out'"
ctl rm "$MID" >/dev/null 2>&1

if [ -n "${URL_OFF:-}" ] && [ "$URL_OFF" != "$URL" ]; then
  expect_rc 2 "spmvctl shm list on a daemon without allow_shm exits 2" "$SPMVCTL" --url "$URL_OFF" shm list
  check "the refusal names shm_disabled (403)" grep -q 'shm_disabled' "$W/err"
fi

# --------------------------------------------------------------- example
expect_rc 0 "docs example shm.c runs against the daemon" "$EXAMPLE" "$URL" 500
check "shm.c: y came back through the object, checked" grep -qE '^shm: y = A\*x through /dev/shm/spmvd-example-[0-9]+, 500 rows, kernel .*, max relative error ' "$W/out"
check "shm.c removed its object" bash -c "! ls /dev/shm/spmvd-example-* >/dev/null 2>&1"
check "docs/client.md includes shm.c verbatim" "$PYTHON" -c '
import sys; doc = open("docs/client.md").read(); src = open("clients/examples/shm.c").read()
sys.exit(0 if src.strip() in doc else 1)'
expect_rc 0 "spmvctl --json shm list after the example" ctl --json shm list
check "the example left no region registered" bash -c "! grep -q 'spmvd-example' '$W/out'"

done_testing
