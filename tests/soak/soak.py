#!/usr/bin/env python3
"""soak.py — the load test of spmvd: many clients, every answer verified.

Starts a real spmvd (or talks to one already running, --url) and runs N
client threads (64 by default) on loopback for a set time. Each client owns
its matrices: it uploads random ones (multipart and raw bodies, float64 and
float32), multiplies them with JSON and binary requests through every CPU
kernel the daemon lists, lists and reads descriptors, and deletes some.
Every answer is checked: y against a reference computed here in Python,
descriptors against what was uploaded, a deleted matrix must be 404. The
only answers allowed besides success are deliberate 503s (queue full);
anything else is an unexpected error and fails the run.

RSS of the daemon is sampled from /proc/PID/status every few seconds and
reported with its start, maximum, end, and the slope of a least-squares
line over the second half of the run (flat: no growth trend); past
--rss-limit-mib the run fails.

Beside the clients run the attacks of issue 33 (--attacks, on unless 0):
- slow clients: from 127.0.0.2, sockets that send a request header a byte
  every second, and from 127.0.0.3 uploads that promise a large body and
  send it a byte a second; each is reopened as soon as the daemon cuts it
  (header_timeout_s, body_min_rate), so they press for the whole run;
- big declarations: from 127.0.0.1, uploads of a few bytes declaring
  matrices past max_rows or max_nnz (422), a matrix of max_rows rows with
  one entry, and gzip files of a million "1 1 1" lines (both 201, then
  deleted);
- a prober asks /v1/health every 100 ms; its p99 must stay under
  --health-p99-ms (50).

Only the standard library: http.client, threads, struct, random.

    python3 tests/soak/soak.py --spmvd build/spmvd --seconds 30 --clients 64
"""
import argparse
import gzip
import http.client
import json
import multiprocessing
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid

# Kernel parameters that change the work but not the answer: drawn at random
# within these ranges when a kernel takes them (the daemon checks the rest).
REL_TOL = {"float64": 1e-9, "float32": 2e-4}


class Unexpected(Exception):
    """An answer the daemon should never give."""


class Matrix:
    """A matrix as uploaded: dense rows of (col, value) for the reference."""

    def __init__(self, rows, cols, entries, dtype):
        self.rows, self.cols, self.dtype = rows, cols, dtype
        self.by_row = [[] for _ in range(rows)]
        for i, j, v in entries:
            self.by_row[i].append((j, v))
        self.nnz = len(entries)
        self.id = None

    def mm_text(self):
        lines = ["%%MatrixMarket matrix coordinate real general",
                 "%% soak %s" % uuid.uuid4(), "%d %d %d" % (self.rows, self.cols, self.nnz)]
        for i, row in enumerate(self.by_row):
            for j, v in row:
                lines.append("%d %d %r" % (i + 1, j + 1, v))
        return ("\n".join(lines) + "\n").encode()

    def stored_value(self, v):
        return struct.unpack("<f", struct.pack("<f", v))[0] if self.dtype == "float32" else v

    def check_y(self, x, y):
        """x as sent (already rounded to the dtype), y as answered."""
        if len(y) != self.rows:
            raise Unexpected("y has %d values, the matrix %d rows" % (len(y), self.rows))
        for i, row in enumerate(self.by_row):
            ref = sum(self.stored_value(v) * x[j] for j, v in row)
            scale = sum(abs(self.stored_value(v) * x[j]) for j, v in row) or 1.0
            if not abs(y[i] - ref) <= REL_TOL[self.dtype] * scale:
                raise Unexpected("y[%d] = %r, reference %r (%s)" % (i, y[i], ref, self.dtype))


def random_matrix(rng):
    rows, cols = rng.randint(1, 300), rng.randint(1, 300)
    nnz = rng.randint(0, min(rows * cols, 3000))
    cells = set()
    while len(cells) < nnz:
        cells.add((rng.randrange(rows), rng.randrange(cols)))
    entries = [(i, j, round(rng.uniform(-4, 4), 6)) for i, j in sorted(cells)]
    return Matrix(rows, cols, entries, rng.choice(["float64", "float64", "float32"]))


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.count = {}
        self.busy = 0       # deliberate 503s
        self.errors = []

    def add(self, kind, n=1):
        with self.lock:
            self.count[kind] = self.count.get(kind, 0) + n

    def error(self, msg):
        with self.lock:
            self.errors.append(msg)


def percentile(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * q))] if v else 0.0


class Slow(threading.Thread):
    """Slow-client attackers from one source address: `count` sockets each
    dribbling `head` then one byte a second, reopened when cut."""

    def __init__(self, args, src, head, count, stop, stats, kind):
        super().__init__(daemon=True)
        self.args, self.src, self.head, self.count, self.stop, self.stats, self.kind = \
            args, src, head, count, stop, stats, kind

    def open(self):
        s = socket.socket()
        s.setblocking(True)
        s.settimeout(2)
        try:
            s.bind((self.src, 0))
            s.connect((self.args.host, self.args.port))
            s.sendall(self.head)
            s.setblocking(False)
            self.stats.add(self.kind + "_opened")
            return s
        except OSError:
            s.close()
            return None

    def run(self):
        socks = []
        while not self.stop.is_set():
            while len(socks) < self.count and not self.stop.is_set():
                s = self.open()
                if not s:
                    break  # refused (per_ip_connections): try again next round
                socks.append(s)
            alive = []
            for s in socks:
                try:
                    if s.recv(4096) == b"":
                        raise ConnectionResetError
                except BlockingIOError:
                    pass
                except OSError:
                    self.stats.add(self.kind + "_cut")
                    s.close()
                    continue
                try:
                    s.send(b"x")
                    alive.append(s)
                except OSError:
                    self.stats.add(self.kind + "_cut")
                    s.close()
            socks = alive
            self.stop.wait(1.0)
        for s in socks:
            s.close()


class BigDeclarations(threading.Thread):
    """Small uploads declaring large matrices, one after another."""

    def __init__(self, args, stats, stop, seed):
        super().__init__(daemon=True)
        self.args, self.stats, self.stop = args, stats, stop
        self.rng = random.Random(seed)
        self.conn = None
        gz = b"%%%%MatrixMarket matrix coordinate real general\n1 1 %d\n" % 1000000 + b"1 1 1\n" * 1000000
        self.cases = [
            ("past_max_rows", b"%%%%MatrixMarket matrix coordinate real general\n2147483647 2147483647 1\n1 1 1\n",
             422),
            ("past_max_nnz", b"%%%%MatrixMarket matrix coordinate real general\n10 10 %d\n1 1 1\n" %
             (args.max_nnz + 1), 422),
            ("max_rows_one_entry", b"%%%%MatrixMarket matrix coordinate real general\n%d %d 1\n1 1 1\n" %
             (args.max_rows, args.max_rows), 201),
            ("gzip_million_lines", gzip.compress(gz, 9), 201),
        ]

    def request(self, method, path, body=None, headers=None):
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.args.host, self.args.port, timeout=300)
        try:
            self.conn.request(method, path, body=body, headers=headers or {})
            resp = self.conn.getresponse()
            data = resp.read()
            if resp.getheader("Connection", "").lower() == "close":
                self.conn.close()
                self.conn = None
            return resp.status, data
        except (OSError, http.client.HTTPException):
            if self.conn:
                self.conn.close()
            self.conn = None
            return None, b""

    def run(self):
        while not self.stop.is_set():
            kind, body, want = self.rng.choice(self.cases)
            st, data = self.request("POST", "/v1/matrices?device=cpu", body,
                                    {"Content-Type": "application/octet-stream"})
            if st is None:
                continue  # an idle keep-alive connection closed under us: not an answer
            if st == 503:
                self.stats.add("503")
            elif st != want:
                self.stats.error("big declaration %s: HTTP %s, expected %d: %s" % (kind, st, want, data[:200]))
            else:
                self.stats.add("big_" + kind)
                if st == 201:
                    self.request("DELETE", "/v1/matrices/" + json.loads(data)["id"])
            self.stop.wait(self.args.big_every)


def probe_loop(host, port, stop, out):
    """/v1/health every 100 ms on a connection of its own, in a process of
    its own (the clients' threads would otherwise hold the GIL while the
    answer waits): the latencies go back through `out` at the end."""
    conn, lat, failed = None, [], 0
    while not stop.is_set():
        t0 = time.time()
        try:
            if conn is None:
                conn = http.client.HTTPConnection(host, port, timeout=30)
            conn.request("GET", "/v1/health")
            conn.getresponse().read()
            lat.append(time.time() - t0)
        except (OSError, http.client.HTTPException):
            failed += 1
            if conn:
                conn.close()
            conn = None
        stop.wait(0.1)
    out.put((lat, failed))


class Prober:
    """The probe process (forked before any client thread starts)."""

    def __init__(self, args):
        self.stop, self.out = multiprocessing.Event(), multiprocessing.Queue()
        self.proc = multiprocessing.Process(target=probe_loop, args=(args.host, args.port, self.stop, self.out))
        self.lat, self.failed = [], 0

    def start(self):
        self.proc.start()

    def finish(self):
        self.stop.set()
        self.lat, self.failed = self.out.get(timeout=120)
        self.proc.join(60)


class Client(threading.Thread):
    def __init__(self, idx, args, kernels, stats, stop, seed):
        super().__init__(daemon=True)
        self.idx, self.args, self.kernels, self.stats, self.stop = idx, args, kernels, stats, stop
        self.rng = random.Random(seed)
        self.conn = None
        self.mine = []
        self.headers = {}
        if args.token:
            self.headers["Authorization"] = "Bearer " + args.token

    # ------------------------------------------------------------- HTTP
    def request(self, method, path, body=None, headers=None):
        h = dict(self.headers)
        h.update(headers or {})
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.args.host, self.args.port, timeout=120)
            try:
                self.conn.request(method, path, body=body, headers=h)
                resp = self.conn.getresponse()
                data = resp.read()
                if resp.getheader("Connection", "").lower() == "close":
                    self.conn.close()
                    self.conn = None
                return resp.status, resp, data
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                # a keep-alive connection the server closed between requests
                # (idle timeout) is retried once on a fresh one
                self.conn.close()
                self.conn = None
                if attempt == 1:
                    raise Unexpected("%s %s: %r" % (method, path, e))
        raise Unexpected("unreachable")

    def expect(self, kind, status, want, data):
        if status == 503:
            self.stats.add("503")
            return False
        if status != want:
            raise Unexpected("%s: HTTP %d, expected %d: %s" % (kind, status, want, data[:300]))
        self.stats.add(kind)
        return True

    # ------------------------------------------------------ operations
    def upload(self):
        m = random_matrix(self.rng)
        text = m.mm_text()
        if self.rng.random() < 0.5:
            b = "soak%016x" % self.rng.getrandbits(64)
            body = (("--%s\r\nContent-Disposition: form-data; name=\"dtype\"\r\n\r\n%s\r\n"
                     "--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"soak.mtx\"\r\n"
                     "Content-Type: application/octet-stream\r\n\r\n") % (b, m.dtype, b)).encode() + text + \
                ("\r\n--%s--\r\n" % b).encode()
            st, resp, data = self.request("POST", "/v1/matrices", body,
                                          {"Content-Type": "multipart/form-data; boundary=" + b})
        else:
            st, resp, data = self.request("POST", "/v1/matrices?device=cpu&dtype=" + m.dtype, text,
                                          {"Content-Type": "application/octet-stream"})
        if not self.expect("upload", st, 201, data):
            return
        d = json.loads(data)
        if (d["rows"], d["cols"], d["nnz"], d["dtype"]) != (m.rows, m.cols, m.nnz, m.dtype):
            raise Unexpected("upload descriptor %r does not match %dx%d nnz %d %s" %
                             ((d["rows"], d["cols"], d["nnz"], d["dtype"]), m.rows, m.cols, m.nnz, m.dtype))
        if resp.getheader("Location") != "/v1/matrices/" + d["id"]:
            raise Unexpected("upload Location %r" % resp.getheader("Location"))
        m.id = d["id"]
        self.mine.append(m)

    def pick(self):
        return self.rng.choice(self.mine) if self.mine else None

    def kernel_query(self):
        k = self.rng.choice(self.kernels)
        return k, {"kernel": k["name"]}

    def x_for(self, m):
        x = [round(self.rng.uniform(-2, 2), 5) for _ in range(m.cols)]
        if m.dtype == "float32":
            x = [struct.unpack("<f", struct.pack("<f", v))[0] for v in x]
        return x

    def spmv_json(self):
        m = self.pick()
        if not m:
            return
        k, opts = self.kernel_query()
        x = self.x_for(m)
        opts.update({"x": x, "runs": self.rng.randint(1, 3)})
        st, _, data = self.request("POST", "/v1/matrices/%s/spmv" % m.id, json.dumps(opts).encode(),
                                   {"Content-Type": "application/json"})
        if self.expect("spmv_json", st, 200, data):
            m.check_y(x, [float(v) for v in json.loads(data)["y"]])

    def spmv_binary(self):
        m = self.pick()
        if not m:
            return
        k, opts = self.kernel_query()
        x = self.x_for(m)
        fmt = "<%d%s" % (m.cols, "f" if m.dtype == "float32" else "d")
        q = "&".join("%s=%s" % kv for kv in opts.items())
        st, resp, data = self.request("POST", "/v1/matrices/%s/spmv?%s" % (m.id, q), struct.pack(fmt, *x),
                                      {"Content-Type": "application/octet-stream"})
        if not self.expect("spmv_binary", st, 200, data):
            return
        yfmt = "<%d%s" % (m.rows, "f" if m.dtype == "float32" else "d")
        if len(data) != struct.calcsize(yfmt):
            raise Unexpected("binary y of %d bytes for %d rows" % (len(data), m.rows))
        json.loads(resp.getheader("X-SpMV-Stats"))
        m.check_y(x, list(struct.unpack(yfmt, data)))

    def list_matrices(self):
        st, _, data = self.request("GET", "/v1/matrices")
        if not self.expect("list", st, 200, data):
            return
        ids = {d["id"] for d in json.loads(data)["matrices"]}
        missing = [m.id for m in self.mine if m.id not in ids]
        if missing:
            raise Unexpected("list lacks matrices this client stored: %s" % missing[:3])

    def get_matrix(self):
        m = self.pick()
        if not m:
            return
        st, _, data = self.request("GET", "/v1/matrices/" + m.id)
        if self.expect("get", st, 200, data) and json.loads(data)["nnz"] != m.nnz:
            raise Unexpected("descriptor of %s has the wrong nnz" % m.id)

    def delete(self):
        m = self.pick()
        if not m:
            return
        st, _, data = self.request("DELETE", "/v1/matrices/" + m.id)
        if not self.expect("delete", st, 204, data):
            return
        self.mine.remove(m)
        st, _, data = self.request("GET", "/v1/matrices/" + m.id)
        if st != 404:
            raise Unexpected("deleted matrix %s answered %d" % (m.id, st))

    def run(self):
        ops = [(self.upload, 2), (self.spmv_json, 5), (self.spmv_binary, 5), (self.list_matrices, 1),
               (self.get_matrix, 2), (self.delete, 1)]
        choices = [f for f, w in ops for _ in range(w)]
        while not self.stop.is_set():
            op = self.upload if len(self.mine) < 2 else self.delete if len(self.mine) > 8 else self.rng.choice(choices)
            try:
                op()
            except Unexpected as e:
                self.stats.error("client %d: %s" % (self.idx, e))
            except Exception as e:  # a protocol failure is unexpected too
                self.stats.error("client %d: %s: %r" % (self.idx, op.__name__, e))
                if self.conn:
                    self.conn.close()
                self.conn = None
        # leave nothing behind
        for m in list(self.mine):
            try:
                self.request("DELETE", "/v1/matrices/" + m.id)
            except Exception:
                pass


def attack_threads(args, stats, stop, seed):
    """The attacks of issue 33 beside the load (none with --attacks 0)."""
    if not args.attacks:
        return []
    out = [BigDeclarations(args, stats, stop, seed + 7)]
    try:
        for a in ("127.0.0.2", "127.0.0.3"):
            socket.socket().bind((a, 0))
    except OSError:
        print("# cannot use 127.0.0.2/3 as client addresses: no slow-client attack", flush=True)
        return out
    out.append(Slow(args, "127.0.0.2", b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: ", args.attack_conns, stop,
                    stats, "slow_header"))
    out.append(Slow(args, "127.0.0.3", b"POST /v1/matrices HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
                    b"Content-Length: 1000000\r\n\r\n%", args.attack_conns, stop, stats, "slow_body"))
    return out


# ---------------------------------------------------------------- daemon

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def wait_ready(host, port, secs=30):
    t0 = time.time()
    while time.time() - t0 < secs:
        try:
            c = http.client.HTTPConnection(host, port, timeout=2)
            c.request("GET", "/v1/health")
            if c.getresponse().status == 200:
                return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def slope_kib_per_min(samples):
    """Least-squares slope of RSS over time, second half of the run."""
    half = samples[len(samples) // 2:]
    if len(half) < 3:
        return 0.0
    n = len(half)
    mt = sum(t for t, _ in half) / n
    mr = sum(r for _, r in half) / n
    var = sum((t - mt) ** 2 for t, _ in half)
    return 60.0 * sum((t - mt) * (r - mr) for t, r in half) / var if var else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spmvd", help="start this spmvd binary (else --url)")
    ap.add_argument("--url", help="an already running daemon, http://host:port")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--threads", type=int, default=4, help="spmvd --threads")
    ap.add_argument("--token", help="bearer token")
    ap.add_argument("--sample", type=float, default=5, help="RSS sample period (s)")
    ap.add_argument("--json", help="write the summary here as JSON")
    ap.add_argument("--attacks", type=int, default=1, help="run the slow-client and big-declaration attacks (0: off)")
    ap.add_argument("--attack-conns", type=int, default=100, help="slow sockets per attacking address")
    ap.add_argument("--big-every", type=float, default=0.5, help="seconds between two big declarations")
    ap.add_argument("--max-rows", type=int, default=1 << 22, help="spmvd --max-rows (the big declarations use it)")
    ap.add_argument("--max-nnz", type=int, default=1 << 24, help="spmvd --max-nnz")
    ap.add_argument("--rss-limit-mib", type=float, default=1024, help="fail when spmvd's RSS goes past it")
    ap.add_argument("--health-p99-ms", type=float, default=50, help="fail when /v1/health's p99 goes past it")
    args = ap.parse_args()
    seed = int(os.environ.get("SPMV_SEED", "0")) or (int(time.time()) ^ os.getpid())
    print("# soak: seed %d (SPMV_SEED), %d clients, %.0f s" % (seed, args.clients, args.seconds), flush=True)

    proc = None
    state = None
    if args.spmvd:
        args.host, args.port = "127.0.0.1", free_port()
        state = tempfile.mkdtemp(prefix="spmvd-soak.")
        log = open(os.path.join(state, "spmvd.log"), "w")
        # queue_depth stays at its default so the 503 path is exercised too
        # per_ip_connections 128: the clients, the prober and the big
        # declarations share 127.0.0.1 and keep their connections open
        proc = subprocess.Popen([args.spmvd, "--listen", "127.0.0.1:%d" % args.port, "--state-dir",
                                 os.path.join(state, "state"), "--threads", str(args.threads),
                                 "--log-level", os.environ.get("SOAK_LOG_LEVEL", "warn"), "--connection-timeout", "30",
                                 "--per-ip-connections", "128", "--max-rows", str(args.max_rows),
                                 "--max-nnz", str(args.max_nnz)], stdout=log, stderr=log)
        pid = proc.pid
    else:
        u = args.url.split("//")[-1]
        args.host, args.port = u.rsplit(":", 1)[0], int(u.rsplit(":", 1)[1])
        pid = None
    rc = 1
    try:
        if not wait_ready(args.host, args.port):
            print("not ok - spmvd did not come up")
            return 1
        c = http.client.HTTPConnection(args.host, args.port, timeout=10)
        c.request("GET", "/v1/kernels", headers={"Authorization": "Bearer " + args.token} if args.token else {})
        kernels = [k for k in json.loads(c.getresponse().read())["kernels"]
                   if k.get("device") == "cpu" and k.get("op", "spmv") == "spmv" and k.get("available", True)]
        if not kernels:
            print("not ok - no CPU kernels listed")
            return 1
        stats, stop = Stats(), threading.Event()
        clients = [Client(i, args, kernels, stats, stop, seed * 1000003 + i) for i in range(args.clients)]
        prober = Prober(args)
        prober.start()
        attackers = attack_threads(args, stats, stop, seed)
        samples = []
        t0 = time.time()
        for cl in clients + attackers:
            cl.start()
        last_print = t0
        while time.time() - t0 < args.seconds:
            if pid:
                r = rss_kib(pid)
                if r is None:
                    stats.error("spmvd died")
                    break
                samples.append((time.time() - t0, r))
            time.sleep(min(args.sample, max(0.0, args.seconds - (time.time() - t0))))
            if time.time() - last_print >= 60:
                last_print = time.time()
                print("# %4.0f s: %s, %d errors, RSS %s KiB" % (time.time() - t0, stats.count, len(stats.errors),
                                                               samples[-1][1] if samples else "?"), flush=True)
        elapsed = time.time() - t0
        stop.set()
        prober.finish()
        for cl in clients + attackers:
            cl.join(180)
        if pid and rss_kib(pid):
            samples.append((time.time() - t0, rss_kib(pid)))
        summary = {
            "seed": seed, "clients": args.clients, "seconds": round(elapsed, 1),
            "requests": stats.count,
            "per_second": {k: round(v / elapsed, 1) for k, v in stats.count.items()},
            "total_per_second": round(sum(stats.count.values()) / elapsed, 1),
            "unexpected_errors": len(stats.errors),
            "health_ms": {"probes": len(prober.lat), "failed": prober.failed,
                          "p50": round(percentile(prober.lat, 0.5) * 1e3, 2),
                          "p99": round(percentile(prober.lat, 0.99) * 1e3, 2),
                          "max": round(max(prober.lat or [0]) * 1e3, 2)},
            "rss_kib": {"start": samples[0][1], "max": max(r for _, r in samples), "end": samples[-1][1],
                        "slope_second_half_kib_per_min": round(slope_kib_per_min(samples), 1),
                        "samples": [[round(t, 1), r] for t, r in samples]} if samples else None,
        }
        for e in stats.errors[:20]:
            print("#   " + e)
        print(json.dumps({k: v for k, v in summary.items() if k != "rss_kib"}))
        if summary["rss_kib"]:
            s = summary["rss_kib"]
            print("# RSS KiB: start %d, max %d, end %d, slope over the second half %.1f KiB/min" %
                  (s["start"], s["max"], s["end"], s["slope_second_half_kib_per_min"]))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(summary, f, indent=1)
        alive = proc is None or proc.poll() is None
        good = not stats.errors and alive and sum(stats.count.values()) > 0
        h = summary["health_ms"]
        health_ok = h["probes"] > 0 and h["failed"] == 0 and h["p99"] < args.health_p99_ms
        print(("ok" if health_ok else "not ok") + " - /v1/health: %d probes, %d failed, p50 %.1f ms, p99 %.1f ms, "
              "max %.1f ms (p99 bound %.0f ms)" % (h["probes"], h["failed"], h["p50"], h["p99"], h["max"],
                                                   args.health_p99_ms))
        rss_ok = not summary["rss_kib"] or summary["rss_kib"]["max"] < args.rss_limit_mib * 1024
        if summary["rss_kib"]:
            print(("ok" if rss_ok else "not ok") + " - RSS: max %.0f MiB, limit %.0f MiB" %
                  (summary["rss_kib"]["max"] / 1024, args.rss_limit_mib))
        good = good and health_ok and rss_ok
        print(("ok" if good else "not ok") + " - soak: %d requests, %d deliberate 503s, %d unexpected errors%s" %
              (sum(stats.count.values()), stats.count.get("503", 0), len(stats.errors),
               "" if alive else ", spmvd died"))
        rc = 0 if good else 1
    finally:
        if proc:
            proc.terminate()
            try:
                code = proc.wait(60)
                if code != 0 and rc == 0:
                    print("not ok - spmvd exited %d after SIGTERM" % code)
                    rc = 1
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = 1
            left = [f for f in os.listdir(os.path.join(state, "state")) if f.endswith(".csr")] \
                if os.path.isdir(os.path.join(state, "state")) else []
            print("# %d matrices left in the state directory after the clients deleted theirs" % len(left))
            if rc != 0:
                print("# daemon log tail:")
                with open(os.path.join(state, "spmvd.log")) as f:
                    for line in f.readlines()[-15:]:
                        print("#   " + line.rstrip())
            shutil.rmtree(state, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
