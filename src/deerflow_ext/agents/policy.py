"""``HostPolicySnapshot`` projected from config, per agent.

A subagent sees the subagent budget (the per-agent override when one is configured, else
``subagents.token_budget``), not the lead's: the snapshot must describe the limits the host
enforces on *this* agent. A disabled budget projects no token fields at all.
"""

from __future__ import annotations

from deerflow_ext.config.schema import AppConfig, TokenBudgetConfig
from deerflow_extension_api import AgentScope, HostPolicySnapshot

__all__ = ["project_policy"]


def _budget_fields(budget: TokenBudgetConfig | None) -> dict[str, object]:
    if budget is None or not budget.enabled:
        return {"token_budget_enabled": False}
    return {
        "token_budget_enabled": True,
        "max_input_tokens": budget.max_input_tokens,
        "max_output_tokens": budget.max_output_tokens,
        "max_total_tokens": budget.max_total_tokens,
        "budget_warn_fraction": budget.warn_fraction,
        "budget_hard_fraction": budget.hard_fraction,
    }


def project_policy(config: AppConfig, scope: AgentScope, agent_name: str | None = None) -> HostPolicySnapshot:
    if scope is AgentScope.SUBAGENT:
        budget = config.subagents.agents.get(agent_name or "") or config.subagents.token_budget
        # Subagents get no `task` tool: they cannot delegate further.
        return HostPolicySnapshot(**_budget_fields(budget), max_subagents_per_run=0)  # type: ignore[arg-type]
    max_subagents = config.subagents.max_per_run if config.subagents.enabled else 0
    return HostPolicySnapshot(**_budget_fields(config.token_budget), max_subagents_per_run=max_subagents)  # type: ignore[arg-type]
