"""Shared fixtures: real A2A servers on loopback, real tau2 runs."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, Callable, Iterator

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# A Ray head on a busy machine can take over Ray's default 30 s to start its GCS (the tests start several).
os.environ.setdefault("RAY_gcs_server_port_wait_time_s", "120")

import pytest  # noqa: E402
from hypothesis import settings as hypothesis_settings  # noqa: E402

# Property tests: in CI (CI set) the same examples every run, derived from each test's name, so a red run
# replays; elsewhere fresh examples, with failures kept in .hypothesis/ and replayed first next time. Either
# way a failure prints the seed that reproduces it (@reproduce_failure); add it to the test as an @example.
hypothesis_settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
hypothesis_settings.register_profile("dev", print_blob=True)
hypothesis_settings.load_profile("ci" if os.environ.get("CI") else "dev")

from tau2_a2a.client.config import A2AConfig, RetryPolicy  # noqa: E402
from tau2_a2a.runner.outcome import RunOutcome  # noqa: E402
from tau2_a2a.runner.run import evaluate  # noqa: E402
from tau2_a2a.runner.settings import RunSettings  # noqa: E402
from tau2_a2a.tau2bench.distribution import RunConfig  # noqa: E402
from tau2_a2a.tau2bench.runs import run  # noqa: E402
from tau2_a2a.reference.oracle_agent import OracleExecutor, oracle_card  # noqa: E402
from tau2_a2a.protocol.hosting import BackgroundServer, a2a_app, free_port  # noqa: E402


Serve = Callable[[Callable[[str], Any]], BackgroundServer]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "upstream: runs on upstream tau2-bench (v1.0.1, Python 3.12+) only")
FAST = RetryPolicy(max_attempts=3, backoff_seconds=0.05)  # retries without slow tests


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
            a2a: A2AConfig | None = None, **run_args: Any) -> RunOutcome:
    """Evaluate the A2A agent at `url` with the scripted user, results under `results_dir`."""
    settings = RunSettings(
        domain=domain, a2a=a2a or A2AConfig(endpoint=url, retry=FAST), agent_llm="a2a-test",
        agent_llm_args={}, user="scripted_user", user_llm="scripted", user_llm_args={},
        results_dir=str(results_dir), save_to=run_args.pop("save_to", "run"),
        max_concurrency=run_args.pop("max_concurrency", 2), **run_args,
    )
    return evaluate(settings)


def run_native_oracle(results_dir: Path, domain: str = "airline", **run_args: Any):
    """The same oracle, natively in tau2 (no A2A; tau2's own run), for fidelity comparisons."""
    config = RunConfig(
        domain=domain, agent="oracle_agent", llm_agent="oracle", user="scripted_user",
        llm_user="scripted", llm_args_user={}, llm_args_agent={}, llm_args_judge={},
        results_dir=str(results_dir), save_to=run_args.pop("save_to", "native"),
        max_concurrency=run_args.pop("max_concurrency", 2), **run_args,
    )
    return run(config)


def scored_offline(task: Any) -> bool:
    """Whether tau2 scores `task` without an LLM: upstream judges some retail tasks' NL assertions with one."""
    criteria = task.evaluation_criteria
    basis = [str(getattr(b, "value", b)).upper() for b in (criteria.reward_basis or [])] if criteria else []
    return not (criteria and criteria.nl_assertions and "NL_ASSERTION" in basis)


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


REPO = Path(__file__).resolve().parents[1]
SDK03_PYTHON = REPO / ".venv-a2a03" / "bin" / "python"
SERVICE_TOKEN = "svc-token-3c9d1e"  # the token of the `service_all_bindings` fixture


@pytest.fixture(scope="session")
def sdk03() -> Callable[..., dict[str, Any]]:
    """Run tests/sdk03_client.py (a real a2a-sdk 0.3 client, in .venv-a2a03); its JSON result.

    sdk03(url, text=..., data={...}, parts=[...], transport="JSONRPC" | "HTTP+JSON", token=...) -> dict
    sends a data part, then a text part, or `parts` (A2A 0.3 JSON) as they are.
    """
    if not SDK03_PYTHON.exists():
        pytest.fail(f"{SDK03_PYTHON} is missing: run `make test` (it builds .venv-a2a03 with a2a-sdk 0.3.22).")

    def run(url: str, *, text: str | None = None, data: dict[str, Any] | None = None,
            parts: list[dict[str, Any]] | None = None, transport: str = "JSONRPC", token: str | None = None,
            timeout: float = 600.0) -> dict[str, Any]:
        if parts is None:
            parts = [{"kind": "data", "data": data}] if data is not None else []
            parts += [{"kind": "text", "text": text}] if text else []
        args = [str(SDK03_PYTHON), str(REPO / "tests" / "sdk03_client.py"), url, "--parts", json.dumps(parts),
                "--transport", transport, "--timeout", str(timeout)]
        args += ["--token", token] if token else []
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout + 60,
                              env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
        try:
            return json.loads(done.stdout)
        except json.JSONDecodeError:
            pytest.fail(f"sdk03_client.py exited with {done.returncode} and no JSON:\n{done.stderr[-3000:]}")

    return run


@pytest.fixture(scope="session")
def oracle_all_bindings() -> Iterator[BackgroundServer]:
    """The oracle serving JSON-RPC, HTTP+JSON and gRPC, its card declaring each for A2A 1.0 and 0.3."""
    port, grpc_port = free_port(), free_port()
    card = oracle_card(f"http://127.0.0.1:{port}", f"127.0.0.1:{grpc_port}")
    with BackgroundServer(a2a_app(OracleExecutor(), card), port=port, grpc_port=grpc_port) as server:
        yield server


@pytest.fixture(scope="session")
def service_all_bindings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundServer]:
    """`tau2-a2a serve --grpc-port` with bearer auth (SERVICE_TOKEN), every binding."""
    from tau2_a2a.service.app import build_app
    from tau2_a2a.service.evaluations import Limits
    from tau2_a2a.service.settings import ServiceSettings

    port, grpc_port = free_port(), free_port()
    settings = ServiceSettings(results_dir=tmp_path_factory.mktemp("service_all_bindings"),
                               limits=Limits(max_running=2), auth_token=SERVICE_TOKEN,
                               allowed_targets=("public", "loopback"))
    app = build_app(settings, f"http://127.0.0.1:{port}", poll_seconds=0.2, grpc_url=f"127.0.0.1:{grpc_port}")
    with BackgroundServer(app, port=port, grpc_port=grpc_port) as server:
        yield server


@pytest.fixture(scope="session")
def postgres() -> Iterator[Any]:
    """A real PostgreSQL server on loopback for the session, started when a test first asks for it."""
    from tests.postgres_server import PostgresServer, binaries

    if binaries() is None and not os.environ.get("CI"):
        pytest.skip("PostgreSQL is not installed here: `make install` installs the Debian package.")
    server = PostgresServer()
    try:
        yield server
    finally:
        server.stop()
