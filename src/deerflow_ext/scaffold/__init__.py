"""``deerflow-ext extensions new NAME``: a new extension package that passes ``nox`` as generated.

The package is what ``plugins_examples/`` shows, minimal: a ``pyproject.toml`` declaring the
entry point and depending on the contract (``deerflow-extension-api``) by this host's
release line, an ``install()`` with a lifecycle contributor and a router, ``tests/`` with
one ordinary test (the ``deerflow_host`` fixture) and one property test
(``check_same_result``), and the ``noxfile.py`` every example shares. ``pyproject.toml`` records
the host to test against (``[tool.deerflow-ext] host``): where the running host was installed
from (:func:`deerflow_ext.distribution.host_source`: a checkout, a wheel, a VCS URL), so the
package's nox installs that host, not a ``deerflow-ext`` no index has. Files are rendered from
``template/`` with :class:`string.Template` (``${module}``, ``${entry_point}``, ...); a path
part ``__module__`` becomes the import name.

``extensions new --full-stack NAME`` renders ``full_stack/`` instead (with the same
``noxfile.py``): a plugin of DeerFlow's contract, ``registry.plugin(PluginContribution(...))``
with a model tool, a backend action, a packaged page (``static/``: an ES module and its
``ui_manifest.json``, no build step) and a setting, pinned to the contract's patch that has
them, and tests that drive all three through a real Gateway.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import metadata, resources
from importlib.resources.abc import Traversable
from pathlib import Path
from string import Template

from deerflow_ext import __version__
from deerflow_ext.distribution import host_source
from deerflow_extension_api import API_VERSION

__all__ = ["NOXFILE", "Scaffold", "ScaffoldError", "create_package"]

_NAME = re.compile(r"^[a-z][a-z0-9]*(?:[_-][a-z0-9]+)*$")
_TEMPLATE_SUFFIX = ".tmpl"


class ScaffoldError(ValueError):
    """The package cannot be generated; the message is the one line the CLI prints."""


@dataclass(frozen=True)
class Scaffold:
    """The names one generated package uses, all derived from the ``NAME`` given."""

    entry_point: str
    module: str
    distribution: str

    @classmethod
    def named(cls, name: str) -> Scaffold:
        if not _NAME.match(name):
            raise ScaffoldError(
                f"{name!r} is not a usable extension name: lowercase letters and digits, "
                "words joined by '_' or '-', starting with a letter (e.g. acme_audit)"
            )
        module = name.replace("-", "_")
        return cls(entry_point=module, module=module, distribution=module.replace("_", "-"))

    def values(self) -> dict[str, str]:
        major, minor, *_ = __version__.split(".")
        return {
            "host_source": json.dumps(_recorded_source()),  # a TOML basic string
            "entry_point": self.entry_point,
            "module": self.module,
            "distribution": self.distribution,
            "api": API_VERSION,
            "api_line": ".".join(API_VERSION.split(".")[:2]),
            "host_version": __version__,
            "next_minor": f"{major}.{int(minor) + 1}",
            # A full-stack plugin's names: DeerFlow's namespace and browser module id patterns
            # take the distribution name as it is ([a-z][a-z0-9.-]: no underscore).
            "namespace": self.distribution,
            "module_id": f"{self.distribution}.v1",
        }


def _recorded_source() -> str:
    """What the package's noxfile installs the host from ("" for the released one)."""
    try:
        return host_source().location
    except metadata.PackageNotFoundError:  # run from a source tree nobody installed
        return ""


def _template(name: str = "template") -> Traversable:
    return resources.files(__name__).joinpath(name)


NOXFILE = "noxfile.py"
"""The one file rendered verbatim, identical in every generated package and every example."""


def _files(root: Traversable, at: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Traversable]]:
    found: list[tuple[tuple[str, ...], Traversable]] = []
    for item in sorted(root.iterdir(), key=lambda t: t.name):
        if item.name == "__pycache__":
            continue
        if item.is_dir():
            found += _files(item, (*at, item.name))
        else:
            found.append(((*at, item.name), item))
    return found


def create_package(name: str, directory: Path, *, full_stack: bool = False) -> Path:
    """Write the package for *name* into ``directory / <distribution>`` and return that path;
    ``full_stack`` makes it a full-stack plugin (``full_stack/``, the shared ``noxfile.py``).

    Refuses a target that exists and is not empty: scaffolding never overwrites work.
    """
    scaffold = Scaffold.named(name)
    target = directory / scaffold.distribution
    if target.exists() and any(target.iterdir()):
        raise ScaffoldError(f"{target} already exists and is not empty; choose another NAME or --directory")
    values = scaffold.values()
    files = _files(_template())
    if full_stack:
        files = [((NOXFILE,), _template().joinpath(NOXFILE)), *_files(_template("full_stack"))]
    for parts, source in files:
        relative = Path(*(part.replace("__module__", scaffold.module) for part in parts))
        text = source.read_text(encoding="utf-8")
        if relative.name.endswith(_TEMPLATE_SUFFIX):
            relative = relative.with_name(relative.name[: -len(_TEMPLATE_SUFFIX)])
            text = Template(text).substitute(values)
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return target
