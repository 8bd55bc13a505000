"""The Gateway as a tool for other agents: its assistants served over agent protocols.

LangGraph's server exposes every assistant two ways besides its own API, and so does this
package: ``/api/mcp`` (Model Context Protocol, ``mcp.py``: each assistant is a tool) and
``/api/a2a/{assistant_id}`` (Agent-to-Agent, ``a2a.py``: each assistant is an agent with a
card). Each protocol's wire format belongs to its official SDK; what this package owns is
the mapping from the protocol's requests to the Gateway's runs.

The runs themselves are the Gateway's: an endpoint here never starts, waits for or answers
a run by itself but through :class:`~.runs.ServedRuns`, which the Gateway implements with
the very functions its run routes use (``gateway/protocol_runs.py``). So a protocol's run is
a normal run to extensions (lifecycle hooks, observers), and the endpoints sit behind the
Gateway's front layer (token, Host/Origin checks, body limits) like every route. This
package sits below the Gateway in the layering (it imports nothing of it), and the Gateway
mounts it unless ``config.yaml`` says ``http: {disable_mcp: true}`` / ``disable_a2a``.
Each protocol's SDK is imported by the first request to it (``endpoints.py``): a Gateway
nobody calls over MCP or A2A pays neither their memory nor their import time.
"""

from .endpoints import ProtocolEndpoints
from .runs import RunCall, RunRefused, ServedRuns, StartedRun, answer_text

__all__ = ["ProtocolEndpoints", "RunCall", "RunRefused", "ServedRuns", "StartedRun", "answer_text"]
