"""What the operator sees of the extensions: each hook's cost and each entry's status.

``hook_metrics`` keeps the per-(extension, hook) counters the hot paths increment and
``/metrics`` reads at scrape time (``runtime``'s Prometheus collector); ``inventory`` describes
every ``plugins:`` entry for ``/api/extensions``, ``/health`` and ``extensions list --json``.
Composition and notifications write the counters, so this sits below them and above ``plugin_loading``.
"""
