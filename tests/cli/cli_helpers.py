"""Shared by the CLI tests: run ``deerflow-ext`` in-process, and pretend entry points are installed."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from deerflow_ext import cli
from deerflow_ext.extensions.plugin_loading.discovery import EntryPointIndex


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``deerflow-ext *argv``: the exit code and what it printed."""
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def install_entry_points(monkeypatch: pytest.MonkeyPatch, mapping: Mapping[str, str]) -> EntryPointIndex:
    """Make every ``EntryPointIndex.scan()`` see exactly ``mapping`` (entry-point name -> value)."""
    index = EntryPointIndex.from_mapping(dict(mapping))
    monkeypatch.setattr(EntryPointIndex, "scan", classmethod(lambda cls, group="": index))
    return index
