#!/usr/bin/env python3
"""bench_memory.py — device memory per matrix, and what a lazy format costs (issue 13).

Run on the GPU host by `bash bundle/run.sh memory` (or directly:
python3 bundle/bench_memory.py --bundle bundle --out DIR). Starts the
bundle's spmvd on loopback, then:

1. Memory per matrix, default upload (CSR alone): for the generated set
   (spmv-gen: 2-D Poisson 4 M rows, power-law 2 M rows, uniform 3 M x 16,
   banded with one dense row) and every shared real matrix, in float64,
   device_bytes from the descriptor over the CSR's own bytes
   ((rows + 1) * 4 + nnz * (4 + 8)). Goal: <= 1.15.
   The same matrices uploaded with every format pinned (the old default)
   are reported next to it, with the formats the padding rule skipped.
2. Lazy formats cost nothing after the first call: per generated matrix and
   padded kernel (gpu.ell, gpu.hll, gpu.hyb, cusparse.sell), the median of
   20 runs of the second call on a CSR-only upload against the median on
   an upload with that format pinned (eager), same run; and the first call's
   wall time (the build included).
3. After each matrix is deleted, used_by_spmvd less scratch is back at its
   start.

Writes memory.json and memory.md to --out. Timings are reported, never
asserted; the exit status says only whether every request answered.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

PORT = 18090
BASE = "http://127.0.0.1:%d" % PORT
GENERATED = [("poisson2d 4M", ["--kind", "poisson2d", "--n", "2048"]),
             ("powerlaw 2M", ["--kind", "powerlaw", "--n", "2000000", "--per-row", "8"]),
             ("uniform 3M x16", ["--kind", "uniform", "--n", "3000000", "--per-row", "16"]),
             ("banded+dense 1M", ["--kind", "banded_dense_row", "--n", "1000000", "--per-row", "8",
                                  "--dense-len", "500000"])]
PADDED = ["gpu.ell", "gpu.hll", "gpu.hyb", "cusparse.sell"]


def request(method, path, body=None, raw=None, headers=None, timeout=600):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    h = dict(headers or {})
    if body is not None:
        h["Content-Type"] = "application/json"
    req = urllib.request.Request(BASE + path, data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read(), dict(resp.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), {}
    except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
        return 0, str(e).encode(), {}


def upload(path, formats):
    out = subprocess.run(["curl", "-sS", "-w", "\n%{http_code}", "-F", "file=@" + path, "-F", "formats=" + formats,
                          BASE + "/v1/matrices"], capture_output=True, text=True, timeout=900)
    body, _, code = out.stdout.rpartition("\n")
    return int(code or 0), (json.loads(body) if body.startswith("{") else {"error": body[:300]})


def used_less_scratch():
    _, body, _ = request("GET", "/metrics")
    m = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            m[k] = float(v)
    return (m.get('spmvd_device_memory_bytes{device="gpu0",kind="used_by_spmvd"}', 0) -
            m.get('spmvd_device_memory_bytes{device="gpu0",kind="scratch"}', 0))


def csr_bytes(d):
    return (d["rows"] + 1) * 4 + d["nnz"] * (4 + (8 if d["dtype"] == "float64" else 4))


def median_of(mid, kernel, cols, runs=20):
    t0 = time.time()
    status, body, hdr = request("POST", "/v1/matrices/%s/spmv?kernel=%s&runs=%d&warmup=2" % (mid, kernel, runs),
                                raw=b"\0" * (8 * cols), headers={"Content-Type": "application/octet-stream"})
    wall = (time.time() - t0) * 1e3
    if status != 200:
        return None, wall, "HTTP %d %s" % (status, body[:160])
    st = json.loads(hdr.get("X-SpMV-Stats", "{}"))
    return st.get("stats", st).get("median_ms"), wall, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    state = tempfile.mkdtemp(prefix="spmvd-mem-")
    gen_dir = tempfile.mkdtemp(prefix="spmvd-gen-")
    log = open(os.path.join(args.out, "bench_memory_spmvd.log"), "w")
    proc = subprocess.Popen([os.path.join(args.bundle, "bin", "spmvd"), "--listen", "127.0.0.1:%d" % PORT,
                             "--state-dir", state], stdout=log, stderr=subprocess.STDOUT)
    errors = 0
    res = {"memory": [], "lazy": []}
    try:
        for _ in range(240):
            if request("GET", "/v1/ready", timeout=5)[0] == 200:
                break
            time.sleep(0.25)
        files = []
        for label, gen in GENERATED:
            path = os.path.join(gen_dir, label.split()[0] + ".mtx")
            subprocess.run([os.path.join(args.bundle, "bin", "spmv-gen"), *gen, "--out", path], check=True,
                           capture_output=True)
            files.append((label, path, True))
        real = os.path.join(args.bundle, "shared", "matrices", "real")
        files += [(n, os.path.join(real, n), False) for n in sorted(os.listdir(real)) if n.endswith(".mtx")]
        start = used_less_scratch()
        for label, path, generated in files:
            row = {"matrix": label, "generated": generated}
            for how, formats in (("default", "csr"), ("all pinned", "coo,csr,ell,hll,hyb")):
                code, d = upload(path, formats)
                if code != 201:
                    print("FAIL upload %s (%s): %s" % (label, how, d))
                    errors += 1
                    continue
                row.update({"rows": d["rows"], "nnz": d["nnz"], "csr_bytes": csr_bytes(d)})
                row[how] = {"device_bytes": d["device_bytes"], "ratio": d["device_bytes"] / csr_bytes(d),
                            "formats": sorted(f["format"] for f in d["formats"] if f["device"] != "host"),
                            "device_memory": d["device_memory"]}
                if generated and how == "default":
                    for k in PADDED:  # lazy: first call builds, second call is timed
                        ms1, wall1, err = median_of(d["id"], k, d["cols"])
                        ms2, wall2, err2 = median_of(d["id"], k, d["cols"])
                        res["lazy"].append({"matrix": label, "kernel": k, "first_ms": ms1, "first_wall_ms": wall1,
                                            "second_ms": ms2, "refused": err if err else None})
                if generated and how == "all pinned":
                    for e in res["lazy"]:
                        if e["matrix"] == label and not e["refused"]:
                            ms, _, err = median_of(d["id"], e["kernel"], d["cols"])
                            e["eager_ms"] = ms
                            e["second_over_eager"] = e["second_ms"] / ms if ms and e["second_ms"] else None
                request("DELETE", "/v1/matrices/%s" % d["id"])
            res["memory"].append(row)
            print(json.dumps(row)[:400], flush=True)
        end = used_less_scratch()
        res["used_less_scratch"] = {"start": start, "end": end}
        if end != start:
            print("FAIL used_by_spmvd less scratch %d at the end, %d at the start" % (end, start))
            errors += 1
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
    json.dump(res, open(os.path.join(args.out, "memory.json"), "w"), indent=1)
    with open(os.path.join(args.out, "memory.md"), "w") as md:
        md.write("| matrix | rows | nnz | CSR MB | default MB | ratio | all pinned MB | ratio | pinned formats held |\n")
        md.write("|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
        for r in res["memory"]:
            if "default" not in r or "all pinned" not in r:
                continue
            md.write("| %s | %d | %d | %.1f | %.1f | %.3f | %.1f | %.2f | %s |\n" % (
                r["matrix"], r["rows"], r["nnz"], r["csr_bytes"] / 1e6, r["default"]["device_bytes"] / 1e6,
                r["default"]["ratio"], r["all pinned"]["device_bytes"] / 1e6, r["all pinned"]["ratio"],
                ",".join(r["all pinned"]["formats"])))
        md.write("\n| matrix | kernel | first call median ms | first call wall ms | second call median ms | "
                 "eager median ms | second / eager |\n|---|---|---:|---:|---:|---:|---:|\n")
        for e in res["lazy"]:
            if e["refused"]:
                md.write("| %s | %s | refused: %s | | | | |\n" % (e["matrix"], e["kernel"], e["refused"][:90]))
                continue
            md.write("| %s | %s | %.4f | %.1f | %.4f | %s | %s |\n" % (
                e["matrix"], e["kernel"], e["first_ms"] or 0, e["first_wall_ms"], e["second_ms"] or 0,
                "%.4f" % e["eager_ms"] if e.get("eager_ms") else "-",
                "%.3f" % e["second_over_eager"] if e.get("second_over_eager") else "-"))
    print(open(os.path.join(args.out, "memory.md")).read())
    print("bench_memory: %d errors" % errors)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
