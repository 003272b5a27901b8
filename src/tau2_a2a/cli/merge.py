"""`tau2-a2a merge RESULTS_FILE... --save-to NAME`: shards' results files as one (see apps/merge.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from tau2_a2a.cli.common import OneLineParser


def add_merge_command(commands: argparse._SubParsersAction[OneLineParser]) -> None:
    merge = commands.add_parser(
        "merge",
        description="Merge the tau2 results files of several shards (or runs of the same domain, agent, user "
                    "and settings) into one results file, scored over all of them (pass^k), with one A2A "
                    "metrics file beside it.",
    )
    merge.add_argument("results_files", nargs="+", metavar="RESULTS_FILE")
    merge.add_argument("--save-to", required=True, metavar="NAME", help="Name of the merged results file")
    merge.add_argument("--results-dir", default=None, metavar="DIR",
                       help="Where to write it (default: tau2's data/simulations, as tau2 run)")
    merge.set_defaults(func=merge_command)


def merge_command(args: argparse.Namespace) -> int:
    from tau2_a2a.apps.merge import merge_files  # tau2 scores the merged file
    from tau2_a2a.tau2bench.run.layout import metrics_path

    target = merge_files([Path(p) for p in args.results_files], args.save_to,
                         Path(args.results_dir) if args.results_dir else None)
    print(f"Results: {target}\nProtocol metrics: {metrics_path(target)}")
    return 0
