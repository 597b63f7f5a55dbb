"""Tables 1-5 of seeds/000: every calibrator on the simulator and on Open Bandit logs.

Protocol (seeds/000 §3.1 and Appendix I.1): the backbone's D_val split fits every
calibrator (the reference-code SAG protocol would also use D_ho; the default soft protocol
does not); the test split is cut into ``n_splits`` random evaluation parts
(``calib_jax.data.splits.random_test_splits``, 10 % held out of each), the metrics are
computed on each part, and methods are compared with paired t-tests
(``scipy.stats.ttest_rel``) against the best mean.  The LCCE clustering key is shared by
all methods within a split, so the comparison is paired.

Outputs in ``figures/compare_calibrators/``:

* ``table1`` (ECE, LCCE, Brier+ = oracle MAE, oracle Brier), ``table3`` (bias, abs_bias by
  media field), ``table4`` (AccDiff, AUCDiff), ``table5`` (NLL, AUC), ``table2`` (fit +
  predict wall time, seconds; includes JIT compilation) -- CSV + Markdown + LaTeX; the best
  mean of each column is marked ``**``, and ``*`` marks methods not significantly worse
  than the best (paired t-test p >= 0.05);
* ``metrics_long.csv``: method x dataset x metric mean, std and p-value against the best;
  ``per_split.npz``: every per-split value (``dataset/method/metric``);
* ``claims``: the ordering VR-SAG < SAG < temperature/Platt scaling on LCCE and oracle
  Brier with the paired t-test p-values;
* ``provenance.json``.

Usage::

    python -m experiments.compare_calibrators            # quick (~minutes)
    python -m experiments.compare_calibrators --paper    # 100 splits, full D_val
"""

from __future__ import annotations

import argparse
import io
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from calib_jax import io as cio
from calib_jax import metrics as M
from calib_jax.calibrators import REGISTRY

STUDY = "compare_calibrators"

# (display name, registry name or None for the uncalibrated backbone)
METHODS: tuple[tuple[str, str | None], ...] = (
    ("Uncal", None),
    ("Histogram binning", "histogram_binning"),
    ("Isotonic regression", "isotonic"),
    ("Platt scaling", "platt"),
    ("Temperature scaling", "temperature"),
    ("Beta calibration", "beta"),
    ("ILPS", "ilps"),
    ("SAG+PS", "sag_ps"),
    ("SAG+TS", "sag_ts"),
    ("VR-SAG+PS", "vrsag_ps"),
    ("VR-SAG+TS", "vrsag_ts"),
    ("Neural Calibration", "neural_calibration"),
)

# metric -> "lower" / "higher" is better / "abs" (closest to 0)
DIRECTION = {
    "ECE": "lower", "LCCE": "lower", "Brier+": "lower", "Brier": "lower", "NLL": "lower",
    "AUC": "higher", "bias": "abs", "abs_bias": "lower", "AccDiff": "higher",
    "AUCDiff": "higher",
}
TABLES = {
    "table1": ("ECE", "LCCE", "Brier+", "Brier"),
    "table3": ("bias", "abs_bias"),
    "table4": ("AccDiff", "AUCDiff"),
    "table5": ("NLL", "AUC"),
}

CONFIGS: dict[str, dict[str, Any]] = {
    "quick": dict(datasets=("simulator", "open_bandit"), sim="default", n_splits=20,
                  max_val=30_000, sag_partitions=10, sag_steps=40, nc_steps=200,
                  lcce_restarts=4),
    "paper": dict(datasets=("simulator", "open_bandit"), sim="default", n_splits=100,
                  max_val=None, sag_partitions=10, sag_steps=100, nc_steps=500,
                  lcce_restarts=4),
    # tiny settings for the smoke test
    "smoke": dict(datasets=("simulator",), sim="tiny", n_splits=3, max_val=2_000,
                  sag_partitions=2, sag_steps=5, nc_steps=5, lcce_restarts=1,
                  methods=("Uncal", "Platt scaling", "Temperature scaling", "SAG+TS",
                           "VR-SAG+TS", "Neural Calibration")),
}


# ----------------------------------------------------------------------------- data


def load_dataset(name: str, *, seed: int, sim: str = "default") -> dict[str, Any] | None:
    """Backbone outputs of a dataset as a dict (``None`` if Open Bandit files are missing)."""
    from calib_jax.data import backbone as bb

    if name == "simulator":
        from calib_jax.data import simulator as simm

        if sim == "tiny":
            out = bb.load_or_train(simm.tiny_config(),
                                   bb.BackboneConfig(hidden=(32,), embedding_dim=16), seed=seed)
        elif sim == "paper":
            out = bb.load_or_train(simm.paper_config(), seed=seed)
        else:
            out = bb.load_or_train(seed=seed)
        nc_fields = bb.DEFAULT_FIELDS
        group_field = "media"
    elif name == "open_bandit":
        from calib_jax.data import open_bandit as ob

        try:
            out = ob.load_or_train_open_bandit(seed=seed)
        except (FileNotFoundError, ValueError) as err:
            print(f"[{STUDY}] Open Bandit data unavailable, skipped: {err}")
            return None
        nc_fields = ob.FIELD_NAMES
        group_field = "item_id"
    else:
        raise ValueError(f"unknown dataset {name!r}")
    names = list(out.field_names)
    cols = [names.index(f) for f in nc_fields]
    return dict(out=out, nc_cols=cols, group_col=names.index(group_field),
                group_field=group_field, has_oracle=out.test.oracle is not None)


# ----------------------------------------------------------------------------- fitting


def _context(part, nc_cols, rows=None) -> dict[str, Any]:
    sl = slice(None) if rows is None else rows
    return {"embedding": part.embedding[sl], "fields": part.fields[sl][:, nc_cols]}


def fit_predict(reg_name: str | None, data: dict[str, Any], cfg: dict[str, Any], key: jax.Array,
                ) -> tuple[np.ndarray, float]:
    """Fit one calibrator on D_val (capped at ``max_val`` rows) and predict the test split."""
    out = data["out"]
    val, test = out.val, out.test
    if reg_name is None:
        return np.asarray(test.probs, np.float64), 0.0
    n_val = len(val)
    rows = np.arange(n_val)
    if cfg["max_val"] is not None and n_val > cfg["max_val"]:
        rows = np.sort(np.random.default_rng(0).choice(n_val, cfg["max_val"], replace=False))
    cal = REGISTRY[reg_name]
    hyper: dict[str, Any] = {}
    if reg_name.startswith(("sag", "vrsag")):
        hyper = dict(n_partitions=cfg["sag_partitions"], n_steps=cfg["sag_steps"])
    elif reg_name == "neural_calibration":
        hyper = dict(n_steps=cfg["nc_steps"])
    t0 = time.perf_counter()
    params = cal.fit(val.logits[rows], val.labels[rows], key=key,
                     context=_context(val, data["nc_cols"], rows), **hyper)
    p = cal.predict(params, test.logits, context=_context(test, data["nc_cols"]))
    p = np.asarray(jax.block_until_ready(p), np.float64)
    return p, time.perf_counter() - t0


# ----------------------------------------------------------------------------- metrics


def split_metrics(p: np.ndarray, data: dict[str, Any], idx: np.ndarray, keys: jax.Array,
                  *, n_restarts: int) -> dict[str, np.ndarray]:
    """Every metric of Tables 1, 3, 4, 5 on each evaluation part (vmapped over parts)."""
    test = data["out"].test
    y = jnp.asarray(test.labels, jnp.float32)
    o = jnp.asarray(test.logits, jnp.float32)
    base = jnp.asarray(test.probs, jnp.float32)
    pp = jnp.asarray(np.clip(p, 0.0, 1.0), jnp.float32)
    g = jnp.asarray(test.fields[:, data["group_col"]], jnp.int32)
    n_groups = int(np.max(test.fields[:, data["group_col"]])) + 1
    oracle = None if test.oracle is None else jnp.asarray(test.oracle, jnp.float32)

    def one(ix, k):
        pi, yi, oi, bi = pp[ix], y[ix], o[ix], base[ix]
        res = {
            "ECE": M.ece(pi, yi),
            "LCCE": M.lcce(oi, yi, probs=pi, key=k, n_restarts=n_restarts),
            "NLL": M.nll(pi, yi),
            "AUC": M.auc(pi, yi),
            "bias": M.bias(pi, yi),
            "abs_bias": M.abs_bias(pi, yi, g[ix], n_groups=n_groups),
            "AccDiff": M.acc_diff(pi, bi, yi),
            "AUCDiff": M.auc_diff(pi, bi, yi),
        }
        if oracle is not None:
            res["Brier+"] = M.oracle_mae(pi, oracle[ix])
            res["Brier"] = M.oracle_brier(pi, oracle[ix])
        return res

    res = jax.lax.map(lambda a: one(*a), (jnp.asarray(idx), keys))
    return {k: np.asarray(v, np.float64) for k, v in res.items()}


def _score(x: np.ndarray, direction: str) -> np.ndarray:
    """Per-split loss (lower is better) for the t-tests."""
    return {"lower": x, "higher": -x, "abs": np.abs(x)}[direction]


def paired_pvalue(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided paired t-test p-value; identical samples give p = 1."""
    d = np.asarray(a) - np.asarray(b)
    if np.allclose(d, 0.0, atol=1e-15) or np.std(d) == 0.0:
        return 1.0
    return float(stats.ttest_rel(a, b).pvalue)


def compare(results: dict[str, dict[str, np.ndarray]], metric: str) -> dict[str, Any]:
    """Best method (by mean) and each method's p-value against it."""
    direction = DIRECTION[metric]
    scores = {m: _score(r[metric], direction) for m, r in results.items() if metric in r}
    best = min(scores, key=lambda m: float(np.mean(scores[m])))
    pvals = {m: (1.0 if m == best else paired_pvalue(scores[m], scores[best])) for m in scores}
    return {"best": best, "p": pvals}


# ----------------------------------------------------------------------------- driver


def run(config: dict[str, Any], out_dir: str | Path) -> dict[str, Any]:
    """Run the comparison and write every table and the provenance into ``out_dir``."""
    from calib_jax.data.splits import random_test_splits

    t_start = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    seed = int(config["seed"])
    methods = [(d, r) for d, r in METHODS if d in config.get("methods", [m for m, _ in METHODS])]
    all_results: dict[str, dict[str, dict[str, np.ndarray]]] = {}
    fit_times: dict[str, dict[str, float]] = {}
    long_rows: list[list[Any]] = []
    info: dict[str, Any] = {}
    for ds in config["datasets"]:
        data = load_dataset(ds, seed=seed, sim=config.get("sim", "default"))
        if data is None:
            continue
        test = data["out"].test
        splits = random_test_splits(jax.random.key(seed + 1), len(test),
                                    n_splits=int(config["n_splits"]), holdout_frac=0.1)
        keys = jax.random.split(jax.random.key(seed + 2), int(config["n_splits"]))
        res, times = {}, {}
        for disp, reg in methods:
            if reg is not None and reg not in REGISTRY:
                print(f"[{STUDY}] {disp}: calibrator {reg!r} not registered, skipped")
                continue
            p, secs = fit_predict(reg, data, config, jax.random.key(seed + 3))
            res[disp] = split_metrics(p, data, splits.evaluation, keys,
                                      n_restarts=int(config["lcce_restarts"]))
            times[disp] = secs
            print(f"[{STUDY}] {ds:12s} {disp:20s} fit {secs:6.1f}s  "
                  + " ".join(f"{k}={np.mean(v):.5f}" for k, v in res[disp].items()), flush=True)
        all_results[ds], fit_times[ds] = res, times
        info[ds] = dict(n_val=len(data["out"].val), n_test=len(test),
                        has_oracle=data["has_oracle"], group_field=data["group_field"])
        for metric in DIRECTION:
            if not any(metric in r for r in res.values()):
                continue
            cmp_ = compare(res, metric)
            for m, r in res.items():
                long_rows.append([ds, m, metric, float(np.mean(r[metric])),
                                  float(np.std(r[metric], ddof=1)) if len(r[metric]) > 1 else 0.0,
                                  cmp_["p"][m], m == cmp_["best"]])
    raw = {f"{ds}/{m}/{k}": v for ds, res in all_results.items() for m, r in res.items()
           for k, v in r.items()}
    buf = io.BytesIO()
    np.savez_compressed(buf, **raw)
    cio.atomic_write_bytes(out_dir / "per_split.npz", buf.getvalue())
    cio.write_csv(out_dir / "metrics_long.csv",
                  ["dataset", "method", "metric", "mean", "std", "p_vs_best", "is_best"],
                  long_rows)
    _write_tables(out_dir, all_results, fit_times, [d for d, _ in methods])
    claims = _claims(all_results)
    cio.write_table(out_dir / "claims", ["dataset", "metric", "comparison", "mean_a", "mean_b",
                                         "p_value", "holds"], claims, digits=6)
    cio.write_json(out_dir / "provenance.json",
                   cio.provenance(config, seed=seed, wall_time_s=time.perf_counter() - t_start,
                                  extra={"datasets": info}))
    return {"results": all_results, "fit_times": fit_times, "claims": claims}


def _cell(res, metric, method, cmp_) -> str:
    if metric not in res.get(method, {}):
        return "-"
    v = float(np.mean(res[method][metric]))
    mark = "**" if method == cmp_["best"] else ("*" if cmp_["p"][method] >= 0.05 else "")
    # four decimals as in the paper, but significant digits for tiny values (LCCE ~ 1e-6)
    txt = f"{v:.4f}" if v == 0.0 or abs(v) >= 1e-3 else f"{v:.3e}"
    return f"{txt}{mark}"


def _write_tables(out_dir: Path, all_results, fit_times, method_names: Sequence[str]) -> None:
    for table, metrics in TABLES.items():
        header = ["Method"]
        cols = []
        for ds, res in all_results.items():
            for metric in metrics:
                if any(metric in r for r in res.values()):
                    header.append(f"{ds} {metric}")
                    cols.append((ds, metric, compare(res, metric)))
        rows = []
        for m in method_names:
            if not any(m in res for res in all_results.values()):
                continue
            rows.append([m] + [_cell(all_results[ds], metric, m, c) for ds, metric, c in cols])
        cio.write_table(out_dir / table, header, rows, latex=True)
    header = ["Method"] + [f"{ds} fit+predict (s)" for ds in fit_times]
    rows = [[m] + [fit_times[ds].get(m, float("nan")) for ds in fit_times]
            for m in method_names if any(m in t for t in fit_times.values())]
    cio.write_table(out_dir / "table2", header, rows, digits=2, latex=True)


def _claims(all_results) -> list[list[Any]]:
    """VR-SAG < SAG < TS (and the PS analogue) on LCCE and oracle Brier, with p-values."""
    rows = []
    chains = [("VR-SAG+TS", "SAG+TS"), ("SAG+TS", "Temperature scaling"),
              ("VR-SAG+TS", "Temperature scaling"), ("VR-SAG+PS", "SAG+PS"),
              ("SAG+PS", "Platt scaling"), ("VR-SAG+PS", "Platt scaling")]
    for ds, res in all_results.items():
        for metric in ("LCCE", "Brier", "ECE", "NLL"):
            for a, b in chains:
                if a not in res or b not in res or metric not in res[a]:
                    continue
                ma, mb = float(np.mean(res[a][metric])), float(np.mean(res[b][metric]))
                p = paired_pvalue(res[a][metric], res[b][metric])
                rows.append([ds, metric, f"{a} < {b}", ma, mb, p, bool(ma < mb and p < 0.05)])
    return rows


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog=f"experiments.{STUDY}", description=__doc__.split("\n")[0])
    scale = parser.add_mutually_exclusive_group()
    scale.add_argument("--quick", dest="scale", action="store_const", const="quick")
    scale.add_argument("--paper", dest="scale", action="store_const", const="paper")
    scale.add_argument("--smoke", dest="scale", action="store_const", const="smoke",
                       help=argparse.SUPPRESS)
    parser.set_defaults(scale="quick")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("figures") / STUDY)
    parser.add_argument("--n-splits", type=int, default=None, help="override the split count")
    args = parser.parse_args(argv)
    config = dict(CONFIGS[args.scale], scale=args.scale, seed=args.seed)
    if args.n_splits is not None:
        config["n_splits"] = args.n_splits
    return run(config, args.out)


if __name__ == "__main__":
    main()
