"""--a2a-workers: one evaluation over several processes, merged into tau2's own files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from starlette.middleware import Middleware
from tau2.data_model.simulation import Results, RunConfig

from tau2_a2a.runner.processes import usable_cores
from tau2_a2a.runner.shards import default_workers, plan_shards, shards_dir
from tau2_a2a.client.config import AUTH_TOKEN_ENV, ConfigError
from tau2_a2a.tau2bench.fidelity import trajectory_differences
from tau2_a2a.reference.oracle_agent import OracleExecutor
from tests.agents import RequireBearer, agent_app
from tests.conftest import Serve, descendants, run_native_oracle, running, saved_simulations

TASKS = [str(task) for task in range(10)]


def _run(url: str, results_dir: Path) -> subprocess.CompletedProcess:
    """20 simulations, 32 at once, and no --a2a-workers: the default spreads them over the cores."""
    command = [str(Path(sys.executable).parent / "tau2-a2a"), "run", "airline", "--agent", "a2a_agent",
               "--a2a-endpoint", url, "--user", "scripted_user", "--task-ids", *TASKS, "--num-trials", "2",
               "--max-concurrency", "32", "--results-dir", str(results_dir), "--save-to", "sharded"]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)


def test_workers_merge_into_one_results_file_that_matches_native(oracle_url: str, tmp_path: Path) -> None:
    done = _run(oracle_url, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    if usable_cores() > 1:
        assert "Workers: 2 processes, each running up to 16 simulations at once and scoring them in 1 " \
               "process of its own" in done.stdout
    else:
        assert "Scoring: in this process" in done.stdout
    merged = Results.load(tmp_path / "sharded.json")
    assert [t.id for t in merged.tasks] == TASKS
    assert [(s.trial, s.task_id) for s in merged.simulations] == [(t, i) for t in (0, 1) for i in TASKS]
    assert {s.reward_info.reward for s in merged.simulations} == {1.0}
    native = run_native_oracle(tmp_path / "native", task_ids=TASKS, num_trials=2)
    assert {(s.task_id, s.trial): s.seed for s in merged.simulations} == {
        (s.task_id, s.trial): s.seed for s in native.simulations}
    assert trajectory_differences(merged, native) == []

    summary = json.loads((tmp_path / "sharded_results.json").read_text())
    assert summary["num_simulations"] == 20 and summary["metrics"]["avg_reward"] == 1.0
    terminations = json.loads((tmp_path / "sharded_termination_summary.json").read_text())
    assert terminations["termination_reasons"] == {"user_stop": 20}
    report = json.loads((tmp_path / "sharded_a2a_metrics.json").read_text())
    assert report["run"]["simulations"] == 20 and report["run"]["failed_requests"] == 0
    assert "simulations: 20" in done.stdout

    # The same command again resumes every shard: nothing is redone.
    ids = sorted(s.id for s in merged.simulations)
    again = _run(oracle_url, tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert sorted(s.id for s in Results.load(tmp_path / "sharded.json").simulations) == ids


def test_killed_sharded_run_leaves_no_process_and_resumes(serve: Serve, tmp_path: Path) -> None:
    """SIGKILL of the run ends its workers and their scoring processes; re-running finishes it.

    The token is on the command line of the run only: the workers authenticate with what the run hands them.
    Without --a2a-workers the resume takes the run's own split over 2 workers; in one process, which
    would not see the workers' finished simulations, it is refused.
    """
    token = "shard-token-value"
    server = serve(lambda url: agent_app(OracleExecutor(delay=0.3), url, [Middleware(RequireBearer, token=token)]))
    tasks = ["0", "1", "2", "3", "4", "5"]
    unsharded = [str(Path(sys.executable).parent / "tau2-a2a"), "run", "airline", "--agent", "a2a_agent",
                 "--a2a-endpoint", server.url, "--a2a-auth-token", token, "--user", "scripted_user",
                 "--task-ids", *tasks, "--max-concurrency", "2", "--a2a-scoring-processes", "2",
                 "--results-dir", str(tmp_path), "--save-to", "killed"]
    command = [*unsharded, "--a2a-workers", "2"]
    env = {key: value for key, value in os.environ.items() if key != AUTH_TOKEN_ENV}
    first = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    parts = [tmp_path / "killed_shards" / f"part{k}.json" for k in (0, 1)]
    deadline = time.monotonic() + 180
    while not all(saved_simulations(part) for part in parts):
        assert first.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline, "the workers finished no simulation within 180 s"
        time.sleep(0.05)
    helpers = descendants(first.pid)  # two workers forked from the run, a scoring process each
    assert len(helpers) == 4, helpers
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    while helpers & running():
        assert time.monotonic() < deadline + 30, "processes of the killed run are still running"
        time.sleep(0.1)
    finished = [sim for part in parts for sim in saved_simulations(part) or []]
    assert 2 <= len(finished) < len(tasks)

    one = [*unsharded, "--a2a-workers", "1"]
    refused = subprocess.run(one, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2
    assert refused.stderr.strip().endswith(
        "simulations are in their parts; re-run it with --a2a-workers 2, or without the flag, to resume.")
    assert not (tmp_path / "killed.json").exists()

    again = subprocess.run(unsharded, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Workers: 2 processes, each running up to 1 simulations at once" in again.stdout
    merged = json.loads((tmp_path / "killed.json").read_text())["simulations"]
    assert sorted(sim["task_id"] for sim in merged) == tasks  # each once: none redone
    assert {sim["reward_info"]["reward"] for sim in merged} == {1.0}
    by_id = {sim["id"]: sim for sim in merged}
    assert all(by_id[sim["id"]] == sim for sim in finished)
    assert token not in again.stdout + again.stderr
    assert not [path for path in tmp_path.rglob("*") if path.is_file() and token in path.read_text()]



def test_a_split_is_kept_for_the_tasks_it_was_made_for(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    assert plan_shards(path, ["0", "1", "2", "3", "4"], 2) == [["0", "2", "4"], ["1", "3"]]
    assert plan_shards(path, ["0", "1", "2", "3", "4"], 4) == [["0", "2", "4"], ["1", "3"]]
    with pytest.raises(ConfigError, match=r"run.json was started on other tasks; use another --save-to"):
        plan_shards(path, ["0", "1", "2"], 2)


def test_a_run_in_one_process_is_not_resumed_with_workers(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text("{}")
    with pytest.raises(ConfigError, match=r"run.json holds a run started in one process; resume it with --a2a-wo"):
        plan_shards(path, ["0", "1"], 2)
    assert not shards_dir(path).exists()


def test_default_workers_one_per_16_at_once_up_to_the_cores_and_as_the_run_started(tmp_path: Path) -> None:
    def default(path: Path = tmp_path / "new.json", **run: Any) -> int:
        return default_workers(RunConfig(domain="airline", **run), path)

    cores = usable_cores()
    assert default(max_concurrency=16) == 1
    assert default(max_concurrency=32) == min(cores, 2)  # the whole domain, 50 simulations
    assert default(max_concurrency=128) == min(cores, 8)
    assert default(max_concurrency=32, num_tasks=19) == 1  # small: the fork server costs more than it saves
    in_one_process = tmp_path / "one.json"
    in_one_process.write_text("{}")
    assert default(in_one_process, max_concurrency=64) == 1
    over_three = tmp_path / "three.json"
    plan_shards(over_three, ["0", "1", "2"], 3)
    assert default(over_three, max_concurrency=1) == 3


def test_a_failed_worker_fails_the_run_with_where_its_simulations_are(serve: Serve, tmp_path: Path) -> None:
    """A worker killed mid-run fails the run, which says so and keeps what the workers finished."""
    slow = serve(lambda url: agent_app(OracleExecutor(delay=0.3), url)).url
    command = [str(Path(sys.executable).parent / "tau2-a2a"), "run", "airline", "--agent", "a2a_agent",
               "--a2a-endpoint", slow, "--user", "scripted_user", "--task-ids", "0", "1", "2", "3",
               "--a2a-workers", "2", "--max-concurrency", "2", "--results-dir", str(tmp_path), "--save-to", "broken"]
    run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           stdin=subprocess.DEVNULL)
    parts = shards_dir(tmp_path / "broken.json")
    deadline = time.monotonic() + 240
    while not saved_simulations(parts / "part1.json"):
        assert run.poll() is None and time.monotonic() < deadline, "worker 1 finished no simulation"
        time.sleep(0.05)
    [worker0] = [pid for pid in descendants(run.pid) if _is_worker(pid, run.pid, 0)]
    os.kill(worker0, signal.SIGKILL)
    _, stderr = run.communicate(timeout=300)
    assert run.returncode == 1
    assert stderr.strip().splitlines()[-1] == (
        f"error: worker(s) 0 (exit -9) failed (see above); their finished simulations are kept in {parts}. "
        "Re-run the command to resume.")
    assert {sim["task_id"] for sim in saved_simulations(parts / "part1.json")} == {"1", "3"}  # worker 1 finished
    assert not (tmp_path / "broken.json").exists()


def _is_worker(pid: int, run_pid: int, index: int) -> bool:
    """Whether `pid` is the run's worker `index`: its child, started in that order (workers take increasing pids)."""
    children = sorted(child for child in descendants(run_pid) if _parent(child) == run_pid)
    return len(children) > index and children[index] == pid


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def test_a_part_that_cannot_be_read_is_refused_before_any_worker_starts(oracle_url: str, tmp_path: Path) -> None:
    plan_shards(tmp_path / "broken.json", ["0", "1"], 2)
    part = shards_dir(tmp_path / "broken.json") / "part0.json"
    part.write_text('{"simulations": [')
    command = [str(Path(sys.executable).parent / "tau2-a2a"), "run", "airline", "--agent", "a2a_agent",
               "--a2a-endpoint", oracle_url, "--user", "scripted_user", "--task-ids", "0", "1",
               "--results-dir", str(tmp_path), "--save-to", "broken"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"error: {part} is not a readable tau2 results file (1 validation error for Results); delete it, or use "
        "another --save-to."]
    assert not (shards_dir(tmp_path / "broken.json") / "part1.json").exists()  # no worker ran
