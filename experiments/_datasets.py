"""The data sets of the calibrator studies: backbone outputs of the simulator worlds and of
the Open Bandit log (no CLI; the studies import it).

Worlds of the ad-auction simulator (same simulated market, different backbones):

* ``simulator`` — the default backbone (the latent regime is not an input; after a global
  calibrator the residual miscalibration is by regime, which the embedding does not encode,
  so no grouping on the embedding can find it).
* ``simulator_grouping`` — the "grouping world": the regime is an input of the backbone
  (its embedding carries it) and the backbone's training negatives are down-sampled at a
  rate that differs by regime (:attr:`calib_jax.data.backbone.BackboneConfig.segment_neg_rates`),
  so its logit is miscalibrated by regime in a way one global calibrator cannot remove,
  while semantic grouping on the embedding can. Segment-wise negative down-sampling is a
  common production practice whose global correction (He et al., ADKDD 2014) leaves exactly
  this residual.

``open_bandit`` is the real log shipped in ``../shared/data/open_bandit``: both campaigns and
both logging policies, 40,000 impressions and 207 clicks, no oracle.
"""

from __future__ import annotations

import dataclasses
from typing import Any

#: backbone overrides of each simulator world
WORLDS: dict[str, dict[str, Any]] = {
    "simulator": {},
    "simulator_grouping": {"extra_fields": ("regime",), "segment_neg_rates": (1.0, 0.5, 0.25)},
}
DATASETS = (*WORLDS, "open_bandit")


def world_backbone(world: str, base: Any = None) -> Any:
    """The :class:`~calib_jax.data.backbone.BackboneConfig` of a simulator ``world``."""
    from calib_jax.data import backbone as bb

    if world not in WORLDS:
        raise ValueError(f"unknown world {world!r}; known: {sorted(WORLDS)}")
    cfg = base if base is not None else bb.BackboneConfig()
    w = WORLDS[world]
    if w:
        cfg = dataclasses.replace(cfg, fields=tuple(cfg.fields) + tuple(w["extra_fields"]),
                                  segment_neg_rates=tuple(w["segment_neg_rates"]))
    return cfg


def load_dataset(name: str, *, seed: int, sim: str = "default") -> dict[str, Any] | None:
    """Backbone outputs of ``name`` (a world of :data:`WORLDS` or ``"open_bandit"``) as a dict
    with ``out`` (val / holdout / test :class:`~calib_jax.data.backbone.SplitOutputs`), the
    Neural Calibration field columns, the grouping field of Table 3 and whether an oracle
    exists. ``sim``: ``"tiny" | "default" | "paper"`` simulator scale. ``None`` when the
    Open Bandit files are missing."""
    from calib_jax.data import backbone as bb

    if name in WORLDS:
        from calib_jax.data import simulator as simm

        base = bb.BackboneConfig(hidden=(32,), embedding_dim=16) if sim == "tiny" else None
        cfg = world_backbone(name, base)
        sim_cfg = {"tiny": simm.tiny_config, "default": simm.default_config,
                   "paper": simm.paper_config}[sim]()
        out = bb.load_or_train(sim_cfg, cfg, seed=seed)
        nc_fields, group_field = bb.DEFAULT_FIELDS, "media"
    elif name == "open_bandit":
        from calib_jax.data import open_bandit as ob

        try:
            out = ob.load_or_train_open_bandit(policy="all", campaign="all", seed=seed)
        except (FileNotFoundError, ValueError) as err:
            print(f"[datasets] Open Bandit data unavailable, skipped: {err}")
            return None
        nc_fields, group_field = ob.FIELD_NAMES, "item_id"
    else:
        raise ValueError(f"unknown dataset {name!r}; known: {DATASETS}")
    names = list(out.field_names)
    return dict(out=out, nc_cols=[names.index(f) for f in nc_fields],
                group_col=names.index(group_field), group_field=group_field,
                has_oracle=out.test.oracle is not None)
