#!/usr/bin/env python3
"""cluster_solve.py URL NP MATRICES_DIR — solves on sharded matrices against SciPy.

Driven by tests/e2e/cluster_solve.sh on `mpirun -np NP spmvd` (CPU ranks;
GPU ranks with SPMV_CLUSTER_GPU=1).
Every rank runs the same Krylov loop on its rows (cluster/solve.c); this
checks the answers the way a user would, from the outside:

- the matrices: bcsstk13 (the shared real SPD one, 2003 rows, uploaded
  with shard=true), cage5, west0067 (non-symmetric: BiCGSTAB, GMRES),
  jagmesh7 (symmetric indefinite: MINRES), LFAT5 (SPD: CG with jacobi),
  each against spsolve; and a 2-D Poisson the daemon generates sharded
  (generate=poisson2d, read back as .npz for SciPy), plus the same
  Poisson whole on rank 0 for comparison;
- CG, BiCGSTAB, GMRES and MINRES, without a preconditioner and with
  jacobi (and block_jacobi, chebyshev: each rank's on its diagonal
  block), b drawn afresh (seed printed; SPMV_SEED repeats a run);
- each answer: the true residual ||b - A x|| / ||b|| computed here with
  SciPy is at most tol (when it says converged) and equals the relres it
  reports; x equals scipy.sparse.linalg.spsolve's within the bound the
  residual gives (20 tol cond(A), cond from the dense eigenvalues; the
  Poisson only: bcsstk13's cond ~1e10 makes that bound say nothing);
  "cluster" has NP ranks, each with its time split and the same
  iterations as the answer;
- the same solve on the whole Poisson (one process) takes about as many
  iterations (the ranks' sums round differently, nothing else);
- an x0, binary b and x, kernel auto, and an async job;
- bcsstk13 without a preconditioner does not converge in 300 CG
  iterations (neither does SciPy's): stop maxit, relres still the true one;
- refusals, each a 422 naming what: amg, ic0, ilu0, k = 2 right-hand
  sides, x_out, b as a resident vector, block_jacobi blocks straddling two
  ranks. TAP out.
"""
import io
import json
import os
import random
import struct
import sys
import time

import numpy as np
import scipy.io
import scipy.sparse
import scipy.sparse.linalg as sla

import tap
from tap import ok

URL, NP, MDIR = sys.argv[1], int(sys.argv[2]), sys.argv[3]
GPU = os.environ.get("SPMV_CLUSTER_GPU", "0") == "1"  # the shards on the ranks' GPUs
SEED = int(os.environ.get("SPMV_SEED", random.randrange(1 << 30)))
print("# seed %d" % SEED, flush=True)
rng = np.random.default_rng(SEED)


def call(method, path, body=None, ctype="application/json", accept=None):
    return tap.call(URL, method, path, body, ctype=ctype, accept=accept)


def upload_file(path, query):
    with open(path, "rb") as f:
        st, d = call("POST", "/v1/matrices?" + query, f.read(), ctype="application/octet-stream")
    return st, d


def fetch_npz(mid):
    st, raw = call("GET", "/v1/matrices/%s" % mid, accept="application/x-npz")
    return scipy.sparse.load_npz(io.BytesIO(raw)).tocsr() if st == 200 else None


def solve(mid, body):
    return call("POST", "/v1/matrices/%s/solve" % mid, body)


def true_relres(A, b, x):
    return float(np.linalg.norm(b - A @ x) / np.linalg.norm(b))


def check_cluster(d, what):
    # fused: every method on GPU shards of one host (the sums on the GPUs), else the hosts' loop
    fused = GPU
    ok(d.get("fused") is fused, "%s: \"fused\": %s" % (what, str(fused).lower()), {"fused": d.get("fused")})
    c = d.get("cluster", {})
    per = c.get("per_rank", [])
    fine = (c.get("ranks") == NP and len(per) == NP and [p.get("rank") for p in per] == list(range(NP))
            and all(p.get("iterations") == d.get("iterations") for p in per)
            and len({p.get("reductions") for p in per}) == 1 and per[0].get("reductions", 0) > 0
            and all(p[k] >= 0 for p in per for k in ("compute_ms", "exchange_ms", "reduce_ms", "total_ms"))
            and per[-1]["rows"][1] == d.get("_n") and per[0]["rows"][0] == 0
            and c.get("compute_ms") == max(p["compute_ms"] for p in per))
    return ok(fine, "%s: \"cluster\" reports %d ranks, each with its time split and the answer's %s iterations"
              % (what, NP, d.get("iterations")), json.dumps(c)[:600])


def check_answer(A, b, d, tol, what, x_ref=None, bound=None, want_converged=True):
    x = np.array(d.get("x", []), dtype=float)
    if x.shape != b.shape:
        return ok(False, what + ": x of %d values" % len(b), json.dumps(d)[:400])
    rr = true_relres(A, b, x)
    # b - A x itself rounds by about eps |A| |x| (summed in another order on the ranks): on an
    # ill-conditioned matrix at a small residual that is most of it
    noise = 64 * np.finfo(float).eps * np.linalg.norm(abs(A) @ abs(x)) / np.linalg.norm(b)
    conv = d.get("converged") is True
    good = (conv == want_converged and (not conv or rr <= tol * 1.001 + noise)
            and abs(rr - d.get("relres", -1)) <= 1e-6 * rr + noise)
    ok(good, "%s: %s after %d iterations, SciPy's true residual %.3g = reported %.3g%s"
       % (what, d.get("stop", {}).get("reason"), d.get("iterations", -1), rr, d.get("relres", -1),
          " <= tol" if conv else ""), json.dumps({k: v for k, v in d.items() if k != "x"})[:500])
    if x_ref is not None and conv:
        err = float(np.linalg.norm(x - x_ref) / np.linalg.norm(x_ref))
        ok(err <= bound, "%s: x equals spsolve's to %.2g (bound %.2g)" % (what, err, bound))
    d["_n"] = len(b)
    check_cluster(d, what)
    return d


# ------------------------------------------------------------ matrices
st, d = upload_file(os.path.join(MDIR, "real", "bcsstk13.mtx"), "shard=true&name=bcsstk13.mtx")
ok(st == 201 and d.get("sharded") and len(d.get("shards", [])) == NP and
   all(s.get("device", "").startswith("gpu") == GPU for s in d.get("shards", [])),
   "bcsstk13 uploads sharded over %d ranks, on their %s" % (NP, "GPUs" if GPU else "hosts"), d)
BC = d.get("id")
K = scipy.io.mmread(os.path.join(MDIR, "real", "bcsstk13.mtx")).tocsr()
G = 50
st, d = call("POST", "/v1/matrices?generate=poisson2d&n=%d&shard=true&name=poisson" % G)
ok(st == 201 and d.get("sharded"), "a %d x %d Poisson generated sharded" % (G, G), d)
PO, PSH = d.get("id"), d.get("shards", [])
st, d = call("POST", "/v1/matrices?generate=poisson2d&n=%d&shard=false&name=poisson-whole" % G)
ok(st == 201 and not d.get("sharded"), "the same Poisson whole on rank 0", d)
PW = d.get("id")
P = fetch_npz(PO)
ok(P is not None and P.shape == (G * G, G * G) and abs(P - P.T).max() == 0, "the Poisson read back as .npz: "
   "%s, symmetric" % (P.shape if P is not None else None,))
ev = np.linalg.eigvalsh(P.toarray())
COND = float(ev[-1] / ev[0])
print("# Poisson cond %.4g" % COND, flush=True)
ok(ev[0] > 0, "the Poisson is positive definite (cond %.4g)" % COND)

# ------------------------------------------------------------ Poisson: every method, none and jacobi
TOL = 1e-10
b = rng.uniform(-1, 1, G * G)
x_ref = scipy.sparse.linalg.spsolve(P.tocsc(), b)
bound = 20 * TOL * COND
for method in ("cg", "bicgstab", "gmres", "minres"):
    for pc in ("none", "jacobi"):
        body = {"method": method, "b": b.tolist(), "tol": TOL, "maxit": 5000, "preconditioner": pc}
        st, d = solve(PO, body)
        what = "Poisson, %s, %s" % (method, pc)
        if not ok(st == 200, what + ": 200", d):
            continue
        check_answer(P, b, d, TOL, what, x_ref, bound)
        st, w = solve(PW, dict(body, kernel="cpu.csr.omp"))
        iw, ish = w.get("iterations", -1), d.get("iterations", -2)
        ok(st == 200 and w.get("converged") and abs(iw - ish) <= 0.1 * iw + 3,
           "%s: %d iterations sharded, %d on the whole matrix (one process)" % (what, ish, iw), w)
for pc in ({"type": "block_jacobi", "block_size": 1}, {"type": "chebyshev", "degree": 3}):
    st, d = solve(PO, {"method": "cg", "b": b.tolist(), "tol": TOL, "maxit": 5000, "preconditioner": pc})
    what = "Poisson, cg, %s on each rank's block" % pc["type"]
    if ok(st == 200 and d.get("preconditioner") == pc["type"], what + ": 200", d):
        check_answer(P, b, d, TOL, what, x_ref, bound)
        ok(all(p["precond_ms"] > 0 for p in d["cluster"]["per_rank"]), what + ": every rank applied it")

# an x0, kernel auto
x0 = rng.uniform(-1, 1, G * G)
st, d = solve(PO, {"method": "cg", "b": b.tolist(), "x0": x0.tolist(), "tol": TOL, "kernel": "auto",
                   "preconditioner": "jacobi"})
if ok(st == 200, "Poisson, cg from an x0, kernel auto: 200", d):
    check_answer(P, b, d, TOL, "Poisson, cg from x0, auto", x_ref, bound)
    ok(abs(d.get("residual_history", [-1])[0] - true_relres(P, b, x0)) <= 1e-9,
       "the history starts at x0's residual (%.6g)" % true_relres(P, b, x0))

# binary: b in the body, x back as bytes, the report in X-SpMV-Solve
raw = struct.pack("<%dd" % (G * G), *b)
st, xb = call("POST", "/v1/matrices/%s/solve?method=bicgstab&tol=%g&preconditioner=jacobi" % (PO, TOL), raw,
              ctype="application/octet-stream", accept="application/octet-stream")
xbin = np.array(struct.unpack("<%dd" % (G * G), xb)) if st == 200 and len(xb) == 8 * G * G else None
ok(xbin is not None and true_relres(P, b, xbin) <= TOL * 1.001, "binary b and x: 200, x's true residual <= tol")

# async: a job whose result is the answer
st, d = solve(PO, {"method": "gmres", "b": b.tolist(), "tol": TOL, "async": True})
res = None
for _ in range(20 if st == 202 else 0):
    st2, j = call("GET", "/v1/jobs/%s?wait=5" % d.get("id"))
    if j.get("state") in ("done", "failed"):
        res = j
        break
ok(st == 202 and res is not None and res.get("state") == "done" and res.get("result", {}).get("converged"),
   "an async solve on the sharded matrix: a job that ends done and converged", res or d)

# a cancel: DELETE of the job stops every rank at the same iteration
st, d = solve(PO, {"method": "gmres", "restart": 2, "b": b.tolist(), "tol": 1e-14, "maxit": 1000000, "async": True})
jid, it = d.get("id"), -1
for _ in range(100):
    _, j = call("GET", "/v1/jobs/%s" % jid)
    it = j.get("iteration", -1)
    if it > 5:
        break
    time.sleep(0.05)
call("DELETE", "/v1/jobs/%s" % jid)
res = None
for _ in range(20):
    _, j = call("GET", "/v1/jobs/%s?wait=5" % jid)
    if j.get("state") in ("done", "failed"):
        res = j
        break
r = (res or {}).get("result", {})
ok(st == 202 and it > 5 and r.get("stop", {}).get("reason") == "cancelled"
   and all(p["iterations"] == r.get("iterations") for p in r.get("cluster", {}).get("per_rank", [{}])),
   "DELETE of a long solve's job: stopped cancelled, every rank at the same iteration (%s)" % r.get("iterations"),
   json.dumps(res)[:300] if res else d)
call("GET", "/v1/ready")

# ------------------------------------------------------------ more shared real matrices
# each sharded over the ranks and solved by a method that suits it, against spsolve's x within
# 20 tol cond(A) (cond from the dense matrix): cage5 and west0067 (non-symmetric, cond 15 and 130),
# jagmesh7 (symmetric indefinite, cond 1.2e4: MINRES), LFAT5 (SPD, cond 1.4e8: CG with jacobi)
# (west0067 stagnates under restarted GMRES(30), SciPy's too: restart = n, full GMRES)
REAL_CASES = (("cage5.mtx", ("bicgstab", "gmres"), "none"), ("west0067.mtx", ("gmres",), "none"),
              ("jagmesh7.mtx", ("minres",), "none"), ("LFAT5.mtx", ("cg",), "jacobi"))
for name, methods, pc in REAL_CASES:
    A = scipy.io.mmread(os.path.join(MDIR, "real", name)).tocsr().astype(float)
    st, d = upload_file(os.path.join(MDIR, "real", name), "shard=true&name=" + name)
    if not ok(st == 201 and d.get("sharded") and len(d.get("shards", [])) == NP,
              "%s (%d rows) uploads sharded over %d ranks" % (name, A.shape[0], NP), d):
        continue
    mid, cond = d.get("id"), float(np.linalg.cond(A.toarray()))
    br = rng.uniform(-1, 1, A.shape[0])
    xr = scipy.sparse.linalg.spsolve(A.tocsc(), br)
    for method in methods:
        body = {"method": method, "b": br.tolist(), "tol": TOL, "maxit": 20000, "preconditioner": pc}
        if method == "gmres":
            body["restart"] = A.shape[0]
        st, d = solve(mid, body)
        what = "%s, %s, %s" % (name, method, pc)
        if ok(st == 200, what + ": 200", d):
            check_answer(A, br, d, TOL, what, xr, 20 * TOL * cond)
    call("DELETE", "/v1/matrices/%s" % mid)

# ------------------------------------------------------------ bcsstk13
bk = rng.uniform(-1, 1, K.shape[0])
# CG with Jacobi converges on it (SciPy's in ~1500 iterations); BiCGSTAB's rho = r0·r may vanish first
# on so ill-conditioned a matrix (SciPy's too, for some b): a breakdown is then a fair answer
for method in ("cg", "bicgstab"):
    st, d = solve(BC, {"method": method, "b": bk.tolist(), "tol": 1e-8, "maxit": 10000, "preconditioner": "jacobi"})
    what = "bcsstk13, %s, jacobi" % method
    if ok(st == 200 and (method == "cg" or d.get("stop", {}).get("reason") in ("converged", "breakdown")),
          what + ": 200, %s" % d.get("stop", {}).get("reason"), d):
        check_answer(K, bk, d, 1e-8, what, want_converged=method == "cg" or d.get("converged") is True)
st, d = solve(BC, {"method": "cg", "b": bk.tolist(), "tol": 1e-8, "maxit": 300})
if ok(st == 200, "bcsstk13, cg, none, maxit 300: 200", d):
    check_answer(K, bk, d, 1e-8, "bcsstk13, cg, none (too ill-conditioned for 300 iterations)", want_converged=False)
    ok(d.get("stop", {}).get("reason") == "maxit" and d.get("iterations") == 300, "... stops at maxit 300", d.get("stop"))
st, d = solve(BC, {"method": "gmres", "b": bk.tolist(), "tol": 1e-8, "maxit": 200, "restart": 20,
                   "preconditioner": {"type": "chebyshev", "degree": 2}})
if ok(st == 200, "bcsstk13, gmres(20), chebyshev, maxit 200: 200", d):
    check_answer(K, bk, d, 1e-8, "bcsstk13, gmres(20), chebyshev", want_converged=d.get("converged") is True)

# ------------------------------------------------------------ refusals
bl = b.tolist()
for pc in ("amg", "ic0", "ilu0"):
    st, d = solve(PO, {"b": bl, "preconditioner": pc})
    msg = d.get("error", {}).get("message", "")
    ok(st == 422 and pc in msg and "jacobi" in msg and "chebyshev" in msg,
       "preconditioner %s on a sharded matrix: 422 naming it and what is supported" % pc, d)
st, d = solve(PO, {"b": [bl, bl]})
ok(st == 422 and "right-hand sides" in d.get("error", {}).get("message", ""), "k = 2 right-hand sides: 422", d)
st, v = call("POST", "/v1/vectors", {"like": PO, "side": "rows", "fill": 1.0})
V = v.get("id")
st, d = solve(PO, {"b": bl, "x_out": {"vector": V}})
ok(st == 422 and "x_out" in d.get("error", {}).get("message", ""), "x_out on a sharded matrix: 422 naming x_out", d)
st, d = solve(PO, {"b": {"vector": V}})
ok(st == 422 and "`b`" in d.get("error", {}).get("message", ""), "b as a resident vector: 422 naming b", d)
call("DELETE", "/v1/vectors/%s" % V)
rows = [s["rows"][1] - s["rows"][0] for s in PSH]
bs = next((q for q in (2, 3, 4, 5, 6, 7, 8) if (G * G) % q == 0 and any(r % q for r in rows)), None)
if bs:
    st, d = solve(PO, {"b": bl, "preconditioner": {"type": "block_jacobi", "block_size": bs}})
    ok(st == 422 and "straddle" in d.get("error", {}).get("message", ""),
       "block_jacobi with blocks of %d rows across ranks holding %s rows: 422" % (bs, rows), d)
else:
    tap.skip("every block size dividing the rows tiles every rank's rows here (%s)" % rows)
if GPU:
    st, d = solve(PO, {"b": bl, "kernel": "cpu.csr.omp"})
    ok(st == 409, "a CPU kernel on GPU shards: 409", d)
else:
    st, d = solve(PO, {"b": bl, "kernel": "gpu.csr.vector"})
    ok(st == 409, "a GPU kernel on host shards: 409", d)

for m in (BC, PO, PW):
    call("DELETE", "/v1/matrices/%s" % m)
tap.done()
