"""tau2-a2a from Python: describe a run as RunSettings, evaluate it, read its outcome.

    from tau2_a2a.api import A2AConfig, RunSettings, evaluate

    outcome = evaluate(RunSettings(domain="airline", a2a=A2AConfig(endpoint="http://127.0.0.1:9100"),
                                   user="scripted_user", user_llm="scripted", num_tasks=5))
    print(outcome.results_path, outcome.metrics["run"]["requests"])
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tau2_a2a.client.config import A2AConfig, RetryPolicy
from tau2_a2a.errors import ConfigError
from tau2_a2a.runner.outcome import RunOutcome

if TYPE_CHECKING:
    from tau2_a2a.runner.run import evaluate
    from tau2_a2a.runner.settings import RunSettings

__all__ = ["A2AConfig", "ConfigError", "RetryPolicy", "RunOutcome", "RunSettings", "evaluate"]


def __getattr__(name: str) -> object:
    """`evaluate` and `RunSettings`, imported when first asked for: they import tau2 (seconds), which
    importing this module does not."""
    if name == "evaluate":
        from tau2_a2a.runner.run import evaluate

        return evaluate
    if name == "RunSettings":
        from tau2_a2a.runner.settings import RunSettings

        return RunSettings
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
