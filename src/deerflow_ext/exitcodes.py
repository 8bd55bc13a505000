"""The exit codes of ``deerflow-ext``: one home, shared by every command.

``serve``, ``run`` and ``extensions doctor`` answer the same question first — would the
Gateway start here? — so they exit with the same code for the same cause, whatever command
found it. Scripts and supervisors can rely on the table below (it is also in the README):

=====  ==========================================================================
code   meaning
=====  ==========================================================================
0      success (``doctor``: the Gateway would start)
1      startup refused: ``config.yaml``, ``--config``, a model entry, a
       ``DEERFLOW_*`` variable, the database, the port, a required extension or a
       table prefix. One ``error: ...`` line on stderr names the cause. The other
       commands use 1 for "failed" too (``EXIT_FAILED``: a property check, an
       install that was rolled back, an unknown entry name).
2      command-line usage (argparse's own convention; ``run --thread`` naming
       no stored thread too)
3      ``run`` only: the host started, but the run itself failed (one line names
       the provider's reason; the host's own title, memory, summary and goal
       calls never fail a run)
130    interrupted (Ctrl-C)
=====  ==========================================================================

A module of its own so that ``cli`` and ``client`` need not import each other for them.
"""

from __future__ import annotations

from typing import Final

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_RUN_FAILED", "EXIT_STARTUP", "EXIT_USAGE"]

EXIT_OK: Final = 0
EXIT_STARTUP: Final = 1
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_RUN_FAILED: Final = 3
EXIT_INTERRUPTED: Final = 130
