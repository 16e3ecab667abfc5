"""Client against a real daemon: information routes, uploads of every kind, binary spmv, bench, plots.

Products are compared with the shared matrices' expected.json (computed
independently with SciPy) or with SciPy's own product on the same random
x; outputs the client fills are checked against NaN-poisoned buffers.
"""
from __future__ import annotations

import gzip
import os
import re
import shutil

import numpy as np
import pytest

import spmvd
from conftest import REAL, ROOT, poisoned

sp = pytest.importorskip("scipy.sparse")
sio = pytest.importorskip("scipy.io")


def x_expected(n: int) -> np.ndarray:
    return 1 + (np.arange(n) % 7) / 8


def rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def test_version_matches_the_daemon(client: spmvd.Client) -> None:
    with open(os.path.join(ROOT, "engine", "spmv.h")) as f:
        want = re.search(r'#define SPMV_VERSION "([^"]+)"', f.read()).group(1)
    assert spmvd.__version__ == want
    assert client.health()["version"] == want


def test_information_routes(client: spmvd.Client) -> None:
    h = client.health()
    assert h["status"] == "ok"
    info = client.info()
    assert "devices" in info and "limits" in info
    ks = client.kernels()
    names = {k["name"] for k in ks}
    assert {"cpu.csr.serial", "cpu.csr.omp"} <= names
    assert client.kernel("cpu.csr.serial")["available"] is True
    assert client.ready() is True
    assert "spmvd_requests_total" in client.metrics()


@pytest.mark.parametrize("name", ["west0067.mtx", "lp_afiro.mtx", "bcsstk13.mtx", "karate.mtx"])
def test_upload_path_and_spmv_match_expected(client: spmvd.Client, expected: dict, name: str) -> None:
    e = expected["matrices"][name]
    A = client.upload(os.path.join(REAL, name))
    assert isinstance(A, spmvd.RemoteMatrix)
    assert A.shape == (e["rows"], e["cols"])
    assert A.nnz == e["nnz"] and A.dtype == np.float64 and A.name == name
    y = poisoned(A.shape[0])
    res = client.spmv(A, x_expected(A.shape[1]), kernel="cpu.csr.serial", runs=3, verify=True)
    y[:] = res.y
    assert rel(y, np.asarray(e["y"])) < 1e-12
    assert res.kernel == "cpu.csr.serial" and res.stats["stats"]["runs"] == 3
    assert res.stats["verify"]["max_rel_err"] <= 1e-12
    yy, stats = res  # unpacks
    assert yy is res.y and stats is res.stats
    client.delete(A)
    with pytest.raises(spmvd.NotFound) as ei:
        client.get(A.id)
    assert ei.value.status == 404 and ei.value.code == "not_found"


def test_upload_gz_npz_scipy_coo(client: spmvd.Client, tmp_path, rng) -> None:
    src = os.path.join(REAL, "west0067.mtx")
    M = sio.mmread(src).tocsr()
    gz = tmp_path / "west0067.mtx.gz"
    with open(src, "rb") as f, gzip.open(gz, "wb") as g:
        shutil.copyfileobj(f, g)
    npz = tmp_path / "west0067.npz"
    sp.save_npz(npz, M)
    coo = M.tocoo()
    x = rng.uniform(-1, 1, M.shape[1])
    ref = M @ x
    made = [client.upload(str(gz)), client.upload(npz), client.upload(M, name="from scipy"),
            client.upload((coo.row, coo.col, coo.data), shape=M.shape)]
    assert made[0].name == "west0067.mtx.gz" and made[2].name == "from scipy"
    for A in made:
        assert A.shape == M.shape and A.nnz == M.nnz
        assert rel(A @ x, ref) < 1e-12
    ids = {m.id for m in client.list()}
    assert {A.id for A in made} <= ids
    for A in made:
        A.delete()
    # the dtype of a .npz path comes from its data.npy header; a CSC .npz arrives as itself
    npz32 = tmp_path / "west0067-f32.npz"
    sp.save_npz(npz32, sp.csc_matrix(M.astype(np.float32)), compressed=False)
    B = client.upload(npz32)
    assert B.dtype == np.float32 and B.nnz == M.nnz
    assert rel(B @ x, ref) < 1e-5
    B.delete()


def test_generate_builds_matrices_by_formula(client: spmvd.Client, rng) -> None:
    n, per_row = 3000, 9
    A = client.generate("band", n, per_row=per_row, offsets=64, name="band")
    h = per_row // 2
    i, j = np.meshgrid(np.arange(n), np.arange(-h, h + 1), indexing="ij")
    j = i + j
    keep = (j >= 0) & (j < n)
    B = sp.csr_matrix((1.0 + ((i[keep] + 3 * j[keep]) % 7) / 8.0, (i[keep], j[keep])), shape=(n, n))
    assert A.shape == (n, n) and A.nnz == B.nnz and A.descriptor["generated"]["kind"] == "band"
    assert A.descriptor["row_offsets"] == 64
    x = rng.uniform(-1, 1, n)
    assert rel(A @ x, B @ x) < 1e-14
    P = client.generate("poisson2d", 30, dtype="float32")
    T = sp.diags([-1, 2, -1], [-1, 0, 1], shape=(30, 30))
    Q = (sp.kron(sp.identity(30), T) + sp.kron(T, sp.identity(30))).tocsr()
    assert P.dtype == np.float32 and P.nnz == Q.nnz
    x = rng.uniform(-1, 1, 900)
    assert rel(P @ x, Q @ x) < 1e-5
    with pytest.raises(spmvd.BadRequest):
        client.generate("nosuch", 10)
    with pytest.raises(spmvd.ApiError) as e:
        client.generate("poisson2d", 50000)
    assert e.value.status == 422 and "46340" in str(e.value)
    A.delete()
    P.delete()


def test_float32_matrix_converts_x_and_answers_float32(client: spmvd.Client, expected: dict) -> None:
    e = expected["matrices"]["west0067.mtx"]
    A = client.upload(os.path.join(REAL, "west0067.mtx"), dtype="float32")
    assert A.dtype == np.float32
    y = client.spmv(A, x_expected(67)).y  # float64 x is rounded to float32, as documented
    assert y.dtype == np.float32
    ye = np.asarray(e["y"])
    assert np.linalg.norm(y - ye) / np.linalg.norm(ye) < 1e-5
    assert (A @ np.arange(67)).dtype == np.float32  # integers convert too
    # a float32 scipy matrix uploads as float32 without being told
    B = client.upload(sio.mmread(os.path.join(REAL, "west0067.mtx")).tocsr().astype(np.float32))
    assert B.dtype == np.float32
    A.delete()
    B.delete()


def test_mixed_matrix_takes_and_answers_float64(client: spmvd.Client, rng) -> None:
    """dtype "mixed": float32 values, float64 vectors; y is A rounded to float32, times x in float64."""
    M = sio.mmread(os.path.join(REAL, "west0067.mtx")).tocsr()
    A = client.upload(M, dtype="mixed")
    assert A.descriptor["dtype"] == "mixed" and A.dtype == np.float64
    x = rng.uniform(-1, 1, M.shape[1])
    y = A @ x
    assert y.dtype == np.float64
    M32 = M.astype(np.float32).astype(np.float64)
    assert np.max(np.abs(y - M32 @ x)) <= 1e-12 * np.max(abs(M32) @ abs(x))
    v = client.vector(like=A, values=x)  # a vector like a mixed matrix is float64
    assert v.dtype == np.float64
    v.delete()
    A.delete()


def test_noncontiguous_and_column_inputs(client: spmvd.Client, rng) -> None:
    M = sio.mmread(os.path.join(REAL, "cage5.mtx")).tocsr()
    A = client.upload(M)
    big = rng.uniform(-1, 1, (M.shape[1], 3))
    x = big[:, 1]  # a strided view
    assert not x.flags["C_CONTIGUOUS"]
    assert rel(A @ x, M @ x) < 1e-12
    assert (A.matvec(x.reshape(-1, 1))).shape == (M.shape[0], 1)
    A.delete()


def test_client_side_input_errors(client: spmvd.Client) -> None:
    A = client.upload(os.path.join(REAL, "west0067.mtx"))
    with pytest.raises(ValueError, match="67"):
        client.spmv(A, np.ones(66))
    with pytest.raises(ValueError):
        A.matvec(np.ones(68))
    with pytest.raises(TypeError, match="complex"):
        A @ (np.ones(67) + 1j)
    with pytest.raises(TypeError):
        client.spmv(A, np.array(["a"] * 67))
    with pytest.raises(ValueError, match="1-D"):
        client.spmv(A, np.ones((67, 1, 1)))
    with pytest.raises(ValueError):
        client.spmv(A, np.ones(67), op="x")
    with pytest.raises(TypeError, match="complex"):
        client.upload(sp.identity(3, dtype=complex, format="csr"))
    with pytest.raises(ValueError, match="out of range"):
        client.upload((np.array([0, 5]), np.array([0, 1]), np.array([1.0, 2.0])), shape=(3, 3))
    with pytest.raises(ValueError):
        client.upload((np.array([0]), np.array([0]), np.array([1.0, 2.0])), shape=(3, 3))
    with pytest.raises(ValueError, match="shape"):
        client.upload((np.array([0]), np.array([0]), np.array([1.0])))
    with pytest.raises(TypeError, match="cannot upload"):
        client.upload(42)
    A.delete()


def test_server_error_paths(client: spmvd.Client, tmp_path) -> None:
    A = client.upload(os.path.join(REAL, "west0067.mtx"))
    with pytest.raises(spmvd.BadRequest) as e:
        client.spmv(A, np.ones(67), kernel="cpu.nope")
    assert e.value.status == 400 and e.value.code == "unknown_kernel" and "cpu.nope" in e.value.message
    if not any(d.get("kind") == "gpu" for d in client.info()["devices"]):
        with pytest.raises(spmvd.Conflict) as e:
            client.spmv(A, np.ones(67), kernel="gpu.csr.vector")
        assert e.value.status == 409 and e.value.code == "kernel_unavailable"
    with pytest.raises(spmvd.BadRequest) as e:
        client.spmv(A, np.ones(67), runs=10**9)
    assert e.value.status == 400
    bad = tmp_path / "bad.mtx"
    bad.write_text("%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1.0\n9 1 2.0\n")
    with pytest.raises(spmvd.Unprocessable) as e:
        client.upload(bad)
    assert e.value.status == 422 and "line" in e.value.message
    with pytest.raises(spmvd.NotFound):
        client.spmv("00000000-0000-4000-8000-000000000000", np.ones(3))
    with pytest.raises(spmvd.MethodNotAllowed) as e:
        client.request("PUT", "/v1/health")
    assert e.value.status == 405
    with pytest.raises(spmvd.UnsupportedMediaType) as e:
        client.request("POST", f"/v1/matrices/{A.id}/bench", data=b"x", headers={"Content-Type": "text/plain"})
    assert e.value.status == 415
    with pytest.raises(spmvd.NotFound):
        client.job("00000000-0000-4000-8000-000000000000")
    A.delete()


def test_auth_and_upload_limit(auth_daemon: dict) -> None:
    with spmvd.Client(auth_daemon["url"]) as anon:
        assert anon.health()["status"] == "ok"  # health needs no token
        with pytest.raises(spmvd.Unauthorized) as e:
            anon.list()
        assert e.value.status == 401 and e.value.code == "unauthorized"
    with spmvd.Client(auth_daemon["url"], token="wrong") as bad:
        with pytest.raises(spmvd.Unauthorized):
            bad.info()
    with spmvd.Client(auth_daemon["url"], token=auth_daemon["token"]) as c:
        assert isinstance(c.list(), list)
        with pytest.raises(spmvd.PayloadTooLarge) as e:
            c.upload(os.path.join(REAL, "bcsstk13.mtx"))  # over the daemon's 64 KiB
        assert e.value.status == 413 and e.value.code == "too_large"


def test_bench_records_progress_and_auto(client: spmvd.Client) -> None:
    A = client.upload(os.path.join(REAL, "west0067.mtx"))
    seen = []
    b = client.bench(A, runs=2, warmup=1, hack_sizes=[16, 32], progress=lambda f, j: seen.append(f))
    assert isinstance(b, spmvd.BenchResult) and isinstance(b, list)
    assert seen and seen[-1] == 1.0 and seen == sorted(seen)
    assert b[0]["kernel"] == "cpu.csr.serial" and b[0]["speedup"] == 1.0
    assert all(r["verified"] for r in b)
    assert sorted(r["hack_size"] for r in b if r["kernel"] == "cpu.hll.omp") == [16, 32]
    assert b.rows == 67 and b.nnz == A.nnz and b.seed is not None
    for r in b:
        assert r["median_ms"] > 0 and r["gflops"] > 0
    # auto serves spmv on a CPU-only host: benched, not skipped for want of a GPU
    assert "auto" not in [s["kernel"] for s in b.skipped]
    autos = [r for r in b if r["kernel"] == "auto"]
    assert len(autos) == 1 and autos[0]["auto_kernel"]
    A.delete()


def test_stat_and_thread_sweep(client: spmvd.Client, rng) -> None:
    """stat= puts the rates at the mean or the median; bench threads= sweeps, efficiency is vs cpu.csr.serial."""
    A = client.upload(os.path.join(REAL, "bcsstk13.mtx"))
    x = rng.uniform(-1, 1, A.shape[1])
    for stat in ("mean", "median"):
        s = client.spmv(A, x, kernel="cpu.csr.omp", runs=7, warmup=2, stat=stat).stats["stats"]
        assert s["stat"] == stat and abs(s["gflops"] * s[stat + "_ms"] * 1e6 / (2 * A.nnz) - 1) < 3e-5, s
    assert client.spmv(A, x, runs=2).stats["stats"]["stat"] == "median"
    with pytest.raises(spmvd.BadRequest) as e:
        client.spmv(A, x, stat="p99")
    assert "`stat`" in e.value.message and "mean" in e.value.message
    b = client.bench(A, kernels=["cpu.csr.serial", "cpu.csr.omp"], threads=[1, 2], runs=3, warmup=1, stat="mean",
                     progress=None)
    assert b.stat == "mean" and b.raw["threads"] == [1, 2]
    serial = [r for r in b if r["kernel"] == "cpu.csr.serial"][0]
    omp = sorted((r for r in b if r["kernel"] == "cpu.csr.omp"), key=lambda r: r["threads"])
    assert [r["threads"] for r in omp] == [1, 2] and [r["threads_used"] for r in omp] == [1, 2]
    for r in omp + [serial]:
        assert r["stat"] == "mean"
        want = serial["mean_ms"] / r["mean_ms"] / r["threads_used"]
        assert abs(r["efficiency"] - want) <= 3e-5 * want, (r, want)
    A.delete()


def test_plots_write_pngs(client: spmvd.Client, tmp_path) -> None:
    pytest.importorskip("matplotlib")
    import spmvd.plot as plot
    A = client.upload(os.path.join(REAL, "bcsstk13.mtx"))  # large enough for non-zero medians
    b = client.bench(A, runs=2, warmup=0, hack_sizes=[16, 32], progress=None)
    paths = plot.all_plots(b, str(tmp_path / "plots"), client=client, matrix=A, threads=[1, 2])
    names = sorted(os.path.basename(p) for p in paths)
    assert names == sorted(["gflops.png", "gbps.png", "speedup.png", "block_sizes.png", "hack_sizes.png",
                            "omp_efficiency.png", "spy.png"])
    for p in paths:
        with open(p, "rb") as f:
            head = f.read(8)
        assert head == b"\x89PNG\r\n\x1a\n" and os.path.getsize(p) > 2000, p
    sweep = plot.thread_sweep(client, A, threads=[1, 2], runs=2, warmup=0, stat="mean")
    assert sweep and sorted(r["threads"] for r in sweep) == sorted([1, 2] * (len(sweep) // 2))
    # efficiency against cpu.csr.serial (the bench's baseline), not the kernel at one thread; 6 digits each
    assert all(r["baseline"] == "cpu.csr.serial" and r["stat"] == "mean" for r in sweep)
    assert all(abs(r["efficiency"] - r["speedup"] / r["threads"]) <= 2e-5 * r["efficiency"] for r in sweep)
    # the raw table and a list of records plot too
    assert os.path.exists(plot.gflops(b.raw, str(tmp_path / "raw.png")))
    assert os.path.exists(plot.speedup(list(b), str(tmp_path / "list.png")))
    A.delete()
