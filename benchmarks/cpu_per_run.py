"""Where a run's CPU goes: the serve process's event loop, its other threads, and PostgreSQL.

Run: ``PYTHONPATH=src python benchmarks/cpu_per_run.py [--pg URL] [--baseline DIR]``. Not a
test: it prints per-run figures of arms measured alternately in one run.

Throughput on a shared 2-core machine spreads by tens of percent between rounds of the same
arm. CPU seconds per run spread far less, and they say *which* part of the
process pays: the event loop (the serve process's main thread), the threads the host hands
blocking work to (the checkpointer's, the store's), and PostgreSQL's backends, which share
the cores with the Gateway. Each arm is ``deerflow-ext serve`` as ``peer_langgraph.py``
starts it (title and memory off, the embedded model); per round it serves ``--runs`` runs
(``threads.create`` + ``runs.wait``) at ``--clients`` concurrent clients while its
``/proc/<pid>/task/*/stat`` CPU, and that of every ``postgres`` process, is read before and
after. ``--pg`` adds each arm on PostgreSQL (``<arm>@pg``), ``--baseline`` every arm again
from another checkout (``base:<arm>``). Linux only (``/proc``).

The last columns say what bounds an arm: ``loop busy`` is the share of one core the event
loop used (its ms per run times the runs per second), ``cores`` that of the whole process.
A loop near 1.0 is loop-bound. A process near 1.0 with its loop well below it is bound by
its one GIL: its threads take their share of it from the loop, however idle the other core
(PostgreSQL at 32 clients); there a thread that does not wake is what helps.
``loop waits`` is the share of the wall time the loop was ready to run but another process
had the cores (``/proc/<pid>/schedstat``): what the load generator and PostgreSQL's backends
take from it when they share its cores. ``--pin CPUS`` puts the servers on those CPUs and
the clients on the others (``peer_langgraph.py``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from peer_langgraph import (  # the sibling script
    BASE,
    PIN_HELP,
    ROOT,
    Server,
    _load,
    measure,
    parse_cpus,
    pin_clients,
    placement,
    run_arms,
    start_ours,
)

_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_of(stat: str) -> float:
    """User + system seconds from a ``/proc/.../stat`` line (fields after the command name)."""
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def process_cpu(pid: int) -> tuple[float, float]:
    """(main thread, every other thread) CPU seconds of ``pid``; the main thread runs the loop."""
    loop = others = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            seconds = _cpu_of((task / "stat").read_text())
        except OSError:  # the thread ended meanwhile
            continue
        if task.name == str(pid):
            loop += seconds
        else:
            others += seconds
    return loop, others


def loop_waited(pid: int) -> float:
    """Seconds the main thread (the loop) of ``pid`` spent ready to run but not running."""
    return int(Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[1]) / 1e9


def postgres_cpu() -> float:
    """CPU seconds of every process named ``postgres`` on this machine (the server's backends)."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if stat[stat.index("(") + 1 : stat.rindex(")")] == "postgres":
            total += _cpu_of(stat)
    return total


@dataclass
class Arm:
    server: Server
    # Per round: runs/s; ms per run on the loop, the other threads and PostgreSQL; and the
    # share of the round the loop waited for a core.
    rounds: list[tuple[float, float, float, float, float]] = field(default_factory=list)

    def median(self, column: int) -> float:
        return statistics.median(r[column] for r in self.rounds)


async def one_round(arm: Arm, runs: int, clients: int) -> None:
    pid = arm.server.proc.pid
    (loop0, others0), pg0, waited0 = process_cpu(pid), postgres_cpu(), loop_waited(pid)
    rate, _latencies = await measure(arm.server, runs, clients)
    (loop1, others1), pg1, waited1 = process_cpu(pid), postgres_cpu(), loop_waited(pid)
    per_run = 1e3 / runs
    waits = (waited1 - waited0) * rate / runs  # over the round's wall time, runs / rate
    arm.rounds.append((rate, (loop1 - loop0) * per_run, (others1 - others0) * per_run, (pg1 - pg0) * per_run, waits))


async def run(args: argparse.Namespace, arms: list[Arm]) -> None:
    for arm in arms:  # warm each server (imports, pools, prepared statements) before any round
        await measure(arm.server, 2 * args.clients, args.clients)
    for n in range(args.rounds):
        for arm in arms if n % 2 == 0 else reversed(arms):
            await one_round(arm, args.runs, args.clients)
    by_name = {arm.server.name: arm for arm in arms}
    print(
        f"{'arm':<20}{'runs/s':>8}{'loop':>8}{'threads':>9}{'process':>9}{'postgres':>10}{'loop busy':>11}{'cores':>7}"
        f"{'loop waits':>12}   (ms per run; shares of a core; of the wall time; medians)"
    )
    for arm in arms:
        process = statistics.median(r[1] + r[2] for r in arm.rounds)
        busy = statistics.median(r[0] * r[1] / 1e3 for r in arm.rounds)
        cores = statistics.median(r[0] * (r[1] + r[2]) / 1e3 for r in arm.rounds)
        line = (
            f"{arm.server.name:<20}{arm.median(0):>8.1f}{arm.median(1):>8.2f}{arm.median(2):>9.2f}"
            f"{process:>9.2f}{arm.median(3):>10.2f}{busy:>11.2f}{cores:>7.2f}{arm.median(4):>12.2f}"
        )
        base = by_name.get(BASE + arm.server.name)
        if base is not None:
            base_process = statistics.median(r[1] + r[2] for r in base.rounds)
            line += f"   /base: runs/s {arm.median(0) / base.median(0):.2f}x, process CPU {process / base_process:.2f}x"
        print(line)
        print("    per round (runs/s, process ms): " + ", ".join(f"{r[0]:.1f}/{r[1] + r[2]:.2f}" for r in arm.rounds))
    print(f"load {_load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--runs", type=int, default=500, help="runs per arm per round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    parser.add_argument("--pg", help="also run on this PostgreSQL URL (<arm>@pg)")
    parser.add_argument("--no-sqlite", action="store_true", help="with --pg: PostgreSQL arms only")
    parser.add_argument("--baseline", help="another checkout (`git archive` of the commit before): base:<arm>")
    parser.add_argument("--python", default=sys.executable, help="the python that runs deerflow-ext serve")
    parser.add_argument("--pin", type=parse_cpus, help=PIN_HELP)
    args = parser.parse_args()
    if args.no_sqlite and not args.pg:
        raise SystemExit("cpu_per_run: --no-sqlite needs --pg")
    print(f"python {sys.version.split()[0]}; nproc {os.cpu_count()}; load {_load()}; "
          f"{args.runs} runs x {args.rounds} rounds per arm at {args.clients} clients; "
          f"servers on CPUs {placement(args.pin)}")  # fmt: skip
    if args.pin:
        pin_clients(args.pin)
    places = [] if args.no_sqlite else [("", None)]
    if args.pg:
        places.append(("@pg", args.pg))
    trees = [("", ROOT)] + ([(BASE, Path(args.baseline).resolve())] if args.baseline else [])
    arms: list[Arm] = []
    with tempfile.TemporaryDirectory(prefix="dfx-cpu-") as name:
        try:
            for prefix, tree in trees:
                for suffix, url in places:
                    server = start_ours(
                        Path(name), f"{prefix}ours{suffix}", defaults=False, io=False, database_url=url,
                        workers=1, python=args.python, tree=tree, cpus=args.pin,
                    )  # fmt: skip
                    arms.append(Arm(server))
            run_arms("cpu_per_run", run(args, arms))
        finally:
            for arm in arms:
                arm.server.stop()


if __name__ == "__main__":
    main()
