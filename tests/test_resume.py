"""A run killed with SIGKILL keeps its finished simulations; the same command resumes it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tau2_a2a.serving import free_port, wait_for_card
from tests.conftest import descendants, running, saved_simulations

TASKS = ["1", "2", "3", "5"]
CLI = [sys.executable, "-m", "tau2_a2a.cli"]
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def test_killed_run_resumes_without_redoing_finishedsaved_simulations(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    oracle = subprocess.Popen([*CLI, "agent", "oracle", "--delay", "0.3", "--port", str(port)],
                              env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run = [*CLI, "run", "airline", "--agent", "a2a_agent", "--a2a-endpoint", url,
           "--user", "scripted_user", "--task-ids", *TASKS, "--max-concurrency", "1",
           "--a2a-scoring-processes", "2", "--save-to", "killed", "--results-dir", str(tmp_path)]
    results_path = tmp_path / "killed.json"
    try:
        wait_for_card(url, oracle, timeout=60)
        first = subprocess.Popen(run, env=ENV, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 180
        while len(saved_simulations(results_path) or []) < 2:
            assert first.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "no two simulations within 180 s"
            time.sleep(0.05)
        helpers = descendants(first.pid)  # its scoring processes
        assert helpers, "the run started no scoring process"
        first.send_signal(signal.SIGKILL)
        assert first.wait(timeout=30) == -signal.SIGKILL
        while helpers & running():
            assert time.monotonic() < deadline + 30, "scoring processes outlived the killed run"
            time.sleep(0.1)

        finished = saved_simulations(results_path)
        assert finished is not None and 2 <= len(finished) < len(TASKS)
        assert not (tmp_path / "killed_a2a_metrics.json").exists()

        second = subprocess.run(run, env=ENV, stdin=subprocess.DEVNULL, capture_output=True,
                                text=True, timeout=300)
        assert second.returncode == 0, second.stderr[-3000:]
        assert "Scoring: in 2 processes of its own" in second.stdout
    finally:
        oracle.kill()
        oracle.wait(timeout=30)

    simulations = saved_simulations(results_path)
    assert sorted(s["task_id"] for s in simulations) == sorted(TASKS)  # each task once: none redone
    by_id = {s["id"]: s for s in simulations}
    for before in finished:
        assert by_id[before["id"]] == before  # kept as it was: same id, same trajectory, same times
    assert all(s["reward_info"]["reward"] == 1.0 for s in simulations)

    metrics = json.loads((tmp_path / "killed_a2a_metrics.json").read_text())
    assert {m["simulation_id"] for m in metrics["simulations"]} == set(by_id)
    assert all(m["summary"]["requests"] > 0 and m["summary"]["failed_requests"] == 0
               for m in metrics["simulations"])
    assert metrics["run"]["simulations"] == len(TASKS)


def test_results_file_is_replaced_whole_never_cut_short(tmp_path: Path) -> None:
    """tau2.run writes its results through an open that only replaces a complete file."""
    import tau2.run

    target = tmp_path / "run.json"
    target.write_text('{"simulations": ["finished"]}')
    with tau2.run.open(target, "w") as handle:
        handle.write('{"simulations": ["finished", "half-writ')
        assert target.read_text() == '{"simulations": ["finished"]}'  # a kill here loses nothing
        handle.write('ten"]}')
    assert target.read_text() == '{"simulations": ["finished", "half-written"]}'
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]
    with tau2.run.open(target, "r") as handle:
        assert handle.read().startswith('{"simulations"')
