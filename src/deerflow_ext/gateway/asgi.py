"""One ASGI helper the Gateway's own middlewares share."""

from __future__ import annotations

from starlette.types import Message, Send

__all__ = ["StartTracking", "tracking"]


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


def tracking(send: Send) -> StartTracking:
    """``send`` itself when it already tracks the start, else ``send`` wrapped.

    A layer inside another that tracks (the front layer's ``send`` reaches every layer
    within it) reads the same flag instead of adding a wrapper, and a call, to every message
    of the response: an SSE stream sends one per event batch.
    """
    return send if isinstance(send, StartTracking) else StartTracking(send)
