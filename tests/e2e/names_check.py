#!/usr/bin/env python3
"""names_check.py — matrices by name (issue 28): names wherever ids go,
409 ambiguous_name listing the ids, if_exists=new|reuse|replace, the
descriptor's sha256 against its definition computed here, raw uploads
named from Content-Disposition. A random matrix from argv[1] (the seed,
printed by names.sh). Prints TAP; SPMVD_URL and SPMVD from the environment.
"""
import json
import os
import subprocess
import sys
import urllib.parse
import urllib.request

import numpy as np
import scipy.sparse as sp

import tap
from sparse_util import npz, sha256

BASE = os.environ["SPMVD_URL"]
seed = int(sys.argv[1])
rng = np.random.default_rng(seed)


def upload(body, query="", headers=None):
    req = urllib.request.Request(BASE + "/v1/matrices" + query, data=body, method="POST",
                                 headers=dict({"Content-Type": "application/octet-stream"}, **(headers or {})))
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read()), r.headers.get("Location")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()), None


def named(name):
    return [m["id"] for m in tap.call(BASE, "GET", "/v1/matrices")[1]["matrices"] if m["name"] == name]


def q(name):
    return urllib.parse.quote(name, safe="")


n = int(rng.integers(40, 120))
A = sp.random(n, n, density=0.05, random_state=seed % 2**32, format="csr") + sp.identity(n, format="csr")
B = A.copy()
B.data = B.data * 2
x = rng.uniform(-1, 1, n)

# ------------------------------------------------ names from the upload
st, d, loc = upload(npz(A), headers={"Content-Disposition": 'attachment; filename="some/dir/first.npz"'})
tap.ok(st == 201 and d["name"] == "first.npz", "a raw upload is named by Content-Disposition's file name, its "
       "directories dropped", "%d %s" % (st, d))
st, d, _ = upload(npz(A), headers={"Content-Disposition": "attachment; filename*=UTF-8''m%C3%BC%20x.npz"})
tap.ok(st == 201 and d["name"] == "m\u00fc x.npz", "... or by filename*= (RFC 6266, percent-encoded UTF-8)",
       "%d %s" % (st, d))
st, d, _ = upload(npz(A), "?name=given", headers={"Content-Disposition": 'attachment; filename="first.npz"'})
tap.ok(st == 201 and d["name"] == "given", "`name` wins over Content-Disposition", "%d %s" % (st, d))
st, d, _ = upload(npz(A))
tap.ok(st == 201 and d["name"] == "matrix", "without either a raw upload is named matrix", "%d %s" % (st, d))

# ------------------------------------------------------------ sha256
for dtype, npdt in (("float64", "<f8"), ("float32", "<f4")):
    st, d, _ = upload(npz(A), "?name=hash-%s&dtype=%s" % (dtype, dtype))
    want = sha256(A, npdt)
    tap.ok(st == 201 and d.get("sha256") == want, "%s: the descriptor's sha256 is the definition's (%s)" %
           (dtype, want[:16]), "%d got %s want %s" % (st, d.get("sha256"), want))
st, d, _ = upload(npz(A), "?name=hash-wide&offsets=64")
tap.ok(st == 201 and d["sha256"] == sha256(A, "<f8"), "64-bit row offsets hash as 32-bit ones do",
       "%d %s" % (st, d.get("sha256")))

# ------------------------------------------------- a name for the id
st, d, _ = upload(npz(A), "?name=" + q("unique name"))
uid = d["id"]
st, g = tap.call(BASE, "GET", "/v1/matrices/" + q("unique name"))
tap.ok(st == 200 and g["id"] == uid, "GET /v1/matrices/{name}: the matrix of that name", "%d %s" % (st, g))
st, y = tap.call(BASE, "POST", "/v1/matrices/%s/spmv" % q("unique name"), {"x": x.tolist(), "kernel": "cpu.csr.serial"})
tap.ok(st == 200 and y["matrix"] == uid and np.allclose(y["y"], A @ x, rtol=1e-12, atol=1e-12),
       "POST /v1/matrices/{name}/spmv multiplies it", "%d %s" % (st, str(y)[:300]))
st, v = tap.call(BASE, "POST", "/v1/vectors", {"like": "unique name", "fill": 1})
tap.ok(st == 201 and v["n"] == n, "`like` takes a name", "%d %s" % (st, v))
st, c = tap.call(BASE, "POST", "/v1/matrices/%s/spmspm" % uid, {"b": "unique name"})
tap.ok(st == 200 and c["b"] == uid, "spmspm's `b` takes a name", "%d %s" % (st, str(c)[:300]))

# a file's name without its extension, when nothing is named so exactly
st, f1, _ = upload(npz(A), "?name=stem.mtx")
st, g = tap.call(BASE, "GET", "/v1/matrices/stem")
tap.ok(st == 200 and g["id"] == f1["id"], "`stem` finds the matrix named stem.mtx", "%d %s" % (st, g))
st, f2, _ = upload(npz(A), "?name=stem")
st, g = tap.call(BASE, "GET", "/v1/matrices/stem")
tap.ok(st == 200 and g["id"] == f2["id"], "... and the matrix named `stem` exactly once there is one", "%d %s" % (st, g))
upload(npz(A), "?name=twin.npz")
upload(npz(A), "?name=twin.mtx.gz")
st, e = tap.call(BASE, "GET", "/v1/matrices/twin")
tap.ok(st == 409 and e["error"]["code"] == "ambiguous_name", "`twin` with twin.npz and twin.mtx.gz stored: 409",
       "%d %s" % (st, e))

routes = [json.loads(l) for l in subprocess.run([os.environ["SPMVD"], "--routes"], check=True, stdout=subprocess.PIPE,
                                                text=True).stdout.splitlines()]
by_name = [r for r in routes if r["path"].startswith("/v1/matrices/{id}")]


def probe(r, ref):
    """The route r with ref for {id}, and a body of the kind it reads."""
    body, ctype = {"json": (b"{}", "application/json"), "json_or_binary": (b"{}", "application/json"),
                   "binary": (b"", "application/octet-stream")}.get(r["body"], (None, "application/json"))
    return tap.call(BASE, r["method"], r["path"].replace("{id}", q(ref)), body, ctype)


for r in by_name:
    st, e = probe(r, "no such name")
    msg = e.get("error", {}).get("message", "")
    tap.ok(st == 404 and "no such name" in msg, "%s %s with an unknown name: 404 naming it" % (r["method"], r["path"]),
           "%d %s" % (st, e))

# ------------------------------------------ if_exists and ambiguity
st1, d1, _ = upload(npz(A), "?name=dup")
st2, d2, _ = upload(npz(A), "?name=dup&if_exists=new")
tap.ok(st1 == 201 and st2 == 201 and d1["id"] != d2["id"], "if_exists=new (the default) stores another copy")
for r in by_name:
    st, e = probe(r, "dup")
    msg = e.get("error", {}).get("message", "")
    tap.ok(st == 409 and e.get("error", {}).get("code") == "ambiguous_name" and d1["id"] in msg and d2["id"] in msg,
           "%s %s with a name two matrices have: 409 ambiguous_name listing both ids" % (r["method"], r["path"]),
           "%d %s" % (st, e))
tap.ok(len(named("dup")) == 2, "DELETE by an ambiguous name deleted nothing")
st, e = tap.call(BASE, "POST", "/v1/vectors", {"like": "dup", "fill": 1})
tap.ok(st == 409 and d1["id"] in str(e), "`like` with an ambiguous name: 409 listing the ids", "%d %s" % (st, e))

st, d3, loc = upload(npz(A), "?name=reuse-me")
st, d4, loc4 = upload(npz(A), "?name=reuse-me&if_exists=reuse")
tap.ok(st == 200 and d4["id"] == d3["id"] and loc4 == "/v1/matrices/" + d3["id"] and len(named("reuse-me")) == 1,
       "if_exists=reuse with the same content: 200 with the stored matrix, nothing stored", "%d %s" % (st, d4))
st, d5, _ = upload(npz(A), "?name=reuse-me&if_exists=reuse&dtype=float32")
tap.ok(st == 201 and d5["id"] != d3["id"], "if_exists=reuse with another dtype: 201, a new matrix", "%d" % st)
st, d6, _ = upload(npz(B), "?name=reuse-other&if_exists=reuse")
st, d7, _ = upload(npz(A), "?name=reuse-other&if_exists=reuse")
tap.ok(st == 201 and d7["id"] != d6["id"], "if_exists=reuse with other values: 201, a new matrix", "%d" % st)
st, d8, _ = upload(npz(B), "?name=reuse-other&if_exists=replace")
tap.ok(st == 201 and named("reuse-other") == [d8["id"]],
       "if_exists=replace: 201, and the matrix is the only one of its name (the %d others deleted)" % 2,
       "%d %s" % (st, named("reuse-other")))
st, g = tap.call(BASE, "GET", "/v1/matrices/reuse-other")
tap.ok(st == 200 and g["id"] == d8["id"] and g["sha256"] == sha256(B, "<f8"), "the name now names the new content")
st, e, _ = upload(npz(A), "?name=x&if_exists=keep")
tap.ok(st == 400 and "if_exists" in e["error"]["message"], "if_exists=keep: 400 naming the values", "%d %s" % (st, e))
st, _ = tap.call(BASE, "DELETE", "/v1/matrices/" + q("unique name"))
tap.ok(st == 204 and not named("unique name"), "DELETE by name", "%d" % st)
tap.done()
