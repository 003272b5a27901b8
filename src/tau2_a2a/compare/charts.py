"""The report's charts: Matplotlib figures saved as static SVG, to be inlined in the page.

Text stays text (`svg.fonttype` none) and the file carries no date, so the same
report draws the same SVG. Every value axis reads in units a person says aloud
(seconds past a second, thousands as "k") with a few well-spaced ticks.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from tau2_a2a.compare import stats
from tau2_a2a.compare.figures import DomainFigures, Frontier, ProtocolFigures, Report

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

STREAMED = "SendStreamingMessage"
PALETTE = ["#3465a4", "#cc6600", "#4e9a06", "#75507b", "#c4a000", "#06989a"]


def domain_charts(report: Report, domain: str) -> dict[str, str]:
    """SVG charts of one domain, every run side by side; a chart only where it shows something."""
    per_run: list[tuple[str, DomainFigures]] = [
        (run["label"], next(d for d in run["domains"] if d["domain"] == domain)) for run in report["runs"]]
    charts: dict[str, str] = {}
    if max(figures["max_k"] for _, figures in per_run) > 1:
        charts["pass_k"] = pass_k_chart(per_run)
    elif len(per_run) > 1:
        charts["pass_k"] = pass_one_chart(per_run)
    frontier = next((f for f in report.get("frontiers") or [] if f["domain"] == domain), None)
    if frontier and len(frontier["points"]) > 1:
        charts["frontier"] = frontier_chart(frontier, [label for label, _ in per_run])
    if any(figures["protocol"]["a2a"] for _, figures in per_run):
        charts["latency"] = latency_chart(per_run)
        if any(STREAMED in figures["protocol"]["latency_ms_by_method"] for _, figures in per_run):
            charts["first_event"] = first_event_chart(per_run)  # a blocking reply's first event is the reply
        charts["tokens"], charts["bytes"] = volume_charts(per_run)
        if any(any(_retries(figures["protocol"])) for _, figures in per_run):
            charts["retries"] = retries_chart(per_run)
    return charts


def _retries(protocol: ProtocolFigures) -> list[int]:
    """Retried requests, failed requests and simulations with retries."""
    return [protocol["retried_requests"], sum(s["failed_requests"] for s in protocol["per_simulation"]),
            protocol["simulations_with_retries"]]


def _wrapped(label: str, width: int = 34) -> str:
    """A legend or axis label on lines of at most `width` characters, so none is cut off."""
    return "\n".join(textwrap.wrap(label, width)) or label


def _figure(width: float = 5.2, height: float = 3.0) -> Figure:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    return figure


def _svg(figure: Figure) -> str:
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "tau2-a2a-report",
                                "font.family": "sans-serif", "font.size": 9}):
        figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    text = buffer.getvalue()
    return text[text.index("<svg"):]


def _run_legend(figure: Figure, runs: list[tuple[int, str]], extra: list[Line2D] | None = None,
                **style: Any) -> None:
    """Below the chart, each run's colour and its name in full (wrapped), then the `extra` entries, as large as
    the tick labels; two columns when there are several runs."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=PALETTE[index % len(PALETTE)], label=_wrapped(label, _legend_width(len(runs))),
                      **style) for index, label in runs]
    figure.legend(handles=handles + (extra or []), loc="outside lower center", ncols=1 if len(runs) == 1 else 2,
                  fontsize="medium", handlelength=3, frameon=False)


def _compact(value: float, _position: object = None) -> str:
    """A tick label: thousands as "k", millions as "M", and no negative tick (no figure here is below zero)."""
    if value < 0:
        return ""
    for size, suffix in ((1e6, "M"), (1e4, "k")):
        if value >= size:
            return f"{value / size:g}{suffix}"
    return f"{value:g}"


def _dollars(value: float, _position: object = None) -> str:
    return "" if value < 0 else f"${value:g}"


def _readable(axis: Any, formatter: Callable[[float, object], str] = _compact) -> None:
    """A value axis with a few round ticks (1, 2, 2.5 or 5 times a power of ten) and short labels, so that long
    numbers never run into each other whatever the chart's width."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    axis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10], min_n_ticks=3))
    axis.set_major_formatter(FuncFormatter(formatter))


def _milliseconds(groups: list[tuple[str, list[float], str]], what: str) -> tuple[list[tuple[str, list[float], str]],
                                                                                  str]:
    """Times in ms as the axis reads best: seconds once any reaches a second; the axis label names the unit."""
    if max((v for _, values, _ in groups for v in values), default=0.0) < 1000:
        return groups, f"{what} (ms)"
    return [(label, [v / 1000 for v in values], colour) for label, values, colour in groups], f"{what} (s)"


def _legend_width(runs: int) -> int:
    """Characters per line of a run's name in the legend: two columns of names fit the chart's width."""
    return 26 if runs > 1 else 60


def _legend_height(labels: list[str], extra: int = 0) -> float:
    """Inches the legend below a chart takes (its names wrapped, in one or two columns), so that the plot keeps
    its height however long the names."""
    lines = sum(len(_wrapped(label, _legend_width(len(labels))).splitlines()) for label in labels) + extra
    return 0.2 * (lines if len(labels) == 1 else (lines + 1) // 2) + 0.15


def _style(axes: Axes, title: str) -> None:
    axes.set_title(title, fontsize=10, loc="left")
    axes.spines[["top", "right"]].set_visible(False)
    axes.grid(axis="y", color="#dddddd", linewidth=0.6)
    axes.set_axisbelow(True)


def pass_k_chart(per_run: list[tuple[str, DomainFigures]]) -> str:
    """pass^k for k = 1..trials, both conventions, with 95% intervals: colour names the run, line style the
    convention."""
    from matplotlib.lines import Line2D

    figure = _figure(height=2.8 + _legend_height([label for label, _ in per_run], extra=2))
    axes = figure.add_subplot()
    styles: tuple[tuple[str, Literal["-", "--"], float, str], ...] = (
        (stats.COMBINATORIAL, "-", -0.06, "tau2's estimator"), (stats.FIRST_K, "--", 0.06, "first k trials"))
    for index, (_, figures) in enumerate(per_run):
        colour = PALETTE[index % len(PALETTE)]
        for convention, style, offset, _ in styles:
            by_k = figures["pass_hat_k"][convention]
            ks = [int(k) + offset + index * 0.02 for k in by_k]
            values = [e["value"] for e in by_k.values()]
            errors = [[e["value"] - e["ci"][0] for e in by_k.values()],
                      [e["ci"][1] - e["value"] for e in by_k.values()]]
            axes.errorbar(ks, values, yerr=errors, fmt="o" + style, color=colour, capsize=3, markersize=4,
                          linewidth=1.2)
    axes.set_xlabel("k")
    axes.set_ylabel("pass^k")
    axes.set_ylim(-0.02, 1.02)
    max_k = max((figures["max_k"] for _, figures in per_run), default=1)
    axes.set_xticks(range(1, max_k + 1))
    _style(axes, "pass^k with 95% intervals")
    conventions = [Line2D([], [], color="#555555", linestyle=style, linewidth=1.2, label=name)
                   for _, style, _, name in styles]
    _run_legend(figure, [(i, label) for i, (label, _) in enumerate(per_run)], conventions, marker="o", linewidth=1.2)
    return _svg(figure)


def pass_one_chart(per_run: list[tuple[str, DomainFigures]]) -> str:
    """pass^1 of each run with its 95% interval (one trial per task: there is no curve over k to draw)."""
    figure = _figure(height=max(1.6, 0.45 * len(per_run) + 1.1))
    axes = figure.add_subplot()
    for index, (_, figures) in enumerate(per_run):
        estimate = figures["pass_hat_k"][stats.COMBINATORIAL]["1"]
        axes.errorbar([estimate["value"]], [index], xerr=[[estimate["value"] - estimate["ci"][0]],
                                                        [estimate["ci"][1] - estimate["value"]]],
                      fmt="o", color=PALETTE[index % len(PALETTE)], capsize=3, markersize=5)
    axes.set_yticks(range(len(per_run)), [_wrapped(label, 28) for label, _ in per_run])
    axes.set_ylim(len(per_run) - 0.5, -0.5)  # the first run on top, as in the tables
    axes.set_xlim(-0.02, 1.02)
    axes.set_xlabel("pass^1 (one trial per task)")
    _style(axes, "pass^1 with 95% intervals")
    axes.grid(axis="x", color="#dddddd", linewidth=0.6)
    return _svg(figure)


def frontier_chart(frontier: Frontier, labels: list[str]) -> str:
    """Average reward against the agent's cost per conversation, the frontier joined by a line. The runs are
    told apart by colour, named in the legend: runs of about the same cost and reward share a spot, where names
    beside the points would print over each other."""
    figure = _figure(height=3.0 + _legend_height([p["label"] for p in frontier["points"]]))
    axes = figure.add_subplot()
    for point in frontier["points"]:
        index = labels.index(point["label"])
        axes.scatter([point["agent_cost"]], [point["avg_reward"]], color=PALETTE[index % len(PALETTE)], s=36,
                     zorder=3, edgecolors="black" if point["on_frontier"] else "none", linewidths=0.8)
    best = sorted((p for p in frontier["points"] if p["on_frontier"]), key=lambda p: p["agent_cost"])
    if len(best) > 1:
        axes.plot([p["agent_cost"] for p in best], [p["avg_reward"] for p in best], color="#555555",
                  linewidth=1.0, linestyle=":", zorder=2)
    axes.set_xlabel("agent cost per conversation (USD)")
    axes.set_ylabel("average reward")
    axes.set_ylim(-0.08, 1.08)  # a point at reward 0 or 1 drawn whole, off the edge
    costs = [p["agent_cost"] for p in frontier["points"]]
    right = max(costs) * 1.1 or 0.001
    axes.set_xlim(min(0.0, min(costs)) - 0.06 * right, right)  # zero in sight, a free agent's point off the edge
    _readable(axes.xaxis, _dollars)
    _style(axes, "Reward against cost")
    _run_legend(figure, [(labels.index(p["label"]), p["label"]) for p in frontier["points"]], marker="o",
                linestyle="none", markersize=6)
    return _svg(figure)


def _boxes(axes: Axes, groups: list[tuple[str, list[float], str]]) -> None:
    groups = [g for g in groups if g[1]]
    if not groups:
        axes.text(0.5, 0.5, "no data", ha="center", va="center", transform=axes.transAxes)
        return
    parts = axes.boxplot([g[1] for g in groups], orientation="horizontal", patch_artist=True, widths=0.6,
                         tick_labels=[_wrapped(g[0], 40) for g in groups],
                         flierprops={"markersize": 3, "markeredgecolor": "#888888"},
                         medianprops={"color": "black"})
    for patch, (_, _, colour) in zip(parts["boxes"], groups):
        patch.set_facecolor(colour)
        patch.set_alpha(0.55)
    axes.invert_yaxis()  # the first run on top, as in the tables


def latency_chart(per_run: list[tuple[str, DomainFigures]]) -> str:
    """Latency of each request kind (SendMessage, GetTask, ...), per run."""
    groups = []
    for index, (label, figures) in enumerate(per_run):
        for method, summary in figures["protocol"]["latency_ms_by_method"].items():
            groups.append((f"{label} · {method}" if len(per_run) > 1 else method, summary["values"],
                           PALETTE[index % len(PALETTE)]))
    return _box_chart(*_milliseconds(groups, "latency"), "Latency per request kind")


def first_event_chart(per_run: list[tuple[str, DomainFigures]]) -> str:
    """Time from the request to the first A2A event (equal to the latency when the reply is not streamed)."""
    groups = [(label, figures["protocol"]["first_event_ms"]["values"], PALETTE[i % len(PALETTE)])
              for i, (label, figures) in enumerate(per_run)]
    return _box_chart(*_milliseconds(groups, "time to first event"), "Time to first event")


def _box_chart(groups: list[tuple[str, list[float], str]], xlabel: str, title: str) -> str:
    """One horizontal box per group, one row each."""
    figure = _figure(height=max(1.6, 0.45 * len(groups) + 1.0))
    axes = figure.add_subplot()
    _boxes(axes, groups)
    _readable(axes.xaxis)
    axes.set_xlabel(xlabel)
    _style(axes, title)
    axes.grid(axis="x", color="#dddddd", linewidth=0.6)
    return _svg(figure)


def volume_charts(per_run: list[tuple[str, DomainFigures]]) -> tuple[str, str]:
    """Tokens, and bytes, per simulation, each way, per run: two charts, each as wide as the others, so that long
    run names leave room for the boxes, the title and the axis label. The tokens of the A2A messages' text, and
    beside them the LLM usage the agent reported, for the simulations whose every reply reported it (a partial
    sum would look whole)."""
    token_groups: list[tuple[str, list[float], str]] = []
    byte_groups: list[tuple[str, list[float], str]] = []
    for index, (label, figures) in enumerate(per_run):
        sims = figures["protocol"]["per_simulation"]
        colour = PALETTE[index % len(PALETTE)]
        prefix = f"{label} · " if len(per_run) > 1 else ""
        whole = [u for u in (s["agent_usage"] for s in sims)
                 if u and u["replies_with_usage"] == u["replies"] and not u["replies_with_partial_usage"]]
        token_groups += [(f"{prefix}A2A text sent", [s["input_tokens"] for s in sims], colour),
                         (f"{prefix}A2A text received", [s["output_tokens"] for s in sims], colour),
                         (f"{prefix}LLM in (agent-reported)", [u["input"] for u in whole], colour),
                         (f"{prefix}LLM out (agent-reported)", [u["output"] for u in whole], colour)]
        byte_groups += [(f"{prefix}sent", [s["request_bytes"] / 1024 for s in sims], colour),
                        (f"{prefix}received", [s["response_bytes"] / 1024 for s in sims], colour)]
    return (_box_chart(token_groups, "tokens per simulation", "Tokens per simulation"),
            _box_chart(byte_groups, "KiB per simulation", "Bytes per simulation"))


def retries_chart(per_run: list[tuple[str, DomainFigures]]) -> str:
    """Retried requests, failed requests and simulations with retries, per run (drawn only when there are some)."""
    from matplotlib.ticker import MaxNLocator

    figure = _figure(height=2.4 + (_legend_height([label for label, _ in per_run]) if len(per_run) > 1 else 0))
    axes = figure.add_subplot()
    names = ["retried requests", "failed requests", "simulations with retries"]
    width = 0.8 / max(len(per_run), 1)
    for index, (_, figures) in enumerate(per_run):
        values = _retries(figures["protocol"])
        positions = [i + (index - (len(per_run) - 1) / 2) * width for i in range(len(names))]
        bars = axes.bar(positions, values, width=width * 0.9, color=PALETTE[index % len(PALETTE)])
        axes.bar_label(bars, fontsize=8)
    axes.set_xticks(range(len(names)), names)
    axes.set_ylim(bottom=0)
    locator = axes.yaxis.get_major_locator()  # matplotlib's default, AutoLocator, is a MaxNLocator
    if isinstance(locator, MaxNLocator):
        locator.set_params(integer=True)
    _style(axes, "Retries and failed requests")
    if len(per_run) > 1:
        _run_legend(figure, [(i, label) for i, (label, _) in enumerate(per_run)], marker="s", linestyle="none",
                    markersize=7)
    return _svg(figure)
