r"""The paired difference of two models' GAUC on the same log (``calib-jax compare --user COL``).

GAUC (Zhou et al. 2018, "Deep Interest Network for Click-Through Rate Prediction") averages
each user's AUC with user weights :math:`\omega_u` (impressions, clicks or 1;
:mod:`calib_jax.logs.gauc`). Two models scored on the same rows have the same users with both
classes :math:`U_2` and the same weights, since both depend on the labels and row weights
only. The difference of their GAUC is therefore itself a weighted mean over users,

.. math::

    D = \mathrm{GAUC}_A - \mathrm{GAUC}_B
      = \frac{\sum_{u\in U_2}\omega_u\,d_u}{\sum_{u\in U_2}\omega_u},
    \qquad d_u = \mathrm{AUC}^A_u - \mathrm{AUC}^B_u,

and its standard error is the delta-method (linearization) one of a ratio estimator over the
independent users, as for one model's GAUC:

.. math::

    \widehat{\mathrm{se}}^2(D) = \frac{|U_2|}{|U_2| - 1}
      \frac{\sum_u \omega_u^2\,(d_u - D)^2}{\big(\sum_u\omega_u\big)^2},
    \qquad
    \sum_u \omega_u^2 (d_u - D)^2 = \sum\omega^2 d^2 - 2D\sum\omega^2 d + D^2\sum\omega^2,

with :math:`\sum\omega^2 d^2 = \sum\omega^2 A^2 - 2\sum\omega^2 A B + \sum\omega^2 B^2`. So the
paired interval needs, beside each model's five GAUC moments, one cross moment
:math:`\sum_u \omega_u^2 \mathrm{AUC}^A_u \mathrm{AUC}^B_u` per pair of models and weighting.
Pairing matters: two models' per-user AUCs are strongly correlated (the same users, the same
clicks), and the paired standard error is typically several times smaller than the one the two
GAUC intervals suggest.

DuckDB and Spark compute every sum in one query (:func:`paired_gauc_sql`: per model a
``GROUP BY`` user and score with a running sum of the non-clicks within each user, the users'
AUCs joined across models, then one aggregate); the arrow engine keeps the user, scores, label
and weight of the valid rows and computes the same sums with NumPy
(:func:`paired_user_auc_sums`), a second implementation of the same formula.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from calib_jax.logs.gauc import USER_WEIGHTS, UserAUCSums, per_user_concordance, user_codes

__all__ = ["PairedAUCSums", "paired_user_auc_sums", "paired_gauc_sql", "paired_sums_from_result",
           "gauc_difference", "gauc_rows"]

_Z = 1.959963984540054  # the 97.5% normal quantile
#: the SQL tag of each weighting of :data:`~calib_jax.logs.gauc.USER_WEIGHTS`
_TAGS = dict(zip(USER_WEIGHTS, "ice", strict=True))


@dataclasses.dataclass(frozen=True)
class PairedAUCSums:
    r"""The sums over users from which every model's GAUC and every paired difference follow.

    Attributes:
      users: users with both a click and a non-click (:math:`|U_2|`, the same for every model).
      skipped: users with rows of one class only.
      rows_without_user: valid rows whose user is missing.
      weight_users: the weight of the rows of the users in :math:`U_2`.
      weight_total: the weight of every valid row.
      moments: per weighting of :data:`~calib_jax.logs.gauc.USER_WEIGHTS`, a dict with
        ``s`` (:math:`\sum\omega`), ``s2`` (:math:`\sum\omega^2`) and, per model m,
        ``sa`` / ``s2a`` / ``sa2``: lists of :math:`\sum\omega A_m`, :math:`\sum\omega^2 A_m`,
        :math:`\sum(\omega A_m)^2`; ``s2ab``: a dict ``(i, j) ->`` :math:`\sum\omega^2 A_i A_j`
        for i < j.
    """

    users: int
    skipped: int
    rows_without_user: int
    weight_users: float
    weight_total: float
    moments: Mapping[str, Mapping[str, Any]]

    @property
    def n_models(self) -> int:
        """The number of models M."""
        return len(next(iter(self.moments.values()))["sa"])

    def model(self, m: int) -> UserAUCSums:
        """Model ``m``'s own :class:`~calib_jax.logs.gauc.UserAUCSums` (for
        :func:`~calib_jax.logs.gauc.gauc_entry`)."""
        return UserAUCSums(users=self.users, skipped=self.skipped, rows_without_user=self.rows_without_user,
                           weight_users=self.weight_users, weight_total=self.weight_total,
                           moments={w: (mo["s"], mo["sa"][m], mo["s2"], mo["s2a"][m], mo["sa2"][m])
                                    for w, mo in self.moments.items()})


def paired_user_auc_sums(users: Any, scores: np.ndarray, labels: np.ndarray,
                         weights: np.ndarray | None = None) -> PairedAUCSums:
    r"""Every model's GAUC moments and the cross moments of every pair, of a log in memory (NumPy).

    Args:
      users: (n,) user ids: a pyarrow array (nulls: rows without a user) or anything
        ``np.unique`` sorts.
      scores: (n, M) the models' scores (probabilities or logits; only their order within a
        user matters).
      labels: (n,) 0/1 labels.
      weights: optional (n,) non-negative row weights.

    Returns:
      :class:`PairedAUCSums`.

    Example:
      >>> from calib_jax.logs.paired_gauc import gauc_difference, paired_user_auc_sums
      >>> import numpy as np
      >>> s = paired_user_auc_sums(np.array([0, 0, 1, 1]), np.array([[.9, .2], [.1, .8], [.7, .6], [.3, .4]]),
      ...                          np.array([1., 0., 1., 0.]))
      >>> d = gauc_difference(s, 0, 1, "equal")  # model 0: AUC 1 and 1; model 1: AUC 0 and 1
      >>> d["diff"], d["users"]
      (0.5, 2)
    """
    scores = np.asarray(scores, np.float64)
    if scores.ndim != 2:
        raise ValueError(f"scores must be (n, M), got shape {scores.shape}")
    labels = np.asarray(labels, np.float64)
    weights = np.ones(scores.shape[0]) if weights is None else np.asarray(weights, np.float64)
    codes, present = user_codes(users, scores.shape[0])
    weight_total = float(np.sum(weights))
    codes, scores, labels, weights = codes[present], scores[present], labels[present], weights[present]
    M = scores.shape[1]
    if codes.shape[0] == 0:
        P = N = np.zeros(0)
        nums = [np.zeros(0) for _ in range(M)]
    else:
        each = [per_user_concordance(codes, scores[:, m], labels, weights) for m in range(M)]
        P, N = each[0][0], each[0][1]  # the same users in the same order (by code) for every model
        nums = [e[2] for e in each]
    both = (P > 0) & (N > 0)
    auc = [num[both] / (P[both] * N[both]) for num in nums]
    moments = {}
    for name, om in zip(USER_WEIGHTS, (P[both] + N[both], P[both], np.ones(int(both.sum()))), strict=True):
        moments[name] = {
            "s": float(np.sum(om)), "s2": float(np.sum(om * om)),
            "sa": [float(np.sum(om * a)) for a in auc], "s2a": [float(np.sum(om * om * a)) for a in auc],
            "sa2": [float(np.sum((om * a) ** 2)) for a in auc],
            "s2ab": {(i, j): float(np.sum(om * om * auc[i] * auc[j])) for i in range(M) for j in range(i + 1, M)}}
    return PairedAUCSums(users=int(np.sum(both)), skipped=int(np.sum(~both & (P + N > 0))),
                         rows_without_user=int(np.sum(~present)), weight_users=float(np.sum((P + N)[both])),
                         weight_total=weight_total, moments=moments)


def gauc_difference(sums: PairedAUCSums, i: int, j: int, user_weight: str = "impressions") -> dict[str, Any]:
    r"""The paired difference :math:`\mathrm{GAUC}_i - \mathrm{GAUC}_j` with its 95% delta-method
    interval over users (module docstring).

    Args:
      sums: the log's :class:`PairedAUCSums`.
      i, j: the two models.
      user_weight: ``"impressions"``, ``"clicks"`` or ``"equal"``.

    Returns:
      ``{"diff", "lo", "hi", "se", "users"}`` (``None`` where undefined: no user with both
      classes, or one user only for the interval).

    Example:
      >>> from calib_jax.logs.paired_gauc import gauc_difference, paired_user_auc_sums
      >>> import numpy as np
      >>> rng = np.random.default_rng(0)
      >>> u = rng.integers(0, 200, 4000); p = rng.uniform(size=4000); y = (rng.uniform(size=4000) < p) * 1.0
      >>> s = paired_user_auc_sums(u, np.stack([p, p + rng.normal(0, 0.3, 4000)], axis=1), y)
      >>> d = gauc_difference(s, 0, 1)
      >>> d["lo"] > 0  # the noisy copy ranks worse within users
      True
    """
    if user_weight not in USER_WEIGHTS:
        raise ValueError(f"user_weight must be one of {USER_WEIGHTS}, got {user_weight!r}")
    mo = sums.moments[user_weight]
    out: dict[str, Any] = {"diff": None, "lo": None, "hi": None, "se": None, "users": sums.users}
    sw = mo["s"]
    if sums.users == 0 or not sw > 0:
        return out
    D = (mo["sa"][i] - mo["sa"][j]) / sw
    out["diff"] = D
    if sums.users < 2:
        return out
    cross = mo["s2ab"][(min(i, j), max(i, j))]
    s2d = mo["s2a"][i] - mo["s2a"][j]
    s2dd = mo["sa2"][i] - 2.0 * cross + mo["sa2"][j]
    resid = max(s2dd - 2.0 * D * s2d + D * D * mo["s2"], 0.0)
    se = math.sqrt(resid * sums.users / (sums.users - 1)) / sw
    out.update(lo=max(D - _Z * se, -1.0), hi=min(D + _Z * se, 1.0), se=se)
    return out


def paired_gauc_sql(*, checked: str, n_models: int, weighted: bool, double: str) -> str:
    """The query of every model's GAUC moments and every pair's cross moments (one result row).

    It reads ``checked``, a ``FROM`` item of the log's checked rows with ``u_in`` (the user as
    text, NULL when missing), ``x0 .. x{M-1}`` (the models' columns as given), ``y_in`` (the
    label), ``w_in`` when ``weighted`` and ``bad`` (0: a valid row); only valid rows count.

    Args:
      checked: the ``FROM`` item of the checked rows (a CTE's name or a subquery).
      n_models: M.
      weighted: whether the rows carry a weight ``w_in``.
      double: the dialect's double type.

    Returns:
      The text of a ``SELECT`` (to follow the ``WITH`` that defines ``checked``, as its last CTEs
      and final statement); its one row has ``users``, ``skipped``, ``nouser``, ``wusers``,
      ``wtot`` and, per weighting tag t (``i``, ``c``, ``e``), ``s_t``, ``s2_t``,
      ``sa_t_m``, ``s2a_t_m``, ``sa2_t_m`` per model and ``s2ab_t_i_j`` per pair
      (:func:`paired_sums_from_result` reads it).

    Example:
      >>> from calib_jax.logs.paired_gauc import paired_gauc_sql
      >>> q = paired_gauc_sql(checked="chk", n_models=2, weighted=False, double="DOUBLE")
      >>> "s2ab_i_0_1" in q and q.count("PARTITION BY u ORDER BY x") == 2
      True
    """
    w = "w_in" if weighted else "1.0"
    ms = range(n_models)
    ctes = [f"gr AS (SELECT u_in AS u, {', '.join(f'x{m}' for m in ms)}, y_in AS y, {w} AS w FROM {checked} "
            "WHERE bad = 0)"]
    for m in ms:
        ctes += [
            f"gt{m} AS (SELECT u, x{m} AS x, count(*) AS cnt, sum(w * y) AS pos, sum(w * (1.0 - y)) AS neg "
            f"FROM gr GROUP BY u, x{m})",
            # non-clicks of the user at strictly lower scores: a running sum over the user's score blocks
            f"gc{m} AS (SELECT u, pos, neg, sum(neg) OVER (PARTITION BY u ORDER BY x ROWS BETWEEN UNBOUNDED "
            f"PRECEDING AND 1 PRECEDING) AS below FROM gt{m} WHERE u IS NOT NULL)",
            f"gu{m} AS (SELECT u, sum(pos) AS pu, sum(neg) AS nu, sum(pos * (COALESCE(below, 0.0) + 0.5 * neg)) "
            f"AS num FROM gc{m} GROUP BY u)"]
    joins = " ".join(f"JOIN gu{m} ON gu{m}.u = gu0.u" for m in ms if m)
    aucs = ", ".join(f"gu{m}.num / (gu0.pu * gu0.nu) AS a{m}" for m in ms)
    ctes.append(f"ga AS (SELECT gu0.pu AS pu, gu0.nu AS nu, {aucs} FROM gu0 {joins} "
                "WHERE gu0.pu > 0 AND gu0.nu > 0)")
    items = ["count(*) AS users", "sum(pu + nu) AS wusers"]
    for tag, om in (("i", "(pu + nu)"), ("c", "pu"), ("e", "1.0")):
        items += [f"sum({om}) AS s_{tag}", f"sum({om} * {om}) AS s2_{tag}"]
        for m in ms:
            items += [f"sum({om} * a{m}) AS sa_{tag}_{m}", f"sum({om} * {om} * a{m}) AS s2a_{tag}_{m}",
                      f"sum(({om} * a{m}) * ({om} * a{m})) AS sa2_{tag}_{m}"]
        items += [f"sum({om} * {om} * a{i} * a{j}) AS s2ab_{tag}_{i}_{j}" for i in ms for j in ms if i < j]
    ctes += [f"gs AS (SELECT {', '.join(items)} FROM ga)",
             "gx AS (SELECT (SELECT count(*) FROM gu0 WHERE pu + nu > 0 AND NOT (pu > 0 AND nu > 0)) AS skipped, "
             "COALESCE(sum(CASE WHEN u IS NULL THEN cnt ELSE 0 END), 0) AS nouser, "
             f"CAST(COALESCE(sum(pos + neg), 0.0) AS {double}) AS wtot FROM gt0)"]
    return ",\n".join(ctes) + "\nSELECT * FROM gs CROSS JOIN gx"


def paired_sums_from_result(row: Mapping[str, Any], n_models: int) -> PairedAUCSums:
    """The :class:`PairedAUCSums` of :func:`paired_gauc_sql`'s one result row (a sum over no user
    is NULL in SQL and 0 here).

    Args:
      row: column name -> value.
      n_models: M.

    Returns:
      :class:`PairedAUCSums`.

    Example:
      >>> from calib_jax.logs.paired_gauc import paired_sums_from_result
      >>> row = {"users": 0, "skipped": 1, "nouser": 0, "wusers": None, "wtot": 2.0}
      >>> paired_sums_from_result(row, 2).users
      0
    """
    def get(key: str) -> float:
        x = row.get(key)
        return 0.0 if x is None else float(x)

    ms = range(n_models)
    moments = {}
    for name in USER_WEIGHTS:
        t = _TAGS[name]
        moments[name] = {"s": get(f"s_{t}"), "s2": get(f"s2_{t}"),
                         "sa": [get(f"sa_{t}_{m}") for m in ms], "s2a": [get(f"s2a_{t}_{m}") for m in ms],
                         "sa2": [get(f"sa2_{t}_{m}") for m in ms],
                         "s2ab": {(i, j): get(f"s2ab_{t}_{i}_{j}") for i in ms for j in ms if i < j}}
    return PairedAUCSums(users=int(get("users")), skipped=int(get("skipped")), rows_without_user=int(get("nouser")),
                         weight_users=get("wusers"), weight_total=get("wtot"), moments=moments)


def gauc_rows(sums: PairedAUCSums, names: Sequence[str], user_weight: str) -> list[dict[str, Any]]:
    """The ``compare`` difference rows of GAUC (higher is better), in the shape of
    :func:`calib_jax.logs.comparison.paired_differences`' rows, one per pair A before B.

    Args:
      sums: the log's :class:`PairedAUCSums`.
      names: the models' names.
      user_weight: the weighting of the rows.

    Returns:
      A list of dicts: ``metric`` ``"gauc"``, ``a``, ``b``, ``value_a``, ``value_b``, ``diff``,
      ``lo``, ``hi``, ``better``, ``direction`` ``"higher"``, ``verdict``, ``method``.

    Example:
      >>> from calib_jax.logs.paired_gauc import gauc_rows, paired_user_auc_sums
      >>> import numpy as np
      >>> s = paired_user_auc_sums(np.array([0, 0, 1, 1]), np.array([[.9, .2], [.1, .8], [.7, .6], [.3, .4]]),
      ...                          np.array([1., 0., 1., 0.]))
      >>> gauc_rows(s, ["a", "b"], "equal")[0]["diff"]
      0.5
    """
    from calib_jax.logs.common import difference_row
    from calib_jax.logs.gauc import gauc_entry

    values = [gauc_entry(sums.model(m), user_weight)["value"] for m in range(len(names))]
    out = []
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            d = gauc_difference(sums, i, j, user_weight)
            row = difference_row("gauc", names[i], names[j], values[i], values[j], d["diff"], d["lo"], d["hi"],
                                 lower=False, undefined="undefined (no user has both a click and a non-click)",
                                 no_interval="one user has both classes")
            out.append({**row, "method": f"delta method over {sums.users} users (paired), users weighted by "
                                         f"{user_weight}"})
    return out
