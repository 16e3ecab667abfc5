"""spmvd_http.py — the bundle scripts' one HTTP call to spmvd, the wait for it to be ready, its stop.

api_test_vectors.py and bench_remote.py each start spmvd on a loopback port
of their own and talk to it through these: request() sends bytes as
application/octet-stream and anything else (not None) as JSON, and returns
(status, body bytes, headers) for an error answer as for a success; a
connection that fails raises (OSError). wait_ready() polls /v1/ready;
stop() ends the daemon's process.
Standard library only (the GPU host has nothing else).
"""
import json
import signal
import subprocess
import time
import urllib.error
import urllib.request


def request(base, method, path, body=None, headers=None, timeout=600):
    data = None
    hdrs = dict(headers or {})
    if isinstance(body, (bytes, bytearray)):
        data = bytes(body)
        hdrs.setdefault("Content-Type", "application/octet-stream")
    elif body is not None:
        data = json.dumps(body).encode()
        hdrs.setdefault("Content-Type", "application/json")
    r = urllib.request.Request(base + path, data=data, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(r, timeout=timeout) as resp:
            return resp.status, resp.read(), dict(resp.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


def wait_ready(base, tries, pause=0.2):
    """Asks GET /v1/ready up to `tries` times, `pause` seconds apart; True once it answers 200."""
    for _ in range(tries):
        try:
            if request(base, "GET", "/v1/ready", timeout=2)[0] == 200:
                return True
        except OSError:
            pass
        time.sleep(pause)
    return False


def stop(proc, grace=30):
    """SIGTERM to spmvd's process, then SIGKILL if it has not exited within `grace` seconds."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
