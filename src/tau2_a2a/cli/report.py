"""`tau2-a2a report RESULTS...`: scores with 95% intervals, comparisons and every trajectory (compare/)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tau2_a2a.runner.outcome import EXIT_USAGE
from tau2_a2a.terminal import plain


def add_report_command(commands: Any) -> None:
    report = commands.add_parser("report", help="Scores with 95%% intervals, comparisons and every trajectory: "
                                 "one offline HTML page, its figures as JSON, a summary")
    report.add_argument("results", nargs="+", metavar="RESULTS",
                        help="tau2 results files or folders of them (one per domain); LABEL=PATH names a run. "
                             "Several runs are compared with the first, on the same domains and tasks")
    report.add_argument("--out", type=Path, default=Path("report.html"), help="the HTML page (default: %(default)s)")
    report.add_argument("--json", type=Path, default=None, help="the figures as JSON (default: beside --out, .json)")
    report.add_argument("--seed", type=int, default=0, help="bootstrap and permutation seed (default: %(default)s)")
    report.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default: %(default)s)")
    report.set_defaults(func=report_command)


def report_command(args: argparse.Namespace) -> int:
    from tau2_a2a.compare.output import write
    from tau2_a2a.compare.report import terminal_summary
    from tau2_a2a.compare.runs import ReportError

    try:
        report, html_path, json_path = write(args.results, args.out, args.json, args.seed, args.resamples)
    except ReportError as error:
        print(f"error: {plain(str(error))}", file=sys.stderr)
        return EXIT_USAGE
    print(plain(terminal_summary(report), keep_lines=True))  # results files hold what agents said
    print(f"Report: {html_path}\nFigures: {json_path}")
    return 0
