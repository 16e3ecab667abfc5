#!/usr/bin/env python3
"""mixed_check.py URL MATRICES IDS_JSON — dtype "mixed" against SciPy.

Driven by tests/e2e/mixed.sh (and bundle/run.sh on the GPU host with
MIXED_DEVICE=gpu). A random matrix whose values carry all 53 bits (drawn
from the printed seed, magnitudes over six decades) and shared real
matrices are uploaded with dtype=mixed; for each kernel of the device
(CPU: every CPU SpMV kernel; GPU: the GPU kernels that read each format,
packed ones included) y must

- equal SciPy's product of the matrix with its values rounded to float32,
  computed in float64, to 1e-12 of sum_j |a32_ij x_j| per row (so the
  daemon multiplies float32 values by float64 x and sums in float64);
- stay within the documented bound of the float64 product:
  |y_i - (A x)_i| <= 2^-24 sum_j |a_ij x_j| (+ 1e-12 of it for the sums);
- and differ from it somewhere on the random matrix (the values were
  rounded: this is not a float64 matrix under another name).

Also: the descriptor says "mixed"; binary x and y are float64 (8 bytes);
a vector made `like` the matrix is float64 and a product between resident
vectors is right; a value past float32's range is refused with 422 and
nothing is stored. The errors of a float32 upload of the same matrix are
printed next to mixed's for the docs. With MIXED_RELOAD=1 (after a
restart) the matrices listed in IDS_JSON are checked again instead of
uploaded. TAP out.
"""
import io
import json
import os
import struct
import sys
import urllib.error
import urllib.request

import numpy as np
import scipy.io
import scipy.sparse as sp

URL, MATRICES, IDS = sys.argv[1], sys.argv[2], sys.argv[3]
SEED = int(os.environ.get("SPMV_SEED", "1"))
DEVICE = os.environ.get("MIXED_DEVICE", "cpu")
RELOAD = os.environ.get("MIXED_RELOAD") == "1"
U32 = 2.0 ** -24
rng = np.random.default_rng(SEED)
count = failed = 0


def tap(ok, what, detail=""):
    global count, failed
    count += 1
    failed += not ok
    print(("ok %d - %s" if ok else "not ok %d - %s") % (count, what))
    if not ok and detail:
        print("# " + str(detail)[:400])
    sys.stdout.flush()


def call(method, path, body=None, ctype="application/json", accept=None):
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    req = urllib.request.Request(URL + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", ctype)
    if accept:
        req.add_header("Accept", accept)
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


def upload(A, name, dtype):
    buf = io.BytesIO()
    sp.save_npz(buf, sp.csr_matrix(A), compressed=False)
    st, body, _ = call("POST", "/v1/matrices?name=%s&dtype=%s&device=%s" % (name, dtype, DEVICE), buf.getvalue(),
                       "application/octet-stream")
    return st, json.loads(body) if body else {}


def kernels():
    st, body, _ = call("GET", "/v1/kernels")
    ks = json.loads(body)["kernels"]
    dev = "cpu" if DEVICE == "cpu" else "gpu"
    out = [k["name"] for k in ks if k.get("device") == dev and k.get("available", True)
           and k.get("op", "spmv") == "spmv" and k["name"] != "auto"]
    return out + ["auto"]


def scale_err(y, ref, scale):
    return float(np.max(np.abs(y - ref) / np.maximum(scale, 1e-300))) if len(y) else 0.0


def check_matrix(mid, A, label):
    """Every kernel of the device on matrix `mid` (A: the float64 matrix uploaded)."""
    A = sp.csr_matrix(A, dtype=np.float64)
    A32 = A.astype(np.float32).astype(np.float64)
    x = rng.uniform(-1, 1, A.shape[1])
    y64, y32 = A @ x, A32 @ x
    s64, s32 = abs(A) @ abs(x), abs(A32) @ abs(x)
    worst = 0.0
    for k in kernels():
        st, body, _ = call("POST", "/v1/matrices/%s/spmv" % mid, {"kernel": k, "x": x.tolist()})
        if st == 422 and k != "auto":  # a padded format the padding rule refuses: not this test's subject
            print("# %s on %s: 422 (%s)" % (k, label, json.loads(body).get("error", {}).get("message", "")[:100]))
            continue
        if st == 409 and ".spsell" in k and b"exactly symmetric" in body and (
                A32.shape[0] != A32.shape[1] or (A32 != A32.T).nnz):
            continue  # SPSELL: symmetric matrices only (docs/kernels.md "Symmetric PSELL")
        if st != 200:
            tap(False, "%s on %s answers 200" % (k, label), body[:300])
            continue
        y = np.array(json.loads(body)["y"], dtype=np.float64)
        e32 = scale_err(y, y32, s32)
        e64 = scale_err(y, y64, s64)
        worst = max(worst, e64)
        tap(e32 <= 1e-12 and e64 <= U32 * (1 + 1e-6) + 1e-12,
            "%s on %s: float32 values x float64 x in float64 (err %.2e), within 2^-24 of float64 (%.3g of it)"
            % (k, label, e32, e64 / U32), "e32 %.3g e64 %.3g" % (e32, e64))
    return worst


def check_binary(mid, A, label):
    A = sp.csr_matrix(A, dtype=np.float64)
    A32 = A.astype(np.float32).astype(np.float64)
    x = rng.uniform(-1, 1, A.shape[1])
    st, body, hdr = call("POST", "/v1/matrices/%s/spmv?kernel=%s" % (mid, "cpu.csr.serial" if DEVICE == "cpu" else
                                                                       "gpu.psell"),
                         x.astype("<f8").tobytes(), "application/octet-stream")
    ok = st == 200 and len(body) == 8 * A.shape[0]
    y = np.frombuffer(body, "<f8") if ok else None
    tap(ok and scale_err(y, A32 @ x, abs(A32) @ abs(x)) <= 1e-12,
        "binary x and y of %s are float64 (8 bytes each) and right" % label, "HTTP %d, %d bytes" % (st, len(body)))


def check_vectors(mid, A, label):
    A32 = sp.csr_matrix(A, dtype=np.float64).astype(np.float32).astype(np.float64)
    x = rng.uniform(-1, 1, A.shape[1])
    st, body, _ = call("POST", "/v1/vectors", {"like": mid, "values": x.tolist()})
    vx = json.loads(body) if st == 201 else {}
    tap(st == 201 and vx.get("dtype") == "float64", "a vector like mixed %s is float64" % label, body[:200])
    st, body, _ = call("POST", "/v1/vectors", {"like": mid, "side": "rows", "fill": 0})
    vy = json.loads(body) if st == 201 else {}
    if not vx or not vy:
        tap(False, "vectors made", body[:200])
        return
    st, body, _ = call("POST", "/v1/matrices/%s/spmv" % mid,
                       {"kernel": "auto", "x": {"vector": vx["id"]}, "y": {"vector": vy["id"]}})
    st2, body2, _ = call("GET", "/v1/vectors/%s" % vy["id"])
    y = np.array(json.loads(body2)["values"]) if st2 == 200 else np.zeros(0)
    tap(st == 200 and len(y) == A.shape[0] and scale_err(y, A32 @ x, abs(A32) @ abs(x)) <= 1e-12,
        "auto between resident float64 vectors on mixed %s" % label, body[:200])
    for v in (vx, vy):
        call("DELETE", "/v1/vectors/%s" % v["id"])


def random_matrix():
    n, m = 600, 450
    A = sp.random(n, m, density=0.02, random_state=SEED % 2**32, format="csr")
    A.data = rng.uniform(-1, 1, A.nnz) * 10.0 ** rng.uniform(-3, 3, A.nnz)
    return A


def real(name):
    return sp.csr_matrix(scipy.io.mmread(os.path.join(MATRICES, "real", name)), dtype=np.float64)


def main():
    print("# seed %d, device %s" % (SEED, DEVICE))
    mats = {"random": random_matrix(), "bcsstk13.mtx": real("bcsstk13.mtx"), "rajat01.mtx": real("rajat01.mtx"),
            "lp_afiro.mtx": real("lp_afiro.mtx")}
    if RELOAD:
        ids = json.load(open(IDS))
    else:
        ids = {}
        for label, A in mats.items():
            st, d = upload(A, label, "mixed")
            tap(st == 201 and d.get("dtype") == "mixed", "%s uploads as mixed and says so" % label, d)
            if st == 201:
                ids[label] = d["id"]
        json.dump(ids, open(IDS, "w"))
    for label, mid in ids.items():
        st, body, _ = call("GET", "/v1/matrices/%s" % mid)
        tap(st == 200 and json.loads(body).get("dtype") == "mixed", "%s is mixed%s" %
            (label, " after the restart" if RELOAD else ""), body[:200])
        worst = check_matrix(mid, mats[label], label)
        if label == "random":
            tap(worst > 1e-12, "mixed differs from float64 on the random matrix (worst %.3g of 2^-24: its values "
                "were rounded)" % (worst / U32))
    if RELOAD:
        return
    check_binary(ids["random"], mats["random"], "random")
    check_vectors(ids["random"], mats["random"], "random")
    # the same random matrix as float32 and float64, for the docs' error table
    A = mats["random"]
    x = rng.uniform(-1, 1, A.shape[1])
    ref, scale = A @ x, abs(A) @ abs(x)
    for dt in ("float32", "mixed", "float64"):
        st, d = upload(A, "random-" + dt, dt)
        if st != 201:
            tap(False, "random uploads as %s" % dt, d)
            continue
        xs = x.astype(np.float32).astype(np.float64) if dt == "float32" else x
        st, body, _ = call("POST", "/v1/matrices/%s/spmv" % d["id"],
                           {"kernel": "cpu.csr.serial" if DEVICE == "cpu" else "gpu.csr.vector", "x": xs.tolist()})
        y = np.array(json.loads(body)["y"]) if st == 200 else np.zeros(0)
        e = scale_err(y, ref, scale) if len(y) else float("inf")
        print("# error against the float64 product, max_i |y_i - (Ax)_i| / sum_j |a_ij x_j|: %-8s %.3g (%.3g "
              "of 2^-24)" % (dt, e, e / U32))
        call("DELETE", "/v1/matrices/%s" % d["id"])
    # refusals: a value past float32's range, nothing stored
    st, body, _ = call("GET", "/v1/matrices")
    before = json.loads(body)["count"]
    B = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 3.5e38]]))
    st, d = upload(B, "too-big", "mixed")
    msg = d.get("error", {}).get("message", "")
    tap(st == 422 and "float32" in msg and "(2, 2)" in msg, "a value past float32's range is refused with 422 naming "
        "entry and limit", d)
    st, body, _ = call("GET", "/v1/matrices")
    tap(json.loads(body)["count"] == before, "nothing stored after the refusal")
    st, d = upload(B, "bad-dtype", "mixed32")
    tap(st == 400 and "mixed" in d.get("error", {}).get("message", ""), "an unknown dtype names mixed among the "
        "choices", d)


main()
print("1..%d" % count)
sys.exit(1 if failed else 0)
