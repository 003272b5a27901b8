"""Building the service's app opens nothing and starts nothing; its lifespan does, and a start that fails leaves
nothing running (service/lifespan.py)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from starlette.applications import Starlette

from tau2_a2a.protocol.hosting import free_port
from tau2_a2a.service.app import build_app
from tau2_a2a.service.settings import ServiceSettings
from tests.support.processes import descendants
from tests.support.service import start_service


def running() -> tuple[set[str], set[int]]:
    """This process's threads (by name) and child processes."""
    return {thread.name for thread in threading.enumerate()}, descendants(os.getpid())


async def lifespan_start(app: Starlette) -> list[dict[str, Any]]:
    """The ASGI lifespan's startup, as uvicorn drives it; the messages the app sent."""
    sent: list[dict[str, Any]] = []
    messages: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    await messages.put({"type": "lifespan.startup"})

    async def send(message: Any) -> None:
        sent.append(message)

    await app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, messages.get, send)
    return sent


def test_importing_the_service_app_starts_no_thread() -> None:
    count = subprocess.run([sys.executable, "-c", "import threading, tau2_a2a.service.app; "
                            "print(threading.active_count())"], capture_output=True, text=True, timeout=300)
    assert count.stdout.strip() == "1", count.stderr[-2000:]


def test_building_the_app_opens_nothing_and_starts_nothing(tmp_path: Path) -> None:
    before = running()
    build_app(ServiceSettings(results_dir=tmp_path / "results"), f"http://127.0.0.1:{free_port()}")
    assert running() == before
    assert not (tmp_path / "results").exists()  # no database, no directory


def test_a_lifespan_whose_database_is_taken_leaves_nothing_running(tmp_path: Path) -> None:
    first = start_service(tmp_path)  # holds the SQLite file of tmp_path
    try:
        before = running()
        app = build_app(ServiceSettings(results_dir=tmp_path), f"http://127.0.0.1:{free_port()}")
        sent = asyncio.run(lifespan_start(app))
        assert sent == [{"type": "lifespan.startup.failed", "message": ""}]
        assert str(app.state.resources.start_error) == (
            f"Another tau2-a2a serve uses {tmp_path / 'service.sqlite'} already. Give this one another "
            "--results-dir, or run replicas on one PostgreSQL database (--database postgresql://...).")
        assert running() == before
    finally:
        first.stop()


def test_a_lifespan_whose_database_cannot_be_reached_leaves_nothing_running(tmp_path: Path) -> None:
    before = running()
    unreachable = f"postgresql://tau2@127.0.0.1:{free_port()}/evaluations"
    app = build_app(ServiceSettings(results_dir=tmp_path / "results", database=unreachable),
                    f"http://127.0.0.1:{free_port()}")
    sent = asyncio.run(lifespan_start(app))
    assert sent == [{"type": "lifespan.startup.failed", "message": ""}]
    assert str(app.state.resources.start_error).startswith(f"Cannot use the database {unreachable}: ")
    assert running() == before
