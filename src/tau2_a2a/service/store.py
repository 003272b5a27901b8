"""Where the service's evaluations live: one SQL database, SQLite by default, PostgreSQL for replicas.

The queue and the records are rows of one table, so any replica on the same
database sees every evaluation, and a queued one is claimed by exactly one
replica: a claim is a compare-and-set on its status (`UPDATE ... WHERE
status = 'queued'`), taken under `FOR UPDATE SKIP LOCKED` where the database
has it, so replicas skip each other's rows instead of waiting on them.

Leases: a replica that runs an evaluation (or holds the bearer token a queued
one needs) owns its row until `lease_until`, and renews the lease while it
lives. A row whose lease ran out belongs to a replica that died; another takes
it over. The A2A task that reports an evaluation has a lease of its own
(`follower`): the replica that received the request sends its updates, which
need not be the one running the evaluation. A SQLite database serves one
service at a time (a lock file beside it), so on start that service takes
over every row at once; a PostgreSQL replica takes back at once the rows it
held under its own name before a restart.

Nothing secret is stored: a target's token stays in the memory of the replica
that received it. A2A tasks live in the same database, in a2a-sdk's own
`DatabaseTaskStore` (see `task_store_engine`).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    Double,
    Integer,
    true,
    MetaData,
    String,
    Table,
    Text,
    and_,
    create_engine,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from tau2_a2a.client.config import redact

SCHEMA_VERSION = 1
DATABASE_NAME = "service.sqlite"
QUEUED, RUNNING = "queued", "running"
ACTIVE = (QUEUED, RUNNING)

metadata = MetaData()
evaluations = Table(
    "tau2_eval_evaluations", metadata,
    Column("evaluation_id", String(32), primary_key=True),
    Column("seq", BigInteger, nullable=False, index=True),  # queue order
    Column("status", String(16), nullable=False, index=True),
    Column("agent_auth", Boolean, nullable=False, default=False),  # needs a token held by `owner` only
    Column("owner", String(128), nullable=True),  # the replica running it (or holding its token)
    Column("lease_until", Double, nullable=True),  # epoch seconds
    Column("cancel_requested", Boolean, nullable=False, default=False),
    Column("task_id", String(64), nullable=True),  # the A2A task following it, if any
    Column("context_id", String(64), nullable=True),
    Column("follower", String(128), nullable=True),  # the replica sending that task's updates, until it ends
    Column("follower_until", Double, nullable=True),
    Column("record", Text, nullable=False),  # the rest of the record, JSON
)
schema_version = Table("tau2_eval_schema", metadata, Column("version", Integer, nullable=False))


class StoreError(RuntimeError):
    """The database cannot be used; the message says which and what to do."""


@dataclass(frozen=True)
class Row:
    """One evaluation as stored: its record plus the columns replicas coordinate on."""

    record: dict[str, Any]
    owner: str | None
    lease_until: float | None
    cancel_requested: bool
    task_id: str | None
    context_id: str | None

    @property
    def evaluation_id(self) -> str:
        return self.record["evaluation_id"]


def sqlalchemy_url(database: str, asynchronous: bool = False) -> str:
    """The SQLAlchemy URL of a `--database` value (a path, sqlite:///PATH or postgresql://...)."""
    scheme = urlsplit(database).scheme
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        return "postgresql+psycopg://" + database.split("://", 1)[1]
    if scheme.startswith("sqlite"):
        path = database.split(":///", 1)[1] if ":///" in database else ""
    elif scheme == "" or len(scheme) == 1:  # a path (or a Windows drive letter)
        path = database
    else:
        raise StoreError(f"--database {redact_url(database)!r} is neither a SQLite file nor a postgresql:// URL.")
    if not path:
        raise StoreError(f"--database {redact_url(database)!r} names no SQLite file: use sqlite:///PATH.")
    return f"sqlite+aiosqlite:///{path}" if asynchronous else f"sqlite:///{path}"


def redact_url(database: str) -> str:
    """The URL with its password replaced, for messages and logs."""
    parts = urlsplit(database)
    return redact(database, parts.password) if parts.password else database


def tune_sqlite(engine: Any) -> None:
    """WAL, so readers never wait for the writer; a commit syncs at checkpoints only (a crash of the
    process loses nothing, a power cut may lose the last commits); waits for a busy writer."""
    from sqlalchemy import event

    @event.listens_for(getattr(engine, "sync_engine", engine), "connect")
    def _pragmas(connection: Any, _record: Any) -> None:
        cursor = connection.cursor()
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "busy_timeout=30000"):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()


def default_database(results_dir: Path) -> str:
    return f"sqlite:///{(results_dir / DATABASE_NAME).resolve()}"


class EvaluationStore:
    """The evaluations table, used from any thread (SQLAlchemy pools its connections)."""

    def __init__(self, database: str) -> None:
        self.database = database
        self.url = sqlalchemy_url(database)
        self.shared = not self.url.startswith("sqlite")  # replicas may share it
        self._lock_file: Any = None
        if not self.shared:
            self._lock_sqlite(Path(self.url.split(":///", 1)[1]))
        options: dict[str, Any] = {"pool_pre_ping": True}
        if not self.shared:
            options["connect_args"] = {"timeout": 30, "check_same_thread": False}
        self.engine: Engine = create_engine(self.url, **options)
        if not self.shared:
            tune_sqlite(self.engine)
        try:
            self._migrate()
        except SQLAlchemyError as error:
            self.engine.dispose()
            cause = error.orig or error
            message = (f"Cannot use the database {redact_url(database)}: {type(cause).__name__}: "
                       f"{str(cause).strip().splitlines()[0]}. Check that it runs and the URL is right.")
            raise StoreError(redact(message, urlsplit(database).password)) from None

    def _lock_sqlite(self, path: Path) -> None:
        """One service per SQLite file: replicas need PostgreSQL."""
        path.parent.mkdir(parents=True, exist_ok=True)
        # Readable by the service's user only; SQLite gives its -wal and -shm files the database's mode.
        for private in (path, Path(f"{path}.lock")):
            os.close(os.open(private, os.O_WRONLY | os.O_CREAT, 0o600))
            private.chmod(0o600)
        self._lock_file = open(f"{path}.lock", "w")  # noqa: SIM115 (held for the store's life)
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_file.close()
            raise StoreError(
                f"Another tau2-a2a serve uses {path} already. Give this one another --results-dir, or run "
                "replicas on one PostgreSQL database (--database postgresql://...)."
            ) from None

    def _migrate(self) -> None:
        """Create the tables, or check a database an older service made."""
        with self.engine.begin() as connection:
            metadata.create_all(connection)
            found = connection.execute(select(schema_version.c.version)).scalar()
            if found is None:
                connection.execute(schema_version.insert().values(version=SCHEMA_VERSION))
            elif found > SCHEMA_VERSION:
                raise StoreError(f"The database {redact_url(self.database)} was made by a newer tau2-a2a "
                                 f"(schema {found}, this one knows {SCHEMA_VERSION}). Upgrade tau2-a2a.")

    def close(self) -> None:
        self.engine.dispose()
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    @contextmanager
    def _transaction(self) -> Iterator[Connection]:
        with self.engine.begin() as connection:
            yield connection

    # -- reading -------------------------------------------------------------------

    def get(self, evaluation_id: str) -> Row | None:
        with self.engine.connect() as connection:
            found = connection.execute(select(evaluations).where(
                evaluations.c.evaluation_id == evaluation_id)).first()
        return _row(found) if found else None

    def all(self) -> list[Row]:
        with self.engine.connect() as connection:
            return [_row(found) for found in connection.execute(select(evaluations).order_by(evaluations.c.seq))]

    def ids(self) -> set[str]:
        with self.engine.connect() as connection:
            return set(connection.execute(select(evaluations.c.evaluation_id)).scalars())

    def queue_position(self, evaluation_id: str) -> int | None:
        """1 for the next evaluation to start; None when it is not queued."""
        mine = select(evaluations.c.seq).where(and_(evaluations.c.evaluation_id == evaluation_id,
                                                    evaluations.c.status == QUEUED)).scalar_subquery()
        with self.engine.connect() as connection:
            if connection.execute(select(mine)).scalar() is None:
                return None
            return connection.execute(select(func.count()).where(
                and_(evaluations.c.status == QUEUED, evaluations.c.seq <= mine))).scalar()

    def queued_count(self) -> int:
        with self.engine.connect() as connection:
            return connection.execute(select(func.count()).where(evaluations.c.status == QUEUED)).scalar() or 0

    def running_count(self) -> int:
        with self.engine.connect() as connection:
            return connection.execute(select(func.count()).where(evaluations.c.status == RUNNING)).scalar() or 0

    # -- writing -------------------------------------------------------------------

    def insert(self, record: dict[str, Any], owner: str | None = None, lease_until: float | None = None) -> None:
        with self._transaction() as connection:
            connection.execute(evaluations.insert().values(
                evaluation_id=record["evaluation_id"], seq=time.time_ns(), status=record["status"],
                agent_auth=bool(record.get("agent_auth")), owner=owner, lease_until=lease_until,
                cancel_requested=False, record=_dump(record),
            ))

    def save(self, record: dict[str, Any], owner: str | None) -> bool:
        """Write the record; with `owner`, only while that replica still owns the row. Whether it was written."""
        condition = evaluations.c.evaluation_id == record["evaluation_id"]
        if owner is not None:
            condition = and_(condition, evaluations.c.owner == owner)
        values: dict[str, Any] = {"status": record["status"], "record": _dump(record)}
        if record["status"] not in ACTIVE:
            values.update(owner=None, lease_until=None, cancel_requested=False)
        with self._transaction() as connection:
            return connection.execute(update(evaluations).where(condition).values(**values)).rowcount == 1

    def link_task(self, evaluation_id: str, task_id: str, context_id: str, follower: str,
                  follower_until: float) -> None:
        with self._transaction() as connection:
            connection.execute(update(evaluations).where(evaluations.c.evaluation_id == evaluation_id)
                               .values(task_id=task_id, context_id=context_id, follower=follower,
                                       follower_until=follower_until))

    def unlink_task(self, evaluation_id: str) -> None:
        with self._transaction() as connection:
            connection.execute(update(evaluations).where(evaluations.c.evaluation_id == evaluation_id)
                               .values(follower=None, follower_until=None))

    def cancel_queued(self, evaluation_id: str) -> bool:
        """Take a queued evaluation off the queue (compare-and-set); whether it was still queued."""
        return self._set_status(evaluation_id, QUEUED, "canceled", owner=None, lease_until=None)

    def request_cancel(self, evaluation_id: str) -> None:
        with self._transaction() as connection:
            connection.execute(update(evaluations).where(and_(
                evaluations.c.evaluation_id == evaluation_id, evaluations.c.status.in_(ACTIVE)))
                .values(cancel_requested=True))

    def claim_queued(self, owner: str, lease_until: float) -> Row | None:
        """The next queued evaluation this replica may run, now running and owned by it; None if there is none."""
        free_or_mine = or_(evaluations.c.owner.is_(None), evaluations.c.owner == owner)
        with self._transaction() as connection:
            for candidate in connection.execute(
                    select(evaluations.c.evaluation_id)
                    .where(and_(evaluations.c.status == QUEUED, free_or_mine))
                    .order_by(evaluations.c.seq).limit(8).with_for_update(skip_locked=True)).scalars():
                claimed = connection.execute(update(evaluations).where(and_(
                    evaluations.c.evaluation_id == candidate, evaluations.c.status == QUEUED, free_or_mine))
                    .values(status=RUNNING, owner=owner, lease_until=lease_until))
                if claimed.rowcount == 1:
                    return _row(connection.execute(select(evaluations).where(
                        evaluations.c.evaluation_id == candidate)).one())
        return None

    def _stale(self, owner_column: Any, lease_column: Any, owner: str, now: float, at_start: bool) -> Any:
        """Rows whose holder is gone: its lease ran out; at start also our own earlier life's (all, on SQLite)."""
        if at_start and not self.shared:
            return true()
        stale = lease_column < now
        return or_(stale, owner_column == owner) if at_start else stale

    def claim_expired(self, owner: str, lease_until: float, now: float, at_start: bool = False) -> list[Row]:
        """Queued or running rows whose owner is gone, now owned by this replica."""
        owner_column, lease_column = evaluations.c.owner, evaluations.c.lease_until
        stale = self._stale(owner_column, lease_column, owner, now, at_start)
        return self._take_over(owner_column, lease_column, owner, lease_until,
                               and_(evaluations.c.status.in_(ACTIVE), stale))

    def claim_orphaned_tasks(self, follower: str, follower_until: float, now: float, at_start: bool = False,
                             claim: bool = True) -> list[Row]:
        """Rows whose A2A task lost its follower, now followed by this replica (none unless `claim`)."""
        if not claim:
            return []
        holder_column, lease_column = evaluations.c.follower, evaluations.c.follower_until
        return self._take_over(holder_column, lease_column, follower, follower_until,
                               self._stale(holder_column, lease_column, follower, now, at_start))

    def _take_over(self, holder: Column, lease: Column, me: str, until: float, where: Any) -> list[Row]:
        """Make `me` the holder of the held rows matching `where` (a compare-and-set on the previous holder)."""
        taken: list[Row] = []
        with self._transaction() as connection:
            candidates = connection.execute(
                select(evaluations.c.evaluation_id, holder).where(and_(holder.is_not(None), where))
                .with_for_update(skip_locked=True)).all()
            for candidate, previous in candidates:
                claimed = connection.execute(update(evaluations).where(and_(
                    evaluations.c.evaluation_id == candidate, holder == previous))
                    .values({holder.name: me, lease.name: until}))
                if claimed.rowcount == 1:
                    taken.append(_row(connection.execute(select(evaluations).where(
                        evaluations.c.evaluation_id == candidate)).one()))
        return taken

    def requeue(self, evaluation_id: str, owner: str) -> None:
        """A queued row taken over from a gone replica goes back to the shared queue."""
        with self._transaction() as connection:
            connection.execute(update(evaluations).where(and_(
                evaluations.c.evaluation_id == evaluation_id, evaluations.c.owner == owner,
                evaluations.c.status == QUEUED)).values(owner=None, lease_until=None))

    def renew(self, owner: str, lease_until: float) -> set[str]:
        """Extend this replica's leases (evaluations and A2A tasks); the evaluation ids it still owns."""
        with self._transaction() as connection:
            connection.execute(update(evaluations).where(evaluations.c.owner == owner)
                               .values(lease_until=lease_until))
            connection.execute(update(evaluations).where(evaluations.c.follower == owner)
                               .values(follower_until=lease_until))
            return set(connection.execute(select(evaluations.c.evaluation_id)
                                          .where(evaluations.c.owner == owner)).scalars())

    def cancel_requests(self, owner: str) -> set[str]:
        with self.engine.connect() as connection:
            return set(connection.execute(select(evaluations.c.evaluation_id).where(and_(
                evaluations.c.owner == owner, evaluations.c.cancel_requested.is_(True)))).scalars())

    def release(self, owner: str) -> None:
        """Give up this replica's rows at once (a clean shutdown): the next replica resumes them."""
        with self._transaction() as connection:
            connection.execute(update(evaluations).where(evaluations.c.owner == owner)
                               .values(lease_until=0.0))
            connection.execute(update(evaluations).where(evaluations.c.follower == owner)
                               .values(follower_until=0.0))

    def _set_status(self, evaluation_id: str, expected: str, status: str, **values: Any) -> bool:
        with self._transaction() as connection:
            found = connection.execute(select(evaluations.c.record).where(and_(
                evaluations.c.evaluation_id == evaluation_id, evaluations.c.status == expected))
                .with_for_update()).scalar()
            if found is None:
                return False
            record = {**json.loads(found), "status": status}
            return connection.execute(update(evaluations).where(and_(
                evaluations.c.evaluation_id == evaluation_id, evaluations.c.status == expected))
                .values(status=status, record=_dump(record), **values)).rowcount == 1


def _dump(record: dict[str, Any]) -> str:
    return json.dumps(record)


def _row(found: Any) -> Row:
    record = json.loads(found.record)
    record["status"] = found.status
    return Row(record=record, owner=found.owner, lease_until=found.lease_until,
               cancel_requested=bool(found.cancel_requested), task_id=found.task_id, context_id=found.context_id)


def replica_name(port: int | None = None) -> str:
    """A replica's id: stable across restarts on one host and port, so a restarted replica takes its rows back."""
    return f"{os.uname().nodename}:{port}" if port else f"{os.uname().nodename}:pid{os.getpid()}"
