"""Read-only tool calls answered with a Message: no A2A task, no database write.

`list_domains`, `get_evaluation` and `list_evaluations` change nothing, so a
call to one of them needs no task to follow. Through the agent's path each
call became a Task that a2a-sdk keeps in the database: four or five write
transactions (submitted, working, artifact, completed) and the ADK runner, for
an answer the client reads once. Pollers call `get_evaluation` every second or
so, which made the service's database the bottleneck of its own status page.
A2A lets an agent answer a stateless request with a Message, so these calls
get one: the same text and data part the task's artifact would hold.

Only a message that is exactly one structured read-only call, outside any
conversation (no task id, no context id), takes this path. A call in a context
goes to the agent, which remembers the evaluation for "show me the results"
follow-ups. A call that fails (a bad argument, an unknown evaluation) goes to
the agent too, so it fails its task with the same message as before.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING

from a2a.utils.errors import InternalError
from google.protobuf.json_format import MessageToDict

from tau2_a2a.service.jobs.errors import EvaluationError
from tau2_a2a.service.tool_specs import ALIASES, GET, LIST, LIST_DOMAINS
from tau2_a2a.service.tools import EvaluationTools, ToolError, describe
from tau2_a2a.service.wire import JsonObject

if TYPE_CHECKING:
    from a2a.types import Message

READ_ONLY = frozenset({LIST_DOMAINS, GET, LIST})
log = logging.getLogger("tau2_a2a.service")


def read_only_call(message: Message) -> tuple[str, JsonObject] | None:
    """The read-only tool and arguments `message` asks for, when it is one such call outside a conversation."""
    if message.task_id or message.context_id or len(message.parts) != 1:
        return None
    part = message.parts[0]
    if part.WhichOneof("content") != "data":
        return None
    request = MessageToDict(part.data)
    if not isinstance(request, dict) or set(request) - {"tool", "arguments"}:
        return None
    tool, arguments = request.get("tool"), request.get("arguments", {})
    if not isinstance(tool, str) or ALIASES.get(tool, tool) not in READ_ONLY or not isinstance(arguments, dict):
        return None
    return tool, arguments


async def read_only_reply(tools: EvaluationTools, message: Message) -> Message | None:
    """The Message answering a read-only call; None when the agent should answer (see the module doc)."""
    from a2a.helpers import new_data_part, new_text_part
    from a2a.types import Message, Role

    call = read_only_call(message)
    if call is None:
        return None
    tool, arguments = call
    try:
        result = await asyncio.to_thread(tools.call, tool, arguments)
    except (ToolError, EvaluationError):
        return None
    except Exception as error:  # a fault of the service: logged whole here, named in one line to the client
        log.exception("read-only call %s failed", tool)
        raise InternalError(f"{tool} failed inside the service ({type(error).__name__}); the operator finds "
                            "the details in the service's log.") from None
    return Message(role=Role.ROLE_AGENT, message_id=str(uuid.uuid4()),
                   parts=[new_text_part(describe(ALIASES.get(tool, tool), result)), new_data_part(result)])
