#!/usr/bin/env python3
"""bench_roundtrip.py URL — large spmv round trips: loopback TCP, binary HTTP, the Python client, shared memory.

Part of `make bench-api` (tools/bench-api.sh) and of the GPU bundle
(bundle/bench-roundtrip.sh). Reports, never asserts (beyond y being right).

For each size (--rows, default 1, 9 and 16 M) a tridiagonal matrix
(scipy.sparse.diags, float64, 3 non-zeros a row) is uploaded as an
uncompressed .npz on --device, and one product of --kernel (runs 1,
warmup 0) is timed --reps times each way, on one kept-alive connection:

- binary: x as the body (http.client sends it from the NumPy buffer), y read
  into a preallocated buffer (readinto); and the same with http.client's
  own read() (a fresh buffer each time, as the issue's "raw http.client"
  figure was taken and as Client.spmv without out= must do);
- client: the same product through the Python client (spmvd.Client.spmv on
  its own keep-alive connection: y into a new array each time, and with
  out= into one preallocated array), against the raw binary time and
  against read();
- shm: x and y in one registered POSIX shared-memory region, the request a
  small JSON body naming them (the client writes x into the region before
  the clock starts, as a solver whose x lives there would).

Beside them: the kernel's own time (the daemon's stats.median_ms of each
request) and the floor "kernel + H2D + D2H" with the copies at the pinned
copy rate measured in the same run by --copyrate PROGRAM (spmv-copyrate,
on a GPU host) or, on a host without a GPU, two host memory copies
(NumPy copyto) of the vector. Medians over the reps. Payload GB/s counts
x + y bytes over the round trip. And the ceiling of the transport,
measured in the same run: the same bytes moved each way between two
processes over a plain loopback TCP socket (an echo: sendall / recv_into
in 64 KiB pieces, no HTTP, no daemon), so the binary path's rate reads as
a fraction of what the host's loopback gives (issue 28's goal: 80 %).
--baseline URL runs the binary products against a second daemon too (an
older build) in the same run. Markdown to stdout; --json FILE for the
numbers.
"""
import argparse
import http.client
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import urllib.parse
from multiprocessing import shared_memory

import numpy as np
import scipy.sparse as sp

# --client-path DIR: time another copy of the Python client (an older one, for a before/after)
_cp = sys.argv[sys.argv.index("--client-path") + 1] if "--client-path" in sys.argv else \
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python")
sys.path.insert(0, _cp)
import spmvd  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("url")
ap.add_argument("--rows", default="1000000,16000000")
ap.add_argument("--kernel", default="cpu.csr.omp")
ap.add_argument("--device", default="cpu")
ap.add_argument("--reps", type=int, default=10)
ap.add_argument("--copyrate", default="", help="program printing pinned H2D and D2H GB/s for N bytes")
ap.add_argument("--json", default="")
ap.add_argument("--baseline", default="", help="a second daemon (an older build) for the binary path")
ap.add_argument("--client-path", default="", help="the directory of the spmvd package to time (default this tree's)")
ap.add_argument("--seed", type=int, default=int.from_bytes(os.urandom(4), "little"))
a = ap.parse_args()
print("# seed %d" % a.seed, file=sys.stderr)
rng = np.random.default_rng(a.seed)
def connect(url):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    c.connect()
    return c


conn = connect(a.url)


def loopback_ms(nbytes, reps=5):
    """Median ms to move nbytes one way and back over a loopback TCP socket pair."""
    import socket
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    pid = os.fork()
    if pid == 0:
        c = socket.create_connection(srv.getsockname())
        b = bytearray(nbytes)
        mv = memoryview(b)
        for _ in range(reps):
            got = 0
            while got < nbytes:
                got += c.recv_into(mv[got:got + 65536])
            c.sendall(mv)
        os._exit(0)
    s, _ = srv.accept()
    b = bytearray(nbytes)
    mv = memoryview(b)
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        s.sendall(mv)
        got = 0
        while got < nbytes:
            got += s.recv_into(mv[got:got + 65536])
        ts.append((time.perf_counter() - t0) * 1e3)
    os.waitpid(pid, 0)
    s.close()
    srv.close()
    return median(ts)


def call(method, path, body=None, headers=None, into=None):
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    if into is not None and r.status == 200:
        n = r.readinto(into)
        rest = r.read()
        return r, n + len(rest)
    return r, r.read()


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else 0.5 * (v[len(v) // 2 - 1] + v[len(v) // 2])


def copy_floor(nbytes):
    """(h2d ms, d2h ms, how) for nbytes each way."""
    if a.copyrate:
        out = subprocess.run([a.copyrate, str(nbytes)], capture_output=True, text=True, check=True).stdout
        d = json.loads(out)
        return d["h2d_ms"], d["d2h_ms"], "pinned cudaMemcpy (%s)" % os.path.basename(a.copyrate)
    src, dst = np.ones(nbytes // 8), np.empty(nbytes // 8)
    ts = []
    for _ in range(5):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        ts.append((time.perf_counter() - t0) * 1e3)
    m = median(ts)
    return m, m, "host memory copy (no GPU)"


results = []
for n in [int(v) for v in a.rows.split(",")]:
    A = sp.diags([rng.uniform(-1, 1, n - 1), rng.uniform(1, 2, n), rng.uniform(-1, 1, n - 1)], [-1, 0, 1],
                 format="csr", dtype=np.float64)
    with tempfile.NamedTemporaryFile(suffix=".npz") as f:
        sp.save_npz(f, A, compressed=False)
        f.flush()
        with open(f.name, "rb") as g:
            r, body = call("POST", "/v1/matrices?device=%s&name=tridiag-%d" % (a.device, n), body=g,
                           headers={"Content-Type": "application/octet-stream",
                                    "Content-Length": str(os.path.getsize(f.name))})
    if r.status != 201:
        sys.exit("upload of %d rows: %d %s" % (n, r.status, body[:300]))
    mid = json.loads(body)["id"]
    x = rng.uniform(-1, 1, n)
    ref = A @ x
    nbytes = 8 * n
    # binary
    y = np.empty(n)
    yb = memoryview(y).cast("B")
    bin_ms, bin_kernel = [], []
    for i in range(a.reps + 1):
        y[:] = np.nan
        t0 = time.perf_counter()
        r, got = call("POST", "/v1/matrices/%s/spmv?kernel=%s&runs=1&warmup=0" % (mid, a.kernel),
                      body=memoryview(x).cast("B"), headers={"Content-Type": "application/octet-stream"}, into=yb)
        dt = (time.perf_counter() - t0) * 1e3
        if r.status != 200 or got != nbytes:
            sys.exit("binary spmv: %d %s" % (r.status, got))
        if i:  # the first one warms the connection and the daemon's buffers
            bin_ms.append(dt)
            bin_kernel.append(json.loads(r.getheader("X-SpMV-Stats"))["stats"]["median_ms"])
    bin_ok = bool(np.allclose(y, ref, rtol=1e-12, atol=1e-12))
    # the same with http.client's own read(): a fresh bytes object each time, as a new y must be
    fresh_ms = []
    for i in range(a.reps + 1):
        t0 = time.perf_counter()
        r, body = call("POST", "/v1/matrices/%s/spmv?kernel=%s&runs=1&warmup=0" % (mid, a.kernel),
                       body=memoryview(x).cast("B"), headers={"Content-Type": "application/octet-stream"})
        dt = (time.perf_counter() - t0) * 1e3
        if r.status != 200 or len(body) != nbytes:
            sys.exit("binary spmv (read()): %d %d" % (r.status, len(body)))
        if i:
            fresh_ms.append(dt)
    bin_ok = bin_ok and np.frombuffer(body, np.float64).tobytes() == y.tobytes()
    del body
    # the Python client, on its own keep-alive connection: a new y each time, then into one array
    client = spmvd.Client(a.url, timeout=600)
    rm = client.get(mid)
    cl_ms, cl_out_ms = [], []
    yo = np.empty(n)
    for i in range(a.reps + 1):
        t0 = time.perf_counter()
        yc = client.spmv(rm, x, kernel=a.kernel, runs=1, warmup=0).y
        dt = (time.perf_counter() - t0) * 1e3
        t0 = time.perf_counter()
        try:
            client.spmv(rm, x, kernel=a.kernel, runs=1, warmup=0, out=yo)
        except TypeError:  # a client without out= (--client-path to an older one)
            yo[:] = yc
            t0 = math.nan
        dt_out = (time.perf_counter() - t0) * 1e3
        if i:
            cl_ms.append(dt)
            cl_out_ms.append(dt_out)
    bin_ok = bin_ok and np.array_equal(yc, y) and np.array_equal(yo, y)
    del yc
    if hasattr(client, "close"):
        client.close()
    base_ms = None
    if a.baseline:  # the same binary products through another daemon (an older build)
        saved = conn
        conn = connect(a.baseline)
        with tempfile.NamedTemporaryFile(suffix=".npz") as g:
            sp.save_npz(g, A, compressed=False)
            g.flush()
            with open(g.name, "rb") as h:
                r, body = call("POST", "/v1/matrices?device=%s" % a.device, body=h,
                               headers={"Content-Type": "application/octet-stream",
                                        "Content-Length": str(os.path.getsize(g.name))})
        bid = json.loads(body)["id"]
        ts = []
        for i in range(a.reps + 1):
            t0 = time.perf_counter()
            r, got = call("POST", "/v1/matrices/%s/spmv?kernel=%s&runs=1&warmup=0" % (bid, a.kernel),
                          body=memoryview(x).cast("B"), headers={"Content-Type": "application/octet-stream"}, into=yb)
            if r.status != 200:
                sys.exit("baseline binary spmv: %d" % r.status)
            if i:
                ts.append((time.perf_counter() - t0) * 1e3)
        base_ms = median(ts)
        call("DELETE", "/v1/matrices/" + bid)
        conn.close()
        conn = saved
    # shm
    reg = shared_memory.SharedMemory(create=True, size=2 * nbytes)
    try:
        xs = np.ndarray((n,), np.float64, reg.buf, 0)
        ys = np.ndarray((n,), np.float64, reg.buf, nbytes)
        xs[:] = x
        r, body = call("POST", "/v1/shm", body=json.dumps({"name": reg.name, "size": 2 * nbytes}),
                       headers={"Content-Type": "application/json"})
        if r.status != 201:
            sys.exit("register: %d %s" % (r.status, body[:300]))
        pinned = json.loads(body)["pinned"]
        req = json.dumps({"kernel": a.kernel, "runs": 1, "warmup": 0, "x": {"shm": reg.name, "offset": 0},
                          "y": {"shm": reg.name, "offset": nbytes}})
        shm_ms, shm_kernel = [], []
        for i in range(a.reps + 1):
            ys[:] = np.nan
            t0 = time.perf_counter()
            r, body = call("POST", "/v1/matrices/%s/spmv" % mid, body=req, headers={"Content-Type": "application/json"})
            dt = (time.perf_counter() - t0) * 1e3
            if r.status != 200:
                sys.exit("shm spmv: %d %s" % (r.status, body[:300]))
            if i:
                shm_ms.append(dt)
                shm_kernel.append(json.loads(body)["stats"]["median_ms"])
        shm_ok = bool(np.allclose(ys, ref, rtol=1e-12, atol=1e-12))
        del xs, ys
        call("DELETE", "/v1/shm/" + reg.name)
    finally:
        reg.close()
        reg.unlink()
    call("DELETE", "/v1/matrices/" + mid)
    h2d, d2h, how = copy_floor(nbytes)
    k = median(bin_kernel + shm_kernel)
    res = {"rows": n, "bytes_each_way": nbytes, "loopback_ms": loopback_ms(nbytes), "baseline_binary_ms": base_ms,
           "kernel_ms": k, "binary_ms": median(bin_ms), "read_ms": median(fresh_ms), "client_ms": median(cl_ms), "client_out_ms": median(cl_out_ms),
           "shm_ms": median(shm_ms),
           "h2d_ms": h2d, "d2h_ms": d2h, "copies": how, "floor_ms": k + h2d + d2h, "pinned": pinned,
           "binary_y_ok": bin_ok, "shm_y_ok": shm_ok, "reps": a.reps, "kernel": a.kernel, "device": a.device}
    res["binary_gbs"] = 2 * nbytes / res["binary_ms"] / 1e6
    res["loopback_gbs"] = 2 * nbytes / res["loopback_ms"] / 1e6
    res["shm_gbs"] = 2 * nbytes / res["shm_ms"] / 1e6
    res["client_gbs"] = 2 * nbytes / res["client_ms"] / 1e6
    res["binary_of_loopback"] = res["loopback_ms"] / res["binary_ms"]
    res["client_over_binary"] = res["client_ms"] / res["binary_ms"]
    res["client_out_over_binary"] = res["client_out_ms"] / res["binary_ms"]
    res["client_over_read"] = res["client_ms"] / res["read_ms"]
    results.append(res)
    print("# %d rows: binary %.2f ms, shm %.2f ms, kernel %.3f ms, floor %.2f ms" %
          (n, res["binary_ms"], res["shm_ms"], k, res["floor_ms"]), file=sys.stderr, flush=True)

print("| rows | MB each way | loopback TCP echo ms (GB/s) | binary HTTP ms (GB/s) | binary / loopback rate "
      "| read() ms | Client.spmv ms (GB/s) | Client / binary | Client / read() | Client out= ms (/ binary) | kernel ms | H2D + D2H ms | floor ms "
      "| baseline binary ms | shm ms | shm / floor | region pinned | y right |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
      "| --- | --- |")
for r in results:
    print("| %g M | %.0f | %.2f (%.2f) | %.2f (%.2f) | %.0f %% | %.2f | %.2f (%.2f) | %.2f | %.2f | %.2f (%.2f) | %.3f | %.2f + %.2f "
          "| %.2f | %s | %.2f | %.2f | %s | %s |" % (
              r["rows"] / 1e6, r["bytes_each_way"] / 1e6, r["loopback_ms"], r["loopback_gbs"], r["binary_ms"],
              r["binary_gbs"], 100 * r["binary_of_loopback"], r["read_ms"], r["client_ms"], r["client_gbs"],
              r["client_over_binary"], r["client_over_read"],
              r["client_out_ms"], r["client_out_over_binary"], r["kernel_ms"], r["h2d_ms"], r["d2h_ms"], r["floor_ms"],
              "%.2f" % r["baseline_binary_ms"] if r["baseline_binary_ms"] else "-", r["shm_ms"],
              r["shm_ms"] / r["floor_ms"], "yes" if r["pinned"] else "no",
              "yes" if r["binary_y_ok"] and r["shm_y_ok"] else "NO"))
print()
print("Kernel %s on %s, %d reps each (medians; the first request of each kind not counted); copies: %s. GB/s "
      "counts x + y; \"binary / loopback rate\" is the loopback echo's time over the binary round trip's; \"binary HTTP\" "
      "reads y into one array kept across requests, \"read()\" is http.client's own read() (a fresh buffer each time, "
      "as Client.spmv makes a fresh y)." % (
          a.kernel, a.device, a.reps, results[0]["copies"] if results else "-"))
if a.json:
    json.dump(results, open(a.json, "w"), indent=1)
