#!/usr/bin/env python3
"""bounds_files.py OUT — writes the hostile uploads of issue 33 into OUT.

Each is small on the wire and declares far more than it holds; the daemon
must refuse it before allocating what it declares (tests/e2e/bounds.sh):

  huge_decl.mtx     60-odd bytes: 2147483647 x 2147483647 with one entry
                    (its CSR would be 8.6 GB of row offsets)
  dup_bomb.mtx.gz   874 KB of gzip: a 1 x 1 matrix declaring 10^8 entries,
                    then 10^8 lines "1 1 1"
  lying_cd.npz      under 1 KB: data.npy's header says 2*10^8 float64s and
                    the zip directory claims the 1.6 GB they need, while the
                    deflated member holds a few bytes
  twice_data.npz    a valid CSR archive with data.npy in it twice (different
                    values): which one is the matrix would be a guess
  col.mtx, row.mtx  6000 x 1 and 1 x 6000, all ones: their product is a
                    dense 36 M-entry C
  wide1.mtx         1 x 4194304 with one entry: its transpose is 4194305
                    row offsets (16 MB) for one entry
Only the standard library: no NumPy needed.
"""
import gzip
import io
import struct
import sys
import zipfile


def npy(descr, shape, payload):
    """A .npy member: magic, version 1.0, the header dict padded to 64 bytes."""
    dims = "(" + "".join(f"{d}, " for d in shape).rstrip(" ") + ")" if len(shape) == 1 else str(tuple(shape))
    head = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, dims)
    pad = 64 - (10 + len(head) + 1) % 64
    head = head + " " * pad + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode() + payload


def csr_members(data_values):
    """A 2 x 2 CSR matrix diag(data) as save_npz writes it."""
    return {
        "indices.npy": npy("<i4", [2], struct.pack("<2i", 0, 1)),
        "indptr.npy": npy("<i4", [3], struct.pack("<3i", 0, 1, 2)),
        "format.npy": npy("|S3", [], b"csr"),
        "shape.npy": npy("<i8", [2], struct.pack("<2q", 2, 2)),
        "data.npy": npy("<f8", [2], struct.pack("<2d", *data_values)),
    }


def lying_cd(path):
    """data.npy claims 2*10^8 float64s; its sizes in both zip headers say so."""
    claimed = 200_000_000
    members = csr_members([1.0, 2.0])
    members["data.npy"] = npy("<f8", [claimed], b"\0" * 64)
    members["indices.npy"] = npy("<i4", [claimed], b"\0" * 64)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, body in members.items():
            z.writestr(name, body)
    raw = bytearray(buf.getvalue())
    lie = 128 + claimed * 8
    for sig, size_at, name_len_at, name_at in ((b"PK\x03\x04", 22, 26, 30), (b"PK\x01\x02", 24, 28, 46)):
        at = raw.find(sig)
        while at >= 0:
            name_len = struct.unpack_from("<H", raw, at + name_len_at)[0]
            name = bytes(raw[at + name_at:at + name_at + name_len])
            if name in (b"data.npy", b"indices.npy"):
                struct.pack_into("<I", raw, at + size_at, lie)
            at = raw.find(sig, at + 4)
    with open(path, "wb") as f:
        f.write(raw)


def twice_data(path):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, body in csr_members([1.0, 2.0]).items():
            z.writestr(name, body)
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Duplicate name": exactly the point
            z.writestr("data.npy", npy("<f8", [2], struct.pack("<2d", 30.0, 40.0)))


def main(out):
    with open(f"{out}/huge_decl.mtx", "w") as f:
        f.write("%%MatrixMarket matrix coordinate real general\n2147483647 2147483647 1\n1 1 1\n")
    with gzip.open(f"{out}/dup_bomb.mtx.gz", "wb", 9) as f:
        f.write(b"%%MatrixMarket matrix coordinate real general\n1 1 100000000\n")
        chunk = b"1 1 1\n" * 100000
        for _ in range(1000):
            f.write(chunk)
    lying_cd(f"{out}/lying_cd.npz")
    twice_data(f"{out}/twice_data.npz")
    with open(f"{out}/col.mtx", "w") as f:
        f.write("%%MatrixMarket matrix coordinate real general\n6000 1 6000\n")
        f.writelines(f"{i + 1} 1 1\n" for i in range(6000))
    with open(f"{out}/row.mtx", "w") as f:
        f.write("%%MatrixMarket matrix coordinate real general\n1 6000 6000\n")
        f.writelines(f"1 {j + 1} 1\n" for j in range(6000))
    with open(f"{out}/wide1.mtx", "w") as f:
        f.write("%%MatrixMarket matrix coordinate real general\n1 4194304 1\n1 4194304 2.5\n")


if __name__ == "__main__":
    main(sys.argv[1])
