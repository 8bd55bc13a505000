"""The Gateway's one principal: the token holder, or without a token a loopback caller."""

from __future__ import annotations

from deerflow_ext.gateway.principal import gateway_principal


def test_the_principal_seam() -> None:
    class Client:
        def __init__(self, host: str) -> None:
            self.host = host

    class Request:
        def __init__(self, host: str) -> None:
            self.client = Client(host)

    assert gateway_principal(Request("127.0.0.1"), token_required=False).is_admin  # type: ignore[union-attr]
    assert gateway_principal(Request("::1"), token_required=False) is not None
    assert gateway_principal(Request("203.0.113.7"), token_required=False) is None
    assert gateway_principal(Request("testclient"), token_required=False) is None
    assert gateway_principal(Request("203.0.113.7"), token_required=True) is not None  # it showed the token
