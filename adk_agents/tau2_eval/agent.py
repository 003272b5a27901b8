"""The tau2 evaluation service as an ADK app (`adk web --a2a adk_agents`, `adk api_server --a2a adk_agents`).

ADK's server imports this module with no flags, so settings come from
TAU2_EVAL_* environment variables (results directory, model, limits, allowed
targets; see docs/service.md). The A2A endpoint is /a2a/tau2_eval and its card
is agent.json beside this file (regenerate it with
`tau2-a2a serve --write-card adk_agents/tau2_eval/agent.json --card-url URL`).
"""

import atexit

from google.adk.apps import App

from tau2_a2a.service.evaluator_agent import build_agent
from tau2_a2a.service.settings import ServiceSettings
from tau2_a2a.service.vault import adk_plugin

root_agent = build_agent(ServiceSettings.from_env())
# ADK's server gives an agent no start and stop of its own: the evaluations' database opens, and the scheduler
# starts, as ADK imports this module.
root_agent.tools.manager.start()

# The plugin moves a target's bearer token out of the message before ADK stores the session.
app = App(name="tau2_eval", root_agent=root_agent, plugins=[adk_plugin()])

atexit.register(root_agent.tools.manager.close)
