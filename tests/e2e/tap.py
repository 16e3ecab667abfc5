"""tap.py — what the e2e checks written in Python share (ops_check.py,
shm_check.py, cluster_vectors.py): TAP lines, and an HTTP call with urllib
that answers (status, parsed JSON) whatever the status, or the raw bytes
when asked for them."""
import json
import sys
import urllib.error
import urllib.request

_count = 0
_failed = 0


def ok(cond, what, detail=""):
    """One TAP line; a failure's detail follows as up to 6 comment lines."""
    global _count, _failed
    _count += 1
    if not cond:
        _failed += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", _count, what), flush=True)
    if not cond and detail:
        for line in str(detail).splitlines()[:6]:
            print("#   " + line[:600], flush=True)
    return cond


def skip(why):
    """A line that counts as passed, saying what was not checked and why."""
    global _count
    _count += 1
    print("ok %d # SKIP %s" % (_count, why), flush=True)


def done():
    """The plan line; exits 1 when any line failed."""
    print("1..%d" % _count, flush=True)
    sys.exit(1 if _failed else 0)


def call(base, method, path, body=None, ctype="application/json", accept=None, timeout=120):
    """(status, JSON) — or (status, bytes) with `accept`; a body that is not
    bytes or text is sent as JSON."""
    data = None
    if body is not None:
        data = body if isinstance(body, bytes) else (body.encode() if isinstance(body, str) else json.dumps(body).encode())
    headers = {"Content-Type": ctype} if data is not None else {}
    if accept:
        headers["Accept"] = accept
    req = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    if accept and status < 300:
        return status, raw
    try:
        return status, json.loads(raw) if raw else {}
    except ValueError:
        return status, {"raw": raw[:200].decode(errors="replace")}
