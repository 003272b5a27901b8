"""Keep the target's bearer token, and any secret a refused request carried, out of every store.

A structured request may carry `agent_auth_token`. Before anything stores the
message (the A2A task store keeps a task's history; ADK keeps the session's
events, in SQLite under `adk api_server` by default), the token is moved into
this in-memory vault and the message keeps only a one-time reference,
`agent_auth_token_ref`. `run_tau2_evaluation` takes the token back out; the
evaluation's process gets it on its stdin (jobs/child.py), never in its
environment or command line. Unused references expire.
The same pass removes the values the service refuses and must not keep (an
`api_key` argument, unknown `user_llm_args`, a password in an endpoint URL;
see argument_policy.py), so a refused request leaves no secret in a store either.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from typing import TYPE_CHECKING

from tau2_a2a.service.request import TOKEN_ARGUMENT
from tau2_a2a.service.tool_specs import REFERENCE_ARGUMENT
from tau2_a2a.service.wire import JsonObject

if TYPE_CHECKING:
    from a2a.types import Message, Part
    from google.adk.agents.invocation_context import InvocationContext
    from google.adk.plugins.base_plugin import BasePlugin
    from google.genai import types

DATA_PART_START = b"<a2a_datapart_json>"
DATA_PART_END = b"</a2a_datapart_json>"


class TokenVault:
    """One-time references to tokens, in memory only, expiring after `ttl_seconds`."""

    def __init__(self, ttl_seconds: float = 600.0) -> None:
        self.ttl_seconds = ttl_seconds
        self._tokens: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def put(self, token: str) -> str:
        reference = f"vault-{secrets.token_hex(12)}"
        now = time.monotonic()
        with self._lock:
            self._tokens = {r: (t, at) for r, (t, at) in self._tokens.items() if now - at < self.ttl_seconds}
            self._tokens[reference] = (token, now)
        return reference

    def take(self, reference: str) -> str | None:
        with self._lock:
            entry = self._tokens.pop(reference, None)
        if entry is None or time.monotonic() - entry[1] >= self.ttl_seconds:
            return None
        return entry[0]


vault = TokenVault()


def scrub_request(request: object, store: TokenVault = vault) -> bool:
    """In place, for a structured request dict (a tool call or an assessment): `arguments.agent_auth_token`
    becomes a reference, and what the service would refuse and must not keep is removed
    (argument_policy.py). Whether anything changed."""
    from tau2_a2a.service.argument_policy import scrub_arguments, scrub_assessment
    from tau2_a2a.service.assessment import CONFIG_KEYS, is_assessment
    from tau2_a2a.service.tool_specs import accepted_arguments

    if not isinstance(request, dict):
        return False
    if is_assessment(request):
        return scrub_assessment(request, CONFIG_KEYS)
    arguments = request.get("arguments")
    if not isinstance(arguments, dict):
        return False
    changed = False
    if TOKEN_ARGUMENT in arguments:
        token = arguments.pop(TOKEN_ARGUMENT)
        if isinstance(token, str) and token:
            arguments[REFERENCE_ARGUMENT] = store.put(token)
        changed = True
    return scrub_arguments(arguments, accepted_arguments(request.get("tool"))) or changed


def _scrub_text(text: str, store: TokenVault) -> tuple[JsonObject | None, str | None]:
    """The assessment a text holds as JSON, scrubbed, and the text to keep when scrubbing changed it."""
    from tau2_a2a.service.assessment import from_text

    request = from_text(text)
    if request is None:
        return None, None
    return request, json.dumps(request) if scrub_request(request, store) else None


def scrub_a2a_part(part: Part, store: TokenVault = vault) -> object | None:
    """In place, for one part of an a2a-sdk Message: its secrets moved out (a data part's token becomes a
    reference). The structured request the part holds, read once: a data part's value, an assessment sent as
    JSON text, or None. ValueError for a data part that has no JSON form (Infinity, NaN)."""
    from google.protobuf.json_format import MessageToDict, ParseDict

    if part.HasField("text"):
        request, scrubbed = _scrub_text(part.text, store)
        if scrubbed is not None:
            part.text = scrubbed
        return request
    if not part.HasField("data"):
        return None
    data = MessageToDict(part.data)
    if scrub_request(data, store):
        part.data.Clear()
        ParseDict(data, part.data)
    return data


def scrub_a2a_message(message: Message, store: TokenVault = vault) -> None:
    """In place, for an a2a-sdk Message: every part's secrets moved out (see scrub_a2a_part)."""
    for part in message.parts:
        scrub_a2a_part(part, store)


def genai_request(part: types.Part) -> object | None:
    """The structured request an ADK part holds as a tagged inline blob (ADK's form of an A2A data part);
    None for any other part; ValueError for a blob that is not JSON."""
    blob = part.inline_data
    data = blob.data if blob is not None else None
    if not data or not data.startswith(DATA_PART_START) or not data.endswith(DATA_PART_END):
        return None
    return json.loads(data[len(DATA_PART_START):-len(DATA_PART_END)])


def scrub_genai_content(content: types.Content | None, store: TokenVault = vault) -> bool:
    """In place, for ADK content (under `adk web|api_server`): data parts arrive as tagged inline blobs."""
    changed = False
    for part in (content.parts if content is not None else None) or []:
        scrubbed = _scrub_text(part.text, store)[1] if part.text else None
        if scrubbed is not None:
            part.text = scrubbed
            changed = True
        try:
            request = genai_request(part)
        except ValueError:
            continue
        if part.inline_data is not None and request is not None and scrub_request(request, store):
            part.inline_data.data = DATA_PART_START + json.dumps(request).encode() + DATA_PART_END
            changed = True
    return changed


def adk_plugin(store: TokenVault = vault) -> BasePlugin:
    """An ADK plugin that scrubs the user message before the runner stores it."""
    from google.adk.plugins.base_plugin import BasePlugin

    class TokenScrubPlugin(BasePlugin):
        async def on_user_message_callback(self, *, invocation_context: InvocationContext,
                                           user_message: types.Content) -> types.Content | None:
            return user_message if scrub_genai_content(user_message, store) else None

    return TokenScrubPlugin(name="tau2_eval_token_scrub")
