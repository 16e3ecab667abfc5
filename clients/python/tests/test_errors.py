"""Transport and retry paths: a daemon that is down, one that never answers, 503 with Retry-After,
jobs that fail or never end, error bodies that are not JSON. A scripted server plays the daemon
where a real one will not misbehave on demand; each path ends in its exception, never a hang.
"""
from __future__ import annotations

import json
import time

import numpy as np
import pytest

import spmvd
from conftest import free_port

JOB = "11111111-2222-4333-8444-555555555555"
ERR = {"error": {"code": "queue_full", "message": "the cpu queue is full; retry later"}}


def test_daemon_down_is_connection_failed() -> None:
    c = spmvd.Client(f"http://127.0.0.1:{free_port()}", timeout=5)
    t0 = time.monotonic()
    with pytest.raises(spmvd.ConnectionFailed) as e:
        c.health()
    assert e.value.status is None and e.value.code == "connection_failed" and "cannot reach" in e.value.message
    assert isinstance(e.value, ConnectionError) and time.monotonic() - t0 < 5


def test_silent_daemon_times_out(fake) -> None:
    fake.routes[("GET", "/v1/info")] = ["hang"]
    c = spmvd.Client(fake.url, timeout=0.5)
    t0 = time.monotonic()
    with pytest.raises(spmvd.Timeout) as e:
        c.info()
    assert isinstance(e.value, TimeoutError) and e.value.code == "timeout"
    assert time.monotonic() - t0 < 10


def test_503_is_retried_after_retry_after(fake) -> None:
    fake.routes[("GET", "/v1/info")] = [(503, {"Retry-After": "1"}, ERR), (503, {"Retry-After": "0"}, ERR),
                                        (200, {}, {"version": "x"})]
    c = spmvd.Client(fake.url, retries=3)
    t0 = time.monotonic()
    assert c.info() == {"version": "x"}
    hits = [h for h in fake.hits if h[1] == "/v1/info"]
    assert len(hits) == 3
    assert hits[1][2] - hits[0][2] >= 0.9  # waited the Retry-After second
    assert time.monotonic() - t0 < 10


def test_503_after_the_retries_is_unavailable(fake) -> None:
    fake.routes[("POST", "/v1/matrices/m/bench")] = [(503, {"Retry-After": "0"}, ERR)]
    c = spmvd.Client(fake.url, retries=2)
    with pytest.raises(spmvd.Unavailable) as e:
        c.bench("m", progress=None)
    assert e.value.status == 503 and e.value.code == "queue_full" and e.value.retry_after == 0
    assert len(fake.hits) == 3  # one try and two retries


def test_retry_after_is_capped(fake) -> None:
    fake.routes[("GET", "/v1/info")] = [(503, {"Retry-After": "3600"}, ERR), (200, {}, {"ok": 1})]
    c = spmvd.Client(fake.url, max_retry_wait=0.2)
    t0 = time.monotonic()
    assert c.info() == {"ok": 1} and time.monotonic() - t0 < 5


def test_non_json_error_body(fake) -> None:
    fake.routes[("GET", "/v1/info")] = [(502, {"Content-Type": "text/html"}, b"<html>bad gateway</html>")]
    with pytest.raises(spmvd.ServerError) as e:
        spmvd.Client(fake.url).info()
    assert e.value.status == 502 and e.value.code == "http_502" and "bad gateway" in e.value.message


def test_failed_job_is_job_failed(fake) -> None:
    fake.routes[("GET", f"/v1/jobs/{JOB}")] = [
        (200, {}, {"id": JOB, "state": "running", "progress": 0.5}),
        (200, {}, {"id": JOB, "state": "failed", "status": 500,
                   "error": {"code": "device_error", "message": "the kernel failed on gpu0"}})]
    seen = []
    with pytest.raises(spmvd.JobFailed) as e:
        spmvd.Client(fake.url).wait(JOB, progress=lambda f, j: seen.append((f, j["state"])))
    assert e.value.code == "device_error" and e.value.status == 500 and "gpu0" in e.value.message
    assert e.value.job["state"] == "failed" and seen[0] == (0.5, "running")


def test_job_that_never_ends_times_out(fake) -> None:
    fake.routes[("GET", f"/v1/jobs/{JOB}")] = [(200, {}, {"id": JOB, "state": "queued", "progress": 0.0})]
    t0 = time.monotonic()
    with pytest.raises(spmvd.Timeout) as e:
        spmvd.Client(fake.url).wait(JOB, timeout=0.5, progress=None)
    assert JOB in e.value.message and "cancel" in e.value.message
    assert time.monotonic() - t0 < 5


def test_bench_waits_with_tqdm_when_asked(fake) -> None:
    pytest.importorskip("tqdm")
    fake.routes[("POST", "/v1/matrices/m/bench")] = [(202, {}, {"id": JOB, "state": "queued"})]
    fake.routes[("GET", f"/v1/jobs/{JOB}")] = [
        (200, {}, {"id": JOB, "state": "running", "progress": 0.3}),
        (200, {}, {"id": JOB, "state": "done", "progress": 1.0,
                   "result": {"results": [{"kernel": "cpu.csr.serial", "device": "cpu", "params": {},
                                           "stats": {"median_ms": 1.0, "gflops": 2.0, "gbps": 3.0},
                                           "speedup": 1.0, "verified": True}], "skipped": [], "rows": 4}})]
    b = spmvd.Client(fake.url).bench("m", progress=True)
    assert b[0]["gflops"] == 2.0 and b.rows == 4


def test_short_binary_answer_is_an_error(fake) -> None:
    desc = {"id": "m", "rows": 4, "cols": 4, "nnz": 4, "dtype": "float64"}
    fake.routes[("GET", "/v1/matrices/m")] = [(200, {}, desc)]
    fake.routes[("POST", "/v1/matrices/m/spmv")] = [(200, {"X-SpMV-Stats": "{}"}, b"\0" * 8)]
    c = spmvd.Client(fake.url)
    with pytest.raises(spmvd.SpmvdError) as e:
        c.spmv("m", np.ones(4))
    assert e.value.code == "bad_answer"


def test_vector_and_solve_follow_the_contract_on_a_scripted_daemon(fake) -> None:
    """The wire format of Vector and solve, checked where no daemon has the routes yet."""
    vd = {"id": "v1", "n": 3, "k": 2, "dtype": "float64", "device": "cpu", "bytes": 48}
    X = np.arange(6.0).reshape(3, 2)
    fake.routes[("POST", "/v1/vectors")] = [(201, {"Location": "/v1/vectors/v1"}, vd)]
    fake.routes[("GET", "/v1/vectors/v1")] = [(200, {"X-SpMV-Vector": '{"id":"v1","n":3,"k":2,"dtype":"float64"}'},
                                               np.asfortranarray(X).tobytes(order="F"))]
    fake.routes[("POST", "/v1/ops")] = [(200, {}, {"results": {"dot": [5.0, 14.0]}, "steps": [], "total_ms": 0.1})]
    c = spmvd.Client(fake.url)
    v = c.vector(X)
    assert v.shape == (3, 2) and v.k == 2
    assert np.array_equal(v.to_numpy(), X)
    assert v.dot(v) == [5.0, 14.0]
    desc = {"id": "m", "rows": 3, "cols": 3, "nnz": 3, "dtype": "float64", "symmetry": "general"}
    fake.routes[("GET", "/v1/matrices/m")] = [(200, {}, desc)]
    # synchronous (the default): b in binary, x and then the history back in binary, the report in a header
    rep = {"method": "cg", "converged": False, "iterations": 7, "relres": 0.5, "residual_history_len": 2,
           "stop": {"reason": "maxit", "detail": "7 iterations"}}
    fake.routes[("POST", "/v1/matrices/m/solve")] = [
        (200, {"X-SpMV-Solve": json.dumps(rep), "Content-Type": "application/octet-stream"},
         np.array([1.0, np.nan, 3.0, 1.0, 0.5], "<f8").tobytes())]
    res = c.solve("m", np.ones(3), maxit=7)
    assert not res.converged and res.stop["reason"] == "maxit" and res.iterations == 7
    assert res.x[0] == 1.0 and np.isnan(res.x[1]) and res.residual_history == [1.0, 0.5]
    assert "history=true" in fake.queries[-1] and "maxit=7" in fake.queries[-1] and "async" not in fake.queries[-1]
    # with progress: a job, waited for with long polls, x in its JSON result
    fake.routes[("POST", "/v1/matrices/m/solve")] = [(202, {}, {"id": JOB, "state": "queued"})]
    fake.routes[("GET", f"/v1/jobs/{JOB}")] = [(200, {}, {"id": JOB, "state": "done", "progress": 1.0, "result": {
        "x": [1.0, "NaN", 3.0], "method": "cg", "converged": False, "iterations": 7, "relres": 0.5,
        "stop": {"reason": "maxit", "detail": "7 iterations"}, "residual_history": [1.0, 0.5]}})]
    seen = []
    res = c.solve("m", np.ones(3), maxit=7, progress=lambda f, j: seen.append(f))
    assert not res.converged and res.stop["reason"] == "maxit" and res.iterations == 7 and seen == [1.0]
    assert res.x[0] == 1.0 and np.isnan(res.x[1]) and res.residual_history == [1.0, 0.5]
    assert "async=true" in fake.queries[-2]
