"""--a2a-workers: one evaluation over several processes, merged into tau2's own files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tau2.data_model.simulation import Results

from tau2_a2a.reference.fidelity import trajectory_differences
from tests.conftest import run_native_oracle

TASKS = ["0", "1", "2", "3", "4"]


def _run(url: str, results_dir: Path) -> subprocess.CompletedProcess:
    command = [str(Path(sys.executable).parent / "tau2-a2a"), "run", "airline", "--agent", "a2a_agent",
               "--a2a-endpoint", url, "--user", "scripted_user", "--task-ids", *TASKS, "--num-trials", "2",
               "--a2a-workers", "2", "--max-concurrency", "4", "--results-dir", str(results_dir), "--save-to", "sharded"]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)


def test_workers_merge_into_one_results_file_that_matches_native(oracle_url: str, tmp_path: Path) -> None:
    done = _run(oracle_url, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    merged = Results.load(tmp_path / "sharded.json")
    assert [t.id for t in merged.tasks] == TASKS
    assert [(s.trial, s.task_id) for s in merged.simulations] == [(t, i) for t in (0, 1) for i in TASKS]
    assert {s.reward_info.reward for s in merged.simulations} == {1.0}
    native = run_native_oracle(tmp_path / "native", task_ids=TASKS, num_trials=2)
    assert {(s.task_id, s.trial): s.seed for s in merged.simulations} == {
        (s.task_id, s.trial): s.seed for s in native.simulations}
    assert trajectory_differences(merged, native) == []

    summary = json.loads((tmp_path / "sharded_results.json").read_text())
    assert summary["num_simulations"] == 10 and summary["metrics"]["avg_reward"] == 1.0
    terminations = json.loads((tmp_path / "sharded_termination_summary.json").read_text())
    assert terminations["termination_reasons"] == {"user_stop": 10}
    report = json.loads((tmp_path / "sharded_a2a_metrics.json").read_text())
    assert report["run"]["simulations"] == 10 and report["run"]["failed_requests"] == 0
    assert "simulations: 10" in done.stdout

    # The same command again resumes every shard: nothing is redone.
    ids = sorted(s.id for s in merged.simulations)
    again = _run(oracle_url, tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert sorted(s.id for s in Results.load(tmp_path / "sharded.json").simulations) == ids
