"""The evaluation service: tau2-bench evaluations offered as an A2A agent (Google ADK).

    app.py              the A2A app: ADK's A2A executor, every binding, A2A tasks in the database
    public_card.py      the agent card: one skill per tool, with its schema and examples
    auth.py             the service's bearer token on every binding (the card stays public)
    handler.py          a2a-sdk's request handler, plus: tokens out of the task store, read-only
                        calls answered with a Message, tasks continued after a restart
    evaluator_agent.py  the ADK agent: structured requests -> tools; text -> LlmAgent or help
    tool_specs.py       the five tools as the card shows them: names, schemas, examples
    tools.py            the five tools as plain functions, with argument checks
    reads.py            read-only tool calls answered at once (no task, no write)
    assessment.py       AgentBeats assessment requests: checks, tau2's defaults, shards
    result.py           an assessment's machine-readable result (result_schema.json)
    executor.py         ADK's A2A executor configured: the `Result` artifact, `rejected`
    evaluations.py      the evaluations: queue, limits, leases, replicas, cancel, resume
    spec.py             an evaluation request, checked and free of secrets
    records.py          an evaluation's record and its private directory; old records imported
    child.py            an evaluation's child process: started (start_child), lowered, stopped, read
    progress.py         progress and the final result, from tau2's results file
    store.py            the SQL database: records, queue, leases
    summary.py          metrics and text from tau2's results file
    report.py           each evaluation's HTML report
    catalog.py          domains, splits, tasks, tools (cached)
    vault.py            keeps a target's token out of every store
    credentials.py      the user LLMs callers may choose; what a request may leave in the stores
    request_limit.py    request bodies over the limit refused before they are read whole
    settings.py         TAU2_EVAL_* environment variables (the flags: cli/serve.py; the target
                        policy: client/targets.py)
    calls.py            calling the service with the a2a-sdk client
"""
