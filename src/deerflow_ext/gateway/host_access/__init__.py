"""What the Gateway lends extensions, per request or per service, scoped to a principal.

- ``run_evidence``: run evidence readers over the host's run records and run journal.
- ``agent_runs``: agent runs started through the host as the action's principal.
- ``resolvers``: the resolvers ``deerflow_extension_api`` looks up on ``app.state``.

Plugin actions under the ``authorization:`` roles are ``gateway.plugin_authorization``'s
(the action route asks it; this package starts runs through the routes). Batch results
(``BATCH_RESULTS_RESOLVER_KEY``) are not lent: this host keeps no durable batches, so
``ActionContext.batch_results()`` answers DeerFlow's 503.
"""

from .agent_runs import OWNER_METADATA_KEY, GatewayAgentRuns
from .resolvers import install_host_access, service_evidence_reader
from .run_evidence import DEFAULT_SETTLE_SECONDS, MAX_LIMIT, HostRunEvidenceReader

__all__ = [
    "DEFAULT_SETTLE_SECONDS",
    "MAX_LIMIT",
    "OWNER_METADATA_KEY",
    "GatewayAgentRuns",
    "HostRunEvidenceReader",
    "install_host_access",
    "service_evidence_reader",
]
