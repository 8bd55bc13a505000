"""``FakeAgentHost`` stands in for the agent host the run worker drives: it must keep the
shape of ``LeadRunner``, the Protocol the worker is typed against, or the Gateway suite
would go on passing against a worker that no longer calls the real host that way.

The same check is made statically: ``gw_fixtures`` assigns a ``FakeAgentHost`` to a
``LeadRunner`` under ``TYPE_CHECKING``, and the ``types`` session runs mypy on that file.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
from gw_fixtures import FakeAgentHost

from deerflow_ext.agents.host import AgentHost
from deerflow_ext.runtime import LeadRunner


def _shape(function: Callable[..., Any]) -> list[tuple[str, object, object]]:
    """Each parameter's name, kind and default: what a call site depends on."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


def _protocol_members() -> set[str]:
    return {name for name in vars(LeadRunner) if not name.startswith("_")}


@pytest.mark.parametrize("implementation", [FakeAgentHost, AgentHost], ids=lambda c: c.__name__)
def test_every_lead_runner_method_exists_with_the_protocols_parameters(implementation: type) -> None:
    members = _protocol_members()
    assert members == {"run_lead"}, f"LeadRunner changed ({sorted(members)}): check its implementations"
    for name in members:
        expected, actual = getattr(LeadRunner, name), getattr(implementation, name)
        assert inspect.iscoroutinefunction(actual) == inspect.iscoroutinefunction(expected), name
        assert _shape(actual) == _shape(expected), f"{implementation.__name__}.{name} drifted from LeadRunner"


def test_the_shape_check_sees_a_drift() -> None:
    class Drifted:
        async def run_lead(self, request: object, *, extensions: object, task_store: object) -> None:
            return None

    assert _shape(Drifted.run_lead) != _shape(LeadRunner.run_lead)
