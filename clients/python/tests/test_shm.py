"""Shared-memory regions (``/v1/shm``) through the Python client, against a daemon with allow_shm.

Every product's y is read from the shared pages and compared with SciPy's
A @ x on the matrix as uploaded, x drawn afresh from the printed seed; y
is NaN before the product, so a y the daemon did not write shows. Resident
vectors take their values from a region and write them into one. The
refusals: an unknown region (404), a window or an operand past the end
(400), a name registered twice (409), an object shrunk or unlinked since
(410) and a daemon without allow_shm (403, the session's plain daemon).
"""
from __future__ import annotations

import os
from multiprocessing import shared_memory
from typing import Any, Iterator

import numpy as np
import pytest
import scipy.sparse

import spmvd
from conftest import Daemon


@pytest.fixture(scope="module")
def shm_url() -> Iterator[str]:
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm on this host")
    try:
        d = Daemon("--allow-shm", "true")
    except RuntimeError as e:
        if "allow" in str(e):
            pytest.skip(f"this spmvd does not take allow_shm: {e}")
        raise
    yield d.url
    d.stop()


@pytest.fixture()
def sc(shm_url: str) -> Iterator[spmvd.Client]:
    with spmvd.Client(shm_url, timeout=60) as c:
        yield c


@pytest.fixture()
def shm() -> Iterator[Any]:
    """A fresh 64 KiB SharedMemory, unlinked afterwards."""
    m = shared_memory.SharedMemory(create=True, size=65536)
    yield m
    try:
        m.close()
    except BufferError:
        pass  # a failed test's frame still holds a view
    try:
        m.unlink()
    except FileNotFoundError:
        pass


def random_matrix(rng: np.random.Generator, rows: int, cols: int, dtype: Any = np.float64) -> Any:
    a = scipy.sparse.random(rows, cols, density=0.05, format="csr", random_state=np.random.RandomState(
        int(rng.integers(2**31))), dtype=np.float64)
    a = a + scipy.sparse.eye(rows, cols, format="csr")  # no empty rows
    return a.astype(dtype).tocsr()


def close(y: np.ndarray, ref: np.ndarray, tol: float) -> None:
    assert not np.isnan(y).any(), "y holds NaN: the daemon left values unwritten"
    err = np.linalg.norm(y - ref) / max(np.linalg.norm(ref), 1e-300)
    assert err < tol, f"relative error {err:.3g}"


def test_register_list_get_unregister(sc: spmvd.Client, shm: Any) -> None:
    d = sc.register_shm(shm)
    assert d["name"] == shm.name and d["offset"] == 0 and d["size"] == shm.size
    assert d["object_bytes"] == shm.size and d["state"] == "ok" and isinstance(d["pinned"], bool)
    assert any(r["name"] == shm.name for r in sc.shm_regions())
    assert sc.shm_region(shm)["uses"] == 0
    sc.unregister_shm(shm)
    assert all(r["name"] != shm.name for r in sc.shm_regions())
    with pytest.raises(spmvd.NotFound) as e:
        sc.shm_region(shm.name)
    assert e.value.code == "shm_not_found"


def test_register_by_name_window(sc: spmvd.Client, shm: Any) -> None:
    d = sc.register_shm("/" + shm.name, offset=4096)  # size: the rest of /dev/shm/NAME
    try:
        assert d["name"] == shm.name and d["offset"] == 4096 and d["size"] == shm.size - 4096
    finally:
        sc.unregister_shm(shm.name)


def test_shared_arrays_spmv(sc: spmvd.Client, rng: np.random.Generator) -> None:
    a = random_matrix(rng, 301, 203)
    A = sc.upload(a)
    try:
        with sc.shared_arrays(A) as arrs:
            name = arrs.name
            assert arrs.x.shape == (203,) and arrs.y.shape == (301,) and np.isnan(arrs.y).all()
            arrs.x[:] = rng.standard_normal(203)
            res = arrs.spmv()
            assert res.y is arrs.y and res.kernel
            close(arrs.y, a @ arrs.x, 1e-12)
            arrs.x[:] = rng.standard_normal(203)  # again, same pages
            arrs.y[:] = np.nan
            A.spmv(arrs)
            close(arrs.y, a @ arrs.x, 1e-12)
            assert arrs.region()["uses"] >= 4
        assert all(r["name"] != name for r in sc.shm_regions()), "still registered after the with block"
        assert not os.path.exists(f"/dev/shm/{name}"), "the object was not unlinked"
    finally:
        A.delete()


def test_block_of_k_columns(sc: spmvd.Client, rng: np.random.Generator) -> None:
    a = random_matrix(rng, 77, 55)
    A = sc.upload(a)
    try:
        with A.shared_arrays(k=3) as arrs:
            assert arrs.x.shape == (55, 3) and arrs.y.shape == (77, 3) and arrs.x.flags.f_contiguous
            arrs.x[:] = rng.standard_normal((55, 3))
            arrs.spmv(kernel="cpu.csr.serial")
            close(arrs.y, a @ arrs.x, 1e-12)
    finally:
        A.delete()


def test_tuple_operands_each_way(sc: spmvd.Client, shm: Any, rng: np.random.Generator) -> None:
    a = random_matrix(rng, 150, 120)
    A = sc.upload(a)
    sc.register_shm(shm)
    try:
        x = np.ndarray((120,), dtype=np.float64, buffer=shm.buf, offset=0)
        y = np.ndarray((150,), dtype=np.float64, buffer=shm.buf, offset=8192)
        x[:] = rng.standard_normal(120)
        y[:] = np.nan
        res = sc.spmv(A, (shm, 0), y=(shm, 8192))
        close(y, a @ x, 1e-12)
        assert np.shares_memory(res.y, y) or np.array_equal(res.y, y)
        # by name only: y comes back as a view of /dev/shm/NAME
        y[:] = np.nan
        res = sc.spmv(A, (shm.name, 0), y=spmvd.ShmOperand(shm.name, 8192))
        close(np.asarray(res.y), a @ x, 1e-12)
        del res
        # x in the region, y inline
        res = sc.spmv(A, (shm, 0))
        close(res.y, a @ x, 1e-12)
        # x inline, y in the region
        xin = rng.standard_normal(120)
        y[:] = np.nan
        sc.spmv(A, xin, y=(shm, 8192))
        close(y, a @ xin, 1e-12)
        del x, y, res
    finally:
        sc.unregister_shm(shm)
        A.delete()


def spd_matrix(g: int) -> Any:
    """The 2-D Laplacian on a g x g grid (SPD)."""
    t = scipy.sparse.diags([-np.ones(g - 1), 2 * np.ones(g), -np.ones(g - 1)], [-1, 0, 1])
    eye = scipy.sparse.identity(g)
    return (scipy.sparse.kron(eye, t) + scipy.sparse.kron(t, eye)).tocsr()


def solved(a: Any, x: np.ndarray, b: np.ndarray, tol: float = 1e-8) -> None:
    assert not np.isnan(x).any(), "x holds NaN: the daemon left values unwritten"
    rel = np.linalg.norm(b - a @ x) / np.linalg.norm(b)
    assert rel <= 1.01 * tol, f"relative residual {rel:.3g}"


def test_solve_through_shm(sc: spmvd.Client, shm: Any, rng: np.random.Generator) -> None:
    a = spd_matrix(20)
    n = a.shape[0]
    A = sc.upload(a)
    try:
        # SharedArrays: b in x, the solution into y, in lockstep for k = 2
        with A.shared_arrays(k=2) as arrs:
            arrs.x[:] = rng.uniform(-1, 1, (n, 2))
            res = arrs.solve(preconditioner="jacobi")
            assert res.converged and np.shares_memory(res.x, arrs.y) and res.raw["k"] == 2
            for j in range(2):
                solved(a, arrs.y[:, j], arrs.x[:, j])
                assert np.array_equal(res.columns[j].x, arrs.y[:, j])
        # tuples: b from the region and x in the answer, then b inline and x into the region
        sc.register_shm(shm)
        b = np.ndarray((n,), dtype=np.float64, buffer=shm.buf, offset=0)
        x = np.ndarray((n,), dtype=np.float64, buffer=shm.buf, offset=8 * n)
        b[:] = rng.uniform(-1, 1, n)
        x[:] = np.nan
        res = sc.solve(A, (shm, 0))
        solved(a, res.x, b)
        assert np.isnan(x).all() and not np.shares_memory(res.x, x)
        bin_ = rng.uniform(-1, 1, n)
        res = sc.solve(A, bin_, x_out=(shm, 8 * n), maxit=2000)
        solved(a, x, bin_)
        assert np.array_equal(np.asarray(res.x), x)
        x[:] = np.nan
        res = sc.solve(A, (shm, 0), x_out=spmvd.ShmOperand(shm.name, 8 * n), x0=np.zeros(n), wait=False)
        job = sc.wait(res)
        assert job["result"]["x"] == {"shm": shm.name, "offset": 8 * n}
        solved(a, x, b)
        with pytest.raises(spmvd.errors.NotFound):
            sc.solve(A, ("psm_never_registered", 0))
        with pytest.raises(ValueError):
            sc.solve(A, (shm, 0), k=0)
        del b, x, res
    finally:
        try:
            sc.unregister_shm(shm)
        except spmvd.errors.NotFound:
            pass
        A.delete()


def test_shared_with_a_group(sc: spmvd.Client, rng: np.random.Generator) -> None:
    a = random_matrix(rng, 40, 40)
    A = sc.upload(a)
    try:
        with sc.shared_arrays(A, group=os.getgid()) as arrs:
            st = os.stat(f"/dev/shm/{arrs.name}")
            assert st.st_mode & 0o777 == 0o660 and st.st_gid == os.getgid()
            arrs.x[:] = rng.standard_normal(40)
            arrs.spmv()
            close(arrs.y, a @ arrs.x, 1e-12)
    finally:
        A.delete()


def test_transpose_and_float32(sc: spmvd.Client, rng: np.random.Generator) -> None:
    a = random_matrix(rng, 90, 70)
    A = sc.upload(a)
    try:
        with sc.shared_arrays(A, op="t") as arrs:
            assert arrs.x.shape == (90,) and arrs.y.shape == (70,)
            arrs.x[:] = rng.standard_normal(90)
            arrs.spmv()
            close(arrs.y, a.T @ arrs.x, 1e-12)
    finally:
        A.delete()
    a32 = random_matrix(rng, 80, 80, np.float32)
    B = sc.upload(a32)
    try:
        with B.shared_arrays() as arrs:  # RemoteMatrix.shared_arrays
            assert arrs.x.dtype == np.float32
            arrs.x[:] = rng.standard_normal(80).astype(np.float32)
            arrs.spmv()
            close(arrs.y.astype(np.float64), a32.astype(np.float64) @ arrs.x.astype(np.float64), 1e-5)
    finally:
        B.delete()


def test_vectors_through_shm(sc: spmvd.Client, shm: Any, rng: np.random.Generator) -> None:
    a = random_matrix(rng, 120, 100)
    A = sc.upload(a)
    sc.register_shm(shm)
    try:
        x = np.ndarray((100,), dtype=np.float64, buffer=shm.buf, offset=0)
        x[:] = rng.standard_normal(100)
        v = sc.vector((shm, 0), like=A)  # n, dtype and device from A; the values from the region
        assert v.n == 100 and v.k == 1
        np.testing.assert_array_equal(v.to_numpy(), x)
        w = sc.vector(n=120, fill=0.0, like=A, side="rows")
        sc.spmv(A, v, y=w)
        y = w.to_numpy(into=(shm, 1024))  # the daemon writes w into the region
        close(y, a @ x, 1e-12)
        x[:] = rng.standard_normal(100)
        v.update(spmvd.ShmOperand(shm.name, 0))
        np.testing.assert_array_equal(v.to_numpy(), x)
        with pytest.raises(spmvd.BadRequest) as e:  # 100 values from byte 65000 run past the region
            v.update((shm, 65000))
        assert e.value.code == "out_of_range"
        v.delete()
        w.delete()
        del x, y
    finally:
        sc.unregister_shm(shm)
        A.delete()


def test_refusals(sc: spmvd.Client, shm: Any, rng: np.random.Generator) -> None:
    with pytest.raises(spmvd.NotFound) as e:
        sc.register_shm("spmvd-py-never-created-" + os.urandom(4).hex(), size=64)
    assert e.value.status == 404 and e.value.code == "shm_not_found"
    with pytest.raises(spmvd.BadRequest) as e:
        sc.register_shm(shm, offset=8, size=shm.size)
    assert e.value.status == 400 and e.value.code == "out_of_range"
    sc.register_shm(shm, size=4096)
    try:
        with pytest.raises(spmvd.Conflict) as e:
            sc.register_shm(shm, size=4096)
        assert e.value.status == 409 and e.value.code == "shm_exists"
        a = random_matrix(rng, 300, 300)
        A = sc.upload(a)
        try:
            with pytest.raises(spmvd.BadRequest) as e:  # y (2400 bytes at 2400) runs past the 4096-byte region
                sc.spmv(A, (shm, 0), y=(shm, 2400))
            assert e.value.status == 400 and e.value.code == "out_of_range"
            with pytest.raises(spmvd.NotFound) as e:
                sc.spmv(A, ("spmvd-py-no-such-region", 0), y=(shm, 0))
            assert e.value.status == 404 and e.value.code == "shm_not_found"
            with pytest.raises(spmvd.BadRequest):
                sc.spmv(A, (shm, 4), y=(shm, 2400))  # not a multiple of 8
            with pytest.raises(ValueError):
                sc.spmv(A, (shm, -8))
        finally:
            A.delete()
    finally:
        sc.unregister_shm(shm)
    with pytest.raises(spmvd.NotFound):
        sc.unregister_shm(shm)


def test_cuda_region_refused_without_a_gpu(sc: spmvd.Client) -> None:
    """A made-up IPC handle: 409 from a daemon without a GPU, 400 from one with (the driver refuses it)."""
    with pytest.raises((spmvd.Conflict, spmvd.BadRequest)) as e:
        sc.register_cuda_shm("spmvd-py-cuda", bytes(range(64)), "gpu0", size=64)
    assert e.value.status in (409, 400)
    with pytest.raises(ValueError):
        sc.register_cuda_shm("spmvd-py-cuda", b"short", 0, size=64)


def test_gone(sc: spmvd.Client, rng: np.random.Generator) -> None:
    a = random_matrix(rng, 64, 64)
    A = sc.upload(a)
    m = shared_memory.SharedMemory(create=True, size=1024)
    try:
        sc.register_shm(m)
        m.unlink()
        assert sc.shm_region(m)["state"] == "unlinked"
        with pytest.raises(spmvd.Gone) as e:
            sc.spmv(A, (m, 0), y=(m, 512))
        assert e.value.status == 410 and e.value.code == "shm_gone"
        sc.unregister_shm(m)
    finally:
        m.close()
        A.delete()


def test_disabled(client: spmvd.Client, shm: Any) -> None:
    """The session's daemon runs without allow_shm: 403 shm_disabled everywhere."""
    with pytest.raises(spmvd.Forbidden) as e:
        client.register_shm(shm)
    assert e.value.status == 403 and e.value.code == "shm_disabled"
    with pytest.raises(spmvd.Forbidden):
        client.shm_regions()
    A = client.upload((np.array([0, 1]), np.array([0, 1]), np.array([1.0, 2.0])), shape=(2, 2))
    try:
        with pytest.raises(spmvd.Forbidden) as e:
            client.spmv(A, (shm, 0), y=(shm, 16))
        assert e.value.code == "shm_disabled"
    finally:
        A.delete()


# Run in a subprocess: before the fix, each of these ended in SIGSEGV (rc -11 here, 139 from a shell).
_AFTER_RELEASE = r'''
import sys
from multiprocessing import shared_memory
import numpy as np
import spmvd
c = spmvd.Client(sys.argv[1])
A = c.upload((np.arange(4), np.arange(4), np.full(4, 2.0)), shape=(4, 4))
if sys.argv[2] == "shared_arrays":
    with A.shared_arrays() as arrs:
        arrs.x[:] = 1.0
        res = arrs.spmv()
        x, y = arrs.x, res.y
    # released: the object is unlinked and unregistered; the views keep their values
    assert arrs.memory is None and arrs.x is None
    import os
    y[:] += 1.0                      # written to and read after release: no crash
    print("after release", float(x.sum()), float(y.sum()))
else:
    m = shared_memory.SharedMemory(create=True, size=4096)
    c.register_shm(m)
    np.frombuffer(m.buf, "<f8", 4)[:] = 1.0
    y = c.spmv(A, (m, 0), y=(m, 64)).y
    c.unregister_shm(m)
    try:
        m.close()                    # the view onto m still lives
        print("closed under a live view")
    except BufferError as e:
        print("BufferError:", e)
    print("after close", float(y.sum()))
    del y
    m.close()
    m.unlink()
    print("closed after the view went")
'''


@pytest.mark.parametrize("how", ["shared_arrays", "region_tuple"])
def test_views_after_release_never_crash(shm_url: str, how: str) -> None:
    """SharedArrays' views stay valid after the with block (they keep the values they had); a user's
    SharedMemory under a result's y refuses m.close() with BufferError instead of unmapping the pages."""
    import subprocess
    import sys
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    p = subprocess.run([sys.executable, "-c", _AFTER_RELEASE, shm_url, how], capture_output=True, text=True,
                       timeout=120, env=env)
    assert p.returncode == 0, f"rc {p.returncode} (a signal is negative): {p.stderr[-500:]}"
    if how == "shared_arrays":
        assert "after release 4.0 12.0" in p.stdout, p.stdout
    else:
        assert "BufferError: cannot close exported pointers exist" in p.stdout, p.stdout
        assert "after close 8.0" in p.stdout and "closed after the view went" in p.stdout, p.stdout
    assert "Exception ignored" not in p.stderr, p.stderr
