"""The benchmark scripts under bench/ as modules for tests, loaded by path: putting bench/ first on
sys.path would let bench/convert.py shadow the convert package."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load(relative: str, name: str) -> ModuleType:
    """bench/`relative` as module `name`, registered in sys.modules (dataclasses look their module up).
    bench/ goes last on sys.path, for the scripts' own `import benchmark`."""
    if str(BENCH) not in sys.path:
        sys.path.append(str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
