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
                 "feature_mean": [...], "feature_scale": [...],
                 "source": "train.csv", "format": "csv", "rows": 12345, "dropped": {}},
      "calib_jax_version": "0.1.0",
      "created_utc": "..."
    }

Arrays are stored exactly (float32 values round-trip through JSON's shortest decimal
form), so ``apply`` reproduces ``predict(fit(...))`` bit for bit.  Files with another
``format_version`` are refused with a clear message.

SAG and VR-SAG group rows by an embedding; here the embedding is built from the log: one
one-hot block per ``--field`` column (its ``--max-levels`` most frequent values, the rest in
an ``__other__`` column) and the standardised ``--feature`` columns.  The vocabularies,
means and scales are saved so ``apply`` builds the same embedding on any log.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["METHODS", "FORMAT", "FORMAT_VERSION", "fit_from_table", "save", "load", "predict_batch",
           "params_to_json", "params_from_json"]

FORMAT = "calib-jax-calibrator"
FORMAT_VERSION = 1

#: ``--method`` -> calibrator registry name.
METHODS = {"temperature": "temperature", "platt": "platt", "beta": "beta", "histogram": "histogram_binning",
           "isotonic": "isotonic", "sag": "sag_ts", "vrsag": "vrsag_ts"}
_MODULE = {"sag_ts": "sag", "vrsag_ts": "sag", "histogram_binning": "histogram"}


def params_to_json(params: Any) -> dict[str, Any]:
    """A params pytree (NamedTuple or dataclass) as JSON-able fields."""
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
    return cls(**kw)


def _embedding(table: Any, fields: Sequence[str], features: Sequence[str], vocab: Mapping[str, Sequence[str]],
               mean: np.ndarray, scale: np.ndarray) -> np.ndarray:
    n = table.num_rows
    blocks = []
    for f in fields:
        vals = np.asarray(table.column(f).fill_null("__missing__").to_numpy(zero_copy_only=False), dtype=object)
        index = {v: i for i, v in enumerate(vocab[f])}
        other = index["__other__"]
        codes = np.fromiter((index.get(str(x), other) for x in vals), np.int64, count=n)
        oh = np.zeros((n, len(index)), np.float32)
        oh[np.arange(n), codes] = 1.0
        blocks.append(oh)
    if features:
        x = np.stack([np.asarray(table.column(c).to_numpy(zero_copy_only=False), np.float64) for c in features], 1)
        blocks.append(((x - mean) / scale).astype(np.float32))
    return np.concatenate(blocks, axis=1)


def fit_from_table(method: str, arrays: Mapping[str, np.ndarray], table: Any, *, fields: Sequence[str] = (),
                   features: Sequence[str] = (), max_levels: int = 50, seed: int = 0,
                   hyper: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Fit ``method`` on the valid rows (``arrays`` o, y, v; ``table`` the same rows)."""
    import jax

    from calib_jax import calibrators

    if method not in METHODS:
        raise ValueError(f"unknown --method {method!r}; choose one of {', '.join(METHODS)}")
    name = METHODS[method]
    cal = calibrators.get(name)
    o, y, v = arrays["o"], arrays["y"], arrays["v"]
    weights = None if np.all(v == 1.0) else v
    inputs: dict[str, Any] = {"fields": [], "features": [], "vocabularies": {}, "feature_mean": [],
                              "feature_scale": []}
    context = None
    if "embedding" in cal.needs:
        if not fields and not features:
            raise ValueError(f"--method {method} groups rows by an embedding: give --field COL and/or --feature COL")
        vocab = {}
        for f in fields:
            vals, cnt = np.unique(np.asarray(table.column(f).fill_null("__missing__").to_numpy(zero_copy_only=False),
                                             dtype=str), return_counts=True)
            top = vals[np.argsort(-cnt, kind="stable")[:max_levels]]
            vocab[f] = [str(t) for t in top if t != "__other__"] + ["__other__"]
        mean = np.zeros(len(features))
        scale = np.ones(len(features))
        if features:
            x = np.stack([np.asarray(table.column(c).to_numpy(zero_copy_only=False), np.float64) for c in features], 1)
            mean, scale = x.mean(axis=0), x.std(axis=0)
            scale = np.where(scale > 0, scale, 1.0)
        inputs.update(fields=list(fields), features=list(features), vocabularies=vocab,
                      feature_mean=mean.tolist(), feature_scale=scale.tolist())
        context = {"embedding": _embedding(table, fields, features, vocab, mean, scale)}
    params = cal.fit(o.astype(np.float32), y.astype(np.float32),
                     weights=None if weights is None else weights.astype(np.float32),
                     key=jax.random.key(seed), context=context,
                     **(dict(hyper) if hyper and "embedding" in cal.needs else {}))
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "method": method, "registry_name": name,
            "params_type": type(params).__name__, "params": params_to_json(params), "inputs": inputs,
            "calib_jax_version": _version(),
            "created_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")}


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
       for name in ("sag_ts", "vrsag_ts")},
}
_STRINGS = {"isotonic": {"x_space": ("logit", "prob"), "interpolation": ("linear", "step")}}
_MAX_PARAM_VALUES = 10_000_000
_KINDS = {"f": ("float32", "float64"), "i": ("int32", "int64"), "b": ("bool",)}


def _validate(p: Path, spec: Any) -> None:
    """Check a parameter file's structure and values before anything is computed; raise
    ``ValueError`` naming the file and the entry."""
    def bad(why: str) -> ValueError:
        return ValueError(f"{p}: invalid calib-jax parameter file: {why}")

    if not isinstance(spec, dict) or spec.get("format") != FORMAT:
        raise ValueError(f"{p}: not a calib-jax parameter file (no \"format\": \"{FORMAT}\")")
    if spec.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{p}: parameter file format version {spec.get('format_version')!r} is not supported "
                         f"(this calib_jax reads version {FORMAT_VERSION})")
    method = spec.get("method")
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
    if name in ("sag_ts", "vrsag_ts") and not np.all(values["z_scale"] > 0):
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
    if name in ("sag_ts", "vrsag_ts"):
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
        width = sum(len(v) for v in vocab.values()) + nf
        if width != dims.get("m"):
            raise bad(f"the embedding has {width} columns (levels + features) but params.W expects {dims.get('m')}")


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


def predict_batch(spec: Mapping[str, Any], x: np.ndarray, table: Any) -> np.ndarray:
    """Calibrated probabilities for scores/logits ``x`` of the rows of ``table``."""
    from calib_jax import calibrators
    from calib_jax.cli.validate import to_logit

    inp = spec["inputs"]
    o = np.asarray(x, np.float64) if inp.get("logit") else to_logit(np.asarray(x, np.float64))
    cal = calibrators.get(spec["registry_name"])
    context = None
    if "embedding" in cal.needs:
        context = {"embedding": _embedding(table, inp["fields"], inp["features"], inp["vocabularies"],
                                           np.asarray(inp["feature_mean"]), np.asarray(inp["feature_scale"]))}
    return np.asarray(cal.predict(spec["decoded"], o.astype(np.float32), context=context))
