"""Where one evaluation of the VR-SAG lock-step objective spends its time, compiled op by
compiled op: the measurement behind the gap between ``bench_vrsag_floor``'s floor and the
fit.

``bench_vrsag_floor`` sets an evaluation (value and gradient of eq. 11 of "Calibration is
Grouping", anonymous authors, under review, for all P partitions at once) beside its floor:
the two head products plus (2K + 2) n P transcendentals, each timed alone. This benchmark
says what the rest of the evaluation's time is. It compiles the same batched evaluation
(``calib_jax.calibrators.sag._value_and_grad_all`` under ``vmap``, the rows in blocks),
runs it ``calls`` times under ``jax.profiler.trace`` and sums, per compiled op, the time
the profiler's trace gives it (the XLA:CPU runtime records one event per op it executes). Each
op is put in one class read from its HLO (XLA:CPU only: on an H200 the GPU's kernels did not
map onto these classes, and the benchmark refuses other backends):

* ``head products``: the ops that compute a ``dot`` (the logits and the head's gradient);
* ``elementwise with transcendentals``: fusions that compute ``exp``, ``log`` or the
  logistic function (the softmax, the sigmoids, the log loss, and whatever arithmetic XLA
  fused with them);
* ``row sums``: fusions whose result is a ``reduce`` without a transcendental (the sums over
  rows carried from block to block);
* ``elementwise arithmetic``: other fusions that compute on floating arrays (multiply, add,
  divide, select...);
* ``copies``: ops that only move data: the slices of the embedding and of the kept softmax
  weights, their writes, the buffers' fills (and the loops' counters).

The trace costs time of its own, so the page gives each class's share of the traced ops'
total and, beside it, the evaluation's untraced time (best of five); shares times the
untraced time estimate each class's seconds. The ten most expensive ops are listed with the
source line XLA names for each.

Two programs are profiled at each size (the ``program`` column): ``evaluation``, the batched
evaluation called on its own, and ``fit``, the lock-step fit through ``--fit-steps``
iterations (stopping tolerances at zero), its times divided by its batched evaluations. They
differ in what a call pays besides the evaluation: called alone, an evaluation allocates the
kept (P, K, n) softmax weights afresh and fills them in every call (at 10^6 rows on the AMD
machine, 2026-12-05, the buffer's fills were a third of the traced time), where the fit's
compiled loop reuses one buffer; and the fit adds the L-BFGS bookkeeping between evaluations
(ops on the (P, m, K) parameters, outside ``sag.py``). The fit's rows are what a fit pays.

    python -m benchmarks.bench_vrsag_profile [--n 100000 1000000] [--fit-steps 20]

Writes benchmarks/results/vrsag_profile.{csv,md}.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax

RESULTS = Path(__file__).resolve().parent / "results"
CLASSES = ("head products", "elementwise with transcendentals", "row sums", "elementwise arithmetic", "copies")
#: opcodes that hold other ops (their events overlap their contents' events) or do nothing
_CONTAINERS = {"while", "conditional", "call", "tuple", "get-tuple-element", "parameter", "constant", "bitcast",
               "after-all", "opt-barrier"}
_ARITHMETIC = ("add(", "subtract(", "multiply(", "divide(", "select(", "compare(", "maximum(", "minimum(",
               "negate(", "sqrt(", "rsqrt(", "power(", "abs(")
_TRANSCENDENTAL = ("exponential(", "log(", "logistic(", "exponential-minus-one(", "log-plus-one(", "tanh(")


def _array_arithmetic(text: str) -> bool:
    """Whether HLO ``text`` does floating-point arithmetic on arrays: an arithmetic op whose
    result is a floating array with at least one dimension. The index arithmetic of a dynamic
    slice (integer scalars) and scalar constants do not count, so a slice stays a copy."""
    for line in text.splitlines():
        parsed = _instruction(line)
        if parsed and f"{parsed[1]}(" in _ARITHMETIC and re.search(r"= (?:f16|bf16|f32|f64)\[\d", line):
            return True
    return False


def _instruction(line: str) -> tuple[str, str, str] | None:
    """``(name, opcode, rest)`` of one HLO instruction line, or None for other lines.

    Example:
      >>> _instruction('  %f.1 = f32[3]{0} fusion(%a), kind=kLoop, calls=%c')[:2]
      ('f.1', 'fusion')
      >>> _instruction('  ROOT %t = (f32[], s32[]) tuple(%a, %b)')[:2]
      ('t', 'tuple')
    """
    m = re.match(r"\s*(?:ROOT\s+)?%([\w.\-]+) = (.*)$", line)
    if m is None:
        return None
    name, rest = m.groups()
    if rest.startswith("("):  # a tuple shape: skip to its closing parenthesis
        depth = 0
        for i, ch in enumerate(rest):
            depth += (ch == "(") - (ch == ")")
            if depth == 0:
                rest = rest[i + 1:].lstrip()
                break
    else:
        rest = rest.split(" ", 1)[1] if " " in rest else ""
    op = re.match(r"([\w\-]+)\(", rest)
    return (name, op.group(1), rest) if op else None


def _frames(hlo_text: str) -> dict[str, str]:
    """``stack_frame_id -> "file.py:line function"`` from the tables XLA prints after a
    module's HLO (``FileNames``, ``FunctionNames``, ``FileLocations``, ``StackFrames``)."""
    tables: dict[str, dict[str, str]] = {}
    current = None
    for line in hlo_text.splitlines():
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            current = tables.setdefault(line, {})
        elif current is not None and re.match(r"\d+ ", line):
            key, value = line.split(" ", 1)
            current[key] = value.strip().strip('"')
        else:
            current = None
    files, functions = tables.get("FileNames", {}), tables.get("FunctionNames", {})
    locations = {}
    for key, value in tables.get("FileLocations", {}).items():
        fields = dict(re.findall(r"(\w+)=(\d+)", value))
        function = functions.get(fields.get("function_name_id", ""), "?").replace("<locals>.", "")
        locations[key] = (f"{os.path.basename(files.get(fields.get('file_name_id', ''), '?'))}:"
                          f"{fields.get('line', '?')} {function}")
    return {key: locations.get(dict(re.findall(r"(\w+)=(\d+)", value)).get("file_location_id", ""), "")
            for key, value in tables.get("StackFrames", {}).items()}


def classify(hlo_text: str) -> dict[str, tuple[str, str]]:
    """Every leaf op of a compiled module's HLO text: ``name -> (class, source)``, the class
    one of :data:`CLASSES` (read from the op and the computation it calls, see the module's
    docstring) and its source: the JAX operation of XLA's ``op_name`` metadata, and the
    source line where XLA records one.

    Example:
      >>> hlo = '''%fc (p: f32[4]) -> f32[4] {
      ...   %p = f32[4]{0} parameter(0)
      ...   ROOT %e = f32[4]{0} exponential(%p)
      ... }
      ...
      ... ENTRY %main (x: f32[4]) -> f32[4] {
      ...   %x = f32[4]{0} parameter(0)
      ...   ROOT %f = f32[4]{0} fusion(%x), kind=kLoop, calls=%fc, metadata={op_name="jit(g)/exp"}
      ... }'''
      >>> classify(hlo)
      {'f': ('elementwise with transcendentals', 'exp')}
    """
    bodies: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in hlo_text.splitlines():
        head = re.match(r"(?:ENTRY\s+)?%([\w.\-]+) .*\{\s*$", line)
        if head and not line.startswith(" "):
            current = bodies.setdefault(head.group(1), [])
        elif line.startswith("}"):
            current = None
        elif current is not None:
            current.append(line)

    def body_text(comp: str, seen: frozenset[str] = frozenset()) -> str:
        """The ops of a computation and of the computations it calls."""
        lines = bodies.get(comp, [])
        text = "\n".join(lines)
        for callee in re.findall(r"(?:calls|to_apply)=%([\w.\-]+)", text):
            if callee not in seen:
                text += "\n" + body_text(callee, seen | {comp})
        return text

    frames = _frames(hlo_text)
    fused = set(re.findall(r"(?:calls|to_apply)=%([\w.\-]+)", hlo_text))  # run inside their caller
    out: dict[str, tuple[str, str]] = {}
    for comp, lines in bodies.items():
        if comp in fused:
            continue
        for line in lines:
            parsed = _instruction(line)
            if parsed is None:
                continue
            name, opcode, rest = parsed
            if opcode in _CONTAINERS:
                continue
            called = re.search(r"calls=%([\w.\-]+)", rest)
            text = (body_text(called.group(1)) if called else "") + "\n" + line
            source = re.search(r'op_name="([^"]*)"', rest)
            if " dot(" in text:
                cls = "head products"
            elif any(t in text for t in _TRANSCENDENTAL):
                cls = "elementwise with transcendentals"
            elif " reduce(" in text or opcode == "reduce":
                cls = "row sums"
            elif _array_arithmetic(text):
                cls = "elementwise arithmetic"
            else:
                cls = "copies"
            frame = re.search(r"stack_frame_id=(\d+)", rest)
            where = frames.get(frame.group(1), "") if frame else ""
            what = source.group(1).split("/")[-1] if source else ""
            out[name] = (cls, f"{what} ({where})" if where else what)
    return out


def op_seconds(trace_json_gz: Path, names: Sequence[str], calls: int) -> dict[str, float]:
    """Seconds per call of each op in ``names``: the summed durations of the trace's complete
    events of that name (``ph == "X"``, microseconds) over ``calls``. Ops absent from the
    trace get 0."""
    with gzip.open(trace_json_gz, "rt") as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    wanted = set(names)
    total: dict[str, float] = defaultdict(float)
    for e in events:
        if e.get("ph") == "X" and e.get("name") in wanted:
            total[e["name"]] += float(e.get("dur", 0.0))
    return {name: total.get(name, 0.0) * 1e-6 / calls for name in names}


def _traced_ops(program: Any, arg: Any, calls: int) -> tuple[dict[str, tuple[str, str]], dict[str, float]]:
    """The classified ops of a compiled ``program`` (:func:`classify`) and each op's traced
    seconds per call over ``calls`` calls of ``program(arg)`` under ``jax.profiler.trace``."""
    hlo = program.lower(arg).compile().as_text()
    if not hlo:
        raise RuntimeError("the compiled program gives no HLO text to classify its ops by")
    ops = classify(hlo)
    with tempfile.TemporaryDirectory() as tmp:
        with jax.profiler.trace(tmp, create_perfetto_trace=True):
            for _ in range(calls):
                jax.block_until_ready(program(arg))
        found = sorted(Path(tmp).rglob("*.trace.json.gz"))
        if not found:
            raise RuntimeError(f"jax.profiler.trace wrote no trace under {tmp}")
        seconds = op_seconds(found[0], list(ops), calls)
    if sum(seconds.values()) <= 0:
        raise RuntimeError("the profiler's trace holds none of the compiled ops (no per-op events on this backend)")
    return ops, seconds


#: the programs profiled: one evaluation called alone, and the evaluations inside a fit
PROGRAMS = ("evaluation", "fit")


def profile_one(n: int, m: int, P: int, K: int, *, calls: int = 3, fit_steps: int = 20
                ) -> tuple[list[list[Any]], list[list[Any]]]:
    """The class rows ``[n, program, class, share, estimated_s, traced_ms_per_call, config]``
    and the top-op rows ``[n, program, op, class, traced_ms_per_call, source]`` of one size.

    ``program`` is ``"evaluation"`` (one lock-step evaluation called on its own, ``calls``
    times) or ``"fit"`` (the lock-step fit through ``fit_steps`` iterations, its stopping
    tolerances at zero, traced once; its times are per batched evaluation, the fit's seconds
    over its passes, so they include the L-BFGS bookkeeping between evaluations). The two
    differ in what a call pays for its buffers: an evaluation called alone allocates and fills
    its kept (P, K, n) arrays in every call, where the fit's compiled loop reuses one buffer."""
    from benchmarks.bench_vrsag_floor import _best, _problem, lockstep_fit

    if jax.default_backend() != "cpu":  # GPU kernels are named and fused otherwise (H200, 2026-12-04)
        raise RuntimeError(f"the op classes are read from XLA:CPU's trace and HLO; this process runs on "
                           f"{jax.default_backend()!r} (JAX_PLATFORMS=cpu runs the benchmark on the CPU)")
    theta0, data, vg = _problem(n, m, P, K)
    evaluation = jax.jit(jax.vmap(lambda t: vg(t, data, None)))
    fit = lockstep_fit(data, vg, fit_steps)
    passes = int(jax.block_until_ready(fit(theta0))[2]) + 1  # the batched evaluations, the first one included
    cfg = f"m={m}, P={P}, K={K}, devices={len(jax.devices())} {jax.devices()[0].platform}"
    rows: list[list[Any]] = []
    top_rows: list[list[Any]] = []
    for program, call, per, repeats, traced_calls, label in (
            ("evaluation", evaluation, 1, 5, calls, f"{cfg}, {calls} calls traced"),
            ("fit", fit, passes, 2, 1, f"{cfg}, {fit_steps} iterations, {passes} batched evaluations, traced once")):
        # the fit was compiled and run above (for its passes); the evaluation is warmed here
        untraced = _best(call, theta0, repeats=repeats, warm=program == "evaluation") / per
        ops, seconds = _traced_ops(call, theta0, traced_calls)
        seconds = {name: s / per for name, s in seconds.items()}
        traced = sum(seconds.values())
        by_class = dict.fromkeys(CLASSES, 0.0)
        for name, s in seconds.items():
            by_class[ops[name][0]] += s
        rows += [[n, program, "untraced evaluation", 1.0, untraced, float("nan"), label],
                 [n, program, "traced ops, all", 1.0, float("nan"), 1e3 * traced, label]]
        rows += [[n, program, cls, s / traced, untraced * s / traced, 1e3 * s, label] for cls, s in by_class.items()]
        top = sorted(seconds.items(), key=lambda kv: -kv[1])[:10]
        top_rows += [[n, program, name, ops[name][0], 1e3 * s, ops[name][1]] for name, s in top]
    for r in rows:
        print(f"n={n} {r[1]:10s} {r[2]:34s} share {r[3]:6.3f}  est {r[4]:9.4g} s  traced {r[5]:9.4g} ms", flush=True)
    return rows, top_rows


def main(argv: Sequence[str] | None = None) -> tuple[list[list[Any]], list[list[Any]]]:
    from benchmarks.bench_vrsag import add_problem_arguments

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_problem_arguments(ap)
    ap.add_argument("--calls", type=int, default=3, help="evaluations traced per size")
    ap.add_argument("--fit-steps", type=int, default=20, help="L-BFGS iterations of the traced fit")
    ap.add_argument("--out", default=str(RESULTS / "vrsag_profile"))
    args = ap.parse_args(argv)
    from benchmarks import machine_speed
    from calib_jax.io import atomic_write_text, markdown_table, write_csv

    load_start = os.getloadavg()[0]
    rows: list[list[Any]] = []
    top: list[list[Any]] = []
    for n in args.n:
        r, t = profile_one(n, args.m, args.partitions, args.groups, calls=args.calls, fit_steps=args.fit_steps)
        rows += r
        top += t
    reference = machine_speed.reference_seconds()
    header = ["n", "program", "quantity", "share", "estimated_s", "traced_ms_per_call", "config"]
    write_csv(Path(args.out).with_suffix(".csv"),
              header, rows + [["", "", machine_speed.ROW_LABEL, float("nan"), reference, float("nan"),
                               machine_speed.DESCRIPTION]])
    text = ("# Where a VR-SAG evaluation's time goes, op by op\n\n"
            f"Machine load (1-min load average) at start {load_start:.2f}, at end {os.getloadavg()[0]:.2f} on "
            f"{os.cpu_count()} cores of {machine_speed.cpu_description()}; machine reference workload "
            f"({machine_speed.DESCRIPTION}) {1e3 * reference:.0f} ms. Program ``evaluation``: one lock-step "
            "evaluation (value and gradient of every partition, the rows in blocks), the evaluation whose floor "
            f"``bench_vrsag_floor`` measures, called on its own and traced {args.calls} times with "
            "``jax.profiler.trace``; program ``fit``: the lock-step fit through "
            f"{args.fit_steps} iterations, traced once, its times divided by its batched evaluations (so they "
            "include the L-BFGS bookkeeping; the fit's compiled loop reuses the kept arrays' buffer that an "
            "evaluation called alone allocates and fills in every call). Each compiled op's summed time per "
            "evaluation, grouped by what the op computes (``python -m benchmarks.bench_vrsag_profile``, see its "
            "docstring). ``share``: the class's part of the traced ops' total; ``estimated_s``: the share times "
            "the untraced evaluation (the evaluation's best of five; the fit's best of two over its batched "
            "evaluations).\n\n"
            + markdown_table(header, rows, digits=4)
            + "\n\n## The ten most expensive ops of each size\n\n"
            + markdown_table(["n", "program", "op", "class", "traced_ms_per_call", "source"], top, digits=4)
            + "\n")
    atomic_write_text(Path(args.out).with_suffix(".md"), text)
    return rows, top


if __name__ == "__main__":
    main()
