"""LiteLLM's bundled cost map, asked for before LiteLLM is imported.

LiteLLM fetches its table of model prices from the network when it is first
imported, unless LITELLM_LOCAL_MODEL_COST_MAP asks for the copy it ships with.
tau2-a2a prices tokens from that copy, so a run's costs do not depend on the
day or on the network, and importing LiteLLM sends no request. Each module
that imports LiteLLM calls `use_bundled_cost_map()` first; importing tau2-a2a
itself changes nothing in the environment, and a value already set is kept.
"""

from __future__ import annotations

import os
from typing import Any

COST_MAP_ENV = "LITELLM_LOCAL_MODEL_COST_MAP"
BUNDLED = "True"  # the value that asks for the bundled copy


def use_bundled_cost_map() -> None:
    """Ask LiteLLM for its bundled cost map, unless the environment already says which to use."""
    os.environ.setdefault(COST_MAP_ENV, BUNDLED)


def import_litellm() -> Any:
    """The `litellm` module, imported (the first time: seconds) with its bundled cost map."""
    use_bundled_cost_map()
    import litellm

    return litellm
