"""Outputs of ``calib-jax evaluate``: Markdown, CSV, JSON, PNG and one self-contained HTML page.

Files written into ``--out`` (every write atomic, through :mod:`calib_jax.io`):

* ``report.json`` — every number with its interval and the interval's method
  (``interval_methods``; biased metrics and every decomposition term bias-corrected with their
  ``plug_in`` beside them), the per-field tables, the decompositions, the reliability bins, the
  calibration tests with p-values (``tests``), the input summary (rows read, used, dropped and
  why) and provenance. Every value and interval end lies in its quantity's range (``ranges``,
  :data:`RANGES`) and every interval contains its value. Strict JSON: a number that is
  undefined on the log (or not computed) is ``null`` with a sibling ``"<name>_undefined"``
  giving the reason (``nulls``, :data:`NULLS`); NaN and Infinity are never written (the file
  is written with ``allow_nan=False``).
* CSV tables: an undefined number is an empty cell, its reason in the row's last column,
  ``undefined``; never ``nan``.
* ``tests.{csv,md}`` — Spiegelhalter's Z, Hosmer–Lemeshow, Cox and CORP.
* ``metrics.{csv,md}``, ``fields.{csv,md}``, ``decompositions.{csv,md}`` — the same numbers.
* ``reliability.png`` — the reliability diagram on equal-mass bins with exact binomial
  (Clopper–Pearson) bands: a bin without a click gets [0, upper], never a zero-width band.
* ``report.html`` — verdict, diagram, metric panel, per-field table, decompositions; the
  figure is embedded as base64, no script and no network access.  Every number cell carries
  its full-precision value in a ``data-value`` attribute (the JSON's value).
"""

from __future__ import annotations

import base64
import html
import io as _io
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from calib_jax import io as cio
from calib_jax._src.host_stats import bias_corrected_interval, binomial_ends
from calib_jax.logs.common import REPORT_TABLES, write_csv
from calib_jax.logs.panel import interval

__all__ = ["build_report", "write_outputs", "summary_text", "report_tables", "verdict", "RANGES", "NULLS",
           "field_metric_entries", "oracle_metric_entries"]

_ORDER = ("ece", "ece_plus", "mce", "lcce", "brier", "nll", "ne", "calibration_ratio", "auc", "gauc", "bias", "mae",
          "ctr",
          "mean_score",
          "oracle_brier", "oracle_mae", "oracle_kl", "oracle_chebyshev", "oracle_pearson")


def _num(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


#: plug-in metrics biased upward without a closed-form correction: bootstrap bias correction
_BOOTSTRAP_CORRECTED = ("mce", "field_rce", "abs_bias")
_INF = math.inf
#: the range of every reported quantity, by name (metric, field metric, level column,
#: decomposition term, calibration test, test column): every value and interval end in the
#: report is clipped to it (a bias-corrected estimate, 2 x plug-in - mean of the
#: replicates, can leave it: MCE's was 1.22 on a 3,000-row log); +-inf: unbounded
RANGES: dict[str, tuple[float, float]] = {
    # metrics
    "ece": (0.0, 1.0), "ece_plus": (0.0, 1.0), "mce": (0.0, 1.0), "lcce": (0.0, 1.0), "brier": (0.0, 1.0),
    "nll": (0.0, _INF), "ne": (0.0, _INF), "calibration_ratio": (0.0, _INF), "auc": (0.0, 1.0),
    "bias": (-1.0, _INF), "mae": (0.0, 1.0), "ctr": (0.0, 1.0), "mean_score": (0.0, 1.0),
    "oracle_brier": (0.0, 1.0), "oracle_mae": (0.0, 1.0), "oracle_kl": (0.0, _INF), "oracle_chebyshev": (0.0, 1.0),
    "oracle_pearson": (-1.0, 1.0), "gauc": (0.0, 1.0),
    # per field, and per field level
    "gce": (0.0, 1.0), "field_ece": (0.0, 1.0), "field_rce": (0.0, _INF), "abs_bias": (0.0, _INF),
    "mean_p": (0.0, 1.0), "gap": (-1.0, 1.0), "weight": (0.0, _INF),
    # decomposition terms (Brier = UNC + REL - RES + delta; CORP: Brier = MCB - DSC + UNC):
    # RES <= UNC <= 1/4, DSC <= UNC, and delta = sum_k w_k (var_k - 2 cov_k) with
    # |cov_k| <= sd_k / 2, sd_k <= 1/2, so delta lies in [-1/4, 3/4]
    "unc": (0.0, 0.25), "rel": (0.0, 1.0), "res": (0.0, 0.25), "delta": (-0.25, 0.75), "residual": (-_INF, _INF),
    "mcb": (0.0, 1.0), "dsc": (0.0, 0.25),
    # calibration tests: each statistic, and the columns of the tests table
    "spiegelhalter_z": (-_INF, _INF), "hosmer_lemeshow": (0.0, _INF), "cox": (0.0, _INF), "corp": (0.0, 1.0),
    "p_value": (0.0, 1.0), "df": (0.0, _INF),
}
#: how each kind of interval is computed (written beside every number in the report)
METHODS = {
    "percentile": "bootstrap percentile interval of the plug-in estimate (nearly unbiased statistics)",
    "bias-corrected": "the gap norm with its plug-in bias removed per group (calib_jax.bootstrap.debiased_gap); "
                      "the percentile interval of its replicates moved by the estimated bias "
                      "(calib_jax.bootstrap.bias_corrected_interval)",
    "bootstrap bias-corrected": "2 x plug-in - mean of the replicates; the percentile interval moved by twice "
                                "the bootstrap bias. Used for MCE, Field-RCE, abs_bias and every decomposition "
                                "term: their plug-ins are biased (fine-bin REL, RES and CORP's MCB and DSC most), "
                                "and the plain percentile interval excluded them. The correction is linear, so "
                                "the corrected terms keep each decomposition's identity (the plug-ins, beside "
                                "them, keep it too) up to the clipping to each term's range",
    "delta method over users": "GAUC +- 1.96 standard errors of a ratio of sums over users, the users taken as "
                               "independent units (calib_jax.logs.gauc), clipped to [0, 1]",
    "clopper-pearson": "exact binomial interval of the bin's click rate (clicks and impressions of the bin), "
                       "float64 (calib_jax.inference.binomial_interval)",
}
#: the convention for numbers that are undefined or not computed (written into the report)
NULLS = ("A number that is undefined on this log, or not computed, is null in report.json, with a sibling key "
         "'<name>_undefined' saying why (e.g. 'lo': null, 'lo_undefined': 'no bootstrap replicates'); no "
         "NaN or Infinity is written. The CSV tables leave such a cell empty and give the reason in their last "
         "column, 'undefined'. Every value and interval end lies in its quantity's range ('ranges'); an "
         "interval always contains its value.")


def _range_text(low: float, high: float) -> str:
    def end(x: float) -> str:
        return "inf" if x == _INF else "-inf" if x == -_INF else f"{x:g}"

    return ("(" if low == -_INF else "[") + f"{end(low)}, {end(high)}" + (")" if high == _INF else "]")


def _no_interval(values: np.ndarray) -> str:
    b = max(int(np.asarray(values).shape[0]) - 1, 0)
    if b == 0:
        return "no bootstrap replicates (the report ran with --bootstrap 0)"
    return f"fewer than 2 of the {b} bootstrap replicates define it"


def _entry(name: str, values: np.ndarray, note: str = "", corrected: np.ndarray | None = None, *,
           bias_correct: bool | None = None) -> dict[str, Any]:
    """One number with its interval and the interval's method.

    A biased plug-in (the gap norms, MCE, Field-RCE, abs_bias, the decomposition terms) is
    reported bias-corrected, with the plug-in beside it; the interval always contains the
    reported value (where the replicates are too skewed for that, it is widened to it and the
    note says so), and value, interval and plug-in are clipped to the quantity's range
    (:data:`RANGES`, by the name before any ``:``). ``bias_correct`` forces the bootstrap
    bias correction (default: the names of ``_BOOTSTRAP_CORRECTED``). A null number has a
    sibling ``<key>_undefined`` with the reason."""
    base = name.split(":", 1)[0]
    low, high = RANGES.get(base, (-_INF, _INF))
    if bias_correct is None:
        bias_correct = base in _BOOTSTRAP_CORRECTED
    v = np.asarray(values, np.float64)
    plug = float(v[0])
    reps = v[1:][np.isfinite(v[1:])]
    lo: float | None
    hi: float | None
    if corrected is None and not bias_correct:
        est, lo, hi = interval(values)
        method = "percentile"
    elif corrected is not None:
        c = np.asarray(corrected, np.float64)
        est = float(c[0])
        creps = c[1:][np.isfinite(c[1:])]
        method = "bias-corrected"
        if creps.size >= 2 and math.isfinite(plug) and math.isfinite(est):
            lo_, hi_ = bias_corrected_interval(plug, est, creps, lower=None)
            lo, hi = float(lo_), float(hi_)
        else:
            lo = hi = None
    else:
        method = "bootstrap bias-corrected"
        if reps.size >= 2 and math.isfinite(plug):
            bias = float(np.mean(reps)) - plug
            est = plug - bias
            lo_, hi_ = np.quantile(reps, [0.025, 0.975])
            lo, hi = float(lo_) - 2 * bias, float(hi_) - 2 * bias
        else:
            est, lo, hi = plug, None, None
    est_n, lo, hi = _num(est), _num(lo), _num(hi)
    if est_n is None or lo is None or hi is None:
        lo = hi = None
    elif not lo <= est_n <= hi:
        lo, hi = min(lo, est_n), max(hi, est_n)
        note = (note + "; " if note else "") + "interval widened to contain the estimate (skewed replicates)"
    clipped = [None if x is None else min(max(x, low), high) for x in (est_n, lo, hi)]
    if est_n is not None and clipped[0] != est_n:
        note = (note + "; " if note else "") + (f"value clipped to its range {_range_text(low, high)} "
                                                f"(the {method} estimate was {est_n:.4g})")
    elif any(a is not None and a != b for a, b in zip((lo, hi), clipped[1:], strict=True)):
        note = (note + "; " if note else "") + f"interval clipped to its range {_range_text(low, high)}"
    est_n, lo, hi = clipped
    out: dict[str, Any] = {"name": name, "value": est_n, "lo": lo, "hi": hi, "note": note,
                           "method": method if lo is not None else None}
    if corrected is not None or bias_correct:
        p = _num(plug)
        out["plug_in"] = None if p is None else min(max(p, low), high)
    why_value = note if note.startswith("undefined") else "undefined on this log (not a finite number)"
    why_interval = why_value if est_n is None else _no_interval(v)
    for key, why in (("value", why_value), ("plug_in", why_value), ("lo", why_interval), ("hi", why_interval),
                     ("method", why_interval)):
        if key in out and out[key] is None:
            out[f"{key}_undefined"] = why
    return out


def field_metric_entries(metrics: Mapping[str, np.ndarray], corrected: Mapping[str, np.ndarray]
                         ) -> dict[str, dict[str, Any]]:
    r"""A field's metric entries as ``evaluate --field`` reports them (``report.json``'s
    ``fields.<F>.metrics``): each metric's value with its interval, GCE and Field-ECE
    bias-corrected (``corrected``), Field-RCE and :math:`|\text{bias}|` by the bootstrap bias
    correction :math:`2\hat\theta - \bar\theta^*`, the plug-in beside each, clipped to the
    metric's range.

    Args:
      metrics: metric -> (R,) replicates, replicate 0 the log's
        (:func:`calib_jax.logs.panel.field_metric_replicates`).
      corrected: metric -> (R,) bias-corrected replicates (GCE, Field-ECE).

    Returns:
      metric -> entry (``name, value, lo, hi, note, method, plug_in`` and ``<key>_undefined``
      beside a null).

    Example:
      >>> import numpy as np
      >>> e = field_metric_entries({"field_rce": np.array([0.1, 0.12, 0.1, 0.08])}, {})
      >>> e["field_rce"]["plug_in"], e["field_rce"]["method"]
      (0.1, 'bootstrap bias-corrected')
    """
    return {k: _entry(k, v, corrected=corrected.get(k)) for k, v in metrics.items()}


def oracle_metric_entries(metrics: Mapping[str, np.ndarray], notes: Mapping[str, str] | None = None
                          ) -> dict[str, dict[str, Any]]:
    r"""The oracle metrics' entries as ``evaluate --oracle`` reports them (``report.json``'s
    ``metrics``): each one's value (replicate 0, the plug-in: oracle Brier
    :math:`\sum v(\pi - p)^2 / W` and the others of
    :func:`calib_jax.logs.panel.oracle_metrics` are not bias-corrected) with the 95% bootstrap
    percentile interval of replicates 1..B, widened to contain the value where the replicates
    are skewed (the Chebyshev maximum), clipped to the metric's range (:data:`RANGES`).

    Args:
      metrics: metric -> (R,) replicates, replicate 0 the log's.
      notes: the panel's note of each metric (``None``: none).

    Returns:
      metric -> entry (``name, value, lo, hi, note, method`` and ``<key>_undefined`` beside a null).

    Example:
      >>> import numpy as np
      >>> e = oracle_metric_entries({"oracle_brier": np.array([0.02, 0.018, 0.021, 0.019, 0.022])})
      >>> e["oracle_brier"]["value"], e["oracle_brier"]["method"]
      (0.02, 'percentile')
    """
    notes = notes or {}
    return {k: _entry(k, v, notes.get(k, "")) for k, v in metrics.items()}


def _explain_nulls(obj: Any, reason: str) -> Any:
    """``obj`` with every non-finite float replaced by None and every None value of a dict
    given a sibling ``<key>_undefined`` (``reason`` where none is there yet): the report's
    convention (:data:`NULLS`), enforced over whole sections as a last step."""
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            if isinstance(v, float | np.floating) and not math.isfinite(float(v)):
                v = None
            out[k] = _explain_nulls(v, reason)
        for k, v in list(out.items()):
            if v is None and not str(k).endswith("_undefined") and f"{k}_undefined" not in out:
                out[f"{k}_undefined"] = reason
        return out
    if isinstance(obj, list | tuple):
        return [None if isinstance(v, float | np.floating) and not math.isfinite(float(v)) else
                _explain_nulls(v, reason) for v in obj]
    if isinstance(obj, np.floating):
        return float(obj) if math.isfinite(float(obj)) else None
    return obj


def _test_entry(t: dict[str, Any]) -> dict[str, Any]:
    """A calibration test's row, finite and in range: statistic (by the test's range),
    p-value in [0, 1], degrees of freedom >= 0; a null number with its reason."""
    out = dict(t)
    undefined = str(t.get("note", "")).startswith("undefined")
    for key, rng in (("statistic", RANGES.get(str(t.get("test")), (-_INF, _INF))), ("df", RANGES["df"]),
                     ("p_value", RANGES["p_value"])):
        x = _num(t.get(key))
        out[key] = None if x is None else min(max(x, rng[0]), rng[1])
        if out[key] is None:
            out[f"{key}_undefined"] = (
                t["note"] if undefined else
                "not applicable: the null distribution has no degrees of freedom" if key == "df" and t.get("df") is None
                else "undefined on this log (not a finite number)")
    return out


def build_report(panel: dict[str, Any], *, top_levels: int = 50) -> dict[str, Any]:
    """The JSON-able report (numbers only) from :func:`calib_jax.logs.panel.compute_panel`.

    Every number is finite or null with a sibling ``<key>_undefined`` giving the reason
    (:data:`NULLS`); every value and interval end lies in its quantity's range
    (:data:`RANGES`, also written as ``ranges``), and every interval contains its value."""
    m, notes = panel["metrics"], panel["notes"]
    names = [k for k in _ORDER if k in m] + sorted(k for k in m if k not in _ORDER and k != "weight")
    corr = panel.get("corrected", {})
    metrics = [_entry(k, m[k], notes.get(k, ""), corr.get(k)) for k in names]
    fields = {}
    for f, t in panel["fields"].items():
        w0 = t["weight"][0]
        order = np.argsort(-w0, kind="stable")[:top_levels]
        rows = []
        for i in order:
            row: dict[str, Any] = {"value": t["levels"][i], "weight": _num(w0[i])}
            for col in ("mean_p", "ctr", "bias", "calibration_ratio", "ne", "gap"):
                if col not in t:
                    continue
                e = _entry(col, t[col][:, i])
                row[col], row[f"{col}_lo"], row[f"{col}_hi"] = e["value"], e["lo"], e["hi"]
                if e["value"] is None:
                    row[f"{col}_undefined"] = (
                        "the level has no click" if col in ("bias", "calibration_ratio") and t["ctr"][0, i] <= 0
                        else "the level has one class only" if col == "ne" else e["value_undefined"])
                if e["lo"] is None:
                    row[f"{col}_lo_undefined"] = row[f"{col}_hi_undefined"] = e["lo_undefined"]
                if "widened" in e["note"] or "clipped" in e["note"]:
                    row[f"{col}_note"] = e["note"]
            rows.append(row)
        fields[f] = {"n_levels": len(t["levels"]), "shown": len(rows),
                     "metrics": {k: _entry(k, v, corrected=corr.get(f"{k}:{f}")) for k, v in t["metrics"].items()},
                     "levels": rows}
    dec = {name: {term: _entry(term, vals, bias_correct=True) for term, vals in terms.items()}
           for name, terms in panel["decompositions"].items()}
    r = panel["reliability"]
    reli = []
    bins = [j for j in range(r["weight"].shape[1]) if r["weight"][0, j] > 0]
    n_b = np.array([float(r["weight"][0, j]) for j in bins])
    k_b = np.clip(np.array([float(r["ctr"][0, j]) for j in bins]) * n_b, 0.0, n_b)
    rate: float | None = panel.get("negative_rate")
    if bins and rate is None:
        # float64 Clopper-Pearson ends (SciPy on the host, as calib_jax.inference.binomial_interval
        # under float64): exact at 10^9 impressions
        band_lo, band_hi = binomial_ends(k_b, n_b, 0.95, "clopper-pearson")
    elif bins and rate is not None:
        # a downsampled log: the ends on the kept rows' counts (non-clicks at rate w), mapped to
        # the population by q = p / (p + (1 - p) / w), which is increasing, so exact as well
        from calib_jax.logs.downsampling import recalibrate_probability

        kept_lo, kept_hi = binomial_ends(k_b, k_b + (n_b - k_b) * rate, 0.95, "clopper-pearson")
        band_lo, band_hi = recalibrate_probability(kept_lo, rate), recalibrate_probability(kept_hi, rate)
    per_row_rate = panel.get("negative_rate_column") is not None
    for i, j in enumerate(bins):
        e_p, e_c = _entry("mean_p", r["mean_p"][:, j]), _entry("ctr", r["ctr"][:, j])
        row = {"bin": j, "weight": _num(n_b[i]), "mean_p": e_p["value"], "ctr": e_c["value"],
               "ctr_lo": _num(band_lo[i]), "ctr_hi": _num(band_hi[i]), "method": "clopper-pearson",
               "ctr_boot_lo": e_c["lo"], "ctr_boot_hi": e_c["hi"]}
        if per_row_rate:  # the kept rows' counts are not in the cells: the band is the bootstrap's
            row.update(ctr_lo=e_c["lo"], ctr_hi=e_c["hi"], method="bootstrap percentile (a rate per row)")
        if e_c["lo"] is None:
            row["ctr_boot_lo_undefined"] = row["ctr_boot_hi_undefined"] = e_c["lo_undefined"]
            if per_row_rate:
                row["ctr_lo_undefined"] = row["ctr_hi_undefined"] = e_c["lo_undefined"]
        reli.append(row)
    bounds: dict[str, Any] = {k: _num(v) for k, v in panel["bounds"].items()}
    for k, v in list(bounds.items()):
        if v is None:
            bounds[f"{k}_undefined"] = ("the log has one class only: AUC is undefined" if k == "auc" else
                                        "undefined on this log")
    rep = {"metrics": metrics, "fields": fields, "decompositions": dec, "reliability": reli,
           "tests": [_test_entry(t) for t in panel.get("tests", [])], "interval_methods": METHODS,
           "bounds": bounds, "ranges": {k: _range_text(*v) for k, v in RANGES.items()}, "nulls": NULLS}
    for section in ("metrics", "fields", "decompositions", "reliability", "tests", "bounds"):
        rep[section] = _explain_nulls(rep[section], "undefined on this log (not a finite number)")
    rep["verdict"] = verdict(rep)
    if panel.get("negative_rate") is not None or panel.get("negative_rate_column") is not None:
        from calib_jax.logs.downsampling import rate_note  # a downsampled log: the report says so first

        rep["verdict"] = [rate_note(panel["negative_rate"], panel["negative_rate_column"]), *rep["verdict"]]
    return rep


def _metric(rep: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((e for e in rep["metrics"] if e["name"] == name), None)


def verdict(rep: dict[str, Any]) -> list[str]:
    """A few plain sentences: global bias, calibration error, the worst field."""
    out = []
    b = _metric(rep, "bias")
    if b and b["value"] is not None:
        pct = 100 * b["value"]
        ci = f" (95% CI {100 * b['lo']:+.1f}% to {100 * b['hi']:+.1f}%)" if b["lo"] is not None else ""
        if b["lo"] is not None and b["lo"] > 0:
            out.append(f"Over-predicts: mean score is {pct:+.1f}% off the click rate{ci}.")
        elif b["hi"] is not None and b["hi"] < 0:
            out.append(f"Under-predicts: mean score is {pct:+.1f}% off the click rate{ci}.")
        elif b["lo"] is None:
            out.append(f"Global bias {pct:+.1f}% (no interval: run with --bootstrap B to judge it).")
        else:
            out.append(f"No significant global bias: {pct:+.1f}%{ci}.")
    e = _metric(rep, "ece")
    c = _metric(rep, "ctr")
    if e and e["value"] is not None and c and c["value"]:
        out.append(f"ECE = {e['value']:.4g}, i.e. {100 * e['value'] / c['value']:.1f}% of the click rate "
                   f"{c['value']:.4g}.")
    worst = None
    for f, t in rep["fields"].items():
        rce = t["metrics"].get("field_rce")
        if rce and rce["value"] is not None and (worst is None or rce["value"] > worst[1]):
            worst = (f, rce["value"])
    if worst:
        out.append(f"Largest field-level miscalibration: {worst[0]} (Field-RCE {worst[1]:.3g}).")
    return out


# ---------------------------------------------------------------------------- figures
def reliability_png(rep: dict[str, Any], title: str = "") -> bytes:
    """The reliability diagram (equal-mass bins, 95% bootstrap band) as PNG bytes."""
    # a bare Figure on the Agg canvas: no pyplot (its import is a tenth of the command's fixed
    # cost) and no global figure state
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = rep["reliability"]
    x = np.array([r["mean_p"] for r in rows], float)
    y = np.array([r["ctr"] for r in rows], float)
    fig = Figure(figsize=(5.0, 4.6))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    top = float(max(np.max(x, initial=0), np.max(y, initial=0))) * 1.08 or 1.0
    ax.plot([0, top], [0, top], "k--", lw=1, label="perfect calibration")
    if rows and rows[0]["ctr_lo"] is not None:
        lo = np.array([r["ctr_lo"] for r in rows], float)
        hi = np.array([r["ctr_hi"] for r in rows], float)
        ax.fill_between(x, lo, hi, color="C0", alpha=0.25, lw=0, label="95% exact binomial band (Clopper-Pearson)")
    ax.plot(x, y, "o-", color="C0", ms=4, label="click rate per equal-mass bin")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_xlabel("mean predicted CTR in bin")
    ax.set_ylabel("observed click rate")
    e = _metric(rep, "ece")
    ax.set_title(f"{title}  ECE = {e['value']:.4g}" if e and e["value"] is not None else title, fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    buf = _io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    return buf.getvalue()


# ---------------------------------------------------------------------------- tables
def _f(x: Any, digits: int = 4) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def _ci(e: dict[str, Any], prefix: str = "") -> str:
    lo, hi = e.get(f"{prefix}lo"), e.get(f"{prefix}hi")
    return "–" if lo is None else f"[{_f(lo)}, {_f(hi)}]"


def _why(d: dict[str, Any], cols: dict[str, str]) -> str:
    """The ``undefined`` cell of a CSV row: ``column: reason`` for each null cell of the row
    (``cols`` maps a column to its key in ``d``), columns of one reason joined."""
    by: dict[str, list[str]] = {}
    for col, key in cols.items():
        why = d.get(f"{key}_undefined")
        if d.get(key) is None and why:
            by.setdefault(str(why), []).append(col)
    return "; ".join(f"{', '.join(c)}: {w}" for w, c in by.items())


def report_tables(rep: dict[str, Any]) -> dict[str, tuple[list[str], list[list[Any]]]]:
    """The report's four tables (:data:`~calib_jax.logs.common.REPORT_TABLES`: metrics, fields,
    decompositions, tests) as ``name -> (header, rows)``: what ``<name>.csv`` and ``<name>.md``
    hold, and the columns of :class:`calib_jax.logs.Report`'s Arrow tables. A cell without a
    value is ``None``; ``undefined`` says why."""
    mcols = {"value": "value", "lo": "lo", "hi": "hi", "interval": "method", "plug_in": "plug_in"}
    met = (["metric", "value", "lo", "hi", "interval", "plug_in", "note", "undefined"],
           [[e["name"], e["value"], e["lo"], e["hi"], e.get("method"), e.get("plug_in"), e["note"],
             _why(e, {c: k for c, k in mcols.items() if k in e})] for e in rep["metrics"]])
    lcols = ["mean_p", "ctr", "bias", "bias_lo", "bias_hi", "calibration_ratio", "ne", "gap", "gap_lo", "gap_hi"]
    frows = []
    for f, t in rep["fields"].items():
        for r in t["levels"]:
            frows.append([f, r["value"], r["weight"], r["mean_p"], r["ctr"], r["bias"], r["bias_lo"], r["bias_hi"],
                          r.get("calibration_ratio"), r.get("ne"), r["gap"], r["gap_lo"], r["gap_hi"],
                          _why(r, {c: c for c in lcols if c in r})])
    fld = (["field", "level", "weight", "mean_p", "ctr", "bias", "bias_lo", "bias_hi", "calibration_ratio", "ne",
            "gap", "gap_lo", "gap_hi", "undefined"], frows)
    drows = [[d, term, e["value"], e["lo"], e["hi"], e.get("method"), e.get("plug_in"), e["note"],
              _why(e, {c: k for c, k in mcols.items() if k in e})]
             for d, terms in rep["decompositions"].items() for term, e in terms.items()]
    dec = (["decomposition", "term", "value", "lo", "hi", "interval", "plug_in", "note", "undefined"], drows)
    tcols = {"statistic": "statistic", "df": "df", "p_value": "p_value"}
    tests = (["test", "statistic", "df", "p_value", "null", "note", "undefined"],
             [[t["test"], t["statistic"], t["df"], t["p_value"], t["null"], t["note"], _why(t, tcols)]
              for t in rep.get("tests", [])])
    return {"metrics": met, "fields": fld, "decompositions": dec, "tests": tests}


_MD_ESCAPED = set("\\`*_{}[]()#+!|~")


def md_cell(x: Any) -> str:
    """A Markdown table cell: text from the log (field names and values) has its HTML markup
    entity-escaped and Markdown punctuation (``|``, brackets, emphasis, ...) backslash-escaped,
    line breaks and control characters as spaces, so it can neither add a column nor render
    as markup or a link; numbers are printed as numbers."""
    if not isinstance(x, str):
        return _f(x)
    text = "".join("\\" + c if c in _MD_ESCAPED else " " if ord(c) < 32 or c == "\x7f" else c for c in x)
    return html.escape(text, quote=False)


def _md_table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(md_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(md_cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- html
_CSS = """body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px}
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}
.verdict{background:#f6f8ff;border-left:4px solid #3b6;padding:.5em 1em}small{color:#666}"""


def _td(x: Any) -> str:
    if isinstance(x, float):
        return f'<td class="num" data-value="{x!r}">{html.escape(_f(x))}</td>'
    if x is None:
        return '<td class="num">–</td>'
    return f"<td>{html.escape(str(x))}</td>"


def _html_table(header: list[str], rows: list[list[Any]], attrs: list[str] | None = None) -> str:
    out = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"]
    for i, r in enumerate(rows):
        a = f" {attrs[i]}" if attrs else ""
        out.append(f"<tr{a}>" + "".join(_td(v) for v in r) + "</tr>")
    return "\n".join(out) + "</table>"


def _scheme_words(settings: dict[str, Any]) -> str:
    if settings.get("scheme", "rows") == "cells":
        return "Poisson counts per score cell, p within a cell at its mean"
    block = int(settings.get("block", 1))
    return "Poisson counts per row" if block == 1 else f"Poisson counts per block of {block} rows"


def to_html(rep: dict[str, Any], png: bytes) -> str:
    """One self-contained HTML page of the report."""
    inp = rep.get("input", {})
    esc = html.escape
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>calib-jax report: "
             f"{esc(str(inp.get('path', '')))}</title><style>{_CSS}</style></head><body>",
             f"<h1>Calibration report</h1><p><small>{esc(str(inp.get('path', '')))} ({esc(str(inp.get('format', '')))})"
             f" — {inp.get('rows_used', 0)} rows used of {inp.get('rows_read', 0)} read; "
             f"{inp.get('rows_dropped', 0)} dropped. 95% intervals from {rep.get('settings', {}).get('n_boot', 0)} "
             f"bootstrap resamples ({esc(_scheme_words(rep.get('settings', {})))}).</small></p>",
             "<h2>Verdict</h2><div class='verdict'>" + "".join(f"<p>{esc(v)}</p>" for v in rep["verdict"]) + "</div>",
             "<h2>Reliability diagram</h2>",
             f"<img alt='reliability diagram' src='data:image/png;base64,{base64.b64encode(png).decode()}'>",
             "<h2>Metrics</h2>"]
    mrows = [[e["name"], e["value"], e["lo"], e["hi"], e.get("method") or "", e.get("plug_in"), e["note"]]
             for e in rep["metrics"]]
    parts.append(_html_table(["metric", "value", "95% lo", "95% hi", "interval", "plug-in", "note"], mrows,
                             [f'data-metric="{esc(e["name"])}"' for e in rep["metrics"]]))
    parts.append("<p><small>" + "<br>".join(f"{esc(k)}: {esc(v)}" for k, v in rep.get("interval_methods", {}).items())
                 + "</small></p>")
    if rep.get("tests"):
        parts.append("<h2>Calibration tests</h2>")
        parts.append(_html_table(["test", "statistic", "df", "p-value", "null distribution", "note"],
                                 [[t["test"], t["statistic"], t["df"], t["p_value"], t["null"], t["note"]]
                                  for t in rep["tests"]]))
    for f, t in rep["fields"].items():
        parts.append(f"<h2>Field {esc(f)}</h2><p><small>{t['n_levels']} levels, the {t['shown']} heaviest shown"
                     "</small></p>")
        fm = t["metrics"]
        parts.append(_html_table(["metric", "value", "95% lo", "95% hi"],
                                 [[k, e["value"], e["lo"], e["hi"]] for k, e in fm.items()]))
        rows = [[r["value"], r["weight"], r["mean_p"], r["ctr"], r["bias"], r["bias_lo"], r["bias_hi"],
                 r.get("calibration_ratio"), r.get("ne")] for r in t["levels"]]
        parts.append(_html_table(["level", "weight", "mean p", "click rate", "bias", "95% lo", "95% hi",
                                  "calibration ratio", "NE"], rows))
    parts.append("<h2>Decompositions</h2><p><small>Brier = UNC + REL − RES + Δ on each partition "
                 "(<i>Calibration is Grouping</i>, eq. 6); CORP: score = MCB − DSC + UNC. Each term is "
                 "bootstrap bias-corrected (2 × plug-in − mean of the replicates), its plug-in beside it: the "
                 "plug-ins of REL, RES, MCB and DSC are biased, and a percentile interval can exclude them. "
                 "Both columns keep the identity (up to the clipping of a term to its range).</small></p>")
    for d, terms in rep["decompositions"].items():
        parts.append(f"<h3>{esc(d)}</h3>")
        parts.append(_html_table(["term", "value", "95% lo", "95% hi", "plug-in", "note"],
                                 [[k, e["value"], e["lo"], e["hi"], e.get("plug_in"), e["note"]]
                                  for k, e in terms.items()]))
    prov = rep.get("provenance", {})
    parts.append(f"<p><small>calib_jax {esc(str(prov.get('calib_jax', '')))}, commit "
                 f"{esc(str(prov.get('git_commit', '')))}, {esc(str(prov.get('created_utc', '')))}</small></p>")
    parts.append("</body></html>")
    return "\n".join(parts)


# ---------------------------------------------------------------------------- writers
def write_outputs(out: str | Path, rep: dict[str, Any]) -> dict[str, Path]:
    """Write every output file of the report into ``out``
    (:data:`calib_jax.logs.common.REPORT_FILES`, each through the guarded atomic writer; the
    CSVs through :func:`calib_jax.logs.common.write_csv`); returns name -> path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    png = reliability_png(rep, title=Path(str(rep.get("input", {}).get("path", ""))).name)
    paths["png"] = cio.atomic_write_bytes(out / "reliability.png", png)
    tables = report_tables(rep)
    for name in REPORT_TABLES:
        header, rows = tables[name]
        paths[f"{name}.csv"] = write_csv(out / f"{name}.csv", header, rows)
        paths[f"{name}.md"] = cio.atomic_write_text(out / f"{name}.md", _md_table(header, rows))
    md = ["# Calibration report", "", *[f"- {md_cell(v)}" for v in rep["verdict"]], "",
          "![reliability](reliability.png)", "", "## Metrics", "", _md_table(*report_tables(rep)["metrics"]),
          "", "## Calibration tests", "", _md_table(*report_tables(rep)["tests"]), "", "## Interval methods", "",
          *[f"- {md_cell(k)}: {md_cell(v)}" for k, v in rep.get("interval_methods", {}).items()]]
    paths["report.md"] = cio.atomic_write_text(out / "report.md", "\n".join(md))
    paths["json"] = cio.write_json(out / "report.json", rep, allow_nan=False)  # NaN raises, never written
    paths["html"] = cio.atomic_write_text(out / "report.html", to_html(rep, png))
    return paths


def summary_text(rep: dict[str, Any]) -> str:
    """The short terminal summary."""
    inp = rep.get("input", {})
    lines = [f"{inp.get('path')}: {inp.get('rows_used')} rows ({inp.get('rows_dropped', 0)} dropped)"]
    lines += [f"  {v}" for v in rep["verdict"]]
    for name in ("ece", "ece_plus", "mce", "lcce", "brier", "nll", "ne", "calibration_ratio", "auc", "gauc", "bias",
                 "oracle_brier"):
        e = _metric(rep, name)
        if e is not None:
            lines.append(f"  {name:<18} {_f(e['value']):>10}  {_ci(e)}")
    for t in rep.get("tests", []):
        lines.append(f"  {t['test']:<18} {_f(t['statistic']):>10}  p = {_f(t['p_value'], 3)}")
    return "\n".join(lines)
