"""Shared fixtures: real A2A servers on loopback, real tau2 runs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Iterator

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import pytest  # noqa: E402

import tau2_a2a  # noqa: E402,F401
from tau2.data_model.simulation import RunConfig  # noqa: E402

from tau2_a2a.client.run import RunOutcome, evaluate  # noqa: E402
from tau2_a2a.config import A2AConfig  # noqa: E402
from tau2_a2a.reference.oracle_agent import OracleExecutor, oracle_card  # noqa: E402
from tau2_a2a.serving import BackgroundServer, a2a_app, free_port  # noqa: E402


Serve = Callable[[Callable[[str], Any]], BackgroundServer]
FAST = tau2_a2a.RetryPolicy(max_attempts=3, backoff_seconds=0.05)  # retries without slow tests


@pytest.fixture
def serve() -> Iterator[Callable[..., BackgroundServer]]:
    """Start an ASGI app on a free loopback port: serve(lambda url: app) -> server."""
    servers: list[BackgroundServer] = []

    def start(app_for_url: Callable[[str], Any]) -> BackgroundServer:
        port = free_port()
        server = BackgroundServer(app_for_url(f"http://127.0.0.1:{port}"), port=port).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def oracle_url() -> Iterator[str]:
    """The reference oracle agent, shared by the whole test session."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with BackgroundServer(a2a_app(OracleExecutor(), oracle_card(url)), port=port):
        yield url


def run_a2a(url: str, results_dir: Path, domain: str = "airline", *,
            a2a: A2AConfig | None = None, scoring_processes: int | None = None, **run_args: Any) -> RunOutcome:
    """Evaluate the A2A agent at `url` with the scripted user, results under `results_dir`."""
    config = RunConfig(
        domain=domain, agent="a2a_agent", llm_agent="a2a-test", user="scripted_user",
        llm_user="scripted", llm_args_user={}, llm_args_agent={}, llm_args_judge={},
        results_dir=str(results_dir), save_to=run_args.pop("save_to", "run"),
        max_concurrency=run_args.pop("max_concurrency", 2), **run_args,
    )
    return evaluate(config, a2a or A2AConfig(endpoint=url, retry=FAST), scoring_processes)


def run_native_oracle(results_dir: Path, domain: str = "airline", **run_args: Any):
    """The same oracle, natively in tau2 (no A2A), for fidelity comparisons."""
    from tau2.run import run_domain

    config = RunConfig(
        domain=domain, agent="oracle_agent", llm_agent="oracle", user="scripted_user",
        llm_user="scripted", llm_args_user={}, llm_args_agent={}, llm_args_judge={},
        results_dir=str(results_dir), save_to=run_args.pop("save_to", "native"),
        max_concurrency=run_args.pop("max_concurrency", 2), **run_args,
    )
    return run_domain(config)


def descendants(pid: int) -> set[int]:
    """The processes started by `pid`, and by those, and so on (Linux /proc)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        parents[int(stat.parent.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def running() -> set[int]:
    """Every process id on the machine (Linux /proc)."""
    return {int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()}


def saved_simulations(results_path: Path) -> list[dict] | None:
    """A results file's simulations, or None while it is missing or being rewritten."""
    try:
        return json.loads(results_path.read_text())["simulations"]
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return None


def typed(value: Any) -> Any:
    """A value with its Python types spelled out, so 100 and 100.0 compare unequal."""
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [typed(v) for v in value]
    return (type(value).__name__, value)
