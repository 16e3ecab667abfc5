#!/usr/bin/env bash
# newcomer.sh — what a new user tripped on (issue 28, "Why" items 8-10), on
# a CPU host: GET /v1/jobs lists the jobs; cpu.hll.omp reports the
# hack_size it ran with; tuning `auto` keeps the formats held before it
# (pinned and built by the user's calls); timings carry at most 6
# significant digits while other numbers keep every digit of their
# float64; spmvctl bench sums up the kernels it skipped for one reason on
# one line; a C program builds against the build folder without `make
# install` (docs/client.md). A random matrix from $SPMV_SEED or $RANDOM (printed).
. "$(dirname "$0")/lib.sh"

SPMVCTL=${SPMVCTL:-$BUILD_DIR/spmvctl}
SEED=${SPMV_SEED:-$RANDOM}
diag "seed $SEED"
start_spmvd --tune-budget-ms 400 || { not_ok "spmvd starts" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
ok "spmvd starts"
n=$((200 + SEED % 300))
"$BUILD_DIR/spmv-gen" --kind uniform --n "$n" --per-row 7 --seed "$SEED" --out "$E2E_TMP/a.mtx" >/dev/null
upload_raw "$E2E_TMP/a.mtx" "name=a&formats=csr,ell&hack_size=16"
expect_code "a $n x $n matrix is stored with ell pinned and hack_size 16" 201
ID=$MATRIX_ID
x=$("$PYTHON" -c "import random; random.seed($SEED); print([random.uniform(-1, 1) for _ in range($n)])")

# ------------------------------------------------------------- jobs
req GET /v1/jobs
that "GET /v1/jobs with none: 200, an empty list" '[ "$CODE" = 200 ] && [ "$(jget "d[\"count\"]")" = 0 ]'
req POST "/v1/matrices/$ID/bench" -H 'Content-Type: application/json' -d '{"kernels":["cpu.csr.serial"],"runs":2}'
J1=$(jget 'd["id"]')
req POST "/v1/matrices/$ID/spmv" -H 'Content-Type: application/json' -d "{\"x\": $x, \"async\": true}"
J2=$(jget 'd["id"]')
wait_job "$J1"; wait_job "$J2"
req GET /v1/jobs
that "GET /v1/jobs lists both jobs, newest first, without their results" \
  '[ "$CODE" = 200 ] && jget "([j[\"id\"] for j in d[\"jobs\"]] == [\"$J2\", \"$J1\"] and d[\"count\"] == 2 and
     all(\"result\" not in j and j[\"state\"] == \"done\" and j[\"kind\"] for j in d[\"jobs\"])) or 1/0"'

# ------------------------------------------------------- hack_size
req POST "/v1/matrices/$ID/spmv" -H 'Content-Type: application/json' -d "{\"x\": $x, \"kernel\": \"cpu.hll.omp\"}"
that "cpu.hll.omp without hack_size reports the one it ran with (the matrix's 16), not 0" \
  '[ "$CODE" = 200 ] && [ "$(jget "d[\"params\"][\"hack_size\"]")" = 16 ]'
req POST "/v1/matrices/$ID/spmv" -H 'Content-Type: application/json' -d "{\"x\": $x, \"kernel\": \"cpu.hll.omp\", \"hack_size\": 8}"
that "... and the one asked for when asked" '[ "$CODE" = 200 ] && [ "$(jget "d[\"params\"][\"hack_size\"]")" = 8 ]'

# ------------------------------------------------- tuning keeps formats
req POST "/v1/matrices/$ID/spmv" -H 'Content-Type: application/json' -d "{\"x\": $x, \"kernel\": \"cpu.pcsr.omp\"}"
req GET "/v1/matrices/$ID"
before=$(jget '" ".join(sorted(f["format"] for f in d["formats"]))')
req POST "/v1/matrices/$ID/tune"
expect_code "tune" 200
req GET "/v1/matrices/$ID"
after=$(jget '" ".join(sorted(f["format"] for f in d["formats"]))')
that "tuning keeps every format held before it: pinned ell, pcsr built by a call ($before -> $after)" \
  '[ -n "$before" ] && for f in $before; do echo " $after " | grep -q " $f " || exit 1; done'

# ---------------------------------------------------------- digits
curl -s -H 'Content-Type: application/json' -d "{\"x\": $x, \"kernel\": \"cpu.csr.omp\", \"runs\": 7}" \
  "$SPMVD_URL/v1/matrices/$ID/spmv" >"$E2E_TMP/answer.json"
"$PYTHON" - "$E2E_TMP/answer.json" "$E2E_TMP/a.mtx" "$x" >"$E2E_TMP/digits" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
timings = re.findall(r'"(\w+_ms|gflops|gbps)":(-?[0-9.eE+-]+)', text)
digits = lambda v: len(re.sub(r"[eE].*$", "", v).replace("-", "").replace(".", "").lstrip("0").rstrip("0") or "0")
long_ones = [(k, v) for k, v in timings if digits(v) > 6]
print("timings", len(timings), "longer than 6 digits:", long_ones)
y = re.search(r'"y":\[([^\]]*)\]', text).group(1).split(",")
d = json.loads(text)
print("y_round_trip", all(float(a) == b for a, b in zip(y, d["y"])) and len(y) == len(d["y"]))
sys.exit(0 if timings and not long_ones else 1)
PY
check "timings are written with at most 6 significant digits ($(head -1 "$E2E_TMP/digits"))" [ $? -eq 0 ]
check "y keeps every float64 digit" grep -q 'y_round_trip True' "$E2E_TMP/digits"
# a job's envelope (queue_ms, run_ms, age_s) is written as the answers are
curl -s -H 'Content-Type: application/json' -d '{"runs": 3, "kernels": ["cpu.csr.serial"]}' \
  "$SPMVD_URL/v1/matrices/$ID/bench" >"$E2E_TMP/job.json"
JOB=$(jget 'd["id"]' "$E2E_TMP/job.json")
curl -s "$SPMVD_URL/v1/jobs/$JOB?wait=30" >"$E2E_TMP/job.json"
"$PYTHON" - "$E2E_TMP/job.json" >"$E2E_TMP/jobdigits" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
d = json.loads(text)
timings = re.findall(r'"(\w+_ms|\w+_s|gflops|gbps)":(-?[0-9.eE+-]+)', text)
digits = lambda v: len(re.sub(r"[eE].*$", "", v).replace("-", "").replace(".", "").lstrip("0").rstrip("0") or "0")
long_ones = [(k, v) for k, v in timings if digits(v) > 6]
print("state", d.get("state"), "timings", len(timings), "longer than 6 digits:", long_ones)
sys.exit(0 if d.get("state") == "done" and "run_ms" in d and "queue_ms" in d and not long_ones else 1)
PY
check "a job's text (envelope and result) writes timings with at most 6 digits ($(head -1 "$E2E_TMP/jobdigits"))" [ $? -eq 0 ]

# ---------------------------------------------- spmvctl bench, skipped
if [ -x "$SPMVCTL" ]; then
  SPMV_URL=$SPMVD_URL "$SPMVCTL" bench "$ID" --runs 1 >"$E2E_TMP/bench.out" 2>&1
  nskipped=$(curl -s "$SPMVD_URL/v1/kernels" | jget 'len([k for k in d["kernels"] if not k["available"] and k["op"] == "spmv"])' /dev/stdin)
  if [ "$nskipped" -gt 1 ]; then
    # the SPSELL kernels skip a matrix that is not symmetric, and PBSR's one without blocks, for a reason
    # of their own: a line each
    that "spmvctl bench: the $nskipped kernels skipped for one reason are one line" \
      '[ "$(grep "^skipped" "$E2E_TMP/bench.out" | grep -v "spsell.*symmetric" | grep -vc "pbsr.*blocks")" = 1 ] && grep -q "^skipped $nskipped kernels (.* and $((nskipped - 3)) more): " "$E2E_TMP/bench.out"'
  else
    skip "spmvctl bench: this host skips no kernels"
  fi
else
  skip "no spmvctl in $BUILD_DIR"
fi

# -------------------------------- a C program against the build folder
if command -v cc >/dev/null && [ -f "$BUILD_DIR/libspmvclient.so" ]; then
  hello=$SPMV_ROOT/clients/examples/hello.c
  # A sanitizer build's library needs the sanitizer runtimes in the program too.
  san_flags=; [ "${SAN:-0}" = 1 ] && san_flags="-fsanitize=address,undefined"
  flags="$(PKG_CONFIG_PATH=$BUILD_DIR pkg-config --cflags --libs spmvclient 2>&1) $san_flags"
  that "pkg-config with PKG_CONFIG_PATH=\$BUILD finds spmvclient-uninstalled.pc: a program builds and runs" \
    'cc "$hello" $flags -o "$E2E_TMP/hello1" && "$E2E_TMP/hello1" "$SPMVD_URL" | grep -q "\"status\":\"ok\""'
  that "docs/client.md's -I clients -L build recipe builds and runs" \
    'cc "$hello" -I "$SPMV_ROOT/clients" -L "$BUILD_DIR" -Wl,-rpath,"$BUILD_DIR" -lspmvclient $san_flags -o "$E2E_TMP/hello2" &&
     "$E2E_TMP/hello2" "$SPMVD_URL" | grep -q "\"status\":\"ok\""'
else
  skip "no C compiler or no libspmvclient.so in $BUILD_DIR"
fi
done_testing
