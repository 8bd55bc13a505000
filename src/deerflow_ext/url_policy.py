"""Which URLs the Gateway may be made to connect to, and the one address such a connection uses.

One policy for every URL an API caller can hand the Gateway: a run's ``webhook`` and a
remote MCP server's ``url`` written over HTTP (issue 58: "the same URL policy as
webhooks"). It is ``langgraph.json``'s ``webhooks.url`` (``config.webhooks_config``), so an
operator tightens or loosens both in one place. It sits just above ``config`` so that both
``webhooks`` and ``mcp_servers`` import it and neither imports the other.

A URL is checked as written (:meth:`UrlPolicy.check`: length, scheme, port, domain,
credentials, a literal address), then its name resolved and every address it gave checked
(:meth:`UrlPolicy.resolve`, or :meth:`UrlPolicy.resolve_blocking` from a worker thread).
Each caller says how it does so (``webhooks``: at submission, a refusal being a 422, and
again at each delivery, connecting to the address it checked so no second lookup can swap
in a refused one; ``mcp_servers.policy``: when the URL is written).

A refusal's message names whose URL it is and the setting that decides it; the
:class:`Voice` a policy speaks in supplies both (by default a webhook's, whose messages
clients already read), so a webhook refusal reads ``webhook: ... (webhooks.url.X)`` and an
MCP one ``mcpServers.NAME.url: ... (webhooks.url.X; mcp.allowed_url_prefixes can allow it)``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from .config.webhooks_config import WebhookUrlPolicyConfig

__all__ = ["Target", "UnresolvedHostError", "UrlPolicy", "UrlRefusedError", "Voice"]

_DEFAULT_PORTS = {"https": 443, "http": 80}

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# One getaddrinfo answer: (family, type, proto, canonname, sockaddr).
_AddrInfo = tuple[object, object, object, object, tuple[object, ...]]


class UrlRefusedError(ValueError):
    """A URL the policy refuses; the message says whose, why and which setting decides it."""


class UnresolvedHostError(UrlRefusedError):
    """The URL's host gave no address now. A caller that connects later through its own
    lookup may let this one pass: a name that resolves nowhere today proves no more about
    tomorrow than one that resolves to a public address."""


@dataclass(frozen=True)
class Voice:
    """Whose URL a refusal is about, as its messages say it.

    ``subject`` opens every message; ``credentials`` is where the URL's user and password
    belong instead; ``allowance`` follows the governing setting when the caller has an
    escape hatch of its own (MCP's ``mcp.allowed_url_prefixes``).
    """

    subject: str = "webhook"
    credentials: str = "webhooks.headers"
    allowance: str = ""

    def setting(self, key: str, detail: str = "") -> str:
        return f"(webhooks.url.{key}{detail}{self.allowance})"


@dataclass(frozen=True)
class Target:
    """A URL the policy accepted as written: where it points before any lookup."""

    url: str
    scheme: str
    host: str
    port: int


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


@dataclass(frozen=True)
class UrlPolicy:
    require_https: bool = True
    allowed_domains: tuple[str, ...] | None = None
    allowed_ports: tuple[int, ...] | None = None
    max_url_length: int = 4096
    disable_loopback: bool = True
    disable_private_ips: bool = True
    voice: Voice = field(default_factory=Voice)

    @classmethod
    def of(cls, config: WebhookUrlPolicyConfig, voice: Voice | None = None) -> UrlPolicy:
        return cls(
            require_https=config.require_https,
            allowed_domains=None if config.allowed_domains is None else tuple(config.allowed_domains),
            allowed_ports=None if config.allowed_ports is None else tuple(config.allowed_ports),
            max_url_length=config.max_url_length,
            disable_loopback=config.disable_loopback,
            disable_private_ips=config.disable_private_ips,
            voice=voice or Voice(),
        )

    def check(self, url: str) -> Target:
        """What the URL says, checked without a lookup; :class:`UrlRefusedError` naming why not."""
        who, voice = self.voice.subject, self.voice
        if len(url) > self.max_url_length:
            raise UrlRefusedError(
                f"{who}: the URL is {len(url)} characters long; at most {self.max_url_length} are allowed "
                + voice.setting("max_url_length")
            )
        if url.startswith("/"):
            raise UrlRefusedError(
                f"{who}: a relative URL (a call into this Gateway) is not served; give an absolute https:// URL"
            )
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise UrlRefusedError(f"{who}: {url!r} is not a URL ({exc})") from exc
        scheme = parts.scheme.lower()
        if scheme not in _DEFAULT_PORTS:
            raise UrlRefusedError(f"{who}: the scheme must be https (or http where allowed), not {scheme!r}")
        if scheme == "http" and self.require_https:
            raise UrlRefusedError(f"{who}: http:// is refused; use https:// " + voice.setting("require_https"))
        host = (parts.hostname or "").rstrip(".")
        if not host:
            raise UrlRefusedError(f"{who}: {url!r} names no host")
        if parts.username is not None or parts.password is not None:
            raise UrlRefusedError(f"{who}: credentials in the URL are refused; send them as {voice.credentials}")
        port = port if port is not None else _DEFAULT_PORTS[scheme]
        if self.allowed_ports is not None and port not in self.allowed_ports:
            allowed = ", ".join(str(p) for p in self.allowed_ports)
            raise UrlRefusedError(
                f"{who}: port {port} is not allowed " + voice.setting("allowed_ports", f": {allowed}")
            )
        if self.allowed_domains is not None and not any(_matches(host, d) for d in self.allowed_domains):
            allowed = ", ".join(self.allowed_domains)
            raise UrlRefusedError(
                f"{who}: host {host!r} is not allowed " + voice.setting("allowed_domains", f": {allowed}")
            )
        literal = _literal(host)
        if literal is not None:
            self.check_address(literal, host)
        return Target(url, scheme, host, port)

    def check_address(self, address: IPAddress, host: str) -> None:
        """Refuse loopback and private/special addresses unless the policy allows them."""
        who, voice = self.voice.subject, self.voice
        mapped = getattr(address, "ipv4_mapped", None)
        if mapped is not None:
            address = mapped
        if address.is_loopback:
            if self.disable_loopback:
                raise UrlRefusedError(
                    f"{who}: {host!r} is a loopback address ({address}); refused " + voice.setting("disable_loopback")
                )
            return
        if not address.is_global and self.disable_private_ips:
            raise UrlRefusedError(
                f"{who}: {host!r} is a private or reserved address ({address}); refused "
                + voice.setting("disable_private_ips")
            )

    async def resolve(self, target: Target) -> str:
        """Resolve the host once and check every address it gave; the first is the one to
        connect to. A literal IP is its own address."""
        literal = _literal(target.host)
        if literal is not None:
            return str(literal)
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                target.host, target.port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
            )
        except OSError as exc:
            raise self._unresolved(target, exc) from exc
        return self._checked(target, infos)

    def resolve_blocking(self, target: Target) -> str:
        """:meth:`resolve` for a caller already on a worker thread (the lookup blocks)."""
        literal = _literal(target.host)
        if literal is not None:
            return str(literal)
        try:
            infos = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
        except OSError as exc:
            raise self._unresolved(target, exc) from exc
        return self._checked(target, infos)

    def _unresolved(self, target: Target, exc: OSError) -> UnresolvedHostError:
        return UnresolvedHostError(f"{self.voice.subject}: host {target.host!r} does not resolve ({exc})")

    def _checked(self, target: Target, infos: Sequence[_AddrInfo]) -> str:
        addresses = [ipaddress.ip_address(str(info[4][0]).partition("%")[0]) for info in infos]
        if not addresses:
            raise UnresolvedHostError(f"{self.voice.subject}: host {target.host!r} has no address")
        for address in addresses:
            self.check_address(address, target.host)
        return str(addresses[0])


def _matches(host: str, domain: str) -> bool:
    host = host.lower()
    if domain.startswith("*."):
        return host.endswith(domain[1:])  # subdomains only, not the apex
    return host == domain
