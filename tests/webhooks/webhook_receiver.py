"""A webhook receiver on loopback for the webhook tests and the chaos case: it records every
request and answers as the test scripted each path (``fail(path, n)``: 500 to the first ``n``
requests; ``fail_every``: 500 to every n-th request, whatever its path). A request whose body
stops short of its ``Content-Length`` (its sender was killed mid-send) is not a delivery: it
is neither recorded nor answered, as a real receiver would not take it."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Delivery", "Receiver"]


@dataclass(frozen=True)
class Delivery:
    path: str
    headers: dict[str, str]
    body: bytes
    answered: int
    at: float  # time.monotonic() when it was answered

    @property
    def payload(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.body)
        return loaded

    @property
    def delivery_id(self) -> str:
        return self.headers["webhook-id"]


class Receiver:
    def __init__(self) -> None:
        self.requests: list[Delivery] = []
        self.failures: Counter[str] = Counter()
        self.fail_every = 0
        self._seen = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                if len(body) < length:  # the sender died mid-request (a chaos kill): nothing arrived
                    self.close_connection = True
                    return
                with receiver._lock:
                    receiver._seen += 1
                    if receiver.fail_every and receiver._seen % receiver.fail_every == 0:
                        code = 500
                    elif receiver.failures[self.path] > 0:
                        receiver.failures[self.path] -= 1
                        code = 500
                    else:
                        code = 200
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    receiver.requests.append(Delivery(self.path, headers, body, code, time.monotonic()))
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self._server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._server.serve_forever, name="webhook-receiver", daemon=True).start()

    def fail(self, path: str, times: int) -> None:
        with self._lock:
            self.failures[path] = times

    def at(self, path: str) -> list[Delivery]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def delivered(self, path: str) -> list[Delivery]:
        return [r for r in self.at(path) if r.answered == 200]

    def wait_for(self, path: str, count: int = 1, seconds: float = 30.0) -> list[Delivery]:
        deadline = time.monotonic() + seconds
        while len(self.delivered(path)) < count:
            assert time.monotonic() < deadline, f"{path}: {len(self.delivered(path))} of {count} deliveries"
            time.sleep(0.05)
        return self.delivered(path)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
