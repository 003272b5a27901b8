"""What a legitimate agent sends and asks for, to set the limits a hostile one meets (docs: README, service.md).

    .venv/bin/python bench/agent_limits.py                      # every text domain's base split over A2A
    .venv/bin/python bench/agent_limits.py --domains airline --task-split full
    .venv/bin/python bench/agent_limits.py --tools mcp --largest   # each domain's largest task, tools over MCP

Runs the reference oracle over A2A (JSON-RPC, blocking, scripted user) on
every task of each text domain of the installed tau2, banking_knowledge under
each offline retrieval config that changes what the agent is sent (full_kb puts
the whole knowledge base in the policy), and reads back from the results:

- the largest request sent to the agent (HTTP body bytes; the first of each
  simulation carries the policy, the tool schemas and the history) and the
  largest reply;
- tool calls per reply and per simulation. The oracle asks for one tool call
  per reply; an LLM agent may ask for several at once, at most as many as a
  task has golden actions in a row, so the script also counts each task's
  golden actions (for every task of the task set, every split);
- the turns of a simulation (tau2's --max-steps counts them);
- what the agent sends in a simulation (its A2A replies and MCP request
  bodies, bytes) and, with `--tools mcp`, its MCP requests of every kind:
  the budgets --a2a-max-agent-bytes and --a2a-max-mcp-requests. The oracle
  opens an MCP session per reply (initialize, its notification, the tool
  listing, then its calls), as a framework's MCP client does.

`--largest` runs only the task of each domain with the most golden actions
of the agent (its longest conversation), for a quick look at the MCP modes.

The LLM-judged tasks run too: their A2A traffic is the same, and tau2 leaves
them unscored without a judge, which does not matter here.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import cli, serving_process  # noqa: E402

from tau2_a2a.client.config import A2AConfig  # noqa: E402
from tau2_a2a.client.records import RAW_DATA_KEY  # noqa: E402
from tau2_a2a.protocol.hosting import free_port  # noqa: E402
from tau2_a2a.runner.run import evaluate  # noqa: E402
from tau2_a2a.runner.settings import RunSettings  # noqa: E402
from tau2_a2a.tau2bench.participants.oracle_script import judged_by_llm  # noqa: E402
from tau2_a2a.tau2bench.run.runs import domains as known_domains  # noqa: E402
from tau2_a2a.tau2bench.seam.distribution import load_tasks, mend_import_effects  # noqa: E402

KNOWLEDGE_DOMAIN = "banking_knowledge"
KNOWLEDGE_CONFIGS = ("bm25_grep", "full_kb", "golden_retrieval")

mend_import_effects()  # this process is ours: what importing tau2 did to it is undone (see README)


def golden_actions(domain: str) -> tuple[int, int]:
    """The most golden actions of one task (the agent's), and the longest run of them in a row, over every task
    of the domain's task set."""
    most = longest_run = 0
    for task in load_tasks(domain, task_split_name=None):
        actions = (task.evaluation_criteria.actions or []) if task.evaluation_criteria else []
        mine = [a for a in actions if a.requestor == "assistant"]
        most = max(most, len(mine))
        run = 0
        for action in actions:
            run = run + 1 if action.requestor == "assistant" else 0
            longest_run = max(longest_run, run)
    return most, longest_run


def measure(results: Any) -> dict[str, Any]:
    """The largest request and reply, tool calls per reply and per simulation, and turns, over a run."""
    figures = {"request_bytes": 0, "request_at": "", "response_bytes": 0, "calls_per_reply": 0,
               "calls_per_simulation": 0, "turns": 0, "simulations": len(results.simulations),
               "agent_bytes": 0, "mcp_requests": 0}
    for simulation in results.simulations:
        calls = turns = sent = mcp_requests = 0
        for message in simulation.messages:
            if message.role != "assistant":
                continue
            turns += 1
            count = len(message.tool_calls or [])
            calls += count
            figures["calls_per_reply"] = max(figures["calls_per_reply"], count)
            raw = (message.raw_data or {}).get(RAW_DATA_KEY) or {}
            for record in raw.get("requests", []):
                if record["request_bytes"] > figures["request_bytes"]:
                    figures["request_bytes"] = record["request_bytes"]
                    figures["request_at"] = f"task {simulation.task_id} turn {record['turn']}"
                figures["response_bytes"] = max(figures["response_bytes"], record["response_bytes"])
                sent += record["response_bytes"]
            for record in raw.get("mcp_requests", []):
                mcp_requests += 1
                sent += record["request_bytes"]
        figures["calls_per_simulation"] = max(figures["calls_per_simulation"], calls)
        figures["turns"] = max(figures["turns"], turns)
        figures["agent_bytes"] = max(figures["agent_bytes"], sent)
        figures["mcp_requests"] = max(figures["mcp_requests"], mcp_requests)
    return figures


def largest_task(domain: str, split: str) -> str:
    """The task of `domain`'s split with the most golden actions of the agent, among those scored without an LLM
    judge (this run has none, and tau2 drops a simulation it cannot score)."""
    def agent_actions(task: Any) -> int:
        actions = (task.evaluation_criteria.actions or []) if task.evaluation_criteria else []
        return sum(1 for action in actions if action.requestor == "assistant")

    scored = [task for task in load_tasks(domain, task_split_name=split) if not judged_by_llm(task)]
    return str(max(scored, key=agent_actions).id)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domains", nargs="+", default=["all"], help="domains, or all (default)")
    parser.add_argument("--task-split", default="base")
    parser.add_argument("--max-concurrency", type=int, default=4)
    parser.add_argument("--tools", choices=("message", "mcp"), default="message",
                        help="how the oracle gets its tools (default: message)")
    parser.add_argument("--largest", action="store_true", help="each domain's largest task only")
    args = parser.parse_args()
    domains = [d for d in known_domains() if d != "mock"] if args.domains == ["all"] else args.domains
    runs = [(d, c) for d in domains for c in (KNOWLEDGE_CONFIGS if d == KNOWLEDGE_DOMAIN else (None,))]
    largest = {"request_bytes": 0, "calls_per_simulation": 0, "golden_run": 0, "turns": 0, "agent_bytes": 0,
               "mcp_requests": 0}
    port = free_port()
    oracle = [*cli(), "agent", "oracle", "--port", str(port), "--tools", args.tools]
    with tempfile.TemporaryDirectory() as results_dir, serving_process(oracle, port) as url:
        for domain, config in runs:
            only = {"task_ids": [largest_task(domain, args.task_split)]} if args.largest else {}
            outcome = evaluate(RunSettings(
                domain=domain, a2a=A2AConfig(endpoint=url, tools=args.tools), agent_llm="oracle",
                agent_llm_args={}, user="scripted_user", user_llm="scripted", user_llm_args={},
                task_split_name=args.task_split, max_concurrency=args.max_concurrency, results_dir=results_dir,
                save_to=f"{domain}_{config}", log_level="ERROR", retrieval_config=config, **only))
            figures = measure(outcome.results)
            most, longest_run = golden_actions(domain)
            print(f"{domain}{' ' + config if config else ''} ({figures['simulations']} simulations, split "
                  f"{args.task_split}): largest request {figures['request_bytes']} bytes ({figures['request_at']}), "
                  f"largest reply {figures['response_bytes']} bytes; tool calls per reply "
                  f"{figures['calls_per_reply']}, "
                  f"per simulation {figures['calls_per_simulation']}; turns {figures['turns']}; golden actions of "
                  f"the agent, every task of the task set: {most} in a task, {longest_run} in a row; the agent sent "
                  f"{figures['agent_bytes']} bytes and {figures['mcp_requests']} MCP requests in a simulation at "
                  "most", flush=True)
            largest["request_bytes"] = max(largest["request_bytes"], figures["request_bytes"])
            largest["calls_per_simulation"] = max(largest["calls_per_simulation"], figures["calls_per_simulation"],
                                                  most)
            largest["golden_run"] = max(largest["golden_run"], longest_run)
            largest["turns"] = max(largest["turns"], figures["turns"])
            largest["agent_bytes"] = max(largest["agent_bytes"], figures["agent_bytes"])
            largest["mcp_requests"] = max(largest["mcp_requests"], figures["mcp_requests"])
    print(f"largest over every run: request {largest['request_bytes']} bytes, tool calls per simulation "
          f"{largest['calls_per_simulation']}, golden actions in a row {largest['golden_run']}, turns "
          f"{largest['turns']}, sent by the agent in a simulation {largest['agent_bytes']} bytes and "
          f"{largest['mcp_requests']} MCP requests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
