"""In-process sandbox leases.

A lease is the exclusive right to a working area for one task. The only property the
extension contract depends on is *when* it is released: a subagent's ``on_task_stop`` runs
after its lease is returned, so an extension that inspects the sandbox at stop sees it free.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field

__all__ = ["SandboxLease", "SandboxPool", "sandbox_pool"]


@dataclass(frozen=True)
class SandboxLease:
    lease_id: str
    owner: str


@dataclass
class SandboxPool:
    """Hands out leases, at most one per owner; ``release`` is idempotent."""

    _leases: dict[str, SandboxLease] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def acquire(self, owner: str) -> SandboxLease:
        with self._lock:
            lease = self._leases.get(owner)
            if lease is None:
                lease = SandboxLease(lease_id=uuid.uuid4().hex, owner=owner)
                self._leases[owner] = lease
            return lease

    def release(self, lease: SandboxLease) -> bool:
        """Return the lease; False when it was already released."""
        with self._lock:
            current = self._leases.get(lease.owner)
            if current is None or current.lease_id != lease.lease_id:
                return False
            del self._leases[lease.owner]
            return True

    def is_held(self, lease: SandboxLease) -> bool:
        with self._lock:
            return self._leases.get(lease.owner) == lease

    @property
    def owners(self) -> tuple[str, ...]:
        """Who holds a lease right now (for diagnostics and tests)."""
        with self._lock:
            return tuple(self._leases)

    @property
    def active(self) -> int:
        with self._lock:
            return len(self._leases)


sandbox_pool = SandboxPool()
