"""``extensions_config.json`` writes: atomic, durable, mode-keeping, and through a symlink.

The file is writable over HTTP (``PUT /api/extensions-config``), so a crash or a full disk
mid-write must never leave it torn, and an operator's deployment layout (a symlink to a
shared file, restrictive permissions) must survive the write.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from deerflow_ext.config import editing
from deerflow_ext.gateway.routes.extensions_config import (
    ExtensionsConfig,
    read_extensions_config,
    write_extensions_config,
)

NEW = ExtensionsConfig.model_validate({"mcpServers": {"github": {"enabled": False}}, "skills": {"research": {}}})
ORIGINAL = '{"mcpServers": {"github": {"enabled": true}}, "skills": {}}'


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    path = tmp_path / "extensions_config.json"
    path.write_text(ORIGINAL, encoding="utf-8")
    return path


def test_the_new_file_replaces_the_old_one_and_reads_back(config_path: Path) -> None:
    write_extensions_config(config_path, NEW)
    assert read_extensions_config(config_path) == NEW
    assert json.loads(config_path.read_text(encoding="utf-8"))["mcpServers"]["github"]["enabled"] is False
    assert _leftovers(config_path.parent) == []


def test_the_file_and_then_its_directory_are_fsynced(config_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append("directory" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(editing.os, "fsync", recording_fsync)
    write_extensions_config(config_path, NEW)
    assert synced == ["file", "directory"]


def test_the_files_mode_is_kept(config_path: Path) -> None:
    config_path.chmod(0o640)
    write_extensions_config(config_path, NEW)
    assert stat.S_IMODE(config_path.stat().st_mode) == 0o640


def test_a_symlink_is_written_through_to_its_target(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    target = shared / "actual.json"
    target.write_text(ORIGINAL, encoding="utf-8")
    link = tmp_path / "extensions_config.json"
    link.symlink_to(target)

    write_extensions_config(link, NEW)

    assert link.is_symlink() and link.resolve() == target
    assert read_extensions_config(target) == NEW
    assert _leftovers(tmp_path) == [] and _leftovers(shared) == []


@pytest.mark.parametrize("failing", ["fsync", "replace"])
def test_a_failed_write_leaves_the_original_and_no_temporary_file(
    config_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    def fail(*args: Any) -> None:
        raise OSError(f"{failing} failed")

    monkeypatch.setattr(editing.os, failing, fail)
    with pytest.raises(OSError, match=f"{failing} failed"):
        write_extensions_config(config_path, NEW)
    assert config_path.read_text(encoding="utf-8") == ORIGINAL
    assert _leftovers(config_path.parent) == []


def test_a_disk_full_mid_write_leaves_the_original(config_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_fdopen = os.fdopen

    class FillsUp:
        def __init__(self, handle: Any) -> None:
            self.handle = handle

        def __enter__(self) -> FillsUp:
            return self

        def __exit__(self, *exc: object) -> None:
            self.handle.close()

        def write(self, text: str) -> None:
            self.handle.write(text[: len(text) // 2])
            self.handle.flush()
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(editing.os, "fdopen", lambda *a, **k: FillsUp(real_fdopen(*a, **k)))
    with pytest.raises(OSError, match="No space left"):
        write_extensions_config(config_path, NEW)
    assert config_path.read_text(encoding="utf-8") == ORIGINAL
    assert _leftovers(config_path.parent) == []
