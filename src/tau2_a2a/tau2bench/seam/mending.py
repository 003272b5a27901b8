"""Whether this process is tau2-a2a's own, so that what importing tau2 does to it is undone once tau2 is in.

A command of tau2-a2a's imports tau2 only when it needs it (a run, the
oracle, the service), if at all. It says at its start that the process is
its own; `distribution` then mends the process as it imports tau2 (see
`mend_import_effects` in each half of the seam), or at once if tau2 is in
already. A library caller's process is never touched.
"""

from __future__ import annotations

import sys

_DISTRIBUTION = "tau2_a2a.tau2bench.seam.distribution"
_owned: list[bool] = []


def own_this_process() -> None:
    """This process is tau2-a2a's: mend what importing tau2 did (now, if it is imported, else when it is)."""
    _owned[:] = [True]
    distribution = sys.modules.get(_DISTRIBUTION)
    if distribution is not None and hasattr(distribution, "mend_import_effects"):
        distribution.mend_import_effects()


def owned() -> bool:
    """Whether a command of tau2-a2a's said this process is its own."""
    return bool(_owned)
