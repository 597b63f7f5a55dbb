"""``compare --field``: each model's per-field metrics (GCE, Field-ECE, Field-RCE, |bias| over a
field's levels) and their paired differences (:mod:`calib_jax.logs.paired_fields`).

Checked against ``evaluate --field`` of each model's column (DuckDB and the arrow reader,
probabilities and logits, a weight column, ``__other__`` and ``__missing__`` levels), engine
against engine, by a model compared with itself (every difference exactly 0), against a direct
NumPy recomputation of the paired replicates from the rows, by a model miscalibrated in one level
(found worse, the paired interval narrower than the unpaired ones), with ``--user`` and
``--oracle``, and on bad arguments.
"""

from __future__ import annotations

import functools
import hashlib
import json

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("duckdb")
import pyarrow.parquet as pq  # noqa: E402

from calib_jax import logs  # noqa: E402
from calib_jax.cli import main  # noqa: E402

N = 12_000
FIELD_METRICS = ("gce", "field_ece", "field_rce", "abs_bias")
SITES = [f"s{i}" for i in range(8)]


@functools.cache
def _table(seed: int = 0) -> pa.Table:
    """Model ``a`` close to the truth; ``b`` as close but 1.2 logits too high on site ``s3``;
    ``ad``: 14 levels, some rows without one; row weights ``w``; the true click probability ``pi``
    and a user column ``uid`` for the combined options."""
    rng = np.random.default_rng(seed)
    t = rng.normal(-2.0, 1.0, N)
    site = rng.choice(SITES, N)
    y = (rng.uniform(size=N) < 1 / (1 + np.exp(-t))).astype(np.float64)
    la = t + rng.normal(0, 0.3, N)
    lb = t + rng.normal(0, 0.3, N) + np.where(site == "s3", 1.2, 0.0)
    ad = rng.integers(0, 14, N).astype(str).astype(object)
    ad[::37] = None
    return pa.table({"a": 1 / (1 + np.exp(-la)), "b": 1 / (1 + np.exp(-lb)), "la": la, "lb": lb, "y": y,
                     "site": site, "ad": pa.array(ad, pa.string()), "w": rng.uniform(0.5, 2.0, N),
                     "pi": 1 / (1 + np.exp(-t)), "uid": rng.integers(0, 300, N).astype(str)})


def _plug_in(entry: dict) -> float:
    """``evaluate``'s plug-in value of a per-field metric (its ``value`` may be bias-corrected)."""
    return entry.get("plug_in", entry["value"])


@pytest.mark.parametrize("engine, logits", [("duckdb", False), ("arrow", False), ("duckdb", True),
                                            ("arrow", True)])
def test_each_models_field_values_equal_evaluate_field_of_its_column(engine, logits):
    t = _table()
    cols = ["la", "lb"] if logits else ["a", "b"]
    kind = "logits" if logits else "scores"
    # ad keeps 6 of its 15 levels (14 and __missing__), the rest in __other__: the levels evaluate keeps
    c = logs.compare(t, **{kind: cols}, label="y", weight="w", fields=["site", "ad"], max_levels=6, bootstrap=0,
                     engine=engine)
    for name in cols:
        alone = logs.evaluate(t, **{kind[:-1]: name}, label="y", weight="w", fields=["site", "ad"], max_levels=6,
                              bootstrap=0, engine=engine)
        for f in ("site", "ad"):
            want = alone.report["fields"][f]["metrics"]
            got = c.result["fields"][f]["metrics"][name]
            assert c.result["fields"][f]["levels"] == alone.report["fields"][f]["n_levels"]
            for k in FIELD_METRICS:
                assert got[k]["value"] == pytest.approx(_plug_in(want[k]), rel=1e-9), (name, f, k)
    assert c.result["input"]["fields"] == ["site", "ad"] and c.result["input"]["max_levels"] == 6
    assert c.result["fields"]["ad"]["levels"] == 7  # six kept and __other__


def test_duckdb_and_arrow_give_the_same_cells_and_intervals():
    t = _table()
    got = [logs.compare(t, scores=["a", "b"], label="y", weight="w", fields=["site", "ad"], bootstrap=40, seed=7,
                        engine=e).result["fields"] for e in ("duckdb", "arrow")]
    for f in ("site", "ad"):
        a, b = got[0][f], got[1][f]
        assert a["levels"] == b["levels"] and a["joint_cells"] == b["joint_cells"]
        for m in ("a", "b"):
            for k in FIELD_METRICS:
                np.testing.assert_allclose([a["metrics"][m][k][x] for x in ("value", "lo", "hi")],
                                           [b["metrics"][m][k][x] for x in ("value", "lo", "hi")], rtol=1e-9)
        for da, db in zip(a["differences"], b["differences"], strict=True):
            assert da["verdict"].split(" (")[0] == db["verdict"].split(" (")[0]
            np.testing.assert_allclose([da["diff"], da["lo"], da["hi"]], [db["diff"], db["lo"], db["hi"]], rtol=1e-9,
                                       atol=1e-15)


def test_a_model_against_itself_differs_by_exactly_zero():
    t = _table().append_column("a2", _table()["a"])
    c = logs.compare(t, scores=["a", "a2"], label="y", fields=["site", "ad"], bootstrap=30, engine="arrow")
    rows = c.fields.to_pylist()
    assert len(rows) == 2 * len(FIELD_METRICS)
    for r in rows:
        assert r["diff"] == 0.0 and r["lo"] == 0.0 and r["hi"] == 0.0, r
        assert r["better"] is None and "no significant difference" in r["verdict"], r
        assert r["value_a"] == r["value_b"] and r["lo_a"] == r["lo_b"]
    assert "Per field" in c._repr_html_()


def _coarse_bin(p: np.ndarray) -> np.ndarray:
    """The coarse logit bin of a probability, written out: 64 bins on [-16, 16] of the clipped logit."""
    pc = np.clip(p, 1e-12, 1 - 1e-12)
    o = np.clip(np.log(pc) - np.log(1 - pc), -16, 16)
    return np.clip(np.floor((o + 16) / 32 * 4096), 0, 4095).astype(np.int64) * 64 // 4096


def test_a_model_off_in_one_level_is_found_worse_and_the_interval_is_the_replicate_differences():
    t = _table()
    B, seed = 200, 11
    c = logs.compare(t, scores=["a", "b"], label="y", weight="w", fields=["site"], bootstrap=B, seed=seed)
    diffs = {d["metric"]: d for d in c.result["fields"]["site"]["differences"]}
    values = c.result["fields"]["site"]["metrics"]
    for k in ("field_ece", "field_rce"):
        d = diffs[k]
        assert d["better"] == "a" and d["hi"] < 0 and d["verdict"].startswith(f"{k}:site: a better"), d
        assert d["diff"] == pytest.approx(values["a"][k]["value"] - values["b"][k]["value"], rel=1e-12)
        # pairing: the two models' errors share the labels, so the difference's interval is
        # narrower than the two intervals combined
        unpaired = np.hypot(values["a"][k]["hi"] - values["a"][k]["lo"], values["b"][k]["hi"] - values["b"][k]["lo"])
        assert d["hi"] - d["lo"] < unpaired, (k, d["hi"] - d["lo"], unpaired)
    # the same numbers from the rows, written out: joint cells (site, coarse bin of a, of b,
    # label) in the order (site name, bins, label), one Poisson(N_c) per cell and replicate from
    # the stream [seed, "cell", b, 1] (field 0), each model's per-site sums, Field-ECE and -RCE
    site = np.asarray(t["site"].to_pylist())
    p = np.stack([t["a"].to_numpy(), t["b"].to_numpy()])
    y, w = t["y"].to_numpy(), t["w"].to_numpy()
    levels, code = np.unique(site, return_inverse=True)
    key = np.stack([code, _coarse_bin(p[0]), _coarse_bin(p[1]), y.astype(np.int64)], axis=1)
    cells, cell_of = np.unique(key, axis=0, return_inverse=True)  # lexicographic: the canonical order
    cell_of = cell_of.reshape(-1)
    n = np.bincount(cell_of).astype(np.float64)
    scale = np.ones((B + 1, n.size))
    for r in range(1, B + 1):
        scale[r] = np.random.default_rng([seed, 0x63656C6C, r, 1]).poisson(n) / n
    K = levels.size
    per_level = np.zeros((n.size, K))
    per_level[np.arange(n.size), cells[:, 0]] = 1.0
    reps = {}
    for m in range(2):
        cw, cp, cy = (np.bincount(cell_of, weights=x) for x in (w, w * p[m], w * y))
        W, P, Y = ((scale * c_) @ per_level for c_ in (cw, cp, cy))
        mass = W / W.sum(axis=1, keepdims=True)
        reps[m] = {"field_ece": np.sum(mass * np.abs(P - Y) / W, axis=1),
                   "field_rce": np.sum(mass * np.abs(Y - P) / (Y + 0.01 * W), axis=1)}
    for k in ("field_ece", "field_rce"):
        delta = reps[0][k] - reps[1][k]
        lo, hi = np.quantile(delta[1:], [0.025, 0.975])
        np.testing.assert_allclose([diffs[k]["diff"], diffs[k]["lo"], diffs[k]["hi"]], [delta[0], lo, hi], rtol=1e-9)
        a_lo, a_hi = np.quantile(reps[0][k][1:], [0.025, 0.975])
        np.testing.assert_allclose([values["a"][k]["lo"], values["a"][k]["hi"]], [a_lo, a_hi], rtol=1e-9)


def test_with_user_and_oracle_and_the_files(tmp_path, capsys):
    path = tmp_path / "log.parquet"
    pq.write_table(_table(), path)
    out = tmp_path / "o"
    assert main(["compare", str(path), "--label", "y", "--score", "a", "--score", "b", "--field", "site",
                 "--user", "uid", "--oracle", "pi", "--bootstrap", "20", "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "field_ece:site" in printed and "fields.md" in printed
    res = json.loads((out / "compare.json").read_text())
    metrics = {d["metric"] for d in res["differences"]}
    assert {"gauc", "oracle_brier"} <= metrics
    alone = logs.compare(_table(), scores=["a", "b"], label="y", fields=["site"], bootstrap=20)
    assert res["fields"] == alone.result["fields"]  # the field cells draw their own stream
    header = (out / "fields.csv").read_text().splitlines()[0]
    assert header.startswith("field,metric,a,b,value_a,lo_a,hi_a") and header.endswith("better,verdict")
    assert "## site" in (out / "fields.md").read_text() and "fields.md" in (out / "compare.md").read_text()


def _digest(folder) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("engine", ["duckdb", "arrow"])
def test_bad_fields_get_one_line_naming_the_option(engine, tmp_path, capsys):
    src = tmp_path / "in"
    src.mkdir()
    path = src / "log.parquet"
    pq.write_table(_table().select(["a", "b", "y", "site"]), path)
    before = _digest(src)
    argv = ["compare", str(path), "--label", "y", "--score", "a", "--score", "b", "--engine", engine, "--quiet"]
    assert main([*argv, "--field", "nope", "--out", str(tmp_path / "o1")]) == 2
    err = capsys.readouterr().err
    assert "--field nope" in err and "not found" in err and "Traceback" not in err and len(err.splitlines()) == 1
    assert main([*argv, "--field", "site", "--field", "site", "--out", str(tmp_path / "o2")]) == 2
    err = capsys.readouterr().err
    assert "--field: a column is named twice" in err and "Traceback" not in err
    with pytest.raises(ValueError, match="^fields nope: .*'nope' not found"):
        logs.compare(path, scores=["a", "b"], label="y", fields=["nope"], engine=engine)
    with pytest.raises(ValueError, match="fields: a column is named twice"):
        logs.compare(path, scores=["a", "b"], label="y", fields=["site", "site"], engine=engine)
    with pytest.raises(ValueError, match="fields"):
        logs.compare(path, scores=["a", "b"], label="y", fields=[3], engine=engine)
    assert _digest(src) == before
