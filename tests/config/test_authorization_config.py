"""``authorization:`` in config.yaml: DeerFlow's RBAC rule forms, exact types, one line per
bad field naming the file and the field; and ``tool_groups`` / ``gateway.run_journal``."""

from __future__ import annotations

from pathlib import Path

import pytest

from deerflow_ext.config.loading import ConfigError, load_app_config
from deerflow_ext.config.schema import AccessRule, AppConfig


@pytest.mark.parametrize(
    ("rule", "allowed", "refused"),
    [
        ({}, ["a/x", "b/y"], []),  # no allow: every target
        ({"allow": "*", "deny": ["a/x"]}, ["b/y"], ["a/x"]),  # deny wins
        ({"allow": True}, ["a/x"], []),
        ({"allow": False}, [], ["a/x"]),
        ({"allow": ["a/x"]}, ["a/x"], ["a/xy", "b/y"]),  # exact targets, no prefix match
    ],
)
def test_rules_read_as_deerflows_rbac(rule: dict, allowed: list[str], refused: list[str]) -> None:
    parsed = AccessRule.model_validate(rule)
    assert [parsed.permits(t) for t in allowed] == [True] * len(allowed)
    assert [parsed.permits(t) for t in refused] == [False] * len(refused)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("authorization: {enabled: yes-please}", "authorization.enabled"),
        ("authorization: {roles: {user: {plugin_action: {allow: 1}}}}", "authorization.roles.user.plugin_action.allow"),
        (
            "authorization: {roles: {user: {plugin_action: {allow: all}}}}",
            "authorization.roles.user.plugin_action.allow",
        ),
        (
            'authorization: {roles: {user: {plugin_action: {deny: [""]}}}}',
            "authorization.roles.user.plugin_action.deny",
        ),
        ("authorization: {roles: {user: {plugin_action: {alow: []}}}}", "authorization.roles.user.plugin_action.alow"),
        ("authorization: {fail_open: true}", "authorization.fail_open"),
        ("tool_groups: extensions", "tool_groups"),
        ("gateway: {run_journal: sometimes}", "gateway.run_journal"),
    ],
)
def test_a_bad_field_is_one_line_naming_file_and_field(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_app_config(path)
    assert f"{path}:1: {field}" in str(caught.value)


def test_defaults_decide_nothing_and_fail_closed() -> None:
    config = AppConfig()
    assert (config.authorization.enabled, config.authorization.fail_closed) == (False, True)
    assert (config.tool_groups, config.subagents.tool_groups, config.gateway.run_journal) == (None, None, None)
