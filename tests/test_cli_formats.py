"""``calib-jax evaluate`` on tiny logs in every supported format, written here in that exact layout."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
import pyarrow.parquet as pq  # noqa: E402

from calib_jax.cli import main  # noqa: E402
from calib_jax.data import open_bandit as obd  # noqa: E402
from calib_jax.logs.loaders import prequential_ctr  # noqa: E402

N = 120


@pytest.fixture(scope="module")
def rows():
    rng = np.random.default_rng(11)
    p = rng.uniform(0.02, 0.4, N)
    y = (rng.random(N) < p).astype(int)
    cat = rng.integers(0, 3, N)
    return p, y, cat


def _run(tmp_path, log, *args):
    out = tmp_path / "rep"
    assert main(["evaluate", str(log), "--out", str(out), "--bootstrap", "0", "--quiet", *args]) == 0
    rep = json.loads((out / "report.json").read_text())
    return rep, {e["name"]: e["value"] for e in rep["metrics"]}


def _csv_reference(tmp_path, rows):
    p, y, cat = rows
    path = tmp_path / "ref.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["score", "label", "f"])
        w.writerows([[repr(float(p[i])), y[i], f"c{cat[i]}"] for i in range(N)])
    return _run(tmp_path, path, "--score", "score", "--label", "label", "--field", "f")[1]


def test_tsv_and_parquet_equal_csv(tmp_path, rows):
    p, y, cat = rows
    ref = _csv_reference(tmp_path, rows)
    tsv = tmp_path / "log.tsv"
    tsv.write_text("score\tlabel\tf\n" + "".join(f"{float(p[i])!r}\t{y[i]}\tc{cat[i]}\n" for i in range(N)))
    par = tmp_path / "log.parquet"
    pq.write_table(pa.table({"score": p, "label": y.astype(np.int8), "f": [f"c{c}" for c in cat]}), par,
                   row_group_size=50)
    for log in (tsv, par):
        m = _run(tmp_path, log, "--score", "score", "--label", "label", "--field", "f", "--chunk-rows", "32")[1]
        for k in ref:
            np.testing.assert_allclose(m[k], ref[k], rtol=1e-12, err_msg=f"{log.suffix} {k}")


def test_criteo_layout(tmp_path, rows):
    p, y, cat = rows
    rng = np.random.default_rng(0)
    path = tmp_path / "train.txt"
    with open(path, "w") as fh:
        for i in range(N):
            ints = [str(rng.integers(0, 50)) if k % 4 else "" for k in range(13)]  # empty = missing, as in Criteo
            cats = [f"{rng.integers(0, 2**32):08x}" for _ in range(26)]
            cats[0] = ["68fd1e64", "05db9164", "8cf07265"][cat[i]]
            fh.write("\t".join([str(y[i]), *ints, *cats, repr(float(p[i]))]) + "\n")
    rep, m = _run(tmp_path, path, "--format", "criteo", "--score", "score", "--field", "C1")
    assert rep["input"]["rows_used"] == N and rep["input"]["columns"]["label"] == "label"
    assert rep["fields"]["C1"]["n_levels"] == 3
    ref = _csv_reference(tmp_path, rows)
    np.testing.assert_allclose(m["ece"], ref["ece"], rtol=1e-12)


def test_avazu_layout(tmp_path, rows):
    p, y, cat = rows
    path = tmp_path / "avazu.csv"
    header = ["id", "click", "hour", "C1", "banner_pos", "site_id", "site_domain", "site_category", "app_id",
              "device_type", "C14", "pctr"]
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for i in range(N):
            w.writerow([f"{10**18 + i}", y[i], 14102100 + i % 24, 1005, cat[i], "1fbe01fe", "f3845767", "28905ebd",
                        "ecad2386", 1, 15706, repr(float(p[i]))])
    rep, m = _run(tmp_path, path, "--format", "avazu", "--score", "pctr", "--field", "banner_pos")
    assert rep["input"]["columns"]["label"] == "click" and rep["fields"]["banner_pos"]["n_levels"] == 3
    bad = tmp_path / "not_avazu.csv"
    bad.write_text("id,label,pctr\n1,0,0.1\n")
    assert main(["evaluate", str(bad), "--format", "avazu", "--score", "pctr", "--out", str(tmp_path / "x")]) == 2


def test_aliccp_preprocessed_layout(tmp_path, rows, capsys):
    p, y, cat = rows
    path = tmp_path / "ali_ccp_test.csv"
    fields = ["101", "121", "122", "124", "125", "126", "127", "128", "129", "205", "206", "207", "210", "216"]
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow([*fields, "click", "purchase", "pctr"])
        for i in range(N):
            w.writerow([*(str(100 + cat[i] * (k + 1)) for k in range(len(fields))), y[i], int(y[i] and i % 3 == 0),
                        repr(float(p[i]))])
    rep, m = _run(tmp_path, path, "--format", "aliccp", "--score", "pctr", "--field", "101")
    assert rep["input"]["columns"]["label"] == "click" and rep["fields"]["101"]["n_levels"] == 3
    rep2, _ = _run(tmp_path, path, "--format", "aliccp", "--score", "pctr", "--label", "purchase")
    assert rep2["input"]["columns"]["label"] == "purchase"
    bad = tmp_path / "bad.csv"
    bad.write_text("101,click,pctr\n1,0,0.1\n")
    assert main(["evaluate", str(bad), "--format", "aliccp", "--score", "pctr", "--out", str(tmp_path / "x")]) == 2
    assert "'purchase'" in capsys.readouterr().err


def _tiny_open_bandit(tmp_path: Path, n: int = 60) -> Path:
    """The first ``n`` rows of each shipped log, same columns and item contexts."""
    root = tmp_path / "obd"
    for pol in ("random", "bts"):
        for camp in ("men", "women"):
            src = obd.default_path() / pol / camp
            dst = root / pol / camp
            dst.mkdir(parents=True)
            shutil.copy(src / "item_context.csv", dst / "item_context.csv")
            with open(src / f"{camp}.csv") as fh:
                lines = [next(fh) for _ in range(n + 1)]
            (dst / f"{camp}.csv").write_text("".join(lines))
    return root


@pytest.mark.skipif(not obd.default_path().is_dir(), reason="Open Bandit sample not available")
def test_open_bandit_directory(tmp_path):
    root = _tiny_open_bandit(tmp_path)
    rep, m = _run(tmp_path, root, "--field", "position")
    assert rep["input"]["format"] == "open_bandit" and rep["input"]["rows_used"] == 4 * 60
    assert rep["input"]["columns"]["score"] == "prequential_ctr"
    assert rep["fields"]["position"]["n_levels"] == 3


def test_prequential_ctr_uses_only_the_past():
    keys = np.array([0, 1, 0, 0, 1, 0])
    y = np.array([1, 0, 1, 0, 1, 1], float)
    p = prequential_ctr(keys, y, strength=2.0, prior=0.5)
    for i in range(len(y)):  # recompute from scratch with rows < i only
        past = np.arange(i)
        same = past[keys[past] == keys[i]]
        gbar = (y[:i].sum() + 0.5 * 2.0) / (i + 2.0)
        assert p[i] == pytest.approx((y[same].sum() + 2.0 * gbar) / (len(same) + 2.0))
