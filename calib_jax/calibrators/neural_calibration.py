r"""Neural Calibration: a field-aware parametric calibrator (Pan, Ao, Tang, Lu, Liu, Xiao and
He, "Field-aware Calibration" (WWW 2020), §4, eqs. 7-11).

The calibrated probability adds a learned correction of the raw categorical fields to an
isotonic line-plot map of the logit (eq. 7)

.. math::

    \hat p(l, x) = \sigma\big(\eta(l) + g(x)\big),

where :math:`\eta` is Isotonic Line-Plot Scaling (ILPS, eq. 10, knots at
:math:`\sigma(a_k) = k/(K+1)`) and :math:`g` is an MLP over embedded categorical fields.
Both are trained jointly on the development split by minimising the log-loss (eq. 8) plus
the ILPS monotonicity hinge of eq. 11, :math:`\lambda\sum_k (b_k - b_{k+1})_+`.

Choices (the paper leaves them open):

* ``eta`` reuses :mod:`calib_jax.calibrators.ilps` (knots, extrapolation and
  :func:`~calib_jax.calibrators.ilps.calibrated_logit`); it is initialised with
  ``ilps.fit`` on the rows that carry the gradient (not the early-stopping rows, on which an
  ILPS fitted to every row would be in-sample and always win the stopping rule), and ``g``
  starts at exactly 0 (zero-initialised output layer), so training starts from the ILPS
  solution and can only improve the training loss.
* ``g``: one embedding table per field (``embed_dim``), concatenated, ``hidden`` ReLU layers
  (default one layer of 32), a linear output.  Category ids seen at fit time get their own
  row; ids outside ``[0, vocab)`` at prediction share one extra out-of-vocabulary row, which
  is never trained and stays at its random initialisation (small: N(0, 1/embed_dim)).
* Optimiser: full-batch ``optax.adamw`` (learning rate ``lr``, decoupled weight decay
  ``weight_decay`` on the MLP only) for a fixed ``n_steps`` in a ``lax.scan``: the MLP is
  non-convex and over-parametrised, where Adam with a fixed budget is the standard,
  deterministic choice; full batch keeps the result a pure function of ``key``.
* Early stopping: high-cardinality fields (ads, user buckets) let the embeddings memorise
  the development split within a few hundred full-batch steps (measured on the simulator:
  test log-loss 0.53 against 0.128 for Platt without it).  A random ``stop_frac`` of the
  rows is kept out of the gradient and the iterate with the lowest log-loss on them is
  returned.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from calib_jax._src import validation as V
from calib_jax._src.precision import MATMUL
from calib_jax.calibrators import ilps
from calib_jax.calibrators._base import Calibrator, public_entry, register
from calib_jax.calibrators._common import ArrayLike, Context, KeyArg, check_number_option

__all__ = ["NeuralCalibrationParams", "fit", "fit_many", "predict", "field_correction", "CALIBRATOR"]


class FieldMLP(nn.Module):
    vocab_sizes: tuple[int, ...]
    embed_dim: int = 8
    hidden: tuple[int, ...] = (32,)

    @nn.compact
    def __call__(self, fields: jax.Array) -> jax.Array:
        cols = []
        for j, vsize in enumerate(self.vocab_sizes):
            ids = jnp.clip(fields[:, j], 0, vsize)  # vsize itself is the OOV row
            emb = nn.Embed(vsize + 1, self.embed_dim, name=f"embed_{j}",
                           embedding_init=nn.initializers.normal(1.0 / np.sqrt(self.embed_dim)))
            cols.append(emb(ids))
        h = jnp.concatenate(cols, axis=1)
        for d in self.hidden:
            h = nn.relu(nn.Dense(d, precision=MATMUL)(h))
        out = nn.Dense(1, kernel_init=nn.initializers.zeros, bias_init=nn.initializers.zeros,
                       precision=MATMUL)(h)
        return out[:, 0]


@dataclasses.dataclass(frozen=True)
class NeuralCalibrationParams:
    """Fitted Neural Calibration (pytree; architecture sizes are static metadata).

    Attributes:
      eta: :class:`~calib_jax.calibrators.ilps.ILPSParams`, the logit map.
      mlp: flax parameter dict of ``g``.
      vocab_sizes: categories per field seen at fit time (static).
      embed_dim, hidden: MLP architecture (static).
    """

    eta: Any
    mlp: Any
    vocab_sizes: tuple[int, ...] = dataclasses.field(metadata={"static": True})
    embed_dim: int = dataclasses.field(default=8, metadata={"static": True})
    hidden: tuple[int, ...] = dataclasses.field(default=(32,), metadata={"static": True})


jax.tree_util.register_dataclass(
    NeuralCalibrationParams, data_fields=["eta", "mlp"],
    meta_fields=["vocab_sizes", "embed_dim", "hidden"],
)


#: a fit refuses a field whose largest id + 1 exceeds twice its rows and this: its ids are sparse
#: (hashes, raw user ids), and the embedding table, a row per id up to the largest, would take
#: memory in proportion to the largest id (32 GB for an id of 10^9 at the default width)
_SPARSE_VOCAB = 2**22


def _fields(context: Mapping[str, Any] | None, n: int) -> jax.Array:
    if context is None or context.get("fields") is None:
        raise ValueError("`context['fields']` (n, F) int categorical fields is required")
    f = V.host_ids(context["fields"], "context['fields']")
    arr = f if isinstance(f, jax.Array) else jnp.asarray(f)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[0] != n:
        raise ValueError(f"`context['fields']` must have shape (n={n}, F), got {tuple(arr.shape)}")
    if not jnp.issubdtype(arr.dtype, jnp.integer):
        if V.is_concrete(arr):
            v = np.asarray(arr)
            if not np.all(np.isfinite(v)) or not np.all(v == np.round(v)):
                raise ValueError("`context['fields']` must hold integer category ids")
        arr = arr.astype(jnp.int32)
    if V.is_concrete(arr) and arr.size and int(np.min(np.asarray(jax.device_get(arr)))) < 0:
        raise ValueError("`context['fields']` ids must be non-negative")
    return arr


@functools.partial(jax.jit, static_argnames=("model", "n_steps", "extrapolate"))
def _train(b0, knots, mlp0, o, y, v, v_stop, x, lam, lr, weight_decay, *, model, n_steps,
           extrapolate):
    """AdamW on ``v``-weighted rows; returns the iterate with the lowest ``v_stop`` loss.

    The gradient rows and the stopping rows are two weightings of the same rows, so one forward
    pass per step gives both losses (the stopping loss as ``value_and_grad``'s auxiliary
    output), and the logits' place among the ILPS knots, which no step changes, is found once
    before the loop. Until 2026-12-04 each step ran a second forward pass for the stopping loss
    and placed the logits again: the same floats (tested against that form bit for bit), 1.64
    times slower a step on the 2-core CPU (``benchmarks/results/nc_loop.md``)."""
    geometry = ilps._geometry(knots, o, extrapolate)
    sgn = 2.0 * y - 1.0

    def losses(theta):
        b, mlp = theta
        s = ilps._eta_from(b, knots, *geometry) + model.apply(mlp, x)
        ll = jax.nn.log_sigmoid(sgn * s)
        data = -jnp.sum(v * ll) / jnp.maximum(jnp.sum(v), 1e-12)
        stop = -jnp.sum(v_stop * ll) / jnp.maximum(jnp.sum(v_stop), 1e-12)
        return data + lam * jnp.sum(jax.nn.relu(b[:-1] - b[1:])), stop

    # weight decay on the MLP only (mask False for the ILPS knot values)
    opt = optax.adamw(lr, weight_decay=weight_decay,
                      mask=(False, jax.tree.map(lambda _: True, mlp0)))
    theta0 = (b0, mlp0)

    def step(carry, _):
        theta, state, best, best_val = carry
        (val, stop), g = jax.value_and_grad(losses, has_aux=True)(theta)
        better = stop < best_val
        best = jax.tree.map(lambda a, b: jnp.where(better, a, b), theta, best)
        best_val = jnp.where(better, stop, best_val)
        upd, state = opt.update(g, state, theta)
        return (optax.apply_updates(theta, upd), state, best, best_val), val

    init = (theta0, opt.init(theta0), theta0, jnp.asarray(jnp.inf, o.dtype))
    (theta, _, best, best_val), vals = jax.lax.scan(step, init, None, length=n_steps)
    final_stop = losses(theta)[1]
    use_final = final_stop < best_val
    return jax.tree.map(lambda a, b: jnp.where(use_final, a, b), theta, best), vals


@public_entry
def fit(logits: ArrayLike, labels: ArrayLike, *, weights: ArrayLike | None = None, key: KeyArg = None,
        context: Context = None, n_knots: int = 100, lam: float = 1.0, embed_dim: int = 8,
        hidden: Sequence[int] = (32,), n_steps: int = 300, lr: float = 3e-3, weight_decay: float = 1e-3,
        extrapolate: str = "linear", stop_frac: float = 0.2) -> NeuralCalibrationParams:
    r"""Fit Neural Calibration :math:`\sigma(\eta(l) + g(x))` on the development split (eq. 7-8).

    .. math::

        \min_{b,\theta}\; \frac{1}{\sum_i v_i}\sum_i v_i\,\ell(\hat p_i, y_i) + \lambda\sum_k (b_k - b_{k+1})_+

    with :math:`\ell` the binary log loss of :math:`\hat p_i` against :math:`y_i`.

    Args:
      logits: (n,) uncalibrated logits ``l``, real.
      labels: (n,) labels in {0, 1}.
      weights: optional (n,) non-negative sample weights.
      key: PRNG key for the MLP initialisation and the early-stopping rows (default
        ``jax.random.key(0)``).
      context: must hold ``"fields"`` (n, F) non-negative integer category ids (a 1-D (n,)
        array is one field).
      n_knots, lam, extrapolate: ILPS settings (eqs. 10-11; see
        :func:`calib_jax.calibrators.ilps.fit`): K >= 2 knots, hinge weight >= 0,
        ``"linear"`` or ``"clamp"``.
      embed_dim, hidden: MLP architecture of ``g``: embedding width per field (int >= 1) and
        the widths of the ReLU layers (ints >= 1; ``()`` for none).
      n_steps, lr, weight_decay: full-batch AdamW budget: number of steps (int >= 1, static),
        learning rate, decoupled weight decay on the MLP.
      stop_frac: fraction of rows (drawn with ``key``) held out of the gradient for early
        stopping: the returned parameters are the iterate with the lowest log-loss on them
        (0 disables it: the last iterate is returned).

    Returns:
      :class:`NeuralCalibrationParams`: the ILPS map ``eta`` (K knots), the flax parameters
      of ``g`` and the static architecture (``vocab_sizes`` = largest id + 1 per field,
      ``embed_dim``, ``hidden``). Not jit-able: the vocabulary sizes are read from the
      concrete fields and the ILPS start is fitted eagerly; the AdamW loop itself is one
      compiled ``lax.scan`` (``n_steps`` static). Invalid input (NaN or inf logits, labels
      other than 0/1, negative weights or category ids, ``stop_frac`` outside [0, 1)) raises
      ``ValueError`` naming the argument.

    Example:
      >>> import numpy as np
      >>> from calib_jax.calibrators import neural_calibration as nc
      >>> rng = np.random.default_rng(0)
      >>> z = rng.normal(0.0, 2.0, 2000).astype(np.float32)
      >>> f = rng.integers(0, 2, (2000, 1))                     # one categorical field, ids {0, 1}
      >>> y = (rng.random(2000) < 1 / (1 + np.exp(-(z / 2 + f[:, 0] - 0.5)))).astype(np.float32)
      >>> small = dict(n_knots=5, embed_dim=2, hidden=(4,), n_steps=50, lr=0.03)  # a tiny, fast fit
      >>> params = nc.fit(z, y, context={"fields": f}, **small)
      >>> params.vocab_sizes, params.eta.values.shape
      ((2,), (5,))
      >>> g = nc.field_correction(params, np.array([[0], [1]]))
      >>> round(float(g[1] - g[0]))                              # the true field effect is +1
      1
    """
    return _fit_many(logits, labels, [key], batched=False, weights=weights, context=context,
                     n_knots=n_knots, lam=lam, embed_dim=embed_dim, hidden=hidden, n_steps=n_steps,
                     lr=lr, weight_decay=weight_decay, extrapolate=extrapolate,
                     stop_frac=stop_frac)[0]


@public_entry
def fit_many(logits: ArrayLike, labels: ArrayLike, *, keys: Any, **kwargs: Any
             ) -> list[NeuralCalibrationParams]:
    r"""H independent fits of :func:`fit`, one per key (MLP initialisation and early-stopping
    rows), trained as one ``jax.vmap``-ed program.

    Each key draws its own early-stopping rows, so each fit has its own ILPS start (fitted on
    its gradient rows). AdamW has no
    data-dependent branches, so ``vmap`` costs no extra evaluations (unlike the line searches
    of SAG's L-BFGS, see :func:`calib_jax.calibrators.sag.fit_many`). ``fit_many(...)[h]``
    equals ``fit(..., key=keys[h])`` to float32 rounding of the batched matrix products
    (tested: predictions within 1e-5).

    Args:
      logits, labels: as :func:`fit`.
      keys: a sequence of H PRNG keys, or a key array of shape (H,).
      **kwargs: every other argument of :func:`fit` except ``key``; ``weights`` may also be
        (H, n), one row of non-negative weights per fit (for example H bootstrap draws of the
        rows): fit h then equals ``fit(..., key=keys[h], weights=weights[h])``.

    Returns:
      A list of H :class:`NeuralCalibrationParams`. Not jit-able, as :func:`fit` (the ILPS
      starts are fitted eagerly, one per key); the H training loops run as one ``vmap``-ed
      compiled program. ``ValueError`` for an empty ``keys``, a ``key`` argument, or the
      invalid input :func:`fit` rejects.

    Example:
      >>> import jax
      >>> import numpy as np
      >>> from calib_jax.calibrators import neural_calibration as nc
      >>> rng = np.random.default_rng(0)
      >>> z = rng.normal(0.0, 2.0, 2000).astype(np.float32)
      >>> f = rng.integers(0, 2, (2000, 1))                     # one categorical field, ids {0, 1}
      >>> y = (rng.random(2000) < 1 / (1 + np.exp(-(z / 2 + f[:, 0] - 0.5)))).astype(np.float32)
      >>> small = dict(n_knots=5, embed_dim=2, hidden=(4,), n_steps=50, lr=0.03)  # a tiny, fast fit
      >>> fits = nc.fit_many(z, y, keys=jax.random.split(jax.random.key(0), 2), context={"fields": f},
      ...                    **small)
      >>> len(fits)
      2
      >>> [round(float(g[1] - g[0])) for g in (nc.field_correction(p, np.array([[0], [1]])) for p in fits)]
      [1, 1]
    """
    if "key" in kwargs:
        raise ValueError("`key` is not an argument of fit_many (use `keys`)")
    key_list = list(keys)
    if not key_list:
        raise ValueError("`keys` must hold at least one PRNG key")
    weights = kwargs.pop("weights", None)
    if weights is not None and np.ndim(weights) == 2:
        rows = np.shape(weights)
        if rows[0] != len(key_list):
            raise ValueError(f"`weights` has {rows[0]} rows of per-fit weights, expected one per key "
                             f"({len(key_list)})")
        per_fit = [V.check_weights(weights[h], rows[1], name=f"weights[{h}]") for h in range(rows[0])]
        return _fit_many(logits, labels, key_list, batched=True, per_fit_weights=per_fit, **kwargs)
    return _fit_many(logits, labels, key_list, batched=True, weights=weights, **kwargs)


def _fit_many(logits, labels, keys: list[Any], *, batched: bool, weights=None, per_fit_weights=None, context=None,
              n_knots: int = 100, lam: float = 1.0, embed_dim: int = 8,
              hidden: Sequence[int] = (32,), n_steps: int = 300, lr: float = 3e-3,
              weight_decay: float = 1e-3, extrapolate: str = "linear", stop_frac: float = 0.2
              ) -> list[NeuralCalibrationParams]:
    o, y, w = V.check_sample(logits, labels, weights)
    n = o.shape[0]
    if per_fit_weights is not None:
        if per_fit_weights[0].shape[0] != n:
            raise ValueError(f"`weights` rows have {per_fit_weights[0].shape[0]} entries, expected {n} (the rows)")
        vs = [jnp.asarray(v_h, o.dtype) for v_h in per_fit_weights]
    else:
        vs = [jnp.ones_like(o) if w is None else w] * len(keys)
    x = _fields(context, n)
    n_steps = V.check_positive_int(n_steps, "n_steps")
    if not isinstance(hidden, Sequence) or isinstance(hidden, str):  # `hidden=32` failed in `for h in hidden`
        raise ValueError(f"`hidden` must be a sequence of layer widths (() for none), got {hidden!r}")
    hidden = tuple(V.check_positive_int(h, "hidden") for h in hidden)  # int(h) read a width of 2.5 as 2
    embed_dim = V.check_positive_int(embed_dim, "embed_dim")
    # a NaN, infinite or non-positive learning rate left the MLP at its start without a word (the
    # early stopping kept the ILPS start), text was read as a number
    check_number_option(lr, "lr", "a finite number > 0", lambda v: 0.0 < v < np.inf, traced_ok=True)
    for name, v in (("weight_decay", weight_decay), ("lam", lam)):
        check_number_option(v, name, "a finite number >= 0", lambda x: 0.0 <= x < np.inf, traced_ok=True)
    vocab = tuple(int(c) + 1 for c in np.asarray(jnp.max(x, axis=0)))
    for j, size in enumerate(vocab):
        if size > max(2 * n, _SPARSE_VOCAB):
            raise ValueError(f"`context['fields']` column {j}: largest id {size - 1} for {n} rows; the field's "
                             f"embedding table has a row per id up to the largest ({size} rows), so pass dense "
                             "codes, for example np.unique(ids, return_inverse=True)[1] (and map the ids to be "
                             "predicted the same way)")
    model = FieldMLP(vocab_sizes=vocab, embed_dim=embed_dim, hidden=hidden)
    check_number_option(stop_frac, "stop_frac", "a number in [0, 1)", lambda v: 0.0 <= v < 1.0)

    def start(key, v):
        # The ILPS start sees the gradient rows only: fitted on every row, it is in-sample on
        # the stopping rows, and the stopping rule then keeps step 0 (g = 0) on fields of
        # modest signal -- measured on the simulator worlds before this fix: NC == ILPS.
        k_init, k_stop = jax.random.split(jax.random.key(0) if key is None else key)
        hold = jax.random.uniform(k_stop, (n,)) < stop_frac
        v_fit = jnp.where(hold, 0.0, v) if stop_frac > 0 else v
        v_stop = jnp.where(hold, v, 0.0) if stop_frac > 0 else v
        eta0 = ilps.fit(o, y, weights=v_fit, n_knots=n_knots, lam=lam, extrapolate=extrapolate)
        return eta0, model.init(k_init, x[:1]), v_fit, v_stop

    starts = [start(k, v_h) for k, v_h in zip(keys, vs, strict=True)]
    eta_ref = starts[0][0]
    train = functools.partial(_train, knots=eta_ref.knots, o=o, y=y, x=x,
                              lam=jnp.asarray(lam, o.dtype), lr=jnp.asarray(lr, o.dtype),
                              weight_decay=jnp.asarray(weight_decay, o.dtype), model=model,
                              n_steps=n_steps, extrapolate=eta_ref.extrapolate)
    if batched:
        b0, mlp0, v_fit, v_stop = jax.tree.map(
            lambda *a: jnp.stack(a), *[(e.values, m, vf, vs) for e, m, vf, vs in starts])
        (b, mlp), _ = jax.vmap(lambda b_, m, vf, vs: train(b_, mlp0=m, v=vf, v_stop=vs))(
            b0, mlp0, v_fit, v_stop)
        fits = [jax.tree.map(lambda a, h=h: a[h], (b, mlp)) for h in range(len(keys))]
    else:
        fits = [train(e.values, mlp0=m, v=vf, v_stop=vs)[0] for e, m, vf, vs in starts]
    return [NeuralCalibrationParams(
        eta=ilps.ILPSParams(knots=e.knots, values=b_h, fallback=e.fallback, extrapolate=e.extrapolate),
        mlp=mlp_h, vocab_sizes=vocab, embed_dim=int(embed_dim), hidden=hidden)
        for (b_h, mlp_h), (e, *_rest) in zip(fits, starts, strict=True)]


def field_correction(params: NeuralCalibrationParams, fields: Any) -> jax.Array:
    r"""The field-aware logit correction ``g(x)`` (n,) of eq. 7.

    Args:
      params: a fitted :class:`NeuralCalibrationParams`.
      fields: (n, F) non-negative integer category ids (a 1-D (n,) array is one field), with
        the F of the fit; an id at or above the fit's vocabulary size of its field uses the
        shared out-of-vocabulary embedding.

    Returns:
      (n,) float logit corrections, added to :math:`\eta(l)` by :func:`predict`. jit-able
      (the parameters' architecture is static). ``ValueError`` for negative or non-integer
      ids (eager calls) or a wrong number of fields.

    Example:
      >>> import numpy as np
      >>> from calib_jax.calibrators import neural_calibration as nc
      >>> rng = np.random.default_rng(0)
      >>> z = rng.normal(0.0, 2.0, 2000).astype(np.float32)
      >>> f = rng.integers(0, 2, (2000, 1))                     # one categorical field, ids {0, 1}
      >>> y = (rng.random(2000) < 1 / (1 + np.exp(-(z / 2 + f[:, 0] - 0.5)))).astype(np.float32)
      >>> small = dict(n_knots=5, embed_dim=2, hidden=(4,), n_steps=50, lr=0.03)  # a tiny, fast fit
      >>> params = nc.fit(z, y, context={"fields": f}, **small)
      >>> g = nc.field_correction(params, np.array([[0], [1], [7]]))  # 7: never seen, the OOV row
      >>> g.shape, bool(g[1] > g[0])                             # field 1 raises the logit
      ((3,), True)
    """
    x = _fields({"fields": fields}, np.shape(fields)[0])
    if x.shape[1] != len(params.vocab_sizes):
        raise ValueError(f"`fields` has {x.shape[1]} columns, expected {len(params.vocab_sizes)}")
    model = FieldMLP(vocab_sizes=params.vocab_sizes, embed_dim=params.embed_dim,
                      hidden=params.hidden)
    return _apply(params.mlp, x, model=model)


@functools.partial(jax.jit, static_argnames=("model",))
def _apply(mlp: Any, x: jax.Array, *, model: FieldMLP) -> jax.Array:
    """``model.apply(mlp, x)`` compiled once per architecture: called eagerly, flax runs the MLP
    op by op. The same floats as the eager call (tested)."""
    out: jax.Array = model.apply(mlp, x)  # type: ignore[assignment]
    return out


@public_entry
def predict(params: NeuralCalibrationParams, logits: Any, *,
            context: Mapping[str, Any] | None = None) -> jax.Array:
    r"""Calibrated probabilities :math:`\sigma(\eta(l) + g(x))` (eq. 7); needs ``context['fields']``.

    Args:
      params: a fitted :class:`NeuralCalibrationParams`.
      logits: (n,) uncalibrated logits ``l``, real.
      context: must hold ``"fields"``, (n, F) non-negative integer category ids (see
        :func:`field_correction` for unseen ids).

    Returns:
      (n,) probabilities in [0, 1]; not monotone in the logit across fields. jit-able.
      Called eagerly, NaN or inf logits, missing or negative fields raise ``ValueError``.

    Example:
      >>> import numpy as np
      >>> from calib_jax.calibrators import neural_calibration as nc
      >>> rng = np.random.default_rng(0)
      >>> z = rng.normal(0.0, 2.0, 2000).astype(np.float32)
      >>> f = rng.integers(0, 2, (2000, 1))                     # one categorical field, ids {0, 1}
      >>> y = (rng.random(2000) < 1 / (1 + np.exp(-(z / 2 + f[:, 0] - 0.5)))).astype(np.float32)
      >>> small = dict(n_knots=5, embed_dim=2, hidden=(4,), n_steps=50, lr=0.03)  # a tiny, fast fit
      >>> params = nc.fit(z, y, context={"fields": f}, **small)
      >>> p = nc.predict(params, np.zeros(2, np.float32), context={"fields": np.array([[0], [1]])})
      >>> p.shape, bool(p[0] < 0.5 < p[1])                       # truth: sigma(-1/2), sigma(1/2)
      ((2,), True)
    """
    o = V.check_logits(logits)
    x = _fields(context, o.shape[0])
    return jax.nn.sigmoid(ilps.calibrated_logit(params.eta, o) + field_correction(params, x))


CALIBRATOR = register(Calibrator(name="neural_calibration", fit=fit, predict=predict,
                                 monotone=False, needs=("fields",)))
