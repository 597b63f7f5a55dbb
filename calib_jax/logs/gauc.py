r"""Group AUC of ``calib-jax evaluate --user COL``: each user's AUC, exactly, where the log lives.

GAUC (Zhou et al. 2018, "Deep Interest Network for Click-Through Rate Prediction", after Zhu et
al. 2017, "Optimized Cost per Click in Taobao Display Advertising") averages the AUC of every
user's own impressions,

.. math::

    \mathrm{GAUC} = \frac{\sum_{u\in U_2}\omega_u\,\mathrm{AUC}_u}{\sum_{u\in U_2}\omega_u},
    \qquad
    \mathrm{AUC}_u = \frac{\sum_t P_{ut}\,\big(N_{u,<t} + \tfrac12 N_{ut}\big)}{P_u N_u},

with :math:`t` the distinct scores of user u, :math:`P_{ut}, N_{ut}` the weighted clicks and
non-clicks at score t, :math:`N_{u,<t}` the user's non-clicks below t (ties count one half,
as :func:`calib_jax.metrics.gauc`), :math:`U_2` the users with both a click and a non-click
(the others, ``skipped``, have no AUC) and :math:`\omega_u` their impressions
:math:`P_u + N_u`, clicks :math:`P_u` or 1.

What an engine returns is the handful of sums :class:`UserAUCSums` holds, for the three
weightings at once: :math:`S_\omega = \sum\omega_u`, :math:`S_{\omega a} = \sum\omega_u A_u`
and the second moments :math:`\sum\omega_u^2`, :math:`\sum\omega_u^2A_u`,
:math:`\sum\omega_u^2A_u^2`. DuckDB and Spark compute them in the statistics query
(:func:`gauc_sql_parts`: a ``GROUP BY`` user and score, a running sum of the non-clicks
within each user, a ``GROUP BY`` user); the streamed arrow engine keeps the user, score,
label and weight of every valid row (16 bytes a row plus the user ids) and computes them with
NumPy (:func:`user_auc_sums`), a second implementation of the same formula. The value is
exact (up to the order of float additions).

Interval (:func:`gauc_entry`): users are the independent units, and GAUC is a ratio of two
sums over them, so its standard error is the delta-method (linearization) one of a ratio
estimator, :math:`\widehat{\mathrm{se}}^2 = \frac{|U_2|}{|U_2|-1}\sum_u \omega_u^2
(A_u - \mathrm{GAUC})^2 / S_\omega^2`, and the 95% interval is
:math:`\mathrm{GAUC} \pm 1.96\,\widehat{\mathrm{se}}`, clipped to [0, 1]. A user bootstrap
would need every user's AUC on the driver and B draws per user; the linearization needs
five sums. Its coverage is measured in the tests against the spread of GAUC over
independent simulated logs.

GAUC is not additive over parts of a log (a user's rows may lie in several), so ``--user``
does not combine with ``--resume``, ``--state-only`` or ``merge``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["USER_WEIGHTS", "UserAUCSums", "user_auc_sums", "coded_user_auc_sums", "user_codes",
           "per_user_concordance", "gauc_entry", "add_gauc", "gauc_sql_parts", "user_sql_ctes", "moment_sql",
           "sums_from_aggregates", "KIND", "check_gauc_weight"]

#: the user weightings :math:`\omega_u`, in the order of the query's result rows
USER_WEIGHTS = ("impressions", "clicks", "equal")
#: the ``kind`` of the statistics query's GAUC rows
KIND = "gauc"


def check_gauc_weight(value: object) -> None:
    """Refuse a ``--gauc-weight`` that is none of :data:`USER_WEIGHTS`, with or without ``--user``
    (``evaluate``, ``evaluate --by`` and ``compare`` alike).

    Example:
      >>> check_gauc_weight("clicks")
      >>> check_gauc_weight("bogus")
      Traceback (most recent call last):
      ...
      ValueError: --gauc-weight must be one of impressions, clicks, equal, got 'bogus'
    """
    if value not in USER_WEIGHTS:
        raise ValueError(f"--gauc-weight must be one of {', '.join(USER_WEIGHTS)}, got {value!r}")
_Z = 1.959963984540054  # the 97.5% normal quantile
_WORDS = {"impressions": "by impressions", "clicks": "by clicks", "equal": "equally"}


@dataclasses.dataclass(frozen=True)
class UserAUCSums:
    """The sums over users from which GAUC and its interval follow.

    Attributes:
      users: users with both a click and a non-click (:math:`|U_2|`).
      skipped: users with rows of one class only.
      rows_without_user: valid rows whose user is missing (in no user's AUC).
      weight_users: :math:`\\sum_{u\\in U_2}(P_u + N_u)`, the weight of the rows GAUC covers.
      weight_total: the weight of every valid row (those without a user included).
      moments: per weighting of :data:`USER_WEIGHTS`, :math:`(\\sum\\omega, \\sum\\omega A,
        \\sum\\omega^2, \\sum\\omega^2 A, \\sum\\omega^2 A^2)` over :math:`U_2`.
    """

    users: int
    skipped: int
    rows_without_user: int
    weight_users: float
    weight_total: float
    moments: Mapping[str, tuple[float, float, float, float, float]]


def per_user_concordance(codes: np.ndarray, scores: np.ndarray, labels: np.ndarray, weights: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Each user's weighted clicks :math:`P_u`, non-clicks :math:`N_u` and concordance sum
    :math:`\sum_t P_{ut}(N_{u,<t} + \tfrac12 N_{ut})` (module docstring; its AUC is the sum over
    :math:`P_u N_u`).

    Args:
      codes: (n,) integer user codes (:func:`user_codes`), no missing user.
      scores: (n,) scores; only their order within a user matters.
      labels: (n,) 0/1 labels.
      weights: (n,) non-negative row weights.

    Returns:
      ``(P, N, num)``, each (users,) in the order of the sorted codes present.

    Example:
      >>> import numpy as np
      >>> from calib_jax.logs.gauc import per_user_concordance
      >>> P, N, num = per_user_concordance(np.array([0, 0, 0]), np.array([.2, .9, .5]), np.array([0., 1., 0.]),
      ...                                  np.ones(3))
      >>> P.tolist(), N.tolist(), num.tolist()  # the click outranks both non-clicks: AUC 1
      ([1.0], [2.0], [2.0])
    """
    order = np.lexsort((scores, codes))
    c, s = codes[order], scores[order]
    pos, neg = (weights * labels)[order], (weights * (1.0 - labels))[order]
    n = c.shape[0]
    # tie blocks: runs of one (user, score)
    new_block = np.ones(n, bool)
    new_block[1:] = (c[1:] != c[:-1]) | (s[1:] != s[:-1])
    starts = np.flatnonzero(new_block)
    b_pos, b_neg = np.add.reduceat(pos, starts), np.add.reduceat(neg, starts)
    b_user = c[starts]
    # non-clicks of the user strictly below each block: a running sum restarted at each user
    run = np.cumsum(b_neg)
    first_of_user = np.ones(starts.shape[0], bool)
    first_of_user[1:] = b_user[1:] != b_user[:-1]
    user_start = np.flatnonzero(first_of_user)
    before_user = np.repeat(run[user_start] - b_neg[user_start], np.diff(np.append(user_start, starts.shape[0])))
    below = run - b_neg - before_user
    num = b_pos * (below + 0.5 * b_neg)
    return (np.add.reduceat(b_pos, user_start), np.add.reduceat(b_neg, user_start),
            np.add.reduceat(num, user_start))


def user_codes(users: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes of the users (equal users, equal codes) and the mask of rows that have one.

    Args:
      users: (n,) user ids: a pyarrow array (nulls: rows without a user) or anything
        ``np.unique`` sorts (no missing values).
      n: the number of rows.

    Returns:
      ``(codes, present)``: (n,) int64 codes (0 where the user is missing) and (n,) bool.

    Example:
      >>> import numpy as np
      >>> codes, present = user_codes(np.array(["b", "a", "b"]), 3)
      >>> codes.tolist(), present.tolist()
      ([1, 0, 1], [True, True, True])
    """
    present = np.ones(n, bool)
    if hasattr(users, "dictionary_encode"):  # pyarrow: integer codes of the distinct values
        import pyarrow as pa

        enc = users.dictionary_encode()
        if isinstance(enc, pa.ChunkedArray):
            enc = enc.unify_dictionaries().combine_chunks() if enc.num_chunks else pa.array([], enc.type)
        idx = enc.indices
        present = ~np.asarray(idx.is_null().to_numpy(zero_copy_only=False), bool)
        codes = np.asarray(idx.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
    else:
        codes = np.unique(np.asarray(users), return_inverse=True)[1].astype(np.int64)
    return codes, present


def _moments(P: np.ndarray, N: np.ndarray, num: np.ndarray) -> dict[str, tuple[float, float, float, float, float]]:
    """The five moments of each weighting over users with both classes (``P``, ``N`` > 0)."""
    auc = num / (P * N)
    out = {}
    for name, w in zip(USER_WEIGHTS, (P + N, P, np.ones_like(P)), strict=True):
        out[name] = (float(np.sum(w)), float(np.sum(w * auc)), float(np.sum(w * w)), float(np.sum(w * w * auc)),
                     float(np.sum((w * auc) ** 2)))
    return out


def user_auc_sums(users: Any, scores: np.ndarray, labels: np.ndarray, weights: np.ndarray | None = None
                  ) -> UserAUCSums:
    r"""The GAUC sums of a log held in memory (the arrow engine's path; NumPy).

    Args:
      users: (n,) user ids: a pyarrow array (nulls: rows without a user) or anything
        ``np.unique`` sorts (no missing values).
      scores: (n,) float scores (probabilities or logits; only their order within a user
        matters).
      labels: (n,) 0/1 labels.
      weights: optional (n,) non-negative row weights.

    Returns:
      :class:`UserAUCSums`.

    Example:
      >>> import numpy as np
      >>> s = user_auc_sums(np.array([0, 0, 1, 1, 2]), np.array([.9, .1, .8, .3, .5]),
      ...                   np.array([1., 0., 0., 1., 1.]))
      >>> s.users, s.skipped, gauc_entry(s, "equal")["value"]  # user 0: AUC 1, user 1: AUC 0
      (2, 1, 0.5)
    """
    scores = np.asarray(scores, np.float64)
    codes, present = user_codes(users, scores.shape[0])
    return coded_user_auc_sums(codes, present, scores, labels, weights)


def coded_user_auc_sums(codes: np.ndarray, present: np.ndarray, scores: np.ndarray, labels: np.ndarray,
                        weights: np.ndarray | None = None) -> UserAUCSums:
    r"""The GAUC sums of rows whose users are already integer codes (:func:`user_codes`): the
    moments :math:`\sum\omega_u`, :math:`\sum\omega_u A_u`, :math:`\sum\omega_u^2`,
    :math:`\sum\omega_u^2 A_u`, :math:`\sum\omega_u^2 A_u^2` over the users with both classes
    (module docstring), as :func:`user_auc_sums` computes them. ``evaluate --by --user`` codes
    the users of the whole log once and calls this on each slice's rows.

    Args:
      codes: (n,) int64 user codes (any value where ``present`` is False).
      present: (n,) bool, the rows that have a user.
      scores: (n,) scores (only their order within a user matters).
      labels: (n,) 0/1 labels.
      weights: optional (n,) non-negative row weights.

    Returns:
      :class:`UserAUCSums`.

    Example:
      >>> import numpy as np
      >>> s = coded_user_auc_sums(np.array([0, 0, 1, 0]), np.array([True, True, True, False]),
      ...                         np.array([.9, .1, .5, .3]), np.array([1., 0., 1., 0.]))
      >>> s.users, s.skipped, s.rows_without_user, gauc_entry(s, "equal")["value"]
      (1, 1, 1, 1.0)
    """
    scores = np.asarray(scores, np.float64)
    labels = np.asarray(labels, np.float64)
    weights = np.ones_like(scores) if weights is None else np.asarray(weights, np.float64)
    codes, present = np.asarray(codes, np.int64), np.asarray(present, bool)
    weight_total = float(np.sum(weights))
    rows_without_user = int(np.sum(~present))
    codes, scores, labels, weights = codes[present], scores[present], labels[present], weights[present]
    if codes.shape[0] == 0:
        P = N = num = np.zeros(0)
    else:
        P, N, num = per_user_concordance(codes, scores, labels, weights)
    both = (P > 0) & (N > 0)
    return UserAUCSums(users=int(np.sum(both)), skipped=int(np.sum(~both & (P + N > 0))),
                       rows_without_user=rows_without_user, weight_users=float(np.sum((P + N)[both])),
                       weight_total=weight_total, moments=_moments(P[both], N[both], num[both]))


def gauc_entry(sums: UserAUCSums, user_weight: str = "impressions") -> dict[str, Any]:
    r"""The report entry of GAUC: value, 95% delta-method interval over users, and the counts.

    Args:
      sums: the log's :class:`UserAUCSums`.
      user_weight: ``"impressions"``, ``"clicks"`` or ``"equal"`` (:math:`\omega_u`).

    Returns:
      A metric entry of the report (``name`` ``"gauc"``, ``value``, ``lo``, ``hi``,
      ``method`` ``"delta method over users"``, ``note``; ``*_undefined`` reasons for nulls)
      plus ``users``, ``skipped``, ``rows_without_user``, ``weight_share`` and
      ``user_weight``.

    Example:
      >>> import numpy as np
      >>> s = user_auc_sums(np.array([0, 0, 1, 1, 1]), np.array([.9, .1, .8, .3, .5]),
      ...                   np.array([1., 0., 0., 1., 1.]))
      >>> e = gauc_entry(s)  # AUC 1 (2 rows) and 0 (3 rows), weighted by impressions
      >>> e["value"], e["users"]
      (0.4, 2)
    """
    if user_weight not in USER_WEIGHTS:
        raise ValueError(f"--gauc-weight must be one of {USER_WEIGHTS}, got {user_weight!r}")
    sw, swa, sw2, sw2a, swa2 = sums.moments[user_weight]
    share = sums.weight_users / sums.weight_total if sums.weight_total > 0 else None
    out: dict[str, Any] = {"name": "gauc", "user_weight": user_weight, "users": sums.users, "skipped": sums.skipped,
                           "rows_without_user": sums.rows_without_user, "weight_share": share}
    note = (f"{sums.users} users with both classes, weighted {_WORDS[user_weight]}; {sums.skipped} users with one "
            "class skipped" + (f"; {sums.rows_without_user} rows without a user" if sums.rows_without_user else ""))
    if sums.users == 0 or not sw > 0:
        why = "undefined: no user has both a click and a non-click"
        return {**out, "value": None, "lo": None, "hi": None, "method": None, "note": why,
                **{f"{k}_undefined": why for k in ("value", "lo", "hi", "method")}}
    g = swa / sw
    out.update(value=min(max(g, 0.0), 1.0), note=note)
    if sums.users < 2:
        why = "one user has both classes: no spread across users to estimate"
        return {**out, "lo": None, "hi": None, "method": None,
                **{f"{k}_undefined": why for k in ("lo", "hi", "method")}}
    resid = max(swa2 - 2.0 * g * sw2a + g * g * sw2, 0.0)  # sum w^2 (A - g)^2, expanded
    se = math.sqrt(resid * sums.users / (sums.users - 1)) / sw
    out.update(lo=max(g - _Z * se, 0.0), hi=min(g + _Z * se, 1.0), method="delta method over users")
    return out


def add_gauc(rep: dict[str, Any], sums: UserAUCSums, user_weight: str) -> None:
    """Put GAUC into a report: every weighting under ``rep["gauc"]`` and the chosen one in the
    metric panel right after AUC (as ``evaluate --user`` and ``compare --user`` report it).

    Args:
      rep: a report (:func:`calib_jax.logs.report.build_report`), changed in place.
      sums: the log's :class:`UserAUCSums`.
      user_weight: the weighting shown in the panel.

    Example:
      >>> import numpy as np
      >>> rep = {"metrics": [{"name": "ne"}, {"name": "auc"}, {"name": "ece"}]}
      >>> add_gauc(rep, user_auc_sums(np.array([0, 0]), np.array([.9, .1]), np.array([1., 0.])), "impressions")
      >>> [e["name"] for e in rep["metrics"]]
      ['ne', 'auc', 'gauc', 'ece']
    """
    rep["gauc"] = {w: gauc_entry(sums, w) for w in USER_WEIGHTS}
    at = next((i + 1 for i, e in enumerate(rep["metrics"]) if e["name"] == "auc"), len(rep["metrics"]))
    rep["metrics"].insert(at, rep["gauc"][user_weight])


def gauc_sql_parts(*, weighted: bool, null_int: str, double: str, sum_names: list[str]) -> tuple[list[str], list[str]]:
    """The CTEs and ``UNION ALL`` parts of the statistics query that compute the GAUC sums.

    They read ``chk``, the checked rows of :func:`calib_jax.logs.sql.statistics_sql` (``u_in``
    the user as text, ``x_in`` the score or logit as given, ``y_in`` the label, ``w_in`` the
    weight when ``weighted``, ``bad`` the problem mask; only rows with ``bad = 0`` count).
    Result rows (``kind`` :data:`KIND`): one per weighting of :data:`USER_WEIGHTS` (``level``
    its name) with ``n`` the users with both classes and ``sv, svp, svpp, svo, sbrier`` the
    five moments of :class:`UserAUCSums`; and one with ``level = 'users'``: ``n`` the
    skipped users, ``bin`` the valid rows without a user, ``sv`` the weight of the users with
    both classes, ``svp`` the weight of every valid row.

    Args:
      weighted: whether ``chk`` has a weight column ``w_in``.
      null_int: the dialect's typed NULL integer.
      double: the dialect's double type.
      sum_names: the sum columns of the result table, in order.

    Returns:
      ``(ctes, parts)``: CTE definitions to append to the query's ``WITH`` and the ``SELECT``
      statements to append to its ``UNION ALL``.

    Example:
      >>> ctes, parts = gauc_sql_parts(weighted=False, null_int="CAST(NULL AS BIGINT)", double="DOUBLE",
      ...                              sum_names=["sv", "svp", "svpp", "svo", "sbrier", "snll", "smae"])
      >>> len(parts), any("PARTITION BY u ORDER BY x" in c for c in ctes)
      (4, True)
    """
    ctes = [
        *user_sql_ctes(weighted=weighted),
        f"gs AS (SELECT count(*) AS users, {', '.join(moment_sql())} FROM ga)",
        # the counts from the aggregated tables, not another pass over the rows (w y + w (1 - y) = w)
        "gx AS (SELECT (SELECT count(*) FROM gu WHERE pu + nu > 0 AND NOT (pu > 0 AND nu > 0)) AS skipped, "
        "COALESCE(sum(CASE WHEN u IS NULL THEN cnt ELSE 0 END), 0) AS nouser, "
        f"CAST(COALESCE(sum(pos + neg), 0.0) AS {double}) AS wtot FROM gt)",
    ]

    def row(level: str, n: str, bin_: str, values: dict[str, str]) -> str:
        cols = [f"COALESCE({values[c]}, 0.0) AS {c}" if c in values else f"CAST(NULL AS {double}) AS {c}"
                for c in sum_names]
        return (f"SELECT '{KIND}' AS kind, {null_int} AS fid, '{level}' AS level, {bin_} AS bin, "
                f"{null_int} AS rb, {null_int} AS y, {null_int} AS bad, {n} AS n, " + ", ".join(cols))

    parts = [row(name, "users", null_int, dict(zip(("sv", "svp", "svpp", "svo", "sbrier"),
                                                    (f"s_{t}", f"sa_{t}", f"s2_{t}", f"s2a_{t}", f"sa2_{t}"),
                                                    strict=True))) + " FROM gs"
             for name, t in zip(USER_WEIGHTS, "ice", strict=True)]
    parts.append(row("users", "skipped", "nouser", {"sv": "s_i", "svp": "wtot"}) + " FROM gs CROSS JOIN gx")
    return ctes, parts


def moment_sql() -> list[str]:
    """The aggregate items of the five moments of each weighting of :data:`USER_WEIGHTS` over
    the rows of :func:`user_sql_ctes`' ``ga`` (``pu``, ``nu``, ``a``): ``s_t, sa_t, s2_t, s2a_t,
    sa2_t`` for the tags ``t`` = ``i`` (impressions), ``c`` (clicks), ``e`` (equal), i.e.
    :math:`\\sum\\omega`, :math:`\\sum\\omega A`, :math:`\\sum\\omega^2`,
    :math:`\\sum\\omega^2 A`, :math:`\\sum(\\omega A)^2`.

    Returns:
      The 15 ``sum(...) AS name`` items.

    Example:
      >>> items = moment_sql()
      >>> len(items), items[0]
      (15, 'sum(pu + nu) AS s_i')
    """
    moments = []
    for tag, om in (("i", "pu + nu"), ("c", "pu"), ("e", "1.0")):
        moments += [f"sum({om}) AS s_{tag}", f"sum(({om}) * a) AS sa_{tag}", f"sum(({om}) * ({om})) AS s2_{tag}",
                    f"sum(({om}) * ({om}) * a) AS s2a_{tag}", f"sum((({om}) * a) * (({om}) * a)) AS sa2_{tag}"]
    return moments


def user_sql_ctes(*, weighted: bool, key: str | None = None) -> list[str]:
    r"""The CTEs of each user's AUC in SQL (module docstring), read from ``chk`` (``u_in``,
    ``x_in``, ``y_in``, ``w_in`` when ``weighted``, ``bad``): ``gr`` the valid rows, ``gt`` the
    (user, score) blocks with ``cnt``, ``pos``, ``neg``, ``gc`` each block's non-clicks below it
    in its user (a running sum), ``gu`` each user's :math:`P_u`, :math:`N_u` and concordance
    ``num``, ``ga`` the users with both classes and their AUC ``a``.

    Args:
      weighted: whether ``chk`` has a weight column ``w_in``.
      key: ``None`` (the whole log), or an SQL expression over ``chk`` that splits the rows
        into parts (``evaluate --by``'s slice key): every CTE then carries it as the column
        ``sk`` and groups and partitions by it before the user, so a user with rows in several
        parts has one AUC per part, from that part's rows only.

    Returns:
      The CTE definitions, in order.

    Example:
      >>> c = user_sql_ctes(weighted=False, key="date_trunc('day', ts_in)")
      >>> len(c), "PARTITION BY sk, u ORDER BY x" in c[2]
      (5, True)
    """
    w = "w_in" if weighted else "1.0"
    k, g = ("", "") if key is None else (f"{key} AS sk, ", "sk, ")
    return [
        f"gr AS (SELECT {k}u_in AS u, x_in AS x, y_in AS y, {w} AS w FROM chk WHERE bad = 0)",
        f"gt AS (SELECT {g}u, x, count(*) AS cnt, sum(w * y) AS pos, sum(w * (1.0 - y)) AS neg FROM gr "
        f"GROUP BY {g}u, x)",
        # non-clicks of the user at strictly lower scores: a running sum over the user's score blocks
        f"gc AS (SELECT {g}u, pos, neg, sum(neg) OVER (PARTITION BY {g}u ORDER BY x ROWS BETWEEN UNBOUNDED "
        "PRECEDING AND 1 PRECEDING) AS below FROM gt WHERE u IS NOT NULL)",
        f"gu AS (SELECT {g}u, sum(pos) AS pu, sum(neg) AS nu, sum(pos * (COALESCE(below, 0.0) + 0.5 * neg)) AS num "
        f"FROM gc GROUP BY {g}u)",
        f"ga AS (SELECT {g}pu, nu, num / (pu * nu) AS a FROM gu WHERE pu > 0 AND nu > 0)",
    ]


def sums_from_aggregates(table: Any, *, source: str = "aggregates") -> UserAUCSums | None:
    """The :class:`UserAUCSums` of a statistics query's result, or None when it has no GAUC
    rows. Every value is checked (``ValueError`` naming ``source`` and the column): one row
    per weighting and one ``users`` row, finite non-negative sums, integer counts, the same
    user count in every weighting, and :math:`0 \\le \\sum\\omega A \\le \\sum\\omega`
    (an AUC lies in [0, 1])."""
    kinds = [str(k) for k in table.column("kind").to_pylist()]
    rows = [i for i, k in enumerate(kinds) if k == KIND]
    if not rows:
        return None
    levels = [table.column("level")[i].as_py() for i in rows]
    by = {lv: i for lv, i in zip(levels, rows, strict=True)}
    expected = (*USER_WEIGHTS, "users")
    if sorted(levels) != sorted(expected):
        raise ValueError(f"{source}: the {KIND!r} rows have levels {levels}, expected one each of {list(expected)}")

    def val(level: str, col: str, *, integer: bool = False) -> float:
        x = table.column(col)[by[level]].as_py()
        if x is None or not math.isfinite(float(x)) or float(x) < 0 or integer and float(x) != round(float(x)):
            what = "a non-negative integer" if integer else "a finite non-negative number"
            raise ValueError(f"{source}: column {col!r} of the {KIND!r} row {level!r} is {x!r}, not {what}")
        return float(x)

    moments = {k: tuple(val(k, c) for c in ("sv", "svp", "svpp", "svo", "sbrier")) for k in USER_WEIGHTS}
    users = {int(val(k, "n", integer=True)) for k in USER_WEIGHTS}
    if len(users) != 1:
        raise ValueError(f"{source}: the {KIND!r} rows count different users ({sorted(users)}, column 'n')")
    for k, (sw, swa, *_) in moments.items():
        if swa > sw * (1 + 1e-9):
            raise ValueError(f"{source}: the {KIND!r} row {k!r} has sum(w AUC) > sum(w) (columns 'svp', 'sv'): "
                             "an AUC above 1")
    return UserAUCSums(users=users.pop(), skipped=int(val("users", "n", integer=True)),
                       rows_without_user=int(val("users", "bin", integer=True)), weight_users=val("users", "sv"),
                       weight_total=val("users", "svp"), moments=moments)  # type: ignore[arg-type]
