"""An evaluation request as the service accepts it: checked, complete, and free of secrets."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class EvaluationSpec:
    """A validated evaluation request. Holds no secret: it is stored and shown as is."""

    domain: str
    agent_endpoint: str
    total_simulations: int
    user: str = "user_simulator"
    user_llm: str = "gpt-4.1"
    user_llm_args: dict[str, Any] = field(default_factory=dict)
    num_trials: int = 1
    num_tasks: int | None = None
    task_ids: list[str] | None = None
    task_split: str | None = None
    max_steps: int = 200
    max_concurrency: int = 3
    shard_index: int | None = None  # an AgentBeats shard: task_ids then hold its part of the selection
    num_shards: int | None = None
    retrieval_config: str | None = None  # banking_knowledge's retrieval config by name (None: tau2's default)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
