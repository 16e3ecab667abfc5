"""RemoteMatrix as a SciPy LinearOperator: products, blocks, transposes, and Krylov solvers.

cg (on the SPD matrices of the shared set) and gmres (on those SciPy's
own gmres solves) over a RemoteMatrix must reach SciPy's answer over the
local CSR matrix with the same tolerance and iteration bounds. Blocks and
transposes are checked against SciPy's products whichever way the daemon
serves them (one request, or the documented fallbacks, which then must
have warned).
"""
from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

import spmvd
from conftest import REAL

sp = pytest.importorskip("scipy.sparse")
sla = pytest.importorskip("scipy.sparse.linalg")
sio = pytest.importorskip("scipy.io")


def local(name: str):
    return sio.mmread(os.path.join(REAL, name)).tocsr().astype(np.float64)


def rel(a, b) -> float:
    return float(np.abs(np.asarray(a) - b).max() / max(np.abs(b).max(), 1e-300))


def solve_kw(fn):
    """SciPy renamed cg's/gmres's `tol` to `rtol` (1.12); pass whichever this SciPy takes."""
    import inspect
    return "rtol" if "rtol" in inspect.signature(fn).parameters else "tol"


def test_operator_shape_dtype_and_matvec(client: spmvd.Client, rng) -> None:
    M = local("lp_afiro.mtx")
    A = client.upload(os.path.join(REAL, "lp_afiro.mtx"))
    assert isinstance(A, sla.LinearOperator)
    assert A.shape == M.shape == (27, 51) and A.dtype == np.float64
    x = rng.uniform(-1, 1, 51)
    assert rel(A.matvec(x), M @ x) < 1e-12
    assert rel(A @ x, M @ x) < 1e-12 and A.products == 2
    assert A.last.kernel
    # a RemoteMatrix from an id or a descriptor is the same operator, with its own kernel
    B = spmvd.RemoteMatrix(client, A.id, kernel="cpu.csr.serial")
    assert B.shape == A.shape and B.descriptor["nnz"] == A.nnz
    assert rel(B @ x, M @ x) < 1e-12 and B.last.kernel == "cpu.csr.serial"
    C = spmvd.RemoteMatrix(client, A.descriptor, kernel="cpu.csr.omp", threads=2)
    C @ x
    assert C.last.stats["params"].get("threads") == 2
    A.delete()


@pytest.mark.parametrize("kernel", [None, "cpu.csr.serial", "cpu.hll.omp"])
def test_matmat_one_request_or_documented_fallback(client: spmvd.Client, rng, kernel) -> None:
    M = local("west0067.mtx")
    A = client.upload(M, kernel=kernel)
    k = int(rng.integers(2, 6))
    X = rng.uniform(-1, 1, (67, k))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        Y = A @ X
    assert Y.shape == (67, k) and rel(Y, M @ X) < 1e-12
    if "matmat" in A.fallbacks:  # k single products: each a request, and it said so
        assert A.products >= k and any(issubclass(i.category, spmvd.FallbackWarning) for i in w)
    else:  # one request (or one per max_k columns)
        info = client.kernel(kernel) if kernel else None
        assert A.products == (1 if not info else -(-k // int(info.get("max_k", k))))
    Xs = rng.uniform(-1, 1, (k, 67)).T  # a non-contiguous block
    assert rel(A.matmat(Xs), M @ Xs) < 1e-12
    A.delete()


def test_rmatvec_transposes(client: spmvd.Client, rng) -> None:
    # non-square general: op=t, or the transpose this client uploads
    M = local("lp_afiro.mtx")
    A = client.upload(os.path.join(REAL, "lp_afiro.mtx"))
    x = rng.uniform(-1, 1, 27)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", spmvd.FallbackWarning)
        assert rel(A.rmatvec(x), M.T @ x) < 1e-12
        assert rel(A.H @ x, M.T @ x) < 1e-12
        X = rng.uniform(-1, 1, (27, 3))
        assert rel(A.rmatmat(X), M.T @ X) < 1e-12
        assert rel(A.T.matmat(X), M.T @ X) < 1e-12
    # a general matrix this client did not upload: op=t or a clear Unsupported, never A*x
    B = spmvd.RemoteMatrix(client, A.id)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", spmvd.FallbackWarning)
            y = B.rmatvec(x)
        assert rel(y, M.T @ x) < 1e-12
    except spmvd.Unsupported as e:
        assert e.code == "no_transpose" and "upload" in e.message
    A.delete()
    # symmetric (declared so in the file): A^T x = A x even without op=t
    S = local("bcsstk13.mtx")
    C = spmvd.RemoteMatrix(client, client.upload(os.path.join(REAL, "bcsstk13.mtx")).id)
    z = rng.uniform(-1, 1, S.shape[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", spmvd.FallbackWarning)
        assert rel(C.rmatvec(z), S.T @ z) < 1e-12
    C.delete()


def test_square_general_op_t_never_returns_a_times_x(client: spmvd.Client, rng) -> None:
    M = local("west0067.mtx")
    A = client.upload(M)
    x = rng.uniform(-1, 1, 67)
    try:
        y = client.spmv(A, x, op="t").y
        assert rel(y, M.T @ x) < 1e-12
    except spmvd.Unsupported as e:  # a daemon that ignores op=t: refused, not A*x
        assert e.code == "op_ignored"
    A.delete()


@pytest.mark.parametrize("name,jacobi", [("LFAT5.mtx", False), ("bcsstk13.mtx", True)])
def test_cg_reaches_scipys_answer(client: spmvd.Client, rng, name, jacobi) -> None:
    M = local(name)
    A = client.upload(os.path.join(REAL, name), kernel="cpu.csr.serial")
    b = M @ rng.uniform(-1, 1, M.shape[1])
    P = None
    if jacobi:
        d = M.diagonal()
        P = sla.LinearOperator(M.shape, matvec=lambda v: np.ravel(v) / d, dtype=np.float64)
    kw = {solve_kw(sla.cg): 1e-10, "atol": 0.0, "maxiter": 5000, "M": P}
    x_ref, info_ref = sla.cg(M, b, **kw)
    x, info = sla.cg(A, b, **kw)
    assert info_ref == 0 and info == 0
    assert np.linalg.norm(M @ x - b) <= 1e-9 * np.linalg.norm(b) * 10
    assert np.linalg.norm(x - x_ref) <= 1e-6 * np.linalg.norm(x_ref)
    assert A.products > 5
    A.delete()


@pytest.mark.parametrize("name", ["cage5.mtx", "watt_2.mtx", "karate.mtx", "LFAT5.mtx"])
def test_gmres_reaches_scipys_answer(client: spmvd.Client, rng, name) -> None:
    M = local(name)
    A = client.upload(os.path.join(REAL, name))
    b = M @ rng.uniform(-1, 1, M.shape[1])
    kw = {solve_kw(sla.gmres): 1e-10, "atol": 0.0, "restart": 30, "maxiter": 100}
    x_ref, info_ref = sla.gmres(M, b, **kw)
    x, info = sla.gmres(A, b, **kw)
    assert info_ref == 0 and info == 0
    assert np.linalg.norm(M @ x - b) <= 1e-8 * np.linalg.norm(b)
    scale = max(np.linalg.norm(x_ref), 1e-300)
    # both stop at relres 1e-10: they agree to what the conditioning lets through
    assert np.linalg.norm(M @ (x - x_ref)) <= 1e-8 * np.linalg.norm(b) or np.linalg.norm(x - x_ref) <= 1e-6 * scale
    A.delete()


def test_float32_operator_in_a_solver(client: spmvd.Client, rng) -> None:
    M = local("LFAT5.mtx")
    A = client.upload(os.path.join(REAL, "LFAT5.mtx"), dtype="float32")
    assert A.dtype == np.float32
    b = (M @ np.ones(14)).astype(np.float32)
    y = A @ b
    assert y.dtype == np.float32 and rel(y, M @ b) < 1e-5
    A.delete()
