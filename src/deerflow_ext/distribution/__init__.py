"""Where this host came from, and wheels of it that install without the checkout.

An extension author's package is tested against a host (``extensions new`` writes a noxfile
that installs one), so the host must be installable on a machine that has only that
package: from the source the running host was installed from (:mod:`.source`, read from
pip's own record, PEP 610), or from wheels built once and kept (:mod:`.wheels`), whose
metadata names the contract by version, never by a ``file://`` path into a checkout that
may move.
"""

from __future__ import annotations

from .source import HostSource, host_source
from .wheels import WheelsError, build_wheels

__all__ = ["HostSource", "WheelsError", "build_wheels", "host_source"]
