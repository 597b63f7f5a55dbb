"""The findings page (``docs/findings.md``) and the README's headline: one row per question each
paper asks (:data:`~experiments.ledger.questions.QUESTIONS`), answered from the claims ledger.

Every number is read from the committed ledger (``figures/claims/claims.csv``, or rows given to
:func:`findings_table`), the relative effects' denominators from the record each row cites; a
ledger without one of its columns or an unknown question id is a ``ValueError``, never an empty
page.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from experiments.ledger import sources
from experiments.ledger.questions import (
    ANSWERS,
    CANNOT_TELL_Q,
    FAR_SMALLER_Q,
    NOT_EXPRESSIBLE_Q,
    NOT_REPRODUCED_Q,
    QUESTIONS,
    REPRODUCES_Q,
    Question,
    answer,
    check_ledger,
    effect,
    evidence,
    paper_effect,
    question,
    tally,
    where,
)
from experiments.ledger.rows import HEADER, NULL_CONTROL, PAPERS
from experiments.ledger.rule import REFUTED, REPRODUCES, as_number
from experiments.ledger.worlds import MECHANISM_WORDS


def read_ledger(path: Path | None = None) -> list[dict[str, str]]:
    """The committed ledger's rows as dicts (strings, as written), checked for every column.

    Args:
        path: a ``claims.csv`` (default: ``figures/claims/claims.csv`` of the checkout).

    Returns:
        One dict per row; ``ValueError`` when the header lacks a column of the ledger.

    Example:
        >>> len(read_ledger()) > 100
        True
    """
    path = path or sources.FIGURES / "claims" / "claims.csv"
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [h for h in HEADER if h not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: the ledger lacks columns: {', '.join(missing)}")
        rows = list(reader)
    check_ledger(rows)
    return rows


def fmt(q: Question, e: tuple[float, float | None, float | None] | None) -> str:
    """An effect as the page prints it: a signed percentage for a relative effect, else 3 significant
    digits, with its 95% interval in brackets.

    Args:
        q: the question (``q.relative`` picks the form).
        e: ``(estimate, lo, hi)`` from :func:`~experiments.ledger.questions.effect`, or ``None``.

    Returns:
        e.g. ``"-0.052% [-0.12%, +0.017%]"``; ``"-"`` without a number; ``"+2.32 (exact)"`` for a
        computation without sampling, whose interval is the number itself.

    Example:
        >>> fmt(question("000-lcce"), (0.0123, 0.011, 0.0141))
        '+0.0123 [+0.011, +0.0141]'
        >>> fmt(question("004-lab"), (2.3202, 2.3202, 2.3202))
        '+2.32 (exact)'
    """
    if e is None:
        return "-"

    def one(x: float) -> str:
        if not q.relative:
            return f"{x:+.3g}"
        return f"{100 * x:+.0f}%" if abs(x) >= 0.1 else f"{100 * x:+.2g}%"

    x, lo, hi = e
    if lo is None or hi is None:
        return one(x) + " (no interval)"
    return one(x) + (" (exact)" if lo == hi == x else f" [{one(lo)}, {one(hi)}]")


def _label(q: Question, r: Mapping[str, Any]) -> str:
    """A primary row's name on the page: its world, the part of its claim :attr:`Question.label`
    picks, and for an exact computation the number the paper printed (which it is compared with)."""
    m = re.search(q.label, str(r["claim"])) if q.label else None
    exact = r["scale"] == "exact" and as_number(r["paper_value"]) is not None
    printed = f", printed {r['paper_value']}" if exact else ""
    return where(r) + (f", {m.group(1)}" if m else "") + printed


def _deciding_first(ans: str, able: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The rows an answer rests on, those that decide it first (in ledger order within each verdict):
    the refuted rows of "does not reproduce"; of "cannot tell" the refuted, then the inconclusive
    and the rest, the reproducing rows last. So the few rows a sentence shows are the ones that keep
    the paper's claim from reproducing."""
    if ans == NOT_REPRODUCED_Q:
        return sorted(able, key=lambda r: r["verdict"] != REFUTED)
    if ans == CANNOT_TELL_Q:
        return sorted(able, key=lambda r: (r["verdict"] != REFUTED) + (r["verdict"] == REPRODUCES))
    return list(able)


def _tags(r: Mapping[str, Any]) -> str:
    """`` (mechanism partly; quick scale)``: where the mechanism cannot fully act, and the scale where
    it is not the paper's; empty otherwise."""
    tags = [t for t in (f"mechanism {r['mechanism']}" if r["mechanism"] not in ("yes", "") else "",
                        f"{r['scale']} scale" if r["scale"] not in ("paper", "exact") else "") if t]
    return f" ({'; '.join(tags)})" if tags else ""


def _place_and_where(r: Mapping[str, Any]) -> tuple[str, str]:
    """A sensitivity row's place without the world its parenthesis names, and its world or design
    (:func:`~experiments.ledger.questions.where`) with its tags: rows that share a place and a
    claim differ there (Fig 7's three worlds)."""
    place, w = str(r["place"]), where(r)
    return place.removesuffix(f" ({w})"), w + _tags(r)


def _ours(q: Question, rows: Sequence[Mapping[str, Any]]) -> str:
    """Each primary row's effect, interval and verdict, by world (the mechanism marked where it
    cannot fully act, the scale where it is not the paper's)."""
    out = [f"{_label(q, r)}{_tags(r)}: {fmt(q, effect(q, r))}, {r['verdict']}" for r in evidence(q, rows)]
    return "; ".join(out) if out else "not measured"


def null_controls(q: Question, rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The null-world control rows of ``q`` measured at paper scale (worlds built so that the paper's
    mechanism cannot act), in ledger order.

    Args:
        q: the question.
        rows: the ledger's rows.

    Returns:
        The rows (possibly none).

    Example:
        >>> [r["verdict"] for r in null_controls(question("000-fig2"), read_ledger())]
        ['inconclusive']
    """
    return [r for r in evidence(q, rows) if r["kind"] == NULL_CONTROL and r["scale"] == "paper"]


def shows_without_mechanism(q: Question, ans: str, rows: Sequence[Mapping[str, Any]]) -> bool | None:
    """Whether an effect the paper explains by its mechanism reproduces in a null world as well.

    Asked only of an answer that reproduces (``reproduces`` or ``real but far smaller``) to a question
    whose effect the paper explains (:attr:`~experiments.ledger.questions.Question.explained`) and
    that has null-world rows at paper scale; the effect then "shows without the mechanism" when at
    least one of those rows reproduces it too: the comparison holds, but the null world does not
    single out the paper's explanation.

    Args:
        q: the question.
        ans: its answer (:func:`~experiments.ledger.questions.answer`).
        rows: the ledger's rows.

    Returns:
        ``True`` or ``False``; ``None`` when the question is not asked of ``q`` (above).

    Example:
        >>> rows = read_ledger()
        >>> q = question("000-ranking")            # a claim of no harm: the paper explains nothing
        >>> shows_without_mechanism(q, answer(q, rows)[0], rows) is None
        True
    """
    return _without(q, ans, null_controls(q, rows))


def _without(q: Question, ans: str, controls: Sequence[Mapping[str, Any]]) -> bool | None:
    """:func:`shows_without_mechanism` from the question's null-world rows, already selected."""
    if not (q.explained and controls and ans in (REPRODUCES_Q, FAR_SMALLER_Q)):
        return None
    return any(r["verdict"] == REPRODUCES for r in controls)


def sentence(q: Question, rows: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """The answer to ``q`` and one sentence saying it with the paper's effect and ours.

    The sentence ends with the null-world rows where a null world was run, and, for an effect the
    paper explains by its mechanism that reproduces, what they say of that explanation
    (:func:`shows_without_mechanism`).

    Args:
        q: the question.
        rows: the ledger's rows.

    Returns:
        ``(answer, sentence)``.

    Example:
        >>> sentence(question("000-variance"), read_ledger())[1].count("in the paper")
        1
    """
    ans, able, ratio = answer(q, rows)
    words, rel = paper_effect(q)
    paper = f"{100 * rel:+.1f}% in the paper" if rel is not None else f"the paper: {words}"
    if ans == NOT_EXPRESSIBLE_Q:
        return ans, (f"The data here cannot express it: no primary row was measured at paper scale where the "
                     f"mechanism can act ({len(evidence(q, rows))} measured elsewhere).")
    shown = _deciding_first(ans, able)
    here = "; ".join(f"{fmt(q, effect(q, r))} ({_label(q, r)})" for r in shown[:3])
    more = f"; {len(able) - 3} more on the page" if len(able) > 3 else ""
    far = f" (ours / paper = {ratio:.2g})" if ratio is not None else ""
    lead = ans[0].upper() + ans[1:]
    controls = null_controls(q, rows)
    control = ("; ".join(f"{fmt(q, effect(q, r))}, {r['verdict']} ({where(r)})" for r in controls)
               if controls else "")
    text = (f"{lead}: {paper}; here {here}{more}{far}: {tally([r['verdict'] for r in able])} where the "
            "mechanism can act at paper scale." + (f" The null-world control, where it cannot act: {control}."
                                                   if control else ""))
    without = _without(q, ans, controls)
    if without is True:
        k = sum(r["verdict"] == REPRODUCES for r in controls)
        text += (f" It reproduces in a null world too ({k} of {len(controls)} rows): here it is evidence for the "
                 "comparison, not for the paper's explanation of it.")
    elif without is False:
        text += " No null-world row reproduces it."
    return ans, text


#: how a count of answers reads ("4 reproduce")
_PLURAL = {"reproduces": "reproduce", "does not reproduce": "do not reproduce"}


def _also(k: int, of: int) -> str:
    where_ = "a null world, where the mechanism cannot act"
    return f" (also in {where_})" if of == 1 else f" ({k} of them also in {where_})"


def _counts(answers: Sequence[tuple[Question, str, str]], rows: Sequence[Mapping[str, Any]]) -> str:
    """``"5 reproduce (1 of them also in a null world, where the mechanism cannot act), 2 do not
    reproduce"``: the answers counted, each reproducing count with how many of its effects a null
    world shows as well (:func:`shows_without_mechanism`)."""
    counts = {a: sum(1 for _, x, _ in answers if x == a) for a in ANSWERS}
    too = {a: sum(1 for q, x, _ in answers if x == a and shows_without_mechanism(q, x, rows)) for a in ANSWERS}
    return ", ".join(f"{counts[a]} {_PLURAL.get(a, a) if counts[a] != 1 else a}"
                     + (_also(too[a], counts[a]) if too[a] else "")
                     for a in ANSWERS if counts[a])


def findings_table(rows: Sequence[Mapping[str, Any]], ids: Sequence[str] | None = None) -> str:
    """The findings page's body: the answers' counts, one table row per question, then each
    question's sensitivity rows.

    Args:
        rows: the ledger's rows (dicts with every column, or :class:`~experiments.ledger.rows.Row`).
        ids: the questions to answer (default: all of :data:`QUESTIONS`); an unknown id is a ``ValueError``.

    Returns:
        Markdown.

    Example:
        >>> "| paper | question (where asked) |" in findings_table(read_ledger(), ["000-variance"])
        True
    """
    check_ledger(rows)
    qs = [question(i) for i in ids] if ids is not None else list(QUESTIONS)
    answers = [(q, *sentence(q, rows)) for q in qs]
    lines = [f"{len(qs)} questions: {_counts(answers, rows)}.", "",
             "| paper | question (where asked) | the paper's effect (where printed) | primary: protocol, metric | "
             "ours, 95% CI, per world or design | answer |", "|---|---|---|---|---|---|"]
    for q, _, text in answers:
        words, _ = paper_effect(q)
        lines.append(f"| {PAPERS[q.paper]} | {q.question} ({q.asked}) | {words} | {q.primary} | "
                     f"{_ours(q, rows)} | {text} |")
    lines += ["", "Worlds: " + "; ".join(f"{k}: {v}" for k, v in MECHANISM_WORDS.items() if k) + " (the ledger's "
              "`mechanism` column, generated from each world's targets table or construction).", ""]
    for q in qs:
        sens = evidence(q, rows, sensitivity=True)
        if not sens:
            continue
        lines += [f"**{q.question}** Sensitivity (other protocols, metrics, designs):", "",
                  "| place | world or design | claim | ours [95% CI] | verdict |", "|---|---|---|---|---|"]
        for r in sens:
            place, world = _place_and_where(r)
            lines.append(f"| {place} | {world} | {r['claim']} | {fmt(q, effect(q, r))} | {r['verdict']} |")
        lines.append("")
    return "\n".join(lines).rstrip()


def headline(rows: Sequence[Mapping[str, Any]]) -> str:
    """The README's "What the studies found": the answers' counts and one line per question.

    Args:
        rows: the ledger's rows.

    Returns:
        Markdown linking to ``docs/findings.md``.

    Example:
        >>> headline(read_ledger()).startswith("Of ")
        True
    """
    check_ledger(rows)
    answers = [(q, *sentence(q, rows)) for q in QUESTIONS]
    lines = [f"Of {len(answers)} questions the five papers ask ([docs/findings.md](docs/findings.md)): "
             f"{_counts(answers, rows)}.", "",
             "| question | answer |", "|---|---|"]
    lines += [f"| {q.question} | {text} |" for q, _, text in answers]
    return "\n".join(lines)
