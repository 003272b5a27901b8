"""The seam between tau2-a2a and tau2-bench: every use of tau2's internals is in this package.

Only `imports` imports tau2, and `distribution` gives its names, with the
half of the seam for the installed distribution (`nvidia` or `upstream`,
each a `seam.Tau2Seam`); the other modules build on those names: the
agent types and the user tau2-a2a registers (`a2a_agent`, `oracle_agent`,
`scripted_user`), the orchestrator that turns an A2A failure into an
`agent_error` ending, atomic results files, Ctrl-C handling inside tau2's
thread pool, environments built from databases read once per process,
tau2's run itself (`runs`), and what each results file records of the tau2
and task set it measured (`provenance`).

Importing it changes nothing in tau2 nor in the process: tau2-a2a's parts
are put in place by `hooks.tau2_hooks()`, which a run enters.
"""
