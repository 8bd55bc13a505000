"""The protocol endpoints cost a Gateway nothing until they are called."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

_SRC = str(Path(__file__).parents[2] / "src")


def test_building_a_gateway_imports_neither_protocol_sdk(tmp_path: Path) -> None:
    """~22 MiB (mcp) and ~10 MiB (a2a) per process: loaded by the first request to each."""
    script = (
        "import sys\n"
        "from deerflow_ext.config.schema import AppConfig\n"
        "from deerflow_ext.config.settings import Settings\n"
        "from deerflow_ext.gateway import create_app\n"
        f"app = create_app(Settings(config={str(tmp_path / 'config.yaml')!r}), config=AppConfig())\n"
        "paths = {getattr(r, 'path', '') for r in app.routes}\n"
        "assert {'/api/mcp', '/api/a2a/{assistant_id}', '/api/.well-known/agent-card.json'} <= paths, paths\n"
        "sdks = ('mcp', 'a2a', 'deerflow_ext.protocols.mcp', 'deerflow_ext.protocols.a2a')\n"
        "loaded = sorted(m for m in sdks if m in sys.modules)\n"
        "print(loaded)\n"
    )
    env = {**os.environ, "PYTHONPATH": _SRC}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
