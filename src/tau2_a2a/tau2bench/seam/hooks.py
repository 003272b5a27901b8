"""tau2 with tau2-a2a's parts in place, while a run needs them: entered, never done at import.

`tau2_hooks()` is entered by `runner.evaluate` around a run, and for good
by each Ray actor (a process of ours). The first entry in the process
registers tau2-a2a's agents and user with tau2's registry (names added,
nothing replaced; they stay) and applies the patches: our orchestrator,
scoring traced, a simulation function that stops on a refusal, a thread
pool that stops on Ctrl-C, atomic results files, the judge's calls counted,
unknown costs shown as such, a quiet git. The last exit restores tau2 as it
was. Entries nest and may come from several threads.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from tau2_a2a.tau2bench.participants.a2a_agent import AGENT_NAME, A2AAgent
from tau2_a2a.tau2bench.participants.native_oracle import NATIVE_ORACLE_NAME, NativeOracleAgent
from tau2_a2a.tau2bench.participants.scripted_user import USER_NAME, ScriptedUser
from tau2_a2a.tau2bench.run import accounting, orchestration, results_file, stopping
from tau2_a2a.tau2bench.seam.distribution import commit_hash_patches, register_agent, registry
from tau2_a2a.tau2bench.seam.patches import Patch, apply_all, restore_all

_lock = threading.Lock()
_entered = 0
_undo: list[Patch] = []


@contextmanager
def tau2_hooks() -> Iterator[None]:
    """tau2-a2a's agents registered and its parts in place inside tau2 while inside (see the module)."""
    global _entered
    with _lock:
        if _entered == 0:
            register()
            _undo[:] = apply_all(patches())
        _entered += 1
    try:
        yield
    finally:
        with _lock:
            _entered -= 1
            if _entered == 0:
                restore_all(_undo)
                _undo.clear()


def entered() -> bool:
    """Whether tau2's hooks are in place in this process."""
    return _entered > 0


def patches() -> list[Patch]:
    """Every replacement inside tau2 a run of tau2-a2a needs."""
    return [*orchestration.patches(), *results_file.patches(), *stopping.patches(), *accounting.patches(),
            *commit_hash_patches(commit_hash)]


def register() -> None:
    """`a2a_agent`, `oracle_agent` and `scripted_user` in tau2's registry (idempotent)."""
    info = registry.get_info()
    if AGENT_NAME not in info.agents:
        register_agent(A2AAgent, AGENT_NAME)
    if NATIVE_ORACLE_NAME not in info.agents:
        register_agent(NativeOracleAgent, NATIVE_ORACLE_NAME)
    if USER_NAME not in info.users:
        registry.register_user(ScriptedUser, USER_NAME)


def commit_hash() -> str:
    """The git commit of the working directory, as tau2 records it ("unknown" outside a checkout), without
    git's `fatal: not a git repository` on the terminal, where it would be the last line of every run."""
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip().split("\n")[0]
