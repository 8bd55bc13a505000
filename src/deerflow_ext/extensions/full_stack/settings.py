"""Settings rules: a plugin's declaration, each value's exact type, and the operator's values.

DeerFlow keeps settings declarative and non-secret: the package declares fields with
defaults, and nothing edits them online. This host adds one source of values, the
operator's ``settings:`` map on the extension's ``plugins:`` record in ``config.yaml``
(docs/SPEC.md, "Full-stack plugins"), checked against the declaration with the same
rules as a default. Types are exact: ``True`` is a boolean and never an integer, ``"3"``
is a string and never an integer, because a value the operator typed as the wrong kind
is a mistake to report, not to coerce.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from deerflow_extension_api.settings import SettingsContribution, SettingsField, SettingValue

__all__ = [
    "APPLIES",
    "FIELD_KEY",
    "MAX_FIELDS",
    "MAX_STRING_LENGTH",
    "MODULE_ID",
    "NAMESPACE",
    "SettingsError",
    "defaults",
    "effective_settings",
    "validate_contribution",
    "validate_value",
]

NAMESPACE = re.compile(r"[a-z][a-z0-9_.-]{0,95}")
FIELD_KEY = re.compile(r"[a-z][a-z0-9_]{0,63}")
# Browser module ids are names in URLs and import maps: no underscore (DeerFlow's rule).
MODULE_ID = re.compile(r"[a-z][a-z0-9.-]{0,95}")
MAX_FIELDS = 32  # the host's own ``enabled`` counts: a plugin may add 31
MAX_STRING_LENGTH = 4096
APPLIES = frozenset({"next-run", "page-load", "next-request", "request-and-page-load"})
_BROWSER_APPLIES = frozenset({"page-load", "request-and-page-load"})
_KIND_TYPES: dict[str, type] = {"boolean": bool, "integer": int, "string": str}


class SettingsError(ValueError):
    """A declaration or a value the settings rules refuse; the message names the field."""


def validate_value(field: SettingsField, value: object) -> SettingValue:
    """``value`` when it is a valid value of ``field``, else :class:`SettingsError`."""
    expected = _KIND_TYPES.get(field.kind)
    if expected is None or type(value) is not expected:
        raise SettingsError(f"{field.key}: expected {field.kind}, got {_describe(value)}")
    if field.kind == "integer":
        assert isinstance(value, int)
        if (field.minimum is not None and value < field.minimum) or (
            field.maximum is not None and value > field.maximum
        ):
            raise SettingsError(f"{field.key}: outside allowed range ({_range(field)}), got {value}")
    if field.kind == "string":
        assert isinstance(value, str)
        if len(value) > field.max_length:
            raise SettingsError(f"{field.key}: maximum length is {field.max_length}, got {len(value)} characters")
    assert isinstance(value, (bool, int, str))
    return value


def validate_contribution(item: SettingsContribution) -> None:
    """Every rule a settings declaration must meet, first failure raised."""
    if not isinstance(item.namespace, str) or NAMESPACE.fullmatch(item.namespace) is None:
        raise SettingsError(f"invalid plugin namespace {item.namespace!r} (expected {NAMESPACE.pattern})")
    if item.scope != "deployment":
        raise SettingsError(f"{item.namespace}: settings scope must be 'deployment', got {item.scope!r}")
    if item.applies not in APPLIES:
        raise SettingsError(f"{item.namespace}: unknown settings applies value {item.applies!r}")
    if not isinstance(item.title, str) or not item.title.strip():
        raise SettingsError(f"{item.namespace}: a plugin needs a title")
    if not 1 <= len(item.fields) <= MAX_FIELDS:
        raise SettingsError(
            f"{item.namespace}: a plugin declares 1 to {MAX_FIELDS} settings fields ('enabled' included), "
            f"got {len(item.fields)}"
        )
    seen: set[str] = set()
    for field in item.fields:
        _check_field(item.namespace, field, seen)
    if item.frontend is not None:
        _check_frontend(item, seen)


def _check_field(namespace: str, field: object, seen: set[str]) -> None:
    if not isinstance(field, SettingsField):
        raise SettingsError(f"{namespace}: settings fields must be SettingsField, got {type(field).__name__}")
    if not isinstance(field.key, str) or FIELD_KEY.fullmatch(field.key) is None:
        raise SettingsError(f"{namespace}: invalid settings key {field.key!r} (expected {FIELD_KEY.pattern})")
    if field.key in seen:
        # 'enabled' is the host's: a plugin field of that name lands here too.
        raise SettingsError(f"{namespace}: duplicate settings key {field.key!r}")
    seen.add(field.key)
    if field.kind not in _KIND_TYPES:
        raise SettingsError(f"{namespace}.{field.key}: unknown settings kind {field.kind!r}")
    if type(field.max_length) is not int or not 1 <= field.max_length <= MAX_STRING_LENGTH:
        raise SettingsError(f"{namespace}.{field.key}: max_length must be 1 to {MAX_STRING_LENGTH}")
    for bound in (field.minimum, field.maximum):
        if bound is not None and type(bound) is not int:
            raise SettingsError(f"{namespace}.{field.key}: minimum and maximum must be integers")
    if field.minimum is not None and field.maximum is not None and field.minimum > field.maximum:
        raise SettingsError(f"{namespace}.{field.key}: minimum is greater than maximum")
    try:
        validate_value(field, field.default)
    except SettingsError as exc:
        raise SettingsError(f"{namespace}: invalid default for {exc}") from None


def _check_frontend(item: SettingsContribution, declared: set[str]) -> None:
    binding = item.frontend
    assert binding is not None
    if not isinstance(binding.module, str) or MODULE_ID.fullmatch(binding.module) is None:
        raise SettingsError(
            f"{item.namespace}: invalid browser module id {binding.module!r} (expected {MODULE_ID.pattern})"
        )
    public = binding.public_fields
    if len(set(public)) != len(public):
        raise SettingsError(f"{item.namespace}: browser public fields must be unique")
    unknown = [key for key in public if key not in declared]
    if unknown:
        raise SettingsError(
            f"{item.namespace}: browser public fields name undeclared settings: {', '.join(map(str, unknown))}"
        )
    enabled = [field for field in item.fields if field.key == "enabled"]
    if "enabled" not in public or not enabled or enabled[0].kind != "boolean":
        raise SettingsError(f"{item.namespace}: a browser module must see the boolean 'enabled' setting")
    if item.applies not in _BROWSER_APPLIES:
        raise SettingsError(f"{item.namespace}: a browser module's settings apply on page load")


def defaults(item: SettingsContribution) -> dict[str, SettingValue]:
    """Each field's default, by key."""
    return {field.key: field.default for field in item.fields}


def effective_settings(
    item: SettingsContribution, overrides: Mapping[str, object], *, where: str
) -> Mapping[str, SettingValue]:
    """The defaults with the operator's ``overrides`` applied, read-only.

    ``where`` prefixes every error (``config.yaml: plugins[bookmarks].settings.acme.bookmarks``)
    so the one line an operator reads names the file, the record and the field.
    """
    fields = {field.key: field for field in item.fields}
    values = defaults(item)
    for key, value in overrides.items():
        field = fields.get(key)
        if field is None:
            known = ", ".join(fields)
            raise SettingsError(f"{where}.{key}: unknown setting (this plugin declares: {known})")
        try:
            values[key] = validate_value(field, value)
        except SettingsError as exc:
            raise SettingsError(f"{where}.{exc}") from None
    return MappingProxyType(values)


def _describe(value: object) -> str:
    text = repr(value)
    if len(text) > 40:
        text = text[:39] + "…"
    return f"{type(value).__name__} {text}"


def _range(field: SettingsField) -> str:
    low = "" if field.minimum is None else str(field.minimum)
    high = "" if field.maximum is None else str(field.maximum)
    return f"{low}..{high}"
