#!/usr/bin/env python3
"""study_check.py — recomputes a study's tables from its results.csv and compares them with report.md.

    python3 study_check.py OUT [FILE...]

Independent of spmvd.study's code: it reads OUT/results.csv (every record) and
OUT/report.md, and checks

- every FILE named on the line is a row of the Collection table, with status ok;
- cpu.csr.serial's speedup is 1.00 in every cell of the speedup table that has matrices;
- each speedup cell (avg, max, n for nnz >= 0, 10000, 100000, per dtype) equals the one
  recomputed from the CSV: per matrix and kernel the lowest mean_ms among the spmv rows
  without error and not unverified, the baseline's over it;
- each cell of the win tables and of the GB/s and GFLOP/s tables likewise;
- each cell of the Threads table (when there is one): per matrix, kernel and thread count the
  "threads" row of lowest mean_ms (without error, not unverified), cpu.csr.serial's best mean
  over it (speedup) and the row's efficiency column (the bench's), avg and max over the matrices
  with that many non-zeros; and that efficiency is the CSV's speedup over the threads.

Prints one line per mismatch and exits 1 if there is any.
"""
import csv
import os
import sys

BASE = "cpu.csr.serial"


def load(out):
    with open(os.path.join(out, "results.csv")) as f:
        rows = list(csv.DictReader(f))
    with open(os.path.join(out, "report.md")) as f:
        report = f.read()
    return rows, report


def best_of(rows):
    best, nnz = {}, {}
    for r in rows:
        nnz[r["file"]] = int(r["nnz"])
        if r["kind"] != "spmv" or r["error"] or r["verified"] == "false" or not r["mean_ms"]:
            continue
        key = (r["file"], r["dtype"], r["kernel"])
        if key not in best or float(r["mean_ms"]) < float(best[key]["mean_ms"]):
            best[key] = r
    return best, nnz


def thread_best(rows):
    best = {}
    for r in rows:
        if r["kind"] != "threads" or r["error"] or r["verified"] == "false" or not r["mean_ms"]:
            continue
        t = int(dict(kv.split("=") for kv in r["params"].split(";"))["threads"])
        key = (r["file"], r["dtype"], r["kernel"], t)
        if key not in best or float(r["mean_ms"]) < float(best[key]["mean_ms"]):
            best[key] = r
    return best


def check_threads(rows, report, best, nnz, ok, dtypes):
    """The Threads table against the CSV's "threads" rows; [] when the report has none."""
    if "\n## Threads\n" not in report:
        return []
    bad, tb = [], thread_best(rows)
    for r in tb.values():
        t = int(dict(kv.split("=") for kv in r["params"].split(";"))["threads"])
        if r["efficiency"] and r["speedup"] and abs(float(r["efficiency"]) * t / float(r["speedup"]) - 1) > 1e-3:
            bad.append(f"efficiency of {r['file']} {r['kernel']} {r['params']}: {r['efficiency']} is not the "
                       f"speedup {r['speedup']} over {t} threads")
    for r in section(report, "Threads")[1:]:
        k, t, lim = r[0], int(r[1]), int(r[2])
        for i, d in enumerate(dtypes):
            pts = [(float(best[(f, d, BASE)]["mean_ms"]) / float(tb[(f, d, k, t)]["mean_ms"]),
                   float(tb[(f, d, k, t)]["efficiency"]))
                   for f in ok if nnz[f] >= lim and (f, d, BASE) in best and (f, d, k, t) in tb
                   and tb[(f, d, k, t)]["efficiency"]]
            n = len(pts)
            want = [fmt("%.2f", sum(p[0] for p in pts) / n if n else None),
                    fmt("%.2f", sum(p[1] for p in pts) / n if n else None),
                    fmt("%.2f", max(p[1] for p in pts) if n else None), str(n)]
            got = r[3 + 4 * i: 7 + 4 * i]
            if got != want:
                bad.append(f"threads {k} at {t} nnz>={lim} {d}: report {got}, from the CSV {want}")
    return bad


def section(report, title):
    """The table rows (lists of cells) under '## title' (and "### sub" when given as title::sub)."""
    parts = title.split("::")
    text = report.split("## " + parts[0] + "\n", 1)[1].split("\n## ", 1)[0]
    if len(parts) > 1:
        text = text.split("### " + parts[1] + "\n", 1)[1].split("\n### ", 1)[0]
    rows = [ln for ln in text.splitlines() if ln.startswith("|") and not ln.startswith("|---")]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in rows]


def fmt(f, v):
    return "-" if v is None else f % v


def check(out, files):
    rows, report = load(out)
    best, nnz = best_of(rows)
    bad = []
    coll = {r[0]: r for r in section(report, "Collection")[1:]}
    for f in files:
        if f not in coll or coll[f][4] != "ok":
            bad.append(f"{f}: not an ok row of the Collection table: {coll.get(f)}")
    ok = [f for f, r in coll.items() if r[4] == "ok"]
    speed = section(report, "Speedup over cpu.csr.serial")
    dtypes = [h.split()[0] for h in speed[0][2::3]]
    for r in speed[1:]:
        k, lim = r[0], int(r[1])
        for i, d in enumerate(dtypes):
            s = [float(best[(f, d, BASE)]["mean_ms"]) / float(best[(f, d, k)]["mean_ms"])
                 for f in ok if nnz[f] >= lim and (f, d, BASE) in best and (f, d, k) in best]
            want = [fmt("%.2f", sum(s) / len(s) if s else None), fmt("%.2f", max(s) if s else None), str(len(s))]
            got = r[2 + 3 * i: 5 + 3 * i]
            if got != want:
                bad.append(f"speedup {k} nnz>={lim} {d}: report {got}, from the CSV {want}")
            if k == BASE and s and got[:2] != ["1.00", "1.00"]:
                bad.append(f"speedup of {BASE} is not 1: {got}")
    for d in dtypes:
        wins = section(report, "Wins::" + d)
        ks = wins[0][1:]
        for r in wins[1:]:
            for b, got in zip(ks, r[1:]):
                if r[0] == b:
                    continue
                both = [f for f in ok if (f, d, r[0]) in best and (f, d, b) in best]
                w = sum(float(best[(f, d, r[0])]["mean_ms"]) < float(best[(f, d, b)]["mean_ms"]) for f in both)
                if got != f"{w}/{len(both)}":
                    bad.append(f"wins {r[0]} over {b} {d}: report {got}, from the CSV {w}/{len(both)}")
        for key, title in (("gbps", "Bandwidth (GB/s at the mean, best combination)"),
                           ("gflops", "GFLOP/s (at the mean, best combination)")):
            t = section(report, title + "::" + d)
            for r in t[1:]:
                for k, got in zip(t[0][2:], r[2:]):
                    rec = best.get((r[0], d, k))
                    want = fmt("%.3g", float(rec[key]) if rec and rec[key] else None)
                    if got != want:
                        bad.append(f"{key} {r[0]} {k} {d}: report {got}, from the CSV {want}")
    return bad + check_threads(rows, report, best, nnz, ok, dtypes)


if __name__ == "__main__":
    problems = check(sys.argv[1], sys.argv[2:])
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)
