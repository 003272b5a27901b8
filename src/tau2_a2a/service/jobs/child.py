"""An evaluation's child process: how it starts, at what priority, how it is stopped.

Why a child process per evaluation: tau2 keeps process-wide state (run_tasks
resets loguru's sinks, a shared rich console, an interactive resume prompt,
its Ctrl-C handling). In its own process every evaluation gets its
own, evaluations cannot see each other, and the service's logging is never
touched. The child is the runner's own entry point, `python -m tau2_a2a.runner`,
given the evaluation's RunSettings (`EvaluationRequest.run_settings`) as JSON
on its stdin: the run `tau2-a2a run` makes of its flags, so the service and
the CLI score alike. Warm, the same launch is handed to a process forked from
the service's fork server (forkserver.py, warm.py), which has tau2 imported and
makes itself what `start_child` makes (session, environment, umask, log,
priority) before it runs; cold, `start_child` starts a new process. Only
`ChildOptions.start` chooses.

- Secrets: the target's bearer token reaches the child only on its stdin,
  beside the settings, never its command line or environment; nothing of the
  service's own settings (its token, its database URL) reaches it.
- Files: each child runs with umask 077; its log is 0600.
- Children die with their service (TAU2_A2A_EXIT_WITH, see runner/parent.py),
  so a resumed evaluation never has two writers.
- Stop: the child is paused (SIGSTOP) at a moment when its results file is
  complete JSON and then killed, so every finished simulation is kept.
- Its end: the child writes how its run ended to the outcome file in the
  evaluation's directory (runner/outcome_file.py, directory.outcome_file);
  the service reads that file, never the child's log (outcome.py).
- Priority: children run at a lower CPU priority than the service (`nice`,
  default 10 steps lower). Evaluations are batch work that can wait a moment;
  the service's answers (GetTask, get_evaluation) are what people wait on,
  and on a small machine eight evaluations would otherwise starve them. Each
  child runs in a session of its own (to stop it with its helpers), and Linux's
  autogroup scheduling shares the CPU fairly between sessions whatever their
  processes' nice values, so the child's session is lowered too
  (/proc/PID/autogroup). A child sharing the service's session instead would
  spend that session's share, and the service would wait for other sessions.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from tau2_a2a.client.config import AUTH_TOKEN_ENV, AgentLimits, McpServing
from tau2_a2a.client.tracing import TRACEPARENT_ENV, TRACESTATE_ENV
from tau2_a2a.files import PRIVATE_FILE
from tau2_a2a.litellm_cost_map import BUNDLED, COST_MAP_ENV
from tau2_a2a.runner.parent import EXIT_WITH_ENV
from tau2_a2a.service import summary
from tau2_a2a.service.jobs.directory import (
    CHILD_LOG,
    PRIVATE_DIR,
    RESULTS_NAME,
    outcome_file,
    results_file,
)
from tau2_a2a.service.jobs.errors import EvaluationError
from tau2_a2a.service.jobs.warm import ForkServer, ForkServerError, StartingProcess, WarmProcess
from tau2_a2a.service.request import EvaluationRequest

log = logging.getLogger("tau2_a2a.service")

SERVICE_ENV_PREFIX = "TAU2_EVAL_"  # the service's own settings, which the child never sees
CHILD_UMASK = 0o077
DEFAULT_NICE = 10  # how much lower the CPU priority of an evaluation's process is than the service's


@dataclass(frozen=True)
class ChildOptions:
    """How this service starts its evaluations' children: the interpreter, `nice` steps below the service
    (0 to 19), their simulations on the Ray cluster at `ray_address` (else in the child), the operator's
    endpoint for the user LLM, and the service's target policy and the operator's limits of the evaluated
    agent, which each child enforces too."""

    python: str = sys.executable
    nice: int = DEFAULT_NICE
    ray_address: str | None = None
    user_llm_api_base: str | None = None
    allowed_targets: tuple[str, ...] = field(default=())
    agent_limits: AgentLimits = AgentLimits()
    mcp: McpServing = McpServing()  # where a run of the MCP tools modes serves the tools

    def __post_init__(self) -> None:
        if not 0 <= self.nice <= 19:
            raise EvaluationError(f"Evaluations run 0 to 19 nice steps below the service, got {self.nice}: set "
                                  "--evaluation-nice or TAU2_EVAL_EVALUATION_NICE within that range.")

    warm: bool = True  # fork each evaluation's process from the fork server (warm.py), else start it cold

    def start(self, request: EvaluationRequest, directory: Path, token: str | None,
              trace_parent: dict[str, str] | None = None, forkserver: ForkServer | None = None) -> ChildRun:
        """Start the evaluation's child (see ChildRun): forked from `forkserver` when it is ready; when it is
        not ready yet (launched now, or still importing), on a thread that waits for it (warm.StartingProcess);
        else cold."""
        launch = prepare_child(request, directory, token, ray_address=self.ray_address,
                               user_llm_api_base=self.user_llm_api_base, allowed_targets=self.allowed_targets,
                               agent_limits=self.agent_limits, mcp=self.mcp, trace_parent=trace_parent)
        if forkserver is not None and forkserver.ready:
            try:
                return ChildRun(forkserver.fork(launch.warm(self.nice)), directory)
            except ForkServerError as error:
                log.warning("evaluation in %s starts cold: %s", directory.name, error)
        elif forkserver is not None and forkserver.available:
            return ChildRun(StartingProcess(forkserver, launch.warm(self.nice), lambda: self._cold(launch),
                                            directory.name), directory)
        return ChildRun(self._cold(launch), directory)

    def _cold(self, launch: Launch) -> subprocess.Popen[bytes]:
        process = popen_child(launch, self.python)
        lower_priority(process.pid, self.nice)
        return process

    def forkserver(self) -> ForkServer | None:
        """The fork server these options ask for (not started), or None for cold starts."""
        return ForkServer(self.python, child_environment()) if self.warm else None


def _private_append(path: Path) -> IO[bytes]:
    """`path` opened for appending, readable by the service's user only (made so if it exists)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE)
    os.fchmod(descriptor, PRIVATE_FILE)
    return os.fdopen(descriptor, "ab")


@dataclass(frozen=True)
class Launch:
    """What an evaluation's child is given: its directory, its request on stdin, its environment."""

    directory: Path
    stdin: bytes = field(repr=False)  # holds the target's token
    env: dict[str, str] = field(repr=False)

    def warm(self, nice: int) -> dict[str, object]:
        """The launch as the fork server's child applies it to itself (forkserver.become)."""
        return {"directory": str(self.directory), "log": str(self.directory / CHILD_LOG), "umask": CHILD_UMASK,
                "env": self.env, "exit_with_variable": EXIT_WITH_ENV, "nice": nice,
                "priority": min(19, os.getpriority(os.PRIO_PROCESS, 0) + nice), "stdin": self.stdin.decode()}


def child_environment(trace_parent: dict[str, str] | None = None) -> dict[str, str]:
    """An evaluation's environment: the service's, without its own settings and secrets; with `trace_parent`,
    the trace context its run continues."""
    env = {k: v for k, v in os.environ.items() if k != AUTH_TOKEN_ENV and not k.startswith(SERVICE_ENV_PREFIX)}
    env.update({COST_MAP_ENV: BUNDLED}, NO_COLOR="1", TERM="dumb", COLUMNS="120")
    env[EXIT_WITH_ENV] = str(os.getpid())
    env.pop(TRACEPARENT_ENV, None), env.pop(TRACESTATE_ENV, None)
    if trace_parent:  # with tracing on (the OTEL_ variables pass on), the run continues this trace
        env[TRACEPARENT_ENV] = trace_parent["traceparent"]
        if trace_parent.get("tracestate"):
            env[TRACESTATE_ENV] = trace_parent["tracestate"]
    return env


def prepare_child(request: EvaluationRequest, directory: Path, token: str | None, *,
                  ray_address: str | None = None, user_llm_api_base: str | None = None,
                  allowed_targets: tuple[str, ...] = (), agent_limits: AgentLimits = AgentLimits(),
                  mcp: McpServing = McpServing(), trace_parent: dict[str, str] | None = None) -> Launch:
    """The evaluation's launch in `directory` (made, private; the outcome of an earlier child removed, so the
    file the service reads is this child's or none): the run's settings, the target's `token` and where to
    write its outcome, as JSON for its stdin; nothing for its command line."""
    settings = request.run_settings(directory, RESULTS_NAME, ray=ray_address, user_llm_api_base=user_llm_api_base,
                                    allowed_targets=allowed_targets, agent_limits=agent_limits, mcp=mcp)
    outcome = outcome_file(directory)
    stdin = json.dumps({"settings": settings.to_dict(), "auth_token": token, "outcome_file": str(outcome)}).encode()
    directory.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    outcome.unlink(missing_ok=True)
    return Launch(directory, stdin, child_environment(trace_parent))


def start_child(request: EvaluationRequest, directory: Path, token: str | None, *, python: str = sys.executable,
                ray_address: str | None = None, user_llm_api_base: str | None = None,
                allowed_targets: tuple[str, ...] = (), agent_limits: AgentLimits = AgentLimits(),
                mcp: McpServing = McpServing(), trace_parent: dict[str, str] | None = None
                ) -> subprocess.Popen[bytes]:
    """Start the evaluation's child cold in `directory`: the runner's entry point run by `python`, given its
    launch (prepare_child) on stdin. The only place that knows how a cold child is started.

    The child writes one results file in `directory`, read for progress and kept on cancel; a child
    started again on it (a resumed evaluation) redoes no finished simulation.
    """
    launch = prepare_child(request, directory, token, ray_address=ray_address, user_llm_api_base=user_llm_api_base,
                           allowed_targets=allowed_targets, agent_limits=agent_limits, mcp=mcp,
                           trace_parent=trace_parent)
    return popen_child(launch, python)


def popen_child(launch: Launch, python: str) -> subprocess.Popen[bytes]:
    """The runner's entry point run by `python` in the launch's directory, its request on stdin."""
    with _private_append(launch.directory / CHILD_LOG) as child_log:
        process = subprocess.Popen(
            [python, "-m", "tau2_a2a.runner"], env=launch.env, stdout=child_log, stderr=subprocess.STDOUT,
            stdin=subprocess.PIPE, cwd=launch.directory, start_new_session=True, umask=CHILD_UMASK,
        )
    try:
        assert process.stdin is not None
        process.stdin.write(launch.stdin)
        process.stdin.close()
    except BrokenPipeError:  # the child ended before reading: its exit code and log say why
        pass
    return process


def lower_priority(pid: int, nice: int) -> None:
    """Run the cold child `pid` `nice` steps below this process. Popen returns once the child has exec'd,
    before its interpreter starts any thread; the threads and processes it starts later inherit the value."""
    if not nice:
        return
    try:
        os.setpriority(os.PRIO_PROCESS, pid, min(19, os.getpriority(os.PRIO_PROCESS, 0) + nice))
    except OSError as error:  # the child already ended, or the platform refuses: it runs as it is
        log.debug("could not lower the priority of pid %d: %s", pid, error)
    autogroup = Path(f"/proc/{pid}/autogroup")  # Linux with autogroup scheduling: the child's session
    try:
        autogroup.write_text(str(nice))
    except OSError:  # no autogroup here (another OS, or the service runs in a cgroup): nice suffices
        pass


class ChildRun:
    """One run of an evaluation's child, from its start at a lower priority to its exit."""

    def __init__(self, process: subprocess.Popen[bytes] | WarmProcess | StartingProcess, directory: Path) -> None:
        self.process = process
        self.directory = directory

    @property
    def pid(self) -> int:
        """The child's pid (a child still starting is waited for: StartingProcess)."""
        return self.process.pid

    @property
    def not_started(self) -> str | None:
        """The kind of error that kept a child starting on its own thread from starting (None: it started)."""
        return self.process.not_started if isinstance(self.process, StartingProcess) else None

    def wait(self) -> int:
        """Block until the child exits; its exit code."""
        return self.process.wait()

    def stop(self) -> None:
        """Kill the child (with its session) at a moment its results file is complete (or not yet written);
        one still waiting for the fork server never starts."""
        process, path = self.process, results_file(self.directory)
        if isinstance(process, StartingProcess):
            if process.cancel():
                return
            process = process.wait_started() or process
        deadline = time.monotonic() + 10.0
        while process.poll() is None:
            try:
                process.send_signal(signal.SIGSTOP)
                consistent = not path.exists() or summary.read_results(path) is not None
                if consistent or time.monotonic() > deadline:
                    os.killpg(process.pid, signal.SIGKILL)
                    break
                process.send_signal(signal.SIGCONT)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        process.wait()
