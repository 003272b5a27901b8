"""Results, metrics, outcomes and reports are written whole: a writer stopped mid-write leaves the last whole file."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from tau2_a2a.files import PRIVATE_FILE, write_whole

pytestmark = pytest.mark.any_tau2


def test_a_write_that_fails_midway_leaves_the_file_it_replaces_whole_and_nothing_beside_it(tmp_path: Path) -> None:
    path = tmp_path / "results_a2a_metrics.json"
    write_whole(path, json.dumps({"simulations": 3}))
    with pytest.raises(UnicodeEncodeError):  # raised while the file is written, as a signal's exception would be
        write_whole(path, '{"simulations": 4, "note": "\ud800"}')
    assert json.loads(path.read_text()) == {"simulations": 3}
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_a_private_file_is_readable_by_its_owner_only_from_the_start(tmp_path: Path) -> None:
    path = tmp_path / "outcome.json"
    write_whole(path, "{}", PRIVATE_FILE)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    write_whole(path, '{"a": 1}', PRIVATE_FILE)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and json.loads(path.read_text()) == {"a": 1}
