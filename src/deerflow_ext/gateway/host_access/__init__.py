"""What the Gateway lends extensions, per request or per service, scoped to a principal.

- ``run_evidence``: run evidence readers over the host's run records and run journal.
- ``agent_runs``: agent runs started through the host as the action's principal.
- ``batch_results``: batch results, here a lead run's subagent delegations, from the journal.
- ``resolvers``: the resolvers ``deerflow_extension_api`` looks up on ``app.state``.

Plugin actions under the ``authorization:`` roles are ``gateway.plugin_authorization``'s
(the action route asks it; this package starts runs through the routes).
"""

from .agent_runs import OWNER_METADATA_KEY, GatewayAgentRuns
from .batch_results import HostBatchResultReader
from .resolvers import install_host_access, service_evidence_reader
from .run_evidence import DEFAULT_SETTLE_SECONDS, MAX_LIMIT, HostRunEvidenceReader

__all__ = [
    "DEFAULT_SETTLE_SECONDS",
    "MAX_LIMIT",
    "OWNER_METADATA_KEY",
    "GatewayAgentRuns",
    "HostBatchResultReader",
    "HostRunEvidenceReader",
    "install_host_access",
    "service_evidence_reader",
]
