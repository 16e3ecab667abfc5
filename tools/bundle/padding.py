"""padding.py — the daemon's padding rule, computed independently in Python.

The tests that expect a 422 for a padded format (tests/e2e/api.sh,
tests/e2e/memory.sh, the bundle's api_test.py) decide it here from the
matrix file itself, never from the daemon's answer: a format is refused
when its slots exceed max_padding x nnz + 65536 and its bytes exceed
padding_allowance_bytes (default 256 MiB; docs/kernels.md). ELL:
the longest row x rows; HLL: each slice's longest row x hack_size; PSELL:
the same in slices of 32 rows whatever hack_size; HYB: its ELL part at the
2/3 quantile of the row lengths plus the rest as COO (PCSR holds nnz).
Standard library only (the GPU host has nothing else). The bytes are the
unpacked arrays' (a PSELL packs its columns, so this is its upper bound:
the tests keep their matrices far from the allowance either way).
"""

SLACK = 65536
ALLOWANCE = 256 << 20


def row_lengths(path):
    """Row lengths of a Matrix Market coordinate file (symmetric ones expanded)."""
    lens, sym = None, False
    for line in open(path):
        if line.startswith("%%"):
            sym = "symmetric" in line or "hermitian" in line
            continue
        if line.startswith("%") or not line.strip():
            continue
        f = line.split()
        if lens is None:
            lens = [0] * int(f[0])
            continue
        i, j = int(f[0]) - 1, int(f[1]) - 1
        lens[i] += 1
        if sym and i != j:
            lens[j] += 1
    return lens


def slots(lens, fmt, hack=32):
    """Slots format fmt holds for these row lengths (nnz for unpadded formats)."""
    if fmt == "ell":
        return max(lens, default=0) * len(lens)
    if fmt in ("hll", "psell", "spsell"):
        h = 32 if fmt in ("psell", "spsell") else hack
        return sum(max(lens[s:s + h]) * h for s in range(0, len(lens), h))
    if fmt == "hyb":
        w = sorted(lens)[(2 * len(lens) + 2) // 3 - 1] if lens else 0
        return w * len(lens) + sum(max(n - w, 0) for n in lens)
    return sum(lens)


def format_bytes(lens, fmt, hack=32, value_bytes=8):
    """Bytes of format fmt's column and value arrays (HYB: its COO part at 8 + value bytes an entry)."""
    if fmt == "hyb":
        w = sorted(lens)[(2 * len(lens) + 2) // 3 - 1] if lens else 0
        return w * len(lens) * (4 + value_bytes) + sum(max(n - w, 0) for n in lens) * (8 + value_bytes)
    return slots(lens, fmt, hack) * (4 + value_bytes)


def refused(lens, fmt, max_padding=3, hack=32, allowance=ALLOWANCE, value_bytes=8):
    """Whether the rule refuses format fmt (unpadded formats never are)."""
    if fmt not in ("ell", "hll", "hyb", "psell", "spsell") or not max_padding:
        return False
    if slots(lens, fmt, hack) <= max_padding * sum(lens) + SLACK:
        return False
    return format_bytes(lens, fmt, hack, value_bytes) > allowance
