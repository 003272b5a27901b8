"""What one service accepts at once: every limit is a flag of `tau2-a2a serve`."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from tau2_a2a.service.jobs.errors import EvaluationError


@dataclass(frozen=True)
class Limits:
    max_running: int = 2  # evaluations at once; the rest wait in a queue
    max_queued: int = 16
    max_simulations: int = 200  # tasks x trials per request
    max_concurrency: int = 8  # simulations at once within one evaluation

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if value < 1:
                raise EvaluationError(f"Service limit {name} must be at least 1, got {value}.")


DEFAULT_LIMITS = Limits()
