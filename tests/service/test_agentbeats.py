"""The AgentBeats green agent: assessment requests to `tau2-a2a serve`, streamed, on loopback."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from a2a.helpers import get_data_parts, get_text_parts
from a2a.types import TaskState
from tau2.data_model.simulation import Results
from tau2.metrics.agent_metrics import compute_metrics

from tau2_a2a.client.targets import TargetPolicy
from tau2_a2a.protocol.hosting import BackgroundServer, free_port
from tau2_a2a.service import summary
from tau2_a2a.service.assessment import AssessmentRejected, Shard, parse
from tau2_a2a.service.jobs.directory import results_file
from tau2_a2a.service.jobs.limits import Limits
from tau2_a2a.service.request import RequestPolicy, check_request
from tau2_a2a.service.result import ARTIFACT_NAME, schema
from tau2_a2a.tau2bench.run.layout import metrics_path, results_path, shown
from tau2_a2a.tau2bench.run.provenance import task_set_sha256
from tau2_a2a.tau2bench.seam.distribution import DISTRIBUTION, VERSION
from tests.support.assessments import assess, request, result_of
from tests.support.distributions import DEFAULT_USER_LLM, DOMAIN_LIST
from tests.support.service import final_task, served_card, start_service, stream_message

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundServer]:
    server = start_service(tmp_path_factory.mktemp("green"), limits=Limits(max_running=3))
    yield server
    server.stop()


def working_updates(events: list) -> list[dict[str, Any]]:
    """The progress data parts of the `working` status updates."""
    found = []
    for event in events:
        if event.HasField("status_update") and event.status_update.status.state == TaskState.TASK_STATE_WORKING:
            found += get_data_parts(list(event.status_update.status.message.parts))
    return [data for data in found if "done" in data]


@pytest.fixture(scope="module")
def text_request(service: BackgroundServer, oracle_url: str) -> tuple[list, Any]:
    body = request(oracle_url, num_tasks=2, num_trials=2, max_concurrency=1, num_instances=4)
    return asyncio.run(assess(service.url, body))


def test_a_text_request_streams_progress_and_completes_with_a_result_artifact(text_request: Any) -> None:
    events, task = text_request
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    progress = working_updates(events)
    assert progress and {(p["done"], p["total"]) for p in progress} <= {(n, 4) for n in range(5)}
    assert [p["done"] for p in progress] == sorted(p["done"] for p in progress)
    assert [artifact.name for artifact in task.artifacts] == [ARTIFACT_NAME]
    [text] = get_text_parts(list(task.artifacts[0].parts))
    assert ": completed.\n4 of 4 simulations: average reward 1.000; pass^1 1.000, pass^2 1.000;" in text
    assert "config.num_instances is accepted and ignored" in text
    data = result_of(task)
    assert {k: data[k] for k in ("status", "clean", "participant_role", "domain", "task_split", "shard_index",
                                 "num_shards", "num_trials", "max_steps", "user", "user_llm", "num_tasks",
                                 "total_simulations", "finished_simulations", "avg_reward", "pass_hat_1",
                                 "pass_hat_2", "a2a_error_simulations", "a2a_failed_requests",
                                 "ignored_config")} == {
        "status": "completed", "clean": True, "participant_role": "agent", "domain": "airline",
        "task_split": "base", "shard_index": 0, "num_shards": 1, "num_trials": 2, "max_steps": 200,
        "user": "scripted_user", "user_llm": DEFAULT_USER_LLM, "num_tasks": 2, "total_simulations": 4,
        "finished_simulations": 4, "avg_reward": 1.0, "pass_hat_1": 1.0, "pass_hat_2": 1.0,
        "a2a_error_simulations": 0, "a2a_failed_requests": 0, "ignored_config": ["num_instances"]}
    assert sorted(key for key in data if key.startswith("pass_hat_")) == [
        f"pass_hat_{k}{bound}" for k in (1, 2) for bound in ("", "_ci95_high", "_ci95_low")]
    assert {key: data[key] for key in data if "_ci95_" in key} == {  # every task passed: no spread
        f"{name}_ci95_{bound}": 1.0 for name in ("avg_reward", "pass_hat_1", "pass_hat_2") for bound in ("low", "high")}
    assert type(data["max_steps"]) is float  # a data part carries every number as a double
    assert data["tasks"] == [{"task_id": t, "rewards": [1.0, 1.0], "successes": [True, True],
                              "termination_reasons": ["user_stop", "user_stop"], "avg_reward": 1.0}
                             for t in ("0", "1")]
    assert data["termination_reasons"] == {"user_stop": 4} and data["a2a_requests"] >= 4
    assert (data["tau2_distribution"], data["tau2_version"]) == (DISTRIBUTION, VERSION)
    assert data["task_set_sha256"] == task_set_sha256("airline")  # the task set the run drew from
    assert data["participant"].startswith("http://127.0.0.1:")


async def test_the_same_request_as_a_data_part(service: BackgroundServer, oracle_url: str) -> None:
    events, task = await assess(service.url, request(oracle_url, task_ids=["7"]), as_data=True)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert working_updates(events)
    data = result_of(task)
    assert (data["avg_reward"], data["pass_hat_1"], data["total_simulations"]) == (1.0, 1.0, 1)
    assert [t["task_id"] for t in data["tasks"]] == ["7"] and data["ignored_config"] == []


def refusal(task: Any) -> str:
    return " ".join(get_text_parts(list(task.status.message.parts)))


@pytest.mark.parametrize("change, expected", [
    ({"config": {"domain": "airline", "max_step": 30}},
     "Unknown config key 'max_step'. Accepted keys: domain, task_ids, num_tasks, task_split, num_trials, "
     "max_steps, max_concurrency, user_llm, user_llm_args, user, retrieval_config, agent_tools, agent_driven, "
     "agent_price_model, shard_index, num_shards, num_instances."),
    ({"config": {"domain": "airline", "num_trials": "3"}},
     'config.num_trials must be a whole number >= 1 (default 1); got "3".'),
    ({"config": {"domain": "banking"}},
     f"Unknown domain 'banking'. Accepted domains: {DOMAIN_LIST}."),
    ({"config": {"num_tasks": 2}}, "config.domain is required: a tau2 domain name (required)."),
    ({"config": {"domain": "airline", "shard_index": 2, "num_shards": 2}},
     "config.shard_index must be a whole number >= 0, below num_shards; got 2 with num_shards 2."),
    ({"participants": {"agent": "http://127.0.0.1:1", "opponent": "http://127.0.0.1:2"}},
     "participants must name exactly one agent (tau2 assesses one agent; AgentBeats' tau2 scenarios use the "
     "role 'agent'); got 2: 'agent', 'opponent'."),
    ({"participants": {}}, "participants must name exactly one agent (tau2 assesses one agent; AgentBeats' "
                           "tau2 scenarios use the role 'agent'); got 0: none."),
    ({"participants": {"agent": "http://169.254.169.254/latest"}},
     "agent_endpoint 'http://169.254.169.254/latest' is refused: 169.254.169.254 is in 169.254.0.0/16 "
     "(link-local and cloud metadata addresses are never allowed)."),
])
async def test_requests_it_will_not_run_are_rejected_with_one_line(service: BackgroundServer, oracle_url: str,
                                                                   change: dict, expected: str) -> None:
    body = {**request(oracle_url, num_tasks=1), **change}
    events, task = await assess(service.url, body)
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    assert refusal(task) == expected and not task.artifacts


async def test_an_unreachable_participant_fails_the_task_with_the_reason(service: BackgroundServer) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"
    events, task = await assess(service.url, request(nobody, task_ids=["0"]))
    assert task.status.state == TaskState.TASK_STATE_FAILED
    text = refusal(task)
    assert ": failed.\nError: the evaluation process exited with code 2: " in text
    assert nobody in text and "cannot connect" in text and "Traceback" not in text
    assert not task.artifacts


async def test_text_it_cannot_act_on_is_rejected_with_the_accepted_forms(service: BackgroundServer) -> None:
    for text in ("Please assess my agent", '{"participants": '):
        from tau2_a2a.service.caller import request_message

        events = await stream_message(service.url, request_message(text=text))
        task = await final_task(service.url, events[0].task.id)
        assert task.status.state == TaskState.TASK_STATE_REJECTED
        assert "No language model is configured here, so send a structured request" in refusal(task)
        assert 'Or send an AgentBeats assessment request, as JSON text or a data part: {"participants"' in \
            refusal(task)


@pytest.fixture(scope="module")
def sharded(service: BackgroundServer, oracle_url: str) -> dict[str, Any]:
    """The same assessment unsharded and as two shards (three requests at once)."""
    body = request(oracle_url, task_ids=["0", "1", "2"], num_trials=2)

    async def run_all() -> list[tuple[list, Any]]:
        return await asyncio.gather(
            assess(service.url, body),
            *(assess(service.url, {**body, "config": {**body["config"], "shard_index": i, "num_shards": 2}})
              for i in (0, 1)))

    whole, *shards = asyncio.run(run_all())
    return {"whole": result_of(whole[1]), "shards": [result_of(task) for _, task in shards]}


def test_shards_split_the_tasks_disjointly_and_record_the_shard(sharded: dict[str, Any]) -> None:
    shards = sharded["shards"]
    assert [(s["shard_index"], s["num_shards"]) for s in shards] == [(0, 2), (1, 2)]
    assert [[t["task_id"] for t in s["tasks"]] for s in shards] == [["0", "2"], ["1"]]
    assert [s["total_simulations"] for s in shards] == [4, 2]
    assert all(len(t["rewards"]) == 2 for s in shards for t in s["tasks"])


def test_two_shards_merged_score_as_the_unsharded_run(sharded: dict[str, Any], service: BackgroundServer,
                                                      tmp_path: Path) -> None:
    root = service.app.state.tools.manager.root
    files = [str(results_file(root / s["evaluation_id"])) for s in sharded["shards"]]
    merged = subprocess.run([sys.executable, "-m", "tau2_a2a.cli", "merge", *files, "--save-to", "merged",
                             "--results-dir", str(tmp_path)], capture_output=True, text=True, cwd=REPO)
    assert merged.returncode == 0, merged.stderr[-2000:]
    results = Results.load(results_path("merged", tmp_path))
    metrics = compute_metrics(results)
    whole = sharded["whole"]
    rewards = {t["task_id"]: t["rewards"] for t in summary.per_task([s.model_dump(mode="json")
                                                                     for s in results.simulations])}
    assert rewards == {t["task_id"]: t["rewards"] for t in whole["tasks"]}
    assert {k: round(v, 6) for k, v in metrics.pass_hat_ks.items()} == {1: whole["pass_hat_1"],
                                                                        2: whole["pass_hat_2"]}
    assert metrics.avg_reward == whole["avg_reward"] and results.info.num_trials == 2
    report = json.loads(metrics_path(results_path("merged", tmp_path)).read_text())
    assert report["run"]["simulations"] == whole["total_simulations"] == 6


def test_the_documented_leaderboard_query_ranks_the_gateways_files(sharded: dict[str, Any], tmp_path: Path) -> None:
    """docs/agentbeats.md's DuckDB query, run as written over files shaped as the gateway writes them."""
    import duckdb

    doc = (REPO / "docs" / "agentbeats.md").read_text()
    query = re.search(r"## A leaderboard query.*?```sql\n(.*?)```", doc, re.DOTALL).group(1)
    for index, shard in enumerate(sharded["shards"]):
        (tmp_path / f"shard{index}.json").write_text(json.dumps({"status": "completed", "results": [shard]}))
    query = query.replace("'results/*.json'", repr(str(tmp_path / "*.json")))
    rows = duckdb.sql(query).fetchall()
    whole = sharded["whole"]
    assert rows == [(whole["participant"], "airline", whole["pass_hat_1"], whole["avg_reward"], 6, 2)]


def test_merge_refuses_files_of_other_settings_naming_what_differs(sharded: dict[str, Any],
                                                                   service: BackgroundServer,
                                                                   tmp_path: Path) -> None:
    root = service.app.state.tools.manager.root
    first = results_file(root / sharded["shards"][0]["evaluation_id"])
    other = Results.load(results_file(root / sharded["shards"][1]["evaluation_id"]))
    other.info.max_steps = 30
    other.info.environment_info.domain_name = "retail"
    (tmp_path / "other.json").write_text(other.model_dump_json())
    merged = subprocess.run([sys.executable, "-m", "tau2_a2a.cli", "merge", str(first), str(tmp_path / "other.json"),
                             "--save-to", "merged", "--results-dir", str(tmp_path)],
                            capture_output=True, text=True, cwd=REPO)
    assert merged.returncode == 2
    assert ("error: These results files were not made with the same settings, so they cannot be scored together: "
            f"domain differs ({shown(first)}: 'airline'; other.json: 'retail'); "
            f"max_steps differs ({shown(first)}: 200; other.json: 30).") in merged.stderr
    assert not results_path("merged", tmp_path).exists()


# -- without servers -----------------------------------------------------------------------

def test_defaults_are_tau2s_own() -> None:
    assessment = parse({"participants": {"purple": "http://127.0.0.1:9100"}, "config": {"domain": "retail"}})
    assert assessment.role == "purple" and assessment.shard == Shard(0, 1) and assessment.ignored == ()
    assert assessment.arguments == {"domain": "retail", "agent_endpoint": "http://127.0.0.1:9100"}
    checked = check_request(assessment.arguments, RequestPolicy(targets=TargetPolicy.from_entries(("loopback",))))
    assert (checked.user, checked.user_llm, checked.user_llm_args, checked.num_trials, checked.max_steps,
            checked.max_concurrency) == ("user_simulator", DEFAULT_USER_LLM, {"temperature": 0.0}, 1, 200, 3)


@pytest.mark.parametrize("tasks, count", [(list("abcdefg"), 1), (list("abcdefg"), 3), (list("ab"), 2),
                                          ([str(i) for i in range(50)], 20)])
def test_shards_are_disjoint_deterministic_and_cover_the_selection(tasks: list[str], count: int) -> None:
    parts = [Shard(i, count).take(tasks) for i in range(count)]
    assert sorted(t for part in parts for t in part) == sorted(tasks)
    assert sum(len(part) for part in parts) == len(tasks)
    assert parts == [Shard(i, count).take(list(tasks)) for i in range(count)]


@pytest.mark.parametrize("body, expected", [
    ([], "An assessment request is a JSON object with participants and config."),
    ({"participants": {"agent": "http://x"}, "config": {"domain": "airline"}, "extra": 1},
     "Unknown key(s) 'extra' in the assessment request. Accepted keys: participants, config."),
    ({"participants": {"agent": 5}, "config": {"domain": "airline"}},
     "participants.agent must be the agent's base URL (http or https); got 5."),
    ({"participants": {"agent": "http://x"}, "config": {"domain": "airline", "num_shards": 2}},
     "config.shard_index and config.num_shards go together: give both or neither."),
    ({"participants": {"agent": "http://x"}, "config": {"domain": "airline", "task_ids": []}},
     "config.task_ids must be a non-empty list of task ids; got []."),
    ({"participants": {"agent": "http://x"}, "config": {"domain": "airline", "user_llm_args": "hot"}},
     'config.user_llm_args must be a JSON object of the user LLM\'s sampling parameters (temperature, top_p, ...); '
     'got "hot".'),
])
def test_malformed_requests_are_refused_with_one_line(body: Any, expected: str) -> None:
    with pytest.raises(AssessmentRejected) as refused:
        parse(body)
    assert str(refused.value) == expected and "\n" not in expected


def test_the_schema_refuses_a_result_that_breaks_it(text_request: Any) -> None:
    data = result_of(text_request[1])
    for broken in ({**data, "avg_reward": "1.0"}, {**data, "pass_hat_x": 1.0},
                   {k: v for k, v in data.items() if k != "shard_index"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, schema())


def test_simulations_that_ended_on_a2a_errors_are_not_a_clean_success() -> None:
    report = {"run": {"requests": 12, "failed_requests": 3, "simulations": 10, "latency_ms": {"p50": 1, "p95": 2},
                      "simulations_ended_by_a2a_errors": {"http": 1, "timeout": 2}}}
    record = {"evaluation_id": "ev-0123456789ab", "status": "completed", "total_simulations": 10,
              "request": {"agent_endpoint": "http://127.0.0.1:9", "domain": "airline"},
              "result": {**summary.outcome({"simulations": [
                  {"task_id": str(i), "trial": 0, "reward_info": {"reward": 0.0 if i < 3 else 1.0},
                   "termination_reason": "agent_error" if i < 3 else "user_stop"} for i in range(10)]}, report)}}
    text = summary.text(record)
    assert text.startswith("Evaluation ev-0123456789ab of http://127.0.0.1:9 on airline: completed, with A2A errors.")
    assert "3 of 10 simulations ended with A2A errors (timeout=2, http=1): they score 0." in text
    assert record["result"]["a2a_errors"] == {"simulations": 3, "by_category": {"timeout": 2, "http": 1}}


# -- through `adk api_server --a2a adk_agents` -------------------------------------------------

# api_server: the fixture in tests/service/conftest.py, a real subprocess


async def test_the_same_request_through_adk_api_server(api_server: str, oracle_url: str) -> None:
    """ADK's server builds its executor without our config: the artifact has no name, refusals fail."""
    card = served_card(api_server)
    events, task = await assess(api_server, request(oracle_url, num_tasks=2), card=card)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert working_updates(events)
    data = result_of(task)
    assert (data["avg_reward"], data["pass_hat_1"], data["total_simulations"], data["max_steps"]) == (1.0, 1.0, 2, 200)
    events, refused = await assess(api_server, {**request(oracle_url), "participants": {}}, card=card)
    assert refused.status.state == TaskState.TASK_STATE_FAILED
    assert refusal(refused).startswith("participants must name exactly one agent")


# -- acceptance: a real a2a-sdk 0.3 client, as AgentBeats' gateway ------------------------------

def test_a_0_3_client_runs_an_assessment_as_the_gateway_does(sdk03: Any, service: BackgroundServer,
                                                             oracle_url: str) -> None:
    """Discover, stream the JSON text request, take the data parts of the final task's artifacts."""
    body = request(oracle_url, num_tasks=2)
    seen = sdk03(service.url, text=json.dumps(body))
    assert "error" not in seen, seen
    assert seen["sdk_version"].startswith("0.3.") and "working" in seen["states"]
    assert seen["final"]["kind"] == "task" and seen["final"]["state"] == "completed"
    [data] = seen["final"]["results"]
    jsonschema.validate(data, schema())
    assert (data["avg_reward"], data["pass_hat_1"], data["total_simulations"], data["clean"]) == (1.0, 1.0, 2, True)
