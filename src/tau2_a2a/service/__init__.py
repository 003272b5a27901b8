"""The evaluation service: tau2-bench evaluations offered as an A2A agent (a2a-sdk; Google ADK for words).

    app.py              the A2A app: the service's executor, every binding, A2A tasks in the database
    lifespan.py         what the app opens and starts (database, scheduler, task tables), in its lifespan
    public_card.py      the agent card: one skill per tool, with its schema and examples
    auth.py             the service's bearer token on every binding (the card stays public)
    handler.py          a2a-sdk's request handler, plus: each message read once into a ServiceCall,
                        read-only calls answered with a Message, tasks continued after a restart
    call.py             ServiceCall: a tool call, an assessment, text or a refusal, read once (cut, secrets out)
    executor.py         the a2a-sdk AgentExecutor: a ServiceCall -> the tools, through TaskUpdater (`Result`,
                        `rejected`); text -> ADK when a model is configured, else help
    follow.py           an evaluation followed to its end: progress updates, then its ending
    evaluator_agent.py  the ADK agent: text -> LlmAgent (offered the tools' own schemas); under
                        `adk web|api_server --a2a`, the whole front
    tool_specs.py       the five tools as the card shows them: names, schemas, examples
    tools.py            the five tools as plain functions (JSON in, JSON out)
    request.py          EvaluationRequest: run_tau2_evaluation's arguments, declared once (schema, checks,
                        the RunSettings it makes)
    reads.py            read-only tool calls answered at once (no task, no write)
    assessment.py       AgentBeats assessment requests: checks, tau2's defaults, shards
    result.py           an assessment's machine-readable result (result_schema.json)
    jobs/               an evaluation's life: its typed record, the store and the queue in one database,
                        the scheduler, the supervisor of its child process, the run's outcome (jobs/__init__.py)
    summary.py          metrics and text from tau2's results file
    report.py           each evaluation's HTML report
    catalog.py          domains, splits, tasks, tools (cached)
    vault.py            keeps a target's token out of every store
    argument_policy.py  which arguments a caller may pass (the user LLM and its sampling parameters);
                        what a request may leave in the stores
    request_limit.py    request bodies over the limit refused before they are read whole
    settings.py         TAU2_EVAL_* environment variables (the flags: cli/serve.py; the target
                        policy: client/targets.py)
    caller.py           the caller's side: calling the service with the a2a-sdk client
    wire.py             JsonObject: JSON as it crosses the service's edges
"""
