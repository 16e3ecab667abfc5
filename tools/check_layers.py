#!/usr/bin/env python3
"""check_layers.py — the house's one rule, checked over the #include lines.

The top-level folders are layers (docs/architecture.md): api/ (HTTP) over
daemon/ (state, queues, workers, task bodies) over engine/ (formats,
kernels, solvers), with cluster/ a backend beside the engine. An include
never points up:

  api/     may include api/, daemon/, cluster/, engine/
  daemon/  may include daemon/, cluster/, engine/
  cluster/ may include cluster/, engine/
  engine/  may include engine/ only
  clients/ may include clients/ only (clients speak HTTP)
  tools/   may include tools/, engine/, clients/

and api/ calls no spmv_gpu_* function (the daemon answers what a matrix
holds on its device). tests/ are outside the layers.

    python3 tools/check_layers.py [ROOT]

prints one line per violation (file:line, what, why) and exits 1 if there
is any, 0 if none.
"""
import os
import re
import sys

from house_check import read_text, report, sources

ALLOWED = {
    "api": {"api", "daemon", "cluster", "engine"},
    "daemon": {"daemon", "cluster", "engine"},
    "cluster": {"cluster", "engine"},
    "engine": {"engine"},
    "clients": {"clients"},
    "tools": {"tools", "engine", "clients"},
}
LAYERS = set(ALLOWED)
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
GPU_CALL = re.compile(r"\bspmv_gpu_[a-z0-9_]+\s*\(")
# the compiler's search path after the file's own folder (-I. -Iengine)
SEARCH = ["", "engine"]


def layer_of(rel):
    top = rel.split("/", 1)[0]
    return top if top in LAYERS else None


def resolve(root, src_rel, name):
    """The path (relative to root) an include names, or None if not ours."""
    for base in [os.path.dirname(src_rel)] + SEARCH:
        cand = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def strip_comments(text):
    return re.sub(r"/\*.*?\*/|//[^\n]*", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)


def check_file(root, rel, out):
    layer = layer_of(rel)
    text = read_text(root, rel)
    for no, line in enumerate(text.splitlines(), 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        target = resolve(root, rel, m.group(1))
        tl = layer_of(target) if target else None
        if tl and tl not in ALLOWED[layer]:
            out.append(f"{rel}:{no}: includes {target}: {layer}/ may include only "
                       f"{', '.join(sorted(ALLOWED[layer]))}")
    if layer == "api" and rel.endswith((".c", ".h")):
        code = strip_comments(text)
        for no, line in enumerate(code.splitlines(), 1):
            g = GPU_CALL.search(line)
            if g:
                out.append(f"{rel}:{no}: calls {g.group(0).rstrip('( ')}: api/ calls no spmv_gpu_* function "
                           "(ask the daemon: daemon/store.h)")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    root = os.path.abspath(root)
    out = []
    files = 0
    for rel in sources(root, sorted(LAYERS)):
        check_file(root, rel, out)
        files += 1
    return report(out, f"check_layers: {files} files, {len(out)} violation{'s' if len(out) != 1 else ''}")


if __name__ == "__main__":
    sys.exit(main())
