"""What a command that runs no simulation costs to start: `tau2-a2a --help` and `tau2-a2a card URL`, side by side
with `python -c pass` (Python's own start, the floor).

Each command runs --runs times as a new process, the three in turn, so the
machine's other work weighs on each alike. Printed: the median wall time and
the median CPU time of the child (user + sys, from os.wait4), and each as a
ratio to `python -c pass`. The card is fetched from the bundled oracle agent,
started once in its own process on loopback. The targets (docs/performance.md):
at most 1.0 s of CPU, at most 10x the wall time of `python -c pass`.

    python bench/cli_start.py --runs 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import cli, oracle_process

from tau2_a2a.protocol.hosting import free_port


def timed(command: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child: user + sys) of one run of `command`, which must succeed."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    assert process.stderr is not None
    error = process.stderr.read().decode(errors="replace")
    process.stderr.close()
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {process.returncode}: {error[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs of each command (default: %(default)s)")
    args = parser.parse_args()
    with oracle_process(free_port()) as url:
        commands = {"python -c pass": [sys.executable, "-c", "pass"],
                    "tau2-a2a --help": [*cli(), "--help"],
                    "tau2-a2a card URL": [*cli(), "card", url]}
        walls: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, command in commands.items():
                wall, cpu = timed(command)
                walls[name].append(wall)
                cpus[name].append(cpu)
    floor_wall = statistics.median(walls["python -c pass"])
    floor_cpu = statistics.median(cpus["python -c pass"])
    print(f"{'command':<20} {'wall (median)':>14} {'x pass':>8} {'CPU (median)':>13} {'x pass':>8}   "
          f"({args.runs} runs each, in turn; load {os.getloadavg()[0]:.1f})")
    for name in commands:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        print(f"{name:<20} {wall:>12.3f} s {wall / floor_wall:>7.1f}x {cpu:>11.3f} s {cpu / floor_cpu:>7.1f}x")
    print("targets: tau2-a2a --help and card URL at most 1.0 s of CPU and at most 10x the wall of python -c pass")


if __name__ == "__main__":
    main()
