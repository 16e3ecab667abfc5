#!/usr/bin/env bash
# lib.sh — shared helpers of the end-to-end suites (sourced, not run).
#
# TAP output (ok / not_ok / skip with one counter, `done_testing` prints the
# plan and sets the exit status), a free loopback port, starting and
# stopping a real spmvd on a temporary state directory, waiting for
# /v1/ready, and curl wrappers that leave the status in $CODE, the body in
# $BODY_FILE and the headers in $HDR_FILE. Every daemon a suite starts is
# killed and every temporary file removed when the suite exits, whatever
# happens. JSON is read with python3 (a bootstrap dependency).
set -u

SPMV_ROOT=${SPMV_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
BUILD=${BUILD:-build}
case $BUILD in /*) BUILD_DIR=$BUILD ;; *) BUILD_DIR=$SPMV_ROOT/$BUILD ;; esac
SPMVD=${SPMVD:-$BUILD_DIR/spmvd}
MATRICES=${MATRICES:-$(cd "$SPMV_ROOT/.." && pwd)/shared/matrices}
E2E_TMP=$(mktemp -d "${TMPDIR:-/tmp}/spmvd-e2e.XXXXXX")
BODY_FILE=$E2E_TMP/body
HDR_FILE=$E2E_TMP/headers
# the system interpreter when there is one: a version-manager shim costs
# a few hundred ms per call, and the suites call it often
PYTHON=${PYTHON:-$(command -v /usr/bin/python3 || command -v python3)}
CODE=
T_COUNT=0
T_FAILED=0
SPMVD_PIDS=()
SPMVD_SCHEME=http   # https for a TLS daemon
SPMVD_CURL=()       # extra curl arguments of wait_ready (a token, --cacert)

# ------------------------------------------------------------------ TAP
ok() { T_COUNT=$((T_COUNT + 1)); echo "ok $T_COUNT - $*"; }
# not_ok DESCRIPTION [DETAIL LINES...]
not_ok() {
  T_COUNT=$((T_COUNT + 1)); T_FAILED=$((T_FAILED + 1))
  echo "not ok $T_COUNT - $1"; shift
  local l; for l in "$@"; do printf '#   %s\n' "$l"; done
}
skip() { T_COUNT=$((T_COUNT + 1)); echo "ok $T_COUNT # SKIP $*"; }
# check DESCRIPTION COMMAND...: ok when the command succeeds.
check() { local d=$1; shift; if "$@" >/dev/null 2>&1; then ok "$d"; else not_ok "$d" "failed: $*"; fi; }
# that DESC 'CONDITION': check for a shell condition (&&, ||, pipes), evaluated as written.
that() { local d=$1; shift; if eval "$*" >/dev/null 2>&1; then ok "$d"; else not_ok "$d" "failed: $*"; fi; }
# expect_code DESCRIPTION WANT: compares with $CODE, shows the body if not.
expect_code() {
  if [ "$CODE" = "$2" ]; then ok "$1"
  else not_ok "$1" "expected HTTP $2, got $CODE" "$(head -c 400 "$BODY_FILE" 2>/dev/null)"; fi
}
done_testing() { echo "1..$T_COUNT"; [ "$T_FAILED" -eq 0 ]; }
diag() { printf '# %s\n' "$*"; }

# ------------------------------------------------------------- daemons
free_port() {
  "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

alive() { kill -0 "$1" 2>/dev/null; }

# wait_ready URL [SECONDS]: polls /v1/ready until 200.
wait_ready() {
  local url=$1 secs=${2:-30} i
  for ((i = 0; i < secs * 20; i++)); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 ${SPMVD_CURL[@]+"${SPMVD_CURL[@]}"} "$url/v1/ready")" = 200 ] && return 0
    [ -n "${SPMVD_PID:-}" ] && ! alive "$SPMVD_PID" && return 1
    sleep 0.05
  done
  return 1
}

# start_spmvd [FLAGS...]: a daemon on a free loopback port with its state in
# $SPMVD_STATE (a fresh directory unless set); sets SPMVD_PID, SPMVD_PORT,
# SPMVD_URL, SPMVD_LOG and waits until it is ready (returns 1 if it is not).
start_spmvd() {
  SPMVD_PORT=$(free_port)
  SPMVD_URL=$SPMVD_SCHEME://127.0.0.1:$SPMVD_PORT
  SPMVD_STATE=${SPMVD_STATE:-$(mktemp -d "$E2E_TMP/state.XXXXXX")}
  SPMVD_LOG=$E2E_TMP/spmvd.$SPMVD_PORT.log
  "$SPMVD" --listen "127.0.0.1:$SPMVD_PORT" --state-dir "$SPMVD_STATE" --threads 2 "$@" \
    >"$SPMVD_LOG" 2>&1 &
  SPMVD_PID=$!
  SPMVD_PIDS+=("$SPMVD_PID")
  wait_ready "$SPMVD_URL" 30
}

# python_suite_start [FLAGS...]: what a suite driving a Python check does
# first: ends (skipped) without NumPy/SciPy, draws $SEED (SPMV_SEED repeats a
# run) and prints it, starts spmvd with FLAGS or ends the suite saying why.
python_suite_start() {
  need_scipy
  SEED=${SPMV_SEED:-$RANDOM}
  diag "seed $SEED"
  start_spmvd "$@" || { not_ok "spmvd starts" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
  ok "spmvd starts"
}

# stop_spmvd [PID]: SIGTERM, waits up to 60 s; returns the exit status (124
# if it had to be killed).
stop_spmvd() {
  local pid=${1:-$SPMVD_PID} i
  kill -TERM "$pid" 2>/dev/null
  for ((i = 0; i < 600; i++)); do alive "$pid" || break; sleep 0.1; done
  if alive "$pid"; then kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; return 124; fi
  wait "$pid"
}

cleanup() {
  local p
  for p in "${SPMVD_PIDS[@]}"; do alive "$p" && kill -KILL "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$E2E_TMP"
}
trap cleanup EXIT

# ---------------------------------------------------------------- curl
# req METHOD PATH [CURL ARGS...]: $CODE, body in $BODY_FILE, headers in $HDR_FILE.
req() {
  local m=$1 p=$2; shift 2
  CODE=$(curl -s -X "$m" -o "$BODY_FILE" -D "$HDR_FILE" -w '%{http_code}' --max-time 120 "$@" "$SPMVD_URL$p")
}
# header NAME: a header of the last answer (value only).
header() { tr -d '\r' <"$HDR_FILE" | awk -v n="$1" 'BEGIN{IGNORECASE=1} tolower($1)==tolower(n)":" {sub(/^[^:]*: */,""); print; exit}'; }
# jget EXPR [FILE]: a Python expression over the JSON document `d`.
# relay_tap FILE RC WHAT: re-numbers a child script's TAP lines (FILE) into
# this suite, then checks the child exited 0 (RC), showing its tail if not.
relay_tap() {
  local file=$1 rc=$2 what=$3 line
  while IFS= read -r line; do
    case "$line" in
      "ok "*) ok "${line#ok [0-9]* - }" ;;
      "not ok "*) not_ok "${line#not ok [0-9]* - }" ;;
      "#"*) echo "$line" ;;
    esac
  done <"$file"
  check "$what exited 0 (rc $rc)" [ "$rc" -eq 0 ]
  [ "$rc" -eq 0 ] || tail -5 "$file" | sed 's/^/# /'
}

jget() { "$PYTHON" -c 'import json, sys; d = json.load(open(sys.argv[2])); print(eval(sys.argv[1]))' "$1" "${2:-$BODY_FILE}"; }
healthy() { [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$SPMVD_URL/v1/health")" = 200 ]; }

# upload_multipart FILE [FIELD=VALUE...] / upload_raw FILE [QUERY]: sets $CODE and $MATRIX_ID.
upload_multipart() {
  local f=$1 a=(); shift
  local kv; for kv in "$@"; do a+=(-F "$kv"); done
  req POST /v1/matrices -F "file=@$f" "${a[@]}"
  MATRIX_ID=$(header Location | sed 's|.*/||')
}
upload_raw() {
  req POST "/v1/matrices${2:+?$2}" --data-binary "@$1" -H 'Content-Type: application/octet-stream'
  MATRIX_ID=$(header Location | sed 's|.*/||')
}

# wait_job ID [SECONDS]: polls /v1/jobs/ID until done or failed; body left in $BODY_FILE.
wait_job() {
  local id=$1 secs=${2:-60} i state
  for ((i = 0; i < secs * 10; i++)); do
    req GET "/v1/jobs/$id"
    state=$(jget 'd["state"]' 2>/dev/null)
    case $state in done | failed) return 0 ;; esac
    sleep 0.1
  done
  return 1
}

# need_scipy: the suite is skipped (and ends) where NumPy or SciPy is missing.
need_scipy() {
  "$PYTHON" -c 'import numpy, scipy' 2>/dev/null && return 0
  skip "SciPy is not installed (tools/bootstrap.sh installs python3-scipy)"; done_testing; exit 0
}

# gen_matrix FILE N PER_ROW: a random general matrix (the project's generator).
gen_matrix() {
  "$BUILD_DIR/spmv-gen" --kind uniform --n "$2" --per-row "$3" --seed "${SPMV_SEED:-$RANDOM}" --out "$1" >/dev/null
}

[ -x "$SPMVD" ] || { echo "1..0 # SKIP $SPMVD not built"; exit 0; }
