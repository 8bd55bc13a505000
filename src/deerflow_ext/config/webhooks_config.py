"""``config.yaml``'s ``webhooks:`` section: ``langgraph.json``'s keys, so a LangGraph user finds
the same ones (``url`` policy, ``headers`` with ``${{ env.VAR }}`` templates, ``env_prefix``),
and DeerFlow's own beside them for what LangGraph does not configure (signing, retries).

Defaults are the safe ones: ``https`` only, no loopback or private address, the default
ports. A header template may only name a variable starting with ``env_prefix`` (LangGraph's
``LG_WEBHOOK_`` by default): the prefix is the boundary that keeps a header from reading, say,
the database password; the check is made here, when the file is read, and the value is read
when the Gateway starts (``deerflow_ext.webhooks.headers``).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["ENV_TEMPLATE", "WebhookUrlPolicyConfig", "WebhooksConfig"]

ENV_TEMPLATE = re.compile(r"\$\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
"""``${{ env.VAR }}`` in a header value, as ``langgraph.json`` writes it."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WebhookUrlPolicyConfig(_Strict):
    """Which ``webhook`` URLs a client may submit (``langgraph.json``'s ``webhooks.url``).

    ``disable_loopback`` refuses relative URLs (LangGraph's meaning: calls into the server
    itself, which this Gateway does not make: a relative URL is always refused) *and* URLs
    whose host is or resolves to a loopback address; ``disable_private_ips`` refuses private,
    link-local, shared, reserved, multicast and unspecified addresses. Both default to True;
    a test or an on-premises receiver switches them off.
    """

    require_https: bool = True
    allowed_domains: list[str] | None = Field(
        default=None, description="Exact hosts, or '*.example.com' for its subdomains (not the apex)."
    )
    allowed_ports: list[int] | None = Field(
        default=None, description="Ports a URL may name; a URL without one uses its scheme's (443, 80)."
    )
    max_url_length: int = Field(default=4096, ge=8)
    disable_loopback: bool = True
    disable_private_ips: bool = True

    @field_validator("allowed_ports")
    @classmethod
    def _ports(cls, ports: list[int] | None) -> list[int] | None:
        for port in ports or []:
            if not 0 < port < 65536:
                raise ValueError(f"{port} is not a TCP port (1-65535)")
        return ports

    @field_validator("allowed_domains")
    @classmethod
    def _domains(cls, domains: list[str] | None) -> list[str] | None:
        for domain in domains or []:
            bare = domain.removeprefix("*.")
            if not bare or "*" in bare or "/" in bare or ":" in bare:
                raise ValueError(f"{domain!r} is not a host name or '*.<domain>'")
        return None if domains is None else [d.lower().rstrip(".") for d in domains]


class WebhooksConfig(_Strict):
    """Outbound webhooks: the URL policy, the headers every delivery carries, signing, retries and
    how long a settled delivery is kept."""

    url: WebhookUrlPolicyConfig = Field(default_factory=WebhookUrlPolicyConfig)
    headers: dict[str, str] = Field(default_factory=dict)
    env_prefix: str = "LG_WEBHOOK_"
    signing_secret_env: str = Field(
        default="DEERFLOW_WEBHOOK_SECRET",
        description="The environment variable holding the HMAC-SHA256 signing secret (DeerFlow's key).",
    )
    allowed_fields: list[str] | None = Field(
        default=None, description="Only these top-level fields of the payload are sent (None: all)."
    )
    max_attempts: int = Field(default=8, ge=1, le=100, description="Attempts before a delivery is recorded failed.")
    backoff_seconds: float = Field(default=2.0, gt=0, description="Delay before the first retry; doubled each time.")
    max_backoff_seconds: float = Field(default=600.0, gt=0)
    timeout_seconds: float = Field(default=10.0, gt=0, le=300, description="One attempt's bound.")
    keep_settled_days: float = Field(
        default=7.0,
        gt=0,
        description=(
            "A delivered or failed delivery is deleted this long after it settled "
            "(GET /api/webhooks lists it until then)."
        ),
    )

    @model_validator(mode="after")
    def _templates_name_prefixed_variables(self) -> WebhooksConfig:
        for name, value in self.headers.items():
            for variable in ENV_TEMPLATE.findall(value):
                if not variable.startswith(self.env_prefix):
                    raise ValueError(
                        f"headers.{name}: ${{{{ env.{variable} }}}} does not start with env_prefix "
                        f"{self.env_prefix!r}; only variables with that prefix may be sent to a receiver"
                    )
            if "${{" in ENV_TEMPLATE.sub("", value):
                raise ValueError(f"headers.{name}: a template is written '${{{{ env.VARIABLE }}}}'")
        return self
