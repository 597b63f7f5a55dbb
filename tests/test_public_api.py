"""The public surface: what ``calib_jax`` exports is what its layers define, every exported
function says what it computes, and one name is used per calibrator across the registry and
the command line."""

from __future__ import annotations

import importlib
import inspect

import pytest

import calib_jax as cj

_LAYERS = ("groupstats", "partitions", "metrics", "inference", "decompositions", "losses")


def test_top_level_all_resolves_and_holds_every_metric_and_test():
    for name in cj.__all__:
        assert hasattr(cj, name), name
    assert len(set(cj.__all__)) == len(cj.__all__)
    for layer in ("metrics",):
        missing = set(importlib.import_module(f"calib_jax.{layer}").__all__) - set(cj.__all__)
        assert not missing, f"calib_jax.{layer} names missing from calib_jax: {sorted(missing)}"
    for name in ("spiegelhalter_z", "hosmer_lemeshow", "cox_calibration", "corp_test", "smooth_ece", "ici",
                 "skce", "ece_sweep", "multicalibration_error"):
        assert getattr(cj, name) is getattr(importlib.import_module(
            "calib_jax.inference" if name in ("spiegelhalter_z", "hosmer_lemeshow", "cox_calibration", "corp_test")
            else "calib_jax.metrics"), name)


@pytest.mark.parametrize("layer", _LAYERS)
def test_every_public_function_has_a_docstring_with_its_formula_or_arguments(layer):
    mod = importlib.import_module(f"calib_jax.{layer}")
    for name in mod.__all__:
        obj = getattr(mod, name)
        if inspect.ismodule(obj) or not callable(obj):
            continue
        doc = inspect.getdoc(obj) or ""
        assert len(doc) > 40, f"calib_jax.{layer}.{name} has no real docstring"


def test_one_name_per_calibrator_in_the_registry_and_the_cli():
    from calib_jax.calibrators import REGISTRY
    from calib_jax.logs.params import METHODS

    for cli_name, registry_name in METHODS.items():
        assert cli_name == registry_name and registry_name in REGISTRY


def test_cli_points_old_method_names_to_the_registry_name(tmp_path, capsys):
    from calib_jax.cli.commands import main

    log = tmp_path / "log.csv"
    log.write_text("p,y\n0.1,0\n0.8,1\n")
    with pytest.raises(SystemExit) as exc:
        main(["fit", str(log), "--score", "p", "--label", "y", "--method", "vrsag", "--save", str(tmp_path / "x")])
    assert exc.value.code == 2
    assert "'vrsag' is called 'vrsag_ts'" in capsys.readouterr().err


def test_parameter_files_with_the_old_cli_names_still_apply(tmp_path):
    import json

    from calib_jax.cli.commands import main

    log = tmp_path / "log.csv"
    rows = "\n".join(f"{p:.3f},{int(i % 3 == 0)}" for i, p in enumerate([0.05 + 0.9 * k / 59 for k in range(60)]))
    log.write_text("p,y\n" + rows + "\n")
    save = tmp_path / "h.json"
    assert main(["fit", str(log), "--score", "p", "--label", "y", "--method", "histogram_binning", "--quiet",
                 "--save", str(save)]) == 0
    spec = json.loads(save.read_text())
    assert spec["method"] == spec["registry_name"] == "histogram_binning"
    spec["method"] = "histogram"  # as written before the command took the registry's names
    save.write_text(json.dumps(spec))
    out = tmp_path / "out.csv"
    assert main(["apply", str(save), str(log), "--out", str(out), "--quiet"]) == 0
    assert len(out.read_text().splitlines()) == 61
