"""The report as one self-contained HTML file: Jinja2 page, Matplotlib SVG charts (`charts`), trajectories inline.

Nothing is fetched when the page opens: the CSS and the script are in the page,
the charts are inline SVG drawn by Matplotlib (already a tau2 dependency; static
SVG needs no charting script), and the trajectories are one gzip'd JSON
document, base64 in the page, unpacked by the browser's own DecompressionStream
when the page loads. Every text from a trajectory is put on the page with
textContent, never parsed as HTML.
"""

from __future__ import annotations

import base64
import gzip
import re
from collections.abc import Mapping
from typing import Any

import orjson
from jinja2 import Environment, PackageLoader, select_autoescape

from tau2_a2a.client.records import RAW_DATA_KEY, trace_id_of
from tau2_a2a.client.tracing import trace_url
from tau2_a2a.compare import stats
from tau2_a2a.compare.charts import PALETTE, domain_charts
from tau2_a2a.compare.figures import GridCell, Report
from tau2_a2a.compare.runs import Run, a2a_records, failed_components, failure_kind, reward_of

CELL_LABELS = {
    "pass": "pass", "timeout": "timeout", "http": "HTTP", "protocol": "protocol",
    "malformed-reply": "malformed", "auth": "auth", "agent": "agent err", "connection": "conn",
    "user-simulator": "user sim", "skipped": "skipped", "user-stop": "user stop", "agent-stop": "agent stop",
    "max-steps": "max steps", "too-many-errors": "tool errs",
}


def detectable_points(value: float | None) -> str:
    """A smallest detectable difference in points; past 100 (too few tasks) none is: no reward moves that far."""
    if value is None:
        return "–"
    return "> 100" if value >= 1 else f"{value * 100:.1f}"


def render(report: Report, runs: list[Run]) -> str:
    """The whole page."""
    environment = Environment(loader=PackageLoader("tau2_a2a.compare", "."),
                              autoescape=select_autoescape(default=True, default_for_string=True))
    environment.filters["pct"] = lambda v: "–" if v is None else f"{v * 100:.1f}"
    environment.filters["detectable"] = detectable_points
    environment.filters["signed"] = lambda v: f"{v * 100:+.1f}"
    environment.filters["cell_label"] = cell_label
    environment.filters["usd"] = usd
    template = environment.get_template("report.html.j2")
    charts = {domain: domain_charts(report, domain) for domain in report["domains"]}
    return template.render(report=report, charts=charts, conventions=stats.CONVENTIONS,
                           trajectories=trajectories_payload(runs, report["domains"]),
                           palette=PALETTE)


def usd(value: float | None) -> str:
    """A cost on the page: dollars (more digits for the small costs of one conversation), or not reported."""
    if value is None:
        return "not reported"
    return f"${value:.4f}" if value >= 0.01 or value == 0 else f"${value:.6f}"


def cell_label(cell: GridCell) -> str:
    """A grid cell's short text: pass, or the failure kind and the failed reward components."""
    if cell["group"] == "pass":
        return "✓"
    label = CELL_LABELS.get(cell["kind"], cell["kind"])
    if cell["components"]:
        label += " · " + "+".join(c.replace("COMMUNICATE", "COMM").replace("ENV_ASSERTION", "ENV")
                                  .replace("NL_ASSERTION", "NL") for c in cell["components"])
    return label


# -- trajectories ----------------------------------------------------------------------


def trajectories_payload(runs: list[Run], domains: list[str]) -> str:
    """base64 of gzip'd JSON: {"<run>/<domain>/<simulation>": trajectory}."""
    data: dict[str, dict[str, object]] = {}
    for run_index, run in enumerate(runs):
        for domain in domains:
            for index, simulation in enumerate(run.domains[domain].results["simulations"]):
                data[f"{run_index}/{domain}/{index}"] = trajectory(run.label, simulation)
    return base64.b64encode(gzip.compress(orjson.dumps(data), compresslevel=9, mtime=0)).decode("ascii")


def trajectory(label: str, simulation: dict[str, Any]) -> dict[str, object]:
    """What the page shows for one simulation: the messages, the reward breakdown, the A2A records per turn."""
    group, kind = failure_kind(simulation)
    info = simulation.get("reward_info") or {}
    return {
        "run": label, "task": str(simulation["task_id"]), "trial": simulation.get("trial"),
        "id": simulation.get("id"), "seed": simulation.get("seed"),
        "reward": reward_of(simulation), "group": group, "kind": kind,
        "termination": str(simulation.get("termination_reason")), "duration": simulation.get("duration"),
        "components": failed_components(simulation),
        "messages": [message_view(m) for m in simulation["messages"]],
        "breakdown": info.get("reward_breakdown") or {},
        "basis": info.get("reward_basis") or [],
        "checks": reward_checks(info),
        "requests": len(a2a_records(simulation)),
        **trace_view(simulation),
    }


def trace_view(simulation: dict[str, Any]) -> dict[str, str | None]:
    """The simulation's trace (docs/tracing.md): its id, and its link where TAU2_A2A_TRACE_URL gives a template."""
    trace = trace_id_of(simulation["messages"])
    if trace is None or not re.fullmatch(r"[0-9a-f]{32}", trace):
        return {}
    return {"trace": trace, "trace_url": trace_url(trace)}


def message_view(message: dict[str, Any]) -> dict[str, object]:
    view: dict[str, object] = {"role": message.get("role"), "turn": message.get("turn_idx"),
                            "text": message.get("content")}
    if message.get("tool_calls"):
        view["calls"] = [{"name": c.get("name"), "arguments": c.get("arguments")} for c in message["tool_calls"]]
    if message.get("role") == "tool":
        view["error"] = bool(message.get("error"))
    if message.get("role") == "assistant":  # the LLM usage the agent reported for this reply (None: not reported)
        usage = message.get("usage") or {}
        view["usage"] = ({"input": usage.get("prompt_tokens"), "output": usage.get("completion_tokens")}
                         if usage else None)
    raw = (message.get("raw_data") or {}).get(RAW_DATA_KEY) or {}
    if raw.get("requests"):
        view["requests"] = [request_view(r) for r in raw["requests"]]
    if raw.get("error"):
        view["a2a_error"] = raw.get("error")
    return view


def reward_checks(info: dict[str, Any]) -> list[dict[str, str | bool]]:
    """Each check tau2 made, as (component, what, met)."""
    checks: list[dict[str, str | bool]] = []
    db = info.get("db_check")
    if db:
        checks.append({"component": "DB", "what": "database matches the golden actions' database",
                       "met": bool(db.get("db_match"))})
    for check in info.get("action_checks") or []:
        action = check.get("action") or {}
        arguments = orjson.dumps(action.get("arguments")).decode()
        checks.append({"component": "ACTION", "what": f"{action.get('name')}({arguments})",
                       "met": bool(check.get("action_match"))})
    for check in info.get("communicate_checks") or []:
        checks.append({"component": "COMMUNICATE", "what": f"says {check.get('info')!r}",
                       "met": bool(check.get("met"))})
    for check in info.get("env_assertions") or []:
        assertion = check.get("env_assertion") or {}
        checks.append({"component": "ENV_ASSERTION", "what": str(assertion.get("func_name") or assertion),
                       "met": bool(check.get("met"))})
    for check in info.get("nl_assertions") or []:
        checks.append({"component": "NL_ASSERTION", "what": str(check.get("nl_assertion")),
                       "met": bool(check.get("met"))})
    return checks


def request_view(record: Mapping[str, object]) -> dict[str, object]:
    keys = ("turn", "attempt", "method", "transport", "http_status", "grpc_status", "latency_ms", "first_event_ms",
            "events", "request_bytes", "response_bytes", "input_tokens", "output_tokens", "error", "error_message")
    return {k: record.get(k) for k in keys}
