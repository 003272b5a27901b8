"""The evaluations' records in the database: written, read, listed. Nothing else.

Which replica may run what, and when, is the queue's (queue.py), on the same
table. A write with `held_by` lands only while that replica still holds the
row: a replica that lost an evaluation to another cannot overwrite what the
other records.
"""

from __future__ import annotations

import time

from sqlalchemy import and_, select, update

from tau2_a2a.service.jobs.database import Database, evaluations, record_of, stored_json
from tau2_a2a.service.jobs.evaluation import EvaluationRecord


class EvaluationStore:
    def __init__(self, database: Database) -> None:
        self.database = database

    def insert(self, record: EvaluationRecord, held_by: str | None = None, lease_until: float | None = None) -> None:
        """A new evaluation, at the end of the queue; held by `held_by` until `lease_until` when given."""
        with self.database.transaction() as connection:
            connection.execute(evaluations.insert().values(
                evaluation_id=record.evaluation_id, seq=time.time_ns(), status=record.status.value,
                agent_auth=record.agent_auth, owner=held_by, lease_until=lease_until, cancel_requested=False,
                record=stored_json(record),
            ))

    def save(self, record: EvaluationRecord, held_by: str | None) -> bool:
        """Write the record; with `held_by`, only while that replica still holds the row. Whether it was written.
        An ended evaluation is held by nobody from then on."""
        condition = evaluations.c.evaluation_id == record.evaluation_id
        if held_by is not None:
            condition = and_(condition, evaluations.c.owner == held_by)
        released = {} if record.status.active else {"owner": None, "lease_until": None, "cancel_requested": False}
        with self.database.transaction() as connection:
            return connection.execute(update(evaluations).where(condition).values(
                status=record.status.value, record=stored_json(record), **released)).rowcount == 1

    def get(self, evaluation_id: str) -> EvaluationRecord | None:
        with self.database.reading() as connection:
            found = connection.execute(select(evaluations).where(
                evaluations.c.evaluation_id == evaluation_id)).first()
        return record_of(found) if found else None

    def all(self) -> list[EvaluationRecord]:
        """Every record, in the order the evaluations were queued."""
        with self.database.reading() as connection:
            return [record_of(found) for found in connection.execute(select(evaluations).order_by(evaluations.c.seq))]

    def ids(self) -> set[str]:
        with self.database.reading() as connection:
            return set(connection.execute(select(evaluations.c.evaluation_id)).scalars())
