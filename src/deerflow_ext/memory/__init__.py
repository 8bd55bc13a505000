"""Memory: the host's ``MemoryManager`` and DeerMem, the vendorable engine under it.

``memory.engine`` imports nothing from the extension contract or runtime, so it can be
copied out of this project; ``memory.manager`` is where the host connects it to models and
to system-model-call observers.
"""

from __future__ import annotations

from .engine import MemoryCallbacks, MemoryEngine
from .manager import MemoryManager, MemoryObservationBridge

__all__ = ["MemoryCallbacks", "MemoryEngine", "MemoryManager", "MemoryObservationBridge"]
