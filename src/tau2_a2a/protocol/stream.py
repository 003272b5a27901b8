"""One reply from a stream of A2A events (SendStreamingMessage), no I/O.

A streaming agent answers with a Message, or with a Task followed by status
and artifact updates. The reply is what a blocking call would have returned:
the final message, or the task with its last status and its artifacts, where
`append` chunks of an artifact are joined in order (adjacent text chunks into
one text, so a sentence streamed word by word reads as one sentence).

The LLM usage the events reported (`protocol.usage`: ADK puts one LLM call's
usage on each status update, which the assembled task does not keep) is read
off every event and kept in the assembled reply's metadata under
`ASSEMBLED_USAGE_KEY`, so the turn's usage survives assembly.
"""

from __future__ import annotations

from a2a.types import Message, StreamResponse, Task, TaskArtifactUpdateEvent

from tau2_a2a.protocol.toolcalls import MalformedReply
from tau2_a2a.protocol.usage import ASSEMBLED_USAGE_KEY, UsageCollector, assembled_note


class StreamedReply:
    """Folds stream events into the reply; `done` once a Message arrives."""

    def __init__(self) -> None:
        self.message: Message | None = None
        self.task: Task | None = None
        self.usage = UsageCollector()

    @property
    def done(self) -> bool:
        return self.message is not None

    def add(self, event: StreamResponse) -> None:
        self.usage.add_event(event)
        if event.HasField("message"):
            self.message = event.message
        elif event.HasField("task"):
            self.task = Task()
            self.task.CopyFrom(event.task)
        elif event.HasField("status_update"):
            update = event.status_update
            task = self._task_for(update.task_id, update.context_id)
            task.status.CopyFrom(update.status)
        elif event.HasField("artifact_update"):
            update = event.artifact_update
            _apply_artifact(self._task_for(update.task_id, update.context_id), update)

    def reply(self) -> Message | Task:
        """The reply; with the usage its events reported, if any, in its metadata."""
        reply = self.message if self.message is not None else self.task
        if reply is None:
            raise MalformedReply("expected a Message or a Task in the stream, got no event")
        usage = self.usage.usage()
        if usage is not None:
            reply.metadata.update({ASSEMBLED_USAGE_KEY: assembled_note(usage)})
        return reply

    def _task_for(self, task_id: str, context_id: str) -> Task:
        """The task an update belongs to; an update before any Task event starts one."""
        if self.task is None:
            self.task = Task(id=task_id, context_id=context_id)
        return self.task


def _apply_artifact(task: Task, update: TaskArtifactUpdateEvent) -> None:
    incoming = update.artifact
    existing = next((a for a in task.artifacts if a.artifact_id == incoming.artifact_id), None)
    if existing is None:
        task.artifacts.append(incoming)
        return
    if not update.append:
        existing.CopyFrom(incoming)
        return
    for part in incoming.parts:
        last = existing.parts[-1] if existing.parts else None
        if last is not None and last.HasField("text") and part.HasField("text"):
            last.text += part.text
        else:
            existing.parts.append(part)
