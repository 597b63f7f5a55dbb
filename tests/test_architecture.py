"""The tree shows the public surface, and the layers of docs/ARCHITECTURE.md hold.

* The package root holds the public layers only; the private plumbing (how computations run)
  lives in ``calib_jax._src``.
* A layer imports only layers below it (``_src`` imports none of them), read from every
  ``import`` statement of the source, function-local and ``TYPE_CHECKING`` ones included.
* No two modules import each other, directly or through others.
* Private means private: no module imports another module's ``_name``, and a private module
  is imported only from inside its own package.
"""

from __future__ import annotations

import ast
import pathlib
import sys

import calib_jax

PACKAGE = pathlib.Path(calib_jax.__file__).parent

#: docs/ARCHITECTURE.md's order, lowest first; ``calib_jax`` itself sits above what it re-exports.
LAYERS = ("_src", "validation", "io", "groupstats", "partitions", "metrics", "decompositions", "bootstrap",
          "inference", "losses", "calibrators", "data", "montecarlo", "plotting", "logs", "cli", "__main__")


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """Every calib_jax module -> the calib_jax modules its source imports (names resolved)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names if a.name.startswith("calib_jax"))
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("calib_jax"):
                assert node.level == 0, f"{name}: relative import"
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    targets.add(sub if sub in modules else node.module)
        graph[name] = targets & set(modules)
    return graph


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "calib_jax"


def test_package_root_holds_public_layers_only():
    private = sorted(p.name for p in PACKAGE.iterdir()
                     if p.name.startswith("_") and p.name not in {"__init__.py", "__main__.py", "_src",
                                                                   "__pycache__"})
    assert private == [], f"private modules outside calib_jax._src: {private}"
    public = {p.stem for p in PACKAGE.iterdir()
              if (p.suffix == ".py" or (p / "__init__.py").exists()) and not p.name.startswith("_")}
    assert public == set(LAYERS) - {"_src", "__main__"}, "docs/ARCHITECTURE.md's layers != the tree"


def test_layers_import_only_layers_below():
    graph = _imports()
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    # calib_jax itself re-exports the layers it imports, so it ranks just above the highest.
    rank["calib_jax"] = max(rank[_layer(t)] for t in graph["calib_jax"] if _layer(t) != "calib_jax") + 0.5
    wrong = sorted(f"{src} -> {dst}" for src, targets in graph.items() for dst in targets
                   if _layer(src) != _layer(dst) and rank[_layer(dst)] > rank[_layer(src)])
    assert wrong == [], "imports upward: " + ", ".join(wrong)


def test_no_import_cycles():
    graph = _imports()
    state: dict[str, int] = {}  # 1 on the stack, 2 done

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if nxt == node or nxt in {m for m in stack[:-1] if nxt.startswith(m + ".")}:
                continue
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                # A package importing its own submodules (re-exports) is not a cycle of ideas.
                if not all(b.startswith(a + ".") or a.startswith(b + ".")
                           for a, b in zip(cycle, cycle[1:], strict=False)):
                    raise AssertionError("import cycle: " + " -> ".join(cycle))
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_simulator_modules_import_in_one_direction():
    graph = _imports()
    sim = "calib_jax.data.simulator."
    assert sim + "_traffic" in graph[sim + "_world"]
    assert sim + "_world" not in graph[sim + "_traffic"]


def test_studies_and_proofs_run_from_any_directory(tmp_path):
    """``experiments`` and ``proofs`` are installed with the package, not only importable
    from the repository root, and ``calib-jax-studies`` is the studies' command."""
    import subprocess
    import sys

    probe = "import experiments.registry, proofs; print(len(experiments.registry.STUDIES))"
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"}, check=True)
    assert int(out.stdout) > 10
    command = pathlib.Path(sys.executable).parent / "calib-jax-studies"
    listing = subprocess.run([str(command), "list"], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert "| `mc_spearman` |" in listing.stdout


#: where private names could leak from: the package, the studies, the benchmarks, the proofs,
#: the docs' code and the tests
_SOURCES = ("calib_jax", "experiments", "benchmarks", "proofs", "docs", "tests")


def _private_uses() -> tuple[list[str], list[str]]:
    """(``from M import _name`` statements, imports of a private module from outside its
    package) over every source file of the repository."""
    root = PACKAGE.parent
    names, modules = [], []
    for top in _SOURCES:
        for path in sorted((root / top).rglob("*.py")):
            if "_build" in path.parts:
                continue
            rel = path.relative_to(root)
            importer = ".".join(rel.with_suffix("").parts)
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("calib_jax"):
                    targets = [node.module]
                    for alias in node.names:
                        if alias.name.startswith("_") and not alias.name.startswith("__"):
                            names.append(f"{rel}:{node.lineno} from {node.module} import {alias.name}")
                elif isinstance(node, ast.Import):
                    targets = [a.name for a in node.names if a.name.startswith("calib_jax")]
                else:
                    continue
                for target in targets:
                    parts = target.split(".")
                    private = [i for i, p in enumerate(parts) if p.startswith("_") and p != "_src"]
                    if not private or importer.startswith("tests."):
                        continue  # a test may import the private module it tests, by its path
                    package = ".".join(parts[:private[0]])
                    if not importer.startswith(package + "."):
                        modules.append(f"{rel}:{node.lineno} imports {target}")
    return names, modules


def test_private_names_stay_in_their_module():
    """A module's ``_name`` is used by that module only: helpers shared between modules live in
    ``calib_jax._src`` (or a private module of the package that shares them) under public
    names, and a private module (``_x.py``) is imported only from inside its own package."""
    names, modules = _private_uses()
    assert names == [], "private names imported from another module:\n" + "\n".join(names)
    assert modules == [], "private modules imported from outside their package:\n" + "\n".join(modules)


def test_the_private_import_check_sees_a_violation(tmp_path, monkeypatch):
    """The check above is not vacuous: a planted ``from calib_jax.groupstats import _x`` in a
    copy of a test file and an outside import of ``calib_jax.metrics._grouped`` are both found."""
    fake = tmp_path / "repo"
    for top in _SOURCES:
        (fake / top).mkdir(parents=True)
    (fake / "calib_jax" / "__init__.py").write_text("")
    (fake / "tests" / "test_x.py").write_text("from calib_jax.groupstats import _hidden\n")
    (fake / "experiments" / "x.py").write_text("from calib_jax.metrics._grouped import hard_gap\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake / "calib_jax")
    names, modules = _private_uses()
    assert names == ["tests/test_x.py:1 from calib_jax.groupstats import _hidden"]
    assert modules == ["experiments/x.py:1 imports calib_jax.metrics._grouped"]


def test_the_library_does_not_import_the_research_package():
    """``experiments`` (the studies) sits above the library: no module of ``calib_jax`` imports
    it, function-local imports included (the studies' listing is their own command)."""
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            wrong += [f"{path.relative_to(PACKAGE.parent)}:{node.lineno}" for n in names
                      if n == "experiments" or n.startswith("experiments.")]
    assert wrong == [], "calib_jax imports experiments: " + ", ".join(wrong)
