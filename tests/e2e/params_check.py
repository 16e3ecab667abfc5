#!/usr/bin/env python3
"""params_check.py — strict query parameters, walked over the daemon's own
route table (`spmvd --routes`), so a route added later is walked too.

For every route and method:
  - an unknown query parameter is 400 unknown_parameter naming it and every
    parameter the route takes (a route that declares no list fails here);
  - each declared parameter is not refused as unknown (with a binary body
    where the route reads the query only then), and is documented in
    docs/api.md;
  - a JSON route refuses a query it does not read (a declared binary-form
    parameter with a JSON body), the same way;
  - a route that reads a body refuses Content-Type text/plain with 415.
{id} becomes a random UUID and {name} a region name: the checks come before
any lookup, so nothing has to exist. Prints TAP; SPMVD_URL, SPMVD and
SPMV_ROOT from the environment.
"""
import json
import os
import subprocess
import uuid

import tap

BASE = os.environ["SPMVD_URL"]
ROOT = os.environ.get("SPMV_ROOT", ".")


def call(method, path, body=None, ctype=None):
    """(status, error code, error message) of one request."""
    st, d = tap.call(BASE, method, path, body if method in ("POST", "PUT") else None, ctype or "application/json")
    err = d.get("error", {}) if isinstance(d, dict) else {}
    return st, err.get("code", ""), err.get("message", "")


def concrete(path):
    return path.replace("{id}", str(uuid.uuid4())).replace("{name}", "psm_params_probe")


def body_for(route):
    """A body of the kind the route reads: (bytes, Content-Type)."""
    if route["body"] == "json":
        return b"{}", "application/json"
    if route["body"] in ("binary", "json_or_binary"):
        return b"\0" * 8, "application/octet-stream"
    if route["body"] == "own":  # an upload: a file, never JSON (415)
        return b"", "application/octet-stream"
    return b"", None


routes = [json.loads(l) for l in subprocess.run([os.environ["SPMVD"], "--routes"], check=True,
                                                stdout=subprocess.PIPE, text=True).stdout.splitlines()]
tap.ok(len(routes) >= 29, "spmvd --routes lists every route and method (%d)" % len(routes))
api_md = open(os.path.join(ROOT, "docs/api.md")).read()

for rt in routes:
    m, p = rt["method"], rt["path"]
    name = "%s %s" % (m, p)
    if rt["query"] is None:
        tap.ok(False, name + ": declares its query parameters", "the handlers' .query is NULL (api/api.h)")
        continue
    body, ctype = body_for(rt)
    st, code, msg = call(m, concrete(p) + "?zz_unknown=1", body, ctype)
    listed = all(q in msg for q in rt["query"])
    tap.ok(st == 400 and code == "unknown_parameter" and "zz_unknown" in msg and listed and
        (rt["query"] or "no query parameters" in msg),
        name + ": an unknown query parameter is 400 unknown_parameter naming it and the %d it takes" % len(rt["query"]),
        "HTTP %d %s: %s" % (st, code, msg))
    for q in rt["query"]:
        st, code, msg = call(m, concrete(p) + "?" + q + "=1", body, ctype)
        if code == "unknown_parameter":
            tap.ok(False, "%s: ?%s= is read" % (name, q), "HTTP %d %s: %s" % (st, code, msg))
    st, code, msg = call(m, concrete(p) + "?" + (rt["query"] + ["zz"])[0] + "=1&" + (rt["query"] + ["zz"])[0] + "=2",
                         body, ctype)
    tap.ok(st == 400 and code in ("invalid_parameter", "unknown_parameter"),
        name + ": a query parameter given twice is 400", "HTTP %d %s: %s" % (st, code, msg))
    undocumented = [q for q in rt["query"] if "`%s`" % q not in api_md and "?%s=" % q not in api_md]
    tap.ok(not undocumented, name + ": its query parameters are in docs/api.md", "missing: %s" % undocumented)
    if rt["body"] == "json_or_binary" and rt["query"] and not rt["query_with_json"]:
        st, code, msg = call(m, concrete(p) + "?" + rt["query"][0] + "=1", b"{}", "application/json")
        tap.ok(st == 400 and code == "unknown_parameter" and "JSON body" in msg,
            name + ": with a JSON body, a query parameter is 400 unknown_parameter",
            "HTTP %d %s: %s" % (st, code, msg))
    if rt["body"] in ("json", "json_or_binary", "binary"):
        st, code, msg = call(m, concrete(p), b"x=1", "text/plain")
        tap.ok(st == 415 and code == "unsupported_media_type" and "text/plain" in msg,
            name + ": Content-Type text/plain is 415", "HTTP %d %s: %s" % (st, code, msg))
    if rt["body"] == "json":
        st, code, msg = call(m, concrete(p), b"{}", "application/json; charset=utf-8")
        tap.ok(code != "unsupported_media_type", name + ": application/json with a charset is JSON",
            "HTTP %d %s: %s" % (st, code, msg))

tap.done()
