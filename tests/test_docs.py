"""The documentation site: every public name has its page in the API reference, and the built
site renders its math and a tutorial's figure in a real browser (headless Chromium, where
installed: ``apt-get install chromium``). ``make docs`` builds the site; ``make test`` builds it
before running the tests, so these tests read a fresh build."""

from __future__ import annotations

import importlib
import inspect
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "docs" / "_build" / "html"
LAYERS = ("metrics", "groupstats", "partitions", "inference", "decompositions", "losses", "bootstrap",
          "calibrators", "montecarlo")

needs_site = pytest.mark.skipif(not (HTML / "objects.inv").exists(), reason="docs not built (make docs)")


def _inventory() -> set[str]:
    from sphinx.util.inventory import InventoryFile

    with open(HTML / "objects.inv", "rb") as f:
        inv = InventoryFile.load(f, "", lambda base, uri: uri)
    names: set[str] = set()
    for kind, entries in inv.items():
        if kind.startswith("py:"):
            names.update(entries)
    return names


@needs_site
@pytest.mark.parametrize("layer", LAYERS)
def test_every_public_name_is_in_the_api_reference(layer):
    mod = importlib.import_module(f"calib_jax.{layer}")
    documented = _inventory()
    missing = []
    for name in getattr(mod, "__all__", ()):
        obj = getattr(mod, name)
        # functions and classes; constants (registries, metric lists) are described in their
        # module's text
        if not (inspect.isroutine(obj) or inspect.isclass(obj)) or getattr(obj, "__module__", "") == "typing":
            continue
        if not any(entry.endswith(f".{name}") for entry in documented):
            missing.append(name)
    assert not missing, f"calib_jax.{layer}: not in the API reference: {missing}"


def _chromium() -> str | None:
    return next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)


@needs_site
@pytest.mark.skipif(_chromium() is None, reason="no headless Chromium (apt-get install chromium)")
def test_site_renders_math_and_a_tutorial_figure_in_chromium(tmp_path):
    page = HTML / "tutorials" / "train_with_vrsag_loss.html"
    dom = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=15000",
                          "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120).stdout
    assert "<mjx-container" in dom, "MathJax did not typeset the tutorial's math"
    evaluate = HTML / "tutorials" / "evaluate.html"
    dom2 = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                           evaluate.as_uri()], capture_output=True, text=True, timeout=120).stdout
    images = [p for p in (HTML / "_images").glob("*.png")]
    assert images and any(p.name in dom2 for p in images), "the tutorial's figure is not on its page"


@needs_site
@pytest.mark.parametrize("tutorial", ["evaluate", "rank_metrics_fig3"])
def test_tutorial_figures_are_images_on_the_page(tutorial):
    """A figure shown as a bare Figure object renders as the text "<Figure size ...>" (the
    plotting layer uses the Agg backend): each tutorial that draws one must show the image."""
    html = (HTML / "tutorials" / f"{tutorial}.html").read_text()
    images = re.findall(r'<img[^>]+src="\.\./_images/([^"]+\.png)"', html)
    assert images and all((HTML / "_images" / name).exists() for name in images)
    assert "Figure size" not in html


def _table_rows_of_another_width(text: str) -> list[int]:
    """Line numbers of Markdown table rows whose cell count differs from their table's header
    row (an unescaped ``|`` inside a cell splits it, and the table renders broken)."""
    bad, width = [], None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.startswith("|"):
            width = None
            continue
        cells = len(re.findall(r"(?<!\\)\|", line))
        if width is None:
            width = cells
        elif cells != width:
            bad.append(number)
    return bad


def test_table_width_check_finds_an_unescaped_bar():
    good = "| a | b |\n|---|---|\n| x \\| y | 2 |\n"
    assert _table_rows_of_another_width(good) == []
    assert _table_rows_of_another_width(good.replace("\\|", "|")) == [3]


def test_every_committed_markdown_table_is_well_formed():
    """The committed outputs, the benchmark pages, the docs and the README: no table row with
    more or fewer cells than its header (``io.markdown_table`` escapes ``|`` in cells)."""
    files = [ROOT / "README.md"]
    for folder in ("figures", "benchmarks/results", "docs"):
        files += [p for p in (ROOT / folder).rglob("*.md") if "_build" not in p.parts]
    broken = {str(p.relative_to(ROOT)): rows for p in files
              if (rows := _table_rows_of_another_width(p.read_text(encoding="utf-8")))}
    assert len(files) > 50 and broken == {}
