from __future__ import annotations

import pytest

from deerflow_ext.agents.tools import calculator, current_time, safe_eval


def test_calculator_evaluates_arithmetic() -> None:
    assert safe_eval("2 * (3 + 4)") == 14
    assert safe_eval("-2 ** 2") == -4
    assert round(safe_eval("sqrt(2) * sqrt(2)"), 6) == 2
    assert calculator.invoke({"expression": "10 // 3"}) == "3"


@pytest.mark.parametrize(
    "expr", ["__import__('os')", "(1).__class__", "open('x')", "9 ** 99999", "[1, 2]", "True + 1", "x"]
)
def test_calculator_rejects_everything_else(expr: str) -> None:
    with pytest.raises(ValueError):
        safe_eval(expr)


def test_current_time_is_iso() -> None:
    assert "T" in current_time.invoke({})
