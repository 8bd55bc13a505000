"""Declarative, non-secret deployment settings a plugin declares.

A plugin lists the knobs an operator may turn; the host owns the values (defaults from
the package, overrides from the operator's ``config.yaml``) and hands a read-only copy to
every backend action and model tool call. Nothing here is a secret store or a way to load
code, and nothing is edited online: a value changes when the deployment changes.

The rules a declaration must satisfy (key shapes, field counts, exact value types) are the
host's, checked when the plugin registers; this module only states the shapes. Only
:class:`SettingsField` is re-exported by the package, as in DeerFlow; the other names are
public here for code that builds or reads a whole declaration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

__all__ = ["SettingsField"]

SettingValue: TypeAlias = bool | int | str
"""What a setting holds. The host checks the exact type: ``True`` is not an integer."""

SettingKind = Literal["boolean", "integer", "string"]
SettingsApply = Literal["next-run", "page-load", "next-request", "request-and-page-load"]


@dataclass(frozen=True, slots=True)
class SettingsField:
    """One setting: a key, a label, a kind and the default the package ships.

    ``minimum``/``maximum`` bound an integer; ``max_length`` bounds a string (the host
    accepts 1..4096). The default must itself be a valid value of the field.
    """

    key: str
    title: str
    kind: SettingKind
    default: SettingValue
    description: str = ""
    minimum: int | None = None
    maximum: int | None = None
    max_length: int = 256


@dataclass(frozen=True, slots=True)
class FrontendBinding:
    """Which browser module may see which settings.

    ``module`` is a name, never a URL; only the listed, non-secret fields reach an
    authenticated browser, and the host requires ``enabled`` among them.
    """

    module: str
    public_fields: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "public_fields", tuple(self.public_fields))


@dataclass(frozen=True, slots=True)
class SettingsContribution:
    """The whole settings declaration of one plugin namespace.

    ``applies`` says when a changed value takes effect (the host derives it from what the
    plugin contributes); ``scope`` is always the deployment: there are no per-user values.
    """

    namespace: str
    title: str
    fields: tuple[SettingsField, ...]
    description: str = ""
    scope: Literal["deployment"] = "deployment"
    applies: SettingsApply = "next-run"
    frontend: FrontendBinding | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))
