"""One list of host tables: the loader's default, ``doctor``, the author kit and the Gateway agree.

The list is the persistence layer's (built from its models), so a host table added there is
protected everywhere at once. The probe is ``thread_``, which claims only ``thread_leases``:
a stale copy of the list without that table once let it pass ``doctor`` and the kit while the
Gateway refused to start.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from deerflow_ext import cli
from deerflow_ext.config.schema import AppConfig
from deerflow_ext.extensions.boundary.diagnostics import DiagnosticsList
from deerflow_ext.extensions.plugin_loading import tables
from deerflow_ext.extensions.plugin_loading.loader import load_extensions
from deerflow_ext.extensions.plugin_loading.tables import TablePrefixCollisionError
from deerflow_ext.persistence import models

USE = "extensions.fixtures_plugins:good"
RECORD = {"name": "leases", "use": USE, "table_prefix": "thread_"}


def test_the_runtime_uses_the_persistence_layers_list() -> None:
    assert tables.HOST_TABLE_NAMES is models.HOST_TABLES
    assert set(models.Base.metadata.tables) <= set(models.HOST_TABLES)
    assert "thread_leases" in models.HOST_TABLES


def test_the_loaders_default_refuses_it() -> None:
    with pytest.raises(TablePrefixCollisionError, match="thread_leases"):
        load_extensions(AppConfig.model_validate({"plugins": [RECORD]}), diagnostics=DiagnosticsList())


def test_the_author_kit_refuses_it(extension_loader: Callable[..., Any]) -> None:
    with pytest.raises(TablePrefixCollisionError, match="thread_leases"):
        extension_loader(USE, name="leases", table_prefix="thread_")


def test_doctor_refuses_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(f"plugins:\n  - {{name: leases, use: '{USE}', table_prefix: thread_}}\n", encoding="utf-8")
    code = cli.main(["extensions", "doctor", "--config", str(path)])
    out = capsys.readouterr().out
    assert code == 1
    assert "TablePrefixCollisionError" in out and "thread_leases" in out
    assert out.splitlines()[-1] == "The Gateway would not start."


def test_the_gateway_refuses_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from deerflow_ext.config.settings import Settings
    from deerflow_ext.gateway import create_app

    settings = Settings(config=tmp_path / "config.yaml", database_url=f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}")
    with pytest.raises(TablePrefixCollisionError, match="thread_leases"):
        create_app(settings, config=AppConfig.model_validate({"plugins": [RECORD]}))
