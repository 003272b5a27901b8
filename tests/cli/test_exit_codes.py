"""`tau2-a2a run` exit codes tell the truth: 3 when simulations ended with A2A errors,
2 when the agent refused the token mid-run (finished simulations kept, a re-run resumes), 0 otherwise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.middleware import Middleware
from starlette.types import ASGIApp
from tau2.data_model.simulation import Results

from tau2_a2a.protocol.hosting import BackgroundServer, free_port
from tau2_a2a.tau2bench.run.layout import metrics_path, results_path
from tests.support.cli import run_cli
from tests.support.executors import OracleLike, agent_app
from tests.support.middleware import HttpExchange, _BodyMiddleware, _send_response
from tests.support.records import marker


class RefuseWhile(_BodyMiddleware):
    """HTTP `status` for requests containing `needle` while `switch["on"]`: a token revoked, then restored."""

    def __init__(self, app: ASGIApp, needle: str, switch: dict[str, bool], status: int) -> None:
        super().__init__(app)
        self.needle = needle.encode()
        self.switch = switch
        self.status = status

    async def intercept(self, exchange: HttpExchange, send: Any) -> bool:
        if self.switch["on"] and self.needle in exchange.body:
            await _send_response(send, self.status, b"refused")
            return True
        return False


def run(url: str, results: Path, tasks: list[str]) -> tuple[int, str, str]:
    process = run_cli(["run", "airline", "--agent", "a2a_agent", "--a2a-endpoint", url, "--user", "scripted_user",
                       "--task-ids", *tasks, "--max-concurrency", "1", "--results-dir", str(results),
                       "--save-to", "run"], cwd=results)
    stdout, stderr = process.communicate(timeout=300)
    return process.returncode, stdout, stderr


def test_token_refused_mid_run_stops_keeps_finished_and_resumes(tmp_path: Path) -> None:
    switch = {"on": True}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    app = agent_app(OracleLike(), url, [Middleware(RefuseWhile, needle=marker("5"), switch=switch, status=401)])
    with BackgroundServer(app, port=port):
        code, _, stderr = run(url, tmp_path, ["1", "5", "7", "9"])
        assert code == 2, stderr[-2000:]
        assert "Traceback" not in stderr
        last = stderr.strip().splitlines()[-1]
        assert last == (
            f"error: The agent at {url} refused our credentials mid-run (HTTP 401), so the run stopped; its 1 "
            f"finished simulations are kept in {results_path('run', tmp_path)}. Pass a valid bearer token with "
            "--a2a-auth-token or TAU2_A2A_AUTH_TOKEN and re-run the same command to resume.")
        kept = Results.load(results_path("run", tmp_path)).simulations
        assert [(s.task_id, s.reward_info.reward) for s in kept] == [("1", 1.0)]  # 7 and 9 never started
        switch["on"] = False  # the token works again
        code, stdout, stderr = run(url, tmp_path, ["1", "5", "7", "9"])
    assert code == 0, stderr[-2000:]
    resumed = Results.load(results_path("run", tmp_path)).simulations
    assert sorted(s.task_id for s in resumed) == ["1", "5", "7", "9"]  # each exactly once
    assert {s.reward_info.reward for s in resumed} == {1.0}


def test_simulations_ended_by_a2a_errors_exit_3_with_a_last_line_saying_so(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    app = agent_app(OracleLike(), url, [Middleware(RefuseWhile, needle=marker("5"), switch={"on": True},
                                                   status=404)])
    with BackgroundServer(app, port=port):
        code, _, stderr = run(url, tmp_path, ["1", "5"])
    assert code == 3, stderr[-2000:]
    assert stderr.strip().splitlines()[-1] == (
        "1 of 2 simulations ended with A2A errors (http=1): they score 0; "
        f"see {metrics_path(results_path('run', tmp_path))}")
    rewards = {s.task_id: s.reward_info.reward for s in Results.load(results_path("run", tmp_path)).simulations}
    assert rewards == {"1": 1.0, "5": 0.0}
