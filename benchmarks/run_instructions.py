"""What extensions cost a lead run, counted in instructions: ``run_overhead.py``'s arms under
callgrind.

Run: ``PYTHONPATH=src python benchmarks/run_instructions.py [--runs N]``. Needs valgrind
(Debian's ``valgrind``); not a test. Prints the instructions per run of each arm and the
ratios to the bare arm.

Why a second script: on a shared 2-core VM, the wall time of one arm's repeats has spread by
40-130% of its median in a quiet minute (2026-12-03), so a 10% target cannot be read off
``run_overhead.py`` there. Callgrind counts the instructions the process executes, which
do not depend on what else the machine runs: with the hash seed fixed and a full collection
made before the measured runs (see below), the same arm counts the same to within 0.002% run
after run. Instructions are not time (a cache miss costs more than an add), so this
complements the timed script rather than replacing it; the two agreed within a few percent
where the machine was quiet enough to time.

Each arm is its own process: the same warm-up as ``run_overhead.py``, then instrumentation
is switched on (``callgrind_control -i on``) for exactly the measured runs, so imports and
first-call paths are not counted, nor a full collection of the heap, which comes every few
hundred runs whatever the arm (the timed script does count it). The arms and their
extensions are ``run_overhead.py``'s.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import tempfile
from pathlib import Path

from callgrind import counted_run, instrument, require, seeded_environment
from run_overhead import _every_kind, _routers_services, build

from deerflow_ext.client import DeerFlowClient
from deerflow_ext.config.schema import AppConfig
from deerflow_ext.extensions.contract.snapshot import LoadedExtensions

ARMS = {
    "none": lambda: LoadedExtensions.empty(),
    "every-kind x10": lambda: build(_every_kind),
    "routers+services x10": lambda: build(_routers_services),
}
WARMUP = 10


async def _child(arm: str, runs: int) -> None:
    client = DeerFlowClient(AppConfig.model_validate({"memory": {"enabled": False}}), extensions=ARMS[arm]())
    for i in range(WARMUP):
        await client.arun(f"warm up {i}")
    # A full collection now, so none falls among the measured runs: one costs tens of millions
    # of instructions (the whole heap), comes every few hundred runs, when the long-lived
    # objects have grown by a quarter, and landing in one arm's 40 runs or not moved it by 1M
    # a run (2026-12-03). The collections of each run's own garbage are still counted.
    gc.collect()
    instrument(os.getpid(), True)
    for i in range(runs):
        await client.arun(f"tell me about item {i}")  # a fresh thread per run, as in run_overhead
    instrument(os.getpid(), False)
    await client.aclose()


def _count(arm: str, runs: int, out: Path) -> int:
    child = [sys.executable, __file__, "--child", arm, "--runs", str(runs)]
    return counted_run("run_instructions", f"arm {arm!r}", out, child, seeded_environment())


def main(runs: int) -> None:
    require("run_instructions")
    with tempfile.TemporaryDirectory() as tmp:
        counts = {arm: _count(arm, runs, Path(tmp) / f"arm{i}.out") / runs for i, arm in enumerate(ARMS)}
    print(f"python {sys.version.split()[0]}; {runs} runs per arm under callgrind; instructions per lead run")
    print(f"{'arm':<24}{'per run':>14}{'ratio':>9}{'extra':>14}")
    for arm, count in counts.items():
        print(f"{arm:<24}{count:>14,.0f}{count / counts['none']:>9.3f}{count - counts['none']:>14,.0f}")
    print("targets: every-kind x10 <= 1.10x; routers+services x10 1.00x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="measured runs per arm")
    parser.add_argument("--child", choices=list(ARMS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        asyncio.run(_child(args.child, args.runs))
    else:
        main(args.runs)
