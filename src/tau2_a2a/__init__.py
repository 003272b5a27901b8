"""tau2-a2a: evaluate any A2A agent with tau2-bench, and offer tau2 evaluations over A2A.

Importing this package registers, with tau2's registry, the agent `a2a_agent`,
the native reference agent `oracle_agent` and the user `scripted_user`.
Importing it again changes nothing.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def _quiet_tau2_import() -> int | None:
    """tau2 logs its whole registry at DEBUG on import, and warns about a missing
    .env file. If loguru still has only its default sink (nobody configured it),
    show only errors while tau2 is imported, then warnings and up. Returns the
    temporary sink's id."""
    import sys

    from loguru import logger

    if "tau2.registry" in sys.modules:
        return None
    try:
        logger.remove(0)
    except ValueError:
        return None  # configured by someone else: leave it alone
    return logger.add(sys.stderr, level="ERROR")


def _after_tau2_import(sink: int | None) -> None:
    import sys

    from loguru import logger

    if sink is not None:
        logger.remove(sink)
        logger.add(sys.stderr, level="WARNING")


_import_sink = _quiet_tau2_import()

from tau2.registry import registry  # noqa: E402

from tau2_a2a.client.agent import AGENT_NAME, A2AAgent  # noqa: E402
from tau2_a2a.runner.interrupt import install as _install_interrupt  # noqa: E402
from tau2_a2a.runner.results_file import install as _install_results_file  # noqa: E402
from tau2_a2a.client.orchestration import install as _install_orchestrator  # noqa: E402
from tau2_a2a.config import A2AConfig, RetryPolicy  # noqa: E402
from tau2_a2a.reference.native_oracle import NATIVE_ORACLE_NAME, NativeOracleAgent  # noqa: E402
from tau2_a2a.reference.scripted_user import USER_NAME, ScriptedUser  # noqa: E402

_after_tau2_import(_import_sink)


def register() -> None:
    """Register our agents and user with tau2 (idempotent)."""
    info = registry.get_info()
    if AGENT_NAME not in info.agents:
        registry.register_agent(A2AAgent, AGENT_NAME)
    if NATIVE_ORACLE_NAME not in info.agents:
        registry.register_agent(NativeOracleAgent, NATIVE_ORACLE_NAME)
    if USER_NAME not in info.users:
        registry.register_user(ScriptedUser, USER_NAME)
    _install_orchestrator()
    _install_results_file()
    _install_interrupt()


register()

__all__ = ["A2AAgent", "A2AConfig", "RetryPolicy", "ScriptedUser", "NativeOracleAgent", "register"]
