"""spmvd._study_plots: the figures of a collection study (spmvd.study.plots), with matplotlib's Agg backend.

Each figure reads the study's results (results.json) and the best record per (matrix, dtype,
kernel) that spmvd.study computed for the tables, so figures and tables show the same numbers:

- ``matrices_gflops.png``, ``matrices_gbps.png``: per matrix (by nnz), one bar per kernel, a panel per dtype;
- ``speedup_distribution.png``: each kernel's speedup over cpu.csr.serial against the matrix's nnz;
- ``threads.png``: over the bench's thread sweep, the efficiency against cpu.csr.serial (the bench's
  ``efficiency``: the speedup over the serial CSR kernel divided by the threads), a panel per CPU
  kernel taking ``threads`` (one line per matrix: the 8 largest by nnz, as in the sweeps below; at
  each count the kernel's best mean over its other parameters, as the report's Threads table);
- ``block_sizes.png``, ``hack_sizes.png``: GFLOP/s over the bench's sweep of that parameter, a panel
  per kernel taking it (a CPU-only study has no ``block_size`` kernel: the picture says so);
- ``spmspm.png``: SpMSpM mean time per kernel (log scale) and the speedup over the first kernel.

Figures are drawn at 80 dpi and stay well under 200 KB each.
"""
from __future__ import annotations

import math
import os
from typing import Any, Dict, List, Mapping, Sequence, Tuple

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

DPI = 80
LINES = 8
Best = Mapping[Tuple[str, str, str], Mapping[str, Any]]


def _save(fig: Any, path: str) -> str:
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=DPI)
    plt.close(fig)
    return path


def _ok_matrices(res: Mapping[str, Any]) -> List[Mapping[str, Any]]:
    return sorted((m for m in res["matrices"] if m["status"] == "ok"), key=lambda m: (m["nnz"], m["file"]))


def _kernels(res: Mapping[str, Any]) -> List[str]:
    return list(res["options"]["kernels"])


def _grouped(ax: Any, labels: Sequence[str], series: Mapping[str, Sequence[float]], log: bool) -> None:
    n = max(1, len(series))
    width = 0.8 / n
    for i, (name, vals) in enumerate(series.items()):
        xs = [j + (i - (n - 1) / 2) * width for j in range(len(labels))]
        ax.bar(xs, [v if v is not None and v > 0 else 0 for v in vals], width, label=name)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
    if log:
        ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3)


def per_matrix(res: Mapping[str, Any], best: Best, key: str, label: str, path: str) -> str:
    dts = res["options"]["dtypes"]
    ms = _ok_matrices(res)
    fig, axes = plt.subplots(len(dts), 1, figsize=(11, 3.6 * len(dts)), squeeze=False)
    for ax, d in zip(axes[:, 0], dts):
        series = {k: [(best.get((m["file"], d, k)) or {}).get(key) for m in ms] for k in _kernels(res)}
        _grouped(ax, [m["file"] for m in ms], series, log=True)
        ax.set_ylabel(label)
        ax.set_title(f"{label} per matrix ({d}; best combination, at the mean)", fontsize=9)
        ax.legend(fontsize=6, ncol=4)
    return _save(fig, path)


def speedup_distribution(res: Mapping[str, Any], best: Best, path: str) -> str:
    dts = res["options"]["dtypes"]
    fig, axes = plt.subplots(1, len(dts), figsize=(6 * len(dts), 4.2), squeeze=False)
    for ax, d in zip(axes[0], dts):
        for k in _kernels(res)[1:]:
            pts = []
            for m in _ok_matrices(res):
                b, r = best.get((m["file"], d, "cpu.csr.serial")), best.get((m["file"], d, k))
                if b and r and r["mean_ms"] > 0:
                    pts.append((m["nnz"], b["mean_ms"] / r["mean_ms"]))
            if pts:
                ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=14, label=k)
        ax.axhline(1.0, color="k", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("nnz")
        ax.set_ylabel("speedup over cpu.csr.serial (mean)")
        ax.set_title(f"speedup distribution ({d})", fontsize=9)
        ax.legend(fontsize=6)
        ax.grid(alpha=0.3)
    return _save(fig, path)


def _lines(ax: Any, data: Mapping[str, List[Tuple[int, float]]], xlabel: str) -> None:
    for name, pts in data.items():
        pts = sorted(pts)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, lw=1, label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("GFLOP/s (mean)")
    ax.grid(alpha=0.3)
    if data:
        ax.legend(fontsize=5, ncol=2)


def param_sweep(res: Mapping[str, Any], kind: str, param: str, path: str) -> str:
    """GFLOP/s over one parameter, a panel per kernel, one line per matrix (the last dtype; the
    LINES largest matrices by nnz, so that the picture stays readable and small)."""
    d = res["options"]["dtypes"][-1]
    shown = {m["file"] for m in _ok_matrices(res)[-LINES:]}
    data: Dict[str, Dict[str, List[Tuple[int, float]]]] = {}
    for r in res["records"]:
        if r["kind"] == kind and r["dtype"] == d and param in r["params"] and r.get("gflops") \
                and not r.get("error") and r["file"] in shown:
            data.setdefault(r["kernel"], {}).setdefault(r["file"], []).append((int(r["params"][param]), r["gflops"]))
    n = max(1, len(data))
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.8 * rows), squeeze=False)
    for ax in axes.flat[len(data):]:
        ax.set_axis_off()
    if not data:
        ax = axes[0][0]
        ax.set_axis_on()
        ax.text(0.5, 0.5, f"no kernel in this study takes {param}", ha="center", va="center", transform=ax.transAxes)
    for ax, (k, lines) in zip(axes.flat, sorted(data.items())):
        _lines(ax, lines, param)
        ax.set_title(f"{k} ({d}; the {len(lines)} largest matrices)", fontsize=9)
    return _save(fig, path)


def thread_efficiency(res: Mapping[str, Any], path: str) -> str:
    """The bench's efficiency against cpu.csr.serial over the thread counts, a panel per kernel, one line per
    matrix (the last dtype; the LINES largest matrices by nnz); 1 is the serial kernel's speed a thread."""
    from .study import thread_best
    d = res["options"]["dtypes"][-1]
    shown = [m["file"] for m in _ok_matrices(res)[-LINES:]]
    tb = thread_best(res)
    ks = list(res["options"]["thread_kernels"])
    cols = min(max(1, len(ks)), 3)
    rows = math.ceil(max(1, len(ks)) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.8 * rows), squeeze=False)
    for ax in axes.flat[len(ks):]:
        ax.set_axis_off()
    if not ks:
        axes[0][0].set_axis_on()
        axes[0][0].text(0.5, 0.5, "no kernel in this study takes threads", ha="center", va="center",
                        transform=axes[0][0].transAxes)
    for ax, k in zip(axes.flat, ks):
        for f in shown:
            pts = sorted((t, r["efficiency"]) for (f2, d2, k2, t), r in tb.items()
                         if (f2, d2, k2) == (f, d, k) and r.get("efficiency") is not None)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, lw=1, label=f)
        ax.axhline(1.0, color="k", lw=0.8, ls="--")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("threads")
        ax.set_ylabel("efficiency vs cpu.csr.serial")
        ax.set_title(f"{k} ({d}; speedup over cpu.csr.serial / threads)", fontsize=9)
        ax.grid(alpha=0.3)
        if ax.lines[1:]:
            ax.legend(fontsize=5, ncol=2)
    return _save(fig, path)


def spmspm(res: Mapping[str, Any], path: str) -> str:
    ks = res["options"]["spmspm_kernels"]
    dts = res["options"]["dtypes"]
    t = {(r["file"], r["dtype"], r["kernel"]): r.get("mean_ms") for r in res["records"] if r["kind"] == "spmspm"}
    ms = _ok_matrices(res)
    fig, axes = plt.subplots(len(dts), 2, figsize=(13, 3.8 * len(dts)), squeeze=False)
    for (a1, a2), d in zip(axes, dts):
        times = {k: [t.get((m["file"], d, k)) for m in ms] for k in ks}
        _grouped(a1, [m["file"] for m in ms], times, log=True)
        a1.set_ylabel("mean ms (log)")
        a1.set_title(f"SpMSpM time per kernel ({d})", fontsize=9)
        base = times.get(ks[0], []) if ks else []
        sp = {k: [b / v if b and v else None for b, v in zip(base, times[k])] for k in ks}
        _grouped(a2, [m["file"] for m in ms], sp, log=False)
        a2.axhline(1.0, color="k", lw=0.8, ls="--")
        a2.set_ylabel(f"speedup over {ks[0] if ks else '-'}")
        a2.set_title(f"SpMSpM speedup over kernel 0 ({d})", fontsize=9)
        if ks:
            a1.legend(fontsize=6)
    return _save(fig, path)


def all_figures(res: Mapping[str, Any], best: Best, out: str) -> List[str]:
    os.makedirs(out, exist_ok=True)
    p = lambda n: os.path.join(out, n)  # noqa: E731
    paths = [per_matrix(res, best, "gflops", "GFLOP/s", p("matrices_gflops.png")),
             per_matrix(res, best, "gbps", "GB/s", p("matrices_gbps.png")),
             speedup_distribution(res, best, p("speedup_distribution.png")),
             thread_efficiency(res, p("threads.png")),
             param_sweep(res, "spmv", "block_size", p("block_sizes.png")),
             param_sweep(res, "spmv", "hack_size", p("hack_sizes.png"))]
    if res["options"]["spmspm_kernels"]:
        paths.append(spmspm(res, p("spmspm.png")))
    return paths
