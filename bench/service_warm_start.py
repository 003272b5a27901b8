"""One evaluation through the service, request to answer, side by side with `tau2-a2a run` on the same task.

One airline task, the scripted user, the oracle (on loopback, in this process). Three arms, their rounds interleaved so
the machine's other work falls on all alike:
- `tau2-a2a run`: the command, from its start to its exit (it imports tau2 first);
- the service, warm (`tau2-a2a serve`, the default): a blocking `run_tau2_evaluation`, from the request to
  the answer; the evaluation's process is forked from the service's fork server;
- the service, cold (`--evaluation-start cold`): the same, the evaluation's process a new one.
Each service runs before it is measured (long-lived, as deployed): one evaluation each, not measured, and,
warm, its fork server done importing. CPU: the command's own (os.wait4); a service's, the CPU its process
tree spent during the request (the service, the fork server, and the evaluation's process, reaped by one of
them), from /proc. Target: the warm service at most 0.6x the wall time of `tau2-a2a run`.

    python bench/service_warm_start.py --rounds 5

With --trickle, instead: how long an agent that trickles its card (a byte a second) holds a slot of a service
whose evaluations run 10 nice steps below it (the default) on a machine busy with CPU-bound work at normal
priority (--busy processes, started here): from the request to the failed answer, at --agent-timeout 4,
warm vs cold. The slot is held until the evaluation's process has started, fetched the card for 4 s, and
written its outcome; a starved process pays for its start in minutes.

    python bench/service_warm_start.py --trickle --rounds 3 --busy 4
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import BIN, cli  # noqa: E402
from bench.service_common import call  # noqa: E402
from tau2_a2a.protocol.hosting import BackgroundServer, a2a_app, free_port, wait_for_card  # noqa: E402
from tau2_a2a.reference.oracle_agent import OracleExecutor, oracle_card  # noqa: E402

START_SECONDS = 900.0  # a `tau2-a2a serve` start on a machine busy with other work


@contextmanager
def service_process(port: int, results_dir: Path, *extra: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`tau2-a2a serve` in its own process, as deployed (its log in `results_dir`.log); its URL and process."""
    url = f"http://127.0.0.1:{port}"
    results_dir.mkdir(parents=True)
    with open(f"{results_dir}.log", "wb") as log:
        process = subprocess.Popen(
            [str(BIN / "tau2-a2a"), "serve", "--port", str(port), "--results-dir", str(results_dir),
             "--allowed-targets", "public,loopback", *extra], stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_card(url, process, timeout=START_SECONDS)
        yield url, process
    finally:
        process.terminate()
        process.wait(timeout=60)


@contextmanager
def oracle() -> Iterator[str]:
    """The reference oracle on loopback, in this process (its CPU is not measured)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with BackgroundServer(a2a_app(OracleExecutor(), oracle_card(url)), port=port):
        yield url

TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu(root: int) -> float:
    """CPU seconds of `root` and its live descendants, with the children each has reaped (/proc)."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(stat.parent.name)
        parents[pid] = int(fields[1])
        times[pid] = sum(int(value) for value in fields[11:15]) / TICKS  # utime, stime, cutime, cstime
    tree, frontier = {root}, {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - tree
        tree |= frontier
    return sum(times.get(pid, 0.0) for pid in tree)


def run_command(endpoint: str, results: Path) -> tuple[float, float]:
    """`tau2-a2a run` on the task: (wall seconds, CPU seconds of it and the processes it waited for)."""
    command = [*cli(), "run", "airline", "--agent", "a2a_agent", "--a2a-endpoint", endpoint, "--user",
               "scripted_user", "--task-ids", "0", "--results-dir", str(results), "--save-to", "run"]
    began = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - began
    process.returncode = os.waitstatus_to_exitcode(status)
    assert process.returncode == 0, f"tau2-a2a run exited {process.returncode}"
    return wall, usage.ru_utime + usage.ru_stime


class Service:
    """A running `tau2-a2a serve` and a client of it."""

    def __init__(self, url: str, pid: int) -> None:
        self.url, self.pid = url, pid
        self.loop = asyncio.new_event_loop()
        from tau2_a2a.service.caller import connect

        self.client, self.http = self.loop.run_until_complete(connect(url))

    def evaluate(self, endpoint: str) -> tuple[float, float]:
        """One evaluation of the task, request to answer: (wall seconds, CPU seconds of the service's tree)."""
        from tau2_a2a.service.caller import result_data

        arguments = {"domain": "airline", "agent_endpoint": endpoint, "user": "scripted_user", "task_ids": ["0"]}
        cpu = tree_cpu(self.pid)
        began = time.monotonic()
        reply = self.loop.run_until_complete(call(self.client, "run_tau2_evaluation", arguments))
        wall = time.monotonic() - began
        time.sleep(0.3)  # the evaluation's process reaped, its CPU in its parent's
        data = result_data(reply)
        assert data["status"] == "completed" and data["result"]["metrics"]["avg_reward"] == 1.0, data
        return wall, tree_cpu(self.pid) - cpu

    def close(self) -> None:
        self.loop.run_until_complete(self.http.aclose())
        self.loop.close()


def trickled(rounds: int, busy: int) -> None:
    """The slot a trickling agent holds, warm vs cold (see the module's docstring)."""
    from testbed.hostile_agent import HostileAgent, Hostility

    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    held: dict[str, list[float]] = {"warm": [], "cold": []}
    try:
        with tempfile.TemporaryDirectory() as scratch, HostileAgent(Hostility(trickle="card")) as agent:
            root, options = Path(scratch), ("--agent-timeout", "4", "--evaluation-nice", "10")
            cold_options = ("--evaluation-start", "cold", *options)
            with service_process(free_port(), root / "warm", *options) as (warm_url, warm_process), \
                    service_process(free_port(), root / "cold", *cold_options) as (cold_url, _):
                services = {"warm": Service(warm_url, warm_process.pid), "cold": Service(cold_url, 0)}
                arguments = {"domain": "airline", "agent_endpoint": agent.url, "user": "scripted_user",
                             "task_ids": ["0"]}
                load = os.getloadavg()[0]
                for round_ in range(rounds + 1):  # the first not measured: it launches the warm one's fork server
                    for name, service in services.items():
                        began = time.monotonic()
                        reply = service.loop.run_until_complete(call(service.client, "run_tau2_evaluation", arguments))
                        if round_:
                            held[name].append(time.monotonic() - began)
                        said = " ".join(part.text for part in reply.status.message.parts)  # a failed task's why
                        assert "timed out after 4s" in said, said
                for service in services.values():
                    service.close()
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    print(f"a slot held by an agent trickling its card: --agent-timeout 4, evaluations 10 nice steps below the "
          f"service, {busy} CPU-bound processes at normal priority besides; load average {load:.1f} at the start")
    for name, seconds in held.items():
        print(f"  {name}: median {statistics.median(seconds):.1f} s, each " + ", ".join(f"{s:.1f}" for s in seconds))
    print(f"  cold / warm: {statistics.median(held['cold']) / statistics.median(held['warm']):.1f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--evaluation-nice", type=int, default=0,
                        help="the services' --evaluation-nice (default 0: the run's priority, for a fair side by side)")
    parser.add_argument("--trickle", action="store_true", help="measure a trickling agent's slot instead")
    parser.add_argument("--busy", type=int, default=4, help="with --trickle: CPU-bound processes started beside")
    args = parser.parse_args()
    if args.trickle:
        trickled(args.rounds, args.busy)
        return 0
    figures: dict[str, list[tuple[float, float]]] = {"tau2-a2a run": [], "service, warm": [], "service, cold": []}
    with tempfile.TemporaryDirectory() as scratch, oracle() as endpoint:
        root = Path(scratch)
        nice = ("--evaluation-nice", str(args.evaluation_nice))
        with service_process(free_port(), root / "warm", *nice) as (warm_url, warm_process), \
                service_process(free_port(), root / "cold", "--evaluation-start", "cold", *nice) as (cold_url, cold):
            services = {"service, warm": Service(warm_url, warm_process.pid),
                        "service, cold": Service(cold_url, cold.pid)}
            for service in services.values():
                service.evaluate(endpoint)  # not measured: the service is long-lived (and launches its fork server)
            load = os.getloadavg()[0]
            for round_ in range(args.rounds):
                figures["tau2-a2a run"].append(run_command(endpoint, root / "cli" / str(round_)))
                for name, service in services.items():
                    figures[name].append(service.evaluate(endpoint))
            for service in services.values():
                service.close()
    run_wall = statistics.median(wall for wall, _ in figures["tau2-a2a run"])
    run_cpu = statistics.median(cpu for _, cpu in figures["tau2-a2a run"])
    print(f"one airline task, scripted user, oracle; {args.rounds} rounds interleaved, medians; "
          f"load average {load:.1f} at the start; evaluations {args.evaluation_nice} nice steps below the service")
    print(f"{'arm':<16}{'wall s':>9}{'CPU s':>9}{'wall / run':>12}{'CPU / run':>11}")
    for name, rounds in figures.items():
        wall = statistics.median(w for w, _ in rounds)
        cpu = statistics.median(c for _, c in rounds)
        print(f"{name:<16}{wall:>9.2f}{cpu:>9.2f}{wall / run_wall:>12.2f}{cpu / run_cpu:>11.2f}")
    warm = statistics.median(w for w, _ in figures["service, warm"]) / run_wall
    print(f"target: the warm service at most 0.60x the wall time of tau2-a2a run: {warm:.2f}x, "
          f"{'met' if warm <= 0.6 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
