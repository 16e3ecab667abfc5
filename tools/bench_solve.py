#!/usr/bin/env python3
"""bench_solve.py — time to solution, `make bench-solve` (issue 29).

For each problem (tools/solve_problems.py: 3-D Poisson, log-normal
finite-volume diffusion, P2 elasticity with rigid-body modes) it reports
the time to ||b - A x|| / ||b|| <= 1e-8 and the iterations of:

  - every preconditioner of the daemon on its GPU (or its CPU), built by
    POST .../preconditioners (setup_s, the request's wall time) and named
    by a binary solve (solve_s, the request's wall time: b in, x out);
    total_s = setup_s + solve_s; a second solve with the same object
    (again_s) shows the reuse; the matrix's upload and the kernel's tuning
    are reported apart (upload_s, tune_s), paid once per matrix. Every
    request goes through the project's Python client (clients/python, the
    bundle's client/: what a scientist's script would use; one keep-alive
    connection, b sent from the array's buffer and x received into a new
    one), and the part of solve_s the daemon did not spend (its report's
    time.total_ms) is the transfer (transfer_s);
  - CuPy's cg on the same GPU, no preconditioner and Jacobi
    (tools/bench_solve_cupy.py under CuPy's Python; transfer_s is the CSR
    and b copied to the GPU);
  - PyAMG's smoothed aggregation on the host's cores (setup_s, solve_s);
  - k = 8 right-hand sides in one solve (CG in lockstep) against one, with
    Jacobi and with the AMG object, on the problems up to 2 M rows.

Every x is checked here: the true relative residual is recomputed with
SciPy, and a row whose x misses the tolerance says so. Writes
results.jsonl and solve.md (the tables) into OUTDIR.

    python3 tools/bench_solve.py URL OUTDIR [--poisson N] [--fv N] [--elast N]
        [--cupy PYTHON] [--device gpu0] [--pyamg-max-rows R] [--shm]

With --shm (a daemon with allow_shm on this host) b and x go through
shared memory (SharedArrays.solve): no vector crosses the socket.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# the client beside this file in the bundle (client/), else the tree's
sys.path[:0] = [HERE, os.path.join(HERE, "client"), os.path.join(HERE, "..", "clients", "python")]
import solve_problems  # noqa: E402
import spmvd  # noqa: E402

TOL = 1e-8
MAXIT = 20000


def upload(cl, a, device):
    t0 = time.perf_counter()
    m = cl.upload(a, name="bench_solve", device=device)
    return m, time.perf_counter() - t0


def relres(a, b, x):
    return float(np.linalg.norm(b - a @ x) / np.linalg.norm(b))


def daemon_solve(cl, m, b, pc, method="cg", regions=None):
    """A binary solve of b ((n,) or (n, k): k columns in lockstep): (wall s, report, x as b's shape).

    With `regions` (a dict, --shm) b and x go through a SharedArrays of the
    matrix for b's columns (made once, kept in the dict): b is copied into
    its x (in the wall time: a user puts b there), x comes back as a view.
    """
    k = 1 if b.ndim == 1 else b.shape[1]
    if regions is not None and k not in regions:
        regions[k] = cl.shared_arrays(m, k=k)
    if regions is not None:
        regions[k].y[...] = np.nan  # poisoned: an x the daemon did not write shows in the residual
    t0 = time.perf_counter()
    if regions is not None:
        regions[k].x[...] = b
        res = regions[k].solve(method=method, tol=TOL, maxit=MAXIT, preconditioner=pc)
    else:
        res = cl.solve(m, b, method=method, tol=TOL, maxit=MAXIT, preconditioner=pc)
    wall = time.perf_counter() - t0
    return wall, res.raw, np.array(res.x)


def daemon_ms(rep):
    return rep.get("time", {}).get("total_ms")


def daemon_rows(cl, name, a, b, device, preconds, shm=False, k_rows_too=True):
    """Every preconditioner of `preconds` ([(label, spec or None)]) on the daemon."""
    m, up = upload(cl, a, device)
    regions = {} if shm else None
    t0 = time.perf_counter()
    cl.tune(m)
    tune = time.perf_counter() - t0
    rows, pids = [], {}
    for label, spec in preconds:
        try:
            setup, pid = 0.0, spec
            if isinstance(spec, dict):
                t0 = time.perf_counter()
                pid = cl.preconditioner(m, device=device, **spec)["id"]
                setup = time.perf_counter() - t0
                pids[label] = pid
            method = "bicgstab" if label.startswith("ilu0") else "cg"
            wall, rep, x = daemon_solve(cl, m, b, pid or "none", method, regions)
            again = daemon_solve(cl, m, b, pid or "none", method, regions)[0] if isinstance(spec, dict) else None
            ms = daemon_ms(rep)
            rows.append({"problem": name, "who": "spmvd " + device + (" (shm)" if shm else ""),
                         "method": method + " + " + label,
                         "iterations": rep["iterations"], "setup_s": setup, "solve_s": wall,
                         "total_s": setup + wall, "again_s": again, "relres": relres(a, b, x),
                         "converged": rep["converged"], "upload_s": up, "tune_s": tune,
                         "kernel": rep.get("kernel"), "daemon_solve_ms": ms,
                         "transfer_s": None if ms is None else max(wall - ms / 1e3, 0.0), "fused": rep.get("fused")})
        except Exception as e:  # a failed row is reported, the rest still run
            rows.append({"problem": name, "who": "spmvd " + device, "method": label, "error": str(e)[:300]})
        print(json.dumps(rows[-1]), flush=True)
    if a.shape[0] <= 2_000_000 and k_rows_too:  # k = 8 at once, against one (the large problem would spend the budget)
        rows += k_rows(cl, name, m, a, b, "jacobi", "jacobi", regions)
        if "amg" in pids:
            rows += k_rows(cl, name, m, a, b, pids["amg"], "amg", regions)
    for r in (regions or {}).values():
        r.close()
    cl.delete(m)
    return rows


def k_rows(cl, name, m, a, b, pc, label, regions=None, k=8):
    """k right-hand sides at once (CG in lockstep) against one, same preconditioner."""
    rng = np.random.default_rng(8)
    bk = np.column_stack([b] + [rng.uniform(-1, 1, a.shape[0]) for _ in range(k - 1)])
    try:
        daemon_solve(cl, m, b, pc, regions=regions)  # warm: the k = 1 kernel and the preconditioner are built
        one = daemon_solve(cl, m, b, pc, regions=regions)
        daemon_solve(cl, m, bk, pc, regions=regions)  # warm: auto's choice for k columns
        wall, rep, x = daemon_solve(cl, m, bk, pc, regions=regions)
        worst = max(relres(a, bk[:, j], x[:, j]) for j in range(k))
        r = {"problem": name, "who": "spmvd" + (" (shm)" if regions is not None else ""),
             "method": "cg + %s, k = %d at once (lockstep %s)" % (label, k,
             rep.get("lockstep")), "iterations": rep.get("lockstep_iterations", rep["iterations"]), "setup_s": 0.0,
             "solve_s": wall, "total_s": wall, "relres": worst, "k1_s": one[0], "ratio_to_k1": wall / one[0],
             "kernel": rep.get("kernel"), "fused": rep.get("fused"),
             "daemon_ms": daemon_ms(rep), "k1_daemon_ms": daemon_ms(one[1])}
    except Exception as e:
        r = {"problem": name, "who": "spmvd", "method": "k = %d at once" % k, "error": str(e)[:300]}
    print(json.dumps(r), flush=True)
    return [r]


def cupy_rows(py, name, a, b, tmp, methods):
    if not py or not os.path.exists(py):
        return []
    path = os.path.join(tmp, "cupy_problem.npz")
    np.savez(path, data=a.data, indices=a.indices, indptr=a.indptr, shape=np.array(a.shape), b=b)
    helper = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_solve_cupy.py")
    out = subprocess.run([py, helper, path, str(TOL), str(MAXIT), ",".join(methods)], capture_output=True, text=True,
                         timeout=900)
    os.unlink(path)
    rows = []
    for line in out.stdout.splitlines():
        r = json.loads(line)
        x = np.load(r.pop("x_path"))
        r.update(problem=name, relres=relres(a, b, x))
        rows.append(r)
        print(json.dumps(r), flush=True)
    if out.returncode:
        rows.append({"problem": name, "who": "CuPy", "method": "cg", "error": out.stderr[-300:]})
    return rows


def pyamg_rows(name, a, b, modes, max_rows):
    try:
        import pyamg
    except ImportError:
        return [{"problem": name, "who": "PyAMG", "method": "SA + cg", "error": "pyamg is not installed"}]
    if a.shape[0] > max_rows:
        return [{"problem": name, "who": "PyAMG", "method": "SA + cg",
                 "error": "not run: %d rows > --pyamg-max-rows %d" % (a.shape[0], max_rows)}]
    t0 = time.perf_counter()
    ml = pyamg.smoothed_aggregation_solver(a, B=modes) if modes is not None else pyamg.smoothed_aggregation_solver(a)
    setup = time.perf_counter() - t0
    res = []
    t0 = time.perf_counter()
    x = ml.solve(b, tol=TOL, accel="cg", residuals=res, maxiter=MAXIT)
    solve = time.perf_counter() - t0
    r = {"problem": name, "who": "PyAMG %s (host)" % pyamg.__version__, "method": "SA + cg",
         "iterations": len(res) - 1, "setup_s": setup, "solve_s": solve, "total_s": setup + solve,
         "relres": relres(a, b, x), "levels": len(ml.levels)}
    print(json.dumps(r), flush=True)
    return [r]


def fmt(v, digits=3):
    return "" if v is None else ("%.*g" % (digits, v) if isinstance(v, float) else str(v))


def table(rows, name, shape, nnz):
    out = ["### %s (%d rows, %d non-zeros)" % (name, shape, nnz), "",
           "| who | method | iterations | setup s | solve s | of it transfer s | total s | again s | true relres |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        if "error" in r:
            out.append("| %s | %s | %s | | | | | | |" % (r["who"], r["method"], r["error"]))
            continue
        miss = "" if r["relres"] <= TOL * 1.01 else " (missed)"
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %.2e%s |" % (
            r["who"], r["method"], r["iterations"], fmt(r.get("setup_s")), fmt(r["solve_s"]),
            fmt(r.get("transfer_s")), fmt(r["total_s"]),
            fmt(r.get("again_s")), r["relres"], miss))
    for r in rows:
        if "ratio_to_k1" in r:
            out += ["", "%s: %.3g s for k = 8 against %.3g s for one (%.2fx), kernel %s, fused %s; in the daemon "
                    "%s ms against %s ms." % (r["method"], r["total_s"], r["k1_s"], r["ratio_to_k1"], r.get("kernel"),
                                              r.get("fused"), r.get("daemon_ms"), r.get("k1_daemon_ms"))]
    up = next((r for r in rows if "upload_s" in r), None)
    if up:
        out += ["", "Paid once per matrix by the daemon: upload %.2f s, kernel tuning %.2f s (%s)." %
                (up["upload_s"], up["tune_s"], up.get("kernel"))]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("outdir")
    ap.add_argument("--poisson", type=int, default=100)
    ap.add_argument("--fv", type=int, default=216)
    ap.add_argument("--elast", type=int, default=6)
    ap.add_argument("--cupy", default="/opt/torch/.venv/bin/python3")
    ap.add_argument("--device", default="gpu0")
    ap.add_argument("--pyamg-max-rows", type=int, default=20_000_000)
    ap.add_argument("--shm", action="store_true",
                    help="b and x through shared memory (a SharedArrays a matrix; the daemon needs allow_shm)")
    ap.add_argument("--preconds", default="",
                    help="comma list of the daemon's rows to run, by label (none, jacobi, chebyshev, ic0, amg, "
                         "'amg float32', 'amg, rigid-body modes'); default all, and the k = 8 rows")
    ap.add_argument("--baselines", default="cupy,pyamg", help="comma list of cupy, pyamg ('' for neither)")
    args = ap.parse_args()
    only = [p.strip() for p in args.preconds.split(",") if p.strip()]
    baselines = [x.strip() for x in args.baselines.split(",") if x.strip()]
    os.makedirs(args.outdir, exist_ok=True)
    rng = np.random.default_rng(29)
    amg = {"type": "amg"}
    common = [("none", None), ("jacobi", "jacobi"), ("chebyshev", {"type": "chebyshev"}), ("ic0", {"type": "ic0"}),
              ("amg", amg), ("amg float32", dict(amg, precision="float32"))]
    problems = []
    if args.elast:
        problems.append(("P2 elasticity (scikit-fem), n = %d" % args.elast, lambda: solve_problems.elasticity_p2(args.elast)))
    if args.poisson:
        problems.append(("3-D Poisson %d^3" % args.poisson, lambda: (solve_problems.poisson3d(args.poisson), None)))
    if args.fv:
        problems.append(("FV diffusion, log-normal k (sigma 2), %d^3" % args.fv,
                         lambda: (solve_problems.fv_diffusion(args.fv), None)))
    cl = spmvd.Client(args.url, timeout=1800)
    md = ["# Time to solution: `make bench-solve`", "",
          "Relative residual 1e-8, b uniform in [-1, 1) (seed 29); times are wall seconds seen by the client "
          "(spmvd's Python client, one keep-alive connection); transfer is the solve's wall time less the "
          "daemon's own (its report's time.total_ms).", ""]
    with open(os.path.join(args.outdir, "results.jsonl"), "w") as log:
        for name, build in problems:
            t0 = time.perf_counter()
            a, xyz = build()
            print("# %s: %d rows, %d non-zeros, built in %.1f s" % (name, a.shape[0], a.nnz, time.perf_counter() - t0),
                  flush=True)
            b = rng.uniform(-1, 1, a.shape[0])
            # unpreconditioned CG on the log-normal problem needs tens of thousands of iterations (5875 at
            # 30^3): not a method anyone would pick there, so neither the daemon nor CuPy runs it
            plain = not name.startswith("FV")
            pcs = [p for p in common if plain or p[0] != "none"]
            modes = None
            if xyz is not None:
                modes = solve_problems.rigid_body_modes(xyz)
                rb = {"type": "amg", "block_size": 3, "near_nullspace": "rigid_body",
                      "coordinates": np.asarray(xyz).reshape(-1).tolist()}
                pcs += [("amg, rigid-body modes", rb)]
            if only:
                pcs = [p for p in pcs if p[0] in only]
            rows = daemon_rows(cl, name, a, b, args.device, pcs, args.shm, k_rows_too=not only)
            if "cupy" in baselines:
                rows += cupy_rows(args.cupy, name, a, b, args.outdir, ["none", "jacobi"] if plain else ["jacobi"])
            if "pyamg" in baselines:
                rows += pyamg_rows(name, a, b, modes, args.pyamg_max_rows)
            for r in rows:
                log.write(json.dumps(r) + "\n")
            md.append(table(rows, name, a.shape[0], a.nnz))
            with open(os.path.join(args.outdir, "solve.md"), "w") as f:
                f.write("\n".join(md))


if __name__ == "__main__":
    main()
