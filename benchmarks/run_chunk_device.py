"""Launcher for ``bench_chunk.py`` on a bare device machine (no editable install of assocmem).

Maps the top-level folders to ``assocmem.<name>`` as pyproject.toml does, then
runs the benchmark.  Usage: ``python benchmarks/run_chunk_device.py --out f.json``.
"""
import importlib.util
import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
try:
    import assocmem.gpu  # noqa: F401  (installed: nothing to do)
except ModuleNotFoundError:
    import assocmem

    for name in ("theory", "numerics", "gpu", "figures"):
        spec = importlib.util.spec_from_file_location(f"assocmem.{name}", ROOT / name / "__init__.py",
                                                      submodule_search_locations=[str(ROOT / name)])
        mod = importlib.util.module_from_spec(spec)
        sys.modules[f"assocmem.{name}"] = mod
        spec.loader.exec_module(mod)
        setattr(assocmem, name, mod)
sys.argv = [str(ROOT / "benchmarks" / "bench_chunk.py")] + sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
