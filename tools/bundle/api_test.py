#!/usr/bin/env python3
"""api_test.py — the end-to-end API test on the GPU host (run by run.sh).

Starts the bundle's spmvd on loopback with a fresh state directory, waits
for /v1/ready, then for float64 and float32: uploads every matrix of
shared/matrices/real/ with curl (multipart; float64 as CSR alone, formats
built on first use; float32 with every format pinned, those the padding
rule refuses skipped), multiplies it
over HTTP with every GPU kernel that /v1/kernels lists as available
(default parameters, x[j] = 1 + (j mod 7)/8), compares y with the peer's
answer in expected.json (float64: 1e-12 relative to ||y||_inf; float32:
1e-5 relative to y_norm2, as matrices/README.md says; a kernel whose
format the padding rule refuses, computed here from the file, must answer
422), checks after every kernel that /metrics' matrix + vector + scratch
bytes equal used_by_spmvd, and deletes the matrix. Then checks that
used_by_spmvd less scratch is back at its start, stops
the daemon with SIGTERM, prints a table of passes per kernel and dtype,
and exits 0 only if everything passed. Standard library only (the host
has python3 and curl, nothing fetched).
"""
import argparse
import array
import json
import random
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from padding import refused, row_lengths

PORT = 18080
BASE = "http://127.0.0.1:%d" % PORT
# spmv-gen shapes of the timing section (8-21 M non-zeros: past the 50 MB L2)
TIMING_SHAPES = [("poisson2d", ["--n", "2048"]), ("powerlaw", ["--n", "1000000", "--per-row", "8"]),
                 ("banded_dense_row", ["--n", "500000", "--per-row", "16", "--dense-len", "200000"])]


def request(method, path, body=None, timeout=120):
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"} if data is not None else {}
    req = urllib.request.Request(BASE + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
        return 0, str(e).encode()


def as_float(v):
    return float(v) if not isinstance(v, str) else float(v.replace("Infinity", "inf"))


def rel_err(y, ref, norm):
    if len(y) != len(ref):
        return float("inf")
    diff = 0.0
    for a, b in zip(y, ref):
        a = as_float(a)
        if a != a:
            return float("inf")
        diff = max(diff, abs(a - b))
    return diff / max(norm, 1e-300)


def wait_ready(proc, seconds):
    t0 = time.time()
    while time.time() - t0 < seconds:
        if proc.poll() is not None:
            return False
        status, _ = request("GET", "/v1/ready", timeout=5)
        if status == 200:
            return True
        time.sleep(0.25)
    return False


def upload(path, dtype, formats="csr"):
    out = subprocess.run(["curl", "-sS", "-w", "\n%{http_code}", "-F", "file=@" + path, "-F", "dtype=" + dtype,
                          "-F", "formats=" + formats, BASE + "/v1/matrices"],
                         capture_output=True, text=True, timeout=120)
    body, _, code = out.stdout.rpartition("\n")
    return int(code or 0), body


def metrics():
    status, body = request("GET", "/metrics")
    out = {}
    for line in body.decode().splitlines() if status == 200 else []:
        if line and not line.startswith("#"):
            key, _, val = line.rpartition(" ")
            out[key] = float(val)
    return out


def accounting(dev="gpu0"):
    """(matrices + vectors + scratch, used_by_spmvd) from /metrics, once the worker has refreshed its numbers."""
    for _ in range(40):
        m = metrics()
        parts = (m.get('spmvd_matrix_bytes{device="%s"}' % dev, 0) + m.get('spmvd_vector_bytes{device="%s"}' % dev, 0)
                 + m.get('spmvd_device_memory_bytes{device="%s",kind="scratch"}' % dev, 0))
        used = m.get('spmvd_device_memory_bytes{device="%s",kind="used_by_spmvd"}' % dev, -1)
        if parts == used:
            break
        time.sleep(0.05)
    return parts, used


def spmv_binary(mid, kernel, x, runs, warmup):
    """One multiply in the binary encoding: y (array of doubles) and the stats."""
    url = "%s/v1/matrices/%s/spmv?kernel=%s&runs=%d&warmup=%d" % (BASE, mid, kernel, runs, warmup)
    req = urllib.request.Request(url, data=x.tobytes(), method="POST",
                                 headers={"Content-Type": "application/octet-stream"})
    try:
        with urllib.request.urlopen(req, timeout=300) as resp:
            y = array.array("d")
            y.frombytes(resp.read())
            return y, json.loads(resp.headers.get("X-SpMV-Stats", "{}")), None
    except urllib.error.HTTPError as e:
        return None, None, "HTTP %d %s" % (e.code, e.read()[:300])


def timings(args, gpu, tally):
    """Generated matrices larger than the L2 (not asserted: reported): each
    GPU kernel's median over 20 runs, its GB/s, its ratio to cusparse.csr,
    and its y against cpu.csr.omp's (1e-12 relative, float64)."""
    failures = 0
    gen = os.path.join(args.bundle, "bin", "spmv-gen")
    tmp = tempfile.mkdtemp(prefix="spmv-gen-")
    for kind, extra in TIMING_SHAPES:
        path = os.path.join(tmp, kind + ".mtx")
        subprocess.run([gen, "--kind", kind] + extra + ["--seed", "7", "--out", path], check=True, timeout=120)
        t0 = time.time()
        code, body = upload(path, "float64")
        if code != 201:
            print("FAIL upload %s: HTTP %d %s" % (kind, code, body[:300]))
            failures += 1
            continue
        desc = json.loads(body)
        print("\n%s: %d x %d, %d nnz, upload %.1f s; descriptor timings %s" %
              (kind, desc["rows"], desc["cols"], desc["nnz"], time.time() - t0,
               json.dumps({k: v for k, v in desc.items() if "ms" in k or k in ("timings", "formats", "device")})[:500]))
        x = array.array("d", (random.uniform(-1, 1) for _ in range(desc["cols"])))
        ref, _, err = spmv_binary(desc["id"], "cpu.csr.omp", x, 1, 0)
        if ref is None:
            print("FAIL cpu.csr.omp on %s: %s" % (kind, err))
            failures += 1
            continue
        ref_inf = max(abs(v) for v in ref)
        rows = []
        for k in gpu:
            y, st, err = spmv_binary(desc["id"], k, x, 20, 3)
            t = tally.setdefault((k, "float64 big"), [0, 0])
            if y is None and err.startswith("HTTP 422") and "max_padding" in err:
                # this matrix's ELL (or HLL) pads past the rule: refused, nothing built
                print("%s on %s: refused by the padding rule: %s" % (k, kind, err[:200]))
                t[0] += 1
                continue
            if y is None:
                print("FAIL %s on %s: %s" % (k, kind, err))
                t[1] += 1
                failures += 1
                continue
            e = max(abs(a - b) for a, b in zip(y, ref)) / max(ref_inf, 1e-300) if len(y) == len(ref) else 1e300
            ok = e <= 1e-12
            t[0 if ok else 1] += 1
            failures += not ok
            st = st.get("stats", st)
            rows.append((k, st.get("median_ms", 0), st.get("gbps", 0), e, ok))
        base = next((r[1] for r in rows if r[0] == "cusparse.csr"), 0)
        print("%-22s %10s %8s %10s %9s" % ("kernel", "median ms", "GB/s", "vs cusp.csr", "rel err"))
        for k, ms, gbps, e, ok in rows:
            print("%-22s %10.4f %8.1f %10.2f %9.1e %s" % (k, ms, gbps, base / ms if ms else 0, e, "" if ok else "FAIL"))
        request("DELETE", "/v1/matrices/%s" % desc["id"])
    return failures


def scratch_all():
    """Scratch bytes over every GPU (matrices land on any of them on a multi-GPU host)."""
    return sum(v for key, v in metrics().items() if key.startswith("spmvd_device_memory_bytes{") and 'kind="scratch"' in key)


def gpu_bytes_held():
    status, body = request("GET", "/v1/info")
    if status != 200:
        return None
    devs = json.loads(body).get("devices", [])
    return sum(d.get("memory_used_by_spmvd", 0) for d in devs if "memory_used_by_spmvd" in d)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="gpu", help="kernels of this device (cpu: to try the script without a GPU)")
    args = ap.parse_args()
    real = os.path.join(args.bundle, "shared", "matrices", "real")
    expected = json.load(open(os.path.join(real, "expected.json")))["matrices"]
    state = tempfile.mkdtemp(prefix="spmvd-state-")
    log_path = os.path.join(state, "spmvd.log")
    log = open(log_path, "w")
    proc = subprocess.Popen([os.path.join(args.bundle, "bin", "spmvd"), "--listen", "127.0.0.1:%d" % PORT,
                             "--state-dir", state], stdout=log, stderr=subprocess.STDOUT)
    failures = 0
    tally = {}
    try:
        if not wait_ready(proc, 60):
            print("FAIL spmvd did not become ready (exit %s); see spmvd.log" % proc.poll())
            return 1
        status, body = request("GET", "/v1/info")
        info = json.loads(body)
        print("info:", json.dumps(info.get("devices", info))[:600])
        status, body = request("GET", "/v1/kernels")
        kernels = json.loads(body)["kernels"]
        # SpMSpM kernels (op "spmspm") are not y = A*x: test_gpu_spmspm covers them
        kernels = [k for k in kernels if k.get("op", "spmv") == "spmv"]
        gpu = [k["name"] for k in kernels if k.get("device") == args.device and k.get("available")]
        for k in kernels:
            if k.get("device") == args.device and not k.get("available"):
                print("unavailable: %s (%s)" % (k["name"], k.get("reason")))
        if not gpu:
            print("FAIL no %s kernel is available" % args.device)
            return 1
        held0 = gpu_bytes_held()
        scratch0 = scratch_all()
        fmt_of = {k["name"]: k.get("format") for k in kernels}
        acct = [0, 0]
        for dtype in ("float64", "float32"):
            for name in sorted(expected):
                e = expected[name]
                lens = row_lengths(os.path.join(real, name))
                # float64: CSR alone, formats built on first use; float32: every format pinned at upload
                pinned = "csr" if dtype == "float64" else "coo,csr,ell,hll,hyb"
                code, body = upload(os.path.join(real, name), dtype, pinned)
                if code != 201:
                    print("FAIL upload %s %s: HTTP %d %s" % (name, dtype, code, body[:300]))
                    failures += 1
                    continue
                desc = json.loads(body)
                mid = desc["id"]
                on_gpu = sorted(f["format"] for f in desc["formats"] if f["device"] != "host")
                want = ["csr"] if dtype == "float64" else sorted(
                    f for f in ("coo", "csr", "ell", "hll", "hyb") if not refused(lens, f))
                if on_gpu != want or desc["device_memory"]["total"] != desc["device_bytes"]:
                    print("FAIL upload %s %s holds %s on the GPU, want %s (device_memory %s)" % (
                        name, dtype, on_gpu, want, desc["device_memory"]))
                    failures += 1
                x = [1 + (j % 7) / 8 for j in range(e["cols"])]
                y_inf = max((abs(v) for v in e["y"]), default=0.0)
                for k in gpu:
                    t = tally.setdefault((k, dtype), [0, 0])
                    status, rbody = request("POST", "/v1/matrices/%s/spmv" % mid,
                                            {"kernel": k, "x": x, "runs": 3, "warmup": 1})
                    parts, used = accounting()
                    acct[parts == used] += 1
                    if parts != used:
                        print("FAIL accounting after %s %s %s: matrices + vectors + scratch %d != used_by_spmvd %d" % (
                            k, dtype, name, parts, used))
                        failures += 1
                    if refused(lens, fmt_of.get(k)):
                        if status == 422 and b"max_padding" in rbody:
                            t[0] += 1
                        else:
                            print("FAIL %s %s %s: the padding rule refuses its format, got HTTP %d %s" % (
                                k, dtype, name, status, rbody[:200]))
                            t[1] += 1
                            failures += 1
                        continue
                    if status != 200:
                        print("FAIL %s %s %s: HTTP %d %s" % (k, dtype, name, status, rbody[:300]))
                        t[1] += 1
                        failures += 1
                        continue
                    ans = json.loads(rbody)
                    if dtype == "float64":
                        err, bound = rel_err(ans["y"], e["y"], y_inf), 1e-12
                    else:
                        err, bound = rel_err(ans["y"], e["y"], e["y_norm2"]), 1e-5
                    if not err <= bound:
                        print("FAIL %s %s %s: relative error %.3g > %.3g" % (k, dtype, name, err, bound))
                        t[1] += 1
                        failures += 1
                    else:
                        t[0] += 1
                status, _ = request("DELETE", "/v1/matrices/%s" % mid)
                if status != 204:
                    print("FAIL DELETE %s: HTTP %d" % (mid, status))
                    failures += 1
        if args.device == "gpu":
            failures += timings(args, gpu, tally)
        held1 = gpu_bytes_held()
        scratch1 = scratch_all()
        print("accounting (matrices + vectors + scratch == used_by_spmvd) after each kernel: %d agreed, %d not" % (
            acct[1], acct[0]))
        print("device bytes held by spmvd: before uploads %s (scratch %d), after deletes %s (scratch %d)" % (
            held0, scratch0, held1, scratch1))
        if held0 is not None and held1 is not None and held1 - scratch1 != held0 - scratch0:
            print("FAIL used_by_spmvd less scratch did not return to its start after the deletes")
            failures += 1
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = "killed"
        print("spmvd exit status after SIGTERM:", rc)
        log.close()
        with open(log_path) as f:
            lines = f.readlines()
        print("spmvd.log: %d lines, last ones:" % len(lines))
        sys.stdout.writelines(lines[-8:])
    print("%-22s %-8s %6s %6s" % ("kernel", "dtype", "passed", "failed"))
    for (k, dtype), (p, f) in sorted(tally.items()):
        print("%-22s %-8s %6d %6d %s" % (k, dtype, p, f, "FAIL" if f else "ok"))
    print("api_test: %d failures" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
