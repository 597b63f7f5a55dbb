"""The CTR architectures of ``experiments/_ctr_models.py`` against independent computations.

* shapes of the logit and of the returned representation, at small and at DeepCTR's default sizes;
* every model's full logit against a plain-NumPy forward pass written from the papers' formulas
  (the FM term as the explicit sum over field pairs, the DCN cross layer, the DCN V2 mixture as
  a loop over experts, the CIN feature maps as a loop over (h, i, j), the FNN MLP), using the
  module's own parameters pulled out of its params tree;
* ``hp["field_mask"]`` / ``hp["dense_mask"]`` make the logit independent of the removed inputs;
* the unchanged trainer of ``experiments._pipelines`` fits each model better than the constant
  predictor on a planted logistic log (default knobs, dropout, batch norm), and training two
  keys in one ``vmap`` equals training each alone;
* bad arguments raise ``ValueError`` naming the argument; the docstring examples run.
"""

from __future__ import annotations

import doctest
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from experiments import _ctr_models as C  # noqa: E402
from experiments import _pipelines as P  # noqa: E402

NAMES = list(C.ARCHITECTURES)
CARD = (5, 7, 4)  # 3 categorical fields
N_DENSE = 2
# small widths keep the file fast; every architecture's own hyper-parameters are set off default
SMALL = {
    "FNN": {"emb_dim": 4, "hidden": (16, 8)},
    "DeepFM": {"emb_dim": 4, "hidden": (16, 8)},
    "DCN": {"emb_dim": 4, "hidden": (16, 8), "cross_num": 3},
    "DCNMix": {"emb_dim": 4, "hidden": (16, 8), "cross_num": 2, "low_rank": 3, "num_experts": 3},
    "xDeepFM": {"emb_dim": 4, "hidden": (16, 8), "cin_layer_size": (6, 4, 3)},
}


def _inputs(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    fields = np.stack([rng.integers(0, c, n) for c in CARD], axis=1).astype(np.int32)
    dense = rng.normal(size=(n, N_DENSE)).astype(np.float32)
    return fields, dense


def _net(name: str, **extra):
    return C.make(name, CARD, **{**SMALL[name], **extra})


def _perturbed_variables(net, fields, dense, seed: int = 1):
    """The module's initial variables with every parameter moved by N(0, 0.3^2), so that no term
    (zero-initialised biases and first-order weights included) is trivially zero."""
    hp = P.default_hp(net)
    v = P.init_ctr_variables(net, jax.random.key(seed), hp, jnp.asarray(fields), jnp.asarray(dense))
    leaves, tree = jax.tree_util.tree_flatten(v["params"])
    rng = np.random.default_rng(seed)
    leaves = [jnp.asarray(np.asarray(x) + 0.3 * rng.normal(size=x.shape), jnp.float32) for x in leaves]
    return {**v, "params": jax.tree_util.tree_unflatten(tree, leaves)}, hp


# ----------------------------------------------------------------------- NumPy references
def _np(x) -> np.ndarray:
    return np.asarray(x, np.float64)


def _relu(x):
    return np.maximum(x, 0.0)


def _np_embed(p, fields, dense, field_mask, dense_mask):
    emb = np.stack([_np(p[f"embed_{j}"]["embedding"])[fields[:, j]] * field_mask[j] for j in range(len(CARD))], 1)
    return emb, _np(dense) * dense_mask


def _np_linear(p, fields, dense, field_mask):
    z = sum(_np(p[f"linear_{j}"]["embedding"])[fields[:, j], 0] * field_mask[j] for j in range(len(CARD)))
    return z + dense @ _np(p["linear_dense"])[:, 0]


def _np_mlp(p_dnn, x, n_layers):
    """The MLP forward pass h_{l+1} = relu(h_l W_l + b_l) (no batch norm, no dropout)."""
    for l in range(n_layers):
        x = _relu(x @ _np(p_dnn[f"Dense_{l}"]["kernel"]) + _np(p_dnn[f"Dense_{l}"]["bias"]))
    return x


def _np_fm_pairs(emb):
    """sum_{i<j} <v_i, v_j> over field pairs, one pair at a time (DeepFM Eq. 2)."""
    out = np.zeros(emb.shape[0])
    for i in range(emb.shape[1]):
        for j in range(i + 1, emb.shape[1]):
            out += np.sum(emb[:, i] * emb[:, j], axis=-1)
    return out


def _np_cross(p, x0, n_layers):
    """DCN Eq. 3: x_{l+1} = x_0 (x_l^T w_l) + b_l + x_l."""
    x = x0
    for l in range(n_layers):
        x = x0 * (x @ _np(p[f"kernel_{l}"]))[:, :1] + _np(p[f"bias_{l}"]) + x
    return x


def _np_cross_mix(p, x0, n_layers, n_experts):
    """DCN V2 Eqs. 3-4 with a loop over experts: sum_i G_i(x_l) x_0 * (U_i tanh(C_i tanh(V_i^T x_l)) + b_l) + x_l."""
    gate = _np(p["gate"])[:, :, 0]  # (K, d)
    x = x0
    for l in range(n_layers):
        u, v, c, b = (_np(p[f"{k}_{l}"]) for k in ("U", "V", "C", "bias"))
        scores = x @ gate.T
        g = np.exp(scores - scores.max(1, keepdims=True))
        g /= g.sum(1, keepdims=True)
        mix = np.zeros_like(x)
        for i in range(n_experts):
            low = np.tanh(np.tanh(x @ v[i]) @ c[i].T)  # C_i tanh(V_i^T x), one row per sample
            mix += g[:, i:i + 1] * (x0 * (low @ u[i].T + b))
        x = mix + x
    return x


def _np_cin(p, x0, sizes):
    """xDeepFM Eq. 6 as a loop over (h, i, j), ReLU + bias, half-split, sum pooling (Eq. 7)."""
    xk, pooled = x0, []
    for k, size in enumerate(sizes):
        w, b = _np(p[f"filter_{k}"]), _np(p[f"bias_{k}"])
        maps = np.zeros((x0.shape[0], size, x0.shape[2]))
        for h in range(size):
            for i in range(xk.shape[1]):
                for j in range(x0.shape[1]):
                    maps[:, h, :] += w[i, j, h] * xk[:, i, :] * x0[:, j, :]
        maps = _relu(maps + b[None, :, None])
        if k < len(sizes) - 1:
            xk, direct = maps[:, : size // 2], maps[:, size // 2:]
        else:
            direct = maps
        pooled.append(direct.sum(-1))
    return np.concatenate(pooled, axis=1)


def _np_logit(name, net, p, fields, dense, field_mask=None, dense_mask=1.0):
    field_mask = np.ones(len(CARD)) if field_mask is None else np.asarray(field_mask, np.float64)
    emb, dense = _np_embed(p, fields, dense, field_mask, dense_mask)
    x0 = np.concatenate([emb.reshape(emb.shape[0], -1), dense], axis=1)
    deep = _np_mlp(p["dnn"], x0, len(net.hidden))
    lin = _np_linear(p, fields, dense, field_mask)
    bias = float(p["bias"])
    if name == "FNN":
        return deep @ _np(p["dnn_out"]["kernel"])[:, 0] + lin + bias
    if name == "DeepFM":
        return lin + _np_fm_pairs(emb) + deep @ _np(p["dnn_out"]["kernel"])[:, 0] + bias
    if name in ("DCN", "DCNMix"):
        cross = (_np_cross(p["cross"], x0, net.cross_num) if name == "DCN"
                 else _np_cross_mix(p["cross"], x0, net.cross_num, net.num_experts))
        return np.concatenate([cross, deep], 1) @ _np(p["out"]["kernel"])[:, 0] + lin + bias
    pooled = _np_cin(p["cin"], emb, net.cin_layer_size)
    return (lin + deep @ _np(p["dnn_out"]["kernel"])[:, 0] + pooled @ _np(p["cin_out"]["kernel"])[:, 0]
            + bias)


# ----------------------------------------------------------------------- shapes
@pytest.mark.parametrize("name", NAMES)
def test_logit_and_representation_shapes(name):
    fields, dense = _inputs(6)
    net = _net(name)
    hp = P.default_hp(net)
    v = P.init_ctr_variables(net, jax.random.key(0), hp, jnp.asarray(fields), jnp.asarray(dense))
    z = jax.jit(lambda v, f, d: P.ctr_logits(net, v, hp, f, d))(v, fields, dense)
    z2, h = P.ctr_logits(net, v, hp, jnp.asarray(fields), jnp.asarray(dense), return_embedding=True)
    width = {
        "FNN": 8, "DeepFM": 8,
        "DCN": len(CARD) * 4 + N_DENSE + 8, "DCNMix": len(CARD) * 4 + N_DENSE + 8,
        "xDeepFM": 8 + 6 // 2 + 4 // 2 + 3,  # DNN + CIN output halves + last CIN layer
    }[name]
    assert z.shape == (6,) and z.dtype == jnp.float32
    assert h.shape == (6, width) and h.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(z), np.asarray(z2), rtol=1e-6, atol=1e-7)
    assert np.all(np.isfinite(np.asarray(h)))


@pytest.mark.parametrize("name", NAMES)
def test_deepctr_default_sizes_give_the_documented_parameter_shapes(name):
    net = C.make(name, CARD)  # DeepCTR defaults; eval_shape compiles nothing
    assert net.hidden == (256, 128, 64) and net.emb_dim == 4
    hp = P.default_hp(net)
    f, d = jax.ShapeDtypeStruct((2, 3), jnp.int32), jax.ShapeDtypeStruct((2, N_DENSE), jnp.float32)
    shapes = jax.eval_shape(lambda f, d: net.init({"params": jax.random.key(0)}, f, d, hp, train=False), f, d)
    p = jax.tree_util.tree_map(lambda s: s.shape, shapes["params"])
    x0 = len(CARD) * 4 + N_DENSE
    assert p["dnn"]["Dense_0"]["kernel"] == (x0, 256) and p["dnn"]["Dense_2"]["kernel"] == (128, 64)
    if name == "DCN":
        assert p["cross"] == {"kernel_0": (x0, 1), "bias_0": (x0,), "kernel_1": (x0, 1), "bias_1": (x0,)}
    if name == "DCNMix":
        assert p["cross"]["U_1"] == (4, x0, 32) and p["cross"]["C_0"] == (4, 32, 32)
        assert p["cross"]["gate"] == (4, x0, 1)
    if name == "xDeepFM":
        assert p["cin"]["filter_0"] == (3, 3, 128) and p["cin"]["filter_1"] == (64, 3, 128)
        assert p["cin_out"]["kernel"] == (64 + 128, 1)


# ----------------------------------------------------------------------- known outputs
def test_fm_second_order_equals_the_pairwise_sum():
    emb = np.random.default_rng(3).normal(size=(5, 4, 3))
    got = np.asarray(C.fm_second_order(jnp.asarray(emb, jnp.float32)))
    np.testing.assert_allclose(got, _np_fm_pairs(emb), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_full_logit_equals_the_numpy_forward_pass(name):
    fields, dense = _inputs(7, seed=2)
    net = _net(name, emb_init_std=0.5)
    v, hp = _perturbed_variables(net, fields, dense)
    got = np.asarray(P.ctr_logits(net, v, hp, jnp.asarray(fields), jnp.asarray(dense)))
    ref = _np_logit(name, net, jax.device_get(v["params"]), fields, dense)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    # with fields and dense masked as the feature-removal pipelines do
    hp_m = P.default_hp(net, field_mask=jnp.asarray([1.0, 0.0, 1.0]), dense_mask=jnp.asarray(0.0))
    got_m = np.asarray(P.ctr_logits(net, v, hp_m, jnp.asarray(fields), jnp.asarray(dense)))
    ref_m = _np_logit(name, net, jax.device_get(v["params"]), fields, dense, [1.0, 0.0, 1.0], 0.0)
    np.testing.assert_allclose(got_m, ref_m, rtol=1e-5, atol=1e-5)
    assert np.max(np.abs(ref_m - ref)) > 1e-2  # the masks change the reference: the test can fail


def test_fnn_without_linear_part_is_the_mlp_alone():
    fields, dense = _inputs(5, seed=4)
    net = _net("FNN", emb_init_std=0.5, use_linear=False)
    v, hp = _perturbed_variables(net, fields, dense)
    p = jax.device_get(v["params"])
    assert "linear_dense" not in p and "linear_0" not in p
    emb, d = _np_embed(p, fields, dense, np.ones(3), 1.0)
    x0 = np.concatenate([emb.reshape(5, -1), d], 1)
    ref = _np_mlp(p["dnn"], x0, 2) @ _np(p["dnn_out"]["kernel"])[:, 0] + float(p["bias"])
    got = np.asarray(P.ctr_logits(net, v, hp, jnp.asarray(fields), jnp.asarray(dense)))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------- masks
@pytest.mark.parametrize("name", NAMES)
def test_field_and_dense_masks_remove_the_inputs(name):
    fields, dense = _inputs(8, seed=5)
    net = _net(name, emb_init_std=0.5)
    v, hp = _perturbed_variables(net, fields, dense)
    other = fields.copy()
    other[:, 1] = (fields[:, 1] + 3) % CARD[1]
    other_dense = dense + 1.5

    def logits(h, f, d):
        return np.asarray(P.ctr_logits(net, v, h, jnp.asarray(f), jnp.asarray(d)))

    base = logits(hp, fields, dense)
    assert np.max(np.abs(base - logits(hp, other, dense))) > 1e-3  # field 1 matters when kept
    assert np.max(np.abs(base - logits(hp, fields, other_dense))) > 1e-3  # and the dense block
    hp_f = P.default_hp(net, field_mask=jnp.asarray([1.0, 0.0, 1.0]))
    np.testing.assert_array_equal(logits(hp_f, fields, dense), logits(hp_f, other, dense))
    hp_d = P.default_hp(net, dense_mask=jnp.asarray(0.0))
    np.testing.assert_array_equal(logits(hp_d, fields, dense), logits(hp_d, fields, other_dense))


# ----------------------------------------------------------------------- training with the unchanged trainer
N_ROWS, N_TRAIN, BATCH, LR, EPOCHS = 4000, 3000, 100, 0.01, 2


def _planted_log(seed: int = 0):
    """3 fields with per-id effects, a field-0 x field-1 interaction and 2 dense effects."""
    rng = np.random.default_rng(seed)
    fields, dense = _inputs(N_ROWS, seed=seed + 10)
    eff = [rng.normal(0.0, 0.8, c) for c in CARD]
    inter = rng.normal(0.0, 0.6, (CARD[0], CARD[1]))
    z = (-1.0 + sum(e[fields[:, j]] for j, e in enumerate(eff)) + inter[fields[:, 0], fields[:, 1]]
         + dense @ np.array([0.7, -0.5]))
    y = (rng.uniform(size=N_ROWS) < 1.0 / (1.0 + np.exp(-z))).astype(np.float32)
    return fields, dense, y


_TRAINED: dict[str, dict] = {}


def _trained(name: str) -> dict:
    """Train three runs in one vmap (key 0 with the default knobs, key 1 with dropout 0.2, key 2
    with batch norm) and runs 0 and 1 alone; cached per architecture (the compiles dominate the
    file's time).

    The batch-norm run is not compared with a run alone: the Dense bias in front of a batch norm
    has a zero gradient up to rounding, Adam rescales that rounding noise to steps of size ``lr``,
    and so batched and unbatched programs (which round differently) drift apart in those biases
    and in the logits (FNN: by 0.06 on the held-out rows). ``CTRNet`` has the same Dense-bias-
    before-batch-norm structure (in one check on this log its batched and single BN runs happened
    to agree bit for bit)."""
    if name not in _TRAINED:
        fields, dense, y = _planted_log()
        f, d, yy = (jnp.asarray(a[:N_TRAIN]) for a in (fields, dense, y))
        net = _net(name)
        train = P.make_ctr_trainer(net, n_train=N_TRAIN, batch_size=BATCH, lr=LR, epochs=EPOCHS)
        # knobs as float32 arrays like default_hp's own (a weakly typed 0.2 would compile the
        # trainer a second time for run 1 alone)
        hps = [P.default_hp(net), P.default_hp(net, dropout=jnp.asarray(0.2, jnp.float32)),
               P.default_hp(net, bn=jnp.asarray(1.0, jnp.float32))]
        keys = jnp.stack([jax.random.key(r) for r in range(3)])
        both = jax.jit(jax.vmap(train, in_axes=(0, 0, None, None, None)))(keys, P.stack_hp(hps), f, d, yy)
        one = jax.jit(train)
        alone = [one(keys[r], hps[r], f, d, yy) for r in range(2)]
        f_te, d_te = jnp.asarray(fields[N_TRAIN:]), jnp.asarray(dense[N_TRAIN:])
        test_logits = jax.jit(jax.vmap(lambda v, hp: P.ctr_logits(net, v, hp, f_te, d_te)))(both, P.stack_hp(hps))
        _TRAINED[name] = {"both": both, "alone": alone, "test_logits": np.asarray(test_logits),
                          "test_y": y[N_TRAIN:], "rate": float(y[:N_TRAIN].mean())}
    return _TRAINED[name]


def _log_loss(z, y):
    z, y = np.asarray(z, np.float64), np.asarray(y, np.float64)
    return float(np.mean(np.logaddexp(0.0, z) - y * z))


@pytest.mark.parametrize("name", NAMES)
def test_training_beats_the_constant_predictor(name):
    t = _trained(name)
    y, rate = t["test_y"], t["rate"]
    constant = float(-np.mean(y * np.log(rate) + (1 - y) * np.log(1 - rate)))
    for r in range(3):  # default knobs, dropout 0.2, batch norm
        ll = _log_loss(t["test_logits"][r], y)
        assert ll < constant - 0.02, (name, r, ll, constant)


@pytest.mark.parametrize("name", NAMES)
def test_vmapped_training_equals_each_key_alone(name):
    t = _trained(name)
    for r in range(2):
        batched = jax.tree_util.tree_map(lambda a, r=r: np.asarray(a[r]), t["both"])
        single = jax.tree_util.tree_map(np.asarray, t["alone"][r])
        assert jax.tree_util.tree_structure(batched) == jax.tree_util.tree_structure(single)
        for a, b in zip(jax.tree_util.tree_leaves(batched), jax.tree_util.tree_leaves(single)):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    # the two runs differ (different keys and knobs), so equality above is not vacuous
    p0, p1 = (jax.tree_util.tree_leaves(jax.tree_util.tree_map(lambda a, r=r: a[r], t["both"]["params"]))
              for r in range(2))
    assert max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(p0, p1)) > 1e-3


# ----------------------------------------------------------------------- bad arguments
@pytest.mark.parametrize(("name", "card", "kw", "arg"), [
    ("nope", CARD, {}, "name"),
    ("FNN", (5, 0, 4), {}, "cardinalities"),
    ("FNN", CARD, {"emb_dim": 0}, "emb_dim"),
    ("DeepFM", CARD, {"hidden": ()}, "hidden"),
    ("DeepFM", CARD, {"hidden": (8, -1)}, "hidden"),
    ("DCN", CARD, {"cross_num": 0}, "cross_num"),
    ("DCN", CARD, {"low_rank": 4}, "low_rank"),  # not a DCN hyper-parameter
    ("DCNMix", CARD, {"low_rank": -2}, "low_rank"),
    ("DCNMix", CARD, {"num_experts": 2.5}, "num_experts"),
    ("xDeepFM", CARD, {"cin_layer_size": (3, 4)}, "cin_layer_size"),  # odd before the last
    ("xDeepFM", CARD, {"cin_layer_size": ()}, "cin_layer_size"),
    ("xDeepFM", CARD, {"cin_activation": "swish"}, "cin_activation"),
    ("FNN", CARD, {"emb_init_std": -1.0}, "emb_init_std"),
    ("FNN", CARD, {"use_linear": 1}, "use_linear"),
])
def test_bad_arguments_raise_value_error_naming_the_argument(name, card, kw, arg):
    with pytest.raises(ValueError, match=arg):
        C.make(name, card, **kw)


def test_sizes_are_normalised_and_direct_construction_is_checked_too():
    net = C.make("xDeepFM", np.array([5, 7, 4]), hidden=[8, 4], cin_layer_size=[4, 3], cin_split_half=True)
    assert net.cardinalities == CARD and net.hidden == (8, 4) and net.cin_layer_size == (4, 3)
    with pytest.raises(ValueError, match="cross_num"):
        C.DCN(cardinalities=CARD, cross_num=-1)


def test_docstring_examples_run():
    result = doctest.testmod(C, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
