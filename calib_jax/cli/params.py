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


def load(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check a parameter file; the params are decoded under ``spec["decoded"]``."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such parameter file")
    try:
        spec = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{p}: not a calib-jax parameter file (not JSON: {e})") from None
    if not isinstance(spec, dict) or spec.get("format") != FORMAT:
        raise ValueError(f"{p}: not a calib-jax parameter file (no \"format\": \"{FORMAT}\")")
    if spec.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{p}: parameter file format version {spec.get('format_version')!r} is not supported "
                         f"(this calib_jax reads version {FORMAT_VERSION})")
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
