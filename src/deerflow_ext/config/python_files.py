"""Importing a Python file an operator's configuration names (``./auth.py:auth``,
``./embed.py:embed``).

``langgraph.json``'s object paths may name a file instead of a module. Such a file is not on
``sys.path``, so it is imported under a name of its own, derived from its resolved path (the
same file named twice is one module), and registered in ``sys.modules`` before it runs, as
``importlib`` requires for dataclasses and pickling inside it. What a failed import means is
the caller's to say: each names its own config field.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["import_python_file", "names_a_file"]


def names_a_file(target: str) -> bool:
    """Whether the part before ``:`` of an object path is a file, not a module."""
    return target.endswith(".py") or "/" in target or target.startswith(".")


def import_python_file(path: Path, prefix: str) -> ModuleType:
    """Run ``path`` as a module named ``prefix`` + a hash of its resolved path.

    Raises ``FileNotFoundError`` for a missing file, ``ImportError`` when it cannot be
    loaded, and whatever the file itself raises while it runs (it is then not left in
    ``sys.modules``)."""
    if not path.is_file():
        raise FileNotFoundError(str(path))
    name = f"{prefix}{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # pragma: no cover - a .py file always has a loader
        raise ImportError(f"{path} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module
