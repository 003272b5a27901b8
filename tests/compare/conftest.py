"""The report tests' shared runs and browser: made once for the room's test modules."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.browser import Browser
from tests.support.report_runs import flaky_run, oracle_run


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory, oracle_url: str) -> dict[str, Path]:
    """Airline tasks 0, 1, 3 and 20, three trials: the oracle, and an agent failing in three ways
    (tests/support/report_runs.py)."""
    folder = tmp_path_factory.mktemp("report_runs")
    return {"oracle": oracle_run(oracle_url, folder), "flaky": flaky_run(folder)}


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """One headless Chromium for every page the tests open."""
    with Browser() as chromium:
        yield chromium
