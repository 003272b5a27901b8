"""A run started by the evaluation service ends when the service process ends.

The service resumes an unfinished evaluation by starting its run again on the
same results file. A run left behind by a killed service would then be a
second writer of that file, so the service names itself in TAU2_A2A_EXIT_WITH
and the run stops (with its process group: scoring helpers too) as soon as that
process is gone. Every results file write is atomic, so stopping loses only
the simulations in flight, which the resumed run redoes.
"""

from __future__ import annotations

import os
import signal
import threading

EXIT_WITH_ENV = "TAU2_A2A_EXIT_WITH"
_CHECK_SECONDS = 0.25


def exit_with_parent() -> None:
    """When TAU2_A2A_EXIT_WITH names a pid, stop this process group once that process is gone."""
    raw = os.environ.get(EXIT_WITH_ENV, "").strip()
    if not raw.isdigit():
        return
    parent = int(raw)

    def watch() -> None:
        while os.getppid() == parent:
            threading.Event().wait(_CHECK_SECONDS)
        os.killpg(os.getpgrp(), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True, name="exit-with-parent").start()
