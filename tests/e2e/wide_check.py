#!/usr/bin/env python3
"""wide_check.py URL MATRICES STATE — 64-bit row offsets through the daemon (issue 13, part 4).

Driven by tests/e2e/wide.sh on a CPU daemon. A matrix past INT32_MAX
non-zeros (about 26 GB of CSR) cannot be built on this machine, so the
uploads ask for the 64-bit path with `offsets=64`, which holds exactly
what such a matrix holds: 64-bit row offsets, 32-bit columns. Checked
against SciPy, from values drawn afresh (seeded, printed):

- a Matrix Market upload and an .npz CSR archive with offsets=64: the
  descriptor says row_offsets 64, its CSR bytes count 8-byte offsets;
- cpu.csr.serial, cpu.csr.omp and auto multiply it right (1e-12 of
  SciPy's A @ x, float64; 1e-5 float32), JSON and binary, with verify;
- every other CPU kernel, op t, k = 2, `formats=ell`, shard and a named
  GPU are refused with a 4xx that names the 64-bit offsets, changing
  nothing: the matrix still multiplies right after each;
- resident vectors and /v1/ops on it, /solve (CG with Jacobi) on a 2-D
  Poisson matrix held so converging (the true residual computed here),
  and its spy image;
- the stored file keeps the offsets: after a restart (wide.sh) the same
  products are right again (`--after-restart`).
"""
import json
import os
import random
import sys

import numpy as np
import scipy.io
import scipy.sparse as sp

import tap
from tap import ok

URL, MATRICES, OUT = sys.argv[1], sys.argv[2], sys.argv[3]
AFTER = "--after-restart" in sys.argv
SEED = int(os.environ.get("SPMV_SEED", random.randrange(1 << 30)))
print("# seed %d" % SEED, flush=True)
rng = np.random.default_rng(SEED)
CPU_KERNELS = ["cpu.csr.serial", "cpu.csr.omp"]


def call(method, path, body=None, ctype="application/json", accept=None):
    return tap.call(URL, method, path, body, ctype, accept)


def close(y, ref, bound):
    y = np.asarray(y, dtype=np.float64)
    scale = max(float(np.max(np.abs(ref))), 1e-300) if len(ref) else 1.0
    return len(y) == len(ref) and (len(ref) == 0 or float(np.max(np.abs(y - ref))) <= bound * scale)


def products(mid, A, dtype, what):
    """Every CSR kernel and auto, JSON and binary: right; the others refused."""
    bound = 1e-12 if dtype == "float64" else 1e-5
    npdt = np.float64 if dtype == "float64" else np.float32
    x = rng.uniform(-1, 1, A.shape[1]).astype(npdt)
    ref = A.astype(np.float64) @ x.astype(np.float64)
    for k in CPU_KERNELS + ["auto"]:
        st, d = call("POST", "/v1/matrices/%s/spmv" % mid, {"kernel": k, "x": x.tolist(), "verify": True, "runs": 2})
        ok(st == 200 and close(d.get("y", []), ref, bound) and d["verify"]["max_rel_err"] <= bound,
           "%s: %s multiplies the 64-bit matrix right (verify %s)" % (what, k, d.get("verify")), d)
    st, raw = call("POST", "/v1/matrices/%s/spmv?kernel=cpu.csr.omp" % mid, x.tobytes(), "application/octet-stream",
                   accept="application/octet-stream")
    ok(st == 200 and close(np.frombuffer(raw, dtype=npdt), ref, bound), "%s: binary x and y with cpu.csr.omp" % what)
    return x, ref


def refusals(mid, A, what):
    st, d = call("GET", "/v1/kernels")
    names = [k["name"] for k in d.get("kernels", []) if k.get("device") == "cpu" and k.get("op", "spmv") == "spmv"
             and k["name"] not in CPU_KERNELS + ["auto"]]
    bad = []
    x = [1.0] * A.shape[1]
    for k in names:
        st, d = call("POST", "/v1/matrices/%s/spmv" % mid, {"kernel": k, "x": x})
        if st not in (409, 422) or "64-bit" not in json.dumps(d):
            bad.append((k, st, d))
    ok(names and not bad, "%s: every other CPU kernel (%d) refused naming the 64-bit offsets" % (what, len(names)),
       bad[:3])
    st, d = call("POST", "/v1/matrices/%s/spmv" % mid, {"kernel": "cpu.csr.omp", "x": [1.0] * A.shape[0], "op": "t"})
    ok(st in (409, 422) and "64-bit" in json.dumps(d), "%s: op t refused (%d)" % (what, st), d)
    st, d = call("POST", "/v1/matrices/%s/spmv" % mid, {"kernel": "cpu.csr.omp", "x": [[1.0] * A.shape[1]] * 2})
    ok(st in (409, 422) and "64-bit" in json.dumps(d), "%s: k = 2 columns refused (%d)" % (what, st), d)
    st, d = call("POST", "/v1/matrices/%s/spmspm" % mid, {"b": mid})
    ok(st == 422 and d.get("error", {}).get("code") == "too_large" and "64-bit" in json.dumps(d),
       "%s: SpMSpM refused (422 too_large)" % what, d)


def upload(path, query, body_bytes=None):
    data = body_bytes if body_bytes is not None else open(path, "rb").read()
    return call("POST", "/v1/matrices?" + query, data, "application/octet-stream")


def solve():
    """CG with Jacobi on a 2-D Poisson matrix (SPD, well conditioned) held with 64-bit offsets."""
    n = 30
    T = sp.diags([-1, 2, -1], [-1, 0, 1], shape=(n, n))
    P = (sp.kron(sp.identity(n), T) + sp.kron(T, sp.identity(n))).tocsr()
    path = os.path.join(OUT, "poisson.mtx")
    scipy.io.mmwrite(path, P)
    st, d = upload(path, "offsets=64&device=cpu&name=poisson64")
    mid = d.get("id")
    b = rng.uniform(-1, 1, P.shape[0])
    st, d = call("POST", "/v1/matrices/%s/solve" % mid, {"method": "cg", "b": b.tolist(), "tol": 1e-10,
                                                           "maxit": 1000, "preconditioner": "jacobi",
                                                           "kernel": "cpu.csr.omp"})
    xs = np.asarray(d.get("x", []), dtype=np.float64) if st == 200 else np.zeros(0)
    res = float(np.linalg.norm(b - P @ xs) / np.linalg.norm(b)) if len(xs) == P.shape[1] else 1.0
    ok(st == 200 and d.get("converged") and res <= 1e-9,
       "CG with Jacobi on a 64-bit Poisson matrix converges (%s iterations, true residual %.2g)"
       % (d.get("iterations"), res), str(d)[:300])
    call("DELETE", "/v1/matrices/%s" % mid)


real = os.path.join(MATRICES, "real")
A = scipy.io.mmread(os.path.join(real, "bcsstk13.mtx")).tocsr()  # symmetric positive definite
A.sort_indices()
ids = {}
if not AFTER:
    st, d = upload(os.path.join(real, "bcsstk13.mtx"), "offsets=64&device=cpu&name=mtx64")
    ok(st == 201 and d.get("row_offsets") == 64 and d.get("nnz") == A.nnz,
       "a Matrix Market upload with offsets=64: 201, row_offsets 64", d)
    ids["mtx"] = d.get("id")
    st, d2 = upload(os.path.join(real, "bcsstk13.mtx"), "device=cpu&name=mtx32")
    ok(st == 201 and d2.get("row_offsets") == 32, "the same without: row_offsets 32", d2)
    b32 = next((f["bytes"] for f in d2.get("formats", []) if f["format"] == "csr"), None)
    b64 = next((f["bytes"] for f in d.get("formats", []) if f["format"] == "csr"), None)
    ok(b32 is not None and b64 == b32 + 4 * (A.shape[0] + 1),
       "its CSR counts 8-byte row offsets (%s bytes against %s)" % (b64, b32))
    call("DELETE", "/v1/matrices/%s" % d2.get("id"))
    # an .npz CSR archive, float32
    npz = os.path.join(OUT, "r.npz")
    R = sp.random(900, 700, density=0.02, random_state=SEED % 2**32, format="csr", dtype=np.float64)
    R.indptr = R.indptr.astype(np.int64)
    R.indices = R.indices.astype(np.int64)
    sp.save_npz(npz, R, compressed=True)
    st, d = upload(npz, "offsets=64&dtype=float32&name=npz64")
    ok(st == 201 and d.get("row_offsets") == 64 and d.get("dtype") == "float32" and d.get("device") == "cpu",
       "an .npz CSR archive with offsets=64 (device auto): 201, float32, held on the host", d)
    ids["npz"] = d.get("id")
    json.dump({"ids": ids, "npz": npz}, open(os.path.join(OUT, "wide.json"), "w"))
    # refused uploads
    st, d = upload(os.path.join(real, "karate.mtx"), "offsets=64&formats=ell&device=cpu")
    ok(st == 422 and "64-bit" in json.dumps(d), "offsets=64 with formats=ell: 422 naming the offsets", d)
    st, d = upload(os.path.join(real, "karate.mtx"), "offsets=32")
    ok(st == 400, "offsets=32: 400 (auto or 64)", d)
    st, d = call("GET", "/v1/matrices")
    ok(st == 200 and len(d.get("matrices", [])) == 2, "the refused uploads stored nothing", d)
else:
    ids = json.load(open(os.path.join(OUT, "wide.json")))["ids"]
    for k, mid in ids.items():
        st, d = call("GET", "/v1/matrices/%s" % mid)
        ok(st == 200 and d.get("row_offsets") == 64, "after the restart %s is still held with 64-bit offsets" % k, d)

products(ids["mtx"], A, "float64", "bcsstk13 (Matrix Market)")
refusals(ids["mtx"], A, "bcsstk13")
R = sp.load_npz(json.load(open(os.path.join(OUT, "wide.json")))["npz"]).tocsr()
products(ids["npz"], R.astype(np.float32), "float32", "random 900 x 700 (.npz)")
x, ref = products(ids["mtx"], A, "float64", "bcsstk13 after the refusals")
if not AFTER:
    # resident vectors and /v1/ops
    st, dx = call("POST", "/v1/vectors", {"like": ids["mtx"], "values": x.tolist()})
    st2, dy = call("POST", "/v1/vectors", {"like": ids["mtx"], "side": "rows", "fill": 0.0})
    st3, d = call("POST", "/v1/ops", {"steps": [{"op": "spmv", "matrix": ids["mtx"], "x": dx.get("id"),
                                                 "y": dy.get("id"), "kernel": "cpu.csr.omp"},
                                                {"op": "dot", "x": dy.get("id"), "y": dy.get("id"), "as": "yy"}]})
    yy = float(ref @ ref)
    ok(st3 == 200 and abs(d["results"]["yy"] - yy) <= 1e-10 * yy, "/v1/ops spmv + dot on it with resident vectors", d)
    solve()
    st, d = call("GET", "/v1/matrices/%s/spy.png?size=64" % ids["mtx"], accept="image/png")
    ok(st == 200 and d[:4] == b"\x89PNG", "its spy image")
tap.done()
