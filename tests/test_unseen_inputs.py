"""What an applied log holds that the fit never saw, and one value written two ways
(``calib_jax.logs.unseen``).

- Field levels the fit did not keep: ``apply`` and ``Fit.predict`` map them to ``__other__`` as
  before, and now say how many rows did, beside the fit's own share; a share more than 10 points
  above the fit's is an ``UnseenInputsWarning`` that names the levels which are a kept level
  written another way (``1.0`` where the fit saw ``1``). Before 2026-12-06 such a log was
  calibrated with ``__other__``'s weights on every row, exit 0 and no word.
- SAG/VR-SAG feature values outside the fitted range: counted, and a warning above 10% of the
  rows (a feature in other units than the fit's).
- A report's column whose levels write one value two ways (``evaluate``, ``merge``, ``compare
  --field``, ``evaluate --by``): a ``RespelledLevelsWarning``; the levels stay apart."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")

from calib_jax import logs  # noqa: E402
from calib_jax.cli import main  # noqa: E402
from calib_jax.logs import params as P  # noqa: E402
from calib_jax.logs.unseen import WARN_MARGIN, UnseenInputs, UnseenInputsWarning, same_value  # noqa: E402

N = 2_000
#: the field's levels 0-3 on 40%, 30%, 20% and 10% of the rows: with --max-levels 3, level 3 is
#: the fit's own __other__ (10% of its rows)
SHARES = (0.4, 0.3, 0.2, 0.1)


def _frame(n: int = N, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    media = np.repeat(np.arange(4), [int(s * n) for s in SHARES])
    rng.shuffle(media)
    q = rng.uniform(0.02, 0.3, n) * (1 + 0.5 * (media == 1))
    y = (rng.uniform(size=n) < q).astype(int)
    price = np.round(rng.uniform(1.0, 20.0, n), 2)  # dollars
    return pd.DataFrame({"p": np.clip(1.2 * q, 0, 1), "y": y, "media": media, "price": price})


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("unseen")
    frame = _frame()
    frame.to_csv(folder / "log.csv", index=False)
    for method in ("sag_ps", "neural_calibration"):
        assert main(["fit", str(folder / "log.csv"), "--score", "p", "--label", "y", "--field", "media",
                     "--max-levels", "3", "--method", method, "--steps", "5", "--save",
                     str(folder / f"{method}.json"), "--quiet"]) == 0
    assert main(["fit", str(folder / "log.csv"), "--score", "p", "--label", "y", "--field", "media", "--feature",
                 "price", "--method", "vrsag_ps", "--steps", "5", "--save", str(folder / "priced.json"),
                 "--quiet"]) == 0
    return folder, frame


def _apply(folder, params: str, frame: pd.DataFrame, name: str, *extra: str):
    frame.to_csv(folder / f"{name}.csv", index=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(["apply", str(folder / params), str(folder / f"{name}.csv"), "--out",
                     str(folder / f"{name}_out.csv"), "--quiet", *extra])
    assert code == 0
    return [str(w.message) for w in caught if issubclass(w.category, UnseenInputsWarning)]


def test_the_fit_records_its_own_rows_in_other(fitted):
    folder, frame = fitted
    for method in ("sag_ps", "neural_calibration"):
        inputs = json.loads((folder / f"{method}.json").read_text())["inputs"]
        assert inputs["vocabularies"]["media"] == ["0", "1", "2", "__other__"]
        assert inputs["other_share"] == {"media": pytest.approx(float(np.mean(frame["media"] == 3)), abs=0)}


def test_fit_says_its_own_share_of_other(fitted, capsys):
    folder, _ = fitted
    assert main(["fit", str(folder / "log.csv"), "--score", "p", "--label", "y", "--field", "media", "--max-levels",
                 "3", "--method", "sag_ps", "--steps", "2", "--save", str(folder / "said.json")]) == 0
    assert ("  field 'media': 3 levels kept (--max-levels); the other 10.0% of the rows share the level __other__"
            in capsys.readouterr().out.splitlines())
    assert main(["fit", str(folder / "log.csv"), "--score", "p", "--label", "y", "--field", "media", "--method",
                 "sag_ps", "--steps", "2", "--save", str(folder / "said_all.json")]) == 0
    assert "__other__" not in capsys.readouterr().out  # every level kept: nothing to say


def test_the_fit_records_each_feature_range(fitted):
    folder, frame = fitted
    inputs = json.loads((folder / "priced.json").read_text())["inputs"]
    assert inputs["features"] == ["price"] and inputs["other_share"] == {"media": 0.0}
    assert inputs["feature_range"] == [[frame["price"].min(), frame["price"].max()]]


def test_a_feature_in_other_units_warns(fitted, capsys):
    folder, frame = fitted
    assert _apply(folder, "priced.json", frame, "dollars") == []
    assert "feature 'price'" not in capsys.readouterr().out
    cents = frame.assign(price=frame["price"] * 100)
    caught = _apply(folder, "priced.json", cents, "cents")
    outside = int((cents["price"] > frame["price"].max()).sum())
    lo, hi = frame["price"].min(), frame["price"].max()
    assert len(caught) == 1 and caught[0].endswith(
        f"feature 'price': {outside} of 2000 rows ({100 * outside / N:.1f}%) lie outside the range the fit saw, "
        f"[{lo:.6g}, {hi:.6g}] (these rows: {cents['price'][cents['price'] > hi].min():.6g} to "
        f"{cents['price'].max():.6g})")
    assert len(pd.read_csv(folder / "cents_out.csv")) == N  # written, as before
    few = frame.copy()
    few.loc[:19, "price"] = 25.0  # 1% of the rows: a line, not a warning
    assert _apply(folder, "priced.json", few, "few") == []
    assert "feature 'price': 20 of 2000 rows (1.0%) lie outside" in capsys.readouterr().out
    spec = json.loads((folder / "priced.json").read_text())
    del spec["inputs"]["feature_range"]  # a file written before 2026-12-06: features not checked
    (folder / "priced_old.json").write_text(json.dumps(spec))
    assert _apply(folder, "priced_old.json", cents, "cents_old") == []
    assert "feature 'price'" not in capsys.readouterr().out


def test_the_same_log_says_its_share_and_does_not_warn(fitted, capsys):
    folder, frame = fitted
    assert _apply(folder, "sag_ps.json", frame, "same") == []
    out = capsys.readouterr().out
    assert "field 'media': 200 of 2000 rows (10.0%) have a level the fit did not keep" in out
    assert "(the fit's own rows: 10.0%)" in out


@pytest.mark.parametrize("method", ["sag_ps", "neural_calibration"])
def test_a_field_written_another_way_warns_and_names_the_kept_levels(fitted, method):
    folder, frame = fitted
    respelled = frame.assign(media=frame["media"].astype(float))  # written 0.0, 1.0, ...: a float column
    caught = _apply(folder, f"{method}.json", respelled, f"floats_{method}")
    assert len(caught) == 1, caught
    text = caught[0]
    assert "field 'media': 2000 of 2000 rows (100.0%)" in text and "(the fit's own rows: 10.0%)" in text
    assert "'1.0' (600 rows) is the kept level '1' written another way" in text
    assert "'0.0' (800 rows) is the kept level '0' written another way" in text
    assert "'3.0'" not in text  # level 3 was not kept: nothing to name
    # the output is written, every row with __other__'s weights, as before
    out = pd.read_csv(folder / f"floats_{method}_out.csv")
    assert len(out) == N and out["calibrated"].between(0, 1).all()


def test_a_few_new_levels_are_a_line_not_a_warning(fitted, capsys):
    folder, frame = fitted
    new = frame.copy()
    new.loc[: int(0.05 * N) - 1, "media"] = 7  # 5% of the rows at a new level, beside the fit's 10% in __other__
    assert _apply(folder, "sag_ps.json", new, "new") == []
    shifted = frame.copy()
    changed = int((0.1 + WARN_MARGIN + 0.05) * N)  # 25% of the rows at levels the fit did not keep
    shifted.loc[shifted.index[shifted["media"] != 3][:changed - int(0.1 * N)], "media"] = 9
    caught = _apply(folder, "sag_ps.json", shifted, "shifted")
    assert len(caught) == 1 and f"{changed} of 2000 rows (25.0%)" in caught[0]
    assert "written another way" not in caught[0]  # 9 is no kept level


def test_the_count_does_not_depend_on_the_chunks(fitted):
    folder, frame = fitted
    respelled = frame.assign(media=frame["media"].astype(float))
    whole = _apply(folder, "sag_ps.json", respelled, "whole")
    chunked = _apply(folder, "sag_ps.json", respelled, "chunked", "--chunk-rows", "300")
    assert whole == [t.replace("chunked", "whole") for t in chunked]


def test_fit_predict_warns_as_apply_does(fitted):
    folder, frame = fitted
    fit = logs.Fit(json.loads((folder / "sag_ps.json").read_text()))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kept = fit.predict(frame["p"].to_numpy(), frame)  # the fit's own share: no warning
    with pytest.warns(UnseenInputsWarning, match=r"^table: field 'media': 2000 of 2000 rows .*'2.0' \(400 rows\) "
                                                 r"is the kept level '2' written another way"):
        moved = fit.predict(frame["p"].to_numpy(), frame.assign(media=frame["media"].astype(float)))
    assert not np.array_equal(kept, moved)


def test_a_file_without_the_fit_share_compares_with_none(fitted, capsys):
    folder, frame = fitted
    spec = json.loads((folder / "sag_ps.json").read_text())
    del spec["inputs"]["other_share"]
    (folder / "unrecorded.json").write_text(json.dumps(spec))
    caught = _apply(folder, "unrecorded.json", frame, "unrecorded")  # 10% in __other__: not above 0 + 10 points
    assert caught == [] and "the parameter file does not record the fit's own share" in capsys.readouterr().out


@pytest.mark.parametrize("span", [[[1.0, 20.0], [0.0, 1.0]], [[20.0, 1.0]], [[1.0]], [["1", 20.0]], [[True, 20.0]],
                                  {"price": [1.0, 20.0]}])
def test_a_bad_recorded_range_is_refused(fitted, span):
    folder, _ = fitted
    spec = json.loads((folder / "priced.json").read_text())
    spec["inputs"]["feature_range"] = span
    (folder / "bad_span.json").write_text(json.dumps(spec))
    with pytest.raises(ValueError, match="inputs.feature_range must hold 1 pairs"):
        P.load(folder / "bad_span.json")


@pytest.mark.parametrize("share, needle", [
    ({"media": 1.5}, "inputs.other_share must give each field's share of the fit's rows in __other__"),
    (("new_share", {"media": -0.1}), "inputs.new_share must give each field's share of new rows expected"),
    ({"other": 0.1}, "inputs.other_share"),
    ({"media": "0.1"}, "inputs.other_share"), ([0.1], "inputs.other_share"), ({"media": True}, "inputs.other_share")])
def test_a_bad_recorded_share_is_refused(fitted, share, needle):
    folder, _ = fitted
    spec = json.loads((folder / "sag_ps.json").read_text())
    key, share = share if isinstance(share, tuple) else ("other_share", share)
    spec["inputs"][key] = share
    (folder / "bad_share.json").write_text(json.dumps(spec))
    with pytest.raises(ValueError, match=needle):
        P.load(folder / "bad_share.json")


@pytest.mark.parametrize("level, kept", [
    ("1.0", "1"), ("1e0", "1"), ("01", "1"), (" 1", "1"), ("+1", "1"), ("Mobile", "mobile"), (" mobile ", "mobile"),
    ("2", None), ("1.5", None), ("nan", "NaN"), ("inf", None), ("__missing__", None), ("__other__", None),
    ("mobil", None)])
def test_same_value(level, kept):
    assert same_value(level, ["1", "mobile", "NaN", "Infinity", "__missing__", "__other__"]) == kept


def test_the_tally_against_a_count_in_numpy():
    rng = np.random.default_rng(5)
    vocab = ["a", "b", "__other__"]
    text = rng.choice(["a", "b", "c", "d", "B"], 5_000, p=[0.3, 0.3, 0.2, 0.1, 0.1])
    tally = UnseenInputs({"fields": ["f"], "vocabularies": {"f": vocab}, "other_share": {"f": 0.0}})
    for chunk in np.array_split(text, 7):
        arrow = pa.array(chunk)
        tally.add("f", arrow, pa.compute.index_in(arrow, value_set=pa.array(vocab)))
    tally.rows = text.size
    unseen = ~np.isin(text, vocab)
    assert tally.unseen["f"] == unseen.sum()
    assert dict(tally.levels["f"]) == {k: int((text == k).sum()) for k in ("c", "d", "B")}
    [(message, warn)] = tally.messages()
    assert warn and f"{unseen.sum()} of 5000 rows" in message
    assert f"'B' ({(text == 'B').sum()} rows) is the kept level 'b' written another way" in message


def test_the_feature_count_against_numpy():
    rng = np.random.default_rng(6)
    x = rng.normal(size=10_000) * 3
    tally = UnseenInputs({"fields": [], "features": ["x"], "feature_range": [[-4.0, 5.0]]})
    for chunk in np.array_split(x, 9):
        tally.add_feature("x", chunk)
    tally.rows = x.size
    out = x[(x < -4) | (x > 5)]
    assert tally.outside["x"] == out.size and tally.outside_span["x"] == (out.min(), out.max())
    [(message, warn)] = tally.messages()
    assert warn == (out.size / x.size > WARN_MARGIN) and f"{out.size} of 10000 rows" in message


# ----------------------------------------------------------------------------- one value written two ways
@pytest.mark.parametrize("levels, groups", [
    (["1", "2", "1.0", "web", "Web ", "__missing__"], [["1", "1.0"], ["web", "Web "]]),
    (["01", "1", "1e0", "+1"], [["01", "1", "1e0", "+1"]]),
    (["a", "b", "__other__", "__missing__", "c"], []),
    (["nan", "NaN", "inf"], [["nan", "NaN"]]),
])
def test_respelled_levels(levels, groups):
    from calib_jax.logs.unseen import respelled_levels

    assert respelled_levels(levels) == groups


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    """Two days of one log: the first writes the field ``media`` as integers, the second as floats."""
    folder = tmp_path_factory.mktemp("lake")
    frame = _frame(seed=1)
    frame["p2"] = 0.9 * frame["p"]  # a second model, for compare
    frame.iloc[:1000].to_csv(folder / "day0.csv", index=False)
    frame.iloc[1000:].assign(media=frame["media"].iloc[1000:].astype(float)).to_csv(folder / "day1.csv", index=False)
    day1 = (folder / "day1.csv").read_text().split("\n", 1)[1]  # the two days in one file, for the arrow reader
    (folder / "both").mkdir()
    (folder / "both" / "days.csv").write_text((folder / "day0.csv").read_text() + day1)
    return folder


def _run(args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(args)
    assert code == 0
    return [str(w.message) for w in caught if w.category.__name__ == "RespelledLevelsWarning"]


def _names_three_of_four_pairs(message: str, what: str) -> bool:
    """The message names three of the four levels written two ways (in the engine's order of
    levels) and counts the fourth."""
    pairs = {frozenset(p) for p in re.findall(r"'([0-9.]+)' and '([0-9.]+)'", message)}
    return (f"{what} 'media': the levels " in message and "(and 1 more groups) are one value written two ways" in message
            and len(pairs) == 3 and pairs <= {frozenset((f"{k}", f"{k}.0")) for k in range(4)})


@pytest.mark.parametrize("engine", ["arrow", "duckdb"])
def test_evaluate_warns_of_one_value_written_two_ways(lake, tmp_path, engine):
    log = lake / ("*.csv" if engine == "duckdb" else "both/days.csv")  # the arrow reader reads one file
    caught = _run(["evaluate", str(log), "--score", "p", "--label", "y", "--field", "media", "--out",
                   str(tmp_path / "rep"), "--engine", engine, "--quiet"])
    assert len(caught) == 1 and _names_three_of_four_pairs(caught[0], "field")
    levels = {r["value"] for r in json.loads((tmp_path / "rep" / "report.json").read_text())["fields"]["media"]["levels"]}
    assert {"1", "1.0"} <= levels  # reported apart, as before: the warning says so
    assert _run(["evaluate", str(lake / "day0.csv"), "--score", "p", "--label", "y", "--field", "media", "--out",
                 str(tmp_path / "day0"), "--engine", engine, "--quiet"]) == []


def test_merge_compare_and_slices_warn_alike(lake, tmp_path):
    for day in ("day0", "day1"):
        assert _run(["evaluate", str(lake / f"{day}.csv"), "--score", "p", "--label", "y", "--field", "media",
                     "--state-only", "--out", str(tmp_path / day), "--quiet"]) == []
    caught = _run(["merge", str(tmp_path / "day0"), str(tmp_path / "day1"), "--out", str(tmp_path / "merged")])
    assert len(caught) == 1 and _names_three_of_four_pairs(caught[0], "field")
    caught = _run(["compare", str(lake / "*.csv"), "--score", "p", "--score", "p2", "--label", "y", "--field",
                   "media", "--out", str(tmp_path / "cmp"), "--bootstrap", "0"])
    assert len(caught) == 1 and _names_three_of_four_pairs(caught[0], "field")
    caught = _run(["evaluate", str(lake / "*.csv"), "--score", "p", "--label", "y", "--by", "media", "--out",
                   str(tmp_path / "slices"), "--quiet"])
    assert len(caught) == 1 and _names_three_of_four_pairs(caught[0], "--by")


# ----------------------------------------------------------------------------- nothing changed: no warning
def _zipf(rng, n):
    p = np.arange(1, 2_001) ** -1.1
    return rng.choice(2_000, n, p=p / p.sum()).astype(str)


@pytest.mark.parametrize("max_levels", [50, 5_000])
def test_expected_new_share_is_the_leave_one_out_share(max_levels):
    from calib_jax.logs.unseen import expected_new_share

    fit = _zipf(np.random.default_rng(7), 20_000)
    levels, counts = np.unique(fit, return_counts=True)
    order = sorted(range(levels.size), key=lambda i: (-counts[i], levels[i]))[:max_levels]
    kept = {levels[i] for i in order}
    # leave one out, row by row: the row's level would be new had the fit not seen it (kept with one row), or is
    # in __other__ (not kept); the kept set is held fixed (a level at the cut is not re-ranked)
    count_of = dict(zip(levels, counts, strict=True))
    loo = np.mean([(lv not in kept) or count_of[lv] == 1 for lv in fit])
    assert expected_new_share(dict(zip(levels, counts.tolist(), strict=True)), sorted(kept), fit.size) == \
        pytest.approx(loo, abs=1e-12)


@pytest.mark.parametrize("max_levels", [3, 60])
def test_field_vocabulary_is_the_top_k_rule_fit_records(fitted, max_levels):
    """``params.field_vocabulary`` keeps the most frequent levels, ties by their text, and its share
    is :func:`expected_new_share` of those; on the fitted log it is what ``fit`` wrote."""
    from calib_jax.logs.unseen import expected_new_share

    fit = np.append(_zipf(np.random.default_rng(9), 3_000), ["77", "78"])  # ties at one row among the tail
    levels, counts = np.unique(fit, return_counts=True)
    order = sorted(range(levels.size), key=lambda i: (-counts[i], levels[i]))[:max_levels]
    vocab, new = P.field_vocabulary(pa.table({"f": fit}), "f", max_levels)
    assert vocab == [str(levels[i]) for i in order] + ["__other__"]
    assert new == expected_new_share(dict(zip(levels, counts.tolist(), strict=True)), vocab, fit.size)
    folder, frame = fitted
    record = json.loads((folder / "sag_ps.json").read_text())
    vocab, new = P.field_vocabulary(pa.table({"media": frame["media"].to_numpy()}), "media", 3)
    assert record["inputs"]["vocabularies"]["media"] == vocab == ["0", "1", "2", "__other__"]
    assert record["inputs"]["new_share"]["media"] == pytest.approx(new, abs=1e-15)


def test_a_long_tail_a_small_fit_never_met_does_not_warn():
    """Every level of a 1,000-row fit kept, its own share in __other__ 0, yet a third of new rows
    of the same distribution are at levels it never met: before the expected share, every apply
    warned (benchmarks/results/unseen_alarms.md)."""
    from calib_jax.logs.unseen import expected_new_share

    rng = np.random.default_rng(8)
    fit = _zipf(rng, 1_000)
    levels, counts = np.unique(fit, return_counts=True)
    vocab = list(levels) + ["__other__"]
    new = expected_new_share(dict(zip(levels, counts.tolist(), strict=True)), vocab, fit.size)
    for n in (10, 20_000):
        applied = pa.array(_zipf(rng, n))
        for inputs, warns in (({"other_share": {"f": 0.0}, "new_share": {"f": new}}, False),
                              ({"other_share": {"f": 0.0}}, n > 10 or None)):  # the fit's own share alone: false alarm
            tally = UnseenInputs({"fields": ["f"], "vocabularies": {"f": vocab}, **inputs})
            tally.add("f", applied, pa.compute.index_in(applied, value_set=pa.array(vocab)))
            tally.rows = n
            [(message, warn)] = tally.messages()
            assert warns is None or warn == warns, (n, inputs, message)
    assert 0.1 < new < 0.5  # a sizeable share the fit's own 0 would have missed
