"""CPython's bytecode: whether a coroutine function can suspend at all.

``extensions/notifications/notify.py`` skips its budget and cancellation machinery for a notification
whose hooks are plain ``async def`` functions that never suspend. A coroutine suspends only
at a ``YIELD_VALUE`` instruction in its own frame (every ``await``, ``async for`` and
``async with`` compiles to one), which is a CPython implementation detail, not a language
guarantee.

Fallback: when the interpreter has no ``YIELD_VALUE`` opcode (another implementation, or a
CPython that renames it), every hook is assumed to suspend, which is always safe: the full
machinery runs.
"""

from __future__ import annotations

import dis
import inspect
import types

__all__ = ["YIELD_VALUE", "never_suspends"]

#: The opcode number, or ``None`` when this interpreter has no such opcode.
YIELD_VALUE: int | None = dis.opmap.get("YIELD_VALUE")


def never_suspends(func: object) -> bool:
    """Whether ``func`` is an ``async def`` function whose frame holds no ``YIELD_VALUE``.

    ``False`` for anything else (a sync callable returning an awaitable, a builtin, a
    decorator's wrapper object) and whenever the bytecode cannot be read: "may suspend" is
    the safe answer.
    """
    if YIELD_VALUE is None:
        return False
    if not isinstance(func, types.FunctionType) or not func.__code__.co_flags & inspect.CO_COROUTINE:
        return False
    return all(instruction.opcode != YIELD_VALUE for instruction in dis.get_instructions(func.__code__))
