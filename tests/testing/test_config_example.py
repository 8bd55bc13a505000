"""``config.example.yaml`` is a valid config that documents every key of ``AppConfig``."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from pydantic import BaseModel

from deerflow_ext.config.loading import load_app_config
from deerflow_ext.config.schema import AppConfig, ModelEntry, PluginEntry

EXAMPLE = Path(__file__).resolve().parents[2] / "config.example.yaml"


def _models(annotation: object) -> list[type[BaseModel]]:
    """Every pydantic model inside an annotation (``X | None``, ``list[X]``, ``dict[str, X]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models(arg)]


def _keys(model: type[BaseModel], seen: set[type[BaseModel]] | None = None) -> set[str]:
    seen = seen if seen is not None else set()
    if model in seen:
        return set()
    seen.add(model)
    keys: set[str] = set()
    for name, info in model.model_fields.items():
        keys.add(name)
        for inner in _models(info.annotation):
            keys |= _keys(inner, seen)
    return keys


def test_the_example_validates_and_lists_the_examples_disabled() -> None:
    config = load_app_config(EXAMPLE)
    assert [(p.name, p.use, p.enabled) for p in config.plugins] == [
        ("observers", "observers", False),
        ("audit", "audit", False),
        ("costs", "costs", False),
        ("otel", "otel", False),
        ("deerflow_tally:install", "deerflow_tally:install", False),  # named by its use
        ("deerflow_fullstack:install", "deerflow_fullstack:install", False),
    ]
    assert config.plugins[-1].settings == {"example.notes": {"enabled": True, "max_notes": 20, "heading": "Notes"}}
    assert [p.package for p in config.plugins[-2:]] == ["deerflow-tally", "deerflow-fullstack"]
    assert {p.name: p.table_prefix for p in config.plugins}["audit"] == "audit_"
    assert config == AppConfig.model_validate(config.model_dump())  # defaults written out are the defaults
    assert config.model_dump(exclude={"plugins"}) == AppConfig().model_dump(exclude={"plugins"})


def test_every_key_is_documented() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    keys = _keys(AppConfig) | _keys(PluginEntry) | _keys(ModelEntry)
    missing = sorted(k for k in keys if not re.search(rf"^\s*#?\s*-?\s*{k}:", text, re.MULTILINE))
    assert not missing, f"config.example.yaml does not document: {missing}"


def _section(text: str, key: str) -> str:
    """The example's text for top-level ``key``: from its banner to the next banner."""
    banner = re.compile(r"^# -{10,} (\w+)$", re.MULTILINE)
    starts = [(m.group(1), m.start()) for m in banner.finditer(text)]
    for i, (name, start) in enumerate(starts):
        if name == key:
            end = starts[i + 1][1] if i + 1 < len(starts) else len(text)
            return text[start:end]
    raise AssertionError(f"config.example.yaml has no section for {key!r}")


def test_every_key_is_documented_in_its_own_section() -> None:
    """Key by key, where an operator looks for it: ``enabled`` under ``memory`` must not be
    satisfied by ``enabled`` under ``title``."""
    text = EXAMPLE.read_text(encoding="utf-8")
    missing = []
    for key, info in AppConfig.model_fields.items():
        block = _section(text, key)
        if not re.search(rf"^{key}:", block, re.MULTILINE):
            missing.append(key)
        for model in _models(info.annotation):
            missing += [
                f"{key}.{inner}"
                for inner in model.model_fields
                if not re.search(rf"^\s*#?\s*-?\s*{inner}\b", block, re.MULTILINE)
            ]
    assert not missing, f"config.example.yaml does not document, in their sections: {missing}"
