#!/usr/bin/env bash
# systemd.sh — spmvd as a systemd service, tested without a running systemd.
#
# The daemon's side of the service contract is driven the way systemd drives
# it: a notification socket this script owns (a small python3 listener that
# records every datagram in order) with WATCHDOG_USEC, socket activation
# through systemd-socket-activate, a restart behind a listening socket held
# by another process (what spmvd.socket does), SIGHUP (systemctl reload) and
# SIGTERM with jobs running and waiting. The daemon also runs as the unit
# confines it: as nobody, without capabilities, under the unit's system call
# filter (tests/e2e/sandbox.c). The installed units are checked with
# `systemd-analyze verify` and `systemd-analyze security`, `make install` and
# `make uninstall` run into a temporary DESTDIR, and the man pages are held
# to --help. TAP through tests/e2e/lib.sh.
. "$(dirname "$0")/lib.sh"
cd "$SPMV_ROOT" || exit 1

SEED=${SPMV_SEED:-$(( ($(date +%s) ^ $$) % 1000000 ))}
RANDOM=$((SEED % 32768))
diag "seed $SEED (set SPMV_SEED to repeat)"
T=$E2E_TMP

# ------------------------------------------------------------- helpers
# bg_pid PID: one more process for lib.sh's cleanup to kill.
bg_pid() { SPMVD_PIDS+=("$1"); }

# notify_listen ADDR OUT: records the lines of each datagram sent to ADDR (a
# path, or @name in the abstract namespace) as "SEQ<TAB>LINE" in OUT, SEQ
# counting datagrams; sets LISTENER.
notify_listen() {
  local addr=$1 out=$2 i
  : >"$out"
  "$PYTHON" - "$addr" "$out" <<'EOF' &
import socket, sys
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
  bg_pid "$LISTENER"
  for i in $(seq 100); do [ -e "$out.ready" ] && return 0; sleep 0.05; done
  return 1
}

# wait_for COMMAND...: retries for up to 30 s (a hang guard, not a timing).
wait_for() {
  local end=$((SECONDS + 30))
  while [ $SECONDS -lt $end ]; do "$@" && return 0; sleep 0.1; done
  return 1
}
has_line() { grep -q -- "$2" "$1"; }
http_code() { curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$@"; }
is_200() { [ "$(http_code "$1")" = 200 ]; }
# first_seq REC REGEX: datagram number of the first line matching, or "".
first_seq() { awk -F'\t' -v p="$2" '$2 ~ p { print $1; exit }' "$1"; }
last_seq() { awk -F'\t' -v p="$2" '$2 ~ p { s = $1 } END { print s + 0 }' "$1"; }
count_lines() { awk -F'\t' -v p="$2" '$2 ~ p { n++ } END { print n + 0 }' "$1"; }
count_above() { [ "$(count_lines "$1" "$2")" -gt "$3" ]; }
records() { echo "records:"; tail -"${2:-8}" "$1"; }

matrix_count() {
  curl -s --max-time 10 "$SPMVD_URL/v1/matrices" | "$PYTHON" -c '
import json, sys
d = json.load(sys.stdin)
print(len(d.get("matrices", []) if isinstance(d, dict) else d))'
}

# spmv_code ID RUNS: HTTP status of a small cpu.csr.serial request with x = $X_JSON.
spmv_code() {
  curl -s -o "$T/spmv.body" -w '%{http_code}' --max-time 30 -H 'Content-Type: application/json' \
    --data "{\"kernel\":\"cpu.csr.serial\",\"x\":$X_JSON,\"runs\":$2,\"warmup\":0}" \
    "$SPMVD_URL/v1/matrices/$1/spmv"
}

queue_depth_cpu() {
  curl -s --max-time 5 "$SPMVD_URL/metrics" | awk '/^spmvd_queue_depth\{device="cpu"\}/ { print $2 }'
}
queue_depth_is() { [ "$(queue_depth_cpu)" = "$1" ]; }

# --------------------------------------------------- 1. notify protocol
test_notify() {
  local nmat=4 i up=0
  SPMVD_STATE=$(mktemp -d "$T/state-notify.XXXXXX")
  # First run: store matrices so that the second run has a reload to do.
  if ! start_spmvd; then not_ok "notify: first daemon comes up" "$(tail -5 "$SPMVD_LOG")"; return; fi
  for i in $(seq $nmat); do
    gen_matrix "$T/n$i.mtx" $((20 + RANDOM % 50)) 3
    upload_multipart "$T/n$i.mtx"
    [ "$CODE" = 201 ] && up=$((up + 1))
  done
  check "notify: $nmat matrices stored before the restart" [ "$up" -eq $nmat ]
  stop_spmvd

  # Second run under our notification socket, watchdog at 0.5 s.
  local sock=$T/notify.sock out=$T/notify.rec
  notify_listen "$sock" "$out" || { not_ok "notify: listener starts"; return; }
  NOTIFY_SOCKET=$sock WATCHDOG_USEC=500000 start_spmvd
  if ! wait_for has_line "$out" '^[0-9]*.READY=1'; then
    not_ok "notify: READY=1 sent" "$(records "$out")" "$(tail -5 "$SPMVD_LOG")"
    stop_spmvd; return
  fi
  ok "notify: READY=1 sent"
  # The moment READY=1 is out the whole state directory must be back.
  local n
  n=$(matrix_count)
  check "notify: all $nmat stored matrices are loaded once READY=1 is sent (got $n)" [ "$n" = "$nmat" ]
  check "notify: /v1/ready answers 200" is_200 "$SPMVD_URL/v1/ready"

  local ready
  ready=$(first_seq "$out" '^READY=1')
  if [ "$(awk -F'\t' -v r="$ready" '$1 < r && $2 ~ /^STATUS=/' "$out" | wc -l)" -ge 1 ]; then
    ok "notify: STATUS= lines come before READY=1"
  else
    not_ok "notify: STATUS= lines come before READY=1" "$(records "$out")"
  fi
  # The reload reports its progress up to the last matrix before READY=1.
  if awk -F'\t' -v r="$ready" -v m="$nmat/$nmat" '$1 < r && $2 ~ /^STATUS=/ && index($2, m) { f = 1 } END { exit !f }' "$out"; then
    ok "notify: a STATUS= line says $nmat/$nmat loaded before READY=1"
  else
    not_ok "notify: a STATUS= line says $nmat/$nmat loaded before READY=1" "$(records "$out")"
  fi
  # Start-up time is extended while the reload runs, never after READY=1.
  local ext_ok
  ext_ok=$(awk -F'\t' -v r="$ready" '$2 ~ /^EXTEND_TIMEOUT_USEC=/ { n++; v = substr($2, 21) + 0; if ($1 > r || v <= 0) bad++ }
                                      END { print (n > 0 && !bad) ? 1 : 0 }' "$out")
  if [ "$ext_ok" = 1 ]; then ok "notify: EXTEND_TIMEOUT_USEC= during the reload, positive, before READY=1"
  else not_ok "notify: EXTEND_TIMEOUT_USEC= during the reload, positive, before READY=1" "$(records "$out")"; fi

  # Watchdog at 0.5 s: pings must keep coming. Over a 3 s window a healthy
  # daemon sends about 6 to 18; 2 is a floor, not a timing.
  local w0 w1
  w0=$(count_lines "$out" '^WATCHDOG=1')
  sleep 3
  w1=$(count_lines "$out" '^WATCHDOG=1')
  if [ $((w1 - w0)) -ge 2 ]; then ok "notify: WATCHDOG=1 pings keep coming ($((w1 - w0)) in 3 s at WATCHDOG_USEC=500000)"
  else not_ok "notify: WATCHDOG=1 pings keep coming" "got $((w1 - w0)) in 3 s" "$(records "$out")"; fi

  stop_spmvd; local rc=$?
  check "notify: exit status 0 after SIGTERM (got $rc)" [ "$rc" -eq 0 ]
  local stopping
  stopping=$(first_seq "$out" '^STOPPING=1')
  if [ -n "$stopping" ] && [ "$stopping" -gt "$ready" ]; then ok "notify: STOPPING=1 sent on SIGTERM"
  else not_ok "notify: STOPPING=1 sent on SIGTERM" "$(records "$out")"; fi
  kill "$LISTENER" 2>/dev/null
  unset SPMVD_STATE
}

# -------------------------- 2. abstract socket, a watchdog that is not ours
test_notify_abstract() {
  local out=$T/abstract.rec name="@spmvd-test-$$-$RANDOM"
  notify_listen "$name" "$out" || { not_ok "abstract: listener starts"; return; }
  # WATCHDOG_PID names another process: the watchdog is not this one's to
  # ping (sd_watchdog_enabled() says no), while READY/STOPPING still go out.
  NOTIFY_SOCKET=$name WATCHDOG_USEC=200000 WATCHDOG_PID=1 start_spmvd
  if wait_for has_line "$out" 'READY=1'; then ok "abstract: READY=1 through an abstract-namespace socket ($name)"
  else not_ok "abstract: READY=1 through an abstract-namespace socket ($name)" "$(tail -5 "$SPMVD_LOG")"; fi
  sleep 1
  check "abstract: no WATCHDOG=1 when WATCHDOG_PID is another process" [ "$(count_lines "$out" '^WATCHDOG=1')" -eq 0 ]
  stop_spmvd; local rc=$?
  check "abstract: exit status 0 after SIGTERM (got $rc)" [ "$rc" -eq 0 ]
  check "abstract: STOPPING=1 sent" has_line "$out" 'STOPPING=1'
  kill "$LISTENER" 2>/dev/null
}

# --------------------------------------- 3. SIGHUP (systemctl reload)
test_sighup() {
  local cfg=$T/hup.json out=$T/hup.rec port state
  port=$(free_port); state=$(mktemp -d "$T/state-hup.XXXXXX")
  write_cfg() { printf '{"listen":"127.0.0.1:%s","state_dir":"%s","log_level":"%s","max_runs":%s}\n' "$port" "$state" "$1" "$2" >"$cfg"; }
  write_cfg info 1000
  notify_listen "$T/hup.sock" "$out" || { not_ok "sighup: listener starts"; return; }
  # The file, not flags, names listen and state_dir: flags would win over it.
  NOTIFY_SOCKET=$T/hup.sock "$SPMVD" --config "$cfg" >"$T/hup.log" 2>&1 &
  SPMVD_PID=$!; bg_pid "$SPMVD_PID"; SPMVD_URL=http://127.0.0.1:$port; SPMVD_LOG=$T/hup.log
  if ! wait_ready "$SPMVD_URL" 30; then not_ok "sighup: daemon comes up" "$(tail -5 "$SPMVD_LOG")"; return; fi
  gen_matrix "$T/hup.mtx" 8 3
  upload_multipart "$T/hup.mtx"
  local id=$MATRIX_ID
  X_JSON='[1,1,1,1,1,1,1,1]'
  check "sighup: runs=10 accepted under max_runs 1000" [ "$(spmv_code "$id" 10)" = 200 ]

  # Lower the limit in the file and reload: the new limit applies at once.
  write_cfg debug 5
  local lines0 readies0 code
  lines0=$(wc -l <"$SPMVD_LOG"); readies0=$(count_lines "$out" '^READY=1')
  kill -HUP "$SPMVD_PID"
  wait_for count_above "$out" '^READY=1' "$readies0"
  code=$(spmv_code "$id" 10)
  check "sighup: runs=10 refused after max_runs 5 is reloaded (got $code)" [ "${code:0:1}" = 4 ]
  check "sighup: runs=5 still accepted" [ "$(spmv_code "$id" 5)" = 200 ]
  if tail -n +"$((lines0 + 1))" "$SPMVD_LOG" | grep -i 'reload' | grep -q 'max_runs=5'; then ok "sighup: the reload and its values are logged"
  else not_ok "sighup: the reload and its values are logged" "$(tail -n +"$((lines0 + 1))" "$SPMVD_LOG" | head -5)"; fi
  # Under Type=notify a RELOADING=1 must be closed by READY=1, or systemd
  # shows the unit "reloading" for ever.
  if [ "$(last_seq "$out" '^RELOADING=1')" -eq 0 ] || [ "$(last_seq "$out" '^READY=1')" -gt "$(last_seq "$out" '^RELOADING=1')" ]; then
    ok "sighup: RELOADING=1 is followed by READY=1"
  else
    not_ok "sighup: RELOADING=1 is followed by READY=1" "$(records "$out")"
  fi

  # A broken file on reload: the daemon says so and keeps its settings.
  echo '{"max_runs": "lots"' >"$cfg"
  lines0=$(wc -l <"$SPMVD_LOG"); readies0=$(count_lines "$out" '^READY=1')
  kill -HUP "$SPMVD_PID"
  wait_for count_above "$out" '^READY=1' "$readies0"
  check "sighup: a broken configuration file does not stop the daemon" alive "$SPMVD_PID"
  check "sighup: ... which keeps max_runs 5 (runs=5 accepted)" [ "$(spmv_code "$id" 5)" = 200 ]
  code=$(spmv_code "$id" 10)
  check "sighup: ... (runs=10 still refused, got $code)" [ "${code:0:1}" = 4 ]
  if tail -n +"$((lines0 + 1))" "$SPMVD_LOG" | grep -q 'hup.json'; then ok "sighup: the broken file is named in the log"
  else not_ok "sighup: the broken file is named in the log" "$(tail -n +"$((lines0 + 1))" "$SPMVD_LOG" | head -5)"; fi
  stop_spmvd; local rc=$?
  check "sighup: exit status 0 after SIGTERM (got $rc)" [ "$rc" -eq 0 ]
  kill "$LISTENER" 2>/dev/null
}

# ------------------------------------------------ 4. socket activation
test_socket_activation() {
  if ! command -v systemd-socket-activate >/dev/null; then
    skip "socket activation: systemd-socket-activate not installed"; return
  fi
  local port other pid code
  port=$(free_port); other=$(free_port)
  # --listen names another port: with LISTEN_FDS the daemon must not bind it.
  systemd-socket-activate -l "127.0.0.1:$port" \
    "$SPMVD" --state-dir "$(mktemp -d "$T/state-sa.XXXXXX")" --listen "127.0.0.1:$other" >"$T/sa.log" 2>&1 &
  pid=$!; bg_pid "$pid"
  wait_for grep -qs 'Listening on' "$T/sa.log"
  check "socket activation: nothing answers on --listen's port before the first connection" \
    [ "$(http_code "http://127.0.0.1:$other/v1/health")" = 000 ]
  # Nothing runs until the first connection; that connection starts the
  # daemon and is answered through the passed socket.
  code=$(curl -s -o "$T/sa.body" -w '%{http_code}' --max-time 30 "http://127.0.0.1:$port/v1/health")
  if [ "$code" = 200 ]; then ok "socket activation: the first request is served through the passed socket"
  else not_ok "socket activation: the first request is served through the passed socket" "got $code" "$(tail -5 "$T/sa.log")"; fi
  check "socket activation: later requests too" is_200 "http://127.0.0.1:$port/v1/ready"
  check "socket activation: --listen's port stays unbound when LISTEN_FDS is set" \
    [ "$(http_code "http://127.0.0.1:$other/v1/health")" = 000 ]
  check "socket activation: the log says the socket came from systemd" grep -q 'passed by systemd' "$T/sa.log"
  stop_spmvd "$pid"; local rc=$?
  check "socket activation: exit status 0 after SIGTERM (got $rc)" [ "$rc" -eq 0 ]
}

# ----------------------------- 4b. restart behind a socket held elsewhere
# What spmvd.socket does on `systemctl restart spmvd`: the listening socket
# belongs to another process (here a python3 holder standing in for
# systemd), each daemon gets it through LISTEN_FDS, and between the old
# daemon's exit and the new one's start a client's connection waits in the
# backlog. The old daemon must leave the shared socket usable, and the
# waiting client must be answered by the new one.
test_socket_restart() {
  local port state
  port=$(free_port); state=$(mktemp -d "$T/state-restart.XXXXXX")
  cat >"$T/holder.py" <<'EOF'
import os, signal, socket, sys, time
port, spmvd, state, logbase = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(128)

def spawn(n):
    pid = os.fork()
    if pid == 0:
        log = os.open("%s-%d.log" % (logbase, n), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        if s.fileno() == 3:      # dup2 onto itself would leave it close-on-exec
            os.set_inheritable(3, True)
        else:
            os.dup2(s.fileno(), 3)
        os.environ.update(LISTEN_FDS="1", LISTEN_PID=str(os.getpid()))
        os.execv(spmvd, [spmvd, "--state-dir", state, "--listen", "127.0.0.1:1"])
    return pid

def stop(pid):
    os.kill(pid, signal.SIGTERM)
    _, st = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(st)

pid = spawn(1)
print("started", pid)
for line in sys.stdin:
    if line.strip() == "restart":
        print("exited", stop(pid))
        time.sleep(1.5)  # the gap: connections queue in the backlog
        pid = spawn(2)
        print("started", pid)
    elif line.strip() == "stop":
        print("exited", stop(pid))
        break
EOF
  coproc HOLDER { "$PYTHON" -u "$T/holder.py" "$port" "$SPMVD" "$state" "$T/restart"; }
  local line pid1 url=http://127.0.0.1:$port
  read -r -t 30 line <&"${HOLDER[0]}"; pid1=${line#started }
  bg_pid "$pid1"; bg_pid "$HOLDER_PID"
  SPMVD_URL=$url SPMVD_PID=$pid1
  # a dead daemon leaves connections hanging in the held backlog: give up
  # on the first one that is not answered within its 2 s
  if ! wait_for is_200 "$url/v1/ready"; then not_ok "restart: the first daemon serves the held socket" "$(tail -5 "$T/restart-1.log")"; return; fi
  gen_matrix "$T/rs.mtx" 50 4
  upload_multipart "$T/rs.mtx"
  local id=$MATRIX_ID
  expect_code "restart: a matrix stored through the held socket" 201
  echo restart >&"${HOLDER[1]}"
  read -r -t 90 line <&"${HOLDER[0]}"
  check "restart: the old daemon exits 0 ($line)" [ "$line" = "exited 0" ]
  # The old daemon is gone and the new one not started yet: connect now.
  curl -s -o "$T/rs-health.body" -w '%{http_code}' --max-time 60 "$url/v1/health" >"$T/rs-health.code" &
  local c1=$!
  curl -s -o "$T/rs-get.body" -w '%{http_code}' --max-time 60 "$url/v1/matrices/$id" >"$T/rs-get.code" &
  local c2=$!
  read -r -t 30 line <&"${HOLDER[0]}"
  local pid2=${line#started }
  bg_pid "$pid2"; SPMVD_PID=$pid2
  wait "$c1" "$c2"
  check "restart: a connection made between the two daemons is answered by the new one ($(cat "$T/rs-health.code"))" \
    [ "$(cat "$T/rs-health.code")" = 200 ]
  local g
  g=$(cat "$T/rs-get.code")
  check "restart: a matrix request made in the gap gets 200, or 503 while the reload runs (got $g)" \
    test "$g" = 200 -o "$g" = 503
  wait_for is_200 "$url/v1/ready"
  req GET "/v1/matrices/$id"
  expect_code "restart: the matrix is back after the restart" 200
  echo stop >&"${HOLDER[1]}"
  read -r -t 90 line <&"${HOLDER[0]}"
  check "restart: the new daemon exits 0 ($line)" [ "$line" = "exited 0" ]
}

# ---------------------------------- 5. SIGTERM while jobs run and wait
# One job runs and three wait in the CPU queue when SIGTERM comes: the
# running one must finish (200), the waiting ones be answered 503, a new
# connection be refused or answered (never reset), and the exit status be 0.
test_sigterm_drain() {
  if ! start_spmvd --devices none --max-runs 1000000 --threads 8; then
    not_ok "drain: daemon comes up" "$(tail -5 "$SPMVD_LOG")"; return
  fi
  local n=20000
  gen_matrix "$T/big.mtx" $n 10
  upload_multipart "$T/big.mtx"
  local id=$MATRIX_ID
  if [ "$CODE" != 201 ]; then not_ok "drain: matrix uploaded" "HTTP $CODE"; stop_spmvd; return; fi
  # Size the jobs from a short run so that one lasts about 4 s on this
  # machine (a sizing, not an assertion): long enough for three more
  # requests to queue behind it on a loaded machine.
  "$PYTHON" -c 'import json, sys; print(json.dumps({"kernel":"cpu.csr.serial","x":[1.0]*int(sys.argv[1]),"runs":50,"warmup":0}))' $n >"$T/cal.json"
  req POST "/v1/matrices/$id/spmv" -H 'Content-Type: application/json' --data-binary "@$T/cal.json"
  local mean runs
  mean=$(jget 'd["stats"]["median_ms"]' 2>/dev/null)
  runs=$("$PYTHON" -c 'import sys; print(max(50, min(1000000, int(4000 / max(float(sys.argv[1]), 1e-3)))))' "${mean:-1}")
  diag "drain: cpu.csr.serial median ${mean} ms, $runs runs per job"
  "$PYTHON" -c 'import json, sys; print(json.dumps({"kernel":"cpu.csr.serial","x":[1.0]*int(sys.argv[1]),"runs":int(sys.argv[2]),"warmup":0}))' $n "$runs" >"$T/job.json"
  local i
  for i in 1 2 3 4; do
    : >"$T/drain-$i.code"
    curl -s -o "$T/drain-$i.body" -w '%{http_code}' --max-time 120 -H 'Content-Type: application/json' \
      --data-binary "@$T/job.json" "$SPMVD_URL/v1/matrices/$id/spmv" >"$T/drain-$i.code" 2>/dev/null &
    bg_pid $!
    # the first must be running before the others queue behind it
    [ $i = 1 ] && sleep 0.5
  done
  wait_for queue_depth_is 3
  local depth answered=0
  depth=$(queue_depth_cpu)
  for i in 1 2 3 4; do [ -s "$T/drain-$i.code" ] && answered=$((answered + 1)); done
  if [ "$depth" != 3 ] || [ $answered -ne 0 ]; then
    not_ok "drain: one job running and three waiting before SIGTERM" "queue depth $depth, $answered answered already"
  else
    ok "drain: one job running and three waiting before SIGTERM"
  fi
  kill -TERM "$SPMVD_PID"
  sleep 0.3
  # A connection made while draining: refused (curl 7) or answered, not reset.
  local late_rc late_code
  late_code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 60 "$SPMVD_URL/v1/health"); late_rc=$?
  case "$late_rc:$late_code" in
    7:*|0:200|0:503) ok "drain: a connection made while draining is refused or answered (curl $late_rc, HTTP $late_code)" ;;
    *) not_ok "drain: a connection made while draining is refused or answered" "curl exit $late_rc, HTTP $late_code" ;;
  esac
  stop_spmvd; local rc=$?
  wait 2>/dev/null
  check "drain: exit status 0 after SIGTERM with jobs running and waiting (got $rc)" [ "$rc" -eq 0 ]
  local codes="" n200=0 n503=0 other=0 c
  for i in 1 2 3 4; do
    c=$(cat "$T/drain-$i.code"); codes="$codes ${c:-none}"
    case $c in 200) n200=$((n200 + 1)) ;; 503) n503=$((n503 + 1)) ;; *) other=$((other + 1)) ;; esac
  done
  check "drain: every client got an answer, 200 or 503 (${codes# })" [ $other -eq 0 ]
  check "drain: the running job finished (one 200: ${codes# })" [ $n200 -eq 1 ]
  check "drain: the waiting jobs were answered 503 (three: ${codes# })" [ $n503 -eq 3 ]
  local b503
  for i in 1 2 3 4; do [ "$(cat "$T/drain-$i.code")" = 503 ] && b503=$T/drain-$i.body; done
  if [ -n "${b503:-}" ] && jget 'd["error"]["code"]' "$b503" >/dev/null 2>&1; then ok "drain: a 503 carries a JSON error body"
  else not_ok "drain: a 503 carries a JSON error body" "$(head -c 300 "${b503:-/dev/null}")"; fi
}

# ------------------------------ 6. under the unit's system call filter
# spmvd as the unit runs it, less systemd: an unprivileged user with no
# capabilities and no_new_privs (setpriv), and the unit's SystemCallFilter
# installed by tests/e2e/sandbox.c before main(). Every route family and a
# SIGHUP must work, and no system call may have been denied on the way.
test_sandbox() {
  local so=$BUILD_DIR/tests/e2e/libspmvd_sandbox.so
  if [ ! -f "$so" ]; then skip "sandbox: $so not built (needs systemd-analyze)"; return; fi
  if [ "$(uname -m)" != x86_64 ]; then skip "sandbox: the filter is x86-64 only"; return; fi
  # ASan wants to be first in the library list, and LeakSanitizer's ptrace
  # is outside the filter: the sanitizer build is not what the unit runs.
  if [ "${SAN:-0}" = 1 ]; then skip "sandbox: not with the sanitizer build"; return; fi
  local wrap=() port state
  port=$(free_port); state=$(mktemp -d "$T/state-sandbox.XXXXXX")
  if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    chown 65534:65534 "$state"
    chmod 0711 "$T"   # nobody must reach its state directory
    wrap=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs)
  fi
  "${wrap[@]}" env LD_PRELOAD="$so" "$SPMVD" --state-dir "$state/st" --listen "127.0.0.1:$port" >"$T/sandbox.log" 2>&1 &
  SPMVD_PID=$!; bg_pid "$SPMVD_PID"; SPMVD_URL=http://127.0.0.1:$port; SPMVD_LOG=$T/sandbox.log
  if ! wait_ready "$SPMVD_URL" 30; then not_ok "sandbox: spmvd comes up under the filter" "$(tail -5 "$SPMVD_LOG")"; return; fi
  check "sandbox: the filter is in place" grep -q 'filter installed' "$SPMVD_LOG"
  ok "sandbox: spmvd comes up under the filter${wrap:+ as nobody, no capabilities, no_new_privs}"
  gen_matrix "$T/sb.mtx" 300 5
  upload_multipart "$T/sb.mtx"
  expect_code "sandbox: upload (state directory written)" 201
  local id=$MATRIX_ID k
  "$PYTHON" -c 'import json; print(json.dumps([1.0] * 300))' >"$T/sb.x"
  for k in cpu.csr.serial cpu.csr.omp cpu.hll.omp; do
    req POST "/v1/matrices/$id/spmv" -H 'Content-Type: application/json' \
      --data "{\"kernel\":\"$k\",\"x\":$(cat "$T/sb.x"),\"runs\":3,\"verify\":true}"
    expect_code "sandbox: $k runs" 200
  done
  req GET /metrics; expect_code "sandbox: /metrics" 200
  req GET "/v1/matrices/$id/spy.png"; expect_code "sandbox: spy.png" 200
  kill -HUP "$SPMVD_PID"; sleep 0.5
  check "sandbox: SIGHUP reload" healthy
  stop_spmvd; local rc=$?
  check "sandbox: exit status 0 after SIGTERM (got $rc)" [ "$rc" -eq 0 ]
  if grep -q 'denied syscall' "$SPMVD_LOG"; then
    not_ok "sandbox: no system call was denied" "$(grep 'denied syscall' "$SPMVD_LOG" | sort | uniq -c | head -5)"
  else
    ok "sandbox: no system call was denied"
  fi
}

# ------------------------------------------ 7. install, verify, uninstall
# run_make ARGS...: make in this build's own configuration (the build folder
# before the Makefile appends -san, SAN, CUDA), so that `make install` finds
# everything built and never recompiles into the folder with other flags.
run_make() {
  local vars=(BUILD="${BUILD%-san}" SAN="${SAN:-0}")
  [ -n "${HAVE_CUDA:-}" ] && vars+=(CUDA="$HAVE_CUDA")
  make --no-print-directory -s "${vars[@]}" "$@"
}

test_install() {
  local d=$T/destdir prefix=/usr/local
  if ! run_make PREFIX=$prefix DESTDIR="$d" install >"$T/install.log" 2>&1; then
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
  # The client side comes from mk/clients.mk's install-clients.
  if [ -f mk/clients.mk ]; then
    missing=""
    for f in bin/spmvctl include/spmvclient.h lib/pkgconfig/spmvclient.pc lib/libspmvclient.so lib/libspmvclient.a; do
      [ -e "$d$prefix/$f" ] || missing="$missing $prefix/$f"
    done
    check "install: spmvctl, libspmvclient, header and .pc in place${missing:+ (missing:$missing)}" [ -z "$missing" ]
  fi
  local modes
  modes=$(stat -c '%a' "$d$prefix/lib/systemd/system/spmvd.service" "$d$prefix/sbin/spmvd" "$d$prefix/share/man/man8/spmvd.8" | tr '\n' ' ')
  check "install: modes 644 unit, 755 daemon, 644 man page (got $modes)" [ "$modes" = "644 755 644 " ]
  if [ -f config/spmvd.json ]; then
    modes=$(stat -c '%a' "$d/etc/spmvd/spmvd.json")
    check "install: the live spmvd.json is 640 (it may name secrets; got $modes)" [ "$modes" = 640 ]
  fi
  check "install: spmvd is executable" [ -x "$d$prefix/sbin/spmvd" ]
  local unit=$d$prefix/lib/systemd/system/spmvd.service
  check "install: ExecStart names $prefix/sbin/spmvd" grep -q "^ExecStart=$prefix/sbin/spmvd " "$unit"
  check "install: no @VARIABLE@ left in the unit" bash -c "! grep -q '@[A-Z]*@' '$unit'"

  test_units "$d" "$prefix"

  # The sysusers.d entry makes the user the unit names, in group video, from
  # where it is installed (no file named: found on systemd's search path).
  if command -v systemd-sysusers >/dev/null; then
    local root=$T/sysroot
    mkdir -p "$root/etc"
    cp -a "$d/usr" "$root/"
    if systemd-sysusers --root="$root" >/dev/null 2>&1 &&
       grep -q '^spmvd:x:[0-9]*:[0-9]*:.*:/var/lib/spmvd:' "$root/etc/passwd" &&
       grep -Eq '^video:x:[0-9]+:(.*,)?spmvd(,|$)' "$root/etc/group" &&
       grep -Eq '^spmvd-shm:x:[0-9]+:(.*,)?spmvd(,|$)' "$root/etc/group"; then
      ok "install: systemd-sysusers makes the system user spmvd, member of video and spmvd-shm"
    else
      not_ok "install: systemd-sysusers makes the system user spmvd, member of video and spmvd-shm" "$(cat "$root/etc/passwd" "$root/etc/group" 2>&1 | head -5)"
    fi
  else
    skip "install: systemd-sysusers not installed"
  fi

  # An administrator's configuration survives a reinstall and an uninstall.
  if [ -f config/spmvd.json ]; then
    echo '{"log_level":"debug"}' >"$d/etc/spmvd/spmvd.json"
    run_make PREFIX=$prefix DESTDIR="$d" install >/dev/null 2>&1
    check "install: a reinstall keeps the administrator's spmvd.json" grep -q debug "$d/etc/spmvd/spmvd.json"
  fi
  if ! run_make PREFIX=$prefix DESTDIR="$d" uninstall >"$T/uninstall.log" 2>&1; then
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
  run_make PREFIX=$prefix DESTDIR="$d" install >/dev/null 2>&1
  run_make PREFIX=$prefix DESTDIR="$d" uninstall >/dev/null 2>&1
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
  check "units: no MemoryDenyWriteExecute= (kept off for drivers not measured)" bash -c "! grep -q '^MemoryDenyWriteExecute=yes' '$u'"
  check "units: no PrivateDevices= (it hides /dev/nvidia*)" bash -c "! grep -q '^PrivateDevices=yes' '$u'"
  check "units: empty capability bounding set" grep -qx 'CapabilityBoundingSet=' "$u"
  # Restart=on-failure must not loop on a configuration error: spmvd exits 2
  # for one, and the unit names that status.
  echo '{"max_runs": "lots"}' >"$T/bad.json"
  "$SPMVD" --config "$T/bad.json" --check-config >/dev/null 2>&1; local brc=$?
  check "units: a bad configuration exits 2 (got $brc) and RestartPreventExitStatus=2 stops the restart loop" \
    test "$brc" -eq 2 -a -n "$(grep -x 'RestartPreventExitStatus=2' "$u")"
  check "units: the socket listens on 127.0.0.1:8080 and the service names it" \
    bash -c "grep -qx 'ListenStream=127.0.0.1:8080' '$chk/spmvd.socket' && grep -qx 'Sockets=spmvd.socket' '$u'"
}

# -------------------------------------------- 8. man pages match --help
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
  if [ ! -x "$BUILD_DIR/spmvctl" ]; then skip "man: spmvctl not built"; return; fi
  # spmvctl: the global usage plus every command's own --help.
  local cmds c missing=""
  "$BUILD_DIR/spmvctl" --help >"$T/spmvctl.help" 2>&1
  cmds=$(awk '/^Commands:/ { on = 1; next } /^$/ { on = 0 } on { print $1 }' "$T/spmvctl.help")
  for c in $cmds; do
    "$BUILD_DIR/spmvctl" "$c" --help >>"$T/spmvctl.help" 2>&1
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
test_install
test_notify
test_notify_abstract
test_sighup
test_socket_activation
test_socket_restart
test_sigterm_drain
test_sandbox
done_testing
