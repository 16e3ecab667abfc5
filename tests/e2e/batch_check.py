#!/usr/bin/env python3
"""batch_check.py — dynamic batching (batch_window_us, daemon/batch.c):
products that arrive together on one matrix, kernel and parameters run as
one SpMM, and each still gets its own y, checked against SciPy's A @ x.
Every answer of a batchable product says `batched` (the SpMM's columns):
the answers saying k come in whole batches, so their count is a multiple
of k; products that may not join (verify, two columns, another kernel)
say nothing and are right too; a product alone waited the whole window. On a GPU daemon, gpu.csr.spmm
and cusparse.csr batches too, and /metrics' parts of the batches' time.
argv: the seed (printed by batch.sh) and the window in microseconds the
daemon runs with. Prints TAP; SPMVD_URL from the environment.
"""
import json
import os
import sys
import threading
import urllib.error
import urllib.request
from collections import Counter

import numpy as np
import scipy.sparse as sp

import tap
from sparse_util import npz

BASE = os.environ["SPMVD_URL"]
seed, window_us = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(seed)


def product(mid, x, kernel, binary=True, extra=None):
    """(status, y, the answer's fields without y)."""
    if binary:
        q = "kernel=%s" % kernel + "".join("&%s=%s" % kv for kv in (extra or {}).items())
        req = urllib.request.Request("%s/v1/matrices/%s/spmv?%s" % (BASE, mid, q), data=x.astype("<f8").tobytes(),
                                     method="POST", headers={"Content-Type": "application/octet-stream"})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, np.frombuffer(r.read(), "<f8"), json.loads(r.headers["X-SpMV-Stats"])
        except urllib.error.HTTPError as e:
            return e.code, None, json.loads(e.read() or b"{}")
    body = {"x": x.T.tolist() if x.ndim == 2 else x.tolist(), "kernel": kernel}
    body.update(extra or {})
    st, d = tap.call(BASE, "POST", "/v1/matrices/%s/spmv" % mid, body)
    y = np.asarray(d.pop("y")) if st == 200 else None
    return st, y, d


def together(calls):
    """Runs every call at once (threads released by one barrier); their results in order."""
    out = [None] * len(calls)
    gate = threading.Barrier(len(calls))

    def one(i, c):
        gate.wait()
        out[i] = c()

    ts = [threading.Thread(target=one, args=(i, c)) for i, c in enumerate(calls)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def close(y, ref):
    return y is not None and y.shape == ref.shape and np.linalg.norm(y - ref) <= 1e-12 * max(np.linalg.norm(ref), 1e-300)


def whole_batches(answers):
    """Each k the answers say appears a multiple of k times (one batch of k gives k answers)."""
    c = Counter(a.get("batched") for a in answers)
    return all(k and n % k == 0 for k, n in c.items()), dict(c)


A = sp.random(700, 500, density=0.02, random_state=int(rng.integers(1 << 31)), format="csr")
A.data = rng.uniform(-1, 1, A.nnz)
st, up = tap.call(BASE, "POST", "/v1/matrices?name=batch", npz(A), "application/octet-stream")
tap.ok(st in (200, 201), "a 700 x 500 random matrix uploads", up)
mid = up.get("id")

# 1. eight binary products at once on cpu.csr.serial: every y right, the batches whole, at least one of >= 2
xs = [rng.uniform(-1, 1, 500) for _ in range(8)]
res = together([lambda x=x: product(mid, x, "cpu.csr.serial") for x in xs])
tap.ok(all(r[0] == 200 for r in res), "eight concurrent binary products answer 200", [r[0] for r in res])
tap.ok(all(close(r[1], A @ x) for r, x in zip(res, xs)), "each gets its own y = A x (relative error <= 1e-12)")
ans = [r[2] for r in res]
whole, counts = whole_batches(ans)
tap.ok(whole, "every answer says `batched`, and each k comes in whole batches", counts)
tap.ok(max(a.get("batched", 0) for a in ans) >= 2, "products that arrived together ran as one SpMM", counts)
tap.ok(all(a["k"] == 1 and a["stats"]["runs"] == 1 for a in ans), "each answer is still one column, one run")

# 2. JSON and binary bodies join alike; those that may not join answer alone, right, without `batched`
xs = [rng.uniform(-1, 1, 500) for _ in range(6)]
X2 = rng.uniform(-1, 1, (500, 2))
calls = [lambda x=x: product(mid, x, "cpu.csr.serial", binary=False) for x in xs[:3]]
calls += [lambda x=x: product(mid, x, "cpu.csr.omp") for x in xs[3:]]
calls += [lambda: product(mid, xs[0], "cpu.csr.serial", extra={"verify": "true"}),
          lambda: product(mid, X2, "cpu.csr.serial", binary=False)]
res = together(calls)
refs = [A @ x for x in xs] + [A @ xs[0], (A @ X2).T]  # a JSON y of k columns is a list of columns
tap.ok(all(r[0] == 200 for r in res), "JSON, binary, another kernel, verify and k = 2 at once: all 200",
       [(r[0], r[2]) for r in res if r[0] != 200])
tap.ok(all(close(r[1], ref) for r, ref in zip(res, refs)), "each y is its own A x",
       [i for i, (r, ref) in enumerate(zip(res, refs)) if not close(r[1], ref)])
for name, group in (("JSON on cpu.csr.serial", res[:3]), ("binary on cpu.csr.omp", res[3:6])):
    whole, counts = whole_batches([r[2] for r in group])
    tap.ok(whole, "%s: batches whole and apart from the other kernel's" % name, counts)
tap.ok("batched" not in res[6][2] and res[6][2]["verify"]["max_rel_err"] <= 1e-12,
       "a product with verify does not join (no `batched`), and verifies", res[6][2])
tap.ok("batched" not in res[7][2] and res[7][2]["k"] == 2, "a product of two columns does not join", res[7][2])

# 3. auto joins with auto: the kernel tuned for the batch's width answers each
xs = [rng.uniform(-1, 1, 500) for _ in range(5)]
res = together([lambda x=x: product(mid, x, "auto") for x in xs])
tap.ok(all(r[0] == 200 and close(r[1], A @ x) for r, x in zip(res, xs)), "five auto products at once: each y right",
       [r[2] for r in res if r[0] != 200])
whole, counts = whole_batches([r[2] for r in res])
tap.ok(whole and all("auto" in r[2] for r in res), "auto: whole batches, each answer names the tuned choice", counts)

# 4. alone: it waited the whole window (queue_ms counts it) and says batched 1
x = rng.uniform(-1, 1, 500)
st, y, d = product(mid, x, "cpu.csr.serial")
tap.ok(st == 200 and close(y, A @ x) and d.get("batched") == 1, "a product alone answers right with batched 1", d)
tap.ok(d.get("queue_ms", 0) >= 0.999 * window_us / 1000.0, "and its queue_ms includes the window (%d us)" % window_us,
       d.get("queue_ms"))

# 5. on a GPU (batch-gpu.sh runs this on the GPU host): the kernels that take k columns, each x to the device
#    and each y back on its own (engine/gpu/batch.cu); /metrics says where the batches' time went
st, info = tap.call(BASE, "GET", "/v1/info")
if any(d.get("kind") == "gpu" for d in info.get("devices", [])):
    for kernel in ("gpu.csr.spmm", "cusparse.csr"):
        xs = [rng.uniform(-1, 1, 500) for _ in range(11)]  # not a power of two
        res = together([lambda x=x: product(mid, x, kernel) for x in xs])
        tap.ok(all(r[0] == 200 and close(r[1], A @ x) for r, x in zip(res, xs)),
               "%s: eleven products at once, each y its own A x" % kernel, [r[2] for r in res if r[0] != 200])
        whole, counts = whole_batches([r[2] for r in res])
        tap.ok(whole and max(counts) >= 2, "%s: whole batches, at least one of >= 2" % kernel, counts)
    with urllib.request.urlopen(BASE + "/metrics", timeout=30) as r:
        parts = {l.split('"')[1]: float(l.split()[-1]) for l in r.read().decode().splitlines()
                 if l.startswith("spmvd_batch_part_seconds_total{")}
    tap.ok(set(parts) == {"h2d", "layout", "spmm", "d2h", "host"} and parts["h2d"] > 0 and parts["spmm"] > 0
           and parts["d2h"] > 0, "/metrics: the batches' time by part, the copies and the SpMM timed", parts)
else:
    tap.skip("no GPU: the GPU kernels' batches run on the GPU host (tools/bundle/batch-gpu.sh)")
st, _ = tap.call(BASE, "DELETE", "/v1/matrices/%s" % mid)
tap.done()
