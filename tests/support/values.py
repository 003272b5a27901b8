"""Values compared with their types: 100 and 100.0 differ to tau2's database hash."""

from __future__ import annotations

from typing import Any


def typed(value: Any) -> Any:
    """A value with its Python types spelled out, so 100 and 100.0 compare unequal."""
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [typed(v) for v in value]
    return (type(value).__name__, value)


def as_wire(value: Any) -> Any:
    """What a data part does to numbers: every one arrives as a double."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, dict):
        return {k: as_wire(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_wire(v) for v in value]
    return value
