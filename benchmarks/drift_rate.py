"""The change flags of ``calib-jax evaluate --by``: false-alarm rate and power by slice size.

    python -m benchmarks.drift_rate [--reps 1000] [--power-reps 100] [--only 0,1,...] [--cost] [--quick]

Each replication is a log of two slices, a baseline and a slice, simulated as their main cells
(what the engines return per slice: the rows, clicks and sums of each fine logit bin, label and
probability bin), not as rows, so that a baseline of 10^9 rows costs what one of 10^3 does.
The score's logit is N(mu, 1) (mu = -3.9: click rate 3.1%; mu = -1.65: 20%), the rows of a
slice fall into the fine logit bins by a multinomial draw and each bin's clicks are
Binomial(rows, sigmoid(logit - shift)): ``shift`` = 0 is a calibrated model, the same on both
slices (no drift); on a drifted slice the score over-predicts by ``shift`` on the logit scale
(+0.2: its calibration ratio rises by 21% at a 3% click rate, 15% at 20%). Further no-drift
cases move the slice's score distribution (mu + 0.5: the traffic mix changes, P(click | score)
does not, so calibration did not change and nothing is to be flagged), or weigh each row
Uniform(0.5, 2).

For each row of the table, :func:`calib_jax.logs.slicing.drift_flags` runs at alpha = 0.05 with
S = 2 slices (the level of a comparison is alpha / (S - 1) = 0.05) on 1,000 no-drift logs and
100 drifted ones (200 for the first six rows), and the table gives, per flagged metric, the share
of no-drift logs flagged among those testable (``status`` not ``too small``) with its binomial
standard error, the share too small, and the power against the +0.2 shift. Main's test
(c90aed5: the bootstrap standard error of the difference with a normal quantile, B = 100) on 200
further no-drift logs of up to 3,000 slice rows is in the columns ``main's test``. ``--cost``
times 2,000 slices of 50,000 rows (one drifted by +0.5) against the cell bootstrap at B = 1,000.
Results: ``benchmarks/results/drift_rate.{csv,md,json}``; the guide (docs/guide/cli.md) quotes
them.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path
from typing import Any

import numpy as np

from calib_jax.logs.accumulate import CELL_COLS, Settings
from calib_jax.logs.slicing import FLAGGED, SliceCells

RESULTS = Path(__file__).resolve().parent / "results"
#: mean logit of the score for a click rate of about 3% and 20% (sd 1)
MEANS = {0.03: -3.9, 0.2: -1.65}


def cells_from_counts(h: np.ndarray, rows: np.ndarray, clicks: np.ndarray, settings: Settings, *,
                      rng: np.random.Generator | None = None, weights: tuple[float, float] | None = None,
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A slice's main cells ``(index, sums (C, 7), rows)`` as :class:`SliceCells` holds them, from
    the rows and clicks of each fine logit bin ``h``: the rows of a bin take its centre as their
    logit o and probability p (so a bin lies in one probability bin). With ``weights = (lo,
    hi)`` each row weighs Uniform(lo, hi) (a cell's weight sum is the sum of its rows' weights,
    drawn from ``rng``); otherwise 1."""
    from scipy.special import expit

    H, M, L = settings.hist_bins, settings.n_bins, settings.logit_range
    o = -L + (h + 0.5) * (2 * L / H)
    p = expit(o)
    r = np.clip(np.floor(p * M), 0, M - 1).astype(np.int64)
    out_i, out_s, out_n = [], [], []
    for y, k in ((0, rows - clicks), (1, clicks)):
        keep = k > 0
        kk, pp, oo = k[keep].astype(np.float64), p[keep], o[keep]
        if weights is None or rng is None:
            v = kk
        else:
            lo, hi = weights
            v = np.array([rng.uniform(lo, hi, int(c)).sum() for c in kk]) if kk.sum() < 5e6 else \
                kk * (lo + hi) / 2 + rng.normal(0, np.sqrt(kk * (hi - lo) ** 2 / 12))
        nll = -np.log(pp) if y == 1 else -np.log1p(-pp)
        d = y - pp
        out_s.append(np.stack([v, v * pp, v * pp * pp, v * oo, v * d * d, v * nll, v * np.abs(d)], axis=1))
        out_i.append((h[keep] * M + r[keep]) * 2 + y)
        out_n.append(kk)
    index = np.concatenate(out_i)
    order = np.argsort(index)
    sums = np.concatenate(out_s)[order]
    assert sums.shape[1] == CELL_COLS
    return index[order], sums, np.concatenate(out_n)[order]


def simulate_slice(rng: np.random.Generator, n: int, settings: Settings, *, mean: float, sd: float = 1.0,
                   shift: float = 0.0, weights: tuple[float, float] | None = None,
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One slice's main cells (:func:`cells_from_counts`): ``n`` rows whose score logit is
    N(mean, sd), by a multinomial draw over the fine logit bins; each bin's clicks are
    Binomial(rows, sigmoid(o - shift)) (``shift`` > 0: the score over-predicts)."""
    from scipy.special import expit
    from scipy.stats import norm

    H, L = settings.hist_bins, settings.logit_range
    edges = np.linspace(-L, L, H + 1)
    prob = np.diff(norm.cdf(edges, loc=mean, scale=sd))
    rows = rng.multinomial(n, prob / prob.sum())
    h = np.flatnonzero(rows)
    rows = rows[h]
    clicks = rng.binomial(rows, expit((edges[h] + edges[h + 1]) / 2 - shift))
    return cells_from_counts(h, rows, clicks, settings, rng=rng, weights=weights)


def pair(rng: np.random.Generator, n_slice: int, n_base: int, settings: Settings, *, ctr: float, shift: float = 0.0,
         mix: float = 0.0, weights: tuple[float, float] | None = None) -> SliceCells:
    """A log of two slices: ``"0 base"`` (n_base rows, the baseline: index 0) and ``"1 slice"``
    (n_slice rows, its logit distribution moved by ``mix``, its calibration by ``shift``)."""
    mean = MEANS[ctr]
    base = simulate_slice(rng, n_base, settings, mean=mean, weights=weights)
    sl = simulate_slice(rng, n_slice, settings, mean=mean + mix, shift=shift, weights=weights)
    n = int(base[2].sum() + sl[2].sum())
    return SliceCells(slices=("0 base", "1 slice"), cells=(base, sl), rows_read=n, rows_used=n)


def rates(n_slice: int, n_base: int, *, ctr: float, reps: int, seed: int, shift: float = 0.0, mix: float = 0.0,
          weights: tuple[float, float] | None = None, settings: Settings | None = None,
          alpha: float = 0.05) -> dict[str, Any]:
    """Over ``reps`` simulated two-slice logs: per metric, the logs testable (status not too
    small) and those flagged by :func:`~calib_jax.logs.slicing.drift_flags`."""
    from calib_jax.logs.slicing import drift_flags

    s = settings or Settings(scheme="cells", n_boot=0)
    rng = np.random.default_rng(seed)
    flagged = dict.fromkeys(FLAGGED, 0)
    tested = dict.fromkeys(FLAGGED, 0)
    for i in range(reps):
        cells = pair(rng, n_slice, n_base, s, ctr=ctr, shift=shift, mix=mix, weights=weights)
        for f in drift_flags(cells, dataclasses.replace(s, seed=seed * 100_003 + i), alpha=alpha):
            if f["status"] != "too small":
                tested[f["metric"]] += 1
                flagged[f["metric"]] += f["flag"]
    return {"flagged": flagged, "tested": tested, "reps": reps}


def old_rates(n_slice: int, n_base: int, *, ctr: float, reps: int, seed: int, mix: float = 0.0,
              n_boot: int = 100, alpha: float = 0.05) -> dict[str, Any]:
    """The same logs under main's test (c90aed5): a flag when |slice - baseline| exceeds the
    normal quantile of 1 - alpha / 2 times the standard deviation of the cell-bootstrap
    replicates' differences (S = 2)."""
    from scipy.stats import norm

    from calib_jax.logs.slicing import slice_metrics

    s = Settings(scheme="cells", n_boot=n_boot)
    crit = float(norm.ppf(1 - alpha / 2))
    rng = np.random.default_rng(seed)
    flagged = dict.fromkeys(FLAGGED, 0)
    for i in range(reps):
        cells = pair(rng, n_slice, n_base, s, ctr=ctr, mix=mix)
        m = slice_metrics(cells, dataclasses.replace(s, seed=seed * 100_003 + i))
        for name in FLAGGED:
            d = m[1][name] - m[0][name]
            reps_ = d[1:][np.isfinite(d[1:])]
            se = float(np.std(reps_, ddof=1)) if reps_.size >= 2 else float("nan")
            flagged[name] += bool(np.isfinite(d[0]) and se > 0 and abs(d[0]) > crit * se)
    return {"flagged": flagged, "tested": dict.fromkeys(FLAGGED, reps), "reps": reps}


def cost(n_slices: int = 2000, rows: int = 50_000, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Seconds of :func:`~calib_jax.logs.slicing.drift_flags` on a log of ``n_slices`` slices of
    ``rows`` rows from one model (one drifted by +0.5 on the logit), and of the cell bootstrap
    (:func:`~calib_jax.logs.slicing.slice_metrics`, ``n_boot`` replicates) on 20 of them, scaled
    to all."""
    from calib_jax.logs.slicing import drift_flags, slice_metrics

    s = Settings(scheme="cells", n_boot=0, seed=seed)
    rng = np.random.default_rng(seed)
    parts = [simulate_slice(rng, rows, s, mean=MEANS[0.03], shift=0.5 if k == n_slices // 2 else 0.0)
             for k in range(n_slices)]
    n = int(sum(q[2].sum() for q in parts))
    cells = SliceCells(slices=tuple(f"s{k:05d}" for k in range(n_slices)), cells=tuple(parts), rows_read=n,
                       rows_used=n)
    t = time.perf_counter()
    flags = drift_flags(cells, s)
    flag_s = time.perf_counter() - t
    few = SliceCells(slices=cells.slices[:20], cells=cells.cells[:20], rows_read=0, rows_used=0)
    t = time.perf_counter()
    slice_metrics(few, dataclasses.replace(s, n_boot=n_boot))
    boot_s = (time.perf_counter() - t) * n_slices / 20
    draws = np.array([f["draws"] for f in flags])
    return {"slices": n_slices, "rows": rows, "flags_s": flag_s, "bootstrap_s": boot_s, "n_boot": n_boot,
            "draws_mean": float(draws.mean()), "draws_max": int(draws.max()),
            "flagged": sorted({(cells.slices[f["slice"]], f["metric"]) for f in flags if f["flag"]})}


#: (click rate, slice rows, baseline rows, mix, weights) of the table
SIZES = (30, 300, 3_000, 100_000, 1_000_000)
RATIOS = (1, 10, 1000)
EXTRA = ((0.03, 300, 300_000, 0.5, None), (0.03, 3_000, 3_000, 0.5, None), (0.2, 100_000, 1_000_000, 0.5, None),
         (0.2, 1_000, 100_000, 0.0, (0.5, 2.0)), (0.03, 100_000, 10_000_000, 0.0, (0.5, 2.0)))


def configs() -> list[tuple[float, int, int, float, tuple[float, float] | None]]:
    """Every row of the table, in order."""
    rows: list[tuple[float, int, int, float, tuple[float, float] | None]] = [
        (ctr, n, n * k, 0.0, None) for ctr in MEANS for n in SIZES for k in RATIOS]
    return rows + list(EXTRA)


def _key(c: tuple[float, int, int, float, tuple[float, float] | None]) -> str:
    return f"ctr={c[0]} slice={c[1]} base={c[2]} mix={c[3]} weights={c[4]}"


def main(argv: list[str] | None = None) -> int:
    import json

    from calib_jax import io as cio

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1000, help="no-drift logs per row")
    ap.add_argument("--power-reps", type=int, default=100, help="drifted logs per row")
    ap.add_argument("--old-reps", type=int, default=200, help="logs per row under main's test")
    ap.add_argument("--only", default="", help="rows to (re)measure: indices of configs(), comma-separated; 'none'")
    ap.add_argument("--cost", action="store_true", help="also time 2,000 slices")
    ap.add_argument("--quick", action="store_true", help="a smoke run: few logs, nothing written")
    args = ap.parse_args(argv)
    if args.quick:
        args.reps, args.power_reps, args.old_reps = 20, 10, 10
    store = RESULTS / "drift_rate.json"
    done: dict[str, Any] = json.loads(store.read_text()) if store.exists() and not args.quick else {}
    done.setdefault("rows", {})
    todo = [] if args.only == "none" else [int(i) for i in args.only.split(",") if i] or range(len(configs()))
    for i in todo:
        c = configs()[i]
        ctr, n_s, n_0, mix, w = c
        t = time.perf_counter()
        seed = 1000 + i
        entry: dict[str, Any] = {"rates": rates(n_s, n_0, ctr=ctr, mix=mix, weights=w, reps=args.reps, seed=seed),
                 "power": rates(n_s, n_0, ctr=ctr, mix=mix, weights=w, shift=0.2, reps=args.power_reps,
                                seed=seed + 500_000)}
        if w is None and n_s <= 3_000:
            entry["old"] = old_rates(n_s, n_0, ctr=ctr, mix=mix, reps=args.old_reps, seed=seed + 900_000)
        entry["seconds"] = time.perf_counter() - t
        done["rows"][_key(c)] = entry
        print(_key(c), json.dumps(entry), flush=True)
        if not args.quick:
            cio.write_json(store, done)
    if args.cost:
        done["cost"] = cost()
        print(json.dumps(done["cost"]), flush=True)
        if not args.quick:
            cio.write_json(store, done)
    if not args.quick:
        done["provenance"] = cio.provenance({"script": "benchmarks.drift_rate", "reps": args.reps,
                                             "power_reps": args.power_reps, "old_reps": args.old_reps,
                                             "settings": Settings(scheme="cells", n_boot=0).to_dict()}, seed=None)
        cio.write_json(store, done)
        write_table(done, RESULTS / "drift_rate")
    return 0


def write_table(done: dict[str, Any], stem: Path) -> None:
    """The Markdown and CSV table of the measured rows."""
    from calib_jax import io as cio

    def pct(k: int, n: int) -> str:
        return f"{100 * k / n:.1f} ({100 * np.sqrt(k / n * (1 - k / n) / n):.1f})" if n else "-"

    header = ["click rate", "slice rows", "baseline rows", "slice's logits moved", "weights", "logs",
              *[f"false alarms {m} % (se)" for m in FLAGGED], "too small %",
              *[f"main's test {m} %" for m in FLAGGED], "drifted logs", *[f"power {m} %" for m in FLAGGED]]
    rows = []
    for c in configs():
        e = done["rows"].get(_key(c))
        if e is None:
            continue
        r, pw, old = e["rates"], e["power"], e.get("old")
        rows.append([f"{100 * c[0]:.0f}%", f"{c[1]:,}", f"{c[2]:,}", f"{c[3]:+.1f}" if c[3] else "-",
                     "-" if c[4] is None else f"U{c[4]}", r["reps"],
                     *[pct(r["flagged"][m], r["tested"][m]) for m in FLAGGED],
                     f"{100 * (1 - r['tested']['ece'] / r['reps']):.1f}",
                     *[("-" if old is None else f"{100 * old['flagged'][m] / old['reps']:.0f}") for m in FLAGGED],
                     pw["reps"], *[(f"{100 * pw['flagged'][m] / pw['reps']:.0f}") for m in FLAGGED]])
    cio.write_table(stem, header, rows)


if __name__ == "__main__":
    raise SystemExit(main())
