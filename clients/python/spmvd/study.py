"""spmvd.study: a collection study — every matrix of a folder, every kernel, both dtypes, one report.

What the five studies spmvd began from measured (/work/shared/seeds, docs/studies/README.md),
over a folder of matrices (``.mtx``, ``.mtx.gz``, ``.npz``) on a running daemon:

- :func:`collect` uploads each file once per dtype, benches the kernels (``POST .../bench`` with
  ``"stat": "mean"``, default: every available SpMV kernel of the daemon's device,
  ``cpu.csr.serial`` first) with the bench's thread sweep (``"threads"``: 0, each kernel's default
  team, then 1, 2, 4 ... cores for the CPU kernels taking ``threads``, with the bench's efficiency
  against cpu.csr.serial), runs the SpMSpM kernels against a thin B (``cols`` x 8, one entry a
  row), deletes what it uploaded and returns the results: a dict of flat records (``results.json``);
- :func:`render` turns those results into ``report.md`` and ``results.csv``; ``spmvctl study``
  renders the same tables, byte for byte, from the same JSON (tests/e2e/study.sh compares them);
- :func:`plots` draws the PNGs (per-matrix GFLOP/s and GB/s bars, speedup distributions,
  efficiency over threads, GFLOP/s over block sizes and hack sizes, SpMSpM times); ``spmvctl study --plot``
  runs ``python3 -m spmvd.study plot``;
- :func:`run` does all three into a folder.

Times are the **mean** over the timed runs after the warm-ups, as the studies reported them;
GFLOP/s and GB/s are the bench's at the mean (SpMSpM's route takes no ``stat``: its median rates
are scaled by median/mean). A kernel's figure for a matrix is its best parameter combination
(lowest mean) among the verified ones. The host's load average at the start is recorded.
Matrices that fail to upload, kernels refused or failing, appear in the report with the
daemon's reason; nothing is dropped silently.
"""
from __future__ import annotations

import argparse
import csv
import datetime
import io
import json
import math
import os
import platform
import sys
import time
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ._version import __version__

__all__ = ["collect", "render", "plots", "run", "matrix_files", "default_kernels", "FORMAT", "BASELINE",
           "SPMSPM_COLS", "NNZ_LIMITS", "tables_from_json"]

FORMAT = "spmvd-study/2"
BASELINE = "cpu.csr.serial"
# SpMSpM's kernel 0, the first of these the catalogue has: report 003's sequential baseline
# (cpu.spmspm.hash) where the daemon has it, else the reference cpu.spmspm.serial.
SPMSPM_BASES = ("cpu.spmspm.hash", "cpu.spmspm.serial")
SPMSPM_COLS = 8
NNZ_LIMITS = (0, 10000, 100000)
SUFFIXES = (".mtx", ".mtx.gz", ".npz")
CSV_COLUMNS = ("file", "dtype", "kind", "kernel", "params", "nnz", "mean_ms", "median_ms", "min_ms", "max_ms",
               "stddev_ms", "gflops", "gbps", "speedup", "efficiency", "verified", "max_rel_err", "error")


# ------------------------------------------------------------------ collecting

def matrix_files(folder: str) -> Tuple[List[str], List[str]]:
    """The folder's matrix files (sorted by name) and the other entries (listed in the report as ignored)."""
    names = sorted(os.listdir(folder))
    files = [n for n in names if n.endswith(SUFFIXES) and not os.path.isdir(os.path.join(folder, n))]
    return files, [n for n in names if n not in files]


def default_kernels(catalogue: Sequence[Mapping[str, Any]], device: str, op: str = "spmv") -> List[str]:
    """Every available kernel of ``op`` on ``device`` (``auto`` left out: it repeats another), the baseline first
    (SpMSpM: the first of SPMSPM_BASES in the catalogue)."""
    have = {k["name"] for k in catalogue if k.get("available")}
    base = BASELINE if op == "spmv" else next((b for b in SPMSPM_BASES if b in have), SPMSPM_BASES[-1])
    names = [k["name"] for k in catalogue if k.get("available") and k.get("op", "spmv") == op
             and k.get("device") == device and k["name"] != "auto"]
    return [base] + [n for n in names if n != base]


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def _server(info: Mapping[str, Any]) -> Dict[str, Any]:
    devs = info.get("devices", [])
    cpu = next((d for d in devs if d.get("kind") == "cpu"), {})
    gpus = [f'{d.get("name")}: {d.get("model", "?")}' for d in devs if d.get("kind") != "cpu"]
    return {"version": info.get("version"), "cuda": bool(info.get("build", {}).get("cuda")),
            "cores": int(cpu.get("cores", 1)), "gpus": gpus,
            "gpu_unavailable_reason": info.get("gpu_unavailable_reason", "")}


def _thread_counts(cores: int) -> List[int]:
    ts = [1]
    while ts[-1] * 2 <= cores:
        ts.append(ts[-1] * 2)
    if ts[-1] != cores:
        ts.append(cores)
    return ts


def _num(v: Any) -> Optional[float]:
    if isinstance(v, str) and v in ("NaN", "Infinity", "-Infinity"):
        v = float(v.replace("Infinity", "inf"))
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


def _stats(stats: Mapping[str, Any]) -> Dict[str, Optional[float]]:
    """mean_ms, median_ms, ... and GFLOP/s, GB/s as the stats object gives them (the bench's: at the mean)."""
    return {k: _num(stats.get(k)) for k in ("mean_ms", "median_ms", "min_ms", "max_ms", "stddev_ms", "gflops", "gbps")}


def spmspm_at_mean(stats: Mapping[str, Any]) -> Dict[str, Any]:
    """An SpMSpM answer's stats with GFLOP/s and GB/s at the mean: its route takes no ``stat`` and answers at
    the median (a stats object saying ``"stat": "mean"`` is kept as it is)."""
    out = dict(stats)
    mean, med = _num(stats.get("mean_ms")), _num(stats.get("median_ms"))
    if stats.get("stat") != "mean":
        for k in ("gflops", "gbps"):
            v = _num(stats.get(k))
            out[k] = v * med / mean if v is not None and mean and med else None
    return out


def _record(file: str, dtype: str, kind: str, kernel: str, params: Mapping[str, Any],
            stats: Optional[Mapping[str, Any]] = None, error: Optional[str] = None,
            verified: Optional[bool] = None, max_rel_err: Any = None, threads_used: Optional[int] = None,
            efficiency: Any = None) -> Dict[str, Any]:
    r: Dict[str, Any] = {"file": file, "dtype": dtype, "kind": kind, "kernel": kernel,
                         "params": {k: params[k] for k in sorted(params)}}
    r.update(_stats(stats or {}))
    r.update({"verified": verified, "max_rel_err": _num(max_rel_err), "threads_used": threads_used,
              "efficiency": _num(efficiency), "error": error})
    return r


def _bench_records(file: str, dtype: str, table: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """The bench's rows: "threads" records where its sweep set a count, "spmv" ones at the default team (0)."""
    out = []
    for row in table.get("results", []):
        err = row.get("error")
        if isinstance(err, Mapping):
            err = err.get("message")
        params = row.get("params", {})
        kind = "threads" if isinstance(params.get("threads"), int) and params["threads"] > 0 else "spmv"
        out.append(_record(file, dtype, kind, row["kernel"], params, row.get("stats"), err, row.get("verified"),
                           row.get("max_rel_err"), row.get("threads_used"), row.get("efficiency")))
    for s in table.get("skipped", []):
        out.append(_record(file, dtype, "spmv", s["kernel"], {}, None, s.get("reason", "skipped")))
    return out


def _thin_b(cols: int) -> Tuple[Any, Any, Any]:
    """B: cols x SPMSPM_COLS, row i holding (i, i mod 8) = 1 + (i mod 7)/8 (what spmvctl builds too)."""
    import numpy as np
    i = np.arange(cols)
    return i, i % SPMSPM_COLS, 1.0 + (i % 7) / 8.0


def _spmspm_records(client: Any, m: Any, file: str, dtype: str, kernels: Sequence[str], runs: int,
                    warmup: int) -> List[Dict[str, Any]]:
    if not kernels:
        return []
    cols = int(m.descriptor["cols"])
    try:
        b = client.upload(_thin_b(cols), shape=(cols, SPMSPM_COLS), dtype=dtype, name=f"{file}-thin-b")
    except Exception as e:
        return [_record(file, dtype, "spmspm", k, {}, None, f"B not uploaded: {e}") for k in kernels]
    out = []
    try:
        for k in kernels:
            body = {"b": b.id, "kernel": k, "runs": runs, "warmup": warmup}
            try:
                ans = client._json("POST", f"/v1/matrices/{m.id}/spmspm", json_body=body)
                out.append(_record(file, dtype, "spmspm", k, {}, spmspm_at_mean(ans.get("stats") or {})))
            except Exception as e:
                out.append(_record(file, dtype, "spmspm", k, {}, None, str(e)))
    finally:
        client.delete(b)
    return out


def _one_matrix(client: Any, path: str, opts: Mapping[str, Any], entry: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Every dtype of one file: upload, bench (its thread sweep too), SpMSpM, delete. Fills entry (shape, status)."""
    file = os.path.basename(path)
    recs: List[Dict[str, Any]] = []
    for dtype in opts["dtypes"]:
        try:
            m = client.upload(path, dtype=dtype, name=file, device=opts.get("device"))
        except Exception as e:
            recs.append(_record(file, dtype, "upload", "-", {}, None, str(e)))
            continue
        try:
            d = m.descriptor
            entry.update(rows=int(d["rows"]), cols=int(d["cols"]), nnz=int(d["nnz"]))
            if opts.get("max_nnz") and entry["nnz"] > opts["max_nnz"]:
                entry.update(status="skipped", reason=f'nnz {entry["nnz"]} is over --max-nnz {opts["max_nnz"]}')
                return []
            entry["status"] = "ok"
            threads = [0] + [t for t in opts["threads"] if t != 0] if opts["thread_kernels"] else None
            table = client.bench(m, kernels=opts["kernels"], runs=opts["runs"], warmup=opts["warmup"],
                                 threads=threads, stat="mean", progress=None).raw
            recs += _bench_records(file, dtype, table)
            recs += _spmspm_records(client, m, file, dtype, opts["spmspm_kernels"], opts["runs"], opts["warmup"])
        finally:
            client.delete(m)
    if entry["status"] == "pending":
        entry.update(status="error", reason="; ".join(f'{r["dtype"]}: {r["error"]}' for r in recs))
        recs = []
    return recs


def _options(client: Any, folder: str, kernels: Optional[Sequence[str]], dtypes: Sequence[str], runs: int,
             warmup: int, max_nnz: Optional[int], spmspm: Optional[Sequence[str]], threads: Optional[Sequence[int]],
             device: Optional[str]) -> Dict[str, Any]:
    if runs < 1 or warmup < 1:
        raise ValueError(f"runs and warmup must be at least 1 (the bench route reads a warmup of 0 as its default), "
                         f"not {runs} and {warmup}")
    if not dtypes or len(set(dtypes)) != len(dtypes) or any(d not in ("float32", "float64") for d in dtypes):
        raise ValueError(f"dtypes takes float32 and/or float64, not {list(dtypes)}")
    info = client.info()
    server = _server(info)
    cat = client.kernels()
    dev = "gpu" if server["gpus"] and device != "cpu" else "cpu"
    ks = list(kernels) if kernels else default_kernels(cat, dev)
    ks = [BASELINE] + [k for k in ks if k != BASELINE]
    by_name = {k["name"]: k for k in cat}
    tk = [k for k in ks if by_name.get(k, {}).get("device") == "cpu"
          and any(p["name"] == "threads" for p in by_name.get(k, {}).get("params", []))]
    sk = list(spmspm) if spmspm is not None else default_kernels(cat, dev, "spmspm")
    for names, op, what in ((ks, "spmv", "kernels"), (sk, "spmspm", "spmspm")):
        bad = [k for k in names if by_name.get(k, {}).get("op", "spmv" if k in by_name else None) != op]
        if bad:
            raise ValueError(f"{what} names {bad[0]}, which is no {op} kernel of the daemon's catalogue")
    return {"dir": os.path.abspath(folder), "kernels": ks, "spmspm_kernels": sk, "thread_kernels": tk,
            "threads": list(threads) if threads else _thread_counts(server["cores"]), "dtypes": list(dtypes),
            "runs": runs, "warmup": warmup, "max_nnz": max_nnz or 0, "device": device, "stat": "mean",
            "server": server}


def collect(client: Any, folder: str, *, kernels: Optional[Sequence[str]] = None,
            dtypes: Sequence[str] = ("float32", "float64"), runs: int = 10, warmup: int = 3,
            max_nnz: Optional[int] = None, spmspm: Optional[Sequence[str]] = None,
            threads: Optional[Sequence[int]] = None, device: Optional[str] = None,
            command: Optional[str] = None) -> Dict[str, Any]:
    """Runs the study on every matrix file of ``folder``; the results (what ``results.json`` holds).

    ``kernels``: SpMV kernels (default every available one of the daemon's device; the baseline
    ``cpu.csr.serial`` is always added first); ``spmspm``: SpMSpM kernels (default every available
    one, kernel 0 first: the first of SPMSPM_BASES available; ``[]`` for none); ``threads``: the counts of the thread
    sweep (default 1, 2, 4 ... the daemon's cores); ``max_nnz``: matrices past it are listed as
    skipped. ``device`` is the upload's (``cpu`` to keep matrices on the host)."""
    t0 = time.monotonic()
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    opts = _options(client, folder, kernels, dtypes, runs, warmup, max_nnz, spmspm, threads, device)
    load = [round(v, 2) for v in os.getloadavg()]  # the host is shared: the report says how busy it was
    files, others = matrix_files(folder)
    matrices: List[Dict[str, Any]] = []
    records: List[Dict[str, Any]] = []
    for f in files:
        entry: Dict[str, Any] = {"file": f, "rows": 0, "cols": 0, "nnz": 0, "status": "pending", "reason": ""}
        matrices.append(entry)
        records += _one_matrix(client, os.path.join(folder, f), opts, entry)
    for f in others:
        matrices.append({"file": f, "rows": 0, "cols": 0, "nnz": 0, "status": "ignored",
                         "reason": "not a matrix file (.mtx, .mtx.gz, .npz)"})
    server = opts.pop("server")
    return {"format": FORMAT, "tool": f"spmvd.study {__version__}",
            "command": command or f"spmvd.study.collect(client, {folder!r})", "started": started,
            "elapsed_s": round(time.monotonic() - t0, 3), "url": getattr(client, "url", ""),
            "host": {"cpu_model": _cpu_model(), "hostname": platform.node(), "loadavg": load}, "server": server,
            "options": opts, "matrices": matrices, "records": records}


# ------------------------------------------------------------------ the tables

def _f(fmt: str, v: Optional[float]) -> str:
    return "-" if v is None else fmt % v


def _best(res: Mapping[str, Any]) -> Dict[Tuple[str, str, str], Dict[str, Any]]:
    """(file, dtype, kernel) -> the spmv record of lowest mean among those verified without error."""
    best: Dict[Tuple[str, str, str], Dict[str, Any]] = {}
    for r in res["records"]:
        if r["kind"] != "spmv" or r.get("error") or r.get("verified") is False or r.get("mean_ms") is None:
            continue
        key = (r["file"], r["dtype"], r["kernel"])
        if key not in best or r["mean_ms"] < best[key]["mean_ms"]:
            best[key] = r
    return best


def _speedups(res: Mapping[str, Any], best: Mapping[Tuple[str, str, str], Dict[str, Any]], kernel: str,
              dtype: str, limit: int) -> List[float]:
    out = []
    for m in res["matrices"]:
        if m["status"] != "ok" or m["nnz"] < limit:
            continue
        b, k = best.get((m["file"], dtype, BASELINE)), best.get((m["file"], dtype, kernel))
        if b and k and k["mean_ms"] > 0:
            out.append(b["mean_ms"] / k["mean_ms"])
    return out


def _spmv_kernels(res: Mapping[str, Any]) -> List[str]:
    ks = list(res["options"]["kernels"])
    for r in res["records"]:
        if r["kind"] == "spmv" and r["kernel"] not in ks:
            ks.append(r["kernel"])
    return ks


def _table_speedup(res: Mapping[str, Any], best: Mapping[Tuple[str, str, str], Dict[str, Any]]) -> List[str]:
    dts = res["options"]["dtypes"]
    head = "| kernel | nnz >= |" + "".join(f" {d} avg | {d} max | {d} n |" for d in dts)
    lines = ["## Speedup over cpu.csr.serial", "",
             "Mean time of cpu.csr.serial over the kernel's best mean, averaged (avg) and the largest (max)",
             "over the matrices with at least that many non-zeros; n: how many matrices.", "",
             head, "|---|---|" + "---|---|---|" * len(dts)]
    for k in _spmv_kernels(res):
        for lim in NNZ_LIMITS:
            cells = []
            for d in dts:
                s = _speedups(res, best, k, d, lim)
                avg = sum(s) / len(s) if s else None
                cells.append(f" {_f('%.2f', avg)} | {_f('%.2f', max(s) if s else None)} | {len(s)} |")
            lines.append(f"| {k} | {lim} |" + "".join(cells))
    return lines + [""]


def _table_wins(res: Mapping[str, Any], best: Mapping[Tuple[str, str, str], Dict[str, Any]]) -> List[str]:
    ks = _spmv_kernels(res)
    lines = ["## Wins", "", "Cell: on how many matrices the row's kernel has a lower mean than the column's,",
             "out of the matrices both ran on.", ""]
    files = [m["file"] for m in res["matrices"] if m["status"] == "ok"]
    for d in res["options"]["dtypes"]:
        lines += [f"### {d}", "", "| kernel |" + "".join(f" {k} |" for k in ks), "|---|" + "---|" * len(ks)]
        for a in ks:
            cells = []
            for b in ks:
                if a == b:
                    cells.append(" - |")
                    continue
                both = [(best[(f, d, a)], best[(f, d, b)]) for f in files if (f, d, a) in best and (f, d, b) in best]
                wins = sum(1 for x, y in both if x["mean_ms"] < y["mean_ms"])
                cells.append(f" {wins}/{len(both)} |")
            lines.append(f"| {a} |" + "".join(cells))
        lines.append("")
    return lines


def _table_per_matrix(res: Mapping[str, Any], best: Mapping[Tuple[str, str, str], Dict[str, Any]], key: str,
                      title: str) -> List[str]:
    ks = _spmv_kernels(res)
    lines = [f"## {title}", ""]
    for d in res["options"]["dtypes"]:
        lines += [f"### {d}", "", "| matrix | nnz |" + "".join(f" {k} |" for k in ks), "|---|---|" + "---|" * len(ks)]
        for m in res["matrices"]:
            if m["status"] != "ok":
                continue
            cells = "".join(f" {_f('%.3g', (best.get((m['file'], d, k)) or {}).get(key))} |" for k in ks)
            lines.append(f"| {m['file']} | {m['nnz']} |{cells}")
        lines.append("")
    return lines


def thread_best(res: Mapping[str, Any]) -> Dict[Tuple[str, str, str, int], Dict[str, Any]]:
    """(file, dtype, kernel, threads) -> the "threads" record of lowest mean among those verified without error."""
    best: Dict[Tuple[str, str, str, int], Dict[str, Any]] = {}
    for r in res["records"]:
        if r["kind"] != "threads" or r.get("error") or r.get("verified") is False or r.get("mean_ms") is None:
            continue
        key = (r["file"], r["dtype"], r["kernel"], int(r["params"].get("threads", 0)))
        if key not in best or r["mean_ms"] < best[key]["mean_ms"]:
            best[key] = r
    return best


def _table_threads(res: Mapping[str, Any], best: Mapping[Tuple[str, str, str], Dict[str, Any]]) -> List[str]:
    o = res["options"]
    if not o["thread_kernels"]:
        return []
    tb, dts = thread_best(res), o["dtypes"]
    lines = ["## Threads", "",
             "The bench's thread sweep: each kernel at each count, its best mean over its other parameters;",
             "speedup: cpu.csr.serial's mean over it; efficiency: the bench's, that speedup over the threads",
             "(against the serial CSR kernel, not the same kernel at one thread); averaged (avg) and the largest",
             "(max) over the matrices with at least that many non-zeros; n: how many matrices.", "",
             "| kernel | threads | nnz >= |" + "".join(f" {d} speedup avg | {d} efficiency avg | {d} efficiency max |"
                                                   f" {d} n |" for d in dts),
             "|---|---|---|" + "---|---|---|---|" * len(dts)]
    for k in o["thread_kernels"]:
        for t in (t for t in o["threads"] if t > 0):
            for lim in NNZ_LIMITS:
                cells = ""
                for d in dts:
                    pts = [(best[(m["file"], d, BASELINE)]["mean_ms"] / r["mean_ms"], r["efficiency"])
                           for m in res["matrices"] if m["status"] == "ok" and m["nnz"] >= lim
                           for r in [tb.get((m["file"], d, k, t))] if r and (m["file"], d, BASELINE) in best
                           and r["mean_ms"] > 0 and r.get("efficiency") is not None]
                    n = len(pts)
                    cells += (f" {_f('%.2f', sum(p[0] for p in pts) / n if n else None)} |"
                              f" {_f('%.2f', sum(p[1] for p in pts) / n if n else None)} |"
                              f" {_f('%.2f', max(p[1] for p in pts) if n else None)} | {n} |")
                lines.append(f"| {k} | {t} | {lim} |{cells}")
    return lines + [""]


def _table_spmspm(res: Mapping[str, Any]) -> List[str]:
    ks = res["options"]["spmspm_kernels"]
    if not ks:
        return []
    t = {(r["file"], r["dtype"], r["kernel"]): r for r in res["records"] if r["kind"] == "spmspm"}
    lines = ["## SpMSpM", "", f"C = A*B with B of cols x {SPMSPM_COLS} (row i: one entry in column i mod "
             f"{SPMSPM_COLS}); mean ms, and in brackets the speedup over {ks[0]}.", ""]
    for d in res["options"]["dtypes"]:
        lines += [f"### {d}", "", "| matrix | nnz |" + "".join(f" {k} |" for k in ks), "|---|---|" + "---|" * len(ks)]
        for m in res["matrices"]:
            if m["status"] != "ok":
                continue
            base = (t.get((m["file"], d, ks[0])) or {}).get("mean_ms")
            cells = ""
            for k in ks:
                v = (t.get((m["file"], d, k)) or {}).get("mean_ms")
                sp = base / v if v and base else None
                cells += f" {_f('%.4g', v)} ({_f('%.2f', sp)}x) |"
            lines.append(f"| {m['file']} | {m['nnz']} |{cells}")
        lines.append("")
    return lines


def _params_text(p: Mapping[str, Any]) -> str:
    return ";".join(f"{k}={p[k]}" for k in sorted(p)) or "-"


def _table_problems(res: Mapping[str, Any]) -> List[str]:
    rows = []
    for m in res["matrices"]:
        if m["status"] != "ok":
            rows.append((m["file"], "-", "-", "-", f'{m["status"]}: {m["reason"]}'))
    for r in res["records"]:
        why = r.get("error")
        if not why and r.get("verified") is False:
            why = f'not verified: max_rel_err {_f("%.3g", r.get("max_rel_err"))}'
        if why:
            rows.append((r["file"], r["dtype"], f'{r["kind"]} {r["kernel"]}', _params_text(r["params"]), why))
    lines = ["## Refused, failed and skipped", ""]
    if not rows:
        return lines + ["None: every matrix uploaded and every kernel ran and verified.", ""]
    lines += ["| matrix | dtype | kernel | params | reason |", "|---|---|---|---|---|"]
    lines += ["| " + " | ".join(c.replace("|", "/").replace("\n", " ") for c in row) + " |" for row in rows]
    return lines + [""]


def _header(res: Mapping[str, Any]) -> List[str]:
    o, s, h = res["options"], res["server"], res["host"]
    ok = [m for m in res["matrices"] if m["status"] == "ok"]
    gpus = ", ".join(s["gpus"]) if s["gpus"] else f'none ({s["gpu_unavailable_reason"]})'
    load = " ".join(_f("%.2f", _num(v)) for v in (list(h.get("loadavg") or []) + [None] * 3)[:3])
    lines = [f'# Collection study of {os.path.basename(o["dir"].rstrip("/"))}', "",
             f'- command: `{res["command"]}` ({res["tool"]}), started {res["started"]}, {res["elapsed_s"]:.1f} s',
             f'- spmvd {s["version"]} (CUDA build: {"yes" if s["cuda"] else "no"}) at {res["url"]}',
             f'- host: {h["cpu_model"]}, {s["cores"]} cores for the daemon, load average {load} (1, 5, 15 min) at '
             f'the start; GPU: {gpus}',
             f'- measure: the mean over {o["runs"]} timed runs after {o["warmup"]} warm-ups (bench route, `stat` '
             f'mean, one random x); a kernel\'s figure for a matrix is its best parameter combination among the '
             f'verified ones; GFLOP/s (2 nnz) and GB/s at the mean, as the bench gives them',
             f'- dtypes: {", ".join(o["dtypes"])}; SpMV kernels: {", ".join(o["kernels"])}; SpMSpM kernels: '
             f'{", ".join(o["spmspm_kernels"]) or "none"}; thread sweep (the bench\'s `threads`): '
             f'{", ".join(o["thread_kernels"]) or "none"} at {", ".join(str(t) for t in o["threads"])} threads',
             f'- matrices: {len(ok)} studied of {len(res["matrices"])} entries in {o["dir"]}'
             + (f' (--max-nnz {o["max_nnz"]})' if o["max_nnz"] else ""), "",
             "## Collection", "", "| matrix | rows | cols | nnz | status |", "|---|---|---|---|---|"]
    for m in res["matrices"]:
        st = m["status"] if m["status"] == "ok" else f'{m["status"]}: {m["reason"]}'
        lines.append(f'| {m["file"]} | {m["rows"]} | {m["cols"]} | {m["nnz"]} | {st.replace("|", "/")} |')
    return lines + [""]


def report_md(res: Mapping[str, Any]) -> str:
    """report.md's text: header, collection, speedups, wins, GB/s, GFLOP/s, threads, SpMSpM, problems."""
    best = _best(res)
    lines = _header(res) + _table_speedup(res, best) + _table_wins(res, best)
    lines += _table_per_matrix(res, best, "gbps", "Bandwidth (GB/s at the mean, best combination)")
    lines += _table_per_matrix(res, best, "gflops", "GFLOP/s (at the mean, best combination)")
    lines += _table_threads(res, best) + _table_spmspm(res) + _table_problems(res)
    return "".join(line + "\n" for line in lines)


def _csv_num(v: Any) -> str:
    return "" if v is None else "%.17g" % v


def results_csv(res: Mapping[str, Any]) -> str:
    """Every record, one line each: CSV_COLUMNS (speedup: the baseline's mean over this record's, spmv and threads
    records only; efficiency: the bench's)."""
    nnz = {m["file"]: m["nnz"] for m in res["matrices"]}
    base = {(r["file"], r["dtype"]): r["mean_ms"] for r in _best(res).values() if r["kernel"] == BASELINE}
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for r in res["records"]:
        b = base.get((r["file"], r["dtype"])) if r["kind"] in ("spmv", "threads") else None
        sp = b / r["mean_ms"] if b and r.get("mean_ms") else None
        ver = "" if r.get("verified") is None else ("true" if r["verified"] else "false")
        w.writerow([r["file"], r["dtype"], r["kind"], r["kernel"], _params_text(r["params"]), nnz.get(r["file"], 0),
                    _csv_num(r.get("mean_ms")), _csv_num(r.get("median_ms")), _csv_num(r.get("min_ms")),
                    _csv_num(r.get("max_ms")), _csv_num(r.get("stddev_ms")), _csv_num(r.get("gflops")),
                    _csv_num(r.get("gbps")), _csv_num(sp), _csv_num(r.get("efficiency")), ver,
                    _csv_num(r.get("max_rel_err")), r.get("error") or ""])
    return buf.getvalue()


def render(res: Mapping[str, Any], out: str) -> List[str]:
    """Writes report.md, results.csv and results.json into ``out``; returns their paths."""
    if res.get("format") != FORMAT:
        raise ValueError(f"not a study's results ({FORMAT}): format {res.get('format')!r}")
    os.makedirs(out, exist_ok=True)
    paths = []
    for name, text in (("report.md", report_md(res)), ("results.csv", results_csv(res)),
                       ("results.json", json.dumps(res, indent=1) + "\n")):
        p = os.path.join(out, name)
        with open(p, "w") as f:
            f.write(text)
        paths.append(p)
    return paths


def tables_from_json(path: str, out: str) -> List[str]:
    """report.md and results.csv from a results.json (what ``spmvctl study --from`` does too)."""
    with open(path) as f:
        return render(json.load(f), out)


# ------------------------------------------------------------------ the figures

def plots(res: Mapping[str, Any], out: str) -> List[str]:
    """The study's PNGs into ``out`` (spmvd.study_plots draws them); returns their paths."""
    from . import _study_plots
    return _study_plots.all_figures(res, _best(res), out)


def run(client: Any, folder: str, *, out: str = "study", plot: bool = True, **kw: Any) -> Dict[str, Any]:
    """:func:`collect`, :func:`render` and (``plot``) :func:`plots` into ``out``; the results."""
    res = collect(client, folder, **kw)
    render(res, out)
    if plot:
        plots(res, out)
    return res


# ------------------------------------------------------------------ python3 -m spmvd.study

def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m spmvd.study", description="A collection study (docs/python.md).")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="upload every matrix of DIR, bench, write the report folder")
    r.add_argument("dir")
    r.add_argument("--url")
    r.add_argument("--out", default="study")
    r.add_argument("--kernels", help="comma-separated SpMV kernels (default: every available one)")
    r.add_argument("--spmspm", help="comma-separated SpMSpM kernels (default: every available one; 'none')")
    r.add_argument("--dtypes", default="float32,float64")
    r.add_argument("--runs", type=int, default=10)
    r.add_argument("--warmup", type=int, default=3)
    r.add_argument("--max-nnz", type=int, default=0)
    r.add_argument("--threads", help="comma-separated thread counts (default 1, 2, 4 ... cores)")
    r.add_argument("--device", choices=("cpu", "gpu", "auto"))
    r.add_argument("--no-plot", action="store_true")
    for name, what in (("report", "report.md and results.csv from a results.json"),
                       ("plot", "the PNGs from a results.json")):
        q = sub.add_parser(name, help=what)
        q.add_argument("results")
        q.add_argument("--out", required=True)
    return p


def _csv_list(s: Optional[str]) -> Optional[List[str]]:
    return None if s is None else [] if s == "none" else [v for v in s.split(",") if v]


def main(argv: Optional[Sequence[str]] = None) -> int:
    a = _parser().parse_args(argv)
    if a.cmd in ("report", "plot"):
        with open(a.results) as f:
            res = json.load(f)
        paths = render(res, a.out) if a.cmd == "report" else plots(res, a.out)
        print("\n".join(paths))
        return 0
    from .client import Client
    dtypes = _csv_list(a.dtypes) or []
    if not dtypes or len(set(dtypes)) != len(dtypes) or any(d not in ("float32", "float64") for d in dtypes):
        raise SystemExit(f"--dtypes takes float32 and/or float64, comma-separated, not {a.dtypes!r}")
    if a.warmup < 1 or a.runs < 1:
        raise SystemExit("--runs and --warmup must be at least 1 (the bench route reads a warmup of 0 as its default)")
    threads = [int(t) for t in a.threads.split(",")] if a.threads else None
    cmd = "python3 -m spmvd.study " + " ".join(sys.argv[1:] if argv is None else argv)
    with Client(a.url) as c:
        try:
            res = run(c, a.dir, out=a.out, plot=not a.no_plot, kernels=_csv_list(a.kernels), dtypes=dtypes,
                      runs=a.runs, warmup=a.warmup, max_nnz=a.max_nnz, spmspm=_csv_list(a.spmspm), threads=threads,
                      device=a.device, command=cmd)
        except ValueError as e:
            raise SystemExit(f"python3 -m spmvd.study: {e}")
    print(f"{a.out}/report.md: {sum(m['status'] == 'ok' for m in res['matrices'])} matrices, "
          f"{len(res['records'])} records, {res['elapsed_s']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
