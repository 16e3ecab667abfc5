#!/usr/bin/env python3
"""solve_scipy.py URL MATRICES_DIR — the daemon's solvers against SciPy's.

For every square shared real matrix of at most 2500 rows: read it with
scipy.io.mmread, draw b (seeded, printed), and solve A x = b with the daemon
(POST /v1/matrices/{id}/solve, kernel cpu.csr.omp) and with SciPy
(scipy.sparse.linalg.cg on the SPD ones, gmres(restart 50) and bicgstab on all),
each without a preconditioner and with Jacobi (SciPy gets M = diag(A)^-1 as a
LinearOperator; a matrix with a zero on its diagonal must instead be refused
by the daemon with a 400 naming the row), both to rtol 1e-10 within 1500
iterations. A preconditioner changes the path, not the solution: the
comparison below holds for both. When both converge, x must agree: the two answers each
have a residual under 1e-10·||b||, so ||x_d - x_s|| / ||x_s|| is at most
about 2e-10·cond(A); the bound used is 20·cond(A)·1e-10 (cond from the dense
2-norm condition number), and matrices with cond(A) > 1e9 are compared by
their residuals only (the x difference there says nothing). When only one
converges, the other's stop reason must not claim convergence.

Most shared matrices are too ill-conditioned (or singular) for either side
to reach 1e-10 in 1500 iterations, which leaves few solutions to compare.
So each matrix is also solved shifted to strict diagonal dominance,
S = A + diag(sum_j |a_ij| + 1): S keeps A's off-diagonal entries, is
symmetric positive definite when A is symmetric (CG runs on it too), and
every row's margin |s_ii| - sum_{j!=i} |s_ij| >= a_ii + |a_ii| + 1 >= 1, so
Varah's bound gives ||S^-1||_inf <= 1 / min margin <= 1. Both answers
having ||r||_2 <= 1.01e-10 ||b||_2 (checked), ||x_d - x_s||_inf <=
||S^-1||_inf (||r_d||_inf + ||r_s||_inf) <= 2.02e-10 ||b||_2 / min margin:
a rigorous bound, with no condition number to estimate. TAP out.
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
COMPARED = {"none": 0, "jacobi": 0}


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


def scipy_solve(method, a, b, dinv=None):
    kw = {"rtol": 1e-10, "atol": 0.0, "maxiter": 1500}
    if dinv is not None:
        kw["M"] = sla.LinearOperator(a.shape, matvec=lambda v: dinv * v.ravel(), dtype=np.float64)
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


def shifted_case(name, a, b):
    """The solves on S = A + diag(sum_j |a_ij| + 1), compared by Varah's bound."""
    absrow = np.asarray(abs(a).sum(axis=1)).ravel()
    s = (a + scipy.sparse.diags(absrow + 1.0)).tocsr()
    diag = s.diagonal()
    off = np.asarray(abs(s).sum(axis=1)).ravel() - np.abs(diag)
    margin = float(np.min(np.abs(diag) - off))
    sym = abs(s - s.T).max() == 0
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "spmvd-shift-%d.mtx" % os.getpid())
    scipy.io.mmwrite(path, s, precision=17)
    with open(path, "rb") as f:
        st, d = post("/v1/matrices?device=cpu", f.read(), "text/plain")
    os.unlink(path)
    if not ok(st == 201 and margin >= 1 - 1e-9, "%s shifted to diagonal dominance (margin %.3g) uploads" %
              (name, margin)):
        return
    bound = 2.02e-10 * np.linalg.norm(b) / margin
    for method in (["cg"] if sym else []) + ["bicgstab", "gmres"]:
        for pre in ("none", "jacobi"):
            what = "%s shifted %s%s" % (name, method, "+jacobi" if pre == "jacobi" else "")
            st, r = post("/v1/matrices/%s/solve" % d["id"], {"method": method, "b": b.tolist(), "tol": 1e-10,
                                                            "maxit": 1500, "restart": 50, "kernel": "cpu.csr.omp",
                                                            "preconditioner": pre})
            if not ok(st == 200, "%s: 200 (%s)" % (what, r.get("error", ""))):
                continue
            xs, sconv, sres = scipy_solve(method, s, b, 1.0 / diag if pre == "jacobi" else None)
            xd = np.array(r["x"])
            dres = np.linalg.norm(b - s @ xd) / np.linalg.norm(b)
            dconv = r["stop"]["reason"] == "converged"
            ok(not dconv or dres <= 1.01e-10, "%s: converged means ||b - Sx|| / ||b|| <= tol (%.2e, checked here)" %
               (what, dres))
            if not (dconv and sconv):
                # a shifted matrix can still be badly scaled (bcsstk13's rows span 10 orders of magnitude) and
                # plain BiCGSTAB can meet r0·r = 0 (olm1000: NumPy's textbook loop does too)
                print("# %s: daemon %s (%.2e), scipy %s (%.2e): residuals compared only" %
                      (what, r["stop"]["reason"], dres, "converged" if sconv else "not converged", sres))
                continue
            COMPARED[pre] += 1
            diff = float(np.max(np.abs(xd - xs)))
            ok(diff <= bound, "%s: ||x - x_scipy||_inf = %.2e <= %.2e (%d its)" % (what, diff, bound, r["iterations"]))

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
    shifted_case(name, a, b)
    diag = a.diagonal()
    zero_rows = np.flatnonzero(diag == 0)
    for method, pre in [(m, p) for m in (["cg"] if spd else []) + ["bicgstab", "gmres"] for p in ("none", "jacobi")]:
        st, r = post("/v1/matrices/%s/solve" % mid, {"method": method, "b": b.tolist(), "tol": 1e-10,
                                                     "maxit": 1500, "restart": 50, "kernel": "cpu.csr.omp",
                                                     "preconditioner": pre})
        method_name = method
        method = "%s+%s" % (method, pre) if pre == "jacobi" else method
        if pre == "jacobi" and len(zero_rows):
            msg = r.get("error", {}).get("message", "")
            ok(st == 400 and ("row %d (0-based)" % zero_rows[0]) in msg,
               "%s %s: a zero diagonal (row %d, 0-based) is refused with a 400 naming it (%s)" %
               (name, method, zero_rows[0], msg))
            continue
        if not ok(st == 200, "%s %s: 200 (%s)" % (name, method, r.get("error", ""))):
            continue
        xs, sconv, sres = scipy_solve(method_name, a, b, 1.0 / diag if pre == "jacobi" else None)
        xd = np.array(r["x"])
        dres = np.linalg.norm(b - a @ xd) / np.linalg.norm(b)
        dconv = r["stop"]["reason"] == "converged"
        ok(not dconv or dres <= 1.01e-10, "%s %s: converged means ||b-Ax||/||b|| <= tol (%.2e)" % (name, method, dres))
        ok(abs(r["relres"] - dres) <= 1e-6 * max(dres, 1e-300) + 1e-15,
           "%s %s: the reported relres is the true one (%.3e vs %.3e)" % (name, method, r["relres"], dres))
        if dconv and sconv and cond <= 1e9:
            COMPARED[pre] += 1
            diff = np.linalg.norm(xd - xs) / np.linalg.norm(xs)
            ok(diff <= 20 * cond * 1e-10, "%s %s: x agrees with SciPy's (%.2e <= %.2e, cond %.1e, %d its)" %
               (name, method, diff, 20 * cond * 1e-10, cond, r["iterations"]))
        else:
            print("# %s %s: daemon %s (%.2e), scipy %s (%.2e), cond %.1e: residuals compared only" %
                  (name, method, r["stop"]["reason"], dres, "converged" if sconv else "not converged", sres, cond))
ok(COMPARED["none"] >= 25 and COMPARED["jacobi"] >= 25, "x compared with SciPy's in %d solves without a "
   "preconditioner and %d with Jacobi (25 each at least)" % (COMPARED["none"], COMPARED["jacobi"]))
print("1..%d" % T)
sys.exit(1 if FAILED else 0)
