#!/usr/bin/env bash
# api.sh — end to end against a real spmvd: uploads, every CPU kernel in
# JSON and in binary compared with expected.json, list/describe/delete,
# async spmv, a bench job, spy.png, info, kernels and metrics.
#
# Every ../shared/matrices/real/ file is uploaded both ways, multipart and
# raw (the first of each way gzipped); one copy (alternately) is multiplied
# by x[j] = 1 + (j mod 7)/8 with every CPU kernel the daemon lists, the
# other with cpu.csr.serial, and y compared with the peer's
# answer in expected.json: float64 to 1e-12 of ||y||_inf, and a few
# float32 uploads to 1e-5 of ||y||_2. Outputs are collected with curl and
# checked in one python3 pass at the end (one process, not hundreds).
. "$(dirname "$0")/lib.sh"

REAL=$MATRICES/real
EXPECTED=$REAL/expected.json
[ -f "$EXPECTED" ] || { echo "1..0 # SKIP no $EXPECTED"; exit 0; }
OUT=$E2E_TMP/out; mkdir -p "$OUT"

if ! start_spmvd; then not_ok "spmvd starts" "$(tail -5 "$SPMVD_LOG")"; done_testing; exit; fi
ok "spmvd starts and is ready on $SPMVD_URL"

# --------------------------------------------------------- kernels, info
req GET /v1/kernels
expect_code "GET /v1/kernels" 200
# (not PBSR's: no shared real matrix has complete b x b blocks, so it refuses them all: auto.sh, test_real)
CPU_KERNELS=$(jget '" ".join(k["name"] for k in d["kernels"] if k["device"] == "cpu" and k["available"] and k.get("op", "spmv") == "spmv" and k["name"] != "auto" and k["format"] != "pbsr")')
check "every CPU kernel is listed available ($CPU_KERNELS)" [ "$(echo $CPU_KERNELS | wc -w)" -ge 5 ]
cp "$BODY_FILE" "$OUT/kernels.json"
check "GPU kernels list a reason when unavailable" \
  jget 'all(k["available"] or k.get("reason") for k in d["kernels"]) or 1/0'
check "every kernel names its operation (spmv or spmspm)" jget 'all(k["op"] in ("spmv", "spmspm") for k in d["kernels"]) or 1/0'
check "kernel parameters carry default, min and max" \
  jget 'all(all({"name","default","min","max"} <= set(p) for p in k["params"]) for k in d["kernels"]) or 1/0'
req GET /v1/info
expect_code "GET /v1/info" 200
check "info: version, build, devices with the CPU, limits" \
  jget '(d["version"] and "cuda" in d["build"] and d["devices"][0]["name"] == "cpu" and d["limits"]["max_upload_bytes"] > 0) or 1/0'
if [ "$(jget 'len(d["devices"])')" = 1 ]; then
  check "a CPU-only host lists auto on the device it runs on: cpu" \
    jget '[k["device"] for k in d["kernels"] if k["name"] == "auto"] == ["cpu"] or 1/0' "$OUT/kernels.json"
  if [ "$(jget 'd["build"]["cuda"]')" = True ] && [ ! -e /proc/driver/nvidia/version ]; then
    check "a CUDA build on a host without a GPU says so, not that a driver is too old" \
      jget '"no GPU on this host" in d["gpu_unavailable_reason"] or 1/0'
  fi
fi

# ----------------------------------------------------------------- upload
# x files for every matrix and dtype: JSON bodies per kernel and raw binary.
"$PYTHON" - "$EXPECTED" "$OUT" $CPU_KERNELS <<'PY'
import json, struct, sys
exp, out, kernels = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3:]
for name, m in exp["matrices"].items():
    cols = int(m["cols"])
    x = [1 + (j % 7) / 8 for j in range(cols)]
    for k in kernels:
        json.dump({"kernel": k, "x": x, "verify": True, "runs": 2, "warmup": 1}, open(f"{out}/{name}.{k}.req.json", "w"))
    open(f"{out}/{name}.x64", "wb").write(struct.pack(f"<{cols}d", *x))
    open(f"{out}/{name}.x32", "wb").write(struct.pack(f"<{cols}f", *x))
PY

# upload_one FILE NAME HOW SCOPE: HOW is multipart, raw, or either +gzip;
# SCOPE is "full" (every kernel) or "serial" (cpu.csr.serial in JSON only).
upload_one() {
  local f=$1 name=$2 how=$3 scope=$4 src=$1
  if [[ $how == *gzip ]]; then gzip -c "$f" >"$E2E_TMP/$name.gz"; src=$E2E_TMP/$name.gz; fi
  case $how in
    multipart*) upload_multipart "$src" "name=$name" ;;
    raw*) upload_raw "$src" "name=$name" ;;
  esac
  if [ "$CODE" = 201 ] && [ -n "$MATRIX_ID" ]; then
    uploaded=$((uploaded + 1)); echo "$name $MATRIX_ID float64 $how $scope" >>"$OUT/ids"
    cp "$BODY_FILE" "$OUT/$name.$how.desc.json"
  else
    failed_up="$failed_up $name($how:$CODE $(head -c 200 "$BODY_FILE"))"
  fi
}
# Every file both ways; which way gets the full kernel sweep alternates,
# and the first upload of each way is gzipped.
i=0; uploaded=0; failed_up=""
: >"$OUT/ids"
for f in "$REAL"/*.mtx; do
  name=$(basename "$f")
  if [ $((i % 2)) -eq 0 ]; then
    upload_one "$f" "$name" "multipart$([ $i -eq 0 ] && echo +gzip)" full
    upload_one "$f" "$name" raw serial
  else
    upload_one "$f" "$name" "raw$([ $i -eq 1 ] && echo +gzip)" full
    upload_one "$f" "$name" multipart serial
  fi
  i=$((i + 1))
done
nreal=$(ls "$REAL"/*.mtx | wc -l)
if [ "$uploaded" -eq $((2 * nreal)) ]; then ok "all $nreal real matrices uploaded both ways (multipart and raw, gzip each way): 201 + Location"
else not_ok "all $nreal real matrices uploaded" "failed:$failed_up"; fi

# a few in float32, one each way
for name in bcsstk13.mtx west0067.mtx rajat01.mtx; do
  if [ "$name" = west0067.mtx ]; then upload_raw "$REAL/$name" "dtype=float32&name=$name"
  else upload_multipart "$REAL/$name" dtype=float32 "name=$name"; fi
  if [ "$CODE" = 201 ]; then echo "$name $MATRIX_ID float32 f32 full" >>"$OUT/ids"
  else not_ok "float32 upload of $name" "HTTP $CODE $(head -c 200 "$BODY_FILE")"; fi
done

# --------------------------------------------------------------- multiply
while read -r name id dtype how scope; do
  kernels=$CPU_KERNELS; [ "$scope" = serial ] && kernels=cpu.csr.serial
  for k in $kernels; do
    curl -s -o "$OUT/$name.$dtype.$how.$k.json" -w '%{http_code}\n' --max-time 60 -H 'Content-Type: application/json' \
      --data-binary "@$OUT/$name.$k.req.json" "$SPMVD_URL/v1/matrices/$id/spmv" >"$OUT/$name.$dtype.$how.$k.json.code"
    [ "$scope" = serial ] && continue
    x=$OUT/$name.x64; [ "$dtype" = float32 ] && x=$OUT/$name.x32
    curl -s -o "$OUT/$name.$dtype.$how.$k.bin" -D "$OUT/$name.$dtype.$how.$k.bin.hdr" -w '%{http_code}\n' --max-time 60 \
      -H 'Content-Type: application/octet-stream' --data-binary "@$x" \
      "$SPMVD_URL/v1/matrices/$id/spmv?kernel=$k&verify=true&runs=2" >"$OUT/$name.$dtype.$how.$k.bin.code"
  done
done <"$OUT/ids"

# One pass over every answer: "OK|FAIL description [detail]" lines.
REAL="$REAL" TOOLS="$(cd "$(dirname "$0")/../../tools/bundle" && pwd)" "$PYTHON" - "$EXPECTED" "$OUT" $CPU_KERNELS <<'PY' >"$OUT/results"
import glob, json, math, os, struct, sys
exp, out, kernels = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3:]
sys.path.insert(0, os.environ["TOOLS"])
def symmetric(name):
    """Whether a float64 upload of name is exactly symmetric (its descriptor's word)."""
    return any(json.load(open(p)).get("symmetric") for p in glob.glob(f"{out}/{name}.*.desc.json"))
from padding import refused as rule_refuses, row_lengths
def refused(name, k, nnz):
    """Whether the padding rule refuses the format k reads (tools/bundle/padding.py, from the file)."""
    return rule_refuses(row_lengths(os.path.join(os.environ["REAL"], name)), k.split(".")[1])
def err(y, ref, dtype):
    d = max((abs(a - b) for a, b in zip(y, ref)), default=0.0)
    if dtype == "float64":
        scale = max((abs(v) for v in ref), default=0.0)
        return d / scale if scale else d, 1e-12
    scale = math.sqrt(sum(v * v for v in ref))
    return d / scale if scale else d, 1e-5
for line in open(f"{out}/ids"):
    name, mid, dtype, how, scope = line.split()
    m = exp["matrices"][name]
    ref = json.loads(m["y"]) if isinstance(m["y"], str) else m["y"]
    rows = int(m["rows"])
    if dtype == "float64":
        d = json.load(open(f"{out}/{name}.{how}.desc.json"))
        good = (d["rows"], d["cols"], d["nnz"]) == (rows, int(m["cols"]), int(m["nnz"]))
        print("OK" if good else "FAIL", f"descriptor of {name} ({how}): rows, cols, nnz as expected.json",
              "" if good else f"got {d['rows']} {d['cols']} {d['nnz']}")
    for k in (kernels if scope == "full" else ["cpu.csr.serial"]):
        for enc in (("json", "bin") if scope == "full" else ("json",)):
            base = f"{out}/{name}.{dtype}.{how}.{k}.{enc}"
            code = open(base + ".code").read().strip()
            what = f"{name} {dtype} {how} {k} {enc}"
            if k.split(".")[1] == "spsell" and code == "409":
                # symmetric matrices only; a float32 upload may differ (rounding can make a pair equal)
                body = open(base, "rb").read()
                good = b"exactly symmetric" in body and (dtype == "float32" or not symmetric(name))
                print("OK" if good else "FAIL", f"{what}: a matrix not exactly symmetric is refused: 409 saying so",
                      "" if good else f"HTTP {code} {body[:200]!r}")
                continue
            if refused(name, k, int(m["nnz"])):
                body = open(base, "rb").read()
                good = code == "422" and b"max_padding 3.00" in body and b"not built" in body
                print("OK" if good else "FAIL", f"{what}: the padding rule refuses its format: 422 with the numbers",
                      "" if good else f"HTTP {code} {body[:200]!r}")
                continue
            if code != "200":
                print("FAIL", what, f"HTTP {code} {open(base, 'rb').read()[:200]!r}")
                continue
            if enc == "json":
                a = json.load(open(base))
                y = [float(v) for v in a["y"]]
                stats, verify = a["stats"], a["verify"]
            else:
                raw = open(base, "rb").read()
                fmt = "d" if dtype == "float64" else "f"
                n = len(raw) // (8 if fmt == "d" else 4)
                y = list(struct.unpack(f"<{n}{fmt}", raw))
                hdr = [l.split(":", 1)[1].strip() for l in open(base + ".hdr") if l.lower().startswith("x-spmv-stats:")]
                a = json.loads(hdr[0]) if hdr else {}
                stats, verify = a.get("stats", {}), a.get("verify", {})
            if len(y) != rows:
                print("FAIL", what, f"y has {len(y)} values, want {rows}")
                continue
            e, tol = err(y, ref, dtype)
            good = e <= tol and stats.get("runs") == 2 and "median_ms" in stats and verify.get("max_rel_err") is not None
            print("OK" if good else "FAIL", f"{what}: y matches expected.json (rel err {e:.3g} <= {tol:g}), stats and verify present",
                  "" if good else f"stats={stats} verify={verify}")
PY
while read -r status desc; do
  if [ "$status" = OK ]; then ok "$desc"; else not_ok "$desc"; fi
done <"$OUT/results"
check "every multiply was checked ($(wc -l <"$OUT/results") results)" [ "$(wc -l <"$OUT/results")" -ge 100 ]

# ------------------------------------------------- list, describe, delete
req GET /v1/matrices
expect_code "GET /v1/matrices" 200
total=$(wc -l <"$OUT/ids")
check "the list holds every upload ($total)" jget "(d['count'] == $total and len(d['matrices']) == $total) or 1/0"
read -r name id _ _ _ <"$OUT/ids"
req GET "/v1/matrices/$id"
expect_code "GET /v1/matrices/{id}" 200
check "descriptor: id, name, symmetry, dtype, formats with bytes, timings" \
  jget "(d['id'] == '$id' and d['name'] == '$name' and d['symmetry'] and d['dtype'] == 'float64' and d['formats'][0]['bytes'] > 0 and 'parse_ms' in d['timings'] and 'store_ms' in d['timings']) or 1/0"

# --------------------------------------------------------------- async
req POST "/v1/matrices/$id/spmv" -H 'Content-Type: application/json' \
  --data-binary "$("$PYTHON" -c "import json; print(json.dumps({'kernel':'cpu.csr.serial','x':[1+(j%7)/8 for j in range($(jget 'd["cols"]'))],'async':True}))")"
expect_code "async spmv answers 202" 202
job=$(jget 'd["id"]')
check "async spmv: Location names the job" [ "$(header Location)" = "/v1/jobs/$job" ]
if wait_job "$job" 30; then
  check "async spmv job finishes with y" jget "(d['state'] == 'done' and d['progress'] == 1 and len(d['result']['y']) > 0) or 1/0"
else not_ok "async spmv job finishes" "$(head -c 300 "$BODY_FILE")"; fi

# ---------------------------------------------------------------- bench
bid=$(awk '$1 == "west0067.mtx" && $3 == "float64" {print $2; exit}' "$OUT/ids")
req POST "/v1/matrices/$bid/bench" -H 'Content-Type: application/json' --data-binary '{"runs":2,"warmup":1}'
expect_code "bench answers 202 with a job" 202
job=$(jget 'd["id"]')
if wait_job "$job" 120; then
  check "bench job done with a result table" jget "(d['state'] == 'done' and len(d['result']['results']) >= 5) or 1/0"
  check "bench: baseline cpu.csr.serial first with speedup 1" \
    jget "(d['result']['results'][0]['kernel'] == 'cpu.csr.serial' and d['result']['results'][0]['speedup'] == 1) or 1/0"
  check "bench: cpu.spsell.omp skipped (west0067 is not symmetric), saying why" \
    jget "any(s['kernel'] == 'cpu.spsell.omp' and 'symmetric' in s['reason'] for s in d['result']['skipped']) or 1/0"
  CPU_KERNELS_NONSYM=$(echo "$CPU_KERNELS" | tr ' ' '\n' | grep -vx cpu.spsell.omp | tr '\n' ' ')
  check "bench: every CPU kernel ran and verified" \
    jget "all(r.get('verified') or (r['kernel'] == 'cpu.pbsr.omp' and 'blocks' in r.get('error', '')) for r in d['result']['results']) and {r['kernel'] for r in d['result']['results']} - {'auto', 'cpu.pbsr.omp'} == set('$CPU_KERNELS_NONSYM'.split()) or 1/0"
  check "bench: cpu.pbsr.omp skipped (west0067 has no b x b blocks), saying why" \
    jget "any(s['kernel'] == 'cpu.pbsr.omp' and 'block' in s['reason'] for s in d['result']['skipped']) or 1/0"
  check "bench: auto ran too, verified, naming its choice (not skipped for want of a GPU)" \
    jget "[(r['verified'], r['auto']['kernel'] in '$CPU_KERNELS'.split()) for r in d['result']['results'] if r['kernel'] == 'auto'] == [(True, True)] and 'auto' not in [s['kernel'] for s in d['result']['skipped']] and d['result']['best']['kernel'] != 'auto' or 1/0"
  check "bench: hack sizes 16/32/64 swept for cpu.hll.omp" \
    jget "sorted(r['params']['hack_size'] for r in d['result']['results'] if r['kernel'] == 'cpu.hll.omp') == [16, 32, 64] or 1/0"
else not_ok "bench job finishes" "$(head -c 300 "$BODY_FILE")"; fi

# ------------------------------------------------------------------ spy
req GET "/v1/matrices/$bid/spy.png?size=48"
expect_code "spy.png answers 200" 200
check "spy.png is a PNG (signature, IHDR 48 pixels wide or high)" "$PYTHON" - "$BODY_FILE" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"\x89PNG\r\n\x1a\n" and b[12:16] == b"IHDR", "no PNG signature"
w, h = struct.unpack(">II", b[16:24])
assert max(w, h) == 48 or (w, h) == (67, 67) or max(w, h) <= 48, (w, h)
assert w > 0 and h > 0
PY
check "spy.png Content-Type image/png" [ "$(header Content-Type)" = image/png ]

# -------------------------------------------------------------- delete
req DELETE "/v1/matrices/$id"
expect_code "DELETE answers 204" 204
req GET "/v1/matrices/$id"
expect_code "the deleted matrix is gone (404)" 404
check "its file is gone from the state directory" [ ! -e "$SPMVD_STATE/$id.csr" ]
req GET /v1/matrices
check "the list is one shorter" jget "(d['count'] == $((total - 1))) or 1/0"

# --------------------------------------------------------------- metrics
req GET /metrics
expect_code "GET /metrics" 200
check "metrics: requests by route and status" grep -q 'spmvd_requests_total{route="spmv",status="200"}' "$BODY_FILE"
check "metrics: queue depth, kernel time, matrices resident" \
  bash -c "grep -q '^spmvd_queue_depth{device=\"cpu\"}' '$BODY_FILE' && grep -q '^spmvd_kernel_seconds_total{kernel=\"cpu.csr.omp\"}' '$BODY_FILE' && grep -q '^spmvd_matrices{device=\"cpu\"} $((total - 1))' '$BODY_FILE'"
check "log: one line per request (method, path, status, bytes, ms)" grep -qE 'POST /v1/matrices/[0-9a-f-]+/spmv 200 [0-9]+ B [0-9.]+ ms' "$SPMVD_LOG"

stop_spmvd; rc=$?
check "SIGTERM: exit status 0 (got $rc)" [ "$rc" -eq 0 ]
done_testing
