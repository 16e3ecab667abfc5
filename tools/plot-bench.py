#!/usr/bin/env python3
"""plot-bench.py — PNG plots of bench-gpu's CSV (issue 5).

usage: plot-bench.py bench-gpu.csv OUTDIR

Writes OUTDIR/gpu-large.png (the five generated matrices) and
OUTDIR/gpu-small.png (the real set): one panel per matrix, one bar per
kernel (its best verified configuration), float64 and float32 side by
side, GB/s on the x axis and the measured copy bandwidth as a line. A
kernel that failed verification is drawn hatched. Run on the GPU host
(matplotlib is there) by tools/bundle/bench.sh, or here on a fetched CSV.
"""
import csv
import math
import sys
from collections import OrderedDict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LARGE = ("poisson2d", "poisson3d", "uniform", "powerlaw", "banded")


def load(path):
    """{matrix: {dtype: {kernel: (gbps, ok)}}} keeping each kernel's best configuration, and the copy GB/s."""
    data, copy = OrderedDict(), 0.0
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            g, frac = float(r["gbps"]), float(r["frac_copy"])
            if frac > 0:
                copy = g / frac
            k = r["kernel"] if r["kernel"] != "auto" else "auto"
            d = data.setdefault(r["matrix"], {}).setdefault(r["dtype"], {})
            ok = r["status"] == "ok"
            if k not in d or (ok and g > d[k][0]) or (ok and not d[k][1]):
                d[k] = (g, ok)
    return data, copy


def panel(ax, name, per_dtype, copy):
    kernels = sorted({k for d in per_dtype.values() for k in d}, key=lambda k: (k == "auto", k))
    ys = range(len(kernels))
    for i, (dt, colour) in enumerate((("float64", "tab:blue"), ("float32", "tab:orange"))):
        d = per_dtype.get(dt, {})
        vals = [d.get(k, (0, True)) for k in kernels]
        bars = ax.barh([y + 0.4 * i - 0.2 for y in ys], [v[0] for v in vals], height=0.4, color=colour, label=dt)
        for b, v in zip(bars, vals):
            if not v[1]:
                b.set_hatch("xx")
    if copy > 0:
        ax.axvline(copy, color="k", ls="--", lw=1, label="D2D copy")
    ax.set_yticks(list(ys))
    ax.set_yticklabels(kernels, fontsize=7)
    ax.set_title(name, fontsize=9)
    ax.set_xlabel("GB/s (matrix + x + y once)", fontsize=7)
    ax.tick_params(axis="x", labelsize=7)


def figure(data, names, copy, path, cols):
    if not names:
        return
    rows = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 4.2 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        panel(ax, name, data[name], copy)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    print("wrote", path)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    data, copy = load(sys.argv[1])
    large = [m for m in data if m.startswith(LARGE)]
    small = [m for m in data if m not in large]
    figure(data, large, copy, sys.argv[2] + "/gpu-large.png", 3)
    figure(data, small, copy, sys.argv[2] + "/gpu-small.png", 4)


if __name__ == "__main__":
    main()
