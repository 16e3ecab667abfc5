#!/usr/bin/env bash
# diskfull.sh — the state directory runs out of space, or fsync fails,
# during a store: the upload fails cleanly and earlier matrices survive.
#
# Three ways to run out, each where it can run here:
#   tmpfs   a 2 MiB tmpfs as the state directory (root, mount permitted)
#   loop    an 8 MiB ext4 image on a loop device (root, losetup, mkfs.ext4)
#   shim    tests/e2e/faultfs.c preloaded: the state directory's files get
#           ENOSPC past a size, and fsync fails with EIO on demand (needs
#           only a C compiler; the only way to make fsync fail at will)
# In each: a few matrices are stored and multiplied; then uploads go on
# until the disk is full; the failing upload must be answered 500 or 507
# with a message saying what failed, leave no file (temp or final) behind
# and not be listed; earlier matrices multiply as before, also after a
# restart; once space is back an upload works again. With fsync failing
# the upload must be 500 and nothing stored (the file's fsync, or the
# directory's after the rename): a failed fsync is never taken as success.
# On a GPU host, GPU uploads too (their file is written while the device
# copy runs): a failed fsync answers 500 and frees the device copy, and a
# device that cannot hold the matrix (device_reserve_bytes past its
# memory) answers 507 and leaves no file, temp or final.
. "$(dirname "$0")/lib.sh"

MOUNTS=()
trap 'for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null; done; cleanup' EXIT

X=
gpus() { req GET /v1/info; jget 'sum(1 for x in d["devices"] if x["kind"] == "gpu")' 2>/dev/null || echo 0; }
gpu_used() { req GET /v1/info; jget 'sum(x.get("memory_used_by_spmvd", 0) for x in d["devices"] if x["kind"] == "gpu")'; }
# gpu_used_back N: the GPUs' memory used by spmvd is N again within 10 s (the free is a queued task)
gpu_used_back() { local i; for ((i = 0; i < 100; i++)); do [ "$(gpu_used)" = "$1" ] && return 0; sleep 0.1; done; return 1; }
only_csr() {  # STATE: nothing but <uuid>.csr, .lock and an empty damaged/
  ! ls -A "$1" | grep -vqE '^(\.lock|damaged|lost\+found|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.csr)$' &&
    [ -z "$(ls -A "$1/damaged")" ]
}
# y_of ID: y of x = (1, 2, 3, ...) by cpu.csr.serial, as text.
y_of() {
  local cols
  req GET "/v1/matrices/$1"; cols=$(jget 'd["cols"]')
  X=$("$PYTHON" -c "import sys; print('[' + ','.join(str(j + 1) for j in range($cols)) + ']')")
  req POST "/v1/matrices/$1/spmv" -H 'Content-Type: application/json' -d "{\"kernel\":\"cpu.csr.serial\",\"x\":$X}"
  [ "$CODE" = 200 ] && jget 'd["y"]'
}

gen_matrix "$E2E_TMP/fill.mtx" 5000 10       # ~600 KiB as a stored CSR file

# variant NAME STATE FILL_MODE: FILL_MODE "space" fills a real file system,
# "shim" switches the preloaded fault on.
variant() {
  local name=$1 state=$2 mode=$3 ids=() ys=() i id code n_before
  SPMVD_STATE=$state
  if ! start_spmvd; then not_ok "$name: spmvd starts" "$(tail -3 "$SPMVD_LOG")"; return; fi
  for f in karate west0067 lp_afiro; do
    upload_raw "$MATRICES/real/$f.mtx" "device=cpu"
    [ "$CODE" = 201 ] || { not_ok "$name: $f uploads" "HTTP $CODE"; return; }
    ids+=("$MATRIX_ID"); ys+=("$(y_of "$MATRIX_ID")")
  done
  ok "$name: three matrices stored and multiplied"
  if [ "$mode" = shim ]; then echo "enospc 4096" >"$FAULTFS_CTL"; fi
  code=201
  for i in $(seq 40); do
    upload_raw "$E2E_TMP/fill.mtx" "device=cpu"; code=$CODE
    [ "$code" = 201 ] || break
  done
  req GET /v1/matrices; n_before=$(jget 'd["count"]')
  upload_raw "$E2E_TMP/fill.mtx" "device=cpu"
  if [ "$code" = 500 ] || [ "$code" = 507 ]; then ok "$name: the upload that finds the disk full is answered $code"
  else not_ok "$name: the upload that finds the disk full is answered 500 or 507" "got $code after $i uploads"; fi
  check "$name: and the message says what failed: $(head -c 160 "$BODY_FILE")" \
    grep -qiE 'no space|space left|ENOSPC|storage' "$BODY_FILE"
  req GET /v1/matrices
  check "$name: the failed uploads are not listed" [ "$(jget 'd["count"]')" = "$n_before" ]
  check "$name: no temp file or half-written file left in the state directory" only_csr "$state"
  check "$name: the files on disk are exactly the listed matrices" bash -c \
    "[ \$(ls '$state' | grep -c '\.csr\$') = $n_before ]"
  for i in 0 1 2; do
    check "$name: matrix $((i + 1)) still multiplies as before" [ "$(y_of "${ids[$i]}")" = "${ys[$i]}" ]
  done
  stop_spmvd
  if ! start_spmvd; then not_ok "$name: spmvd restarts on the full disk" "$(tail -3 "$SPMVD_LOG")"; return; fi
  for i in 0 1 2; do
    check "$name: after a restart, matrix $((i + 1)) is there and multiplies as before" \
      [ "$(y_of "${ids[$i]}")" = "${ys[$i]}" ]
  done
  check "$name: nothing was moved aside as damaged" only_csr "$state"
  # space back: drop the fill matrices (or the fault)
  if [ "$mode" = shim ]; then rm -f "$FAULTFS_CTL"; fi
  req GET /v1/matrices
  for id in $(jget '" ".join(m["id"] for m in d["matrices"][3:])'); do req DELETE "/v1/matrices/$id"; done
  upload_raw "$MATRICES/real/karate.mtx" "device=cpu"
  expect_code "$name: with space back an upload is stored again" 201
  stop_spmvd
  unset SPMVD_STATE
}

# ------------------------------------------------------------------ tmpfs
if [ "$(id -u)" = 0 ] && mkdir -p "$E2E_TMP/tmpfs" && mount -t tmpfs -o size=2m,mode=0700 tmpfs "$E2E_TMP/tmpfs" 2>/dev/null; then
  MOUNTS+=("$E2E_TMP/tmpfs")
  variant tmpfs "$E2E_TMP/tmpfs/state" space
else
  skip "tmpfs: needs root and permission to mount (id $(id -u))"
fi

# ------------------------------------------------------------------- loop
if [ "$(id -u)" = 0 ] && command -v mkfs.ext4 >/dev/null && truncate -s 8M "$E2E_TMP/ext4.img" &&
   mkfs.ext4 -q -F "$E2E_TMP/ext4.img" >/dev/null 2>&1 && mkdir -p "$E2E_TMP/loop" &&
   mount -o loop "$E2E_TMP/ext4.img" "$E2E_TMP/loop" 2>/dev/null; then
  MOUNTS+=("$E2E_TMP/loop")
  variant loop "$E2E_TMP/loop/state" space
else
  skip "loop: needs root, mkfs.ext4 and a loop device that may be mounted"
fi

# ------------------------------------------------------------------- shim
CC=${CC:-cc}
if command -v "$CC" >/dev/null && "$CC" -shared -fPIC -O1 -o "$E2E_TMP/faultfs.so" "$(dirname "$0")/faultfs.c" -ldl 2>"$E2E_TMP/cc.log"; then
  export FAULTFS_DIR=$E2E_TMP/shim-state FAULTFS_CTL=$E2E_TMP/faultfs.ctl
  SPMVD_REAL=$SPMVD
  # under SAN=1 the shim comes before the ASan runtime: tell ASan that is meant
  printf '#!/bin/sh\nASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 LD_PRELOAD=%s exec %s "$@"\n' \
    "$E2E_TMP/faultfs.so" "$SPMVD_REAL" >"$E2E_TMP/spmvd-faulty"
  chmod +x "$E2E_TMP/spmvd-faulty"
  SPMVD=$E2E_TMP/spmvd-faulty
  variant shim "$FAULTFS_DIR" shim

  # fsync fails: 500, nothing stored, before and after a restart
  SPMVD_STATE=$FAULTFS_DIR
  if start_spmvd; then
    req GET /v1/matrices; n_before=$(jget 'd["count"]')
    echo eio-fsync >"$FAULTFS_CTL"
    upload_raw "$MATRICES/real/karate.mtx" "device=cpu"
    expect_code "fsync fails with EIO: the upload is answered 500" 500
    check "and says the fsync failed: $(head -c 160 "$BODY_FILE")" grep -q fsync "$BODY_FILE"
    rm -f "$FAULTFS_CTL"
    req GET /v1/matrices
    check "nothing is listed after the failed fsync" [ "$(jget 'd["count"]')" = "$n_before" ]
    check "nothing is left on disk after the failed fsync" bash -c \
      "only_csr() { ! ls -A \"\$1\" | grep -vqE '^(\.lock|damaged|[0-9a-f-]{36}\.csr)\$'; }; only_csr '$FAULTFS_DIR' && [ \$(ls '$FAULTFS_DIR' | grep -c '\.csr\$') = $n_before ]"
    echo eio-dirsync >"$FAULTFS_CTL"
    upload_raw "$MATRICES/real/karate.mtx" "device=cpu"
    expect_code "the directory's fsync after the rename fails: 500" 500
    check "and says so: $(head -c 160 "$BODY_FILE")" grep -q 'fsync of the directory' "$BODY_FILE"
    rm -f "$FAULTFS_CTL"
    req GET /v1/matrices
    check "nothing is listed, nothing left on disk after it" bash -c \
      "[ \"\$(curl -s '$SPMVD_URL/v1/matrices' | '$PYTHON' -c 'import json,sys; print(json.load(sys.stdin)[\"count\"])')\" = $n_before ] && [ \$(ls '$FAULTFS_DIR' | grep -c '\.csr\$') = $n_before ]"
    if [ "$(gpus)" -ge 1 ]; then
      used=$(gpu_used)
      echo eio-fsync >"$FAULTFS_CTL"
      upload_raw "$MATRICES/real/bcsstk13.mtx" "device=gpu"
      expect_code "a GPU upload whose file's fsync fails (written while the device copy runs): 500" 500
      rm -f "$FAULTFS_CTL"
      req GET /v1/matrices
      check "nothing is listed, nothing left on disk after it" bash -c \
        "[ \"\$(curl -s '$SPMVD_URL/v1/matrices' | '$PYTHON' -c 'import json,sys; print(json.load(sys.stdin)[\"count\"])')\" = $n_before ] && [ \$(ls -A '$FAULTFS_DIR' | grep -c 'tmp\|\.csr\$') = $n_before ]"
      check "and its device copy is freed (GPU memory used by spmvd back to $used)" gpu_used_back "$used"
      upload_raw "$MATRICES/real/bcsstk13.mtx" "device=gpu"
      expect_code "with fsync back a GPU upload is stored: 201" 201
      check "under its name, no temp file left" bash -c "[ -f '$FAULTFS_DIR/$MATRIX_ID.csr' ] && ! ls -A '$FAULTFS_DIR' | grep -q tmp"
      req DELETE "/v1/matrices/$MATRIX_ID"
    else
      skip "a GPU upload whose fsync fails: no GPU here"
    fi
    stop_spmvd
    start_spmvd
    req GET /v1/matrices
    check "after a restart the failed uploads are still absent" [ "$(jget 'd["count"]')" = "$n_before" ]
    stop_spmvd
  else
    not_ok "spmvd starts under the fault shim" "$(tail -3 "$SPMVD_LOG")"
  fi
  SPMVD=$SPMVD_REAL
else
  skip "shim: no C compiler to build tests/e2e/faultfs.c ($(head -1 "$E2E_TMP/cc.log" 2>/dev/null))"
fi

# ------------------------------------------------- a GPU that cannot hold it
# device_reserve_bytes past any GPU's memory: every GPU upload is 507, and
# the file written meanwhile is removed (or never finished).
unset SPMVD_STATE
if start_spmvd --device-reserve-bytes 64T; then
  if [ "$(gpus)" -ge 1 ]; then
    upload_raw "$MATRICES/real/bcsstk13.mtx" "device=gpu"
    expect_code "a GPU upload the device cannot hold: 507" 507
    req GET /v1/matrices
    check "nothing is listed" [ "$(jget 'd["count"]')" = 0 ]
    check "no file left, temp or final" bash -c "! ls -A '$SPMVD_STATE' | grep -q 'tmp\|\.csr\$'"
  else
    skip "a GPU upload the device cannot hold: no GPU here"
  fi
  stop_spmvd
else
  not_ok "spmvd starts with device_reserve_bytes 64T" "$(tail -3 "$SPMVD_LOG")"
fi
done_testing
