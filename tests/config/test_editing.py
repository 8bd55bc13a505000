"""Round-trip edits: one flag changes, every other byte stays; locked, atomic writes."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path
from typing import Any

import pytest

from deerflow_ext.config.editing import (
    ConfigEditError,
    PluginNotFoundError,
    add_plugin,
    remove_plugin,
    set_plugin_enabled,
)
from deerflow_ext.config.loading import ConfigError, app_config_from_text, load_app_config
from deerflow_ext.extensions.plugin_loading.discovery import EntryPointIndex

COMMENTED = """\
# Gateway configuration -- edited by hand, keep the notes!
plugins:
  # the audit trail is mandatory (ticket OPS-12)
  - name: audit          # label in logs
    use: acme_audit      # entry point
    enabled: true
    required: true
    table_prefix: "acme_"
    config: {threshold: 3}

  - name: costs
    use: 'acme_costs:install'
    config:
      currency: EUR   # odd indentation on purpose
models:
- name: default
  use: langchain_openai:ChatOpenAI
  temperature: 0.0
title:
    enabled: yes      # four-space indent
"""


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(COMMENTED, encoding="utf-8")
    return path


def test_disable_changes_exactly_one_token(config_file: Path) -> None:
    assert set_plugin_enabled(config_file, "audit", False) is True
    assert config_file.read_text() == COMMENTED.replace("    enabled: true\n", "    enabled: false\n", 1)


def test_disable_without_an_enabled_key_inserts_one_line(config_file: Path) -> None:
    set_plugin_enabled(config_file, "costs", False)
    assert config_file.read_text() == COMMENTED.replace(
        "    use: 'acme_costs:install'\n", "    use: 'acme_costs:install'\n    enabled: false\n"
    )
    assert load_app_config(config_file).plugins[1].enabled is False


def test_enable_disable_round_trip_restores_the_file(config_file: Path) -> None:
    set_plugin_enabled(config_file, "audit", False)
    set_plugin_enabled(config_file, "audit", True)
    assert config_file.read_text() == COMMENTED


def test_no_change_means_no_write(config_file: Path) -> None:
    before = config_file.stat().st_mtime_ns
    assert set_plugin_enabled(config_file, "audit", True) is False
    assert config_file.stat().st_mtime_ns == before


def test_name_resolves_against_name_use_and_entry_point(config_file: Path) -> None:
    eps = EntryPointIndex.from_mapping({"costs_ep": "acme_costs:install"})
    set_plugin_enabled(config_file, "acme_audit", False)  # the use value
    set_plugin_enabled(config_file, "costs_ep", False, entry_points=eps)  # the entry-point name
    plugins = load_app_config(config_file).plugins
    assert [p.enabled for p in plugins] == [False, False]


def test_unknown_and_ambiguous_names(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("plugins:\n  - {name: a, use: x:y}\n  - {name: b, use: x:y}\n")
    with pytest.raises(PluginNotFoundError, match="configured: a, b"):
        set_plugin_enabled(path, "nope", False)
    with pytest.raises(ConfigEditError, match="matches several"):
        set_plugin_enabled(path, "x:y", False)
    set_plugin_enabled(path, "b", False)  # flow style still works (round-trip fallback)
    assert [p.enabled for p in load_app_config(path).plugins] == [True, False]


def test_add_and_remove_keep_the_rest(config_file: Path) -> None:
    add_plugin(config_file, {"name": "extra", "use": "x:install", "table_prefix": "x_", "config": {"k": [1, 2]}})
    text = config_file.read_text()
    assert text.startswith(COMMENTED.split("models:")[0].rstrip("\n"))
    assert text.endswith("models:" + COMMENTED.split("models:")[1])
    entry = load_app_config(config_file).plugins[2]
    assert (entry.name, entry.use, entry.table_prefix, entry.config) == (
        "extra",
        "x:install",
        "x_",
        {"k": [1, 2]},
    )
    removed = remove_plugin(config_file, "extra")
    assert removed.name == "extra"
    assert config_file.read_text() == COMMENTED


def test_add_duplicate_name_is_refused(config_file: Path) -> None:
    with pytest.raises(ConfigEditError, match="already exists"):
        add_plugin(config_file, {"name": "audit", "use": "x:y"})


def test_add_creates_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    add_plugin(path, {"name": "a", "use": "acme"})
    assert [p.use for p in load_app_config(path).plugins] == ["acme"]


def test_remove_last_entry_leaves_an_empty_list(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("plugins:  # extensions\n  - name: a\n    use: x\ntitle:\n  enabled: true\n")
    remove_plugin(path, "a")
    assert path.read_text() == "plugins: [] # extensions\ntitle:\n  enabled: true\n"
    assert load_app_config(path).plugins == []


def test_invalid_file_is_not_edited(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("plugins:\n  - name: a\n    use: x\n    enabled: maybe\n")
    with pytest.raises(ConfigError, match=":4: plugins"):
        set_plugin_enabled(path, "a", False)
    assert path.read_text().endswith("maybe\n")


def test_symlinked_config_edits_the_target(config_file: Path, tmp_path: Path) -> None:
    link = tmp_path / "link.yaml"
    link.symlink_to(config_file)
    set_plugin_enabled(link, "audit", False)
    assert link.is_symlink()
    assert load_app_config(config_file).plugins[0].enabled is False


WRITERS = 4
ADDS = 6


def _editor(path: str, writer: int, start: Any) -> None:
    """Add this writer's entries and toggle its own flag, all read-modify-write cycles."""
    start.wait()
    for k in range(ADDS):
        add_plugin(path, {"name": f"w{writer}-{k}", "use": f"m{writer}:install"})
        set_plugin_enabled(path, f"p{writer}", k % 2 == 1)


def _reader(path: str, start: Any, done: Any, torn: Any) -> None:
    """Read without the lock, as the Gateway does: every read must be a whole file.

    Entries are only ever added, so a read with fewer entries than an earlier one (an
    empty or truncated file still parses) or one that does not parse at all is torn.
    """
    start.wait()
    seen = WRITERS
    while not done.is_set():
        try:
            count = len(app_config_from_text(Path(path).read_text(encoding="utf-8"), path).plugins)
        except ConfigError:
            count = -1
        if count < seen:
            torn.value += 1
        seen = max(seen, count)
        time.sleep(0.001)  # leave the writers a CPU on a small CI machine


def test_concurrent_editors_never_lose_or_tear_an_edit(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    names = [f"p{i}" for i in range(WRITERS)]
    path.write_text("# shared\nplugins:\n" + "".join(f"  - name: {n}\n    use: m{n}:install\n" for n in names))
    ctx = multiprocessing.get_context("fork")
    start, done, torn = ctx.Barrier(WRITERS + 1), ctx.Event(), ctx.Value("i", 0)
    reader = ctx.Process(target=_reader, args=(str(path), start, done, torn))
    writers = [ctx.Process(target=_editor, args=(str(path), i, start)) for i in range(WRITERS)]
    reader.start()
    for p in writers:
        p.start()
    for p in writers:
        p.join(60)
        assert p.exitcode == 0
    done.set()
    reader.join(10)
    assert reader.exitcode == 0
    assert torn.value == 0, "a reader saw a half-written config.yaml"
    plugins = load_app_config(path).plugins
    # Every read-modify-write survived: no editor replaced the file with a stale copy.
    assert sorted(p.name for p in plugins) == sorted(names + [f"w{w}-{k}" for w in range(WRITERS) for k in range(ADDS)])
    assert [p.name for p in plugins[:WRITERS]] == names
    assert all(p.enabled is (ADDS % 2 == 0) for p in plugins[:WRITERS])
    assert path.read_text().startswith("# shared\nplugins:\n")
    assert not [f for f in tmp_path.iterdir() if f.suffix == ".tmp"]


def test_removing_an_entry_removes_the_comment_that_describes_it(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[2] / "config.example.yaml"
    path = tmp_path / "config.yaml"
    path.write_text(example.read_text(encoding="utf-8"), encoding="utf-8")
    before = [p.name for p in load_app_config(path).plugins]
    remove_plugin(path, "audit")
    text = path.read_text(encoding="utf-8")
    assert "audit_task_outcomes" not in text and "must be audited" not in text  # its comment went with it
    assert "\n\n\n" not in text.split("# ---", 2)[1]  # and no doubled blank line was left behind
    assert [p.name for p in load_app_config(path).plugins] == [n for n in before if n != "audit"]
    remove_plugin(path, "otel")
    assert "OpenTelemetry spans" not in path.read_text(encoding="utf-8")
    assert "Tokens and tool calls per task" in path.read_text(encoding="utf-8")


def test_edits_leave_no_lock_file_behind(config_file: Path) -> None:
    set_plugin_enabled(config_file, "audit", False)
    remove_plugin(config_file, "costs")
    assert sorted(p.name for p in config_file.parent.iterdir()) == ["config.yaml"]


def test_add_model_adds_the_entry_and_changes_nothing_else(tmp_path: Path) -> None:
    """README's Real model step on the First run's config.yaml: the extension stays enabled."""
    from deerflow_ext import cli
    from deerflow_ext.config.loading import load_app_config

    example = Path(__file__).resolve().parents[2] / "config.example.yaml"
    path = tmp_path / "config.yaml"
    original = example.read_text(encoding="utf-8").replace(
        "  - name: observers\n    use: observers\n    enabled: false",
        "  - name: observers\n    use: observers\n    enabled: true",
    )
    path.write_text(original, encoding="utf-8")
    argv = ["models", "add", "gpt", "langchain_openai:ChatOpenAI", "model=gpt-4o-mini", "temperature=0.2"]
    assert cli.main([*argv, "--config", str(path)]) == 0
    after = path.read_text(encoding="utf-8")
    block = (
        "models:\n  - name: gpt\n    use: langchain_openai:ChatOpenAI\n    model: gpt-4o-mini\n    temperature: 0.2\n"
    )
    assert after == original.replace("models: []\n", block)
    config = load_app_config(path)
    assert [(m.name, m.params) for m in config.models] == [("gpt", {"model": "gpt-4o-mini", "temperature": 0.2})]
    assert [p.name for p in config.plugins if p.enabled] == ["observers"]
    assert cli.main([*argv, "--config", str(path)]) == 1, "a name already configured is refused"
    assert path.read_text(encoding="utf-8") == after


def test_add_model_creates_a_missing_file(tmp_path: Path) -> None:
    from deerflow_ext.config.editing import add_model

    path = tmp_path / "config.yaml"
    add_model(path, {"name": "gpt", "use": "langchain_openai:ChatOpenAI", "model": "gpt-4o-mini"})
    assert path.read_text(encoding="utf-8") == (
        "models:\n  - name: gpt\n    use: langchain_openai:ChatOpenAI\n    model: gpt-4o-mini\n"
    )
