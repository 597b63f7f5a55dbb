"""Private helpers shared by the neighbour-paper studies.

Used by ``experiments/calibrated_logloss.py`` ("Calibration-then-Calculation"),
``experiments/topn_calibration.py`` (top-N calibration, Sato) and
``experiments/field_calibration.py`` (Field-aware Calibration, Pan et al.).  Nothing here is public
library API: small model families trained with optax (linear / logistic regression fitted
by fixed-iteration Newton, a flax field-embedding MLP for CTR, matrix factorisation and a
neural collaborative filter for top-N), and the metric-accuracy estimator of "Calibration-then-Calculation"
Eq. 8.  The command line and the output writing belong to the harness
(``experiments._study``).

Metrics and calibrators always come from the library (``calib_jax.metrics``,
``calib_jax.calibrators``); data from ``calib_jax.data``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from calib_jax._src.linalg import spd_solve
from calib_jax._src.precision import MATMUL

# --------------------------------------------------------------------------------------
# "Calibration-then-Calculation": metric accuracy (Eq. 8)
# --------------------------------------------------------------------------------------


def simulator_table(*, seed: int, scale: str = "quick", max_rows: int | None = None,
                    n_chunks: int | None = None) -> dict[str, np.ndarray]:
    """Logged impressions of the ad-auction simulator as model-ready arrays.

    Returns ``fields`` (n, F) int32 (every categorical field except the latent ``regime``,
    which no real model observes), ``dense`` (n, 4) float32 (standardised), ``y`` (n,),
    ``oracle`` (n,), ``pctr_logit`` (n,), ``field_names`` and ``cardinalities``.  Rows
    keep the simulator's time order (chunks are consecutive), so slicing gives
    chronological splits.
    """
    from calib_jax.data import simulator as sim

    if scale == "tiny":
        cfg = sim.tiny_config(n_chunks=n_chunks or 2)
    elif scale == "quick":
        cfg = sim.tiny_config(n_chunks=n_chunks or 8)
    else:
        cfg = sim.default_config(**({"n_chunks": n_chunks} if n_chunks else {}))
    imp = sim.simulate(cfg, jax.random.key(seed))
    n = len(imp) if max_rows is None else min(len(imp), max_rows)
    keep = [j for j, name in enumerate(sim.FIELD_NAMES) if name != "regime"]
    card = sim.field_cardinalities(cfg)
    dense = imp.dense[:n].astype(np.float32)
    dense = (dense - dense.mean(0)) / np.maximum(dense.std(0), 1e-6)
    return {
        "fields": imp.fields[:n, keep].astype(np.int32),
        "dense": dense,
        "y": imp.click[:n].astype(np.float32),
        "oracle": imp.oracle[:n].astype(np.float32),
        "pctr_logit": imp.pctr_logit[:n].astype(np.float32),
        "field_names": np.asarray([sim.FIELD_NAMES[j] for j in keep]),
        "cardinalities": np.asarray([card[sim.FIELD_NAMES[j]] for j in keep]),
    }


def metric_accuracy(m_a: jax.Array, m_b: jax.Array) -> jax.Array:
    r"""Fraction of (A_i, B_j) pairs in which the metric ranks pipeline A better ("Calibration-then-Calculation" Eq. 8).

    .. math:: \widehat{\mathrm{Acc}} = \frac{1}{n_A n_B}\sum_{i}\sum_{j}
              \mathbb{1}\{M(A_i) < M(B_j)\}

    Lower metric values are better.  Ties count one half (an unbiased estimator of
    P(M(A) < M(B)) + P(M(A) = M(B))/2).  Works on the last axis, so it vmaps over rounds.
    """
    d = m_a[..., :, None] - m_b[..., None, :]
    return jnp.mean(jnp.where(d < 0, 1.0, jnp.where(d == 0, 0.5, 0.0)), axis=(-2, -1))


def log_loss_from_logits(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Mean Bernoulli negative log-likelihood computed in logit space (log_sigmoid)."""
    return -jnp.mean(labels * jax.nn.log_sigmoid(logits) + (1 - labels) * jax.nn.log_sigmoid(-logits))


# --------------------------------------------------------------------------------------
# "Calibration-then-Calculation" synthetic pipelines: linear and logistic regression in JAX
# --------------------------------------------------------------------------------------


def fit_linear(x: jax.Array, y: jax.Array, *, ridge: float = 1e-8) -> jax.Array:
    """Least squares with intercept (normal equations); returns (d+1,) = [w, b].

    The (d+1)-square system is solved by :func:`calib_jax._src.linalg.spd_solve`: LAPACK's
    batched solve deadlocks two independent ``vmap``-ed fits on a 2-thread CPU pool."""
    xa = jnp.concatenate([x, jnp.ones((x.shape[0], 1), x.dtype)], axis=1)
    a = jnp.matmul(xa.T, xa, precision=MATMUL) + ridge * jnp.eye(xa.shape[1], dtype=x.dtype)
    return spd_solve(a, jnp.matmul(xa.T, y, precision=MATMUL))


def fit_logistic(x: jax.Array, y: jax.Array, *, n_iter: int = 25, ridge: float = 1e-4) -> jax.Array:
    """Logistic regression with intercept by a fixed number of Newton steps (vmap-able;
    the Newton system is solved by :func:`calib_jax._src.linalg.spd_solve`, see :func:`fit_linear`)."""
    xa = jnp.concatenate([x, jnp.ones((x.shape[0], 1), x.dtype)], axis=1)
    eye = jnp.eye(xa.shape[1], dtype=x.dtype)

    def step(w, _):
        z = jnp.matmul(xa, w, precision=MATMUL)
        p = jax.nn.sigmoid(z)
        g = jnp.matmul(xa.T, p - y, precision=MATMUL) + ridge * w
        h = jnp.matmul((xa * (p * (1 - p))[:, None]).T, xa, precision=MATMUL) + ridge * eye
        return w - spd_solve(h, g), None

    w, _ = jax.lax.scan(step, jnp.zeros(xa.shape[1], x.dtype), None, length=n_iter)
    return w


def predict_affine(w: jax.Array, x: jax.Array) -> jax.Array:
    """``x @ w[:-1] + w[-1]``."""
    return jnp.matmul(x, w[:-1], precision=MATMUL) + w[-1]


# --------------------------------------------------------------------------------------
# a small flax CTR model (field embeddings + dense features + MLP)
# --------------------------------------------------------------------------------------


class CTRNet(nn.Module):
    """Field embeddings + dense features -> MLP -> logit, with *data-valued* pipeline knobs.

    The "Calibration-then-Calculation" §5.3 pipeline differences (feature sets, layer widths, batch norm, dropout
    rate, L2 weight) are passed as arrays in ``hp`` rather than as module structure, so every
    pipeline shares one compiled program and pipelines x seeds train in a single ``vmap``:

    * ``field_mask`` (F,), ``dense_mask`` (): 0 removes a field's embedding / the dense block;
    * ``width_mask``: tuple of (h_l,) 0/1 masks of hidden units (a "smaller" network);
    * ``bn`` (): 1 applies batch normalisation after each hidden Dense layer;
    * ``dropout`` (): dropout rate in [0, 1) after each hidden activation (inverted dropout).

    Its Dense layers multiply at ``MATMUL`` precision (float32-exact on every backend; without
    it recent NVIDIA GPUs multiply float32 in TF32).
    """

    cardinalities: tuple[int, ...]
    emb_dim: int = 8
    hidden: tuple[int, ...] = (64, 32)

    @nn.compact
    def __call__(self, fields: jax.Array, dense: jax.Array, hp: Mapping[str, Any], *,
                 train: bool, return_embedding: bool = False) -> Any:
        parts = [nn.Embed(c, self.emb_dim, name=f"emb_{j}")(fields[:, j]) * hp["field_mask"][j]
                 for j, c in enumerate(self.cardinalities)]
        parts.append(dense * hp["dense_mask"])
        h = jnp.concatenate(parts, axis=-1)
        for layer, width in enumerate(self.hidden):
            h = nn.Dense(width, precision=MATMUL)(h)
            hb = nn.BatchNorm(use_running_average=not train, momentum=0.9)(h)
            h = hp["bn"] * hb + (1.0 - hp["bn"]) * h
            h = nn.relu(h) * hp["width_mask"][layer][None, :]
            if train:
                keep = 1.0 - hp["dropout"]
                m = jax.random.bernoulli(self.make_rng("dropout"), keep, h.shape)
                h = jnp.where(m, h / keep, 0.0)
        logit = nn.Dense(1, precision=MATMUL)(h)[:, 0]
        return (logit, h) if return_embedding else logit


def default_hp(net: CTRNet, **overrides: Any) -> dict[str, Any]:
    """Pipeline knobs of :class:`CTRNet`: everything on, no BN, no dropout, no L2."""
    hp: dict[str, Any] = {
        "field_mask": jnp.ones(len(net.cardinalities)),
        "dense_mask": jnp.ones(()),
        "width_mask": tuple(jnp.ones(w) for w in net.hidden),
        "bn": jnp.zeros(()),
        "dropout": jnp.zeros(()),
        "l2": jnp.zeros(()),
    }
    hp.update(overrides)
    return hp


def stack_hp(hps: Sequence[Mapping[str, Any]]) -> Any:
    """Stack a list of ``hp`` dicts along a new leading axis (for ``vmap``)."""
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *hps)


def _l2(params: Any) -> jax.Array:
    return sum(jnp.sum(p**2) for p in jax.tree_util.tree_leaves(params))


def init_ctr_variables(net: CTRNet, key: jax.Array, hp: Mapping[str, Any], fields: jax.Array,
                       dense: jax.Array) -> Any:
    """The initial variables ``train(key, ...)`` of :func:`make_ctr_trainer` starts from:
    ``train(key, hp, f, d, y, init_ctr_variables(net, key, hp, f, d))`` is
    ``train(key, hp, f, d, y)``, so one compiled trainer serves both (a fresh model and the
    continued one of the Model-2 protocol)."""
    k_init, _ = jax.random.split(key)
    return net.init({"params": k_init, "dropout": k_init}, fields[:2], dense[:2], hp, train=False)


def make_ctr_trainer(net: CTRNet, *, n_train: int, batch_size: int, lr: float,
                     epochs: int = 1) -> Callable[..., Any]:
    """Return ``train(key, hp, fields, dense, y, variables=None) -> variables``.

    ``epochs`` pass(es) of Adam over shuffled minibatches (``lax.scan``); the loss is the
    logit-space log loss plus ``hp["l2"] * ||params||²``.  Pure in ``key`` and ``hp`` so
    pipelines x seeds train in one ``jax.vmap``.  Passing ``variables`` continues training
    from them with a fresh optimiser (the Field-aware Calibration (Pan et al.) Model-2 protocol).
    """
    steps = max(n_train // batch_size, 1)
    tx = optax.adam(lr)

    def loss_fn(params, state, hp, f, d, y, rng):
        logits, new_state = net.apply({"params": params, **state}, f, d, hp, train=True,
                                      mutable=["batch_stats"], rngs={"dropout": rng})
        loss = log_loss_from_logits(logits, y) + hp["l2"] * _l2(params)
        return loss, new_state

    def train(key, hp, fields, dense, y, variables=None):
        _, k_data = jax.random.split(key)
        if variables is None:
            variables = init_ctr_variables(net, key, hp, fields, dense)
        params = variables["params"]
        state = {k: v for k, v in variables.items() if k != "params"}

        def epoch(carry, k_epoch):
            k_perm, k_drop = jax.random.split(k_epoch)
            perm = jax.random.permutation(k_perm, fields.shape[0])[: steps * batch_size]
            perm = perm.reshape(steps, batch_size)

            def step(c, inp):
                params, state, opt = c
                idx, rng = inp
                (_, state), g = jax.value_and_grad(loss_fn, has_aux=True)(
                    params, state, hp, fields[idx], dense[idx], y[idx], rng)
                upd, opt = tx.update(g, opt, params)
                return (optax.apply_updates(params, upd), state, opt), None

            carry, _ = jax.lax.scan(step, carry, (perm, jax.random.split(k_drop, steps)))
            return carry, None

        (params, state, _), _ = jax.lax.scan(epoch, (params, state, tx.init(params)),
                                             jax.random.split(k_data, epochs))
        return {"params": params, **state}

    return train


def ctr_logits(net: CTRNet, variables: Any, hp: Mapping[str, Any], fields: jax.Array,
               dense: jax.Array, *, return_embedding: bool = False) -> Any:
    """Inference logits (batch norm uses running averages, no dropout); with
    ``return_embedding`` also the penultimate activations z (n, hidden[-1])."""
    return net.apply(variables, fields, dense, hp, train=False, return_embedding=return_embedding)


# --------------------------------------------------------------------------------------
# top-N calibration (Sato): recommenders on a fully observed user x item matrix
# --------------------------------------------------------------------------------------


class MF(nn.Module):
    """Biased matrix factorisation: s_ui = <p_u, q_i> + b_u + b_i + b."""

    n_users: int
    n_items: int
    dim: int = 16

    @nn.compact
    def __call__(self, u: jax.Array, i: jax.Array) -> jax.Array:
        init = nn.initializers.normal(0.05)
        pu = nn.Embed(self.n_users, self.dim, embedding_init=init)(u)
        qi = nn.Embed(self.n_items, self.dim, embedding_init=init)(i)
        bu = nn.Embed(self.n_users, 1, embedding_init=nn.initializers.zeros)(u)[:, 0]
        bi = nn.Embed(self.n_items, 1, embedding_init=nn.initializers.zeros)(i)[:, 0]
        b = self.param("b", nn.initializers.zeros, ())
        return jnp.sum(pu * qi, axis=-1) + bu + bi + b


class NCF(nn.Module):
    """Neural collaborative filtering (GMF + MLP towers over user/item embeddings)."""

    n_users: int
    n_items: int
    dim: int = 16
    hidden: tuple[int, ...] = (32, 16)

    @nn.compact
    def __call__(self, u: jax.Array, i: jax.Array) -> jax.Array:
        init = nn.initializers.normal(0.05)
        gmf = (nn.Embed(self.n_users, self.dim, embedding_init=init)(u)
               * nn.Embed(self.n_items, self.dim, embedding_init=init)(i))
        h = jnp.concatenate([nn.Embed(self.n_users, self.dim, embedding_init=init)(u),
                             nn.Embed(self.n_items, self.dim, embedding_init=init)(i)], axis=-1)
        for width in self.hidden:
            h = nn.relu(nn.Dense(width)(h))
        return nn.Dense(1)(jnp.concatenate([gmf, h], axis=-1))[:, 0]


_REC_RUNNERS: dict[tuple, Callable[..., Any]] = {}


def train_recommender(model: nn.Module, key: jax.Array, u: jax.Array, i: jax.Array, y: jax.Array,
                      *, epochs: int, batch_size: int, lr: float, l2: float) -> Any:
    """Minibatch Adam on the logit-space log loss (+ L2) for ``epochs`` passes.

    The jitted training loop is cached per (model, sizes, hyper-parameters), so repeated
    splits of the same size compile once.
    """
    steps = max(u.shape[0] // batch_size, 1)
    sig = (model, u.shape[0], epochs, batch_size, lr, l2)
    if sig not in _REC_RUNNERS:
        tx = optax.adam(lr)

        def loss_fn(p, uu, ii, yy):
            return log_loss_from_logits(model.apply({"params": p}, uu, ii), yy) + l2 * _l2(p)

        @jax.jit
        def run(key, u, i, y):
            k_init, k_data = jax.random.split(key)
            params = model.init(k_init, u[:2], i[:2])["params"]

            def epoch(carry, k):
                perm = jax.random.permutation(k, u.shape[0])[: steps * batch_size]

                def step(c, idx):
                    p, o = c
                    g = jax.grad(loss_fn)(p, u[idx], i[idx], y[idx])
                    upd, o = tx.update(g, o, p)
                    return (optax.apply_updates(p, upd), o), None

                carry, _ = jax.lax.scan(step, carry, perm.reshape(steps, batch_size))
                return carry, None

            (p, _), _ = jax.lax.scan(epoch, (params, tx.init(params)),
                                     jax.random.split(k_data, epochs))
            return p

        _REC_RUNNERS[sig] = run
    return _REC_RUNNERS[sig](key, u, i, y)


def rank_within_user(users: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """1-based rank of each row among the rows of the same user, by descending score."""
    order = np.lexsort((-scores, users))
    ranks = np.empty(users.shape[0], dtype=np.int64)
    su = users[order]
    starts = np.r_[0, np.flatnonzero(np.diff(su)) + 1]
    counts = np.diff(np.r_[starts, su.shape[0]])
    ranks[order] = np.arange(su.shape[0]) - np.repeat(starts, counts) + 1
    return ranks


def paired_t_interval(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> dict[str, float]:
    r"""Mean paired difference of independent replicates with its t-interval.

    .. math:: \bar d \pm t_{R-1,\,(1+\ell)/2}\, s_d / \sqrt{R},\qquad d_r = a_r - b_r

    For replicates that are independent (disjoint folds, fresh splits and refits), never
    for overlapping resamples of one fitted model. ``lo``/``hi`` are NaN for R < 2."""
    from scipy import stats

    d = np.asarray(a, np.float64) - np.asarray(b, np.float64)
    R = d.size
    se = d.std(ddof=1) / np.sqrt(R) if R > 1 else float("nan")
    t = stats.t.ppf((1 + level) / 2, R - 1) if R > 1 else float("nan")
    return {"diff": float(d.mean()), "lo": float(d.mean() - t * se), "hi": float(d.mean() + t * se),
            "n": int(R)}


def crossed_t_interval(d: Any, level: float = 0.95) -> dict[str, float]:
    r"""Mean of a fits x splits table of paired differences with an interval over both sources.

    ``d[h, r]`` is a method difference (A - B) under fit ``h`` (each fit on its own
    initialisation and its own draw of the fitting data) and split ``r`` (independent
    evaluation rows and hold-out set), the two crossed. The model is the two-way random
    effects model without replication, :math:`d_{hr} = \mu + a_h + b_r + e_{hr}`, whose grand
    mean has variance :math:`\sigma_a^2/H + \sigma_b^2/R + \sigma_e^2/(HR)`. With the ANOVA
    mean squares (:math:`E[MS_A] = \sigma_e^2 + R\sigma_a^2`, :math:`E[MS_B] = \sigma_e^2 +
    H\sigma_b^2`, :math:`E[MS_E] = \sigma_e^2`) the unbiased estimate is

    .. math:: \hat V = (MS_A + MS_B - MS_E) / (HR),

    floored at :math:`MS_E/(HR)` (:math:`\sigma_e^2/(HR)` is a lower bound of the variance), and the
    interval is :math:`\bar d \pm t_{\nu} \sqrt{\hat V}` with Satterthwaite's degrees of
    freedom :math:`\nu = \hat V^2 / \sum_j (c_j MS_j)^2/\nu_j` (Satterthwaite 1946, "An
    approximate distribution of estimates of variance components"; Searle, Casella &
    McCulloch, "Variance Components", §4.5). With one fit (H = 1) it is the paired t-interval
    over the splits; a difference that does not depend on the fit (both methods refitted per
    split only) gives :math:`MS_A = MS_E = 0` and the same interval. Coverage is checked by
    simulation with known variance components in ``tests/test_verdicts.py``.

    Args:
      d: (H, R) differences (a 1-D array is one fit, H = 1).
      level: interval level.

    Returns:
      ``{"diff", "lo", "hi", "n_fits", "n_splits", "df", "share_fit"}``: ``share_fit`` is the
      estimated share of the variance of the mean due to the fits (sigma_a^2 / H over V).

    Example:
      >>> import numpy as np
      >>> r = crossed_t_interval(np.array([[1.0, 2.0, 3.0], [1.5, 2.5, 3.5]]))
      >>> round(r["diff"], 2), r["n_fits"], r["n_splits"]
      (2.25, 2, 3)
    """
    from scipy import stats

    d = np.asarray(d, np.float64)
    d = d[None, :] if d.ndim == 1 else d
    if d.ndim != 2 or d.size == 0:
        raise ValueError(f"`d` must be a non-empty (fits, splits) table, got shape {d.shape}")
    H, R = d.shape
    mean = float(d.mean())
    out = {"diff": mean, "n_fits": int(H), "n_splits": int(R)}
    if H * R < 2 or not np.all(np.isfinite(d)):
        return {**out, "lo": float("nan"), "hi": float("nan"), "df": float("nan"), "share_fit": float("nan")}
    row, col = d.mean(axis=1), d.mean(axis=0)
    ms_a = R * float(np.sum((row - mean) ** 2)) / (H - 1) if H > 1 else 0.0
    ms_b = H * float(np.sum((col - mean) ** 2)) / (R - 1) if R > 1 else 0.0
    resid = d - row[:, None] - col[None, :] + mean
    ms_e = float(np.sum(resid ** 2)) / ((H - 1) * (R - 1)) if H > 1 and R > 1 else 0.0
    terms = [(ms_a, H - 1), (ms_b, R - 1)]
    v = ms_a + ms_b - ms_e
    if H > 1 and R > 1 and v >= ms_e:
        terms.append((ms_e, (H - 1) * (R - 1)))
    elif H > 1 and R > 1:  # floor: sigma_e^2 / (HR) is a lower bound of the variance
        v, terms = ms_e, [(ms_e, (H - 1) * (R - 1))]
    var = v / (H * R)
    denom = sum(ms ** 2 / nu for ms, nu in terms if nu > 0 and ms > 0)
    df = v ** 2 / denom if denom > 0 else float(max(H, R) - 1)
    half = float(stats.t.ppf((1 + level) / 2, df)) * np.sqrt(var) if var > 0 else 0.0
    share_fit = max(ms_a - ms_e, 0.0) / R / (H * var) if var > 0 and H > 1 else 0.0
    return {**out, "lo": mean - half, "hi": mean + half, "df": float(df), "share_fit": float(min(share_fit, 1.0))}


def summarise(values: Sequence[float]) -> tuple[float, float]:
    """(mean, std with ddof=1) of a sequence (std 0 for a single value)."""
    v = np.asarray(values, dtype=np.float64)
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0
