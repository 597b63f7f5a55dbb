"""One column, one role: ``evaluate`` (and ``fit``, and the library) refuse a column named by two
options, e.g. ``--oracle`` equal to ``--score``, which used to report an oracle Brier of 0."""

from __future__ import annotations

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
import pyarrow.parquet as pq  # noqa: E402

from calib_jax import logs  # noqa: E402
from calib_jax.cli import main  # noqa: E402


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    rng = np.random.default_rng(0)
    p = rng.uniform(0.05, 0.6, 400)
    path = tmp_path_factory.mktemp("roles") / "log.parquet"
    pq.write_table(pa.table({"p": p, "y": (rng.uniform(size=400) < p).astype(np.int8), "w": rng.uniform(1, 2, 400),
                             "u": rng.integers(0, 20, 400).astype(str)}), path)
    return path


CASES = [  # (options, the later flag, the earlier flag)
    (["--score", "p", "--oracle", "p"], "--oracle", "--score"),
    (["--score", "p", "--weight", "y"], "--weight", "--label"),
    (["--logit", "p", "--user", "p"], "--user", "--logit"),
    (["--score", "p", "--weight", "w", "--negative-rate-column", "w"], "--negative-rate-column", "--weight"),
]


@pytest.mark.parametrize("engine", ["duckdb", "arrow"])
@pytest.mark.parametrize("opts,later,earlier", CASES)
def test_a_column_named_twice_is_refused_in_one_line(log, tmp_path, capsys, opts, later, earlier, engine):
    before = log.read_bytes()
    code = main(["evaluate", str(log), "--label", "y", *opts, "--engine", engine, "--bootstrap", "0", "--quiet",
                 "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and f"{later} must name another column than {earlier}" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r" / "report.json").exists() and log.read_bytes() == before


def test_the_library_raises_value_error(log):
    with pytest.raises(ValueError, match="^oracle must name another column than score"):  # argument names
        logs.evaluate(str(log), score="p", label="y", oracle="p", bootstrap=0)


@pytest.mark.parametrize("method", ["temperature", "platt", "beta", "histogram_binning", "isotonic", "ilps"])
def test_a_fit_refuses_fields_and_features_its_method_does_not_read(log, tmp_path, capsys, method):
    """``fit --method platt --field u`` used to fit Platt scaling on the score alone and save a
    parameter file without the field, exit 0: the user asked for a per-field calibration and got
    none. Refused before the log is read, naming the flag and the methods that read it."""
    for flag, col, readers in (("--field", "u", "neural_calibration"), ("--feature", "w", "vrsag_ps")):
        save = tmp_path / f"{method}.json"
        code = main(["fit", str(log), "--score", "p", "--label", "y", "--method", method, flag, col,
                     "--save", str(save), "--quiet"])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1, err
        assert f"{flag}: --method {method} reads only the score or logit and would ignore {col}" in err, err
        assert readers in err and not save.exists()
    with pytest.raises(ValueError, match=f"^fields: method {method} reads only the score"):  # argument names
        logs.fit(str(log), method=method, score="p", label="y", fields=["u"])


@pytest.mark.parametrize("engine", ["duckdb", "arrow"])
def test_a_field_may_not_be_the_label_the_score_or_the_weight(log, tmp_path, capsys, engine):
    """``--field y`` gave a table of one level per click (a click rate of 0 or 1 each) and a
    Field-ECE of the label against itself; ``--field p`` a level per score value; exit 0 in
    evaluate, evaluate --by and compare (fit refused it). Refused by each, naming the roles."""
    runs = {"evaluate": ["evaluate", str(log), "--score", "p", "--label", "y", "--weight", "w"],
            "by": ["evaluate", str(log), "--score", "p", "--label", "y", "--weight", "w", "--by", "u"],
            "compare": ["compare", str(log), "--score", "p", "--score", "w", "--label", "y"]}
    for what, argv in runs.items():
        for col in ("y", "p", "w"):
            if what == "compare" and col == "w":
                continue  # a model's column there
            code = main([*argv, "--field", col, "--engine", engine, "--bootstrap", "0", "--quiet",
                         "--out", str(tmp_path / what)])
            err = capsys.readouterr().err
            assert code == 2 and "--field must name another column than" in err and f"'{col}'" in err, (what, err)
            assert not (tmp_path / what).exists()
    ok = main([*runs["evaluate"], "--field", "u", "--user", "u", "--engine", engine, "--bootstrap", "0", "--quiet",
               "--out", str(tmp_path / "ok")])
    assert ok == 0, capsys.readouterr().err  # the user column may be a field
    with pytest.raises(ValueError, match="^fields must name another column than label"):
        logs.evaluate(str(log), score="p", label="y", fields=["y"], bootstrap=0)
