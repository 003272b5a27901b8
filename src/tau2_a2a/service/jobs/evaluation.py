"""An evaluation: its status, its record (what the service keeps of it), and what callers see of it.

The record is kept in the service's database (store.py); its status is the
table's own column, so the record's JSON there holds everything but the
status. Callers see it as JSON (`EvaluationView.to_json`): the request as it
was checked, its status and times, the error that ended it, what it produced,
and either its queue position or its progress.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from enum import Enum

from tau2_a2a.service.request import EvaluationRequest
from tau2_a2a.service.wire import JsonObject

ID_PATTERN = re.compile(r"^ev-[0-9a-f]{12}$")


class Status(str, Enum):
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"

    @property
    def active(self) -> bool:
        """Queued or running: not ended."""
        return self in (Status.QUEUED, Status.RUNNING)


TERMINAL = frozenset({Status.COMPLETED, Status.FAILED, Status.CANCELED})


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_evaluation_id() -> str:
    return f"ev-{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True)
class EvaluationRecord:
    """One evaluation, from its request to what it produced."""

    evaluation_id: str
    request: EvaluationRequest
    agent_auth: bool  # its target needs a bearer token, held in the memory of one replica only
    status: Status = Status.QUEUED
    created_at: str = field(default_factory=now)
    started_at: str | None = None
    finished_at: str | None = None
    error: str | None = None  # why it failed, in the service's words
    result: JsonObject | None = None  # what it produced: summary.outcome's JSON
    replica: str | None = None  # the replica that ran it last
    resumed: int = 0  # how many times a service process took it up again

    @property
    def total_simulations(self) -> int:
        return self.request.total_simulations

    def running(self, replica: str, resumed: bool) -> EvaluationRecord:
        """The record of this evaluation started (or taken up again) by `replica`."""
        return replace(self, status=Status.RUNNING, started_at=self.started_at or now(), replica=replica,
                       resumed=self.resumed + 1 if resumed else self.resumed)

    def ended(self, status: Status, error: str | None, result: JsonObject | None) -> EvaluationRecord:
        return replace(self, status=status, error=error, finished_at=now(), result=result)

    def stored(self) -> JsonObject:
        """The JSON the database keeps beside the status column: all but the status (the request's domain,
        endpoint and total stay at the top, where earlier versions, replicas among them, read them)."""
        data = self.to_json()
        del data["status"]
        return data

    def to_json(self) -> JsonObject:
        data = {
            "evaluation_id": self.evaluation_id,
            "status": self.status.value,
            "domain": self.request.domain,
            "agent_endpoint": self.request.agent_endpoint,
            "request": self.request.to_json(),
            "total_simulations": self.total_simulations,
            "agent_auth": self.agent_auth,
            "created_at": self.created_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "error": self.error,
            "result": self.result,
        }
        if self.replica is not None:
            data["replica"] = self.replica
        if self.resumed:
            data["resumed"] = self.resumed
        return data

    @classmethod
    def from_json(cls, data: JsonObject, status: str) -> EvaluationRecord:
        """The record `stored` (or an earlier version: the same names, and a copy of the status) kept."""
        return cls(
            evaluation_id=data["evaluation_id"], request=EvaluationRequest.from_json(data["request"]),
            agent_auth=bool(data.get("agent_auth")), status=Status(status), created_at=data["created_at"],
            started_at=data.get("started_at"), finished_at=data.get("finished_at"), error=data.get("error"),
            result=data.get("result"), replica=data.get("replica"), resumed=data.get("resumed") or 0,
        )


@dataclass(frozen=True)
class Progress:
    """Simulations done of the total, and the average reward so far (None before any is scored)."""

    simulations_done: int
    simulations_total: int
    avg_reward_so_far: float | None

    def to_json(self) -> JsonObject:
        return asdict(self)


@dataclass(frozen=True)
class EvaluationView:
    """An evaluation as callers see it: its record, with its queue position while queued, or its progress."""

    record: EvaluationRecord
    queue_position: int | None = None
    progress: Progress | None = None

    @property
    def evaluation_id(self) -> str:
        return self.record.evaluation_id

    @property
    def status(self) -> Status:
        return self.record.status

    def to_json(self) -> JsonObject:
        data = self.record.to_json()
        if self.queue_position is not None:
            data["queue_position"] = self.queue_position
        if self.progress is not None:
            data["progress"] = self.progress.to_json()
        return data
