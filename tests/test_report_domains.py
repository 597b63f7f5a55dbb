"""Every number the library and the ``calib-jax`` report give lies in its domain (the
hostile-input audit of main):

* exact binomial intervals are exact at 10^9 trials, eagerly (float64 on the host, checked
  against SciPy and against the defining binomial tail), under ``jit`` with x64 (float64 on the
  device) and without (float32, stated precision);
* every reported value and interval end lies in its quantity's range
  (:data:`calib_jax.logs.report.RANGES`), and no interval of the report excludes its value: the
  metrics, the field tables, the decompositions, the reliability bins and the tests table
  (the report-wide form of ``tests/test_cli.py``'s interval test);
* the report is strict JSON and its CSV tables have no ``nan``: a constant score column (a
  baseline model) made Cox's test NaN, written as bare ``NaN``; an undefined number is
  ``null`` with a ``<name>_undefined`` reason beside it;
* report files get the permissions of a normally created file (``0666 & ~umask``), not
  ``tempfile.mkstemp``'s 0600.
"""

from __future__ import annotations

import csv
import json
import math
import os
import stat
from pathlib import Path

import jax
import numpy as np
import pytest
from scipy import stats

import calib_jax as cj
from calib_jax import io as cio
from calib_jax.cli import main
from calib_jax.logs.report import RANGES

LEVEL = 0.95
HALF = (1 - LEVEL) / 2


# ---------------------------------------------------------------------------- binomial intervals
def _grid() -> tuple[np.ndarray, np.ndarray]:
    """(k, n) up to 10^9: k = 0, 1, 2, mid, n - 2, n - 1, n, and spread values."""
    ks, ns = [], []
    for n in (1, 2, 7, 40, 1000, 2001, 10**4, 10**5, 10**6, 10**7, 10**8, 10**9):
        for k in (0, 1, 2, 3, 17, 1000, n // 2, n - 2, n - 1, n, 12345, 10**6 + 7):
            if 0 <= k <= n:
                ks.append(k)
                ns.append(n)
    return np.array(ks, np.float64), np.array(ns, np.float64)


def _scipy_ends(k: np.ndarray, n: np.ndarray, method: str, level: float = LEVEL):
    """SciPy's Beta quantiles (scipy.stats.beta.ppf), 0 at k = 0 and 1 at k = n."""
    half = (1 - level) / 2
    if method == "clopper-pearson":
        (al, bl), (ah, bh) = (k, n - k + 1), (k + 1, n - k)
    else:
        (al, bl), (ah, bh) = (k + 0.5, n - k + 0.5), (k + 0.5, n - k + 0.5)
    with np.errstate(all="ignore"):
        lo = np.where(k > 0, stats.beta.ppf(half, np.maximum(al, 1e-300), np.maximum(bl, 1e-300)), 0.0)
        hi = np.where(k < n, stats.beta.ppf(1 - half, np.maximum(ah, 1e-300), np.maximum(bh, 1e-300)), 1.0)
    return lo, hi


def _scipy_is_consistent(k, n, lo, hi, method) -> np.ndarray:
    """Where SciPy's quantile solves its own tail equation (it does not for k = 1000 at
    n = 10^9, where it returns an interval with lo above hi)."""
    (al, bl), (ah, bh) = ((k, n - k + 1), (k + 1, n - k)) if method == "clopper-pearson" else \
        ((k + 0.5, n - k + 0.5),) * 2
    from scipy import special as sp

    with np.errstate(all="ignore"):
        ok_lo = (k == 0) | (np.abs(sp.betainc(al, bl, lo) - HALF) <= 1e-6 * HALF)
        ok_hi = (k == n) | (np.abs(sp.betaincc(ah, bh, hi) - HALF) <= 1e-6 * HALF)
    return ok_lo & ok_hi


@pytest.mark.parametrize("method", ["clopper-pearson", "jeffreys"])
def test_binomial_interval_is_exact_up_to_a_billion_trials(method):
    """Eager call, float64 (x64 on): within 1e-6 of the interval's width of SciPy's Beta
    quantiles wherever SciPy solves its own equation, and everywhere the ends solve the
    defining binomial tail equation (``scipy.stats.binom``, an independent path): the float32
    bisection gave [0.5011, 0.5011] for 5e8 of 1e9, and ends off by up to 68 widths."""
    k, n = _grid()
    with jax.enable_x64(True):
        r = cj.inference.binomial_interval(k, n, method=method)
        lo, hi = np.asarray(r.lo, np.float64), np.asarray(r.hi, np.float64)
    ref_lo, ref_hi = _scipy_ends(k, n, method)
    width = ref_hi - ref_lo
    ok = _scipy_is_consistent(k, n, ref_lo, ref_hi, method)
    assert ok.mean() > 0.9
    np.testing.assert_array_less(np.abs(lo - ref_lo)[ok], 1e-6 * width[ok] + 1e-300)
    np.testing.assert_array_less(np.abs(hi - ref_hi)[ok], 1e-6 * width[ok] + 1e-300)
    assert np.all((lo <= k / n) & (k / n <= hi) & (lo >= 0) & (hi <= 1))
    if method == "clopper-pearson":  # P(X >= k | lo) = alpha/2 = P(X <= k | hi), X ~ Bin(n, p)
        inner = (k > 0) & (k < n)
        _solves(lambda x: stats.binom.sf(k[inner] - 1, n[inner], x), lo[inner])
        _solves(lambda x: stats.binom.cdf(k[inner], n[inner], x), hi[inner])


def _solves(tail, x: np.ndarray, rtol: float = 1e-6) -> None:
    """``tail(x) = alpha/2`` to ``rtol``, or to the float64 resolution of ``x``: alpha/2 lies
    between the tail at 2 ulps either side (near 1, at 10^9 trials, one ulp of the upper end
    moves the tail by 2e-6 of itself)."""
    below, above = tail(x - 2 * np.spacing(x)), tail(x + 2 * np.spacing(x))
    low, high = np.minimum(below, above), np.maximum(below, above)
    bad = ~((low * (1 - rtol) <= HALF) & (HALF <= high * (1 + rtol)))
    assert not bad.any(), (x[bad], tail(x)[bad])


def test_binomial_interval_where_scipy_inverts_it():
    """k = 1000 clicks in 10^9 impressions: SciPy's beta.ppf gives 1.90e-6 for the 2.5%
    quantile, above its 97.5% quantile 1.06e-6; the interval is the one of the binomial tail
    equation (the gamma limit agrees to 1e-6)."""
    k, n = 1000.0, 1e9
    with jax.enable_x64(True):
        r = cj.inference.binomial_interval(k, n)
    lo, hi = float(r.lo), float(r.hi)
    assert lo < k / n < hi
    _solves(lambda x: stats.binom.sf(k - 1, n, x), np.array([lo]))
    _solves(lambda x: stats.binom.cdf(k, n, x), np.array([hi]))
    assert lo == pytest.approx(stats.gamma.ppf(HALF, k) / n, rel=1e-5)


def test_binomial_interval_float32_eager_contains_the_exact_one():
    """Without x64 the eager call returns float32 ends rounded outward: the stored interval
    contains the float64 one and is at most 2 float32 ulps wider on each side."""
    k, n = _grid()
    r = cj.inference.binomial_interval(k, n)
    assert np.asarray(r.lo).dtype == np.float32
    with jax.enable_x64(True):
        r64 = cj.inference.binomial_interval(k, n)
    lo, hi = np.asarray(r.lo, np.float64), np.asarray(r.hi, np.float64)
    lo64, hi64 = np.asarray(r64.lo), np.asarray(r64.hi)
    assert np.all((lo <= lo64) & (hi >= hi64))
    ulp = lambda x: np.spacing(np.abs(x).astype(np.float32)).astype(np.float64)  # noqa: E731
    assert np.all(lo64 - lo <= 2 * ulp(lo64)) and np.all(hi - hi64 <= 2 * ulp(hi64))


@pytest.mark.parametrize("method", ["clopper-pearson", "jeffreys"])
def test_binomial_interval_under_jit_with_x64(method):
    """``jit`` with x64 enabled: a float64 bisection on the device, within 1e-5 of the
    interval's width of SciPy's ends (wherever SciPy solves its own equation) up to 10^9."""
    k, n = _grid()
    ref_lo, ref_hi = _scipy_ends(k, n, method)
    ok = _scipy_is_consistent(k, n, ref_lo, ref_hi, method)
    with jax.enable_x64(True):
        f = jax.jit(lambda a, b: cj.inference.binomial_interval(a, b, method=method))
        r = f(np.asarray(k), np.asarray(n))
        lo, hi = np.asarray(r.lo), np.asarray(r.hi)
    assert lo.dtype == np.float64
    width = ref_hi - ref_lo
    np.testing.assert_array_less(np.abs(lo - ref_lo)[ok], 1e-5 * width[ok] + 1e-300)
    np.testing.assert_array_less(np.abs(hi - ref_hi)[ok], 1e-5 * width[ok] + 1e-300)
    assert np.all((lo <= k / n) & (k / n <= hi))


@pytest.mark.parametrize("level", [0.95, 0.5])
@pytest.mark.parametrize("method", ["clopper-pearson", "jeffreys"])
def test_binomial_interval_under_jit_in_float32(method, level):
    """``jit`` without x64 (JAX's default): float32 throughout, the stated precision: each end
    within 1% of the interval's width plus 4 float32 ulps of the end, against the float64 ends
    of the float32-rounded counts (the float32 bisection was inverted at 10^8 trials and off
    by up to 68 widths at 10^9); ``0 <= lo <= k/n <= hi <= 1`` exactly."""
    k, n = _grid()
    k = np.r_[k, 0.3, 2.5, 999_999.5]  # weighted (non-integer) counts too
    n = np.r_[n, 1e7, 3e3, 1e6]
    r = jax.jit(lambda a, b: cj.inference.binomial_interval(a, b, method=method, level=level))(
        k.astype(np.float32), n.astype(np.float32))
    lo, hi = np.asarray(r.lo), np.asarray(r.hi)
    assert lo.dtype == np.float32
    k32, n32 = k.astype(np.float32).astype(np.float64), n.astype(np.float32).astype(np.float64)
    with jax.enable_x64(True):
        ref = cj.inference.binomial_interval(k32, n32, method=method, level=level)
    ref_lo, ref_hi = np.asarray(ref.lo), np.asarray(ref.hi)
    width = ref_hi - ref_lo
    ulp = lambda x: np.spacing(np.abs(x).astype(np.float32)).astype(np.float64)  # noqa: E731
    assert np.all(np.abs(lo - ref_lo) <= 0.01 * width + 4 * ulp(ref_lo))
    assert np.all(np.abs(hi - ref_hi) <= 0.01 * width + 4 * ulp(ref_hi))
    p32 = (k32 / n32).astype(np.float32)
    assert np.all((lo >= 0) & (lo <= p32) & (p32 <= hi) & (hi <= 1))


def test_binomial_interval_the_reported_inversions():
    """The audit's cases, with the default (float32) dtype, eager and jitted: a bin of 10^8
    impressions at a 10% click rate (the band was [0.09959, 0.09960], 1/60 of its width and
    off the rate) and 5e8 of 1e9 (inverted: low above the rate)."""
    for k, n in ((10**7, 10**8), (5 * 10**8, 10**9), (12345, 10**7)):
        ref_lo, ref_hi = stats.beta.ppf(HALF, k, n - k + 1), stats.beta.ppf(1 - HALF, k + 1, n - k)
        for r in (cj.inference.binomial_interval(k, n),
                  jax.jit(lambda a, b: cj.inference.binomial_interval(a, b))(float(k), float(n))):
            lo, hi = float(r.lo), float(r.hi)
            assert lo <= k / n <= hi
            assert abs(lo - ref_lo) <= 0.01 * (ref_hi - ref_lo) + 4 * np.spacing(np.float32(ref_lo))
            assert abs(hi - ref_hi) <= 0.01 * (ref_hi - ref_lo) + 4 * np.spacing(np.float32(ref_hi))


# ---------------------------------------------------------------------------- report logs
def _write_log(path: Path, p: np.ndarray, y: np.ndarray) -> Path:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["pctr", "click", "site"])
        for i in range(p.size):
            w.writerow([repr(float(p[i])), int(y[i]), f"s{i % 3}"])
    return path


def _evaluate(log: Path, out: Path, boot: int = 200) -> dict:
    rc = main(["evaluate", str(log), "--score", "pctr", "--label", "click", "--field", "site", "--out", str(out),
               "--bootstrap", str(boot), "--quiet"])
    assert rc == 0
    return json.loads((out / "report.json").read_text())  # strictness: test_report_outputs_are_strict_json_and_csv


def _strict_json(text: str) -> dict:
    def refuse(token: str) -> None:
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """The logs of the audit: 3,000 rows with one confident row without a click (the
    bias-corrected MCE was 1.32 with upper limit 1.65, and fine-bin Murphy's REL and RES lay
    below their percentile intervals), 200 rows, a constant score (a baseline model), and a
    log without a click (undefined numbers)."""
    d = tmp_path_factory.mktemp("domains")
    rng = np.random.default_rng(0)
    p = rng.uniform(0.01, 0.3, 3000)
    y = (rng.random(3000) < p).astype(int)
    p[0], y[0] = 0.99, 0
    logs = {"mce": (p, y)}
    p = rng.uniform(0.01, 0.3, 200)
    logs["small"] = (p, (rng.random(200) < p).astype(int))
    logs["constant"] = (np.full(2000, 0.1), (rng.random(2000) < 0.1).astype(int))
    logs["no_click"] = (rng.uniform(0.01, 0.2, 300), np.zeros(300, int))  # bias, AUC, the tests undefined
    return {name: (_evaluate(_write_log(d / f"{name}.csv", *py), d / name), d / name) for name, py in logs.items()}


def _triples(rep: dict):
    """(where, range key, value, lo, hi) of every reported number with or without an interval."""
    for e in rep["metrics"]:
        yield "metric", e["name"].split(":")[0], e["value"], e["lo"], e["hi"]
        if "plug_in" in e:
            yield "metric plug-in", e["name"].split(":")[0], e["plug_in"], None, None
    for t in rep["fields"].values():
        for name, e in t["metrics"].items():
            yield "field", name, e["value"], e["lo"], e["hi"]
        for row in t["levels"]:
            yield "level", "weight", row["weight"], None, None
            for col in ("mean_p", "ctr", "bias", "calibration_ratio", "ne", "gap"):
                if col in row:
                    yield "level", col, row[col], row.get(f"{col}_lo"), row.get(f"{col}_hi")
    for d, terms in rep["decompositions"].items():
        for term, e in terms.items():
            yield f"decomposition {d}", term, e["value"], e["lo"], e["hi"]
            yield f"decomposition {d} plug-in", term, e.get("plug_in"), None, None
    for r in rep["reliability"]:
        yield "reliability", "ctr", r["ctr"], r["ctr_lo"], r["ctr_hi"]
        yield "reliability bootstrap", "ctr", r["ctr"], r["ctr_boot_lo"], r["ctr_boot_hi"]
        yield "reliability", "mean_p", r["mean_p"], None, None
    for t in rep["tests"]:
        yield "test", t["test"], t["statistic"], None, None
        yield "test", "p_value", t["p_value"], None, None
        yield "test", "df", t["df"], None, None


@pytest.mark.parametrize("log", ["mce", "small", "constant", "no_click"])
def test_every_reported_value_and_interval_lies_in_its_range(reports, log):
    """The bias-corrected MCE was 1.32 with upper limit 1.65 (only the lower side was
    clipped): every value and interval end, plug-ins included, lies in its range."""
    rep, _ = reports[log]
    seen = set()
    for where, key, *numbers in _triples(rep):
        assert key in RANGES, (where, key)
        low, high = RANGES[key]
        seen.add(key)
        for x in numbers:
            assert x is None or low <= x <= high, (where, key, numbers)
    assert {"mce", "rel", "res", "mcb", "dsc"} <= seen
    assert log == "no_click" or {"p_value", "hosmer_lemeshow"} <= seen  # no test without a click


def test_the_reported_mce_case(reports):
    """MCE of the 3,000-row log: the largest gap (0.99, one confident row without a click) is
    clipped to 1 with a note, the interval within [0, 1]."""
    rep, _ = reports["mce"]
    mce = next(e for e in rep["metrics"] if e["name"] == "mce")
    assert mce["plug_in"] == pytest.approx(0.99)
    assert mce["value"] == 1.0 and mce["hi"] <= 1.0 and mce["lo"] <= mce["value"]
    assert "clipped to its range [0, 1]" in mce["note"]


@pytest.mark.parametrize("log", ["mce", "small", "constant", "no_click"])
def test_no_interval_of_the_report_excludes_its_value(reports, log):
    """Report-wide (the metrics, the field metrics and levels, every decomposition term, the
    reliability bins' exact and bootstrap bands): each interval contains its value and names
    its method. Fine-bin Murphy's REL and RES lay below their percentile intervals (the
    plug-ins of biased statistics); the decompositions are now bias-corrected, with the
    plug-in beside the value and the method in the report's notes."""
    rep, _ = reports[log]
    for where, key, value, lo, hi in _triples(rep):
        if lo is not None and value is not None:
            assert lo <= value <= hi, (where, key, value, lo, hi)
    for d, terms in rep["decompositions"].items():
        for term, e in terms.items():
            assert e["method"] in (None, "bootstrap bias-corrected"), (d, term, e)
            assert e["plug_in"] is not None, (d, term)
    assert "decomposition term" in rep["interval_methods"]["bootstrap bias-corrected"]


def test_bias_corrected_decompositions_keep_their_identity(reports):
    """The bias correction (2 x plug-in - mean of the replicates) is linear: the corrected
    Brier terms sum as the plug-ins do, Brier = UNC + REL - RES + delta + residual, where no
    term was clipped to its range."""
    rep, _ = reports["small"]
    for d, t in rep["decompositions"].items():
        if "rel" not in t:
            continue
        plug = {k: e["plug_in"] for k, e in t.items()}
        assert plug["brier"] == pytest.approx(plug["unc"] + plug["rel"] - plug["res"] + plug["delta"]
                                              + plug["residual"], abs=1e-9)
        if not any("value clipped" in e["note"] for e in t.values()):
            v = {k: e["value"] for k, e in t.items()}
            assert v["brier"] == pytest.approx(v["unc"] + v["rel"] - v["res"] + v["delta"] + v["residual"],
                                               abs=1e-9), d


def _nulls_have_reasons(obj, path="") -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if v is None and not k.endswith("_undefined"):
                why = obj.get(f"{k}_undefined")
                assert isinstance(why, str) and why, f"{path}.{k} is null without a reason"
            _nulls_have_reasons(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _nulls_have_reasons(v, f"{path}[{i}]")


@pytest.mark.parametrize("log", ["mce", "small", "constant", "no_click"])
def test_report_outputs_are_strict_json_and_csv(reports, log):
    """A constant score column (a baseline model) wrote bare ``NaN`` into report.json (Cox's
    test) and ``nan`` into tests.csv. Now: strict JSON (no NaN/Infinity token), every null
    number of the numeric sections with a ``<name>_undefined`` reason, and no ``nan``/``inf``
    CSV cell, an empty cell's reason in the row's ``undefined`` column."""
    _, out = reports[log]
    rep = _strict_json((out / "report.json").read_text())
    for section in ("metrics", "fields", "decompositions", "reliability", "tests", "bounds"):
        _nulls_have_reasons(rep[section], section)
    assert "nulls" in rep
    for path in out.glob("*.csv"):
        with path.open() as fh:
            rows = list(csv.reader(fh))
        assert rows[0][-1] == "undefined", path.name
        for row in rows[1:]:
            for i, cell in enumerate(row[:-1]):
                assert cell.strip().lower() not in ("nan", "inf", "-inf", "infinity", "-infinity"), (path.name, row)
                if cell == "" and rows[0][i] in ("value", "lo", "hi", "statistic", "p_value"):
                    assert rows[0][i] in row[-1], (path.name, row)


def test_constant_score_tests_are_undefined_or_right(reports):
    """On a constant score Cox's slope is not identifiable: the test is reported undefined
    with that reason (not NaN). CORP's test read the rounding difference between the two
    label cells' mean scores as resolution (MCB 0.088, p = 0.002 for a calibrated constant
    model); its cells now share their bin's score: MCB = (rate - 0.1)^2, not rejected."""
    rep, out = reports["constant"]
    tests = {t["test"]: t for t in rep["tests"]}
    cox = tests["cox"]
    assert cox["statistic"] is None and cox["p_value"] is None
    assert "not identifiable" in cox["p_value_undefined"]
    rate = next(e for e in rep["metrics"] if e["name"] == "ctr")["value"]
    assert tests["corp"]["statistic"] == pytest.approx((rate - 0.1) ** 2, abs=1e-9)
    assert tests["corp"]["p_value"] > 0.05
    text = (out / "tests.csv").read_text()
    assert "nan" not in text.lower().replace("not identifiable", "")


def test_library_cox_refuses_a_single_score():
    """The library's Cox fit on one score value returned an arbitrary intercept and slope
    (converged, the slope unidentifiable): ``ValueError`` eagerly, NaN under ``jit``."""
    y = (np.arange(300) % 7 == 0).astype(np.float32)
    p = np.full(300, 0.15, np.float32)
    with pytest.raises(ValueError, match="`probs` take a single value"):
        cj.inference.cox_calibration(p, y)
    out = jax.jit(lambda q: cj.inference.cox_calibration(q, y))(p)
    assert all(np.isnan(float(x)) for x in (out.intercept, out.slope, out.statistic, out.p_value))
    w = np.r_[np.ones(299), 0.0].astype(np.float32)  # a zero-weight row does not make it identifiable
    with pytest.raises(ValueError, match="single value"):
        cj.inference.cox_calibration(np.r_[p[:-1], 0.9].astype(np.float32), y, weights=w)


def test_strict_writers_refuse_non_finite_numbers(tmp_path):
    """``write_json(..., allow_nan=False)`` (the report's) and ``write_csv(..., allow_nan=False)``
    raise on a NaN or infinity and leave no file; the defaults keep Python's tokens."""
    with pytest.raises(ValueError):
        cio.write_json(tmp_path / "a.json", {"x": [1.0, float("nan")]}, allow_nan=False)
    with pytest.raises(ValueError, match="column 'p'"):
        cio.write_csv(tmp_path / "a.csv", ["name", "p"], [["cox", float("inf")]], allow_nan=False)
    assert not list(tmp_path.iterdir())
    assert "NaN" in cio.write_json(tmp_path / "b.json", {"x": float("nan")}).read_text()


# ---------------------------------------------------------------------------- file permissions
@pytest.fixture
def umask():
    """Set the process umask for one test, restored afterwards."""
    saved = os.umask(0o022)
    os.umask(saved)
    yield lambda mask: os.umask(mask)
    os.umask(saved)


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_atomic_writes_get_the_permissions_of_a_created_file(tmp_path, umask, mask):
    """``tempfile.mkstemp`` creates 0600 files, and the atomic writes kept that mode: a report
    the group could not read under umask 022. Now ``0666 & ~umask`` (0644 under 022, 0600
    under 077), as ``open(path, "w")`` gives, for every writer; a replaced file keeps its
    mode, as it does with ``open``."""
    umask(mask)
    want = 0o666 & ~mask
    reference = tmp_path / "plain.txt"
    reference.write_text("x")
    assert stat.S_IMODE(reference.stat().st_mode) == want
    paths = [cio.atomic_write_bytes(tmp_path / "a.bin", b"x"), cio.atomic_write_text(tmp_path / "b.txt", "x"),
             cio.write_json(tmp_path / "c.json", {"a": 1}), cio.write_csv(tmp_path / "d.csv", ["a"], [[1]])]
    with cio.atomic_output(tmp_path / "e.npz") as tmp, open(tmp, "wb") as fh:
        np.savez(fh, a=np.arange(3))
    paths.append(tmp_path / "e.npz")
    for p in paths:
        assert stat.S_IMODE(p.stat().st_mode) == want, (p.name, oct(stat.S_IMODE(p.stat().st_mode)))
    os.chmod(paths[0], 0o640)
    cio.atomic_write_bytes(paths[0], b"y")
    assert stat.S_IMODE(paths[0].stat().st_mode) == 0o640 and paths[0].read_bytes() == b"y"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin", "b.txt", "c.json", "d.csv", "e.npz", "plain.txt"]


@pytest.mark.parametrize("mask", [0o022, 0o077])
def test_report_files_get_the_permissions_of_a_created_file(tmp_path, umask, mask):
    """Every file of ``calib-jax evaluate --out`` was 0600 under umask 022."""
    rng = np.random.default_rng(5)
    p = rng.uniform(0.02, 0.3, 300)
    log = _write_log(tmp_path / "log.csv", p, (rng.random(300) < p).astype(int))
    umask(mask)
    _evaluate(log, tmp_path / "out", boot=0)
    files = list((tmp_path / "out").iterdir())
    assert any(f.name == "report.json" for f in files)
    for f in files:
        assert stat.S_IMODE(f.stat().st_mode) == 0o666 & ~mask, f.name


def test_ranges_cover_every_reported_name():
    """Each metric of the report's panel, field metric, level column and decomposition term
    has a declared range (a quantity without one would escape the clipping)."""
    from calib_jax.logs import report

    names = set(report._ORDER) | {"gce", "field_ece", "field_rce", "abs_bias", "mean_p", "ctr", "bias",
                                  "calibration_ratio", "ne", "gap", "brier", "unc", "rel", "res", "delta",
                                  "residual", "mcb", "dsc", "spiegelhalter_z", "hosmer_lemeshow", "cox", "corp"}
    assert names <= set(RANGES)
    for low, high in RANGES.values():
        assert low < high and not (math.isinf(low) and low > 0) and not (math.isinf(high) and high < 0)
