"""JSON as it crosses the service's edges: tool arguments and answers, A2A data parts, JSON Schemas, tau2's
results file. Its shape is its sender's (or a schema's); the service's own data is typed (jobs/evaluation.py,
request.py) and becomes JSON only here, at the edge."""

from __future__ import annotations

from typing import Any

JsonObject = dict[str, Any]
