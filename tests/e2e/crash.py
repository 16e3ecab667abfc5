#!/usr/bin/env python3
"""crash.py — kill -9 spmvd at random moments, restart it, check the store.

The driver of tests/e2e/crash.sh (TAP on stdout). One state directory, ITER
rounds (100 by default). Each round starts spmvd on it, waits for
/v1/ready, checks what it reloaded, lets CLIENTS threads upload, delete,
multiply (JSON and binary) and start bench jobs for a random fraction of a
second, and then SIGKILLs the daemon in the middle of all that.

What is checked after every restart:
  - every matrix whose upload was answered 201 and that was not deleted
    with a 204 is listed, with the shape it was uploaded with;
  - no matrix whose DELETE was answered 204 came back;
  - every listed matrix is one a client sent (its name says which), so an
    upload cut short is either whole or absent, never half there;
  - a sample of them (all of them in the last round) multiply correctly:
    y from a binary spmv against a reference computed here;
  - the state directory holds only <uuid>.csr files, .lock and an empty
    damaged/ (no temp file, nothing moved aside as damaged).
An upload or delete whose answer the kill cut off may have happened or
not; either outcome is accepted, anything in between is not.
"""
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

UUID_CSR = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.csr$")

T = {"n": 0, "failed": 0}


def ok(desc):
    T["n"] += 1
    print("ok %d - %s" % (T["n"], desc), flush=True)


def not_ok(desc, *detail):
    T["n"] += 1
    T["failed"] += 1
    print("not ok %d - %s" % (T["n"], desc), flush=True)
    for d in detail:
        print("#   %s" % d, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Mat:
    """A small random matrix, kept as rows for the reference."""

    def __init__(self, rng, name):
        self.name = name
        self.rows, self.cols = rng.randint(1, 60), rng.randint(1, 60)
        n = rng.randint(0, min(self.rows * self.cols, 400))
        cells = sorted({(rng.randrange(self.rows), rng.randrange(self.cols)) for _ in range(n)})
        self.entries = [(i, j, rng.randint(-9, 9) / 4.0) for i, j in cells]
        self.nnz = len(self.entries)

    def text(self):
        out = ["%%MatrixMarket matrix coordinate real general", "%d %d %d" % (self.rows, self.cols, self.nnz)]
        out += ["%d %d %r" % (i + 1, j + 1, v) for i, j, v in self.entries]
        return ("\n".join(out) + "\n").encode()

    def y(self, x):
        y = [0.0] * self.rows
        for i, j, v in self.entries:
            y[i] += v * x[j]
        return y


class Book:
    """What the clients were told, under one lock."""

    def __init__(self):
        self.lock = threading.Lock()
        self.mats = {}          # name -> Mat (every matrix ever sent)
        self.acked = {}         # id -> name: upload answered 201
        self.deleted = set()    # ids whose DELETE answered 204
        self.deleting = set()   # ids with a DELETE in flight (or cut off)
        self.errors = []
        self.counts = {}

    def count(self, k):
        with self.lock:
            self.counts[k] = self.counts.get(k, 0) + 1

    def live(self):
        with self.lock:
            return [i for i in self.acked if i not in self.deleted and i not in self.deleting]


class Client(threading.Thread):
    def __init__(self, port, book, rng, tag, stop):
        super().__init__(daemon=True)
        self.port, self.book, self.rng, self.tag, self.stop = port, book, rng, tag, stop
        self.n = 0

    def http(self, method, path, body=None, headers=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def upload(self):
        self.n += 1
        m = Mat(self.rng, "%s-%d" % (self.tag, self.n))
        with self.book.lock:
            self.book.mats[m.name] = m
        if self.rng.random() < 0.5:
            st, body = self.http("POST", "/v1/matrices?device=cpu&name=" + m.name, m.text(),
                                 {"Content-Type": "application/octet-stream"})
        else:
            b = "crash%08x" % self.rng.getrandbits(32)
            data = ("--%s\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\n%s\r\n--%s\r\n"
                    "Content-Disposition: form-data; name=\"file\"; filename=\"m.mtx\"\r\n\r\n" %
                    (b, m.name, b)).encode() + m.text() + ("\r\n--%s--\r\n" % b).encode()
            st, body = self.http("POST", "/v1/matrices?device=cpu", data,
                                 {"Content-Type": "multipart/form-data; boundary=" + b})
        if st == 201:
            with self.book.lock:
                self.book.acked[json.loads(body)["id"]] = m.name
            self.book.count("upload")
        elif st != 503:
            self.book.errors.append("upload answered %d: %s" % (st, body[:200]))

    def delete(self):
        live = self.book.live()
        if not live:
            return
        mid = self.rng.choice(live)
        with self.book.lock:
            self.book.deleting.add(mid)
        st, body = self.http("DELETE", "/v1/matrices/" + mid)
        if st == 204:
            with self.book.lock:
                self.book.deleted.add(mid)
                self.book.deleting.discard(mid)
            self.book.count("delete")
        elif st != 503 and not (st == 404 and self.racing_delete(mid)):
            self.book.errors.append("delete answered %d: %s" % (st, body[:200]))

    def spmv(self):
        live = self.book.live()
        if not live:
            return
        mid = self.rng.choice(live)
        with self.book.lock:
            m = self.book.mats[self.book.acked[mid]]
        x = [float(self.rng.randint(-3, 3)) for _ in range(m.cols)]
        if self.rng.random() < 0.5:
            st, body = self.http("POST", "/v1/matrices/%s/spmv" % mid, json.dumps({"x": x}).encode(),
                                 {"Content-Type": "application/json"})
            y = json.loads(body)["y"] if st == 200 else None
        else:
            st, body = self.http("POST", "/v1/matrices/%s/spmv?kernel=cpu.csr.serial" % mid,
                                 struct.pack("<%dd" % m.cols, *x), {"Content-Type": "application/octet-stream"})
            y = list(struct.unpack("<%dd" % m.rows, body)) if st == 200 else None
        if st == 200:
            if y != m.y(x):  # quarter-integers times integers: exact in float64
                self.book.errors.append("spmv of %s: wrong y" % mid)
            self.book.count("spmv")
        elif st != 503 and not (st == 404 and self.racing_delete(mid)):
            self.book.errors.append("spmv of %s answered %d: %s" % (mid, st, body[:200]))

    def racing_delete(self, mid):
        """A 404 is right when another client deleted the matrix meanwhile."""
        with self.book.lock:
            return mid in self.book.deleting or mid in self.book.deleted

    def bench(self):
        live = self.book.live()
        if not live:
            return
        mid = self.rng.choice(live)
        st, body = self.http("POST", "/v1/matrices/%s/bench" % mid,
                             b'{"kernels":["cpu.csr.omp"],"runs":1,"warmup":0}', {"Content-Type": "application/json"})
        if st == 202:
            self.book.count("bench")
        elif st != 503 and not (st == 404 and self.racing_delete(mid)):
            self.book.errors.append("bench of %s answered %d: %s" % (mid, st, body[:200]))

    def run(self):
        ops = [self.upload] * 4 + [self.delete] * 2 + [self.spmv] * 3 + [self.bench]
        while not self.stop.is_set():
            try:
                self.rng.choice(ops)()
            except (OSError, http.client.HTTPException, ValueError, struct.error):
                # the daemon was killed under this request: its outcome is unknown
                return


def get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def wait_ready(proc, port, secs=30):
    t0 = time.time()
    while time.time() - t0 < secs:
        if proc.poll() is not None:
            return False
        try:
            if get(port, "/v1/ready")[0] == 200:
                return True
        except OSError:
            pass
        time.sleep(0.02)
    return False


def multiply_ok(port, mid, m, rng):
    x = [float(rng.randint(-3, 3)) for _ in range(m.cols)]
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("POST", "/v1/matrices/%s/spmv?kernel=cpu.csr.serial" % mid, struct.pack("<%dd" % m.cols, *x),
                  {"Content-Type": "application/octet-stream"})
        r = c.getresponse()
        body = r.read()
    finally:
        c.close()
    return r.status == 200 and list(struct.unpack("<%dd" % m.rows, body)) == m.y(x)


def check_state(round_no, port, state, book, rng, sample):
    """Returns a list of problems (empty: all good)."""
    problems = []
    st, body = get(port, "/v1/matrices")
    if st != 200:
        return ["GET /v1/matrices answered %d" % st]
    listed = {d["id"]: d for d in json.loads(body)["matrices"]}
    with book.lock:
        for mid, name in book.acked.items():
            if mid not in book.deleted and mid not in book.deleting and mid not in listed:
                problems.append("matrix %s (%s) was answered 201 and is gone" % (mid, name))
        for mid in book.deleted:
            if mid in listed:
                problems.append("matrix %s was deleted (204) and came back" % mid)
        for mid, d in listed.items():
            m = book.mats.get(d["name"])
            if m is None:
                problems.append("matrix %s has a name no client sent: %r" % (mid, d["name"]))
            elif (d["rows"], d["cols"], d["nnz"]) != (m.rows, m.cols, m.nnz):
                problems.append("matrix %s (%s) is %dx%d nnz %d, was sent %dx%d nnz %d" %
                                (mid, m.name, d["rows"], d["cols"], d["nnz"], m.rows, m.cols, m.nnz))
            # an upload whose answer was lost is now known: it is there
            book.acked.setdefault(mid, d["name"])
            book.deleting.discard(mid)
        # a DELETE whose answer was lost and whose matrix is absent happened
        for mid in list(book.deleting):
            if mid not in listed:
                book.deleting.discard(mid)
                book.deleted.add(mid)
        known = [(mid, book.mats[d["name"]]) for mid, d in listed.items() if d["name"] in book.mats]
    for mid, m in (known if sample is None else rng.sample(known, min(sample, len(known)))):
        if not multiply_ok(port, mid, m, rng):
            problems.append("matrix %s (%s) does not multiply correctly" % (mid, m.name))
    for f in os.listdir(state):
        if f not in (".lock", "damaged") and not UUID_CSR.match(f):
            problems.append("state directory holds %s (a temp file?)" % f)
    damaged = os.listdir(os.path.join(state, "damaged"))
    if damaged:
        problems.append("files were moved aside as damaged: %s" % damaged[:3])
    return problems


def main():
    spmvd = sys.argv[1]
    iters = int(os.environ.get("CRASH_ROUNDS", "100"))
    nclients = int(os.environ.get("CRASH_CLIENTS", "4"))
    seed = int(os.environ.get("SPMV_SEED", "0")) or (int(time.time()) ^ os.getpid())
    print("# crash: seed %d (SPMV_SEED), %d rounds, %d clients" % (seed, iters, nclients), flush=True)
    rng = random.Random(seed)
    tmp = tempfile.mkdtemp(prefix="spmvd-crash.")
    state = os.path.join(tmp, "state")
    book = Book()
    bad_rounds = 0
    proc = None
    t_start = time.time()
    try:
        for rnd in range(iters):
            port = free_port()
            log = open(os.path.join(tmp, "spmvd.log"), "w")
            proc = subprocess.Popen([spmvd, "--listen", "127.0.0.1:%d" % port, "--state-dir", state,
                                     "--threads", "2", "--log-level", "warn", "--queue-depth", "16"],
                                    stdout=log, stderr=log)
            if not wait_ready(proc, port):
                log.close()
                not_ok("round %d: spmvd restarts and gets ready" % rnd,
                       *open(os.path.join(tmp, "spmvd.log")).read().splitlines()[-5:])
                bad_rounds += 1
                break
            last = rnd == iters - 1
            problems = check_state(rnd, port, state, book, rng, None if last or rnd % 10 == 0 else 4)
            if problems:
                bad_rounds += 1
                not_ok("round %d: the store after a kill -9 is what was answered" % rnd, *problems[:10])
            if last:
                break
            stop = threading.Event()
            clients = [Client(port, book, random.Random(rng.getrandbits(64)), "r%dc%d" % (rnd, k), stop)
                       for k in range(nclients)]
            for c in clients:
                c.start()
            time.sleep(rng.uniform(0.05, 0.5))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            log.close()
            stop.set()
            for c in clients:
                c.join(15)
        if bad_rounds == 0:
            ok("%d kill -9 rounds: every matrix answered 201 is there and multiplies correctly, "
               "no deleted one came back, nothing half-written, no temp file" % (iters - 1))
        with book.lock:
            n_live = len([i for i in book.acked if i not in book.deleted])
            print("# operations answered: %s; %d matrices stored at the end; %.1f s" %
                  (book.counts, n_live, time.time() - t_start), flush=True)
        if book.errors:
            not_ok("every answer was a success or a deliberate 503", *book.errors[:10])
        else:
            ok("every answer was a success or a deliberate 503")
        if book.counts.get("upload", 0) < iters or book.counts.get("delete", 0) < 10:
            not_ok("the clients got work done between the kills", "counts: %s" % book.counts)
        else:
            ok("the clients got work done between the kills (%s)" % book.counts)
        if proc and proc.poll() is None:
            proc.terminate()
            code = proc.wait(60)
            if code == 0:
                ok("spmvd stops cleanly on SIGTERM after the last round")
            else:
                not_ok("spmvd stops cleanly on SIGTERM after the last round", "exit %d" % code)
            leftovers = [f for f in os.listdir(state) if f.endswith(".tmp")]
            if leftovers:
                not_ok("no temp file after a clean stop", str(leftovers[:3]))
            else:
                ok("no temp file after a clean stop")
    finally:
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print("1..%d" % T["n"])
    return 1 if T["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
