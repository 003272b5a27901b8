"""What a command that runs no simulation costs to start: `tau2-a2a --help`, `tau2-a2a card URL` and `tau2-a2a
run --help`, side by side with `python -c pass` (Python's own start, the floor).

Each command runs --runs times as a new process, all in turn, so the
machine's other work weighs on each alike. Printed: the median wall time and
the median CPU time of the child (user + sys, from os.wait4), and each as a
ratio to `python -c pass`. The card is fetched from the bundled oracle agent,
started once in its own process on loopback. `run --help` lists tau2's own
flags from a description cached per tau2 version (cli/tau2_flags_cache.py):
measured with it cached, and the first time, when it is made from tau2's
parser (a new cache directory each run). Two imports show the card's floor:
httpx and a2a-sdk's types (what any fetch of a card into a2a-sdk's AgentCard
needs), and a2a-sdk's client (what the session's discovery uses: its card
resolver and, for the access check, the binding's transport). The targets
(docs/performance.md): at most 1.0 s of CPU, at most 10x the wall time of
`python -c pass`.

    python bench/cli_start.py --runs 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import cli, oracle_process

from tau2_a2a.protocol.hosting import free_port


def timed(command: list[str], cache: str | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child: user + sys) of one run of `command`, which must succeed; `cache`
    is its cache directory ($XDG_CACHE_HOME), or without it a new, empty one."""
    with tempfile.TemporaryDirectory(prefix="cli-start-cache-") as empty:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   env={**os.environ, "XDG_CACHE_HOME": cache or empty})
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
    with oracle_process(free_port()) as url, tempfile.TemporaryDirectory(prefix="cli-start-cache-") as cache:
        run_help = [*cli(), "run", "--help"]
        timed(run_help, cache)  # describes tau2's flags into `cache`, unmeasured
        commands = {"python -c pass": ([sys.executable, "-c", "pass"], cache),
                    "tau2-a2a --help": ([*cli(), "--help"], cache),
                    "tau2-a2a card URL": ([*cli(), "card", url], cache),
                    "import httpx, a2a.types": ([sys.executable, "-c", "import httpx, a2a.types"], cache),
                    "import a2a.client": ([sys.executable, "-c", "import a2a.client"], cache),
                    "run --help": (run_help, cache),
                    "run --help, first": (run_help, None)}
        walls: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, (command, cache_dir) in commands.items():
                wall, cpu = timed(command, cache_dir)
                walls[name].append(wall)
                cpus[name].append(cpu)
    floor_wall = statistics.median(walls["python -c pass"])
    floor_cpu = statistics.median(cpus["python -c pass"])
    print(f"{'command':<24} {'wall (median)':>14} {'x pass':>8} {'CPU (median)':>13} {'x pass':>8}   "
          f"({args.runs} runs each, in turn; load {os.getloadavg()[0]:.1f})")
    for name in commands:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        print(f"{name:<24} {wall:>12.3f} s {wall / floor_wall:>7.1f}x {cpu:>11.3f} s {cpu / floor_cpu:>7.1f}x")
    print("targets: tau2-a2a --help and card URL at most 1.0 s of CPU and at most 10x the wall of python -c pass;\n"
          "run --help, first: the first in a new cache directory, which describes tau2's flags from tau2's parser")


if __name__ == "__main__":
    main()
