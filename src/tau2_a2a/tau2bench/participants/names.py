"""The name the A2A agent is registered under in tau2's registry, importable without tau2 (the settings and the
command line's --help name it; registering it imports tau2)."""

from __future__ import annotations

AGENT_NAME = "a2a_agent"
