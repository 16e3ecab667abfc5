#!/usr/bin/env bash
# security.sh — the access basics: bearer token, loopback-only without
# one, TLS, and flags checked at start.
#
# With auth_token_file set every route but /v1/health needs
# "Authorization: Bearer <token>" (401 otherwise, wrong token included);
# a non-loopback listen address without a token refuses to start with a
# message saying why; with tls_cert/tls_key the daemon speaks HTTPS that
# curl verifies against the self-signed certificate.
. "$(dirname "$0")/lib.sh"

TOKEN=e2e-token-$RANDOM$RANDOM-0123456789abcdef
printf '%s\n' "$TOKEN" >"$E2E_TMP/token"
SPMVD_CURL=(-H "Authorization: Bearer $TOKEN")
start_spmvd --auth-token-file "$E2E_TMP/token"
check "spmvd starts with a token" healthy
SPMVD_CURL=()
req GET /v1/health
expect_code "/v1/health needs no token" 200
for p in /v1/ready /v1/info /v1/kernels /v1/matrices /metrics; do
  req GET "$p"
  expect_code "GET $p without a token: 401" 401
done
check "401 carries WWW-Authenticate: Bearer" bash -c "grep -qi '^WWW-Authenticate: Bearer' '$HDR_FILE'"
req GET /v1/info -H "Authorization: Bearer wrong-$TOKEN"
expect_code "a wrong token: 401" 401
req GET /v1/info -H "Authorization: Bearer ${TOKEN%?}"
expect_code "the token less its last character: 401" 401
req GET /v1/info -H "Authorization: Bearer $TOKEN"
expect_code "the right token: 200" 200
req POST /v1/matrices -H "Authorization: Bearer $TOKEN" -F "file=@$MATRICES/real/karate.mtx"
expect_code "an upload with the token: 201" 201
req POST /v1/matrices -F "file=@$MATRICES/real/karate.mtx"
expect_code "an upload without the token: 401" 401
stop_spmvd

# ---------------------------------------------------- non-loopback refused
port=$(free_port)
"$SPMVD" --listen "0.0.0.0:$port" --state-dir "$E2E_TMP/open" >"$E2E_TMP/open.log" 2>&1 &
pid=$!; SPMVD_PIDS+=("$pid")
for i in $(seq 100); do alive "$pid" || break; sleep 0.05; done
if alive "$pid"; then not_ok "listening on 0.0.0.0 without a token refuses to start"; kill -KILL "$pid"
else
  wait "$pid"; rc=$?
  check "listening on 0.0.0.0 without a token refuses to start (exit $rc)" [ "$rc" -ne 0 ]
  check "and says why (auth_token_file)" grep -q auth_token_file "$E2E_TMP/open.log"
fi
"$SPMVD" --threads 0 --check-config >/dev/null 2>"$E2E_TMP/bad.log"; rc=$?
check "--threads 0 is refused with exit 2 naming the key (exit $rc)" bash -c "[ $rc -eq 2 ] && grep -q 'threads' '$E2E_TMP/bad.log'"
"$SPMVD" --check-config --queue-depth 3 >"$E2E_TMP/check.json" 2>/dev/null; rc=$?
check "--check-config prints the effective configuration and exits 0" \
  bash -c "[ $rc -eq 0 ] && \"$PYTHON\" -c 'import json,sys; assert json.load(open(sys.argv[1]))[\"queue_depth\"] == 3' '$E2E_TMP/check.json'"
check "--version" bash -c "'$SPMVD' --version | grep -q '^spmvd '"
check "--help lists every flag" bash -c "'$SPMVD' --help | grep -q -- '--per-ip-connections'"

# ------------------------------------------------------------------ SIGHUP
echo '{"max_upload_bytes": 100000, "log_level": "info"}' >"$E2E_TMP/hup.json"
SPMVD_STATE=$E2E_TMP/hup-state
if start_spmvd --config "$E2E_TMP/hup.json"; then
  req GET /v1/info
  check "the file's max_upload_bytes is in force" jget '(d["limits"]["max_upload_bytes"] == 100000) or 1/0'
  echo '{"max_upload_bytes": 200000, "log_level": "warn", "queue_depth": 5}' >"$E2E_TMP/hup.json"
  kill -HUP "$SPMVD_PID"
  for i in $(seq 100); do grep -q 'SIGHUP: configuration reloaded' "$SPMVD_LOG" && break; sleep 0.05; done
  check "SIGHUP: the reload is logged" grep -q 'SIGHUP: configuration reloaded.*max_upload_bytes=200000' "$SPMVD_LOG"
  req GET /v1/info
  check "SIGHUP: new limits apply without a restart" \
    jget '(d["limits"]["max_upload_bytes"] == 200000 and d["limits"]["queue_depth"] == 5) or 1/0'
  check "SIGHUP: log_level warn drops the request lines" bash -c "! grep -q 'GET /v1/info 200' <(sed -n '/SIGHUP: configuration reloaded/,\$p' '$SPMVD_LOG' | tail -n +2)"
  echo '{"max_upload_bytes": "lots"}' >"$E2E_TMP/hup.json"
  kill -HUP "$SPMVD_PID"
  for i in $(seq 100); do grep -q 'configuration not reloaded' "$SPMVD_LOG" && break; sleep 0.05; done
  check "SIGHUP with a bad file: refused with the key named, old values kept" \
    bash -c "grep -q 'not reloaded.*max_upload_bytes' '$SPMVD_LOG' && [ \"\$(curl -s '$SPMVD_URL/v1/info' | '$PYTHON' -c 'import json,sys; print(json.load(sys.stdin)[\"limits\"][\"max_upload_bytes\"])')\" = 200000 ]"
  stop_spmvd
else
  not_ok "spmvd starts with --config" "$(tail -3 "$SPMVD_LOG")"
fi

# -------------------------------------------------------------------- TLS
if command -v openssl >/dev/null && openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
     -addext subjectAltName=IP:127.0.0.1 -keyout "$E2E_TMP/key.pem" -out "$E2E_TMP/cert.pem" >/dev/null 2>&1; then
  SPMVD_STATE=$E2E_TMP/tls-state
  SPMVD_SCHEME=https SPMVD_CURL=(--cacert "$E2E_TMP/cert.pem")
  start_spmvd --tls-cert "$E2E_TMP/cert.pem" --tls-key "$E2E_TMP/key.pem"
  url=$SPMVD_URL
  check "TLS: /v1/health over HTTPS verified with the certificate" \
    bash -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' --cacert '$E2E_TMP/cert.pem' '$url/v1/health')\" = 200 ]"
  check "TLS: an upload over HTTPS" \
    bash -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' --cacert '$E2E_TMP/cert.pem' -F 'file=@$MATRICES/real/karate.mtx' '$url/v1/matrices')\" = 201 ]"
  check "TLS: plain HTTP gets no answer" bash -c "! curl -s --max-time 3 'http://127.0.0.1:$SPMVD_PORT/v1/health' | grep -q ok"
  stop_spmvd
else
  skip "TLS: openssl cannot make a test certificate"
fi
done_testing
