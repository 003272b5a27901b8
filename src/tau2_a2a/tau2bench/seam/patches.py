"""An attribute of tau2's replaced for a while, and put back: how tau2-a2a's parts reach inside tau2.

Nothing is replaced at import: `hooks.tau2_hooks()` applies the patches
the seam and the parts give, and restores what was there before.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

_ABSENT = object()


@dataclass
class Patch:
    """`target.name` set to `value` while applied; `restore` puts back what `target` itself had there (or removes
    it, so that what it inherits shows again)."""

    target: object  # a module or class of tau2's
    name: str
    value: object
    _before: object = field(default=_ABSENT, init=False, repr=False)

    def apply(self) -> None:
        self._before = vars(self.target).get(self.name, _ABSENT)  # a class's own (a staticmethod as such)
        setattr(self.target, self.name, self.value)

    def restore(self) -> None:
        if self._before is _ABSENT:
            delattr(self.target, self.name)
        else:
            setattr(self.target, self.name, self._before)
        self._before = _ABSENT


def apply_all(patches: list[Patch]) -> list[Patch]:
    """Apply `patches` in order; what to restore, in reverse order."""
    for patch in patches:
        patch.apply()
    return list(reversed(patches))


def restore_all(applied: list[Patch]) -> None:
    for patch in applied:
        patch.restore()


@contextmanager
def applied(patches: list[Patch]) -> Iterator[None]:
    """`patches` applied while inside."""
    undo = apply_all(patches)
    try:
        yield
    finally:
        restore_all(undo)
