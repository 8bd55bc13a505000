"""The lead agent's small built-in tools.

The calculator evaluates an AST whitelist (numbers, arithmetic operators, a few math
functions) instead of ``eval``: the expression comes from a model, and a model's output is
user input.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from langchain_core.tools import BaseTool, tool

__all__ = ["BUILTIN_TOOL_NAMES", "builtin_tools", "calculator", "current_time", "safe_eval"]

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "log": math.log,
    "sin": math.sin,
    "cos": math.cos,
}
_CONSTANTS = {"pi": math.pi, "e": math.e}
_MAX_EXPONENT = 1000
_MAX_LENGTH = 500


def safe_eval(expression: str) -> float | int:
    """Evaluate arithmetic; anything else raises ``ValueError``."""
    if len(expression) > _MAX_LENGTH:
        raise ValueError("expression too long")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not an arithmetic expression: {expression!r}") from exc
    value: float | int = _eval(tree.body)
    return value


def _eval(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
            raise ValueError("exponent too large")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
    ):
        return _FUNCTIONS[node.func.id](*(_eval(arg) for arg in node.args))
    raise ValueError(f"unsupported syntax: {ast.dump(node)[:60]}")


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression such as `2 * (3 + 4)` or `sqrt(2)`."""
    return str(safe_eval(expression))


@tool
def current_time() -> str:
    """The current UTC date and time in ISO 8601."""
    return datetime.now(UTC).isoformat(timespec="seconds")


BUILTIN_TOOL_NAMES = ("calculator", "current_time")


def builtin_tools() -> list[BaseTool]:
    return [calculator, current_time]
