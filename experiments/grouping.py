"""Fig. 7 of "Calibration is Grouping" (Appendix H.3): how homogeneous are the groups?

SAG+TS (lambda_v = 0) and VR-SAG+TS (lambda_v = 0.5) are fitted on D_val of the simulator;
on the test split we compare three groupings -- a categorical field (``media``), the SAG
groups and the VR-SAG groups (partition 0, arg-max membership; the soft version uses the
memberships themselves) -- by the within-group variance
:math:`\\sum_k w_k \\sigma_k^2` (eq. 9) of the backbone scores and of the oracle CTRs.

Outputs in ``figures/grouping/``: ``fig7.png/.pdf`` (scatter of backbone estimate vs true
CTR coloured by group, one panel per grouping, plus the variance bars),
``within_group_variance.csv/.md`` and ``provenance.json``.

Usage::

    python -m experiments.grouping            # quick
    python -m experiments.grouping --paper    # full D_val, more L-BFGS steps
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from calib_jax import losses
from calib_jax.calibrators import sag
from calib_jax.plotting.grouping import grouping_figure
from experiments._study import Output, entry_point

PRESETS: dict[str, dict[str, Any]] = {
    "smoke": dict(sim="tiny", max_val=1_000, n_steps=3, n_groups=2, n_partitions=2,
                  lam=0.1, lam_v=0.5, field="media"),
    "quick": dict(sim="default", max_val=20_000, n_steps=30, n_groups=3, n_partitions=10,
                  lam=0.1, lam_v=0.5, field="media"),
    "paper": dict(sim="default", max_val=None, n_steps=100, n_groups=3, n_partitions=10,
                  lam=0.1, lam_v=0.5, field="media"),
}
HEADER = ("grouping", "groups", "memberships", "score_within_var", "oracle_within_var")


def within_variances(probs: np.ndarray, oracle: np.ndarray, memberships: np.ndarray
                     ) -> tuple[float, float]:
    """(score, oracle) within-group variance for one (n, K) membership matrix (eq. 9)."""
    return (float(losses.within_group_variance(probs, memberships)),
            float(losses.within_group_variance(oracle, memberships)))


def run(config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    """Fit SAG and VR-SAG, compare the groupings; write the table and ``fig7`` through ``out``."""
    from experiments._datasets import load_dataset

    seed = int(config["seed"])
    backbone = load_dataset("simulator", seed=seed, sim=config["sim"])["out"]
    val, test = backbone.val, backbone.test
    idx = np.arange(len(val))
    if config["max_val"] is not None and len(val) > config["max_val"]:
        idx = np.sort(np.random.default_rng(seed).choice(len(val), config["max_val"],
                                                         replace=False))
    fitted = {}
    for name, lam_v in (("SAG", 0.0), ("VR-SAG", config["lam_v"])):
        fitted[name] = sag.fit(val.logits[idx], val.labels[idx],
                               context={"embedding": val.embedding[idx]}, variant="ts",
                               n_groups=config["n_groups"], n_partitions=config["n_partitions"],
                               lam=config["lam"], lam_v=lam_v, n_steps=config["n_steps"],
                               key=jax.random.key(seed))
    p = test.probs.astype(np.float64)
    pi = test.oracle.astype(np.float64)
    field = test.fields[:, list(backbone.field_names).index(config["field"])]
    n_field = int(field.max()) + 1
    onehot = lambda g, k: np.eye(k)[g]
    groupings_hard = {f"field ({config['field']})": field}
    rows = []
    sv, ov = within_variances(p, pi, onehot(field, n_field))
    rows.append([f"field ({config['field']})", n_field, "hard", sv, ov])
    for name, prm in fitted.items():
        q_all = np.asarray(sag.memberships(prm, test.embedding), np.float64)  # (P, n, K)
        hard = np.stack([within_variances(p, pi, onehot(q.argmax(1), q.shape[1])) for q in q_all])
        soft = np.stack([within_variances(p, pi, q) for q in q_all])
        rows.append([name, config["n_groups"], "hard (mean over partitions)", *hard.mean(0)])
        rows.append([name, config["n_groups"], "soft (mean over partitions)", *soft.mean(0)])
        groupings_hard[name] = q_all[0].argmax(1)
    rows.append(["none (one group)", 1, "-", float(np.var(p)), float(np.var(pi))])
    out.table("within_group_variance", HEADER, rows, digits=8)
    names = list(groupings_hard)
    hard_rows = {r[0]: r for r in rows if r[2].startswith("hard")}
    out.figure(grouping_figure(p, pi, groupings_hard, [hard_rows[n][3] for n in names],
                               [hard_rows[n][4] for n in names]), "fig7")
    return {"mean_estimate": float(p.mean()), "mean_oracle": float(pi.mean()),
            "header": list(HEADER), "rows": rows}


def report(summary: Mapping[str, Any]) -> str:
    hard = [r for r in summary["rows"] if r[2].startswith("hard")]
    best = min(hard, key=lambda r: r[4])
    return f"lowest oracle within-group variance (hard groups): {best[0]} ({best[4]:.3g})"


main = entry_point(__name__)

if __name__ == "__main__":
    main()
