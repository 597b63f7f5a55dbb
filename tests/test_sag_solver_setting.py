"""The ``sag_solver`` setting of the SAG studies ablation and grouping: every preset holds the
lock-step solver (the library's default), ``--set sag_solver=sequential`` gives the
configuration of the runs before 2026-12-05 (the key stays out at its optional default, so
their checkpoints are found), the value is checked against its domain, and it reaches every
SAG fit."""

from __future__ import annotations

import pytest

from calib_jax.calibrators import sag
from experiments import _study, registry


class _Reached(Exception):
    pass


@pytest.mark.parametrize("study", ["ablation", "grouping"])
def test_the_sag_solver_setting_reaches_the_first_sag_fit(study, tmp_path, monkeypatch):
    entry = registry.get(study)
    for scale in ("--smoke", "--quick", "--paper"):
        _, _, preset = _study.resolve(entry, [scale, "--show-config"])
        assert preset["sag_solver"] == "lockstep", scale
        _, _, sequential = _study.resolve(entry, [scale, "--show-config", "--set", "sag_solver=sequential"])
        assert sequential == {k: v for k, v in preset.items() if k != "sag_solver"}, scale
    with pytest.raises(ValueError, match="'sag_solver' must be one of 'sequential', 'lockstep'"):
        _study.resolve(entry, ["--smoke", "--show-config", "--set", "sag_solver=fast"])
    for solver in ("sequential", "lockstep"):
        module, _, chosen = _study.resolve(entry, ["--smoke", "--set", f"sag_solver={solver}"])

        def first_fit(*args, **kwargs):  # stop at the first fit: only the option's path is checked
            raise _Reached(kwargs.get("solver"))

        monkeypatch.setattr(sag, "fit", first_fit)
        with pytest.raises(_Reached) as got:
            module.run(chosen, _study.Output(tmp_path / solver, study=study, scale="smoke", progress=False))
        assert got.value.args == (solver,)
