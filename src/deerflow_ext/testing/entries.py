"""One ``plugins:`` entry as the kit takes it, and a list of them as YAML an operator can paste.

The kit loads entries exactly as ``config.yaml`` would: it writes the list to a real
``config.yaml`` and lets the host's loader read it. :class:`Plugin` therefore mirrors a
``plugins:`` record field for field; the only liberty is that ``use`` may also be the
install function itself (published where the loader can import it, see
:func:`install_reference`). A record is rendered by walking the dataclass fields and
writing every one that differs from its default, so a field the config schema gains is
one line here and reaches the loader, and the YAML, without further change.
"""

from __future__ import annotations

import dataclasses
import importlib
import io
import itertools
import sys
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from ruamel.yaml import YAML

__all__ = ["EntryOptions", "Plugin", "PluginLike", "install_reference", "plugin_records", "plugins_yaml", "under_test"]

_INLINE_MODULE = "deerflow_ext._testing_inline"
_inline_counter = itertools.count(1)


class EntryOptions(TypedDict, total=False):
    """How an entry given as its install (or its ``use``) is configured: ``Plugin``'s own
    fields, defaulting as they do there. With ``Plugin`` entries or records, none is given."""

    name: str | None
    required: bool
    table_prefix: str | None


@dataclass(frozen=True)
class Plugin:
    """One ``plugins:`` record: ``use`` is an entry-point name, ``module:attr`` or an install function.

    ``name`` defaults to the install function's ``@extension(name=...)`` or the last part of
    its module; a list with two entries of the same name gets ``-2``, ``-3`` suffixes, as an
    operator would write them.
    """

    use: str | Callable[..., Any]
    config: Mapping[str, Any] = field(default_factory=dict)
    name: str | None = None
    enabled: bool = True
    required: bool = False
    table_prefix: str | None = None
    package: str | None = None
    intercept: bool = False
    #: A full-stack plugin's operator values, by plugin namespace (``settings:`` of the record).
    settings: Mapping[str, Any] = field(default_factory=dict)
    #: What the entry may reach of the host (``host_access:``: model invocation grants).
    host_access: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def coerce(cls, item: PluginLike) -> Plugin:
        """A :class:`Plugin` from a plugin, a ``config.yaml`` record, a ``use`` string or an install function."""
        if isinstance(item, Plugin):
            return item
        if isinstance(item, Mapping):
            unknown = set(item) - {f.name for f in dataclasses.fields(cls)}
            if unknown:
                raise TypeError(f"unknown plugins: record key(s) {sorted(unknown)} in {dict(item)!r}")
            return cls(**item)
        if isinstance(item, str) or callable(item):
            return cls(item)
        raise TypeError(f"expected a Plugin, a plugins: record, a use string or an install function; got {item!r}")

    @property
    def label(self) -> str:
        """The entry's name: given, else the extension's own name, else its module's last part."""
        if self.name:
            return self.name
        declared = getattr(self.use, "__deerflow_name__", None)
        if isinstance(declared, str) and declared:
            return declared
        if isinstance(self.use, str):
            return self.use.split(":")[0].rsplit(".", 1)[-1]
        return str(getattr(self.use, "__module__", None) or getattr(self.use, "__name__", "extension")).rsplit(".", 1)[
            -1
        ]

    def resolved(self, name: str | None = None) -> Plugin:
        """This entry with ``use`` as the string the loader imports and ``name`` fixed."""
        return dataclasses.replace(self, use=install_reference(self.use), name=name or self.label)

    def record(self) -> dict[str, Any]:
        """The ``plugins:`` record: ``name`` and ``use`` first, then every field not at its default."""
        resolved = self if isinstance(self.use, str) and self.name else self.resolved()
        record: dict[str, Any] = {"name": resolved.name, "use": resolved.use}
        for spec in dataclasses.fields(self):
            if spec.name in record:
                continue
            value = getattr(self, spec.name)
            if value != _default(spec):
                record[spec.name] = dict(value) if isinstance(value, Mapping) else value
        return record


PluginLike = Plugin | Mapping[str, Any] | str | Callable[..., Any]


def _default(spec: dataclasses.Field[Any]) -> Any:
    if spec.default_factory is not dataclasses.MISSING:
        return spec.default_factory()
    return spec.default


def plugin_records(items: Iterable[PluginLike]) -> list[Plugin]:
    """Resolve a list of entries: ``use`` strings, unique names (``x``, ``x-2``, ...), in order."""
    resolved: list[Plugin] = []
    taken: set[str] = set()
    for item in items:
        plugin = Plugin.coerce(item)
        base = plugin.label
        name, suffix = base, 2
        while name in taken:
            name, suffix = f"{base}-{suffix}", suffix + 1
        taken.add(name)
        resolved.append(plugin.resolved(name))
    return resolved


def plugins_yaml(plugins: Iterable[PluginLike], *, comment: str | None = None) -> str:
    """The entries as a ``plugins:`` block to paste into ``config.yaml`` (``comment`` lines first)."""
    yaml = YAML()
    yaml.default_flow_style = False
    yaml.indent(mapping=2, sequence=4, offset=2)
    buffer = io.StringIO()
    if comment:
        for line in comment.splitlines():
            buffer.write(f"# {line}".rstrip() + "\n")
    yaml.dump({"plugins": [p.record() for p in plugin_records(plugins)]}, buffer)
    return buffer.getvalue()


def install_reference(install: str | Callable[..., Any]) -> str:
    """The ``use:`` value that makes the host's loader import *install*.

    A string is returned unchanged (an entry-point name or ``module:attr``). A function
    reachable as ``module.qualname`` is referenced that way, so attribution in log lines
    and diagnostics reads like production. Anything else (a closure, a lambda, a function
    defined inside a test) is published on a private module so the real import path,
    version gate and attribution still run.
    """
    if isinstance(install, str):
        return install
    if not callable(install):
        raise TypeError(f"expected an install function or a use string, got {type(install).__name__}")
    module_name = getattr(install, "__module__", None)
    qualname = getattr(install, "__qualname__", "")
    if module_name and qualname and "<" not in qualname:
        try:
            target: Any = importlib.import_module(module_name)
            for part in qualname.split("."):
                target = getattr(target, part)
        except (ImportError, AttributeError):
            target = None
        if target is install:
            return f"{module_name}:{qualname}"
    module = sys.modules.get(_INLINE_MODULE)
    if module is None:
        module = types.ModuleType(_INLINE_MODULE, "install functions published by deerflow_ext.testing")
        sys.modules[_INLINE_MODULE] = module
    attr = f"install_{next(_inline_counter)}"
    setattr(module, attr, install)
    return f"{_INLINE_MODULE}:{attr}"


def under_test(subject: Sequence[Plugin], entries: Sequence[Plugin]) -> list[Plugin]:
    """The entries under test present in *entries*, in the given order: what a list is compared with."""
    present = {e.name for e in entries}
    return [p for p in subject if p.name in present]
