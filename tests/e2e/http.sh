#!/usr/bin/env bash
# http.sh — the HTTP layer's framing and deadlines (issue 33): keep-alive
# and pipelining, Content-Length with chunked refused, 415 on every route
# with a body, a GET with thousands of query arguments answered, the
# default connection limits keeping a flood from one address off the
# others, and the deadlines libmicrohttpd's idle time-out does not give:
# the whole header (header_timeout_s) and a body's pace (body_timeout_s,
# body_min_rate). The checks are in tests/e2e/http_check.py (raw sockets).
. "$(dirname "$0")/lib.sh"

if ! "$PYTHON" -c 'import socket; socket.socket().bind(("127.0.0.2", 0))' 2>/dev/null; then
  echo "1..0 # SKIP cannot use 127.0.0.2 as a client address here"; exit 0
fi

start_spmvd --log-level info || { not_ok "spmvd starts" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
ok "spmvd starts with the default limits"
req GET /v1/info
check "the default per_ip_connections is not 0 ($(jget 'd["limits"]["per_ip_connections"]'))" \
  [ "$(jget 'd["limits"]["per_ip_connections"]')" -gt 0 ]
check "the default max_connections is not 0" [ "$(jget 'd["limits"]["max_connections"]')" -gt 0 ]
check "/v1/info shows header_timeout_s" [ "$(jget 'd["limits"]["header_timeout_s"]')" -gt 0 ]
upload_raw "$MATRICES/real/karate.mtx" "device=cpu"
expect_code "karate uploads" 201
"$PYTHON" "$(dirname "$0")/http_check.py" "$SPMVD_URL" defaults "$MATRIX_ID" >"$E2E_TMP/defaults.tap" 2>&1
relay_tap "$E2E_TMP/defaults.tap" $? "http_check.py defaults"
check "the daemon is healthy after the flood" healthy
stop_spmvd
check "spmvd stops cleanly" [ $? -eq 0 ]

SPMVD_STATE=
start_spmvd --header-timeout-s 2 --body-timeout-s 2 --body-min-rate 1024 --connection-timeout 30 --log-level info ||
  { not_ok "spmvd starts with short deadlines" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
ok "spmvd starts with header_timeout_s 2, body_timeout_s 2, body_min_rate 1024"
"$PYTHON" "$(dirname "$0")/http_check.py" "$SPMVD_URL" deadlines >"$E2E_TMP/deadlines.tap" 2>&1
relay_tap "$E2E_TMP/deadlines.tap" $? "http_check.py deadlines"
check "the log says why a header was cut" grep -q 'headers took over 2 s (header_timeout_s)' "$SPMVD_LOG"
check "the log says why a body was cut" grep -q 'under body_min_rate 1024 bytes a second' "$SPMVD_LOG"
stop_spmvd
check "spmvd stops cleanly" [ $? -eq 0 ]
done_testing
