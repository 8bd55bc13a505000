"""The values an operator may write in a ``plugins:`` record's ``settings:`` map.

Strict on purpose: a plugin setting is a boolean, an integer or a string of exactly that
type (``true`` is not ``1``), checked against the plugin's own declaration when it registers
(``extensions/full_stack/settings.py``); here only the shape of the map is fixed.
"""

from __future__ import annotations

from pydantic import StrictBool, StrictInt, StrictStr

__all__ = ["SettingValueIn"]

SettingValueIn = StrictBool | StrictInt | StrictStr
