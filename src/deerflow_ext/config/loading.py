"""Reading ``config.yaml``: ruamel.yaml for the text, pydantic for the shape.

The file is parsed in round-trip mode even though nothing is written back, because the
round-trip nodes remember where each key and item came from (``.lc``). A validation error
from pydantic only carries a path such as ``("plugins", 1, "enabled")``; walking that path
through the nodes turns it into ``config.yaml:7: plugins[1].enabled: ...`` — the line an
operator has to fix. Every failure, from a stray tab to a billion-laughs alias bomb, becomes
one :class:`ConfigError` naming file and line; startup never shows a YAML traceback.
"""

from __future__ import annotations

import gc
import sys
import types
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.reader import ReaderError

from .schema import AppConfig

__all__ = [
    "MAX_CONFIG_BYTES",
    "MAX_DEPTH",
    "MAX_NODES",
    "ConfigError",
    "app_config_from_text",
    "config_line",
    "format_problem",
    "load_app_config",
    "parse_yaml",
    "read_config_text",
]

# config.yaml is a short hand-written file. The limits exist so a wrong path (a log file, a
# database dump) or an alias bomb fails fast with a message instead of eating the heap.
MAX_CONFIG_BYTES = 4 * 1024 * 1024
MAX_NODES = 200_000
MAX_DEPTH = 64


class ConfigError(Exception):
    """``config.yaml`` exists but cannot be used; the message is ``file:line: field: problem``.

    ``problems`` holds one such line per problem (pydantic may report several at once);
    ``line`` and ``field`` describe the first, for callers that want to point at it.
    """

    def __init__(
        self,
        path: str | Path,
        line: int | None,
        field: str | None,
        problem: str,
        *,
        problems: Sequence[str] = (),
    ) -> None:
        self.path = str(path)
        self.line = line
        self.field = field
        self.problem = problem
        first = _format(self.path, line, field, problem)
        self.problems = tuple(problems) or (first,)
        super().__init__("\n".join(self.problems))


def _format(path: str, line: int | None, field: str | None, problem: str) -> str:
    where = f"{path}:{line}" if line is not None else path
    return f"{where}: {field}: {problem}" if field else f"{where}: {problem}"


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False  # a repeated key is an error, never "last one wins"
    return yaml


def _line_of(exc: BaseException, text: str) -> int | None:
    if isinstance(exc, MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        return mark.line + 1 if mark is not None else None
    if isinstance(exc, ReaderError):
        return text.count("\n", 0, max(exc.position, 0)) + 1
    return None


def _problem(exc: BaseException) -> str:
    if isinstance(exc, MarkedYAMLError):
        parts = [p for p in (exc.context, exc.problem) if p]
        return "; ".join(parts) if parts else type(exc).__name__
    if isinstance(exc, ReaderError):
        return f"unacceptable character {exc.character!r}: {exc.reason}"
    return f"{type(exc).__name__}: {exc}"


def parse_yaml(text: str, path: str | Path = "config.yaml") -> Any:
    """Parse ``text`` into round-trip nodes (``CommentedMap`` keeps each key's line)."""
    with _half_built_nodes_discarded():
        try:
            return _yaml().load(text)
        except (YAMLError, ReaderError) as exc:
            error = ConfigError(path, _line_of(exc, text), None, _problem(exc))
        except RecursionError:
            error = ConfigError(path, None, None, "nesting deeper than the parser can follow")
        except Exception as exc:  # ruamel raises plain TypeError/ValueError for a few odd documents
            error = ConfigError(path, None, None, f"could not parse: {_problem(exc)}")
        # The half-built nodes of a failed parse are released here, quietly. They are all in
        # the youngest generations (automatic collection was paused while parsing), so a
        # young collection finds them: microseconds, where a full one costs a large
        # process (a Gateway, a test run) half a second per bad document.
        gc.collect(1)
    raise error from None


@contextmanager
def _half_built_nodes_discarded() -> Iterator[None]:
    """Keep ruamel's half-built nodes from printing a traceback when a parse fails.

    The round-trip constructor builds tagged nodes with generators that raise
    ``ConstructorError`` when they are *closed* unfinished, which is what happens to them
    when a parse fails part-way (``[!!pairs x, =]``): Python then reports "Exception ignored
    in: <generator ...>" with a traceback on stderr, at whatever moment the generator is
    collected. Inside this block those reports, and only those, are dropped; the parse's
    own error is the ConfigError line.
    """
    previous = sys.unraisablehook
    collecting = gc.isenabled()

    def hook(unraisable: Any) -> None:
        obj = unraisable.object
        if isinstance(obj, types.GeneratorType) and "ruamel" in obj.gi_code.co_filename:
            return
        previous(unraisable)

    sys.unraisablehook = hook
    gc.disable()  # nothing the parse allocates is promoted to the old generation meanwhile
    try:
        yield
    finally:
        if collecting:
            gc.enable()
        sys.unraisablehook = previous


class _Plain:
    """Round-trip nodes -> plain dicts, lists and scalars, with node and depth budgets.

    Plain values matter beyond validation: an entry's ``config`` is handed to ``install()``,
    which should receive ordinary ``dict``/``str``/``int`` objects, not ruamel subclasses.
    The node budget counts every visit, so aliases that fan out exponentially hit it quickly.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = path
        self.nodes = 0

    def convert(self, node: Any, depth: int = 0, line: int | None = None) -> Any:
        self.nodes += 1
        here = _node_line(node, line)
        if self.nodes > MAX_NODES:
            raise ConfigError(self.path, here, None, f"more than {MAX_NODES} values (do aliases expand recursively?)")
        if depth > MAX_DEPTH:
            raise ConfigError(self.path, here, None, f"nested more than {MAX_DEPTH} levels deep")
        if isinstance(node, Mapping):
            out = {}
            for key, value in node.items():
                if isinstance(key, (Mapping, list, tuple, set)):
                    # YAML allows ``? {name: a}`` as a key; no setting of ours is keyed that way,
                    # and a dict cannot even be a Python key (it used to surface as a TypeError).
                    kind = "a mapping" if isinstance(key, Mapping) else "a list"
                    line = _key_line(node, key, here)
                    raise ConfigError(self.path, line, None, f"a key must be a single value, not {kind}")
                out[self.convert(key, depth + 1, here)] = self.convert(value, depth + 1, here)
            return out
        if isinstance(node, (list, tuple)):
            items = [self.convert(v, depth + 1, here) for v in node]
            return tuple(items) if isinstance(node, tuple) else items
        if isinstance(node, bool) or node is None:
            return node
        if isinstance(node, str):
            return str(node)
        if isinstance(node, int):
            return int(node)
        if isinstance(node, float):
            return float(node)
        # Timestamps, binary and anything else ruamel builds are already plain values.
        return node


def _key_line(mapping: Any, key: Any, default: int | None) -> int | None:
    try:
        return int(mapping.lc.key(key)[0]) + 1
    except (AttributeError, KeyError, TypeError, IndexError):
        return default


def _node_line(node: Any, default: int | None) -> int | None:
    lc = getattr(node, "lc", None)
    if isinstance(node, (CommentedMap, CommentedSeq)) and lc is not None and lc.line is not None:
        return int(lc.line) + 1
    return default


def _field_path(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _locate(root: Any, loc: Sequence[int | str]) -> int | None:
    """The 1-based line of the deepest node on ``loc`` that exists in the document.

    A key that is present points at its own line; a missing key (``Field required``) points
    at the mapping that should have had it, which is where the operator has to add it.
    """
    node = root
    line = _node_line(root, 1)
    for part in loc:
        if isinstance(node, CommentedMap) and part in node:
            try:
                line = int(node.lc.key(part)[0]) + 1
            except (KeyError, TypeError, AttributeError):
                pass
            node = node[part]
        elif isinstance(node, CommentedSeq) and isinstance(part, int) and 0 <= part < len(node):
            try:
                line = int(node.lc.item(part)[0]) + 1
            except (KeyError, TypeError, AttributeError, IndexError):
                pass
            node = node[part]
        else:
            break
    return line


def _validate(root: Any, data: Any, path: str | Path) -> AppConfig:
    try:
        return AppConfig.model_validate(data)
    except ValidationError as exc:
        problems: list[str] = []
        first: tuple[int | None, str | None, str] | None = None
        for error in exc.errors(include_url=False):
            loc = tuple(error.get("loc", ()))
            line = _locate(root, loc)
            field = _field_path(loc) or None
            msg = str(error.get("msg", "invalid"))
            problems.append(_format(str(path), line, field, msg))
            if first is None:
                first = (line, field, msg)
        assert first is not None
        raise ConfigError(path, first[0], first[1], first[2], problems=problems) from None


def app_config_from_text(text: str, path: str | Path = "config.yaml") -> AppConfig:
    """Validate the YAML ``text`` of a config file (``path`` only labels messages)."""
    root = parse_yaml(text, path)
    if root is None:
        return AppConfig()
    if not isinstance(root, CommentedMap):
        kind = "a list" if isinstance(root, list) else f"a {type(root).__name__} scalar"
        raise ConfigError(path, 1, None, f"the top level must be a mapping of sections, got {kind}")
    try:
        data = _Plain(path).convert(root)
    except RecursionError:
        raise ConfigError(path, None, None, f"nested more than {MAX_DEPTH} levels deep") from None
    return _validate(root, data, path)


def read_config_text(path: str | Path) -> str | None:
    """The file's text, ``None`` when it does not exist; unreadable files are ConfigErrors."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise ConfigError(path, None, None, "is a directory, not a YAML file") from None
    except OSError as exc:
        raise ConfigError(path, None, None, f"cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(path, None, None, f"larger than {MAX_CONFIG_BYTES} bytes; is this the right file?")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(path, line, None, f"not UTF-8 text (byte {raw[exc.start]:#04x})") from None


def load_app_config(path: str | Path) -> AppConfig:
    """Load and validate ``config.yaml``; a missing file is an empty config (no extensions).

    Only a *missing* file is tolerated: a file that exists but does not validate stops
    startup, because silently running without a required audit extension is worse than
    not running.
    """
    text = read_config_text(path)
    if text is None:
        return AppConfig()
    return app_config_from_text(text, path)


def config_line(path: str | Path, loc: Sequence[int | str]) -> int | None:
    """The line of ``loc`` (``("models", 0, "temperature")``) in the file at ``path``.

    For checks that run after validation (model construction) and must still point the
    operator at a line; ``None`` when the file is gone or no longer parses.
    """
    try:
        text = read_config_text(path)
        return _locate(parse_yaml(text), loc) if text is not None else None
    except ConfigError:
        return None


def format_problem(path: str | Path, loc: Sequence[int | str], problem: str) -> str:
    """``file:line: field: problem`` for ``loc``, in :class:`ConfigError`'s own shape."""
    return _format(str(path), config_line(path, loc), _field_path(loc) or None, problem)
