"""The skills on disk and which are enabled, read again only when the files change.

Layout and rules, as DeerFlow's loader has them: every folder under ``<root>/public`` and
``<root>/custom`` (at any depth, hidden folders skipped) that holds a ``SKILL.md`` is a skill,
named by its front matter's ``name`` (a later one of the same name wins: custom over public),
described by its ``description``; a file without both is skipped with one warning line.
``extensions_config.json``'s ``skills`` section switches one off (``{"name": {"enabled":
false}}``); a skill it does not mention is enabled, as in DeerFlow.

Why a stat signature: the lead agent is built per run and an operator's ``deerflow-ext
extensions skill enable NAME`` (or a ``PUT /api/extensions-config``) must show in the next run
without a restart, but walking the tree and parsing YAML per run would cost every run. The
signature is the config file's and the category folders' change times, plus each skill
file's (each with its inode, size and link count): a handful of ``stat`` calls, and none but
the root's when there is no skills folder.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

__all__ = ["CATEGORIES", "SKILL_FILE", "Skill", "SkillShelf", "enabled_flags", "parse_skill", "scan_skills"]

logger = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"
CATEGORIES = ("public", "custom")
_MAX_FILE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Skill:
    """One skill: what the prompt lists (``name``, ``description``) and where its body is."""

    name: str
    description: str
    category: str
    path: Path


def split_front_matter(text: str) -> tuple[dict[str, Any] | None, str]:
    """``(front matter, body)`` of a SKILL.md; None when it opens with none."""
    if not text.startswith("---"):
        return None, text
    lines = text.splitlines(keepends=True)
    for end in range(1, len(lines)):
        if lines[end].strip() == "---":
            try:
                meta = YAML(typ="safe", pure=True).load("".join(lines[1:end]))
            except YAMLError:
                return None, text
            return (meta if isinstance(meta, dict) else None), "".join(lines[end + 1 :]).lstrip("\n")
    return None, text


def parse_skill(path: Path, category: str) -> Skill | None:
    """The skill ``path`` (a SKILL.md) declares; None, with a warning, when it declares none."""
    try:
        if path.stat().st_size > _MAX_FILE_BYTES:
            raise ValueError(f"larger than {_MAX_FILE_BYTES} bytes")
        meta, _ = split_front_matter(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        logger.warning("skill %s skipped: %s", path, exc)
        return None
    name = meta.get("name") if meta else None
    description = meta.get("description") if meta else None
    if not isinstance(name, str) or not name.strip() or not isinstance(description, str):
        logger.warning("skill %s skipped: its front matter needs a name and a description", path)
        return None
    return Skill(name.strip(), " ".join(description.split()), category, path)


def _skill_files(root: Path) -> Iterator[tuple[str, Path]]:
    for category in CATEGORIES:
        base = root / category
        if not base.is_dir():
            continue
        for folder, dirs, files in os.walk(base, followlinks=True):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            if SKILL_FILE in files:
                yield category, Path(folder) / SKILL_FILE


def scan_skills(root: Path) -> tuple[Skill, ...]:
    """Every skill under ``root``, by name."""
    found: dict[str, Skill] = {}
    for category, path in _skill_files(root):
        skill = parse_skill(path, category)
        if skill is not None:
            found[skill.name] = skill
    return tuple(found[name] for name in sorted(found))


def enabled_flags(path: Path) -> dict[str, bool]:
    """``extensions_config.json``'s ``skills`` switches; an unreadable file switches nothing
    (one warning: the Gateway's own routes report the file's problems)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        logger.warning("%s unreadable, every skill left enabled: %s", path, exc)
        return {}
    section = data.get("skills") if isinstance(data, dict) else None
    if not isinstance(section, dict):
        return {}
    return {name: bool(entry.get("enabled", True)) for name, entry in section.items() if isinstance(entry, dict)}


def _mtime(path: Path) -> tuple[int, ...] | None:
    """What changes when ``path`` does: its change time, and (a change within one clock tick
    of the last read shows no new time) its inode (an atomic replace), size and links (a new
    subfolder)."""
    try:
        found = path.stat()
    except OSError:
        return None
    return (found.st_mtime_ns, found.st_ino, found.st_size, found.st_nlink)


class SkillShelf:
    """The enabled skills of one skills folder and one ``extensions_config.json``."""

    def __init__(self, root: Path, extensions_config: Path) -> None:
        self.root = root
        self.extensions_config = extensions_config
        self._lock = threading.Lock()
        self._signature: tuple[Any, ...] | None = None
        self._files: tuple[Path, ...] = ()
        self._enabled: tuple[Skill, ...] = ()

    def _signature_now(self) -> tuple[Any, ...]:
        if _mtime(self.root) is None:
            return ()
        folders = tuple(_mtime(self.root / category) for category in CATEGORIES)
        return (folders, _mtime(self.extensions_config), tuple(_mtime(path) for path in self._files))

    def enabled(self) -> tuple[Skill, ...]:
        """The enabled skills, by name; read again when a file or folder changed."""
        signature = self._signature_now()
        if signature == self._signature:
            return self._enabled
        with self._lock:
            skills = scan_skills(self.root) if signature else ()
            flags = enabled_flags(self.extensions_config) if skills else {}
            self._files = tuple(skill.path for skill in skills)
            self._enabled = tuple(skill for skill in skills if flags.get(skill.name, True))
            self._signature = self._signature_now()
            return self._enabled
