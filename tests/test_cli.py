"""End-to-end tests of the ``calib-jax`` command (calib_jax.cli), in-process via main(argv)."""

from __future__ import annotations

import base64
import csv
import json
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import jax
import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
import pyarrow.parquet as pq  # noqa: E402

import calib_jax.metrics as M  # noqa: E402
from calib_jax import calibrators  # noqa: E402
from calib_jax.bootstrap import bootstrap  # noqa: E402
from calib_jax.cli import main  # noqa: E402
from calib_jax.logs.accumulate import Accumulator, Chunk, Settings  # noqa: E402
from calib_jax.logs.panel import compute_panel  # noqa: E402

N = 400


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    o = rng.normal(-2.0, 1.0, N)
    pi = 1 / (1 + np.exp(-o))
    y = (rng.random(N) < pi).astype(np.int64)
    site = rng.integers(0, 4, N)
    logit = o + 0.4 * (site - 1.5)  # field-wise miscalibration
    p = 1 / (1 + np.exp(-logit))
    w = rng.uniform(0.5, 2.0, N)
    return {"p": p, "y": y, "site": np.array([f"s{k}" for k in site]), "pi": pi, "logit": logit, "w": w}


def _write_csv(path: Path, data, delim=",", n=None):
    n = N if n is None else n
    with open(path, "w", newline="") as fh:
        wr = csv.writer(fh, delimiter=delim)
        wr.writerow(["pctr", "click", "site", "pi", "logit", "w"])
        for i in range(n):
            wr.writerow([repr(float(data["p"][i])), int(data["y"][i]), data["site"][i], repr(float(data["pi"][i])),
                         repr(float(data["logit"][i])), repr(float(data["w"][i]))])
    return path


@pytest.fixture(scope="module")
def log_csv(tmp_path_factory, data):
    return _write_csv(tmp_path_factory.mktemp("logs") / "log.csv", data)


def _eval(tmp_path, log, *extra, name="rep", boot="0"):
    out = tmp_path / name
    rc = main(["evaluate", str(log), "--out", str(out), "--bootstrap", boot, "--quiet", *extra])
    assert rc == 0
    return json.loads((out / "report.json").read_text()), out


def _m(rep):
    """The plug-in value of every metric (biased metrics also carry a bias-corrected value)."""
    return {e["name"]: e["value"] if e.get("plug_in") is None else e["plug_in"] for e in rep["metrics"]}


# ---------------------------------------------------------------------------- evaluate
def test_evaluate_equals_in_memory_library(tmp_path, log_csv, data):
    rep, out = _eval(tmp_path, log_csv, "--score", "pctr", "--label", "click", "--field", "site", "--oracle", "pi",
                     "--chunk-rows", "64")
    m = _m(rep)
    p, y = data["p"].astype(np.float32), data["y"].astype(np.float32)
    codes = np.unique(data["site"], return_inverse=True)[1]
    exact = {"ece": M.ece(p, y), "mce": M.ece(p, y, norm="max"), "brier": M.brier(p, y), "nll": M.nll(p, y),
             "bias": M.bias(p, y), "gce:site": M.gce(p, y, codes, n_groups=4),
             "field_ece:site": M.field_ece(p, y, codes), "field_rce:site": M.field_rce(p, y, codes),
             "abs_bias:site": M.abs_bias(p, y, codes), "oracle_brier": M.oracle_brier(p, data["pi"]),
             "oracle_mae": M.oracle_mae(p, data["pi"]), "oracle_kl": M.oracle_kl(p, data["pi"]),
             "oracle_chebyshev": M.oracle_chebyshev(p, data["pi"]), "oracle_pearson": M.pearson(p, data["pi"])}
    for k, v in exact.items():
        np.testing.assert_allclose(m[k], float(v), rtol=2e-5, atol=1e-7, err_msg=k)
    # histogram-based numbers: within the stated bound (AUC) or the fine-grid tolerance
    assert abs(m["auc"] - float(M.auc(p, y))) <= rep["bounds"]["auc"] + 1e-6
    np.testing.assert_allclose(m["ece_plus"], float(M.ece(p, y, strategy="quantile")), rtol=0.1)
    o = np.log(p) - np.log1p(-p)
    np.testing.assert_allclose(m["lcce"], float(M.lcce(o, y, init="quantile")), rtol=0.15)
    for d in rep["decompositions"].values():
        if "residual" in d:
            assert abs(d["residual"]["value"]) < 1e-12
    assert {"brier_bins", "brier_clusters", "murphy_fine", "corp", "brier_field:site"} <= set(rep["decompositions"])
    # the practitioner's panel and the tests, against the library on the rows
    np.testing.assert_allclose(m["ne"], float(M.normalized_entropy(p, y)), rtol=1e-4)
    np.testing.assert_allclose(m["calibration_ratio"], float(M.calibration_ratio(p, y)), rtol=1e-5)
    levels = np.unique(data["site"])
    ne_lv = M.normalized_entropy_by_group(p, y, codes, n_groups=len(levels))
    cr_lv = M.calibration_ratio_by_group(p, y, codes, n_groups=len(levels))
    for r in rep["fields"]["site"]["levels"]:
        j = int(np.flatnonzero(levels.astype(str) == r["value"])[0])
        np.testing.assert_allclose(r["ne"], float(ne_lv.value[j]), rtol=1e-4)
        np.testing.assert_allclose(r["calibration_ratio"], float(cr_lv.value[j]), rtol=1e-5)
    tests = {t["test"]: t for t in rep["tests"]}
    from calib_jax import inference as T

    np.testing.assert_allclose(tests["spiegelhalter_z"]["statistic"], float(T.spiegelhalter_z(p, y).z), atol=2e-3)
    np.testing.assert_allclose(tests["cox"]["p_value"], float(T.cox_calibration(p, y).p_value), atol=2e-3)
    assert tests["hosmer_lemeshow"]["df"] == 10
    from calib_jax.decompositions import corp

    np.testing.assert_allclose(tests["corp"]["statistic"], float(corp(p, y).mcb), rtol=0.05, atol=2e-5)
    assert 0 < tests["corp"]["p_value"] <= 1
    # bias-corrected ECE: the debiased gap of the log's 15 equal-width bins
    from calib_jax.bootstrap import debiased_gap

    b = np.minimum((p * 15).astype(int), 14)
    w, sp, sy = (np.bincount(b, x, 15) for x in (np.ones_like(p), p, y))
    e = next(e for e in rep["metrics"] if e["name"] == "ece")
    assert e["plug_in"] is not None and e["method"] is None  # no bootstrap: no interval
    np.testing.assert_allclose(e["value"], max(float(debiased_gap(w, sp, sy, "l1")), 0.0), rtol=1e-4, atol=1e-7)
    for f in ("metrics.csv", "metrics.md", "fields.csv", "decompositions.md", "reliability.png", "report.html",
              "report.md"):
        assert (out / f).exists(), f
    assert rep["provenance"]["git_commit"] and rep["input"]["rows_used"] == N
    assert not (out / ".checkpoint.npz").exists()


def _chunks(data, sizes, fields=("site",)):
    start = 0
    for n in sizes:
        sl = slice(start, start + n)
        p = data["p"][sl]
        yield Chunk(p=p, o=np.log(p) - np.log1p(-p), y=data["y"][sl].astype(float), v=data["w"][sl],
                    keep=np.ones(n, bool), fields={"site": pa.array(data["site"][sl])}, oracle=data["pi"][sl])
        start += n


def test_streaming_is_chunk_invariant_mergeable_and_equals_in_memory_bootstrap(data):
    s = Settings(fields=("site",), oracle=True, n_boot=4, seed=3)
    whole = Accumulator(s)
    for ch in _chunks(data, [N]):
        whole.update(ch)
    parts = Accumulator(s)
    for ch in _chunks(data, [N // 4] * 4):
        parts.update(ch)
    a, b = Accumulator(s), Accumulator(s, row_offset=N // 4)
    gen = _chunks(data, [N // 4, N - N // 4])
    a.update(next(gen))
    b.update(next(gen))
    merged = a.merge(b)
    for other in (parts, merged):
        for t in ("scal", "rel", "hist"):
            np.testing.assert_allclose(getattr(other, t), getattr(whole, t), rtol=1e-12, atol=1e-12)
        pw, po = compute_panel(whole)["metrics"], compute_panel(other)["metrics"]
        for k in pw:
            np.testing.assert_allclose(po[k], pw[k], rtol=1e-10, atol=1e-13, err_msg=k)
    # replicates 1..B are the in-memory Poisson bootstrap of calib_jax.bootstrap
    ref = bootstrap(M.ece, np.float32(data["p"]), np.float32(data["y"]), key=jax.random.key(3), n_boot=4,
                    scheme="poisson", weights=np.float32(data["w"]))
    ece = compute_panel(whole)["metrics"]["ece"]
    np.testing.assert_allclose(ece[1:], ref.replicates, rtol=1e-4)
    np.testing.assert_allclose(ece[0], ref.estimate, rtol=1e-5)


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.imgs, self.values, self.links, self._metric = [], {}, [], None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.imgs.append(a["src"])
        if tag in ("script", "link") or (tag == "a" and "href" in a):
            self.links.append(tag)
        if tag == "tr":
            self._metric = a.get("data-metric")
        if tag == "td" and self._metric and "data-value" in a:
            self.values.setdefault(self._metric, []).append(float(a["data-value"]))


def _big_data(n, seed=11):
    rng = np.random.default_rng(seed)
    site = rng.integers(0, 6, n)
    o = rng.normal(-2.0, 1.0, n) + 0.3 * (site - 2.5)
    y = (rng.random(n) < 1 / (1 + np.exp(-o))).astype(float)
    p = 1 / (1 + np.exp(-(o + 0.2)))
    return {"p": p, "y": y, "site": np.array([f"s{k}" for k in site]), "pi": 1 / (1 + np.exp(-o)),
            "w": np.ones(n)}


def _stream(settings, d, sizes, offset=0):
    acc = Accumulator(settings, row_offset=offset)
    for ch in _chunks(d, sizes):
        acc.update(ch)
    return acc


def test_cell_bootstrap_log_equals_rows_and_is_chunk_invariant_mergeable_resumable(data):
    cells = Settings(fields=("site",), oracle=True, n_boot=6, seed=3, scheme="cells")
    rows = Settings(fields=("site",), oracle=True, n_boot=6, seed=3)
    ref = _stream(rows, data, [N])
    whole = _stream(cells, data, [N]).replicated()
    assert whole.R == 7
    for t in ("scal", "rel", "hist", "oracle_max"):  # replicate 0 is the log itself in both schemes
        np.testing.assert_allclose(getattr(whole, t)[0], getattr(ref, t)[0], rtol=1e-12, atol=1e-12, err_msg=t)
    np.testing.assert_allclose(whole.fld["site"][0, :24], ref.fld["site"][0, :24], rtol=1e-12, atol=1e-12)
    a, b = _stream(cells, data, [N // 3]), _stream(cells, {k: v[N // 3:] for k, v in data.items()}, [N - N // 3],
                                                    offset=N // 3)
    restored, _ = Accumulator.from_bytes(_stream(cells, data, [N // 4] * 4).to_bytes({}))
    for other in (_stream(cells, data, [N // 4] * 4), a.merge(b), restored):
        got = other.replicated()
        for t in ("scal", "rel", "hist", "oracle_max"):  # same draws: they depend on the cells only
            np.testing.assert_allclose(getattr(got, t), getattr(whole, t), rtol=1e-12, atol=1e-12, err_msg=t)
        np.testing.assert_allclose(got.fld["site"], whole.fld["site"], rtol=1e-12, atol=1e-12)


@pytest.mark.slow  # 20 s; a statistical check of the cell bootstrap
def test_cell_bootstrap_spread_matches_the_row_bootstrap():
    """Same log, B = 1000 each: the replicate standard deviation of every headline metric under
    the cell scheme is within 15 % of the exact Poisson row bootstrap (the ratio of two
    1000-draw estimates has a 3 % sampling error), and the replicate weight totals are
    Poisson(n)."""
    n = 20_000
    d = _big_data(n)
    opts = {"fields": ("site",), "oracle": True, "n_boot": 1000, "hist_bins": 1024}  # 1001 x 1024-bin tables
    cells = _stream(Settings(**opts, seed=1, scheme="cells"), d, [n]).replicated()
    rows = _stream(Settings(**opts, seed=2), d, [8000, 12000])
    pc, pr = compute_panel(cells)["metrics"], compute_panel(rows)["metrics"]
    for k in ("ece", "ece_plus", "brier", "nll", "auc", "lcce", "bias", "oracle_brier", "gce:site", "field_rce:site"):
        np.testing.assert_allclose(pc[k][0], pr[k][0], rtol=1e-9, err_msg=k)
        ratio = np.std(pc[k][1:]) / np.std(pr[k][1:])
        assert 0.85 < ratio < 1.15, (k, ratio)
    # Chebyshev, a maximum: the same order statistics bound its interval in both schemes
    for q in (0.025, 0.5, 0.975):
        np.testing.assert_allclose(np.quantile(pc["oracle_chebyshev"][1:], q),
                                   np.quantile(pr["oracle_chebyshev"][1:], q), rtol=0.01, err_msg=q)
    total = cells.scal[1:, 0]  # unit weights: the total count of a replicate is Poisson(n)
    assert abs(total.mean() - n) < 4 * np.sqrt(n / 1000) and 0.85 < total.var() / n < 1.15


def test_cell_bootstrap_refuses_blocks():
    with pytest.raises(ValueError, match="block"):
        Settings(n_boot=10, block=8, scheme="cells")
    with pytest.raises(ValueError, match="scheme"):
        Settings(scheme="bags")


def test_html_report_self_contained_with_json_numbers(tmp_path, log_csv):
    rep, out = _eval(tmp_path, log_csv, "--score", "pctr", "--label", "click", "--field", "site", "--weight", "w",
                     boot="4")
    parser = _Collect()
    parser.feed((out / "report.html").read_text())
    assert parser.links == []  # no scripts, stylesheets or links: nothing fetched
    assert len(parser.imgs) == 1 and parser.imgs[0].startswith("data:image/png;base64,")
    assert base64.b64decode(parser.imgs[0].split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    for e in rep["metrics"]:
        got = parser.values[e["name"]]
        assert got[0] == e["value"], e["name"]
        if e["lo"] is not None:
            assert got[1:3] == [e["lo"], e["hi"]]
        if e.get("plug_in") is not None:
            assert got[3] == e["plug_in"]
    assert rep["metrics"][0]["lo"] is not None and rep["verdict"]


@pytest.mark.parametrize("scheme", ["cells", "rows"])
def test_parts_evaluated_separately_merge_to_the_whole(tmp_path, data, log_csv, scheme):
    """Two workers each evaluate half of the log (`--state-only`); `merge` reports the whole,
    intervals included (the rows scheme needs each part's --row-offset)."""
    half = N // 2
    parts = [_write_csv(tmp_path / "a.csv", data, n=half),
             _write_csv(tmp_path / "b.csv", {k: v[half:] for k, v in data.items()}, n=N - half)]
    args = ["--score", "pctr", "--label", "click", "--field", "site", "--oracle", "pi", "--bootstrap", "6",
            "--bootstrap-scheme", scheme, "--quiet", "--chunk-rows", "77"]
    whole, _ = _eval(tmp_path, log_csv, "--score", "pctr", "--label", "click", "--field", "site", "--oracle", "pi",
                     "--bootstrap-scheme", scheme, "--chunk-rows", "77", boot="6")
    for i, (part, offset) in enumerate(zip(parts, (0, half))):
        assert main(["evaluate", str(part), "--out", str(tmp_path / f"w{i}"), "--state-only",
                     "--row-offset", str(offset), *args]) == 0
        assert (tmp_path / f"w{i}" / "state.npz").exists() and not (tmp_path / f"w{i}" / "report.json").exists()
    assert main(["merge", str(tmp_path / "w0"), str(tmp_path / "w1" / "state.npz"), "--out", str(tmp_path / "m")]) == 0
    merged = json.loads((tmp_path / "m" / "report.json").read_text())
    assert merged["input"]["rows_read"] == N and merged["input"]["parts"] == 2
    for a, b in zip(merged["metrics"], whole["metrics"], strict=True):
        assert a["name"] == b["name"]
        for k in ("value", "lo", "hi"):
            if b[k] is None:
                assert a[k] is None, a["name"]
            else:
                np.testing.assert_allclose(a[k], b[k], rtol=1e-9, atol=1e-12, err_msg=a["name"])
    if scheme == "rows":  # both parts claiming rows 0.. would reuse one row's counts for two rows
        assert main(["evaluate", str(parts[1]), "--out", str(tmp_path / "w1"), "--state-only", *args]) == 0
        assert main(["merge", str(tmp_path / "w0"), str(tmp_path / "w1"), "--out", str(tmp_path / "m2")]) == 2


def test_merge_refuses_states_of_other_settings_and_non_states(tmp_path, log_csv, capsys):
    base = ["--score", "pctr", "--label", "click", "--state-only", "--quiet"]
    assert main(["evaluate", str(log_csv), "--out", str(tmp_path / "a"), "--bootstrap", "4", *base]) == 0
    assert main(["evaluate", str(log_csv), "--out", str(tmp_path / "b"), "--bootstrap", "6", *base]) == 0
    assert main(["merge", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "m")]) == 2
    assert "settings differ" in capsys.readouterr().err
    assert main(["merge", str(log_csv), "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err  # a log passed as a state: said so, not NumPy's advice to unpickle it
    assert "not a calib-jax state file" in err and "a text file (a CSV?)" in err and "pickle" not in err, err
    assert main(["merge", str(tmp_path / "nowhere"), "--out", str(tmp_path / "m")]) == 2


def _chromium() -> str | None:
    return next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome", "chrome")
                 if shutil.which(b)), None)


@pytest.mark.skipif(_chromium() is None, reason="no headless Chromium installed")
def test_html_report_renders_in_headless_chromium(tmp_path, log_csv):
    _, out = _eval(tmp_path, log_csv, "--score", "pctr", "--label", "click", "--field", "site", boot="4")
    shot = tmp_path / "report.png"
    r = subprocess.run([_chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--enable-logging=stderr", "--v=0", f"--screenshot={shot}", "--window-size=1100,2400",
                        (out / "report.html").resolve().as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    # no failed loads (the report must not fetch anything) and no script errors
    bad = [ln for ln in r.stderr.splitlines() if "net::ERR" in ln or "Uncaught" in ln or "Failed to load" in ln]
    assert bad == [], bad
    from PIL import Image

    img = np.asarray(Image.open(shot).convert("L"), dtype=np.float64)
    assert img.shape == (2400, 1100)
    assert img.std() > 10  # text and the embedded diagram drew something, not a blank page
    # the embedded reliability diagram is a large non-white block below the verdict
    dark_rows = (img < 200).mean(axis=1)
    assert (dark_rows > 0.05).sum() > 100


def test_resume_after_interruption_gives_same_report(tmp_path, log_csv):
    args = ["--score", "pctr", "--label", "click", "--field", "site", "--chunk-rows", "100", "--engine", "arrow"]
    full, _ = _eval(tmp_path, log_csv, *args, name="full", boot="4")
    out = tmp_path / "cut"
    rc = main(["evaluate", str(log_csv), "--out", str(out), "--bootstrap", "4", "--quiet", *args,
               "--stop-after-chunks", "2"])
    assert rc == 3 and (out / ".checkpoint.npz").exists() and not (out / "report.json").exists()
    rc = main(["evaluate", str(log_csv), "--out", str(out), "--bootstrap", "4", "--quiet", *args, "--resume"])
    assert rc == 0
    res = json.loads((out / "report.json").read_text())
    assert res["metrics"] == full["metrics"] and res["fields"] == full["fields"]
    # a checkpoint made with other settings is refused
    main(["evaluate", str(log_csv), "--out", str(out), "--bootstrap", "4", "--quiet", *args, "--stop-after-chunks", "1"])
    assert main(["evaluate", str(log_csv), "--out", str(out), "--bootstrap", "6", "--quiet", *args, "--resume"]) == 2


# ---------------------------------------------------------------------------- fit / apply
@pytest.mark.filterwarnings("ignore::calib_jax.calibrators.CalibrationFallbackWarning")
@pytest.mark.parametrize("method", ["temperature", "platt", "beta", "histogram_binning", "isotonic", "ilps",
                                    pytest.param("sag_ts", marks=pytest.mark.slow)])  # SAG: ~16 s of compiling
def test_fit_save_apply_equals_fit_predict(tmp_path, log_csv, data, method):
    extra = ["--field", "site", "--partitions", "2", "--steps", "30"] if method == "sag_ts" else []
    save = tmp_path / "params.json"
    assert main(["fit", str(log_csv), "--logit", "logit", "--label", "click", "--method", method, "--save", str(save),
                 "--quiet", *extra]) == 0
    spec = json.loads(save.read_text())
    assert spec["format_version"] == 1 and spec["method"] == method
    out = tmp_path / "scored.parquet"
    assert main(["apply", str(save), str(log_csv), "--out", str(out), "--quiet"]) == 0
    t = pq.read_table(out)
    assert t.column_names == ["pctr", "click", "site", "pi", "logit", "w", "calibrated"]
    cal = calibrators.get(spec["registry_name"])
    o, y = np.float32(data["logit"]), np.float32(data["y"])
    ctx = None
    if method == "sag_ts":
        vocab = spec["inputs"]["vocabularies"]["site"]
        z = np.zeros((N, len(vocab)), np.float32)
        z[np.arange(N), [vocab.index(s) for s in data["site"]]] = 1
        ctx = {"embedding": z}
    hyper = {"n_partitions": 2, "n_steps": 30} if method == "sag_ts" else {}
    params = cal.fit(o, y, key=jax.random.key(0), context=ctx, **hyper)
    np.testing.assert_array_equal(t.column("calibrated").to_numpy(), np.asarray(cal.predict(params, o, context=ctx)))


@pytest.mark.filterwarnings("ignore::calib_jax.calibrators.CalibrationFallbackWarning")
@pytest.mark.parametrize("method", ["neural_calibration", "vrsag_ps"])
def test_trained_methods_fit_save_apply_equal_the_library(tmp_path, log_csv, data, method):
    """The trained methods through the command (fit -> save -> apply) equal the library call on
    the inputs the command builds: Neural Calibration on field codes, VR-SAG+PS on one-hot
    levels plus a standardised numeric feature, every row (full batch)."""
    extra = (["--field", "site", "--steps", "20"] if method == "neural_calibration" else
             ["--field", "site", "--feature", "pi", "--partitions", "2", "--steps", "15"])
    save = tmp_path / "params.json"
    assert main(["fit", str(log_csv), "--logit", "logit", "--label", "click", "--method", method, "--save", str(save),
                 "--quiet", *extra]) == 0
    spec = json.loads(save.read_text())
    out = tmp_path / "scored.csv"
    assert main(["apply", str(save), str(log_csv), "--out", str(out), "--quiet"]) == 0
    got = np.asarray([float(r.split(",")[-1]) for r in out.read_text().splitlines()[1:]])
    vocab = spec["inputs"]["vocabularies"]["site"]
    codes = np.array([vocab.index(s) for s in data["site"]])
    o, y = np.float32(data["logit"]), np.float32(data["y"])
    cal = calibrators.get(spec["registry_name"])
    if method == "neural_calibration":
        ctx = {"fields": codes[:, None].astype(np.int32)}
        params = cal.fit(o, y, key=jax.random.key(0), context=ctx, n_steps=20)
    else:
        z = np.zeros((N, len(vocab) + 1), np.float32)
        z[np.arange(N), codes] = 1
        pi = np.asarray(data["pi"], np.float64)
        z[:, -1] = (pi - pi.mean()) / pi.std()
        ctx = {"embedding": z}
        params = cal.fit(o, y, key=jax.random.key(0), context=ctx, n_partitions=2, n_steps=15)
    # the CSV writer keeps float32 digits; the fit sees the CSV's text, the library float64
    np.testing.assert_allclose(got, np.asarray(cal.predict(params, o, context=ctx)), rtol=2e-5, atol=1e-7)
    # a tampered MLP entry is refused by name, not applied
    bad = json.loads(save.read_text())
    if method == "neural_calibration":
        key = next(k for k in bad["params"] if k.startswith("mlp/"))
        bad["params"][key]["shape"] = [1]
        save.write_text(json.dumps(bad))
        assert main(["apply", str(save), str(log_csv), "--out", str(tmp_path / "x.csv"), "--quiet"]) == 2


@pytest.mark.filterwarnings("ignore::calib_jax.calibrators.CalibrationFallbackWarning")
def test_fit_names_missing_or_non_finite_feature_columns(tmp_path, log_csv, data, capsys):
    args = ["fit", str(log_csv), "--logit", "logit", "--label", "click", "--method", "vrsag_ts", "--quiet",
            "--save", str(tmp_path / "p.json"), "--steps", "2", "--partitions", "1"]
    assert main([*args, "--feature", "nope"]) == 2
    assert "nope" in capsys.readouterr().err
    bad = dict(data)
    bad["pi"] = np.where(np.arange(N) == 5, np.inf, data["pi"])
    log = _write_csv(tmp_path / "inf.csv", bad)
    args[1] = str(log)
    assert main([*args, "--feature", "pi"]) == 2
    err = capsys.readouterr().err
    assert "pi" in err and ("finite" in err or "inf" in err), err
    args[1] = str(log_csv)
    assert main([*args[:7], "neural_calibration", *args[8:], "--feature", "pi", "--field", "site"]) == 2
    assert "--field" in capsys.readouterr().err
    # apply names the file, the column and the row alike (before 2026-12-06 it said only
    # "`context['embedding']` contains 1 NaN/inf value(s)")
    assert main([*args, "--feature", "pi"]) == 0
    capsys.readouterr()
    assert main(["apply", str(tmp_path / "p.json"), str(log), "--out", str(tmp_path / "o.csv"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{log}: column 'pi': 1 row missing or not finite (first at data row 6)" in err, err
    assert not (tmp_path / "o.csv").exists()


def test_apply_refuses_unknown_parameter_file(tmp_path, log_csv, capsys):
    bad = tmp_path / "p.json"
    bad.write_text(json.dumps({"format": "calib-jax-calibrator", "format_version": 99}))
    assert main(["apply", str(bad), str(log_csv), "--out", str(tmp_path / "o.csv")]) == 2
    assert "format version 99" in capsys.readouterr().err


# ---------------------------------------------------------------------------- bad input
def _bad(tmp_path, rows, header="pctr,click,site"):
    path = tmp_path / "bad.csv"
    path.write_text(header + "\n" + "".join(r + "\n" for r in rows) if header is not None else "")
    return path


@pytest.mark.parametrize("rows,needles", [
    (["0.1,0,a", "1.5,1,b", "-0.2,0,a"], ["'pctr'", "2 rows outside [0, 1]", "first at data row 2"]),
    (["0.1,0,a", "nan,1,b", ",0,a"], ["'pctr'", "2 rows missing or NaN"]),
    (["0.1,2,a", "0.2,1,b", "0.3,-1,a"], ["'click'", "2 rows not in {0, 1}", "2 of 3 rows invalid"]),
])
def test_bad_values_name_file_column_and_count(tmp_path, capsys, rows, needles):
    path = _bad(tmp_path, rows)
    assert main(["evaluate", str(path), "--score", "pctr", "--label", "click", "--out", str(tmp_path / "o"),
                 "--bootstrap", "0", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "--drop-invalid" in err
    for s in needles:
        assert s in err


def test_drop_invalid_drops_and_reports(tmp_path, capsys):
    rows = ["0.1,0,a", "1.5,1,b", "0.2,1,a", "nan,0,b", "0.3,0,b", "0.4,1,a"]
    path = _bad(tmp_path, rows)
    rep, _ = _eval(tmp_path, path, "--score", "pctr", "--label", "click", "--drop-invalid")
    assert rep["input"]["rows_read"] == 6 and rep["input"]["rows_used"] == 4 and rep["input"]["rows_dropped"] == 2
    assert rep["input"]["dropped"] == {"pctr: outside [0, 1]": 1, "pctr: missing or NaN": 1}
    assert "dropped 2 invalid rows" in capsys.readouterr().err


@pytest.mark.parametrize("kind,needles", [
    ("missing_column", ["column 'score' not found", "pctr"]),
    ("header_only", ["no data rows"]),
    ("empty_file", ["empty file"]),
    ("parquet_flag_on_csv", ["not a Parquet file"]),
    ("criteo_short_rows", ["not in the Criteo layout", "found 1"]),
    ("unknown_suffix", ["cannot tell the format"]),
    ("missing_file", ["no such file"]),
])
def test_bad_files_give_one_clear_message(tmp_path, capsys, kind, needles):
    path = _bad(tmp_path, ["0.1,0,a", "0.2,1,b"])
    score, fmt = "pctr", "auto"
    if kind == "missing_column":
        score = "score"
    elif kind == "header_only":
        path = _bad(tmp_path, [])
    elif kind == "empty_file":
        path = _bad(tmp_path, [], header=None)
    elif kind == "parquet_flag_on_csv":
        fmt = "parquet"
    elif kind == "criteo_short_rows":
        fmt = "criteo"
    elif kind == "unknown_suffix":
        path = path.rename(tmp_path / "bad.dat")
    elif kind == "missing_file":
        path = tmp_path / "nope.csv"
    rc = main(["evaluate", str(path), "--score", score, "--label", "click", "--format", fmt, "--out",
               str(tmp_path / "o"), "--bootstrap", "0", "--quiet"])
    assert rc == 2
    err = capsys.readouterr().err
    assert str(path) in err
    for s in needles:
        assert s in err


# ---------------------------------------------------------------------------- studies / smoke
def test_studies_points_to_the_research_packages_command(capsys):
    """``calib-jax studies`` names the studies' own command (the library does not import
    ``experiments``); that command lists them."""
    assert main(["studies"]) == 0
    assert "calib-jax-studies list" in capsys.readouterr().out
    r = subprocess.run([sys.executable, "-m", "experiments", "list"], capture_output=True, text=True, timeout=120,
                       cwd=Path(__file__).resolve().parents[1])
    assert r.returncode == 0 and "metrics_demo" in r.stdout and "python -m experiments run" in r.stdout


def test_python_m_calib_jax_smoke_subprocess():
    r = subprocess.run([sys.executable, "-m", "calib_jax", "studies"], capture_output=True, text=True, timeout=120,
                       cwd=Path(__file__).resolve().parents[1])
    assert r.returncode == 0 and "calib-jax-studies" in r.stdout and "seeds/" not in r.stdout


def test_simulate_writes_a_log_that_evaluate_reads(tmp_path):
    """``calib-jax simulate`` writes the simulator's log (label, production pCTR, true CTR,
    fields); ``evaluate --oracle`` reads it back with oracle metrics."""
    log = tmp_path / "sim.parquet"
    assert main(["simulate", "--out", str(log)]) == 0
    t = pq.read_table(log).to_pandas()
    assert {"click", "pctr", "oracle_ctr", "media", "regime"} <= set(t.columns)
    assert set(np.unique(t["click"])) <= {0, 1} and t["pctr"].between(0, 1).all()
    # the true CTR is the click probability: its mean matches the click rate within noise
    se = np.sqrt(t["oracle_ctr"].mean() / len(t))
    assert abs(t["click"].mean() - t["oracle_ctr"].mean()) < 4 * se
    out = tmp_path / "rep"
    assert main(["evaluate", str(log), "--score", "pctr", "--label", "click", "--oracle", "oracle_ctr",
                 "--field", "media", "--bootstrap", "0", "--out", str(out), "--quiet"]) == 0
    rep = json.loads((out / "report.json").read_text())
    assert "oracle_brier" in json.dumps(rep)


def test_report_intervals_contain_their_estimates_and_bands_are_exact(tmp_path, log_csv):
    """Issue 32: every reported interval contains its reported value (the bias-corrected
    value for the biased metrics, with the plug-in beside it) and names its method; the
    reliability bands are Clopper-Pearson on each bin's clicks and impressions."""
    rep, out = _eval(tmp_path, log_csv, "--score", "pctr", "--label", "click", "--field", "site", boot="100")
    entries = list(rep["metrics"]) + [e for t in rep["fields"].values() for e in t["metrics"].values()]
    for e in entries:
        if e["lo"] is not None and e["value"] is not None:
            assert e["lo"] <= e["value"] <= e["hi"], e
            assert e["method"] in rep["interval_methods"], e
    by = {e["name"]: e for e in rep["metrics"]}
    assert by["ece"]["method"] == "bias-corrected" and by["ece"]["plug_in"] >= by["ece"]["value"]
    assert by["brier"]["method"] == "percentile"
    from calib_jax.inference import binomial_interval

    for r in rep["reliability"]:
        band = binomial_interval(round(r["ctr"] * r["weight"]), r["weight"])
        assert r["method"] == "clopper-pearson"
        np.testing.assert_allclose([r["ctr_lo"], r["ctr_hi"]], [float(band.lo), float(band.hi)], atol=1e-5)
    assert "## Calibration tests" in (out / "report.md").read_text()


def test_report_corp_test_agrees_with_the_library():
    """The report's CORP test (NumPy draws and PAV on weighted cells) against
    calib_jax.inference.corp_test: the same statistic, p-values within Monte Carlo error."""
    from calib_jax import inference as T
    from calib_jax.logs.cellstats import corp_test_cells

    rng = np.random.default_rng(3)
    n = 1500
    p = rng.uniform(0.02, 0.4, n)
    w = rng.integers(1, 6, n).astype(float)
    for power in (1.0, 1.3):  # calibrated, then over-predicting
        y = rng.binomial(w.astype(int), p ** power) / w  # cell click rates
        y = (y > 0.5).astype(float)  # one label per cell, as the report's cells are
        w_pad = np.r_[w, np.zeros(300)]  # zero-weight cells (the report's fixed-shape padding) add nothing
        mcb, pv = corp_test_cells(np.r_[p, np.full(300, 0.3)], np.r_[y, np.zeros(300)], w_pad, n_resamples=400)
        ref = T.corp_test(p, y, weights=w, key=jax.random.key(0), n_resamples=400)
        assert mcb == pytest.approx(float(ref.mcb), rel=1e-4)
        assert abs(pv - float(ref.p_value)) < 0.08, (power, pv, float(ref.p_value))
