"""Shared test setup: make helper modules under ``tests/`` importable by dotted path.

Extensions are configured by ``use: "module:attr"``, so test helper extensions must be
importable like installed code: ``extensions.fixtures_plugins:good`` resolves from here.
"""

from __future__ import annotations

import sys
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent

if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))
