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

from calib_jax.data.simulator._auction import _check_exposure
from calib_jax.data.simulator._config import SimulatorConfig, config_hash
from calib_jax.data.simulator._log import Impressions, _concat, iter_chunks
from calib_jax.data.simulator._world import _world_and_request_keys, make_world
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
    raises ``ValueError`` rather than mixing runs.  Memory stays at one chunk.

    Returns:
      The manifest path.
    """
    _check_exposure(exposure)
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
        old = json.loads(manifest_path.read_text())
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
    world = make_world(config, _world_and_request_keys(key)[0])
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
    """Concatenate the chunks written by :func:`simulate_to_disk` (optionally a slice)."""
    out = Path(out_dir)
    manifest_path = out / "manifest.json"
    if not manifest_path.exists():
        raise FileNotFoundError(f"no manifest.json in {out}: run simulate_to_disk first")
    manifest = json.loads(manifest_path.read_text())
    entries = manifest["chunks"][chunks] if chunks is not None else manifest["chunks"]
    parts = []
    for e in entries:
        with np.load(out / e["file"]) as z:
            parts.append(Impressions(*[z[f] for f in Impressions._fields]))
    if not parts:
        raise ValueError(f"`out_dir` {out} holds no finished chunk")
    return _concat(parts)
