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
from pathlib import Path

from langgraph_sdk import Auth

from ..config.python_files import import_python_file, names_a_file
from ..exception_text import exception_text

__all__ = ["AuthLoadError", "load_auth"]


class AuthLoadError(Exception):
    """``auth.path`` names no usable ``Auth``; the message is one line for the operator."""


def _module_from_file(file: Path, config_file: str) -> object:
    try:
        return import_python_file(file, "deerflow_auth_")
    except FileNotFoundError:
        raise AuthLoadError(f"{config_file}: auth.path: no file {str(file)!r}") from None
    except Exception as exc:
        raise AuthLoadError(f"{config_file}: auth.path: {file.name} failed to import: {exception_text(exc)}") from exc


def load_auth(path: str, config_file: str | Path) -> Auth:
    """The ``Auth`` object ``path`` names (``config_file``: where relative paths start)."""
    config_file = str(config_file)
    target, _, attribute = path.rpartition(":")
    if names_a_file(target):
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
