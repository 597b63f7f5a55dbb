"""The README is a front page that works: its Python examples run as written, its set-up is two
commands, it stays short, and its links point at files of the repository."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def _blocks(lang: str, text: str | None = None) -> list[str]:
    """The fenced ``lang`` code blocks of ``text`` (default: the README)."""
    return re.findall(rf"```{lang}\n(.*?)```", README.read_text() if text is None else text, re.S)


def test_readme_python_examples_run_as_written(capsys):
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # VR-SAG may report groups that fell back; not the point here
        for code in _blocks("python"):
            exec(compile(code, str(README), "exec"), namespace)  # noqa: S102
    out = capsys.readouterr().out
    values = {k: float(v) for k, v in re.findall(r"^(ECE|LCCE|ECE after VR-SAG)\s+(\S+)$", out, re.M)}
    assert set(values) == {"ECE", "LCCE", "ECE after VR-SAG"}, out
    # the example's model is miscalibrated and VR-SAG repairs most of it
    assert values["ECE after VR-SAG"] < 0.25 * values["ECE"], values
    assert np.isfinite(list(values.values())).all()


def test_readme_is_a_front_page_with_two_set_up_commands_and_live_links():
    text = README.read_text()
    assert len(text.splitlines()) <= 150
    setup = text.split("## Set-up: two commands", 1)[1].split("##", 1)[0]
    commands = [ln for ln in _blocks("bash", setup)[0].splitlines() if ln.strip()]
    assert [c.split()[:2] for c in commands] == [["make", "run"], ["make", "test"]]
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target
    for page in (ROOT / "docs").rglob("*.md"):
        if {"_build", "jupyter_execute"} & set(page.relative_to(ROOT / "docs").parts):
            continue  # the built site's copies of the sources
        for target in re.findall(r"\]\(([^)#]+)\)", page.read_text()):
            if not target.startswith("http"):
                assert (page.parent / target).resolve().exists(), f"{page.relative_to(ROOT)}: {target}"



def test_library_guide_example_runs_as_written():
    page = ROOT / "docs" / "guide" / "library.md"
    code = _blocks("python", page.read_text())[0]
    namespace: dict = {}
    exec(compile(code, str(page), "exec"), namespace)  # noqa: S102
    assert namespace["trials"].shape == (2,)
    assert np.isclose(float(namespace["d"].score), float(np.mean((namespace["probs"] - namespace["labels"]) ** 2)),
                      rtol=1e-5)
