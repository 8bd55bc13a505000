"""Token and tool-call accounting: the middlewares, the fold at task stop, the totals router."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import deerflow_costs
import pytest
from deerflow_costs import (
    CostLedger,
    CostMiddlewares,
    CostTotals,
    Prices,
    TaskCosts,
    TokenCounter,
    ToolCallCounter,
)
from langchain.agents.middleware.types import ExtendedModelResponse, ModelResponse
from langchain_core.messages import AIMessage

from deerflow_extension_api import (
    EXTENSION_TASK_STORE_KEY,
    AgentBuildContext,
    AgentScope,
    ExtensionData,
    Placement,
    TaskInfo,
    TaskOutcome,
    collect_release_policies,
)


def _ai(inp: int, out: int) -> AIMessage:
    return AIMessage(
        content="ok", usage_metadata={"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}
    )


def _request(store: ExtensionData | None, **extra: Any) -> SimpleNamespace:
    context = {EXTENSION_TASK_STORE_KEY: store} if store is not None else {}
    return SimpleNamespace(runtime=SimpleNamespace(context=context), **extra)


def test_prices_validate_and_price_tokens() -> None:
    prices = Prices.from_config({"input_per_million": 1.0, "output_per_million": 2.0})
    assert prices.cost(1_000_000, 500_000) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="negative"):
        Prices.from_config({"input_per_million": -1})
    with pytest.raises(ValueError, match="unknown costs config key"):
        Prices.from_config({"price": 1})


@pytest.mark.parametrize(
    "response",
    [
        _ai(10, 5),
        ModelResponse(result=[_ai(10, 5)]),
        ExtendedModelResponse(model_response=ModelResponse([_ai(10, 5)])),
    ],
    ids=["AIMessage", "ModelResponse", "ExtendedModelResponse"],
)
def test_token_counter_counts_every_response_shape(response: Any) -> None:
    store = ExtensionData("t1")
    counter = TokenCounter()
    assert counter.wrap_model_call(_request(store), lambda _request: response) is response

    async def handler(_request: Any) -> Any:
        return response

    asyncio.run(counter.awrap_model_call(_request(store), handler))
    snap = store.get(TaskCosts).snapshot()
    assert (snap["model_calls"], snap["input_tokens"], snap["output_tokens"], snap["total_tokens"]) == (
        2,
        20,
        10,
        30,
    )


def test_calls_outside_a_task_are_not_counted_and_not_broken() -> None:
    assert TokenCounter().wrap_model_call(_request(None), lambda _r: _ai(1, 1)).content == "ok"
    assert ToolCallCounter().wrap_tool_call(_request(None, tool_call={"name": "x"}), lambda _r: "done") == "done"


def test_tool_counter_counts_by_name_even_when_the_tool_fails() -> None:
    store = ExtensionData("t1")
    counter = ToolCallCounter()

    def boom(_request: Any) -> Any:
        raise RuntimeError("tool failed")

    counter.wrap_tool_call(_request(store, tool_call={"name": "calculator"}), lambda _r: "4")
    with pytest.raises(RuntimeError):
        counter.wrap_tool_call(_request(store, tool_call={"name": "task"}), boom)
    assert store.get(TaskCosts).snapshot()["tools"] == {"calculator": 1, "task": 1}


def test_placements_and_declared_policy() -> None:
    prices = Prices(input_per_million=0.15, output_per_million=0.6)
    placements = CostMiddlewares(prices).contribute_middlewares(
        ExtensionData("app"), AgentBuildContext(AgentScope.LEAD)
    )
    assert [(type(p.middleware), p.placement) for p in placements] == [
        (TokenCounter, Placement.MODEL_LOGICAL),
        (ToolCallCounter, Placement.TOOL_VISIBLE),
    ]
    policies = collect_release_policies([p.middleware for p in placements])
    assert policies["TokenCounter"] == {
        "input_per_million": 0.15,
        "output_per_million": 0.6,
        "currency": "USD",
    }
    assert "ToolCallCounter" in policies


def test_ledger_folds_tasks_into_totals_and_tolerates_missing_counts() -> None:
    app = ExtensionData("app")
    lead, sub = ExtensionData("t1"), ExtensionData("t2")
    ledger = CostLedger()
    asyncio.run(ledger.on_task_start(app, lead, TaskInfo("t1", "r1", "th", "lead")))
    lead.get(TaskCosts).add_model_call(100, 20, 120)
    lead.get(TaskCosts).add_tool_call("task")
    asyncio.run(ledger.on_task_stop(app, lead, TaskInfo("t1", "r1", "th", "lead"), TaskOutcome.COMPLETED))
    asyncio.run(ledger.on_task_stop(app, sub, TaskInfo("t2", "r1", "th", "subagent"), TaskOutcome.FAILED))
    totals = app.get(CostTotals).snapshot(Prices(input_per_million=1.0))
    assert (totals["tasks"], totals["total_tokens"], totals["tool_calls"], totals["tools"]) == (
        2,
        120,
        1,
        {"task": 1},
    )
    assert totals["estimated_cost"] == pytest.approx(0.0001)
    assert totals["by_kind"]["subagent"]["tasks"] == 1 and totals["by_kind"]["subagent"]["model_calls"] == 0


def test_in_a_real_host_totals_cover_the_lead_and_its_subagent(deerflow_host: Any) -> None:
    host = deerflow_host(deerflow_costs.install, {"input_per_million": 1.0, "output_per_million": 2.0})
    assert host.client.get("/api/ext/costs/totals").json()["tasks"] == 0
    outcome = host.run("delegate: add up the invoices")
    totals = host.client.get("/api/ext/costs/totals").json()
    assert totals["tasks"] == 2
    assert set(totals["by_kind"]) == {"lead", "subagent"}
    assert totals["by_kind"]["lead"]["tools"].get("task") == 1  # the delegation itself
    assert totals["by_kind"]["subagent"]["model_calls"] >= 1
    assert totals["input_tokens"] > 0 and totals["output_tokens"] > 0
    assert totals["total_tokens"] >= totals["input_tokens"] + totals["output_tokens"]
    lead_usage = outcome.run["token_usage"]
    assert totals["by_kind"]["lead"]["input_tokens"] <= lead_usage["input_tokens"] or lead_usage["input_tokens"] == 0
    assert not host.diagnostics.snapshot()
