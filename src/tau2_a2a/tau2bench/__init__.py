"""The seam between tau2-a2a and tau2-bench: every use of tau2's internals is in this package.

Only `distribution` imports tau2 (with `nvidia` or `upstream`, whichever
distribution is installed: what differs between their APIs is there); the
other modules build on its names: the
agent types and the user tau2-a2a registers (`a2a_agent`, `oracle_agent`,
`scripted_user`), the orchestrator that turns an A2A failure into an
`agent_error` ending, atomic results files, Ctrl-C handling inside tau2's
thread pool, environments built from databases read once per process,
tau2's run itself (`runs`), and what each results file records of the tau2
and task set it measured (`provenance`).

Importing this package registers the agents and the user with tau2's
registry, once per process: a Ray worker that unpickles anything of ours gets
them too.
"""

from __future__ import annotations

from tau2_a2a.tau2bench.registration import register

register()

__all__ = ["register"]
