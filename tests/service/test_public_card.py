"""The service's card: a skill per tool, its schemas and examples, never a secret; adk_agents' copy."""

from __future__ import annotations

import json

import pytest
from google.protobuf.json_format import MessageToDict

from tau2_a2a.protocol.cards import card_json
from tau2_a2a.service.jobs.limits import Limits
from tau2_a2a.service.public_card import ADK_BINDINGS, service_card
from tau2_a2a.tau2bench.seam.distribution import DISTRIBUTION, UPSTREAM
from tests.support.distributions import structured, with_installed_tau2
from tests.support.paths import REPO


def test_card_has_one_skill_per_tool_with_schema_and_example_and_never_a_secret() -> None:
    secret = "service-secret-123"
    card = service_card("http://127.0.0.1:9200", Limits(), auth=True)
    assert [s.id for s in card.skills] == ["list_domains", "run_tau2_evaluation", "get_evaluation",
                                           "list_evaluations", "cancel_evaluation"]
    run = card.skills[1]
    schema = json.loads(run.description.split("Arguments (JSON Schema): ", 1)[1])
    assert set(schema["required"]) == {"domain", "agent_endpoint"} and "agent_auth_token" in schema["properties"]
    assert json.loads(run.examples[0])["tool"] == "run_tau2_evaluation"
    assert "RunTau2Evaluation" in run.description and "ListDomains" in card.skills[0].description
    served = json.dumps(card_json(card))
    assert secret not in served
    assert MessageToDict(card.security_schemes["bearer"]) == {"httpAuthSecurityScheme": {
        "scheme": "bearer", "description": "The service's token (tau2-a2a serve --auth-token or "
                                           "$TAU2_EVAL_AUTH_TOKEN)."}}
    assert not service_card("http://x:1", Limits(), auth=False).security_schemes


@pytest.mark.nvidia
def test_adk_agents_card_is_the_generated_card() -> None:
    committed = json.loads((REPO / "adk_agents" / "tau2_eval" / "agent.json").read_text())
    url = committed["supportedInterfaces"][0]["url"]
    assert url.endswith("/a2a/tau2_eval")
    generated = card_json(service_card(url, Limits(), http_bindings=ADK_BINDINGS))  # ADK serves JSON-RPC
    assert with_installed_tau2(committed) == structured(generated)
    if DISTRIBUTION == UPSTREAM:  # the card is generated on the default distribution: there it is the same JSON
        assert committed == generated
