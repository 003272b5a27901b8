"""`tau2-a2a ab DOMAIN --model MODEL`: tau2's llm_agent against the same model over A2A (apps/ab.py)."""

from __future__ import annotations

import argparse

from tau2_a2a.cli.common import OneLineParser
from tau2_a2a.cli.run import resolve_domain, settings_from_args
from tau2_a2a.cli.tau2_flags import add_tau2_run_args


def add_ab_command(commands: argparse._SubParsersAction[OneLineParser]) -> None:
    ab = commands.add_parser("ab")
    ab.add_argument("domain_positional", nargs="?", metavar="DOMAIN", help="The domain (same as --domain)")
    ab.add_argument("--model", required=True, help="LiteLLM model for both arms (sets --agent-llm)")
    ab.add_argument("--api-base", default=None, help="Base URL of an OpenAI-compatible endpoint, for both arms")
    add_tau2_run_args(ab)
    ab.set_defaults(func=ab_command)


def ab_command(args: argparse.Namespace) -> int:
    from tau2_a2a.apps.ab import NATIVE_AGENT, run_ab

    resolve_domain(args)
    args.agent_llm = args.model
    args.agent = NATIVE_AGENT
    if args.api_base:
        args.agent_llm_args = {**args.agent_llm_args, "api_base": args.api_base}
    outcome = run_ab(settings_from_args(args))
    print(outcome.table)
    print(f"Results: {outcome.native.results_path}\n         {outcome.a2a.results_path}")
    print(f"A/B table: {outcome.table_path} ({outcome.json_path.name} beside it)")
    return 0
