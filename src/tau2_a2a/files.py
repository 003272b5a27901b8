"""A file written whole or not at all: results, metrics, outcomes and reports are read while they are written.

A reader (the service's report, a replica, `tau2-a2a report`) may open a file
at any moment, and a signal may stop its writer mid-write. Writing to a
temporary file beside it and renaming that over it leaves either the old file
or the new one, never half of either.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

PRIVATE_FILE = 0o600  # readable by this user only
SHARED_FILE = 0o644  # as open() makes a file (the umask applies)


def write_whole(path: Path, text: str, mode: int = SHARED_FILE) -> None:
    """Write `text` to `path` at once: a temporary file beside it (created with `mode`), then a rename."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
