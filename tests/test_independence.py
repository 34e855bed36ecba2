"""The layers stay independent: theory never imports numerics or gpu; numerics
never imports theory or gpu (they meet only in the claim checks and tests)."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {"theory": ("assocmem.numerics", "assocmem.gpu"),
             "numerics": ("assocmem.theory", "assocmem.gpu")}


def _imports(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:      # relative import stays inside its own layer
                continue
            yield node.module or ""


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_does_not_import_the_other(layer):
    bad = [(p.name, mod) for p in sorted((ROOT / layer).glob("*.py")) for mod in _imports(p)
           if mod.startswith(FORBIDDEN[layer])]
    assert not bad, bad
