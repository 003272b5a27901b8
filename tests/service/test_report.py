"""Each evaluation's 95% intervals and HTML report, on a real service on loopback, against `tau2-a2a report`."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from tau2_a2a.compare.report import build
from tau2_a2a.compare.runs import parse_runs
from tau2_a2a.protocol.hosting import BackgroundServer, free_port
from tau2_a2a.service import summary
from tau2_a2a.service.assessment import parse
from tau2_a2a.service.result import build_result, schema
from tests.support.executors import FailsTask, SlowOnTask, agent_app
from tests.support.service import call_tool, start_service
from tests.support.waiting import until

TOKEN = "report-token-5e1f"


@pytest.fixture(scope="module")
def agent_url() -> Iterator[str]:
    """The oracle, except that every conversation of task 1 ends FAILED: rewards 1, 1 / 0, 0 / 1, 1 / 1, 1."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with BackgroundServer(agent_app(FailsTask("1", "not today"), url), port=port):
        yield url


@pytest.fixture(scope="module")
def evaluated(agent_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, dict[str, Any]]]:
    """A service with a bearer token, and get_evaluation's answer for one finished evaluation (4 tasks x 2 trials)."""
    service = start_service(tmp_path_factory.mktemp("report"), auth_token=TOKEN)
    try:
        arguments = {"domain": "airline", "agent_endpoint": agent_url, "user": "scripted_user",
                     "num_tasks": 4, "num_trials": 2}
        ran = asyncio.run(call_tool(service.url, "run_tau2_evaluation", arguments, token=TOKEN))
        assert ran["status"] == "completed", ran
        record = asyncio.run(call_tool(service.url, "get_evaluation", {"evaluation_id": ran["evaluation_id"]},
                                       token=TOKEN))
        yield service, record
    finally:
        service.stop()


def report_figures(service: Any, evaluation_id: str) -> dict[str, Any]:
    """What `tau2-a2a report` computes from the evaluation's results file."""
    runs = parse_runs([str(Path(service.app.state.tools.manager.results_path(evaluation_id)))])
    return build(runs)["runs"][0]["domains"][0]


def test_intervals_are_those_of_the_report_on_the_same_results_file(evaluated: tuple[Any, dict[str, Any]]) -> None:
    service, record = evaluated
    result = record["result"]
    assert [t["rewards"] for t in result["tasks"]] == [[1.0, 1.0], [0.0, 0.0], [1.0, 1.0], [1.0, 1.0]]
    figures = report_figures(service, record["evaluation_id"])
    expected = {"avg_reward": {"low": round(figures["avg_reward"]["ci"][0], 6),
                               "high": round(figures["avg_reward"]["ci"][1], 6)},
                "pass_hat_k": {k: {"low": round(e["ci"][0], 6), "high": round(e["ci"][1], 6)}
                               for k, e in figures["pass_hat_k"]["combinatorial"].items()},
                "method": "percentile bootstrap over tasks", "resamples": 10_000, "seed": 0}
    assert result["ci95"] == expected
    assert set(expected["pass_hat_k"]) == {"1", "2"}
    ci = {name: f"{b['low']:.3f}-{b['high']:.3f}" for name, b in
          [("reward", expected["avg_reward"])] + [(k, b) for k, b in expected["pass_hat_k"].items()]}
    assert (f"95% intervals (bootstrap over tasks): average reward {ci['reward']}, pass^1 {ci['1']}, "
            f"pass^2 {ci['2']}.\nTerminations:") in summary.text(record)
    assert summary.text(record).endswith(f"\nReport: {record['report_url']}")
    metrics = result["metrics"]
    assert metrics["avg_reward"] == round(figures["avg_reward"]["value"], 6) == 0.75
    bounds = [(result["ci95"]["avg_reward"], metrics["avg_reward"])] + [
        (result["ci95"]["pass_hat_k"][k], metrics["pass_hat_k"][k]) for k in ("1", "2")]
    for interval, value in bounds:
        assert interval["low"] <= value <= interval["high"]
    # Resampling 4 tasks of which one fails: at most one passing task in 5.1% of resamples, none in 0.4%.
    assert (result["ci95"]["avg_reward"]["low"], result["ci95"]["avg_reward"]["high"]) == (0.25, 1.0)


def test_the_result_artifact_carries_the_intervals_as_flat_fields(evaluated: tuple[Any, dict[str, Any]]) -> None:
    service, record = evaluated
    results = summary.read_results(service.app.state.tools.manager.results_path(record["evaluation_id"]))
    assessment = parse({"participants": {"agent": record["request"]["agent_endpoint"]},
                        "config": {"domain": "airline", "user": "scripted_user"}})
    artifact = build_result(record, results, assessment, record["report_url"])
    jsonschema.validate(artifact, schema())
    ci = record["result"]["ci95"]
    assert (artifact["avg_reward_ci95_low"], artifact["avg_reward_ci95_high"]) == (
        ci["avg_reward"]["low"], ci["avg_reward"]["high"])
    for k in ("1", "2"):
        assert (artifact[f"pass_hat_{k}_ci95_low"], artifact[f"pass_hat_{k}_ci95_high"]) == (
            ci["pass_hat_k"][k]["low"], ci["pass_hat_k"][k]["high"])
        assert artifact[f"pass_hat_{k}_ci95_low"] <= artifact[f"pass_hat_{k}"] <= artifact[f"pass_hat_{k}_ci95_high"]
    assert artifact["report_url"] == f"{service.url}/evaluations/{record['evaluation_id']}/report"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**artifact, "pass_hat_1_ci95_low": 1.5}, schema())


def test_the_report_url_answers_the_page_behind_the_bearer_token(evaluated: tuple[Any, dict[str, Any]]) -> None:
    service, record = evaluated
    url = record["report_url"]
    assert url == f"{service.url}/evaluations/{record['evaluation_id']}/report"
    page = httpx.get(url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'class="grid"' in page.text and record["evaluation_id"] in page.text
    cached = service.app.state.tools.manager.results_path(record["evaluation_id"]).with_name("report.html")
    assert cached.read_text(encoding="utf-8") == page.text and oct(cached.stat().st_mode & 0o777) == "0o600"
    again = httpx.get(url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120)
    assert again.text == page.text  # the kept page, not a new one with a new generation date

    refused = httpx.get(url, timeout=30)
    assert refused.status_code == 401 and "Bearer" in refused.json()["error"]
    wrong = httpx.get(url, headers={"Authorization": "Bearer nope"}, timeout=30)
    assert wrong.status_code == 401


def test_an_unknown_evaluation_has_no_report(evaluated: tuple[Any, dict[str, Any]]) -> None:
    service, _ = evaluated
    headers = {"Authorization": f"Bearer {TOKEN}"}
    missing = httpx.get(f"{service.url}/evaluations/ev-000000000000/report", headers=headers, timeout=30)
    assert missing.status_code == 404
    assert missing.json() == {"error": "No evaluation ev-000000000000 in this service. "
                                       "Use list_evaluations to see the known ones."}
    malformed = httpx.get(f"{service.url}/evaluations/..service.sqlite/report", headers=headers, timeout=30)
    assert malformed.status_code == 404 and "ids look like ev-0123456789ab" in malformed.json()["error"]


def test_a_running_evaluation_has_a_report_once_a_simulation_finished(
        evaluated: tuple[Any, dict[str, Any]]) -> None:
    service, _ = evaluated
    headers = {"Authorization": f"Bearer {TOKEN}"}
    slow = SlowOnTask("1", hang=120)
    port = free_port()
    agent = f"http://127.0.0.1:{port}"
    tools = service.app.state.tools
    record: dict[str, Any] = {}
    with BackgroundServer(agent_app(slow, agent), port=port):
        try:
            record = tools.call("run_tau2_evaluation", {
                "domain": "airline", "agent_endpoint": agent, "user": "scripted_user", "task_ids": ["0", "1"],
                "max_concurrency": 1})
            url = f"{service.url}/evaluations/{record['evaluation_id']}/report"
            first = httpx.get(url, headers=headers, timeout=30)
            assert first.status_code == 404
            assert first.json()["error"] in {f"Evaluation {record['evaluation_id']} has no finished simulation yet "
                                             f"({status}); its report exists once one has finished."
                                             for status in ("queued", "running")}

            async def done() -> int:
                return tools.get_evaluation(record["evaluation_id"])["progress"]["simulations_done"]

            asyncio.run(until(done, lambda n: n == 1, "the first simulation"))
            page = httpx.get(url, headers=headers, timeout=120)
            assert page.status_code == 200 and 'class="grid"' in page.text
            # Built from what finished so far, and not kept: the evaluation goes on.
            assert not tools.manager.results_path(record["evaluation_id"]).with_name("report.html").exists()
        finally:
            slow.release()
            if record:
                tools.manager.wait(record["evaluation_id"], timeout=120)
