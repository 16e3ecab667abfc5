#!/usr/bin/env python3
"""solve_scipy.py URL MATRICES_DIR — the daemon's solvers against SciPy's.

For every square shared real matrix of at most 2500 rows: read it with
scipy.io.mmread, draw b (seeded, printed), and solve A x = b with the daemon
(POST /v1/matrices/{id}/solve, kernel cpu.csr.omp) and with SciPy
(scipy.sparse.linalg.cg on the SPD ones, gmres(restart 50) and bicgstab on all),
both to rtol 1e-10 within 1500 iterations. When both converge, x must agree: the two answers each
have a residual under 1e-10·||b||, so ||x_d - x_s|| / ||x_s|| is at most
about 2e-10·cond(A); the bound used is 20·cond(A)·1e-10 (cond from the dense
2-norm condition number), and matrices with cond(A) > 1e9 are compared by
their residuals only (the x difference there says nothing). When only one
converges, the other's stop reason must not claim convergence. TAP out.
"""
import json
import os
import random
import sys
import urllib.request

import numpy as np
import scipy.io
import scipy.sparse
import scipy.sparse.linalg as sla

URL, MDIR = sys.argv[1], sys.argv[2]
SEED = int(os.environ.get("SPMV_SEED", random.randrange(1 << 30)))
print("# seed %d" % SEED)
rng = np.random.default_rng(SEED)
T = 0
FAILED = 0


def ok(cond, what):
    global T, FAILED
    T += 1
    if not cond:
        FAILED += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", T, what), flush=True)
    return cond


def post(path, body, ctype="application/json"):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(URL + path, data=data, headers={"Content-Type": ctype}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def scipy_solve(method, a, b):
    kw = {"rtol": 1e-10, "atol": 0.0, "maxiter": 1500}
    try:
        if method == "cg":
            x, info = sla.cg(a, b, **kw)
        elif method == "bicgstab":
            x, info = sla.bicgstab(a, b, **kw)
        else:
            x, info = sla.gmres(a, b, restart=50, **kw)
    except TypeError:  # SciPy < 1.12 names rtol tol
        kw["tol"] = kw.pop("rtol")
        x, info = (sla.cg if method == "cg" else sla.bicgstab if method == "bicgstab" else
                   (lambda A, B, **k: sla.gmres(A, B, restart=50, **k)))(a, b, **kw)
    res = np.linalg.norm(b - a @ x) / np.linalg.norm(b)
    return x, info == 0 and res <= 1.01e-10, res


for name in sorted(os.listdir(MDIR)):
    if not name.endswith(".mtx"):
        continue
    a = scipy.sparse.csr_matrix(scipy.io.mmread(os.path.join(MDIR, name)), dtype=np.float64)
    n = a.shape[0]
    if a.shape[0] != a.shape[1] or n > 2500:
        continue
    dense = a.toarray()
    sym = np.allclose(dense, dense.T)
    spd = sym and np.all(np.linalg.eigvalsh(dense) > 0)
    cond = np.linalg.cond(dense)
    with open(os.path.join(MDIR, name), "rb") as f:
        st, d = post("/v1/matrices?device=cpu", f.read(), "text/plain")
    if not ok(st == 201, "%s uploads" % name):
        continue
    mid = d["id"]
    b = rng.uniform(-1, 1, n)
    for method in (["cg"] if spd else []) + ["bicgstab", "gmres"]:
        xs, sconv, sres = scipy_solve(method, a, b)
        st, r = post("/v1/matrices/%s/solve" % mid, {"method": method, "b": b.tolist(), "tol": 1e-10,
                                                     "maxit": 1500, "restart": 50, "kernel": "cpu.csr.omp"})
        if not ok(st == 200, "%s %s: 200 (%s)" % (name, method, r.get("error", ""))):
            continue
        xd = np.array(r["x"])
        dres = np.linalg.norm(b - a @ xd) / np.linalg.norm(b)
        dconv = r["stop"]["reason"] == "converged"
        ok(not dconv or dres <= 1.01e-10, "%s %s: converged means ||b-Ax||/||b|| <= tol (%.2e)" % (name, method, dres))
        ok(abs(r["relres"] - dres) <= 1e-6 * max(dres, 1e-300) + 1e-15,
           "%s %s: the reported relres is the true one (%.3e vs %.3e)" % (name, method, r["relres"], dres))
        if dconv and sconv and cond <= 1e9:
            diff = np.linalg.norm(xd - xs) / np.linalg.norm(xs)
            ok(diff <= 20 * cond * 1e-10, "%s %s: x agrees with SciPy's (%.2e <= %.2e, cond %.1e, %d its)" %
               (name, method, diff, 20 * cond * 1e-10, cond, r["iterations"]))
        else:
            print("# %s %s: daemon %s (%.2e), scipy %s (%.2e), cond %.1e: residuals compared only" %
                  (name, method, r["stop"]["reason"], dres, "converged" if sconv else "not converged", sres, cond))
print("1..%d" % T)
sys.exit(1 if FAILED else 0)
