"""What tau2 offers to evaluate: domains, their task splits, tasks and tools.

Loading a domain builds its environment (banking_knowledge's tools are read
from its toolkit instead: see `domain_tool_names`) and reads its task files
(seconds for telecom), so everything here is computed once per process and
cached. tau2 itself is imported by the first call, not by importing this module:
the service's app imports it, and starts before any domain is asked for.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import cache

from tau2_a2a.service.wire import JsonObject

DEFAULT_SPLIT = "base"  # what `tau2 run` uses when no split is named

# dummy_user only works in tau2's solo mode, which an A2A agent never runs in.
_UNUSABLE_USERS = {"dummy_user"}


@dataclass(frozen=True)
class DomainInfo:
    name: str
    task_count: int
    splits: dict[str, int]
    tools: list[str]
    user_tools: list[str]

    def as_dict(self) -> JsonObject:
        return {
            "domain": self.name,
            "task_count": self.task_count,
            "task_splits": self.splits,
            "default_split": DEFAULT_SPLIT if DEFAULT_SPLIT in self.splits else None,
            "tools": self.tools,
            "user_tools": self.user_tools,
        }


_lock = threading.Lock()


def domain_names() -> list[str]:
    from tau2_a2a.tau2bench.seam.distribution import registry

    return list(registry.get_domains())


def user_names() -> list[str]:
    """tau2's users and tau2-a2a's scripted user (registered first), less those an A2A agent cannot meet."""
    from tau2_a2a.tau2bench.seam.distribution import registry
    from tau2_a2a.tau2bench.seam.hooks import register

    register()
    return [u for u in registry.get_users() if u not in _UNUSABLE_USERS]


@cache
def _splits(domain: str) -> dict[str, list[str]]:
    from tau2_a2a.tau2bench.seam.distribution import load_task_splits

    return load_task_splits(domain) or {}


@cache
def _task_ids(domain: str, split: str | None) -> tuple[str, ...]:
    from tau2_a2a.tau2bench.seam.distribution import load_tasks

    return tuple(task.id for task in load_tasks(domain, task_split_name=split))


def splits(domain: str) -> dict[str, list[str]]:
    with _lock:
        return _splits(domain)


def task_ids(domain: str, split: str | None) -> tuple[str, ...]:
    """The ids of a domain's tasks in `split` (None: the domain's own default)."""
    with _lock:
        if split is None and DEFAULT_SPLIT in _splits(domain):
            split = DEFAULT_SPLIT
        return _task_ids(domain, split if split in _splits(domain) else None)


@cache
def _domain_info(domain: str) -> DomainInfo:
    from tau2_a2a.tau2bench.seam.distribution import domain_tool_names

    tools, user_tools = domain_tool_names(domain)
    split_map = _splits(domain)
    default = DEFAULT_SPLIT if DEFAULT_SPLIT in split_map else None
    return DomainInfo(
        name=domain,
        task_count=len(_task_ids(domain, default)),
        splits={name: len(ids) for name, ids in split_map.items()},
        tools=tools,
        user_tools=user_tools,
    )


def domains() -> list[DomainInfo]:
    """Every registered domain with its task count (default split), splits and tool names."""
    with _lock:
        return [_domain_info(name) for name in domain_names()]
