"""The host limits an extension may read.

A narrow projection instead of the host's settings object: extensions see the numbers
that constrain them and nothing they could come to depend on by accident. Every field
has a default so a later release can add one without breaking anyone's construction.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HostPolicySnapshot"]

_TOKEN_FIELDS = (
    "max_input_tokens",
    "max_output_tokens",
    "max_total_tokens",
    "budget_warn_fraction",
    "budget_hard_fraction",
)


@dataclass(frozen=True, slots=True)
class HostPolicySnapshot:
    """Limits the host enforces for the agent being built or the Gateway at large.

    The five token fields are ``None`` whenever the token budget is disabled. That is
    checked at construction rather than only documented, so an extension may test
    ``max_total_tokens is None`` without also consulting ``token_budget_enabled``.
    """

    token_budget_enabled: bool = False
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_total_tokens: int | None = None
    budget_warn_fraction: float | None = None
    budget_hard_fraction: float | None = None
    max_subagents_per_run: int | None = None

    def __post_init__(self) -> None:
        if not self.token_budget_enabled:
            stray = [name for name in _TOKEN_FIELDS if getattr(self, name) is not None]
            if stray:
                raise ValueError("token budget is disabled but token fields are set: " + ", ".join(stray))
