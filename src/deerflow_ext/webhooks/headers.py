"""The configured headers every delivery carries, their ``${{ env.VAR }}`` templates filled in.

Filled once, when the Gateway starts: a variable the file names but the environment lacks
stops the start with one line naming the header and the variable (as LangGraph's server
does), rather than sending a header with a hole in it. Which variables a template may name
(``env_prefix``) is checked when the file is read (``config.webhooks_config``).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..config.loading import ConfigError
from ..config.webhooks_config import ENV_TEMPLATE, WebhooksConfig

__all__ = ["WebhookConfigError", "filled_headers"]


class WebhookConfigError(ConfigError):
    """The ``webhooks:`` section cannot be served as written; the message names the key
    (a ``ConfigError``: ``deerflow-ext serve`` prints its one line and does not start)."""


def filled_headers(config: WebhooksConfig, environ: Mapping[str, str], path: str = "config.yaml") -> dict[str, str]:
    """The headers with their templates filled; ``path``: the file the error names."""
    filled: dict[str, str] = {}
    for name, template in config.headers.items():
        missing = [v for v in ENV_TEMPLATE.findall(template) if v not in environ]
        if missing:
            raise WebhookConfigError(
                path, None, f"webhooks.headers.{name}", f"the environment variable {missing[0]} is not set"
            )
        filled[name] = ENV_TEMPLATE.sub(lambda m: environ[m.group(1)], template)
    return filled
