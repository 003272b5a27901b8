"""tau2's side of a run's trace: each simulation, its turns, its tool calls, and the user simulator's and the
judge's LLM calls, as OpenTelemetry spans (see `client.tracing`; nothing here runs while tracing is off).

    run (runner) -> simulation (task, trial, seed; reward once scored)
        -> turn (user | agent | env) -> A2A request (client.session) / tool call / user simulator's LLM call
        -> evaluation -> judge's LLM calls

A simulation's span is made where tau2's run calls its simulation function
(this process, or the Ray driver, whose actors continue it). It starts a trace
of its own, linked to the run's span: one trace per simulation, which a viewer
lists with its task, trial and reward, and which stays small enough to read
(a run of a few hundred simulations would be one trace of many thousand
spans otherwise). Each turn is one
step of tau2's orchestrator and says the message it produced; tool calls are
the environment's own. The LLM calls are LiteLLM's (both tau2 distributions
call it), seen through a LiteLLM callback that makes a span only for a call
made inside a turn or an evaluation, in the simulation's own context: the
user simulator's, the judge's, and a native tau2 agent's (`tau2-a2a ab`'s
native arm); the LLM calls of anything else in the process (an agent served
in it, on threads of its own) are not tau2's.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tau2_a2a.client import tracing
from tau2_a2a.client.records import RAW_DATA_KEY, TRACE_ID_KEY

if TYPE_CHECKING:
    from litellm.integrations.custom_logger import CustomLogger
    from opentelemetry.trace import Span

    from tau2_a2a.tau2bench.seam.distribution import Environment, Message, SimulationRun, ToolCall, ToolMessage

USER_SIMULATOR, NATIVE_AGENT, JUDGE = "user_simulator", "agent", "judge"
# Whose LLM calls a turn's are (an A2A agent makes none here: a tau2 agent running in this process does).
_CALLERS = {"user": USER_SIMULATOR, "agent": NATIVE_AGENT}
_llm_caller: ContextVar[str | None] = ContextVar("tau2_a2a_llm_caller", default=None)
_trials: ContextVar[dict[int, int] | None] = ContextVar("tau2_a2a_trials", default=None)
_llm_spans_installed = False


@contextmanager
def numbered_trials(seed: int | None, num_trials: int) -> Iterator[None]:
    """Inside, a simulation's seed names its trial: tau2 draws one seed per trial from the run's seed."""
    if seed is None:
        yield
        return
    draw = random.Random(seed)
    token = _trials.set({draw.randint(0, 1000000): trial for trial in range(num_trials)})
    try:
        yield
    finally:
        _trials.reset(token)


@contextmanager
def simulation(task_id: str, seed: int | None, domain: str | None) -> Iterator[Span | None]:
    """One simulation's span (None when tracing is off); `scored` adds its outcome."""
    if not tracing.enabled():
        yield None
        return
    _install_llm_spans()
    trial = (_trials.get() or {}).get(seed) if seed is not None else None
    run = tracing.trace_id()
    with tracing.span(f"simulation {task_id}", {"tau2.task.id": task_id, "tau2.trial": trial, "tau2.seed": seed,
                                                "tau2.domain": domain, "tau2_a2a.run.trace_id": run},
                      new_trace=True) as span:
        yield span


def scored(span: Span | None, run: SimulationRun | None) -> None:
    """A simulation's span, once tau2 scored it: its reward and how it ended."""
    if span is None or run is None:
        return
    reward = getattr(getattr(run, "reward_info", None), "reward", None)
    termination = getattr(run, "termination_reason", None)
    span.set_attributes(tracing.attributes_of({
        "tau2.reward": reward, "tau2.termination_reason": getattr(termination, "value", termination),
        "tau2.simulation.id": getattr(run, "id", None)}))


@contextmanager
def turn(step: int, role: object, trajectory: list[Message]) -> Iterator[None]:
    """One step of tau2's orchestrator: `role` acts (user, agent, env); the span says what it said."""
    if not tracing.enabled():
        yield
        return
    name = getattr(role, "value", str(role))
    before = len(trajectory)
    caller = _llm_caller.set(_CALLERS.get(name))
    try:
        with tracing.span(f"turn {step}: {name}", {"tau2.turn": step, "tau2.role": name}) as span:
            yield
            span.set_attributes(tracing.attributes_of(said(trajectory[before:])))
    finally:
        _llm_caller.reset(caller)


def said(messages: list[Message]) -> dict[str, str | None]:
    """What a turn's messages said, as attributes: the text, the tool calls asked for, tool results."""
    texts = [m.content for m in messages if getattr(m, "content", None) and getattr(m, "role", "") != "tool"]
    calls = [{"name": c.name, "arguments": c.arguments} for m in messages for c in (getattr(m, "tool_calls", None)
                                                                                    or [])]
    results = [m.content for m in messages if getattr(m, "role", "") == "tool"]
    return {"tau2.message.content": "\n".join(texts) or None,
            "tau2.message.tool_calls": json.dumps(calls, default=str) if calls else None,
            "tau2.message.tool_results": json.dumps(results, default=str) if results else None}


def traced_tools(environment: Environment) -> None:
    """Each tool call `environment` runs (its `get_response`) in a span of its own, while tracing is on."""
    if not tracing.enabled():
        return
    respond = environment.get_response

    def get_response(call: ToolCall) -> ToolMessage:
        with tracing.span(f"execute_tool {call.name}", {
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name, "gen_ai.tool.type": "function",
                "gen_ai.tool.call.id": call.id, "tau2.tool.requestor": getattr(call, "requestor", None),
                "gen_ai.tool.call.arguments": json.dumps(call.arguments, default=str)}) as span:
            message = respond(call)
            span.set_attribute("gen_ai.tool.call.result", str(message.content or "")[:tracing.MAX_TEXT])
            if message.error:
                tracing.failed(span, "tool_error")
            return message

    environment.get_response = get_response


def traced_evaluation(evaluate: Callable[..., Any]) -> Callable[..., Any]:
    """tau2's `evaluate_simulation`, in an evaluation span whose LLM calls are the judge's, while tracing is on."""

    def evaluate_simulation(*args: Any, **kwargs: Any) -> Any:
        if not tracing.enabled():
            return evaluate(*args, **kwargs)
        caller = _llm_caller.set(JUDGE)
        try:
            with tracing.span("evaluation", {"tau2.evaluation_type": str(kwargs.get("evaluation_type", "")) or None}
                              ) as span:
                reward_info = evaluate(*args, **kwargs)
                span.set_attributes(tracing.attributes_of({"tau2.reward": getattr(reward_info, "reward", None)}))
                return reward_info
        finally:
            _llm_caller.reset(caller)

    evaluate_simulation.traced = evaluate  # type: ignore[attr-defined]
    return evaluate_simulation


def record_trace_id(messages: list[Message] | None) -> None:
    """The trace's id in the first A2A record of a trajectory, where a results file keeps it."""
    found = tracing.trace_id()
    if found is None:
        return
    for message in messages or []:
        raw = (getattr(message, "raw_data", None) or {}).get(RAW_DATA_KEY)
        if isinstance(raw, dict):
            raw[TRACE_ID_KEY] = found
            return


# -- LLM calls --------------------------------------------------------------------------


def _install_llm_spans() -> None:
    """Add the LiteLLM callback (once per process)."""
    global _llm_spans_installed
    if _llm_spans_installed:
        return
    import litellm

    litellm.callbacks = [*(litellm.callbacks or []), _llm_logger()]
    _llm_spans_installed = True


def _llm_logger() -> CustomLogger:
    from litellm.integrations.custom_logger import CustomLogger

    class LlmCallSpans(CustomLogger):  # type: ignore[misc]
        """A span for each LiteLLM call tau2's user simulator or judge makes (see the module's docstring).

        LiteLLM reports a finished call with its start and end times, in the
        caller's context (a copy, on a thread of its own): the span is made
        then, under the caller's turn or evaluation, with those times.
        """

        def log_success_event(self, kwargs: dict[str, Any], response_obj: object, start_time: datetime | float,
                              end_time: datetime | float) -> None:
            self._span(kwargs, response_obj, start_time, end_time, None)

        def log_failure_event(self, kwargs: dict[str, Any], response_obj: object, start_time: datetime | float,
                              end_time: datetime | float) -> None:
            error = kwargs.get("exception") if isinstance(kwargs, dict) else None
            self._span(kwargs, None, start_time, end_time, type(error).__name__ if error is not None else "error")

        async def async_log_success_event(self, kwargs: dict[str, Any], response_obj: object,
                                          start_time: datetime | float, end_time: datetime | float) -> None:
            self._span(kwargs, response_obj, start_time, end_time, None)

        async def async_log_failure_event(self, kwargs: dict[str, Any], response_obj: object,
                                          start_time: datetime | float, end_time: datetime | float) -> None:
            self.log_failure_event(kwargs, response_obj, start_time, end_time)

        @staticmethod
        def _span(kwargs: dict[str, Any], response: object, start_time: datetime | float,
                  end_time: datetime | float, error: str | None) -> None:
            caller = _llm_caller.get()
            if caller is None or not tracing.enabled():
                return
            span = tracing.start_span(f"chat {kwargs.get('model')}", llm_call_attributes(caller, kwargs, response),
                                      start_time=_nanoseconds(start_time))
            if span is None:
                return
            if error is not None:
                tracing.failed(span, error)
            span.end(end_time=_nanoseconds(end_time))

    return LlmCallSpans()


def llm_call_attributes(caller: str, kwargs: dict[str, Any], response: object) -> dict[str, object]:
    """A LiteLLM call's attributes in OpenTelemetry's GenAI conventions: never its messages' keys or headers."""
    usage = getattr(response, "usage", None)
    params = kwargs.get("optional_params") or {}
    choices = getattr(response, "choices", None) or []
    reasons = [str(getattr(c, "finish_reason", "")) for c in choices if getattr(c, "finish_reason", None)]
    return {"gen_ai.operation.name": "chat", "gen_ai.provider.name": kwargs.get("custom_llm_provider"),
            "gen_ai.request.model": kwargs.get("model"), "gen_ai.request.temperature": params.get("temperature"),
            "gen_ai.response.model": getattr(response, "model", None),
            "gen_ai.response.id": getattr(response, "id", None),
            "gen_ai.response.finish_reasons": reasons or None,
            "gen_ai.usage.input_tokens": getattr(usage, "prompt_tokens", None),
            "gen_ai.usage.output_tokens": getattr(usage, "completion_tokens", None),
            "gen_ai.agent.name": caller, "tau2.llm.caller": caller}


def _nanoseconds(moment: object) -> int | None:
    if isinstance(moment, datetime):
        return int(moment.timestamp() * 1e9)
    if isinstance(moment, (int, float)):
        return int(moment * 1e9)
    return None
