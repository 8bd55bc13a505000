"""Notifications: lifecycle hooks and observers, delivered under the spec's fail-open rules.

``notify`` is the rule (registration order, isolation, one shared budget, cancellation by
origin) and is handed what makes it fast: the plans ``notify_plans`` resolves once per
snapshot and hook, and the budget's clock (``budget_timer``). ``notification_loop`` is the one
loop they run on; ``lifecycle`` (the task bracket) and ``observe`` (system model calls,
compaction) are the notifiers.
"""
