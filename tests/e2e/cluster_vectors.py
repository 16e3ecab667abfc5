#!/usr/bin/env python3
"""cluster_vectors.py URL MATRIX_ID MTX OTHER_ID NP KERNEL — distributed vectors.

Driven by tests/e2e/cluster.sh on `mpirun -np NP spmvd`, with MATRIX_ID
the sharded upload of the shared real matrix MTX (symmetric positive
definite: bcsstk13) and OTHER_ID another sharded matrix of another size.
Plain Python: the matrix is read here from MTX and every value the daemon
computes is computed here another way, from values drawn afresh (seeded,
printed):

- vectors made like the sharded matrix are distributed (descriptor:
  device "cluster", one slice per rank, on the shards' devices); values
  written come back bit for bit, a random fill matches a host vector's;
- values from and into a shared-memory region (scattered, gathered);
- /spmv with x and y as distributed vectors (y = alpha*A*x + beta*y), and
  each mixed with an inline operand, against the product computed here;
- /v1/ops on them: spmv, dot, nrm2, axpy, axpby, scal, copy, fill;
- a CG solve the way docs/krylov.md writes it (/v1/ops requests carrying
  scalars only), its recurrence matching the same one run here for the
  first iterations, its true residual ||b - A x|| (computed here from x
  read back) agreeing with the recurrence's at the end (bcsstk13 is too
  ill-conditioned for 30 iterations to converge: agreement is the test);
- refusals: a vector of one device with the sharded matrix (409), a
  vector cut like another matrix (400), k = 2 (422), op t (422), dot
  across two layouts (400) — each changing nothing;
- DELETE frees the vector (404 after).

Tolerances: sums run in another order on the ranks, so products and
reductions are compared to 1e-12 of the sum of the terms' magnitudes,
element-wise steps to 4e-16 of theirs, copy and fill exactly. TAP out.
"""
import json
import math
import os
import random
import sys

import tap
from tap import ok

URL, AID, MTX, OTHER, NP, KERNEL = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6]
SEED = int(os.environ.get("SPMV_SEED", random.randrange(1 << 30)))
print("# seed %d" % SEED, flush=True)
rng = random.Random(SEED)


def call(method, path, body=None, accept=None):
    return tap.call(URL, method, path, body, accept=accept)


def ops(steps):
    return call("POST", "/v1/ops", {"steps": steps})


def read_mtx(path):
    rows = []
    with open(path) as f:
        header = f.readline().lower()
        sym = "symmetric" in header
        line = f.readline()
        while line.startswith("%"):
            line = f.readline()
        n, m, _ = (int(t) for t in line.split())
        a = [[] for _ in range(n)]
        for line in f:
            t = line.split()
            if not t:
                continue
            i, j, v = int(t[0]) - 1, int(t[1]) - 1, float(t[2]) if len(t) > 2 else 1.0
            a[i].append((j, v))
            if sym and i != j:
                a[j].append((i, v))
    return n, m, a


N, M, A = read_mtx(MTX)


def matvec(x):
    return [sum(v * x[j] for j, v in row) for row in A]


def absmatvec(x):
    return [sum(abs(v * x[j]) for j, v in row) for row in A]


def close(got, want, mag, rel, what):
    if got is None or len(got) != len(want):
        return ok(False, what, "got %r values, want %d" % (None if got is None else len(got), len(want)))
    worst = max((abs(g - w) - rel * m for g, w, m in zip(got, want, mag)), default=0.0)
    return ok(worst <= 1e-300, what, "off by %.3g past the tolerance" % worst)


def scalar_close(got, want, mag, what, rel=1e-12):
    return ok(isinstance(got, (int, float)) and abs(got - want) <= rel * mag + 1e-300, what,
              "got %r, want %r" % (got, want))


def make(body):
    st, d = call("POST", "/v1/vectors", body)
    if st != 201:
        ok(False, "vector creation %s" % json.dumps(body)[:80], d)
        return None, d
    return d["id"], d


def values(vid):
    st, d = call("GET", "/v1/vectors/%s" % vid)
    return d.get("values") if st == 200 else None


def draw(n):
    return [rng.uniform(-1, 1) for _ in range(n)]


# ------------------------------------------------------------ creation
xv = draw(M)
X, d = make({"like": AID, "values": xv})
ok(X and d.get("device") == "cluster" and d.get("distributed", {}).get("ranks") == NP
   and len(d["distributed"].get("devices", [])) == NP and d["distributed"]["side"] == "cols" and d["n"] == M,
   "a vector made like the sharded matrix is distributed over the %d ranks (device cluster, side cols)" % NP, d)
st, desc = call("GET", "/v1/matrices/%s" % AID)
shard_devs = [s["device"] for s in desc.get("shards", [])]
ok(d.get("distributed", {}).get("devices") == shard_devs, "each slice is where that rank's shard is: %s" % shard_devs,
   d.get("distributed"))
ok(values(X) == xv, "its values come back bit for bit (scattered, then gathered)")
Y, d = make({"like": AID, "side": "rows", "fill": 0.5})
ok(Y and d["distributed"]["side"] == "rows" and values(Y) == [0.5] * N, "a fill runs on every rank's slice")
R1, _ = make({"like": AID, "fill": "random", "seed": 77})
R2, _ = make({"n": M, "device": "cpu", "fill": "random", "seed": 77})
ok(values(R1) == values(R2), "a random fill gives what one device's vector of the same seed holds")

# ------------------------------------------------------------ shared memory
# values scattered from a POSIX region, gathered back into one
from multiprocessing import shared_memory
import struct

region = shared_memory.SharedMemory(create=True, size=16 * M)
try:
    sv = draw(M)
    region.buf[: 8 * M] = struct.pack("<%dd" % M, *sv)
    st, d = call("POST", "/v1/shm", {"name": region.name.lstrip("/"), "size": 16 * M})
    if st == 201:
        S, _ = make({"like": AID, "values": {"shm": region.name.lstrip("/"), "offset": 0}})
        st2, d2 = call("GET", "/v1/vectors/%s?shm=%s&offset=%d" % (S, region.name.lstrip("/"), 8 * M))
        back = list(struct.unpack("<%dd" % M, bytes(region.buf[8 * M: 16 * M])))
        ok(S and values(S) == sv and st2 == 200 and back == sv,
           "a distributed vector's values come from a shared-memory region and go back into one, bit for bit", d2)
        call("DELETE", "/v1/vectors/%s" % S)
        call("DELETE", "/v1/shm/%s" % region.name.lstrip("/"))
    else:
        tap.skip("shared-memory regions are off in this job (%s)" % d)
finally:
    region.close()
    region.unlink()

# ------------------------------------------------------------ /spmv
ax, aax = matvec(xv), absmatvec(xv)
st, d = call("POST", "/v1/matrices/%s/spmv" % AID, {"kernel": KERNEL, "x": {"vector": X}, "y": {"vector": Y},
                                                     "alpha": 2.0, "beta": -1.0})
ok(st == 200 and d.get("y") == {"vector": Y} and d.get("cluster", {}).get("ranks") == NP and
   d["cluster"].get("gather_ms") == 0,
   "spmv with x and y distributed: 200, y stays on the ranks (gather_ms 0, %s)" % KERNEL, d)
close(values(Y), [2 * a - 0.5 for a in ax], [2 * m + 0.5 for m in aax], 1e-12, "y = 2*A*x - y on the ranks equals "
      "the product computed here")
st, d = call("POST", "/v1/matrices/%s/spmv" % AID, {"kernel": "auto", "x": {"vector": X}})
close(d.get("y") if st == 200 else None, ax, aax, 1e-12, "x distributed, y inline (gathered), auto")
xi = draw(M)
st, d = call("POST", "/v1/matrices/%s/spmv" % AID, {"kernel": KERNEL, "x": xi, "y": {"vector": Y}})
close(values(Y) if st == 200 else None, matvec(xi), absmatvec(xi), 1e-12, "x inline (scattered), y distributed")

# ------------------------------------------------------------ /v1/ops
yv = values(Y)
st, d = ops([{"op": "spmv", "matrix": AID, "x": X, "y": Y, "kernel": KERNEL},
             {"op": "dot", "x": Y, "y": Y, "as": "yy"}, {"op": "nrm2", "x": X, "as": "nx"},
             {"op": "axpy", "alpha": 0.25, "x": Y, "y": R1}, {"op": "dot", "x": R1, "y": X, "as": "rx"}])
r1 = values(R2)  # R1 before the axpy, as R2 holds it
ok(st == 200 and d.get("device") == "cluster", "/v1/ops on distributed vectors: 200 on the cluster", d)
res = d.get("results", {}) if st == 200 else {}
scalar_close(res.get("yy"), sum(a * a for a in ax), sum(a * a for a in aax), "dot(y, y) after spmv")
scalar_close(res.get("nx"), math.sqrt(sum(v * v for v in xv)), math.sqrt(sum(v * v for v in xv)), "nrm2(x)")
want_r1 = [0.25 * a + b for a, b in zip(ax, r1)]
close(values(R1), want_r1, [0.25 * m + abs(b) for m, b in zip(aax, r1)], 1e-12, "axpy of the product's y")
scalar_close(res.get("rx"), sum(a * b for a, b in zip(want_r1, xv)), sum(abs(a * b) for a, b in zip(want_r1, xv)),
             "dot(r, x) sees the axpy before it")
st, d = ops([{"op": "copy", "x": X, "y": R1}, {"op": "scal", "alpha": -3.0, "x": R1},
             {"op": "axpby", "alpha": 1.0, "x": R1, "beta": 3.0, "y": X}, {"op": "nrm2", "x": X, "as": "z"},
             {"op": "fill", "x": R1, "value": 2.5}])
ok(st == 200 and d["results"].get("z") == 0.0 and values(X) == [0.0] * M and values(R1) == [2.5] * M,
   "copy, scal -3, axpby 1/3 (x - x = 0 exactly), fill", d)

# ------------------------------------------------------------ CG
b = [1.0] * N
B, _ = make({"like": AID, "side": "rows", "values": b})
Xs, _ = make({"like": AID, "fill": 0.0})
Rr, _ = make({"like": AID, "side": "rows", "values": b})
P, _ = make({"like": AID, "values": b})
Q, _ = make({"like": AID, "side": "rows", "fill": 0.0})
st, d = ops([{"op": "dot", "x": Rr, "y": Rr, "as": "rho"}])
rho = d["results"]["rho"] if st == 200 else float("nan")
# the same recurrence here
hx, hr, hp = [0.0] * N, list(b), list(b)
hrho = sum(v * v for v in hr)
agree, worst = True, 0.0
ITERS = 30
for it in range(ITERS):
    st, d = ops([{"op": "spmv", "matrix": AID, "x": P, "y": Q, "kernel": KERNEL},
                 {"op": "dot", "x": P, "y": Q, "as": "pq"}])
    if st != 200:
        agree = ok(False, "CG iteration %d, first request" % it, d)
        break
    a = rho / d["results"]["pq"]
    st, d = ops([{"op": "axpy", "alpha": a, "x": P, "y": Xs}, {"op": "axpy", "alpha": -a, "x": Q, "y": Rr},
                 {"op": "dot", "x": Rr, "y": Rr, "as": "rho"}])
    if st != 200:
        agree = ok(False, "CG iteration %d, second request" % it, d)
        break
    rho_new = d["results"]["rho"]
    st, d = ops([{"op": "axpby", "alpha": 1.0, "x": Rr, "beta": rho_new / rho, "y": P}])
    rho = rho_new
    hq = matvec(hp)
    ha = hrho / sum(u * v for u, v in zip(hp, hq))
    hx = [u + ha * v for u, v in zip(hx, hp)]
    hr = [u - ha * v for u, v in zip(hr, hq)]
    hrho_new = sum(v * v for v in hr)
    hp = [u + hrho_new / hrho * v for u, v in zip(hr, hp)]
    hrho = hrho_new
    if it < 5:
        worst = max(worst, abs(rho - hrho) / hrho)
ok(worst <= 1e-9, "CG on the ranks: rho of the first 5 iterations equals the recurrence run here (worst %.2g)" % worst)
xs = values(Xs)
true_r = math.sqrt(sum((bi - ai) ** 2 for bi, ai in zip(b, matvec(xs)))) if xs else float("nan")
ok(xs is not None and abs(true_r - math.sqrt(rho)) <= 1e-3 * max(true_r, 1.0),
   "after %d iterations the true residual ||b - A x|| from x read back (%.6g) matches the recurrence's (%.6g)"
   % (ITERS, true_r, math.sqrt(rho)))

# ------------------------------------------------------------ refusals
before = {v: values(v) for v in (Y, P)}
H, _ = make({"n": M, "device": "cpu", "fill": 1.0})
st, d = call("POST", "/v1/matrices/%s/spmv" % AID, {"kernel": KERNEL, "x": {"vector": H}, "y": {"vector": Y}})
ok(st == 409 and d.get("error", {}).get("code") == "wrong_device", "a vector of one device with the sharded matrix: "
   "409 wrong_device", d)
st, d = ops([{"op": "spmv", "matrix": AID, "x": H, "y": H}])
ok(st == 409, "the same in /v1/ops: 409", d)
O, od = make({"like": OTHER, "fill": 1.0})
st, d = call("POST", "/v1/matrices/%s/spmv" % AID, {"kernel": KERNEL, "x": {"vector": O}, "y": {"vector": Y}})
ok(st == 400 and d.get("error", {}).get("code") == "shape_mismatch", "a vector cut like another sharded matrix: 400 "
   "shape_mismatch", d)
st, d = ops([{"op": "axpy", "alpha": 1.0, "x": O, "y": Y}])
ok(st == 400, "axpy across two layouts: 400", d)
st, d = call("POST", "/v1/vectors", {"like": AID, "k": 2, "fill": 0.0})
ok(st == 422, "k = 2 like a sharded matrix: 422", d)
st, d = call("POST", "/v1/matrices/%s/spmv" % AID, {"kernel": KERNEL, "x": {"vector": P}, "y": {"vector": Y},
                                                     "op": "t"})
ok(st == 422, "op t with distributed vectors: 422", d)
st, d = call("POST", "/v1/matrices/%s/spmv" % AID, {"kernel": KERNEL, "x": {"vector": P}, "y": {"vector": P}})
ok(st == 400, "x and y the same vector: 400", d)
ok(all(values(v) == before[v] for v in before), "none of the refused requests changed a vector")

# ------------------------------------------------------------ delete
st, _ = call("DELETE", "/v1/vectors/%s" % Y)
st2, _ = call("GET", "/v1/vectors/%s" % Y)
ok(st == 204 and st2 == 404, "DELETE frees a distributed vector (204, then 404)")
for v in (X, R1, R2, B, Xs, Rr, P, Q, H, O):
    if v:
        call("DELETE", "/v1/vectors/%s" % v)
st, d = call("GET", "/v1/vectors")
ok(st == 200 and not d.get("vectors"), "no vector left listed", d)
tap.done()
