"""What the scripts that count instructions share (``run_instructions``, ``store_instructions``,
``server_instructions``): callgrind's command line, the total it wrote, and one checkout
counted against another.

Why callgrind: on a shared 2-core VM a timed arm spreads by tens of percent, while the
instructions a process executes do not move with the load. Each script starts its
arms with counting off (``--instr-atstart=no``) and switches it on for the measured runs only
(:func:`instrument`), so imports and warm-up are not counted.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

__all__ = [
    "ROOT",
    "against_baseline",
    "command",
    "counted_run",
    "instrument",
    "report",
    "require",
    "seeded_environment",
    "totals",
]

ROOT = Path(__file__).resolve().parent.parent


def require(script: str) -> None:
    """Stop ``script`` with one line when valgrind is missing."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit(f"{script}: valgrind is not installed (apt-get install valgrind)")


def command(out: Path) -> list[str]:
    """The prefix that runs a program under callgrind, counting off, its totals into ``out``."""
    return ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]


def instrument(pid: int, on: bool) -> None:
    """Switch counting on or off in the callgrind process ``pid`` (the caller's own, or a server's)."""
    switch = "on" if on else "off"
    subprocess.run(["callgrind_control", "-i", switch, str(pid)], check=True, capture_output=True)


def totals(out: Path) -> int | None:
    """The instructions callgrind counted, from its file; ``None`` when it wrote none."""
    found = re.search(r"^totals: (\d+)", out.read_text() if out.exists() else "", re.MULTILINE)
    return int(found.group(1)) if found else None


def counted_run(script: str, label: str, out: Path, argv: list[str], env: Mapping[str, str]) -> int:
    """The instructions ``argv`` counted under callgrind (into ``out``); a run that fails or
    counts nothing stops ``script`` with ``label`` and its last line of error output."""
    done = subprocess.run([*command(out), *argv], capture_output=True, text=True, env=dict(env))
    counted = totals(out)
    if done.returncode != 0 or counted is None:
        tail = (done.stderr or "").strip().splitlines()[-1:] or ["no output"]
        raise SystemExit(f"{script}: {label} failed under callgrind: {tail[0]}")
    return counted


def against_baseline(count: Callable[[Path, Path, str], float], baseline: str | None) -> dict[str, float]:
    """``count(tree, tmp, name)`` of this checkout and, with ``baseline``, of that one, one
    after the other, in one temporary folder; by arm name."""
    trees = {"this checkout": ROOT}
    if baseline:
        trees["baseline"] = Path(baseline).resolve()
    with tempfile.TemporaryDirectory() as name:
        return {arm: count(tree, Path(name), f"arm{i}") for i, (arm, tree) in enumerate(trees.items())}


def report(counts: Mapping[str, float], heading: str) -> None:
    """Print each arm's count a run, and this checkout's ratio to the baseline's."""
    print(f"python {sys.version.split()[0]}; {heading}; instructions per run")
    for arm, count in counts.items():
        print(f"{arm:<16}{count:>14,.0f}")
    if "baseline" in counts:
        print(f"this checkout / baseline: {counts['this checkout'] / counts['baseline']:.3f}x")


def seeded_environment(**extra: str) -> dict[str, str]:
    """This process's environment with one hash seed: string hashes decide dict and set
    layouts, and so a few instructions here and there; a fixed seed makes a count repeat."""
    return {**os.environ, "PYTHONHASHSEED": "0", **extra}
