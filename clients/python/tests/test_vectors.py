"""Resident vectors, /v1/ops and /v1/matrices/{id}/solve through Vector, Batch and Client.solve.

These routes come with the daemon's resident-vector work (docs/api.md);
against a daemon without them the tests are skipped (and Client.solve
must say Unsupported). Answers are compared with NumPy / SciPy on the
same values.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import spmvd
from conftest import REAL

sio = pytest.importorskip("scipy.io")
sla = pytest.importorskip("scipy.sparse.linalg")


def has_vectors(c: spmvd.Client) -> bool:
    try:
        c.vectors()
        return True
    except spmvd.NotFound:
        return False


@pytest.fixture()
def vc(client: spmvd.Client) -> spmvd.Client:
    if not has_vectors(client):
        pytest.skip("this daemon has no /v1/vectors yet (resident vectors come with the daemon's issue 12 work)")
    return client


def test_solve_without_the_route_is_unsupported(client: spmvd.Client) -> None:
    if has_vectors(client):
        pytest.skip("this daemon has /solve")
    A = client.upload(os.path.join(REAL, "LFAT5.mtx"))
    with pytest.raises(spmvd.Unsupported) as e:
        A.solve(np.ones(14))
    assert e.value.code == "no_solve" and "scipy" in e.value.message
    A.delete()


def test_vector_round_trip_update_fill_delete(vc: spmvd.Client, rng) -> None:
    a = rng.uniform(-1, 1, 100)
    v = vc.vector(a)
    assert v.n == 100 and v.k == 1 and v.dtype == np.float64 and v.shape == (100,)
    assert np.array_equal(v.to_numpy(), a)
    b = rng.uniform(-1, 1, 100)
    v.update(b)
    assert np.array_equal(np.asarray(v), b)
    v.fill(2.5)
    assert np.all(v.to_numpy() == 2.5)
    with pytest.raises(ValueError):
        v.update(np.ones(99))
    assert v.id in {w.id for w in vc.vectors()}
    v.delete()
    with pytest.raises(spmvd.NotFound) as e:
        v.to_numpy()
    assert e.value.code in ("vector_not_found", "not_found")


def test_block_vector_and_float32(vc: spmvd.Client, rng) -> None:
    X = rng.uniform(-1, 1, (50, 3))
    v = vc.vector(X)
    assert v.k == 3 and v.shape == (50, 3)
    assert np.array_equal(v.to_numpy(), X)
    f = vc.vector(X[:, 0].astype(np.float32))
    assert f.dtype == np.float32 and np.array_equal(f.to_numpy(), X[:, 0].astype(np.float32))
    z = vc.vector(n=20, fill=0.0)
    assert np.all(z.to_numpy() == 0) and z.n == 20
    for w in (v, f, z):
        w.delete()


def test_spmv_with_resident_operands_and_ops(vc: spmvd.Client, rng) -> None:
    M = sio.mmread(os.path.join(REAL, "west0067.mtx")).tocsr()
    A = vc.upload(os.path.join(REAL, "west0067.mtx"))
    x = rng.uniform(-1, 1, 67)
    xv = vc.vector(x, like=A)
    yv = vc.vector(n=67, fill=1.0, like=A, side="rows")
    res = vc.spmv(A, xv, y=yv, alpha=2.0, beta=0.5)
    assert res.y is None
    assert np.allclose(yv.to_numpy(), 2.0 * (M @ x) + 0.5, rtol=1e-12, atol=1e-12)
    r = vc.ops().dot(xv, xv, "xx").nrm2(xv, "n").scal(2.0, xv).run()
    assert abs(r["results"]["xx"] - x @ x) <= 1e-12 * (x @ x)
    assert abs(r["results"]["n"] - np.linalg.norm(x)) <= 1e-12 * np.linalg.norm(x)
    assert np.allclose(xv.to_numpy(), 2 * x, rtol=1e-15, atol=0)
    assert abs(xv.nrm2() - 2 * np.linalg.norm(x)) <= 1e-12 * np.linalg.norm(x)
    r = vc.ops([{"op": "spmv", "matrix": A, "x": xv, "y": yv}])
    assert np.allclose(yv.to_numpy(), M @ (2 * x), rtol=1e-12, atol=1e-12)
    for w in (xv, yv):
        w.delete()
    A.delete()


def test_daemon_solve_matches_scipy(vc: spmvd.Client, rng) -> None:
    M = sio.mmread(os.path.join(REAL, "LFAT5.mtx")).tocsr()
    A = vc.upload(os.path.join(REAL, "LFAT5.mtx"))
    b = M @ rng.uniform(-1, 1, 14)
    res = A.solve(b, method="cg", tol=1e-12, maxit=1000, progress=None)
    assert res.converged and res.stop["reason"] == "converged" and res.iterations > 0
    x_ref = np.linalg.solve(M.toarray(), b)
    # LFAT5 has cond 1.4e8: a residual below tol bounds the error only by cond * tol (1.4e-4; SciPy's own
    # CG reaches 5e-5 on some right-hand sides), so check the residual tightly and the error by that bound.
    bound = 2 * np.linalg.cond(M.toarray()) * 1e-12 * np.linalg.norm(x_ref)
    assert np.linalg.norm(M @ res.x - b) <= 1e-11 * np.linalg.norm(b)
    assert np.linalg.norm(res.x - x_ref) <= bound
    res = A.solve(b, method="gmres", restart=14, tol=1e-12, maxit=100, progress=None)
    assert res.converged and np.linalg.norm(M @ res.x - b) <= 1e-10 * np.linalg.norm(b)
    bv = vc.vector(b, like=A, side="rows")
    xo = vc.vector(n=14, fill=0.0, like=A)
    res = A.solve(bv, x_out=xo, tol=1e-12, maxit=1000, progress=None)
    assert res.x is None and np.linalg.norm(M @ xo.to_numpy() - b) <= 1e-11 * np.linalg.norm(b)
    assert np.linalg.norm(xo.to_numpy() - x_ref) <= bound
    with pytest.raises(spmvd.BadRequest):
        A.solve(b, tol=-1.0, progress=None)
    with pytest.raises(ValueError):
        A.solve(np.ones(13), progress=None)
    for w in (bv, xo):
        w.delete()
    A.delete()


def test_preconditioners_resident_and_inline(vc: spmvd.Client, rng) -> None:
    A = vc.generate("poisson2d", 40)
    n = A.shape[0]
    b = rng.uniform(-1, 1, n)
    plain = vc.solve(A, b, tol=1e-10, maxit=2000, kernel="cpu.csr.serial")
    pc = vc.preconditioner(A, "amg", device="cpu")
    assert pc["type"] == "amg" and pc["bytes"] > 0 and pc["device"] == "cpu"
    for ref in (pc, pc["id"], "amg"):  # its descriptor, its id, the inline name (cached on the matrix)
        res = vc.solve(A, b, tol=1e-10, maxit=2000, preconditioner=ref, kernel="cpu.csr.serial")
        assert res.converged and res.iterations < plain.iterations / 3, (res.iterations, plain.iterations)
        assert np.linalg.norm(res.x - plain.x) <= 1e-7 * np.linalg.norm(plain.x)
    listed = {p["id"]: p for p in vc.preconditioners(A)}
    assert pc["id"] in listed and any(p["inline"] for p in listed.values())
    vc.delete_preconditioner(pc)
    assert pc["id"] not in {p["id"] for p in vc.preconditioners(A)}
    with pytest.raises(spmvd.NotFound):
        vc.solve(A, b, preconditioner=pc["id"], kernel="cpu.csr.serial")
    with pytest.raises(ValueError):
        vc.solve(A, b, preconditioner={"type": "amg"})
    B = rng.uniform(-1, 1, (n, 3))  # k columns: CG in lockstep, each as alone
    res = vc.solve(A, B, tol=1e-10, maxit=2000, preconditioner="jacobi", kernel="cpu.csr.serial")
    one = vc.solve(A, B[:, 1], tol=1e-10, maxit=2000, preconditioner="jacobi", kernel="cpu.csr.serial")
    assert res.x.shape == (n, 3) and np.allclose(res.x[:, 1], one.x, rtol=1e-9, atol=1e-12)
    A.delete()
