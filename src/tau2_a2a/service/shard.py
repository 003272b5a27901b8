"""One shard of an evaluation's task selection: how AgentBeats spreads one assessment over parallel requests."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count`: every `count`-th task of the selection, from the `index`-th."""

    index: int = 0
    count: int = 1

    def take(self, task_ids: list[str]) -> list[str]:
        """This shard's tasks, in selection order; the shards of a selection are disjoint and cover it."""
        return task_ids[self.index::self.count]
