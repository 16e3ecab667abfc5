#!/usr/bin/env python3
"""bench_solve_cpu.py URL [URL...] — a CPU solve on the daemon against SciPy's own, in the same run.

Part of `make bench-api` (tools/bench-api.sh). Reports, never asserts
(beyond both solvers converging).

The matrix (--matrix, default the shared bcsstk13.mtx) is uploaded as
float64 on the CPU of each daemon; b = A·1. Jacobi-preconditioned CG to
--tol runs --reps times each way, the daemons and SciPy taking turns
within each rep so that the load of a shared host falls on all alike
(medians; one warm-up round not counted):

- spmvd: `Client.solve` (synchronous, b and x in binary) with --kernel
  (default auto); the daemon's own `time.total_ms`, its split into
  `spmv_ms` and `vector_ms`, the iterations, and the client's wall time;
- SciPy: `scipy.sparse.linalg.cg` on the CSR in this process with the same
  Jacobi preconditioner (a LinearOperator dividing by the diagonal), the
  same relative tolerance, zero x0; its wall time and iterations.

Several URLs compare daemons in one run (--labels names them), e.g. one
started with --serial-below 0 (every host loop on the whole OpenMP team,
as before issue 28) and one with the default. The ratio spmvd / SciPy is
of the daemon's solve time (the work both do) and of the client's wall
time (plus the round trip). Markdown to stdout; --json FILE for the
numbers.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import scipy.io
import scipy.sparse.linalg as sla

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "clients", "python"))
import spmvd  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("urls", nargs="+")
ap.add_argument("--labels", default="", help="comma-separated names of the daemons (default: their URLs)")
ap.add_argument("--matrix", default=os.path.join(HERE, "..", "..", "shared", "matrices", "real", "bcsstk13.mtx"))
ap.add_argument("--tol", type=float, default=1e-8)
ap.add_argument("--maxit", type=int, default=20000)
ap.add_argument("--reps", type=int, default=5)
ap.add_argument("--kernel", default="auto")
ap.add_argument("--json", default="")
a = ap.parse_args()
labels = a.labels.split(",") if a.labels else a.urls


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else 0.5 * (v[len(v) // 2 - 1] + v[len(v) // 2])


M = scipy.io.mmread(a.matrix).tocsr().astype(np.float64)
n = M.shape[0]
b = M @ np.ones(n)
d = M.diagonal()
P = sla.LinearOperator(M.shape, matvec=lambda v: np.ravel(v) / d, dtype=np.float64)
tol_kw = "rtol" if "rtol" in sla.cg.__code__.co_varnames else "tol"
relres = lambda x: float(np.linalg.norm(M @ x - b) / np.linalg.norm(b))  # noqa: E731


def daemon_solve(c, A):
    t0 = time.perf_counter()
    res = c.solve(A, b, tol=a.tol, maxit=a.maxit, preconditioner="jacobi", kernel=a.kernel)
    wall = (time.perf_counter() - t0) * 1e3
    t = res.raw["time"]
    return {"wall_ms": wall, "total_ms": t["total_ms"], "spmv_ms": t["spmv_ms"], "vector_ms": t["vector_ms"],
            "iterations": res.iterations, "converged": res.converged, "kernel": res.raw.get("kernel"),
            "relres": relres(res.x)}


def scipy_solve():
    its = [0]

    def count(_xk):
        its[0] += 1
    t0 = time.perf_counter()
    x, info = sla.cg(M, b, M=P, atol=0.0, maxiter=a.maxit, callback=count, **{tol_kw: a.tol})
    return {"ms": (time.perf_counter() - t0) * 1e3, "iterations": its[0], "converged": info == 0, "relres": relres(x)}


clients = [spmvd.Client(u, timeout=600) for u in a.urls]
mats = [c.upload(M, name=os.path.basename(a.matrix), dtype="float64", device="cpu") for c in clients]
runs = [[] for _ in clients]
scipy_runs = []
for i in range(a.reps + 1):  # round 0 warms up
    for j, (c, A) in enumerate(zip(clients, mats)):
        r = daemon_solve(c, A)
        if i:
            runs[j].append(r)
    r = scipy_solve()
    if i:
        scipy_runs.append(r)
for c, A in zip(clients, mats):
    A.delete()

sc = {"ms": median([r["ms"] for r in scipy_runs]), "iterations": scipy_runs[0]["iterations"],
      "converged": all(r["converged"] for r in scipy_runs), "relres": scipy_runs[0]["relres"]}
out = {"matrix": os.path.basename(a.matrix), "rows": n, "nnz": int(M.nnz), "tol": a.tol, "reps": a.reps,
       "cpus": os.cpu_count(), "scipy": sc, "daemons": []}
print("| daemon | iterations (spmvd, SciPy) | spmvd solve ms (spmv + vector) | client wall ms | SciPy ms "
      "| spmvd / SciPy (solve, wall) | kernel | relres (spmvd, SciPy) |")
print("| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |")
for label, rs in zip(labels, runs):
    dd = {"label": label, "kernel": rs[0]["kernel"], "iterations": rs[0]["iterations"],
          "converged": all(r["converged"] for r in rs), "relres": rs[0]["relres"],
          "total_ms": median([r["total_ms"] for r in rs]), "spmv_ms": median([r["spmv_ms"] for r in rs]),
          "vector_ms": median([r["vector_ms"] for r in rs]), "wall_ms": median([r["wall_ms"] for r in rs])}
    dd["ratio_total"], dd["ratio_wall"] = dd["total_ms"] / sc["ms"], dd["wall_ms"] / sc["ms"]
    out["daemons"].append(dd)
    print("| %s | %d, %d | %.1f (%.1f + %.1f) | %.1f | %.1f | %.2f, %.2f | %s | %.1e, %.1e |" % (
        label, dd["iterations"], sc["iterations"], dd["total_ms"], dd["spmv_ms"], dd["vector_ms"], dd["wall_ms"],
        sc["ms"], dd["ratio_total"], dd["ratio_wall"], dd["kernel"], dd["relres"], sc["relres"]))
print()
print("%s (%d rows, %d non-zeros): Jacobi PCG to tol %g, x0 = 0, b = A·1; %d reps (medians; the daemons and SciPy "
      "take turns in each, one warm-up round not counted); %d CPUs, load average %s." % (
          out["matrix"], n, out["nnz"], a.tol, a.reps, out["cpus"], " ".join("%.1f" % v for v in os.getloadavg())))
if a.json:
    json.dump(out, open(a.json, "w"), indent=1)
