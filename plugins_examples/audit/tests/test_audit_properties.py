"""Property: every task outcome is recorded exactly once, whatever the order and whatever a neighbour does."""

from __future__ import annotations

import deerflow_audit

from deerflow_ext.testing import HostHarness, Plugin, check_same_result


def recorded(host: HostHarness) -> list[tuple[str, str]]:
    """(kind, outcome) of every audit row after shutdown, when the writer has flushed its buffer."""
    columns = ("id", "task_id", "run_id", "thread_id", "kind", "outcome", "recorded_at")
    rows = [dict(zip(columns, row, strict=True)) for row in host.table_rows("audit_task_outcomes")]
    return sorted((row["kind"], row["outcome"]) for row in rows)


def test_every_task_outcome_is_one_row_in_any_order_next_to_any_neighbour() -> None:
    # The given list records [("lead", "completed"), ("subagent", "completed")] (see test_audit);
    # neighbours that raise, cancel themselves or spend the start budget must not change that.
    audit = Plugin(deerflow_audit.install, {"flush_interval": 0.05}, required=True, table_prefix="audit_")
    check_same_result([audit], recorded, observe_after_close=True)
