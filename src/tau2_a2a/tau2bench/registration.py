"""Register tau2-a2a's agents and user with tau2, and put its replacements in place (idempotent)."""

from __future__ import annotations

import subprocess

from tau2_a2a.tau2bench import accounting, orchestration, results_file, stopping
from tau2_a2a.tau2bench.a2a_agent import AGENT_NAME, A2AAgent
from tau2_a2a.tau2bench.distribution import register_agent, registry, use_commit_hash
from tau2_a2a.tau2bench.native_oracle import NATIVE_ORACLE_NAME, NativeOracleAgent
from tau2_a2a.tau2bench.scripted_user import USER_NAME, ScriptedUser


def register() -> None:
    """`a2a_agent`, `oracle_agent` and `scripted_user` in tau2's registry; our orchestrator, atomic results
    files, a thread pool that stops on Ctrl-C, a quiet git in tau2's run, and the judge's calls counted."""
    info = registry.get_info()
    if AGENT_NAME not in info.agents:
        register_agent(A2AAgent, AGENT_NAME)
    if NATIVE_ORACLE_NAME not in info.agents:
        register_agent(NativeOracleAgent, NATIVE_ORACLE_NAME)
    if USER_NAME not in info.users:
        registry.register_user(ScriptedUser, USER_NAME)
    orchestration.install()
    results_file.install()
    stopping.install()
    accounting.install()
    use_commit_hash(commit_hash)


def commit_hash() -> str:
    """The git commit of the working directory, as tau2 records it ("unknown" outside a checkout), without
    git's `fatal: not a git repository` on the terminal, where it would be the last line of every run."""
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip().split("\n")[0]
