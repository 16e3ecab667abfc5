"""spmvd.plot: PNG plots of a bench, with matplotlib (Agg backend, no display needed).

From a :class:`~spmvd.client.BenchResult` (or the daemon's raw table, or
a list of records):

- :func:`gflops` and :func:`gbps`: one bar per kernel, its best verified
  combination (a kernel that failed verification is drawn hatched);
- :func:`speedup`: each kernel's best over ``cpu.csr.serial`` (log scale);
- :func:`block_sizes` and :func:`hack_sizes`: median time over the swept
  ``block_size`` / ``hack_size``, one line per kernel that takes it;
- :func:`omp_efficiency`: speedup over ``cpu.csr.serial`` / threads over
  thread counts, from :func:`thread_sweep` (one bench sweeping the CPU
  kernels' ``threads`` at 1, 2, 4, ... with the serial baseline);
- :func:`spy`: the daemon's ``spy.png`` of the matrix, titled;
- :func:`all_plots`: every one of them into a folder.

Each function writes ``path`` and returns it. ``spmvctl bench --plot`` is
this one-liner (docs/python.md)::

    python3 -c 'import spmvd, spmvd.plot as p, sys; c = spmvd.Client(); m = c.get(sys.argv[1]); \\
        p.all_plots(c.bench(m), "plots", client=c, matrix=m)' MATRIX_ID
"""
from __future__ import annotations

import io
import math
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .client import BenchResult, Client, _flatten  # noqa: E402

__all__ = ["records", "best_per_kernel", "gflops", "gbps", "speedup", "block_sizes", "hack_sizes", "thread_sweep",
           "omp_efficiency", "spy", "all_plots"]

BASELINE = "cpu.csr.serial"


def records(bench: Any) -> List[Dict[str, Any]]:
    """Flat records of a BenchResult, a raw bench table (dict) or a list of records."""
    if isinstance(bench, BenchResult):
        return list(bench)
    if isinstance(bench, Mapping):
        return [_flatten(r) for r in bench.get("results", [])]
    return [dict(r) for r in bench]


def _ok(r: Mapping[str, Any]) -> bool:
    return not r.get("error") and isinstance(r.get("median_ms"), (int, float)) and math.isfinite(r["median_ms"])


def best_per_kernel(bench: Any) -> List[Dict[str, Any]]:
    """Each kernel's fastest combination (verified ones first), in the table's order.

    ``auto``'s row repeats the kernel it chose (timed again: its difference
    is noise), so it is no bar of its own: the chosen kernel's record gets
    ``auto_choice`` True instead, and its label says so."""
    best: Dict[str, Dict[str, Any]] = {}
    rows = records(bench)
    chosen = {r.get("auto_kernel") for r in rows if r.get("kernel") == "auto"}
    for r in rows:
        if not _ok(r) or r["kernel"] == "auto":
            continue
        r = dict(r, auto_choice=r["kernel"] in chosen)
        k = r["kernel"]
        cur = best.get(k)
        rank = (r.get("verified") is False, r["median_ms"])
        if cur is None or rank < (cur.get("verified") is False, cur["median_ms"]):
            best[k] = r
    return list(best.values())


def _title(bench: Any, what: str) -> str:
    if isinstance(bench, BenchResult) or isinstance(bench, Mapping):
        raw = bench.raw if isinstance(bench, BenchResult) else bench
        return f"{what} — {raw.get('rows')}x{raw.get('cols')}, nnz {raw.get('nnz')}, {raw.get('dtype')}"
    return what


def _save(fig: Any, path: str) -> str:
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=110)
    plt.close(fig)
    return path


def _bars(bench: Any, key: str, label: str, path: str, log: bool = False, title: Optional[str] = None) -> str:
    rows = best_per_kernel(bench)
    fig, ax = plt.subplots(figsize=(8, 0.35 * max(4, len(rows)) + 1.2))
    names = [r["kernel"] + (" (auto's choice)" if r.get("auto_choice") else "") for r in rows]
    vals = [float(r.get(key) or 0.0) for r in rows]
    colors = ["tab:green" if r["device"] == "gpu" else "tab:blue" for r in rows]
    bars = ax.barh(range(len(rows)), vals, color=colors)
    for b, r in zip(bars, rows):
        if r.get("verified") is False:
            b.set_hatch("//")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(label)
    if log and any(v > 0 for v in vals):
        ax.set_xscale("log")
    ax.set_title(title or _title(bench, label), fontsize=9)
    if key == "speedup":
        ax.axvline(1.0, color="k", lw=0.8, ls="--")
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, path)


def gflops(bench: Any, path: str = "gflops.png") -> str:
    """GFLOP/s (2·nnz per product, at the median) of each kernel's best combination."""
    return _bars(bench, "gflops", "GFLOP/s", path)


def gbps(bench: Any, path: str = "gbps.png") -> str:
    """GB/s (the bytes the kernel must move, at the median) of each kernel's best combination."""
    return _bars(bench, "gbps", "GB/s", path)


def speedup(bench: Any, path: str = "speedup.png") -> str:
    """Each kernel's best median against ``cpu.csr.serial``'s (log scale; 1 drawn as a line)."""
    rows = best_per_kernel(bench)
    base = [r["median_ms"] for r in rows if r["kernel"] == BASELINE]
    if base:
        for r in rows:
            r["speedup"] = base[0] / r["median_ms"] if r["median_ms"] > 0 else math.nan
    label = f"speedup over {BASELINE}"
    return _bars(rows, "speedup", label, path, log=True, title=_title(bench, label))


def _sweep(bench: Any, param: str, path: str) -> str:
    data: Dict[str, List[tuple]] = {}
    for r in records(bench):
        if _ok(r) and r.get(param) is not None and r["kernel"] != "auto":
            data.setdefault(r["kernel"], []).append((int(r[param]), r["median_ms"]))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for k, pts in data.items():
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=k)
    ax.set_xscale("log", base=2)
    ax.set_xlabel(param)
    ax.set_ylabel("median ms (lower is better)")
    ax.set_title(_title(bench, f"{param} sweep"), fontsize=9)
    if data:
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, f"no kernel in this bench takes {param}", ha="center", va="center",
                transform=ax.transAxes)
    ax.grid(alpha=0.3)
    return _save(fig, path)


def block_sizes(bench: Any, path: str = "block_sizes.png") -> str:
    """Median time over the swept ``block_size``, one line per GPU kernel taking it."""
    return _sweep(bench, "block_size", path)


def hack_sizes(bench: Any, path: str = "hack_sizes.png") -> str:
    """Median time over the swept ``hack_size`` (HLL slice height), one line per kernel taking it."""
    return _sweep(bench, "hack_size", path)


def thread_sweep(client: Client, matrix: Any, threads: Optional[Sequence[int]] = None,
                 kernels: Optional[Iterable[str]] = None, runs: int = 10, warmup: int = 2,
                 stat: str = "median") -> List[Dict[str, Any]]:
    """Times each CPU kernel taking ``threads`` at each thread count: records for :func:`omp_efficiency`.

    One bench (``threads`` swept, ``cpu.csr.serial`` its baseline, at the
    statistic ``stat``). ``threads`` defaults to 1, 2, 4, ... up to the
    daemon's CPU cores (``/v1/info``); ``kernels`` to every available CPU
    spmv kernel with a ``threads`` parameter. Each record: ``kernel``,
    ``threads``, ``median_ms``, ``mean_ms``, ``speedup`` (over
    ``cpu.csr.serial``, the ``baseline``, at ``stat``) and ``efficiency``
    (speedup / threads).
    """
    if threads is None:
        cores = 1
        for d in client.info().get("devices", []):
            if d.get("kind") == "cpu":
                cores = int(d.get("cores", 1))
        threads = [1]
        while threads[-1] * 2 <= cores:
            threads.append(threads[-1] * 2)
        if threads[-1] != cores:
            threads.append(cores)
    threads = sorted(set(int(t) for t in threads) | {1})
    if kernels is None:
        kernels = [k["name"] for k in client.kernels() if k.get("device") == "cpu" and k.get("available")
                   and k.get("op", "spmv") == "spmv" and any(p["name"] == "threads" for p in k.get("params", []))]
    kernels = list(kernels)
    b = client.bench(matrix, kernels=kernels, threads=threads, runs=runs, warmup=warmup, stat=stat, progress=None)
    return [{"kernel": r["kernel"], "threads": int(r["threads"]), "median_ms": r["median_ms"], "mean_ms": r["mean_ms"],
             "speedup": r["speedup"], "efficiency": r["efficiency"], "baseline": BASELINE, "stat": b.stat}
            for r in b if r["kernel"] in kernels and not r["error"] and r.get("threads")]


def omp_efficiency(sweep: Sequence[Mapping[str, Any]], path: str = "omp_efficiency.png") -> str:
    """Parallel efficiency (speedup over cpu.csr.serial / threads) over thread counts, one line per kernel, 1 drawn
    as ideal."""
    data: Dict[str, List[tuple]] = {}
    for r in sweep:
        data.setdefault(r["kernel"], []).append((int(r["threads"]), float(r["efficiency"])))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for k, pts in data.items():
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=k)
    ts = sorted({int(r["threads"]) for r in sweep}) or [1]
    ax.plot(ts, [1.0] * len(ts), "k--", lw=0.8, label="ideal")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("threads")
    ax.set_ylabel("efficiency = (serial time / time) / threads")
    ax.set_ylim(bottom=0)
    ax.set_title("OpenMP efficiency (speedup over %s, per thread)" % BASELINE, fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return _save(fig, path)


def spy(client: Client, matrix: Any, path: str = "spy.png", size: int = 512) -> str:
    """The daemon's spy picture of the matrix, titled with its name and shape."""
    import matplotlib.image as mpimg
    m = matrix if hasattr(matrix, "descriptor") else client.get(matrix)
    img = mpimg.imread(io.BytesIO(client.spy(m, size)), format="png")
    fig, ax = plt.subplots(figsize=(6, 6))
    ax.imshow(img, cmap="gray", vmin=0, vmax=1, interpolation="nearest")
    d = m.descriptor
    ax.set_title(f"{d.get('name')} — {d['rows']}x{d['cols']}, nnz {d['nnz']}", fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
    return _save(fig, path)


def all_plots(bench: Any, outdir: str, client: Optional[Client] = None, matrix: Any = None,
              threads: Optional[Sequence[int]] = None) -> List[str]:
    """Every plot into ``outdir``: gflops, gbps, speedup, block_sizes, hack_sizes, and with a client
    and matrix also omp_efficiency (a thread sweep) and spy. Returns the paths written."""
    os.makedirs(outdir, exist_ok=True)
    p = lambda name: os.path.join(outdir, name)  # noqa: E731
    out = [gflops(bench, p("gflops.png")), gbps(bench, p("gbps.png")), speedup(bench, p("speedup.png")),
           block_sizes(bench, p("block_sizes.png")), hack_sizes(bench, p("hack_sizes.png"))]
    if client is not None and matrix is not None:
        sweep = thread_sweep(client, matrix, threads=threads, runs=5, warmup=1)
        if sweep:
            out.append(omp_efficiency(sweep, p("omp_efficiency.png")))
        out.append(spy(client, matrix, p("spy.png")))
    return out
