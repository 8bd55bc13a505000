"""``checkpointer.ttl`` and ``store.ttl`` in config.yaml: langgraph.json's keys, and a bad
value is one line naming the file, the line and the field."""

from __future__ import annotations

import pytest

from deerflow_ext.config.loading import ConfigError, app_config_from_text
from deerflow_ext.expiry import default_thread_ttl, store_ttl_config


def test_langgraph_json_ttl_keys_are_read_as_langgraph_names_them() -> None:
    config = app_config_from_text(
        "checkpointer:\n"
        "  ttl: {strategy: keep_latest, default_ttl: 43200, sweep_interval_minutes: 60, sweep_limit: 500}\n"
        "store:\n"
        "  ttl: {default_ttl: 10080, refresh_on_read: false, sweep_interval_minutes: 120}\n"
    )
    ttl = default_thread_ttl(config.checkpointer)
    assert ttl is not None and (ttl.strategy, ttl.minutes) == ("keep_latest", 43200)
    assert config.checkpointer.ttl.sweep_limit == 500
    assert store_ttl_config(config.store) == {"default_ttl": 10080, "refresh_on_read": False}
    assert config.store.ttl.sweep_interval_minutes == 120
    empty = app_config_from_text("")
    assert default_thread_ttl(empty.checkpointer) is None  # nothing expires unless asked
    assert empty.checkpointer.ttl.sweep_interval_minutes == 5 and empty.store.ttl.refresh_on_read is True


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("checkpointer:\n  ttl:\n    strategy: archive\n", "config.yaml:3: checkpointer.ttl.strategy:"),
        ("checkpointer:\n  ttl:\n    sweep_limit: 0\n", "config.yaml:3: checkpointer.ttl.sweep_limit:"),
        ("checkpointer:\n  ttl:\n    default_ttl: -5\n", "config.yaml:3: checkpointer.ttl.default_ttl:"),
        ("store:\n  ttl:\n    sweep_interval_minutes: 0\n", "config.yaml:3: store.ttl.sweep_interval_minutes:"),
        ("store:\n  ttl:\n    refresh_on_raed: true\n", "config.yaml:3: store.ttl.refresh_on_raed:"),
    ],
)
def test_a_bad_ttl_setting_is_one_line_naming_file_line_and_field(text: str, where: str) -> None:
    with pytest.raises(ConfigError) as info:
        app_config_from_text(text)
    message = str(info.value)
    assert message.startswith(where), message
    assert "\n" not in message
