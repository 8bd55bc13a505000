"""The Gateway: ``create_app()``, its lifespan, the host routes and ``serve``."""

from .app import AgentHostFactory, GatewayOptions, create_app, load_gateway_extensions

__all__ = ["AgentHostFactory", "GatewayOptions", "create_app", "load_gateway_extensions"]
