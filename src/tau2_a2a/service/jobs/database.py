"""The service's SQL database: SQLite by default, PostgreSQL for replicas; its one table of evaluations.

The records (store.py) and the queue with its leases (queue.py) are rows of
one table, so any replica on the same database sees every evaluation. A
SQLite database serves one service at a time (a lock file beside it):
replicas need PostgreSQL. A2A tasks live in the same database, in a2a-sdk's
own `DatabaseTaskStore` (see `sqlalchemy_url`, used by app.py).

Nothing secret is stored: a target's token stays in the memory of the replica
that received it.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import urlsplit

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    Double,
    Integer,
    MetaData,
    Row,
    String,
    Table,
    Text,
    create_engine,
    event,
    select,
)
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from tau2_a2a.client.config import redact
from tau2_a2a.service.jobs.errors import EvaluationError
from tau2_a2a.service.jobs.evaluation import EvaluationRecord

if TYPE_CHECKING:
    from sqlalchemy.engine.interfaces import DBAPIConnection
    from sqlalchemy.ext.asyncio import AsyncEngine
    from sqlalchemy.pool import ConnectionPoolEntry

SCHEMA_VERSION = 1
DATABASE_NAME = "service.sqlite"

metadata = MetaData()
evaluations = Table(
    "tau2_eval_evaluations", metadata,
    Column("evaluation_id", String(32), primary_key=True),
    Column("seq", BigInteger, nullable=False, index=True),  # queue order
    Column("status", String(16), nullable=False, index=True),  # the record's status: kept here only
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


def tune_sqlite(engine: Engine | AsyncEngine) -> None:
    """WAL, so readers never wait for the writer; a commit syncs at checkpoints only (a crash of the
    process loses nothing, a power cut may lose the last commits); waits for a busy writer."""

    @event.listens_for(getattr(engine, "sync_engine", engine), "connect")
    def _pragmas(connection: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
        cursor = connection.cursor()
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "busy_timeout=30000"):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()


def default_database(results_dir: Path) -> str:
    return f"sqlite:///{(results_dir / DATABASE_NAME).resolve()}"


class Database:
    """One database of evaluations, used from any thread (SQLAlchemy pools its connections).

    Made without I/O; `open` connects, takes SQLite's lock and creates or checks the tables.
    """

    def __init__(self, location: str) -> None:
        self.location = location  # a SQLite file (a path or sqlite:///PATH) or a postgresql:// URL
        self.url = sqlalchemy_url(location)
        self.shared = not self.url.startswith("sqlite")  # replicas may share it
        self._engine: Engine | None = None
        self._lock_file: IO[str] | None = None

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            raise StoreError(f"The database {redact_url(self.location)} is not open.")
        return self._engine

    def open(self) -> None:
        """Connect, and create the tables (or check those an older service made); StoreError saying why not."""
        if not self.shared:
            self._lock_sqlite(Path(self.url.split(":///", 1)[1]))
        if self.shared:
            engine = create_engine(self.url, pool_pre_ping=True)
        else:
            engine = create_engine(self.url, pool_pre_ping=True,
                                   connect_args={"timeout": 30, "check_same_thread": False})
            tune_sqlite(engine)
        try:
            self._migrate(engine)
        except SQLAlchemyError as error:
            engine.dispose()
            self._unlock()
            cause = getattr(error, "orig", None) or error  # the DBAPI's own error, when SQLAlchemy wraps one
            message = (f"Cannot use the database {redact_url(self.location)}: {type(cause).__name__}: "
                       f"{str(cause).strip().splitlines()[0]}. Check that it runs and the URL is right.")
            raise StoreError(redact(message, urlsplit(self.location).password)) from None
        except StoreError:
            engine.dispose()
            self._unlock()
            raise
        self._engine = engine

    def _lock_sqlite(self, path: Path) -> None:
        """One service per SQLite file: replicas need PostgreSQL."""
        path.parent.mkdir(parents=True, exist_ok=True)
        # Readable by the service's user only; SQLite gives its -wal and -shm files the database's mode.
        for private in (path, Path(f"{path}.lock")):
            os.close(os.open(private, os.O_WRONLY | os.O_CREAT, 0o600))
            private.chmod(0o600)
        self._lock_file = open(f"{path}.lock", "w")  # noqa: SIM115 (held while the database is open)
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._unlock()
            raise StoreError(
                f"Another tau2-a2a serve uses {path} already. Give this one another --results-dir, or run "
                "replicas on one PostgreSQL database (--database postgresql://...)."
            ) from None

    def _migrate(self, engine: Engine) -> None:
        with engine.begin() as connection:
            metadata.create_all(connection)
            found = connection.execute(select(schema_version.c.version)).scalar()
            if found is None:
                connection.execute(schema_version.insert().values(version=SCHEMA_VERSION))
            elif found > SCHEMA_VERSION:
                raise StoreError(f"The database {redact_url(self.location)} was made by a newer tau2-a2a "
                                 f"(schema {found}, this one knows {SCHEMA_VERSION}). Upgrade tau2-a2a.")

    def _unlock(self) -> None:
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None
        self._unlock()

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        with self.engine.begin() as connection:
            yield connection

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        with self.engine.connect() as connection:
            yield connection


def record_of(row: Row[Any]) -> EvaluationRecord:
    """The record a row of the evaluations table holds."""
    return EvaluationRecord.from_json(json.loads(row.record), status=row.status)


def stored_json(record: EvaluationRecord) -> str:
    return json.dumps(record.stored())


@contextmanager
def database_reachable() -> Iterator[None]:
    """Inside, a database that does not answer is an EvaluationError saying so (what a caller is told)."""
    try:
        yield
    except SQLAlchemyError as error:
        raise EvaluationError(f"The service's database is unreachable ({type(error).__name__}); "
                              "try again in a moment.") from None
