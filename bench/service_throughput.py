"""Concurrent evaluations through the service against the same evaluations run directly with the CLI.

For each level N, N evaluations of the reference oracle (scripted user,
--num-tasks tasks each) are sent at once to `tau2-a2a serve` (its own
process, --max-running at least N), then the same N evaluations are run as N
concurrent `tau2-a2a run` processes. Both sides run each evaluation in its
own tau2 process, so the ratio is the service's own cost: A2A round trips,
queueing, progress polling, summaries. "Sustained" counts the evaluations that
completed with reward 1.0 on every simulation.

    python bench/service_throughput.py --levels 1,2,4 --num-tasks 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from service_common import BIN, call, peak_rss_mb, service_process

from tau2_a2a.protocol.hosting import free_port
from tau2_a2a.tau2bench.run.layout import results_path


def oracle_arguments(endpoint: str, num_tasks: int) -> dict:
    return {"domain": "airline", "agent_endpoint": endpoint, "user": "scripted_user", "user_llm": "scripted",
            "num_tasks": num_tasks}


async def through_service(url: str, endpoint: str, n: int, num_tasks: int) -> tuple[float, int]:
    from tau2_a2a.service.caller import connect, result_data

    client, http = await connect(url)
    try:
        started = time.perf_counter()
        tasks = await asyncio.gather(*(call(client, "run_tau2_evaluation", oracle_arguments(endpoint, num_tasks))
                                       for _ in range(n)))
        wall = time.perf_counter() - started
    finally:
        await http.aclose()
    sustained = 0
    for task in tasks:
        metrics = (result_data(task) or {}).get("result", {}).get("metrics", {})
        sustained += metrics.get("num_simulations") == num_tasks and metrics.get("avg_reward") == 1.0
    return wall, sustained


def through_cli(endpoint: str, n: int, num_tasks: int, results_dir: Path) -> tuple[float, int]:
    started = time.perf_counter()
    processes = [subprocess.Popen(
        [str(BIN / "tau2-a2a"), "run", "airline", "--agent", "a2a_agent", "--a2a-endpoint", endpoint,
         "--user", "scripted_user", "--user-llm", "scripted", "--num-tasks", str(num_tasks),
         "--results-dir", str(results_dir / f"cli_{n}_{i}"), "--save-to", "run"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i in range(n)]
    codes = [p.wait() for p in processes]
    wall = time.perf_counter() - started
    sustained = 0
    for i, code in enumerate(codes):
        path = results_path("run", results_dir / f"cli_{n}_{i}")
        if code == 0 and path.exists():
            sims = json.loads(path.read_text())["simulations"]
            sustained += len(sims) == num_tasks and all(s["reward_info"]["reward"] == 1.0 for s in sims)
    return wall, sustained


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1,2,4", help="Concurrent evaluations to try, comma-separated")
    parser.add_argument("--num-tasks", type=int, default=5)
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import oracle_process

    with tempfile.TemporaryDirectory(prefix="service_throughput_") as tmp, \
            oracle_process(free_port()) as oracle, \
            service_process(free_port(), Path(tmp) / "service", "--max-running", str(max(levels)),
                            "--max-queued", str(max(levels))) as (url, service):
        rows = []
        for n in levels:
            service_wall, service_ok = asyncio.run(through_service(url, oracle, n, args.num_tasks))
            cli_wall, cli_ok = through_cli(oracle, n, args.num_tasks, Path(tmp))
            rows.append((n, service_ok, service_wall, cli_ok, cli_wall))
        rss = peak_rss_mb(service.pid)

    print(f"Evaluations of the oracle, {args.num_tasks} airline tasks each, scripted user "
          f"(service and CLI side by side, same machine, one run)")
    print(f"{'concurrent':>10} {'service ok':>10} {'service s':>10} {'CLI ok':>7} {'CLI s':>8} {'service/CLI':>12}")
    for n, service_ok, service_wall, cli_ok, cli_wall in rows:
        print(f"{n:>10} {f'{service_ok}/{n}':>10} {service_wall:>10.1f} {f'{cli_ok}/{n}':>7} {cli_wall:>8.1f} "
              f"{service_wall / cli_wall:>12.2f}")
    sustained = max((n for n, ok, *_ in rows if ok == n), default=0)
    print(f"Sustained: {sustained} concurrent evaluations, all complete with reward 1.0 "
          f"(service peak memory {rss:.0f} MB, excluding its evaluation processes)" if rss else
          f"Sustained: {sustained} concurrent evaluations, all complete with reward 1.0")


if __name__ == "__main__":
    main()
