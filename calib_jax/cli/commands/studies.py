"""``calib-jax studies``: the paper studies this repository reproduces, and how to run each."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

__all__ = ["NAME", "Options", "add_parser", "files", "run"]

NAME = "studies"


@dataclasses.dataclass(frozen=True)
class Options:
    """``calib-jax studies`` takes no options."""


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``studies`` subcommand's parser (added to ``calib-jax``'s subparsers)."""
    return sub.add_parser("studies", help="list the paper studies this repository reproduces")


def files(opts: Options) -> Any:
    """``studies`` reads and writes no file."""
    from calib_jax.cli.common import Files

    return Files()


def run(opts: Options | None = None) -> int:
    """Print the studies of ``experiments/`` (name, paper place, title, command); 1 where the
    repository is not importable."""
    try:
        from experiments import registry
    except ImportError:
        print("the paper studies live in the repository's experiments/ package, which is not importable here "
              "(installed package without the repository): clone the repository and run from its root",
              file=sys.stderr)
        return 1
    rows = [(s.name, s.reproduces, s.title, s.command()) for s in registry.STUDIES]
    w = [max(len(r[i]) for r in rows) for i in range(2)]
    print(f"{'study':<{w[0]}}  {'reproduces':<{w[1]}}  what / command")
    for name, rep, title, cmd in rows:
        print(f"{name:<{w[0]}}  {rep:<{w[1]}}  {title}\n{'':<{w[0] + w[1] + 4}}$ {cmd}")
    return 0
