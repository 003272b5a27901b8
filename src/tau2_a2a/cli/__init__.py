"""tau2-a2a: run | card | agent | demo | ab | report | serve | merge, one module per command.

Exit codes of `tau2-a2a run` are in runner/outcome.py; every command exits 2
with one line on a setting that cannot work.
"""

from __future__ import annotations

import argparse
import sys

from tau2_a2a.litellm_cost_map import use_bundled_cost_map

DESCRIPTION = ("Evaluate any A2A agent with tau2-bench, scored exactly as tau2 scores its own agents, and offer\n"
               "tau2's evaluation as an A2A service.")
EPILOG = """start here:
  tau2-a2a demo                                              the bundled oracle over A2A, offline
  tau2-a2a run airline --a2a-endpoint URL                    evaluate your agent (tau2 run's flags)
  tau2-a2a run airline --a2a-endpoint URL --a2a-tools mcp    ... an agent that takes its tools over MCP
  tau2-a2a report RESULTS [RESULTS ...]                      how sure each number is; --gate for CI
  tau2-a2a serve                                             tau2 evaluations as an A2A service

Exit codes: 0 every simulation ran; 3 some ended with A2A errors (they score 0); 1 tau2 left some unscored
(run) or a regression (report --gate); 2 a setting that cannot work, said in one line; 130 Ctrl-C."""

use_bundled_cost_map()  # before any command imports LiteLLM, and for the processes a command starts

from tau2_a2a.cli.ab import add_ab_command  # noqa: E402
from tau2_a2a.cli.agents import add_agent_command  # noqa: E402
from tau2_a2a.cli.card import add_card_command  # noqa: E402
from tau2_a2a.cli.common import OneLineParser  # noqa: E402
from tau2_a2a.cli.demo import add_demo_command  # noqa: E402
from tau2_a2a.cli.merge import add_merge_command  # noqa: E402
from tau2_a2a.cli.report import add_report_command  # noqa: E402
from tau2_a2a.cli.run import add_run_command, resume_command, settings_from_args  # noqa: E402
from tau2_a2a.cli.serve import add_serve_command  # noqa: E402
from tau2_a2a.runner.command import run_as_command  # noqa: E402
from tau2_a2a.runner.outcome import EXIT_USAGE  # noqa: E402
from tau2_a2a.tau2bench.seam.distribution import mend_import_effects  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    mend_import_effects()  # this process is tau2-a2a's own
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    return run_as_command(lambda: args.func(args), debug=getattr(args, "a2a_debug", False),
                          resume_hint=lambda interrupted: resume_command(argv, interrupted))


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="tau2-a2a", description=DESCRIPTION, epilog=EPILOG,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command")
    for add_command in (add_run_command, add_card_command, add_agent_command, add_demo_command, add_ab_command,
                        add_report_command, add_serve_command, add_merge_command):
        add_command(commands)
    return parser


def parse_run_args(argv: list[str]) -> argparse.Namespace:
    """`tau2-a2a run ARGV` parsed and checked, nothing run: argparse exits 2 on a malformed flag,
    a value no run can use raises ConfigError."""
    args = build_parser().parse_args(["run", *argv])
    settings_from_args(args)
    return args
