"""Agents that get some tasks wrong, end to end: CLI run, service assessments, merge, the leaderboard query.

Airline tasks 11, 17 and 20 fail when the agent skips their work (a flight change
and a communicated number, changes to flights, passengers and bags, a booking),
alike in both tau2 distributions' task data. Three agents, each a real A2A server:
- A gets task 17 always wrong and task 11 wrong every other time: over 2 trials
  rewards 11: [0, 1], 17: [0, 0], 20: [1, 1]; average 0.5, pass^1 0.5, pass^2 1/3.
  Assessed as two shards of unequal size (every other task of the task set's
  order): [11, 20] (pass^1 0.75) and [17] (pass^1 0).
- B gets task 20 wrong: 1 trial, average and pass^1 2/3.
- C's host answers HTTP 500 to task 11: an A2A error, so its result is not `clean`.
The leaderboard query of docs/agentbeats.md must weight A's shards by their tasks
(0.5, not the shards' plain mean 0.375), leave C out, and rank B above A.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from a2a.types import TaskState
from starlette.middleware import Middleware
from tau2.data_model.simulation import Results
from tau2.metrics.agent_metrics import compute_metrics

from tau2_a2a.protocol.hosting import BackgroundServer, free_port
from tau2_a2a.service.jobs.directory import results_file
from tau2_a2a.service.jobs.limits import Limits
from tau2_a2a.tau2bench.run.layout import results_path
from tests.support.assessments import assess, request, result_of
from tests.support.cli import run_cli
from tests.support.executors import GetsTasksWrong, agent_app
from tests.support.middleware import FailWhen
from tests.support.records import marker
from tests.support.service import start_service

REPO = Path(__file__).resolve().parents[2]
TASKS = ["11", "17", "20"]
A_REWARDS = {"11": [0.0, 1.0], "17": [0.0, 0.0], "20": [1.0, 1.0]}


def serve_agent(executor: Any, middleware: list[Middleware] | None = None) -> BackgroundServer:
    port = free_port()
    return BackgroundServer(agent_app(executor, f"http://127.0.0.1:{port}", middleware), port=port).start()


def rewards_by_task(results: Results) -> dict[str, list[float]]:
    found: dict[str, list[tuple[int, float]]] = {}
    for simulation in results.simulations:
        found.setdefault(simulation.task_id, []).append((simulation.trial, simulation.reward_info.reward))
    return {task: [reward for _, reward in sorted(trials)] for task, trials in sorted(found.items())}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A by the CLI, then A's two shards, B and C assessed by the service at once."""
    a = serve_agent(GetsTasksWrong(always=("17",), every_other=("11",)))
    b = serve_agent(GetsTasksWrong(always=("20",)))
    c = serve_agent(GetsTasksWrong(), [Middleware(FailWhen, status=500, needle=marker("11"))])
    service = start_service(tmp_path_factory.mktemp("mixed_service"), limits=Limits(max_running=4))
    cli_dir = tmp_path_factory.mktemp("mixed_cli")
    try:
        process = run_cli(["run", "airline", "--agent", "a2a_agent", "--a2a-endpoint", a.url, "--user",
                           "scripted_user", "--task-ids", *TASKS, "--num-trials", "2", "--max-concurrency", "1",
                           "--results-dir", str(cli_dir), "--save-to", "run"], cwd=cli_dir)
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr[-3000:]
        one_trial = {"task_ids": TASKS, "num_trials": 1, "max_concurrency": 1}
        two_trials = {"task_ids": TASKS, "num_trials": 2, "max_concurrency": 1, "num_shards": 2}
        bodies = [request(a.url, **two_trials, shard_index=0), request(a.url, **two_trials, shard_index=1),
                  request(b.url, **one_trial), request(c.url, **one_trial)]

        async def assess_all() -> list[Any]:
            return await asyncio.gather(*(assess(service.url, body) for body in bodies))

        finals = [task for _, task in asyncio.run(assess_all())]
        assert [t.status.state for t in finals] == [TaskState.TASK_STATE_COMPLETED] * 4
        a0, a1, b_result, c_result = (result_of(t) for t in finals)
        root = service.app.state.tools.manager.root
        yield {"cli": Results.load(results_path("run", cli_dir)), "a": [a0, a1], "b": b_result, "c": c_result,
               "files": {name: results_file(root / r["evaluation_id"])
                         for name, r in (("a0", a0), ("a1", a1))}, "finals": finals}
    finally:
        service.stop()
        for server in (a, b, c):
            server.stop()


def test_the_cli_run_scores_each_task_and_pass_hat_k_exactly(runs: dict[str, Any]) -> None:
    results = runs["cli"]
    assert rewards_by_task(results) == A_REWARDS
    metrics = compute_metrics(results)
    assert metrics.avg_reward == 0.5
    assert metrics.pass_hat_ks == {1: 0.5, 2: pytest.approx(1 / 3, abs=1e-12)}


def test_the_service_reports_each_shard_exactly_and_clean(runs: dict[str, Any]) -> None:
    a0, a1 = runs["a"]
    assert [(t["task_id"], t["rewards"], t["successes"]) for t in a0["tasks"]] == [
        ("11", [0.0, 1.0], [False, True]), ("20", [1.0, 1.0], [True, True])]
    assert (a0["avg_reward"], a0["pass_hat_1"], a0["pass_hat_2"], a0["num_tasks"], a0["total_simulations"]) == (
        0.75, 0.75, 0.5, 2, 4)
    assert [(t["task_id"], t["rewards"]) for t in a1["tasks"]] == [("17", [0.0, 0.0])]
    assert (a1["avg_reward"], a1["pass_hat_1"], a1["pass_hat_2"], a1["num_tasks"], a1["total_simulations"]) == (
        0.0, 0.0, 0.0, 1, 2)
    b = runs["b"]
    assert [(t["task_id"], t["rewards"]) for t in b["tasks"]] == [("11", [1.0]), ("17", [1.0]), ("20", [0.0])]
    assert (b["avg_reward"], b["pass_hat_1"]) == (0.666667, 0.666667)
    for result in (a0, a1, b):  # wrong answers are the agent's fault, not the protocol's
        assert (result["status"], result["clean"], result["a2a_error_simulations"]) == ("completed", True, 0)
        assert set(result["termination_reasons"]) == {"user_stop"}


def test_an_a2a_error_completes_the_assessment_but_not_clean(runs: dict[str, Any]) -> None:
    c = runs["c"]
    assert (c["status"], c["clean"], c["a2a_error_simulations"], c["a2a_errors_by_category"]) == (
        "completed", False, 1, {"http": 1})
    assert [(t["task_id"], t["rewards"], t["termination_reasons"]) for t in c["tasks"]] == [
        ("11", [0.0], ["agent_error"]), ("17", [1.0], ["user_stop"]), ("20", [1.0], ["user_stop"])]
    assert c["avg_reward"] == 0.666667
    text = " ".join(p.text for a in runs["finals"][3].artifacts for p in a.parts if p.HasField("text"))
    assert ": completed, with A2A errors." in text
    assert "1 of 3 simulations ended with A2A errors (http=1): they score 0." in text


def test_merging_the_shards_gives_the_cli_runs_scores(runs: dict[str, Any], tmp_path: Path) -> None:
    files = [str(runs["files"]["a0"]), str(runs["files"]["a1"])]
    merged = subprocess.run([sys.executable, "-m", "tau2_a2a.cli", "merge", *files, "--save-to", "merged",
                             "--results-dir", str(tmp_path)], capture_output=True, text=True, cwd=REPO)
    assert merged.returncode == 0, merged.stderr[-2000:]
    results = Results.load(results_path("merged", tmp_path))
    assert rewards_by_task(results) == A_REWARDS
    metrics, cli = compute_metrics(results), compute_metrics(runs["cli"])
    assert (metrics.avg_reward, metrics.pass_hat_ks) == (cli.avg_reward, cli.pass_hat_ks) == (
        0.5, {1: 0.5, 2: pytest.approx(1 / 3, abs=1e-12)})


def test_the_documented_leaderboard_query_weights_ranks_and_leaves_out_unclean(runs: dict[str, Any],
                                                                             tmp_path: Path) -> None:
    import duckdb

    doc = (REPO / "docs" / "agentbeats.md").read_text()
    query = re.search(r"## A leaderboard query.*?```sql\n(.*?)```", doc, re.DOTALL).group(1)
    for name, result in (("a0", runs["a"][0]), ("a1", runs["a"][1]), ("b", runs["b"]), ("c", runs["c"])):
        (tmp_path / f"{name}.json").write_text(json.dumps({"status": "completed", "results": [result]}))
    rows = duckdb.sql(query.replace("'results/*.json'", repr(str(tmp_path / "*.json")))).fetchall()
    a_url, b_url = runs["a"][0]["participant"], runs["b"]["participant"]
    b_mean = 0.666667 * 3.0 / 3.0  # one shard: the query's arithmetic on the rounded figure
    assert rows == [(b_url, "airline", b_mean, b_mean, 3, 1), (a_url, "airline", 0.5, 0.5, 6, 2)]
