#!/usr/bin/env python3
"""slices_check.py URL MATRIX_ID MODE — long tasks run in slices (issue 33).

Driven by tests/e2e/slices.sh against a CPU daemon. Two resident vectors of
2^22 values; a batch of axpby steps sized (from a timed calibration batch)
to run about 4 s. MODE `delay`: while the batch runs, small products on
the matrix are sent one after another; each must be answered while the
batch still runs, well before it ends (it waits one step, not the batch),
and their latencies are printed (p50, max). MODE `sigterm`: prints
"batch-started" once the batch is running and then waits for its answer,
which must be 503 shutting_down (the daemon stopped it between two steps).
TAP out; timings as comments.
"""
import json
import sys
import threading
import time

import tap
from tap import call, ok

URL, MATRIX, MODE = sys.argv[1], sys.argv[2], sys.argv[3]
N = 1 << 22


def vec(fill):
    st, d = call(URL, "POST", "/v1/vectors", {"n": N, "fill": fill, "seed": 3, "device": "cpu"})
    assert st == 201, d
    return d["id"]


X, Y = vec("random"), vec(0)


def batch(steps):
    return call(URL, "POST", "/v1/ops", {"steps": [{"op": "axpby", "alpha": 0.5, "x": X, "beta": 0.5, "y": Y}] * steps},
                timeout=600)


t0 = time.time()
st, d = batch(40)
per_step = (time.time() - t0) / 40
STEPS = max(100, min(4000, int(4.0 / max(per_step, 1e-4))))
print("# calibration: %.2f ms a step; the long batch has %d steps (about %.1f s)" %
      (per_step * 1e3, STEPS, STEPS * per_step), flush=True)

result = {}


def long_batch():
    t = time.time()
    result["start"] = t
    result["st"], result["d"] = batch(STEPS)
    result["end"] = time.time()


th = threading.Thread(target=long_batch)
th.start()
time.sleep(0.5)
if MODE == "sigterm":
    print("batch-started", flush=True)
    th.join(120)
    d = result.get("d", {})
    ok(result.get("st") == 503 and d.get("error", {}).get("code") == "shutting_down",
       "SIGTERM stops a running ops batch between two steps: 503 shutting_down after %.1f s" %
       (result.get("end", 0) - result.get("start", 0)), json.dumps(d)[:300])
    tap.done()

lat = []
x = [1.0] * 34
while th.is_alive() and len(lat) < 20:
    s0 = time.time()
    st, d = call(URL, "POST", "/v1/matrices/%s/spmv" % MATRIX, {"x": x, "kernel": "cpu.csr.serial"}, timeout=600)
    lat.append((time.time() - s0, time.time(), st))
    time.sleep(0.1)
th.join(600)
total = result["end"] - result["start"]
ok(result.get("st") == 200 and len(result.get("d", {}).get("steps", [])) == STEPS,
   "the long batch of %d axpby steps on 2^22 values runs to its end (%.1f s)" % (STEPS, total), result.get("d"))
ok(len(lat) >= 3, "%d short products were sent while it ran" % len(lat))
ok(all(s == 200 for _, _, s in lat), "every short product is answered 200")
during = [l for l, at, _ in lat if at < result["end"]]
ok(len(during) >= 3, "%d of them were answered while the batch still ran" % len(during))
worst = max(l for l, _, _ in lat)
ls = sorted(l for l, _, _ in lat)
print("# short products during the batch: p50 %.1f ms, max %.1f ms (a step: %.1f ms, the batch: %.1f s)" %
      (ls[len(ls) // 2] * 1e3, worst * 1e3, per_step * 1e3, total), flush=True)
ok(worst < max(1.0, total / 4), "no short product waited for the batch: the slowest took %.2f s of the batch's %.1f s"
   % (worst, total))
tap.done()
