"""The webhook URL policy, the signature and the header templates, without a server: what a
client's URL is refused for (the reason it is told), what a receiver verifies, and what stops
a Gateway from starting."""

from __future__ import annotations

import base64
import time

import pytest
from pydantic import ValidationError

from deerflow_ext.config.loading import ConfigError
from deerflow_ext.config.schema import AppConfig
from deerflow_ext.config.webhooks_config import WebhooksConfig, WebhookUrlPolicyConfig
from deerflow_ext.webhooks import (
    DISABLED,
    UrlPolicy,
    WebhookService,
    WebhookUrlError,
    filled_headers,
    secret_bytes,
    sign,
    verify,
)

DEFAULT = UrlPolicy.of(WebhookUrlPolicyConfig())


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://hooks.example.com/x", "require_https"),
        ("https://127.0.0.1/x", "disable_loopback"),
        ("https://[::1]/x", "disable_loopback"),
        ("https://[::ffff:127.0.0.1]/x", "disable_loopback"),
        ("https://192.168.1.10/x", "disable_private_ips"),
        ("https://[fd00::1]/x", "disable_private_ips"),
        ("https://0.0.0.0/x", "disable_private_ips"),
        ("https://hooks.example.com:8443/x", None),
        ("gopher://hooks.example.com/x", "scheme"),
        ("https:///x", "names no host"),
        ("/x", "relative URL"),
        ("https://hooks.example.com/" + "x" * 5000, "max_url_length"),
        ("https://hooks.example.com:99999/x", "not a URL"),
    ],
)
def test_the_default_policy_refuses_what_langgraphs_would_and_says_which_setting(url: str, says: str | None) -> None:
    if says is None:
        assert DEFAULT.check(url).port == 8443
        return
    with pytest.raises(WebhookUrlError, match=says):
        DEFAULT.check(url)


def test_allowed_domains_match_exact_hosts_and_subdomains_of_a_wildcard_only() -> None:
    policy = UrlPolicy.of(WebhookUrlPolicyConfig(allowed_domains=["*.corp.example", "hooks.example.com"]))
    assert policy.check("https://a.corp.example/x").host == "a.corp.example"
    assert policy.check("https://HOOKS.example.com./x").host == "hooks.example.com"  # urlsplit lowers it
    for refused in ("https://corp.example/x", "https://evilcorp.example/x", "https://example.com/x"):
        with pytest.raises(WebhookUrlError, match="allowed_domains"):
            policy.check(refused)


def test_allowed_ports_apply_the_schemes_default_when_the_url_names_none() -> None:
    policy = UrlPolicy.of(WebhookUrlPolicyConfig(allowed_ports=[443]))
    assert policy.check("https://hooks.example.com/x").port == 443
    with pytest.raises(WebhookUrlError, match="port 8443 is not allowed"):
        policy.check("https://hooks.example.com:8443/x")


async def test_a_name_is_resolved_and_every_address_checked() -> None:
    with pytest.raises(WebhookUrlError, match="disable_loopback"):
        await DEFAULT.resolve(DEFAULT.check("https://localhost/x"))
    allowing = UrlPolicy.of(WebhookUrlPolicyConfig(disable_loopback=False))
    assert await allowing.resolve(allowing.check("https://localhost/x")) in ("127.0.0.1", "::1")
    with pytest.raises(WebhookUrlError, match="does not resolve"):
        await allowing.resolve(allowing.check("https://no-such-host.invalid/x"))


def test_a_signature_verifies_for_its_body_and_time_only() -> None:
    secret = secret_bytes("s3cret")
    body, now = b'{"run_id":"r"}', int(time.time())
    headers = {"webhook-id": "d1", "webhook-timestamp": str(now), "webhook-signature": sign(secret, "d1", now, body)}
    assert verify(secret, headers, body, now=now)
    assert not verify(secret, headers, body + b" ", now=now)  # another body
    assert not verify(secret_bytes("other"), headers, body, now=now)  # another secret
    assert not verify(secret, {**headers, "webhook-id": "d2"}, body, now=now)  # another delivery
    assert not verify(secret, headers, body, now=now + 301)  # replayed too late
    raw = b"\x00\x01binary"
    assert secret_bytes("whsec_" + base64.b64encode(raw).decode()) == raw  # Standard Webhooks' form


def test_header_templates_name_prefixed_variables_filled_at_start() -> None:
    config = WebhooksConfig(headers={"Authorization": "Bearer ${{ env.LG_WEBHOOK_TOKEN }}", "X-Static": "v"})
    assert filled_headers(config, {"LG_WEBHOOK_TOKEN": "t0k"}) == {"Authorization": "Bearer t0k", "X-Static": "v"}
    with pytest.raises(
        ConfigError, match=r"webhooks\.headers\.Authorization: the environment variable LG_WEBHOOK_TOKEN"
    ):
        filled_headers(config, {})
    with pytest.raises(ValidationError, match="does not start with env_prefix 'LG_WEBHOOK_'"):
        AppConfig.model_validate({"webhooks": {"headers": {"A": "${{ env.DATABASE_PASSWORD }}"}}})
    custom = AppConfig.model_validate({"webhooks": {"env_prefix": "APP_", "headers": {"A": "${{ env.APP_X }}"}}})
    assert custom.webhooks.env_prefix == "APP_"
    with pytest.raises(ValidationError, match="allowed_ports"):
        AppConfig.model_validate({"webhooks": {"url": {"allowed_ports": [0]}}})


async def test_http_disable_webhooks_refuses_every_url() -> None:
    service = WebhookService(WebhooksConfig(), transactions=None, environ={}, disabled=True)  # type: ignore[arg-type]
    with pytest.raises(WebhookUrlError) as refused:
        await service.accept("https://1.1.1.1/hook")
    assert str(refused.value) == DISABLED and "http.disable_webhooks" in DISABLED
    await service.stop()
