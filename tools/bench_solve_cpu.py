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

With --wall N it measures instead what the client adds to a long solve
(issue 28's "Python solve" goal: wall time within the daemon's own solve
time + 5 ms + b and x at the binary rate): a 2-D Poisson matrix of N^2
rows that the daemon generates, CG for exactly --maxit iterations (tol
1e-14, which it does not reach), the client's wall time against the daemon's `time.total_ms`.
--client-path DIR times another copy of the Python client (the one before
issue 28: a job polled every 50 ms backing off to 1 s, b and x as JSON).

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
_cp = sys.argv[sys.argv.index("--client-path") + 1] if "--client-path" in sys.argv else \
    os.path.join(HERE, "..", "clients", "python")
sys.path.insert(0, _cp)
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
ap.add_argument("--wall", type=int, default=0, help="N: the client's overhead on an N^2-row Poisson CG instead")
ap.add_argument("--client-path", default="", help="the directory of the spmvd package to time (default this tree's)")
a = ap.parse_args()
labels = a.labels.split(",") if a.labels else a.urls

def median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else 0.5 * (v[len(v) // 2 - 1] + v[len(v) // 2])


def wall_bench():
    """The client's wall time around a long daemon solve, against the daemon's own time."""
    rows = []
    for label, url in zip(labels, a.urls):
        c = spmvd.Client(url, timeout=600)
        A = c.generate("poisson2d", a.wall)
        b = np.ones(A.shape[0])
        walls, totals = [], []
        for i in range(a.reps + 1):
            t0 = time.perf_counter()
            res = c.solve(A, b, tol=1e-14, maxit=a.maxit, kernel=a.kernel, progress=None)
            wall = (time.perf_counter() - t0) * 1e3
            if i:
                walls.append(wall)
                totals.append(res.raw["time"]["total_ms"] + res.raw["time"].get("queue_ms", 0.0))
        A.delete()
        rows.append((label, A.shape[0], res.iterations, median(walls), median(totals)))
    print("| client, daemon | rows | iterations | client wall ms | daemon solve ms | wall - solve ms |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for label, n, its, w, t in rows:
        print("| %s | %d | %d | %.1f | %.1f | %.1f |" % (label, n, its, w, t, w - t))
    print()
    print("CG (no preconditioner) for %d iterations, tol 1e-14 (not reached), kernel %s; %d reps (medians, one warm-up); client %s; "
          "load average %s." % (a.maxit, a.kernel, a.reps, os.path.abspath(_cp),
                                " ".join("%.1f" % v for v in os.getloadavg())))


if a.wall:
    wall_bench()
    sys.exit(0)


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
