"""Streaming the simulation to ``.npz`` chunk files with a resumable manifest, and loading
them back.

Private module: the public surface is listed in :mod:`calib_jax.data.simulator`.
"""

from __future__ import annotations

import io as _io
import json
import os
from pathlib import Path
from typing import Any

import jax
import numpy as np

from calib_jax._src.validation import check_key
from calib_jax.data.simulator._auction import check_exposure
from calib_jax.data.simulator._config import SimulatorConfig, check_config, config_hash
from calib_jax.data.simulator._log import Impressions, concat_impressions, iter_chunks
from calib_jax.data.simulator._world import make_world, world_and_request_keys
from calib_jax.io import atomic_write_bytes, write_json


def _npz_bytes(**arrays: np.ndarray) -> bytes:
    buf = _io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]
    return buf.getvalue()


def simulate_to_disk(config: SimulatorConfig, key: jax.Array, out_dir: str | os.PathLike[str],
                     *, exposure: str = "auction", resume: bool = True,
                     progress: bool = False) -> Path:
    """Stream the simulation to ``out_dir/chunk_XXXXX.npz`` plus ``manifest.json``.

    Each chunk file holds the impressions of one chunk and the pacing state after it, and
    is written atomically before the manifest is updated, so an interrupted run resumes
    from the last finished chunk (``resume=True``) and produces the same files as an
    uninterrupted one.  A manifest written for another configuration, key or exposure
    raises ``ValueError`` rather than mixing runs.  Memory stays at one chunk.  Host code
    (file I/O around jitted chunks); not jit-able.

    Args:
      config: the simulator configuration (all ``n_chunks`` chunks are written).
      key: a JAX PRNG key; the files hold the same impressions as ``simulate(config, key)``.
      out_dir: the output directory (created if missing).
      exposure: ``"auction"`` or ``"random"``, as in :func:`simulate`; another value raises
        ``ValueError``.
      resume: keep the chunks an earlier run with the same config, key and exposure finished
        and simulate only the rest; ``False`` starts over and overwrites them.
      progress: show a ``tqdm`` progress bar (needs ``tqdm``).

    Returns:
      The manifest path, ``out_dir/manifest.json``: JSON with the ``config_hash``, the
      ``config``, ``exposure``, ``key_data``, ``n_chunks``, one ``{"file", "n", "clicks"}``
      entry per finished chunk and ``complete`` (true once every chunk is written).

    Example:
      >>> import json, tempfile
      >>> import jax
      >>> from calib_jax.data.simulator import simulate_to_disk, tiny_config
      >>> with tempfile.TemporaryDirectory() as d:
      ...     manifest = simulate_to_disk(tiny_config(n_chunks=2), jax.random.key(0), d)
      ...     files = sorted(f.name for f in manifest.parent.iterdir())
      ...     complete = json.loads(manifest.read_text())["complete"]
      >>> files, complete
      (['chunk_00000.npz', 'chunk_00001.npz', 'manifest.json'], True)
    """
    check_exposure(exposure)
    check_config(config)
    key = check_key(key)  # before the folder is made: a bad key left an empty out_dir behind
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "manifest.json"
    key_data = np.asarray(jax.random.key_data(key)).ravel().tolist()
    ident = config_hash(config, extra=[key_data, exposure])
    manifest: dict[str, Any] = {
        "config_hash": ident, "config": config.to_dict(), "exposure": exposure,
        "key_data": key_data, "n_chunks": config.n_chunks, "chunks": [], "complete": False,
    }
    start, pacing = 0, None
    if manifest_path.exists() and resume:
        old = _read_manifest(manifest_path)
        if old.get("config_hash") != ident:
            raise ValueError(
                f"`out_dir` {out} holds a run with a different config/key/exposure "
                f"(manifest hash {old.get('config_hash')} != {ident}); use another directory"
            )
        manifest = old
        start = len(manifest["chunks"])
        if start:
            with np.load(out / manifest["chunks"][-1]["file"]) as z:
                pacing = z["pacing"]
    world = make_world(config, world_and_request_keys(key)[0])
    it = iter_chunks(config, key, exposure=exposure, start=start, pacing=pacing, world=world)
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, total=config.n_chunks - start, desc="simulate")
    for i, imp, pac in it:
        name = f"chunk_{i:05d}.npz"
        atomic_write_bytes(out / name, _npz_bytes(pacing=pac, **imp._asdict()))
        manifest["chunks"].append({"file": name, "n": len(imp), "clicks": int(imp.click.sum())})
        manifest["complete"] = len(manifest["chunks"]) == config.n_chunks
        write_json(manifest_path, manifest)
    if not manifest["complete"]:
        manifest["complete"] = len(manifest["chunks"]) == config.n_chunks
        write_json(manifest_path, manifest)
    return manifest_path


def load_from_disk(out_dir: str | os.PathLike[str], *, chunks: slice | None = None) -> Impressions:
    """Concatenate the chunks written by :func:`simulate_to_disk` (optionally a slice).

    Reads the finished chunks listed in the manifest (host code; not jit-able), so it also
    works on a run that is still going or was interrupted.

    Args:
      out_dir: a directory written by :func:`simulate_to_disk`; without ``manifest.json`` it
        raises ``FileNotFoundError``.
      chunks: optional ``slice`` of the finished chunks to load (e.g. ``slice(0, 2)``); by
        default all of them. Selecting no chunk raises ``ValueError``.

    Returns:
      :class:`Impressions`: the selected chunks' rows in chunk order (with the full log this
      equals ``simulate(config, key)`` for the run's config and key).

    Example:
      >>> import tempfile
      >>> import jax
      >>> from calib_jax.data.simulator import load_from_disk, simulate_to_disk, tiny_config
      >>> with tempfile.TemporaryDirectory() as d:
      ...     _ = simulate_to_disk(tiny_config(n_chunks=2), jax.random.key(0), d)
      ...     imp, first = load_from_disk(d), load_from_disk(d, chunks=slice(0, 1))
      >>> len(imp) > len(first), int(first.request.max())  # chunk 0: requests 0..4095
      (True, 4095)
    """
    out = Path(out_dir)
    manifest_path = out / "manifest.json"
    if not manifest_path.exists():
        raise FileNotFoundError(f"no manifest.json in {out}: run simulate_to_disk first")
    manifest = _read_manifest(manifest_path)
    if chunks is not None and not isinstance(chunks, slice):  # an int or a list failed indexing a list
        raise ValueError(f"`chunks` must be a slice of the finished chunks (e.g. slice(0, 2)) or None, got {chunks!r}")
    entries = manifest["chunks"][chunks] if chunks is not None else manifest["chunks"]
    parts = []
    for e in entries:
        with np.load(out / e["file"]) as z:
            parts.append(Impressions(*[z[f] for f in Impressions._fields]))
    if not parts:
        raise ValueError(f"`out_dir` {out} holds no finished chunk")
    return concat_impressions(parts)


def _read_manifest(path: Path) -> dict[str, Any]:
    """A run's manifest, or ``ValueError`` naming the file when it is not one (a corrupt file
    raised a bare ``JSONDecodeError``)."""
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not a simulate_to_disk manifest ({e})") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("chunks"), list):
        raise ValueError(f"{path}: not a simulate_to_disk manifest (no list of chunks)")
    return manifest
