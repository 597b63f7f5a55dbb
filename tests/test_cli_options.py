"""Each subcommand's parser and its typed options name the same things: every option the parser
reads becomes a field of the command's frozen ``Options`` (and no field is left without an
option), so nothing below the parser reads the argparse namespace."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from calib_jax.cli.commands.program import SUBCOMMANDS, build_parser, run_parsed
from calib_jax.logs.options import EvaluateOptions, FitOptions, options_from


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    ap = build_parser()
    action = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.parametrize("module", SUBCOMMANDS, ids=lambda m: m.NAME)
def test_parser_and_options_name_the_same_fields(module):
    parser = _subparsers()[module.NAME]
    dests = {a.dest for a in parser._actions if a.dest != "help"}
    fields = {f.name for f in dataclasses.fields(module.Options)}
    assert dests == fields, f"{module.NAME}: parser only {dests - fields}, options only {fields - dests}"


def test_options_are_frozen_and_repeatable_options_become_tuples():
    ns = build_parser().parse_args(["evaluate", "log.csv", "--score", "p", "--label", "y", "--field", "a",
                                    "--field", "b", "--spark-conf", "k=v"])
    opts = options_from(EvaluateOptions, ns)
    assert opts.field == ("a", "b") and opts.spark_conf == ("k=v",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.score = "q"  # type: ignore[misc]


def test_every_subcommand_is_dispatched_to_its_own_run(monkeypatch):
    seen = []
    for module in SUBCOMMANDS:
        monkeypatch.setattr(module, "run", lambda opts, name=module.NAME: seen.append((name, type(opts))) or 0)
    argv = {"evaluate": ["evaluate", "l.csv"], "fit": ["fit", "l.csv", "--method", "platt", "--save", "p.json"],
            "apply": ["apply", "p.json", "l.csv", "--out", "o.csv"], "simulate": ["simulate", "--out", "o.parquet"],
            "sql": ["sql", "--table", "t", "--score", "p", "--label", "y"], "merge": ["merge", "s.npz"],
            "compare": ["compare", "l.csv", "--score", "a", "--score", "b"], "studies": ["studies"]}
    for module in SUBCOMMANDS:
        assert run_parsed(build_parser().parse_args(argv[module.NAME])) == 0
    assert seen == [(m.NAME, m.Options) for m in SUBCOMMANDS]
    assert dict(seen)["fit"] is FitOptions
