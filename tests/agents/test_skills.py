"""Skills in the lead agent, on the embedded model: a folder under ``skills/public`` switched
with ``deerflow-ext extensions skill enable|disable`` shows in the next run's prompt and
assembly (``enabled_skills``: the fingerprint changes), and its body reaches the
conversation only through ``load_skill`` when the model asks (``use load_skill {...}``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_helpers import Recorder, make_config, make_host, recording_extensions
from langchain_core.messages import ToolMessage

from deerflow_ext import cli
from deerflow_ext.agents.host import LeadRunRequest
from deerflow_ext.agents.prompts import LEAD_SYSTEM_PROMPT
from deerflow_ext.skills import SkillShelf, skills_prompt
from deerflow_extension_api import canonical_hash

BODY = "Step one: count syllables 5-7-5. HAIKU-BODY-MARKER"


def _skill(root: Path, category: str, folder: str, name: str, description: str, body: str = BODY) -> Path:
    path = root / category / folder / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(f"---\nname: {name}\ndescription: {description}\n---\n\n{body}\n", encoding="utf-8")
    return path


def _request(text: str, run_id: str) -> LeadRunRequest:
    return LeadRunRequest(thread_id=f"t-{run_id}", run_id=run_id, messages=({"role": "user", "content": text},))


def _tool_texts(values: Any) -> list[str]:
    return [str(m.content) for m in values.get("messages", []) if isinstance(m, ToolMessage)]


async def test_a_skill_enabled_over_the_cli_is_listed_next_run_and_loaded_only_when_asked(
    tmp_path: Path, recorder: Recorder, notify_loop: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    config_file = tmp_path / "config.yaml"
    config_file.write_text("{}\n", encoding="utf-8")
    skills = tmp_path / "skills"
    _skill(skills, "public", "haiku", "haiku-writer", "Write a haiku about\n  a topic.")
    _skill(skills, "custom", ".hidden", "ignored", "in a hidden folder")
    (skills / "custom" / "broken").mkdir(parents=True)
    (skills / "custom" / "broken" / "SKILL.md").write_text("no front matter\n", encoding="utf-8")
    shelf = SkillShelf(skills, tmp_path / "extensions_config.json")
    ext = recording_extensions(recorder, kinds=("assembly",))
    host = make_host(make_config(memory={"enabled": False}, title={"enabled": False}), skills=shelf)

    assert cli.main(["extensions", "skill", "disable", "haiku-writer", "--config", str(config_file)]) == 0
    off = await host.run_lead(_request("hello", "r1"), extensions=ext, task_store=None)
    assert recorder.descriptors[-1].enabled_skills == ()
    assert "load_skill" not in {tool.name for tool in recorder.descriptors[-1].tools}
    assert recorder.descriptors[-1].base_prompt_hash == canonical_hash(LEAD_SYSTEM_PROMPT)
    disabled_fingerprint = recorder.descriptors[-1].fingerprint

    assert cli.main(["extensions", "skill", "enable", "haiku-writer", "--config", str(config_file)]) == 0
    capsys.readouterr()
    listed = await host.run_lead(_request("hello", "r2"), extensions=ext, task_store=None)
    descriptor = recorder.descriptors[-1]
    assert descriptor.enabled_skills == ("haiku-writer",)
    assert "load_skill" in {tool.name for tool in descriptor.tools}
    prompt = LEAD_SYSTEM_PROMPT + skills_prompt(shelf.enabled())
    assert "- haiku-writer: Write a haiku about a topic." in prompt
    assert descriptor.base_prompt_hash == canonical_hash(prompt)  # the prompt the model was given
    assert descriptor.fingerprint != disabled_fingerprint
    assert _tool_texts(listed.values) == [] and _tool_texts(off.values) == []  # listed, not loaded
    assert "HAIKU-BODY-MARKER" not in str(listed.values["messages"])

    asked = await host.run_lead(
        _request('use load_skill {"name": "haiku-writer"}', "r3"), extensions=ext, task_store=None
    )
    (loaded,) = _tool_texts(asked.values)
    assert loaded.strip() == BODY  # the body, without its front matter
    unknown = await host.run_lead(_request('use load_skill {"name": "ignored"}', "r4"), extensions=ext, task_store=None)
    assert _tool_texts(unknown.values) == ["no enabled skill named 'ignored' (enabled: haiku-writer)"]


def test_the_shelf_reads_again_only_when_something_changed(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    shelf = SkillShelf(skills, tmp_path / "extensions_config.json")
    assert shelf.enabled() == ()  # no folder: nothing, one stat
    path = _skill(skills, "public", "a", "alpha", "first")
    assert [s.name for s in shelf.enabled()] == ["alpha"]
    first = shelf.enabled()
    assert shelf.enabled() is first  # unchanged: the same tuple, nothing parsed
    _skill(skills, "custom", "b", "alpha", "custom wins")
    assert [(s.name, s.description, s.category) for s in shelf.enabled()] == [("alpha", "custom wins", "custom")]
    (tmp_path / "extensions_config.json").write_text('{"skills": {"alpha": {"enabled": false}}}', encoding="utf-8")
    assert shelf.enabled() == ()
    assert path.exists()


def test_deerflow_ext_run_lists_and_loads_the_skills_beside_its_config(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    restore_process_extensions: None,
) -> None:
    from deerflow_ext.run_console import run_command

    monkeypatch.setenv("DEERFLOW_DATABASE_URL", f"sqlite:///{tmp_path / 'deerflow.db'}")
    config = tmp_path / "config.yaml"
    config.write_text("skills:\n  path: my-skills\n", encoding="utf-8")
    _skill(tmp_path / "my-skills", "custom", "tides", "tides", "Read a tide table.", body="HIGH-WATER")
    assert run_command(['use load_skill {"name": "tides"}', "--config", str(config)]) == 0
    assert capsys.readouterr().out.splitlines() == ["Done. load_skill returned: HIGH-WATER"]
