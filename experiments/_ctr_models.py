r"""The CTR architectures of "Calibration-then-Calculation" §5.3 (Tables 3-4) as flax modules.

The paper trains FNN, DeepFM, DCN, DCNMix and xDeepFM with the implementations of DeepCTR
(W. Shen, 2017, github.com/shenweichen/DeepCTR). This module re-implements those five
architectures (own code, written from the papers and checked against DeepCTR's model code) as
drop-ins for :class:`experiments._pipelines.CTRNet`, so that :func:`~experiments._pipelines.make_ctr_trainer`,
:func:`~experiments._pipelines.default_hp`, :func:`~experiments._pipelines.init_ctr_variables` and
:func:`~experiments._pipelines.ctr_logits` train and evaluate them unchanged:

* **FNN** -- W. Zhang, T. Du, J. Wang, "Deep Learning over Multi-field Categorical Data: A Case
  Study on User Response Prediction", ECIR 2016 (§3.1, Eqs. 1-3): an MLP over the concatenated
  field embeddings.
* **DeepFM** -- H. Guo, R. Tang, Y. Ye, Z. Li, X. He, "DeepFM: A Factorization-Machine based
  Neural Network for CTR Prediction", IJCAI 2017 (Eq. 1: y = sigmoid(y_FM + y_DNN); Eq. 2: the FM).
* **DCN** -- R. Wang, B. Fu, G. Fu, M. Wang, "Deep & Cross Network for Ad Click Predictions",
  ADKDD 2017 (Eq. 3: the cross layer; Eq. 5: the combination layer).
* **DCNMix** -- R. Wang, R. Shivanna, D. Z. Cheng, S. Jain, D. Lin, L. Hong, E. H. Chi, "DCN V2:
  Improved Deep & Cross Network and Practical Lessons for Web-scale Learning to Rank Systems",
  WWW 2021 (§3.5, Eqs. 3-4: the mixture of low-rank cross experts).
* **xDeepFM** -- J. Lian, X. Zhou, F. Zhang, Z. Chen, X. Xie, G. Sun, "xDeepFM: Combining Explicit
  and Implicit Feature Interactions for Recommender Systems", KDD 2018 (§3.2, Eq. 6: the
  Compressed Interaction Network; Eq. 7: sum pooling; §3.3, Eq. 9: linear + CIN + DNN).

Shared interface (that of ``CTRNet``)
-------------------------------------
Every model is ``Model(cardinalities, emb_dim, hidden, <own hyper-parameters>)`` and is called as
``model.apply(variables, fields (n, F) int32, dense (n, D) float32, hp, train=..., return_embedding=...)``.
It returns the logit (n,) or, with ``return_embedding``, ``(logit, h)`` where ``h`` is the
representation the output layer reads: the DNN's last hidden layer (FNN, DeepFM), the
concatenation [cross-network output, DNN output] (DCN, DCNMix, DeepCTR's ``stack_out``), or
[DNN output, CIN sum-pooled feature maps] (xDeepFM). The pipeline knobs in ``hp``:

* ``field_mask`` (F,): field j's embedding *and* its first-order (linear) weight are multiplied
  by ``field_mask[j]``, so a zero removes the field from every part of the model;
* ``dense_mask`` (): multiplies the dense block wherever it enters (linear part, DNN, cross net);
* ``width_mask``, ``bn``, ``dropout``: honoured in the DNN tower exactly as ``CTRNet`` does
  (a 0/1 mask on hidden units; batch normalisation blended in by ``bn`` before the activation,
  as DeepCTR's ``dnn_use_bn``; inverted dropout after the activation, as DeepCTR's ``DNN``).
  The FM, cross and CIN parts have no such knobs;
* ``l2``: applied by the trainer to every parameter.

Where the inputs go (as in DeepCTR): the sparse fields are embedded (all with ``emb_dim``); the
dense features enter the first-order linear part and, concatenated with the flattened
embeddings, the DNN (and, in DCN/DCNMix, the cross network, whose input is DeepCTR's
``dnn_input``); the FM and the CIN see only the sparse embeddings.

Departures from DeepCTR
-----------------------
* **One L2 knob.** DeepCTR's per-part regularisers (``l2_reg_embedding=1e-5``,
  ``l2_reg_linear=1e-5``, ``l2_reg_cross=1e-5``, ``l2_reg_dnn=0``, ``l2_reg_cin=0``) are not
  built in: the trainer applies ``hp["l2"] * ||params||^2`` to all parameters (the §5.3
  pipelines vary this one weight). DeepCTR's defaults are recorded in the DEFAULTS table below.
* **Embedding dimension.** ``emb_dim`` defaults to DeepCTR's ``SparseFeat(embedding_dim=4)``;
  the studies pass their own (e.g. 8, as ``CTRNet``).
* **Batch norm.** When ``hp["bn"]`` is on, flax's ``BatchNorm`` with ``CTRNet``'s settings
  (momentum 0.9, epsilon 1e-5), not Keras's (0.99, 1e-3); FNN honours ``bn`` too (DeepCTR's FNN
  hard-codes ``use_bn=False``; the knob defaults to off, which is DeepCTR's model).
* **FNN's linear term.** DeepCTR 0.9.x (the releases current when the paper was written, up to
  v0.9.3) adds a first-order linear logit to FNN's DNN logit; DeepCTR removed it in April 2026
  (commit 1b5fe40, "Remove the WDL-style linear logit from FNN"). ``FNN.use_linear`` (default
  True, the 0.9.x model) switches it; neither version does the FNN paper's FM pre-training of
  the embeddings, and DeepCTR's ReLU replaces the paper's tanh.
* **Empty parts.** DeepCTR allows ``dnn_hidden_units=()`` (cross- or CIN-only models); here
  ``hidden`` must be non-empty, because the pipeline knobs (``width_mask``) and the returned
  representation live in the DNN.
* **DCN** implements only DeepCTR's default ``cross_parameterization='vector'`` (the DCN paper's
  cross layer); the 'matrix' (DCN-M) form is not built.
* **Matmul precision.** ``precision`` (default ``calib_jax._src.precision.MATMUL``: float32-exact
  products on every backend, as ``CTRNet``) is passed to every dense layer and einsum. ``None``
  takes the backend's default, which on recent NVIDIA GPUs multiplies float32 in TF32 (10-bit
  mantissa): the logits of these models then moved by up to 5e-4 against a float64 NumPy forward
  pass on an H200, and two trainings that should agree by 1e-4 parted by up to 0.07.
  Parameters and activations are float32.

Initialisation follows DeepCTR: embeddings N(0, 1e-4^2) (``emb_init_std``), first-order sparse
weights 0, the dense first-order kernel, DNN kernels, cross kernels and U/V/C Glorot-normal
(truncated), the output kernels, gates and CIN filters Glorot-uniform (Keras's ``Dense``
default and DeepCTR's CIN), every bias 0 (including the global bias of ``PredictionLayer``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp

from calib_jax._src.precision import MATMUL

# --------------------------------------------------------------------------------------
# DEFAULTS of DeepCTR v0.9.3 (commit 4db36c2, 2022-11-10, the last release before the paper), the
# same at HEAD 1b5fe40 (2026-04-26) except FNN's linear logit. Files under deepctr/; line numbers
# are HEAD's (v0.9.3's for the FNN row).
#
#   hyper-parameter        value            DeepCTR source
#   dnn_hidden_units       (256, 128, 64)   models/{fnn,deepfm,dcn,dcnmix,xdeepfm}.py, the model
#                                           signature (fnn.py:17, deepfm.py:22, dcn.py:23,
#                                           dcnmix.py:23, xdeepfm.py:18); (128, 128) before v0.9.0
#                                           (xDeepFM: (256, 256)), changed in fc49d2f, 2021-09-03
#   dnn_activation         'relu'           same signatures; layers/core.py DNN
#   dnn_dropout, use_bn    0, False         same signatures
#   cross_num              2                dcn.py:22, dcnmix.py:22
#   cross_parameterization 'vector'         dcn.py:22 (layers/interaction.py:367 CrossNet)
#   low_rank, num_experts  32, 4            dcnmix.py:23 (interaction.py:464 CrossNetMix)
#   cin_layer_size         (128, 128)       xdeepfm.py:19 (interaction.py:232 CIN)
#   cin_split_half         True             xdeepfm.py:19
#   cin_activation         'relu'           xdeepfm.py:19
#   embedding_dim          4                feature_column.py:40 SparseFeat
#   embeddings_initializer N(0, 1e-4)       feature_column.py:47 SparseFeat
#   l2_reg_embedding       1e-5             all five signatures      (not built in: one hp["l2"])
#   l2_reg_linear          1e-5             all five signatures      (not built in)
#   l2_reg_cross           1e-5             dcn.py:24, dcnmix.py:24  (not built in)
#   l2_reg_dnn, l2_reg_cin 0, 0             signatures               (not built in)
#   FNN linear logit       yes              fnn.py v0.9.3:39-48 (removed at HEAD 1b5fe40)
# --------------------------------------------------------------------------------------

_ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "relu": nn.relu,
    "tanh": jnp.tanh,
    "sigmoid": nn.sigmoid,
    "linear": lambda x: x,
}


def _glorot_normal() -> Callable[..., jax.Array]:
    # Keras glorot_normal: truncated normal, variance 2 / (fan_in + fan_out) (= flax's)
    return nn.initializers.glorot_normal()


def _glorot_uniform(in_axis: int | Sequence[int] = -2) -> Callable[..., jax.Array]:
    return nn.initializers.variance_scaling(1.0, "fan_avg", "uniform", in_axis=in_axis, out_axis=-1)


# --------------------------------------------------------------------------------------
# argument checks
# --------------------------------------------------------------------------------------


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | jnp.integer) or int(value) <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _positive_ints(name: str, values: Any, *, allow_empty: bool = False) -> tuple[int, ...]:
    try:
        out = tuple(values)
    except TypeError:
        raise ValueError(f"{name} must be a tuple of positive integers, got {values!r}") from None
    if not out and not allow_empty:
        raise ValueError(f"{name} must be a non-empty tuple of positive integers, got {values!r}")
    return tuple(_positive_int(f"{name}[{i}]", v) for i, v in enumerate(out))


def _set(module: nn.Module, name: str, value: Any) -> None:
    object.__setattr__(module, name, value)


# --------------------------------------------------------------------------------------
# layers
# --------------------------------------------------------------------------------------


def fm_second_order(emb: jax.Array) -> jax.Array:
    r"""Second-order factorization-machine term over field embeddings.

    .. math:: y^{(2)} = \sum_{i<j} \langle v_i, v_j\rangle
              = \tfrac12 \sum_k \Big[\big(\textstyle\sum_i v_{ik}\big)^2 - \sum_i v_{ik}^2\Big]

    (Guo, Tang, Ye, Li & He, "DeepFM: A Factorization-Machine based Neural Network for CTR
    Prediction", IJCAI 2017, Eq. 2 with one active feature per field, in Rendle's O(F d) form;
    DeepCTR's ``FM`` layer.)

    Args:
        emb: (n, F, d) field embeddings (one row per field).

    Returns:
        (n,) the pairwise-interaction term.

    Example:
        >>> import jax.numpy as jnp
        >>> float(fm_second_order(jnp.asarray([[[1.0, 2.0], [3.0, 4.0]]]))[0])  # <(1,2),(3,4)>
        11.0
    """
    s = jnp.sum(emb, axis=1)
    return 0.5 * jnp.sum(s * s - jnp.sum(emb * emb, axis=1), axis=-1)


class DNN(nn.Module):
    r"""The deep tower: Dense -> (batch norm) -> ReLU -> (dropout), with ``CTRNet``'s knobs.

    .. math:: h_{l+1} = \mathrm{drop}\big(m_l \odot \mathrm{relu}(\mathrm{bn}(W_l h_l + b_l))\big)

    (the MLP of Zhang, Du & Wang, ECIR 2016, Eqs. 1-3, of Guo et al., IJCAI 2017, Eq. 4, and of
    Wang, Fu, Fu & Wang, ADKDD 2017, Eq. 4; DeepCTR's ``DNN`` layer). ``bn`` is ``hp["bn"]``
    blended in (``CTRNet``'s data-valued switch), ``m_l`` is ``hp["width_mask"][l]`` and the
    inverted dropout of rate ``hp["dropout"]`` applies only when ``train``.

    Attributes:
        hidden: units per layer (non-empty, positive).
        precision: matmul precision of the Dense layers (default MATMUL, float32-exact; None: the backend's default).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> hp = {"bn": jnp.zeros(()), "dropout": jnp.zeros(()), "width_mask": (jnp.ones(4),)}
        >>> tower = DNN(hidden=(4,))
        >>> v = tower.init(jax.random.key(0), jnp.ones((2, 3)), hp, train=False)
        >>> tower.apply(v, jnp.ones((2, 3)), hp, train=False).shape
        (2, 4)
    """

    hidden: tuple[int, ...]
    precision: Any = MATMUL

    @nn.compact
    def __call__(self, x: jax.Array, hp: Mapping[str, Any], *, train: bool) -> jax.Array:
        for layer, width in enumerate(self.hidden):
            x = nn.Dense(width, kernel_init=_glorot_normal(), precision=self.precision,
                         name=f"Dense_{layer}")(x)
            xb = nn.BatchNorm(use_running_average=not train, momentum=0.9, name=f"BatchNorm_{layer}")(x)
            x = hp["bn"] * xb + (1.0 - hp["bn"]) * x
            x = nn.relu(x) * hp["width_mask"][layer][None, :]
            if train:
                keep = 1.0 - hp["dropout"]
                m = jax.random.bernoulli(self.make_rng("dropout"), keep, x.shape)
                x = jnp.where(m, x / keep, 0.0)
        return x


class CrossNet(nn.Module):
    r"""The cross network of DCN (vector parameterisation).

    .. math:: x_{l+1} = x_0\,(x_l^\top w_l) + b_l + x_l, \qquad l = 0, \dots, L-1

    (Wang, Fu, Fu & Wang, "Deep & Cross Network for Ad Click Predictions", ADKDD 2017, Eq. 3;
    DeepCTR's ``CrossNet(parameterization='vector')``.) Parameters ``kernel_l`` (d, 1) and
    ``bias_l`` (d,).

    Attributes:
        num_layers: L, the number of cross layers (DeepCTR's ``cross_num``).
        precision: matmul precision (default MATMUL, float32-exact; None: the backend's default).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x0 = jnp.ones((2, 5))
        >>> cn = CrossNet(num_layers=2)
        >>> cn.apply(cn.init(jax.random.key(0), x0), x0).shape
        (2, 5)
    """

    num_layers: int = 2
    precision: Any = MATMUL

    @nn.compact
    def __call__(self, x0: jax.Array) -> jax.Array:
        d = x0.shape[-1]
        x = x0
        for l in range(self.num_layers):
            w = self.param(f"kernel_{l}", _glorot_normal(), (d, 1), jnp.float32)
            b = self.param(f"bias_{l}", nn.initializers.zeros, (d,), jnp.float32)
            x = x0 * jnp.matmul(x, w, precision=self.precision) + b[None, :] + x
        return x


class CrossNetMix(nn.Module):
    r"""The mixture-of-low-rank-experts cross network of DCN V2 ("DCN-Mix").

    .. math:: x_{l+1} = \sum_{i=1}^{K} G_i(x_l)\, E_i(x_l) + x_l, \qquad
              E_i(x_l) = x_0 \odot \big(U_l^i \tanh(C_l^i \tanh(V_l^{i\top} x_l)) + b_l\big),
              \qquad G(x_l) = \mathrm{softmax}(x_l^\top W_g)

    (Wang, Shivanna, Cheng, Jain, Lin, Hong & Chi, "DCN V2: Improved Deep & Cross Network and
    Practical Lessons for Web-scale Learning to Rank Systems", WWW 2021, §3.5, Eq. 3 (mixture)
    and Eq. 4 (nonlinearity g in the r-dimensional space). As in DeepCTR's ``CrossNetMix``:
    g = tanh at both places, the gate is a softmax over K bias-free linear scores of ``x_l``
    whose weights ``gate`` (d, K) are shared by all layers, and ``b_l`` is shared by the experts
    of layer l.) Parameters per layer l: ``U_l``, ``V_l`` (K, d, r), ``C_l`` (K, r, r),
    ``bias_l`` (d,).

    Attributes:
        num_layers: L (DeepCTR's ``cross_num``).
        low_rank: r.
        num_experts: K.
        precision: matmul precision (default MATMUL, float32-exact; None: the backend's default).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x0 = jnp.ones((2, 6))
        >>> cm = CrossNetMix(num_layers=1, low_rank=3, num_experts=2)
        >>> cm.apply(cm.init(jax.random.key(0), x0), x0).shape
        (2, 6)
    """

    num_layers: int = 2
    low_rank: int = 32
    num_experts: int = 4
    precision: Any = MATMUL

    @nn.compact
    def __call__(self, x0: jax.Array) -> jax.Array:
        d, r, k = x0.shape[-1], self.low_rank, self.num_experts
        # K gates of shape (d, 1) each (Keras Dense(1) Glorot-uniform: fan_in d, fan_out 1)
        gate = self.param("gate", nn.initializers.variance_scaling(
            1.0, "fan_avg", "uniform", in_axis=-2, out_axis=-1, batch_axis=(0,)), (k, d, 1), jnp.float32)
        x = x0
        for l in range(self.num_layers):
            u = self.param(f"U_{l}", _glorot_normal(), (k, d, r), jnp.float32)
            v = self.param(f"V_{l}", _glorot_normal(), (k, d, r), jnp.float32)
            c = self.param(f"C_{l}", _glorot_normal(), (k, r, r), jnp.float32)
            b = self.param(f"bias_{l}", nn.initializers.zeros, (d,), jnp.float32)
            g = jax.nn.softmax(jnp.einsum("nd,kd->nk", x, gate[:, :, 0], precision=self.precision), axis=-1)
            z = jnp.tanh(jnp.einsum("nd,kdr->nkr", x, v, precision=self.precision))
            z = jnp.tanh(jnp.einsum("ksr,nkr->nks", c, z, precision=self.precision))
            uz = jnp.einsum("kdr,nkr->nkd", u, z, precision=self.precision)
            experts = x0[:, None, :] * (uz + b[None, None, :])
            x = jnp.einsum("nk,nkd->nd", g, experts, precision=self.precision) + x
        return x


class CIN(nn.Module):
    r"""The Compressed Interaction Network of xDeepFM, with sum pooling.

    .. math:: X^k_{h,*} = \phi\Big(\sum_{i=1}^{H_{k-1}} \sum_{j=1}^{m} W^{k,h}_{ij}
              \,(X^{k-1}_{i,*} \circ X^{0}_{j,*}) + \beta^k_h\Big), \qquad
              p^k_h = \sum_{t=1}^{D} X^k_{h,t}

    (Lian, Zhou, Zhang, Chen, Xie & Sun, "xDeepFM: Combining Explicit and Implicit Feature
    Interactions for Recommender Systems", KDD 2018, §3.2, Eq. 6 and the sum pooling Eq. 7. As
    in DeepCTR's ``CIN``: a bias beta and an activation phi (ReLU by default) on each feature
    map, and with ``split_half`` every layer but the last sends its first H_k/2 maps on to the
    next layer and its other H_k/2 maps to the output.) Parameters ``filter_k``
    (H_{k-1}, m, H_k) and ``bias_k`` (H_k,).

    Attributes:
        layer_size: H_1, ..., H_K (even except the last when ``split_half``).
        split_half: DeepCTR's ``cin_split_half``.
        activation: 'relu', 'tanh', 'sigmoid' or 'linear'.
        precision: matmul precision (default MATMUL, float32-exact; None: the backend's default).

    Returns (when called on X^0 of shape (n, m, D)) the pooled maps, (n, sum of the output
    halves) = (n, sum(layer_size[:-1]) // 2 + layer_size[-1]) with ``split_half``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x0 = jnp.ones((2, 3, 4))
        >>> cin = CIN(layer_size=(4, 2))
        >>> cin.apply(cin.init(jax.random.key(0), x0), x0).shape
        (2, 4)
    """

    layer_size: tuple[int, ...] = (128, 128)
    split_half: bool = True
    activation: str = "relu"
    precision: Any = MATMUL

    @nn.compact
    def __call__(self, x0: jax.Array) -> jax.Array:
        act = _ACTIVATIONS[self.activation]
        m = x0.shape[1]
        xk, pooled = x0, []
        for k, size in enumerate(self.layer_size):
            h_prev = xk.shape[1]
            # DeepCTR's conv1d filter (1, H_{k-1} m, H_k): fan_in H_{k-1} m, fan_out H_k
            w = self.param(f"filter_{k}", _glorot_uniform(in_axis=(0, 1)), (h_prev, m, size), jnp.float32)
            b = self.param(f"bias_{k}", nn.initializers.zeros, (size,), jnp.float32)
            maps = jnp.einsum("nid,njd,ijh->nhd", xk, x0, w, precision=self.precision)
            maps = act(maps + b[None, :, None])
            if self.split_half and k < len(self.layer_size) - 1:
                xk, direct = maps[:, : size // 2], maps[:, size // 2:]
            else:
                xk, direct = maps, maps
            pooled.append(jnp.sum(direct, axis=-1))
        return jnp.concatenate(pooled, axis=-1)


# --------------------------------------------------------------------------------------
# models
# --------------------------------------------------------------------------------------


class _CTRModel(nn.Module):
    """Fields and helpers shared by the five models (not public)."""

    cardinalities: tuple[int, ...]
    emb_dim: int = 4
    hidden: tuple[int, ...] = (256, 128, 64)
    emb_init_std: float = 1e-4
    precision: Any = MATMUL

    #: the architecture hyper-parameters a model adds to the shared fields
    OWN: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        _set(self, "cardinalities", _positive_ints("cardinalities", self.cardinalities))
        _set(self, "emb_dim", _positive_int("emb_dim", self.emb_dim))
        _set(self, "hidden", _positive_ints("hidden", self.hidden))
        std = self.emb_init_std
        if isinstance(std, bool) or not isinstance(std, int | float) or not 0.0 <= float(std) < float("inf"):
            raise ValueError(f"emb_init_std must be a finite number >= 0, got {std!r}")
        self._check()
        super().__post_init__()

    def _check(self) -> None:
        """Validate the architecture's own hyper-parameters (overridden)."""

    # the pieces every model uses; called from the models' compact __call__
    def _embed(self, fields: jax.Array, dense: jax.Array, hp: Mapping[str, Any]):
        init = nn.initializers.normal(self.emb_init_std)
        emb = jnp.stack([nn.Embed(c, self.emb_dim, embedding_init=init, name=f"embed_{j}")(fields[:, j])
                         * hp["field_mask"][j] for j, c in enumerate(self.cardinalities)], axis=1)
        return emb, dense.astype(jnp.float32) * hp["dense_mask"]

    def _linear(self, fields: jax.Array, dense: jax.Array, hp: Mapping[str, Any]) -> jax.Array:
        """First-order part: sum_j w_j[id_j] field_mask_j + dense . w_dense (DeepCTR get_linear_logit)."""
        z = sum(nn.Embed(c, 1, embedding_init=nn.initializers.zeros, name=f"linear_{j}")(fields[:, j])[:, 0]
                * hp["field_mask"][j] for j, c in enumerate(self.cardinalities))
        w = self.param("linear_dense", _glorot_normal(), (dense.shape[-1], 1), jnp.float32)
        return z + jnp.matmul(dense, w, precision=self.precision)[:, 0]

    def _dnn(self, emb: jax.Array, dense: jax.Array, hp: Mapping[str, Any], train: bool):
        x0 = jnp.concatenate([emb.reshape(emb.shape[0], -1), dense], axis=-1)
        return x0, DNN(self.hidden, precision=self.precision, name="dnn")(x0, hp, train=train)

    def _out(self, h: jax.Array, name: str) -> jax.Array:
        return nn.Dense(1, use_bias=False, kernel_init=_glorot_uniform(), precision=self.precision,
                        name=name)(h)[:, 0]

    def _bias(self) -> jax.Array:
        return self.param("bias", nn.initializers.zeros, (), jnp.float32)


class FNN(_CTRModel):
    r"""FNN: an MLP over the concatenated field embeddings (and dense features).

    .. math:: \mathrm{logit} = w_{\mathrm{out}}^\top \mathrm{DNN}([e_1; \dots; e_F; x_{\mathrm{dense}}])
              + [\textstyle\sum_j w_j + w_{\mathrm{dense}}^\top x_{\mathrm{dense}}] + b

    (Zhang, Du & Wang, "Deep Learning over Multi-field Categorical Data: A Case Study on User
    Response Prediction", ECIR 2016, §3.1, Eqs. 1-3 (ReLU as in DeepCTR, not tanh; no FM
    pre-training). The bracketed first-order term is DeepCTR 0.9.x's ``linear_logit``, switched
    by ``use_linear``.)

    Attributes:
        cardinalities: one vocabulary size per categorical field.
        emb_dim: embedding dimension (DeepCTR default 4).
        hidden: DNN units (DeepCTR default (256, 128, 64)).
        use_linear: add the first-order linear logit (DeepCTR <= 0.9.3: True).
        emb_init_std: embeddings start N(0, emb_init_std^2) (DeepCTR: 1e-4).
        precision: matmul precision (default MATMUL, float32-exact; None: the backend's default).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from experiments._pipelines import default_hp
        >>> net = FNN(cardinalities=(5, 7, 4), emb_dim=4, hidden=(8,))
        >>> f, d, hp = jnp.zeros((3, 3), jnp.int32), jnp.zeros((3, 2)), default_hp(net)
        >>> v = net.init(jax.random.key(0), f, d, hp, train=False)
        >>> net.apply(v, f, d, hp, train=False).shape
        (3,)
    """

    use_linear: bool = True
    OWN: ClassVar[tuple[str, ...]] = ("use_linear",)

    def _check(self) -> None:
        if not isinstance(self.use_linear, bool):
            raise ValueError(f"use_linear must be a bool, got {self.use_linear!r}")

    @nn.compact
    def __call__(self, fields: jax.Array, dense: jax.Array, hp: Mapping[str, Any], *,
                 train: bool, return_embedding: bool = False) -> Any:
        emb, dense = self._embed(fields, dense, hp)
        _, h = self._dnn(emb, dense, hp, train)
        logit = self._out(h, "dnn_out") + self._bias()
        if self.use_linear:
            logit = logit + self._linear(fields, dense, hp)
        return (logit, h) if return_embedding else logit


class DeepFM(_CTRModel):
    r"""DeepFM: first-order + factorization machine + DNN, sharing one embedding table.

    .. math:: \mathrm{logit} = \underbrace{\textstyle\sum_j w_j + w_{\mathrm{dense}}^\top x_{\mathrm{dense}}
              + \sum_{i<j}\langle e_i, e_j\rangle}_{y_{FM}}
              + \underbrace{w_{\mathrm{out}}^\top \mathrm{DNN}([e_1;\dots;e_F;x_{\mathrm{dense}}])}_{y_{DNN}} + b

    (Guo, Tang, Ye, Li & He, "DeepFM: A Factorization-Machine based Neural Network for CTR
    Prediction", IJCAI 2017, Eq. 1 with the FM of Eq. 2 and the DNN of Eqs. 3-5; DeepCTR's
    ``DeepFM``: dense features in the linear part and the DNN, not in the FM.)

    Attributes:
        cardinalities, emb_dim, hidden, emb_init_std, precision: as :class:`FNN`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from experiments._pipelines import default_hp
        >>> net = DeepFM(cardinalities=(5, 7, 4), hidden=(8,))
        >>> f, d, hp = jnp.zeros((3, 3), jnp.int32), jnp.zeros((3, 2)), default_hp(net)
        >>> v = net.init(jax.random.key(0), f, d, hp, train=False)
        >>> [a.shape for a in net.apply(v, f, d, hp, train=False, return_embedding=True)]
        [(3,), (3, 8)]
    """

    @nn.compact
    def __call__(self, fields: jax.Array, dense: jax.Array, hp: Mapping[str, Any], *,
                 train: bool, return_embedding: bool = False) -> Any:
        emb, dense = self._embed(fields, dense, hp)
        _, h = self._dnn(emb, dense, hp, train)
        logit = (self._linear(fields, dense, hp) + fm_second_order(emb) + self._out(h, "dnn_out")
                 + self._bias())
        return (logit, h) if return_embedding else logit


class DCN(_CTRModel):
    r"""Deep & Cross Network: a cross network and a DNN in parallel on x_0, then one logit.

    .. math:: \mathrm{logit} = w_{\mathrm{out}}^\top [x_{L}; h_{\mathrm{DNN}}]
              + \textstyle\sum_j w_j + w_{\mathrm{dense}}^\top x_{\mathrm{dense}} + b,\qquad
              x_{l+1} = x_0 (x_l^\top w_l) + b_l + x_l,\ x_0 = [e_1;\dots;e_F;x_{\mathrm{dense}}]

    (Wang, Fu, Fu & Wang, "Deep & Cross Network for Ad Click Predictions", ADKDD 2017, Eq. 3 for
    the cross layer and Eq. 5 for the combination; DeepCTR's ``DCN`` adds the first-order
    ``linear_logit``.)

    Attributes:
        cross_num: number of cross layers (DeepCTR default 2).
        cardinalities, emb_dim, hidden, emb_init_std, precision: as :class:`FNN`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from experiments._pipelines import default_hp
        >>> net = DCN(cardinalities=(5, 7, 4), emb_dim=4, hidden=(8,))
        >>> f, d, hp = jnp.zeros((3, 3), jnp.int32), jnp.zeros((3, 2)), default_hp(net)
        >>> v = net.init(jax.random.key(0), f, d, hp, train=False)
        >>> net.apply(v, f, d, hp, train=False, return_embedding=True)[1].shape  # 3*4 + 2 + 8
        (3, 22)
    """

    cross_num: int = 2
    OWN: ClassVar[tuple[str, ...]] = ("cross_num",)

    def _check(self) -> None:
        _set(self, "cross_num", _positive_int("cross_num", self.cross_num))

    @nn.compact
    def __call__(self, fields: jax.Array, dense: jax.Array, hp: Mapping[str, Any], *,
                 train: bool, return_embedding: bool = False) -> Any:
        emb, dense = self._embed(fields, dense, hp)
        x0, deep = self._dnn(emb, dense, hp, train)
        cross = CrossNet(self.cross_num, precision=self.precision, name="cross")(x0)
        h = jnp.concatenate([cross, deep], axis=-1)
        logit = self._out(h, "out") + self._linear(fields, dense, hp) + self._bias()
        return (logit, h) if return_embedding else logit


class DCNMix(_CTRModel):
    r"""DCN V2 with the mixture of low-rank cross experts ("DCN-Mix"), parallel to a DNN.

    .. math:: \mathrm{logit} = w_{\mathrm{out}}^\top [x_{L}; h_{\mathrm{DNN}}]
              + \textstyle\sum_j w_j + w_{\mathrm{dense}}^\top x_{\mathrm{dense}} + b,\qquad
              x_{l+1} = \sum_i G_i(x_l)\, x_0 \odot \big(U^i_l \tanh(C^i_l \tanh(V^{i\top}_l x_l)) + b_l\big) + x_l

    (Wang, Shivanna, Cheng, Jain, Lin, Hong & Chi, "DCN V2: Improved Deep & Cross Network and
    Practical Lessons for Web-scale Learning to Rank Systems", WWW 2021, §3.5, Eqs. 3-4, and the
    parallel structure of §3.4; DeepCTR's ``DCNMix`` adds the first-order ``linear_logit``.)
    See :class:`CrossNetMix` for the gate.

    Attributes:
        cross_num: number of cross layers (DeepCTR default 2).
        low_rank: r (DeepCTR default 32).
        num_experts: K (DeepCTR default 4).
        cardinalities, emb_dim, hidden, emb_init_std, precision: as :class:`FNN`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from experiments._pipelines import default_hp
        >>> net = DCNMix(cardinalities=(5, 7, 4), hidden=(8,), low_rank=4, num_experts=2)
        >>> f, d, hp = jnp.zeros((3, 3), jnp.int32), jnp.zeros((3, 2)), default_hp(net)
        >>> v = net.init(jax.random.key(0), f, d, hp, train=False)
        >>> net.apply(v, f, d, hp, train=False).shape
        (3,)
    """

    cross_num: int = 2
    low_rank: int = 32
    num_experts: int = 4
    OWN: ClassVar[tuple[str, ...]] = ("cross_num", "low_rank", "num_experts")

    def _check(self) -> None:
        for name in self.OWN:
            _set(self, name, _positive_int(name, getattr(self, name)))

    @nn.compact
    def __call__(self, fields: jax.Array, dense: jax.Array, hp: Mapping[str, Any], *,
                 train: bool, return_embedding: bool = False) -> Any:
        emb, dense = self._embed(fields, dense, hp)
        x0, deep = self._dnn(emb, dense, hp, train)
        cross = CrossNetMix(self.cross_num, self.low_rank, self.num_experts, precision=self.precision,
                            name="cross")(x0)
        h = jnp.concatenate([cross, deep], axis=-1)
        logit = self._out(h, "out") + self._linear(fields, dense, hp) + self._bias()
        return (logit, h) if return_embedding else logit


class xDeepFM(_CTRModel):  # noqa: N801 (the paper's name)
    r"""xDeepFM: first-order linear part + Compressed Interaction Network + DNN.

    .. math:: \mathrm{logit} = \textstyle\sum_j w_j + w_{\mathrm{dense}}^\top x_{\mathrm{dense}}
              + w_{\mathrm{cin}}^\top p^{+} + w_{\mathrm{dnn}}^\top \mathrm{DNN}([e_1;\dots;e_F;x_{\mathrm{dense}}]) + b

    with p^+ the sum-pooled CIN feature maps over X^0 = [e_1; ...; e_F] (Lian, Zhou, Zhang,
    Chen, Xie & Sun, "xDeepFM: Combining Explicit and Implicit Feature Interactions for
    Recommender Systems", KDD 2018, §3.3, Eq. 9, with the CIN of Eqs. 6-7; see :class:`CIN`).

    Attributes:
        cin_layer_size: feature maps per CIN layer (DeepCTR default (128, 128)).
        cin_split_half: DeepCTR default True (then all but the last size must be even).
        cin_activation: DeepCTR default 'relu' ('tanh', 'sigmoid', 'linear' also accepted).
        cardinalities, emb_dim, hidden, emb_init_std, precision: as :class:`FNN`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from experiments._pipelines import default_hp
        >>> net = xDeepFM(cardinalities=(5, 7, 4), hidden=(8,), cin_layer_size=(4, 2))
        >>> f, d, hp = jnp.zeros((3, 3), jnp.int32), jnp.zeros((3, 2)), default_hp(net)
        >>> v = net.init(jax.random.key(0), f, d, hp, train=False)
        >>> net.apply(v, f, d, hp, train=False, return_embedding=True)[1].shape  # 8 + 4/2 + 2
        (3, 12)
    """

    cin_layer_size: tuple[int, ...] = (128, 128)
    cin_split_half: bool = True
    cin_activation: str = "relu"
    OWN: ClassVar[tuple[str, ...]] = ("cin_layer_size", "cin_split_half", "cin_activation")

    def _check(self) -> None:
        sizes = _positive_ints("cin_layer_size", self.cin_layer_size)
        _set(self, "cin_layer_size", sizes)
        if not isinstance(self.cin_split_half, bool):
            raise ValueError(f"cin_split_half must be a bool, got {self.cin_split_half!r}")
        if self.cin_split_half and any(s % 2 for s in sizes[:-1]):
            raise ValueError(f"cin_layer_size must be even except for the last layer when cin_split_half=True, "
                             f"got {sizes}")
        if self.cin_activation not in _ACTIVATIONS:
            raise ValueError(f"cin_activation must be one of {sorted(_ACTIVATIONS)}, got {self.cin_activation!r}")

    @nn.compact
    def __call__(self, fields: jax.Array, dense: jax.Array, hp: Mapping[str, Any], *,
                 train: bool, return_embedding: bool = False) -> Any:
        emb, dense = self._embed(fields, dense, hp)
        _, deep = self._dnn(emb, dense, hp, train)
        pooled = CIN(self.cin_layer_size, self.cin_split_half, self.cin_activation, precision=self.precision,
                     name="cin")(emb)
        logit = (self._linear(fields, dense, hp) + self._out(deep, "dnn_out") + self._out(pooled, "cin_out")
                 + self._bias())
        return (logit, jnp.concatenate([deep, pooled], axis=-1)) if return_embedding else logit


# --------------------------------------------------------------------------------------
# registry
# --------------------------------------------------------------------------------------

#: the five architectures of "Calibration-then-Calculation" Tables 3-4, by the paper's names
ARCHITECTURES: dict[str, type] = {"FNN": FNN, "DeepFM": DeepFM, "DCN": DCN, "DCNMix": DCNMix, "xDeepFM": xDeepFM}

_SHARED = ("emb_dim", "hidden", "emb_init_std", "precision")


def make(name: str, cardinalities: Sequence[int], **overrides: Any) -> nn.Module:
    """Build the architecture ``name`` of :data:`ARCHITECTURES` with DeepCTR's defaults.

    The shared fields are ``emb_dim`` (default 4), ``hidden`` (the DNN units, default
    (256, 128, 64)), ``emb_init_std`` (1e-4) and ``precision`` (MATMUL); each architecture adds its
    own (see the DEFAULTS table in the module source): DCN ``cross_num``; DCNMix ``cross_num``,
    ``low_rank``, ``num_experts``; xDeepFM ``cin_layer_size``, ``cin_split_half``,
    ``cin_activation``; FNN ``use_linear``. Sizes given as lists or NumPy integers are
    converted to tuples of ints. The formulas and papers are in each class's docstring
    (FNN: Zhang, Du & Wang, ECIR 2016, Eqs. 1-3; DeepFM: Guo et al., IJCAI 2017, Eqs. 1-2; DCN:
    Wang, Fu, Fu & Wang, ADKDD 2017, Eq. 3; DCNMix: Wang et al., WWW 2021, Eqs. 3-4; xDeepFM:
    Lian et al., KDD 2018, Eqs. 6-9).

    Args:
        name: one of "FNN", "DeepFM", "DCN", "DCNMix", "xDeepFM".
        cardinalities: vocabulary size of each categorical field (positive ints).
        **overrides: hyper-parameters to change.

    Raises:
        ValueError: naming ``name`` for an unknown architecture, the argument for an unknown
            hyper-parameter, or the hyper-parameter for a bad value (non-positive size, odd
            CIN size under ``cin_split_half``, unknown activation, ...).

    Example:
        >>> net = make("DCNMix", [10, 20, 5], emb_dim=8, hidden=[64, 32])
        >>> (net.low_rank, net.num_experts, net.cross_num, net.hidden)
        (32, 4, 2, (64, 32))
    """
    if name not in ARCHITECTURES:
        raise ValueError(f"name must be one of {sorted(ARCHITECTURES)}, got {name!r}")
    cls = ARCHITECTURES[name]
    allowed = _SHARED + cls.OWN
    for key in overrides:
        if key not in allowed:
            raise ValueError(f"{key!r} is not a hyper-parameter of {name} (allowed: {', '.join(allowed)})")
    return cls(cardinalities=cardinalities, **overrides)
