"""spmvd.study against a real daemon: a small folder, every table checked against results.csv, the PNGs.

The folder holds three shared real matrices, one of them again as a SciPy ``.npz``,
a Matrix Market file with an index out of range and a text file. The tables are
checked by tests/e2e/study_check.py (which recomputes them from results.csv on its
own); spmvctl's rendering of the same JSON is compared in tests/e2e/study.sh.
"""
from __future__ import annotations

import csv
import importlib.util
import json
import os
import shutil

import pytest
import scipy.io
import scipy.sparse as sp

import spmvd
import spmvd.study as study
from conftest import REAL, ROOT

KERNELS = ["cpu.csr.serial", "cpu.csr.omp", "cpu.hll.omp"]
PNG = b"\x89PNG\r\n\x1a\n"


def _checker():
    spec = importlib.util.spec_from_file_location("study_check", os.path.join(ROOT, "tests", "e2e", "study_check.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def ran(tmp_path_factory, daemon_url):
    folder = tmp_path_factory.mktemp("mats")
    for f in ("karate.mtx", "west0067.mtx", "G51.mtx"):
        shutil.copy(os.path.join(REAL, f), folder / f)
    sp.save_npz(folder / "west0067_copy.npz", scipy.io.mmread(os.path.join(REAL, "west0067.mtx")).tocsr())
    (folder / "bad.mtx").write_text("%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1.0\n9 9 2.0\n")
    (folder / "notes.txt").write_text("not a matrix\n")
    out = tmp_path_factory.mktemp("study")
    with spmvd.Client(daemon_url) as c:
        before = len(c.list())
        res = study.run(c, str(folder), out=str(out), kernels=KERNELS, runs=2, warmup=1)
        after = len(c.list())
    return res, out, before, after


def test_every_matrix_appears_with_its_status(ran):
    res, out, _, _ = ran
    status = {m["file"]: m for m in res["matrices"]}
    for f in ("karate.mtx", "west0067.mtx", "G51.mtx", "west0067_copy.npz"):
        assert status[f]["status"] == "ok", status[f]
        assert status[f]["nnz"] > 0
    assert status["west0067_copy.npz"]["nnz"] == status["west0067.mtx"]["nnz"] == 294
    assert status["bad.mtx"]["status"] == "error" and "row index 9 is out of range" in status["bad.mtx"]["reason"]
    assert status["notes.txt"]["status"] == "ignored"
    report = (out / "report.md").read_text()
    for f in status:
        assert f"| {f} |" in report
    assert "row index 9 is out of range" in report


def test_tables_equal_those_recomputed_from_the_csv(ran):
    _, out, _, _ = ran
    problems = _checker().check(str(out), ["karate.mtx", "west0067.mtx", "G51.mtx", "west0067_copy.npz"])
    assert problems == []
    report = (out / "report.md").read_text()
    assert "| cpu.csr.serial | 0 | 1.00 | 1.00 | 4 | 1.00 | 1.00 | 4 |" in report
    assert "| cpu.csr.serial | 10000 | 1.00 | 1.00 | 1 | 1.00 | 1.00 | 1 |" in report


def test_the_checker_fails_on_a_changed_number(ran, tmp_path):
    _, out, _, _ = ran
    shutil.copy(out / "results.csv", tmp_path / "results.csv")
    text = (out / "report.md").read_text()
    row = next(ln for ln in text.splitlines() if ln.startswith("| cpu.csr.omp | 0 |"))
    (tmp_path / "report.md").write_text(text.replace(row, row.replace("| cpu.csr.omp | 0 | ", "| cpu.csr.omp | 0 | 9")))
    assert _checker().check(str(tmp_path), [])


def test_csv_json_and_records(ran):
    res, out, _, _ = ran
    with open(out / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == study.CSV_COLUMNS
    serial = [r for r in rows if r["kind"] == "spmv" and r["kernel"] == "cpu.csr.serial"]
    assert len(serial) == 8 and all(float(r["speedup"]) == 1.0 for r in serial)
    kinds = {r["kind"] for r in rows}
    assert {"spmv", "threads", "spmspm"} <= kinds
    hll = {int(r["params"].split("hack_size=")[1].split(";")[0]) for r in rows if r["kernel"] == "cpu.hll.omp"
           and r["kind"] == "spmv" and r["file"] == "G51.mtx" and r["dtype"] == "float64"}
    assert hll == {16, 32, 64}
    assert json.loads((out / "results.json").read_text())["records"] == res["records"]
    assert res["options"]["stat"] == "mean" and res["format"] == study.FORMAT


def test_the_bench_sweeps_threads_at_the_mean(ran):
    res, out, _, _ = ran
    threads = [r for r in res["records"] if r["kind"] == "threads"]
    assert {r["kernel"] for r in threads} == {"cpu.csr.omp", "cpu.hll.omp"} == set(res["options"]["thread_kernels"])
    assert {r["params"]["threads"] for r in threads} == set(res["options"]["threads"]) - {0}
    hll = {(r["params"]["hack_size"], r["params"]["threads"]) for r in threads if r["kernel"] == "cpu.hll.omp"
           and r["file"] == "G51.mtx" and r["dtype"] == "float64"}
    assert hll == {(h, t) for h in (16, 32, 64) for t in res["options"]["threads"] if t}
    base = {(r["file"], r["dtype"]): r["mean_ms"] for r in res["records"]
            if r["kind"] == "spmv" and r["kernel"] == "cpu.csr.serial"}
    for r in threads:
        assert r["threads_used"] == r["params"]["threads"]
        assert r["efficiency"] == pytest.approx(base[(r["file"], r["dtype"])] / r["mean_ms"] / r["threads_used"],
                                                rel=1e-3)
    spmv = [r for r in res["records"] if r["kind"] == "spmv" and r["mean_ms"]]
    assert all(r["gflops"] == pytest.approx(2 * _nnz(res, r["file"]) / (r["mean_ms"] * 1e6), rel=1e-4) for r in spmv)
    report = (out / "report.md").read_text()
    assert "\n## Threads\n" in report and "| cpu.hll.omp | 1 | 0 |" in report
    assert len(res["host"]["loadavg"]) == 3 and "load average" in report and "`stat` mean" in report


def _nnz(res, file):
    return next(m["nnz"] for m in res["matrices"] if m["file"] == file)


def test_uploads_are_deleted(ran):
    _, _, before, after = ran
    assert after == before


def test_pngs_are_valid_and_small(ran):
    import matplotlib.pyplot as plt
    _, out, _, _ = ran
    names = ["matrices_gflops", "matrices_gbps", "speedup_distribution", "threads", "block_sizes", "hack_sizes",
             "spmspm"]
    for n in names:
        p = out / f"{n}.png"
        data = p.read_bytes()
        assert data[:8] == PNG, n
        assert len(data) < 200 * 1024, (n, len(data))
        img = plt.imread(str(p))
        assert img.shape[0] > 100 and img.shape[1] > 100


def test_render_refuses_other_json(tmp_path):
    with pytest.raises(ValueError, match="spmvd-study/2"):
        study.render({"format": "other"}, str(tmp_path))


def test_cli_refuses_bad_options(tmp_path):
    with pytest.raises(SystemExit):
        study.main(["run", str(tmp_path), "--dtypes", "float16"])
    with pytest.raises(SystemExit):
        study.main(["run", str(tmp_path), "--bogus"])
    with pytest.raises(SystemExit):
        study.main(["run", str(tmp_path), "--warmup", "0"])


def test_unknown_kernels_are_refused_before_any_upload(client, tmp_path):
    shutil.copy(os.path.join(REAL, "karate.mtx"), tmp_path / "karate.mtx")
    before = len(client.list())
    with pytest.raises(ValueError, match="no.such.kernel"):
        study.collect(client, str(tmp_path), kernels=["cpu.csr.serial", "no.such.kernel"])
    with pytest.raises(ValueError, match="no spmspm kernel"):
        study.collect(client, str(tmp_path), spmspm=["cpu.csr.omp"])
    assert len(client.list()) == before


def test_default_kernels_read_the_catalogue():
    def k(name, op="spmv", device="cpu", available=True):
        return {"name": name, "op": op, "device": device, "available": available}
    cat = [k("cpu.csr.serial"), k("cpu.csr.omp"), k("auto"), k("gpu.csr.vector", device="gpu", available=False),
           k("cpu.spmspm.serial", "spmspm"), k("cpu.spmspm.omp", "spmspm"), k("cpu.spmspm.hash", "spmspm")]
    assert study.default_kernels(cat, "cpu") == ["cpu.csr.serial", "cpu.csr.omp"]
    assert study.default_kernels(cat, "gpu") == ["cpu.csr.serial"]
    assert study.default_kernels(cat, "cpu", "spmspm") == ["cpu.spmspm.hash", "cpu.spmspm.serial", "cpu.spmspm.omp"]
    assert study.default_kernels(cat[:-1], "cpu", "spmspm") == ["cpu.spmspm.serial", "cpu.spmspm.omp"]
