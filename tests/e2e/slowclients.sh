#!/usr/bin/env bash
# slowclients.sh — slow and stuck clients cannot hold a worker or use up
# the connections.
#
# A daemon with short limits (connection_timeout 2 s, per_ip_connections 6,
# 2 HTTP threads) gets, all at once: six clients from 127.0.0.1 dribbling
# an upload body a byte a second, a seventh from the same address (over
# the per-IP limit: refused), and from 127.0.0.3 a client that asks for a
# large JSON y and never reads it, and one that sends headers promising a
# body and then nothing. While they hang, a normal client (127.0.0.2, so
# the per-IP limit of the others does not apply to it) must be served:
# health, an upload and a multiply, each within a generous curl time-out.
# Then: the stuck reader and the silent sender are cut off by the
# connection time-out, the dribblers once they stop sending, and
# 127.0.0.1 is served again. All of 127/8 is loopback on Linux; where a
# second loopback address cannot be used the test says so and skips.
. "$(dirname "$0")/lib.sh"

if ! "$PYTHON" -c 'import socket; [socket.socket().bind((a, 0)) for a in ("127.0.0.2", "127.0.0.3")]' 2>/dev/null; then
  echo "1..0 # SKIP cannot use 127.0.0.2 and 127.0.0.3 as client addresses here"; exit 0
fi

start_spmvd --connection-timeout 2 --per-ip-connections 6 --threads 2 --log-level info ||
  { not_ok "spmvd starts" "$(tail -3 "$SPMVD_LOG")"; done_testing; exit; }
ok "spmvd starts with connection_timeout 2 s and per_ip_connections 6"

# a matrix whose JSON y is tens of megabytes: one entry a row, random values
N=1000000
"$PYTHON" - "$N" "$E2E_TMP/big.mtx" <<'EOF'
import random, sys
n = int(sys.argv[1])
with open(sys.argv[2], "w") as f:
    f.write("%%%%MatrixMarket matrix coordinate real general\n%d 1 %d\n" % (n, n))
    f.writelines("%d 1 %.17g\n" % (i + 1, random.random()) for i in range(n))
EOF
upload_raw "$E2E_TMP/big.mtx" "device=cpu"
expect_code "a 1,000,000-row matrix uploads" 201
BIG=$MATRIX_ID
upload_raw "$MATRICES/real/karate.mtx" "device=cpu"
K=$MATRIX_ID

cat >"$E2E_TMP/slow.py" <<'EOF'
"""The slow clients; prints one line per finding, then waits for the cue to stop."""
import socket, sys, threading, time
port, big, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
HOST = "127.0.0.1"

def conn(src, rcvbuf=None):
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.bind((src, 0))
    s.connect((HOST, port))
    return s

def closed_by_server(s, within):
    """True when the server closes s (EOF or reset) within `within` seconds."""
    s.settimeout(within)
    t0 = time.time()
    try:
        while time.time() - t0 < within:
            if not s.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False
    return False

if mode == "dribble":
    # six dribblers, then a seventh over the per-IP limit
    socks = []
    for i in range(6):
        s = conn("127.0.0.1")
        s.sendall(b"POST /v1/matrices?device=cpu HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n%")
        socks.append(s)
    time.sleep(0.3)
    extra = conn("127.0.0.1")
    try:
        extra.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        extra.settimeout(5)
        got = extra.recv(100)
    except OSError:
        got = b""
    print("seventh:%s" % ("refused" if not got.startswith(b"HTTP/1.1 200") else "served"), flush=True)
    # dribble a byte a second for 6 s (past the 2 s time-out: progress keeps them open)
    for _ in range(6):
        for s in socks:
            try:
                s.sendall(b"%")
            except OSError:
                pass
        time.sleep(1)
    alive = sum(1 for s in socks if not closed_by_server(s, 0.01))
    print("dribbling-alive:%d" % alive, flush=True)
    # now silent: the time-out must cut them off
    t0 = time.time()
    cut = sum(1 for s in socks if closed_by_server(s, max(0.1, 10 - (time.time() - t0))))
    print("dribblers-cut:%d" % cut, flush=True)
elif mode == "stuck":
    # asks for a large JSON y with a tiny receive window and never reads it
    r = conn("127.0.0.3", rcvbuf=4096)
    body = b'{"x":[1.5]}'
    r.sendall(b"POST /v1/matrices/%s/spmv HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n%s" % (big.encode(), len(body), body))
    # sends headers promising a body, then nothing
    q = conn("127.0.0.3")
    q.sendall(b"POST /v1/matrices HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n")
    print("stuck:started", flush=True)
    time.sleep(1)
    print("silent-cut:%s" % closed_by_server(q, 15), flush=True)
    # the reader: the server gives up on the write; the window then drains what was sent
    time.sleep(8)
    r.settimeout(10)
    total = 0
    try:
        while True:
            b = r.recv(1 << 20)
            if not b:
                break
            total += len(b)
    except OSError:
        pass
    print("stuck-reader-got:%d" % total, flush=True)
EOF

"$PYTHON" "$E2E_TMP/slow.py" "$SPMVD_PORT" "$BIG" dribble >"$E2E_TMP/dribble.out" 2>&1 &
DRIBBLE=$!
"$PYTHON" "$E2E_TMP/slow.py" "$SPMVD_PORT" "$BIG" stuck >"$E2E_TMP/stuck.out" 2>&1 &
STUCK=$!
for i in $(seq 100); do grep -q seventh "$E2E_TMP/dribble.out" && grep -q stuck:started "$E2E_TMP/stuck.out" && break; sleep 0.1; done
check "a seventh connection from the same address is refused (per_ip_connections 6)" grep -q seventh:refused "$E2E_TMP/dribble.out"

# the normal client, while all of them hang
normal() { curl -s -o "$BODY_FILE" -w '%{http_code}' --max-time 5 --interface 127.0.0.2 "$@"; }
check "while they hang: /v1/health from another client is served" bash -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --interface 127.0.0.2 '$SPMVD_URL/v1/health')\" = 200 ]"
code=$(normal -X POST --data-binary "@$MATRICES/real/karate.mtx" "$SPMVD_URL/v1/matrices?device=cpu")
check "while they hang: an upload is served (HTTP $code)" [ "$code" = 201 ]
X=$("$PYTHON" -c 'print("[" + ",".join(["1"] * 34) + "]")')
code=$(normal -H 'Content-Type: application/json' -d "{\"x\":$X}" "$SPMVD_URL/v1/matrices/$K/spmv")
check "while they hang: a multiply is served (HTTP $code)" [ "$code" = 200 ]
code=$(normal "$SPMVD_URL/v1/matrices")
check "while they hang: a list is served (HTTP $code)" [ "$code" = 200 ]

wait "$DRIBBLE" "$STUCK"
diag "dribblers: $(tr '\n' ' ' <"$E2E_TMP/dribble.out")"
diag "stuck: $(tr '\n' ' ' <"$E2E_TMP/stuck.out")"
check "dribbling a byte a second keeps making progress (not cut while it sends)" grep -q 'dribbling-alive:6' "$E2E_TMP/dribble.out"
check "dribblers gone silent are cut off by the connection time-out" grep -q 'dribblers-cut:6' "$E2E_TMP/dribble.out"
check "a client that promises a body and sends nothing is cut off" grep -q 'silent-cut:True' "$E2E_TMP/stuck.out"
got=$(sed -n 's/^stuck-reader-got://p' "$E2E_TMP/stuck.out")
check "a client that never reads its 1,000,000-value y is cut off (it got ${got:-?} bytes before the close)" \
  bash -c "[ -n '$got' ] && [ '$got' -lt 17000000 ]"
check "the log says why: a time-out" grep -q 'aborted (timeout)' "$SPMVD_LOG"
check "127.0.0.1 is served again once its slow connections are gone" healthy
stop_spmvd
check "spmvd stops cleanly (exit $?) with no connection left hanging" [ $? -eq 0 ]
done_testing
