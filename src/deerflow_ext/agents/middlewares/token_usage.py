"""Token accounting and the token budget."""

from __future__ import annotations

import logging
from typing import Any

from langchain.agents.middleware import AgentMiddleware, hook_config
from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from deerflow_ext.tokens import TOKEN_KEYS
from deerflow_extension_api import HostPolicySnapshot

from ..context import context_value
from .state import HostState

__all__ = ["TokenBudgetMiddleware", "TokenUsageMiddleware", "add_usage"]

logger = logging.getLogger(__name__)


def add_usage(total: dict[str, Any] | None, usage: dict[str, Any] | None) -> dict[str, int]:
    base = {key: int((total or {}).get(key, 0) or 0) for key in TOKEN_KEYS}
    for key in TOKEN_KEYS:
        base[key] += int((usage or {}).get(key, 0) or 0)
    return base


class TokenUsageMiddleware(AgentMiddleware[HostState, Any]):
    """Adds each model reply's ``usage_metadata`` to state.

    ``token_usage`` is the thread's running total; ``run_token_usage`` restarts when the run
    id changes, so a run (goal continuations included) reports its own consumption and the
    budget applies per run rather than to the thread's whole history.
    """

    state_schema = HostState

    def after_model(self, state: HostState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        last = state["messages"][-1] if state["messages"] else None
        if not isinstance(last, AIMessage) or not last.usage_metadata:
            return None
        usage = dict(last.usage_metadata)
        run_id = context_value(runtime, "run_id")
        previous = state.get("run_token_usage") or {}
        run_total = add_usage(previous if previous.get("run_id") == run_id else None, usage)
        return {
            "token_usage": add_usage(state.get("token_usage"), usage),
            "run_token_usage": {"run_id": run_id, **run_total},
        }

    async def aafter_model(self, state: HostState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.after_model(state, runtime)


class TokenBudgetMiddleware(AgentMiddleware[HostState, Any]):
    """Stops the run before a model call once the run's usage reaches the hard limit.

    A no-op unless the budget is enabled: the policy snapshot it enforces is the same one
    extensions see, so what they read is what the host does.
    """

    state_schema = HostState

    def __init__(self, policy: HostPolicySnapshot) -> None:
        super().__init__()
        self.policy = policy
        self._warned: set[tuple[str, str]] = set()

    def release_policy_parameters(self) -> dict[str, object]:
        return {
            "enabled": self.policy.token_budget_enabled,
            "max_input_tokens": self.policy.max_input_tokens,
            "max_output_tokens": self.policy.max_output_tokens,
            "max_total_tokens": self.policy.max_total_tokens,
            "warn_fraction": self.policy.budget_warn_fraction,
            "hard_fraction": self.policy.budget_hard_fraction,
        }

    def _exceeded(self, used: dict[str, Any], run_id: str) -> str | None:
        warn = self.policy.budget_warn_fraction or 1.0
        hard = self.policy.budget_hard_fraction or 1.0
        for key, limit in (
            ("input_tokens", self.policy.max_input_tokens),
            ("output_tokens", self.policy.max_output_tokens),
            ("total_tokens", self.policy.max_total_tokens),
        ):
            if limit is None:
                continue
            value = int(used.get(key, 0) or 0)
            if value >= limit * hard:
                return f"{key} {value} reached the budget of {limit}"
            if value >= limit * warn and (run_id, key) not in self._warned:
                self._warned.add((run_id, key))
                logger.warning("run %s used %d %s of a budget of %d", run_id, value, key, limit)
        return None

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: HostState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        if not self.policy.token_budget_enabled:
            return None
        run_id = context_value(runtime, "run_id")
        used = state.get("run_token_usage") or {}
        if used.get("run_id") != run_id:
            return None  # nothing spent in this run yet
        reason = self._exceeded(used, str(run_id))
        if reason is None:
            return None
        return {
            "jump_to": "end",
            "messages": [AIMessage(content=f"Stopped: token budget exhausted ({reason}).")],
        }

    @hook_config(can_jump_to=["end"])
    async def abefore_model(self, state: HostState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.before_model(state, runtime)
