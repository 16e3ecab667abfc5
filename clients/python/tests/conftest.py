"""Fixtures of the Python client's tests, and their TAP report for tests/run.sh.

Daemons: ``daemon`` is a real spmvd on a free loopback port with a fresh
state directory (``SPMVD_URL`` names one already running instead);
``auth_daemon`` one with a bearer token and a 64 KiB upload limit. The
binary is ``$SPMVD``, else ``$SPMV_ROOT/$BUILD/spmvd``. ``fake`` serves
scripted answers (503s, a job that never ends, a server that never
answers) for the error paths a real daemon will not produce on demand.

Randomness: ``rng`` is seeded from ``SPMVD_TEST_SEED`` or fresh, and the
seed is printed (and in the TAP line of a failure) so a run can be repeated.

TAP: with ``SPMVD_TAP_FILE`` set, one line per test is appended there
(``PASS``/``FAIL``/``SKIP``, a tab, the test id, a tab, the detail);
tests/e2e/python.sh turns them into the runner's TAP lines.
"""
from __future__ import annotations

import http.server
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from typing import Any, Dict, Iterator, List

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("SPMV_ROOT") or os.path.abspath(os.path.join(HERE, "..", "..", ".."))
BUILD = os.environ.get("BUILD", "build")
SPMVD = os.environ.get("SPMVD") or os.path.join(BUILD if os.path.isabs(BUILD) else os.path.join(ROOT, BUILD), "spmvd")
MATRICES = os.environ.get("MATRICES") or os.path.abspath(os.path.join(ROOT, "..", "shared", "matrices"))
REAL = os.path.join(MATRICES, "real")


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Daemon:
    """A spmvd process on loopback, killed at the end of the session."""

    def __init__(self, *flags: str) -> None:
        if not os.access(SPMVD, os.X_OK):
            pytest.skip(f"no spmvd binary at {SPMVD} (make CUDA=0 build/spmvd)")
        self.state = tempfile.mkdtemp(prefix="spmvd-py.")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(self.state, "spmvd.log"), "wb")
        self.proc = subprocess.Popen([SPMVD, "--listen", f"127.0.0.1:{self.port}", "--state-dir",
                                      os.path.join(self.state, "st"), "--threads", "2", *flags],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        os.makedirs(os.path.join(self.state, "st"), exist_ok=True)
        import urllib.error
        import urllib.request
        for _ in range(600):
            if self.proc.poll() is not None:
                raise RuntimeError(f"spmvd exited with {self.proc.returncode}: {self.tail()}")
            try:
                with urllib.request.urlopen(self.url + "/v1/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        else:
            raise RuntimeError(f"spmvd did not answer in 30 s: {self.tail()}")

    def tail(self) -> str:
        self.log.flush()
        with open(self.log.name, "rb") as f:
            return f.read()[-1500:].decode(errors="replace")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        shutil.rmtree(self.state, ignore_errors=True)


@pytest.fixture(scope="session")
def daemon_url() -> Iterator[str]:
    if os.environ.get("SPMVD_URL"):
        yield os.environ["SPMVD_URL"]
        return
    d = Daemon()
    yield d.url
    d.stop()


@pytest.fixture(scope="session")
def auth_daemon(tmp_path_factory: Any) -> Iterator[Dict[str, str]]:
    token = "t0k-" + os.urandom(8).hex()
    path = tmp_path_factory.mktemp("auth") / "token"
    path.write_text(token + "\n")
    os.chmod(path, 0o600)
    d = Daemon("--auth-token-file", str(path), "--max-upload-bytes", "65536")
    yield {"url": d.url, "token": token}
    d.stop()


@pytest.fixture()
def client(daemon_url: str) -> Iterator[Any]:
    import spmvd
    with spmvd.Client(daemon_url, timeout=60) as c:
        yield c


@pytest.fixture(scope="session")
def expected() -> Dict[str, Any]:
    path = os.path.join(REAL, "expected.json")
    if not os.path.exists(path):
        pytest.skip(f"no shared matrices at {MATRICES}")
    with open(path) as f:
        return json.load(f)


_SEED: Dict[str, int] = {}


@pytest.fixture()
def rng(request: Any) -> np.random.Generator:
    seed = int(os.environ.get("SPMVD_TEST_SEED") or int.from_bytes(os.urandom(4), "little"))
    _SEED[request.node.nodeid] = seed
    print(f"seed {seed} (SPMVD_TEST_SEED={seed} repeats it)")
    return np.random.default_rng(seed)


def poisoned(n: int) -> np.ndarray:
    """An output buffer full of NaN, so a result nobody wrote shows."""
    return np.full(n, np.nan)


# ----------------------------------------------------------------- fake server

class Fake:
    """A scripted HTTP/1.1 server (keep-alive): ``routes[(method, path)]`` is a list of answers used
    in turn (the last repeats): ``(status, headers, body)`` or ``"hang"`` (never answer). A header
    ``X-Fake-Drop: 1`` in an answer is not sent: the connection is closed after that answer without
    ``Connection: close``, as a daemon's idle timeout would. ``connections`` counts the connections
    accepted, ``queries`` the query strings received."""

    def __init__(self) -> None:
        self.routes: Dict[tuple, List[Any]] = {}
        self.hits: List[tuple] = []
        self.queries: List[str] = []
        self.connections = 0
        self.stop_event = threading.Event()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                fake.connections += 1
                super().setup()

            def log_message(self, *a: Any) -> None:
                pass

            def handle_any(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                path, _, query = self.path.partition("?")
                fake.hits.append((self.command, path, time.monotonic()))
                fake.queries.append(query)
                answers = fake.routes.get((self.command, path)) or [(404, {}, b'{"error":{"code":"not_found",'
                                                                             b'"message":"no route"}}')]
                a = answers.pop(0) if len(answers) > 1 else answers[0]
                if a == "hang":
                    fake.stop_event.wait(30)
                    return
                status, headers, body = a
                body = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                for k, v in headers.items():
                    if k != "X-Fake-Drop":
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                if headers.get("X-Fake-Drop"):
                    self.close_connection = True

            do_GET = do_POST = do_DELETE = do_PUT = handle_any

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stop_event.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def fake() -> Iterator[Fake]:
    f = Fake()
    yield f
    f.close()


# ------------------------------------------------------------------------ TAP

_TAP = os.environ.get("SPMVD_TAP_FILE")
_reported: Dict[str, str] = {}


def _tap(kind: str, nodeid: str, detail: str = "") -> None:
    if not _TAP:
        return
    detail = " ".join(detail.split())[:400]
    with open(_TAP, "a") as f:
        f.write(f"{kind}\t{nodeid}\t{detail}\n")


def pytest_runtest_logreport(report: Any) -> None:
    nid = report.nodeid
    if report.failed:
        if _reported.get(nid) != "FAIL":
            seed = _SEED.get(nid)
            where = f"{report.when} failed" + (f", seed {seed}" if seed is not None else "")
            msg = str(report.longrepr).strip().splitlines()
            _tap("FAIL", nid, f"{where}: {msg[-1] if msg else ''}")
            _reported[nid] = "FAIL"
    elif report.skipped and nid not in _reported:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _tap("SKIP", nid, reason)
        _reported[nid] = "SKIP"
    elif report.when == "call" and report.passed and nid not in _reported:
        _tap("PASS", nid)
        _reported[nid] = "PASS"


def pytest_collectreport(report: Any) -> None:
    if report.failed:
        _tap("FAIL", report.nodeid or "collection", "collection failed: " + str(report.longrepr)[-300:])

