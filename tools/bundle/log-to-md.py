#!/usr/bin/env python3
"""log-to-md.py — turns the logs of one bundle/run.sh run into docs/gpu-test-log.md.

usage: log-to-md.py RUN_DIR > docs/gpu-test-log.md

RUN_DIR holds what run.sh wrote under $OUT: summary.txt, gpu-info.txt,
test_gpu.log, memcheck.log, racecheck.log, synccheck.log, initcheck.log,
api_test.log. The page keeps the figures as logged: date, GPU and driver,
each step's TAP counts, the per-kernel x dtype pass/fail tables of test_gpu
and of the API test, each sanitizer's summary lines, and the API test's
timing tables (reported, never asserted).
"""
import os
import re
import sys


def read(d, name):
    try:
        with open(os.path.join(d, name), errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def tallies(text, title):
    """test_gpu's '# <title>: kernel dtype passed failed' blocks."""
    out, on = [], False
    for line in text.splitlines():
        if line.startswith("# %s:" % title):
            on = True
            continue
        if on:
            m = re.match(r"# (\S+)\s+(float\d\d)\s+(\d+)\s+(\d+)\s+(\S+)", line)
            if not m:
                break
            out.append(m.groups())
    return out


def main():
    d = sys.argv[1]
    summary, info, tg = read(d, "summary.txt"), read(d, "gpu-info.txt"), read(d, "test_gpu.log")
    api = read(d, "api_test.log")
    lines = info.splitlines()
    date = lines[0] if lines else "?"
    gpu = lines[3] if len(lines) > 3 else "?"
    p = print
    p("# GPU test log")
    p()
    p("The output of the last full `bash bundle/run.sh` on the GPU host (made with")
    p("`make BUILD=build-gpu bundle`, run through the device tool with `carry: [\"bundle\"]`),")
    p("condensed by `tools/bundle/log-to-md.py`. Tests never assert timings; the timing")
    p("tables at the end are reported figures.")
    p()
    p("- date: %s" % date)
    p("- GPU (name, driver, memory, compute capability, max SM / memory clocks): %s" % gpu)
    cs = re.search(r"compute-sanitizer\n?(Version [^\n]*)", info)
    if cs:
        p("- compute-sanitizer: %s" % cs.group(1))
    seed = re.search(r"# seed (\d+)", tg)
    if seed:
        p("- test_gpu seed: %s (`SPMV_SEED=%s` repeats the random matrices)" % (seed.group(1), seed.group(1)))
    p()
    p("## Steps")
    p()
    p("```")
    p(summary.split("api_test rc=")[0].rstrip())
    p("```")
    p()
    for title in ("real matrices", "random matrices"):
        rows = tallies(tg, title)
        if not rows:
            continue
        p("## test_gpu, %s: runs per kernel and dtype (every parameter edge)" % title)
        p()
        p("| kernel | dtype | passed | failed |")
        p("| --- | --- | ---: | ---: |")
        for k, dt, ok, bad, _ in rows:
            p("| `%s` | %s | %s | %s |" % (k, dt, ok, bad))
        p()
    p("## test_gpu cases")
    p()
    p("```")
    for line in tg.splitlines():
        if re.match(r"^(ok|not ok) \d+|^# (FAIL|GPU|upload|refused|gpu\.ell refused)", line):
            p(line)
    p("```")
    p()
    p("## compute-sanitizer")
    p()
    for name in ("memcheck", "racecheck", "synccheck", "initcheck"):
        text = read(d, name + ".log")
        keep = [l for l in text.splitlines()
                if re.match(r"^(ok|not ok) \d+", l) or "SUMMARY" in l]
        p("### %s" % name)
        p()
        p("```")
        p("\n".join(keep) if keep else "(no log)")
        p("```")
        p()
    p("## End-to-end API test (spmvd on loopback, curl uploads, every GPU kernel)")
    p()
    p("```")
    p(api.rstrip())
    p("```")


if __name__ == "__main__":
    main()
