"""Every name of tau2's that tau2-a2a uses, from here: the rest of `tau2bench` builds on these names and
never asks which distribution it runs on, and nothing outside `tau2bench` reaches tau2's internals.

`imports` (the one module that imports tau2) finds the installed
distribution and gives the names both share; the names and hooks whose API
differs come from `nvidia` or `upstream`, each a `protocol.Tau2Seam`.
"""

from __future__ import annotations

from tau2_a2a.tau2bench.seam.imports import *  # noqa: F403
from tau2_a2a.tau2bench.seam.imports import DISTRIBUTION, NVIDIA
from tau2_a2a.tau2bench.seam.imports import __all__ as _shared
from tau2_a2a.tau2bench.seam.mending import owned

if DISTRIBUTION == NVIDIA:
    from tau2_a2a.tau2bench.seam.nvidia import *  # noqa: F403
    from tau2_a2a.tau2bench.seam.nvidia import __all__ as _differing
else:
    from tau2_a2a.tau2bench.seam.upstream import *  # noqa: F403
    from tau2_a2a.tau2bench.seam.upstream import __all__ as _differing

__all__ = [*_shared, *_differing]

if owned():  # a command of tau2-a2a's imported tau2 in its own process: undo what the import did to it
    mend_import_effects()  # noqa: F405
