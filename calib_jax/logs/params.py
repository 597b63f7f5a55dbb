"""Calibrator parameter files of ``calib-jax fit`` / ``calib-jax apply``.

A parameter file is UTF-8 JSON (format version 1)::

    {
      "format": "calib-jax-calibrator",
      "format_version": 1,
      "method": "platt",                  # the --method of `calib-jax fit`
      "registry_name": "platt",           # calib_jax.calibrators.REGISTRY key
      "params_type": "PlattParams",       # the params class of that calibrator's module
      "params": {"a": {"dtype": "float32", "shape": [], "data": [1.02]}, ...,
                 "x_space": {"str": "logit"}},   # static string options
      "inputs": {"score": "pctr", "logit": null, "label": "click", "weight": null,
                 "fields": [...], "features": [...],          # SAG/VR-SAG embedding inputs
                 "vocabularies": {"field": ["a", "b", ...]},  # one-hot columns, in order
                 "level_text": 2,   # the levels' text (loaders.level_text); absent: pyarrow's cast
                 "other_share": {"field": 0.01},  # the fit's rows in __other__ (since 2026-12-06)
                 "new_share": {"field": 0.02},    # new rows expected there (leave-one-out, since 2026-12-06)
                 "feature_range": [[0.0, 9.5], ...],  # each feature's fitted [min, max] (since 2026-12-06)
                 "feature_mean": [...], "feature_scale": [...],
                 "source": "train.csv", "format": "csv", "rows": 12345, "dropped": {}},
      "calib_jax_version": "0.1.0",
      "created_utc": "..."
    }

Arrays are stored exactly (float32 values round-trip through JSON's shortest decimal
form), so ``apply`` reproduces ``predict(fit(...))`` bit for bit.  Histogram binning is the
one exception: its fits (from rows and from cells) and ``apply`` bin the float64 score by one
rule, :func:`histogram_bin` (the report's reliability table's), where the library's
``predict`` bins the float32 sigmoid of the float32 logit and can put a score on an edge
:math:`m/M` one bin lower.  Files with another ``format_version`` are refused with a clear
message.

SAG and VR-SAG group rows by an embedding; here the embedding is built from the log: one
one-hot block per ``--field`` column (its ``--max-levels`` most frequent values, the rest in
an ``__other__`` column) and the standardised ``--feature`` columns.  The vocabularies,
means and scales are saved so ``apply`` builds the same embedding on any log.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from calib_jax._src.seeds import key_of_seed  # every bit of --seed (jax.random.key keeps 32)
from calib_jax.logs.unseen import UnseenInputs, expected_new_share
from calib_jax.logs.validate import BEYOND_FLOAT32, FLOAT32_MAX

__all__ = ["METHODS", "FORMAT", "FORMAT_VERSION", "fit_from_table", "save", "load", "predict_batch",
           "first_invalid", "invalid_words", "float32_logits", "params_to_json", "params_from_json", "CELL_METHODS",
           "HISTOGRAM_BINS", "histogram_bin",
           "histogram_params", "cell_sample", "fit_from_cells", "field_vocabulary", "check_method_inputs",
           "machine_memory", "sag_memory", "check_apply_memory",
           "feature_beyond_float32", "feature_row_problem"]

FORMAT = "calib-jax-calibrator"
FORMAT_VERSION = 1

#: ``--method`` -> calibrator registry name: one name per method, the registry's.
METHODS = {n: n for n in ("temperature", "platt", "beta", "histogram_binning", "isotonic", "ilps", "sag_ts",
                          "vrsag_ts", "sag_ps", "vrsag_ps", "neural_calibration")}
#: names of parameter files written before the CLI took the registry's names
OLD_METHOD_NAMES = {"histogram": "histogram_binning", "sag": "sag_ts", "vrsag": "vrsag_ts",
                    "neural": "neural_calibration"}
_SAG = ("sag_ts", "vrsag_ts", "sag_ps", "vrsag_ps")
_MODULE = {**{n: "sag" for n in _SAG}, "histogram_binning": "histogram"}
#: the largest Neural Calibration architecture a parameter file may describe
_NC_LIMITS = {"fields": 64, "vocab": 1_000_000, "embed_dim": 1024, "hidden": 8, "width": 4096}


def _array_json(v: Any) -> dict[str, Any]:
    a = np.asarray(v)
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": a.ravel().tolist()}


def params_to_json(params: Any) -> dict[str, Any]:
    """A params pytree (NamedTuple or dataclass) as JSON-able fields; Neural Calibration's
    nested parameters flat, as ``eta.<field>``, ``mlp/<flax path>`` and its architecture."""
    if type(params).__name__ == "NeuralCalibrationParams":
        from flax import traverse_util

        flat = {f"eta.{k}": (_array_json(getattr(params.eta, k))) for k in ("knots", "values", "fallback")}
        flat["eta.extrapolate"] = {"str": params.eta.extrapolate}
        flat["vocab_sizes"] = _array_json(np.asarray(params.vocab_sizes, np.int64))
        flat["embed_dim"] = _array_json(np.asarray(params.embed_dim, np.int64))
        flat["hidden"] = _array_json(np.asarray(params.hidden, np.int64))
        for path, leaf in traverse_util.flatten_dict(params.mlp, sep="/").items():
            flat[f"mlp/{path}"] = _array_json(leaf)
        return flat
    if dataclasses.is_dataclass(params):
        items = [(f.name, getattr(params, f.name)) for f in dataclasses.fields(params)]
    else:
        items = list(params._asdict().items())
    out: dict[str, Any] = {}
    for k, v in items:
        if isinstance(v, str):
            out[k] = {"str": v}
        else:
            a = np.asarray(v)
            out[k] = {"dtype": str(a.dtype), "shape": list(a.shape), "data": a.ravel().tolist()}
    return out


def _params_class(registry_name: str, type_name: str) -> Any:
    import importlib

    mod = importlib.import_module(f"calib_jax.calibrators.{_MODULE.get(registry_name, registry_name)}")
    cls = getattr(mod, type_name, None)
    if cls is None:
        raise ValueError(f"params type {type_name!r} not found in calib_jax.calibrators.{mod.__name__}")
    return cls


def params_from_json(registry_name: str, type_name: str, fields: Mapping[str, Any]) -> Any:
    """Inverse of :func:`params_to_json`."""
    import jax.numpy as jnp

    cls = _params_class(registry_name, type_name)
    kw = {}
    for k, v in fields.items():
        if "str" in v:
            kw[k] = v["str"]
        else:
            kw[k] = jnp.asarray(np.asarray(v["data"], dtype=v["dtype"]).reshape(v["shape"]))
    if registry_name == "neural_calibration":
        from flax import traverse_util

        from calib_jax.calibrators import ilps

        eta = ilps.ILPSParams(knots=kw["eta.knots"], values=kw["eta.values"], fallback=kw["eta.fallback"],
                              extrapolate=kw["eta.extrapolate"])
        mlp = traverse_util.unflatten_dict({k[4:]: a for k, a in kw.items() if k.startswith("mlp/")}, sep="/")
        return cls(eta=eta, mlp=mlp, vocab_sizes=tuple(int(c) for c in kw["vocab_sizes"]),
                   embed_dim=int(kw["embed_dim"]), hidden=tuple(int(h) for h in kw["hidden"]))
    return cls(**kw)


#: ``inputs.level_text`` of a parameter file: 2 since 2026-12-06, its vocabularies' levels
#: written as every engine writes a field's levels (:func:`calib_jax.logs.loaders.level_text`);
#: a file without it holds pyarrow's own text of times and floats, and is applied that way
LEVEL_TEXT = 2


def _strings(table: Any, f: str, legacy: bool = False) -> Any:
    """Column ``f`` as Arrow strings (:func:`~calib_jax.logs.loaders.level_text`), nulls as
    ``__missing__`` (the evaluate command's level)."""
    from calib_jax.logs import loaders

    col = table.column(f)
    col = col.combine_chunks() if hasattr(col, "combine_chunks") else col
    return loaders.level_text(col, legacy=legacy).fill_null("__missing__")


def legacy_levels(inputs: Mapping[str, Any]) -> bool:
    """Whether a parameter file's vocabularies hold the levels of a file written before
    2026-12-06 (no ``level_text``): pyarrow's own text of times and floats."""
    return inputs.get("level_text") != LEVEL_TEXT


def field_vocabulary(table: Any, f: str, max_levels: int) -> tuple[list[str], float]:
    """The vocabulary that ``calib-jax fit`` (and :func:`fit_from_table`) records for field ``f``:
    its ``max_levels`` most frequent levels (ties in string order), then ``__other__``, with the
    share of new rows expected at levels it does not hold.

    The levels are counted by Arrow, not in Python, as the text the query engines write
    (a null is ``__missing__``). The expected share is the leave-one-out estimate of
    :func:`~calib_jax.logs.unseen.expected_new_share`: the fit's rows at levels outside the
    vocabulary, plus those of levels kept but seen once, over the fit's rows. ``apply`` warns when
    a log holds more rows outside the vocabulary than that.

    Args:
      table: a ``pyarrow.Table`` holding the column ``f``.
      f: the field's column name.
      max_levels: how many levels to keep (>= 1).

    Returns:
      ``(vocabulary, new_share)``: the kept levels as text, ``__other__`` last, and the share in
      [0, 1].

    Example:
      >>> import pyarrow as pa
      >>> from calib_jax.logs.params import field_vocabulary
      >>> field_vocabulary(pa.table({"f": ["a", "a", "b", "b", "c", None]}), "f", 2)
      (['a', 'b', '__other__'], 0.3333333333333333)
    """
    import pyarrow.compute as pc

    counts = pc.value_counts(_strings(table, f))
    vals = np.asarray(counts.field("values").to_pylist(), dtype=object)
    cnt = counts.field("counts").to_numpy()
    order = sorted(range(len(vals)), key=lambda i: (-int(cnt[i]), str(vals[i])))[:max_levels]
    vocab = [str(vals[i]) for i in order if vals[i] != "__other__"] + ["__other__"]
    per_level = {str(v): int(c) for v, c in zip(vals, cnt, strict=True)}
    return vocab, expected_new_share(per_level, vocab, table.num_rows)


def _codes(table: Any, f: str, vocab: Sequence[str], legacy: bool = False,
           tally: UnseenInputs | None = None) -> np.ndarray:
    """Index of each row's level of field ``f`` in ``vocab``; unknown levels -> ``__other__``,
    counted in ``tally`` (a :class:`~calib_jax.logs.unseen.UnseenInputs`) when given."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = _strings(table, f, legacy)
    idx = pc.index_in(text, value_set=pa.array(list(vocab), pa.string()))
    if tally is not None:
        tally.add(f, text, idx)
    return idx.fill_null(list(vocab).index("__other__")).to_numpy(zero_copy_only=False).astype(np.int32)


def _embedding(table: Any, fields: Sequence[str], features: Sequence[str], vocab: Mapping[str, Sequence[str]],
               mean: np.ndarray, scale: np.ndarray, legacy: bool = False,
               tally: UnseenInputs | None = None) -> np.ndarray:
    """The SAG/VR-SAG embedding: one-hot levels of every field, then the standardised
    features, float32 (n, levels + features), written into one array (``tally``: as :func:`_codes`)."""
    n = table.num_rows
    z = np.zeros((n, _embedding_width(vocab, fields, features)), np.float32)
    col = 0
    for f in fields:
        z[np.arange(n), col + _codes(table, f, vocab[f], legacy, tally)] = 1.0
        col += len(vocab[f])
    for j, c in enumerate(features):
        x = np.asarray(table.column(c).to_numpy(zero_copy_only=False), np.float64)
        if tally is not None:
            tally.add_feature(c, x)
        z[:, col + j] = (x - mean[j]) / scale[j]
    return z


def _embedding_width(vocab: Mapping[str, Sequence[str]], fields: Sequence[str], features: Sequence[str]) -> int:
    """Columns of the SAG/VR-SAG embedding: every kept level of every field, then the features."""
    return sum(len(vocab[f]) for f in fields) + len(features)


def _field_codes(table: Any, fields: Sequence[str], vocab: Mapping[str, Sequence[str]],
                 legacy: bool = False, tally: UnseenInputs | None = None) -> np.ndarray:
    """Neural Calibration's categorical inputs: (n, F) int32 level codes (``tally``: as :func:`_codes`)."""
    return np.stack([_codes(table, f, vocab[f], legacy, tally) for f in fields], axis=1)


#: pairs of vectors the L-BFGS solver of SAG/VR-SAG keeps (``calib_jax.calibrators._lbfgs``: optax's
#: ``memory_size=100``), each the size of the heads (P partitions x m columns x K groups)
_LBFGS_PAIRS = 100
#: copies of a SAG/VR-SAG embedding a fit or a prediction holds at once (the host's one-hot array,
#: the device's, and its standardised or transposed copy)
_EMBEDDING_COPIES = 3


def machine_memory() -> int | None:
    """This machine's physical memory in bytes (``None`` where the system does not say).

    Example:
      >>> m = machine_memory()
      >>> m is None or m > 2**20
      True
    """
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def sag_memory(rows: int, width: int, partitions: int = 0, groups: int = 0) -> int:
    r"""Bytes a SAG/VR-SAG fit (or, with ``partitions = 0``, a prediction) on ``rows`` rows of a
    ``width``-column embedding holds at the least:
    :math:`4 m (3 n + 2 \cdot 100 \, P K)`, three float32 copies of the (n, m) embedding and the
    solver's 100 pairs of (P, m, K) L-BFGS vectors.

    Args:
      rows: n, the rows fitted or predicted at once.
      width: m, the embedding's columns (kept field levels plus features).
      partitions: P (0: a prediction, no solver).
      groups: K.

    Returns:
      The estimate in bytes, a lower bound.

    Example:
      >>> sag_memory(1000, 10, 10, 3)   # 4 bytes x 10 columns x (3 x 1,000 rows + 200 x 10 x 3)
      360000
    """
    return 4 * width * (_EMBEDDING_COPIES * rows + 2 * _LBFGS_PAIRS * partitions * groups)


def check_method_inputs(method: str, fields: Sequence[str], features: Sequence[str]) -> None:
    """Refuse ``--field`` / ``--feature`` for a ``method`` that reads only the model's score or
    logit (its fit would ignore them, and the parameter file would name no field), and a
    ``method`` that is not one of :data:`METHODS`.

    Args:
      method: the ``--method`` name.
      fields: the ``--field`` columns.
      features: the ``--feature`` columns.

    Returns:
      ``None``; raises ``ValueError`` naming the flag and the methods that read it.

    Example:
      >>> check_method_inputs("sag_ps", ["site"], [])
      >>> check_method_inputs("platt", ["site"], [])
      Traceback (most recent call last):
      ValueError: --field: --method platt reads only the score or logit and would ignore site; ...
    """
    from calib_jax import calibrators

    if method not in METHODS:
        hint = f"it is called {OLD_METHOD_NAMES[method]!r}; " if method in OLD_METHOD_NAMES else ""
        raise ValueError(f"unknown --method {method!r}; {hint}choose one of {', '.join(METHODS)}")
    needs = {m: calibrators.get(n).needs for m, n in METHODS.items()}
    for flag, cols, reads in (("--field", fields, ("fields", "embedding")), ("--feature", features, ("embedding",))):
        if cols and not set(needs[method]) & set(reads):
            readers = [m for m, need in needs.items() if set(need) & set(reads)]
            what = "the score or logit and its --field columns" if needs[method] else "only the score or logit"
            raise ValueError(f"{flag}: --method {method} reads {what} and would ignore {', '.join(cols)}; the "
                             f"methods that read {flag} are {', '.join(readers)}")


def _check_fit_memory(method: str, rows: int, vocab: Mapping[str, Sequence[str]], features: Sequence[str],
                      partitions: int | None) -> None:
    """``ValueError`` when a SAG/VR-SAG fit needs more memory than the machine has
    (:func:`sag_memory`): a field of distinct ids under a large ``--max-levels``, or
    ``--partitions 100000000``, was killed by the system's out-of-memory killer, without a word."""
    from calib_jax.calibrators.sag import SAGConfig

    cfg = SAGConfig.resolve(n_partitions=partitions)
    width = _embedding_width(vocab, list(vocab), features)
    need, have = sag_memory(rows, width, cfg.n_partitions, cfg.n_groups), machine_memory()
    if have is not None and need > have:
        levels = ", ".join(f"{f} {len(v)}" for f, v in vocab.items()) or "none"
        raise ValueError(f"--method {method} on {rows} rows would hold an embedding of {width} columns (field "
                         f"levels: {levels}; features {len(features)}) and {cfg.n_partitions} partitions of "
                         f"{cfg.n_groups} groups: at least {need / 2**30:.1f} GiB, more than this machine's "
                         f"{have / 2**30:.1f} GiB; lower --max-levels or --partitions, or leave out a field of "
                         "distinct ids")


def feature_beyond_float32(values: np.ndarray, mean: float, scale: float) -> tuple[int, int] | None:
    """``(rows, first row)`` of the feature values whose standardised value ``(x - mean) / scale``
    lies beyond float32's range (the SAG/VR-SAG embedding's type: such a row was ``inf`` there,
    and the library's error named neither the column nor the row), or ``None``.

    Example:
      >>> feature_beyond_float32(np.array([0.5, 1e300, -1e300]), 0.0, 1.0)
      (2, 1)
    """
    with np.errstate(over="ignore"):
        far = ~(np.abs((np.asarray(values, np.float64) - mean) / scale) <= float(np.finfo(np.float32).max))
    return (int(far.sum()), int(np.argmax(far))) if far.any() else None


def feature_row_problem(values: np.ndarray, inputs: Mapping[str, Any], j: int) -> tuple[str, int, int] | None:
    """What is wrong with the rows of feature ``j`` (``inputs["features"][j]``) of a fitted
    SAG/VR-SAG model, as ``apply`` and ``Fit.predict`` check a row before predicting it:
    ``(what, rows, first row)`` for values missing or not finite (:func:`first_invalid`), then for
    values beyond float32's range once standardised (:func:`feature_beyond_float32`), or ``None``.

    Example:
      >>> feature_row_problem(np.array([0.5, np.nan]), {"feature_mean": [0.0], "feature_scale": [1.0]}, 0)
      ('missing or not finite', 1, 1)
    """
    invalid = first_invalid(values, unit_interval=False)
    if invalid:
        return "missing or not finite", invalid[0], invalid[1]
    far = feature_beyond_float32(values, inputs["feature_mean"][j], inputs["feature_scale"][j])
    if far:
        return "beyond float32's range once standardised by the fit's mean and scale", far[0], far[1]
    return None


def check_apply_memory(spec: Mapping[str, Any], chunk_rows: int, rows: int | None) -> None:
    """``ValueError`` naming ``--chunk-rows`` when a chunk of a SAG/VR-SAG model's one-hot
    embedding would not fit in this machine's memory (:func:`sag_memory`; a model of 20,000 field
    levels needs 59 GiB for the default 262,144-row chunk), with the largest chunk that fits.

    Args:
      spec: the parameter file's record (:func:`load`).
      chunk_rows: the ``--chunk-rows`` of ``apply``.
      rows: the log's rows where known (a smaller log is one chunk), else ``None``.

    Returns:
      ``None``; raises ``ValueError``.

    Example:
      >>> spec = {"registry_name": "sag_ps", "inputs": {"fields": ["id"], "features": [],
      ...                                               "vocabularies": {"id": ["1", "2", "__other__"]}}}
      >>> check_apply_memory(spec, 262_144, None)
    """
    if spec.get("registry_name") not in _SAG:
        return
    inp = spec["inputs"]
    width = _embedding_width(inp["vocabularies"], inp["fields"], inp["features"])
    chunk = chunk_rows if rows is None else max(1, min(chunk_rows, rows))
    need, have = sag_memory(chunk, width), machine_memory()
    if have is not None and need > have:
        fits = have // sag_memory(1, width)
        raise ValueError(f"--chunk-rows {chunk_rows}: a chunk of {chunk} rows of this model's {width}-column "
                         f"embedding holds at least {need / 2**30:.1f} GiB, more than this machine's "
                         f"{have / 2**30:.1f} GiB; use --chunk-rows {max(1, fits // 2)} or fewer")


def fit_from_table(method: str, arrays: Mapping[str, np.ndarray], table: Any, *, fields: Sequence[str] = (),
                   features: Sequence[str] = (), max_levels: int = 50, seed: int = 0,
                   hyper: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Fit ``method`` on the valid rows (``arrays`` o, y, v and the scores p, float64; ``table``
    the same rows). Histogram binning bins the float64 score p (:func:`histogram_bin`,
    :func:`histogram_params`), as the fit from cells and ``apply`` do."""
    from calib_jax import calibrators

    check_method_inputs(method, fields, features)
    name = METHODS[method]
    cal = calibrators.get(name)
    o, y, v = arrays["o"], arrays["y"], arrays["v"]
    weights = None if np.all(v == 1.0) else v
    inputs: dict[str, Any] = {"fields": [], "features": [], "vocabularies": {}, "feature_mean": [],
                              "feature_scale": [], "level_text": LEVEL_TEXT}
    if name == "histogram_binning":
        idx = histogram_bin(arrays["p"], HISTOGRAM_BINS)
        return _spec(method, name, histogram_params(np.bincount(idx, v, HISTOGRAM_BINS),
                                                    np.bincount(idx, v * y, HISTOGRAM_BINS)), inputs)
    context: dict[str, Any] | None = None
    if "embedding" in cal.needs or "fields" in cal.needs:
        if "fields" in cal.needs and (not fields or features):
            raise ValueError(f"--method {method} corrects the calibrated logit by categorical fields: give one "
                             "or more --field COL (and no --feature)")
        if not fields and not features:
            raise ValueError(f"--method {method} groups rows by an embedding: give --field COL and/or --feature COL")
        kept = {f: field_vocabulary(table, f, max_levels) for f in fields}
        vocab = {f: v for f, (v, _) in kept.items()}
        if "embedding" in cal.needs:  # refused by name before the one-hot embedding is built
            _check_fit_memory(method, table.num_rows, vocab, features, (hyper or {}).get("n_partitions"))
        mean = np.zeros(len(features))
        scale = np.ones(len(features))
        span: list[list[float]] = []
        if features:
            x = np.stack([np.asarray(table.column(c).to_numpy(zero_copy_only=False), np.float64) for c in features], 1)
            lows, highs = x.min(axis=0), x.max(axis=0)
            with np.errstate(over="ignore", invalid="ignore"):
                mean, scale, spread = x.mean(axis=0), x.std(axis=0), highs - lows
            for j, c in enumerate(features):
                # values near float64's limit: a mean or spread of inf made every standardised value
                # NaN (a library error about context['embedding']), a std of inf made it 0 (the
                # feature silently dropped, and inf written into the parameter file)
                if not (np.isfinite(mean[j]) and np.isfinite(scale[j]) and np.isfinite(spread[j])):
                    lo, hi = float(lows[j]), float(highs[j])
                    raise ValueError(f"--feature {c}: its values (from {lo!r} to {hi!r}) are too large to standardise "
                                     "in float64 (their mean, spread or standard deviation overflows); rescale the "
                                     "column")
            scale = np.where(scale > 0, scale, 1.0)
            span = [[float(lo), float(hi)] for lo, hi in zip(lows, highs, strict=True)]
        inputs.update(fields=list(fields), features=list(features), vocabularies=vocab,
                      feature_mean=mean.tolist(), feature_scale=scale.tolist(), feature_range=span)
        tally = UnseenInputs(inputs)  # the fit's own rows in __other__, for apply's comparison
        context = ({"fields": _field_codes(table, fields, vocab, tally=tally)} if "fields" in cal.needs
                   else {"embedding": _embedding(table, fields, features, vocab, mean, scale, tally=tally)})
        inputs["other_share"] = {f: tally.unseen[f] / max(table.num_rows, 1) for f in fields}
        inputs["new_share"] = {f: new for f, (_, new) in kept.items()}
    trained = hyper if hyper and cal.needs else {}
    if "fields" in cal.needs:  # Neural Calibration: steps only
        trained = {k: v for k, v in trained.items() if k == "n_steps"}
    params = cal.fit(o.astype(np.float32), y.astype(np.float32),
                     weights=None if weights is None else weights.astype(np.float32),
                     key=key_of_seed(seed), context=context, **dict(trained))
    return _spec(method, name, params, inputs)


def _spec(method: str, name: str, params: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "method": method, "registry_name": name,
            "params_type": type(params).__name__, "params": params_to_json(params), "inputs": inputs,
            "calib_jax_version": _version(),
            "created_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")}


#: the methods ``calib-jax fit --engine`` fits from a log's cells: one-dimensional maps of the logit
#: (``calib_jax.cli.commands.CELL_FIT_METHODS`` names them for the parser; a test checks the two agree)
CELL_METHODS = ("temperature", "platt", "beta", "histogram_binning", "isotonic", "ilps")


#: equal-width probability bins of ``--method histogram_binning``: the library's default ``n_bins``
#: and the rows of the report's reliability table (:class:`~calib_jax.logs.accumulate.Settings`)
HISTOGRAM_BINS = 15
#: the probability clip of a score's logit, :func:`calib_jax.logs.validate.to_logit`'s
_P_CLIP = 1e-12
#: the clip of a logit column's probability in the end cells: the smallest positive double and
#: the largest double below 1 (logits of about -744 and 36.7)
_P_TINY, _P_TOP = 5e-324, 1.0 - 2.0**-53


def histogram_bin(p: Any, n_bins: int) -> np.ndarray:
    r"""The equal-width bin of a score, the one rule of ``fit`` (rows and cells) and ``apply``.

    :math:`m = \min(\lfloor p \cdot M \rfloor, M - 1)` computed in float64 on the score itself
    (for a logit column on :math:`p = 1/(1 + e^{-o})`, as the row checks compute it): the bins
    :math:`[m/M, (m+1)/M)` with :math:`p = 1` in the last, exactly as the report's reliability
    table and the SQL query (``floor(p * M)``) bin a row. A score on an edge :math:`m/M` is in
    bin :math:`m` (the float32 logit and sigmoid of the library's
    :func:`calib_jax.calibrators.histogram.predict` can put it one bin lower).

    Args:
      p: (n,) scores in [0, 1].
      n_bins: the number of bins M >= 1.

    Returns:
      (n,) int64 bin indices in ``[0, M)``.

    Example:
      >>> from calib_jax.logs.params import histogram_bin
      >>> histogram_bin([0.0, 0.2, 0.19999999, 1.0], 15).tolist()
      [0, 3, 2, 14]
    """
    return np.clip(np.floor(np.asarray(p, np.float64) * n_bins), 0, n_bins - 1).astype(np.int64)


def histogram_params(weight: Any, clicks: Any) -> Any:
    r"""Histogram binning's parameters from its bins' sums (rows and cells alike).

    Bin :math:`m` of :func:`histogram_bin` predicts its weighted click rate
    :math:`\sum_{i \in B_m} v_i y_i / \sum_{i \in B_m} v_i` (computed in float64, stored in
    float32); a bin without weight keeps the score (``identity``), as the library's
    :func:`calib_jax.calibrators.histogram.fit` with ``empty="identity"``. The edges are the
    library's float32 grid :math:`m/M`.

    Args:
      weight: (M,) the bins' total weights :math:`\sum v`.
      clicks: (M,) their weighted clicks :math:`\sum v y`.

    Returns:
      A :class:`calib_jax.calibrators.histogram.HistogramParams`.

    Example:
      >>> from calib_jax.logs.params import histogram_params
      >>> hp = histogram_params([4.0, 0.0], [1.0, 0.0])
      >>> hp.values.tolist(), hp.identity.tolist()
      ([0.25, 0.75], [False, True])
    """
    import jax.numpy as jnp

    from calib_jax.calibrators.histogram import HistogramParams

    w, c = np.asarray(weight, np.float64), np.asarray(clicks, np.float64)
    empty = ~(w > 0)
    edges = jnp.linspace(0.0, 1.0, w.size + 1, dtype=jnp.float32)  # the library's edges
    centre = np.asarray(0.5 * (edges[:-1] + edges[1:]), np.float64)
    values = np.where(empty, centre, c / np.where(empty, 1.0, w))
    return HistogramParams(edges=edges, values=jnp.asarray(values, jnp.float32), empty=jnp.asarray(empty),
                           identity=jnp.asarray(empty))


def _histogram_predict(params: Any, p: np.ndarray) -> np.ndarray:
    """``apply``'s histogram binning: the bin of the float64 score (:func:`histogram_bin` when
    the edges are the uniform grid m/M to float32 rounding, else the bin
    ``e_m <= p < e_{m+1}`` of the file's edges), its rate, or the score where ``identity``."""
    edges = np.asarray(params.edges, np.float64)
    m = edges.size - 1
    if np.max(np.abs(edges - np.arange(m + 1) / m)) <= 1e-7:
        idx = histogram_bin(p, m)
    else:
        idx = np.clip(np.searchsorted(edges[1:-1], p, side="right"), 0, m - 1)
    return np.where(np.asarray(params.identity)[idx], p, np.asarray(params.values, np.float64)[idx])


def cell_sample(acc: Any, *, pool_labels: bool = False, logit_input: bool = False
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""The log as weighted pseudo-rows, one per (fine logit bin, label) cell with weight.

    Cell :math:`(h, y)` of the accumulator's fine logit grid (:mod:`calib_jax.logs.accumulate`,
    ``hist``) becomes one row with label :math:`y`, weight :math:`\sum v` and logit
    :math:`\bar o_{hy} = \sum v o / \sum v`, the mean of its rows' logits. The two end cells
    (:math:`h = 0` and :math:`H - 1`) also hold every logit beyond :math:`\pm L`, which the
    grid clips; there the logit is that of the cell's mean probability
    :math:`\bar p = \sum v p / \sum v`, clipped as the row fit clips a score
    (:func:`calib_jax.logs.validate.to_logit`: :math:`[10^{-12}, 1 - 10^{-12}]`, logits of
    :math:`\pm 27.63`), so a cell of scores of exactly 0 or exactly 1 sits where the row fit
    puts them. (A logit column is not clipped by the row fit: its end cells give back a
    negative logit down to about -708 to float64 rounding, a positive one to the precision
    of :math:`1 - \sigma(o)` in float64, 0.001 logits at :math:`o = 30`, and none beyond about
    36.7, where :math:`\sigma(o)` rounds to 1.)

    How close the fit on these rows is to the row-level fit (``calib-jax fit`` without
    ``--engine``; ``tests/test_cli_fit_cells.py``, ``tests/test_cli_fit_cells_edges.py``):

    * when every cell holds one score (scores of 0 and 1, on bin edges, constant, or simply
      fewer distinct scores than cells), the pseudo-rows are the rows with equal rows merged:
      the same weighted objective, so isotonic regression, temperature, Platt and beta
      scaling give the row fit to float32 rounding (1e-6 in probability; measured: at most
      1.2e-7), and ILPS comes as close as its own row fit comes to itself when the rows are
      read in another order (its L-BFGS stops at 300 iterations short of the optimum: on logs
      of 240 rows and 24 scores a median of 0.01 and up to 0.07 either way, so 0.1 is the
      tested bound);
    * otherwise the fits differ only through the spread of the logits within a cell (one fine
      bin, 2L/H = 0.0078 logits by default; an end cell where it mixes scores beyond
      :math:`\pm L`): on 40,000 rows temperature 1.2e-7, Platt 2.5e-6, beta 1.9e-6, ILPS
      3.5e-3 at most; isotonic regression, whose knots move to the cells' logits, 6e-4 on
      average and up to 0.08 at a sparse tail.

    Histogram binning does not use these rows: :func:`fit_from_cells` reads its bins' rates
    from the reliability table, which bins the float64 score as :func:`histogram_bin` does.

    With ``pool_labels`` both rows of a bin sit at the bin's mean logit (isotonic regression
    pools tied scores first, so a bin is then one point of the fit, at its label rate).

    Args:
      acc: an :class:`~calib_jax.logs.accumulate.Accumulator` (replicate 0 is used).
      pool_labels: one logit per fine bin (both labels) instead of one per cell.
      logit_input: the log's column is a logit (``--logit``), not a score.

    Returns:
      ``(o, y, v)`` float64 arrays of the non-empty cells.

    Example:
      >>> import numpy as np
      >>> import pyarrow as pa
      >>> from calib_jax.logs.accumulate import Accumulator, Settings
      >>> from calib_jax.logs.params import cell_sample
      >>> from calib_jax.logs.validate import Columns, Problems, clean_chunk
      >>> rows = pa.record_batch({"p": [0.0, 0.0, 0.5, 1.0], "y": [0.0, 1.0, 1.0, 1.0]})
      >>> acc = Accumulator(Settings(n_boot=0, scheme="rows"))
      >>> acc.update(clean_chunk(rows, Columns(label="y", score="p"), 0, Problems()))
      >>> o, y, v = cell_sample(acc)
      >>> np.round(o, 2).tolist(), y.tolist(), v.tolist()  # the score 0 at logit -27.63, as the rows
      ([-27.63, -27.63, 0.0, 27.63], [0.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0])
    """
    s = acc.settings
    h = acc.hist.reshape(acc.R, s.hist_bins, 2, 4)[0]  # (H, label, [w, w p, w p^2, w o])
    w = h[..., 0]
    keep = w > 0
    if pool_labels:
        sw, sp, so = (h[..., k].sum(axis=1, keepdims=True) for k in (0, 1, 3))
    else:
        sw, sp, so = w, h[..., 1], h[..., 3]
    safe = np.where(sw > 0, sw, 1.0)
    o = np.where(sw > 0, so / safe, 0.0)
    lo, hi = (_P_TINY, _P_TOP) if logit_input else (_P_CLIP, 1.0 - _P_CLIP)
    pbar = np.clip(sp[[0, -1]] / safe[[0, -1]], lo, hi)  # the end cells' mean probabilities
    o[[0, -1]] = np.where(sw[[0, -1]] > 0, np.log(pbar) - np.log1p(-pbar), 0.0)
    o = np.broadcast_to(o, w.shape)
    y = np.broadcast_to(np.array([0.0, 1.0]), w.shape)
    return o[keep], y[keep], w[keep]


def fit_from_cells(method: str, acc: Any, *, seed: int = 0, logit_input: bool = False) -> dict[str, Any]:
    """Fit a one-dimensional calibrator from a log's cells (``calib-jax fit --engine``).

    ``histogram_binning`` (equal-width probability bins) is read from the reliability table:
    per bin of :func:`histogram_bin` the weighted label rate of its rows, exactly the
    row-level fit's (:func:`histogram_params`). The others (temperature, Platt, beta,
    isotonic, ILPS) are fitted on the weighted cell rows of :func:`cell_sample`, whose
    docstring states how close they come to the row-level fit.

    Args:
      method: one of ``CELL_METHODS``.
      acc: the log's :class:`~calib_jax.logs.accumulate.Accumulator` (its ``n_bins`` is the
        histogram binning's number of bins).
      seed: the fit's PRNG seed (unused by these methods; recorded for the protocol).
      logit_input: the log's column is a logit (``--logit``), not a score.

    Returns:
      The parameter file's dict, as :func:`fit_from_table` returns it.
    """
    from calib_jax import calibrators

    if method not in CELL_METHODS:
        raise ValueError(f"--method {method} needs the rows (its fit reads more than the logit); --engine fits "
                         f"{', '.join(CELL_METHODS)} from the log's cells: leave out --engine to fit it")
    name = METHODS[method]
    cal = calibrators.get(name)
    inputs: dict[str, Any] = {"fields": [], "features": [], "vocabularies": {}, "feature_mean": [],
                              "feature_scale": [], "level_text": LEVEL_TEXT}
    if method == "histogram_binning":
        m = acc.settings.n_bins
        rel = acc.rel.reshape(acc.R, m, 2, 3)[0]  # (bin, label, [w, w p, w p^2])
        params: Any = histogram_params(rel[:, :, 0].sum(axis=1), rel[:, 1, 0])
    else:
        o, y, v = cell_sample(acc, pool_labels=method == "isotonic", logit_input=logit_input)
        params = cal.fit(o.astype(np.float32), y.astype(np.float32), weights=v.astype(np.float32),
                         key=key_of_seed(seed))
    return _spec(method, name, params, inputs)


def _version() -> str:
    from calib_jax import __version__

    return __version__


def save(path: str | os.PathLike[str], spec: Mapping[str, Any]) -> Path:
    """Write a parameter file atomically."""
    from calib_jax.io import write_json

    return write_json(path, spec)


#: the params class and, per array field, (dtype kind, shape rule) of each method; shapes use
#: "P" (partitions), "K" (groups), "m" (embedding width), "M" (bins), "N" (knots)
_SCHEMA: dict[str, tuple[str, dict[str, tuple[str, tuple[str | int, ...]]]]] = {
    "temperature": ("TemperatureParams", {"beta": ("f", ()), "fallback": ("i", ())}),
    "platt": ("PlattParams", {"a": ("f", ()), "b": ("f", ()), "fallback": ("i", ())}),
    "beta": ("BetaParams", {"a": ("f", ()), "b": ("f", ()), "c": ("f", ()), "fallback": ("i", ())}),
    "histogram_binning": ("HistogramParams", {"edges": ("f", ("M+1",)), "values": ("f", ("M",)),
                                              "empty": ("b", ("M",)), "identity": ("b", ("M",))}),
    "isotonic": ("IsotonicParams", {"x_knots": ("f", ("N",)), "y_knots": ("f", ("N",))}),
    **{name: ("SAGParams", {"W": ("f", ("P", "m", "K")), "b": ("f", ("P", "K")), "log_tau": ("f", ("P", "K")),
                            "beta": ("f", ("P", "K")), "z_mean": ("f", ("m",)), "z_scale": ("f", ("m",)),
                            "hard": ("b", ()), "fallback": ("i", ("P", "K"))})
       for name in _SAG},
    "ilps": ("ILPSParams", {"knots": ("f", ("N",)), "values": ("f", ("N",)), "fallback": ("b", ())}),
    # the flax MLP's entries (mlp/...) are checked against the architecture (_nc_expected)
    "neural_calibration": ("NeuralCalibrationParams", {
        "eta.knots": ("f", ("N",)), "eta.values": ("f", ("N",)), "eta.fallback": ("b", ()),
        "vocab_sizes": ("i", ("F",)), "embed_dim": ("i", ()), "hidden": ("i", ("L",))}),
}
_STRINGS = {"isotonic": {"x_space": ("logit", "prob"), "interpolation": ("linear", "step")},
            "ilps": {"extrapolate": ("linear", "clamp")},
            "neural_calibration": {"eta.extrapolate": ("linear", "clamp")}}
_MAX_PARAM_VALUES = 10_000_000
_KINDS = {"f": ("float32", "float64"), "i": ("int32", "int64"), "b": ("bool",)}


def _validate(p: Path | str, spec: Any) -> None:
    """Check a parameter file's structure and values before anything is computed; raise
    ``ValueError`` naming the file (or, for a record built in Python, ``p`` as given) and the
    entry."""
    def bad(why: str) -> ValueError:
        return ValueError(f"{p}: invalid calib-jax parameter file: {why}")

    if not isinstance(spec, dict) or spec.get("format") != FORMAT:
        raise ValueError(f"{p}: not a calib-jax parameter file (no \"format\": \"{FORMAT}\")")
    if spec.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{p}: parameter file format version {spec.get('format_version')!r} is not supported "
                         f"(this calib_jax reads version {FORMAT_VERSION})")
    method = spec.get("method")
    method = OLD_METHOD_NAMES.get(method, method) if isinstance(method, str) else method
    if method not in METHODS:
        raise bad(f"unknown method {method!r} (known: {', '.join(METHODS)})")
    name = METHODS[method]
    if spec.get("registry_name") != name:
        raise bad(f"registry_name {spec.get('registry_name')!r} does not match method {method!r} ({name!r})")
    type_name, arrays = _SCHEMA[name]
    if spec.get("params_type") != type_name:
        raise bad(f"params_type {spec.get('params_type')!r} is not {type_name!r}")
    fields = spec.get("params")
    strings = _STRINGS.get(name, {})
    mlp = {k: v for k, v in fields.items() if k.startswith("mlp/")} if isinstance(fields, dict) else {}
    if name == "neural_calibration" and isinstance(fields, dict):
        fields = {k: v for k, v in fields.items() if k not in mlp}
    if not isinstance(fields, dict) or set(fields) != set(arrays) | set(strings):
        got = sorted(fields) if isinstance(fields, dict) else type(fields).__name__
        raise bad(f"params must hold exactly {sorted(set(arrays) | set(strings))}, got {got}")
    dims: dict[str, int] = {}
    values: dict[str, np.ndarray] = {}
    for k, allowed in strings.items():
        v = fields[k]
        if not isinstance(v, dict) or set(v) != {"str"} or v["str"] not in allowed:
            raise bad(f"params.{k} must be one of {allowed}")
    for k, (kind, rule) in arrays.items():
        v = fields[k]
        if not isinstance(v, dict) or set(v) != {"dtype", "shape", "data"}:
            raise bad(f"params.{k} must be {{dtype, shape, data}}")
        if v["dtype"] not in _KINDS[kind]:
            raise bad(f"params.{k} has dtype {v['dtype']!r}, expected one of {_KINDS[kind]}")
        shape = v["shape"]
        if (not isinstance(shape, list) or len(shape) != len(rule)
                or not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d for d in shape)):
            raise bad(f"params.{k} shape {shape!r} is not a {len(rule)}-D shape")
        for d, r in zip(shape, rule):
            r = str(r)
            base, plus = (r[:-2], 1) if r.endswith("+1") else (r, 0)
            if dims.setdefault(base, d - plus) != d - plus:
                raise bad(f"params.{k} shape {shape} disagrees with the other arrays ({base} = {dims[base]})")
        size = int(np.prod(shape)) if shape else 1
        data = v["data"]
        if size > _MAX_PARAM_VALUES or not isinstance(data, list) or len(data) != size:
            raise bad(f"params.{k} must hold {size} values for shape {shape}")
        if not all(isinstance(x, int | float) for x in data):  # bool is an int
            raise bad(f"params.{k} holds values that are not numbers")
        with np.errstate(over="ignore", invalid="ignore"):
            a = np.asarray(data, dtype=np.float64).astype(v["dtype"]).reshape(shape)
        if kind == "f" and not np.all(np.isfinite(a)):
            raise bad(f"params.{k} holds NaN or infinite values (or values beyond {v['dtype']})")
        if kind == "i" and not np.array_equal(a.astype(np.float64), np.asarray(data, np.float64).reshape(shape)):
            raise bad(f"params.{k} holds values that are not {v['dtype']} integers")
        values[k] = a
    if dims.get("M", 1) < 1 or dims.get("N", 2) < 1 or dims.get("P", 1) < 1 or dims.get("K", 1) < 1:
        raise bad("an array is empty")
    if name == "temperature" and values["beta"] < 0:
        raise bad("params.beta (the inverse temperature) must be >= 0")
    if name == "histogram_binning":
        e, val = values["edges"], values["values"]
        if not (e[0] == 0.0 and e[-1] == 1.0 and np.all(np.diff(e) > 0)):
            raise bad("params.edges must increase strictly from 0 to 1")
        if not np.all((val >= 0) & (val <= 1)):
            raise bad("params.values must lie in [0, 1]")
    if name == "isotonic":
        x, y = values["x_knots"], values["y_knots"]
        if np.any(np.diff(x) < 0):
            raise bad("params.x_knots must be non-decreasing (knots in order)")
        if np.any(np.diff(y) < 0) or not np.all((y >= 0) & (y <= 1)):
            raise bad("params.y_knots must be non-decreasing probabilities in [0, 1]")
    if name in ("ilps", "neural_calibration"):
        knots = values["knots" if name == "ilps" else "eta.knots"]
        if knots.size < 2 or np.any(np.diff(knots) <= 0):
            raise bad("params knots must increase strictly (at least two)")
    if name == "neural_calibration":
        _validate_mlp(bad, values, mlp)
    if name in _SAG and not np.all(values["z_scale"] > 0):
        raise bad("params.z_scale must be positive")
    inp = spec.get("inputs")
    if not isinstance(inp, dict):
        raise bad("no inputs record")
    if "score" not in inp or "logit" not in inp:
        raise bad("inputs must have the entries score and logit (one of them null)")
    score, logit = inp["score"], inp["logit"]
    if not ((isinstance(score, str) and logit is None) or (isinstance(logit, str) and score is None)):
        raise bad("inputs must name exactly one of score or logit")
    for k in ("fields", "features"):
        if not isinstance(inp.get(k), list) or not all(isinstance(c, str) for c in inp[k]):
            raise bad(f"inputs.{k} must be a list of column names")
    if inp.get("level_text", LEVEL_TEXT) != LEVEL_TEXT:
        raise bad(f"inputs.level_text {inp['level_text']!r} is not one this calib_jax writes ({LEVEL_TEXT})")
    for key in ("other_share", "new_share"):
        share = inp.get(key)
        if share is not None and not (isinstance(share, dict) and sorted(share) == sorted(inp["fields"]) and all(
                isinstance(x, int | float) and not isinstance(x, bool) and 0.0 <= x <= 1.0 for x in share.values())):
            what = ("share of the fit's rows in __other__" if key == "other_share"
                    else "share of new rows expected at levels the fit did not keep")
            raise bad(f"inputs.{key} must give each field's {what}, in [0, 1]")
    if name == "neural_calibration":
        vocab = inp.get("vocabularies")
        if inp["features"] or not inp["fields"] or len(inp["fields"]) != len(values["vocab_sizes"]):
            raise bad("inputs must name one field per entry of params.vocab_sizes, and no features")
        if not isinstance(vocab, dict) or sorted(vocab) != sorted(inp["fields"]) or not all(
                isinstance(v, list) and v and "__other__" in v and all(isinstance(t, str) for t in v)
                for v in vocab.values()):
            raise bad("inputs.vocabularies must list each field's levels with __other__")
    if name in _SAG:
        vocab, mean, scale = inp.get("vocabularies"), inp.get("feature_mean"), inp.get("feature_scale")
        if not isinstance(vocab, dict) or sorted(vocab) != sorted(inp["fields"]) or not all(
                isinstance(v, list) and v and "__other__" in v and all(isinstance(t, str) for t in v)
                for v in vocab.values()):
            raise bad("inputs.vocabularies must list each field's levels with __other__")
        nf = len(inp["features"])
        for k, arr in (("feature_mean", mean), ("feature_scale", scale)):
            if (not isinstance(arr, list) or len(arr) != nf or not all(isinstance(x, int | float) for x in arr)
                    or not np.all(np.isfinite(np.asarray(arr, float)))):
                raise bad(f"inputs.{k} must hold {nf} finite numbers")
        if nf and not np.all(np.asarray(scale, float) > 0):
            raise bad("inputs.feature_scale must be positive")
        span = inp.get("feature_range")
        if span is not None and not (isinstance(span, list) and len(span) == nf and all(
                isinstance(r, list) and len(r) == 2 and all(isinstance(x, int | float) and not isinstance(x, bool)
                                                            and math.isfinite(x) for x in r) and r[0] <= r[1]
                for r in span)):
            raise bad(f"inputs.feature_range must hold {nf} pairs [min, max] of finite numbers")
        width = sum(len(v) for v in vocab.values()) + nf
        if width != dims.get("m"):
            raise bad(f"the embedding has {width} columns (levels + features) but params.W expects {dims.get('m')}")


def _validate_mlp(bad: Any, values: Mapping[str, np.ndarray], mlp: Mapping[str, Any]) -> None:
    """Neural Calibration's MLP entries must be exactly the leaves (names, shapes, finite
    floats) of the architecture its ``vocab_sizes``, ``embed_dim`` and ``hidden`` describe."""
    import jax
    from flax import traverse_util

    from calib_jax.calibrators.neural_calibration import FieldMLP

    vocab, embed, hidden = values["vocab_sizes"], int(values["embed_dim"]), values["hidden"]
    lim = _NC_LIMITS
    if not (1 <= vocab.size <= lim["fields"] and np.all((vocab >= 1) & (vocab <= lim["vocab"]))
            and 1 <= embed <= lim["embed_dim"] and hidden.size <= lim["hidden"]
            and np.all((hidden >= 1) & (hidden <= lim["width"]))):
        raise bad(f"params vocab_sizes / embed_dim / hidden describe no supported architecture (limits {lim})")
    model = FieldMLP(vocab_sizes=tuple(int(c) for c in vocab), embed_dim=embed,
                      hidden=tuple(int(h) for h in hidden))
    shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), np.zeros((1, vocab.size), np.int32)))
    expected = {f"mlp/{k}": tuple(v.shape) for k, v in traverse_util.flatten_dict(shapes, sep="/").items()}
    if set(mlp) != set(expected):
        raise bad(f"params must hold the MLP entries {sorted(expected)}, got {sorted(mlp)}")
    for k, shape in expected.items():
        v = mlp[k]
        if (not isinstance(v, dict) or set(v) != {"dtype", "shape", "data"} or v["dtype"] not in _KINDS["f"]
                or v["shape"] != list(shape) or not isinstance(v["data"], list)
                or len(v["data"]) != int(np.prod(shape)) or not all(isinstance(x, int | float) for x in v["data"])):
            raise bad(f"params.{k} must be a float array of shape {list(shape)}")
        with np.errstate(over="ignore", invalid="ignore"):
            if not np.all(np.isfinite(np.asarray(v["data"], np.float64).astype(v["dtype"]))):
                raise bad(f"params.{k} holds NaN or infinite values (or values beyond {v['dtype']})")


def check_record(spec: Any, where: str) -> None:
    """Check a parameter record built or edited in Python (:class:`calib_jax.logs.Fit`'s
    ``params``) as :func:`load` checks a file: ``ValueError`` naming ``where`` and the entry.

    Example:
      >>> check_record({"method": "platt"}, "Fit.params")
      Traceback (most recent call last):
      ...
      ValueError: Fit.params: not a calib-jax parameter file (no "format": "calib-jax-calibrator")
    """
    _validate(where, spec)


def load(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and validate a parameter file (:func:`_validate`: schema, method known, shapes,
    finite values, ordered knots and edges); the params are decoded under
    ``spec["decoded"]``."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no such parameter file")
    if p.stat().st_size > 1 << 30:
        raise ValueError(f"{p}: not a calib-jax parameter file (larger than 1 GiB)")
    try:
        spec = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise ValueError(f"{p}: not a calib-jax parameter file (not JSON: {e})") from None
    _validate(p, spec)
    spec["decoded"] = params_from_json(spec["registry_name"], spec["params_type"], spec["params"])
    return spec


def first_invalid(x: np.ndarray, *, unit_interval: bool, float32_range: bool = False) -> tuple[int, int] | None:
    r"""The values of a score, logit or feature column that :func:`predict_batch` must not be
    given: not finite; with ``unit_interval`` (scores) also outside [0, 1]; with
    ``float32_range`` (logits) also beyond float32's range, :math:`|x| > 3.4 \times 10^{38}`, in
    which the calibrators compute (such a value became inf in the cast).

    Args:
      x: the column's values, float.
      unit_interval: whether they are probabilities (scores), which must lie in [0, 1].
      float32_range: whether they must also be finite in float32.

    Returns:
      ``None`` when every value is valid, else their count and the index of the first, for
      the caller's message (``calib-jax apply`` counts data rows from 1,
      :meth:`calib_jax.logs.Fit.predict` indexes from 0).

    Example:
      >>> first_invalid(np.array([0.2, 1.5, np.nan]), unit_interval=True)
      (2, 1)
      >>> first_invalid(np.array([0.2, 1.5]), unit_interval=False) is None
      True
      >>> first_invalid(np.array([0.2, 1e300]), unit_interval=False, float32_range=True)
      (1, 1)
    """
    bad = ~(np.isfinite(x) & (x >= 0.0) & (x <= 1.0)) if unit_interval else ~np.isfinite(x)
    if float32_range:
        bad |= np.abs(np.where(np.isfinite(x), x, 0.0)) > FLOAT32_MAX
    return (int(bad.sum()), int(np.argmax(bad))) if bad.any() else None


def float32_logits(spec: Mapping[str, Any]) -> bool:
    """Whether the fit's logits go through float32 (:func:`predict_batch`): a fit on a logit column
    by any method but histogram binning, which bins the float64 score.

    Args:
      spec: the parameters' record (:func:`load`).

    Returns:
      ``True`` when a logit beyond float32's range must be refused (:func:`first_invalid`).

    Example:
      >>> float32_logits({"registry_name": "platt", "inputs": {"logit": "z"}})
      True
      >>> float32_logits({"registry_name": "histogram_binning", "inputs": {"logit": "z"}})
      False
    """
    return bool(spec["inputs"].get("logit")) and spec["registry_name"] != "histogram_binning"


def invalid_words(spec: Mapping[str, Any]) -> str:
    """What the refused values of a fit's input column are, in the words of the messages of
    ``apply`` and :meth:`calib_jax.logs.Fit.predict` (:func:`first_invalid`).

    Args:
      spec: the parameters' record (:func:`load`).

    Returns:
      The words, e.g. ``"missing, NaN or outside [0, 1]"`` for a fit on scores.

    Example:
      >>> invalid_words({"registry_name": "platt", "inputs": {"logit": None}})
      'missing, NaN or outside [0, 1]'
      >>> invalid_words({"registry_name": "histogram_binning", "inputs": {"logit": "z"}})
      'not finite'
    """
    if not spec["inputs"].get("logit"):
        return "missing, NaN or outside [0, 1]"
    return "not finite or " + BEYOND_FLOAT32 if float32_logits(spec) else "not finite"


def predict_batch(spec: Mapping[str, Any], x: np.ndarray, table: Any, tally: UnseenInputs | None = None) -> np.ndarray:
    """Calibrated probabilities for scores/logits ``x`` of the rows of ``table``: the
    calibrator's ``predict`` on the float32 logits, except histogram binning, which bins the
    float64 score by :func:`histogram_bin` (the rule of its fits from rows and from cells) and
    returns the score itself in a bin without fitting weight. ``tally``: an
    :class:`~calib_jax.logs.unseen.UnseenInputs` that counts the rows whose field levels the
    fit did not keep or whose features lie outside its range (the caller adds the rows)."""
    from calib_jax import calibrators
    from calib_jax.logs.validate import to_logit

    inp = spec["inputs"]
    if spec["registry_name"] == "histogram_binning":  # the float64 score's bin (histogram_bin)
        x64 = np.asarray(x, np.float64)
        if inp.get("logit"):
            with np.errstate(over="ignore"):  # e^-o = inf: p = 0, as the row checks compute it
                x64 = 1.0 / (1.0 + np.exp(-x64))
        return _histogram_predict(spec["decoded"], x64)
    o = np.asarray(x, np.float64) if inp.get("logit") else to_logit(np.asarray(x, np.float64))
    cal = calibrators.get(spec["registry_name"])
    context: dict[str, Any] | None = None
    legacy = legacy_levels(inp)
    if "embedding" in cal.needs:
        context = {"embedding": _embedding(table, inp["fields"], inp["features"], inp["vocabularies"],
                                           np.asarray(inp["feature_mean"]), np.asarray(inp["feature_scale"]),
                                           legacy, tally)}
    elif "fields" in cal.needs:
        context = {"fields": _field_codes(table, inp["fields"], inp["vocabularies"], legacy, tally)}
    return np.asarray(cal.predict(spec["decoded"], o.astype(np.float32), context=context))
