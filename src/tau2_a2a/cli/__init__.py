"""tau2-a2a: run | card | agent | demo | ab | report | serve | merge, one module per command.

Exit codes of `tau2-a2a run` are in runner/outcome.py; every command exits 2
with one line on a setting that cannot work.

A command's module is imported only when that command is chosen: `tau2-a2a
--help` lists the commands from the table below, and `card`, `report` or an
agent's `--help` never pay for importing tau2, LiteLLM or ADK (seconds of CPU),
which only the commands that run simulations or serve need.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from tau2_a2a.cli.common import OneLineParser
from tau2_a2a.litellm_cost_map import use_bundled_cost_map
from tau2_a2a.runner.command import run_as_command
from tau2_a2a.runner.outcome import EXIT_USAGE

if TYPE_CHECKING:
    from tau2_a2a.runner.interrupt import RunInterrupted

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

# Each command: the module under tau2_a2a.cli whose add_<command>_command adds its parser, and its line in --help.
COMMANDS = {
    "run": ("run", "Run tau2-bench; with --agent a2a_agent, against an A2A agent"),
    "card": ("card", "Fetch, validate and show an agent card"),
    "agent": ("agents", "Serve a reference A2A agent"),
    "demo": ("demo", "Offline: evaluate the bundled oracle over A2A on a few tasks"),
    "ab": ("ab", "Protocol A/B: tau2's llm_agent vs the same model over A2A, side by side"),
    "report": ("report", "Scores with 95%% intervals, comparisons and every trajectory: one offline HTML page, "
                         "its figures as JSON, a summary"),
    "serve": ("serve", "Serve tau2 evaluations as an A2A agent (Google ADK)"),
    "merge": ("merge", "Merge tau2 results files of shards or runs with the same settings into one"),
}


class LazyCommands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """argparse's subcommands, each listed by name and help alone and given its flags (its module imported)
    only when it is chosen."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._unbuilt: set[str] = set()
        for name, (_, help_line) in COMMANDS.items():
            self.add_parser(name, help=help_line)  # a placeholder: --help lists it, `build` replaces it
            self._unbuilt.add(name)

    def build(self, name: str) -> OneLineParser:
        """The parser of the command `name`, with its flags (its module imported the first time)."""
        if name in self._unbuilt:
            self._unbuilt.discard(name)
            del self._name_parser_map[name]
            module = importlib.import_module(f"tau2_a2a.cli.{COMMANDS[name][0]}")
            getattr(module, f"add_{name}_command")(self)
        parser: OneLineParser = self._name_parser_map[name]
        return parser

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        if values:
            self.build(str(values[0]))
        super().__call__(parser, namespace, values, option_string)


def main(argv: list[str] | None = None) -> int:
    """`tau2-a2a ARGV`; without `argv`, this process's own command line (the `tau2-a2a` script, `python -m`)."""
    if argv is None:
        _whole_process[:] = [True]
    argv = sys.argv[1:] if argv is None else argv
    use_bundled_cost_map()  # before any command imports LiteLLM, and for the processes a command starts
    from tau2_a2a.tau2bench.seam.mending import own_this_process

    own_this_process()  # what importing tau2 does to a process is undone here, if a command imports it
    parser = build_parser()
    with imports_for_life():  # parsing imports the chosen command's module
        args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    return run_as_command(lambda: args.func(args), debug=getattr(args, "a2a_debug", False),
                          resume_hint=lambda interrupted: _resume_command(argv, interrupted))


_whole_process: list[bool] = []  # [True] once main() runs this process's own command line


@contextmanager
def imports_for_life() -> Iterator[None]:
    """Inside, modules are imported without the cyclic garbage collector; what they made is then frozen out of
    its scans (`gc.freeze`, as the service's fork server does).

    A command's imports (for a run: tau2, LiteLLM, pydantic's models, some 350,000 objects) live as long as the
    process. Collecting while they are made finds almost nothing, and every full collection after them, the
    interpreter's at exit included, would walk them all again: about 1 s of a run's CPU. Only in the process's
    own command line (main() without argv: the `tau2-a2a` script, `python -m`); a program that calls
    main(argv) keeps its collector as it was.
    """
    if not _whole_process or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def _resume_command(argv: list[str], interrupted: RunInterrupted) -> str:
    """The command that resumes the stopped run (cli/run.py imported only now: a run is what stops)."""
    from tau2_a2a.cli.run import resume_command

    return resume_command(argv, interrupted)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: every command listed, each command's flags added when it is parsed."""
    parser = OneLineParser(prog="tau2-a2a", description=DESCRIPTION, epilog=EPILOG,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_subparsers(dest="command", action=LazyCommands)
    return parser


def parse_run_args(argv: list[str]) -> argparse.Namespace:
    """`tau2-a2a run ARGV` parsed and checked, nothing run: argparse exits 2 on a malformed flag,
    a value no run can use raises ConfigError."""
    from tau2_a2a.cli.run import settings_from_args

    args = build_parser().parse_args(["run", *argv])
    settings_from_args(args)
    return args
