#!/usr/bin/env python3
"""bench_solve_transfer.py URL [N] — what a solve's b and x cost around the daemon's own time.

A diagonal matrix of N rows (default 10 M: 80 MB of float64 each way),
solved in one iteration with cpu.csr.omp, nine times for each way b and
x travel: both in the binary body (HTTP), both through shared memory
(SharedArrays.solve), and one each way. Prints the median wall time, the
daemon's time (its report's time.total_ms) and their difference (the
"transfer"). The daemon needs allow_shm. docs/benchmarks/solve.md.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402

import spmvd  # noqa: E402

url = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000_000
cl = spmvd.Client(url, timeout=600)
A = cl.upload(sp.diags(np.full(n, 2.0)).tocsr())
b = np.random.default_rng(3).uniform(-1, 1, n)
kw = dict(preconditioner="none", kernel="cpu.csr.omp")


def run(f):
    """The median of nine: wall, wall less the daemon's time, the daemon's time (ms)."""
    out = []
    for _ in range(9):
        t0 = time.perf_counter()
        r = f()
        w = time.perf_counter() - t0
        out.append((w * 1e3, w * 1e3 - r.raw["time"]["total_ms"], r.raw["time"]["total_ms"]))
    return "wall %.1f ms, transfer %.1f ms, daemon %.1f ms" % sorted(out)[4]


print("b and x in the body     ", run(lambda: cl.solve(A, b, **kw)))
with A.shared_arrays() as arrs:
    arrs.x[:] = b
    arrs.solve(**kw)
    assert np.allclose(arrs.y, b / 2), "x in the region is not b / 2"
    print("b and x in a region     ", run(lambda: arrs.solve(**kw)))
    print("b in a region, x in body", run(lambda: cl.solve(A, arrs.x_operand, **kw)))
    print("b in body, x in a region", run(lambda: cl.solve(A, b, x_out=arrs.y_operand, **kw)))
A.delete()
