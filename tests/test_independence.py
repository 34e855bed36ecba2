"""The layers import downwards only, and theory and numerics stay independent.

Every module of every layer is read (subpackages included: ``gpu/tasks``,
``assocmem/claims``, ...), and every import in it -- at the top or inside a
function, absolute, relative (resolved against its package) or through
``importlib.import_module`` with a constant name -- is held against this matrix:

========== ====================================================================
layer      may import (from ``assocmem``)
========== ====================================================================
base       base only.  The base layer is ``assocmem/__init__`` and
           :data:`BASE`: ``validate``, ``protocol``, ``provenance``, the size
           limits (``budget``), output paths (``outputs``), the command-line
           plumbing (``args``: parser, argument types, dispatch) and the plot
           style (``style``).  Every layer may import it.
theory     base.  Never numerics or gpu: the closed forms are derived without
           the simulations they are checked against.
numerics   base.  Never theory or gpu: the simulations are written from the
           models, never from the closed forms they are checked against.
gpu        base, numerics (``gpu/tasks`` included).  Never theory (the kernels
           meet the closed forms only through the numerics and the checks), and
           never the hub (claims, registry, report, CLI, commands, docs site)
           nor figures: the GPU layer is checked *by* the hub, and its entry
           points share only the base layer's plumbing.
figures    base, theory, numerics, gpu (a figure reads the layers' data).
           Never the hub: the CLI and the docs site import the figures, and a
           figure draws the layers' numbers, not the claim checks' verdicts.
hub        anything (``assocmem/`` apart from the base layer: the registry, the
           claims, the report, the CLI and its commands, the docs site).
========== ====================================================================

The layers meet only in the hub's claim checks (and in the tests).
"""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# source folder -> the package it is installed as (pyproject's package-dir)
FOLDERS = {"assocmem": "assocmem", "theory": "assocmem.theory", "numerics": "assocmem.numerics",
           "gpu": "assocmem.gpu", "figures": "assocmem.figures"}
BASE = {"assocmem", "assocmem.validate", "assocmem.protocol", "assocmem.provenance", "assocmem.budget",
        "assocmem.outputs", "assocmem.args", "assocmem.style"}
ALLOWED = {
    "base": {"base"},
    "theory": {"base", "theory"},
    "numerics": {"base", "numerics"},
    "gpu": {"base", "gpu", "numerics"},
    "figures": {"base", "figures", "theory", "numerics", "gpu"},
    "hub": {"base", "theory", "numerics", "gpu", "figures", "hub"},
}


def layer_of(module: str) -> str:
    if module in BASE:
        return "base"
    for name in ("theory", "numerics", "gpu", "figures"):
        if module == f"assocmem.{name}" or module.startswith(f"assocmem.{name}."):
            return name
    return "hub"


def modules(root: Path) -> dict[str, Path]:
    """Every module under the layer folders of ``root``, by its installed name (recursively)."""
    out = {}
    for folder, package in FOLDERS.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([package] + parts)] = path
    return out


def _imports(module: str, path: Path, known: set):
    """``(line, imported module)`` for every import of ``module`` that names an ``assocmem`` module."""
    is_pkg = path.name == "__init__.py"
    package = module if is_pkg else module.rpartition(".")[0]

    def resolve(name: str, level: int) -> str:
        if not level:
            return name
        base = package.split(".")
        base = base[:len(base) - (level - 1)]
        return ".".join(base + ([name] if name else []))

    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom):
            mod = resolve(node.module or "", node.level)
            for a in node.names:           # `from assocmem import validate`: the submodule
                sub = f"{mod}.{a.name}"
                yield node.lineno, sub if sub in known else mod
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            name = node.args[0].value
            level = len(name) - len(name.lstrip("."))
            yield node.lineno, resolve(name.lstrip("."), level) if level else name


def violations(root: Path) -> list[str]:
    known = modules(root)
    bad = []
    for module, path in known.items():
        src = layer_of(module)
        for line, target in sorted(set(_imports(module, path, set(known)))):
            if target != "assocmem" and not target.startswith("assocmem."):
                continue
            dst = layer_of(target)
            if dst not in ALLOWED[src]:
                bad.append(f"{path.relative_to(root)}:{line}: {src} imports {target} ({dst})")
    return bad


def test_every_layer_imports_only_what_the_matrix_allows():
    found = modules(ROOT)
    # the walk reaches the subpackages, and every module has a layer
    assert any(m.startswith("assocmem.gpu.tasks.") for m in found)
    assert any(m.startswith("assocmem.claims.") for m in found)
    assert BASE <= set(found), BASE - set(found)
    assert {layer_of(m) for m in found} == set(ALLOWED)
    bad = violations(ROOT)
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("folder,source,why", [
    ("theory", "from assocmem.numerics import bl_filter\n", "theory imports assocmem.numerics"),
    ("numerics", "def f():\n    from assocmem.theory import bl_mp\n", "numerics imports assocmem.theory"),
    ("gpu", "from assocmem.cli import main\n", "gpu imports assocmem.cli"),
    ("gpu", "from ....figures import core\n", "gpu imports assocmem.figures"),
    ("gpu", "import importlib\nimportlib.import_module('assocmem.registry')\n", "gpu imports assocmem.registry"),
    ("figures", "from assocmem import registry\n", "figures imports assocmem.registry"),
    ("assocmem", "from assocmem.claims import am\n", "base imports assocmem.claims"),
])
def test_a_violating_module_is_found(tmp_path, folder, source, why):
    """The check can fail: a fake tree with one module that breaks the matrix, deep in a subpackage."""
    for f, pkg in FOLDERS.items():
        (tmp_path / f).mkdir()
        (tmp_path / f / "__init__.py").write_text("")
    (tmp_path / "assocmem" / "validate.py").write_text("import numpy\n")
    for name in ("registry", "cli"):
        (tmp_path / "assocmem" / f"{name}.py").write_text("from assocmem import validate\n")
    (tmp_path / "assocmem" / "claims").mkdir()
    (tmp_path / "assocmem" / "claims" / "__init__.py").write_text("")
    (tmp_path / "assocmem" / "claims" / "am.py").write_text("from assocmem.theory import x\n")
    (tmp_path / "figures" / "core.py").write_text("from assocmem.theory import x\n")
    assert violations(tmp_path) == []
    if folder == "assocmem":          # a base module
        target = tmp_path / "assocmem" / "validate.py"
    else:
        (tmp_path / folder / "tasks" / "deep").mkdir(parents=True)
        for d in (tmp_path / folder / "tasks", tmp_path / folder / "tasks" / "deep"):
            (d / "__init__.py").write_text("")
        target = tmp_path / folder / "tasks" / "deep" / "bad.py"
    target.write_text(source)
    bad = violations(tmp_path)
    assert len(bad) == 1 and why in bad[0], bad
