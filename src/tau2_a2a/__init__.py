"""tau2-a2a: evaluate any A2A agent with tau2-bench, and offer tau2 evaluations over A2A.

The package's rooms: `protocol` (the A2A forms of tau2's turns), `client`
(speaking A2A to the agent under test), `tau2bench` (the one seam to tau2),
`runner` (a run, in one process or on Ray), `service` (tau2 evaluations as an
A2A service), `compare` (reports), `reference` (reference A2A agents) and
`cli` (the command line). `tau2_a2a.api` is the Python entry point.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
