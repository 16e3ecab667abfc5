#!/usr/bin/env python3
"""check_functions.py — no function outside tests is over 80 lines.

Short functions are one of the house's habits (shared/STYLE.md: "functions
are short, named for what they do"); this checks the C and CUDA sources of
every layer (api/, daemon/, engine/, cluster/, clients/, tools/). A
function is a definition whose body opens with a '{' in column 0 and
closes with the next '}' in column 0 (the house style puts both there);
its length is the lines between them.

    python3 tools/check_functions.py [ROOT] [--max N]

prints one line per function over the limit (file:line, name, length) and
exits 1 if there is any.
"""
import os
import re
import sys

from house_check import read_text, report, sources

FOLDERS = ["api", "daemon", "engine", "cluster", "clients", "tools"]
NAME = re.compile(r"([A-Za-z_][A-Za-z_0-9]*)\s*\(")


def functions(lines):
    """(first line, name, body lines) of each definition."""
    i = 0
    while i < len(lines):
        if lines[i].startswith("{"):
            # the signature: the lines above, back to a blank line, a ';', a '}' or a comment's end
            j = i - 1
            sig = []
            while j >= 0 and lines[j].strip() and not lines[j].rstrip().endswith((";", "}", "*/")) \
                    and not lines[j].startswith("#"):
                sig.insert(0, lines[j])
                j -= 1
            k = i + 1
            while k < len(lines) and not lines[k].startswith("}"):
                k += 1
            text = " ".join(sig)
            m = NAME.search(text)
            if m and "=" not in text.split("(")[0]:
                yield j + 2, m.group(1), k - i - 1
            i = k
        i += 1


def main():
    args = [a for a in sys.argv[1:]]
    limit = 80
    if "--max" in args:
        limit = int(args[args.index("--max") + 1])
        del args[args.index("--max"):args.index("--max") + 2]
    root = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(__file__), ".."))
    over = []
    count = 0
    for rel in sources(root, FOLDERS):
        for line, name, length in functions(read_text(root, rel).split("\n")):
            count += 1
            if length > limit:
                over.append(f"{rel}:{line}: {name} is {length} lines (at most {limit})")
    return report(over, f"check_functions: {count} functions, {len(over)} over {limit} lines")


if __name__ == "__main__":
    sys.exit(main())
