"""Per-user identity: who each request is, and what each user may read and change.

Owns LangGraph's custom auth as the Gateway runs it. ``auth: {path: ...}`` in config.yaml
(``langgraph.json``'s key) names a ``langgraph_sdk.Auth``; this package loads it
(``loading``), runs its ``@auth.authenticate`` for every API request with the parameters
LangGraph's server passes, turning what it returns into the request's user (``users``,
``authenticate``), and runs its ``@auth.on`` handlers for threads, runs, assistants, crons
and the store in LangGraph's order of precedence (``authorize``), answering the filter a
handler returns or refusing (403) on ``False`` or an exception. Where those filters meet SQL
is persistence's (``persistence.owner_filter``); where they meet a route is the Gateway's
(``gateway.scoping``). With no ``auth`` configured nothing here runs: the Gateway keeps its
one optional token and one administrator.
"""

from __future__ import annotations

from .authenticate import Authenticator
from .authorize import Authorizer, Filters
from .gate import IdentityGate, build_identity_gate
from .loading import AuthLoadError, load_auth
from .users import ADMIN_PERMISSION, REQUEST_USER, AuthenticatedUser, user_of

__all__ = [
    "ADMIN_PERMISSION",
    "REQUEST_USER",
    "AuthLoadError",
    "AuthenticatedUser",
    "Authenticator",
    "Authorizer",
    "Filters",
    "IdentityGate",
    "build_identity_gate",
    "load_auth",
    "user_of",
]
