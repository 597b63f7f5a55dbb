"""The questions each paper asks, and how the ledger's atomic rows answer them.

The questions are listed here, in code, from each paper's abstract, contributions and conclusion,
with the primary evidence named in advance: the paper's own protocol and its headline metric
(:attr:`Question.primary`), the other protocols and metrics as sensitivity rows
(:attr:`Question.sensitivity`). Nothing in this module reads a number until :func:`answer` is
given the ledger's rows; the answer then follows from the primary rows by one rule
(:func:`answer`):

* ``reproduces`` -- every primary row measured at paper scale where the mechanism can act
  reproduces;
* ``real but far smaller`` -- as ``reproduces``, but our relative effect is below
  :data:`FAR_SMALLER` of the paper's printed one (the ratio is given);
* ``does not reproduce`` -- none reproduces and at least one is refuted, or the rows are exact
  (a worked example recomputed to its printed digits: no sampling noise, so one refuted number
  is a failure, not a conflict) and at least one is refuted;
* ``cannot tell`` -- the rest (inconclusive, conflicting, no interval, not tested);
* ``the data here cannot express it`` -- no primary row was measured where the mechanism can act.

Where the paper explains the effect by its mechanism (:attr:`Question.explained`), the null-world
control tests that explanation: an answer that reproduces says, beside its rows, whether the same
effect shows in a world built so that the mechanism cannot act
(:func:`~experiments.ledger.findings.sentence`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from experiments.ledger.grouping_tables import printed_side
from experiments.ledger.rows import HEADER, PAPER_CLAIM, PAPERS, WORKED_EXAMPLE
from experiments.ledger.rule import INCONCLUSIVE, REFUTED, REPRODUCES
from experiments.ledger.sources import cited_value

REPRODUCES_Q, FAR_SMALLER_Q, NOT_REPRODUCED_Q = "reproduces", "real but far smaller", "does not reproduce"
CANNOT_TELL_Q, NOT_EXPRESSIBLE_Q = "cannot tell", "the data here cannot express it"
#: the answers, in report order
ANSWERS = (REPRODUCES_Q, FAR_SMALLER_Q, NOT_REPRODUCED_Q, CANNOT_TELL_Q, NOT_EXPRESSIBLE_Q)
#: an effect that reproduces but is below this share of the paper's printed relative effect is "far smaller"
FAR_SMALLER = 0.2


@dataclass(frozen=True)
class Question:
    """One question a paper asks, and which ledger rows answer it.

    Attributes:
        id: a short stable name (``"000-variance"``).
        paper: the paper's ledger key (a key of :data:`~experiments.ledger.rows.PAPERS`).
        question: the question in a few words.
        asked: where the paper asks it (its abstract, contributions, conclusion, a section).
        paper_effect: the paper's effect with its numbers and where they are printed.
        primary: the primary protocol and metric, in words (named before any number is read).
        select: ``(place prefix, claim prefix)`` of the primary rows (one per world or design), with an
            optional third element the claim must contain.
        sensitivity: ``(place prefix, claim prefix)`` pairs of the rows reported beside them.
        printed: ``(metric, A, B)`` of the paper's AdAuction column whose relative difference is the
            paper's effect size (``None`` where the paper prints none to set ours against).
        relative: our effect as a share of B's mean (the comparison's ``mean_b``), else the raw row value.
        label: a regular expression whose first group names a primary row where one world holds several
            (``"n = 1000"``); empty: the world alone.
        explained: the paper attributes the effect to its mechanism (grouping by what the embedding
            carries), so a null-world row that shows the effect too is evidence for the comparison but
            not for that explanation; ``False`` for claims of no harm (ranking kept) and for
            questions about the metrics, where a null world tests nothing the paper explains.
    """

    id: str
    paper: str
    question: str
    asked: str
    paper_effect: str
    primary: str
    select: tuple[str, ...]
    sensitivity: tuple[tuple[str, ...], ...] = ()
    printed: tuple[str, str, str] | None = None
    relative: bool = False
    label: str = ""
    explained: bool = False


_T1 = "Table 1 ("
QUESTIONS: tuple[Question, ...] = (
    Question("000-lcce", "000", "Does LCCE rank models like the oracle Brier better than ECE?",
             "contributions (2nd); §3.2", "LCCE's Spearman correlation with the oracle Brier is the highest, "
             "above 0.9, ECE's lower (Fig 1, a plot; no ECE value printed)",
             "rho(LCCE) - rho(ECE), fixed design (the §3.2 protocol)",
             ("§3.2 Fig 1", "LCCE outperforms ECE: rho(LCCE) - rho(ECE) (fixed design)"),
             (("App. C.1 Fig 3", "LCCE outperforms ECE"), ("App. C.1 Fig 3", "LCCE agrees best"),
              ("§3.2 Fig 1", "LCCE agrees best"))),
    Question("000-grouping", "000", "Do grouping calibrators beat a global calibrator?",
             "abstract; §3.1; conclusion", "", "VR-SAG+TS - TS on LCCE, the paper's equations (eq. 8-11)",
             (_T1, "VR-SAG+TS [eq. 8-11] < Temperature scaling on LCCE"),
             ((_T1, "SAG+TS [eq. 8-11] < Temperature scaling on LCCE"),
              (_T1, "VR-SAG+TS [eq. 8-11] < Temperature scaling [D_val] on LCCE"),
              (_T1, "VR-SAG+TS < Temperature scaling on LCCE"),
              (_T1, "VR-SAG+TS [eq. 8-11] < Temperature scaling on oracle Brier"),
              (_T1, "VR-SAG+TS [eq. 8-11] < Temperature scaling on ECE")),
             ("LCCE", "VR-SAG+TS", "Temperature scaling"), True, explained=True),
    Question("000-variance", "000", "Does the variance penalty improve on SAG?",
             "contributions (1st); §3.1; conclusion", "",
             "VR-SAG+TS - SAG+TS on LCCE, the paper's equations (eq. 8-11)",
             (_T1, "VR-SAG+TS [eq. 8-11] < SAG+TS [eq. 8-11] on LCCE"),
             ((_T1, "VR-SAG+PS [eq. 8-11] < SAG+PS [eq. 8-11] on LCCE"), (_T1, "VR-SAG+TS < SAG+TS on LCCE"),
              (_T1, "VR-SAG+TS [eq. 8-11] < SAG+TS [eq. 8-11] on oracle Brier"),
              (_T1, "VR-SAG+TS [eq. 8-11] < SAG+TS [eq. 8-11] on ECE")),
             ("LCCE", "VR-SAG+TS", "SAG+TS"), True, explained=True),
    Question("000-ranking", "000", "Is ranking quality kept (AUC changes within +-0.005)?",
             "§3.1; App. E.1", "relative AUC change within roughly +-0.005 on all three data sets (§3.1, Table 4)",
             "VR-SAG+TS's AUCDiff against the backbone, the paper's equations (eq. 8-11)",
             ("§3.1 / Table 4 (", "VR-SAG+TS [eq. 8-11] keeps AUCDiff"),
             (("§3.1 / Table 4 (", "VR-SAG+PS [eq. 8-11] keeps AUCDiff"),
              ("§3.1 / Table 4 (", "VR-SAG+TS keeps AUCDiff"))),
    Question("000-fig7", "000", "Do VR-SAG's groups hold less within-group variance than SAG's?",
             "§2.4; Fig 7; conclusion", "VR-SAG's groups have the lowest within-group variance (0.0058, Fig 7)",
             "oracle within-group variance, VR-SAG - SAG, hard memberships",
             ("Fig 7", "VR-SAG's groups have a lower within-group variance of the true probability than SAG's"),
             (("Fig 7", "VR-SAG's groups have a lower within-group variance of the true probability than the field"),)),
    Question("000-fig6a", "000", "Is LCCE above ECE at every sample size?", "App. C Fig 6a",
             "LCCE's Spearman above ECE's for every n (Fig 6a, a plot)", "rho(LCCE) - rho(ECE) per n, fixed design",
             ("App. C Fig 6a", "LCCE above ECE at every sample size", "fixed design"),
             (("App. C Fig 6a", "LCCE above ECE at every sample size", "pooled design"),), label=r"\((n = \d+)"),
    Question("000-fig2", "000", "Does calibration improve with more partitions?", "§3.3 Fig 2",
             "calibration improves as partitions increase (Fig 2, a plot)",
             "VR-SAG+TS's oracle Brier, largest P against P = 1",
             ("Fig 2 (", "more partitions P"), (("Fig 2 (", "more groups per partition K"),), explained=True),
    Question("001-nc", "001", "Does Neural Calibration give the lowest Field-RCE?", "abstract; Tables 2-5",
             "Neural Calibration best on Field-RCE on every data set (Tables 2-5)",
             "best other calibrator - Neural Calibration on Field-RCE, main split",
             ("Tables 2-5 (", "Neural Calibration has a lower Field-RCE"),
             (("Tables 2-5 (", "Neural Calibration has a lower Log-loss"),
              ("Tables 2-5 (", "Neural Calibration has a higher AUC"))),
    Question("002-cll", "002", "Does the Calibrated Log Loss compare pipelines more accurately than the Log Loss?",
             "abstract; §5", "CLL accuracy above LL accuracy (§5, Tables 1-6)",
             "Acc(CLL) - Acc(LL), Monte Carlo pipelines",
             ("§5, Def. 3", "Calibrated Log Loss is more accurate"),
             (("App. B Table", "Acc(C"), ("§5 Tables 1-6", "Acc(CLL) > Acc(LL)"),
              ("§5 Table 3", "Acc(CLL) > Acc(LL)"))),
    Question("003-tnf", "003", "Does TNF lower ECE@N?", "abstract; Tables 1-2",
             "TNF lowers ECE@N for every calibrator and model (Tables 1-2)", "ECE@N(TNF) - ECE@N(original)",
             ("Tables 1-2", "TNF lowers ECE@N"), (("Tables 1-2", "TNF lowers RDECE@N"),), label=r": (.*)$"),
    Question("004-lab", "004", "Do the lab's printed numbers reproduce?", "§6", "the published table of §6",
             "each printed number to its printed digits", ("§6 worked example", "the printed"), (),
             label=r"the printed (.*) reproduces"),
)


def question(qid: str) -> Question:
    """The question with id ``qid``.

    Args:
        qid: an :attr:`Question.id` of :data:`QUESTIONS`.

    Returns:
        The :class:`Question`; ``ValueError`` naming the known ids for an unknown one.

    Example:
        >>> question("000-variance").printed
        ('LCCE', 'VR-SAG+TS', 'SAG+TS')
    """
    for q in QUESTIONS:
        if q.id == qid:
            return q
    raise ValueError(f"unknown question id {qid!r}; known: {', '.join(q.id for q in QUESTIONS)}")


def check_ledger(rows: Sequence[Mapping[str, Any]]) -> None:
    """Refuse a ledger that cannot answer: no rows, or a row without one of the columns.

    Args:
        rows: the ledger's rows (:class:`~experiments.ledger.rows.Row` or dicts read from ``claims.csv``).

    Returns:
        None; ``ValueError`` naming the missing columns.

    Example:
        >>> check_ledger([{"paper": "x"}])
        Traceback (most recent call last):
        ...
        ValueError: the ledger lacks columns: place, claim, ...
    """
    if not rows:
        raise ValueError("the ledger has no rows")
    for r in rows:
        keys = set(r.keys()) if isinstance(r, Mapping) else set(HEADER)
        missing = [h for h in HEADER if h not in keys]
        if missing:
            raise ValueError(f"the ledger lacks columns: {', '.join(missing)}")


def _matches(r: Mapping[str, Any], sel: tuple[str, ...]) -> bool:
    claim = str(r["claim"])
    return str(r["place"]).startswith(sel[0]) and claim.startswith(sel[1]) and all(s in claim for s in sel[2:])


def evidence(q: Question, rows: Sequence[Any], sensitivity: bool = False) -> list[Any]:
    """The ledger rows of question ``q``: its primary rows, or (``sensitivity``) the others.

    Args:
        q: a :class:`Question`.
        rows: the ledger's rows (checked by :func:`check_ledger`).
        sensitivity: the sensitivity rows instead of the primary ones.

    Returns:
        The matching rows in ledger order (summary rows never).

    Example:
        >>> evidence(question("004-lab"), [{h: "" for h in HEADER}])
        []
    """
    check_ledger(rows)
    sels = q.sensitivity if sensitivity else (q.select,)
    return [r for r in rows if r["verdict"] != "summary" and r["paper"] == PAPERS[q.paper]
            and any(_matches(r, s) for s in sels)]


def where(r: Mapping[str, Any]) -> str:
    """The world or design a row was measured in, in a few words (its place's parenthesis, else the
    head of its ``world`` column).

    Args:
        r: a ledger row.

    Returns:
        e.g. ``"simulator, grouping world"`` or ``"Monte Carlo, fixed design"``.

    Example:
        >>> where({"place": "Table 1 (simulator, grouping world)", "world": "simulator, grouping world (built so)"})
        'simulator, grouping world'
    """
    place = str(r["place"])
    if "(" in place and place.endswith(")") and not place.startswith(("Tables 1-2", "§6", "§5")):
        return place.split(" (", 1)[1][:-1]
    return str(r["world"]).split(" (")[0] or "-"


def _num(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if v == v else None


def effect(q: Question, r: Mapping[str, Any]) -> tuple[float, float | None, float | None] | None:
    r"""Our effect on a row of question ``q``: ``(estimate, lo, hi)``; the row's value, or when
    ``q.relative`` the independent refits' difference and interval as a share of B's mean in those
    refits, which the record gives as the table's mean of A less the refits' difference:

    .. math:: \hat m_B = \bar m_A - d, \qquad
              \left(\frac{d}{\hat m_B}, \frac{l}{\hat m_B}, \frac{h}{\hat m_B}\right)

    where :math:`d, l, h` are the refits' difference A - B and its interval. The interval is the
    refits' scaled by one positive number, so it lies on the side of 0 the row's verdict reads. Dividing
    by the table's mean of B instead mixed two estimates of B (the table's fits and splits, the refits'
    fits and fresh impressions) and gave effects beyond -100% where A's error is near 0. No relative
    effect where :math:`\hat m_B \le 0`. The relative questions compare errors that cannot fall below
    0 (LCCE, ECE, the oracle Brier score), so A - B is at least :math:`-m_B`: an interval's lower end
    below -100% (a symmetric t-interval where A's error is near 0 and the refits vary) is clipped to
    -100%, the interval met with the values the effect can take; its upper end, which the verdict
    of a claimed reduction reads, is unchanged.

    Args:
        q: the question.
        r: one of its rows.

    Returns:
        The triple (``lo``/``hi`` ``None`` where the row has no interval), or ``None`` without a number.

    Example:
        >>> effect(question("000-lcce"), {"ours": 0.1, "ci_low": 0.05, "ci_high": 0.15, "source": ""})
        (0.1, 0.05, 0.15)
    """
    x = _num(r["ours"])
    if x is None:
        return None
    lo, hi = _num(r["ci_low"]), _num(r["ci_high"])
    if not q.relative:
        return x, lo, hi
    src = str(r["source"])
    if not src.endswith("/refit_diff"):
        return None
    base = float(cited_value(src.removesuffix("/refit_diff") + "/mean_a")) - x
    if not base > 0:
        return None
    return x / base, (max(lo / base, -1.0) if lo is not None else None), (hi / base if hi is not None else None)


def paper_effect(q: Question) -> tuple[str, float | None]:
    """The paper's effect in words, and its printed relative size where it prints one.

    Args:
        q: the question.

    Returns:
        ``(words, relative)``; ``relative`` is ``(A - B) / B`` of :attr:`Question.printed`, or ``None``.

    Example:
        >>> paper_effect(question("000-variance"))[1] < -0.15
        True
    """
    if q.printed is None:
        return q.paper_effect, None
    metric, a, b = q.printed
    _, _, words, rel = printed_side(metric, a, b)
    return words, rel


def _able(r: Mapping[str, Any]) -> bool:
    """A primary row that can answer: a paper claim (or a worked example) measured at paper scale
    (or exactly) where the mechanism can act."""
    return (r["kind"] in (PAPER_CLAIM, WORKED_EXAMPLE) and r["scale"] in ("paper", "exact")
            and r["mechanism"] in ("yes", ""))


def answer(q: Question, rows: Sequence[Any]) -> tuple[str, list[Any], float | None]:
    """The answer to ``q`` from the ledger, by the rule of the module docstring.

    Args:
        q: the question.
        rows: the ledger's rows.

    Returns:
        ``(answer, the rows it rests on, ratio)``: one of :data:`ANSWERS`; the primary rows measured at
        paper scale where the mechanism can act; our mean relative effect over the paper's (``None``
        where either is missing).

    Example:
        >>> answer(question("004-lab"), [{h: "" for h in HEADER}])[0]
        'the data here cannot express it'
    """
    able = [r for r in evidence(q, rows) if _able(r)]
    if not able:
        return NOT_EXPRESSIBLE_Q, [], None
    verdicts = [r["verdict"] for r in able]
    _, paper_rel = paper_effect(q)
    effects = [e for e in (effect(q, r) for r in able) if e is not None]
    ratio = (sum(e[0] for e in effects) / len(effects) / paper_rel) if effects and paper_rel else None
    if all(v == REPRODUCES for v in verdicts):
        if ratio is not None and abs(ratio) < FAR_SMALLER:
            return FAR_SMALLER_Q, able, ratio
        return REPRODUCES_Q, able, ratio
    exact = all(r["scale"] == "exact" for r in able)
    if REFUTED in verdicts and (exact or REPRODUCES not in verdicts):
        return NOT_REPRODUCED_Q, able, ratio
    return CANNOT_TELL_Q, able, ratio


def tally(verdicts: Sequence[str]) -> str:
    """Verdict counts in words, reproduces first (``"2 reproduce, 1 refuted"``).

    Args:
        verdicts: ledger verdicts.

    Returns:
        The counts of the three judged verdicts and of the rest, in words.

    Example:
        >>> tally(["reproduces", "refuted", "reproduces", "not tested"])
        '2 reproduce, 1 refuted, 1 other'
        >>> tally(["reproduces", "inconclusive", "inconclusive"])
        '1 reproduces, 2 inconclusive'
    """
    n = {v: sum(1 for x in verdicts if x == v) for v in (REPRODUCES, REFUTED, INCONCLUSIVE)}
    other = len(verdicts) - sum(n.values())
    reproduce = "reproduces" if n[REPRODUCES] == 1 else "reproduce"
    parts = [f"{n[REPRODUCES]} {reproduce}" if n[REPRODUCES] else "", f"{n[REFUTED]} refuted" if n[REFUTED] else "",
             f"{n[INCONCLUSIVE]} inconclusive" if n[INCONCLUSIVE] else "", f"{other} other" if other else ""]
    return ", ".join(p for p in parts if p)
