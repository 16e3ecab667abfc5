#!/usr/bin/env python3
"""solve_binary_check.py URL — the binary solve against SciPy (TAP out).

Driven by tests/e2e/solve_binary.sh. A random SPD matrix (a 2-D Poisson
matrix plus a random diagonal shift, from the printed seed) is uploaded
as float64 and float32; b is drawn from the seed.
"""
import http.client
import json
import os
import sys
import urllib.parse

import numpy as np
import scipy.sparse as sp

from tap import done
from tap import ok as tap

URL = urllib.parse.urlsplit(sys.argv[1])
SEED = int(os.environ.get("SPMV_SEED", "1"))
print("# seed %d (SPMV_SEED=%d repeats this run)" % (SEED, SEED), flush=True)
rng = np.random.default_rng(SEED)
conn = http.client.HTTPConnection(URL.hostname, URL.port, timeout=120)


def call(method, path, body=None, ctype="application/octet-stream", accept=None):
    """(status, headers, body bytes) over one connection (reopened when the daemon closed it)."""
    global conn
    hdrs = {"Content-Type": ctype} if body is not None else {}
    if accept:
        hdrs["Accept"] = accept
    for attempt in (0, 1):
        try:
            conn.request(method, path, body=body, headers=hdrs)
            r = conn.getresponse()
            return r.status, r.headers, r.read()
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
            conn.close()
            conn = http.client.HTTPConnection(URL.hostname, URL.port, timeout=120)
    raise RuntimeError("unreachable")


def upload(a, dtype):
    import io
    import scipy.io
    f = io.BytesIO()
    scipy.io.mmwrite(f, a)
    st, _, body = call("POST", f"/v1/matrices?dtype={dtype}", f.getvalue())
    assert st == 201, body
    return json.loads(body)["id"]


def solve_bin(mid, b, query, dt="<f8"):
    """POST a binary solve: (status, report, x (n, k) or None, rest of the body)."""
    k = 1 if b.ndim == 1 else b.shape[1]
    st, h, body = call("POST", f"/v1/matrices/{mid}/solve?{query}", np.asarray(b, dt).tobytes(order="F"))
    if st != 200:
        return st, json.loads(body), None, b""
    n = b.shape[0]
    nb = n * k * np.dtype(dt).itemsize
    x = np.frombuffer(body[:nb], dt).reshape((n, k), order="F")
    return st, json.loads(h["X-SpMV-Solve"]), x, body[nb:]


m = 24
T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(m, m))
A = (sp.kron(sp.eye(m), T) + sp.kron(T, sp.eye(m)) + sp.diags(rng.uniform(0.1, 1.0, m * m))).tocsr()
n = A.shape[0]
A64 = upload(A, "float64")
A32 = upload(A, "float32")
B = rng.standard_normal((n, 3))

# one column: x right, report in the header without the history
st, rep, x, rest = solve_bin(A64, B[:, 0], "tol=1e-10&preconditioner=jacobi&kernel=cpu.csr.serial")
tap(st == 200 and rep["converged"], "a binary b answers 200, converged", rep)
if x is not None:
    err = np.linalg.norm(A @ x[:, 0] - B[:, 0]) / np.linalg.norm(B[:, 0])
    tap(err < 1e-9, f"x is A\\b to the tolerance (relres {err:.2e})")
    tap("residual_history" not in rep and rep.get("residual_history_len", 0) == rep["iterations"] + 1 and rest == b"",
        "X-SpMV-Solve has residual_history_len, the body x alone", rep)
    tap(rep["method"] == "cg" and rep["preconditioner"] == "jacobi" and "x" not in rep, "the query's options were used")
    x1 = x

# history=true: the history follows x as float64 values
st, rep, x, rest = solve_bin(A64, B[:, 0], "tol=1e-10&preconditioner=jacobi&kernel=cpu.csr.serial&history=true")
h = np.frombuffer(rest, "<f8")
tap(st == 200 and len(h) == rep["residual_history_len"] and h[0] == 1.0 and h[-1] <= 1e-10 * 1.0001,
    "history=true: the residual history follows x in the body", (len(h), rep.get("residual_history_len")))
tap(x is not None and np.array_equal(x, x1), "… and x is the same bits as without it")

# k columns: k sequential solves, each the same bits as alone
st, rep, xk, _ = solve_bin(A64, B, "k=3&tol=1e-10&preconditioner=jacobi&kernel=cpu.csr.serial")
tap(st == 200 and rep.get("k") == 3 and len(rep.get("columns", [])) == 3 and rep["converged"],
    "k=3: 200 with a report per column under columns", rep)
same = xk is not None
for c in range(3):
    _, _, xc, _ = solve_bin(A64, B[:, c], "tol=1e-10&preconditioner=jacobi&kernel=cpu.csr.serial")
    same = same and xc is not None and np.array_equal(xk[:, c], xc[:, 0])
tap(same, "each column's x is bitwise its own one-column solve")
tap(xk is not None and rep["iterations"] == sum(c["iterations"] for c in rep["columns"]),
    "the whole's iterations sum the columns'")

# x0 in the body after b: starting from the answer converges at once
st, h, body = call("POST", f"/v1/matrices/{A64}/solve?x0=body&tol=1e-8&kernel=cpu.csr.serial",
                   np.concatenate([B[:, 0], x1[:, 0]]).astype("<f8").tobytes())
rep = json.loads(h["X-SpMV-Solve"]) if st == 200 else {}
tap(st == 200 and rep.get("iterations") == 0 and rep.get("converged"), "x0=body: x0 follows b (from A\\b: 0 iterations)", rep)

# float32: values of the matrix dtype both ways
st, rep, x, _ = solve_bin(A32, B[:, 0], "tol=1e-5&kernel=cpu.csr.serial", dt="<f4")
tap(st == 200 and x is not None and np.linalg.norm(A @ x[:, 0] - B[:, 0]) / np.linalg.norm(B[:, 0]) < 1e-4,
    "a float32 matrix takes and gives float32 values", rep)

# refusals: lengths, k, values, unknown vectors
for body, q, code, what in [
        (B[:, 0], "k=2", "shape_mismatch", "one column with k=2"),
        (B[:-1, 0], "", "shape_mismatch", "a b one value short"),
        (B[:, 0], "x0=body", "shape_mismatch", "x0=body without x0"),
        (B[:, 0], "k=0", "invalid_parameter", "k=0"),
        (B[:, 0], "k=65", "invalid_parameter", "k=65"),
        (B[:, 0], "tol=abc", "invalid_parameter", "tol=abc"),
        (B[:, 0], "tol=-1", "invalid_request", "tol=-1 (the JSON route's check)"),
        (B[:, 0], "maxit=1.5", "invalid_parameter", "maxit=1.5"),
        (B[:, 0], "async=maybe", "invalid_parameter", "async=maybe"),
        (B[:, 0], "method=lsqr", "invalid_request", "method=lsqr"),
        (B[:, 0], "x0=00000000-0000-4000-8000-000000000000", "vector_not_found", "x0 an unknown vector")]:
    st, _, out = call("POST", f"/v1/matrices/{A64}/solve?{q}", np.asarray(body, "<f8").tobytes())
    code_got = json.loads(out).get("error", {}).get("code") if out else None
    tap(st in (400, 404) and code_got == code, f"refused: {what} ({st} {code})", (st, out[:200]))

# async: a job whose result is the JSON answer (x as k lists); waited on with a long poll
st, _, out = call("POST", f"/v1/matrices/{A64}/solve?async=true&k=2&tol=1e-10&preconditioner=jacobi&kernel=cpu.csr.serial",
                  B[:, :2].astype("<f8").tobytes(order="F"))
job = json.loads(out)
tap(st == 202 and job.get("kind") == "solve", "async=true: 202 and a solve job", out[:200])
st, _, out = call("GET", f"/v1/jobs/{job['id']}?wait=30")
j = json.loads(out)
res = j.get("result", {})
tap(j.get("state") == "done" and res.get("k") == 2 and np.array_equal(np.array(res["x"]).T, xk[:, :2]),
    "… the job's result holds both columns, the same bits as the synchronous solve", j.get("state"))

# a JSON request answered in binary keeps the history in the header, unless "history": true
jb = json.dumps({"b": list(B[:, 0]), "tol": 1e-10, "kernel": "cpu.csr.serial"}).encode()
st, h, out = call("POST", f"/v1/matrices/{A64}/solve", jb, ctype="application/json", accept="application/octet-stream")
rep = json.loads(h["X-SpMV-Solve"]) if st == 200 else {}
tap(st == 200 and len(out) == 8 * n and len(rep.get("residual_history", [])) == rep.get("iterations", -2) + 1,
    "JSON in, binary out: x alone in the body, residual_history in X-SpMV-Solve (as before)", rep.keys())
jb = json.dumps({"b": list(B[:, 0]), "tol": 1e-10, "kernel": "cpu.csr.serial", "history": True}).encode()
st, h, out = call("POST", f"/v1/matrices/{A64}/solve", jb, ctype="application/json", accept="application/octet-stream")
rep = json.loads(h["X-SpMV-Solve"]) if st == 200 else {}
tap(st == 200 and "residual_history" not in rep and len(out) == 8 * (n + rep.get("residual_history_len", 0)),
    "… with \"history\": true the history follows x in the body", rep.keys())

# JSON with k columns; the answer x is k lists
st, _, out = call("POST", f"/v1/matrices/{A64}/solve",
                  json.dumps({"b": [list(B[:, 0]), list(B[:, 1])], "tol": 1e-10, "preconditioner": "jacobi",
                              "kernel": "cpu.csr.serial"}).encode(), ctype="application/json")
d = json.loads(out)
tap(st == 200 and d.get("k") == 2 and np.array_equal(np.array(d["x"]).T, xk[:, :2]) and
    len(d["columns"][1]["residual_history"]) == d["columns"][1]["iterations"] + 1,
    "a JSON b of 2 columns: x as 2 lists, the same bits, histories per column", out[:200])
st, _, out = call("POST", f"/v1/matrices/{A64}/solve", json.dumps({"b": list(B[:, 0])}).encode(), ctype="application/json")
tap(st == 200, "a JSON solve without async waits for the answer (synchronous by default)", out[:200])

done()
