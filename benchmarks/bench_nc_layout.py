"""Why Neural Calibration's ten D_val heads fitted as one ``vmap``-ed program are slower than the
same heads fitted one by one on XLA:CPU: the layouts of the batched program.

Neural Calibration (Pan, Ao, Tang, Lu, Liu, Xiao and He, "Field-aware Calibration", WWW 2020,
eq. 7-8 and 11) fits an ILPS map of the logit plus a field MLP: one embedding table per field,
the embeddings concatenated, a dense layer and a linear output. The comparison study fits ten
heads of it on bootstrap draws of D_val, one by one (``nc_heads="sequential"``, the default) or
as one vmapped program (``"batched"``; ``neural_calibration.fit_many(batched=True)``). On the
Intel Xeon with AVX-512 the batched program is the slower one (``benchmarks/results/heads.md``).

This benchmark shows where the time goes. It compiles one training program for a single head
and one for ``--heads`` heads under ``vmap`` (``neural_calibration._train``, ``--steps`` AdamW
steps on the world's D_val), counts in each optimized program the transposes of arrays of at
least (D_val rows x embedding width) elements (``transposing_copies``), times one
such copy of each shape found, and times both programs interleaved in one process (best of
``--rounds``). Under ``vmap`` each field's lookup comes out rows first, (rows, heads, 8), and the
batched dense layer takes its operands heads first, so XLA:CPU moves the embeddings between
the two layouts every step.

    python -m benchmarks.bench_nc_layout [--dataset simulator_adauction] [--heads 10] [--steps 50] [--rounds 3]

Writes benchmarks/results/nc_layout.{csv,md}.
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import re
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"

#: an HLO instruction that moves data between layouts: its result type and opcode
_MOVE = re.compile(r"=\s*(f32|s32|bf16|f64)\[([0-9,]*)\]\{[0-9,]*\}\s+(transpose|copy)\(")


def transposing_copies(hlo_text: str, min_elements: int) -> collections.Counter[tuple[int, ...]]:
    """The shapes of the ``transpose`` instructions of an optimized HLO module with at least
    ``min_elements`` elements, counted. Each is counted once, whether the ``copy`` that follows
    it or the fusion that holds it writes the moved array.

    Args:
      hlo_text: an optimized module's text (``jax.jit(f).lower(...).compile().as_text()``).
      min_elements: the smallest array counted, a non-negative int.

    Returns:
      A ``Counter`` from shape (a tuple of ints) to how often the module transposes an array of it.

    Example:
      >>> text = "%t = f32[10,4096,8]{1,0,2} transpose(%p), dimensions={1,0,2}\\n%c = f32[3]{0} copy(%q)"
      >>> transposing_copies(text, 1000)
      Counter({(10, 4096, 8): 1})
    """
    out: collections.Counter[tuple[int, ...]] = collections.Counter()
    for match in _MOVE.finditer(hlo_text):
        if match.group(3) != "transpose":
            continue
        shape = tuple(int(d) for d in match.group(2).split(",") if d)
        if math.prod(shape) >= min_elements:
            out[shape] += 1
    return out


def _copy_seconds(shape: tuple[int, ...], rounds: int) -> float:
    """Best of ``rounds`` calls of one compiled transposing copy whose result has ``shape``, from
    an array with the first two axes of ``shape`` swapped (as the batched program's copies move
    the rows axis and the heads axis)."""
    perm = (1, 0, *range(2, len(shape)))
    from benchmarks.bench_vrsag_floor import _best

    x = jnp.asarray(np.random.default_rng(0).normal(size=tuple(shape[i] for i in perm)).astype(np.float32))
    return _best(jax.jit(lambda a: jnp.transpose(a, perm) + 0.0), x, repeats=rounds)  # + 0.0: a materialised result


def _optimized(fn: Any, *args: Any) -> str:
    """The optimized HLO text of jitted ``fn`` at ``args``."""
    text = fn.lower(*args).compile().as_text()
    if text is None:
        raise RuntimeError("the backend gave no text of the compiled program")
    return str(text)


def measure(dataset: str, heads: int, steps: int, rounds: int) -> dict[str, Any]:
    """Both programs on ``dataset``'s D_val (the study's architecture: 100 knots, 8-dimensional
    embeddings, one hidden layer of 32), each head on its own bootstrap draw as the study draws
    them: seconds a step, the transposing copies each optimized program holds, and the seconds
    of one copy of each shape. The draw weights both the gradient rows and the stopping rows
    (the study holds a fifth out for stopping; one forward pass gives both losses, so a step
    costs the same either way)."""
    from benchmarks.bench_nc_loop import _interleaved, d_val_problem, train_kwargs
    from calib_jax.calibrators import ilps
    from calib_jax.calibrators import neural_calibration as ncal
    from experiments import compare_calibrators as cc

    _, x, o, y, model = d_val_problem(dataset)
    n = o.shape[0]
    key = jax.random.key(0)
    ws = jnp.stack([jnp.asarray(cc._draw(n, jax.random.fold_in(key, h), "bootstrap"), jnp.float32)
                    for h in range(heads)])
    eta0 = ilps.fit(o, y, n_knots=100)
    mlp0 = model.init(jax.random.fold_in(key, 2), x[:1])
    kw = train_kwargs(eta0, o, y, x, model, steps)
    one = jax.jit(lambda b, m, w: ncal._train(b, mlp0=m, v=w, v_stop=w, **kw)[0])
    many = jax.jit(jax.vmap(lambda b, m, w: ncal._train(b, mlp0=m, v=w, v_stop=w, **kw)[0]))
    b_many = jnp.stack([eta0.values] * heads)
    m_many = jax.tree.map(lambda a: jnp.stack([a] * heads), mlp0)
    smallest = n * model.embed_dim  # one D_val row per embedding coordinate: the lookups' size
    copies = {"one head": transposing_copies(_optimized(one, eta0.values, mlp0, ws[0]), smallest),
              f"{heads} heads under vmap": transposing_copies(_optimized(many, b_many, m_many, ws), smallest)}
    calls = {"one head at a time": lambda: [one(eta0.values, mlp0, w) for w in ws],
             f"{heads} heads under vmap": lambda: many(b_many, m_many, ws)}
    _, _, times = _interleaved(calls, rounds)
    shapes = sorted({s for c in copies.values() for s in c}, key=math.prod, reverse=True)
    return {"dataset": dataset, "rows": n, "heads": heads, "steps": steps, "copies": copies,
            "step_s": {name: min(ts) / steps for name, ts in times.items()},
            "copy_s": {s: _copy_seconds(s, 5 * rounds) for s in shapes}}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="simulator_adauction")
    ap.add_argument("--heads", type=int, default=10)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(RESULTS / "nc_layout"))
    args = ap.parse_args(argv)
    from benchmarks.machine_speed import reference_seconds
    from benchmarks.pages import conditions, write_page

    warnings.simplefilter("ignore")
    load_start = os.getloadavg()[0]
    t0 = time.perf_counter()
    m = measure(args.dataset, args.heads, args.steps, args.rounds)
    ref = reference_seconds()
    seq, bat = m["step_s"].values()
    batched = m["copies"][f"{m['heads']} heads under vmap"]
    copy_ms = 1000 * sum(k * m["copy_s"][s] for s, k in batched.items())
    header = ["program", "shape", "transposes_per_program", "one_copy_ms", "step_ms"]
    rows: list[list[Any]] = [[name, "", "", "", 1000 * secs] for name, secs in m["step_s"].items()]
    rows += [[name, " x ".join(map(str, s)), k, 1000 * m["copy_s"][s], ""]
             for name, c in m["copies"].items() for s, k in sorted(c.items())]
    text = (f"# Neural Calibration's heads under vmap: the layouts XLA:CPU moves between\n\n"
            f"`{m['dataset']}`, D_val {m['rows']:,} rows, {m['heads']} heads of {m['steps']} AdamW steps, each on "
            f"its own bootstrap draw; both ways interleaved in one process over {args.rounds} rounds (best kept). "
            f"{conditions(t0, load_start, ref)}\n\n"
            f"One step of {m['heads']} heads: {1000 * seq:.0f} ms one head at a time, {1000 * bat:.0f} ms under vmap "
            f"(one by one / batched **{seq / bat:.2f}x**). The batched program holds {sum(batched.values())} "
            f"transposing copies of arrays of at least {m['rows'] * 8:,} elements, the single head's "
            f"{sum(m['copies']['one head'].values())}. Each shape's copy timed alone (rows below), the batched "
            f"program's copies take {copy_ms:.0f} ms of the {1000 * (bat - seq):.0f} ms it adds a step.\n\n")
    write_page(Path(args.out), text, header, rows)
    return m


if __name__ == "__main__":
    main()
