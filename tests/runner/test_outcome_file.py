"""The outcome file `python -m tau2_a2a.runner` writes: how its run ended, as data, for whoever started it.

Real runs in a real child process, started the service's way (settings, token and the outcome file's path
as JSON on stdin), against the oracle on loopback, an address nobody listens on, and the oracle behind a
bearer token the run does not have.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from starlette.middleware import Middleware

from tau2_a2a.client.config import A2AConfig
from tau2_a2a.protocol.hosting import BackgroundServer, free_port
from tau2_a2a.reference.oracle_agent import OracleExecutor
from tau2_a2a.runner.outcome_file import (
    Failure,
    FailureKind,
    RunEnd,
    RunStatus,
    read_outcome,
    words_of,
)
from tau2_a2a.runner.settings import RunSettings
from tests.support.executors import agent_app
from tests.support.middleware import RequireBearer

TOKEN = "outcome-target-token-5e2a"


def run_child(endpoint: str, results: Path, token: str | None = None) -> tuple[int, RunEnd | None, str]:
    """`python -m tau2_a2a.runner` on airline tasks 0 and 1 with the scripted user: its exit code, the outcome
    it wrote where it was asked to (as the service asks: `results_outcome.json` in the run's directory), and
    its stderr."""
    settings = RunSettings(domain="airline", a2a=A2AConfig(endpoint=endpoint, timeout=30), user="scripted_user",
                           user_llm="scripted", user_llm_args={}, task_ids=["0", "1"], results_dir=str(results),
                           save_to="results")
    outcome = results / "results_outcome.json"
    request = {"settings": settings.to_dict(), "auth_token": token, "outcome_file": str(outcome)}
    done = subprocess.run([sys.executable, "-m", "tau2_a2a.runner"], input=json.dumps(request), text=True,
                          capture_output=True, timeout=600, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    return done.returncode, read_outcome(outcome), done.stderr


def test_a_run_that_went_to_its_end_says_so_with_its_counts(oracle_url: str, tmp_path: Path) -> None:
    code, end, stderr = run_child(oracle_url, tmp_path)
    assert code == 0, stderr
    assert end == RunEnd(RunStatus.COMPLETED, 0, simulations=2, a2a_errors=0, unscored=0, failure=None)
    assert (tmp_path / "results_outcome.json").stat().st_mode & 0o777 == 0o600


def test_a_run_that_could_not_start_names_its_failure_in_its_own_words(tmp_path: Path) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"
    code, end, stderr = run_child(nobody, tmp_path)
    assert code == 2
    assert end is not None and (end.status, end.exit_code, end.simulations) == (RunStatus.FAILED, 2, None)
    assert end.failure is not None and end.failure.kind == FailureKind.AGENT
    assert f"error: {end.failure.message}" == stderr.strip().splitlines()[-1]  # the line the run printed
    assert nobody in end.failure.message and "cannot connect" in end.failure.message


def test_a_refused_token_names_the_setting_at_fault_and_where_the_message_names_it(
        serve: Callable[..., BackgroundServer], tmp_path: Path) -> None:
    guarded = serve(lambda url: agent_app(OracleExecutor(), url, [Middleware(RequireBearer, token=TOKEN)]))
    code, end, _ = run_child(guarded.url, tmp_path, token="not-the-token-81c3")
    assert code == 2
    assert end is not None and end.failure is not None
    failure = end.failure
    assert (failure.kind, failure.setting, failure.http_status) == (FailureKind.AGENT_AUTH, "a2a.auth_token", 401)
    assert failure.message.endswith("Pass a valid bearer token with --a2a-auth-token or TAU2_A2A_AUTH_TOKEN.")
    assert failure.words[-2:] == [{"setting": "a2a.auth_token"}, "."]
    assert "".join(part if isinstance(part, str) else "--a2a-auth-token or TAU2_A2A_AUTH_TOKEN"
                   for part in failure.words) == failure.message
    assert failure.worded({"setting:a2a.auth_token": "agent_auth_token"}).endswith(
        "Pass a valid bearer token with agent_auth_token.")
    assert "not-the-token-81c3" not in (tmp_path / "results_outcome.json").read_text()


def test_words_mark_each_setting_and_what_to_do_next_and_an_edge_without_words_keeps_the_runs() -> None:
    message = ("The agent at http://a refused our credentials mid-run (HTTP 401), so the run stopped. Pass a valid "
               "bearer token with --a2a-auth-token or TAU2_A2A_AUTH_TOKEN and re-run the same command to resume.")
    failure = Failure(FailureKind.AGENT_AUTH, message, words_of(message))
    assert failure.words == [
        "The agent at http://a refused our credentials mid-run (HTTP 401), so the run stopped. Pass a valid bearer "
        "token with ", {"setting": "a2a.auth_token"}, " and ", {"action": "resume"}, "."]
    assert failure.worded({}) == message
    assert failure.worded({"setting:a2a.auth_token": "agent_auth_token", "action:resume": "send it again"}) == (
        "The agent at http://a refused our credentials mid-run (HTTP 401), so the run stopped. Pass a valid bearer "
        "token with agent_auth_token and send it again.")
    # The longest term wins: --retrieval-config-kwargs is not --retrieval-config followed by "-kwargs".
    assert words_of("--retrieval-config-kwargs must be a JSON object") == [
        {"setting": "retrieval_config_kwargs"}, " must be a JSON object"]
    assert words_of("no term here") == ["no term here"]
