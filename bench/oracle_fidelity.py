"""The oracle over A2A against the same oracle natively, in one run; or, with `--agent llm`, tau2's llm_agent
going wrong on purpose, natively and served over A2A.

Prints, per domain: rewards of both arms, whether trajectories, termination
reasons and every field of reward_info match, and the wall-time ratio A2A /
native. Both arms run in this process, as tau2 does,
so the ratio is the protocol's alone; since each database is read once per
process (docs/performance.md) the native arm costs little, and the ratio is
the protocol's cost over very cheap simulations. The oracle runs in
its own process and serves every binding; `--transport` picks the one used.
Each arm runs untimed first (`--warmup`): the native oracle reads the domain's
tasks on its first run, which would otherwise count against native alone.
`--ray local` runs the A2A arm's simulations on a local Ray instance, as
`tau2-a2a run --ray local` does. `--a2a-tools message mcp driven` runs one A2A
arm per way of giving the agent its tools (docs/mcp-tools.md), side by side
against the same native arm.

`--agent llm` runs tau2's `llm_agent` (native arm) and the same agent served
over A2A by `tau2-a2a agent llm` in its own process (A2A arm), both driven by
the loopback stand-in LLM (testbed/standin_llm.py, its own process) with a
fault per task chosen by a hash of the task (testbed/standin_faults.py: a wrong
argument, a skipped write, an early goodbye, a transfer, a loop until
`--max-steps`, a missing or wrong closing text, numbers in the other JSON
form, or none). Both arms get the same answers from the stand-in; the lines
say how many simulations scored 1.0 and 0.0, how many had a partial
breakdown (checks at 1.0 and at 0.0: tau2's reward is their product, so no
reward lies strictly between 0 and 1), and each fault's figures.

The run passes when, for every task and trial, the two arms' rewards,
reward_info, termination reasons and trajectories match; tasks the native oracle itself
cannot bring to 1.0 are listed with the reason its run shows. Tasks scored by
an LLM judge (NL assertions: upstream's retail, banking_knowledge's task_102)
are left out unless `--llm-judged` (the judge's real LLM: OPENAI_API_KEY, and
OPENAI_API_BASE for another endpoint) or `--standin-judge` (judged by the
loopback stand-in, testbed/standin_llm.py, whose verdicts are a pure function
of the conversation: both arms judged alike, offline; see docs/judge.md). `--domains all` runs every text domain of
the installed tau2 (upstream v1.0.1: airline, retail, telecom, telecom-workflow,
banking_knowledge); banking_knowledge runs with `--retrieval-config`
(default bm25_grep, offline; see docs/domains.md).

    .venv/bin/python bench/oracle_fidelity.py                    # airline, all 50 tasks
    .venv/bin/python bench/oracle_fidelity.py --domains airline retail --num-trials 2 --transport grpc
    .venv/bin/python bench/oracle_fidelity.py --domains telecom  # telecom's base split, 114 tasks
    .venv/bin/python bench/oracle_fidelity.py --domains telecom --ray local
    .venv/bin/python bench/oracle_fidelity.py --domains telecom --task-split full --sample 200 --seed 7
    .venv/bin/python bench/oracle_fidelity.py --domains banking_knowledge telecom-workflow --warmup 0 \
        --repeats 1 --max-concurrency 2                          # upstream's newer domains, every task
    .venv/bin/python bench/oracle_fidelity.py --domains banking_knowledge --retrieval-config full_kb
    .venv/bin/python bench/oracle_fidelity.py --domains all --standin-judge   # every task of every text domain
    .venv/bin/python bench/oracle_fidelity.py --agent llm --domains all --standin-judge --warmup 0 --repeats 1
    .venv/bin/python bench/oracle_fidelity.py --domains all --standin-judge --a2a-tools message mcp driven
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # testbed/
from _common import cli, oracle_process, serving_process, standin_process  # noqa: E402

from tau2_a2a.client.config import TRANSPORTS, A2AConfig  # noqa: E402
from tau2_a2a.protocol.hosting import BackgroundServer, free_port  # noqa: E402
from tau2_a2a.runner.run import evaluate  # noqa: E402
from tau2_a2a.runner.settings import A2A_AGENT, RunSettings  # noqa: E402
from tau2_a2a.tau2bench.participants.oracle_script import judged_by_llm  # noqa: E402
from tau2_a2a.tau2bench.run.fidelity import differences  # noqa: E402
from tau2_a2a.tau2bench.run.runs import domains as known_domains  # noqa: E402
from tau2_a2a.tau2bench.seam.distribution import load_tasks, mend_import_effects  # noqa: E402

NATIVE_AGENTS = {"oracle": "oracle_agent", "llm": "llm_agent"}
TOOLS_MODES = ("message", "mcp", "driven")  # the A2A arms: how the agent gets its tools
STANDIN_MODEL = "openai/standin"  # testbed/standin_llm.py's MODEL
STANDIN_KEY_ENV = "STANDIN_API_KEY"  # the key the llm agents send the stand-in: a placeholder, never a real key
KNOWLEDGE_DOMAIN = "banking_knowledge"

mend_import_effects()  # this process is ours: what importing tau2 did to it is undone (see README)


def chosen_task_ids(domain: str, args: argparse.Namespace) -> tuple[list[str] | None, int]:
    """The split's task ids to run, in its order (None: every task), and how many LLM-judged ones were left
    out: `--sample` of them drawn with `--seed`, without those an LLM must score unless `--llm-judged`."""
    tasks = load_tasks(domain, task_split_name=args.task_split)
    kept = [task.id for task in tasks if args.llm_judged or not judged_by_llm(task)]
    left_out = len(tasks) - len(kept)
    if args.sample is None:
        return (None if not left_out else kept), left_out
    chosen = set(random.Random(args.seed).sample(kept, min(args.sample, len(kept))))
    return [task_id for task_id in kept if task_id in chosen], left_out


def settings(domain: str, arm: str, save_to: str, results_dir: str, task_ids: list[str] | None,
             args: argparse.Namespace, a2a: A2AConfig, standin: str | None) -> RunSettings:
    native = arm == "native"
    a2a = replace(a2a, tools="message" if arm == "message" else "mcp", driven=arm == "driven")
    if args.agent == "llm":  # native: tau2's llm_agent at the stand-in; over A2A, the model is the agent's own
        llm, llm_args = STANDIN_MODEL, ({"api_base": standin, "api_key": "standin", "temperature": 0.0}
                                        if native else {})
    else:
        llm, llm_args = arm, {}
    return RunSettings(
        domain=domain, agent=NATIVE_AGENTS[args.agent] if native else A2A_AGENT, a2a=None if native else a2a,
        ray=None if native else args.ray, agent_llm=llm, agent_llm_args=llm_args, user="scripted_user",
        user_llm="scripted", user_llm_args={}, max_steps=args.max_steps,
        num_trials=args.num_trials, num_tasks=args.num_tasks if task_ids is None else None,
        task_split_name=args.task_split, task_ids=task_ids[:args.num_tasks] if task_ids is not None else None,
        max_concurrency=args.max_concurrency, results_dir=results_dir, save_to=save_to, log_level="ERROR",
        retrieval_config=args.retrieval_config if domain == KNOWLEDGE_DOMAIN else None,
    )


def rewards(results: Any) -> dict[tuple[str, int | None], float | None]:
    """Each simulation's reward by task and trial; None where tau2 scored nothing (an infrastructure error)."""
    return {(s.task_id, s.trial): s.reward_info.reward if s.reward_info else None for s in results.simulations}


def shortfall(simulation: Any) -> str:
    """Why a simulation scored below 1.0, as its results show: each check of the task's reward basis that
    scored below 1, with what failed in it."""
    info = simulation.reward_info
    if info is None:
        return f"no score ({simulation.termination_reason.value})"
    details = {
        "DB": lambda: "the database differs from the golden actions' database",
        "ACTION": lambda: "golden actions not in the trajectory: " + ", ".join(sorted(
            {check.action.name for check in info.action_checks or [] if not check.action_match})),
        "ENV_ASSERTION": lambda: f"{sum(not c.met for c in info.env_assertions or [])} environment assertions fail",
        "COMMUNICATE": lambda: f"{sum(not c.met for c in info.communicate_checks or [])} communicate_info not said",
        "NL_ASSERTION": lambda: f"{sum(not c.met for c in info.nl_assertions or [])} NL assertions fail",
    }
    failed = [str(getattr(basis, "value", basis)) for basis, reward in (info.reward_breakdown or {}).items()
              if reward < 1.0]
    return "; ".join(details.get(basis, lambda: basis)() for basis in failed) or f"reward {info.reward}"


@contextmanager
def agent_under_test(args: argparse.Namespace) -> Iterator[tuple[str, str | None]]:
    """The A2A agent in its own process, every binding served: the oracle, or (`--agent llm`) `tau2-a2a agent llm`
    at the stand-in LLM (its own process too, each task's fault by a hash of the task). Yields the agent's URL
    and the stand-in's api base (None for the oracle)."""
    if args.agent == "oracle":
        with oracle_process(free_port(), grpc_port=free_port()) as url:
            yield url, None
        return
    os.environ.setdefault(STANDIN_KEY_ENV, "standin")
    with standin_process(free_port(), faults="hashed") as api_base:
        port = free_port()
        command = [*cli(), "agent", "llm", "--model", STANDIN_MODEL, "--api-base", api_base,
                   "--api-key-env", STANDIN_KEY_ENV, "--port", str(port), "--grpc-port", str(free_port())]
        with serving_process(command, port) as url:
            yield url, api_base


def fault_figures(domain: str, results: Any) -> list[str]:
    """Per fault the stand-in made (testbed/standin_faults.py's hashed plan): simulations, reward 1.0, and partial
    breakdowns."""
    from testbed.standin_faults import hashed_plan

    by_fault: dict[str, list[Any]] = {}
    for simulation in results.simulations:
        by_fault.setdefault(hashed_plan(domain, simulation.task_id).value, []).append(simulation)
    return [f"{fault} {len(sims)} ({sum(bool(s.reward_info) and s.reward_info.reward == 1.0 for s in sims)} at 1.0, "
            f"{sum(partial(s) for s in sims)} partial)" for fault, sims in sorted(by_fault.items())]


def partial(simulation: Any) -> bool:
    """A reward breakdown with both a check at 1.0 and one at 0.0 (tau2's rewards are products of such checks,
    so no reward lies strictly between 0 and 1)."""
    values = set((simulation.reward_info.reward_breakdown or {}).values()) if simulation.reward_info else set()
    return {0.0, 1.0} <= values


def count(values: list[Any]) -> str:
    found: dict[Any, int] = {}
    for value in values:
        found[value] = found.get(value, 0) + 1
    return ", ".join(f"{value} {n}" for value, n in sorted(found.items(), key=lambda item: str(item[0])))


@contextmanager
def standin_judge() -> Iterator[str]:
    """The stand-in LLM on loopback, with LiteLLM's OpenAI endpoint (where upstream's judge goes) pointed at it."""
    from testbed.standin_llm import StandinLLM

    llm = StandinLLM()
    with BackgroundServer(llm.app(), port=free_port()) as server:
        saved = {name: os.environ.get(name) for name in ("OPENAI_API_BASE", "OPENAI_BASE_URL", "OPENAI_API_KEY")}
        os.environ.update(OPENAI_API_BASE=f"{server.url}/v1", OPENAI_API_KEY="standin-judge")
        os.environ.pop("OPENAI_BASE_URL", None)
        try:
            yield f"{server.url}/v1"
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", choices=("oracle", "llm"), default="oracle",
                        help="oracle: the oracle both ways (default); llm: tau2's llm_agent natively and served over "
                             "A2A, at the stand-in LLM with a fault per task")
    parser.add_argument("--max-steps", type=int, default=200, help="tau2's --max-steps for both arms (default 200)")
    parser.add_argument("--domains", nargs="+", default=["airline"],
                        help="domains to run, or `all`: every text domain of the installed tau2 (default: airline)")
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
    parser.add_argument("--a2a-tools", nargs="+", choices=TOOLS_MODES, default=["message"],
                        help="one A2A arm per way the agent gets its tools: message, mcp, driven (agent-driven); "
                             "default: message")
    parser.add_argument("--retrieval-config", default="bm25_grep",
                        help="banking_knowledge's retrieval config (default bm25_grep, offline)")
    parser.add_argument("--llm-judged", action="store_true",
                        help="also run the tasks an LLM judge scores (needs that LLM's credentials)")
    parser.add_argument("--standin-judge", action="store_true",
                        help="also run the tasks an LLM judge scores, judged by the loopback stand-in (offline)")
    args = parser.parse_args()
    args.llm_judged = args.llm_judged or args.standin_judge
    if args.domains == ["all"]:
        args.domains = [domain for domain in known_domains() if domain != "mock"]
    lines, ok = [], True
    with (tempfile.TemporaryDirectory() as results_dir, agent_under_test(args) as (url, standin),
          standin_judge() if args.standin_judge else nullcontext() as judge):
        if judge:
            print(f"LLM judge: the stand-in at {judge}", flush=True)
        a2a = A2AConfig(endpoint=url, transport=args.transport)
        for domain in args.domains:
            task_ids, left_out = chosen_task_ids(domain, args)
            arms = ["native", *args.a2a_tools]
            seconds = dict.fromkeys(arms, 0.0)
            results: dict[str, Any] = {}
            for repeat in range(-args.warmup, args.repeats):  # order rotates, so what is left of warming favours none
                for arm in arms[repeat % len(arms):] + arms[:repeat % len(arms)]:
                    run = settings(domain, arm, f"{domain}_{arm}_{repeat}", results_dir, task_ids, args, a2a,
                                   standin)
                    started = time.perf_counter()
                    results[arm] = evaluate(run).results
                    seconds[arm] += (time.perf_counter() - started) if repeat >= 0 else 0.0
            native = results["native"]
            native_scores = rewards(native)
            tasks = (f"{len(task_ids)} tasks drawn with seed {args.seed} from split {args.task_split}"
                     if args.sample is not None else f"split {args.task_split}")
            tasks += f", {left_out} LLM-judged tasks left out" if left_out else ""
            tasks += f", retrieval config {args.retrieval_config}" if domain == KNOWLEDGE_DOMAIN else ""
            tasks += f", agent {args.agent}, max steps {args.max_steps}"
            for mode in args.a2a_tools:
                over_a2a = results[mode]
                scores = rewards(over_a2a)
                found = differences(over_a2a, native)
                differing = sorted((key for key in scores if scores[key] != native_scores.get(key)), key=str)
                ok &= not found and not differing and scores.keys() == native_scores.keys()
                a2a_s, native_s = seconds[mode], seconds["native"]
                lines.append(
                    f"{domain} ({tasks}, transport {args.transport}, tools {mode}): {len(scores)} simulations, "
                    f"reward 1.0 on {sum(r == 1.0 for r in scores.values())} over A2A, "
                    f"{sum(r == 1.0 for r in native_scores.values())} natively; "
                    f"rewards {'equal' if not differing else 'DIFFER: ' + '; '.join(map(str, differing[:5]))}; "
                    f"trajectories, termination reasons and reward_info "
                    f"{'match' if not found else 'DIFFER: ' + '; '.join(found[:5])}; "
                    f"wall time A2A {a2a_s:.1f}s / native {native_s:.1f}s = {a2a_s / max(native_s, 1e-9):.3f} "
                    f"(max concurrency {args.max_concurrency}, A2A "
                    f"{'on Ray ' + args.ray if args.ray else 'in this process'}, "
                    f"{args.repeats} timed runs per arm after {args.warmup} untimed)"
                )
            if args.agent == "llm":
                lines.append(f"  natively: reward 1.0 on {sum(r == 1.0 for r in native_scores.values())}, "
                             f"0.0 on {sum(r == 0.0 for r in native_scores.values())}, "
                             f"partial breakdowns {sum(partial(s) for s in native.simulations)}; terminations "
                             f"{count([s.termination_reason.value for s in native.simulations])}")
                lines.append("  faults: " + "; ".join(fault_figures(domain, native)))
                continue
            lines += [f"  below 1.0 natively: {s.task_id} (trial {s.trial}): {shortfall(s)}"
                      for s in sorted(native.simulations, key=lambda s: (s.task_id, s.trial or 0))
                      if s.reward_info is None or s.reward_info.reward != 1.0]
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
