"""What the Gateway lends extensions, per request or per service, scoped to a principal.

- ``run_evidence``: run evidence readers over the host's run records and run journal.
- ``authorization``: plugin actions under the ``authorization:`` section's roles.
- ``resolvers``: the resolvers ``deerflow_extension_api`` looks up on ``app.state``.

Batch results (``BATCH_RESULTS_RESOLVER_KEY``) are not lent: this host keeps no durable
batches, so ``ActionContext.batch_results()`` answers DeerFlow's 503.
"""

from .authorization import PLUGIN_ACTION, plugin_action_allowed, plugin_action_target
from .resolvers import install_host_access, service_evidence_reader
from .run_evidence import DEFAULT_SETTLE_SECONDS, MAX_LIMIT, HostRunEvidenceReader

__all__ = [
    "DEFAULT_SETTLE_SECONDS",
    "MAX_LIMIT",
    "PLUGIN_ACTION",
    "HostRunEvidenceReader",
    "install_host_access",
    "plugin_action_allowed",
    "plugin_action_target",
    "service_evidence_reader",
]
