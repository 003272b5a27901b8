"""`tau2-a2a demo`: offline, the bundled oracle served on loopback and evaluated over A2A on a few tasks."""

from __future__ import annotations

import argparse

from tau2_a2a.cli.common import OneLineParser


def add_demo_command(commands: argparse._SubParsersAction[OneLineParser]) -> None:
    demo = commands.add_parser("demo")
    demo.add_argument("--domain", default="airline")
    demo.add_argument("--num-tasks", type=int, default=5)
    demo.add_argument("--max-concurrency", type=int, default=4)
    demo.add_argument("--results-dir", default="results")
    demo.set_defaults(func=demo_command)


def demo_command(args: argparse.Namespace) -> int:
    from tau2_a2a.client.config import A2AConfig
    from tau2_a2a.protocol.hosting import BackgroundServer, a2a_app, free_port
    from tau2_a2a.reference.oracle_agent import OracleExecutor, oracle_card
    from tau2_a2a.runner.outcome import print_outcome
    from tau2_a2a.runner.run import evaluate
    from tau2_a2a.runner.settings import RunSettings

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with BackgroundServer(a2a_app(OracleExecutor(), oracle_card(url)), port=port):
        print(f"Reference oracle agent serving A2A at {url}")
        settings = RunSettings(domain=args.domain, a2a=A2AConfig(endpoint=url), agent_llm="a2a-oracle",
                               user="scripted_user", user_llm="scripted", user_llm_args={},
                               num_tasks=args.num_tasks, max_concurrency=args.max_concurrency,
                               results_dir=args.results_dir)
        return print_outcome(evaluate(settings))
