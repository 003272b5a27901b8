"""The report's figures as types: what `report.build` makes, `output` writes as JSON (report_schema.json)
and `html` draws."""

from __future__ import annotations

from typing import TypedDict

from tau2_a2a.compare import stats

# -- the figures of one results file, as the report's JSON keeps them (report_schema.json) ----------


class ValueSummary(TypedDict):
    """Count and quantiles of some values, and the values (the charts draw them)."""

    count: int
    p50: float | None
    p95: float | None
    max: float | None
    values: list[float]


class AgentUsage(TypedDict):
    """The LLM usage the agent reported over one simulation's replies; a lower bound unless every reply did, each
    whole (replies_with_partial_usage 0)."""

    input: int
    output: int
    replies_with_usage: int
    replies_with_partial_usage: int
    replies: int


class SimulationProtocol(TypedDict):
    """One simulation's A2A requests, summed, and the LLM usage its agent reported (None: not reported)."""

    requests: int
    retries: int
    failed_requests: int
    input_tokens: int  # tokens of the A2A messages' text, counted by the client: not the agent's LLM usage
    output_tokens: int
    agent_usage: AgentUsage | None
    request_bytes: int
    response_bytes: int
    latency_ms: float


class IndexedSimulationProtocol(SimulationProtocol):
    index: int  # the simulation's place in the results file


class ProtocolFigures(TypedDict):
    a2a: bool  # any A2A request at all (none for a native agent)
    latency_ms_by_method: dict[str, ValueSummary]
    first_event_ms: ValueSummary
    per_simulation: list[IndexedSimulationProtocol]
    retried_requests: int
    simulations_with_retries: int
    usage_reported: dict[str, int]  # simulations whose every reply reported LLM usage ("whole"), some ("partial")


class GridCell(TypedDict):
    """One simulation in the task x trial grid."""

    trial: int | None
    index: int
    reward: float
    group: str
    kind: str
    components: list[str]
    termination: str


class GridRow(TypedDict):
    task_id: str
    cells: list[GridCell]


class Failures(TypedDict):
    simulations: int
    failed: int
    by_group: dict[str, int]
    by_kind: dict[str, int]
    by_component: dict[str, int]


class CostFigures(TypedDict):
    """USD by participant (None: not reported), and seconds by phase: the whole run's and a conversation's."""

    simulations: int
    per_conversation: dict[str, float | None]
    total: dict[str, float | None]
    reported_by: dict[str, int]
    per_task: list[dict[str, str | int | float | None]]
    time_s_by_phase: dict[str, float] | None
    time_s_per_conversation: dict[str, float] | None


class DomainFigures(TypedDict):
    """The figures of one results file (one run, one domain)."""

    domain: str
    file: str
    tasks: int
    trials: int
    max_k: int
    simulations: int
    avg_reward: stats.EstimateFigures
    pass_hat_k: dict[str, dict[str, stats.EstimateFigures]]  # by convention, then by k
    warnings: list[str]
    noise_floor: stats.NoiseFloorFigures | None
    cost: CostFigures
    failures: Failures
    grid: list[GridRow]
    protocol: ProtocolFigures
    provenance: dict[str, object]  # read off the results file's info and the agent's settings, passed through


class RunFigures(TypedDict):
    label: str
    domains: list[DomainFigures]  # in the report's order of domains


class TaskDifference(TypedDict):
    task_id: str
    a: float  # mean reward in the first run
    b: float
    difference: float


class FlipRow(TypedDict):
    """A task with a verdict that flipped: its passes in each run, the trials it lost or gained."""

    task_id: str
    a_passed: int
    b_passed: int
    trials: int
    lost: list[int]
    gained: list[int]


class ComparisonFigures(TypedDict):
    """One run against the first, on one domain."""

    domain: str
    a: str
    b: str
    tasks: int
    trials: int
    test: str
    avg_reward_difference: dict[str, object]
    pass_hat_k_difference: dict[str, dict[str, object]]
    sentence: str
    per_task: list[TaskDifference]
    tasks_differing: int
    mcnemar: dict[str, object]
    flips: list[FlipRow]


class FrontierPoint(TypedDict):
    """A run whose agent reported its cost, against the others."""

    label: str
    avg_reward: float
    agent_cost: float  # per conversation (USD)
    total_cost: float | None
    on_frontier: bool  # no other run is at least as good for at most its cost


class Frontier(TypedDict):
    domain: str
    cost: str
    points: list[FrontierPoint]
    cost_not_reported: list[str]  # the runs whose agent did not report its cost


class GateFigures(TypedDict):
    base: str
    new: str
    alpha: float
    min_effect: float
    regression: bool
    domains: list[dict[str, object]]
    line: str


# The report's JSON ("$schema" is no Python name, hence this form).
Report = TypedDict("Report", {
    "$schema": str,
    "generated_at": str,
    "software": dict[str, str | None],
    "settings": dict[str, object],
    "domains": list[str],
    "runs": list[RunFigures],
    "comparisons": list[ComparisonFigures],
    "frontiers": list[Frontier],
    "gate": GateFigures | None,
})
