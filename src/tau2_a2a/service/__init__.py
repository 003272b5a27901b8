"""The evaluation service: tau2-bench evaluations offered as an A2A agent (Google ADK).

    app.py          `tau2-a2a serve`: card, bearer auth, JSON-RPC (ADK's A2A executor)
    agent.py        the ADK agent: structured requests -> tools; text -> LlmAgent or help
    tools.py        the five tools as plain functions, with argument checks
    assessment.py   AgentBeats assessment requests: checks, tau2's defaults, shards
    result.py       an assessment's machine-readable result (result_schema.json)
    executor.py     ADK's A2A executor configured: the `Result` artifact, `rejected`
    evaluations.py  evaluation jobs: child processes, queue, limits, cancel, records on disk
    summary.py      metrics and text from tau2's results file
    catalog.py      domains, splits, tasks, tools (cached)
    vault.py        keeps a target's token out of every store
    settings.py     flags and TAU2_EVAL_* environment variables (the target policy: client/targets.py)
    client.py       calling the service with the a2a-sdk client
"""
