"""`tau2-a2a report RESULTS...`: scores with 95% intervals, comparisons and every trajectory (compare/).

With `--gate`, two runs (base, new): exit 1 when new is worse than base beyond
noise, 0 when it is not, 2 when the runs cannot be compared; the last line says why.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tau2_a2a.cli.common import OneLineParser
from tau2_a2a.runner.outcome import EXIT_FAILED, EXIT_USAGE
from tau2_a2a.terminal import plain

if TYPE_CHECKING:
    from tau2_a2a.compare.stats import GateSettings


def add_report_command(commands: argparse._SubParsersAction[OneLineParser]) -> None:
    report = commands.add_parser("report")
    report.add_argument("results", nargs="+", metavar="RESULTS",
                        help="tau2 results files or folders of them (one per domain); LABEL=PATH names a run. "
                             "Several runs are compared with the first, on the same domains and tasks")
    report.add_argument("--out", type=Path, default=Path("report.html"), help="the HTML page (default: %(default)s)")
    report.add_argument("--json", type=Path, default=None, help="the figures as JSON (default: beside --out, .json)")
    report.add_argument("--seed", type=int, default=0, help="bootstrap and permutation seed (default: %(default)s)")
    report.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default: %(default)s)")
    report.add_argument("--gate", action="store_true",
                        help="judge the second run (new) against the first (base): exit 1 when new is worse beyond "
                             "noise (a paired permutation test over tasks and McNemar's test on task x trial "
                             "pass/fail pairs, each at alpha/2), 0 otherwise; the last line says why")
    report.add_argument("--alpha", type=float, default=0.05,
                        help="with --gate: the chance of failing identical agents (default: %(default)s)")
    report.add_argument("--min-effect", type=float, default=0.0, metavar="POINTS",
                        help="with --gate: the smallest drop in average reward, in points, that fails "
                             "(default: %(default)s: any drop beyond noise)")
    report.add_argument("--unequal-trials", action="store_true",
                        help="with --gate: judge runs with different trials per task (refused otherwise), "
                             "pairing trial i with trial i over the fewer; the verdict says so")
    report.set_defaults(func=report_command)


def report_command(args: argparse.Namespace) -> int:
    from tau2_a2a.compare.output import write
    from tau2_a2a.compare.report import terminal_summary
    from tau2_a2a.compare.runs import ReportError

    try:
        gate = gate_settings(args) if args.gate else None
        report, html_path, json_path = write(args.results, args.out, args.json, args.seed, args.resamples, gate)
    except ReportError as error:
        print(f"error: {plain(str(error))}", file=sys.stderr)
        return EXIT_USAGE
    print(plain(terminal_summary(report), keep_lines=True))  # results files hold what agents said
    print(f"Report: {html_path}\nFigures: {json_path}")
    if report["gate"] is None:
        return 0
    print(plain(report["gate"]["line"]))  # the verdict last: a CI step's `tail -1` reads it
    return EXIT_FAILED if report["gate"]["regression"] else 0


def gate_settings(args: argparse.Namespace) -> GateSettings:
    """The gate's settings from the flags (the min effect as a fraction), or a ReportError saying what to pass."""
    from tau2_a2a.compare.runs import ReportError
    from tau2_a2a.compare.stats import GateSettings

    if not (isinstance(args.alpha, float) and 0 < args.alpha < 1):
        raise ReportError(f"--alpha must be between 0 and 1 (e.g. 0.05), got {args.alpha}")
    if not (0 <= args.min_effect <= 100):
        raise ReportError(f"--min-effect is in points of average reward, from 0 to 100, got {args.min_effect}")
    return GateSettings(args.alpha, args.min_effect / 100, args.unequal_trials)
