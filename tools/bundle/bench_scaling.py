#!/usr/bin/env python3
"""bench_scaling.py — strong scaling of a sharded matrix, 1 GPU against N (issues 16 and 32).

Run on a host of N GPUs (2, 4, 8) by tools/bundle/cluster-gpu.sh:

    python3 bundle/bench_scaling.py --bundle bundle --out $OUT [--gpus N] [--poisson-n 6400] [--fv-n 220] [--big-nnz 7e8]

Starts `mpirun -np N spmvd` (one rank per GPU, NCCL_NVLS_ENABLE=0; N from
--gpus, by default every GPU of the host), and
for each generated matrix (spmv-gen's 2-D Poisson and power-law, and the
heterogeneous finite-volume diffusion of tools/solve_problems.py; each
uploaded as a stored .npz):
  1 GPU   the matrix uploaded unsharded onto rank 0's GPU (device=0):
          each kernel's median of `runs` timed runs (the kernel alone,
          timed with CUDA events by the GPU worker);
  N GPUs  the same file uploaded with shard=true: the same kernels, the
          median of the slowest rank's run per run, measured two ways:
          by CUDA events on each rank (from the run's first operation
          queued, the exchange's pack, to its last done: the measure of
          the 1-GPU figure, so the speed-up compares like with like) and by
          the host clock around the whole synchronised run (the local
          product, the halo exchange (CUDA IPC or NCCL), the off-diagonal product:
          everything but x's delivery and y's gather), with its compute
          and communication split;
and checks both y against SciPy's A @ x (1e-12 relative to ||y||_inf);
then CG (no preconditioner, 200 iterations) as a binary solve on each, with
gpu.csr.vector and gpu.psell: ms per iteration, and on the ranks the split
into compute, exchange and reductions.
On the sharded matrix, x and y then also as vectors distributed like it
(each rank's slice on its GPU): the same kernels' medians, y read back
and checked, and the wall time of whole requests — one product with y
gathered at rank 0 and sent back, one with x and y left on the ranks,
one /v1/ops step pair of a CG iteration (spmv + dot) — medians of
--requests each.
Then the matrix larger than one GPU's free memory: a PyTorch process
holds all but --free-gb of each GPU before the job starts, a uniform
matrix of --big-nnz entries (its CSR larger than one GPU's free memory)
must be refused on GPU 0 (device=0: 507), and an upload naming neither
shard nor device must be sharded by shard_when_full, held across both
GPUs and multiplied, its y checked the same way.

Writes scaling.md (a table) and scaling.json to --out. Reports, never
asserts: the exit status is 1 only when a product is wrong or a step
fails.
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import numpy as np
import scipy.sparse as sp

KERNELS = ["cusparse.csr", "gpu.csr.vector", "gpu.csr.light", "gpu.psell", "auto"]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Job:
    """mpirun -np N spmvd on a fresh state directory."""

    def __init__(self, bundle, np_, tmp, log, extra=()):
        self.port = free_port()
        self.base = "http://127.0.0.1:%d" % self.port
        self.state = os.path.join(tmp, "state")
        os.makedirs(self.state, exist_ok=True)
        env = dict(os.environ, NCCL_NVLS_ENABLE="0", OMP_NUM_THREADS="8")
        cmd = ["mpirun", "-np", str(np_), "--enable-recovery", "-x", "NCCL_NVLS_ENABLE", "-x", "OMP_NUM_THREADS",
               "--bind-to", "none"]
        for k in sorted(os.environ):  # the daemon's own switches (SPMV_*) reach every rank
            if k.startswith("SPMV_"):
                cmd += ["-x", k]
        if os.getuid() == 0:
            cmd.append("--allow-run-as-root")
        cmd += [os.path.join(bundle, "bin", "spmvd"), "--listen", "127.0.0.1:%d" % self.port, "--state-dir",
                self.state, "--max-upload-bytes", "64T", "--max-body-bytes", "64G", "--max-runs", "1000",
                "--cluster-timeout-ms", "60000", "--threads", "4"] + list(extra)
        self.log = open(log, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        t0 = time.time()
        while time.time() - t0 < 120:
            if self.proc.poll() is not None:
                raise RuntimeError("mpirun exited %s (see %s)" % (self.proc.returncode, log))
            if self.get("/v1/ready")[0] == 200:
                return
            time.sleep(0.25)
        raise RuntimeError("the job did not turn ready in 120 s")

    def get(self, path):
        try:
            with urllib.request.urlopen(self.base + path, timeout=10) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
        except Exception as e:  # not listening yet
            return 0, str(e).encode()

    def upload(self, path, query):
        t0 = time.time()
        out = subprocess.run(["curl", "-sS", "-w", "\n%{http_code}", "-X", "POST", "-H",
                              "Content-Type: application/octet-stream", "-T", path,
                              self.base + "/v1/matrices?" + query], capture_output=True, text=True, timeout=900)
        body, _, code = out.stdout.rpartition("\n")
        return int(code or 0), body, time.time() - t0

    def spmv(self, mid, kernel, x, runs, warmup):
        name, params = kernel_spec(kernel)
        url = "%s/v1/matrices/%s/spmv?kernel=%s&runs=%d&warmup=%d%s" % (
            self.base, mid, name, runs, warmup, "".join("&%s=%s" % kv for kv in params.items()))
        req = urllib.request.Request(url, data=x.tobytes(), method="POST",
                                     headers={"Content-Type": "application/octet-stream"})
        try:
            with urllib.request.urlopen(req, timeout=600) as r:
                return np.frombuffer(r.read(), dtype=np.float64), json.loads(r.headers.get("X-SpMV-Stats", "{}")), None
        except urllib.error.HTTPError as e:
            return None, None, "HTTP %d %s" % (e.code, e.read()[:400])

    def call(self, method, path, body=None, ctype="application/json", accept=None):
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        headers = {"Content-Type": ctype} if data is not None else {}
        if accept:
            headers["Accept"] = accept
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=600) as r:
                raw = r.read()
                return r.status, raw if accept else (json.loads(raw) if raw else {})
        except urllib.error.HTTPError as e:
            return e.code, e.read()[:400]

    def delete(self, mid):
        req = urllib.request.Request(self.base + "/v1/matrices/" + mid, method="DELETE")
        try:
            urllib.request.urlopen(req, timeout=120).read()
        except urllib.error.HTTPError:
            pass

    def stop(self):
        try:
            with open(os.path.join(self.state, "rank0.pid")) as f:
                os.kill(int(f.read().strip()), signal.SIGTERM)
            self.proc.wait(timeout=120)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        return self.proc.returncode


def rel_err(y, ref):
    if y is None or len(y) != len(ref):
        return float("inf")
    return float(np.max(np.abs(y - ref)) / max(float(np.max(np.abs(ref))), 1e-300))


NG = 2              # GPUs of the sharded job (--gpus)
MULTI = "2 GPUs"    # its rows' mode


def load_csr(path):
    z = np.load(path)
    return sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=tuple(z["shape"]))


def run_matrix(job, name, path, a, runs, warmup, rows_out, log):
    """Unsharded on GPU 0, then sharded over the ranks' GPUs: every kernel, y checked."""
    rng = np.random.default_rng()
    x = rng.uniform(-1.0, 1.0, a.shape[1])
    ref = a @ x
    bad = 0
    res = {"matrix": name, "rows": a.shape[0], "nnz": int(a.nnz), "csr_bytes": int(a.nnz * 12 + (a.shape[0] + 1) * 4)}
    for mode, query in (("1 GPU", "device=0"), (MULTI, "shard=true")):
        code, body, up_s = job.upload(path, query + "&name=" + name)
        log.write("%s %s upload: %d in %.1f s %s\n" % (name, mode, code, up_s, body[:600]))
        log.flush()
        if code != 201:
            print("  %s %s: upload HTTP %d %s" % (name, mode, code, body[:300]))
            bad += 1
            continue
        d = json.loads(body)
        mid = d["id"]
        if mode == MULTI:
            res["shards"] = [{k: s.get(k) for k in ("rank", "rows", "nnz", "halo_recv", "halo_send", "device", "bytes")}
                             for s in d.get("shards", [])]
        for k in KERNELS:
            y, st, err = job.spmv(mid, k, x, runs, warmup)
            e = rel_err(y, ref)
            if err and "too_large" in err:  # the padding rule refuses the format: reported, not a failure
                print("  %s %s %s: refused by the padding rule" % (name, mode, k))
                log.write("%s %s %s: refused: %s\n" % (name, mode, k, err))
                continue
            if err or e > 1e-12:
                bad += 1
                print("  %s %s %s: %s rel err %.3g" % (name, mode, k, err or "", e))
                log.write("%s %s %s: %s rel err %.3g\n" % (name, mode, k, err, e))
                continue
            s = st["stats"]
            row = {"matrix": name, "mode": mode, "kernel": k, "ran": st.get("kernel"), "median_ms": s["median_ms"],
                   "min_ms": s.get("min_ms"), "compute_ms": s.get("compute_ms"), "comm_ms": s.get("comm_ms"),
                   "device_median_ms": s.get("device_median_ms", s["median_ms"] if mode == "1 GPU" else None),
                   "gbps": s.get("gbps"), "rel_err": e}
            if "cluster" in st:
                row["gather_ms"] = st["cluster"].get("gather_ms")
                row["kernels"] = st["cluster"].get("kernels")
                row["exchange"] = st["cluster"].get("exchange")
            rows_out.append(row)
            print("  %-14s %-6s %-16s median %8.4f ms  compute %s comm %s  (ran %s, err %.1e, halo %s)" % (
                name, mode, k, s["median_ms"], s.get("compute_ms"), s.get("comm_ms"), st.get("kernel"), e,
                st.get("cluster", {}).get("exchange", "-")))
            sys.stdout.flush()
        if mode == MULTI:
            bad += distributed(job, name, mid, x, ref, runs, warmup, rows_out, log)
        bad += solve_rows(job, name, mode, mid, x, rows_out, log)
        job.delete(mid)
    return res, bad


SOLVE_ITERS = 200
SOLVE_KERNELS = ["gpu.csr.vector", "gpu.psell"]


def solve_rows(job, name, mode, mid, b, rows_out, log):
    """CG without a preconditioner, SOLVE_ITERS iterations (tol out of reach), as a binary solve: the
    daemon's time per iteration on one GPU and on the shards, with the ranks' split."""
    bad = 0
    for k in SOLVE_KERNELS:
        for rep in range(2):  # the first builds the kernel's format and tunes nothing else: the second is timed
            url = "%s/v1/matrices/%s/solve?method=cg&tol=1e-13&maxit=%d&kernel=%s" % (job.base, mid, SOLVE_ITERS, k)
            req = urllib.request.Request(url, data=b.tobytes(), method="POST",
                                         headers={"Content-Type": "application/octet-stream"})
            try:
                with urllib.request.urlopen(req, timeout=600) as r:
                    r.read()
                    rep_json = json.loads(r.headers.get("X-SpMV-Solve", "{}"))
            except urllib.error.HTTPError as e:
                print("  %s %s solve %s: HTTP %d %s" % (name, mode, k, e.code, e.read()[:300]))
                log.write("%s %s solve %s: HTTP %d\n" % (name, mode, k, e.code))
                bad += 1
                break
        else:
            it = max(1, rep_json.get("iterations", 1))
            t = rep_json.get("time", {})
            cl = rep_json.get("cluster", {})
            row = {"matrix": name, "mode": "solve, " + mode, "kernel": k, "iterations": it,
                   "total_ms": t.get("total_ms"), "ms_per_iteration": t.get("total_ms", 0) / it,
                   "spmv_ms": t.get("spmv_ms"), "vector_ms": t.get("vector_ms"),
                   "compute_ms": cl.get("compute_ms"), "exchange_ms": cl.get("exchange_ms"),
                   "reduce_ms": cl.get("reduce_ms"), "fused": rep_json.get("fused")}
            rows_out.append(row)
            log.write("%s %s solve %s: %s\n" % (name, mode, k, json.dumps(rep_json)[:2000]))
            print("  %-14s %-6s solve cg %-16s %d it  %.4f ms/it  fused %s (spmv %s vector %s compute %s exchange %s "
                  "reduce %s)" % (name, mode, k, it, row["ms_per_iteration"], rep_json.get("fused"), t.get("spmv_ms"),
                                  t.get("vector_ms"), cl.get("compute_ms"), cl.get("exchange_ms"), cl.get("reduce_ms")))
            sys.stdout.flush()
    return bad


def median_wall(fn, n):
    t = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        t.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(t))


REQUESTS = 15


def kernel_spec(k):
    """A --kernels entry: a kernel's name, or name:param=value[:param=value...] (gpu.psell:block_size=128), a
    kernel with parameters of its own (docs/api.md's product parameters); the name and a dict of the values."""
    name, *kv = k.split(":")
    return name, {a: int(b) for a, b in (x.split("=", 1) for x in kv)}


def distributed(job, name, mid, x, ref, runs, warmup, rows_out, log):
    """x and y as vectors distributed like the sharded matrix mid."""
    st, dx = job.call("POST", "/v1/vectors?like=%s" % mid, x.tobytes(), "application/octet-stream")
    st2, dy = job.call("POST", "/v1/vectors", {"like": mid, "side": "rows", "fill": 0.0})
    if st != 201 or st2 != 201:
        print("  %s: distributed vectors not made: %s %s" % (name, dx, dy))
        return 1
    X, Y = dx["id"], dy["id"]
    log.write("%s distributed x: %s\n" % (name, json.dumps(dx)))
    bad = 0
    for k in KERNELS:
        kname, params = kernel_spec(k)
        st, d = job.call("POST", "/v1/matrices/%s/spmv" % mid, dict(params, kernel=kname, x={"vector": X},
                                                                     y={"vector": Y}, runs=runs, warmup=warmup))
        y = None
        if st == 200:
            code, raw = job.call("GET", "/v1/vectors/%s" % Y, accept="application/octet-stream")
            y = np.frombuffer(raw, dtype=np.float64) if code == 200 else None
        e = rel_err(y, ref)
        if st == 422 and b"too_large" in d:  # the padding rule refuses the format: reported, not a failure
            print("  %s distributed %s: refused by the padding rule" % (name, k))
            continue
        if st != 200 or e > 1e-12:
            bad += 1
            print("  %s distributed %s: HTTP %s %s rel err %.3g" % (name, k, st, str(d)[:300], e))
            continue
        s = d["stats"]
        rows_out.append({"matrix": name, "mode": MULTI + ", x and y distributed", "kernel": k, "ran": d.get("kernel"),
                         "median_ms": s["median_ms"], "compute_ms": s.get("compute_ms"), "comm_ms": s.get("comm_ms"),
                         "device_median_ms": s.get("device_median_ms"),
                         "rel_err": e})
        print("  %-14s dist   %-16s median %8.4f ms  compute %s comm %s  (ran %s, err %.1e)" % (
            name, k, s["median_ms"], s.get("compute_ms"), s.get("comm_ms"), d.get("kernel"), e))
    k = "gpu.csr.vector"
    walls = {
        "y gathered and sent back (binary x in, y out)": median_wall(lambda: job.spmv(mid, k, x, 1, 0), REQUESTS),
        "x and y on the ranks": median_wall(lambda: job.call("POST", "/v1/matrices/%s/spmv" % mid, {
            "kernel": k, "x": {"vector": X}, "y": {"vector": Y}}), REQUESTS),
        "/v1/ops: spmv + dot (half a CG iteration)": median_wall(lambda: job.call("POST", "/v1/ops", {"steps": [
            {"op": "spmv", "matrix": mid, "x": X, "y": Y, "kernel": k}, {"op": "dot", "x": X, "y": Y, "as": "pq"}]}),
            REQUESTS),
    }
    for what, ms in walls.items():
        rows_out.append({"matrix": name, "mode": "request wall", "kernel": k, "what": what, "median_ms": ms})
        print("  %-14s request %-50s median %9.3f ms" % (name, what, ms))
    for v in (X, Y):
        job.call("DELETE", "/v1/vectors/%s" % v)
    return bad


def table(results, rows):
    """Two measures side by side: the 2 GPUs' runs by CUDA events (the slowest rank's, from the run's first
    operation queued to its last done: how the 1-GPU product is timed, so the like-for-like speed-up) and by the
    host clock around each whole synchronised run."""
    out = ["| matrix | rows | nnz | kernel | 1 GPU median ms (events) | %s median ms (events) | speed-up | "
           "%s median ms (host clock) | speed-up (host clock) | %s compute ms | %s comm ms |" % ((MULTI,) * 4),
           "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]

    def dev(x):
        return x["device_median_ms"] if x.get("device_median_ms") else float("nan")

    def line(r, label, one, two, bold=False):
        b = "**" if bold else ""
        out.append("| %s | %d | %d | %s | %.4f | %.4f | %s%.2f×%s | %.4f | %.2f× | %s | %s |" % (
            r["matrix"], r["rows"], r["nnz"], label, one["median_ms"], dev(two), b, one["median_ms"] / dev(two), b,
            two["median_ms"], one["median_ms"] / two["median_ms"],
            "%.4f" % two["compute_ms"] if two.get("compute_ms") is not None else "-",
            "%.4f" % two["comm_ms"] if two.get("comm_ms") is not None else "-"))

    for r in results:
        for k in KERNELS:
            one = next((x for x in rows if x["matrix"] == r["matrix"] and x["mode"] == "1 GPU" and x["kernel"] == k), None)
            two = next((x for x in rows if x["matrix"] == r["matrix"] and x["mode"] == MULTI and x["kernel"] == k), None)
            if one and two:
                line(r, k if k != "auto" else "auto (%s / %s)" % (one["ran"], two["ran"]), one, two)
        best = {}
        for mode, key in (("1 GPU", lambda x: x["median_ms"]), (MULTI, dev)):
            c = [x for x in rows if x["matrix"] == r["matrix"] and x["mode"] == mode and x["kernel"] != "auto"]
            best[mode] = min(c, key=key) if c else None
        if best["1 GPU"] and best[MULTI]:
            line(r, "**best of each** (%s / %s)" % (best["1 GPU"]["kernel"], best[MULTI]["kernel"]), best["1 GPU"],
                 best[MULTI], True)
    return "\n".join(out)


def gen(bundle, tmp, name, args):
    path = os.path.join(tmp, name + ".npz")
    t0 = time.time()
    subprocess.run([os.path.join(bundle, "bin", "spmv-gen")] + args + ["--seed", "11", "--npz=stored", "--out", path],
                   check=True, stdout=subprocess.DEVNULL, timeout=600)
    print("generated %s (%.1f GB) in %.1f s" % (name, os.path.getsize(path) / 1e9, time.time() - t0))
    return path


def gen_fv(bundle, tmp, n):
    """Heterogeneous finite-volume diffusion (log-normal permeability, seeded), as
    the realistic set builds it (tools/solve_problems.py), uploaded as .npz."""
    sys.path.insert(0, bundle)
    import solve_problems
    path = os.path.join(tmp, "fv_diffusion.npz")
    t0 = time.time()
    sp.save_npz(path, solve_problems.fv_diffusion(n), compressed=False)
    print("generated fv_diffusion n=%d (%.1f GB) in %.1f s" % (n, os.path.getsize(path) / 1e9, time.time() - t0))
    return path


def main():
    global NG, MULTI, KERNELS, SOLVE_KERNELS
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--poisson-n", type=int, default=6400)       # 6400^2 rows, 204.7 M non-zeros
    ap.add_argument("--powerlaw-n", type=int, default=6000000)   # 16 a row on average: ~100 M
    ap.add_argument("--fv-n", type=int, default=220)             # 220^3 rows, ~74 M non-zeros
    ap.add_argument("--big-nnz", type=float, default=9e8)
    ap.add_argument("--free-gb", type=float, default=10.0)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--gpus", type=int, default=0,
                    help="ranks (one a GPU) of the sharded job; 0: every GPU the host has (at least 2)")
    ap.add_argument("--skip", default="", help="comma list of: poisson, fv, powerlaw, big")
    ap.add_argument("--requests", type=int, default=15, help="whole requests timed per kind")
    ap.add_argument("--spmvd-args", default="", help="more options for every rank's spmvd, e.g. '--cluster-halo nccl'")
    ap.add_argument("--kernels", default=",".join(KERNELS),
                    help="comma list of the products' kernels, each a name or name:param=value[:...] "
                         "(gpu.psell:block_size=128)")
    ap.add_argument("--solve-kernels", default=",".join(SOLVE_KERNELS), help="comma list of the CG rows' kernels")
    a = ap.parse_args()
    KERNELS = list(filter(None, a.kernels.split(",")))
    SOLVE_KERNELS = list(filter(None, a.solve_kernels.split(",")))
    if a.gpus < 1:
        try:
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60).stdout
            a.gpus = max(2, sum(1 for line in out.splitlines() if line.startswith("GPU ")))
        except (OSError, subprocess.SubprocessError):
            a.gpus = 2
    NG, MULTI = a.gpus, "%d GPUs" % a.gpus
    global REQUESTS
    REQUESTS = a.requests
    b = os.path.abspath(a.bundle)
    skip = set(filter(None, a.skip.split(",")))
    os.makedirs(a.out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="spmvd-scaling-", dir=os.environ.get("SCALING_TMP"))
    log = open(os.path.join(a.out, "scaling-detail.log"), "w")
    print("seed: x drawn fresh (numpy default_rng); matrices spmv-gen --seed 11")
    rows, results, bad = [], [], 0
    job = Job(b, NG, tmp, os.path.join(a.out, "scaling-job.log"), a.spmvd_args.split())
    print("spmvd options: %s" % (a.spmvd_args or "(defaults)"))
    try:
        for name, gargs, on in (("poisson2d", ["--kind", "poisson2d", "--n", str(a.poisson_n)], "poisson"),
                                ("fv_diffusion", None, "fv"),
                                ("powerlaw", ["--kind", "powerlaw", "--n", str(a.powerlaw_n), "--per-row", "16"],
                                 "powerlaw")):
            if on in skip:
                continue
            path = gen(b, tmp, name, gargs) if gargs else gen_fv(b, tmp, a.fv_n)
            m = load_csr(path)
            r, nb = run_matrix(job, name, path, m, a.runs, a.warmup, rows, log)
            results.append(r)
            bad += nb
            del m
            os.unlink(path)
    finally:
        rc = job.stop()
        print("job stopped: mpirun rc=%s" % rc)
    big = None
    if "big" not in skip:
        big, nb = big_matrix(a, b, tmp, log)
        bad += nb
    md = ["# Strong scaling, 1 GPU against %d (generated by tools/bundle/bench_scaling.py)" % NG, "",
          table(results, rows), "", "## x and y distributed on the %s" % MULTI, "",
          "| matrix | kernel | median ms (events) | median ms (host clock, slowest rank's run) | compute ms | comm ms |",
          "| --- | --- | ---: | ---: | ---: | ---: |"]
    md += ["| %s | %s | %s | %.4f | %.4f | %.4f |" % (
        r["matrix"], r["kernel"] if r["kernel"] != "auto" else "auto (%s)" % r["ran"],
        "%.4f" % r["device_median_ms"] if r.get("device_median_ms") else "-", r["median_ms"], r["compute_ms"], r["comm_ms"])
        for r in rows if r["mode"] == MULTI + ", x and y distributed"]
    md += ["", "| matrix | request (gpu.csr.vector, 1 run) | median wall ms |", "| --- | --- | ---: |"]
    md += ["| %s | %s | %.3f |" % (r["matrix"], r["what"], r["median_ms"]) for r in rows if r["mode"] == "request wall"]
    md += ["", "## CG on one GPU and on the %s (%d iterations, no preconditioner, binary b)" % (MULTI, SOLVE_ITERS), "",
           "| matrix | kernel | 1 GPU ms/iteration | %s ms/iteration | ratio | compute ms | exchange ms | reduce ms |" % MULTI,
           "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        if r["mode"] != "solve, " + MULTI:
            continue
        one = next((x for x in rows if x["mode"] == "solve, 1 GPU" and x["matrix"] == r["matrix"]
                    and x["kernel"] == r["kernel"]), None)
        md.append("| %s | %s | %s | %.4f | %s | %s | %s | %s |" % (
            r["matrix"], r["kernel"], "%.4f" % one["ms_per_iteration"] if one else "-", r["ms_per_iteration"],
            "%.2f" % (r["ms_per_iteration"] / one["ms_per_iteration"]) if one else "-", r["compute_ms"],
            r["exchange_ms"], r["reduce_ms"]))
    md += [""]
    if big:
        md += ["## A matrix larger than one GPU's free memory", "", "```", json.dumps(big, indent=1), "```"]
    open(os.path.join(a.out, "scaling.md"), "w").write("\n".join(md) + "\n")
    json.dump({"results": results, "rows": rows, "big": big}, open(os.path.join(a.out, "scaling.json"), "w"), indent=1)
    print("\n".join(md))
    print("wrong or failed: %d" % bad)
    return 1 if bad else 0


def big_matrix(a, b, tmp, log):
    """A PyTorch process holds all but free_gb of each GPU; the matrix's CSR is larger than that."""
    bad = 0
    rows_n = int(a.big_nnz) // 16
    path = gen(b, tmp, "uniform_big", ["--kind", "uniform", "--n", str(rows_n), "--per-row", "16"])
    hog_py = ("import torch, sys, time\n"
              "free_gb = float(sys.argv[1]); held = []\n"
              "for d in range(torch.cuda.device_count()):\n"
              "    f, t = torch.cuda.mem_get_info(d)\n"
              "    n = int(f - free_gb * 2**30)\n"
              "    held.append(torch.empty(n, dtype=torch.uint8, device='cuda:%d' % d))\n"
              "    print('GPU %d: held %.1f GiB of %.1f free' % (d, n / 2**30, f / 2**30), flush=True)\n"
              "print('ready', flush=True)\n"
              "time.sleep(3600)\n")
    hog = subprocess.Popen([sys.executable, "-c", hog_py, str(a.free_gb)], stdout=subprocess.PIPE, text=True)
    info = {"free_gb_left_per_gpu": a.free_gb}
    for line in hog.stdout:
        print("  hog: " + line.strip())
        info.setdefault("hog", []).append(line.strip())
        if line.startswith("ready"):
            break
    job = None
    try:
        job = Job(b, NG, os.path.join(tmp, "big"), os.path.join(a.out, "scaling-big-job.log"))
        m = load_csr(path)
        info.update(rows=m.shape[0], nnz=int(m.nnz), csr_gb=(m.nnz * 12 + (m.shape[0] + 1) * 4) / 1e9)
        code, body, up_s = job.upload(path, "device=0&name=big_whole")
        info["unsharded_upload"] = {"code": code, "seconds": round(up_s, 1), "body": body[:300]}
        print("  big unsharded onto GPU 0: %d in %.1f s %s" % (code, up_s, body[:200]))
        if code != 507:
            bad += 1
        # naming neither shard nor device: shard_when_full (on by default) shards it
        code, body, up_s = job.upload(path, "name=big_auto")
        auto = code == 201 and json.loads(body).get("sharded") is True
        info["auto_upload"] = {"code": code, "seconds": round(up_s, 1), "sharded": auto}
        print("  big, naming neither shard nor device: %d in %.1f s, sharded %s" % (code, up_s, auto))
        if not auto:
            bad += 1
            info["auto_upload"]["body"] = body[:400]
            if code == 201:
                job.delete(json.loads(body)["id"])
            code, body, up_s = job.upload(path, "shard=true&name=big_sharded")
            info["sharded_upload"] = {"code": code, "seconds": round(up_s, 1)}
            print("  big, shard=true: %d in %.1f s" % (code, up_s))
        if code == 201:
            d = json.loads(body)
            info["shards"] = d.get("shards")
            x = np.random.default_rng().uniform(-1.0, 1.0, m.shape[1])
            ref = m @ x
            y, st, err = job.spmv(d["id"], "cusparse.csr", x, 10, 2)
            e = rel_err(y, ref)
            info["spmv"] = {"error": err, "rel_err": e, "stats": st and st.get("stats")}
            print("  big sharded cusparse.csr: %s rel err %.2g %s" % (err or "ok", e, st and st.get("stats")))
            if err or e > 1e-12:
                bad += 1
        else:
            bad += 1
            info["upload_body"] = body[:400]
        log.write(json.dumps(info) + "\n")
    finally:
        if job:
            job.stop()
        hog.kill()
        hog.wait()
        os.unlink(path)
    return info, bad


if __name__ == "__main__":
    sys.exit(main())
