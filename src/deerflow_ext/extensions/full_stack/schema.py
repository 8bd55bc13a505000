"""The object schemas plugin tools (and actions) declare for their input.

A schema is data from a trusted package, but the host hands it to a validator on every
call and to the model in every request, so it is checked once, at registration: it must
be plain JSON (a round trip through ``json`` must not change it), describe an object, and
reference nothing (``$ref`` and its dynamic kin would make the validator resolve other
documents, possibly over the network). A tool's schema may not declare ``runtime`` or
``config``: LangChain injects those arguments itself. The meta-schema check is the
``jsonschema`` library's (draft 2020-12). Every failure is the same ``ValueError``, as in
DeerFlow: the author reads which rule from the schema, not from the message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

__all__ = ["INVALID_SCHEMA", "RESERVED_TOOL_PROPERTIES", "validate_schema"]

INVALID_SCHEMA = "Invalid plugin object schema"
RESERVED_TOOL_PROPERTIES = frozenset({"runtime", "config"})
_REFERENCES = frozenset({"$ref", "$dynamicRef", "$recursiveRef"})


def validate_schema(schema: object, *, tool: bool = False) -> dict[str, Any]:
    """A detached copy of ``schema`` when it passes every rule, else ``ValueError``."""
    try:
        copy = json.loads(json.dumps(schema, allow_nan=False))
    except (TypeError, ValueError):
        raise ValueError(INVALID_SCHEMA) from None
    if not isinstance(schema, Mapping) or not isinstance(copy, dict) or copy.get("type") != "object":
        raise ValueError(INVALID_SCHEMA)
    if _has_reference(copy):
        raise ValueError(INVALID_SCHEMA)
    properties = copy.get("properties", {})
    if tool and isinstance(properties, dict) and RESERVED_TOOL_PROPERTIES & properties.keys():
        raise ValueError(INVALID_SCHEMA)
    try:
        Draft202012Validator.check_schema(copy)
    except SchemaError:
        raise ValueError(INVALID_SCHEMA) from None
    return copy


def _has_reference(node: object) -> bool:
    if isinstance(node, dict):
        return bool(_REFERENCES & node.keys()) or any(_has_reference(value) for value in node.values())
    if isinstance(node, list):
        return any(_has_reference(item) for item in node)
    return False
