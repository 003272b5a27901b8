"""A run stopped by SIGTERM says how many simulations it kept, and its metrics file and results file hold those.

The stop is held at the moment that used to split them (tests/runner/stopped_after_counting.py): the run has
counted what finished and written its metrics, and a simulation that was in flight when the signal landed
reaches its save before the process exits.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tau2.data_model.simulation import Results

from tau2_a2a.protocol.hosting import a2a_app
from tau2_a2a.reference.oracle_agent import OracleExecutor, oracle_card
from tau2_a2a.tau2bench.run.layout import results_path
from tests.support.paths import REPO
from tests.support.runs import Serve, saved_simulations

TASKS = ["1", "2", "3", "5"]
STOPPED = re.compile(r"Stopped by SIGTERM: (\d+) finished simulations? kept in (\S+) \(protocol metrics: (\S+)\); "
                     r"to resume, run: .+")
GENEROUS = 240.0  # seconds for the first simulation to finish on a busy machine


def test_sigterm_after_the_count_leaves_the_message_metrics_and_results_agreeing(serve: Serve,
                                                                                 tmp_path: Path) -> None:
    agent = serve(lambda url: a2a_app(OracleExecutor(delay=0.5), oracle_card(url))).url
    env = {k: v for k, v in os.environ.items() if k != "TAU2_A2A_AUTH_TOKEN"}
    env.update({"LITELLM_LOCAL_MODEL_COST_MAP": "True",
                "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO), env.get("PYTHONPATH", "")])})
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.runner.stopped_after_counting", "run", "airline", "--agent", "a2a_agent",
         "--a2a-endpoint", agent, "--user", "scripted_user", "--task-ids", *TASKS, "--max-concurrency", "2",
         "--save-to", "stopped", "--results-dir", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    path = results_path("stopped", tmp_path)
    deadline = time.monotonic() + GENEROUS
    while len(saved_simulations(path) or []) < 1:  # one saved, the next one in flight
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "no simulation finished in time"
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=600)

    assert process.returncode == 143, stderr[-3000:]
    [line] = stderr.splitlines()
    stopped = STOPPED.fullmatch(line)
    assert stopped is not None, line
    said, metrics_file = int(stopped[1]), Path(stopped[3])
    assert Path(stopped[2]) == path
    saved = {s.id for s in Results.load(path).simulations}
    metrics = json.loads(metrics_file.read_text())
    assert 1 <= said < len(TASKS)
    assert said == len(saved) == metrics["run"]["simulations"]
    assert {m["simulation_id"] for m in metrics["simulations"]} == saved
