#!/usr/bin/env python3
"""bench_solve_cupy.py — CuPy's cg on one problem, for tools/bench_solve.py.

Run under the Python that has CuPy (the GPU host's /opt/torch/.venv); needs
only NumPy and CuPy. argv: an .npz holding the CSR (data, indices, indptr,
shape) and b, the tolerance, maxit, the methods (default "none,jacobi"). Times the copy of the CSR and b to the
GPU (transfer_s), then cupyx.scipy.sparse.linalg.cg with no preconditioner
and with Jacobi (a LinearOperator scaling by 1/diag), each after one
untimed warm-up solve of a few iterations (CUDA contexts, kernels' JIT).
Prints one JSON line per method; x goes to a .npy beside the input, its
path in the line (bench_solve.py checks the true residual).
"""
import inspect
import json
import sys
import time

import cupy as cp
import cupyx.scipy.sparse as csp
import cupyx.scipy.sparse.linalg as cspla
import numpy as np


def main():
    path, tol, maxit = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    methods = (sys.argv[4] if len(sys.argv) > 4 else "none,jacobi").split(",")
    z = np.load(path)
    n = int(z["shape"][0])
    t0 = time.perf_counter()
    a = csp.csr_matrix((cp.asarray(z["data"]), cp.asarray(z["indices"]), cp.asarray(z["indptr"])), shape=(n, n))
    b = cp.asarray(z["b"])
    cp.cuda.Device().synchronize()
    transfer = time.perf_counter() - t0
    dinv = 1.0 / a.diagonal()
    jac = cspla.LinearOperator((n, n), matvec=lambda r: dinv * r, dtype=cp.float64)
    key = "rtol" if "rtol" in inspect.signature(cspla.cg).parameters else "tol"  # CuPy renamed it
    for label, m in [(lbl, mm) for lbl, mm in (("none", None), ("jacobi", jac)) if lbl in methods]:
        cspla.cg(a, b, maxiter=3, M=m, **{key: tol})  # warm-up
        its = [0]

        def count(_x):
            its[0] += 1

        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        x, info = cspla.cg(a, b, maxiter=maxit, M=m, callback=count, **{key: tol})
        cp.cuda.Device().synchronize()
        solve = time.perf_counter() - t0
        out = path.replace(".npz", "_x_%s.npy" % label)
        np.save(out, cp.asnumpy(x))
        print(json.dumps({"who": "CuPy %s (same GPU)" % cp.__version__, "method": "cg + " + label,
                          "iterations": its[0], "setup_s": 0.0, "solve_s": solve, "total_s": solve + transfer,
                          "transfer_s": transfer, "info": int(info), "x_path": out}), flush=True)


if __name__ == "__main__":
    main()
