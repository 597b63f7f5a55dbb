r"""Plain-NumPy reference implementations of the SPEC §3-§5 quantities.

Written from the formulas of SPEC.md and the seed papers, independently of ``calib_jax``:
float64 throughout, explicit loops where they make the definition easier to read, no
attempt at speed.  Tests compare the library against these functions and against
third-party packages (scikit-learn, scipy, model-diagnostics, scoringrules, ckmeans).

Conventions (SPEC §2): ``v`` are sample weights (default 1); hard groups are integer ids
in ``[0, K)``; soft groups are (n, K) membership matrices with rows summing to 1.  Empty
groups contribute 0.
"""

from __future__ import annotations

import math

import numpy as np

# --------------------------------------------------------------------------------------
# helpers


def _f64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _weights(v, n: int) -> np.ndarray:
    return np.ones(n) if v is None else _f64(v)


def _by_field(p, y, field, weights):
    """float64 scores and labels, the weights (ones by default) and one row mask per field value."""
    p, y = _f64(p), _f64(y)
    return p, y, _weights(weights, p.shape[0]), [field == z for z in np.unique(field)]


def memberships(groups, n_groups: int | None = None) -> np.ndarray:
    """(n, K) membership matrix from hard ids (one-hot) or soft memberships (as is)."""
    g = np.asarray(groups)
    if g.ndim == 2:
        return g.astype(np.float64)
    k = int(g.max()) + 1 if n_groups is None else n_groups
    q = np.zeros((g.shape[0], k))
    for i, gi in enumerate(g):
        q[i, int(gi)] = 1.0
    return q


def sigmoid(x):
    x = _f64(x)
    return 1.0 / (1.0 + np.exp(-x))


def entropy(p):
    """Bernoulli entropy H(p) in nats, with 0 log 0 = 0."""
    p = _f64(p)
    out = np.zeros_like(p)
    for idx, pi in np.ndenumerate(p):
        h = 0.0
        if 0.0 < pi:
            h -= pi * math.log(pi)
        if pi < 1.0:
            h -= (1.0 - pi) * math.log(1.0 - pi)
        out[idx] = h
    return out


def bernoulli_kl(a, b):
    """KL(Bernoulli(a) || Bernoulli(b)) in nats, 0 log 0 = 0."""
    a, b = np.broadcast_arrays(_f64(a), _f64(b))
    out = np.zeros(a.shape)
    for idx in np.ndindex(a.shape):
        ai, bi = a[idx], b[idx]
        s = 0.0
        if ai > 0:
            s += ai * math.log(ai / bi)
        if ai < 1:
            s += (1 - ai) * math.log((1 - ai) / (1 - bi))
        out[idx] = s
    return out


# --------------------------------------------------------------------------------------
# §3 group statistics


def group_sums(p, y, groups, *, n_groups=None, weights=None) -> np.ndarray:
    """(K, 5) array of sums  sum_i v_i q_ik [1, p_i, y_i, p_i^2, p_i y_i]  (loops)."""
    p, y = _f64(p), _f64(y)
    q = memberships(groups, n_groups)
    v = _weights(weights, p.shape[0])
    out = np.zeros((q.shape[1], 5))
    for i in range(p.shape[0]):
        row = np.array([1.0, p[i], y[i], p[i] ** 2, p[i] * y[i]])
        for k in range(q.shape[1]):
            out[k] += v[i] * q[i, k] * row
    return out


def group_summary(p, y, groups, *, n_groups=None, weights=None) -> dict[str, np.ndarray]:
    """Masses, means, label rates, variances, covariances, computed from definitions.

    Uses the centred definitions sigma^2 = sum vq (p-mu)^2 / sum vq (not E p^2 - mu^2).
    Empty groups: all zeros.
    """
    p, y = _f64(p), _f64(y)
    q = memberships(groups, n_groups)
    v = _weights(weights, p.shape[0])
    K = q.shape[1]
    W = np.array([np.sum(v * q[:, k]) for k in range(K)])
    mass = W / np.sum(v)
    mu, pi, var, cov = (np.zeros(K) for _ in range(4))
    for k in range(K):
        if W[k] <= 0:
            continue
        a = v * q[:, k]
        mu[k] = np.sum(a * p) / W[k]
        pi[k] = np.sum(a * y) / W[k]
        var[k] = np.sum(a * (p - mu[k]) ** 2) / W[k]
        cov[k] = np.sum(a * (p - mu[k]) * (y - pi[k])) / W[k]
    return {"mass": mass, "mu": mu, "pi": pi, "var": var, "cov": cov, "weight": W}


# --------------------------------------------------------------------------------------
# §4 partitions


def uniform_bin_ids(p, n_bins: int) -> np.ndarray:
    """Equal-width bins [m/M, (m+1)/M), with p = 1 in the last bin (SPEC §2).

    Decided exactly with fractions-free integer logic: bin m such that m <= p*M < m+1,
    evaluated in float64 on the float value of p.
    """
    p = _f64(p)
    ids = np.empty(p.shape[0], dtype=np.int64)
    for i, pi in enumerate(p):
        m = int(math.floor(pi * n_bins))
        ids[i] = min(max(m, 0), n_bins - 1)
    return ids


def quantile_bin_ids(p, n_bins: int, *, ties: str = "split") -> np.ndarray:
    """Equal-mass bins: rank r (0-based, stable sort) goes to bin floor(r * M / n).

    ``ties="together"``: every tied value gets the bin of its first occurrence in sorted
    order (ties never straddle a boundary); ``ties="together_upper"``: the bin of its last
    occurrence.
    """
    p = _f64(p)
    n = p.shape[0]
    order = np.argsort(p, kind="stable")
    ids = np.empty(n, dtype=np.int64)
    for r, i in enumerate(order):
        ids[i] = (r * n_bins) // n
    if ties in ("together", "together_upper"):
        chosen: dict[float, int] = {}
        for i in order:
            if ties == "together_upper" or float(p[i]) not in chosen:
                chosen[float(p[i])] = ids[i]
        for i in range(n):
            ids[i] = chosen[float(p[i])]
    return ids


def kmeans_objective(x, ids) -> float:
    """Within-cluster sum of squares of the 1-D points x for the partition ids."""
    x = _f64(x)
    total = 0.0
    for k in np.unique(ids):
        xs = x[ids == k]
        total += float(np.sum((xs - xs.mean()) ** 2))
    return total


def optimal_kmeans_1d(x, k: int) -> tuple[np.ndarray, float]:
    """Exact 1-D k-means by dynamic programming over the sorted points (O(k n^2)).

    Returns (ids in the original order, cluster 0 = lowest values; optimal objective).
    Independent of the ``ckmeans`` package so the two can check each other.
    """
    x = _f64(x)
    n = x.shape[0]
    order = np.argsort(x, kind="stable")
    s = x[order]
    c1 = np.concatenate([[0.0], np.cumsum(s)])
    c2 = np.concatenate([[0.0], np.cumsum(s * s)])

    def sse(a, b):  # points a..b-1 of the sorted array
        m = b - a
        t = c1[b] - c1[a]
        return (c2[b] - c2[a]) - t * t / m

    INF = float("inf")
    D = np.full((k + 1, n + 1), INF)
    B = np.zeros((k + 1, n + 1), dtype=np.int64)
    D[0, 0] = 0.0
    for j in range(1, k + 1):
        for b in range(j, n + 1):
            best, arg = INF, j - 1
            for a in range(j - 1, b):
                val = D[j - 1, a] + sse(a, b)
                if val < best:
                    best, arg = val, a
            D[j, b], B[j, b] = best, arg
    ids_sorted = np.empty(n, dtype=np.int64)
    b = n
    for j in range(k, 0, -1):
        a = B[j, b]
        ids_sorted[a:b] = j - 1
        b = a
    ids = np.empty(n, dtype=np.int64)
    ids[order] = ids_sorted
    return ids, float(D[k, n])


# --------------------------------------------------------------------------------------
# §4 label-based metrics


def brier(p, y, weights=None) -> float:
    p, y = _f64(p), _f64(y)
    v = _weights(weights, p.shape[0])
    return float(np.sum(v * (y - p) ** 2) / np.sum(v))


def mae(p, y, weights=None) -> float:
    p, y = _f64(p), _f64(y)
    v = _weights(weights, p.shape[0])
    return float(np.sum(v * np.abs(y - p)) / np.sum(v))


def nll_probs(p, y, weights=None) -> float:
    """Mean -[y log p + (1-y) log(1-p)] (p strictly inside (0, 1))."""
    p, y = _f64(p), _f64(y)
    v = _weights(weights, p.shape[0])
    terms = [-(yi * math.log(pi) + (1 - yi) * math.log(1 - pi)) for pi, yi in zip(p, y)]
    return float(np.sum(v * np.array(terms)) / np.sum(v))


def nll_logits(z, y, weights=None) -> float:
    """Mean softplus(z) - y z, the exact log loss from logits."""
    z, y = _f64(z), _f64(y)
    v = _weights(weights, z.shape[0])
    terms = np.logaddexp(0.0, z) - y * z
    return float(np.sum(v * terms) / np.sum(v))


def _binned_gaps(p, y, ids, n_bins, weights):
    p, y = _f64(p), _f64(y)
    v = _weights(weights, p.shape[0])
    total = np.sum(v)
    masses, gaps = [], []
    for m in range(n_bins):
        sel = ids == m
        wm = np.sum(v[sel])
        if wm <= 0:
            continue
        masses.append(wm / total)
        gaps.append(np.sum(v[sel] * p[sel]) / wm - np.sum(v[sel] * y[sel]) / wm)
    return np.array(masses), np.array(gaps)


def ece(p, y, *, n_bins=15, strategy="uniform", norm="l1", weights=None, ties="split") -> float:
    """Binned ECE (seeds/000 eq. 2; ECE+ with equal-mass bins). ``norm`` as in the library's
    ``gap_norm``: l1 = mass-weighted |gaps|, l2 = mass-weighted squared gaps (no root),
    l2_root = its square root (the RMS calibration error), max = MCE over non-empty bins."""
    if strategy == "uniform":
        ids = uniform_bin_ids(p, n_bins)
    else:
        ids = quantile_bin_ids(p, n_bins, ties=ties)
    masses, gaps = _binned_gaps(p, y, ids, n_bins, weights)
    if norm == "l1":
        return float(np.sum(masses * np.abs(gaps)))
    if norm == "l2":
        return float(np.sum(masses * gaps**2))
    if norm == "l2_root":
        return float(np.sqrt(np.sum(masses * gaps**2)))
    if norm == "max":
        return float(np.max(np.abs(gaps)))
    raise ValueError(norm)


def gce(p, y, groups, *, n_groups=None, weights=None) -> float:
    """sum_k w_k (mu_k - pi_k)^2 (seeds/000 eq. 7)."""
    s = group_summary(p, y, groups, n_groups=n_groups, weights=weights)
    return float(np.sum(s["mass"] * (s["mu"] - s["pi"]) ** 2))


def abs_gap_metric(p, y, groups, *, n_groups=None, weights=None) -> float:
    """sum_k w_k |mu_k - pi_k| (LCCE_rand / LCCE_field / Field-ECE)."""
    s = group_summary(p, y, groups, n_groups=n_groups, weights=weights)
    return float(np.sum(s["mass"] * np.abs(s["mu"] - s["pi"])))


def field_ece(p, y, field, weights=None) -> float:
    """seeds/001 eq. 5 written as in the paper: (1/|D|) sum_z |sum_i (y_i - p_i) 1[z_i = z]|."""
    p, y, v, cells = _by_field(p, y, field, weights)
    return float(sum(abs(np.sum(v[c] * (y[c] - p[c]))) for c in cells) / np.sum(v))


def field_rce(p, y, field, *, eps=0.01, weights=None) -> float:
    """seeds/001 eq. 6: (1/|D|) sum_z N_z |sum_z (y - p)| / sum_z (y + eps)."""
    p, y, v, cells = _by_field(p, y, field, weights)
    return float(sum(np.sum(v[c]) * abs(np.sum(v[c] * (y[c] - p[c]))) / np.sum(v[c] * (y[c] + eps))
                     for c in cells) / np.sum(v))


def bias(p, y, weights=None) -> float:
    """mean(p) / mean(y) - 1 (deviation from 1, SPEC §4)."""
    p, y = _f64(p), _f64(y)
    v = _weights(weights, p.shape[0])
    return float(np.sum(v * p) / np.sum(v * y) - 1.0)


def abs_bias(p, y, field, weights=None) -> float:
    """sum_k w_k |mean_k(p) / mean_k(y) - 1| (every group must contain a positive)."""
    p, y, v, cells = _by_field(p, y, field, weights)
    return float(sum(np.sum(v[c]) / np.sum(v) * abs(np.sum(v[c] * p[c]) / np.sum(v[c] * y[c]) - 1.0)
                     for c in cells))


def auc(p, y, weights=None) -> float:
    """Weighted pairwise AUC: P(score_pos > score_neg) + 0.5 P(tie), by a double loop."""
    p, y = _f64(p), _f64(y)
    v = _weights(weights, p.shape[0])
    pos = [i for i in range(p.shape[0]) if y[i] == 1]
    neg = [i for i in range(p.shape[0]) if y[i] == 0]
    num = den = 0.0
    for i in pos:
        for j in neg:
            w = v[i] * v[j]
            den += w
            if p[i] > p[j]:
                num += w
            elif p[i] == p[j]:
                num += 0.5 * w
    return num / den


def accuracy(p, y, weights=None) -> float:
    """Weighted accuracy of the decision p > 0.5 (scores exactly 0.5 avoided in tests)."""
    p, y = _f64(p), _f64(y)
    v = _weights(weights, p.shape[0])
    return float(np.sum(v * ((p > 0.5) == (y == 1))) / np.sum(v))


def relative_change(new: float, old: float) -> float:
    """(new - old) / old (AccDiff / AUCDiff of seeds/000 Appendix E.1)."""
    return (new - old) / old


def ece_at_n(scores, labels, users, *, top_n, n_bins, probs=None, rd=False, sweep=False) -> float:
    """seeds/003 eqs. 2-3 (plain loops).

    For every user keep the ``top_n`` items with the highest score; ``ranks`` 1..N.
    ECE@N: equal-width probability bins over the kept items (eq. 2); with ``sweep``, the
    monotone sweep of Roelofs et al. 2022 §4 over the kept items (the paper's adaptive rule):
    equal-count bins of the kept items sorted by probability, bin k of b holding sorted
    positions [ceil(k n'/b), ceil((k+1) n'/b)), the largest b <= n_bins such that every
    b' <= b has non-decreasing bin label rates.
    RDECE@N: one bin per rank r, weight w_r = 1/r, normalised by N / sum_r w_r (eq. 3).
    """
    scores = _f64(scores)
    labels = _f64(labels)
    probs = scores if probs is None else _f64(probs)
    keep_p, keep_y, keep_r = [], [], []
    for u in np.unique(users):
        idx = np.flatnonzero(users == u)
        idx = idx[np.argsort(-scores[idx], kind="stable")][:top_n]
        for r, i in enumerate(idx, start=1):
            keep_p.append(probs[i])
            keep_y.append(labels[i])
            keep_r.append(r)
    kp, ky, kr = np.array(keep_p), np.array(keep_y), np.array(keep_r)
    nprime = kp.shape[0]
    if sweep:
        o = np.argsort(kp, kind="stable")
        sp, sy = kp[o], ky[o]

        def parts(b):
            return [slice(-(-k * nprime // b), -(-(k + 1) * nprime // b)) for k in range(b)]

        best = 1
        for b in range(2, min(n_bins, nprime) + 1):
            rates = [sy[s].mean() for s in parts(b)]
            if all(r1 >= r0 for r0, r1 in zip(rates, rates[1:])):
                best = b
            else:
                break
        return float(sum((s.stop - s.start) / nprime * abs(sy[s].mean() - sp[s].mean())
                         for s in parts(best)))
    if not rd:
        ids = uniform_bin_ids(kp, n_bins)
        masses, gaps = _binned_gaps(kp, ky, ids, n_bins, None)
        return float(np.sum(masses * np.abs(gaps)))
    wr = {r: 1.0 / r for r in range(1, top_n + 1)}
    total = 0.0
    for r in range(1, top_n + 1):
        sel = kr == r
        if not np.any(sel):
            continue
        total += wr[r] * sel.sum() / nprime * abs(ky[sel].mean() - kp[sel].mean())
    return float(top_n / sum(wr.values()) * total)


# --------------------------------------------------------------------------------------
# §4 oracle metrics


def oracle_brier(p, pi, weights=None) -> float:
    return brier(p, pi, weights)


def oracle_mae(p, pi, weights=None) -> float:
    return mae(p, pi, weights)


def oracle_kl(p, pi, weights=None) -> float:
    """Mean full Bernoulli KL(pi || p)."""
    p, pi = _f64(p), _f64(pi)
    v = _weights(weights, p.shape[0])
    return float(np.sum(v * bernoulli_kl(pi, p)) / np.sum(v))


def alpha_divergence_cichocki(a, b, alpha):
    """Bernoulli alpha-divergence  1/(alpha(alpha-1)) [sum_x a^alpha b^(1-alpha) - 1]."""
    a, b = _f64(a), _f64(b)
    s = a**alpha * b ** (1 - alpha) + (1 - a) ** alpha * (1 - b) ** (1 - alpha)
    return (s - 1.0) / (alpha * (alpha - 1.0))


def oracle_chebyshev(p, pi) -> float:
    return float(np.max(np.abs(_f64(p) - _f64(pi))))


def pearson(a, b) -> float:
    a, b = _f64(a), _f64(b)
    da, db = a - a.mean(), b - b.mean()
    return float(np.sum(da * db) / math.sqrt(np.sum(da * da) * np.sum(db * db)))


def average_ranks(x) -> np.ndarray:
    """1-based ranks, ties get the mean of their positions (loop over tie blocks)."""
    x = _f64(x)
    order = np.argsort(x, kind="stable")
    ranks = np.empty(x.shape[0])
    i = 0
    while i < x.shape[0]:
        j = i
        while j + 1 < x.shape[0] and x[order[j + 1]] == x[order[i]]:
            j += 1
        ranks[order[i : j + 1]] = 0.5 * (i + j) + 1.0
        i = j + 1
    return ranks


def spearman(a, b) -> float:
    return pearson(average_ranks(a), average_ranks(b))


# --------------------------------------------------------------------------------------
# §5 decompositions


def brier_grouping(p, y, groups, *, n_groups=None, weights=None) -> dict[str, float]:
    """UNC, REL, RES, DELTA of Brier = UNC + REL - RES + DELTA (seeds/000 eq. 6, App. A.2)."""
    y64 = _f64(y)
    v = _weights(weights, y64.shape[0])
    ybar = float(np.sum(v * y64) / np.sum(v))
    s = group_summary(p, y, groups, n_groups=n_groups, weights=weights)
    return {
        "unc": ybar * (1 - ybar),
        "rel": float(np.sum(s["mass"] * (s["mu"] - s["pi"]) ** 2)),
        "res": float(np.sum(s["mass"] * (s["pi"] - ybar) ** 2)),
        "delta": float(np.sum(s["mass"] * (s["var"] - 2 * s["cov"]))),
    }


def murphy(p, y, weights=None) -> dict[str, float]:
    """Classical Murphy decomposition by distinct forecast values (Delta = 0)."""
    p = _f64(p)
    vals, ids = np.unique(p, return_inverse=True)
    return brier_grouping(p, y, ids, n_groups=vals.shape[0], weights=weights)


def nll_grouping(p, y, groups, *, n_groups=None, weights=None) -> dict[str, float]:
    """UNC, REL, RES, CURV, COV with NLL = UNC + REL - RES + CURV - COV (seeds/000 App. B).

    R_k is computed directly as the Bregman remainder of the per-row log loss around mu_k:
    R_k = E_k[ phi_y(p) - phi_y(mu_k) - phi_y'(mu_k)(p - mu_k) ],
    phi_y(q) = -y log q - (1-y) log(1-q), phi_y'(q) = -y/q + (1-y)/(1-q).
    Needs 0 < p < 1.
    """
    p, y = _f64(p), _f64(y)
    v = _weights(weights, p.shape[0])
    q = memberships(groups, n_groups)
    s = group_summary(p, y, groups, n_groups=n_groups, weights=weights)
    pibar = float(np.sum(v * y) / np.sum(v))
    unc = float(entropy(np.array([pibar]))[0])
    K = q.shape[1]
    rel = res_inner = curv = cov = 0.0
    for k in range(K):
        if s["weight"][k] <= 0:
            continue
        mu, pik, wk = s["mu"][k], s["pi"][k], s["mass"][k]
        a = v * q[:, k]
        phi = -(y * np.log(p) + (1 - y) * np.log(1 - p))
        phi_mu = -(y * math.log(mu) + (1 - y) * math.log(1 - mu))
        dphi_mu = -y / mu + (1 - y) / (1 - mu)
        rk = np.sum(a * (phi - phi_mu - dphi_mu * (p - mu))) / s["weight"][k]
        rel += wk * float(bernoulli_kl(np.array([pik]), np.array([mu]))[0])
        res_inner += wk * float(entropy(np.array([pik]))[0])
        curv += wk * rk
        cov += wk * s["cov"][k] / (mu * (1 - mu))
    return {"unc": unc, "rel": rel, "res": unc - res_inner, "curv": float(curv), "cov": float(cov)}


def pav(x, y, weights=None) -> np.ndarray:
    """Isotonic (non-decreasing in x) weighted least-squares fit by pool-adjacent-violators.

    Ties in x are pooled first (their fitted values are equal).  Returns fitted values in
    the original order.
    """
    x, y = _f64(x), _f64(y)
    v = _weights(weights, x.shape[0])
    vals, inv = np.unique(x, return_inverse=True)
    ys = np.array([np.sum(v[inv == j] * y[inv == j]) for j in range(vals.shape[0])])
    ws = np.array([np.sum(v[inv == j]) for j in range(vals.shape[0])])
    blocks: list[list[float]] = []  # [sum_wy, sum_w, count]
    for j in range(vals.shape[0]):
        blocks.append([ys[j], ws[j], 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] >= blocks[-1][0] / blocks[-1][1]:
            b = blocks.pop()
            blocks[-1][0] += b[0]
            blocks[-1][1] += b[1]
            blocks[-1][2] += b[2]
    fitted = np.concatenate([[b[0] / b[1]] * b[2] for b in blocks])
    return fitted[inv]


def corp_brier(p, y, weights=None) -> dict[str, float]:
    """CORP decomposition of the Brier score with isotonic recalibration (Dimitriadis et al.).

    MCB = S(p) - S(p_iso), DSC = S(ybar) - S(p_iso), UNC = S(ybar); S = MCB - DSC + UNC.
    """
    y64 = _f64(y)
    v = _weights(weights, y64.shape[0])
    ybar = float(np.sum(v * y64) / np.sum(v))
    iso = pav(p, y, weights)
    s = brier(p, y, weights)
    s_iso = brier(iso, y, weights)
    s_unc = brier(np.full(y64.shape[0], ybar), y, weights)
    return {"mcb": s - s_iso, "dsc": s_unc - s_iso, "unc": s_unc, "score": s}
