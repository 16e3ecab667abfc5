#!/usr/bin/env bash
# systemd.sh — spmvd as a systemd service, tested without a running systemd.
#
# The daemon's side of the service contract is driven the way systemd drives
# it: a notification socket this script owns (a small python3 listener that
# records every datagram in order), WATCHDOG_USEC, socket activation through
# systemd-socket-activate, SIGHUP and SIGTERM. The installed units are checked
# with `systemd-analyze verify` and `systemd-analyze security`, and `make
# install`/`make uninstall` are run into a temporary DESTDIR. Speaks TAP;
# needs $BUILD/spmvd (skips everything without it).
set -u
ROOT=${SPMV_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${BUILD:-build}
case $BUILD in /*) B=$BUILD ;; *) B=$ROOT/$BUILD ;; esac
SPMVD=$B/spmvd
cd "$ROOT" || exit 1

# ------------------------------------------------------------------ TAP
n=0; nfail=0
ok()     { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); nfail=$((nfail + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "#   $l"; done; }
skip()   { n=$((n + 1)); echo "ok $n # SKIP $1"; }
check()  { local what=$1; shift; if "$@"; then ok "$what"; else not_ok "$what" "command: $*"; fi; }
diag()   { sed 's/^/#   /' "$@"; }

SEED=${SPMV_SEED:-$(( $(date +%s) ^ $$ ))}
echo "# seed $SEED (set SPMV_SEED to repeat)"
RANDOM=$((SEED % 32768))

T=$(mktemp -d "${TMPDIR:-/tmp}/spmvd-systemd.XXXXXX")
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT

# ------------------------------------------------------------- helpers
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# notify_listen ADDR OUT: records each datagram's lines as "SEQ<TAB>LINE" in
# OUT; ADDR is a path or @name (abstract). Sets LISTENER.
notify_listen() {
  local addr=$1 out=$2
  : >"$out"
  python3 - "$addr" "$out" <<'EOF' &
import os, socket, sys
addr, out = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("\0" + addr[1:] if addr.startswith("@") else addr)
open(out + ".ready", "w").close()
seq = 0
with open(out, "a") as f:
    while True:
        data = s.recv(1 << 16)
        seq += 1
        for line in data.decode("utf-8", "replace").split("\n"):
            if line:
                f.write("%d\t%s\n" % (seq, line))
        f.flush()
EOF
  LISTENER=$!
  PIDS+=("$LISTENER")
  local i
  for i in $(seq 100); do [ -e "$out.ready" ] && return 0; sleep 0.05; done
  return 1
}

# wait_for COND_CMD... : retries for up to 30 s (a hang guard, not a timing).
wait_for() {
  local i
  for i in $(seq 300); do "$@" && return 0; sleep 0.1; done
  return 1
}
http_code() { curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$@"; }
is_200() { [ "$(http_code "$1")" = 200 ]; }
alive() { kill -0 "$1" 2>/dev/null; }
has_line() { grep -q -- "$2" "$1"; }

# start_spmvd LOG ARGS...: runs spmvd in the background; sets DPID.
start_spmvd() {
  local log=$1; shift
  "$SPMVD" "$@" >"$log" 2>&1 &
  DPID=$!
  PIDS+=("$DPID")
}

# stop_spmvd PID: SIGTERM, then the exit status (124 when it did not exit
# within 60 s and had to be killed).
stop_spmvd() {
  local pid=$1 i
  kill -TERM "$pid" 2>/dev/null
  for i in $(seq 600); do alive "$pid" || break; sleep 0.1; done
  if alive "$pid"; then kill -KILL "$pid"; wait "$pid" 2>/dev/null; return 124; fi
  wait "$pid"
}

# random_mtx FILE ROWS NNZ_PER_ROW: a random general real matrix.
random_mtx() {
  python3 - "$@" "$RANDOM" <<'EOF'
import random, sys
path, rows, per, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
ent = {}
for r in range(rows):
    for c in rng.sample(range(rows), min(per, rows)):
        ent[(r, c)] = rng.uniform(-1, 1)
with open(path, "w") as f:
    f.write("%%MatrixMarket matrix coordinate real general\n")
    f.write("%d %d %d\n" % (rows, rows, len(ent)))
    for (r, c), v in sorted(ent.items()):
        f.write("%d %d %.17g\n" % (r + 1, c + 1, v))
EOF
}

upload() { # URL FILE -> prints the HTTP status
  curl -s -o /dev/null -w '%{http_code}' --max-time 60 -F "file=@$2" "$1/v1/matrices"
}

matrix_count() { # URL -> number of stored matrices
  curl -s --max-time 10 "$1/v1/matrices" | python3 -c '
import json, sys
d = json.load(sys.stdin)
if isinstance(d, dict):
    d = d.get("matrices", d.get("items", []))
print(len(d))'
}

# first_seq FILE PATTERN: datagram number of the first line matching, or "".
first_seq() { awk -F'\t' -v p="$2" '$2 ~ p { print $1; exit }' "$1"; }
count_lines() { awk -F'\t' -v p="$2" '$2 ~ p { n++ } END { print n + 0 }' "$1"; }
count_above() { [ "$(count_lines "$1" "$2")" -gt "$3" ]; }

# --------------------------------------------------- 1. notify protocol
test_notify() {
  local state=$T/state-notify port url nmat=4 i
  mkdir -p "$state"
  port=$(free_port); url=http://127.0.0.1:$port

  # First run: store a few matrices so that the second run has a reload to do.
  start_spmvd "$T/notify-1.log" --state-dir "$state" --listen "127.0.0.1:$port" --log-level debug
  if ! wait_for is_200 "$url/v1/ready"; then
    not_ok "notify: first daemon comes up to store matrices" "$(tail -5 "$T/notify-1.log")"
    return
  fi
  local up=0
  for i in $(seq $nmat); do
    random_mtx "$T/n$i.mtx" $((20 + RANDOM % 50)) 3
    [ "$(upload "$url" "$T/n$i.mtx")" = 201 ] && up=$((up + 1))
  done
  check "notify: $nmat matrices uploaded before the restart" [ "$up" -eq $nmat ]
  stop_spmvd "$DPID"

  # Second run under a notification socket, watchdog at 0.5 s.
  local sock=$T/notify.sock out=$T/notify.rec
  notify_listen "$sock" "$out" || { not_ok "notify: listener starts"; return; }
  NOTIFY_SOCKET=$sock WATCHDOG_USEC=500000 \
    start_spmvd "$T/notify-2.log" --state-dir "$state" --listen "127.0.0.1:$port"
  if ! wait_for has_line "$out" 'READY=1'; then
    not_ok "notify: READY=1 sent" "records:" "$(cat "$out")" "log:" "$(tail -5 "$T/notify-2.log")"
    stop_spmvd "$DPID"; return
  fi
  ok "notify: READY=1 sent"
  # The moment READY=1 is out, the whole state directory must be back.
  check "notify: every stored matrix is loaded when READY=1 arrives" \
    [ "$(matrix_count "$url")" = "$nmat" ]
  check "notify: /v1/ready answers 200 after READY=1" is_200 "$url/v1/ready"

  local ready status_before loaded_all
  ready=$(first_seq "$out" '^READY=1')
  status_before=$(awk -F'\t' -v r="$ready" '$1 < r && $2 ~ /^STATUS=/' "$out" | wc -l)
  if [ "$status_before" -ge 1 ]; then ok "notify: STATUS= lines come before READY=1"
  else not_ok "notify: STATUS= lines come before READY=1" "records:" "$(cat "$out")"; fi
  # The reload reports its progress up to the last matrix before READY=1.
  loaded_all=$(awk -F'\t' -v r="$ready" -v m="$nmat/$nmat" '$1 < r && $2 ~ /^STATUS=/ && index($2, m)' "$out" | wc -l)
  if [ "$loaded_all" -ge 1 ]; then ok "notify: a STATUS line reports $nmat/$nmat loaded before READY=1"
  else not_ok "notify: a STATUS line reports $nmat/$nmat loaded before READY=1" "records:" "$(cat "$out")"; fi

  # Watchdog: with WATCHDOG_USEC=0.5 s the pings must keep coming. Count over
  # a window of 3 s; 2 is a floor far below the 6 a healthy daemon sends.
  local w0 w1
  w0=$(count_lines "$out" '^WATCHDOG=1')
  sleep 3
  w1=$(count_lines "$out" '^WATCHDOG=1')
  if [ $((w1 - w0)) -ge 2 ]; then ok "notify: WATCHDOG=1 pings keep coming ($((w1 - w0)) in 3 s)"
  else not_ok "notify: WATCHDOG=1 pings keep coming" "got $((w1 - w0)) in 3 s" "records:" "$(tail -5 "$out")"; fi
  stop_spmvd "$DPID"; local rc=$?
  check "notify: exit status 0 after SIGTERM (got $rc)" [ "$rc" -eq 0 ]
  local stopping
  stopping=$(first_seq "$out" '^STOPPING=1')
  if [ -n "$stopping" ] && [ "$stopping" -gt "$ready" ]; then ok "notify: STOPPING=1 sent on SIGTERM"
  else not_ok "notify: STOPPING=1 sent on SIGTERM" "records:" "$(tail -5 "$out")"; fi
  kill "$LISTENER" 2>/dev/null
}

# -------------------------------- 2. abstract socket, WATCHDOG_PID elsewhere
test_notify_abstract() {
  local port url out=$T/abstract.rec name
  name="@spmvd-test-$$-$RANDOM"
  port=$(free_port); url=http://127.0.0.1:$port
  mkdir -p "$T/state-abstract"
  notify_listen "$name" "$out" || { not_ok "abstract: listener starts"; return; }
  # WATCHDOG_PID names another process: the watchdog is not ours to ping
  # (sd_watchdog_enabled() says no), yet READY/STOPPING still go out.
  NOTIFY_SOCKET=$name WATCHDOG_USEC=200000 WATCHDOG_PID=1 \
    start_spmvd "$T/abstract.log" --state-dir "$T/state-abstract" --listen "127.0.0.1:$port"
  if wait_for has_line "$out" 'READY=1'; then ok "abstract: READY=1 through an abstract-namespace socket ($name)"
  else not_ok "abstract: READY=1 through an abstract-namespace socket ($name)" "log:" "$(tail -5 "$T/abstract.log")"; fi
  check "abstract: daemon serves /v1/health" is_200 "$url/v1/health"
  sleep 1
  check "abstract: no WATCHDOG=1 when WATCHDOG_PID is another process" [ "$(count_lines "$out" '^WATCHDOG=1')" -eq 0 ]
  stop_spmvd "$DPID"; local rc=$?
  check "abstract: exit status 0 after SIGTERM (got $rc)" [ "$rc" -eq 0 ]
  check "abstract: STOPPING=1 sent" has_line "$out" 'STOPPING=1'
  kill "$LISTENER" 2>/dev/null
}

# --------------------------------------- 3. SIGHUP (systemctl reload)
spmv_code() { # URL ID RUNS -> HTTP status of a small spmv request
  curl -s -o "$T/spmv.body" -w '%{http_code}' --max-time 30 -H 'Content-Type: application/json' \
    --data "{\"kernel\":\"cpu.csr.serial\",\"x\":$X_JSON,\"runs\":$3,\"warmup\":0}" "$1/v1/matrices/$2/spmv"
}

test_sighup() {
  local port url cfg=$T/hup.json out=$T/hup.rec state=$T/state-hup
  port=$(free_port); url=http://127.0.0.1:$port
  mkdir -p "$state"
  printf '{"listen":"127.0.0.1:%s","state_dir":"%s","log_level":"info","max_runs":1000}\n' "$port" "$state" >"$cfg"
  notify_listen "$T/hup.sock" "$out" || { not_ok "sighup: listener starts"; return; }
  NOTIFY_SOCKET=$T/hup.sock start_spmvd "$T/hup.log" --config "$cfg"
  if ! wait_for has_line "$out" 'READY=1'; then not_ok "sighup: daemon comes up" "$(tail -5 "$T/hup.log")"; return; fi
  random_mtx "$T/hup.mtx" 8 3
  local loc id
  loc=$(curl -s -D - -o /dev/null --max-time 30 -F "file=@$T/hup.mtx" "$url/v1/matrices" | tr -d '\r' | awk 'tolower($1)=="location:" {print $2}')
  id=${loc##*/}
  X_JSON='[1,1,1,1,1,1,1,1]'
  check "sighup: runs=10 accepted under max_runs 1000" [ "$(spmv_code "$url" "$id" 10)" = 200 ]

  # Lower the limit in the file and reload: the new limit applies at once.
  printf '{"listen":"127.0.0.1:%s","state_dir":"%s","log_level":"debug","max_runs":5}\n' "$port" "$state" >"$cfg"
  local lines0 readies0
  lines0=$(wc -l <"$T/hup.log"); readies0=$(count_lines "$out" '^READY=1')
  kill -HUP "$DPID"
  wait_for count_above "$out" '^READY=1' "$readies0"
  local code
  code=$(spmv_code "$url" "$id" 10)
  check "sighup: runs=10 refused after reloading max_runs 5 (got $code)" [ "${code:0:1}" = 4 ]
  check "sighup: runs=5 still accepted" [ "$(spmv_code "$url" "$id" 5)" = 200 ]
  if tail -n +"$((lines0 + 1))" "$T/hup.log" | grep -qi 'reload'; then ok "sighup: the reload is logged"
  else not_ok "sighup: the reload is logged" "log after SIGHUP:" "$(tail -n +"$((lines0 + 1))" "$T/hup.log" | head -5)"; fi
  # Under Type=notify a RELOADING=1 must be closed by READY=1, or systemd
  # shows the unit "reloading" for ever.
  local rl rd
  rl=$(awk -F'\t' '$2 ~ /^RELOADING=1/ { s = $1 } END { print s + 0 }' "$out")
  rd=$(awk -F'\t' '$2 ~ /^READY=1/ { s = $1 } END { print s + 0 }' "$out")
  if [ "$rl" -eq 0 ] || [ "$rd" -gt "$rl" ]; then ok "sighup: every RELOADING=1 is followed by READY=1"
  else not_ok "sighup: every RELOADING=1 is followed by READY=1" "records:" "$(tail -5 "$out")"; fi

  # A broken file on reload: the daemon says so and keeps the old settings.
  echo '{"max_runs": "lots"' >"$cfg"
  lines0=$(wc -l <"$T/hup.log")
  kill -HUP "$DPID"
  sleep 1
  check "sighup: a broken configuration does not stop the daemon" alive "$DPID"
  check "sighup: ... which keeps serving with the old limits" [ "$(spmv_code "$url" "$id" 5)" = 200 ]
  if tail -n +"$((lines0 + 1))" "$T/hup.log" | grep -q 'hup.json'; then ok "sighup: the broken file is named in the log"
  else not_ok "sighup: the broken file is named in the log" "$(tail -n +"$((lines0 + 1))" "$T/hup.log" | head -5)"; fi
  stop_spmvd "$DPID"; local rc=$?
  check "sighup: exit status 0 after SIGTERM (got $rc)" [ "$rc" -eq 0 ]
  kill "$LISTENER" 2>/dev/null
}

# ------------------------------------------------ 4. socket activation
test_socket_activation() {
  if ! command -v systemd-socket-activate >/dev/null; then
    skip "socket activation: systemd-socket-activate not installed"; return
  fi
  local port other url pid
  port=$(free_port); other=$(free_port); url=http://127.0.0.1:$port
  mkdir -p "$T/state-sa"
  # --listen names another port: with LISTEN_FDS the daemon must not bind it.
  systemd-socket-activate -l "127.0.0.1:$port" \
    "$SPMVD" --state-dir "$T/state-sa" --listen "127.0.0.1:$other" >"$T/sa.log" 2>&1 &
  pid=$!; PIDS+=("$pid")
  # Nothing runs until the first connection; that connection starts the
  # daemon and is answered through the passed socket.
  wait_for grep -q 'Listening on' "$T/sa.log"
  local code
  code=$(curl -s -o "$T/sa.body" -w '%{http_code}' --max-time 30 "$url/v1/health")
  if [ "$code" = 200 ]; then ok "socket activation: the first request is served through the passed socket"
  else not_ok "socket activation: the first request is served through the passed socket" "got $code" "$(tail -5 "$T/sa.log")"; fi
  check "socket activation: a second request works too" is_200 "$url/v1/ready"
  code=$(http_code "http://127.0.0.1:$other/v1/health")
  check "socket activation: --listen is not bound when LISTEN_FDS is set (got $code)" [ "$code" = 000 ]
  stop_spmvd "$pid"; local rc=$?
  check "socket activation: exit status 0 after SIGTERM (got $rc)" [ "$rc" -eq 0 ]
}

# ---------------------------------- 5. SIGTERM while jobs run and wait
test_sigterm_drain() {
  local port url state=$T/state-drain
  port=$(free_port); url=http://127.0.0.1:$port
  mkdir -p "$state"
  start_spmvd "$T/drain.log" --state-dir "$state" --listen "127.0.0.1:$port" \
    --devices none --max-runs 1000000
  if ! wait_for is_200 "$url/v1/ready"; then not_ok "drain: daemon comes up" "$(tail -5 "$T/drain.log")"; return; fi
  random_mtx "$T/big.mtx" 20000 10
  local loc id
  loc=$(curl -s -D - -o /dev/null --max-time 120 -F "file=@$T/big.mtx" "$url/v1/matrices" | tr -d '\r' | awk 'tolower($1)=="location:" {print $2}')
  id=${loc##*/}
  if [ -z "$id" ]; then not_ok "drain: matrix uploaded" "$(tail -5 "$T/drain.log")"; stop_spmvd "$DPID"; return; fi
  ok "drain: matrix uploaded ($id)"
  # x of ones as JSON; runs sized so that one job lasts seconds.
  python3 -c 'import json; print(json.dumps({"kernel":"cpu.csr.serial","x":[1.0]*20000,"runs":4000,"warmup":0}))' >"$T/job.json"
  local i
  for i in 1 2 3 4; do
    curl -s -o "$T/drain-$i.body" -w '%{http_code}' --max-time 120 \
      -H 'Content-Type: application/json' --data-binary "@$T/job.json" \
      "$url/v1/matrices/$id/spmv" >"$T/drain-$i.code" 2>/dev/null &
    PIDS+=("$!")
    sleep 0.2
  done
  sleep 1   # the first job is running, the others wait in the queue
  stop_spmvd "$DPID"; local rc=$?
  wait 2>/dev/null
  check "drain: exit status 0 after SIGTERM with jobs running and waiting (got $rc)" [ "$rc" -eq 0 ]
  local codes="" all=1 c
  for i in 1 2 3 4; do
    c=$(cat "$T/drain-$i.code" 2>/dev/null); codes="$codes $c"
    case $c in 200|503) ;; *) all=0 ;; esac
  done
  if [ $all -eq 1 ]; then ok "drain: every waiting client got 200 or 503 (${codes# })"
  else not_ok "drain: every waiting client got 200 or 503" "codes:$codes" "$(tail -5 "$T/drain.log")"; fi
  check "drain: the running job finished with 200 (first code ${codes# })" [ "$(cat "$T/drain-1.code")" = 200 ]
}

# ------------------------------------------ 6. install, verify, uninstall
test_install() {
  local d=$T/destdir prefix=/usr/local
  if ! make --no-print-directory -s BUILD="$BUILD" PREFIX=$prefix DESTDIR="$d" install >"$T/install.log" 2>&1; then
    not_ok "install: make install succeeds" "$(tail -5 "$T/install.log")"; return
  fi
  ok "install: make install PREFIX=$prefix DESTDIR=... succeeds"
  local f missing=""
  for f in sbin/spmvd lib/systemd/system/spmvd.service lib/systemd/system/spmvd.socket \
           lib/sysusers.d/spmvd.conf share/man/man8/spmvd.8 share/man/man1/spmvctl.1; do
    [ -f "$d$prefix/$f" ] || missing="$missing $prefix/$f"
  done
  if [ -f config/spmvd.json ]; then
    for f in /etc/spmvd/spmvd.json.example /etc/spmvd/spmvd.json; do [ -f "$d$f" ] || missing="$missing $f"; done
  fi
  check "install: daemon, units, sysusers, man pages, configuration in place${missing:+ (missing:$missing)}" [ -z "$missing" ]
  check "install: spmvd is executable" [ -x "$d$prefix/sbin/spmvd" ]
  local unit=$d$prefix/lib/systemd/system/spmvd.service
  check "install: ExecStart names $prefix/sbin/spmvd" grep -q "^ExecStart=$prefix/sbin/spmvd " "$unit"
  check "install: no @VARIABLE@ left in the unit" bash -c "! grep -q '@[A-Z]*@' '$unit'"

  test_units "$d" "$prefix"

  # An administrator's configuration survives a reinstall and an uninstall.
  if [ -f config/spmvd.json ]; then
    echo '{"log_level":"debug"}' >"$d/etc/spmvd/spmvd.json"
    make --no-print-directory -s BUILD="$BUILD" PREFIX=$prefix DESTDIR="$d" install >/dev/null 2>&1
    check "install: a reinstall keeps the administrator's spmvd.json" grep -q debug "$d/etc/spmvd/spmvd.json"
  fi
  if ! make --no-print-directory -s BUILD="$BUILD" PREFIX=$prefix DESTDIR="$d" uninstall >"$T/uninstall.log" 2>&1; then
    not_ok "uninstall: make uninstall succeeds" "$(tail -5 "$T/uninstall.log")"; return
  fi
  ok "uninstall: make uninstall succeeds"
  local left
  left=$(cd "$d" && find . \( -type f -o -type l \) | sort | tr '\n' ' ')
  if [ -f config/spmvd.json ]; then
    check "uninstall: only the changed spmvd.json is left (left: ${left:-nothing})" [ "$left" = "./etc/spmvd/spmvd.json " ]
    rm -f "$d/etc/spmvd/spmvd.json"
  else
    check "uninstall: every installed file is gone (left: ${left:-nothing})" [ -z "$left" ]
  fi
  # An unchanged configuration goes with the rest.
  make --no-print-directory -s BUILD="$BUILD" PREFIX=$prefix DESTDIR="$d" install >/dev/null 2>&1
  make --no-print-directory -s BUILD="$BUILD" PREFIX=$prefix DESTDIR="$d" uninstall >/dev/null 2>&1
  left=$(cd "$d" && find . \( -type f -o -type l \) | sort | tr '\n' ' ')
  check "uninstall: install then uninstall leaves no file (left: ${left:-nothing})" [ -z "$left" ]
}

# test_units DESTDIR PREFIX: the installed units pass systemd-analyze.
test_units() {
  local d=$1 prefix=$2
  if ! command -v systemd-analyze >/dev/null; then skip "units: systemd-analyze not installed"; return; fi
  # verify needs the binary at the ExecStart path: point it into DESTDIR.
  # The user "spmvd" need not exist for verify (it is created at install
  # time by systemd-sysusers), so no warning about it is expected.
  local chk=$T/unit-check
  mkdir -p "$chk"
  sed "s|^ExecStart=$prefix/|ExecStart=$d$prefix/|" "$d$prefix/lib/systemd/system/spmvd.service" >"$chk/spmvd.service"
  cp "$d$prefix/lib/systemd/system/spmvd.socket" "$chk/"
  # Documentation=man:... is checked too: the man pages come from DESTDIR.
  if MANPATH=$d$prefix/share/man systemd-analyze verify "$chk/spmvd.service" "$chk/spmvd.socket" >"$T/verify.log" 2>&1 \
     && [ ! -s "$T/verify.log" ]; then
    ok "units: systemd-analyze verify passes without a warning (man pages found)"
  else
    not_ok "units: systemd-analyze verify passes without a warning" "$(cat "$T/verify.log")"
  fi
  # The exposure score is a property of the unit file alone.
  local score
  score=$(systemd-analyze security --offline=yes "$chk/spmvd.service" 2>/dev/null |
          awk '/Overall exposure level/ { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+$/) print $i }')
  if [ -n "$score" ] && awk -v s="$score" 'BEGIN { exit !(s <= 2.5) }'; then
    ok "units: systemd-analyze security exposure $score <= 2.5"
  else
    not_ok "units: systemd-analyze security exposure <= 2.5" "got '${score}'"
  fi
  local u=$chk/spmvd.service
  check "units: Type=notify" grep -qx 'Type=notify' "$u"
  check "units: WatchdogSec= set" grep -q '^WatchdogSec=[1-9]' "$u"
  check "units: Restart=on-failure" grep -qx 'Restart=on-failure' "$u"
  check "units: DevicePolicy=closed with the NVIDIA devices allowed" \
    bash -c "grep -qx 'DevicePolicy=closed' '$u' && grep -q '^DeviceAllow=char-nvidia-uvm rw' '$u' && grep -q '^DeviceAllow=char-nvidiactl rw' '$u'"
  # Settings that would break CUDA must stay out.
  check "units: no MemoryDenyWriteExecute= (the CUDA JIT needs W+X pages)" bash -c "! grep -q '^MemoryDenyWriteExecute=yes' '$u'"
  check "units: no PrivateDevices= (it hides /dev/nvidia*)" bash -c "! grep -q '^PrivateDevices=yes' '$u'"
  check "units: empty capability bounding set" grep -qx 'CapabilityBoundingSet=' "$u"
  check "units: the socket listens on 127.0.0.1:8080 and the service names it" \
    bash -c "grep -qx 'ListenStream=127.0.0.1:8080' '$chk/spmvd.socket' && grep -qx 'Sockets=spmvd.socket' '$u'"
}

# -------------------------------------------- 7. man pages match --help
test_man_pages() {
  local page
  for page in docs/man/spmvd.8 docs/man/spmvctl.1; do
    if groff -man -ww -z "$page" 2>"$T/groff.log" && [ ! -s "$T/groff.log" ]; then ok "man: $page formats without a warning"
    else not_ok "man: $page formats without a warning" "$(head -5 "$T/groff.log")"; fi
  done
  if [ -x "$SPMVD" ]; then
    "$SPMVD" --help >"$T/spmvd.help" 2>&1
    man_flags_match spmvd "$T/spmvd.help" docs/man/spmvd.8
  else
    skip "man: $SPMVD not built"
  fi
  if [ ! -x "$B/spmvctl" ]; then skip "man: spmvctl not built"; return; fi
  # spmvctl: the global usage plus every command's own --help.
  local cmds c missing=""
  "$B/spmvctl" --help >"$T/spmvctl.help" 2>&1
  cmds=$(awk '/^Commands:/ { on = 1; next } /^$/ { on = 0 } on { print $1 }' "$T/spmvctl.help")
  for c in $cmds; do
    "$B/spmvctl" "$c" --help >>"$T/spmvctl.help" 2>&1
    man_render docs/man/spmvctl.1 | grep -qE "^   $c( |$)" || missing="$missing $c"
  done
  check "man: spmvctl.1 has a section for every command (${cmds//$'\n'/ })${missing:+ (missing:$missing)}" \
    test -n "$cmds" -a -z "$missing"
  man_flags_match spmvctl "$T/spmvctl.help" docs/man/spmvctl.1
}

# man_render PAGE: plain text, wide lines, no hyphenation, so that every
# flag comes out in one piece.
man_render() { groff -man -Tascii -P-c -P-b -P-u -rLL=300n -rHY=0 "$1" 2>/dev/null; }

# man_flags_match NAME HELP_FILE PAGE: every --flag of the help text is in
# PAGE, and every --flag of PAGE's OPTIONS and COMMANDS sections is one the
# help text knows (the EXAMPLES may show other programs' flags).
man_flags_match() {
  local name=$1 help=$2 page=$3
  grep -oE -- '--[a-z][a-z0-9-]*' "$help" | sort -u >"$T/$name.help-flags"
  man_render "$page" |
    awk '/^[A-Z]/ { inopt = ($0 ~ /^(OPTIONS|COMMANDS)/) } inopt' |
    grep -oE -- '--[a-z][a-z0-9-]*' | sort -u >"$T/$name.man-flags"
  local undocumented unknown
  undocumented=$(comm -23 "$T/$name.help-flags" "$T/$name.man-flags" | tr '\n' ' ')
  unknown=$(comm -13 "$T/$name.help-flags" "$T/$name.man-flags" | tr '\n' ' ')
  check "man: every flag of $name --help is in $page${undocumented:+ (missing: $undocumented)}" [ -z "$undocumented" ]
  check "man: every flag $page documents is one $name knows${unknown:+ (unknown: $unknown)}" [ -z "$unknown" ]
}

test_man_pages
if [ ! -x "$SPMVD" ]; then
  skip "install, units, notify, socket activation, drain: $SPMVD not built"
  echo "1..$n"; exit "$((nfail > 0))"
fi
test_install
test_notify
test_notify_abstract
test_sighup
test_socket_activation
test_sigterm_drain

echo "1..$n"
[ "$nfail" -eq 0 ]
