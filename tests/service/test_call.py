"""A message read once into a ServiceCall (service/call.py): what it asks for, its secrets out of what is kept."""

from __future__ import annotations

import json

from a2a.helpers import new_data_part, new_text_part
from a2a.types import Message, Role
from google.protobuf.json_format import MessageToDict

from tau2_a2a.service.assessment import parse
from tau2_a2a.service.call import AssessmentCall, Refusal, ServiceCall, TextCall, ToolCall, read_call
from tau2_a2a.service.request_limit import cut_message_refusal
from tau2_a2a.service.vault import TokenVault

LIMIT = 2**20


def message(*parts: object) -> Message:
    return Message(role=Role.ROLE_USER, message_id="m1", parts=[
        new_text_part(part) if isinstance(part, str) else new_data_part(part) for part in parts])


def test_a_tool_call_is_read_with_its_canonical_name_and_its_token_in_the_vault() -> None:
    vault = TokenVault()
    sent = message({"tool": "RunTau2Evaluation", "arguments": {"domain": "airline", "agent_auth_token": "s3cret"}})
    call = read_call(sent, LIMIT, vault)
    assert isinstance(call.request, ToolCall) and call.request.tool == "run_tau2_evaluation"
    assert isinstance(call.request.arguments, dict)
    reference = call.request.arguments["agent_auth_token_ref"]
    assert call.request.arguments == {"domain": "airline", "agent_auth_token_ref": reference}
    assert vault.take(reference) == "s3cret"
    assert "s3cret" not in str(sent)  # the message the task store keeps holds the reference only
    assert MessageToDict(sent.parts[0].data)["arguments"]["agent_auth_token_ref"] == reference
    assert (call.data_parts, call.request.only_call, call.resume) == (1, True, None)


def test_an_assessment_in_json_text_is_parsed() -> None:
    request = {"participants": {"agent": "http://127.0.0.1:9100"}, "config": {"domain": "airline"}}
    call = read_call(message(json.dumps(request)), LIMIT)
    assert call == ServiceCall(AssessmentCall(parse(request)))
    refused = read_call(message(json.dumps({**request, "config": {"domain": "airline", "num_tasks": 0}})), LIMIT)
    assert isinstance(refused.request, Refusal) and refused.request.rejected
    assert refused.request.reason.startswith("config.num_tasks")


def test_text_a_data_part_that_is_no_request_and_a_message_over_the_limit() -> None:
    assert read_call(message("hello", " there"), LIMIT).request == TextCall("hello\n there")
    assert read_call(message("hi", {"domain": "airline"}), LIMIT).request == Refusal(
        'A data part must be {"tool": "<name>", "arguments": {...}}; got domain.', rejected=False)
    big = message("x" * 5000)
    size = big.ByteSize()
    assert read_call(big, 4096).request == Refusal(cut_message_refusal({"bytes": size, "limit": 4096}))
    assert len(big.parts) == 1 and big.parts[0].text.endswith(f" cut: this message was {size} bytes]")


def test_a_continued_task_follows_its_evaluation() -> None:
    call = read_call(message({"tool": "list_domains"}), LIMIT)
    assert call.resumed("ev-0123456789ab") == ServiceCall(call.request, "ev-0123456789ab", 1)
