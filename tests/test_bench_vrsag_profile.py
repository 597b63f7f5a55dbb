"""``benchmarks/bench_vrsag_profile.py``: its HLO classifier and trace reader against hand-written
inputs, and the page it writes at a toy size (the classes' shares partition the traced time)."""

from __future__ import annotations

import csv
import gzip
import json

import jax
import pytest

from benchmarks import bench_vrsag_profile, machine_speed

_MODULE = """HloModule m

%dot_body (p0: f32[30,64], p1: f32[64,128]) -> f32[30,128] {
  %p0 = f32[30,64]{1,0} parameter(0)
  %p1 = f32[64,128]{1,0} parameter(1)
  ROOT %d = f32[30,128]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%reduce_body (p0: f32[30,128], z: f32[]) -> f32[30] {
  %p0 = f32[30,128]{1,0} parameter(0)
  %z = f32[] parameter(1)
  ROOT %r = f32[30]{0} reduce(%p0, %z), dimensions={1}, to_apply=%sum
}

%mul_body (p0: f32[30,128], p1: f32[30,128]) -> f32[30,128] {
  %p0 = f32[30,128]{1,0} parameter(0)
  %p1 = f32[30,128]{1,0} parameter(1)
  ROOT %m = f32[30,128]{1,0} multiply(%p0, %p1)
}

%slice_body (p0: f32[64,1024], i: s32[]) -> f32[64,128] {
  %p0 = f32[64,1024]{1,0} parameter(0)
  %i = s32[] parameter(1)
  %c = s32[] constant(0)
  ROOT %ds = f32[64,128]{1,0} dynamic-slice(%p0, %c, %i), dynamic_slice_sizes={64,128}
}

%loop (t: (s32[], f32[30])) -> (s32[], f32[30]) {
  %t = (s32[], f32[30]{0}) parameter(0)
  %i = s32[] get-tuple-element(%t), index=0
  %w = f32[30,64]{1,0} constant({...})
  %z = f32[64,1024]{1,0} constant({...})
  %zb = f32[64,128]{1,0} fusion(%z, %i), kind=kLoop, calls=%slice_body, metadata={op_name="jit(f)/dynamic_slice" stack_frame_id=2}
  %h = f32[30,128]{1,0} fusion(%w, %zb), kind=kCustom, calls=%dot_body, metadata={op_name="jit(f)/dot_general" stack_frame_id=1}
  %e = f32[30,128]{1,0} exponential(%h), metadata={op_name="jit(f)/exp"}
  %hh = f32[30,128]{1,0} fusion(%e, %h), kind=kLoop, calls=%mul_body
  %zero = f32[] constant(0)
  %rs = f32[30]{0} fusion(%hh, %zero), kind=kLoop, calls=%reduce_body, metadata={op_name="jit(f)/reduce_sum"}
  ROOT %out = (s32[], f32[30]{0}) tuple(%i, %rs)
}

%cond (t: (s32[], f32[30])) -> pred[] {
  %t = (s32[], f32[30]{0}) parameter(0)
  %i = s32[] get-tuple-element(%t), index=0
  %n = s32[] constant(8)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

ENTRY %main (x: f32[30]) -> (s32[], f32[30]) {
  %x = f32[30]{0} parameter(0)
  %i0 = s32[] constant(0)
  %init = (s32[], f32[30]{0}) tuple(%i0, %x)
  ROOT %wl = (s32[], f32[30]{0}) while(%init), condition=%cond, body=%loop
}

FileNames
1 "/src/calib_jax/calibrators/sag.py"
FunctionNames
1 "forward"
2 "backward"
FileLocations
1 {file_name_id=1 function_name_id=1 line=419 end_line=419 column=12 end_column=63}
2 {file_name_id=1 function_name_id=2 line=451 end_line=451 column=14 end_column=64}
StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=2}
"""


def test_each_executed_op_gets_the_class_of_what_it_computes():
    ops = bench_vrsag_profile.classify(_MODULE)
    classes = {name: cls for name, (cls, _) in ops.items()}
    # the ops inside fusions and reducers run within their caller; the while and the tuples hold
    # others; the slice's index arithmetic and the loop's counter compute on no floating array
    assert classes == {"zb": "copies", "h": "head products", "e": "elementwise with transcendentals",
                       "hh": "elementwise arithmetic", "rs": "row sums", "lt": "copies"}
    assert ops["h"][1] == "dot_general (sag.py:419 forward)"
    assert ops["zb"][1] == "dynamic_slice (sag.py:451 backward)"
    assert ops["rs"][1] == "reduce_sum"


def test_an_ops_time_is_its_complete_events_summed_over_the_calls(tmp_path):
    events = [{"ph": "X", "name": "h", "dur": 300.0}, {"ph": "X", "name": "h", "dur": 100.0},
              {"ph": "X", "name": "e", "dur": 50.0}, {"ph": "B", "name": "e", "ts": 0.0},
              {"ph": "X", "name": "ThunkExecutor::Execute", "dur": 9e6}]
    path = tmp_path / "t.trace.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)
    seconds = bench_vrsag_profile.op_seconds(path, ["h", "e", "rs"], calls=2)
    assert seconds == pytest.approx({"h": 200e-6, "e": 25e-6, "rs": 0.0})


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the op classes are XLA:CPU's (the benchmark refuses "
                    "other backends)")
def test_the_page_splits_the_traced_time_into_the_five_classes(tmp_path):
    out = tmp_path / "profile"
    rows, top = bench_vrsag_profile.main(["--n", "3000", "--m", "8", "--partitions", "3", "--groups", "2",
                                          "--calls", "2", "--fit-steps", "3", "--out", str(out)])
    with out.with_suffix(".csv").open(newline="") as f:
        table = list(csv.DictReader(f))
    assert {r["program"] for r in table if r["n"] == "3000"} == set(bench_vrsag_profile.PROGRAMS)
    for program in bench_vrsag_profile.PROGRAMS:
        mine = [r for r in table if r["n"] == "3000" and r["program"] == program]
        share = {r["quantity"]: float(r["share"]) for r in mine}
        traced = {r["quantity"]: float(r["traced_ms_per_call"]) for r in mine}
        estimated = {r["quantity"]: float(r["estimated_s"]) for r in mine}
        assert set(bench_vrsag_profile.CLASSES) <= set(share)
        assert sum(share[c] for c in bench_vrsag_profile.CLASSES) == pytest.approx(1.0, abs=1e-9)
        assert sum(traced[c] for c in bench_vrsag_profile.CLASSES) == pytest.approx(traced["traced ops, all"])
        assert sum(estimated[c] for c in bench_vrsag_profile.CLASSES) == pytest.approx(
            estimated["untraced evaluation"])
        # the evaluation computes the head's logits and gradient, the softmax and the sums over rows
        for cls in ("head products", "elementwise with transcendentals"):
            assert traced[cls] > 0
    fit_config = next(r["config"] for r in table if r["program"] == "fit")
    assert "3 iterations" in fit_config and "batched evaluations" in fit_config
    for program in bench_vrsag_profile.PROGRAMS:
        times = [r[4] for r in top if r[1] == program]
        assert len(times) == 10 and times == sorted(times, reverse=True)
    assert all(r[3] in bench_vrsag_profile.CLASSES for r in top)
    assert machine_speed.previous_reference(out.with_suffix(".csv"), column="estimated_s") > 0
    text = out.with_suffix(".md").read_text()
    assert "AVX-512" in text and "most expensive ops" in text and "sag.py:" in text
