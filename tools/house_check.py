"""house_check.py — what the house's checks share (tools/check_layers.py, tools/check_functions.py).

sources(root, folders) walks each folder under root in turn and yields, file
name order within each directory, the path relative to root of every C and
CUDA source (.c, .h, .cu, .cuh); read_text(root, rel) gives one file's text
(undecodable bytes replaced, so a stray byte never stops a check);
report(found, summary) prints what a check found, one line each, then its
summary line on stderr, and gives the exit status (1 if anything was found).
"""
import os
import re
import sys

SOURCE = re.compile(r"\.(c|h|cu|cuh)$")


def sources(root, folders):
    for folder in folders:
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            for n in sorted(names):
                if SOURCE.search(n):
                    yield os.path.relpath(os.path.join(dirpath, n), root)


def read_text(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
        return f.read()


def report(found, summary):
    for line in found:
        print(line)
    print(summary, file=sys.stderr)
    return 1 if found else 0
