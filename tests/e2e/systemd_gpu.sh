#!/usr/bin/env bash
# systemd_gpu.sh — CUDA under spmvd.service's restrictions (GPU nodes only).
#
# The unit's hardening has to leave CUDA working. This suite runs a CUDA
# build of spmvd the way the unit does, less systemd: as nobody with no
# capabilities and no_new_privs, under the unit's system call filter
# (tests/e2e/sandbox.c, see systemd.sh), puts a matrix on the GPU and runs
# GPU and cuSPARSE kernels with verification, and checks that no system call
# was denied. It then measures what MemoryDenyWriteExecute= (PR_SET_MDWE)
# does to CUDA, with machine code and with the PTX JIT forced, and reports it
# (diagnostics, not assertions: the answer belongs to the driver). Skips
# without a GPU or a CUDA build. TAP through tests/e2e/lib.sh.
. "$(dirname "$0")/lib.sh"
cd "$SPMV_ROOT" || exit 1
T=$E2E_TMP
SO=$BUILD_DIR/tests/e2e/libspmvd_sandbox.so

if ! "$SPMVD" --version 2>/dev/null | grep -q 'CUDA build'; then skip "not a CUDA build"; done_testing; exit; fi
if [ ! -e /dev/nvidiactl ]; then skip "no NVIDIA GPU on this host"; done_testing; exit; fi
if [ "${SAN:-0}" = 1 ]; then skip "not with the sanitizer build (ASan and the filter do not mix)"; done_testing; exit; fi
if [ ! -f "$SO" ] || [ "$(uname -m)" != x86_64 ]; then skip "$SO not built (x86-64 with systemd-analyze)"; done_testing; exit; fi

SEED=${SPMV_SEED:-$(( ($(date +%s) ^ $$) % 1000000 ))}
diag "seed $SEED (set SPMV_SEED to repeat)"
bg_pid() { SPMVD_PIDS+=("$1"); }

# start_sandboxed LOG [ENV=VALUE...]: spmvd as the unit runs it; sets
# SPMVD_PID/URL/LOG and waits until ready.
start_sandboxed() {
  local log=$1; shift
  local wrap=() state port
  port=$(free_port); state=$(mktemp -d "$T/state.XXXXXX")
  if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    chown 65534:65534 "$state"; chmod 0711 "$T"
    wrap=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs)
  fi
  "${wrap[@]}" env LD_PRELOAD="$SO" "$@" "$SPMVD" --state-dir "$state/st" --listen "127.0.0.1:$port" >"$log" 2>&1 &
  SPMVD_PID=$!; bg_pid "$SPMVD_PID"; SPMVD_URL=http://127.0.0.1:$port; SPMVD_LOG=$log
  wait_ready "$SPMVD_URL" 60
}

gpu_count() { req GET /v1/info; jget 'sum(1 for x in d["devices"] if x["kind"] == "gpu")' 2>/dev/null || echo 0; }
rwx_maps() { awk '$2 ~ /^rwx/' "/proc/$1/maps" 2>/dev/null | wc -l; }

# ------------------------------------------- CUDA under the unit's filter
if ! start_sandboxed "$T/gpu.log"; then
  not_ok "gpu: spmvd comes up under the unit's restrictions" "$(tail -5 "$T/gpu.log")"
  done_testing; exit
fi
ok "gpu: spmvd comes up under the unit's restrictions"
n=$(gpu_count)
if [ "$n" -ge 1 ]; then ok "gpu: the daemon sees $n GPU(s) as nobody under the filter"
else not_ok "gpu: the daemon sees the GPUs under the filter" "$(jget 'd.get("gpu_unavailable_reason")' 2>/dev/null)"; fi
gen_matrix "$T/g.mtx" 3000 12
upload_multipart "$T/g.mtx" device=gpu0
expect_code "gpu: upload to gpu0 (converted on the device)" 201
id=$MATRIX_ID
"$PYTHON" -c 'import json, random, sys; r = random.Random(int(sys.argv[1])); print(json.dumps([r.uniform(-1, 1) for _ in range(3000)]))' "$SEED" >"$T/x.json"
for k in gpu.csr.scalar gpu.csr.vector gpu.csr.adaptive gpu.hll cusparse.csr; do
  req POST "/v1/matrices/$id/spmv" -H 'Content-Type: application/json' \
    --data "{\"kernel\":\"$k\",\"x\":$(cat "$T/x.json"),\"runs\":5,\"verify\":true}"
  if [ "$CODE" = 200 ] && jget 'd["verify"]["max_rel_err"] < 1e-10' | grep -q True; then
    ok "gpu: $k runs and matches cpu.csr.serial (max_rel_err $(jget 'd["verify"]["max_rel_err"]'))"
  else
    not_ok "gpu: $k runs and matches cpu.csr.serial" "HTTP $CODE" "$(head -c 300 "$BODY_FILE")"
  fi
done
diag "gpu: the CUDA process holds $(rwx_maps "$SPMVD_PID") writable+executable mapping(s)"
stop_spmvd; rc=$?
check "gpu: exit status 0 after SIGTERM (got $rc)" [ "$rc" -eq 0 ]
if grep -q 'denied syscall' "$T/gpu.log"; then
  not_ok "gpu: no system call was denied" "$(grep 'denied syscall' "$T/gpu.log" | sort | uniq -c | head -5)"
else
  ok "gpu: no system call was denied"
fi

# --------------------------------------------------- the PTX JIT
# A GPU newer than the build's machine code runs its PTX through the
# driver's JIT: that must work under the unit's restrictions too.
JIT=$BUILD_DIR/tests/e2e/jitprobe
jit_sandboxed() {
  local wrap=()
  [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
    wrap=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs)
  "${wrap[@]}" env LD_PRELOAD="$SO" CUDA_CACHE_DISABLE=1 "$JIT" "$@" 2>&1
}
if [ -x "$JIT" ]; then
  out=$(jit_sandboxed plain); rc=$?
  if [ $rc -eq 0 ] && ! grep -q 'denied syscall' <<<"$out"; then ok "jit: PTX JIT-compiled and run under the unit's restrictions ($(tail -1 <<<"$out"))"
  else not_ok "jit: PTX JIT-compiled and run under the unit's restrictions" "$out"; fi
else
  skip "jit: $JIT not built"
fi

# ------------------------------- MemoryDenyWriteExecute=, measured, not assumed
# What PR_SET_MDWE (the kernel's form of MemoryDenyWriteExecute=yes) does to
# CUDA: the whole daemon with the build's machine code, and the PTX JIT.
# Reported, not asserted: the answer belongs to the driver, not to spmvd.
if start_sandboxed "$T/mdwe.log" SPMVD_SANDBOX_MDWE=1; then
  n=$(gpu_count); k=none
  upload_multipart "$T/g.mtx" device=gpu0; up=$CODE
  if [ "$up" = 201 ]; then
    req POST "/v1/matrices/$MATRIX_ID/spmv" -H 'Content-Type: application/json' \
      --data "{\"kernel\":\"cusparse.csr\",\"x\":$(cat "$T/x.json"),\"runs\":2,\"verify\":true}"
    k="HTTP $CODE"
  fi
  diag "mdwe: spmvd with PR_SET_MDWE: $n GPU(s), upload to gpu0 HTTP $up, cusparse.csr $k, $(rwx_maps "$SPMVD_PID") rwx mapping(s)"
  stop_spmvd
else
  diag "mdwe: spmvd with PR_SET_MDWE does not come up: $(tail -1 "$T/mdwe.log")"
fi
[ -x "$JIT" ] && diag "mdwe: $(jit_sandboxed mdwe | tail -1)"
driver=$(head -1 /proc/driver/nvidia/version 2>/dev/null)
diag "driver: ${driver:-unknown}"
done_testing
