"""In-place edits of ``config.yaml`` that leave everything else byte for byte.

Operators annotate ``config.yaml`` (why an extension is required, who owns a prefix), so a
CLI that rewrote the file in its own style would destroy information. Edits are therefore
*textual*, guided by ruamel.yaml's round-trip node positions: flipping ``enabled`` rewrites
one scalar (or inserts one line), adding appends one block, removing deletes one entry's
lines. Each edit is then verified by re-parsing the new text and comparing it with the
intended data; only if that check fails (flow-style lists, exotic layouts) does the edit fall
back to a ruamel round-trip dump, which still keeps comments, quotes and key order.

Writes are atomic (temporary file in the same directory, then ``os.replace``) and serialised
by an exclusive ``fcntl.flock`` on ``<config>.lock``, so two processes editing at once each
see the other's change instead of overwriting it or leaving a torn file.
"""

from __future__ import annotations

import copy
import fcntl
import io
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from .loading import ConfigError, _Plain, app_config_from_text, parse_yaml, read_config_text
from .schema import ModelEntry, PluginEntry, plugin_names


class _EntryPoint(Protocol):
    @property
    def value(self) -> str: ...


class EntryPointIndex(Protocol):
    """What an edit needs of ``extensions.plugin_loading.discovery.EntryPointIndex``: an entry point by name.

    A protocol, so configuration (a lower layer) does not import the extension runtime.
    """

    def get(self, name: str) -> _EntryPoint | None: ...


__all__ = [
    "ConfigEditError",
    "PluginNotFoundError",
    "add_model",
    "add_plugin",
    "atomic_write",
    "config_lock",
    "find_plugin",
    "remove_plugin",
    "set_plugin_enabled",
]


class ConfigEditError(Exception):
    """The requested edit does not make sense for this file (ambiguous name, duplicate, ...)."""


class PluginNotFoundError(ConfigEditError, LookupError):
    """No ``plugins:`` entry matches the given name."""


# -- locking and atomic replacement --------------------------------------------------------
def _target(path: str | Path) -> Path:
    # Edit the file a symlink points at: replacing the link itself would silently detach a
    # deployment's shared config.
    p = Path(path)
    return p.resolve() if p.is_symlink() else p


def _acquire(lock_path: Path) -> int:
    """An fd holding ``flock`` on the file that *is* ``lock_path`` now.

    The holder deletes the lock file on release (nothing is left beside config.yaml), so a
    waiter may wake up holding a lock on a file that no longer has that name; it then tries
    again on the current one. This is the usual lock-and-unlink protocol.
    """
    while True:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_ino == os.stat(lock_path).st_ino:
                return fd
        except FileNotFoundError:
            pass
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


@contextmanager
def config_lock(path: str | Path) -> Iterator[None]:
    """Hold an exclusive lock on ``<config>.lock`` (a separate file, so readers never block);
    the lock file is removed again when the edit is done."""
    target = _target(path)
    lock_path = target.with_name(target.name + ".lock")
    fd = _acquire(lock_path)
    try:
        yield
    finally:
        try:
            os.unlink(lock_path)
        except FileNotFoundError:
            pass
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def atomic_write(path: str | Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one rename; readers see the old file or the new one.

    Crash-safe as well as atomic: the new file's bytes are fsynced before the rename and the
    directory after it, so a power cut cannot leave an empty or truncated file behind the new
    name, nor lose the rename itself. The file keeps its mode, and a symlink is written
    through: its target is replaced and the link stays a link. Any failure (a full disk, a
    failed fsync or rename) leaves the original untouched and no temporary file behind.
    """
    target = _target(path)
    try:
        mode: int | None = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_directory(target.parent)


def _fsync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable (POSIX: the entry lives in the directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # a platform or filesystem that cannot open directories: nothing to sync
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- finding an entry ----------------------------------------------------------------------
def find_plugin(entries: list[Any], name: str, entry_points: EntryPointIndex | None = None) -> int:
    """Index of the entry ``name`` designates: its ``name``, its ``use``, its ``package``, or an
    entry-point name.

    ``name`` wins outright (names are unique; a record without one is named by its ``use``,
    or ``<use>#<n>`` for the n-th unnamed record of that ``use``: ``schema.plugin_names``);
    otherwise ``use``, ``package`` (the distribution, compared as pip normalises names) and
    entry-point matches must designate exactly one entry — the same ``use`` twice is
    ambiguous and asks for the name.
    """
    dicts = [e if isinstance(e, Mapping) else {} for e in entries]
    names = plugin_names(dicts)
    by_name = [i for i, given in enumerate(names) if given == name]
    if by_name:
        return by_name[0]
    uses = {name}
    installed = entry_points.get(name) if entry_points is not None else None
    if installed is not None:
        uses.add(installed.value)
    wanted = _distribution_key(name)
    matches = [
        i
        for i, e in enumerate(dicts)
        if e.get("use") in uses or (isinstance(e.get("package"), str) and _distribution_key(e["package"]) == wanted)
    ]
    if len(matches) == 1:
        return matches[0]
    if matches:
        labels = ", ".join(repr(names[i]) for i in matches)
        raise ConfigEditError(f"{name!r} matches several plugins entries ({labels}); give the entry's name")
    configured = ", ".join(str(given) for given in names) or "none"
    raise PluginNotFoundError(f"no plugins entry matches {name!r} (configured: {configured})")


def _distribution_key(name: str) -> str:
    """A distribution name as pip compares them (PEP 503): case and ``-_.`` runs do not matter."""
    return re.sub(r"[-_.]+", "-", name).lower()


# -- text helpers ---------------------------------------------------------------------------
_SCALAR = re.compile(r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\n]|'')*'|[^\s#,\]}][^#,\]}\n]*?(?=\s*(?:#|$|,|\]|}))")


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _eol(lines: list[str]) -> str:
    for line in lines:
        if line.endswith("\r\n"):
            return "\r\n"
        if line.endswith("\n"):
            return "\n"
    return "\n"


def _is_filler(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


def _item_start(lines: list[str], seq: CommentedSeq, i: int) -> int:
    line = int(seq.lc.item(i)[0])
    # "-\n  name: x" puts the node on the line after its dash.
    if line > 0 and not lines[line].lstrip().startswith("-") and lines[line - 1].strip() == "-":
        return line - 1
    return line


def _section_end(lines: list[str], root: CommentedMap, key: str) -> int:
    """First line after the top-level ``key`` section (the next top-level key, or EOF)."""
    keys = list(root.keys())
    after = keys[keys.index(key) + 1 :]
    return int(root.lc.key(after[0])[0]) if after else len(lines)


def _item_span(lines: list[str], root: CommentedMap, seq: CommentedSeq, i: int) -> tuple[int, int]:
    """Lines ``[start, end)`` of item ``i``; trailing blanks and comments belong to what follows."""
    start = _item_start(lines, seq, i)
    end = _item_start(lines, seq, i + 1) if i + 1 < len(seq) else _section_end(lines, root, "plugins")
    while end > start + 1 and _is_filler(lines[end - 1]):
        end -= 1
    return start, end


def _null(representer: Any, data: None) -> Any:
    return representer.represent_scalar("tag:yaml.org,2002:null", "null")


def _dump(root: Any) -> str:
    yaml = YAML(typ="rt")
    # An explicit `key: null` stays written out (ruamel's round trip would leave `key:`).
    yaml.representer.add_representer(type(None), _null)
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    out = io.StringIO()
    yaml.dump(root, out)
    return out.getvalue()


def _entry_block(record: PluginEntry, dash_col: int, eol: str) -> list[str]:
    data: dict[str, Any] = {"name": record.name, "use": record.use}
    if record.package is not None:
        data["package"] = record.package
    data["enabled"] = record.enabled
    if record.required:
        data["required"] = True
    if record.intercept:
        data["intercept"] = True
    if record.table_prefix is not None:
        data["table_prefix"] = record.table_prefix
    if record.config:
        data["config"] = record.config
    yaml = YAML(typ="rt")
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=2, offset=0)
    out = io.StringIO()
    yaml.dump([data], out)
    pad = " " * dash_col
    return [pad + line + eol for line in out.getvalue().splitlines()]


# -- the edit cycle -------------------------------------------------------------------------
def _plain(node: Any, path: Path) -> Any:
    return _Plain(path).convert(node)


def _locate(target: Path, root: Any, name: str, entry_points: EntryPointIndex | None) -> tuple[CommentedSeq, int]:
    """The ``plugins:`` sequence and the index of the entry ``name`` designates."""
    seq = _plugins_seq(root)
    if seq is None:
        raise PluginNotFoundError(f"no plugins entry matches {name!r} ({target} configures no plugins)")
    return seq, find_plugin(list(seq), name, entry_points)


def _plugins_seq(root: Any) -> CommentedSeq | None:
    plugins = root.get("plugins") if isinstance(root, CommentedMap) else None
    return plugins if isinstance(plugins, CommentedSeq) else None


def _load(path: Path) -> tuple[str, Any]:
    text = read_config_text(path)
    if text is None:
        return "", None
    app_config_from_text(text, path)  # refuse to edit a file that does not validate today
    return text, parse_yaml(text, path)


def _commit(path: Path, candidate: str | None, root: Any, expected: Any) -> None:
    """Write ``candidate`` if it parses to ``expected``; otherwise a round-trip dump of ``root``."""
    text: str | None = None
    if candidate is not None:
        try:
            if _plain(parse_yaml(candidate, path), path) == expected:
                text = candidate
        except ConfigError:
            text = None
    if text is None:
        text = _dump(root)
    app_config_from_text(text, path)  # never write a file the Gateway would refuse
    atomic_write(path, text)


def set_plugin_enabled(
    path: str | Path, name: str, enabled: bool, *, entry_points: EntryPointIndex | None = None
) -> bool:
    """Set ``enabled`` on the entry ``name`` designates; ``False`` when it already had that value."""
    target = _target(path)
    with config_lock(target):
        text, root = _load(target)
        seq, index = _locate(target, root, name, entry_points)
        entry = seq[index]
        if entry.get("enabled", True) is enabled:
            return False
        expected = _plain(root, target)
        expected["plugins"][index]["enabled"] = enabled
        candidate = _flip(text, root, seq, index, enabled)
        entry["enabled"] = enabled
        _commit(target, candidate, root, expected)
        return True


def _flip(text: str, root: CommentedMap, seq: CommentedSeq, index: int, enabled: bool) -> str | None:
    entry = seq[index]
    if not isinstance(entry, CommentedMap) or entry.fa.flow_style():
        return None
    lines = _lines(text)
    word = "true" if enabled else "false"
    if "enabled" in entry:
        line_no, col = (int(v) for v in entry.lc.value("enabled"))
        line = lines[line_no]
        match = _SCALAR.match(line, col)
        if match is None:
            return None
        lines[line_no] = line[: match.start()] + word + line[match.end() :]
    else:
        # Insert right after ``use:`` at the same indentation as the entry's keys.
        anchor = "use" if "use" in entry else next(iter(entry))
        line_no, col = (int(v) for v in entry.lc.key(anchor))
        lines.insert(line_no + 1, " " * col + f"enabled: {word}" + _eol(lines))
    return "".join(lines)


def add_plugin(path: str | Path, record: PluginEntry | Mapping[str, Any]) -> PluginEntry:
    """Append a ``plugins:`` entry (creating the file or the section when missing)."""
    entry = record if isinstance(record, PluginEntry) else PluginEntry.model_validate(dict(record))
    target = _target(path)
    with config_lock(target):
        text, root = _load(target)
        if root is None:
            root = CommentedMap()
        seq = _plugins_seq(root)
        existing = list(seq) if seq is not None else []
        if entry.name in plugin_names(existing):
            raise ConfigEditError(f"a plugins entry named {entry.name!r} already exists")
        expected = _plain(root, target)
        new_item = entry.model_dump(exclude_defaults=True)
        new_item.setdefault("enabled", entry.enabled)
        expected.setdefault("plugins", [])
        if expected["plugins"] is None:
            expected["plugins"] = []
        expected["plugins"].append(_ordered(new_item))
        candidate = _append(text, root, seq, entry)
        if seq is None:
            seq = CommentedSeq()
            root["plugins"] = seq
        seq.append(CommentedMap(_ordered(new_item)))
        _commit(target, candidate, root, expected)
        return entry


def _ordered(item: dict[str, Any]) -> dict[str, Any]:
    order = ("name", "use", "package", "enabled", "required", "intercept", "table_prefix", "config")
    return {k: copy.deepcopy(item[k]) for k in order if k in item}


def _append(text: str, root: Any, seq: CommentedSeq | None, entry: PluginEntry) -> str | None:
    lines = _lines(text)
    eol = _eol(lines)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += eol
    if not isinstance(root, CommentedMap) or "plugins" not in root:
        block = ["plugins:" + eol, *_entry_block(entry, 2, eol)]
        return "".join(lines + block)
    if seq is None or len(seq) == 0 or seq.fa.flow_style():
        return None
    _, end = _item_span(lines, root, seq, len(seq) - 1)
    first = _item_start(lines, seq, 0)
    dash_col = lines[first].index("-")
    return "".join(lines[:end] + _entry_block(entry, dash_col, eol) + lines[end:])


def remove_plugin(path: str | Path, name: str, *, entry_points: EntryPointIndex | None = None) -> PluginEntry:
    """Delete the entry ``name`` designates and return it."""
    target = _target(path)
    with config_lock(target):
        text, root = _load(target)
        seq, index = _locate(target, root, name, entry_points)
        expected = _plain(root, target)
        removed = PluginEntry.model_validate(expected["plugins"].pop(index))
        candidate = _cut(text, root, seq, index)
        del seq[index]
        _commit(target, candidate, root, expected)
        return removed


def _cut(text: str, root: CommentedMap, seq: CommentedSeq, index: int) -> str | None:
    if seq.fa.flow_style():
        return None
    lines = _lines(text)
    start, end = _item_span(lines, root, seq, index)
    # The comment lines right above an entry describe it: they go with it, and so does the
    # blank line that separated them from what came before.
    while start > 0 and lines[start - 1].strip().startswith("#"):
        start -= 1
    if start > 0 and not lines[start - 1].strip() and (end >= len(lines) or not lines[end].strip()):
        start -= 1
    rest = lines[:start] + lines[end:]
    if len(seq) == 1:
        # The section would be left as ``plugins:`` (null); say "no plugins" explicitly.
        key_line = int(root.lc.key("plugins")[0])
        match = re.match(r"^(\s*[\"']?plugins[\"']?\s*:)([ \t]*)(#.*)?(\r?\n)?$", rest[key_line])
        if match is None:
            return None
        comment = f" {match.group(3)}" if match.group(3) else ""
        rest[key_line] = f"{match.group(1)} []{comment}{match.group(4) or ''}"
    return "".join(rest)


def add_model(path: str | Path, record: Mapping[str, Any]) -> ModelEntry:
    """Add a ``models:`` entry (creating the file or the section when missing); nothing else changes.

    What README's "Real model" step runs, so a config.yaml the operator already has (an
    extension enabled in it) is added to, never written over. A name already configured is
    refused. The edit is a round-trip dump (``models: []``, the example's, is a flow list),
    which keeps comments, quotes and key order; the file is validated before it is written.
    """
    entry = ModelEntry.model_validate(dict(record))
    target = _target(path)
    with config_lock(target):
        text, root = _load(target)
        if root is None:
            root = CommentedMap()
        models = root.get("models")
        existing = list(models) if isinstance(models, CommentedSeq) else []
        if any(isinstance(e, Mapping) and e.get("name") == entry.name for e in existing):
            raise ConfigEditError(f"a models entry named {entry.name!r} already exists in {target}")
        item = {"name": entry.name, "use": entry.use, **({"purposes": list(entry.purposes)} if entry.purposes else {})}
        item.update(entry.params)
        expected = _plain(root, target) if text else {}
        if not isinstance(models, CommentedSeq):
            models = CommentedSeq()
            root["models"] = models
        models.fa.set_block_style()
        models.append(CommentedMap(item))
        expected["models"] = [*(expected.get("models") or []), item]
        _commit(target, None, root, expected)
        return entry
