#!/usr/bin/env bash
# restart.sh — persistence across restarts, and damaged files at start.
#
# Upload, multiply, SIGTERM, start again on the same state directory: the
# same matrices are listed and multiply to the same bytes. Then the test
# truncates one stored file and flips a byte in another: at the next start
# both are moved to damaged/ with a log line, the rest load, the daemon
# serves; a temp file a crash would leave is removed.
. "$(dirname "$0")/lib.sh"

REAL=$MATRICES/real
SPMVD_STATE=$E2E_TMP/state; mkdir -p "$SPMVD_STATE"
if ! start_spmvd; then not_ok "spmvd starts" "$(tail -5 "$SPMVD_LOG")"; done_testing; exit; fi
ok "spmvd starts on an empty state directory"

names=(karate.mtx west0067.mtx lp_afiro.mtx cage5.mtx)
ids=()
for name in "${names[@]}"; do
  dt=float64; [ "$name" = west0067.mtx ] && dt=float32
  upload_multipart "$REAL/$name" "dtype=$dt" "name=$name"
  [ "$CODE" = 201 ] && ids+=("$MATRIX_ID")
done
check "${#names[@]} matrices uploaded" [ "${#ids[@]}" -eq "${#names[@]}" ]

# y_before/N.bin per matrix, x = 1 + (j mod 7)/8 in the matrix dtype
multiply_all() { # DIR
  local i id dt cols
  mkdir -p "$1"
  for i in "${!ids[@]}"; do
    id=${ids[$i]}
    req GET "/v1/matrices/$id"
    [ "$CODE" = 200 ] || continue
    dt=$(jget 'd["dtype"]'); cols=$(jget 'd["cols"]')
    "$PYTHON" -c "import struct, sys; n = $cols; f = 'f' if '$dt' == 'float32' else 'd'; sys.stdout.buffer.write(struct.pack('<%d%s' % (n, f), *[1 + (j % 7) / 8 for j in range(n)]))" >"$1/$i.x"
    curl -s -o "$1/$i.y" -w '%{http_code}' --max-time 30 -H 'Content-Type: application/octet-stream' \
      --data-binary "@$1/$i.x" "$SPMVD_URL/v1/matrices/$id/spmv?kernel=cpu.csr.serial" >"$1/$i.code"
  done
}
multiply_all "$E2E_TMP/before"
req GET /v1/matrices; cp "$BODY_FILE" "$E2E_TMP/list-before.json"

stop_spmvd; rc=$?
check "SIGTERM: exit status 0 (got $rc)" [ "$rc" -eq 0 ]
check "the log says it stopped" grep -q stopped "$SPMVD_LOG"

if ! start_spmvd; then not_ok "spmvd restarts" "$(tail -5 "$SPMVD_LOG")"; done_testing; exit; fi
ok "spmvd restarts on the same state directory"
req GET /v1/matrices
check "the same matrices are listed after the restart" "$PYTHON" - "$E2E_TMP/list-before.json" "$BODY_FILE" <<'PY'
import json, sys
a, b = (json.load(open(p))["matrices"] for p in sys.argv[1:3])
key = lambda m: (m["id"], m["name"], m["rows"], m["cols"], m["nnz"], m["dtype"], m["symmetry"])
assert sorted(map(key, a)) == sorted(map(key, b)), (a, b)
PY
multiply_all "$E2E_TMP/after"
same=0
for i in "${!ids[@]}"; do
  [ "$(cat "$E2E_TMP/after/$i.code")" = 200 ] && cmp -s "$E2E_TMP/before/$i.y" "$E2E_TMP/after/$i.y" && same=$((same + 1))
done
check "every matrix multiplies to the same bytes after the restart ($same/${#ids[@]})" [ "$same" -eq "${#ids[@]}" ]
stop_spmvd

# ---------------------------------------------------------------- damage
f0=$SPMVD_STATE/${ids[0]}.csr f1=$SPMVD_STATE/${ids[1]}.csr
size=$(stat -c %s "$f0")
truncate -s $((size - 7)) "$f0"
"$PYTHON" - "$f1" <<'PY'
import os, sys
p = sys.argv[1]
with open(p, "r+b") as f:
    f.seek(os.path.getsize(p) - 5)
    b = f.read(1)
    f.seek(-1, 1)
    f.write(bytes([b[0] ^ 0x40]))
PY
echo "half" >"$SPMVD_STATE/.${ids[2]}.tmp"
if ! start_spmvd; then not_ok "spmvd starts with damaged files" "$(tail -5 "$SPMVD_LOG")"; done_testing; exit; fi
ok "spmvd starts with a truncated and a flipped file in its state directory"
req GET /v1/matrices
check "the two good matrices load, the damaged ones do not" \
  jget "(sorted(m['id'] for m in d['matrices']) == sorted(['${ids[2]}', '${ids[3]}'])) or 1/0"
check "the truncated file is in damaged/" [ -f "$SPMVD_STATE/damaged/${ids[0]}.csr" ]
check "the flipped file is in damaged/" [ -f "$SPMVD_STATE/damaged/${ids[1]}.csr" ]
check "neither is left in the state directory" [ ! -e "$f0" ] && [ ! -e "$f1" ]
check "the log names each damaged file" \
  bash -c "grep -q 'damaged.*${ids[0]}' '$SPMVD_LOG' && grep -q '${ids[1]}.*checksum' '$SPMVD_LOG'"
check "the crash's temp file is removed" [ ! -e "$SPMVD_STATE/.${ids[2]}.tmp" ]
ids=("${ids[@]:2}")
multiply_all "$E2E_TMP/damaged"
check "the surviving matrices still multiply the same" \
  bash -c "cmp -s '$E2E_TMP/before/2.y' '$E2E_TMP/damaged/0.y' && cmp -s '$E2E_TMP/before/3.y' '$E2E_TMP/damaged/1.y'"
req GET "/v1/matrices/${ids[0]}"
expect_code "describe works after the reload" 200
check "timings survive the restart" jget "(d['timings']['parse_ms'] > 0) or 1/0"
stop_spmvd; rc=$?
check "SIGTERM: exit status 0 (got $rc)" [ "$rc" -eq 0 ]
done_testing
