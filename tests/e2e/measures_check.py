#!/usr/bin/env python3
"""measures_check.py — the measures of issue 31 on a real daemon.

Usage: measures_check.py URL TEAM MAX_WORK. The daemon runs with
OMP_NUM_THREADS=TEAM (so "sweep" and a CPU kernel's default team are
known) and max_request_work MAX_WORK. Checks:
  - stat: the rates of /spmv (JSON and binary) and of every bench row are
    2*nnz (GFLOP/s) over the time of the statistic asked for, mean or
    median, from the same stats object, which names it in stats.stat; an
    unknown statistic is 400 naming `stat` and the two it takes;
  - efficiency: with cpu.csr.serial and cpu.csr.omp in one bench, every
    CPU row's efficiency is (serial time / its time) / threads_used at the
    bench's statistic, threads_used is the team that ran (the count swept,
    TEAM for the default at or above serial_below, 1 below it and for a
    kernel without threads), speedup and best follow the statistic;
  - the thread sweep: one row per requested count (crossed with
    hack_sizes for cpu.hll.omp), "sweep" = 1..TEAM, bad lists refused;
  - warmup and runs are each row's own, exactly as asked;
  - max_request_work still refuses a sweep too large for it.
The matrices are generated with a fresh seed (printed). Prints TAP.
"""
import json
import os
import random
import struct
import sys
import urllib.error
import urllib.request

import tap

BASE, TEAM, MAX_WORK = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
SEED = int(os.environ.get("SPMV_SEED") or random.randrange(1, 1 << 31))
print("# seed %d (SPMV_SEED=%d repeats this run)" % (SEED, SEED))
rng = random.Random(SEED)
# Times and rates are written to 6 significant digits: a rate recomputed
# from a written time agrees with the written rate to about 1e-5.
TOL = 3e-5


def call(method, path, body=None):
    return tap.call(BASE, method, path, body)


def close(a, b, tol=TOL):
    return isinstance(a, (int, float)) and isinstance(b, (int, float)) and abs(a - b) <= tol * max(abs(a), abs(b))


def generate(kind, n, per_row):
    st, d = tap.call(BASE, "POST", "/v1/matrices?generate=%s&n=%d&per_row=%d&seed=%d&device=cpu"
                     % (kind, n, per_row, SEED), b"", "application/octet-stream")
    if not tap.ok(st == 201, "generate %s n=%d: 201" % (kind, n), d):
        tap.done()
    return d


def rates_at(stats, nnz, which, what):
    """stats names `which`, and its gflops is 2*nnz over that time."""
    ms = stats.get(which + "_ms")
    tap.ok(stats.get("stat") == which and close(stats.get("gflops", 0) * ms * 1e6, 2.0 * nnz),
           "%s: stats.stat %s, gflops = 2*nnz / %s_ms" % (what, which, which),
           "stats %s, 2*nnz %d" % (stats, 2 * nnz))


def binary_spmv(mid, cols, query):
    x = struct.pack("<%dd" % cols, *[rng.uniform(-1, 1) for _ in range(cols)])
    req = urllib.request.Request(BASE + "/v1/matrices/%s/spmv?%s" % (mid, query), data=x, method="POST",
                                 headers={"Content-Type": "application/octet-stream"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.headers.get("X-SpMV-Stats", "{}"))
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def refused_stat(st, d, what, bad):
    msg = d.get("error", {}).get("message", "") if isinstance(d, dict) else ""
    tap.ok(st == 400 and "`stat`" in msg and '"median"' in msg and '"mean"' in msg and bad in msg,
           "%s: stat %r is 400 naming `stat`, the value and both statistics" % (what, bad), "HTTP %s %s" % (st, d))


def check_spmv(big):
    mid, nnz, cols = big["id"], big["nnz"], big["cols"]
    x = [rng.uniform(-1, 1) for _ in range(cols)]
    for which in ("mean", "median"):
        st, d = call("POST", "/v1/matrices/%s/spmv" % mid,
                     {"kernel": "cpu.csr.omp", "x": x, "runs": 9, "warmup": 3, "stat": which})
        tap.ok(st == 200, "JSON spmv with stat %s: 200" % which, d)
        s = d.get("stats", {})
        rates_at(s, nnz, which, "JSON spmv stat=" + which)
        tap.ok(s.get("runs") == 9 and s.get("warmup") == 3, "JSON spmv: runs 9 and warmup 3 as asked", s)
    st, d = call("POST", "/v1/matrices/%s/spmv" % mid, {"kernel": "cpu.csr.serial", "x": x, "runs": 5})
    rates_at(d.get("stats", {}), nnz, "median", "JSON spmv without stat (the default)")
    st, s = binary_spmv(mid, cols, "kernel=cpu.csr.omp&runs=7&warmup=2&stat=mean")
    tap.ok(st == 200, "binary spmv ?stat=mean: 200", s)
    rates_at(s.get("stats", {}), nnz, "mean", "binary spmv ?stat=mean (X-SpMV-Stats)")
    st, d = call("POST", "/v1/matrices/%s/spmv" % mid, {"x": x, "stat": "max"})
    refused_stat(st, d, "JSON spmv", "max")
    st, d = call("POST", "/v1/matrices/%s/spmv" % mid, {"x": x, "stat": 1})
    tap.ok(st == 400 and "`stat`" in d.get("error", {}).get("message", ""), "JSON spmv: stat 1 (not a string) is 400",
           d)
    st, d = binary_spmv(mid, cols, "stat=p99")
    refused_stat(st, d, "binary spmv", "p99")


def bench(mid, body):
    body = dict(body, **{"async": False})
    return call("POST", "/v1/matrices/%s/bench" % mid, body)


def team_of(row, nnz, serial_below=131072):
    """The threads a CPU row ran on, as the engine resolves them."""
    t = row["params"].get("threads")
    if t is None:
        return 1
    return t if t > 0 else (1 if nnz < serial_below else TEAM)


def check_table(d, nnz, which, what):
    """Rates, speedup, efficiency, threads_used and best of one bench table at statistic `which`."""
    rows = [r for r in d.get("results", []) if "stats" in r]
    tap.ok(d.get("stat") == which and d.get("baseline") == "cpu.csr.serial", "%s: the table says stat %s and baseline "
           "cpu.csr.serial" % (what, which), {k: d.get(k) for k in ("stat", "baseline")})
    base = [r for r in rows if r["kernel"] == "cpu.csr.serial"][0]["stats"][which + "_ms"]
    bad = []
    for r in rows:
        s, ms = r["stats"], r["stats"][which + "_ms"]
        if s.get("stat") != which or not close(s["gflops"] * ms * 1e6, 2.0 * nnz):
            bad.append(("rate", r["kernel"], r["params"], s))
        if not close(r.get("speedup"), base / ms):
            bad.append(("speedup", r["kernel"], r["params"], r.get("speedup"), base / ms))
        if r["device"] == "cpu":
            team = team_of(r, nnz)
            if r.get("threads_used") != team:
                bad.append(("threads_used", r["kernel"], r["params"], r.get("threads_used"), team))
            if not close(r.get("efficiency"), base / ms / team):
                bad.append(("efficiency", r["kernel"], r["params"], r.get("efficiency"), base / ms / team))
    tap.ok(rows and not bad, "%s: every row's rates at the %s, speedup = serial / it, efficiency = speedup / "
           "threads_used, threads_used the team that ran (%d rows)" % (what, which, len(rows)), bad[:3])
    cands = [r for r in rows if r["kernel"] != "auto" and r.get("verified", True)]
    low = min(r["stats"][which + "_ms"] for r in cands)
    # the answer's times carry six digits: rows the daemon told apart may print the same
    fastest = [r for r in cands if close(r["stats"][which + "_ms"], low)]
    best = d.get("best", {})
    tap.ok(any(best.get("kernel") == r["kernel"] and best.get("params") == r["params"] for r in fastest) and
           close(best.get(which + "_ms"), low),
           "%s: best is the fastest verified row at the %s" % (what, which),
           (best, [(r["kernel"], r["params"], r["stats"][which + "_ms"]) for r in fastest]))
    return rows


def check_bench(big, small):
    mid, nnz = big["id"], big["nnz"]
    for which in ("mean", "median"):
        st, d = bench(mid, {"kernels": ["cpu.csr.serial", "cpu.csr.omp"], "threads": [1, 2], "runs": 5, "warmup": 2,
                            "stat": which})
        tap.ok(st == 200, "bench serial + omp at threads [1, 2], stat %s: 200" % which, d)
        rows = check_table(d, nnz, which, "bench stat=" + which)
        omp = sorted(r["params"]["threads"] for r in rows if r["kernel"] == "cpu.csr.omp")
        tap.ok(omp == [1, 2] and d.get("threads") == [1, 2], "bench: one cpu.csr.omp row per thread count asked",
               (omp, d.get("threads")))
        tap.ok(all(r["stats"]["runs"] == 5 and r["stats"]["warmup"] == 2 for r in rows) and d.get("warmup") == 2,
               "bench: every row ran runs 5 after warmup 2, as asked", [r["stats"] for r in rows])
    # the default team, at and below serial_below, and the default statistic
    # (cpu.ell.omp: another kernel taking threads; cpu.csr.chunked at its default span 8 would make the
    # passes over this matrix's rows the bench's whole work: docs/kernels.md)
    st, d = bench(mid, {"kernels": ["cpu.csr.omp", "cpu.ell.omp"], "runs": 3, "warmup": 1})
    tap.ok(st == 200, "bench of cpu.csr.omp and cpu.ell.omp, no threads or stat: 200", d)
    check_table(d, nnz, "median", "bench without threads or stat (default team %d)" % TEAM)
    st, d = bench(small["id"], {"kernels": ["cpu.csr.omp"], "runs": 3, "warmup": 1})
    check_table(d, small["nnz"], "median", "bench of a matrix under serial_below (default team 1)")
    # the sweep crossed with hack sizes; "sweep"
    counts = sorted(rng.sample(range(1, 9), 3))
    st, d = bench(mid, {"kernels": ["cpu.hll.omp"], "threads": counts, "hack_sizes": [16, 32], "runs": 2, "warmup": 1,
                        "stat": "mean"})
    got = sorted((r["params"]["hack_size"], r["params"]["threads"]) for r in d.get("results", [])
                 if r["kernel"] == "cpu.hll.omp")
    tap.ok(got == sorted((h, t) for h in (16, 32) for t in counts), "bench: cpu.hll.omp at every hack size x "
           "thread count %s" % counts, got)
    check_table(d, nnz, "mean", "bench of the hll sweep")
    st, d = bench(mid, {"kernels": ["cpu.csr.omp"], "threads": "sweep", "runs": 2, "warmup": 0})
    omp = [r["params"]["threads"] for r in d.get("results", []) if r["kernel"] == "cpu.csr.omp"]
    tap.ok(st == 200 and d.get("threads") == list(range(1, TEAM + 1)) and omp == list(range(1, TEAM + 1)),
           "bench threads \"sweep\": 1..%d (OMP_NUM_THREADS), a row each" % TEAM, (st, d.get("threads"), omp))


def check_refused(big):
    mid = big["id"]
    st, d = bench(mid, {"kernels": ["cpu.csr.omp"], "stat": "average"})
    refused_stat(st, d, "bench", "average")
    for bad, what in (([2000], "threads[0]"), ([], "threads"), ("all", "threads"), ([1.5], "threads[0]"),
                      (list(range(1, 66)), "threads")):
        st, d = bench(mid, {"kernels": ["cpu.csr.omp"], "threads": bad})
        msg = d.get("error", {}).get("message", "")
        tap.ok(st == 400 and "`%s`" % what in msg, "bench threads %s: 400 naming `%s`" % (json.dumps(bad)[:40], what),
               (st, msg))
    # max_request_work counts every row of the sweep: 64 counts x 3 hack sizes do not fit, 1 x 1 does
    st, d = bench(mid, {"kernels": ["cpu.hll.omp"], "threads": list(range(1, 65)), "hack_sizes": [16, 32, 64],
                        "runs": 10, "warmup": 2})
    msg = d.get("error", {}).get("message", "")
    tap.ok(st == 400 and d.get("error", {}).get("code") == "too_much_work" and "max_request_work" in msg,
           "bench: a sweep of 192 combinations over max_request_work (%d) is 400 too_much_work" % MAX_WORK, (st, msg))
    st, d = bench(mid, {"kernels": ["cpu.hll.omp"], "threads": [1], "hack_sizes": [16], "runs": 10, "warmup": 2})
    tap.ok(st == 200, "bench: the same with one combination fits: 200", (st, d.get("error")))


big = generate("poisson2d", rng.randrange(200, 260), 0)     # > serial_below non-zeros: the default team is TEAM
small = generate("uniform", rng.randrange(500, 2000), 8)    # < serial_below: one thread
tap.ok(big["nnz"] >= 131072 > small["nnz"], "the matrices straddle serial_below (%d, %d non-zeros)" %
       (big["nnz"], small["nnz"]))
check_spmv(big)
check_bench(big, small)
check_refused(big)
tap.done()
