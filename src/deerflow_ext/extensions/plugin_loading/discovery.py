"""Finding an extension by the ``use`` an operator wrote in ``config.yaml``.

``use`` is either an entry-point name in the ``deerflow.extensions`` group (what an
installed package declares) or a ``module:attr`` path (editable checkouts, tests, code that
ships without packaging metadata). Entry points are read with one
``importlib_metadata.entry_points(group=...)`` scan per startup into an
:class:`EntryPointIndex` that is passed around, because scanning every installed
distribution is the slow part and its answer cannot change while the process starts.

Attribution — the prefix of every log line about an extension — is the resolved
``module:attr``: for an entry-point name, the entry point's value. It is known *before*
importing anything (:meth:`EntryPointIndex.attribution`), so even a failing import is
reported under the name the extension will have once it works.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import importlib_metadata

__all__ = [
    "ENTRY_POINT_GROUP",
    "EntryPointIndex",
    "ExtensionImportError",
    "ExtensionNotFoundError",
    "InstalledExtension",
    "ResolvedExtension",
    "resolve_extension",
]

ENTRY_POINT_GROUP = "deerflow.extensions"


class ExtensionNotFoundError(LookupError):
    """``use`` is neither an installed entry-point name nor a ``module:attr`` path."""


class ExtensionImportError(ImportError):
    """``use`` names something that cannot be imported or is not a callable ``install``."""


class InstalledExtension:
    """One entry point in ``deerflow.extensions`` and the distribution that declares it.

    ``distribution`` and ``version`` of an entry point found by a scan are read from the
    distribution's ``METADATA`` on first access only: loading never needs them (only
    ``extensions list``/describe and versioning advice do), and parsing every installed
    distribution's metadata up front was a sixth of startup loading. The same holds for a
    ``module:attr`` use, whose owning distribution is found by walking every installed
    distribution's file list (``locate``): that walk was nearly all of loading such an entry
    (benchmarks/RESULTS.md, "module:attr"), and the author kit starts a Gateway per example.
    """

    __slots__ = ("_dist", "_locate", "entry_point", "name", "value")

    def __init__(
        self,
        name: str,
        value: str,
        distribution: str | None = None,
        version: str | None = None,
        entry_point: importlib_metadata.EntryPoint | None = None,
    ) -> None:
        self.name = name
        self.value = value
        self.entry_point = entry_point
        self._dist: tuple[str | None, str | None] | None = (distribution, version)
        self._locate: Callable[[], tuple[str | None, str | None]] | None = None

    @classmethod
    def from_entry_point(cls, ep: importlib_metadata.EntryPoint) -> InstalledExtension:
        """An entry point whose distribution name/version are resolved lazily."""
        item = cls(ep.name, ep.value, entry_point=ep)
        item._dist = None  # resolved on first access (see the class docstring)
        return item

    @classmethod
    def from_module_path(cls, use: str, locate: Callable[[str], tuple[str | None, str | None]]) -> InstalledExtension:
        """A ``module:attr`` use whose distribution ``locate(module)`` finds on first access."""
        item = cls(use, use)
        item._dist = None
        item._locate = lambda: locate(use.partition(":")[0])
        return item

    def _resolve_dist(self) -> tuple[str | None, str | None]:
        if self._dist is None:
            if self.entry_point is not None:
                self._dist = _dist_of(self.entry_point)
            else:
                self._dist = self._locate() if self._locate is not None else (None, None)
        return self._dist

    @property
    def distribution(self) -> str | None:
        return self._resolve_dist()[0]

    @property
    def version(self) -> str | None:
        return self._resolve_dist()[1]

    def load(self) -> Any:
        if self.entry_point is not None:
            return self.entry_point.load()
        return _import_path(self.value)

    def _key(self) -> tuple[Any, ...]:
        return (self.name, self.value, self.distribution, self.version, self.entry_point)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"InstalledExtension(name={self.name!r}, value={self.value!r}, distribution={self.distribution!r}, "
            f"version={self.version!r}, entry_point={self.entry_point!r})"
        )


@dataclass(frozen=True)
class ResolvedExtension:
    """What a ``use`` resolved to: the install callable and who it is in log lines.

    ``distribution``/``version`` are read through ``info`` on access, so resolving on the
    load path does not parse the distribution's metadata.
    """

    use: str
    attribution: str
    install: Callable[..., Any]
    entry_point: str | None = None
    info: InstalledExtension | None = field(default=None, repr=False, compare=False)

    @property
    def distribution(self) -> str | None:
        return self.info.distribution if self.info is not None else None

    @property
    def version(self) -> str | None:
        return self.info.version if self.info is not None else None


def _dist_of(ep: importlib_metadata.EntryPoint) -> tuple[str | None, str | None]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return None, None
    try:
        return dist.metadata["Name"], dist.version
    except Exception:  # broken metadata must not hide the entry point itself
        return None, None


class EntryPointIndex:
    """The installed ``deerflow.extensions`` entry points, read once.

    Build it with :meth:`scan` at startup (or from explicit entry points in tests) and pass
    the same object to the loader and the CLI. When two distributions declare the same name
    the first one found wins, as ``importlib.metadata`` itself orders them by ``sys.path``.
    """

    def __init__(self, extensions: Iterable[InstalledExtension | importlib_metadata.EntryPoint] = ()) -> None:
        by_name: dict[str, InstalledExtension] = {}
        for item in extensions:
            if isinstance(item, importlib_metadata.EntryPoint):
                item = InstalledExtension.from_entry_point(item)
            by_name.setdefault(item.name, item)
        self._by_name = by_name

    @classmethod
    def scan(cls, group: str = ENTRY_POINT_GROUP) -> EntryPointIndex:
        """The one scan of installed metadata this process makes."""
        return cls(importlib_metadata.entry_points(group=group))

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, str], group: str = ENTRY_POINT_GROUP) -> EntryPointIndex:
        """An index of ``{name: "module:attr"}`` without installed metadata (tests, embedding)."""
        return cls(importlib_metadata.EntryPoint(name, value, group) for name, value in mapping.items())

    # -- lookups ----------------------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._by_name))

    def get(self, name: str) -> InstalledExtension | None:
        return self._by_name.get(name)

    def by_value(self, value: str) -> InstalledExtension | None:
        """The entry point whose value is ``value`` (so ``module:attr`` uses find their package)."""
        for item in self._by_name.values():
            if item.value == value:
                return item
        return None

    def attribution(self, use: str) -> str:
        """The name log lines use for ``use``, known without importing anything."""
        found = self._by_name.get(use)
        return found.value if found is not None else use

    def __iter__(self) -> Iterator[InstalledExtension]:
        return iter(self._by_name[name] for name in self.names)

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __repr__(self) -> str:
        return f"EntryPointIndex({', '.join(self.names)})"

    # -- distributions for module:attr uses -------------------------------------------------
    @cached_property
    def _packages(self) -> Mapping[str, list[str]]:
        # Computed on first need only: it walks every installed distribution's file list.
        try:
            return importlib_metadata.packages_distributions()
        except Exception:
            return {}

    def distribution_of_module(self, module: str) -> tuple[str | None, str | None]:
        """``(name, version)`` of the distribution providing ``module``'s top-level package."""
        names = self._packages.get(module.split(".", 1)[0])
        if not names:
            return None, None
        try:
            return names[0], importlib_metadata.version(names[0])
        except Exception:
            return names[0], None

    # -- resolution -------------------------------------------------------------------------
    def describe(self, use: str) -> InstalledExtension | None:
        """What is known about ``use`` without importing it (entry point or owning package)."""
        found = self._by_name.get(use)
        if found is not None:
            return found
        if ":" in use:
            by_value = self.by_value(use)
            if by_value is not None:
                return by_value
            return InstalledExtension.from_module_path(use, self.distribution_of_module)
        return None

    def resolve(self, use: str) -> ResolvedExtension:
        """Import ``use`` and return its install callable (spec step 2.3).

        Raises :class:`ExtensionNotFoundError` (listing the installed names) or
        :class:`ExtensionImportError`; both carry a message fit for the log line.
        """
        found = self._by_name.get(use)
        if found is not None:
            target = _guarded_load(found.value, found.load)
            info = found
        elif ":" in use:
            target = _guarded_load(use, lambda: _import_path(use))
            info = self.describe(use) or InstalledExtension(use, use)
        else:
            installed = ", ".join(self.names) or "none"
            raise ExtensionNotFoundError(
                f"no extension named {use!r} in entry-point group {ENTRY_POINT_GROUP} "
                f"(installed: {installed}); use an installed name or a 'module:attr' path"
            )
        if not callable(target):
            raise ExtensionImportError(f"{info.value} is a {type(target).__name__}, not a callable install()")
        entry_point = info.name if info.entry_point is not None or use in self._by_name else None
        return ResolvedExtension(use, info.value, target, entry_point, info)


def _guarded_load(value: str, load: Callable[[], Any]) -> Any:
    try:
        return load()
    except ExtensionImportError:
        raise
    except Exception as exc:
        # Import-time errors of any type are the extension's failure, not the host's.
        raise ExtensionImportError(f"cannot import {value}: {type(exc).__name__}: {exc}") from exc


def _import_path(value: str) -> Any:
    module_name, sep, attr = value.partition(":")
    module_name, attr = module_name.strip(), attr.strip()
    if not module_name or (sep and not attr):
        raise ExtensionImportError(f"{value!r} is not a 'module:attr' path")
    target: Any = importlib.import_module(module_name)
    for part in attr.split(".") if attr else ():
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ExtensionImportError(f"cannot import {value}: module {module_name!r} has no {attr!r}") from None
    return target


def resolve_extension(use: str, entry_points: EntryPointIndex | None = None) -> ResolvedExtension:
    """Resolve one ``use`` (scanning entry points if no index is given)."""
    return (entry_points if entry_points is not None else EntryPointIndex.scan()).resolve(use)
