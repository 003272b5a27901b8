"""Write a report: the figures as JSON and the page as one self-contained HTML file."""

from __future__ import annotations

from pathlib import Path

import orjson

from tau2_a2a.compare import html, stats
from tau2_a2a.compare.figures import Report
from tau2_a2a.compare.report import build
from tau2_a2a.compare.runs import ReportError, parse_runs


def write(arguments: list[str], out: Path, json_out: Path | None = None, seed: int = stats.SEED,
          resamples: int = stats.RESAMPLES,
          gate: stats.GateSettings | None = None) -> tuple[Report, Path, Path]:
    """Read the runs, write the HTML and JSON reports; returns (report, html path, json path). With `gate`, two
    runs, judged as base and new."""
    if gate is not None and len(arguments) != 2:
        raise ReportError(f"--gate compares two runs, base then new; got {len(arguments)}: "
                          "tau2-a2a report BASE.json NEW.json --gate")
    runs = parse_runs(arguments)
    report = build(runs, seed, resamples, gate)
    json_path = json_out or out.with_suffix(".json")
    for folder in {out.parent, json_path.parent}:  # --out and --json may name folders not made yet
        folder.mkdir(parents=True, exist_ok=True)
    json_path.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    out.write_text(html.render(report, runs), encoding="utf-8")
    return report, out, json_path
