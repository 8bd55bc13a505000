"""config.yaml loading: every failure is a ConfigError naming file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deerflow_ext.config import loading
from deerflow_ext.config.loading import ConfigError, app_config_from_text, load_app_config
from deerflow_ext.config.schema import AppConfig


def write(tmp_path: Path, text: str, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


GOOD = """\
# deployment config
plugins:
  - name: audit
    use: acme_audit
    required: true
    table_prefix: acme_
    config: {threshold: 3, tags: [a, b]}
  - name: costs
    use: acme_costs:install
    enabled: false
title:
  max_chars: 40
"""


def test_valid_file(tmp_path: Path) -> None:
    cfg = load_app_config(write(tmp_path, GOOD))
    assert [p.name for p in cfg.plugins] == ["audit", "costs"]
    assert cfg.plugins[0].config == {"threshold": 3, "tags": ["a", "b"]}
    assert type(cfg.plugins[0].config) is dict and type(cfg.plugins[0].config["tags"]) is list
    assert cfg.plugins[0].required and cfg.plugins[0].table_prefix == "acme_"
    assert cfg.plugins[1].enabled is False and cfg.title.max_chars == 40


def test_missing_file_is_an_empty_config(tmp_path: Path) -> None:
    assert load_app_config(tmp_path / "absent.yaml") == AppConfig()


@pytest.mark.parametrize("text", ["", "# only a comment\n", "---\n"])
def test_empty_documents_are_empty_configs(tmp_path: Path, text: str) -> None:
    assert load_app_config(write(tmp_path, text)).plugins == []


def test_error_names_file_line_and_field(tmp_path: Path) -> None:
    text = """\
plugins:
  - name: a
    use: x:y
  - name: b
    use: z
    # a comment line
    enabled: maybe
"""
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_app_config(path)
    assert str(info.value).startswith(f"{path}:7: plugins[1].enabled: Input should be a valid boolean")
    assert (info.value.line, info.value.field) == (7, "plugins[1].enabled")


def test_relative_path_is_named_as_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "plugins:\n  - name: a\n    use: x\n  - name: b\n    use: y\n    enabled: 12\n")
    with pytest.raises(ConfigError, match=r"^config\.yaml:6: plugins\[1\]\.enabled: Input should be a valid boolean"):
        load_app_config("config.yaml")


def test_every_problem_gets_its_own_line(tmp_path: Path) -> None:
    path = write(tmp_path, "plugins:\n  - name: a\n    enable: false\n  - name: x\n")
    with pytest.raises(ConfigError) as info:
        load_app_config(path)
    assert info.value.problems == (
        f"{path}:2: plugins[0].use: Field required",
        f"{path}:3: plugins[0].enable: Extra inputs are not permitted",
        f"{path}:4: plugins[1].use: Field required",
    )


@pytest.mark.parametrize("prefix", ['""', "''", '"   "'])
def test_empty_table_prefix_is_rejected(tmp_path: Path, prefix: str) -> None:
    path = write(tmp_path, f"plugins:\n  - name: a\n    use: x\n    table_prefix: {prefix}\n")
    with pytest.raises(ConfigError, match=r":4: plugins\[0\]\.table_prefix: .*must not be empty"):
        load_app_config(path)


def test_duplicate_keys_are_errors_with_a_line(tmp_path: Path) -> None:
    path = write(tmp_path, "plugins:\n  - name: a\n    use: x\n    use: y\n")
    with pytest.raises(ConfigError, match=r':4: .*duplicate key "use"'):
        load_app_config(path)


def test_yaml_syntax_error_has_a_line(tmp_path: Path) -> None:
    path = write(tmp_path, "plugins:\n  - name: a\n    use: [x\n  - name: b\n")
    with pytest.raises(ConfigError) as info:
        load_app_config(path)
    assert info.value.line is not None and str(info.value).startswith(f"{path}:")


@pytest.mark.parametrize("text", ["- a\n- b\n", "just a string\n", "42\n"])
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError, match=r":1: the top level must be a mapping"):
        load_app_config(write(tmp_path, text))


def test_huge_file_is_refused_without_parsing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loading, "MAX_CONFIG_BYTES", 1000)
    path = write(tmp_path, "# x\n" * 500)
    with pytest.raises(ConfigError, match="larger than 1000 bytes"):
        load_app_config(path)


def test_alias_bomb_is_refused(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]")
    with pytest.raises(ConfigError, match="more than"):
        load_app_config(write(tmp_path, "\n".join(lines) + "\n"))


def test_not_utf8_is_an_error_with_a_line(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(b"plugins: []\ntitle:\n  max_chars: \xff\n")
    with pytest.raises(ConfigError, match=r":3: not UTF-8"):
        load_app_config(path)


def test_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory"):
        load_app_config(tmp_path)


def test_duplicate_plugin_names(tmp_path: Path) -> None:
    path = write(tmp_path, "title:\n  enabled: true\nplugins:\n  - {name: a, use: x}\n  - {name: a, use: y}\n")
    with pytest.raises(ConfigError, match="duplicate plugins name 'a'") as caught:
        load_app_config(path)
    # Located at the plugins: list (line 3), not at the top of the document.
    assert caught.value.problems[0].startswith(f"{path}:3: plugins: "), caught.value.problems


# Arbitrary text: loading either succeeds or raises ConfigError — never anything else.
yaml_ish = st.text(
    alphabet=st.sampled_from(list("plugins:name:use:enabled:-[]{},&*!|>'\"#\n\t %@`?0123456789aeyx\\\x00\ufeff")),
    max_size=200,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(yaml_ish)
def test_any_text_is_a_config_or_a_config_error(text: str) -> None:
    try:
        app_config_from_text(text, "config.yaml")
    except ConfigError as exc:
        assert str(exc).startswith("config.yaml")


scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5), st.floats(allow_nan=False))
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)
plugin_like = st.dictionaries(
    st.sampled_from(["name", "use", "enabled", "required", "config", "table_prefix", "bogus"]),
    values,
    max_size=6,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(plugin_like, max_size=4))
def test_structured_bad_documents_are_config_errors_with_lines(plugins: list[dict[str, object]]) -> None:
    import json

    # JSON is YAML: a structurally arbitrary but syntactically valid document.
    text = "plugins:\n" + "".join(f"  - {json.dumps(p)}\n" for p in plugins) if plugins else "plugins: []\n"
    try:
        app_config_from_text(text, "config.yaml")
    except ConfigError as exc:
        assert exc.line is not None and 1 <= exc.line <= text.count("\n") + 1
        assert str(exc).startswith(f"config.yaml:{exc.line}: ")
