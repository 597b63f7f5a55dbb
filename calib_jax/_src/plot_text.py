"""Checks and text settings shared by the figure functions of :mod:`calib_jax.plotting`.

Private plumbing: the figures call these on the caller's data and text.
"""

from __future__ import annotations

from typing import Any


def show_text_as_given(*items: Any) -> None:
    """Show caller-given text as given (module docstring): each item a matplotlib ``Text``,
    a list of them, a legend (its entries) or ``None`` (skipped)."""
    for item in items:
        if item is None:
            continue
        if isinstance(item, list | tuple):
            show_text_as_given(*item)
        elif hasattr(item, "get_texts"):  # a legend
            show_text_as_given(*item.get_texts())
        else:
            item.set_parse_math(False)
            item.set_usetex(False)


def check_lengths(n: int, reference: str, **values: object) -> None:
    """``ValueError`` naming the argument whose length differs from ``n`` (the length of
    ``reference``): a figure must not cut, broadcast or misplace data silently."""
    for name, v in values.items():
        if v is not None and len(v) != n:  # type: ignore[arg-type]
            raise ValueError(f"`{name}` has length {len(v)}, `{reference}` has {n}")  # type: ignore[arg-type]
