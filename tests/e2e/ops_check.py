#!/usr/bin/env python3
"""ops_check.py URL MAX_OPS_STEPS MAX_REQUEST_WORK — POST /v1/ops against Python.

Driven by tests/e2e/ops.sh on a CPU daemon started with those two limits.
Plain Python (no NumPy): every value the daemon computes is computed here
another way, from the values the test drew (seeded, printed):

- every step type (spmv with trans n and t, alpha and beta, k = 2 blocks,
  the default `auto` kernel; dot and nrm2 for one column and for blocks;
  axpy, axpby, scal, copy, fill), each on inputs where doing nothing, or
  the wrong thing, shows;
- steps run in order and see each other's results;
- a CG solve done the way docs/krylov.md writes it: two /v1/ops requests
  per iteration carrying only scalars, the client's arithmetic in between,
  matching the same recurrence run here step by step, and converging;
- every refused request (unknown, deleted ids; lengths; dtypes; k; too
  many steps; duplicate `as`; non-finite scalars; unknown ops and fields;
  the work limit; x and y aliased) is answered with its 4xx and code, and
  changes no vector: each starts with a step that would have changed one,
  and every vector is read back and compared, bit for bit, after each.

Tolerances: sums are ordered differently here and in the daemon (OpenMP
reductions, FMA), so products and reductions are compared to 1e-12 of the
sum of the terms' magnitudes; element-wise steps to 4e-16 of theirs (one
rounding, perhaps fused); copy and fill exactly. TAP out.
"""
import json
import math
import os
import random
import sys

import tap
from tap import ok

URL = sys.argv[1]
MAX_STEPS = int(sys.argv[2])
MAX_WORK = int(sys.argv[3])
SEED = int(os.environ.get("SPMV_SEED", random.randrange(1 << 30)))
print("# seed %d" % SEED, flush=True)
rng = random.Random(SEED)


def call(method, path, body=None, ctype="application/json"):
    return tap.call(URL, method, path, body, ctype)


def ops(steps):
    return call("POST", "/v1/ops", {"steps": steps})


# ------------------------------------------------------------ matrices

def mtx_text(rows, cols, ent):
    out = ["%%MatrixMarket matrix coordinate real general", "%d %d %d" % (rows, cols, len(ent))]
    out += ["%d %d %.17g" % (i + 1, j + 1, v) for (i, j), v in sorted(ent.items())]
    return "\n".join(out) + "\n"


def upload(rows, cols, ent, dtype="float64"):
    st, d = call("POST", "/v1/matrices?device=cpu&dtype=%s" % dtype, mtx_text(rows, cols, ent), "text/plain")
    ok(st == 201, "a %d x %d %s matrix uploads" % (rows, cols, dtype), d)
    return d.get("id")


N, NR, NC = 40, 40, 25
# SPD: symmetric, strictly diagonally dominant with a positive diagonal
spd = {}
for i in range(N):
    for j in rng.sample(range(N), 3) + ([i + 1] if i + 1 < N else []):
        if j != i:
            v = rng.uniform(-1, 1)
            spd[(i, j)] = spd[(j, i)] = v
for i in range(N):
    spd[(i, i)] = 1.0 + sum(abs(v) for (a, b), v in spd.items() if a == i and b != i) + rng.random()
rect = {}
for i in range(NR):
    for j in rng.sample(range(NC), 4):
        rect[(i, j)] = rng.uniform(-2, 2)
A = upload(N, N, spd)
R = upload(NR, NC, rect)
A32 = upload(N, N, spd, "float32")
NNZ = len(spd)


def matvec(ent, x, rows, trans=False):
    y, mag = [0.0] * rows, [0.0] * rows
    for (i, j), v in ent.items():
        if trans:
            i, j = j, i
        y[i] += v * x[j]
        mag[i] += abs(v * x[j])
    return y, mag


def rand(n, scale=1.0):
    return [rng.uniform(-scale, scale) for _ in range(n)]


# ------------------------------------------------------------ vectors

def vec(values, **kw):
    body = {"values": values, "device": "cpu"}
    body.update(kw)
    st, d = call("POST", "/v1/vectors", body)
    if st != 201:
        ok(False, "vector creation", d)
        return None
    return d["id"]


def values(vid):
    st, d = call("GET", "/v1/vectors/" + vid)
    return d.get("values") if st == 200 else None


def close(got, want, mag, rel, what):
    if got is None or len(got) != len(want):
        return ok(False, what, "got %r" % (got if got is None else len(got)))
    worst = max([abs(g - w) - rel * m for g, w, m in zip(got, want, mag)] + [-1.0])
    return ok(worst <= 1e-300, what, "off by %.3g past the tolerance" % worst)


def scalar_close(got, want, mag, rel, what):
    return ok(isinstance(got, (int, float)) and abs(got - want) <= rel * mag + 1e-300, what,
              "got %r want %r" % (got, want))


PROD, EW = 1e-12, 4e-16

# ---------------------------------------------------------------- spmv
x, y0 = rand(N), rand(N)
X, Y = vec(x), vec(y0)
st, d = ops([{"op": "spmv", "matrix": A, "x": X, "y": Y, "kernel": "cpu.csr.serial"}])
ok(st == 200 and d.get("device") == "cpu" and [s["op"] for s in d.get("steps", [])] == ["spmv"]
   and d["steps"][0].get("kernel") == "cpu.csr.serial" and d["steps"][0]["ms"] >= 0 and d["total_ms"] >= 0
   and d["queue_ms"] >= 0 and d["results"] == {}, "spmv: 200 with steps, device, total_ms, queue_ms", d)
want, mag = matvec(spd, x, N)
close(values(Y), want, mag, PROD, "spmv y = A x (beta 0 overwrites y)")

a, b = 0.625, -1.75
y0 = rand(N)
call("PUT", "/v1/vectors/" + Y, y0)
st, d = ops([{"op": "spmv", "matrix": A, "x": X, "y": Y, "alpha": a, "beta": b}])
ok(st == 200 and d["steps"][0].get("kernel") not in (None, "auto"), "spmv with the default kernel (auto): "
   "200, the step names the kernel it ran (%s)" % d.get("steps", [{}])[0].get("kernel"), d)
ax, mag = matvec(spd, x, N)
close(values(Y), [a * p + b * q for p, q in zip(ax, y0)], [abs(a) * m + abs(b * q) for m, q in zip(mag, y0)],
      PROD, "spmv y = alpha A x + beta y")

xr, yr0, xt = rand(NC), rand(NR), rand(NR)
XR, YR, XT, YT = vec(xr), vec(yr0), vec(xt), vec(rand(NC))
st, d = ops([{"op": "spmv", "matrix": R, "x": XR, "y": YR, "alpha": -2, "beta": 0.5, "trans": "n",
              "kernel": "cpu.csr.omp"},
             {"op": "spmv", "matrix": R, "x": XT, "y": YT, "trans": "t", "kernel": "cpu.csr.omp"}])
ok(st == 200, "spmv on a 40 x 25 matrix, trans n and t: 200", d)
ax, mag = matvec(rect, xr, NR)
close(values(YR), [-2 * p + 0.5 * q for p, q in zip(ax, yr0)], [2 * m + abs(0.5 * q) for m, q in zip(mag, yr0)],
      PROD, "spmv trans n on the rectangular matrix, alpha -2, beta 0.5")
atx, mag = matvec(rect, xt, NC, trans=True)
close(values(YT), atx, mag, PROD, "spmv trans t: y (25 values) = Aᵀ x (40 values)")

xb = [rand(N), rand(N)]
XB, YB = vec(xb), vec([rand(N), rand(N)])
st, d = ops([{"op": "spmv", "matrix": A, "x": XB, "y": YB, "kernel": "cpu.csr.omp"},
             {"op": "dot", "x": XB, "y": YB, "as": "d2"}, {"op": "nrm2", "x": YB, "as": "n2"}])
ok(st == 200, "spmv, dot, nrm2 on k = 2 blocks: 200", d)
got = values(YB) or [[], []]
cols = [matvec(spd, c, N) for c in xb]
for j in range(2):
    close(got[j] if len(got) == 2 else None, cols[j][0], cols[j][1], PROD, "k = 2: column %d is A x_%d" % (j, j))
res = d.get("results", {})
ok(isinstance(res.get("d2"), list) and len(res["d2"]) == 2 and isinstance(res.get("n2"), list),
   "k = 2: dot and nrm2 give one value per column", res)
for j in range(2):
    if isinstance(res.get("d2"), list) and len(res["d2"]) == 2:
        scalar_close(res["d2"][j], sum(p * q for p, q in zip(xb[j], cols[j][0])),
                     sum(abs(p * q) for p, q in zip(xb[j], cols[j][0])), PROD, "k = 2: dot of column %d" % j)
        scalar_close(res["n2"][j], math.sqrt(sum(q * q for q in cols[j][0])),
                     math.sqrt(sum(q * q for q in cols[j][0])), PROD, "k = 2: nrm2 of column %d" % j)

# --------------------------------------------------------------- BLAS-1
u, v = rand(N), rand(N)
U, V = vec(u), vec(v)
st, d = ops([{"op": "dot", "x": U, "y": V, "as": "uv"}, {"op": "nrm2", "x": U, "as": "nu"}])
ok(st == 200 and set(d.get("results", {})) == {"uv", "nu"} and [s.get("as") for s in d["steps"]] == ["uv", "nu"],
   "dot and nrm2: 200, results under their names", d)
scalar_close(d["results"].get("uv"), sum(p * q for p, q in zip(u, v)), sum(abs(p * q) for p, q in zip(u, v)),
             PROD, "dot u·v")
scalar_close(d["results"].get("nu"), math.sqrt(sum(p * p for p in u)), math.sqrt(sum(p * p for p in u)), PROD,
             "nrm2 ||u||")

al = rng.uniform(0.5, 2) * rng.choice((-1, 1))
st, d = ops([{"op": "axpy", "alpha": al, "x": U, "y": V}])
ok(st == 200, "axpy: 200", d)
close(values(V), [al * p + q for p, q in zip(u, v)], [abs(al * p) + abs(q) for p, q in zip(u, v)], EW,
      "axpy y += alpha x (alpha %.4g)" % al)
close(values(U), u, [0] * N, 0, "axpy left x alone")
v = values(V)

al, be = rng.uniform(0.5, 2), -rng.uniform(0.5, 2)
st, d = ops([{"op": "axpby", "alpha": al, "x": U, "beta": be, "y": V}])
ok(st == 200, "axpby: 200", d)
close(values(V), [al * p + be * q for p, q in zip(u, v)], [abs(al * p) + abs(be * q) for p, q in zip(u, v)], EW,
      "axpby y = alpha x + beta y (%.4g, %.4g)" % (al, be))
v = values(V)

al = -rng.uniform(0.5, 3)
st, d = ops([{"op": "scal", "alpha": al, "x": U}])
ok(st == 200, "scal: 200", d)
close(values(U), [al * p for p in u], [abs(al * p) for p in u], EW, "scal x = alpha x (%.4g)" % al)
u = values(U)

st, d = ops([{"op": "copy", "x": U, "y": V}])
ok(st == 200, "copy: 200", d)
close(values(V), u, [0] * N, 0, "copy y = x, exactly")
fv = rng.uniform(-5, 5)
st, d = ops([{"op": "fill", "x": V, "value": fv}])
ok(st == 200, "fill: 200", d)
close(values(V), [fv] * N, [0] * N, 0, "fill x = %.6g everywhere, exactly" % fv)

# order: each step sees the ones before it
w = rand(N)
W = vec(w)
st, d = ops([{"op": "copy", "x": W, "y": V}, {"op": "scal", "alpha": 3, "x": V},
             {"op": "axpy", "alpha": -2, "x": W, "y": V}, {"op": "dot", "x": V, "y": W, "as": "vw"},
             {"op": "fill", "x": V, "value": 0}, {"op": "nrm2", "x": V, "as": "zero"}])
ww = sum(p * p for p in w)
ok(st == 200 and [s["op"] for s in d["steps"]] == ["copy", "scal", "axpy", "dot", "fill", "nrm2"],
   "six steps: 200, listed in order", d)
scalar_close(d.get("results", {}).get("vw"), ww, ww, 1e-14, "steps run in order: (3w - 2w)·w = w·w")
ok(d.get("results", {}).get("zero") == 0, "a later fill is seen by the nrm2 after it", d.get("results"))

# -------------------------------------------------- CG, two requests an iteration
b = rand(N)
RV, XV, PV, QV = vec(b), vec([0.0] * N), vec(b), vec([0.0] * N)
st, d = ops([{"op": "dot", "x": RV, "y": RV, "as": "rr"}])
rho = d.get("results", {}).get("rr", float("nan"))
lrho = sum(p * p for p in b)
scalar_close(rho, lrho, lrho, PROD, "CG: rho = r·r")
bn = math.sqrt(lrho)
lx, lr, lp = [0.0] * N, list(b), list(b)
beta = 0.0
its, agree, steps_ok = 0, True, True
worst = 0.0
while its < 200:
    its += 1
    st1, d1 = ops([{"op": "axpby", "alpha": 1, "x": RV, "beta": beta, "y": PV},
                   {"op": "spmv", "matrix": A, "x": PV, "y": QV},
                   {"op": "dot", "x": PV, "y": QV, "as": "pq"}])
    if st1 != 200:
        steps_ok = False
        break
    pq = d1["results"]["pq"]
    alpha = rho / pq
    st2, d2 = ops([{"op": "axpy", "alpha": alpha, "x": PV, "y": XV},
                   {"op": "axpy", "alpha": -alpha, "x": QV, "y": RV},
                   {"op": "dot", "x": RV, "y": RV, "as": "rr"}])
    if st2 != 200:
        steps_ok = False
        break
    rr = d2["results"]["rr"]
    # the same iteration here
    lp = [r_ + beta * p_ for r_, p_ in zip(lr, lp)]
    lq, _ = matvec(spd, lp, N)
    lpq = sum(p_ * q_ for p_, q_ in zip(lp, lq))
    lalpha = lrho / lpq
    lx = [x_ + lalpha * p_ for x_, p_ in zip(lx, lp)]
    lr = [r_ - lalpha * q_ for r_, q_ in zip(lr, lq)]
    lrr = sum(r_ * r_ for r_ in lr)
    # compared while the residual this iteration starts from is above 1e-8 of
    # ||b||: below it r is mostly rounding, and p·Ap and alpha of the two
    # recurrences part by the relative size of that rounding (seed 13143
    # reached 1.8e-8 in its last iterations with every step right)
    if math.sqrt(lrho) > 1e-8 * bn:
        worst = max(worst, abs(pq - lpq) / abs(lpq), abs(alpha - lalpha) / abs(lalpha))
    if its <= 3:
        scalar_close(pq, lpq, abs(lpq), 1e-10, "CG iteration %d: p·Ap matches the local recurrence" % its)
        close(values(XV), lx, [max(abs(t_) for t_ in lx)] * N, 1e-10, "CG iteration %d: x matches" % its)
        close(values(RV), lr, [bn] * N, 1e-10, "CG iteration %d: r matches" % its)
    beta = rr / rho
    rho, lrho = rr, lrr
    if math.sqrt(rr) <= 1e-12 * bn:
        break
ok(steps_ok, "CG: every request of every iteration answered 200 (%d iterations)" % its)
ok(worst <= 1e-8, "CG: the daemon's p·Ap and alpha follow the local ones to %.1e over %d iterations (while "
   "||r|| > 1e-8 ||b||)" % (worst, its))
xd = values(XV) or [0.0] * N
ax, _ = matvec(spd, xd, N)
true_res = math.sqrt(sum((p - q) ** 2 for p, q in zip(b, ax))) / bn
ok(math.sqrt(rho) <= 1e-12 * bn and true_res <= 1e-11,
   "CG by ops converges: ||b - A x|| / ||b|| = %.2e (checked here from the daemon's x)" % true_res)

# ------------------------------------------------------------ refusals
F32 = vec(rand(N), dtype="float32")
K2 = vec([rand(N), rand(N)])
SHORT = vec(rand(N - 1))
GONE = vec(rand(N))
st, _ = call("DELETE", "/v1/vectors/" + GONE)
ok(st == 204, "a vector to delete is deleted")
st, d = call("GET", "/v1/vectors")
ids = [e["id"] for e in d.get("vectors", [])]
snap = {i: values(i) for i in ids}
ok(len(ids) >= 10 and all(s is not None for s in snap.values()), "%d vectors to watch" % len(ids))
NOID = "00000000-0000-4000-8000-000000000000"
TOUCH = {"op": "fill", "x": X, "value": 12345}   # the first step of every refused request
BIG = [{"op": "spmv", "matrix": A, "x": X, "y": Y, "kernel": "cpu.csr.serial"}] * (MAX_WORK // NNZ + 1)
BLAS = [{"op": "axpby", "alpha": 1, "x": X, "beta": 1, "y": Y}] * (MAX_WORK // (3 * N) + 1)
cases = [
    ("an unknown vector id", [TOUCH, {"op": "nrm2", "x": NOID, "as": "a"}], 404, "vector_not_found", NOID),
    ("a deleted vector", [TOUCH, {"op": "copy", "x": GONE, "y": Y}], 404, "vector_not_found", GONE),
    ("an unknown matrix", [TOUCH, {"op": "spmv", "matrix": NOID, "x": X, "y": Y}], 404, "not_found", NOID),
    ("axpy over lengths 40 and 39", [TOUCH, {"op": "axpy", "alpha": 1, "x": X, "y": SHORT}], 400,
     "shape_mismatch", SHORT),
    ("dot of a column and a k = 2 block", [TOUCH, {"op": "dot", "x": X, "y": K2, "as": "a"}], 400,
     "shape_mismatch", K2),
    ("spmv with x of the wrong length (trans n on 40 x 25)",
     [TOUCH, {"op": "spmv", "matrix": R, "x": X, "y": YR}], 400, "shape_mismatch", "40 x 25"),
    ("spmv with y of the wrong length (trans t)",
     [TOUCH, {"op": "spmv", "matrix": R, "x": XT, "y": YR, "trans": "t"}], 400, "shape_mismatch", "trans t"),
    ("copy float64 into float32", [TOUCH, {"op": "copy", "x": X, "y": F32}], 400, "dtype_mismatch", "float32"),
    ("spmv of float64 vectors on a float32 matrix", [TOUCH, {"op": "spmv", "matrix": A32, "x": X, "y": Y}], 400,
     "dtype_mismatch", "float32"),
    ("spmv with x and y the same vector", [TOUCH, {"op": "spmv", "matrix": A, "x": X, "y": X}], 400,
     "invalid_request", "same vector"),
    ("a k = 2 spmv with a one-column kernel",
     [TOUCH, {"op": "spmv", "matrix": A, "x": XB, "y": YB, "kernel": "cpu.ell.omp"}], 400, "", "column"),
    ("an unknown kernel", [TOUCH, {"op": "spmv", "matrix": A, "x": X, "y": Y, "kernel": "cpu.nope"}], 400, "",
     "cpu.nope"),
    ("trans \"x\"", [TOUCH, {"op": "spmv", "matrix": A, "x": X, "y": Y, "trans": "x"}], 400, "invalid_request",
     "trans"),
    ("a duplicate `as`", [TOUCH, {"op": "nrm2", "x": X, "as": "n"}, {"op": "dot", "x": X, "y": Y, "as": "n"}],
     400, "invalid_request", "names steps[1]"),
    ("dot without `as`", [TOUCH, {"op": "dot", "x": X, "y": Y}], 400, "invalid_request", "as"),
    ("alpha \"NaN\"", [TOUCH, {"op": "scal", "alpha": "NaN", "x": Y}], 400, "invalid_request", "finite"),
    ("alpha \"Infinity\" in axpy", [TOUCH, {"op": "axpy", "alpha": "Infinity", "x": X, "y": Y}], 400,
     "invalid_request", "finite"),
    ("fill without a value", [TOUCH, {"op": "fill", "x": Y}], 400, "invalid_request", "value"),
    ("axpby without beta", [TOUCH, {"op": "axpby", "alpha": 1, "x": X, "y": Y}], 400, "invalid_request", "beta"),
    ("an unknown op", [TOUCH, {"op": "gemv", "x": X}], 400, "invalid_request", "op"),
    ("an unknown field", [TOUCH, {"op": "scal", "alpha": 2, "x": Y, "y": X}], 400, "invalid_request", "`y`"),
    ("a step that is not an object", [TOUCH, "scal"], 400, "invalid_request", "object"),
    ("a vector operand that is not an id", [TOUCH, {"op": "scal", "alpha": 2, "x": {"vector": Y}}], 400,
     "invalid_request", "vector id"),
    ("%d steps, over max_ops_steps %d" % (MAX_STEPS + 1, MAX_STEPS),
     [TOUCH] + [{"op": "scal", "alpha": 1, "x": Y}] * MAX_STEPS, 400, "too_many_steps", "max_ops_steps"),
    ("%d products over max_request_work %d" % (len(BIG), MAX_WORK), [TOUCH] + BIG, 400, "too_much_work",
     "max_request_work"),
    # vector steps count too: each value read or written is a unit (axpby: 3 a row)
    ("%d axpby on %d values (%d values moved) over max_request_work %d" % (len(BLAS), N, 3 * N * len(BLAS), MAX_WORK),
     [TOUCH] + BLAS, 400, "too_much_work", "max_request_work"),
]
for what, steps, code, ecode, needle in cases:
    st, d = ops(steps)
    err = d.get("error", {}) if isinstance(d.get("error"), dict) else {}
    text = json.dumps(d)
    ok(st == code and (not ecode or err.get("code") == ecode) and needle in text,
       "%s: %d %s naming %s" % (what, code, ecode or "", needle), "HTTP %d %s" % (st, text))
    changed = [i for i in ids if values(i) != snap[i]]
    ok(not changed, "%s: no vector changed" % what, changed)
raw = [("NaN as a JSON literal", '{"steps":[{"op":"fill","x":"%s","value":NaN}]}' % X),
       ("1e999 (overflows a double)", '{"steps":[{"op":"scal","alpha":1e999,"x":"%s"}]}' % X),
       ("an empty list of steps", '{"steps":[]}'),
       ("a body that is not an object", '[{"op":"scal","alpha":2,"x":"%s"}]' % X),
       ("a field beside steps", '{"steps":[{"op":"scal","alpha":2,"x":"%s"}],"dry_run":true}' % X),
       ("a body that is not JSON", '{"steps":[')]
for what, body in raw:
    st, d = call("POST", "/v1/ops", body)
    ok(st == 400, "%s: 400" % what, "HTTP %d %s" % (st, json.dumps(d)))
ok(all(values(i) == snap[i] for i in ids), "after every refusal the vectors are as they were")
# exactly max_ops_steps and exactly max_request_work are allowed
st, d = ops([{"op": "scal", "alpha": 1, "x": Y}] * MAX_STEPS)
ok(st == 200 and len(d.get("steps", [])) == MAX_STEPS, "exactly max_ops_steps (%d) steps: 200" % MAX_STEPS, d)
fit = min(MAX_WORK // NNZ, MAX_STEPS)
st, d = ops([{"op": "spmv", "matrix": A, "x": X, "y": Y, "kernel": "cpu.csr.serial"}] * fit)
ok(st == 200, "%d products (%d multiply-adds, within max_request_work): 200" % (fit, fit * NNZ), d)

tap.done()
