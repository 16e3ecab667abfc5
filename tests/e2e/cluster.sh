#!/usr/bin/env bash
# cluster.sh — spmvd under mpirun (issue 16): sharded matrices end to end.
#
# Starts `mpirun -np 3 --oversubscribe spmvd` (CI has two cores and runs as
# root), uploads every shared real matrix with shard=true, multiplies each
# with several CPU kernels and auto, and checks y against the peer's SciPy
# answer (expected.json) and cpu.csr.serial (verify). Then what sharded
# matrices refuse (422, 409), persistence (SIGTERM to rank 0 stops every
# rank with status 0; a restart with 2 ranks re-shards the stored files),
# vectors distributed like a sharded matrix (cluster_vectors.py: products,
# /v1/ops and a CG on the ranks' slices against Python),
# sharding by configuration (shard_nnz), each rank's shard files (a restart
# with as many ranks reads them; a damaged one is sent again; DELETE
# removes them), and failures: a rank stopped with SIGSTOP in the middle of
# a product fails it with a clear 503 at cluster_timeout_ms, no hang; with
# cluster_timeout_ms at 30 s, a rank stopped while the job is idle is seen
# by the heartbeat (cluster_heartbeat_ms) and a rank killed with SIGKILL by
# rank 0's look at its host's processes, even with a product in flight,
# each within seconds (the times from the signal to /v1/ready's 503 and to
# a sharded product's 503 are measured and printed); unsharded matrices keep
# working, and SIGTERM to rank 0 still ends the job. Then, with the /proc
# look off (cluster_local_liveness false), a rank stopped and a rank killed
# a second into a product of several seconds are seen by their pulse
# (cluster_pulse_ms) alone, within 2 s, as a rank on another host would be. Skipped with the reason in a build
# without MPI or on a host without mpirun.
#
# With SPMV_CLUSTER_GPU=1 (the GPU bundle, tools/bundle/cluster-gpu.sh, on
# a host of 2 or more GPUs) the same runs on SPMV_CLUSTER_NP ranks (2) with
# the shards on their GPUs:
# every GPU kernel and auto (the halo over NCCL), a CPU kernel refused
# with 409, and the restart on 1 rank.
. "$(dirname "$0")/lib.sh"

REAL=$MATRICES/real
GPU=${SPMV_CLUSTER_GPU:-0}
NP=3 NP_RESTART=2
KERNELS="cpu.csr.serial cpu.csr.omp cpu.csr.chunked cpu.ell.omp cpu.hll.omp auto"
if [ "$GPU" = 1 ]; then
  NP=${SPMV_CLUSTER_NP:-2} # one rank a GPU
  NP_RESTART=$((NP - 1))
  KERNELS="gpu.csr.scalar gpu.csr.vector gpu.csr.adaptive gpu.csr.light cusparse.csr gpu.ell gpu.hll gpu.pcsr gpu.psell auto"
fi
. "$(dirname "$0")/cluster_lib.sh"
[ "$GPU" = 1 ] && MPI_FLAGS+=(-x NCCL_NVLS_ENABLE=0)
JOB_FLAGS=(--shard-nnz 20000 --allow-shm true)

# check_y FILE ANSWER: the answer's y against expected.json's (float64 1e-12).
check_y() {
  "$PYTHON" - "$MATRICES/real/expected.json" "$1" "$2" <<'EOF'
import json, sys
exp, name, ans = json.load(open(sys.argv[1])), sys.argv[2], json.load(open(sys.argv[3]))
m = exp["matrices"]
m = next(v for v in m if v["file"] == name) if isinstance(m, list) else m[name]
ref, y = m["y"], ans["y"]
scale = max(max(abs(v) for v in ref), 1e-300)
err = max(abs(a - b) for a, b in zip(y, ref)) / scale if ref else 0.0
sys.exit(0 if len(y) == len(ref) and err <= 1e-12 and ans["verify"]["max_rel_err"] <= 1e-12 else 1)
EOF
}

if ! start_job $NP; then not_ok "mpirun -np $NP spmvd starts and turns ready" "$(tail -20 "$JOB_LOG")"; done_testing; exit; fi
ok "mpirun -np $NP spmvd starts and turns ready"
req GET /v1/info
check "/v1/info shows the cluster of $NP ranks" [ "$(jget 'd["cluster"]["ranks"], d["cluster"]["state"]')" = "($NP, 'ok')" ]
check "rank 0 wrote rank0.pid" [ -s "$STATE/rank0.pid" ]
check "$((NP - 1)) other ranks run" [ "$(other_ranks | wc -l)" -eq $((NP - 1)) ]

# ------------------------------------------------------ every real matrix
declare -A IDS
files=$(cd "$REAL" && ls *.mtx)
bad_upload=0
for f in $files; do
  upload_multipart "$REAL/$f" shard=true "name=$f"
  if [ "$CODE" != 201 ] || [ "$(jget 'len(d["shards"]) == '$NP' and d["sharded"] and sum(s["nnz"] for s in d["shards"]) == d["nnz"] and d["shards"]['$((NP - 1))']["rows"][1] == d["rows"] and all(s["device"].startswith("gpu") == bool('$GPU') for s in d["shards"]) and all(0 <= s["edge_rows"] <= (s["rows"][1] - s["rows"][0]) // 4 and (s["edge_rows"] == 0 or s["device"].startswith("gpu")) for s in d["shards"])')" != True ]; then
    bad_upload=$((bad_upload + 1)); diag "$f: $CODE $(head -c 300 "$BODY_FILE")"
  fi
  IDS[$f]=$MATRIX_ID
done
check "every real matrix uploads with shard=true: $NP shards covering its rows and non-zeros, on $([ "$GPU" = 1 ] && echo GPUs || echo hosts), edge_rows at most a quarter of a shard's rows (0 on a host)" [ "$bad_upload" -eq 0 ]

for k in $KERNELS; do
  bad=0
  for f in $files; do
    n=$(jget 'd["cols"]' <(curl -s "$SPMVD_URL/v1/matrices/${IDS[$f]}"))
    x=$("$PYTHON" -c "import json; print(json.dumps([1 + (j % 7) / 8 for j in range($n)]))")
    req POST "/v1/matrices/${IDS[$f]}/spmv" -H 'Content-Type: application/json' \
      -d "{\"kernel\":\"$k\",\"x\":$x,\"runs\":2,\"verify\":true}"
    if [ "$CODE" = 422 ] && grep -q padding "$BODY_FILE"; then continue; fi  # ELL refused on a long row
    if [ "$CODE" != 200 ] || ! check_y "$f" "$BODY_FILE" ||
       [ "$(jget '"compute_ms" in d["stats"] and "comm_ms" in d["stats"] and d["cluster"]["ranks"] == '$NP)" != True ]; then
      bad=$((bad + 1)); diag "$k on $f: $CODE $(head -c 300 "$BODY_FILE")"
    fi
  done
  check "$k: sharded y of every real matrix equals SciPy's and cpu.csr.serial's, with compute_ms and comm_ms" [ "$bad" -eq 0 ]
done

# the binary form: y back as bytes, the split in X-SpMV-Stats
f=bcsstk13.mtx
"$PYTHON" -c "import struct; open('$E2E_TMP/x.bin','wb').write(struct.pack('<2003d', *[1 + (j % 7) / 8 for j in range(2003)]))"
BK=cpu.csr.omp; [ "$GPU" = 1 ] && BK=gpu.csr.vector
OK_K=cpu.csr.omp; [ "$GPU" = 1 ] && OK_K=gpu.csr.vector
req POST "/v1/matrices/${IDS[$f]}/spmv?kernel=$BK" -H 'Content-Type: application/octet-stream' --data-binary "@$E2E_TMP/x.bin"
check "binary spmv on a sharded matrix: 200, 2003 values, comm_ms in X-SpMV-Stats" \
  [ "$CODE" = 200 ] && [ "$(stat -c %s "$BODY_FILE")" -eq $((2003 * 8)) ] && header X-SpMV-Stats | grep -q comm_ms

# ------------------------------------------------------ what it refuses
ID=${IDS[$f]}
X2003=$("$PYTHON" -c 'import json; print(json.dumps([1.0] * 2003))')
req POST "/v1/matrices/$ID/spmv" -d '{"kernel":"'$OK_K'","x":'"$X2003"',"op":"t"}'
check "op t on a sharded matrix: 422 naming it" [ "$CODE" = 422 ] && grep -q "op t" "$BODY_FILE"
if [ "$GPU" = 1 ]; then
  req POST "/v1/matrices/$ID/spmv" -d '{"kernel":"cpu.csr.omp","x":'"$X2003"'}'
  check "a CPU kernel on GPU shards: 409" [ "$CODE" = 409 ]
else
  req POST "/v1/matrices/$ID/spmv" -d '{"kernel":"gpu.csr.scalar","x":'"$X2003"'}'
  check "a GPU kernel on host shards: 409" [ "$CODE" = 409 ]
fi
req POST "/v1/matrices/$ID/bench" -d '{}'
check "bench on a sharded matrix: 422" [ "$CODE" = 422 ]
req POST "/v1/matrices/$ID/spmspm" -d "{\"b\":\"$ID\"}"
check "SpMSpM on a sharded matrix: 422" [ "$CODE" = 422 ]
upload_multipart "$REAL/karate.mtx" shard=maybe
check "shard=maybe: 400" [ "$CODE" = 400 ]
upload_multipart "$REAL/karate.mtx" "name=whole"
WHOLE=$MATRIX_ID
check "an unsharded upload next to them: 201, sharded false" [ "$CODE" = 201 ] && [ "$(jget 'd["sharded"]')" = False ]
# shard_nnz 20000 (the job's flag): bcsstk13 (83883 entries) shards unasked, but not when a device is named
upload_multipart "$REAL/bcsstk13.mtx" "name=big_enough"
check "an upload of >= shard_nnz entries naming neither shard nor device: sharded across $NP" [ "$CODE" = 201 ] && \
  [ "$(jget 'd["sharded"] and len(d["shards"]) == '$NP)" = True ]
req DELETE "/v1/matrices/$MATRIX_ID"
upload_multipart "$REAL/bcsstk13.mtx" "name=named_device" device=cpu
check "the same naming device=cpu: not sharded" [ "$CODE" = 201 ] && [ "$(jget 'd["sharded"]')" = False ]
req DELETE "/v1/matrices/$MATRIX_ID"
if [ "$GPU" = 1 ]; then
  req POST "/v1/matrices/$WHOLE/spmv" -d '{"kernel":"gpu.csr.vector","x":'"$("$PYTHON" -c 'import json; print(json.dumps([1.0] * 34))')"',"verify":true}'
  check "it multiplies on rank 0's GPU beside the shards (200, verified)" [ "$CODE" = 200 ] && \
    [ "$(jget 'd["device"].startswith("gpu") and d["verify"]["max_rel_err"] <= 1e-12')" = True ]
fi
check "spmv still answers 200 on every rank's matrix (healthy)" healthy

# distributed vectors: x and y kept on the ranks, /v1/ops and a CG there
SPMV_SEED=${SPMV_SEED:-$RANDOM} "$PYTHON" "$(dirname "$0")/cluster_vectors.py" "$SPMVD_URL" "$ID" "$REAL/$f" \
  "${IDS[karate.mtx]}" $NP "$OK_K" >"$E2E_TMP/cluster_vectors.tap" 2>&1
relay_tap "$E2E_TMP/cluster_vectors.tap" $? cluster_vectors.py

# spmv_expected KERNEL: $ID (bcsstk13, 2003 columns) times the peer's x,
# x[j] = 1 + (j mod 7)/8, verified; check_y then compares with SciPy's.
X_EXPECTED=$("$PYTHON" -c 'import json; print(json.dumps([1 + (j % 7) / 8 for j in range(2003)]))')
spmv_expected() {
  req POST "/v1/matrices/$ID/spmv" -H 'Content-Type: application/json' \
    -d "{\"kernel\":\"$1\",\"x\":$X_EXPECTED,\"verify\":true}"
}

# ------------------------------------------------------ each rank's shard files
# every rank > 0 keeps the shards it was sent (state/shards/r<rank>/<id>.shard)
files_ok=1
for f in $files; do
  for ((q = 1; q < NP; q++)); do [ -s "$STATE/shards/r$q/${IDS[$f]}.shard" ] || files_ok=0; done
done
check "every rank > 0 keeps a file of each shard it was sent" [ "$files_ok" = 1 ]
req DELETE "/v1/matrices/$(jget 'd["id"]' <(curl -s "$SPMVD_URL/v1/matrices/${IDS[karate.mtx]}"))"
check "DELETE of a sharded matrix: 204, and its shard files are gone on every rank" [ "$CODE" = 204 ] && \
  [ -z "$(ls "$STATE"/shards/r*/"${IDS[karate.mtx]}".shard 2>/dev/null)" ]

# a matrix the daemon generates, sharded: stored as its recipe, cut from the CSR it builds
req POST "/v1/matrices?generate=band&n=3000&per_row=21&shard=true&name=genband"
GEN=$(jget 'd.get("id", "")')
check "generate=band with shard=true: 201, sharded across $NP, the recipe kept" [ "$CODE" = 201 ] && \
  [ "$(jget 'd["sharded"] and len(d["shards"]) == '$NP' and d["generated"]["kind"] == "band"')" = True ]
# band_ok: the answer's y for x = 1 against the band's formula (row sums), and verify
band_ok() {
  "$PYTHON" - "$BODY_FILE" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
n, h = 3000, 10
ref = [sum(1 + ((i + 3 * j) % 7) / 8 for j in range(max(0, i - h), min(n, i + h + 1))) for i in range(n)]
y = d["y"]
sys.exit(0 if len(y) == n and max(abs(a - b) for a, b in zip(y, ref)) <= 1e-12 * max(ref)
         and d["verify"]["max_rel_err"] <= 1e-12 else 1)
PYEOF
}
X3000=$("$PYTHON" -c 'import json; print(json.dumps([1.0] * 3000))')
GEN_K=$([ "$GPU" = 1 ] && echo gpu.csr.vector || echo cpu.csr.omp)
req POST "/v1/matrices/$GEN/spmv" -d '{"kernel":"'"$GEN_K"'","x":'"$X3000"',"verify":true}'
check "its sharded product ($GEN_K) equals the band's formula" [ "$CODE" = 200 ] && band_ok
check "its stored file is the 512-byte recipe" [ "$(stat -c %s "$STATE/$GEN.csr" 2>/dev/null)" = 512 ]

# ------------------------------------------------------ SIGTERM and restart
end_job
check "SIGTERM to rank 0 stops every rank; mpirun exits 0 (got $JOB_RC)" [ "$JOB_RC" -eq 0 ]
# the same number of ranks: every rank > 0 reads its shard from its own file
if ! start_job $NP; then not_ok "restart with $NP ranks" "$(tail -20 "$JOB_LOG")"; done_testing; exit; fi
req GET "/v1/matrices/$ID"
check "restart with the same $NP ranks: ranks > 0 load their shards from their files" [ "$CODE" = 200 ] && \
  [ "$(jget '[s["loaded_from"] for s in d["shards"]] == ["cut"] + ["file"] * '$((NP - 1)))" = True ]
spmv_expected "$OK_K"
check "its product from the files equals SciPy's" [ "$CODE" = 200 ] && check_y "$f" "$BODY_FILE"
end_job
# a damaged file: that rank is sent its shard again
"$PYTHON" - "$STATE/shards/r1/$ID.shard" <<'PYEOF'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[len(b) // 2] ^= 0x5A
open(p, "wb").write(bytes(b))
PYEOF
if ! start_job $NP; then not_ok "restart after damaging a file" "$(tail -20 "$JOB_LOG")"; done_testing; exit; fi
req GET "/v1/matrices/$ID"
check "rank 1's damaged file: rank 1 is sent its shard, the others read theirs" [ "$CODE" = 200 ] && \
  [ "$(jget '[s["loaded_from"] for s in d["shards"]][:2] == ["cut", "sent"]')" = True ] && \
  grep -q "do not match their CRC" "$JOB_LOG"
spmv_expected "$OK_K"
check "its product equals SciPy's" [ "$CODE" = 200 ] && check_y "$f" "$BODY_FILE"
end_job
if ! start_job $NP_RESTART; then not_ok "restart with $NP_RESTART ranks" "$(tail -20 "$JOB_LOG")"; done_testing; exit; fi
req GET "/v1/matrices/$ID"
check "restart with $NP_RESTART ranks: the stored matrix is re-sharded over $NP_RESTART" [ "$CODE" = 200 ] && [ "$(jget 'len(d["shards"])')" = $NP_RESTART ]
spmv_expected "$([ "$GPU" = 1 ] && echo gpu.csr.scalar || echo cpu.csr.serial)"
check "its product on $NP_RESTART ranks still equals SciPy's" [ "$CODE" = 200 ] && check_y "$f" "$BODY_FILE"
req GET "/v1/matrices/$GEN"
check "the generated matrix, rebuilt from its recipe, is re-sharded over $NP_RESTART" [ "$CODE" = 200 ] && \
  [ "$(jget 'len(d["shards"]) == '$NP_RESTART' and d["generated"]["n"] == 3000')" = True ]
req POST "/v1/matrices/$GEN/spmv" -d '{"kernel":"'"$GEN_K"'","x":'"$X3000"',"verify":true}'
check "its product on $NP_RESTART ranks still equals the formula" [ "$CODE" = 200 ] && band_ok

if [ "$NP_RESTART" -lt 2 ]; then  # the failures need a rank besides rank 0
  end_job
  check "SIGTERM to rank 0 of the 1-rank job: mpirun exits 0 (got $JOB_RC)" [ "$JOB_RC" -eq 0 ]
  if ! start_job $NP; then not_ok "restart with $NP ranks" "$(tail -20 "$JOB_LOG")"; done_testing; exit; fi
fi
# ------------------------------------------------------ a rank hangs
victim=$(other_ranks | head -1)
kill -STOP "$victim"
t0=$SECONDS
req POST "/v1/matrices/$ID/spmv" -d "{\"kernel\":\"$OK_K\",\"x\":$("$PYTHON" -c 'import json; print(json.dumps([1.0] * 2003))')}"
check "a sharded spmv with a rank stopped (SIGSTOP) fails 503 cluster_failed in $((SECONDS - t0)) s, no hang" \
  [ "$CODE" = 503 ] && grep -q cluster_failed "$BODY_FILE" && [ $((SECONDS - t0)) -le 20 ]
req GET /v1/ready
check "/v1/ready answers 503 cluster_failed" [ "$CODE" = 503 ] && grep -q cluster_failed "$BODY_FILE"
req POST "/v1/matrices/$WHOLE/spmv" -d '{"kernel":"cpu.csr.omp","x":'"$("$PYTHON" -c 'import json; print(json.dumps([1.0] * 34))')"'}'
check "an unsharded matrix still multiplies (200)" [ "$CODE" = 200 ]
kill -CONT "$victim"
end_job
check "SIGTERM to rank 0 after the hang ends the job (no hang; rc $JOB_RC)" [ "$JOB_RC" -ne 124 ]

# ------------------------------------------------------ a dead rank is seen in seconds (issue 32)
# cluster_timeout_ms at its default 30 s: what sees the failure is the
# heartbeat (cluster_heartbeat_ms, 1 s: a rank stopped while the job is
# idle) and rank 0's look at the processes on its host (a rank killed, even
# in the middle of a product). The issue's bound is 2 s from the signal to
# /v1/ready's 503 and to a sharded product's 503; the checks allow
# DEAD_BOUND_MS (3 s) on a loaded CI host and print what was measured.
DEAD_BOUND_MS=${SPMV_DEAD_BOUND_MS:-3000}
now_ms() { echo $(($(date +%s%N) / 1000000)); }
X34=$("$PYTHON" -c 'import json; print(json.dumps([1.0] * 34))')
X2003_ONES=$("$PYTHON" -c 'import json; print(json.dumps([1.0] * 2003))')
# ready_503_ms T0: polls /v1/ready until 503; the ms since T0 (-1: not within 20 s)
ready_503_ms() {
  while [ $(($(now_ms) - $1)) -lt 20000 ]; do
    if [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$SPMVD_URL/v1/ready")" = 503 ]; then
      echo $(($(now_ms) - $1)); return
    fi
    sleep 0.05
  done
  echo -1
}
TIMEOUT_MS=30000
if ! start_job $NP; then not_ok "restart with $NP ranks" "$(tail -20 "$JOB_LOG")"; done_testing; exit; fi
req GET /v1/info
check "/v1/info shows the heartbeat: cluster.heartbeat_ms 1000 beside timeout_ms 30000" \
  [ "$(jget 'd["cluster"]["heartbeat_ms"], d["cluster"]["timeout_ms"]')" = "(1000, 30000)" ]
sleep 1.5  # past the first heartbeat (which waits cluster_timeout_ms): the short deadline is in force
victim=$(other_ranks | head -1)
kill -STOP "$victim"
t_sig=$(now_ms)
ready_ms=$(ready_503_ms "$t_sig")
req POST "/v1/matrices/$ID/spmv" -d "{\"kernel\":\"$OK_K\",\"x\":$X2003_ONES}"
spmv_ms=$(($(now_ms) - t_sig))
diag "a rank stopped (SIGSTOP) while idle: /v1/ready 503 after $ready_ms ms, then a sharded product's 503 after $spmv_ms ms"
check "a rank stopped while idle: the heartbeat turns /v1/ready 503 within $ready_ms ms (bound $DEAD_BOUND_MS)" \
  [ "$ready_ms" -ge 0 ] && [ "$ready_ms" -le "$DEAD_BOUND_MS" ]
check "then a sharded spmv: 503 cluster_failed at once ($spmv_ms ms after the signal)" \
  [ "$CODE" = 503 ] && grep -q cluster_failed "$BODY_FILE" && [ "$spmv_ms" -le "$DEAD_BOUND_MS" ]
req GET /v1/ready
check "/v1/ready names the heartbeat and cluster_heartbeat_ms" [ "$CODE" = 503 ] && grep -q cluster_failed "$BODY_FILE" && \
  grep -q 'heartbeat: rank .* cluster_heartbeat_ms' "$BODY_FILE"
kill -CONT "$victim"
end_job
check "SIGTERM to rank 0 after the stop ends the job (rc $JOB_RC)" [ "$JOB_RC" -ne 124 ]

if ! start_job $NP; then not_ok "restart with $NP ranks" "$(tail -20 "$JOB_LOG")"; done_testing; exit; fi
victim=$(other_ranks | tail -1)
kill -KILL "$victim"
t_sig=$(now_ms)
# at once: the product is on its way while rank 0 has not yet seen the death
req POST "/v1/matrices/$ID/spmv" -d "{\"kernel\":\"$OK_K\",\"x\":$X2003_ONES}"
spmv_ms=$(($(now_ms) - t_sig))
spmv_code=$CODE
cp "$BODY_FILE" "$E2E_TMP/killed_spmv.json"
ready_ms=$(ready_503_ms "$t_sig")
diag "a rank killed (SIGKILL): a sharded product sent at once answered $spmv_code after $spmv_ms ms, /v1/ready 503 after $ready_ms ms (issue 32: 2000 ms)"
check "a rank killed (SIGKILL), a sharded spmv sent at once: 503 cluster_failed naming the rank within $spmv_ms ms (bound $DEAD_BOUND_MS)" \
  [ "$spmv_code" = 503 ] && grep -q cluster_failed "$E2E_TMP/killed_spmv.json" && \
  grep -q "rank" "$E2E_TMP/killed_spmv.json" && [ "$spmv_ms" -le "$DEAD_BOUND_MS" ]
check "a rank killed: /v1/ready turns 503 within $ready_ms ms (bound $DEAD_BOUND_MS)" \
  [ "$ready_ms" -ge 0 ] && [ "$ready_ms" -le "$DEAD_BOUND_MS" ]
req GET /v1/ready
check "/v1/ready says the rank has exited" [ "$CODE" = 503 ] && grep -q cluster_failed "$BODY_FILE" && grep -q "has exited" "$BODY_FILE"
req POST "/v1/matrices/$ID/spmv" -d "{\"kernel\":\"$OK_K\",\"x\":$X2003_ONES}"
check "a later sharded spmv: 503 cluster_failed" [ "$CODE" = 503 ] && grep -q cluster_failed "$BODY_FILE"
req POST "/v1/matrices/$WHOLE/spmv" -d '{"kernel":"cpu.csr.serial","x":'"$X34"',"verify":true}'
check "an unsharded matrix on rank 0 still multiplies (200, verified)" [ "$CODE" = 200 ] && \
  [ "$(jget 'd["verify"]["max_rel_err"] <= 1e-12')" = True ]
upload_multipart "$REAL/karate.mtx" "name=after_death"
check "an unsharded upload after the death: 201, not sharded" [ "$CODE" = 201 ] && [ "$(jget 'd["sharded"]')" = False ]
req GET /v1/info
check "/v1/info: cluster.state failed, with the error" [ "$(jget 'd["cluster"]["state"] == "failed" and "rank" in d["cluster"]["error"]')" = True ]
end_job
check "SIGTERM to rank 0 after the death ends the job (rc $JOB_RC)" [ "$JOB_RC" -ne 124 ]
check "no spmvd of the job is left" [ -z "$(pgrep -f "state-dir $STATE" || true)" ]

# ------------------------------------------------------ the pulse: a rank lost in the middle of a request
# A rank on another host that dies, stops or is cut off while a request
# runs answers no heartbeat and is out of /proc's sight: what sees it is
# its pulse (cluster_pulse_ms, 200 ms, from a thread of its own) going
# silent past cluster_heartbeat_ms. cluster_local_liveness false takes
# the /proc look away, so the pulse alone must see it, on this host as on
# another. The request: 1000 runs of a 400000-row band (8.4 M entries; on
# GPU shards 100 000 runs of gpu.csr.scalar), several seconds; the signal
# comes a second into it.
# The issue's bound, 2 s, is asserted here (PULSE_BOUND_MS): the pulse
# sees a death in cluster_heartbeat_ms less up to one period.
PULSE_BOUND_MS=${SPMV_PULSE_BOUND_MS:-2000}
pulse_t0=$SECONDS
# cluster_timeout_ms 4 s: well past the bound, so the pulse is what sees
# the loss, and short enough that the live rank left waiting in the halo
# exchange for the lost one gives up, and takes the shutdown, soon
TIMEOUT_MS=4000
JOB_FLAGS+=(--cluster-local-liveness false)
# On GPU shards a CPU kernel is refused (409) and a run takes ~0.1 ms: the
# slowest GPU kernel and 100 times the runs keep the request several seconds long
LONG_KERNEL=cpu.csr.serial LONG_RUNS=1000
if [ "$GPU" = 1 ]; then
  LONG_KERNEL=gpu.csr.scalar LONG_RUNS=100000
  JOB_FLAGS+=(--max-runs $LONG_RUNS)
fi
if ! start_job $NP; then not_ok "start with cluster_local_liveness false" "$(tail -20 "$JOB_LOG")"; done_testing; exit; fi
req POST "/v1/matrices?generate=band&n=400000&per_row=21&shard=true&name=long_band"
LONG=$(jget 'd.get("id", "")')
check "a 400000-row band sharded across $NP (the long request's matrix)" [ "$CODE" = 201 ] && [ -n "$LONG" ]
req GET /v1/info
check "/v1/info shows cluster.pulse_ms 200" [ "$(jget 'd["cluster"]["pulse_ms"]')" = 200 ]
"$PYTHON" -c 'import json, sys; print(json.dumps({"kernel": sys.argv[1], "x": [1.0] * 400000, "runs": int(sys.argv[2])}))' \
  "$LONG_KERNEL" "$LONG_RUNS" >"$E2E_TMP/long_x.json"
# mid_request_loss SIG: the long product, SIG to a rank a second into it;
# sets lost_code, lost_ms (signal to the product's answer), lost_ready_ms, and the body in lost.json
mid_request_loss() {
  local start pid t_sig
  start=$(now_ms)
  ( curl -s --max-time 90 -o "$E2E_TMP/lost.json" -w '%{http_code}' -X POST "$SPMVD_URL/v1/matrices/$LONG/spmv" \
      -H 'Content-Type: application/json' --data-binary "@$E2E_TMP/long_x.json" >"$E2E_TMP/lost.code"
    now_ms >"$E2E_TMP/lost.end" ) &
  pid=$!
  sleep 1
  victim=$(other_ranks | head -1)
  kill "-$1" "$victim"
  t_sig=$(now_ms)
  lost_ready_ms=$(ready_503_ms "$t_sig")
  wait "$pid"
  lost_code=$(cat "$E2E_TMP/lost.code")
  lost_ms=$(($(cat "$E2E_TMP/lost.end") - t_sig))
  [ "$lost_code" = 503 ] || diag "the job's log: $(tail -12 "$JOB_LOG")"
  diag "a rank $2 ($1) $((t_sig - start)) ms into a sharded product of $LONG_RUNS runs ($LONG_KERNEL), /proc not looked at: the product answered $lost_code after $lost_ms ms, /v1/ready 503 after $lost_ready_ms ms (issue 32: 2000 ms)"
}
mid_request_loss STOP stopped
check "a rank stopped (SIGSTOP) mid-request: the product ends 503 cluster_failed within $lost_ms ms (bound $PULSE_BOUND_MS)" \
  [ "$lost_code" = 503 ] && grep -q cluster_failed "$E2E_TMP/lost.json" && [ "$lost_ms" -ge 0 ] && [ "$lost_ms" -le "$PULSE_BOUND_MS" ]
check "the message names the rank, its host and the pulse's age" grep -q 'rank [0-9] (on [^)]*) has sent no pulse for [0-9]* ms' "$E2E_TMP/lost.json"
check "a rank stopped mid-request: /v1/ready turns 503 within $lost_ready_ms ms (bound $PULSE_BOUND_MS)" \
  [ "$lost_ready_ms" -ge 0 ] && [ "$lost_ready_ms" -le "$PULSE_BOUND_MS" ]
kill -CONT "$victim"
end_job
check "SIGTERM to rank 0 after the stop ends the job (rc $JOB_RC)" [ "$JOB_RC" -ne 124 ]

if ! start_job $NP; then not_ok "restart with cluster_local_liveness false" "$(tail -20 "$JOB_LOG")"; done_testing; exit; fi
mid_request_loss KILL killed
check "a rank killed (SIGKILL) mid-request, /proc not looked at: the product ends 503 cluster_failed within $lost_ms ms (bound $PULSE_BOUND_MS)" \
  [ "$lost_code" = 503 ] && grep -q cluster_failed "$E2E_TMP/lost.json" && grep -q "has sent no pulse" "$E2E_TMP/lost.json" && \
  [ "$lost_ms" -ge 0 ] && [ "$lost_ms" -le "$PULSE_BOUND_MS" ]
check "a rank killed mid-request: /v1/ready turns 503 within $lost_ready_ms ms (bound $PULSE_BOUND_MS)" \
  [ "$lost_ready_ms" -ge 0 ] && [ "$lost_ready_ms" -le "$PULSE_BOUND_MS" ]
end_job
check "SIGTERM to rank 0 after the death ends the job (rc $JOB_RC)" [ "$JOB_RC" -ne 124 ]
diag "the pulse's cases took $((SECONDS - pulse_t0)) s"
check "no spmvd of the job is left" [ -z "$(pgrep -f "state-dir $STATE" || true)" ]
done_testing
