"""What an operator can see of a ``plugins:`` list, as a value two runs can be compared on.

``extensions check`` knows nothing about the operator's extensions, so it compares what
the deployment shows from outside: whether each entry loaded, the diagnostics attributed
to it, how the runs ended and what they answered, what its routers answer (``GET``
routes without path parameters) and the rows of the tables its ``table_prefix`` owns
(read after shutdown, when services have flushed). Generated neighbours are left out: they
are the disturbance, not the result.

Two runs of the very same list differ in ids, timestamps and durations. Those are masked in
two ways: strings that look like ids, hashes, addresses or times are replaced by a
placeholder, and anything that differs between two runs of the given list in the given
order is noise by definition and is masked wherever it appears (:func:`noise`).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from .harness import HostHarness
from .neighbours import NEIGHBOUR_USE

__all__ = [
    "Path",
    "first_difference",
    "masked",
    "noise",
    "normalised",
    "operator_view",
    "routes_of",
    "settled",
]

Path = tuple[str | int, ...]

_PATTERNS = (
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?"), "<time>"),
    (re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"), "<id>"),
    (re.compile(r"0x[0-9a-fA-F]+"), "<addr>"),
    (re.compile(r"\b[0-9a-fA-F]{12,}\b"), "<hex>"),
)
_NOISE = "<varies>"


def normalised(value: Any, directory: str | None = None) -> Any:
    """*value* as plain JSON-like data with ids, hashes, addresses, times and *directory* masked."""
    if isinstance(value, str):
        if directory:
            value = value.replace(directory, "<dir>")
        for pattern, placeholder in _PATTERNS:
            value = pattern.sub(placeholder, value)
        return value
    if isinstance(value, Mapping):
        return {str(k): normalised(v, directory) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalised(v, directory) for v in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return normalised(repr(value), directory)


def noise(a: Any, b: Any, at: Path = ()) -> frozenset[Path]:
    """The paths at which two runs of the same list differ: a list of another length, a
    mapping with other keys or a different leaf is noise as a whole."""
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        return frozenset().union(*(noise(a[k], b[k], (*at, k)) for k in a))
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return frozenset().union(*(noise(x, y, (*at, i)) for i, (x, y) in enumerate(zip(a, b, strict=True))))
    return frozenset() if a == b else frozenset({at})


def masked(value: Any, paths: frozenset[Path], at: Path = ()) -> Any:
    """*value* with every noise path replaced by a placeholder."""
    if at in paths:
        return _NOISE
    if isinstance(value, dict):
        return {k: masked(v, paths, (*at, k)) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(v, paths, (*at, i)) for i, v in enumerate(value)]
    return value


def first_difference(expected: Any, got: Any, at: Path = ()) -> str | None:
    """Where *got* first differs from *expected*, as ``path: expected != got``; ``None`` if equal."""
    if isinstance(expected, dict) and isinstance(got, dict):
        for key in sorted(expected.keys() | got.keys(), key=str):
            if key not in got or key not in expected:
                absent = "<absent>"
                return f"{_path((*at, key))}: {_short(expected.get(key, absent))} != {_short(got.get(key, absent))}"
            found = first_difference(expected[key], got[key], (*at, key))
            if found:
                return found
        return None
    if isinstance(expected, list) and isinstance(got, list) and len(expected) == len(got):
        for i, (x, y) in enumerate(zip(expected, got, strict=True)):
            found = first_difference(x, y, (*at, i))
            if found:
                return found
        return None
    return None if expected == got else f"{_path(at)}: {_short(expected)} != {_short(got)}"


def _path(at: Path) -> str:
    return ".".join(str(p) for p in at) or "<the whole result>"


def _short(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- the operator's view of a host ---------------------------------------------------------------
def _subject(extension: str) -> bool:
    return extension != NEIGHBOUR_USE


def _get_routes(host: HostHarness) -> list[str]:
    paths: list[str] = []
    for contribution in getattr(host.app.state, "mounted_routers", ()):
        if not _subject(contribution.extension):
            continue
        for route in getattr(contribution.contributor, "routes", ()):
            path = getattr(route, "path", "")
            if "GET" in (getattr(route, "methods", None) or ()) and "{" not in path:
                paths.append(path)
    return sorted(set(paths))


def _answer(host: HostHarness, path: str) -> Any:
    response = host.client.get(path)
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    return {"status": response.status_code, "body": body}


def settled(
    read: Callable[[], Any],
    matches: Callable[[Any], bool] | None = None,
    *,
    timeout: float = 1.0,
    interval: float = 0.05,
) -> Any:
    """What ``read()`` returns once it stops changing, or as soon as it ``matches``.

    A service may still be writing what a route reads when the run's stream ends; polling
    until two reads agree, or until the value matches what the given order showed, keeps
    that race out of the comparison without waiting on the passing path.
    """
    deadline = time.monotonic() + timeout
    previous = read()
    while True:
        if matches is not None and matches(previous):
            return previous
        if time.monotonic() >= deadline:
            return previous
        time.sleep(interval)
        current = read()
        if current == previous and matches is None:
            return current
        previous = current


def routes_of(host: HostHarness) -> dict[str, Any]:
    """What the routers of the entries under test answer: ``GET`` routes without path parameters."""
    directory = str(host.config_path.parent)
    return {path: normalised(_answer(host, path), directory) for path in _get_routes(host)}


def _prefixes(host: HostHarness) -> list[str]:
    return sorted({p.prefix for p in host.extensions.table_prefixes if _subject(p.extension)})


def operator_view(host: HostHarness, routes: Any) -> dict[str, Any]:
    """The comparable result of one closed host: loads, diagnostics, runs, routes, owned tables."""
    directory = str(host.config_path.parent)
    diagnostics = sorted(
        (d.extension, d.phase, d.message) for d in host.diagnostics.snapshot() if _subject(d.extension)
    )
    tables = {
        table: sorted((normalised(list(row), directory) for row in host.table_rows(table)), key=json.dumps)
        for prefix in _prefixes(host)
        for table in host.table_names(prefix)
    }
    runs = [{"status": r.status, "outcome": r.outcome, "answer": r.answer} for r in host.runs]
    view: dict[str, Any] = normalised(
        {
            "loaded": sorted(e for e in host.extensions.loaded if _subject(e)),
            "diagnostics": [list(d) for d in diagnostics],
            "runs": runs,
            "routes": routes,
            "tables": tables,
        },
        directory,
    )
    return view
