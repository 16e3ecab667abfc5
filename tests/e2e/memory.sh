#!/usr/bin/env bash
# memory.sh — formats on demand, the padding rule and the host format cache,
# on a CPU daemon (the device side runs in the bundle's test_gpu and
# api_test.py): uploads hold CSR alone; a kernel builds its format on first
# use and the descriptor then lists it with its bytes; with host_format_bytes
# set to one and a half ELLs, a second matrix's ELL evicts the first's (least
# recently used), the first's is rebuilt on its next use and answers right,
# and a pinned format is never evicted; a matrix with one full row and a
# power-law matrix get 422 naming the numbers for exactly the formats the
# rule (computed here in Python) refuses, holding no more bytes than before
# (ELL, HLL, PSELL; PCSR, unpadded, always builds and holds fewer bytes
# than the CSR); a pinned format the rule refuses is skipped at upload; auto keeps only its
# winner's format; max_padding 0 lifts the rule and max_format_bytes
# refuses by size; padding_allowance_bytes (default 256 MiB) builds a
# format past the ratio that is small (a bp_1200-like matrix, the
# one-full-row one), never the 43 GB ELL of a generated band with a dense
# row, and refuses one past it naming both keys. Products are checked against Python's. Matrices are
# drawn from $SPMV_SEED or $RANDOM (printed).
. "$(dirname "$0")/lib.sh"

SEED=${SPMV_SEED:-$RANDOM}
diag "seed $SEED"
body_has() { grep -q -- "$1" "$BODY_FILE"; }
expect() {
  if [ "$CODE" = "$2" ] && body_has "$3"; then ok "$1"
  else not_ok "$1" "expected HTTP $2 naming \"$3\", got $CODE" "$(head -c 300 "$BODY_FILE")"; fi
}

# A, B: 3000 x 3000 with 4..12 entries a row (ELL pads little); FULL: one
# row of 3000 among rows of 1..3; POW: power-law row lengths. meta.json: the
# ELL bytes of A and B, and what the padding rule says of each padded
# format of FULL and POW (slots > 3 nnz + 65536), computed here.
TOOLS="$(cd "$(dirname "$0")/../../tools/bundle" && pwd)" "$PYTHON" - "$E2E_TMP" "$SEED" <<'EOF'
import json, os, random, sys
sys.path.insert(0, os.environ["TOOLS"])
from padding import refused
out, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)
def write(name, n, lens):
    ent = []
    for i, l in enumerate(lens):
        for j in sorted(rng.sample(range(n), min(l, n))):
            ent.append((i, j, rng.uniform(-1, 1)))
    with open(f"{out}/{name}.mtx", "w") as f:
        f.write("%%%%MatrixMarket matrix coordinate real general\n%d %d %d\n" % (n, n, len(ent)))
        for i, j, v in ent:
            f.write("%d %d %.17g\n" % (i + 1, j + 1, v))
    real = [min(l, n) for l in lens]
    return real
def rule(lens):  # the slot rule alone: the first daemon runs with padding_allowance_bytes 0
    return {f: refused(lens, f, allowance=0) for f in ("ell", "hll", "hyb", "psell")}
n = 3000
meta = {}
for name in ("A", "B"):
    lens = write(name, n, [rng.randint(4, 12) for _ in range(n)])
    meta[name + "_ell_bytes"] = max(lens) * n * 12
full = [rng.randint(1, 3) for _ in range(n)]
full[rng.randrange(n)] = n
meta["FULL"] = rule(write("FULL", n, full))
pw = [max(1, min(n, int(rng.paretovariate(1.2)))) for _ in range(n)]
meta["POW"] = rule(write("POW", n, pw))
# BP: shaped like bp_1200 (a few entries a row, one row of 300): its ELL pads
# ~100x but takes ~10 MB, under padding_allowance_bytes' default
bp = [rng.randint(1, 2) for _ in range(n)]
bp[rng.randrange(n)] = 300
meta["BP_ell_bytes"] = max(bp) * n * 12
meta["BP_slot_rule"] = refused(bp, "ell", allowance=0)
write("BP", n, bp)
json.dump(meta, open(f"{out}/meta.json", "w"))
EOF
meta() { "$PYTHON" -c 'import json,sys; print(eval(sys.argv[1], {"m": json.load(open(sys.argv[2]))}))' "$1" "$E2E_TMP/meta.json"; }
ELL_A=$(meta 'm["A_ell_bytes"]'); ELL_B=$(meta 'm["B_ell_bytes"]')
BUDGET=$(( (ELL_A > ELL_B ? ELL_A : ELL_B) * 3 / 2 ))
diag "ELL bytes A $ELL_A, B $ELL_B; host_format_bytes $BUDGET"

start_spmvd --host-format-bytes "$BUDGET" --padding-allowance-bytes 0 || { not_ok "spmvd starts" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
ok "spmvd starts with host_format_bytes $BUDGET, padding_allowance_bytes 0 (the slot rule alone)"
req GET /v1/info
check "/v1/info lists max_padding 3, max_format_bytes 0, host_format_bytes, padding_allowance_bytes 0" \
  jget "(d['limits']['max_padding'] == 3 and d['limits']['max_format_bytes'] == 0 and d['limits']['host_format_bytes'] == $BUDGET and d['limits']['padding_allowance_bytes'] == 0) or 1/0"

XJSON=$("$PYTHON" -c "print([1 + (j % 7) / 8 for j in range(3000)])")
# spmv NAME ID KERNEL: runs it with x = 1 + (j mod 7)/8 and checks y against Python's product
spmv() {
  local name=$1 id=$2 k=$3
  req POST "/v1/matrices/$id/spmv" -H 'Content-Type: application/json' -d "{\"kernel\":\"$k\",\"x\":$XJSON,\"runs\":1}"
  if [ "$CODE" != 200 ]; then not_ok "$k on $name" "HTTP $CODE $(head -c 300 "$BODY_FILE")"; return; fi
  if "$PYTHON" - "$E2E_TMP/$name.mtx" "$BODY_FILE" <<'EOF'
import json, sys
lines = [l for l in open(sys.argv[1]) if not l.startswith("%")]
n = int(lines[0].split()[0])
x = [1 + (j % 7) / 8 for j in range(n)]
y = [0.0] * n
for l in lines[1:]:
    i, j, v = l.split()
    y[int(i) - 1] += float(v) * x[int(j) - 1]
got = [float(v) for v in json.load(open(sys.argv[2]))["y"]]
scale = max(abs(v) for v in y) or 1
sys.exit(0 if len(got) == n and max(abs(a - b) for a, b in zip(got, y)) / scale < 1e-12 else 1)
EOF
  then ok "$k on $name: 200, y matches Python's product"; else not_ok "$k on $name: y matches Python's product"; fi
}
host_formats() { req GET "/v1/matrices/$1"; jget '",".join(sorted(f["format"] for f in d["formats"] if f["device"] == "host"))'; }
host_bytes() { req GET "/v1/matrices/$1"; jget 'd["host_bytes"]'; }
evictions() { req GET /metrics; grep '^spmvd_format_evictions_total{device="host"}' "$BODY_FILE" | awk '{print $2}'; }

# ------------------------------------------------------- on first use
upload_raw "$E2E_TMP/A.mtx" "device=cpu&name=A"; expect_code "A uploads" 201; A=$MATRIX_ID
check "A's descriptor: CSR alone, pinned [csr]" \
  jget '([f["format"] for f in d["formats"]] == ["csr"] and d["pinned"] == ["csr"]) or 1/0'
upload_raw "$E2E_TMP/B.mtx" "device=cpu&name=B"; expect_code "B uploads" 201; B=$MATRIX_ID
HB0=$(host_bytes "$A")
spmv A "$A" cpu.ell.omp
check "A holds csr,ell after cpu.ell.omp" [ "$(host_formats "$A")" = "csr,ell" ]
check "A's host bytes grew by its ELL ($ELL_A)" [ "$(( $(host_bytes "$A") - HB0 ))" = "$ELL_A" ]
spmv A "$A" cpu.ell.omp
check "a second call keeps the one ELL" [ "$(host_formats "$A")" = "csr,ell" ]

# ------------------------------------------------------------ eviction
E0=$(evictions)
spmv B "$B" cpu.ell.omp
check "B's ELL evicted A's (least recently used): A holds csr" [ "$(host_formats "$A")" = "csr" ]
check "B holds csr,ell" [ "$(host_formats "$B")" = "csr,ell" ]
check "spmvd_format_evictions_total{device=\"host\"} counted it ($E0 -> $(evictions))" [ "$(evictions)" -gt "${E0:-0}" ]
spmv A "$A" cpu.ell.omp
check "A's ELL rebuilt on its next use, B's evicted" [ "$(host_formats "$A"):$(host_formats "$B")" = "csr,ell:csr" ]

# pinned: C (A's file) with its ELL pinned is never evicted
cp "$E2E_TMP/A.mtx" "$E2E_TMP/C.mtx"
upload_raw "$E2E_TMP/C.mtx" "device=cpu&name=C&formats=ell"; expect_code "C uploads with formats=ell" 201; C=$MATRIX_ID
check "C's descriptor: csr,ell held, both pinned" \
  jget '(sorted(f["format"] for f in d["formats"]) == ["csr", "ell"] and d["pinned"] == ["csr", "ell"]) or 1/0'
spmv B "$B" cpu.ell.omp
spmv A "$A" cpu.ell.omp
check "C's pinned ELL stayed through B's and A's builds" [ "$(host_formats "$C")" = "csr,ell" ]
spmv C "$C" cpu.ell.omp

# a generated random matrix is stored as its recipe and built again at restart (below)
req POST "/v1/matrices?generate=random&rows=500&cols=3000&nnz=4000&seed=3&device=cpu"
expect_code "generate=random 500 x 3000, 4000 entries" 201
RND=$(jget 'd["id"]'); RND_SHA=$(jget 'd["sha256"]')

# ------------------------------------------------------- padding rule
for name in FULL POW; do
  upload_raw "$E2E_TMP/$name.mtx" "device=cpu&name=$name"; expect_code "$name uploads" 201; id=$MATRIX_ID
  hb=$(host_bytes "$id")
  for k in cpu.ell.omp cpu.hll.omp cpu.psell.omp; do
    f=${k#cpu.}; f=${f%.omp}
    if [ "$(meta "m['$name']['$f']")" = True ]; then
      req POST "/v1/matrices/$id/spmv" -H 'Content-Type: application/json' -d "{\"kernel\":\"$k\",\"x\":$XJSON}"
      expect "$k on $name: 422 naming slots, non-zeros and max_padding (the rule refuses $f, Python says)" 422 "max_padding 3.00"
      check "$k on $name: 422 code too_large, nothing built (host bytes $hb unchanged)" \
        [ "$(jget 'd["error"]["code"]' "$BODY_FILE"):$(host_bytes "$id")" = "too_large:$hb" ]
    else
      spmv "$name" "$id" "$k"
    fi
  done
  spmv "$name" "$id" cpu.csr.omp
  spmv "$name" "$id" cpu.pcsr.omp
  eval "ID_$name=$id"
done
check "the one-full-row matrix's ELL and PSELL are refused by the rule (Python says)" \
  [ "$(meta 'm["FULL"]["ell"]'):$(meta 'm["FULL"]["psell"]')" = True:True ]
req GET "/v1/matrices/$ID_FULL"
check "FULL holds its PCSR on the host after cpu.pcsr.omp, fewer bytes than its CSR (row_ptr counted there)" \
  jget '(lambda h: 0 < h["pcsr"] < h["csr"])({f["format"]: f["bytes"] for f in d["formats"] if f["device"] == "host"}) or 1/0'

# a pinned format the rule refuses is skipped at upload
upload_raw "$E2E_TMP/FULL.mtx" "device=cpu&name=FULL-pinned&formats=ell,hyb"
expect_code "FULL uploads with formats=ell,hyb" 201
check "its ELL skipped (the rule), its HYB held" [ "$(jget '",".join(sorted(f["format"] for f in d["formats"]))')" = "csr,hyb" ]
upload_raw "$E2E_TMP/FULL.mtx" "device=cpu&name=FULL-packed&formats=pcsr,psell"
expect_code "FULL uploads with formats=pcsr,psell" 201
check "its PSELL skipped (the rule), its PCSR held" [ "$(jget '",".join(sorted(f["format"] for f in d["formats"]))')" = "csr,pcsr" ]

# ---------------------------------------------------------------- auto
req POST "/v1/matrices/$B/spmv" -H 'Content-Type: application/json' -d "{\"kernel\":\"auto\",\"x\":$XJSON}"
expect_code "auto on B" 200
WIN=$(jget 'd["kernel"]')
WF=$(req GET /v1/kernels; jget "[k['format'] for k in d['kernels'] if k['name'] == '$WIN'][0]")
check "after tuning B holds only CSR and its winner's format ($WIN reads $WF): $(host_formats "$B")" \
  "$PYTHON" -c "import sys; sys.exit(0 if set('$(host_formats "$B")'.split(',')) <= {'csr', '$WF'} else 1)"
stop_spmvd

# ----------------------------------------------- the rule's two keys
start_spmvd --max-padding 0 || { not_ok "spmvd restarts" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
spmv FULL "$ID_FULL" cpu.ell.omp
ok "max_padding 0 lifts the rule: the one-full-row matrix's ELL is built"
stop_spmvd
# ------------------------------------ the allowance: padding_allowance_bytes
check "BP's ELL ($(meta 'm["BP_ell_bytes"]') bytes) is past the slot rule (Python says)" [ "$(meta 'm["BP_slot_rule"]')" = True ]
start_spmvd || { not_ok "spmvd restarts with the default allowance" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
req GET "/v1/matrices/$RND"
check "the random matrix came back after the restart, rebuilt from its recipe: the same sha256, 500 x 3000, 4000 entries" \
  jget '(d["sha256"], d["rows"], d["cols"], d["nnz"], d["generated"]["kind"]) == ("'"$RND_SHA"'", 500, 3000, 4000, "random") or 1/0'
req GET /v1/info
check "/v1/info lists padding_allowance_bytes 268435456 (256 MiB, the default)" \
  jget "(d['limits']['padding_allowance_bytes'] == 268435456) or 1/0"
upload_raw "$E2E_TMP/BP.mtx" "device=cpu&name=BP"; expect_code "BP uploads" 201; BP=$MATRIX_ID
spmv BP "$BP" cpu.ell.omp
check "BP holds its ELL after cpu.ell.omp (past max_padding, within the allowance)" \
  "$PYTHON" -c "import sys; sys.exit(0 if 'ell' in '$(host_formats "$BP")'.split(',') else 1)"
spmv FULL "$ID_FULL" cpu.ell.omp
ok "the one-full-row matrix's ELL ($((3000 * 3000 * 12)) bytes) is built within the allowance"
# a generated band of 60000 rows with a dense row of 60000: ELL 60000^2 slots, 43 GB: still refused, naming both keys
req POST "/v1/matrices?generate=banded_dense_row&n=60000&per_row=4&dense_len=60000&device=cpu"
expect_code "banded_dense_row n=60000 generated" 201; BIG=$(jget 'd["id"]')
hb=$(host_bytes "$BIG")
"$PYTHON" -c 'import json; print(json.dumps({"kernel": "cpu.ell.omp", "runs": 1, "x": [1.0] * 60000}))' >"$E2E_TMP/x60k.json"
req POST "/v1/matrices/$BIG/spmv" -H 'Content-Type: application/json' --data-binary "@$E2E_TMP/x60k.json"
expect "its 43 GB ELL: 422 naming max_padding and padding_allowance_bytes" 422 'max_padding 3.00 allows.*padding_allowance_bytes 268435456'
check "nothing built for it (host bytes $hb unchanged)" [ "$(host_bytes "$BIG")" = "$hb" ]
stop_spmvd
start_spmvd --padding-allowance-bytes 1000000 || { not_ok "spmvd restarts" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
req POST "/v1/matrices/$BP/spmv" -H 'Content-Type: application/json' -d "{\"kernel\":\"cpu.ell.omp\",\"x\":$XJSON}"
expect "padding_allowance_bytes 1000000: BP's ELL refused, naming both keys" 422 'max_padding 3.00.*padding_allowance_bytes 1000000'
stop_spmvd
start_spmvd --max-format-bytes 1000 || { not_ok "spmvd restarts" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
req POST "/v1/matrices/$A/spmv" -H 'Content-Type: application/json' -d "{\"kernel\":\"cpu.ell.omp\",\"x\":$XJSON}"
expect "max_format_bytes 1000: A's ELL ($ELL_A bytes) refused by size" 422 "above max_format_bytes 1000"
spmv A "$A" cpu.csr.omp
stop_spmvd
done_testing
