"""An evaluation's child process: how it starts, at what priority, how it is stopped, what its exit says.

Why a child process per evaluation: tau2 keeps process-wide state (run_tasks
resets loguru's sinks, a shared rich console, an interactive resume prompt,
its Ctrl-C handling). In its own process every evaluation gets its
own, evaluations cannot see each other, and the service's logging is never
touched. The child is the runner's own entry point, `python -m tau2_a2a.runner`,
given the evaluation's RunSettings as JSON on its stdin: the run `tau2-a2a run`
makes of its flags, so the service and the CLI score alike. Only `start_child`
knows how it is started.

- Secrets: the target's bearer token reaches the child only on its stdin,
  beside the settings, never its command line or environment; nothing of the
  service's own settings (its token, its database URL) reaches it.
- Files: each child runs with umask 077; its log is 0600.
- Children die with their service (TAU2_A2A_EXIT_WITH, see runner/parent.py),
  so a resumed evaluation never has two writers.
- Stop: the child is paused (SIGSTOP) at a moment when its results file is
  complete JSON and then killed, so every finished simulation is kept.
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
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tau2_a2a.client.config import AUTH_TOKEN_ENV, A2AConfig, redact
from tau2_a2a.client.targets import CLI_FLAG, SERVICE_FLAG, TargetPolicy
from tau2_a2a.runner.settings import RunSettings
from tau2_a2a.runner.parent import EXIT_WITH_ENV
from tau2_a2a.service import summary
from tau2_a2a.service.records import PRIVATE_DIR, PRIVATE_FILE, RESULTS_NAME, results_file
from tau2_a2a.service.spec import EvaluationSpec

log = logging.getLogger("tau2_a2a.service")

SERVICE_ENV_PREFIX = "TAU2_EVAL_"  # the service's own settings, which the child never sees
CHILD_LOG = "child.log"
CHILD_UMASK = 0o077
DEFAULT_NICE = 10  # how much lower the CPU priority of an evaluation's process is than the service's
# A run exits 0 when every simulation ran cleanly, 3 when every simulation ran but some ended
# with A2A errors (they score 0; the metrics file says which), 2 when it could not go on.
EXIT_A2A_ERRORS = 3
_RAN_EVERY_SIMULATION = (0, EXIT_A2A_ERRORS)
# The child's advice names `tau2-a2a run`'s flags; the service's caller has arguments instead.
_SERVICE_WORDING = (
    (re.compile(r" and re-run the same command to resume\."), " and send the evaluation again."),
    (re.compile(r"--a2a-auth-token(?: or \$?TAU2_A2A_AUTH_TOKEN)?"), "agent_auth_token"),
    (re.compile(re.escape(CLI_FLAG) + r"(?= )"), SERVICE_FLAG),  # the child names its flag; the operator sets ours
)


def ran_every_simulation(code: int | None) -> bool:
    """Whether a child's exit code says every simulation ran (some may have ended with A2A errors)."""
    return code in _RAN_EVERY_SIMULATION


def _private_append(path: Path) -> Any:
    """`path` opened for appending, readable by the service's user only (made so if it exists)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE)
    os.fchmod(descriptor, PRIVATE_FILE)
    return os.fdopen(descriptor, "ab")


def run_settings(spec: EvaluationSpec, directory: Path, ray_address: str | None = None,
                 user_llm_api_base: str | None = None, allowed_targets: tuple[str, ...] = ()) -> RunSettings:
    """The evaluation as a run: its results file in `directory`, its simulations in the child or on the Ray
    cluster at `ray_address` (the child the driver). `user_llm_api_base` is the operator's endpoint for the
    user LLM (never the caller's). The service's target policy goes along: the child checks every connection
    it makes, to the card's interfaces too, when it makes it."""
    user_llm_args = {**spec.user_llm_args, **({"api_base": user_llm_api_base} if user_llm_api_base else {})}
    a2a = A2AConfig(endpoint=spec.agent_endpoint,
                    targets=TargetPolicy.from_entries(allowed_targets) if allowed_targets else None)
    return RunSettings(
        domain=spec.domain, a2a=a2a, ray=ray_address, user=spec.user, user_llm=spec.user_llm,
        user_llm_args=user_llm_args, num_trials=spec.num_trials, max_steps=spec.max_steps,
        max_concurrency=spec.max_concurrency, num_tasks=spec.num_tasks, task_ids=spec.task_ids or None,
        task_split_name=spec.task_split or "base",
        retrieval_config=spec.retrieval_config, results_dir=str(directory), save_to=RESULTS_NAME,
    )


def start_child(spec: EvaluationSpec, directory: Path, token: str | None, *, python: str = sys.executable,
                ray_address: str | None = None, user_llm_api_base: str | None = None,
                allowed_targets: tuple[str, ...] = ()) -> subprocess.Popen:
    """Start the evaluation's child in `directory`: the runner's entry point, the run's settings and the
    target's `token` as JSON on its stdin, nothing on its command line. The only place that knows how a
    child is started.

    The child writes one results file in `directory`, read for progress and kept on cancel; a child
    started again on it (a resumed evaluation) redoes no finished simulation.
    """
    settings = run_settings(spec, directory, ray_address, user_llm_api_base, allowed_targets)
    request = json.dumps({"settings": settings.to_dict(), "auth_token": token}).encode()
    env = {k: v for k, v in os.environ.items() if k != AUTH_TOKEN_ENV and not k.startswith(SERVICE_ENV_PREFIX)}
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", NO_COLOR="1", TERM="dumb", COLUMNS="120")
    env[EXIT_WITH_ENV] = str(os.getpid())
    directory.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    with _private_append(directory / CHILD_LOG) as child_log:
        process = subprocess.Popen(
            [python, "-m", "tau2_a2a.runner"], env=env, stdout=child_log, stderr=subprocess.STDOUT,
            stdin=subprocess.PIPE, cwd=directory, start_new_session=True, umask=CHILD_UMASK,
        )
    try:
        assert process.stdin is not None
        process.stdin.write(request)
        process.stdin.close()
    except BrokenPipeError:  # the child ended before reading: its exit code and log say why
        pass
    return process


class ChildRun:
    """One run of an evaluation's child, from its start at a lower priority to its exit."""

    def __init__(self, process: subprocess.Popen, directory: Path) -> None:
        self.process = process
        self.directory = directory

    @classmethod
    def start(cls, spec: EvaluationSpec, directory: Path, token: str | None, *, nice: int,
              **settings: Any) -> ChildRun:
        """Start the child (`settings`: start_child's keywords), `nice` steps below this process."""
        run = cls(start_child(spec, directory, token, **settings), directory)
        run.lower_priority(nice)
        return run

    @property
    def pid(self) -> int:
        return self.process.pid

    def lower_priority(self, nice: int) -> None:
        """Run the child `nice` steps below this process. Popen returns once the child has exec'd, before
        its interpreter starts any thread; the threads and processes it starts later inherit the value."""
        if not nice:
            return
        pid = self.process.pid
        try:
            os.setpriority(os.PRIO_PROCESS, pid, min(19, os.getpriority(os.PRIO_PROCESS, 0) + nice))
        except OSError as error:  # the child already ended, or the platform refuses: it runs as it is
            log.debug("could not lower the priority of pid %d: %s", pid, error)
        autogroup = Path(f"/proc/{pid}/autogroup")  # Linux with autogroup scheduling: the child's session
        try:
            autogroup.write_text(str(nice))
        except OSError:  # no autogroup here (another OS, or the service runs in a cgroup): nice suffices
            pass

    def wait(self) -> int:
        """Block until the child exits; its exit code."""
        return self.process.wait()

    def stop(self) -> None:
        """Kill the child (with its session) at a moment its results file is complete (or not yet written)."""
        process, path = self.process, results_file(self.directory)
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

    def failure(self, code: int | None, token: str | None) -> str:
        """The child's own words for why it failed (its `error:` line or last exception), without `token`."""
        try:
            lines = (self.directory / CHILD_LOG).read_text(errors="replace").splitlines()
        except OSError:
            lines = []
        lines = [line.strip() for line in lines if line.strip()]
        chosen = next((line[len("error: "):] for line in reversed(lines) if line.startswith("error: ")), None)
        if chosen is None:
            exceptions = [line for line in lines if re.match(r"^[A-Za-z_][\w.]*(Error|Exception)\b", line)]
            chosen = exceptions[-1] if exceptions else (lines[-1] if lines else "no output")
        for pattern, wording in _SERVICE_WORDING:
            chosen = pattern.sub(wording, chosen)
        return redact(f"the evaluation process exited with code {code}: {chosen}"[:600], token)
