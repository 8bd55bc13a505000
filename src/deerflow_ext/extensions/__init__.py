"""The extension runtime, one subpackage per concern (layered, top to bottom).

* ``composition`` | ``notifications`` | ``serving`` — what runs a task or serves the Gateway:
  contributed middleware composed into the run stack, lifecycle hooks and observers, services
  and routers;
* ``operator_view`` — each hook's cost and each entry's status, as the operator reads them;
* ``plugin_loading`` — from ``plugins:`` entries to a frozen snapshot;
* ``contract`` — the host's side of the public contract: hookspecs, registry, snapshot;
* ``boundary`` | ``memo`` — what every place that calls extension code shares (attribution,
  cancellation origin, process exits, the loop watchdog), and the one memo mechanism.

A subpackage imports only from those below it (``[tool.importlinter]`` in pyproject.toml;
docs/ARCHITECTURE.md, "Layers"). Nothing is re-exported here: import from the module.
"""
