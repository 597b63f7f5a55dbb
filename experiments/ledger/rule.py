"""The ledger's one verdict rule: the verdict words and the rule that gives them from an interval."""

from __future__ import annotations

from typing import Any

REPRODUCES, REFUTED, INCONCLUSIVE = "reproduces", "refuted", "inconclusive"
NO_INTERVAL, NOT_TESTED, NOT_ATTEMPTED = "no interval", "not tested", "not attempted"
#: the verdicts of paper claims, in report order
VERDICTS = (REPRODUCES, REFUTED, INCONCLUSIVE, NO_INTERVAL, NOT_TESTED, NOT_ATTEMPTED)
BEYOND = "beyond the paper"
SUMMARY = "summary"

#: a calibrator that fell back in more than this share of its fits (or of a SAG fit's
#: partition x group cells, averaged over the splits) could not act: ``not tested``
NOT_TESTED_SHARE = 0.5


def as_number(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if v == v and abs(v) != float("inf") else None


def rule(claimed: str, lo: Any, hi: Any) -> str:
    """The ledger's one verdict rule for an interval ``[lo, hi]`` and a claimed side:
    ``"> x"`` / ``"< x"`` (the quantity is above / below ``x``), ``"within b"`` (its
    absolute value is below ``b``) or ``"in a b"`` (it lies in ``[a, b]``: a printed number
    to its printed digits). ``reproduces`` when the interval lies on the claimed
    side, ``refuted`` when it lies on the other, ``inconclusive`` when it straddles the
    null (or for ``within``, the bound), ``no interval`` when either end is missing.

    >>> rule("> 0", 0.1, 0.3), rule("< 0", 0.1, 0.3), rule("> 0", -0.1, 0.3), rule("> 0", "", "")
    ('reproduces', 'refuted', 'inconclusive', 'no interval')
    >>> rule("within 0.005", -0.001, 0.002), rule("within 0.005", 0.006, 0.01)
    ('reproduces', 'refuted')
    """
    lo_, hi_ = as_number(lo), as_number(hi)
    if lo_ is None or hi_ is None:
        return NO_INTERVAL
    op, *values = claimed.split()
    if op == "in" and len(values) == 2:
        a, b = float(values[0]), float(values[1])
        return REPRODUCES if a <= lo_ and hi_ <= b else REFUTED if hi_ < a or lo_ > b else INCONCLUSIVE
    if len(values) != 1:
        raise ValueError(f"`claimed` must be '> x', '< x', 'within b' or 'in a b', got {claimed!r}")
    x = float(values[0])
    if op == ">":
        return REPRODUCES if lo_ > x else REFUTED if hi_ < x else INCONCLUSIVE
    if op == "<":
        return REPRODUCES if hi_ < x else REFUTED if lo_ > x else INCONCLUSIVE
    if op == "within":
        return REPRODUCES if -x < lo_ and hi_ < x else REFUTED if lo_ >= x or hi_ <= -x else INCONCLUSIVE
    raise ValueError(f"`claimed` must be '> x', '< x' or 'within b', got {claimed!r}")


def detectable(lo: float, hi: float, level: float = 0.95, power: float = 0.8) -> float:
    r"""The smallest true difference the design detects with probability ``power`` (two-sided
    test at ``1 - level``), from a normal interval's half width ``h``:
    :math:`(z_{(1+\ell)/2} + z_{power})\, h / z_{(1+\ell)/2}` (about 1.43 h at 95% / 80%)."""
    from scipy import stats

    z = stats.norm.ppf((1 + level) / 2)
    return float((z + stats.norm.ppf(power)) * (hi - lo) / 2 / z)


def supported_side(d: dict[str, Any], a: str, b: str) -> str:
    """Which side a paired interval of ``a - b`` (higher is better) supports, by the rule's
    words: ``a`` ahead, ``b`` ahead, or inconclusive."""
    return f"{a} ahead" if d["lo"] > 0 else f"{b} ahead" if d["hi"] < 0 else "inconclusive (the interval contains 0)"

