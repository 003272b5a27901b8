"""The high-concurrency run with tau2's LLM user: what a `tau2-a2a run` process costs, start-up apart.

One `tau2-a2a run` per arm, in its own process as a user starts it: airline
at --concurrency against the reference oracle waiting --delay seconds per
reply (its own process), the user played by tau2's LLM user simulator through
LiteLLM to the stand-in LLM on loopback (testbed/standin_llm.py, its own
process). The arms run the whole set and a few tasks, side by side, so the CPU
of start-up (until the first simulation began: imports, loading tau2,
starting the pool) comes out apart from the CPU per simulation. For each: the
wall time against the delay-bound ideal (each simulation waits its replies x
--delay, handed out to --concurrency workers in order, no local work), the
run process's CPU (user + system, its children included) and its peak RSS;
and where the wall time beyond the ideal went: start-up, the time after the
last simulation ended, the agent's first reply of a simulation against its
others (the first carries the policy and the tool schemas), the LLM user
simulator's time, and the CPU the oracle and the stand-in took meanwhile, on
the same cores.

    python bench/high_concurrency.py                         # 100 simulations (50 tasks x 2 trials) at c64, 1 s
    python bench/high_concurrency.py --trials 1 --small 5
    python bench/high_concurrency.py --baseline ../main-before   # the same run by an earlier checkout first
    python bench/high_concurrency.py --profile profile.txt   # the large arm under py-spy (--gil: CPU)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import cli, oracle_process, standin_process  # noqa: E402
from scale_slow_agent import list_schedule  # noqa: E402

from tau2_a2a.protocol.hosting import free_port  # noqa: E402
from tau2_a2a.tau2bench.run.layout import metrics_path, results_path  # noqa: E402

USER_LLM = "openai/standin"


@dataclass(frozen=True)
class Arm:
    """One measured `tau2-a2a run`."""

    label: str
    simulations: int
    rewards_1: int
    wall_s: float
    startup_s: float
    cpu_s: float
    peak_rss_mb: float
    ideal_s: float
    requests: int
    tail_s: float  # from the last simulation's end to the process's exit
    first_reply_s: float  # the agent's first reply of a simulation (the policy and tool schemas), p50
    later_reply_s: float  # its other replies, p50
    user_s: float  # the LLM user simulator's time per simulation, mean
    servers_cpu_s: float  # the oracle's and the stand-in's CPU while the run ran


def run_arm(label: str, url: str, api_base: str, num_tasks: int | None, trials: int, concurrency: int,
            delay: float, results_dir: Path, profile: Path | None = None, source: Path | None = None) -> Arm:
    """`tau2-a2a run` in a child process; its CPU and peak RSS from the kernel's accounting of that child.
    With `source`, the run imports tau2_a2a from that checkout's src/ instead (an earlier version)."""
    save_to = f"{label}-{time.monotonic_ns()}"
    command = [*cli(), "run", "airline", "--agent", "a2a_agent", "--a2a-endpoint", url,
               "--user", "user_simulator", "--user-llm", USER_LLM, "--user-llm-args", '{"temperature": 0.0}',
               "--num-trials", str(trials), "--max-concurrency", str(concurrency),
               "--results-dir", str(results_dir), "--save-to", save_to, "--log-level", "WARNING"]
    if num_tasks is not None:
        command += ["--num-tasks", str(num_tasks)]
    if profile is not None:
        command = [str(Path(sys.executable).parent / "py-spy"), "record", "--format", "raw", "--rate", "50", "--gil",
                   "--subprocesses", "-o", str(profile), "--", *command]
    env = {**os.environ, "OPENAI_API_BASE": api_base, "OPENAI_API_KEY": "standin-user-key"}
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(source / "src"), env.get("PYTHONPATH", "")])
    servers_cpu = children_cpu()
    started_at = datetime.now()
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as stderr:
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        _, status, usage = os.wait4(process.pid, 0)  # this child's own accounting, its reaped children included
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            stderr.seek(0)
            raise RuntimeError(f"{label}: tau2-a2a run exited with {process.returncode}: {stderr.read()[-2000:]}")
    cpu_s, peak_rss_mb = usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024  # ru_maxrss: KiB on Linux
    servers_cpu = children_cpu() - servers_cpu
    ended_at = started_at.timestamp() + wall
    path = results_path(save_to, results_dir)
    results = json.loads(path.read_text())
    simulations = sorted(results["simulations"], key=lambda s: s["start_time"])  # in the order handed out
    first = datetime.fromisoformat(simulations[0]["start_time"])
    last_end = max(datetime.fromisoformat(s["end_time"]).timestamp() for s in simulations)
    # the agent's replies: every assistant message but tau2's own greeting, which opens each conversation
    requests = [sum(1 for m in s["messages"][1:] if m["role"] == "assistant") for s in simulations]
    metrics = json.loads(metrics_path(path).read_text())["simulations"]
    latencies = [(r["turn"], r["latency_ms"] / 1000) for s in metrics for r in s["requests"]]
    return Arm(label=label, simulations=len(simulations),
               rewards_1=sum(1 for s in simulations if (s.get("reward_info") or {}).get("reward") == 1.0),
               wall_s=wall, startup_s=first.timestamp() - started_at.timestamp(),
               cpu_s=cpu_s, peak_rss_mb=peak_rss_mb,
               ideal_s=list_schedule([n * delay for n in requests], concurrency), requests=sum(requests),
               tail_s=ended_at - last_end,
               first_reply_s=statistics.median(t for turn, t in latencies if turn == 0),
               later_reply_s=statistics.median([t for turn, t in latencies if turn > 0] or [math.nan]),
               user_s=statistics.mean(s["time_s"]["user"] for s in metrics), servers_cpu_s=servers_cpu)


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's live children so far: the oracle and the stand-in LLM
    between runs (Linux's /proc; nan elsewhere)."""
    try:
        pids = {pid for children in Path("/proc/self/task").glob("*/children") for pid in children.read_text().split()}
        ticks = 0
        for pid in pids:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])  # utime, stime: the stat file's 14th and 15th fields
    except OSError:
        return math.nan
    return ticks / os.sysconf("SC_CLK_TCK")


def report(arms: list[Arm], concurrency: int, delay: float) -> str:
    lines = [f"airline, LLM user through LiteLLM to the stand-in, oracle waiting {delay} s per reply, "
             f"concurrency {concurrency}; {os.cpu_count()} cores, 1-min load {os.getloadavg()[0]:.1f}",
             f"{'':44}" + "".join(f"{a.label:>14}" for a in arms)]

    def row(name: str, value: object) -> None:
        lines.append(f"{name:44}" + "".join(f"{v:>14}" for v in value))  # type: ignore[attr-defined]

    row("simulations", [a.simulations for a in arms])
    row("simulations with reward 1.0", [a.rewards_1 for a in arms])
    row("wall time (s)", [f"{a.wall_s:.1f}" for a in arms])
    row("delay-bound ideal (s)", [f"{a.ideal_s:.1f}" for a in arms])
    row("share of the ideal, start-up included", [f"{a.ideal_s / a.wall_s:.0%}" for a in arms])
    row("start-up: until the first simulation (s)", [f"{a.startup_s:.1f}" for a in arms])
    row("share of the ideal, start-up apart", [f"{a.ideal_s / (a.wall_s - a.startup_s):.0%}" for a in arms])
    row("after the last simulation (s)", [f"{a.tail_s:.1f}" for a in arms])
    row("agent's first reply of a simulation, p50 (s)", [f"{a.first_reply_s:.2f}" for a in arms])
    row("agent's other replies, p50 (s)", [f"{a.later_reply_s:.2f}" for a in arms])
    row("LLM user simulator per simulation, mean (s)", [f"{a.user_s:.2f}" for a in arms])
    row("CPU of the run's process (s)", [f"{a.cpu_s:.1f}" for a in arms])
    row("CPU of the oracle and the stand-in meanwhile (s)", [f"{a.servers_cpu_s:.1f}" for a in arms])
    row("peak RSS of the run's process (MiB)", [f"{a.peak_rss_mb:.0f}" for a in arms])
    if len(arms) >= 2 and arms[-2].simulations != arms[-1].simulations:
        big, small = arms[-2:]
        per_sim = (big.cpu_s - small.cpu_s) / (big.simulations - small.simulations)
        startup = small.cpu_s - per_sim * small.simulations
        lines.append(f"CPU per simulation (difference of the two): {per_sim:.3f} s; start-up CPU (the rest): "
                     f"{startup:.1f} s")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--delay", type=float, default=1.0, help="The oracle's wait per reply in seconds")
    parser.add_argument("--trials", type=int, default=2, help="Trials of every airline task (50 tasks)")
    parser.add_argument("--small", type=int, default=5, help="Tasks of the small arm (one trial); 0: no small arm")
    parser.add_argument("--baseline", type=Path, default=None, metavar="CHECKOUT",
                        help="Run the whole set first with tau2_a2a from this checkout's src/ (e.g. a worktree of "
                        "an earlier commit), side by side")
    parser.add_argument("--profile", type=Path, default=None,
                        help="Record the large arm with py-spy into this file (collapsed stacks)")
    args = parser.parse_args()
    arms = []
    with (tempfile.TemporaryDirectory() as scratch, standin_process(free_port()) as api_base,
          oracle_process(free_port(), delay=args.delay) as url):
        results_dir = Path(scratch)
        if args.baseline is not None:
            arms.append(run_arm("baseline", url, api_base, None, args.trials, args.concurrency, args.delay,
                                results_dir, source=args.baseline.resolve()))
        arms.append(run_arm(f"{50 * args.trials} sims", url, api_base, None, args.trials, args.concurrency,
                            args.delay, results_dir, args.profile))
        if args.small:
            arms.append(run_arm(f"{args.small} sims", url, api_base, args.small, 1, args.concurrency, args.delay,
                                results_dir))
    print(report(arms, args.concurrency, args.delay))
    return 0


if __name__ == "__main__":
    sys.exit(main())
