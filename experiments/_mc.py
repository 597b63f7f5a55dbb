"""Helpers shared by the Monte Carlo studies (Figs 4-6, Table 6): population designs,
checkpoint-hash records, design summaries with intervals, and the side-by-side table.

Not a study (no presets, no command line): the studies in ``mc_*.py`` import it, so no study
module serves as another one's library.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from calib_jax import montecarlo as mc
from experiments._study import Output

#: metrics compared pairwise against every other one
ANCHORS = ("lcce", "lcce_l1")
#: the paired comparisons a summary carries (the tables carry all)
HEADLINE = (("lcce", "ece"), ("lcce_l1", "ece"), ("lcce", "ece_sq"), ("lcce", "ece_plus"))
#: settings that do not change the trials (left out of the checkpoint hash)
NOT_HASHED = ("designs", "n_boot")


def design_world(design: str, seed: int, target_ctr: float,
                 scenario: mc.ScenarioConfig = mc.ScenarioConfig()) -> tuple[mc.FixedWorld | None, dict[str, Any]]:
    """The population law of ``design`` for studies that build their own trials:
    ``(world, info)`` with ``world`` the fixed design's law (``None`` for ``pooled``: the law
    is redrawn per trial) and ``info`` the provenance record, as in
    :func:`calib_jax.montecarlo.make_design_trial`."""
    if design == "fixed":
        world = mc.fixed_world(mc.world_key(seed), scenario, target_ctr=float(target_ctr))
        return world, {"design": design, "target_ctr": float(target_ctr),
                       "intercept": float(np.asarray(world.intercept))}
    if design == "pooled":
        return None, {"design": design, "base_ctr_range": list(scenario.base_ctr)}
    raise ValueError(f"this study supports the designs 'fixed' and 'pooled', got {design!r}")


def trial_config(config: Mapping[str, Any], record: Mapping[str, Any], *, drop: tuple[str, ...] = (),
                 **extra: Any) -> dict[str, Any]:
    """What a run's checkpoint hash records: the settings (but ``NOT_HASHED`` and ``drop``,
    which do not change the trials), the panel/design record and ``extra``."""
    skip = (*NOT_HASHED, *drop)
    return {**{k: v for k, v in config.items() if k not in skip}, **record, **extra}


def design_summary(rc: mc.RankConsistency, pairs: Any = HEADLINE, *, all_pairs: bool = False
                   ) -> dict[str, Any]:
    """JSON-able: rho and 95% interval of every metric and the headline paired differences
    (``"lcce - ece"`` etc., those present); with ``all_pairs`` also ``"paired_all"``, every
    anchor against every other metric (what a "LCCE is highest" claim is checked against)."""
    s = rc.summary()
    out = {"rho": s["rho"], "interval": s["interval"], "n_boot": s["n_boot"],
           "paired": {f"{a} - {b}": s["paired"][f"{a} - {b}"] for a, b in pairs
                      if f"{a} - {b}" in s["paired"]}}
    if all_pairs:
        out["paired_all"] = s["paired"]
    return out


def fmt_ci(x: float, lo: float, hi: float, signed: bool = False) -> str:
    f = "{:+.3f}" if signed else "{:.3f}"
    return f"{f.format(x)} [{f.format(lo)}, {f.format(hi)}]"


def headline_text(s: Mapping[str, Any]) -> str:
    """``LCCE r [lo, hi], ECE r [lo, hi], LCCE-ECE d [lo, hi]`` of a :func:`design_summary`."""
    parts = [f"{mc.DISPLAY.get(m, m)} {fmt_ci(s['rho'][m], *s['interval'][m])}" for m in ("lcce", "ece")
             if m in s["rho"]]
    if "lcce - ece" in s["paired"]:
        d = s["paired"]["lcce - ece"]
        parts.append(f"LCCE-ECE {fmt_ci(d['diff'], d['lo'], d['hi'], signed=True)}")
    return ", ".join(parts)


def designs_table(out: Output, stem: str, summaries: Mapping[str, Mapping[str, Any]]) -> None:
    """One row per metric, one ``rho [95% CI]`` column per design (:func:`design_summary`s)."""
    metrics = list(next(iter(summaries.values()))["rho"])
    header = ["metric", "label"] + [f"{d} rho [95% CI]" for d in summaries]
    rows = [[m, mc.DISPLAY.get(m, m)] + [fmt_ci(s["rho"][m], *s["interval"][m]) for s in summaries.values()]
            for m in metrics]
    out.table(stem, header, rows)


def run_designs(one_design: Callable[[str, Mapping[str, Any], Output], dict[str, Any]],
                config: Mapping[str, Any], out: Output) -> dict[str, Any]:
    """Run ``one_design(design, config, out)`` for every design of ``config["designs"]`` and
    write the side-by-side table (rho [95% CI] per design); ``{"designs": {design: summary}}``."""
    designs = {d: one_design(d, config, out) for d in config["designs"]}
    designs_table(out, "designs_side_by_side", designs)
    return {"designs": designs}


def write_matrix(out: Output, design: str, config: Mapping[str, Any], R: Any, names: list[str], *,
                 table: str, figure: str, title: str) -> None:
    """The Spearman matrix ``R`` of ``names`` as a table and an annotated heatmap; ``<design>``
    in ``title`` is replaced by the design in words (``fixed`` names its target CTR)."""
    from calib_jax.plotting.heatmap import SIGN_NOTE, annotated_heatmap

    out.table(table, ["metric", *names], [[names[i], *map(float, R[i])] for i in range(len(names))])
    what = {"fixed": f"fixed population, CTR {config['target_ctr']:.1%}", "pooled": "pooled populations"}[design]
    out.figure(annotated_heatmap(R, mc.display_names(names), title=title.replace("<design>", what),
                                 caption=SIGN_NOTE), figure)
