"""`tau2-a2a run` argument handling: the domain either way, clear errors, token from the env."""

from __future__ import annotations

import json

import pytest
from starlette.middleware import Middleware

from tau2_a2a.cli import main
from tau2_a2a.protocol.hosting import free_port
from tau2_a2a.reference.oracle_agent import OracleExecutor
from tau2_a2a.tau2bench.run.layout import metrics_path, results_path
from tests.support.executors import agent_app
from tests.support.middleware import RequireBearer


@pytest.mark.parametrize("domain_args", [["airline"], ["--domain", "airline"], ["airline", "--domain", "airline"]])
def test_domain_positional_or_flag_reaches_discovery(domain_args: list[str], capsys) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    code = main(["run", *domain_args, "--agent", "a2a_agent", "--a2a-endpoint", dead])
    assert code == 2
    assert capsys.readouterr().err.strip().startswith(f"error: Fetching the agent card {dead}/.well-known/agent-card.json")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "--agent", "a2a_agent"], "error: Name a domain: tau2-a2a run airline (or --domain airline)."),
        (["run", "airline", "--domain", "retail"], "error: Two domains given: 'airline' and --domain 'retail'."),
        (["run", "airline", "--agent", "a2a_agent"],
         "error: --agent a2a_agent needs --a2a-endpoint URL (the agent's base URL)."),
        (["run", "airline", "--agent", "a2a_agent", "--a2a-endpoint", "localhost:9000"],
         "error: A2A endpoint 'localhost:9000' is not an http(s) URL. "
         "Pass the agent's base URL, for example --a2a-endpoint http://127.0.0.1:9000"),
    ],
)
def test_bad_arguments_get_one_clear_line(argv: list[str], message: str, capsys) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == message


def test_token_from_the_environment(serve, tmp_path, monkeypatch, capsys) -> None:
    """TAU2_A2A_AUTH_TOKEN is used when --a2a-auth-token is absent, and never printed."""
    server = serve(lambda url: agent_app(OracleExecutor(), url, [Middleware(RequireBearer, token="env-token-value")]))
    monkeypatch.setenv("TAU2_A2A_AUTH_TOKEN", "env-token-value")
    code = main(["run", "airline", "--agent", "a2a_agent", "--a2a-endpoint", server.url, "--user", "scripted_user",
                 "--task-ids", "0", "--results-dir", str(tmp_path), "--save-to", "env"])
    out = capsys.readouterr()
    assert code == 0
    assert "A2A agent: misbehaving test agent at" in out.out
    assert "env-token-value" not in out.out + out.err
    assert "env-token-value" not in "".join(p.read_text() for p in tmp_path.rglob("*") if p.is_file())
    results = json.loads(results_path("env", tmp_path).read_text())
    assert [s["reward_info"]["reward"] for s in results["simulations"]] == [1.0]
    assert metrics_path(results_path("env", tmp_path)).exists()
