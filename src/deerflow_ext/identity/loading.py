"""The ``langgraph_sdk.Auth`` that ``auth.path`` names, loaded as LangGraph's server loads it.

``module:attr`` imports an installed (or ``sys.path``) module; ``./file.py:attr`` (any path
ending in ``.py``) loads that file, relative to the config file's directory, as a module of
its own, so an ``auth.py`` written for ``langgraph.json`` loads unchanged. Whatever fails
(no file, an import error inside it, no such attribute, not an ``Auth``, no
``@auth.authenticate``) is one :class:`AuthLoadError` line naming the file, the field and
the problem; startup stops on it rather than serving without the operator's rules.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

from langgraph_sdk import Auth

from ..exception_text import exception_text

__all__ = ["AuthLoadError", "load_auth"]


class AuthLoadError(Exception):
    """``auth.path`` names no usable ``Auth``; the message is one line for the operator."""


def _module_from_file(file: Path, config_file: str) -> object:
    if not file.is_file():
        raise AuthLoadError(f"{config_file}: auth.path: no file {str(file)!r}")
    name = f"deerflow_auth_{abs(hash(str(file)))}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:  # pragma: no cover - a .py file always has a loader
        raise AuthLoadError(f"{config_file}: auth.path: cannot load {str(file)!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise AuthLoadError(f"{config_file}: auth.path: {file.name} failed to import: {exception_text(exc)}") from exc
    return module


def load_auth(path: str, config_file: str | Path) -> Auth:
    """The ``Auth`` object ``path`` names (``config_file``: where relative paths start)."""
    config_file = str(config_file)
    target, _, attribute = path.rpartition(":")
    if target.endswith(".py"):
        file = Path(target)
        if not file.is_absolute():
            file = Path(config_file).resolve().parent / file
        module = _module_from_file(file, config_file)
    else:
        try:
            module = importlib.import_module(target)
        except Exception as exc:
            raise AuthLoadError(f"{config_file}: auth.path: cannot import {target!r}: {exception_text(exc)}") from exc
    found = getattr(module, attribute, None)
    if found is None:
        raise AuthLoadError(f"{config_file}: auth.path: {target!r} has no attribute {attribute!r}")
    if not isinstance(found, Auth):
        raise AuthLoadError(f"{config_file}: auth.path: {path!r} is a {type(found).__name__}, not a langgraph_sdk.Auth")
    return found
