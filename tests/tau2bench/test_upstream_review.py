"""On upstream tau2-bench v1.0.1: `--auto-review` reviews an A2A agent's conversations as tau2 reviews its own.

The reviewer is upstream's own (tau2.evaluator.reviewer, which its batch run calls after each simulation).
Its LLM is testbed/standin_llm.py on loopback, reached the way an operator points LiteLLM at an endpoint
(OPENAI_API_BASE, OPENAI_API_KEY); its reviews are a pure function of the prompt: the agent's errors are the
task's expected tool calls it never made, the authentication "succeeded" when it called a tool. So the same
conversation gets the same review, natively or over A2A, in one process or on Ray, and an agent that left
the work undone gets a review naming what it left.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tau2_a2a.tau2bench.run.layout import results_path
from tau2_a2a.tau2bench.run.review_record import REVIEW_KEY
from tau2_a2a.tau2bench.seam.distribution import DISTRIBUTION, UPSTREAM, Results, load_tasks
from testbed.standin_llm import MODEL, StandinLLM
from tests.support.cli import run_cli
from tests.support.cli_main import run_main
from tests.support.executors import GetsTasksWrong, agent_app
from tests.support.runs import Serve, run_a2a, run_native_oracle

pytestmark = [
    pytest.mark.upstream,
    pytest.mark.skipif(DISTRIBUTION != UPSTREAM, reason=f"needs upstream tau2-bench; {DISTRIBUTION} is installed"),
]

REVIEW_MODEL = "gpt-4.1"  # an OpenAI model: LiteLLM sends it to OPENAI_API_BASE, the stand-in
TASKS = ["3", "8"]  # airline tasks: one only reads, one books a flight


@pytest.fixture
def reviewer(serve: Serve, monkeypatch: pytest.MonkeyPatch) -> StandinLLM:
    llm = StandinLLM.serve(serve)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)  # LiteLLM reads it before OPENAI_API_BASE
    monkeypatch.setenv("OPENAI_API_BASE", llm.api_base)
    monkeypatch.setenv("OPENAI_API_KEY", "standin-review-key")
    return llm


def expected_calls(task_id: str) -> list[str]:
    [task] = [task for task in load_tasks("airline") if task.id == task_id]
    return [action.name for action in task.evaluation_criteria.actions if action.requestor == "assistant"]


def reviews(results: Results) -> dict[str, tuple[Any, Any, Any]]:
    """Each task's review, authentication verdict and user-only review, as JSON."""
    def dumped(value: Any) -> Any:
        return value.model_dump(mode="json") if value is not None else None

    return {s.task_id: (dumped(s.review), dumped(s.auth_classification), dumped(s.user_only_review))
            for s in results.simulations}


def cli(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    process = run_cli(["run", "airline", "--agent", "a2a_agent", "--results-dir", str(tmp_path), *args])
    stdout, stderr = process.communicate(timeout=600)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def in_process(args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    return run_main(["run", "airline", "--agent", "a2a_agent", "--results-dir", str(tmp_path), *args], capsys)


def test_an_a2a_agent_is_reviewed_as_tau2_reviews_its_own(reviewer: StandinLLM, oracle_url: str,
                                                          tmp_path: Path) -> None:
    native = run_native_oracle(tmp_path, task_ids=TASKS, save_to="native", auto_review=True,
                               review_model=REVIEW_MODEL)
    a2a = run_a2a(oracle_url, tmp_path, task_ids=TASKS, save_to="a2a", auto_review=True, review_model=REVIEW_MODEL)
    assert reviews(a2a.results) == reviews(native)
    for simulation in a2a.results.simulations:
        expected = expected_calls(simulation.task_id)
        assert simulation.review.summary == f"The agent made {len(expected)} of the {len(expected)} expected tool calls."
        assert (simulation.review.has_errors, simulation.review.agent_error) == (False, False)
        assert simulation.auth_classification.status == "succeeded"
        assert simulation.review.cost > 0  # the reviewer's cost, as tau2 records it
    assert len(reviewer.review_requests()) == 2 * 2 * len(TASKS)  # a review and an authentication verdict each
    saved = json.loads(a2a.results_path.read_text())
    assert saved[REVIEW_KEY] == {"auto_review": True, "review_mode": "full", "review_model": REVIEW_MODEL}


def test_the_review_names_what_an_a2a_agent_left_undone(reviewer: StandinLLM, serve: Serve, tmp_path: Path) -> None:
    agent = GetsTasksWrong(always=("8",))
    url = serve(lambda url: agent_app(agent, url)).url
    outcome = run_a2a(url, tmp_path, task_ids=TASKS, auto_review=True, review_model=REVIEW_MODEL)
    simulations = {s.task_id: s for s in outcome.results.simulations}
    wrong, right = simulations["8"], simulations["3"]
    assert wrong.reward_info.reward == 0.0 and right.reward_info.reward == 1.0
    missed = expected_calls("8")
    assert missed and wrong.review.summary == f"The agent made 0 of the {len(missed)} expected tool calls."
    assert [(e.source, e.error_tags, e.severity, e.reasoning) for e in wrong.review.errors] == [
        ("agent", ["missed_required_action"], "critical", f"The agent never called {name}.") for name in missed]
    assert (wrong.review.agent_error, wrong.review.user_error, wrong.review.has_errors) == (True, False, True)
    assert wrong.auth_classification.status == "not_needed"
    assert right.review.errors == [] and right.auth_classification.status == "succeeded"


def test_a_review_of_the_user_alone_with_each_simulations_logs(reviewer: StandinLLM, oracle_url: str,
                                                               tmp_path: Path) -> None:
    done = cli(["--a2a-endpoint", oracle_url, "--user", "scripted_user", "--task-ids", "3", "--save-to", "user",
                "--auto-review", "--review-mode", "user", "--review-model", REVIEW_MODEL, "--verbose-logs"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    path = results_path("user", tmp_path)
    [simulation] = Results.load(path).simulations
    assert simulation.review is None and simulation.auth_classification is None
    spoke = sum(1 for message in simulation.messages if message.role == "user")
    assert simulation.user_only_review.summary == f"The user spoke {spoke} times and kept to its instructions."
    assert simulation.user_only_review.errors == []
    [logs] = (path.parent / "artifacts" / "task_3").iterdir()
    assert logs.name == f"sim_{simulation.id}"
    assert json.loads((logs / "sim_status.json").read_text()) == {"status": "used"}
    assert "FINISHED SIMULATION" in (logs / "task.log").read_text()
    [call] = (logs / "llm_debug").iterdir()
    assert "_llm_judge_user_only_review_" in call.name
    assert "standin-review-key" not in "".join(p.read_text() for p in path.parent.rglob("*") if p.is_file())


def test_a_resume_with_another_review_setting_is_refused(reviewer: StandinLLM, oracle_url: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The resumed run is a real process; the first run and each refusal are `tau2-a2a run`'s main() here."""
    run = ["--a2a-endpoint", oracle_url, "--user", "scripted_user", "--task-ids", *TASKS, "--save-to", "run",
           "--max-concurrency", "1"]
    reviewed = [*run, "--auto-review", "--review-model", REVIEW_MODEL]
    code, _, stderr = in_process(reviewed, tmp_path, capsys)
    assert code == 0, stderr[-3000:]
    path = results_path("run", tmp_path)
    data = json.loads(path.read_text())
    data["simulations"] = [s for s in data["simulations"] if s["task_id"] == TASKS[0]]  # as if stopped after one
    path.write_text(json.dumps(data, indent=2))

    def refused(args: list[str], differs: str) -> None:
        before = path.read_bytes()
        code, _, stderr = in_process(args, tmp_path, capsys)
        assert code == 2
        assert stderr.splitlines() == [
            f"error: {path} holds a run with other settings, so it cannot be resumed: {differs}. "
            f"Use another --save-to, or delete {path} to start over."]
        assert path.read_bytes() == before

    refused(run, "auto review on in the file, off now")
    refused([*reviewed, "--review-mode", "user"], "review mode full in the file, user now")
    refused([*run, "--auto-review"], f"review model {REVIEW_MODEL} in the file, claude-opus-4-5 now")
    del data[REVIEW_KEY]  # a file that does not record it (tau2's own): its simulations tell
    path.write_text(json.dumps(data, indent=2))
    refused([*reviewed, "--review-mode", "user"], "review mode full in the file, user now")

    resumed = cli(reviewed, tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    simulations = Results.load(path).simulations
    assert sorted(s.task_id for s in simulations) == TASKS and all(s.review is not None for s in simulations)
    assert json.loads(path.read_text())[REVIEW_KEY]["review_model"] == REVIEW_MODEL


@pytest.mark.ray
def test_on_ray_each_simulation_is_reviewed_and_logged_as_in_one_process(reviewer: StandinLLM, oracle_url: str,
                                                                        tmp_path: Path) -> None:
    """The review runs on the actor that ran the simulation, with the run's LLM log mode (upstream's batch run
    sets it in its own threads only); the user here is tau2's LLM user simulator, two LLM calls each."""
    pytest.importorskip("ray")
    run = ["--a2a-endpoint", oracle_url, "--user", "user_simulator", "--user-llm", MODEL, "--task-ids", *TASKS,
           "--auto-review", "--review-model", REVIEW_MODEL, "--verbose-logs"]
    here = cli([*run, "--save-to", "here"], tmp_path)  # the default log mode: each kind's last call
    assert here.returncode == 0, here.stderr[-3000:]
    on_ray = cli([*run, "--save-to", "ray", "--llm-log-mode", "all", "--ray", "local"], tmp_path)
    assert on_ray.returncode == 0, on_ray.stderr[-3000:]
    assert "Ray (local)" in on_ray.stdout

    assert reviews(Results.load(results_path("ray", tmp_path))) == reviews(Results.load(results_path("here", tmp_path)))
    for name, user_calls in (("here", 1), ("ray", 2)):
        directory = results_path(name, tmp_path).parent
        for task in TASKS:
            [logs] = (directory / "artifacts" / f"task_{task}").iterdir()
            calls = sorted(call.name.split("_", 3)[3].rsplit("_", 1)[0] for call in (logs / "llm_debug").iterdir())
            assert calls == ["classify_authentication", "llm_judge_review"] + ["user_simulator_response"] * user_calls
            assert "FINISHED SIMULATION" in (logs / "task.log").read_text()


def test_verbose_logs_on_a_cluster_are_refused_in_one_line(oracle_url: str, tmp_path: Path) -> None:
    done = cli(["--a2a-endpoint", oracle_url, "--verbose-logs", "--ray", "127.0.0.1:6379"], tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: --verbose-logs writes each simulation's logs into the run's directory on the machine that runs it, "
        "so with --ray 127.0.0.1:6379 they would land on the cluster's nodes: use --ray local, or leave "
        "--verbose-logs out."]
    assert list(tmp_path.iterdir()) == []
