#!/usr/bin/env python3
"""wide_check.py URL MATRICES STATE — 64-bit row offsets through the daemon (issue 13, part 4).

Driven by tests/e2e/wide.sh on a CPU daemon. A matrix past INT32_MAX
non-zeros (about 26 GB of CSR) cannot be built on this machine, so the
uploads ask for the 64-bit path with `offsets=64`, which holds exactly
what such a matrix holds: 64-bit row offsets, 32-bit columns. Checked
against SciPy, from values drawn afresh (seeded, printed):

- a Matrix Market upload and an .npz CSR archive with offsets=64: the
  descriptor says row_offsets 64, its CSR bytes count 8-byte offsets;
- cpu.csr.serial, cpu.csr.omp, cpu.psell.omp (PSELL is built from a
  wide CSR: its slices carry 64-bit offsets) and auto multiply it right
  (1e-12 of SciPy's A @ x, float64; 1e-5 float32), JSON and binary, with
  verify; `formats=psell` is taken at the upload;
- every other CPU kernel, op t, k = 2, `formats=ell`, shard and a named
  GPU are refused with a 4xx that names the 64-bit offsets, changing
  nothing: the matrix still multiplies right after each;
- resident vectors and /v1/ops on it, /solve (CG with Jacobi) on a 2-D
  Poisson matrix held so converging (the true residual computed here),
  and its spy image;
- matrices made by the daemon (`generate`, no body): a band of 5000 rows
  whose entries follow a formula, with 64-bit offsets, checked against the
  same formula built here in SciPy; a float32 2-D Poisson matrix against
  SciPy's; the file of a generated matrix is its 512-byte header (the
  recipe), and a restart builds it again; bad recipes (unknown kind, no n,
  a body too, a matrix past max_nnz, the host's memory or 32-bit rows) are
  refused with what and which limit, storing nothing;
- the stored file keeps the offsets: after a restart (wide.sh) the same
  products are right again (`--after-restart`).
- on a daemon with a GPU (the GPU host runs this file too): the 64-bit
  matrices go to the GPU (device=gpu0), where gpu.csr.vector, cusparse.csr,
  gpu.psell and auto multiply them right and every other GPU kernel is refused
  naming the offsets; resident vectors and /v1/ops there.
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
CPU_KERNELS = ["cpu.csr.serial", "cpu.csr.omp", "cpu.psell.omp"]


def call(method, path, body=None, ctype="application/json", accept=None):
    return tap.call(URL, method, path, body, ctype, accept)


def close(y, ref, bound):
    y = np.asarray(y, dtype=np.float64)
    scale = max(float(np.max(np.abs(ref))), 1e-300) if len(ref) else 1.0
    return len(y) == len(ref) and (len(ref) == 0 or float(np.max(np.abs(y - ref))) <= bound * scale)


def products(mid, A, dtype, what, kernels=CPU_KERNELS):
    """Every CSR kernel of the device and auto, JSON and binary: right."""
    bound = 1e-12 if dtype == "float64" else 1e-5
    npdt = np.float64 if dtype == "float64" else np.float32
    x = rng.uniform(-1, 1, A.shape[1]).astype(npdt)
    ref = A.astype(np.float64) @ x.astype(np.float64)
    for k in kernels + ["auto"]:
        st, d = call("POST", "/v1/matrices/%s/spmv" % mid, {"kernel": k, "x": x.tolist(), "verify": True, "runs": 2})
        ok(st == 200 and close(d.get("y", []), ref, bound) and d["verify"]["max_rel_err"] <= bound,
           "%s: %s multiplies it right (verify %s)" % (what, k, d.get("verify")), d)
    st, raw = call("POST", "/v1/matrices/%s/spmv?kernel=%s" % (mid, kernels[-1]), x.tobytes(),
                   "application/octet-stream", accept="application/octet-stream")
    ok(st == 200 and close(np.frombuffer(raw, dtype=npdt), ref, bound), "%s: binary x and y with %s"
       % (what, kernels[-1]))
    return x, ref


def refusals(mid, A, what, device="cpu", kernels=CPU_KERNELS):
    st, d = call("GET", "/v1/kernels")
    names = [k["name"] for k in d.get("kernels", []) if k.get("device") == device and k.get("op", "spmv") == "spmv"
             and k.get("available", True) and k["name"] not in kernels + ["auto"]]
    bad = []
    x = [1.0] * A.shape[1]
    for k in names:
        st, d = call("POST", "/v1/matrices/%s/spmv" % mid, {"kernel": k, "x": x})
        if st not in (409, 422) or "64-bit" not in json.dumps(d):
            bad.append((k, st, d))
    ok(names and not bad, "%s: every other %s kernel (%d) refused naming the 64-bit offsets"
       % (what, device.upper(), len(names)), bad[:3])
    if device == "cpu":
        op_t(mid, A, what)


def op_t(mid, A, what):
    """op t on 64-bit offsets: the transpose (32-bit only) is refused, unless the matrix equals it
    (descriptor `symmetric`: op t runs as op n, nothing to build)."""
    sym = call("GET", "/v1/matrices/%s" % mid)[1].get("symmetric")
    x = rng.uniform(-1, 1, A.shape[0])
    st, d = call("POST", "/v1/matrices/%s/spmv" % mid, {"kernel": "cpu.csr.omp", "x": x.tolist(), "op": "t"})
    if sym:
        ref = A.T.astype(np.float64) @ x
        ok(st == 200 and close(d.get("y", []), ref, 1e-12), "%s (symmetric): op t runs as op n (%d)" % (what, st), d)
    else:
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


def band(n, per_row):
    """The daemon's `generate=band` built here from its formula: columns
    i-h..i+h (h = per_row // 2), entry 1 + ((i + 3j) mod 7) / 8."""
    h = per_row // 2
    i = np.arange(n, dtype=np.int64)
    r, c = [], []
    for d in range(-h, h + 1):
        j = i + d
        m = (j >= 0) & (j < n)
        r.append(i[m])
        c.append(j[m])
    r, c = np.concatenate(r), np.concatenate(c)
    return sp.csr_matrix((1.0 + ((r + 3 * c) % 7) / 8.0, (r, c)), shape=(n, n))


def poisson2d(n):
    T = sp.diags([-1, 2, -1], [-1, 0, 1], shape=(n, n))
    return (sp.kron(sp.identity(n), T) + sp.kron(T, sp.identity(n))).tocsr()


def generate(query):
    return call("POST", "/v1/matrices?" + query)


def generated_uploads():
    """Matrices the daemon builds by formula; what it refuses."""
    st, d = generate("generate=band&n=5000&per_row=33&offsets=64&device=cpu&name=band64")
    B = band(5000, 33)
    g = d.get("generated", {})
    ok(st == 201 and d.get("row_offsets") == 64 and d.get("nnz") == B.nnz and d.get("rows") == 5000 and
       g.get("kind") == "band" and g.get("per_row") == 33, "generate=band n=5000 per_row=33 offsets=64: 201, "
       "%s non-zeros (the formula's %d), row_offsets 64, the recipe in the descriptor" % (d.get("nnz"), B.nnz), d)
    ids["band"] = d.get("id")
    path = os.path.join(OUT, "state", "%s.csr" % d.get("id"))
    ok(os.path.exists(path) and os.path.getsize(path) == 512,
       "its file is the 512-byte header holding the recipe (%s bytes)" % (os.path.getsize(path)
                                                                          if os.path.exists(path) else None))
    st, d = generate("generate=poisson2d&n=40&dtype=float32&device=cpu&name=p2d")
    ok(st == 201 and d.get("row_offsets") == 32 and d.get("nnz") == poisson2d(40).nnz and d.get("dtype") == "float32",
       "generate=poisson2d n=40 float32: 201, 32-bit offsets", d)
    ids["p2d"] = d.get("id")
    # seed and dense_len reach the generator: one seed twice is one matrix, another seed another
    ys = []
    xs = rng.uniform(-1, 1, 500).tolist()
    for seed in (7, 7, 8):
        st, d = generate("generate=uniform&n=500&per_row=8&seed=%d&device=cpu" % seed)
        ok(st == 201 and d.get("generated", {}).get("seed") == seed and d.get("nnz") == 4000,
           "generate=uniform seed=%d: 201, 4000 non-zeros, the seed in the recipe" % seed, d)
        st2, p = call("POST", "/v1/matrices/%s/spmv" % d.get("id"), {"kernel": "cpu.csr.serial", "x": xs})
        ys.append(p.get("y"))
        call("DELETE", "/v1/matrices/%s" % d.get("id"))
    ok(ys[0] is not None and ys[0] == ys[1] and ys[0] != ys[2], "the same seed gives the same matrix, another seed another")
    st, d = generate("generate=banded_dense_row&n=1000&per_row=5&dense_len=300&device=cpu")
    ok(st == 201 and d.get("generated", {}).get("dense_len") == 300 and d.get("nnz") == 1000 * 5 - 6 - 5 + 300,
       "generate=banded_dense_row dense_len=300: its dense row holds 300 entries (%s non-zeros)" % d.get("nnz"), d)
    call("DELETE", "/v1/matrices/%s" % d.get("id"))
    st, before = call("GET", "/v1/matrices")
    bad = [("generate=nosuch&n=10", 400, "nosuch"), ("generate=band", 400, "`n`"),
           ("generate=band&n=0", 400, "`n`"), ("generate=band&n=10&per_row=-1", 400, "per_row"),
           ("generate=poisson2d&n=50000", 422, "46340"), ("generate=band&n=2147483647&per_row=65", 422, "max_nnz"),
           ("generate=band&n=2147483647&per_row=17", 422, "max_matrix_bytes"),
           ("generate=band&n=10&offsets=32", 400, "offsets"), ("generate=band&n=10&dtype=half", 400, "dtype")]
    for q, want, word in bad:
        st, d = generate(q)
        ok(st == want and word in json.dumps(d), "%s: %d naming %s" % (q, st, word), d)
    st, d = call("POST", "/v1/matrices?generate=band&n=10", b"%%MatrixMarket", "application/octet-stream")
    ok(st == 400 and "no file or body" in json.dumps(d), "generate with a body: 400", d)
    st, after = call("GET", "/v1/matrices")
    ok(len(after.get("matrices", [])) == len(before.get("matrices", [])), "the refused recipes stored nothing")


def gpu_section():
    """The 64-bit matrices on a GPU: gpu.csr.vector, cusparse.csr, gpu.psell and auto right; the rest refused."""
    if not HAVE_GPU:
        print("# no GPU in this daemon: the GPU section is the GPU host's", flush=True)
        return
    gk = ["gpu.csr.vector", "cusparse.csr", "gpu.psell"]
    st, d = generate("generate=band&n=20000&per_row=33&offsets=64&device=gpu0&name=band64gpu")
    ok(st == 201 and d.get("device") == "gpu0" and d.get("row_offsets") == 64,
       "generate=band offsets=64 device=gpu0: held on the GPU with 64-bit offsets", d)
    gid = d.get("id")
    csr_bytes = d.get("device_memory", {}).get("formats", {}).get("csr")
    B = band(20000, 33)
    ok(csr_bytes == 8 * (B.shape[0] + 1) + 12 * B.nnz, "its device CSR counts 8-byte offsets (%s bytes)" % csr_bytes)
    products(gid, B, "float64", "band on gpu0", gk)
    refusals(gid, B, "band on gpu0", "gpu", gk)
    st, d = upload(os.path.join(real, "bcsstk13.mtx"), "offsets=64&device=gpu0&dtype=float32&name=mtx64gpu")
    ok(st == 201 and d.get("device") == "gpu0" and d.get("row_offsets") == 64, "a Matrix Market upload with "
       "offsets=64 to gpu0: 201", d)
    products(d.get("id"), A.astype(np.float32), "float32", "bcsstk13 float32 on gpu0", gk)
    st, dx = call("POST", "/v1/vectors", {"like": gid, "values": rng.uniform(-1, 1, B.shape[1]).tolist()})
    st2, dy = call("POST", "/v1/vectors", {"like": gid, "side": "rows", "fill": 0.0})
    xv = np.asarray(call("GET", "/v1/vectors/%s" % dx.get("id"))[1].get("values", []), dtype=np.float64)
    st3, d = call("POST", "/v1/ops", {"steps": [{"op": "spmv", "matrix": gid, "x": dx.get("id"), "y": dy.get("id"),
                                                 "kernel": "gpu.csr.vector"},
                                                {"op": "dot", "x": dy.get("id"), "y": dy.get("id"), "as": "yy"}]})
    yy = float(np.sum((B @ xv) ** 2)) if len(xv) == B.shape[1] else -1.0
    ok(st3 == 200 and abs(d.get("results", {}).get("yy", 0) - yy) <= 1e-10 * yy,
       "/v1/ops spmv + dot with resident vectors on gpu0", d)
    for v in (dx, dy):
        call("DELETE", "/v1/vectors/%s" % v.get("id"))


real = os.path.join(MATRICES, "real")
HAVE_GPU = any(str(dv.get("name", "")).startswith("gpu") for dv in call("GET", "/v1/info")[1].get("devices", []))
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
    ok(st == 201 and d.get("row_offsets") == 64 and d.get("dtype") == "float32" and
       (str(d.get("device")).startswith("gpu") if HAVE_GPU else d.get("device") == "cpu"),
       "an .npz CSR archive with offsets=64 (device auto): 201, float32, held on %s" % d.get("device"), d)
    ids["npz"] = d.get("id")
    generated_uploads()
    json.dump({"ids": ids, "npz": npz}, open(os.path.join(OUT, "wide.json"), "w"))
    # refused uploads
    st, d = upload(os.path.join(real, "karate.mtx"), "offsets=64&formats=ell&device=cpu")
    ok(st == 422 and "64-bit" in json.dumps(d), "offsets=64 with formats=ell: 422 naming the offsets", d)
    st, d = upload(os.path.join(real, "karate.mtx"), "offsets=64&formats=psell&device=cpu")
    ok(st == 201 and d.get("row_offsets") == 64 and "psell" in [f.get("format") for f in d.get("formats", [])],
       "offsets=64 with formats=psell: 201, the PSELL built (%s)" % [f.get("format") for f in d.get("formats", [])], d)
    call("DELETE", "/v1/matrices/%s" % d.get("id"))
    st, d = upload(os.path.join(real, "karate.mtx"), "offsets=32")
    ok(st == 400, "offsets=32: 400 (auto or 64)", d)
    st, d = call("GET", "/v1/matrices")
    ok(st == 200 and len(d.get("matrices", [])) == 4, "the refused uploads stored nothing", d)
else:
    ids = json.load(open(os.path.join(OUT, "wide.json")))["ids"]
    for k, mid in ids.items():
        st, d = call("GET", "/v1/matrices/%s" % mid)
        ok(st == 200 and d.get("row_offsets") == (32 if k == "p2d" else 64) and
           (k not in ("band", "p2d") or d.get("generated")),
           "after the restart %s is still held (%s-bit offsets%s)" % (k, d.get("row_offsets"),
                                                                     ", rebuilt from its recipe" if d.get("generated")
                                                                     else ""), d)

products(ids["mtx"], A, "float64", "bcsstk13 (Matrix Market)")
refusals(ids["mtx"], A, "bcsstk13")
R = sp.load_npz(json.load(open(os.path.join(OUT, "wide.json")))["npz"]).tocsr()
products(ids["npz"], R.astype(np.float32), "float32", "random 900 x 700 (.npz)")
op_t(ids["npz"], R, "random 900 x 700 (.npz)")
products(ids["band"], band(5000, 33), "float64", "generated band")
products(ids["p2d"], poisson2d(40).astype(np.float32), "float32", "generated 2-D Poisson")
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
    gpu_section()
tap.done()
