"""The values the costs extension keeps: per task in the task store, totals in the app store.

Each class has its own lock because the stores protect their maps, not the objects in
them: a lead run's tool calls can run concurrently, and lead runs and subagents stop
concurrently.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from threading import Lock
from typing import Any

__all__ = ["CostTotals", "Prices", "TaskCosts"]


@dataclass(frozen=True, slots=True)
class Prices:
    """Price per million tokens, used to estimate the cost of the counted tokens.

    These are the middleware's release-policy parameters: changing a price changes
    what the extension reports, so it changes the agent's assembly fingerprint too.
    """

    input_per_million: float = 0.0
    output_per_million: float = 0.0
    currency: str = "USD"

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Prices:
        unknown = set(config) - {"input_per_million", "output_per_million", "currency"}
        if unknown:
            raise ValueError(f"unknown costs config key(s): {', '.join(sorted(unknown))}")
        prices = cls(
            input_per_million=float(config.get("input_per_million", 0.0)),
            output_per_million=float(config.get("output_per_million", 0.0)),
            currency=str(config.get("currency", "USD")),
        )
        if prices.input_per_million < 0 or prices.output_per_million < 0:
            raise ValueError("prices must not be negative")
        return prices

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_million + output_tokens * self.output_per_million) / 1_000_000

    def as_policy(self) -> dict[str, object]:
        return {
            "input_per_million": self.input_per_million,
            "output_per_million": self.output_per_million,
            "currency": self.currency,
        }


@dataclass
class TaskCosts:
    """Counts for one task; lives in that task's store and disappears with it."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    model_calls: int = 0
    tool_calls: dict[str, int] = field(default_factory=dict)
    _lock: Lock = field(default_factory=Lock, repr=False)

    def add_model_call(self, input_tokens: int, output_tokens: int, total_tokens: int) -> None:
        with self._lock:
            self.model_calls += 1
            self.input_tokens += input_tokens
            self.output_tokens += output_tokens
            self.total_tokens += total_tokens

    def add_tool_call(self, name: str) -> None:
        with self._lock:
            self.tool_calls[name] = self.tool_calls.get(name, 0) + 1

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens,
                "total_tokens": self.total_tokens,
                "model_calls": self.model_calls,
                "tool_calls": sum(self.tool_calls.values()),
                "tools": dict(self.tool_calls),
            }


def _zero() -> dict[str, Any]:
    return {
        "tasks": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "total_tokens": 0,
        "model_calls": 0,
        "tool_calls": 0,
        "tools": {},
    }


@dataclass
class CostTotals:
    """Process-wide totals, overall and by task kind (``lead`` / ``subagent``)."""

    _overall: dict[str, Any] = field(default_factory=_zero)
    _by_kind: dict[str, dict[str, Any]] = field(default_factory=dict)
    _lock: Lock = field(default_factory=Lock, repr=False)

    def fold(self, kind: str, task: Mapping[str, Any]) -> None:
        """Add one finished task's snapshot."""
        with self._lock:
            for bucket in (self._overall, self._by_kind.setdefault(kind, _zero())):
                bucket["tasks"] += 1
                for key in ("input_tokens", "output_tokens", "total_tokens", "model_calls", "tool_calls"):
                    bucket[key] += int(task.get(key, 0))
                for name, count in dict(task.get("tools", {})).items():
                    bucket["tools"][name] = bucket["tools"].get(name, 0) + int(count)

    def snapshot(self, prices: Prices | None = None) -> dict[str, Any]:
        """A deep copy taken under the lock, with the estimated cost when *prices* is given."""
        with self._lock:
            overall = {**self._overall, "tools": dict(self._overall["tools"])}
            by_kind = {k: {**v, "tools": dict(v["tools"])} for k, v in self._by_kind.items()}
        if prices is not None:
            for bucket in (overall, *by_kind.values()):
                cost = prices.cost(bucket["input_tokens"], bucket["output_tokens"])
                bucket["estimated_cost"] = round(cost, 8)
                bucket["currency"] = prices.currency
        return {**overall, "by_kind": by_kind}
