"""Authorization of plugin actions: DeerFlow's ``authorization:`` section, its built-in RBAC.

Asked by the action route after the plugin and action are known and enabled and **before**
its body is read, so a refused caller costs no upload. The question is DeerFlow's: resource
``plugin_action``, action ``invoke``, target ``<namespace>/<action>``, the principal's role.
The answer is re-read from the app's config on every request. With ``enabled: false`` (the
default) every admitted caller may invoke.

A principal's role is its first role; an internal caller without one takes
``default_role``. A role the config does not name, or no role at all, is a question the
policy cannot answer: refused under ``fail_closed`` (the default), allowed otherwise, with a
warning either way. A role with no rule for ``plugin_action`` is unrestricted, as DeerFlow's
RBAC has it.
"""

from __future__ import annotations

import logging

from deerflow_extension_api import ExtensionPrincipal

from ..config.schema import AuthorizationConfig

__all__ = ["PLUGIN_ACTION", "plugin_action_allowed", "plugin_action_target"]

logger = logging.getLogger("deerflow_ext.gateway")

PLUGIN_ACTION = "plugin_action"


def plugin_action_target(namespace: str, action: str) -> str:
    """DeerFlow's target for a plugin action: ``<namespace>/<action>``."""
    return f"{namespace}/{action}"


def plugin_action_allowed(
    config: AuthorizationConfig, principal: ExtensionPrincipal, namespace: str, action: str
) -> bool:
    """Whether ``principal`` may invoke the action under ``config``."""
    if config.enabled is not True:
        return True
    target = plugin_action_target(namespace, action)
    role = principal.roles[0] if principal.roles else (config.default_role if principal.is_internal else None)
    rules = config.roles.get(role) if role is not None else None
    if rules is None:
        verdict = "refused" if config.fail_closed else "allowed (fail_closed is false)"
        logger.warning("plugin action %s: role %r is not in authorization.roles; %s", target, role, verdict)
        return not config.fail_closed
    rule = rules.get(PLUGIN_ACTION)
    return True if rule is None else rule.permits(target)
