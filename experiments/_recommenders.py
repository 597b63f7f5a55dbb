r"""The five recommenders of the top-N calibration study (Sato, RecSys 2024, §5) behind one interface.

Sato, "Calibrating the Predictions for Top-N Recommendations" (RecSys 2024) trains ItemKNN and
MF for rating prediction on ML-1M and BPR, NCF and LightGCN for preference prediction on
KuaiRec, "with Cornac's defaults for ItemKNN, MF, BPR and Microsoft Recommenders' defaults for
NCF and LightGCN". This module builds the three that ``experiments._pipelines`` lacks and wraps
its two (``MF``, ``NCF``, trained by ``train_recommender``) so that a study can call any of the
five the same way::

    fitted = train(name, key, n_users, n_items, users, items, targets, **hyper)
    s = score(fitted, users, items)          # float64 scores, one per (user, item) row

``name`` is one of :data:`MODELS`; ``hyper`` overrides :data:`DEFAULTS` (the libraries' defaults,
each with the library, file and version it was read from). The training rows are a set of
distinct (user, item) pairs with a real target: a 0/1 click or a rating.

* **ItemKNN** (Sarwar, Karypis, Konstan, Riedl, "Item-based collaborative filtering
  recommendation algorithms", WWW 2001, §3.1.1 cosine similarity and §3.2.1 weighted sum), as
  Cornac computes it; NumPy / SciPy, no training loop.
* **BPR** (Rendle, Freudenthaler, Gantner, Schmidt-Thieme, "BPR: Bayesian Personalized Ranking
  from Implicit Feedback", UAI 2009, §4.1 the BPR-Opt criterion, §4.2 LearnBPR, §4.3.1 matrix
  factorisation), matrix factorisation with item bias, Cornac's sampling and update rule, in
  optax under ``jax.lax.scan``.
* **LightGCN** (He, Deng, Wang, Li, Zhang, Wang, "LightGCN: Simplifying and Powering Graph
  Convolution Network for Recommendation", SIGIR 2020, Eq. 7 propagation, Eq. 8 layer mean,
  Eq. 15 BPR loss), Microsoft Recommenders' loss, sampler and optimiser, propagation by
  ``jax.ops.segment_sum`` over the edge list (or by dense products where at least 1/16 of the
  user x item matrix is edges: the same numbers, four times faster on a CPU).
* **MF**, **NCF**: ``experiments._pipelines.MF`` / ``NCF`` trained by
  ``experiments._pipelines.train_recommender`` (logit-space log loss on 0/1 targets); the scores
  are their logits.

Positives (BPR, LightGCN). Both libraries train on positives only: Cornac's BPR treats every
training entry as a positive, Microsoft Recommenders' ``ImplicitCF`` keeps the rows with rating
> 0. Here a row is a positive when ``target >= pos_threshold`` (default 1: the click of 0/1 data;
on five-star ratings every rating, as both libraries do; pass ``pos_threshold=4`` for "liked").

Departures from the libraries, each with its reason:

* ItemKNN breaks ties among equally similar neighbours by the lower item index; Cornac's top-k
  heap keeps whichever its traversal (descending internal item id, i.e. reverse order of first
  appearance in the training rows) meets first. The predictions differ only when the k-th and
  the (k+1)-th most similar rated items have exactly equal similarities, which is common with
  Cornac's cosine on integer ratings (two items with a single co-rater have similarity 1).
  Measured against Cornac 3.0.1 (defaults, one thread): continuous random ratings, with and
  without mean-centring, k = 5 and amplify = 2, agree to 2e-15; on MovieLens-100K (the 60% +
  20% training and validation rows of ``calib_jax.data.movielens.paper_split`` to train, the
  19,960 test rows scored) 8.7% of the predictions differ, by up to 2.05 stars, and a Python
  simulation of Cornac's heap over its traversal order on these similarities reproduces all of
  Cornac's predictions to 1.3e-15, so tie order is the only difference. The item itself
  counts as a neighbour when the user rated it (a training pair), as in Cornac.
* ItemKNN scores users and items that the training data lacks (Cornac raises): a user with no
  training rows gets the global mean of the targets (0 when all targets are equal, Cornac's
  implicit-feedback case), an item with no training rows has no neighbours and gets the user's
  mean.
* BPR takes minibatches of ``batch_size`` triples and one SGD step on the *sum* of their
  per-triple losses: the first-order equivalent of Cornac's per-triple (Hogwild) updates, and
  exactly Cornac's update at ``batch_size=1``; per-triple steps under ``lax.scan`` would take
  half an hour at the paper's size (1,400 x 2,000 clicks, 60% training, 436,000 positives).
  There, with the defaults, Cornac 3.0.1's BPR (one thread) reaches a test AUC of 0.6580, this
  one 0.6579; after 10 epochs both reach 0.6576, and so does ``batch_size=1``.
* LightGCN's edge weights are :math:`1/\sqrt{d_u d_i}` (the paper's Eq. 3); Microsoft
  Recommenders adds 1e-9 to every degree (a relative change below float32 resolution).
  Its negatives are drawn uniformly from the user's non-positive items in one step (the
  inverse CDF over the gaps between the sorted positives) instead of by rejection: the same
  distribution.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import scipy.sparse as sp

from experiments import _pipelines as P

#: the recommenders of the study, in the paper's order (rating models first)
MODELS = ("ItemKNN", "MF", "BPR", "NCF", "LightGCN")

#: default hyper-parameters per model: the libraries' defaults, each with its source
DEFAULTS: dict[str, dict[str, Any]] = {
    "ItemKNN": {
        # Cornac 2.6.0, cornac/models/knn/recom_knn.py, ItemKNN.__init__ (the same in 1.18.0,
        # 2.2.0 and the 3.0.1 wheel; similarity.pyx computes the cosine over co-rating users). Cornac has no
        # shrinkage; weighting=None and the "pearson" similarity are not built here.
        "k": 20,
        "similarity": "cosine",
        "mean_centered": False,
        "amplify": 1.0,
    },
    "MF": {
        # the study's own settings (experiments/topn_calibration.py, QUICK): this MF is the
        # log-loss model of experiments._pipelines, not Cornac's squared-error MF (Cornac 2.6.0,
        # cornac/models/mf/recom_mf.py: k=10, max_iter=20, learning_rate=0.01, batch_size=256,
        # lambda_reg=0.02, use_bias=True), so Cornac's values would not mean the same here.
        "dim": 16,
        "epochs": 5,
        "batch_size": 512,
        "lr": 1e-2,
        "l2": 1e-6,
    },
    "BPR": {
        # Cornac 2.6.0, cornac/models/bpr/recom_bpr.pyx, BPR.__init__ (the same in 1.18.0, 2.2.0
        # and the 3.0.1 wheel). Its docstring says lambda_reg=0.001; the signature, which runs, says 0.01.
        "k": 10,
        "max_iter": 100,
        "learning_rate": 0.001,
        "lambda_reg": 0.01,
        "use_bias": True,
        # not Cornac's (it updates per triple, on every core): triples per SGD step
        "batch_size": 1024,
        # a training row is a positive when target >= pos_threshold (module docstring)
        "pos_threshold": 1.0,
    },
    "NCF": {
        # the study's own settings, as for MF: this NCF (GMF + MLP towers, log loss) is
        # experiments._pipelines.NCF; Microsoft Recommenders 1.2.1's NCF
        # (recommenders/models/ncf/ncf_singlenode.py: n_factors=8, layer_sizes=[16, 8, 4],
        # n_epochs=50, batch_size=64, learning_rate=5e-3, 4 sampled negatives per positive)
        # trains on sampled negatives, which a fully observed matrix does not need.
        "dim": 16,
        "epochs": 5,
        "batch_size": 512,
        "lr": 1e-2,
        "l2": 1e-6,
    },
    "LightGCN": {
        # Microsoft Recommenders 1.2.1 (unchanged to 2025-09),
        # recommenders/models/deeprec/config/lightgcn.yaml; the deep-dive notebook overrides
        # learning_rate=0.005 and epochs=50. At the study's paper size an epoch takes about 26 s
        # on one CPU core (dense propagation), so 1000 epochs about 7 hours: pass epochs=.
        "embed_size": 64,
        "n_layers": 3,
        "batch_size": 1024,
        "decay": 1e-4,
        "epochs": 1000,
        "learning_rate": 0.001,
        # a training row is a positive when target >= pos_threshold (module docstring)
        "pos_threshold": 1.0,
        # not the library's: how the graph products run (lightgcn_graph), same result
        "propagation": "auto",
    },
}

#: Cornac's stand-in for an exact-zero mean-centred rating (it keeps the entry "rated")
_EPS = 1e-8
#: elements per gathered block when ItemKNN scores (bounds its memory)
_BLOCK = 1 << 22


@dataclasses.dataclass(frozen=True)
class Fitted:
    """A trained recommender, as :func:`train` returns it and :func:`score` takes it.

    Attributes:
      name: one of :data:`MODELS`.
      n_users: number of users the model scores.
      n_items: number of items the model scores.
      hyper: the hyper-parameters it was trained with (defaults filled in).
      state: the fitted arrays (model-specific: similarities, factors, embeddings or flax params).
      module: the flax module of MF / NCF, else ``None``.
    """

    name: str
    n_users: int
    n_items: int
    hyper: dict[str, Any]
    state: dict[str, Any]
    module: Any = None


# --------------------------------------------------------------------------------------
# the common interface
# --------------------------------------------------------------------------------------


def train(name: str, key: jax.Array, n_users: int, n_items: int, users: Any, items: Any, targets: Any,
          **hyper: Any) -> Fitted:
    """Train one of the study's recommenders on (user, item, target) rows.

    The models and their objectives are in the module docstring: ItemKNN (Sarwar et al., WWW
    2001, §3.2.1: :math:`\\hat r_{ui} = \\bar r_u + \\sum_{j\\in N_k(i;u)} s_{ij}(r_{uj}-\\bar r_u)
    / (\\sum_{j\\in N_k(i;u)} |s_{ij}| + 10^{-8})`), BPR (Rendle et al., UAI 2009, §4.1:
    maximise :math:`\\sum \\ln\\sigma(\\hat x_{ui}-\\hat x_{uj}) - \\lambda\\|\\Theta\\|^2`),
    LightGCN (He et al., SIGIR 2020, Eqs. 7, 8, 15), MF and NCF (log loss on 0/1 targets).

    Args:
      name: one of :data:`MODELS` (``"ItemKNN"``, ``"MF"``, ``"BPR"``, ``"NCF"``, ``"LightGCN"``).
      key: a JAX PRNG key (initialisation and sampling; ItemKNN ignores it).
      n_users: number of users (user ids are ``0 .. n_users - 1``).
      n_items: number of items (item ids are ``0 .. n_items - 1``).
      users: (n,) int user id of each training row.
      items: (n,) int item id of each training row; the (user, item) pairs are distinct.
      targets: (n,) finite target of each row: a 0/1 click or a rating (MF / NCF: in [0, 1]).
      **hyper: hyper-parameters overriding ``DEFAULTS[name]``; any other name is refused.

    Returns:
      A :class:`Fitted` for :func:`score`.

    Raises:
      ValueError: naming the argument, for an unknown model or hyper-parameter, a bad value,
        ids out of range, rows of unequal length, repeated pairs, or no positive row (BPR,
        LightGCN).

    Example:
      >>> import jax, numpy as np
      >>> from experiments._recommenders import train, score
      >>> u, i = np.array([0, 0, 1, 1, 2]), np.array([0, 1, 1, 2, 0])
      >>> y = np.array([5.0, 3.0, 4.0, 2.0, 1.0])
      >>> knn = train("ItemKNN", jax.random.key(0), 3, 3, u, i, y, k=2)
      >>> score(knn, np.array([0, 1, 2]), np.array([2, 0, 1])).round(3).tolist()
      [3.0, 4.0, 1.0]
    """
    if name not in MODELS:
        raise ValueError(f"name: {name!r} is not one of {MODELS}")
    unknown = sorted(set(hyper) - set(DEFAULTS[name]))
    if unknown:
        raise ValueError(f"{unknown[0]}: not a hyper-parameter of {name} (it takes {sorted(DEFAULTS[name])})")
    hp = {**DEFAULTS[name], **hyper}
    _check_hyper(name, hp)
    n_users, n_items, u, i, y = _check_rows(n_users, n_items, users, items, targets, distinct=True)
    state, module = _TRAINERS[name](key, n_users, n_items, u, i, y, hp)
    return Fitted(name, n_users, n_items, hp, state, module)


def score(fitted: Fitted, users: Any, items: Any) -> np.ndarray:
    """Scores of (user, item) pairs under a trained recommender.

    ItemKNN: the predicted rating (or click score) of Sarwar et al.'s weighted sum; BPR:
    :math:`\\langle p_u, q_i\\rangle + b_i`; LightGCN: :math:`\\langle e_u, e_i\\rangle` of the
    layer-mean embeddings; MF / NCF: the logit of the flax model. All unbounded reals except
    ItemKNN's (within the range of the targets); the study's "Vanilla" applies a sigmoid.

    Args:
      fitted: what :func:`train` returned.
      users: (m,) int user ids in ``[0, fitted.n_users)``.
      items: (m,) int item ids in ``[0, fitted.n_items)``.

    Returns:
      (m,) float64 scores.

    Raises:
      ValueError: ``users`` / ``items`` out of range or of unequal length.

    Example:
      >>> import jax, numpy as np
      >>> from experiments._recommenders import train, score
      >>> u, i = np.repeat(np.arange(4), 3), np.tile(np.arange(3), 4)
      >>> y = (u % 2 == i % 2).astype(float)
      >>> knn = train("ItemKNN", jax.random.key(0), 4, 3, u, i, y, k=2)
      >>> s = score(knn, u, i)
      >>> s.dtype, s.shape
      (dtype('float64'), (12,))
    """
    _, _, u, i, _ = _check_rows(fitted.n_users, fitted.n_items, users, items, None, distinct=False)
    st = fitted.state
    if fitted.name == "ItemKNN":
        return _itemknn_scores(st, u, i, int(fitted.hyper["k"]))
    if fitted.name in ("MF", "NCF"):
        z = fitted.module.apply({"params": st["params"]}, jnp.asarray(u.astype(np.int32)),
                                jnp.asarray(i.astype(np.int32)))
        return np.asarray(z, dtype=np.float64)
    if fitted.name == "BPR":
        return _dot_scores(st["U"], st["V"], u, i) + st["b"][i].astype(np.float64)
    return _dot_scores(st["users"], st["items"], u, i)  # LightGCN


def _dot_scores(a: np.ndarray, b: np.ndarray, u: np.ndarray, i: np.ndarray) -> np.ndarray:
    """Row-wise float64 dot products ``<a[u], b[i]>`` in blocks (bounded memory)."""
    out = np.empty(u.shape[0], np.float64)
    step = max(_BLOCK // max(a.shape[1], 1), 1)
    for s in range(0, u.shape[0], step):
        uu, ii = u[s:s + step], i[s:s + step]
        out[s:s + step] = np.einsum("nd,nd->n", a[uu].astype(np.float64), b[ii].astype(np.float64))
    return out


# --------------------------------------------------------------------------------------
# input checks
# --------------------------------------------------------------------------------------


def _check_rows(n_users: Any, n_items: Any, users: Any, items: Any, targets: Any, *, distinct: bool):
    """Validated ``(n_users, n_items, users int64, items int64, targets float64 | None)``."""
    for arg, v in (("n_users", n_users), ("n_items", n_items)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
            raise ValueError(f"{arg}: must be a positive int, got {v!r}")
    n_users, n_items = int(n_users), int(n_items)
    if n_users * (n_items + 1) >= 2**31:
        raise ValueError(f"n_items: n_users x (n_items + 1) = {n_users * (n_items + 1)} must stay below 2**31 "
                         "(int32 pair keys)")
    arrays = {}
    for arg, v, n in (("users", users, n_users), ("items", items, n_items)):
        a = np.asarray(v)
        if a.ndim != 1 or not (np.issubdtype(a.dtype, np.integer) or a.size == 0):
            raise ValueError(f"{arg}: must be a 1-D int array, got shape {a.shape} dtype {a.dtype}")
        a = a.astype(np.int64)
        if a.size and (a.min() < 0 or a.max() >= n):
            raise ValueError(f"{arg}: ids must lie in [0, {n}), got [{a.min()}, {a.max()}]")
        arrays[arg] = a
    u, i = arrays["users"], arrays["items"]
    if u.shape != i.shape:
        raise ValueError(f"items: {i.shape[0]} rows, users has {u.shape[0]}")
    y = None
    if targets is not None:
        y = np.asarray(targets, dtype=np.float64)
        if y.shape != u.shape:
            raise ValueError(f"targets: shape {y.shape}, users has {u.shape}")
        if u.size == 0:
            raise ValueError("targets: no training rows")
        if not np.all(np.isfinite(y)):
            raise ValueError("targets: must be finite")
    if distinct and np.unique(u * n_items + i).size != u.size:
        raise ValueError("items: the (user, item) pairs must be distinct")
    return n_users, n_items, u, i, y


def _int(hp: Mapping[str, Any], arg: str, lo: int) -> None:
    v = hp[arg]
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < lo:
        raise ValueError(f"{arg}: must be an int >= {lo}, got {v!r}")


def _real(hp: Mapping[str, Any], arg: str, *, positive: bool) -> None:
    v = hp[arg]
    ok = (not isinstance(v, bool) and isinstance(v, int | float | np.integer | np.floating)
          and math.isfinite(v) and (v > 0 if positive else v >= 0))
    if not ok:
        raise ValueError(f"{arg}: must be a finite real {'> 0' if positive else '>= 0'}, got {v!r}")


def _bool(hp: Mapping[str, Any], arg: str) -> None:
    if not isinstance(hp[arg], bool | np.bool_):
        raise ValueError(f"{arg}: must be a bool, got {hp[arg]!r}")


def _check_hyper(name: str, hp: Mapping[str, Any]) -> None:
    """Raise ValueError naming the first bad hyper-parameter of ``name``."""
    if name == "ItemKNN":
        _int(hp, "k", 1)
        if hp["similarity"] not in ("cosine", "cosine_full"):
            raise ValueError(f"similarity: must be 'cosine' or 'cosine_full', got {hp['similarity']!r}")
        _bool(hp, "mean_centered")
        _real(hp, "amplify", positive=True)
    elif name in ("MF", "NCF"):
        _int(hp, "dim", 1)
        _int(hp, "epochs", 1)
        _int(hp, "batch_size", 1)
        _real(hp, "lr", positive=True)
        _real(hp, "l2", positive=False)
    elif name == "BPR":
        _int(hp, "k", 1)
        _int(hp, "max_iter", 1)
        _real(hp, "learning_rate", positive=True)
        _real(hp, "lambda_reg", positive=False)
        _bool(hp, "use_bias")
        _int(hp, "batch_size", 1)
    else:  # LightGCN
        _int(hp, "embed_size", 1)
        _int(hp, "n_layers", 0)
        _int(hp, "batch_size", 1)
        _real(hp, "decay", positive=False)
        _int(hp, "epochs", 1)
        _real(hp, "learning_rate", positive=True)
        if hp["propagation"] not in ("auto", "sparse", "dense"):
            raise ValueError(f"propagation: must be 'auto', 'sparse' or 'dense', got {hp['propagation']!r}")
    if "pos_threshold" in hp:
        v = hp["pos_threshold"]
        if isinstance(v, bool) or not isinstance(v, int | float | np.integer | np.floating) or not math.isfinite(v):
            raise ValueError(f"pos_threshold: must be a finite real, got {v!r}")


# --------------------------------------------------------------------------------------
# ItemKNN (Sarwar et al. 2001, as Cornac computes it)
# --------------------------------------------------------------------------------------


def item_similarity(x: Any, *, similarity: str = "cosine", amplify: float = 1.0) -> np.ndarray:
    """Item-item cosine similarity of a user x item matrix (Sarwar et al., WWW 2001, §3.1.1).

    A zero entry of ``x`` is "not rated". With ``U_ij`` the users who gave both items a
    non-zero value:

    * ``"cosine"`` (Cornac's ``similarity="cosine"``, cornac/models/knn/similarity.pyx): the
      norms run over the co-rating users only,
      :math:`s_{ij} = \\sum_{u\\in U_{ij}} x_{ui}x_{uj} / (\\sqrt{\\sum_{u\\in U_{ij}} x_{ui}^2}
      \\sqrt{\\sum_{u\\in U_{ij}} x_{uj}^2})`. On 0/1 data every pair of items with a common
      user gets similarity 1.
    * ``"cosine_full"`` (Sarwar et al.'s vectors in user space, scikit-learn's
      ``cosine_similarity`` of the columns): :math:`s_{ij} = x_i\\cdot x_j / (\\|x_i\\|\\|x_j\\|)`.

    A pair with a zero numerator (no co-rating user) gets 0, an item with no rating a zero row;
    then ``amplify`` = :math:`\\alpha` maps :math:`s \\mapsto \\mathrm{sign}(s)|s|^\\alpha`
    (Cornac's ``amplify``). Dense BLAS when at least 5% of ``x`` is non-zero, else SciPy sparse.

    Args:
      x: (n_users, n_items) array or SciPy sparse matrix of real values; 0 means not rated.
      similarity: ``"cosine"`` or ``"cosine_full"``.
      amplify: exponent :math:`\\alpha > 0`.

    Returns:
      (n_items, n_items) float64 symmetric matrix.

    Raises:
      ValueError: ``similarity`` unknown, ``amplify`` not > 0, ``x`` not 2-D or not finite.

    Example:
      >>> import numpy as np
      >>> from experiments._recommenders import item_similarity
      >>> x = np.array([[1.0, 2.0, 0.0], [3.0, 0.0, 1.0]])
      >>> item_similarity(x, similarity="cosine_full").round(3).tolist()
      [[1.0, 0.316, 0.949], [0.316, 1.0, 0.0], [0.949, 0.0, 1.0]]
      >>> item_similarity(x).round(3).tolist()  # one co-rater: 1
      [[1.0, 1.0, 1.0], [1.0, 1.0, 0.0], [1.0, 0.0, 1.0]]
    """
    if similarity not in ("cosine", "cosine_full"):
        raise ValueError(f"similarity: must be 'cosine' or 'cosine_full', got {similarity!r}")
    if not (isinstance(amplify, int | float | np.integer | np.floating) and math.isfinite(amplify) and amplify > 0):
        raise ValueError(f"amplify: must be a finite real > 0, got {amplify!r}")
    if sp.issparse(x):
        xs = sp.csr_matrix(x, dtype=np.float64)
        xs.eliminate_zeros()
    else:
        xd = np.asarray(x, dtype=np.float64)
        if xd.ndim != 2:
            raise ValueError(f"x: must be 2-D (users x items), got shape {xd.shape}")
        xs = sp.csr_matrix(xd) if np.count_nonzero(xd) < 0.05 * xd.size else None
    data = xs.data if xs is not None else xd
    if not np.all(np.isfinite(data)):
        raise ValueError("x: must be finite")
    if xs is not None:
        num = (xs.T @ xs).toarray()
        if similarity == "cosine":
            b = xs.copy()
            b.data = np.ones_like(b.data)
            x2 = xs.multiply(xs).tocsr()
            d = (x2.T @ b).toarray()  # d[i, j] = sum over co-raters of x_ui^2
    else:
        num = xd.T @ xd
        if similarity == "cosine":
            d = (xd * xd).T @ (xd != 0).astype(np.float64)
    sq = d * d.T if similarity == "cosine" else np.outer(np.diag(num), np.diag(num))
    den = np.sqrt(sq)  # one root of the product: exactly 1 for proportional vectors
    s = np.zeros_like(num)
    np.divide(num, den, out=s, where=(num != 0) & (den > 0))
    if amplify != 1.0:
        s = np.sign(s) * np.abs(s) ** amplify
    return s


def _train_itemknn(key: Any, n_users: int, n_items: int, u: np.ndarray, i: np.ndarray, y: np.ndarray,
                   hp: Mapping[str, Any]) -> tuple[dict[str, Any], None]:
    """Cornac's ItemKNN.fit: user means, centred ratings, similarities sorted per item."""
    del key
    raw = np.zeros((n_users, n_items))
    raw[u, i] = y
    if y.min() != y.max():  # Cornac's explicit-feedback case: centre by the user's mean
        cnt = np.bincount(u, minlength=n_users)
        tot = np.bincount(u, weights=y, minlength=n_users)
        mean = np.full(n_users, float(y.mean()))
        np.divide(tot, cnt, out=mean, where=cnt > 0)
        c = y - mean[u]
        c[c == 0] = _EPS  # Cornac keeps an exactly-average rating "rated" this way
        vals = np.zeros((n_users, n_items))
        vals[u, i] = c
    else:  # implicit feedback (all targets equal): no centring
        mean = np.zeros(n_users)
        vals = raw
    s = item_similarity(vals if hp["mean_centered"] else raw, similarity=hp["similarity"],
                        amplify=float(hp["amplify"]))
    order = np.argsort(-s, axis=1, kind="stable").astype(np.int32)  # ties: lower item index first
    return {"order": order, "sorted_sim": np.take_along_axis(s, order, axis=1), "sim": s,
            "vals": vals, "mean": mean, "n_rated": np.count_nonzero(vals, axis=1)}, None


def _itemknn_scores(st: Mapping[str, Any], u: np.ndarray, i: np.ndarray, k: int) -> np.ndarray:
    """Sarwar et al.'s weighted sum over the k most similar items the user rated.

    Each item's neighbours are pre-sorted by similarity, so a query reads the first L of them
    and keeps the rated ones; L starts near 1.5 k n_items / (items the user rated) and doubles
    for the queries that found fewer than k (up to every item).
    """
    order, ssort, vals, mean = st["order"], st["sorted_sim"], st["vals"], st["mean"]
    n_items = order.shape[0]
    out = np.empty(u.shape[0], np.float64)
    levels = []
    size = min(2 * k, n_items)
    while True:
        levels.append(size)
        if size >= n_items:
            break
        size = min(2 * size, n_items)
    levels_a = np.asarray(levels)
    want = np.minimum(1.5 * k * n_items / np.maximum(st["n_rated"][u], 1), n_items)
    start = np.searchsorted(levels_a, want)  # first level >= want
    pending = np.arange(u.shape[0])
    for lvl, size in enumerate(levels):
        ready = pending[start[pending] <= lvl]
        left = pending[start[pending] > lvl]
        unresolved = []
        step = max(_BLOCK // size, 1)
        for s in range(0, ready.shape[0], step):
            q = ready[s:s + step]
            cand = order[i[q], :size]
            w = ssort[i[q], :size]
            v = vals[u[q][:, None], cand]
            valid = (v != 0) & (w != 0)
            cs = np.cumsum(valid, axis=1)
            done = (cs[:, -1] >= k) | (size == n_items)
            w = np.where(valid & (cs <= k), w, 0.0)
            num = np.sum(w * v, axis=1)
            den = np.sum(np.abs(w), axis=1)
            out[q[done]] = mean[u[q[done]]] + num[done] / (den[done] + 1e-8)
            unresolved.append(q[~done])
        pending = np.concatenate([left, *unresolved]) if unresolved else left
        if pending.size == 0:
            break
    return out


# --------------------------------------------------------------------------------------
# positives and negative sampling (BPR, LightGCN)
# --------------------------------------------------------------------------------------


def positive_index(n_users: int, n_items: int, users: Any, items: Any) -> dict[str, np.ndarray]:
    """The positive (user, item) pairs in CSR form, with the keys the samplers search.

    With the positives of user u sorted, :math:`p_{u,0} < \\dots < p_{u,d_u-1}`, the number of
    non-positive items below :math:`p_{u,k}` is :math:`g_{u,k} = p_{u,k} - k`, so the r-th
    non-positive item (0-based) is :math:`r + \\#\\{k : g_{u,k} \\le r\\}`.

    Args:
      n_users: number of users.
      n_items: number of items.
      users: (n_pos,) int user of each positive pair.
      items: (n_pos,) int item of each positive pair (pairs distinct).

    Returns:
      dict of int32 arrays: ``indptr`` (n_users + 1,), ``items`` (n_pos,) the positive items
      sorted by (user, item), ``users`` (n_pos,) their users, ``pair_keys`` = user x n_items +
      item (sorted), ``gap_keys`` = user x (n_items + 1) + g (sorted).

    Example:
      >>> import numpy as np
      >>> from experiments._recommenders import positive_index
      >>> ix = positive_index(2, 4, np.array([1, 0, 1]), np.array([3, 2, 0]))
      >>> ix["indptr"].tolist(), ix["items"].tolist(), ix["gap_keys"].tolist()
      ([0, 1, 3], [2, 0, 3], [2, 5, 7])
    """
    u = np.asarray(users, np.int64)
    i = np.asarray(items, np.int64)
    o = np.lexsort((i, u))
    u, i = u[o], i[o]
    indptr = np.r_[0, np.cumsum(np.bincount(u, minlength=n_users))]
    rank = np.arange(u.shape[0]) - indptr[u]
    return {"indptr": indptr.astype(np.int32), "items": i.astype(np.int32), "users": u.astype(np.int32),
            "pair_keys": (u * n_items + i).astype(np.int32),
            "gap_keys": (u * (n_items + 1) + i - rank).astype(np.int32)}


def sample_negatives(key: jax.Array, index: Mapping[str, Any], users: jax.Array, n_items: int) -> jax.Array:
    """One item per user, uniform over the items that are not the user's positives.

    Draws :math:`r \\sim U\\{0, \\dots, n_{items} - d_u - 1\\}` and returns the r-th
    non-positive item, :math:`r + \\#\\{k : g_{u,k} \\le r\\}` (:func:`positive_index`): the
    distribution of Microsoft Recommenders' rejection sampler (``ImplicitCF.train_loader``) in
    one step. A user whose every item is a positive must not be passed (no negative exists).

    Args:
      key: JAX PRNG key.
      index: :func:`positive_index` of the positives (its arrays, NumPy or JAX).
      users: (b,) int32 users.
      n_items: number of items.

    Returns:
      (b,) int32 negative items.

    Example:
      >>> import jax, numpy as np
      >>> from experiments._recommenders import positive_index, sample_negatives
      >>> ix = positive_index(1, 4, np.array([0, 0]), np.array([0, 2]))
      >>> neg = sample_negatives(jax.random.key(0), ix, np.zeros(500, np.int32), 4)
      >>> sorted(set(np.asarray(neg).tolist()))
      [1, 3]
    """
    indptr = jnp.asarray(index["indptr"])
    gap_keys = jnp.asarray(index["gap_keys"])
    users = jnp.asarray(users, jnp.int32)
    start = indptr[users]
    free = n_items - (indptr[users + 1] - start)
    r = jnp.minimum(jnp.floor(jax.random.uniform(key, users.shape) * free).astype(jnp.int32), free - 1)
    below = jnp.searchsorted(gap_keys, users * (n_items + 1) + r, side="right").astype(jnp.int32) - start
    return r + below


def _is_positive(pair_keys: jax.Array, users: jax.Array, items: jax.Array, n_items: int) -> jax.Array:
    """Whether each (user, item) is a positive pair (binary search in the sorted keys)."""
    q = users * n_items + items
    at = jnp.clip(jnp.searchsorted(pair_keys, q), 0, pair_keys.shape[0] - 1)
    return pair_keys[at] == q


def _positives(name: str, n_users: int, n_items: int, u: np.ndarray, i: np.ndarray, y: np.ndarray,
               threshold: float) -> dict[str, np.ndarray]:
    m = y >= threshold
    if not np.any(m):
        raise ValueError(f"targets: no row reaches pos_threshold={threshold}, so {name} has no positive to train on")
    return positive_index(n_users, n_items, u[m], i[m])


# --------------------------------------------------------------------------------------
# BPR (Rendle et al. 2009, Cornac's sampler and update)
# --------------------------------------------------------------------------------------


def bpr_loss(params: Mapping[str, jax.Array], users: jax.Array, pos: jax.Array, neg: jax.Array,
             weights: jax.Array, lambda_reg: float) -> jax.Array:
    """Negative BPR-Opt of a batch of triples, summed (Rendle et al., UAI 2009, §4.1 and §4.3.1).

    .. math:: L = \\sum_s w_s \\Big[-\\ln\\sigma(\\hat x_{u i j}) + \\frac{\\lambda}{2}
              \\big(\\|p_u\\|^2 + \\|q_i\\|^2 + \\|q_j\\|^2 + b_i^2 + b_j^2\\big)\\Big],\\qquad
              \\hat x_{uij} = \\langle p_u, q_i - q_j\\rangle + b_i - b_j

    Its gradient is Cornac's per-triple update (cornac/models/bpr/recom_bpr.pyx): with
    :math:`z = \\sigma(-\\hat x_{uij})`, :math:`-\\partial L/\\partial p_u = z (q_i - q_j) -
    \\lambda p_u`, :math:`-\\partial L/\\partial q_i = z p_u - \\lambda q_i`, :math:`-\\partial
    L/\\partial b_i = z - \\lambda b_i` (and the negatives for j), summed over the batch.

    Args:
      params: ``{"U": (n_users, k), "V": (n_items, k), "b": (n_items,)}``.
      users: (s,) int users.
      pos: (s,) int positive items.
      neg: (s,) int negative items.
      weights: (s,) weight per triple (0 drops a skipped triple).
      lambda_reg: :math:`\\lambda \\ge 0`.

    Returns:
      () the summed loss.

    Example:
      >>> import jax.numpy as jnp
      >>> from experiments._recommenders import bpr_loss
      >>> p = {"U": jnp.ones((1, 2)), "V": jnp.array([[1.0, 0.0], [0.0, 0.0]]), "b": jnp.zeros(2)}
      >>> one = jnp.array([0])
      >>> round(float(bpr_loss(p, one * 0, one * 0, one * 0 + 1, jnp.ones(1), 0.0)), 4)  # -ln sigma(1)
      0.3133
    """
    pu, qi, qj = params["U"][users], params["V"][pos], params["V"][neg]
    bi, bj = params["b"][pos], params["b"][neg]
    x = jnp.sum(pu * (qi - qj), axis=-1) + bi - bj
    reg = jnp.sum(pu * pu + qi * qi + qj * qj, axis=-1) + bi * bi + bj * bj
    return jnp.sum(weights * (-jax.nn.log_sigmoid(x) + 0.5 * lambda_reg * reg))


_BPR_RUNNERS: dict[tuple, Callable[..., Any]] = {}


def _train_bpr(key: jax.Array, n_users: int, n_items: int, u: np.ndarray, i: np.ndarray, y: np.ndarray,
               hp: Mapping[str, Any]) -> tuple[dict[str, Any], None]:
    """Cornac's BPR.fit: per epoch as many triples as positives, each (u, i) a uniform positive
    pair, j a uniform item, the triple skipped when j is a positive of u; SGD on the summed
    loss of ``batch_size`` triples; U, V ~ (U(0,1) - 1/2) / k, b = 0."""
    ix = _positives("BPR", n_users, n_items, u, i, y, float(hp["pos_threshold"]))
    n_pos = int(ix["items"].shape[0])
    k, bs = int(hp["k"]), int(hp["batch_size"])
    steps = -(-n_pos // bs)
    sig = (n_users, n_items, n_pos, k, int(hp["max_iter"]), bs, float(hp["learning_rate"]),
           float(hp["lambda_reg"]), bool(hp["use_bias"]))
    if sig not in _BPR_RUNNERS:
        tx = optax.sgd(float(hp["learning_rate"]))
        lam, use_bias, epochs = float(hp["lambda_reg"]), bool(hp["use_bias"]), int(hp["max_iter"])

        @jax.jit
        def run(key, pos_users, pos_items, pair_keys):
            k_init, k_data = jax.random.split(key)
            ku, kv = jax.random.split(k_init)
            params = {"U": (jax.random.uniform(ku, (n_users, k)) - 0.5) / k,
                      "V": (jax.random.uniform(kv, (n_items, k)) - 0.5) / k,
                      "b": jnp.zeros(n_items)}

            def step(c, inp):
                p, o = c
                s, kk = inp
                k_pos, k_neg = jax.random.split(kk)
                at = jax.random.randint(k_pos, (bs,), 0, n_pos)
                uu, ii = pos_users[at], pos_items[at]
                jj = jax.random.randint(k_neg, (bs,), 0, n_items)
                keep = (s * bs + jnp.arange(bs) < n_pos) & ~_is_positive(pair_keys, uu, jj, n_items)
                g = jax.grad(bpr_loss)(p, uu, ii, jj, keep.astype(jnp.float32), lam)
                if not use_bias:
                    g = {**g, "b": jnp.zeros_like(g["b"])}
                upd, o = tx.update(g, o, p)
                return (optax.apply_updates(p, upd), o), None

            def epoch(carry, ke):
                carry, _ = jax.lax.scan(step, carry, (jnp.arange(steps), jax.random.split(ke, steps)))
                return carry, None

            (p, _), _ = jax.lax.scan(epoch, (params, tx.init(params)), jax.random.split(k_data, epochs))
            return p

        _BPR_RUNNERS[sig] = run
    p = _BPR_RUNNERS[sig](key, jnp.asarray(ix["users"]), jnp.asarray(ix["items"]), jnp.asarray(ix["pair_keys"]))
    return {k_: np.asarray(v) for k_, v in p.items()}, None


# --------------------------------------------------------------------------------------
# LightGCN (He et al. 2020, Microsoft Recommenders' loss and sampler)
# --------------------------------------------------------------------------------------


def lightgcn_graph(n_users: int, n_items: int, users: Any, items: Any, *,
                   propagation: str = "auto") -> dict[str, np.ndarray]:
    """The normalised user-item graph :math:`D^{-1/2} A D^{-1/2}` of LightGCN, built once.

    :math:`A = \\begin{pmatrix} 0 & R \\\\ R^\\top & 0 \\end{pmatrix}` with R the 0/1 user x
    item matrix of the edges (He et al., SIGIR 2020, Eq. 6) and D its degrees, so the edge
    (u, i) has weight :math:`1/\\sqrt{d_u d_i}` (Eq. 3). Two forms, equal up to float32
    rounding: ``"sparse"`` keeps the edge list twice (sorted by user, and by item) for
    ``jax.ops.segment_sum`` (memory and time linear in the edges); ``"dense"`` keeps the
    (n_users, n_items) float32 matrix :math:`D_u^{-1/2} R D_i^{-1/2}` for BLAS products, about
    four times faster per step on one CPU core at the study's size (1,400 x 2,000, 436,000
    edges: 0.08 s against 0.27 s for a gradient through three layers). ``"auto"`` picks dense
    when at least 1/16 of the matrix is edges and it has at most 2**26 entries (256 MB).

    Args:
      n_users: number of users.
      n_items: number of items.
      users: (n_edges,) int user of each edge (pairs distinct, at least one edge).
      items: (n_edges,) int item of each edge.
      propagation: ``"auto"``, ``"sparse"`` or ``"dense"``.

    Returns:
      dense: ``{"dense": (n_users, n_items) float32}``; sparse: ``{"users", "items", "w"}``
      (sorted by user) and ``{"users_i", "items_i", "w_i"}`` (sorted by item), int32 / float32.

    Raises:
      ValueError: ``propagation`` unknown.

    Example:
      >>> import numpy as np
      >>> from experiments._recommenders import lightgcn_graph
      >>> g = lightgcn_graph(2, 2, np.array([0, 0, 1]), np.array([0, 1, 1]), propagation="dense")
      >>> g["dense"].astype(float).round(3).tolist()  # 1 / sqrt(d_u d_i)
      [[0.707, 0.5], [0.0, 0.707]]
    """
    if propagation not in ("auto", "sparse", "dense"):
        raise ValueError(f"propagation: must be 'auto', 'sparse' or 'dense', got {propagation!r}")
    u = np.asarray(users, np.int64)
    i = np.asarray(items, np.int64)
    du = np.bincount(u, minlength=n_users).astype(np.float64)
    di = np.bincount(i, minlength=n_items).astype(np.float64)
    w = 1.0 / np.sqrt(du[u] * di[i])
    if propagation == "auto":
        cells = n_users * n_items
        propagation = "dense" if 16 * u.size >= cells and cells <= 2**26 else "sparse"
    if propagation == "dense":
        r = np.zeros((n_users, n_items), np.float32)
        r[u, i] = w
        return {"dense": r}
    ou, oi = np.lexsort((i, u)), np.lexsort((u, i))
    return {"users": u[ou].astype(np.int32), "items": i[ou].astype(np.int32), "w": w[ou].astype(np.float32),
            "users_i": u[oi].astype(np.int32), "items_i": i[oi].astype(np.int32), "w_i": w[oi].astype(np.float32)}


def lightgcn_propagate(emb_users: jax.Array, emb_items: jax.Array, graph: Mapping[str, Any],
                       n_layers: int) -> tuple[jax.Array, jax.Array]:
    """Layer-mean LightGCN embeddings (He et al., SIGIR 2020, Eqs. 7 and 8).

    .. math:: E^{(k+1)} = D^{-1/2} A D^{-1/2} E^{(k)},\\qquad
              E = \\frac{1}{K+1}\\sum_{k=0}^{K} E^{(k)}

    over the graph of :func:`lightgcn_graph`: per layer
    :math:`E_u^{(k+1)} = \\tilde R E_i^{(k)}`, :math:`E_i^{(k+1)} = \\tilde R^\\top E_u^{(k)}`
    with :math:`\\tilde R = D_u^{-1/2} R D_i^{-1/2}` (two ``segment_sum`` over the edges, or two
    dense products). A node without edges keeps :math:`E^{(0)}/(K+1)`.

    Args:
      emb_users: (n_users, d) layer-0 user embeddings.
      emb_items: (n_items, d) layer-0 item embeddings.
      graph: :func:`lightgcn_graph` of the edges (its arrays, NumPy or JAX).
      n_layers: K >= 0.

    Returns:
      (users (n_users, d), items (n_items, d)): the layer means.

    Example:
      >>> import jax.numpy as jnp, numpy as np
      >>> from experiments._recommenders import lightgcn_graph, lightgcn_propagate
      >>> g = lightgcn_graph(1, 2, np.array([0]), np.array([0]))
      >>> eu, ei = lightgcn_propagate(jnp.array([[1.0]]), jnp.array([[3.0], [5.0]]), g, 1)
      >>> eu.tolist(), ei.tolist()
      ([[2.0]], [[2.0], [2.5]])
    """
    n_u, n_i = emb_users.shape[0], emb_items.shape[0]
    if "dense" in graph:
        r = jnp.asarray(graph["dense"])

        def layer(eu, ei):
            return (jnp.matmul(r, ei, precision=jax.lax.Precision.HIGHEST),
                    jnp.matmul(r.T, eu, precision=jax.lax.Precision.HIGHEST))
    else:
        gu, gi, gw = (jnp.asarray(graph[k]) for k in ("users", "items", "w"))
        hu, hi, hw = (jnp.asarray(graph[k]) for k in ("users_i", "items_i", "w_i"))

        def layer(eu, ei):
            return (jax.ops.segment_sum(gw[:, None] * ei[gi], gu, num_segments=n_u, indices_are_sorted=True),
                    jax.ops.segment_sum(hw[:, None] * eu[hu], hi, num_segments=n_i, indices_are_sorted=True))
    eu, ei = emb_users, emb_items
    su, si = eu, ei
    for _ in range(n_layers):
        eu, ei = layer(eu, ei)
        su, si = su + eu, si + ei
    return su / (n_layers + 1), si / (n_layers + 1)


def lightgcn_loss(params: Mapping[str, jax.Array], graph: Mapping[str, Any], n_layers: int,
                  users: jax.Array, pos: jax.Array, neg: jax.Array, decay: float) -> jax.Array:
    """Microsoft Recommenders' LightGCN loss of a batch (He et al., SIGIR 2020, Eq. 15).

    .. math:: L = \\frac1B\\sum_{s=1}^{B} \\mathrm{softplus}(\\hat y_{u j} - \\hat y_{u i})
              + \\frac{\\lambda}{B}\\cdot\\frac12\\sum_{s=1}^{B}\\big(\\|e^{(0)}_u\\|^2
              + \\|e^{(0)}_i\\|^2 + \\|e^{(0)}_j\\|^2\\big)

    with :math:`\\hat y_{ui} = \\langle e_u, e_i\\rangle` of :func:`lightgcn_propagate`'s layer
    means and the L2 term on the layer-0 embeddings of the batch
    (recommenders/models/deeprec/models/graphrec/lightgcn.py, ``_create_bpr_loss``;
    softplus(-x) = -ln sigma(x)).

    Args:
      params: ``{"users": (n_users, d), "items": (n_items, d)}`` layer-0 embeddings.
      graph: :func:`lightgcn_graph` of the training positives.
      n_layers: K >= 0.
      users: (B,) int users of the batch.
      pos: (B,) int positive items.
      neg: (B,) int negative items.
      decay: :math:`\\lambda \\ge 0`.

    Returns:
      () the loss.

    Example:
      >>> import jax.numpy as jnp, numpy as np
      >>> from experiments._recommenders import lightgcn_graph, lightgcn_loss
      >>> p = {"users": jnp.zeros((1, 2)), "items": jnp.zeros((2, 2))}
      >>> g = lightgcn_graph(1, 2, np.array([0]), np.array([0]))
      >>> e = jnp.array([0])
      >>> round(float(lightgcn_loss(p, g, 2, e, e, e + 1, 1e-4)), 4)  # softplus(0) = ln 2
      0.6931
    """
    eu, ei = lightgcn_propagate(params["users"], params["items"], graph, n_layers)
    u, p, n = eu[users], ei[pos], ei[neg]
    x = jnp.sum(u * (p - n), axis=-1)
    u0, p0, n0 = params["users"][users], params["items"][pos], params["items"][neg]
    reg = 0.5 * (jnp.sum(u0 * u0) + jnp.sum(p0 * p0) + jnp.sum(n0 * n0))
    return jnp.mean(jax.nn.softplus(-x)) + decay * reg / users.shape[0]


_LGCN_RUNNERS: dict[tuple, Callable[..., Any]] = {}


def _train_lightgcn(key: jax.Array, n_users: int, n_items: int, u: np.ndarray, i: np.ndarray, y: np.ndarray,
                    hp: Mapping[str, Any]) -> tuple[dict[str, Any], None]:
    """Microsoft Recommenders' LightGCN.fit: per epoch n_pos // batch_size + 1 Adam steps, each on
    batch_size distinct users (with replacement when fewer users have positives), one uniform
    positive and one uniform non-positive item per user; Xavier-uniform layer-0 embeddings."""
    ix = _positives("LightGCN", n_users, n_items, u, i, y, float(hp["pos_threshold"]))
    graph = lightgcn_graph(n_users, n_items, ix["users"], ix["items"], propagation=hp["propagation"])
    n_pos = int(ix["items"].shape[0])
    deg = np.diff(ix["indptr"])
    eligible = np.flatnonzero((deg > 0) & (deg < n_items)).astype(np.int32)
    if eligible.size == 0:
        raise ValueError("targets: every user with a positive has every item positive; LightGCN has no negative")
    d, bs, n_layers = int(hp["embed_size"]), int(hp["batch_size"]), int(hp["n_layers"])
    steps = n_pos // bs + 1
    sig = (n_users, n_items, n_pos, eligible.size, d, n_layers, bs, float(hp["decay"]), int(hp["epochs"]),
           float(hp["learning_rate"]), "dense" in graph)
    if sig not in _LGCN_RUNNERS:
        tx = optax.adam(float(hp["learning_rate"]))
        decay, epochs = float(hp["decay"]), int(hp["epochs"])
        replace = eligible.size < bs

        @jax.jit
        def run(key, index, graph, eligible):
            k_init, k_data = jax.random.split(key)
            ku, ki = jax.random.split(k_init)
            # TF's VarianceScaling(1, "fan_avg", "uniform") of an (n, d) variable: U(-a, a), a = sqrt(6 / (n + d))
            params = {"users": jax.random.uniform(ku, (n_users, d), minval=-1.0, maxval=1.0)
                      * math.sqrt(6 / (n_users + d)),
                      "items": jax.random.uniform(ki, (n_items, d), minval=-1.0, maxval=1.0)
                      * math.sqrt(6 / (n_items + d))}
            indptr = index["indptr"]

            def step(c, kk):
                p, o = c
                k_u, k_p, k_n = jax.random.split(kk, 3)
                uu = jax.random.choice(k_u, eligible, (bs,), replace=replace)
                start = indptr[uu]
                dd = indptr[uu + 1] - start
                at = jnp.minimum(jnp.floor(jax.random.uniform(k_p, (bs,)) * dd).astype(jnp.int32), dd - 1)
                ii = index["items"][start + at]
                jj = sample_negatives(k_n, index, uu, n_items)
                g = jax.grad(lightgcn_loss)(p, graph, n_layers, uu, ii, jj, decay)
                upd, o = tx.update(g, o, p)
                return (optax.apply_updates(p, upd), o), None

            def epoch(carry, ke):
                carry, _ = jax.lax.scan(step, carry, jax.random.split(ke, steps))
                return carry, None

            (p, _), _ = jax.lax.scan(epoch, (params, tx.init(params)), jax.random.split(k_data, epochs))
            eu, ei = lightgcn_propagate(p["users"], p["items"], graph, n_layers)
            return p, eu, ei

        _LGCN_RUNNERS[sig] = run
    jix = {k_: jnp.asarray(v) for k_, v in ix.items()}
    p, eu, ei = _LGCN_RUNNERS[sig](key, jix, {k_: jnp.asarray(v) for k_, v in graph.items()}, jnp.asarray(eligible))
    return {"users": np.asarray(eu), "items": np.asarray(ei), "emb_users": np.asarray(p["users"]),
            "emb_items": np.asarray(p["items"])}, None


# --------------------------------------------------------------------------------------
# MF and NCF of experiments._pipelines
# --------------------------------------------------------------------------------------


def _train_flax(name: str) -> Callable[..., tuple[dict[str, Any], Any]]:
    def fit(key: jax.Array, n_users: int, n_items: int, u: np.ndarray, i: np.ndarray, y: np.ndarray,
            hp: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
        if y.min() < 0 or y.max() > 1:
            raise ValueError(f"targets: {name} trains on the log loss, so targets must lie in [0, 1], "
                             f"got [{y.min()}, {y.max()}]")
        model = (P.MF if name == "MF" else P.NCF)(n_users, n_items, dim=int(hp["dim"]))
        params = P.train_recommender(model, key, jnp.asarray(u.astype(np.int32)), jnp.asarray(i.astype(np.int32)),
                                     jnp.asarray(y.astype(np.float32)), epochs=int(hp["epochs"]),
                                     batch_size=int(hp["batch_size"]), lr=float(hp["lr"]), l2=float(hp["l2"]))
        return {"params": jax.block_until_ready(params)}, model  # trained when train() returns

    return fit


_TRAINERS: dict[str, Callable[..., tuple[dict[str, Any], Any]]] = {
    "ItemKNN": _train_itemknn, "MF": _train_flax("MF"), "BPR": _train_bpr, "NCF": _train_flax("NCF"),
    "LightGCN": _train_lightgcn,
}
