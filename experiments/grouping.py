"""Fig. 7 of "Calibration is Grouping" (Appendix H.3): how homogeneous are the groups?

SAG+TS (lambda_v = 0, eq. 5) and VR-SAG+TS (lambda_v = 0.5, eq. 11) are fitted on a D_val of
each simulator world; on the test split we compare three groupings -- a categorical field
(``media``), the SAG groups and the VR-SAG groups (arg-max membership of every partition,
averaged over the partitions; the soft version uses the memberships themselves) -- by the
within-group variance :math:`\\sum_k w_k \\sigma_k^2` (eq. 9) of the scores the calibrators
see and of the oracle CTRs. The paper's claim is that VR-SAG's groups have the lowest
within-group variance of the true CTR.

Design (a paired comparison with its interval; the paper shows one fit): ``n_fits`` fits of
both methods, fit ``h`` on its own D_val of the same size and with its own PRNG key, crossed
with ``n_folds`` disjoint folds of the test split. Fit 0 uses the log's D_val (subsampled to
``max_val`` rows if set); fits 1, 2, ... use fresh impressions of the same world, logged after
the backbone's log (:func:`experiments._datasets.fitting_sets`), each its own disjoint
slice, so the fits are independent draws of "a D_val of this size". SAG and VR-SAG of fit
``h`` share the data and the key. For each pair of groupings, the table of differences
``d[h, s]`` gets the crossed interval of
:func:`experiments._pipelines.crossed_t_interval` (fit and evaluation variance both counted).

Worlds: the matched AdAuction-like world (the comparison's world where the paper's
mechanism can act), the grouping world and the null world (the variance penalty acts on any
embedding that predicts the score, so all three can express the claim). In the AdAuction-like
worlds the score is the production pCTR, as in the comparison.

Outputs in ``figures/grouping/`` (``figures/grouping_paper/`` at paper scale):
``fig7.png/.pdf`` (first world, fit 0: scatter of score vs true CTR coloured by group, one
panel per grouping, plus the variance bars), ``fig7_<world>.png/.pdf`` for the others,
``within_group_variance.csv/.md`` (means over fits x folds), ``differences.csv/.md`` (paired
differences with intervals) and ``provenance.json`` (with per-world phase seconds).

Departures from the paper: the paper's Fig 7 is one fit on its AdAuction data; here each
world gets ``n_fits`` independent fits so that "lower" has an interval, and the data are the
simulator's stand-ins for AdAuction.

Usage::

    python -m experiments run grouping --quick
    python -m experiments run grouping --paper    # full D_val, 100 L-BFGS steps, 10 x 10
    python -m experiments run grouping --paper --set sag_solver=sequential  # the runs before 2026-12-05

Solver: every preset fits SAG and VR-SAG with the lock-step solver (``sag_solver="lockstep"``
since 2026-12-05, :data:`OPTIONAL_SETTINGS`), the library's default: a fit's ten partitions
evaluated together, one pass over the embedding per evaluation. Rerun both ways at one commit
on one machine (``benchmarks/results/grouping_solver_rerun.md``), the 24 paired differences
moved by at most 0.20 of their intervals' half-widths (median 0.05) and all kept their side of
0; the rows of no SAG fit repeated to the digit. The fits took 0.82-0.98 of the sequential
fits' seconds (light tests beside the lock-step run).

Another CPU type: the null world trains its backbone, and XLA:CPU's code for another vector
width trains another one. The sequential rerun on an AMD EPYC without AVX-512 against the
committed run of an Intel Xeon with it (``benchmarks/results/grouping_machine_rerun.md``) moved
the null world's score variances by 2.3% and turned its VR-SAG - SAG difference of the oracle
variances from "VR-SAG higher" to "not told apart" (the ledger row from refuted to
inconclusive); the matched and grouping worlds, scored by the simulated production pCTR, moved
only through the SAG fits.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from calib_jax import losses
from calib_jax.calibrators import sag
from calib_jax.plotting.grouping import grouping_figure
from experiments._pipelines import crossed_t_interval
from experiments._study import Output, entry_point

STUDY = "grouping"
_WORLDS = ("simulator_matched", "simulator_grouping", "simulator")
# the lock-step SAG solver in every preset (module docstring, "Solver")
_COMMON: dict[str, Any] = dict(n_groups=3, n_partitions=10, lam=0.1, lam_v=0.5, field="media", sag_solver="lockstep")
PRESETS: dict[str, dict[str, Any]] = {
    "smoke": dict(_COMMON, worlds=("simulator",), sim="tiny", max_val=1_000, n_steps=3, n_groups=2,
                  n_partitions=2, n_fits=2, n_folds=2),
    "quick": dict(_COMMON, worlds=_WORLDS, sim="default", max_val=20_000, n_steps=30, n_fits=3, n_folds=5),
    "paper": dict(_COMMON, worlds=_WORLDS, sim="default", max_val=None, n_steps=100, n_fits=10, n_folds=10,
                  checkpoint=True),
}
#: settings that are in a configuration only at a value other than this default
#: (``experiments._study.apply_overrides``): ``sag_solver``, the L-BFGS solver of the SAG /
#: VR-SAG fits (:data:`calib_jax.calibrators.sag.SOLVERS`; ``"sequential"``, the solver of
#: every run before 2026-12-05, or ``"lockstep"``, every preset's since, equal to it up to
#: float32 rounding of the batched sums). At ``"sequential"`` the key stays out of the
#: configuration, so the earlier runs' configurations and checkpoints are reproduced.
OPTIONAL_SETTINGS = {"sag_solver": "sequential"}
HEADER = ("world", "grouping", "groups", "memberships", "score_within_var", "oracle_within_var")
DIFF_HEADER = ("world", "comparison", "memberships", "quantity", "diff", "lo", "hi", "n_fits", "n_folds", "df",
               "share_fit")
#: the paired comparisons of the claim (A - B < 0: A's groups are more homogeneous)
COMPARISONS = (("VR-SAG", "SAG"), ("VR-SAG", "field"), ("SAG", "field"))
METHODS = (("SAG", 0.0), ("VR-SAG", None))  # None: the preset's lam_v


def within_variances(probs: np.ndarray, oracle: np.ndarray, memberships: np.ndarray
                     ) -> tuple[float, float]:
    """(score, oracle) within-group variance for one (n, K) membership matrix (eq. 9)."""
    return (float(losses.within_group_variance(probs, memberships)),
            float(losses.within_group_variance(oracle, memberships)))


def fold_variances(values: np.ndarray, memberships: np.ndarray, folds: np.ndarray) -> np.ndarray:
    r"""Within-group variance (eq. 9) of ``values`` on each fold, for each partition.

    :math:`W_{ps} = \sum_k \hat w_k \hat\sigma_k^2` over the rows of fold ``s`` under the
    memberships of partition ``p`` (:func:`calib_jax.losses.within_group_variance` with the
    fold's indicator as the weights), in one compiled program (partitions one after another,
    folds batched). Invalid input gives NaN (the library's checks under ``jit``).

    Args:
      values: (n,) probabilities in [0, 1].
      memberships: (P, n, K) soft or one-hot memberships.
      folds: (S, n) 0/1 fold indicators.

    Returns:
      (P, S) float64 array.

    Example:
      >>> import numpy as np
      >>> v = np.array([0.1, 0.3, 0.6, 0.8])
      >>> q = np.array([[[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]]])
      >>> fold_variances(v, q, np.ones((1, 4))).round(4).tolist()
      [[0.01]]
    """
    return np.asarray(_fold_variances(np.asarray(values, np.float32), np.asarray(memberships, np.float32),
                                      np.asarray(folds, np.float32)), np.float64)


@jax.jit
def _fold_variances(values: jax.Array, memberships: jax.Array, folds: jax.Array) -> jax.Array:
    per_fold = jax.vmap(lambda v, q, w: losses.within_group_variance(v, q, weights=w), in_axes=(None, None, 0))
    return jax.lax.map(lambda q: per_fold(values, q, folds), memberships)


def run_world(world: str, config: Mapping[str, Any], key: jax.Array) -> dict[str, Any]:
    """Fit both methods ``n_fits`` times on ``world`` and measure every grouping on every fold.

    Returns ``{"var": {(grouping, memberships): (H, S, 2) score/oracle variances (partition
    mean)}, "fig": (p, pi, hard groupings of fit 0), "info": {...}}``."""
    from experiments._datasets import fitting_sets, load_dataset

    t0 = time.perf_counter()
    data = load_dataset(world, seed=int(config["seed"]), sim=config["sim"])
    backbone = data["out"]
    test = backbone.test
    sets, n_val = fitting_sets(world, backbone, seed=int(config["seed"]), n_sets=int(config["n_fits"]),
                               max_rows=config["max_val"], sim=config["sim"])
    phase = {"data": time.perf_counter() - t0}
    p = test.probs.astype(np.float64)
    pi = test.oracle.astype(np.float64)
    S, H = int(config["n_folds"]), int(config["n_fits"])
    fold_of = np.random.default_rng(int(config["seed"])).permutation(len(test)) % S
    folds = (fold_of[None, :] == np.arange(S)[:, None]).astype(np.float32)
    field = test.fields[:, list(backbone.field_names).index(config["field"])]
    n_field = int(field.max()) + 1
    field_q = np.eye(n_field, dtype=np.float32)[field][None]  # (1, n, K)

    def both(q: np.ndarray) -> np.ndarray:  # (S, 2): partition means of score and oracle variance
        return np.stack([fold_variances(p, q, folds).mean(0), fold_variances(pi, q, folds).mean(0)], -1)

    fixed = {("field", "hard"): both(field_q),
             ("none", "-"): both(np.ones((1, len(test), 1), np.float32))}
    var = {k: np.broadcast_to(v, (H, *v.shape)).copy() for k, v in fixed.items()}
    fig_groups = {f"field ({config['field']})": field}
    t1, fit_s = time.perf_counter(), 0.0
    keys = jax.random.split(key, H)
    for name, lam_v in METHODS:
        hard_h, soft_h = [], []
        for h, (logits, labels, embedding) in enumerate(sets):
            tf = time.perf_counter()
            prm = sag.fit(logits, labels, context={"embedding": embedding}, variant="ts",
                          n_groups=config["n_groups"], n_partitions=config["n_partitions"], lam=config["lam"],
                          lam_v=config["lam_v"] if lam_v is None else lam_v, n_steps=config["n_steps"],
                          key=keys[h], solver=config.get("sag_solver", OPTIONAL_SETTINGS["sag_solver"]))
            q = np.asarray(sag.memberships(prm, test.embedding), np.float32)  # (P, n, K)
            fit_s += time.perf_counter() - tf
            hard_h.append(both(np.eye(q.shape[2], dtype=np.float32)[q.argmax(2)]))
            soft_h.append(both(q))
            if h == 0:
                fig_groups[name] = q[0].argmax(1)
        var[(name, "hard")] = np.stack(hard_h)
        var[(name, "soft")] = np.stack(soft_h)
    phase["fits"] = fit_s
    phase["evaluation"] = time.perf_counter() - t1 - fit_s
    info = {"n_val": n_val, "n_test": len(test), "n_field_groups": n_field, "phase_seconds": phase}
    return {"var": var, "fig": (p, pi, fig_groups), "info": info}


def _run_or_resume(world: str, i: int, config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    """:func:`run_world` for the ``i``-th world (key ``fold_in(seed, i)``), or its checkpoint
    (paper preset or ``--resume``: one pickle per world, keyed by the configuration without
    the world list and by ``(world, i)``)."""
    r = out.checkpointed(config, "worlds", "worlds", world, [world, i], lambda: run_world(
        world, config, jax.random.fold_in(jax.random.key(int(config["seed"])), i)))
    assert r is not None
    return r


def differences(world: str, var: Mapping[tuple[str, str], np.ndarray]) -> list[list[Any]]:
    """Rows of :data:`DIFF_HEADER`: each comparison of :data:`COMPARISONS` (hard and soft
    memberships where both sides have them) on the score and oracle variances, with the
    crossed interval over fits x folds."""
    rows = []
    for a, b in COMPARISONS:
        for mem in ("hard", "soft"):
            if (a, mem) not in var or (b, mem) not in var:
                continue
            for j, quantity in enumerate(("score", "oracle")):
                c = crossed_t_interval(var[(a, mem)][..., j] - var[(b, mem)][..., j])
                rows.append([world, f"{a} - {b}", mem, quantity, c["diff"], c["lo"], c["hi"], c["n_fits"],
                             c["n_splits"], c["df"], c["share_fit"]])
    return rows


def run(config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    """Every world of ``config["worlds"]``: the table, the paired differences and ``fig7``."""
    rows, diffs, infos = [], [], {}
    for i, world in enumerate(config["worlds"]):
        r = _run_or_resume(world, i, config, out)
        infos[world] = r["info"]
        groups = {"field": r["info"]["n_field_groups"], "none": 1}
        for (name, mem), v in r["var"].items():
            label = f"field ({config['field']})" if name == "field" else "none (one group)" if name == "none" else name
            rows.append([world, label, groups.get(name, config["n_groups"]),
                         mem if name in ("field", "none") else f"{mem} (mean over partitions)",
                         *v.reshape(-1, 2).mean(0).tolist()])
        diffs += differences(world, r["var"])
        p, pi, fig_groups = r["fig"]
        mine = {k[0]: v.reshape(-1, 2).mean(0) for k, v in r["var"].items() if k[1] in ("hard",)}
        order = ["field", *(m for m, _ in METHODS)]
        out.figure(grouping_figure(p, pi, fig_groups, [float(mine[n][0]) for n in order],
                                   [float(mine[n][1]) for n in order]), "fig7" if i == 0 else f"fig7_{world}")
    out.record["worlds"] = infos
    out.table("within_group_variance", HEADER, rows, digits=8)
    out.table("differences", DIFF_HEADER, diffs, digits=8)
    return {"header": list(HEADER), "rows": rows, "diff_header": list(DIFF_HEADER), "differences": diffs,
            "info": infos}


def report(summary: Mapping[str, Any]) -> str:
    d = {(r[0], r[1], r[2], r[3]): r for r in summary["differences"]}
    parts = []
    for world in dict.fromkeys(r[0] for r in summary["differences"]):
        r = d.get((world, "VR-SAG - SAG", "hard", "oracle"))
        if r is not None:
            parts.append(f"{world}: VR-SAG - SAG {r[4]:+.2e} [{r[5]:+.2e}, {r[6]:+.2e}]")
    return "oracle within-group variance (hard groups); " + "; ".join(parts)


main = entry_point(__name__)

if __name__ == "__main__":
    main()
