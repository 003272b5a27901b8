"""On upstream tau2-bench v1.0.1: the 40 retail tasks scored in part by an LLM judge of natural-language assertions.

Upstream's judge is LiteLLM's `gpt-4.1-2025-04-14` with no api_base of its own
(tau2.config), so it goes where LiteLLM sends OpenAI models: OPENAI_BASE_URL or
OPENAI_API_BASE, with OPENAI_API_KEY. Here that is testbed/standin_llm.py on
loopback, whose verdicts are a pure function of the prompt (docs/judge.md).
The oracle over A2A and the native oracle must get the same verdicts, rewards
and trajectories; an agent that does not say what an assertion asks for scores
0 on the judge alone; an unreachable judge leaves its simulations unscored as
upstream's infrastructure errors, said in one line and in `tau2-a2a report`, and a second run scores them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from a2a.helpers import new_text_part

from tau2_a2a.client.pricing import price_tokens
from tau2_a2a.compare.output import write
from tau2_a2a.compare.report import schema
from tau2_a2a.protocol.hosting import a2a_app, free_port
from tau2_a2a.reference.oracle_agent import oracle_card
from tau2_a2a.tau2bench.participants.oracle_script import judged_by_llm, oracle_steps
from tau2_a2a.tau2bench.run.fidelity import trajectory_differences
from tau2_a2a.tau2bench.run.layout import metrics_path, results_path
from tau2_a2a.tau2bench.seam.distribution import DISTRIBUTION, UPSTREAM, Results, compute_metrics, load_tasks
from tau2_a2a.tau2bench.speed.environments import VERIFY_ENV, environments
from testbed.standin_llm import StandinLLM, judge_prompt
from tests.support.cli import run_cli
from tests.support.executors import ReplyOnTask
from tests.support.runs import Serve, run_a2a, run_native_oracle

pytestmark = [
    pytest.mark.upstream,
    pytest.mark.skipif(DISTRIBUTION != UPSTREAM, reason=f"needs upstream tau2-bench; {DISTRIBUTION} is installed"),
]

JUDGE_MODEL = "gpt-4.1-2025-04-14"  # upstream's tau2.config.DEFAULT_LLM_NL_ASSERTIONS
# (assertion, met, the stand-in's reasoning) per task: figures, words told, and actions taken
EXPECTED_CHECKS = {
    "2": [("Agent should tell the user that there are 10 t-shirt options available.", True, "The agent said 10.")],
    "24": [("Agent should tell the user the materials of the two t-shirts are polyester and cotton.", True,
            "The agent told the user 'cotton'.")],
    "36": [("Agent should tell the user the most expensive item in the order is the camera.", True,
            "The agent told the user 'camera'."),
           ("Agent should tell the user the camera costs $481.50.", True, "The agent said 481.5.")],
    "43": [("Agent should tell the user the tracking number is 840887978435.", True,
            "The agent said 840887978435."),
           ("Agent should tell the user the order was shipped to 943 Maple Drive, Suite 356, Chicago, IL 60621.",
            True, "The agent said 356, 943, 60621."),
           ("Agent should tell the user the tablet storage is 64GB.", True, "The agent said 64.")],
    "59": [("Agent should tell the user the refund for the cancelled desk lamp order is $164.28.", True,
            "The agent said 164.28."),
           ("Agent should tell the user the total price of order #W2702727 is $625.60.", True,
            "The agent said 625.6.")],
    "113": [("Agent should cancel all pending orders", True,
             "The agent acted with its tools and then told the user.")],
}
SAMPLE = sorted(EXPECTED_CHECKS, key=int)
UNSCORED = re.compile(r"1 of 2 simulations were not scored \(tau2 ended them as infrastructure errors and leaves "
                      r"them out of its metrics: task 2 trial 0\): tau2's LLM judge of natural-language assertions "
                      r"failed with litellm\.InternalServerError: .+ - Connection error; point LiteLLM at the judge "
                      r"with OPENAI_API_KEY, and OPENAI_API_BASE for another endpoint \(see docs/judge\.md\); "
                      r"running the same command again retries them\.")


@pytest.fixture
def judge(serve: Serve, monkeypatch: pytest.MonkeyPatch) -> StandinLLM:
    """The stand-in as the judge's provider, reached the way an operator points LiteLLM at an endpoint."""
    llm = StandinLLM.serve(serve)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)  # LiteLLM reads it before OPENAI_API_BASE
    monkeypatch.setenv("OPENAI_API_BASE", llm.api_base)
    monkeypatch.setenv("OPENAI_API_KEY", "standin-judge-key")
    return llm


def checks(simulation: Any) -> list[tuple[str, bool, str]]:
    return [(c.nl_assertion, c.met, c.justification) for c in simulation.reward_info.nl_assertions or []]


def judged_outcomes(body: dict[str, Any]) -> str:
    """The expected outcomes a judge request asks about, as upstream writes them into the prompt."""
    [user] = [m for m in body["messages"] if m["role"] == "user"]
    return user["content"].rpartition("expectedOutcomes:")[2].strip()


def test_the_sample_needs_the_judge() -> None:
    tasks = {task.id: task for task in load_tasks("retail")}
    judged = sorted((task_id for task_id, task in tasks.items() if judged_by_llm(task)), key=int)
    assert len(judged) == 40
    assert set(SAMPLE) <= set(judged)
    for task_id, expected in EXPECTED_CHECKS.items():
        assert tasks[task_id].evaluation_criteria.nl_assertions == [assertion for assertion, _, _ in expected]


def test_oracle_over_a2a_gets_upstream_judges_verdicts(judge: StandinLLM, oracle_url: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VERIFY_ENV, "1")
    with environments(cached=False):
        native = run_native_oracle(tmp_path / "native", "retail", task_ids=SAMPLE, num_trials=2, max_concurrency=3)
    over_a2a = run_a2a(oracle_url, tmp_path / "a2a", "retail", task_ids=SAMPLE, num_trials=2,
                       max_concurrency=3).results

    expected = {(task_id, trial): 1.0 for task_id in SAMPLE for trial in (0, 1)}
    for run in (native, over_a2a):
        assert {(s.task_id, s.trial): s.reward_info.reward for s in run.simulations} == expected
        for simulation in run.simulations:
            assert checks(simulation) == EXPECTED_CHECKS[simulation.task_id]
            assert {str(k): v for k, v in simulation.reward_info.reward_breakdown.items()} == {
                "RewardType.DB": 1.0, "RewardType.NL_ASSERTION": 1.0}
    assert trajectory_differences(over_a2a, native) == []

    asked = judge.judge_requests()
    assert len(asked) == len(judge.requests) == 2 * 2 * len(SAMPLE)  # both arms, two trials, one request each
    assert {body["model"] for body in asked} == {JUDGE_MODEL}
    assert {body.get("temperature") for body in asked} == {0.0}
    assert sorted(judged_outcomes(body) for body in asked) == sorted(
        str([assertion for assertion, _, _ in EXPECTED_CHECKS[task_id]]) for task_id in SAMPLE for _ in range(4))


def test_an_agent_that_does_not_say_the_figure_scores_0_on_the_judge_alone(judge: StandinLLM, serve: Serve,
                                                                          tmp_path: Path) -> None:
    """The oracle with its closing words for task 2 replaced: the database is right, the judge says no."""
    closing = len(oracle_steps("retail", "2")) - 1
    agent = ReplyOnTask("2", [new_text_part("Done. Anything else?")], at=closing)
    url = serve(lambda url: a2a_app(agent, oracle_card(url))).url
    results = run_a2a(url, tmp_path, "retail", task_ids=["2", "24"]).results

    by_task = {s.task_id: s for s in results.simulations}
    quiet = by_task["2"].reward_info
    assert quiet.reward == 0.0
    assert {str(k): v for k, v in quiet.reward_breakdown.items()} == {"RewardType.DB": 1.0,
                                                                       "RewardType.NL_ASSERTION": 0.0}
    assert checks(by_task["2"]) == [("Agent should tell the user that there are 10 t-shirt options available.",
                                     False, "The agent never said 10.")]
    assert by_task["24"].reward_info.reward == 1.0
    assert checks(by_task["24"]) == EXPECTED_CHECKS["24"]
    assert len(judge.judge_requests()) == 2


def test_an_unreachable_judge_leaves_its_simulations_unscored_and_a_rerun_scores_them(
        serve: Serve, oracle_url: str, tmp_path: Path) -> None:
    """Upstream retries the simulation, then records an infrastructure error (no reward, left out of pass^k);
    tau2-a2a says so in one line, with no traceback, and the same command run again retries only those."""
    command = ["run", "retail", "--agent", "a2a_agent", "--a2a-endpoint", oracle_url, "--user", "scripted_user",
               "--task-ids", "2", "0", "--max-retries", "0", "--results-dir", str(tmp_path), "--save-to", "judged"]
    dead = {"OPENAI_API_BASE": f"http://127.0.0.1:{free_port()}/v1", "OPENAI_API_KEY": "standin-judge-key",
            "OPENAI_BASE_URL": ""}
    process = run_cli(command, env=dead, cwd=tmp_path)
    _, stderr = process.communicate(timeout=300)

    assert process.returncode == 1, stderr[-3000:]  # the run is incomplete
    assert "Traceback" not in stderr
    assert UNSCORED.fullmatch(stderr.strip().splitlines()[-1]), stderr[-3000:]
    path = results_path("judged", tmp_path)
    first = {s.task_id: s for s in Results.load(path).simulations}
    assert first["2"].termination_reason.value == "infrastructure_error"
    assert first["2"].reward_info is None and first["2"].messages == []
    assert first["2"].info["error_type"] == "InternalServerError"
    assert first["0"].reward_info.reward == 1.0  # no NL assertion: scored without the judge
    metrics = json.loads(metrics_path(results_path("judged", tmp_path)).read_text())
    assert {s["task_id"]: s["termination_reason"] for s in metrics["simulations"]} == {
        "2": "infrastructure_error", "0": "user_stop"}
    report, _, _ = write([str(path)], tmp_path / "report.html", resamples=100)
    jsonschema.validate(report, schema())
    [domain] = report["runs"][0]["domains"]
    assert {row["task_id"]: [(c["group"], c["kind"]) for c in row["cells"]] for row in domain["grid"]} == {
        "0": [("pass", "pass")], "2": [("infrastructure", "tau2")]}
    # the unscored simulation is left out of the figures, as tau2 leaves it out of its metrics
    assert domain["avg_reward"]["value"] == compute_metrics(Results.load(path)).avg_reward == 1.0

    judge = StandinLLM.serve(serve)
    process = run_cli(command, env={**dead, "OPENAI_API_BASE": judge.api_base}, cwd=tmp_path)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stderr and "not scored" not in stderr
    again = {s.task_id: s for s in Results.load(path).simulations}
    assert sorted(again) == ["0", "2"]
    assert again["0"].id == first["0"].id  # kept, not run again
    assert again["2"].reward_info.reward == 1.0
    assert checks(again["2"]) == EXPECTED_CHECKS["2"]
    assert len(judge.judge_requests()) == 1


def test_the_judges_calls_are_spans_of_each_simulations_evaluation(traced: Any, judge: StandinLLM, oracle_url: str,
                                                                   tmp_path: Path) -> None:
    """Traced, each simulation's trace holds its evaluation and, under it, the judge's LLM call (its model and
    tokens, OpenTelemetry's GenAI conventions), and never the judge's API key."""
    from tau2_a2a.client.records import trace_id_of

    tasks = SAMPLE[:2]
    outcome = run_a2a(oracle_url, tmp_path, "retail", task_ids=tasks)
    assert {s.task_id: s.reward_info.reward for s in outcome.results.simulations} == dict.fromkeys(tasks, 1.0)
    for simulation in outcome.results.simulations:
        trace = trace_id_of(simulation.messages)
        # LiteLLM reports a call from a thread of its own: its span may come after the simulation's
        spans = traced.wait_for(lambda _: (lambda found: found if {"simulation", "chat"} <= {
            s.name.split(" ")[0] for s in found} else None)(traced.trace(trace)))
        [evaluation] = [s for s in spans if s.name == "evaluation"]
        [call] = [s for s in spans if s.name.startswith("chat ")]
        assert call.parent_id == evaluation.span_id and evaluation.attributes["tau2.reward"] == 1.0
        assert call.attributes["tau2.llm.caller"] == "judge"
        assert call.attributes["gen_ai.request.model"] == JUDGE_MODEL
        assert call.attributes["gen_ai.usage.input_tokens"] > 0 and call.attributes["gen_ai.usage.output_tokens"] > 0
        assert all(b"standin-judge-key" not in s.raw.SerializeToString() for s in spans)


def test_the_judges_cost_is_recorded_with_each_conversation(judge: StandinLLM, oracle_url: str,
                                                            tmp_path: Path) -> None:
    """Upstream records the judge's cost nowhere; tau2-a2a counts its calls where upstream's judge makes them, and
    each simulation keeps them: the stand-in's tokens, priced for the judge's model. Task 0 has no assertion: no
    call, a judge that cost nothing."""
    outcome = run_a2a(oracle_url, tmp_path, "retail", task_ids=["0", "2", "24"])

    calls = {}  # task -> the usage the stand-in returned to its judge request
    for body, usage in zip(judge.requests, judge.usages):
        if judge_prompt(body["messages"]) is not None:
            [task] = [t for t in ("2", "24") if judged_outcomes(body) == str([a for a, _, _ in EXPECTED_CHECKS[t]])]
            calls[task] = usage
    assert sorted(calls) == ["2", "24"]
    metrics = {s["task_id"]: s for s in outcome.metrics["simulations"]}
    for simulation in outcome.results.simulations:
        kept = simulation.info["tau2_a2a_conversation"]
        if simulation.task_id == "0":
            assert kept["judge"] == {"calls": 0, "model": None, "input_tokens": 0, "output_tokens": 0}
            assert kept["cost_usd"]["judge"] == 0.0 and kept["time_s"]["judge"] == 0.0
            continue
        usage = calls[simulation.task_id]
        assert kept["judge"] == {"calls": 1, "model": JUDGE_MODEL, "input_tokens": usage["prompt_tokens"],
                                 "output_tokens": usage["completion_tokens"]}
        cost = price_tokens(JUDGE_MODEL, usage["prompt_tokens"], usage["completion_tokens"])
        assert cost > 0 and kept["cost_usd"]["judge"] == pytest.approx(cost, rel=1e-6)
        assert kept["time_s"]["judge"] > 0
        assert metrics[simulation.task_id]["cost_usd"]["judge"] == kept["cost_usd"]["judge"]
        # the oracle reports no usage: its cost, and so the total, are not reported; the scripted user costs nothing
        assert simulation.agent_cost is None and simulation.user_cost == 0.0
        assert kept["cost_usd"]["agent"] is None and kept["cost_usd"]["total"] is None
    judged = sum(price_tokens(JUDGE_MODEL, u["prompt_tokens"], u["completion_tokens"]) for u in calls.values())
    assert outcome.metrics["run"]["cost_usd"]["judge"] == pytest.approx(judged, rel=1e-6)
    report, _, _ = write([str(outcome.results_path)], tmp_path / "report.html", resamples=100)
    assert report["runs"][0]["domains"][0]["cost"]["per_conversation"]["judge"] == pytest.approx(judged / 3, rel=1e-6)
