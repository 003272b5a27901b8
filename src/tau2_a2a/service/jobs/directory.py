"""An evaluation's private directory of files, and the records of the earlier file layout.

An evaluation's directory (ROOT/ev-0123456789ab, mode 0700) holds tau2's
results file, its protocol metrics, the run's outcome and the child's log,
each 0600: results are the service's business, nobody else's. Records of the
earlier file layout (ev-*/evaluation.json) are imported into the database once.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from tau2_a2a.runner.outcome_file import OUTCOME_SUFFIX
from tau2_a2a.service.jobs.evaluation import ID_PATTERN, TERMINAL, EvaluationRecord
from tau2_a2a.service.jobs.interfaces import RecordStore
from tau2_a2a.tau2bench.run.layout import results_path

log = logging.getLogger("tau2_a2a.service")

PRIVATE_DIR = 0o700
RESULTS_NAME = "results"
CHILD_LOG = "child.log"
RECORD_NAME = "evaluation.json"  # the file layout of earlier versions, imported once


def results_file(directory: Path) -> Path:
    """tau2's results file in an evaluation's directory (it may not exist yet): that of the run RESULTS_NAME
    there, as the child's run writes it (an evaluation of an earlier version: its file, where it is)."""
    return results_path(RESULTS_NAME, directory)


def outcome_file(directory: Path) -> Path:
    """The outcome the evaluation's run wrote when it ended (it may not exist): in the evaluation's directory,
    which exists before the run starts, wherever the installed tau2 puts the results."""
    return directory / f"{RESULTS_NAME}{OUTCOME_SUFFIX}"


def make_private(root: Path) -> None:
    """`root`, made if need be, readable by the service's user only (unless another user owns it)."""
    root.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    try:  # results and the database are the service's business, nobody else's
        root.chmod(PRIVATE_DIR)
    except OSError as error:  # a directory another user owns (a shared mount): its owner decides
        log.warning("results directory %s keeps its mode (%s)", root, error.strerror)


def import_file_records(root: Path, store: RecordStore) -> None:
    """Records of the earlier file layout (ev-*/evaluation.json), imported once."""
    known = store.ids()
    for path in sorted(root.glob(f"ev-*/{RECORD_NAME}")):
        try:
            data = json.loads(path.read_text())
            record = EvaluationRecord.from_json(data, status=data["status"])
        except (OSError, ValueError, KeyError, TypeError) as error:
            log.warning("skipping unreadable evaluation record %s: %s", path, error)
            continue
        if record.evaluation_id not in known and ID_PATTERN.match(record.evaluation_id):
            active = record.status not in TERMINAL
            # An unfinished one is owned by nobody alive: the take-over at start resumes it.
            store.insert(record, held_by="imported" if active else None, lease_until=0.0 if active else None)
            log.info("imported evaluation record %s", path)
        path.rename(path.with_name(RECORD_NAME + ".imported"))
