#!/usr/bin/env python3
"""shm_check.py URL OFF_URL SMALL_URL — shared-memory regions against SciPy.

Driven by tests/e2e/shm.sh with three daemons: URL has allow_shm on, OFF_URL
has it off, SMALL_URL has allow_shm on, max_shm_regions 2 and max_body_bytes 8192. The regions are
POSIX objects made here with multiprocessing.shared_memory (mode 0600, this
user); every x is drawn from the printed seed, every y in a region is
poisoned (NaN) before the product and compared afterwards with SciPy's
A @ x of the same matrix read from its file:

- register, list, show, unregister; every refusal (bad names, a missing
  object, a window past the object, unknown fields, duplicates, the region
  limit, shm off) with its status and code, and no region left behind;
- spmv with x and/or y in regions, JSON and binary forms, float64 and
  float32 matrices, op t, k = 3 columns, offsets inside a shared object,
  x in a region with y in a resident vector; on several shared real
  matrices with a CPU kernel and the reference kernel;
- vectors made from a region, overwritten from one, read into one;
- solves with b read from a region and x written into one (JSON and
  binary, k columns, offsets, x0 in the body, async), each x checked by
  its true residual and the bytes past it watched; their refusals, b over
  max_body_bytes (413), shm off, a shrunk region;
- a region shrunk, unlinked, or unregistered between uses: 410 / 404, the
  region's bytes untouched; an unregister while an async product runs:
  the product finishes right;
- as root: an object owned by another user with mode 0600 is refused (403
  shm_forbidden) though root could open it; with 0666 it is taken; a
  symbolic link in /dev/shm is refused.

With SHM_GPU=1 (the GPU bundle, bundle/shm-gpu.sh) the matrices go to the
GPU and GPU kernels take the CPU kernels' places; every region must be
pinned; and with CuPy, CUDA regions: device x and y allocated here, their
cudaIpcMemHandle registered, the product checked, and their refusals (a
matrix on another device, a handle the driver refuses, a window past the
allocation). On a CPU daemon a CUDA region is refused with 409.

Tolerance: the daemon's sums run in another order than SciPy's, so y is
compared to 1e-12 (float64) / 1e-5 (float32) of sum |a_ij x_j| per row.
TAP out.
"""
import io
import json
import os
import random
import sys
import time
import urllib.error
import urllib.request
from multiprocessing import shared_memory

import numpy as np
import scipy.io
import scipy.sparse as sp

import tap
from tap import ok

URL, OFF_URL, SMALL_URL, MATRICES = sys.argv[1:5]
GPU = os.environ.get("SHM_GPU") == "1"
KERNEL = {"cpu.csr.omp": "gpu.csr.vector", "cpu.csr.serial": "cusparse.csr", "cpu.ell.omp": "gpu.ell"} if GPU else {}
DEVICE = "gpu" if GPU else "cpu"
SEED = int(os.environ.get("SPMV_SEED", random.randrange(1 << 30)))
print("# seed %d" % SEED, flush=True)
rng = np.random.default_rng(SEED)
OWNED = []


def no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate keys in an answer: %s" % keys)
    return dict(pairs)


def call(method, path, body=None, base=URL, binary=None, headers=None):
    """(status, parsed JSON or bytes, headers)."""
    data, hdrs = None, dict(headers or {})
    if binary is not None:
        data, hdrs["Content-Type"] = binary, "application/octet-stream"
    elif body is not None:
        data, hdrs["Content-Type"] = json.dumps(body).encode(), "application/json"
    req = urllib.request.Request(base + path, data=data, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            raw, status, h = r.read(), r.status, r.headers
    except urllib.error.HTTPError as e:
        raw, status, h = e.read(), e.code, e.headers
    if h.get("Content-Type", "").startswith("application/json") and raw:
        return status, json.loads(raw, object_pairs_hook=no_duplicates), h
    return status, raw, h


def expect(res, status, code, what):
    st, body, _ = res
    got = body.get("error", {}).get("code") if isinstance(body, dict) else None
    return ok(st == status and (code is None or got == code), "%s: %d %s" % (what, status, code or ""),
              "got %s %s" % (st, body if isinstance(body, dict) else body[:200]))


def new_shm(size):
    m = shared_memory.SharedMemory(create=True, size=size)
    OWNED.append(m)
    return m


def close(m):
    try:
        m.close()
        m.unlink()
    except FileNotFoundError:
        pass


def upload(path, dtype="float64", device=None):
    with open(path, "rb") as f:
        st, body, _ = call("POST", "/v1/matrices?dtype=%s&device=%s" % (dtype, device or DEVICE), binary=f.read())
    assert st == 201, body
    return body["id"]


def close_enough(y, ref, A, x, dtype, what):
    absA = abs(A).astype(np.float64)
    scale = absA @ np.abs(x.astype(np.float64)) if x.ndim == 1 else absA @ np.abs(x.astype(np.float64))
    tol = 1e-12 if dtype == "float64" else 1e-5
    err = np.abs(y.astype(np.float64) - ref) - tol * (scale + 1e-300)
    bad = np.argwhere(~(err <= 0))
    return ok(bad.size == 0, what, "first bad: %s y %s ref %s" % (
        bad[0].tolist() if bad.size else None, y[tuple(bad[0])] if bad.size else None,
        ref[tuple(bad[0])] if bad.size else None))


# ------------------------------------------------------------ off
expect(call("GET", "/v1/shm", base=OFF_URL), 403, "shm_disabled", "allow_shm off: GET /v1/shm")
expect(call("POST", "/v1/shm", {"name": "psm_x", "size": 8}, base=OFF_URL), 403, "shm_disabled",
       "allow_shm off: POST /v1/shm")
with open(os.path.join(MATRICES, "real", "karate.mtx"), "rb") as f:
    st, b, _ = call("POST", "/v1/matrices", binary=f.read(), base=OFF_URL)
expect(call("POST", "/v1/matrices/%s/spmv" % b["id"], {"x": {"shm": "psm_x"}}, base=OFF_URL), 403,
       "shm_disabled", "allow_shm off: spmv with x in a region")
expect(call("POST", "/v1/matrices/%s/spmv?x_shm=psm_x" % b["id"], binary=b"", base=OFF_URL), 403,
       "shm_disabled", "allow_shm off: binary spmv with ?x_shm")

# ------------------------------------------------------- /v1/info
st, info, _ = call("GET", "/v1/info")
ok(info.get("shm", {}).get("enabled") is True and info["shm"].get("max_regions") == 64
   and info.get("io_buffers", {}).get("pinned") is GPU and info["io_buffers"].get("max_idle_bytes") == 1 << 30,
   "/v1/info: shm enabled, 64 regions at most; io_buffers page-locked exactly on a GPU host", info.get("shm"))
st, info, _ = call("GET", "/v1/info", base=OFF_URL)
ok(info.get("shm", {}).get("enabled") is False, "/v1/info of the daemon without allow_shm: shm disabled")

# --------------------------------------------------- registration
m = new_shm(4096)
st, d, h = call("POST", "/v1/shm", {"name": m.name, "offset": 1024, "size": 2048})
ok(st == 201 and d["name"] == m.name and d["offset"] == 1024 and d["size"] == 2048 and d["state"] == "ok"
   and d["object_bytes"] == 4096 and h.get("Location") == "/v1/shm/" + m.name, "register: 201 with the descriptor",
   d)
expect(call("POST", "/v1/shm", {"name": m.name, "size": 16}), 409, "shm_exists", "register the same name again")
st, d, _ = call("GET", "/v1/shm")
ok(st == 200 and [r["name"] for r in d["regions"]] == [m.name], "list holds the region", d)
st, d, _ = call("GET", "/v1/shm/" + m.name)
ok(st == 200 and d["name"] == m.name, "show the region", d)
for name, what in [("a/b", "a '/'"), ("..", "'..'"), ("x..y", "'..' inside"), (".hidden", "a leading dot"),
                   ("", "nothing"), ("sp ace", "a space"), ("x" * 201, "201 characters")]:
    expect(call("POST", "/v1/shm", {"name": name, "size": 8}), 400, "invalid_request", "name with %s" % what)
expect(call("GET", "/v1/shm/a..b"), 400, "invalid_request", "GET /v1/shm/a..b")
expect(call("GET", "/v1/shm/a%2Fb"), 400, "invalid_request", "GET /v1/shm/a%2Fb")
expect(call("POST", "/v1/shm", {"name": "spmvd-test-no-such-object-%d" % SEED, "size": 8}), 404, "shm_not_found",
       "an object that does not exist")
expect(call("POST", "/v1/shm", {"name": m.name + "x", "size": 8}), 404, "shm_not_found", "a name one off")
m2 = new_shm(4096)
expect(call("POST", "/v1/shm", {"name": m2.name, "offset": 4000, "size": 200}), 400, "out_of_range",
       "offset + size past the object")
expect(call("POST", "/v1/shm", {"name": m2.name, "size": 0}), 400, "invalid_request", "size 0")
expect(call("POST", "/v1/shm", {"name": m2.name, "offset": -8, "size": 8}), 400, "invalid_request", "offset < 0")
expect(call("POST", "/v1/shm", {"name": m2.name}), 400, "invalid_request", "no size")
expect(call("POST", "/v1/shm", {"name": m2.name, "size": 8, "mode": 1}), 400, "invalid_request", "an unknown field")
expect(call("POST", "/v1/shm", {"name": m2.name, "size": "8"}), 400, "invalid_request", "size as a string")
st, d, _ = call("GET", "/v1/shm")
ok([r["name"] for r in d["regions"]] == [m.name], "refused registrations left nothing listed", d)
st, _, _ = call("DELETE", "/v1/shm/" + m.name)
ok(st == 204, "unregister: 204")
expect(call("DELETE", "/v1/shm/" + m.name), 404, "shm_not_found", "unregister twice")
expect(call("GET", "/v1/shm/" + m.name), 404, "shm_not_found", "show after unregister")
ok(bytes(m.buf[:16]) == bytes(16) and os.path.exists("/dev/shm/" + m.name),
   "the daemon never unlinks nor writes the client's object")

# the region limit
names = [new_shm(64) for _ in range(3)]
for i, r in enumerate(names[:2]):
    st, _, _ = call("POST", "/v1/shm", {"name": r.name, "size": 64}, base=SMALL_URL)
    ok(st == 201, "max_shm_regions 2: region %d taken" % (i + 1))
expect(call("POST", "/v1/shm", {"name": names[2].name, "size": 64}, base=SMALL_URL), 507, "shm_limit",
       "max_shm_regions 2: the third is 507")
call("DELETE", "/v1/shm/" + names[0].name, base=SMALL_URL)
st, _, _ = call("POST", "/v1/shm", {"name": names[2].name, "size": 64}, base=SMALL_URL)
ok(st == 201, "after one unregister the third is taken")


# ---------------------------------------------------------- spmv
def spmv_case(fname, dtype, kernel, k, trans, binary):
    kernel = "gpu.csr.spmm" if GPU and k > 1 else KERNEL.get(kernel, kernel)
    path = os.path.join(MATRICES, "real", fname)
    A = scipy.io.mmread(path).tocsr()
    mid = upload(path, dtype)
    npdt = np.float64 if dtype == "float64" else np.float32
    vs = np.dtype(npdt).itemsize
    rows, cols = A.shape
    xlen, ylen = (rows, cols) if trans else (cols, rows)
    pad = vs * int(rng.integers(0, 5))  # x and y at offsets inside one object
    size = pad + vs * k * (xlen + ylen) + 64
    reg = new_shm(size)
    x = np.ndarray((k, xlen), npdt, reg.buf, pad)
    y = np.ndarray((k, ylen), npdt, reg.buf, pad + vs * k * xlen)
    x[:] = rng.uniform(-1, 1, (k, xlen)).astype(npdt)
    y[:] = np.nan
    st, d, _ = call("POST", "/v1/shm", {"name": reg.name, "size": size})
    if not ok(st == 201 and d["pinned"] == GPU, "%s %s: register %d bytes (pinned: %s)" % (fname, dtype, size, GPU), d):
        return
    xoff, yoff = pad, pad + vs * k * xlen
    op = "t" if trans else "n"
    if binary:
        q = "?kernel=%s&k=%d&op=%s&x_shm=%s&x_offset=%d&y_shm=%s&y_offset=%d" % (kernel, k, op, reg.name, xoff,
                                                                                reg.name, yoff)
        st, d, _ = call("POST", "/v1/matrices/%s/spmv%s" % (mid, q), binary=b"")
    else:
        body = {"kernel": kernel, "op": op, "x": {"shm": reg.name, "offset": xoff},
                "y": {"shm": reg.name, "offset": yoff}}
        if k > 1:
            body["k"] = k
        st, d, _ = call("POST", "/v1/matrices/%s/spmv" % mid, body)
    what = "%s %s %s k=%d op %s %s" % (fname, dtype, kernel, k, op, "binary" if binary else "JSON")
    ok(st == 200 and d.get("y") == {"shm": reg.name, "offset": yoff}, what + ": 200, y named in the answer",
       d if isinstance(d, dict) else d[:200])
    Aop = (A.T if trans else A).astype(npdt).tocsr()
    ref = np.stack([Aop.astype(np.float64) @ x[j].astype(np.float64) for j in range(k)])
    close_enough(y.copy(), ref, Aop, x[0], dtype, what + ": y in the region equals SciPy's")
    call("DELETE", "/v1/shm/" + reg.name)
    call("DELETE", "/v1/matrices/" + mid)
    del x, y
    close(reg)


cases = [("bcsstk13.mtx", "float64", "cpu.csr.omp", 1, False, False),
         ("bcsstk13.mtx", "float64", "cpu.csr.serial", 1, False, True),
         ("rajat01.mtx", "float32", "cpu.csr.omp", 1, False, False),
         ("lp_afiro.mtx", "float64", "cpu.csr.omp", 1, True, True),
         ("cage5.mtx", "float64", "cpu.csr.omp", 3, False, True),
         ("LFAT5.mtx", "float32", "cpu.csr.omp", 3, False, False),
         ("dwt_992.mtx", "float64", "cpu.ell.omp", 1, False, False)]
for c in cases:
    spmv_case(*c)

# x in a region, y inline (binary); x inline, y in a region (JSON); y into a vector
path = os.path.join(MATRICES, "real", "bcsstk13.mtx")
A = scipy.io.mmread(path).tocsr()
mid = upload(path)
n = A.shape[0]
reg = new_shm(16 * n)
call("POST", "/v1/shm", {"name": reg.name, "size": 16 * n})
x = np.ndarray((n,), np.float64, reg.buf, 0)
y = np.ndarray((n,), np.float64, reg.buf, 8 * n)
x[:] = rng.uniform(-1, 1, n)
y[:] = np.nan
ref = A @ x
KO = KERNEL.get("cpu.csr.omp", "cpu.csr.omp")
KS = KERNEL.get("cpu.csr.serial", "cpu.csr.serial")
st, raw, h = call("POST", "/v1/matrices/%s/spmv?kernel=%s&x_shm=%s" % (mid, KO, reg.name), binary=b"")
ok(st == 200 and len(raw) == 8 * n and "X-SpMV-Stats" in h, "x in a region, y in the binary answer")
if st == 200:
    close_enough(np.frombuffer(raw, np.float64), ref, A, x, "float64", "... y equals SciPy's")
xs = x.tolist()
st, d, _ = call("POST", "/v1/matrices/%s/spmv" % mid, {"kernel": KS, "x": xs,
                                                      "y": {"shm": reg.name, "offset": 8 * n}})
ok(st == 200, "x inline, y in a region", d)
close_enough(y.copy(), ref, A, x, "float64", "... y in the region equals SciPy's")
st, v, _ = call("POST", "/v1/vectors", {"like": mid, "side": "rows", "fill": 0})
st, d, _ = call("POST", "/v1/matrices/%s/spmv" % mid, {"kernel": KO, "x": {"shm": reg.name},
                                                      "y": {"vector": v["id"]}})
ok(st == 200, "x in a region, y a resident vector", d)
st, d, _ = call("GET", "/v1/vectors/" + v["id"])
close_enough(np.array(d["values"]), ref, A, x, "float64", "... the vector equals SciPy's")

# vectors from and into regions
y[:] = np.nan
st, d, _ = call("POST", "/v1/vectors", {"values": {"shm": reg.name, "offset": 0}, "n": n, "device": DEVICE})
ok(st == 201 and d["n"] == n, "a vector made from a region", d)
vid = d.get("id")
st, d, _ = call("GET", "/v1/vectors/%s?shm=%s&offset=%d" % (vid, reg.name, 8 * n))
ok(st == 200 and d.get("values") == {"shm": reg.name, "offset": 8 * n}, "a vector read into a region", d)
ok(np.array_equal(y, x), "... the region holds its values bit for bit")
x2 = rng.uniform(-1, 1, n)
y[:] = x2
st, d, _ = call("PUT", "/v1/vectors/" + vid, {"values": {"shm": reg.name, "offset": 8 * n}})
ok(st == 200, "a vector overwritten from a region", d)
st, d, _ = call("GET", "/v1/vectors/" + vid)
ok(st == 200 and np.array_equal(np.array(d["values"]), x2), "... it holds the region's values bit for bit")
expect(call("POST", "/v1/vectors", {"values": {"shm": reg.name}}), 400, "invalid_request",
       "a vector from a region without n")
expect(call("POST", "/v1/vectors", {"values": {"shm": reg.name, "offset": 8}, "n": 2 * n}), 400, "out_of_range",
       "a vector longer than the region")
expect(call("GET", "/v1/vectors/%s?shm=%s&offset=%d" % (vid, reg.name, 8 * n + 8)), 400, "out_of_range",
       "a vector read past the region's end")

# operand errors: nothing changes in the region
y[:] = 7.0
before = bytes(reg.buf)
for body, status, code, what in [
        ({"x": {"shm": "psm_never"}}, 404, "shm_not_found", "x in an unknown region"),
        ({"x": {"shm": reg.name, "offset": 8 * n + 8}}, 400, "out_of_range", "x past the region's end"),
        ({"x": {"shm": reg.name, "offset": 4}}, 400, "invalid_request", "x at an unaligned offset"),
        ({"x": {"shm": reg.name, "offset": -8}}, 400, "invalid_request", "x at a negative offset"),
        ({"x": {"shm": "a/b"}}, 400, "invalid_request", "x in a region named with '/'"),
        ({"x": {"shm": reg.name, "vector": "v"}}, 400, "invalid_request", "x both a region and a vector"),
        ({"x": xs, "y": {"shm": reg.name, "offset": 8 * n + 8}}, 400, "out_of_range", "y past the region's end"),
        ({"x": {"shm": reg.name}, "verify": True}, 400, "invalid_request", "verify with x in a region"),
        ({"x": xs, "k": 2}, 400, "invalid_request", "k with an inline x")]:
    expect(call("POST", "/v1/matrices/%s/spmv" % mid, body), status, code, what)
expect(call("POST", "/v1/matrices/%s/spmv?x_shm=%s" % (mid, reg.name), binary=b"\0" * 8), 400, "invalid_request",
       "binary with x in a region and a body")
expect(call("POST", "/v1/matrices/%s/spmv?x_offset=8" % mid, binary=b""), 400, "invalid_request",
       "x_offset without x_shm")
ok(bytes(reg.buf) == before, "refused products left the region as it was")

# unregister while an async product runs: it finishes right
y[:] = np.nan
st, d, _ = call("POST", "/v1/matrices/%s/spmv" % mid, {"kernel": KS, "runs": 400 if not GPU else 1000,
                                                      "warmup": 0 if not GPU else 1000, "async": True,
                                                      "x": {"shm": reg.name}, "y": {"shm": reg.name, "offset": 8 * n}})
ok(st == 202, "async product with x and y in a region", d)
st2, _, _ = call("DELETE", "/v1/shm/" + reg.name)
ok(st2 == 204, "unregistered while it runs")
job = d.get("id") if isinstance(d, dict) else None
for _ in range(600):
    st, j, _ = call("GET", "/v1/jobs/%s" % job)
    if j.get("state") in ("done", "failed"):
        break
    time.sleep(0.05)
ok(j.get("state") == "done" and j.get("result", {}).get("y") == {"shm": reg.name, "offset": 8 * n},
   "the product finished after the unregister", j)
close_enough(y.copy(), ref, A, x, "float64", "... y in the region equals SciPy's")
expect(call("POST", "/v1/matrices/%s/spmv" % mid, {"x": {"shm": reg.name}}), 404, "shm_not_found",
       "an unregistered region is gone for the next product")

# shrunk and unlinked objects: 410, never a signal
call("POST", "/v1/shm", {"name": reg.name, "size": 16 * n})
os.ftruncate(reg._fd, 4096)
st, d, _ = call("GET", "/v1/shm/" + reg.name)
ok(d.get("state") == "shrunk" and d.get("object_bytes") == 4096, "a shrunk object shows as shrunk", d)
expect(call("POST", "/v1/matrices/%s/spmv" % mid, {"x": {"shm": reg.name}}), 410, "shm_gone", "x in a shrunk region")
expect(call("POST", "/v1/matrices/%s/spmv" % mid, {"x": xs, "y": {"shm": reg.name, "offset": 8 * n}}), 410,
       "shm_gone", "y in a shrunk region")
ok(os.fstat(reg._fd).st_size == 4096, "... and the daemon did not grow it back")
expect(call("POST", "/v1/vectors", {"values": {"shm": reg.name}, "n": n}), 410, "shm_gone",
       "a vector from a shrunk region")
os.ftruncate(reg._fd, 16 * n)
st, d, _ = call("POST", "/v1/matrices/%s/spmv" % mid, {"x": {"shm": reg.name}, "y": {"shm": reg.name, "offset": 8 * n}})
ok(st == 200, "grown back, the region works again", d)
call("DELETE", "/v1/shm/" + reg.name)
m3 = new_shm(16 * n)
call("POST", "/v1/shm", {"name": m3.name, "size": 16 * n})
m3.unlink()
st, d, _ = call("GET", "/v1/shm/" + m3.name)
ok(d.get("state") == "unlinked", "an unlinked object shows as unlinked", d)
expect(call("POST", "/v1/matrices/%s/spmv" % mid, {"x": {"shm": m3.name}}), 410, "shm_gone", "x in an unlinked region")
call("DELETE", "/v1/shm/" + m3.name)
st, _, _ = call("GET", "/v1/health")
ok(st == 200, "the daemon is up after shrunk and unlinked regions")

# ---------------------------------------------------------- solve
# b read from a region and x written into one (docs/api.md, "Solvers"):
# a 2-D Laplacian built here, each x checked by its true residual with
# SciPy, x's window poisoned first and the bytes past it watched.
g = 24
T1 = sp.diags([-np.ones(g - 1), 2 * np.ones(g), -np.ones(g - 1)], [-1, 0, 1])
L = (sp.kron(sp.identity(g), T1) + sp.kron(T1, sp.identity(g))).tocsr()
n2, K = L.shape[0], 3
buf = io.BytesIO()
sp.save_npz(buf, L, compressed=False)
st, d, _ = call("POST", "/v1/matrices?name=shm-solve&device=%s" % DEVICE, binary=buf.getvalue())
ok(st == 201, "an SPD matrix for the solves", d)
lid = d.get("id")
size = 8 * (2 * K * n2) + 64
sreg = new_shm(size)
bs = np.ndarray((K, n2), np.float64, sreg.buf, 0)           # b's K columns, then x's
xk = np.ndarray((K, n2), np.float64, sreg.buf, 8 * K * n2)
tail = np.ndarray((8,), np.float64, sreg.buf, 8 * 2 * K * n2)
bs[:] = rng.uniform(-1, 1, (K, n2))
st, d, _ = call("POST", "/v1/shm", {"name": sreg.name, "size": size})
ok(st == 201, "a region for b and x", d)
XOFF = 8 * K * n2


def solved(x, b, what):
    rel = np.linalg.norm(b - L @ x) / np.linalg.norm(b)
    return ok(bool(np.all(np.isfinite(x))) and rel <= 1.01e-8, what, "relres %g" % rel)


for label, path, body, binary in [
        ("JSON: b and x in the region", "", {"b": {"shm": sreg.name}, "x_out": {"shm": sreg.name, "offset": XOFF},
                                            "preconditioner": "jacobi"}, None),
        ("binary: b and x in the region, empty body", "?b_shm=%s&x_shm=%s&x_offset=%d&preconditioner=jacobi" %
         (sreg.name, sreg.name, XOFF), None, b"")]:
    xk[:] = np.nan
    tail[:] = np.nan
    st, d, h = call("POST", "/v1/matrices/%s/solve%s" % (lid, path), body, binary=binary)
    ok(st == 200 and h.get("Content-Type", "").startswith("application/json") and
       d.get("x") == {"shm": sreg.name, "offset": XOFF} and d.get("converged") is True, label, d)
    solved(xk[0].copy(), bs[0], "... x in the region solves A x = b")
    ok(bool(np.all(np.isnan(xk[1:]))) and bool(np.all(np.isnan(tail))), "... nothing written past x")
xk[:] = np.nan
st, d, _ = call("POST", "/v1/matrices/%s/solve?b_shm=%s&k=%d&x_shm=%s&x_offset=%d" % (lid, sreg.name, K, sreg.name,
                XOFF), binary=b"")
ok(st == 200 and d.get("k") == K and d.get("lockstep") is True and d.get("x") == {"shm": sreg.name, "offset": XOFF},
   "binary: k = %d columns of b from the region, x into it (CG in lockstep)" % K, d)
for j in range(K):
    solved(xk[j].copy(), bs[j], "... column %d" % j)
ok(bool(np.all(np.isnan(tail))), "... nothing written past x's %d columns" % K)
xk[:] = np.nan
st, d, _ = call("POST", "/v1/matrices/%s/solve" % lid, {"b": {"shm": sreg.name, "offset": 8 * n2}, "k": 2,
                                                       "x_out": {"shm": sreg.name, "offset": XOFF}})
ok(st == 200 and d.get("k") == 2, "JSON: b's columns 1 and 2 (offset, \"k\": 2)", d)
solved(xk[0].copy(), bs[1], "... x's first column solves the second b")
solved(xk[1].copy(), bs[2], "... x's second column solves the third b")
st, raw, h = call("POST", "/v1/matrices/%s/solve?b_shm=%s" % (lid, sreg.name), binary=b"")
ok(st == 200 and len(raw) == 8 * n2 and "X-SpMV-Solve" in h, "b in the region, x in the binary answer")
if st == 200:
    solved(np.frombuffer(raw, np.float64), bs[0], "... x solves A x = b")
xk[:] = np.nan
x0 = np.zeros(n2)
st, d, _ = call("POST", "/v1/matrices/%s/solve?b_shm=%s&x0=body&x_shm=%s&x_offset=%d" % (lid, sreg.name, sreg.name,
                XOFF), binary=x0.tobytes())
ok(st == 200, "b in the region, x0 in the body, x into the region", d)
solved(xk[0].copy(), bs[0], "... x solves A x = b")
xk[:] = np.nan
st, d, _ = call("POST", "/v1/matrices/%s/solve" % lid, {"b": bs[0].tolist(), "x_out": {"shm": sreg.name,
                                                                                        "offset": XOFF}})
ok(st == 200 and "x" in d and d["x"] == {"shm": sreg.name, "offset": XOFF}, "inline b, x into the region", d)
solved(xk[0].copy(), bs[0], "... x solves A x = b")
xk[:] = np.nan
st, d, _ = call("POST", "/v1/matrices/%s/solve" % lid, {"b": {"shm": sreg.name}, "async": True,
                                                       "x_out": {"shm": sreg.name, "offset": XOFF}})
job = d.get("id") if st == 202 else None
for _ in range(600):
    st, j, _ = call("GET", "/v1/jobs/%s?wait=1" % job)
    if j.get("state") in ("done", "failed"):
        break
ok(j.get("state") == "done" and j.get("result", {}).get("x") == {"shm": sreg.name, "offset": XOFF},
   "async: the job's result says where x went", j)
solved(xk[0].copy(), bs[0], "... x in the region solves A x = b")
# x's region shrunk while the solve waits on the worker behind a long product (a short task, not
# sliced, so the solve starts only after it): b was read when the request came, x cannot be
# written, and the job fails 410 shm_gone with nothing written.
st, d, _ = call("POST", "/v1/matrices?generate=poisson2d&n=700&device=%s" % DEVICE)
big = d.get("id")
st, bv, _ = call("POST", "/v1/vectors", {"like": big, "fill": 1})
st, pj, _ = call("POST", "/v1/matrices/%s/spmv" % big, {"kernel": KS, "runs": 200, "async": True,
                                                       "x": {"vector": bv.get("id")}})
ok(st == 202, "a long product queued on the worker", pj)
st, d, _ = call("POST", "/v1/matrices/%s/solve" % lid, {"b": {"shm": sreg.name}, "async": True, "kernel": KS,
                                                       "x_out": {"shm": sreg.name, "offset": XOFF}})
job = d.get("id") if st == 202 else None
os.ftruncate(sreg._fd, XOFF)  # b stays, x's window goes
for _ in range(600):
    st, j, _ = call("GET", "/v1/jobs/%s?wait=1" % job)
    if j.get("state") in ("done", "failed"):
        break
ok(j.get("state") == "failed" and j.get("error", {}).get("code") == "shm_gone",
   "x's region shrunk while the solve waited: the job fails 410 shm_gone", j)
ok(os.fstat(sreg._fd).st_size == XOFF, "... and the daemon did not grow the object back to write x")
os.ftruncate(sreg._fd, size)
call("DELETE", "/v1/matrices/" + big)
call("DELETE", "/v1/vectors/" + bv.get("id", "none"))
st, d, _ = call("POST", "/v1/vectors", {"like": lid, "side": "rows", "fill": 0})
zv = d.get("id")
xk[:] = 7.0
before = bytes(sreg.buf)
for path, body, binary, status, code, what in [
        ("", {"b": {"shm": "psm_never"}}, None, 404, "shm_not_found", "b in an unknown region"),
        ("", {"b": {"shm": sreg.name, "offset": size - 8 * n2 + 8}}, None, 400, "out_of_range", "b past the region"),
        ("", {"b": {"shm": sreg.name, "offset": 4}}, None, 400, "invalid_request", "b at an unaligned offset"),
        ("", {"b": {"shm": sreg.name}, "x_out": {"shm": sreg.name, "offset": size - 8}}, None, 400, "out_of_range",
         "x past the region"),
        ("", {"b": bs[0].tolist(), "k": 2}, None, 400, "invalid_request", "k with an inline b"),
        ("", {"b": {"shm": sreg.name}, "k": 0}, None, 400, "invalid_request", "k = 0"),
        ("", {"b": {"shm": sreg.name}, "k": 2, "x0": {"vector": zv}}, None, 400, "invalid_request",
         "k = 2 with a resident x0 (one column)"),
        ("", {"b": {"shm": sreg.name, "vector": "v"}}, None, 400, "invalid_request", "b both a region and a vector"),
        ("?b_shm=%s" % sreg.name, None, b"\0" * 8, 400, "shape_mismatch", "binary with b in a region and a body"),
        ("?b_offset=8", None, b"", 400, "invalid_request", "b_offset without b_shm"),
        ("?b_shm=%s&b_offset=x" % sreg.name, None, b"", 400, "invalid_request", "b_offset not a number"),
        ("?b_shm=%s&x_shm=%s&x_out=v" % (sreg.name, sreg.name), None, b"", 400, "invalid_request",
         "x both a vector and a region"),
        ("?b_shm=%s&x_shm=psm_never" % sreg.name, None, b"", 404, "shm_not_found", "x in an unknown region")]:
    expect(call("POST", "/v1/matrices/%s/solve%s" % (lid, path), body, binary=binary), status, code, "solve: " + what)
ok(bytes(sreg.buf) == before, "refused solves left the region as it was")
st, d, _ = call("POST", "/v1/matrices?name=shm-solve&device=%s" % DEVICE, binary=buf.getvalue(), base=OFF_URL)
expect(call("POST", "/v1/matrices/%s/solve" % d.get("id"), {"b": {"shm": sreg.name}}, base=OFF_URL), 403,
       "shm_disabled", "allow_shm off: a solve with b in a region")
os.ftruncate(sreg._fd, 8 * n2 // 2)
expect(call("POST", "/v1/matrices/%s/solve" % lid, {"b": {"shm": sreg.name}}), 410, "shm_gone", "b in a shrunk region")
os.ftruncate(sreg._fd, size)
call("DELETE", "/v1/shm/" + names[1].name, base=SMALL_URL)  # room for one more region there
st, d, _ = call("POST", "/v1/matrices?name=shm-solve&device=%s" % DEVICE, binary=buf.getvalue(), base=SMALL_URL)
sid = d.get("id")
st, d, _ = call("POST", "/v1/shm", {"name": sreg.name, "size": size}, base=SMALL_URL)
ok(st == 201, "the region on the daemon whose max_body_bytes is 8192", d)
st, d, _ = call("POST", "/v1/matrices/%s/solve" % sid, {"b": {"shm": sreg.name}, "k": 2}, base=SMALL_URL)
ok(st == 413 and d.get("error", {}).get("code") == "too_large" and "max_body_bytes" in d["error"].get("message", ""),
   "b of 2 x %d values (%d bytes) from a region: 413 naming max_body_bytes" % (n2, 16 * n2), d)
st, d, _ = call("POST", "/v1/matrices/%s/solve" % sid, {"b": {"shm": sreg.name}}, base=SMALL_URL)
ok(st == 200, "... one column (%d bytes) is under it" % (8 * n2), d)
call("DELETE", "/v1/shm/" + sreg.name, base=SMALL_URL)
call("DELETE", "/v1/shm/" + sreg.name)

# CUDA regions
expect(call("POST", "/v1/shm", {"name": "cu1", "cuda_ipc": "zz" * 64, "device": 0, "size": 8}), 400,
       "invalid_request", "a CUDA handle that is not 128 hex digits")
expect(call("POST", "/v1/shm", {"name": "cu1", "cuda_ipc": "00" * 64, "size": 8}), 400, "invalid_request",
       "a CUDA region without a device")
if not GPU:
    expect(call("POST", "/v1/shm", {"name": "cu1", "cuda_ipc": "00" * 64, "device": "gpu0", "size": 8}), 409,
           "unavailable", "a CUDA region on a daemon without a GPU")
else:
    expect(call("POST", "/v1/shm", {"name": "cu1", "cuda_ipc": "00" * 64, "device": "gpu0", "size": 8}), 400,
           "invalid_request", "a CUDA handle the driver refuses")
    try:
        import cupy
    except ImportError:
        cupy = None
        tap.skip("no CuPy here: CUDA regions are not exercised")
    if cupy is not None:
        cupy.cuda.Device(0).use()
        cupy.cuda.set_allocator(None)  # each array its own cudaMalloc: an IPC handle opens the allocation's base
        for dtype, kernel, trans in [("float64", "gpu.csr.vector", False), ("float32", "cusparse.csr", False),
                                     ("float64", "gpu.csr.vector", True)]:
            npdt = np.float64 if dtype == "float64" else np.float32
            gid = upload(path, dtype, "gpu0")
            Aop = (A.T if trans else A).astype(npdt).tocsr()
            xh = rng.uniform(-1, 1, Aop.shape[1]).astype(npdt)
            buf = cupy.empty(Aop.shape[1] + Aop.shape[0] + 16, dtype=npdt)
            buf[:] = cupy.nan
            buf[:Aop.shape[1]] = cupy.asarray(xh)
            handle = cupy.cuda.runtime.ipcGetMemHandle(buf.data.ptr)
            vs = np.dtype(npdt).itemsize
            st, d, _ = call("POST", "/v1/shm", {"name": "cuda-x", "cuda_ipc": bytes(handle).hex(), "device": "gpu0",
                                               "size": buf.nbytes})
            ok(st == 201 and d.get("kind") == "cuda" and d.get("device") == "gpu0", "CUDA region registered", d)
            st, d, _ = call("POST", "/v1/matrices/%s/spmv" % gid, {
                "kernel": kernel, "op": "t" if trans else "n", "x": {"shm": "cuda-x"},
                "y": {"shm": "cuda-x", "offset": vs * Aop.shape[1]}})
            ok(st == 200, "spmv %s %s op %s with x and y in device memory of another process" % (dtype, kernel,
                                                                                              "t" if trans else "n"), d)
            yh = cupy.asnumpy(buf[Aop.shape[1]:Aop.shape[1] + Aop.shape[0]])
            close_enough(yh, Aop.astype(np.float64) @ xh.astype(np.float64), Aop, xh, dtype,
                         "... y in the CUDA region equals SciPy's")
            ok(bool(cupy.all(cupy.isnan(buf[Aop.shape[1] + Aop.shape[0]:]))), "... nothing written past y")
            cpu_id = upload(path, dtype, "cpu")
            expect(call("POST", "/v1/matrices/%s/spmv" % cpu_id, {"kernel": "cpu.csr.omp", "x": {"shm": "cuda-x"}}),
                   409, "wrong_device", "a CUDA region for a matrix on the CPU")
            expect(call("POST", "/v1/vectors", {"values": {"shm": "cuda-x"}, "n": 4}), 400, "invalid_request",
                   "a vector from a CUDA region")
            st, _, _ = call("DELETE", "/v1/shm/cuda-x")
            ok(st == 204, "CUDA region unregistered")
            expect(call("POST", "/v1/shm", {"name": "cuda-big", "cuda_ipc": bytes(handle).hex(), "device": 0,
                                            "size": buf.nbytes + 4096 * 1024}), 400, "out_of_range",
                   "a CUDA window past its allocation")
            call("DELETE", "/v1/matrices/" + gid)
            call("DELETE", "/v1/matrices/" + cpu_id)
            del buf

# other users' objects, as root
if os.geteuid() == 0:
    other = new_shm(4096)
    os.fchown(other._fd, 65534, 65534)
    os.fchmod(other._fd, 0o600)
    expect(call("POST", "/v1/shm", {"name": other.name, "size": 4096}), 403, "shm_forbidden",
           "another user's object with mode 0600 (root does not bypass it)")
    os.fchmod(other._fd, 0o666)
    st, d, _ = call("POST", "/v1/shm", {"name": other.name, "size": 4096})
    ok(st == 201, "another user's object with mode 0666 is taken", d)
    call("DELETE", "/v1/shm/" + other.name)
    link = "spmvd-test-link-%d" % SEED
    os.symlink("/dev/shm/" + other.name, "/dev/shm/" + link)
    try:
        expect(call("POST", "/v1/shm", {"name": link, "size": 4096}), 403, "shm_forbidden", "a symbolic link")
    finally:
        os.unlink("/dev/shm/" + link)
else:
    tap.skip("not root: cannot make an object owned by another user")

for r in OWNED:
    close(r)
tap.done()
