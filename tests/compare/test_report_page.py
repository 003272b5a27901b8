"""The report page at each size of run, as headless Chromium draws it: what a reader needs is shown, nothing is
cut off or printed over something else (measured by the boxes the browser lays the charts' text in)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tau2_a2a.compare.output import write
from tau2_a2a.compare.runs import a2a_records
from tau2_a2a.runner.protocol_metrics import conversation
from testbed.browser import Browser

# the charts' titles, in page order
TITLES = ["pass^k with 95% intervals", "pass^1 with 95% intervals", "Reward against cost", "Latency per request kind",
          "Time to first event", "Tokens per simulation", "Bytes per simulation", "Retries and failed requests"]
TAU2_NAME = "20261126_113258_airline_a2a_agent_a2a-tau2-oracle_scripted_user_scripted"
LONG = ["candidate with the new planner prompt and gpt-4.1-mini as the reasoning model",
        "baseline-agent-gpt-4o-2024-08-06-temperature-0-with-retries"]

# Every chart's text elements with their boxes, relative to the chart's SVG.
CHART_TEXTS = """[...document.querySelectorAll('.chart svg')].map((svg) => {
  const box = svg.getBoundingClientRect();
  return {width: box.width, height: box.height, texts: [...svg.querySelectorAll('text')]
    .filter((t) => t.textContent.trim()).map((t) => { const r = t.getBoundingClientRect();
      return {text: t.textContent, left: r.left - box.left, top: r.top - box.top, right: r.right - box.left,
              bottom: r.bottom - box.top}; })};
})"""


def variant(source: Path, target: Path, *, trials: int | None = None, rewards: dict[str, float] | None = None,
            agent_cost: float | None = None, first_event_ms: list[float] | None = None,
            usage: bool = False) -> Path:
    """A copy of a results file with its first `trials` trials, each task's reward set, the agent's cost set, and
    with `first_event_ms` its requests streamed, the first event after these times in turn (and the reply then).
    With `usage`, the agent reported LLM usage with each reply (prompt 1000 + the reply's index, completion 10),
    except the first reply of the last simulation (tau2's greeting, cost 0.0, is no reply)."""
    data = json.loads(source.read_text())
    if usage:
        for number, simulation in enumerate(data["simulations"]):
            replies = [m for m in simulation["messages"] if m["role"] == "assistant" and m["cost"] is None]
            for index, reply in enumerate(replies):
                last = number == len(data["simulations"]) - 1
                reply["usage"] = None if last and index == 0 else {"prompt_tokens": 1000 + index,
                                                                    "completion_tokens": 10}
    if first_event_ms is not None:
        times = iter(first_event_ms * 1000)
        for record in (r for s in data["simulations"] for r in a2a_records(s)):
            record["method"] = "SendStreamingMessage"
            record["first_event_ms"] = next(times)
            record["latency_ms"] = record["first_event_ms"] + 40
    if trials is not None:
        data["info"]["num_trials"] = trials
        data["simulations"] = [s for s in data["simulations"] if s["trial"] < trials]
    for simulation in data["simulations"]:
        if rewards is not None:
            simulation["reward_info"]["reward"] = rewards[simulation["task_id"]]
        if agent_cost is not None:
            conversation(simulation)["cost_usd"].update(agent=agent_cost, total=agent_cost)
    target.write_text(json.dumps(data))
    return target


@pytest.fixture(scope="module")
def single_trial(runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two runs of one trial each, no request retried or failed; each passes the two tasks the other fails: four
    tasks cannot tell them apart."""
    folder = tmp_path_factory.mktemp("single_trial")
    before = variant(runs["oracle"], folder / "before.json", trials=1, rewards={"0": 1, "1": 1, "3": 0, "20": 0})
    after = variant(runs["oracle"], folder / "after.json", trials=1, rewards={"0": 0, "1": 0, "3": 1, "20": 1})
    return write([f"before={before}", f"after={after}"], folder / "report.html", resamples=200)[1]


@pytest.fixture(scope="module")
def long_names(runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three runs of three trials: one under the name tau2 made up, two labelled at length (LABEL=PATH); their
    agents report costs a hundredth of a cent apart, two of them with the same reward."""
    folder = tmp_path_factory.mktemp("long_names")
    named = variant(runs["oracle"], folder / f"{TAU2_NAME}.json", agent_cost=0.0102)
    first = variant(runs["flaky"], folder / "first.json", agent_cost=0.0100)
    second = variant(runs["oracle"], folder / "second.json", agent_cost=0.0101)
    return write([str(named), f"{LONG[0]}={first}", f"{LONG[1]}={second}"], folder / "report.html", resamples=200)[1]


@pytest.fixture(scope="module")
def outlier(runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two streamed runs, one with a 20 s first event among replies in under a second; a free agent that passes
    every task (the frontier's corner: cost 0, reward 1) and one that costs a fifth of a cent."""
    folder = tmp_path_factory.mktemp("outlier")
    free = variant(runs["oracle"], folder / "free.json", agent_cost=0.0, first_event_ms=[20_000.0, *range(200, 900, 50)])
    paid = variant(runs["flaky"], folder / "paid.json", agent_cost=0.002, first_event_ms=list(range(300, 1000, 70)),
                   usage=True)
    return write([f"free={free}", f"paid={paid}"], folder / "report.html", resamples=200)[1]


def opened(browser: Browser, page: Path) -> list[dict[str, Any]]:
    """Open the page; its charts' texts and boxes."""
    browser.open(page.resolve().as_uri())
    browser.wait_for("document.body.dataset.ready === '1'")
    return browser.evaluate(CHART_TEXTS)


def texts(chart: dict[str, Any]) -> list[str]:
    return [t["text"] for t in chart["texts"]]


def titled(charts: list[dict[str, Any]], title: str) -> dict[str, Any]:
    [chart] = [c for c in charts if title in texts(c)]
    return chart


def shown(charts: list[dict[str, Any]]) -> list[str]:
    return [title for title in TITLES if any(title in texts(c) for c in charts)]


def outside(chart: dict[str, Any]) -> list[str]:
    """The texts the chart's SVG cuts off (half a pixel spared for rounding)."""
    return [t["text"] for t in chart["texts"] if t["left"] < -0.5 or t["top"] < -0.5
            or t["right"] > chart["width"] + 0.5 or t["bottom"] > chart["height"] + 0.5]


def overlapping(chart: dict[str, Any]) -> list[tuple[str, str]]:
    """Pairs of texts printed over each other (more than a pixel each way)."""
    boxes = chart["texts"]
    return [(a["text"], b["text"]) for i, a in enumerate(boxes) for b in boxes[i + 1:]
            if min(a["right"], b["right"]) - max(a["left"], b["left"]) > 1
            and min(a["bottom"], b["bottom"]) - max(a["top"], b["top"]) > 1]


def whole(label: str, chart: dict[str, Any]) -> bool:
    """Whether the chart shows the label in full, on one line or wrapped over several."""
    return re.sub(r"\s", "", label) in re.sub(r"\s", "", "".join(texts(chart)))


def test_one_trial_shows_pass_one_and_no_chart_of_nothing(single_trial: Path, browser: Browser) -> None:
    """One trial per task: pass^1 of each run (no pass^k curve of single points), one pass^k convention (both
    agree), and with no request retried or failed a sentence instead of a chart of zeros."""
    charts = opened(browser, single_trial)
    assert shown(charts) == ["pass^1 with 95% intervals", "Latency per request kind", "Tokens per simulation",
                             "Bytes per simulation"]
    pass_one = titled(charts, "pass^1 with 95% intervals")
    assert {"before", "after", "pass^1 (one trial per task)"} <= set(texts(pass_one))
    assert browser.evaluate("[...document.querySelectorAll('table.scores')].map((t) => [t.dataset.convention,"
                            " [...t.rows[0].cells].map((c) => c.innerText)])") == [
        ["combinatorial", ["run", "tasks × trials", "average reward", "pass^1"]]]
    assert browser.evaluate("[...document.querySelectorAll('summary')].filter((s) => s.offsetHeight"
                            " && s.innerText.includes('pass^k convention')).length") == 0
    assert browser.evaluate("[...document.querySelectorAll('p.ci')].filter((p) => p.offsetHeight"
                            " && p.innerText === 'No request was retried and none failed.').length") == 1
    negative = [t for chart in charts for t in texts(chart) if re.fullmatch(r"[-−]\d[\d.,]*", t)]
    assert negative == []
    assert browser.exceptions == [] and [c for c in browser.console if c["type"] == "error"] == []


def test_a_difference_past_what_the_tasks_can_detect_reads_more_than_100(single_trial: Path,
                                                                          browser: Browser) -> None:
    """Four tasks and one trial: the smallest difference a test would find is past 100 points, which no reward
    can move; the page says "> 100", not a number of points no run can reach."""
    opened(browser, single_trial)
    rows = browser.evaluate("[...document.querySelector('p.sentence + table').rows]"
                            ".map((tr) => [...tr.cells].map((c) => c.innerText))")
    assert [(row[0], row[-1]) for row in rows] == [
        ("after − before", "detectable"), ("average reward", "> 100"), ("pass^1 (tau2's estimator)", "> 100")]


def test_a_run_tau2_named_is_shown_by_its_agent_and_legends_hold_whole_names(long_names: Path,
                                                                             browser: Browser) -> None:
    charts = opened(browser, long_names)
    assert browser.evaluate("[...document.querySelectorAll('table.scores')[0].rows].slice(1)"
                            ".map((tr) => tr.cells[0].innerText)") == ["tau2 oracle", *LONG]
    assert "tau2 oracle" in browser.evaluate("document.querySelector('header').innerText")
    tables = browser.evaluate("[...document.querySelectorAll('header, table')].map((e) => e.innerText).join(' ')")
    assert "20261126" not in tables and "scripted_user" not in tables
    assert not [t for chart in charts for t in texts(chart) if "20261126" in t or "scripted_user" in t]
    pass_k = titled(charts, "pass^k with 95% intervals")
    assert outside(pass_k) == []
    assert all(whole(label, pass_k) for label in ["tau2 oracle", *LONG])


def test_long_labels_leave_every_chart_whole_and_its_points_named_apart(long_names: Path, browser: Browser) -> None:
    """Long run labels: each chart's title, axis labels, tick labels and legend lie inside the chart and apart;
    runs of near-equal cost and reward are told apart by colour, named in full below the chart."""
    charts = opened(browser, long_names)
    assert shown(charts) == ["pass^k with 95% intervals", "Reward against cost", "Latency per request kind",
                             "Tokens per simulation", "Bytes per simulation", "Retries and failed requests"]
    for title in ("Tokens per simulation", "Bytes per simulation"):
        assert {title, title.replace("Tokens", "tokens").replace("Bytes", "KiB")} <= set(texts(titled(charts, title)))
    cut = {title: (outside(chart), overlapping(chart)) for chart in charts
           for title in shown([chart]) if outside(chart) or overlapping(chart)}
    assert cut == {}
    frontier = titled(charts, "Reward against cost")
    assert all(whole(label, frontier) for label in ["tau2 oracle", *LONG])


# Per chart: the axes' box, each marker's box, and each text's font size in pixels.
CHART_PARTS = """[...document.querySelectorAll('.chart svg')].map((svg) => {
  const box = (e) => { const r = e.getBoundingClientRect(); return {left: r.left, top: r.top, right: r.right,
    bottom: r.bottom}; };
  return {axes: box(svg.querySelector('#patch_2 path')),
    markers: [...svg.querySelectorAll('[id^=PathCollection] > g > use, [id^=PathCollection] > path')].map(box),
    fonts: [...svg.querySelectorAll('text')].filter((t) => t.textContent.trim())
      .map((t) => [t.textContent, parseFloat(getComputedStyle(t).fontSize)])};
})"""


def ticks(chart: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The chart's number labels, in rows (texts laid out on one line), each row left to right."""
    numbers = [t for t in chart["texts"] if re.fullmatch(r"[-−]?[$]?[\d.,]+[kM]?", t["text"].strip())]
    rows: dict[int, list[dict[str, Any]]] = {}
    for t in numbers:
        rows.setdefault(round(t["top"]), []).append(t)
    return [sorted(row, key=lambda t: t["left"]) for row in rows.values() if len(row) > 1]


def test_axes_read_in_seconds_and_thousands_with_spaced_ticks(outlier: Path, browser: Browser) -> None:
    """A 20 s first event among sub-second ones: the axis reads seconds, and no two tick labels on a row touch
    (they ran together as `10000125001500017500 20000`); every chart's ticks likewise."""
    charts = opened(browser, outlier)
    first_event = titled(charts, "Time to first event")
    assert "time to first event (s)" in texts(first_event)
    assert {"0", "5", "10", "15", "20"} <= set(texts(first_event))
    assert "Latency per request kind" in shown(charts) and "latency (s)" in texts(titled(charts, "Latency per "
                                                                                         "request kind"))
    crowded = {title: [(a["text"], b["text"]) for row in ticks(chart) for a, b in zip(row, row[1:])
                       if b["left"] - a["right"] < 6]
               for chart in charts for title in shown([chart])}
    assert {title: pairs for title, pairs in crowded.items() if pairs} == {}
    cut = {title: (outside(chart), overlapping(chart)) for chart in charts
           for title in shown([chart]) if outside(chart) or overlapping(chart)}
    assert cut == {}


def test_frontier_points_sit_inside_the_chart_and_legends_read_as_the_axes(outlier: Path, browser: Browser) -> None:
    """The free agent that passes everything sits at the corner of the reward-cost plane: its point is drawn
    whole, away from the axes' edges. Legends are set as large as the tick labels."""
    charts = opened(browser, outlier)
    parts = browser.evaluate(CHART_PARTS)
    [frontier] = [p for c, p in zip(charts, parts) if "Reward against cost" in texts(c)]
    axes = frontier["axes"]
    assert len(frontier["markers"]) == 2
    for marker in frontier["markers"]:
        assert marker["left"] - axes["left"] >= 4 and axes["right"] - marker["right"] >= 4
        assert marker["top"] - axes["top"] >= 4 and axes["bottom"] - marker["bottom"] >= 4
    [pass_k] = [p for c, p in zip(charts, parts) if "pass^k with 95% intervals" in texts(c)]
    fonts = dict(pass_k["fonts"])
    assert fonts["free"] >= fonts["1"] and fonts["tau2's estimator"] >= fonts["1"]
    negative = [t for chart in charts for t in texts(chart) if re.fullmatch(r"[-−][$]?\d[\d.,]*", t)]
    assert negative == []


def test_the_time_beside_the_cost_is_per_conversation(outlier: Path, browser: Browser) -> None:
    """The cost table's dollars are per conversation; so are the seconds beside them, and the header says so."""
    opened(browser, outlier)
    report = json.loads(outlier.with_suffix(".json").read_text())
    rows = browser.evaluate("[...document.querySelector('table.cost').rows].map((tr) => [...tr.cells]"
                            ".map((c) => c.innerText))")
    assert rows[0][-1] == "seconds per conversation: agent · user · tools · judge"
    for row, run in zip(rows[1:], report["runs"]):
        cost = run["domains"][0]["cost"]
        per = cost["time_s_per_conversation"]
        assert per == {phase: pytest.approx(total / cost["simulations"], abs=1e-3)
                       for phase, total in cost["time_s_by_phase"].items()}
        assert row[-1] == " · ".join(f"{per[phase]:.2f}" for phase in ("agent", "user", "tools", "judge")) + " s"


def test_message_tokens_and_the_agents_llm_usage_are_named_apart(outlier: Path, browser: Browser) -> None:
    """The tokens of the A2A messages' text are not the agent's LLM usage: each is named for what it counts; the
    usage the agent reported is drawn beside them where every reply reported it, a partial sum is not drawn and
    is said to be a lower bound, and a run that reported none reads "not reported", never 0."""
    charts = opened(browser, outlier)
    report = json.loads(outlier.with_suffix(".json").read_text())
    free, paid = (run["domains"][0]["protocol"] for run in report["runs"])
    assert {s["agent_usage"] is None for s in free["per_simulation"]} == {True}
    assert free["usage_reported"] == {"whole": 0, "partial": 0}
    assert paid["usage_reported"] == {"whole": 11, "partial": 1}
    *whole, partial = paid["per_simulation"]
    assert partial["agent_usage"]["replies_with_usage"] == partial["agent_usage"]["replies"] - 1
    assert all(s["agent_usage"]["input"] == sum(1000 + i for i in range(s["agent_usage"]["replies"]))
               for s in whole)
    tokens = texts(titled(charts, "Tokens per simulation"))
    assert {"free · A2A text sent", "paid · A2A text received", "paid · LLM in (agent-reported)",
            "paid · LLM out (agent-reported)"} <= set(tokens)
    assert not [t for t in tokens if t.startswith("free · LLM")]
    assert browser.evaluate("document.querySelector('p.usage').innerText").endswith(
        "free not reported; paid 11 of 12 (1 more reported it for some replies only, or only in part: a lower bound, "
        "not drawn).")

    index = next(s["index"] for s in whole if s["requests"])
    browser.click(f'td.cell[data-sim="1/airline/{index}"]')
    browser.wait_for(f"document.getElementById('trajectory').dataset.sim === '1/airline/{index}'")
    text = browser.evaluate("document.getElementById('trajectory-body').innerText")
    assert "LLM usage (agent-reported): 1000 tokens in · 10 out" in text
    assert re.search(r"A2A text \d+ tokens sent · \d+ received", text)
    assert not re.search(r"· \d+ tokens in · \d+ out", text)  # the A2A text's tokens were shown as the agent's
    browser.click('td.cell[data-sim="0/airline/0"]')
    browser.wait_for("document.getElementById('trajectory').dataset.sim === '0/airline/0'")
    assert "LLM usage: not reported" in browser.evaluate("document.getElementById('trajectory-body').innerText")
