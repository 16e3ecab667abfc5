#!/usr/bin/env python3
"""api_test_vectors.py — resident vectors, ops and solve on the GPU host.

Run by run.sh after api_test.py. CI has no GPU, so this is where the
daemon's GPU paths for issue 12 are checked end to end: spmvd on loopback,
each real matrix of shared/matrices/real uploaded to the GPU (float64 and
float32), and against values computed on the host in float64 by this
script (a plain CSR product of the file's entries, not the daemon):
  - vectors made `like` the matrix (fill, random, binary values), read back
    bit for bit;
  - spmv with resident x and y, alpha and beta, op n and t, with several GPU
    kernels (y = alpha*A*x + beta*y checked against the host product);
  - k = 3 blocks through gpu.csr.spmm and cusparse.csr (inline and resident);
  - every /v1/ops step (dot, nrm2, axpy, axpby, scal, copy, fill, spmv);
  - solve: cg (SPD matrices), bicgstab and gmres, with and without jacobi,
    x checked by its true residual ||b - A x|| / ||b|| computed here;
  - a vector on the CPU used with a GPU kernel: 409 wrong_device;
  - device bytes of vectors freed after DELETE (info's used_by_spmvd back
    where it started).
Standard library only. Prints "ok N - ..." / "not ok N - ..." lines and a
last line "N passed, N failed"; exits 0 only if nothing failed.
"""
import argparse
import array
import json
import math
import os
import random
import struct
import subprocess
import sys
import tempfile
import time

import spmvd_http

PORT = 18082
BASE = "http://127.0.0.1:%d" % PORT
PASS = FAIL = 0


def req(method, path, body=None, headers=None, timeout=300):
    return spmvd_http.request(BASE, method, path, body, headers, timeout)


def js(raw):
    try:
        return json.loads(raw)
    except ValueError:
        return {"_raw": raw[:300].decode(errors="replace")}


def check(cond, what):
    global PASS, FAIL
    if cond:
        PASS += 1
        print("ok %d - %s" % (PASS + FAIL, what), flush=True)
    else:
        FAIL += 1
        print("not ok %d - %s" % (PASS + FAIL, what), flush=True)
    return cond


def read_mtx(path):
    """COO of a Matrix Market file (general/symmetric/skew, real/integer/pattern), duplicates summed."""
    with open(path) as f:
        banner = f.readline().lower().split()
        sym = banner[4] if len(banner) > 4 else "general"
        pattern = "pattern" in banner
        line = f.readline()
        while line.startswith("%") or not line.strip():
            line = f.readline()
        rows, cols, nnz = (int(t) for t in line.split()[:3])
        ent = {}
        for line in f:
            t = line.split()
            if not t or t[0].startswith("%"):
                continue
            i, j = int(t[0]) - 1, int(t[1]) - 1
            v = 1.0 if pattern else float(t[2])
            ent[(i, j)] = ent.get((i, j), 0.0) + v
            if sym != "general" and i != j:
                ent[(j, i)] = ent.get((j, i), 0.0) + (-v if sym == "skew-symmetric" else v)
    return rows, cols, ent


def product(rows, ent, x, trans=False, ncols=None):
    y = [0.0] * (ncols if trans else rows)
    for (i, j), v in ent.items():
        if trans:
            y[j] += v * x[i]
        else:
            y[i] += v * x[j]
    return y


def rel_err(a, b):
    scale = max(max((abs(v) for v in b), default=0.0), 1e-300)
    return max((abs(p - q) for p, q in zip(a, b)), default=0.0) / scale


def pack(vals, dtype):
    return struct.pack("<%d%s" % (len(vals), "d" if dtype == "float64" else "f"), *vals)


def unpack(raw, dtype):
    return list(array.array("d" if dtype == "float64" else "f", raw))


def make_vec(values, mid, side, dtype):
    st, raw, _ = req("POST", "/v1/vectors?like=%s&side=%s&dtype=%s" % (mid, side, dtype), pack(values, dtype))
    return js(raw)["id"] if st == 201 else None


def get_vec(vid, dtype):
    st, raw, _ = req("GET", "/v1/vectors/" + vid, headers={"Accept": "application/octet-stream"})
    return unpack(raw, dtype) if st == 200 else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--out", default=".")
    ap.add_argument("--max-nnz", type=int, default=60000, help="skip larger real matrices (python product)")
    a = ap.parse_args()
    seed = int(os.environ.get("SEED", random.randrange(1 << 30)))
    print("# seed %d" % seed)
    rng = random.Random(seed)
    tmp = tempfile.mkdtemp(prefix="api-vec-")
    log = open(os.path.join(a.out, "spmvd-vectors.log"), "w")
    d = subprocess.Popen([os.path.join(a.bundle, "bin", "spmvd"), "--listen", "127.0.0.1:%d" % PORT, "--state-dir",
                          os.path.join(tmp, "state"), "--log-level", "warn"], stdout=log, stderr=subprocess.STDOUT)
    try:
        spmvd_http.wait_ready(BASE, 300)
        info = js(req("GET", "/v1/info")[1])
        def used():
            """Bytes held by spmvd on each GPU less its kept scratch (kernel scratch, the reductions' scalar)."""
            i = js(req("GET", "/v1/info")[1])
            return [dv.get("memory_used_by_spmvd") - dv.get("memory_scratch", 0)
                    for dv in i.get("devices", []) if "index" in dv]
        used0 = used()
        mdir = os.path.join(a.bundle, "shared", "matrices", "real")
        files = sorted(f for f in os.listdir(mdir) if f.endswith(".mtx"))
        for fname in files:
            rows, cols, ent = read_mtx(os.path.join(mdir, fname))
            if len(ent) > a.max_nnz:
                print("# skip %s (%d entries > --max-nnz)" % (fname, len(ent)))
                continue
            spd = all(ent.get((j, i)) == v for (i, j), v in ent.items()) and \
                all(ent.get((i, i), 0) > 0 for i in range(rows))
            for dtype in ("float64", "float32"):
                tol = 1e-12 if dtype == "float64" else 2e-5
                out = subprocess.run(["curl", "-sS", "-w", "\n%{http_code}", "-F", "file=@" + os.path.join(mdir, fname),
                                      "-F", "dtype=" + dtype, "-F", "device=gpu", BASE + "/v1/matrices"],
                                     capture_output=True, text=True)
                body, code = out.stdout.rsplit("\n", 1)
                if not check(code.strip() == "201", "%s %s uploaded to the GPU" % (fname, dtype)):
                    continue
                m = json.loads(body)
                mid = m["id"]
                tag = "%s %s" % (fname, dtype)
                x = [rng.uniform(-1, 1) for _ in range(cols)]
                y0 = [rng.uniform(-1, 1) for _ in range(rows)]
                if dtype == "float32":
                    x = unpack(pack(x, dtype), dtype)
                    y0 = unpack(pack(y0, dtype), dtype)
                vx = make_vec(x, mid, "cols", dtype)
                vy = make_vec(y0, mid, "rows", dtype)
                if not check(vx and vy, "%s: vectors like the matrix" % tag):
                    continue
                check(get_vec(vx, dtype) == x, "%s: x reads back bit for bit" % tag)
                ax = product(rows, ent, x)
                for kern in ("gpu.csr.vector", "cusparse.csr", "gpu.csr.light", "auto"):
                    st, raw, _ = req("PUT", "/v1/vectors/" + vy, pack(y0, dtype))
                    alpha, beta = 0.5 + rng.random(), rng.uniform(-1, 1)
                    st, raw, _ = req("POST", "/v1/matrices/%s/spmv" % mid,
                                     {"kernel": kern, "x": {"vector": vx}, "y": {"vector": vy}, "alpha": alpha,
                                      "beta": beta, "runs": 3})
                    want = [alpha * p + beta * q for p, q in zip(ax, y0)]
                    got = get_vec(vy, dtype) if st == 200 else None
                    check(got is not None and rel_err(got, want) < tol,
                          "%s: %s y = a*A*x + b*y resident (%s)" % (tag, kern,
                                                                    st if got is None else "err %.2e" % rel_err(got, want)))
                # op t
                xt = [rng.uniform(-1, 1) for _ in range(rows)]
                if dtype == "float32":
                    xt = unpack(pack(xt, dtype), dtype)
                st, raw, _ = req("POST", "/v1/matrices/%s/spmv" % mid, {"kernel": "cusparse.csr", "x": xt, "op": "t"})
                got = js(raw).get("y") if st == 200 else None
                want = product(rows, ent, xt, trans=True, ncols=cols)
                check(got is not None and rel_err([float(v) for v in got], want) < tol,
                      "%s: op t with inline x (%s)" % (tag, st))
                # k = 3 blocks
                xk = [[rng.uniform(-1, 1) for _ in range(cols)] for _ in range(3)]
                if dtype == "float32":
                    xk = [unpack(pack(c, dtype), dtype) for c in xk]
                for kern in ("gpu.csr.spmm", "cusparse.csr", "auto"):
                    st, raw, _ = req("POST", "/v1/matrices/%s/spmv" % mid, {"kernel": kern, "x": xk})
                    yk = js(raw).get("y") if st == 200 else None
                    ok = yk is not None and len(yk) == 3 and all(
                        rel_err([float(v) for v in yk[j]], product(rows, ent, xk[j])) < tol for j in range(3))
                    check(ok, "%s: %s with k = 3 (%s)" % (tag, kern, st))
                # ops: every step type, checked against the host product
                vz = make_vec([0.0] * rows, mid, "rows", dtype)
                vw = make_vec([0.0] * rows, mid, "rows", dtype)
                steps = [{"op": "spmv", "matrix": mid, "x": vx, "y": vz, "kernel": "cusparse.csr"},
                         {"op": "nrm2", "x": vz, "as": "n"}, {"op": "scal", "alpha": 2.0, "x": vz},
                         {"op": "dot", "x": vz, "y": vz, "as": "d"}, {"op": "fill", "x": vz, "value": 1.5},
                         {"op": "copy", "x": vz, "y": vw}, {"op": "axpby", "alpha": 2.0, "x": vz, "beta": 0.5, "y": vw},
                         {"op": "axpy", "alpha": -1.0, "x": vz, "y": vw}]
                st, raw, _ = req("POST", "/v1/ops", {"steps": steps})
                r = js(raw)
                n_want = math.sqrt(sum(v * v for v in ax))
                res = r.get("results", {})
                got_n, got_d = float(res.get("n", "nan")), float(res.get("d", "nan"))  # "NaN" strings too
                ok = st == 200 and abs(got_n - n_want) <= 1e-4 * n_want + 1e-300 and \
                    abs(got_d - 4 * n_want * n_want) <= 1e-4 * 4 * n_want * n_want + 1e-300
                check(ok, "%s: ops spmv/nrm2/scal/dot (%s %s)" % (tag, st, r.get("results")))
                got = get_vec(vw, dtype)
                check(got is not None and all(abs(v - 2.25) < 1e-6 for v in got),
                      "%s: ops fill, copy, axpby, axpy (1.5 -> 0.5*1.5 + 2*1.5 - 1.5 = 2.25)" % tag)
                # solve
                if rows == cols:
                    xt_true = [rng.uniform(-1, 1) for _ in range(cols)]
                    b = product(rows, ent, xt_true)
                    methods = (["cg"] if spd else []) + ["bicgstab", "gmres"]
                    for meth in methods:
                        for pre in ("none", "jacobi"):
                            if pre == "jacobi" and any(ent.get((i, i), 0) == 0 for i in range(rows)):
                                continue
                            st, raw, _ = req("POST", "/v1/matrices/%s/solve" % mid,
                                             {"method": meth, "b": b, "tol": 1e-10 if dtype == "float64" else 1e-5,
                                              "maxit": 3000, "preconditioner": pre, "restart": 50})
                            r = js(raw)
                            if st != 200:
                                check(False, "%s: solve %s %s: %s" % (tag, meth, pre, r))
                                continue
                            xs = [float(v) for v in r["x"]]
                            res = [p - q for p, q in zip(b, product(rows, ent, xs))]
                            rr = math.sqrt(sum(v * v for v in res)) / max(math.sqrt(sum(v * v for v in b)), 1e-300)
                            conv = r["stop"]["reason"] == "converged"
                            check(not conv or rr < (1e-8 if dtype == "float64" else 1e-3),
                                  "%s: solve %s %s: %s in %d iterations, true relres %.2e (reported %.2e)" %
                                  (tag, meth, pre, r["stop"]["reason"], r["iterations"], rr, r["relres"]))
                # a CPU vector with a GPU kernel: 409
                st, raw, _ = req("POST", "/v1/vectors", {"n": cols, "fill": 1.0, "dtype": dtype, "device": "cpu"})
                vc = js(raw).get("id")
                st, raw, _ = req("POST", "/v1/matrices/%s/spmv" % mid, {"kernel": "cusparse.csr", "x": {"vector": vc}})
                check(st == 409, "%s: CPU vector with a GPU kernel is 409 (%s)" % (tag, st))
                for v in (vx, vy, vz, vw, vc):
                    if v:
                        req("DELETE", "/v1/vectors/" + v)
                req("DELETE", "/v1/matrices/" + mid)
        time.sleep(1.0)
        check(used() == used0, "device bytes back to the start after deletes (%s -> %s)" % (used0, used()))
    finally:
        spmvd_http.stop(d)
    print("%d passed, %d failed" % (PASS, FAIL))
    sys.exit(1 if FAIL else 0)


if __name__ == "__main__":
    main()
