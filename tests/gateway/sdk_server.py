"""A real Gateway on loopback for tests that drive it with ``langgraph_sdk``.

uvicorn runs in a thread with its own event loop, so the sync client (which blocks) and the
async client (on the test's loop) can both talk to it from the test. The Gateway is built
exactly as ``deerflow-ext serve`` builds it — real AgentHost on the embedded model, SQLite
— with the gate extension (``sdk_gate_ext``) loaded, which holds a run whose prompt says
``gate:<name>`` until :meth:`SdkServer.open_gate`.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from live_uvicorn import free_port

__all__ = ["CuttingProxy", "SdkServer", "sdk_server"]


@dataclass
class SdkServer:
    url: str  # the API root the SDKs take: http://127.0.0.1:<port>/api
    gate_dir: Path
    app: Any

    def open_gate(self, name: str) -> None:
        (self.gate_dir / name).touch()

    @staticmethod
    def gate() -> str:
        return f"g{uuid.uuid4().hex[:10]}"


@contextmanager
def sdk_server(
    directory: Path,
    *,
    database_url: str | None = None,
    plugins: list[dict[str, Any]] | None = None,
    sections: dict[str, Any] | None = None,
    **settings: Any,
) -> Iterator[SdkServer]:
    """Serve a Gateway on ``directory``'s SQLite (or ``database_url``), the gate extension
    loaded first and then ``plugins`` (config.yaml entries) in their order; ``sections``
    are config.yaml's other top-level sections (``checkpointer``, ``store``...)."""
    import uvicorn

    from deerflow_ext.config.loading import load_app_config
    from deerflow_ext.config.settings import Settings
    from deerflow_ext.extensions.contract.snapshot import get_loaded_extensions, set_loaded_extensions
    from deerflow_ext.gateway import create_app

    gate_dir = directory / "gates"
    gate_dir.mkdir(parents=True)
    config = directory / "config.yaml"
    entries = [{"name": "gate", "use": "gateway.sdk_gate_ext:install", "config": {"gate_dir": str(gate_dir)}}]
    entries += plugins or []
    # JSON is YAML; ``sections``: more top-level sections (``auth``, ``store``...)
    config.write_text(json.dumps({**(sections or {}), "plugins": entries}), encoding="utf-8")
    previous = get_loaded_extensions()
    app = create_app(
        Settings(
            config=config,
            database_url=database_url or f"sqlite+aiosqlite:///{directory / 'deerflow.db'}",
            **settings,
        ),
        config=load_app_config(config),
    )
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    thread = threading.Thread(target=server.run, name="sdk-gateway", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the Gateway did not start")
        time.sleep(0.02)
    try:
        yield SdkServer(f"http://127.0.0.1:{port}/api", gate_dir, app)
    finally:
        server.should_exit = True  # shutdown interrupts runs still held at a gate
        thread.join(60)
        set_loaded_extensions(previous)


class CuttingProxy:
    """A TCP proxy in front of the Gateway whose :meth:`cut` drops every open connection,
    as a load balancer restart or a flaky network would; new connections go through."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen()
        self.port = int(self._listener.getsockname()[1])
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.connections = 0
        threading.Thread(target=self._accept, name="cutting-proxy", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                downstream, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            with self._lock:
                self._open |= {downstream, upstream}
                self.connections += 1
            for source, sink in ((downstream, upstream), (upstream, downstream)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        with self._lock:
            doomed, self._open = self._open, set()
        for sock in doomed:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        self._listener.close()
        self.cut()
