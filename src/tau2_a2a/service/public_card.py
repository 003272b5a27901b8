"""The service's agent card: one skill per tool, with its argument schema and examples.

The card is public (no token needed to read it); when the service has a token,
the card declares the bearer scheme.
"""

from __future__ import annotations

import json

from a2a.types import AgentCard, AgentSkill, HTTPAuthSecurityScheme, SecurityRequirement, SecurityScheme, StringList

from tau2_a2a.protocol.cards import HTTP_BINDINGS, agent_card
from tau2_a2a.service.argument_policy import UserLLMPolicy
from tau2_a2a.service.jobs.limits import DEFAULT_LIMITS, Limits
from tau2_a2a.service.settings import SERVICE_TOKEN_ENV
from tau2_a2a.service.tool_specs import ALIASES, tool_specs

SERVICE_NAME = "tau2 evaluation service"
ADK_BINDINGS = ("JSONRPC",)  # what ADK's A2A app (`adk web --a2a`, to_a2a) serves
_NATURAL_EXAMPLES = {
    "list_domains": "Which tau2 domains can you evaluate an agent on?",
    "run_tau2_evaluation": "Evaluate the A2A agent at http://127.0.0.1:9100 on 5 airline tasks.",
    "get_evaluation": "Show me the results of my last evaluation.",
    "list_evaluations": "List the evaluations you ran.",
    "cancel_evaluation": "Cancel evaluation ev-0123456789ab.",
}


def service_card(url: str, limits: Limits = DEFAULT_LIMITS, auth: bool = False, grpc_url: str | None = None,
                 http_bindings: tuple[str, ...] = HTTP_BINDINGS, user_llms: UserLLMPolicy | None = None) -> AgentCard:
    """The card: one skill per tool with its JSON Schema and examples; a bearer scheme when auth is on.

    It declares `http_bindings` at `url` and gRPC at `grpc_url` (host:port), each for A2A 1.0 and 0.3.
    `user_llms` (a UserLLMPolicy; default tau2's user LLM only) is the enum of `user_llm`.
    """
    aliases = {tool: alias for alias, tool in ALIASES.items()}
    skills = []
    for name, spec in tool_specs(limits, user_llms or UserLLMPolicy()).items():
        alias = f" Alias: {aliases[name]}." if name in aliases else ""
        skills.append(AgentSkill(
            id=name,
            name=name,
            description=(f"{spec.description}{alias} Structured request: a data part "
                         f'{{"tool": "{name}", "arguments": {{...}}}}. '
                         f"Arguments (JSON Schema): {json.dumps(spec.parameters, sort_keys=True)}"),
            tags=["tau2", "evaluation"],
            examples=[json.dumps(spec.example_request()), _NATURAL_EXAMPLES[name]],
            input_modes=["application/json", "text/plain"],
            output_modes=["application/json", "text/plain"],
        ))
    card = agent_card(
        name=SERVICE_NAME,
        description=("Evaluates A2A agents with tau2-bench. Send a data part {\"tool\": ..., \"arguments\": ...} "
                     "to call a tool directly (no model needed), or text when a model is configured. "
                     "run_tau2_evaluation answers with a task that reports progress and ends with an "
                     "artifact holding the metrics."),
        url=url,
        skills=skills,
        streaming=True,
        grpc_url=grpc_url,
        http_bindings=http_bindings,
    )
    if auth:
        scheme = HTTPAuthSecurityScheme(
            scheme="bearer", description=f"The service's token (tau2-a2a serve --auth-token or ${SERVICE_TOKEN_ENV}).")
        card.security_schemes["bearer"].CopyFrom(SecurityScheme(http_auth_security_scheme=scheme))
        card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList()}))
    return card
