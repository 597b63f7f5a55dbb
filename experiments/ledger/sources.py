"""Where the ledger reads from: the committed study outputs (``figures/<study>/provenance.json``)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the checkout holding experiments/ (the ledger reads its committed figures/); installed
#: elsewhere (pip install .), the working directory, where the studies write figures/<study>/
_CHECKOUT = Path(__file__).resolve().parents[2]
ROOT = _CHECKOUT if (_CHECKOUT / "pyproject.toml").is_file() else Path.cwd()
FIGURES = ROOT / "figures"


def lookup(node: Any, key: str) -> Any:
    """``node`` followed along the ``/``-separated ``key``; a summary key that itself holds
    ``/`` (``"simulator/main"``, ``"simulator/main/paired"``) is matched by trying every
    split, shortest name first, backtracking when a shorter one leads nowhere."""

    def walk(node: Any, parts: list[str]) -> Any:
        if not parts:
            return node
        for j in range(1, len(parts) + 1):
            name = "/".join(parts[:j])
            if isinstance(node, dict) and name in node:
                child = node[name]
            elif isinstance(node, list) and name.isdigit() and int(name) < len(node):
                child = node[int(name)]
            else:
                continue
            try:
                return walk(child, parts[j:])
            except KeyError:
                continue
        raise KeyError(key)

    return walk(node, key.split("/"))


@dataclass
class Source:
    """A study's committed output: its summary, where it lives and at which scale."""

    study: str
    scale: str
    path: Path
    summary: dict[str, Any]

    def get(self, key: str) -> Any:
        """The value at a ``/``-separated key path inside the summary."""
        return lookup(self.summary, key)

    def cite(self, key: str) -> str:
        base = ROOT if self.path.is_relative_to(ROOT) else FIGURES.parent
        return f"{self.path.relative_to(base)}#summary/{key}"


def _parsed(path: Path) -> Any:
    """The JSON of ``path``, parsed once per content of the file (a digest of its bytes, so a
    rewritten file is parsed again however soon): the ledger cites the same few provenance
    files (up to 660 kB) in 1,700 rows, and parsing one per citation made a check of every row
    take 30 s. The parsed value is shared: only read it."""
    data = path.read_bytes()
    digest = hashlib.blake2b(data, digest_size=16).digest()
    if digest not in _PARSED:
        if len(_PARSED) >= 64:
            _PARSED.clear()
        _PARSED[digest] = json.loads(data)
    return _PARSED[digest]


#: parsed JSON files by the digest of their bytes (:func:`_parsed`)
_PARSED: dict[bytes, Any] = {}


def cited_value(source: str) -> Any:
    """The value a row's ``source`` points at: ``file#key``, or ``file#key_a minus key_b``
    for a difference the ledger computes from two summary values of one file, or
    ``file_a#key_a minus file_b#key_b`` for one between two files."""
    path, key = source.split("#", 1)
    node = _parsed(ROOT / path)
    if " minus " in key:
        a, b = key.split(" minus ")
        if "#" in b:
            path_b, key_b = b.split("#", 1)
            return lookup(node, a) - lookup(_parsed(ROOT / path_b), key_b)
        return lookup(node, a) - lookup(node, f"summary/{b}")
    return lookup(node, key)


def load(study: str, requires: str | None = None) -> Source | None:
    """The paper-scale output of ``study`` if committed, else the quick one, else None.

    ``requires``: a top-level summary key the claim reads; an output without it (or with it
    empty: e.g. ``vs_mcgrad`` of a run made without the optional ``mcgrad`` package) is
    skipped, and the next scale is read (its claims show as "not attempted: not run yet" if
    none has it).
    """
    for folder, scale in ((f"{study}_paper", "paper"), (study, "quick")):
        p = FIGURES / folder / "provenance.json"
        if p.exists():
            prov = json.loads(p.read_text())
            summary = prov.get("summary")
            if isinstance(summary, dict) and (requires is None or summary.get(requires) not in (None, [], {})):
                return Source(study, prov.get("scale", scale), p, summary)
    return None


def load_by_dataset(study: str, requires: str) -> list[tuple[Source, frozenset[str]]]:
    """Every committed output of a per-data-set ``study`` with the data sets the ledger reads
    from it, newest paper-scale first: ``<study>_paper_partial`` (the data sets a resumable
    paper-scale run has finished so far, written from its checkpoints), then the complete
    paper-scale output for the others, then the quick output for the data sets neither has (a
    world added since). Each row carries the scale of the output it came from. Data sets are
    the keys of the summary's ``info``."""
    out: list[tuple[Source, frozenset[str]]] = []
    seen: set[str] = set()
    for folder, scale in ((f"{study}_paper_partial", "paper"), (f"{study}_paper", "paper"), (study, "quick")):
        p = FIGURES / folder / "provenance.json"
        if not p.exists():
            continue
        prov = json.loads(p.read_text())
        summary = prov.get("summary")
        if not isinstance(summary, dict) or summary.get(requires) in (None, [], {}):
            continue
        have = frozenset(summary.get("info", {})) - seen
        if have:
            out.append((Source(study, prov.get("scale", scale), p, summary), have))
            seen |= have
    return out


#: committed outputs of a per-data-set study run at a data size other than its presets' (each
#: folder with the words its rows are told apart by): the AdAuction-like world and the null world
#: at the size of the paper's AdAuction data (15M exposures; ``--set sim=paper``), beside the
#: preset's smaller worlds
SIZE_RUNS: dict[str, tuple[tuple[str, str], ...]] = {
    "compare_calibrators": (("compare_calibrators_paper_15m", "the paper's data size (15M exposures)"),
                            ("compare_calibrators_paper_15m_null", "the paper's data size (15M exposures)"),
                            ("compare_calibrators_paper_15m_matched", "the paper's data size (15M exposures)"))}


def load_sizes(study: str, requires: str) -> list[tuple[Source, frozenset[str], str]]:
    """Every committed output of ``study`` at another data size (:data:`SIZE_RUNS`) whose summary
    has ``requires``: the output, its data sets (the keys of the summary's ``info``) and the size
    in words. Their rows stand beside the preset's, never in place of them."""
    out: list[tuple[Source, frozenset[str], str]] = []
    for folder, size in SIZE_RUNS.get(study, ()):
        p = FIGURES / folder / "provenance.json"
        if not p.exists():
            continue
        prov = json.loads(p.read_text())
        summary = prov.get("summary")
        if isinstance(summary, dict) and summary.get(requires) not in (None, [], {}):
            out.append((Source(study, prov.get("scale", "paper"), p, summary), frozenset(summary.get("info", {})),
                        size))
    return out


def every_size(study: str, requires: str) -> list[tuple[Source, frozenset[str], str]]:
    """:func:`load_by_dataset` (size words ``""``) followed by :func:`load_sizes`."""
    return [(s, d, "") for s, d in load_by_dataset(study, requires)] + load_sizes(study, requires)


