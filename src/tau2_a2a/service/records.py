"""What the service keeps of each evaluation: a record in its database and a private directory of files.

An evaluation's directory (ROOT/ev-0123456789ab, mode 0700) holds tau2's
results file (the run `results`, where `tau2 run` places it: see
`tau2bench.layout`), its protocol metrics and the child's log, each 0600:
results are the service's business, nobody else's. Records of the earlier file layout
(ev-*/evaluation.json) are imported into the database once.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Any

from tau2_a2a.service.spec import EvaluationSpec
from tau2_a2a.service.store import EvaluationStore
from tau2_a2a.tau2bench.layout import results_path

log = logging.getLogger("tau2_a2a.service")

ID_PATTERN = re.compile(r"^ev-[0-9a-f]{12}$")
PRIVATE_DIR, PRIVATE_FILE = 0o700, 0o600
RESULTS_NAME = "results"
RECORD_NAME = "evaluation.json"  # the file layout of earlier versions, imported once


class Status(str, Enum):
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"


TERMINAL = {Status.COMPLETED.value, Status.FAILED.value, Status.CANCELED.value}


def results_file(directory: Path) -> Path:
    """tau2's results file in an evaluation's directory (it may not exist yet): that of the run RESULTS_NAME
    there, as the child's run writes it (an evaluation of an earlier version: its file, where it is)."""
    return results_path(RESULTS_NAME, directory)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_record(evaluation_id: str, spec: EvaluationSpec, agent_auth: bool) -> dict[str, Any]:
    """The record of an evaluation just queued: the request as sent (no secret), nothing run yet."""
    return {
        "evaluation_id": evaluation_id,
        "status": Status.QUEUED.value,
        "domain": spec.domain,
        "agent_endpoint": spec.agent_endpoint,
        "request": spec.as_dict(),
        "total_simulations": spec.total_simulations,
        "agent_auth": agent_auth,
        "created_at": now(),
        "started_at": None,
        "finished_at": None,
        "error": None,
        "result": None,
    }


def import_file_records(root: Path, store: EvaluationStore) -> None:
    """Records of the earlier file layout (ev-*/evaluation.json), imported once."""
    known = store.ids()
    for path in sorted(root.glob(f"ev-*/{RECORD_NAME}")):
        try:
            record = json.loads(path.read_text())
            evaluation_id = record["evaluation_id"]
        except (OSError, ValueError, KeyError, TypeError) as error:
            log.warning("skipping unreadable evaluation record %s: %s", path, error)
            continue
        if evaluation_id not in known and ID_PATTERN.match(evaluation_id):
            active = record.get("status") not in TERMINAL
            # An unfinished one is owned by nobody alive: the take-over at start resumes it.
            store.insert(record, owner="imported" if active else None, lease_until=0.0 if active else None)
            log.info("imported evaluation record %s", path)
        path.rename(path.with_name(RECORD_NAME + ".imported"))
