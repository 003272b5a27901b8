"""The target's token, moved out of a request before anything stores it."""

from __future__ import annotations

from a2a.helpers import new_data_part, new_text_part
from a2a.types import Message, Role
from google.genai import types
from google.protobuf.json_format import MessageToDict

from tau2_a2a.service.vault import TokenVault, scrub_a2a_message, scrub_genai_content


def test_target_token_is_moved_out_of_requests_before_anything_stores_them() -> None:
    vault = TokenVault()
    message = Message(role=Role.ROLE_USER, message_id="m", parts=[
        new_text_part("go"), new_data_part({"tool": "run_tau2_evaluation",
                                            "arguments": {"domain": "airline", "agent_auth_token": "tok-1"}})])
    scrub_a2a_message(message, vault)
    arguments = MessageToDict(message.parts[1].data)["arguments"]
    assert "tok-1" not in str(message) and set(arguments) == {"domain", "agent_auth_token_ref"}
    assert vault.take(arguments["agent_auth_token_ref"]) == "tok-1"
    assert vault.take(arguments["agent_auth_token_ref"]) is None  # one use only

    blob = b'<a2a_datapart_json>{"tool": "RunTau2Evaluation", "arguments": {"agent_auth_token": "tok-2"}}' \
           b"</a2a_datapart_json>"
    content = types.Content(role="user", parts=[types.Part(inline_data=types.Blob(mime_type="text/plain",
                                                                                  data=blob))])
    assert scrub_genai_content(content, vault)
    assert b"tok-2" not in content.parts[0].inline_data.data
