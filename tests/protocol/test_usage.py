"""The usage an agent reports with a reply, in every shape, counted once per turn and per LLM call."""

from __future__ import annotations

import math
from typing import Any

import pytest
from a2a.helpers import new_text_part
from a2a.types import (
    Artifact,
    Message,
    Role,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from tau2_a2a.client.pricing import price_tokens
from tau2_a2a.client.turn_usage import tau2_usage_and_cost
from tau2_a2a.protocol.stream import StreamedReply
from tau2_a2a.protocol.usage import (
    ADK,
    ASSEMBLED_USAGE_KEY,
    EXTENSION,
    KAGENT,
    LLM_USAGE,
    USAGE_EXTENSION_URI,
    ReportedUsage,
    from_genai,
    reported_usage,
)


def message(metadata: dict[str, Any] | None = None, text: str = "Hello") -> Message:
    reply = Message(message_id="m", role=Role.ROLE_AGENT, parts=[new_text_part(text)])
    if metadata:
        reply.metadata.update(metadata)
    return reply


def adk(event_id: str, prompt: int, candidates: int, **more: Any) -> dict[str, Any]:
    """What google-adk's converter puts in an event's metadata for one LLM call."""
    return {"adk_event_id": event_id, "adk_invocation_id": "e-1", "adk_author": "tau2_adk_agent",
            "adk_usage_metadata": {"promptTokenCount": prompt, "candidatesTokenCount": candidates,
                                   "totalTokenCount": prompt + candidates, **more}}


def task(metadata: dict[str, Any] | None = None, status_metadata: dict[str, Any] | None = None,
         artifacts: list[dict[str, Any]] | None = None, history: list[dict[str, Any]] | None = None) -> Task:
    result = Task(id="t", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED))
    if metadata:
        result.metadata.update(metadata)
    if status_metadata is not None:
        result.status.message.CopyFrom(message(status_metadata))
    for index, artifact_metadata in enumerate(artifacts or []):
        artifact = Artifact(artifact_id=f"a{index}", parts=[new_text_part("answer")])
        artifact.metadata.update(artifact_metadata)
        result.artifacts.append(artifact)
    for old in history or []:
        result.history.append(message(old))
    return result


EXTENSION_PAYLOAD = {"input_tokens": 1200, "output_tokens": 80, "cached_input_tokens": 1000,
                     "reasoning_tokens": 16, "cost_usd": 0.0031, "model": "gpt-4.1-2025-04-14", "llm_calls": 2}
FROM_EXTENSION = ReportedUsage(1200, 80, 1000, 16, 0.0031, "gpt-4.1-2025-04-14", 2, EXTENSION)


@pytest.mark.parametrize("where", ["message", "task", "status", "artifact"])
def test_the_extension_is_read_wherever_the_reply_carries_it(where: str) -> None:
    metadata = {USAGE_EXTENSION_URI: EXTENSION_PAYLOAD}
    reply = {"message": lambda: message(metadata), "task": lambda: task(metadata),
             "status": lambda: task(status_metadata=metadata), "artifact": lambda: task(artifacts=[metadata])}[where]()
    assert reported_usage(reply) == FROM_EXTENSION


def test_a_reply_without_usage_reports_none() -> None:
    assert reported_usage(message()) is None
    assert reported_usage(task(metadata={"other": 1}, status_metadata={}, artifacts=[{}])) is None


def test_the_former_llm_usage_is_read() -> None:
    usage = reported_usage(message({"llm_usage": {"prompt_tokens": 10, "completion_tokens": 3, "cost": 0.5}}))
    assert usage == ReportedUsage(10, 3, cost_usd=0.5, source=LLM_USAGE)


def test_adk_calls_of_one_turn_add_up_and_each_counts_once() -> None:
    """Two LLM calls (two ADK events); the first also in the artifact, as ADK's newer converter puts it."""
    first, second = adk("ev-1", 100, 10, cachedContentTokenCount=40), adk("ev-2", 130, 7)
    reply = task(metadata=second, status_metadata=first, artifacts=[first])
    assert reported_usage(reply) == ReportedUsage(230, 17, 40, 0, None, None, 2, ADK)


def test_the_extension_wins_over_adks_own_usage() -> None:
    reply = task(metadata=adk("ev-1", 100, 10), artifacts=[{USAGE_EXTENSION_URI: EXTENSION_PAYLOAD}])
    assert reported_usage(reply) == FROM_EXTENSION


def test_the_history_of_a_continued_task_is_not_counted_again() -> None:
    reply = task(metadata=adk("ev-2", 50, 5), history=[adk("ev-1", 100, 10)])
    assert reported_usage(reply) == ReportedUsage(50, 5, source=ADK)


def test_kagent_partial_events_are_skipped() -> None:
    def kagent(prompt: int, partial: bool) -> dict[str, Any]:
        return {"kagent_usage_metadata": {"promptTokenCount": prompt, "candidatesTokenCount": 1},
                "kagent_partial": partial}

    collected = reported_usage(task(status_metadata=kagent(5, True), artifacts=[kagent(70, False)]))
    assert collected == ReportedUsage(70, 1, source=KAGENT)


def test_thoughts_count_as_output_only_when_the_total_counts_them_apart() -> None:
    gemini = {"promptTokenCount": 100, "candidatesTokenCount": 20, "thoughtsTokenCount": 30, "totalTokenCount": 150}
    through_litellm = {"promptTokenCount": 100, "candidatesTokenCount": 50, "thoughtsTokenCount": 30,
                       "totalTokenCount": 150}
    assert (from_genai(gemini).output_tokens, from_genai(gemini).reasoning_tokens) == (50, 30)
    assert (from_genai(through_litellm).output_tokens, from_genai(through_litellm).reasoning_tokens) == (50, 30)


@pytest.mark.parametrize("bad", ["12", -3, math.inf, True, None])
def test_a_count_that_is_not_a_number_is_not_read(bad: Any) -> None:
    assert reported_usage(message({USAGE_EXTENSION_URI: {"input_tokens": bad, "output_tokens": bad}})) is None
    usage = reported_usage(message({USAGE_EXTENSION_URI: {"input_tokens": 7, "output_tokens": 2, "cost_usd": bad}}))
    assert usage == ReportedUsage(7, 2, source=EXTENSION)


def stream(*events: Any) -> StreamedReply:
    streamed = StreamedReply()
    for event in events:
        if isinstance(event, Task):
            streamed.add(StreamResponse(task=event))
        elif isinstance(event, TaskStatusUpdateEvent):
            streamed.add(StreamResponse(status_update=event))
        elif isinstance(event, TaskArtifactUpdateEvent):
            streamed.add(StreamResponse(artifact_update=event))
        else:
            streamed.add(StreamResponse(message=event))
    return streamed


def status_update(metadata: dict[str, Any], state: TaskState = TaskState.TASK_STATE_WORKING) -> TaskStatusUpdateEvent:
    update = TaskStatusUpdateEvent(task_id="t", context_id="c", status=TaskStatus(state=state))
    update.status.message.CopyFrom(message(text="thinking"))
    update.metadata.update(metadata)
    return update


def artifact_update(metadata: dict[str, Any], text: str, append: bool) -> TaskArtifactUpdateEvent:
    update = TaskArtifactUpdateEvent(task_id="t", context_id="c", append=append,
                                     artifact=Artifact(artifact_id="a", parts=[new_text_part(text)]))
    update.artifact.metadata.update(metadata)
    return update


def test_a_stream_keeps_the_usage_its_events_reported() -> None:
    """ADK's events as its A2A converter streams them: one status update per LLM call, usage on the event itself
    (which the assembled task does not keep), then the final artifact and status with no usage."""
    streamed = stream(Task(id="t", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)),
                      status_update(adk("ev-1", 100, 10)), status_update(adk("ev-2", 130, 7)),
                      artifact_update({"adk_app_name": "app"}, "the answer", append=False),
                      status_update({"adk_app_name": "app"}, TaskState.TASK_STATE_COMPLETED))
    reply = streamed.reply()
    assert not reply.metadata.fields or ASSEMBLED_USAGE_KEY in reply.metadata
    assert reported_usage(reply) == ReportedUsage(230, 17, 0, 0, None, None, 2, ADK)


def test_a_streamed_partial_call_repeating_its_usage_counts_once() -> None:
    """Partial chunks of one LLM call share its event id; the final chunk's usage is the call's."""
    streamed = stream(artifact_update(adk("ev-1", 100, 3), "The ans", append=False),
                      artifact_update(adk("ev-1", 100, 6), "wer", append=True),
                      artifact_update(adk("ev-1", 100, 9), "The answer", append=False))
    assert reported_usage(streamed.reply()) == ReportedUsage(100, 9, source=ADK)


def test_a_streamed_message_keeps_its_extension() -> None:
    streamed = stream(message({USAGE_EXTENSION_URI: EXTENSION_PAYLOAD}))
    assert reported_usage(streamed.reply()) == FROM_EXTENSION


def test_a_stream_that_reports_nothing_assembles_as_before() -> None:
    streamed = stream(status_update({"adk_app_name": "app"}), artifact_update({}, "hi", append=False))
    reply = streamed.reply()
    assert ASSEMBLED_USAGE_KEY not in reply.metadata and reported_usage(reply) is None


def turn_message(role: Role, kind: str | None = None) -> Message:
    """A message of an ADK turn as a2a-sdk's task store keeps it in the history: no metadata of its own, its
    parts marked by ADK's converter (a tool call, a tool result) or plain text."""
    part = new_text_part("text")
    if kind is not None:
        part.metadata.update({"adk_type": kind})
    return Message(message_id=f"m-{kind}", role=role, parts=[part])


def blocking_adk_task(*turn: str | None, earlier: tuple[str | None, ...] = ()) -> Task:
    """A blocking reply of ADK's executor: the last LLM call's usage on the Task, every event's message in history."""
    reply = task(metadata=adk("ev-3", 7348, 10))
    user = turn_message(Role.ROLE_USER)
    for kinds in (earlier, turn) if earlier else (turn,):
        reply.history.append(user)
        reply.history.extend(turn_message(Role.ROLE_AGENT, kind) for kind in kinds)
    return reply


CALL, RESULT, TEXT = "function_call", "function_response", None


def test_a_blocking_adk_turn_of_several_llm_calls_is_partial() -> None:
    """Over MCP an ADK turn calls the LLM for each tool call and for its text; a blocking Task keeps the last
    call's usage only: at least that, said to be partial, through the assembled reply too."""
    reply = blocking_adk_task(CALL, RESULT, CALL, RESULT, TEXT)
    assert reported_usage(reply) == ReportedUsage(7348, 10, source=ADK, partial=True)
    assert reported_usage(stream(reply).reply()) == ReportedUsage(7348, 10, source=ADK, partial=True)


def test_a_blocking_adk_turn_of_one_llm_call_is_whole() -> None:
    """One call (the message mode's turn), or earlier turns' calls before the user's last message: whole."""
    assert reported_usage(blocking_adk_task(TEXT)) == ReportedUsage(7348, 10, source=ADK)
    assert reported_usage(blocking_adk_task(TEXT, earlier=(CALL, RESULT, TEXT))) == ReportedUsage(
        7348, 10, source=ADK)


def test_a_partial_turn_is_priced_as_unknown_with_its_lower_bound_kept() -> None:
    record, cost = tau2_usage_and_cost(blocking_adk_task(CALL, RESULT, TEXT), "gpt-4.1-2025-04-14")
    assert cost is None and record is not None
    assert record["partial"] is True
    assert record["cost_at_least"] == price_tokens("gpt-4.1-2025-04-14", 7348, 10)
    whole, whole_cost = tau2_usage_and_cost(blocking_adk_task(TEXT), "gpt-4.1-2025-04-14")
    assert whole is not None and "partial" not in whole and whole_cost == price_tokens("gpt-4.1-2025-04-14", 7348, 10)
