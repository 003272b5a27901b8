"""CPU per simulation with tau2's stock environments against ours (databases read once per process).

One process, one thread, per domain: N simulations of the native oracle
(`oracle_agent`, an instant agent) with the scripted user, each made and
scored as the installed tau2's run makes one (the conversation and tau2's
scoring, which builds two more environments and hashes both databases), first with stock environments, then
with `tau2_a2a.tau2bench.speed.environments` installed. It prints the process CPU
time per simulation (time.process_time), simulations per second of wall time,
and the memory one more live environment holds (allocated bytes, tracemalloc,
after replaying a task's golden actions in it), and checks that both arms scored the same.
The one-time cost of reading a domain's database into the template is shown
apart ("once").

    .venv/bin/python bench/environments.py [--domains airline retail telecom] [-n 10]
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import sys
import time
import tracemalloc
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import tempfile  # noqa: E402

from loguru import logger  # noqa: E402

from tau2_a2a.runner.settings import RunSettings  # noqa: E402
from tau2_a2a.tau2bench.participants.oracle_script import judged_by_llm  # noqa: E402
from tau2_a2a.tau2bench.run.runs import RunPlan, plan_run  # noqa: E402
from tau2_a2a.tau2bench.seam.distribution import (  # noqa: E402
    DISTRIBUTION,
    VERSION,
    Task,
    load_tasks,
    mend_import_effects,
    registry,
    simulate,
)
from tau2_a2a.tau2bench.seam.hooks import tau2_hooks  # noqa: E402
from tau2_a2a.tau2bench.speed.environments import environments  # noqa: E402

mend_import_effects()  # this process is ours: what importing tau2 did to it is undone (see README)

RESULTS_DIR = tempfile.mkdtemp(prefix="bench-environments-")


@functools.cache
def oracle_plan(domain: str) -> RunPlan:
    """The native oracle with the scripted user on `domain`, as `tau2-a2a run` plans it (once: planning reads
    the task set, which is no part of a simulation)."""
    return plan_run(RunSettings(domain=domain, agent="oracle_agent", user="scripted_user", agent_llm="oracle",
                                user_llm="scripted", task_split_name="base", results_dir=RESULTS_DIR).tau2)


def simulate_oracle(domain: str, task: Task) -> Any:
    return simulate(oracle_plan(domain).config, task, seed=300)


def arm(domain: str, tasks: list[Task], cached: bool) -> dict[str, Any]:
    """Time one arm; the first simulation (template build, warm caches) is timed apart."""
    with tau2_hooks(), environments(cached):  # the oracle and the scripted user registered, as in a run
        start = time.process_time()
        simulate_oracle(domain, tasks[0])
        once = time.process_time() - start
        start, wall = time.process_time(), time.perf_counter()
        rewards = [simulate_oracle(domain, task).reward_info.reward for task in tasks]
        cpu, wall = time.process_time() - start, time.perf_counter() - wall
        per_env = environment_memory(domain, tasks[0])
    return {"once": once, "cpu": cpu / len(tasks), "rate": len(tasks) / wall, "rewards": rewards,
            "memory": per_env}


def environment_memory(domain: str, task: Task, count: int = 5) -> float:
    """Bytes allocated (tracemalloc) per live environment that has replayed `task`'s golden actions."""
    constructor = registry.get_env_constructor(domain)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = []
    for _ in range(count):
        environment = constructor()
        for action in task.evaluation_criteria.actions or []:
            try:
                environment.make_tool_call(action.name, requestor=action.requestor, **action.arguments)
            except ValueError:
                pass  # a golden action tau2's tools refuse is refused in tau2's scoring too
        kept.append(environment)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return (after - before) / count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domains", nargs="+", default=["airline", "retail", "telecom"])
    parser.add_argument("-n", type=int, default=10,
                        help="simulations per arm and domain (the first N base tasks scored without an LLM)")
    args = parser.parse_args()
    logger.remove()
    print(f"tau2: {DISTRIBUTION} {VERSION}")
    print(f"{'domain':9} {'arm':7} {'once s':>7} {'CPU s/sim':>10} {'sims/s':>7} {'KB/env':>8}")
    for domain in args.domains:
        tasks = [task for task in load_tasks(domain, task_split_name="base") if not judged_by_llm(task)][: args.n]
        stock, cached = arm(domain, tasks, cached=False), arm(domain, tasks, cached=True)
        for name, result in (("stock", stock), ("cached", cached)):
            print(f"{domain:9} {name:7} {result['once']:7.2f} {result['cpu']:10.4f} {result['rate']:7.1f} "
                  f"{result['memory'] / 2**10:8.0f}")
        same = "same rewards" if stock["rewards"] == cached["rewards"] else "REWARDS DIFFER"
        print(f"{domain:9} CPU per simulation: stock / cached = {stock['cpu'] / cached['cpu']:.1f}x ({same}, "
              f"mean reward {sum(cached['rewards']) / len(tasks):.2f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
