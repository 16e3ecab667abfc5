#!/usr/bin/env python3
"""solve_fused_check.py — the daemon's fused /solve on one GPU (issue 29), on the GPU host.

Run by check-gpu.sh (CI has no GPU). A daemon of the bundle on its own
loopback port, a 2-D Poisson matrix built here with SciPy, uploaded to
the GPU, and every answer checked here against SciPy's product:

  - CG, BiCGSTAB, GMRES and MINRES, plain and Jacobi, with a GPU kernel:
    "fused": true, converged, the true residual ||b - A x|| / ||b|| under
    tol and the answer's relres that residual;
  - a long CG with gpu.csr.texture while threads send products with the
    same kernel on other x (each one remakes the texture the solve's
    captured graph reads, so the solve must capture it again): every
    product's y right, the solve's x right, products answered while the
    solve ran (else the check proved nothing, and says so);
  - a cancelled async solve (DELETE of its job): stopped, "cancelled".

Prints "ok N - ..." / "not ok N - ..." and "N passed, N failed"; exits 0
only when nothing failed. The seed is printed (SEED= to repeat).
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import scipy.sparse as sp

import spmvd_http

PORT = 18083
BASE = "http://127.0.0.1:%d" % PORT
PASS = FAIL = 0


def req(method, path, body=None, headers=None, timeout=300):
    return spmvd_http.request(BASE, method, path, body, headers, timeout)


def check(cond, what):
    global PASS, FAIL
    if cond:
        PASS += 1
    else:
        FAIL += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", PASS + FAIL, what), flush=True)
    return cond


def poisson2d(n):
    t = sp.diags([-np.ones(n - 1), 2 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1])
    i = sp.identity(n)
    return (sp.kron(i, t) + sp.kron(t, i)).tocsr()


def relres(a, x, b):
    return float(np.linalg.norm(b - a @ x) / np.linalg.norm(b))


def solve(mid, body):
    st, raw, _ = req("POST", "/v1/matrices/%s/solve" % mid, body)
    try:
        return st, json.loads(raw)
    except ValueError:
        return st, {"_raw": raw[:300].decode(errors="replace")}


def make_vec(values, mid):
    st, raw, _ = req("POST", "/v1/vectors?like=%s&side=rows&dtype=float64" % mid, values.astype(np.float64).tobytes())
    return json.loads(raw)["id"] if st == 201 else None


def get_vec(vid):
    st, raw, _ = req("GET", "/v1/vectors/" + vid, headers={"Accept": "application/octet-stream"})
    return np.frombuffer(raw, dtype=np.float64) if st == 200 else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--out", default=".")
    ap.add_argument("--side", type=int, default=1000, help="the Poisson's side (side^2 rows)")
    ap.add_argument("--cpu", action="store_true", help="a dry run of this script on a host without a GPU: CPU "
                    "kernels, the host's loop expected (\"fused\": false)")
    a = ap.parse_args()
    seed = int(os.environ.get("SEED", random.randrange(1 << 30)))
    print("# seed %d" % seed)
    rng = np.random.default_rng(seed)
    tmp = tempfile.mkdtemp(prefix="fused-")
    log = open(os.path.join(a.out, "spmvd-fused.log"), "w")
    d = subprocess.Popen([os.path.join(a.bundle, "bin", "spmvd"), "--listen", "127.0.0.1:%d" % PORT, "--state-dir",
                          os.path.join(tmp, "state"), "--log-level", "info"], stdout=log, stderr=subprocess.STDOUT)
    try:
        if not check(spmvd_http.wait_ready(BASE, 300), "spmvd ready"):
            return
        small = poisson2d(120)
        big = poisson2d(a.side)
        ids = {}
        for name, m in (("small", small), ("big", big)):
            path = os.path.join(tmp, name + ".npz")
            sp.save_npz(path, m, compressed=False)
            out = subprocess.run(["curl", "-sS", "-w", "\n%{http_code}", "-F", "file=@" + path,
                                  "-F", "device=" + ("cpu" if a.cpu else "gpu"),
                                  BASE + "/v1/matrices"], capture_output=True, text=True)
            body, code = out.stdout.rsplit("\n", 1)
            if not check(code.strip() == "201", "%s Poisson (%d rows) uploaded to the GPU" % (name, m.shape[0])):
                return
            ids[name] = json.loads(body)["id"]

        # every method, plain and Jacobi, fused, against SciPy
        fused = not a.cpu
        kernels = ("auto", "cpu.csr.omp") if a.cpu else ("auto", "cusparse.csr", "gpu.psell")
        b = rng.uniform(-1, 1, small.shape[0])
        for meth in ("cg", "bicgstab", "gmres", "minres"):
            for pre in ("none", "jacobi"):
                for kern in kernels:
                    st, r = solve(ids["small"], {"method": meth, "b": b.tolist(), "tol": 1e-10, "maxit": 20000,
                                                 "preconditioner": pre, "restart": 40, "kernel": kern})
                    if not check(st == 200, "%s %s %s: 200 (%s)" % (meth, pre, kern, st if st == 200 else r)):
                        continue
                    rr = relres(small, np.array(r["x"]), b)
                    check(r.get("fused") is fused and r["stop"]["reason"] == "converged" and rr <= 1.01e-10 and
                          abs(r["relres"] - rr) <= 1e-12,
                          "%s %s %s (%s): fused %s, %s in %d iterations, true relres %.3g (answer %.3g), %.1f ms" %
                          (meth, pre, kern, r.get("kernel"), r.get("fused"), r["stop"]["reason"], r["iterations"], rr,
                           r["relres"], r["time"]["total_ms"]))

        # a long solve with products of the same texture kernel on other x meanwhile
        kern = "cpu.csr.omp" if a.cpu else "gpu.csr.texture"
        b = rng.uniform(-1, 1, big.shape[0])
        done = threading.Event()
        stats = {"n": 0, "bad": 0, "during": 0, "errors": []}
        window = {}

        def products(tid):
            trng = np.random.default_rng(seed + 1 + tid)
            while not done.is_set():
                x = trng.uniform(-1, 1, big.shape[0])
                t0 = time.monotonic()
                st, raw, _ = req("POST", "/v1/matrices/%s/spmv?kernel=%s" % (ids["big"], kern), x.tobytes(),
                                 {"Accept": "application/octet-stream"})
                t1 = time.monotonic()
                if st != 200:
                    stats["errors"].append((st, raw[:200]))
                    continue
                y = np.frombuffer(raw, dtype=np.float64)
                want = big @ x
                stats["n"] += 1
                if y.shape != want.shape or np.max(np.abs(y - want)) > 1e-12 * max(np.max(np.abs(want)), 1e-300):
                    stats["bad"] += 1
                if "t0" in window and t0 >= window["t0"] and t1 <= window.get("t1", float("inf")):
                    stats["during"] += 1

        threads = [threading.Thread(target=products, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        vb, vx = make_vec(b, ids["big"]), make_vec(np.zeros(big.shape[0]), ids["big"])
        window["t0"] = time.monotonic()
        st, r = solve(ids["big"], {"method": "cg", "b": {"vector": vb}, "x_out": {"vector": vx}, "tol": 1e-11,
                                   "maxit": 20000, "kernel": kern})
        window["t1"] = time.monotonic()
        time.sleep(0.3)
        done.set()
        for t in threads:
            t.join()
        if check(st == 200, "long CG with %s: 200 (%s)" % (kern, st if st == 200 else r)):
            rr = relres(big, get_vec(vx), b)
            check(r.get("fused") is fused and r["stop"]["reason"] == "converged" and rr <= 1.01e-11,
                  "long CG with %s while products ran: fused %s, %s in %d iterations, true relres %.3g, %.1f ms" %
                  (kern, r.get("fused"), r["stop"]["reason"], r["iterations"], rr, r["time"]["total_ms"]))
        check(not stats["errors"] and stats["bad"] == 0 and stats["n"] > 0,
              "products of %s beside the solve: %d answered, %d wrong, errors %s" %
              (kern, stats["n"], stats["bad"], stats["errors"][:3]))
        check(stats["during"] > 0, "%d products answered while the solve ran (%.0f ms)" %
              (stats["during"], 1000 * (window["t1"] - window["t0"])))

        # ms an iteration: 500 CG iterations (tol below reach) on the big Poisson, each kernel
        timing = []
        for kern in (("auto", "cpu.csr.omp") if a.cpu else ("auto", "gpu.psell", "gpu.csr.light", "cusparse.csr")):
            for rep in range(2):  # the first may tune auto, build a format
                st, r = solve(ids["big"], {"method": "cg", "b": {"vector": vb}, "x_out": {"vector": vx}, "tol": 1e-14,
                                           "maxit": 500, "kernel": kern})
            if check(st == 200 and r["iterations"] == 500, "500 CG iterations with %s (%s)" % (kern, st)):
                t = r["time"]
                row = {"kernel": kern, "ran": r.get("kernel"), "fused": r.get("fused"),
                       "ms_per_iteration": t["total_ms"] / 500, "spmv_ms": t["spmv_ms"], "total_ms": t["total_ms"]}
                timing.append(row)
                print("# timing %s" % json.dumps(row), flush=True)
        with open(os.path.join(a.out, "solve_fused_timing.json"), "w") as f:
            json.dump({"rows": big.shape[0], "nnz": big.nnz, "timing": timing}, f, indent=1)

        # a cancel: async, DELETE of the job
        st, r = solve(ids["big"], {"method": "cg", "b": {"vector": vb}, "x_out": {"vector": vx}, "tol": 1e-12,
                                   "maxit": 20000, "async": True, "kernel": kernels[1]})
        job = r.get("job") or r.get("id")
        if check(st == 202 and job, "async solve: 202 and a job (%s)" % st):
            time.sleep(0.05)
            req("DELETE", "/v1/jobs/" + job)
            st, raw, _ = req("GET", "/v1/jobs/%s?wait=60" % job)
            j = json.loads(raw)
            res = j.get("result") or {}
            check(j.get("state") == "done" and res.get("stop", {}).get("reason") == "cancelled" and
                  res.get("fused") is fused,
                  "cancelled: job %s, %s after %s iterations" % (j.get("state"),
                  json.dumps(res.get("stop") or j.get("error"))[:200], res.get("iterations")))
        for mid in ids.values():
            req("DELETE", "/v1/matrices/" + mid)
    finally:
        spmvd_http.stop(d)
        print("%d passed, %d failed" % (PASS, FAIL))
    sys.exit(1 if FAIL else 0)


if __name__ == "__main__":
    main()
