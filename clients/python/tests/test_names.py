"""Matrices by name (issue 28): ``Client.get(name)``, ``if_exists="reuse"``,
and the bench plots drawing ``auto`` as the kernel it chose, not as a bar of
its own."""
from __future__ import annotations

import os
import uuid

import numpy as np
import pytest
import scipy.sparse as sp

import spmvd
from conftest import REAL


def test_get_by_name(client: spmvd.Client, rng: np.random.Generator) -> None:
    name = f"by name {uuid.uuid4().hex[:8]}.mtx"  # a space: quoted in the path
    A = sp.random(30, 30, density=0.2, random_state=int(rng.integers(1 << 31)), format="csr")
    m = client.upload(A, name=name)
    got = client.get(name)
    assert got.id == m.id and got.name == name
    again = client.upload(A, name=name, if_exists="reuse")
    assert again.id == m.id, "if_exists=reuse answers the stored matrix"
    client.upload(A * 2, name=name)
    with pytest.raises(spmvd.errors.Conflict) as e:
        client.get(name)
    assert e.value.code == "ambiguous_name" and m.id in e.value.message
    with pytest.raises(spmvd.errors.NotFound):
        client.get("no such " + uuid.uuid4().hex)


def test_get_by_file_name(client: spmvd.Client) -> None:
    path = os.path.join(REAL, "bcsstk13.mtx")
    if not os.path.exists(path):
        pytest.skip("no shared bcsstk13.mtx")
    m = client.upload(path, if_exists="reuse")
    assert client.get("bcsstk13.mtx").id == m.id
    assert client.get("bcsstk13").id == m.id, "a file's name without its extension finds it when nothing else is named so"
    assert client.upload(path, if_exists="reuse").id == m.id


def test_plot_auto_is_its_choice() -> None:
    pytest.importorskip("matplotlib")
    import spmvd.plot as plot
    row = {"kernel": "cpu.csr.serial", "device": "cpu", "params": {}, "stats": {"median_ms": 1.0}, "verified": True}
    auto = dict(row, kernel="auto", stats={"median_ms": 0.8}, auto={"kernel": "cpu.csr.serial"})
    rows = plot.best_per_kernel({"results": [row, dict(row, kernel="cpu.csr.omp"), auto]})
    assert [r["kernel"] for r in rows] == ["cpu.csr.serial", "cpu.csr.omp"]
    assert [r["auto_choice"] for r in rows] == [True, False]
