"""One ASGI helper the Gateway's own middlewares share."""

from __future__ import annotations

from starlette.types import Message, Send

__all__ = ["StartTracking"]


class StartTracking:
    """A ``send`` that remembers whether the response has started.

    A middleware that answers an error itself (a JSON 500, a 413) may do so only before
    the route started its response; after that the only thing left is to let the error
    propagate and the server end the response.
    """

    def __init__(self, send: Send) -> None:
        self.send = send
        self.started = False

    async def __call__(self, message: Message) -> None:
        self.started = self.started or message["type"] == "http.response.start"
        await self.send(message)
