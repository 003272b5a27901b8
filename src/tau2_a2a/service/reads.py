"""Read-only tool calls answered with a Message: no A2A task, no database write.

`list_domains`, `get_evaluation` and `list_evaluations` change nothing, so a
call to one of them needs no task to follow. Through the executor each call
becomes a Task that a2a-sdk keeps in the database: four or five write
transactions (submitted, working, artifact, completed), for an answer the
client reads once. Pollers call `get_evaluation` every second or
so, which made the service's database the bottleneck of its own status page.
A2A lets an agent answer a stateless request with a Message, so these calls
get one: the same text and data part the task's artifact would hold.

Only a message that is exactly one structured read-only call, outside any
conversation (no task id, no context id), takes this path. A call in a context
goes to the executor, which remembers the evaluation for "show me the results"
follow-ups. A call that fails (a bad argument, an unknown evaluation) goes to
the executor too, so it fails its task with the same message as before.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING

from a2a.utils.errors import InternalError

from tau2_a2a.service.call import ServiceCall, ToolCall
from tau2_a2a.service.jobs.errors import EvaluationError
from tau2_a2a.service.tool_specs import GET, LIST, LIST_DOMAINS
from tau2_a2a.service.tools import EvaluationTools, ToolError, describe

if TYPE_CHECKING:
    from a2a.types import Message

READ_ONLY = frozenset({LIST_DOMAINS, GET, LIST})
log = logging.getLogger("tau2_a2a.service")


def read_only_call(message: Message, call: ServiceCall) -> ToolCall | None:
    """The read-only tool call `message` makes, when it is one such call outside a conversation."""
    request = call.request
    if message.task_id or message.context_id or len(message.parts) != 1 or call.data_parts != 1:
        return None
    if not isinstance(request, ToolCall) or not request.only_call or not isinstance(request.tool, str) \
            or request.tool not in READ_ONLY:
        return None
    return request if request.arguments is None or isinstance(request.arguments, dict) else None


async def read_only_reply(tools: EvaluationTools, message: Message, call: ServiceCall) -> Message | None:
    """The Message answering a read-only call; None when the executor should answer (see the module doc)."""
    from a2a.helpers import new_data_part, new_text_part
    from a2a.types import Message, Role

    read = read_only_call(message, call)
    if read is None:
        return None
    tool = str(read.tool)
    try:
        result = await asyncio.to_thread(tools.call, tool, read.arguments)
    except (ToolError, EvaluationError):
        return None
    except Exception as error:  # a fault of the service: logged whole here, named in one line to the client
        log.exception("read-only call %s failed", tool)
        raise InternalError(f"{tool} failed inside the service ({type(error).__name__}); the operator finds "
                            "the details in the service's log.") from None
    return Message(role=Role.ROLE_AGENT, message_id=str(uuid.uuid4()),
                   parts=[new_text_part(describe(tool, result)), new_data_part(result)])
