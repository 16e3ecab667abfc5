#!/usr/bin/env python3
"""symmetric_check.py — the descriptor's `symmetric` (A equals its
transpose exactly, found at upload and at every PUT .../values) and what
it buys: op t on such a matrix runs as op n, so any kernel serves it and
no transpose is built (host_bytes unchanged). Matrices drawn afresh
(argv: the seed, printed by symmetric.sh; a file to leave the ids in for
the restart check); answers against SciPy. Prints TAP; SPMVD_URL from the
environment; MATRICES the shared matrices.
"""
import json
import os
import sys

import numpy as np
import scipy.sparse as sp

import tap
from sparse_util import npz

BASE = os.environ["SPMVD_URL"]
REAL = os.path.join(os.environ["MATRICES"], "real")
seed, keep_file = int(sys.argv[1]), sys.argv[2]
rng = np.random.default_rng(seed)


def upload(data, query="name=sym"):
    st, d = tap.call(BASE, "POST", "/v1/matrices?" + query, data, "application/octet-stream")
    tap.ok(st in (200, 201), "upload %s answers 201" % query, d)
    return d


def spmv(mid, x, kernel, op="n"):
    st, d = tap.call(BASE, "POST", "/v1/matrices/%s/spmv" % mid, {"x": x.tolist(), "kernel": kernel, "op": op})
    return st, (np.asarray(d["y"]) if st == 200 else d)


def close(y, ref):
    return isinstance(y, np.ndarray) and np.linalg.norm(y - ref) <= 1e-12 * max(np.linalg.norm(ref), 1e-300)


n = int(rng.integers(200, 400))
B = sp.random(n, n, density=0.02, random_state=int(rng.integers(1 << 31)), format="csr")
B.data = rng.uniform(-1, 1, B.nnz)
S = (B + B.T + sp.eye(n)).tocsr()  # symmetric, stored in full as a general .npz
S.sort_indices()
N = S.copy()
N.data = N.data.copy()
off = [i for i in range(N.nnz) if N.indices[i] != np.searchsorted(N.indptr, i, side="right") - 1]
N.data[off[int(rng.integers(len(off)))]] += 0.5  # the same pattern, one value no longer mirrored
R = sp.random(n, n + 3, density=0.02, random_state=int(rng.integers(1 << 31)), format="csr")

s = upload(npz(S), "name=sym")
tap.ok(s.get("symmetric") is True and s.get("symmetry") == "general", "a symmetric .npz: symmetric true (declared general)", s)
ns = upload(npz(N), "name=nearly")
tap.ok(ns.get("symmetric") is False, "the same pattern with one value changed: symmetric false", ns)
r = upload(npz(R), "name=rect")
tap.ok(r.get("symmetric") is False, "a rectangular matrix: symmetric false", r)
st, lf = tap.call(BASE, "POST", "/v1/matrices?name=lfat5", open(os.path.join(REAL, "LFAT5.mtx"), "rb").read(),
                  "application/octet-stream")
tap.ok(st == 201 and lf.get("symmetric") is True and lf.get("symmetry") == "symmetric",
       "LFAT5.mtx (declared symmetric, expanded): symmetric true", lf)

x = rng.uniform(-1, 1, n)
def host_bytes(mid):
    return tap.call(BASE, "GET", "/v1/matrices/%s" % mid)[1]["host_bytes"]


before = host_bytes(s["id"])
st, y = spmv(s["id"], x, "cpu.csr.serial", "t")
tap.ok(st == 200 and close(y, S.T @ x), "symmetric, op t on cpu.csr.serial: y = A^T x")
tap.ok(host_bytes(s["id"]) == before, "and no transpose was built: host_bytes stays %d" % before, host_bytes(s["id"]))
for kernel in ("cpu.ell.omp", "cpu.hll.omp"):
    st, y = spmv(s["id"], x, kernel, "t")
    tap.ok(st == 200 and close(y, S.T @ x), "symmetric, op t on %s: y = A^T x" % kernel, y if st != 200 else "")
st, d = tap.call(BASE, "GET", "/v1/matrices/%s" % s["id"])
tap.ok(sorted(f["format"] for f in d.get("formats", [])) == ["csr", "ell", "hll"],
       "the formats held are csr and the two the kernels built", d.get("formats"))
before = host_bytes(ns["id"])
st, y = spmv(ns["id"], x, "cpu.csr.serial", "t")
tap.ok(st == 200 and close(y, N.T @ x), "not symmetric, op t on cpu.csr.serial: y = A^T x (the transpose)")
tap.ok(host_bytes(ns["id"]) > before, "which built the transpose: host_bytes grew from %d" % before, host_bytes(ns["id"]))
st, y = spmv(ns["id"], x, "cpu.ell.omp", "t")
tap.ok(st != 200, "not symmetric, op t on cpu.ell.omp is still refused (%d)" % st, y)

# values: a change that breaks the symmetry, then one that restores it
V = S.copy()
V.data = S.data.copy()
V.data[off[0] if off[0] < V.nnz else 0] += 1.0
st, d = tap.call(BASE, "PUT", "/v1/matrices/%s/values" % s["id"], V.data.astype("<f8").tobytes(),
                 "application/octet-stream")
tap.ok(st == 200 and d.get("symmetric") is False, "PUT values breaking the mirror: symmetric false", d)
st, y = spmv(s["id"], x, "cpu.csr.serial", "t")
tap.ok(st == 200 and close(y, V.T @ x), "then op t is the transpose's product again")
st, d = tap.call(BASE, "PUT", "/v1/matrices/%s/values" % s["id"], (S.data * 2).astype("<f8").tobytes(),
                 "application/octet-stream")
tap.ok(st == 200 and d.get("symmetric") is True, "PUT symmetric values: symmetric true again", d)
st, y = spmv(s["id"], x, "cpu.ell.omp", "t")
tap.ok(st == 200 and close(y, 2 * (S.T @ x)), "and op t on cpu.ell.omp answers 2 A^T x")

# SPSELL (docs/kernels.md "Symmetric PSELL"): a 5-point grid of 70 x 70 with a random value per pair, as a
# finite-volume matrix's, pinned at upload; its kernel right; refused where the matrix is not symmetric
g = 70
I = sp.identity(g, format="csr")
T = sp.diags([np.ones(g - 1)], [1], shape=(g, g), format="csr")
P = (sp.kron(I, T) + sp.kron(T, I)).tocsr()  # the upper neighbours
P.data = rng.uniform(0.5, 1.5, P.nnz)
F = (P + P.T + sp.diags(rng.uniform(4, 5, g * g))).tocsr()
F.sort_indices()
f = upload(npz(F), "name=fv&formats=spsell")
held = {d["format"]: d for d in f.get("formats", [])}
tap.ok(f.get("symmetric") is True and "spsell" in held and held["spsell"]["bytes"] > 0,
       "a symmetric grid matrix uploaded with formats=spsell holds SPSELL (%s bytes)" % held.get("spsell", {}).get("bytes"),
       f.get("formats"))
xf = rng.uniform(-1, 1, g * g)
for op in ("n", "t"):
    st, y = spmv(f["id"], xf, "cpu.spsell.omp", op)
    tap.ok(st == 200 and close(y, F @ xf), "cpu.spsell.omp op %s on it: y = A x" % op, y if st != 200 else "")
st, y = spmv(ns["id"], x, "cpu.spsell.omp")
tap.ok(st == 409 and "exactly symmetric" in y.get("error", {}).get("message", ""),
       "cpu.spsell.omp on the nearly symmetric matrix: 409 saying why", y)
st, d = tap.call(BASE, "POST", "/v1/matrices?name=nearly-spsell&formats=spsell", npz(N), "application/octet-stream")
tap.ok(st == 201 and "spsell" not in [h["format"] for h in d.get("formats", [])],
       "formats=spsell on a matrix not symmetric: uploaded, SPSELL skipped", d)
V = F.copy()
V.data = F.data.copy()
V.data[1] += 1.0  # row 0's first off-diagonal entry: the mirror broken
st, d = tap.call(BASE, "PUT", "/v1/matrices/%s/values" % f["id"], V.data.astype("<f8").tobytes(),
                 "application/octet-stream")
tap.ok(st == 200 and d.get("symmetric") is False and "spsell" not in [h["format"] for h in d.get("formats", [])],
       "PUT values breaking the mirror: SPSELL no longer held", d)
st, y = spmv(f["id"], xf, "cpu.spsell.omp")
tap.ok(st == 409, "and cpu.spsell.omp refuses it (%d)" % st, y)
st, d = tap.call(BASE, "PUT", "/v1/matrices/%s/values" % f["id"], F.data.astype("<f8").tobytes(),
                 "application/octet-stream")
tap.ok(st == 200 and "spsell" in [h["format"] for h in d.get("formats", [])],
       "symmetric values again: the pinned SPSELL is rebuilt", d)
st, y = spmv(f["id"], xf, "cpu.spsell.omp")
tap.ok(st == 200 and close(y, F @ xf), "and cpu.spsell.omp answers A x", y if st != 200 else "")
json.dump({"sym": s["id"], "nearly": ns["id"], "lfat5": lf["id"]}, open(keep_file, "w"))
tap.done()
