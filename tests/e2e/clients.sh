#!/usr/bin/env bash
# clients.sh — libspmvclient, spmvctl and cg_solve against a live daemon.
#
# Starts spmvd on a free loopback port with a temporary state directory
# (tests/e2e/lib.sh), then:
#   - runs $BUILD/tests/e2e/client_calls, which makes every library call and
#     checks every error path (unknown id, bad matrix, closed port, a socket
#     that accepts and never answers, a progress callback that aborts);
#   - drives each spmvctl subcommand, checking output, --json and the
#     documented exit codes, and that a refused upload prints the server's
#     422 message verbatim (as curl sees it);
#   - runs cg_solve on a generated 2-D Poisson matrix and on a real SPD
#     matrix, and recomputes the TRUE residual ||b - A x|| / ||b|| here in
#     python3 from the matrix file and --x-out (it must be under 1e-8);
#   - drives spmvctl vec/ops/solve (values and results against python) and
#     cg_solve --mode resident and --mode server, whose x must agree with
#     the local mode's (skipped when the daemon has no /v1/vectors);
#   - installs the client with `make install-clients PREFIX=<tmp>`, compiles
#     the docs' example against the installed copy with
#     `pkg-config --cflags --libs spmvclient` and runs it against the daemon.
# Speaks TAP. Random inputs come from a printed seed (SPMV_SEED repeats it).
set -u
ROOT=${SPMV_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${BUILD:-build}
cd "$ROOT" || exit 1
. tests/e2e/lib.sh

B=$BUILD_DIR
SPMVCTL=$B/spmvctl
CG=$B/cg_solve
CALLS=$B/tests/e2e/client_calls
REAL=$MATRICES/real

for bin in "$SPMVCTL" "$CG" "$CALLS"; do
  if [ ! -x "$bin" ]; then
    skip "$bin not built"
    done_testing
    exit
  fi
done

W=$E2E_TMP/clients
mkdir -p "$W"
SILENT_PID=
# lib.sh's cleanup waits for every child: the silent socket must go first.
trap '[ -n "$SILENT_PID" ] && kill "$SILENT_PID" 2>/dev/null; cleanup' EXIT
diag_file() { sed 's/^/#   /' "$1"; }

start_spmvd || { not_ok "spmvd started"; diag_file "$SPMVD_LOG"; done_testing; exit; }
URL=$SPMVD_URL
export SPMV_URL=$URL
unset SPMV_TOKEN

# ------------------------------------------------------------- helpers

# A socket that accepts connections and never answers: the timeout path.
start_silent_socket() {
  local port_file=$W/silent.port
  python3 - "$port_file" <<'EOF' &
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1]))
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
held = []
while True:
    c, _ = s.accept(); held.append(c)   # keep it open, say nothing
EOF
  SILENT_PID=$!
  for _ in $(seq 100); do [ -s "$port_file" ] && break; sleep 0.05; done
  SILENT_URL=http://127.0.0.1:$(cat "$port_file")
}

# expect_rc WANT DESC CMD...: runs CMD (stdout to $W/out, stderr to $W/err).
expect_rc() {
  local want=$1 what=$2; shift 2
  "$@" >"$W/out" 2>"$W/err"
  local rc=$?
  if [ "$rc" -eq "$want" ]; then ok "$what"; else
    not_ok "$what" "exit $rc, wanted $want: $*"; diag_file "$W/err"; fi
}

json_field() { # json_field FILE EXPR  (python expression over d)
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null
}

# A random general matrix, written from python so the reference is independent.
write_random_matrix() { # FILE ROWS COLS SEED
  python3 - "$@" <<'EOF'
import random, sys
path, rows, cols, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rnd = random.Random(seed)
ents = {}
for i in range(rows):
    for _ in range(rnd.randint(1, 6)):
        ents[(i, rnd.randrange(cols))] = rnd.uniform(-1, 1)
with open(path, "w") as f:
    f.write("%%%%MatrixMarket matrix coordinate real general\n%d %d %d\n" % (rows, cols, len(ents)))
    for (i, j), v in sorted(ents.items()):
        f.write("%d %d %.17g\n" % (i + 1, j + 1, v))
EOF
}

# mtx_tool.py: y = A x, and the relative residual ||A·1 - A x|| / ||A·1||.
cat >"$W/mtx_tool.py" <<'EOF'
import math, sys
def read(path):
    with open(path) as f:
        head = f.readline().lower().split()
        field, sym = head[3], head[4]
        for line in f:
            if line.strip() and not line.startswith("%"):
                rows, cols, _ = map(int, line.split()); break
        ents = []
        for line in f:
            t = line.split()
            if not t: continue
            i, j = int(t[0]) - 1, int(t[1]) - 1
            v = 1.0 if field == "pattern" else float(t[2])
            ents.append((i, j, v))
            if sym in ("symmetric", "hermitian") and i != j: ents.append((j, i, v))
            if sym == "skew-symmetric" and i != j: ents.append((j, i, -v))
    return rows, cols, ents
def mul(rows, ents, x):
    y = [0.0] * rows
    for i, j, v in ents: y[i] += v * x[j]
    return y
def vec(path): return [float(t) for t in open(path).read().split()]
cmd, path = sys.argv[1], sys.argv[2]
rows, cols, ents = read(path)
if cmd == "mul":          # mul MTX X Y: max relative error of Y against A X
    y = mul(rows, ents, vec(sys.argv[3])); got = vec(sys.argv[4])
    assert len(got) == rows, "y has %d values, want %d" % (len(got), rows)
    num = math.sqrt(sum((a - b) ** 2 for a, b in zip(got, y))); den = math.sqrt(sum(b * b for b in y))
    print(num / den if den else num)
elif cmd == "residual":   # residual MTX X: ||A1 - Ax|| / ||A1||
    b = mul(rows, ents, [1.0] * cols); x = vec(sys.argv[3])
    assert len(x) == cols, "x has %d values, want %d" % (len(x), cols)
    ax = mul(rows, ents, x)
    print(math.sqrt(sum((p - q) ** 2 for p, q in zip(b, ax))) / math.sqrt(sum(p * p for p in b)))
EOF

lt() { python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)' "$1" "$2" 2>/dev/null; }

# ------------------------------------------------------------ library calls
start_silent_socket
DEAD_URL=http://127.0.0.1:$(free_port)
"$CALLS" "$URL" "$DEAD_URL" "$SILENT_URL" "$W" >"$W/calls.tap" 2>"$W/calls.err"
calls_rc=$?
# Renumber client_calls' TAP into this script's sequence.
while IFS= read -r line; do
  case $line in
    "ok "*"# SKIP "*) skip "${line#*# SKIP }" ;;
    "ok "*)     ok "${line#ok * - }" ;;
    "not ok "*) not_ok "${line#not ok * - }" ;;
    "#"*)       echo "$line" ;;
  esac
done <"$W/calls.tap"
check "client_calls exited 0 (rc $calls_rc)" [ "$calls_rc" -eq 0 ]
[ -s "$W/calls.err" ] && diag_file "$W/calls.err"

# ----------------------------------------------------------------- spmvctl
ctl() { "$SPMVCTL" "$@"; }

expect_rc 0 "spmvctl health (SPMV_URL, the alias, from the environment)" env -u SPMVD_URL "$SPMVCTL" health
check "spmvctl health prints ok" grep -qx ok "$W/out"
expect_rc 0 "spmvctl health (SPMVD_URL from the environment)" env -u SPMV_URL SPMVD_URL="$URL" "$SPMVCTL" health
expect_rc 3 "spmvctl: SPMVD_URL comes before SPMV_URL" env SPMVD_URL="$DEAD_URL" "$SPMVCTL" health
expect_rc 0 "spmvctl --url health" env -u SPMV_URL -u SPMVD_URL "$SPMVCTL" --url "$URL" health
expect_rc 3 "spmvctl health on a closed port exits 3" ctl --url "$DEAD_URL" health
check "unreachable message names the address" grep -q "unreachable" "$W/err"
expect_rc 3 "spmvctl --timeout 0.3 on a silent socket exits 3" ctl --url "$SILENT_URL" --timeout 0.3 health
check "timeout message says timed out" grep -q "timed out" "$W/err"
expect_rc 1 "spmvctl with no command exits 1" ctl
expect_rc 1 "spmvctl bogus exits 1" ctl bogus
expect_rc 1 "spmvctl --no-such-option exits 1" ctl --no-such-option health
expect_rc 0 "spmvctl --help exits 0" ctl --help
check "spmvctl --help lists the exit codes" grep -q "Exit status" "$W/out"
for c in upload ls info rm spmv bench job kernels health vec ops solve; do
  expect_rc 0 "spmvctl $c --help" ctl "$c" --help
  check "spmvctl $c --help prints its usage" grep -q "usage: spmvctl $c" "$W/out"
done

expect_rc 0 "spmvctl kernels" ctl kernels
check "kernels table lists cpu.csr.serial" grep -qE '^cpu\.csr\.serial +yes' "$W/out"
expect_rc 0 "spmvctl --json kernels" ctl --json kernels
check "--json kernels is JSON" json_field "$W/out" 'len(d if isinstance(d,list) else d["kernels"]) > 0'
expect_rc 0 "spmvctl info (server)" ctl info
check "server info names a version" grep -q version "$W/out"

SEED=${SPMV_SEED:-$(( $(date +%s) ^ $$ ))}
echo "# seed $SEED (set SPMV_SEED to repeat)"
RANDOM=$((SEED % 32768))
ROWS=$((100 + RANDOM % 200)); COLS=$((80 + RANDOM % 200))
M=$W/ctl.mtx
write_random_matrix "$M" $ROWS $COLS "$SEED"
expect_rc 0 "spmvctl --json upload" ctl --json upload --name ctl-test "$M"
cp "$W/out" "$W/upload.json"
ID=$(json_field "$W/upload.json" 'd["id"]')
check "--json upload prints the descriptor with its id" [ -n "$ID" ]
check "descriptor shape ${ROWS}x${COLS}" [ "$(json_field "$W/upload.json" '(d["rows"], d["cols"])')" = "($ROWS, $COLS)" ]
expect_rc 0 "spmvctl upload (table)" ctl upload --name ctl-table "$M"
ID2=$(awk '$1 == "id" {print $2}' "$W/out")
check "upload table shows id and shape" grep -q "shape *$ROWS x $COLS" "$W/out"
check "no progress bar when stderr is not a terminal" sh -c "! grep -q 'upload *\\[' '$W/err'"
if command -v script >/dev/null; then
  script -qec "'$SPMVCTL' upload --name ctl-tty '$M'" /dev/null >"$W/tty.out" 2>&1
  check "progress bar on a terminal reaches 100%" grep -qE 'upload +\[#+\] 100%' "$W/tty.out"
  TTY_ID=$(tr -d '\r' <"$W/tty.out" | awk '$1 == "id" {print $2}')
  [ -n "$TTY_ID" ] && ctl rm "$TTY_ID" >/dev/null 2>&1
else
  skip "script(1) not installed: no terminal to test the progress bar on"
fi
expect_rc 0 "spmvctl ls" ctl ls
check "ls lists both uploads" sh -c "grep -q '^$ID ' '$W/out' && grep -q '^$ID2 ' '$W/out'"
expect_rc 0 "spmvctl --json ls" ctl ls --json
check "--json ls holds the id" json_field "$W/out" "'$ID' in [m['id'] for m in (d if isinstance(d,list) else d['matrices'])]"
expect_rc 0 "spmvctl info ID" ctl info "$ID"
check "info ID shows the name" grep -q "name *ctl-test" "$W/out"
expect_rc 0 "spmvctl --json info ID" ctl --json info "$ID"
check "--json info ID is the descriptor" [ "$(json_field "$W/out" 'd["id"]')" = "$ID" ]

# spmv: y against python's A·x
python3 -c "import random,sys; r=random.Random($SEED); print('\n'.join('%.17g' % r.uniform(-1,1) for _ in range($COLS)))" >"$W/x.txt"
expect_rc 0 "spmvctl spmv --kernel cpu.csr.serial --x --y-out" \
  ctl spmv "$ID" --kernel cpu.csr.serial --x "$W/x.txt" --y-out "$W/y.txt" --runs 3
check "spmv prints the kernel and timing" grep -q "kernel *cpu.csr.serial" "$W/out"
err=$(python3 "$W/mtx_tool.py" mul "$M" "$W/x.txt" "$W/y.txt" 2>&1)
check "spmv y matches python's A·x (rel err $err)" lt "$err" 1e-12
expect_rc 0 "spmvctl --json spmv --kernel cpu.csr.omp --verify" ctl --json spmv "$ID" --kernel cpu.csr.omp --x "$W/x.txt" --verify
check "--json spmv carries stats and queue_ms" json_field "$W/out" 'd["stats"]["runs"] >= 1 and d["queue_ms"] >= 0 and d["kernel"] == "cpu.csr.omp"'
head -n $((COLS - 1)) "$W/x.txt" >"$W/x_short.txt"
expect_rc 6 "spmvctl spmv with an x one value short exits 6" ctl spmv "$ID" --x "$W/x_short.txt"
expect_rc 1 "spmvctl spmv without --x exits 1" ctl spmv "$ID"
expect_rc 2 "spmvctl spmv with an unknown kernel exits 2" ctl spmv "$ID" --kernel no.such.kernel --x "$W/x.txt"
check "unknown kernel: the server's message names it" grep -q "no.such.kernel" "$W/err"
expect_rc 0 "spmvctl --json spmv --stat mean" ctl --json spmv "$ID" --kernel cpu.csr.omp --x "$W/x.txt" --runs 5 --stat mean
NNZ=$("$SPMVCTL" --json info "$ID" | python3 -c 'import json, sys; print(json.load(sys.stdin)["nnz"])')
check "--stat mean: the rates are at the mean (stats.stat mean, gflops = 2 nnz / mean_ms)" python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["stats"]
assert s["stat"] == "mean" and abs(s["gflops"] * s["mean_ms"] * 1e6 / (2 * int(sys.argv[2])) - 1) < 3e-5, s' "$W/out" "$NNZ"
expect_rc 1 "spmvctl spmv --stat p99 exits 1" ctl spmv "$ID" --x "$W/x.txt" --stat p99
check "--stat p99: the message names mean and median" grep -q "mean or median" "$W/err"

# bench, with its job
expect_rc 0 "spmvctl bench --kernels cpu.csr.serial,cpu.csr.omp" ctl bench "$ID" --kernels cpu.csr.serial,cpu.csr.omp --runs 2
check "bench table lists both kernels" sh -c "grep -q '^cpu.csr.serial ' '$W/out' && grep -q '^cpu.csr.omp ' '$W/out'"
expect_rc 0 "spmvctl bench --stat mean" ctl bench "$ID" --kernels cpu.csr.serial,cpu.csr.omp --runs 2 --stat mean
check "bench --stat mean: the table says the mean, the baseline and has an efficiency column" \
  sh -c "grep -q 'at the mean time; baseline cpu.csr.serial' '$W/out' && grep -q 'EFFIC' '$W/out'"
expect_rc 0 "spmvctl bench --threads 1,2 (a thread sweep)" ctl --json bench "$ID" --kernels cpu.csr.omp --runs 2 --threads 1,2
check "bench --threads 1,2: cpu.csr.omp timed at 1 and at 2 threads" json_field "$W/out" \
  'sorted(r["threads_used"] for r in d["result"]["results"] if r["kernel"] == "cpu.csr.omp") == [1, 2]'
expect_rc 1 "spmvctl bench --threads 1,,2 is a usage error" ctl bench "$ID" --threads 1,,2
expect_rc 1 "spmvctl ls --threads 2: an option ls does not take is refused" ctl ls --threads 2
check "... naming the command and the option" grep -q "ls does not take --threads" "$W/err"
expect_rc 1 "spmvctl spmv --kernels (bench's option) is refused, not ignored" ctl spmv "$ID" --x /dev/null --kernels cpu.csr.omp
expect_rc 0 "spmvctl --json bench --no-wait prints the job" ctl --json bench "$ID" --kernels cpu.csr.serial --no-wait
JOB=$(json_field "$W/out" 'd["job"]')
check "bench --no-wait gives a job id" [ -n "$JOB" ]
for _ in $(seq 100); do
  ctl --json job "$JOB" >"$W/job.json" 2>/dev/null
  [ "$(json_field "$W/job.json" 'd["state"]')" = done ] && break
  sleep 0.1
done
check "spmvctl --json job reaches state done" [ "$(json_field "$W/job.json" 'd["state"]')" = done ]
expect_rc 2 "spmvctl job with an unknown id exits 2" ctl job 00000000-0000-0000-0000-000000000000

# errors: unknown id, bad file (the server's 422 message verbatim)
expect_rc 2 "spmvctl info of an unknown id exits 2" ctl info 00000000-0000-0000-0000-000000000000
check "unknown id: message says not found" grep -qi "not found" "$W/err"
printf '%%%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1.0\n1 x 2.0\n' >"$W/bad.mtx"
curl -s -F "file=@$W/bad.mtx" "$URL/v1/matrices" >"$W/bad_curl.json"
msg=$(json_field "$W/bad_curl.json" 'd["error"]["message"]')
expect_rc 2 "spmvctl upload of a malformed file exits 2" ctl upload "$W/bad.mtx"
check "bad file: spmvctl prints the server's 422 message verbatim" \
  grep -qF -- "$msg" "$W/err"
[ -n "$msg" ] || not_ok "curl saw a 422 message" "$(cat "$W/bad_curl.json")"
expect_rc 6 "spmvctl upload of a missing file exits 6" ctl upload "$W/missing.mtx"
expect_rc 0 "spmvctl generate band --n 1000 --per-row 5 --dtype float32" \
  ctl --json generate band --n 1000 --per-row 5 --dtype float32 --name ctl-band
check "generate: the descriptor holds the recipe and the formula's non-zeros (4994)" \
  json_field "$W/out" 'd["generated"]["kind"] == "band" and d["generated"]["per_row"] == 5 and d["nnz"] == 4994 and d["dtype"] == "float32"'
GEN_ID=$(json_field "$W/out" 'd["id"]')
expect_rc 2 "spmvctl generate of an unknown kind exits 2" ctl generate nosuch --n 10
check "unknown kind: the server's message names it" grep -q "nosuch" "$W/err"
expect_rc 1 "spmvctl generate without --n is a usage error" ctl generate band
[ -n "$GEN_ID" ] && ctl rm "$GEN_ID" >/dev/null 2>&1

expect_rc 0 "spmvctl rm ID ID2" ctl rm "$ID" "$ID2"
expect_rc 2 "spmvctl rm of a deleted id exits 2" ctl rm "$ID"

# ----------------------------------------------------------------- cg_solve
count_matrices() { ctl --json ls | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d if isinstance(d,list) else d["matrices"]))'; }

# run_cg NAME MTX [ARGS...]: solves, checks the last line and the true residual.
run_cg() {
  local name=$1 mtx=$2; shift 2
  local before; before=$(count_matrices)
  "$CG" --x-out "$W/$name.x" "$@" "$mtx" >"$W/$name.cg" 2>"$W/$name.err"
  local rc=$?
  if [ $rc -eq 0 ]; then ok "cg_solve $name exits 0"; else not_ok "cg_solve $name exits 0 (rc $rc)"; diag_file "$W/$name.err"; tail -3 "$W/$name.cg" | sed "s/^/#   /"; fi
  local last; last=$(tail -n 1 "$W/$name.cg")
  check "cg_solve $name: last line '$last'" sh -c "echo '$last' | grep -qE '^converged in [0-9]+ iterations, relative residual [0-9.e+-]+$'"
  check "cg_solve $name prints residuals per iteration" grep -qE '^iter +1 +residual' "$W/$name.cg"
  check "cg_solve $name prints the time split" sh -c "grep -q 'network+http' '$W/$name.cg' && grep -q 'queue' '$W/$name.cg' && grep -q 'kernel' '$W/$name.cg'"
  local res; res=$(python3 "$W/mtx_tool.py" residual "$mtx" "$W/$name.x" 2>&1)
  check "cg_solve $name: true residual $res < 1e-8 (python)" lt "$res" 1e-8
  check "cg_solve $name deleted its matrix" [ "$(count_matrices)" = "$before" ]
}

# 2-D Poisson, 30 x 30 grid (5-point stencil, SPD).
python3 - "$W/poisson.mtx" <<'EOF'
import sys
n = 30; ents = []
for i in range(n):
    for j in range(n):
        r = i * n + j
        ents.append((r, r, 4.0))
        for di, dj in ((-1, 0), (1, 0), (0, -1), (0, 1)):
            a, b = i + di, j + dj
            if 0 <= a < n and 0 <= b < n: ents.append((r, a * n + b, -1.0))
with open(sys.argv[1], "w") as f:
    f.write("%%%%MatrixMarket matrix coordinate real general\n%d %d %d\n" % (n * n, n * n, len(ents)))
    for r, c, v in ents: f.write("%d %d %.1f\n" % (r + 1, c + 1, v))
EOF
run_cg poisson2d "$W/poisson.mtx" --kernel cpu.csr.omp
# The project's generator, gzip-compressed: the upload path takes .mtx.gz too.
if [ -x "$B/spmv-gen" ] && "$B/spmv-gen" --kind poisson3d --n 8 --gzip --out "$W/p3d.mtx.gz" >/dev/null 2>&1; then
  gzip -dc "$W/p3d.mtx.gz" >"$W/p3d.mtx"
  "$CG" --x-out "$W/p3d.x" --kernel cpu.csr.serial "$W/p3d.mtx.gz" >"$W/p3d.cg" 2>"$W/p3d.err"
  check "cg_solve on spmv-gen's gzipped 3-D Poisson: $(tail -n 1 "$W/p3d.cg")" grep -q '^converged in' "$W/p3d.cg"
  res=$(python3 "$W/mtx_tool.py" residual "$W/p3d.mtx" "$W/p3d.x" 2>&1)
  check "cg_solve 3-D Poisson: true residual $res < 1e-8 (python)" lt "$res" 1e-8
else
  skip "spmv-gen not built"
fi
# A real SPD matrix (symmetric storage, expanded by the reader).
if [ -f "$REAL/LFAT5.mtx" ]; then run_cg LFAT5 "$REAL/LFAT5.mtx" --kernel cpu.csr.serial
else skip "LFAT5.mtx not found under $REAL"; fi
expect_rc 2 "cg_solve on a non-SPD matrix exits 2" "$CG" --maxit 50 "$REAL/zenios.mtx"
expect_rc 1 "cg_solve without a matrix exits 1" "$CG"

# ------------------------------------ resident vectors, ops, solve (0.2)
# Skipped as a whole when the daemon has no /v1/vectors route yet.
# vec_tool.py: python's own A·v, dots and b = A·1, the references below.
cat >"$W/vec_tool.py" <<'EOF'
import json, math, sys
exec(open(sys.argv[1]).read().split("cmd, path = ")[0])   # read(), mul(), vec() of mtx_tool.py
cmd = sys.argv[2]
if cmd == "b":            # b MTX OUT: b = A·1
    rows, cols, ents = read(sys.argv[3])
    open(sys.argv[4], "w").write("".join("%.17g\n" % v for v in mul(rows, ents, [1.0] * cols)))
elif cmd == "ops":        # ops MTX V OPS_JSON: relative errors of vAv and ||v||
    rows, cols, ents = read(sys.argv[3]); v = vec(sys.argv[4])
    d = json.load(open(sys.argv[5]))["results"]
    y = mul(rows, ents, v)
    want = sum(a * b for a, b in zip(v, y)); vn = math.sqrt(sum(a * a for a in v))
    print(max(abs(d["vAv"] - want) / abs(want), abs(d["vn"] - vn) / vn))
elif cmd == "maxdiff":    # maxdiff X1 X2...: largest difference between the vectors
    v = [vec(p) for p in sys.argv[3:]]
    assert all(len(w) == len(v[0]) for w in v)
    print(max(abs(a - b) for w in v[1:] for a, b in zip(v[0], w)))
EOF
vt() { python3 "$W/vec_tool.py" "$W/mtx_tool.py" "$@" 2>&1; }

code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/vectors")
if [ "$code" = 404 ]; then
  skip "the daemon has no /v1/vectors: spmvctl vec/ops/solve and cg_solve --mode resident|server not tested"
else
  SPD=$W/poisson.mtx
  expect_rc 0 "spmvctl --json upload of the SPD matrix" ctl --json upload --name spd "$SPD"
  SID=$(json_field "$W/out" 'd["id"]'); N=$(json_field "$W/out" 'd["rows"]')
  python3 -c "import random; r=random.Random($SEED); print('\n'.join('%.17g' % r.uniform(-1,1) for _ in range($N)))" >"$W/v.txt"
  expect_rc 0 "spmvctl --json vec create --values --like" ctl --json vec create --values "$W/v.txt" --like "$SID"
  VID=$(json_field "$W/out" 'd["id"]')
  check "vec create: n = $N, k 1" [ "$(json_field "$W/out" '(d["n"], d.get("k", 1))')" = "($N, 1)" ]
  expect_rc 0 "spmvctl vec get --out" ctl vec get "$VID" --out "$W/v.back"
  check "vec get: the values come back exactly" cmp -s "$W/v.txt" "$W/v.back"
  expect_rc 0 "spmvctl --json vec get" ctl --json vec get "$VID"
  check "--json vec get carries the descriptor and the values" json_field "$W/out" "len(d['values']) == $N and d['id'] == '$VID'"
  expect_rc 0 "spmvctl vec create --fill 2 --like --side rows" ctl --json vec create --fill 2 --like "$SID" --side rows
  FID=$(json_field "$W/out" 'd["id"]')
  expect_rc 0 "spmvctl vec create --random --seed --n --k 2 --device cpu" ctl --json vec create --random --seed 5 --n 10 --k 2 --device cpu
  RID=$(json_field "$W/out" 'd["id"]')
  expect_rc 0 "spmvctl vec get of a k = 2 block" ctl vec get "$RID"
  check "vec get k = 2: 10 lines of 2 values" sh -c "[ \$(wc -l <'$W/out') = 10 ] && awk 'NF != 2 {exit 1}' '$W/out'"
  expect_rc 0 "spmvctl vec ls" ctl vec ls
  check "vec ls lists the three vectors" sh -c "grep -q '^$VID ' '$W/out' && grep -q '^$FID ' '$W/out' && grep -q '^$RID ' '$W/out'"
  expect_rc 0 "spmvctl --json vec ls" ctl --json vec ls
  check "--json vec ls holds the id" json_field "$W/out" "'$VID' in [v['id'] for v in d['vectors']]"
  python3 -c "print('\n'.join('%.17g' % (0.5 * i - 3) for i in range($N)))" >"$W/v2.txt"
  expect_rc 0 "spmvctl vec put --values" ctl vec put "$VID" --values "$W/v2.txt"
  ctl vec get "$VID" --out "$W/v2.back" >/dev/null 2>&1
  check "vec put: the new values read back" cmp -s "$W/v2.txt" "$W/v2.back"
  head -n 3 "$W/v2.txt" >"$W/v3.txt"
  expect_rc 6 "spmvctl vec put with the wrong count exits 6" ctl vec put "$VID" --values "$W/v3.txt"
  expect_rc 1 "spmvctl vec create with two sources exits 1" ctl vec create --fill 1 --random --n 3

  # ops: y = A v into the fill vector, v.y and ||v||, against python
  printf '{"steps":[{"op":"spmv","matrix":"%s","x":"%s","y":"%s","alpha":1,"beta":0,"trans":"n","kernel":"cpu.csr.serial"},
 {"op":"dot","x":"%s","y":"%s","as":"vAv"},{"op":"nrm2","x":"%s","as":"vn"}]}\n' \
    "$SID" "$VID" "$FID" "$VID" "$FID" "$VID" >"$W/steps.json"
  expect_rc 0 "spmvctl --json ops FILE" ctl --json ops "$W/steps.json"
  cp "$W/out" "$W/ops.json"
  e=$(vt ops "$SPD" "$W/v2.txt" "$W/ops.json")
  check "ops: v.Av and ||v|| match python (rel err $e)" lt "$e" 1e-12
  expect_rc 0 "spmvctl ops - (stdin), table" sh -c "'$SPMVCTL' ops - <'$W/steps.json'"
  check "ops table lists the results and the steps" sh -c "grep -q '^vAv ' '$W/out' && grep -qE '^ +1  spmv ' '$W/out'"
  echo '{"steps":[{"op":"dot","x":"nope","y":"nope","as":"d"}]}' >"$W/bad_steps.json"
  expect_rc 2 "spmvctl ops with an unknown vector exits 2" ctl ops "$W/bad_steps.json"

  # solve: b = A·1 (python), so x = 1; the true residual recomputed in python
  vt b "$SPD" "$W/b.txt" >/dev/null
  expect_rc 0 "spmvctl solve --method cg --b --x-out" ctl solve "$SID" --method cg --tol 1e-10 --b "$W/b.txt" --x-out "$W/solve.x"
  check "solve prints converged yes and the iterations" sh -c "grep -q '^converged *yes' '$W/out' && grep -q '^iterations' '$W/out'"
  res=$(python3 "$W/mtx_tool.py" residual "$SPD" "$W/solve.x" 2>&1)
  check "spmvctl solve: true residual $res < 1e-8 (python)" lt "$res" 1e-8
  expect_rc 0 "spmvctl vec create --values b" ctl --json vec create --values "$W/b.txt" --like "$SID"
  BID=$(json_field "$W/out" 'd["id"]')
  expect_rc 0 "spmvctl --json solve bicgstab, jacobi, b and x as vectors" \
    ctl --json solve "$SID" --method bicgstab --precond jacobi --tol 1e-10 --b-vector "$BID" --x-vector "$FID"
  check "--json solve: converged, iterations, time" json_field "$W/out" 'd["converged"] and d["iterations"] > 0 and "total_ms" in d["time"]'
  ctl vec get "$FID" --out "$W/solve2.x" >/dev/null 2>&1
  res=$(python3 "$W/mtx_tool.py" residual "$SPD" "$W/solve2.x" 2>&1)
  check "solve into a vector: true residual $res < 1e-8 (python)" lt "$res" 1e-8
  expect_rc 0 "spmvctl solve --async gmres (waits for the job)" \
    ctl solve "$SID" --method gmres --restart 20 --tol 1e-10 --b "$W/b.txt" --async --x-out "$W/solve3.x"
  res=$(python3 "$W/mtx_tool.py" residual "$SPD" "$W/solve3.x" 2>&1)
  check "solve --async gmres: true residual $res < 1e-8 (python)" lt "$res" 1e-8
  expect_rc 0 "spmvctl --json solve --no-wait prints the job" ctl --json solve "$SID" --b "$W/b.txt" --no-wait
  SJOB=$(json_field "$W/out" 'd["job"]')
  check "solve --no-wait gives a job id" [ -n "$SJOB" ]
  expect_rc 0 "spmvctl job --cancel" ctl job "$SJOB" --cancel
  expect_rc 7 "spmvctl solve that hits maxit exits 7" ctl solve "$SID" --maxit 2 --tol 1e-14
  check "maxit: the answer is still printed" grep -q '^converged *no (maxit' "$W/out"
  # float32 and mixed matrices: b goes in the matrix's dtype and x comes back
  # in it, widened by the library (x of a float32 matrix was "64 bytes,
  # expected 128" before 0.4); binary and --json-request give the same x;
  # x0 in the body.
  for dt in float32 mixed; do
    expect_rc 0 "spmvctl upload --dtype $dt of the SPD matrix" ctl --json upload --name "spd-$dt" --dtype $dt "$SPD"
    DID=$(json_field "$W/out" 'd["id"]')
    expect_rc 0 "spmvctl solve of a $dt matrix --x-out - (binary)" ctl solve "$DID" --tol 1e-5 --b "$W/b.txt" --x-out -
    cp "$W/out" "$W/solve-$dt.x"
    check "$dt solve --x-out -: stdout is x, $N numbers and nothing else" \
      sh -c "[ \$(wc -l <'$W/solve-$dt.x') = $N ] && [ \$(grep -cE '^-?[0-9][0-9.e+-]*\$' '$W/solve-$dt.x') = $N ]"
    res=$(python3 "$W/mtx_tool.py" residual "$SPD" "$W/solve-$dt.x" 2>&1)
    check "$dt solve: true residual $res < 1e-4 (python)" lt "$res" 1e-4
    expect_rc 0 "spmvctl solve of a $dt matrix --json-request --x-out -" \
      ctl solve "$DID" --tol 1e-5 --b "$W/b.txt" --json-request --x-out -
    cp "$W/out" "$W/solve-$dt-json.x"
    d=$(vt maxdiff "$W/solve-$dt.x" "$W/solve-$dt-json.x")
    check "$dt solve: binary and --json-request give the same x (max diff $d)" lt "$d" 1e-6
    expect_rc 0 "spmvctl solve of a $dt matrix --json-request --x0 --x-out FILE" \
      ctl solve "$DID" --tol 1e-5 --b "$W/b.txt" --x0 "$W/solve-$dt.x" --json-request --x-out "$W/solve-$dt-json0.x"
    res=$(python3 "$W/mtx_tool.py" residual "$SPD" "$W/solve-$dt-json0.x" 2>&1)
    check "$dt solve --json-request from x0: true residual $res < 1e-4 (python)" lt "$res" 1e-4
    expect_rc 0 "spmvctl solve of a $dt matrix --x0 (binary, x0 in the body) --async" \
      ctl solve "$DID" --tol 1e-5 --b "$W/b.txt" --x0 "$W/solve-$dt.x" --async --x-out "$W/solve-$dt-x0.x"
    res=$(python3 "$W/mtx_tool.py" residual "$SPD" "$W/solve-$dt-x0.x" 2>&1)
    check "$dt solve --async from x0: true residual $res < 1e-4 (python)" lt "$res" 1e-4
    ctl rm "$DID" >/dev/null 2>&1
  done
  expect_rc 0 "spmvctl vec rm" ctl vec rm "$VID" "$FID" "$RID" "$BID"
  expect_rc 2 "spmvctl vec rm of a deleted vector exits 2" ctl vec rm "$VID"
  expect_rc 2 "spmvctl vec get of a deleted vector exits 2" ctl vec get "$VID"
  ctl rm "$SID" >/dev/null 2>&1

  # cg_solve in each mode on the same SPD matrices: the same x within tolerance
  # (run_cg above wrote the local mode's x as poisson2d.x and LFAT5.x).
  for pair in "poisson2d $W/poisson.mtx" "LFAT5 $REAL/LFAT5.mtx"; do
    set -- $pair
    [ -f "$2" ] && [ -f "$W/$1.x" ] || continue
    for mode in resident server; do
      run_cg "$1-$mode" "$2" --mode "$mode" --kernel cpu.csr.serial
    done
    d=$(vt maxdiff "$W/$1.x" "$W/$1-resident.x" "$W/$1-server.x")
    check "cg_solve $1: local, resident and server x agree (max diff $d < 1e-6)" lt "$d" 1e-6
  done
  "$CG" --mode resident --iters 7 --json --kernel cpu.csr.serial "$W/poisson.mtx" >"$W/iters.cg" 2>"$W/iters.err"
  check "cg_solve --mode resident --iters 7: ran 7 iterations" grep -q '^ran 7 iterations' "$W/iters.cg"
  tail -n 1 "$W/iters.cg" >"$W/iters.json"
  check "cg_solve --json: the last line is JSON, 7 iterations in 14 requests and 4 vectors" \
    json_field "$W/iters.json" 'd["iterations"] == 7 and d["mode"] == "resident" and d["requests"] == 18 and d["total_ms"] > 0 and "client_ms" in d'
  "$CG" --mode server --iters 5 --json "$W/poisson.mtx" >"$W/iters_s.cg" 2>"$W/iters_s.err"
  tail -n 1 "$W/iters_s.cg" >"$W/iters_s.json"
  check "cg_solve --mode server --iters 5: 5 iterations in 1 request" json_field "$W/iters_s.json" 'd["iterations"] == 5 and d["requests"] == 1'
  expect_rc 0 "spmvctl upload for --matrix-id" ctl --json upload "$W/poisson.mtx"
  MID=$(json_field "$W/out" 'd["id"]')
  expect_rc 0 "cg_solve --matrix-id --mode resident" "$CG" --matrix-id "$MID" --mode resident
  expect_rc 0 "cg_solve --matrix-id leaves the matrix" ctl info "$MID"
  ctl rm "$MID" >/dev/null 2>&1
  expect_rc 0 "docs example resident.c runs against the daemon" "$B/examples/resident" "$URL" "$W/poisson.mtx"
  check "resident.c: cg converged with x[0] = 1" grep -qE '^cg: converged after [0-9]+ iterations, relres .*, x\[0\] = (1\.000000|0\.999999)' "$W/out"
  check "docs/client.md includes resident.c verbatim" python3 -c '
import sys; doc = open("docs/client.md").read(); src = open("clients/examples/resident.c").read()
sys.exit(0 if src.strip() in doc else 1)'
  expect_rc 0 "spmvctl --json vec ls after cg_solve --mode resident" ctl --json vec ls
  check "cg_solve --mode resident left no vectors behind" json_field "$W/out" 'len(d["vectors"]) == 0'
fi

# ------------------------------------------------------- bearer token, TLS
printf 's3cret-%s\n' "$SEED" >"$W/token"
# start_extra SCHEME FLAGS...: another daemon, waited for on /v1/health (lib.sh's
# start_spmvd polls /v1/ready, which a token or https keeps from curl); sets XURL.
start_extra() {
  local scheme=$1 port; shift
  port=$(free_port)
  "$SPMVD" --listen "127.0.0.1:$port" --state-dir "$(mktemp -d "$W/state.XXXXXX")" --threads 2 "$@" \
    >"$W/extra.$port.log" 2>&1 &
  SPMVD_PIDS+=($!)
  XURL=$scheme://127.0.0.1:$port
  XLOG=$W/extra.$port.log
  for _ in $(seq 200); do curl -sk -o /dev/null --max-time 2 "$XURL/v1/health" && return 0; sleep 0.05; done
  return 1
}
if start_extra http --auth-token-file "$W/token"; then
  TURL=$XURL
  expect_rc 0 "token daemon: health needs no token" ctl --url "$TURL" health
  expect_rc 2 "token daemon: ls without a token exits 2" ctl --url "$TURL" ls
  check "token daemon: 401 reported as not authorised" grep -q "not authorised" "$W/err"
  printf 'wrong\n' >"$W/wrong"
  expect_rc 2 "token daemon: ls with a wrong token exits 2" ctl --url "$TURL" --token-file "$W/wrong" ls
  expect_rc 0 "token daemon: ls --token-file" ctl --url "$TURL" --token-file "$W/token" ls
  expect_rc 0 "token daemon: ls with SPMV_TOKEN" env SPMV_TOKEN="$(cat "$W/token")" "$SPMVCTL" --url "$TURL" ls
  expect_rc 0 "token daemon: cg_solve with SPMV_TOKEN" env SPMV_TOKEN="$(cat "$W/token")" "$CG" --url "$TURL" "$W/poisson.mtx"
  expect_rc 3 "token daemon: cg_solve without a token exits 3" "$CG" --url "$TURL" "$W/poisson.mtx"
  check "token daemon: cg_solve prints the refusal" grep -q "not authorised" "$W/err"
else
  not_ok "spmvd with --auth-token-file started"; diag_file "$XLOG"
fi

# TLS with a self-signed certificate for 127.0.0.1.
if command -v openssl >/dev/null &&
   openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
     -keyout "$W/key.pem" -out "$W/cert.pem" >/dev/null 2>&1; then
  start_extra https --tls-cert "$W/cert.pem" --tls-key "$W/key.pem" || diag_file "$XLOG"
  SURL=$XURL
  expect_rc 0 "TLS: health with --ca-file" ctl --url "$SURL" --ca-file "$W/cert.pem" health
  expect_rc 3 "TLS: an unverifiable certificate exits 3" ctl --url "$SURL" health
  expect_rc 0 "TLS: --insecure skips verification" ctl --url "$SURL" --insecure kernels
else
  skip "openssl could not make a certificate"
fi

# ------------------------------------------------ installed copy + pkg-config
P=$W/prefix
if make --no-print-directory -s BUILD="$BUILD" install-clients PREFIX="$P" DESTDIR= >"$W/install.log" 2>&1; then
  ok "make install-clients PREFIX=<tmp>"
else
  not_ok "make install-clients PREFIX=<tmp>"; diag_file "$W/install.log"
fi
check "installed header, .so.0 link, .a and .pc" test -f "$P/include/spmvclient.h" -a -L "$P/lib/libspmvclient.so.0" \
  -a -f "$P/lib/libspmvclient.a" -a -f "$P/lib/pkgconfig/spmvclient.pc"
soname=$(objdump -p "$P/lib/libspmvclient.so.0" 2>/dev/null | awk '$1 == "SONAME" {print $2}')
check "the shared library's soname is libspmvclient.so.0 ($soname)" [ "$soname" = libspmvclient.so.0 ]
nm -D --defined-only "$P/lib/libspmvclient.so.0" | awk 'NF == 3 {print $3}' >"$W/exports"
check "it exports only spmv_client_* ($(wc -l <"$W/exports") symbols)" \
  sh -c "[ -s '$W/exports' ] && ! grep -v '^spmv_client_' '$W/exports'"
check "every function in spmvclient.h is exported" bash -c "
  grep -oE 'spmv_client_[a-z_]+\(' clients/spmvclient.h | tr -d '(' | sort -u >'$W/declared'
  comm -23 '$W/declared' <(sort -u '$W/exports') | grep -q . && exit 1 || exit 0"
flags=$(PKG_CONFIG_PATH=$P/lib/pkgconfig pkg-config --cflags --libs spmvclient 2>&1)
check "pkg-config --cflags --libs spmvclient ($flags)" sh -c "echo '$flags' | grep -q -- '-lspmvclient'"
# The three-line program of docs/client.md, built against the installed copy.
# Under `make SAN=1` the library is instrumented: so must the program be.
san_flags=; [ "${SAN:-0}" = 1 ] && san_flags="-fsanitize=address,undefined"
if cc -Wall -Wextra -Werror $san_flags -o "$W/hello" clients/examples/hello.c $flags 2>"$W/cc.err"; then
  ok "docs example hello.c compiles against the installed library"
else
  not_ok "docs example hello.c compiles against the installed library"; diag_file "$W/cc.err"
fi
expect_rc 0 "hello runs against the daemon (installed .so)" env LD_LIBRARY_PATH="$P/lib" "$W/hello" "$URL"
check "hello prints the health answer" grep -q '"ok"' "$W/out"
expect_rc 0 "hello without a URL runs against \$SPMVD_URL (spmv_client_new(NULL))" \
  env -u SPMV_URL SPMVD_URL="$URL" LD_LIBRARY_PATH="$P/lib" "$W/hello"
check "hello at \$SPMVD_URL prints the health answer" grep -q '"ok"' "$W/out"
check "hello is linked to the installed libspmvclient.so.0" sh -c "LD_LIBRARY_PATH='$P/lib' ldd '$W/hello' | grep -q '$P/lib/libspmvclient.so.0'"
check "docs/client.md includes hello.c verbatim" python3 -c '
import sys; doc = open("docs/client.md").read(); src = open("clients/examples/hello.c").read()
sys.exit(0 if src.strip() in doc else 1)'
make --no-print-directory -s BUILD="$BUILD" uninstall-clients PREFIX="$P" DESTDIR= >/dev/null 2>&1
check "make uninstall-clients removes them" test ! -e "$P/include/spmvclient.h" -a ! -e "$P/lib/libspmvclient.so.0"

done_testing
