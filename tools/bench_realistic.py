#!/usr/bin/env python3
"""bench_realistic.py URL OUT — issue 30's realistic benchmark set: matrices
people have, built here (seeded), benched by the daemon at URL.

The set (tools/solve_problems.py builds each one; --size small makes them
about 100 times smaller, for a check on a host without a GPU):

  fv            3-D cell-centred finite-volume diffusion, log-normal
                permeability (sigma 2, correlated over 3 cells), every value
                distinct: 220^3 = 10.6 M rows, 74 M non-zeros;
  p1_disk       P1 Poisson on scikit-fem's unstructured triangulation of the
                disk, refined 10 times: 2.1 M rows, 14.7 M non-zeros;
  elasticity    clamped 3-D elasticity with P2 tetrahedra (scikit-fem),
                3 x 3 blocks: n = 17, 20 M non-zeros;
  convdiff      3-D convection-diffusion, upwind, a rotating velocity
                (non-symmetric): 200^3 = 8 M rows, 56 M non-zeros.

Each is uploaded as an uncompressed .npz (float64, then float32) on
--device, and benched by the daemon's bench route (POST .../bench: every
available kernel of the device unless --kernels, the route's median over
--runs after its warm-ups, each kernel verified against cpu.csr.serial).
The report (OUT/realistic.md, OUT/results.json) gives for each matrix and
dtype every kernel's time and GB/s, the ratio to the best cuSPARSE kernel
measured in the same bench (the issue's measure), auto's choice, and the
bytes per non-zero of every format the bench built (the descriptor's
`formats[]` after the bench). Reports, never asserts beyond the bench's own
verification.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import scipy.sparse as sp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
_cp = os.environ.get("SPMVD_CLIENT_PATH") or os.path.join(HERE, "..", "clients", "python")
sys.path.insert(0, _cp)
import solve_problems as problems  # noqa: E402
import spmvd  # noqa: E402

SIZES = {  # name: (builder, full argument, small argument, what)
    "fv": (problems.fv_diffusion, 220, 48, "3-D finite-volume diffusion, log-normal permeability"),
    "p1_disk": (problems.p1_poisson_disk, 10, 7, "P1 Poisson, unstructured disk (scikit-fem)"),
    "elasticity": (lambda n: problems.elasticity_p2(n)[0], 17, 4, "P2 elasticity, 3x3 blocks (scikit-fem)"),
    "convdiff": (problems.convection_diffusion, 200, 40, "3-D convection-diffusion, upwind (non-symmetric)"),
}

ap = argparse.ArgumentParser()
ap.add_argument("url")
ap.add_argument("out")
ap.add_argument("--size", choices=("full", "small"), default="full")
ap.add_argument("--matrices", default=",".join(SIZES))
ap.add_argument("--dtypes", default="float64,float32")
ap.add_argument("--device", default="gpu")
ap.add_argument("--kernels", default="", help="comma-separated (default: every available kernel of the device)")
ap.add_argument("--runs", type=int, default=20)
ap.add_argument("--seed", type=int, default=1, help="the permeability field's seed (the set is seeded)")
ap.add_argument("--cache", default="", help="a folder of built matrices (NAME-ARG.npz): read when there, else "
                "built and written (--build-only: build them and stop)")
ap.add_argument("--build-only", action="store_true")
ap.add_argument("--psell-threads", default="", help="comma list: gpu.psell with `threads` (warps a slice) of each, "
                "through /spmv after the bench (--runs, verified), beside the bench's rows")
ap.add_argument("--psell-patterns", action="store_true", help="gpu.psell with `patterns` 2 (no slice patterns) "
                "too, through /spmv like --psell-threads")
a = ap.parse_args()
os.makedirs(a.out, exist_ok=True)
c = None if a.build_only else spmvd.Client(a.url, timeout=3600)
info = c.info() if c else {}
kernels = [k for k in a.kernels.split(",") if k] or None
results = []


def bytes_per_nnz(desc, nnz):
    out = {}
    for f in desc.get("formats", []):
        key = "%s@%s" % (f["format"], f.get("device", "?"))
        out[key] = f.get("bytes", 0) / max(nnz, 1)
    return out


def best_of(rows, pred):
    ts = [r for r in rows if pred(r["kernel"]) and r.get("median_ms") and r.get("verified") is not False
          and not r.get("error")]
    return min(ts, key=lambda r: r["median_ms"]) if ts else None



def render():
    """realistic.md from the results so far (rewritten after each bench, so a cut run keeps what it measured)."""
    lines = ["# Realistic matrices (issue 30)", "",
             "Command: `python3 tools/bench_realistic.py %s %s --size %s --runs %d%s` against spmvd %s at %s, %s UTC." % (
                 a.url, a.out, a.size, a.runs, " --kernels " + a.kernels if a.kernels else "", info.get("version", "?"),
                 a.url, time.strftime("%Y-%m-%d %H:%M", time.gmtime())),
             "Devices: %s." % (", ".join("%s (%s)" % (d.get("name", "?"), d.get("model") or d.get("kind", "?"))
                                   for d in info.get("devices", [])) or "none"), "",
             "| matrix | dtype | rows | nnz | best kernel (ms, GB/s) | best cuSPARSE (ms) | best / cuSPARSE | auto (kernel, ms) "
             "| auto / cuSPARSE |",
             "| --- | --- | ---: | ---: | --- | ---: | ---: | --- | ---: |"]
    for r in results:
        ks = r["kernels"]
        best = best_of(ks, lambda k: k != "auto" and (a.device == "cpu" or not k.startswith("cpu.")))
        cus = best_of(ks, lambda k: k.startswith("cusparse."))
        au = next((x for x in ks if x["kernel"] == "auto" and x.get("median_ms")), None)
        lines.append("| %s | %s | %d | %d | %s | %s | %s | %s | %s |" % (
            r["matrix"], r["dtype"], r["rows"], r["nnz"],
            "%s (%.4g, %.4g)" % (best["kernel"], best["median_ms"], best["gbps"] or 0) if best else "-",
            "%.4g (%s)" % (cus["median_ms"], cus["kernel"]) if cus else "-",
            "%.2f×" % (cus["median_ms"] / best["median_ms"]) if best and cus else "-",
            "%s, %.4g" % (au.get("auto_kernel") or "auto", au["median_ms"]) if au else "-",
            "%.2f×" % (cus["median_ms"] / au["median_ms"]) if au and cus else "-"))
    lines += ["", "Ratios are cuSPARSE's time over the kernel's (above 1: faster than the best cuSPARSE kernel in the "
              "same bench). Medians over %d runs." % a.runs, "", "## Every kernel", ""]
    for r in results:
        lines.append("### %s, %s (%s; %d rows, %d non-zeros, symmetric: %s)" % (
            r["matrix"], r["dtype"], r["what"], r["rows"], r["nnz"], "yes" if r["symmetric"] else "no"))
        lines += ["", "| kernel | params | median ms | GB/s | vs best cuSPARSE | verified |", "| --- | --- | ---: | ---: | ---: | --- |"]
        cus = best_of(r["kernels"], lambda k: k.startswith("cusparse."))
        for k in sorted(r["kernels"], key=lambda k: k.get("median_ms") or 1e300):
            lines.append("| %s | %s | %s | %s | %s | %s |" % (
                k["kernel"] + (" (%s)" % k["auto_kernel"] if k.get("auto_kernel") else ""),
                ", ".join("%s=%s" % kv for kv in sorted((k.get("params") or {}).items())) or "-",
                "%.4g" % k["median_ms"] if k.get("median_ms") else "-",
                "%.4g" % k["gbps"] if k.get("gbps") else "-",
                "%.2f×" % (cus["median_ms"] / k["median_ms"]) if cus and k.get("median_ms") else "-",
                k.get("error") or ("yes" if k.get("verified") else "no")))
        lines += ["", "Bytes per non-zero of each format the bench built: " + ", ".join(
            "%s %.2f" % kv for kv in sorted(r["bytes_per_nnz"].items())) + ".", ""]
        if r["skipped"]:
            lines += ["Skipped: " + "; ".join("%s (%s)" % (s.get("kernel"), s.get("reason")) for s in r["skipped"]) + ".", ""]
    open(os.path.join(a.out, "realistic.md"), "w").write("\n".join(lines) + "\n")
    return lines


for name in [m for m in a.matrices.split(",") if m]:
    build, full, small, what = SIZES[name]
    arg = full if a.size == "full" else small
    t0 = time.perf_counter()
    cached = os.path.join(a.cache, "%s-%s-seed%d.npz" % (name, arg, a.seed)) if a.cache else ""
    if cached and os.path.exists(cached):
        A = sp.load_npz(cached).tocsr()
    else:
        A = build(arg, seed=a.seed) if name == "fv" else build(arg)
        if cached:
            os.makedirs(a.cache, exist_ok=True)
            sp.save_npz(cached + ".tmp.npz", A, compressed=False)
            os.replace(cached + ".tmp.npz", cached)
    build_s = time.perf_counter() - t0
    if a.build_only:
        print("# %s(%s) built into %s in %.1f s" % (name, arg, cached, build_s), file=sys.stderr, flush=True)
        continue
    sym = bool(abs(A - A.T).max() == 0)
    print("# %s(%s): %d rows, %d non-zeros, symmetric %s, built in %.1f s" % (name, arg, A.shape[0], A.nnz, sym, build_s),
          file=sys.stderr, flush=True)
    for dt in [d for d in a.dtypes.split(",") if d]:
        t0 = time.perf_counter()
        m = c.upload(A, name="%s-%s" % (name, dt), dtype=dt, device=a.device)
        up_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        res = c.bench(m, kernels=kernels, runs=a.runs, progress=None)
        bench_s = time.perf_counter() - t0
        rows = []
        for r in res:
            rows.append({k: r.get(k) for k in ("kernel", "params", "median_ms", "gbps", "gflops", "ratio_cusparse",
                                                "verified", "max_rel_err", "error", "auto_kernel")})
        rng = np.random.default_rng(a.seed)
        x = rng.uniform(-1, 1, A.shape[1]).astype(np.float64 if dt == "float64" else np.float32)
        variants = [{"threads": int(v)} for v in a.psell_threads.split(",") if v]
        variants += [{"patterns": 2}] if a.psell_patterns else []
        for params in variants:
            try:
                r = c.spmv(m, x, kernel="gpu.psell", runs=a.runs, warmup=3, verify=True, **params)
                st, v = r.stats.get("stats", {}), r.stats.get("verify", {})
                rows.append({"kernel": "gpu.psell", "params": r.stats.get("params"), "median_ms": st.get("median_ms"),
                             "gbps": st.get("gbps"), "gflops": st.get("gflops"), "max_rel_err": v.get("max_rel_err"),
                             "verified": v.get("max_rel_err") is not None and v["max_rel_err"] <= (
                                 1e-12 if dt == "float64" else 1e-5), "via": "/spmv"})
            except Exception as e:  # reported in the table, never fatal
                rows.append({"kernel": "gpu.psell", "params": params, "error": str(e)[:200], "via": "/spmv"})
        desc = c.get(m).descriptor
        results.append({"matrix": name, "what": what, "arg": arg, "rows": A.shape[0], "nnz": int(A.nnz),
                        "symmetric": sym, "dtype": dt, "upload_s": up_s, "bench_s": bench_s, "build_s": build_s,
                        "bytes_per_nnz": bytes_per_nnz(desc, A.nnz), "kernels": rows,
                        "skipped": res.raw.get("skipped", []), "best": res.raw.get("best")})
        json.dump(results, open(os.path.join(a.out, "results.json"), "w"), indent=1)
        print("# %s %s: uploaded in %.1f s, benched in %.1f s" % (name, dt, up_s, bench_s), file=sys.stderr, flush=True)
        render()
        c.delete(m)
    del A


if not a.build_only:
    print("\n".join(render()))
