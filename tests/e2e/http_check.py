#!/usr/bin/env python3
"""http_check.py URL MODE [MATRIX_ID] — the HTTP layer against raw sockets.

Driven by tests/e2e/http.sh. MODE `defaults` runs against a daemon started
with the default limits, MODE `deadlines` against one started with
header_timeout_s 2, body_timeout_s 2 and body_min_rate 1024:

defaults
- keep-alive: two requests on one connection, a GET then a POST with a
  body then a GET, none answered `Connection: close`;
- a pipelined pair (two requests in one write) gets both answers, in order;
- Content-Length together with Transfer-Encoding: chunked is 400 and the
  connection is closed;
- a Content-Type the route does not take is 415 on every route with a body;
- a GET with 4000 query arguments is answered (414), not held;
- 1100 connections from 127.0.0.2 dribbling a header do not starve
  127.0.0.1 (per_ip_connections is on by default): its three /v1/health
  are answered.

deadlines
- a request line and headers dribbled a line every 0.5 s (never idle for
  MHD's time-out) are cut after header_timeout_s;
- a body dribbled a byte every 0.5 s is cut once body_timeout_s has passed
  (it is under body_min_rate);
- an idle kept-alive connection is closed after header_timeout_s;
- a body sent at a fair pace is not cut.
TAP out.
"""
import resource
import socket
import sys
import time
import urllib.parse

import tap
from tap import ok

URL = sys.argv[1]
MODE = sys.argv[2]
MATRIX = sys.argv[3] if len(sys.argv) > 3 else ""
HOST, PORT = urllib.parse.urlsplit(URL).hostname, urllib.parse.urlsplit(URL).port


def conn(src="127.0.0.1"):
    s = socket.socket()
    s.bind((src, 0))
    s.connect((HOST, PORT))
    return s


_pending = {}


def read_answer(s, timeout=10):
    """One answer (status, headers dict, body) read off s, or None; bytes
    past it (a pipelined answer) are kept for the next call."""
    s.settimeout(timeout)
    buf = _pending.pop(s, b"")
    try:
        while b"\r\n\r\n" not in buf:
            b = s.recv(65536)
            if not b:
                return None
            buf += b
        head, rest = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        hdrs = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
        n = int(hdrs.get("content-length", "0"))
        while len(rest) < n:
            b = s.recv(65536)
            if not b:
                return None
            rest += b
        _pending[s] = rest[n:]
        return int(lines[0].split()[1]), hdrs, rest[:n]
    except (OSError, ValueError):
        return None


def closed_within(s, secs):
    """Seconds until the server closed s (EOF or reset), or None."""
    s.settimeout(secs)
    t0 = time.time()
    try:
        while time.time() - t0 < secs:
            if not s.recv(65536):
                return time.time() - t0
    except (ConnectionResetError, BrokenPipeError):
        return time.time() - t0
    except socket.timeout:
        return None
    return None


def request(method, path, body=b"", ctype=None, extra=""):
    h = "%s %s HTTP/1.1\r\nHost: x\r\n" % (method, path)
    if ctype:
        h += "Content-Type: %s\r\n" % ctype
    if body or method in ("POST", "PUT"):
        h += "Content-Length: %d\r\n" % len(body)
    return (h + extra + "\r\n").encode() + body


def keep_alive():
    s = conn()
    a1 = read_answer(s) if not s.sendall(request("GET", "/v1/health")) else None
    x = b'{"x":[' + b",".join([b"1"] * 34) + b"]}"
    s.sendall(request("POST", "/v1/matrices/%s/spmv" % MATRIX, x, "application/json"))
    a2 = read_answer(s)
    s.sendall(request("GET", "/v1/ready"))
    a3 = read_answer(s)
    got = [a and a[0] for a in (a1, a2, a3)]
    ok(got == [200, 200, 200], "keep-alive: GET, POST with a body, GET on one connection all answered", got)
    ok(all(a and a[1].get("connection", "").lower() != "close" for a in (a1, a2, a3)),
       "keep-alive: no answer says Connection: close", [a and a[1].get("connection") for a in (a1, a2, a3)])
    s.close()


def pipelined():
    s = conn()
    s.sendall(request("GET", "/v1/health") + request("GET", "/v1/ready"))
    a1 = read_answer(s)
    a2 = read_answer(s)
    ok(a1 is not None and a1[0] == 200 and b"uptime_s" in a1[2], "pipelined pair: the first answer is /v1/health's")
    ok(a2 is not None and a2[0] == 200 and b"ready" in a2[2],
       "pipelined pair: the second answer (/v1/ready's) follows on the same connection", a2)
    s.close()


def smuggling():
    s = conn()
    s.sendall(b"POST /v1/ops HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
    a = read_answer(s)
    ok(a is not None and a[0] == 400 and b"Transfer-Encoding" in a[2],
       "Content-Length with Transfer-Encoding: chunked is 400", a)
    ok(closed_within(s, 5) is not None, "... and the connection is closed")
    s.close()


def media_types():
    vid = "00000000-0000-4000-8000-000000000000"
    routes = [("POST", "/v1/matrices/%s/spmv" % MATRIX), ("POST", "/v1/matrices/%s/bench" % MATRIX),
              ("POST", "/v1/matrices/%s/spmspm" % MATRIX), ("POST", "/v1/matrices/%s/solve" % MATRIX),
              ("POST", "/v1/vectors"), ("PUT", "/v1/vectors/%s" % vid), ("POST", "/v1/ops"), ("POST", "/v1/shm")]
    for method, path in routes:
        s = conn()
        s.sendall(request(method, path, b"{}", "text/csv", "Connection: close\r\n"))
        a = read_answer(s)
        ok(a is not None and a[0] == 415 and b"unsupported_media_type" in a[2],
           "%s %s with Content-Type text/csv: 415" % (method, path.replace(MATRIX, "{id}")), a and a[:2])
        s.close()
    s = conn()
    s.sendall(request("POST", "/v1/matrices", b"{}", "application/json", "Connection: close\r\n"))
    a = read_answer(s)
    ok(a is not None and a[0] == 415, "an upload sent as application/json: 415", a and a[:2])
    s.close()


def many_args():
    s = conn()
    q = "&".join("a%d=1" % i for i in range(4000))
    t0 = time.time()
    s.sendall(request("GET", "/v1/matrices?" + q))
    a = read_answer(s, timeout=10)
    ok(a is not None and a[0] == 414, "a GET with 4000 query arguments is answered 414 (in %.2f s)" % (time.time() - t0),
       a and a[:2])
    s.close()


def flood():
    want = 1300
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want and hard >= want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    if max(soft, min(hard, want)) < want:
        tap.skip("1100 connections need %d descriptors; this shell allows %d" % (want, hard))
        return
    socks = []
    for _ in range(1100):
        try:
            s = conn("127.0.0.2")
            s.sendall(b"G")
            socks.append(s)
        except OSError:
            pass
    answered = 0
    for _ in range(3):
        try:
            s = conn()
            s.sendall(request("GET", "/v1/health", extra="Connection: close\r\n"))
            a = read_answer(s, timeout=5)
            answered += bool(a and a[0] == 200)
            s.close()
        except OSError:
            pass
        for d in socks[:200]:
            try:
                d.sendall(b"E")
            except OSError:
                pass
    ok(answered == 3, "1100 dribbling connections from 127.0.0.2: 127.0.0.1 gets %d of 3 /v1/health answers" % answered)
    for s in socks:
        s.close()


def dribble(s, parts):
    """Sends parts every 0.5 s; seconds until the server cut s, or None."""
    t0 = time.time()
    for p in parts:
        try:
            s.sendall(p)
        except OSError:
            return time.time() - t0
        if closed_within(s, 0.5) is not None:
            return time.time() - t0
    return None


def dribble_header():
    s = conn()
    cut = dribble(s, [b"GET /v1/health HTTP/1.1\r\n"] + [b"X-Slow-%d: 1\r\n" % i for i in range(40)])
    ok(cut is not None and 1.5 <= cut <= 8, "headers dribbled a line every 0.5 s are cut after header_timeout_s 2 "
       "(at %s s)" % (cut and "%.1f" % cut))
    s.close()


def dribble_body():
    s = conn()
    s.sendall(request("POST", "/v1/ops", b"", "application/json").replace(b"Content-Length: 0", b"Content-Length: 100"))
    cut = dribble(s, [b" "] * 40)
    ok(cut is not None and 1.5 <= cut <= 8, "a body dribbled a byte every 0.5 s is cut once body_timeout_s 2 has passed "
       "(at %s s)" % (cut and "%.1f" % cut))
    s.close()


def idle_keepalive():
    s = conn()
    s.sendall(request("GET", "/v1/health"))
    a = read_answer(s)
    c = closed_within(s, 10)
    ok(a is not None and c is not None and 1.5 <= c <= 8,
       "an idle kept-alive connection is closed after header_timeout_s (at %s s)" % (c and "%.1f" % c))
    s.close()


def fair_body():
    body = b'{"steps": []}' + b" " * 6000
    s = conn()
    s.sendall(request("POST", "/v1/ops", b"", "application/json").replace(b"Content-Length: 0",
                                                                          b"Content-Length: %d" % len(body)))
    for i in range(0, len(body), 2000):  # 2000 bytes a second for 3 s: above body_min_rate, past body_timeout_s
        s.sendall(body[i:i + 2000])
        time.sleep(1)
    a = read_answer(s)
    ok(a is not None and a[0] == 400, "a body sent at 2000 bytes a second over 3 s is read to its end (answered %s)" %
       (a and a[0]))
    s.close()


if MODE == "defaults":
    keep_alive()
    pipelined()
    smuggling()
    media_types()
    many_args()
    flood()
else:
    dribble_header()
    dribble_body()
    idle_keepalive()
    fair_body()
tap.done()
