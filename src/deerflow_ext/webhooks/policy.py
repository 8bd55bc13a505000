"""Which URLs a webhook may be sent to, and the one address each delivery connects to.

The policy is ``langgraph.json``'s ``webhooks.url`` (``config.webhooks_config``). A URL is
checked twice: when a client submits it (:meth:`UrlPolicy.check` then
:meth:`UrlPolicy.resolve`: a refusal is a 422 naming the reason, never a dropped webhook),
and again at each delivery, because what a name resolves to can change between the two
(DNS rebinding). At delivery the name is resolved **once**, every address it gave is checked,
and the connection is made to the checked address itself (``delivery``: the request goes
to the IP, with the name kept in ``Host`` and TLS's SNI), so no second lookup can swap in an
address the policy refuses.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..config.webhooks_config import WebhookUrlPolicyConfig

__all__ = ["Target", "UrlPolicy", "WebhookUrlError"]

_DEFAULT_PORTS = {"https": 443, "http": 80}

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class WebhookUrlError(ValueError):
    """A URL the policy refuses; the message says why and which setting decides it."""


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

    @classmethod
    def of(cls, config: WebhookUrlPolicyConfig) -> UrlPolicy:
        return cls(
            require_https=config.require_https,
            allowed_domains=None if config.allowed_domains is None else tuple(config.allowed_domains),
            allowed_ports=None if config.allowed_ports is None else tuple(config.allowed_ports),
            max_url_length=config.max_url_length,
            disable_loopback=config.disable_loopback,
            disable_private_ips=config.disable_private_ips,
        )

    def check(self, url: str) -> Target:
        """What the URL says, checked without a lookup; :class:`WebhookUrlError` naming why not."""
        if len(url) > self.max_url_length:
            raise WebhookUrlError(
                f"webhook: the URL is {len(url)} characters long; at most {self.max_url_length} are allowed "
                "(webhooks.url.max_url_length)"
            )
        if url.startswith("/"):
            raise WebhookUrlError(
                "webhook: a relative URL (a call into this Gateway) is not served; give an absolute https:// URL"
            )
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise WebhookUrlError(f"webhook: {url!r} is not a URL ({exc})") from exc
        scheme = parts.scheme.lower()
        if scheme not in _DEFAULT_PORTS:
            raise WebhookUrlError(f"webhook: the scheme must be https (or http where allowed), not {scheme!r}")
        if scheme == "http" and self.require_https:
            raise WebhookUrlError("webhook: http:// is refused; use https:// (webhooks.url.require_https)")
        host = (parts.hostname or "").rstrip(".")
        if not host:
            raise WebhookUrlError(f"webhook: {url!r} names no host")
        if parts.username is not None or parts.password is not None:
            raise WebhookUrlError("webhook: credentials in the URL are refused; send them as webhooks.headers")
        port = port if port is not None else _DEFAULT_PORTS[scheme]
        if self.allowed_ports is not None and port not in self.allowed_ports:
            allowed = ", ".join(str(p) for p in self.allowed_ports)
            raise WebhookUrlError(f"webhook: port {port} is not allowed (webhooks.url.allowed_ports: {allowed})")
        if self.allowed_domains is not None and not any(_matches(host, d) for d in self.allowed_domains):
            allowed = ", ".join(self.allowed_domains)
            raise WebhookUrlError(f"webhook: host {host!r} is not allowed (webhooks.url.allowed_domains: {allowed})")
        literal = _literal(host)
        if literal is not None:
            self.check_address(literal, host)
        return Target(url, scheme, host, port)

    def check_address(self, address: IPAddress, host: str) -> None:
        """Refuse loopback and private/special addresses unless the policy allows them."""
        mapped = getattr(address, "ipv4_mapped", None)
        if mapped is not None:
            address = mapped
        if address.is_loopback:
            if self.disable_loopback:
                raise WebhookUrlError(
                    f"webhook: {host!r} is a loopback address ({address}); refused (webhooks.url.disable_loopback)"
                )
            return
        if not address.is_global and self.disable_private_ips:
            raise WebhookUrlError(
                f"webhook: {host!r} is a private or reserved address ({address}); refused "
                "(webhooks.url.disable_private_ips)"
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
            raise WebhookUrlError(f"webhook: host {target.host!r} does not resolve ({exc})") from exc
        addresses = [ipaddress.ip_address(str(info[4][0]).partition("%")[0]) for info in infos]
        if not addresses:
            raise WebhookUrlError(f"webhook: host {target.host!r} has no address")
        for address in addresses:
            self.check_address(address, target.host)
        return str(addresses[0])


def _matches(host: str, domain: str) -> bool:
    host = host.lower()
    if domain.startswith("*."):
        return host.endswith(domain[1:])  # subdomains only, not the apex
    return host == domain
