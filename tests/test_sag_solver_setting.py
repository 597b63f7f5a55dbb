"""The ``sag_solver`` setting of the SAG studies that do not hold it in a preset yet (ablation,
grouping): checked against its domain, kept out of the configuration at its default (so the
committed runs keep their configurations and checkpoints), and handed to every SAG fit."""

from __future__ import annotations

import pytest

from calib_jax.calibrators import sag
from experiments import _study, registry


class _Reached(Exception):
    pass


@pytest.mark.parametrize("study", ["ablation", "grouping"])
def test_the_sag_solver_setting_reaches_the_first_sag_fit(study, tmp_path, monkeypatch):
    entry = registry.get(study)
    _, _, plain = _study.resolve(entry, ["--smoke", "--show-config"])
    assert "sag_solver" not in plain
    _, _, at_default = _study.resolve(entry, ["--smoke", "--show-config", "--set", "sag_solver=sequential"])
    assert at_default == plain
    _, _, paper = _study.resolve(entry, ["--paper", "--show-config"])
    assert "sag_solver" not in paper  # no preset switched: the committed outputs are sequential
    with pytest.raises(ValueError, match="'sag_solver' must be one of 'sequential', 'lockstep'"):
        _study.resolve(entry, ["--smoke", "--show-config", "--set", "sag_solver=fast"])
    module, _, chosen = _study.resolve(entry, ["--smoke", "--set", "sag_solver=lockstep"])
    assert chosen == {**plain, "sag_solver": "lockstep"}

    def first_fit(*args, **kwargs):  # stop at the first fit: only the option's path is checked
        raise _Reached(kwargs.get("solver"))

    monkeypatch.setattr(sag, "fit", first_fit)
    with pytest.raises(_Reached) as got:
        module.run(chosen, _study.Output(tmp_path / "o", study=study, scale="smoke", progress=False))
    assert got.value.args == ("lockstep",)
