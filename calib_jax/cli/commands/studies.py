"""``calib-jax studies``: where the paper studies are listed. They belong to the research
package ``experiments`` (installed beside the library), whose own command lists and runs them:
``calib-jax-studies list`` (``python -m experiments list``); the library does not import it."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

__all__ = ["NAME", "Options", "POINTER", "add_parser", "files", "run"]

NAME = "studies"
#: what ``calib-jax studies`` prints
POINTER = ("the paper studies have their own command: `calib-jax-studies list` lists them with their commands, "
           "`calib-jax-studies run NAME` runs one (the same as `python -m experiments list` / `run NAME` in the "
           "repository)")


@dataclasses.dataclass(frozen=True)
class Options:
    """``calib-jax studies`` takes no options."""


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``studies`` subcommand's parser (added to ``calib-jax``'s subparsers)."""
    return sub.add_parser("studies", help="where the paper studies are listed (calib-jax-studies list)")


def files(opts: Options) -> Any:
    """``studies`` reads and writes no file."""
    from calib_jax.logs.common import Files

    return Files()


def run(opts: Options | None = None) -> int:
    """Print where the studies are listed (:data:`POINTER`); 0."""
    print(POINTER)
    return 0
