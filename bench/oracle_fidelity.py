"""The oracle over A2A against the same oracle natively, in one run.

Prints, per domain: rewards of both arms, whether trajectories match, and the
wall-time ratio A2A / native. Both arms run in this process, as tau2 does,
so the ratio is the protocol's alone; since each database is read once per
process (docs/performance.md) the native arm costs little, and the ratio is
the protocol's cost over very cheap simulations. The oracle runs in
its own process and serves every binding; `--transport` picks the one used.
Each arm runs untimed first (`--warmup`): the native oracle reads the domain's
tasks on its first run, which would otherwise count against native alone.
`--ray local` runs the A2A arm's simulations on a local Ray instance, as
`tau2-a2a run --ray local` does.

    .venv/bin/python bench/oracle_fidelity.py                    # airline, all 50 tasks
    .venv/bin/python bench/oracle_fidelity.py --domains airline retail --num-trials 2 --transport grpc
    .venv/bin/python bench/oracle_fidelity.py --domains telecom  # telecom's base split, 114 tasks
    .venv/bin/python bench/oracle_fidelity.py --domains telecom --ray local
    .venv/bin/python bench/oracle_fidelity.py --domains telecom --task-split full --sample 200 --seed 7
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import oracle_process  # noqa: E402

from tau2_a2a.client.config import TRANSPORTS, A2AConfig  # noqa: E402
from tau2_a2a.protocol.hosting import free_port  # noqa: E402
from tau2_a2a.runner.run import evaluate  # noqa: E402
from tau2_a2a.runner.settings import RunSettings  # noqa: E402
from tau2_a2a.tau2bench.distribution import load_tasks  # noqa: E402
from tau2_a2a.tau2bench.fidelity import trajectory_differences  # noqa: E402


AGENTS = {"native": "oracle_agent", "a2a": "a2a_agent"}


def sampled_task_ids(domain: str, args: argparse.Namespace) -> list[str] | None:
    """`--sample` task ids of the split, drawn with `--seed`, in the split's order (None: every task)."""
    if args.sample is None:
        return None
    ids = [task.id for task in load_tasks(domain, task_split_name=args.task_split)]
    chosen = set(random.Random(args.seed).sample(ids, min(args.sample, len(ids))))
    return [task_id for task_id in ids if task_id in chosen]


def settings(domain: str, arm: str, save_to: str, results_dir: str, task_ids: list[str] | None,
             args: argparse.Namespace, a2a: A2AConfig) -> RunSettings:
    return RunSettings(
        domain=domain, agent=AGENTS[arm], a2a=a2a if arm == "a2a" else None, ray=args.ray if arm == "a2a" else None,
        agent_llm=arm, agent_llm_args={}, user="scripted_user", user_llm="scripted", user_llm_args={},
        num_trials=args.num_trials, num_tasks=args.num_tasks, task_split_name=args.task_split, task_ids=task_ids,
        max_concurrency=args.max_concurrency, results_dir=results_dir, save_to=save_to, log_level="ERROR",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domains", nargs="+", default=["airline"])
    parser.add_argument("--task-split", default="base", help="tau2's split of each domain (default: base)")
    parser.add_argument("--sample", type=int, default=None, help="run this many tasks of the split, drawn at random")
    parser.add_argument("--seed", type=int, default=0, help="seed of --sample's draw")
    parser.add_argument("--num-trials", type=int, default=1)
    parser.add_argument("--num-tasks", type=int, default=None)
    parser.add_argument("--max-concurrency", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2, help="timed runs per arm, alternating order")
    parser.add_argument("--warmup", type=int, default=1,
                        help="untimed runs per arm first (default 1): the native oracle reads the domain's "
                             "tasks on its first run, the oracle server on its own first")
    parser.add_argument("--transport", choices=TRANSPORTS, default="auto",
                        help="the A2A binding the client uses (auto: the card's first, JSON-RPC)")
    parser.add_argument("--ray", default=None, metavar="ADDRESS",
                        help="run the A2A arm's simulations on Ray (default: in this process, like tau2's)")
    args = parser.parse_args()
    lines, ok = [], True
    with tempfile.TemporaryDirectory() as results_dir, oracle_process(free_port(), grpc_port=free_port()) as url:
        a2a = A2AConfig(endpoint=url, transport=args.transport)
        for domain in args.domains:
            task_ids = sampled_task_ids(domain, args)
            native_s = a2a_s = 0.0
            for repeat in range(-args.warmup, args.repeats):  # ABBA order, so what is left of warming favours neither arm
                for arm in (("native", "a2a") if repeat % 2 == 0 else ("a2a", "native")):
                    run = settings(domain, arm, f"{domain}_{arm}_{repeat}", results_dir, task_ids, args, a2a)
                    started = time.perf_counter()
                    if arm == "native":
                        native = evaluate(run).results
                        native_s += (time.perf_counter() - started) if repeat >= 0 else 0.0
                    else:
                        over_a2a = evaluate(run).results
                        a2a_s += (time.perf_counter() - started) if repeat >= 0 else 0.0
            rewards = [s.reward_info.reward for s in over_a2a.simulations]
            perfect = sum(r == 1.0 for r in rewards)
            differences = trajectory_differences(over_a2a, native)
            ok &= perfect == len(rewards) and not differences
            tasks = (f"{len(task_ids)} tasks drawn with seed {args.seed} from split {args.task_split}"
                     if task_ids is not None else f"split {args.task_split}")
            lines.append(
                f"{domain} ({tasks}, transport {args.transport}): {len(rewards)} simulations, "
                f"reward 1.0 on {perfect} over A2A, "
                f"{sum(s.reward_info.reward == 1.0 for s in native.simulations)} natively; "
                f"trajectories {'match' if not differences else 'DIFFER: ' + '; '.join(differences[:5])}; "
                f"wall time A2A {a2a_s:.1f}s / native {native_s:.1f}s = {a2a_s / native_s:.3f} "
                f"(max concurrency {args.max_concurrency}, A2A {'on Ray ' + args.ray if args.ray else 'in this process'}, "
                f"{args.repeats} timed runs per arm after {args.warmup} untimed)"
            )
            below = [f"{s.task_id} (trial {s.trial}): {s.reward_info.reward}"
                     for s in over_a2a.simulations if s.reward_info.reward != 1.0]
            lines += [f"  below 1.0 over A2A: {entry}" for entry in below]
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
