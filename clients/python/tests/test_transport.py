"""The transport at the socket's speed: one keep-alive connection, reopened when the daemon closed
it; x sent from the array's own buffer and y (and a solve's x) received straight into a new array,
with no second copy; jobs waited for with long polls, never sleeps; the URL from SPMVD_URL (SPMV_URL
an alias); a solve's repr is one short line.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import pytest

import spmvd

HERE = os.path.dirname(os.path.abspath(__file__))


def test_one_keep_alive_connection(fake) -> None:
    fake.routes[("GET", "/v1/info")] = [(200, {}, {"version": "x"})]
    c = spmvd.Client(fake.url)
    for _ in range(5):
        assert c.info() == {"version": "x"}
    assert fake.connections == 1 and c.connection.opened == 1


def test_reconnects_when_the_daemon_closed_the_connection(fake) -> None:
    """The daemon closes an idle connection without a word: the next request goes on a new one."""
    fake.routes[("GET", "/v1/info")] = [(200, {"X-Fake-Drop": "1"}, {"n": 1}), (200, {"X-Fake-Drop": "1"}, {"n": 2}),
                                        (200, {}, {"n": 3})]
    c = spmvd.Client(fake.url)
    assert [c.info()["n"] for _ in range(3)] == [1, 2, 3]
    assert fake.connections == 3 and len(fake.hits) == 3  # each request sent once


def test_connection_close_is_honoured(fake) -> None:
    fake.routes[("GET", "/v1/info")] = [(200, {"Connection": "close"}, {"n": 1})]
    c = spmvd.Client(fake.url)
    assert c.info() == {"n": 1} and c.info() == {"n": 1}
    assert fake.connections == 2


def test_url_from_the_environment(daemon_url: str) -> None:
    """Client() reads SPMVD_URL, else SPMV_URL (the C tools' name), else the default."""
    code = "import spmvd; c = spmvd.Client(); print(c.url); print(c.health()['status'])"

    def run(env: dict) -> list:
        e = {k: v for k, v in os.environ.items() if k not in ("SPMVD_URL", "SPMV_URL")}
        e.update(env, PYTHONPATH=os.path.dirname(HERE))
        out = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=60)
        return out.stdout.split() if out.returncode == 0 else ["rc", str(out.returncode), out.stderr[-300:]]
    assert run({"SPMVD_URL": daemon_url}) == [daemon_url, "ok"]
    assert run({"SPMV_URL": daemon_url}) == [daemon_url, "ok"]
    assert run({"SPMVD_URL": daemon_url, "SPMV_URL": "http://127.0.0.1:9"}) == [daemon_url, "ok"]
    e = {k: v for k, v in os.environ.items() if k not in ("SPMVD_URL", "SPMV_URL")}
    e["PYTHONPATH"] = os.path.dirname(HERE)
    out = subprocess.run([sys.executable, "-c", "import spmvd; print(spmvd.Client().url)"], env=e,
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "http://127.0.0.1:8080"


def _peak(fn) -> tuple:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        out = fn()
        return out, tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_spmv_makes_no_copy_of_x_or_y(client: spmvd.Client) -> None:
    """x goes from its own buffer, y comes straight into its array: the peak of new memory is y itself
    (a tobytes of x, a body bytes object or a concatenation would each add a vector's size)."""
    A = client.generate("poisson2d", 1000, kernel="cpu.csr.serial")  # 10^6 rows: 8 MB vectors
    x = np.ones(A.shape[1])
    client.spmv(A, x)  # the kernel's format built, the catalogue fetched
    (y, _), peak = _peak(lambda: client.spmv(A, x, kernel="cpu.csr.serial"))
    assert y.shape == (A.shape[0],) and y[500 * 1000 + 500] == 0.0  # an interior row of the Laplacian
    assert peak < y.nbytes + (2 << 20), f"{peak} bytes allocated for an {y.nbytes}-byte y"
    out = np.full(A.shape[0], np.nan)
    (y2, _), peak = _peak(lambda: client.spmv(A, x, kernel="cpu.csr.serial", out=out))
    assert y2 is out and np.array_equal(out, y), "out= receives y"
    assert peak < (2 << 20), f"{peak} bytes allocated with out="
    with pytest.raises(ValueError):
        client.spmv(A, x, out=np.empty(3))
    A.delete()


def test_solve_receives_x_into_its_array(client: spmvd.Client) -> None:
    A = client.generate("poisson2d", 700, kernel="cpu.csr.serial")  # 490000 rows
    b = np.ones(A.shape[0])
    client.solve(A, b, maxit=2, kernel="cpu.csr.serial")
    res, peak = _peak(lambda: client.solve(A, b, maxit=20, kernel="cpu.csr.serial"))
    assert res.x.shape == b.shape and res.iterations == 20 and len(res.residual_history) == 21
    assert peak < res.x.nbytes + (2 << 20), f"{peak} bytes allocated for an {res.x.nbytes}-byte x"
    A.delete()


def test_wait_uses_long_polls_and_never_sleeps(client: spmvd.Client, monkeypatch) -> None:
    A = client.generate("poisson2d", 300)
    b = np.ones(A.shape[0])

    def no_sleep(s: float) -> None:
        raise AssertionError(f"the client slept {s} s")
    monkeypatch.setattr(time, "sleep", no_sleep)
    job = client.solve(A, b, tol=3e-15, maxit=3000, kernel="cpu.csr.serial", wait=False)
    t0 = time.monotonic()
    polls = []
    done = client.wait(job, progress=lambda f, j: polls.append(j["state"]))
    assert done["state"] == "done" and done["result"]["iterations"] == 3000
    # one poll a second at most while it ran (a display updates each second), the end seen at once
    assert len(polls) <= time.monotonic() - t0 + 3, polls
    A.delete()


def test_solve_repr_is_short(client: spmvd.Client) -> None:
    A = client.generate("poisson2d", 40)
    res = client.solve(A, np.ones(A.shape[0]), tol=3e-15, maxit=1000, kernel="cpu.csr.serial")
    assert len(res.residual_history) == 1001
    text = repr(res)
    assert len(text) < 300 and "1001 values" in text and str(res) == text
    A.delete()


def test_solve_k_columns(client: spmvd.Client, rng) -> None:
    """k right-hand sides in one request: sequential solves, each the bits of its own solve."""
    A = client.generate("poisson2d", 30)
    B = rng.standard_normal((A.shape[0], 3))
    res = client.solve(A, B, tol=1e-10, preconditioner="jacobi", kernel="cpu.csr.serial")
    assert res.x.shape == B.shape and res.converged and len(res.columns) == 3
    for c in range(3):
        one = client.solve(A, B[:, c], tol=1e-10, preconditioner="jacobi", kernel="cpu.csr.serial")
        assert np.array_equal(res.columns[c].x, one.x) and res.columns[c].residual_history == one.residual_history
    assert res.iterations == sum(c.iterations for c in res.columns)
    x0 = res.x.copy()
    again = client.solve(A, B, x0=x0, tol=1e-8, kernel="cpu.csr.serial")
    assert again.iterations == 0 and again.converged
    A.delete()
