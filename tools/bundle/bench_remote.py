#!/usr/bin/env python3
"""bench_remote.py — `make bench-remote` on the GPU host (issue 12).

What a remote solver feels: CG with a fixed 500 iterations on 2-D Poisson
matrices (f64; 1 M and 9 M rows by default) done four ways,
  (a) local:    vectors in the client, one binary spmv request per A·p
                (cg_solve --mode local),
  (b) resident: vectors resident next to the matrix, two /v1/ops requests
                per iteration carrying only scalars (cg_solve --mode resident),
  (c) server:   one POST /v1/matrices/{id}/solve (cg_solve --mode server),
  (d) floor:    tools/cg-ref.cu, CG written directly on cuSPARSE + cuBLAS,
                no daemon at all,
each reported as time per iteration and its split, with the ratio to (d).
Then SpMM: the per-vector throughput of one product with k columns
(k = 1, 2, 4, 8, 16, 32; the daemon's own kernel time, median of the runs)
against k separate single products, for every kernel that takes k > 1.

Standard library only (the host has python3 and curl). Reports, never
asserts: the numbers go to OUT/bench-remote.md and OUT/bench-remote.json.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

import spmvd_http

PORT = 18081
BASE = "http://127.0.0.1:%d" % PORT


def req(method, path, body=None, headers=None, timeout=600):
    return spmvd_http.request(BASE, method, path, body, headers, timeout)


def start_daemon(bundle, state):
    log = open(os.path.join(OUT, "spmvd-bench-remote.log"), "w")
    p = subprocess.Popen([os.path.join(bundle, "bin", "spmvd"), "--listen", "127.0.0.1:%d" % PORT,
                          "--state-dir", state, "--max-upload-bytes", str(8 << 30),
                          "--max-body-bytes", str(2 << 30), "--log-level", "warn"],
                         stdout=log, stderr=subprocess.STDOUT)
    if spmvd_http.wait_ready(BASE, 600):
        return p
    p.kill()
    sys.exit("spmvd did not become ready; see spmvd-bench-remote.log")


def upload(path):
    out = subprocess.run(["curl", "-sS", "-w", "\n%{http_code}", "-F", "file=@" + path, "-F", "dtype=float64",
                          BASE + "/v1/matrices"], capture_output=True, text=True, check=True)
    body, code = out.stdout.rsplit("\n", 1)
    if code.strip() != "201":
        sys.exit("upload of %s failed: %s %s" % (path, code, body[:400]))
    return json.loads(body)


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


def run_cg(bundle, mid, mode, iters, kernel):
    cmd = [os.path.join(bundle, "bin", "cg_solve"), "--url", BASE, "--matrix-id", mid, "--mode", mode,
           "--iters", str(iters), "--json"]
    if kernel:
        cmd += ["--kernel", kernel]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    wall = (time.monotonic() - t0) * 1e3
    res = last_json(p.stdout) or {}
    res.setdefault("wall_ms", wall)
    res["rc"] = p.returncode
    if p.returncode not in (0, 2):  # 2: did not converge, expected with a fixed count
        res["error"] = (p.stderr or p.stdout)[-400:]
    return res


def run_ref(bundle, side, iters):
    p = subprocess.run([os.path.join(bundle, "bin", "cg-ref"), "--n", str(side), "--iters", str(iters)],
                       capture_output=True, text=True, timeout=1800)
    res = last_json(p.stdout) or {"error": (p.stderr or p.stdout)[-400:]}
    res["rc"] = p.returncode
    return res


def per_iter(res, iters):
    if "ms_per_iter" in res:
        return float(res["ms_per_iter"])
    if "total_ms" in res:
        return float(res["total_ms"]) / max(1, int(res.get("iterations", iters)))
    return float("nan")


def spmm_sweep(mid, rows, cols, kernels, ks, runs):
    """Median kernel time of one k-column product, per kernel and k."""
    out = []
    for kern in kernels:
        for k in ks:
            if 8 * cols * k > (1 << 30):  # x and y travel over loopback: keep each under 1 GiB
                out.append({"kernel": kern, "k": k, "error": "skipped: x would be over 1 GiB"})
                continue
            # finite, non-zero values (never time on zeros): x_j = 1 + (j mod 7)/8
            pattern = struct.pack("<7d", *[1.0 + j / 8.0 for j in range(7)])
            xs = (pattern * ((cols * k) // 7 + 1))[: 8 * cols * k]
            st, body, hdr = req("POST", "/v1/matrices/%s/spmv?kernel=%s&k=%d&runs=%d&warmup=2" % (mid, kern, k, runs),
                                xs)
            if st != 200:
                out.append({"kernel": kern, "k": k, "error": body[:300].decode(errors="replace")})
                continue
            stats = json.loads(hdr.get("X-SpMV-Stats", "{}"))
            med = stats.get("stats", {}).get("median_ms", float("nan"))
            out.append({"kernel": kern, "k": k, "median_ms": med, "gbps": stats.get("stats", {}).get("gbps")})
    return out


def main():
    global OUT
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--sides", default="1000,3000", help="grid sides: 1000 -> 1 M rows, 3000 -> 9 M rows")
    ap.add_argument("--iters", type=int, default=500)
    ap.add_argument("--kernel", default="auto", help="kernel of the products in (a)-(c) (default auto: tuned once)")
    ap.add_argument("--ks", default="1,2,4,8,16,32")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--skip-local-above", type=int, default=10**9, help="skip (a) above this many rows")
    a = ap.parse_args()
    OUT = os.environ.get("OUT") or os.path.join(a.bundle, "out")
    os.makedirs(OUT, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="bench-remote-")
    daemon = start_daemon(a.bundle, os.path.join(tmp, "state"))
    results = {"iters": a.iters, "cg": [], "spmm": []}
    try:
        _, info, _ = req("GET", "/v1/info")
        results["info"] = json.loads(info)
        for side in [int(s) for s in a.sides.split(",") if s]:
            mtx = os.path.join(tmp, "poisson2d-%d.mtx" % side)
            subprocess.run([os.path.join(a.bundle, "bin", "spmv-gen"), "--kind", "poisson2d", "--n", str(side),
                            "--out", mtx], check=True)
            t0 = time.monotonic()
            d = upload(mtx)
            os.unlink(mtx)
            row = {"matrix": "poisson2d n=%d" % side, "rows": d["rows"], "nnz": d["nnz"],
                   "upload_ms": (time.monotonic() - t0) * 1e3, "id": d["id"]}
            print("uploaded %s: %d rows, %d nnz" % (row["matrix"], d["rows"], d["nnz"]), flush=True)
            for mode in ("local", "resident", "server"):
                if mode == "local" and d["rows"] > a.skip_local_above:
                    row[mode] = {"skipped": "rows above --skip-local-above"}
                    continue
                row[mode] = run_cg(a.bundle, d["id"], mode, a.iters, a.kernel)
                print("  %-8s %s" % (mode, json.dumps(row[mode])[:300]), flush=True)
            row["floor"] = run_ref(a.bundle, side, a.iters)
            print("  floor    %s" % json.dumps(row["floor"])[:300], flush=True)
            results["cg"].append(row)
            ks = [int(k) for k in a.ks.split(",") if k]
            sweep = spmm_sweep(d["id"], d["rows"], d["cols"], ["gpu.csr.spmm", "cusparse.csr", "auto"], ks, a.runs)
            for s in sweep:
                s["matrix"] = row["matrix"]
            results["spmm"] += sweep
            req("DELETE", "/v1/matrices/%s" % d["id"])
    finally:
        spmvd_http.stop(daemon)
    with open(os.path.join(OUT, "bench-remote.json"), "w") as f:
        json.dump(results, f, indent=1)
    md = ["# bench-remote (%s)" % time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "",
          "CG, %d iterations, f64; ms per iteration (ratio to the cuSPARSE + cuBLAS floor (d))" % a.iters, "",
          "| matrix | rows | (a) local | (b) resident, 2 ops/iter | (c) solve | (d) floor |",
          "|---|---:|---:|---:|---:|---:|"]
    for r in results["cg"]:
        fl = per_iter(r["floor"], a.iters)
        cells = []
        for mode in ("local", "resident", "server"):
            v = per_iter(r[mode], a.iters) if "skipped" not in r[mode] else float("nan")
            cells.append("%.4f (%.1f×)" % (v, v / fl) if fl == fl and v == v else "n/a")
        md.append("| %s | %d | %s | %.4f |" % (r["matrix"], r["rows"], " | ".join(cells), fl))
    md += ["", "Splits (as each mode reports them):", ""]
    for r in results["cg"]:
        for mode in ("local", "resident", "server", "floor"):
            md.append("- %s %s: `%s`" % (r["matrix"], mode, json.dumps(r[mode])))
    md += ["", "SpMM: kernel median ms for k columns, per-vector throughput = k·t(1)/t(k) "
           "(how many single products one k-column product is worth)", "",
           "The last column compares with the best single-vector product, `auto` at k = 1.", "",
           "| matrix | kernel | k | median ms | ms per vector | per-vector speed-up vs the same kernel at k=1 | vs auto k=1 |",
           "|---|---|---:|---:|---:|---:|---:|"]
    base = {}
    for s in results["spmm"]:
        if s.get("k") == 1 and "median_ms" in s:
            base[(s["matrix"], s["kernel"])] = s["median_ms"]
    for s in results["spmm"]:
        if "median_ms" not in s:
            md.append("| %s | %s | %d | %s | | | |" % (s["matrix"], s["kernel"], s["k"], s.get("error", "")[:80]))
            continue
        b = base.get((s["matrix"], s["kernel"]))
        best = base.get((s["matrix"], "auto"))
        pv = s["median_ms"] / s["k"]
        md.append("| %s | %s | %d | %.4f | %.4f | %s | %s |" % (s["matrix"], s["kernel"], s["k"], s["median_ms"], pv,
                                                               "%.2f×" % (b / pv) if b else "n/a",
                                                               "%.2f×" % (best / pv) if best else "n/a"))
    with open(os.path.join(OUT, "bench-remote.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
