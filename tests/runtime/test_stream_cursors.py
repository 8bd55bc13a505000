"""Which ``Last-Event-ID`` values name a position in a run's stream (``runtime.stream.position_of``)."""

from __future__ import annotations

import pytest

from deerflow_ext.runtime.stream import position_of


@pytest.mark.parametrize(("cursor", "position"), [(None, 0), ("", 0), ("0", 0), ("-1", 0), ("7", 7)])
def test_decimal_ids_name_positions(cursor: str | None, position: int) -> None:
    assert position_of(cursor) == position


@pytest.mark.parametrize(
    "cursor", ["abc", "1_0", " 7 ", "+5", "٣", "1.5", "0x10", "1-0", "9" * 21, "-", "-99", "-0", "-9" + "9" * 30]
)
def test_anything_else_names_no_position(cursor: str) -> None:
    assert position_of(cursor) is None
